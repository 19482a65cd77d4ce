/* CRC32c: known answers (RFC 3720 B.4 vectors, reference §2.8.3), hardware
 * vs table equality, incremental/iovec continuation, the fused copy+CRC
 * against memcpy + plain CRC, and a throughput printout (GB/s) for the
 * test log. */
#include "emu/crc32c.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef uint32_t (*crc_fn)(uint32_t, const void *, size_t);

static const struct {
    const char *name;
    crc_fn fn;
} impls[] = {{"dispatch", emu_crc32c},
             {"sw", emu_crc32c_sw},
             {"hw", emu_crc32c_hw},
             {"fold", emu_crc32c_fold}};

static bool impl_usable(int i)
{
    if (impls[i].fn == emu_crc32c_fold)
        return emu_crc32c_fold_available();
    return impls[i].fn != emu_crc32c_hw || emu_crc32c_hw_available();
}

static uint32_t vec(crc_fn fn, int kind)
{
    uint8_t b[32];
    for (int i = 0; i < 32; i++)
        b[i] = kind == 0 ? 0x00 : kind == 1 ? 0xFF : kind == 2 ? (uint8_t)i : (uint8_t)(31 - i);
    return fn(0, b, sizeof b);
}

START_TEST(known_answers)
{
    if (!impl_usable(_i))
        return;
    crc_fn fn = impls[_i].fn;
    ck_assert_uint_eq(fn(0, "123456789", 9), 0xE3069283u);
    ck_assert_uint_eq(vec(fn, 0), 0x8A9136AAu);
    ck_assert_uint_eq(vec(fn, 1), 0x62A8AB43u);
    ck_assert_uint_eq(vec(fn, 2), 0x46DD794Eu);
    ck_assert_uint_eq(vec(fn, 3), 0x113FDB5Cu);
    ck_assert_uint_eq(fn(0, NULL, 0), 0u);
    ck_assert_uint_eq(fn(0x12345678u, NULL, 0), 0x12345678u);
    /* RFC 3720 B.4 iSCSI Read (10) command PDU */
    static const uint8_t iscsi[48] = {
        0x01, 0xc0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x00,
        0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0x18, 0x28, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};
    uint8_t le[4];
    emu_crc32c_put_le(le, fn(0, iscsi, sizeof iscsi));
    ck_assert_uint_eq(le[0], 0x56); /* wire bytes 56 3a 96 d9 */
    ck_assert_uint_eq(le[1], 0x3a);
    ck_assert_uint_eq(le[2], 0x96);
    ck_assert_uint_eq(le[3], 0xd9);
    ck_assert_uint_eq(emu_crc32c_get_le(le), fn(0, iscsi, sizeof iscsi));
}
END_TEST

/* The reference's "Hello, iWARP!" Send FPDU: CRC field 13 43 08 1e. */
START_TEST(fpdu_example)
{
    static const uint8_t f[36] = {
        0x00, 0x1f, 0x41, 0x43, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 'H', 'e', 'l', 'l',
        'o', ',', ' ', 'i', 'W', 'A', 'R', 'P', '!', 0, 0, 0};
    ck_assert_uint_eq(emu_crc32c(0, f, sizeof f), 0x1e084313u);
}
END_TEST

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint8_t rnd8(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint8_t)(rng >> 24);
}

/* Bitwise reference, independent of both implementations. */
static uint32_t crc_bitwise(const uint8_t *p, size_t n)
{
    uint32_t c = 0xFFFFFFFFu;
    while (n--) {
        c ^= *p++;
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ ((c & 1) ? 0x82F63B78u : 0);
    }
    return ~c;
}

START_TEST(hw_equals_sw_random)
{
    size_t max = 3 * 4096 * 3 + 100;
    uint8_t *buf = malloc(max + 16);
    for (size_t i = 0; i < max + 16; i++)
        buf[i] = rnd8();
    /* every length up to 1100 at every alignment 0..7, then sizes around
     * the interleave thresholds (768 and 12288). */
    for (size_t len = 0; len <= 1100; len++) {
        size_t al = len & 7;
        uint32_t ref = emu_crc32c_sw(0, buf + al, len);
        if (len < 64)
            ck_assert_uint_eq(ref, crc_bitwise(buf + al, len));
        ck_assert_uint_eq(emu_crc32c(0, buf + al, len), ref);
        if (emu_crc32c_hw_available())
            ck_assert_uint_eq(emu_crc32c_hw(0, buf + al, len), ref);
    }
    static const size_t sizes[] = {767, 768, 769, 1535, 1536, 12287, 12288, 12289,
                                   24576 + 768 + 7, 36864 + 100};
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++)
        for (size_t al = 0; al < 8; al += 3) {
            size_t len = sizes[k];
            ck_assert(len + al <= max + 16);
            uint32_t ref = emu_crc32c_sw(0, buf + al, len);
            ck_assert_uint_eq(ref, crc_bitwise(buf + al, len));
            if (emu_crc32c_hw_available())
                ck_assert_uint_eq(emu_crc32c_hw(0, buf + al, len), ref);
        }
    free(buf);
}
END_TEST

/* Folding: every length up to 2100 (the 512-byte threshold, whole
 * 256-byte rounds, every tail) at every alignment and a non-zero start,
 * then long buffers. */
START_TEST(fold_equals_sw)
{
    if (!emu_crc32c_fold_available())
        return;
    size_t max = (1u << 20) + 300;
    uint8_t *buf = malloc(max + 16);
    for (size_t i = 0; i < max + 16; i++)
        buf[i] = rnd8();
    for (size_t len = 0; len <= 2100; len++)
        for (size_t al = 0; al < 8; al += (len < 600 ? 1 : 3)) {
            uint32_t seed = (uint32_t)(len * 0x9E3779B9u);
            ck_assert_uint_eq(emu_crc32c_fold(seed, buf + al, len), emu_crc32c_sw(seed, buf + al, len));
        }
    static const size_t sizes[] = {4096, 65521, 65528, 65536, 100000, (1u << 20) + 255};
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++)
        ck_assert_uint_eq(emu_crc32c_fold(7, buf + 5, sizes[k]), emu_crc32c_sw(7, buf + 5, sizes[k]));
    /* all zeros and all ones, where a lost lane or constant would not hide */
    memset(buf, 0, 4096);
    ck_assert_uint_eq(emu_crc32c_fold(0, buf, 4096), crc_bitwise(buf, 4096));
    memset(buf, 0xFF, 4096);
    ck_assert_uint_eq(emu_crc32c_fold(0, buf, 4096), crc_bitwise(buf, 4096));
    free(buf);
}
END_TEST

START_TEST(incremental_and_iov)
{
    uint8_t buf[20000];
    for (size_t i = 0; i < sizeof buf; i++)
        buf[i] = rnd8();
    uint32_t whole = emu_crc32c(0, buf, sizeof buf);
    for (size_t cut = 0; cut < sizeof buf; cut += 997) {
        uint32_t c = emu_crc32c(0, buf, cut);
        ck_assert_uint_eq(emu_crc32c(c, buf + cut, sizeof buf - cut), whole);
        c = emu_crc32c_sw(0, buf, cut);
        ck_assert_uint_eq(emu_crc32c_sw(c, buf + cut, sizeof buf - cut), whole);
    }
    struct iovec iov[5] = {{buf, 3}, {buf + 3, 0}, {buf + 3, 5000},
                           {buf + 5003, 14000}, {buf + 19003, 997}};
    ck_assert_uint_eq(emu_crc32c_iov(0, iov, 5), whole);
    ck_assert_uint_eq(emu_crc32c_iov(0, iov, 0), 0u);
    /* continue an iovec run from a previous value */
    uint32_t c = emu_crc32c(0, buf, 3);
    ck_assert_uint_eq(emu_crc32c_iov(c, iov + 1, 4), whole);
    ck_assert_str_eq(emu_crc32c_impl(), emu_crc32c_fold_available() ? "vpclmulqdq"
                                        : emu_crc32c_hw_available() ? "sse4.2"
                                                                    : "slice8");
}
END_TEST

typedef uint32_t (*copy_fn)(uint32_t, void *, const void *, size_t);

static const struct {
    const char *name;
    copy_fn fn;
} copies[] = {{"dispatch", emu_crc32c_copy},
              {"sw", emu_crc32c_copy_sw},
              {"hw", emu_crc32c_copy_hw},
              {"fold", emu_crc32c_copy_fold}};

static bool copy_usable(int i)
{
    if (copies[i].fn == emu_crc32c_copy_fold)
        return emu_crc32c_fold_available();
    return copies[i].fn != emu_crc32c_copy_hw || emu_crc32c_hw_available();
}

/* One fused call against memcpy + plain CRC: the same value, dst equal to
 * src, and not a byte written outside dst[0..len). */
static void check_copy(copy_fn fn, uint32_t seed, const uint8_t *src, size_t len, size_t dal)
{
    enum { GUARD = 16 };
    uint8_t *out = malloc(len + dal + 2 * GUARD);
    memset(out, 0xA5, len + dal + 2 * GUARD);
    uint8_t *dst = out + GUARD + dal;
    uint32_t ref = emu_crc32c_sw(seed, src, len);
    ck_assert_uint_eq(fn(seed, dst, src, len), ref);
    ck_assert(len == 0 || memcmp(dst, src, len) == 0);
    for (size_t i = 0; i < GUARD + dal; i++)
        ck_assert_uint_eq(out[i], 0xA5);
    for (size_t i = 0; i < GUARD; i++)
        ck_assert_uint_eq(dst[len + i], 0xA5);
    free(out);
}

/* Every length 0..320 at every source alignment 0..7 (destination
 * alignment varying independently), lengths across the folding threshold
 * (512), then sizes around the interleave thresholds (768, 3072, 12288)
 * and FPDU-sized and larger ones, for the dispatcher and every
 * implementation. */
START_TEST(copy_equals_memcpy_and_crc)
{
    if (!copy_usable(_i))
        return;
    copy_fn fn = copies[_i].fn;
    size_t max = (1u << 20) + 4096;
    uint8_t *buf = malloc(max + 16);
    for (size_t i = 0; i < max + 16; i++)
        buf[i] = rnd8();
    for (size_t len = 0; len <= 320; len++)
        for (size_t al = 0; al < 8; al++)
            check_copy(fn, len & 1 ? 0x12345678u : 0, buf + al, len, (al * 3 + len) & 7);
    for (size_t len = 500; len <= 1300; len += 7)
        check_copy(fn, (uint32_t)len, buf + (len & 7), len, (len >> 3) & 7);
    static const size_t sizes[] = {767, 768, 769, 1535, 1536, 3071, 3072, 3073, 12287, 12288, 12289,
                                   24576 + 768 + 7, 65521, 65528, (1u << 20) + 5};
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++)
        for (size_t al = 0; al < 8; al += 3)
            check_copy(fn, (uint32_t)k * 0x9E3779B9u, buf + al, sizes[k], 7 - al);
    /* NULL with length 0 keeps the value */
    ck_assert_uint_eq(fn(0xCAFEF00Du, NULL, NULL, 0), 0xCAFEF00Du);
    free(buf);
}
END_TEST

/* Continuing a fused copy from a header's CRC, chunk by chunk, gives the
 * CRC of the whole, as the transmit side builds an FPDU's trailer. */
START_TEST(copy_continues)
{
    uint8_t src[20000], dst[20000];
    for (size_t i = 0; i < sizeof src; i++)
        src[i] = rnd8();
    uint32_t whole = emu_crc32c(0, src, sizeof src);
    for (size_t cut = 0; cut < sizeof src; cut += 1231) {
        memset(dst, 0, sizeof dst);
        uint32_t c = emu_crc32c(0, src, cut);
        c = emu_crc32c_copy(c, dst + cut, src + cut, sizeof src - cut);
        ck_assert_uint_eq(c, whole);
        ck_assert(memcmp(dst + cut, src + cut, sizeof src - cut) == 0);
    }
}
END_TEST

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double bench(crc_fn fn, const uint8_t *b, size_t sz, double secs)
{
    volatile uint32_t sink = 0;
    double t0 = now_s(), t;
    uint64_t it = 0;
    do {
        sink ^= fn(0, b, sz);
        it++;
        t = now_s();
    } while (t - t0 < secs);
    (void)sink;
    return (double)sz * (double)it / (t - t0) / 1e9;
}

static uint8_t *copy_dst;

static uint32_t memcpy_then_crc(uint32_t c, const void *b, size_t sz)
{
    memcpy(copy_dst, b, sz);
    return emu_crc32c(c, copy_dst, sz);
}

static uint32_t memcpy_then_crc_hw(uint32_t c, const void *b, size_t sz)
{
    memcpy(copy_dst, b, sz);
    return emu_crc32c_hw(c, copy_dst, sz);
}

static uint32_t fused_copy(uint32_t c, const void *b, size_t sz)
{
    return emu_crc32c_copy(c, copy_dst, b, sz);
}

static uint32_t fused_copy_hw(uint32_t c, const void *b, size_t sz)
{
    return emu_crc32c_copy_hw(c, copy_dst, b, sz);
}

static uint32_t memcpy_only(uint32_t c, const void *b, size_t sz)
{
    memcpy(copy_dst, b, sz);
    return c ^ copy_dst[sz - 1];
}

/* Not a pass/fail test on speed: prints throughput into the log. */
START_TEST(benchmark)
{
    static const size_t sizes[] = {64, 1024, 4096, 65536, 1 << 20};
    uint8_t *b = aligned_alloc(4096, 1 << 20);
    for (size_t i = 0; i < (1 << 20); i++)
        b[i] = (uint8_t)(i * 131);
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
        double sw = bench(emu_crc32c_sw, b, sizes[k], 0.1);
        double hw = emu_crc32c_hw_available() ? bench(emu_crc32c_hw, b, sizes[k], 0.1) : 0;
        double fold = emu_crc32c_fold_available() ? bench(emu_crc32c_fold, b, sizes[k], 0.1) : 0;
        printf("crc32c bench size=%zu sw(slice8)=%.2f GB/s hw(sse4.2)=%.2f GB/s "
               "fold(vpclmulqdq)=%.2f GB/s\n",
               sizes[k], sw, hw, fold);
        ck_assert(sw > 0);
    }
    /* The transmit side's staging: memcpy then CRC, against one fused pass
     * (the crc32 instruction's, and the dispatcher's: folding if the CPU
     * has it). The destination is offset from the 4 KiB-aligned source, as
     * a staging area's would be, to avoid measuring 4K aliasing stalls. */
    copy_dst = aligned_alloc(4096, (1 << 20) + 4096);
    uint8_t *dst_base = copy_dst;
    copy_dst += 64;
    for (size_t k = 2; k < sizeof sizes / sizeof *sizes; k++) {
        bool hw = emu_crc32c_hw_available();
        double mc = bench(memcpy_only, b, sizes[k], 0.1);
        double two_hw = hw ? bench(memcpy_then_crc_hw, b, sizes[k], 0.1) : 0;
        double one_hw = hw ? bench(fused_copy_hw, b, sizes[k], 0.1) : 0;
        double two = bench(memcpy_then_crc, b, sizes[k], 0.1);
        double one = bench(fused_copy, b, sizes[k], 0.1);
        printf("crc32c copy bench size=%zu memcpy=%.2f | sse4.2: memcpy+crc=%.2f fused=%.2f | "
               "%s: memcpy+crc=%.2f fused=%.2f GB/s\n",
               sizes[k], mc, two_hw, one_hw, emu_crc32c_impl(), two, one);
    }
    copy_dst = dst_base;
    free(copy_dst);
    fflush(stdout);
    free(b);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("crc32c");
    TCase *tc = tcase_create("core");
    tcase_add_loop_test(tc, known_answers, 0, 4);
    tcase_add_test(tc, fpdu_example);
    tcase_add_test(tc, hw_equals_sw_random);
    tcase_add_test(tc, fold_equals_sw);
    tcase_add_test(tc, incremental_and_iov);
    tcase_add_loop_test(tc, copy_equals_memcpy_and_crc, 0, 4);
    tcase_add_test(tc, copy_continues);
    tcase_add_test(tc, benchmark);
    tcase_set_timeout(tc, 60);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int nf = srunner_ntests_failed(sr);
    srunner_free(sr);
    return nf ? 1 : 0;
}
