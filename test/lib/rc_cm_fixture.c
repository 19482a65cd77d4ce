/* test/lib/rc_cm_fixture.h: service points, connects and requests for the CM audits. */
#include "test/lib/rc_cm_fixture.h"

DAT_PSP_HANDLE mk_psp(struct side *s, DAT_PSP_FLAGS flags, DAT_CONN_QUAL *q)
{
    DAT_PSP_HANDLE psp = DAT_HANDLE_NULL;
    ck_assert_dat_ok(s->p->psp_create_any_func(s->ia, q, s->cr, flags, &psp));
    return psp;
}

DAT_RETURN connect_to(struct side *c, DAT_EP_HANDLE ep, DAT_CONN_QUAL q, DAT_COUNT n, const void *pd)
{
    struct sockaddr_in a = v4("127.0.0.1", 0);
    return c->p->ep_connect_func(ep, (DAT_IA_ADDRESS_PTR)&a, q, 5000000, n, (DAT_PVOID)pd, DAT_QOS_BEST_EFFORT,
                                 DAT_CONNECT_DEFAULT_FLAG);
}

DAT_CR_HANDLE next_cr(struct side *s)
{
    DAT_EVENT ev = wait_ev(s, s->cr, DAT_CONNECTION_REQUEST_EVENT);
    return ev.event_data.cr_arrival_event_data.cr_handle;
}
