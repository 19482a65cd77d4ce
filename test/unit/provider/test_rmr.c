/* RMR object through the DAT table: create/query/free, PZ dependency,
 * query of a bound window (bound through the memory table directly: the
 * DAT bind lives with the EP send queue). */
#include "emu/mem.h"
#include "lib/provider/lmr.h"
#include "lib/provider/pz.h"
#include "lib/provider/rmr.h"
#include "test/lib/prov_fixture.h"

START_TEST(rmr_lifecycle)
{
    DAT_PROVIDER *p = fx_provider("t-rmr1", "lo", DAT_FALSE);
    DAT_IA_HANDLE ia = fx_open(p, NULL);
    DAT_PZ_HANDLE pz;
    ck_assert_dat_ok(p->pz_create_func(ia, &pz));
    DAT_RMR_HANDLE rmr = NULL;
    ck_assert_dat_err(p->rmr_create_func(NULL, &rmr), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_PZ);
    ck_assert_dat_err(p->rmr_create_func(ia, &rmr), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_PZ);
    ck_assert_dat_err(p->rmr_create_func(pz, NULL), DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    ck_assert_ptr_null(rmr);
    ck_assert_dat_ok(p->rmr_create_func(pz, &rmr));
    ck_assert_ptr_eq(*(DAT_PROVIDER **)rmr, p);

    DAT_RMR_PARAM rp;
    memset(&rp, 0xAB, sizeof rp);
    ck_assert_dat_ok(p->rmr_query_func(rmr, DAT_RMR_FIELD_ALL, &rp));
    ck_assert_ptr_eq(rp.ia_handle, ia);
    ck_assert_ptr_eq(rp.pz_handle, pz);
    ck_assert_int_eq(rp.rmr_scope, DAT_RMR_SCOPE_PZ);
    ck_assert_uint_eq(rp.rmr_context, 0); /* unbound */
    ck_assert_uint_eq(rp.lmr_triplet.segment_length, 0);
    ck_assert_dat_err(p->rmr_query_func(rmr, 0x80, &rp), DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    ck_assert_dat_err(p->rmr_query_func(rmr, DAT_RMR_FIELD_ALL, NULL), DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    ck_assert_dat_err(p->rmr_query_func(pz, DAT_RMR_FIELD_ALL, &rp), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_RMR);

    /* Bound: the window's range, rights and STag show. */
    static char buf[1024];
    DAT_REGION_DESCRIPTION d = {.for_va = buf};
    DAT_LMR_HANDLE lmr;
    DAT_LMR_CONTEXT lc;
    ck_assert_dat_ok(p->lmr_create_func(ia, DAT_MEM_TYPE_VIRTUAL, d, sizeof buf, pz, DAT_MEM_PRIV_ALL_FLAG,
                                        DAT_VA_TYPE_VA, &lmr, &lc, NULL, NULL, NULL));
    struct sd_rmr *r = (struct sd_rmr *)rmr;
    struct emu_mw_bind_attr ba = {.mr = ((struct sd_lmr *)lmr)->mr,
                                  .addr = (uint64_t)(uintptr_t)buf + 64,
                                  .length = 128,
                                  .access = EMU_ACC_REMOTE_WRITE,
                                  .va_type = EMU_VA_ABS};
    uint32_t stag = 0;
    ck_assert_int_eq(emu_mem_mw_bind(r->mw, &ba, &stag), EMU_MEM_OK);
    pthread_mutex_lock(&r->mu);
    r->lmr_context = lc;
    r->va_type = DAT_VA_TYPE_VA;
    pthread_mutex_unlock(&r->mu);
    ck_assert_dat_ok(p->rmr_query_func(rmr, DAT_RMR_FIELD_ALL, &rp));
    ck_assert_uint_eq(rp.rmr_context, stag);
    ck_assert_uint_eq(rp.lmr_triplet.virtual_address, (DAT_VADDR)(uintptr_t)buf + 64);
    ck_assert_uint_eq(rp.lmr_triplet.segment_length, 128);
    ck_assert_uint_eq(rp.lmr_triplet.lmr_context, lc);
    ck_assert_int_eq(rp.mem_priv, DAT_MEM_PRIV_REMOTE_WRITE_FLAG);
    /* The window's STag passes a remote write check inside its range. */
    struct emu_mem_ref ref;
    ck_assert_int_eq(emu_mem_check_remote(((struct sd_ia *)ia)->mem, stag, (uint64_t)(uintptr_t)buf + 64, 128,
                                          EMU_MEM_OP_WRITE, ((struct sd_pz *)pz)->epz, 0, &ref),
                     EMU_MEM_OK);
    emu_mem_put(&ref);

    /* PZ in use by the RMR; free unbinds (L8088), the STag dies. */
    ck_assert_dat_err(p->pz_free_func(pz), DAT_INVALID_STATE, DAT_INVALID_STATE_PZ_IN_USE);
    ck_assert_dat_ok(p->rmr_free_func(rmr));
    ck_assert_int_eq(emu_mem_check_remote(((struct sd_ia *)ia)->mem, stag, (uint64_t)(uintptr_t)buf + 64, 8,
                                          EMU_MEM_OP_WRITE, ((struct sd_pz *)pz)->epz, 0, &ref),
                     EMU_MEM_E_STAG);
    ck_assert_dat_err(p->rmr_free_func(rmr), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_RMR);
    ck_assert_dat_ok(p->lmr_free_func(lmr));
    ck_assert_dat_ok(p->pz_free_func(pz));

    /* Many windows, then abrupt close with a bound one. */
    ck_assert_dat_ok(p->pz_create_func(ia, &pz));
    ck_assert_dat_ok(p->lmr_create_func(ia, DAT_MEM_TYPE_VIRTUAL, d, sizeof buf, pz, DAT_MEM_PRIV_ALL_FLAG,
                                        DAT_VA_TYPE_VA, &lmr, &lc, NULL, NULL, NULL));
    for (int i = 0; i < 100; i++)
        ck_assert_dat_ok(p->rmr_create_func(pz, &rmr));
    ba.mr = ((struct sd_lmr *)lmr)->mr;
    ck_assert_int_eq(emu_mem_mw_bind(((struct sd_rmr *)rmr)->mw, &ba, &stag), EMU_MEM_OK);
    ck_assert_dat_ok(p->ia_close_func(ia, DAT_CLOSE_ABRUPT_FLAG));
    ck_assert_uint_eq(sd_handle_live_count(), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("provider-rmr");
    TCase *tc = tcase_create("rmr");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, rmr_lifecycle);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
