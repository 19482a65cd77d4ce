/* softdat EP: the object, its attributes and the calls that do not move a
 * connection (create, query, modify, get_status, free, reset). The
 * connection state machine lives in ep_cm.c; posts in ep_dto.c.
 *
 * Deferred configuration (spec 6.6.2): an EP lacks something a connection
 * needs ("unconfigured") when it has no PZ, no connect EVD, or no EVD for a
 * DTO stream it has room for (recv_evd with max_recv_dtos > 0 and no SRQ,
 * request_evd with max_request_dtos > 0). The spec's strict reading (any
 * NULL EVD) would refuse consumers that never post on a stream. */
#include "lib/provider/ep.h"
#include "lib/provider/ep_ud.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "emu/log.h"
#include "lib/provider/cr.h"
#include "lib/provider/evd.h"
#include "lib/provider/progress.h"
#include "lib/provider/ia.h"
#include "lib/provider/psp.h"
#include "lib/provider/pz.h"
#include "lib/provider/srq.h"


#define ALL_COMPLETION_FLAGS                                                                    \
    (DAT_COMPLETION_SUPPRESS_FLAG | DAT_COMPLETION_SOLICITED_WAIT_FLAG |                         \
     DAT_COMPLETION_UNSIGNALLED_FLAG | DAT_COMPLETION_EVD_THRESHOLD_FLAG)
#define ALL_QOS                                                                                 \
    (DAT_QOS_BEST_EFFORT | DAT_QOS_HIGH_THROUGHPUT | DAT_QOS_LOW_LATENCY | DAT_QOS_ECONOMY |   \
     DAT_QOS_PREMIUM)

/* Defaults: usable for every DTO kind, modest queues (dapltest creates its
 * control EP with NULL attributes and posts a few receives). */
#define SD_EP_DEFAULT_DTOS 64

void sd_ep_default_attr(DAT_EP_ATTR *a)
{
    memset(a, 0, sizeof *a);
    a->service_type = DAT_SERVICE_TYPE_RC;
    a->max_message_size = SD_MAX_MESSAGE_SIZE;
    a->max_rdma_size = SD_MAX_RDMA_SIZE;
    a->qos = DAT_QOS_BEST_EFFORT;
    a->recv_completion_flags = DAT_COMPLETION_EVD_THRESHOLD_FLAG;
    a->request_completion_flags = DAT_COMPLETION_EVD_THRESHOLD_FLAG;
    a->max_recv_dtos = SD_EP_DEFAULT_DTOS;
    a->max_request_dtos = SD_EP_DEFAULT_DTOS;
    a->max_recv_iov = SD_MAX_IOV_PER_DTO;
    a->max_request_iov = SD_MAX_IOV_PER_DTO;
    a->max_rdma_read_in = SD_MAX_RDMA_READ_PER_EP_IN;
    a->max_rdma_read_out = SD_MAX_RDMA_READ_PER_EP_OUT;
    a->srq_soft_hw = DAT_HW_DEFAULT;
    a->max_rdma_read_iov = SD_MAX_IOV_PER_RDMA_READ;
    a->max_rdma_write_iov = SD_MAX_IOV_PER_RDMA_WRITE;
}

/* Check one attribute set against our limits (the masked fields only, for
 * modify). 0 ok, else the DAT error. */
static DAT_RETURN check_attr(const DAT_EP_ATTR *a, DAT_EP_PARAM_MASK m, DAT_UINT32 arg)
{
    const DAT_RETURN bad = SD_RET(DAT_INVALID_PARAMETER, arg);
    if (m & DAT_EP_FIELD_EP_ATTR_SERVICE_TYPE) {
        /* DAT_SERVICE_TYPE_EXTENSION_BASE is DAT_IB_SERVICE_TYPE_UD (ep_ud.c). */
        if (a->service_type != DAT_SERVICE_TYPE_RC && a->service_type != DAT_SERVICE_TYPE_EXTENSION_BASE)
            return bad;
    }
    if ((m & DAT_EP_FIELD_EP_ATTR_MAX_MESSAGE_SIZE) && a->max_message_size > SD_MAX_MESSAGE_SIZE)
        return bad;
    if ((m & DAT_EP_FIELD_EP_ATTR_MAX_RDMA_SIZE) && a->max_rdma_size > SD_MAX_RDMA_SIZE)
        return bad;
    if ((m & DAT_EP_FIELD_EP_ATTR_QOS) && (a->qos & ~(DAT_QOS)ALL_QOS))
        return bad;
    if ((m & DAT_EP_FIELD_EP_ATTR_RECV_COMPLETION_FLAGS) &&
        (a->recv_completion_flags & ~(DAT_COMPLETION_FLAGS)ALL_COMPLETION_FLAGS))
        return bad;
    if ((m & DAT_EP_FIELD_EP_ATTR_REQUEST_COMPLETION_FLAGS) &&
        (a->request_completion_flags & ~(DAT_COMPLETION_FLAGS)ALL_COMPLETION_FLAGS))
        return bad;
    if ((m & DAT_EP_FIELD_EP_ATTR_MAX_RECV_DTOS) &&
        (a->max_recv_dtos < 0 || a->max_recv_dtos > SD_MAX_DTO_PER_EP))
        return bad;
    if ((m & DAT_EP_FIELD_EP_ATTR_MAX_REQUEST_DTOS) &&
        (a->max_request_dtos < 0 || a->max_request_dtos > SD_MAX_DTO_PER_EP))
        return bad;
    if ((m & DAT_EP_FIELD_EP_ATTR_MAX_RECV_IOV) && (a->max_recv_iov < 0 || a->max_recv_iov > SD_MAX_IOV_PER_DTO))
        return bad;
    if ((m & DAT_EP_FIELD_EP_ATTR_MAX_REQUEST_IOV) &&
        (a->max_request_iov < 0 || a->max_request_iov > SD_MAX_IOV_PER_DTO))
        return bad;
    if ((m & DAT_EP_FIELD_EP_ATTR_MAX_RDMA_READ_IN) &&
        (a->max_rdma_read_in < 0 || a->max_rdma_read_in > SD_MAX_RDMA_READ_PER_EP_IN))
        return bad;
    if ((m & DAT_EP_FIELD_EP_ATTR_MAX_RDMA_READ_OUT) &&
        (a->max_rdma_read_out < 0 || a->max_rdma_read_out > SD_MAX_RDMA_READ_PER_EP_OUT))
        return bad;
    if ((m & DAT_EP_FIELD_EP_ATTR_MAX_RDMA_READ_IOV) &&
        (a->max_rdma_read_iov < 0 || a->max_rdma_read_iov > SD_MAX_IOV_PER_RDMA_READ))
        return bad;
    if ((m & DAT_EP_FIELD_EP_ATTR_MAX_RDMA_WRITE_IOV) &&
        (a->max_rdma_write_iov < 0 || a->max_rdma_write_iov > SD_MAX_IOV_PER_RDMA_WRITE))
        return bad;
    if ((m & DAT_EP_FIELD_EP_ATTR_NUM_TRANSPORT_ATTR) && a->ep_transport_specific_count < 0)
        return bad;
    if ((m & DAT_EP_FIELD_EP_ATTR_TRANSPORT_SPECIFIC_ATTR) && a->ep_transport_specific_count > 0 &&
        a->ep_transport_specific == NULL)
        return bad;
    if ((m & DAT_EP_FIELD_EP_ATTR_NUM_PROVIDER_ATTR) && a->ep_provider_specific_count < 0)
        return bad;
    if ((m & DAT_EP_FIELD_EP_ATTR_PROVIDER_SPECIFIC_ATTR) && a->ep_provider_specific_count > 0 &&
        a->ep_provider_specific == NULL)
        return bad;
    return DAT_SUCCESS;
}

/* Copy the masked attribute fields. We honour no named attributes, so
 * none are kept (query reports 0). */
static void apply_attr(DAT_EP_ATTR *dst, const DAT_EP_ATTR *s, DAT_EP_PARAM_MASK m)
{
#define CP(bit, f)                                                                                 \
    if (m & (bit))                                                                                 \
    dst->f = s->f
    CP(DAT_EP_FIELD_EP_ATTR_SERVICE_TYPE, service_type);
    CP(DAT_EP_FIELD_EP_ATTR_MAX_MESSAGE_SIZE, max_message_size);
    CP(DAT_EP_FIELD_EP_ATTR_MAX_RDMA_SIZE, max_rdma_size);
    CP(DAT_EP_FIELD_EP_ATTR_QOS, qos);
    CP(DAT_EP_FIELD_EP_ATTR_RECV_COMPLETION_FLAGS, recv_completion_flags);
    CP(DAT_EP_FIELD_EP_ATTR_REQUEST_COMPLETION_FLAGS, request_completion_flags);
    CP(DAT_EP_FIELD_EP_ATTR_MAX_RECV_DTOS, max_recv_dtos);
    CP(DAT_EP_FIELD_EP_ATTR_MAX_REQUEST_DTOS, max_request_dtos);
    CP(DAT_EP_FIELD_EP_ATTR_MAX_RECV_IOV, max_recv_iov);
    CP(DAT_EP_FIELD_EP_ATTR_MAX_REQUEST_IOV, max_request_iov);
    CP(DAT_EP_FIELD_EP_ATTR_MAX_RDMA_READ_IN, max_rdma_read_in);
    CP(DAT_EP_FIELD_EP_ATTR_MAX_RDMA_READ_OUT, max_rdma_read_out);
    CP(DAT_EP_FIELD_EP_ATTR_MAX_RDMA_READ_IOV, max_rdma_read_iov);
    CP(DAT_EP_FIELD_EP_ATTR_MAX_RDMA_WRITE_IOV, max_rdma_write_iov);
#undef CP
    dst->ep_transport_specific_count = 0;
    dst->ep_transport_specific = NULL;
    dst->ep_provider_specific_count = 0;
    dst->ep_provider_specific = NULL;
}

bool sd_ep_configured_locked(const struct sd_ep *ep)
{
    if (ep->pz == NULL || ep->connect_evd == NULL)
        return false;
    if (ep->recv_evd == NULL && ep->srq == NULL && ep->attr.max_recv_dtos > 0)
        return false;
    if (ep->request_evd == NULL && ep->attr.max_request_dtos > 0)
        return false;
    return true;
}

DAT_UINT32 sd_ep_state_subtype(DAT_EP_STATE s)
{
    switch (s) {
    case DAT_EP_STATE_UNCONNECTED: return DAT_INVALID_STATE_EP_UNCONNECTED;
    case DAT_EP_STATE_UNCONFIGURED_UNCONNECTED: return DAT_INVALID_STATE_EP_UNCONFIGURED;
    case DAT_EP_STATE_RESERVED: return DAT_INVALID_STATE_EP_RESERVED;
    case DAT_EP_STATE_UNCONFIGURED_RESERVED: return DAT_INVALID_STATE_EP_UNCONFRESERVED;
    case DAT_EP_STATE_PASSIVE_CONNECTION_PENDING: return DAT_INVALID_STATE_EP_PASSCONNPENDING;
    case DAT_EP_STATE_UNCONFIGURED_PASSIVE: return DAT_INVALID_STATE_EP_UNCONFPASSIVE;
    case DAT_EP_STATE_ACTIVE_CONNECTION_PENDING: return DAT_INVALID_STATE_EP_ACTCONNPENDING;
    case DAT_EP_STATE_TENTATIVE_CONNECTION_PENDING: return DAT_INVALID_STATE_EP_TENTCONNPENDING;
    case DAT_EP_STATE_UNCONFIGURED_TENTATIVE: return DAT_INVALID_STATE_EP_UNCONFTENTATIVE;
    case DAT_EP_STATE_CONNECTED:
    case DAT_EP_STATE_CONNECTED_SINGLE_PATH:
    case DAT_EP_STATE_CONNECTED_MULTI_PATH: return DAT_INVALID_STATE_EP_CONNECTED;
    case DAT_EP_STATE_DISCONNECT_PENDING: return DAT_INVALID_STATE_EP_DISCPENDING;
    case DAT_EP_STATE_DISCONNECTED: return DAT_INVALID_STATE_EP_DISCONNECTED;
    case DAT_EP_STATE_COMPLETION_PENDING: return DAT_INVALID_STATE_EP_COMPLPENDING;
    }
    return DAT_INVALID_STATE_EP_NOTREADY;
}

/* The configured counterpart of an unconfigured state, or the state. */
static DAT_EP_STATE configured_state(DAT_EP_STATE s)
{
    switch (s) {
    case DAT_EP_STATE_UNCONFIGURED_UNCONNECTED: return DAT_EP_STATE_UNCONNECTED;
    case DAT_EP_STATE_UNCONFIGURED_RESERVED: return DAT_EP_STATE_RESERVED;
    case DAT_EP_STATE_UNCONFIGURED_PASSIVE: return DAT_EP_STATE_PASSIVE_CONNECTION_PENDING;
    case DAT_EP_STATE_UNCONFIGURED_TENTATIVE: return DAT_EP_STATE_TENTATIVE_CONNECTION_PENDING;
    default: return s;
    }
}

static bool state_unconfigured(DAT_EP_STATE s)
{
    return s == DAT_EP_STATE_UNCONFIGURED_UNCONNECTED || s == DAT_EP_STATE_UNCONFIGURED_RESERVED ||
           s == DAT_EP_STATE_UNCONFIGURED_PASSIVE || s == DAT_EP_STATE_UNCONFIGURED_TENTATIVE;
}

/* Before connect/accept (spec Table 5 "PRE"). */
static bool state_pre(DAT_EP_STATE s)
{
    return s == DAT_EP_STATE_UNCONNECTED || s == DAT_EP_STATE_RESERVED ||
           s == DAT_EP_STATE_PASSIVE_CONNECTION_PENDING || s == DAT_EP_STATE_TENTATIVE_CONNECTION_PENDING ||
           state_unconfigured(s);
}

/* ---- object lifetime */

static void drop_ref(struct sd_handle **hp)
{
    if (*hp != NULL) {
        sd_handle_dep_put(*hp);
        sd_handle_put(*hp);
        *hp = NULL;
    }
}

static void ep_teardown(struct sd_handle *h)
{
    struct sd_ep *ep = (struct sd_ep *)h;
    pthread_mutex_lock(&ep->cm_lock);
    emu_lock(&ep->lock);
    struct emu_conn *c = ep->conn;
    ep->conn = NULL;
    emu_unlock(&ep->lock);
    /* Abortive close, no further events: the peer sees the connection
     * end; we post nothing (spec L6034). */
    if (c != NULL) {
        if (ep->qp != NULL) {
            emu_qp_quiesce(ep->qp); /* the peer's last Send gets its confirmation */
            emu_qp_unlink(ep->qp); /* a spinner's pass may reach the QP until sd_progress_remove */
        }
        emu_conn_free(c);
    }
    sd_progress_remove(ep); /* before the QP is destroyed */
    sd_ep_dto_fini(ep);
    pthread_mutex_unlock(&ep->cm_lock);
    /* The QP is gone (the buffer it held completed FLUSHED): the SRQ
     * loses this user. */
    if (ep->srq != NULL) {
        sd_srq_detach_ep(ep->srq, ep);
        drop_ref((struct sd_handle **)&ep->srq);
    }
    drop_ref((struct sd_handle **)&ep->pz);
    drop_ref((struct sd_handle **)&ep->recv_evd);
    drop_ref((struct sd_handle **)&ep->request_evd);
    drop_ref((struct sd_handle **)&ep->connect_evd);
}

static void ep_release(struct sd_handle *h)
{
    struct sd_ep *ep = (struct sd_ep *)h;
    emu_lock_destroy(&ep->lock);
    pthread_mutex_destroy(&ep->cm_lock);
}

static const struct sd_handle_ops ep_ops = {
    .type = DAT_HANDLE_TYPE_EP,
    .name = "ep",
    .size = sizeof(struct sd_ep),
    .phase = SD_PHASE_EP,
    .teardown = ep_teardown,
    .release = ep_release,
};

/* Tell the EVDs how this EP's completion streams notify (docs/events.md:
 * an UNSIGNALLED or SOLICITED_WAIT stream changes what counts toward an
 * EVD's threshold). Called without ep->lock. */
static void set_evd_config(struct sd_evd *recv, struct sd_evd *req, DAT_COMPLETION_FLAGS rf,
                           DAT_COMPLETION_FLAGS qf)
{
    if (recv != NULL) {
        if (rf & DAT_COMPLETION_SOLICITED_WAIT_FLAG)
            sd_evd_set_config(recv, SD_EVQ_CFG_SOLICITED);
        else if (rf & DAT_COMPLETION_UNSIGNALLED_FLAG)
            sd_evd_set_config(recv, SD_EVQ_CFG_NOTIFY);
    }
    if (req != NULL && (qf & DAT_COMPLETION_UNSIGNALLED_FLAG))
        sd_evd_set_config(req, SD_EVQ_CFG_NOTIFY);
}

static int take_dep(struct sd_handle *h)
{
    if (h == NULL)
        return 1;
    if (!sd_handle_dep_get(h))
        return 0;
    sd_handle_ref(h);
    return 1;
}

static DAT_RETURN create_obj(struct sd_ia *ia, struct sd_pz *pz, struct sd_evd *recv_evd,
                             struct sd_evd *request_evd, struct sd_evd *connect_evd, struct sd_srq *srq,
                             const DAT_EP_ATTR *attr, DAT_EP_STATE state, struct sd_ep **out);

DAT_RETURN sd_ep_create_obj(struct sd_ia *ia, struct sd_pz *pz, struct sd_evd *recv_evd,
                            struct sd_evd *request_evd, struct sd_evd *connect_evd,
                            const DAT_EP_ATTR *attr, DAT_EP_STATE state, struct sd_ep **out)
{
    return create_obj(ia, pz, recv_evd, request_evd, connect_evd, NULL, attr, state, out);
}

static DAT_RETURN create_obj(struct sd_ia *ia, struct sd_pz *pz, struct sd_evd *recv_evd,
                             struct sd_evd *request_evd, struct sd_evd *connect_evd, struct sd_srq *srq,
                             const DAT_EP_ATTR *attr, DAT_EP_STATE state, struct sd_ep **out)
{
    struct sd_ep *ep = (struct sd_ep *)sd_handle_alloc(&ep_ops, ia);
    if (ep == NULL)
        return SD_RET(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
    emu_lock_init(&ep->lock);
    pthread_mutex_init(&ep->cm_lock, NULL);
    if (attr != NULL) {
        sd_ep_default_attr(&ep->attr);
        apply_attr(&ep->attr, attr, DAT_EP_FIELD_EP_ATTR_ALL);
    } else {
        sd_ep_default_attr(&ep->attr);
    }
    ep->attr.srq_soft_hw = DAT_HW_DEFAULT;
    DAT_RETURN rc = DAT_SUCCESS;
    if (!take_dep(pz ? &pz->h : NULL)) {
        rc = SD_RET(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_PZ);
        goto fail;
    }
    ep->pz = pz;
    if (!take_dep(recv_evd ? &recv_evd->h : NULL)) {
        rc = SD_RET(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_RECV);
        goto fail;
    }
    ep->recv_evd = recv_evd;
    if (!take_dep(request_evd ? &request_evd->h : NULL)) {
        rc = SD_RET(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_REQUEST);
        goto fail;
    }
    ep->request_evd = request_evd;
    if (!take_dep(connect_evd ? &connect_evd->h : NULL)) {
        rc = SD_RET(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_CONN);
        goto fail;
    }
    ep->connect_evd = connect_evd;
    if (srq != NULL) {
        /* Before the QP is built: its receives come from the SRQ. The
         * hard high watermark (max_recv_dtos) is kept as given. */
        if (!take_dep(&srq->h)) {
            rc = SD_RET(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_SRQ);
            goto fail;
        }
        ep->srq = srq;
        ep->attr.max_recv_dtos = attr->max_recv_dtos;
        ep->attr.srq_soft_hw = attr->srq_soft_hw;
    }
    if (state == DAT_EP_STATE_UNCONNECTED && !sd_ep_configured_locked(ep))
        state = DAT_EP_STATE_UNCONFIGURED_UNCONNECTED;
    sd_ep_set_state(ep, state);
    /* The QP needs the PZ: an EP without one gets it when modify supplies
     * the PZ (ep->qp stays NULL until then). */
    if (ep->pz != NULL) {
        rc = sd_ep_dto_init(ep);
        if (rc != DAT_SUCCESS)
            goto fail;
    }
    /* On the SRQ's list before anyone can free it (IA close included). */
    if (ep->srq != NULL)
        sd_srq_attach_ep(ep->srq, ep);
    rc = sd_handle_publish(&ep->h);
    if (rc != DAT_SUCCESS) {
        sd_ep_dto_fini(ep);
        goto fail;
    }
    set_evd_config(ep->recv_evd, ep->request_evd, ep->attr.recv_completion_flags,
                   ep->attr.request_completion_flags);
    *out = ep;
    return DAT_SUCCESS;
fail:
    if (ep->srq != NULL)
        sd_srq_detach_ep(ep->srq, ep);
    drop_ref((struct sd_handle **)&ep->srq);
    drop_ref((struct sd_handle **)&ep->pz);
    drop_ref((struct sd_handle **)&ep->recv_evd);
    drop_ref((struct sd_handle **)&ep->request_evd);
    drop_ref((struct sd_handle **)&ep->connect_evd);
    sd_handle_discard(&ep->h);
    return rc;
}

/* Look up an optional EVD argument of `ia` (or of another open instance
 * of the same IA) that must carry `stream`. */
static DAT_RETURN get_evd_arg(struct sd_ia *ia, DAT_EVD_HANDLE raw, DAT_EVD_FLAGS stream, DAT_UINT32 sub,
                              struct sd_evd **out)
{
    *out = NULL;
    if (raw == DAT_HANDLE_NULL)
        return DAT_SUCCESS;
    struct sd_evd *evd;
    DAT_RETURN rc = sd_evd_get(raw, sub, &evd);
    if (rc != DAT_SUCCESS)
        return rc;
    if (!sd_ia_same_device(evd->h.ia, ia) || (evd->flags & stream) == 0) {
        sd_handle_put(&evd->h);
        return SD_RET(DAT_INVALID_HANDLE, sub);
    }
    *out = evd;
    return DAT_SUCCESS;
}

/* The PZ and EVD arguments of dat_ep_create / dat_ep_create_with_srq, each
 * validated (of this IA, the right streams) with a reference taken; the
 * caller drops what it got on every path. */
static DAT_RETURN get_create_handles(struct sd_ia *ia, DAT_PZ_HANDLE pz_handle, DAT_EVD_HANDLE recv_h,
                                     DAT_EVD_HANDLE req_h, DAT_EVD_HANDLE conn_h, struct sd_pz **pz,
                                     struct sd_evd **rv, struct sd_evd **rq, struct sd_evd **cn)
{
    DAT_RETURN rc;
    if (pz_handle != DAT_HANDLE_NULL) {
        if ((rc = sd_pz_get(pz_handle, pz)) != DAT_SUCCESS)
            return rc;
        if ((*pz)->h.ia != ia)
            return SD_RET(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_PZ);
    }
    if ((rc = get_evd_arg(ia, recv_h, DAT_EVD_DTO_FLAG, DAT_INVALID_HANDLE_EVD_RECV, rv)) != DAT_SUCCESS ||
        (rc = get_evd_arg(ia, req_h, DAT_EVD_DTO_FLAG | DAT_EVD_RMR_BIND_FLAG, DAT_INVALID_HANDLE_EVD_REQUEST,
                          rq)) != DAT_SUCCESS)
        return rc;
    return get_evd_arg(ia, conn_h, DAT_EVD_CONNECTION_FLAG, DAT_INVALID_HANDLE_EVD_CONN, cn);
}

static void put_opt(void *h)
{
    if (h != NULL)
        sd_handle_put((struct sd_handle *)h);
}

static DAT_RETURN sd_ep_create(DAT_IA_HANDLE ia_handle, DAT_PZ_HANDLE pz_handle, DAT_EVD_HANDLE recv_h,
                               DAT_EVD_HANDLE req_h, DAT_EVD_HANDLE conn_h, const DAT_EP_ATTR *attr,
                               DAT_EP_HANDLE *ep_handle)
{
    struct sd_ia *ia;
    DAT_RETURN rc = sd_ia_get(ia_handle, &ia);
    if (rc != DAT_SUCCESS)
        return rc;
    struct sd_pz *pz = NULL;
    struct sd_evd *rv = NULL, *rq = NULL, *cn = NULL;
    if (ep_handle == NULL) {
        rc = SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG7);
        goto out;
    }
    if ((rc = get_create_handles(ia, pz_handle, recv_h, req_h, conn_h, &pz, &rv, &rq, &cn)) != DAT_SUCCESS)
        goto out;
    if (attr != NULL && (rc = check_attr(attr, DAT_EP_FIELD_EP_ATTR_ALL, DAT_INVALID_ARG6)) != DAT_SUCCESS)
        goto out;
    struct sd_ep *ep;
    rc = sd_ep_create_obj(ia, pz, rv, rq, cn, attr, DAT_EP_STATE_UNCONNECTED, &ep);
    if (rc == DAT_SUCCESS)
        *ep_handle = (DAT_EP_HANDLE)ep;
out:
    put_opt(pz);
    put_opt(rv);
    put_opt(rq);
    put_opt(cn);
    sd_handle_put(&ia->h);
    return rc;
}

/* dat_ep_create_with_srq (L5679, S002). The EP PZ may differ from the
 * SRQ's (provider attribute srq_ep_pz_difference_supported = TRUE): the
 * EP's PZ governs its requests and inbound RDMA, receive buffers were
 * checked against the SRQ's PZ when posted (L5727-5731). max_recv_iov is
 * ignored (L5766).
 *
 * High watermarks are not supported (srq_watermarks_supported = 0x001, low
 * watermark only): no soft or hard high watermark event is ever generated
 * and dat_ep_set_watermark refuses finite values. L5838-5845 would also
 * have create refuse finite srq_soft_hw / max_recv_dtos; deployed
 * consumers do not check the attribute and pass them anyway (Debian
 * dtestsrq: max_recv_dtos = its burst size, srq_soft_hw = 0), so create
 * accepts any value >= 0 (or DAT_HW_DEFAULT), keeps it for ep_query and
 * enforces nothing. */
static DAT_RETURN sd_ep_create_with_srq(DAT_IA_HANDLE ia_handle, DAT_PZ_HANDLE pz_handle, DAT_EVD_HANDLE recv_h,
                                        DAT_EVD_HANDLE req_h, DAT_EVD_HANDLE conn_h, DAT_SRQ_HANDLE srq_handle,
                                        const DAT_EP_ATTR *attr, DAT_EP_HANDLE *ep_handle)
{
    struct sd_ia *ia;
    DAT_RETURN rc = sd_ia_get(ia_handle, &ia);
    if (rc != DAT_SUCCESS)
        return rc;
    struct sd_pz *pz = NULL;
    struct sd_evd *rv = NULL, *rq = NULL, *cn = NULL;
    struct sd_srq *srq = NULL;
    if ((rc = sd_srq_get(srq_handle, &srq)) != DAT_SUCCESS)
        goto out;
    if (srq->h.ia != ia) {
        rc = SD_RET(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_SRQ);
        goto out;
    }
    if (attr == NULL) {
        rc = SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG7);
        goto out;
    }
    if (ep_handle == NULL) {
        rc = SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG8);
        goto out;
    }
    if ((rc = get_create_handles(ia, pz_handle, recv_h, req_h, conn_h, &pz, &rv, &rq, &cn)) != DAT_SUCCESS)
        goto out;
    const DAT_EP_PARAM_MASK m = DAT_EP_FIELD_EP_ATTR_ALL & ~(DAT_EP_FIELD_EP_ATTR_MAX_RECV_DTOS |
                                                            DAT_EP_FIELD_EP_ATTR_MAX_RECV_IOV |
                                                            DAT_EP_FIELD_EP_ATTR_SRQ_SOFT_HW);
    if ((rc = check_attr(attr, m, DAT_INVALID_ARG7)) != DAT_SUCCESS)
        goto out;
    if (attr->service_type == DAT_SERVICE_TYPE_EXTENSION_BASE) { /* UD receives are the EP's own (ep_ud.c) */
        rc = SD_RET(DAT_MODEL_NOT_SUPPORTED, 0);
        goto out;
    }
    SD_DBG("ep", "create_with_srq: max_recv_dtos %d srq_soft_hw %d", attr->max_recv_dtos, attr->srq_soft_hw);
    if ((attr->srq_soft_hw < 0 && attr->srq_soft_hw != DAT_HW_DEFAULT) ||
        (attr->max_recv_dtos < 0 && attr->max_recv_dtos != DAT_HW_DEFAULT)) {
        rc = SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG7);
        goto out;
    }
    struct sd_ep *ep;
    rc = create_obj(ia, pz, rv, rq, cn, srq, attr, DAT_EP_STATE_UNCONNECTED, &ep);
    if (rc == DAT_SUCCESS)
        *ep_handle = (DAT_EP_HANDLE)ep;
out:
    put_opt(srq);
    put_opt(pz);
    put_opt(rv);
    put_opt(rq);
    put_opt(cn);
    sd_handle_put(&ia->h);
    return rc;
}

/* Soft and hard high watermarks are not supported (provider attribute
 * srq_watermarks_supported = 0x001, low watermark only): setting both to
 * DAT_WATERMARK_INFINITE (the default: no event, L6409) is honoured, any
 * finite value is DAT_MODEL_NOT_SUPPORTED. */
static DAT_RETURN sd_ep_set_watermark(DAT_EP_HANDLE ep_handle, DAT_COUNT soft, DAT_COUNT hard)
{
    struct sd_ep *ep;
    DAT_RETURN rc = sd_ep_get(ep_handle, &ep);
    if (rc != DAT_SUCCESS)
        return rc;
    if (soft < 0 && soft != DAT_WATERMARK_INFINITE)
        rc = SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    else if (hard < 0 && hard != DAT_WATERMARK_INFINITE)
        rc = SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    else if (soft != DAT_WATERMARK_INFINITE || hard != DAT_WATERMARK_INFINITE)
        rc = SD_RET(DAT_MODEL_NOT_SUPPORTED, 0);
    sd_handle_put(&ep->h);
    return rc;
}

static DAT_RETURN sd_ep_query(DAT_EP_HANDLE ep_handle, DAT_EP_PARAM_MASK mask, DAT_EP_PARAM *p)
{
    struct sd_ep *ep;
    DAT_RETURN rc = sd_ep_get(ep_handle, &ep);
    if (rc != DAT_SUCCESS)
        return rc;
    if (mask & ~DAT_EP_FIELD_ALL) {
        rc = SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
        goto out;
    }
    if (p == NULL) {
        rc = SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
        goto out;
    }
    struct sd_ia *ia = ep->h.ia;
    emu_lock(&ep->lock);
    p->ia_handle = sd_ia_consumer_handle(ia);
    p->ep_state = ep->state;
    if (ep->comm_set)
        p->comm = ep->comm;
    else
        memset(&p->comm, 0, sizeof p->comm);
    p->local_ia_address_ptr = (DAT_IA_ADDRESS_PTR)(ep->local_set ? &ep->local_addr : &ia->addr);
    p->local_port_qual = ep->local_set ? ep->local_port : 0;
    p->remote_ia_address_ptr = (DAT_IA_ADDRESS_PTR)&ep->remote_addr;
    p->remote_port_qual = ep->remote_set ? ep->remote_port : 0;
    p->pz_handle = (DAT_PZ_HANDLE)ep->pz;
    p->recv_evd_handle = (DAT_EVD_HANDLE)ep->recv_evd;
    p->request_evd_handle = (DAT_EVD_HANDLE)ep->request_evd;
    p->connect_evd_handle = (DAT_EVD_HANDLE)ep->connect_evd;
    p->srq_handle = (DAT_SRQ_HANDLE)ep->srq;
    p->ep_attr = ep->attr;
    if (ep->srq != NULL)
        p->ep_attr.max_recv_iov = 0;
    else
        p->ep_attr.srq_soft_hw = DAT_HW_DEFAULT;
    /* The negotiated MPA CRC is what a user of an EP wants to know (it
     * depends on both ends and on whether the link is loopback). */
    static DAT_NAMED_ATTR crc_attr[2] = {{"SOFTDAT_CRC", "off"}, {"SOFTDAT_CRC", "on"}};
    if (ep->crc_known) {
        p->ep_attr.ep_provider_specific_count = 1;
        p->ep_attr.ep_provider_specific = &crc_attr[ep->crc_on ? 1 : 0];
    }
    emu_unlock(&ep->lock);
out:
    sd_handle_put(&ep->h);
    return rc;
}

/* A communicator dat_ep_common_connect can use: a TCP stream socket of
 * the IA's address family (the CSP's rule, csp.c). Protocol 0 means the
 * domain's default, TCP. */
static DAT_RETURN check_comm(const DAT_COMM *c, const struct sd_ia *ia)
{
    int type = c->type & ~(SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (c->domain != ia->addr.ss_family || type != SOCK_STREAM || (c->protocol != 0 && c->protocol != IPPROTO_TCP))
        return SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    return DAT_SUCCESS;
}

/* Fields dat_ep_modify can never change (Table 5). */
#define MODIFY_NEVER                                                                                \
    (DAT_EP_FIELD_IA_HANDLE | DAT_EP_FIELD_EP_STATE | DAT_EP_FIELD_LOCAL_PORT_QUAL |                \
     DAT_EP_FIELD_REMOTE_IA_ADDRESS_PTR | DAT_EP_FIELD_REMOTE_PORT_QUAL | DAT_EP_FIELD_SRQ_HANDLE |  \
     DAT_EP_FIELD_EP_ATTR_SRQ_SOFT_HW)
/* Named attributes: Unconnected and the unconfigured states only (Table 5:
 * "quiescent"). */
#define MODIFY_QUIESCENT                                                                            \
    (DAT_EP_FIELD_EP_ATTR_NUM_TRANSPORT_ATTR | DAT_EP_FIELD_EP_ATTR_TRANSPORT_SPECIFIC_ATTR |        \
     DAT_EP_FIELD_EP_ATTR_NUM_PROVIDER_ATTR | DAT_EP_FIELD_EP_ATTR_PROVIDER_SPECIFIC_ATTR)
/* Everything else of the EVDs and attributes: before connect / accept
 * ("PRE"; max_rdma_read_iov / max_rdma_write_iov are not in Table 5 and
 * follow the other sizes). */
#define MODIFY_PRE                                                                                  \
    ((DAT_EP_FIELD_EP_ATTR_ALL & ~MODIFY_QUIESCENT) | DAT_EP_FIELD_RECV_EVD_HANDLE |                \
     DAT_EP_FIELD_REQUEST_EVD_HANDLE | DAT_EP_FIELD_CONNECT_EVD_HANDLE)
/* Attributes that size the QP: changing them rebuilds it. */
#define MODIFY_QP_SIZING                                                                            \
    (DAT_EP_FIELD_EP_ATTR_MAX_MESSAGE_SIZE | DAT_EP_FIELD_EP_ATTR_MAX_RDMA_SIZE |                   \
     DAT_EP_FIELD_EP_ATTR_MAX_RECV_DTOS | DAT_EP_FIELD_EP_ATTR_MAX_REQUEST_DTOS |                   \
     DAT_EP_FIELD_EP_ATTR_MAX_RECV_IOV | DAT_EP_FIELD_EP_ATTR_MAX_REQUEST_IOV |                     \
     DAT_EP_FIELD_EP_ATTR_MAX_RDMA_READ_IN | DAT_EP_FIELD_EP_ATTR_MAX_RDMA_READ_OUT |               \
     DAT_EP_FIELD_EP_ATTR_MAX_RDMA_READ_IOV | DAT_EP_FIELD_EP_ATTR_MAX_RDMA_WRITE_IOV)

/* The handles a dat_ep_modify installs (NULL: the field is not in the
 * mask, or is set to DAT_HANDLE_NULL), referenced while the call runs. */
struct modify_deps {
    struct sd_pz *pz;
    struct sd_evd *recv, *request, *connect;
};

/* dat_ep_modify, step 1: the arguments alone (no EP lock): the mask, the
 * values, the handles (referenced into *d). */
static DAT_RETURN modify_validate(struct sd_ep *ep, DAT_EP_PARAM_MASK mask, const DAT_EP_PARAM *p,
                                  struct modify_deps *d)
{
    struct sd_ia *ia = ep->h.ia;
    DAT_RETURN rc;
    if ((mask & ~DAT_EP_FIELD_ALL) || (mask & MODIFY_NEVER))
        return SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    if (p == NULL)
        return mask ? SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3) : DAT_SUCCESS;
    if ((mask & DAT_EP_FIELD_COMM) && (rc = check_comm(&p->comm, ia)) != DAT_SUCCESS)
        return rc;
    if ((mask & DAT_EP_FIELD_LOCAL_IA_ADDRESS_PTR)) {
        /* Only the IA's own address: we bind nothing else. */
        const struct sockaddr *sa = (const struct sockaddr *)p->local_ia_address_ptr;
        const struct sockaddr *ia_sa = (const struct sockaddr *)&ia->addr;
        bool same = sa != NULL && sa->sa_family == ia_sa->sa_family &&
                    ((sa->sa_family == AF_INET &&
                      ((const struct sockaddr_in *)sa)->sin_addr.s_addr ==
                          ((const struct sockaddr_in *)ia_sa)->sin_addr.s_addr) ||
                     (sa->sa_family == AF_INET6 &&
                      memcmp(&((const struct sockaddr_in6 *)sa)->sin6_addr,
                             &((const struct sockaddr_in6 *)ia_sa)->sin6_addr, 16) == 0));
        if (!same)
            return SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    }
    if ((rc = check_attr(&p->ep_attr, mask, DAT_INVALID_ARG3)) != DAT_SUCCESS)
        return rc;
    /* RC and UD EPs have different transports (emu_qp / emu_ud): the type
     * is chosen at create, not switched. */
    if ((mask & DAT_EP_FIELD_EP_ATTR_SERVICE_TYPE) && p->ep_attr.service_type != ep->attr.service_type)
        return SD_RET(DAT_MODEL_NOT_SUPPORTED, 0);
    /* An SRQ EP's receive queue is the SRQ's (spec L6316). */
    if ((mask & DAT_EP_FIELD_EP_ATTR_MAX_RECV_DTOS) && ep->srq != NULL)
        return SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    if ((mask & DAT_EP_FIELD_PZ_HANDLE) && p->pz_handle != DAT_HANDLE_NULL) {
        if ((rc = sd_pz_get(p->pz_handle, &d->pz)) != DAT_SUCCESS)
            return rc;
        if (d->pz->h.ia != ia)
            return SD_RET(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_PZ);
    }
    if (((mask & DAT_EP_FIELD_RECV_EVD_HANDLE) &&
         (rc = get_evd_arg(ia, p->recv_evd_handle, DAT_EVD_DTO_FLAG, DAT_INVALID_HANDLE_EVD_RECV, &d->recv))) ||
        ((mask & DAT_EP_FIELD_REQUEST_EVD_HANDLE) &&
         (rc = get_evd_arg(ia, p->request_evd_handle, DAT_EVD_DTO_FLAG | DAT_EVD_RMR_BIND_FLAG,
                           DAT_INVALID_HANDLE_EVD_REQUEST, &d->request))) ||
        ((mask & DAT_EP_FIELD_CONNECT_EVD_HANDLE) &&
         (rc = get_evd_arg(ia, p->connect_evd_handle, DAT_EVD_CONNECTION_FLAG, DAT_INVALID_HANDLE_EVD_CONN,
                           &d->connect))))
        return rc;
    return DAT_SUCCESS;
}

/* Step 2, ep->lock held: what the EP's state allows (Table 5, L6279-6334). */
static DAT_RETURN modify_check_state(struct sd_ep *ep, DAT_EP_PARAM_MASK mask, const DAT_EP_PARAM *p,
                                     const struct modify_deps *d, bool recvs_posted)
{
    DAT_EP_STATE st = ep->state;
    bool unconf = state_unconfigured(st);
    /* "Unconfigured" in Table 5's rows for comm and the local address is
     * UNCONFIGURED_UNCONNECTED: the other unconfigured states are listed
     * by name where allowed. */
    bool quiet = unconf || st == DAT_EP_STATE_UNCONNECTED;
    bool unused = st == DAT_EP_STATE_UNCONNECTED || st == DAT_EP_STATE_UNCONFIGURED_UNCONNECTED;
    if (((mask & MODIFY_PRE) && !state_pre(st)) || ((mask & MODIFY_QUIESCENT) && !quiet) ||
        ((mask & DAT_EP_FIELD_PZ_HANDLE) && !(quiet || st == DAT_EP_STATE_TENTATIVE_CONNECTION_PENDING)) ||
        ((mask & (DAT_EP_FIELD_LOCAL_IA_ADDRESS_PTR | DAT_EP_FIELD_COMM)) && !unused))
        return SD_RET(DAT_INVALID_STATE, sd_ep_state_subtype(st));
    /* The communicator is assigned once (Table 5); assigning the same
     * one again changes nothing and is accepted. */
    if ((mask & DAT_EP_FIELD_COMM) && ep->comm_set &&
        (ep->comm.domain != p->comm.domain || ep->comm.type != p->comm.type ||
         ep->comm.protocol != p->comm.protocol))
        return SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    /* A configured EP never goes back to unconfigured (L5467): refuse a
     * change that would leave it without something a connection needs
     * (sd_ep_configured_locked's rule applied to the result). */
    if (!unconf) {
        bool has_pz = (mask & DAT_EP_FIELD_PZ_HANDLE) ? d->pz != NULL : ep->pz != NULL;
        bool has_cn = (mask & DAT_EP_FIELD_CONNECT_EVD_HANDLE) ? d->connect != NULL : ep->connect_evd != NULL;
        bool has_rv = (mask & DAT_EP_FIELD_RECV_EVD_HANDLE) ? d->recv != NULL : ep->recv_evd != NULL;
        bool has_rq = (mask & DAT_EP_FIELD_REQUEST_EVD_HANDLE) ? d->request != NULL : ep->request_evd != NULL;
        DAT_COUNT rd = (mask & DAT_EP_FIELD_EP_ATTR_MAX_RECV_DTOS) ? p->ep_attr.max_recv_dtos
                                                                    : ep->attr.max_recv_dtos;
        DAT_COUNT qd = (mask & DAT_EP_FIELD_EP_ATTR_MAX_REQUEST_DTOS) ? p->ep_attr.max_request_dtos
                                                                       : ep->attr.max_request_dtos;
        if (!has_pz || !has_cn || (!has_rv && ep->srq == NULL && rd > 0) || (!has_rq && qd > 0))
            return SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    }
    if ((mask & DAT_EP_FIELD_EP_ATTR_RECV_COMPLETION_FLAGS) && recvs_posted &&
        p->ep_attr.recv_completion_flags != ep->attr.recv_completion_flags)
        return SD_RET(DAT_INVALID_STATE, sd_ep_state_subtype(st));
    return DAT_SUCCESS;
}

/* Step 3, ep->lock held and everything checked: install the new handles
 * (dependencies taken before the old ones are dropped: those go to old[],
 * released by the caller once unlocked), the attributes, the communicator,
 * the configured state. *rebuild: the QP must be rebuilt. */
static DAT_RETURN modify_apply(struct sd_ep *ep, DAT_EP_PARAM_MASK mask, const DAT_EP_PARAM *p,
                               const struct modify_deps *d, struct sd_handle *old[4], bool *rebuild)
{
    struct sd_handle *nw[4] = {d->pz ? &d->pz->h : NULL, d->recv ? &d->recv->h : NULL,
                               d->request ? &d->request->h : NULL, d->connect ? &d->connect->h : NULL};
    static const DAT_EP_PARAM_MASK bits[4] = {DAT_EP_FIELD_PZ_HANDLE, DAT_EP_FIELD_RECV_EVD_HANDLE,
                                              DAT_EP_FIELD_REQUEST_EVD_HANDLE,
                                              DAT_EP_FIELD_CONNECT_EVD_HANDLE};
    for (int i = 0; i < 4; i++) {
        if ((mask & bits[i]) && !take_dep(nw[i])) {
            for (int j = 0; j < i; j++)
                if ((mask & bits[j]) && nw[j] != NULL) {
                    sd_handle_dep_put(nw[j]);
                    sd_handle_put(nw[j]);
                }
            static const DAT_UINT32 sub[4] = {DAT_INVALID_HANDLE_PZ, DAT_INVALID_HANDLE_EVD_RECV,
                                              DAT_INVALID_HANDLE_EVD_REQUEST, DAT_INVALID_HANDLE_EVD_CONN};
            return SD_RET(DAT_INVALID_HANDLE, sub[i]);
        }
    }
    DAT_EP_STATE st = ep->state;
    struct sd_pz *old_pz = ep->pz;
    struct sd_handle **slot[4] = {(struct sd_handle **)&ep->pz, (struct sd_handle **)&ep->recv_evd,
                                  (struct sd_handle **)&ep->request_evd, (struct sd_handle **)&ep->connect_evd};
    for (int i = 0; i < 4; i++) {
        if (mask & bits[i]) {
            old[i] = *slot[i];
            *slot[i] = nw[i];
        }
    }
    apply_attr(&ep->attr, &p->ep_attr, mask);
    if (mask & DAT_EP_FIELD_COMM) {
        ep->comm = p->comm;
        ep->comm_set = true;
    }
    if (state_unconfigured(st) && sd_ep_configured_locked(ep))
        sd_ep_set_state(ep, configured_state(st));
    *rebuild = ep->pz != NULL && (ep->qp == NULL || ep->pz != old_pz || (mask & MODIFY_QP_SIZING));
    return DAT_SUCCESS;
}

static DAT_RETURN sd_ep_modify(DAT_EP_HANDLE ep_handle, DAT_EP_PARAM_MASK mask, const DAT_EP_PARAM *p)
{
    struct sd_ep *ep;
    DAT_RETURN rc = sd_ep_get(ep_handle, &ep);
    if (rc != DAT_SUCCESS)
        return rc;
    struct modify_deps d = {NULL, NULL, NULL, NULL};
    rc = modify_validate(ep, mask, p, &d);
    if (rc != DAT_SUCCESS || p == NULL)
        goto out;

    pthread_mutex_lock(&ep->cm_lock);
    /* QP stats take the QP lock, which completion callbacks hold while
     * they take ep->lock: ask before locking the EP. */
    bool recvs_posted = false;
    if (ep->qp != NULL) {
        struct emu_qp_stats qs;
        emu_qp_get_stats(ep->qp, &qs);
        recvs_posted = qs.recv_posted > 0;
    }
    emu_lock(&ep->lock);
    struct sd_handle *old[4] = {NULL, NULL, NULL, NULL};
    bool rebuild = false;
    rc = modify_check_state(ep, mask, p, &d, recvs_posted);
    if (rc == DAT_SUCCESS)
        rc = modify_apply(ep, mask, p, &d, old, &rebuild);
    if (rc != DAT_SUCCESS) {
        emu_unlock(&ep->lock);
        pthread_mutex_unlock(&ep->cm_lock);
        goto out;
    }
    struct sd_evd *cfg_recv = ep->recv_evd, *cfg_req = ep->request_evd;
    DAT_COMPLETION_FLAGS cfg_rf = ep->attr.recv_completion_flags, cfg_qf = ep->attr.request_completion_flags;
    emu_unlock(&ep->lock);
    /* still referenced: old EVDs are dropped only below, new ones are ours */
    set_evd_config(cfg_recv, cfg_req, cfg_rf, cfg_qf);
    if (rebuild) {
        /* No connection exists in the states modify is allowed in. */
        if (ep->qp != NULL)
            sd_ep_dto_fini(ep);
        DAT_RETURN r2 = sd_ep_dto_init(ep);
        if (r2 != DAT_SUCCESS)
            SD_WARN("ep", "modify: rebuilding the QP failed (0x%x)", (unsigned)r2);
        rc = r2;
    }
    pthread_mutex_unlock(&ep->cm_lock);
    for (int i = 0; i < 4; i++)
        drop_ref(&old[i]);
out:
    put_opt(d.pz);
    put_opt(d.recv);
    put_opt(d.request);
    put_opt(d.connect);
    sd_handle_put(&ep->h);
    return rc;
}

static DAT_RETURN sd_ep_get_status(DAT_EP_HANDLE ep_handle, DAT_EP_STATE *state, DAT_BOOLEAN *recv_idle,
                                   DAT_BOOLEAN *request_idle)
{
    struct sd_ep *ep;
    DAT_RETURN rc = sd_ep_get(ep_handle, &ep);
    if (rc != DAT_SUCCESS)
        return rc;
    emu_lock(&ep->lock);
    DAT_EP_STATE s = ep->state;
    emu_unlock(&ep->lock);
    bool ri = true, qi = true;
    uint32_t uq, ur;
    if (ep->qp != NULL) {
        struct emu_qp_stats st;
        emu_qp_get_stats(ep->qp, &st);
        ri = st.recv_posted == 0;
        qi = st.send_outstanding == 0;
    } else if (sd_ud_queue_counts(ep, &uq, &ur)) {
        ri = ur == 0;
        qi = uq == 0;
    }
    if (state != NULL)
        *state = s;
    if (recv_idle != NULL)
        *recv_idle = ri ? DAT_TRUE : DAT_FALSE;
    if (request_idle != NULL)
        *request_idle = qi ? DAT_TRUE : DAT_FALSE;
    sd_handle_put(&ep->h);
    return DAT_SUCCESS;
}

static DAT_RETURN sd_ep_free(DAT_EP_HANDLE ep_handle)
{
    struct sd_ep *ep;
    DAT_RETURN rc = sd_ep_get(ep_handle, &ep);
    if (rc != DAT_SUCCESS)
        return rc;
    emu_lock(&ep->lock);
    DAT_EP_STATE s = ep->state;
    bool held = ep->rsp != NULL || ep->provider_ep;
    emu_unlock(&ep->lock);
    /* Reserved / passive / tentative EPs belong to their RSP or CR. */
    if (held || s == DAT_EP_STATE_RESERVED || s == DAT_EP_STATE_UNCONFIGURED_RESERVED ||
        s == DAT_EP_STATE_PASSIVE_CONNECTION_PENDING || s == DAT_EP_STATE_UNCONFIGURED_PASSIVE ||
        s == DAT_EP_STATE_TENTATIVE_CONNECTION_PENDING || s == DAT_EP_STATE_UNCONFIGURED_TENTATIVE)
        rc = SD_RET(DAT_INVALID_STATE, sd_ep_state_subtype(s));
    else if (!sd_handle_try_retire(&ep->h))
        rc = SD_RET(DAT_INVALID_STATE, sd_ep_state_subtype(s)); /* an RMR bound to it */
    else
        rc = sd_handle_destroy(&ep->h, DAT_INVALID_HANDLE_EP);
    sd_handle_put(&ep->h);
    return rc;
}

static DAT_RETURN sd_ep_reset(DAT_EP_HANDLE ep_handle)
{
    struct sd_ep *ep;
    DAT_RETURN rc = sd_ep_get(ep_handle, &ep);
    if (rc != DAT_SUCCESS)
        return rc;
    pthread_mutex_lock(&ep->cm_lock);
    emu_lock(&ep->lock);
    DAT_EP_STATE s = ep->state;
    struct emu_conn *c = NULL;
    if (s == DAT_EP_STATE_DISCONNECTED) {
        c = ep->conn;
        ep->conn = NULL;
    } else if (s != DAT_EP_STATE_UNCONNECTED) {
        /* Unconfigured included: the state table allows it only ep_free
         * (L5925), reset names Disconnected and Unconnected (L7040). */
        rc = SD_RET(DAT_INVALID_STATE, sd_ep_state_subtype(s));
    }
    emu_unlock(&ep->lock);
    if (rc == DAT_SUCCESS && s == DAT_EP_STATE_DISCONNECTED) {
        /* The connection is terminal: freeing it delivers nothing more. */
        if (c != NULL) {
            if (ep->qp != NULL)
                emu_qp_unlink(ep->qp);
            emu_conn_free(c);
        }
        if (ep->qp != NULL)
            rc = sd_ep_dto_reset(ep);
        emu_lock(&ep->lock);
        sd_ep_set_state(ep, sd_ep_configured_locked(ep) ? DAT_EP_STATE_UNCONNECTED
                                                : DAT_EP_STATE_UNCONFIGURED_UNCONNECTED);
        ep->remote_set = ep->local_set = false;
        memset(&ep->remote_addr, 0, sizeof ep->remote_addr);
        memset(&ep->local_addr, 0, sizeof ep->local_addr);
        ep->remote_port = ep->local_port = 0;
        ep->aborting = false;
        ep->ev_pdata_len = 0;
        emu_unlock(&ep->lock);
    }
    pthread_mutex_unlock(&ep->cm_lock);
    sd_handle_put(&ep->h);
    return rc;
}

/* Receives held by the EP without a completion generated. A TCP stream
 * delivers messages in order, so the allocation span equals the count
 * (spec-part2 §3.12). SRQ EPs take a buffer only when a message arrives
 * (L6177): none outside Connected / Disconnect Pending (the QP flushed
 * it), none when no EP of the SRQ holds one, the SRQ's count when this
 * is its only EP; otherwise the split between EPs is not known
 * (DAT_VALUE_UNKNOWN, L6173). */
static DAT_RETURN sd_ep_recv_query(DAT_EP_HANDLE ep_handle, DAT_COUNT *nbufs, DAT_COUNT *span)
{
    struct sd_ep *ep;
    DAT_RETURN rc = sd_ep_get(ep_handle, &ep);
    if (rc != DAT_SUCCESS)
        return rc;
    DAT_COUNT n = 0;
    pthread_mutex_lock(&ep->cm_lock); /* the QP is not rebuilt meanwhile */
    if (ep->srq != NULL) {
        emu_lock(&ep->lock);
        DAT_EP_STATE st = ep->state;
        emu_unlock(&ep->lock);
        bool live = st == DAT_EP_STATE_CONNECTED || st == DAT_EP_STATE_CONNECTED_SINGLE_PATH ||
                    st == DAT_EP_STATE_CONNECTED_MULTI_PATH || st == DAT_EP_STATE_DISCONNECT_PENDING;
        uint32_t held = live ? sd_srq_held_by_eps(ep->srq) : 0;
        pthread_mutex_lock(&ep->srq->lock);
        unsigned neps = ep->srq->neps;
        pthread_mutex_unlock(&ep->srq->lock);
        n = held == 0 ? 0 : neps == 1 ? (DAT_COUNT)held : DAT_VALUE_UNKNOWN;
    } else if (ep->qp != NULL) {
        struct emu_qp_stats st;
        emu_qp_get_stats(ep->qp, &st);
        n = (DAT_COUNT)st.recv_posted;
    } else {
        uint32_t uq, ur;
        if (sd_ud_queue_counts(ep, &uq, &ur))
            n = (DAT_COUNT)ur;
    }
    pthread_mutex_unlock(&ep->cm_lock);
    if (nbufs != NULL)
        *nbufs = n;
    if (span != NULL)
        *span = n;
    sd_handle_put(&ep->h);
    return DAT_SUCCESS;
}

void sd_ep_fill_table(DAT_PROVIDER *p)
{
    p->ep_recv_query_func = sd_ep_recv_query;
    p->ep_create_with_srq_func = sd_ep_create_with_srq;
    p->ep_set_watermark_func = sd_ep_set_watermark;
    p->ep_create_func = sd_ep_create;
    p->ep_query_func = sd_ep_query;
    p->ep_modify_func = sd_ep_modify;
    p->ep_get_status_func = sd_ep_get_status;
    p->ep_free_func = sd_ep_free;
    p->ep_reset_func = sd_ep_reset;
}
