/* libFuzzer target: the FPDU / DDP / RDMAP header codec (emu/ddp.h) as the
 * receive path uses it: a stream of FPDUs is walked by ULPDU_Length, each
 * header handed to emu_ddp_parse a few bytes at a time (as they would trickle
 * in), accepted segments advance the per-queue MSN/MO state.
 *
 * Input: byte 0 = context (RFC 7306 on, stateless or stateful parse, how
 * many bytes each emu_ddp_parse call first gets), then FPDUs
 * (ULPDU_Length, header, payload, pad, CRC). Properties: NEED_MORE asks for
 * more than was given and never beyond EMU_DDP_HLEN_MAX; an accepted header
 * is consistent (hdr_len = emu_ddp_hdr_len, payload = ULPDU - header) and
 * rebuilding it with emu_fpdu_build_hdr parses back to the same fields;
 * every parse error has a Terminate mapping. */
#include "test/fuzz/fuzz.h"

#include "emu/ddp.h"
#include "emu/mpa.h"

#include <string.h>

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    return 0;
}

#define MAX_SEGS 64

static void same_fields(const struct emu_ddp_hdr *a, const struct emu_ddp_hdr *b)
{
    FUZZ_CHECK(a->opcode == b->opcode && a->tagged == b->tagged && a->last == b->last);
    FUZZ_CHECK(a->hdr_len == b->hdr_len && a->payload_len == b->payload_len);
    if (a->tagged) {
        FUZZ_CHECK(a->stag == b->stag && a->to == b->to);
        return;
    }
    FUZZ_CHECK(a->qn == b->qn && a->msn == b->msn && a->mo == b->mo &&
               a->inv_stag == b->inv_stag);
    switch (a->opcode) {
    case EMU_OP_READ_REQ:
        FUZZ_CHECK(memcmp(&a->u.rreq, &b->u.rreq, sizeof a->u.rreq) == 0);
        break;
    case EMU_OP_TERMINATE:
        FUZZ_CHECK(a->u.term.layer == b->u.term.layer && a->u.term.etype == b->u.term.etype &&
                   a->u.term.ecode == b->u.term.ecode && a->u.term.hdrct == b->u.term.hdrct);
        break;
    case EMU_OP_ATOMIC_REQ:
        FUZZ_CHECK(memcmp(&a->u.areq, &b->u.areq, sizeof a->u.areq) == 0);
        break;
    case EMU_OP_ATOMIC_RESP:
        FUZZ_CHECK(a->u.aresp.req_id == b->u.aresp.req_id && a->u.aresp.orig == b->u.aresp.orig);
        break;
    case EMU_OP_IMM:
    case EMU_OP_IMM_SE:
        FUZZ_CHECK(memcmp(a->u.imm, b->u.imm, sizeof a->u.imm) == 0);
        break;
    default:
        break;
    }
}

/* Rebuild an accepted header and parse it again (stateless). */
static void rebuild(const struct emu_ddp_hdr *h)
{
    uint8_t buf[EMU_FPDU_HDR_MAX];
    size_t n = 0;
    int rc = emu_fpdu_build_hdr(h, h->payload_len, buf, sizeof buf, &n);
    if (rc != EMU_DDP_OK)
        return; /* e.g. a Terminate copy the builder refuses to describe */
    FUZZ_CHECK(n == 2u + h->hdr_len);
    uint16_t ulpdu = (uint16_t)(buf[0] << 8 | buf[1]);
    FUZZ_CHECK(ulpdu == h->hdr_len + h->payload_len);
    struct emu_ddp_hdr g;
    size_t need = 0;
    rc = emu_ddp_parse(buf + 2, n - 2, ulpdu, NULL, &g, &need);
    FUZZ_CHECK(rc == EMU_DDP_OK);
    same_fields(h, &g);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    uint8_t ctl = data[0];
    const uint8_t *p = data + 1;
    size_t len = size - 1;
    struct emu_ddp_rx_state st;
    emu_ddp_rx_init(&st, (ctl & 1) != 0);
    const struct emu_ddp_rx_state *stp = (ctl & 2) ? NULL : &st;
    size_t step = 1u + ((ctl >> 2) & 31u); /* first emu_ddp_parse call gets this many */

    size_t off = 0;
    for (int seg = 0; seg < MAX_SEGS && off + 2 <= len; seg++) {
        uint16_t ulpdu = (uint16_t)(p[off] << 8 | p[off + 1]);
        const uint8_t *hdr = p + off + 2;
        size_t have = len - off - 2;
        struct emu_ddp_hdr h;
        size_t need = 0, avail = step < have ? step : have;
        int rc;
        for (int i = 0;; i++) {
            FUZZ_CHECK(i < 8); /* the header length is known after at most 3 calls */
            rc = emu_ddp_parse(hdr, avail, ulpdu, stp, &h, &need);
            if (rc != EMU_DDP_NEED_MORE)
                break;
            FUZZ_CHECK(need > avail && need <= EMU_DDP_HLEN_MAX);
            if (need > have)
                return 0; /* stream ends inside a header */
            avail = need;
        }
        (void)emu_ddp_strerror(rc);
        if (rc != EMU_DDP_OK) {
            struct emu_term t;
            FUZZ_CHECK(emu_ddp_err_term(rc, hdr, avail, ulpdu, &t));
            char buf[160];
            FUZZ_CHECK(emu_term_describe(&t, buf, sizeof buf) == buf);
            return 0;
        }
        FUZZ_CHECK(h.hdr_len == emu_ddp_hdr_len(&h));
        FUZZ_CHECK(h.hdr_len <= ulpdu && h.payload_len == (uint32_t)ulpdu - h.hdr_len);
        FUZZ_CHECK(h.hdr_len <= avail);
        (void)emu_rdmap_op_name(h.opcode);
        rebuild(&h);
        if (!h.tagged)
            emu_ddp_rx_advance(&st, &h);
        off += emu_fpdu_wire_len(ulpdu);
    }
    return 0;
}
