/* libFuzzer target: Terminate messages, both ways (emu/terminate.c and the
 * Terminate branch of emu_ddp_parse).
 *
 * Decode: the input becomes the body of a Terminate (DDP/RDMAP header fixed
 * to a valid untagged QN 2 / MSN 1 / L message, so every execution reaches
 * the Terminate decoder; ULPDU_Length from the input), then the decoded
 * triple is described as a diagnostic would.
 *
 * Encode: the input is also taken as an offending segment: for every
 * layer/etype/ecode and every parse error, the Terminate we would send
 * (emu_term_init / emu_ddp_err_term copying its headers) is built with
 * emu_fpdu_build_hdr and must parse back to the same triple and copies. */
#include "test/fuzz/fuzz.h"

#include "emu/ddp.h"

#include <string.h>

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    return 0;
}

static void describe(const struct emu_term *t)
{
    char buf[160];
    FUZZ_CHECK(emu_term_describe(t, buf, sizeof buf) == buf);
    FUZZ_CHECK(strlen(buf) < sizeof buf);
    char tiny[4];
    emu_term_describe(t, tiny, sizeof tiny);
    FUZZ_CHECK(strlen(tiny) < sizeof tiny);
    (void)emu_term_layer_name(t->layer);
    (void)emu_term_etype_name(t->layer, t->etype);
    (void)emu_term_ecode_name(t->layer, t->etype, t->ecode);
}

static void send_back(const struct emu_term *t)
{
    struct emu_ddp_hdr h;
    emu_term_hdr(&h, t);
    uint8_t buf[EMU_FPDU_HDR_MAX];
    size_t n = 0;
    FUZZ_CHECK(emu_fpdu_build_hdr(&h, 0, buf, sizeof buf, &n) == EMU_DDP_OK);
    struct emu_ddp_hdr g;
    size_t need = 0;
    uint16_t ulpdu = (uint16_t)(buf[0] << 8 | buf[1]);
    FUZZ_CHECK(emu_ddp_parse(buf + 2, n - 2, ulpdu, NULL, &g, &need) == EMU_DDP_OK);
    FUZZ_CHECK(g.opcode == EMU_OP_TERMINATE && g.payload_len == 0);
    const struct emu_term *u = &g.u.term;
    FUZZ_CHECK(u->layer == t->layer && u->etype == t->etype && u->ecode == t->ecode &&
               u->hdrct == t->hdrct);
    if (t->hdrct & EMU_TERM_HDRCT_M)
        FUZZ_CHECK(u->seg_len == t->seg_len);
    if (t->hdrct & EMU_TERM_HDRCT_D)
        FUZZ_CHECK(u->ddp_hdr_len == t->ddp_hdr_len &&
                   memcmp(u->ddp_hdr, t->ddp_hdr, t->ddp_hdr_len) == 0);
    if (t->hdrct & EMU_TERM_HDRCT_R)
        FUZZ_CHECK(memcmp(u->rreq_hdr, t->rreq_hdr, sizeof t->rreq_hdr) == 0);
    describe(u);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    /* ---- decode ---- */
    uint8_t seg[EMU_DDP_HLEN_MAX + 64];
    memset(seg, 0, sizeof seg);
    static const uint8_t fixed[EMU_DDP_UNTAGGED_HLEN] = {
        EMU_DDP_L | EMU_DDP_VERSION, EMU_RDMAP_VERSION << 6 | EMU_OP_TERMINATE, 0, 0, 0, 0,
        0, 0, 0, EMU_QN_TERMINATE, 0, 0, 0, 1, 0, 0, 0, 0};
    memcpy(seg, fixed, sizeof fixed);
    uint16_t ulpdu = (uint16_t)(data[0] << 8 | data[1]);
    size_t body = size - 2;
    if (body > sizeof seg - sizeof fixed)
        body = sizeof seg - sizeof fixed;
    memcpy(seg + sizeof fixed, data + 2, body);
    size_t avail = sizeof fixed + body;
    struct emu_ddp_hdr h;
    size_t need = 0;
    int rc = emu_ddp_parse(seg, avail, ulpdu, NULL, &h, &need);
    if (rc == EMU_DDP_OK) {
        FUZZ_CHECK(h.opcode == EMU_OP_TERMINATE && h.hdr_len <= avail && h.hdr_len <= ulpdu);
        const struct emu_term *t = &h.u.term;
        FUZZ_CHECK(t->layer < 16 && t->etype < 16);
        if (t->hdrct & EMU_TERM_HDRCT_D)
            FUZZ_CHECK(t->ddp_hdr_len == EMU_DDP_TAGGED_HLEN ||
                       t->ddp_hdr_len == EMU_DDP_UNTAGGED_HLEN);
        else
            FUZZ_CHECK(t->ddp_hdr_len == 0);
        describe(t);
    } else if (rc == EMU_DDP_NEED_MORE) {
        FUZZ_CHECK(need > avail && need <= EMU_DDP_HLEN_MAX);
    } else {
        struct emu_term t;
        FUZZ_CHECK(emu_ddp_err_term(rc, seg, avail, ulpdu, &t));
        describe(&t);
    }

    /* ---- encode: the input as an offending segment ---- */
    const uint8_t *off_seg = data + 2;
    size_t off_avail = size - 2;
    uint8_t sel = data[0];
    struct emu_term t;
    emu_term_init(&t, sel >> 6, (sel >> 4) & 3, data[1], off_seg, off_avail, ulpdu);
    send_back(&t);
    for (int err = EMU_DDP_E_DDP_VERSION; err <= EMU_DDP_E_TO_WRAP; err++) {
        if (emu_ddp_err_term(err, off_seg, off_avail, ulpdu, &t))
            send_back(&t);
    }
    return 0;
}
