/* IB extension unreliable datagrams through the provider (two IAs of one
 * record on 127.0.0.1): the address exchange and its extended connection
 * events, dat_ib_post_send_ud and UD receives (bytes after the GRH, the
 * source AH), the length refusal, drops counted, the misuse errors, reject
 * and no-listener outcomes, ud_cm_free / ud_ah_free. */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <dat2/dat_ib_extensions.h>

#include "lib/provider/ep_ud.h"
#include "lib/provider/limits.h"
#include "lib/provider/psp.h"
#include "test/lib/rc_pair.h"

static struct rp_side C, S;
static DAT_PSP_HANDLE PSP;
static DAT_CONN_QUAL PORT;

static void setup(void)
{
    DAT_PROVIDER *p = fx_provider("softdat-ud-test", "lo", DAT_FALSE);
    rp_side_open(&C, p);
    rp_side_open(&S, p);
    ck_assert_dat_ok(p->psp_create_any_func(S.ia, &PORT, S.cr, DAT_PSP_CONSUMER_FLAG, &PSP));
}

static void teardown(void)
{
    rp_side_close(&C);
    rp_side_close(&S);
}

static void ud_attr(DAT_EP_ATTR *a)
{
    rp_attr(a, DAT_COMPLETION_EVD_THRESHOLD_FLAG, DAT_COMPLETION_EVD_THRESHOLD_FLAG);
    a->service_type = (DAT_SERVICE_TYPE)DAT_IB_SERVICE_TYPE_UD;
    a->max_rdma_read_in = a->max_rdma_read_out = 0;
}

static DAT_EP_HANDLE ud_ep(struct rp_side *s)
{
    DAT_EP_ATTR a;
    ud_attr(&a);
    return rp_ep(s, &a);
}

static DAT_RETURN ext(DAT_HANDLE h, int op, ...)
{
    va_list ap;
    va_start(ap, op);
    DAT_RETURN rc = C.p->handle_extendedop_func(h, (DAT_EXTENDED_OP)op, ap);
    va_end(ap);
    return rc;
}

static DAT_RETURN send_ud(DAT_EP_HANDLE ep, DAT_COUNT n, DAT_LMR_TRIPLET *l, DAT_IB_ADDR_HANDLE *ah,
                          uint64_t ck, DAT_COMPLETION_FLAGS f)
{
    return ext(ep, DAT_IB_UD_SEND_OP, n, l, ah, rp_ck(ck), f);
}

static const DAT_IB_EXTENSION_EVENT_DATA *xd(const DAT_EVENT *ev)
{
    return (const DAT_IB_EXTENSION_EVENT_DATA *)(const void *)ev->event_extension_data;
}

static void connect_to(DAT_EP_HANDLE cep, DAT_CONN_QUAL port, const char *pd)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    ck_assert_dat_ok(C.p->ep_connect_func(cep, (DAT_IA_ADDRESS_PTR)&a, port, 5000000, (DAT_COUNT)strlen(pd),
                                          (DAT_PVOID)pd, DAT_QOS_BEST_EFFORT, DAT_CONNECT_DEFAULT_FLAG));
}

/* One exchange cep -> sep; the AHs each side got. */
struct xchg {
    DAT_IB_ADDR_HANDLE cah, sah;
    void *ccm, *scm;
};

static struct xchg exchange(DAT_EP_HANDLE cep, DAT_EP_HANDLE sep)
{
    struct xchg x;
    connect_to(cep, PORT, "hello");
    DAT_EVENT ev = rp_wait(&S, S.cr, (DAT_EVENT_NUMBER)DAT_IB_UD_CONNECTION_REQUEST_EVENT);
    DAT_CR_HANDLE cr = ev.event_data.cr_arrival_event_data.cr_handle;
    ck_assert_int_eq(xd(&ev)->type, DAT_IB_UD_CONNECT_REQUEST);
    ck_assert_uint_eq(xd(&ev)->remote_ah.qpn, sd_ud_qpn((struct sd_ep *)cep)); /* the initiator */
    ck_assert_ptr_null(xd(&ev)->remote_ah.ah);
    DAT_CR_PARAM cp;
    ck_assert_dat_ok(S.p->cr_query_func(cr, DAT_CR_FIELD_ALL, &cp));
    ck_assert_int_eq(cp.private_data_size, 5); /* the UD header is not the consumer's */
    ck_assert_mem_eq(cp.private_data, "hello", 5);
    ck_assert_dat_ok(S.p->cr_accept_func(cr, sep, 3, (DAT_PVOID) "yes"));
    ev = rp_wait(&C, C.conn, (DAT_EVENT_NUMBER)DAT_IB_UD_CONNECTION_EVENT_ESTABLISHED);
    ck_assert_int_eq(xd(&ev)->type, DAT_IB_UD_REMOTE_AH);
    ck_assert_int_eq(xd(&ev)->status, DAT_OP_SUCCESS);
    ck_assert_ptr_eq(ev.event_data.connect_event_data.ep_handle, cep);
    ck_assert_int_eq(ev.event_data.connect_event_data.private_data_size, 3);
    ck_assert_mem_eq(ev.event_data.connect_event_data.private_data, "yes", 3);
    ck_assert_ptr_nonnull(xd(&ev)->remote_ah.ah);
    ck_assert_uint_eq(xd(&ev)->val.immed.data, SD_UD_QKEY);
    x.cah = xd(&ev)->remote_ah;
    x.ccm = xd(&ev)->context.as_ptr;
    ev = rp_wait(&S, S.conn, (DAT_EVENT_NUMBER)DAT_IB_UD_CONNECTION_EVENT_ESTABLISHED);
    ck_assert_int_eq(xd(&ev)->type, DAT_IB_UD_PASSIVE_REMOTE_AH);
    ck_assert_ptr_eq(ev.event_data.connect_event_data.ep_handle, sep);
    ck_assert_int_eq(ev.event_data.connect_event_data.private_data_size, 5);
    ck_assert_mem_eq(ev.event_data.connect_event_data.private_data, "hello", 5);
    x.sah = xd(&ev)->remote_ah;
    x.scm = xd(&ev)->context.as_ptr;
    ck_assert_ptr_nonnull(x.ccm);
    ck_assert_ptr_nonnull(x.scm);
    /* ia_addr: the peer's IP with its UD port, which is its QPN */
    const struct sockaddr_in *ia = (const struct sockaddr_in *)&x.cah.ia_addr;
    ck_assert_int_eq(ia->sin_family, AF_INET);
    ck_assert_uint_eq(ntohl(ia->sin_addr.s_addr), INADDR_LOOPBACK);
    ck_assert_uint_eq(ntohs(ia->sin_port), x.cah.qpn);
    return x;
}

static DAT_EVENT wait_dto(struct rp_side *s, DAT_EVD_HANDLE evd)
{
    return rp_wait(s, evd, (DAT_EVENT_NUMBER)DAT_IB_DTO_EVENT);
}

START_TEST(exchange_send_recv_both_ways)
{
    DAT_EP_HANDLE cep = ud_ep(&C), sep = ud_ep(&S);
    ck_assert_int_eq(rp_state(&C, cep), DAT_EP_STATE_UNCONNECTED);
    struct xchg x = exchange(cep, sep);
    ck_assert_int_eq(rp_state(&C, cep), DAT_EP_STATE_CONNECTED);
    ck_assert_int_eq(rp_state(&S, sep), DAT_EP_STATE_CONNECTED);
    /* each side's AH names the other's QPN */
    ck_assert_uint_eq(x.cah.qpn, sd_ud_qpn((struct sd_ep *)sep));
    ck_assert_uint_eq(x.sah.qpn, sd_ud_qpn((struct sd_ep *)cep));

    DAT_LMR_TRIPLET r = rp_tri(S.lc, S.buf, 40 + 100);
    DAT_BOOLEAN ri, qi;
    ck_assert_dat_ok(S.p->ep_get_status_func(sep, NULL, &ri, &qi));
    ck_assert_int_eq(ri, DAT_TRUE);
    ck_assert_dat_ok(S.p->ep_post_recv_func(sep, 1, &r, rp_ck(11), DAT_COMPLETION_DEFAULT_FLAG));
    DAT_COUNT nb = 0, span = 0;
    ck_assert_dat_ok(S.p->ep_recv_query_func(sep, &nb, &span));
    ck_assert_int_eq(nb, 1);
    ck_assert_dat_ok(S.p->ep_get_status_func(sep, NULL, &ri, &qi));
    ck_assert_int_eq(ri, DAT_FALSE);
    ck_assert_int_eq(qi, DAT_TRUE);
    memcpy(C.buf + 1000, "a datagram", 10);
    DAT_LMR_TRIPLET l = rp_tri(C.lc, C.buf + 1000, 10);
    ck_assert_dat_ok(send_ud(cep, 1, &l, &x.cah, 22, DAT_COMPLETION_DEFAULT_FLAG));
    DAT_EVENT ev = wait_dto(&C, C.req);
    DAT_DTO_COMPLETION_EVENT_DATA *d = &ev.event_data.dto_completion_event_data;
    ck_assert_int_eq(d->operation, DAT_IB_DTO_SEND_UD);
    ck_assert_int_eq(d->status, DAT_DTO_SUCCESS);
    ck_assert_uint_eq(d->user_cookie.as_64, 22);
    ck_assert_uint_eq(d->transfered_length, 10);
    ck_assert_int_eq(xd(&ev)->type, DAT_IB_UD_SEND);
    ev = wait_dto(&S, S.rcv);
    d = &ev.event_data.dto_completion_event_data;
    ck_assert_int_eq(d->operation, DAT_IB_DTO_RECV_UD);
    ck_assert_int_eq(d->status, DAT_DTO_SUCCESS);
    ck_assert_uint_eq(d->user_cookie.as_64, 11);
    ck_assert_uint_eq(d->transfered_length, 40 + 10); /* the GRH slot counts */
    ck_assert_mem_eq(S.buf + 40, "a datagram", 10);
    ck_assert_int_eq(xd(&ev)->type, DAT_IB_UD_RECV);
    ck_assert_uint_eq(xd(&ev)->remote_ah.qpn, x.sah.qpn);        /* source = the client */
    ck_assert_ptr_eq(xd(&ev)->remote_ah.ah, x.sah.ah);           /* the AH the server resolved */

    /* and back, with the passive side's AH */
    r = rp_tri(C.lc, C.buf, 40 + 100);
    ck_assert_dat_ok(C.p->ep_post_recv_func(cep, 1, &r, rp_ck(33), DAT_COMPLETION_DEFAULT_FLAG));
    memcpy(S.buf + 2000, "reply!", 6);
    l = rp_tri(S.lc, S.buf + 2000, 6);
    ck_assert_dat_ok(send_ud(sep, 1, &l, &x.sah, 44, DAT_COMPLETION_DEFAULT_FLAG));
    wait_dto(&S, S.req);
    ev = wait_dto(&C, C.rcv);
    ck_assert_uint_eq(ev.event_data.dto_completion_event_data.transfered_length, 46);
    ck_assert_mem_eq(C.buf + 40, "reply!", 6);

    /* a second exchange on the same EPs works too (UD EPs stay usable) */
    struct xchg y = exchange(cep, sep);
    ck_assert_ptr_ne(y.ccm, x.ccm);
    ck_assert_dat_ok(ext(cep, DAT_IB_UD_CM_FREE_OP, (DAT_CONTEXT){.as_ptr = x.ccm}));
    ck_assert_dat_ok(ext(sep, DAT_IB_UD_CM_FREE_OP, (DAT_CONTEXT){.as_ptr = x.scm}));
    ck_assert_dat_ok(ext(cep, DAT_IB_UD_AH_FREE_OP, &x.cah));
    ck_assert_dat_ok(ext(sep, DAT_IB_UD_AH_FREE_OP, &x.sah));
    ck_assert_dat_ok(C.p->ep_free_func(cep)); /* y's AH and CM go with the EP */
    ck_assert_dat_ok(S.p->ep_free_func(sep));
}
END_TEST

START_TEST(misuse_errors)
{
    DAT_EP_HANDLE cep = ud_ep(&C), sep = ud_ep(&S);
    struct xchg x = exchange(cep, sep);
    DAT_LMR_TRIPLET l = rp_tri(C.lc, C.buf, 16);
    /* post_send_ud on an RC EP: "ep_handle type is not UD" */
    DAT_EP_ATTR rc;
    rp_attr(&rc, DAT_COMPLETION_EVD_THRESHOLD_FLAG, DAT_COMPLETION_EVD_THRESHOLD_FLAG);
    DAT_EP_HANDLE rcep = rp_ep(&C, &rc);
    ck_assert_dat_err(send_ud(rcep, 1, &l, &x.cah, 1, 0), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP);
    /* RC operations on a UD EP */
    ck_assert_dat_err(C.p->ep_post_send_func(cep, 1, &l, rp_ck(1), 0), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP);
    DAT_RMR_TRIPLET rt = rp_rtri(1, C.buf, 16);
    ck_assert_dat_err(C.p->ep_post_rdma_write_func(cep, 1, &l, rp_ck(1), &rt, 0), DAT_INVALID_HANDLE,
                      DAT_INVALID_HANDLE_EP);
    /* over the UD MTU: refused at post */
    DAT_LMR_TRIPLET big = rp_tri(C.lc, C.buf, SD_TRANSPORT_MTU + 1);
    ck_assert_int_eq(ERRT(send_ud(cep, 1, &big, &x.cah, 1, 0)), DAT_LENGTH_ERROR);
    big.segment_length = SD_TRANSPORT_MTU;
    ck_assert_dat_ok(send_ud(cep, 1, &big, &x.cah, 1, 0));
    wait_dto(&C, C.req);
    /* bad AHs: NULL, garbage, freed */
    ck_assert_int_eq(ERRT(send_ud(cep, 1, &l, NULL, 1, 0)), DAT_INVALID_PARAMETER);
    DAT_IB_ADDR_HANDLE junk = x.cah;
    junk.ah = (struct ibv_ah *)(uintptr_t)0x1234;
    ck_assert_int_eq(ERRT(send_ud(cep, 1, &l, &junk, 1, 0)), DAT_INVALID_PARAMETER);
    ck_assert_dat_ok(ext(cep, DAT_IB_UD_AH_FREE_OP, &x.cah));
    ck_assert_int_eq(ERRT(send_ud(cep, 1, &l, &x.cah, 1, 0)), DAT_INVALID_PARAMETER);
    ck_assert_int_eq(ERRT(ext(cep, DAT_IB_UD_AH_FREE_OP, &x.cah)), DAT_INVALID_PARAMETER);
    /* bad CM object; a good one frees once */
    ck_assert_int_eq(ERRT(ext(cep, DAT_IB_UD_CM_FREE_OP, (DAT_CONTEXT){.as_ptr = &junk})), DAT_INVALID_PARAMETER);
    ck_assert_dat_ok(ext(cep, DAT_IB_UD_CM_FREE_OP, (DAT_CONTEXT){.as_ptr = x.ccm}));
    ck_assert_int_eq(ERRT(ext(cep, DAT_IB_UD_CM_FREE_OP, (DAT_CONTEXT){.as_ptr = x.ccm})), DAT_INVALID_PARAMETER);
    ck_assert_int_eq(ERRT(ext(rcep, DAT_IB_UD_CM_FREE_OP, (DAT_CONTEXT){.as_ptr = x.scm})), DAT_INVALID_HANDLE);
    /* bad iov / LMR */
    ck_assert_int_eq(ERRT(send_ud(cep, -1, &l, &x.sah, 1, 0)), DAT_INVALID_PARAMETER);
    DAT_LMR_TRIPLET badl = rp_tri(C.lc + 77, C.buf, 16);
    ck_assert_int_ne(send_ud(sep, 1, &badl, &x.sah, 1, 0), DAT_SUCCESS);
    /* a UD request accepted by an RC EP, and UD with an SRQ */
    connect_to(cep, PORT, "x");
    DAT_EVENT ev = rp_wait(&S, S.cr, (DAT_EVENT_NUMBER)DAT_IB_UD_CONNECTION_REQUEST_EVENT);
    DAT_EP_HANDLE srcep = rp_ep(&S, &rc);
    ck_assert_dat_err(S.p->cr_accept_func(ev.event_data.cr_arrival_event_data.cr_handle, srcep, 0, NULL),
                      DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    ck_assert_dat_ok(S.p->cr_reject_func(ev.event_data.cr_arrival_event_data.cr_handle, 0, NULL));
    ev = rp_wait(&C, C.conn, (DAT_EVENT_NUMBER)DAT_IB_UD_CONNECTION_REJECT_EVENT);
    ck_assert_int_eq(xd(&ev)->type, DAT_IB_UD_CONNECT_REJECT);
    DAT_SRQ_HANDLE srq;
    DAT_SRQ_ATTR sa = {.max_recv_dtos = 8, .max_recv_iov = 1};
    ck_assert_dat_ok(S.p->srq_create_func(S.ia, S.pz, &sa, &srq));
    DAT_EP_ATTR ua;
    ud_attr(&ua);
    DAT_EP_HANDLE e2;
    ck_assert_int_eq(ERRT(S.p->ep_create_with_srq_func(S.ia, S.pz, S.rcv, S.req, S.conn, srq, &ua, &e2)),
                     DAT_MODEL_NOT_SUPPORTED);
    ck_assert_dat_ok(S.p->srq_free_func(srq));
}
END_TEST

START_TEST(drops_counted_and_length_error)
{
    DAT_EP_HANDLE cep = ud_ep(&C), sep = ud_ep(&S);
    struct xchg x = exchange(cep, sep);
    struct sd_ep *se = (struct sd_ep *)sep;
    DAT_LMR_TRIPLET l = rp_tri(C.lc, C.buf, 32);
    /* no receive posted: the datagram is dropped and counted, the send
     * still completes (UD promises no delivery) */
    ck_assert_dat_ok(send_ud(cep, 1, &l, &x.cah, 1, 0));
    wait_dto(&C, C.req);
    struct emu_ud_stats st;
    for (int i = 0; i < 500; i++) {
        ck_assert(sd_ud_get_stats(se, &st));
        if (st.rx_no_recv == 1)
            break;
        usleep(10000);
    }
    ck_assert_uint_eq(st.rx_no_recv, 1);
    rp_none(&S, S.rcv, 100000);
    /* a receive too small for GRH + payload: LOCAL_LENGTH, the EP goes on */
    DAT_LMR_TRIPLET r = rp_tri(S.lc, S.buf, 40 + 8);
    ck_assert_dat_ok(S.p->ep_post_recv_func(sep, 1, &r, rp_ck(5), 0));
    ck_assert_dat_ok(send_ud(cep, 1, &l, &x.cah, 2, 0));
    DAT_EVENT ev = wait_dto(&S, S.rcv);
    ck_assert_int_eq(ev.event_data.dto_completion_event_data.status, DAT_DTO_ERR_LOCAL_LENGTH);
    ck_assert_uint_eq(ev.event_data.dto_completion_event_data.user_cookie.as_64, 5);
    r.segment_length = 40 + 32;
    ck_assert_dat_ok(S.p->ep_post_recv_func(sep, 1, &r, rp_ck(6), 0));
    ck_assert_dat_ok(send_ud(cep, 1, &l, &x.cah, 3, 0));
    ev = wait_dto(&S, S.rcv);
    ck_assert_int_eq(ev.event_data.dto_completion_event_data.status, DAT_DTO_SUCCESS);
    ck_assert_int_eq(rp_state(&S, sep), DAT_EP_STATE_CONNECTED);
    ck_assert(sd_ud_get_stats(se, &st));
    ck_assert_uint_eq(st.rx_too_long, 1);
    ck_assert_uint_eq(st.rx_datagrams, 1);
    /* disconnect: one DISCONNECTED; datagrams still flow */
    ck_assert_dat_ok(S.p->ep_disconnect_func(sep, DAT_CLOSE_ABRUPT_FLAG));
    rp_wait(&S, S.conn, DAT_CONNECTION_EVENT_DISCONNECTED);
    ck_assert_int_eq(rp_state(&S, sep), DAT_EP_STATE_DISCONNECTED);
    ck_assert_dat_ok(S.p->ep_post_recv_func(sep, 1, &r, rp_ck(7), 0));
    ck_assert_dat_ok(send_ud(cep, 1, &l, &x.cah, 4, 0));
    ev = wait_dto(&S, S.rcv);
    ck_assert_int_eq(ev.event_data.dto_completion_event_data.status, DAT_DTO_SUCCESS);
}
END_TEST

START_TEST(no_listener_is_connect_error)
{
    setenv("SOFTDAT_CONNECT_RETRY_MS", "0", 1); /* the first refusal is final */
    DAT_EP_HANDLE cep = ud_ep(&C);
    ck_assert_dat_ok(C.p->psp_free_func(PSP)); /* port now unused */
    PSP = DAT_HANDLE_NULL;
    connect_to(cep, PORT, "");
    DAT_EVENT ev = rp_wait(&C, C.conn, (DAT_EVENT_NUMBER)DAT_IB_UD_CONNECTION_ERROR_EVENT);
    ck_assert_int_eq(xd(&ev)->type, DAT_IB_UD_CONNECT_ERROR);
    ck_assert_int_eq(rp_state(&C, cep), DAT_EP_STATE_UNCONNECTED);
    /* the CM object of a failed exchange is released the same way */
    ck_assert_dat_ok(ext(cep, DAT_IB_UD_CM_FREE_OP, xd(&ev)->context));
}
END_TEST

/* The server takes the pending UD request on sep; both sides end
 * ESTABLISHED (after a late PSP). */
static void accept_and_establish(DAT_EP_HANDLE sep)
{
    DAT_EVENT ev = rp_wait(&S, S.cr, (DAT_EVENT_NUMBER)DAT_IB_UD_CONNECTION_REQUEST_EVENT);
    ck_assert_dat_ok(S.p->cr_accept_func(ev.event_data.cr_arrival_event_data.cr_handle, sep, 0, NULL));
    ev = rp_wait(&C, C.conn, (DAT_EVENT_NUMBER)DAT_IB_UD_CONNECTION_EVENT_ESTABLISHED);
    ck_assert_int_eq(xd(&ev)->type, DAT_IB_UD_REMOTE_AH);
    rp_wait(&S, S.conn, (DAT_EVENT_NUMBER)DAT_IB_UD_CONNECTION_EVENT_ESTABLISHED);
}

START_TEST(refused_exchange_retries_until_listening)
{
    /* dtestx -u connects before the peer's PSP exists; on a loaded host the
     * PSP may come well after emu's 250 ms of refused-connect retries. */
    DAT_EP_HANDLE cep = ud_ep(&C), sep = ud_ep(&S);
    ck_assert_dat_ok(S.p->psp_free_func(PSP));
    connect_to(cep, PORT, "late");
    usleep(800000);
    rp_none(&C, C.conn, 1000); /* no outcome yet */
    ck_assert_dat_ok(S.p->psp_create_func(S.ia, PORT, S.cr, DAT_PSP_CONSUMER_FLAG, &PSP));
    accept_and_establish(sep);
}
END_TEST

static void slow_publication(void)
{
    usleep(500000);
}

START_TEST(request_while_psp_is_being_created)
{
    /* Issue 8: dtestx -u's client retries its refused connects while the
     * server creates its PSP. A retry that lands between the listen and
     * the publication of the listener was dropped as "no listener" (a RST:
     * DAT_IB_UD_CONNECTION_ERROR_EVENT on the client, the server waiting
     * for ever). The hook holds that moment open for 0.5 s, long enough
     * for the retry (backoff <= 32 ms) to connect and send its Request. */
    DAT_EP_HANDLE cep = ud_ep(&C), sep = ud_ep(&S);
    ck_assert_dat_ok(S.p->psp_free_func(PSP));
    connect_to(cep, PORT, "early");
    usleep(50000);
    sd_sp_test_listen_hook = slow_publication;
    DAT_RETURN rc = S.p->psp_create_func(S.ia, PORT, S.cr, DAT_PSP_CONSUMER_FLAG, &PSP);
    sd_sp_test_listen_hook = NULL;
    ck_assert_dat_ok(rc);
    rp_none(&C, C.conn, 1000); /* no UD connection error */
    accept_and_establish(sep);
}
END_TEST

START_TEST(handoff_keeps_it_ud)
{
    DAT_EP_HANDLE cep = ud_ep(&C), sep = ud_ep(&S);
    DAT_PSP_HANDLE psp2;
    DAT_CONN_QUAL port2;
    ck_assert_dat_ok(S.p->psp_create_any_func(S.ia, &port2, S.cr, DAT_PSP_CONSUMER_FLAG, &psp2));
    connect_to(cep, PORT, "handed");
    DAT_EVENT ev = rp_wait(&S, S.cr, (DAT_EVENT_NUMBER)DAT_IB_UD_CONNECTION_REQUEST_EVENT);
    ck_assert_dat_ok(S.p->cr_handoff_func(ev.event_data.cr_arrival_event_data.cr_handle, port2));
    ev = rp_wait(&S, S.cr, (DAT_EVENT_NUMBER)DAT_IB_UD_CONNECTION_REQUEST_EVENT);
    ck_assert_int_eq(ev.event_data.cr_arrival_event_data.conn_qual, port2);
    DAT_CR_PARAM cp;
    ck_assert_dat_ok(S.p->cr_query_func(ev.event_data.cr_arrival_event_data.cr_handle, DAT_CR_FIELD_ALL, &cp));
    ck_assert_int_eq(cp.private_data_size, 6);
    ck_assert_mem_eq(cp.private_data, "handed", 6);
    ck_assert_dat_ok(S.p->cr_accept_func(ev.event_data.cr_arrival_event_data.cr_handle, sep, 0, NULL));
    ev = rp_wait(&C, C.conn, (DAT_EVENT_NUMBER)DAT_IB_UD_CONNECTION_EVENT_ESTABLISHED);
    ck_assert_uint_eq(xd(&ev)->remote_ah.qpn, sd_ud_qpn((struct sd_ep *)sep));
    rp_wait(&S, S.conn, (DAT_EVENT_NUMBER)DAT_IB_UD_CONNECTION_EVENT_ESTABLISHED);
}
END_TEST

START_TEST(free_during_exchange_and_pdata_limit)
{
    DAT_EP_HANDLE cep = ud_ep(&C);
    char pd[SD_MAX_PRIVATE_DATA];
    memset(pd, 'p', sizeof pd);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    /* the UD header takes 16 bytes of the private data */
    ck_assert_dat_err(C.p->ep_connect_func(cep, (DAT_IA_ADDRESS_PTR)&a, PORT, 5000000, SD_MAX_PRIVATE_DATA, pd,
                                           DAT_QOS_BEST_EFFORT, DAT_CONNECT_DEFAULT_FLAG),
                      DAT_INVALID_PARAMETER, DAT_INVALID_ARG5);
    ck_assert_dat_ok(C.p->ep_connect_func(cep, (DAT_IA_ADDRESS_PTR)&a, PORT, 5000000,
                                          SD_MAX_PRIVATE_DATA - SD_UD_PDATA_HDR, pd, DAT_QOS_BEST_EFFORT,
                                          DAT_CONNECT_DEFAULT_FLAG));
    DAT_EVENT ev = rp_wait(&S, S.cr, (DAT_EVENT_NUMBER)DAT_IB_UD_CONNECTION_REQUEST_EVENT);
    DAT_CR_PARAM cp;
    ck_assert_dat_ok(S.p->cr_query_func(ev.event_data.cr_arrival_event_data.cr_handle, DAT_CR_FIELD_ALL, &cp));
    ck_assert_int_eq(cp.private_data_size, SD_MAX_PRIVATE_DATA - SD_UD_PDATA_HDR);
    /* the EP goes while its exchange is pending: nothing leaks or fires */
    ck_assert_dat_ok(C.p->ep_free_func(cep));
    rp_none(&C, C.conn, 100000);
}
END_TEST

START_TEST(suppressed_sends_have_hca_slack)
{
    /* 2 request slots asked for; suppressed successes keep theirs, but a
     * UD send queue has HCA-like spare room (dtestx -U 16 -m needs it). */
    DAT_EP_ATTR a;
    ud_attr(&a);
    a.max_request_dtos = 2;
    a.request_completion_flags = DAT_COMPLETION_SUPPRESS_FLAG;
    DAT_EP_HANDLE cep = rp_ep(&C, &a), sep = ud_ep(&S);
    struct xchg x = exchange(cep, sep);
    DAT_LMR_TRIPLET l = rp_tri(C.lc, C.buf, 8);
    for (int i = 0; i < 40; i++)
        ck_assert_dat_ok(send_ud(cep, 1, &l, &x.cah, (uint64_t)i, DAT_COMPLETION_SUPPRESS_FLAG));
    rp_none(&C, C.req, 50000); /* suppressed: no events */
    int i = 0;
    DAT_RETURN rc = DAT_SUCCESS;
    for (; i < 1000 && rc == DAT_SUCCESS; i++)
        rc = send_ud(cep, 1, &l, &x.cah, 100, DAT_COMPLETION_SUPPRESS_FLAG);
    ck_assert_dat_err(rc, DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEP); /* still bounded */
    ck_assert_dat_ok(C.p->ep_free_func(cep));
}
END_TEST

static Suite *ud_suite(void)
{
    Suite *s = suite_create("provider_ud");
    TCase *tc = tcase_create("ud");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, exchange_send_recv_both_ways);
    tcase_add_test(tc, misuse_errors);
    tcase_add_test(tc, drops_counted_and_length_error);
    tcase_add_test(tc, no_listener_is_connect_error);
    tcase_add_test(tc, free_during_exchange_and_pdata_limit);
    tcase_add_test(tc, suppressed_sends_have_hca_slack);
    tcase_add_test(tc, refused_exchange_retries_until_listening);
    tcase_add_test(tc, request_while_psp_is_being_created);
    tcase_add_test(tc, handoff_keeps_it_ud);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(ud_suite());
    srunner_run_all(sr, CK_NORMAL);
    int nf = srunner_ntests_failed(sr);
    srunner_free(sr);
    return nf ? 1 : 0;
}
