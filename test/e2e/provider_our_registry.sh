#!/usr/bin/env bash
# The provider loaded by our own libdat2.so.2 (the helper's RUNPATH):
# the same checks as provider_debian_registry.sh. Exit 0 pass, 77 skip.
set -u
here=$(cd "$(dirname "$0")" && pwd)
BUILD=${BUILD:-$(cd "$here/../.." && pwd)/build}
probe=$BUILD/test/helpers/ia_probe
conf=$BUILD/dat.conf
ours=$BUILD/lib/libdat2.so.2

if [ ! -e "$ours" ]; then
    echo "skip - our libdat2 ($ours) is not built"
    exit 77
fi
for f in "$probe" "$conf"; do
    [ -e "$f" ] || { echo "not ok - $f missing (run make first)"; exit 1; }
done

which_dat2=$(env -u LD_LIBRARY_PATH ldd "$probe" | awk '/libdat2\.so\.2/ {print $3}')
if [ "$(readlink -f "$which_dat2")" != "$(readlink -f "$ours")" ]; then
    echo "not ok - ia_probe would load libdat2 from '$which_dat2', not $ours"
    exit 1
fi

fail=0
run() { # description, probe arguments...
    local what=$1; shift
    if env -u LD_LIBRARY_PATH DAT_OVERRIDE="$conf" "$probe" "$@"; then
        echo "ok - our registry: $what"
    else
        echo "not ok - our registry: $what"
        fail=1
    fi
}
run "softdat-lo open/query/pz/close x2 with unload" -4 -n 2 -u softdat-lo
run "softdat-lo6 IPv6 address" -6 -u softdat-lo6
exit $fail
