/* Queue pair: lifecycle, posting, attach/flush, completions, SRQ.
 * The transmit side is in qp_tx.c, the receive state machine in qp_rx.c;
 * docs/emu-datapath.md has the design. */
#include "emu/qp_internal.h"

#include "emu/engine.h"
#include "emu/log.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---------------------------------------------------------------- helpers */

uint32_t qp_sge_slice(const struct emu_sge *sge, uint32_t nsge, uint64_t off, uint64_t len,
                      struct iovec *iov, uint32_t max)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < nsge && len > 0 && n < max; i++) {
        uint64_t l = sge[i].len;
        if (off >= l) {
            off -= l;
            continue;
        }
        uint64_t take = l - off;
        if (take > len)
            take = len;
        iov[n].iov_base = (char *)sge[i].addr + off;
        iov[n].iov_len = (size_t)take;
        n++;
        len -= take;
        off = 0;
    }
    return n;
}

static uint32_t env_fpdu_max(void)
{
    static atomic_uint cached;
    unsigned v = atomic_load(&cached);
    if (v)
        return v;
    v = QP_TX_MULPDU_MAX;
    const char *s = getenv("SOFTDAT_FPDU_MAX");
    if (s && *s) {
        long l = strtol(s, NULL, 0);
        if (l >= 128 && l <= (long)QP_TX_MULPDU_MAX)
            v = (unsigned)l;
    }
    atomic_store(&cached, v);
    return v;
}

/* SOFTDAT_CRC_PLACEMENT=verified|cut-through (docs/user-guide.md): with
 * CRC on, whether RDMA Write payloads are placed as they arrive and their
 * CRC checked after, as siw does (cut-through: no copy, but a damaged
 * frame may have changed the region before its Terminate), or only once
 * checked (verified, the default: the region's owner may be watching it).
 * Read at each attach, so a test can switch it between connections. */
static bool env_cut_writes(void)
{
    static atomic_bool warned;
    const char *s = getenv("SOFTDAT_CRC_PLACEMENT");
    if (!s || !*s || strcmp(s, "verified") == 0)
        return false;
    if (strcmp(s, "cut-through") == 0)
        return true;
    if (!atomic_exchange(&warned, true))
        SD_WARN("qp", "SOFTDAT_CRC_PLACEMENT=%s not understood (verified|cut-through); "
                      "using verified", s);
    return false;
}

void qp_fatal(struct emu_qp *qp, bool remote, const struct emu_term *t, int err)
{
    if (atomic_exchange(&qp->fatal_sent, true))
        return;
    struct emu_qp_fatal f;
    memset(&f, 0, sizeof f);
    f.remote = remote;
    f.err = err;
    if (t) {
        f.have_term = true;
        f.term = *t;
        char buf[128];
        SD_INFO("qp", "%p %s Terminate: %s", (void *)qp, remote ? "received" : "sent",
                emu_term_describe(t, buf, sizeof buf));
    } else {
        SD_INFO("qp", "%p fatal: %s", (void *)qp, strerror(err));
    }
    if (qp->ops.fatal)
        qp->ops.fatal(qp->a.ctx, &f);
}

/* tx.lock held. Completes one send-queue WR (callback), then frees the
 * slots at the head that are done, so the ring stays in post order. */
void qp_sq_report(struct emu_qp *qp, uint32_t idx, enum emu_wc_status st, uint32_t len)
{
    struct sq_wqe *w = sq_at(qp, idx);
    if (w->st == WQ_DONE)
        return;
    w->st = WQ_DONE;
    struct emu_cqe cqe;
    memset(&cqe, 0, sizeof cqe);
    cqe.cookie = w->cookie;
    cqe.op = (enum emu_wr_op)w->op;
    cqe.status = st;
    cqe.byte_len = st == EMU_WC_SUCCESS ? len : 0;
    if (w->op == EMU_WR_WRITE_IMM)
        cqe.imm = w->imm;
    if (w->op == EMU_WR_BIND && st == EMU_WC_SUCCESS)
        cqe.bound_stag = w->sink_stag;
    if (qp->ops.send_done)
        qp->ops.send_done(qp->a.ctx, &cqe);
    while (qp->tx.sq_head != qp->tx.sq_tx && sq_at(qp, qp->tx.sq_head)->st == WQ_DONE)
        qp->tx.sq_head++;
}

/* tx.lock held. The peer has placed everything sent before SQ index upto
 * (a Read Response, which it sends only after processing what came
 * before the Request, or a Terminate about a later WR): the Sends and
 * Writes waiting for that complete, in post order. */
void qp_sq_confirm(struct emu_qp *qp, uint32_t upto)
{
    for (uint32_t i = qp->tx.sq_head; i != upto && i != qp->tx.sq_tx && qp->tx.unacked > 0; i++) {
        struct sq_wqe *w = sq_at(qp, i);
        if (w->st != WQ_ACK)
            continue;
        qp->tx.unacked--;
        qp_sq_report(qp, i, EMU_WC_SUCCESS, (uint32_t)w->len);
    }
}

/* tx.lock held. The confirmation a consumer thread's pass left for later
 * (rresp_finish): the Sends and Writes a probe's answer covered complete
 * now. A pass that reads the answer together with the peer's reply (every
 * ping-pong on an InfiniBand IA) returns to its application with the
 * reply alone; the completions of our own Sends, which nobody waits for
 * at that moment, follow at the thread's next pass or post, or when it
 * sleeps, or when the engine takes the QP back: the bound of the answers
 * a pass keeps (flush_deferred), which is why only a pass behind a parked
 * engine defers. */
void qp_sq_confirm_owed(struct emu_qp *qp)
{
    if (!atomic_load_explicit(&qp->tx.confirm_owed, memory_order_relaxed))
        return;
    atomic_store_explicit(&qp->tx.confirm_owed, false, memory_order_relaxed);
    /* A later Read's answer may have confirmed past it meanwhile. */
    if ((int32_t)(qp->tx.confirm_upto - qp->tx.sq_head) > 0)
        qp_sq_confirm(qp, qp->tx.confirm_upto);
}

/* ---- receive rings (a QP's own, an SRQ's): the lock held ---- */

static int ring_push(struct rq_ring *r, uint32_t max_sge, uint64_t cookie, uint32_t nsge,
                     const struct emu_sge *sge)
{
    if (nsge > max_sge || (nsge && !sge))
        return -EINVAL;
    if (r->tail - r->head >= r->cap)
        return -ENOSPC;
    struct rq_wqe *w = &r->ring[r->tail % r->cap];
    w->cookie = cookie;
    w->nsge = nsge;
    w->len = 0;
    for (uint32_t i = 0; i < nsge; i++) {
        w->sge[i] = sge[i];
        w->len += sge[i].len;
    }
    r->tail++;
    return 0;
}

static bool ring_pop(struct rq_ring *r, struct rq_wqe *out)
{
    if (r->tail == r->head)
        return false;
    *out = r->ring[r->head % r->cap];
    r->head++;
    return true;
}

/* rx.lock held. Next posted receive (private ring or SRQ). */
bool qp_pop_recv(struct emu_qp *qp, struct rq_wqe *out)
{
    struct emu_srq *s = qp->a.srq;
    if (s) {
        bool fire = false;
        emu_lock(&s->rq.lock);
        bool ok = ring_pop(&s->rq, out);
        if (ok && s->lw && s->lw_armed && s->rq.tail - s->rq.head < s->lw) {
            s->lw_armed = false;
            fire = true;
        }
        emu_unlock(&s->rq.lock);
        if (fire && s->lw_hit)
            s->lw_hit(s->ctx);
        return ok;
    }
    emu_lock(&qp->rq.lock);
    bool ok = ring_pop(&qp->rq, out);
    emu_unlock(&qp->rq.lock);
    return ok;
}

/* ---------------------------------------------------------------- lifecycle */

static void qp_free(struct emu_qp *qp)
{
    free(qp->irq.ent);
    free(qp->tx.tb.stage);
    free(qp->tx.sq);
    free(qp->tx.sq_sge);
    free(qp->orq.ent);
    free(qp->rx.pf);
    free(qp->rq.ring);
    free(qp);
}

int emu_qp_create(const struct emu_qp_attr *a, struct emu_qp **out)
{
    if (!a || !out || !a->ops || a->max_send_wr == 0 || a->max_sge > EMU_QP_MAX_SGE ||
        (!a->srq && a->max_recv_wr == 0))
        return -EINVAL;
    struct emu_qp *qp = calloc(1, sizeof *qp);
    if (!qp)
        return -ENOMEM;
    qp->a = *a;
    qp->ops = *a->ops;
    if (qp->a.max_sge == 0)
        qp->a.max_sge = 1;
    if (qp->a.max_message_size == 0)
        qp->a.max_message_size = UINT32_MAX;
    if (qp->a.max_rdma_size == 0)
        qp->a.max_rdma_size = UINT32_MAX;
    if (qp->a.rnr_timer_us == 0)
        qp->a.rnr_timer_us = EMU_QP_RNR_TIMER_US;
    if (qp->a.rnr_retry > EMU_QP_RNR_INFINITE)
        qp->a.rnr_retry = EMU_QP_RNR_INFINITE;
    qp->tx.sq_cap = a->max_send_wr;
    qp->tx.sq = calloc(qp->tx.sq_cap, sizeof *qp->tx.sq);
    qp->tx.sq_sge = calloc((size_t)qp->tx.sq_cap * qp->a.max_sge, sizeof *qp->tx.sq_sge);
    qp->orq.cap = qp->tx.sq_cap + QP_PROBES_MAX; /* every SQ entry a Read, plus the probes */
    qp->orq.ent = calloc(qp->orq.cap, sizeof *qp->orq.ent);
    qp->rx.pf = malloc(QP_PF_ALLOC);
    if (!a->srq) {
        qp->rq.cap = a->max_recv_wr;
        qp->rq.ring = calloc(qp->rq.cap, sizeof *qp->rq.ring);
    }
    if (!qp->tx.sq || !qp->tx.sq_sge || !qp->orq.ent || !qp->rx.pf || (!a->srq && !qp->rq.ring)) {
        qp_free(qp);
        return -ENOMEM;
    }
    for (uint32_t i = 0; i < qp->tx.sq_cap; i++)
        qp->tx.sq[i].sge = qp->tx.sq_sge + (size_t)i * qp->a.max_sge;
    emu_lock_init(&qp->tx.lock);
    emu_lock_init(&qp->rx.lock);
    emu_lock_init(&qp->rq.lock);
    qp->rx.fd = -1;
    qp->tx.read_seq = (uint32_t)(((uintptr_t)qp >> 4) & 0xFFFF);
    if (a->srq)
        atomic_fetch_add(&a->srq->users, 1);
    emu_qp_reset(qp);
    *out = qp;
    return 0;
}

void emu_qp_destroy(struct emu_qp *qp)
{
    if (!qp)
        return;
    emu_qp_flush(qp);
    if (qp->a.srq)
        atomic_fetch_sub(&qp->a.srq->users, 1);
    emu_lock_destroy(&qp->tx.lock);
    emu_lock_destroy(&qp->rx.lock);
    emu_lock_destroy(&qp->rq.lock);
    qp_free(qp);
}

/* Both locks held: nothing in flight in either read queue, nothing being
 * cut or written (reset, flush). */
static void tx_clear(struct emu_qp *qp)
{
    irq_clear(qp);
    qp->orq.reads_out = 0;
    qp->orq.head = qp->orq.tail = 0;
    qp->orq.probes_out = 0;
    qp->tx.unacked = 0;
    atomic_store_explicit(&qp->tx.confirm_owed, false, memory_order_relaxed);
    atomic_store_explicit(&qp->tx.probe_owed, false, memory_order_relaxed);
    atomic_store(&qp->tx.probe_look, false);
    qp->tx.probe_force = false;
    qp->tx.ack_tail = qp->tx.wanted_tail = qp->orq.covered = qp->tx.sq_tail;
    qp->tx.uncovered_bytes = 0;
    qp->tx.probe_was_large = false;
    qp->tx.held = 0;
    atomic_store_explicit(&qp->poll.posts_held, false, memory_order_relaxed);
    memset(&qp->tx.cur, 0, sizeof qp->tx.cur);
    qp_tx_batch_reset(&qp->tx.tb);
}

int emu_qp_reset(struct emu_qp *qp)
{
    if (!qp)
        return -EINVAL;
    emu_lock(&qp->rx.lock);
    emu_lock(&qp->tx.lock);
    if (qp->link.c) {
        emu_unlock(&qp->tx.lock);
        emu_unlock(&qp->rx.lock);
        return -EBUSY;
    }
    qp->tx.dead = qp->tx.disc_pending = qp->tx.disc_done = false;
    qp_set_want_tx(qp, false);
    qp->tx.hold = false;
    qp->tx.term_pending = false;
    for (int i = 0; i < EMU_QN_COUNT; i++)
        qp->tx.msn[i] = 1;
    tx_clear(qp);
    qp->orq.probes = 0;
    qp->tx.bytes = qp->tx.fpdus = 0;
    qp->tx.crc_in_place = qp->tx.crc_staged = 0;
    qp->link.ird = qp->a.ird;
    qp->link.ord = qp->a.ord;
    qp->link.caps = qp->a.rfc7306 ? EMU_CONN_CAPS_LOCAL : 0;
    emu_unlock(&qp->tx.lock);
    qp_rx_reset(qp);
    qp->rx.dead = false;
    qp->rx.err = 0;
    qp->rx.bytes = qp->rx.fpdus = qp->rx.small_fpdus = 0;
    qp->rx.cut_through = 0;
    qp->rx.rnr_stalls = 0;
    atomic_store(&qp->fatal_sent, false);
    emu_unlock(&qp->rx.lock);
    return 0;
}

/* ---------------------------------------------------------------- connection */

int emu_qp_attach(struct emu_qp *qp, struct emu_conn *c, uint64_t conn_id)
{
    if (!qp || !c)
        return -EINVAL;
    struct emu_conn_info info;
    int rc = emu_conn_get_info(c, &info);
    if (rc != 0)
        return rc;
    if (info.fd < 0)
        return -ENOTCONN;
    int dfd = info.fd;
    /* Room for a softdat peer's placement probes beyond the IRD. */
    uint32_t icap = info.ird + QP_PROBES_MAX;
    struct ird_ent *irq = calloc(icap, sizeof *irq);
    if (!irq)
        return -ENOMEM;
    /* CRC on: the transmit staging area (qp_tx.c), once per QP. */
    uint8_t *stage = NULL;
    if (info.crc) {
        stage = aligned_alloc(QP_TX_STAGE_ALIGN, QP_TX_STAGE_BYTES);
        if (!stage) {
            free(irq);
            return -ENOMEM;
        }
    }
    emu_lock(&qp->rx.lock);
    emu_lock(&qp->tx.lock);
    if (qp->link.c || qp->rx.attached) {
        emu_unlock(&qp->tx.lock);
        emu_unlock(&qp->rx.lock);
        free(irq);
        free(stage);
        return -EBUSY;
    }
    if (stage && !qp->tx.tb.stage) {
        qp->tx.tb.stage = stage;
        stage = NULL;
    }
    free(stage); /* a reused QP keeps its first one */
    qp->link.c = c;
    qp->link.wire = emu_conn_wire(c);
    qp->link.conn_id = conn_id;
    qp->link.crc = info.crc;
    qp->link.cut_writes = info.crc && env_cut_writes();
    qp->link.ird = info.ird;
    qp->link.ord = info.ord;
    free(qp->irq.ent);
    qp->irq.ent = irq;
    qp->irq.cap = icap;
    irq_clear(qp);
    qp->link.mulpdu = env_fpdu_max();
    /* A Read RTR used MSN 1 of queue 1 from the initiator (RFC 6581). */
    if (info.rtr == EMU_MPA_RTR_READ && info.initiator)
        qp->tx.msn[EMU_QN_READ_REQ] = 2;
    qp->tx.term_pending = qp->tx.dead = false;
    qp->tx.hold = info.recv_first;
    /* RFC 7306 opcodes only towards a peer that offered them in its
     * capability marker (wire.md §2.6), or when the owner says so. */
    qp->link.caps = qp->a.rfc7306 ? EMU_CONN_CAPS_LOCAL : info.caps & EMU_CONN_CAPS_LOCAL;
    emu_unlock(&qp->tx.lock);

    qp_rx_reset(qp);
    qp->rx.peer_probes = info.peer_probes;
    if (info.rtr == EMU_MPA_RTR_READ && !info.initiator)
        qp->rx.ddp.q[EMU_QN_READ_REQ].msn = 2;
    qp->rx.release_tx = info.recv_first;
    qp->rx.fd = dfd;
    qp->rx.attached = true;
    atomic_store(&qp->poll.off, false);
    atomic_store(&qp->poll.until_us, 0);
    atomic_store(&qp->poll.engine_parked, false);
    /* An RNR stall looks again every rnr_timer_us (IB's RNR NAK timer). */
    emu_conn_set_rx_retry(c, qp->a.rnr_timer_us);
    qp->rx.dead = false;
    qp->rx.err = 0;
    emu_unlock(&qp->rx.lock);

    emu_lock(&qp->tx.lock);
    qp_tx_pump(qp);
    emu_unlock(&qp->tx.lock);
    SD_DBG("qp", "%p attached: crc %d ird %u ord %u fpdu %u rfc7306 caps %#x", (void *)qp,
           info.crc, info.ird, info.ord, qp->link.mulpdu, qp->link.caps);
    return 0;
}

void emu_qp_detach(struct emu_qp *qp)
{
    if (!qp)
        return;
    emu_lock(&qp->rx.lock);
    qp->rx.fd = -1;
    emu_unlock(&qp->rx.lock);
}

void emu_qp_unlink(struct emu_qp *qp)
{
    if (!qp)
        return;
    /* Both locks: the link is read under either (struct qp_link). */
    emu_lock(&qp->rx.lock);
    emu_lock(&qp->tx.lock);
    qp->rx.fd = -1;
    qp->link.c = NULL;
    qp->link.wire = NULL;
    emu_unlock(&qp->tx.lock);
    emu_unlock(&qp->rx.lock);
}

/* The polling thread's clock (emu_now_us) when its last polling pass or
 * send post ended (0: it never polled). */
static _Thread_local uint64_t tl_poll_idle_from;

static void flush_deferred_within(struct emu_qp *qp, bool force, uint32_t probe_wait_us);

static void flush_deferred(struct emu_qp *qp, bool force)
{
    flush_deferred_within(qp, force, force ? 0 : QP_PROBE_DEFER_US);
}

/* emu_qp_progress_many: the pass right after one that read something is
 * skipped: it would find the sockets just drained, and in a polling loop
 * it sits between the data placed and the application seeing it (Open
 * MPI: its next dequeue runs before it looks at its eager-RDMA memory).
 * Once only: the following pass looks again. A thread woken by its
 * sockets (emu_qp_sleep_woken) does not skip. */
static _Thread_local bool tl_just_read;

void emu_qp_sleep_woken(void)
{
    tl_just_read = false;
}

/* Sends continued by consumer passes (consumer_tx), process-wide. */
static atomic_uint_fast64_t g_consumer_tx;

uint64_t emu_qp_consumer_tx_count(void)
{
    return atomic_load_explicit(&g_consumer_tx, memory_order_relaxed);
}

/* Frames this thread's passes have processed (emu_qp_thread_rx_fpdus),
 * and of them those with a small payload (emu_qp_thread_rx_small_fpdus). */
static _Thread_local uint64_t tl_rx_fpdus, tl_rx_small;

uint64_t emu_qp_thread_rx_fpdus(void)
{
    return tl_rx_fpdus;
}

uint64_t emu_qp_thread_rx_small_fpdus(void)
{
    return tl_rx_small;
}

/* Identifies the polling thread (struct qp_poll.thread). */
static _Thread_local char tl_poll_self;

static _Thread_local uint64_t tl_pass_now;

void emu_qp_poll_pass_end(void)
{
    tl_poll_idle_from = emu_now_us();
    tl_pass_now = 0;
}

void emu_qp_poll_pass_end_idle(uint64_t started_us)
{
    tl_poll_idle_from = started_us;
    tl_pass_now = 0;
}

/* A post's transmit is work in our own code, not time away from polling. */
static void poll_note_busy(void)
{
    if (tl_poll_idle_from != 0)
        tl_poll_idle_from = emu_now_us();
}

/* The engine looks at this QP's lease now (emu_qp_rx), not at its next
 * bytes or timer. */
static void kick_engine(struct emu_qp *qp)
{
    emu_lock(&qp->tx.lock); /* the link is stable under either lock */
    if (qp->link.c)
        emu_conn_rx_kick(qp->link.c);
    emu_unlock(&qp->tx.lock);
}

/* Only a consumer that keeps polling gets the lease: passes less than
 * QP_POLL_GAP_US apart for QP_POLL_HOT_US. One that polls the EVD for a
 * moment and then something else (its memory, say) keeps the engine.
 * "Apart" is the time the polling thread spent outside our passes and
 * posts: a post whose sendmsg takes 30 µs (every MPI message) is no gap.
 * Measured from pass start to pass start, Open MPI's ranks lost the lease
 * after every post, and the engine thread woke for every frame, fighting
 * them for the CPUs (three times the context switches, 3-4× the latency on
 * a loaded host). (The thread's own CPU clock would also forgive
 * preemption, but reading it is a system call: a fifth of a polling
 * loop's time.) */
void emu_qp_poll_lease(struct emu_qp *qp, uint32_t usec, uint64_t now)
{
    if (!qp || atomic_load_explicit(&qp->poll.off, memory_order_relaxed))
        return;
    tl_pass_now = now;
    uintptr_t me = (uintptr_t)&tl_poll_self;
    /* Read first: the same thread's every pass would otherwise pay a
     * locked exchange. */
    bool same = atomic_load_explicit(&qp->poll.thread, memory_order_relaxed) == me ||
                atomic_exchange_explicit(&qp->poll.thread, me, memory_order_relaxed) == me;
    if (!same || tl_poll_idle_from == 0 || now - tl_poll_idle_from > QP_POLL_GAP_US)
        atomic_store_explicit(&qp->poll.since_us, now, memory_order_relaxed);
    if (now - atomic_load_explicit(&qp->poll.since_us, memory_order_relaxed) < QP_POLL_HOT_US)
        return;
    uint64_t was = atomic_load_explicit(&qp->poll.until_us, memory_order_relaxed);
    atomic_store_explicit(&qp->poll.until_us, now + usec, memory_order_relaxed);
    /* A lease begins: the engine parks behind it now (leased_to_consumer)
     * rather than at the next bytes, which this thread usually reads
     * first: until it parks, every arrival also wakes the engine, on a CPU
     * the poller may need, and what waits for a parked engine's bound
     * (answers and probes kept for later bytes: flush_deferred) goes at
     * once. */
    if (was <= now && !atomic_load_explicit(&qp->poll.engine_parked, memory_order_relaxed))
        kick_engine(qp);
}

/* A parked engine looks at the lease again now, not when its timer says. */
static void kick_parked(struct emu_qp *qp)
{
    if (atomic_load_explicit(&qp->poll.engine_parked, memory_order_relaxed))
        kick_engine(qp);
}

void emu_qp_poll_release(struct emu_qp *qp)
{
    if (!qp || atomic_load_explicit(&qp->poll.until_us, memory_order_relaxed) == 0)
        return;
    atomic_store_explicit(&qp->poll.until_us, 0, memory_order_relaxed);
    atomic_store_explicit(&qp->poll.thread, 0, memory_order_relaxed); /* the next poller earns anew */
    kick_parked(qp);
}

void emu_qp_poll_release_mine(struct emu_qp *qp)
{
    if (qp && atomic_load_explicit(&qp->poll.thread, memory_order_relaxed) == (uintptr_t)&tl_poll_self)
        emu_qp_poll_release(qp);
}

int emu_qp_sleep_fd(struct emu_qp *qp, uint64_t until_us)
{
    if (!qp || atomic_load_explicit(&qp->poll.off, memory_order_relaxed) ||
        atomic_load_explicit(&qp->poll.rx_held, memory_order_relaxed))
        return -1;
    int fd = atomic_load_explicit(&qp->rx.fd, memory_order_relaxed);
    if (fd < 0)
        return -1;
    flush_deferred(qp, true);
    atomic_store_explicit(&qp->poll.thread, (uintptr_t)&tl_poll_self, memory_order_relaxed);
    atomic_store_explicit(&qp->poll.until_us, until_us, memory_order_relaxed);
    return fd;
}

void emu_qp_poll_trim(struct emu_qp *qp, uint64_t until_us)
{
    if (!qp || atomic_load_explicit(&qp->poll.until_us, memory_order_relaxed) <= until_us)
        return;
    atomic_store_explicit(&qp->poll.until_us, until_us, memory_order_relaxed);
    kick_parked(qp);
}

uint64_t emu_qp_poll_lease_left_us(struct emu_qp *qp)
{
    uint64_t until = atomic_load_explicit(&qp->poll.until_us, memory_order_relaxed);
    uint64_t now = emu_now_us();
    return until > now ? until - now : 0;
}

/* Engine thread, for connection c: a consumer polls this QP. Pause
 * reading until its lease runs out (it may renew it meanwhile: then pause
 * again). No lock: the engine's own look at the lease must not wait for
 * the consumer's sendmsg under tx.lock. A lease found renewed at the end
 * of the last pause means the consumer keeps polling: each such look
 * doubles the next pause, up to QP_LEASE_LOOK_MAX_US. Every look is a
 * timer wake-up of the engine that preempts a spinning consumer on a busy
 * machine (Open MPI's 8 B ping-pong: ~2,000 a second per rank, each
 * ~90 µs of one message's latency on the 2-vCPU VM). */
static bool leased_to_consumer(struct emu_qp *qp, struct emu_conn *c)
{
    bool again = atomic_load_explicit(&qp->poll.engine_parked, memory_order_relaxed);
    uint64_t until = atomic_load_explicit(&qp->poll.until_us, memory_order_relaxed);
    uint64_t now = until != 0 ? emu_now_us() : 0;
    if (c == NULL || until == 0 || now >= until) {
        qp->poll.looks = 0;
        return false;
    }
    if (!again)
        qp->poll.looks = 0;
    else if (qp->poll.looks < 16)
        qp->poll.looks++;
    uint64_t pause = until - now + 1;
    uint64_t backoff = pause << qp->poll.looks;
    if (backoff > QP_LEASE_LOOK_MAX_US)
        backoff = QP_LEASE_LOOK_MAX_US;
    emu_conn_set_rx_retry(c, (uint32_t)(backoff > pause ? backoff : pause));
    return true;
}

/* The clock at the start of the calling thread's polling pass or post
 * (tl_pass_now, set by emu_qp_poll_lease and emu_qp_post_send; 0 outside
 * them): the deferral bounds and leases it is compared with are ten
 * microseconds or more, and a pass that finds nothing or a post up to its
 * sendmsg is a fraction of one, so a spinning thread reads the clock once
 * a pass, not once a QP, and a post once (it was three times, 0.1 µs of
 * each message's latency). */
uint64_t qp_clock(void)
{
    return tl_pass_now != 0 ? tl_pass_now : emu_now_us();
}

/* tl_pass_now is a post's: only until its first write (a large one takes
 * far longer than the bounds above). */
static _Thread_local bool tl_post_clock;

void qp_clock_wrote(void)
{
    if (tl_post_clock) {
        tl_post_clock = false;
        tl_pass_now = 0;
    }
}

bool qp_engine_parked(struct emu_qp *qp)
{
    return atomic_load_explicit(&qp->poll.engine_parked, memory_order_relaxed) &&
           atomic_load_explicit(&qp->poll.until_us, memory_order_relaxed) > qp_clock();
}

/* now - then, 0 if then is later (stamped after the pass began). */
static uint64_t us_since(uint64_t now, uint64_t then)
{
    return now > then ? now - then : 0;
}

uint64_t qp_us_since_post(struct emu_qp *qp, uint64_t now)
{
    return us_since(now, atomic_load_explicit(&qp->poll.last_post_us, memory_order_relaxed));
}

/* Send what waits for this QP's next transmit pass: posts held for a
 * batch (emu_qp_post_send), at once; probe answers kept for the next bytes
 * this QP sends, now (force), or once they have waited QP_DEFER_US for
 * such bytes, or at once on a QP that has not posted for
 * QP_DEFER_RECENT_US; a probe only quiet WRs wait for (probe_may_wait,
 * qp_tx.c) once it has waited probe_wait_us (0: now; flush_deferred:
 * QP_PROBE_DEFER_US, or now when forced). */
static void flush_deferred_within(struct emu_qp *qp, bool force, uint32_t probe_wait_us)
{
    /* Polled without pause: look before taking the lock. */
    bool posts = atomic_load_explicit(&qp->poll.posts_held, memory_order_relaxed);
    bool answers = atomic_load_explicit(&qp->irq.deferred, memory_order_relaxed);
    bool owed = atomic_load_explicit(&qp->tx.confirm_owed, memory_order_relaxed);
    /* One clock reading for the checks below: outside a pass or a post
     * (the engine) each qp_clock() is a clock read. */
    uint64_t now = 0;
    if (answers && !force && !posts) {
        /* Only a QP that sends now and then (a ping-pong's replies) is
         * worth waiting for: a pure receiver's answers go at once, or the
         * peer's Writes complete QP_DEFER_US later. */
        now = qp_clock();
        if (us_since(now, atomic_load_explicit(&qp->irq.deferred_us, memory_order_relaxed)) < QP_DEFER_US &&
            qp_us_since_post(qp, now) < QP_DEFER_RECENT_US)
            answers = false;
    }
    bool probe = atomic_load_explicit(&qp->tx.probe_owed, memory_order_acquire);
    if (probe && probe_wait_us != 0) {
        if (now == 0)
            now = qp_clock();
        if (us_since(now, atomic_load_explicit(&qp->tx.probe_owed_us, memory_order_relaxed)) < probe_wait_us)
            probe = false;
    }
    if (!posts && !answers && !owed && !probe)
        return;
    emu_lock(&qp->tx.lock);
    qp_sq_confirm_owed(qp);
    probe = probe && atomic_load_explicit(&qp->tx.probe_owed, memory_order_relaxed);
    if (((posts || answers) &&
         (qp->tx.held || atomic_load_explicit(&qp->irq.deferred, memory_order_relaxed))) ||
        probe) {
        qp->tx.probe_force = probe;
        if (!qp->tx.want_tx)
            qp_tx_pump(qp);
        qp->tx.probe_force = false;
    }
    emu_unlock(&qp->tx.lock);
}

/* The engine's pass (rx.lock held). A failure is returned to the conn,
 * which breaks the connection; an RNR stall pauses reading and looks again
 * after the RNR timer. */
static int engine_rx_run(struct emu_qp *qp, int fd)
{
    int rc = qp_rx_run(qp, fd);
    if (rc != QP_RX_STALL)
        return rc;
    if (qp->link.c) /* stable under rx.lock (struct qp_link) */
        emu_conn_set_rx_retry(qp->link.c, qp->a.rnr_timer_us);
    return EMU_RX_PAUSE;
}

/* A consumer thread's pass (rx.lock held). It has no rx hook to return an
 * error to: a protocol failure (qp_rx_fail ran, rx.dead is set) asks the
 * conn to fail, a socket error marks the receive side dead (the engine
 * reports it). An RNR stall is left to the engine, once per stall: the
 * engine may have no readable bytes to wake it. */
static int consumer_rx_run(struct emu_qp *qp)
{
    qp->rx.consumer_pass = true;
    qp->rx.consumer_runs++;
    int rc = qp_rx_run(qp, qp->rx.fd);
    qp->rx.consumer_pass = false;
    if (rc == QP_RX_STALL) {
        if (!qp->rx.rnr_kicked) {
            qp->rx.rnr_kicked = true;
            if (qp->link.c)
                emu_conn_rx_kick(qp->link.c);
        }
        return EMU_RX_OK;
    }
    if (rc < 0 && qp->rx.dead) {
        if (qp->link.c)
            emu_conn_fail(qp->link.c, -rc);
    } else if (rc < 0) {
        qp->rx.dead = true;
        qp->rx.err = rc;
    }
    return rc;
}

/* (tx.lock) A probe only quiet WRs wait for became owed with no lease
 * (probe_may_wait): its bound is the engine's timer. Ask the engine for it
 * unless it has it (or the request is on its way). */
void qp_probe_look(struct emu_qp *qp)
{
    if (atomic_exchange(&qp->tx.probe_look, true))
        return;
    if (qp->link.c == NULL || emu_conn_rx_kick(qp->link.c) != 0)
        atomic_store(&qp->tx.probe_look, false);
}

/* Engine thread, at the end of its pass (rc: the pass's answer): the
 * timer that sends an owed probe QP_PROBE_DEFER_ENGINE_US after it became
 * owed, if no post took it first. While the hook's timer is due within
 * that bound anyway, a probe owed later needs no kick: that run looks at
 * it (a ping-pong with every 8th WR signalled kicked the engine once per 8
 * messages). The flag is cleared before the probe is looked at, and
 * qp_probe_look sets it after the probe became owed (both sequentially
 * consistent): one of the two sees the other, so an owed probe never goes
 * without a timer. Behind a lease the consumer's passes and the lease's
 * end are the bound. */
static void engine_probe_look(struct emu_qp *qp, struct emu_conn *c, int rc)
{
    atomic_store(&qp->tx.probe_look, false);
    if (rc != EMU_RX_OK)
        return;
    if (!atomic_load(&qp->tx.probe_owed)) {
        if (emu_conn_rx_again_within(c, QP_PROBE_DEFER_ENGINE_US))
            atomic_store(&qp->tx.probe_look, true);
        return;
    }
    atomic_store(&qp->tx.probe_look, true);
    uint64_t age = us_since(emu_now_us(), atomic_load_explicit(&qp->tx.probe_owed_us, memory_order_relaxed));
    emu_conn_rx_again_after(c, age < QP_PROBE_DEFER_ENGINE_US ? (uint32_t)(QP_PROBE_DEFER_ENGINE_US - age) : 1);
}

int emu_qp_rx(struct emu_qp *qp, struct emu_conn *c, int fd)
{
    /* Kept answers and held posts go now; an owed probe only once it is
     * QP_PROBE_DEFER_ENGINE_US old: the peer's next message (a ping-pong's
     * reply) does not send it alone, the next post or this timer does. */
    flush_deferred_within(qp, true, QP_PROBE_DEFER_ENGINE_US);
    if (leased_to_consumer(qp, c)) {
        atomic_store_explicit(&qp->poll.engine_parked, true, memory_order_relaxed);
        return EMU_RX_PAUSE;
    }
    /* Taking the QP back. What a thread deferred because it saw the
     * engine parked (a pass's kept answer or owed confirmation, under
     * rx.lock; a post's held WRs or owed probe, under tx.lock) may have
     * been deferred after the flush above: once both locks have been
     * passed, every such thread is done and any later one sees the engine
     * unparked and defers nothing, so one more flush finds it all. Left,
     * it waited for a thread that may be asleep on a condition variable,
     * and the engine for bytes that never came: dapltest's two threads
     * each waited for the other's next message. (Only the engine writes
     * engine_parked on a live QP.) */
    bool was_parked = atomic_load_explicit(&qp->poll.engine_parked, memory_order_relaxed);
    if (was_parked) {
        atomic_store_explicit(&qp->poll.engine_parked, false, memory_order_relaxed);
        emu_lock(&qp->tx.lock);
        emu_unlock(&qp->tx.lock);
    }
    emu_lock(&qp->rx.lock);
    if (was_parked)
        flush_deferred(qp, true);
    int rc;
    if (qp->rx.dead)
        rc = qp->rx.err ? qp->rx.err : -EPROTO;
    else if (!qp->rx.attached)
        rc = EMU_RX_OK;
    else
        rc = engine_rx_run(qp, fd);
    /* A probe answer kept for the application's reply goes
     * QP_DEFER_ENGINE_US from now if no post took it (rreq_finish, qp_rx_op.c): this
     * hook runs again then and flushes first. */
    bool kept = qp->rx.answer_kept;
    qp->rx.answer_kept = false;
    emu_unlock(&qp->rx.lock);
    if (kept && rc != EMU_RX_PAUSE)
        emu_conn_rx_again_after(c, QP_DEFER_ENGINE_US);
    engine_probe_look(qp, c, rc);
    return rc;
}

/* (tx.lock) The socket has room again: the send side goes on. */
static void tx_resume(struct emu_qp *qp)
{
    qp_set_want_tx(qp, false);
    if (qp->link.c)
        emu_conn_want_tx(qp->link.c, false);
    qp_tx_pump(qp);
}

void emu_qp_tx(struct emu_qp *qp)
{
    emu_lock(&qp->tx.lock);
    tx_resume(qp);
    emu_unlock(&qp->tx.lock);
}

#define QP_POLL_MANY 16u  /* emu_qp_progress_many: more QPs than this, one by one */

static int progress_rx(struct emu_qp *qp);
static void consumer_tx(struct emu_qp *qp, bool writable);

int emu_qp_progress_many(struct emu_qp *const *qps, unsigned n)
{
    /* Every 1024th pass runs every QP whatever poll says: a safety net for a
     * QP whose readiness poll cannot see (its socket changed under us). It
     * costs a recv(2) per QP, so not too often: a spinning consumer makes
     * millions of passes. */
    static _Thread_local unsigned tick;
    if (tl_just_read) {
        tl_just_read = false;
        return 0;
    }
    int made = 0;
    /* One QP whose send side waits for room: one poll(2) for both
     * directions, rather than a recv(2) that takes the socket lock (and
     * meets the peer's ACKs there) and a poll(2) for room on every pass of
     * a large transfer. */
    bool one_waiting = n == 1 && atomic_load_explicit(&qps[0]->poll.tx_waiting, memory_order_relaxed);
    if ((n < 2 && !one_waiting) || n > QP_POLL_MANY || (++tick & 1023u) == 0) {
        for (unsigned i = 0; i < n; i++)
            made += emu_qp_progress(qps[i]);
        tl_just_read = made > 0;
        return made;
    }
    struct pollfd pfd[QP_POLL_MANY];
    for (unsigned i = 0; i < n; i++) {
        pfd[i].fd = atomic_load_explicit(&qps[i]->rx.fd, memory_order_relaxed);
        pfd[i].events = POLLIN;
        if (atomic_load_explicit(&qps[i]->poll.tx_waiting, memory_order_relaxed))
            pfd[i].events |= POLLOUT;
        pfd[i].revents = 0;
    }
    /* A stale descriptor costs at most a useless emu_qp_progress, which
     * checks the QP's own state under its lock. */
    int r = poll(pfd, n, 0);
    bool readable = false;
    for (unsigned i = 0; i < n && r > 0; i++)
        readable = readable || (pfd[i].revents & ~POLLOUT) != 0;
    tl_just_read = readable; /* room to write is not something read */
    for (unsigned i = 0; i < n; i++) {
        if (r < 0 || (pfd[i].revents & ~POLLOUT) != 0 ||
            atomic_load_explicit(&qps[i]->poll.rx_held, memory_order_relaxed))
            made += progress_rx(qps[i]);
        else
            flush_deferred(qps[i], false);
        if (r > 0 && pfd[i].revents == POLLOUT)
            consumer_tx(qps[i], true);
    }
    return made;
}

/* A consumer pass continues a send side that waits for socket space
 * (qp_tx_pump met EAGAIN), as the engine's write watch would: a thread that
 * polls keeps a large transfer moving instead of waiting for the engine
 * thread to be scheduled beside it (two spinning programs on two CPUs).
 * The engine's watch stays as it is; whoever comes first writes.
 * writable: the caller's poll(2) already said so. */
static void consumer_tx(struct emu_qp *qp, bool writable)
{
    if (!atomic_load_explicit(&qp->poll.tx_waiting, memory_order_relaxed))
        return;
    if (!writable) {
        struct pollfd p = {.fd = atomic_load_explicit(&qp->rx.fd, memory_order_relaxed),
                           .events = POLLOUT};
        if (p.fd < 0 || poll(&p, 1, 0) != 1 || p.revents != POLLOUT)
            return; /* errors and hang-ups are the engine's to report */
    }
    if (!emu_trylock(&qp->tx.lock))
        return;
    if (qp->tx.want_tx) {
        tx_resume(qp);
        atomic_fetch_add_explicit(&g_consumer_tx, 1, memory_order_relaxed);
    }
    emu_unlock(&qp->tx.lock);
}

int emu_qp_progress(struct emu_qp *qp)
{
    if (!qp)
        return 0;
    int n = progress_rx(qp);
    consumer_tx(qp, false);
    return n;
}

static int progress_rx(struct emu_qp *qp)
{
    flush_deferred(qp, false);
    if (!emu_trylock(&qp->rx.lock))
        return 0;
    int n = 0;
    if (qp->rx.attached && !qp->rx.dead && qp->rx.fd >= 0) {
        uint32_t before = qp->rx.ncomp;
        uint64_t fpdus = qp->rx.fpdus, small = qp->rx.small_fpdus;
        int rc = consumer_rx_run(qp);
        n = (int)(qp->rx.ncomp - before);
        tl_rx_fpdus += qp->rx.fpdus - fpdus;
        tl_rx_small += qp->rx.small_fpdus - small;
        if (rc != EMU_RX_OK && !atomic_exchange(&qp->poll.off, true)) {
            /* End of stream or an error: the engine reports it (it may be
             * parked by a lease), and no lease is given from now on. */
            atomic_store_explicit(&qp->poll.until_us, 0, memory_order_relaxed);
            if (qp->link.c) /* stable under rx.lock (struct qp_link) */
                emu_conn_rx_kick(qp->link.c);
        }
    }
    emu_unlock(&qp->rx.lock);
    return n;
}

/* Also waits for placement confirmations: a graceful disconnect right
 * after a Send must not flush a Send the peer is about to receive. */
static bool tx_idle(const struct emu_qp *qp)
{
    return qp->tx.cur.kind == TXK_NONE && qp->tx.tb.rec_pos == qp->tx.tb.nrec &&
           qp->tx.sq_tx == qp->tx.sq_tail && irq_empty(qp) && qp->tx.unacked == 0;
}

/* One consumer-thread pass over the bytes that have arrived. Returns
 * whether the connection still reads; *placed and *confirmed: the peer's
 * messages placed and confirmed to it so far; *probes: the peer confirms
 * by probes (a softdat peer with InfiniBand semantics). */
static bool quiesce_pass(struct emu_qp *qp, uint32_t *placed, uint32_t *confirmed, bool *probes)
{
    emu_lock(&qp->rx.lock);
    bool live = qp->rx.attached && !qp->rx.dead && qp->rx.fd >= 0;
    if (live)
        (void)consumer_rx_run(qp);
    live = live && !qp->rx.dead;
    *placed = qp->rx.placed;
    *confirmed = qp->rx.confirmed;
    *probes = qp->rx.peer_probes;
    emu_unlock(&qp->rx.lock);
    flush_deferred(qp, true); /* answers kept for the next bytes sent, an owed probe: now */
    return live;
}

/* Answers to the peer's Reads not yet handed to the socket. */
static bool answers_queued(struct emu_qp *qp)
{
    emu_lock(&qp->tx.lock);
    bool q = !qp->tx.dead && qp->link.c != NULL && !irq_empty(qp);
    emu_unlock(&qp->tx.lock);
    return q;
}

/* Our own Sends/Writes still wait for the answer to a probe. */
static bool own_unconfirmed(struct emu_qp *qp)
{
    emu_lock(&qp->tx.lock);
    bool w = !qp->tx.dead && qp->link.c != NULL && qp->tx.unacked > 0;
    emu_unlock(&qp->tx.lock);
    return w;
}

/* A peer with InfiniBand semantics completes its Sends and Writes only once
 * a zero-length Read behind them is answered, and flushes them if the
 * connection ends first. An HCA acknowledges a message before its receiver
 * sees the completion, so a receiver that closes right after consuming its
 * last message has still confirmed it. Here that Read may be a moment
 * behind the data (the peer holds it while QP_PROBES_MAX are out): wait for
 * it, bounded by QP_CONFIRM_WAIT_US, and for its answer to reach the socket,
 * before the caller closes. The same holds the other way: our quiet WRs'
 * probe, kept back for a later post (probe_may_wait, qp_tx.c), goes now,
 * and the close waits for its answer too, as an HCA's acknowledgment of
 * those messages would long have come. */
void emu_qp_quiesce(struct emu_qp *qp)
{
    if (!qp)
        return;
    bool mine = atomic_load_explicit(&qp->tx.probe_owed, memory_order_relaxed);
    uint32_t want, confirmed;
    bool probes;
    bool live = quiesce_pass(qp, &want, &confirmed, &probes);
    bool theirs = probes && ((int32_t)(want - confirmed) > 0 || answers_queued(qp));
    if (!live || (!theirs && !(mine && own_unconfirmed(qp))))
        return;
    uint64_t deadline = emu_now_us() + QP_CONFIRM_WAIT_US;
    for (;;) {
        uint32_t placed;
        live = quiesce_pass(qp, &placed, &confirmed, &probes);
        bool waiting = live && ((probes && (int32_t)(want - confirmed) > 0) ||
                                (mine && own_unconfirmed(qp)));
        if ((!waiting && !(probes && answers_queued(qp))) || emu_now_us() >= deadline)
            break;
        struct timespec ts = {0, 50 * 1000};
        nanosleep(&ts, NULL);
    }
}

int emu_qp_disconnect(struct emu_qp *qp, bool graceful)
{
    if (!qp)
        return -EINVAL;
    emu_qp_quiesce(qp);
    emu_lock(&qp->tx.lock);
    struct emu_conn *c = qp->link.c;
    int rc = 0;
    if (!c) {
        rc = -ENOTCONN;
    } else if (!graceful) {
        qp->tx.disc_pending = qp->tx.disc_done = true;
        rc = emu_conn_disconnect(c, false);
    } else {
        qp->tx.disc_pending = true;
        qp_sq_confirm_owed(qp);
        if ((qp->tx.held || atomic_load_explicit(&qp->tx.probe_owed, memory_order_relaxed)) && !qp->tx.want_tx)
            qp_tx_pump(qp); /* held posts and an owed probe go first; the pump ends with the disconnect */
        if (!qp->tx.disc_done && (tx_idle(qp) || qp->tx.dead)) {
            qp->tx.disc_done = true;
            rc = emu_conn_disconnect(c, true);
        }
    }
    emu_unlock(&qp->tx.lock);
    return rc;
}

static void flush_recv(struct emu_qp *qp, uint64_t cookie, enum emu_wc_status st)
{
    struct emu_cqe cqe;
    memset(&cqe, 0, sizeof cqe);
    cqe.cookie = cookie;
    cqe.op = EMU_WC_RECV;
    cqe.status = st;
    if (qp->ops.recv_done)
        qp->ops.recv_done(qp->a.ctx, &cqe);
}

void emu_qp_flush(struct emu_qp *qp)
{
    if (!qp)
        return;
    emu_lock(&qp->rx.lock);
    qp_rx_deliver_pending(qp);
    qp->rx.attached = false;
    qp->rx.fd = -1;
    emu_mem_put(&qp->rx.wref);
    if (qp->rx.have_recv) {
        qp->rx.have_recv = false;
        qp->rx.ncomp++;
        flush_recv(qp, qp->rx.cur_recv.cookie,
                   qp->rx.recv_err_set ? qp->rx.recv_err : EMU_WC_FLUSHED);
    }
    qp->rx.recv_err_set = false;
    if (qp->rx.have_imm_recv) {
        qp->rx.have_imm_recv = false;
        qp->rx.ncomp++;
        flush_recv(qp, qp->rx.imm_recv.cookie, EMU_WC_FLUSHED);
    }
    qp->rx.rnr_since = 0;
    if (!qp->a.srq) {
        emu_lock(&qp->rq.lock);
        struct rq_wqe r;
        while (ring_pop(&qp->rq, &r))
            flush_recv(qp, r.cookie, EMU_WC_FLUSHED);
        emu_unlock(&qp->rq.lock);
    }
    if (!qp->rx.dead) {
        qp->rx.dead = true;
        qp->rx.err = -ENOTCONN;
    }

    emu_lock(&qp->tx.lock);
    qp_sq_confirm_owed(qp); /* the peer did place those */
    qp->link.c = NULL;
    qp->tx.dead = true;
    /* Every slot not yet reported, in post order. sq_tx may lag (never
     * started): report up to the tail. */
    qp->tx.sq_tx = qp->tx.sq_tail;
    for (uint32_t i = qp->tx.sq_head; i != qp->tx.sq_tail; i++) {
        struct sq_wqe *w = sq_at(qp, i);
        if (w->st != WQ_DONE)
            qp_sq_report(qp, i, w->has_err ? w->err : EMU_WC_FLUSHED, 0);
    }
    qp->tx.sq_head = qp->tx.sq_tail;
    uint32_t itail = atomic_load_explicit(&qp->irq.tail, memory_order_relaxed);
    for (uint32_t i = atomic_load_explicit(&qp->irq.head, memory_order_relaxed); i != itail; i++)
        emu_mem_put(&qp->irq.ent[i % qp->irq.cap].ref);
    tx_clear(qp);
    emu_unlock(&qp->tx.lock);
    emu_unlock(&qp->rx.lock);
}

/* ---------------------------------------------------------------- posting */

/* (tx.lock) Doorbell batching. A small WR posted behind
 * QP_HOLD_INFLIGHT unfinished ones by the thread that holds the QP's
 * polling lease (the engine parked behind it) waits for that thread's
 * next pass, which sends every held WR in one writev: a program that
 * keeps a window of operations in flight pays one system call per batch,
 * not per operation, as an RNIC's doorbell starts work the adapter then
 * fetches in bulk. A lone post (a ping-pong) never waits, nor does one
 * from another thread (the lease holder may be asleep in poll(2) for a
 * long chunk). The poller must come back to reap its completions; if it
 * does not, the engine flushes the held WRs when it looks at the lease
 * again (it runs out SOFTDAT_POLL_LEASE_US after the last pass).
 * QP_HOLD_MAX held WRs are sent by the next post. Quiet WRs that only
 * wait for an owed probe, and WRs whose confirmation came with the reply
 * this post answers (confirm_owed), are done as far as anyone waits: not
 * in flight (else a ping-pong with suppressed completions would hold its
 * replies). */
static bool post_may_wait(struct emu_qp *qp, const struct sq_wqe *w)
{
    uint32_t head = qp->tx.sq_head;
    if (atomic_load_explicit(&qp->tx.confirm_owed, memory_order_relaxed) &&
        (int32_t)(qp->tx.confirm_upto - head) > 0)
        head = qp->tx.confirm_upto; /* answered: confirmed right after this post */
    uint32_t inflight = qp->tx.sq_tail - head;
    if (atomic_load_explicit(&qp->tx.probe_owed, memory_order_relaxed)) {
        int32_t quiet = (int32_t)(qp->tx.ack_tail - qp->orq.covered);
        if (quiet > 0 && (uint32_t)quiet < inflight)
            inflight -= (uint32_t)quiet;
    }
    return w->len <= QP_HOLD_BYTES && qp->tx.held + 1 < QP_HOLD_MAX && inflight > QP_HOLD_INFLIGHT &&
           atomic_load_explicit(&qp->poll.thread, memory_order_relaxed) ==
               (uintptr_t)&tl_poll_self &&
           qp_engine_parked(qp);
}

int emu_qp_post_send(struct emu_qp *qp, const struct emu_wr *wr)
{
    if (!qp || !wr || wr->nsge > qp->a.max_sge || (wr->nsge && !wr->sge))
        return -EINVAL;
    switch (wr->op) {
    case EMU_WR_SEND:
    case EMU_WR_WRITE:
    case EMU_WR_READ:
    case EMU_WR_BIND:
        break;
    case EMU_WR_WRITE_IMM:
        break;
    case EMU_WR_FETCH_ADD:
    case EMU_WR_CMP_SWAP:
        if (wr->nsge < 1 || wr->sge[0].len < 8)
            return -EINVAL;
        break;
    default:
        return -EINVAL;
    }
    if (wr->op == EMU_WR_BIND && !wr->mw)
        return -EINVAL;
    emu_lock(&qp->tx.lock);
    if (!qp->link.c || qp->tx.dead || qp->tx.disc_pending) {
        emu_unlock(&qp->tx.lock);
        return -ENOTCONN;
    }
    uint32_t need = wr->op == EMU_WR_WRITE_IMM ? EMU_CONN_CAP_IMM
                    : wr->op == EMU_WR_FETCH_ADD || wr->op == EMU_WR_CMP_SWAP ? EMU_CONN_CAP_ATOMICS
                                                                              : 0;
    if ((qp->link.caps & need) != need) {
        emu_unlock(&qp->tx.lock);
        return -EOPNOTSUPP;
    }
    if (qp->tx.sq_tail - qp->tx.sq_head >= qp->tx.sq_cap) {
        emu_unlock(&qp->tx.lock);
        return -ENOSPC;
    }
    uint64_t now = emu_now_us();
    atomic_store_explicit(&qp->poll.last_post_us, now, memory_order_relaxed);
    if (tl_pass_now == 0) {
        tl_pass_now = now;
        tl_post_clock = true;
    }
    struct sq_wqe *w = sq_at(qp, qp->tx.sq_tail);
    struct emu_sge *sge = w->sge;
    memset(w, 0, sizeof *w);
    w->sge = sge;
    w->cookie = wr->cookie;
    w->op = (uint8_t)wr->op;
    w->flags = wr->flags;
    w->nsge = wr->nsge;
    uint64_t len = 0;
    for (uint32_t i = 0; i < wr->nsge; i++) {
        sge[i] = wr->sge[i];
        len += wr->sge[i].len;
    }
    w->len = len;
    w->rstag = wr->remote_stag;
    w->rto = wr->remote_to;
    w->inv_stag = wr->inv_stag;
    w->imm = wr->imm;
    w->a1 = wr->atomic_add_or_cmp;
    w->a2 = wr->atomic_swap;
    w->mw = wr->mw;
    w->bind = wr->bind;
    w->st = WQ_QUEUED;
    qp->tx.sq_tail++;
    /* Fast path: the posting thread transmits when nothing else is
     * waiting for the socket, unless the post can ride with the next. */
    bool pumped = !qp->tx.want_tx && !post_may_wait(qp, w);
    if (pumped)
        qp_tx_pump(qp);
    else if (!qp->tx.want_tx) {
        qp->tx.held++;
        qp->tx.held_posts++;
        atomic_store_explicit(&qp->poll.posts_held, true, memory_order_relaxed);
    }
    qp_clock_wrote();
    emu_unlock(&qp->tx.lock);
    if (pumped)
        poll_note_busy();
    return 0;
}

int emu_qp_post_recv(struct emu_qp *qp, uint64_t cookie, uint32_t nsge,
                     const struct emu_sge *sge)
{
    if (!qp || qp->a.srq)
        return -EINVAL;
    emu_lock(&qp->rq.lock);
    int rc = ring_push(&qp->rq, qp->a.max_sge, cookie, nsge, sge);
    emu_unlock(&qp->rq.lock);
    return rc;
}

void emu_qp_get_stats(struct emu_qp *qp, struct emu_qp_stats *out)
{
    memset(out, 0, sizeof *out);
    emu_lock(&qp->tx.lock);
    out->send_outstanding = qp->tx.sq_tail - qp->tx.sq_head;
    out->ird = qp->link.ird;
    out->ord = qp->link.ord;
    out->tx_bytes = qp->tx.bytes;
    out->tx_fpdus = qp->tx.fpdus;
    out->placement_probes = qp->orq.probes;
    out->tx_writes = qp->tx.writes;
    out->held_posts = qp->tx.held_posts;
    out->tx_crc_in_place = qp->tx.crc_in_place;
    out->tx_crc_staged = qp->tx.crc_staged;
    emu_unlock(&qp->tx.lock);
    emu_lock(&qp->rx.lock);
    out->rx_bytes = qp->rx.bytes;
    out->rx_bytes_in_place = qp->rx.bytes_in_place;
    out->rx_crc_cut_through = qp->rx.cut_through;
    out->consumer_rx_runs = qp->rx.consumer_runs;
    out->rx_fpdus = qp->rx.fpdus;
    out->rnr_stalls = qp->rx.rnr_stalls;
    emu_unlock(&qp->rx.lock);
    if (qp->a.srq) {
        out->recv_posted = emu_srq_posted(qp->a.srq);
    } else {
        emu_lock(&qp->rq.lock);
        out->recv_posted = qp->rq.tail - qp->rq.head;
        emu_unlock(&qp->rq.lock);
    }
}

/* ---------------------------------------------------------------- SRQ */

int emu_srq_create(const struct emu_srq_attr *a, struct emu_srq **out)
{
    if (!a || !out || a->max_recv_wr == 0 || a->max_sge > EMU_QP_MAX_SGE)
        return -EINVAL;
    struct emu_srq *s = calloc(1, sizeof *s);
    if (!s)
        return -ENOMEM;
    s->rq.cap = a->max_recv_wr;
    s->rq.ring = calloc(s->rq.cap, sizeof *s->rq.ring);
    if (!s->rq.ring) {
        free(s);
        return -ENOMEM;
    }
    s->max_sge = a->max_sge ? a->max_sge : 1;
    s->lw = a->low_watermark;
    s->lw_armed = s->lw != 0;
    s->lw_hit = a->low_watermark_hit;
    s->ctx = a->ctx;
    emu_lock_init(&s->rq.lock);
    *out = s;
    return 0;
}

void emu_srq_destroy(struct emu_srq *srq)
{
    if (!srq)
        return;
    emu_lock_destroy(&srq->rq.lock);
    free(srq->rq.ring);
    free(srq);
}

int emu_srq_post_recv(struct emu_srq *s, uint64_t cookie, uint32_t nsge,
                      const struct emu_sge *sge)
{
    if (!s)
        return -EINVAL;
    emu_lock(&s->rq.lock);
    int rc = ring_push(&s->rq, s->max_sge, cookie, nsge, sge);
    emu_unlock(&s->rq.lock);
    return rc;
}

int emu_srq_resize(struct emu_srq *s, uint32_t max_recv_wr)
{
    if (!s || max_recv_wr == 0)
        return -EINVAL;
    emu_lock(&s->rq.lock);
    uint32_t n = s->rq.tail - s->rq.head;
    if (max_recv_wr < n) {
        emu_unlock(&s->rq.lock);
        return -EBUSY;
    }
    struct rq_wqe *r = calloc(max_recv_wr, sizeof *r);
    if (!r) {
        emu_unlock(&s->rq.lock);
        return -ENOMEM;
    }
    for (uint32_t i = 0; i < n; i++)
        r[i] = s->rq.ring[(s->rq.head + i) % s->rq.cap];
    free(s->rq.ring);
    s->rq.ring = r;
    s->rq.cap = max_recv_wr;
    s->rq.head = 0;
    s->rq.tail = n;
    emu_unlock(&s->rq.lock);
    return 0;
}

int emu_srq_set_lw(struct emu_srq *s, uint32_t low_watermark)
{
    if (!s)
        return -EINVAL;
    emu_lock(&s->rq.lock);
    s->lw = low_watermark;
    s->lw_armed = low_watermark != 0;
    emu_unlock(&s->rq.lock);
    return 0;
}

uint32_t emu_srq_posted(const struct emu_srq *s)
{
    struct emu_srq *m = (struct emu_srq *)s;
    emu_lock(&m->rq.lock);
    uint32_t n = m->rq.tail - m->rq.head;
    emu_unlock(&m->rq.lock);
    return n;
}
