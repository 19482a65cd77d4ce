/* The provider's 81-slot DAT_PROVIDER table is complete (no slot left NULL,
 * so no DAT call can reach a missing function), and slot 79 (ia_ha_related)
 * answers the way ia_ha.c documents. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "lib/provider/provider.h"
#include "test/lib/prov_fixture.h"

START_TEST(every_slot_filled)
{
    DAT_PROVIDER *p = fx_provider("softdat-table", "127.0.0.1", DAT_FALSE);
    ck_assert_ptr_nonnull(p->device_name);
    ck_assert_str_eq(p->device_name, "softdat-table");
    /* Slots 2..80 are function pointers (0 is the name, 1 the extension). */
    void *const *slot = (void *const *)(const void *)p;
    ck_assert_uint_eq(sizeof *p, 81 * sizeof(void *));
    for (int i = 2; i < 81; i++)
        ck_assert_msg(slot[i] != NULL, "DAT_PROVIDER slot %d is NULL", i);
}
END_TEST

START_TEST(ha_related)
{
    DAT_PROVIDER *p4 = fx_provider("softdat-ha4", "127.0.0.1", DAT_FALSE);
    fx_provider("softdat-ha6", "::1", DAT_FALSE);
    fx_provider("softdat-ha4b", "lo", DAT_FALSE);
    DAT_IA_HANDLE ia = fx_open(p4, NULL);
    DAT_BOOLEAN rel = 7;
    /* Same interface (lo), whatever the address family: related. */
    ck_assert_dat_ok(p4->ia_ha_related_func(ia, (DAT_NAME_PTR) "softdat-ha6", &rel));
    ck_assert_int_eq(rel, DAT_TRUE);
    ck_assert_dat_ok(p4->ia_ha_related_func(ia, (DAT_NAME_PTR) "softdat-ha4b", &rel));
    ck_assert_int_eq(rel, DAT_TRUE);
    ck_assert_dat_ok(p4->ia_ha_related_func(ia, (DAT_NAME_PTR) "softdat-ha4", &rel));
    ck_assert_int_eq(rel, DAT_TRUE);
    /* A name this provider was never registered under is unknown. */
    ck_assert_dat_err(p4->ia_ha_related_func(ia, (DAT_NAME_PTR) "ofa-v2-mlx4_0-1u", &rel), DAT_INVALID_PARAMETER,
                      DAT_INVALID_ARG2);
    ck_assert_dat_err(p4->ia_ha_related_func(ia, NULL, &rel), DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    ck_assert_dat_err(p4->ia_ha_related_func(ia, (DAT_NAME_PTR) "softdat-ha6", NULL), DAT_INVALID_PARAMETER,
                      DAT_INVALID_ARG3);
    ck_assert_dat_err(p4->ia_ha_related_func(NULL, (DAT_NAME_PTR) "softdat-ha6", &rel), DAT_INVALID_HANDLE,
                      DAT_INVALID_HANDLE_IA);
    ck_assert_dat_ok(p4->ia_close_func(ia, DAT_CLOSE_ABRUPT_FLAG));
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("provider_table");
    TCase *tc = tcase_create("table");
    tcase_add_test(tc, every_slot_filled);
    tcase_add_test(tc, ha_related);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
