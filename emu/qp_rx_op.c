/* Queue pair, receive side: what each RDMAP opcode does. One table
 * (rx_ops[], indexed by opcode, as siw's iwarp_pktinfo and libfabric's
 * xnet_start_op[]) gives every opcode a start handler, run once its header
 * is parsed and validated (decide where the payload goes: check the memory
 * table, take a receive, match the outstanding Read), and a finish handler,
 * run once a segment's trailer checked out (complete, answer, account).
 *
 * Handlers never tear anything down themselves: a failure is recorded in
 * rx.fail (rx_refuse*) and reported as QP_RX_FAILED; qp_rx_fail, the one
 * failure exit, acts on it. The stream machinery is in qp_rx.c.
 *
 * Everything here runs with rx.lock held. */
#include "emu/qp_internal.h"

#include "emu/engine.h"
#include "emu/log.h"
#include "emu/trace.h"
#include "emu/wire_io.h"
#include "emu/wire.h"

#include <errno.h>
#include <stdatomic.h>
#include <string.h>

/* ---------------------------------------------------------------- failures */

/* Record a local protocol or protection error: Terminate layer/etype/ecode
 * about the segment whose header is in rx.hbuf. */
int qp_rx_refuse(struct emu_qp *qp, uint8_t layer, uint8_t etype, uint8_t ecode)
{
    struct emu_term t;
    emu_term_init(&t, layer, etype, ecode, qp->rx.hbuf + 2, qp->rx.hhave - 2, qp->rx.ulpdu_len);
    return qp_rx_refuse_term(qp, &t, EPROTO);
}

int qp_rx_refuse_term(struct emu_qp *qp, const struct emu_term *t, int err)
{
    qp->rx.fail.t = *t;
    qp->rx.fail.remote = false;
    qp->rx.fail.err = err;
    return QP_RX_FAILED;
}

static int refuse_mem(struct emu_qp *qp, enum emu_mem_status st, enum emu_mem_op op)
{
    struct emu_mem_term mt = emu_mem_term_code(st, op);
    return qp_rx_refuse(qp, mt.layer, mt.etype, mt.ecode);
}

static enum emu_wc_status term_status(const struct emu_term *t)
{
    switch (t->layer) {
    case EMU_TERM_RDMAP:
        return t->etype == EMU_TERM_RDMAP_PROTECTION ? EMU_WC_REM_ACCESS : EMU_WC_REM_OP;
    case EMU_TERM_DDP:
        if (t->etype == EMU_TERM_DDP_TAGGED)
            return EMU_WC_REM_ACCESS;
        if (t->etype == EMU_TERM_DDP_UNTAGGED && t->ecode == EMU_DDP_EC_U_NO_BUF)
            return EMU_WC_RNR;
        return EMU_WC_REM_OP;
    default:
        return EMU_WC_TRANSPORT;
    }
}

/* tx.lock held: the outstanding WR a received Terminate is about. The
 * peer processed everything before it: WRs waiting for placement
 * confirmation ahead of it completed. */
static void term_blame(struct emu_qp *qp, const struct emu_term *t)
{
    enum emu_wc_status st = term_status(t);
    bool by_sink = false, by_msn = false, tagged = false;
    uint32_t key = 0, qn = 0;
    if (t->hdrct & EMU_TERM_HDRCT_R) {
        by_sink = true;
        key = emu_get_be32(t->rreq_hdr + EMU_WIRE_RREQ_SINK_STAG);
    } else if ((t->hdrct & EMU_TERM_HDRCT_D) && t->ddp_hdr_len == EMU_DDP_UNTAGGED_HLEN) {
        by_msn = true;
        qn = emu_get_be32(t->ddp_hdr + EMU_WIRE_DDP_U_QN);
        key = emu_get_be32(t->ddp_hdr + EMU_WIRE_DDP_U_MSN);
    } else if ((t->hdrct & EMU_TERM_HDRCT_D) && t->ddp_hdr_len == EMU_DDP_TAGGED_HLEN) {
        tagged = true;
        key = emu_get_be32(t->ddp_hdr + EMU_WIRE_DDP_T_STAG);
    }
    for (uint32_t i = qp->tx.sq_head; i != qp->tx.sq_tx; i++) {
        struct sq_wqe *w = sq_at(qp, i);
        if (w->st == WQ_DONE)
            continue;
        bool hit = false;
        if (by_sink)
            hit = w->op == EMU_WR_READ && w->sink_stag == key;
        else if (by_msn)
            hit = ((qn == EMU_QN_SEND && w->op == EMU_WR_SEND) ||
                   (qn == EMU_QN_READ_REQ && (w->op == EMU_WR_READ || w->op == EMU_WR_FETCH_ADD ||
                                              w->op == EMU_WR_CMP_SWAP))) &&
                  w->msn == key;
        else if (tagged)
            hit = w->op == EMU_WR_WRITE && w->rstag == key;
        if (hit) {
            w->has_err = true;
            w->err = st;
            if (w->st == WQ_ACK) {
                w->st = WQ_TX; /* reported with its error at flush */
                qp->tx.unacked--;
            }
            qp_sq_confirm(qp, i);
            return;
        }
    }
}

/* The one failure exit. A local error sends its Terminate (at the next
 * FPDU boundary of our stream); the peer's Terminate blames the WR it
 * names. Either way nothing more is sent or received, ops->fatal hears of
 * it once, and the caller of qp_rx_run decides how the connection ends
 * (the engine's rx hook returns the error; a consumer thread asks the conn
 * to fail). Returns -err. */
int qp_rx_fail(struct emu_qp *qp)
{
    const struct emu_term *t = &qp->rx.fail.t;
    bool remote = qp->rx.fail.remote;
    emu_lock(&qp->tx.lock);
    qp_sq_confirm_owed(qp);
    if (remote)
        term_blame(qp, t);
    else
        qp_tx_terminate(qp, t);
    qp->tx.dead = true;
    emu_unlock(&qp->tx.lock);
    qp_fatal(qp, remote, t, qp->rx.fail.err);
    qp->rx.dead = true;
    qp->rx.err = -qp->rx.fail.err;
    emu_mem_put(&qp->rx.wref);
    return qp->rx.err;
}

/* A Send or Immediate Data found no receive posted. iWARP (rnr_retry 0):
 * Terminate. InfiniBand's receiver-not-ready: the header stays parsed,
 * nothing more is read (TCP's window holds the peer, as RNR NAKs hold an
 * IB requester) and the caller looks again every rnr_timer_us, for
 * rnr_retry looks, or for ever with 7. */
static int no_recv(struct emu_qp *qp)
{
    if (qp->a.rnr_retry == 0)
        return qp_rx_refuse(qp, EMU_TERM_DDP, EMU_TERM_DDP_UNTAGGED, EMU_DDP_EC_U_NO_BUF);
    uint64_t now = emu_now_us();
    if (qp->rx.rnr_since == 0) {
        qp->rx.rnr_since = now;
        qp->rx.rnr_kicked = false;
        qp->rx.rnr_stalls++;
        SD_DBG("qp", "%p receiver not ready: no receive posted, waiting", (void *)qp);
    } else if (qp->a.rnr_retry < EMU_QP_RNR_INFINITE &&
               now - qp->rx.rnr_since >= (uint64_t)qp->a.rnr_retry * qp->a.rnr_timer_us) {
        SD_INFO("qp", "%p receiver not ready after %u retries: Terminate", (void *)qp,
                (unsigned)qp->a.rnr_retry);
        qp->rx.rnr_since = 0;
        return qp_rx_refuse(qp, EMU_TERM_DDP, EMU_TERM_DDP_UNTAGGED, EMU_DDP_EC_U_NO_BUF);
    }
    return QP_RX_STALL;
}

/* ---------------------------------------------------------------- completions */

static void rx_deliver(struct emu_qp *qp, const struct emu_cqe *cqe)
{
    if (qp->rx.rxc_n == QP_RX_CQES)
        qp_rx_deliver_pending(qp);
    qp->rx.rxc[qp->rx.rxc_n++] = *cqe;
}

/* tx.lock held: an ORQ entry answered (Read Response or Atomic Response):
 * it leaves the ORQ, everything before it is confirmed placed, the Read or
 * atomic completes, and the freed ORD may let a stalled Read go. */
static void orq_complete(struct emu_qp *qp, uint32_t idx, uint32_t len)
{
    qp->orq.head++;
    qp->orq.reads_out--;
    qp_sq_confirm(qp, idx);
    qp_sq_report(qp, idx, EMU_WC_SUCCESS, len);
    qp_tx_pump(qp);
}

/* The receive path queued a Read or Atomic Response: it leaves when the
 * bytes read so far are processed (kick_owed, qp_rx.c), with every other
 * response they asked for, in one writev rather than one each. */
static void tx_kick(struct emu_qp *qp)
{
    qp->rx.tx_owed = true;
}

/* IRQ producer side (struct qp_irq): room for one more inbound request?
 * A request IRD limits (counted) may not find IRD such requests already
 * unanswered; a softdat peer's probe (not counted) only needs a free slot
 * of the ring, which has room for QP_PROBES_MAX of them beyond IRD.
 * Counting the probes against IRD refused a compliant peer's Reads while
 * answers to its probes were still queued (e2e/mt under load). */
static bool ird_full(struct emu_qp *qp, bool counted)
{
    uint32_t tail = atomic_load_explicit(&qp->irq.tail, memory_order_relaxed);
    if (qp->irq.cap == 0 || tail - atomic_load_explicit(&qp->irq.head, memory_order_acquire) >= qp->irq.cap)
        return true;
    return counted && atomic_load_explicit(&qp->irq.counted, memory_order_acquire) >= qp->link.ird;
}

/* Queue an inbound Read or Atomic Request's answer; published with release
 * so the transmit side sees the whole entry. */
static void ird_push(struct emu_qp *qp, const struct ird_ent *e)
{
    uint32_t tail = atomic_load_explicit(&qp->irq.tail, memory_order_relaxed);
    qp->irq.ent[tail % qp->irq.cap] = *e;
    if (e->counted)
        atomic_fetch_add_explicit(&qp->irq.counted, 1, memory_order_relaxed);
    atomic_store_explicit(&qp->irq.tail, tail + 1, memory_order_release);
}

/* ---------------------------------------------------------------- memcheck records */

/* The trace's record of one remote-access decision (docs/trace.md
 * §memcheck); called only when the trace is on. */
static void trace_memcheck(struct emu_qp *qp, enum emu_mem_op op, uint32_t stag, uint64_t to, uint64_t len,
                           enum emu_mem_status st)
{
    static const char *const access[] = {[EMU_MEM_OP_WRITE] = "write", [EMU_MEM_OP_READ] = "read",
                                         [EMU_MEM_OP_ATOMIC] = "atomic", [EMU_MEM_OP_INVALIDATE] = "invalidate"};
    static const uint32_t need[] = {[EMU_MEM_OP_WRITE] = EMU_ACC_REMOTE_WRITE,
                                    [EMU_MEM_OP_READ] = EMU_ACC_REMOTE_READ,
                                    [EMU_MEM_OP_ATOMIC] = EMU_ACC_REMOTE_ATOMIC,
                                    [EMU_MEM_OP_INVALIDATE] = 0};
    struct emu_mem_why w;
    emu_mem_explain(qp->a.mem, stag, st, &w);
    struct sd_trace_memcheck m = {
        .conn = qp->link.conn_id,
        .access = access[op],
        .stag = stag,
        .key = w.key,
        .pz = w.pz_trace_id,
        .qp_pz = emu_mem_pz_trace_id(qp->a.pz),
        .priv_need = need[op],
        .priv_have = w.access,
        .to = to,
        .len = len,
        .base = w.base,
        .bound = w.bound,
        .allowed = st == EMU_MEM_OK,
        .reason = w.reason,
    };
    struct sd_trace_ctx ctx = {0, 0};
    if (qp->link.wire != NULL) {
        ctx.ia = qp->link.wire->ia;
        ctx.t0_ns = qp->link.wire->ia_t0_ns;
    }
    sd_trace_memcheck(&ctx, &m);
}

/* ---------------------------------------------------------------- RDMA Write */

static int write_start(struct emu_qp *qp)
{
    const struct emu_ddp_hdr *h = &qp->rx.h;
    if (h->payload_len == 0)
        return 0; /* DDP: zero-length tagged messages skip STag checks */
    enum emu_mem_status st =
        emu_mem_check_remote(qp->a.mem, h->stag, h->to, h->payload_len, EMU_MEM_OP_WRITE, qp->a.pz,
                             qp->link.conn_id, &qp->rx.wref);
    if (SD_TRACE_ON())
        trace_memcheck(qp, EMU_MEM_OP_WRITE, h->stag, h->to, h->payload_len, st);
    if (st != EMU_MEM_OK) {
        SD_DBG("qp", "%p Write to %#x+%#llx len %u refused: %s", (void *)qp, h->stag,
               (unsigned long long)h->to, h->payload_len, emu_mem_status_str(st));
        return refuse_mem(qp, st, EMU_MEM_OP_WRITE);
    }
    qp->rx.tgt[0].iov_base = qp->rx.wref.ptr;
    qp->rx.tgt[0].iov_len = h->payload_len;
    qp->rx.tgt_n = 1;
    return 0;
}

/* Write with immediate = Write + Immediate Data back to back: remember the
 * Write message's length for the Immediate Data right after it. */
static int write_finish(struct emu_qp *qp)
{
    const struct emu_ddp_hdr *h = &qp->rx.h;
    qp->rx.wlen += h->payload_len;
    if (h->last) {
        qp->rx.last_wlen = qp->rx.wlen > UINT32_MAX ? UINT32_MAX : (uint32_t)qp->rx.wlen;
        qp->rx.wlen = 0;
        qp->rx.prev_write = true;
    }
    return 0;
}

/* ---------------------------------------------------------------- Read Response */

static int rresp_start(struct emu_qp *qp)
{
    const struct emu_ddp_hdr *h = &qp->rx.h;
    emu_lock(&qp->tx.lock);
    struct sq_wqe *w = NULL;
    bool probe = false, probe_ok = false;
    if (qp->orq.head != qp->orq.tail) {
        struct rd_ent *re = orq_at(qp, qp->orq.head);
        probe = re->probe;
        probe_ok = probe && h->stag == re->stag;
        qp->rx.rresp_sq_idx = re->idx;
        if (!probe)
            w = sq_at(qp, qp->rx.rresp_sq_idx);
    }
    emu_unlock(&qp->tx.lock);
    qp->rx.rresp_probe = probe;
    if (probe) {
        if (!probe_ok)
            return qp_rx_refuse(qp, EMU_TERM_DDP, EMU_TERM_DDP_TAGGED, EMU_DDP_EC_T_INV_STAG);
        if (h->to != 0 || h->payload_len != 0)
            return qp_rx_refuse(qp, EMU_TERM_DDP, EMU_TERM_DDP_TAGGED, EMU_DDP_EC_T_BOUNDS);
        return 0;
    }
    if (!w || w->op != EMU_WR_READ || w->sink_stag != h->stag)
        return qp_rx_refuse(qp, EMU_TERM_DDP, EMU_TERM_DDP_TAGGED, EMU_DDP_EC_T_INV_STAG);
    /* The WR's fields are stable while the Read is outstanding. */
    if (h->to != qp->rx.rresp_off || h->to + h->payload_len > w->len)
        return qp_rx_refuse(qp, EMU_TERM_DDP, EMU_TERM_DDP_TAGGED, EMU_DDP_EC_T_BOUNDS);
    qp->rx.tgt_n = qp_sge_slice(w->sge, w->nsge, h->to, h->payload_len, qp->rx.tgt, EMU_QP_MAX_SGE);
    return 0;
}

static int rresp_finish(struct emu_qp *qp)
{
    const struct emu_ddp_hdr *h = &qp->rx.h;
    qp->rx.rresp_off += h->payload_len;
    if (!h->last)
        return 0;
    emu_lock(&qp->tx.lock);
    uint32_t idx = qp->rx.rresp_sq_idx;
    bool ok = true;
    if (qp->rx.rresp_probe) {
        qp->orq.head++;
        qp->orq.probes_out--;
        if (qp->rx.consumer_pass && !qp->tx.disc_pending && qp_engine_parked(qp)) {
            /* After the application's turn (qp_sq_confirm_owed), as a
             * kept answer: only while the engine is parked by a lease,
             * whose end it looks at whatever this thread does next. */
            qp->tx.confirm_upto = idx;
            atomic_store_explicit(&qp->tx.confirm_owed, true, memory_order_relaxed);
        } else {
            qp_sq_confirm(qp, idx);
        }
        qp_tx_pump(qp); /* the next probe, a stalled Read, a graceful disconnect */
    } else {
        struct sq_wqe *w = sq_at(qp, idx);
        ok = qp->rx.rresp_off == w->len;
        if (ok) {
            orq_complete(qp, idx, (uint32_t)w->len);
        } else {
            w->has_err = true;
            w->err = EMU_WC_BAD_RESP;
        }
    }
    emu_unlock(&qp->tx.lock);
    qp->rx.rresp_off = 0;
    if (!ok)
        return qp_rx_refuse(qp, EMU_TERM_DDP, EMU_TERM_DDP_TAGGED, EMU_DDP_EC_T_BOUNDS);
    qp->rx.ncomp++;
    return 0;
}

/* ---------------------------------------------------------------- Send family */

static int send_start(struct emu_qp *qp)
{
    const struct emu_ddp_hdr *h = &qp->rx.h;
    if (!qp->rx.ddp.q[EMU_QN_SEND].in_progress) {
        if (!qp_pop_recv(qp, &qp->rx.cur_recv))
            return no_recv(qp);
        qp->rx.rnr_since = 0;
        qp->rx.have_recv = true;
        qp->rx.recv_err_set = false;
    }
    uint64_t end = (uint64_t)h->mo + h->payload_len;
    if (end > qp->rx.cur_recv.len || end > qp->a.max_message_size) {
        qp->rx.recv_err_set = true;
        qp->rx.recv_err = EMU_WC_LOC_LEN;
        return qp_rx_refuse(qp, EMU_TERM_DDP, EMU_TERM_DDP_UNTAGGED, EMU_DDP_EC_U_TOO_LONG);
    }
    qp->rx.tgt_n = qp_sge_slice(qp->rx.cur_recv.sge, qp->rx.cur_recv.nsge, h->mo, h->payload_len,
                                qp->rx.tgt, EMU_QP_MAX_SGE);
    return 0;
}

static int send_finish(struct emu_qp *qp)
{
    const struct emu_ddp_hdr *h = &qp->rx.h;
    if (!h->last)
        return 0;
    bool inv = h->opcode == EMU_OP_SEND_INV || h->opcode == EMU_OP_SEND_SE_INV;
    if (inv) {
        enum emu_mem_status st =
            emu_mem_invalidate(qp->a.mem, h->inv_stag, qp->a.pz, qp->link.conn_id);
        if (SD_TRACE_ON())
            trace_memcheck(qp, EMU_MEM_OP_INVALIDATE, h->inv_stag, 0, 0, st);
        if (st != EMU_MEM_OK) {
            qp->rx.recv_err_set = true;
            qp->rx.recv_err = EMU_WC_LOC_PROT;
            return refuse_mem(qp, st, EMU_MEM_OP_INVALIDATE);
        }
    }
    struct emu_cqe cqe;
    memset(&cqe, 0, sizeof cqe);
    cqe.cookie = qp->rx.cur_recv.cookie;
    cqe.op = inv ? EMU_WC_RECV_INV : EMU_WC_RECV;
    cqe.status = EMU_WC_SUCCESS;
    cqe.byte_len = h->mo + h->payload_len;
    cqe.solicited = h->opcode == EMU_OP_SEND_SE || h->opcode == EMU_OP_SEND_SE_INV;
    cqe.inv_stag = inv ? h->inv_stag : 0;
    qp->rx.have_recv = false;
    qp->rx.ncomp++;
    rx_deliver(qp, &cqe);
    return 0;
}

/* ---------------------------------------------------------------- Immediate Data (RFC 7306) */

/* Take the receive now: with RNR retry the stream waits here, at a header,
 * until one is posted. */
static int imm_start(struct emu_qp *qp)
{
    if (!qp->rx.have_imm_recv) {
        if (!qp_pop_recv(qp, &qp->rx.imm_recv))
            return no_recv(qp);
        qp->rx.rnr_since = 0;
        qp->rx.have_imm_recv = true;
    }
    return 0;
}

static int imm_finish(struct emu_qp *qp)
{
    const struct emu_ddp_hdr *h = &qp->rx.h;
    struct rq_wqe r = qp->rx.imm_recv; /* taken at the header */
    qp->rx.have_imm_recv = false;
    struct emu_cqe cqe;
    memset(&cqe, 0, sizeof cqe);
    cqe.cookie = r.cookie;
    cqe.op = EMU_WC_RECV_IMM;
    cqe.status = EMU_WC_SUCCESS;
    cqe.imm = emu_rdmap_imm_to_u32(h->u.imm);
    cqe.solicited = h->opcode == EMU_OP_IMM_SE;
    /* Write with immediate = Write + Immediate Data back to back on the
     * stream (the sender never puts another message between them), so the
     * Write just before is the one this immediate belongs to: report its
     * length, as an IB write-with-immediate receive does. */
    cqe.byte_len = qp->rx.prev_write ? qp->rx.last_wlen : 0;
    qp->rx.prev_write = false;
    qp->rx.ncomp++;
    rx_deliver(qp, &cqe);
    return 0;
}

/* ---------------------------------------------------------------- Read Request */

static int rreq_finish(struct emu_qp *qp)
{
    const struct emu_rdmap_read_req *r = &qp->rx.h.u.rreq;
    /* A softdat peer (capability marker) may have zero-length placement
     * probes out beyond our IRD (QP_PROBES_MAX); the ring has room. */
    bool counted = !(r->size == 0 && qp->link.caps != 0);
    if (ird_full(qp, counted))
        return qp_rx_refuse(qp, EMU_TERM_RDMAP, EMU_TERM_RDMAP_OPERATION, EMU_RDMAP_EC_CATA_STREAM);
    /* The Read Responses carry sink_to + offset as their tagged offset: a
     * sink range that wraps 2^64 could only be answered with FPDUs the
     * requester must reject (DDP tagged "TO wrap", blaming us). Refuse the
     * request as a wrapping source range is refused (found by fuzz_qp_rx,
     * docs/reliability.md). */
    if (r->size && r->sink_to + r->size - 1 < r->sink_to)
        return qp_rx_refuse(qp, EMU_TERM_RDMAP, EMU_TERM_RDMAP_PROTECTION, EMU_RDMAP_EC_TO_WRAP);
    struct ird_ent e;
    memset(&e, 0, sizeof e);
    e.counted = counted;
    e.sink_stag = r->sink_stag;
    e.sink_to = r->sink_to;
    e.size = r->size;
    if (r->size) {
        enum emu_mem_status st =
            emu_mem_check_remote(qp->a.mem, r->src_stag, r->src_to, r->size, EMU_MEM_OP_READ,
                                 qp->a.pz, qp->link.conn_id, &e.ref);
        if (SD_TRACE_ON())
            trace_memcheck(qp, EMU_MEM_OP_READ, r->src_stag, r->src_to, r->size, st);
        if (st != EMU_MEM_OK) {
            SD_DBG("qp", "%p Read of %#x+%#llx len %u refused: %s", (void *)qp, r->src_stag,
                   (unsigned long long)r->src_to, r->size, emu_mem_status_str(st));
            return refuse_mem(qp, st, EMU_MEM_OP_READ);
        }
    }
    ird_push(qp, &e);
    /* A zero-length Read (a placement probe, typically right behind the
     * data the application is about to see): answered with the next bytes
     * this QP sends, or a bound later, so that the answer costs no
     * system call of its own in front of the application seeing its data,
     * nor between that and the application's reply (a ping-pong's reply
     * carries it).
     * - A polling consumer thread keeps it only while the engine is parked
     *   by its lease: the engine's timer flushes it at the latest when the
     *   lease runs out, whatever this thread does next (its own passes
     *   flush it after QP_DEFER_US: flush_deferred).
     * - The engine keeps it only on a QP that posted in the last
     *   QP_DEFER_RECENT_US (one that replies), and runs again
     *   QP_DEFER_ENGINE_US later to send it if no post took it (emu_qp_rx).
     *   Answered at once,
     *   its sendmsg held the send lock while the application, which had
     *   already seen the data, waited on that lock to post its reply: a
     *   blocking 64 B Write ping-pong took 2.4-3x raw TCP's time, 1.5-1.6x
     *   with the answer riding on the reply. (Without the bound, 1.4x: the
     *   timer's wake-up, about one hop in five, costs; it cannot go.)
     * (The engine itself never runs parked: emu_qp_rx clears engine_parked
     * before it reads.) */
    bool keep = false;
    uint64_t now = 0; /* the engine's reading, kept for deferred_us: one clock read */
    if (r->size == 0) {
        if (qp->rx.consumer_pass) {
            keep = qp_engine_parked(qp);
        } else {
            now = qp_clock();
            keep = qp_us_since_post(qp, now) < QP_DEFER_RECENT_US;
        }
    }
    if (keep) {
        if (!atomic_load_explicit(&qp->irq.deferred, memory_order_relaxed))
            atomic_store_explicit(&qp->irq.deferred_us, now != 0 ? now : qp_clock(), memory_order_relaxed);
        atomic_store_explicit(&qp->irq.deferred, true, memory_order_relaxed);
        if (!qp->rx.consumer_pass)
            qp->rx.answer_kept = true;
    } else
        tx_kick(qp);
    return 0;
}

/* ---------------------------------------------------------------- atomics (RFC 7306) */

static uint64_t do_atomic(uint64_t *p, const struct emu_rdmap_atomic_req *a)
{
    uint64_t orig = __atomic_load_n(p, __ATOMIC_ACQUIRE);
    for (int i = 0; i < 1000000; i++) {
        uint64_t nv;
        if (a->op == EMU_ATOMIC_FETCH_ADD) {
            if (a->add_swap_mask == 0) {
                nv = orig + a->add_swap;
            } else {
                /* Per-field add: the carry out of every bit set in the mask
                 * is dropped (RFC 7306). */
                nv = 0;
                unsigned carry = 0;
                for (int b = 0; b < 64; b++) {
                    unsigned s =
                        (unsigned)((orig >> b) & 1) + (unsigned)((a->add_swap >> b) & 1) + carry;
                    nv |= (uint64_t)(s & 1) << b;
                    carry = (s >> 1) && !((a->add_swap_mask >> b) & 1);
                }
            }
        } else {
            if (((orig ^ a->compare) & a->compare_mask) != 0)
                return orig;
            nv = (orig & ~a->add_swap_mask) | (a->add_swap & a->add_swap_mask);
        }
        if (__atomic_compare_exchange_n(p, &orig, nv, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
            return orig;
    }
    return orig;
}

static int areq_finish(struct emu_qp *qp)
{
    const struct emu_rdmap_atomic_req *a = &qp->rx.h.u.areq;
    if (ird_full(qp, true))
        return qp_rx_refuse(qp, EMU_TERM_RDMAP, EMU_TERM_RDMAP_OPERATION, EMU_RDMAP_EC_CATA_STREAM);
    struct emu_mem_ref ref;
    memset(&ref, 0, sizeof ref);
    enum emu_mem_status st = emu_mem_check_remote(qp->a.mem, a->stag, a->to, 8, EMU_MEM_OP_ATOMIC,
                                                  qp->a.pz, qp->link.conn_id, &ref);
    if (st == EMU_MEM_OK && ((uintptr_t)ref.ptr & 7u)) {
        emu_mem_put(&ref);
        st = EMU_MEM_E_BOUNDS; /* misaligned target */
    }
    if (SD_TRACE_ON())
        trace_memcheck(qp, EMU_MEM_OP_ATOMIC, a->stag, a->to, 8, st);
    if (st != EMU_MEM_OK)
        return refuse_mem(qp, st, EMU_MEM_OP_ATOMIC);
    struct ird_ent e;
    memset(&e, 0, sizeof e);
    e.atomic = true;
    e.counted = true;
    e.req_id = a->req_id;
    e.orig = do_atomic((uint64_t *)ref.ptr, a);
    emu_mem_put(&ref);
    ird_push(qp, &e);
    tx_kick(qp);
    return 0;
}

static int aresp_finish(struct emu_qp *qp)
{
    const struct emu_rdmap_atomic_resp *r = &qp->rx.h.u.aresp;
    emu_lock(&qp->tx.lock);
    bool ok = false;
    if (qp->orq.head != qp->orq.tail && !orq_at(qp, qp->orq.head)->probe) {
        uint32_t idx = orq_at(qp, qp->orq.head)->idx;
        struct sq_wqe *w = sq_at(qp, idx);
        if ((w->op == EMU_WR_FETCH_ADD || w->op == EMU_WR_CMP_SWAP) && w->msn == r->req_id) {
            memcpy(w->sge[0].addr, &r->orig, 8);
            orq_complete(qp, idx, 8);
            ok = true;
        }
    }
    emu_unlock(&qp->tx.lock);
    if (!ok)
        return qp_rx_refuse(qp, EMU_TERM_RDMAP, EMU_TERM_RDMAP_OPERATION, EMU_RDMAP_EC_OPCODE);
    qp->rx.ncomp++;
    return 0;
}

/* ---------------------------------------------------------------- Terminate */

static int term_finish(struct emu_qp *qp)
{
    qp->rx.fail.t = qp->rx.h.u.term;
    qp->rx.fail.remote = true;
    qp->rx.fail.err = EREMOTEIO;
    return QP_RX_FAILED;
}

/* ---------------------------------------------------------------- the table */

#define RXO_PLACES 1u   /* last segment: a Send/Write placed (rx.placed, emu_qp_quiesce) */
#define RXO_CONFIRMS 2u /* its answer confirms everything placed before it */
#define RXO_IMM_PAIR 4u /* Write or Immediate Data: keeps rx.prev_write */
/* Its payload's target is the provider's until the WR completes (a posted
 * receive, a Read's sink), and DAT leaves it undefined when the WR ends in
 * error: with CRC on it is placed as it arrives (no copy) and the CRC
 * checked over the placed bytes; a mismatch breaks the connection before
 * the WR can complete successfully. A Write's target, a region its owner
 * may watch at any time, is placed only once checked (place_verified),
 * unless SOFTDAT_CRC_PLACEMENT=cut-through (link.cut_writes). */
#define RXO_CUT 8u

struct rx_op {
    int (*start)(struct emu_qp *qp);  /* header parsed; NULL: nothing to decide */
    int (*finish)(struct emu_qp *qp); /* segment complete and CRC-checked */
    unsigned flags;
};

/* Fixed-size messages (Read Request, atomics, Terminate, Immediate Data)
 * act only in finish: after their trailer, so after the CRC check. */
static const struct rx_op rx_ops[EMU_OP_COUNT] = {
    [EMU_OP_WRITE] = {write_start, write_finish, RXO_PLACES | RXO_IMM_PAIR},
    [EMU_OP_READ_REQ] = {NULL, rreq_finish, RXO_CONFIRMS},
    [EMU_OP_READ_RESP] = {rresp_start, rresp_finish, RXO_CUT},
    [EMU_OP_SEND] = {send_start, send_finish, RXO_PLACES | RXO_CUT},
    [EMU_OP_SEND_INV] = {send_start, send_finish, RXO_PLACES | RXO_CUT},
    [EMU_OP_SEND_SE] = {send_start, send_finish, RXO_PLACES | RXO_CUT},
    [EMU_OP_SEND_SE_INV] = {send_start, send_finish, RXO_PLACES | RXO_CUT},
    [EMU_OP_TERMINATE] = {NULL, term_finish, 0},
    [EMU_OP_IMM] = {imm_start, imm_finish, RXO_PLACES | RXO_IMM_PAIR},
    [EMU_OP_IMM_SE] = {imm_start, imm_finish, RXO_PLACES | RXO_IMM_PAIR},
    [EMU_OP_ATOMIC_REQ] = {NULL, areq_finish, RXO_CONFIRMS},
    [EMU_OP_ATOMIC_RESP] = {NULL, aresp_finish, 0},
};

/* emu_ddp_parse accepted the header, so the opcode is below EMU_OP_COUNT. */
int qp_rx_op_start(struct emu_qp *qp)
{
    const struct rx_op *op = &rx_ops[qp->rx.h.opcode];
    qp->rx.tgt_n = qp->rx.tgt_i = 0;
    qp->rx.cut = qp->link.crc && ((op->flags & RXO_CUT) ||
                                  (qp->rx.h.opcode == EMU_OP_WRITE && qp->link.cut_writes));
    return op->start ? op->start(qp) : 0;
}

int qp_rx_op_finish(struct emu_qp *qp)
{
    const struct emu_ddp_hdr *h = &qp->rx.h;
    const struct rx_op *op = &rx_ops[h->opcode];
    /* An Immediate Data reports the Write right before it, only if no other
     * message came between them. */
    if (h->last && !(op->flags & RXO_IMM_PAIR))
        qp->rx.prev_write = false;
    int rc = op->finish(qp);
    /* What a peer with InfiniBand semantics waits to have confirmed
     * (emu_qp_quiesce). */
    if (h->last && (op->flags & RXO_PLACES))
        qp->rx.placed++;
    if (h->last && (op->flags & RXO_CONFIRMS))
        qp->rx.confirmed = qp->rx.placed;
    return rc;
}
