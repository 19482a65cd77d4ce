/* Queue pair, receive side: a resumable length -> header -> payload ->
 * trailer state machine per connection. Every header is validated (DDP/RDMAP
 * parse, memory table, receive buffer) before a payload byte is placed.
 * Small FPDUs are parsed out of a 64 KiB prefetch buffer (one recv brings
 * many); a payload remainder of 16 KiB or more is read straight into the
 * receive buffer or the target region, with 256 bytes of the prefetch
 * buffer as the last iovec so that the trailer and the next header come in
 * with the same syscall.
 *
 * CRC (when negotiated) is computed while placing and compared at the
 * trailer: data read in place is checked after it was placed (as siw does);
 * a mismatch sends Terminate LLP/CRC and breaks the connection, so the
 * damaged message never completes successfully.
 *
 * Everything here runs with rx_lock held. */
#include "emu/qp_internal.h"

#include "emu/crc32c.h"
#include "emu/engine.h"
#include "emu/log.h"
#include "emu/mpa.h"
#include "emu/wire.h"

#include <errno.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

#define RX_ROUNDS 256

void qp_rx_reset(struct emu_qp *qp)
{
    emu_ddp_rx_init(&qp->rx.ddp, qp->link.caps != 0);
    qp->rx.wlen = 0;
    qp->rx.last_wlen = 0;
    qp->rx.prev_write = false;
    qp->rx.phase = RX_LEN;
    qp->rx.kind = RXK_NONE;
    qp->rx.hhave = 0;
    qp->rx.hneed = 2;
    qp->rx.pay_left = 0;
    qp->rx.tgt_n = qp->rx.tgt_i = 0;
    qp->rx.trl_have = qp->rx.trl_need = 0;
    qp->rx.pf_off = qp->rx.pf_len = 0;
    qp->rx.rresp_off = 0;
    qp->rx.peer_probes = false;
    qp->rx.placed = qp->rx.confirmed = 0;
    emu_mem_put(&qp->rx.wref);
    memset(&qp->rx.wref, 0, sizeof qp->rx.wref);
}

/* A local protocol/protection error: Terminate, then the connection breaks
 * (the engine's rx hook returns the error; a consumer thread asks the
 * conn to fail). Returns -err. */
static int rx_fail(struct emu_qp *qp, const struct emu_term *t, int err, bool engine)
{
    struct emu_conn *c = qp->link.c; /* stable under rx.lock (struct qp_link) */
    pthread_mutex_lock(&qp->tx.lock);
    if (t)
        qp_tx_terminate(qp, t);
    else
        qp->tx.dead = true;
    pthread_mutex_unlock(&qp->tx.lock);
    qp_fatal(qp, false, t, err);
    qp->rx.dead = true;
    qp->rx.err = -err;
    emu_mem_put(&qp->rx.wref);
    if (!engine && c)
        emu_conn_fail(c, err);
    return -err;
}

static int rx_fail_code(struct emu_qp *qp, uint8_t layer, uint8_t etype, uint8_t ecode,
                        bool engine)
{
    struct emu_term t;
    emu_term_init(&t, layer, etype, ecode, qp->rx.hbuf + 2, qp->rx.hhave - 2, qp->rx.ulpdu_len);
    return rx_fail(qp, &t, EPROTO, engine);
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

/* sq_lock held: the outstanding WR a received Terminate is about. The
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
                   (qn == EMU_QN_READ_REQ &&
                    (w->op == EMU_WR_READ || w->op == EMU_WR_FETCH_ADD ||
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

static int rx_terminate(struct emu_qp *qp, bool engine)
{
    const struct emu_term *t = &qp->rx.h.u.term;
    struct emu_conn *c = qp->link.c;
    pthread_mutex_lock(&qp->tx.lock);
    term_blame(qp, t);
    qp->tx.dead = true;
    pthread_mutex_unlock(&qp->tx.lock);
    qp_fatal(qp, true, t, EREMOTEIO);
    qp->rx.dead = true;
    qp->rx.err = -EREMOTEIO;
    if (!engine && c)
        emu_conn_fail(c, EREMOTEIO);
    return -EREMOTEIO;
}

/* A Send or Immediate Data found no receive posted. iWARP (rnr_retry 0):
 * Terminate. InfiniBand's receiver-not-ready: the header stays parsed,
 * nothing more is read (TCP's window holds the peer, as RNR NAKs hold an
 * IB requester) and the caller looks again every rnr_timer_us, for
 * rnr_retry looks, or for ever with 7. */
static int rx_no_recv(struct emu_qp *qp, bool engine)
{
    if (qp->a.rnr_retry == 0)
        return rx_fail_code(qp, EMU_TERM_DDP, EMU_TERM_DDP_UNTAGGED, EMU_DDP_EC_U_NO_BUF,
                            engine);
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
        return rx_fail_code(qp, EMU_TERM_DDP, EMU_TERM_DDP_UNTAGGED, EMU_DDP_EC_U_NO_BUF,
                            engine);
    }
    return QP_RX_STALL;
}

/* The header is complete and parsed: decide where the payload goes. */
static int header_done(struct emu_qp *qp, bool engine)
{
    struct emu_ddp_hdr *h = &qp->rx.h;
    qp->rx.tgt_n = qp->rx.tgt_i = 0;
    qp->rx.kind = RXK_FIXED;
    switch (h->opcode) {
    case EMU_OP_WRITE:
        qp->rx.kind = RXK_WRITE;
        if (h->payload_len == 0)
            break; /* DDP: zero-length tagged messages skip STag checks */
        {
            enum emu_mem_status st =
                emu_mem_check_remote(qp->a.mem, h->stag, h->to, h->payload_len,
                                     EMU_MEM_OP_WRITE, qp->a.pz, qp->link.conn_id, &qp->rx.wref);
            if (st != EMU_MEM_OK) {
                struct emu_mem_term mt = emu_mem_term_code(st, EMU_MEM_OP_WRITE);
                SD_DBG("qp", "%p Write to %#x+%#llx len %u refused: %s", (void *)qp, h->stag,
                       (unsigned long long)h->to, h->payload_len, emu_mem_status_str(st));
                return rx_fail_code(qp, mt.layer, mt.etype, mt.ecode, engine);
            }
            qp->rx.tgt[0].iov_base = qp->rx.wref.ptr;
            qp->rx.tgt[0].iov_len = h->payload_len;
            qp->rx.tgt_n = 1;
        }
        break;
    case EMU_OP_READ_RESP: {
        qp->rx.kind = RXK_RRESP;
        pthread_mutex_lock(&qp->tx.lock);
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
        pthread_mutex_unlock(&qp->tx.lock);
        qp->rx.rresp_probe = probe;
        if (probe) {
            if (!probe_ok)
                return rx_fail_code(qp, EMU_TERM_DDP, EMU_TERM_DDP_TAGGED,
                                    EMU_DDP_EC_T_INV_STAG, engine);
            if (h->to != 0 || h->payload_len != 0)
                return rx_fail_code(qp, EMU_TERM_DDP, EMU_TERM_DDP_TAGGED, EMU_DDP_EC_T_BOUNDS,
                                    engine);
            break;
        }
        if (!w || w->op != EMU_WR_READ || w->sink_stag != h->stag)
            return rx_fail_code(qp, EMU_TERM_DDP, EMU_TERM_DDP_TAGGED, EMU_DDP_EC_T_INV_STAG,
                                engine);
        /* The WR's fields are stable while the Read is outstanding. */
        if (h->to != qp->rx.rresp_off || h->to + h->payload_len > w->len)
            return rx_fail_code(qp, EMU_TERM_DDP, EMU_TERM_DDP_TAGGED, EMU_DDP_EC_T_BOUNDS,
                                engine);
        qp->rx.tgt_n = qp_sge_slice(w->sge, w->nsge, h->to, h->payload_len, qp->rx.tgt,
                                 EMU_QP_MAX_SGE);
        break;
    }
    case EMU_OP_SEND:
    case EMU_OP_SEND_INV:
    case EMU_OP_SEND_SE:
    case EMU_OP_SEND_SE_INV: {
        qp->rx.kind = RXK_SEND;
        if (!qp->rx.ddp.q[EMU_QN_SEND].in_progress) {
            if (!qp_pop_recv(qp, &qp->rx.cur_recv))
                return rx_no_recv(qp, engine);
            qp->rx.rnr_since = 0;
            qp->rx.have_recv = true;
            qp->rx.recv_err_set = false;
        }
        uint64_t end = (uint64_t)h->mo + h->payload_len;
        if (end > qp->rx.cur_recv.len || end > qp->a.max_message_size) {
            qp->rx.recv_err_set = true;
            qp->rx.recv_err = EMU_WC_LOC_LEN;
            return rx_fail_code(qp, EMU_TERM_DDP, EMU_TERM_DDP_UNTAGGED, EMU_DDP_EC_U_TOO_LONG,
                                engine);
        }
        qp->rx.tgt_n = qp_sge_slice(qp->rx.cur_recv.sge, qp->rx.cur_recv.nsge, h->mo, h->payload_len,
                                 qp->rx.tgt, EMU_QP_MAX_SGE);
        break;
    }
    case EMU_OP_IMM:
    case EMU_OP_IMM_SE:
        /* Take the receive now: with RNR retry the stream waits here, at a
         * header, until one is posted. */
        if (!qp->rx.have_imm_recv) {
            if (!qp_pop_recv(qp, &qp->rx.imm_recv))
                return rx_no_recv(qp, engine);
            qp->rx.rnr_since = 0;
            qp->rx.have_imm_recv = true;
        }
        break;
    default:
        break; /* fixed-size messages act once the trailer checked out */
    }
    return 0;
}

static void rx_deliver(struct emu_qp *qp, const struct emu_cqe *cqe)
{
    if (qp->rx.rxc_n == QP_RX_CQES)
        qp_rx_deliver_pending(qp);
    qp->rx.rxc[qp->rx.rxc_n++] = *cqe;
}

static void complete_recv(struct emu_qp *qp)
{
    const struct emu_ddp_hdr *h = &qp->rx.h;
    struct emu_cqe cqe;
    memset(&cqe, 0, sizeof cqe);
    cqe.cookie = qp->rx.cur_recv.cookie;
    cqe.op = EMU_WC_RECV;
    cqe.status = EMU_WC_SUCCESS;
    cqe.byte_len = h->mo + h->payload_len;
    cqe.solicited = h->opcode == EMU_OP_SEND_SE || h->opcode == EMU_OP_SEND_SE_INV;
    if (h->opcode == EMU_OP_SEND_INV || h->opcode == EMU_OP_SEND_SE_INV) {
        cqe.op = EMU_WC_RECV_INV;
        cqe.inv_stag = h->inv_stag;
    }
    qp->rx.have_recv = false;
    qp->rx.ncomp++;
    rx_deliver(qp, &cqe);
}

/* Transmit what the receive path queued (a Read or Atomic Response). */
static void tx_kick(struct emu_qp *qp)
{
    pthread_mutex_lock(&qp->tx.lock);
    qp_tx_pump(qp);
    pthread_mutex_unlock(&qp->tx.lock);
}

/* IRQ producer side (struct qp_irq): room for one more inbound request? */
static bool ird_full(struct emu_qp *qp, uint32_t limit)
{
    uint32_t tail = atomic_load_explicit(&qp->irq.tail, memory_order_relaxed);
    return qp->irq.cap == 0 ||
           tail - atomic_load_explicit(&qp->irq.head, memory_order_acquire) >= limit;
}

/* Queue an inbound Read or Atomic Request's answer; published with release
 * so the transmit side sees the whole entry. */
static void ird_push(struct emu_qp *qp, const struct ird_ent *e)
{
    uint32_t tail = atomic_load_explicit(&qp->irq.tail, memory_order_relaxed);
    qp->irq.ent[tail % qp->irq.cap] = *e;
    atomic_store_explicit(&qp->irq.tail, tail + 1, memory_order_release);
}

static int read_request(struct emu_qp *qp, bool engine)
{
    const struct emu_rdmap_read_req *r = &qp->rx.h.u.rreq;
    /* A softdat peer (capability marker) may have zero-length placement
     * probes out beyond our IRD (QP_PROBES_MAX); the ring has room. */
    uint32_t limit = (r->size == 0 && qp->link.caps != 0) ? qp->irq.cap : qp->link.ird;
    if (ird_full(qp, limit))
        return rx_fail_code(qp, EMU_TERM_RDMAP, EMU_TERM_RDMAP_OPERATION,
                            EMU_RDMAP_EC_CATA_STREAM, engine);
    /* The Read Responses carry sink_to + offset as their tagged offset: a
     * sink range that wraps 2^64 could only be answered with FPDUs the
     * requester must reject (DDP tagged "TO wrap", blaming us). Refuse the
     * request as a wrapping source range is refused (found by fuzz_qp_rx,
     * docs/reliability.md). */
    if (r->size && r->sink_to + r->size - 1 < r->sink_to)
        return rx_fail_code(qp, EMU_TERM_RDMAP, EMU_TERM_RDMAP_PROTECTION,
                            EMU_RDMAP_EC_TO_WRAP, engine);
    struct ird_ent e;
    memset(&e, 0, sizeof e);
    e.sink_stag = r->sink_stag;
    e.sink_to = r->sink_to;
    e.size = r->size;
    if (r->size) {
        enum emu_mem_status st =
            emu_mem_check_remote(qp->a.mem, r->src_stag, r->src_to, r->size, EMU_MEM_OP_READ,
                                 qp->a.pz, qp->link.conn_id, &e.ref);
        if (st != EMU_MEM_OK) {
            struct emu_mem_term mt = emu_mem_term_code(st, EMU_MEM_OP_READ);
            SD_DBG("qp", "%p Read of %#x+%#llx len %u refused: %s", (void *)qp, r->src_stag,
                   (unsigned long long)r->src_to, r->size, emu_mem_status_str(st));
            return rx_fail_code(qp, mt.layer, mt.etype, mt.ecode, engine);
        }
    }
    ird_push(qp, &e);
    /* A zero-length Read met by a polling consumer thread (a placement
     * probe, typically right behind the data this thread is about to hand
     * to its application): answer it with the next bytes this QP sends, or
     * at the next poll, so that the answer does not cost a system call in
     * front of the application seeing its data. Only while the engine is
     * parked by a lease: its timer then flushes the answer at the latest
     * when the lease runs out, whatever this thread does next. */
    if (r->size == 0 && !engine && qp_engine_parked(qp))
        atomic_store_explicit(&qp->irq.deferred, true, memory_order_relaxed);
    else
        tx_kick(qp);
    return 0;
}

static int read_response_done(struct emu_qp *qp, bool engine)
{
    pthread_mutex_lock(&qp->tx.lock);
    uint32_t idx = qp->rx.rresp_sq_idx;
    if (qp->rx.rresp_probe) {
        qp->orq.head++;
        qp->orq.probes_out--;
        qp_sq_confirm(qp, idx);
        qp_tx_pump(qp); /* the next probe, a stalled Read, a graceful disconnect */
        pthread_mutex_unlock(&qp->tx.lock);
        qp->rx.rresp_off = 0;
        qp->rx.ncomp++;
        return 0;
    }
    struct sq_wqe *w = sq_at(qp, idx);
    bool ok = qp->rx.rresp_off == w->len;
    if (ok) {
        qp->orq.head++;
        qp->orq.reads_out--;
        qp_sq_confirm(qp, idx);
        qp_sq_report(qp, idx, EMU_WC_SUCCESS, (uint32_t)w->len);
        qp_tx_pump(qp); /* ORD freed: a stalled Read may go */
    } else {
        w->has_err = true;
        w->err = EMU_WC_BAD_RESP;
    }
    pthread_mutex_unlock(&qp->tx.lock);
    qp->rx.rresp_off = 0;
    if (!ok)
        return rx_fail_code(qp, EMU_TERM_DDP, EMU_TERM_DDP_TAGGED, EMU_DDP_EC_T_BOUNDS,
                            engine);
    qp->rx.ncomp++;
    return 0;
}

/* RFC 7306 Immediate Data: consumes a receive, no payload. */
static int immediate(struct emu_qp *qp, bool engine)
{
    const struct emu_ddp_hdr *h = &qp->rx.h;
    (void)engine;
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
                    unsigned s = (unsigned)((orig >> b) & 1) + (unsigned)((a->add_swap >> b) & 1) +
                                 carry;
                    nv |= (uint64_t)(s & 1) << b;
                    carry = (s >> 1) && !((a->add_swap_mask >> b) & 1);
                }
            }
        } else {
            if (((orig ^ a->compare) & a->compare_mask) != 0)
                return orig;
            nv = (orig & ~a->add_swap_mask) | (a->add_swap & a->add_swap_mask);
        }
        if (__atomic_compare_exchange_n(p, &orig, nv, false, __ATOMIC_ACQ_REL,
                                        __ATOMIC_ACQUIRE))
            return orig;
    }
    return orig;
}

static int atomic_request(struct emu_qp *qp, bool engine)
{
    const struct emu_rdmap_atomic_req *a = &qp->rx.h.u.areq;
    if (ird_full(qp, qp->link.ird))
        return rx_fail_code(qp, EMU_TERM_RDMAP, EMU_TERM_RDMAP_OPERATION,
                            EMU_RDMAP_EC_CATA_STREAM, engine);
    struct emu_mem_ref ref;
    memset(&ref, 0, sizeof ref);
    enum emu_mem_status st = emu_mem_check_remote(qp->a.mem, a->stag, a->to, 8,
                                                  EMU_MEM_OP_ATOMIC, qp->a.pz, qp->link.conn_id, &ref);
    if (st == EMU_MEM_OK && ((uintptr_t)ref.ptr & 7u)) {
        emu_mem_put(&ref);
        st = EMU_MEM_E_BOUNDS; /* misaligned target */
    }
    if (st != EMU_MEM_OK) {
        struct emu_mem_term mt = emu_mem_term_code(st, EMU_MEM_OP_ATOMIC);
        return rx_fail_code(qp, mt.layer, mt.etype, mt.ecode, engine);
    }
    struct ird_ent e;
    memset(&e, 0, sizeof e);
    e.atomic = true;
    e.req_id = a->req_id;
    e.orig = do_atomic((uint64_t *)ref.ptr, a);
    emu_mem_put(&ref);
    ird_push(qp, &e);
    tx_kick(qp);
    return 0;
}

static int atomic_response(struct emu_qp *qp, bool engine)
{
    const struct emu_rdmap_atomic_resp *r = &qp->rx.h.u.aresp;
    pthread_mutex_lock(&qp->tx.lock);
    bool ok = false;
    if (qp->orq.head != qp->orq.tail && !orq_at(qp, qp->orq.head)->probe) {
        uint32_t idx = orq_at(qp, qp->orq.head)->idx;
        struct sq_wqe *w = sq_at(qp, idx);
        if ((w->op == EMU_WR_FETCH_ADD || w->op == EMU_WR_CMP_SWAP) && w->msn == r->req_id) {
            memcpy(w->sge[0].addr, &r->orig, 8);
            qp->orq.head++;
            qp->orq.reads_out--;
            qp_sq_confirm(qp, idx);
            qp_sq_report(qp, idx, EMU_WC_SUCCESS, 8);
            qp_tx_pump(qp);
            ok = true;
        }
    }
    pthread_mutex_unlock(&qp->tx.lock);
    if (!ok)
        return rx_fail_code(qp, EMU_TERM_RDMAP, EMU_TERM_RDMAP_OPERATION, EMU_RDMAP_EC_OPCODE,
                            engine);
    qp->rx.ncomp++;
    return 0;
}

/* Trailer read: check CRC, then act on the segment. */
/* What a peer with InfiniBand semantics waits to have confirmed (emu_qp_quiesce). */
static void count_placement(struct emu_qp *qp, const struct emu_ddp_hdr *h)
{
    if (!h->last)
        return;
    switch (h->opcode) {
    case EMU_OP_SEND:
    case EMU_OP_SEND_INV:
    case EMU_OP_SEND_SE:
    case EMU_OP_SEND_SE_INV:
    case EMU_OP_WRITE:
    case EMU_OP_IMM:
    case EMU_OP_IMM_SE:
        qp->rx.placed++;
        break;
    case EMU_OP_READ_REQ:
    case EMU_OP_ATOMIC_REQ:
        qp->rx.confirmed = qp->rx.placed;
        break;
    default:
        break;
    }
}

static int seg_done(struct emu_qp *qp, bool engine)
{
    struct emu_ddp_hdr *h = &qp->rx.h;
    if (qp->link.crc) {
        unsigned pad = qp->rx.trl_need - 4;
        uint32_t c = emu_crc32c(qp->rx.crc_acc, qp->rx.trl, pad);
        if (c != emu_crc32c_get_le(qp->rx.trl + pad)) {
            struct emu_term t;
            emu_term_init(&t, EMU_TERM_LLP, EMU_TERM_LLP_MPA, EMU_MPA_LLP_CRC, NULL, 0, 0);
            return rx_fail(qp, &t, EBADMSG, engine);
        }
    }
    qp->rx.fpdus++;
    emu_mem_put(&qp->rx.wref);
    if (qp->rx.release_tx) {
        qp->rx.release_tx = false;
        pthread_mutex_lock(&qp->tx.lock);
        qp->tx.hold = false;
        qp_tx_pump(qp);
        pthread_mutex_unlock(&qp->tx.lock);
    }
    if (!h->tagged)
        emu_ddp_rx_advance(&qp->rx.ddp, h);
    if (h->opcode == EMU_OP_WRITE) {
        qp->rx.wlen += h->payload_len;
        if (h->last) {
            qp->rx.last_wlen = qp->rx.wlen > UINT32_MAX ? UINT32_MAX : (uint32_t)qp->rx.wlen;
            qp->rx.wlen = 0;
            qp->rx.prev_write = true;
        }
    } else if (h->last && h->opcode != EMU_OP_IMM && h->opcode != EMU_OP_IMM_SE) {
        qp->rx.prev_write = false;
    }
    int rc = 0;
    switch (h->opcode) {
    case EMU_OP_SEND:
    case EMU_OP_SEND_INV:
    case EMU_OP_SEND_SE:
    case EMU_OP_SEND_SE_INV:
        if (!h->last)
            break;
        if (h->opcode == EMU_OP_SEND_INV || h->opcode == EMU_OP_SEND_SE_INV) {
            enum emu_mem_status st =
                emu_mem_invalidate(qp->a.mem, h->inv_stag, qp->a.pz, qp->link.conn_id);
            if (st != EMU_MEM_OK) {
                struct emu_mem_term mt = emu_mem_term_code(st, EMU_MEM_OP_INVALIDATE);
                qp->rx.recv_err_set = true;
                qp->rx.recv_err = EMU_WC_LOC_PROT;
                return rx_fail_code(qp, mt.layer, mt.etype, mt.ecode, engine);
            }
        }
        complete_recv(qp);
        break;
    case EMU_OP_READ_RESP:
        qp->rx.rresp_off += h->payload_len;
        if (h->last)
            rc = read_response_done(qp, engine);
        break;
    case EMU_OP_READ_REQ:
        rc = read_request(qp, engine);
        break;
    case EMU_OP_TERMINATE:
        rc = rx_terminate(qp, engine);
        break;
    case EMU_OP_IMM:
    case EMU_OP_IMM_SE:
        rc = immediate(qp, engine);
        break;
    case EMU_OP_ATOMIC_REQ:
        rc = atomic_request(qp, engine);
        break;
    case EMU_OP_ATOMIC_RESP:
        rc = atomic_response(qp, engine);
        break;
    default:
        break;
    }
    count_placement(qp, h);
    qp->rx.phase = RX_LEN;
    qp->rx.hhave = 0;
    qp->rx.hneed = 2;
    qp->rx.kind = RXK_NONE;
    return rc;
}

static void crc_iov(struct emu_qp *qp, const void *p, size_t n)
{
    if (qp->link.crc)
        qp->rx.crc_acc = emu_crc32c(qp->rx.crc_acc, p, n);
}

/* Bytes are placed in address order, as an HCA's DMA writes land:
 * programs written for InfiniBand poll the last byte of an RDMA Write
 * (Open MPI's eager RDMA polls a flag at the end of each fragment) and
 * take the bytes before it as valid once it changes. memcpy gives no such
 * order (glibc uses rep movsb from 4 KiB, whose stores may become visible
 * out of order), so the last QP_RX_ORDERED_TAIL bytes of every copy are
 * stored one by one, ascending, after a release fence. */
static void copy_ordered(void *dst, const void *src, size_t n)
{
    size_t bulk = n > QP_RX_ORDERED_TAIL ? n - QP_RX_ORDERED_TAIL : 0;
    if (bulk)
        memcpy(dst, src, bulk);
#ifdef __SANITIZE_THREAD__
    atomic_signal_fence(memory_order_release); /* TSan models no thread fences */
#else
    atomic_thread_fence(memory_order_release);
#endif
    volatile uint8_t *d = (volatile uint8_t *)dst;
    const uint8_t *s = src;
    for (size_t i = bulk; i < n; i++)
        d[i] = s[i];
}

/* Place n bytes from src into the target iovecs (or drop them). */
static void place(struct emu_qp *qp, const uint8_t *src, size_t n)
{
    crc_iov(qp, src, n);
    qp->rx.pay_left -= (uint32_t)n;
    qp->rx.bytes += n;
    while (n > 0 && qp->rx.tgt_i < qp->rx.tgt_n) {
        struct iovec *v = &qp->rx.tgt[qp->rx.tgt_i];
        size_t k = v->iov_len < n ? v->iov_len : n;
        copy_ordered(v->iov_base, src, k);
        src += k;
        n -= k;
        v->iov_base = (char *)v->iov_base + k;
        v->iov_len -= k;
        if (v->iov_len == 0)
            qp->rx.tgt_i++;
    }
}

/* Account n bytes that readv put into the target iovecs (CRC off only:
 * see qp_rx_run). */
static void placed_direct(struct emu_qp *qp, size_t n)
{
    qp->rx.pay_left -= (uint32_t)n;
    qp->rx.bytes += n;
    while (n > 0 && qp->rx.tgt_i < qp->rx.tgt_n) {
        struct iovec *v = &qp->rx.tgt[qp->rx.tgt_i];
        size_t k = v->iov_len < n ? v->iov_len : n;
        n -= k;
        v->iov_base = (char *)v->iov_base + k;
        v->iov_len -= k;
        if (v->iov_len == 0)
            qp->rx.tgt_i++;
    }
}

static void to_trailer(struct emu_qp *qp)
{
    qp->rx.phase = RX_TRL;
    qp->rx.trl_have = 0;
    qp->rx.trl_need = emu_fpdu_pad(qp->rx.ulpdu_len) + 4;
}

/* Run the state machine over the prefetched bytes. 0, or a negative
 * error once the connection must end. */
static int process(struct emu_qp *qp, bool engine)
{
    for (;;) {
        uint32_t avail = qp->rx.pf_len - qp->rx.pf_off;
        const uint8_t *p = qp->rx.pf + qp->rx.pf_off;
        switch (qp->rx.phase) {
        case RX_LEN:
        case RX_HDR: {
            if (qp->rx.hhave < qp->rx.hneed) {
                if (avail == 0)
                    return 0;
                size_t k = qp->rx.hneed - qp->rx.hhave;
                if (k > avail)
                    k = avail;
                memcpy(qp->rx.hbuf + qp->rx.hhave, p, k);
                qp->rx.hhave += k;
                qp->rx.pf_off += (uint32_t)k;
                if (qp->rx.hhave < qp->rx.hneed)
                    return 0;
            }
            if (qp->rx.phase == RX_LEN) {
                qp->rx.ulpdu_len = emu_get_be16(qp->rx.hbuf + EMU_WIRE_FPDU_ULPDU_LEN);
                qp->rx.phase = RX_HDR;
                qp->rx.hneed = 2 + 2;
                continue;
            }
            size_t need = 0;
            int rc = emu_ddp_parse(qp->rx.hbuf + 2, qp->rx.hhave - 2, qp->rx.ulpdu_len, &qp->rx.ddp,
                                   &qp->rx.h, &need);
            if (rc == EMU_DDP_NEED_MORE) {
                if (2 + need > sizeof qp->rx.hbuf)
                    return rx_fail_code(qp, EMU_TERM_RDMAP, EMU_TERM_RDMAP_OPERATION,
                                        EMU_RDMAP_EC_UNSPECIFIED, engine);
                qp->rx.hneed = 2 + need;
                continue;
            }
            if (rc != EMU_DDP_OK) {
                struct emu_term t;
                if (!emu_ddp_err_term(rc, qp->rx.hbuf + 2, qp->rx.hhave - 2, qp->rx.ulpdu_len, &t))
                    emu_term_init(&t, EMU_TERM_RDMAP, EMU_TERM_RDMAP_OPERATION,
                                  EMU_RDMAP_EC_UNSPECIFIED, NULL, 0, 0);
                SD_DBG("qp", "%p bad header: %s", (void *)qp, emu_ddp_strerror(rc));
                return rx_fail(qp, &t, EPROTO, engine);
            }
            if (qp->link.crc)
                qp->rx.crc_acc = emu_crc32c(0, qp->rx.hbuf, qp->rx.hhave);
            rc = header_done(qp, engine);
            if (rc != 0)
                return rc; /* error, or QP_RX_STALL with the header kept */
            qp->rx.pay_left = qp->rx.h.payload_len;
            qp->rx.phase = RX_PAY;
            continue;
        }
        case RX_PAY:
            if (qp->rx.pay_left == 0) {
                to_trailer(qp);
                continue;
            }
            if (avail == 0)
                return 0;
            {
                uint32_t k = qp->rx.pay_left < avail ? qp->rx.pay_left : avail;
                place(qp, p, k);
                qp->rx.pf_off += k;
            }
            continue;
        case RX_TRL: {
            if (qp->rx.trl_have < qp->rx.trl_need) {
                if (avail == 0)
                    return 0;
                size_t k = qp->rx.trl_need - qp->rx.trl_have;
                if (k > avail)
                    k = avail;
                memcpy(qp->rx.trl + qp->rx.trl_have, p, k);
                qp->rx.trl_have += k;
                qp->rx.pf_off += (uint32_t)k;
                if (qp->rx.trl_have < qp->rx.trl_need)
                    return 0;
            }
            int rc = seg_done(qp, engine);
            if (rc < 0)
                return rc;
            continue;
        }
        default:
            return 0;
        }
    }
}

/* Receiver not ready: stop here. The engine pauses reading and looks again
 * after the RNR timer; a consumer thread leaves it to the engine (once per
 * stall: the engine may have no readable bytes to wake it). */
static int rx_stalled(struct emu_qp *qp, bool engine)
{
    struct emu_conn *c = qp->link.c; /* stable under rx.lock */
    if (engine) {
        if (c)
            emu_conn_set_rx_retry(c, qp->a.rnr_timer_us);
        return EMU_RX_PAUSE;
    }
    if (!qp->rx.rnr_kicked) {
        qp->rx.rnr_kicked = true;
        if (c)
            emu_conn_rx_kick(c);
    }
    return EMU_RX_OK;
}

static int rx_run(struct emu_qp *qp, int fd, bool engine);

/* Receive completions reach the consumer once the bytes read with them are
 * processed: a placement probe right behind a Send is answered (its
 * response handed to the socket) before the consumer learns of the Send
 * and perhaps closes the connection, as an HCA's ACK leaves before the
 * completion is polled. */
int qp_rx_run(struct emu_qp *qp, int fd, bool engine)
{
    int rc = rx_run(qp, fd, engine);
    qp_rx_deliver_pending(qp);
    /* A stalled header sits in the QP, where poll(2) cannot see it:
     * emu_qp_progress_many must look at this QP whatever the socket says. */
    atomic_store_explicit(&qp->poll.rx_held, qp->rx.rnr_since != 0, memory_order_relaxed);
    return rc;
}

void qp_rx_deliver_pending(struct emu_qp *qp)
{
    for (uint32_t i = 0; i < qp->rx.rxc_n; i++)
        if (qp->ops.recv_done)
            qp->ops.recv_done(qp->a.ctx, &qp->rx.rxc[i]);
    qp->rx.rxc_n = 0;
}

static int rx_run(struct emu_qp *qp, int fd, bool engine)
{
    for (int round = 0; round < RX_ROUNDS; round++) {
        int rc = process(qp, engine);
        if (rc < 0)
            return rc;
        if (rc == QP_RX_STALL)
            return rx_stalled(qp, engine);
        ssize_t n;
        /* CRC on: no placement in place. The CRC must cover the bytes that
         * came off the wire, not the target memory read back afterwards:
         * the target's owner may write into it meanwhile (undefined data,
         * but never a false CRC error that breaks the connection). So the
         * payload goes through the prefetch buffer (one more copy). */
        if (!qp->link.crc && qp->rx.phase == RX_PAY && qp->rx.pay_left >= QP_DIRECT_MIN &&
            qp->rx.tgt_i < qp->rx.tgt_n) {
            /* The segment's last bytes come through the prefetch buffer
             * and place(): address order (copy_ordered). */
            size_t want = qp->rx.pay_left - QP_RX_ORDERED_TAIL;
            struct iovec iov[EMU_QP_MAX_SGE + 2];
            uint32_t k = 0;
            for (uint32_t i = qp->rx.tgt_i; i < qp->rx.tgt_n && want > 0; i++) {
                iov[k] = qp->rx.tgt[i];
                if (iov[k].iov_len > want)
                    iov[k].iov_len = want;
                want -= iov[k].iov_len;
                k++;
            }
            /* Only a short tail into the prefetch buffer: enough for the
             * trailer and the next header, so a following large payload
             * is not copied through the buffer. */
            iov[k].iov_base = qp->rx.pf;
            iov[k].iov_len = QP_DIRECT_TAIL;
            k++;
            struct msghdr mh = {.msg_iov = iov, .msg_iovlen = k};
            n = recvmsg(fd, &mh, MSG_DONTWAIT);
            if (n > 0) {
                size_t direct = qp->rx.pay_left - QP_RX_ORDERED_TAIL;
                size_t placed = (size_t)n < direct ? (size_t)n : direct;
                placed_direct(qp, placed);
                qp->rx.pf_off = 0;
                qp->rx.pf_len = (uint32_t)((size_t)n - placed);
            }
        } else {
            n = recv(fd, qp->rx.pf, QP_PF_SIZE, MSG_DONTWAIT);
            if (n > 0) {
                qp->rx.pf_off = 0;
                qp->rx.pf_len = (uint32_t)n;
            }
        }
        if (n == 0)
            return EMU_RX_EOF;
        if (n < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return EMU_RX_OK;
            if (errno == EINTR)
                continue;
            int err = errno;
            /* A reset is the peer's abortive disconnect (DISCONNECTED),
             * anything else a transport failure worth reporting. */
            if (err != ECONNRESET && err != EPIPE)
                qp_fatal(qp, false, NULL, err);
            if (!engine) {
                qp->rx.dead = true;
                qp->rx.err = -err;
            }
            return -err;
        }
    }
    int rc = process(qp, engine);
    if (rc == QP_RX_STALL)
        return rx_stalled(qp, engine);
    return rc < 0 ? rc : EMU_RX_OK;
}
