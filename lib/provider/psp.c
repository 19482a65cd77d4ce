/* softdat service points: what PSPs, RSPs and CSPs share (create, start,
 * query and free scaffolding, listener, request delivery, the process-wide
 * list cr_handoff searches) and the PSP calls.
 *
 * A conn qual names a TCP port (its low 16 bits, sd_conn_qual_ok) on the IA's address. Binding it is the
 * in-use check: a second SP on the same port of the same address (in this
 * process or another) gets DAT_CONN_QUAL_IN_USE (a CSP: DAT_PORT_IN_USE). */
#include "lib/provider/ep_ud.h"
#include "lib/provider/psp.h"

#include <errno.h>
#include <string.h>

#include "emu/log.h"
#include "lib/provider/cr.h"
#include "lib/provider/csp.h"
#include "lib/provider/ep.h"
#include "lib/provider/evd.h"
#include "lib/provider/ia.h"

/* ---- registry (cr_handoff) */

static pthread_mutex_t g_sp_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sd_sp *g_sps;

void sd_sp_register(struct sd_sp *sp)
{
    pthread_mutex_lock(&g_sp_lock);
    sp->next = g_sps;
    g_sps = sp;
    pthread_mutex_unlock(&g_sp_lock);
}

void sd_sp_unregister(struct sd_sp *sp)
{
    pthread_mutex_lock(&g_sp_lock);
    for (struct sd_sp **pp = &g_sps; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == sp) {
            *pp = sp->next;
            break;
        }
    }
    sp->next = NULL;
    pthread_mutex_unlock(&g_sp_lock);
}

/* Can `sp` take a request that arrived on ia's address on port `qual`? */
static bool sp_takes_handoff(struct sd_sp *sp, struct sd_ia *ia, DAT_CONN_QUAL qual)
{
    pthread_mutex_lock(&sp->lock);
    bool ok = sp->conn_qual == qual && sp->listener != NULL;
    if (ok && sp->h.type == DAT_HANDLE_TYPE_RSP)
        ok = !sp->used && sp->ep != NULL; /* a spent RSP is "no listener" */
    pthread_mutex_unlock(&sp->lock);
    if (ok && sp->h.type == DAT_HANDLE_TYPE_CSP)
        ok = sd_csp_serves(sp, (const struct sockaddr *)&ia->addr);
    return ok;
}

struct sd_sp *sd_sp_find_handoff(struct sd_ia *ia, DAT_CONN_QUAL qual)
{
    struct sd_sp *found = NULL;
    pthread_mutex_lock(&g_sp_lock);
    /* Pass 0: the CR's own IA. Pass 1: another IA of this process opened
     * on the same interface adapter (same dat.conf record and address). */
    for (int pass = 0; pass < 2 && found == NULL; pass++) {
        for (struct sd_sp *sp = g_sps; sp != NULL; sp = sp->next) {
            struct sd_ia *sia = sp->h.ia;
            bool same = pass == 0 ? sia == ia
                                  : sia != ia && sia->rec == ia->rec &&
                                        sd_same_ip((const struct sockaddr *)&sia->addr,
                                                   (const struct sockaddr *)&ia->addr);
            if (!same || !sd_handle_alive(&sp->h) || !sp_takes_handoff(sp, ia, qual))
                continue;
            sd_handle_ref(&sp->h);
            found = sp;
            break;
        }
    }
    pthread_mutex_unlock(&g_sp_lock);
    return found;
}

void sd_sp_ep_giveback(struct sd_ep *ep, bool prov, bool keep_reserved)
{
    emu_lock(&ep->lock);
    if (prov) {
        /* The provider's EP goes back to the provider: gone (L4046). */
        ep->provider_ep = false;
    } else {
        /* An RSP's consumer EP returns to the consumer (L4740), or stays
         * reserved when its request never became a CR. */
        if (ep->state == DAT_EP_STATE_PASSIVE_CONNECTION_PENDING)
            sd_ep_set_state(ep, keep_reserved ? DAT_EP_STATE_RESERVED : DAT_EP_STATE_UNCONNECTED);
        else if (ep->state == DAT_EP_STATE_UNCONFIGURED_PASSIVE)
            sd_ep_set_state(ep, keep_reserved ? DAT_EP_STATE_UNCONFIGURED_RESERVED : DAT_EP_STATE_UNCONFIGURED_UNCONNECTED);
        if (!keep_reserved)
            ep->rsp = NULL;
    }
    emu_unlock(&ep->lock);
    if (prov)
        sd_handle_destroy(&ep->h, DAT_INVALID_HANDLE_EP);
    sd_handle_put(&ep->h);
}

/* ---- requests */

static void deliver_to(struct sd_sp *sp, struct sd_evd *evd, struct emu_conn *conn, const void *pdata,
                       uint16_t pdata_len, const struct sockaddr *peer, socklen_t peer_len, uint16_t peer_ird,
                       uint16_t peer_ord)
{
    struct sd_ia *ia = sp->h.ia;
    struct sd_ep *ep = NULL;
    bool prov = false, rsp_prov = false;
    pthread_mutex_lock(&sp->lock);
    DAT_CONN_QUAL qual = sp->conn_qual;
    if (sp->h.type == DAT_HANDLE_TYPE_RSP || sp->h.type == SD_HTYPE_SSP) {
        /* One request per RSP (or SSP); later ones see "nobody listens" (L4414). */
        if (sp->used || sp->ep == NULL) {
            pthread_mutex_unlock(&sp->lock);
            emu_conn_free(conn);
            return;
        }
        sp->used = true;
        ep = sp->ep;
        rsp_prov = sp->ep_is_provider;
        sd_handle_ref(&ep->h);
    }
    pthread_mutex_unlock(&sp->lock);

    if (ep != NULL) {
        emu_lock(&ep->lock);
        bool ok = ep->rsp == &sp->h;
        if (ok && ep->state == DAT_EP_STATE_RESERVED)
            sd_ep_set_state(ep, DAT_EP_STATE_PASSIVE_CONNECTION_PENDING);
        else if (ok && ep->state == DAT_EP_STATE_UNCONFIGURED_RESERVED)
            sd_ep_set_state(ep, DAT_EP_STATE_UNCONFIGURED_PASSIVE);
        else
            ok = false;
        emu_unlock(&ep->lock);
        if (!ok) {
            sd_handle_put(&ep->h);
            emu_conn_free(conn);
            return;
        }
    } else if (sp->flags == DAT_PSP_PROVIDER_FLAG) {
        /* The provider's EP: no PZ, no EVDs (L4015); the consumer
         * configures it with dat_ep_modify before accepting. */
        if (sd_ep_create_obj(ia, NULL, NULL, NULL, NULL, NULL, DAT_EP_STATE_UNCONFIGURED_TENTATIVE, &ep) !=
            DAT_SUCCESS) {
            SD_WARN("sp", "cannot create the provider EP: refusing the request");
            emu_conn_free(conn);
            return;
        }
        emu_lock(&ep->lock);
        ep->provider_ep = true;
        emu_unlock(&ep->lock);
        sd_handle_ref(&ep->h);
        prov = true;
    }

    /* A UD address exchange carries the initiator's UD address in front
     * of the consumer's private data (ep_ud.c); the CR shows the rest. */
    uint32_t ud_qpn = 0, ud_qkey = 0;
    uint16_t ud_skip = sd_ud_parse_request(pdata, pdata_len, &ud_qpn, &ud_qkey);
    struct sd_cr *cr = sd_cr_new(ia, conn, qual, ud_skip ? (const uint8_t *)pdata + ud_skip : pdata,
                                 (uint16_t)(pdata_len - ud_skip), peer, peer_len, peer_ird, peer_ord);
    if (cr == NULL) {
        emu_conn_free(conn);
        goto undo_ep;
    }
    cr->ud = ud_skip > 0;
    cr->ud_qpn = ud_qpn;
    cr->ud_qkey = ud_qkey;
    cr->ep = ep;
    cr->ep_is_provider = prov || rsp_prov;
    if (sd_handle_publish(&cr->h) != DAT_SUCCESS) {
        cr->conn = NULL;
        cr->ep = NULL;
        sd_handle_discard(&cr->h);
        emu_conn_free(conn);
        goto undo_ep;
    }
    DAT_EVENT ev;
    memset(&ev, 0, sizeof ev);
    ev.event_number = DAT_CONNECTION_REQUEST_EVENT;
    DAT_CR_ARRIVAL_EVENT_DATA *d = &ev.event_data.cr_arrival_event_data;
    if (sp->h.type == DAT_HANDLE_TYPE_RSP)
        d->sp_handle.rsp_handle = (DAT_RSP_HANDLE)sp;
    else if (sp->h.type == DAT_HANDLE_TYPE_CSP)
        d->sp_handle.csp_handle = (DAT_CSP_HANDLE)sp;
    else
        d->sp_handle.psp_handle = (DAT_PSP_HANDLE)sp;
    d->local_ia_address_ptr = (DAT_IA_ADDRESS_PTR)&ia->addr;
    d->conn_qual = qual;
    d->cr_handle = (DAT_CR_HANDLE)cr;
    d->truncate_flag = DAT_FALSE;
    if (cr->ud)
        sd_ud_request_event(cr, &ev);
    if (sd_evd_post(evd, &ev, SD_EVQ_CR, 0) != DAT_SUCCESS) {
        /* The backlog is the EVD (L3961): full means a non-peer reject;
         * destroying the CR closes the request and undoes the EP. */
        SD_WARN("sp", "CR EVD full: refusing a request on %llu", (unsigned long long)qual);
        SD_CNT_IA(ia, DCNT_IA_CM_ERR_REQ_FULLQ);
        sd_handle_destroy(&cr->h, DAT_INVALID_HANDLE_CR);
    }
    return;
undo_ep:
    if (ep != NULL)
        sd_sp_ep_giveback(ep, prov, true);
}

void sd_sp_deliver(struct sd_sp *sp, struct emu_conn *conn, const void *pdata, uint16_t pdata_len,
                   const struct sockaddr *peer, socklen_t peer_len, uint16_t peer_ird, uint16_t peer_ord)
{
    /* A handoff (consumer thread) may race the target's free: once its
     * teardown began, the request meets "no listener" (L4339). */
    pthread_mutex_lock(&sp->lock);
    struct sd_evd *evd = sp->listener != NULL ? sp->evd : NULL;
    if (evd != NULL)
        sd_handle_ref(&evd->h);
    pthread_mutex_unlock(&sp->lock);
    if (evd == NULL) {
        emu_conn_free(conn);
        return;
    }
    deliver_to(sp, evd, conn, pdata, pdata_len, peer, peer_len, peer_ird, peer_ord);
    sd_handle_put(&evd->h);
}

static void sp_request(struct emu_listener *l, const struct emu_conn_request *req, void *ctx)
{
    (void)l;
    sd_sp_deliver(ctx, req->conn, req->pdata, req->pdata_len, req->peer, req->peer_len, req->peer_ird,
                  req->peer_ord);
}

const struct emu_listener_ops sd_sp_listener_ops = {.request = sp_request};

void (*sd_sp_test_listen_hook)(void);

int sd_sp_listen_at(struct sd_sp *sp, const struct sockaddr *addr, socklen_t len, DAT_CONN_QUAL port, bool any,
                    const struct emu_listener_ops *ops)
{
    struct sd_ia *ia = sp->h.ia;
    if (ia->engine == NULL)
        return -ESHUTDOWN;
    struct emu_listener *l = NULL;
    if (!any && port > 0xFFFFu)
        SD_DBG("sp", "conn_qual %llu listens on TCP port %u (its low 16 bits)",
               (unsigned long long)port, (unsigned)(port & 0xFFFFu));
    /* Held from before the listen to the publication of the listener: the
     * engine accepts as soon as the socket listens, and a request it reads
     * at once (an initiator already retrying its refused connects, as
     * dtestx -u does) must find sp->listener set, not be dropped as "no
     * listener" with a RST (issue 8: a UD exchange ending in
     * DAT_IB_UD_CONNECTION_ERROR_EVENT). The engine takes this lock only
     * in this SP's request callbacks, which wait here; creating the
     * listener never waits for the engine. */
    pthread_mutex_lock(&sp->lock);
    int r = any ? emu_listener_create_range(ia->engine, addr, len, SD_PSP_ANY_LO, SD_PSP_ANY_HI, ops, sp, &l)
                : emu_listener_create(ia->engine, addr, len, (uint16_t)port, ops, sp, &l);
    if (r == 0) {
        if (sd_sp_test_listen_hook != NULL)
            sd_sp_test_listen_hook();
        sp->listener = l;
        sp->conn_qual = any ? emu_listener_port(l) : port;
    }
    pthread_mutex_unlock(&sp->lock);
    if (r != 0)
        return r;
    sd_sp_register(sp);
    return 0;
}

DAT_RETURN sd_sp_listen(struct sd_sp *sp, DAT_CONN_QUAL qual, bool any)
{
    struct sd_ia *ia = sp->h.ia;
    int r = sd_sp_listen_at(sp, (const struct sockaddr *)&ia->addr, ia->addr_len, qual, any, &sd_sp_listener_ops);
    switch (r) {
    case 0: return DAT_SUCCESS;
    case -ESHUTDOWN: return SD_RET(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);
    case -EADDRINUSE:
        return any ? SD_RET(DAT_CONN_QUAL_UNAVAILABLE, 0) : SD_RET(DAT_CONN_QUAL_IN_USE, 0);
    case -EACCES: return SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2); /* privileged port */
    default:
        SD_WARN("sp", "listen on port %llu failed: %s", (unsigned long long)qual, strerror(-r));
        return SD_RET(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEP);
    }
}

static uint32_t sp_bad_subtype(const struct sd_sp *sp)
{
    switch (sp->h.type) {
    case DAT_HANDLE_TYPE_RSP: return DAT_INVALID_HANDLE_RSP;
    case DAT_HANDLE_TYPE_CSP: return DAT_INVALID_HANDLE_CSP;
    default: return DAT_INVALID_HANDLE_PSP;
    }
}

DAT_RETURN sd_sp_ep_arg(struct sd_ia *ia, DAT_EP_HANDLE ep_handle, struct sd_ep **ep)
{
    DAT_RETURN rc;
    if (ep_handle == DAT_HANDLE_NULL) {
        rc = sd_ep_create_obj(ia, NULL, NULL, NULL, NULL, NULL, DAT_EP_STATE_UNCONFIGURED_UNCONNECTED, ep);
        if (rc != DAT_SUCCESS)
            return rc;
        sd_handle_ref(&(*ep)->h); /* our call reference, like sd_ep_get */
    } else if ((rc = sd_ep_get(ep_handle, ep)) != DAT_SUCCESS) {
        return rc;
    }
    if ((*ep)->h.ia != ia)
        return SD_RET(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP);
    return DAT_SUCCESS;
}

DAT_RETURN sd_sp_reserve_ep(struct sd_sp *sp, struct sd_ep *ep, bool prov)
{
    DAT_RETURN rc = DAT_SUCCESS;
    pthread_mutex_lock(&ep->cm_lock);
    emu_lock(&ep->lock);
    DAT_EP_STATE s = ep->state;
    if (ep->rsp == NULL && !ep->provider_ep && s == DAT_EP_STATE_UNCONNECTED)
        sd_ep_set_state(ep, DAT_EP_STATE_RESERVED);
    else if (ep->rsp == NULL && !ep->provider_ep && s == DAT_EP_STATE_UNCONFIGURED_UNCONNECTED)
        sd_ep_set_state(ep, DAT_EP_STATE_UNCONFIGURED_RESERVED);
    else
        rc = SD_RET(DAT_INVALID_STATE, sd_ep_state_subtype(s));
    if (rc == DAT_SUCCESS)
        ep->rsp = &sp->h;
    emu_unlock(&ep->lock);
    pthread_mutex_unlock(&ep->cm_lock);
    if (rc != DAT_SUCCESS) {
        sd_sp_teardown(&sp->h);
        sd_handle_discard(&sp->h);
        return rc;
    }
    sd_handle_ref(&ep->h);
    sp->ep = ep;
    sp->ep_is_provider = prov;
    if (prov) {
        emu_lock(&ep->lock);
        ep->provider_ep = true;
        emu_unlock(&ep->lock);
    }
    return DAT_SUCCESS;
}

void sd_sp_ep_put(struct sd_ep *ep, bool prov, DAT_RETURN rc)
{
    if (ep == NULL)
        return;
    if (prov && rc != DAT_SUCCESS)
        sd_handle_destroy(&ep->h, DAT_INVALID_HANDLE_EP);
    sd_handle_put(&ep->h);
}

DAT_RETURN sd_sp_new(struct sd_ia *ia, const struct sd_handle_ops *ops, DAT_EVD_HANDLE evd_handle,
                     struct sd_sp **out)
{
    struct sd_evd *evd;
    DAT_RETURN rc = sd_evd_get(evd_handle, DAT_INVALID_HANDLE_EVD_CR, &evd);
    if (rc != DAT_SUCCESS)
        return rc;
    struct sd_sp *sp = NULL;
    if (!sd_ia_same_device(evd->h.ia, ia) || !sd_evd_accepts(evd, DAT_EVD_CR_FLAG)) {
        rc = SD_RET(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_CR);
    } else if ((sp = (struct sd_sp *)sd_handle_alloc(ops, ia)) == NULL) {
        rc = SD_RET(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
    } else {
        pthread_mutex_init(&sp->lock, NULL);
        if (!sd_handle_dep_get(&evd->h)) {
            sd_handle_discard(&sp->h);
            sp = NULL;
            rc = SD_RET(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_CR);
        } else {
            sd_handle_ref(&evd->h);
            sp->evd = evd;
        }
    }
    sd_handle_put(&evd->h);
    *out = sp;
    return rc;
}

DAT_RETURN sd_sp_start(struct sd_sp *sp, DAT_RETURN (*listen)(struct sd_sp *sp, void *arg), void *arg)
{
    /* Publish before starting engine work (IA close refuses publish). */
    DAT_RETURN rc = sd_handle_publish(&sp->h);
    if (rc != DAT_SUCCESS) {
        sd_sp_teardown(&sp->h);
        sd_handle_discard(&sp->h);
        return rc;
    }
    if ((rc = listen(sp, arg)) != DAT_SUCCESS)
        sd_handle_destroy(&sp->h, sp_bad_subtype(sp));
    return rc;
}

DAT_RETURN sd_sp_query_get(DAT_HANDLE raw, uint32_t type, uint32_t bad_subtype, unsigned mask, unsigned all,
                           const void *p, struct sd_sp **out)
{
    struct sd_handle *h;
    DAT_RETURN rc = sd_handle_get(raw, type, bad_subtype, &h);
    if (rc != DAT_SUCCESS)
        return rc;
    if (mask & ~all)
        rc = SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    else if (p == NULL)
        rc = SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    if (rc != DAT_SUCCESS) {
        sd_handle_put(h);
        return rc;
    }
    *out = (struct sd_sp *)h;
    return DAT_SUCCESS;
}

DAT_RETURN sd_sp_free(DAT_HANDLE raw, uint32_t type, uint32_t bad_subtype)
{
    struct sd_handle *h;
    DAT_RETURN rc = sd_handle_get(raw, type, bad_subtype, &h);
    if (rc != DAT_SUCCESS)
        return rc;
    rc = sd_handle_destroy(h, bad_subtype);
    sd_handle_put(h);
    return rc;
}

void sd_sp_teardown(struct sd_handle *h)
{
    struct sd_sp *sp = (struct sd_sp *)h;
    sd_sp_unregister(sp);
    pthread_mutex_lock(&sp->lock);
    struct emu_listener *l = sp->listener;
    sp->listener = NULL;
    struct sd_ep *ep = sp->ep;
    sp->ep = NULL;
    bool ep_prov = sp->ep_is_provider;
    struct sd_evd *evd = sp->evd;
    sp->evd = NULL;
    pthread_mutex_unlock(&sp->lock);
    /* Blocks until no request callback runs; requests already delivered
     * are CRs and live on. */
    if (l != NULL)
        emu_listener_free(l);
    if (ep != NULL) {
        /* RSP: the EP returns to the consumer unless a CR took it (L4497). */
        emu_lock(&ep->lock);
        bool destroy = false;
        if (ep->rsp == h) {
            ep->rsp = NULL;
            bool reserved = ep->state == DAT_EP_STATE_RESERVED ||
                            ep->state == DAT_EP_STATE_UNCONFIGURED_RESERVED;
            if (ep_prov && reserved) {
                /* Our EP, never handed out through a CR: it goes too. */
                ep->provider_ep = false;
                destroy = true;
            } else if (ep->state == DAT_EP_STATE_RESERVED) {
                sd_ep_set_state(ep, DAT_EP_STATE_UNCONNECTED);
            } else if (ep->state == DAT_EP_STATE_UNCONFIGURED_RESERVED) {
                sd_ep_set_state(ep, DAT_EP_STATE_UNCONFIGURED_UNCONNECTED);
            }
        }
        emu_unlock(&ep->lock);
        if (destroy)
            sd_handle_destroy(&ep->h, DAT_INVALID_HANDLE_EP);
        sd_handle_put(&ep->h);
    }
    if (evd != NULL) {
        sd_handle_dep_put(&evd->h);
        sd_handle_put(&evd->h);
    }
}

void sd_sp_release(struct sd_handle *h)
{
    pthread_mutex_destroy(&((struct sd_sp *)h)->lock);
}

/* ---- PSP calls */

static const struct sd_handle_ops psp_ops = {
    .type = DAT_HANDLE_TYPE_PSP,
    .name = "psp",
    .size = sizeof(struct sd_sp),
    .phase = SD_PHASE_SP,
    .teardown = sd_sp_teardown,
    .release = sd_sp_release,
};

struct psp_listen_arg {
    DAT_CONN_QUAL qual;
    bool any;
};

static DAT_RETURN psp_listen(struct sd_sp *sp, void *arg)
{
    const struct psp_listen_arg *a = arg;
    return sd_sp_listen(sp, a->qual, a->any);
}

static DAT_RETURN psp_create_common(DAT_IA_HANDLE ia_handle, DAT_CONN_QUAL qual, bool any, DAT_CONN_QUAL *qual_out,
                                    DAT_EVD_HANDLE evd_handle, DAT_PSP_FLAGS flags, DAT_PSP_HANDLE *psp_handle)
{
    struct sd_ia *ia;
    DAT_RETURN rc = sd_ia_get(ia_handle, &ia);
    if (rc != DAT_SUCCESS)
        return rc;
    struct sd_sp *sp;
    if (psp_handle == NULL)
        rc = SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG5);
    else if (any ? qual_out == NULL : !sd_conn_qual_ok(qual))
        rc = SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    else if (flags != DAT_PSP_CONSUMER_FLAG && flags != DAT_PSP_PROVIDER_FLAG)
        rc = SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG4);
    else if ((rc = sd_sp_new(ia, &psp_ops, evd_handle, &sp)) == DAT_SUCCESS) {
        sp->flags = flags;
        struct psp_listen_arg a = {qual, any};
        if ((rc = sd_sp_start(sp, psp_listen, &a)) == DAT_SUCCESS) {
            if (any) {
                pthread_mutex_lock(&sp->lock);
                *qual_out = sp->conn_qual;
                pthread_mutex_unlock(&sp->lock);
            }
            *psp_handle = (DAT_PSP_HANDLE)sp;
        }
    }
    sd_handle_put(&ia->h);
    return rc;
}

static DAT_RETURN sd_psp_create(DAT_IA_HANDLE ia, DAT_CONN_QUAL qual, DAT_EVD_HANDLE evd, DAT_PSP_FLAGS flags,
                                DAT_PSP_HANDLE *psp)
{
    return psp_create_common(ia, qual, false, NULL, evd, flags, psp);
}

static DAT_RETURN sd_psp_create_any(DAT_IA_HANDLE ia, DAT_CONN_QUAL *qual, DAT_EVD_HANDLE evd, DAT_PSP_FLAGS flags,
                                    DAT_PSP_HANDLE *psp)
{
    DAT_RETURN rc = psp_create_common(ia, 0, true, qual, evd, flags, psp);
    if (rc == DAT_SUCCESS) {
        struct sd_ia *i;
        if (sd_ia_get(ia, &i) == DAT_SUCCESS) {
            SD_CNT_IA(i, DCNT_IA_PSP_CREATE_ANY);
            sd_handle_put(&i->h);
        }
    }
    return rc;
}

static DAT_RETURN sd_psp_query(DAT_PSP_HANDLE psp_handle, DAT_PSP_PARAM_MASK mask, DAT_PSP_PARAM *p)
{
    struct sd_sp *sp;
    DAT_RETURN rc = sd_sp_query_get(psp_handle, DAT_HANDLE_TYPE_PSP, DAT_INVALID_HANDLE_PSP, (unsigned)mask,
                                    (unsigned)DAT_PSP_FIELD_ALL, p, &sp);
    if (rc != DAT_SUCCESS)
        return rc;
    pthread_mutex_lock(&sp->lock);
    p->ia_handle = sd_ia_consumer_handle(sp->h.ia);
    p->conn_qual = sp->conn_qual;
    p->evd_handle = (DAT_EVD_HANDLE)sp->evd;
    p->psp_flags = sp->flags;
    pthread_mutex_unlock(&sp->lock);
    sd_handle_put(&sp->h);
    return DAT_SUCCESS;
}

static DAT_RETURN sd_psp_free(DAT_PSP_HANDLE psp_handle)
{
    return sd_sp_free(psp_handle, DAT_HANDLE_TYPE_PSP, DAT_INVALID_HANDLE_PSP);
}

void sd_psp_fill_table(DAT_PROVIDER *p)
{
    p->psp_create_func = sd_psp_create;
    p->psp_create_any_func = sd_psp_create_any;
    p->psp_query_func = sd_psp_query;
    p->psp_free_func = sd_psp_free;
}
