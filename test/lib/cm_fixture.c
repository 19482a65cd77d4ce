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
    return fx_wait(s->p, evd, want);
}

void no_event(struct side *s, DAT_EVD_HANDLE evd, DAT_TIMEOUT us)
{
    fx_none(s->p, evd, us);
}

DAT_EP_STATE ep_state(struct side *s, DAT_EP_HANDLE ep)
{
    return fx_ep_state(s->p, ep);
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
