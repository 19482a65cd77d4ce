/* iWARP socket service points through slot 80 (issue 8 §3): the model end
 * to end on a TCP connection the test made itself (final streaming-mode
 * message, Request on the socket, CR, accept, data), every return code of
 * dat_iw_ssp_create / _free / _query and dat_iw_socket_connect, the
 * socket's ownership (given back intact by free and by a rejected
 * connect, taken on success) and SOCKET_DOWN. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <unistd.h>

#include <dat2/dat_iw_extensions.h>

#include "test/lib/rc_pair.h"
#include "test/lib/tcp_pair.h"

static DAT_RETURN ext(DAT_PROVIDER *p, DAT_HANDLE h, DAT_EXTENDED_OP op, ...)
{
    va_list ap;
    va_start(ap, op);
    DAT_RETURN rc = p->handle_extendedop_func(h, op, ap);
    va_end(ap);
    return rc;
}

static DAT_RETURN ssp_create(DAT_PROVIDER *p, DAT_IA_HANDLE ia, int fd, DAT_EP_HANDLE ep, DAT_EVD_HANDLE evd,
                             const void *msg, DAT_COUNT len, DAT_IW_SSP_HANDLE *out)
{
    return ext(p, ia, DAT_IW_SSP_CREATE_OP, (DAT_IW_SOCKET)fd, ep, evd, (DAT_PVOID)msg, len, out);
}

static DAT_RETURN sock_connect(DAT_PROVIDER *p, DAT_EP_HANDLE ep, int fd, DAT_TIMEOUT t, DAT_COUNT n,
                               const void *pd)
{
    return ext(p, ep, DAT_IW_SOCKET_CONNECT_OP, (DAT_IW_SOCKET)fd, t, n, (DAT_PVOID)pd);
}

/* A connected pair of TCP sockets over `addr` (127.0.0.1 or ::1). */
static void read_exact(int fd, void *buf, size_t n)
{
    char *p = buf;
    for (int i = 0; i < 100 && n > 0; i++) {
        struct pollfd pf = {.fd = fd, .events = POLLIN};
        ck_assert_int_eq(poll(&pf, 1, 5000), 1);
        ssize_t r = read(fd, p, n);
        ck_assert_int_gt(r, 0);
        p += r;
        n -= (size_t)r;
    }
    ck_assert_uint_eq(n, 0);
}

static bool fd_open(int fd)
{
    return fcntl(fd, F_GETFD) != -1;
}

START_TEST(ssp_model_end_to_end)
{
    DAT_PROVIDER *p = fx_provider("t-ssp1", "lo", DAT_FALSE);
    struct rp_side c, s;
    rp_side_open(&c, p);
    rp_side_open(&s, p);
    DAT_EP_ATTR at;
    rp_attr(&at, DAT_COMPLETION_EVD_THRESHOLD_FLAG, DAT_COMPLETION_EVD_THRESHOLD_FLAG);
    DAT_EP_HANDLE cep = rp_ep(&c, &at), sep = rp_ep(&s, &at);
    int a, b;
    test_tcp_pair(AF_INET, &a, &b);
    /* Streaming mode first: the application's own protocol. */
    ck_assert_int_eq(write(a, "ping", 4), 4);
    char buf[16];
    read_exact(b, buf, 4);

    DAT_IW_SSP_HANDLE ssp = DAT_HANDLE_NULL;
    ck_assert_dat_ok(ssp_create(p, s.ia, b, sep, s.cr, "go-rdma", 7, &ssp));
    ck_assert_int_eq(rp_state(&s, sep), DAT_EP_STATE_RESERVED);
    DAT_HANDLE_TYPE ht;
    ck_assert_dat_ok(p->get_handle_type_func(ssp, &ht));
    ck_assert_int_eq(ht, DAT_IW_HANDLE_TYPE_SSP);
    DAT_IW_SSP_PARAM q;
    memset(&q, 0, sizeof q);
    ck_assert_dat_ok(ext(p, ssp, DAT_IW_SSP_QUERY_OP, (DAT_IW_SSP_PARAM_MASK)DAT_IW_SSP_FIELD_ALL, &q));
    ck_assert_int_eq(q.ssp_state, DAT_IW_SSP_STATE_OPERATIONAL);
    ck_assert_int_eq(q.socket_id, b);
    ck_assert_ptr_eq(q.ep_handle, sep);
    ck_assert_ptr_eq(q.evd_handle, s.cr);
    ck_assert_ptr_eq(q.ia_handle, s.ia);
    /* The final streaming-mode message reaches the active side. */
    read_exact(a, buf, 7);
    ck_assert_int_eq(memcmp(buf, "go-rdma", 7), 0);

    ck_assert_dat_ok(sock_connect(p, cep, a, 5000000, 4, "PDAT"));
    DAT_EVENT ev = rp_wait(&s, s.cr, DAT_CONNECTION_REQUEST_EVENT);
    DAT_CR_ARRIVAL_EVENT_DATA *cr = &ev.event_data.cr_arrival_event_data;
    ck_assert_ptr_eq(cr->sp_handle.psp_handle, ssp);
    DAT_CR_PARAM crp;
    ck_assert_dat_ok(p->cr_query_func(cr->cr_handle, DAT_CR_FIELD_ALL, &crp));
    ck_assert_int_eq(crp.private_data_size, 4);
    ck_assert_int_eq(memcmp(crp.private_data, "PDAT", 4), 0);
    ck_assert_ptr_eq(crp.local_ep_handle, sep);
    ck_assert_int_eq(rp_state(&s, sep), DAT_EP_STATE_PASSIVE_CONNECTION_PENDING);
    /* The SSP is spent; the socket belongs to the CR (its descriptor is gone). */
    ck_assert_dat_ok(ext(p, ssp, DAT_IW_SSP_QUERY_OP, (DAT_IW_SSP_PARAM_MASK)DAT_IW_SSP_FIELD_SSP_STATE, &q));
    ck_assert_int_eq(q.ssp_state, DAT_IW_SSP_STATE_NON_OPERATIONAL);
    ck_assert(!fd_open(b));

    ck_assert_dat_ok(p->cr_accept_func(cr->cr_handle, sep, 0, NULL));
    rp_wait(&c, c.conn, DAT_CONNECTION_EVENT_ESTABLISHED);
    rp_wait(&s, s.conn, DAT_CONNECTION_EVENT_ESTABLISHED);
    ck_assert_int_eq(rp_state(&c, cep), DAT_EP_STATE_CONNECTED);
    ck_assert(!fd_open(a)); /* the active socket is the EP's now */

    /* RDMA traffic on the converted connection. */
    memcpy(c.buf, "over-the-socket", 16);
    DAT_LMR_TRIPLET r = rp_tri(s.lc, s.buf, 64), t = rp_tri(c.lc, c.buf, 16);
    ck_assert_dat_ok(p->ep_post_recv_func(sep, 1, &r, rp_ck(1), DAT_COMPLETION_DEFAULT_FLAG));
    ck_assert_dat_ok(p->ep_post_send_func(cep, 1, &t, rp_ck(2), DAT_COMPLETION_DEFAULT_FLAG));
    ck_assert_int_eq(rp_dto(&s, s.rcv).transfered_length, 16);
    ck_assert_str_eq(s.buf, "over-the-socket");
    rp_dto(&c, c.req);

    ck_assert_dat_ok(p->ep_disconnect_func(cep, DAT_CLOSE_GRACEFUL_FLAG));
    rp_wait(&c, c.conn, DAT_CONNECTION_EVENT_DISCONNECTED);
    rp_wait(&s, s.conn, DAT_CONNECTION_EVENT_DISCONNECTED);
    ck_assert_dat_ok(ext(p, ssp, DAT_IW_SSP_FREE_OP));
    ck_assert_dat_err(ext(p, ssp, DAT_IW_SSP_FREE_OP), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE1);
    rp_side_close(&c);
    rp_side_close(&s);
}
END_TEST

START_TEST(ssp_create_errors)
{
    DAT_PROVIDER *p = fx_provider("t-ssp2", "lo", DAT_FALSE);
    struct rp_side s;
    rp_side_open(&s, p);
    DAT_EP_HANDLE ep = rp_ep(&s, NULL);
    int a, b;
    test_tcp_pair(AF_INET, &a, &b);
    DAT_IW_SSP_HANDLE ssp = DAT_HANDLE_NULL, ssp2;
    static char junk[64];
    ck_assert_dat_err(ssp_create(p, (DAT_IA_HANDLE)(junk + 8), b, ep, s.cr, NULL, 0, &ssp), DAT_INVALID_HANDLE,
                      DAT_INVALID_HANDLE_IA);
    ck_assert_dat_err(ssp_create(p, s.ia, b, ep, s.cr, NULL, 0, NULL), DAT_INVALID_PARAMETER, DAT_INVALID_ARG7);
    ck_assert_dat_err(ssp_create(p, s.ia, b, ep, s.cr, "x", -1, &ssp), DAT_INVALID_PARAMETER, DAT_INVALID_ARG6);
    ck_assert_dat_err(ssp_create(p, s.ia, b, ep, s.cr, NULL, 3, &ssp), DAT_INVALID_PARAMETER, DAT_INVALID_ARG5);
    ck_assert_dat_err(ssp_create(p, s.ia, b, ep, s.conn, NULL, 0, &ssp), DAT_INVALID_HANDLE,
                      DAT_INVALID_HANDLE_EVD_CR);
    ck_assert_dat_err(ssp_create(p, s.ia, b, s.pz, s.cr, NULL, 0, &ssp), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP);
    /* Invalid sockets: not a descriptor, not a socket, not TCP. */
    ck_assert_dat_err(ssp_create(p, s.ia, -1, ep, s.cr, NULL, 0, &ssp), DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    int nul = open("/dev/null", O_RDWR);
    ck_assert_dat_err(ssp_create(p, s.ia, nul, ep, s.cr, NULL, 0, &ssp), DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    int udp = socket(AF_INET, SOCK_DGRAM, 0);
    ck_assert_dat_err(ssp_create(p, s.ia, udp, ep, s.cr, NULL, 0, &ssp), DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    /* A socket not routed through this IA (::1 for an IA on 127.0.0.1). */
    int a6, b6;
    test_tcp_pair(AF_INET6, &a6, &b6);
    ck_assert_dat_err(ssp_create(p, s.ia, b6, ep, s.cr, NULL, 0, &ssp), DAT_INVALID_STATE, 0);
    ck_assert_ptr_null(ssp);
    ck_assert_int_eq(rp_state(&s, ep), DAT_EP_STATE_UNCONNECTED);

    /* The EP can serve one SSP only: the second finds it reserved. */
    int fl = fcntl(b, F_GETFL);
    ck_assert_dat_ok(ssp_create(p, s.ia, b, ep, s.cr, NULL, 0, &ssp));
    ck_assert_dat_err(ssp_create(p, s.ia, b, ep, s.cr, NULL, 0, &ssp2), DAT_INVALID_STATE,
                      DAT_INVALID_STATE_EP_RESERVED);
    /* Query errors. */
    DAT_IW_SSP_PARAM q;
    ck_assert_dat_err(ext(p, ssp, DAT_IW_SSP_QUERY_OP, (DAT_IW_SSP_PARAM_MASK)0x20, &q), DAT_INVALID_PARAMETER,
                      DAT_INVALID_ARG2);
    ck_assert_dat_err(ext(p, ssp, DAT_IW_SSP_QUERY_OP, (DAT_IW_SSP_PARAM_MASK)DAT_IW_SSP_FIELD_ALL, NULL),
                      DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    ck_assert_dat_err(ext(p, ep, DAT_IW_SSP_QUERY_OP, (DAT_IW_SSP_PARAM_MASK)DAT_IW_SSP_FIELD_ALL, &q),
                      DAT_INVALID_HANDLE, DAT_INVALID_HANDLE1);
    ck_assert_dat_err(ext(p, ep, DAT_IW_SSP_FREE_OP), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE1);
    /* Graceful IA close refuses while the SSP lives. */
    ck_assert_int_eq(DAT_GET_TYPE(p->ia_close_func(s.ia, DAT_CLOSE_GRACEFUL_FLAG)), DAT_INVALID_STATE);

    /* Free before any Request: the EP and the socket go back to the
     * consumer, the socket intact (blocking, usable). */
    ck_assert_dat_ok(ext(p, ssp, DAT_IW_SSP_FREE_OP));
    ck_assert_int_eq(rp_state(&s, ep), DAT_EP_STATE_UNCONNECTED);
    ck_assert(fd_open(b));
    ck_assert_int_eq(fcntl(b, F_GETFL) & O_NONBLOCK, 0);
    ck_assert_int_eq(fl & O_NONBLOCK, 0);
    ck_assert_int_eq(write(a, "still", 5), 5);
    char buf[8];
    read_exact(b, buf, 5);
    ck_assert_int_eq(memcmp(buf, "still", 5), 0);

    /* A provider EP (NULL ep): the SSP holds an unconfigured reserved EP. */
    ck_assert_dat_ok(ssp_create(p, s.ia, b, DAT_HANDLE_NULL, s.cr, NULL, 0, &ssp));
    ck_assert_dat_ok(ext(p, ssp, DAT_IW_SSP_QUERY_OP, (DAT_IW_SSP_PARAM_MASK)DAT_IW_SSP_FIELD_EP_HANDLE, &q));
    ck_assert_ptr_nonnull(q.ep_handle);
    ck_assert_int_eq(rp_state(&s, q.ep_handle), DAT_EP_STATE_UNCONFIGURED_RESERVED);
    /* Abrupt IA close destroys it. */
    close(a);
    close(b);
    close(a6);
    close(b6);
    close(nul);
    close(udp);
    rp_side_close(&s);
}
END_TEST

START_TEST(ssp_socket_down)
{
    DAT_PROVIDER *p = fx_provider("t-ssp3", "lo", DAT_FALSE);
    struct rp_side s;
    rp_side_open(&s, p);
    DAT_EP_HANDLE ep = rp_ep(&s, NULL), ep2 = rp_ep(&s, NULL);
    /* Not connected at create: created NON_OPERATIONAL, SOCKET_DOWN posted. */
    int un = socket(AF_INET, SOCK_STREAM, 0);
    DAT_IW_SSP_HANDLE ssp, ssp2;
    ck_assert_dat_ok(ssp_create(p, s.ia, un, ep, s.cr, NULL, 0, &ssp));
    DAT_EVENT ev = rp_wait(&s, s.cr, (DAT_EVENT_NUMBER)DAT_CONNECTION_EVENT_SOCKET_DOWN);
    ck_assert_ptr_eq(ev.event_data.cr_arrival_event_data.sp_handle.psp_handle, ssp);
    DAT_IW_SSP_PARAM q;
    ck_assert_dat_ok(ext(p, ssp, DAT_IW_SSP_QUERY_OP, (DAT_IW_SSP_PARAM_MASK)DAT_IW_SSP_FIELD_ALL, &q));
    ck_assert_int_eq(q.ssp_state, DAT_IW_SSP_STATE_NON_OPERATIONAL);
    /* The peer closes before sending a Request. */
    int a, b;
    test_tcp_pair(AF_INET, &a, &b);
    ck_assert_dat_ok(ssp_create(p, s.ia, b, ep2, s.cr, NULL, 0, &ssp2));
    close(a);
    ev = rp_wait(&s, s.cr, (DAT_EVENT_NUMBER)DAT_CONNECTION_EVENT_SOCKET_DOWN);
    ck_assert_ptr_eq(ev.event_data.cr_arrival_event_data.sp_handle.psp_handle, ssp2);
    ck_assert_dat_ok(ext(p, ssp2, DAT_IW_SSP_QUERY_OP, (DAT_IW_SSP_PARAM_MASK)DAT_IW_SSP_FIELD_ALL, &q));
    ck_assert_int_eq(q.ssp_state, DAT_IW_SSP_STATE_NON_OPERATIONAL);
    rp_none(&s, s.cr, 100000); /* once */
    ck_assert_dat_ok(ext(p, ssp, DAT_IW_SSP_FREE_OP));
    ck_assert_dat_ok(ext(p, ssp2, DAT_IW_SSP_FREE_OP));
    ck_assert(fd_open(b));
    close(b);
    close(un);
    rp_side_close(&s);
}
END_TEST

START_TEST(socket_connect_errors_and_reject)
{
    DAT_PROVIDER *p = fx_provider("t-ssp4", "lo", DAT_FALSE);
    struct rp_side c, s;
    rp_side_open(&c, p);
    rp_side_open(&s, p);
    DAT_EP_HANDLE cep = rp_ep(&c, NULL), sep = rp_ep(&s, NULL);
    int a, b;
    test_tcp_pair(AF_INET, &a, &b);
    static char junk[64];
    char big[300] = {0};
    ck_assert_dat_err(sock_connect(p, (DAT_EP_HANDLE)(junk + 8), a, 1000000, 0, NULL), DAT_INVALID_HANDLE,
                      DAT_INVALID_HANDLE_EP);
    ck_assert_dat_err(sock_connect(p, c.pz, a, 1000000, 0, NULL), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP);
    ck_assert_dat_err(sock_connect(p, cep, a, 0, 0, NULL), DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    ck_assert_dat_err(sock_connect(p, cep, a, 1000000, -1, NULL), DAT_INVALID_PARAMETER, DAT_INVALID_ARG4);
    ck_assert_dat_err(sock_connect(p, cep, a, 1000000, (DAT_COUNT)sizeof big, big), DAT_INVALID_PARAMETER,
                      DAT_INVALID_ARG4);
    ck_assert_dat_err(sock_connect(p, cep, a, 1000000, 4, NULL), DAT_INVALID_PARAMETER, DAT_INVALID_ARG5);
    ck_assert_dat_err(sock_connect(p, cep, -1, 1000000, 0, NULL), DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    int udp = socket(AF_INET, SOCK_DGRAM, 0);
    ck_assert_dat_err(sock_connect(p, cep, udp, 1000000, 0, NULL), DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    int un = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_dat_err(sock_connect(p, cep, un, 1000000, 0, NULL), DAT_INVALID_STATE, 0);
    int a6, b6;
    test_tcp_pair(AF_INET6, &a6, &b6);
    ck_assert_dat_err(sock_connect(p, cep, a6, 1000000, 0, NULL), DAT_INVALID_STATE, 0);
    /* Unconfigured EP (no connect EVD). */
    DAT_EP_HANDLE bare;
    ck_assert_dat_ok(p->ep_create_func(c.ia, c.pz, NULL, NULL, NULL, NULL, &bare));
    ck_assert_dat_err(sock_connect(p, bare, a, 1000000, 0, NULL), DAT_INVALID_STATE,
                      DAT_INVALID_STATE_EP_UNCONFIGURED);
    ck_assert_int_eq(rp_state(&c, cep), DAT_EP_STATE_UNCONNECTED);

    /* The peer's consumer rejects: PEER_REJECTED, and the socket is the
     * consumer's again (open, blocking). */
    DAT_IW_SSP_HANDLE ssp;
    ck_assert_dat_ok(ssp_create(p, s.ia, b, sep, s.cr, NULL, 0, &ssp));
    ck_assert_dat_ok(sock_connect(p, cep, a, 5000000, 0, NULL));
    ck_assert_dat_err(sock_connect(p, cep, a, 5000000, 0, NULL), DAT_INVALID_STATE,
                      DAT_INVALID_STATE_EP_ACTCONNPENDING);
    DAT_EVENT ev = rp_wait(&s, s.cr, DAT_CONNECTION_REQUEST_EVENT);
    ck_assert_dat_ok(p->cr_reject_func(ev.event_data.cr_arrival_event_data.cr_handle, 0, NULL));
    rp_wait(&c, c.conn, DAT_CONNECTION_EVENT_PEER_REJECTED);
    ck_assert_int_eq(rp_state(&c, cep), DAT_EP_STATE_DISCONNECTED);
    ck_assert_int_eq(rp_state(&s, sep), DAT_EP_STATE_UNCONNECTED);
    ck_assert(fd_open(a));
    ck_assert_int_eq(fcntl(a, F_GETFL) & O_NONBLOCK, 0);
    ck_assert_dat_ok(ext(p, ssp, DAT_IW_SSP_FREE_OP));
    close(a);
    close(a6);
    close(b6);
    close(un);
    close(udp);
    rp_side_close(&c);
    rp_side_close(&s);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("provider-ssp");
    TCase *tc = tcase_create("ssp");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, ssp_model_end_to_end);
    tcase_add_test(tc, ssp_create_errors);
    tcase_add_test(tc, ssp_socket_down);
    tcase_add_test(tc, socket_connect_errors_and_reject);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int nf = srunner_ntests_failed(sr);
    srunner_free(sr);
    return nf == 0 ? 0 : 1;
}
