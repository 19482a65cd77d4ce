/* test/lib/prov_fixture.h: a provider record attached directly, its IAs. */
#include "test/lib/prov_fixture.h"

#include <pthread.h>

#include "lib/provider/ep.h"

DAT_PROVIDER_INFO fx_info(const char *name, DAT_BOOLEAN ts)
{
    DAT_PROVIDER_INFO info;
    memset(&info, 0, sizeof info);
    strncpy(info.ia_name, name, sizeof info.ia_name - 1);
    info.dapl_version_major = 2;
    info.dapl_version_minor = 0;
    info.is_thread_safe = ts;
    return info;
}

DAT_PROVIDER *fx_provider(const char *name, const char *params, DAT_BOOLEAN ts)
{
    DAT_PROVIDER_INFO info = fx_info(name, ts);
    struct sd_provider_rec *rec = sd_provider_attach(&info, params);
    ck_assert_ptr_nonnull(rec);
    return &rec->table;
}

DAT_IA_HANDLE fx_open(DAT_PROVIDER *p, DAT_EVD_HANDLE *async)
{
    DAT_IA_HANDLE ia = DAT_HANDLE_NULL;
    DAT_EVD_HANDLE local = DAT_HANDLE_NULL;
    ck_assert_dat_ok(p->ia_open_func((DAT_NAME_PTR)p->device_name, 16, async ? async : &local, &ia));
    ck_assert_ptr_nonnull(ia);
    return ia;
}

DAT_EVENT fx_wait(DAT_PROVIDER *p, DAT_EVD_HANDLE evd, DAT_EVENT_NUMBER want)
{
    DAT_EVENT ev;
    DAT_COUNT n = 0;
    memset(&ev, 0, sizeof ev);
    DAT_RETURN rc = p->evd_wait_func(evd, 5000000, 1, &ev, &n);
    ck_assert_msg(rc == DAT_SUCCESS, "evd_wait: 0x%x (want event 0x%x)", (unsigned)rc, (unsigned)want);
    ck_assert_msg(ev.event_number == want, "event 0x%x, want 0x%x", (unsigned)ev.event_number, (unsigned)want);
    return ev;
}

void fx_none(DAT_PROVIDER *p, DAT_EVD_HANDLE evd, DAT_TIMEOUT us)
{
    DAT_EVENT ev;
    DAT_COUNT n = 0;
    memset(&ev, 0, sizeof ev);
    DAT_RETURN rc = p->evd_wait_func(evd, us, 1, &ev, &n);
    ck_assert_msg(DAT_GET_TYPE(rc) == DAT_TIMEOUT_EXPIRED, "unexpected 0x%x (event 0x%x)", (unsigned)rc,
                  (unsigned)ev.event_number);
}

DAT_EP_STATE fx_ep_state(DAT_PROVIDER *p, DAT_EP_HANDLE ep)
{
    DAT_EP_STATE st;
    ck_assert_dat_ok(p->ep_get_status_func(ep, &st, NULL, NULL));
    return st;
}

void fx_force_state(DAT_EP_HANDLE h, DAT_EP_STATE s)
{
    struct sd_ep *ep = (struct sd_ep *)h;
    emu_lock(&ep->lock);
    ep->state = s;
    emu_unlock(&ep->lock);
}

const struct fx_ep_state_sub fx_ep_states[] = {
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
const unsigned fx_ep_nstates = sizeof fx_ep_states / sizeof fx_ep_states[0];

bool fx_state_posts_ok(DAT_EP_STATE s)
{
    return s == DAT_EP_STATE_CONNECTED || s == DAT_EP_STATE_DISCONNECTED ||
           s == DAT_EP_STATE_CONNECTED_SINGLE_PATH || s == DAT_EP_STATE_CONNECTED_MULTI_PATH;
}
