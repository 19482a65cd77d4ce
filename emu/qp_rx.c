/* Queue pair, receive side: a resumable length -> header -> payload ->
 * trailer state machine per connection. Every header is validated (DDP/RDMAP
 * parse, memory table, receive buffer) before a payload byte is placed.
 * Small FPDUs are parsed out of a 64 KiB prefetch buffer (one recv brings
 * many); with CRC off a payload remainder of 16 KiB or more is read
 * straight into the receive buffer or the target region, with 256 bytes of
 * the prefetch buffer as the last iovec so that the trailer and the next
 * header come in with the same syscall.
 *
 * CRC (when negotiated): an RDMA Write's payload goes through the prefetch
 * buffer and is placed only once its whole FPDU is there and its CRC
 * matched (place_verified), so a damaged frame never changes a region its
 * owner may be watching. A Send's or Read Response's payload goes into
 * memory that is the provider's until the WR completes (rx.cut): it is
 * placed as with CRC off (read in place when large) and the CRC computed
 * over the placed bytes. Either way a mismatch sends Terminate LLP/CRC and
 * breaks the connection, so the damaged message never completes
 * successfully.
 *
 * What each opcode does is in qp_rx_op.c (one handler table); failures
 * leave through qp_rx_fail there.
 *
 * Everything here runs with rx.lock held. */
#include "emu/qp_internal.h"

#include "emu/crc32c.h"
#include "emu/fault.h"
#include "emu/engine.h"
#include "emu/log.h"
#include "emu/mpa.h"
#include "emu/sanitizer.h"
#include "emu/wire.h"
#include "emu/wire_io.h"

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
    qp->rx.hhave = 0;
    qp->rx.hneed = 2;
    qp->rx.pay_left = 0;
    qp->rx.tgt_n = qp->rx.tgt_i = 0;
    qp->rx.trl_have = qp->rx.trl_need = 0;
    qp->rx.pf_off = qp->rx.pf_len = 0;
    qp->rx.small_run = QP_LARGE_RUN; /* until a large payload shows up */
    qp->rx.rresp_off = 0;
    qp->rx.peer_probes = false;
    qp->rx.tx_owed = false;
    qp->rx.placed = qp->rx.confirmed = 0;
    emu_mem_put(&qp->rx.wref);
    memset(&qp->rx.wref, 0, sizeof qp->rx.wref);
}

/* Trailer read: check CRC, then act on the segment (the opcode's finish
 * handler). */
static int seg_done(struct emu_qp *qp)
{
    struct emu_ddp_hdr *h = &qp->rx.h;
    if (qp->link.crc) {
        unsigned pad = qp->rx.trl_need - 4;
        uint32_t c = emu_crc32c(qp->rx.crc_acc, qp->rx.trl, pad);
        if (c != emu_crc32c_get_le(qp->rx.trl + pad)) {
            struct emu_term t;
            emu_term_init(&t, EMU_TERM_LLP, EMU_TERM_LLP_MPA, EMU_MPA_LLP_CRC, NULL, 0, 0);
            return qp_rx_refuse_term(qp, &t, EBADMSG);
        }
    }
    qp->rx.fpdus++;
    if (h->payload_len < QP_DIRECT_MIN)
        qp->rx.small_fpdus++;
    emu_mem_put(&qp->rx.wref);
    if (emu_fault_hit(EMU_FAULT_DROP)) { /* SOFTDAT_FAULT drop=: the connection breaks here */
        struct emu_term t;
        emu_term_init(&t, EMU_TERM_LLP, EMU_TERM_LLP_MPA, EMU_MPA_LLP_CATASTROPHIC, NULL, 0, 0);
        return qp_rx_refuse_term(qp, &t, ECONNABORTED);
    }
    if (qp->rx.release_tx) {
        qp->rx.release_tx = false;
        emu_lock(&qp->tx.lock);
        qp->tx.hold = false;
        qp_tx_pump(qp);
        emu_unlock(&qp->tx.lock);
    }
    if (!h->tagged)
        emu_ddp_rx_advance(&qp->rx.ddp, h);
    int rc = qp_rx_op_finish(qp);
    qp->rx.phase = RX_LEN;
    qp->rx.hhave = 0;
    qp->rx.hneed = 2;
    return rc;
}

/* Bytes are placed in address order, as an HCA's DMA writes land:
 * programs written for InfiniBand poll the last byte of an RDMA Write
 * (Open MPI's eager RDMA polls a flag at the end of each fragment) and
 * take the bytes before it as valid once it changes. memcpy gives no such
 * order (glibc uses rep movsb from 4 KiB, whose stores may become visible
 * out of order), so the last QP_RX_ORDERED_TAIL bytes of every copy are
 * stored by single stores, ascending, after a release fence: aligned
 * 8-byte words where they fit (a byte at a time, a 64-byte Send cost 400
 * instructions), and the very last byte always alone, so that no store
 * that carries it can be seen in part before the bytes below it. */
static void copy_ordered(void *dst, const void *src, size_t n)
{
    size_t bulk = n > QP_RX_ORDERED_TAIL ? n - QP_RX_ORDERED_TAIL : 0;
    if (bulk)
        memcpy(dst, src, bulk);
#if SD_SANITIZER_THREAD
    atomic_signal_fence(memory_order_release); /* TSan models no thread fences */
#else
    atomic_thread_fence(memory_order_release);
#endif
    if (n == 0)
        return;
    volatile uint8_t *d = (volatile uint8_t *)dst;
    const uint8_t *s = src;
    size_t i = bulk, last = n - 1;
    for (; i < last && ((uintptr_t)(d + i) & 7u) != 0; i++)
        d[i] = s[i];
    for (; i + 8 <= last; i += 8) {
        uint64_t w;
        memcpy(&w, s + i, sizeof w);
        *(volatile uint64_t *)(void *)(d + i) = w; /* aligned: the loop above */
    }
    for (; i <= last; i++)
        d[i] = s[i];
}

/* Place n bytes from src into the target iovecs (or drop them). */
static void place_bytes(struct emu_qp *qp, const uint8_t *src, size_t n)
{
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

/* CRC off, or a segment placed cut-through (rx.cut): place what arrived,
 * the CRC (if on) continued over it. */
static void place(struct emu_qp *qp, const uint8_t *src, size_t n)
{
    if (qp->link.crc) {
        qp->rx.crc_acc = emu_crc32c(qp->rx.crc_acc, src, n);
        qp->rx.cut_through += n;
    }
    place_bytes(qp, src, n);
}

/* Account n bytes that readv put into the target iovecs (CRC off, or
 * rx.cut: see rx_run). With CRC on the CRC continues over the placed
 * bytes, read back at once: memory the provider owns until the WR
 * completes, so they are the bytes that came off the wire. */
static void placed_direct(struct emu_qp *qp, size_t n)
{
    qp->rx.pay_left -= (uint32_t)n;
    qp->rx.bytes += n;
    qp->rx.bytes_in_place += n;
    if (qp->link.crc)
        qp->rx.cut_through += n;
    while (n > 0 && qp->rx.tgt_i < qp->rx.tgt_n) {
        struct iovec *v = &qp->rx.tgt[qp->rx.tgt_i];
        size_t k = v->iov_len < n ? v->iov_len : n;
        if (qp->link.crc)
            qp->rx.crc_acc = emu_crc32c(qp->rx.crc_acc, v->iov_base, k);
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

/* CRC on and not rx.cut (an RDMA Write, by default): this segment's
 * payload waits whole in the prefetch buffer and is placed only once its
 * CRC matched (place_verified); otherwise it is placed as it arrives. */
static bool placed_when_verified(const struct emu_qp *qp)
{
    return qp->link.crc && !qp->rx.cut;
}

/* CRC on, an RDMA Write (not rx.cut): a frame whose CRC fails must not
 * change target memory (an RNIC that places cut-through, as siw does, lets
 * a corrupted Write land before its Terminate). So the payload is placed
 * only once the whole rest of the FPDU (payload, pad, CRC: at most 65,528
 * bytes, within the prefetch buffer) is in and checked. Returns 0 when
 * placed (the trailer follows, already known good), 1 to wait for more
 * bytes (they stay in the prefetch buffer, which rx_run then fills behind
 * them), or QP_RX_FAILED. */
static int place_verified(struct emu_qp *qp)
{
    uint32_t avail = qp->rx.pf_len - qp->rx.pf_off;
    const uint8_t *p = qp->rx.pf + qp->rx.pf_off;
    uint32_t pad = emu_fpdu_pad(qp->rx.ulpdu_len);
    if (avail < qp->rx.pay_left + pad + 4)
        return 1;
    uint32_t acc = emu_crc32c(qp->rx.crc_acc, p, qp->rx.pay_left);
    if (emu_crc32c(acc, p + qp->rx.pay_left, pad) != emu_crc32c_get_le(p + qp->rx.pay_left + pad)) {
        struct emu_term t;
        emu_term_init(&t, EMU_TERM_LLP, EMU_TERM_LLP_MPA, EMU_MPA_LLP_CRC, NULL, 0, 0);
        return qp_rx_refuse_term(qp, &t, EBADMSG);
    }
    qp->rx.crc_acc = acc;
    uint32_t n = qp->rx.pay_left;
    place_bytes(qp, p, n);
    qp->rx.pf_off += n;
    to_trailer(qp);
    return 0;
}

/* Collect a header or trailer from the prefetch buffer into dst until
 * *have reaches need; false: the buffer ran out first. */
static bool gather(struct emu_qp *qp, uint8_t *dst, size_t *have, size_t need)
{
    if (*have < need) {
        size_t avail = qp->rx.pf_len - qp->rx.pf_off;
        size_t k = need - *have < avail ? need - *have : avail;
        memcpy(dst + *have, qp->rx.pf + qp->rx.pf_off, k);
        *have += k;
        qp->rx.pf_off += (uint32_t)k;
    }
    return *have >= need;
}

/* Run the state machine over the prefetched bytes: 0 (all used, or an FPDU
 * waits whole in the buffer for its CRC check), QP_RX_STALL (a header waits
 * for a posted receive) or QP_RX_FAILED. */
static int process(struct emu_qp *qp)
{
    for (;;) {
        uint32_t avail = qp->rx.pf_len - qp->rx.pf_off;
        const uint8_t *p = qp->rx.pf + qp->rx.pf_off;
        switch (qp->rx.phase) {
        case RX_LEN:
        case RX_HDR: {
            if (!gather(qp, qp->rx.hbuf, &qp->rx.hhave, qp->rx.hneed))
                return 0;
            if (qp->rx.phase == RX_LEN) {
                qp->rx.ulpdu_len = emu_get_be16(qp->rx.hbuf + EMU_WIRE_FPDU_ULPDU_LEN);
                qp->rx.phase = RX_HDR;
                qp->rx.hneed = 2 + 2;
                /* The opcode, already in the buffer, tells the header's
                 * length: gather it whole, parse once. */
                if (qp->rx.pf_len - qp->rx.pf_off >= 2) {
                    size_t h = emu_ddp_hdr_len_hint(qp->rx.pf[qp->rx.pf_off + EMU_WIRE_RDMAP_CTRL]);
                    if (h > qp->rx.ulpdu_len)
                        h = qp->rx.ulpdu_len;
                    if (h > 2)
                        qp->rx.hneed = 2 + h;
                }
                continue;
            }
            size_t need = 0;
            int rc = emu_ddp_parse(qp->rx.hbuf + 2, qp->rx.hhave - 2, qp->rx.ulpdu_len, &qp->rx.ddp,
                                   &qp->rx.h, &need);
            if (rc == EMU_DDP_NEED_MORE) {
                if (2 + need > sizeof qp->rx.hbuf)
                    return qp_rx_refuse(qp, EMU_TERM_RDMAP, EMU_TERM_RDMAP_OPERATION,
                                        EMU_RDMAP_EC_UNSPECIFIED);
                qp->rx.hneed = 2 + need;
                continue;
            }
            if (rc != EMU_DDP_OK) {
                struct emu_term t;
                if (!emu_ddp_err_term(rc, qp->rx.hbuf + 2, qp->rx.hhave - 2, qp->rx.ulpdu_len, &t))
                    emu_term_init(&t, EMU_TERM_RDMAP, EMU_TERM_RDMAP_OPERATION,
                                  EMU_RDMAP_EC_UNSPECIFIED, NULL, 0, 0);
                SD_DBG("qp", "%p bad header: %s", (void *)qp, emu_ddp_strerror(rc));
                return qp_rx_refuse_term(qp, &t, EPROTO);
            }
            if (qp->link.crc)
                qp->rx.crc_acc = emu_crc32c(0, qp->rx.hbuf, qp->rx.hhave);
            rc = qp_rx_op_start(qp);
            if (rc != 0)
                return rc; /* failure, or QP_RX_STALL with the header kept */
            qp->rx.pay_left = qp->rx.h.payload_len;
            qp->rx.phase = RX_PAY;
            if (qp->rx.pay_left >= QP_DIRECT_MIN && !placed_when_verified(qp))
                qp->rx.small_run = 0; /* a payload rx_run reads in place */
            else if (qp->rx.small_run < QP_LARGE_RUN)
                qp->rx.small_run++;
            continue;
        }
        case RX_PAY:
            if (qp->rx.pay_left == 0) {
                to_trailer(qp);
                continue;
            }
            if (placed_when_verified(qp)) {
                int rc = place_verified(qp);
                if (rc == 1)
                    return 0; /* the rest of the FPDU is still to come */
                if (rc != 0)
                    return rc;
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
            if (!gather(qp, qp->rx.trl, &qp->rx.trl_have, qp->rx.trl_need))
                return 0;
            int rc = seg_done(qp);
            if (rc != 0)
                return rc;
            continue;
        }
        default:
            return 0;
        }
    }
}

static int rx_run(struct emu_qp *qp, int fd);

/* Whether any two of the remaining target iovecs share a byte. */
static bool tgt_overlap(const struct emu_qp *qp)
{
    for (uint32_t i = qp->rx.tgt_i; i < qp->rx.tgt_n; i++)
        for (uint32_t j = i + 1; j < qp->rx.tgt_n; j++) {
            uintptr_t a = (uintptr_t)qp->rx.tgt[i].iov_base, b = (uintptr_t)qp->rx.tgt[j].iov_base;
            if (a < b + qp->rx.tgt[j].iov_len && b < a + qp->rx.tgt[i].iov_len)
                return true;
        }
    return false;
}

static uint32_t pf_cap(const struct emu_qp *qp)
{
    return qp->link.crc ? QP_PF_ALLOC : QP_PF_SIZE;
}

/* Before a read into the prefetch buffer: bytes process() left waiting (an
 * FPDU checked whole before placement, CRC on) stay where they are if the
 * rest of that FPDU fits behind them, else move to the front. Moving them
 * on every read copied up to 64 KiB per FPDU: a read of the whole buffer
 * held all but the last few bytes of a largest FPDU, the next read only
 * those (QP_PF_CRC_ROOM now makes such a read hold it whole). Returns the
 * number of bytes kept. */
static uint32_t pf_make_room(struct emu_qp *qp)
{
    uint32_t keep = qp->rx.pf_len - qp->rx.pf_off;
    if (keep == 0) {
        qp->rx.pf_off = qp->rx.pf_len = 0;
        return 0;
    }
    if (placed_when_verified(qp) && qp->rx.phase == RX_PAY) {
        uint64_t end = (uint64_t)qp->rx.pf_off + qp->rx.pay_left + emu_fpdu_pad(qp->rx.ulpdu_len) + 4;
        if (end <= QP_PF_ALLOC)
            return keep;
    }
    if (qp->rx.pf_off > 0)
        memmove(qp->rx.pf, qp->rx.pf + qp->rx.pf_off, keep);
    qp->rx.pf_off = 0;
    qp->rx.pf_len = keep;
    return keep;
}

/* (rx.lock) Send the responses the frames processed so far queued. */
static void kick_owed(struct emu_qp *qp)
{
    if (!qp->rx.tx_owed)
        return;
    qp->rx.tx_owed = false;
    emu_lock(&qp->tx.lock);
    qp_tx_pump(qp);
    emu_unlock(&qp->tx.lock);
}

/* Receive completions reach the consumer once the bytes read with them are
 * processed: a placement probe right behind a Send is answered (its
 * response handed to the socket) before the consumer learns of the Send
 * and perhaps closes the connection, as an HCA's ACK leaves before the
 * completion is polled. A failure has gone through qp_rx_fail (rx.dead is
 * set); what it means for the connection is the caller's to decide. */
int qp_rx_run(struct emu_qp *qp, int fd)
{
    int rc = rx_run(qp, fd);
    if (rc == QP_RX_FAILED)
        rc = qp_rx_fail(qp);
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

/* EMU_RX_OK / EMU_RX_EOF, QP_RX_STALL, QP_RX_FAILED, or -errno from the socket. */
static int rx_run(struct emu_qp *qp, int fd)
{
    for (int round = 0; round < RX_ROUNDS; round++) {
        int rc = process(qp);
        kick_owed(qp);
        if (rc != 0)
            return rc;
        ssize_t n;
        size_t asked;
        /* CRC on, an RDMA Write: no placement in place (place_verified).
         * A Send's or Read Response's payload (rx.cut) is read in place as
         * with CRC off, its CRC computed over the placed bytes: memory the
         * provider owns until the WR completes. Not into iovecs that
         * overlap (a receive's SGEs may): a later iovec would overwrite
         * bytes before they are summed. */
        if (qp->rx.phase == RX_PAY && qp->rx.pay_left >= QP_DIRECT_MIN &&
            qp->rx.tgt_i < qp->rx.tgt_n && (!qp->link.crc || (qp->rx.cut && !tgt_overlap(qp)))) {
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
            asked = 0;
            for (uint32_t i = 0; i < k; i++)
                asked += iov[i].iov_len;
            n = emu_wire_recv(qp->link.wire, fd, &mh, MSG_DONTWAIT);
            if (n > 0) {
                size_t direct = qp->rx.pay_left - QP_RX_ORDERED_TAIL;
                size_t placed = (size_t)n < direct ? (size_t)n : direct;
                placed_direct(qp, placed);
                qp->rx.pf_off = 0;
                qp->rx.pf_len = (uint32_t)((size_t)n - placed);
            }
        } else {
            uint32_t keep = pf_make_room(qp);
            asked = pf_cap(qp) - qp->rx.pf_len;
            /* On a stream of large payloads (RDMA pipelines), a pass's
             * first read stops short: the header it brings lets the rest
             * be read in place, where a full buffer would have copied up
             * to 64 KiB of payload (half of every 128 KiB Write of Open
             * MPI's pipeline). Small frames keep the full buffer: one
             * recv(2) for as many as have come. */
            if (keep == 0 && qp->rx.small_run < QP_LARGE_RUN)
                asked = QP_PF_FIRST;
            n = emu_wire_recv1(qp->link.wire, fd, qp->rx.pf + qp->rx.pf_len, asked, MSG_DONTWAIT);
            if (n > 0)
                qp->rx.pf_len += (uint32_t)n;
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
            return -err;
        }
        /* A short read emptied the socket: no recv(2) just to learn EAGAIN.
         * Readiness is level-triggered (the engine's watcher, the polling
         * thread's poll(2)): bytes that come later are seen then. */
        if ((size_t)n < asked)
            break;
    }
    int rc = process(qp);
    kick_owed(qp);
    return rc != 0 ? rc : EMU_RX_OK;
}
