/* Compliance: dat_rmr_bind and dat_rmr_create_for_ep (every error code
 * their Returns lists name) and the RMR semantics over a real loopback
 * connection (rc_pair.h): the bind is a posted operation completing on
 * the request EVD as an RMR bind event; its context is valid only after
 * that completion; it fences later work; zero length unbinds; a rebind
 * kills the old context; EP and PZ scopes; Send with invalidate (window
 * and LMR contexts, the invalidation visible before the receive
 * completes); RDMA Read into an RMR; DAT_RMR_OPERATION_FAILED. Findings
 * and choices: docs/compliance-notes-dto.md. */
#include "lib/provider/limits.h"
#include "test/lib/rc_pair.h"

#define NONE_US 100000

static DAT_RETURN do_bind(struct rp_side *s, DAT_RMR_HANDLE rmr, DAT_LMR_HANDLE lmr, DAT_LMR_CONTEXT lc, const void *addr,
                       DAT_SEG_LENGTH len, DAT_MEM_PRIV_FLAGS priv, DAT_EP_HANDLE ep, uint64_t cookie,
                       DAT_COMPLETION_FLAGS f, DAT_RMR_CONTEXT *ctx)
{
    DAT_LMR_TRIPLET t = rp_tri(lc, addr, len);
    return s->p->rmr_bind_func(rmr, lmr, &t, priv, DAT_VA_TYPE_VA, ep, rp_ck(cookie), f, ctx);
}

/* Wait for the bind completion of rmr; returns its status. */
static DAT_RMR_BIND_COMPLETION_STATUS bind_done(struct rp_side *s, DAT_RMR_HANDLE rmr, uint64_t cookie)
{
    DAT_EVENT ev = rp_wait(s, s->req, DAT_RMR_BIND_COMPLETION_EVENT);
    const DAT_RMR_BIND_COMPLETION_EVENT_DATA *b = &ev.event_data.rmr_completion_event_data;
    ck_assert_ptr_eq(b->rmr_handle, rmr);
    ck_assert_uint_eq(b->user_cookie.as_64, cookie);
    return b->status;
}

static DAT_RMR_PARAM rmr_q(struct rp_side *s, DAT_RMR_HANDLE rmr)
{
    DAT_RMR_PARAM q;
    memset(&q, 0, sizeof q);
    ck_assert_dat_ok(s->p->rmr_query_func(rmr, DAT_RMR_FIELD_ALL, &q));
    return q;
}

/* An RDMA Read by side `s` over ep from remote (ctx, addr) of len bytes
 * into s->buf + off; returns the completion status. */
static DAT_DTO_COMPLETION_STATUS read_via(struct rp_side *s, DAT_EP_HANDLE ep, DAT_RMR_CONTEXT ctx, const void *addr,
                                          DAT_SEG_LENGTH len, size_t off)
{
    DAT_LMR_TRIPLET t = rp_tri(s->lc, s->buf + off, len);
    DAT_RMR_TRIPLET r = rp_rtri(ctx, addr, len);
    ck_assert_dat_ok(s->p->ep_post_rdma_read_func(ep, 1, &t, rp_ck(0x5EAD), &r, 0));
    DAT_DTO_COMPLETION_EVENT_DATA d = rp_dto(s, s->req);
    ck_assert_uint_eq(d.user_cookie.as_64, 0x5EAD);
    return d.status;
}


/* ------------------------------------------------------------ codes */

START_TEST(bind_bad_handles)
{
    struct rp_pair x;
    rp_open(&x, "t-rcbind-h", NULL, NULL);
    struct rp_side *c = &x.c;
    DAT_PROVIDER *p = c->p;
    DAT_RMR_HANDLE rmr, dead_rmr;
    DAT_LMR_HANDLE dead_lmr;
    DAT_LMR_CONTEXT dlc;
    DAT_EP_HANDLE dead_ep = rp_ep(c, NULL);
    DAT_PZ_HANDLE dead_pz;
    ck_assert_dat_ok(p->rmr_create_func(c->pz, &rmr));
    ck_assert_dat_ok(p->rmr_create_func(c->pz, &dead_rmr));
    ck_assert_dat_ok(p->rmr_free_func(dead_rmr));
    rp_lmr(c, c->pz, DAT_MEM_PRIV_ALL_FLAG, &dead_lmr, &dlc, NULL);
    ck_assert_dat_ok(p->lmr_free_func(dead_lmr));
    ck_assert_dat_ok(p->ep_free_func(dead_ep));
    ck_assert_dat_ok(p->pz_create_func(c->ia, &dead_pz));
    ck_assert_dat_ok(p->pz_free_func(dead_pz));
    DAT_RMR_CONTEXT ctx = 0x77;
    const DAT_MEM_PRIV_FLAGS rw = DAT_MEM_PRIV_REMOTE_WRITE_FLAG;
    DAT_HANDLE junk[] = {NULL, (DAT_HANDLE)0x10, (DAT_HANDLE)(c->buf + 3), c->pz, c->req};
    for (unsigned i = 0; i < sizeof junk / sizeof junk[0]; i++) {
        ck_assert_dat_err(do_bind(c, junk[i], c->lmr, c->lc, c->buf, 64, rw, x.cep, 1, 0, &ctx), DAT_INVALID_HANDLE,
                          DAT_INVALID_HANDLE_RMR);
        ck_assert_dat_err(do_bind(c, rmr, c->lmr, c->lc, c->buf, 64, rw, junk[i], 1, 0, &ctx), DAT_INVALID_HANDLE,
                          DAT_INVALID_HANDLE_EP);
        ck_assert_dat_err(do_bind(c, rmr, junk[i], c->lc, c->buf, 64, rw, x.cep, 1, 0, &ctx), DAT_INVALID_HANDLE,
                          DAT_INVALID_HANDLE_LMR);
        DAT_RMR_HANDLE out;
        if (junk[i] != c->pz)
            ck_assert_dat_err(p->rmr_create_for_ep_func(junk[i], &out), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_PZ);
    }
    ck_assert_dat_err(do_bind(c, dead_rmr, c->lmr, c->lc, c->buf, 64, rw, x.cep, 1, 0, &ctx), DAT_INVALID_HANDLE,
                      DAT_INVALID_HANDLE_RMR);
    ck_assert_dat_err(do_bind(c, rmr, c->lmr, c->lc, c->buf, 64, rw, dead_ep, 1, 0, &ctx), DAT_INVALID_HANDLE,
                      DAT_INVALID_HANDLE_EP);
    ck_assert_dat_err(do_bind(c, rmr, dead_lmr, dlc, c->buf, 64, rw, x.cep, 1, 0, &ctx), DAT_INVALID_HANDLE,
                      DAT_INVALID_HANDLE_LMR);
    ck_assert_uint_eq(ctx, 0x77); /* untouched by the failures above */
    DAT_RMR_HANDLE out;
    ck_assert_dat_err(p->rmr_create_for_ep_func(dead_pz, &out), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_PZ);
    ck_assert_dat_err(p->rmr_create_for_ep_func(c->pz, NULL), DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    /* Unbind needs no LMR: any lmr_handle is ignored then. */
    ck_assert_dat_ok(do_bind(c, rmr, (DAT_LMR_HANDLE)0x10, 0, NULL, 0, 0, x.cep, 2, 0, &ctx));
    ck_assert_int_eq(bind_done(c, rmr, 2), DAT_RMR_BIND_SUCCESS);
    rp_none(c, c->req, NONE_US);
    rp_close(&x);
}
END_TEST

/* Every INVALID_PARAMETER / PROTECTION / PRIVILEGES / INVALID_STATE /
 * INSUFFICIENT_RESOURCES case of dat_rmr_bind; none leaves a trace. */
START_TEST(bind_argument_codes)
{
    struct rp_pair x;
    rp_open(&x, "t-rcbind-a", NULL, NULL);
    struct rp_side *c = &x.c;
    DAT_PROVIDER *p = c->p;
    DAT_RMR_HANDLE rmr, rmr2;
    ck_assert_dat_ok(p->rmr_create_func(c->pz, &rmr));
    ck_assert_dat_ok(p->rmr_create_func(c->pz2, &rmr2));
    DAT_RMR_CONTEXT ctx = 0;
    const DAT_MEM_PRIV_FLAGS rw = DAT_MEM_PRIV_REMOTE_WRITE_FLAG;
    DAT_LMR_TRIPLET t = rp_tri(c->lc, c->buf, 64);
    ck_assert_dat_err(p->rmr_bind_func(rmr, c->lmr, NULL, rw, DAT_VA_TYPE_VA, x.cep, rp_ck(1), 0, &ctx),
                      DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    /* Range outside the LMR (L8283): before, past, straddling the end,
     * wrapping; also in a ZB LMR's offsets. */
    const void *outs[] = {c->buf - 64, c->buf + RP_BUF, c->buf + RP_BUF - 32, (void *)(UINTPTR_MAX - 16)};
    for (unsigned i = 0; i < 4; i++)
        ck_assert_dat_err(do_bind(c, rmr, c->lmr, c->lc, outs[i], 64, rw, x.cep, 1, 0, &ctx), DAT_INVALID_PARAMETER,
                          DAT_INVALID_ARG3);
    /* Unknown privilege bits (Table 15 + the IB atomic extension bit). */
    DAT_MEM_PRIV_FLAGS badp[] = {0x04, 0x08, 0x80, 0x100, 0x10000};
    for (unsigned i = 0; i < 5; i++)
        ck_assert_dat_err(p->rmr_bind_func(rmr, c->lmr, &t, badp[i], DAT_VA_TYPE_VA, x.cep, rp_ck(1), 0, &ctx),
                          DAT_INVALID_PARAMETER, DAT_INVALID_ARG4);
    ck_assert_dat_err(p->rmr_bind_func(rmr, c->lmr, &t, rw, (DAT_VA_TYPE)2, x.cep, rp_ck(1), 0, &ctx),
                      DAT_INVALID_PARAMETER, DAT_INVALID_ARG5);
    /* Flags (Table 16): SUPPRESS, UNSIGNALLED (threshold EP: refused,
     * L8271), BARRIER_FENCE only. */
    DAT_COMPLETION_FLAGS badf[] = {DAT_COMPLETION_SOLICITED_WAIT_FLAG, DAT_COMPLETION_UNSIGNALLED_FLAG,
                                   DAT_COMPLETION_EVD_THRESHOLD_FLAG, DAT_COMPLETION_LMR_INVALIDATE_FENCE_FLAG, 0x40,
                                   0x8000};
    for (unsigned i = 0; i < 6; i++)
        ck_assert_dat_err(do_bind(c, rmr, c->lmr, c->lc, c->buf, 64, rw, x.cep, 1, badf[i], &ctx), DAT_INVALID_PARAMETER,
                          DAT_INVALID_ARG8);
    ck_assert_dat_err(do_bind(c, rmr, c->lmr, c->lc, c->buf, 64, rw, x.cep, 1, 0, NULL), DAT_INVALID_PARAMETER,
                      DAT_INVALID_ARG9);
    /* PZs of LMR, RMR and EP must be one (L5556-5559): RMR elsewhere, LMR
     * elsewhere, both elsewhere (the EP's differs). */
    ck_assert_dat_err(do_bind(c, rmr2, c->lmr, c->lc, c->buf, 64, rw, x.cep, 1, 0, &ctx), DAT_PROTECTION_VIOLATION, 0);
    ck_assert_dat_err(do_bind(c, rmr, c->lmr_pz2, c->lc_pz2, c->buf, 64, rw, x.cep, 1, 0, &ctx),
                      DAT_PROTECTION_VIOLATION, 0);
    ck_assert_dat_err(do_bind(c, rmr2, c->lmr_pz2, c->lc_pz2, c->buf, 64, rw, x.cep, 1, 0, &ctx),
                      DAT_PROTECTION_VIOLATION, 0);
    /* Rights the LMR does not back (L8259-8265): REMOTE_WRITE or remote
     * atomic on a LOCAL_READ-only LMR. */
    ck_assert_dat_err(do_bind(c, rmr, c->lmr_ro, c->lc_ro, c->buf, 64, rw, x.cep, 1, 0, &ctx), DAT_PRIVILEGES_VIOLATION,
                      0);
    ck_assert_dat_err(do_bind(c, rmr, c->lmr_ro, c->lc_ro, c->buf, 64, DAT_MEM_PRIV_EXTENSION_BASE, x.cep, 1, 0, &ctx),
                      DAT_PRIVILEGES_VIOLATION, 0);
    /* REMOTE_READ is backed by every LMR (all are locally readable). */
    ck_assert_uint_eq(ctx, 0);
    rp_none(c, c->req, NONE_US);
    ck_assert_int_eq(rmr_q(c, rmr).rmr_context, 0); /* still unbound */

    /* States (L8275): every one but Connected / Disconnected. */
    DAT_EP_HANDLE ep = rp_ep(c, NULL);
    for (unsigned i = 0; i < fx_ep_nstates; i++) {
        if (fx_state_posts_ok(fx_ep_states[i].s))
            continue;
        fx_force_state(ep, fx_ep_states[i].s);
        ck_assert_dat_err(do_bind(c, rmr, c->lmr, c->lc, c->buf, 64, rw, ep, 1, 0, &ctx), DAT_INVALID_STATE, fx_ep_states[i].sub);
        DAT_LMR_TRIPLET z = rp_tri(0, NULL, 0);
        ck_assert_dat_err(p->rmr_bind_func(rmr, NULL, &z, 0, DAT_VA_TYPE_VA, ep, rp_ck(1), 0, &ctx), DAT_INVALID_STATE,
                          fx_ep_states[i].sub);
    }
    fx_force_state(ep, DAT_EP_STATE_UNCONNECTED);
    /* Disconnected: accepted, flushed at once as a bind event (L8275). */
    ck_assert_dat_ok(p->ep_disconnect_func(x.cep, DAT_CLOSE_ABRUPT_FLAG));
    rp_wait(c, c->conn, DAT_CONNECTION_EVENT_DISCONNECTED);
    ck_assert_dat_ok(do_bind(c, rmr, c->lmr, c->lc, c->buf, 64, rw, x.cep, 5, DAT_COMPLETION_SUPPRESS_FLAG, &ctx));
    ck_assert_int_eq(bind_done(c, rmr, 5), DAT_DTO_ERR_FLUSHED);
    ck_assert_int_eq(rmr_q(c, rmr).rmr_context, 0);
    rp_close(&x);
}
END_TEST

/* The request queue is shared with the DTOs: full ⇒ INSUFFICIENT_RESOURCES. */
START_TEST(bind_queue_full)
{
    struct rp_pair x;
    rp_open(&x, "t-rcbind-f", NULL, NULL);
    struct rp_side *c = &x.c;
    DAT_RMR_HANDLE rmr[9];
    DAT_RMR_CONTEXT ctx;
    for (int i = 0; i < 9; i++)
        ck_assert_dat_ok(c->p->rmr_create_func(c->pz, &rmr[i]));
    /* Suppressed successes keep their slots (L8452). */
    for (int i = 0; i < 8; i++)
        ck_assert_dat_ok(do_bind(c, rmr[i], c->lmr, c->lc, c->buf + 64 * i, 64, DAT_MEM_PRIV_REMOTE_READ_FLAG, x.cep, i,
                              DAT_COMPLETION_SUPPRESS_FLAG, &ctx));
    rp_none(c, c->req, NONE_US);
    ck_assert_dat_err(do_bind(c, rmr[8], c->lmr, c->lc, c->buf, 64, DAT_MEM_PRIV_REMOTE_READ_FLAG, x.cep, 8, 0, &ctx),
                      DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEP);
    rp_close(&x);
}
END_TEST

/* dat_rmr_create_for_ep counts against max_rmrs with dat_rmr_create. */
START_TEST(create_for_ep_limit)
{
    DAT_PROVIDER *p = fx_provider("t-rcbind-l", "lo", DAT_FALSE);
    DAT_IA_HANDLE ia = fx_open(p, NULL);
    DAT_PZ_HANDLE pz;
    ck_assert_dat_ok(p->pz_create_func(ia, &pz));
    DAT_IA_ATTR a;
    ck_assert_dat_ok(p->ia_query_func(ia, NULL, DAT_IA_FIELD_IA_MAX_RMRS, &a, 0, NULL));
    ck_assert_int_eq(a.max_rmrs, SD_MAX_RMRS);
    DAT_RMR_HANDLE *h = calloc((size_t)a.max_rmrs, sizeof *h);
    ck_assert_ptr_nonnull(h);
    ck_assert_dat_ok(p->rmr_create_func(pz, &h[0]));
    for (DAT_COUNT i = 1; i < a.max_rmrs; i++)
        ck_assert_dat_ok(p->rmr_create_for_ep_func(pz, &h[i]));
    DAT_RMR_HANDLE extra;
    DAT_RETURN rc = p->rmr_create_for_ep_func(pz, &extra);
    ck_assert_msg(DAT_GET_TYPE(rc) == DAT_INSUFFICIENT_RESOURCES, "got 0x%x", (unsigned)rc);
    ck_assert_dat_ok(p->rmr_free_func(h[5]));
    ck_assert_dat_ok(p->rmr_create_for_ep_func(pz, &h[5]));
    DAT_RMR_PARAM q;
    ck_assert_dat_ok(p->rmr_query_func(h[5], DAT_RMR_FIELD_RMR_SCOPE, &q));
    ck_assert_int_eq(q.rmr_scope, DAT_RMR_SCOPE_EP);
    ck_assert_dat_ok(p->ia_close_func(ia, DAT_CLOSE_ABRUPT_FLAG));
    free(h);
}
END_TEST

/* ------------------------------------------------------------ semantics */

/* A bind is posted: the context comes back at once, the completion is a
 * DAT_RMR_BIND_COMPLETION_EVENT on the request EVD; then the window gives
 * exactly the rights and range asked for (VA and ZB). */
START_TEST(bind_completion_and_access)
{
    struct rp_pair x;
    rp_open(&x, "t-rcbind-c", NULL, NULL);
    struct rp_side *c = &x.c, *s = &x.s;
    DAT_PROVIDER *p = s->p;
    for (int i = 0; i < 256; i++)
        s->buf[i] = (char)i;
    DAT_RMR_HANDLE w;
    ck_assert_dat_ok(p->rmr_create_func(s->pz, &w));
    DAT_RMR_CONTEXT ctx = 0;
    ck_assert_dat_ok(do_bind(s, w, s->lmr, s->lc, s->buf + 64, 64, DAT_MEM_PRIV_REMOTE_READ_FLAG, x.sep, 0xB1, 0, &ctx));
    ck_assert_uint_ne(ctx, 0);
    ck_assert_uint_ne(ctx, s->rc);
    ck_assert_int_eq(bind_done(s, w, 0xB1), DAT_RMR_BIND_SUCCESS);
    DAT_RMR_PARAM q = rmr_q(s, w);
    ck_assert_uint_eq(q.rmr_context, ctx);
    ck_assert_uint_eq(q.lmr_triplet.lmr_context, s->lc);
    ck_assert_uint_eq(q.lmr_triplet.virtual_address, (DAT_VADDR)(uintptr_t)(s->buf + 64));
    ck_assert_uint_eq(q.lmr_triplet.segment_length, 64);
    ck_assert_uint_eq(q.mem_priv, DAT_MEM_PRIV_REMOTE_READ_FLAG);
    ck_assert_int_eq(q.rmr_scope, DAT_RMR_SCOPE_PZ);
    /* A bound window holds its LMR. */
    ck_assert_dat_err(p->lmr_free_func(s->lmr), DAT_INVALID_STATE, DAT_INVALID_STATE_LMR_IN_USE);
    /* The peer reads through it: inside works... */
    ck_assert_int_eq(read_via(c, x.cep, ctx, s->buf + 64, 16, 1000), DAT_DTO_SUCCESS);
    ck_assert_int_eq(memcmp(c->buf + 1000, s->buf + 64, 16), 0);
    /* ZB: the same memory through offsets from the window's start. */
    DAT_RMR_HANDLE z;
    ck_assert_dat_ok(p->rmr_create_func(s->pz, &z));
    DAT_LMR_TRIPLET zt = rp_tri(s->lc, s->buf + 128, 32);
    DAT_RMR_CONTEXT zctx;
    ck_assert_dat_ok(p->rmr_bind_func(z, s->lmr, &zt, DAT_MEM_PRIV_REMOTE_READ_FLAG, DAT_VA_TYPE_ZB, x.sep, rp_ck(0xB2),
                                      0, &zctx));
    ck_assert_uint_ne(zctx, ctx);
    ck_assert_int_eq(bind_done(s, z, 0xB2), DAT_RMR_BIND_SUCCESS);
    ck_assert_int_eq(rmr_q(s, z).va_type, DAT_VA_TYPE_ZB);
    ck_assert_int_eq(read_via(c, x.cep, zctx, (void *)8, 8, 1100), DAT_DTO_SUCCESS);
    ck_assert_int_eq(memcmp(c->buf + 1100, s->buf + 136, 8), 0);
    /* ...a write is not granted (REMOTE_READ only): the peer's Write
     * breaks the connection, nothing lands. */
    DAT_LMR_TRIPLET src = rp_tri(c->lc, c->buf + 1000, 8);
    DAT_RMR_TRIPLET dst = rp_rtri(ctx, s->buf + 64, 8);
    char before[8];
    memcpy(before, s->buf + 64, 8);
    memset(c->buf + 1000, 0xEE, 8);
    ck_assert_dat_ok(c->p->ep_post_rdma_write_func(x.cep, 1, &src, rp_ck(3), &dst, 0));
    rp_wait(c, c->conn, DAT_CONNECTION_EVENT_BROKEN);
    ck_assert_int_eq(memcmp(s->buf + 64, before, 8), 0);
    rp_close(&x);
}
END_TEST

/* The context is valid only once the bind completed, and the bind fences
 * what is posted after it (L8222, L8239): the client's queue is held by
 * an outstanding Read (the server's engine is stalled) and a fenced bind;
 * a Send carrying the new context is posted right behind. Until the Read
 * is answered, the window is unbound and nothing after the bind
 * completes; then bind, then Send, and the peer can use the context it
 * received at once. */
START_TEST(bind_valid_after_completion_and_fences)
{
    struct rp_pair x;
    rp_open(&x, "t-rcbind-v", NULL, NULL);
    struct rp_side *c = &x.c, *s = &x.s;
    DAT_PROVIDER *p = c->p;
    for (int i = 0; i < 64; i++)
        c->buf[2048 + i] = (char)(0x40 + i);
    DAT_LMR_TRIPLET sr = rp_tri(s->lc, s->buf + 4000, 16);
    ck_assert_dat_ok(s->p->ep_post_recv_func(x.sep, 1, &sr, rp_ck(1), 0));
    DAT_RMR_HANDLE w;
    ck_assert_dat_ok(p->rmr_create_func(c->pz, &w));
    struct rp_stall stall;
    rp_stall_begin(&stall, s->ia);
    DAT_LMR_TRIPLET rt = rp_tri(c->lc, c->buf + 100, 8);
    DAT_RMR_TRIPLET rr = rp_rtri(s->rc, s->buf, 8);
    ck_assert_dat_ok(p->ep_post_rdma_read_func(x.cep, 1, &rt, rp_ck(0xAA), &rr, 0));
    DAT_RMR_CONTEXT ctx = 0;
    ck_assert_dat_ok(do_bind(c, w, c->lmr, c->lc, c->buf + 2048, 64,
                          DAT_MEM_PRIV_REMOTE_READ_FLAG | DAT_MEM_PRIV_REMOTE_WRITE_FLAG, x.cep, 0xB1,
                          DAT_COMPLETION_BARRIER_FENCE_FLAG, &ctx));
    ck_assert_uint_ne(ctx, 0);
    memcpy(c->buf + 3000, &ctx, sizeof ctx);
    DAT_LMR_TRIPLET msg = rp_tri(c->lc, c->buf + 3000, sizeof ctx);
    ck_assert_dat_ok(p->ep_post_send_func(x.cep, 1, &msg, rp_ck(0xCC), 0));
    /* Held: no completion, the window is not bound yet. */
    rp_none(c, c->req, NONE_US);
    DAT_RMR_PARAM q = rmr_q(c, w);
    ck_assert_uint_ne(q.rmr_context, ctx);
    ck_assert_uint_eq(q.lmr_triplet.segment_length, 0);
    rp_stall_end(&stall);
    /* Read, then the bind, then the Send (Sends and binds complete in
     * post order; the Read precedes both because of the fence). */
    DAT_DTO_COMPLETION_EVENT_DATA d = rp_dto(c, c->req);
    ck_assert_uint_eq(d.user_cookie.as_64, 0xAA);
    ck_assert_int_eq(d.status, DAT_DTO_SUCCESS);
    ck_assert_int_eq(bind_done(c, w, 0xB1), DAT_RMR_BIND_SUCCESS);
    d = rp_dto(c, c->req);
    ck_assert_uint_eq(d.user_cookie.as_64, 0xCC);
    ck_assert_int_eq(d.status, DAT_DTO_SUCCESS);
    ck_assert_uint_eq(rmr_q(c, w).rmr_context, ctx);
    /* The server got the context and uses it straight away. */
    d = rp_dto(s, s->rcv);
    ck_assert_int_eq(d.status, DAT_DTO_SUCCESS);
    DAT_RMR_CONTEXT got;
    memcpy(&got, s->buf + 4000, sizeof got);
    ck_assert_uint_eq(got, ctx);
    ck_assert_int_eq(read_via(s, x.sep, got, c->buf + 2048, 64, 5000), DAT_DTO_SUCCESS);
    ck_assert_int_eq(memcmp(s->buf + 5000, c->buf + 2048, 64), 0);
    rp_close(&x);
}
END_TEST

/* A new bind of the same RMR returns a new context; once it completed,
 * the old one is dead (L8253, L8303): REMOTE_ACCESS at the peer. */
START_TEST(rebind_kills_old_context)
{
    struct rp_pair x;
    rp_open(&x, "t-rcbind-r", NULL, NULL);
    struct rp_side *c = &x.c, *s = &x.s;
    DAT_RMR_HANDLE w;
    ck_assert_dat_ok(s->p->rmr_create_func(s->pz, &w));
    DAT_RMR_CONTEXT c1, c2;
    ck_assert_dat_ok(do_bind(s, w, s->lmr, s->lc, s->buf, 64, DAT_MEM_PRIV_REMOTE_READ_FLAG, x.sep, 1, 0, &c1));
    ck_assert_int_eq(bind_done(s, w, 1), DAT_RMR_BIND_SUCCESS);
    ck_assert_int_eq(read_via(c, x.cep, c1, s->buf, 8, 0), DAT_DTO_SUCCESS);
    ck_assert_dat_ok(do_bind(s, w, s->lmr, s->lc, s->buf + 128, 64, DAT_MEM_PRIV_REMOTE_READ_FLAG, x.sep, 2, 0, &c2));
    ck_assert_uint_ne(c1, c2);
    ck_assert_int_eq(bind_done(s, w, 2), DAT_RMR_BIND_SUCCESS);
    ck_assert_int_eq(read_via(c, x.cep, c2, s->buf + 128, 8, 0), DAT_DTO_SUCCESS);
    ck_assert_int_eq(read_via(c, x.cep, c1, s->buf, 8, 0), DAT_DTO_ERR_REMOTE_ACCESS);
    rp_wait(c, c->conn, DAT_CONNECTION_EVENT_BROKEN);
    rp_close(&x);
}
END_TEST

/* Zero length unbinds (L8269): a normal bind completion; the window is
 * unbound, its LMR free to go, its context dead. */
START_TEST(zero_length_unbinds)
{
    struct rp_pair x;
    rp_open(&x, "t-rcbind-u", NULL, NULL);
    struct rp_side *c = &x.c, *s = &x.s;
    DAT_LMR_HANDLE l;
    DAT_LMR_CONTEXT lc;
    rp_lmr(s, s->pz, DAT_MEM_PRIV_ALL_FLAG, &l, &lc, NULL);
    DAT_RMR_HANDLE w;
    ck_assert_dat_ok(s->p->rmr_create_func(s->pz, &w));
    DAT_RMR_CONTEXT ctx, ctx0;
    ck_assert_dat_ok(do_bind(s, w, l, lc, s->buf, 64, DAT_MEM_PRIV_REMOTE_READ_FLAG, x.sep, 1, 0, &ctx));
    ck_assert_int_eq(bind_done(s, w, 1), DAT_RMR_BIND_SUCCESS);
    ck_assert_dat_err(s->p->lmr_free_func(l), DAT_INVALID_STATE, DAT_INVALID_STATE_LMR_IN_USE);
    DAT_LMR_TRIPLET z = {.lmr_context = 0xdead, .virtual_address = 0xbeef, .segment_length = 0};
    ck_assert_dat_ok(s->p->rmr_bind_func(w, DAT_HANDLE_NULL, &z, DAT_MEM_PRIV_REMOTE_READ_FLAG, DAT_VA_TYPE_VA, x.sep,
                                         rp_ck(2), 0, &ctx0));
    ck_assert_int_eq(bind_done(s, w, 2), DAT_RMR_BIND_SUCCESS);
    DAT_RMR_PARAM q = rmr_q(s, w);
    ck_assert_uint_eq(q.lmr_triplet.segment_length, 0);
    ck_assert_dat_ok(s->p->lmr_free_func(l));
    ck_assert_int_eq(read_via(c, x.cep, ctx, s->buf, 8, 0), DAT_DTO_ERR_REMOTE_ACCESS);
    rp_wait(c, c->conn, DAT_CONNECTION_EVENT_BROKEN);
    rp_close(&x);
}
END_TEST

/* Scopes (L7993, L8043, L8235): a PZ-scoped window serves every
 * connection whose responding EP is in the PZ; an EP-scoped one only the
 * connection of the EP it was bound on. Two connections into one server
 * PZ; both windows bound on the first. */
START_TEST(rmr_scopes)
{
    struct rp_pair x;
    rp_open(&x, "t-rcbind-s", NULL, NULL);
    struct rp_side *c = &x.c, *s = &x.s;
    DAT_EP_ATTR a;
    rp_attr(&a, DAT_COMPLETION_EVD_THRESHOLD_FLAG, DAT_COMPLETION_EVD_THRESHOLD_FLAG);
    DAT_EP_HANDLE cep2 = rp_ep(c, &a);
    DAT_EP_HANDLE sep2 = rp_connect(&x, cep2, &a);
    (void)sep2;
    DAT_RMR_HANDLE wpz, wep;
    ck_assert_dat_ok(s->p->rmr_create_func(s->pz, &wpz));
    ck_assert_dat_ok(s->p->rmr_create_for_ep_func(s->pz, &wep));
    ck_assert_int_eq(rmr_q(s, wpz).rmr_scope, DAT_RMR_SCOPE_PZ);
    ck_assert_int_eq(rmr_q(s, wep).rmr_scope, DAT_RMR_SCOPE_EP);
    DAT_RMR_CONTEXT cpz, cep_;
    ck_assert_dat_ok(do_bind(s, wpz, s->lmr, s->lc, s->buf, 64, DAT_MEM_PRIV_REMOTE_READ_FLAG, x.sep, 1, 0, &cpz));
    ck_assert_int_eq(bind_done(s, wpz, 1), DAT_RMR_BIND_SUCCESS);
    ck_assert_dat_ok(do_bind(s, wep, s->lmr, s->lc, s->buf, 64, DAT_MEM_PRIV_REMOTE_READ_FLAG, x.sep, 2, 0, &cep_));
    ck_assert_int_eq(bind_done(s, wep, 2), DAT_RMR_BIND_SUCCESS);
    ck_assert_int_eq(read_via(c, x.cep, cpz, s->buf, 8, 0), DAT_DTO_SUCCESS);
    ck_assert_int_eq(read_via(c, x.cep, cep_, s->buf, 8, 0), DAT_DTO_SUCCESS);
    ck_assert_int_eq(read_via(c, cep2, cpz, s->buf, 8, 0), DAT_DTO_SUCCESS);
    ck_assert_int_eq(read_via(c, cep2, cep_, s->buf, 8, 0), DAT_DTO_ERR_REMOTE_ACCESS);
    /* Only the second connection broke. */
    DAT_EVENT ev = rp_wait(c, c->conn, DAT_CONNECTION_EVENT_BROKEN);
    ck_assert_ptr_eq(ev.event_data.connect_event_data.ep_handle, cep2);
    ck_assert_int_eq(read_via(c, x.cep, cep_, s->buf, 8, 0), DAT_DTO_SUCCESS);
    rp_close(&x);
}
END_TEST

/* Send with invalidate of a window's context: the receive completes
 * DAT_DTO_RECEIVE_WITH_INVALIDATE naming it, and by then the window is
 * unbound (L7359); an RDMA Read with it right behind the Send fails. The
 * window can be bound again. */
START_TEST(send_invalidate_window)
{
    struct rp_pair x;
    rp_open(&x, "t-rcbind-i", NULL, NULL);
    struct rp_side *c = &x.c, *s = &x.s;
    DAT_RMR_HANDLE w;
    ck_assert_dat_ok(s->p->rmr_create_func(s->pz, &w));
    DAT_RMR_CONTEXT ctx;
    ck_assert_dat_ok(do_bind(s, w, s->lmr, s->lc, s->buf, 64, DAT_MEM_PRIV_REMOTE_READ_FLAG, x.sep, 1, 0, &ctx));
    ck_assert_int_eq(bind_done(s, w, 1), DAT_RMR_BIND_SUCCESS);
    DAT_LMR_TRIPLET sr = rp_tri(s->lc, s->buf + 1000, 16);
    ck_assert_dat_ok(s->p->ep_post_recv_func(x.sep, 1, &sr, rp_ck(7), 0));
    DAT_LMR_TRIPLET m = rp_tri(c->lc, c->buf, 4);
    ck_assert_dat_ok(c->p->ep_post_send_with_invalidate_func(x.cep, 1, &m, rp_ck(8), 0, DAT_TRUE, ctx));
    DAT_LMR_TRIPLET rt = rp_tri(c->lc, c->buf + 100, 8);
    DAT_RMR_TRIPLET rr = rp_rtri(ctx, s->buf, 8);
    ck_assert_dat_ok(c->p->ep_post_rdma_read_func(x.cep, 1, &rt, rp_ck(9), &rr, 0));
    DAT_DTO_COMPLETION_EVENT_DATA d = rp_dto(s, s->rcv);
    ck_assert_uint_eq(d.user_cookie.as_64, 7);
    ck_assert_int_eq(d.status, DAT_DTO_SUCCESS);
    ck_assert_int_eq(d.operation, DAT_DTO_RECEIVE_WITH_INVALIDATE);
    ck_assert_uint_eq(d.rmr_context, ctx);
    ck_assert_uint_eq(d.transfered_length, 4);
    /* Visible before the receive completion was. */
    DAT_RMR_PARAM q = rmr_q(s, w);
    ck_assert_uint_eq(q.lmr_triplet.segment_length, 0);
    ck_assert_dat_ok(s->p->lmr_free_func(s->lmr_ro)); /* unrelated LMR: still fine */
    d = rp_dto(c, c->req);
    ck_assert_uint_eq(d.user_cookie.as_64, 8);
    ck_assert_int_eq(d.status, DAT_DTO_SUCCESS);
    ck_assert_int_eq(d.operation, DAT_DTO_SEND);
    d = rp_dto(c, c->req);
    ck_assert_uint_eq(d.user_cookie.as_64, 9);
    ck_assert_int_eq(d.status, DAT_DTO_ERR_REMOTE_ACCESS);
    rp_wait(c, c->conn, DAT_CONNECTION_EVENT_BROKEN);
    rp_close(&x);
}
END_TEST

/* Send with invalidate of an LMR's rmr_context (L7359): the LMR loses
 * remote access, its lmr_context keeps working. */
START_TEST(send_invalidate_lmr)
{
    struct rp_pair x;
    rp_open(&x, "t-rcbind-j", NULL, NULL);
    struct rp_side *c = &x.c, *s = &x.s;
    DAT_LMR_HANDLE l;
    DAT_LMR_CONTEXT lc;
    DAT_RMR_CONTEXT rc;
    rp_lmr(s, s->pz, DAT_MEM_PRIV_ALL_FLAG, &l, &lc, &rc);
    ck_assert_uint_ne(rc, 0);
    ck_assert_int_eq(read_via(c, x.cep, rc, s->buf, 8, 0), DAT_DTO_SUCCESS);
    DAT_LMR_TRIPLET sr = rp_tri(lc, s->buf + 1000, 16);
    ck_assert_dat_ok(s->p->ep_post_recv_func(x.sep, 1, &sr, rp_ck(7), 0));
    ck_assert_dat_ok(c->p->ep_post_send_with_invalidate_func(x.cep, 0, NULL, rp_ck(8), 0, DAT_TRUE, rc));
    DAT_DTO_COMPLETION_EVENT_DATA d = rp_dto(s, s->rcv);
    ck_assert_int_eq(d.status, DAT_DTO_SUCCESS);
    ck_assert_int_eq(d.operation, DAT_DTO_RECEIVE_WITH_INVALIDATE);
    ck_assert_uint_eq(d.rmr_context, rc);
    ck_assert_int_eq(rp_dto(c, c->req).status, DAT_DTO_SUCCESS);
    /* lmr_context unaffected: a local post with it is fine. */
    ck_assert_dat_ok(s->p->ep_post_recv_func(x.sep, 1, &sr, rp_ck(9), 0));
    ck_assert_int_eq(read_via(c, x.cep, rc, s->buf, 8, 0), DAT_DTO_ERR_REMOTE_ACCESS);
    rp_wait(c, c->conn, DAT_CONNECTION_EVENT_BROKEN);
    rp_close(&x);
}
END_TEST

/* dat_ep_post_rdma_read_to_rmr: the data lands in the local window's
 * range (VA and ZB windows); a window of another PZ or an EP-scoped one
 * bound on another connection is refused (PROTECTION_VIOLATION). */
START_TEST(read_to_rmr)
{
    struct rp_pair x;
    rp_open(&x, "t-rcbind-t", NULL, NULL);
    struct rp_side *c = &x.c, *s = &x.s;
    DAT_PROVIDER *p = c->p;
    for (int i = 0; i < 64; i++)
        s->buf[i] = (char)(0x20 + i);
    DAT_RMR_HANDLE w, wz;
    ck_assert_dat_ok(p->rmr_create_func(c->pz, &w));
    ck_assert_dat_ok(p->rmr_create_func(c->pz, &wz));
    DAT_RMR_CONTEXT ctx, zctx;
    ck_assert_dat_ok(do_bind(c, w, c->lmr, c->lc, c->buf + 4096, 64, DAT_MEM_PRIV_REMOTE_WRITE_FLAG, x.cep, 1, 0, &ctx));
    ck_assert_int_eq(bind_done(c, w, 1), DAT_RMR_BIND_SUCCESS);
    DAT_LMR_TRIPLET zt = rp_tri(c->lc, c->buf + 8192, 64);
    ck_assert_dat_ok(p->rmr_bind_func(wz, c->lmr, &zt, DAT_MEM_PRIV_REMOTE_WRITE_FLAG, DAT_VA_TYPE_ZB, x.cep, rp_ck(2),
                                      0, &zctx));
    ck_assert_int_eq(bind_done(c, wz, 2), DAT_RMR_BIND_SUCCESS);
    DAT_RMR_TRIPLET remote = rp_rtri(s->rc, s->buf, 32);
    DAT_RMR_TRIPLET local = rp_rtri(ctx, c->buf + 4096 + 16, 32);
    ck_assert_dat_ok(p->ep_post_rdma_read_to_rmr_func(x.cep, &local, rp_ck(3), &remote, 0));
    DAT_DTO_COMPLETION_EVENT_DATA d = rp_dto(c, c->req);
    ck_assert_uint_eq(d.user_cookie.as_64, 3);
    ck_assert_int_eq(d.status, DAT_DTO_SUCCESS);
    ck_assert_int_eq(d.operation, DAT_DTO_RDMA_READ);
    ck_assert_uint_eq(d.transfered_length, 32);
    ck_assert_int_eq(memcmp(c->buf + 4096 + 16, s->buf, 32), 0);
    DAT_RMR_TRIPLET zlocal = {.rmr_context = zctx, .virtual_address = 8, .segment_length = 16};
    ck_assert_dat_ok(p->ep_post_rdma_read_to_rmr_func(x.cep, &zlocal, rp_ck(4), &remote, 0));
    ck_assert_int_eq(rp_dto(c, c->req).status, DAT_DTO_SUCCESS);
    ck_assert_int_eq(memcmp(c->buf + 8192 + 8, s->buf, 16), 0);
    /* Zero length: nothing to check locally, completes. */
    DAT_RMR_TRIPLET none = {.rmr_context = 0xdead, .virtual_address = 1, .segment_length = 0};
    ck_assert_dat_ok(p->ep_post_rdma_read_to_rmr_func(x.cep, &none, rp_ck(5), &remote, 0));
    ck_assert_int_eq(rp_dto(c, c->req).status, DAT_DTO_SUCCESS);

    /* A second connection, its client EP in pz2: a pz2 window bound there,
     * and an EP-scoped pz window bound on a third. */
    DAT_EP_ATTR a;
    rp_attr(&a, DAT_COMPLETION_EVD_THRESHOLD_FLAG, DAT_COMPLETION_EVD_THRESHOLD_FLAG);
    DAT_EP_HANDLE e2;
    ck_assert_dat_ok(p->ep_create_func(c->ia, c->pz2, c->rcv, c->req, c->conn, &a, &e2));
    rp_connect(&x, e2, &a);
    DAT_EP_HANDLE e3 = rp_ep(c, &a);
    rp_connect(&x, e3, &a);
    DAT_RMR_HANDLE w2, wep;
    ck_assert_dat_ok(p->rmr_create_func(c->pz2, &w2));
    ck_assert_dat_ok(p->rmr_create_for_ep_func(c->pz, &wep));
    DAT_RMR_CONTEXT c2, cep_;
    ck_assert_dat_ok(do_bind(c, w2, c->lmr_pz2, c->lc_pz2, c->buf, 64, DAT_MEM_PRIV_REMOTE_WRITE_FLAG, e2, 6, 0, &c2));
    ck_assert_int_eq(bind_done(c, w2, 6), DAT_RMR_BIND_SUCCESS);
    ck_assert_dat_ok(do_bind(c, wep, c->lmr, c->lc, c->buf, 64, DAT_MEM_PRIV_REMOTE_WRITE_FLAG, e3, 7, 0, &cep_));
    ck_assert_int_eq(bind_done(c, wep, 7), DAT_RMR_BIND_SUCCESS);
    DAT_RMR_TRIPLET l2 = rp_rtri(c2, c->buf, 8), lep = rp_rtri(cep_, c->buf, 8);
    ck_assert_dat_err(p->ep_post_rdma_read_to_rmr_func(x.cep, &l2, rp_ck(8), &remote, 0), DAT_PROTECTION_VIOLATION, 0);
    ck_assert_dat_err(p->ep_post_rdma_read_to_rmr_func(x.cep, &lep, rp_ck(8), &remote, 0), DAT_PROTECTION_VIOLATION,
                      0);
    /* ...but on its own connection the EP-scoped window works. */
    ck_assert_dat_ok(p->ep_post_rdma_read_to_rmr_func(e3, &lep, rp_ck(9), &remote, 0));
    d = rp_dto(c, c->req);
    ck_assert_uint_eq(d.user_cookie.as_64, 9);
    ck_assert_int_eq(d.status, DAT_DTO_SUCCESS);
    rp_close(&x);
}
END_TEST

/* DAT_RMR_OPERATION_FAILED (6.8.2): the bind passed its checks but the
 * LMR was freed before the bind ran (it waited behind a fenced Read);
 * the failure breaks the connection (L8243). */
START_TEST(bind_operation_failed)
{
    struct rp_pair x;
    rp_open(&x, "t-rcbind-o", NULL, NULL);
    struct rp_side *c = &x.c, *s = &x.s;
    DAT_PROVIDER *p = c->p;
    DAT_LMR_HANDLE l;
    DAT_LMR_CONTEXT lc;
    rp_lmr(c, c->pz, DAT_MEM_PRIV_ALL_FLAG, &l, &lc, NULL);
    DAT_RMR_HANDLE w;
    ck_assert_dat_ok(p->rmr_create_func(c->pz, &w));
    struct rp_stall stall;
    rp_stall_begin(&stall, s->ia);
    DAT_LMR_TRIPLET rt = rp_tri(c->lc, c->buf + 100, 8);
    DAT_RMR_TRIPLET rr = rp_rtri(s->rc, s->buf, 8);
    ck_assert_dat_ok(p->ep_post_rdma_read_func(x.cep, 1, &rt, rp_ck(0xAA), &rr, 0));
    DAT_RMR_CONTEXT ctx;
    ck_assert_dat_ok(do_bind(c, w, l, lc, c->buf, 64, DAT_MEM_PRIV_REMOTE_READ_FLAG, x.cep, 0xB1,
                          DAT_COMPLETION_BARRIER_FENCE_FLAG, &ctx));
    ck_assert_dat_ok(p->lmr_free_func(l));
    rp_stall_end(&stall);
    ck_assert_int_eq(rp_dto(c, c->req).status, DAT_DTO_SUCCESS);
    ck_assert_int_eq(bind_done(c, w, 0xB1), DAT_RMR_OPERATION_FAILED);
    rp_wait(c, c->conn, DAT_CONNECTION_EVENT_BROKEN);
    ck_assert_int_eq(rp_state(c, x.cep), DAT_EP_STATE_DISCONNECTED);
    ck_assert_uint_eq(rmr_q(c, w).lmr_triplet.segment_length, 0);
    rp_close(&x);
}
END_TEST

int main(void)
{
    Suite *su = suite_create("rc_bind");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 15);
    tcase_add_test(tc, bind_bad_handles);
    tcase_add_test(tc, bind_argument_codes);
    tcase_add_test(tc, bind_queue_full);
    tcase_add_test(tc, create_for_ep_limit);
    tcase_add_test(tc, bind_completion_and_access);
    tcase_add_test(tc, bind_valid_after_completion_and_fences);
    tcase_add_test(tc, rebind_kills_old_context);
    tcase_add_test(tc, zero_length_unbinds);
    tcase_add_test(tc, rmr_scopes);
    tcase_add_test(tc, send_invalidate_window);
    tcase_add_test(tc, send_invalidate_lmr);
    tcase_add_test(tc, read_to_rmr);
    tcase_add_test(tc, bind_operation_failed);
    suite_add_tcase(su, tc);
    SRunner *sr = srunner_create(su);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
