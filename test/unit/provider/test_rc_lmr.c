/* Return codes of dat_lmr_create, dat_lmr_query, dat_lmr_free,
 * dat_lmr_sync_rdma_read and dat_lmr_sync_rdma_write (L7774-8444). */
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "emu/mem.h"
#include "lib/provider/lmr.h"
#include "lib/provider/rmr.h"
#include "test/lib/prov_fixture.h"

static _Alignas(64) char junk[256];
static _Alignas(64) char buf[8192];

#define RW (DAT_MEM_PRIV_LOCAL_READ_FLAG | DAT_MEM_PRIV_LOCAL_WRITE_FLAG)
#define ck_bad_lmr(rc) ck_assert_dat_err((rc), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_LMR)

static DAT_PROVIDER *prov(void)
{
    return fx_provider("t-rc-lmr", "lo", DAT_FALSE);
}

static DAT_RETURN reg(DAT_PROVIDER *p, DAT_IA_HANDLE ia, DAT_PZ_HANDLE pz, void *addr, DAT_VLEN len,
                      DAT_LMR_HANDLE *lmr, DAT_LMR_CONTEXT *ctx)
{
    DAT_REGION_DESCRIPTION d = {.for_va = addr};
    return p->lmr_create_func(ia, DAT_MEM_TYPE_VIRTUAL, d, len, pz, RW, DAT_VA_TYPE_VA, lmr, ctx, NULL, NULL, NULL);
}

START_TEST(create_errors)
{
    DAT_PROVIDER *p = prov();
    DAT_IA_HANDLE ia = fx_open(p, NULL), ia2 = fx_open(p, NULL), dead_ia = fx_open(p, NULL);
    ck_assert_dat_ok(p->ia_close_func(dead_ia, DAT_CLOSE_ABRUPT_FLAG));
    DAT_PZ_HANDLE pz, pz2, dead_pz;
    ck_assert_dat_ok(p->pz_create_func(ia, &pz));
    ck_assert_dat_ok(p->pz_create_func(ia2, &pz2));
    ck_assert_dat_ok(p->pz_create_func(ia, &dead_pz));
    ck_assert_dat_ok(p->pz_free_func(dead_pz));
    DAT_LMR_HANDLE src, src2, dead_lmr, lmr = DAT_HANDLE_NULL;
    ck_assert_dat_ok(reg(p, ia, pz, buf, sizeof buf, &src, NULL));
    ck_assert_dat_ok(reg(p, ia2, pz2, buf, sizeof buf, &src2, NULL));
    ck_assert_dat_ok(reg(p, ia, pz, buf, sizeof buf, &dead_lmr, NULL));
    ck_assert_dat_ok(p->lmr_free_func(dead_lmr));
    DAT_REGION_DESCRIPTION d = {.for_va = buf};
#define CREATE(ia_, t_, d_, len_, pz_, priv_, vat_, out_)                                                         \
    p->lmr_create_func((ia_), (t_), (d_), (len_), (pz_), (priv_), (vat_), (out_), NULL, NULL, NULL, NULL)

    /* INVALID_HANDLE: the IA (ARG1), the PZ (ARG5: garbage, another type,
     * freed, another IA's), the source LMR of DAT_MEM_TYPE_LMR. */
    DAT_IA_HANDLE bad_ia[] = {DAT_HANDLE_NULL, (DAT_IA_HANDLE)junk, (DAT_IA_HANDLE)pz, dead_ia};
    for (size_t i = 0; i < sizeof bad_ia / sizeof bad_ia[0]; i++)
        ck_assert_dat_err(CREATE(bad_ia[i], DAT_MEM_TYPE_VIRTUAL, d, 64, pz, RW, DAT_VA_TYPE_VA, &lmr),
                          DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);
    DAT_PZ_HANDLE bad_pz[] = {DAT_HANDLE_NULL, (DAT_PZ_HANDLE)junk, (DAT_PZ_HANDLE)ia, dead_pz, pz2};
    for (size_t i = 0; i < sizeof bad_pz / sizeof bad_pz[0]; i++)
        ck_assert_dat_err(CREATE(ia, DAT_MEM_TYPE_VIRTUAL, d, 64, bad_pz[i], RW, DAT_VA_TYPE_VA, &lmr),
                          DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_PZ);
    DAT_LMR_HANDLE bad_src[] = {DAT_HANDLE_NULL, (DAT_LMR_HANDLE)junk, (DAT_LMR_HANDLE)pz, dead_lmr, src2};
    for (size_t i = 0; i < sizeof bad_src / sizeof bad_src[0]; i++) {
        DAT_REGION_DESCRIPTION dl = {.for_lmr_handle = bad_src[i]};
        ck_bad_lmr(CREATE(ia, DAT_MEM_TYPE_LMR, dl, 0, pz, RW, DAT_VA_TYPE_VA, &lmr));
    }
    /* INVALID_PARAMETER, per argument. */
    ck_assert_dat_err(CREATE(ia, (DAT_MEM_TYPE)3, d, 64, pz, RW, DAT_VA_TYPE_VA, &lmr), DAT_INVALID_PARAMETER,
                      DAT_INVALID_ARG2);
    ck_assert_dat_err(CREATE(ia, (DAT_MEM_TYPE)-1, d, 64, pz, RW, DAT_VA_TYPE_VA, &lmr), DAT_INVALID_PARAMETER,
                      DAT_INVALID_ARG2);
    DAT_REGION_DESCRIPTION dnull = {.for_va = NULL};
    ck_assert_dat_err(CREATE(ia, DAT_MEM_TYPE_VIRTUAL, dnull, 64, pz, RW, DAT_VA_TYPE_VA, &lmr),
                      DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    DAT_REGION_DESCRIPTION dsh = {.for_shared_memory = {.virtual_address = buf, .shared_memory_id = NULL}};
    ck_assert_dat_err(CREATE(ia, DAT_MEM_TYPE_SHARED_VIRTUAL, dsh, 64, pz, RW, DAT_VA_TYPE_VA, &lmr),
                      DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    /* length beyond max_lmr_block_size; a range that wraps. */
    ck_assert_dat_err(CREATE(ia, DAT_MEM_TYPE_VIRTUAL, d, (DAT_VLEN)SD_MAX_LMR_BLOCK_SIZE + 1, pz, RW,
                             DAT_VA_TYPE_VA, &lmr),
                      DAT_INVALID_PARAMETER, DAT_INVALID_ARG4);
    DAT_REGION_DESCRIPTION dhigh = {.for_va = (void *)(UINTPTR_MAX - 63)};
    ck_assert_dat_err(CREATE(ia, DAT_MEM_TYPE_VIRTUAL, dhigh, 64, pz, RW, DAT_VA_TYPE_VA, &lmr),
                      DAT_INVALID_PARAMETER, DAT_INVALID_ARG4);
    /* privileges: unknown bits (0x04, 0x08, 0x80, high). */
    DAT_MEM_PRIV_FLAGS bad_priv[] = {0x04, 0x08, 0x80, 0x100, (DAT_MEM_PRIV_FLAGS)0x80000000u};
    for (size_t i = 0; i < sizeof bad_priv / sizeof bad_priv[0]; i++)
        ck_assert_dat_err(CREATE(ia, DAT_MEM_TYPE_VIRTUAL, d, 64, pz, bad_priv[i], DAT_VA_TYPE_VA, &lmr),
                          DAT_INVALID_PARAMETER, DAT_INVALID_ARG6);
    ck_assert_dat_err(CREATE(ia, DAT_MEM_TYPE_VIRTUAL, d, 64, pz, RW, (DAT_VA_TYPE)2, &lmr), DAT_INVALID_PARAMETER,
                      DAT_INVALID_ARG7);
    ck_assert_dat_err(CREATE(ia, DAT_MEM_TYPE_VIRTUAL, d, 64, pz, RW, DAT_VA_TYPE_VA, NULL), DAT_INVALID_PARAMETER,
                      DAT_INVALID_ARG8);
    ck_assert_ptr_null(lmr);
    /* Every memory type is supported (no MODEL_NOT_SUPPORTED), the other
     * outputs are optional, and the limits themselves are accepted. */
    DAT_LMR_COOKIE cookie = (DAT_LMR_COOKIE)junk;
    DAT_REGION_DESCRIPTION dsh_ok = {.for_shared_memory = {.virtual_address = buf, .shared_memory_id = cookie}};
    ck_assert_dat_ok(CREATE(ia, DAT_MEM_TYPE_SHARED_VIRTUAL, dsh_ok, 64, pz, RW, DAT_VA_TYPE_ZB, &lmr));
    ck_assert_dat_ok(p->lmr_free_func(lmr));
    DAT_REGION_DESCRIPTION dl = {.for_lmr_handle = src};
    ck_assert_dat_ok(CREATE(ia, DAT_MEM_TYPE_LMR, dl, 12345, pz, DAT_MEM_PRIV_NONE_FLAG, DAT_VA_TYPE_VA, &lmr));
    ck_assert_dat_ok(p->lmr_free_func(lmr));
    ck_assert_dat_ok(CREATE(ia, DAT_MEM_TYPE_VIRTUAL, d, 64, pz,
                            DAT_MEM_PRIV_ALL_FLAG | DAT_MEM_PRIV_EXTENSION_BASE, DAT_VA_TYPE_VA, &lmr));
    ck_assert_dat_ok(p->lmr_free_func(lmr));
#undef CREATE
    ck_assert_dat_ok(p->ia_close_func(ia, DAT_CLOSE_ABRUPT_FLAG));
    ck_assert_dat_ok(p->ia_close_func(ia2, DAT_CLOSE_ABRUPT_FLAG));
}
END_TEST

START_TEST(create_beyond_max_lmrs)
{
    /* max_lmrs = 65536: create all of them (fast: no pinning). */
    DAT_PROVIDER *p = prov();
    DAT_IA_HANDLE ia = fx_open(p, NULL);
    DAT_IA_ATTR a;
    ck_assert_dat_ok(p->ia_query_func(ia, NULL, DAT_IA_FIELD_IA_MAX_LMRS, &a, 0, NULL));
    ck_assert_int_eq(a.max_lmrs, SD_MAX_LMRS);
    DAT_PZ_HANDLE pz;
    ck_assert_dat_ok(p->pz_create_func(ia, &pz));
    DAT_LMR_HANDLE *l = calloc((size_t)a.max_lmrs, sizeof *l);
    for (DAT_COUNT i = 0; i < a.max_lmrs; i++)
        ck_assert_dat_ok(reg(p, ia, pz, buf + (i % 4096), 16, &l[i], NULL));
    DAT_LMR_HANDLE extra = DAT_HANDLE_NULL;
    ck_assert_dat_err(reg(p, ia, pz, buf, 16, &extra, NULL), DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY_REGION);
    DAT_REGION_DESCRIPTION dl = {.for_lmr_handle = l[0]};
    ck_assert_dat_err(p->lmr_create_func(ia, DAT_MEM_TYPE_LMR, dl, 0, pz, RW, DAT_VA_TYPE_VA, &extra, NULL, NULL,
                                         NULL, NULL),
                      DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY_REGION);
    ck_assert_ptr_null(extra);
    ck_assert_dat_ok(p->lmr_free_func(l[100]));
    ck_assert_dat_ok(reg(p, ia, pz, buf, 16, &l[100], NULL));
    for (DAT_COUNT i = 0; i < a.max_lmrs; i++)
        ck_assert_dat_ok(p->lmr_free_func(l[i]));
    free(l);
    ck_assert_dat_ok(p->pz_free_func(pz));
    ck_assert_dat_ok(p->ia_close_func(ia, DAT_CLOSE_GRACEFUL_FLAG));
}
END_TEST

START_TEST(query_errors)
{
    DAT_PROVIDER *p = prov();
    DAT_IA_HANDLE ia = fx_open(p, NULL);
    DAT_PZ_HANDLE pz;
    ck_assert_dat_ok(p->pz_create_func(ia, &pz));
    DAT_LMR_HANDLE lmr, dead;
    ck_assert_dat_ok(reg(p, ia, pz, buf, 64, &lmr, NULL));
    ck_assert_dat_ok(reg(p, ia, pz, buf, 64, &dead, NULL));
    ck_assert_dat_ok(p->lmr_free_func(dead));
    DAT_LMR_PARAM lp;
    DAT_LMR_HANDLE bad[] = {DAT_HANDLE_NULL, (DAT_LMR_HANDLE)junk, (DAT_LMR_HANDLE)pz, dead};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ck_bad_lmr(p->lmr_query_func(bad[i], DAT_LMR_FIELD_ALL, &lp));
    ck_assert_dat_err(p->lmr_query_func(lmr, (DAT_LMR_PARAM_MASK)DAT_LMR_FIELD_ALL + 1, &lp),
                      DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    ck_assert_dat_err(p->lmr_query_func(lmr, DAT_LMR_FIELD_ALL, NULL), DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    ck_assert_dat_ok(p->lmr_query_func(lmr, DAT_LMR_FIELD_ALL, &lp));
    ck_assert_ptr_eq(lp.pz_handle, pz);
    ck_assert_dat_ok(p->ia_close_func(ia, DAT_CLOSE_ABRUPT_FLAG));
}
END_TEST

START_TEST(free_errors)
{
    DAT_PROVIDER *p = prov();
    DAT_IA_HANDLE ia = fx_open(p, NULL);
    DAT_PZ_HANDLE pz;
    ck_assert_dat_ok(p->pz_create_func(ia, &pz));
    DAT_LMR_HANDLE lmr;
    ck_assert_dat_ok(reg(p, ia, pz, buf, 256, &lmr, NULL));
    DAT_LMR_HANDLE bad[] = {DAT_HANDLE_NULL, (DAT_LMR_HANDLE)junk, (DAT_LMR_HANDLE)pz, (DAT_LMR_HANDLE)ia};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ck_bad_lmr(p->lmr_free_func(bad[i]));
    /* In use by a bound RMR (L7933, L7945). The bind itself is the EP's
     * business; the window is bound directly in the memory table here. */
    DAT_RMR_HANDLE rmr;
    ck_assert_dat_ok(p->rmr_create_func(pz, &rmr));
    struct emu_mw_bind_attr ba = {.mr = ((struct sd_lmr *)lmr)->mr, .addr = (uint64_t)(uintptr_t)buf,
                                  .length = 64, .access = EMU_ACC_REMOTE_READ, .va_type = EMU_VA_ABS};
    uint32_t stag;
    ck_assert_int_eq(emu_mem_mw_bind(((struct sd_rmr *)rmr)->mw, &ba, &stag), EMU_MEM_OK);
    ck_assert_dat_err(p->lmr_free_func(lmr), DAT_INVALID_STATE, DAT_INVALID_STATE_LMR_IN_USE);
    DAT_LMR_PARAM lp;
    ck_assert_dat_ok(p->lmr_query_func(lmr, DAT_LMR_FIELD_ALL, &lp)); /* unchanged */
    ck_assert_int_eq(emu_mem_mw_unbind(((struct sd_rmr *)rmr)->mw), EMU_MEM_OK);
    ck_assert_dat_ok(p->lmr_free_func(lmr));
    ck_bad_lmr(p->lmr_free_func(lmr));
    ck_assert_dat_ok(p->rmr_free_func(rmr));
    ck_assert_dat_ok(p->pz_free_func(pz));
    ck_assert_dat_ok(p->ia_close_func(ia, DAT_CLOSE_GRACEFUL_FLAG));
}
END_TEST

START_TEST(sync_errors)
{
    DAT_PROVIDER *p = prov();
    DAT_IA_HANDLE ia = fx_open(p, NULL), ia2 = fx_open(p, NULL), dead_ia = fx_open(p, NULL);
    ck_assert_dat_ok(p->ia_close_func(dead_ia, DAT_CLOSE_ABRUPT_FLAG));
    DAT_PZ_HANDLE pz, pzb, pz2;
    ck_assert_dat_ok(p->pz_create_func(ia, &pz));
    ck_assert_dat_ok(p->pz_create_func(ia, &pzb));
    ck_assert_dat_ok(p->pz_create_func(ia2, &pz2));
    DAT_LMR_HANDLE lmr, lmrb, lmr2, dead;
    DAT_LMR_CONTEXT ctx, ctxb, ctx2, dctx;
    ck_assert_dat_ok(reg(p, ia, pz, buf, 1024, &lmr, &ctx));
    ck_assert_dat_ok(reg(p, ia, pzb, buf + 2048, 1024, &lmrb, &ctxb));
    ck_assert_dat_ok(reg(p, ia2, pz2, buf, 1024, &lmr2, &ctx2));
    ck_assert_dat_ok(reg(p, ia, pz, buf + 4096, 64, &dead, &dctx));
    ck_assert_dat_ok(p->lmr_free_func(dead));
    DAT_RETURN (*fn[2])(DAT_IA_HANDLE, const DAT_LMR_TRIPLET *, DAT_VLEN) = {p->lmr_sync_rdma_read_func,
                                                                              p->lmr_sync_rdma_write_func};
    DAT_LMR_TRIPLET ok[2] = {{.lmr_context = ctx, .virtual_address = (DAT_VADDR)(uintptr_t)buf, .segment_length = 1024},
                             {.lmr_context = ctxb, .virtual_address = (DAT_VADDR)(uintptr_t)(buf + 2048),
                              .segment_length = 16}};
    for (int f = 0; f < 2; f++) {
        DAT_IA_HANDLE bad_ia[] = {DAT_HANDLE_NULL, (DAT_IA_HANDLE)junk, (DAT_IA_HANDLE)pz, dead_ia};
        for (size_t i = 0; i < sizeof bad_ia / sizeof bad_ia[0]; i++)
            ck_assert_dat_err(fn[f](bad_ia[i], ok, 1), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);
        ck_assert_dat_ok(fn[f](ia, ok, 2)); /* segments may span LMRs and PZs (L8333) */
        ck_assert_dat_ok(fn[f](ia, NULL, 0));
        ck_assert_dat_err(fn[f](ia, NULL, 1), DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
        DAT_LMR_TRIPLET t;
        /* Range outside its LMR: past the end, before the start. */
        t = ok[0];
        t.segment_length = 1025;
        ck_assert_dat_err(fn[f](ia, &t, 1), DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
        t = ok[0];
        t.virtual_address -= 1;
        ck_assert_dat_err(fn[f](ia, &t, 1), DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
        /* Invalid LMR: unknown, freed, another IA's context. */
        DAT_LMR_CONTEXT bad_ctx[] = {0xFFFFFF00u, dctx, ctx2 == ctx ? 0xFFFFFF01u : ctx2};
        for (size_t i = 0; i < sizeof bad_ctx / sizeof bad_ctx[0]; i++) {
            t = ok[0];
            t.lmr_context = bad_ctx[i];
            t.segment_length = 8;
            DAT_LMR_TRIPLET two[2] = {ok[1], t}; /* the second segment is the bad one */
            ck_assert_dat_err(fn[f](ia, two, 2), DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
        }
        /* Zero-length segments are never checked (dat.h triplet rule). */
        DAT_LMR_TRIPLET z = {.lmr_context = 0xFFFFFF00u, .virtual_address = 1, .segment_length = 0};
        ck_assert_dat_ok(fn[f](ia, &z, 1));
    }
    ck_assert_dat_ok(p->ia_close_func(ia, DAT_CLOSE_ABRUPT_FLAG));
    ck_assert_dat_ok(p->ia_close_func(ia2, DAT_CLOSE_ABRUPT_FLAG));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("rc_lmr");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, create_errors);
    tcase_add_test(tc, create_beyond_max_lmrs);
    tcase_add_test(tc, query_errors);
    tcase_add_test(tc, free_errors);
    tcase_add_test(tc, sync_errors);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int nf = srunner_ntests_failed(sr);
    srunner_free(sr);
    return nf == 0 ? 0 : 1;
}
