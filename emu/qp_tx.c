/* Queue pair, transmit side: cut send-queue work and Read Responses into
 * FPDUs, coalesce them into one writev, resume partial writes exactly.
 * Everything here runs with tx.lock held. */
#include "emu/qp_internal.h"

#include "emu/crc32c.h"
#include "emu/fault.h"

#include "emu/log.h"

#include <errno.h>
#include <string.h>

void qp_tx_batch_reset(struct txbatch *b)
{
    b->niov = b->iov_pos = b->nrec = b->rec_pos = 0;
    b->rec_done = b->bytes = 0;
    b->stage_used = 0;
}

static bool batch_room(const struct emu_qp *qp)
{
    const struct txbatch *b = &qp->tx.tb;
    /* CRC on: the next FPDU's payload (< mulpdu) may need the staging
     * area (a Read Response's). */
    if (qp->link.crc && b->stage_used + qp->link.mulpdu > QP_TX_STAGE_BYTES)
        return false;
    return b->nrec < QP_TXB_FPDUS && b->niov + 2 + EMU_QP_MAX_SGE <= QP_TXB_IOV &&
           b->bytes < QP_TXB_BYTES;
}

/* CRC on, a Read Response: copy the payload into the staging area and
 * describe it by one iovec there, continuing *crc over the bytes as they
 * are copied (one pass: emu_crc32c_copy). The CRC covers, and the socket
 * is given, the same private bytes: the source is the responder's region,
 * which its owner may write at any time (the Read then returns undefined
 * data, legal), so the bytes the kernel copies later may differ from
 * those summed now, and the peer would break a healthy connection on a
 * false CRC error. An RNIC computes the CRC over the bytes it DMAs; the
 * copy gives the same guarantee. Each FPDU's copy starts on a cache line
 * (QP_TX_STAGE_ALIGN). */
static uint32_t stage_payload(struct txbatch *b, const struct iovec *pay, uint32_t npay,
                              struct iovec *out, uint32_t *crc)
{
    uint8_t *dst = b->stage + b->stage_used;
    size_t n = 0;
    for (uint32_t i = 0; i < npay; i++) {
        *crc = emu_crc32c_copy(*crc, dst + n, pay[i].iov_base, pay[i].iov_len);
        n += pay[i].iov_len;
    }
    b->stage_used = (b->stage_used + (uint32_t)n + QP_TX_STAGE_ALIGN - 1) & ~(QP_TX_STAGE_ALIGN - 1);
    out->iov_base = dst;
    out->iov_len = n;
    return n ? 1 : 0;
}

/* Append one FPDU: header h carrying payload (iovecs), then pad + CRC. */
static bool batch_add(struct emu_qp *qp, const struct emu_ddp_hdr *h, const struct iovec *pay,
                      uint32_t npay, uint32_t paylen, uint8_t kind, uint32_t idx, bool msg_end)
{
    struct txbatch *b = &qp->tx.tb;
    uint32_t r = b->nrec;
    size_t hlen = 0;
    int rc = emu_fpdu_build_hdr(h, paylen, b->hdr[r], EMU_FPDU_HDR_MAX, &hlen);
    if (rc != EMU_DDP_OK) {
        SD_ERR("qp", "%p cannot build FPDU: %s", (void *)qp, emu_ddp_strerror(rc));
        return false;
    }
    size_t tl;
    struct iovec staged;
    if (qp->link.crc && paylen > 0 && kind != TXK_SQ) {
        uint32_t crc = emu_crc32c(0, b->hdr[r], hlen);
        npay = stage_payload(b, pay, npay, &staged, &crc);
        pay = &staged;
        qp->tx.crc_staged += paylen;
        tl = emu_fpdu_trailer_crc(b->hdr[r], crc, b->trl[r]);
    } else {
        /* CRC on, the consumer's own Send or Write: the CRC is computed
         * over its memory in place and the socket is given that memory, as
         * with CRC off. DAT forbids the consumer to modify a DTO's local
         * buffer until the DTO completes, and it completes only once the
         * socket took every byte: the bytes summed now are the bytes sent,
         * whenever the (possibly partial, resumed) writev copies them. */
        if (qp->link.crc)
            qp->tx.crc_in_place += paylen;
        tl = emu_fpdu_build_trailer(b->hdr[r], hlen, pay, (int)npay, qp->link.crc, b->trl[r]);
    }
    b->iov[b->niov].iov_base = b->hdr[r];
    b->iov[b->niov].iov_len = hlen;
    b->niov++;
    for (uint32_t i = 0; i < npay; i++)
        if (pay[i].iov_len)
            b->iov[b->niov++] = pay[i];
    if (qp->link.crc && emu_fault_hit(EMU_FAULT_CRC)) /* SOFTDAT_FAULT crc= */
        b->trl[r][tl - 1] ^= 0xFF;
    b->iov[b->niov].iov_base = b->trl[r];
    b->iov[b->niov].iov_len = tl;
    b->niov++;
    struct txrec *rec = &b->rec[r];
    rec->len = (uint32_t)(hlen + paylen + tl);
    rec->iov_end = b->niov;
    rec->kind = kind;
    rec->idx = idx;
    rec->msg_end = msg_end;
    b->nrec++;
    b->bytes += rec->len;
    return true;
}

/* A local error found while issuing a WR: it completes with st (at flush,
 * in post order) and the connection breaks. */
static void local_fail(struct emu_qp *qp, struct sq_wqe *w, enum emu_wc_status st, int err)
{
    w->has_err = true;
    w->err = st;
    qp->tx.dead = true;
    qp_fatal(qp, false, NULL, err);
    if (qp->link.c)
        emu_conn_fail(qp->link.c, err);
}

static uint32_t next_read_tag(struct emu_qp *qp)
{
    /* Only we interpret it (Read Responses carry it back); never 0. */
    qp->tx.read_seq++;
    return ((qp->tx.read_seq & 0xFFFFFFu) << 8) | 0xA5u;
}

/* The consumer's Reads and atomics may use the negotiated ORD, but with
 * placement_ack never more than it asked for: the connection negotiated
 * one more for the placement probes (lib/provider/ep_cm.c). */
static uint32_t consumer_ord(const struct emu_qp *qp)
{
    if (qp->a.placement_ack && qp->a.ord < qp->link.ord)
        return qp->a.ord;
    return qp->link.ord;
}

static bool ord_full(const struct emu_qp *qp)
{
    uint32_t probes = qp->link.caps != 0 ? 0 : qp->orq.probes_out; /* beyond IRD at a softdat peer */
    return qp->orq.reads_out + probes >= qp->link.ord || qp->orq.reads_out >= consumer_ord(qp);
}

static bool needs_ack(const struct emu_qp *qp, const struct sq_wqe *w);
static void cover_upto(struct emu_qp *qp, uint32_t idx);

/* Start the WR at sq_tx. false: the send queue cannot make progress now. */
static bool start_sq(struct emu_qp *qp)
{
    while (qp->tx.sq_tx != qp->tx.sq_tail) {
        uint32_t idx = qp->tx.sq_tx;
        struct sq_wqe *w = sq_at(qp, idx);
        if ((w->flags & EMU_WR_FENCE) && qp->orq.reads_out > 0)
            return false;
        struct txcur *c = &qp->tx.cur;
        memset(&c->tmpl, 0, sizeof c->tmpl);
        c->idx = idx;
        c->part = 0;
        c->sge = w->sge;
        c->nsge = w->nsge;
        c->base_to = 0;
        switch (w->op) {
        case EMU_WR_BIND: {
            uint32_t stag = 0;
            enum emu_mem_status ms;
            if (w->bind.mr == NULL && w->bind.length == 0) {
                ms = emu_mem_mw_unbind(w->mw);
            } else {
                struct emu_mw_bind_attr ba = w->bind;
                ba.conn_id = qp->link.conn_id;
                ms = emu_mem_mw_bind(w->mw, &ba, &stag);
            }
            qp->tx.sq_tx++;
            w->sink_stag = stag;
            qp_sq_report(qp, idx, ms == EMU_MEM_OK ? EMU_WC_SUCCESS : EMU_WC_BIND_FAILED, 0);
            continue;
        }
        case EMU_WR_SEND:
            if (w->len > qp->a.max_message_size || w->len > UINT32_MAX) {
                local_fail(qp, w, EMU_WC_LOC_LEN, EMSGSIZE);
                return false;
            }
            if (w->flags & EMU_WR_INVALIDATE)
                c->tmpl.opcode = (w->flags & EMU_WR_SOLICITED) ? EMU_OP_SEND_SE_INV
                                                               : EMU_OP_SEND_INV;
            else
                c->tmpl.opcode = (w->flags & EMU_WR_SOLICITED) ? EMU_OP_SEND_SE : EMU_OP_SEND;
            c->tmpl.inv_stag = w->inv_stag;
            w->msn = c->tmpl.msn = qp->tx.msn[EMU_QN_SEND]++;
            emu_ddp_seg_init(&c->seg, w->len,
                             qp->link.mulpdu, false);
            break;
        case EMU_WR_WRITE:
        case EMU_WR_WRITE_IMM:
            if (w->len > qp->a.max_rdma_size) {
                local_fail(qp, w, EMU_WC_LOC_LEN, EMSGSIZE);
                return false;
            }
            c->tmpl.opcode = EMU_OP_WRITE;
            c->tmpl.tagged = true;
            c->tmpl.stag = w->rstag;
            c->base_to = w->rto;
            emu_ddp_seg_init(&c->seg, w->len, qp->link.mulpdu, true);
            break;
        case EMU_WR_READ:
            if (consumer_ord(qp) == 0) {
                qp->tx.sq_tx++;
                qp_sq_report(qp, idx, EMU_WC_LOC_PROT, 0);
                continue;
            }
            if (w->len > qp->a.max_rdma_size || w->len > UINT32_MAX) {
                local_fail(qp, w, EMU_WC_LOC_LEN, EMSGSIZE);
                return false;
            }
            if (ord_full(qp))
                return false; /* ORD exhausted: the queue stalls in order */
            c->tmpl.opcode = EMU_OP_READ_REQ;
            w->msn = c->tmpl.msn = qp->tx.msn[EMU_QN_READ_REQ]++;
            w->sink_stag = next_read_tag(qp);
            c->tmpl.u.rreq.sink_stag = w->sink_stag;
            c->tmpl.u.rreq.sink_to = 0;
            c->tmpl.u.rreq.size = (uint32_t)w->len;
            c->tmpl.u.rreq.src_stag = w->rstag;
            c->tmpl.u.rreq.src_to = w->rto;
            c->nsge = 0;
            emu_ddp_seg_init(&c->seg, 0, qp->link.mulpdu, false);
            qp->orq.reads_out++;
            *orq_at(qp, qp->orq.tail++) = (struct rd_ent){.idx = idx};
            cover_upto(qp, idx);
            break;
        case EMU_WR_FETCH_ADD:
        case EMU_WR_CMP_SWAP:
            if (consumer_ord(qp) == 0) {
                qp->tx.sq_tx++;
                qp_sq_report(qp, idx, EMU_WC_LOC_PROT, 0);
                continue;
            }
            if (ord_full(qp))
                return false; /* atomics share ORD with Reads */
            c->tmpl.opcode = EMU_OP_ATOMIC_REQ;
            w->msn = c->tmpl.msn = qp->tx.msn[EMU_QN_READ_REQ]++;
            c->tmpl.u.areq.req_id = w->msn;
            c->tmpl.u.areq.stag = w->rstag;
            c->tmpl.u.areq.to = w->rto;
            if (w->op == EMU_WR_FETCH_ADD) {
                c->tmpl.u.areq.op = EMU_ATOMIC_FETCH_ADD;
                c->tmpl.u.areq.add_swap = w->a1;
            } else {
                /* IB semantics: full compare and swap masks */
                c->tmpl.u.areq.op = EMU_ATOMIC_CMP_SWAP;
                c->tmpl.u.areq.compare = w->a1;
                c->tmpl.u.areq.add_swap = w->a2;
                c->tmpl.u.areq.compare_mask = UINT64_MAX;
                c->tmpl.u.areq.add_swap_mask = UINT64_MAX;
            }
            c->nsge = 0;
            emu_ddp_seg_init(&c->seg, 0, qp->link.mulpdu, false);
            qp->orq.reads_out++;
            *orq_at(qp, qp->orq.tail++) = (struct rd_ent){.idx = idx};
            cover_upto(qp, idx);
            break;
        default:
            local_fail(qp, w, EMU_WC_LOC_QP, EOPNOTSUPP);
            return false;
        }
        w->st = WQ_TX;
        qp->tx.sq_tx++;
        if (needs_ack(qp, w)) {
            qp->tx.ack_tail = qp->tx.sq_tx;
            if (!(w->flags & EMU_WR_QUIET))
                qp->tx.wanted_tail = qp->tx.sq_tx;
            qp->tx.uncovered_bytes += w->len;
        }
        c->kind = TXK_SQ;
        return true;
    }
    return false;
}

static bool start_ird(struct emu_qp *qp)
{
    if (!irq_has_new(qp))
        return false;
    uint32_t slot = qp->irq.tx % qp->irq.cap;
    struct ird_ent *e = &qp->irq.ent[slot];
    struct txcur *c = &qp->tx.cur;
    memset(&c->tmpl, 0, sizeof c->tmpl);
    if (e->atomic) {
        c->tmpl.opcode = EMU_OP_ATOMIC_RESP;
        c->tmpl.msn = qp->tx.msn[EMU_QN_ATOMIC_RESP]++;
        c->tmpl.u.aresp.req_id = e->req_id;
        c->tmpl.u.aresp.orig = e->orig;
        c->nsge = 0;
        c->idx = slot;
        c->part = 0;
        emu_ddp_seg_init(&c->seg, 0, qp->link.mulpdu, false);
        c->kind = TXK_IRD;
        qp->irq.tx++;
        return true;
    }
    c->tmpl.opcode = EMU_OP_READ_RESP;
    c->tmpl.tagged = true;
    c->tmpl.stag = e->sink_stag;
    c->base_to = e->sink_to;
    c->one.addr = e->ref.ptr;
    c->one.len = e->size;
    c->sge = &c->one;
    c->nsge = e->size ? 1 : 0;
    c->idx = slot;
    c->part = 0;
    emu_ddp_seg_init(&c->seg, e->size, qp->link.mulpdu, true);
    c->kind = TXK_IRD;
    qp->irq.tx++;
    return true;
}

/* placement_ack: a zero-length RDMA Read after Sends/Writes awaiting
 * confirmation. The peer answers it only once it has processed (placed)
 * everything before it on the stream: its response confirms them. Towards
 * a softdat peer up to QP_PROBES_MAX are outstanding, beyond its IRD (it
 * makes room for them); towards another iWARP peer one, within the
 * negotiated ORD, shared with the consumer's Reads (any Read Response
 * confirms the same way). Due when the send queue ran dry (so the probe
 * leaves in the same writev as the data), or when half of it waits.
 * Unless only quiet WRs wait (probe_may_wait).
 */
static bool probe_may_wait(struct emu_qp *qp, int32_t uncovered);

static bool probe_due(struct emu_qp *qp, bool sq_dry)
{
    int32_t uncovered = (int32_t)(qp->tx.ack_tail - qp->orq.covered);
    if (uncovered <= 0)
        return false;
    if (qp->link.caps != 0 ? qp->orq.probes_out >= QP_PROBES_MAX
                      : qp->orq.probes_out > 0 || qp->orq.reads_out >= qp->link.ord)
        return false;
    /* A small message behind a large one's probe does not wait for that
     * answer, which comes only once the large payload is read: the held
     * probe would then leave alone, a system call of its own (Open MPI's
     * FIN behind the next fragment's 128 KiB Write). */
    if (qp->orq.probes_out > 0 && !qp->tx.probe_was_large &&
        qp->tx.uncovered_bytes < QP_PROBE_BATCH_BYTES && (uint32_t)uncovered * 4 < qp->tx.sq_cap)
        return false; /* the answer to the probe out brings the next one (rresp_finish) */
    if (!sq_dry && (uint32_t)uncovered * 2 < qp->tx.sq_cap)
        return false;
    return !probe_may_wait(qp, uncovered);
}

/* Only WRs whose success makes no event (DAT's suppressed completions)
 * wait for confirmation: nobody waits for the probe, as an HCA's ACK of
 * such a message is coalesced with later ones. It leaves with the next
 * post that wants one (a signalled WR's probe covers everything before
 * it), or, owed, when half the send queue waits, when the posting thread
 * sleeps, or after a bound (flush_deferred): while a consumer holds the
 * lease (the engine parked behind it), its pass QP_PROBE_DEFER_US later or
 * the engine's look when the lease runs out; without one, the engine's
 * timer QP_PROBE_DEFER_ENGINE_US later (qp_probe_look). So a ping-pong
 * with suppressed completions carries no probe and no answer per message,
 * polled or not (a blocking Write ping-pong, which the engine places,
 * carried three FPDUs a message). The peer closing meanwhile waits for the
 * probe (emu_qp_quiesce) at most that long; our own graceful disconnect
 * sends it at once. */
static bool probe_may_wait(struct emu_qp *qp, int32_t uncovered)
{
    if (qp->tx.probe_force || qp->tx.disc_pending || (int32_t)(qp->tx.wanted_tail - qp->orq.covered) > 0 ||
        (uint32_t)uncovered * 2 >= qp->tx.sq_cap || qp->link.c == NULL)
        return false;
    if (!atomic_load_explicit(&qp->tx.probe_owed, memory_order_relaxed)) {
        atomic_store_explicit(&qp->tx.probe_owed_us, qp_clock(), memory_order_relaxed);
        atomic_store(&qp->tx.probe_owed, true);
        if (!qp_engine_parked(qp))
            qp_probe_look(qp);
    }
    return true;
}

static bool needs_ack(const struct emu_qp *qp, const struct sq_wqe *w)
{
    return qp->a.placement_ack && qp->link.ord > 0 &&
           (w->op == EMU_WR_SEND || w->op == EMU_WR_WRITE || w->op == EMU_WR_WRITE_IMM);
}

/* A Read Request about to go out after everything before SQ index idx. */
static void cover_upto(struct emu_qp *qp, uint32_t idx)
{
    if ((int32_t)(idx - qp->orq.covered) > 0)
        qp->orq.covered = idx;
    qp->tx.uncovered_bytes = 0;
    atomic_store_explicit(&qp->tx.probe_owed, false, memory_order_relaxed);
}

static bool start_probe(struct emu_qp *qp)
{
    struct txcur *c = &qp->tx.cur;
    memset(&c->tmpl, 0, sizeof c->tmpl);
    c->tmpl.opcode = EMU_OP_READ_REQ;
    c->tmpl.msn = qp->tx.msn[EMU_QN_READ_REQ]++;
    uint32_t stag = next_read_tag(qp);
    c->tmpl.u.rreq.sink_stag = stag; /* size 0: no source STag is checked */
    c->sge = NULL;
    c->nsge = 0;
    c->base_to = 0;
    c->part = 0;
    c->idx = 0;
    emu_ddp_seg_init(&c->seg, 0, qp->link.mulpdu, false);
    c->kind = TXK_PROBE;
    *orq_at(qp, qp->orq.tail++) = (struct rd_ent){.idx = qp->tx.sq_tx, .probe = true, .stag = stag};
    qp->orq.probes_out++;
    qp->tx.probe_was_large = qp->tx.uncovered_bytes >= QP_PROBE_BATCH_BYTES;
    cover_upto(qp, qp->tx.sq_tx);
    qp->orq.probes++;
    return true;
}

/* Pick the next message at a message boundary: Read Responses and our own
 * send queue alternate, responses in arrival order. */
static bool start_next(struct emu_qp *qp)
{
    bool ird = irq_has_new(qp);
    if (ird && qp->tx.last_was_resp == false) {
        qp->tx.last_was_resp = true;
        return start_ird(qp);
    }
    if (probe_due(qp, false))
        return start_probe(qp);
    if (start_sq(qp)) {
        qp->tx.last_was_resp = false;
        return true;
    }
    if (probe_due(qp, true))
        return start_probe(qp);
    if (ird && !qp->tx.dead) {
        qp->tx.last_was_resp = true;
        return start_ird(qp);
    }
    return false;
}

static void fill_batch(struct emu_qp *qp)
{
    struct txcur *c = &qp->tx.cur;
    while (!qp->tx.dead && batch_room(qp)) {
        if (c->kind == TXK_NONE && !start_next(qp))
            break;
        struct emu_ddp_seg_info si;
        if (!emu_ddp_seg_next(&c->seg, &si)) {
            c->kind = TXK_NONE;
            continue;
        }
        struct emu_ddp_hdr h = c->tmpl;
        emu_ddp_seg_apply(&h, c->base_to, &si);
        struct iovec pay[EMU_QP_MAX_SGE];
        uint32_t npay = qp_sge_slice(c->sge, c->nsge, si.off, si.len, pay, EMU_QP_MAX_SGE);
        /* Write with immediate: the Immediate Data message follows the
         * Write's last segment and ends the WR. */
        bool more = si.last && c->kind == TXK_SQ && c->part == 0 &&
                    sq_at(qp, c->idx)->op == EMU_WR_WRITE_IMM;
        bool end = si.last && !more;
        if (!batch_add(qp, &h, pay, npay, si.len, c->kind, c->idx, end)) {
            if (c->kind == TXK_SQ)
                local_fail(qp, sq_at(qp, c->idx), EMU_WC_LOC_QP, EPROTO);
            else
                qp->tx.dead = true;
            c->kind = TXK_NONE;
            break;
        }
        if (more) {
            struct sq_wqe *w = sq_at(qp, c->idx);
            c->part = 1;
            memset(&c->tmpl, 0, sizeof c->tmpl);
            c->tmpl.opcode = (w->flags & EMU_WR_SOLICITED) ? EMU_OP_IMM_SE : EMU_OP_IMM;
            w->msn = c->tmpl.msn = qp->tx.msn[EMU_QN_SEND]++;
            emu_rdmap_imm_from_u32(c->tmpl.u.imm, w->imm);
            c->nsge = 0;
            c->base_to = 0;
            emu_ddp_seg_init(&c->seg, 0, qp->link.mulpdu, false);
        }
        if (end)
            c->kind = TXK_NONE;
    }
}

static void rec_complete(struct emu_qp *qp, const struct txrec *r)
{
    qp->tx.fpdus++;
    qp->tx.bytes += r->len;
    if (!r->msg_end)
        return;
    switch (r->kind) {
    case TXK_SQ: {
        struct sq_wqe *w = sq_at(qp, r->idx);
        if (w->op == EMU_WR_READ || w->op == EMU_WR_FETCH_ADD || w->op == EMU_WR_CMP_SWAP) {
            if (w->st == WQ_TX)
                w->st = WQ_WAIT;
        } else if (needs_ack(qp, w)) {
            if (w->st == WQ_TX) {
                w->st = WQ_ACK;
                qp->tx.unacked++;
            }
        } else {
            qp_sq_report(qp, r->idx, EMU_WC_SUCCESS, (uint32_t)w->len);
        }
        break;
    }
    case TXK_IRD:
        irq_pop(qp, r->idx);
        break;
    case TXK_CTRL:
        qp->tx.dead = true;
        break;
    default:
        break;
    }
}

static void consume(struct emu_qp *qp, size_t n)
{
    struct txbatch *b = &qp->tx.tb;
    size_t left = n;
    while (left > 0 && b->iov_pos < b->niov) {
        struct iovec *v = &b->iov[b->iov_pos];
        if (left >= v->iov_len) {
            left -= v->iov_len;
            b->iov_pos++;
        } else {
            v->iov_base = (char *)v->iov_base + left;
            v->iov_len -= left;
            left = 0;
        }
    }
    uint64_t done = (uint64_t)b->rec_done + n;
    while (b->rec_pos < b->nrec && done >= b->rec[b->rec_pos].len) {
        done -= b->rec[b->rec_pos].len;
        struct txrec r = b->rec[b->rec_pos];
        b->rec_pos++;
        rec_complete(qp, &r);
    }
    b->rec_done = (uint32_t)done;
}

static void build_terminate(struct emu_qp *qp)
{
    struct emu_ddp_hdr h;
    emu_term_hdr(&h, &qp->tx.term_out);
    qp->tx.term_pending = false;
    if (!batch_add(qp, &h, NULL, 0, 0, TXK_CTRL, 0, true))
        qp->tx.dead = true;
}

/* Could fill_batch start anything now? Cheaper than finding out by
 * trying: a pump after a writev that took everything, or one called by
 * the receive side for an answer that unblocks nothing (every probe answer
 * of a ping-pong), would otherwise walk start_next for nothing. */
static bool tx_may_start(struct emu_qp *qp)
{
    return qp->tx.term_pending || qp->tx.cur.kind != TXK_NONE || qp->tx.sq_tx != qp->tx.sq_tail ||
           irq_has_new(qp) || probe_due(qp, true);
}

void qp_tx_pump(struct emu_qp *qp)
{
    struct emu_conn *cn = qp->link.c;
    atomic_store_explicit(&qp->irq.deferred, false, memory_order_relaxed);
    if (qp->tx.held) {
        qp->tx.held = 0;
        atomic_store_explicit(&qp->poll.posts_held, false, memory_order_relaxed);
    }
    if (!cn || qp->tx.want_tx || qp->tx.hold)
        return;
    struct txbatch *b = &qp->tx.tb;
    int round;
    for (round = 0; round < QP_TX_ROUNDS; round++) {
        if (b->rec_pos == b->nrec) {
            if (!tx_may_start(qp))
                break;
            qp_tx_batch_reset(b);
            if (qp->tx.term_pending)
                build_terminate(qp);
            else if (!qp->tx.dead)
                fill_batch(qp);
            if (b->nrec == 0)
                break;
        }
        ssize_t n = emu_conn_writev(cn, b->iov + b->iov_pos, (int)(b->niov - b->iov_pos));
        qp_clock_wrote();
        if (n == -EAGAIN || n == 0) {
            qp_set_want_tx(qp, true);
            emu_conn_want_tx(cn, true);
            return;
        }
        if (n < 0) {
            qp->tx.dead = true;
            qp_tx_batch_reset(b);
            if (n != -ENOTCONN && n != -EPIPE) {
                qp_fatal(qp, false, NULL, (int)-n);
                emu_conn_fail(cn, (int)-n);
            }
            return;
        }
        qp->tx.writes++;
        consume(qp, (size_t)n);
    }
    /* The bytes went: now the confirmation a pass left for after the
     * application's turn, which this post (the reply) was. */
    if (round > 0)
        qp_sq_confirm_owed(qp);
    if (round == QP_TX_ROUNDS && (b->rec_pos != b->nrec || !qp->tx.dead)) {
        /* Out of rounds: let the engine continue. Work may be left even
         * when the last batch went out whole and ended a message: WRs,
         * Read Responses or a probe not started yet (they were stranded
         * until the next post when only the batch and the message in
         * progress were looked at). */
        qp_set_want_tx(qp, true);
        emu_conn_want_tx(cn, true);
        return;
    }
    if (qp->tx.disc_pending && !qp->tx.disc_done &&
        (qp->tx.dead || (qp->tx.cur.kind == TXK_NONE && qp->tx.sq_tx == qp->tx.sq_tail &&
                         irq_empty(qp) && qp->tx.unacked == 0))) {
        qp->tx.disc_done = true;
        emu_conn_disconnect(cn, true);
    }
}

/* After a Terminate: the bytes of the batch not written yet (the rest of
 * the FPDU in flight, or the Terminate) are copied to the connection as
 * its last words (emu_conn_last_words), in stream order; the batch is
 * emptied: nothing more leaves this QP. */
static void hand_over_rest(struct emu_qp *qp)
{
    struct emu_conn *cn = qp->link.c;
    struct txbatch *b = &qp->tx.tb;
    int rc = 0;
    for (int pass = 0; pass < 2 && cn != NULL && rc == 0; pass++) {
        if (b->rec_pos == b->nrec) {
            qp_tx_batch_reset(b);
            if (!qp->tx.term_pending)
                break;
            build_terminate(qp);
        }
        rc = emu_conn_last_words(cn, b->iov + b->iov_pos, (int)(b->niov - b->iov_pos));
        b->rec_pos = b->nrec; /* handed over */
    }
    if (cn != NULL && rc == 0)
        rc = emu_conn_last_words(cn, NULL, 0); /* a FIN behind it even if all was written */
    if (rc != 0 && rc != -ENOTCONN)
        SD_WARN("qp", "%p Terminate not handed to the connection: %s", (void *)qp, strerror(-rc));
    qp->tx.term_pending = false;
    qp_set_want_tx(qp, false);
    qp_tx_batch_reset(b);
}

void qp_tx_terminate(struct emu_qp *qp, const struct emu_term *t)
{
    if (qp->tx.term_pending || qp->tx.dead)
        return;
    struct txbatch *b = &qp->tx.tb;
    qp->tx.term_out = *t;
    qp->tx.term_pending = true;
    qp->tx.hold = false;
    qp->tx.cur.kind = TXK_NONE;
    if (b->rec_pos < b->nrec) {
        if (b->rec_done == 0) {
            qp_tx_batch_reset(b); /* at an FPDU boundary: drop the rest */
        } else {
            /* Finish the FPDU in flight, drop the ones after it. */
            b->nrec = b->rec_pos + 1;
            b->niov = b->rec[b->rec_pos].iov_end;
        }
    }
    /* The Terminate goes out now if the socket takes it. What it does not
     * take (the rest of the FPDU in flight, the Terminate) becomes the
     * connection's last words: the caller ends the connection right after,
     * and the engine writes them, then a FIN, within a bounded linger,
     * instead of the RST that would discard them (finding H2). */
    qp_set_want_tx(qp, false);
    qp_tx_pump(qp);
    hand_over_rest(qp);
    qp->tx.dead = true;
}
