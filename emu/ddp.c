/* DDP/RDMAP header build and validation, FPDU trailer, segmentation.
 * Terminate construction and names live in emu/terminate.c. */
#include "emu/ddp.h"

#include "emu/crc32c.h"
#include "emu/mpa.h"
#include "emu/wire.h"

#include <string.h>

/* ------------------------------------------------------------ opcodes */

bool emu_rdmap_op_valid(unsigned op)
{
    return op < EMU_OP_COUNT;
}

bool emu_rdmap_op_tagged(unsigned op)
{
    return op == EMU_OP_WRITE || op == EMU_OP_READ_RESP;
}

int emu_rdmap_op_qn(unsigned op)
{
    switch (op) {
    case EMU_OP_SEND:
    case EMU_OP_SEND_INV:
    case EMU_OP_SEND_SE:
    case EMU_OP_SEND_SE_INV:
    case EMU_OP_IMM:
    case EMU_OP_IMM_SE:
        return EMU_QN_SEND;
    case EMU_OP_READ_REQ:
    case EMU_OP_ATOMIC_REQ:
        return EMU_QN_READ_REQ;
    case EMU_OP_TERMINATE:
        return EMU_QN_TERMINATE;
    case EMU_OP_ATOMIC_RESP:
        return EMU_QN_ATOMIC_RESP;
    default:
        return -1;
    }
}

bool emu_rdmap_op_has_payload(unsigned op)
{
    return op <= EMU_OP_SEND_SE_INV && op != EMU_OP_READ_REQ;
}

static bool op_has_inv(unsigned op)
{
    return op == EMU_OP_SEND_INV || op == EMU_OP_SEND_SE_INV;
}

const char *emu_rdmap_op_name(unsigned op)
{
    static const char *const names[EMU_OP_COUNT] = {
        "RDMA Write", "RDMA Read Request", "RDMA Read Response", "Send",
        "Send with Invalidate", "Send with SE", "Send with SE and Invalidate",
        "Terminate", "Immediate Data", "Immediate Data with SE",
        "Atomic Request", "Atomic Response"};
    return op < EMU_OP_COUNT ? names[op] : "reserved opcode";
}

/* Header length of a non-Terminate opcode (the Terminate's depends on its
 * hdrct byte). */
static size_t fixed_hlen(unsigned op)
{
    switch (op) {
    case EMU_OP_WRITE:
    case EMU_OP_READ_RESP:
        return EMU_DDP_TAGGED_HLEN;
    case EMU_OP_READ_REQ:
        return EMU_DDP_UNTAGGED_HLEN + EMU_RDMAP_READ_REQ_LEN;
    case EMU_OP_ATOMIC_REQ:
        return EMU_DDP_UNTAGGED_HLEN + EMU_RDMAP_ATOMIC_REQ_LEN;
    case EMU_OP_ATOMIC_RESP:
        return EMU_DDP_UNTAGGED_HLEN + EMU_RDMAP_ATOMIC_RESP_LEN;
    case EMU_OP_IMM:
    case EMU_OP_IMM_SE:
        return EMU_DDP_UNTAGGED_HLEN + EMU_RDMAP_IMM_LEN;
    case EMU_OP_TERMINATE:
        return EMU_DDP_UNTAGGED_HLEN + EMU_RDMAP_TERM_LEN;
    default:
        return EMU_DDP_UNTAGGED_HLEN;
    }
}

size_t emu_ddp_hdr_len_hint(uint8_t rdmap_ctrl)
{
    unsigned op = rdmap_ctrl & EMU_RDMAP_OP_MASK;
    if ((rdmap_ctrl >> 6) != EMU_RDMAP_VERSION || !emu_rdmap_op_valid(op) || op == EMU_OP_TERMINATE)
        return 2;
    return fixed_hlen(op);
}

static size_t term_hlen(uint8_t hdrct, uint8_t ddp_hdr_len)
{
    size_t n = EMU_DDP_UNTAGGED_HLEN + EMU_RDMAP_TERM_LEN;
    if (hdrct & (EMU_TERM_HDRCT_M | EMU_TERM_HDRCT_D))
        n += 2;
    if (hdrct & EMU_TERM_HDRCT_D)
        n += ddp_hdr_len;
    if (hdrct & EMU_TERM_HDRCT_R)
        n += EMU_RDMAP_READ_REQ_LEN;
    return n;
}

size_t emu_ddp_hdr_len(const struct emu_ddp_hdr *h)
{
    if (h->opcode == EMU_OP_TERMINATE)
        return term_hlen(h->u.term.hdrct, h->u.term.ddp_hdr_len);
    return fixed_hlen(h->opcode);
}

/* ------------------------------------------------------------ build */

int emu_fpdu_build_hdr(const struct emu_ddp_hdr *h, uint32_t payload_len, uint8_t *buf,
                       size_t cap, size_t *out_len)
{
    if (!h || !emu_rdmap_op_valid(h->opcode))
        return EMU_DDP_E_INVAL;
    unsigned op = h->opcode;
    bool tagged = emu_rdmap_op_tagged(op);
    bool fixed = !emu_rdmap_op_has_payload(op);
    if (fixed && payload_len)
        return EMU_DDP_E_INVAL;
    if (op == EMU_OP_TERMINATE) {
        const struct emu_term *t = &h->u.term;
        if ((t->hdrct & EMU_TERM_HDRCT_D) && t->ddp_hdr_len != EMU_DDP_TAGGED_HLEN &&
            t->ddp_hdr_len != EMU_DDP_UNTAGGED_HLEN)
            return EMU_DDP_E_INVAL;
        if ((t->hdrct & EMU_TERM_HDRCT_R) && !(t->hdrct & EMU_TERM_HDRCT_D))
            return EMU_DDP_E_INVAL;
        if (t->layer > 0xF || t->etype > 0xF || (t->hdrct & 0x1F))
            return EMU_DDP_E_INVAL;
    }
    if (op == EMU_OP_ATOMIC_REQ && h->u.areq.op > 0xF)
        return EMU_DDP_E_INVAL;
    size_t hlen = emu_ddp_hdr_len(h);
    if (hlen + payload_len > EMU_MPA_ULPDU_MAX)
        return EMU_DDP_E_TOO_BIG;
    if (!buf || cap < 2 + hlen)
        return EMU_DDP_E_NOSPACE;

    emu_put_be16(buf + EMU_WIRE_FPDU_ULPDU_LEN, (uint16_t)(hlen + payload_len));
    uint8_t *p = buf + EMU_WIRE_FPDU_SEG;
    bool last = fixed ? true : h->last;
    p[EMU_WIRE_DDP_CTRL] = (uint8_t)((tagged ? EMU_DDP_T : 0) | (last ? EMU_DDP_L : 0) | EMU_DDP_VERSION);
    p[EMU_WIRE_RDMAP_CTRL] = (uint8_t)(EMU_RDMAP_VERSION << 6 | op);
    if (tagged) {
        emu_put_be32(p + EMU_WIRE_DDP_T_STAG, h->stag);
        emu_put_be64(p + EMU_WIRE_DDP_T_TO, h->to);
    } else {
        emu_put_be32(p + EMU_WIRE_DDP_U_INV_STAG, op_has_inv(op) ? h->inv_stag : 0);
        emu_put_be32(p + EMU_WIRE_DDP_U_QN, (uint32_t)emu_rdmap_op_qn(op));
        emu_put_be32(p + EMU_WIRE_DDP_U_MSN, h->msn);
        emu_put_be32(p + EMU_WIRE_DDP_U_MO, fixed ? 0 : h->mo);
        uint8_t *q = p + EMU_DDP_UNTAGGED_HLEN;
        switch (op) {
        case EMU_OP_READ_REQ:
            emu_put_be32(q + EMU_WIRE_RREQ_SINK_STAG, h->u.rreq.sink_stag);
            emu_put_be64(q + EMU_WIRE_RREQ_SINK_TO, h->u.rreq.sink_to);
            emu_put_be32(q + EMU_WIRE_RREQ_SIZE, h->u.rreq.size);
            emu_put_be32(q + EMU_WIRE_RREQ_SRC_STAG, h->u.rreq.src_stag);
            emu_put_be64(q + EMU_WIRE_RREQ_SRC_TO, h->u.rreq.src_to);
            break;
        case EMU_OP_ATOMIC_REQ:
            emu_put_be32(q + EMU_WIRE_AREQ_OP, h->u.areq.op);
            emu_put_be32(q + EMU_WIRE_AREQ_REQ_ID, h->u.areq.req_id);
            emu_put_be32(q + EMU_WIRE_AREQ_STAG, h->u.areq.stag);
            emu_put_be64(q + EMU_WIRE_AREQ_TO, h->u.areq.to);
            emu_put_be64(q + EMU_WIRE_AREQ_ADD_SWAP, h->u.areq.add_swap);
            emu_put_be64(q + EMU_WIRE_AREQ_ADD_SWAP_MASK, h->u.areq.add_swap_mask);
            emu_put_be64(q + EMU_WIRE_AREQ_COMPARE, h->u.areq.compare);
            emu_put_be64(q + EMU_WIRE_AREQ_COMPARE_MASK, h->u.areq.compare_mask);
            break;
        case EMU_OP_ATOMIC_RESP:
            emu_put_be32(q + EMU_WIRE_ARESP_REQ_ID, h->u.aresp.req_id);
            emu_put_be64(q + EMU_WIRE_ARESP_ORIG, h->u.aresp.orig);
            break;
        case EMU_OP_IMM:
        case EMU_OP_IMM_SE:
            memcpy(q, h->u.imm, EMU_RDMAP_IMM_LEN);
            break;
        case EMU_OP_TERMINATE: {
            const struct emu_term *t = &h->u.term;
            q[EMU_WIRE_TERM_LAYER_ETYPE] = (uint8_t)(t->layer << 4 | t->etype);
            q[EMU_WIRE_TERM_ECODE] = t->ecode;
            q[EMU_WIRE_TERM_HDRCT] = t->hdrct;
            q[EMU_WIRE_TERM_HDRCT + 1] = 0;
            q += EMU_RDMAP_TERM_LEN;
            if (t->hdrct & (EMU_TERM_HDRCT_M | EMU_TERM_HDRCT_D)) {
                emu_put_be16(q, (t->hdrct & EMU_TERM_HDRCT_M) ? t->seg_len : 0);
                q += EMU_WIRE_TERM_SEG_LEN_BYTES;
            }
            if (t->hdrct & EMU_TERM_HDRCT_D) {
                memcpy(q, t->ddp_hdr, t->ddp_hdr_len);
                q += t->ddp_hdr_len;
            }
            if (t->hdrct & EMU_TERM_HDRCT_R)
                memcpy(q, t->rreq_hdr, EMU_RDMAP_READ_REQ_LEN);
            break;
        }
        default:
            break;
        }
    }
    if (out_len)
        *out_len = 2 + hlen;
    return EMU_DDP_OK;
}

size_t emu_fpdu_build_trailer(const uint8_t *hdr, size_t hdr_len,
                              const struct iovec *payload, int iovcnt, bool crc_on,
                              uint8_t *trailer)
{
    if (crc_on) {
        uint32_t c = emu_crc32c(0, hdr, hdr_len);
        return emu_fpdu_trailer_crc(hdr, emu_crc32c_iov(c, payload, iovcnt), trailer);
    }
    memset(trailer, 0, EMU_FPDU_TRAILER_MAX);
    return emu_fpdu_pad(emu_get_be16(hdr)) + EMU_FPDU_CRC_BYTES;
}

size_t emu_fpdu_trailer_crc(const uint8_t *hdr, uint32_t crc, uint8_t *trailer)
{
    unsigned pad = emu_fpdu_pad(emu_get_be16(hdr));
    memset(trailer, 0, EMU_FPDU_TRAILER_MAX);
    crc = emu_crc32c(crc, trailer, pad); /* pad bytes are zero */
    emu_crc32c_put_le(trailer + pad, crc);
    return pad + EMU_FPDU_CRC_BYTES;
}

size_t emu_fpdu_build_ctrl(const struct emu_ddp_hdr *h, bool crc_on, uint8_t *buf, size_t cap)
{
    size_t hlen = 0;
    if (cap < EMU_FPDU_TRAILER_MAX ||
        emu_fpdu_build_hdr(h, 0, buf, cap - EMU_FPDU_TRAILER_MAX, &hlen) != EMU_DDP_OK)
        return 0;
    return hlen + emu_fpdu_build_trailer(buf, hlen, NULL, 0, crc_on, buf + hlen);
}

void emu_ddp_tagged0_hdr(struct emu_ddp_hdr *h, unsigned op, uint32_t stag, uint64_t to)
{
    memset(h, 0, sizeof *h);
    h->opcode = (uint8_t)op;
    h->tagged = true;
    h->last = true;
    h->stag = stag;
    h->to = to;
}

void emu_ddp_read_rtr_hdr(struct emu_ddp_hdr *h)
{
    memset(h, 0, sizeof *h);
    h->opcode = EMU_OP_READ_REQ;
    h->last = true;
    h->qn = EMU_QN_READ_REQ;
    h->msn = 1;
    h->u.rreq.sink_stag = 1;
    h->u.rreq.src_stag = 1;
}

bool emu_fpdu_crc_ok(const struct iovec *fpdu, int iovcnt)
{
    size_t total = 0;
    for (int i = 0; i < iovcnt; i++)
        total += fpdu[i].iov_len;
    if (total < 2 + EMU_FPDU_CRC_BYTES)
        return false;
    size_t body = total - EMU_FPDU_CRC_BYTES, done = 0;
    uint32_t c = 0;
    uint8_t got[4];
    unsigned ng = 0;
    for (int i = 0; i < iovcnt; i++) {
        const uint8_t *b = fpdu[i].iov_base;
        size_t n = fpdu[i].iov_len;
        size_t take = done < body ? (body - done < n ? body - done : n) : 0;
        c = emu_crc32c(c, b, take);
        done += take;
        for (size_t k = take; k < n; k++)
            got[ng++] = b[k];
    }
    return ng == 4 && emu_crc32c_get_le(got) == c;
}

/* ------------------------------------------------------------ segmentation */

uint32_t emu_ddp_seg_max_payload(uint32_t mulpdu, bool tagged)
{
    uint32_t hlen = tagged ? EMU_DDP_TAGGED_HLEN : EMU_DDP_UNTAGGED_HLEN;
    if (mulpdu > EMU_MPA_ULPDU_MAX)
        mulpdu = EMU_MPA_ULPDU_MAX;
    if (mulpdu < hlen + 4)
        return 0;
    /* 2 + hlen is a multiple of 4 for both header kinds, so a payload that
     * is a multiple of 4 needs no pad. */
    return (mulpdu - hlen) & ~3u;
}

int emu_ddp_seg_init(struct emu_ddp_seg *s, uint64_t msg_len, uint32_t mulpdu, bool tagged)
{
    memset(s, 0, sizeof *s);
    s->max_payload = emu_ddp_seg_max_payload(mulpdu, tagged);
    if (!s->max_payload || (!tagged && msg_len > UINT32_MAX)) {
        s->done = true;
        return EMU_DDP_E_INVAL;
    }
    s->msg_len = msg_len;
    return EMU_DDP_OK;
}

bool emu_ddp_seg_next(struct emu_ddp_seg *s, struct emu_ddp_seg_info *out)
{
    if (s->done)
        return false;
    uint64_t left = s->msg_len - s->off;
    uint32_t len = left < s->max_payload ? (uint32_t)left : s->max_payload;
    out->off = s->off;
    out->len = len;
    out->last = len == left;
    s->off += len;
    s->started = true;
    s->done = out->last;
    return true;
}

uint64_t emu_ddp_seg_count(uint64_t msg_len, uint32_t mulpdu, bool tagged)
{
    uint32_t m = emu_ddp_seg_max_payload(mulpdu, tagged);
    if (!m || (!tagged && msg_len > UINT32_MAX))
        return 0;
    if (!msg_len)
        return 1;
    return msg_len / m + (msg_len % m != 0);
}

uint64_t emu_ddp_msg_wire_len(uint64_t msg_len, uint32_t mulpdu, unsigned opcode)
{
    if (!emu_rdmap_op_valid(opcode))
        return 0;
    uint32_t hlen = (uint32_t)fixed_hlen(opcode);
    if (!emu_rdmap_op_has_payload(opcode))
        return msg_len ? 0 : emu_fpdu_wire_len(hlen);
    bool tagged = emu_rdmap_op_tagged(opcode);
    uint32_t m = emu_ddp_seg_max_payload(mulpdu, tagged);
    if (!m || (!tagged && msg_len > UINT32_MAX))
        return 0;
    uint64_t full = msg_len / m, rem = msg_len % m;
    uint64_t w = full * (uint64_t)emu_fpdu_wire_len(hlen + m);
    if (rem || !msg_len)
        w += emu_fpdu_wire_len(hlen + (uint32_t)rem);
    return w;
}

void emu_ddp_seg_apply(struct emu_ddp_hdr *h, uint64_t base_to,
                       const struct emu_ddp_seg_info *si)
{
    h->last = si->last;
    if (emu_rdmap_op_tagged(h->opcode))
        h->to = base_to + si->off;
    else
        h->mo = (uint32_t)si->off;
}

/* ------------------------------------------------------------ parse */

void emu_ddp_rx_init(struct emu_ddp_rx_state *st, bool rfc7306)
{
    memset(st, 0, sizeof *st);
    st->rfc7306 = rfc7306;
    for (int i = 0; i < EMU_QN_COUNT; i++)
        st->q[i].msn = 1;
}

void emu_ddp_rx_advance(struct emu_ddp_rx_state *st, const struct emu_ddp_hdr *h)
{
    if (!st || h->tagged || h->qn >= EMU_QN_COUNT)
        return;
    struct emu_ddp_rx_queue *q = &st->q[h->qn];
    if (h->last) {
        q->msn++;
        q->mo = 0;
        q->in_progress = false;
    } else {
        q->mo = h->mo + h->payload_len;
        q->msn = h->msn;
        q->in_progress = true;
    }
}

int emu_ddp_parse(const uint8_t *p, size_t avail, uint16_t ulpdu_len,
                  const struct emu_ddp_rx_state *st, struct emu_ddp_hdr *h, size_t *need)
{
    size_t dummy;
    if (!need)
        need = &dummy;
    if (avail < 2) {
        *need = 2;
        return ulpdu_len < 2 ? EMU_DDP_E_SHORT_ULPDU : EMU_DDP_NEED_MORE;
    }
    memset(h, 0, sizeof *h);
    uint8_t c0 = p[EMU_WIRE_DDP_CTRL], c1 = p[EMU_WIRE_RDMAP_CTRL];
    h->tagged = c0 & EMU_DDP_T;
    h->last = c0 & EMU_DDP_L;
    h->ddp_rsvd = (c0 & EMU_DDP_RSVD) >> 2;
    h->rdmap_rsvd = (c1 >> 4) & 3;
    h->opcode = c1 & EMU_RDMAP_OP_MASK;
    if ((c0 & EMU_DDP_DV_MASK) != EMU_DDP_VERSION)
        return EMU_DDP_E_DDP_VERSION;
    if ((c1 >> 6) != EMU_RDMAP_VERSION)
        return EMU_DDP_E_RDMAP_VERSION;
    unsigned op = h->opcode;
    if (!emu_rdmap_op_valid(op) || (op >= EMU_OP_IMM && st && !st->rfc7306))
        return EMU_DDP_E_OPCODE;
    if (h->tagged != emu_rdmap_op_tagged(op))
        return EMU_DDP_E_T_MISMATCH;

    size_t hlen = fixed_hlen(op);
    if (ulpdu_len < hlen)
        return EMU_DDP_E_SHORT_ULPDU;
    if (op == EMU_OP_TERMINATE) {
        /* The hdrct byte and, with D, the copied header's T bit decide the
         * length: read them before the rest. */
        if (avail < hlen) {
            *need = hlen;
            return EMU_DDP_NEED_MORE;
        }
        uint8_t hdrct = p[EMU_DDP_UNTAGGED_HLEN + EMU_WIRE_TERM_HDRCT];
        if ((hdrct & EMU_TERM_HDRCT_R) && !(hdrct & EMU_TERM_HDRCT_D))
            return EMU_DDP_E_TERM_HDRCT;
        uint8_t dlen = 0;
        if (hdrct & EMU_TERM_HDRCT_D) {
            size_t at = hlen + EMU_WIRE_TERM_SEG_LEN_BYTES; /* first byte of the copied DDP header */
            if (ulpdu_len < at + 1)
                return EMU_DDP_E_SHORT_ULPDU;
            if (avail < at + 1) {
                *need = at + 1;
                return EMU_DDP_NEED_MORE;
            }
            dlen = (p[at] & EMU_DDP_T) ? EMU_DDP_TAGGED_HLEN : EMU_DDP_UNTAGGED_HLEN;
        }
        hlen = term_hlen(hdrct, dlen);
        if (ulpdu_len < hlen)
            return EMU_DDP_E_SHORT_ULPDU;
    }
    if (avail < hlen) {
        *need = hlen;
        return EMU_DDP_NEED_MORE;
    }
    *need = hlen;
    h->hdr_len = (uint16_t)hlen;
    h->payload_len = ulpdu_len - (uint32_t)hlen;

    if (h->tagged) {
        h->stag = emu_get_be32(p + EMU_WIRE_DDP_T_STAG);
        h->to = emu_get_be64(p + EMU_WIRE_DDP_T_TO);
        if (h->payload_len && h->to + h->payload_len - 1 < h->to)
            return EMU_DDP_E_TO_WRAP;
        return EMU_DDP_OK;
    }

    h->inv_stag = op_has_inv(op) ? emu_get_be32(p + EMU_WIRE_DDP_U_INV_STAG) : 0;
    h->qn = emu_get_be32(p + EMU_WIRE_DDP_U_QN);
    h->msn = emu_get_be32(p + EMU_WIRE_DDP_U_MSN);
    h->mo = emu_get_be32(p + EMU_WIRE_DDP_U_MO);
    if (h->qn != (uint32_t)emu_rdmap_op_qn(op))
        return EMU_DDP_E_QN;
    bool fixed = !emu_rdmap_op_has_payload(op);
    if (op == EMU_OP_TERMINATE && h->msn != 1)
        return EMU_DDP_E_MSN;
    if (st) {
        const struct emu_ddp_rx_queue *q = &st->q[h->qn];
        if (h->msn != q->msn)
            return EMU_DDP_E_MSN;
        if (h->mo != (q->in_progress ? q->mo : 0))
            return EMU_DDP_E_MO;
    } else if (fixed && h->mo != 0) {
        return EMU_DDP_E_MO;
    }
    if ((uint64_t)h->mo + h->payload_len > UINT32_MAX)
        return EMU_DDP_E_MO;
    if (fixed && !h->last)
        return EMU_DDP_E_FIXED_LEN;
    /* A Terminate may carry trailing bytes we don't understand: it is the
     * last message of the stream anyway, so be liberal there. */
    if (fixed && op != EMU_OP_TERMINATE && h->payload_len)
        return EMU_DDP_E_FIXED_LEN;

    const uint8_t *q = p + EMU_DDP_UNTAGGED_HLEN;
    switch (op) {
    case EMU_OP_READ_REQ:
        h->u.rreq.sink_stag = emu_get_be32(q + EMU_WIRE_RREQ_SINK_STAG);
        h->u.rreq.sink_to = emu_get_be64(q + EMU_WIRE_RREQ_SINK_TO);
        h->u.rreq.size = emu_get_be32(q + EMU_WIRE_RREQ_SIZE);
        h->u.rreq.src_stag = emu_get_be32(q + EMU_WIRE_RREQ_SRC_STAG);
        h->u.rreq.src_to = emu_get_be64(q + EMU_WIRE_RREQ_SRC_TO);
        break;
    case EMU_OP_ATOMIC_REQ: {
        uint32_t w = emu_get_be32(q + EMU_WIRE_AREQ_OP);
        h->u.areq.op = w & 0xF;
        h->u.areq.req_id = emu_get_be32(q + EMU_WIRE_AREQ_REQ_ID);
        h->u.areq.stag = emu_get_be32(q + EMU_WIRE_AREQ_STAG);
        h->u.areq.to = emu_get_be64(q + EMU_WIRE_AREQ_TO);
        h->u.areq.add_swap = emu_get_be64(q + EMU_WIRE_AREQ_ADD_SWAP);
        h->u.areq.add_swap_mask = emu_get_be64(q + EMU_WIRE_AREQ_ADD_SWAP_MASK);
        h->u.areq.compare = emu_get_be64(q + EMU_WIRE_AREQ_COMPARE);
        h->u.areq.compare_mask = emu_get_be64(q + EMU_WIRE_AREQ_COMPARE_MASK);
        if (h->u.areq.op != EMU_ATOMIC_FETCH_ADD && h->u.areq.op != EMU_ATOMIC_CMP_SWAP)
            return EMU_DDP_E_ATOMIC_OP;
        break;
    }
    case EMU_OP_ATOMIC_RESP:
        h->u.aresp.req_id = emu_get_be32(q + EMU_WIRE_ARESP_REQ_ID);
        h->u.aresp.orig = emu_get_be64(q + EMU_WIRE_ARESP_ORIG);
        break;
    case EMU_OP_IMM:
    case EMU_OP_IMM_SE:
        memcpy(h->u.imm, q, EMU_RDMAP_IMM_LEN);
        break;
    case EMU_OP_TERMINATE: {
        struct emu_term *t = &h->u.term;
        t->layer = q[EMU_WIRE_TERM_LAYER_ETYPE] >> 4;
        t->etype = q[EMU_WIRE_TERM_LAYER_ETYPE] & 0xF;
        t->ecode = q[EMU_WIRE_TERM_ECODE];
        t->hdrct = q[EMU_WIRE_TERM_HDRCT] & (EMU_TERM_HDRCT_M | EMU_TERM_HDRCT_D | EMU_TERM_HDRCT_R);
        q += EMU_RDMAP_TERM_LEN;
        if (t->hdrct & (EMU_TERM_HDRCT_M | EMU_TERM_HDRCT_D)) {
            t->seg_len = (t->hdrct & EMU_TERM_HDRCT_M) ? emu_get_be16(q) : 0;
            q += EMU_WIRE_TERM_SEG_LEN_BYTES;
        }
        if (t->hdrct & EMU_TERM_HDRCT_D) {
            t->ddp_hdr_len = (q[EMU_WIRE_DDP_CTRL] & EMU_DDP_T) ? EMU_DDP_TAGGED_HLEN : EMU_DDP_UNTAGGED_HLEN;
            memcpy(t->ddp_hdr, q, t->ddp_hdr_len);
            q += t->ddp_hdr_len;
        }
        if (t->hdrct & EMU_TERM_HDRCT_R)
            memcpy(t->rreq_hdr, q, EMU_RDMAP_READ_REQ_LEN);
        break;
    }
    default:
        break;
    }
    return EMU_DDP_OK;
}

const char *emu_ddp_strerror(int err)
{
    static const char *const names[EMU_DDP_E_COUNT] = {
        [EMU_DDP_OK] = "ok",
        [EMU_DDP_NEED_MORE] = "need more header bytes",
        [EMU_DDP_E_DDP_VERSION] = "invalid DDP version",
        [EMU_DDP_E_RDMAP_VERSION] = "invalid RDMAP version",
        [EMU_DDP_E_OPCODE] = "unexpected RDMAP opcode",
        [EMU_DDP_E_T_MISMATCH] = "tagged flag does not match opcode",
        [EMU_DDP_E_QN] = "invalid queue number",
        [EMU_DDP_E_MSN] = "MSN out of range",
        [EMU_DDP_E_MO] = "invalid message offset",
        [EMU_DDP_E_SHORT_ULPDU] = "ULPDU shorter than its header",
        [EMU_DDP_E_FIXED_LEN] = "fixed-size message with payload or not last",
        [EMU_DDP_E_ATOMIC_OP] = "unknown atomic operation",
        [EMU_DDP_E_TERM_HDRCT] = "inconsistent Terminate header-control bits",
        [EMU_DDP_E_TO_WRAP] = "tagged offset wraps",
        [EMU_DDP_E_INVAL] = "invalid argument",
        [EMU_DDP_E_TOO_BIG] = "segment over 65535 bytes",
        [EMU_DDP_E_NOSPACE] = "buffer too small",
    };
    if (err < 0 || err >= EMU_DDP_E_COUNT)
        return "unknown DDP error";
    return names[err];
}

void emu_rdmap_imm_from_u32(uint8_t imm[EMU_RDMAP_IMM_LEN], uint32_t v)
{
    emu_put_be32(imm, v);
    emu_put_be32(imm + 4, 0);
}

uint32_t emu_rdmap_imm_to_u32(const uint8_t imm[EMU_RDMAP_IMM_LEN])
{
    return emu_get_be32(imm);
}
