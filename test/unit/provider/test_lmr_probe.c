/* dat_lmr_create refuses what an HCA's pinning refuses (issue 8 §4b):
 * unmapped memory (DAT_INVALID_PARAMETER|ARG3) and a write right on a
 * mapping that is not writable (DAT_INVALID_PARAMETER|ARG6). */
#include <sys/mman.h>
#include <unistd.h>

#include "test/lib/prov_fixture.h"

static DAT_RETURN reg(DAT_PROVIDER *p, DAT_IA_HANDLE ia, DAT_PZ_HANDLE pz, DAT_MEM_TYPE t,
                      DAT_REGION_DESCRIPTION rd, DAT_VLEN len, DAT_MEM_PRIV_FLAGS priv, DAT_LMR_HANDLE *lmr)
{
    DAT_LMR_CONTEXT lc;
    DAT_RMR_CONTEXT rc;
    DAT_VLEN sz;
    DAT_VADDR va;
    *lmr = DAT_HANDLE_NULL;
    return p->lmr_create_func(ia, t, rd, len, pz, priv, DAT_VA_TYPE_VA, lmr, &lc, &rc, &sz, &va);
}

START_TEST(pinning_rules)
{
    DAT_PROVIDER *p = fx_provider("t-lmrp", "lo", DAT_FALSE);
    DAT_IA_HANDLE ia = fx_open(p, NULL);
    DAT_PZ_HANDLE pz;
    ck_assert_dat_ok(p->pz_create_func(ia, &pz));
    long pg = sysconf(_SC_PAGESIZE);
    char *m = mmap(NULL, (size_t)(3 * pg), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ck_assert_ptr_ne(m, MAP_FAILED);
    ck_assert_int_eq(mprotect(m + pg, (size_t)pg, PROT_READ), 0);
    ck_assert_int_eq(munmap(m + 2 * pg, (size_t)pg), 0);
    DAT_REGION_DESCRIPTION rw = {.for_va = m}, ro = {.for_va = m + pg}, gone = {.for_va = m + 2 * pg};
    DAT_LMR_HANDLE l1, l2, l3, bad;

    ck_assert_dat_ok(reg(p, ia, pz, DAT_MEM_TYPE_VIRTUAL, rw, (DAT_VLEN)pg, DAT_MEM_PRIV_ALL_FLAG, &l1));
    /* Read rights on a read-only mapping: fine. */
    ck_assert_dat_ok(reg(p, ia, pz, DAT_MEM_TYPE_VIRTUAL, ro, (DAT_VLEN)pg,
                         DAT_MEM_PRIV_LOCAL_READ_FLAG | DAT_MEM_PRIV_REMOTE_READ_FLAG, &l2));
    /* Any write right on it: refused, nothing created. */
    ck_assert_dat_err(reg(p, ia, pz, DAT_MEM_TYPE_VIRTUAL, ro, (DAT_VLEN)pg, DAT_MEM_PRIV_LOCAL_WRITE_FLAG, &bad),
                      DAT_INVALID_PARAMETER, DAT_INVALID_ARG6);
    ck_assert_dat_err(reg(p, ia, pz, DAT_MEM_TYPE_VIRTUAL, ro, (DAT_VLEN)pg, DAT_MEM_PRIV_REMOTE_WRITE_FLAG, &bad),
                      DAT_INVALID_PARAMETER, DAT_INVALID_ARG6);
    ck_assert_ptr_null(bad);
    /* A range that runs from writable into read-only memory. */
    ck_assert_dat_err(reg(p, ia, pz, DAT_MEM_TYPE_VIRTUAL, rw, (DAT_VLEN)(2 * pg), DAT_MEM_PRIV_ALL_FLAG, &bad),
                      DAT_INVALID_PARAMETER, DAT_INVALID_ARG6);
    /* Unmapped memory, whatever the rights; and a range running into it. */
    ck_assert_dat_err(reg(p, ia, pz, DAT_MEM_TYPE_VIRTUAL, gone, 16, DAT_MEM_PRIV_LOCAL_READ_FLAG, &bad),
                      DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    ck_assert_dat_err(reg(p, ia, pz, DAT_MEM_TYPE_VIRTUAL, ro, (DAT_VLEN)(2 * pg), DAT_MEM_PRIV_NONE_FLAG, &bad),
                      DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    ck_assert_dat_err(reg(p, ia, pz, DAT_MEM_TYPE_VIRTUAL, (DAT_REGION_DESCRIPTION){.for_va = (void *)0x1000}, 64,
                          DAT_MEM_PRIV_LOCAL_READ_FLAG, &bad),
                      DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    /* Re-registering a read-only LMR's memory with a write right. */
    DAT_REGION_DESCRIPTION from = {.for_lmr_handle = l2};
    ck_assert_dat_err(reg(p, ia, pz, DAT_MEM_TYPE_LMR, from, 0, DAT_MEM_PRIV_LOCAL_WRITE_FLAG, &bad),
                      DAT_INVALID_PARAMETER, DAT_INVALID_ARG6);
    ck_assert_dat_ok(reg(p, ia, pz, DAT_MEM_TYPE_LMR, from, 0, DAT_MEM_PRIV_LOCAL_READ_FLAG, &l3));
    ck_assert_dat_ok(p->lmr_free_func(l3));
    ck_assert_dat_ok(p->lmr_free_func(l2));
    ck_assert_dat_ok(p->lmr_free_func(l1));
    ck_assert_dat_ok(p->pz_free_func(pz));
    ck_assert_dat_ok(p->ia_close_func(ia, DAT_CLOSE_GRACEFUL_FLAG));
    munmap(m, (size_t)(2 * pg));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("provider-lmr-probe");
    TCase *tc = tcase_create("probe");
    tcase_add_test(tc, pinning_rules);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int nf = srunner_ntests_failed(sr);
    srunner_free(sr);
    return nf == 0 ? 0 : 1;
}
