/* Compliance: every error code the spec lists for the DTO posts
 * (dat_ep_post_send, _send_with_invalidate, _recv, _rdma_read,
 * _rdma_read_to_rmr, _rdma_write, dat_srq_post_recv), and each
 * DAT_DTO_COMPLETION_STATUS where it arises, over a real loopback
 * connection (rc_pair.h). The RMR side (dat_rmr_bind, create_for_ep,
 * invalidation, RMR_OPERATION_FAILED) is test_rc_bind.c. Findings and
 * choices: docs/compliance-notes-dto.md. */
#include <sys/mman.h>

#include "test/lib/rc_pair.h"

#define ERR_NONE_US 100000 /* how long "nothing arrives" is watched */

/* Every request post kind, called with one local segment t (read_to_rmr
 * gets rt as its local RMR triplet) and remote r. */
enum op { OP_SEND, OP_SEND_INV, OP_READ, OP_WRITE, OP_READ_TO_RMR, OP_N };
static const char *const op_name[OP_N] = {"send", "send_inv", "read", "write", "read_to_rmr"};

static DAT_RETURN post_op(DAT_PROVIDER *p, enum op op, DAT_EP_HANDLE ep, DAT_COUNT n, DAT_LMR_TRIPLET *t,
                          const DAT_RMR_TRIPLET *rt, const DAT_RMR_TRIPLET *r, uint64_t cookie,
                          DAT_COMPLETION_FLAGS f)
{
    switch (op) {
    case OP_SEND: return p->ep_post_send_func(ep, n, t, rp_ck(cookie), f);
    case OP_SEND_INV: return p->ep_post_send_with_invalidate_func(ep, n, t, rp_ck(cookie), f, DAT_FALSE, 0);
    case OP_READ: return p->ep_post_rdma_read_func(ep, n, t, rp_ck(cookie), r, f);
    case OP_WRITE: return p->ep_post_rdma_write_func(ep, n, t, rp_ck(cookie), r, f);
    case OP_READ_TO_RMR: return p->ep_post_rdma_read_to_rmr_func(ep, rt, rp_ck(cookie), r, f);
    case OP_N: break;
    }
    return DAT_INTERNAL_ERROR;
}

/* Position of completion_flags in each call's prototype. */
static DAT_UINT32 flags_arg(enum op op)
{
    switch (op) {
    case OP_READ:
    case OP_WRITE: return DAT_INVALID_ARG6;
    default: return DAT_INVALID_ARG5;
    }
}

/* A window over the client's buffer (REMOTE_WRITE, so it can be a Read's
 * local sink), bound on the connected client EP; its context in *ctx. */
static DAT_RMR_HANDLE local_window(struct rp_pair *x, DAT_EP_HANDLE ep, size_t off, DAT_SEG_LENGTH len,
                                   DAT_MEM_PRIV_FLAGS priv, DAT_RMR_CONTEXT *ctx)
{
    struct rp_side *c = &x->c;
    DAT_RMR_HANDLE rmr;
    ck_assert_dat_ok(c->p->rmr_create_func(c->pz, &rmr));
    DAT_LMR_TRIPLET t = rp_tri(c->lc, c->buf + off, len);
    ck_assert_dat_ok(c->p->rmr_bind_func(rmr, c->lmr, &t, priv, DAT_VA_TYPE_VA, ep, rp_ck(0xB0), 0, ctx));
    DAT_EVENT ev = rp_wait(c, c->req, DAT_RMR_BIND_COMPLETION_EVENT);
    ck_assert_int_eq(ev.event_data.rmr_completion_event_data.status, DAT_RMR_BIND_SUCCESS);
    return rmr;
}

/* ------------------------------------------------------------ handles */

START_TEST(bad_handles)
{
    struct rp_pair x;
    rp_open(&x, "t-rcdto-h", NULL, NULL);
    struct rp_side *c = &x.c;
    DAT_EP_HANDLE dead = rp_ep(c, NULL);
    ck_assert_dat_ok(c->p->ep_free_func(dead));
    DAT_LMR_TRIPLET t = rp_tri(c->lc, c->buf, 8);
    DAT_RMR_TRIPLET r = rp_rtri(x.s.rc, x.s.buf, 8);
    DAT_HANDLE bad[] = {NULL, (DAT_HANDLE)0x10, (DAT_HANDLE)(c->buf + 1), c->pz, c->req, c->lmr, dead, x.psp};
    for (unsigned i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        for (enum op op = 0; op < OP_N; op++)
            ck_assert_dat_err(post_op(c->p, op, bad[i], 1, &t, &r, &r, 1, 0), DAT_INVALID_HANDLE,
                              DAT_INVALID_HANDLE_EP);
        ck_assert_dat_err(c->p->ep_post_recv_func(bad[i], 1, &t, rp_ck(1), 0), DAT_INVALID_HANDLE,
                          DAT_INVALID_HANDLE_EP);
        ck_assert_dat_err(c->p->srq_post_recv_func(bad[i], 1, &t, rp_ck(1)), DAT_INVALID_HANDLE,
                          DAT_INVALID_HANDLE_SRQ);
        /* The handle is checked before anything else. */
        ck_assert_dat_err(c->p->ep_post_send_func(bad[i], -1, NULL, rp_ck(1), 0xFFFF), DAT_INVALID_HANDLE,
                          DAT_INVALID_HANDLE_EP);
    }
    /* An EP handle where an SRQ is expected. */
    ck_assert_dat_err(c->p->srq_post_recv_func(x.cep, 1, &t, rp_ck(1)), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_SRQ);
    rp_none(c, c->req, ERR_NONE_US);
    rp_close(&x);
}
END_TEST

/* ------------------------------------------------------------ states */


/* Request posts are allowed in Connected and Disconnected only (L7139,
 * L7217, L7415, L7495, L7628); every other state answers INVALID_STATE
 * with the subtype naming it (L5995), before the arguments are looked
 * at. Receives are allowed in every state (L7334). */
START_TEST(every_state)
{
    struct rp_pair x;
    rp_open(&x, "t-rcdto-s", NULL, NULL);
    struct rp_side *c = &x.c;
    DAT_EP_ATTR a;
    rp_attr(&a, DAT_COMPLETION_EVD_THRESHOLD_FLAG, DAT_COMPLETION_EVD_THRESHOLD_FLAG);
    a.max_recv_dtos = 64;
    DAT_EP_HANDLE ep = rp_ep(c, &a);
    DAT_LMR_TRIPLET t = rp_tri(c->lc, c->buf, 8);
    DAT_RMR_TRIPLET r = rp_rtri(x.s.rc, x.s.buf, 8);
    for (unsigned i = 0; i < fx_ep_nstates; i++) {
        if (fx_state_posts_ok(fx_ep_states[i].s))
            continue;
        fx_force_state(ep, fx_ep_states[i].s);
        for (enum op op = 0; op < OP_N; op++) {
            ck_assert_dat_err(post_op(c->p, op, ep, 1, &t, &r, &r, 1, 0), DAT_INVALID_STATE, fx_ep_states[i].sub);
            ck_assert_dat_err(post_op(c->p, op, ep, 99, NULL, NULL, NULL, 1, 0xFFFF), DAT_INVALID_STATE, fx_ep_states[i].sub);
        }
        ck_assert_dat_ok(c->p->ep_post_recv_func(ep, 1, &t, rp_ck(100 + i), 0));
    }
    fx_force_state(ep, DAT_EP_STATE_UNCONNECTED);
    /* Nothing completed: the receives wait for a connection. */
    rp_none(c, c->rcv, ERR_NONE_US);
    rp_none(c, c->req, 1000);

    /* An EP without a PZ cannot take buffers at all. */
    DAT_EP_HANDLE nopz;
    ck_assert_dat_ok(c->p->ep_create_func(c->ia, DAT_HANDLE_NULL, c->rcv, c->req, c->conn, &a, &nopz));
    ck_assert_int_eq(rp_state(c, nopz), DAT_EP_STATE_UNCONFIGURED_UNCONNECTED);
    ck_assert_dat_err(c->p->ep_post_recv_func(nopz, 1, &t, rp_ck(1), 0), DAT_INVALID_STATE,
                      DAT_INVALID_STATE_EP_UNCONFIGURED);
    ck_assert_dat_err(c->p->ep_post_send_func(nopz, 1, &t, rp_ck(1), 0), DAT_INVALID_STATE,
                      DAT_INVALID_STATE_EP_UNCONFIGURED);

    /* An SRQ EP: its receives come from the SRQ; post_recv is
     * INVALID_STATE in every state (L7336), Connected included. */
    DAT_SRQ_HANDLE srq;
    DAT_SRQ_ATTR sa = {.max_recv_dtos = 4, .max_recv_iov = 1, .low_watermark = 0};
    ck_assert_dat_ok(c->p->srq_create_func(c->ia, c->pz, &sa, &srq));
    DAT_EP_HANDLE sep;
    ck_assert_dat_ok(c->p->ep_create_with_srq_func(c->ia, c->pz, c->rcv, c->req, c->conn, srq, &a, &sep));
    ck_assert_dat_err(c->p->ep_post_recv_func(sep, 1, &t, rp_ck(1), 0), DAT_INVALID_STATE,
                      DAT_INVALID_STATE_EP_UNCONNECTED);
    DAT_EP_HANDLE ssep = rp_connect(&x, sep, &a);
    (void)ssep;
    ck_assert_dat_err(c->p->ep_post_recv_func(sep, 1, &t, rp_ck(1), 0), DAT_INVALID_STATE,
                      DAT_INVALID_STATE_EP_CONNECTED);

    /* Connected (the fixture's EP): every post is accepted and succeeds. */
    struct rp_side *s = &x.s;
    DAT_LMR_TRIPLET st8 = rp_tri(s->lc, s->buf + 1024, 8);
    for (int i = 0; i < 2; i++)
        ck_assert_dat_ok(s->p->ep_post_recv_func(x.sep, 1, &st8, rp_ck(50 + i), 0));
    DAT_RMR_CONTEXT wctx;
    DAT_RMR_HANDLE win = local_window(&x, x.cep, 4096, 8, DAT_MEM_PRIV_REMOTE_WRITE_FLAG, &wctx);
    DAT_RMR_TRIPLET rt = rp_rtri(wctx, c->buf + 4096, 8);
    for (enum op op = 0; op < OP_N; op++) {
        ck_assert_dat_ok(post_op(c->p, op, x.cep, 1, &t, &rt, &r, 10 + op, 0));
        DAT_DTO_COMPLETION_EVENT_DATA d = rp_dto(c, c->req);
        ck_assert_uint_eq(d.user_cookie.as_64, 10 + op);
        ck_assert_msg(d.status == DAT_DTO_SUCCESS, "%s: status %d", op_name[op], d.status);
    }
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(rp_dto(s, s->rcv).status, DAT_DTO_SUCCESS);
    /* Disconnected: accepted and flushed at once (L7139). */
    ck_assert_dat_ok(c->p->ep_disconnect_func(x.cep, DAT_CLOSE_ABRUPT_FLAG));
    rp_wait(c, c->conn, DAT_CONNECTION_EVENT_DISCONNECTED);
    ck_assert_int_eq(rp_state(c, x.cep), DAT_EP_STATE_DISCONNECTED);
    for (enum op op = 0; op < OP_N; op++) {
        ck_assert_dat_ok(post_op(c->p, op, x.cep, 1, &t, &rt, &r, 20 + op, 0));
        DAT_DTO_COMPLETION_EVENT_DATA d = rp_dto(c, c->req);
        ck_assert_uint_eq(d.user_cookie.as_64, 20 + op);
        ck_assert_int_eq(d.status, DAT_DTO_ERR_FLUSHED);
    }
    ck_assert_dat_ok(c->p->ep_post_recv_func(x.cep, 1, &t, rp_ck(30), 0));
    DAT_DTO_COMPLETION_EVENT_DATA d = rp_dto(c, c->rcv);
    ck_assert_uint_eq(d.user_cookie.as_64, 30);
    ck_assert_int_eq(d.status, DAT_DTO_ERR_FLUSHED);
    /* Reset: Unconnected again, request posts refused. */
    ck_assert_dat_ok(c->p->ep_reset_func(x.cep));
    ck_assert_dat_err(c->p->ep_post_send_func(x.cep, 1, &t, rp_ck(1), 0), DAT_INVALID_STATE,
                      DAT_INVALID_STATE_EP_UNCONNECTED);
    (void)win;
    rp_close(&x);
}
END_TEST

/* ------------------------------------------------------------ arguments */

/* Every synchronous argument error of the request posts on a Connected
 * EP (request iov 3, read iov 1, write iov 2, THRESHOLD flags). None of
 * them may leave anything behind: no event, no slot. */
START_TEST(request_arguments)
{
    struct rp_pair x;
    rp_open(&x, "t-rcdto-a", NULL, NULL);
    struct rp_side *c = &x.c, *s = &x.s;
    DAT_PROVIDER *p = c->p;
    DAT_EP_HANDLE ep = x.cep;
    DAT_LMR_TRIPLET t = rp_tri(c->lc, c->buf, 8);
    DAT_LMR_TRIPLET v[4] = {t, t, t, t};
    DAT_RMR_TRIPLET r = rp_rtri(s->rc, s->buf, 64);
    DAT_RMR_CONTEXT wctx;
    local_window(&x, ep, 4096, 64, DAT_MEM_PRIV_REMOTE_WRITE_FLAG, &wctx);
    DAT_RMR_TRIPLET rt = rp_rtri(wctx, c->buf + 4096, 8);
    const DAT_COUNT lim[OP_N] = {3, 3, 1, 2, 1};

    for (enum op op = 0; op < OP_N; op++) {
        const char *nm = op_name[op];
        /* num_segments beyond the EP's limit for the op, negative; iov
         * NULL with segments (read_to_rmr has no num_segments). */
        if (op != OP_READ_TO_RMR) {
            ck_assert_msg(ERRS(post_op(p, op, ep, lim[op] + 1, v, &rt, &r, 1, 0)) == DAT_INVALID_ARG2, "%s", nm);
            ck_assert_dat_err(post_op(p, op, ep, lim[op] + 1, v, &rt, &r, 1, 0), DAT_INVALID_PARAMETER,
                              DAT_INVALID_ARG2);
            ck_assert_dat_err(post_op(p, op, ep, -1, v, &rt, &r, 1, 0), DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
            ck_assert_dat_err(post_op(p, op, ep, 1, NULL, &rt, &r, 1, 0), DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
        } else {
            ck_assert_dat_err(post_op(p, op, ep, 1, &t, NULL, &r, 1, 0), DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
            ck_assert_dat_err(post_op(p, op, ep, 1, &t, &rt, NULL, 1, 0), DAT_INVALID_PARAMETER, DAT_INVALID_ARG4);
        }
        if (op == OP_READ || op == OP_WRITE)
            ck_assert_dat_err(post_op(p, op, ep, 1, &t, &rt, NULL, 1, 0), DAT_INVALID_PARAMETER, DAT_INVALID_ARG5);
        /* Completion flags: unknown bits, EVD_THRESHOLD (an EP attribute
         * only), LMR_INVALIDATE_FENCE (kDAPL), UNSIGNALLED on a threshold
         * EP (L7135), SOLICITED_WAIT on anything but a Send. */
        DAT_COMPLETION_FLAGS badf[] = {0x40, 0x80, 0x100, 0x10000, DAT_COMPLETION_EVD_THRESHOLD_FLAG,
                                       DAT_COMPLETION_LMR_INVALIDATE_FENCE_FLAG, DAT_COMPLETION_UNSIGNALLED_FLAG,
                                       DAT_COMPLETION_SUPPRESS_FLAG | DAT_COMPLETION_UNSIGNALLED_FLAG};
        for (unsigned i = 0; i < sizeof badf / sizeof badf[0]; i++)
            ck_assert_dat_err(post_op(p, op, ep, 1, &t, &rt, &r, 1, badf[i]), DAT_INVALID_PARAMETER, flags_arg(op));
        if (op != OP_SEND && op != OP_SEND_INV)
            ck_assert_dat_err(post_op(p, op, ep, 1, &t, &rt, &r, 1, DAT_COMPLETION_SOLICITED_WAIT_FLAG),
                              DAT_INVALID_PARAMETER, flags_arg(op));
        if (op == OP_READ_TO_RMR)
            continue; /* its local checks are the window's: below */
        /* Local segment outside its LMR: before, after, straddling the
         * end, wrapping the address space (L7149). */
        DAT_LMR_TRIPLET outs[] = {rp_tri(c->lc, c->buf - 8, 8), rp_tri(c->lc, c->buf + RP_BUF, 8),
                                  rp_tri(c->lc, c->buf + RP_BUF - 4, 8), rp_tri(c->lc, (void *)UINTPTR_MAX, 8)};
        for (unsigned i = 0; i < 4; i++)
            ck_assert_dat_err(post_op(p, op, ep, 1, &outs[i], &rt, &r, 1, 0), DAT_INVALID_PARAMETER,
                              DAT_INVALID_ARG3);
        /* The bad segment need not be the first. */
        DAT_LMR_TRIPLET two[2] = {t, outs[1]};
        ck_assert_dat_err(post_op(p, op, ep, 1 + (lim[op] > 1), lim[op] > 1 ? two : &outs[1], &rt, &r, 1, 0),
                          DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
        /* LMR of another PZ (L7151). */
        DAT_LMR_TRIPLET opz = rp_tri(c->lc_pz2, c->buf, 8);
        ck_assert_dat_err(post_op(p, op, ep, 1, &opz, &rt, &r, 1, 0), DAT_PROTECTION_VIOLATION, 0);
        /* Invalid LMR (never issued, freed) (L7153). */
        DAT_LMR_TRIPLET unk = rp_tri(0x7abc1200, c->buf, 8);
        ck_assert_dat_err(post_op(p, op, ep, 1, &unk, &rt, &r, 1, 0), DAT_PRIVILEGES_VIOLATION, 0);
        /* A sink needs LOCAL_WRITE; a source is readable (verbs: every
         * region is locally readable). */
        DAT_LMR_TRIPLET ro = rp_tri(c->lc_ro, c->buf, 8);
        if (op == OP_READ)
            ck_assert_dat_err(post_op(p, op, ep, 1, &ro, &rt, &r, 1, 0), DAT_PRIVILEGES_VIOLATION, 0);
    }
    /* invalidate_flag neither TRUE nor FALSE. */
    ck_assert_dat_err(p->ep_post_send_with_invalidate_func(ep, 1, &t, rp_ck(1), 0, 2, s->rc), DAT_INVALID_PARAMETER,
                      DAT_INVALID_ARG6);
    /* A freed LMR's context is invalid. */
    DAT_LMR_HANDLE tmp;
    DAT_LMR_CONTEXT tmpc;
    rp_lmr(c, c->pz, DAT_MEM_PRIV_ALL_FLAG, &tmp, &tmpc, NULL);
    ck_assert_dat_ok(p->lmr_free_func(tmp));
    DAT_LMR_TRIPLET fr = rp_tri(tmpc, c->buf, 8);
    ck_assert_dat_err(p->ep_post_send_func(ep, 1, &fr, rp_ck(1), 0), DAT_PRIVILEGES_VIOLATION, 0);
    ck_assert_dat_err(p->ep_post_rdma_write_func(ep, 1, &fr, rp_ck(1), &r, 0), DAT_PRIVILEGES_VIOLATION, 0);

    /* read_to_rmr's local window (L7506-7512): range outside the window,
     * unknown context, a window of another PZ's... (bind refuses that),
     * a window without write access, an LMR's rmr_context without
     * REMOTE_WRITE is accepted only as a window would be. */
    DAT_RMR_TRIPLET w_out = rp_rtri(wctx, c->buf + 4096 + 60, 8);
    ck_assert_dat_err(p->ep_post_rdma_read_to_rmr_func(ep, &w_out, rp_ck(1), &r, 0), DAT_INVALID_PARAMETER,
                      DAT_INVALID_ARG2);
    DAT_RMR_TRIPLET w_unk = rp_rtri(0x7abc1200, c->buf + 4096, 8);
    ck_assert_dat_err(p->ep_post_rdma_read_to_rmr_func(ep, &w_unk, rp_ck(1), &r, 0), DAT_PRIVILEGES_VIOLATION, 0);
    DAT_RMR_CONTEXT rdonly;
    local_window(&x, ep, 8192, 64, DAT_MEM_PRIV_REMOTE_READ_FLAG, &rdonly);
    DAT_RMR_TRIPLET w_ro = rp_rtri(rdonly, c->buf + 8192, 8);
    ck_assert_dat_err(p->ep_post_rdma_read_to_rmr_func(ep, &w_ro, rp_ck(1), &r, 0), DAT_PRIVILEGES_VIOLATION, 0);
    /* Nothing was posted by any of the above. */
    rp_none(c, c->req, ERR_NONE_US);
    ck_assert_int_eq(rp_state(c, ep), DAT_EP_STATE_CONNECTED);
    /* Every slot is free: max_request_dtos (8) signalled Writes fit. */
    DAT_RMR_TRIPLET r8 = rp_rtri(s->rc, s->buf, 8);
    for (int i = 0; i < 8; i++)
        ck_assert_dat_ok(p->ep_post_rdma_write_func(ep, 1, &t, rp_ck(200 + i), &r8, 0));
    for (int i = 0; i < 8; i++) {
        DAT_DTO_COMPLETION_EVENT_DATA d = rp_dto(c, c->req);
        ck_assert_uint_eq(d.user_cookie.as_64, 200 + i);
        ck_assert_int_eq(d.status, DAT_DTO_SUCCESS);
    }
    rp_close(&x);
}
END_TEST

/* An EP whose request_completion_flags is UNSIGNALLED accepts the flag on
 * every request post; its successes are queued without notification. */
START_TEST(unsignalled_request_ep)
{
    DAT_EP_ATTR a;
    rp_attr(&a, DAT_COMPLETION_UNSIGNALLED_FLAG, DAT_COMPLETION_UNSIGNALLED_FLAG);
    struct rp_pair x;
    rp_open(&x, "t-rcdto-u", &a, &a);
    struct rp_side *c = &x.c, *s = &x.s;
    DAT_LMR_TRIPLET t = rp_tri(c->lc, c->buf, 8), st = rp_tri(s->lc, s->buf + 512, 8);
    DAT_RMR_TRIPLET r = rp_rtri(s->rc, s->buf, 8);
    ck_assert_dat_ok(s->p->ep_post_recv_func(x.sep, 1, &st, rp_ck(1), DAT_COMPLETION_UNSIGNALLED_FLAG));
    ck_assert_dat_ok(s->p->ep_post_recv_func(x.sep, 1, &st, rp_ck(2), DAT_COMPLETION_UNSIGNALLED_FLAG));
    for (enum op op = 0; op < OP_READ_TO_RMR; op++)
        ck_assert_dat_ok(post_op(c->p, op, x.cep, 1, &t, NULL, &r, 10 + op, DAT_COMPLETION_UNSIGNALLED_FLAG));
    /* Still invalid on a receive: SUPPRESS. */
    ck_assert_dat_err(s->p->ep_post_recv_func(x.sep, 1, &st, rp_ck(3), DAT_COMPLETION_SUPPRESS_FLAG),
                      DAT_INVALID_PARAMETER, DAT_INVALID_ARG5);
    /* Without notification: a waiter is not woken by them (the events are
     * there for dequeue). */
    struct timespec ts = {0, 200 * 1000 * 1000};
    nanosleep(&ts, NULL);
    /* (A Read may complete after the Write posted after it, L1203.) */
    unsigned seen = 0;
    for (enum op op = 0; op < OP_READ_TO_RMR; op++) {
        DAT_EVENT ev;
        ck_assert_dat_ok(c->p->evd_dequeue_func(c->req, &ev));
        uint64_t ck = ev.event_data.dto_completion_event_data.user_cookie.as_64;
        ck_assert(ck >= 10 && ck < 10 + OP_READ_TO_RMR);
        seen |= 1u << (ck - 10);
        ck_assert_int_eq(ev.event_data.dto_completion_event_data.status, DAT_DTO_SUCCESS);
    }
    ck_assert_uint_eq(seen, (1u << OP_READ_TO_RMR) - 1);
    rp_close(&x);
}
END_TEST

/* post_recv: iov limit 2, flags (THRESHOLD EP: none allowed; SOLICITED
 * receive side: none allowed), local checks with LOCAL_WRITE (L7288). */
START_TEST(recv_arguments)
{
    struct rp_pair x;
    rp_open(&x, "t-rcdto-r", NULL, NULL);
    struct rp_side *c = &x.c;
    DAT_PROVIDER *p = c->p;
    DAT_LMR_TRIPLET t = rp_tri(c->lc, c->buf, 8);
    DAT_LMR_TRIPLET v[3] = {t, t, t};
    DAT_EP_ATTR sol;
    rp_attr(&sol, DAT_COMPLETION_EVD_THRESHOLD_FLAG, DAT_COMPLETION_SOLICITED_WAIT_FLAG);
    DAT_EP_HANDLE eps[2] = {x.cep, rp_ep(c, &sol)};
    for (int e = 0; e < 2; e++) {
        DAT_EP_HANDLE ep = eps[e];
        ck_assert_dat_err(p->ep_post_recv_func(ep, 3, v, rp_ck(1), 0), DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
        ck_assert_dat_err(p->ep_post_recv_func(ep, -1, v, rp_ck(1), 0), DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
        ck_assert_dat_err(p->ep_post_recv_func(ep, 1, NULL, rp_ck(1), 0), DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
        DAT_COMPLETION_FLAGS badf[] = {DAT_COMPLETION_SUPPRESS_FLAG, DAT_COMPLETION_SOLICITED_WAIT_FLAG,
                                       DAT_COMPLETION_UNSIGNALLED_FLAG, DAT_COMPLETION_BARRIER_FENCE_FLAG,
                                       DAT_COMPLETION_EVD_THRESHOLD_FLAG, 0x40, 0x1000};
        for (unsigned i = 0; i < sizeof badf / sizeof badf[0]; i++)
            ck_assert_dat_err(p->ep_post_recv_func(ep, 1, &t, rp_ck(1), badf[i]), DAT_INVALID_PARAMETER,
                              DAT_INVALID_ARG5);
        DAT_LMR_TRIPLET outs[] = {rp_tri(c->lc, c->buf - 8, 8), rp_tri(c->lc, c->buf + RP_BUF - 4, 8),
                                  rp_tri(c->lc, (void *)UINTPTR_MAX, 8)};
        for (unsigned i = 0; i < 3; i++)
            ck_assert_dat_err(p->ep_post_recv_func(ep, 1, &outs[i], rp_ck(1), 0), DAT_INVALID_PARAMETER,
                              DAT_INVALID_ARG3);
        DAT_LMR_TRIPLET opz = rp_tri(c->lc_pz2, c->buf, 8), ro = rp_tri(c->lc_ro, c->buf, 8),
                        unk = rp_tri(0x7abc1200, c->buf, 8);
        ck_assert_dat_err(p->ep_post_recv_func(ep, 1, &opz, rp_ck(1), 0), DAT_PROTECTION_VIOLATION, 0);
        ck_assert_dat_err(p->ep_post_recv_func(ep, 2, (DAT_LMR_TRIPLET[]){t, ro}, rp_ck(1), 0),
                          DAT_PRIVILEGES_VIOLATION, 0);
        ck_assert_dat_err(p->ep_post_recv_func(ep, 1, &unk, rp_ck(1), 0), DAT_PRIVILEGES_VIOLATION, 0);
    }
    rp_none(c, c->rcv, ERR_NONE_US);
    /* No slot leaked: 8 receives fit, the 9th does not (L7340:
     * INSUFFICIENT_RESOURCES). */
    for (int i = 0; i < 8; i++)
        ck_assert_dat_ok(p->ep_post_recv_func(x.cep, 1, &t, rp_ck(10 + i), 0));
    ck_assert_dat_err(p->ep_post_recv_func(x.cep, 1, &t, rp_ck(18), 0), DAT_INSUFFICIENT_RESOURCES,
                      DAT_RESOURCE_TEP);
    /* A completion frees one: the peer sends, the receive completes. */
    struct rp_side *s = &x.s;
    DAT_LMR_TRIPLET st = rp_tri(s->lc, s->buf, 4);
    ck_assert_dat_ok(s->p->ep_post_send_func(x.sep, 1, &st, rp_ck(1), 0));
    DAT_DTO_COMPLETION_EVENT_DATA d = rp_dto(c, c->rcv);
    ck_assert_uint_eq(d.user_cookie.as_64, 10);
    ck_assert_int_eq(d.status, DAT_DTO_SUCCESS);
    ck_assert_uint_eq(d.transfered_length, 4);
    ck_assert_int_eq(d.operation, DAT_DTO_RECEIVE);
    ck_assert_dat_ok(p->ep_post_recv_func(x.cep, 1, &t, rp_ck(18), 0));
    rp_close(&x);
}
END_TEST

/* dat_srq_post_recv (L5172-5180). */
START_TEST(srq_post_recv_codes)
{
    struct rp_pair x;
    rp_open(&x, "t-rcdto-q", NULL, NULL);
    struct rp_side *c = &x.c;
    DAT_PROVIDER *p = c->p;
    DAT_SRQ_HANDLE srq, dead;
    DAT_SRQ_ATTR sa = {.max_recv_dtos = 4, .max_recv_iov = 2, .low_watermark = 0};
    ck_assert_dat_ok(p->srq_create_func(c->ia, c->pz, &sa, &srq));
    ck_assert_dat_ok(p->srq_create_func(c->ia, c->pz, &sa, &dead));
    ck_assert_dat_ok(p->srq_free_func(dead));
    DAT_LMR_TRIPLET t = rp_tri(c->lc, c->buf, 8);
    ck_assert_dat_err(p->srq_post_recv_func(dead, 1, &t, rp_ck(1)), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_SRQ);
    ck_assert_dat_err(p->srq_post_recv_func(c->pz, 1, &t, rp_ck(1)), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_SRQ);
    ck_assert_dat_err(p->srq_post_recv_func(srq, 3, (DAT_LMR_TRIPLET[]){t, t, t}, rp_ck(1)), DAT_INVALID_PARAMETER,
                      DAT_INVALID_ARG2);
    ck_assert_dat_err(p->srq_post_recv_func(srq, -1, &t, rp_ck(1)), DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    ck_assert_dat_err(p->srq_post_recv_func(srq, 1, NULL, rp_ck(1)), DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    DAT_LMR_TRIPLET out = rp_tri(c->lc, c->buf + RP_BUF - 4, 8), opz = rp_tri(c->lc_pz2, c->buf, 8),
                    ro = rp_tri(c->lc_ro, c->buf, 8), unk = rp_tri(0x7abc1200, c->buf, 8);
    ck_assert_dat_err(p->srq_post_recv_func(srq, 1, &out, rp_ck(1)), DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    ck_assert_dat_err(p->srq_post_recv_func(srq, 1, &opz, rp_ck(1)), DAT_PROTECTION_VIOLATION, 0);
    ck_assert_dat_err(p->srq_post_recv_func(srq, 1, &ro, rp_ck(1)), DAT_PRIVILEGES_VIOLATION, 0);
    ck_assert_dat_err(p->srq_post_recv_func(srq, 1, &unk, rp_ck(1)), DAT_PRIVILEGES_VIOLATION, 0);
    /* 0-byte receives are allowed (L5130). */
    ck_assert_dat_ok(p->srq_post_recv_func(srq, 0, NULL, rp_ck(1)));
    for (int i = 0; i < 3; i++)
        ck_assert_dat_ok(p->srq_post_recv_func(srq, 1, &t, rp_ck(2 + i)));
    ck_assert_dat_err(p->srq_post_recv_func(srq, 1, &t, rp_ck(9)), DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_SRQ);
    rp_close(&x);
}
END_TEST

/* ------------------------------------------------------------ limits */

/* Queue full (INSUFFICIENT_RESOURCES): a SUPPRESSed success keeps its
 * slot until a later completion is generated (L8452), so 8 suppressed
 * Writes fill an 8-deep request queue for good — for every request post,
 * binds included. */
START_TEST(request_queue_full)
{
    struct rp_pair x;
    rp_open(&x, "t-rcdto-f", NULL, NULL);
    struct rp_side *c = &x.c, *s = &x.s;
    DAT_PROVIDER *p = c->p;
    DAT_LMR_TRIPLET t = rp_tri(c->lc, c->buf, 8);
    DAT_RMR_TRIPLET r = rp_rtri(s->rc, s->buf, 8);
    DAT_RMR_CONTEXT wctx;
    DAT_RMR_HANDLE win = local_window(&x, x.cep, 4096, 64, DAT_MEM_PRIV_REMOTE_WRITE_FLAG, &wctx);
    DAT_RMR_TRIPLET rt = rp_rtri(wctx, c->buf + 4096, 8);
    for (int i = 0; i < 8; i++)
        ck_assert_dat_ok(p->ep_post_rdma_write_func(x.cep, 1, &t, rp_ck(i), &r, DAT_COMPLETION_SUPPRESS_FLAG));
    rp_none(c, c->req, ERR_NONE_US); /* they all succeeded, silently */
    for (enum op op = 0; op < OP_N; op++)
        ck_assert_dat_err(post_op(p, op, x.cep, 1, &t, &rt, &r, 9, 0), DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEP);
    DAT_RMR_CONTEXT ctx;
    DAT_LMR_TRIPLET bt = rp_tri(c->lc, c->buf, 64);
    ck_assert_dat_err(p->rmr_bind_func(win, c->lmr, &bt, DAT_MEM_PRIV_REMOTE_WRITE_FLAG, DAT_VA_TYPE_VA, x.cep,
                                       rp_ck(9), 0, &ctx),
                      DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEP);
    /* Receives are the other queue. */
    ck_assert_dat_ok(p->ep_post_recv_func(x.cep, 1, &t, rp_ck(9), 0));
    rp_close(&x);
}
END_TEST

/* DAT_LENGTH_ERROR (L7431, L7510, L7640): the remote buffer's real size
 * is known only at the target; what is detectable here is a remote range
 * no buffer can have (it wraps the address space). Synchronous, no side
 * effects (L7457): the connection carries on. */
START_TEST(length_error)
{
    struct rp_pair x;
    rp_open(&x, "t-rcdto-l", NULL, NULL);
    struct rp_side *c = &x.c, *s = &x.s;
    DAT_PROVIDER *p = c->p;
    DAT_LMR_TRIPLET t = rp_tri(c->lc, c->buf, 16);
    DAT_RMR_TRIPLET wrap = {.rmr_context = s->rc, .virtual_address = UINT64_MAX - 7, .segment_length = 16};
    DAT_RMR_CONTEXT wctx;
    local_window(&x, x.cep, 4096, 64, DAT_MEM_PRIV_REMOTE_WRITE_FLAG, &wctx);
    DAT_RMR_TRIPLET rt = rp_rtri(wctx, c->buf + 4096, 16);
    ck_assert_dat_err(p->ep_post_rdma_write_func(x.cep, 1, &t, rp_ck(1), &wrap, 0), DAT_LENGTH_ERROR, 0);
    ck_assert_dat_err(p->ep_post_rdma_read_func(x.cep, 1, &t, rp_ck(1), &wrap, 0), DAT_LENGTH_ERROR, 0);
    ck_assert_dat_err(p->ep_post_rdma_read_to_rmr_func(x.cep, &rt, rp_ck(1), &wrap, 0), DAT_LENGTH_ERROR, 0);
    /* Exactly up to the last byte is a range (not refused here). A remote
     * triplet whose segment_length is shorter than the transfer is not an
     * error either: the RMR's size is what counts (L7455). */
    DAT_RMR_TRIPLET shortr = rp_rtri(s->rc, s->buf, 1);
    ck_assert_dat_ok(p->ep_post_rdma_write_func(x.cep, 1, &t, rp_ck(2), &shortr, 0));
    DAT_DTO_COMPLETION_EVENT_DATA d = rp_dto(c, c->req);
    ck_assert_uint_eq(d.user_cookie.as_64, 2);
    ck_assert_int_eq(d.status, DAT_DTO_SUCCESS);
    ck_assert_int_eq(rp_state(c, x.cep), DAT_EP_STATE_CONNECTED);
    /* Beyond the remote region: detectable only there: REMOTE_ACCESS and
     * the connection breaks (a Read: its status is guaranteed, L8603). */
    DAT_RMR_TRIPLET past = rp_rtri(s->rc, s->buf + RP_BUF - 8, 16);
    ck_assert_dat_ok(p->ep_post_rdma_read_func(x.cep, 1, &t, rp_ck(3), &past, 0));
    d = rp_dto(c, c->req);
    ck_assert_int_eq(d.status, DAT_DTO_ERR_REMOTE_ACCESS);
    rp_wait(c, c->conn, DAT_CONNECTION_EVENT_BROKEN);
    rp_close(&x);
}
END_TEST

/* ------------------------------------------------------------ statuses */

/* DAT_DTO_SUCCESS for each op, with its operation code, length and bytes. */
START_TEST(status_success)
{
    struct rp_pair x;
    rp_open(&x, "t-rcdto-ok", NULL, NULL);
    struct rp_side *c = &x.c, *s = &x.s;
    DAT_PROVIDER *p = c->p;
    for (int i = 0; i < 64; i++)
        c->buf[i] = (char)('a' + i % 26);
    /* 3-segment Send into a 2-segment receive: front segment full. */
    DAT_LMR_TRIPLET rv[2] = {rp_tri(s->lc, s->buf + 1000, 5), rp_tri(s->lc, s->buf + 2000, 100)};
    ck_assert_dat_ok(s->p->ep_post_recv_func(x.sep, 2, rv, rp_ck(1), 0));
    DAT_LMR_TRIPLET sv[3] = {rp_tri(c->lc, c->buf, 3), rp_tri(c->lc, c->buf + 3, 0), rp_tri(c->lc, c->buf + 3, 7)};
    ck_assert_dat_ok(p->ep_post_send_func(x.cep, 3, sv, rp_ck(11), DAT_COMPLETION_SOLICITED_WAIT_FLAG));
    DAT_DTO_COMPLETION_EVENT_DATA d = rp_dto(c, c->req);
    ck_assert_uint_eq(d.user_cookie.as_64, 11);
    ck_assert_int_eq(d.status, DAT_DTO_SUCCESS);
    ck_assert_int_eq(d.operation, DAT_DTO_SEND);
    ck_assert_ptr_eq(d.ep_handle, x.cep);
    d = rp_dto(s, s->rcv);
    ck_assert_int_eq(d.status, DAT_DTO_SUCCESS);
    ck_assert_int_eq(d.operation, DAT_DTO_RECEIVE);
    ck_assert_uint_eq(d.transfered_length, 10);
    ck_assert_int_eq(memcmp(s->buf + 1000, "abcde", 5), 0);
    ck_assert_int_eq(memcmp(s->buf + 2000, "fghij", 5), 0);
    /* Send with invalidate_flag FALSE: a plain receive at the peer. */
    ck_assert_dat_ok(s->p->ep_post_recv_func(x.sep, 1, rv, rp_ck(2), 0));
    ck_assert_dat_ok(p->ep_post_send_with_invalidate_func(x.cep, 0, NULL, rp_ck(12), 0, DAT_FALSE, 0x1234));
    d = rp_dto(c, c->req);
    ck_assert_int_eq(d.status, DAT_DTO_SUCCESS);
    ck_assert_int_eq(d.operation, DAT_DTO_SEND);
    d = rp_dto(s, s->rcv);
    ck_assert_int_eq(d.operation, DAT_DTO_RECEIVE);
    ck_assert_uint_eq(d.transfered_length, 0);
    /* RDMA Write (2 segments) and RDMA Read back. */
    DAT_LMR_TRIPLET wv[2] = {rp_tri(c->lc, c->buf, 4), rp_tri(c->lc, c->buf + 10, 4)};
    DAT_RMR_TRIPLET r = rp_rtri(s->rc, s->buf + 3000, 8);
    ck_assert_dat_ok(p->ep_post_rdma_write_func(x.cep, 2, wv, rp_ck(13), &r, 0));
    d = rp_dto(c, c->req);
    ck_assert_int_eq(d.status, DAT_DTO_SUCCESS);
    ck_assert_int_eq(d.operation, DAT_DTO_RDMA_WRITE);
    DAT_LMR_TRIPLET rd = rp_tri(c->lc, c->buf + 5000, 8);
    ck_assert_dat_ok(p->ep_post_rdma_read_func(x.cep, 1, &rd, rp_ck(14), &r, DAT_COMPLETION_BARRIER_FENCE_FLAG));
    d = rp_dto(c, c->req);
    ck_assert_int_eq(d.status, DAT_DTO_SUCCESS);
    ck_assert_int_eq(d.operation, DAT_DTO_RDMA_READ);
    ck_assert_uint_eq(d.transfered_length, 8);
    ck_assert_int_eq(memcmp(c->buf + 5000, "abcdklmn", 8), 0);
    rp_close(&x);
}
END_TEST

/* DAT_DTO_ERR_LOCAL_LENGTH, receive side: the incoming Send is larger
 * than the receive (L7324); the connection breaks. */
START_TEST(status_local_length_recv)
{
    struct rp_pair x;
    rp_open(&x, "t-rcdto-ll", NULL, NULL);
    struct rp_side *c = &x.c, *s = &x.s;
    DAT_LMR_TRIPLET small = rp_tri(s->lc, s->buf, 8);
    ck_assert_dat_ok(s->p->ep_post_recv_func(x.sep, 1, &small, rp_ck(1), 0));
    ck_assert_dat_ok(s->p->ep_post_recv_func(x.sep, 1, &small, rp_ck(2), 0));
    DAT_LMR_TRIPLET big = rp_tri(c->lc, c->buf, 64);
    ck_assert_dat_ok(c->p->ep_post_send_func(x.cep, 1, &big, rp_ck(1), 0));
    DAT_DTO_COMPLETION_EVENT_DATA d = rp_dto(s, s->rcv);
    ck_assert_uint_eq(d.user_cookie.as_64, 1);
    ck_assert_int_eq(d.status, DAT_DTO_ERR_LOCAL_LENGTH);
    d = rp_dto(s, s->rcv);
    ck_assert_uint_eq(d.user_cookie.as_64, 2);
    ck_assert_int_eq(d.status, DAT_DTO_ERR_FLUSHED);
    DAT_EVENT ev;
    DAT_COUNT n;
    ck_assert_dat_ok(s->p->evd_wait_func(s->conn, 5000000, 1, &ev, &n));
    ck_assert(ev.event_number == DAT_CONNECTION_EVENT_BROKEN ||
              ev.event_number == DAT_CONNECTION_EVENT_DISCONNECTED);
    ck_assert_int_eq(rp_state(s, x.sep), DAT_EP_STATE_DISCONNECTED);
    rp_close(&x);
}
END_TEST

/* DAT_DTO_ERR_LOCAL_LENGTH, request side: a Send over max_message_size
 * and an RDMA Write over max_rdma_size (1 GiB, the IA's limits; the
 * region is reserved, never touched). Accepted, complete in error, the
 * connection breaks. */
static void local_length_request(bool send)
{
    struct rp_pair x;
    rp_open(&x, send ? "t-rcdto-ls" : "t-rcdto-lw", NULL, NULL);
    struct rp_side *c = &x.c, *s = &x.s;
    size_t len = (size_t)SD_MAX_MESSAGE_SIZE + 4096;
    char *huge = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    ck_assert_ptr_ne(huge, MAP_FAILED);
    DAT_REGION_DESCRIPTION rd;
    rd.for_va = huge;
    DAT_LMR_HANDLE lmr;
    DAT_LMR_CONTEXT lc;
    DAT_RMR_CONTEXT rc;
    DAT_VLEN sz;
    DAT_VADDR va;
    ck_assert_dat_ok(c->p->lmr_create_func(c->ia, DAT_MEM_TYPE_VIRTUAL, rd, len, c->pz, DAT_MEM_PRIV_ALL_FLAG,
                                           DAT_VA_TYPE_VA, &lmr, &lc, &rc, &sz, &va));
    DAT_LMR_TRIPLET t = rp_tri(lc, huge, SD_MAX_MESSAGE_SIZE + 1);
    DAT_LMR_TRIPLET st = rp_tri(s->lc, s->buf, 64);
    ck_assert_dat_ok(s->p->ep_post_recv_func(x.sep, 1, &st, rp_ck(1), 0));
    DAT_RMR_TRIPLET r = rp_rtri(s->rc, s->buf, 64);
    if (send)
        ck_assert_dat_ok(c->p->ep_post_send_func(x.cep, 1, &t, rp_ck(7), 0));
    else
        ck_assert_dat_ok(c->p->ep_post_rdma_write_func(x.cep, 1, &t, rp_ck(7), &r, 0));
    DAT_DTO_COMPLETION_EVENT_DATA d = rp_dto(c, c->req);
    ck_assert_uint_eq(d.user_cookie.as_64, 7);
    ck_assert_int_eq(d.status, DAT_DTO_ERR_LOCAL_LENGTH);
    rp_wait(c, c->conn, DAT_CONNECTION_EVENT_BROKEN);
    ck_assert_int_eq(rp_state(c, x.cep), DAT_EP_STATE_DISCONNECTED);
    rp_close(&x);
    munmap(huge, len);
}

START_TEST(status_local_length_send)
{
    local_length_request(true);
}
END_TEST

START_TEST(status_local_length_write)
{
    local_length_request(false);
}
END_TEST

/* DAT_DTO_ERR_LOCAL_PROTECTION: an RDMA Read (and a Read to an RMR) on an
 * EP with max_rdma_read_out 0 is accepted and completes in error (L7417,
 * L7497); any error status breaks the connection (L8505). */
START_TEST(status_local_protection_ord0)
{
    DAT_EP_ATTR a;
    rp_attr(&a, DAT_COMPLETION_EVD_THRESHOLD_FLAG, DAT_COMPLETION_EVD_THRESHOLD_FLAG);
    a.max_rdma_read_out = 0;
    struct rp_pair x;
    rp_open(&x, "t-rcdto-lp", &a, NULL);
    struct rp_side *c = &x.c, *s = &x.s;
    DAT_LMR_TRIPLET t = rp_tri(c->lc, c->buf, 8);
    DAT_RMR_TRIPLET r = rp_rtri(s->rc, s->buf, 8);
    ck_assert_dat_ok(c->p->ep_post_rdma_read_func(x.cep, 1, &t, rp_ck(1), &r, DAT_COMPLETION_SUPPRESS_FLAG));
    DAT_DTO_COMPLETION_EVENT_DATA d = rp_dto(c, c->req);
    ck_assert_uint_eq(d.user_cookie.as_64, 1);
    ck_assert_int_eq(d.status, DAT_DTO_ERR_LOCAL_PROTECTION);
    ck_assert_int_eq(d.operation, DAT_DTO_RDMA_READ);
    rp_wait(c, c->conn, DAT_CONNECTION_EVENT_BROKEN);
    ck_assert_int_eq(rp_state(c, x.cep), DAT_EP_STATE_DISCONNECTED);
    rp_close(&x);
}
END_TEST

START_TEST(status_local_protection_ord0_to_rmr)
{
    DAT_EP_ATTR a;
    rp_attr(&a, DAT_COMPLETION_EVD_THRESHOLD_FLAG, DAT_COMPLETION_EVD_THRESHOLD_FLAG);
    a.max_rdma_read_out = 0;
    struct rp_pair x;
    rp_open(&x, "t-rcdto-lq", &a, NULL);
    struct rp_side *c = &x.c, *s = &x.s;
    DAT_RMR_CONTEXT wctx;
    local_window(&x, x.cep, 4096, 64, DAT_MEM_PRIV_REMOTE_WRITE_FLAG, &wctx);
    DAT_RMR_TRIPLET rt = rp_rtri(wctx, c->buf + 4096, 8);
    DAT_RMR_TRIPLET r = rp_rtri(s->rc, s->buf, 8);
    ck_assert_dat_ok(c->p->ep_post_rdma_read_to_rmr_func(x.cep, &rt, rp_ck(2), &r, 0));
    DAT_DTO_COMPLETION_EVENT_DATA d = rp_dto(c, c->req);
    ck_assert_uint_eq(d.user_cookie.as_64, 2);
    ck_assert_int_eq(d.status, DAT_DTO_ERR_LOCAL_PROTECTION);
    rp_wait(c, c->conn, DAT_CONNECTION_EVENT_BROKEN);
    rp_close(&x);
}
END_TEST

/* DAT_DTO_ERR_REMOTE_ACCESS (6.8.2): the target refuses the access. An
 * RDMA Read reports it (L8603: Consumers can rely on Read statuses): an
 * unknown rmr_context, one without REMOTE_READ, one of another PZ than
 * the responder's, a range past the region. Send and RDMA Write complete
 * when their bytes left (dto_async_return_guaranteed is FALSE), so their
 * completion is SUCCESS or REMOTE_ACCESS, depending on timing; either way
 * the connection breaks, nothing was placed, and the peer's receive of a
 * refused Send with invalidate completes in error. After the break, a
 * post flushes. */
static void remote_access(const char *name, int which)
{
    struct rp_pair x;
    rp_open(&x, name, NULL, NULL);
    struct rp_side *c = &x.c, *s = &x.s;
    DAT_PROVIDER *p = c->p;
    DAT_LMR_TRIPLET t = rp_tri(c->lc, c->buf, 8);
    memset(c->buf, 'W', 8);
    DAT_LMR_HANDLE l2;
    DAT_LMR_CONTEXT lc2;
    DAT_RMR_CONTEXT rc2;
    rp_lmr(s, s->pz2, DAT_MEM_PRIV_ALL_FLAG, &l2, &lc2, &rc2);
    DAT_RMR_TRIPLET bad[] = {
        rp_rtri(s->rc ^ 0x5a5a00, s->buf, 8),   /* unknown */
        rp_rtri(s->rc_rw, s->buf, 8),           /* no REMOTE_READ */
        rp_rtri(rc2, s->buf, 8),                /* other PZ */
        rp_rtri(s->rc, s->buf + RP_BUF - 4, 8), /* past the end */
        rp_rtri(s->rc ^ 0x5a5a00, s->buf, 8),   /* Write: unknown */
        rp_rtri(rc2, s->buf, 8),                /* Write: other PZ */
    };
    bool strict = which < 4;
    DAT_DTOS want = strict ? DAT_DTO_RDMA_READ : which < 6 ? DAT_DTO_RDMA_WRITE : DAT_DTO_SEND;
    if (which < 4)
        ck_assert_dat_ok(p->ep_post_rdma_read_func(x.cep, 1, &t, rp_ck(1), &bad[which], DAT_COMPLETION_SUPPRESS_FLAG));
    else if (which < 6)
        ck_assert_dat_ok(p->ep_post_rdma_write_func(x.cep, 1, &t, rp_ck(1), &bad[which], 0));
    else {
        DAT_LMR_TRIPLET st = rp_tri(s->lc, s->buf + 100, 64);
        ck_assert_dat_ok(s->p->ep_post_recv_func(x.sep, 1, &st, rp_ck(9), 0));
        ck_assert_dat_ok(p->ep_post_send_with_invalidate_func(x.cep, 1, &t, rp_ck(1), 0, DAT_TRUE, 0x7abc1200));
    }
    DAT_DTO_COMPLETION_EVENT_DATA d = rp_dto(c, c->req);
    ck_assert_uint_eq(d.user_cookie.as_64, 1);
    ck_assert_int_eq(d.operation, want);
    if (strict)
        ck_assert_msg(d.status == DAT_DTO_ERR_REMOTE_ACCESS, "case %d: status %d", which, d.status);
    else if (which == 6) /* InfiniBand semantics: the Send waits for the peer's verdict */
        ck_assert_msg(d.status == DAT_DTO_ERR_REMOTE_ACCESS || d.status == DAT_DTO_ERR_REMOTE_RESPONDER ||
                          d.status == DAT_DTO_SUCCESS,
                      "case %d: status %d", which, d.status);
    else
        ck_assert_msg(d.status == DAT_DTO_ERR_REMOTE_ACCESS || d.status == DAT_DTO_SUCCESS, "case %d: status %d",
                      which, d.status);
    rp_wait(c, c->conn, DAT_CONNECTION_EVENT_BROKEN);
    ck_assert_int_eq(rp_state(c, x.cep), DAT_EP_STATE_DISCONNECTED);
    if (which == 6) {
        d = rp_dto(s, s->rcv);
        ck_assert_uint_eq(d.user_cookie.as_64, 9);
        ck_assert_int_ne(d.status, DAT_DTO_SUCCESS);
    }
    /* Nothing placed (a receive that completed in error has undefined
     * contents, L7326: not checked). */
    for (int i = 0; i < 8 && which < 6; i++)
        ck_assert_int_eq(s->buf[i], 0);
    ck_assert_dat_ok(p->ep_post_send_func(x.cep, 1, &t, rp_ck(2), 0));
    d = rp_dto(c, c->req);
    ck_assert_uint_eq(d.user_cookie.as_64, 2);
    ck_assert_int_eq(d.status, DAT_DTO_ERR_FLUSHED);
    rp_close(&x);
}

START_TEST(status_remote_access)
{
    char name[32];
    snprintf(name, sizeof name, "t-rcdto-ra%d", _i);
    remote_access(name, _i);
}
END_TEST

/* A Send to a peer that has no receive posted, on a fresh pair: the
 * sender's completion (status `want`, or also SUCCESS when `maybe_ok`:
 * iWARP may complete a Send before the peer's verdict), then BROKEN here
 * and BROKEN or DISCONNECTED there. */
static void send_without_receive(struct rp_pair *x, DAT_DTO_COMPLETION_STATUS want, bool maybe_ok)
{
    struct rp_side *c = &x->c, *s = &x->s;
    DAT_LMR_TRIPLET t = rp_tri(c->lc, c->buf, 8);
    ck_assert_dat_ok(c->p->ep_post_send_func(x->cep, 1, &t, rp_ck(1), 0));
    DAT_DTO_COMPLETION_EVENT_DATA d = rp_dto(c, c->req);
    ck_assert_uint_eq(d.user_cookie.as_64, 1);
    ck_assert_msg(d.status == want || (maybe_ok && d.status == DAT_DTO_SUCCESS), "status %d", d.status);
    rp_wait(c, c->conn, DAT_CONNECTION_EVENT_BROKEN);
    DAT_EVENT ev;
    DAT_COUNT n;
    ck_assert_dat_ok(s->p->evd_wait_func(s->conn, 5000000, 1, &ev, &n));
    ck_assert(ev.event_number == DAT_CONNECTION_EVENT_BROKEN ||
              ev.event_number == DAT_CONNECTION_EVENT_DISCONNECTED);
    rp_close(x);
}

/* DAT_DTO_ERR_RECEIVER_NOT_READY: a Send reaching a peer without a posted
 * receive (L5883: the reliable connection breaks). The Send's own
 * completion may already have been SUCCESS (its bytes left; not
 * guaranteed for Sends, L8603); the connection breaks either way, and a
 * Read posted behind it never succeeds. */
START_TEST(status_receiver_not_ready)
{
    struct rp_pair x;
    rp_open_params(&x, "t-rcdto-rnr", "lo iwarp", NULL, NULL);
    send_without_receive(&x, DAT_DTO_ERR_RECEIVER_NOT_READY, true);
}
END_TEST

/* InfiniBand semantics, bounded RNR retry (SOFTDAT_RNR_RETRY=2, 2 ms
 * timer): the Send waits for a receive, none comes, the sender sees
 * DAT_DTO_ERR_RECEIVER_NOT_READY as from an HCA, then BROKEN. */
START_TEST(ib_rnr_retry_exceeded)
{
    setenv("SOFTDAT_RNR_RETRY", "2", 1);
    setenv("SOFTDAT_RNR_TIMER_US", "2000", 1);
    struct rp_pair x;
    rp_open(&x, "t-rcdto-ibrnr", NULL, NULL);
    unsetenv("SOFTDAT_RNR_RETRY");
    unsetenv("SOFTDAT_RNR_TIMER_US");
    send_without_receive(&x, DAT_DTO_ERR_RECEIVER_NOT_READY, false);
}
END_TEST

/* InfiniBand semantics, default (retry for ever): a Send that arrives
 * before the receive waits for it, and its completion comes only after the
 * receive was posted (an HCA completes a Send on the responder's ACK). */
START_TEST(ib_rnr_waits_for_receive)
{
    struct rp_pair x;
    rp_open(&x, "t-rcdto-ibwait", NULL, NULL);
    struct rp_side *c = &x.c, *s = &x.s;
    memcpy(c->buf, "rnr-wait", 8);
    DAT_LMR_TRIPLET t = rp_tri(c->lc, c->buf, 8);
    ck_assert_dat_ok(c->p->ep_post_send_func(x.cep, 1, &t, rp_ck(1), 0));
    DAT_EVENT ev;
    DAT_COUNT n;
    /* 200 ms: no completion yet, no break. */
    ck_assert_int_eq(DAT_GET_TYPE(c->p->evd_wait_func(c->req, 200000, 1, &ev, &n)), DAT_TIMEOUT_EXPIRED);
    ck_assert_int_eq(DAT_GET_TYPE(c->p->evd_dequeue_func(c->conn, &ev)), DAT_QUEUE_EMPTY);
    DAT_LMR_TRIPLET st = rp_tri(s->lc, s->buf, 64);
    memset(s->buf, 0, 64);
    ck_assert_dat_ok(s->p->ep_post_recv_func(x.sep, 1, &st, rp_ck(7), 0));
    DAT_DTO_COMPLETION_EVENT_DATA d = rp_dto(s, s->rcv);
    ck_assert_int_eq(d.status, DAT_DTO_SUCCESS);
    ck_assert_uint_eq(d.transfered_length, 8);
    ck_assert_mem_eq(s->buf, "rnr-wait", 8);
    d = rp_dto(c, c->req);
    ck_assert_uint_eq(d.user_cookie.as_64, 1);
    ck_assert_int_eq(d.status, DAT_DTO_SUCCESS);
    ck_assert_int_eq(rp_state(c, x.cep), DAT_EP_STATE_CONNECTED);
    rp_close(&x);
}
END_TEST

/* InfiniBand semantics: an RDMA Write completes only once the target has
 * placed it. Behind a Send that waits for a receive (RNR), a Write cannot
 * be placed, so it must not complete either; once the receive is posted
 * both complete, in post order, and the Write's bytes are in place. */
START_TEST(ib_write_completes_on_placement)
{
    struct rp_pair x;
    rp_open(&x, "t-rcdto-ibplace", NULL, NULL);
    struct rp_side *c = &x.c, *s = &x.s;
    memset(s->buf, 0, RP_BUF);
    memset(c->buf, 'P', 64);
    DAT_LMR_TRIPLET t = rp_tri(c->lc, c->buf, 8);
    ck_assert_dat_ok(c->p->ep_post_send_func(x.cep, 1, &t, rp_ck(1), 0));
    DAT_LMR_TRIPLET wt = rp_tri(c->lc, c->buf, 64);
    DAT_RMR_TRIPLET r = rp_rtri(s->rc, s->buf + 256, 64);
    ck_assert_dat_ok(c->p->ep_post_rdma_write_func(x.cep, 1, &wt, rp_ck(2), &r, 0));
    DAT_EVENT ev;
    DAT_COUNT n;
    ck_assert_int_eq(DAT_GET_TYPE(c->p->evd_wait_func(c->req, 150000, 1, &ev, &n)), DAT_TIMEOUT_EXPIRED);
    ck_assert_int_eq(s->buf[256], 0); /* not placed: the stream waits at the Send */
    DAT_LMR_TRIPLET st = rp_tri(s->lc, s->buf, 64);
    ck_assert_dat_ok(s->p->ep_post_recv_func(x.sep, 1, &st, rp_ck(7), 0));
    DAT_DTO_COMPLETION_EVENT_DATA d = rp_dto(c, c->req);
    ck_assert_uint_eq(d.user_cookie.as_64, 1);
    ck_assert_int_eq(d.status, DAT_DTO_SUCCESS);
    d = rp_dto(c, c->req);
    ck_assert_uint_eq(d.user_cookie.as_64, 2);
    ck_assert_int_eq(d.status, DAT_DTO_SUCCESS);
    /* Completion means placement: the bytes are there now, no waiting. */
    for (int i = 0; i < 64; i++)
        ck_assert_int_eq(s->buf[256 + i], 'P');
    rp_close(&x);
}
END_TEST

/* InfiniBand semantics: a receiver that closes the moment it has consumed
 * its last message has still acknowledged every message (an HCA ACKs
 * before the completion is seen), so all of the sender's Sends complete
 * successfully. A burst longer than QP_PROBES_MAX makes the sender hold
 * its last placement probe behind the earlier ones, so the receiver sees
 * the last Send before the probe that confirms it (dtestsrq's pattern:
 * bursts of 100, then the client disconnects at once). Several rounds,
 * as the window is narrow. */
START_TEST(ib_close_after_last_receive)
{
    enum { MSGS = 100, ROUNDS = 16 };
    DAT_EP_ATTR a;
    rp_attr(&a, DAT_COMPLETION_EVD_THRESHOLD_FLAG, DAT_COMPLETION_EVD_THRESHOLD_FLAG);
    a.max_recv_dtos = MSGS;
    a.max_request_dtos = MSGS;
    for (int round = 0; round < ROUNDS; round++) {
        struct rp_pair x;
        rp_open(&x, "t-rcdto-ibclose", &a, &a);
        struct rp_side *c = &x.c, *s = &x.s;
        for (int i = 0; i < MSGS; i++) {
            DAT_LMR_TRIPLET rt = rp_tri(s->lc, s->buf + 64 * i, 64);
            ck_assert_dat_ok(s->p->ep_post_recv_func(x.sep, 1, &rt, rp_ck(1000 + i), 0));
        }
        for (int i = 0; i < MSGS; i++) {
            memset(c->buf + 64 * i, 'a' + i % 26, 64);
            DAT_LMR_TRIPLET t = rp_tri(c->lc, c->buf + 64 * i, 64);
            ck_assert_dat_ok(c->p->ep_post_send_func(x.cep, 1, &t, rp_ck(i), 0));
        }
        for (int i = 0; i < MSGS; i++) {
            DAT_DTO_COMPLETION_EVENT_DATA d = rp_dto(s, s->rcv);
            ck_assert_int_eq(d.status, DAT_DTO_SUCCESS);
        }
        ck_assert_dat_ok(s->p->ep_disconnect_func(x.sep, DAT_CLOSE_ABRUPT_FLAG));
        for (int i = 0; i < MSGS; i++) {
            DAT_DTO_COMPLETION_EVENT_DATA d = rp_dto(c, c->req);
            ck_assert_msg(d.status == DAT_DTO_SUCCESS, "round %d: Send %d of %d completed with status %d",
                          round, i, MSGS, (int)d.status);
            ck_assert_uint_eq(d.user_cookie.as_64, (uint64_t)i);
        }
        rp_wait(c, c->conn, DAT_CONNECTION_EVENT_DISCONNECTED);
        for (int i = 0; i < MSGS; i++)
            ck_assert_int_eq(s->buf[64 * i + 63], 'a' + i % 26);
        rp_close(&x);
    }
}
END_TEST

/* DAT_DTO_ERR_FLUSHED: receives outstanding when the connection ends, in
 * post order, on both sides (L7334, L5370). */
START_TEST(status_flushed)
{
    struct rp_pair x;
    rp_open(&x, "t-rcdto-fl", NULL, NULL);
    struct rp_side *c = &x.c, *s = &x.s;
    DAT_LMR_TRIPLET ct = rp_tri(c->lc, c->buf, 8), st = rp_tri(s->lc, s->buf, 8);
    for (int i = 0; i < 3; i++) {
        ck_assert_dat_ok(c->p->ep_post_recv_func(x.cep, 1, &ct, rp_ck(10 + i), 0));
        ck_assert_dat_ok(s->p->ep_post_recv_func(x.sep, 1, &st, rp_ck(20 + i), 0));
    }
    ck_assert_dat_ok(c->p->ep_disconnect_func(x.cep, DAT_CLOSE_GRACEFUL_FLAG));
    for (int i = 0; i < 3; i++) {
        DAT_DTO_COMPLETION_EVENT_DATA d = rp_dto(c, c->rcv);
        ck_assert_uint_eq(d.user_cookie.as_64, 10 + i);
        ck_assert_int_eq(d.status, DAT_DTO_ERR_FLUSHED);
        d = rp_dto(s, s->rcv);
        ck_assert_uint_eq(d.user_cookie.as_64, 20 + i);
        ck_assert_int_eq(d.status, DAT_DTO_ERR_FLUSHED);
    }
    rp_wait(c, c->conn, DAT_CONNECTION_EVENT_DISCONNECTED);
    rp_wait(s, s->conn, DAT_CONNECTION_EVENT_DISCONNECTED);
    rp_close(&x);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("rc_dto");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 15);
    tcase_add_test(tc, bad_handles);
    tcase_add_test(tc, every_state);
    tcase_add_test(tc, request_arguments);
    tcase_add_test(tc, unsignalled_request_ep);
    tcase_add_test(tc, recv_arguments);
    tcase_add_test(tc, srq_post_recv_codes);
    tcase_add_test(tc, request_queue_full);
    tcase_add_test(tc, length_error);
    tcase_add_test(tc, status_success);
    tcase_add_test(tc, status_local_length_recv);
    tcase_add_test(tc, status_local_length_send);
    tcase_add_test(tc, status_local_length_write);
    tcase_add_test(tc, status_local_protection_ord0);
    tcase_add_test(tc, status_local_protection_ord0_to_rmr);
    tcase_add_loop_test(tc, status_remote_access, 0, 7);
    tcase_add_test(tc, status_receiver_not_ready);
    tcase_add_test(tc, ib_rnr_retry_exceeded);
    tcase_add_test(tc, ib_rnr_waits_for_receive);
    tcase_add_test(tc, ib_write_completes_on_placement);
    tcase_add_test(tc, ib_close_after_last_receive);
    tcase_add_test(tc, status_flushed);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
