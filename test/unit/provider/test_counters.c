/* IB extension counters and open query through slot 80 (issue 8 §2):
 * real operations on a loopback connection move exactly the counters that
 * name them; reset zeroes; the argument errors; the open query object. */
#include <stdarg.h>
#include <stdlib.h>

#include <dat2/dat_ib_extensions.h>

#include "lib/provider/ia_query.h"
#include "test/lib/rc_pair.h"

static DAT_RETURN ext(DAT_PROVIDER *p, DAT_HANDLE h, DAT_EXTENDED_OP op, ...)
{
    va_list ap;
    va_start(ap, op);
    DAT_RETURN rc = p->handle_extendedop_func(h, op, ap);
    va_end(ap);
    return rc;
}

static uint64_t cnt(DAT_PROVIDER *p, DAT_HANDLE h, int c)
{
    DAT_UINT64 v = 0xdead;
    ck_assert_dat_ok(ext(p, h, DAT_IB_QUERY_COUNTERS_OP, c, &v, 0));
    return v;
}

START_TEST(counters_count_real_operations)
{
    struct rp_pair x;
    rp_open(&x, "t-cnt1", NULL, NULL);
    DAT_PROVIDER *p = x.c.p;
    struct rp_side *c = &x.c, *s = &x.s;

    /* Connection: active and passive establishment, one CR. */
    ck_assert_uint_eq(cnt(p, c->ia, DCNT_IA_CM_ACTIVE_EST), 1);
    ck_assert_uint_eq(cnt(p, c->ia, DCNT_IA_CM_REQ_TX), 1);
    ck_assert_uint_eq(cnt(p, s->ia, DCNT_IA_CM_PASSIVE_EST), 1);
    ck_assert_uint_eq(cnt(p, s->ia, DCNT_IA_SP_CR), 1);
    ck_assert_uint_eq(cnt(p, s->ia, DCNT_IA_SP_CR_ACCEPTED), 1);
    ck_assert_uint_eq(cnt(p, s->ia, DCNT_IA_PSP_CREATE_ANY), 1);
    ck_assert_uint_eq(cnt(p, c->ia, DCNT_IA_PZ_CREATE), 2);
    ck_assert_uint_eq(cnt(p, c->ia, DCNT_IA_LMR_CREATE), 4);
    ck_assert_uint_eq(cnt(p, c->ia, DCNT_IA_EP_CREATE), 1);
    ck_assert_uint_eq(cnt(p, c->ia, DCNT_IA_EVD_CREATE), 5); /* 4 + async */
    ck_assert_uint_eq(cnt(p, x.cep, DCNT_EP_CONNECT), 1);

    /* Two receives posted, one send of 100 bytes, one RDMA write of 64. */
    DAT_LMR_TRIPLET r1 = rp_tri(s->lc, s->buf, 512), r2 = rp_tri(s->lc, s->buf + 512, 512);
    ck_assert_dat_ok(p->ep_post_recv_func(x.sep, 1, &r1, rp_ck(1), DAT_COMPLETION_DEFAULT_FLAG));
    ck_assert_dat_ok(p->ep_post_recv_func(x.sep, 1, &r2, rp_ck(2), DAT_COMPLETION_DEFAULT_FLAG));
    DAT_LMR_TRIPLET t = rp_tri(c->lc, c->buf, 100);
    ck_assert_dat_ok(p->ep_post_send_func(x.cep, 1, &t, rp_ck(3), DAT_COMPLETION_DEFAULT_FLAG));
    rp_dto(c, c->req);
    ck_assert_int_eq(rp_dto(s, s->rcv).transfered_length, 100);
    DAT_LMR_TRIPLET w = rp_tri(c->lc, c->buf, 64);
    DAT_RMR_TRIPLET rw = rp_rtri(s->rc, s->buf + 4096, 64);
    ck_assert_dat_ok(p->ep_post_rdma_write_func(x.cep, 1, &w, rp_ck(4), &rw, DAT_COMPLETION_DEFAULT_FLAG));
    rp_dto(c, c->req);
    ck_assert_uint_eq(cnt(p, x.sep, DCNT_EP_POST_RECV), 2);
    ck_assert_uint_eq(cnt(p, x.sep, DCNT_EP_POST_RECV_DATA), 1024);
    ck_assert_uint_eq(cnt(p, x.sep, DCNT_EP_RECV), 1);
    ck_assert_uint_eq(cnt(p, x.sep, DCNT_EP_RECV_DATA), 100);
    ck_assert_uint_eq(cnt(p, x.cep, DCNT_EP_POST_SEND), 1);
    ck_assert_uint_eq(cnt(p, x.cep, DCNT_EP_POST_SEND_DATA), 100);
    ck_assert_uint_eq(cnt(p, x.cep, DCNT_EP_POST_WRITE), 1);
    ck_assert_uint_eq(cnt(p, x.cep, DCNT_EP_POST_WRITE_DATA), 64);
    ck_assert_uint_eq(cnt(p, x.cep, DCNT_EP_POST_READ), 0);
    /* EVDs: the client's request EVD got two DTO events, waited twice. */
    ck_assert_uint_eq(cnt(p, c->req, DCNT_EVD_DTO_CALLBACK), 2);
    ck_assert_uint_eq(cnt(p, c->req, DCNT_EVD_WAIT), 2);
    DAT_EVENT ev;
    ck_assert_int_eq(DAT_GET_TYPE(p->evd_dequeue_func(c->req, &ev)), DAT_QUEUE_EMPTY);
    ck_assert_uint_eq(cnt(p, c->req, DCNT_EVD_DEQUEUE), 1);
    ck_assert_uint_eq(cnt(p, c->req, DCNT_EVD_DEQUEUE_NOT_FOUND), 1);
    ck_assert_uint_eq(cnt(p, c->conn, DCNT_EVD_CONN_CALLBACK), 1);
    /* The dequeue group is derived from FOUND and NOT_FOUND (counters.h):
     * a DTO EVD's dequeues are its polling ones, a connection EVD has
     * none; a reset zeroes the whole group, and counting goes on. */
    ck_assert_uint_eq(cnt(p, c->req, DCNT_EVD_DEQUEUE_POLL), 1);
    ck_assert_uint_eq(cnt(p, c->req, DCNT_EVD_DEQUEUE_POLL_FOUND), 0);
    ck_assert_int_eq(DAT_GET_TYPE(p->evd_dequeue_func(c->conn, &ev)), DAT_QUEUE_EMPTY);
    ck_assert_uint_eq(cnt(p, c->conn, DCNT_EVD_DEQUEUE), 1);
    ck_assert_uint_eq(cnt(p, c->conn, DCNT_EVD_DEQUEUE_POLL), 0);
    DAT_UINT64 evd_all[DCNT_EVD_ALL_COUNTERS];
    ck_assert_dat_ok(ext(p, c->req, DAT_IB_QUERY_COUNTERS_OP, DCNT_EVD_ALL_COUNTERS, evd_all, 1));
    ck_assert_uint_eq(evd_all[DCNT_EVD_DEQUEUE], 1);
    ck_assert_uint_eq(evd_all[DCNT_EVD_DEQUEUE_POLL], 1);
    ck_assert_uint_eq(cnt(p, c->req, DCNT_EVD_DEQUEUE), 0);
    ck_assert_uint_eq(cnt(p, c->req, DCNT_EVD_DEQUEUE_NOT_FOUND), 0);
    ck_assert_uint_eq(cnt(p, c->req, DCNT_EVD_DEQUEUE_POLL), 0);
    ck_assert_int_eq(DAT_GET_TYPE(p->evd_dequeue_func(c->req, &ev)), DAT_QUEUE_EMPTY);
    ck_assert_int_eq(DAT_GET_TYPE(p->evd_dequeue_func(c->req, &ev)), DAT_QUEUE_EMPTY);
    ck_assert_uint_eq(cnt(p, c->req, DCNT_EVD_DEQUEUE), 2);
    ck_assert_uint_eq(cnt(p, c->req, DCNT_EVD_DEQUEUE_POLL), 2);
    ck_assert_uint_eq(cnt(p, c->req, DCNT_EVD_DEQUEUE_NOT_FOUND), 2);
    ck_assert_uint_eq(cnt(p, c->req, DCNT_EVD_DEQUEUE_FOUND), 0);

    /* All at once, then reset. */
    DAT_UINT64 all[DCNT_EP_ALL_COUNTERS];
    ck_assert_dat_ok(ext(p, x.cep, DAT_IB_QUERY_COUNTERS_OP, DCNT_EP_ALL_COUNTERS, all, 1));
    ck_assert_uint_eq(all[DCNT_EP_POST_SEND_DATA], 100);
    ck_assert_uint_eq(all[DCNT_EP_POST_WRITE_DATA], 64);
    ck_assert_uint_eq(cnt(p, x.cep, DCNT_EP_POST_SEND), 0);
    ck_assert_uint_eq(cnt(p, x.cep, DCNT_EP_CONNECT), 0);

    /* Disconnect: the client asked (DREQ_TX), the server heard (DREQ_RX). */
    ck_assert_dat_ok(p->ep_disconnect_func(x.cep, DAT_CLOSE_GRACEFUL_FLAG));
    rp_wait(c, c->conn, DAT_CONNECTION_EVENT_DISCONNECTED);
    rp_wait(s, s->conn, DAT_CONNECTION_EVENT_DISCONNECTED);
    ck_assert_uint_eq(cnt(p, c->ia, DCNT_IA_CM_DREQ_TX), 1);
    ck_assert_uint_eq(cnt(p, x.cep, DCNT_EP_DISCONNECT), 1);
    ck_assert_uint_eq(cnt(p, s->ia, DCNT_IA_CM_DREQ_RX), 1);
    ck_assert_uint_eq(cnt(p, c->ia, DCNT_IA_CM_DREP_RX), 1);

    /* Printing (stdout) and start/stop. */
    ck_assert_dat_ok(ext(p, c->ia, DAT_IB_PRINT_COUNTERS_OP, DCNT_IA_ALL_COUNTERS, 0));
    ck_assert_dat_ok(ext(p, x.cep, DAT_IB_PRINT_COUNTERS_OP, DCNT_EP_POST_WRITE, 0));
    ck_assert_dat_ok(ext(p, c->ia, DAT_IB_START_COUNTERS_OP, DCNT_IA_CM));
    ck_assert_dat_ok(ext(p, c->ia, DAT_IB_STOP_COUNTERS_OP, DCNT_IA_DIAG));
    rp_close(&x);
}
END_TEST

START_TEST(counter_argument_errors)
{
    DAT_PROVIDER *p = fx_provider("t-cnt2", "lo", DAT_FALSE);
    DAT_IA_HANDLE ia = fx_open(p, NULL);
    DAT_PZ_HANDLE pz;
    ck_assert_dat_ok(p->pz_create_func(ia, &pz));
    DAT_UINT64 v;
    static char junk[64];
    ck_assert_dat_err(ext(p, (DAT_HANDLE)(junk + 8), DAT_IB_QUERY_COUNTERS_OP, 0, &v, 0), DAT_INVALID_HANDLE,
                      DAT_INVALID_HANDLE1);
    ck_assert_dat_err(ext(p, NULL, DAT_IB_QUERY_COUNTERS_OP, 0, &v, 0), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE1);
    /* A PZ has no counters. */
    ck_assert_dat_err(ext(p, pz, DAT_IB_QUERY_COUNTERS_OP, 0, &v, 0), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE1);
    ck_assert_dat_err(ext(p, ia, DAT_IB_QUERY_COUNTERS_OP, DCNT_IA_ALL_COUNTERS + 1, &v, 0), DAT_INVALID_PARAMETER,
                      DAT_INVALID_ARG2);
    ck_assert_dat_err(ext(p, ia, DAT_IB_QUERY_COUNTERS_OP, -1, &v, 0), DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    ck_assert_dat_err(ext(p, ia, DAT_IB_QUERY_COUNTERS_OP, 0, NULL, 0), DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    ck_assert_dat_err(ext(p, ia, DAT_IB_PRINT_COUNTERS_OP, 999, 0), DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    ck_assert_dat_err(ext(p, ia, DAT_IB_START_COUNTERS_OP, 7), DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    ck_assert_dat_err(ext(p, pz, DAT_IB_START_COUNTERS_OP, DCNT_IA_CM), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE1);
    ck_assert_uint_eq(cnt(p, ia, DCNT_IA_PZ_CREATE), 1);
    ck_assert_dat_ok(p->pz_free_func(pz));
    ck_assert_uint_eq(cnt(p, ia, DCNT_IA_PZ_FREE), 1);
    ck_assert_dat_ok(p->ia_close_func(ia, DAT_CLOSE_ABRUPT_FLAG));
}
END_TEST

START_TEST(open_query_by_name)
{
    DAT_PROVIDER *p = fx_provider("t-oq1", "127.0.0.1", DAT_FALSE);
    DAT_HANDLE q = DAT_HANDLE_NULL;
    DAT_IA_ATTR ia_attr;
    DAT_PROVIDER_ATTR pr_attr;
    memset(&ia_attr, 0, sizeof ia_attr);
    ck_assert_dat_ok(ext(p, (DAT_HANDLE) "t-oq1", DAT_IB_OPEN_QUERY_OP, &q, (DAT_IA_ATTR_MASK)DAT_IA_FIELD_ALL,
                         &ia_attr, (DAT_PROVIDER_ATTR_MASK)DAT_PROVIDER_FIELD_ALL, &pr_attr));
    ck_assert_ptr_nonnull(q);
    ck_assert_str_eq(ia_attr.adapter_name, "t-oq1");
    ck_assert_int_eq(((struct sockaddr_in *)ia_attr.ia_address_ptr)->sin_family, AF_INET);
    ck_assert_int_eq(ia_attr.extension_supported, DAT_EXTENSION_IB);
    int counters = 0;
    for (int i = 0; i < pr_attr.num_provider_specific_attr; i++)
        counters += strcmp(pr_attr.provider_specific_attr[i].name, "DAT_COUNTERS") == 0;
    ck_assert_int_eq(counters, 1);
    /* The first word is the record's table (the registry closes through it). */
    ck_assert_ptr_eq(*(DAT_PROVIDER **)q, p);
    DAT_HANDLE_TYPE ht;
    ck_assert_dat_ok(p->get_handle_type_func(q, &ht));
    ck_assert_int_eq(ht, DAT_HANDLE_TYPE_IA);
    /* Not an open IA: IA calls refuse it. */
    DAT_PZ_HANDLE pz;
    ck_assert_dat_err(p->pz_create_func(q, &pz), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);
    ck_assert_dat_ok(ext(p, q, DAT_IB_CLOSE_QUERY_OP));
    ck_assert_dat_err(ext(p, q, DAT_IB_CLOSE_QUERY_OP), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);
    /* Errors. */
    ck_assert_dat_err(ext(p, (DAT_HANDLE) "no-such-ia", DAT_IB_OPEN_QUERY_OP, &q, 0, NULL, 0, NULL),
                      DAT_PROVIDER_NOT_FOUND, DAT_NAME_NOT_REGISTERED);
    ck_assert_dat_err(ext(p, (DAT_HANDLE) "t-oq1", DAT_IB_OPEN_QUERY_OP, NULL, 0, NULL, 0, NULL),
                      DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    ck_assert_dat_err(ext(p, (DAT_HANDLE) "t-oq1", DAT_IB_OPEN_QUERY_OP, &q, ~(DAT_IA_ATTR_MASK)0, NULL, 0, NULL),
                      DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    ck_assert_dat_err(ext(p, NULL, DAT_IB_CLOSE_QUERY_OP), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);
}
END_TEST

/* A connect that finds nobody listening yet is retried by the soft RNIC:
 * the retries are counted (DCNT_IA_CM_ERR_REQ_RETRY). */
START_TEST(connect_retries_counted)
{
    DAT_PROVIDER *p = fx_provider("t-cnt3", "lo", DAT_FALSE);
    struct rp_side c, s;
    rp_side_open(&c, p);
    rp_side_open(&s, p);
    DAT_PSP_HANDLE psp;
    DAT_CONN_QUAL port = 0;
    ck_assert_dat_ok(p->psp_create_any_func(s.ia, &port, s.cr, DAT_PSP_CONSUMER_FLAG, &psp));
    ck_assert_dat_ok(p->psp_free_func(psp)); /* a port nobody listens on, for now */
    DAT_EP_HANDLE cep = rp_ep(&c, NULL), sep = rp_ep(&s, NULL);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert_dat_ok(p->ep_connect_func(cep, (DAT_IA_ADDRESS_PTR)&a, port, 5000000, 0, NULL, DAT_QOS_BEST_EFFORT,
                                        DAT_CONNECT_DEFAULT_FLAG));
    /* Listen 200 ms later (the retries go on for 10 s: main sets
     * SOFTDAT_CONNECT_RETRY_MS): 30 ms was too short for the first attempt
     * to be made on a loaded host under TSan, and it then found the
     * listener at once. */
    struct timespec ts = {0, 200 * 1000000};
    nanosleep(&ts, NULL);
    ck_assert_dat_ok(p->psp_create_func(s.ia, port, s.cr, DAT_PSP_CONSUMER_FLAG, &psp));
    DAT_EVENT ev = rp_wait(&s, s.cr, DAT_CONNECTION_REQUEST_EVENT);
    ck_assert_dat_ok(p->cr_accept_func(ev.event_data.cr_arrival_event_data.cr_handle, sep, 0, NULL));
    rp_wait(&c, c.conn, DAT_CONNECTION_EVENT_ESTABLISHED);
    ck_assert_uint_ge(cnt(p, c.ia, DCNT_IA_CM_ERR_REQ_RETRY), 1);
    ck_assert_uint_eq(cnt(p, s.ia, DCNT_IA_CM_ERR_REQ_RETRY), 0);
    rp_side_close(&c);
    rp_side_close(&s);
}
END_TEST

int main(void)
{
    setenv("SOFTDAT_CONNECT_RETRY_MS", "10000", 1); /* connect_retries_counted */
    Suite *s = suite_create("provider-counters");
    TCase *tc = tcase_create("counters");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, counters_count_real_operations);
    tcase_add_test(tc, counter_argument_errors);
    tcase_add_test(tc, open_query_by_name);
    tcase_add_test(tc, connect_retries_counted);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int nf = srunner_ntests_failed(sr);
    srunner_free(sr);
    return nf == 0 ? 0 : 1;
}
