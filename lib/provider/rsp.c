/* softdat RSP: a service point reserved for one consumer EP and one
 * request. The EP goes RESERVED at create and PASSIVE_CONNECTION_PENDING
 * when the request arrives. Choice for the spec's contradiction (spec-part2
 * §1): the RSP handle stays valid after its request (sp_handle in the CR
 * event is the RSP, dat_rsp_free must still be called); later requests on
 * its port are closed without a CR, which the initiator sees as
 * NON_PEER_REJECTED, as with no listener. A NULL ep_handle asks us for the
 * EP (L4439): an unconfigured provider EP (UNCONFIGURED_RESERVED), found
 * through dat_rsp_query / dat_cr_query; the consumer configures it with
 * dat_ep_modify before accepting. It dies with a reject, or with the RSP
 * if no request came. */
#include <string.h>

#include "emu/log.h"
#include "lib/provider/ep.h"
#include "lib/provider/evd.h"
#include "lib/provider/ia.h"
#include "lib/provider/psp.h"

static const struct sd_handle_ops rsp_ops = {
    .type = DAT_HANDLE_TYPE_RSP,
    .name = "rsp",
    .size = sizeof(struct sd_sp),
    .phase = SD_PHASE_SP,
    .teardown = sd_sp_teardown,
    .release = sd_sp_release,
};

static DAT_RETURN rsp_listen(struct sd_sp *sp, void *arg)
{
    return sd_sp_listen(sp, *(const DAT_CONN_QUAL *)arg, false);
}

static DAT_RETURN sd_rsp_create(DAT_IA_HANDLE ia_handle, DAT_CONN_QUAL qual, DAT_EP_HANDLE ep_handle,
                                DAT_EVD_HANDLE evd_handle, DAT_RSP_HANDLE *rsp_handle)
{
    struct sd_ia *ia;
    DAT_RETURN rc = sd_ia_get(ia_handle, &ia);
    if (rc != DAT_SUCCESS)
        return rc;
    struct sd_ep *ep = NULL;
    bool prov = ep_handle == DAT_HANDLE_NULL;
    if (rsp_handle == NULL) {
        rc = SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG5);
        goto out;
    }
    if (!sd_conn_qual_ok(qual)) {
        rc = SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
        goto out;
    }
    if (prov) {
        rc = sd_ep_create_obj(ia, NULL, NULL, NULL, NULL, NULL, DAT_EP_STATE_UNCONFIGURED_UNCONNECTED, &ep);
        if (rc != DAT_SUCCESS)
            goto out;
        sd_handle_ref(&ep->h); /* our call reference, like sd_ep_get */
    } else if ((rc = sd_ep_get(ep_handle, &ep)) != DAT_SUCCESS) {
        goto out;
    }
    if (ep->h.ia != ia) {
        rc = SD_RET(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP);
        goto out;
    }
    struct sd_sp *sp;
    if ((rc = sd_sp_new(ia, &rsp_ops, evd_handle, &sp)) != DAT_SUCCESS)
        goto out;
    /* Reserve the EP. */
    pthread_mutex_lock(&ep->cm_lock);
    pthread_mutex_lock(&ep->lock);
    DAT_EP_STATE s = ep->state;
    if (ep->rsp == NULL && !ep->provider_ep && s == DAT_EP_STATE_UNCONNECTED)
        sd_ep_set_state(ep, DAT_EP_STATE_RESERVED);
    else if (ep->rsp == NULL && !ep->provider_ep && s == DAT_EP_STATE_UNCONFIGURED_UNCONNECTED)
        sd_ep_set_state(ep, DAT_EP_STATE_UNCONFIGURED_RESERVED);
    else
        rc = SD_RET(DAT_INVALID_STATE, sd_ep_state_subtype(s));
    if (rc == DAT_SUCCESS)
        ep->rsp = &sp->h;
    pthread_mutex_unlock(&ep->lock);
    pthread_mutex_unlock(&ep->cm_lock);
    if (rc != DAT_SUCCESS) {
        sd_sp_teardown(&sp->h);
        sd_handle_discard(&sp->h);
        goto out;
    }
    sd_handle_ref(&ep->h);
    sp->ep = ep;
    sp->ep_is_provider = prov;
    if (prov) {
        pthread_mutex_lock(&ep->lock);
        ep->provider_ep = true;
        pthread_mutex_unlock(&ep->lock);
    }
    sp->conn_qual = qual;
    /* On failure the RSP's teardown un-reserves the EP. */
    if ((rc = sd_sp_start(sp, rsp_listen, &qual)) == DAT_SUCCESS)
        *rsp_handle = (DAT_RSP_HANDLE)sp;
out:
    if (ep != NULL) {
        /* A provider EP that did not end up reserved is ours to drop. */
        if (prov && rc != DAT_SUCCESS)
            sd_handle_destroy(&ep->h, DAT_INVALID_HANDLE_EP);
        sd_handle_put(&ep->h);
    }
    sd_handle_put(&ia->h);
    return rc;
}

static DAT_RETURN sd_rsp_query(DAT_RSP_HANDLE rsp_handle, DAT_RSP_PARAM_MASK mask, DAT_RSP_PARAM *p)
{
    struct sd_sp *sp;
    DAT_RETURN rc = sd_sp_query_get(rsp_handle, DAT_HANDLE_TYPE_RSP, DAT_INVALID_HANDLE_RSP, (unsigned)mask,
                                    (unsigned)DAT_RSP_FIELD_ALL, p, &sp);
    if (rc != DAT_SUCCESS)
        return rc;
    pthread_mutex_lock(&sp->lock);
    p->ia_handle = sd_ia_consumer_handle(sp->h.ia);
    p->conn_qual = sp->conn_qual;
    p->evd_handle = (DAT_EVD_HANDLE)sp->evd;
    p->ep_handle = (DAT_EP_HANDLE)sp->ep;
    pthread_mutex_unlock(&sp->lock);
    sd_handle_put(&sp->h);
    return DAT_SUCCESS;
}

static DAT_RETURN sd_rsp_free(DAT_RSP_HANDLE rsp_handle)
{
    return sd_sp_free(rsp_handle, DAT_HANDLE_TYPE_RSP, DAT_INVALID_HANDLE_RSP);
}

void sd_rsp_fill_table(DAT_PROVIDER *p)
{
    p->rsp_create_func = sd_rsp_create;
    p->rsp_query_func = sd_rsp_query;
    p->rsp_free_func = sd_rsp_free;
}
