/* CRC32c (Castagnoli), the MPA FPDU trailer checksum.
 *
 * Convention (same as zlib's crc32()): a CRC "value" is the finished,
 * already-inverted checksum; start from 0 and feed chunks in order:
 *
 *     uint32_t c = 0;
 *     c = emu_crc32c(c, hdr, hlen);
 *     c = emu_crc32c(c, payload, plen);      // == emu_crc32c(0, hdr||payload)
 *
 * The value goes on the wire least-significant byte first
 * (emu_crc32c_put_le). Carry-less multiplication folding (AVX-512
 * VPCLMULQDQ) is used for long buffers and the SSE4.2 crc32 instruction
 * for the rest when the CPU has them (detected once at run time), a
 * slicing-by-8 table otherwise. */
#ifndef SOFTDAT_EMU_CRC32C_H
#define SOFTDAT_EMU_CRC32C_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

/* Continue `crc` (0 to start) over buf[0..len). buf may be NULL iff len 0. */
uint32_t emu_crc32c(uint32_t crc, const void *buf, size_t len);

/* Continue `crc` over every iovec in order (zero-length entries allowed). */
uint32_t emu_crc32c_iov(uint32_t crc, const struct iovec *iov, int iovcnt);

/* Copy src[0..len) to dst and continue `crc` over the same bytes, in one
 * pass: the result equals memcpy(dst, src, len) then emu_crc32c(crc, dst,
 * len). Each word is loaded once, then both stored and summed, so the CRC
 * covers exactly the bytes written to dst even if src changes meanwhile
 * (the transmit side stages payload it does not own: emu/qp_tx.c). dst
 * and src must not overlap; either may be NULL iff len is 0. */
uint32_t emu_crc32c_copy(uint32_t crc, void *dst, const void *src, size_t len);

/* The two implementations, exposed for tests and benchmarks. The hardware
 * ones must only be called when emu_crc32c_hw_available() is true. */
uint32_t emu_crc32c_sw(uint32_t crc, const void *buf, size_t len);
uint32_t emu_crc32c_hw(uint32_t crc, const void *buf, size_t len);
uint32_t emu_crc32c_copy_sw(uint32_t crc, void *dst, const void *src, size_t len);
uint32_t emu_crc32c_copy_hw(uint32_t crc, void *dst, const void *src, size_t len);

/* Folding with carry-less multiplication (AVX-512 VPCLMULQDQ), 3-4x the
 * crc32 instruction on long buffers; emu_crc32c() and emu_crc32c_copy()
 * use it from 512 bytes on when the CPU has it. Exposed for tests and
 * benchmarks: only to be called when emu_crc32c_fold_available(). */
uint32_t emu_crc32c_fold(uint32_t crc, const void *buf, size_t len);
uint32_t emu_crc32c_copy_fold(uint32_t crc, void *dst, const void *src, size_t len);
bool emu_crc32c_fold_available(void);
bool emu_crc32c_hw_available(void);

/* Name of the implementation emu_crc32c() dispatches to for long buffers
 * ("vpclmulqdq", "sse4.2" or "slice8"), for logs. */
const char *emu_crc32c_impl(void);

/* Store a CRC value in wire order (LSB first). */
static inline void emu_crc32c_put_le(uint8_t out[4], uint32_t crc)
{
    out[0] = (uint8_t)crc;
    out[1] = (uint8_t)(crc >> 8);
    out[2] = (uint8_t)(crc >> 16);
    out[3] = (uint8_t)(crc >> 24);
}

static inline uint32_t emu_crc32c_get_le(const uint8_t in[4])
{
    return (uint32_t)in[0] | (uint32_t)in[1] << 8 | (uint32_t)in[2] << 16 |
           (uint32_t)in[3] << 24;
}

#endif
