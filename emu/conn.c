/* Connection manager: connect, accept/reject, MPA v2 handshake with RTR,
 * teardown (listeners and address helpers: conn_listen.c). State machine and locking: docs/emu-design.md. */
#include "emu/fault.h"
#include "emu/conn_int.h"

#include "emu/ddp.h"
#include "emu/log.h"
#include "emu/wire.h"
#include "emu/wire_io.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

static const char *const state_names[] = {
    "NEW", "A_TCP", "A_RETRY", "A_SEND_REQ", "A_WAIT_REP", "A_SEND_RTR", "A_WAIT_RTR_RESP", "P_WAIT_REQ", "P_PENDING",
    "P_DEAD", "P_SEND_REP", "P_WAIT_RTR", "P_SEND_RTR_RESP", "REJECTING", "EST", "CLOSING",
    "LINGER", "CLOSED"};

/* ---------------------------------------------------------------- capability marker */

static const uint8_t cap_magic[3] = {'S', 'D', 'T'};

void emu_conn_caps_encode(uint8_t out[EMU_CONN_CAP_MARKER_LEN], uint32_t caps)
{
    memcpy(out, cap_magic, sizeof cap_magic);
    out[EMU_WIRE_CAP_VERSION] = EMU_CONN_CAP_VERSION;
    emu_put_be32(out + EMU_WIRE_CAP_BITS, caps);
}

bool emu_conn_caps_parse(const uint8_t *pd, size_t len, uint32_t *caps)
{
    if (pd == NULL || len < EMU_CONN_CAP_MARKER_LEN || memcmp(pd, cap_magic, sizeof cap_magic) != 0 ||
        pd[EMU_WIRE_CAP_VERSION] != EMU_CONN_CAP_VERSION)
        return false;
    if (caps)
        *caps = emu_get_be32(pd + EMU_WIRE_CAP_BITS);
    return true;
}

/* marker + consumer bytes into buf (>= EMU_CONN_CAP_MARKER_LEN + len); returns the total. */
static uint16_t caps_wrap(const struct emu_conn *c, uint8_t *buf, const void *pd, uint16_t len)
{
    emu_conn_caps_encode(buf, EMU_CONN_CAPS_LOCAL | (c->params.probes ? EMU_CONN_CAP_PROBES : 0));
    if (len)
        memmove(buf + EMU_CONN_CAP_MARKER_LEN, pd, len);
    return (uint16_t)(EMU_CONN_CAP_MARKER_LEN + len);
}

/* ---------------------------------------------------------------- conn core */

static void conn_put(struct emu_conn *c)
{
    if (atomic_fetch_sub(&c->refs, 1) == 1) {
        emu_wire_ep_fini(&c->wire);
        emu_lock_destroy(&c->lock);
        free(c->last);
        free(c);
    }
}

static void set_state(struct emu_conn *c, enum cstate s)
{
    SD_TRACE("conn", "%p %s -> %s", (void *)c, state_names[c->state], state_names[s]);
    emu_lock(&c->lock);
    c->state = s;
    emu_unlock(&c->lock);
}

void conn_listener_unlink(struct emu_conn *c)
{
    struct emu_listener *l = c->listener;
    if (l == NULL)
        return;
    if (c->lprev)
        c->lprev->lnext = c->lnext;
    else
        l->pending = c->lnext;
    if (c->lnext)
        c->lnext->lprev = c->lprev;
    c->lprev = c->lnext = NULL;
    c->listener = NULL;
}

static void rx_timer_cancel(struct emu_conn *c);

/* Close the socket and stop watching it (engine thread). The object stays. */
static void conn_close(struct emu_conn *c, bool abortive)
{
    /* Let the data path forget the fd first: an application thread may be
     * reading it under the data path's receive lock. */
    if ((c->state == CS_EST || c->state == CS_CLOSING) && !c->user_gone && c->ops.detach)
        c->ops.detach(c, c->ctx);
    if (c->listener != NULL && c->listener->ops.lost != NULL && !c->listener->released)
        c->listener->ops.lost(c->listener, c->dead_err, c->listener->ctx); /* adopted socket gone */
    conn_listener_unlink(c);
    if (c->timer)
        emu_timer_cancel(c->timer);
    if (c->retry)
        emu_timer_cancel(c->retry);
    if (c->rx_timer)
        rx_timer_cancel(c);
    emu_lock(&c->lock);
    struct emu_fdw *w = c->w;
    int fd = c->fd;
    c->w = NULL;
    c->fd = -1;
    c->info.fd = -1;
    if (c->state != CS_CLOSED)
        SD_TRACE("conn", "%p %s -> CLOSED%s", (void *)c, state_names[c->state],
                 abortive ? " (RST)" : "");
    c->state = CS_CLOSED;
    emu_unlock(&c->lock);
    /* After the unlock no writer can see fd: safe to close it. An adopted
     * socket not yet the connection's goes back to its owner intact. */
    emu_fdw_free(w);
    conn_close_fd(fd, abortive && !c->adopted);
    conn_adopt_settle(c, false);
}

/* Drop everything and the owner's reference (engine thread). */
void conn_release(struct emu_conn *c)
{
    if (c->released)
        return;
    c->released = true;
    c->user_gone = true;
    /* A lingering socket already sent its FIN after the data: a plain close
     * lets the kernel finish that (engine destroy). Everything else: RST. */
    conn_close(c, c->state != CS_LINGER);
    emu_timer_free(c->timer);
    c->timer = NULL;
    emu_timer_free(c->retry);
    c->retry = NULL;
    emu_timer_free(c->rx_timer);
    c->rx_timer = NULL;
    emu_engine_hook_del(c->e, &c->hook);
    conn_put(c);
}

static void conn_hook_fn(struct emu_engine_hook *h)
{
    struct emu_conn *c = (struct emu_conn *)((char *)h - offsetof(struct emu_conn, hook));
    conn_release(c);
}

/* Every engine-side entry (I/O, timer, job) brackets its work with
 * enter/leave: the reference keeps c's memory alive even if the work
 * releases it, and a free requested from inside a callback runs here. */
static void enter(struct emu_conn *c)
{
    atomic_fetch_add(&c->refs, 1);
    c->in_cb++;
}

static void leave(struct emu_conn *c)
{
    if (--c->in_cb == 0 && c->free_pending) {
        c->free_pending = false;
        conn_release(c);
    }
    conn_put(c);
}

/* True when the engine should stop working on c. Both flags are the
 * engine's own, but they sit beside want_tx, which other threads write
 * under c->lock: byte-sized loads keep the compiler from reading them as
 * one wider word that would span that byte. */
static bool gone(const struct emu_conn *c)
{
    return __atomic_load_n(&c->released, __ATOMIC_RELAXED) ||
           __atomic_load_n(&c->free_pending, __ATOMIC_RELAXED);
}

static void deliver(struct emu_conn *c, enum emu_conn_event_type t, int err, const void *pd,
                    uint16_t pd_len)
{
    if (emu_conn_event_is_terminal(t)) {
        if (c->terminal_sent)
            return;
        c->terminal_sent = true;
    }
    SD_DBG("conn", "%p event %s err %d pdata %u", (void *)c, emu_conn_event_name(t), err,
           (unsigned)pd_len);
    if (c->user_gone || c->free_pending || c->ops.event == NULL)
        return;
    struct emu_conn_event ev = {.type = t, .err = err, .retries = c->retries, .pdata = pd_len ? pd : NULL,
                                .pdata_len = pd_len};
    c->ops.event(c, &ev, c->ctx);
}

static void enter_linger(struct emu_conn *c);
static void linger_end(struct emu_conn *c, bool abortive);

/* Close (socket) and report a terminal event. An established connection
 * whose data path sent a Terminate (emu_conn_last_words) is not reset: a
 * RST would discard the Terminate still queued in the socket behind the
 * data it follows (finding H2, docs/reliability.md). It ends as an abrupt
 * disconnect does: the last words, FIN, the bounded linger. */
static void finish(struct emu_conn *c, enum emu_conn_event_type t, int err, bool abortive)
{
    emu_lock(&c->lock);
    bool term = c->term && c->state == CS_EST;
    emu_unlock(&c->lock);
    if (abortive && term) {
        if (!c->user_gone && c->ops.detach)
            c->ops.detach(c, c->ctx);
        enter_linger(c);
        deliver(c, t, err, NULL, 0);
        return;
    }
    conn_close(c, abortive);
    deliver(c, t, err, NULL, 0);
}

struct emu_wire_ep *emu_conn_wire(struct emu_conn *c)
{
    return &c->wire;
}

struct emu_conn *conn_alloc(struct emu_engine *e)
{
    struct emu_conn *c = calloc(1, sizeof *c);
    if (c == NULL)
        return NULL;
    c->e = e;
    struct emu_engine_trace t;
    emu_engine_get_trace(e, &t);
    emu_wire_ep_init(&c->wire, false, t.ia, t.t0_ns);
    atomic_init(&c->refs, 1);
    emu_lock_init(&c->lock);
    c->fd = -1;
    c->info.fd = -1;
    c->state = CS_NEW;
    c->hook.fn = conn_hook_fn;
    return c;
}

/* The connection's addresses: local / peer when the caller knows them
 * already (the listener's own address, the peer accept4 returned), else
 * asked of the socket, one system call each; a connection handshake pays
 * for every call (dtestcm, docs/perf.md). */
void conn_fill_addrs_known(struct emu_conn *c, const struct sockaddr_storage *local, socklen_t local_len,
                           const struct sockaddr_storage *peer, socklen_t peer_len)
{
    if (local != NULL) {
        memcpy(&c->info.local, local, sizeof c->info.local);
        c->info.local_len = local_len;
    } else {
        c->info.local_len = sizeof c->info.local;
        getsockname(c->fd, (struct sockaddr *)&c->info.local, &c->info.local_len);
    }
    c->info.peer_len = sizeof c->info.peer;
    if (peer != NULL) {
        memcpy(&c->info.peer, peer, sizeof c->info.peer);
        c->info.peer_len = peer_len;
    } else if (getpeername(c->fd, (struct sockaddr *)&c->info.peer, &c->info.peer_len) != 0) {
        memcpy(&c->info.peer, &c->target, sizeof c->target);
        c->info.peer_len = c->target_len;
    }
    emu_wire_ep_set_peer(&c->wire, (struct sockaddr *)&c->info.peer, c->info.peer_len);
}

void conn_fill_mss(struct emu_conn *c)
{
    int mss = 0;
    socklen_t sl = sizeof mss;
    if (getsockopt(c->fd, IPPROTO_TCP, TCP_MAXSEG, &mss, &sl) != 0 || mss <= 0)
        mss = 536;
    c->info.emss = (uint32_t)mss;
    c->info.mulpdu = emu_mpa_mulpdu((uint32_t)mss);
}

void conn_fill_addrs(struct emu_conn *c)
{
    conn_fill_addrs_known(c, NULL, 0, NULL, 0);
    conn_fill_mss(c);
}

void conn_watch(struct emu_conn *c, unsigned on, unsigned off)
{
    if (c->w == NULL)
        return;
    if (off)
        emu_fdw_disable(c->w, off);
    if (on)
        emu_fdw_enable(c->w, on);
}

static void conn_io(int fd, unsigned what, void *arg);
static void conn_timer(void *arg);
static void conn_rx_again(void *arg);

/* Watcher + timers + hook; engine thread or before the conn is published. */
int conn_attach(struct emu_conn *c)
{
    c->w = emu_fdw_new(c->e, c->fd, conn_io, c);
    c->timer = emu_timer_new(c->e, conn_timer, c);
    c->rx_timer = emu_timer_new(c->e, conn_rx_again, c);
    c->rx_retry_us = 1000;
    if (c->w == NULL || c->timer == NULL || c->rx_timer == NULL)
        return -ENOMEM;
    return emu_engine_hook_add(c->e, &c->hook);
}

/* Queue fn(c) with a reference held for it. */
static int conn_post(struct emu_conn *c, emu_fn fn)
{
    atomic_fetch_add(&c->refs, 1);
    int rc = emu_engine_run_async(c->e, fn, c);
    if (rc != 0)
        conn_put(c);
    return rc;
}

/* ---------------------------------------------------------------- handshake I/O */

/* 1 = all of in_need read, 0 = would block, -errno (-ECONNABORTED on EOF). */
static int hs_read(struct emu_conn *c)
{
    for (int i = 0; i < 8 && c->in_len < c->in_need; i++) {
        ssize_t n = emu_wire_recv1(&c->wire, c->fd, c->in + c->in_len, c->in_need - c->in_len, 0);
        if (n > 0) {
            c->in_len += (size_t)n;
        } else if (n == 0) {
            return -ECONNABORTED;
        } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
            return 0;
        } else if (errno != EINTR) {
            return -errno;
        }
    }
    return c->in_len >= c->in_need ? 1 : 0;
}

static void out_done(struct emu_conn *c);
static void hs_fail(struct emu_conn *c, int err);

/* Write what is left of out; enables write interest on EAGAIN. */
static void flush_out(struct emu_conn *c)
{
    while (c->out_off < c->out_len) {
        ssize_t n = emu_wire_send1(&c->wire, c->fd, c->out + c->out_off, c->out_len - c->out_off,
                                   MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
            c->out_off += (size_t)n;
        } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            conn_watch(c, EMU_EV_WRITE, 0);
            return;
        } else if (n < 0 && errno == EINTR) {
            continue;
        } else {
            hs_fail(c, n < 0 ? errno : EPIPE);
            return;
        }
    }
    c->out_len = c->out_off = 0;
    if (!c->want_tx)
        conn_watch(c, 0, EMU_EV_WRITE);
    out_done(c);
}

void conn_expect(struct emu_conn *c, size_t need)
{
    c->in_len = 0;
    c->in_need = need;
    c->in_phase = 0;
}

/* A handshake-time control FPDU (RTR, its Read Response) into out, sent by
 * flush_out. */
static int build_ctrl(struct emu_conn *c, const struct emu_ddp_hdr *h)
{
    size_t n = emu_fpdu_build_ctrl(h, c->info.crc, c->out, sizeof c->out);
    if (n == 0)
        return -EPROTO;
    c->out_len = n;
    c->out_off = 0;
    return 0;
}

/* Check a complete RTR-phase FPDU held in c->in; 0 and *h, or -errno. */
static int parse_rtr_fpdu(struct emu_conn *c, struct emu_ddp_hdr *h)
{
    uint16_t ulpdu = emu_get_be16(c->in + EMU_WIRE_FPDU_ULPDU_LEN);
    size_t need = 0;
    int rc = emu_ddp_parse(c->in + EMU_WIRE_FPDU_SEG, ulpdu, ulpdu, NULL, h, &need);
    if (rc != EMU_DDP_OK) {
        SD_INFO("conn", "%p bad RTR-phase FPDU: %s", (void *)c, emu_ddp_strerror(rc));
        return -EPROTO;
    }
    if (c->info.crc) {
        struct iovec v = {.iov_base = c->in, .iov_len = c->in_len};
        if (!emu_fpdu_crc_ok(&v, 1))
            return -EBADMSG;
    }
    return 0;
}

/* Phase 0 reads the 2-byte ULPDU_Length, phase 1 the rest of one small
 * FPDU. 1 = complete, 0 = more to come, -errno. */
static int small_fpdu_read(struct emu_conn *c)
{
    int rc = hs_read(c);
    if (rc == 1 && c->in_phase == 0) {
        uint32_t ulpdu = emu_get_be16(c->in + EMU_WIRE_FPDU_ULPDU_LEN);
        uint32_t total = emu_fpdu_wire_len(ulpdu);
        if (ulpdu < EMU_DDP_TAGGED_HLEN || total > RTR_MAX_FPDU) {
            SD_INFO("conn", "%p FPDU with ULPDU %u during the RTR phase", (void *)c, ulpdu);
            return -EPROTO;
        }
        c->in_phase = 1;
        c->in_need = total;
        rc = hs_read(c);
    }
    return rc;
}

/* Best effort: one Terminate (LLP / MPA, code) before closing. */
static void send_llp_terminate(struct emu_conn *c, uint8_t code)
{
    if (code == 0 || c->fd < 0)
        return;
    struct emu_term t;
    struct emu_ddp_hdr h;
    emu_term_init(&t, EMU_TERM_LLP, EMU_TERM_LLP_MPA, code, NULL, 0, 0);
    emu_term_hdr(&h, &t);
    uint8_t buf[EMU_FPDU_HDR_MAX + EMU_FPDU_TRAILER_MAX];
    size_t len = emu_fpdu_build_ctrl(&h, c->info.crc, buf, sizeof buf);
    if (len == 0)
        return;
    ssize_t n = emu_wire_send1(&c->wire, c->fd, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT);
    (void)n;
}

/* ---------------------------------------------------------------- established */

/* How often an established connection checks that its peer still
 * answers (peer_alive): a quarter of SOFTDAT_PEER_TIMEOUT_MS. */
static uint64_t alive_check_us(void)
{
    uint64_t us = (uint64_t)emu_conn_peer_timeout_ms() * 250u;
    return us < 50000u ? 50000u : us;
}

/* Established, on c->timer: has anything (data or an ACK, keepalive's
 * answers included) arrived within SOFTDAT_PEER_TIMEOUT_MS? The kernel's
 * keepalive gives up on a silent peer only after counting a probe as sent,
 * and a probe that the host's own queueing discipline drops is not counted
 * ("local congestion": Linux retries every 500 ms without end, and
 * TCP_USER_TIMEOUT does not apply to keepalive until a probe counts). A
 * connection that only receives, with nothing of its own unacknowledged,
 * then never noticed a cut link (netfault.sh's link cut: its tbf drops
 * every frame at the sender). This check applies the same rule as
 * TCP_USER_TIMEOUT to whatever the socket last received. */
static bool peer_alive(struct emu_conn *c)
{
    struct tcp_info ti;
    socklen_t len = sizeof ti;
    memset(&ti, 0, sizeof ti);
    if (getsockopt(c->fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0)
        return true; /* not TCP (a test's socketpair): the socket's own errors tell */
    unsigned ms = emu_conn_peer_timeout_ms();
    if (ti.tcpi_last_data_recv < ms || ti.tcpi_last_ack_recv < ms)
        return true;
    SD_INFO("conn", "%p nothing from the peer for %u ms (data) / %u ms (ACKs), timeout %u ms: broken",
            (void *)c, ti.tcpi_last_data_recv, ti.tcpi_last_ack_recv, ms);
    return false;
}

static void establish(struct emu_conn *c, const void *pd, uint16_t pd_len)
{
    if (c->timer)
        emu_timer_arm(c->timer, alive_check_us());
    emu_lock(&c->lock);
    c->state = CS_EST;
    c->info.fd = c->fd;
    c->info.initiator = c->initiator;
    emu_unlock(&c->lock);
    conn_watch(c, EMU_EV_READ, 0);
    conn_adopt_settle(c, true);
    deliver(c, EMU_CONN_ESTABLISHED, 0, pd, pd_len);
}

static void set_result(struct emu_conn *c, const struct emu_mpa_result *r)
{
    emu_lock(&c->lock);
    c->info.crc = r->crc;
    c->info.p2p = r->p2p;
    c->info.rtr = r->p2p ? r->rtr : EMU_MPA_RTR_NONE;
    c->info.ird = r->ird;
    c->info.ord = r->ord;
    c->info.mpa_rev = r->rev;
    emu_unlock(&c->lock);
}

/* Read side of an established (or closing) connection. */
static int drain(struct emu_conn *c)
{
    char buf[4096];
    for (int i = 0; i < DRAIN_ROUNDS; i++) {
        ssize_t n = emu_wire_recv1(&c->wire, c->fd, buf, sizeof buf, 0);
        if (n > 0)
            continue;
        if (n == 0)
            return EMU_RX_EOF;
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            return EMU_RX_OK;
        if (errno != EINTR)
            return -errno;
    }
    return EMU_RX_OK;
}

/* (Engine thread) rx_timer fires usec from now. Every arm, cancel and
 * firing goes through these and conn_rx_again, so rx_timer_at is the
 * pending deadline, or 0: emu_conn_rx_again_within needs no event_pending
 * (libevent's base lock) on the engine's every receive run. */
static void rx_timer_arm(struct emu_conn *c, uint32_t usec)
{
    if (emu_timer_arm(c->rx_timer, usec) == 0)
        c->rx_timer_at = emu_now_us() + usec;
}

static void rx_timer_cancel(struct emu_conn *c)
{
    emu_timer_cancel(c->rx_timer);
    c->rx_timer_at = 0;
}

/* Returns the rx hook's answer (EMU_RX_PAUSE: reading paused, the retry
 * timer armed). */
static int est_readable(struct emu_conn *c)
{
    int rc = c->ops.rx ? c->ops.rx(c, c->fd, c->ctx) : drain(c);
    /* (LINGER: the hook freed the connection; the linger reads on) */
    if (gone(c) || c->state == CS_CLOSED || c->state == CS_LINGER || rc == EMU_RX_OK)
        return rc;
    if (rc == EMU_RX_PAUSE) {
        /* Level-triggered: readable bytes would wake us for nothing. */
        conn_watch(c, 0, EMU_EV_READ);
        rx_timer_arm(c, c->rx_retry_us);
        return rc;
    }
    if (rc == EMU_RX_EOF)
        finish(c, EMU_CONN_DISCONNECTED, 0, false);
    else if (rc == -ECONNRESET || rc == -EPIPE)
        finish(c, EMU_CONN_DISCONNECTED, ECONNRESET, true);
    else
        finish(c, EMU_CONN_BROKEN, rc < 0 ? -rc : EPROTO, true);
    return rc;
}

/* The rx hook again, reading or not: after a pause, or on a kick. The
 * read watch goes back on only once the hook reads again: a QP still
 * leased to a polling consumer answers PAUSE at once, and re-adding the
 * watch just to drop it again cost two epoll_ctl calls per timer tick. */
static void rx_again(struct emu_conn *c)
{
    if (gone(c) || (c->state != CS_EST && c->state != CS_CLOSING))
        return;
    rx_timer_cancel(c);
    if (est_readable(c) != EMU_RX_PAUSE && !gone(c) && (c->state == CS_EST || c->state == CS_CLOSING))
        conn_watch(c, EMU_EV_READ, 0);
}

static void conn_rx_again(void *arg)
{
    struct emu_conn *c = arg;
    c->rx_timer_at = 0; /* fired */
    enter(c);
    rx_again(c);
    leave(c);
}

static void rx_kick_job(void *arg)
{
    struct emu_conn *c = arg;
    enter(c);
    rx_again(c);
    leave(c);
    conn_put(c);
}

void emu_conn_rx_again_after(struct emu_conn *c, uint32_t usec)
{
    if (c == NULL || c->rx_timer == NULL)
        return;
    if (usec == 0)
        usec = 1;
    /* Already due by then: leave it (no timerfd re-armed per message). */
    if (emu_conn_rx_again_within(c, usec))
        return;
    rx_timer_arm(c, usec);
}

bool emu_conn_rx_again_within(struct emu_conn *c, uint32_t usec)
{
    return c != NULL && c->rx_timer_at != 0 && c->rx_timer_at <= emu_now_us() + usec;
}

int emu_conn_rx_kick(struct emu_conn *c)
{
    return c ? conn_post(c, rx_kick_job) : -EINVAL;
}

void emu_conn_set_rx_retry(struct emu_conn *c, uint32_t usec)
{
    if (c)
        c->rx_retry_us = usec ? usec : 1;
}

/* Abrupt disconnect of an established (or closing) connection: the DAT
 * side is done now, but the bytes already handed to the socket must reach
 * the peer, which a RST would destroy (ours unsent, the peer's unread). So:
 * FIN after the queued bytes, DISCONNECTED at once, then read and discard
 * until the peer's EOF (or EMU_CONN_ABORT_LINGER_US, then RST). */
static void enter_linger(struct emu_conn *c)
{
    emu_lock(&c->lock);
    if (c->state != CS_EST)
        c->last_len = c->last_off = 0; /* our FIN is out: nothing may follow it */
    bool last = c->last_off < c->last_len;
    if (c->state == CS_EST && !last)
        shutdown(c->fd, SHUT_WR);
    SD_TRACE("conn", "%p %s -> LINGER%s", (void *)c, state_names[c->state],
             last ? " (last words first)" : "");
    c->state = CS_LINGER;
    c->info.fd = -1;
    c->want_tx = false;
    emu_unlock(&c->lock);
    emu_timer_arm(c->timer, EMU_CONN_ABORT_LINGER_US);
    if (last)
        conn_watch(c, EMU_EV_READ | EMU_EV_WRITE, 0);
    else
        conn_watch(c, EMU_EV_READ, EMU_EV_WRITE);
}

/* Lingering: write the data path's last words (the rest of an FPDU, a
 * Terminate), then the FIN. Only the engine touches them once lingering. */
static void flush_last(struct emu_conn *c)
{
    for (int round = 0; round < 64 && c->last_off < c->last_len; round++) {
        ssize_t n = emu_wire_send1(&c->wire, c->fd, c->last + c->last_off, c->last_len - c->last_off,
                                   MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
            c->last_off += (size_t)n;
        } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            return; /* the write watch stays on */
        } else if (n < 0 && errno != EINTR) {
            SD_DBG("conn", "%p last words not written: %s", (void *)c, strerror(errno));
            linger_end(c, true);
            return;
        }
    }
    if (c->last_off < c->last_len)
        return;
    SD_DBG("conn", "%p last words written (%zu bytes), FIN", (void *)c, c->last_len);
    shutdown(c->fd, SHUT_WR);
    conn_watch(c, 0, EMU_EV_WRITE);
}

static void abort_linger(struct emu_conn *c)
{
    if (!c->user_gone && c->ops.detach)
        c->ops.detach(c, c->ctx);
    enter_linger(c);
    deliver(c, EMU_CONN_DISCONNECTED, 0, NULL, 0);
}

/* End of the linger: close (RST after a timeout or error), and free an
 * orphan the owner already let go of. */
static void linger_end(struct emu_conn *c, bool abortive)
{
    conn_close(c, abortive);
    if (c->orphan)
        conn_release(c);
}

static void linger_readable(struct emu_conn *c)
{
    int rc = drain(c);
    if (rc == EMU_RX_EOF)
        linger_end(c, false);
    else if (rc != EMU_RX_OK)
        linger_end(c, true);
}

/* ---------------------------------------------------------------- active side */

static enum emu_conn_event_type connect_err_type(int err)
{
    switch (err) {
    case ECONNREFUSED:
        return EMU_CONN_NON_PEER_REJECTED;
    case ENETUNREACH:
    case EHOSTUNREACH:
    case ETIMEDOUT:
    case EHOSTDOWN:
    case ENETDOWN:
    case EADDRNOTAVAIL:
        return EMU_CONN_UNREACHABLE;
    default:
        return EMU_CONN_NON_PEER_REJECTED;
    }
}

/* Our addresses once connect() has run: the local one is bound by then;
 * the peer is the IPv4 target we connected to (getpeername would say the
 * same; IPv6 asks, for the scope and flow fields). Adopted sockets ask. */
static void active_addrs(struct emu_conn *c)
{
    bool known = !c->adopted && c->target.ss_family == AF_INET;
    conn_fill_addrs_known(c, NULL, 0, known ? &c->target : NULL, c->target_len);
}

/* The MPA Request into c->out. false: it could not be built (finished). */
static bool request_build(struct emu_conn *c)
{
    c->pol.rev = 2;
    c->pol.crc = conn_crc_wanted(c->params.crc, (struct sockaddr *)&c->info.local,
                            (struct sockaddr *)&c->info.peer);
    c->pol.p2p = !c->params.no_p2p;
    /* Write and Read RTR (irdma insists on choosing Read); never Send. */
    c->pol.rtr = c->params.rtr_offer ? c->params.rtr_offer & (EMU_MPA_RTR_WRITE | EMU_MPA_RTR_READ)
                                     : EMU_MPA_RTR_WRITE | EMU_MPA_RTR_READ;
    if (c->pol.rtr == 0)
        c->pol.rtr = EMU_MPA_RTR_WRITE;
    c->pol.ird = c->params.ird;
    c->pol.ord = c->params.ord;
    size_t len = 0;
    int rc = emu_mpa_init_request(&c->req, &c->pol, c->req.pd, c->req.pd_len);
    if (rc == EMU_MPA_OK)
        rc = emu_mpa_encode(&c->req, c->out, sizeof c->out, &len);
    if (rc != EMU_MPA_OK) {
        SD_ERR("conn", "MPA request: %s", emu_mpa_strerror(rc));
        finish(c, EMU_CONN_NON_PEER_REJECTED, EINVAL, true);
        return false;
    }
    c->info.crc = c->pol.crc; /* provisional, for a Terminate before the Reply */
    c->out_len = len;
    c->out_off = 0;
    return true;
}

static void tcp_connected(struct emu_conn *c)
{
    active_addrs(c);
    conn_fill_mss(c);
    if (!request_build(c))
        return;
    set_state(c, CS_A_SEND_REQ);
    flush_out(c);
}

/* A refused TCP connect (RST: nobody listens there, perhaps not yet):
 * drop the socket and arm the retry timer, backing off 1, 2, 4, ... ms,
 * while the retry window lasts. false = the refusal is final. */
static void schedule_retry(struct emu_conn *c, uint64_t delay);

static bool refused_retry(struct emu_conn *c)
{
    c->refused = true;
    uint64_t now = emu_now_us();
    if (c->retry == NULL || now >= c->retry_deadline)
        return false;
    c->retries++;
    uint64_t delay = c->retry_delay_us;
    if (delay > c->retry_deadline - now)
        delay = c->retry_deadline - now;
    c->retry_delay_us = c->retry_delay_us * 2 > EMU_CONN_REFUSED_BACKOFF_MAX_US
                            ? EMU_CONN_REFUSED_BACKOFF_MAX_US
                            : c->retry_delay_us * 2;
    schedule_retry(c, delay);
    return true;
}

/* The TCP connect again after delay, on a fresh socket (conn_retry). */
static void schedule_retry(struct emu_conn *c, uint64_t delay)
{
    emu_lock(&c->lock);
    struct emu_fdw *w = c->w;
    int fd = c->fd;
    c->w = NULL;
    c->fd = -1;
    SD_TRACE("conn", "%p %s -> A_RETRY in %llu us", (void *)c, state_names[c->state],
             (unsigned long long)delay);
    c->state = CS_A_RETRY;
    emu_unlock(&c->lock);
    emu_fdw_free(w);
    conn_close_fd(fd, false);
    emu_timer_arm(c->retry, delay);
}

/* The two-machine mistakes: a server on a loopback-only IA (softdat-lo)
 * refuses remote clients, and a loopback IA cannot reach another host. */
static void loopback_hint(struct emu_conn *c, int err)
{
    struct sockaddr_storage me;
    socklen_t len = sizeof me;
    char a[64];
    const struct sockaddr *to = (const struct sockaddr *)&c->target;
    if (emu_sockaddr_is_loopback(to))
        return;
    bool lo = getsockname(c->fd, (struct sockaddr *)&me, &len) == 0 &&
              emu_sockaddr_is_loopback((const struct sockaddr *)&me);
    if (lo)
        SD_WARN("conn", "%s unreachable from a loopback IA (%s): use an IA bound to a real "
                "interface (dat.conf ia_params naming it, softdat(7) TWO MACHINES)",
                emu_sockaddr_str(to, a, sizeof a), strerror(err));
    else if (err == ECONNREFUSED)
        SD_WARN("conn", "nothing listens on %s: if the server runs softdat, its IA may be bound "
                "to loopback only (softdat-lo); give it an IA bound to a real interface "
                "(softdat(7) TWO MACHINES)", emu_sockaddr_str(to, a, sizeof a));
}

static void tcp_failed(struct emu_conn *c, int err)
{
    if (err == ECONNREFUSED && refused_retry(c))
        return;
    loopback_hint(c, err);
    finish(c, connect_err_type(err), err, true);
}

/* connect() said EINPROGRESS, but on loopback (and to any peer that
 * answers within the call) the TCP handshake is complete by then. So try
 * the Request at once: written, the connection is up, and the write
 * watch, its wake-up and SO_ERROR are skipped (three system calls and a
 * loop pass per connection: dtestcm, docs/perf.md). A send on a socket
 * still connecting fails with EAGAIN: false, the caller waits for
 * writability as before (the Request is built again then). Any other
 * failure is the connect's own (refused: the retry rule applies).
 * true = handled. */
static bool request_early(struct emu_conn *c)
{
    active_addrs(c);
    if (!request_build(c))
        return true;
    ssize_t n = emu_wire_send1(&c->wire, c->fd, c->out, c->out_len, MSG_NOSIGNAL | MSG_DONTWAIT);
    int err = n < 0 ? errno : 0;
    if (n < 0) {
        c->out_len = 0;
        if (err == EAGAIN || err == EWOULDBLOCK || err == EINTR)
            return false;
        tcp_failed(c, err);
        return true;
    }
    emu_lock(&c->lock);
    c->info.request_early = true;
    emu_unlock(&c->lock);
    conn_fill_mss(c); /* the handshake is done: the MSS is the negotiated one */
    c->out_off = (size_t)n;
    set_state(c, CS_A_SEND_REQ);
    flush_out(c); /* the rest, if the socket took only part; then the Reply */
    return true;
}

static void tcp_start(struct emu_conn *c)
{
    set_state(c, CS_A_TCP);
    int rc = c->adopted ? 0 : connect(c->fd, (struct sockaddr *)&c->target, c->target_len);
    int err = rc == 0 ? 0 : errno;
    if (rc == 0) {
        conn_watch(c, 0, EMU_EV_WRITE);
        tcp_connected(c);
    } else if (err == EINPROGRESS || err == EINTR) {
        if (!request_early(c))
            conn_watch(c, EMU_EV_WRITE, 0);
    } else {
        tcp_failed(c, err);
    }
}

/* The retry timer: the next TCP connect, on a fresh socket (a refused one
 * cannot connect again). */
static void conn_retry(void *arg)
{
    struct emu_conn *c = arg;
    enter(c);
    if (!gone(c) && c->state == CS_A_RETRY) {
        int fd = -1;
        int rc = conn_active_socket(c, &fd);
        struct emu_fdw *w = NULL;
        if (rc == 0 && (w = emu_fdw_new(c->e, fd, conn_io, c)) == NULL) {
            conn_close_fd(fd, false);
            rc = -ENOMEM;
        }
        if (rc != 0) {
            finish(c, connect_err_type(-rc), -rc, true);
        } else {
            emu_lock(&c->lock);
            c->fd = fd;
            c->w = w;
            emu_unlock(&c->lock);
            tcp_start(c);
        }
    }
    leave(c);
}

static void connect_job(void *arg)
{
    struct emu_conn *c = arg;
    enter(c);
    if (!gone(c) && c->state == CS_NEW) {
        if (c->params.timeout_us != 0 && c->params.timeout_us != EMU_TIMEOUT_INFINITE)
            emu_timer_arm(c->timer, c->params.timeout_us);
        c->retry_deadline = emu_now_us() + conn_refused_retry_us();
        c->retry_delay_us = 1000;
        uint64_t delay = emu_fault_connect_delay_us();
        if (emu_fault_hit(EMU_FAULT_REFUSE)) /* SOFTDAT_FAULT refuse= */
            finish(c, EMU_CONN_NON_PEER_REJECTED, ECONNREFUSED, true);
        else if (delay != 0 && c->retry != NULL && !c->adopted)
            schedule_retry(c, delay); /* SOFTDAT_FAULT connect_delay_ms= */
        else
            tcp_start(c);
    }
    leave(c);
    conn_put(c);
}

static void reply_complete(struct emu_conn *c)
{
    struct emu_mpa_frame rep;
    int rc = emu_mpa_parse(c->in, c->in_len, EMU_MPA_REPLY, 2, 0, &rep);
    if (rc != EMU_MPA_OK && rc != EMU_MPA_E_MARKERS) {
        SD_INFO("conn", "%p bad MPA Reply: %s", (void *)c, emu_mpa_strerror(rc));
        finish(c, EMU_CONN_NON_PEER_REJECTED, EPROTO, true);
        return;
    }
    struct emu_mpa_result res;
    rc = emu_mpa_confirm(&c->req, &rep, &c->pol, &res);
    /* Only a responder that saw our marker answers with one; from anyone
     * else the bytes are the consumer's. */
    uint32_t peer_caps = 0;
    bool marker = !c->params.no_caps && emu_conn_caps_parse(rep.pd, rep.pd_len, &peer_caps);
    if (marker) {
        rep.pd += EMU_CONN_CAP_MARKER_LEN;
        rep.pd_len = (uint16_t)(rep.pd_len - EMU_CONN_CAP_MARKER_LEN);
    }
    if (rc == EMU_MPA_E_REJECTED) {
        conn_close(c, false);
        deliver(c, EMU_CONN_PEER_REJECTED, 0, rep.pd, rep.pd_len);
        return;
    }
    if (rc != EMU_MPA_OK) {
        SD_INFO("conn", "%p unusable MPA Reply: %s", (void *)c, emu_mpa_strerror(rc));
        send_llp_terminate(c, emu_mpa_err_llp_ecode(rc));
        finish(c, EMU_CONN_NON_PEER_REJECTED, EPROTO, true);
        return;
    }
    set_result(c, &res);
    emu_lock(&c->lock);
    c->info.caps = marker ? peer_caps & EMU_CONN_CAPS_LOCAL : 0;
    c->info.peer_probes = marker && (peer_caps & EMU_CONN_CAP_PROBES);
    emu_unlock(&c->lock);
    c->rep_pd_len = rep.pd_len;
    if (rep.pd_len)
        memcpy(c->rep_pd, rep.pd, rep.pd_len);
    if (res.p2p) {
        /* Zero-length RDMA Write, STag 1 (never 0: Chelsio rejects it), or a
         * zero-length Read Request (MSN 1 on queue 1, STags 1). */
        struct emu_ddp_hdr h;
        if (res.rtr == EMU_MPA_RTR_READ)
            emu_ddp_read_rtr_hdr(&h);
        else
            emu_ddp_tagged0_hdr(&h, EMU_OP_WRITE, 1, 0);
        int brc = build_ctrl(c, &h);
        if (brc != 0) {
            finish(c, EMU_CONN_NON_PEER_REJECTED, EPROTO, true);
            return;
        }
        set_state(c, CS_A_SEND_RTR);
        flush_out(c);
        return;
    }
    establish(c, c->rep_pd, c->rep_pd_len);
}

static void active_readable(struct emu_conn *c)
{
    int rc = hs_read(c);
    if (rc == 1 && c->in_phase == 0) {
        size_t more = 0;
        int prc = emu_mpa_parse_header(c->in, c->in_len, EMU_MPA_REPLY, 2, 0, &more);
        if (prc != EMU_MPA_OK) {
            SD_INFO("conn", "%p bad MPA Reply header: %s", (void *)c, emu_mpa_strerror(prc));
            finish(c, EMU_CONN_NON_PEER_REJECTED, EPROTO, true);
            return;
        }
        c->in_phase = 1;
        c->in_need = EMU_MPA_HDR_LEN + more;
        rc = more ? hs_read(c) : 1;
    }
    if (rc == 1) {
        reply_complete(c);
    } else if (rc < 0) {
        /* Closed or reset before a Reply: the responder refused us. */
        finish(c, EMU_CONN_NON_PEER_REJECTED, rc == -ECONNABORTED ? ECONNRESET : -rc, true);
    }
}

/* The zero-length Read Response that answers our Read RTR. */
static void rtr_resp_readable(struct emu_conn *c)
{
    int rc = small_fpdu_read(c);
    if (rc == 0)
        return;
    if (rc < 0) {
        finish(c, EMU_CONN_NON_PEER_REJECTED, rc == -ECONNABORTED ? ECONNRESET : -rc, true);
        return;
    }
    struct emu_ddp_hdr h;
    rc = parse_rtr_fpdu(c, &h);
    if (rc == 0 && !(h.opcode == EMU_OP_READ_RESP && h.payload_len == 0 && h.last &&
                     h.stag == 1))
        rc = -EPROTO;
    if (rc != 0) {
        if (rc == -EBADMSG)
            send_llp_terminate(c, EMU_MPA_LLP_CRC);
        finish(c, EMU_CONN_NON_PEER_REJECTED, -rc, true);
        return;
    }
    establish(c, c->rep_pd, c->rep_pd_len);
}

/* ---------------------------------------------------------------- passive side */


static void deliver_request(struct emu_conn *c)
{
    struct emu_listener *l = c->listener;
    conn_listener_unlink(c);
    emu_timer_cancel(c->timer);
    set_state(c, CS_P_PENDING);
    struct emu_conn_request r = {
        .conn = c,
        .peer = (struct sockaddr *)&c->info.peer,
        .peer_len = c->info.peer_len,
        .local = (struct sockaddr *)&c->info.local,
        .local_len = c->info.local_len,
        .local_port = emu_sockaddr_port((struct sockaddr *)&c->info.local),
        .pdata = c->req.pd_len ? c->req_pd : NULL,
        .pdata_len = c->req.pd_len,
        .peer_ird = c->req.ird,
        .peer_ord = c->req.ord,
        .peer_p2p = c->req.p2p,
        .mpa_rev = c->req.rev,
        .peer_marker = c->peer_marker,
        .peer_caps = c->peer_caps,
    };
    l->in_cb++;
    l->ops.request(l, &r, l->ctx);
    if (--l->in_cb == 0 && l->free_pending)
        conn_listener_release(l);
}

static void reject_reply(struct emu_conn *c, const void *pd, uint16_t pd_len);

/* Keep the Request's private data in req_pd, minus our capability marker. */
static void request_store(struct emu_conn *c, const struct emu_mpa_frame *f)
{
    c->req = *f;
    c->req.pd = c->req_pd;
    c->peer_caps = 0;
    c->peer_marker = emu_conn_caps_parse(f->pd, f->pd_len, &c->peer_caps);
    size_t skip = c->peer_marker ? EMU_CONN_CAP_MARKER_LEN : 0;
    c->req.pd_len = (uint16_t)(f->pd_len - skip);
    if (c->req.pd_len)
        memcpy(c->req_pd, f->pd + skip, c->req.pd_len);
}

static void request_complete(struct emu_conn *c)
{
    struct emu_mpa_frame f;
    int rc = emu_mpa_parse_strict(c->in, c->in_len, EMU_MPA_REQUEST, 2, 0, &f);
    if (rc == EMU_MPA_E_MARKERS) {
        /* A well-formed Request we cannot serve: reject it politely. */
        request_store(c, &f);
        conn_listener_unlink(c);
        reject_reply(c, NULL, 0);
        return;
    }
    if (rc != EMU_MPA_OK) {
        SD_INFO("conn", "%p bad MPA Request: %s", (void *)c, emu_mpa_strerror(rc));
        conn_release(c);
        return;
    }
    request_store(c, &f);
    deliver_request(c);
}

static void passive_req_readable(struct emu_conn *c)
{
    int rc = hs_read(c);
    if (rc == 1 && c->in_phase == 0) {
        size_t more = 0;
        int prc = emu_mpa_parse_header(c->in, c->in_len, EMU_MPA_REQUEST, 2, 0, &more);
        if (prc != EMU_MPA_OK) {
            SD_INFO("conn", "%p bad MPA Request header: %s", (void *)c,
                    emu_mpa_strerror(prc));
            conn_release(c); /* garbage: RST, no reply */
            return;
        }
        c->in_phase = 1;
        c->in_need = EMU_MPA_HDR_LEN + more;
        rc = more ? hs_read(c) : 1;
    }
    if (rc == 1)
        request_complete(c);
    else if (rc < 0)
        conn_release(c);
}

/* Waiting for the owner: any byte or EOF from the initiator kills it. */
static void pending_readable(struct emu_conn *c)
{
    char b;
    /* A peek consumes nothing: not a receive for emu/wire_io.h. */
    ssize_t n = recv(c->fd, &b, 1, MSG_PEEK);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return;
    c->dead_err = n == 0 ? ECONNRESET : n > 0 ? EPROTO : errno;
    SD_DBG("conn", "%p request died before the answer (%s)", (void *)c, strerror(c->dead_err));
    conn_close(c, n > 0);
    set_state(c, CS_P_DEAD);
}

static void rtr_complete(struct emu_conn *c)
{
    struct emu_ddp_hdr h;
    int rc = parse_rtr_fpdu(c, &h);
    if (rc != 0) {
        if (rc == -EBADMSG)
            send_llp_terminate(c, EMU_MPA_LLP_CRC);
        finish(c, EMU_CONN_ACCEPT_ERROR, -rc, true);
        return;
    }
    if (c->info.rtr == EMU_MPA_RTR_WRITE && h.opcode == EMU_OP_WRITE && h.payload_len == 0 &&
        h.last) {
        establish(c, NULL, 0);
        return;
    }
    if (c->info.rtr == EMU_MPA_RTR_READ && h.opcode == EMU_OP_READ_REQ && h.msn == 1 &&
        h.u.rreq.size == 0) {
        struct emu_ddp_hdr resp;
        emu_ddp_tagged0_hdr(&resp, EMU_OP_READ_RESP, h.u.rreq.sink_stag, h.u.rreq.sink_to);
        if (build_ctrl(c, &resp) != 0) {
            finish(c, EMU_CONN_ACCEPT_ERROR, EPROTO, true);
            return;
        }
        set_state(c, CS_P_SEND_RTR_RESP);
        flush_out(c);
        return;
    }
    SD_INFO("conn", "%p RTR is not the negotiated zero-length %s", (void *)c,
            c->info.rtr == EMU_MPA_RTR_READ ? "Read" : "Write");
    send_llp_terminate(c, EMU_MPA_LLP_NO_RTR);
    finish(c, EMU_CONN_ACCEPT_ERROR, EPROTO, true);
}

static void rtr_readable(struct emu_conn *c)
{
    int rc = small_fpdu_read(c);
    if (rc == 1)
        rtr_complete(c);
    else if (rc < 0)
        finish(c, EMU_CONN_ACCEPT_ERROR, rc == -ECONNABORTED ? ECONNRESET : -rc, true);
}

static void reject_reply(struct emu_conn *c, const void *pd, uint16_t pd_len)
{
    /* The engine owns the connection from here on. */
    c->user_gone = true;
    struct emu_mpa_frame rep;
    struct emu_mpa_policy pol = {.rev = 2};
    size_t len = 0;
    uint8_t buf[EMU_CONN_CAP_MARKER_LEN + EMU_CONN_PDATA_MAX];
    if (c->peer_marker && pd_len <= EMU_CONN_PDATA_MAX) {
        /* softdat initiator: it strips a marker from every Reply */
        pd_len = caps_wrap(c, buf, pd, pd_len);
        pd = buf;
    }
    int rc = emu_mpa_reject(&c->req, &pol, pd, pd_len, &rep);
    if (rc == EMU_MPA_OK)
        rc = emu_mpa_encode(&rep, c->out, sizeof c->out, &len);
    if (rc != EMU_MPA_OK) {
        conn_release(c);
        return;
    }
    c->out_len = len;
    c->out_off = 0;
    set_state(c, CS_REJECTING);
    emu_timer_arm(c->timer, EMU_CONN_REJECT_LINGER_US);
    flush_out(c);
}

/* ---------------------------------------------------------------- dispatch */

static void hs_fail(struct emu_conn *c, int err)
{
    switch (c->state) {
    case CS_A_TCP:
    case CS_A_SEND_REQ:
    case CS_A_WAIT_REP:
    case CS_A_SEND_RTR:
    case CS_A_WAIT_RTR_RESP:
        finish(c, EMU_CONN_NON_PEER_REJECTED, err, true);
        break;
    case CS_P_SEND_REP:
    case CS_P_WAIT_RTR:
    case CS_P_SEND_RTR_RESP:
        finish(c, EMU_CONN_ACCEPT_ERROR, err, true);
        break;
    default:
        conn_release(c);
        break;
    }
}

static void out_done(struct emu_conn *c)
{
    switch (c->state) {
    case CS_A_SEND_REQ:
        set_state(c, CS_A_WAIT_REP);
        conn_expect(c, EMU_MPA_HDR_LEN);
        conn_watch(c, EMU_EV_READ, 0);
        break;
    case CS_A_SEND_RTR:
        if (c->info.rtr == EMU_MPA_RTR_READ) {
            /* ESTABLISHED once the Read Response is in, so the data path
             * never sees the handshake's FPDUs. */
            set_state(c, CS_A_WAIT_RTR_RESP);
            conn_expect(c, 2);
            conn_watch(c, EMU_EV_READ, 0);
        } else {
            establish(c, c->rep_pd, c->rep_pd_len);
        }
        break;
    case CS_P_SEND_REP:
        if (c->info.p2p) {
            set_state(c, CS_P_WAIT_RTR);
            conn_expect(c, 2);
            conn_watch(c, EMU_EV_READ, 0);
        } else {
            c->info.recv_first = true;
            establish(c, NULL, 0);
        }
        break;
    case CS_P_SEND_RTR_RESP:
        establish(c, NULL, 0);
        break;
    case CS_REJECTING:
        /* FIN after the Reply; close once the initiator has read it and
         * closed (or the linger timer fires). */
        shutdown(c->fd, SHUT_WR);
        conn_watch(c, EMU_EV_READ, 0);
        break;
    default:
        break;
    }
}

static void conn_writable(struct emu_conn *c)
{
    if (c->state == CS_A_TCP) {
        int err = 0;
        socklen_t sl = sizeof err;
        if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &sl) != 0)
            err = errno;
        if (err == EINPROGRESS || err == EALREADY)
            return;
        conn_watch(c, 0, EMU_EV_WRITE);
        if (err != 0)
            tcp_failed(c, err);
        else
            tcp_connected(c);
        return;
    }
    if (c->out_off < c->out_len) {
        flush_out(c);
        return;
    }
    if (c->state == CS_LINGER) {
        flush_last(c);
        return;
    }
    if ((c->state == CS_EST || c->state == CS_CLOSING) && c->ops.tx) {
        emu_lock(&c->lock);
        bool want = c->want_tx;
        emu_unlock(&c->lock);
        if (want) {
            c->ops.tx(c, c->ctx);
            return;
        }
    }
    conn_watch(c, 0, EMU_EV_WRITE);
}

static void conn_readable(struct emu_conn *c)
{
    switch (c->state) {
    case CS_A_WAIT_REP:
        active_readable(c);
        break;
    case CS_A_WAIT_RTR_RESP:
        rtr_resp_readable(c);
        break;
    case CS_P_WAIT_REQ:
        passive_req_readable(c);
        break;
    case CS_P_PENDING:
        pending_readable(c);
        break;
    case CS_P_WAIT_RTR:
        rtr_readable(c);
        break;
    case CS_REJECTING: {
        if (drain(c) != EMU_RX_OK) {
            conn_close(c, false); /* the initiator has read the Reply and closed */
            conn_release(c);
        }
        break;
    }
    case CS_EST:
    case CS_CLOSING:
        est_readable(c);
        break;
    case CS_LINGER:
        linger_readable(c);
        break;
    default:
        /* Bytes we did not ask for (e.g. data before our Reply went out):
         * stop listening until the state wants them. */
        conn_watch(c, 0, EMU_EV_READ);
        break;
    }
}

static void conn_io(int fd, unsigned what, void *arg)
{
    (void)fd;
    struct emu_conn *c = arg;
    enter(c);
    if (!gone(c) && c->state != CS_CLOSED) {
        if (what & EMU_EV_WRITE)
            conn_writable(c);
        if ((what & EMU_EV_READ) && !gone(c) && c->state != CS_CLOSED)
            conn_readable(c);
    }
    leave(c);
}

static void conn_timer(void *arg)
{
    struct emu_conn *c = arg;
    enter(c);
    if (!gone(c)) {
        switch (c->state) {
        case CS_A_TCP:
        case CS_A_RETRY:
            /* After a refusal the host did answer: still "nobody listens"
             * (docs/emu-design.md §6), only the retries ran out of time. */
            if (c->refused)
                finish(c, EMU_CONN_NON_PEER_REJECTED, ECONNREFUSED, true);
            else
                finish(c, EMU_CONN_UNREACHABLE, ETIMEDOUT, true);
            break;
        case CS_NEW:
        case CS_A_SEND_REQ:
        case CS_A_WAIT_REP:
        case CS_A_SEND_RTR:
        case CS_A_WAIT_RTR_RESP:
            finish(c, EMU_CONN_TIMED_OUT, ETIMEDOUT, true);
            break;
        case CS_P_WAIT_REQ:
            SD_INFO("conn", "%p no MPA Request in time", (void *)c);
            conn_release(c);
            break;
        case CS_P_SEND_REP:
        case CS_P_WAIT_RTR:
        case CS_P_SEND_RTR_RESP:
            finish(c, EMU_CONN_ACCEPT_ERROR, ETIMEDOUT, true);
            break;
        case CS_REJECTING:
            conn_close(c, false);
            conn_release(c);
            break;
        case CS_CLOSING:
            finish(c, EMU_CONN_DISCONNECTED, ETIMEDOUT, true);
            break;
        case CS_EST:
            if (peer_alive(c))
                emu_timer_arm(c->timer, alive_check_us());
            else
                finish(c, EMU_CONN_BROKEN, ETIMEDOUT, true);
            break;
        case CS_LINGER:
            SD_DBG("conn", "%p no EOF from the peer after an abrupt disconnect: RST", (void *)c);
            linger_end(c, true);
            break;
        default:
            break;
        }
    }
    leave(c);
}

/* ---------------------------------------------------------------- public: conns */

int emu_conn_connect(struct emu_engine *e, const struct sockaddr *peer, socklen_t peer_len,
                     const struct sockaddr *local, socklen_t local_len,
                     const struct emu_conn_params *p, const void *pdata, uint16_t pdata_len,
                     const struct emu_conn_ops *ops, void *ctx, struct emu_conn **out)
{
    return conn_connect_start(e, peer, peer_len, local, local_len, p, pdata, pdata_len, ops, ctx, out, -1);
}

/* adopt_fd >= 0: the consumer's connected socket (conn_adopt.c). */
int conn_connect_start(struct emu_engine *e, const struct sockaddr *peer, socklen_t peer_len,
                       const struct sockaddr *local, socklen_t local_len,
                       const struct emu_conn_params *p, const void *pdata, uint16_t pdata_len,
                       const struct emu_conn_ops *ops, void *ctx, struct emu_conn **out, int adopt_fd)
{
    if (e == NULL || out == NULL || pdata_len > EMU_CONN_PDATA_MAX ||
        (pdata_len && pdata == NULL))
        return -EINVAL;
    *out = NULL;
    struct emu_conn *c = conn_alloc(e);
    if (c == NULL)
        return -ENOMEM;
    int rc = conn_addr_copy(&c->target, &c->target_len, peer, peer_len);
    if (rc == 0 && emu_sockaddr_port((struct sockaddr *)&c->target) == 0)
        rc = -EINVAL;
    if (rc != 0)
        goto fail;
    c->initiator = true;
    if (p) {
        c->params = *p;
        emu_wire_ep_set_conn(&c->wire, p->trace_conn);
    }
    if (ops)
        c->ops = *ops;
    c->ctx = ctx;
    c->req.pd = c->req_pd;
    if (c->params.no_caps) {
        if (pdata_len)
            memcpy(c->req_pd, pdata, pdata_len);
        c->req.pd_len = pdata_len;
    } else {
        /* Our capability marker first (wire.md §2.6): the responder echoes
         * one iff it is softdat too. */
        c->req.pd_len = caps_wrap(c, c->req_pd, pdata, pdata_len);
    }

    if (local) {
        rc = conn_addr_copy(&c->src, &c->src_len, local, local_len);
        if (rc == 0 && c->src.ss_family != c->target.ss_family)
            rc = -EAFNOSUPPORT;
        if (rc != 0)
            goto fail;
        conn_sockaddr_set_port(&c->src, 0);
    }
    rc = adopt_fd >= 0 ? conn_adopt_socket(c, adopt_fd) : conn_active_socket(c, &c->fd);
    if (rc != 0)
        goto fail;
    rc = conn_attach(c);
    if (rc == 0 && (c->retry = emu_timer_new(e, conn_retry, c)) == NULL)
        rc = -ENOMEM;
    if (rc != 0)
        goto fail;
    rc = conn_post(c, connect_job);
    if (rc != 0)
        goto fail;
    *out = c;
    return 0;

fail:
    emu_engine_hook_del(e, &c->hook);
    emu_fdw_free(c->w);
    emu_timer_free(c->timer);
    emu_timer_free(c->retry);
    conn_close_fd(c->fd, false);
    emu_wire_ep_fini(&c->wire);
    emu_lock_destroy(&c->lock);
    free(c);
    return rc;
}

static void accept_job(void *arg)
{
    struct emu_conn *c = arg;
    enter(c);
    if (gone(c)) {
        /* freed before the job ran */
    } else if (c->state == CS_P_DEAD) {
        deliver(c, EMU_CONN_ACCEPT_ERROR, c->dead_err, NULL, 0);
    } else if (c->state == CS_P_PENDING) {
        c->pol.rev = 2;
        c->pol.crc = conn_crc_wanted(c->params.crc, (struct sockaddr *)&c->info.local,
                                (struct sockaddr *)&c->info.peer);
        c->pol.p2p = true;
        c->pol.rtr = EMU_MPA_RTR_WRITE | EMU_MPA_RTR_READ;
        c->pol.ird = c->params.ird;
        c->pol.ord = c->params.ord;
        struct emu_mpa_frame rep;
        struct emu_mpa_result res;
        size_t len = 0;
        /* Answer a marker with ours; a plain iWARP initiator gets its
         * private data untouched. */
        bool marker = c->peer_marker && !c->params.no_caps;
        uint8_t buf[EMU_CONN_CAP_MARKER_LEN + EMU_CONN_PDATA_MAX];
        const uint8_t *pd = c->apd;
        uint16_t pd_len = c->apd_len;
        if (marker) {
            pd_len = caps_wrap(c, buf, c->apd, c->apd_len);
            pd = buf;
        }
        int rc = emu_mpa_accept(&c->req, &c->pol, pd, pd_len, &rep, &res);
        if (rc == EMU_MPA_OK)
            rc = emu_mpa_encode(&rep, c->out, sizeof c->out, &len);
        if (rc != EMU_MPA_OK) {
            SD_WARN("conn", "%p accept: %s", (void *)c, emu_mpa_strerror(rc));
            finish(c, EMU_CONN_ACCEPT_ERROR, EPROTO, true);
        } else {
            set_result(c, &res);
            emu_lock(&c->lock);
            c->info.caps = marker ? c->peer_caps & EMU_CONN_CAPS_LOCAL : 0;
            c->info.peer_probes = marker && (c->peer_caps & EMU_CONN_CAP_PROBES);
            emu_unlock(&c->lock);
            c->out_len = len;
            c->out_off = 0;
            set_state(c, CS_P_SEND_REP);
            emu_timer_arm(c->timer, c->params.timeout_us && c->params.timeout_us !=
                                                                EMU_TIMEOUT_INFINITE
                                        ? c->params.timeout_us
                                        : EMU_CONN_RTR_TIMEOUT_US);
            flush_out(c);
        }
    }
    leave(c);
    conn_put(c);
}

static int answer_begin(struct emu_conn *c, const void *pdata, uint16_t pdata_len)
{
    if (c == NULL || pdata_len > EMU_CONN_PDATA_MAX || (pdata_len && pdata == NULL))
        return -EINVAL;
    emu_lock(&c->lock);
    int rc = 0;
    if (c->answered)
        rc = -EALREADY;
    else if (c->state != CS_P_PENDING && c->state != CS_P_DEAD)
        rc = -EINVAL;
    else
        c->answered = true;
    if (rc == 0) {
        if (pdata_len)
            memcpy(c->apd, pdata, pdata_len);
        c->apd_len = pdata_len;
    }
    emu_unlock(&c->lock);
    return rc;
}

int emu_conn_accept(struct emu_conn *c, const struct emu_conn_params *p, const void *pdata,
                    uint16_t pdata_len, const struct emu_conn_ops *ops, void *ctx)
{
    int rc = answer_begin(c, pdata, pdata_len);
    if (rc != 0)
        return rc;
    /* Published to the engine thread by the job queue's lock. */
    if (p) {
        c->params = *p;
        emu_wire_ep_set_conn(&c->wire, p->trace_conn);
    }
    if (ops)
        c->ops = *ops;
    c->ctx = ctx;
    return conn_post(c, accept_job);
}

static void reject_job(void *arg)
{
    struct emu_conn *c = arg;
    enter(c);
    if (c->state == CS_P_PENDING && !c->released)
        reject_reply(c, c->apd, c->apd_len);
    else
        conn_release(c);
    leave(c);
    conn_put(c);
}

int emu_conn_reject(struct emu_conn *c, const void *pdata, uint16_t pdata_len)
{
    int rc = answer_begin(c, pdata, pdata_len);
    if (rc != 0)
        return rc;
    return conn_post(c, reject_job);
}

const void *emu_conn_request_pdata(const struct emu_conn *c, uint16_t *len)
{
    if (len)
        *len = c ? c->req.pd_len : 0;
    return c && c->req.pd_len ? c->req_pd : NULL;
}

static void disconnect_job_common(struct emu_conn *c, bool graceful)
{
    switch (c->state) {
    case CS_EST:
        if (graceful) {
            emu_lock(&c->lock);
            shutdown(c->fd, SHUT_WR);
            c->state = CS_CLOSING;
            emu_unlock(&c->lock);
            emu_timer_arm(c->timer, EMU_CONN_CLOSE_TIMEOUT_US);
        } else {
            abort_linger(c);
        }
        break;
    case CS_CLOSING:
        if (!graceful)
            abort_linger(c);
        break;
    case CS_NEW:
    case CS_A_TCP:
    case CS_A_RETRY:
    case CS_A_SEND_REQ:
    case CS_A_WAIT_REP:
    case CS_A_SEND_RTR:
    case CS_A_WAIT_RTR_RESP:
    case CS_P_SEND_REP:
    case CS_P_WAIT_RTR:
    case CS_P_SEND_RTR_RESP:
        finish(c, EMU_CONN_DISCONNECTED, 0, true);
        break;
    default:
        break;
    }
}

static void disconnect_graceful_job(void *arg)
{
    struct emu_conn *c = arg;
    enter(c);
    if (!gone(c))
        disconnect_job_common(c, true);
    leave(c);
    conn_put(c);
}

static void disconnect_abrupt_job(void *arg)
{
    struct emu_conn *c = arg;
    enter(c);
    if (!gone(c))
        disconnect_job_common(c, false);
    leave(c);
    conn_put(c);
}

int emu_conn_disconnect(struct emu_conn *c, bool graceful)
{
    if (c == NULL)
        return -EINVAL;
    emu_lock(&c->lock);
    bool req = (c->state == CS_P_PENDING || c->state == CS_P_DEAD) && !c->answered;
    emu_unlock(&c->lock);
    if (req)
        return -EINVAL;
    return conn_post(c, graceful ? disconnect_graceful_job : disconnect_abrupt_job);
}

struct fail_req {
    struct emu_conn *c;
    int err;
};

static void fail_job(void *arg)
{
    struct fail_req *f = arg;
    struct emu_conn *c = f->c;
    enter(c);
    if (!gone(c) && c->state != CS_CLOSED && c->state != CS_LINGER && c->state != CS_P_PENDING &&
        c->state != CS_P_DEAD && c->state != CS_P_WAIT_REQ && c->state != CS_REJECTING)
        finish(c, EMU_CONN_BROKEN, f->err ? f->err : EPROTO, true);
    leave(c);
    conn_put(c);
    free(f);
}

int emu_conn_fail(struct emu_conn *c, int err)
{
    if (c == NULL)
        return -EINVAL;
    struct fail_req *f = malloc(sizeof *f);
    if (f == NULL)
        return -ENOMEM;
    f->c = c;
    f->err = err < 0 ? -err : err;
    atomic_fetch_add(&c->refs, 1);
    int rc = emu_engine_run_async(c->e, fail_job, f);
    if (rc != 0) {
        conn_put(c);
        free(f);
    }
    return rc;
}

static void free_job(void *arg)
{
    struct emu_conn *c = arg;
    if (!c->released && (c->state == CS_LINGER || c->state == CS_EST || c->state == CS_CLOSING)) {
        /* The engine finishes the linger and frees it; no more events.
         * Freeing a live connection is an abrupt disconnect too: FIN after
         * the bytes already written, not a RST that could destroy them.
         * (No detach call: the owner stopped using the fd already.) */
        c->user_gone = true;
        c->orphan = true;
        if (c->state != CS_LINGER)
            enter_linger(c);
        return;
    }
    if (c->in_cb > 0) {
        /* Inside one of c's callbacks: finish when it returns. */
        c->user_gone = true;
        c->free_pending = true;
        return;
    }
    conn_release(c);
}

void emu_conn_free(struct emu_conn *c)
{
    if (c == NULL)
        return;
    emu_engine_run_sync(c->e, free_job, c);
}

int emu_conn_get_info(struct emu_conn *c, struct emu_conn_info *out)
{
    if (c == NULL || out == NULL)
        return -EINVAL;
    emu_lock(&c->lock);
    *out = c->info;
    int rc = c->state == CS_EST || c->state == CS_CLOSING ? 0 : -ENOTCONN;
    emu_unlock(&c->lock);
    return rc;
}

struct emu_engine *emu_conn_engine(const struct emu_conn *c)
{
    return c->e;
}

void *emu_conn_ctx(const struct emu_conn *c)
{
    return c->ctx;
}

void emu_conn_set_ops(struct emu_conn *c, const struct emu_conn_ops *ops, void *ctx)
{
    if (ops)
        c->ops = *ops;
    else
        memset(&c->ops, 0, sizeof c->ops);
    c->ctx = ctx;
}

ssize_t emu_conn_writev(struct emu_conn *c, const struct iovec *iov, int iovcnt)
{
    if (c == NULL || (iovcnt > 0 && iov == NULL) || iovcnt < 0)
        return -EINVAL;
    emu_lock(&c->lock);
    ssize_t n;
    if (c->state == CS_EST && c->term) {
        n = -EPIPE; /* the last words were said (emu_conn_last_words) */
    } else if (c->state == CS_EST) {
        struct msghdr mh = {.msg_iov = (struct iovec *)iov, .msg_iovlen = (size_t)iovcnt};
        n = emu_wire_send(&c->wire, c->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0)
            n = errno == EWOULDBLOCK ? -EAGAIN : -errno;
    } else {
        n = c->state == CS_CLOSING ? -EPIPE : -ENOTCONN;
    }
    emu_unlock(&c->lock);
    return n;
}

int emu_conn_last_words(struct emu_conn *c, const struct iovec *iov, int iovcnt)
{
    if (c == NULL || iovcnt < 0 || (iovcnt > 0 && iov == NULL))
        return -EINVAL;
    size_t add = 0;
    for (int i = 0; i < iovcnt; i++)
        add += iov[i].iov_len;
    int rc = 0;
    emu_lock(&c->lock);
    if (c->state != CS_EST) {
        rc = -ENOTCONN;
    } else {
        c->term = true;
        if (add > 0 && c->last == NULL)
            c->last = malloc(EMU_CONN_LAST_WORDS_MAX);
        if (add > 0 && c->last == NULL) {
            rc = -ENOMEM;
        } else if (add > EMU_CONN_LAST_WORDS_MAX - c->last_len) {
            rc = -ENOSPC;
        } else {
            for (int i = 0; i < iovcnt; i++) {
                if (iov[i].iov_len)
                    memcpy(c->last + c->last_len, iov[i].iov_base, iov[i].iov_len);
                c->last_len += iov[i].iov_len;
            }
        }
    }
    emu_unlock(&c->lock);
    return rc;
}

void emu_conn_want_tx(struct emu_conn *c, bool on)
{
    emu_lock(&c->lock);
    c->want_tx = on;
    if (c->w && on)
        emu_fdw_enable(c->w, EMU_EV_WRITE);
    /* Turning it off is left to the engine (it knows whether the handshake
     * still needs write readiness): the next writable callback disables it. */
    emu_unlock(&c->lock);
}
