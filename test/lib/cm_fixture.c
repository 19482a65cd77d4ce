/* test/lib/cm_fixture.h: two-sided connection tests through the provider table. */
#include "test/lib/cm_fixture.h"

#include <arpa/inet.h>
#include <stdint.h>

void side_open(struct side *s, DAT_PROVIDER *p)
{
    memset(s, 0, sizeof *s);
    s->p = p;
    s->ia = fx_open(p, NULL);
    ck_assert_dat_ok(p->pz_create_func(s->ia, &s->pz));
    ck_assert_dat_ok(p->evd_create_func(s->ia, 16, DAT_HANDLE_NULL, DAT_EVD_CR_FLAG, &s->cr));
    ck_assert_dat_ok(p->evd_create_func(s->ia, 16, DAT_HANDLE_NULL, DAT_EVD_CONNECTION_FLAG, &s->conn));
    ck_assert_dat_ok(p->evd_create_func(s->ia, 64, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &s->dto));
}

void side_close(struct side *s)
{
    ck_assert_dat_ok(s->p->ia_close_func(s->ia, DAT_CLOSE_ABRUPT_FLAG));
}

DAT_EP_HANDLE mk_ep(struct side *s)
{
    DAT_EP_HANDLE ep = DAT_HANDLE_NULL;
    ck_assert_dat_ok(s->p->ep_create_func(s->ia, s->pz, s->dto, s->dto, s->conn, NULL, &ep));
    return ep;
}

DAT_EVENT wait_ev(struct side *s, DAT_EVD_HANDLE evd, DAT_EVENT_NUMBER want)
{
    DAT_EVENT ev;
    DAT_COUNT n = 0;
    memset(&ev, 0, sizeof ev);
    DAT_RETURN rc = s->p->evd_wait_func(evd, 5000000, 1, &ev, &n);
    ck_assert_msg(rc == DAT_SUCCESS, "evd_wait: 0x%x (want event 0x%x)", (unsigned)rc, (unsigned)want);
    ck_assert_msg(ev.event_number == want, "event 0x%x, want 0x%x", (unsigned)ev.event_number, (unsigned)want);
    return ev;
}

void no_event(struct side *s, DAT_EVD_HANDLE evd, DAT_TIMEOUT us)
{
    DAT_EVENT ev;
    DAT_COUNT n = 0;
    DAT_RETURN rc = s->p->evd_wait_func(evd, us, 1, &ev, &n);
    ck_assert_msg(DAT_GET_TYPE(rc) == DAT_TIMEOUT_EXPIRED, "unexpected 0x%x (event 0x%x)", (unsigned)rc,
                  (unsigned)ev.event_number);
}

DAT_EP_STATE ep_state(struct side *s, DAT_EP_HANDLE ep)
{
    DAT_EP_STATE st;
    ck_assert_dat_ok(s->p->ep_get_status_func(ep, &st, NULL, NULL));
    return st;
}

struct sockaddr_in v4(const char *ip, unsigned port)
{
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    ck_assert_int_eq(inet_pton(AF_INET, ip, &a.sin_addr), 1);
    a.sin_port = htons((uint16_t)port);
    return a;
}

DAT_CONN_QUAL free_port(struct side *s)
{
    DAT_CONN_QUAL q;
    DAT_PSP_HANDLE psp;
    ck_assert_dat_ok(s->p->psp_create_any_func(s->ia, &q, s->cr, DAT_PSP_CONSUMER_FLAG, &psp));
    ck_assert_dat_ok(s->p->psp_free_func(psp));
    return q;
}
