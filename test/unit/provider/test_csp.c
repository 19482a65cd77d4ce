/* Common service points, dat_ep_common_connect and dat_cr_handoff through
 * the provider table: IAs on 127.0.0.1 in one process. Every argument
 * error of csp_create/query/free and common_connect, the CSP model end to
 * end (accept, reject, wildcard filtering, free with a pending CR), and
 * handoff between PSP, CSP and RSP, across IAs of one record, into a full
 * EVD, with RSP and provider EPs coming back. */
#include <arpa/inet.h>
#include <pthread.h>
#include <stdint.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "lib/provider/ep.h"
#include "test/lib/cm_fixture.h"

static DAT_COMM tcp4 = {AF_INET, SOCK_STREAM, 0};

static DAT_CSP_HANDLE mk_csp(struct side *s, const char *ip, unsigned port, DAT_EVD_HANDLE evd, unsigned *bound)
{
    struct sockaddr_in a = v4(ip, port);
    DAT_CSP_HANDLE csp = DAT_HANDLE_NULL;
    ck_assert_dat_ok(s->p->csp_create_func(s->ia, &tcp4, (DAT_IA_ADDRESS_PTR)&a, evd, &csp));
    DAT_CSP_PARAM cp;
    ck_assert_dat_ok(s->p->csp_query_func(csp, DAT_CSP_FIELD_IA_ADDRESS, &cp));
    if (bound)
        *bound = ntohs(((struct sockaddr_in *)cp.address_ptr)->sin_port);
    return csp;
}

/* Wait for a request on evd and check where it arrived. */
static DAT_CR_HANDLE wait_cr(struct side *s, DAT_EVD_HANDLE evd, DAT_HANDLE sp, unsigned port)
{
    DAT_EVENT ev = wait_ev(s, evd, DAT_CONNECTION_REQUEST_EVENT);
    const DAT_CR_ARRIVAL_EVENT_DATA *d = &ev.event_data.cr_arrival_event_data;
    ck_assert_ptr_eq(d->sp_handle.psp_handle, sp);
    ck_assert_uint_eq(d->conn_qual, port);
    ck_assert_ptr_nonnull(d->local_ia_address_ptr);
    ck_assert_int_eq(((struct sockaddr_in *)d->local_ia_address_ptr)->sin_addr.s_addr, htonl(INADDR_LOOPBACK));
    ck_assert_int_eq(d->truncate_flag, DAT_FALSE);
    return d->cr_handle;
}

/* Accept cr with a fresh EP of s; both sides ESTABLISHED. */
static DAT_EP_HANDLE accept_cr(struct side *s, DAT_CR_HANDLE cr, DAT_EP_HANDLE sep, struct side *c,
                               DAT_EP_HANDLE cep)
{
    if (sep == DAT_HANDLE_NULL)
        sep = mk_ep(s);
    ck_assert_dat_ok(s->p->cr_accept_func(cr, sep, 3, "ok"));
    DAT_EVENT ev = wait_ev(c, c->conn, DAT_CONNECTION_EVENT_ESTABLISHED);
    ck_assert_ptr_eq(ev.event_data.connect_event_data.ep_handle, cep);
    ck_assert_int_eq(ev.event_data.connect_event_data.private_data_size, 3);
    ck_assert_str_eq(ev.event_data.connect_event_data.private_data, "ok");
    wait_ev(s, s->conn, DAT_CONNECTION_EVENT_ESTABLISHED);
    ck_assert_int_eq(ep_state(c, cep), DAT_EP_STATE_CONNECTED);
    return sep;
}

static void assert_cr_dead(struct side *s, DAT_CR_HANDLE cr)
{
    DAT_CR_PARAM cp;
    ck_assert_dat_err(s->p->cr_query_func(cr, DAT_CR_FIELD_ALL, &cp), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_CR);
}

START_TEST(slots_filled)
{
    DAT_PROVIDER *p = fx_provider("t-csp-slots", "lo", DAT_FALSE);
    ck_assert_ptr_nonnull(p->csp_create_func);
    ck_assert_ptr_nonnull(p->csp_query_func);
    ck_assert_ptr_nonnull(p->csp_free_func);
    ck_assert_ptr_nonnull(p->ep_common_connect_func);
    ck_assert_ptr_nonnull(p->cr_handoff_func);
}
END_TEST

START_TEST(csp_create_errors)
{
    DAT_PROVIDER *p = fx_provider("t-csp-err", "lo", DAT_FALSE);
    struct side s, o;
    side_open(&s, p);
    side_open(&o, p);
    DAT_CSP_HANDLE csp = DAT_HANDLE_NULL;
    unsigned port = free_port(&s);
    struct sockaddr_in a = v4("127.0.0.1", port);
    DAT_IA_ADDRESS_PTR ap = (DAT_IA_ADDRESS_PTR)&a;

    /* handles */
    ck_assert_dat_err(p->csp_create_func(DAT_HANDLE_NULL, &tcp4, ap, s.cr, &csp), DAT_INVALID_HANDLE,
                      DAT_INVALID_HANDLE_IA);
    ck_assert_dat_err(p->csp_create_func((DAT_IA_HANDLE)&a, &tcp4, ap, s.cr, &csp), DAT_INVALID_HANDLE,
                      DAT_INVALID_HANDLE_IA);
    ck_assert_dat_err(p->csp_create_func(s.pz, &tcp4, ap, s.cr, &csp), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);
    ck_assert_dat_err(p->csp_create_func(s.ia, &tcp4, ap, s.cr, NULL), DAT_INVALID_PARAMETER, DAT_INVALID_ARG5);
    ck_assert_dat_err(p->csp_create_func(s.ia, &tcp4, ap, DAT_HANDLE_NULL, &csp), DAT_INVALID_HANDLE,
                      DAT_INVALID_HANDLE_EVD_CR);
    ck_assert_dat_err(p->csp_create_func(s.ia, &tcp4, ap, s.conn, &csp), DAT_INVALID_HANDLE,
                      DAT_INVALID_HANDLE_EVD_CR); /* no CR flag */
    {
        /* Another IA's (another dat.conf name; another open instance of
         * the same IA may share its EVDs, test_shared_ia). */
        DAT_PROVIDER *op = fx_provider("t-csp-other", "lo", DAT_FALSE);
        DAT_IA_HANDLE oia = fx_open(op, NULL);
        DAT_EVD_HANDLE ocr;
        ck_assert_dat_ok(op->evd_create_func(oia, 4, NULL, DAT_EVD_CR_FLAG, &ocr));
        ck_assert_dat_err(p->csp_create_func(s.ia, &tcp4, ap, ocr, &csp), DAT_INVALID_HANDLE,
                          DAT_INVALID_HANDLE_EVD_CR);
        ck_assert_dat_ok(op->ia_close_func(oia, DAT_CLOSE_ABRUPT_FLAG));
    }
    ck_assert_dat_err(p->csp_create_func(s.ia, &tcp4, ap, s.pz, &csp), DAT_INVALID_HANDLE,
                      DAT_INVALID_HANDLE_EVD_CR);

    /* comm */
    ck_assert_dat_err(p->csp_create_func(s.ia, NULL, ap, s.cr, &csp), DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    DAT_COMM c0 = {0, SOCK_STREAM, 0}, c1 = {AF_INET, 0, 0}, c2 = {AF_INET, SOCK_STREAM, -1};
    ck_assert_dat_err(p->csp_create_func(s.ia, &c0, ap, s.cr, &csp), DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    ck_assert_dat_err(p->csp_create_func(s.ia, &c1, ap, s.cr, &csp), DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    ck_assert_dat_err(p->csp_create_func(s.ia, &c2, ap, s.cr, &csp), DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    DAT_COMM unix_s = {AF_UNIX, SOCK_STREAM, 0}, dgram = {AF_INET, SOCK_DGRAM, 0},
             udp = {AF_INET, SOCK_STREAM, IPPROTO_UDP}, seq = {AF_INET, SOCK_SEQPACKET, 0},
             sctp = {AF_INET, SOCK_STREAM, IPPROTO_SCTP};
    ck_assert_dat_err(p->csp_create_func(s.ia, &unix_s, ap, s.cr, &csp), DAT_COMM_NOT_SUPPORTED, 0);
    ck_assert_dat_err(p->csp_create_func(s.ia, &dgram, ap, s.cr, &csp), DAT_COMM_NOT_SUPPORTED, 0);
    ck_assert_dat_err(p->csp_create_func(s.ia, &udp, ap, s.cr, &csp), DAT_COMM_NOT_SUPPORTED, 0);
    ck_assert_dat_err(p->csp_create_func(s.ia, &seq, ap, s.cr, &csp), DAT_COMM_NOT_SUPPORTED, 0);
    ck_assert_dat_err(p->csp_create_func(s.ia, &sctp, ap, s.cr, &csp), DAT_COMM_NOT_SUPPORTED, 0);
    DAT_COMM tcp6 = {AF_INET6, SOCK_STREAM, 0}; /* this IA is IPv4 */
    ck_assert_dat_err(p->csp_create_func(s.ia, &tcp6, NULL, s.cr, &csp), DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);

    /* address */
    struct sockaddr_in6 a6;
    memset(&a6, 0, sizeof a6);
    a6.sin6_family = AF_INET6;
    a6.sin6_addr = in6addr_loopback;
    a6.sin6_port = htons((uint16_t)port);
    ck_assert_dat_err(p->csp_create_func(s.ia, &tcp4, (DAT_IA_ADDRESS_PTR)&a6, s.cr, &csp), DAT_INVALID_PARAMETER,
                      DAT_INVALID_ARG3); /* family != comm domain */
    struct sockaddr_in other = v4("127.0.0.2", port);
    ck_assert_dat_err(p->csp_create_func(s.ia, &tcp4, (DAT_IA_ADDRESS_PTR)&other, s.cr, &csp),
                      DAT_INVALID_PARAMETER, DAT_INVALID_ARG3); /* not the IA's address */

    /* port in use: a PSP, another CSP, a wildcard over a specific bind */
    DAT_PSP_HANDLE psp;
    ck_assert_dat_ok(p->psp_create_func(s.ia, port, s.cr, DAT_PSP_CONSUMER_FLAG, &psp));
    ck_assert_dat_err(p->csp_create_func(s.ia, &tcp4, ap, s.cr, &csp), DAT_PORT_IN_USE, 0);
    struct sockaddr_in any = v4("0.0.0.0", port);
    ck_assert_dat_err(p->csp_create_func(s.ia, &tcp4, (DAT_IA_ADDRESS_PTR)&any, s.cr, &csp), DAT_PORT_IN_USE, 0);
    ck_assert_dat_ok(p->psp_free_func(psp));
    csp = mk_csp(&s, "127.0.0.1", port, s.cr, NULL);
    DAT_CSP_HANDLE csp2 = DAT_HANDLE_NULL;
    ck_assert_dat_err(p->csp_create_func(o.ia, &tcp4, ap, o.cr, &csp2), DAT_PORT_IN_USE, 0);
    /* and a PSP on a CSP's port is DAT_CONN_QUAL_IN_USE */
    ck_assert_dat_err(p->psp_create_func(o.ia, port, o.cr, DAT_PSP_CONSUMER_FLAG, &psp), DAT_CONN_QUAL_IN_USE, 0);
    ck_assert_ptr_null(csp2);
    /* the CSP's EVD is in use */
    ck_assert_int_eq(DAT_GET_TYPE(p->evd_free_func(s.cr)), DAT_INVALID_STATE);
    ck_assert_dat_ok(p->csp_free_func(csp));
    ck_assert_dat_ok(p->evd_free_func(s.cr));
    side_close(&o);
    side_close(&s);
    ck_assert_uint_eq(sd_handle_live_count(), 0);
}
END_TEST

START_TEST(csp_create_variants_query_free)
{
    DAT_PROVIDER *p = fx_provider("t-csp-q", "lo", DAT_FALSE);
    struct side s;
    side_open(&s, p);
    DAT_CSP_HANDLE csp;
    DAT_CSP_PARAM cp;

    /* NULL address: the IA's address and a port of ours */
    DAT_COMM comm = {AF_INET, SOCK_STREAM | SOCK_CLOEXEC, IPPROTO_TCP};
    ck_assert_dat_ok(p->csp_create_func(s.ia, &comm, NULL, s.cr, &csp));
    comm.type = SOCK_DGRAM; /* the CSP keeps its own copy */
    memset(&cp, 0xA5, sizeof cp);
    ck_assert_dat_ok(p->csp_query_func(csp, DAT_CSP_FIELD_ALL, &cp));
    ck_assert_ptr_eq(cp.ia_handle, s.ia);
    ck_assert_ptr_eq(cp.evd_handle, s.cr);
    ck_assert_ptr_nonnull(cp.comm);
    ck_assert_int_eq(cp.comm->domain, AF_INET);
    ck_assert_int_eq(cp.comm->type, SOCK_STREAM | SOCK_CLOEXEC);
    ck_assert_int_eq(cp.comm->protocol, IPPROTO_TCP);
    const struct sockaddr_in *ba = (const struct sockaddr_in *)cp.address_ptr;
    ck_assert_int_eq(ba->sin_family, AF_INET);
    ck_assert_int_eq(ba->sin_addr.s_addr, htonl(INADDR_LOOPBACK));
    unsigned port = ntohs(ba->sin_port);
    ck_assert_uint_ge(port, 20000);
    ck_assert_uint_le(port, 32767);
    DAT_HANDLE_TYPE t;
    ck_assert_dat_ok(p->get_handle_type_func(csp, &t));
    ck_assert_int_eq(t, DAT_HANDLE_TYPE_CSP);
    /* it really listens there */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in to = v4("127.0.0.1", port);
    ck_assert_int_eq(connect(fd, (struct sockaddr *)&to, sizeof to), 0);
    close(fd);

    /* query errors */
    ck_assert_dat_err(p->csp_query_func(csp, (DAT_CSP_PARAM_MASK)0x10, &cp), DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    ck_assert_dat_err(p->csp_query_func(csp, DAT_CSP_FIELD_ALL, NULL), DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    ck_assert_dat_err(p->csp_query_func(DAT_HANDLE_NULL, DAT_CSP_FIELD_ALL, &cp), DAT_INVALID_HANDLE,
                      DAT_INVALID_HANDLE_CSP);
    ck_assert_dat_err(p->csp_query_func(s.cr, DAT_CSP_FIELD_ALL, &cp), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_CSP);
    ck_assert_dat_err(p->csp_free_func(s.pz), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_CSP);
    DAT_PSP_PARAM pp;
    ck_assert_dat_err(p->psp_query_func(csp, DAT_PSP_FIELD_ALL, &pp), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_PSP);
    ck_assert_dat_err(p->psp_free_func(csp), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_PSP);
    ck_assert_dat_err(p->rsp_free_func(csp), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_RSP);
    ck_assert_dat_ok(p->csp_query_func(csp, 0, &cp));

    /* free: handle dead, port free again */
    ck_assert_dat_ok(p->csp_free_func(csp));
    ck_assert_dat_err(p->csp_free_func(csp), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_CSP);
    ck_assert_dat_err(p->csp_query_func(csp, DAT_CSP_FIELD_ALL, &cp), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_CSP);
    fd = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_ne(connect(fd, (struct sockaddr *)&to, sizeof to), 0);
    close(fd);

    /* explicit port, port 0, wildcard */
    unsigned got;
    csp = mk_csp(&s, "127.0.0.1", port, s.cr, &got);
    ck_assert_uint_eq(got, port);
    DAT_CSP_HANDLE c0 = mk_csp(&s, "127.0.0.1", 0, s.cr, &got);
    ck_assert_uint_ne(got, 0);
    ck_assert_uint_ne(got, port);
    unsigned wport = free_port(&s);
    DAT_CSP_HANDLE cw = mk_csp(&s, "0.0.0.0", wport, s.cr, &got);
    ck_assert_uint_eq(got, wport);
    ck_assert_dat_ok(p->csp_query_func(cw, DAT_CSP_FIELD_IA_ADDRESS, &cp));
    ck_assert_int_eq(((struct sockaddr_in *)cp.address_ptr)->sin_addr.s_addr, htonl(INADDR_ANY));
    ck_assert_dat_ok(p->csp_free_func(c0));
    /* IA close destroys the rest */
    side_close(&s);
    ck_assert_uint_eq(sd_handle_live_count(), 0);
}
END_TEST

START_TEST(common_connect_errors)
{
    DAT_PROVIDER *p = fx_provider("t-csp-cc", "lo", DAT_FALSE);
    struct side s, c;
    side_open(&s, p);
    side_open(&c, p);
    unsigned port;
    DAT_CSP_HANDLE csp = mk_csp(&s, "127.0.0.1", 0, s.cr, &port);
    DAT_EP_HANDLE cep = mk_ep(&c);
    struct sockaddr_in a = v4("127.0.0.1", port);
    DAT_IA_ADDRESS_PTR ap = (DAT_IA_ADDRESS_PTR)&a;
    char big[SD_MAX_PRIVATE_DATA + 1];
    memset(big, 'x', sizeof big);

    ck_assert_dat_err(p->ep_common_connect_func(DAT_HANDLE_NULL, ap, 1000000, 0, NULL), DAT_INVALID_HANDLE,
                      DAT_INVALID_HANDLE_EP);
    ck_assert_dat_err(p->ep_common_connect_func(s.pz, ap, 1000000, 0, NULL), DAT_INVALID_HANDLE,
                      DAT_INVALID_HANDLE_EP);
    ck_assert_dat_err(p->ep_common_connect_func(cep, NULL, 1000000, 0, NULL), DAT_INVALID_PARAMETER,
                      DAT_INVALID_ARG2);
    struct sockaddr_in nop = v4("127.0.0.1", 0);
    ck_assert_dat_err(p->ep_common_connect_func(cep, (DAT_IA_ADDRESS_PTR)&nop, 1000000, 0, NULL),
                      DAT_INVALID_PARAMETER, DAT_INVALID_ARG2); /* no port */
    struct sockaddr un = {.sa_family = AF_UNIX};
    ck_assert_dat_err(p->ep_common_connect_func(cep, &un, 1000000, 0, NULL), DAT_INVALID_PARAMETER,
                      DAT_INVALID_ARG2);
    ck_assert_dat_err(p->ep_common_connect_func(cep, ap, 0, 0, NULL), DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    ck_assert_dat_err(p->ep_common_connect_func(cep, ap, 1000000, -1, NULL), DAT_INVALID_PARAMETER,
                      DAT_INVALID_ARG4);
    ck_assert_dat_err(p->ep_common_connect_func(cep, ap, 1000000, SD_MAX_PRIVATE_DATA + 1, big),
                      DAT_INVALID_PARAMETER, DAT_INVALID_ARG4);
    ck_assert_dat_err(p->ep_common_connect_func(cep, ap, 1000000, 4, NULL), DAT_INVALID_PARAMETER,
                      DAT_INVALID_ARG5);
    /* none of that touched the EP or reached the CSP */
    ck_assert_int_eq(ep_state(&c, cep), DAT_EP_STATE_UNCONNECTED);
    no_event(&s, s.cr, 100000);

    /* unconfigured EP */
    DAT_EP_HANDLE uep;
    ck_assert_dat_ok(p->ep_create_func(c.ia, DAT_HANDLE_NULL, c.dto, c.dto, c.conn, NULL, &uep));
    ck_assert_dat_err(p->ep_common_connect_func(uep, ap, 1000000, 0, NULL), DAT_INVALID_STATE,
                      DAT_INVALID_STATE_EP_UNCONFIGURED);
    /* the largest private data goes through; a second connect is a state error */
    ck_assert_dat_ok(p->ep_common_connect_func(cep, ap, DAT_TIMEOUT_INFINITE, SD_MAX_PRIVATE_DATA, big));
    ck_assert_int_eq(ep_state(&c, cep), DAT_EP_STATE_ACTIVE_CONNECTION_PENDING);
    ck_assert_dat_err(p->ep_common_connect_func(cep, ap, 1000000, 0, NULL), DAT_INVALID_STATE,
                      DAT_INVALID_STATE_EP_ACTCONNPENDING);
    DAT_CR_HANDLE cr = wait_cr(&s, s.cr, csp, port);
    DAT_CR_PARAM crp;
    ck_assert_dat_ok(p->cr_query_func(cr, DAT_CR_FIELD_ALL, &crp));
    ck_assert_int_eq(crp.private_data_size, SD_MAX_PRIVATE_DATA);
    ck_assert_int_eq(memcmp(crp.private_data, big, SD_MAX_PRIVATE_DATA), 0);
    ck_assert_ptr_null(crp.local_ep_handle);
    DAT_EP_HANDLE sep = accept_cr(&s, cr, DAT_HANDLE_NULL, &c, cep);
    ck_assert_dat_err(p->ep_common_connect_func(cep, ap, 1000000, 0, NULL), DAT_INVALID_STATE,
                      DAT_INVALID_STATE_EP_CONNECTED);
    ck_assert_dat_ok(p->ep_disconnect_func(sep, DAT_CLOSE_GRACEFUL_FLAG));
    wait_ev(&c, c.conn, DAT_CONNECTION_EVENT_DISCONNECTED);
    wait_ev(&s, s.conn, DAT_CONNECTION_EVENT_DISCONNECTED);
    side_close(&c);
    side_close(&s);
    ck_assert_uint_eq(sd_handle_live_count(), 0);
}
END_TEST

START_TEST(csp_model_end_to_end)
{
    DAT_PROVIDER *p = fx_provider("t-csp-e2e", "lo", DAT_FALSE);
    struct side s, c;
    side_open(&s, p);
    side_open(&c, p);
    unsigned port = free_port(&s);
    DAT_CSP_HANDLE csp = mk_csp(&s, "127.0.0.1", port, s.cr, NULL);
    struct sockaddr_in a = v4("127.0.0.1", port);

    /* common_connect → CR (requestor's socket address) → accept */
    DAT_EP_HANDLE cep = mk_ep(&c);
    ck_assert_dat_ok(p->ep_common_connect_func(cep, (DAT_IA_ADDRESS_PTR)&a, 5000000, 6, "hello"));
    DAT_CR_HANDLE cr = wait_cr(&s, s.cr, csp, port);
    DAT_CR_PARAM crp;
    ck_assert_dat_ok(p->cr_query_func(cr, DAT_CR_FIELD_ALL, &crp));
    ck_assert_str_eq(crp.private_data, "hello");
    const struct sockaddr_in *ra = (const struct sockaddr_in *)crp.remote_ia_address_ptr;
    ck_assert_int_eq(ra->sin_family, AF_INET);
    ck_assert_int_eq(ra->sin_addr.s_addr, htonl(INADDR_LOOPBACK));
    ck_assert_uint_eq(ntohs(ra->sin_port), crp.remote_port_qual);
    DAT_EP_HANDLE sep = accept_cr(&s, cr, DAT_HANDLE_NULL, &c, cep);
    assert_cr_dead(&s, cr);
    DAT_EP_PARAM ep_p;
    ck_assert_dat_ok(p->ep_query_func(cep, DAT_EP_FIELD_ALL, &ep_p));
    ck_assert_uint_eq(ep_p.remote_port_qual, port);
    ck_assert_uint_eq(ep_p.local_port_qual, crp.remote_port_qual); /* the CR named our socket */
    ck_assert_dat_ok(p->ep_query_func(sep, DAT_EP_FIELD_ALL, &ep_p));
    ck_assert_uint_eq(ep_p.local_port_qual, port);

    /* reject: PEER_REJECTED with the private data */
    DAT_EP_HANDLE cep2 = mk_ep(&c);
    ck_assert_dat_ok(p->ep_common_connect_func(cep2, (DAT_IA_ADDRESS_PTR)&a, 5000000, 0, NULL));
    cr = wait_cr(&s, s.cr, csp, port);
    ck_assert_dat_ok(p->cr_reject_func(cr, 3, "no"));
    DAT_EVENT ev = wait_ev(&c, c.conn, DAT_CONNECTION_EVENT_PEER_REJECTED);
    ck_assert_ptr_eq(ev.event_data.connect_event_data.ep_handle, cep2);
    ck_assert_int_eq(ep_state(&c, cep2), DAT_EP_STATE_DISCONNECTED);

    /* dat_ep_connect with conn qual = port reaches a CSP too */
    DAT_EP_HANDLE cep3 = mk_ep(&c);
    ck_assert_dat_ok(p->ep_connect_func(cep3, (DAT_IA_ADDRESS_PTR)&a, port, 5000000, 0, NULL, 0, 0));
    cr = wait_cr(&s, s.cr, csp, port);

    /* free with a CR pending: the CR lives on and can be accepted; new
     * requests find no listener */
    ck_assert_dat_ok(p->csp_free_func(csp));
    accept_cr(&s, cr, DAT_HANDLE_NULL, &c, cep3);
    DAT_EP_HANDLE cep4 = mk_ep(&c);
    ck_assert_dat_ok(p->ep_common_connect_func(cep4, (DAT_IA_ADDRESS_PTR)&a, 5000000, 0, NULL));
    wait_ev(&c, c.conn, DAT_CONNECTION_EVENT_NON_PEER_REJECTED);
    no_event(&s, s.cr, 100000);
    ck_assert_dat_ok(p->ep_disconnect_func(cep, DAT_CLOSE_ABRUPT_FLAG));
    wait_ev(&c, c.conn, DAT_CONNECTION_EVENT_DISCONNECTED);
    wait_ev(&s, s.conn, DAT_CONNECTION_EVENT_DISCONNECTED);
    side_close(&c);
    side_close(&s);
    ck_assert_uint_eq(sd_handle_live_count(), 0);
}
END_TEST

/* A wildcard CSP hears 127.0.0.2 too, but only the IA's requests become CRs. */
START_TEST(csp_wildcard_filters_other_addresses)
{
    DAT_PROVIDER *p = fx_provider("t-csp-wild", "lo", DAT_FALSE);
    struct side s, c;
    side_open(&s, p);
    side_open(&c, p);
    unsigned port = free_port(&s);
    DAT_CSP_HANDLE csp = mk_csp(&s, "0.0.0.0", port, s.cr, NULL);
    struct sockaddr_in other = v4("127.0.0.2", port), mine = v4("127.0.0.1", port);
    DAT_EP_HANDLE cep = mk_ep(&c);
    ck_assert_dat_ok(p->ep_common_connect_func(cep, (DAT_IA_ADDRESS_PTR)&other, 5000000, 0, NULL));
    wait_ev(&c, c.conn, DAT_CONNECTION_EVENT_NON_PEER_REJECTED);
    no_event(&s, s.cr, 100000);
    DAT_EP_HANDLE cep2 = mk_ep(&c);
    ck_assert_dat_ok(p->ep_common_connect_func(cep2, (DAT_IA_ADDRESS_PTR)&mine, 5000000, 0, NULL));
    DAT_CR_HANDLE cr = wait_cr(&s, s.cr, csp, port);
    accept_cr(&s, cr, DAT_HANDLE_NULL, &c, cep2);
    side_close(&c);
    side_close(&s);
    ck_assert_uint_eq(sd_handle_live_count(), 0);
}
END_TEST

/* PSP → CSP → RSP → PSP: the request travels, each hop a new CR on the
 * target's EVD, the old CR dead; the pdata and the initiator stay. */
START_TEST(handoff_psp_csp_rsp)
{
    DAT_PROVIDER *p = fx_provider("t-csp-ho", "lo", DAT_FALSE);
    struct side s, c;
    side_open(&s, p);
    side_open(&c, p);
    DAT_EVD_HANDLE e2, e3;
    ck_assert_dat_ok(p->evd_create_func(s.ia, 4, DAT_HANDLE_NULL, DAT_EVD_CR_FLAG, &e2));
    ck_assert_dat_ok(p->evd_create_func(s.ia, 4, DAT_HANDLE_NULL, DAT_EVD_CR_FLAG, &e3));
    DAT_CONN_QUAL pq;
    DAT_PSP_HANDLE psp;
    ck_assert_dat_ok(p->psp_create_any_func(s.ia, &pq, s.cr, DAT_PSP_CONSUMER_FLAG, &psp));
    unsigned cq;
    DAT_CSP_HANDLE csp = mk_csp(&s, "127.0.0.1", 0, e2, &cq);
    unsigned rq = free_port(&s);
    DAT_EP_HANDLE rep = mk_ep(&s);
    DAT_RSP_HANDLE rsp;
    ck_assert_dat_ok(p->rsp_create_func(s.ia, rq, rep, e3, &rsp));
    ck_assert_int_eq(ep_state(&s, rep), DAT_EP_STATE_RESERVED);

    DAT_EP_HANDLE cep = mk_ep(&c);
    struct sockaddr_in a = v4("127.0.0.1", (unsigned)pq);
    ck_assert_dat_ok(p->ep_connect_func(cep, (DAT_IA_ADDRESS_PTR)&a, pq, 5000000, 5, "trip", 0, 0));
    DAT_CR_HANDLE cr = wait_cr(&s, s.cr, psp, (unsigned)pq);
    DAT_CR_PARAM crp;
    ck_assert_dat_ok(p->cr_query_func(cr, DAT_CR_FIELD_ALL, &crp));
    DAT_PORT_QUAL rport = crp.remote_port_qual;

    /* bad handoffs leave the CR alone */
    ck_assert_dat_err(p->cr_handoff_func(DAT_HANDLE_NULL, cq), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_CR);
    ck_assert_dat_err(p->cr_handoff_func(psp, cq), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_CR);
    ck_assert_dat_err(p->cr_handoff_func(cr, 0), DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    ck_assert_dat_err(p->cr_handoff_func(cr, 65536 + (DAT_CONN_QUAL)cq), DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    ck_assert_dat_err(p->cr_handoff_func(cr, free_port(&s)), DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    ck_assert_dat_ok(p->cr_query_func(cr, DAT_CR_FIELD_ALL, &crp));

    /* PSP → CSP */
    ck_assert_dat_ok(p->cr_handoff_func(cr, cq));
    assert_cr_dead(&s, cr);
    ck_assert_dat_err(p->cr_handoff_func(cr, cq), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_CR);
    cr = wait_cr(&s, e2, csp, cq);
    ck_assert_dat_ok(p->cr_query_func(cr, DAT_CR_FIELD_ALL, &crp));
    ck_assert_str_eq(crp.private_data, "trip");
    ck_assert_uint_eq(crp.remote_port_qual, rport);
    ck_assert_ptr_null(crp.local_ep_handle);

    /* CSP → RSP: the RSP's EP comes with it */
    ck_assert_dat_ok(p->cr_handoff_func(cr, rq));
    assert_cr_dead(&s, cr);
    cr = wait_cr(&s, e3, rsp, rq);
    ck_assert_dat_ok(p->cr_query_func(cr, DAT_CR_FIELD_ALL, &crp));
    ck_assert_ptr_eq(crp.local_ep_handle, rep);
    ck_assert_str_eq(crp.private_data, "trip");
    ck_assert_int_eq(ep_state(&s, rep), DAT_EP_STATE_PASSIVE_CONNECTION_PENDING);

    /* RSP → PSP: the RSP's EP goes back to the consumer; the spent RSP is
     * no handoff target any more */
    ck_assert_dat_ok(p->cr_handoff_func(cr, pq));
    ck_assert_int_eq(ep_state(&s, rep), DAT_EP_STATE_UNCONNECTED);
    cr = wait_cr(&s, s.cr, psp, (unsigned)pq);
    ck_assert_dat_err(p->cr_handoff_func(cr, rq), DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    /* and a handoff to the SP it is on is just a new arrival there */
    ck_assert_dat_ok(p->cr_handoff_func(cr, pq));
    cr = wait_cr(&s, s.cr, psp, (unsigned)pq);
    accept_cr(&s, cr, rep, &c, cep);
    no_event(&c, c.conn, 50000);
    ck_assert_dat_ok(p->rsp_free_func(rsp));
    ck_assert_dat_ok(p->csp_free_func(csp));
    side_close(&c);
    side_close(&s);
    ck_assert_uint_eq(sd_handle_live_count(), 0);
}
END_TEST

/* Handoff of a provider-EP CR, to an RSP with a provider EP, to another IA
 * of the same record, not to an IA of another record; into a full EVD. */
START_TEST(handoff_provider_eps_other_ia_full_evd)
{
    DAT_PROVIDER *p = fx_provider("t-csp-ho2", "lo", DAT_FALSE);
    DAT_PROVIDER *p2 = fx_provider("t-csp-ho2-other", "lo", DAT_FALSE);
    struct side s, s2, x, c;
    side_open(&s, p);
    side_open(&s2, p);  /* same record: same interface adapter */
    side_open(&x, p2);  /* another record */
    side_open(&c, p);
    DAT_CONN_QUAL pq;
    DAT_PSP_HANDLE ppsp;
    ck_assert_dat_ok(p->psp_create_any_func(s.ia, &pq, s.cr, DAT_PSP_PROVIDER_FLAG, &ppsp));
    unsigned q2;
    DAT_CSP_HANDLE csp2 = mk_csp(&s2, "127.0.0.1", 0, s2.cr, &q2);
    unsigned qx;
    DAT_CSP_HANDLE cspx = mk_csp(&x, "127.0.0.1", 0, x.cr, &qx);

    DAT_EP_HANDLE cep = mk_ep(&c);
    struct sockaddr_in a = v4("127.0.0.1", (unsigned)pq);
    ck_assert_dat_ok(p->ep_connect_func(cep, (DAT_IA_ADDRESS_PTR)&a, pq, 5000000, 3, "pv", 0, 0));
    DAT_CR_HANDLE cr = wait_cr(&s, s.cr, ppsp, (unsigned)pq);
    DAT_CR_PARAM crp;
    ck_assert_dat_ok(p->cr_query_func(cr, DAT_CR_FIELD_ALL, &crp));
    DAT_EP_HANDLE pep = crp.local_ep_handle;
    ck_assert_int_eq(ep_state(&s, pep), DAT_EP_STATE_UNCONFIGURED_TENTATIVE);

    /* another record's CSP is another adapter: not a target */
    ck_assert_dat_err(p->cr_handoff_func(cr, qx), DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    /* to the same adapter's other IA: the provider EP goes back (dead) */
    ck_assert_dat_ok(p->cr_handoff_func(cr, q2));
    ck_assert_int_eq(DAT_GET_TYPE(p->ep_get_status_func(pep, NULL, NULL, NULL)), DAT_INVALID_HANDLE);
    cr = wait_cr(&s2, s2.cr, csp2, q2);
    DAT_EP_HANDLE sep2 = mk_ep(&s2);
    DAT_EP_HANDLE sep_wrong = mk_ep(&s);
    ck_assert_dat_err(p->cr_accept_func(cr, sep_wrong, 0, NULL), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP);
    accept_cr(&s2, cr, sep2, &c, cep);

    /* RSP with a provider EP as target: its EP is handed out */
    unsigned rq = free_port(&s);
    DAT_RSP_HANDLE rsp;
    ck_assert_dat_ok(p->rsp_create_func(s.ia, rq, DAT_HANDLE_NULL, s.cr, &rsp));
    DAT_EP_HANDLE cep2 = mk_ep(&c);
    ck_assert_dat_ok(p->ep_connect_func(cep2, (DAT_IA_ADDRESS_PTR)&a, pq, 5000000, 0, NULL, 0, 0));
    cr = wait_cr(&s, s.cr, ppsp, (unsigned)pq);
    ck_assert_dat_ok(p->cr_handoff_func(cr, rq));
    cr = wait_cr(&s, s.cr, rsp, rq);
    ck_assert_dat_ok(p->cr_query_func(cr, DAT_CR_FIELD_ALL, &crp));
    ck_assert_ptr_nonnull(crp.local_ep_handle);
    ck_assert_int_eq(ep_state(&s, crp.local_ep_handle), DAT_EP_STATE_UNCONFIGURED_PASSIVE);
    ck_assert_dat_ok(p->cr_reject_func(cr, 0, NULL));
    wait_ev(&c, c.conn, DAT_CONNECTION_EVENT_PEER_REJECTED);

    /* full target EVD: the handoff succeeds, the request is refused */
    DAT_EVD_HANDLE tiny;
    ck_assert_dat_ok(p->evd_create_func(s.ia, 1, DAT_HANDLE_NULL, DAT_EVD_CR_FLAG | DAT_EVD_SOFTWARE_FLAG, &tiny));
    DAT_EVENT se;
    memset(&se, 0, sizeof se);
    se.event_number = DAT_SOFTWARE_EVENT;
    ck_assert_dat_ok(p->evd_post_se_func(tiny, &se)); /* now full */
    unsigned tq;
    DAT_CSP_HANDLE tcsp = mk_csp(&s, "127.0.0.1", 0, tiny, &tq);
    DAT_EP_HANDLE cep4 = mk_ep(&c);
    ck_assert_dat_ok(p->ep_connect_func(cep4, (DAT_IA_ADDRESS_PTR)&a, pq, 5000000, 0, NULL, 0, 0));
    cr = wait_cr(&s, s.cr, ppsp, (unsigned)pq);
    ck_assert_dat_ok(p->cr_handoff_func(cr, tq));
    assert_cr_dead(&s, cr);
    DAT_EVENT ev = wait_ev(&c, c.conn, DAT_CONNECTION_EVENT_NON_PEER_REJECTED);
    ck_assert_ptr_eq(ev.event_data.connect_event_data.ep_handle, cep4);
    wait_ev(&s, tiny, DAT_SOFTWARE_EVENT);
    no_event(&s, tiny, 50000);
    ck_assert_dat_ok(p->csp_free_func(tcsp));
    ck_assert_dat_ok(p->csp_free_func(cspx));
    side_close(&c);
    side_close(&x);
    side_close(&s2);
    side_close(&s);
    ck_assert_uint_eq(sd_handle_live_count(), 0);
}
END_TEST

struct freer {
    DAT_PROVIDER *p;
    DAT_HANDLE sp;
    int csp;
};

static void *free_sp(void *arg)
{
    struct freer *f = arg;
    DAT_RETURN rc = f->csp ? f->p->csp_free_func(f->sp) : f->p->psp_free_func(f->sp);
    return (void *)(uintptr_t)rc;
}

/* Handoff racing the target's free: the handoff either fails with
 * INVALID_PARAMETER (CR kept) or succeeds, and then the request is a CR on
 * the target's EVD or refused; never a crash, a leak or a lost answer. */
START_TEST(handoff_races_target_free)
{
    DAT_PROVIDER *p = fx_provider("t-csp-race", "lo", DAT_FALSE);
    struct side s, c;
    side_open(&s, p);
    side_open(&c, p);
    DAT_EVD_HANDLE tevd;
    ck_assert_dat_ok(p->evd_create_func(s.ia, 8, DAT_HANDLE_NULL, DAT_EVD_CR_FLAG, &tevd));
    DAT_CONN_QUAL pq;
    DAT_PSP_HANDLE psp;
    ck_assert_dat_ok(p->psp_create_any_func(s.ia, &pq, s.cr, DAT_PSP_CONSUMER_FLAG, &psp));
    struct sockaddr_in a = v4("127.0.0.1", (unsigned)pq);
    DAT_EP_HANDLE cep = mk_ep(&c);
    int moved = 0, kept = 0;
    for (int i = 0; i < 40; i++) {
        ck_assert_dat_ok(p->ep_connect_func(cep, (DAT_IA_ADDRESS_PTR)&a, pq, 5000000, 0, NULL, 0, 0));
        DAT_CR_HANDLE cr = wait_cr(&s, s.cr, psp, (unsigned)pq);
        struct freer f = {p, DAT_HANDLE_NULL, i % 2};
        unsigned tq;
        if (f.csp) {
            f.sp = mk_csp(&s, "127.0.0.1", 0, tevd, &tq);
        } else {
            DAT_CONN_QUAL q;
            ck_assert_dat_ok(p->psp_create_any_func(s.ia, &q, tevd, DAT_PSP_CONSUMER_FLAG, &f.sp));
            tq = (unsigned)q;
        }
        pthread_t t;
        ck_assert_int_eq(pthread_create(&t, NULL, free_sp, &f), 0);
        DAT_RETURN rc = p->cr_handoff_func(cr, tq);
        void *frc;
        pthread_join(t, &frc);
        ck_assert_int_eq((DAT_RETURN)(uintptr_t)frc, DAT_SUCCESS);
        DAT_EVENT ev;
        DAT_COUNT n;
        if (rc == DAT_SUCCESS) {
            moved++;
            assert_cr_dead(&s, cr);
            if (p->evd_wait_func(tevd, 200000, 1, &ev, &n) == DAT_SUCCESS) {
                ck_assert_int_eq(ev.event_number, DAT_CONNECTION_REQUEST_EVENT);
                ck_assert_dat_ok(p->cr_reject_func(ev.event_data.cr_arrival_event_data.cr_handle, 0, NULL));
            }
        } else {
            kept++;
            ck_assert_dat_err(rc, DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
            ck_assert_dat_ok(p->cr_reject_func(cr, 0, NULL));
        }
        ck_assert_dat_ok(p->evd_wait_func(c.conn, 5000000, 1, &ev, &n));
        ck_assert_msg(ev.event_number == DAT_CONNECTION_EVENT_PEER_REJECTED ||
                          ev.event_number == DAT_CONNECTION_EVENT_NON_PEER_REJECTED,
                      "round %d: event 0x%x", i, (unsigned)ev.event_number);
        ck_assert_dat_ok(p->ep_reset_func(cep));
    }
    ck_assert_int_eq(moved + kept, 40);
    no_event(&s, tevd, 10000);
    side_close(&c);
    side_close(&s);
    ck_assert_uint_eq(sd_handle_live_count(), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("csp");
    TCase *tc = tcase_create("csp");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, slots_filled);
    tcase_add_test(tc, csp_create_errors);
    tcase_add_test(tc, csp_create_variants_query_free);
    tcase_add_test(tc, common_connect_errors);
    tcase_add_test(tc, csp_model_end_to_end);
    tcase_add_test(tc, csp_wildcard_filters_other_addresses);
    tcase_add_test(tc, handoff_psp_csp_rsp);
    tcase_add_test(tc, handoff_provider_eps_other_ia_full_evd);
    tcase_add_test(tc, handoff_races_target_free);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
