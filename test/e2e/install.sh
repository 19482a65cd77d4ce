#!/usr/bin/env bash
# shellcheck disable=SC2015,SC2001  # ok/notok always succeed: A && ok || notok is safe
# `make install` into a scratch DESTDIR: checks the installed tree, then builds
# a small DAT consumer against the installed headers and library (through
# pkg-config) and runs it against softdat-lo. Then "install anywhere": two
# real installs under two different PREFIXes (no DESTDIR), each used as a
# user would, with LD_LIBRARY_PATH and DAT_OVERRIDE unset: the installed
# softdat-info and a program built with `pkg-config dat2` open softdat-lo
# through that PREFIX's own libdat2, dat.conf and provider.
# Installing with another PREFIX rebuilds libdat2 in $BUILD (the compiled-in
# fallback dat.conf follows PREFIX); the script puts the build's own PREFIX
# back at the end. Exit 0 pass, 77 skip, else fail.
set -u
SOFTDAT_TOP=${SOFTDAT_TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
BUILD=${BUILD:-$PWD/build}
PREFIX=/usr/local

if [ ! -f "$BUILD/lib/libdaplsoft.so.2" ] || [ ! -f "$BUILD/dat.conf" ]; then
    echo "skip - the provider is not built ($BUILD/lib/libdaplsoft.so.2, $BUILD/dat.conf)"
    exit 77
fi

fails=0
ok() { echo "ok - $*"; }
notok() { echo "not ok - $*"; fails=$((fails + 1)); }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/softdat-install.XXXXXX") || exit 1
orig_prefix=$(cat "$BUILD/stamp/prefix" 2>/dev/null || echo /usr/local)
mk() { # make with the caller's build tree; MAKEFLAGS of an enclosing make would leak
    env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -C "$SOFTDAT_TOP" BUILD="$BUILD" \
        SANITIZE="${SANITIZE:-}" "$@"
}
restore() {
    mk libs tools PREFIX="$orig_prefix" >"$tmp/restore.log" 2>&1 ||
        { echo "# could not rebuild $BUILD for PREFIX=$orig_prefix:"; tail -n 5 "$tmp/restore.log"; }
    rm -rf "$tmp"
}
trap restore EXIT
dest=$tmp/root
root=$dest$PREFIX

# The same build tree as the caller, so nothing is rebuilt; MAKEFLAGS from an
# enclosing `make check` would otherwise leak its jobserver and variables.
if mk PREFIX="$PREFIX" DESTDIR="$dest" install >"$tmp/install.log" 2>&1; then
    ok "make install DESTDIR=... PREFIX=$PREFIX"
else
    notok "make install failed:"
    tail -n 30 "$tmp/install.log" | sed 's/^/    /'
    exit 1
fi

# --- the installed tree
# The header names every DAT program includes (same set as OFA's libdapl-dev).
for h in dat.h dat_error.h dat_platform_specific.h dat_redirection.h dat_registry.h \
         dat_vendor_specific.h udat.h udat_config.h udat_redirection.h \
         udat_vendor_specific.h dat_ib_extensions.h; do
    [ -f "$root/include/dat2/$h" ] && ok "include/dat2/$h" || notok "missing include/dat2/$h"
done
[ -f "$root/lib/libdat2.so.2" ] && [ ! -L "$root/lib/libdat2.so.2" ] &&
    ok "lib/libdat2.so.2" || notok "lib/libdat2.so.2 missing or not a file"
[ "$(readlink "$root/lib/libdat2.so" 2>/dev/null)" = libdat2.so.2 ] &&
    ok "lib/libdat2.so -> libdat2.so.2" || notok "lib/libdat2.so is not a link to libdat2.so.2"
soname=$(readelf -d "$root/lib/libdat2.so.2" 2>/dev/null | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[ "$soname" = libdat2.so.2 ] && ok "libdat2 SONAME libdat2.so.2" || notok "libdat2 SONAME is '$soname'"
[ -f "$root/lib/libdaplsoft.so.2" ] && ok "lib/libdaplsoft.so.2" || notok "missing lib/libdaplsoft.so.2"
grep -Eq '^softdat-lo[[:space:]]' "$root/etc/dat.conf" 2>/dev/null &&
    ok "etc/dat.conf has softdat-lo" || notok "etc/dat.conf missing or without softdat-lo"
# The records name the installed provider by its final path (PREFIX, not DESTDIR).
n_abs=$(grep -Ec "^softdat-[^[:space:]]+[[:space:]].*[[:space:]]$PREFIX/lib/libdaplsoft\.so\.2[[:space:]]" "$root/etc/dat.conf")
n_all=$(grep -Ec '^softdat-' "$root/etc/dat.conf")
[ "$n_abs" -gt 0 ] && [ "$n_abs" = "$n_all" ] &&
    ok "etc/dat.conf: all $n_all records name $PREFIX/lib/libdaplsoft.so.2" ||
    notok "etc/dat.conf: $n_abs of $n_all records name $PREFIX/lib/libdaplsoft.so.2"
grep -q -- "-Wl,-rpath,\${libdir}" "$root/lib/pkgconfig/dat2.pc" &&
    ok "dat2.pc: Libs carry an rpath to libdir" || notok "dat2.pc: no rpath in Libs"
[ -f "$root/lib/pkgconfig/dat2.pc" ] && ok "lib/pkgconfig/dat2.pc" || notok "missing lib/pkgconfig/dat2.pc"
[ -x "$root/bin/softdat-info" ] && ok "bin/softdat-info" || notok "missing bin/softdat-info"
for m in man1/softdat-info.1 man7/softdat.7; do
    [ -f "$root/share/man/$m" ] && ok "share/man/$m" || notok "missing share/man/$m"
done

# --- pkg-config: the sysroot variable prefixes -I/-L with DESTDIR
pc() {
    PKG_CONFIG_PATH=$root/lib/pkgconfig PKG_CONFIG_LIBDIR=$root/lib/pkgconfig \
        PKG_CONFIG_SYSROOT_DIR=$dest pkg-config "$@"
}
if flags=$(pc --cflags --libs dat2 2>"$tmp/pc.err"); then
    ok "pkg-config --cflags --libs dat2: $flags"
    case " $flags " in *" -I$root/include "*) ok "pkg-config cflags point at the install" ;;
        *) notok "pkg-config cflags lack -I$root/include" ;; esac
    case " $flags " in *" -L$root/lib "*) ok "pkg-config libs: -L$root/lib" ;;
        *) notok "pkg-config libs lack -L$root/lib" ;; esac
    case " $flags " in *" -ldat2 "*) ok "pkg-config libs: -ldat2" ;;
        *) notok "pkg-config libs lack -ldat2" ;; esac
else
    notok "pkg-config dat2 failed: $(cat "$tmp/pc.err")"
    flags="-I$root/include -L$root/lib -ldat2"
fi

# --- a DAT consumer built only from what was installed
cat >"$tmp/consumer.c" <<'EOF'
#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>
#include <dat2/udat.h>

int main(void)
{
    static DAT_PROVIDER_INFO infos[256], *ptrs[256];
    DAT_COUNT n = 0;
    DAT_IA_HANDLE ia = DAT_HANDLE_NULL;
    DAT_EVD_HANDLE evd = DAT_HANDLE_NULL;
    DAT_IA_ATTR attr;
    DAT_RETURN ret;
    const char *maj = "", *min = "";
    char addr[64] = "?";

    for (int i = 0; i < 256; i++)
        ptrs[i] = &infos[i];
    ret = dat_registry_list_providers(256, &n, ptrs);
    if (ret != DAT_SUCCESS) {
        dat_strerror(ret, &maj, &min);
        fprintf(stderr, "list_providers: %s %s\n", maj, min);
        return 1;
    }
    for (int i = 0; i < n; i++)
        printf("provider %s\n", infos[i].ia_name);
    ret = dat_ia_open("softdat-lo", 8, &evd, &ia);
    if (ret != DAT_SUCCESS) {
        dat_strerror(ret, &maj, &min);
        fprintf(stderr, "dat_ia_open: %s %s\n", maj, min);
        return 1;
    }
    ret = dat_ia_query(ia, &evd, DAT_IA_FIELD_ALL, &attr, 0, NULL);
    if (ret == DAT_SUCCESS && attr.ia_address_ptr && attr.ia_address_ptr->sa_family == AF_INET)
        inet_ntop(AF_INET, &((struct sockaddr_in *)(void *)attr.ia_address_ptr)->sin_addr,
                  addr, sizeof(addr));
    printf("opened softdat-lo, ia_address %s\n", addr);
    ret = dat_ia_close(ia, DAT_CLOSE_GRACEFUL_FLAG);
    if (ret != DAT_SUCCESS) {
        dat_strerror(ret, &maj, &min);
        fprintf(stderr, "dat_ia_close: %s %s\n", maj, min);
        return 1;
    }
    printf("closed\n");
    return 0;
}
EOF
# Only the installed headers: no -I into the source tree, no /usr/include/dat2
# shadowing (the -I from pkg-config comes first).
# Under `make asan`/`tsan` the installed libraries need the sanitizer runtime
# loaded first, so the consumer is built with the same -fsanitize.
san=()
[ -n "${SANITIZE:-}" ] && san=(-fsanitize="$SANITIZE")
# shellcheck disable=SC2086  # $flags is a list of compiler words
if cc -std=c11 -D_GNU_SOURCE -Wall -Werror "${san[@]}" -o "$tmp/consumer" "$tmp/consumer.c" \
        $flags -Wl,-rpath,"$root/lib" 2>"$tmp/cc.err"; then
    ok "consumer compiles and links against the installed tree"
    lib=$(ldd "$tmp/consumer" | awk '$1 == "libdat2.so.2" { print $3 }')
    [ "$lib" = "$root/lib/libdat2.so.2" ] && ok "consumer uses the installed libdat2" ||
        notok "consumer resolves libdat2.so.2 to '$lib'"
    # With the build's dat.conf (the installed one names PREFIX's provider,
    # which is not there under DESTDIR: the real-PREFIX runs below use it).
    if out=$(DAT_OVERRIDE=$BUILD/dat.conf timeout 60 "$tmp/consumer" 2>&1 </dev/null) &&
       grep -q '^opened softdat-lo, ia_address 127.0.0.1$' <<<"$out" && grep -q '^closed$' <<<"$out"; then
        ok "consumer opens softdat-lo (build dat.conf)"
    else
        notok "consumer with the build dat.conf:"; sed 's/^/    /' <<<"$out"
    fi
else
    notok "consumer does not build against the installed tree:"
    head -n 30 "$tmp/cc.err" | sed 's/^/    /'
fi

# --- the installed tool finds the installed library on its own (RUNPATH)
if [ -x "$root/bin/softdat-info" ]; then
    lib=$(env -u LD_LIBRARY_PATH ldd "$root/bin/softdat-info" | awk '$1 == "libdat2.so.2" { print $3 }')
    [ "$(realpath "$lib" 2>/dev/null)" = "$root/lib/libdat2.so.2" ] &&
        ok "installed softdat-info uses the installed libdat2" ||
        notok "installed softdat-info resolves libdat2.so.2 to '$lib'"
    if out=$(env -u LD_LIBRARY_PATH DAT_OVERRIDE="$BUILD/dat.conf" timeout 60 \
                "$root/bin/softdat-info" softdat-lo 2>&1 </dev/null) &&
       grep -q 'ia_address: *127.0.0.1' <<<"$out"; then
        ok "installed softdat-info shows softdat-lo"
    else
        notok "installed softdat-info softdat-lo:"; head -n 20 <<<"$out" | sed 's/^/    /'
    fi
fi

# --- install anywhere: two real prefixes, used with nothing set
# A system /etc/dat.conf that already names softdat-lo (an installed
# softdat package, a hand edit) wins over PREFIX's file by design; then the
# runs below name PREFIX's file explicitly.
run_env=(env -u LD_LIBRARY_PATH -u DAT_OVERRIDE)
if grep -Eq '^softdat-lo[[:space:]]' /etc/dat.conf 2>/dev/null; then
    echo "# /etc/dat.conf names softdat-lo: the runs below set DAT_OVERRIDE to PREFIX's dat.conf"
    sysconf_has_lo=1
else
    sysconf_has_lo=0
fi
# check_prefix P: the installed tool and a pkg-config-built program of P
# open softdat-lo through P's own libdat2 and provider.
check_prefix() {
    local p=$1 envp=("${run_env[@]}") out lib flags
    [ $sysconf_has_lo = 1 ] && envp+=(DAT_OVERRIDE="$p/etc/dat.conf")
    out=$(readelf -d "$p/bin/softdat-info" 2>/dev/null | sed -n 's/.*(RUNPATH).*\[\(.*\)\]/\1/p')
    [ "$out" = '$ORIGIN/../lib' ] && ok "$p: softdat-info RUNPATH \$ORIGIN/../lib" ||
        notok "$p: softdat-info RUNPATH '$out'"
    grep -aq "$p/etc/dat.conf" "$p/lib/libdat2.so.2" &&
        ok "$p: libdat2's fallback dat.conf is $p/etc/dat.conf" ||
        notok "$p: libdat2 does not name $p/etc/dat.conf (compiled-in PREFIX did not follow)"
    lib=$("${run_env[@]}" ldd "$p/bin/softdat-info" | awk '$1 == "libdat2.so.2" { print $3 }')
    [ "$(realpath "$lib" 2>/dev/null)" = "$p/lib/libdat2.so.2" ] &&
        ok "$p: softdat-info resolves libdat2 to its own" || notok "$p: softdat-info resolves libdat2 to '$lib'"
    if out=$("${envp[@]}" DAT_DBG_TYPE=0x5 timeout 60 "$p/bin/softdat-info" softdat-lo 2>&1 </dev/null) &&
       grep -q 'ia_address: *127.0.0.1' <<<"$out" &&
       grep -q "loaded $p/lib/libdaplsoft.so.2 for softdat-lo" <<<"$out"; then
        ok "$p: bin/softdat-info softdat-lo loads $p/lib/libdaplsoft.so.2"
    else
        notok "$p: bin/softdat-info softdat-lo:"; grep -v '^    ' <<<"$out" | head -n 20 | sed 's/^/    /'
    fi
    # shellcheck disable=SC2086  # a list of compiler words
    if flags=$(PKG_CONFIG_PATH=$p/lib/pkgconfig pkg-config --cflags --libs dat2 2>"$tmp/pc.err") &&
       cc -std=c11 -D_GNU_SOURCE -Wall -Werror "${san[@]}" -o "$p/consumer" "$tmp/consumer.c" \
           $flags 2>"$tmp/cc.err"; then
        ok "$p: consumer built with \`pkg-config dat2\` ($flags)"
        lib=$("${run_env[@]}" ldd "$p/consumer" | awk '$1 == "libdat2.so.2" { print $3 }')
        [ "$(realpath "$lib" 2>/dev/null)" = "$p/lib/libdat2.so.2" ] &&
            ok "$p: consumer resolves libdat2 to $p/lib" || notok "$p: consumer resolves libdat2 to '$lib'"
        if out=$("${envp[@]}" DAT_DBG_TYPE=0x5 timeout 60 "$p/consumer" 2>&1 </dev/null) &&
           grep -q '^opened softdat-lo, ia_address 127.0.0.1$' <<<"$out" && grep -q '^closed$' <<<"$out" &&
           grep -q "loaded $p/lib/libdaplsoft.so.2 for softdat-lo" <<<"$out"; then
            ok "$p: consumer opens softdat-lo through $p (LD_LIBRARY_PATH unset)"
        else
            notok "$p: consumer run:"; grep -v "^libdat2: /etc/dat.conf:" <<<"$out" | head -n 20 | sed 's/^/    /'
        fi
    else
        notok "$p: consumer does not build with pkg-config:"
        cat "$tmp/pc.err" "$tmp/cc.err" | head -n 20 | sed 's/^/    /'
    fi
}
p1=$tmp/prefix-one
p2=$tmp/second/prefix
for p in "$p1" "$p2"; do
    if mk PREFIX="$p" install >"$tmp/install-real.log" 2>&1; then
        ok "make install PREFIX=$p (after a build for another PREFIX)"
        check_prefix "$p"
    else
        notok "make install PREFIX=$p failed:"; tail -n 20 "$tmp/install-real.log" | sed 's/^/    /'
    fi
done
# The first installation still works beside the second one.
[ -x "$p1/bin/softdat-info" ] && check_prefix "$p1"

[ $fails -eq 0 ]
