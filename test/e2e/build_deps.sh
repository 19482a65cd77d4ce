#!/usr/bin/env bash
# Header dependencies hold whichever way make is called. make check, the
# e2e scripts (install.sh, deb.sh, fuzz_smoke.sh) and CI run make with an
# absolute BUILD (BUILD=$PWD/build), a developer types plain `make`
# (BUILD=build). The .d files one writes must be understood by the other,
# or an object is not rebuilt when a header it includes changes (stale
# objects, segfaults). In a scratch copy of the sources, for one object
# (emu/crc32c.o, which includes emu/crc32c.h):
#   1. built with an absolute BUILD, header touched, plain make: rebuilt;
#   2. built with plain make, header touched, absolute BUILD: rebuilt;
#   3. nothing touched: neither way rebuilds it.
# Exit 0 pass, else fail.
set -u
SOFTDAT_TOP=${SOFTDAT_TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
fails=0
ok() { echo "ok - $*"; }
notok() { echo "not ok - $*"; fails=$((fails + 1)); }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/softdat-deps.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
src=$tmp/src
mkdir -p "$src"
# What the Makefile reads at parse time plus the sources; no build tree.
(cd "$SOFTDAT_TOP" && cp -r Makefile VERSION include lib emu tools test examples conf scripts "$src"/) || {
    notok "copy of the sources"
    exit 1
}
rm -rf "$src/build"
obj_rel=build/obj/emu/crc32c.o
obj=$src/$obj_rel
hdr=$src/emu/crc32c.h

# mk ARGS...: make in the copy, isolated from an enclosing make.
mk() { env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL -u BUILD make -C "$src" "$@" >>"$tmp/make.log" 2>&1; }
# touch_newer FILE REF: FILE's mtime 2 s after REF's (no sleeping on a
# coarse clock).
touch_newer() { touch -d "@$(($(stat -c %Y "$2") + 2))" "$1"; }
stamp() { stat -c %Y.%y "$obj" 2>/dev/null; }

# 1. absolute, then plain
if mk BUILD="$src/build" "$obj" && [ -f "$obj" ]; then
    touch_newer "$hdr" "$obj"
    before=$(stamp)
    if mk "$obj_rel" && [ "$(stamp)" != "$before" ]; then
        ok "built with BUILD=\$PWD/build, header changed, plain make rebuilds the object"
    else
        notok "built with BUILD=\$PWD/build, header changed, plain make left the object stale"
        grep -h '\.d\b\|crc32c' "$src"/build/obj/emu/crc32c.d 2>/dev/null | head -3 | sed 's/^/  # /'
    fi
else
    notok "make BUILD=$src/build $obj failed"; tail -n 15 "$tmp/make.log" | sed 's/^/  # /'
fi

# 2. plain, then absolute
touch_newer "$hdr" "$obj"
mk "$obj_rel"
touch_newer "$hdr" "$obj"
before=$(stamp)
if mk BUILD="$src/build" "$obj" && [ "$(stamp)" != "$before" ]; then
    ok "built with plain make, header changed, make BUILD=\$PWD/build rebuilds the object"
else
    notok "built with plain make, header changed, make BUILD=\$PWD/build left the object stale"
fi

# 3. up to date both ways (the header back in the past: the touches above
# may have put it ahead of an object rebuilt within the same 2 s)
touch -d "@$(($(stat -c %Y "$obj") - 10))" "$hdr"
before=$(stamp)
: >"$tmp/make.log"
mk "$obj_rel"
mk BUILD="$src/build" "$obj"
mk BUILD=build "$obj_rel"
if [ "$(stamp)" = "$before" ] && ! grep -q 'crc32c\.c' "$tmp/make.log"; then
    ok "an up-to-date object is left alone by plain make, BUILD=build and BUILD=\$PWD/build"
else
    notok "an up-to-date object was rebuilt"; tail -n 5 "$tmp/make.log" | sed 's/^/  # /'
fi

[ $fails -eq 0 ]
