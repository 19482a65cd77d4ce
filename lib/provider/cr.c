/* softdat CR: a pending connection request (the emu request connection,
 * the initiator's address and private data) until the consumer accepts,
 * rejects or hands it off. Each answer destroys the CR.
 *
 * Choices: dat_cr_accept of a CR that carries an EP (RSP or provider EP)
 * takes DAT_HANDLE_NULL or that same EP; any other EP is
 * DAT_INVALID_PARAMETER. A CR freed without an answer (IA close) closes
 * the request: the initiator sees NON_PEER_REJECTED.
 *
 * dat_cr_handoff (in-process; the spec's "same IA on the same node"):
 * the target is the SP listening on the handoff qualifier — a PSP, an RSP
 * that has not had its request yet, or a CSP whose port it is and whose
 * address is the IA's or the wildcard — of the CR's IA, else of another IA
 * of this process opened on the same interface adapter (same dat.conf
 * record, same address). None (or a qual naming port 0) ⇒
 * DAT_INVALID_PARAMETER|ARG2 and the CR is untouched. Otherwise the CR is
 * destroyed (its handle is dead, its EP goes back as on reject) and the
 * request is delivered to the target as a new CR with a new
 * CONNECTION_REQUEST_EVENT on the target's EVD, exactly as an arrival
 * there: a PROVIDER-flag PSP makes a new provider EP, an RSP hands out its
 * EP, a full target EVD refuses the request (non-peer reject). Handing a
 * request to another process would need the socket passed over a unix
 * socket; not done. */
#include "lib/provider/cr.h"

#include <errno.h>
#include <string.h>

#include "emu/log.h"
#include "lib/provider/ep.h"
#include "lib/provider/ep_ud.h"
#include "lib/provider/ia.h"
#include "lib/provider/psp.h"

static void cr_teardown(struct sd_handle *h)
{
    struct sd_cr *cr = (struct sd_cr *)h;
    pthread_mutex_lock(&cr->lock);
    struct emu_conn *c = cr->conn;
    cr->conn = NULL;
    struct sd_ep *ep = cr->ep;
    cr->ep = NULL;
    bool prov = cr->ep_is_provider;
    pthread_mutex_unlock(&cr->lock);
    if (c != NULL)
        emu_conn_free(c);
    if (ep != NULL)
        sd_sp_ep_giveback(ep, prov, false);
}

static void cr_release(struct sd_handle *h)
{
    pthread_mutex_destroy(&((struct sd_cr *)h)->lock);
}

static const struct sd_handle_ops cr_ops = {
    .type = DAT_HANDLE_TYPE_CR,
    .name = "cr",
    .size = sizeof(struct sd_cr),
    .phase = SD_PHASE_CR,
    .teardown = cr_teardown,
    .release = cr_release,
};

struct sd_cr *sd_cr_new(struct sd_ia *ia, struct emu_conn *conn, DAT_CONN_QUAL qual, const void *pdata,
                        uint16_t pdata_len, const struct sockaddr *peer, socklen_t peer_len, uint16_t peer_ird,
                        uint16_t peer_ord)
{
    struct sd_cr *cr = (struct sd_cr *)sd_handle_alloc(&cr_ops, ia);
    if (cr == NULL)
        return NULL;
    pthread_mutex_init(&cr->lock, NULL);
    cr->conn = conn;
    cr->conn_qual = qual;
    if (peer != NULL && peer_len <= sizeof cr->remote) {
        memcpy(&cr->remote, peer, peer_len);
        cr->remote_len = peer_len;
        cr->remote_port = emu_sockaddr_port(peer);
    }
    if (pdata_len > sizeof cr->pdata)
        pdata_len = sizeof cr->pdata;
    if (pdata != NULL && pdata_len > 0)
        memcpy(cr->pdata, pdata, pdata_len);
    cr->pdata_len = pdata != NULL ? pdata_len : 0;
    cr->peer_ird = peer_ird;
    cr->peer_ord = peer_ord;
    return cr;
}

static inline DAT_RETURN cr_get(DAT_CR_HANDLE raw, struct sd_cr **out)
{
    struct sd_handle *h;
    DAT_RETURN rc = sd_handle_get(raw, DAT_HANDLE_TYPE_CR, DAT_INVALID_HANDLE_CR, &h);
    *out = rc == DAT_SUCCESS ? (struct sd_cr *)h : NULL;
    return rc;
}

static DAT_RETURN sd_cr_query(DAT_CR_HANDLE cr_handle, DAT_CR_PARAM_MASK mask, DAT_CR_PARAM *p)
{
    struct sd_cr *cr;
    DAT_RETURN rc = cr_get(cr_handle, &cr);
    if (rc != DAT_SUCCESS)
        return rc;
    if ((unsigned)mask & ~(unsigned)DAT_CR_FIELD_ALL) {
        rc = SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    } else if (p == NULL) {
        rc = SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    } else {
        pthread_mutex_lock(&cr->lock);
        p->remote_ia_address_ptr = (DAT_IA_ADDRESS_PTR)&cr->remote;
        p->remote_port_qual = cr->remote_port;
        p->private_data_size = cr->pdata_len;
        /* Writable, owned by the CR until it is answered. */
        p->private_data = cr->pdata;
        p->local_ep_handle = (DAT_EP_HANDLE)cr->ep;
        pthread_mutex_unlock(&cr->lock);
    }
    sd_handle_put(&cr->h);
    return rc;
}

DAT_RETURN sd_cr_take_conn(struct sd_cr *cr, struct emu_conn **conn)
{
    pthread_mutex_lock(&cr->lock);
    *conn = cr->conn;
    cr->conn = NULL;
    pthread_mutex_unlock(&cr->lock);
    return *conn != NULL ? DAT_SUCCESS : SD_RET(DAT_INVALID_STATE, 0);
}

DAT_RETURN sd_cm_check_pdata(DAT_COUNT size, const void *pd, DAT_UINT32 size_arg, DAT_UINT32 pd_arg)
{
    if (size < 0 || size > SD_MAX_PRIVATE_DATA)
        return SD_RET(DAT_INVALID_PARAMETER, size_arg);
    if (size > 0 && pd == NULL)
        return SD_RET(DAT_INVALID_PARAMETER, pd_arg);
    return DAT_SUCCESS;
}

static DAT_RETURN sd_cr_accept(DAT_CR_HANDLE cr_handle, DAT_EP_HANDLE ep_handle, DAT_COUNT pdata_size,
                               const DAT_PVOID pdata)
{
    struct sd_cr *cr;
    DAT_RETURN rc = cr_get(cr_handle, &cr);
    if (rc != DAT_SUCCESS)
        return rc;
    struct sd_ep *ep = NULL;
    if ((rc = sd_cm_check_pdata(pdata_size, pdata, DAT_INVALID_ARG3, DAT_INVALID_ARG4)) != DAT_SUCCESS)
        goto out;
    pthread_mutex_lock(&cr->lock);
    struct sd_ep *crep = cr->ep;
    if (crep != NULL)
        sd_handle_ref(&crep->h);
    pthread_mutex_unlock(&cr->lock);
    if (ep_handle != DAT_HANDLE_NULL) {
        if ((rc = sd_ep_get(ep_handle, &ep)) != DAT_SUCCESS) {
            if (crep)
                sd_handle_put(&crep->h);
            goto out;
        }
        if (crep != NULL && ep != crep)
            rc = SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
        else if (ep->h.ia != cr->h.ia)
            rc = SD_RET(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP);
        if (crep)
            sd_handle_put(&crep->h);
        if (rc != DAT_SUCCESS)
            goto out;
    } else if (crep == NULL) {
        rc = SD_RET(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP);
        goto out;
    } else {
        ep = crep;
    }
    if (cr->ud || sd_ep_is_ud(ep)) { /* an address exchange (ep_ud.c) */
        rc = sd_ud_accept(cr, ep, pdata_size, pdata);
        goto out;
    }

    pthread_mutex_lock(&ep->cm_lock);
    emu_lock(&ep->lock);
    DAT_EP_STATE s = ep->state;
    if (crep != NULL) {
        if (s != DAT_EP_STATE_PASSIVE_CONNECTION_PENDING && s != DAT_EP_STATE_TENTATIVE_CONNECTION_PENDING)
            rc = SD_RET(DAT_INVALID_STATE, sd_ep_state_subtype(s));
    } else if (s != DAT_EP_STATE_UNCONNECTED || ep->rsp != NULL || ep->provider_ep) {
        rc = SD_RET(DAT_INVALID_STATE, sd_ep_state_subtype(s));
    }
    if (rc == DAT_SUCCESS && !sd_ep_configured_locked(ep))
        rc = SD_RET(DAT_INVALID_STATE, DAT_INVALID_STATE_EP_UNCONFIGURED);
    struct emu_conn *conn = NULL;
    if (rc == DAT_SUCCESS)
        rc = sd_cr_take_conn(cr, &conn);
    bool old_prov = ep->provider_ep;
    struct sd_handle *old_rsp = ep->rsp;
    struct emu_conn_params prm;
    if (rc == DAT_SUCCESS) {
        ep->conn_id = sd_ep_next_conn_id(); /* first: the state record names it */
        sd_ep_set_state(ep, DAT_EP_STATE_COMPLETION_PENDING);
        ep->conn = conn;
        memcpy(&ep->remote_addr, &cr->remote, sizeof ep->remote_addr);
        ep->remote_port = cr->remote_port;
        ep->remote_set = true;
        /* Until ESTABLISHED fills in the socket's address: the SP's. */
        memcpy(&ep->local_addr, &ep->h.ia->addr, sizeof ep->local_addr);
        ep->local_port = cr->conn_qual;
        ep->local_set = true;
        ep->initiator = false;
        ep->aborting = false;
        ep->ev_pdata_len = 0;
        /* From here the consumer owns the EP, whatever the outcome (L5503). */
        ep->provider_ep = false;
        ep->rsp = NULL;
        sd_ep_conn_params(ep, &prm, 0);
    }
    emu_unlock(&ep->lock);
    if (rc == DAT_SUCCESS) {
        int r = emu_conn_accept(conn, &prm, pdata, (uint16_t)pdata_size, &sd_ep_conn_ops, ep);
        if (r != 0) {
            emu_lock(&ep->lock);
            sd_ep_set_state(ep, s);
            ep->conn = NULL;
            ep->remote_set = false;
            ep->provider_ep = old_prov;
            ep->rsp = old_rsp;
            emu_unlock(&ep->lock);
            pthread_mutex_lock(&cr->lock);
            cr->conn = conn;
            pthread_mutex_unlock(&cr->lock);
            rc = r == -EINVAL ? SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3) : SD_RET(DAT_INVALID_STATE, 0);
        }
    }
    pthread_mutex_unlock(&ep->cm_lock);
    if (rc == DAT_SUCCESS) {
        SD_CNT_IA(cr->h.ia, DCNT_IA_SP_CR_ACCEPTED);
        SD_CNT_IA(cr->h.ia, DCNT_IA_CM_REP_TX);
        pthread_mutex_lock(&cr->lock);
        struct sd_ep *held = cr->ep;
        cr->ep = NULL;
        pthread_mutex_unlock(&cr->lock);
        if (held != NULL)
            sd_handle_put(&held->h);
        sd_handle_destroy(&cr->h, DAT_INVALID_HANDLE_CR);
    }
out:
    if (ep != NULL)
        sd_handle_put(&ep->h);
    sd_handle_put(&cr->h);
    return rc;
}

static DAT_RETURN sd_cr_reject(DAT_CR_HANDLE cr_handle, DAT_COUNT pdata_size, const DAT_PVOID pdata)
{
    struct sd_cr *cr;
    DAT_RETURN rc = cr_get(cr_handle, &cr);
    if (rc != DAT_SUCCESS)
        return rc;
    if ((rc = sd_cm_check_pdata(pdata_size, pdata, DAT_INVALID_ARG2, DAT_INVALID_ARG3)) == DAT_SUCCESS) {
        pthread_mutex_lock(&cr->lock);
        struct emu_conn *c = cr->conn;
        cr->conn = NULL;
        pthread_mutex_unlock(&cr->lock);
        if (c != NULL && emu_conn_reject(c, pdata, (uint16_t)pdata_size) != 0)
            emu_conn_free(c);
        else if (c != NULL) {
            SD_CNT_IA(cr->h.ia, DCNT_IA_SP_CR_REJECTED);
            SD_CNT_IA(cr->h.ia, DCNT_IA_CM_USER_REJ_TX);
        }
        /* The EP part (RSP EP back to UNCONNECTED, provider EP gone) is
         * the CR's teardown. */
        rc = sd_handle_destroy(&cr->h, DAT_INVALID_HANDLE_CR);
    }
    sd_handle_put(&cr->h);
    return rc;
}

static DAT_RETURN sd_cr_handoff(DAT_CR_HANDLE cr_handle, DAT_CONN_QUAL qual)
{
    struct sd_cr *cr;
    DAT_RETURN rc = cr_get(cr_handle, &cr);
    if (rc != DAT_SUCCESS)
        return rc;
    struct sd_sp *target = NULL;
    if (!sd_conn_qual_ok(qual) || (target = sd_sp_find_handoff(cr->h.ia, qual)) == NULL) {
        rc = SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
        goto out;
    }
    pthread_mutex_lock(&cr->lock);
    struct emu_conn *c = cr->conn;
    cr->conn = NULL;
    pthread_mutex_unlock(&cr->lock);
    if (c == NULL) {
        /* Already answered (a racing accept: the consumer broke the
         * non-thread-safe rule); nothing left to hand over. */
        rc = SD_RET(DAT_INVALID_STATE, 0);
        goto out;
    }
    /* The CR dies first: its EP goes back (provider EP destroyed, RSP EP
     * UNCONNECTED / UNCONFIGURED_UNCONNECTED, L5460), so the target may
     * even be that EP's RSP's successor. Then the request arrives at the
     * target as if directly from the initiator (L1147-1152): a new CR and
     * event there, or, if its EVD is full, a non-peer reject. */
    rc = sd_handle_destroy(&cr->h, DAT_INVALID_HANDLE_CR);
    /* A UD request travels on with its UD header (ep_ud.c). */
    uint8_t ud_pd[EMU_CONN_PDATA_RX_MAX + SD_UD_PDATA_HDR];
    const void *pd = cr->pdata;
    uint16_t pd_len = (uint16_t)cr->pdata_len;
    if (cr->ud) {
        pd_len = sd_ud_request_pdata(cr, ud_pd, sizeof ud_pd);
        pd = ud_pd;
    }
    sd_sp_deliver(target, c, pd, pd_len, (const struct sockaddr *)&cr->remote, cr->remote_len, cr->peer_ird,
                  cr->peer_ord);
out:
    if (target != NULL)
        sd_handle_put(&target->h);
    sd_handle_put(&cr->h);
    return rc;
}

void sd_cr_fill_table(DAT_PROVIDER *p)
{
    p->cr_query_func = sd_cr_query;
    p->cr_accept_func = sd_cr_accept;
    p->cr_reject_func = sd_cr_reject;
    p->cr_handoff_func = sd_cr_handoff;
}
