/* Unreliable datagrams over UDP in RoCEv2 framing (emu/ud.h, wire.md §7).
 *
 * Send: the posting thread calls sendmsg itself when nothing is queued
 * (header, the consumer's segments, pad + ICRC: one datagram, no copy);
 * only when the socket buffer is full is the request copied into the send
 * ring and finished by the engine on writability. Receive: the engine's
 * read watcher reads each datagram with one recvmsg straight into the
 * head receive (header and trailer into small scratch buffers), then
 * validates the header; a datagram that does not qualify is dropped and
 * counted and the receive stays posted. */
#include "emu/ud.h"

#include "emu/wire.h"
#include "emu/wire_io.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "emu/log.h"

/* Datagrams read per watcher call: the engine serves others in between. */
#define UD_RX_BATCH 64
/* Kernel receive buffer asked for: bursts of small datagrams between a
 * post and the peer's next receive post should not overflow it. */
#define UD_RCVBUF (1 << 20)

struct ud_wr {
    uint64_t cookie;
    struct emu_ud_dest dest;
    uint32_t nsge;
    uint32_t flags;
    uint32_t len;
};

struct emu_ud {
    struct emu_engine *e;
    struct emu_wire_ep wire;   /* passed to every emu_wire_send/recv of fd */
    struct emu_engine_hook hook;
    bool engine_gone;          /* the engine's destroy hook ran */
    int fd;
    struct emu_fdw *w;
    int family;
    struct sockaddr_storage local;
    uint32_t qpn, qkey, mtu, max_sge;
    const struct emu_ud_ops *ops;
    void *ctx;

    pthread_mutex_t sq_lock;   /* send ring, psn, write interest */
    struct ud_wr *sq;
    struct emu_sge *sq_sge;    /* max_sge per slot */
    uint32_t sq_cap, sq_head, sq_count;
    uint32_t psn;
    bool want_write;

    pthread_mutex_t rq_lock;   /* receive ring */
    struct ud_wr *rq;
    struct emu_sge *rq_sge;
    uint32_t rq_cap, rq_head, rq_count;

    _Atomic uint64_t tx_datagrams, tx_errors, rx_datagrams, rx_no_recv, rx_bad_qkey, rx_bad_qpn, rx_malformed,
        rx_too_long;
};

static void bump(_Atomic uint64_t *c)
{
    atomic_fetch_add_explicit(c, 1, memory_order_relaxed);
}

/* ---------------------------------------------------------------- codec */

void emu_ud_build_hdr(uint8_t *h, uint8_t opcode, bool se, uint8_t pad, uint32_t dest_qpn, uint32_t psn,
                      uint32_t qkey, uint32_t src_qpn)
{
    /* BTH: OpCode | SE M PadCnt(2) TVer(4) | P_Key | Resv8 | DestQP(24) |
     * A Resv7 | PSN(24). M (migration) and TVer are 0. */
    h[EMU_WIRE_BTH_OPCODE] = opcode;
    h[EMU_WIRE_BTH_FLAGS] = (uint8_t)((se ? 0x80 : 0) | (pad & 3) << 4);
    emu_put_be16(h + EMU_WIRE_BTH_PKEY, EMU_UD_PKEY_DEFAULT);
    h[EMU_WIRE_BTH_DEST_QP - 1] = 0;
    emu_put_be24(h + EMU_WIRE_BTH_DEST_QP, dest_qpn & 0xFFFFFF);
    h[EMU_WIRE_BTH_PSN - 1] = 0;
    emu_put_be24(h + EMU_WIRE_BTH_PSN, psn & 0xFFFFFF);
    /* DETH: Q_Key | Resv8 | SrcQP(24). */
    emu_put_be32(h + EMU_WIRE_DETH_QKEY, qkey);
    h[EMU_WIRE_DETH_SRC_QP - 1] = 0;
    emu_put_be24(h + EMU_WIRE_DETH_SRC_QP, src_qpn & 0xFFFFFF);
}

int emu_ud_parse_hdr(const uint8_t *h, struct emu_ud_hdr *o)
{
    uint8_t fl = h[EMU_WIRE_BTH_FLAGS];
    if (h[EMU_WIRE_BTH_OPCODE] != EMU_UD_OP_SEND_ONLY || (fl & 0x0F) != 0) /* Send Only, TVer 0 */
        return -EBADMSG;
    o->opcode = h[EMU_WIRE_BTH_OPCODE];
    o->se = (fl & 0x80) != 0;
    o->pad = (fl >> 4) & 3;
    o->dest_qpn = emu_get_be24(h + EMU_WIRE_BTH_DEST_QP);
    o->psn = emu_get_be24(h + EMU_WIRE_BTH_PSN);
    o->qkey = emu_get_be32(h + EMU_WIRE_DETH_QKEY);
    o->src_qpn = emu_get_be24(h + EMU_WIRE_DETH_SRC_QP);
    return 0;
}

/* The GRH a receive buffer starts with (IB: Global Route Header, 40
 * bytes): IPVer 6, PayLen = the IB packet after it, NxtHdr 0x1B (IBA),
 * SGID/DGID the IP addresses (IPv4 as ::ffff:a.b.c.d, as RoCE does). */
static void addr_gid(const struct sockaddr_storage *sa, uint8_t *gid)
{
    memset(gid, 0, 16);
    if (sa->ss_family == AF_INET6) {
        memcpy(gid, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
    } else if (sa->ss_family == AF_INET) {
        gid[10] = gid[11] = 0xff;
        memcpy(gid + 12, &((const struct sockaddr_in *)sa)->sin_addr, 4);
    }
}

static void build_grh(uint8_t *g, uint32_t ib_len, const struct sockaddr_storage *src,
                      const struct sockaddr_storage *dst)
{
    memset(g, 0, EMU_UD_GRH_LEN);
    g[0] = 0x60;
    g[4] = (uint8_t)(ib_len >> 8);
    g[5] = (uint8_t)ib_len;
    g[6] = 0x1B;
    g[7] = 64;
    addr_gid(src, g + 8);
    addr_gid(dst, g + 24);
}

/* Copy len bytes into the start of an SGE list. */
static void sge_write(const struct emu_sge *sge, uint32_t nsge, const uint8_t *src, uint32_t len)
{
    for (uint32_t i = 0; i < nsge && len > 0; i++) {
        uint32_t n = sge[i].len < len ? sge[i].len : len;
        memcpy(sge[i].addr, src, n);
        src += n;
        len -= n;
    }
}

static uint64_t sge_total(const struct emu_sge *sge, uint32_t nsge)
{
    uint64_t t = 0;
    for (uint32_t i = 0; i < nsge; i++)
        t += sge[i].len;
    return t;
}

/* ---------------------------------------------------------------- send */

static void dest_sockaddr(const struct emu_ud_dest *d, struct sockaddr_storage *out, socklen_t *len)
{
    memcpy(out, &d->addr, sizeof *out);
    if (out->ss_family == AF_INET6) {
        ((struct sockaddr_in6 *)out)->sin6_port = htons((uint16_t)d->qpn);
        *len = sizeof(struct sockaddr_in6);
    } else {
        ((struct sockaddr_in *)out)->sin_port = htons((uint16_t)d->qpn);
        *len = sizeof(struct sockaddr_in);
    }
}

/* One datagram. 0 handed to the kernel (or lost in the network, which UD
 * allows: counted), -EAGAIN socket full, else a local error. sq_lock held
 * (psn). */
static int xmit(struct emu_ud *ud, const struct emu_ud_dest *d, uint32_t nsge, const struct emu_sge *sge,
                uint32_t flags, uint32_t len)
{
    uint8_t hdr[EMU_UD_HDR_LEN];
    uint8_t trailer[3 + EMU_UD_ICRC_LEN] = {0};
    uint8_t pad = (uint8_t)((4 - (len & 3)) & 3);
    /* ICRC stays 0: the RoCEv2 ICRC covers IP header fields a UDP socket
     * cannot see, and the UDP checksum already protects the datagram. */
    emu_ud_build_hdr(hdr, EMU_UD_OP_SEND_ONLY, (flags & EMU_WR_SOLICITED) != 0, pad, d->qpn, ud->psn, d->qkey,
                     ud->qpn);
    struct iovec iov[EMU_QP_MAX_SGE + 2];
    int n = 0;
    iov[n++] = (struct iovec){hdr, sizeof hdr};
    for (uint32_t i = 0; i < nsge; i++)
        if (sge[i].len > 0)
            iov[n++] = (struct iovec){sge[i].addr, sge[i].len};
    iov[n++] = (struct iovec){trailer, (size_t)pad + EMU_UD_ICRC_LEN};
    struct sockaddr_storage to;
    socklen_t tolen;
    dest_sockaddr(d, &to, &tolen);
    struct msghdr m = {.msg_name = &to, .msg_namelen = tolen, .msg_iov = iov, .msg_iovlen = (size_t)n};
    ssize_t r = emu_wire_send(&ud->wire, ud->fd, &m, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (r >= 0) {
        ud->psn = (ud->psn + 1) & 0xFFFFFF;
        bump(&ud->tx_datagrams);
        return 0;
    }
    int err = errno;
    switch (err) {
    case EAGAIN:
    case ENOBUFS:
        return -EAGAIN;
    case ECONNREFUSED: /* an earlier datagram's ICMP; this one still went */
    case EHOSTUNREACH:
    case ENETUNREACH:
    case EHOSTDOWN:
    case ENETDOWN:
    case EPERM:        /* a firewall ate it */
        ud->psn = (ud->psn + 1) & 0xFFFFFF;
        bump(&ud->tx_errors);
        SD_DBG("ud", "qpn %u: datagram to qpn %u lost: %s", ud->qpn, d->qpn, strerror(err));
        return 0;
    default:
        bump(&ud->tx_errors);
        SD_WARN("ud", "qpn %u: sendmsg: %s", ud->qpn, strerror(err));
        return -err;
    }
}

static void send_complete(struct emu_ud *ud, uint64_t cookie, enum emu_wc_status st, uint32_t len)
{
    struct emu_ud_cqe c;
    memset(&c, 0, sizeof c);
    c.cookie = cookie;
    c.status = st;
    c.byte_len = st == EMU_WC_SUCCESS ? len : 0;
    ud->ops->send_done(ud->ctx, &c);
}

/* Engine, socket writable: the queued sends in order. sq_lock held. */
static void drain_sq(struct emu_ud *ud)
{
    while (ud->sq_count > 0) {
        struct ud_wr *w = &ud->sq[ud->sq_head];
        int r = xmit(ud, &w->dest, w->nsge, &ud->sq_sge[(size_t)ud->sq_head * ud->max_sge], w->flags, w->len);
        if (r == -EAGAIN)
            return;
        ud->sq_head = (ud->sq_head + 1) % ud->sq_cap;
        ud->sq_count--;
        send_complete(ud, w->cookie, r == 0 ? EMU_WC_SUCCESS : EMU_WC_LOC_QP, w->len);
    }
    if (ud->want_write && ud->w != NULL) {
        ud->want_write = false;
        emu_fdw_disable(ud->w, EMU_EV_WRITE);
    }
}

int emu_ud_post_send(struct emu_ud *ud, uint64_t cookie, const struct emu_ud_dest *dest, uint32_t nsge,
                     const struct emu_sge *sge, uint32_t flags)
{
    if (ud == NULL || dest == NULL || nsge > ud->max_sge || (nsge > 0 && sge == NULL))
        return -EINVAL;
    if (dest->addr.ss_family != ud->family || dest->qpn == 0 || dest->qpn > 0xFFFF)
        return -EINVAL;
    uint64_t len = sge_total(sge, nsge);
    if (len > ud->mtu)
        return -EMSGSIZE;
    pthread_mutex_lock(&ud->sq_lock);
    if (ud->sq_count == ud->sq_cap) {
        pthread_mutex_unlock(&ud->sq_lock);
        return -ENOSPC;
    }
    if (ud->sq_count == 0) { /* fast path: nothing ahead of us */
        int r = xmit(ud, dest, nsge, sge, flags, (uint32_t)len);
        if (r != -EAGAIN) {
            send_complete(ud, cookie, r == 0 ? EMU_WC_SUCCESS : EMU_WC_LOC_QP, (uint32_t)len);
            pthread_mutex_unlock(&ud->sq_lock);
            return 0;
        }
    }
    uint32_t i = (ud->sq_head + ud->sq_count) % ud->sq_cap;
    ud->sq[i] = (struct ud_wr){.cookie = cookie, .dest = *dest, .nsge = nsge, .flags = flags, .len = (uint32_t)len};
    if (nsge > 0)
        memcpy(&ud->sq_sge[(size_t)i * ud->max_sge], sge, nsge * sizeof *sge);
    ud->sq_count++;
    if (!ud->want_write && ud->w != NULL) {
        ud->want_write = true;
        emu_fdw_enable(ud->w, EMU_EV_WRITE);
    }
    pthread_mutex_unlock(&ud->sq_lock);
    return 0;
}

/* ---------------------------------------------------------------- receive */

int emu_ud_post_recv(struct emu_ud *ud, uint64_t cookie, uint32_t nsge, const struct emu_sge *sge)
{
    if (ud == NULL || nsge > ud->max_sge || (nsge > 0 && sge == NULL))
        return -EINVAL;
    pthread_mutex_lock(&ud->rq_lock);
    if (ud->rq_count == ud->rq_cap) {
        pthread_mutex_unlock(&ud->rq_lock);
        return -ENOSPC;
    }
    uint32_t i = (ud->rq_head + ud->rq_count) % ud->rq_cap;
    ud->rq[i] = (struct ud_wr){.cookie = cookie, .nsge = nsge, .len = (uint32_t)sge_total(sge, nsge)};
    if (nsge > 0)
        memcpy(&ud->rq_sge[(size_t)i * ud->max_sge], sge, nsge * sizeof *sge);
    ud->rq_count++;
    pthread_mutex_unlock(&ud->rq_lock);
    return 0;
}

/* Read and discard one datagram (no receive to place it in). 1 read,
 * 0 nothing there. */
static int discard_one(struct emu_ud *ud)
{
    uint8_t h[EMU_UD_HDR_LEN];
    ssize_t r = emu_wire_recv1(&ud->wire, ud->fd, h, sizeof h, MSG_DONTWAIT | MSG_TRUNC);
    if (r < 0)
        return 0;
    struct emu_ud_hdr p;
    if ((size_t)r < sizeof h || emu_ud_parse_hdr(h, &p) != 0)
        bump(&ud->rx_malformed);
    else if (p.dest_qpn != ud->qpn)
        bump(&ud->rx_bad_qpn);
    else if (p.qkey != ud->qkey)
        bump(&ud->rx_bad_qkey);
    else
        bump(&ud->rx_no_recv);
    return 1;
}

/* One datagram into the head receive. 1 read (placed or dropped), 0
 * nothing there. rq_lock held; the completion is delivered under it so
 * that receive completions keep post order against a concurrent flush. */
static int receive_one(struct emu_ud *ud)
{
    struct ud_wr *w = &ud->rq[ud->rq_head];
    const struct emu_sge *sge = &ud->rq_sge[(size_t)ud->rq_head * ud->max_sge];
    uint8_t hdr[EMU_UD_HDR_LEN];
    uint8_t tail[8];
    struct iovec iov[EMU_QP_MAX_SGE + 2];
    int n = 0;
    iov[n++] = (struct iovec){hdr, sizeof hdr};
    /* The payload goes after the GRH slot: skip its 40 bytes. */
    uint32_t skip = EMU_UD_GRH_LEN;
    uint32_t space = 0;
    for (uint32_t i = 0; i < w->nsge; i++) {
        uint32_t l = sge[i].len;
        if (l <= skip) {
            skip -= l;
            continue;
        }
        iov[n++] = (struct iovec){(uint8_t *)sge[i].addr + skip, l - skip};
        space += l - skip;
        skip = 0;
    }
    iov[n++] = (struct iovec){tail, sizeof tail};
    struct sockaddr_storage src;
    struct msghdr m = {.msg_name = &src, .msg_namelen = sizeof src, .msg_iov = iov, .msg_iovlen = (size_t)n};
    ssize_t r = emu_wire_recv(&ud->wire, ud->fd, &m, MSG_DONTWAIT);
    if (r < 0)
        return 0;
    struct emu_ud_hdr p;
    if ((size_t)r < EMU_UD_HDR_LEN + EMU_UD_ICRC_LEN || emu_ud_parse_hdr(hdr, &p) != 0 ||
        (size_t)r < (size_t)EMU_UD_HDR_LEN + EMU_UD_ICRC_LEN + p.pad) {
        bump(&ud->rx_malformed);
        return 1;
    }
    if (p.dest_qpn != ud->qpn) {
        bump(&ud->rx_bad_qpn);
        return 1;
    }
    if (p.qkey != ud->qkey) {
        bump(&ud->rx_bad_qkey);
        return 1;
    }
    uint32_t payload = (uint32_t)r - EMU_UD_HDR_LEN - EMU_UD_ICRC_LEN - p.pad;
    struct emu_ud_cqe c;
    memset(&c, 0, sizeof c);
    c.cookie = w->cookie;
    c.solicited = p.se;
    c.src = src;
    c.src_qpn = p.src_qpn;
    if ((m.msg_flags & MSG_TRUNC) || w->len < EMU_UD_GRH_LEN || payload > space) {
        /* Real UD completes such a receive with a local length error; the
         * endpoint goes on. */
        bump(&ud->rx_too_long);
        c.status = EMU_WC_LOC_LEN;
    } else {
        uint8_t g[EMU_UD_GRH_LEN];
        build_grh(g, (uint32_t)r, &src, &ud->local);
        sge_write(sge, w->nsge, g, sizeof g);
        c.status = EMU_WC_SUCCESS;
        c.byte_len = EMU_UD_GRH_LEN + payload;
        bump(&ud->rx_datagrams);
    }
    ud->rq_head = (ud->rq_head + 1) % ud->rq_cap;
    ud->rq_count--;
    ud->ops->recv_done(ud->ctx, &c);
    return 1;
}

static void on_io(int fd, unsigned what, void *arg)
{
    (void)fd;
    struct emu_ud *ud = arg;
    if (what & EMU_EV_WRITE) {
        pthread_mutex_lock(&ud->sq_lock);
        drain_sq(ud);
        pthread_mutex_unlock(&ud->sq_lock);
    }
    if (what & EMU_EV_READ) {
        for (int i = 0; i < UD_RX_BATCH; i++) {
            pthread_mutex_lock(&ud->rq_lock);
            int got = ud->rq_count > 0 ? receive_one(ud) : discard_one(ud);
            pthread_mutex_unlock(&ud->rq_lock);
            if (!got)
                break;
        }
    }
}

/* ---------------------------------------------------------------- lifecycle */

void emu_ud_flush(struct emu_ud *ud)
{
    if (ud == NULL)
        return;
    pthread_mutex_lock(&ud->rq_lock);
    while (ud->rq_count > 0) {
        struct emu_ud_cqe c;
        memset(&c, 0, sizeof c);
        c.cookie = ud->rq[ud->rq_head].cookie;
        c.status = EMU_WC_FLUSHED;
        ud->rq_head = (ud->rq_head + 1) % ud->rq_cap;
        ud->rq_count--;
        ud->ops->recv_done(ud->ctx, &c);
    }
    pthread_mutex_unlock(&ud->rq_lock);
    pthread_mutex_lock(&ud->sq_lock);
    while (ud->sq_count > 0) {
        uint64_t cookie = ud->sq[ud->sq_head].cookie;
        ud->sq_head = (ud->sq_head + 1) % ud->sq_cap;
        ud->sq_count--;
        send_complete(ud, cookie, EMU_WC_FLUSHED, 0);
    }
    pthread_mutex_unlock(&ud->sq_lock);
}

/* The engine is going away before us: its watcher must be freed now,
 * on its own thread, and never touched again. */
static void engine_gone(struct emu_engine_hook *hook)
{
    struct emu_ud *ud = (struct emu_ud *)((char *)hook - offsetof(struct emu_ud, hook));
    pthread_mutex_lock(&ud->sq_lock);
    struct emu_fdw *w = ud->w;
    ud->w = NULL;
    ud->engine_gone = true;
    pthread_mutex_unlock(&ud->sq_lock);
    emu_fdw_free(w);
}

static void free_rings(struct emu_ud *ud)
{
    free(ud->sq);
    free(ud->sq_sge);
    free(ud->rq);
    free(ud->rq_sge);
}

int emu_ud_create(const struct emu_ud_attr *a, struct emu_ud **out)
{
    *out = NULL;
    if (a == NULL || a->engine == NULL || a->addr == NULL || a->ops == NULL || a->ops->send_done == NULL ||
        a->ops->recv_done == NULL || a->max_send_wr == 0 || a->max_recv_wr == 0 || a->max_sge == 0 ||
        a->max_sge > EMU_QP_MAX_SGE || a->mtu > EMU_UD_MTU_MAX ||
        (a->addr->sa_family != AF_INET && a->addr->sa_family != AF_INET6))
        return -EINVAL;
    struct emu_ud *ud = calloc(1, sizeof *ud);
    if (ud == NULL)
        return -ENOMEM;
    ud->e = a->engine;
    struct emu_engine_trace t;
    emu_engine_get_trace(ud->e, &t);
    emu_wire_ep_init(&ud->wire, true, t.ia, t.t0_ns);
    ud->fd = -1;
    ud->family = a->addr->sa_family;
    ud->qkey = a->qkey;
    ud->mtu = a->mtu;
    ud->max_sge = a->max_sge;
    ud->ops = a->ops;
    ud->ctx = a->ctx;
    ud->sq_cap = a->max_send_wr;
    ud->rq_cap = a->max_recv_wr;
    pthread_mutex_init(&ud->sq_lock, NULL);
    pthread_mutex_init(&ud->rq_lock, NULL);
    int rc = -ENOMEM;
    ud->sq = calloc(ud->sq_cap, sizeof *ud->sq);
    ud->rq = calloc(ud->rq_cap, sizeof *ud->rq);
    ud->sq_sge = calloc((size_t)ud->sq_cap * ud->max_sge, sizeof *ud->sq_sge);
    ud->rq_sge = calloc((size_t)ud->rq_cap * ud->max_sge, sizeof *ud->rq_sge);
    if (ud->sq == NULL || ud->rq == NULL || ud->sq_sge == NULL || ud->rq_sge == NULL)
        goto fail;
    ud->fd = socket(ud->family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_UDP);
    if (ud->fd < 0) {
        rc = -errno;
        goto fail;
    }
    int sz = UD_RCVBUF;
    (void)setsockopt(ud->fd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof sz);
    struct sockaddr_storage b;
    memset(&b, 0, sizeof b);
    memcpy(&b, a->addr, a->addr_len < sizeof b ? a->addr_len : sizeof b);
    if (bind(ud->fd, (struct sockaddr *)&b, a->addr_len) != 0) {
        rc = -errno;
        goto fail;
    }
    socklen_t ll = sizeof ud->local;
    if (getsockname(ud->fd, (struct sockaddr *)&ud->local, &ll) != 0) {
        rc = -errno;
        goto fail;
    }
    ud->qpn = emu_sockaddr_port((struct sockaddr *)&ud->local);
    ud->psn = (uint32_t)(((uintptr_t)ud >> 4) ^ ud->qpn) & 0xFFFFFF; /* any start; differs per EP */
    ud->hook.fn = engine_gone;
    if ((rc = emu_engine_hook_add(ud->e, &ud->hook)) != 0)
        goto fail;
    ud->w = emu_fdw_new(ud->e, ud->fd, on_io, ud);
    if (ud->w == NULL || emu_fdw_enable(ud->w, EMU_EV_READ) != 0) {
        emu_fdw_free(ud->w);
        emu_engine_hook_del(ud->e, &ud->hook);
        rc = -ENOMEM;
        goto fail;
    }
    SD_DBG("ud", "qpn %u qkey 0x%x mtu %u created", ud->qpn, ud->qkey, ud->mtu);
    *out = ud;
    return 0;
fail:
    if (ud->fd >= 0)
        close(ud->fd);
    free_rings(ud);
    pthread_mutex_destroy(&ud->sq_lock);
    pthread_mutex_destroy(&ud->rq_lock);
    free(ud);
    return rc;
}

void emu_ud_destroy(struct emu_ud *ud)
{
    if (ud == NULL)
        return;
    pthread_mutex_lock(&ud->sq_lock);
    struct emu_fdw *w = ud->w;
    ud->w = NULL;
    bool gone = ud->engine_gone;
    pthread_mutex_unlock(&ud->sq_lock);
    if (!gone) {
        emu_fdw_free(w); /* waits for a callback running now */
        emu_engine_hook_del(ud->e, &ud->hook);
    }
    emu_ud_flush(ud);
    close(ud->fd);
    SD_DBG("ud", "qpn %u destroyed", ud->qpn);
    free_rings(ud);
    emu_wire_ep_fini(&ud->wire);
    pthread_mutex_destroy(&ud->sq_lock);
    pthread_mutex_destroy(&ud->rq_lock);
    free(ud);
}

uint32_t emu_ud_qpn(const struct emu_ud *ud)
{
    return ud->qpn;
}

uint32_t emu_ud_qkey(const struct emu_ud *ud)
{
    return ud->qkey;
}

uint32_t emu_ud_mtu(const struct emu_ud *ud)
{
    return ud->mtu;
}

void emu_ud_local_addr(const struct emu_ud *ud, struct sockaddr_storage *out)
{
    *out = ud->local;
}

void emu_ud_queue_counts(struct emu_ud *ud, uint32_t *send_queued, uint32_t *recv_posted)
{
    pthread_mutex_lock(&ud->sq_lock);
    *send_queued = ud->sq_count;
    pthread_mutex_unlock(&ud->sq_lock);
    pthread_mutex_lock(&ud->rq_lock);
    *recv_posted = ud->rq_count;
    pthread_mutex_unlock(&ud->rq_lock);
}

void emu_ud_get_stats(const struct emu_ud *ud, struct emu_ud_stats *o)
{
    struct emu_ud *u = (struct emu_ud *)ud;
    o->tx_datagrams = atomic_load(&u->tx_datagrams);
    o->tx_errors = atomic_load(&u->tx_errors);
    o->rx_datagrams = atomic_load(&u->rx_datagrams);
    o->rx_no_recv = atomic_load(&u->rx_no_recv);
    o->rx_bad_qkey = atomic_load(&u->rx_bad_qkey);
    o->rx_bad_qpn = atomic_load(&u->rx_bad_qpn);
    o->rx_malformed = atomic_load(&u->rx_malformed);
    o->rx_too_long = atomic_load(&u->rx_too_long);
}
