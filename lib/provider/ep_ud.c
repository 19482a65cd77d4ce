/* softdat IB unreliable datagrams: UD endpoints over emu/ud (IB extension
 * spec §2.3; docs/provider.md "UD").
 *
 * An EP created with service_type DAT_IB_SERVICE_TYPE_UD has no emu_qp:
 * it owns an emu_ud (a UDP socket, QPN = its port) from creation (or from
 * the modify that gave it a PZ) until it is freed. Its request and receive
 * queues are slot rings as for RC (ep_dto.h), completed with
 * DAT_IB_DTO_EVENT (DAT_IB_DTO_SEND_UD / DAT_IB_DTO_RECV_UD, extension
 * type DAT_IB_UD_SEND / DAT_IB_UD_RECV; a receive also carries the
 * sender's address in remote_ah).
 *
 * Address resolution ("UD connection"): dat_ep_connect / dat_cr_accept on
 * a UD EP run an ordinary MPA exchange over TCP through the PSP, whose
 * private data starts with a 16-byte UD header (magic, our QPN and Q_Key)
 * in both directions; the consumer's private data follows and is all the
 * consumer sees. The server's CR EVD gets DAT_IB_UD_CONNECTION_REQUEST_EVENT
 * (spec §2.3 usage model) instead of the core request event. When the
 * exchange is complete each side gets
 * DAT_IB_UD_CONNECTION_EVENT_ESTABLISHED on the connect EVD with the peer's
 * address handle (active: DAT_IB_UD_REMOTE_AH, passive:
 * DAT_IB_UD_PASSIVE_REMOTE_AH) and the CM object in `context`, and the TCP
 * connection is closed: the EP stays usable for more exchanges, with any
 * number of peers. A reject is DAT_IB_UD_CONNECTION_REJECT_EVENT, any other
 * failure DAT_IB_UD_CONNECTION_ERROR_EVENT.
 *
 * Address handles: DAT_IB_ADDR_HANDLE.ah points at one of our sd_ud_ah
 * objects. They are kept on one process-wide list, so a post or free
 * with a stale or foreign pointer is found out (DAT_INVALID_PARAMETER)
 * without being dereferenced. An AH lives until dat_ib_ud_ah_free or the
 * free of the EP whose exchange made it; it may be used on any UD EP of
 * the same IA (as an IB AH is a protection-domain object, not a QP one).
 * dat_ib_ud_cm_free releases the CM object (and its TCP connection if the
 * exchange is still running), not the AH. */
#include "lib/provider/ep_ud.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "emu/engine.h"
#include "emu/log.h"
#include "lib/provider/cr.h"
#include "lib/provider/ep_dto.h"
#include "lib/provider/evd.h"
#include "lib/provider/ia.h"
#include "lib/provider/limits.h"
#include "lib/provider/lmr.h"
#include "lib/provider/pz.h"

static const uint8_t ud_magic[4] = {'S', 'D', 'U', 'D'};
#define UD_MIN_SQ 64
/* How long a UD exchange keeps retrying a refused connect (nobody listens
 * on the port yet), on top of emu's own 250 ms: Debian's dtestx -u starts
 * both sides' connects right after its side channel, before the peer's
 * dat_psp_create, and on a loaded machine the PSP can come seconds later;
 * one refused exchange leaves the peer waiting for ever. Bounded by the
 * consumer's timeout; SOFTDAT_CONNECT_RETRY_MS=0 turns it off. */
#define UD_REFUSED_RETRY_US 10000000u
#define UD_PDATA_VERSION 1

struct sd_ud_ah {
    struct sd_ud_ah *next;   /* g_ah list */
    struct sd_ep *owner;     /* freed with it; no reference (the EP frees us) */
    struct sd_ia *ia;
    struct emu_ud_dest dest;
};

/* One address exchange: the CM object handed out in the events' context. */
struct sd_ud_cm {
    struct sd_ud_cm *next;   /* ep->ud->cms, under ud->lock */
    struct sd_ep *ep;
    struct emu_conn *conn;   /* until the exchange ends; under ud->lock */
    bool active;
    bool done;               /* an outcome was reported */
    /* passive: the initiator's UD address, from the Request, and its AH,
     * made before the Reply goes out: the initiator may send its first
     * datagram as soon as it has the Reply, and the receive completion
     * names its source by this AH (it came as "no AH" when the AH was made
     * at the passive ESTABLISHED, a moment later, 1 run in 8 under ASan) */
    struct sockaddr_storage peer;
    uint32_t peer_qpn, peer_qkey;
    struct sd_ud_ah *ah;
    /* private data shown with the outcome event (lives as long as this) */
    uint16_t pdata_len;
    uint8_t pdata[EMU_CONN_PDATA_RX_MAX];
    /* active: what a retry after a refused connect needs */
    struct sockaddr_storage to, from;
    socklen_t to_len, from_len;
    struct emu_conn_params prm;
    uint64_t retry_until_us;       /* 0: no retry */
    uint16_t req_len;
    uint8_t req[SD_UD_PDATA_HDR + SD_MAX_PRIVATE_DATA];
};

struct sd_ep_ud {
    struct emu_ud *ud;
    struct sd_dto_ring sq, rq;
    pthread_mutex_t lock;    /* cms */
    struct sd_ud_cm *cms;
    atomic_bool dying;
};

static pthread_mutex_t g_ah_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sd_ud_ah *g_ah;

/* ---------------------------------------------------------------- address handles */

static struct sd_ud_ah *ah_new(struct sd_ep *ep, const struct sockaddr_storage *ip, uint32_t qpn, uint32_t qkey)
{
    struct sd_ud_ah *ah = calloc(1, sizeof *ah);
    if (ah == NULL)
        return NULL;
    ah->owner = ep;
    ah->ia = ep->h.ia;
    ah->dest.addr = *ip;
    ah->dest.qpn = qpn;
    ah->dest.qkey = qkey;
    pthread_mutex_lock(&g_ah_lock);
    ah->next = g_ah;
    g_ah = ah;
    pthread_mutex_unlock(&g_ah_lock);
    return ah;
}

/* Under g_ah_lock: the live AH at `p`, else NULL (p never dereferenced). */
static struct sd_ud_ah **ah_find_locked(const void *p)
{
    for (struct sd_ud_ah **pp = &g_ah; *pp != NULL; pp = &(*pp)->next)
        if ((const void *)*pp == p)
            return pp;
    return NULL;
}

/* The AH matching a datagram's source, for the receive completion (so a
 * consumer may answer with it); NULL if none was resolved. */
static struct sd_ud_ah *ah_lookup_src(struct sd_ia *ia, const struct sockaddr_storage *src, uint32_t qpn)
{
    struct sd_ud_ah *found = NULL;
    pthread_mutex_lock(&g_ah_lock);
    for (struct sd_ud_ah *a = g_ah; a != NULL; a = a->next) {
        if (a->ia != ia || a->dest.qpn != qpn || a->dest.addr.ss_family != src->ss_family)
            continue;
        bool same = src->ss_family == AF_INET
                        ? ((const struct sockaddr_in *)&a->dest.addr)->sin_addr.s_addr ==
                              ((const struct sockaddr_in *)src)->sin_addr.s_addr
                        : memcmp(&((const struct sockaddr_in6 *)&a->dest.addr)->sin6_addr,
                                 &((const struct sockaddr_in6 *)src)->sin6_addr, 16) == 0;
        if (same) {
            found = a;
            break;
        }
    }
    pthread_mutex_unlock(&g_ah_lock);
    return found;
}

static void ah_free_owned_by(struct sd_ep *ep)
{
    pthread_mutex_lock(&g_ah_lock);
    struct sd_ud_ah **pp = &g_ah;
    while (*pp != NULL) {
        if ((*pp)->owner == ep) {
            struct sd_ud_ah *a = *pp;
            *pp = a->next;
            free(a);
        } else {
            pp = &(*pp)->next;
        }
    }
    pthread_mutex_unlock(&g_ah_lock);
}

/* DAT_IB_ADDR_HANDLE as the consumer sees it: ah, qpn, ia_addr (the
 * peer's IP with its UD port). */
static void fill_remote_ah(DAT_IB_ADDR_HANDLE *out, struct sd_ud_ah *ah, const struct sockaddr_storage *ip,
                           uint32_t qpn)
{
    memset(out, 0, sizeof *out);
    out->ah = (struct ibv_ah *)ah;
    out->qpn = qpn;
    size_t n = ip->ss_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
    if (n > sizeof out->ia_addr)
        n = sizeof out->ia_addr;
    memcpy(&out->ia_addr, ip, n);
    if (ip->ss_family == AF_INET)
        ((struct sockaddr_in *)&out->ia_addr)->sin_port = htons((uint16_t)qpn);
    else if (ip->ss_family == AF_INET6)
        ((struct sockaddr_in6 *)&out->ia_addr)->sin6_port = htons((uint16_t)qpn);
}

/* ---------------------------------------------------------------- completions */

static void ud_complete(struct sd_ep *ep, bool recv, const struct emu_ud_cqe *cqe)
{
    struct sd_ep_ud *u = ep->ud;
    struct sd_dto_ring *r = recv ? &u->rq : &u->sq;
    uint32_t idx = (uint32_t)cqe->cookie;
    struct sd_dto_slot s;
    bool ok = cqe->status == EMU_WC_SUCCESS;
    DAT_COMPLETION_FLAGS ep_flags = recv ? ep->attr.recv_completion_flags : ep->attr.request_completion_flags;
    enum sd_dto_notify n;
    if (cqe->cookie > UINT32_MAX || !sd_dto_ring_finish(r, idx, ep_flags, ok, cqe->solicited, &s, &n)) {
        SD_ERR("ud", "ep %p: completion for unknown cookie %llu", (void *)ep, (unsigned long long)cqe->cookie);
        return;
    }
    struct sd_evd *evd = recv ? ep->recv_evd : ep->request_evd;
    if (n == SD_DTO_NO_EVENT || evd == NULL || atomic_load(&u->dying))
        return;
    DAT_EVENT ev;
    memset(&ev, 0, sizeof ev);
    ev.event_number = (DAT_EVENT_NUMBER)DAT_IB_DTO_EVENT;
    DAT_DTO_COMPLETION_EVENT_DATA *c = &ev.event_data.dto_completion_event_data;
    c->ep_handle = (DAT_EP_HANDLE)ep;
    c->user_cookie = s.cookie;
    c->status = sd_dto_status(cqe->status);
    c->transfered_length = ok ? cqe->byte_len : 0;
    c->operation = (DAT_DTOS)(recv ? DAT_IB_DTO_RECV_UD : DAT_IB_DTO_SEND_UD);
    DAT_IB_EXTENSION_EVENT_DATA *x = (DAT_IB_EXTENSION_EVENT_DATA *)(void *)ev.event_extension_data;
    x->type = recv ? DAT_IB_UD_RECV : DAT_IB_UD_SEND;
    x->status = ok ? DAT_OP_SUCCESS : DAT_IB_OP_ERR;
    if (recv && ok)
        fill_remote_ah(&x->remote_ah, ah_lookup_src(ep->h.ia, &cqe->src, cqe->src_qpn), &cqe->src,
                       cqe->src_qpn);
    /* No connection to break when the EVD is full: the event is lost
     * (the EVD raises its overflow), the EP goes on. */
    if (sd_evd_post(evd, &ev, SD_EVQ_EXT, n == SD_DTO_EVENT_NOTIFY ? SD_EVQ_F_NOTIFY : 0) != DAT_SUCCESS)
        SD_WARN("ud", "ep %p: completion lost: EVD full", (void *)ep);
}

static void ud_send_done(void *ctx, const struct emu_ud_cqe *cqe)
{
    ud_complete(ctx, false, cqe);
}

static void ud_recv_done(void *ctx, const struct emu_ud_cqe *cqe)
{
    ud_complete(ctx, true, cqe);
}

static const struct emu_ud_ops ud_ops = {.send_done = ud_send_done, .recv_done = ud_recv_done};

/* ---------------------------------------------------------------- lifecycle */

DAT_RETURN sd_ud_ep_init(struct sd_ep *ep)
{
    if (ep->ud != NULL)
        sd_ud_ep_fini(ep);
    struct sd_ia *ia = ep->h.ia;
    if (ia->engine == NULL)
        return SD_RET(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEP);
    struct sd_ep_ud *u = calloc(1, sizeof *u);
    if (u == NULL)
        return SD_RET(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
    const DAT_EP_ATTR *a = &ep->attr;
    /* A suppressed successful send keeps its slot until a later completion
     * (ep_dto.h). An HCA's send queue is rounded up with spare entries, and
     * deployed programs lean on that: dtestx -U 16 -m posts 22 suppressed
     * datagrams on an EP of 10. Queue depths may exceed the request (L5580),
     * so a UD send ring has at least UD_MIN_SQ slots. */
    uint32_t nsq = clamp_u32(a->max_request_dtos < UD_MIN_SQ ? UD_MIN_SQ : a->max_request_dtos, 1,
                             SD_MAX_DTO_PER_EP);
    uint32_t nrq = clamp_u32(a->max_recv_dtos, 1, SD_MAX_DTO_PER_EP);
    DAT_COUNT sge = a->max_request_iov > a->max_recv_iov ? a->max_request_iov : a->max_recv_iov;
    pthread_mutex_init(&u->lock, NULL);
    if (sd_dto_ring_init(&u->sq, nsq) != 0 || sd_dto_ring_init(&u->rq, nrq) != 0)
        goto nomem;
    struct sockaddr_storage local = ia->addr;
    if (local.ss_family == AF_INET)
        ((struct sockaddr_in *)&local)->sin_port = 0;
    else
        ((struct sockaddr_in6 *)&local)->sin6_port = 0;
    struct emu_ud_attr ua = {
        .engine = ia->engine,
        .addr = (const struct sockaddr *)&local,
        .addr_len = ia->addr_len,
        .max_send_wr = nsq,
        .max_recv_wr = nrq,
        .max_sge = clamp_u32(sge, 1, EMU_QP_MAX_SGE),
        .mtu = SD_TRANSPORT_MTU,
        .qkey = SD_UD_QKEY,
        .ops = &ud_ops,
        .ctx = ep,
    };
    ep->ud = u; /* completions may look it up as soon as the socket exists */
    int rc = emu_ud_create(&ua, &u->ud);
    if (rc != 0) {
        ep->ud = NULL;
        SD_WARN("ud", "ep %p: emu_ud_create: %s", (void *)ep, strerror(-rc));
        sd_dto_ring_fini(&u->sq);
        sd_dto_ring_fini(&u->rq);
        pthread_mutex_destroy(&u->lock);
        free(u);
        return SD_RET(DAT_INSUFFICIENT_RESOURCES, rc == -ENOMEM ? DAT_RESOURCE_MEMORY : DAT_RESOURCE_TEP);
    }
    SD_DBG("ud", "ep %p: UD qpn %u sq %u rq %u", (void *)ep, emu_ud_qpn(u->ud), nsq, nrq);
    return DAT_SUCCESS;
nomem:
    sd_dto_ring_fini(&u->sq);
    sd_dto_ring_fini(&u->rq);
    pthread_mutex_destroy(&u->lock);
    free(u);
    return SD_RET(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
}

void sd_ud_ep_fini(struct sd_ep *ep)
{
    struct sd_ep_ud *u = ep->ud;
    if (u == NULL)
        return;
    atomic_store(&u->dying, true); /* the EP's event streams die with it */
    /* Exchanges still running: their connections go (no more callbacks
     * once emu_conn_free returns), then the CM objects. */
    for (;;) {
        pthread_mutex_lock(&u->lock);
        struct sd_ud_cm *cm = u->cms;
        if (cm != NULL)
            u->cms = cm->next;
        struct emu_conn *c = cm != NULL ? cm->conn : NULL;
        if (cm != NULL)
            cm->conn = NULL;
        pthread_mutex_unlock(&u->lock);
        if (cm == NULL)
            break;
        if (c != NULL)
            emu_conn_free(c);
        free(cm);
    }
    emu_ud_destroy(u->ud); /* outstanding work completes flushed (no events: dying) */
    ah_free_owned_by(ep);
    ep->ud = NULL;
    sd_dto_ring_fini(&u->sq);
    sd_dto_ring_fini(&u->rq);
    pthread_mutex_destroy(&u->lock);
    free(u);
}

bool sd_ud_get_stats(struct sd_ep *ep, struct emu_ud_stats *out)
{
    if (ep->ud == NULL)
        return false;
    emu_ud_get_stats(ep->ud->ud, out);
    return true;
}

bool sd_ud_queue_counts(struct sd_ep *ep, uint32_t *send_queued, uint32_t *recv_posted)
{
    if (ep->ud == NULL)
        return false;
    emu_ud_queue_counts(ep->ud->ud, send_queued, recv_posted);
    return true;
}

uint32_t sd_ud_qpn(struct sd_ep *ep)
{
    return ep->ud != NULL ? emu_ud_qpn(ep->ud->ud) : 0;
}

/* ---------------------------------------------------------------- posting */

static bool ud_state_ok(DAT_EP_STATE s)
{
    /* A UD EP has no connection: it may carry datagrams from creation on,
     * as long as it is configured. */
    return s == DAT_EP_STATE_UNCONNECTED || s == DAT_EP_STATE_CONNECTED || s == DAT_EP_STATE_DISCONNECTED;
}

static DAT_RETURN check_iov(DAT_COUNT n, const DAT_LMR_TRIPLET *iov, DAT_COUNT max)
{
    if (n < 0 || n > max || n > EMU_QP_MAX_SGE)
        return SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    if (n > 0 && iov == NULL)
        return SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    return DAT_SUCCESS;
}

DAT_RETURN sd_ud_post_recv(struct sd_ep *ep, DAT_COUNT n, DAT_LMR_TRIPLET *iov, DAT_DTO_COOKIE cookie,
                           DAT_COMPLETION_FLAGS flags)
{
    emu_lock(&ep->lock);
    DAT_EP_STATE st = ep->state;
    struct sd_pz *pz = ep->pz;
    DAT_COUNT max = ep->attr.max_recv_iov;
    DAT_COMPLETION_FLAGS rf = ep->attr.recv_completion_flags;
    emu_unlock(&ep->lock);
    if (ep->ud == NULL || pz == NULL)
        return SD_RET(DAT_INVALID_STATE, sd_ep_state_subtype(st));
    DAT_RETURN rc = check_iov(n, iov, max);
    if (rc != DAT_SUCCESS)
        return rc;
    if (!sd_dto_flags_ok(SD_DTO_RECV, flags, rf))
        return SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG5);
    struct emu_sge sge[EMU_QP_MAX_SGE];
    uint64_t total = 0;
    rc = sd_lmr_check_iov(ep->h.ia, pz, iov, n, EMU_ACC_LOCAL_WRITE, sge, &total);
    if (rc != DAT_SUCCESS)
        return rc;
    struct sd_dto_ring *r = &ep->ud->rq;
    uint32_t idx = sd_dto_ring_get(r, SD_DTO_RECV, flags, cookie, total);
    if (idx == SD_DTO_NONE)
        return SD_RET(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEP);
    int e = emu_ud_post_recv(ep->ud->ud, idx, (uint32_t)n, sge);
    if (e != 0) {
        sd_dto_ring_cancel(r, idx);
        return e == -ENOSPC ? SD_RET(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEP) : SD_RET(DAT_INTERNAL_ERROR, 0);
    }
    return DAT_SUCCESS;
}

static DAT_RETURN post_send_ud(DAT_HANDLE handle, DAT_COUNT n, DAT_LMR_TRIPLET *iov, DAT_IB_ADDR_HANDLE *ahp,
                               DAT_DTO_COOKIE cookie, DAT_COMPLETION_FLAGS flags)
{
    struct sd_ep *ep;
    DAT_RETURN rc = sd_ep_get(handle, &ep);
    if (rc != DAT_SUCCESS)
        return rc;
    struct emu_sge sge[EMU_QP_MAX_SGE];
    uint64_t total = 0;
    emu_lock(&ep->lock);
    DAT_EP_STATE st = ep->state;
    struct sd_pz *pz = ep->pz;
    DAT_COUNT max = ep->attr.max_request_iov;
    DAT_COMPLETION_FLAGS qf = ep->attr.request_completion_flags;
    emu_unlock(&ep->lock);
    if (!sd_ep_is_ud(ep)) { /* spec: "ep_handle type is not UD" */
        rc = SD_RET(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP);
        goto out;
    }
    if (ep->ud == NULL || pz == NULL || !ud_state_ok(st)) {
        rc = SD_RET(DAT_INVALID_STATE, sd_ep_state_subtype(st));
        goto out;
    }
    if ((rc = check_iov(n, iov, max)) != DAT_SUCCESS)
        goto out;
    if (ahp == NULL) {
        rc = SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG4);
        goto out;
    }
    if (!sd_dto_flags_ok(SD_DTO_SEND, flags, qf)) {
        rc = SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG6);
        goto out;
    }
    rc = sd_lmr_check_iov(ep->h.ia, pz, iov, n, EMU_ACC_LOCAL_READ, sge, &total);
    if (rc != DAT_SUCCESS)
        goto out;
    if (total > emu_ud_mtu(ep->ud->ud)) { /* spec: too large for the fabric MTU */
        rc = SD_RET(DAT_LENGTH_ERROR, 0);
        goto out;
    }
    struct emu_ud_dest dest;
    bool found = false;
    pthread_mutex_lock(&g_ah_lock);
    struct sd_ud_ah **pp = ah_find_locked(ahp->ah);
    if (pp != NULL && (*pp)->ia->rec == ep->h.ia->rec) {
        dest = (*pp)->dest;
        found = true;
    }
    pthread_mutex_unlock(&g_ah_lock);
    if (!found) {
        rc = SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG4);
        goto out;
    }
    struct sd_dto_ring *r = &ep->ud->sq;
    uint32_t idx = sd_dto_ring_get(r, SD_DTO_SEND, flags, cookie, total);
    if (idx == SD_DTO_NONE) {
        SD_DBG("ud", "ep %p: request queue full (%u outstanding, %u held by suppressed successes)", (void *)ep,
               sd_dto_ring_outstanding(r), sd_dto_ring_held(r));
        rc = SD_RET(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEP);
        goto out;
    }
    uint32_t wf = (flags & DAT_COMPLETION_SOLICITED_WAIT_FLAG) ? EMU_WR_SOLICITED : 0;
    int e = emu_ud_post_send(ep->ud->ud, idx, &dest, (uint32_t)n, sge, wf);
    if (e != 0) {
        sd_dto_ring_cancel(r, idx);
        rc = e == -ENOSPC     ? SD_RET(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEP)
             : e == -EMSGSIZE ? SD_RET(DAT_LENGTH_ERROR, 0)
             : e == -EINVAL   ? SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG4)
                              : SD_RET(DAT_INTERNAL_ERROR, 0);
    }
out:
    sd_handle_put(&ep->h);
    return rc;
}

/* ---------------------------------------------------------------- CM objects */

static DAT_RETURN cm_free(DAT_HANDLE handle, void *cmp)
{
    struct sd_ep *ep;
    DAT_RETURN rc = sd_ep_get(handle, &ep);
    if (rc != DAT_SUCCESS)
        return rc;
    if (!sd_ep_is_ud(ep) || ep->ud == NULL) {
        sd_handle_put(&ep->h);
        return SD_RET(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP);
    }
    struct sd_ep_ud *u = ep->ud;
    struct sd_ud_cm *cm = NULL;
    pthread_mutex_lock(&u->lock);
    for (struct sd_ud_cm **pp = &u->cms; *pp != NULL; pp = &(*pp)->next) {
        if ((void *)*pp == cmp) {
            cm = *pp;
            *pp = cm->next;
            break;
        }
    }
    struct emu_conn *c = cm != NULL ? cm->conn : NULL;
    if (cm != NULL)
        cm->conn = NULL;
    pthread_mutex_unlock(&u->lock);
    if (cm == NULL) {
        rc = SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    } else {
        if (c != NULL)
            emu_conn_free(c); /* exchange still running: abandoned, no event */
        free(cm);
    }
    sd_handle_put(&ep->h);
    return rc;
}

static DAT_RETURN ah_free(DAT_HANDLE handle, DAT_IB_ADDR_HANDLE *ahp)
{
    struct sd_ep *ep;
    DAT_RETURN rc = sd_ep_get(handle, &ep);
    if (rc != DAT_SUCCESS)
        return rc;
    if (!sd_ep_is_ud(ep)) {
        rc = SD_RET(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP);
    } else if (ahp == NULL) {
        rc = SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    } else {
        struct sd_ud_ah *dead = NULL;
        pthread_mutex_lock(&g_ah_lock);
        struct sd_ud_ah **pp = ah_find_locked(ahp->ah);
        if (pp != NULL && (*pp)->ia->rec == ep->h.ia->rec) {
            dead = *pp;
            *pp = dead->next;
        }
        pthread_mutex_unlock(&g_ah_lock);
        if (dead == NULL)
            rc = SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
        free(dead);
    }
    sd_handle_put(&ep->h);
    return rc;
}

DAT_RETURN sd_ud_extop(DAT_HANDLE handle, int op, va_list ap)
{
    switch (op) {
    case DAT_IB_UD_SEND_OP: {
        DAT_COUNT n = va_arg(ap, DAT_COUNT);
        DAT_LMR_TRIPLET *l = va_arg(ap, DAT_LMR_TRIPLET *);
        DAT_IB_ADDR_HANDLE *ah = va_arg(ap, DAT_IB_ADDR_HANDLE *);
        DAT_DTO_COOKIE c = va_arg(ap, DAT_DTO_COOKIE);
        DAT_COMPLETION_FLAGS f = va_arg(ap, DAT_COMPLETION_FLAGS);
        return post_send_ud(handle, n, l, ah, c, f);
    }
    case DAT_IB_UD_CM_FREE_OP: {
        DAT_CONTEXT cm = va_arg(ap, DAT_CONTEXT);
        return cm_free(handle, cm.as_ptr);
    }
    case DAT_IB_UD_AH_FREE_OP:
        return ah_free(handle, va_arg(ap, DAT_IB_ADDR_HANDLE *));
    default:
        return SD_RET(DAT_NOT_IMPLEMENTED, 0);
    }
}

/* ---------------------------------------------------------------- address exchange */

static void put_be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

static uint32_t get_be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* magic(4) | version(1) | reserved(3) | QPN(4, BE) | Q_Key(4, BE) */
static uint16_t build_pdata(uint8_t *out, const struct sd_ep *ep, const void *pdata, DAT_COUNT size)
{
    memset(out, 0, SD_UD_PDATA_HDR);
    memcpy(out, ud_magic, sizeof ud_magic);
    out[4] = UD_PDATA_VERSION;
    put_be32(out + 8, emu_ud_qpn(ep->ud->ud));
    put_be32(out + 12, emu_ud_qkey(ep->ud->ud));
    if (size > 0)
        memcpy(out + SD_UD_PDATA_HDR, pdata, (size_t)size);
    return (uint16_t)(SD_UD_PDATA_HDR + size);
}

uint16_t sd_ud_parse_request(const void *pdata, uint16_t len, uint32_t *qpn, uint32_t *qkey)
{
    const uint8_t *p = pdata;
    if (p == NULL || len < SD_UD_PDATA_HDR || memcmp(p, ud_magic, sizeof ud_magic) != 0 ||
        p[4] != UD_PDATA_VERSION)
        return 0;
    uint32_t q = get_be32(p + 8);
    if (q == 0 || q > 0xFFFF)
        return 0;
    *qpn = q;
    *qkey = get_be32(p + 12);
    return SD_UD_PDATA_HDR;
}

static void post_ud_conn_event(struct sd_ep *ep, struct sd_ud_cm *cm, DAT_EVENT_NUMBER num, DAT_IB_EXT_TYPE type,
                               struct sd_ud_ah *ah, const struct sockaddr_storage *ip, uint32_t qpn, uint32_t qkey)
{
    emu_lock(&ep->lock);
    struct sd_evd *evd = ep->connect_evd;
    if (num == (DAT_EVENT_NUMBER)DAT_IB_UD_CONNECTION_EVENT_ESTABLISHED && ep->state == DAT_EP_STATE_UNCONNECTED)
        sd_ep_set_state(ep, DAT_EP_STATE_CONNECTED);
    emu_unlock(&ep->lock);
    if (evd == NULL || atomic_load(&ep->ud->dying))
        return;
    DAT_EVENT ev;
    memset(&ev, 0, sizeof ev);
    ev.event_number = num;
    ev.event_data.connect_event_data.ep_handle = (DAT_EP_HANDLE)ep;
    if (cm->pdata_len > 0) {
        ev.event_data.connect_event_data.private_data_size = cm->pdata_len;
        ev.event_data.connect_event_data.private_data = cm->pdata;
    }
    DAT_IB_EXTENSION_EVENT_DATA *x = (DAT_IB_EXTENSION_EVENT_DATA *)(void *)ev.event_extension_data;
    x->type = type;
    x->status = ah != NULL || type == DAT_IB_UD_CONNECT_REJECT ? DAT_OP_SUCCESS : DAT_IB_OP_ERR;
    if (ip != NULL)
        fill_remote_ah(&x->remote_ah, ah, ip, qpn);
    /* IB extension convention: the remote Q_Key travels in val (the event
     * has no field of its own for it). */
    x->val.immed.data = qkey;
    x->context.as_ptr = cm;
    if (sd_evd_post(evd, &ev, SD_EVQ_CONN, 0) != DAT_SUCCESS)
        SD_WARN("ud", "ep %p: UD connection event 0x%x lost: connect EVD full", (void *)ep, (unsigned)num);
}

static void store_pdata(struct sd_ud_cm *cm, const void *pd, uint16_t len)
{
    if (pd == NULL)
        len = 0;
    if (len > sizeof cm->pdata)
        len = sizeof cm->pdata;
    if (len > 0)
        memcpy(cm->pdata, pd, len);
    cm->pdata_len = len;
}

/* The exchange is over: let go of the TCP connection (from inside its own
 * callback, emu finishes the teardown when the callback returns). */
static void cm_finish(struct sd_ud_cm *cm, struct emu_conn *c)
{
    struct sd_ep_ud *u = cm->ep->ud;
    pthread_mutex_lock(&u->lock);
    bool mine = cm->conn == c;
    if (mine)
        cm->conn = NULL;
    cm->done = true;
    pthread_mutex_unlock(&u->lock);
    if (mine)
        emu_conn_free(c);
}

static const struct emu_conn_ops ud_conn_ops;

/* A refused active exchange within its retry window: connect again (a
 * fresh emu_conn; emu retries its own refusals for 250 ms each time) and
 * let the old one go. true if a new attempt is under way. Engine thread,
 * from the old connection's callback. */
static bool cm_retry(struct sd_ud_cm *cm, struct emu_conn *c)
{
    if (!cm->active || cm->retry_until_us == 0 || emu_now_us() >= cm->retry_until_us)
        return false;
    struct sd_ep *ep = cm->ep;
    struct sd_ep_ud *u = ep->ud;
    struct sd_ia *ia = ep->h.ia;
    struct emu_conn_params prm = cm->prm;
    if (prm.timeout_us != 0 && prm.timeout_us != EMU_TIMEOUT_INFINITE)
        prm.timeout_us = cm->retry_until_us - emu_now_us();
    bool again = false;
    pthread_mutex_lock(&u->lock);
    if (cm->conn == c && !atomic_load(&u->dying) && ia->engine != NULL) {
        struct emu_conn *nc = NULL;
        if (emu_conn_connect(ia->engine, (const struct sockaddr *)&cm->to, cm->to_len,
                             cm->from_len ? (const struct sockaddr *)&cm->from : NULL, cm->from_len, &prm, cm->req,
                             cm->req_len, &ud_conn_ops, cm, &nc) == 0) {
            cm->conn = nc;
            again = true;
        }
    }
    pthread_mutex_unlock(&u->lock);
    if (again) {
        SD_DBG("ud", "ep %p: UD exchange refused; connecting again", (void *)ep);
        emu_conn_free(c);
    }
    return again;
}

static void ud_conn_event(struct emu_conn *c, const struct emu_conn_event *ev, void *ctx)
{
    struct sd_ud_cm *cm = ctx;
    struct sd_ep *ep = cm->ep;
    pthread_mutex_lock(&ep->ud->lock);
    bool done = cm->done;
    pthread_mutex_unlock(&ep->ud->lock);
    if (done)
        return;
    if (ev->type == EMU_CONN_ESTABLISHED) {
        struct sockaddr_storage ip;
        uint32_t qpn = 0, qkey = 0;
        bool ok = true;
        if (cm->active) {
            struct emu_conn_info info;
            uint16_t skip = sd_ud_parse_request(ev->pdata, ev->pdata_len, &qpn, &qkey);
            ok = skip > 0 && emu_conn_get_info(c, &info) == 0;
            if (ok) {
                ip = info.peer;
                store_pdata(cm, (const uint8_t *)ev->pdata + skip, (uint16_t)(ev->pdata_len - skip));
            } else {
                SD_WARN("ud", "ep %p: the peer's Reply carries no UD address", (void *)ep);
            }
        } else {
            ip = cm->peer;
            qpn = cm->peer_qpn;
            qkey = cm->peer_qkey;
        }
        struct sd_ud_ah *ah = !ok ? NULL : cm->ah != NULL ? cm->ah : ah_new(ep, &ip, qpn, qkey);
        if (ah == NULL)
            post_ud_conn_event(ep, cm, (DAT_EVENT_NUMBER)DAT_IB_UD_CONNECTION_ERROR_EVENT,
                               DAT_IB_UD_CONNECT_ERROR, NULL, NULL, 0, 0);
        else
            post_ud_conn_event(ep, cm, (DAT_EVENT_NUMBER)DAT_IB_UD_CONNECTION_EVENT_ESTABLISHED,
                               cm->active ? DAT_IB_UD_REMOTE_AH : DAT_IB_UD_PASSIVE_REMOTE_AH, ah, &ip, qpn, qkey);
    } else if (ev->type == EMU_CONN_NON_PEER_REJECTED && ev->err == ECONNREFUSED && cm_retry(cm, c)) {
        return; /* connecting again: no outcome yet */
    } else if (ev->type == EMU_CONN_PEER_REJECTED) {
        store_pdata(cm, ev->pdata, ev->pdata_len);
        post_ud_conn_event(ep, cm, (DAT_EVENT_NUMBER)DAT_IB_UD_CONNECTION_REJECT_EVENT, DAT_IB_UD_CONNECT_REJECT,
                           NULL, NULL, 0, 0);
    } else {
        SD_DBG("ud", "ep %p: UD exchange failed: %s (%d)", (void *)ep, emu_conn_event_name(ev->type), ev->err);
        cm->pdata_len = 0;
        post_ud_conn_event(ep, cm, (DAT_EVENT_NUMBER)DAT_IB_UD_CONNECTION_ERROR_EVENT, DAT_IB_UD_CONNECT_ERROR,
                           NULL, NULL, 0, 0);
    }
    cm_finish(cm, c);
}

static const struct emu_conn_ops ud_conn_ops = {.event = ud_conn_event};

static struct sd_ud_cm *cm_new(struct sd_ep *ep, bool active)
{
    struct sd_ud_cm *cm = calloc(1, sizeof *cm);
    if (cm != NULL) {
        cm->ep = ep;
        cm->active = active;
    }
    return cm;
}

static DAT_RETURN ud_ready(struct sd_ep *ep)
{
    emu_lock(&ep->lock);
    DAT_EP_STATE s = ep->state;
    bool conf = sd_ep_configured_locked(ep);
    emu_unlock(&ep->lock);
    /* Connecting a UD EP only resolves an address: allowed again and again
     * (IB extension spec §2.3 usage model). */
    if (s != DAT_EP_STATE_UNCONNECTED && s != DAT_EP_STATE_CONNECTED)
        return SD_RET(DAT_INVALID_STATE, sd_ep_state_subtype(s));
    if (!conf || ep->ud == NULL)
        return SD_RET(DAT_INVALID_STATE, DAT_INVALID_STATE_EP_UNCONFIGURED);
    return DAT_SUCCESS;
}

DAT_RETURN sd_ud_connect(struct sd_ep *ep, const struct sockaddr *peer, socklen_t plen, const struct sockaddr *local,
                         socklen_t llen, uint64_t timeout_us, DAT_COUNT pdata_size, const void *pdata)
{
    if (pdata_size > SD_MAX_PRIVATE_DATA - SD_UD_PDATA_HDR)
        return SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG5);
    pthread_mutex_lock(&ep->cm_lock);
    DAT_RETURN rc = ud_ready(ep);
    struct sd_ud_cm *cm = NULL;
    if (rc == DAT_SUCCESS && (cm = cm_new(ep, true)) == NULL)
        rc = SD_RET(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
    if (rc != DAT_SUCCESS) {
        pthread_mutex_unlock(&ep->cm_lock);
        return rc;
    }
    cm->req_len = build_pdata(cm->req, ep, pdata, pdata_size);
    sd_ep_conn_params(ep, &cm->prm, timeout_us);
    cm->prm.ird = cm->prm.ord = 0; /* no RDMA on this connection */
    memcpy(&cm->to, peer, plen);
    cm->to_len = plen;
    if (local != NULL) {
        memcpy(&cm->from, local, llen);
        cm->from_len = llen;
    }
    const char *env = getenv("SOFTDAT_CONNECT_RETRY_MS");
    if (env == NULL || strcmp(env, "0") != 0) {
        uint64_t window = UD_REFUSED_RETRY_US;
        if (timeout_us != 0 && timeout_us != EMU_TIMEOUT_INFINITE && timeout_us < window)
            window = timeout_us;
        cm->retry_until_us = emu_now_us() + window;
    }
    struct sd_ep_ud *u = ep->ud;
    struct emu_conn *c = NULL;
    /* Under u->lock until cm->conn is set: the outcome may arrive on the
     * engine the moment connect returns. */
    pthread_mutex_lock(&u->lock);
    int r = emu_conn_connect(ep->h.ia->engine, peer, plen, local, llen, &cm->prm, cm->req, cm->req_len, &ud_conn_ops,
                             cm, &c);
    if (r == 0) {
        cm->conn = c;
        cm->next = u->cms;
        u->cms = cm;
    }
    pthread_mutex_unlock(&u->lock);
    pthread_mutex_unlock(&ep->cm_lock);
    if (r == 0)
        return DAT_SUCCESS;
    free(cm);
    switch (r) {
    case -EINVAL: return SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    case -EAFNOSUPPORT: return SD_RET(DAT_INVALID_ADDRESS, DAT_INVALID_ADDRESS_UNSUPPORTED);
    case -EADDRNOTAVAIL: return SD_RET(DAT_INVALID_ADDRESS, DAT_INVALID_ADDRESS_UNREACHABLE);
    default: return SD_RET(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEP);
    }
}

uint16_t sd_ud_request_pdata(const struct sd_cr *cr, uint8_t *out, size_t cap)
{
    size_t n = (size_t)cr->pdata_len;
    if (n > cap - SD_UD_PDATA_HDR)
        n = cap - SD_UD_PDATA_HDR;
    memset(out, 0, SD_UD_PDATA_HDR);
    memcpy(out, ud_magic, sizeof ud_magic);
    out[4] = UD_PDATA_VERSION;
    put_be32(out + 8, cr->ud_qpn);
    put_be32(out + 12, cr->ud_qkey);
    memcpy(out + SD_UD_PDATA_HDR, cr->pdata, n);
    return (uint16_t)(SD_UD_PDATA_HDR + n);
}

/* The IB extension's usage model (§2.3) has the server wait for
 * DAT_IB_UD_CONNECTION_REQUEST_EVENT; dtestx takes either event. */
void sd_ud_request_event(const struct sd_cr *cr, DAT_EVENT *ev)
{
    ev->event_number = (DAT_EVENT_NUMBER)DAT_IB_UD_CONNECTION_REQUEST_EVENT;
    DAT_IB_EXTENSION_EVENT_DATA *x = (DAT_IB_EXTENSION_EVENT_DATA *)(void *)ev->event_extension_data;
    x->type = DAT_IB_UD_CONNECT_REQUEST;
    x->status = DAT_OP_SUCCESS;
    fill_remote_ah(&x->remote_ah, NULL, &cr->remote, cr->ud_qpn);
    x->val.immed.data = cr->ud_qkey;
}

DAT_RETURN sd_ud_accept(struct sd_cr *cr, struct sd_ep *ep, DAT_COUNT pdata_size, const void *pdata)
{
    /* A UD request needs a UD EP and the other way round. */
    if (!cr->ud || !sd_ep_is_ud(ep))
        return SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    if (pdata_size > SD_MAX_PRIVATE_DATA - SD_UD_PDATA_HDR)
        return SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    pthread_mutex_lock(&cr->lock);
    bool has_ep = cr->ep != NULL;
    pthread_mutex_unlock(&cr->lock);
    if (has_ep) /* an RSP or provider EP is never UD */
        return SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    pthread_mutex_lock(&ep->cm_lock);
    DAT_RETURN rc = ud_ready(ep);
    struct sd_ud_cm *cm = NULL;
    if (rc == DAT_SUCCESS && (cm = cm_new(ep, false)) == NULL)
        rc = SD_RET(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
    struct emu_conn *conn = NULL;
    if (rc == DAT_SUCCESS)
        rc = sd_cr_take_conn(cr, &conn);
    if (rc != DAT_SUCCESS) {
        pthread_mutex_unlock(&ep->cm_lock);
        free(cm);
        return rc;
    }
    cm->peer = cr->remote;
    cm->peer_qpn = cr->ud_qpn;
    cm->peer_qkey = cr->ud_qkey;
    cm->ah = ah_new(ep, &cm->peer, cm->peer_qpn, cm->peer_qkey); /* NULL: made at ESTABLISHED */
    /* The passive event shows the request's private data (spec §2.3). */
    store_pdata(cm, cr->pdata, (uint16_t)cr->pdata_len);
    uint8_t buf[SD_UD_PDATA_HDR + SD_MAX_PRIVATE_DATA];
    uint16_t len = build_pdata(buf, ep, pdata, pdata_size);
    struct emu_conn_params prm;
    sd_ep_conn_params(ep, &prm, 0);
    prm.ird = prm.ord = 0;
    struct sd_ep_ud *u = ep->ud;
    pthread_mutex_lock(&u->lock);
    int r = emu_conn_accept(conn, &prm, buf, len, &ud_conn_ops, cm);
    if (r == 0) {
        cm->conn = conn;
        cm->next = u->cms;
        u->cms = cm;
    }
    pthread_mutex_unlock(&u->lock);
    pthread_mutex_unlock(&ep->cm_lock);
    if (r != 0) {
        pthread_mutex_lock(&cr->lock);
        cr->conn = conn;
        pthread_mutex_unlock(&cr->lock);
        free(cm);
        return r == -EINVAL ? SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3) : SD_RET(DAT_INVALID_STATE, 0);
    }
    sd_handle_destroy(&cr->h, DAT_INVALID_HANDLE_CR);
    return DAT_SUCCESS;
}

/* A UD EP has no connection to end: disconnect abandons the exchanges
 * still running and moves a CONNECTED EP to DISCONNECTED with the one
 * DAT_CONNECTION_EVENT_DISCONNECTED a consumer waits for. Datagrams keep
 * working (nothing is flushed: no connection carried them). */
DAT_RETURN sd_ud_disconnect(struct sd_ep *ep, DAT_CLOSE_FLAGS flags)
{
    (void)flags;
    pthread_mutex_lock(&ep->cm_lock);
    emu_lock(&ep->lock);
    DAT_EP_STATE s = ep->state;
    bool post = s == DAT_EP_STATE_CONNECTED;
    if (post)
        sd_ep_set_state(ep, DAT_EP_STATE_DISCONNECTED);
    struct sd_evd *evd = ep->connect_evd;
    emu_unlock(&ep->lock);
    DAT_RETURN rc = DAT_SUCCESS;
    if (s != DAT_EP_STATE_CONNECTED && s != DAT_EP_STATE_DISCONNECTED && s != DAT_EP_STATE_UNCONNECTED)
        rc = SD_RET(DAT_INVALID_STATE, sd_ep_state_subtype(s));
    pthread_mutex_unlock(&ep->cm_lock);
    if (post && evd != NULL) {
        DAT_EVENT ev;
        memset(&ev, 0, sizeof ev);
        ev.event_number = DAT_CONNECTION_EVENT_DISCONNECTED;
        ev.event_data.connect_event_data.ep_handle = (DAT_EP_HANDLE)ep;
        if (sd_evd_post(evd, &ev, SD_EVQ_CONN, 0) != DAT_SUCCESS)
            SD_WARN("ud", "ep %p: DISCONNECTED lost: connect EVD full", (void *)ep);
    }
    return rc;
}
