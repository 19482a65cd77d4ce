/* Shared by test_rc_cm.c and test_rc_sp.c: IAs on 127.0.0.1 in one
 * process, each with a PZ and CR / connection / DTO EVDs, and helpers to
 * wait for events and put an EP in a state for the decision tables. */
#ifndef SOFTDAT_TEST_RC_CM_FIXTURE_H
#define SOFTDAT_TEST_RC_CM_FIXTURE_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <sys/socket.h>

#include "lib/provider/ep.h"
#include "lib/provider/limits.h"
#include "test/lib/cm_fixture.h"

static _Alignas(64) char junk[256];

/* A PSP on a free port of s. */
static inline DAT_PSP_HANDLE mk_psp(struct side *s, DAT_PSP_FLAGS flags, DAT_CONN_QUAL *q)
{
    DAT_PSP_HANDLE psp = DAT_HANDLE_NULL;
    ck_assert_dat_ok(s->p->psp_create_any_func(s->ia, q, s->cr, flags, &psp));
    return psp;
}

static inline DAT_RETURN connect_to(struct side *c, DAT_EP_HANDLE ep, DAT_CONN_QUAL q, DAT_COUNT n, const void *pd)
{
    struct sockaddr_in a = v4("127.0.0.1", 0);
    return c->p->ep_connect_func(ep, (DAT_IA_ADDRESS_PTR)&a, q, 5000000, n, (DAT_PVOID)pd, DAT_QOS_BEST_EFFORT,
                                 DAT_CONNECT_DEFAULT_FLAG);
}

/* The CR of the next request on s's CR EVD. */
static inline DAT_CR_HANDLE next_cr(struct side *s)
{
    DAT_EVENT ev = wait_ev(s, s->cr, DAT_CONNECTION_REQUEST_EVENT);
    return ev.event_data.cr_arrival_event_data.cr_handle;
}

/* Put the object in a state (decision tables only: the flows that reach
 * each state are exercised by test_cm.c / test_csp.c). */
static inline void force_state(DAT_EP_HANDLE h, DAT_EP_STATE s)
{
    struct sd_ep *ep = (struct sd_ep *)h;
    pthread_mutex_lock(&ep->lock);
    ep->state = s;
    pthread_mutex_unlock(&ep->lock);
}

static const struct {
    DAT_EP_STATE s;
    DAT_UINT32 sub;
} states[] = {
    {DAT_EP_STATE_UNCONNECTED, DAT_INVALID_STATE_EP_UNCONNECTED},
    {DAT_EP_STATE_UNCONFIGURED_UNCONNECTED, DAT_INVALID_STATE_EP_UNCONFIGURED},
    {DAT_EP_STATE_RESERVED, DAT_INVALID_STATE_EP_RESERVED},
    {DAT_EP_STATE_UNCONFIGURED_RESERVED, DAT_INVALID_STATE_EP_UNCONFRESERVED},
    {DAT_EP_STATE_PASSIVE_CONNECTION_PENDING, DAT_INVALID_STATE_EP_PASSCONNPENDING},
    {DAT_EP_STATE_UNCONFIGURED_PASSIVE, DAT_INVALID_STATE_EP_UNCONFPASSIVE},
    {DAT_EP_STATE_ACTIVE_CONNECTION_PENDING, DAT_INVALID_STATE_EP_ACTCONNPENDING},
    {DAT_EP_STATE_TENTATIVE_CONNECTION_PENDING, DAT_INVALID_STATE_EP_TENTCONNPENDING},
    {DAT_EP_STATE_UNCONFIGURED_TENTATIVE, DAT_INVALID_STATE_EP_UNCONFTENTATIVE},
    {DAT_EP_STATE_CONNECTED, DAT_INVALID_STATE_EP_CONNECTED},
    {DAT_EP_STATE_DISCONNECT_PENDING, DAT_INVALID_STATE_EP_DISCPENDING},
    {DAT_EP_STATE_DISCONNECTED, DAT_INVALID_STATE_EP_DISCONNECTED},
    {DAT_EP_STATE_COMPLETION_PENDING, DAT_INVALID_STATE_EP_COMPLPENDING},
    {DAT_EP_STATE_CONNECTED_SINGLE_PATH, DAT_INVALID_STATE_EP_CONNECTED},
    {DAT_EP_STATE_CONNECTED_MULTI_PATH, DAT_INVALID_STATE_EP_CONNECTED},
};
#define NSTATES (sizeof states / sizeof states[0])

#define ASSERT_RC(rc, want, ...)                                                                   \
    do {                                                                                           \
        DAT_RETURN r__ = (rc);                                                                     \
        ck_assert_msg(r__ == (DAT_RETURN)(want), __VA_ARGS__);                                     \
    } while (0)
#define ERR(t, s) (DAT_CLASS_ERROR | (t) | (s))

#endif
