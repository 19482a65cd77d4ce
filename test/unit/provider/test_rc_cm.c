/* Return codes of the connection calls: dat_ep_connect,
 * dat_ep_common_connect, dat_ep_dup_connect, dat_ep_disconnect,
 * dat_cr_query, dat_cr_accept, dat_cr_reject, dat_cr_handoff
 * (L4573-4811, L6438-7020): every argument, every EP state, the private
 * data limit dat_ia_query's provider attributes report, and that a refused
 * call leaves the EP, the CR and the peer untouched. Bad EP handles for
 * every EP call are in test_rc_ep.c. */
#include <unistd.h>

#include "test/lib/rc_cm_fixture.h"

/* Data for private-data and buffer arguments. */
static _Alignas(64) char junk[256];

static unsigned char big[SD_MAX_PRIVATE_DATA + 16]; /* offsets up to +2 are read */

static DAT_COUNT max_pdata(struct side *s)
{
    DAT_PROVIDER_ATTR pa;
    ck_assert_dat_ok(s->p->ia_query_func(s->ia, NULL, 0, NULL, DAT_PROVIDER_FIELD_ALL, &pa));
    ck_assert_int_eq(pa.max_private_data_size, SD_MAX_PRIVATE_DATA);
    for (size_t i = 0; i < sizeof big; i++)
        big[i] = (unsigned char)(i * 7 + 1);
    return pa.max_private_data_size;
}

START_TEST(connect_errors)
{
    DAT_PROVIDER *p = fx_provider("t-rc-cm-c", "lo", DAT_FALSE);
    struct side s, c;
    side_open(&s, p);
    side_open(&c, p);
    DAT_COUNT maxpd = max_pdata(&c);
    DAT_CONN_QUAL q;
    DAT_PSP_HANDLE psp = mk_psp(&s, DAT_PSP_CONSUMER_FLAG, &q);
    DAT_EP_HANDLE cep = mk_ep(&c);
    struct sockaddr_in a = v4("127.0.0.1", 0);
    DAT_IA_ADDRESS_PTR ap = (DAT_IA_ADDRESS_PTR)&a;
    const DAT_QOS Q = DAT_QOS_BEST_EFFORT;
    const DAT_CONNECT_FLAGS F = DAT_CONNECT_DEFAULT_FLAG;
    ck_assert_dat_err(p->ep_connect_func(cep, NULL, q, 1000000, 0, NULL, Q, F), DAT_INVALID_ADDRESS,
                      DAT_INVALID_ADDRESS_MALFORMED);
    struct sockaddr un = {.sa_family = AF_UNIX};
    ck_assert_dat_err(p->ep_connect_func(cep, &un, q, 1000000, 0, NULL, Q, F), DAT_INVALID_ADDRESS,
                      DAT_INVALID_ADDRESS_UNSUPPORTED);
    ck_assert_dat_err(p->ep_connect_func(cep, ap, 0, 1000000, 0, NULL, Q, F), DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    ck_assert_dat_err(p->ep_connect_func(cep, ap, 0x10000, 1000000, 0, NULL, Q, F), DAT_INVALID_PARAMETER,
                      DAT_INVALID_ARG3); /* port 0 in the low 16 bits */
    ck_assert_dat_err(p->ep_connect_func(cep, ap, q, 0, 0, NULL, Q, F), DAT_INVALID_PARAMETER, DAT_INVALID_ARG4);
    ck_assert_dat_err(p->ep_connect_func(cep, ap, q, 1000000, -1, NULL, Q, F), DAT_INVALID_PARAMETER,
                      DAT_INVALID_ARG5);
    ck_assert_dat_err(p->ep_connect_func(cep, ap, q, 1000000, maxpd + 1, big, Q, F), DAT_INVALID_PARAMETER,
                      DAT_INVALID_ARG5);
    ck_assert_dat_err(p->ep_connect_func(cep, ap, q, 1000000, 4, NULL, Q, F), DAT_INVALID_PARAMETER,
                      DAT_INVALID_ARG6);
    ck_assert_dat_err(p->ep_connect_func(cep, ap, q, 1000000, 0, NULL, (DAT_QOS)0x100, F), DAT_INVALID_PARAMETER,
                      DAT_INVALID_ARG7);
    ck_assert_dat_err(p->ep_connect_func(cep, ap, q, 1000000, 0, NULL, Q, DAT_CONNECT_MULTIPATH_REQUIRED_FLAG),
                      DAT_MODEL_NOT_SUPPORTED, 0);
    ck_assert_dat_err(p->ep_connect_func(cep, ap, q, 1000000, 0, NULL, Q, (DAT_CONNECT_FLAGS)0x10),
                      DAT_INVALID_PARAMETER, DAT_INVALID_ARG8);
    /* No side effects: the EP is still Unconnected, nothing reached the PSP. */
    ck_assert_int_eq(ep_state(&c, cep), DAT_EP_STATE_UNCONNECTED);
    no_event(&s, s.cr, 100000);
    /* Only Unconnected connects (L6545); the subtype names the state. */
    for (size_t i = 1; i < fx_ep_nstates; i++) {
        fx_force_state(cep, fx_ep_states[i].s);
        ck_assert_dat_err(p->ep_connect_func(cep, ap, q, 1000000, 0, NULL, Q, F), DAT_INVALID_STATE, fx_ep_states[i].sub);
        ck_assert_int_eq(ep_state(&c, cep), fx_ep_states[i].s);
    }
    fx_force_state(cep, DAT_EP_STATE_UNCONNECTED);
    DAT_EP_HANDLE uep;
    ck_assert_dat_ok(p->ep_create_func(c.ia, DAT_HANDLE_NULL, c.dto, c.dto, c.conn, NULL, &uep));
    ck_assert_dat_err(p->ep_connect_func(uep, ap, q, 1000000, 0, NULL, Q, F), DAT_INVALID_STATE,
                      DAT_INVALID_STATE_EP_UNCONFIGURED);
    no_event(&s, s.cr, 50000);
    /* The largest private data goes; multipath "if possible" is accepted. */
    ck_assert_dat_ok(p->ep_connect_func(cep, ap, q, 5000000, maxpd, big, Q, DAT_CONNECT_MULTIPATH_FLAG));
    ck_assert_dat_err(p->ep_connect_func(cep, ap, q, 1000000, 0, NULL, Q, F), DAT_INVALID_STATE,
                      DAT_INVALID_STATE_EP_ACTCONNPENDING);
    DAT_CR_HANDLE cr = next_cr(&s);
    DAT_CR_PARAM cp;
    ck_assert_dat_ok(p->cr_query_func(cr, DAT_CR_FIELD_ALL, &cp));
    ck_assert_int_eq(cp.private_data_size, maxpd);
    ck_assert_int_eq(memcmp(cp.private_data, big, (size_t)maxpd), 0);
    /* The reject's private data (also the largest) reaches the initiator. */
    ck_assert_dat_ok(p->cr_reject_func(cr, maxpd, big + 1));
    DAT_EVENT ev = wait_ev(&c, c.conn, DAT_CONNECTION_EVENT_PEER_REJECTED);
    ck_assert_int_eq(ev.event_data.connect_event_data.private_data_size, maxpd);
    ck_assert_int_eq(memcmp(ev.event_data.connect_event_data.private_data, big + 1, (size_t)maxpd), 0);
    ck_assert_int_eq(ep_state(&c, cep), DAT_EP_STATE_DISCONNECTED);
    ck_assert_dat_err(p->ep_connect_func(cep, ap, q, 1000000, 0, NULL, Q, F), DAT_INVALID_STATE,
                      DAT_INVALID_STATE_EP_DISCONNECTED);
    ck_assert_dat_ok(p->ep_reset_func(cep));
    ck_assert_dat_ok(p->psp_free_func(psp));
    side_close(&c);
    side_close(&s);
}
END_TEST

START_TEST(common_connect_errors_and_comm)
{
    DAT_PROVIDER *p = fx_provider("t-rc-cm-cc", "lo", DAT_FALSE);
    struct side s, c;
    side_open(&s, p);
    side_open(&c, p);
    DAT_COUNT maxpd = max_pdata(&c);
    DAT_COMM tcp4 = {AF_INET, SOCK_STREAM, 0};
    DAT_CSP_HANDLE csp;
    ck_assert_dat_ok(p->csp_create_func(s.ia, &tcp4, NULL, s.cr, &csp));
    DAT_CSP_PARAM sp;
    ck_assert_dat_ok(p->csp_query_func(csp, DAT_CSP_FIELD_ALL, &sp));
    unsigned port = ntohs(((struct sockaddr_in *)sp.address_ptr)->sin_port);
    struct sockaddr_in a = v4("127.0.0.1", port);
    DAT_IA_ADDRESS_PTR ap = (DAT_IA_ADDRESS_PTR)&a;
    DAT_EP_HANDLE cep = mk_ep(&c);
    ck_assert_dat_err(p->ep_common_connect_func(cep, NULL, 1000000, 0, NULL), DAT_INVALID_PARAMETER,
                      DAT_INVALID_ARG2);
    ck_assert_dat_err(p->ep_common_connect_func(cep, ap, 0, 0, NULL), DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    ck_assert_dat_err(p->ep_common_connect_func(cep, ap, 1000000, -1, NULL), DAT_INVALID_PARAMETER,
                      DAT_INVALID_ARG4);
    ck_assert_dat_err(p->ep_common_connect_func(cep, ap, 1000000, maxpd + 1, big), DAT_INVALID_PARAMETER,
                      DAT_INVALID_ARG4);
    ck_assert_dat_err(p->ep_common_connect_func(cep, ap, 1000000, 1, NULL), DAT_INVALID_PARAMETER,
                      DAT_INVALID_ARG5);
    for (size_t i = 1; i < fx_ep_nstates; i++) {
        fx_force_state(cep, fx_ep_states[i].s);
        ck_assert_dat_err(p->ep_common_connect_func(cep, ap, 1000000, 0, NULL), DAT_INVALID_STATE, fx_ep_states[i].sub);
    }
    fx_force_state(cep, DAT_EP_STATE_UNCONNECTED);
    /* With a communicator set, only its family connects (L6658). */
    DAT_EP_PARAM v;
    memset(&v, 0, sizeof v);
    v.comm = tcp4;
    ck_assert_dat_ok(p->ep_modify_func(cep, DAT_EP_FIELD_COMM, &v));
    struct sockaddr_in6 a6;
    memset(&a6, 0, sizeof a6);
    a6.sin6_family = AF_INET6;
    a6.sin6_addr = in6addr_loopback;
    a6.sin6_port = htons((uint16_t)port);
    ck_assert_dat_err(p->ep_common_connect_func(cep, (DAT_IA_ADDRESS_PTR)&a6, 1000000, 0, NULL),
                      DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    ck_assert_int_eq(ep_state(&c, cep), DAT_EP_STATE_UNCONNECTED);
    no_event(&s, s.cr, 50000);
    /* ... and its own family goes through, with the largest private data. */
    ck_assert_dat_ok(p->ep_common_connect_func(cep, ap, 5000000, maxpd, big));
    DAT_CR_HANDLE cr = next_cr(&s);
    DAT_CR_PARAM cp;
    ck_assert_dat_ok(p->cr_query_func(cr, DAT_CR_FIELD_ALL, &cp));
    ck_assert_int_eq(cp.private_data_size, maxpd);
    DAT_EP_HANDLE sep = mk_ep(&s);
    ck_assert_dat_ok(p->cr_accept_func(cr, sep, maxpd, big + 2));
    DAT_EVENT ev = wait_ev(&c, c.conn, DAT_CONNECTION_EVENT_ESTABLISHED);
    ck_assert_int_eq(ev.event_data.connect_event_data.private_data_size, maxpd);
    ck_assert_int_eq(memcmp(ev.event_data.connect_event_data.private_data, big + 2, (size_t)maxpd), 0);
    wait_ev(&s, s.conn, DAT_CONNECTION_EVENT_ESTABLISHED);
    DAT_EP_PARAM q;
    ck_assert_dat_ok(p->ep_query_func(cep, DAT_EP_FIELD_COMM, &q));
    ck_assert_int_eq(q.comm.domain, AF_INET);
    /* Connected: no communicator change any more. */
    ck_assert_dat_err(p->ep_modify_func(cep, DAT_EP_FIELD_COMM, &v), DAT_INVALID_STATE,
                      DAT_INVALID_STATE_EP_CONNECTED);
    side_close(&c);
    side_close(&s);
}
END_TEST

START_TEST(dup_connect_errors)
{
    DAT_PROVIDER *p = fx_provider("t-rc-cm-dup", "lo", DAT_FALSE);
    DAT_PROVIDER *p2 = fx_provider("t-rc-cm-dup2", "lo", DAT_FALSE);
    struct side s, c, o;
    side_open(&s, p);
    side_open(&c, p);
    side_open(&o, p2);
    DAT_COUNT maxpd = max_pdata(&c);
    DAT_CONN_QUAL q;
    DAT_PSP_HANDLE psp = mk_psp(&s, DAT_PSP_CONSUMER_FLAG, &q);
    DAT_EP_HANDLE cep = mk_ep(&c), sep = mk_ep(&s);
    ck_assert_dat_ok(connect_to(&c, cep, q, 0, NULL));
    ck_assert_dat_ok(p->cr_accept_func(next_cr(&s), sep, 0, NULL));
    wait_ev(&c, c.conn, DAT_CONNECTION_EVENT_ESTABLISHED);
    wait_ev(&s, s.conn, DAT_CONNECTION_EVENT_ESTABLISHED);

    DAT_EP_HANDLE ep2 = mk_ep(&c), idle = mk_ep(&c), other = mk_ep(&o);
    const DAT_QOS Q = DAT_QOS_BEST_EFFORT;
    ck_assert_dat_err(p->ep_dup_connect_func(ep2, cep, 0, 0, NULL, Q), DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    ck_assert_dat_err(p->ep_dup_connect_func(ep2, cep, 1000000, -1, NULL, Q), DAT_INVALID_PARAMETER,
                      DAT_INVALID_ARG4);
    ck_assert_dat_err(p->ep_dup_connect_func(ep2, cep, 1000000, maxpd + 1, big, Q), DAT_INVALID_PARAMETER,
                      DAT_INVALID_ARG4);
    ck_assert_dat_err(p->ep_dup_connect_func(ep2, cep, 1000000, 2, NULL, Q), DAT_INVALID_PARAMETER,
                      DAT_INVALID_ARG5);
    ck_assert_dat_err(p->ep_dup_connect_func(ep2, cep, 1000000, 0, NULL, (DAT_QOS)0x100), DAT_INVALID_PARAMETER,
                      DAT_INVALID_ARG6);
    /* The duplicated EP must be of the same provider (L6806) ... */
    ck_assert_dat_err(p->ep_dup_connect_func(ep2, other, 1000000, 0, NULL, Q), DAT_INVALID_HANDLE,
                      DAT_INVALID_HANDLE_EP);
    /* ... connected, and the side that connected (a passive EP knows no
     * listening qualifier of its peer); its state names the subtype. */
    ck_assert_dat_err(p->ep_dup_connect_func(ep2, idle, 1000000, 0, NULL, Q), DAT_INVALID_STATE,
                      DAT_INVALID_STATE_EP_UNCONNECTED);
    ck_assert_dat_err(p->ep_dup_connect_func(ep2, sep, 1000000, 0, NULL, Q), DAT_INVALID_STATE,
                      DAT_INVALID_STATE_EP_CONNECTED);
    /* The connecting EP must be Unconnected. */
    for (size_t i = 1; i < fx_ep_nstates; i++) {
        fx_force_state(ep2, fx_ep_states[i].s);
        ck_assert_dat_err(p->ep_dup_connect_func(ep2, cep, 1000000, 0, NULL, Q), DAT_INVALID_STATE, fx_ep_states[i].sub);
    }
    fx_force_state(ep2, DAT_EP_STATE_UNCONNECTED);
    ck_assert_int_eq(ep_state(&c, cep), DAT_EP_STATE_CONNECTED);
    no_event(&s, s.cr, 50000);
    /* Success: the request reaches the same PSP, private data intact. */
    ck_assert_dat_ok(p->ep_dup_connect_func(ep2, cep, 5000000, maxpd, big, Q));
    DAT_EVENT ev = wait_ev(&s, s.cr, DAT_CONNECTION_REQUEST_EVENT);
    ck_assert_uint_eq(ev.event_data.cr_arrival_event_data.conn_qual, q);
    ck_assert_ptr_eq(ev.event_data.cr_arrival_event_data.sp_handle.psp_handle, psp);
    DAT_CR_PARAM cp;
    ck_assert_dat_ok(p->cr_query_func(ev.event_data.cr_arrival_event_data.cr_handle, DAT_CR_FIELD_ALL, &cp));
    ck_assert_int_eq(cp.private_data_size, maxpd);
    ck_assert_dat_ok(p->cr_reject_func(ev.event_data.cr_arrival_event_data.cr_handle, 0, NULL));
    wait_ev(&c, c.conn, DAT_CONNECTION_EVENT_PEER_REJECTED);
    side_close(&o);
    side_close(&c);
    side_close(&s);
}
END_TEST

START_TEST(disconnect_errors)
{
    DAT_PROVIDER *p = fx_provider("t-rc-cm-d", "lo", DAT_FALSE);
    struct side s, c;
    side_open(&s, p);
    side_open(&c, p);
    DAT_EP_HANDLE ep = mk_ep(&c);
    ck_assert_dat_err(p->ep_disconnect_func(ep, (DAT_CLOSE_FLAGS)2), DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    ck_assert_dat_err(p->ep_disconnect_func(ep, (DAT_CLOSE_FLAGS)-1), DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    /* L6946-6952: refused before a connection exists or while an RSP / CR
     * holds the EP; a no-op when Disconnected; otherwise it starts (no
     * connection object here, so nothing is sent). */
    for (size_t i = 0; i < fx_ep_nstates; i++) {
        DAT_EP_STATE st = fx_ep_states[i].s;
        bool refused = st == DAT_EP_STATE_UNCONNECTED || st == DAT_EP_STATE_UNCONFIGURED_UNCONNECTED ||
                       st == DAT_EP_STATE_RESERVED || st == DAT_EP_STATE_UNCONFIGURED_RESERVED ||
                       st == DAT_EP_STATE_PASSIVE_CONNECTION_PENDING || st == DAT_EP_STATE_UNCONFIGURED_PASSIVE ||
                       st == DAT_EP_STATE_TENTATIVE_CONNECTION_PENDING ||
                       st == DAT_EP_STATE_UNCONFIGURED_TENTATIVE;
        for (int g = 0; g < 2; g++) {
            fx_force_state(ep, st);
            DAT_RETURN rc = p->ep_disconnect_func(ep, g ? DAT_CLOSE_GRACEFUL_FLAG : DAT_CLOSE_ABRUPT_FLAG);
            if (refused) {
                ck_assert_dat_err(rc, DAT_INVALID_STATE, fx_ep_states[i].sub);
                ck_assert_int_eq(ep_state(&c, ep), st);
            } else {
                ck_assert_dat_ok(rc);
            }
        }
    }
    fx_force_state(ep, DAT_EP_STATE_UNCONNECTED);
    no_event(&c, c.conn, 50000);
    /* The real thing: connected, graceful, both sides DISCONNECTED; then
     * disconnect again is a no-op with no event. */
    DAT_CONN_QUAL q;
    DAT_PSP_HANDLE psp = mk_psp(&s, DAT_PSP_CONSUMER_FLAG, &q);
    DAT_EP_HANDLE cep = mk_ep(&c), sep = mk_ep(&s);
    ck_assert_dat_ok(connect_to(&c, cep, q, 0, NULL));
    ck_assert_dat_ok(p->cr_accept_func(next_cr(&s), sep, 0, NULL));
    wait_ev(&c, c.conn, DAT_CONNECTION_EVENT_ESTABLISHED);
    wait_ev(&s, s.conn, DAT_CONNECTION_EVENT_ESTABLISHED);
    ck_assert_dat_ok(p->ep_disconnect_func(cep, DAT_CLOSE_GRACEFUL_FLAG));
    wait_ev(&c, c.conn, DAT_CONNECTION_EVENT_DISCONNECTED);
    wait_ev(&s, s.conn, DAT_CONNECTION_EVENT_DISCONNECTED);
    ck_assert_dat_ok(p->ep_disconnect_func(cep, DAT_CLOSE_ABRUPT_FLAG));
    ck_assert_dat_ok(p->ep_disconnect_func(sep, DAT_CLOSE_GRACEFUL_FLAG));
    no_event(&c, c.conn, 50000);
    ck_assert_dat_ok(p->psp_free_func(psp));
    side_close(&c);
    side_close(&s);
}
END_TEST

/* ------------------------------------------------------------------- CR */

static void assert_cr_dead(struct side *s, DAT_CR_HANDLE cr)
{
    DAT_CR_PARAM cp;
    ck_assert_dat_err(s->p->cr_query_func(cr, DAT_CR_FIELD_ALL, &cp), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_CR);
    ck_assert_dat_err(s->p->cr_accept_func(cr, DAT_HANDLE_NULL, 0, NULL), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_CR);
    ck_assert_dat_err(s->p->cr_reject_func(cr, 0, NULL), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_CR);
    ck_assert_dat_err(s->p->cr_handoff_func(cr, 1234), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_CR);
}

START_TEST(cr_bad_handles_query)
{
    DAT_PROVIDER *p = fx_provider("t-rc-cm-crq", "lo", DAT_FALSE);
    struct side s, c;
    side_open(&s, p);
    side_open(&c, p);
    DAT_CONN_QUAL q;
    DAT_PSP_HANDLE psp = mk_psp(&s, DAT_PSP_CONSUMER_FLAG, &q);
    DAT_EP_HANDLE cep = mk_ep(&c);
    ck_assert_dat_ok(connect_to(&c, cep, q, 3, "ab"));
    DAT_CR_HANDLE cr = next_cr(&s);
    DAT_CR_HANDLE bad[] = {DAT_HANDLE_NULL, (DAT_CR_HANDLE)junk, (DAT_CR_HANDLE)cep, (DAT_CR_HANDLE)psp,
                           (DAT_CR_HANDLE)s.ia};
    DAT_CR_PARAM cp;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_dat_err(p->cr_query_func(bad[i], DAT_CR_FIELD_ALL, &cp), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_CR);
        ck_assert_dat_err(p->cr_accept_func(bad[i], mk_ep(&s), 0, NULL), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_CR);
        ck_assert_dat_err(p->cr_reject_func(bad[i], 0, NULL), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_CR);
        ck_assert_dat_err(p->cr_handoff_func(bad[i], q), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_CR);
    }
    ck_assert_dat_err(p->cr_query_func(cr, (DAT_CR_PARAM_MASK)(DAT_CR_FIELD_ALL + 1), &cp), DAT_INVALID_PARAMETER,
                      DAT_INVALID_ARG2);
    ck_assert_dat_err(p->cr_query_func(cr, (DAT_CR_PARAM_MASK)0x40000000, &cp), DAT_INVALID_PARAMETER,
                      DAT_INVALID_ARG2);
    ck_assert_dat_err(p->cr_query_func(cr, DAT_CR_FIELD_ALL, NULL), DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    ck_assert_dat_ok(p->cr_query_func(cr, DAT_CR_FIELD_ALL, &cp));
    ck_assert_int_eq(cp.private_data_size, 3);
    ck_assert_str_eq((char *)cp.private_data, "ab");
    ck_assert_ptr_null(cp.local_ep_handle);
    ck_assert_dat_ok(p->cr_reject_func(cr, 0, NULL));
    wait_ev(&c, c.conn, DAT_CONNECTION_EVENT_PEER_REJECTED);
    assert_cr_dead(&s, cr);
    side_close(&c);
    side_close(&s);
}
END_TEST

START_TEST(cr_accept_errors)
{
    DAT_PROVIDER *p = fx_provider("t-rc-cm-cra", "lo", DAT_FALSE);
    struct side s, c;
    side_open(&s, p);
    side_open(&c, p);
    DAT_COUNT maxpd = max_pdata(&s);
    DAT_CONN_QUAL q;
    DAT_PSP_HANDLE psp = mk_psp(&s, DAT_PSP_CONSUMER_FLAG, &q);
    (void)psp;
    DAT_EP_HANDLE cep = mk_ep(&c);
    ck_assert_dat_ok(connect_to(&c, cep, q, 0, NULL));
    DAT_CR_HANDLE cr = next_cr(&s);
    DAT_EP_HANDLE sep = mk_ep(&s), dead = mk_ep(&s);
    ck_assert_dat_ok(p->ep_free_func(dead));
    /* EP handles: garbage, another type, freed, another IA's EP; and no EP
     * for a CR that brings none. */
    DAT_EP_HANDLE bad[] = {(DAT_EP_HANDLE)junk, (DAT_EP_HANDLE)s.pz, dead, mk_ep(&c), DAT_HANDLE_NULL};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ck_assert_dat_err(p->cr_accept_func(cr, bad[i], 0, NULL), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP);
    ck_assert_dat_err(p->cr_accept_func(cr, sep, -1, NULL), DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    ck_assert_dat_err(p->cr_accept_func(cr, sep, maxpd + 1, big), DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    ck_assert_dat_err(p->cr_accept_func(cr, sep, 1, NULL), DAT_INVALID_PARAMETER, DAT_INVALID_ARG4);
    /* The accepting EP must be Unconnected (L4664) and configured (L4662). */
    for (size_t i = 1; i < fx_ep_nstates; i++) {
        fx_force_state(sep, fx_ep_states[i].s);
        ck_assert_dat_err(p->cr_accept_func(cr, sep, 0, NULL), DAT_INVALID_STATE, fx_ep_states[i].sub);
        ck_assert_int_eq(ep_state(&s, sep), fx_ep_states[i].s);
    }
    fx_force_state(sep, DAT_EP_STATE_UNCONNECTED);
    DAT_EP_HANDLE uep;
    ck_assert_dat_ok(p->ep_create_func(s.ia, s.pz, s.dto, s.dto, DAT_HANDLE_NULL, NULL, &uep));
    ck_assert_dat_err(p->cr_accept_func(cr, uep, 0, NULL), DAT_INVALID_STATE, DAT_INVALID_STATE_EP_UNCONFIGURED);
    /* An EP an RSP reserved is not the consumer's to give. */
    DAT_EP_HANDLE rep = mk_ep(&s);
    DAT_RSP_HANDLE rsp;
    ck_assert_dat_ok(p->rsp_create_func(s.ia, free_port(&s), rep, s.cr, &rsp));
    ck_assert_dat_err(p->cr_accept_func(cr, rep, 0, NULL), DAT_INVALID_STATE, DAT_INVALID_STATE_EP_RESERVED);
    ck_assert_dat_ok(p->rsp_free_func(rsp));
    /* None of that answered the request: CR alive, initiator still waiting. */
    DAT_CR_PARAM cp;
    ck_assert_dat_ok(p->cr_query_func(cr, DAT_CR_FIELD_ALL, &cp));
    ck_assert_int_eq(ep_state(&c, cep), DAT_EP_STATE_ACTIVE_CONNECTION_PENDING);
    no_event(&c, c.conn, 50000);
    ck_assert_dat_ok(p->cr_accept_func(cr, sep, maxpd, big));
    DAT_EVENT ev = wait_ev(&c, c.conn, DAT_CONNECTION_EVENT_ESTABLISHED);
    ck_assert_int_eq(ev.event_data.connect_event_data.private_data_size, maxpd);
    wait_ev(&s, s.conn, DAT_CONNECTION_EVENT_ESTABLISHED);
    assert_cr_dead(&s, cr);

    /* A CR that brings its EP (RSP): only that EP or NULL. */
    DAT_CONN_QUAL rq = free_port(&s);
    DAT_EP_HANDLE rsep = mk_ep(&s), cep2 = mk_ep(&c);
    ck_assert_dat_ok(p->rsp_create_func(s.ia, rq, rsep, s.cr, &rsp));
    ck_assert_dat_ok(connect_to(&c, cep2, rq, 0, NULL));
    cr = next_cr(&s);
    ck_assert_int_eq(ep_state(&s, rsep), DAT_EP_STATE_PASSIVE_CONNECTION_PENDING);
    ck_assert_dat_err(p->cr_accept_func(cr, mk_ep(&s), 0, NULL), DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    ck_assert_dat_ok(p->cr_accept_func(cr, rsep, 0, NULL));
    wait_ev(&c, c.conn, DAT_CONNECTION_EVENT_ESTABLISHED);
    wait_ev(&s, s.conn, DAT_CONNECTION_EVENT_ESTABLISHED);
    ck_assert_dat_ok(p->rsp_free_func(rsp));

    /* A provider EP is accepted only once configured. */
    DAT_CONN_QUAL pq;
    DAT_PSP_HANDLE ppsp = mk_psp(&s, DAT_PSP_PROVIDER_FLAG, &pq);
    DAT_EP_HANDLE cep3 = mk_ep(&c);
    ck_assert_dat_ok(connect_to(&c, cep3, pq, 0, NULL));
    cr = next_cr(&s);
    ck_assert_dat_ok(p->cr_query_func(cr, DAT_CR_FIELD_ALL, &cp));
    DAT_EP_HANDLE pep = cp.local_ep_handle;
    ck_assert_ptr_nonnull(pep);
    ck_assert_int_eq(ep_state(&s, pep), DAT_EP_STATE_UNCONFIGURED_TENTATIVE);
    ck_assert_dat_err(p->cr_accept_func(cr, DAT_HANDLE_NULL, 0, NULL), DAT_INVALID_STATE,
                      DAT_INVALID_STATE_EP_UNCONFTENTATIVE);
    ck_assert_dat_err(p->ep_free_func(pep), DAT_INVALID_STATE, DAT_INVALID_STATE_EP_UNCONFTENTATIVE);
    DAT_EP_PARAM v;
    memset(&v, 0, sizeof v);
    v.pz_handle = s.pz;
    v.recv_evd_handle = v.request_evd_handle = s.dto;
    v.connect_evd_handle = s.conn;
    ck_assert_dat_ok(p->ep_modify_func(pep,
                                       DAT_EP_FIELD_PZ_HANDLE | DAT_EP_FIELD_RECV_EVD_HANDLE |
                                           DAT_EP_FIELD_REQUEST_EVD_HANDLE | DAT_EP_FIELD_CONNECT_EVD_HANDLE,
                                       &v));
    ck_assert_int_eq(ep_state(&s, pep), DAT_EP_STATE_TENTATIVE_CONNECTION_PENDING);
    ck_assert_dat_err(p->ep_free_func(pep), DAT_INVALID_STATE, DAT_INVALID_STATE_EP_TENTCONNPENDING);
    ck_assert_dat_err(p->cr_accept_func(cr, mk_ep(&s), 0, NULL), DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    ck_assert_dat_ok(p->cr_accept_func(cr, pep, 0, NULL)); /* its own EP named: accepted like NULL */
    wait_ev(&c, c.conn, DAT_CONNECTION_EVENT_ESTABLISHED);
    wait_ev(&s, s.conn, DAT_CONNECTION_EVENT_ESTABLISHED);
    ck_assert_dat_ok(p->psp_free_func(ppsp));
    side_close(&c);
    side_close(&s);
}
END_TEST

START_TEST(cr_reject_errors)
{
    DAT_PROVIDER *p = fx_provider("t-rc-cm-crr", "lo", DAT_FALSE);
    struct side s, c;
    side_open(&s, p);
    side_open(&c, p);
    DAT_COUNT maxpd = max_pdata(&s);
    DAT_CONN_QUAL q;
    mk_psp(&s, DAT_PSP_CONSUMER_FLAG, &q);
    DAT_EP_HANDLE cep = mk_ep(&c);
    ck_assert_dat_ok(connect_to(&c, cep, q, 0, NULL));
    DAT_CR_HANDLE cr = next_cr(&s);
    ck_assert_dat_err(p->cr_reject_func(cr, -1, NULL), DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    ck_assert_dat_err(p->cr_reject_func(cr, maxpd + 1, big), DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    ck_assert_dat_err(p->cr_reject_func(cr, 5, NULL), DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    DAT_CR_PARAM cp;
    ck_assert_dat_ok(p->cr_query_func(cr, DAT_CR_FIELD_ALL, &cp));
    no_event(&c, c.conn, 50000);
    ck_assert_dat_ok(p->cr_reject_func(cr, 0, NULL));
    DAT_EVENT ev = wait_ev(&c, c.conn, DAT_CONNECTION_EVENT_PEER_REJECTED);
    ck_assert_int_eq(ev.event_data.connect_event_data.private_data_size, 0);
    assert_cr_dead(&s, cr);

    /* RSP: reject returns its EP to the consumer (L4740); provider EP dies. */
    DAT_CONN_QUAL rq = free_port(&s);
    DAT_EP_HANDLE rsep = mk_ep(&s);
    DAT_RSP_HANDLE rsp;
    ck_assert_dat_ok(p->rsp_create_func(s.ia, rq, rsep, s.cr, &rsp));
    ck_assert_dat_ok(p->ep_reset_func(cep));
    ck_assert_dat_ok(connect_to(&c, cep, rq, 0, NULL));
    cr = next_cr(&s);
    ck_assert_dat_err(p->ep_free_func(rsep), DAT_INVALID_STATE, DAT_INVALID_STATE_EP_PASSCONNPENDING);
    ck_assert_dat_err(p->ep_reset_func(rsep), DAT_INVALID_STATE, DAT_INVALID_STATE_EP_PASSCONNPENDING);
    ck_assert_dat_err(p->ep_disconnect_func(rsep, DAT_CLOSE_ABRUPT_FLAG), DAT_INVALID_STATE,
                      DAT_INVALID_STATE_EP_PASSCONNPENDING);
    /* Table 5 on a really passive EP: EVDs yes, PZ and local address no. */
    DAT_EP_PARAM v;
    ck_assert_dat_ok(p->ep_query_func(rsep, DAT_EP_FIELD_ALL, &v));
    ck_assert_dat_ok(p->ep_modify_func(rsep, DAT_EP_FIELD_RECV_EVD_HANDLE | DAT_EP_FIELD_EP_ATTR_QOS, &v));
    ck_assert_dat_err(p->ep_modify_func(rsep, DAT_EP_FIELD_PZ_HANDLE, &v), DAT_INVALID_STATE,
                      DAT_INVALID_STATE_EP_PASSCONNPENDING);
    ck_assert_dat_err(p->ep_modify_func(rsep, DAT_EP_FIELD_LOCAL_IA_ADDRESS_PTR, &v), DAT_INVALID_STATE,
                      DAT_INVALID_STATE_EP_PASSCONNPENDING);
    ck_assert_dat_ok(p->cr_reject_func(cr, 0, NULL));
    wait_ev(&c, c.conn, DAT_CONNECTION_EVENT_PEER_REJECTED);
    ck_assert_int_eq(ep_state(&s, rsep), DAT_EP_STATE_UNCONNECTED);
    ck_assert_dat_ok(p->rsp_free_func(rsp));
    ck_assert_dat_ok(p->ep_free_func(rsep));
    side_close(&c);
    side_close(&s);
}
END_TEST

START_TEST(cr_handoff_errors)
{
    DAT_PROVIDER *p = fx_provider("t-rc-cm-crh", "lo", DAT_FALSE);
    struct side s, c;
    side_open(&s, p);
    side_open(&c, p);
    DAT_CONN_QUAL q, q2;
    mk_psp(&s, DAT_PSP_CONSUMER_FLAG, &q);
    DAT_EVD_HANDLE cr2evd;
    ck_assert_dat_ok(p->evd_create_func(s.ia, 4, NULL, DAT_EVD_CR_FLAG, &cr2evd));
    DAT_PSP_HANDLE psp2;
    ck_assert_dat_ok(p->psp_create_any_func(s.ia, &q2, cr2evd, DAT_PSP_CONSUMER_FLAG, &psp2));
    DAT_EP_HANDLE cep = mk_ep(&c);
    ck_assert_dat_ok(connect_to(&c, cep, q, 2, "h"));
    DAT_CR_HANDLE cr = next_cr(&s);
    ck_assert_dat_err(p->cr_handoff_func(cr, 0), DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    ck_assert_dat_err(p->cr_handoff_func(cr, 0x20000), DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    ck_assert_dat_err(p->cr_handoff_func(cr, free_port(&s)), DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    DAT_CR_PARAM cp;
    ck_assert_dat_ok(p->cr_query_func(cr, DAT_CR_FIELD_ALL, &cp));
    ck_assert_int_eq(ep_state(&c, cep), DAT_EP_STATE_ACTIVE_CONNECTION_PENDING);
    ck_assert_dat_ok(p->cr_handoff_func(cr, q2));
    assert_cr_dead(&s, cr);
    DAT_EVENT ev = wait_ev(&s, cr2evd, DAT_CONNECTION_REQUEST_EVENT);
    ck_assert_ptr_eq(ev.event_data.cr_arrival_event_data.sp_handle.psp_handle, psp2);
    ck_assert_uint_eq(ev.event_data.cr_arrival_event_data.conn_qual, q2);
    DAT_CR_HANDLE cr2 = ev.event_data.cr_arrival_event_data.cr_handle;
    ck_assert_dat_ok(p->cr_query_func(cr2, DAT_CR_FIELD_ALL, &cp));
    ck_assert_int_eq(cp.private_data_size, 2);
    ck_assert_dat_ok(p->cr_accept_func(cr2, mk_ep(&s), 0, NULL));
    wait_ev(&c, c.conn, DAT_CONNECTION_EVENT_ESTABLISHED);
    side_close(&c);
    side_close(&s);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("rc_cm");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, connect_errors);
    tcase_add_test(tc, common_connect_errors_and_comm);
    tcase_add_test(tc, dup_connect_errors);
    tcase_add_test(tc, disconnect_errors);
    tcase_add_test(tc, cr_bad_handles_query);
    tcase_add_test(tc, cr_accept_errors);
    tcase_add_test(tc, cr_reject_errors);
    tcase_add_test(tc, cr_handoff_errors);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int nf = srunner_ntests_failed(sr);
    srunner_free(sr);
    return nf == 0 ? 0 : 1;
}
