/* iWARP socket service points (DAT iWARP extension, spec 003 §3.1):
 * dat_iw_ssp_create / _free / _query and dat_iw_socket_connect, reached
 * through slot 80 (ibext.c). docs/iwarp-ssp.md has an annotated example.
 *
 * An SSP is an RSP whose "port" is the consumer's connected socket: the
 * same object (struct sd_sp, psp.c), the same reserved-EP rules and one
 * connection request at most, but its emu listener adopts the socket
 * (emu_listener_adopt) instead of listening on a port. It is not a handoff
 * target (dat_cr_handoff names ports). The socket:
 *  - create: the optional final streaming-mode message is written on it
 *    first (the peer's answer, its MPA Request, can only be read after we
 *    adopt it; the kernel buffers it until then);
 *  - until a Request arrives it stays the consumer's: dat_iw_ssp_free
 *    gives it back intact;
 *  - the Request passes it to the CR (emu closes the consumer's
 *    descriptor): the SSP is NON_OPERATIONAL from then on;
 *  - a socket that is not connected at create, or fails or closes before
 *    a Request, makes the SSP NON_OPERATIONAL and posts
 *    DAT_CONNECTION_EVENT_SOCKET_DOWN on its EVD.
 * dat_iw_socket_connect is dat_ep_connect with the MPA Request sent on
 * the consumer's socket (emu_conn_connect_fd): the same states and events;
 * the socket becomes the EP's when the connection is established and
 * stays the consumer's otherwise. */
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include <dat2/dat_iw_extensions.h>

#include "emu/log.h"
#include "lib/provider/cr.h"
#include "lib/provider/ep.h"
#include "lib/provider/evd.h"
#include "lib/provider/ia.h"
#include "lib/provider/psp.h"
#include "lib/provider/ssp.h"

struct sd_ssp {
    struct sd_sp sp; /* first: the SP code works on it */
    DAT_IW_SOCKET socket_id;
    bool down;       /* socket lost before a Request (under sp.lock) */
};

static const struct sd_handle_ops ssp_ops = {
    .type = SD_HTYPE_SSP,
    .name = "ssp",
    .size = sizeof(struct sd_ssp),
    .phase = SD_PHASE_SP,
    .teardown = sd_sp_teardown,
    .release = sd_sp_release,
};

/* DAT_CONNECTION_EVENT_SOCKET_DOWN on the SSP's EVD. The event carries the
 * SSP in the CR-arrival layout (sp_handle, conn_qual = the socket's local
 * port, no CR): the iWARP extension defines no data for it. */
static void post_socket_down(struct sd_ssp *s)
{
    pthread_mutex_lock(&s->sp.lock);
    bool first = !s->down && !s->sp.used;
    s->down = true;
    struct sd_evd *evd = s->sp.evd;
    if (evd != NULL)
        sd_handle_ref(&evd->h);
    DAT_CONN_QUAL qual = s->sp.conn_qual;
    pthread_mutex_unlock(&s->sp.lock);
    if (first && evd != NULL) {
        DAT_EVENT ev;
        memset(&ev, 0, sizeof ev);
        ev.event_number = (DAT_EVENT_NUMBER)DAT_CONNECTION_EVENT_SOCKET_DOWN;
        ev.event_data.cr_arrival_event_data.sp_handle.psp_handle = (DAT_PSP_HANDLE)s;
        ev.event_data.cr_arrival_event_data.conn_qual = qual;
        if (sd_evd_post(evd, &ev, SD_EVQ_CR, 0) != DAT_SUCCESS)
            SD_WARN("ssp", "%p: SOCKET_DOWN lost: EVD full", (void *)s);
    }
    if (evd != NULL)
        sd_handle_put(&evd->h);
}

static void ssp_request(struct emu_listener *l, const struct emu_conn_request *req, void *ctx)
{
    (void)l;
    sd_sp_deliver(ctx, req->conn, req->pdata, req->pdata_len, req->peer, req->peer_len, req->peer_ird,
                  req->peer_ord);
}

static void ssp_lost(struct emu_listener *l, int err, void *ctx)
{
    (void)l;
    SD_DBG("ssp", "%p: socket lost before a Request (%s)", ctx, err ? strerror(err) : "closed");
    post_socket_down(ctx);
}

static const struct emu_listener_ops ssp_listener_ops = {.request = ssp_request, .lost = ssp_lost};

/* Write all of msg on the (possibly non-blocking) socket, within 10 s.
 * false: the socket failed (it is down, not invalid). */
static bool send_all(int fd, const void *msg, size_t len)
{
    const char *p = msg;
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (len > 0) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
            p += n;
            len -= (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
            return false;
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        long ms = (t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000;
        if (ms >= 10000)
            return false;
        struct pollfd pf = {.fd = fd, .events = POLLOUT};
        poll(&pf, 1, (int)(10000 - ms));
    }
    return true;
}

/* The socket's verdict for an IA: 0 = connected through ia's address;
 * 1 = not connected (SOCKET_DOWN); else the DAT error. */
static DAT_RETURN check_socket(struct sd_ia *ia, int fd, DAT_UINT32 arg, int *down)
{
    struct sockaddr_storage local, peer;
    socklen_t llen, plen;
    *down = 0;
    int r = emu_sock_tcp_addrs(fd, &local, &llen, &peer, &plen);
    if (r == -ENOTCONN || r == -EINVAL) {
        *down = 1;
        return DAT_SUCCESS;
    }
    if (r == -ENOMEM || r == -ENOBUFS)
        return SD_RET(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
    if (r != 0) /* not a descriptor, not a socket, not TCP */
        return SD_RET(DAT_INVALID_PARAMETER, arg);
    /* "Not routed through the underlying IA" (spec 003 §3.1.1). */
    if (!sd_same_ip((const struct sockaddr *)&local, (const struct sockaddr *)&ia->addr))
        return SD_RET(DAT_INVALID_STATE, 0);
    return DAT_SUCCESS;
}

DAT_RETURN sd_iw_ssp_create(DAT_IA_HANDLE ia_handle, DAT_IW_SOCKET fd, DAT_EP_HANDLE ep_handle,
                            DAT_EVD_HANDLE evd_handle, DAT_PVOID msg, DAT_COUNT msg_len, DAT_IW_SSP_HANDLE *out)
{
    struct sd_ia *ia;
    DAT_RETURN rc = sd_ia_get(ia_handle, &ia);
    if (rc != DAT_SUCCESS)
        return rc;
    struct sd_ep *ep = NULL;
    bool prov = ep_handle == DAT_HANDLE_NULL;
    int down = 0;
    if (out == NULL) {
        rc = SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG7);
        goto out;
    }
    if (msg_len < 0) {
        rc = SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG6);
        goto out;
    }
    if (msg_len > 0 && msg == NULL) {
        rc = SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG5);
        goto out;
    }
    if ((rc = sd_sp_ep_arg(ia, ep_handle, &ep)) != DAT_SUCCESS)
        goto out;
    struct sd_sp *sp;
    if ((rc = sd_sp_new(ia, &ssp_ops, evd_handle, &sp)) != DAT_SUCCESS)
        goto out;
    struct sd_ssp *s = (struct sd_ssp *)sp;
    s->socket_id = fd;
    if ((rc = check_socket(ia, fd, DAT_INVALID_ARG2, &down)) != DAT_SUCCESS) {
        sd_sp_teardown(&sp->h);
        sd_handle_discard(&sp->h);
        goto out;
    }
    if ((rc = sd_sp_reserve_ep(sp, ep, prov)) != DAT_SUCCESS)
        goto out;
    if (!down && msg_len > 0 && !send_all(fd, msg, (size_t)msg_len))
        down = 1;
    if ((rc = sd_handle_publish(&sp->h)) != DAT_SUCCESS) {
        sd_sp_teardown(&sp->h);
        sd_handle_discard(&sp->h);
        goto out;
    }
    struct emu_listener *l = NULL;
    int r = 0;
    /* Held across the adoption: a Request (or the socket's loss) the
     * engine sees at once must find sp->listener set. The engine thread
     * takes this lock only in this SP's callbacks, which run after the
     * adoption job, so holding it while that job runs cannot deadlock. */
    pthread_mutex_lock(&sp->lock);
    if (!down) {
        r = ia->engine ? emu_listener_adopt(ia->engine, fd, &ssp_listener_ops, sp, &l) : -ESHUTDOWN;
        if (r == -ENOTCONN || r == -EINVAL) {
            down = 1;
            r = 0;
        }
    }
    sp->listener = l;
    sp->conn_qual = l != NULL ? emu_listener_port(l) : 0;
    pthread_mutex_unlock(&sp->lock);
    if (r != 0) {
        sd_handle_destroy(&sp->h, DAT_INVALID_HANDLE1);
        rc = r == -ESHUTDOWN ? SD_RET(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA)
                             : SD_RET(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
        goto out;
    }
    if (down)
        post_socket_down(s);
    *out = (DAT_IW_SSP_HANDLE)sp;
out:
    sd_sp_ep_put(ep, prov, rc);
    sd_handle_put(&ia->h);
    return rc;
}

DAT_RETURN sd_iw_ssp_free(DAT_IW_SSP_HANDLE h)
{
    return sd_sp_free(h, SD_HTYPE_SSP, DAT_INVALID_HANDLE1);
}

DAT_RETURN sd_iw_ssp_query(DAT_IW_SSP_HANDLE h, DAT_IW_SSP_PARAM_MASK mask, DAT_IW_SSP_PARAM *p)
{
    struct sd_sp *sp;
    DAT_RETURN rc = sd_sp_query_get(h, SD_HTYPE_SSP, DAT_INVALID_HANDLE1, (unsigned)mask,
                                    (unsigned)DAT_IW_SSP_FIELD_ALL, p, &sp);
    if (rc != DAT_SUCCESS)
        return rc;
    struct sd_ssp *s = (struct sd_ssp *)sp;
    pthread_mutex_lock(&sp->lock);
    p->ia_handle = sd_ia_consumer_handle(sp->h.ia);
    p->socket_id = s->socket_id;
    p->evd_handle = (DAT_EVD_HANDLE)sp->evd;
    p->ep_handle = (DAT_EP_HANDLE)sp->ep;
    p->ssp_state = sp->listener != NULL && !sp->used && !s->down ? DAT_IW_SSP_STATE_OPERATIONAL
                                                                  : DAT_IW_SSP_STATE_NON_OPERATIONAL;
    pthread_mutex_unlock(&sp->lock);
    sd_handle_put(&sp->h);
    return DAT_SUCCESS;
}

DAT_RETURN sd_iw_socket_connect(DAT_EP_HANDLE ep_handle, DAT_IW_SOCKET fd, DAT_TIMEOUT timeout,
                                DAT_COUNT pdata_size, DAT_PVOID pdata)
{
    struct sd_ep *ep;
    DAT_RETURN rc = sd_ep_get(ep_handle, &ep);
    if (rc != DAT_SUCCESS)
        return rc;
    struct sd_ia *ia = ep->h.ia;
    int down = 0;
    if (timeout == 0) {
        rc = SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
        goto out;
    }
    if ((rc = sd_cm_check_pdata(pdata_size, pdata, DAT_INVALID_ARG4, DAT_INVALID_ARG5)) != DAT_SUCCESS)
        goto out;
    if ((rc = check_socket(ia, fd, DAT_INVALID_ARG2, &down)) != DAT_SUCCESS)
        goto out;
    if (down) { /* an unconnected socket is routed through no IA */
        rc = SD_RET(DAT_INVALID_STATE, 0);
        goto out;
    }
    struct sockaddr_storage local, peer;
    socklen_t llen, plen;
    if (emu_sock_tcp_addrs(fd, &local, &llen, &peer, &plen) != 0) {
        rc = SD_RET(DAT_INVALID_STATE, 0);
        goto out;
    }

    pthread_mutex_lock(&ep->cm_lock);
    emu_lock(&ep->lock);
    if (ep->state != DAT_EP_STATE_UNCONNECTED)
        rc = SD_RET(DAT_INVALID_STATE, sd_ep_state_subtype(ep->state));
    else if (!sd_ep_configured_locked(ep))
        rc = SD_RET(DAT_INVALID_STATE, DAT_INVALID_STATE_EP_UNCONFIGURED);
    else if (ep->comm_set && ep->comm.domain != (int)peer.ss_family)
        rc = SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2); /* EP and socket parameters conflict */
    struct emu_conn_params prm;
    if (rc == DAT_SUCCESS) {
        sd_ep_begin_active_locked(ep, &peer, emu_sockaddr_port((const struct sockaddr *)&peer), timeout, &prm);
    }
    emu_unlock(&ep->lock);
    if (rc != DAT_SUCCESS) {
        pthread_mutex_unlock(&ep->cm_lock);
        goto out;
    }
    struct emu_conn *c = NULL;
    int r = ia->engine ? emu_conn_connect_fd(ia->engine, fd, &prm, pdata, (uint16_t)pdata_size, &sd_ep_conn_ops,
                                             ep, &c)
                       : -ESHUTDOWN;
    sd_ep_connect_started(ep, ia, r, c);
    pthread_mutex_unlock(&ep->cm_lock);
    switch (r) {
    case 0: rc = DAT_SUCCESS; break;
    case -EINVAL: rc = SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG4); break;
    case -ENOTCONN:
    case -ESHUTDOWN: rc = SD_RET(DAT_INVALID_STATE, 0); break;
    case -EBADF:
    case -ENOTSOCK:
    case -EPROTONOSUPPORT: rc = SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2); break;
    default: rc = SD_RET(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEP); break;
    }
out:
    sd_handle_put(&ep->h);
    return rc;
}
