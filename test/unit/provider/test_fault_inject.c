/* SOFTDAT_FAULT as a DAT program sees it (emu/fault.h): each fault gives
 * the return codes, events and statuses of a failing RNIC, over a real
 * loopback connection (rc_pair.h). The faults are set with
 * emu_fault_configure, as SOFTDAT_FAULT would set them. */
#include "emu/fault.h"
#include "test/lib/clock.h"
#include "test/lib/rc_pair.h"

#include <time.h>


/* create=nth:2: the second object creation fails, the others work. */
START_TEST(create_fails)
{
    DAT_PROVIDER *p = fx_provider("t-fault-create", "lo", DAT_FALSE);
    DAT_IA_HANDLE ia = fx_open(p, NULL);
    emu_fault_configure("create=nth:2");
    DAT_PZ_HANDLE pz1, pz2, pz3;
    ck_assert_dat_ok(p->pz_create_func(ia, &pz1));
    DAT_RETURN rc = p->pz_create_func(ia, &pz2);
    ck_assert_int_eq(DAT_GET_TYPE(rc), DAT_INSUFFICIENT_RESOURCES);
    ck_assert_dat_ok(p->pz_create_func(ia, &pz3));
    emu_fault_configure("create=every:1");
    DAT_EVD_HANDLE evd;
    rc = p->evd_create_func(ia, 8, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &evd);
    ck_assert_int_eq(DAT_GET_TYPE(rc), DAT_INSUFFICIENT_RESOURCES);
    emu_fault_configure(NULL);
    ck_assert_dat_ok(p->evd_create_func(ia, 8, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &evd));
    ck_assert_dat_ok(p->evd_free_func(evd));
    ck_assert_dat_ok(p->pz_free_func(pz1));
    ck_assert_dat_ok(p->pz_free_func(pz3));
    ck_assert_dat_ok(p->ia_close_func(ia, DAT_CLOSE_ABRUPT_FLAG));
}
END_TEST

/* register=every:2: every second dat_lmr_create fails with
 * DAT_INSUFFICIENT_RESOURCES / DAT_RESOURCE_MEMORY. */
START_TEST(register_fails)
{
    DAT_PROVIDER *p = fx_provider("t-fault-reg", "lo", DAT_FALSE);
    DAT_IA_HANDLE ia = fx_open(p, NULL);
    DAT_PZ_HANDLE pz;
    ck_assert_dat_ok(p->pz_create_func(ia, &pz));
    static char buf[4][4096];
    emu_fault_configure("register=every:2");
    for (int i = 0; i < 4; i++) {
        DAT_REGION_DESCRIPTION rd;
        rd.for_va = buf[i];
        DAT_LMR_HANDLE l;
        DAT_LMR_CONTEXT lc;
        DAT_RMR_CONTEXT rc;
        DAT_VLEN sz;
        DAT_VADDR va;
        DAT_RETURN r = p->lmr_create_func(ia, DAT_MEM_TYPE_VIRTUAL, rd, 4096, pz, DAT_MEM_PRIV_ALL_FLAG,
                                          DAT_VA_TYPE_VA, &l, &lc, &rc, &sz, &va);
        if (i % 2 == 1) {
            ck_assert_dat_err(r, DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
        } else {
            ck_assert_dat_ok(r);
            ck_assert_dat_ok(p->lmr_free_func(l));
        }
    }
    emu_fault_configure(NULL);
    ck_assert_dat_ok(p->pz_free_func(pz));
    ck_assert_dat_ok(p->ia_close_func(ia, DAT_CLOSE_ABRUPT_FLAG));
}
END_TEST

/* refuse=nth:1: the first connect ends NON_PEER_REJECTED (the EP may
 * connect again), the second succeeds. connect_delay_ms: the connection
 * is established no sooner. */
START_TEST(refuse_then_delay)
{
    struct rp_pair x;
    rp_open(&x, "t-fault-refuse", NULL, NULL);
    struct rp_side *c = &x.c, *s = &x.s;
    DAT_EP_ATTR a;
    rp_attr(&a, DAT_COMPLETION_EVD_THRESHOLD_FLAG, DAT_COMPLETION_EVD_THRESHOLD_FLAG);
    DAT_EP_HANDLE cep = rp_ep(c, &a);
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    emu_fault_configure("refuse=nth:1");
    ck_assert_dat_ok(c->p->ep_connect_func(cep, (DAT_IA_ADDRESS_PTR)&sa, x.port, 5000000, 0, NULL,
                                           DAT_QOS_BEST_EFFORT, DAT_CONNECT_DEFAULT_FLAG));
    rp_wait(c, c->conn, DAT_CONNECTION_EVENT_NON_PEER_REJECTED);
    rp_none(s, s->cr, 100000); /* nothing reached the server */
    ck_assert_dat_ok(c->p->ep_free_func(cep));
    emu_fault_configure("connect_delay_ms=300");
    cep = rp_ep(c, &a);
    double t0 = test_now_s();
    DAT_EP_HANDLE sep = rp_connect(&x, cep, &a);
    double took = test_now_s() - t0;
    ck_assert_msg(took >= 0.29, "connected after %.3f s, delay 300 ms", took);
    emu_fault_configure(NULL);
    (void)sep;
    rp_close(&x);
}
END_TEST

/* drop=nth:1: the next frame received breaks its connection as a
 * transport failure: BROKEN at the receiver, its receive FLUSHED (the
 * frame's Send is not delivered), and the sender's connection ends too,
 * its Send not completed successfully. */
START_TEST(drop_breaks_connection)
{
    struct rp_pair x;
    rp_open(&x, "t-fault-drop", NULL, NULL);
    struct rp_side *c = &x.c, *s = &x.s;
    DAT_LMR_TRIPLET rt = rp_tri(s->lc, s->buf, 64);
    ck_assert_dat_ok(s->p->ep_post_recv_func(x.sep, 1, &rt, rp_ck(10), 0));
    emu_fault_configure("drop=nth:1");
    DAT_LMR_TRIPLET t = rp_tri(c->lc, c->buf, 8);
    ck_assert_dat_ok(c->p->ep_post_send_func(x.cep, 1, &t, rp_ck(1), 0));
    rp_wait(s, s->conn, DAT_CONNECTION_EVENT_BROKEN);
    emu_fault_configure(NULL);
    DAT_DTO_COMPLETION_EVENT_DATA d = rp_dto(s, s->rcv);
    ck_assert_int_eq(d.status, DAT_DTO_ERR_FLUSHED);
    d = rp_dto(c, c->req);
    ck_assert_int_ne(d.status, DAT_DTO_SUCCESS);
    DAT_EVENT ev;
    DAT_COUNT n;
    ck_assert_dat_ok(c->p->evd_wait_func(c->conn, 5000000, 1, &ev, &n));
    ck_assert(ev.event_number == DAT_CONNECTION_EVENT_BROKEN ||
              ev.event_number == DAT_CONNECTION_EVENT_DISCONNECTED);
    rp_close(&x);
}
END_TEST

/* crc=nth:1 with CRC on: the sender's first FPDU carries a wrong CRC, the
 * receiver terminates (MPA CRC error): both ends see the connection break
 * and the Send completes in error or flushed, never successfully. */
START_TEST(crc_breaks_connection)
{
    setenv("SOFTDAT_CRC", "on", 1);
    struct rp_pair x;
    rp_open(&x, "t-fault-crc", NULL, NULL);
    struct rp_side *c = &x.c, *s = &x.s;
    DAT_LMR_TRIPLET rt = rp_tri(s->lc, s->buf, 64);
    ck_assert_dat_ok(s->p->ep_post_recv_func(x.sep, 1, &rt, rp_ck(1), 0));
    emu_fault_configure("crc=nth:1");
    DAT_LMR_TRIPLET t = rp_tri(c->lc, c->buf, 8);
    ck_assert_dat_ok(c->p->ep_post_send_func(x.cep, 1, &t, rp_ck(2), 0));
    rp_wait(s, s->conn, DAT_CONNECTION_EVENT_BROKEN);
    ck_assert_int_ne(rp_dto(s, s->rcv).status, DAT_DTO_SUCCESS);
    ck_assert_int_ne(rp_dto(c, c->req).status, DAT_DTO_SUCCESS);
    DAT_EVENT ev = rp_wait(c, c->conn, DAT_CONNECTION_EVENT_BROKEN);
    (void)ev;
    emu_fault_configure(NULL);
    unsetenv("SOFTDAT_CRC");
    rp_close(&x);
}
END_TEST

/* completion_delay_us=40000: a Send's completion arrives no sooner. */
START_TEST(completion_delay)
{
    struct rp_pair x;
    rp_open(&x, "t-fault-late", NULL, NULL);
    struct rp_side *c = &x.c, *s = &x.s;
    DAT_LMR_TRIPLET rt = rp_tri(s->lc, s->buf, 64);
    ck_assert_dat_ok(s->p->ep_post_recv_func(x.sep, 1, &rt, rp_ck(1), 0));
    emu_fault_configure("completion_delay_us=40000");
    double t0 = test_now_s();
    DAT_LMR_TRIPLET t = rp_tri(c->lc, c->buf, 8);
    ck_assert_dat_ok(c->p->ep_post_send_func(x.cep, 1, &t, rp_ck(2), 0));
    ck_assert_int_eq(rp_dto(c, c->req).status, DAT_DTO_SUCCESS);
    double took = test_now_s() - t0;
    ck_assert_int_eq(rp_dto(s, s->rcv).status, DAT_DTO_SUCCESS);
    emu_fault_configure(NULL);
    ck_assert_msg(took >= 0.039, "completion after %.3f s, delay 40 ms", took);
    rp_close(&x);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("provider-fault-inject");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, create_fails);
    tcase_add_test(tc, register_fails);
    tcase_add_test(tc, refuse_then_delay);
    tcase_add_test(tc, drop_breaks_connection);
    tcase_add_test(tc, crc_breaks_connection);
    tcase_add_test(tc, completion_delay);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
