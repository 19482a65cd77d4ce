/* Return codes of dat_pz_create, dat_pz_query and dat_pz_free
 * (L7672-7760): bad handles with subtype IA/PZ, bad parameters, max_pzs,
 * and PZ_IN_USE for every kind of user (LMR, RMR; EP and SRQ through the
 * dependency they take, which is what ep.c/srq.c use). */
#include <stdint.h>
#include <stdlib.h>

#include "lib/provider/pz.h"
#include "test/lib/prov_fixture.h"

static _Alignas(64) char junk[256];

static DAT_PROVIDER *prov(void)
{
    return fx_provider("t-rc-pz", "lo", DAT_FALSE);
}

START_TEST(create_errors)
{
    DAT_PROVIDER *p = prov();
    DAT_IA_HANDLE ia = fx_open(p, NULL), dead = fx_open(p, NULL);
    DAT_PZ_HANDLE pz;
    ck_assert_dat_ok(p->pz_create_func(ia, &pz));
    ck_assert_dat_ok(p->ia_close_func(dead, DAT_CLOSE_ABRUPT_FLAG));
    DAT_IA_HANDLE bad[] = {DAT_HANDLE_NULL, (DAT_IA_HANDLE)junk, (DAT_IA_HANDLE)pz, dead};
    DAT_PZ_HANDLE out = DAT_HANDLE_NULL;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ck_assert_dat_err(p->pz_create_func(bad[i], &out), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);
    ck_assert_ptr_null(out);
    ck_assert_dat_err(p->pz_create_func(ia, NULL), DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    ck_assert_dat_ok(p->pz_free_func(pz));
    ck_assert_dat_ok(p->ia_close_func(ia, DAT_CLOSE_GRACEFUL_FLAG));
}
END_TEST

START_TEST(create_beyond_max_pzs)
{
    DAT_PROVIDER *p = prov();
    DAT_IA_HANDLE ia = fx_open(p, NULL);
    DAT_IA_ATTR a;
    ck_assert_dat_ok(p->ia_query_func(ia, NULL, DAT_IA_FIELD_IA_MAX_PZS, &a, 0, NULL));
    ck_assert_int_eq(a.max_pzs, SD_MAX_PZS);
    DAT_PZ_HANDLE *pz = calloc((size_t)a.max_pzs, sizeof *pz);
    for (DAT_COUNT i = 0; i < a.max_pzs; i++)
        ck_assert_dat_ok(p->pz_create_func(ia, &pz[i]));
    DAT_PZ_HANDLE extra = DAT_HANDLE_NULL;
    ck_assert_dat_err(p->pz_create_func(ia, &extra), DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_PROTECTION_DOMAIN);
    ck_assert_ptr_null(extra);
    /* Per IA: another IA still gets PZs. */
    DAT_IA_HANDLE ia2 = fx_open(p, NULL);
    ck_assert_dat_ok(p->pz_create_func(ia2, &extra));
    ck_assert_dat_ok(p->ia_close_func(ia2, DAT_CLOSE_ABRUPT_FLAG));
    /* A freed slot is available again. */
    ck_assert_dat_ok(p->pz_free_func(pz[17]));
    ck_assert_dat_ok(p->pz_create_func(ia, &pz[17]));
    ck_assert_dat_err(p->pz_create_func(ia, &extra), DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_PROTECTION_DOMAIN);
    for (DAT_COUNT i = 0; i < a.max_pzs; i++)
        ck_assert_dat_ok(p->pz_free_func(pz[i]));
    free(pz);
    ck_assert_dat_ok(p->ia_close_func(ia, DAT_CLOSE_GRACEFUL_FLAG));
}
END_TEST

START_TEST(query_errors)
{
    DAT_PROVIDER *p = prov();
    DAT_IA_HANDLE ia = fx_open(p, NULL);
    DAT_PZ_HANDLE pz, dead;
    DAT_EVD_HANDLE evd;
    ck_assert_dat_ok(p->pz_create_func(ia, &pz));
    ck_assert_dat_ok(p->pz_create_func(ia, &dead));
    ck_assert_dat_ok(p->pz_free_func(dead));
    ck_assert_dat_ok(p->evd_create_func(ia, 1, NULL, DAT_EVD_DTO_FLAG, &evd));
    DAT_PZ_PARAM pp;
    DAT_PZ_HANDLE bad[] = {DAT_HANDLE_NULL, (DAT_PZ_HANDLE)junk, (DAT_PZ_HANDLE)evd, (DAT_PZ_HANDLE)ia, dead};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ck_assert_dat_err(p->pz_query_func(bad[i], DAT_PZ_FIELD_ALL, &pp), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_PZ);
    ck_assert_dat_err(p->pz_query_func(pz, (DAT_PZ_PARAM_MASK)DAT_PZ_FIELD_ALL + 1, &pp), DAT_INVALID_PARAMETER,
                      DAT_INVALID_ARG2);
    ck_assert_dat_err(p->pz_query_func(pz, DAT_PZ_FIELD_ALL, NULL), DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    pp.ia_handle = DAT_HANDLE_NULL;
    ck_assert_dat_ok(p->pz_query_func(pz, DAT_PZ_FIELD_ALL, &pp));
    ck_assert_ptr_eq(pp.ia_handle, ia);
    ck_assert_dat_ok(p->ia_close_func(ia, DAT_CLOSE_ABRUPT_FLAG));
}
END_TEST

START_TEST(free_errors)
{
    DAT_PROVIDER *p = prov();
    DAT_IA_HANDLE ia = fx_open(p, NULL);
    DAT_PZ_HANDLE pz;
    ck_assert_dat_ok(p->pz_create_func(ia, &pz));
    DAT_PZ_HANDLE bad[] = {DAT_HANDLE_NULL, (DAT_PZ_HANDLE)junk, (DAT_PZ_HANDLE)ia};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ck_assert_dat_err(p->pz_free_func(bad[i]), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_PZ);

    /* In use by an LMR (L7716-7722). */
    static char buf[256];
    DAT_LMR_HANDLE lmr;
    ck_assert_dat_ok(p->lmr_create_func(ia, DAT_MEM_TYPE_VIRTUAL, (DAT_REGION_DESCRIPTION){.for_va = buf},
                                        sizeof buf, pz, DAT_MEM_PRIV_ALL_FLAG, DAT_VA_TYPE_VA, &lmr, NULL, NULL,
                                        NULL, NULL));
    ck_assert_dat_err(p->pz_free_func(pz), DAT_INVALID_STATE, DAT_INVALID_STATE_PZ_IN_USE);
    ck_assert_dat_ok(p->lmr_free_func(lmr));
    /* In use by an RMR. */
    DAT_RMR_HANDLE rmr;
    ck_assert_dat_ok(p->rmr_create_func(pz, &rmr));
    ck_assert_dat_err(p->pz_free_func(pz), DAT_INVALID_STATE, DAT_INVALID_STATE_PZ_IN_USE);
    ck_assert_dat_ok(p->rmr_free_func(rmr));
    /* In use by an EP or SRQ: they hold the same dependency. */
    struct sd_pz *o = (struct sd_pz *)pz;
    ck_assert_int_eq(sd_handle_dep_get(&o->h), 1);
    ck_assert_dat_err(p->pz_free_func(pz), DAT_INVALID_STATE, DAT_INVALID_STATE_PZ_IN_USE);
    sd_handle_dep_put(&o->h);
    /* The refused frees changed nothing. */
    DAT_PZ_PARAM pp;
    ck_assert_dat_ok(p->pz_query_func(pz, DAT_PZ_FIELD_ALL, &pp));
    ck_assert_dat_ok(p->pz_free_func(pz));
    /* Stale handle after free. */
    ck_assert_dat_err(p->pz_free_func(pz), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_PZ);
    ck_assert_dat_ok(p->ia_close_func(ia, DAT_CLOSE_GRACEFUL_FLAG));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("rc_pz");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, create_errors);
    tcase_add_test(tc, create_beyond_max_pzs);
    tcase_add_test(tc, query_errors);
    tcase_add_test(tc, free_errors);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int nf = srunner_ntests_failed(sr);
    srunner_free(sr);
    return nf == 0 ? 0 : 1;
}
