#!/usr/bin/env bash
# The provider loaded by Debian's libdat2.so.2 (libdapl2): open/query/PZ/
# close on softdat-lo (AF_INET, two rounds: the library is unloaded and
# reloaded in between) and softdat-lo6 (AF_INET6).
# LD_LIBRARY_PATH wins over the helper's RUNPATH, so Debian's registry is
# the one that loads us. Exit 0 pass, 77 skip, else fail.
set -u
here=$(cd "$(dirname "$0")" && pwd)
BUILD=${BUILD:-$(cd "$here/../.." && pwd)/build}
probe=$BUILD/test/helpers/ia_probe
conf=$BUILD/dat.conf
deb=/usr/lib/x86_64-linux-gnu

if [ ! -e "$deb/libdat2.so.2" ]; then
    echo "skip - Debian libdat2 ($deb/libdat2.so.2) not installed"
    exit 77
fi
for f in "$probe" "$conf"; do
    [ -e "$f" ] || { echo "not ok - $f missing (run make first)"; exit 1; }
done

which_dat2=$(LD_LIBRARY_PATH=$deb ldd "$probe" | awk '/libdat2\.so\.2/ {print $3}')
case $which_dat2 in
    "$deb"/*) ;;
    *) echo "not ok - ia_probe would load libdat2 from '$which_dat2', not $deb"; exit 1 ;;
esac

fail=0
run() { # description, probe arguments...
    local what=$1; shift
    if DAT_OVERRIDE=$conf LD_LIBRARY_PATH=$deb "$probe" "$@"; then
        echo "ok - debian registry: $what"
    else
        echo "not ok - debian registry: $what"
        fail=1
    fi
}
run "softdat-lo open/query/pz/close x2 with unload" -4 -n 2 -u softdat-lo
run "softdat-lo6 IPv6 address" -6 -u softdat-lo6
exit $fail
