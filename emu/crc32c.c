/* CRC32c: carry-less multiplication folding (AVX-512 VPCLMULQDQ) for long
 * buffers, the SSE4.2 crc32 instruction (3 interleaved chains) for the
 * rest or when the CPU lacks it, a slicing-by-8 table otherwise; each also
 * as a fused copy (the CRC
 * of the bytes as they are stored elsewhere, one pass over them). See emu/crc32c.h for the convention.
 *
 * Internally a "raw" register is the CRC state without the final inversion;
 * the public value is ~raw, so continuing from a value starts at ~value. */
#include "emu/crc32c.h"

#include <pthread.h>
#include <string.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#define POLY_REFLECTED 0x82F63B78u
#define POLY_NORMAL 0x1EDC6F41u

static uint32_t tab[8][256];            /* slicing-by-8 */

#if defined(__x86_64__)
#define HAVE_HW 1
/* Shift operators: advancing a raw register over N zero bytes is linear in
 * the register, so it is 4 table look-ups (one per register byte). Used to
 * stitch the three interleaved chains back together. */
#define LANE_BIG 4096u
#define LANE_SMALL 256u
/* The fused copy's long lanes: 3 KiB blocks ran fastest (1-1.3x the
 * 12 KiB ones of plain CRC; test_crc32c's benchmark). */
#define LANE_COPY 1024u
static uint32_t shift_big[4][256];
static uint32_t shift_small[4][256];
static uint32_t shift_copy[4][256];
static bool hw_ok;
/* Folding with carry-less multiplication (AVX-512 VPCLMULQDQ): 256 bytes
 * per round in four 64-byte accumulators, each 128-bit lane carried
 * forward over the bytes behind it (see fold_raw). fold_k[i] = the pair
 * of multipliers that carries a 128-bit lane forward by fold_dist[i] bits. */
#define FOLD_MIN 512u                   /* shorter buffers stay with the crc32 instruction */
enum { FK_2048, FK_1536, FK_1024, FK_512, FK_384, FK_256, FK_128, FK_N };
static const unsigned fold_dist[FK_N] = {2048, 1536, 1024, 512, 384, 256, 128};
static uint64_t fold_k[FK_N][2];
static bool fold_ok;
#else
#define HAVE_HW 0
#endif

static pthread_once_t init_once = PTHREAD_ONCE_INIT;

static uint32_t sw_raw(uint32_t c, const uint8_t *p, size_t n);

#if HAVE_HW
static void build_shift(uint32_t out[4][256], size_t nbytes)
{
    /* Column j = image of the single-bit register 1<<j. */
    uint32_t col[32];
    static const uint8_t zeros[LANE_BIG];
    for (int j = 0; j < 32; j++)
        col[j] = sw_raw(1u << j, zeros, nbytes);
    for (int k = 0; k < 4; k++)
        for (int b = 0; b < 256; b++) {
            uint32_t v = 0;
            for (int i = 0; i < 8; i++)
                if (b & (1 << i))
                    v ^= col[8 * k + i];
            out[k][b] = v;
        }
}

static inline uint32_t shift_apply(const uint32_t t[4][256], uint32_t c)
{
    return t[0][c & 0xFF] ^ t[1][(c >> 8) & 0xFF] ^ t[2][(c >> 16) & 0xFF] ^
           t[3][c >> 24];
}

/* x^e mod P as a 64-bit multiplier in the reflected order the loads give:
 * the coefficient of x^d at bit 63 - d. Why e is one less than the
 * distance folded (fold_raw): the carry-less product of two reflected
 * 64-bit operands comes out one bit short of the 128-bit reflected
 * position, i.e. multiplied by x. */
static uint64_t fold_const(unsigned e)
{
    uint64_t r = 1; /* normal order: bit d = x^d */
    for (unsigned i = 0; i < e; i++) {
        r <<= 1;
        if (r & (1ull << 32))
            r ^= (1ull << 32) | POLY_NORMAL;
    }
    uint64_t v = 0;
    for (int d = 0; d < 32; d++)
        if (r >> d & 1)
            v |= 1ull << (63 - d);
    return v;
}
#endif

static void crc_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ ((c & 1) ? POLY_REFLECTED : 0);
        tab[0][i] = c;
    }
    for (int t = 1; t < 8; t++)
        for (int i = 0; i < 256; i++)
            tab[t][i] = (tab[t - 1][i] >> 8) ^ tab[0][tab[t - 1][i] & 0xFF];
#if HAVE_HW
    __builtin_cpu_init();
    hw_ok = __builtin_cpu_supports("sse4.2");
    build_shift(shift_big, LANE_BIG);
    build_shift(shift_small, LANE_SMALL);
    build_shift(shift_copy, LANE_COPY);
    for (int i = 0; i < FK_N; i++) {
        fold_k[i][0] = fold_const(fold_dist[i] + 63);
        fold_k[i][1] = fold_const(fold_dist[i] - 1);
    }
    fold_ok = hw_ok && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("vpclmulqdq") &&
              __builtin_cpu_supports("pclmul");
#endif
}

static inline void ensure_init(void)
{
    pthread_once(&init_once, crc_init);
}

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define SW_WORDS 1
#else
#define SW_WORDS 0
#endif

static inline uint32_t sw_byte(uint32_t c, uint8_t b)
{
    return (c >> 8) ^ tab[0][(c ^ b) & 0xFF];
}

/* Eight bytes at once (little-endian word v, first byte in the low bits). */
static inline uint32_t sw_word(uint32_t c, uint64_t v)
{
    v ^= c;
    return tab[7][v & 0xFF] ^ tab[6][(v >> 8) & 0xFF] ^ tab[5][(v >> 16) & 0xFF] ^
           tab[4][(v >> 24) & 0xFF] ^ tab[3][(v >> 32) & 0xFF] ^ tab[2][(v >> 40) & 0xFF] ^
           tab[1][(v >> 48) & 0xFF] ^ tab[0][v >> 56];
}

static uint32_t sw_raw(uint32_t c, const uint8_t *p, size_t n)
{
    while (n && ((uintptr_t)p & 7)) {
        c = sw_byte(c, *p++);
        n--;
    }
#if SW_WORDS
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        c = sw_word(c, v);
        p += 8;
        n -= 8;
    }
#endif
    while (n--)
        c = sw_byte(c, *p++);
    return c;
}

/* sw_raw that also stores every byte it sums at d. */
static uint32_t sw_copy_raw(uint32_t c, uint8_t *d, const uint8_t *s, size_t n)
{
    while (n && ((uintptr_t)s & 7)) {
        uint8_t b = *s++;
        *d++ = b;
        c = sw_byte(c, b);
        n--;
    }
#if SW_WORDS
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, s, 8);
        memcpy(d, &v, 8);
        c = sw_word(c, v);
        s += 8;
        d += 8;
        n -= 8;
    }
#endif
    while (n--) {
        uint8_t b = *s++;
        *d++ = b;
        c = sw_byte(c, b);
    }
    return c;
}

uint32_t emu_crc32c_sw(uint32_t crc, const void *buf, size_t len)
{
    ensure_init();
    if (!len)
        return crc;
    return ~sw_raw(~crc, buf, len);
}

uint32_t emu_crc32c_copy_sw(uint32_t crc, void *dst, const void *src, size_t len)
{
    ensure_init();
    if (!len)
        return crc;
    return ~sw_copy_raw(~crc, dst, src, len);
}

#if HAVE_HW
__attribute__((target("sse4.2"))) static inline uint64_t ld64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

/* Three chains over consecutive lanes of `lane` bytes (multiple of 8). */
__attribute__((target("sse4.2"))) static uint32_t
hw_three(uint32_t c, const uint8_t *p, size_t lane, const uint32_t sh[4][256])
{
    uint64_t a = c, b = 0, d = 0;
    const uint8_t *pb = p + lane, *pd = p + 2 * lane;
    for (size_t i = 0; i < lane; i += 8) {
        a = __builtin_ia32_crc32di(a, ld64(p + i));
        b = __builtin_ia32_crc32di(b, ld64(pb + i));
        d = __builtin_ia32_crc32di(d, ld64(pd + i));
    }
    uint32_t r = shift_apply(sh, (uint32_t)a) ^ (uint32_t)b;
    return shift_apply(sh, r) ^ (uint32_t)d;
}

__attribute__((target("sse4.2"))) static uint32_t hw_raw(uint32_t c, const uint8_t *p,
                                                         size_t n)
{
    while (n && ((uintptr_t)p & 7)) {
        c = __builtin_ia32_crc32qi(c, *p++);
        n--;
    }
    while (n >= 3 * LANE_BIG) {
        c = hw_three(c, p, LANE_BIG, shift_big);
        p += 3 * LANE_BIG;
        n -= 3 * LANE_BIG;
    }
    while (n >= 3 * LANE_SMALL) {
        c = hw_three(c, p, LANE_SMALL, shift_small);
        p += 3 * LANE_SMALL;
        n -= 3 * LANE_SMALL;
    }
    uint64_t c64 = c;
    while (n >= 8) {
        c64 = __builtin_ia32_crc32di(c64, ld64(p));
        p += 8;
        n -= 8;
    }
    c = (uint32_t)c64;
    while (n--)
        c = __builtin_ia32_crc32qi(c, *p++);
    return c;
}

/* Load a word once, store it at d, return it for the CRC: the sum is of
 * the bytes stored, whatever s holds a moment later. */
__attribute__((target("sse4.2"))) static inline uint64_t mv64(uint8_t *d, const uint8_t *s)
{
    uint64_t v;
    memcpy(&v, s, 8);
    memcpy(d, &v, 8);
    return v;
}

/* 16 bytes from s to d (SSE2, part of x86-64), then their CRC read back
 * from d: the words come straight from the store buffer. Storing word by
 * word instead (mv64) runs at half the speed: the 8-byte stores, not the
 * crc32 instructions, limit it (test_crc32c's benchmark, 2026-11-27). */
__attribute__((target("sse4.2"))) static inline uint64_t mv128(uint64_t c, uint8_t *d,
                                                               const uint8_t *s)
{
    _mm_storeu_si128((__m128i *)(void *)d, _mm_loadu_si128((const __m128i *)(const void *)s));
    c = __builtin_ia32_crc32di(c, ld64(d));
    return __builtin_ia32_crc32di(c, ld64(d + 8));
}

/* hw_three that also copies the three lanes (multiples of 16) to d. */
__attribute__((target("sse4.2"))) static uint32_t
hw_copy_three(uint32_t c, uint8_t *d, const uint8_t *s, size_t lane, const uint32_t sh[4][256])
{
    uint64_t a = c, b = 0, e = 0;
    uint8_t *db = d + lane, *de = d + 2 * lane;
    const uint8_t *sb = s + lane, *se = s + 2 * lane;
    for (size_t i = 0; i < lane; i += 16) {
        a = mv128(a, d + i, s + i);
        b = mv128(b, db + i, sb + i);
        e = mv128(e, de + i, se + i);
    }
    uint32_t r = shift_apply(sh, (uint32_t)a) ^ (uint32_t)b;
    return shift_apply(sh, r) ^ (uint32_t)e;
}

/* hw_raw that also stores every byte it sums at d. */
__attribute__((target("sse4.2"))) static uint32_t hw_copy_raw(uint32_t c, uint8_t *d,
                                                              const uint8_t *s, size_t n)
{
    while (n && ((uintptr_t)s & 7)) {
        uint8_t v = *s++;
        *d++ = v;
        c = __builtin_ia32_crc32qi(c, v);
        n--;
    }
    while (n >= 3 * LANE_COPY) {
        c = hw_copy_three(c, d, s, LANE_COPY, shift_copy);
        s += 3 * LANE_COPY;
        d += 3 * LANE_COPY;
        n -= 3 * LANE_COPY;
    }
    while (n >= 3 * LANE_SMALL) {
        c = hw_copy_three(c, d, s, LANE_SMALL, shift_small);
        s += 3 * LANE_SMALL;
        d += 3 * LANE_SMALL;
        n -= 3 * LANE_SMALL;
    }
    uint64_t c64 = c;
    while (n >= 8) {
        c64 = __builtin_ia32_crc32di(c64, mv64(d, s));
        s += 8;
        d += 8;
        n -= 8;
    }
    c = (uint32_t)c64;
    while (n--) {
        uint8_t v = *s++;
        *d++ = v;
        c = __builtin_ia32_crc32qi(c, v);
    }
    return c;
}

/* Folding. A CRC depends only on the message polynomial modulo P, so a
 * block of the message may be replaced by any polynomial congruent to it
 * at the same place. Each 128-bit lane L = Lo*x^64 + Hi (Lo the first 8
 * bytes) is carried D bits forward as Lo*(x^(D+64) mod P) + Hi*(x^D mod
 * P), two carry-less products of at most 96 bits, and added (XOR) to the
 * lane D bits further on. At the end the 16 lanes of the last 256 bytes
 * fold into one 16-byte block, whose CRC the crc32 instruction takes, and
 * then the bytes after it. The starting register is XORed into the first
 * four bytes (a reflected CRC's register is the pending sum of the next
 * 32 message bits). */
#define FOLD_TARGET __attribute__((target("sse4.2,pclmul,avx512f,vpclmulqdq")))

FOLD_TARGET static inline __m512i fold_k512(int i)
{
    return _mm512_broadcast_i32x4(_mm_set_epi64x((long long)fold_k[i][1], (long long)fold_k[i][0]));
}

/* x carried forward by k's distance, added to y (per 128-bit lane). */
FOLD_TARGET static inline __m512i fold512(__m512i x, __m512i k, __m512i y)
{
    return _mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(x, k, 0x00),
                                     _mm512_clmulepi64_epi128(x, k, 0x11), y, 0x96);
}

FOLD_TARGET static inline __m128i fold128(__m128i x, int i, __m128i y)
{
    __m128i k = _mm_set_epi64x((long long)fold_k[i][1], (long long)fold_k[i][0]);
    return _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x00),
                                       _mm_clmulepi64_si128(x, k, 0x11)),
                         y);
}

/* The four accumulators (the last 256 bytes summed so far) down to the
 * raw CRC of the message up to their end. */
FOLD_TARGET static uint32_t fold_finish(__m512i a0, __m512i a1, __m512i a2, __m512i a3)
{
    __m512i y = fold512(a0, fold_k512(FK_1536), a3);
    y = fold512(a1, fold_k512(FK_1024), y);
    y = fold512(a2, fold_k512(FK_512), y);
    __m128i f = _mm512_extracti32x4_epi32(y, 3);
    f = fold128(_mm512_extracti32x4_epi32(y, 0), FK_384, f);
    f = fold128(_mm512_extracti32x4_epi32(y, 1), FK_256, f);
    f = fold128(_mm512_extracti32x4_epi32(y, 2), FK_128, f);
    uint64_t c = __builtin_ia32_crc32di(0, (uint64_t)_mm_cvtsi128_si64(f));
    return (uint32_t)__builtin_ia32_crc32di(c, (uint64_t)_mm_extract_epi64(f, 1));
}

/* Raw register c over p[0..n), n >= FOLD_MIN: folds whole 256-byte
 * rounds, the rest (< 256 bytes) goes to hw_raw. If d is not NULL, every
 * byte is also stored there from the register that is summed. */
FOLD_TARGET static uint32_t fold_raw(uint32_t c, uint8_t *d, const uint8_t *p, size_t n)
{
    __m512i a0 = _mm512_loadu_si512(p), a1 = _mm512_loadu_si512(p + 64);
    __m512i a2 = _mm512_loadu_si512(p + 128), a3 = _mm512_loadu_si512(p + 192);
    if (d) {
        _mm512_storeu_si512(d, a0);
        _mm512_storeu_si512(d + 64, a1);
        _mm512_storeu_si512(d + 128, a2);
        _mm512_storeu_si512(d + 192, a3);
        d += 256;
    }
    a0 = _mm512_xor_si512(a0, _mm512_zextsi128_si512(_mm_cvtsi32_si128((int)c)));
    p += 256;
    n -= 256;
    const __m512i k = fold_k512(FK_2048);
    while (n >= 256) {
        __m512i b0 = _mm512_loadu_si512(p), b1 = _mm512_loadu_si512(p + 64);
        __m512i b2 = _mm512_loadu_si512(p + 128), b3 = _mm512_loadu_si512(p + 192);
        if (d) {
            _mm512_storeu_si512(d, b0);
            _mm512_storeu_si512(d + 64, b1);
            _mm512_storeu_si512(d + 128, b2);
            _mm512_storeu_si512(d + 192, b3);
            d += 256;
        }
        a0 = fold512(a0, k, b0);
        a1 = fold512(a1, k, b1);
        a2 = fold512(a2, k, b2);
        a3 = fold512(a3, k, b3);
        p += 256;
        n -= 256;
    }
    c = fold_finish(a0, a1, a2, a3);
    /* Clean upper register state before code that may use SSE without
     * VEX (hw_copy_raw, the caller): GCC inserted no vzeroupper here. */
    _mm256_zeroupper();
    return d ? hw_copy_raw(c, d, p, n) : hw_raw(c, p, n);
}

uint32_t emu_crc32c_fold(uint32_t crc, const void *buf, size_t len)
{
    ensure_init();
    if (len < FOLD_MIN)
        return emu_crc32c_hw(crc, buf, len);
    return ~fold_raw(~crc, NULL, buf, len);
}

uint32_t emu_crc32c_copy_fold(uint32_t crc, void *dst, const void *src, size_t len)
{
    ensure_init();
    if (len < FOLD_MIN)
        return emu_crc32c_copy_hw(crc, dst, src, len);
    return ~fold_raw(~crc, dst, src, len);
}

bool emu_crc32c_fold_available(void)
{
    ensure_init();
    return fold_ok;
}

uint32_t emu_crc32c_hw(uint32_t crc, const void *buf, size_t len)
{
    ensure_init();
    if (!len)
        return crc;
    return ~hw_raw(~crc, buf, len);
}

uint32_t emu_crc32c_copy_hw(uint32_t crc, void *dst, const void *src, size_t len)
{
    ensure_init();
    if (!len)
        return crc;
    return ~hw_copy_raw(~crc, dst, src, len);
}

bool emu_crc32c_hw_available(void)
{
    ensure_init();
    return hw_ok;
}
#else
uint32_t emu_crc32c_hw(uint32_t crc, const void *buf, size_t len)
{
    return emu_crc32c_sw(crc, buf, len);
}

uint32_t emu_crc32c_copy_hw(uint32_t crc, void *dst, const void *src, size_t len)
{
    return emu_crc32c_copy_sw(crc, dst, src, len);
}

bool emu_crc32c_hw_available(void)
{
    return false;
}

uint32_t emu_crc32c_fold(uint32_t crc, const void *buf, size_t len)
{
    return emu_crc32c_sw(crc, buf, len);
}

uint32_t emu_crc32c_copy_fold(uint32_t crc, void *dst, const void *src, size_t len)
{
    return emu_crc32c_copy_sw(crc, dst, src, len);
}

bool emu_crc32c_fold_available(void)
{
    return false;
}
#endif

static inline uint32_t raw_update(uint32_t c, const uint8_t *p, size_t n)
{
#if HAVE_HW
    if (fold_ok && n >= FOLD_MIN)
        return fold_raw(c, NULL, p, n);
    if (hw_ok)
        return hw_raw(c, p, n);
#endif
    return sw_raw(c, p, n);
}

uint32_t emu_crc32c(uint32_t crc, const void *buf, size_t len)
{
    ensure_init();
    if (!len)
        return crc;
    return ~raw_update(~crc, buf, len);
}

uint32_t emu_crc32c_copy(uint32_t crc, void *dst, const void *src, size_t len)
{
    ensure_init();
    if (!len)
        return crc;
#if HAVE_HW
    if (fold_ok && len >= FOLD_MIN)
        return ~fold_raw(~crc, dst, src, len);
    if (hw_ok)
        return ~hw_copy_raw(~crc, dst, src, len);
#endif
    return ~sw_copy_raw(~crc, dst, src, len);
}

uint32_t emu_crc32c_iov(uint32_t crc, const struct iovec *iov, int iovcnt)
{
    ensure_init();
    uint32_t c = ~crc;
    for (int i = 0; i < iovcnt; i++)
        if (iov[i].iov_len)
            c = raw_update(c, iov[i].iov_base, iov[i].iov_len);
    return ~c;
}

const char *emu_crc32c_impl(void)
{
    if (emu_crc32c_fold_available())
        return "vpclmulqdq";
    return emu_crc32c_hw_available() ? "sse4.2" : "slice8";
}
