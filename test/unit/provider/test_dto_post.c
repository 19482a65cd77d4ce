/* Data transfer posts through the provider table without a connection:
 * synchronous argument and state checks in the spec's order, queue-full
 * accounting, Disconnected posts completing FLUSHED in post order after
 * the receives that were queued, flag-dependent events, rmr_bind argument
 * checks, slot 80. The state is forced by hand (no connection manager
 * involved); the end-to-end test covers real connections. */
#include <dat2/dat_ib_extensions.h>
#include <stdarg.h>
#include <stdlib.h>

#include "lib/provider/ep.h"
#include "lib/provider/lmr.h"
#include "lib/provider/rmr.h"
#include "test/lib/prov_fixture.h"

#define BUF 4096

struct fx {
    DAT_PROVIDER *p;
    DAT_IA_HANDLE ia;
    DAT_PZ_HANDLE pz, pz2;
    DAT_EVD_HANDLE req, rcv, conn;
    DAT_EP_HANDLE ep;
    DAT_LMR_HANDLE lmr, lmr_ro, lmr_pz2;
    DAT_LMR_CONTEXT lc, lc_ro, lc_pz2;
    DAT_RMR_CONTEXT rc;
    char *buf;
};

static void mk_lmr(struct fx *f, DAT_PZ_HANDLE pz, DAT_MEM_PRIV_FLAGS priv, DAT_LMR_HANDLE *lmr,
                   DAT_LMR_CONTEXT *lc, DAT_RMR_CONTEXT *rc)
{
    DAT_REGION_DESCRIPTION rd;
    rd.for_va = f->buf;
    DAT_VLEN sz;
    DAT_VADDR va;
    DAT_RMR_CONTEXT dummy;
    ck_assert_dat_ok(f->p->lmr_create_func(f->ia, DAT_MEM_TYPE_VIRTUAL, rd, BUF, pz, priv, DAT_VA_TYPE_VA, lmr, lc,
                                           rc ? rc : &dummy, &sz, &va));
}

static void setup(struct fx *f, const char *name, DAT_COMPLETION_FLAGS req_flags, DAT_COMPLETION_FLAGS recv_flags,
                  DAT_COUNT dtos)
{
    memset(f, 0, sizeof *f);
    f->p = fx_provider(name, "lo", DAT_FALSE);
    sd_lmr_fill_table(f->p); /* until provider.c assembles it */
    sd_rmr_fill_table(f->p);
    sd_ep_dto_fill_table(f->p);
    f->ia = fx_open(f->p, NULL);
    ck_assert_dat_ok(f->p->pz_create_func(f->ia, &f->pz));
    ck_assert_dat_ok(f->p->pz_create_func(f->ia, &f->pz2));
    ck_assert_dat_ok(f->p->evd_create_func(f->ia, 64, NULL, DAT_EVD_DTO_FLAG | DAT_EVD_RMR_BIND_FLAG, &f->req));
    ck_assert_dat_ok(f->p->evd_create_func(f->ia, 64, NULL, DAT_EVD_DTO_FLAG, &f->rcv));
    ck_assert_dat_ok(f->p->evd_create_func(f->ia, 8, NULL, DAT_EVD_CONNECTION_FLAG, &f->conn));
    f->buf = aligned_alloc(64, BUF);
    memset(f->buf, 0, BUF);
    mk_lmr(f, f->pz, DAT_MEM_PRIV_ALL_FLAG, &f->lmr, &f->lc, &f->rc);
    mk_lmr(f, f->pz, DAT_MEM_PRIV_LOCAL_READ_FLAG, &f->lmr_ro, &f->lc_ro, NULL);
    mk_lmr(f, f->pz2, DAT_MEM_PRIV_ALL_FLAG, &f->lmr_pz2, &f->lc_pz2, NULL);
    DAT_EP_ATTR a;
    sd_ep_default_attr(&a);
    a.max_recv_dtos = dtos;
    a.max_request_dtos = dtos;
    a.max_recv_iov = 2;
    a.max_request_iov = 3;
    a.max_rdma_read_iov = 1;
    a.max_rdma_write_iov = 2;
    a.request_completion_flags = req_flags;
    a.recv_completion_flags = recv_flags;
    ck_assert_dat_ok(f->p->ep_create_func(f->ia, f->pz, f->rcv, f->req, f->conn, &a, &f->ep));
}

static void teardown(struct fx *f)
{
    ck_assert_dat_ok(f->p->ia_close_func(f->ia, DAT_CLOSE_ABRUPT_FLAG));
    free(f->buf);
}

static void force_state(struct fx *f, DAT_EP_STATE s)
{
    fx_force_state(f->ep, s);
}

static DAT_LMR_TRIPLET tri(DAT_LMR_CONTEXT lc, void *addr, DAT_SEG_LENGTH len)
{
    DAT_LMR_TRIPLET t;
    t.lmr_context = lc;
    t.virtual_address = (DAT_VADDR)(uintptr_t)addr;
    t.segment_length = len;
    return t;
}

static DAT_DTO_COOKIE ck(uint64_t v)
{
    DAT_DTO_COOKIE c;
    c.as_64 = v;
    return c;
}

/* Dequeue one DTO event; fails the test if there is none. */
static DAT_DTO_COMPLETION_EVENT_DATA deq(struct fx *f, DAT_EVD_HANDLE evd)
{
    DAT_EVENT ev;
    ck_assert_dat_ok(f->p->evd_dequeue_func(evd, &ev));
    ck_assert_uint_eq(ev.event_number, DAT_DTO_COMPLETION_EVENT);
    return ev.event_data.dto_completion_event_data;
}

static void assert_empty(struct fx *f, DAT_EVD_HANDLE evd)
{
    DAT_EVENT ev;
    DAT_RETURN rc = f->p->evd_dequeue_func(evd, &ev);
    ck_assert_msg(DAT_GET_TYPE(rc) == DAT_QUEUE_EMPTY, "unexpected event 0x%x (rc 0x%x)", ev.event_number,
                  (unsigned)rc);
}

static DAT_RETURN ext(DAT_PROVIDER *p, DAT_HANDLE h, DAT_EXTENDED_OP op, ...)
{
    va_list ap;
    va_start(ap, op);
    DAT_RETURN rc = p->handle_extendedop_func(h, op, ap);
    va_end(ap);
    return rc;
}

START_TEST(bad_handles)
{
    struct fx f;
    setup(&f, "t-dto-h", DAT_COMPLETION_EVD_THRESHOLD_FLAG, DAT_COMPLETION_EVD_THRESHOLD_FLAG, 4);
    DAT_LMR_TRIPLET t = tri(f.lc, f.buf, 8);
    DAT_RMR_TRIPLET r = {0};
    DAT_HANDLE bad[] = {NULL, (DAT_HANDLE)0x10, f.pz, f.req};
    for (unsigned i = 0; i < 4; i++) {
        ck_assert_dat_err(f.p->ep_post_send_func(bad[i], 1, &t, ck(1), 0), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP);
        ck_assert_dat_err(f.p->ep_post_recv_func(bad[i], 1, &t, ck(1), 0), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP);
        ck_assert_dat_err(f.p->ep_post_rdma_read_func(bad[i], 1, &t, ck(1), &r, 0), DAT_INVALID_HANDLE,
                          DAT_INVALID_HANDLE_EP);
        ck_assert_dat_err(f.p->ep_post_rdma_write_func(bad[i], 1, &t, ck(1), &r, 0), DAT_INVALID_HANDLE,
                          DAT_INVALID_HANDLE_EP);
        ck_assert_dat_err(f.p->ep_post_send_with_invalidate_func(bad[i], 1, &t, ck(1), 0, DAT_FALSE, 0),
                          DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP);
        ck_assert_dat_err(f.p->ep_post_rdma_read_to_rmr_func(bad[i], &r, ck(1), &r, 0), DAT_INVALID_HANDLE,
                          DAT_INVALID_HANDLE_EP);
    }
    /* Slot 80: a DTO op on a non-EP handle. */
    ck_assert_dat_err(ext(f.p, f.pz, DAT_IB_RDMA_WRITE_IMMED_OP, (DAT_COUNT)1, &t, ck(1), &r, (DAT_UINT32)7,
                          (DAT_COMPLETION_FLAGS)0),
                      DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP);
    /* Counters exist for IAs, EPs and EVDs, not PZs (test_counters). */
    ck_assert_dat_err(ext(f.p, f.pz, DAT_IB_QUERY_COUNTERS_OP, 0, NULL, 0), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE1);
    ck_assert_dat_err(ext(f.p, f.pz, DAT_IB_COLLECTIVE_BARRIER_OP, NULL, (DAT_DTO_COOKIE){0}, 0),
                      DAT_NOT_IMPLEMENTED, 0);
    ck_assert_dat_err(ext(f.p, (DAT_HANDLE)0x10, DAT_IB_QUERY_COUNTERS_OP, 0, NULL, 0), DAT_INVALID_HANDLE,
                      DAT_INVALID_HANDLE1);
    teardown(&f);
}
END_TEST

START_TEST(request_states)
{
    struct fx f;
    setup(&f, "t-dto-s", DAT_COMPLETION_EVD_THRESHOLD_FLAG, DAT_COMPLETION_EVD_THRESHOLD_FLAG, 4);
    DAT_LMR_TRIPLET t = tri(f.lc, f.buf, 8);
    DAT_RMR_TRIPLET r = {.rmr_context = f.rc, .virtual_address = (DAT_VADDR)(uintptr_t)f.buf, .segment_length = 8};
    struct {
        DAT_EP_STATE s;
        DAT_UINT32 sub;
    } st[] = {
        {DAT_EP_STATE_UNCONNECTED, DAT_INVALID_STATE_EP_UNCONNECTED},
        {DAT_EP_STATE_ACTIVE_CONNECTION_PENDING, DAT_INVALID_STATE_EP_ACTCONNPENDING},
        {DAT_EP_STATE_PASSIVE_CONNECTION_PENDING, DAT_INVALID_STATE_EP_PASSCONNPENDING},
        {DAT_EP_STATE_COMPLETION_PENDING, DAT_INVALID_STATE_EP_COMPLPENDING},
        {DAT_EP_STATE_DISCONNECT_PENDING, DAT_INVALID_STATE_EP_DISCPENDING},
        {DAT_EP_STATE_RESERVED, DAT_INVALID_STATE_EP_RESERVED},
    };
    for (unsigned i = 0; i < sizeof st / sizeof st[0]; i++) {
        force_state(&f, st[i].s);
        ck_assert_dat_err(f.p->ep_post_send_func(f.ep, 1, &t, ck(1), 0), DAT_INVALID_STATE, st[i].sub);
        ck_assert_dat_err(f.p->ep_post_rdma_read_func(f.ep, 1, &t, ck(1), &r, 0), DAT_INVALID_STATE, st[i].sub);
        ck_assert_dat_err(f.p->ep_post_rdma_write_func(f.ep, 1, &t, ck(1), &r, 0), DAT_INVALID_STATE, st[i].sub);
        ck_assert_dat_err(f.p->ep_post_send_with_invalidate_func(f.ep, 1, &t, ck(1), 0, DAT_TRUE, 5),
                          DAT_INVALID_STATE, st[i].sub);
        ck_assert_dat_err(ext(f.p, f.ep, DAT_IB_RDMA_WRITE_IMMED_OP, (DAT_COUNT)1, &t, ck(1), &r, (DAT_UINT32)7,
                              (DAT_COMPLETION_FLAGS)0),
                          DAT_INVALID_STATE, st[i].sub);
        /* State is checked before the arguments. */
        ck_assert_dat_err(f.p->ep_post_send_func(f.ep, 99, NULL, ck(1), 0xFF), DAT_INVALID_STATE, st[i].sub);
    }
    assert_empty(&f, f.req);
    teardown(&f);
}
END_TEST

/* Disconnected: arguments are still checked; good posts succeed and
 * complete FLUSHED at once, after what was outstanding. */
START_TEST(disconnected_posts_flush_in_order)
{
    struct fx f;
    setup(&f, "t-dto-d", DAT_COMPLETION_EVD_THRESHOLD_FLAG, DAT_COMPLETION_EVD_THRESHOLD_FLAG, 4);
    DAT_LMR_TRIPLET t = tri(f.lc, f.buf, 8);
    DAT_RMR_TRIPLET r = {.rmr_context = f.rc, .virtual_address = (DAT_VADDR)(uintptr_t)f.buf, .segment_length = 8};
    /* Receives posted while unconnected stay queued. */
    ck_assert_dat_ok(f.p->ep_post_recv_func(f.ep, 1, &t, ck(100), 0));
    ck_assert_dat_ok(f.p->ep_post_recv_func(f.ep, 0, NULL, ck(101), 0));
    assert_empty(&f, f.rcv);
    /* The connection is over but the EP has not flushed yet: posts made
     * now must complete after the receives above. */
    force_state(&f, DAT_EP_STATE_DISCONNECTED);
    ck_assert_dat_ok(f.p->ep_post_recv_func(f.ep, 1, &t, ck(102), 0));
    ck_assert_dat_ok(f.p->ep_post_send_func(f.ep, 1, &t, ck(1), DAT_COMPLETION_SUPPRESS_FLAG));
    assert_empty(&f, f.rcv);
    assert_empty(&f, f.req);
    sd_ep_dto_flush((struct sd_ep *)f.ep);
    for (uint64_t c = 100; c <= 102; c++) {
        DAT_DTO_COMPLETION_EVENT_DATA d = deq(&f, f.rcv);
        ck_assert_uint_eq(d.user_cookie.as_64, c);
        ck_assert_int_eq(d.status, DAT_DTO_ERR_FLUSHED);
        ck_assert_ptr_eq(d.ep_handle, f.ep);
    }
    assert_empty(&f, f.rcv);
    /* Errors are reported even for SUPPRESSed posts. */
    DAT_DTO_COMPLETION_EVENT_DATA d = deq(&f, f.req);
    ck_assert_uint_eq(d.user_cookie.as_64, 1);
    ck_assert_int_eq(d.status, DAT_DTO_ERR_FLUSHED);
    ck_assert_int_eq(d.operation, DAT_DTO_SEND);
    /* After the flush, posts complete at once, in order. */
    ck_assert_dat_ok(f.p->ep_post_rdma_write_func(f.ep, 1, &t, ck(2), &r, 0));
    ck_assert_dat_ok(f.p->ep_post_rdma_read_func(f.ep, 1, &t, ck(3), &r, DAT_COMPLETION_BARRIER_FENCE_FLAG));
    ck_assert_dat_ok(f.p->ep_post_send_with_invalidate_func(f.ep, 0, NULL, ck(4), 0, DAT_TRUE, 77));
    ck_assert_dat_ok(f.p->ep_post_recv_func(f.ep, 2, (DAT_LMR_TRIPLET[]){t, t}, ck(103), 0));
    d = deq(&f, f.req);
    ck_assert_uint_eq(d.user_cookie.as_64, 2);
    ck_assert_int_eq(d.status, DAT_DTO_ERR_FLUSHED);
    d = deq(&f, f.req);
    ck_assert_uint_eq(d.user_cookie.as_64, 3);
    d = deq(&f, f.req);
    ck_assert_uint_eq(d.user_cookie.as_64, 4);
    d = deq(&f, f.rcv);
    ck_assert_uint_eq(d.user_cookie.as_64, 103);
    ck_assert_int_eq(d.status, DAT_DTO_ERR_FLUSHED);
    /* Bad arguments are still refused synchronously. */
    ck_assert_dat_err(f.p->ep_post_send_func(f.ep, 4, &t, ck(5), 0), DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    ck_assert_dat_err(f.p->ep_post_send_func(f.ep, 1, &t, ck(5), DAT_COMPLETION_UNSIGNALLED_FLAG),
                      DAT_INVALID_PARAMETER, DAT_INVALID_ARG5);
    assert_empty(&f, f.req);
    assert_empty(&f, f.rcv);
    /* Reset: fresh QP, Unconnected; sends refused again, receives queue. */
    ck_assert_dat_ok(f.p->ep_reset_func(f.ep));
    ck_assert_dat_err(f.p->ep_post_send_func(f.ep, 1, &t, ck(6), 0), DAT_INVALID_STATE,
                      DAT_INVALID_STATE_EP_UNCONNECTED);
    for (int i = 0; i < 4; i++)
        ck_assert_dat_ok(f.p->ep_post_recv_func(f.ep, 1, &t, ck(200 + i), 0));
    ck_assert_dat_err(f.p->ep_post_recv_func(f.ep, 1, &t, ck(204), 0), DAT_INSUFFICIENT_RESOURCES,
                      DAT_RESOURCE_TEP);
    assert_empty(&f, f.rcv);
    teardown(&f);
}
END_TEST

START_TEST(recv_argument_checks)
{
    struct fx f;
    setup(&f, "t-dto-r", DAT_COMPLETION_EVD_THRESHOLD_FLAG, DAT_COMPLETION_EVD_THRESHOLD_FLAG, 8);
    DAT_LMR_TRIPLET t = tri(f.lc, f.buf, 8);
    /* num_segments against max_recv_iov (2). */
    ck_assert_dat_err(f.p->ep_post_recv_func(f.ep, 3, (DAT_LMR_TRIPLET[]){t, t, t}, ck(1), 0),
                      DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    ck_assert_dat_err(f.p->ep_post_recv_func(f.ep, -1, &t, ck(1), 0), DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    ck_assert_dat_err(f.p->ep_post_recv_func(f.ep, 1, NULL, ck(1), 0), DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    /* Flags: no SUPPRESS on a receive; no UNSIGNALLED on a threshold EP. */
    ck_assert_dat_err(f.p->ep_post_recv_func(f.ep, 1, &t, ck(1), DAT_COMPLETION_SUPPRESS_FLAG), DAT_INVALID_PARAMETER,
                      DAT_INVALID_ARG5);
    ck_assert_dat_err(f.p->ep_post_recv_func(f.ep, 1, &t, ck(1), DAT_COMPLETION_UNSIGNALLED_FLAG),
                      DAT_INVALID_PARAMETER, DAT_INVALID_ARG5);
    ck_assert_dat_err(f.p->ep_post_recv_func(f.ep, 1, &t, ck(1), DAT_COMPLETION_SOLICITED_WAIT_FLAG),
                      DAT_INVALID_PARAMETER, DAT_INVALID_ARG5);
    /* Local iovec: out of the LMR, other PZ, no LOCAL_WRITE, unknown. */
    DAT_LMR_TRIPLET out = tri(f.lc, f.buf + BUF - 4, 8);
    ck_assert_dat_err(f.p->ep_post_recv_func(f.ep, 1, &out, ck(1), 0), DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    DAT_LMR_TRIPLET opz = tri(f.lc_pz2, f.buf, 8);
    ck_assert_dat_err(f.p->ep_post_recv_func(f.ep, 1, &opz, ck(1), 0), DAT_PROTECTION_VIOLATION, 0);
    DAT_LMR_TRIPLET ro = tri(f.lc_ro, f.buf, 8);
    ck_assert_dat_err(f.p->ep_post_recv_func(f.ep, 1, &ro, ck(1), 0), DAT_PRIVILEGES_VIOLATION, 0);
    DAT_LMR_TRIPLET unk = tri(0x12345678, f.buf, 8);
    ck_assert_dat_err(f.p->ep_post_recv_func(f.ep, 1, &unk, ck(1), 0), DAT_PRIVILEGES_VIOLATION, 0);
    /* Zero-length segments are not validated (their other fields may be
     * garbage). */
    DAT_LMR_TRIPLET z = tri(0xdeadbeef, (void *)1, 0);
    ck_assert_dat_ok(f.p->ep_post_recv_func(f.ep, 2, (DAT_LMR_TRIPLET[]){z, t}, ck(1), 0));
    /* Nothing failed left a slot behind: 7 more fit, then full. */
    for (int i = 0; i < 7; i++)
        ck_assert_dat_ok(f.p->ep_post_recv_func(f.ep, 1, &t, ck(10 + i), 0));
    ck_assert_dat_err(f.p->ep_post_recv_func(f.ep, 1, &t, ck(20), 0), DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEP);
    assert_empty(&f, f.rcv);
    teardown(&f);
}
END_TEST

START_TEST(request_argument_checks)
{
    struct fx f;
    setup(&f, "t-dto-a", DAT_COMPLETION_EVD_THRESHOLD_FLAG, DAT_COMPLETION_EVD_THRESHOLD_FLAG, 4);
    force_state(&f, DAT_EP_STATE_DISCONNECTED);
    sd_ep_dto_flush((struct sd_ep *)f.ep);
    DAT_LMR_TRIPLET t = tri(f.lc, f.buf, 8);
    DAT_LMR_TRIPLET v[4] = {t, t, t, t};
    DAT_RMR_TRIPLET r = {.rmr_context = f.rc, .virtual_address = (DAT_VADDR)(uintptr_t)f.buf, .segment_length = 8};
    /* Per-operation iov limits: request 3, read 1, write 2. */
    ck_assert_dat_err(f.p->ep_post_send_func(f.ep, 4, v, ck(1), 0), DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    ck_assert_dat_err(f.p->ep_post_rdma_read_func(f.ep, 2, v, ck(1), &r, 0), DAT_INVALID_PARAMETER,
                      DAT_INVALID_ARG2);
    ck_assert_dat_err(f.p->ep_post_rdma_write_func(f.ep, 3, v, ck(1), &r, 0), DAT_INVALID_PARAMETER,
                      DAT_INVALID_ARG2);
    ck_assert_dat_err(f.p->ep_post_rdma_write_func(f.ep, 1, &t, ck(1), NULL, 0), DAT_INVALID_PARAMETER,
                      DAT_INVALID_ARG5);
    /* Flags per operation. */
    ck_assert_dat_err(f.p->ep_post_rdma_write_func(f.ep, 1, &t, ck(1), &r, DAT_COMPLETION_SOLICITED_WAIT_FLAG),
                      DAT_INVALID_PARAMETER, DAT_INVALID_ARG6);
    ck_assert_dat_err(f.p->ep_post_rdma_read_func(f.ep, 1, &t, ck(1), &r, DAT_COMPLETION_EVD_THRESHOLD_FLAG),
                      DAT_INVALID_PARAMETER, DAT_INVALID_ARG6);
    ck_assert_dat_err(f.p->ep_post_send_with_invalidate_func(f.ep, 1, &t, ck(1), 0, 7, 1), DAT_INVALID_PARAMETER,
                      DAT_INVALID_ARG6);
    /* Sources need LOCAL_READ, sinks LOCAL_WRITE. */
    DAT_LMR_TRIPLET ro = tri(f.lc_ro, f.buf, 8);
    ck_assert_dat_ok(f.p->ep_post_send_func(f.ep, 1, &ro, ck(1), 0));
    ck_assert_dat_ok(f.p->ep_post_rdma_write_func(f.ep, 1, &ro, ck(2), &r, 0));
    ck_assert_dat_err(f.p->ep_post_rdma_read_func(f.ep, 1, &ro, ck(3), &r, 0), DAT_PRIVILEGES_VIOLATION, 0);
    DAT_LMR_TRIPLET opz = tri(f.lc_pz2, f.buf, 8);
    ck_assert_dat_err(f.p->ep_post_send_func(f.ep, 1, &opz, ck(3), 0), DAT_PROTECTION_VIOLATION, 0);
    /* Over max_message_size is not a synchronous error. */
    DAT_DTO_COMPLETION_EVENT_DATA d = deq(&f, f.req);
    ck_assert_uint_eq(d.user_cookie.as_64, 1);
    ck_assert_int_eq(d.operation, DAT_DTO_SEND);
    d = deq(&f, f.req);
    ck_assert_uint_eq(d.user_cookie.as_64, 2);
    ck_assert_int_eq(d.operation, DAT_DTO_RDMA_WRITE);
    assert_empty(&f, f.req);
    teardown(&f);
}
END_TEST

/* UNSIGNALLED request EP: allowed, and its events are queued without
 * notification (a notify-config waiter is not woken by them). */
START_TEST(unsignalled_ep)
{
    struct fx f;
    setup(&f, "t-dto-u", DAT_COMPLETION_UNSIGNALLED_FLAG, DAT_COMPLETION_UNSIGNALLED_FLAG, 4);
    force_state(&f, DAT_EP_STATE_DISCONNECTED);
    sd_ep_dto_flush((struct sd_ep *)f.ep);
    DAT_LMR_TRIPLET t = tri(f.lc, f.buf, 8);
    ck_assert_dat_ok(f.p->ep_post_send_func(f.ep, 1, &t, ck(1), DAT_COMPLETION_UNSIGNALLED_FLAG));
    ck_assert_dat_ok(f.p->ep_post_recv_func(f.ep, 1, &t, ck(2), DAT_COMPLETION_UNSIGNALLED_FLAG));
    ck_assert_dat_err(f.p->ep_post_recv_func(f.ep, 1, &t, ck(2), DAT_COMPLETION_SUPPRESS_FLAG), DAT_INVALID_PARAMETER,
                      DAT_INVALID_ARG5);
    DAT_DTO_COMPLETION_EVENT_DATA d = deq(&f, f.req);
    ck_assert_uint_eq(d.user_cookie.as_64, 1);
    d = deq(&f, f.rcv);
    ck_assert_uint_eq(d.user_cookie.as_64, 2);
    teardown(&f);
}
END_TEST

START_TEST(rmr_bind_checks)
{
    struct fx f;
    setup(&f, "t-dto-b", DAT_COMPLETION_EVD_THRESHOLD_FLAG, DAT_COMPLETION_EVD_THRESHOLD_FLAG, 4);
    DAT_RMR_HANDLE rmr, rmr2, rmr_ep;
    ck_assert_dat_ok(f.p->rmr_create_func(f.pz, &rmr));
    ck_assert_dat_ok(f.p->rmr_create_func(f.pz2, &rmr2));
    ck_assert_dat_ok(f.p->rmr_create_for_ep_func(f.pz, &rmr_ep));
    ck_assert_dat_err(f.p->rmr_create_for_ep_func(f.pz, NULL), DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    DAT_RMR_PARAM rp;
    ck_assert_dat_ok(f.p->rmr_query_func(rmr_ep, DAT_RMR_FIELD_ALL, &rp));
    ck_assert_int_eq(rp.rmr_scope, DAT_RMR_SCOPE_EP);
    DAT_LMR_TRIPLET t = tri(f.lc, f.buf, 64);
    DAT_RMR_CONTEXT ctx = 0;
    DAT_RMR_COOKIE c = ck(9);
    /* Unconnected: invalid state. */
    ck_assert_dat_err(f.p->rmr_bind_func(rmr, f.lmr, &t, DAT_MEM_PRIV_REMOTE_WRITE_FLAG, DAT_VA_TYPE_VA, f.ep, c, 0,
                                         &ctx),
                      DAT_INVALID_STATE, DAT_INVALID_STATE_EP_UNCONNECTED);
    force_state(&f, DAT_EP_STATE_DISCONNECTED);
    sd_ep_dto_flush((struct sd_ep *)f.ep);
    ck_assert_dat_err(f.p->rmr_bind_func(f.pz, f.lmr, &t, 0x20, DAT_VA_TYPE_VA, f.ep, c, 0, &ctx), DAT_INVALID_HANDLE,
                      DAT_INVALID_HANDLE_RMR);
    ck_assert_dat_err(f.p->rmr_bind_func(rmr, f.lmr, &t, 0x20, DAT_VA_TYPE_VA, f.pz, c, 0, &ctx), DAT_INVALID_HANDLE,
                      DAT_INVALID_HANDLE_EP);
    ck_assert_dat_err(f.p->rmr_bind_func(rmr, f.pz, &t, 0x20, DAT_VA_TYPE_VA, f.ep, c, 0, &ctx), DAT_INVALID_HANDLE,
                      DAT_INVALID_HANDLE_LMR);
    ck_assert_dat_err(f.p->rmr_bind_func(rmr, f.lmr, NULL, 0x20, DAT_VA_TYPE_VA, f.ep, c, 0, &ctx),
                      DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    ck_assert_dat_err(f.p->rmr_bind_func(rmr, f.lmr, &t, 0x100, DAT_VA_TYPE_VA, f.ep, c, 0, &ctx),
                      DAT_INVALID_PARAMETER, DAT_INVALID_ARG4);
    ck_assert_dat_err(f.p->rmr_bind_func(rmr, f.lmr, &t, 0x20, (DAT_VA_TYPE)7, f.ep, c, 0, &ctx),
                      DAT_INVALID_PARAMETER, DAT_INVALID_ARG5);
    ck_assert_dat_err(f.p->rmr_bind_func(rmr, f.lmr, &t, 0x20, DAT_VA_TYPE_VA, f.ep, c,
                                         DAT_COMPLETION_SOLICITED_WAIT_FLAG, &ctx),
                      DAT_INVALID_PARAMETER, DAT_INVALID_ARG8);
    ck_assert_dat_err(f.p->rmr_bind_func(rmr, f.lmr, &t, 0x20, DAT_VA_TYPE_VA, f.ep, c, 0, NULL),
                      DAT_INVALID_PARAMETER, DAT_INVALID_ARG9);
    /* PZ mismatch, rights not backed by the LMR, range outside it. */
    ck_assert_dat_err(f.p->rmr_bind_func(rmr2, f.lmr, &t, 0x20, DAT_VA_TYPE_VA, f.ep, c, 0, &ctx),
                      DAT_PROTECTION_VIOLATION, 0);
    DAT_LMR_TRIPLET tro = tri(f.lc_ro, f.buf, 64);
    ck_assert_dat_err(f.p->rmr_bind_func(rmr, f.lmr_ro, &tro, DAT_MEM_PRIV_REMOTE_WRITE_FLAG, DAT_VA_TYPE_VA, f.ep, c,
                                         0, &ctx),
                      DAT_PRIVILEGES_VIOLATION, 0);
    DAT_LMR_TRIPLET big = tri(f.lc, f.buf + 64, BUF);
    ck_assert_dat_err(f.p->rmr_bind_func(rmr, f.lmr, &big, 0x20, DAT_VA_TYPE_VA, f.ep, c, 0, &ctx),
                      DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    assert_empty(&f, f.req);
    /* A good bind in Disconnected: accepted, completes FLUSHED as an RMR
     * bind event; the context is returned at once. */
    ck_assert_dat_ok(f.p->rmr_bind_func(rmr, f.lmr_ro, &tro, DAT_MEM_PRIV_ALL_FLAG & ~DAT_MEM_PRIV_REMOTE_WRITE_FLAG,
                                        DAT_VA_TYPE_VA, f.ep, c, DAT_COMPLETION_SUPPRESS_FLAG, &ctx));
    ck_assert_uint_ne(ctx, 0);
    DAT_EVENT ev;
    ck_assert_dat_ok(f.p->evd_dequeue_func(f.req, &ev));
    ck_assert_uint_eq(ev.event_number, DAT_RMR_BIND_COMPLETION_EVENT);
    ck_assert_ptr_eq(ev.event_data.rmr_completion_event_data.rmr_handle, rmr);
    ck_assert_uint_eq(ev.event_data.rmr_completion_event_data.user_cookie.as_64, 9);
    ck_assert_int_eq(ev.event_data.rmr_completion_event_data.status, DAT_DTO_ERR_FLUSHED);
    /* Unbind (length 0) needs no LMR. */
    DAT_LMR_TRIPLET zero = tri(0, NULL, 0);
    ck_assert_dat_ok(f.p->rmr_bind_func(rmr, NULL, &zero, 0, DAT_VA_TYPE_VA, f.ep, c, 0, &ctx));
    ck_assert_dat_ok(f.p->evd_dequeue_func(f.req, &ev));
    ck_assert_uint_eq(ev.event_number, DAT_RMR_BIND_COMPLETION_EVENT);
    ck_assert_dat_ok(f.p->rmr_free_func(rmr));
    teardown(&f);
}
END_TEST

/* Slot 80 DTOs: the va_arg order of abi §2.6 and the extended event
 * layout, seen through flushed completions (Disconnected EP). */
START_TEST(extension_ops)
{
    struct fx f;
    setup(&f, "t-dto-x", DAT_COMPLETION_EVD_THRESHOLD_FLAG, DAT_COMPLETION_EVD_THRESHOLD_FLAG, 4);
    force_state(&f, DAT_EP_STATE_DISCONNECTED);
    sd_ep_dto_flush((struct sd_ep *)f.ep);
    DAT_LMR_TRIPLET t = tri(f.lc, f.buf, 64), v8 = tri(f.lc, f.buf + 64, 8), v7 = tri(f.lc, f.buf + 64, 7);
    DAT_RMR_TRIPLET r = {.rmr_context = f.rc, .virtual_address = (DAT_VADDR)(uintptr_t)f.buf, .segment_length = 64};
    ck_assert_dat_ok(ext(f.p, f.ep, DAT_IB_RDMA_WRITE_IMMED_OP, (DAT_COUNT)1, &t, ck(0x9999), &r,
                         (DAT_UINT32)0x7777, (DAT_COMPLETION_FLAGS)DAT_COMPLETION_SUPPRESS_FLAG));
    ck_assert_dat_ok(ext(f.p, f.ep, DAT_IB_FETCH_AND_ADD_OP, (DAT_UINT64)5, &v8, ck(0x1111), &r,
                         (DAT_COMPLETION_FLAGS)0));
    ck_assert_dat_ok(ext(f.p, f.ep, DAT_IB_CMP_AND_SWAP_OP, (DAT_UINT64)1, (DAT_UINT64)2, &v8, ck(0x2222), &r,
                         (DAT_COMPLETION_FLAGS)0));
    /* Argument errors, by position. */
    ck_assert_dat_err(ext(f.p, f.ep, DAT_IB_RDMA_WRITE_IMMED_OP, (DAT_COUNT)9, &t, ck(1), &r, (DAT_UINT32)1,
                          (DAT_COMPLETION_FLAGS)0),
                      DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    ck_assert_dat_err(ext(f.p, f.ep, DAT_IB_RDMA_WRITE_IMMED_OP, (DAT_COUNT)1, &t, ck(1), &r, (DAT_UINT32)1,
                          (DAT_COMPLETION_FLAGS)DAT_COMPLETION_UNSIGNALLED_FLAG),
                      DAT_INVALID_PARAMETER, DAT_INVALID_ARG6);
    ck_assert_dat_err(ext(f.p, f.ep, DAT_IB_FETCH_AND_ADD_OP, (DAT_UINT64)5, &v7, ck(1), &r, (DAT_COMPLETION_FLAGS)0),
                      DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    ck_assert_dat_err(ext(f.p, f.ep, DAT_IB_CMP_AND_SWAP_OP, (DAT_UINT64)1, (DAT_UINT64)2, &v8, ck(1), NULL,
                          (DAT_COMPLETION_FLAGS)0),
                      DAT_INVALID_PARAMETER, DAT_INVALID_ARG5);
    struct {
        uint64_t cookie;
        DAT_IB_EXT_TYPE type;
        int op;
    } want[] = {{0x9999, DAT_IB_RDMA_WRITE_IMMED, DAT_IB_DTO_RDMA_WRITE_IMMED},
                {0x1111, DAT_IB_FETCH_AND_ADD, DAT_IB_DTO_FETCH_ADD},
                {0x2222, DAT_IB_CMP_AND_SWAP, DAT_IB_DTO_CMP_SWAP}};
    for (unsigned i = 0; i < 3; i++) {
        DAT_EVENT ev;
        ck_assert_dat_ok(f.p->evd_dequeue_func(f.req, &ev));
        ck_assert_uint_eq(ev.event_number, DAT_IB_DTO_EVENT);
        DAT_DTO_COMPLETION_EVENT_DATA *d = &ev.event_data.dto_completion_event_data;
        ck_assert_uint_eq(d->user_cookie.as_64, want[i].cookie);
        ck_assert_int_eq(d->status, DAT_DTO_ERR_FLUSHED);
        ck_assert_int_eq((int)d->operation, want[i].op);
        ck_assert_ptr_eq(d->ep_handle, f.ep);
        DAT_IB_EXTENSION_EVENT_DATA *x = (DAT_IB_EXTENSION_EVENT_DATA *)(void *)ev.event_extension_data;
        ck_assert_int_eq(x->type, want[i].type);
        ck_assert_int_eq(x->status, DAT_IB_OP_ERR);
    }
    assert_empty(&f, f.req);
    teardown(&f);
}
END_TEST

START_TEST(free_drops_streams)
{
    /* Freeing an EP with posted receives: nothing is posted to the EVDs
     * after the EP is gone (L6032), and nothing leaks. */
    struct fx f;
    setup(&f, "t-dto-f", DAT_COMPLETION_EVD_THRESHOLD_FLAG, DAT_COMPLETION_EVD_THRESHOLD_FLAG, 4);
    DAT_LMR_TRIPLET t = tri(f.lc, f.buf, 8);
    for (int i = 0; i < 4; i++)
        ck_assert_dat_ok(f.p->ep_post_recv_func(f.ep, 1, &t, ck(i), 0));
    ck_assert_dat_ok(f.p->ep_free_func(f.ep));
    assert_empty(&f, f.rcv);
    ck_assert_dat_err(f.p->ep_post_recv_func(f.ep, 1, &t, ck(9), 0), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP);
    teardown(&f);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("dto_post");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, bad_handles);
    tcase_add_test(tc, request_states);
    tcase_add_test(tc, disconnected_posts_flush_in_order);
    tcase_add_test(tc, recv_argument_checks);
    tcase_add_test(tc, request_argument_checks);
    tcase_add_test(tc, unsignalled_ep);
    tcase_add_test(tc, rmr_bind_checks);
    tcase_add_test(tc, extension_ops);
    tcase_add_test(tc, free_drops_streams);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
