/* PZ and EVD objects: create/query/free, argument errors, in-use rules. */
#include "test/lib/prov_fixture.h"

START_TEST(pz_lifecycle_and_errors)
{
    DAT_PROVIDER *p = fx_provider("t-pz", "lo", DAT_FALSE);
    DAT_IA_HANDLE ia = fx_open(p, NULL);
    DAT_PZ_HANDLE pz = DAT_HANDLE_NULL;
    ck_assert_dat_err(p->pz_create_func(ia, NULL), DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    ck_assert_dat_ok(p->pz_create_func(ia, &pz));
    ck_assert_ptr_nonnull(pz);
    ck_assert_ptr_eq(*(DAT_PROVIDER **)pz, p); /* dispatch word */

    DAT_PZ_PARAM pp = {0};
    ck_assert_dat_ok(p->pz_query_func(pz, DAT_PZ_FIELD_ALL, &pp));
    ck_assert_ptr_eq(pp.ia_handle, ia); /* no registry mapping here */
    ck_assert_dat_ok(p->pz_query_func(pz, 0, &pp));
    ck_assert_dat_err(p->pz_query_func(pz, 0x2, &pp), DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    ck_assert_dat_err(p->pz_query_func(pz, DAT_PZ_FIELD_ALL, NULL), DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);

    /* In use (an LMR/EP/RMR/SRQ holds a dependency): free refuses. */
    struct sd_handle *h = (struct sd_handle *)pz;
    ck_assert_int_eq(sd_handle_dep_get(h), 1);
    ck_assert_int_eq(sd_handle_dep_get(h), 1);
    ck_assert_dat_err(p->pz_free_func(pz), DAT_INVALID_STATE, DAT_INVALID_STATE_PZ_IN_USE);
    sd_handle_dep_put(h);
    ck_assert_dat_err(p->pz_free_func(pz), DAT_INVALID_STATE, DAT_INVALID_STATE_PZ_IN_USE);
    sd_handle_dep_put(h);
    ck_assert_dat_ok(p->pz_query_func(pz, DAT_PZ_FIELD_ALL, &pp));
    ck_assert_dat_ok(p->pz_free_func(pz));
    ck_assert_dat_err(p->pz_free_func(pz), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_PZ);

    /* A dying PZ cannot gain users. */
    ck_assert_dat_ok(p->pz_create_func(ia, &pz));
    h = (struct sd_handle *)pz;
    ck_assert_int_eq(sd_handle_try_retire(h), 1);
    ck_assert_int_eq(sd_handle_dep_get(h), 0);
    sd_handle_unretire(h);
    ck_assert_int_eq(sd_handle_dep_get(h), 1);
    sd_handle_dep_put(h);
    ck_assert_dat_ok(p->pz_free_func(pz));

    ck_assert_dat_ok(p->ia_close_func(ia, DAT_CLOSE_GRACEFUL_FLAG));
    ck_assert_dat_err(p->pz_create_func(ia, &pz), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);
    ck_assert_uint_eq(sd_handle_live_count(), 0);
}
END_TEST

START_TEST(pz_of_other_ia_is_independent)
{
    DAT_PROVIDER *p = fx_provider("t-pz2", "lo", DAT_FALSE);
    DAT_IA_HANDLE a = fx_open(p, NULL), b = fx_open(p, NULL);
    DAT_PZ_HANDLE pa, pb;
    ck_assert_dat_ok(p->pz_create_func(a, &pa));
    ck_assert_dat_ok(p->pz_create_func(b, &pb));
    ck_assert_dat_ok(p->ia_close_func(a, DAT_CLOSE_ABRUPT_FLAG));
    DAT_PZ_PARAM pp;
    ck_assert_dat_err(p->pz_query_func(pa, DAT_PZ_FIELD_ALL, &pp), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_PZ);
    ck_assert_dat_ok(p->pz_query_func(pb, DAT_PZ_FIELD_ALL, &pp));
    ck_assert_ptr_eq(pp.ia_handle, b);
    ck_assert_dat_ok(p->pz_free_func(pb));
    ck_assert_dat_ok(p->ia_close_func(b, DAT_CLOSE_GRACEFUL_FLAG));
}
END_TEST

START_TEST(evd_create_errors)
{
    DAT_PROVIDER *p = fx_provider("t-evd", "lo", DAT_FALSE);
    DAT_IA_HANDLE ia = fx_open(p, NULL);
    DAT_EVD_HANDLE evd = DAT_HANDLE_NULL;
    ck_assert_dat_err(p->evd_create_func(ia, -1, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &evd), DAT_INVALID_PARAMETER,
                      DAT_INVALID_ARG2);
    ck_assert_dat_err(p->evd_create_func(ia, SD_MAX_EVD_QLEN + 1, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &evd),
                      DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    ck_assert_dat_err(p->evd_create_func(ia, 8, DAT_HANDLE_NULL, 0, &evd), DAT_INVALID_PARAMETER,
                      DAT_INVALID_ARG4);
    ck_assert_dat_err(p->evd_create_func(ia, 8, DAT_HANDLE_NULL, (DAT_EVD_FLAGS)0x400, &evd),
                      DAT_INVALID_PARAMETER, DAT_INVALID_ARG4);
    ck_assert_dat_err(p->evd_create_func(ia, 8, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, NULL), DAT_INVALID_PARAMETER,
                      DAT_INVALID_ARG5);
    ck_assert_dat_err(p->evd_create_func(ia, 8, (DAT_CNO_HANDLE)&evd, DAT_EVD_DTO_FLAG, &evd),
                      DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_CNO);
    ck_assert_ptr_null(evd);
    ck_assert_dat_ok(p->evd_create_func(ia, SD_MAX_EVD_QLEN, DAT_HANDLE_NULL,
                                        DAT_EVD_DEFAULT_FLAG | DAT_EVD_SOFTWARE_FLAG, &evd));
    DAT_EVD_PARAM ep;
    ck_assert_dat_ok(p->evd_query_func(evd, DAT_EVD_FIELD_ALL, &ep));
    ck_assert_int_eq(ep.evd_qlen, SD_MAX_EVD_QLEN);
    ck_assert_int_eq(ep.evd_flags, DAT_EVD_DEFAULT_FLAG | DAT_EVD_SOFTWARE_FLAG);
    ck_assert_ptr_eq(ep.ia_handle, ia);
    ck_assert_dat_err(p->evd_query_func(evd, 0x20, &ep), DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    ck_assert_dat_err(p->evd_query_func(evd, DAT_EVD_FIELD_ALL, NULL), DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    /* Fed by a stream (an EP will hold a dependency): free refuses. */
    ck_assert_int_eq(sd_handle_dep_get((struct sd_handle *)evd), 1);
    ck_assert_dat_err(p->evd_free_func(evd), DAT_INVALID_STATE, DAT_INVALID_STATE_EVD_IN_USE);
    sd_handle_dep_put((struct sd_handle *)evd);
    ck_assert_dat_ok(p->evd_free_func(evd));
    ck_assert_dat_ok(p->ia_close_func(ia, DAT_CLOSE_GRACEFUL_FLAG));
    ck_assert_uint_eq(sd_handle_live_count(), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("provider-pz-evd");
    TCase *tc = tcase_create("pz-evd");
    tcase_add_test(tc, pz_lifecycle_and_errors);
    tcase_add_test(tc, pz_of_other_ia_is_independent);
    tcase_add_test(tc, evd_create_errors);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
