#!/usr/bin/env bash
# The provider's thread-local storage fits glibc's static TLS surplus.
# libdat2 loads libdaplsoft with dlopen; glibc gives a dlopen'ed object's
# TLS a place in every thread's static block only if it fits the surplus
# kept for that (the rtld.optional_static_tls tunable, 512 bytes by
# default). Past it, every _Thread_local access of the provider (its
# handle cache, its polling state: several per dat_evd_dequeue) goes
# through the slow _dl_tlsdesc_dynamic: a 16 KiB thread-local buffer once
# cost a polled ping-pong 4% of its time that way. Exit 0 pass, else fail.
set -u
SOFTDAT_TOP=${SOFTDAT_TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
BUILD=${BUILD:-$SOFTDAT_TOP/build}
LIMIT=512
lib=$BUILD/lib/libdaplsoft.so.2
[ -e "$lib" ] || { echo "not ok - $lib missing (run make first)"; exit 1; }
command -v readelf >/dev/null || { echo "not ok - readelf (binutils) not installed"; exit 1; }
# The PT_TLS program header: "TLS Offset VirtAddr PhysAddr FileSiz MemSiz Flg Align".
memsz=$(readelf -lW "$lib" | awk '$1 == "TLS" { print $6 }')
if [ -z "$memsz" ]; then
    echo "ok - $lib has no thread-local storage"
    exit 0
fi
bytes=$((memsz))
if [ "$bytes" -le "$LIMIT" ]; then
    echo "ok - $lib: $bytes bytes of thread-local storage (limit $LIMIT)"
    exit 0
fi
echo "not ok - $lib: $bytes bytes of thread-local storage, more than glibc's $LIMIT-byte static surplus for dlopen'ed objects"
exit 1
