#!/usr/bin/env bash
# Builds Open MPI 1.6.5 (the last series with the uDAPL transport, btl/udapl)
# from the workplace's tarball into $BUILD/ompi, once: a stamp records the
# inputs, and a second run with the same inputs does nothing.
#
#   test/ompi/build.sh            build (or reuse) $BUILD/ompi/install
#   OMPI_TARBALL=...              another copy of openmpi-1.6.5-git.tar.xz
#
# Exit 0 built/cached, 77 when the tarball or the autotools are missing,
# else failure. About 5 minutes on 2 cores (autogen ~80 s, configure ~60 s,
# make ~2-3 min). Configure facts: ../shared/third_party/README.md.
#
# The udapl BTL is DAT 1.2 code: it compiles against softdat's DAT 2.0
# headers through test/ompi/shim/dat/udat.h and links -ldat through a
# libdat.so symlink to softdat's libdat2.so.2 (so the BTL's DT_NEEDED is
# libdat2.so.2: LD_LIBRARY_PATH picks the registry at run time).
# Open MPI is built WITHOUT -fvisibility=hidden, as its default build is: it
# exports its bundled libevent 1.4's symbols (epollops, ...), the hazard
# softdat must survive.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
BUILD=${BUILD:-$top/build}
BUILD=$(cd "$BUILD" && pwd)
tarball=${OMPI_TARBALL:-}
if [ -z "$tarball" ]; then
    for t in "$top/../shared/third_party/openmpi-1.6.5-git.tar.xz" \
             /work/shared/third_party/openmpi-1.6.5-git.tar.xz; do
        [ -f "$t" ] && { tarball=$t; break; }
    done
fi
if [ -z "$tarball" ] || [ ! -f "$tarball" ]; then
    echo "skip - Open MPI tarball not found (set OMPI_TARBALL)"; exit 77
fi
for b in autoconf automake libtoolize flex; do
    command -v "$b" >/dev/null || { echo "skip - $b missing (scripts/install-deps)"; exit 77; }
done
# autogen.sh runs libtoolize --ltdl, which needs libltdl-dev's ltdl.m4.
if [ ! -f "$(aclocal --print-ac-dir 2>/dev/null)/ltdl.m4" ]; then
    echo "skip - ltdl.m4 missing: libltdl-dev (scripts/install-deps)"; exit 77
fi

dir=$BUILD/ompi
prefix=$dir/install
stamp=$dir/stamp
want="$(sha256sum "$tarball" | cut -c1-16) $(sha256sum "$here/shim/dat/udat.h" "$0" | cut -c1-16 | tr '\n' ' ')"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -x "$prefix/bin/mpicc" ]; then
    echo "ompi: cached in $prefix"
    exit 0
fi
rm -rf "$dir"
mkdir -p "$dir/shim/include/dat" "$dir/shim/lib"
cp "$here/shim/dat/udat.h" "$dir/shim/include/dat/udat.h"
# The BTL's configure looks for include/dat/udat.h and libdat.* under the
# same directory; the DAT 2.0 headers themselves come through CPPFLAGS.
ln -sf "$BUILD/lib/libdat2.so.2" "$dir/shim/lib/libdat.so"
log=$dir/build.log
t0=$SECONDS
echo "ompi: building into $prefix (log: $log)"
tar -C "$dir" -xf "$tarball"
src=$(find "$dir" -maxdepth 1 -type d -name 'openmpi-*' | head -1)
(
    # set -e does not hold in a subshell whose status is tested (the ||
    # below): each step stops it on failure itself.
    cd "$src"
    ./autogen.sh || exit 1
    ./configure --prefix="$prefix" \
        ac_cv_header_stdc=yes CFLAGS="-O2 -fcommon -w" \
        CPPFLAGS="-I$top/include" \
        --without-memory-manager \
        --disable-mpi-f77 --disable-mpi-f90 --disable-mpi-cxx --disable-vt \
        --without-openib --disable-dlopen --disable-io-romio \
        --enable-mca-no-build=crs,filem \
        --with-udapl="$dir/shim" --with-udapl-libdir="$dir/shim/lib" || exit 1
    grep -q 'btl_udapl' ompi/mca/btl/udapl/Makefile 2>/dev/null ||
        { echo "udapl BTL not configured"; exit 1; }
    make -j"$(nproc)" || exit 1
    make install
) >"$log" 2>&1 || { echo "ompi: build failed, last lines of $log:"; tail -30 "$log"; exit 1; }
components=$("$prefix/bin/ompi_info" 2>/dev/null || true)
case $components in
    *"MCA btl: udapl"*) ;;
    *) echo "ompi: built but the udapl BTL is missing"; exit 1 ;;
esac
echo "$want" >"$stamp"
echo "ompi: built in $((SECONDS - t0)) s"
