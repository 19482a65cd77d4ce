/* LMR object through the DAT table: create (virtual, LMR, shared virtual)
 * with every argument error, query, free (busy with a bound RMR), sync,
 * sd_lmr_check_iov outcomes and the privilege mapping. */
#include <stdint.h>
#include <stdlib.h>

#include "emu/mem.h"
#include "lib/provider/lmr.h"
#include "lib/provider/pz.h"
#include "lib/provider/rmr.h"
#include "test/lib/prov_fixture.h"

#define RW (DAT_MEM_PRIV_LOCAL_READ_FLAG | DAT_MEM_PRIV_LOCAL_WRITE_FLAG)

struct reg {
    DAT_LMR_HANDLE lmr;
    DAT_LMR_CONTEXT lctx;
    DAT_RMR_CONTEXT rctx;
    DAT_VLEN size;
    DAT_VADDR addr;
};

static DAT_RETURN reg_va(DAT_PROVIDER *p, DAT_IA_HANDLE ia, DAT_PZ_HANDLE pz, void *buf, DAT_VLEN len,
                         DAT_MEM_PRIV_FLAGS priv, DAT_VA_TYPE va, struct reg *r)
{
    DAT_REGION_DESCRIPTION d = {.for_va = buf};
    memset(r, 0, sizeof *r);
    r->rctx = 0xFFFFFFFFu;
    return p->lmr_create_func(ia, DAT_MEM_TYPE_VIRTUAL, d, len, pz, priv, va, &r->lmr, &r->lctx, &r->rctx, &r->size,
                              &r->addr);
}

START_TEST(lmr_create_errors)
{
    DAT_PROVIDER *p = fx_provider("t-lmr1", "lo", DAT_FALSE);
    DAT_IA_HANDLE ia = fx_open(p, NULL), ia2 = fx_open(p, NULL);
    DAT_PZ_HANDLE pz, pz2;
    ck_assert_dat_ok(p->pz_create_func(ia, &pz));
    ck_assert_dat_ok(p->pz_create_func(ia2, &pz2));
    static char buf[4096];
    DAT_REGION_DESCRIPTION d = {.for_va = buf};
    DAT_LMR_HANDLE lmr = NULL;
    DAT_LMR_CONTEXT lc;
    DAT_RMR_CONTEXT rc;
    DAT_VLEN sz;
    DAT_VADDR va;
#define CREATE(ia_, t_, d_, len_, pz_, priv_, vat_, out_)                                                 \
    p->lmr_create_func((ia_), (t_), (d_), (len_), (pz_), (priv_), (vat_), (out_), &lc, &rc, &sz, &va)

    ck_assert_dat_err(CREATE(NULL, DAT_MEM_TYPE_VIRTUAL, d, 4096, pz, RW, DAT_VA_TYPE_VA, &lmr),
                      DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);
    ck_assert_dat_err(CREATE(ia, DAT_MEM_TYPE_VIRTUAL, d, 4096, pz, RW, DAT_VA_TYPE_VA, NULL),
                      DAT_INVALID_PARAMETER, DAT_INVALID_ARG8);
    ck_assert_dat_err(CREATE(ia, DAT_MEM_TYPE_VIRTUAL, d, 4096, NULL, RW, DAT_VA_TYPE_VA, &lmr),
                      DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_PZ);
    ck_assert_dat_err(CREATE(ia, DAT_MEM_TYPE_VIRTUAL, d, 4096, ia, RW, DAT_VA_TYPE_VA, &lmr),
                      DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_PZ);
    ck_assert_dat_err(CREATE(ia, DAT_MEM_TYPE_VIRTUAL, d, 4096, pz2, RW, DAT_VA_TYPE_VA, &lmr),
                      DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_PZ); /* PZ of another IA */
    ck_assert_dat_err(CREATE(ia, DAT_MEM_TYPE_VIRTUAL, d, 4096, pz, 0x80, DAT_VA_TYPE_VA, &lmr),
                      DAT_INVALID_PARAMETER, DAT_INVALID_ARG6);
    ck_assert_dat_err(CREATE(ia, DAT_MEM_TYPE_VIRTUAL, d, 4096, pz, 0x04, DAT_VA_TYPE_VA, &lmr),
                      DAT_INVALID_PARAMETER, DAT_INVALID_ARG6);
    ck_assert_dat_err(CREATE(ia, DAT_MEM_TYPE_VIRTUAL, d, 4096, pz, RW, (DAT_VA_TYPE)2, &lmr),
                      DAT_INVALID_PARAMETER, DAT_INVALID_ARG7);
    ck_assert_dat_err(CREATE(ia, (DAT_MEM_TYPE)3, d, 4096, pz, RW, DAT_VA_TYPE_VA, &lmr), DAT_INVALID_PARAMETER,
                      DAT_INVALID_ARG2);
    DAT_REGION_DESCRIPTION dnull = {.for_va = NULL};
    ck_assert_dat_err(CREATE(ia, DAT_MEM_TYPE_VIRTUAL, dnull, 4096, pz, RW, DAT_VA_TYPE_VA, &lmr),
                      DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    ck_assert_dat_err(CREATE(ia, DAT_MEM_TYPE_VIRTUAL, d, (DAT_VLEN)SD_MAX_LMR_BLOCK_SIZE + 1, pz, RW,
                             DAT_VA_TYPE_VA, &lmr),
                      DAT_INVALID_PARAMETER, DAT_INVALID_ARG4);
    DAT_REGION_DESCRIPTION dhigh = {.for_va = (void *)(UINTPTR_MAX - 100)};
    ck_assert_dat_err(CREATE(ia, DAT_MEM_TYPE_VIRTUAL, dhigh, 4096, pz, RW, DAT_VA_TYPE_VA, &lmr),
                      DAT_INVALID_PARAMETER, DAT_INVALID_ARG4); /* wraps */
    DAT_REGION_DESCRIPTION dsh = {.for_shared_memory = {.virtual_address = buf, .shared_memory_id = NULL}};
    ck_assert_dat_err(CREATE(ia, DAT_MEM_TYPE_SHARED_VIRTUAL, dsh, 4096, pz, RW, DAT_VA_TYPE_VA, &lmr),
                      DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    DAT_REGION_DESCRIPTION dl = {.for_lmr_handle = (DAT_LMR_HANDLE)pz};
    ck_assert_dat_err(CREATE(ia, DAT_MEM_TYPE_LMR, dl, 0, pz, RW, DAT_VA_TYPE_VA, &lmr), DAT_INVALID_HANDLE,
                      DAT_INVALID_HANDLE_LMR);
    ck_assert_ptr_null(lmr);
    /* A PZ being freed gains no users. */
    struct sd_handle *ph = (struct sd_handle *)pz;
    ck_assert_int_eq(sd_handle_try_retire(ph), 1);
    ck_assert_dat_err(CREATE(ia, DAT_MEM_TYPE_VIRTUAL, d, 4096, pz, RW, DAT_VA_TYPE_VA, &lmr), DAT_INVALID_HANDLE,
                      DAT_INVALID_HANDLE_PZ);
    sd_handle_unretire(ph);
    /* Zero length is a valid (empty) registration. */
    ck_assert_dat_ok(CREATE(ia, DAT_MEM_TYPE_VIRTUAL, d, 0, pz, RW, DAT_VA_TYPE_VA, &lmr));
    ck_assert_int_eq(sz, 0);
    ck_assert_dat_ok(p->lmr_free_func(lmr));
    /* NULL optional outputs are skipped. */
    ck_assert_dat_ok(p->lmr_create_func(ia, DAT_MEM_TYPE_VIRTUAL, d, 64, pz, RW, DAT_VA_TYPE_VA, &lmr, NULL, NULL,
                                        NULL, NULL));
    ck_assert_dat_ok(p->lmr_free_func(lmr));
#undef CREATE
    ck_assert_dat_ok(p->pz_free_func(pz));
    ck_assert_dat_ok(p->pz_free_func(pz2));
    ck_assert_dat_ok(p->ia_close_func(ia, DAT_CLOSE_GRACEFUL_FLAG));
    ck_assert_dat_ok(p->ia_close_func(ia2, DAT_CLOSE_GRACEFUL_FLAG));
    ck_assert_uint_eq(sd_handle_live_count(), 0);
}
END_TEST

START_TEST(lmr_create_query_free)
{
    DAT_PROVIDER *p = fx_provider("t-lmr2", "lo", DAT_FALSE);
    DAT_IA_HANDLE ia = fx_open(p, NULL);
    DAT_PZ_HANDLE pz, pzb;
    ck_assert_dat_ok(p->pz_create_func(ia, &pz));
    ck_assert_dat_ok(p->pz_create_func(ia, &pzb));
    char *buf = malloc(8192);
    struct reg a, b;

    /* Local only: no rmr_context (L7853). */
    ck_assert_dat_ok(reg_va(p, ia, pz, buf, 8192, RW, DAT_VA_TYPE_VA, &a));
    ck_assert_uint_ne(a.lctx, 0);
    ck_assert_uint_eq(a.rctx, 0);
    ck_assert_uint_eq(a.size, 8192);
    ck_assert_uint_eq(a.addr, (DAT_VADDR)(uintptr_t)buf);
    /* Remote write: rmr_context generated. */
    ck_assert_dat_ok(reg_va(p, ia, pz, buf, 4096, DAT_MEM_PRIV_ALL_FLAG, DAT_VA_TYPE_ZB, &b));
    ck_assert_uint_ne(b.rctx, 0);
    ck_assert_uint_ne(b.lctx, a.lctx);

    DAT_LMR_PARAM lp;
    memset(&lp, 0xAB, sizeof lp);
    ck_assert_dat_ok(p->lmr_query_func(b.lmr, DAT_LMR_FIELD_ALL, &lp));
    ck_assert_ptr_eq(lp.ia_handle, ia);
    ck_assert_int_eq(lp.mem_type, DAT_MEM_TYPE_VIRTUAL);
    ck_assert_ptr_eq(lp.region_desc.for_va, buf);
    ck_assert_uint_eq(lp.length, 4096);
    ck_assert_ptr_eq(lp.pz_handle, pz);
    ck_assert_int_eq(lp.mem_priv, DAT_MEM_PRIV_ALL_FLAG);
    ck_assert_int_eq(lp.va_type, DAT_VA_TYPE_ZB);
    ck_assert_uint_eq(lp.lmr_context, b.lctx);
    ck_assert_uint_eq(lp.rmr_context, b.rctx);
    ck_assert_uint_eq(lp.registered_size, 4096);
    ck_assert_uint_eq(lp.registered_address, (DAT_VADDR)(uintptr_t)buf);
    ck_assert_dat_err(p->lmr_query_func(b.lmr, 0x800, &lp), DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    ck_assert_dat_err(p->lmr_query_func(b.lmr, DAT_LMR_FIELD_ALL, NULL), DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    ck_assert_dat_err(p->lmr_query_func(pz, DAT_LMR_FIELD_ALL, &lp), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_LMR);

    /* DAT_MEM_TYPE_LMR: the same memory in another PZ with other rights. */
    DAT_REGION_DESCRIPTION dl = {.for_lmr_handle = a.lmr};
    DAT_LMR_HANDLE c;
    DAT_LMR_CONTEXT clc;
    DAT_RMR_CONTEXT crc;
    DAT_VLEN csz;
    DAT_VADDR cva;
    ck_assert_dat_ok(p->lmr_create_func(ia, DAT_MEM_TYPE_LMR, dl, 1, pzb, DAT_MEM_PRIV_REMOTE_READ_FLAG,
                                        DAT_VA_TYPE_VA, &c, &clc, &crc, &csz, &cva));
    ck_assert_uint_eq(csz, 8192); /* length ignored */
    ck_assert_uint_eq(cva, a.addr);
    ck_assert_uint_ne(clc, a.lctx);
    ck_assert_uint_eq(crc, clc);
    ck_assert_dat_ok(p->lmr_query_func(c, DAT_LMR_FIELD_ALL, &lp));
    ck_assert_int_eq(lp.mem_type, DAT_MEM_TYPE_LMR);
    ck_assert_ptr_eq(lp.pz_handle, pzb);

    /* Shared virtual: registered as virtual, cookie kept (40 bytes). */
    char cookie[DAT_LMR_COOKIE_SIZE];
    for (int i = 0; i < DAT_LMR_COOKIE_SIZE; i++)
        cookie[i] = (char)(i * 3);
    DAT_REGION_DESCRIPTION dsh = {.for_shared_memory = {.virtual_address = buf, .shared_memory_id = &cookie}};
    DAT_LMR_HANDLE s;
    ck_assert_dat_ok(p->lmr_create_func(ia, DAT_MEM_TYPE_SHARED_VIRTUAL, dsh, 512, pz, RW, DAT_VA_TYPE_VA, &s,
                                        NULL, NULL, &csz, NULL));
    ck_assert_uint_eq(csz, 512);
    memset(cookie, 0, sizeof cookie);
    ck_assert_dat_ok(p->lmr_query_func(s, DAT_LMR_FIELD_ALL, &lp));
    ck_assert_int_eq(lp.mem_type, DAT_MEM_TYPE_SHARED_VIRTUAL);
    ck_assert_ptr_eq(lp.region_desc.for_shared_memory.virtual_address, buf);
    for (int i = 0; i < DAT_LMR_COOKIE_SIZE; i++)
        ck_assert_int_eq((*lp.region_desc.for_shared_memory.shared_memory_id)[i], (char)(i * 3));

    /* PZ in use while LMRs reference it. */
    ck_assert_dat_err(p->pz_free_func(pzb), DAT_INVALID_STATE, DAT_INVALID_STATE_PZ_IN_USE);

    /* LMR with a bound RMR: free refuses, nothing changed (L7933). */
    DAT_RMR_HANDLE rmr;
    ck_assert_dat_ok(p->rmr_create_func(pz, &rmr));
    struct emu_mw_bind_attr ba = {.mr = ((struct sd_lmr *)b.lmr)->mr, .addr = 0, .length = 100,
                                  .access = EMU_ACC_REMOTE_READ, .va_type = EMU_VA_ZB};
    uint32_t stag;
    ck_assert_int_eq(emu_mem_mw_bind(((struct sd_rmr *)rmr)->mw, &ba, &stag), EMU_MEM_OK);
    ck_assert_dat_err(p->lmr_free_func(b.lmr), DAT_INVALID_STATE, DAT_INVALID_STATE_LMR_IN_USE);
    ck_assert_dat_ok(p->lmr_query_func(b.lmr, DAT_LMR_FIELD_ALL, &lp));
    struct emu_sge sge;
    DAT_LMR_TRIPLET t = {.virtual_address = 0, .segment_length = 16, .lmr_context = b.lctx};
    ck_assert_dat_ok(sd_lmr_check_iov((struct sd_ia *)ia, (struct sd_pz *)pz, &t, 1, EMU_ACC_LOCAL_READ, &sge, NULL));
    ck_assert_dat_ok(p->rmr_free_func(rmr)); /* unbinds */
    ck_assert_dat_ok(p->lmr_free_func(b.lmr));
    ck_assert_dat_err(p->lmr_free_func(b.lmr), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_LMR);

    ck_assert_dat_ok(p->lmr_free_func(a.lmr));
    ck_assert_dat_ok(p->lmr_free_func(c)); /* outlived its source */
    ck_assert_dat_ok(p->pz_free_func(pzb));
    /* Abrupt close takes the rest (LMR s, PZ pz). */
    ck_assert_dat_ok(p->ia_close_func(ia, DAT_CLOSE_ABRUPT_FLAG));
    ck_assert_uint_eq(sd_handle_live_count(), 0);
    free(buf);
}
END_TEST

START_TEST(lmr_check_iov_outcomes)
{
    DAT_PROVIDER *p = fx_provider("t-lmr3", "lo", DAT_FALSE);
    DAT_IA_HANDLE ia = fx_open(p, NULL);
    struct sd_ia *sia = (struct sd_ia *)ia;
    DAT_PZ_HANDLE pz, other;
    ck_assert_dat_ok(p->pz_create_func(ia, &pz));
    ck_assert_dat_ok(p->pz_create_func(ia, &other));
    struct sd_pz *spz = (struct sd_pz *)pz;
    static char buf[4096], zb[1024];
    struct reg rw, ro, z;
    ck_assert_dat_ok(reg_va(p, ia, pz, buf, sizeof buf, RW, DAT_VA_TYPE_VA, &rw));
    ck_assert_dat_ok(reg_va(p, ia, pz, buf, sizeof buf, DAT_MEM_PRIV_LOCAL_READ_FLAG, DAT_VA_TYPE_VA, &ro));
    ck_assert_dat_ok(reg_va(p, ia, pz, zb, sizeof zb, RW, DAT_VA_TYPE_ZB, &z));

    struct emu_sge out[4];
    uint64_t total = 0;
    DAT_VADDR base = (DAT_VADDR)(uintptr_t)buf;
    DAT_LMR_TRIPLET iov[4] = {
        {.virtual_address = base + 10, .segment_length = 100, .lmr_context = rw.lctx},
        {.virtual_address = 0xDEAD, .segment_length = 0, .lmr_context = 0x12345}, /* skipped */
        {.virtual_address = 16, .segment_length = 1008, .lmr_context = z.lctx},    /* ZB: offsets */
        {.virtual_address = base, .segment_length = 4096, .lmr_context = ro.lctx},
    };
    ck_assert_dat_ok(sd_lmr_check_iov(sia, spz, iov, 4, EMU_ACC_LOCAL_READ, out, &total));
    ck_assert_ptr_eq(out[0].addr, buf + 10);
    ck_assert_uint_eq(out[0].len, 100);
    ck_assert_ptr_null(out[1].addr);
    ck_assert_uint_eq(out[1].len, 0);
    ck_assert_ptr_eq(out[2].addr, zb + 16);
    ck_assert_uint_eq(out[2].len, 1008);
    ck_assert_ptr_eq(out[3].addr, buf);
    ck_assert_uint_eq(total, 100 + 1008 + 4096);
    ck_assert_dat_ok(sd_lmr_check_iov(sia, spz, NULL, 0, EMU_ACC_LOCAL_READ, out, &total));
    ck_assert_uint_eq(total, 0);

    /* Outside its LMR: invalid parameter on the local_iov argument. */
    DAT_LMR_TRIPLET bad = {.virtual_address = base + 4000, .segment_length = 97, .lmr_context = rw.lctx};
    ck_assert_dat_err(sd_lmr_check_iov(sia, spz, &bad, 1, EMU_ACC_LOCAL_READ, out, NULL), DAT_INVALID_PARAMETER,
                      DAT_INVALID_ARG3);
    bad = (DAT_LMR_TRIPLET){.virtual_address = 1020, .segment_length = 8, .lmr_context = z.lctx};
    ck_assert_dat_err(sd_lmr_check_iov(sia, spz, &bad, 1, EMU_ACC_LOCAL_WRITE, out, NULL), DAT_INVALID_PARAMETER,
                      DAT_INVALID_ARG3);
    bad = (DAT_LMR_TRIPLET){.virtual_address = UINT64_MAX - 2, .segment_length = 8, .lmr_context = rw.lctx};
    ck_assert_dat_err(sd_lmr_check_iov(sia, spz, &bad, 1, EMU_ACC_LOCAL_READ, out, NULL), DAT_INVALID_PARAMETER,
                      DAT_INVALID_ARG3);
    ck_assert_dat_err(sd_lmr_check_iov(sia, spz, NULL, 1, EMU_ACC_LOCAL_READ, out, NULL), DAT_INVALID_PARAMETER,
                      DAT_INVALID_ARG3);
    ck_assert_dat_err(sd_lmr_check_iov(sia, spz, iov, -1, EMU_ACC_LOCAL_READ, out, NULL), DAT_INVALID_PARAMETER,
                      DAT_INVALID_ARG2);
    /* Wrong PZ. */
    ck_assert_dat_err(sd_lmr_check_iov(sia, (struct sd_pz *)other, iov, 1, EMU_ACC_LOCAL_READ, out, NULL),
                      DAT_PROTECTION_VIOLATION, 0);
    /* Missing LOCAL_WRITE (a Recv into a read-only LMR). */
    ck_assert_dat_err(sd_lmr_check_iov(sia, spz, &iov[3], 1, EMU_ACC_LOCAL_WRITE, out, NULL),
                      DAT_PRIVILEGES_VIOLATION, 0);
    /* Local read is implied (verbs semantics, dtest relies on it): an LMR
     * registered LOCAL_WRITE only is a valid Send source. */
    struct reg wo;
    ck_assert_dat_ok(reg_va(p, ia, pz, buf, 64, DAT_MEM_PRIV_LOCAL_WRITE_FLAG, DAT_VA_TYPE_VA, &wo));
    bad = (DAT_LMR_TRIPLET){.virtual_address = base, .segment_length = 64, .lmr_context = wo.lctx};
    ck_assert_dat_ok(sd_lmr_check_iov(sia, spz, &bad, 1, EMU_ACC_LOCAL_READ, out, NULL));
    DAT_LMR_PARAM lp;
    ck_assert_dat_ok(p->lmr_query_func(wo.lmr, DAT_LMR_FIELD_MEM_PRIV, &lp));
    ck_assert_int_eq(lp.mem_priv, DAT_MEM_PRIV_LOCAL_WRITE_FLAG); /* as requested */
    /* Segments of one registration share one reference to it (lmr.c):
     * each is still checked on its own, and none is left held (the LMR
     * frees below without waiting). */
    DAT_LMR_TRIPLET seg[5] = {
        {.virtual_address = base, .segment_length = 32, .lmr_context = rw.lctx},
        {.virtual_address = base + 64, .segment_length = 64, .lmr_context = rw.lctx},
        {.virtual_address = base + 1024, .segment_length = 8, .lmr_context = ro.lctx},
        {.virtual_address = base + 4064, .segment_length = 32, .lmr_context = rw.lctx},
        {.virtual_address = base + 4064, .segment_length = 33, .lmr_context = rw.lctx},
    };
    ck_assert_dat_ok(sd_lmr_check_iov(sia, spz, seg, 4, EMU_ACC_LOCAL_READ, out, &total));
    ck_assert_ptr_eq(out[1].addr, buf + 64);
    ck_assert_ptr_eq(out[2].addr, buf + 1024);
    ck_assert_ptr_eq(out[3].addr, buf + 4064);
    ck_assert_uint_eq(total, 32 + 64 + 8 + 32);
    ck_assert_dat_err(sd_lmr_check_iov(sia, spz, &seg[1], 4, EMU_ACC_LOCAL_READ, out, NULL), DAT_INVALID_PARAMETER,
                      DAT_INVALID_ARG3); /* the last one is a byte too long */
    ck_assert_dat_err(sd_lmr_check_iov(sia, spz, seg, 3, EMU_ACC_LOCAL_WRITE, out, NULL), DAT_PRIVILEGES_VIOLATION,
                      0); /* the third is in the read-only registration */
    ck_assert_dat_err(sd_lmr_check_iov(sia, (struct sd_pz *)other, seg, 2, EMU_ACC_LOCAL_READ, out, NULL),
                      DAT_PROTECTION_VIOLATION, 0);
    /* Garbage and stale contexts. */
    bad = (DAT_LMR_TRIPLET){.virtual_address = base, .segment_length = 8, .lmr_context = 0x12345};
    ck_assert_dat_err(sd_lmr_check_iov(sia, spz, &bad, 1, EMU_ACC_LOCAL_READ, out, NULL), DAT_PRIVILEGES_VIOLATION,
                      0);
    ck_assert_dat_ok(p->lmr_free_func(rw.lmr));
    ck_assert_dat_err(sd_lmr_check_iov(sia, spz, iov, 1, EMU_ACC_LOCAL_READ, out, NULL), DAT_PRIVILEGES_VIOLATION, 0);

    /* dat_lmr_sync_rdma_read/write: validate, then fence. */
    DAT_LMR_TRIPLET sy[2] = {
        {.virtual_address = base, .segment_length = 4096, .lmr_context = ro.lctx},
        {.virtual_address = 0, .segment_length = 0, .lmr_context = 0}, /* zero-length: skipped */
    };
    ck_assert_dat_ok(p->lmr_sync_rdma_read_func(ia, sy, 2));
    ck_assert_dat_ok(p->lmr_sync_rdma_write_func(ia, sy, 2));
    ck_assert_dat_ok(p->lmr_sync_rdma_write_func(ia, NULL, 0));
    ck_assert_dat_err(p->lmr_sync_rdma_read_func(ia, NULL, 1), DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    ck_assert_dat_err(p->lmr_sync_rdma_read_func(NULL, sy, 1), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);
    sy[0].segment_length = 4097;
    ck_assert_dat_err(p->lmr_sync_rdma_read_func(ia, sy, 1), DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    sy[0].segment_length = 8;
    sy[0].lmr_context = rw.lctx; /* freed */
    ck_assert_dat_err(p->lmr_sync_rdma_write_func(ia, sy, 1), DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);

    ck_assert_dat_ok(p->ia_close_func(ia, DAT_CLOSE_ABRUPT_FLAG));
    ck_assert_uint_eq(sd_handle_live_count(), 0);
}
END_TEST

START_TEST(lmr_priv_mapping)
{
    ck_assert_uint_eq(sd_mem_priv_to_emu(DAT_MEM_PRIV_NONE_FLAG), 0);
    ck_assert_uint_eq(sd_mem_priv_to_emu(DAT_MEM_PRIV_LOCAL_READ_FLAG), EMU_ACC_LOCAL_READ);
    ck_assert_uint_eq(sd_mem_priv_to_emu(DAT_MEM_PRIV_LOCAL_WRITE_FLAG), EMU_ACC_LOCAL_WRITE);
    ck_assert_uint_eq(sd_mem_priv_to_emu(DAT_MEM_PRIV_REMOTE_READ_FLAG), EMU_ACC_REMOTE_READ);
    ck_assert_uint_eq(sd_mem_priv_to_emu(DAT_MEM_PRIV_REMOTE_WRITE_FLAG), EMU_ACC_REMOTE_WRITE);
    ck_assert_uint_eq(sd_mem_priv_to_emu((DAT_MEM_PRIV_FLAGS)0x40), EMU_ACC_REMOTE_ATOMIC);
    ck_assert_uint_eq(sd_mem_priv_to_emu(DAT_MEM_PRIV_ALL_FLAG), EMU_ACC_LOCAL_MASK | EMU_ACC_REMOTE_READ |
                                                                     EMU_ACC_REMOTE_WRITE);
    for (unsigned v = 0; v < 0x80; v++) {
        DAT_MEM_PRIV_FLAGS f = (DAT_MEM_PRIV_FLAGS)(v & 0x73);
        ck_assert_int_eq(sd_mem_priv_from_emu(sd_mem_priv_to_emu(f)), f);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("provider-lmr");
    TCase *tc = tcase_create("lmr");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, lmr_create_errors);
    tcase_add_test(tc, lmr_create_query_free);
    tcase_add_test(tc, lmr_check_iov_outcomes);
    tcase_add_test(tc, lmr_priv_mapping);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
