/* Connection management through the provider table: two IAs on 127.0.0.1
 * in one process. PSP/RSP/CR, connect/accept/reject, events and their
 * private data, disconnect from either side, timeouts, reset and reuse. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <errno.h>
#include <pthread.h>

#include "lib/provider/ep.h"
#include "test/lib/prov_fixture.h"

#include "test/lib/cm_fixture.h"

/* Client `c` connects to server `s` (PSP on *port) and the server accepts
 * with sep; pdata both ways of `n` bytes. Returns with both CONNECTED. */
static void connect_pair(struct side *c, DAT_EP_HANDLE cep, struct side *s, DAT_EP_HANDLE sep, DAT_PSP_HANDLE psp,
                         DAT_CONN_QUAL port, int n)
{
    unsigned char pd[SD_MAX_PRIVATE_DATA];
    for (int i = 0; i < n; i++)
        pd[i] = (unsigned char)(i + 1);
    struct sockaddr_in a = v4("127.0.0.1", 0);
    ck_assert_dat_ok(c->p->ep_connect_func(cep, (DAT_IA_ADDRESS_PTR)&a, port, 5000000, n, n ? pd : NULL,
                                           DAT_QOS_BEST_EFFORT, DAT_CONNECT_DEFAULT_FLAG));
    ck_assert_int_eq(ep_state(c, cep), DAT_EP_STATE_ACTIVE_CONNECTION_PENDING);
    DAT_EVENT ev = wait_ev(s, s->cr, DAT_CONNECTION_REQUEST_EVENT);
    const DAT_CR_ARRIVAL_EVENT_DATA *d = &ev.event_data.cr_arrival_event_data;
    ck_assert_uint_eq(d->conn_qual, port);
    ck_assert_ptr_eq(d->sp_handle.psp_handle, psp);
    ck_assert_ptr_nonnull(d->local_ia_address_ptr);
    ck_assert_int_eq(((struct sockaddr_in *)d->local_ia_address_ptr)->sin_addr.s_addr, htonl(INADDR_LOOPBACK));
    DAT_CR_PARAM cp;
    memset(&cp, 0, sizeof cp);
    ck_assert_dat_ok(s->p->cr_query_func(d->cr_handle, (DAT_CR_PARAM_MASK)DAT_CSP_FIELD_ALL, &cp));
    ck_assert_int_eq(cp.private_data_size, n);
    ck_assert_ptr_nonnull(cp.remote_ia_address_ptr);
    ck_assert_int_eq(((struct sockaddr_in *)cp.remote_ia_address_ptr)->sin_family, AF_INET);
    ck_assert_uint_ne(cp.remote_port_qual, 0);
    unsigned char *rp = cp.private_data;
    for (int i = 0; i < n; i++) {
        ck_assert_int_eq(rp[i], (unsigned char)(i + 1));
        rp[i]++; /* dtest modifies the CR's buffer in place and sends it back */
    }
    ck_assert_dat_ok(s->p->cr_accept_func(d->cr_handle, sep, n, n ? cp.private_data : NULL));
    ev = wait_ev(c, c->conn, DAT_CONNECTION_EVENT_ESTABLISHED);
    ck_assert_ptr_eq(ev.event_data.connect_event_data.ep_handle, cep);
    ck_assert_int_eq(ev.event_data.connect_event_data.private_data_size, n);
    rp = ev.event_data.connect_event_data.private_data;
    for (int i = 0; i < n; i++)
        ck_assert_int_eq(rp[i], (unsigned char)(i + 2));
    ev = wait_ev(s, s->conn, DAT_CONNECTION_EVENT_ESTABLISHED);
    ck_assert_ptr_eq(ev.event_data.connect_event_data.ep_handle, sep);
    ck_assert_int_eq(ep_state(c, cep), DAT_EP_STATE_CONNECTED);
    ck_assert_int_eq(ep_state(s, sep), DAT_EP_STATE_CONNECTED);
}

START_TEST(ep_create_query_errors)
{
    DAT_PROVIDER *p = fx_provider("t-cm-ep", "lo", DAT_FALSE);
    struct side s;
    side_open(&s, p);
    DAT_EP_HANDLE ep;
    ck_assert_dat_err(p->ep_create_func(s.ia, s.pz, s.dto, s.dto, s.conn, NULL, NULL), DAT_INVALID_PARAMETER,
                      DAT_INVALID_ARG7);
    ck_assert_dat_err(p->ep_create_func(s.ia, s.pz, s.cr, s.dto, s.conn, NULL, &ep), DAT_INVALID_HANDLE,
                      DAT_INVALID_HANDLE_EVD_RECV);
    ck_assert_dat_err(p->ep_create_func(s.ia, s.pz, s.dto, s.conn, s.conn, NULL, &ep), DAT_INVALID_HANDLE,
                      DAT_INVALID_HANDLE_EVD_REQUEST);
    ck_assert_dat_err(p->ep_create_func(s.ia, s.pz, s.dto, s.dto, s.dto, NULL, &ep), DAT_INVALID_HANDLE,
                      DAT_INVALID_HANDLE_EVD_CONN);
    ck_assert_dat_err(p->ep_create_func(s.ia, s.dto, s.dto, s.dto, s.conn, NULL, &ep), DAT_INVALID_HANDLE,
                      DAT_INVALID_HANDLE_PZ);
    DAT_EP_ATTR a;
    DAT_EP_PARAM q;
    /* NULL attributes: provider defaults */
    ep = mk_ep(&s);
    ck_assert_dat_ok(p->ep_query_func(ep, DAT_EP_FIELD_ALL, &q));
    ck_assert_ptr_eq(q.ia_handle, s.ia);
    ck_assert_int_eq(q.ep_state, DAT_EP_STATE_UNCONNECTED);
    ck_assert_ptr_eq(q.pz_handle, s.pz);
    ck_assert_ptr_eq(q.recv_evd_handle, s.dto);
    ck_assert_ptr_eq(q.request_evd_handle, s.dto);
    ck_assert_ptr_eq(q.connect_evd_handle, s.conn);
    ck_assert_ptr_null(q.srq_handle);
    ck_assert_int_eq(q.ep_attr.service_type, DAT_SERVICE_TYPE_RC);
    ck_assert_int_gt(q.ep_attr.max_recv_dtos, 0);
    ck_assert_int_gt(q.ep_attr.max_request_dtos, 0);
    ck_assert_int_gt(q.ep_attr.max_message_size, 0);
    ck_assert_int_eq(q.ep_attr.srq_soft_hw, DAT_HW_DEFAULT);
    ck_assert_ptr_nonnull(q.local_ia_address_ptr);
    ck_assert_int_eq(q.local_ia_address_ptr->sa_family, AF_INET);
    ck_assert_dat_err(p->ep_query_func(ep, DAT_EP_FIELD_ALL + 1, &q), DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    ck_assert_dat_err(p->ep_query_func(ep, DAT_EP_FIELD_ALL, NULL), DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    /* The EVDs and PZ are in use */
    ck_assert_int_eq(DAT_GET_TYPE(p->evd_free_func(s.conn)), DAT_INVALID_STATE);
    ck_assert_int_eq(DAT_GET_TYPE(p->pz_free_func(s.pz)), DAT_INVALID_STATE);
    DAT_BOOLEAN ri, qi;
    ck_assert_dat_ok(p->ep_get_status_func(ep, NULL, &ri, &qi));
    ck_assert_int_eq(ri, DAT_TRUE);
    ck_assert_int_eq(qi, DAT_TRUE);
    ck_assert_dat_ok(p->ep_get_status_func(ep, NULL, NULL, NULL));
    /* modify: attributes before connecting; never the state */
    memset(&q, 0, sizeof q);
    q.ep_attr.max_recv_dtos = 8;
    ck_assert_dat_ok(p->ep_modify_func(ep, DAT_EP_FIELD_EP_ATTR_MAX_RECV_DTOS, &q));
    ck_assert_dat_ok(p->ep_query_func(ep, DAT_EP_FIELD_EP_ATTR_ALL, &q));
    ck_assert_int_eq(q.ep_attr.max_recv_dtos, 8);
    ck_assert_dat_err(p->ep_modify_func(ep, DAT_EP_FIELD_EP_STATE, &q), DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    q.ep_attr.max_recv_dtos = SD_MAX_DTO_PER_EP + 1;
    ck_assert_dat_err(p->ep_modify_func(ep, DAT_EP_FIELD_EP_ATTR_MAX_RECV_DTOS, &q), DAT_INVALID_PARAMETER,
                      DAT_INVALID_ARG3);
    /* disconnect / reset in Unconnected */
    ck_assert_dat_err(p->ep_disconnect_func(ep, DAT_CLOSE_ABRUPT_FLAG), DAT_INVALID_STATE,
                      DAT_INVALID_STATE_EP_UNCONNECTED);
    ck_assert_dat_ok(p->ep_reset_func(ep));
    ck_assert_dat_ok(p->ep_free_func(ep));
    ck_assert_dat_err(p->ep_free_func(ep), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP);

    /* bad attributes */
    struct {
        size_t off;
        DAT_COUNT v;
    } bad[] = {
        {offsetof(DAT_EP_ATTR, max_recv_dtos), -1},
        {offsetof(DAT_EP_ATTR, max_request_dtos), SD_MAX_DTO_PER_EP + 1},
        {offsetof(DAT_EP_ATTR, max_recv_iov), SD_MAX_IOV_PER_DTO + 1},
        {offsetof(DAT_EP_ATTR, max_request_iov), -3},
        {offsetof(DAT_EP_ATTR, max_rdma_read_in), SD_MAX_RDMA_READ_PER_EP_IN + 1},
        {offsetof(DAT_EP_ATTR, max_rdma_read_out), SD_MAX_RDMA_READ_PER_EP_OUT + 1},
        {offsetof(DAT_EP_ATTR, max_rdma_read_iov), SD_MAX_IOV_PER_RDMA_READ + 1},
        {offsetof(DAT_EP_ATTR, max_rdma_write_iov), SD_MAX_IOV_PER_RDMA_WRITE + 1},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        memset(&a, 0, sizeof a);
        a.max_recv_dtos = a.max_request_dtos = 4;
        a.max_recv_iov = a.max_request_iov = 1;
        *(DAT_COUNT *)((char *)&a + bad[i].off) = bad[i].v;
        ck_assert_dat_err(p->ep_create_func(s.ia, s.pz, s.dto, s.dto, s.conn, &a, &ep), DAT_INVALID_PARAMETER,
                          DAT_INVALID_ARG6);
    }
    memset(&a, 0, sizeof a);
    a.max_message_size = SD_MAX_MESSAGE_SIZE + 1u;
    ck_assert_dat_err(p->ep_create_func(s.ia, s.pz, s.dto, s.dto, s.conn, &a, &ep), DAT_INVALID_PARAMETER,
                      DAT_INVALID_ARG6);
    a.max_message_size = 4096;
    a.service_type = (DAT_SERVICE_TYPE)7;
    ck_assert_dat_err(p->ep_create_func(s.ia, s.pz, s.dto, s.dto, s.conn, &a, &ep), DAT_INVALID_PARAMETER,
                      DAT_INVALID_ARG6);
    /* explicit attributes are kept exactly */
    memset(&a, 0, sizeof a);
    a.max_message_size = 4096;
    a.max_rdma_size = 65536;
    a.max_recv_dtos = 3;
    a.max_request_dtos = 5;
    a.max_recv_iov = a.max_request_iov = 1;
    a.max_rdma_read_in = a.max_rdma_read_out = 4;
    ck_assert_dat_ok(p->ep_create_func(s.ia, s.pz, s.dto, s.dto, s.conn, &a, &ep));
    ck_assert_dat_ok(p->ep_query_func(ep, DAT_EP_FIELD_EP_ATTR_ALL, &q));
    ck_assert_uint_eq(q.ep_attr.max_message_size, 4096);
    ck_assert_uint_eq(q.ep_attr.max_rdma_size, 65536);
    ck_assert_int_eq(q.ep_attr.max_rdma_read_in, 4);
    ck_assert_int_ge(q.ep_attr.max_recv_dtos, 3);
    ck_assert_dat_ok(p->ep_free_func(ep));

    /* deferred configuration: no PZ */
    ck_assert_dat_ok(p->ep_create_func(s.ia, DAT_HANDLE_NULL, s.dto, s.dto, s.conn, NULL, &ep));
    ck_assert_int_eq(ep_state(&s, ep), DAT_EP_STATE_UNCONFIGURED_UNCONNECTED);
    struct sockaddr_in lo = v4("127.0.0.1", 0);
    ck_assert_dat_err(p->ep_connect_func(ep, (DAT_IA_ADDRESS_PTR)&lo, 4000, 1000000, 0, NULL, 0, 0),
                      DAT_INVALID_STATE, DAT_INVALID_STATE_EP_UNCONFIGURED);
    memset(&q, 0, sizeof q);
    q.pz_handle = s.pz;
    ck_assert_dat_ok(p->ep_modify_func(ep, DAT_EP_FIELD_PZ_HANDLE, &q));
    ck_assert_int_eq(ep_state(&s, ep), DAT_EP_STATE_UNCONNECTED);
    ck_assert_dat_ok(p->ep_free_func(ep));
    side_close(&s);
    ck_assert_uint_eq(sd_handle_live_count(), 0);
}
END_TEST

START_TEST(psp_create_query_free)
{
    DAT_PROVIDER *p = fx_provider("t-cm-psp", "lo", DAT_FALSE);
    struct side s;
    side_open(&s, p);
    DAT_PSP_HANDLE psp, psp2;
    DAT_CONN_QUAL q = 0;
    ck_assert_dat_ok(p->psp_create_any_func(s.ia, &q, s.cr, DAT_PSP_CONSUMER_FLAG, &psp));
    ck_assert_uint_ge(q, 1024);
    ck_assert_uint_le(q, 65535);
    DAT_PSP_PARAM pp;
    ck_assert_dat_ok(p->psp_query_func(psp, DAT_PSP_FIELD_ALL, &pp));
    ck_assert_ptr_eq(pp.ia_handle, s.ia);
    ck_assert_uint_eq(pp.conn_qual, q);
    ck_assert_ptr_eq(pp.evd_handle, s.cr);
    ck_assert_int_eq(pp.psp_flags, DAT_PSP_CONSUMER_FLAG);
    ck_assert_dat_err(p->psp_query_func(psp, 0x10, &pp), DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    ck_assert_dat_err(p->psp_query_func(psp, DAT_PSP_FIELD_ALL, NULL), DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    /* in use: same IA, another IA on the same address */
    ck_assert_int_eq(DAT_GET_TYPE(p->psp_create_func(s.ia, q, s.cr, DAT_PSP_CONSUMER_FLAG, &psp2)),
                     DAT_CONN_QUAL_IN_USE);
    struct side t;
    side_open(&t, p);
    ck_assert_int_eq(DAT_GET_TYPE(p->psp_create_func(t.ia, q, t.cr, DAT_PSP_PROVIDER_FLAG, &psp2)),
                     DAT_CONN_QUAL_IN_USE);
    /* A qualifier names the port in its low 16 bits: port 0 is invalid, and
     * a large qualifier with the same low bits as a bound one shares its port. */
    ck_assert_dat_err(p->psp_create_func(s.ia, 65536, s.cr, DAT_PSP_CONSUMER_FLAG, &psp2), DAT_INVALID_PARAMETER,
                      DAT_INVALID_ARG2);
    ck_assert_int_eq(DAT_GET_TYPE(p->psp_create_func(s.ia, ((DAT_CONN_QUAL)2815 << 16) | q, s.cr,
                                                     DAT_PSP_CONSUMER_FLAG, &psp2)),
                     DAT_CONN_QUAL_IN_USE);
    ck_assert_dat_err(p->psp_create_func(s.ia, q + 1, s.cr, 2, &psp2), DAT_INVALID_PARAMETER, DAT_INVALID_ARG4);
    ck_assert_dat_err(p->psp_create_func(s.ia, q + 1, s.conn, DAT_PSP_CONSUMER_FLAG, &psp2), DAT_INVALID_HANDLE,
                      DAT_INVALID_HANDLE_EVD_CR);
    ck_assert_dat_err(p->psp_create_func(s.ia, q + 1, s.cr, DAT_PSP_CONSUMER_FLAG, NULL), DAT_INVALID_PARAMETER,
                      DAT_INVALID_ARG5);
    ck_assert_dat_err(p->psp_create_any_func(s.ia, NULL, s.cr, DAT_PSP_CONSUMER_FLAG, &psp2),
                      DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    /* the CR EVD is in use while the PSP feeds it */
    ck_assert_int_eq(DAT_GET_TYPE(p->evd_free_func(s.cr)), DAT_INVALID_STATE);
    ck_assert_dat_ok(p->psp_free_func(psp));
    ck_assert_dat_err(p->psp_free_func(psp), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_PSP);
    /* the port is free again */
    ck_assert_dat_ok(p->psp_create_func(t.ia, q, t.cr, DAT_PSP_PROVIDER_FLAG, &psp2));
    ck_assert_dat_ok(p->psp_query_func(psp2, DAT_PSP_FIELD_ALL, &pp));
    ck_assert_int_eq(pp.psp_flags, DAT_PSP_PROVIDER_FLAG);
    side_close(&t); /* abrupt close frees the PSP */
    side_close(&s);
    ck_assert_uint_eq(sd_handle_live_count(), 0);
}
END_TEST

static void check_pdata_sizes(int n)
{
    DAT_PROVIDER *p = fx_provider("t-cm-conn", "lo", DAT_FALSE);
    struct side s, c;
    side_open(&s, p);
    side_open(&c, p);
    DAT_PSP_HANDLE psp;
    DAT_CONN_QUAL port;
    ck_assert_dat_ok(p->psp_create_any_func(s.ia, &port, s.cr, DAT_PSP_CONSUMER_FLAG, &psp));
    DAT_EP_HANDLE sep = mk_ep(&s), cep = mk_ep(&c);
    connect_pair(&c, cep, &s, sep, psp, port, n);
    DAT_EP_PARAM q;
    ck_assert_dat_ok(p->ep_query_func(cep, DAT_EP_FIELD_ALL, &q));
    ck_assert_uint_eq(q.remote_port_qual, port);
    ck_assert_uint_ne(q.local_port_qual, 0);
    ck_assert_int_eq(((struct sockaddr_in *)q.remote_ia_address_ptr)->sin_addr.s_addr, htonl(INADDR_LOOPBACK));
    DAT_EP_PARAM sq;
    ck_assert_dat_ok(p->ep_query_func(sep, DAT_EP_FIELD_ALL, &sq));
    ck_assert_uint_eq(sq.local_port_qual, port);
    ck_assert_uint_eq(sq.remote_port_qual, q.local_port_qual);
    /* modify is refused once connected */
    ck_assert_int_eq(DAT_GET_TYPE(p->ep_modify_func(cep, DAT_EP_FIELD_EP_ATTR_MAX_RECV_DTOS, &q)), DAT_INVALID_STATE);
    /* ep_free while connected: the peer sees DISCONNECTED, we see nothing */
    ck_assert_dat_ok(p->ep_free_func(cep));
    wait_ev(&s, s.conn, DAT_CONNECTION_EVENT_DISCONNECTED);
    ck_assert_int_eq(ep_state(&s, sep), DAT_EP_STATE_DISCONNECTED);
    no_event(&c, c.conn, 100000);
    ck_assert_dat_ok(p->ep_disconnect_func(sep, DAT_CLOSE_GRACEFUL_FLAG)); /* no-op */
    no_event(&s, s.conn, 100000);
    ck_assert_dat_ok(p->ep_free_func(sep));
    ck_assert_dat_ok(p->psp_free_func(psp));
    side_close(&c);
    side_close(&s);
    ck_assert_uint_eq(sd_handle_live_count(), 0);
}

START_TEST(connect_accept_pdata)
{
    check_pdata_sizes(0);
    check_pdata_sizes(48);
    check_pdata_sizes(SD_MAX_PRIVATE_DATA);
}
END_TEST

/* Disconnect from each side, graceful and abrupt: one event per side, then
 * reset and reuse of both EPs (dapltest). */
START_TEST(disconnect_each_side_reset_reuse)
{
    DAT_PROVIDER *p = fx_provider("t-cm-disc", "lo", DAT_FALSE);
    struct side s, c;
    side_open(&s, p);
    side_open(&c, p);
    DAT_PSP_HANDLE psp;
    DAT_CONN_QUAL port;
    ck_assert_dat_ok(p->psp_create_any_func(s.ia, &port, s.cr, DAT_PSP_CONSUMER_FLAG, &psp));
    DAT_EP_HANDLE sep = mk_ep(&s), cep = mk_ep(&c);
    for (int round = 0; round < 4; round++) {
        connect_pair(&c, cep, &s, sep, psp, port, 16);
        bool from_client = round % 2 == 0;
        DAT_CLOSE_FLAGS f = round < 2 ? DAT_CLOSE_GRACEFUL_FLAG : DAT_CLOSE_ABRUPT_FLAG;
        struct side *a = from_client ? &c : &s, *b = from_client ? &s : &c;
        DAT_EP_HANDLE aep = from_client ? cep : sep, bep = from_client ? sep : cep;
        ck_assert_dat_ok(p->ep_disconnect_func(aep, f));
        DAT_EVENT ev = wait_ev(a, a->conn, DAT_CONNECTION_EVENT_DISCONNECTED);
        ck_assert_ptr_eq(ev.event_data.connect_event_data.ep_handle, aep);
        wait_ev(b, b->conn, DAT_CONNECTION_EVENT_DISCONNECTED);
        /* both disconnect (dtestx): the second is a no-op */
        ck_assert_dat_ok(p->ep_disconnect_func(bep, DAT_CLOSE_GRACEFUL_FLAG));
        ck_assert_dat_ok(p->ep_disconnect_func(aep, DAT_CLOSE_ABRUPT_FLAG));
        no_event(a, a->conn, 50000);
        no_event(b, b->conn, 50000);
        ck_assert_int_eq(ep_state(a, aep), DAT_EP_STATE_DISCONNECTED);
        ck_assert_int_eq(ep_state(b, bep), DAT_EP_STATE_DISCONNECTED);
        ck_assert_int_eq(DAT_GET_TYPE(p->ep_connect_func(cep, NULL, port, 1, 0, NULL, 0, 0)) != 0, 1);
        ck_assert_dat_ok(p->ep_reset_func(cep));
        ck_assert_dat_ok(p->ep_reset_func(sep));
        ck_assert_int_eq(ep_state(&c, cep), DAT_EP_STATE_UNCONNECTED);
    }
    side_close(&c);
    side_close(&s);
    ck_assert_uint_eq(sd_handle_live_count(), 0);
}
END_TEST

START_TEST(reject_nolistener_timeout_abort)
{
    DAT_PROVIDER *p = fx_provider("t-cm-rej", "lo", DAT_FALSE);
    struct side s, c;
    side_open(&s, p);
    side_open(&c, p);
    DAT_PSP_HANDLE psp;
    DAT_CONN_QUAL port;
    ck_assert_dat_ok(p->psp_create_any_func(s.ia, &port, s.cr, DAT_PSP_CONSUMER_FLAG, &psp));
    DAT_EP_HANDLE cep = mk_ep(&c);
    struct sockaddr_in a = v4("127.0.0.1", 0);
    unsigned char pd[SD_MAX_PRIVATE_DATA + 1];
    memset(pd, 0x5a, sizeof pd);
    /* argument errors */
    ck_assert_dat_err(p->ep_connect_func(cep, (DAT_IA_ADDRESS_PTR)&a, port, 1000000, SD_MAX_PRIVATE_DATA + 1, pd,
                                         0, 0),
                      DAT_INVALID_PARAMETER, DAT_INVALID_ARG5);
    ck_assert_dat_err(p->ep_connect_func(cep, (DAT_IA_ADDRESS_PTR)&a, port, 0, 0, NULL, 0, 0),
                      DAT_INVALID_PARAMETER, DAT_INVALID_ARG4);
    ck_assert_dat_err(p->ep_connect_func(cep, (DAT_IA_ADDRESS_PTR)&a, 65536, 1000000, 0, NULL, 0, 0),
                      DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    ck_assert_int_eq(ep_state(&c, cep), DAT_EP_STATE_UNCONNECTED);

    /* reject with private data */
    ck_assert_dat_ok(p->ep_connect_func(cep, (DAT_IA_ADDRESS_PTR)&a, port, 5000000, 8, pd, 0, 0));
    DAT_EVENT ev = wait_ev(&s, s.cr, DAT_CONNECTION_REQUEST_EVENT);
    DAT_CR_HANDLE cr = ev.event_data.cr_arrival_event_data.cr_handle;
    ck_assert_dat_err(p->cr_reject_func(cr, SD_MAX_PRIVATE_DATA + 1, pd), DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    unsigned char rj[5] = {9, 8, 7, 6, 5};
    ck_assert_dat_ok(p->cr_reject_func(cr, 5, rj));
    DAT_CR_PARAM cp;
    ck_assert_dat_err(p->cr_query_func(cr, DAT_CR_FIELD_ALL, &cp), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_CR);
    ev = wait_ev(&c, c.conn, DAT_CONNECTION_EVENT_PEER_REJECTED);
    ck_assert_int_eq(ev.event_data.connect_event_data.private_data_size, 5);
    ck_assert_mem_eq(ev.event_data.connect_event_data.private_data, rj, 5);
    ck_assert_int_eq(ep_state(&c, cep), DAT_EP_STATE_DISCONNECTED);
    ck_assert_dat_ok(p->ep_reset_func(cep));

    /* nobody listens: NON_PEER_REJECTED (TCP refused) */
    DAT_CONN_QUAL dead = free_port(&s);
    ck_assert_dat_ok(p->ep_connect_func(cep, (DAT_IA_ADDRESS_PTR)&a, dead, 5000000, 0, NULL, 0, 0));
    wait_ev(&c, c.conn, DAT_CONNECTION_EVENT_NON_PEER_REJECTED);
    ck_assert_int_eq(ep_state(&c, cep), DAT_EP_STATE_DISCONNECTED);
    ck_assert_dat_ok(p->ep_reset_func(cep));

    /* a TCP listener that never answers the MPA request: TIMED_OUT */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_ge(fd, 0);
    struct sockaddr_in b = v4("127.0.0.1", 0);
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&b, sizeof b), 0);
    ck_assert_int_eq(listen(fd, 8), 0);
    socklen_t bl = sizeof b;
    ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&b, &bl), 0);
    DAT_CONN_QUAL mute = ntohs(b.sin_port);
    ck_assert_dat_ok(p->ep_connect_func(cep, (DAT_IA_ADDRESS_PTR)&a, mute, 200000, 0, NULL, 0, 0));
    wait_ev(&c, c.conn, DAT_CONNECTION_EVENT_TIMED_OUT);
    ck_assert_int_eq(ep_state(&c, cep), DAT_EP_STATE_DISCONNECTED);
    ck_assert_dat_ok(p->ep_reset_func(cep));

    /* disconnect of a pending connection aborts it: DISCONNECTED */
    ck_assert_dat_ok(p->ep_connect_func(cep, (DAT_IA_ADDRESS_PTR)&a, mute, DAT_TIMEOUT_INFINITE, 0, NULL, 0, 0));
    ck_assert_int_eq(ep_state(&c, cep), DAT_EP_STATE_ACTIVE_CONNECTION_PENDING);
    ck_assert_dat_err(p->ep_reset_func(cep), DAT_INVALID_STATE, DAT_INVALID_STATE_EP_ACTCONNPENDING);
    ck_assert_dat_ok(p->ep_disconnect_func(cep, DAT_CLOSE_GRACEFUL_FLAG));
    wait_ev(&c, c.conn, DAT_CONNECTION_EVENT_DISCONNECTED);
    no_event(&c, c.conn, 50000);
    ck_assert_dat_ok(p->ep_reset_func(cep));
    /* ep_free of a pending connection: no event */
    ck_assert_dat_ok(p->ep_connect_func(cep, (DAT_IA_ADDRESS_PTR)&a, mute, DAT_TIMEOUT_INFINITE, 0, NULL, 0, 0));
    ck_assert_dat_ok(p->ep_free_func(cep));
    no_event(&c, c.conn, 50000);
    close(fd);

    /* a CR left pending is closed by IA close; its initiator is told */
    cep = mk_ep(&c);
    ck_assert_dat_ok(p->ep_connect_func(cep, (DAT_IA_ADDRESS_PTR)&a, port, 5000000, 0, NULL, 0, 0));
    wait_ev(&s, s.cr, DAT_CONNECTION_REQUEST_EVENT);
    side_close(&s);
    wait_ev(&c, c.conn, DAT_CONNECTION_EVENT_NON_PEER_REJECTED);
    side_close(&c);
    ck_assert_uint_eq(sd_handle_live_count(), 0);
}
END_TEST

START_TEST(rsp_one_shot)
{
    DAT_PROVIDER *p = fx_provider("t-cm-rsp", "lo", DAT_FALSE);
    struct side s, c;
    side_open(&s, p);
    side_open(&c, p);
    DAT_CONN_QUAL port = free_port(&s);
    DAT_EP_HANDLE sep = mk_ep(&s), cep = mk_ep(&c), cep2 = mk_ep(&c);
    DAT_RSP_HANDLE rsp;
    ck_assert_dat_ok(p->rsp_create_func(s.ia, port, sep, s.cr, &rsp));
    ck_assert_int_eq(ep_state(&s, sep), DAT_EP_STATE_RESERVED);
    DAT_RSP_HANDLE rsp2;
    ck_assert_dat_err(p->rsp_create_func(s.ia, port + 1, sep, s.cr, &rsp2), DAT_INVALID_STATE,
                      DAT_INVALID_STATE_EP_RESERVED);
    ck_assert_dat_err(p->ep_free_func(sep), DAT_INVALID_STATE, DAT_INVALID_STATE_EP_RESERVED);
    DAT_RSP_PARAM rp;
    ck_assert_dat_ok(p->rsp_query_func(rsp, DAT_RSP_FIELD_ALL, &rp));
    ck_assert_uint_eq(rp.conn_qual, port);
    ck_assert_ptr_eq(rp.ep_handle, sep);
    ck_assert_ptr_eq(rp.evd_handle, s.cr);
    ck_assert_ptr_eq(rp.ia_handle, s.ia);
    struct sockaddr_in a = v4("127.0.0.1", 0);
    ck_assert_dat_ok(p->ep_connect_func(cep, (DAT_IA_ADDRESS_PTR)&a, port, 5000000, 4, "abc", 0, 0));
    DAT_EVENT ev = wait_ev(&s, s.cr, DAT_CONNECTION_REQUEST_EVENT);
    ck_assert_ptr_eq(ev.event_data.cr_arrival_event_data.sp_handle.rsp_handle, rsp);
    ck_assert_int_eq(ep_state(&s, sep), DAT_EP_STATE_PASSIVE_CONNECTION_PENDING);
    DAT_CR_HANDLE cr = ev.event_data.cr_arrival_event_data.cr_handle;
    DAT_CR_PARAM cp;
    ck_assert_dat_ok(p->cr_query_func(cr, DAT_CR_FIELD_ALL, &cp));
    ck_assert_ptr_eq(cp.local_ep_handle, sep);
    ck_assert_str_eq(cp.private_data, "abc");
    /* only this CR's EP (or NULL) may accept */
    ck_assert_dat_err(p->cr_accept_func(cr, cep2, 0, NULL), DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    ck_assert_dat_ok(p->cr_accept_func(cr, DAT_HANDLE_NULL, 0, NULL));
    wait_ev(&c, c.conn, DAT_CONNECTION_EVENT_ESTABLISHED);
    wait_ev(&s, s.conn, DAT_CONNECTION_EVENT_ESTABLISHED);
    /* used up: the next request sees "nobody listens" */
    ck_assert_dat_ok(p->ep_connect_func(cep2, (DAT_IA_ADDRESS_PTR)&a, port, 5000000, 0, NULL, 0, 0));
    wait_ev(&c, c.conn, DAT_CONNECTION_EVENT_NON_PEER_REJECTED);
    no_event(&s, s.cr, 50000);
    ck_assert_dat_ok(p->rsp_free_func(rsp));
    ck_assert_int_eq(ep_state(&s, sep), DAT_EP_STATE_CONNECTED);
    /* an RSP freed before its request gives the EP back */
    DAT_EP_HANDLE sep2 = mk_ep(&s);
    ck_assert_dat_ok(p->rsp_create_func(s.ia, port, sep2, s.cr, &rsp));
    ck_assert_dat_ok(p->rsp_free_func(rsp));
    ck_assert_int_eq(ep_state(&s, sep2), DAT_EP_STATE_UNCONNECTED);
    /* a rejected RSP request gives the EP back too */
    ck_assert_dat_ok(p->rsp_create_func(s.ia, port, sep2, s.cr, &rsp));
    ck_assert_dat_ok(p->ep_reset_func(cep2));
    ck_assert_dat_ok(p->ep_connect_func(cep2, (DAT_IA_ADDRESS_PTR)&a, port, 5000000, 0, NULL, 0, 0));
    ev = wait_ev(&s, s.cr, DAT_CONNECTION_REQUEST_EVENT);
    ck_assert_dat_ok(p->cr_reject_func(ev.event_data.cr_arrival_event_data.cr_handle, 0, NULL));
    wait_ev(&c, c.conn, DAT_CONNECTION_EVENT_PEER_REJECTED);
    ck_assert_int_eq(ep_state(&s, sep2), DAT_EP_STATE_UNCONNECTED);
    ck_assert_dat_ok(p->rsp_free_func(rsp));
    ck_assert_dat_ok(p->ep_free_func(sep2));

    /* NULL ep_handle: the provider's EP, configured by the consumer */
    ck_assert_dat_ok(p->rsp_create_func(s.ia, port, DAT_HANDLE_NULL, s.cr, &rsp));
    ck_assert_dat_ok(p->rsp_query_func(rsp, DAT_RSP_FIELD_ALL, &rp));
    DAT_EP_HANDLE pep = rp.ep_handle;
    ck_assert_ptr_nonnull(pep);
    ck_assert_int_eq(ep_state(&s, pep), DAT_EP_STATE_UNCONFIGURED_RESERVED);
    ck_assert_dat_ok(p->ep_reset_func(cep2));
    ck_assert_dat_ok(p->ep_connect_func(cep2, (DAT_IA_ADDRESS_PTR)&a, port, 5000000, 0, NULL, 0, 0));
    ev = wait_ev(&s, s.cr, DAT_CONNECTION_REQUEST_EVENT);
    ck_assert_int_eq(ep_state(&s, pep), DAT_EP_STATE_UNCONFIGURED_PASSIVE);
    DAT_EP_PARAM q;
    memset(&q, 0, sizeof q);
    q.pz_handle = s.pz;
    q.recv_evd_handle = q.request_evd_handle = s.dto;
    q.connect_evd_handle = s.conn;
    ck_assert_dat_ok(p->ep_modify_func(pep, DAT_EP_FIELD_PZ_HANDLE | DAT_EP_FIELD_RECV_EVD_HANDLE |
                                                DAT_EP_FIELD_REQUEST_EVD_HANDLE | DAT_EP_FIELD_CONNECT_EVD_HANDLE,
                                       &q));
    ck_assert_int_eq(ep_state(&s, pep), DAT_EP_STATE_PASSIVE_CONNECTION_PENDING);
    ck_assert_dat_ok(p->cr_accept_func(ev.event_data.cr_arrival_event_data.cr_handle, pep, 0, NULL));
    wait_ev(&c, c.conn, DAT_CONNECTION_EVENT_ESTABLISHED);
    wait_ev(&s, s.conn, DAT_CONNECTION_EVENT_ESTABLISHED);
    ck_assert_dat_ok(p->rsp_free_func(rsp));
    ck_assert_int_eq(ep_state(&s, pep), DAT_EP_STATE_CONNECTED); /* the consumer's now */
    /* a provider RSP EP never used dies with its RSP */
    ck_assert_dat_ok(p->rsp_create_func(s.ia, port, DAT_HANDLE_NULL, s.cr, &rsp));
    ck_assert_dat_ok(p->rsp_query_func(rsp, DAT_RSP_FIELD_ALL, &rp));
    ck_assert_dat_err(p->ep_free_func(rp.ep_handle), DAT_INVALID_STATE, DAT_INVALID_STATE_EP_UNCONFRESERVED);
    ck_assert_dat_ok(p->rsp_free_func(rsp));
    ck_assert_int_eq(DAT_GET_TYPE(p->ep_get_status_func(rp.ep_handle, NULL, NULL, NULL)), DAT_INVALID_HANDLE);
    side_close(&c);
    side_close(&s);
    ck_assert_uint_eq(sd_handle_live_count(), 0);
}
END_TEST

START_TEST(provider_ep_and_handoff)
{
    DAT_PROVIDER *p = fx_provider("t-cm-prov", "lo", DAT_FALSE);
    struct side s, c;
    side_open(&s, p);
    side_open(&c, p);
    DAT_PSP_HANDLE psp, psp2;
    DAT_CONN_QUAL port, port2;
    ck_assert_dat_ok(p->psp_create_any_func(s.ia, &port, s.cr, DAT_PSP_PROVIDER_FLAG, &psp));
    DAT_EVD_HANDLE cr2;
    ck_assert_dat_ok(p->evd_create_func(s.ia, 4, DAT_HANDLE_NULL, DAT_EVD_CR_FLAG, &cr2));
    ck_assert_dat_ok(p->psp_create_any_func(s.ia, &port2, cr2, DAT_PSP_CONSUMER_FLAG, &psp2));
    DAT_EP_HANDLE cep = mk_ep(&c), cep2 = mk_ep(&c);
    struct sockaddr_in a = v4("127.0.0.1", 0);
    ck_assert_dat_ok(p->ep_connect_func(cep, (DAT_IA_ADDRESS_PTR)&a, port, 5000000, 3, "hi", 0, 0));
    DAT_EVENT ev = wait_ev(&s, s.cr, DAT_CONNECTION_REQUEST_EVENT);
    DAT_CR_HANDLE cr = ev.event_data.cr_arrival_event_data.cr_handle;
    DAT_CR_PARAM cp;
    ck_assert_dat_ok(p->cr_query_func(cr, DAT_CR_FIELD_ALL, &cp));
    DAT_EP_HANDLE pep = cp.local_ep_handle;
    ck_assert_ptr_nonnull(pep);
    ck_assert_int_eq(ep_state(&s, pep), DAT_EP_STATE_UNCONFIGURED_TENTATIVE);
    ck_assert_dat_err(p->ep_free_func(pep), DAT_INVALID_STATE, DAT_INVALID_STATE_EP_UNCONFTENTATIVE);
    ck_assert_int_eq(DAT_GET_TYPE(p->cr_accept_func(cr, DAT_HANDLE_NULL, 0, NULL)), DAT_INVALID_STATE);
    DAT_EP_PARAM q;
    memset(&q, 0, sizeof q);
    q.pz_handle = s.pz;
    q.recv_evd_handle = s.dto;
    q.request_evd_handle = s.dto;
    q.connect_evd_handle = s.conn;
    ck_assert_dat_ok(p->ep_modify_func(pep, DAT_EP_FIELD_PZ_HANDLE | DAT_EP_FIELD_RECV_EVD_HANDLE |
                                                DAT_EP_FIELD_REQUEST_EVD_HANDLE | DAT_EP_FIELD_CONNECT_EVD_HANDLE,
                                       &q));
    ck_assert_int_eq(ep_state(&s, pep), DAT_EP_STATE_TENTATIVE_CONNECTION_PENDING);
    ck_assert_dat_ok(p->cr_accept_func(cr, DAT_HANDLE_NULL, 2, "o"));
    ev = wait_ev(&c, c.conn, DAT_CONNECTION_EVENT_ESTABLISHED);
    ck_assert_str_eq(ev.event_data.connect_event_data.private_data, "o");
    ev = wait_ev(&s, s.conn, DAT_CONNECTION_EVENT_ESTABLISHED);
    ck_assert_ptr_eq(ev.event_data.connect_event_data.ep_handle, pep);

    /* handoff: the request re-arrives on the other PSP */
    ck_assert_dat_ok(p->ep_connect_func(cep2, (DAT_IA_ADDRESS_PTR)&a, port, 5000000, 5, "xfer", 0, 0));
    ev = wait_ev(&s, s.cr, DAT_CONNECTION_REQUEST_EVENT);
    cr = ev.event_data.cr_arrival_event_data.cr_handle;
    ck_assert_dat_err(p->cr_handoff_func(cr, free_port(&s)), DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    ck_assert_dat_ok(p->cr_handoff_func(cr, port2));
    ck_assert_dat_err(p->cr_query_func(cr, DAT_CR_FIELD_ALL, &cp), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_CR);
    ev = wait_ev(&s, cr2, DAT_CONNECTION_REQUEST_EVENT);
    ck_assert_uint_eq(ev.event_data.cr_arrival_event_data.conn_qual, port2);
    ck_assert_ptr_eq(ev.event_data.cr_arrival_event_data.sp_handle.psp_handle, psp2);
    cr = ev.event_data.cr_arrival_event_data.cr_handle;
    ck_assert_dat_ok(p->cr_query_func(cr, DAT_CR_FIELD_ALL, &cp));
    ck_assert_str_eq(cp.private_data, "xfer");
    ck_assert_ptr_null(cp.local_ep_handle);
    DAT_EP_HANDLE sep2 = mk_ep(&s);
    ck_assert_dat_ok(p->cr_accept_func(cr, sep2, 0, NULL));
    wait_ev(&c, c.conn, DAT_CONNECTION_EVENT_ESTABLISHED);
    wait_ev(&s, s.conn, DAT_CONNECTION_EVENT_ESTABLISHED);

    /* dup_connect: same remote as cep (the provider PSP again) */
    DAT_EP_HANDLE cep3 = mk_ep(&c);
    ck_assert_dat_ok(p->ep_dup_connect_func(cep3, cep, 5000000, 0, NULL, 0));
    ev = wait_ev(&s, s.cr, DAT_CONNECTION_REQUEST_EVENT);
    /* reject: the provider's EP goes away */
    ck_assert_dat_ok(p->cr_query_func(ev.event_data.cr_arrival_event_data.cr_handle, DAT_CR_FIELD_ALL, &cp));
    pep = cp.local_ep_handle;
    ck_assert_dat_ok(p->cr_reject_func(ev.event_data.cr_arrival_event_data.cr_handle, 0, NULL));
    ck_assert_int_eq(DAT_GET_TYPE(p->ep_get_status_func(pep, NULL, NULL, NULL)), DAT_INVALID_HANDLE);
    wait_ev(&c, c.conn, DAT_CONNECTION_EVENT_PEER_REJECTED);
    ck_assert_dat_err(p->ep_dup_connect_func(cep3, cep3, 5000000, 0, NULL, 0), DAT_INVALID_STATE,
                      DAT_INVALID_STATE_EP_DISCONNECTED);
    side_close(&c);
    side_close(&s);
    ck_assert_uint_eq(sd_handle_live_count(), 0);
}
END_TEST


/* A connection error (emu_conn_fail, as the data path does on a protocol
 * error) is BROKEN locally and DISCONNECTED at the peer; exactly one each.
 * Then both sides close at the same moment, repeatedly: still exactly one
 * event per side. Then IA close with a live connection. */
struct racer {
    DAT_PROVIDER *p;
    DAT_EP_HANDLE ep;
    DAT_CLOSE_FLAGS f;
    pthread_barrier_t *b;
};

static void *race_disconnect(void *arg)
{
    struct racer *r = arg;
    pthread_barrier_wait(r->b);
    DAT_RETURN rc = r->p->ep_disconnect_func(r->ep, r->f);
    return (void *)(intptr_t)(rc != DAT_SUCCESS);
}

START_TEST(broken_and_racing_disconnects)
{
    DAT_PROVIDER *p = fx_provider("t-cm-brk", "lo", DAT_FALSE);
    struct side s, c;
    side_open(&s, p);
    side_open(&c, p);
    DAT_PSP_HANDLE psp;
    DAT_CONN_QUAL port;
    ck_assert_dat_ok(p->psp_create_any_func(s.ia, &port, s.cr, DAT_PSP_CONSUMER_FLAG, &psp));
    DAT_EP_HANDLE sep = mk_ep(&s), cep = mk_ep(&c);
    connect_pair(&c, cep, &s, sep, psp, port, 0);
    struct sd_ep *e = (struct sd_ep *)cep;
    emu_lock(&e->lock);
    struct emu_conn *conn = e->conn;
    emu_unlock(&e->lock);
    ck_assert_int_eq(emu_conn_fail(conn, EPROTO), 0);
    wait_ev(&c, c.conn, DAT_CONNECTION_EVENT_BROKEN);
    wait_ev(&s, s.conn, DAT_CONNECTION_EVENT_DISCONNECTED);
    ck_assert_dat_ok(p->ep_disconnect_func(cep, DAT_CLOSE_ABRUPT_FLAG));
    no_event(&c, c.conn, 50000);
    no_event(&s, s.conn, 50000);
    ck_assert_int_eq(ep_state(&c, cep), DAT_EP_STATE_DISCONNECTED);

    pthread_barrier_t b;
    pthread_barrier_init(&b, NULL, 2);
    for (int round = 0; round < 20; round++) {
        ck_assert_dat_ok(p->ep_reset_func(cep));
        ck_assert_dat_ok(p->ep_reset_func(sep));
        connect_pair(&c, cep, &s, sep, psp, port, 4);
        struct racer ra = {p, cep, round % 2 ? DAT_CLOSE_GRACEFUL_FLAG : DAT_CLOSE_ABRUPT_FLAG, &b};
        struct racer rb = {p, sep, round % 3 ? DAT_CLOSE_GRACEFUL_FLAG : DAT_CLOSE_ABRUPT_FLAG, &b};
        pthread_t ta, tb;
        pthread_create(&ta, NULL, race_disconnect, &ra);
        pthread_create(&tb, NULL, race_disconnect, &rb);
        void *xa, *xb;
        pthread_join(ta, &xa);
        pthread_join(tb, &xb);
        ck_assert_ptr_null(xa);
        ck_assert_ptr_null(xb);
        wait_ev(&c, c.conn, DAT_CONNECTION_EVENT_DISCONNECTED);
        wait_ev(&s, s.conn, DAT_CONNECTION_EVENT_DISCONNECTED);
        no_event(&c, c.conn, 20000);
        no_event(&s, s.conn, 20000);
    }
    pthread_barrier_destroy(&b);
    ck_assert_dat_ok(p->ep_reset_func(cep));
    ck_assert_dat_ok(p->ep_reset_func(sep));
    connect_pair(&c, cep, &s, sep, psp, port, 1);
    side_close(&s); /* abrupt: PSP, EP and connection go */
    wait_ev(&c, c.conn, DAT_CONNECTION_EVENT_DISCONNECTED);
    side_close(&c);
    ck_assert_uint_eq(sd_handle_live_count(), 0);
}
END_TEST

/* The data path rides the connection: a receive posted before connecting
 * is kept (recv_query), a send after ESTABLISHED lands in it, and a
 * receive still posted at disconnect completes FLUSHED. */
START_TEST(data_path_wiring)
{
    DAT_PROVIDER *p = fx_provider("t-cm-dto", "lo", DAT_FALSE);
    struct side s, c;
    side_open(&s, p);
    side_open(&c, p);
    static char sbuf[256], cbuf[256];
    DAT_REGION_DESCRIPTION rd;
    DAT_LMR_HANDLE sl, cl;
    DAT_LMR_CONTEXT slc, clc;
    DAT_RMR_CONTEXT rmc;
    DAT_VLEN sz;
    DAT_VADDR va;
    rd.for_va = sbuf;
    ck_assert_dat_ok(p->lmr_create_func(s.ia, DAT_MEM_TYPE_VIRTUAL, rd, sizeof sbuf, s.pz, DAT_MEM_PRIV_ALL_FLAG,
                                        DAT_VA_TYPE_VA, &sl, &slc, &rmc, &sz, &va));
    rd.for_va = cbuf;
    ck_assert_dat_ok(p->lmr_create_func(c.ia, DAT_MEM_TYPE_VIRTUAL, rd, sizeof cbuf, c.pz, DAT_MEM_PRIV_ALL_FLAG,
                                        DAT_VA_TYPE_VA, &cl, &clc, &rmc, &sz, &va));
    DAT_PSP_HANDLE psp;
    DAT_CONN_QUAL port;
    ck_assert_dat_ok(p->psp_create_any_func(s.ia, &port, s.cr, DAT_PSP_CONSUMER_FLAG, &psp));
    DAT_EP_HANDLE sep = mk_ep(&s), cep = mk_ep(&c);
    DAT_LMR_TRIPLET si[2] = {{(DAT_VADDR)(uintptr_t)sbuf, 128, slc}, {(DAT_VADDR)(uintptr_t)(sbuf + 128), 128, slc}};
    ck_assert_dat_ok(p->ep_post_recv_func(sep, 1, &si[0], (DAT_DTO_COOKIE){.as_64 = 1}, DAT_COMPLETION_DEFAULT_FLAG));
    ck_assert_dat_ok(p->ep_post_recv_func(sep, 1, &si[1], (DAT_DTO_COOKIE){.as_64 = 2}, DAT_COMPLETION_DEFAULT_FLAG));
    DAT_COUNT nb = -1, span = -1;
    ck_assert_dat_ok(p->ep_recv_query_func(sep, &nb, &span));
    ck_assert_int_eq(nb, 2);
    ck_assert_int_eq(span, 2);
    ck_assert_dat_ok(p->ep_recv_query_func(sep, NULL, NULL));
    DAT_BOOLEAN ri;
    ck_assert_dat_ok(p->ep_get_status_func(sep, NULL, &ri, NULL));
    ck_assert_int_eq(ri, DAT_FALSE);
    connect_pair(&c, cep, &s, sep, psp, port, 0);
    memcpy(cbuf, "hello over iwarp", 17);
    DAT_LMR_TRIPLET ci = {(DAT_VADDR)(uintptr_t)cbuf, 17, clc};
    ck_assert_dat_ok(p->ep_post_send_func(cep, 1, &ci, (DAT_DTO_COOKIE){.as_64 = 9}, DAT_COMPLETION_DEFAULT_FLAG));
    DAT_EVENT ev = wait_ev(&c, c.dto, DAT_DTO_COMPLETION_EVENT);
    ck_assert_int_eq(ev.event_data.dto_completion_event_data.status, DAT_DTO_SUCCESS);
    ev = wait_ev(&s, s.dto, DAT_DTO_COMPLETION_EVENT);
    ck_assert_int_eq(ev.event_data.dto_completion_event_data.status, DAT_DTO_SUCCESS);
    ck_assert_uint_eq(ev.event_data.dto_completion_event_data.user_cookie.as_64, 1);
    ck_assert_uint_eq(ev.event_data.dto_completion_event_data.transfered_length, 17);
    ck_assert_str_eq(sbuf, "hello over iwarp");
    ck_assert_dat_ok(p->ep_disconnect_func(cep, DAT_CLOSE_GRACEFUL_FLAG));
    wait_ev(&s, s.conn, DAT_CONNECTION_EVENT_DISCONNECTED);
    /* the second receive was flushed before the DISCONNECTED event was posted */
    ck_assert_dat_ok(p->evd_dequeue_func(s.dto, &ev));
    ck_assert_int_eq(ev.event_number, DAT_DTO_COMPLETION_EVENT);
    ck_assert_int_eq(ev.event_data.dto_completion_event_data.status, DAT_DTO_ERR_FLUSHED);
    ck_assert_uint_eq(ev.event_data.dto_completion_event_data.user_cookie.as_64, 2);
    wait_ev(&c, c.conn, DAT_CONNECTION_EVENT_DISCONNECTED);
    ck_assert_dat_ok(p->ep_recv_query_func(sep, &nb, NULL));
    ck_assert_int_eq(nb, 0);
    side_close(&c);
    side_close(&s);
    ck_assert_uint_eq(sd_handle_live_count(), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cm");
    TCase *tc = tcase_create("cm");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, ep_create_query_errors);
    tcase_add_test(tc, psp_create_query_free);
    tcase_add_test(tc, connect_accept_pdata);
    tcase_add_test(tc, disconnect_each_side_reset_reuse);
    tcase_add_test(tc, reject_nolistener_timeout_abort);
    tcase_add_test(tc, rsp_one_shot);
    tcase_add_test(tc, provider_ep_and_handoff);
    tcase_add_test(tc, broken_and_racing_disconnects);
    tcase_add_test(tc, data_path_wiring);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
