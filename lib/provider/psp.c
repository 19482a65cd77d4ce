/* softdat service points: what PSPs and RSPs share (listener, request
 * delivery, the process-wide list cr_handoff searches) and the PSP calls.
 *
 * A conn qual is a TCP port on the IA's address. Binding it is the
 * in-use check: a second SP on the same port of the same address (in this
 * process or another) gets DAT_CONN_QUAL_IN_USE. */
#include "lib/provider/psp.h"

#include <errno.h>
#include <string.h>

#include "emu/log.h"
#include "lib/provider/cr.h"
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

struct sd_sp *sd_sp_find_psp(struct sd_ia *ia, DAT_CONN_QUAL qual)
{
    struct sd_sp *found = NULL;
    pthread_mutex_lock(&g_sp_lock);
    for (struct sd_sp *sp = g_sps; sp != NULL; sp = sp->next) {
        if (sp->h.ia != ia || sp->h.type != DAT_HANDLE_TYPE_PSP || !sd_handle_alive(&sp->h))
            continue;
        pthread_mutex_lock(&sp->lock);
        bool match = sp->conn_qual == qual && sp->listener != NULL;
        pthread_mutex_unlock(&sp->lock);
        if (match) {
            sd_handle_ref(&sp->h);
            found = sp;
            break;
        }
    }
    pthread_mutex_unlock(&g_sp_lock);
    return found;
}

/* ---- requests */

void sd_sp_deliver(struct sd_sp *sp, struct emu_conn *conn, const void *pdata, uint16_t pdata_len,
                   const struct sockaddr *peer, socklen_t peer_len, uint16_t peer_ird, uint16_t peer_ord)
{
    struct sd_ia *ia = sp->h.ia;
    struct sd_ep *ep = NULL;
    bool prov = false, rsp_prov = false;
    pthread_mutex_lock(&sp->lock);
    DAT_CONN_QUAL qual = sp->conn_qual;
    if (sp->h.type == DAT_HANDLE_TYPE_RSP) {
        /* One request per RSP; later ones see "nobody listens" (L4414). */
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
        pthread_mutex_lock(&ep->lock);
        bool ok = ep->rsp == &sp->h;
        if (ok && ep->state == DAT_EP_STATE_RESERVED)
            ep->state = DAT_EP_STATE_PASSIVE_CONNECTION_PENDING;
        else if (ok && ep->state == DAT_EP_STATE_UNCONFIGURED_RESERVED)
            ep->state = DAT_EP_STATE_UNCONFIGURED_PASSIVE;
        else
            ok = false;
        pthread_mutex_unlock(&ep->lock);
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
        pthread_mutex_lock(&ep->lock);
        ep->provider_ep = true;
        pthread_mutex_unlock(&ep->lock);
        sd_handle_ref(&ep->h);
        prov = true;
    }

    struct sd_cr *cr = sd_cr_new(ia, conn, qual, pdata, pdata_len, peer, peer_len, peer_ird, peer_ord);
    if (cr == NULL) {
        emu_conn_free(conn);
        goto undo_ep;
    }
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
    else
        d->sp_handle.psp_handle = (DAT_PSP_HANDLE)sp;
    d->local_ia_address_ptr = (DAT_IA_ADDRESS_PTR)&ia->addr;
    d->conn_qual = qual;
    d->cr_handle = (DAT_CR_HANDLE)cr;
    d->truncate_flag = DAT_FALSE;
    if (sd_evd_post(sp->evd, &ev, SD_EVQ_CR, 0) != DAT_SUCCESS) {
        /* The backlog is the EVD (L3961): full means a non-peer reject;
         * destroying the CR closes the request and undoes the EP. */
        SD_WARN("sp", "CR EVD full: refusing a request on %llu", (unsigned long long)qual);
        sd_handle_destroy(&cr->h, DAT_INVALID_HANDLE_CR);
    }
    return;
undo_ep:
    if (ep == NULL)
        return;
    if (prov) {
        pthread_mutex_lock(&ep->lock);
        ep->provider_ep = false;
        pthread_mutex_unlock(&ep->lock);
        sd_handle_destroy(&ep->h, DAT_INVALID_HANDLE_EP);
    } else {
        pthread_mutex_lock(&ep->lock);
        if (ep->state == DAT_EP_STATE_PASSIVE_CONNECTION_PENDING)
            ep->state = DAT_EP_STATE_RESERVED;
        else if (ep->state == DAT_EP_STATE_UNCONFIGURED_PASSIVE)
            ep->state = DAT_EP_STATE_UNCONFIGURED_RESERVED;
        pthread_mutex_unlock(&ep->lock);
    }
    sd_handle_put(&ep->h);
}

static void sp_request(struct emu_listener *l, const struct emu_conn_request *req, void *ctx)
{
    (void)l;
    sd_sp_deliver(ctx, req->conn, req->pdata, req->pdata_len, req->peer, req->peer_len, req->peer_ird,
                  req->peer_ord);
}

const struct emu_listener_ops sd_sp_listener_ops = {.request = sp_request};

DAT_RETURN sd_sp_listen(struct sd_sp *sp, DAT_CONN_QUAL qual, bool any)
{
    struct sd_ia *ia = sp->h.ia;
    if (ia->engine == NULL)
        return SD_RET(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);
    struct emu_listener *l = NULL;
    int r = any ? emu_listener_create_range(ia->engine, (const struct sockaddr *)&ia->addr, ia->addr_len,
                                            SD_PSP_ANY_LO, SD_PSP_ANY_HI, &sd_sp_listener_ops, sp, &l)
                : emu_listener_create(ia->engine, (const struct sockaddr *)&ia->addr, ia->addr_len,
                                      (uint16_t)qual, &sd_sp_listener_ops, sp, &l);
    switch (r) {
    case 0: break;
    case -EADDRINUSE:
        return any ? SD_RET(DAT_CONN_QUAL_UNAVAILABLE, 0) : SD_RET(DAT_CONN_QUAL_IN_USE, 0);
    case -EACCES: return SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2); /* privileged port */
    default:
        SD_WARN("sp", "listen on port %llu failed: %s", (unsigned long long)qual, strerror(-r));
        return SD_RET(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEP);
    }
    pthread_mutex_lock(&sp->lock);
    sp->listener = l;
    sp->conn_qual = any ? emu_listener_port(l) : qual;
    pthread_mutex_unlock(&sp->lock);
    sd_sp_register(sp);
    return DAT_SUCCESS;
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
    pthread_mutex_unlock(&sp->lock);
    /* Blocks until no request callback runs; requests already delivered
     * are CRs and live on. */
    if (l != NULL)
        emu_listener_free(l);
    if (ep != NULL) {
        /* RSP: the EP returns to the consumer unless a CR took it (L4497). */
        pthread_mutex_lock(&ep->lock);
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
                ep->state = DAT_EP_STATE_UNCONNECTED;
            } else if (ep->state == DAT_EP_STATE_UNCONFIGURED_RESERVED) {
                ep->state = DAT_EP_STATE_UNCONFIGURED_UNCONNECTED;
            }
        }
        pthread_mutex_unlock(&ep->lock);
        if (destroy)
            sd_handle_destroy(&ep->h, DAT_INVALID_HANDLE_EP);
        sd_handle_put(&ep->h);
    }
    if (sp->evd != NULL) {
        sd_handle_dep_put(&sp->evd->h);
        sd_handle_put(&sp->evd->h);
        sp->evd = NULL;
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

static DAT_RETURN psp_create_common(DAT_IA_HANDLE ia_handle, DAT_CONN_QUAL qual, bool any, DAT_CONN_QUAL *qual_out,
                                    DAT_EVD_HANDLE evd_handle, DAT_PSP_FLAGS flags, DAT_PSP_HANDLE *psp_handle)
{
    struct sd_ia *ia;
    DAT_RETURN rc = sd_ia_get(ia_handle, &ia);
    if (rc != DAT_SUCCESS)
        return rc;
    struct sd_evd *evd = NULL;
    if (psp_handle == NULL) {
        rc = SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG5);
        goto out;
    }
    if (any ? qual_out == NULL : (qual == 0 || qual > 65535)) {
        rc = SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
        goto out;
    }
    if (flags != DAT_PSP_CONSUMER_FLAG && flags != DAT_PSP_PROVIDER_FLAG) {
        rc = SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG4);
        goto out;
    }
    if ((rc = sd_evd_get(evd_handle, DAT_INVALID_HANDLE_EVD_CR, &evd)) != DAT_SUCCESS)
        goto out;
    if (evd->h.ia != ia || !sd_evd_accepts(evd, DAT_EVD_CR_FLAG)) {
        rc = SD_RET(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_CR);
        goto out;
    }
    struct sd_sp *sp = (struct sd_sp *)sd_handle_alloc(&psp_ops, ia);
    if (sp == NULL) {
        rc = SD_RET(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
        goto out;
    }
    pthread_mutex_init(&sp->lock, NULL);
    sp->flags = flags;
    if (!sd_handle_dep_get(&evd->h)) {
        sd_handle_discard(&sp->h);
        rc = SD_RET(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_CR);
        goto out;
    }
    sd_handle_ref(&evd->h);
    sp->evd = evd;
    /* Publish before starting engine work (IA close refuses publish). */
    if ((rc = sd_handle_publish(&sp->h)) != DAT_SUCCESS) {
        sd_sp_teardown(&sp->h);
        sd_handle_discard(&sp->h);
        goto out;
    }
    if ((rc = sd_sp_listen(sp, qual, any)) != DAT_SUCCESS) {
        sd_handle_destroy(&sp->h, DAT_INVALID_HANDLE_PSP);
        goto out;
    }
    if (any) {
        pthread_mutex_lock(&sp->lock);
        *qual_out = sp->conn_qual;
        pthread_mutex_unlock(&sp->lock);
    }
    *psp_handle = (DAT_PSP_HANDLE)sp;
out:
    if (evd != NULL)
        sd_handle_put(&evd->h);
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
    return psp_create_common(ia, 0, true, qual, evd, flags, psp);
}

static DAT_RETURN sd_psp_query(DAT_PSP_HANDLE psp_handle, DAT_PSP_PARAM_MASK mask, DAT_PSP_PARAM *p)
{
    struct sd_handle *h;
    DAT_RETURN rc = sd_handle_get(psp_handle, DAT_HANDLE_TYPE_PSP, DAT_INVALID_HANDLE_PSP, &h);
    if (rc != DAT_SUCCESS)
        return rc;
    struct sd_sp *sp = (struct sd_sp *)h;
    if ((unsigned)mask & ~(unsigned)DAT_PSP_FIELD_ALL) {
        rc = SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    } else if (p == NULL) {
        rc = SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    } else {
        pthread_mutex_lock(&sp->lock);
        p->ia_handle = sd_ia_consumer_handle(sp->h.ia);
        p->conn_qual = sp->conn_qual;
        p->evd_handle = (DAT_EVD_HANDLE)sp->evd;
        p->psp_flags = sp->flags;
        pthread_mutex_unlock(&sp->lock);
    }
    sd_handle_put(h);
    return rc;
}

static DAT_RETURN sd_psp_free(DAT_PSP_HANDLE psp_handle)
{
    struct sd_handle *h;
    DAT_RETURN rc = sd_handle_get(psp_handle, DAT_HANDLE_TYPE_PSP, DAT_INVALID_HANDLE_PSP, &h);
    if (rc != DAT_SUCCESS)
        return rc;
    rc = sd_handle_destroy(h, DAT_INVALID_HANDLE_PSP);
    sd_handle_put(h);
    return rc;
}

void sd_psp_fill_table(DAT_PROVIDER *p)
{
    p->psp_create_func = sd_psp_create;
    p->psp_create_any_func = sd_psp_create_any;
    p->psp_query_func = sd_psp_query;
    p->psp_free_func = sd_psp_free;
}
