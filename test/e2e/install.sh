#!/usr/bin/env bash
# shellcheck disable=SC2015,SC2001  # ok/notok always succeed: A && ok || notok is safe
# `make install` into a scratch DESTDIR: checks the installed tree, then builds
# a small DAT consumer against the installed headers and library (through
# pkg-config) and runs it against softdat-lo. Exit 0 pass, 77 skip, else fail.
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
trap 'rm -rf "$tmp"' EXIT
dest=$tmp/root
root=$dest$PREFIX

# The same build tree as the caller, so nothing is rebuilt; MAKEFLAGS from an
# enclosing `make check` would otherwise leak its jobserver and variables.
if env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -C "$SOFTDAT_TOP" BUILD="$BUILD" \
        SANITIZE="${SANITIZE:-}" PREFIX="$PREFIX" DESTDIR="$dest" install \
        >"$tmp/install.log" 2>&1; then
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
    DAT_PROVIDER_INFO infos[16], *ptrs[16];
    DAT_COUNT n = 0;
    DAT_IA_HANDLE ia = DAT_HANDLE_NULL;
    DAT_EVD_HANDLE evd = DAT_HANDLE_NULL;
    DAT_IA_ATTR attr;
    DAT_RETURN ret;
    const char *maj = "", *min = "";
    char addr[64] = "?";

    for (int i = 0; i < 16; i++)
        ptrs[i] = &infos[i];
    ret = dat_registry_list_providers(16, &n, ptrs);
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
    # With the build's dat.conf (absolute provider path) ...
    if out=$(DAT_OVERRIDE=$BUILD/dat.conf timeout 60 "$tmp/consumer" 2>&1 </dev/null) &&
       grep -q '^opened softdat-lo, ia_address 127.0.0.1$' <<<"$out" && grep -q '^closed$' <<<"$out"; then
        ok "consumer opens softdat-lo (build dat.conf)"
    else
        notok "consumer with the build dat.conf:"; sed 's/^/    /' <<<"$out"
    fi
    # ... and with the installed one (bare library name, found by the loader).
    if out=$(DAT_OVERRIDE=$root/etc/dat.conf LD_LIBRARY_PATH=$root/lib \
                timeout 60 "$tmp/consumer" 2>&1 </dev/null) &&
       grep -q '^opened softdat-lo, ia_address 127.0.0.1$' <<<"$out"; then
        ok "consumer opens softdat-lo (installed dat.conf)"
    else
        notok "consumer with the installed dat.conf:"; sed 's/^/    /' <<<"$out"
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

[ $fails -eq 0 ]
