/* Return codes of dat_rmr_create, dat_rmr_query and dat_rmr_free
 * (L7995-8160). dat_rmr_bind and dat_rmr_create_for_ep are the EP side's. */
#include <stdint.h>
#include <stdlib.h>

#include "emu/mem.h"
#include "lib/provider/lmr.h"
#include "lib/provider/pz.h"
#include "lib/provider/rmr.h"
#include "test/lib/prov_fixture.h"

static _Alignas(64) char junk[256];
static _Alignas(64) char buf[4096];

#define ck_bad_rmr(rc) ck_assert_dat_err((rc), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_RMR)

static DAT_PROVIDER *prov(void)
{
    return fx_provider("t-rc-rmr", "lo", DAT_FALSE);
}

START_TEST(create_errors)
{
    DAT_PROVIDER *p = prov();
    DAT_IA_HANDLE ia = fx_open(p, NULL), dead_ia = fx_open(p, NULL);
    DAT_PZ_HANDLE pz, dead_pz, orphan;
    ck_assert_dat_ok(p->pz_create_func(ia, &pz));
    ck_assert_dat_ok(p->pz_create_func(ia, &dead_pz));
    ck_assert_dat_ok(p->pz_free_func(dead_pz));
    ck_assert_dat_ok(p->pz_create_func(dead_ia, &orphan));
    ck_assert_dat_ok(p->ia_close_func(dead_ia, DAT_CLOSE_ABRUPT_FLAG)); /* destroys orphan */
    DAT_RMR_HANDLE rmr = DAT_HANDLE_NULL;
    DAT_PZ_HANDLE bad[] = {DAT_HANDLE_NULL, (DAT_PZ_HANDLE)junk, (DAT_PZ_HANDLE)ia, dead_pz, orphan};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ck_assert_dat_err(p->rmr_create_func(bad[i], &rmr), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_PZ);
    /* Not in the Returns list (L8012-8015), but the honest answer to a
     * NULL out-pointer (L8828: any applicable error). */
    ck_assert_dat_err(p->rmr_create_func(pz, NULL), DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    ck_assert_ptr_null(rmr);
    ck_assert_dat_ok(p->rmr_create_func(pz, &rmr));
    ck_assert_dat_ok(p->rmr_free_func(rmr));
    ck_assert_dat_ok(p->ia_close_func(ia, DAT_CLOSE_ABRUPT_FLAG));
}
END_TEST

START_TEST(create_beyond_max_rmrs)
{
    DAT_PROVIDER *p = prov();
    DAT_IA_HANDLE ia = fx_open(p, NULL);
    DAT_IA_ATTR a;
    ck_assert_dat_ok(p->ia_query_func(ia, NULL, DAT_IA_FIELD_IA_MAX_RMRS, &a, 0, NULL));
    ck_assert_int_eq(a.max_rmrs, SD_MAX_RMRS);
    DAT_PZ_HANDLE pz, pz2;
    ck_assert_dat_ok(p->pz_create_func(ia, &pz));
    ck_assert_dat_ok(p->pz_create_func(ia, &pz2));
    DAT_RMR_HANDLE *r = calloc((size_t)a.max_rmrs, sizeof *r);
    /* Per IA, whatever the PZ. */
    for (DAT_COUNT i = 0; i < a.max_rmrs; i++)
        ck_assert_dat_ok(p->rmr_create_func(i % 2 ? pz : pz2, &r[i]));
    DAT_RMR_HANDLE extra = DAT_HANDLE_NULL;
    ck_assert_dat_err(p->rmr_create_func(pz, &extra), DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY_REGION);
    ck_assert_dat_err(p->rmr_create_func(pz2, &extra), DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY_REGION);
    ck_assert_ptr_null(extra);
    ck_assert_dat_ok(p->rmr_free_func(r[7]));
    ck_assert_dat_ok(p->rmr_create_func(pz, &r[7]));
    for (DAT_COUNT i = 0; i < a.max_rmrs; i++)
        ck_assert_dat_ok(p->rmr_free_func(r[i]));
    free(r);
    ck_assert_dat_ok(p->ia_close_func(ia, DAT_CLOSE_ABRUPT_FLAG));
}
END_TEST

START_TEST(query_errors)
{
    DAT_PROVIDER *p = prov();
    DAT_IA_HANDLE ia = fx_open(p, NULL);
    DAT_PZ_HANDLE pz;
    ck_assert_dat_ok(p->pz_create_func(ia, &pz));
    DAT_RMR_HANDLE rmr, dead;
    ck_assert_dat_ok(p->rmr_create_func(pz, &rmr));
    ck_assert_dat_ok(p->rmr_create_func(pz, &dead));
    ck_assert_dat_ok(p->rmr_free_func(dead));
    DAT_RMR_PARAM rp;
    DAT_RMR_HANDLE bad[] = {DAT_HANDLE_NULL, (DAT_RMR_HANDLE)junk, (DAT_RMR_HANDLE)pz, dead};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ck_bad_rmr(p->rmr_query_func(bad[i], DAT_RMR_FIELD_ALL, &rp));
    ck_assert_dat_err(p->rmr_query_func(rmr, (DAT_RMR_PARAM_MASK)DAT_RMR_FIELD_ALL + 1, &rp),
                      DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    ck_assert_dat_err(p->rmr_query_func(rmr, DAT_RMR_FIELD_ALL, NULL), DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    ck_assert_dat_ok(p->rmr_query_func(rmr, DAT_RMR_FIELD_ALL, &rp));
    ck_assert_ptr_eq(rp.pz_handle, pz);
    ck_assert_int_eq(rp.rmr_scope, DAT_RMR_SCOPE_PZ);
    ck_assert_dat_ok(p->ia_close_func(ia, DAT_CLOSE_ABRUPT_FLAG));
}
END_TEST

START_TEST(free_errors)
{
    DAT_PROVIDER *p = prov();
    DAT_IA_HANDLE ia = fx_open(p, NULL);
    DAT_PZ_HANDLE pz;
    ck_assert_dat_ok(p->pz_create_func(ia, &pz));
    DAT_RMR_HANDLE rmr, bound;
    ck_assert_dat_ok(p->rmr_create_func(pz, &rmr));
    DAT_RMR_HANDLE bad[] = {DAT_HANDLE_NULL, (DAT_RMR_HANDLE)junk, (DAT_RMR_HANDLE)pz, (DAT_RMR_HANDLE)ia};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ck_bad_rmr(p->rmr_free_func(bad[i]));
    ck_assert_dat_ok(p->rmr_free_func(rmr));
    ck_bad_rmr(p->rmr_free_func(rmr)); /* stale */
    /* A bound RMR is freed too (implicit unbind, L8088): its context stops
     * working and the LMR is free to go. */
    DAT_LMR_HANDLE lmr;
    DAT_REGION_DESCRIPTION d = {.for_va = buf};
    ck_assert_dat_ok(p->lmr_create_func(ia, DAT_MEM_TYPE_VIRTUAL, d, sizeof buf, pz, DAT_MEM_PRIV_ALL_FLAG,
                                        DAT_VA_TYPE_VA, &lmr, NULL, NULL, NULL, NULL));
    ck_assert_dat_ok(p->rmr_create_func(pz, &bound));
    struct emu_mw_bind_attr ba = {.mr = ((struct sd_lmr *)lmr)->mr, .addr = (uint64_t)(uintptr_t)buf,
                                  .length = 64, .access = EMU_ACC_REMOTE_READ, .va_type = EMU_VA_ABS};
    uint32_t stag;
    ck_assert_int_eq(emu_mem_mw_bind(((struct sd_rmr *)bound)->mw, &ba, &stag), EMU_MEM_OK);
    struct emu_mem_table *mt = ((struct sd_ia *)ia)->mem;
    const struct emu_pz *epz = ((struct sd_pz *)pz)->epz;
    struct emu_mem_ref ref;
    ck_assert_int_eq(emu_mem_check_remote(mt, stag, (uint64_t)(uintptr_t)buf, 8, EMU_MEM_OP_READ, epz, 0, &ref),
                     EMU_MEM_OK);
    emu_mem_put(&ref);
    ck_assert_dat_ok(p->rmr_free_func(bound));
    ck_assert_int_ne(emu_mem_check_remote(mt, stag, (uint64_t)(uintptr_t)buf, 8, EMU_MEM_OP_READ, epz, 0, &ref),
                     EMU_MEM_OK);
    ck_assert_dat_ok(p->lmr_free_func(lmr));
    /* A free racing another free of the same handle (simulated: retired
     * by the first) answers INVALID_HANDLE, never INVALID_STATE, which
     * dat_rmr_free does not list. */
    ck_assert_dat_ok(p->rmr_create_func(pz, &rmr));
    struct sd_rmr *o = (struct sd_rmr *)rmr;
    ck_assert_int_eq(sd_handle_try_retire(&o->h), 1);
    ck_bad_rmr(p->rmr_free_func(rmr));
    sd_handle_unretire(&o->h);
    ck_assert_dat_ok(p->rmr_free_func(rmr));
    ck_assert_dat_ok(p->pz_free_func(pz));
    ck_assert_dat_ok(p->ia_close_func(ia, DAT_CLOSE_GRACEFUL_FLAG));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("rc_rmr");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, create_errors);
    tcase_add_test(tc, create_beyond_max_rmrs);
    tcase_add_test(tc, query_errors);
    tcase_add_test(tc, free_errors);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int nf = srunner_ntests_failed(sr);
    srunner_free(sr);
    return nf == 0 ? 0 : 1;
}
