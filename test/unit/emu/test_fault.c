/* emu/fault: SOFTDAT_FAULT parsing and triggers (nth, every, after, seeded
 * pct: the same seed gives the same faults). */
#include "emu/fault.h"

#include <check.h>

static int hits(enum emu_fault_kind k, int n, char *pattern)
{
    int h = 0;
    for (int i = 0; i < n; i++) {
        bool x = emu_fault_hit(k);
        h += x;
        if (pattern)
            pattern[i] = x ? 'X' : '.';
    }
    if (pattern)
        pattern[n] = '\0';
    return h;
}

START_TEST(off_by_default)
{
    ck_assert_int_eq(emu_fault_configure(NULL), 0);
    ck_assert(!emu_fault_active());
    for (int k = 0; k < EMU_FAULT_KINDS; k++)
        ck_assert_int_eq(hits((enum emu_fault_kind)k, 100, NULL), 0);
    ck_assert_uint_eq(emu_fault_connect_delay_us(), 0);
    ck_assert_uint_eq(emu_fault_completion_delay_us(), 0);
}
END_TEST

START_TEST(triggers)
{
    char p[32];
    ck_assert_int_eq(emu_fault_configure("create=nth:3,register=every:4,refuse=after:5,drop=nth:1"), 0);
    ck_assert(emu_fault_active());
    hits(EMU_FAULT_CREATE, 8, p);
    ck_assert_str_eq(p, "..X.....");
    hits(EMU_FAULT_REGISTER, 9, p);
    ck_assert_str_eq(p, "...X...X.");
    hits(EMU_FAULT_REFUSE, 7, p);
    ck_assert_str_eq(p, ".....XX");
    hits(EMU_FAULT_DROP, 3, p);
    ck_assert_str_eq(p, "X..");
    ck_assert_int_eq(hits(EMU_FAULT_CRC, 50, NULL), 0); /* not configured */
}
END_TEST

START_TEST(pct_is_seeded)
{
    char a[31], b[31], c[31];
    emu_fault_configure("crc=pct:30,seed=7");
    hits(EMU_FAULT_CRC, 30, a);
    emu_fault_configure("crc=pct:30,seed=7");
    hits(EMU_FAULT_CRC, 30, b);
    emu_fault_configure("crc=pct:30,seed=8");
    hits(EMU_FAULT_CRC, 30, c);
    ck_assert_str_eq(a, b);
    ck_assert_str_ne(a, c);
    emu_fault_configure("crc=pct:30,seed=1");
    int n = hits(EMU_FAULT_CRC, 10000, NULL);
    ck_assert_int_gt(n, 2700);
    ck_assert_int_lt(n, 3300);
    emu_fault_configure("crc=pct:0");
    ck_assert_int_eq(hits(EMU_FAULT_CRC, 1000, NULL), 0);
    emu_fault_configure("crc=pct:100");
    ck_assert_int_eq(hits(EMU_FAULT_CRC, 1000, NULL), 1000);
}
END_TEST

START_TEST(delays_and_bad_keys)
{
    ck_assert_int_eq(emu_fault_configure("connect_delay_ms=250,completion_delay_us=1500"), 0);
    ck_assert(emu_fault_active());
    ck_assert_uint_eq(emu_fault_connect_delay_us(), 250000);
    ck_assert_uint_eq(emu_fault_completion_delay_us(), 1500);
    /* each bad item is reported and ignored; the good ones stay */
    ck_assert_int_eq(emu_fault_configure("create=nth:0,bogus=1,register=sometimes,drop,crc=pct:101,refuse=nth:2"),
                     5);
    ck_assert(emu_fault_active());
    char p[8];
    hits(EMU_FAULT_REFUSE, 3, p);
    ck_assert_str_eq(p, ".X.");
    ck_assert_int_eq(hits(EMU_FAULT_CREATE, 10, NULL), 0);
    ck_assert_int_eq(emu_fault_configure("nothing=1"), 1);
    ck_assert(!emu_fault_active());
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("emu_fault");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, off_by_default);
    tcase_add_test(tc, triggers);
    tcase_add_test(tc, pct_is_seeded);
    tcase_add_test(tc, delays_and_bad_keys);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
