/* Shared receive queues through the provider table: dat_srq_* argument
 * and state checks, slot accounting, low watermark events,
 * dat_ep_create_with_srq / ep_post_recv / ep_recv_query / ep_set_watermark
 * on SRQ EPs, and, over real loopback connections between two IAs of this
 * process, the spec's worked example for available/outstanding counts
 * (L5053), buffers shared by several EPs, the low watermark fired by an
 * EP taking a buffer, FLUSHED completions on disconnect with SRQ-resident
 * buffers staying, the EP_BROKEN async event (once per connection), and a
 * Send finding no buffer (Terminate, BROKEN). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "lib/provider/ep.h"
#include "lib/provider/lmr.h"
#include "lib/provider/srq.h"
#include "test/lib/prov_fixture.h"

#define BUF 65536
#define MSG 256

struct side {
    DAT_PROVIDER *p;
    DAT_IA_HANDLE ia;
    DAT_EVD_HANDLE async;
    DAT_PZ_HANDLE pz, pz2;
    DAT_EVD_HANDLE cr, conn, req, rcv;
    DAT_LMR_HANDLE lmr, lmr_ro, lmr_pz2;
    DAT_LMR_CONTEXT lc, lc_ro, lc_pz2;
    char *buf;
};

static void mk_lmr(struct side *s, DAT_PZ_HANDLE pz, DAT_MEM_PRIV_FLAGS priv, DAT_LMR_HANDLE *lmr,
                   DAT_LMR_CONTEXT *lc)
{
    DAT_REGION_DESCRIPTION rd;
    rd.for_va = s->buf;
    DAT_VLEN sz;
    DAT_VADDR va;
    DAT_RMR_CONTEXT rc;
    ck_assert_dat_ok(s->p->lmr_create_func(s->ia, DAT_MEM_TYPE_VIRTUAL, rd, BUF, pz, priv, DAT_VA_TYPE_VA, lmr, lc,
                                           &rc, &sz, &va));
}

static void side_open(struct side *s, const char *name)
{
    memset(s, 0, sizeof *s);
    s->p = fx_provider(name, "lo iwarp", DAT_FALSE) /* the worked example ends on iWARP's no-buffer break */;
    sd_lmr_fill_table(s->p); /* until provider.c assembles it */
    s->ia = fx_open(s->p, &s->async);
    ck_assert_dat_ok(s->p->pz_create_func(s->ia, &s->pz));
    ck_assert_dat_ok(s->p->pz_create_func(s->ia, &s->pz2));
    ck_assert_dat_ok(s->p->evd_create_func(s->ia, 16, NULL, DAT_EVD_CR_FLAG, &s->cr));
    ck_assert_dat_ok(s->p->evd_create_func(s->ia, 32, NULL, DAT_EVD_CONNECTION_FLAG, &s->conn));
    ck_assert_dat_ok(s->p->evd_create_func(s->ia, 256, NULL, DAT_EVD_DTO_FLAG, &s->req));
    ck_assert_dat_ok(s->p->evd_create_func(s->ia, 256, NULL, DAT_EVD_DTO_FLAG, &s->rcv));
    s->buf = aligned_alloc(64, BUF);
    memset(s->buf, 0, BUF);
    mk_lmr(s, s->pz, DAT_MEM_PRIV_ALL_FLAG, &s->lmr, &s->lc);
    mk_lmr(s, s->pz, DAT_MEM_PRIV_LOCAL_READ_FLAG, &s->lmr_ro, &s->lc_ro);
    mk_lmr(s, s->pz2, DAT_MEM_PRIV_ALL_FLAG, &s->lmr_pz2, &s->lc_pz2);
}

static void side_close(struct side *s)
{
    ck_assert_dat_ok(s->p->ia_close_func(s->ia, DAT_CLOSE_ABRUPT_FLAG));
    free(s->buf);
}

static DAT_SRQ_HANDLE mk_srq(struct side *s, DAT_COUNT n, DAT_COUNT iov)
{
    DAT_SRQ_ATTR a = {.max_recv_dtos = n, .max_recv_iov = iov, .low_watermark = DAT_SRQ_LW_DEFAULT};
    DAT_SRQ_HANDLE srq = DAT_HANDLE_NULL;
    ck_assert_dat_ok(s->p->srq_create_func(s->ia, s->pz, &a, &srq));
    return srq;
}

static void srq_attr_default(DAT_EP_ATTR *a)
{
    memset(a, 0, sizeof *a);
    a->service_type = DAT_SERVICE_TYPE_RC;
    a->max_message_size = BUF;
    a->max_rdma_size = BUF;
    a->qos = DAT_QOS_BEST_EFFORT;
    a->recv_completion_flags = DAT_COMPLETION_DEFAULT_FLAG;
    a->request_completion_flags = DAT_COMPLETION_DEFAULT_FLAG;
    a->max_recv_dtos = DAT_HW_DEFAULT;
    a->max_request_dtos = 64;
    a->max_recv_iov = 0;
    a->max_request_iov = 4;
    a->srq_soft_hw = DAT_HW_DEFAULT;
}

static DAT_EP_HANDLE mk_srq_ep(struct side *s, DAT_PZ_HANDLE pz, DAT_SRQ_HANDLE srq)
{
    DAT_EP_ATTR a;
    srq_attr_default(&a);
    DAT_EP_HANDLE ep = DAT_HANDLE_NULL;
    ck_assert_dat_ok(s->p->ep_create_with_srq_func(s->ia, pz, s->rcv, s->req, s->conn, srq, &a, &ep));
    return ep;
}

static DAT_RETURN post(struct side *s, DAT_SRQ_HANDLE srq, DAT_LMR_CONTEXT lc, size_t off, DAT_VLEN len,
                       uint64_t cookie)
{
    DAT_LMR_TRIPLET t = {.lmr_context = lc, .virtual_address = (DAT_VADDR)(uintptr_t)(s->buf + off),
                         .segment_length = len};
    DAT_DTO_COOKIE c = {.as_64 = cookie};
    return s->p->srq_post_recv_func(srq, 1, &t, c);
}

static DAT_SRQ_PARAM srq_q(struct side *s, DAT_SRQ_HANDLE srq)
{
    DAT_SRQ_PARAM prm;
    memset(&prm, 0x5a, sizeof prm);
    ck_assert_dat_ok(s->p->srq_query_func(srq, DAT_SRQ_FIELD_ALL, &prm));
    return prm;
}

static DAT_EVENT wait_ev(struct side *s, DAT_EVD_HANDLE evd, DAT_EVENT_NUMBER want)
{
    DAT_EVENT ev;
    DAT_COUNT n = 0;
    memset(&ev, 0, sizeof ev);
    DAT_RETURN rc = s->p->evd_wait_func(evd, 5000000, 1, &ev, &n);
    ck_assert_msg(rc == DAT_SUCCESS, "evd_wait: 0x%x (want event 0x%x)", (unsigned)rc, (unsigned)want);
    ck_assert_msg(ev.event_number == want, "event 0x%x, want 0x%x", (unsigned)ev.event_number, (unsigned)want);
    return ev;
}

static void no_event(struct side *s, DAT_EVD_HANDLE evd, DAT_TIMEOUT us)
{
    DAT_EVENT ev;
    DAT_COUNT n = 0;
    DAT_RETURN rc = s->p->evd_wait_func(evd, us, 1, &ev, &n);
    ck_assert_msg(DAT_GET_TYPE(rc) == DAT_TIMEOUT_EXPIRED, "unexpected 0x%x (event 0x%x)", (unsigned)rc,
                  (unsigned)ev.event_number);
}

static void expect_lw(struct side *s, DAT_SRQ_HANDLE srq)
{
    DAT_EVENT ev = wait_ev(s, s->async, SD_SRQ_ASYNC_EVENT);
    ck_assert_ptr_eq(ev.event_data.asynch_error_event_data.dat_handle, srq);
    ck_assert_int_eq(ev.event_data.asynch_error_event_data.reason, DAT_SRQ_LOW_WATERMARK_EVENT);
}

/* ------------------------------------------------------------ local */

START_TEST(create_errors)
{
    struct side s;
    side_open(&s, "t-srq-create");
    DAT_PROVIDER *p = s.p;
    DAT_SRQ_ATTR a = {.max_recv_dtos = 8, .max_recv_iov = 2, .low_watermark = 0};
    DAT_SRQ_HANDLE srq;
    ck_assert_dat_err(p->srq_create_func(NULL, s.pz, &a, &srq), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);
    ck_assert_dat_err(p->srq_create_func(s.ia, NULL, &a, &srq), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_PZ);
    ck_assert_dat_err(p->srq_create_func(s.ia, s.rcv, &a, &srq), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_PZ);
    ck_assert_dat_err(p->srq_create_func(s.ia, s.pz, NULL, &srq), DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    ck_assert_dat_err(p->srq_create_func(s.ia, s.pz, &a, NULL), DAT_INVALID_PARAMETER, DAT_INVALID_ARG4);
    DAT_SRQ_ATTR bad[] = {
        {0, 1, 0}, {-1, 1, 0}, {SD_MAX_RECV_PER_SRQ + 1, 1, 0}, {8, -1, 0}, {8, SD_MAX_IOV_PER_DTO + 1, 0},
        {8, 1, -1}, {8, 1, 9},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ck_assert_dat_err(p->srq_create_func(s.ia, s.pz, &bad[i], &srq), DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    /* A PZ of another IA. */
    struct side o;
    side_open(&o, "t-srq-create2");
    ck_assert_dat_err(p->srq_create_func(s.ia, o.pz, &a, &srq), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_PZ);
    side_close(&o);
    /* The limits: max_recv_per_srq and max_iov accepted, max_srqs per IA. */
    DAT_SRQ_ATTR big = {SD_MAX_RECV_PER_SRQ, SD_MAX_IOV_PER_DTO, 0};
    ck_assert_dat_ok(p->srq_create_func(s.ia, s.pz, &big, &srq));
    DAT_SRQ_PARAM q = srq_q(&s, srq);
    ck_assert_int_eq(q.max_recv_dtos, SD_MAX_RECV_PER_SRQ);
    ck_assert_int_eq(q.max_recv_iov, SD_MAX_IOV_PER_DTO);
    ck_assert_dat_ok(p->srq_free_func(srq));
    DAT_IA_ATTR ia_attr;
    ck_assert_dat_ok(p->ia_query_func(s.ia, NULL, DAT_IA_FIELD_ALL, &ia_attr, 0, NULL));
    ck_assert_int_eq(ia_attr.max_srqs, SD_MAX_SRQS);
    ck_assert_int_eq(ia_attr.max_recv_per_srq, SD_MAX_RECV_PER_SRQ);
    static DAT_SRQ_HANDLE all[SD_MAX_SRQS];
    DAT_SRQ_ATTR one = {1, 1, 0};
    for (int i = 0; i < SD_MAX_SRQS; i++)
        ck_assert_dat_ok(p->srq_create_func(s.ia, s.pz, &one, &all[i]));
    ck_assert_dat_err(p->srq_create_func(s.ia, s.pz, &one, &srq), DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_SRQ);
    /* The PZ is in use while SRQs exist. */
    ck_assert_dat_err(p->pz_free_func(s.pz), DAT_INVALID_STATE, DAT_INVALID_STATE_PZ_IN_USE);
    for (int i = 0; i < SD_MAX_SRQS; i++)
        ck_assert_dat_ok(p->srq_free_func(all[i]));
    /* Freed handles are stale. */
    ck_assert_dat_err(p->srq_free_func(all[0]), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_SRQ);
    ck_assert_dat_err(p->srq_query_func(all[1], DAT_SRQ_FIELD_ALL, &q), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_SRQ);
    ck_assert_dat_err(p->srq_free_func(NULL), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_SRQ);
    ck_assert_dat_err(p->srq_free_func(s.pz), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_SRQ);
    side_close(&s);
}
END_TEST

START_TEST(query_post_resize)
{
    struct side s;
    side_open(&s, "t-srq-post");
    DAT_PROVIDER *p = s.p;
    DAT_SRQ_HANDLE srq = mk_srq(&s, 4, 2);
    DAT_SRQ_PARAM q = srq_q(&s, srq);
    ck_assert_ptr_eq(q.ia_handle, s.ia);
    ck_assert_int_eq(q.srq_state, DAT_SRQ_STATE_OPERATIONAL);
    ck_assert_int_eq((int)q.srq_state, 1); /* deployed numbering */
    ck_assert_ptr_eq(q.pz_handle, s.pz);
    ck_assert_int_eq(q.max_recv_dtos, 4);
    ck_assert_int_eq(q.max_recv_iov, 2);
    ck_assert_int_eq(q.low_watermark, 0);
    ck_assert_int_eq(q.available_dto_count, 0);
    ck_assert_int_eq(q.outstanding_dto_count, 0);
    ck_assert_dat_err(p->srq_query_func(srq, (DAT_SRQ_PARAM_MASK)0x100, &q), DAT_INVALID_PARAMETER,
                      DAT_INVALID_ARG2);
    ck_assert_dat_err(p->srq_query_func(srq, DAT_SRQ_FIELD_ALL, NULL), DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);

    /* Post errors: nothing taken. */
    DAT_LMR_TRIPLET t3[3];
    for (int i = 0; i < 3; i++)
        t3[i] = (DAT_LMR_TRIPLET){.lmr_context = s.lc, .virtual_address = (DAT_VADDR)(uintptr_t)s.buf, .segment_length = 16};
    DAT_DTO_COOKIE c = {.as_64 = 1};
    ck_assert_dat_err(p->srq_post_recv_func(srq, 3, t3, c), DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    ck_assert_dat_err(p->srq_post_recv_func(srq, -1, t3, c), DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    ck_assert_dat_err(p->srq_post_recv_func(srq, 1, NULL, c), DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    ck_assert_dat_err(post(&s, srq, s.lc, BUF - 8, 16, 1), DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    ck_assert_int_eq(ERRT(post(&s, srq, s.lc_pz2, 0, 16, 1)), DAT_PROTECTION_VIOLATION);
    ck_assert_int_eq(ERRT(post(&s, srq, s.lc_ro, 0, 16, 1)), DAT_PRIVILEGES_VIOLATION);
    ck_assert_int_eq(ERRT(post(&s, srq, 0xdead00, 0, 16, 1)), DAT_PRIVILEGES_VIOLATION);
    ck_assert_dat_err(p->srq_post_recv_func(NULL, 1, t3, c), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_SRQ);
    ck_assert_int_eq(srq_q(&s, srq).outstanding_dto_count, 0);

    /* Fill it: 2 segments, 0 segments (zero-length message), 1 segment. */
    ck_assert_dat_ok(p->srq_post_recv_func(srq, 2, t3, c));
    ck_assert_dat_ok(p->srq_post_recv_func(srq, 0, NULL, c));
    ck_assert_dat_ok(post(&s, srq, s.lc, 0, 16, 2));
    ck_assert_dat_ok(post(&s, srq, s.lc, 16, 16, 3));
    ck_assert_dat_err(post(&s, srq, s.lc, 32, 16, 4), DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_SRQ);
    q = srq_q(&s, srq);
    ck_assert_int_eq(q.available_dto_count, 4);
    ck_assert_int_eq(q.outstanding_dto_count, 4);

    /* Resize: never below what is outstanding or the low watermark. */
    ck_assert_dat_err(p->srq_resize_func(srq, 0), DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    ck_assert_dat_err(p->srq_resize_func(srq, SD_MAX_RECV_PER_SRQ + 1), DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    ck_assert_int_eq(ERRT(p->srq_resize_func(srq, 3)), DAT_INVALID_STATE);
    ck_assert_int_eq(srq_q(&s, srq).max_recv_dtos, 4);
    ck_assert_dat_ok(p->srq_resize_func(srq, 6));
    ck_assert_int_eq(srq_q(&s, srq).max_recv_dtos, 6);
    ck_assert_dat_ok(post(&s, srq, s.lc, 32, 16, 4));
    ck_assert_dat_ok(post(&s, srq, s.lc, 48, 16, 5));
    ck_assert_dat_err(post(&s, srq, s.lc, 64, 16, 6), DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_SRQ);
    ck_assert_int_eq(srq_q(&s, srq).available_dto_count, 6);
    ck_assert_dat_ok(p->srq_resize_func(srq, 6)); /* same size */
    ck_assert_dat_ok(p->srq_set_lw_func(srq, 6)); /* 6 buffers: not below, no event */
    no_event(&s, s.async, 20000);
    ck_assert_int_eq(ERRT(p->srq_resize_func(srq, 5)), DAT_INVALID_STATE);
    ck_assert_dat_ok(p->srq_set_lw_func(srq, 0));
    ck_assert_dat_ok(p->srq_resize_func(srq, 100));
    ck_assert_int_eq(srq_q(&s, srq).max_recv_dtos, 100);
    ck_assert_int_eq(srq_q(&s, srq).available_dto_count, 6);
    ck_assert_dat_err(p->srq_resize_func(NULL, 8), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_SRQ);
    /* Buffers on a freed SRQ go back to the consumer. */
    ck_assert_dat_ok(p->srq_free_func(srq));
    side_close(&s);
}
END_TEST

START_TEST(low_watermark_local)
{
    struct side s;
    side_open(&s, "t-srq-lw");
    DAT_PROVIDER *p = s.p;
    DAT_SRQ_HANDLE srq = mk_srq(&s, 8, 1);
    ck_assert_dat_err(p->srq_set_lw_func(srq, 9), DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    ck_assert_dat_err(p->srq_set_lw_func(srq, -1), DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    ck_assert_dat_err(p->srq_set_lw_func(NULL, 1), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_SRQ);
    /* Already below: fires inside the call, once. */
    ck_assert_dat_ok(p->srq_set_lw_func(srq, 2));
    expect_lw(&s, srq);
    ck_assert_int_eq(srq_q(&s, srq).low_watermark, 2);
    for (int i = 0; i < 4; i++)
        ck_assert_dat_ok(post(&s, srq, s.lc, 64 * (size_t)i, 64, (uint64_t)i));
    no_event(&s, s.async, 20000);
    /* Re-arming fires again only if below. */
    ck_assert_dat_ok(p->srq_set_lw_func(srq, 4));
    no_event(&s, s.async, 20000);
    ck_assert_dat_ok(p->srq_set_lw_func(srq, 5));
    expect_lw(&s, srq);
    ck_assert_dat_ok(p->srq_set_lw_func(srq, 5));
    expect_lw(&s, srq);
    no_event(&s, s.async, 20000);
    /* Resize below the watermark is refused. */
    ck_assert_int_eq(ERRT(p->srq_resize_func(srq, 4)), DAT_INVALID_STATE);
    ck_assert_dat_ok(p->srq_free_func(srq));
    /* A non-default watermark at create fires at once (empty SRQ). */
    DAT_SRQ_ATTR a = {.max_recv_dtos = 4, .max_recv_iov = 1, .low_watermark = 1};
    ck_assert_dat_ok(p->srq_create_func(s.ia, s.pz, &a, &srq));
    expect_lw(&s, srq);
    ck_assert_dat_ok(p->srq_free_func(srq));
    side_close(&s);
}
END_TEST

START_TEST(error_state)
{
    struct side s;
    side_open(&s, "t-srq-err");
    DAT_PROVIDER *p = s.p;
    DAT_SRQ_HANDLE srq = mk_srq(&s, 4, 1);
    sd_srq_test_set_state((struct sd_srq *)srq, DAT_SRQ_STATE_ERROR);
    DAT_SRQ_PARAM q;
    ck_assert_dat_err(p->srq_query_func(srq, DAT_SRQ_FIELD_ALL, &q), DAT_INVALID_STATE, DAT_INVALID_STATE_SRQ_ERROR);
    ck_assert_dat_err(p->srq_resize_func(srq, 8), DAT_INVALID_STATE, DAT_INVALID_STATE_SRQ_ERROR);
    ck_assert_dat_err(p->srq_set_lw_func(srq, 1), DAT_INVALID_STATE, DAT_INVALID_STATE_SRQ_ERROR);
    /* Allowed in Error: post_recv, ep_create_with_srq, ep_recv_query,
     * ep_set_watermark, free. */
    ck_assert_dat_ok(post(&s, srq, s.lc, 0, 64, 1));
    DAT_EP_HANDLE ep = mk_srq_ep(&s, s.pz, srq);
    DAT_COUNT nb = -5, span = -5;
    ck_assert_dat_ok(p->ep_recv_query_func(ep, &nb, &span));
    ck_assert_dat_ok(p->ep_set_watermark_func(ep, DAT_WATERMARK_INFINITE, DAT_WATERMARK_INFINITE));
    ck_assert_dat_ok(p->ep_free_func(ep));
    ck_assert_dat_ok(p->srq_free_func(srq));
    side_close(&s);
}
END_TEST

START_TEST(ep_with_srq_local)
{
    struct side s;
    side_open(&s, "t-srq-ep");
    DAT_PROVIDER *p = s.p;
    DAT_SRQ_HANDLE srq = mk_srq(&s, 8, 1);
    DAT_EP_ATTR a;
    srq_attr_default(&a);
    DAT_EP_HANDLE ep;
    ck_assert_dat_err(p->ep_create_with_srq_func(NULL, s.pz, s.rcv, s.req, s.conn, srq, &a, &ep),
                      DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);
    ck_assert_dat_err(p->ep_create_with_srq_func(s.ia, s.pz, s.rcv, s.req, s.conn, NULL, &a, &ep),
                      DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_SRQ);
    ck_assert_dat_err(p->ep_create_with_srq_func(s.ia, s.pz, s.rcv, s.req, s.conn, s.pz, &a, &ep),
                      DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_SRQ);
    ck_assert_dat_err(p->ep_create_with_srq_func(s.ia, s.pz, s.rcv, s.req, s.conn, srq, NULL, &ep),
                      DAT_INVALID_PARAMETER, DAT_INVALID_ARG7);
    ck_assert_dat_err(p->ep_create_with_srq_func(s.ia, s.pz, s.rcv, s.req, s.conn, srq, &a, NULL),
                      DAT_INVALID_PARAMETER, DAT_INVALID_ARG8);
    ck_assert_dat_err(p->ep_create_with_srq_func(s.ia, s.rcv, s.rcv, s.req, s.conn, srq, &a, &ep),
                      DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_PZ);
    ck_assert_dat_err(p->ep_create_with_srq_func(s.ia, s.pz, s.conn, s.req, s.conn, srq, &a, &ep),
                      DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_RECV);
    DAT_EP_ATTR b = a;
    b.service_type = 77;
    ck_assert_dat_err(p->ep_create_with_srq_func(s.ia, s.pz, s.rcv, s.req, s.conn, srq, &b, &ep),
                      DAT_INVALID_PARAMETER, DAT_INVALID_ARG7);
    /* High watermarks are not supported (srq_watermarks_supported). */
    DAT_PROVIDER_ATTR pa;
    ck_assert_dat_ok(p->ia_query_func(s.ia, NULL, 0, NULL, DAT_PROVIDER_FIELD_ALL, &pa));
    ck_assert_int_eq(pa.srq_supported, DAT_TRUE);
    ck_assert_int_eq(pa.srq_watermarks_supported, 0x001);
    ck_assert_int_eq(pa.srq_ep_pz_difference_supported, DAT_TRUE);
    /* Finite values are accepted as deployed consumers pass them (dtestsrq:
     * max_recv_dtos = burst, srq_soft_hw = 0), kept, and enforce nothing. */
    b = a;
    b.srq_soft_hw = 0;
    b.max_recv_dtos = 4;
    ck_assert_dat_ok(p->ep_create_with_srq_func(s.ia, s.pz, s.rcv, s.req, s.conn, srq, &b, &ep));
    DAT_EP_PARAM prm0;
    ck_assert_dat_ok(p->ep_query_func(ep, DAT_EP_FIELD_ALL, &prm0));
    ck_assert_int_eq(prm0.ep_attr.srq_soft_hw, 0);
    ck_assert_int_eq(prm0.ep_attr.max_recv_dtos, 4);
    /* Its receive queue is the SRQ's: ep_modify may not resize it (L6316). */
    prm0.ep_attr.max_recv_dtos = 8;
    ck_assert_dat_err(p->ep_modify_func(ep, DAT_EP_FIELD_EP_ATTR_MAX_RECV_DTOS, &prm0), DAT_INVALID_PARAMETER,
                      DAT_INVALID_ARG3);
    ck_assert_dat_ok(p->ep_free_func(ep));
    b = a;
    b.srq_soft_hw = -3;
    ck_assert_dat_err(p->ep_create_with_srq_func(s.ia, s.pz, s.rcv, s.req, s.conn, srq, &b, &ep),
                      DAT_INVALID_PARAMETER, DAT_INVALID_ARG7);
    b = a;
    b.max_recv_dtos = -3;
    ck_assert_dat_err(p->ep_create_with_srq_func(s.ia, s.pz, s.rcv, s.req, s.conn, srq, &b, &ep),
                      DAT_INVALID_PARAMETER, DAT_INVALID_ARG7);
    /* max_recv_iov is ignored. */
    b = a;
    b.max_recv_iov = 1000;
    ck_assert_dat_ok(p->ep_create_with_srq_func(s.ia, s.pz, s.rcv, s.req, s.conn, srq, &b, &ep));
    ck_assert_dat_ok(p->ep_free_func(ep));
    /* EP PZ different from the SRQ's: supported. */
    DAT_EP_HANDLE ep2 = mk_srq_ep(&s, s.pz2, srq);
    ep = mk_srq_ep(&s, s.pz, srq);
    DAT_EP_PARAM prm;
    ck_assert_dat_ok(p->ep_query_func(ep, DAT_EP_FIELD_ALL, &prm));
    ck_assert_ptr_eq(prm.srq_handle, srq);
    ck_assert_int_eq(prm.ep_state, DAT_EP_STATE_UNCONNECTED);
    ck_assert_int_eq(prm.ep_attr.srq_soft_hw, DAT_HW_DEFAULT);
    ck_assert_int_eq(prm.ep_attr.max_recv_dtos, DAT_HW_DEFAULT);
    /* post_recv on an SRQ EP (L7336). */
    DAT_LMR_TRIPLET t = {.lmr_context = s.lc, .virtual_address = (DAT_VADDR)(uintptr_t)s.buf, .segment_length = 16};
    DAT_DTO_COOKIE c = {.as_64 = 1};
    ck_assert_dat_err(p->ep_post_recv_func(ep, 1, &t, c, DAT_COMPLETION_DEFAULT_FLAG), DAT_INVALID_STATE,
                      DAT_INVALID_STATE_EP_UNCONNECTED);
    /* recv_query: unconnected SRQ EP holds nothing. */
    ck_assert_dat_ok(post(&s, srq, s.lc, 0, 64, 1));
    DAT_COUNT nb = -5, span = -5;
    ck_assert_dat_ok(p->ep_recv_query_func(ep, &nb, &span));
    ck_assert_int_eq(nb, 0);
    ck_assert_int_eq(span, 0);
    ck_assert_dat_ok(p->ep_recv_query_func(ep, NULL, NULL));
    /* set_watermark */
    ck_assert_dat_ok(p->ep_set_watermark_func(ep, DAT_WATERMARK_INFINITE, DAT_WATERMARK_INFINITE));
    ck_assert_int_eq(ERRT(p->ep_set_watermark_func(ep, 3, DAT_WATERMARK_INFINITE)), DAT_MODEL_NOT_SUPPORTED);
    ck_assert_int_eq(ERRT(p->ep_set_watermark_func(ep, DAT_WATERMARK_INFINITE, 3)), DAT_MODEL_NOT_SUPPORTED);
    ck_assert_dat_err(p->ep_set_watermark_func(ep, -7, DAT_WATERMARK_INFINITE), DAT_INVALID_PARAMETER,
                      DAT_INVALID_ARG2);
    ck_assert_dat_err(p->ep_set_watermark_func(ep, DAT_WATERMARK_INFINITE, -7), DAT_INVALID_PARAMETER,
                      DAT_INVALID_ARG3);
    ck_assert_dat_err(p->ep_set_watermark_func(NULL, 1, 1), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP);
    /* In use by EPs. */
    ck_assert_dat_err(p->srq_free_func(srq), DAT_INVALID_STATE, DAT_INVALID_STATE_SRQ_IN_USE);
    ck_assert_dat_ok(p->ep_free_func(ep));
    ck_assert_dat_err(p->srq_free_func(srq), DAT_INVALID_STATE, DAT_INVALID_STATE_SRQ_IN_USE);
    /* dat_ep_reset keeps the SRQ (L5748). */
    ck_assert_dat_ok(p->ep_reset_func(ep2));
    ck_assert_dat_ok(p->ep_query_func(ep2, DAT_EP_FIELD_SRQ_HANDLE, &prm));
    ck_assert_ptr_eq(prm.srq_handle, srq);
    ck_assert_dat_ok(p->ep_free_func(ep2));
    ck_assert_int_eq(srq_q(&s, srq).available_dto_count, 1);
    ck_assert_dat_ok(p->srq_free_func(srq));
    /* An SRQ of another IA. */
    struct side o;
    side_open(&o, "t-srq-ep2");
    DAT_SRQ_HANDLE osrq = mk_srq(&o, 4, 1);
    ck_assert_dat_err(p->ep_create_with_srq_func(s.ia, s.pz, s.rcv, s.req, s.conn, osrq, &a, &ep),
                      DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_SRQ);
    /* Abrupt IA close with an SRQ EP and its SRQ alive. */
    (void)mk_srq_ep(&o, o.pz, osrq);
    side_close(&o);
    side_close(&s);
}
END_TEST

/* Posts, queries, resizes and watermark re-arming from several threads
 * (run under TSan): every post is accounted, nothing is lost. */
struct conc {
    struct side *s;
    DAT_SRQ_HANDLE srq;
    int id, ok;
};

static void *conc_poster(void *arg)
{
    struct conc *c = arg;
    for (int i = 0; i < 256; i++) {
        if (post(c->s, c->srq, c->s->lc, (size_t)((c->id * 256 + i) % 1024) * 64, 64, (uint64_t)i) == DAT_SUCCESS)
            c->ok++;
        if (i % 32 == 0) {
            DAT_SRQ_PARAM q;
            c->s->p->srq_query_func(c->srq, DAT_SRQ_FIELD_ALL, &q);
            c->s->p->srq_set_lw_func(c->srq, 1);
        }
    }
    return NULL;
}

static void *conc_resizer(void *arg)
{
    struct conc *c = arg;
    for (int n = 600; n <= 1100; n += 100)
        if (c->s->p->srq_resize_func(c->srq, n) == DAT_SUCCESS)
            c->ok++;
    return NULL;
}

START_TEST(concurrent_post_query_resize)
{
    struct side s;
    side_open(&s, "t-srq-conc");
    DAT_SRQ_HANDLE srq = mk_srq(&s, 512, 1);
    struct conc c[5];
    pthread_t th[5];
    for (int i = 0; i < 5; i++) {
        c[i] = (struct conc){.s = &s, .srq = srq, .id = i};
        pthread_create(&th[i], NULL, i < 4 ? conc_poster : conc_resizer, &c[i]);
    }
    for (int i = 0; i < 5; i++)
        pthread_join(th[i], NULL);
    int posted = c[0].ok + c[1].ok + c[2].ok + c[3].ok;
    DAT_SRQ_PARAM q = srq_q(&s, srq);
    ck_assert_int_eq(c[4].ok, 6); /* growing always succeeds */
    ck_assert_int_eq(q.max_recv_dtos, 1100);
    ck_assert_int_ge(posted, 512);
    ck_assert_int_eq(q.available_dto_count, posted);
    ck_assert_int_eq(q.outstanding_dto_count, posted);
    ck_assert_dat_ok(s.p->srq_free_func(srq));
    side_close(&s);
}
END_TEST

/* ------------------------------------------------------------ connected */

static struct sockaddr_in lo_addr(void)
{
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return a;
}

/* The client (plain EP) connects to the server's EP (an SRQ EP). */
static void connect_pair(struct side *c, DAT_EP_HANDLE cep, struct side *s, DAT_EP_HANDLE sep)
{
    DAT_CONN_QUAL port;
    DAT_PSP_HANDLE psp;
    ck_assert_dat_ok(s->p->psp_create_any_func(s->ia, &port, s->cr, DAT_PSP_CONSUMER_FLAG, &psp));
    struct sockaddr_in a = lo_addr();
    ck_assert_dat_ok(c->p->ep_connect_func(cep, (DAT_IA_ADDRESS_PTR)&a, port, 5000000, 0, NULL,
                                           DAT_QOS_BEST_EFFORT, DAT_CONNECT_DEFAULT_FLAG));
    DAT_EVENT ev = wait_ev(s, s->cr, DAT_CONNECTION_REQUEST_EVENT);
    ck_assert_dat_ok(s->p->cr_accept_func(ev.event_data.cr_arrival_event_data.cr_handle, sep, 0, NULL));
    wait_ev(c, c->conn, DAT_CONNECTION_EVENT_ESTABLISHED);
    wait_ev(s, s->conn, DAT_CONNECTION_EVENT_ESTABLISHED);
    ck_assert_dat_ok(s->p->psp_free_func(psp));
}

static DAT_EP_HANDLE mk_plain_ep(struct side *s)
{
    DAT_EP_HANDLE ep = DAT_HANDLE_NULL;
    ck_assert_dat_ok(s->p->ep_create_func(s->ia, s->pz, s->rcv, s->req, s->conn, NULL, &ep));
    return ep;
}

static void send_msg(struct side *c, DAT_EP_HANDLE ep, size_t off, DAT_VLEN len, uint64_t cookie)
{
    DAT_LMR_TRIPLET t = {.lmr_context = c->lc, .virtual_address = (DAT_VADDR)(uintptr_t)(c->buf + off), .segment_length = len};
    DAT_DTO_COOKIE ck = {.as_64 = cookie};
    ck_assert_dat_ok(c->p->ep_post_send_func(ep, 1, &t, ck, DAT_COMPLETION_DEFAULT_FLAG));
    DAT_EVENT ev = wait_ev(c, c->req, DAT_DTO_COMPLETION_EVENT);
    ck_assert_int_eq(ev.event_data.dto_completion_event_data.status, DAT_DTO_SUCCESS);
    ck_assert_uint_eq(ev.event_data.dto_completion_event_data.user_cookie.as_64, cookie);
}

/* Poll the SRQ until `avail` buffers are left on it (the receive side
 * runs on the server's engine thread). */
static void wait_avail(struct side *s, DAT_SRQ_HANDLE srq, DAT_COUNT avail)
{
    for (int i = 0; i < 500; i++) {
        if (srq_q(s, srq).available_dto_count == avail)
            return;
        usleep(2000);
    }
    ck_abort_msg("available_dto_count stuck at %d, want %d", srq_q(s, srq).available_dto_count, avail);
}

START_TEST(worked_example_and_sharing)
{
    struct side cl, sv;
    side_open(&cl, "t-srq-cl");
    side_open(&sv, "t-srq-sv");
    DAT_SRQ_HANDLE srq = mk_srq(&sv, 10, 1);
    DAT_EP_HANDLE sep[3], cep[3];
    for (int i = 0; i < 3; i++) {
        sep[i] = mk_srq_ep(&sv, i == 2 ? sv.pz2 : sv.pz, srq); /* one with a different PZ */
        cep[i] = mk_plain_ep(&cl);
        connect_pair(&cl, cep[i], &sv, sep[i]);
    }
    /* L5053: 10 entries, post 3 -> avail 3 / outstanding 3. */
    for (int i = 0; i < 3; i++)
        ck_assert_dat_ok(post(&sv, srq, sv.lc, (size_t)i * MSG, MSG, 100 + (uint64_t)i));
    DAT_SRQ_PARAM q = srq_q(&sv, srq);
    ck_assert_int_eq(q.max_recv_dtos, 10);
    ck_assert_int_eq(q.available_dto_count, 3);
    ck_assert_int_eq(q.outstanding_dto_count, 3);
    /* A Send arrives -> avail 2 / outstanding 3 (completion unreaped). */
    for (int j = 0; j < MSG; j++)
        cl.buf[j] = (char)(j ^ 0x5a);
    send_msg(&cl, cep[1], 0, MSG, 1);
    wait_avail(&sv, srq, 2);
    q = srq_q(&sv, srq);
    ck_assert_int_eq(q.available_dto_count, 2);
    ck_assert_int_eq(q.outstanding_dto_count, 3);
    /* Resize below outstanding is refused even though only 2 are on it. */
    ck_assert_int_eq(ERRT(sv.p->srq_resize_func(srq, 2)), DAT_INVALID_STATE);
    /* Consumer reaps -> avail 2 / outstanding 2. */
    DAT_EVENT ev = wait_ev(&sv, sv.rcv, DAT_DTO_COMPLETION_EVENT);
    const DAT_DTO_COMPLETION_EVENT_DATA *d = &ev.event_data.dto_completion_event_data;
    ck_assert_int_eq(d->status, DAT_DTO_SUCCESS);
    ck_assert_ptr_eq(d->ep_handle, sep[1]);
    ck_assert_int_eq(d->operation, DAT_DTO_RECEIVE);
    ck_assert_uint_eq(d->transfered_length, MSG);
    ck_assert_uint_eq(d->user_cookie.as_64, 100); /* the first buffer posted */
    for (int j = 0; j < MSG; j++)
        ck_assert_int_eq(sv.buf[j], (char)(j ^ 0x5a));
    q = srq_q(&sv, srq);
    ck_assert_int_eq(q.available_dto_count, 2);
    ck_assert_int_eq(q.outstanding_dto_count, 2);
    ck_assert_dat_ok(sv.p->srq_resize_func(srq, 2)); /* now allowed */
    ck_assert_dat_ok(sv.p->srq_resize_func(srq, 10));

    /* The other two buffers go to the other two EPs (EP 2 with a PZ
     * different from the SRQ's); low watermark 2 fires when EP 0 takes
     * one. */
    ck_assert_dat_ok(sv.p->srq_set_lw_func(srq, 2));
    no_event(&sv, sv.async, 20000);
    for (int j = 0; j < MSG; j++)
        cl.buf[MSG + j] = (char)(j + 7);
    send_msg(&cl, cep[0], MSG, 64, 2);
    expect_lw(&sv, srq);
    send_msg(&cl, cep[2], MSG, MSG, 3);
    wait_avail(&sv, srq, 0);
    ck_assert_int_eq(srq_q(&sv, srq).outstanding_dto_count, 2);
    bool seen0 = false, seen2 = false;
    for (int k = 0; k < 2; k++) {
        ev = wait_ev(&sv, sv.rcv, DAT_DTO_COMPLETION_EVENT);
        d = &ev.event_data.dto_completion_event_data;
        ck_assert_int_eq(d->status, DAT_DTO_SUCCESS);
        char *b = sv.buf + (size_t)(d->user_cookie.as_64 - 100) * MSG;
        if (d->ep_handle == sep[0]) {
            seen0 = true;
            ck_assert_uint_eq(d->transfered_length, 64);
        } else {
            ck_assert_ptr_eq(d->ep_handle, sep[2]);
            seen2 = true;
            ck_assert_uint_eq(d->transfered_length, MSG);
        }
        for (unsigned j = 0; j < d->transfered_length; j++)
            ck_assert_int_eq(b[j], (char)(j + 7));
    }
    ck_assert(seen0 && seen2);
    q = srq_q(&sv, srq);
    ck_assert_int_eq(q.available_dto_count, 0);
    ck_assert_int_eq(q.outstanding_dto_count, 0);
    no_event(&sv, sv.async, 20000); /* once per arming */

    /* Disconnect EP 0 from the client side: the server EP gets
     * DISCONNECTED and exactly one EP_BROKEN async event; buffers on the
     * SRQ stay there. */
    ck_assert_dat_ok(post(&sv, srq, sv.lc, 0, MSG, 200));
    ck_assert_dat_ok(cl.p->ep_disconnect_func(cep[0], DAT_CLOSE_GRACEFUL_FLAG));
    wait_ev(&cl, cl.conn, DAT_CONNECTION_EVENT_DISCONNECTED);
    ev = wait_ev(&sv, sv.conn, DAT_CONNECTION_EVENT_DISCONNECTED);
    ck_assert_ptr_eq(ev.event_data.connect_event_data.ep_handle, sep[0]);
    ev = wait_ev(&sv, sv.async, DAT_ASYNC_ERROR_EP_BROKEN);
    ck_assert_ptr_eq(ev.event_data.asynch_error_event_data.dat_handle, sep[0]);
    no_event(&sv, sv.async, 50000);
    no_event(&sv, sv.rcv, 1000); /* the SRQ buffer was not flushed */
    ck_assert_int_eq(srq_q(&sv, srq).available_dto_count, 1);

    /* Server-side disconnect of EP 1: one EP_BROKEN too. */
    ck_assert_dat_ok(sv.p->ep_disconnect_func(sep[1], DAT_CLOSE_ABRUPT_FLAG));
    ev = wait_ev(&sv, sv.conn, DAT_CONNECTION_EVENT_DISCONNECTED);
    ck_assert_ptr_eq(ev.event_data.connect_event_data.ep_handle, sep[1]);
    ev = wait_ev(&sv, sv.async, DAT_ASYNC_ERROR_EP_BROKEN);
    ck_assert_ptr_eq(ev.event_data.asynch_error_event_data.dat_handle, sep[1]);
    no_event(&sv, sv.async, 50000);

    /* Recv query on a connected SRQ EP holding nothing. */
    DAT_COUNT nb = -5, span = -5;
    ck_assert_dat_ok(sv.p->ep_recv_query_func(sep[2], &nb, &span));
    ck_assert_int_eq(nb, 0);
    ck_assert_int_eq(span, 0);

    /* Two Sends, one buffer: the second finds none -> Terminate, the
     * connection breaks (no RNR retry in iWARP). */
    send_msg(&cl, cep[2], 0, 32, 4);
    ev = wait_ev(&sv, sv.rcv, DAT_DTO_COMPLETION_EVENT);
    ck_assert_int_eq(ev.event_data.dto_completion_event_data.status, DAT_DTO_SUCCESS);
    ck_assert_uint_eq(ev.event_data.dto_completion_event_data.user_cookie.as_64, 200);
    DAT_LMR_TRIPLET t = {.lmr_context = cl.lc, .virtual_address = (DAT_VADDR)(uintptr_t)cl.buf, .segment_length = 32};
    DAT_DTO_COOKIE ck = {.as_64 = 5};
    ck_assert_dat_ok(cl.p->ep_post_send_func(cep[2], 1, &t, ck, DAT_COMPLETION_DEFAULT_FLAG));
    ev = wait_ev(&sv, sv.conn, DAT_CONNECTION_EVENT_BROKEN);
    ck_assert_ptr_eq(ev.event_data.connect_event_data.ep_handle, sep[2]);
    ev = wait_ev(&sv, sv.async, DAT_ASYNC_ERROR_EP_BROKEN);
    ck_assert_ptr_eq(ev.event_data.asynch_error_event_data.dat_handle, sep[2]);
    no_event(&sv, sv.async, 50000);
    ck_assert_int_eq(srq_q(&sv, srq).srq_state, DAT_SRQ_STATE_OPERATIONAL);

    for (int i = 0; i < 3; i++)
        ck_assert_dat_ok(sv.p->ep_free_func(sep[i]));
    ck_assert_dat_ok(sv.p->srq_free_func(srq));
    side_close(&cl);
    side_close(&sv);
}
END_TEST

/* Outstanding is exact at every instant, also while a completion is being
 * delivered: with nothing posted or reaped, each buffer is counted once
 * whether on the SRQ, held by an EP, being delivered, or queued in the
 * recv EVD. A thread queries without pause while the server's engine
 * delivers the receives. */
struct watch {
    struct side *s;
    DAT_SRQ_HANDLE srq;
    DAT_COUNT want;
    atomic_bool stop;
    atomic_int queries, wrong, last_wrong, errors;
};

static void *watch_outstanding(void *arg)
{
    struct watch *w = arg;
    while (!atomic_load(&w->stop)) {
        DAT_SRQ_PARAM prm;
        if (w->s->p->srq_query_func(w->srq, DAT_SRQ_FIELD_ALL, &prm) != DAT_SUCCESS) {
            atomic_fetch_add(&w->errors, 1);
            continue;
        }
        atomic_fetch_add(&w->queries, 1);
        if (prm.outstanding_dto_count != w->want) {
            atomic_fetch_add(&w->wrong, 1);
            atomic_store(&w->last_wrong, prm.outstanding_dto_count);
        }
    }
    return NULL;
}

START_TEST(outstanding_exact_during_delivery)
{
    enum { N = 96 };
    struct side cl, sv;
    side_open(&cl, "t-srq-ex-cl");
    side_open(&sv, "t-srq-ex-sv");
    DAT_SRQ_HANDLE srq = mk_srq(&sv, N, 1);
    DAT_EP_HANDLE sep[2], cep[2];
    for (int i = 0; i < 2; i++) {
        sep[i] = mk_srq_ep(&sv, sv.pz, srq);
        cep[i] = mk_plain_ep(&cl);
        connect_pair(&cl, cep[i], &sv, sep[i]);
    }
    for (int i = 0; i < N; i++)
        ck_assert_dat_ok(post(&sv, srq, sv.lc, (size_t)i * 64, 64, 1000 + (uint64_t)i));
    struct watch w = {.s = &sv, .srq = srq, .want = N};
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, watch_outstanding, &w), 0);
    for (int i = 0; i < 5000 && atomic_load(&w.queries) == 0 && atomic_load(&w.errors) == 0; i++)
        usleep(1000); /* the watcher is running before the first Send */
    for (int i = 0; i < N; i++)
        send_msg(&cl, cep[i & 1], 0, 32, (uint64_t)i);
    wait_avail(&sv, srq, 0);
    atomic_store(&w.stop, true);
    pthread_join(th, NULL);
    ck_assert_int_eq(atomic_load(&w.errors), 0);
    ck_assert_int_gt(atomic_load(&w.queries), 0);
    ck_assert_msg(atomic_load(&w.wrong) == 0, "%d of %d queries wrong (last %d, want %d)", atomic_load(&w.wrong),
                  atomic_load(&w.queries), atomic_load(&w.last_wrong), N);
    ck_assert_int_eq(srq_q(&sv, srq).outstanding_dto_count, N);
    for (int i = 0; i < N; i++) {
        DAT_EVENT ev = wait_ev(&sv, sv.rcv, DAT_DTO_COMPLETION_EVENT);
        ck_assert_int_eq(ev.event_data.dto_completion_event_data.status, DAT_DTO_SUCCESS);
    }
    ck_assert_int_eq(srq_q(&sv, srq).outstanding_dto_count, 0);
    for (int i = 0; i < 2; i++)
        ck_assert_dat_ok(sv.p->ep_free_func(sep[i]));
    ck_assert_dat_ok(sv.p->srq_free_func(srq));
    side_close(&cl);
    side_close(&sv);
}
END_TEST

/* A CNO proxy agent runs inside the EVD post of an SRQ receive: a query
 * from it neither waits for that post (its own) nor counts the buffer
 * twice; the event is queued by then. */
struct agent_q {
    DAT_PROVIDER *p;
    DAT_SRQ_HANDLE srq;
    atomic_int calls;
    DAT_COUNT outstanding;
    DAT_RETURN rc;
    long us;
};

static void agent_query(DAT_PVOID data, DAT_EVD_HANDLE evd)
{
    (void)evd;
    struct agent_q *a = data;
    struct timespec t0, t1;
    DAT_SRQ_PARAM prm;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    a->rc = a->p->srq_query_func(a->srq, DAT_SRQ_FIELD_ALL, &prm);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    a->outstanding = prm.outstanding_dto_count;
    a->us = (t1.tv_sec - t0.tv_sec) * 1000000L + (t1.tv_nsec - t0.tv_nsec) / 1000;
    atomic_fetch_add(&a->calls, 1);
}

START_TEST(query_from_cno_agent)
{
    struct side cl, sv;
    side_open(&cl, "t-srq-ag-cl");
    side_open(&sv, "t-srq-ag-sv");
    DAT_SRQ_HANDLE srq = mk_srq(&sv, 8, 1);
    struct agent_q a = {.p = sv.p, .srq = srq};
    DAT_OS_WAIT_PROXY_AGENT agent = {.instance_data = &a, .proxy_agent_func = agent_query};
    DAT_CNO_HANDLE cno = DAT_HANDLE_NULL;
    ck_assert_dat_ok(sv.p->cno_create_func(sv.ia, agent, &cno));
    DAT_EVD_HANDLE rcv = DAT_HANDLE_NULL;
    ck_assert_dat_ok(sv.p->evd_create_func(sv.ia, 16, cno, DAT_EVD_DTO_FLAG, &rcv));
    DAT_EP_ATTR at;
    srq_attr_default(&at);
    DAT_EP_HANDLE sep = DAT_HANDLE_NULL;
    ck_assert_dat_ok(sv.p->ep_create_with_srq_func(sv.ia, sv.pz, rcv, sv.req, sv.conn, srq, &at, &sep));
    DAT_EP_HANDLE cep = mk_plain_ep(&cl);
    connect_pair(&cl, cep, &sv, sep);
    for (int i = 0; i < 3; i++)
        ck_assert_dat_ok(post(&sv, srq, sv.lc, (size_t)i * MSG, MSG, 300 + (uint64_t)i));
    send_msg(&cl, cep, 0, 16, 1);
    for (int i = 0; i < 5000 && atomic_load(&a.calls) == 0; i++)
        usleep(1000);
    ck_assert_int_eq(atomic_load(&a.calls), 1);
    ck_assert_dat_ok(a.rc);
    ck_assert_int_eq(a.outstanding, 3); /* 2 on the SRQ + 1 queued */
    ck_assert_msg(a.us < 500000, "query from the agent took %ld us", a.us);
    DAT_EVENT ev = wait_ev(&sv, rcv, DAT_DTO_COMPLETION_EVENT);
    ck_assert_uint_eq(ev.event_data.dto_completion_event_data.user_cookie.as_64, 300);
    ck_assert_int_eq(srq_q(&sv, srq).outstanding_dto_count, 2);
    ck_assert_dat_ok(sv.p->ep_free_func(sep));
    ck_assert_dat_ok(sv.p->evd_free_func(rcv));
    ck_assert_dat_ok(sv.p->cno_free_func(cno));
    ck_assert_dat_ok(sv.p->srq_free_func(srq));
    side_close(&cl);
    side_close(&sv);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("srq");
    TCase *tc = tcase_create("srq");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, create_errors);
    tcase_add_test(tc, query_post_resize);
    tcase_add_test(tc, low_watermark_local);
    tcase_add_test(tc, error_state);
    tcase_add_test(tc, ep_with_srq_local);
    tcase_add_test(tc, concurrent_post_query_resize);
    tcase_add_test(tc, worked_example_and_sharing);
    tcase_add_test(tc, outstanding_exact_during_delivery);
    tcase_add_test(tc, query_from_cno_agent);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
