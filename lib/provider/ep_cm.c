/* softdat EP connection state machine over emu/conn: dat_ep_connect,
 * dat_ep_common_connect, dat_ep_dup_connect, dat_ep_disconnect, and the
 * emu_conn callbacks that turn connection outcomes into DAT connection
 * events.
 *
 * Ownership: an EP's emu_conn lives from connect/accept until the EP is
 * reset, freed or connects again (never freed by a callback), so consumer
 * calls can use ep->conn without racing its destruction. Callbacks run on
 * the engine thread and take only ep->lock; consumer calls hold
 * ep->cm_lock around emu calls (emu_conn_free may block on the engine).
 *
 * Events: emu delivers at most one ESTABLISHED and exactly one terminal
 * event per connection unless it is freed first; each becomes exactly one
 * DAT event on the connect EVD, after sd_ep_dto_flush for terminal ones.
 *
 * Mapping (emu -> DAT):
 *   ESTABLISHED        -> CONNECTION_EVENT_ESTABLISHED (active: the Reply's pdata)
 *   PEER_REJECTED      -> CONNECTION_EVENT_PEER_REJECTED (the Reply's pdata)
 *   NON_PEER_REJECTED  -> CONNECTION_EVENT_NON_PEER_REJECTED (ECONNREFUSED: no
 *                         listener; also bad/missing Reply, RSP already used,
 *                         full CR EVD, CSP address mismatch: the passive
 *                         side closes the request without answering)
 *   UNREACHABLE        -> CONNECTION_EVENT_UNREACHABLE (no route / TCP SYN timeout)
 *   TIMED_OUT          -> CONNECTION_EVENT_TIMED_OUT (TCP up, no Reply in time)
 *   ACCEPT_ERROR       -> CONNECTION_EVENT_ACCEPT_COMPLETION_ERROR
 *   DISCONNECTED       -> CONNECTION_EVENT_DISCONNECTED
 *   BROKEN             -> CONNECTION_EVENT_BROKEN
 * Every terminal event leaves the EP DISCONNECTED. An ESTABLISHED that
 * races a disconnect of a pending connection is not reported (the terminal
 * DISCONNECTED follows). */
#include "lib/provider/ep.h"

#include <errno.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/socket.h>

#include "emu/log.h"
#include "lib/provider/cr.h"
#include "lib/provider/csp.h"
#include "lib/provider/ep_ud.h"
#include "lib/provider/evd.h"
#include "lib/provider/ia.h"
#include "lib/provider/progress.h"
#include "lib/provider/psp.h"


static atomic_uint_fast64_t g_conn_id = 1;

void sd_ep_begin_active_locked(struct sd_ep *ep, const struct sockaddr_storage *peer, DAT_CONN_QUAL port,
                               DAT_TIMEOUT timeout, struct emu_conn_params *prm)
{
    ep->conn_id = sd_ep_next_conn_id(); /* first: the state record names it */
    sd_ep_set_state(ep, DAT_EP_STATE_ACTIVE_CONNECTION_PENDING);
    ep->aborting = false;
    memcpy(&ep->remote_addr, peer, sizeof *peer);
    ep->remote_port = port;
    ep->remote_set = true;
    ep->initiator = true;
    ep->ev_pdata_len = 0;
    sd_ep_conn_params(ep, prm, timeout == DAT_TIMEOUT_INFINITE ? EMU_TIMEOUT_INFINITE : (uint64_t)timeout);
}

uint64_t sd_ep_next_conn_id(void)
{
    return atomic_fetch_add(&g_conn_id, 1);
}

/* cm_lock held, after emu started a connect (r == 0: c is the connection)
 * or refused to (the EP goes back to UNCONNECTED, its remote forgotten).
 * Shared by dat_ep_connect and dat_iw_socket_connect (ssp.c). */
void sd_ep_connect_started(struct sd_ep *ep, struct sd_ia *ia, int r, struct emu_conn *c)
{
    emu_lock(&ep->lock);
    if (r == 0) {
        ep->conn = c;
        SD_CNT_EP(ep, DCNT_EP_CONNECT, 1);
        SD_CNT_IA(ia, DCNT_IA_CM_REQ_TX);
    } else {
        sd_ep_set_state(ep, DAT_EP_STATE_UNCONNECTED);
        ep->remote_set = false;
        memset(&ep->remote_addr, 0, sizeof ep->remote_addr);
        ep->remote_port = 0;
    }
    emu_unlock(&ep->lock);
}

void sd_ep_conn_params(const struct sd_ep *ep, struct emu_conn_params *p, uint64_t timeout_us)
{
    memset(p, 0, sizeof *p);
    p->trace_conn = ep->conn_id;
    p->ird = (uint16_t)ep->attr.max_rdma_read_in;
    p->ord = (uint16_t)ep->attr.max_rdma_read_out;
    /* InfiniBand semantics: one more Read in each direction for the
     * zero-length Reads that confirm placement (emu_qp_attr.placement_ack),
     * so that they never wait behind the consumer's own Reads. */
    if (ep->h.ia->sem.ib) {
        p->ird++;
        p->ord++;
    }
    p->timeout_us = timeout_us;
    p->crc = EMU_CRC_DEFAULT;
    p->probes = ep->h.ia->sem.ib; /* the QP's placement_ack (ep_dto.c) */
}

static void post_conn_event(struct sd_ep *ep, struct sd_evd *evd, DAT_EVENT_NUMBER num, bool with_pdata)
{
    if (evd == NULL)
        return;
    DAT_EVENT ev;
    memset(&ev, 0, sizeof ev);
    ev.event_number = num;
    ev.event_data.connect_event_data.ep_handle = (DAT_EP_HANDLE)ep;
    if (with_pdata && ep->ev_pdata_len > 0) {
        ev.event_data.connect_event_data.private_data_size = ep->ev_pdata_len;
        ev.event_data.connect_event_data.private_data = ep->ev_pdata;
    }
    if (sd_evd_post(evd, &ev, SD_EVQ_CONN, 0) != DAT_SUCCESS)
        SD_EP_LOG(SD_LOG_WARN, "ep", ep, "connection event 0x%x lost: connect EVD full", (unsigned)num);
}

static void store_pdata(struct sd_ep *ep, const void *pd, uint16_t len)
{
    if (len > sizeof ep->ev_pdata)
        len = sizeof ep->ev_pdata;
    if (len > 0 && pd != NULL)
        memcpy(ep->ev_pdata, pd, len);
    ep->ev_pdata_len = pd != NULL ? len : 0;
}

void (*sd_ep_test_established_hook)(struct sd_ep *ep);

static void on_established(struct sd_ep *ep, struct emu_conn *c, const struct emu_conn_event *ev)
{
    struct emu_conn_info info;
    bool have_info = emu_conn_get_info(c, &info) == 0;
    emu_lock(&ep->lock);
    bool report = !ep->aborting && (ep->state == DAT_EP_STATE_ACTIVE_CONNECTION_PENDING ||
                                    ep->state == DAT_EP_STATE_COMPLETION_PENDING);
    uint64_t id = ep->conn_id;
    if (have_info) {
        memcpy(&ep->local_addr, &info.local, sizeof ep->local_addr);
        ep->local_port = emu_sockaddr_port((const struct sockaddr *)&info.local);
        ep->local_set = true;
        memcpy(&ep->remote_addr, &info.peer, sizeof ep->remote_addr);
        ep->remote_port = emu_sockaddr_port((const struct sockaddr *)&info.peer);
        ep->remote_set = true;
        ep->initiator = info.initiator;
        ep->crc_known = true;
        ep->crc_on = info.crc;
    }
    if (report)
        store_pdata(ep, ev->pdata, ev->pdata_len);
    struct sd_evd *evd = ep->connect_evd;
    emu_unlock(&ep->lock);
    if (!report)
        return;
    /* The data path owns the stream from here; attach before the consumer
     * can see the event (it may post at once). */
    if (ep->qp != NULL) {
        int r = emu_qp_attach(ep->qp, c, id);
        if (r != 0) {
            SD_EP_LOG(SD_LOG_WARN, "ep", ep, "qp attach failed (%d): breaking the connection", r);
            emu_conn_fail(c, -r);
            return;
        }
    }
    /* CONNECTED before any consumer thread may drive the receive side
     * (sd_progress_add): a consumer waiting on the receive EVD can complete
     * a receive the moment it is registered, and answer it at once with a
     * Send, which the EP must then accept. The other order left a window in
     * which that Send met COMPLETION_PENDING (finding S2,
     * docs/reliability.md). */
    emu_lock(&ep->lock);
    report = !ep->aborting && ep->state != DAT_EP_STATE_DISCONNECTED;
    if (report)
        sd_ep_set_state(ep, DAT_EP_STATE_CONNECTED);
    emu_unlock(&ep->lock);
    if (ep->qp != NULL)
        sd_progress_add(ep); /* waiters on its EVDs may now drive its receive side */
    if (sd_ep_test_established_hook != NULL)
        sd_ep_test_established_hook(ep);
    if (report)
        post_conn_event(ep, evd, DAT_CONNECTION_EVENT_ESTABLISHED, true);
}

static DAT_EVENT_NUMBER map_terminal(enum emu_conn_event_type t)
{
    switch (t) {
    case EMU_CONN_PEER_REJECTED: return DAT_CONNECTION_EVENT_PEER_REJECTED;
    case EMU_CONN_NON_PEER_REJECTED: return DAT_CONNECTION_EVENT_NON_PEER_REJECTED;
    case EMU_CONN_UNREACHABLE: return DAT_CONNECTION_EVENT_UNREACHABLE;
    case EMU_CONN_TIMED_OUT: return DAT_CONNECTION_EVENT_TIMED_OUT;
    case EMU_CONN_ACCEPT_ERROR: return DAT_CONNECTION_EVENT_ACCEPT_COMPLETION_ERROR;
    case EMU_CONN_DISCONNECTED: return DAT_CONNECTION_EVENT_DISCONNECTED;
    case EMU_CONN_BROKEN:
    default: return DAT_CONNECTION_EVENT_BROKEN;
    }
}

static void on_terminal(struct sd_ep *ep, const struct emu_conn_event *ev)
{
    DAT_EVENT_NUMBER num = map_terminal(ev->type);
    emu_lock(&ep->lock);
    sd_ep_set_state(ep, DAT_EP_STATE_DISCONNECTED);
    ep->aborting = false;
    bool pd = ev->type == EMU_CONN_PEER_REJECTED;
    if (pd)
        store_pdata(ep, ev->pdata, ev->pdata_len);
    struct sd_evd *evd = ep->connect_evd;
    bool srq = ep->srq != NULL;
    emu_unlock(&ep->lock);
    SD_EP_LOG(SD_LOG_DEBUG, "ep", ep, "connection %s (err %d) -> event 0x%x", emu_conn_event_name(ev->type), ev->err,
              (unsigned)num);
    /* Outstanding DTOs complete FLUSHED before the consumer learns the
     * connection is over (marker technique, spec L5370). */
    sd_progress_remove(ep); /* no consumer thread in its QP from here */
    sd_ep_dto_flush(ep);
    post_conn_event(ep, evd, num, pd);
    /* SRQ EPs also report on the async EVD (dtestsrq waits for it). */
    if (srq && (ev->type == EMU_CONN_BROKEN || ev->type == EMU_CONN_DISCONNECTED))
        sd_ia_post_async(ep->h.ia, DAT_ASYNC_ERROR_EP_BROKEN, (DAT_HANDLE)ep, DAT_EP_OTHER_ERROR);
}

static void ep_conn_event(struct emu_conn *c, const struct emu_conn_event *ev, void *ctx)
{
    struct sd_ep *ep = ctx;
    sd_cnt_conn_event(ep, ev->type, ev->retries);
    if (ev->type == EMU_CONN_ESTABLISHED)
        on_established(ep, c, ev);
    else
        on_terminal(ep, ev);
}

static int ep_conn_rx(struct emu_conn *c, int fd, void *ctx)
{
    struct sd_ep *ep = ctx;
    /* Without a QP (being rebuilt by ep_modify) nobody may consume bytes. */
    return ep->qp != NULL ? emu_qp_rx(ep->qp, c, fd) : -ENOTCONN;
}

static void ep_conn_tx(struct emu_conn *c, void *ctx)
{
    (void)c;
    struct sd_ep *ep = ctx;
    if (ep->qp != NULL)
        emu_qp_tx(ep->qp);
}

/* The engine is about to close the socket: consumer threads driving
 * receive progress must stop using it first. */
static void ep_conn_detach(struct emu_conn *c, void *ctx)
{
    (void)c;
    struct sd_ep *ep = ctx;
    if (ep->qp == NULL)
        return;
    emu_qp_detach(ep->qp);
    if (sd_log_level() >= SD_LOG_DEBUG) {
        struct emu_qp_stats st;
        emu_qp_get_stats(ep->qp, &st);
        SD_EP_LOG(SD_LOG_DEBUG, "ep", ep,
                  "connection's data path: tx %llu B in %llu FPDUs, %llu socket writes; rx %llu B in %llu FPDUs, "
                  "%llu B read in place, %llu consumer runs; %llu placement probes, %llu RNR stalls",
                  (unsigned long long)st.tx_bytes, (unsigned long long)st.tx_fpdus,
                  (unsigned long long)st.tx_writes, (unsigned long long)st.rx_bytes,
                  (unsigned long long)st.rx_fpdus, (unsigned long long)st.rx_bytes_in_place,
                  (unsigned long long)st.consumer_rx_runs, (unsigned long long)st.placement_probes,
                  (unsigned long long)st.rnr_stalls);
    }
}

const struct emu_conn_ops sd_ep_conn_ops = {
    .event = ep_conn_event,
    .rx = ep_conn_rx,
    .tx = ep_conn_tx,
    .detach = ep_conn_detach,
};

/* ---- active side */

static DAT_RETURN connect_common(struct sd_ep *ep, const struct sockaddr *remote, DAT_CONN_QUAL qual,
                                 DAT_TIMEOUT timeout, DAT_COUNT pdata_size, const void *pdata)
{
    struct sd_ia *ia = ep->h.ia;
    struct sockaddr_storage peer;
    socklen_t plen;
    memset(&peer, 0, sizeof peer);
    if (qual > 0xFFFFu)
        SD_DBG("ep", "conn_qual %llu connects to TCP port %u (its low 16 bits)",
               (unsigned long long)qual, (unsigned)(qual & 0xFFFFu));
    if (remote->sa_family == AF_INET) {
        memcpy(&peer, remote, sizeof(struct sockaddr_in));
        ((struct sockaddr_in *)&peer)->sin_port = htons((uint16_t)qual);
        plen = sizeof(struct sockaddr_in);
    } else if (remote->sa_family == AF_INET6) {
        memcpy(&peer, remote, sizeof(struct sockaddr_in6));
        ((struct sockaddr_in6 *)&peer)->sin6_port = htons((uint16_t)qual);
        plen = sizeof(struct sockaddr_in6);
    } else {
        return SD_RET(DAT_INVALID_ADDRESS, DAT_INVALID_ADDRESS_UNSUPPORTED);
    }
    /* Bind the source to the IA's address when the families agree, so the
     * peer's CR shows our IA address. */
    const struct sockaddr *local = NULL;
    socklen_t llen = 0;
    struct sockaddr_storage la;
    if (ia->addr.ss_family == remote->sa_family) {
        memcpy(&la, &ia->addr, sizeof la);
        if (la.ss_family == AF_INET)
            ((struct sockaddr_in *)&la)->sin_port = 0;
        else
            ((struct sockaddr_in6 *)&la)->sin6_port = 0;
        local = (const struct sockaddr *)&la;
        llen = ia->addr_len;
    }
    if (sd_ep_is_ud(ep)) /* an address exchange, not a connection (ep_ud.c) */
        return sd_ud_connect(ep, (const struct sockaddr *)&peer, plen, local, llen,
                             timeout == DAT_TIMEOUT_INFINITE ? EMU_TIMEOUT_INFINITE : (uint64_t)timeout,
                             pdata_size, pdata);

    pthread_mutex_lock(&ep->cm_lock);
    emu_lock(&ep->lock);
    DAT_RETURN rc = DAT_SUCCESS;
    if (ep->state != DAT_EP_STATE_UNCONNECTED)
        rc = SD_RET(DAT_INVALID_STATE, sd_ep_state_subtype(ep->state));
    else if (!sd_ep_configured_locked(ep))
        rc = SD_RET(DAT_INVALID_STATE, DAT_INVALID_STATE_EP_UNCONFIGURED);
    struct emu_conn_params prm;
    if (rc == DAT_SUCCESS) {
        sd_ep_begin_active_locked(ep, &peer, qual, timeout, &prm);
    }
    emu_unlock(&ep->lock);
    if (rc != DAT_SUCCESS) {
        pthread_mutex_unlock(&ep->cm_lock);
        return rc;
    }
    struct emu_conn *c = NULL;
    /* emu never delivers an outcome before connect returns; we publish
     * ep->conn right after, under cm_lock, before any consumer call can
     * look at it. */
    int r = ia->engine ? emu_conn_connect(ia->engine, (const struct sockaddr *)&peer, plen, local, llen, &prm,
                                          pdata, (uint16_t)pdata_size, &sd_ep_conn_ops, ep, &c)
                       : -ESHUTDOWN;
    sd_ep_connect_started(ep, ia, r, c);
    pthread_mutex_unlock(&ep->cm_lock);
    switch (r) {
    case 0: return DAT_SUCCESS;
    case -EINVAL: return SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    case -EAFNOSUPPORT: return SD_RET(DAT_INVALID_ADDRESS, DAT_INVALID_ADDRESS_UNSUPPORTED);
    case -EADDRNOTAVAIL: return SD_RET(DAT_INVALID_ADDRESS, DAT_INVALID_ADDRESS_UNREACHABLE);
    default: return SD_RET(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEP);
    }
}

#define ALL_QOS                                                                                 \
    (DAT_QOS_BEST_EFFORT | DAT_QOS_HIGH_THROUGHPUT | DAT_QOS_LOW_LATENCY | DAT_QOS_ECONOMY |   \
     DAT_QOS_PREMIUM)

static DAT_RETURN sd_ep_connect(DAT_EP_HANDLE ep_handle, DAT_IA_ADDRESS_PTR remote, DAT_CONN_QUAL qual,
                                DAT_TIMEOUT timeout, DAT_COUNT pdata_size, const DAT_PVOID pdata, DAT_QOS qos,
                                DAT_CONNECT_FLAGS flags)
{
    struct sd_ep *ep;
    DAT_RETURN rc = sd_ep_get(ep_handle, &ep);
    if (rc != DAT_SUCCESS)
        return rc;
    if (remote == NULL)
        rc = SD_RET(DAT_INVALID_ADDRESS, DAT_INVALID_ADDRESS_MALFORMED);
    else if (!sd_conn_qual_ok(qual))
        rc = SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    else if (timeout == 0)
        rc = SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG4);
    else if ((rc = sd_cm_check_pdata(pdata_size, pdata, DAT_INVALID_ARG5, DAT_INVALID_ARG6)) != DAT_SUCCESS)
        ;
    else if (qos & ~(DAT_QOS)ALL_QOS)
        rc = SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG7);
    else if (flags & DAT_CONNECT_MULTIPATH_REQUIRED_FLAG)
        rc = SD_RET(DAT_MODEL_NOT_SUPPORTED, 0);
    else if (flags & ~(DAT_CONNECT_FLAGS)DAT_CONNECT_MULTIPATH_FLAG)
        rc = SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG8);
    else
        rc = connect_common(ep, (const struct sockaddr *)remote, qual, timeout, pdata_size, pdata);
    sd_handle_put(&ep->h);
    return rc;
}

/* The CSP model's active side: the port travels in the address. An EP
 * whose communicator was set (dat_ep_modify, DAT_EP_FIELD_COMM: a TCP
 * stream socket of the IA's family) connects only to addresses of that
 * family (else DAT_INVALID_PARAMETER|ARG2). An EP without one is not
 * refused with DAT_INVALID_STATE ("communicator not defined", L6688): it
 * uses the only communicator we support, a TCP stream socket of the remote
 * address's family — deployed consumers (dat_csp_peer, our CSP tests
 * written before comm was storable) never set one, and OFA DAPL has no
 * communicator at all. Its return list has no DAT_INVALID_ADDRESS:
 * address problems are DAT_INVALID_PARAMETER|ARG2. */
static DAT_RETURN sd_ep_common_connect(DAT_EP_HANDLE ep_handle, DAT_IA_ADDRESS_PTR remote, DAT_TIMEOUT timeout,
                                       DAT_COUNT pdata_size, const DAT_PVOID pdata)
{
    struct sd_ep *ep;
    DAT_RETURN rc = sd_ep_get(ep_handle, &ep);
    if (rc != DAT_SUCCESS)
        return rc;
    const struct sockaddr *sa = (const struct sockaddr *)remote;
    emu_lock(&ep->lock);
    int comm_domain = ep->comm_set ? ep->comm.domain : 0;
    emu_unlock(&ep->lock);
    if (sa == NULL || (sa->sa_family != AF_INET && sa->sa_family != AF_INET6) || emu_sockaddr_port(sa) == 0 ||
        (comm_domain != 0 && sa->sa_family != comm_domain))
        rc = SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    else if (timeout == 0)
        rc = SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    else if ((rc = sd_cm_check_pdata(pdata_size, pdata, DAT_INVALID_ARG4, DAT_INVALID_ARG5)) == DAT_SUCCESS) {
        rc = connect_common(ep, sa, emu_sockaddr_port(sa), timeout, pdata_size, pdata);
        if (DAT_GET_TYPE(rc) == DAT_INVALID_ADDRESS)
            rc = SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    }
    sd_handle_put(&ep->h);
    return rc;
}

static DAT_RETURN sd_ep_dup_connect(DAT_EP_HANDLE ep_handle, DAT_EP_HANDLE dup_handle, DAT_TIMEOUT timeout,
                                    DAT_COUNT pdata_size, const DAT_PVOID pdata, DAT_QOS qos)
{
    struct sd_ep *ep, *dup;
    DAT_RETURN rc = sd_ep_get(ep_handle, &ep);
    if (rc != DAT_SUCCESS)
        return rc;
    if ((rc = sd_ep_get(dup_handle, &dup)) != DAT_SUCCESS) {
        sd_handle_put(&ep->h);
        return rc;
    }
    struct sockaddr_storage remote;
    DAT_CONN_QUAL qual = 0;
    if (dup->h.ia->rec != ep->h.ia->rec)
        rc = SD_RET(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP);
    else if (timeout == 0)
        rc = SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    else if ((rc = sd_cm_check_pdata(pdata_size, pdata, DAT_INVALID_ARG4, DAT_INVALID_ARG5)) != DAT_SUCCESS)
        ;
    else if (qos & ~(DAT_QOS)ALL_QOS)
        rc = SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG6);
    if (rc == DAT_SUCCESS) {
        emu_lock(&dup->lock);
        if (dup->state != DAT_EP_STATE_CONNECTED || !dup->remote_set || !dup->initiator) {
            rc = SD_RET(DAT_INVALID_STATE, sd_ep_state_subtype(dup->state));
        } else {
            /* The peer's listening qualifier: for the active side that is
             * what it connected to; a passive EP knows only the peer's
             * source port, which is no listener, so refuse it. */
            memcpy(&remote, &dup->remote_addr, sizeof remote);
            qual = dup->remote_port;
        }
        emu_unlock(&dup->lock);
    }
    if (rc == DAT_SUCCESS)
        rc = connect_common(ep, (const struct sockaddr *)&remote, qual, timeout, pdata_size, pdata);
    sd_handle_put(&dup->h);
    sd_handle_put(&ep->h);
    return rc;
}

static DAT_RETURN sd_ep_disconnect(DAT_EP_HANDLE ep_handle, DAT_CLOSE_FLAGS flags)
{
    struct sd_ep *ep;
    DAT_RETURN rc = sd_ep_get(ep_handle, &ep);
    if (rc != DAT_SUCCESS)
        return rc;
    if (flags != DAT_CLOSE_ABRUPT_FLAG && flags != DAT_CLOSE_GRACEFUL_FLAG) {
        sd_handle_put(&ep->h);
        return SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    }
    if (sd_ep_is_ud(ep)) {
        rc = sd_ud_disconnect(ep, flags);
        sd_handle_put(&ep->h);
        return rc;
    }
    bool graceful = flags == DAT_CLOSE_GRACEFUL_FLAG;
    pthread_mutex_lock(&ep->cm_lock);
    emu_lock(&ep->lock);
    DAT_EP_STATE s = ep->state;
    struct emu_conn *c = ep->conn;
    enum { NONE, ABORT, CLOSE } act = NONE;
    switch (s) {
    case DAT_EP_STATE_DISCONNECTED:
        break; /* no-op (spec L6946; dtestx disconnects both sides) */
    case DAT_EP_STATE_ACTIVE_CONNECTION_PENDING:
    case DAT_EP_STATE_COMPLETION_PENDING:
        ep->aborting = true;
        act = ABORT;
        break;
    case DAT_EP_STATE_CONNECTED:
    case DAT_EP_STATE_CONNECTED_SINGLE_PATH:
    case DAT_EP_STATE_CONNECTED_MULTI_PATH:
        sd_ep_set_state(ep, DAT_EP_STATE_DISCONNECT_PENDING);
        act = CLOSE;
        break;
    case DAT_EP_STATE_DISCONNECT_PENDING:
        act = graceful ? NONE : CLOSE; /* abrupt escalates; graceful: no effect */
        break;
    default:
        rc = SD_RET(DAT_INVALID_STATE, sd_ep_state_subtype(s));
        break;
    }
    emu_unlock(&ep->lock);
    if (c != NULL && act != NONE) {
        SD_CNT_EP(ep, DCNT_EP_DISCONNECT, 1);
        SD_CNT_IA(ep->h.ia, DCNT_IA_CM_DREQ_TX);
    }
    if (c != NULL && act == ABORT) {
        if (ep->qp != NULL)
            emu_qp_quiesce(ep->qp);
        emu_conn_disconnect(c, false);
    } else if (c != NULL && act == CLOSE) {
        /* Graceful through the QP: it hands every queued byte to the socket
         * before the FIN. */
        if (ep->qp != NULL)
            emu_qp_disconnect(ep->qp, graceful);
        else
            emu_conn_disconnect(c, graceful);
    }
    pthread_mutex_unlock(&ep->cm_lock);
    sd_handle_put(&ep->h);
    return rc;
}

void sd_cm_fill_table(DAT_PROVIDER *p)
{
    p->ep_connect_func = sd_ep_connect;
    p->ep_dup_connect_func = sd_ep_dup_connect;
    p->ep_common_connect_func = sd_ep_common_connect;
    p->ep_disconnect_func = sd_ep_disconnect;
    sd_psp_fill_table(p);
    sd_rsp_fill_table(p);
    sd_cr_fill_table(p);
    sd_csp_fill_table(p);
}
