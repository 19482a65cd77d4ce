#!/usr/bin/env bash
# shellcheck disable=SC2015  # ok/notok always succeed: A && ok || notok is safe
# The Debian package end to end: `make deb`, install it the way a CI job
# would (apt-get install ./softdat_*.deb, no download), check that its IAs
# are registered in /etc/dat.conf for Debian's registry, run Debian's dtest
# (server and client, both through Debian's libdat2 and /etc/dat.conf, no
# DAT_OVERRIDE) over softdat-lo, then purge the package and check that
# /etc/dat.conf is byte for byte what it was before.
#
# It changes the system (a package, /etc/dat.conf), so it needs root and
# dpkg; it skips (77) otherwise, under a sanitizer build (an uninstrumented
# dtest cannot load an instrumented provider from /usr), and when a softdat
# package is already installed (not ours to remove). Whatever happens, the
# EXIT trap purges the package and puts the saved /etc/dat.conf back.
# Other tests are unaffected while it runs: they all set DAT_OVERRIDE.
# Exit 0 pass, 77 skip, else fail.
set -u
SOFTDAT_TOP=${SOFTDAT_TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
BUILD=${BUILD:-$SOFTDAT_TOP/build}

skip() { echo "skip - $*"; exit 77; }
[ "$(id -u)" = 0 ] || skip "not root (installs a package)"
for b in dpkg dpkg-deb dpkg-query dtest; do
    command -v "$b" >/dev/null 2>&1 || skip "$b is not installed"
done
[ -z "${SANITIZE:-}" ] || skip "sanitizer build ($SANITIZE): Debian's dtest cannot load it from /usr"
if [ "$(dpkg-query -W -f='${Status}' softdat 2>/dev/null)" != "" ] &&
   [ "$(dpkg-query -W -f='${Status}' softdat 2>/dev/null)" != "unknown ok not-installed" ] &&
   [ "$(dpkg-query -W -f='${Status}' softdat 2>/dev/null)" != "deinstall ok config-files" ]; then
    skip "a softdat package is already installed here ($(dpkg-query -W -f='${Version}' softdat)); not touching it"
fi

# dtest's fixed side-channel port (15828) and conn qual: the same private
# network namespace as the other dtest-family tests (test/e2e/lib/interop.sh
# re-executes this script in one). The filesystem stays the host's.
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=test/e2e/lib/interop.sh
. "$here/lib/interop.sh"

conf=/etc/dat.conf
saved=$IL_TMP/dat.conf.before
had_conf=0
if [ -e "$conf" ]; then
    cp -p "$conf" "$saved" && had_conf=1
fi
ma=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || echo x86_64-linux-gnu)
provider=/usr/lib/$ma/softdat/libdaplsoft.so.2
installed_by_us=0

deb_cleanup() {
    if [ $installed_by_us = 1 ]; then
        dpkg --purge softdat >"$IL_TMP/purge-trap.log" 2>&1 ||
            { echo "# cleanup: dpkg --purge softdat failed:"; tail -n 5 "$IL_TMP/purge-trap.log"; }
    fi
    if [ $had_conf = 1 ] && ! cmp -s "$saved" "$conf"; then
        echo "# cleanup: restoring $conf"
        cp -p "$saved" "$conf"
    elif [ $had_conf = 0 ] && [ -e "$conf" ]; then
        grep -Eq '^[^#[:space:]]' "$conf" || rm -f "$conf"
    fi
    il_cleanup
}
trap deb_cleanup EXIT
trap 'exit 143' TERM INT HUP

# --- build
if env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -C "$SOFTDAT_TOP" BUILD="$BUILD" deb \
        >"$IL_TMP/make.log" 2>&1; then
    deb=$(ls "$BUILD"/deb/softdat_*.deb 2>/dev/null | head -n 1)
    [ -n "$deb" ] && il_ok "make deb: $(basename "$deb")" || { il_notok "make deb made no .deb"; il_finish; }
else
    il_notok "make deb failed:"; il_show make "$IL_TMP/make.log" 20
    il_finish
fi
ctl=$(dpkg-deb -f "$deb" Package Depends)
grep -q '^Depends: .*libdapl2' <<<"$ctl" && ok_dep=1 || ok_dep=0
[ $ok_dep = 1 ] && il_ok "package depends on libdapl2 (Debian's registry)" || il_notok "Depends lacks libdapl2: $ctl"
dpkg-deb -c "$deb" | grep -q 'libdat2' && il_notok "the package ships a libdat2 (clashes with libdapl2)" ||
    il_ok "the package ships no libdat2"

# lintian, when installed (not a CI dependency: it is large): no errors
# or warnings.
if command -v lintian >/dev/null 2>&1; then
    timeout 300 lintian "$deb" >"$IL_TMP/lintian.log" 2>&1
    if grep -Eq '^[EW]: ' "$IL_TMP/lintian.log"; then
        il_notok "lintian reports errors or warnings:"; grep -E '^[EW]: ' "$IL_TMP/lintian.log" | head -n 10 | sed 's/^/  # /'
    else
        il_ok "lintian: no errors or warnings"
    fi
fi

# --- install as CI would
installed_by_us=1
if command -v apt-get >/dev/null 2>&1; then
    # Everything it needs is installed already (dtest comes with libdapl2), so
    # apt-get resolves locally and downloads nothing.
    inst=(apt-get install -y --no-install-recommends -o DPkg::Lock::Timeout=120 "$deb")
else
    inst=(dpkg -i "$deb")
fi
if DEBIAN_FRONTEND=noninteractive timeout 300 "${inst[@]}" >"$IL_TMP/install.log" 2>&1 </dev/null; then
    il_ok "${inst[0]} install ./$(basename "$deb")"
else
    il_notok "${inst[*]} failed:"; il_show install "$IL_TMP/install.log" 20
    il_finish
fi
n_lo=$(grep -Ec "^softdat-lo[[:space:]].*[[:space:]]$provider[[:space:]]" "$conf")
n_blk=$(grep -c '^# BEGIN softdat records' "$conf")
[ "$n_lo" -ge 1 ] && [ "$n_blk" = 1 ] && il_ok "/etc/dat.conf: one softdat block, softdat-lo -> $provider" ||
    il_notok "/etc/dat.conf after install: $n_blk blocks, $n_lo softdat-lo records naming $provider"
if [ $had_conf = 1 ]; then
    head -c "$(stat -c %s "$saved")" "$conf" | cmp -s - "$saved" &&
        il_ok "/etc/dat.conf: the existing records are untouched (softdat's are appended)" ||
        il_notok "/etc/dat.conf: the records before softdat's changed"
fi
# Configuring again (an upgrade, dpkg-reconfigure) keeps one block.
if dpkg -i "$deb" >"$IL_TMP/reinstall.log" 2>&1; then
    [ "$(grep -c '^# BEGIN softdat records' "$conf")" = 1 ] && il_ok "reinstall: still one softdat block" ||
        il_notok "reinstall: $(grep -c '^# BEGIN softdat records' "$conf") softdat blocks"
else
    il_notok "dpkg -i again failed"; il_show reinstall "$IL_TMP/reinstall.log"
fi

# --- the installed tools, with nothing set: Debian's libdat2, /etc/dat.conf
run=(env -u DAT_OVERRIDE -u LD_LIBRARY_PATH)
lib=$("${run[@]}" ldd /usr/bin/softdat-info | awk '$1 == "libdat2.so.2" { print $3 }')
[ "$(realpath "$lib" 2>/dev/null)" = "$(realpath "$IL_DEBIAN_LIBDAT" 2>/dev/null)" ] &&
    il_ok "/usr/bin/softdat-info uses Debian's libdat2" || il_notok "/usr/bin/softdat-info resolves libdat2 to '$lib'"
if out=$("${run[@]}" timeout 60 /usr/bin/softdat-info softdat-lo 2>&1 </dev/null) &&
   grep -q 'ia_address: *127.0.0.1' <<<"$out"; then
    il_ok "/usr/bin/softdat-info softdat-lo (Debian's registry)"
else
    il_notok "/usr/bin/softdat-info softdat-lo:"; head -n 15 <<<"$out" | sed 's/^/  # /'
fi

# --- Debian's dtest through the package
SIDE=15828
PASS_RE='DAPL Test Complete\. PASSED'
slog=$IL_TMP/dtest.server.log clog=$IL_TMP/dtest.client.log
if ! il_wait_port_free $SIDE 20; then
    il_notok "port $SIDE stays busy: cannot run dtest"
else
    ("${run[@]}" timeout --kill-after=5 120 dtest -P softdat-lo -s >"$slog" 2>&1 </dev/null) &
    spid=$!
    il_pids+=("$spid")
    if il_wait_listen $SIDE "$spid" 20; then
        t0=$SECONDS
        "${run[@]}" timeout --kill-after=5 120 dtest -P softdat-lo -h 127.0.0.1 >"$clog" 2>&1 </dev/null
        crc=$?
        il_wait "$spid" 20
        src=$?
        if [ $crc = 0 ] && [ $src = 0 ] && grep -Eq "$PASS_RE" "$slog" && grep -Eq "$PASS_RE" "$clog"; then
            il_ok "dtest -P softdat-lo server and client pass through the package ($((SECONDS - t0))s)"
        else
            il_notok "dtest: client exit $crc, server exit $src"
            il_show client "$clog"; il_show server "$slog"
        fi
    else
        il_notok "dtest -s did not listen on $SIDE"; il_show server "$slog"
    fi
fi

# --- purge: /etc/dat.conf as it was
if dpkg --purge softdat >"$IL_TMP/purge.log" 2>&1; then
    installed_by_us=0
    il_ok "dpkg --purge softdat"
else
    il_notok "dpkg --purge softdat failed:"; il_show purge "$IL_TMP/purge.log"
fi
if [ $had_conf = 1 ]; then
    cmp -s "$saved" "$conf" && il_ok "/etc/dat.conf is restored byte for byte" ||
        { il_notok "/etc/dat.conf differs after purge:"; diff "$saved" "$conf" | head -n 10 | sed 's/^/  # /'; }
fi
[ ! -e "$provider" ] && [ ! -e /usr/bin/softdat-info ] && il_ok "the package's files are gone" ||
    il_notok "files left after purge"
il_finish
