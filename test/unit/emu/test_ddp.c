/* DDP/RDMAP/Terminate codec, FPDU trailer and segmentation (emu/ddp.h).
 * Byte-exact checks use the tshark-verified examples of the wire reference. */
#include "emu/crc32c.h"
#include "emu/ddp.h"
#include "emu/mpa.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Build a whole FPDU (header + payload + trailer) into out; returns length. */
static size_t fpdu(const struct emu_ddp_hdr *h, const void *payload, uint32_t plen,
                   bool crc, uint8_t *out, size_t cap)
{
    size_t hl;
    ck_assert_int_eq(emu_fpdu_build_hdr(h, plen, out, cap, &hl), EMU_DDP_OK);
    ck_assert_uint_eq(hl, 2 + emu_ddp_hdr_len(h));
    struct iovec iov = {(void *)payload, plen};
    uint8_t trl[EMU_FPDU_TRAILER_MAX];
    size_t tl = emu_fpdu_build_trailer(out, hl, &iov, 1, crc, trl);
    ck_assert_uint_ge(tl, 4);
    ck_assert_uint_le(tl, 7);
    if (plen)
        memcpy(out + hl, payload, plen);
    memcpy(out + hl + plen, trl, tl);
    size_t n = hl + plen + tl;
    ck_assert_uint_eq(n % 4, 0);
    ck_assert_uint_eq(n, emu_fpdu_wire_len((uint32_t)(hl - 2 + plen)));
    return n;
}

/* Parse an FPDU built above (stateless), checking CRC and lengths. */
static int parse_fpdu(const uint8_t *f, size_t n, bool crc, struct emu_ddp_hdr *h)
{
    uint16_t ul = (uint16_t)(f[0] << 8 | f[1]);
    ck_assert_uint_eq(emu_fpdu_wire_len(ul), n);
    if (crc) {
        struct iovec iov = {(void *)f, n};
        ck_assert(emu_fpdu_crc_ok(&iov, 1));
    } else {
        ck_assert_uint_eq(emu_crc32c_get_le(f + n - 4), 0);
    }
    size_t need;
    return emu_ddp_parse(f + 2, n - 2, ul, NULL, h, &need);
}

/* ------------------------------------------------------------ reference bytes */

static const uint8_t ex_hello[40] = {
    0x00, 0x1f, 0x41, 0x43, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x48, 0x65, 0x6c, 0x6c, 0x6f, 0x2c, 0x20, 0x69,
    0x57, 0x41, 0x52, 0x50, 0x21, 0x00, 0x00, 0x00, 0x13, 0x43, 0x08, 0x1e};
static const uint8_t ex_write[36] = {
    0x00, 0x1e, 0xc1, 0x40, 0x12, 0x34, 0x56, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x10, 0x00, 0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b,
    0x0c, 0x0d, 0x0e, 0x0f, 0x79, 0x6d, 0xc5, 0x67};
static const uint8_t ex_rreq[52] = {
    0x00, 0x2e, 0x41, 0x41, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00,
    0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0xaa, 0xbb, 0xcc, 0x01, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x20, 0x00, 0x00, 0x00, 0x00, 0x40, 0x12, 0x34, 0x56,
    0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x55, 0x72, 0x93, 0xe4};
static const uint8_t ex_rtr_write[20] = {0x00, 0x0e, 0xc1, 0x40, 0x00, 0x00, 0x00,
                                         0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
                                         0x00, 0x00, 0xeb, 0xd3, 0x4c, 0x5f};
static const uint8_t ex_rtr_read[52] = {
    0x00, 0x2e, 0x41, 0x41, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00,
    0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x27, 0xdb, 0xd7, 0xe7};
static const uint8_t ex_rtr_rresp[20] = {0x00, 0x0e, 0xc1, 0x42, 0x00, 0x00, 0x00,
                                         0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
                                         0x00, 0x00, 0x21, 0xa3, 0xe8, 0x3e};
static const uint8_t ex_cmpswap[76] = {
    0x00, 0x46, 0x41, 0x4a, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00,
    0x00, 0x00, 0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00,
    0x00, 0x07, 0x12, 0x34, 0x56, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x10,
    0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x99, 0xff, 0xff, 0xff, 0xff,
    0xff, 0xff, 0xff, 0xff, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x42, 0xff,
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x1f, 0xb4, 0xbb, 0x5c};
static const uint8_t ex_aresp[36] = {
    0x00, 0x1e, 0x41, 0x4b, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03, 0x00, 0x00,
    0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x07, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x42, 0xe0, 0xd3, 0xe0, 0x10};
static const uint8_t ex_imm[32] = {0x00, 0x1a, 0x41, 0x48, 0x00, 0x00, 0x00, 0x00,
                                   0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02,
                                   0x00, 0x00, 0x00, 0x00, 0xde, 0xad, 0xbe, 0xef,
                                   0x00, 0x00, 0x00, 0x00, 0x04, 0x87, 0xe8, 0xf1};
static const uint8_t ex_term[48] = {
    0x00, 0x2a, 0x41, 0x47, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x12, 0x01, 0xc0, 0x00,
    0x00, 0x12, 0x41, 0x43, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x09,
    0x00, 0x00, 0x00, 0x03, 0x00, 0x00, 0x00, 0x00, 0xcd, 0x5e, 0x30, 0x98};

START_TEST(ref_send_hello)
{
    uint8_t out[64];
    struct emu_ddp_hdr h = {.opcode = EMU_OP_SEND, .last = true, .msn = 1};
    size_t n = fpdu(&h, "Hello, iWARP!", 13, true, out, sizeof out);
    ck_assert_uint_eq(n, sizeof ex_hello);
    ck_assert_mem_eq(out, ex_hello, n);
    /* CRC off: same bytes, zero CRC field */
    n = fpdu(&h, "Hello, iWARP!", 13, false, out, sizeof out);
    ck_assert_mem_eq(out, ex_hello, n - 4);
    ck_assert_uint_eq(emu_crc32c_get_le(out + n - 4), 0);
    struct emu_ddp_hdr g;
    ck_assert_int_eq(parse_fpdu(ex_hello, sizeof ex_hello, true, &g), EMU_DDP_OK);
    ck_assert_uint_eq(g.opcode, EMU_OP_SEND);
    ck_assert(!g.tagged && g.last);
    ck_assert_uint_eq(g.qn, 0);
    ck_assert_uint_eq(g.msn, 1);
    ck_assert_uint_eq(g.mo, 0);
    ck_assert_uint_eq(g.hdr_len, 18);
    ck_assert_uint_eq(g.payload_len, 13);
}
END_TEST

START_TEST(ref_write_and_rtrs)
{
    uint8_t out[128], pl[16];
    for (int i = 0; i < 16; i++)
        pl[i] = (uint8_t)i;
    struct emu_ddp_hdr h = {.opcode = EMU_OP_WRITE, .last = true, .stag = 0x12345601,
                            .to = 0x1000};
    size_t n = fpdu(&h, pl, 16, true, out, sizeof out);
    ck_assert_uint_eq(n, sizeof ex_write);
    ck_assert_mem_eq(out, ex_write, n);
    struct emu_ddp_hdr g;
    ck_assert_int_eq(parse_fpdu(ex_write, n, true, &g), EMU_DDP_OK);
    ck_assert(g.tagged && g.last);
    ck_assert_uint_eq(g.stag, 0x12345601);
    ck_assert_uint_eq(g.to, 0x1000);
    ck_assert_uint_eq(g.payload_len, 16);

    /* zero-length Write RTR, STag 1 */
    struct emu_ddp_hdr w = {.opcode = EMU_OP_WRITE, .last = true, .stag = 1};
    n = fpdu(&w, NULL, 0, true, out, sizeof out);
    ck_assert_uint_eq(n, sizeof ex_rtr_write);
    ck_assert_mem_eq(out, ex_rtr_write, n);
    /* zero-length Read RTR, MSN 1 */
    struct emu_ddp_hdr r = {.opcode = EMU_OP_READ_REQ, .msn = 1,
                            .u.rreq = {.sink_stag = 1, .src_stag = 1}};
    n = fpdu(&r, NULL, 0, true, out, sizeof out);
    ck_assert_uint_eq(n, sizeof ex_rtr_read);
    ck_assert_mem_eq(out, ex_rtr_read, n);
    struct emu_ddp_hdr rr = {.opcode = EMU_OP_READ_RESP, .last = true, .stag = 1};
    n = fpdu(&rr, NULL, 0, true, out, sizeof out);
    ck_assert_uint_eq(n, sizeof ex_rtr_rresp);
    ck_assert_mem_eq(out, ex_rtr_rresp, n);
    ck_assert_int_eq(parse_fpdu(ex_rtr_rresp, n, true, &g), EMU_DDP_OK);
    ck_assert_uint_eq(g.opcode, EMU_OP_READ_RESP);
    ck_assert_uint_eq(g.payload_len, 0);
}
END_TEST

START_TEST(ref_read_request)
{
    uint8_t out[128];
    struct emu_ddp_hdr h = {.opcode = EMU_OP_READ_REQ,
                            .msn = 2,
                            .u.rreq = {.sink_stag = 0xAABBCC01, .sink_to = 0x2000,
                                       .size = 64, .src_stag = 0x12345601,
                                       .src_to = 0x1000}};
    size_t n = fpdu(&h, NULL, 0, true, out, sizeof out);
    ck_assert_uint_eq(n, sizeof ex_rreq);
    ck_assert_mem_eq(out, ex_rreq, n);
    struct emu_ddp_hdr g;
    ck_assert_int_eq(parse_fpdu(ex_rreq, n, true, &g), EMU_DDP_OK);
    ck_assert_uint_eq(g.opcode, EMU_OP_READ_REQ);
    ck_assert_uint_eq(g.qn, 1);
    ck_assert_uint_eq(g.msn, 2);
    ck_assert_uint_eq(g.hdr_len, 46);
    ck_assert_uint_eq(g.u.rreq.sink_stag, 0xAABBCC01);
    ck_assert_uint_eq(g.u.rreq.sink_to, 0x2000);
    ck_assert_uint_eq(g.u.rreq.size, 64);
    ck_assert_uint_eq(g.u.rreq.src_stag, 0x12345601);
    ck_assert_uint_eq(g.u.rreq.src_to, 0x1000);
}
END_TEST

START_TEST(ref_rfc7306)
{
    uint8_t out[128];
    struct emu_ddp_hdr a = {.opcode = EMU_OP_ATOMIC_REQ,
                            .msn = 3,
                            .u.areq = {.op = EMU_ATOMIC_CMP_SWAP, .req_id = 7,
                                       .stag = 0x12345601, .to = 0x1008,
                                       .add_swap = 0x99, .add_swap_mask = ~0ull,
                                       .compare = 0x42, .compare_mask = ~0ull}};
    size_t n = fpdu(&a, NULL, 0, true, out, sizeof out);
    ck_assert_uint_eq(n, sizeof ex_cmpswap);
    ck_assert_mem_eq(out, ex_cmpswap, n);
    struct emu_ddp_hdr g;
    ck_assert_int_eq(parse_fpdu(ex_cmpswap, n, true, &g), EMU_DDP_OK);
    ck_assert_mem_eq(&g.u.areq, &a.u.areq, sizeof a.u.areq);
    ck_assert_uint_eq(g.qn, 1);

    struct emu_ddp_hdr r = {.opcode = EMU_OP_ATOMIC_RESP, .msn = 1,
                            .u.aresp = {.req_id = 7, .orig = 0x42}};
    n = fpdu(&r, NULL, 0, true, out, sizeof out);
    ck_assert_uint_eq(n, sizeof ex_aresp);
    ck_assert_mem_eq(out, ex_aresp, n);
    ck_assert_int_eq(parse_fpdu(ex_aresp, n, true, &g), EMU_DDP_OK);
    ck_assert_uint_eq(g.qn, 3);
    ck_assert_uint_eq(g.u.aresp.req_id, 7);
    ck_assert_uint_eq(g.u.aresp.orig, 0x42);

    struct emu_ddp_hdr im = {.opcode = EMU_OP_IMM, .msn = 2};
    emu_rdmap_imm_from_u32(im.u.imm, 0xdeadbeef);
    n = fpdu(&im, NULL, 0, true, out, sizeof out);
    ck_assert_uint_eq(n, sizeof ex_imm);
    ck_assert_mem_eq(out, ex_imm, n);
    ck_assert_int_eq(parse_fpdu(ex_imm, n, true, &g), EMU_DDP_OK);
    ck_assert_uint_eq(emu_rdmap_imm_to_u32(g.u.imm), 0xdeadbeef);
    ck_assert_uint_eq(g.u.imm[4] | g.u.imm[5] | g.u.imm[6] | g.u.imm[7], 0);
}
END_TEST

START_TEST(ref_terminate)
{
    /* the Send that used QN 9: parse gives E_QN, mapped to DDP untagged 0x01 */
    const uint8_t *seg = ex_term + 26;
    struct emu_ddp_hdr g;
    size_t need;
    ck_assert_int_eq(emu_ddp_parse(seg, 18, 18, NULL, &g, &need), EMU_DDP_E_QN);
    struct emu_term t;
    ck_assert(emu_ddp_err_term(EMU_DDP_E_QN, seg, 18, 18, &t));
    ck_assert_uint_eq(t.layer, EMU_TERM_DDP);
    ck_assert_uint_eq(t.etype, EMU_TERM_DDP_UNTAGGED);
    ck_assert_uint_eq(t.ecode, EMU_DDP_EC_U_QN);
    ck_assert_uint_eq(t.hdrct, EMU_TERM_HDRCT_M | EMU_TERM_HDRCT_D);
    struct emu_ddp_hdr h;
    emu_term_hdr(&h, &t);
    uint8_t out[128];
    size_t n = fpdu(&h, NULL, 0, true, out, sizeof out);
    ck_assert_uint_eq(n, sizeof ex_term);
    ck_assert_mem_eq(out, ex_term, n);
    ck_assert_int_eq(parse_fpdu(ex_term, n, true, &g), EMU_DDP_OK);
    ck_assert_uint_eq(g.opcode, EMU_OP_TERMINATE);
    ck_assert_uint_eq(g.u.term.layer, 1);
    ck_assert_uint_eq(g.u.term.etype, 2);
    ck_assert_uint_eq(g.u.term.ecode, 1);
    ck_assert_uint_eq(g.u.term.seg_len, 18);
    ck_assert_uint_eq(g.u.term.ddp_hdr_len, 18);
    ck_assert_mem_eq(g.u.term.ddp_hdr, seg, 18);
    char d[128];
    ck_assert_str_eq(emu_term_describe(&g.u.term, d, sizeof d),
                     "DDP untagged buffer: invalid QN");
}
END_TEST

/* ------------------------------------------------------------ round trips */

START_TEST(roundtrip_every_opcode)
{
    uint8_t out[512], pl[100];
    for (int i = 0; i < 100; i++)
        pl[i] = (uint8_t)(0xA0 + i);
    for (unsigned op = 0; op < EMU_OP_COUNT; op++)
        for (int last = 0; last < 2; last++)
            for (uint32_t plen = 0; plen <= 7; plen++) {
                bool payload = emu_rdmap_op_has_payload(op);
                if (!payload && plen)
                    continue;
                struct emu_ddp_hdr h = {.opcode = (uint8_t)op, .last = last,
                                        .stag = 0x01020304 + op, .to = 0xFFFF000000001000ull,
                                        .inv_stag = 0xCAFE0000 + op, .msn = 1000 + op,
                                        .mo = payload ? 4096 : 0};
                if (op == EMU_OP_ATOMIC_REQ)
                    h.u.areq = (struct emu_rdmap_atomic_req){EMU_ATOMIC_FETCH_ADD, 9, 8, 7,
                                                             6, 5, 4, 3};
                if (op == EMU_OP_TERMINATE) {
                    h.msn = 1;
                    uint8_t bad[18] = {0x41, 0x43, 0, 0, 0, 0, 0, 0, 0, 7};
                    emu_term_init(&h.u.term, EMU_TERM_DDP, EMU_TERM_DDP_UNTAGGED,
                                  EMU_DDP_EC_U_QN, bad, 18, 18);
                }
                for (int crc = 0; crc < 2; crc++) {
                    size_t n = fpdu(&h, pl, plen, crc, out, sizeof out);
                    struct emu_ddp_hdr g;
                    ck_assert_int_eq(parse_fpdu(out, n, crc, &g), EMU_DDP_OK);
                    ck_assert_uint_eq(g.opcode, op);
                    ck_assert_int_eq(g.tagged, emu_rdmap_op_tagged(op));
                    ck_assert_int_eq(g.last, payload ? last : 1);
                    ck_assert_uint_eq(g.payload_len, plen);
                    ck_assert_uint_eq(g.hdr_len, emu_ddp_hdr_len(&h));
                    if (g.tagged) {
                        ck_assert_uint_eq(g.stag, h.stag);
                        ck_assert_uint_eq(g.to, h.to);
                    } else {
                        ck_assert_uint_eq((int)g.qn, emu_rdmap_op_qn(op));
                        ck_assert_uint_eq(g.msn, h.msn);
                        ck_assert_uint_eq(g.mo, h.mo);
                        bool inv = op == EMU_OP_SEND_INV || op == EMU_OP_SEND_SE_INV;
                        ck_assert_uint_eq(g.inv_stag, inv ? h.inv_stag : 0);
                        /* RsvdULP bytes 2-5 are zero unless Invalidate */
                        uint32_t rs = (uint32_t)out[4] << 24 | out[5] << 16 | out[6] << 8 | out[7];
                        ck_assert_uint_eq(rs, inv ? h.inv_stag : 0);
                    }
                    if (plen)
                        ck_assert_mem_eq(out + 2 + g.hdr_len, pl, plen);
                    if (op == EMU_OP_ATOMIC_REQ)
                        ck_assert_mem_eq(&g.u.areq, &h.u.areq, sizeof h.u.areq);
                    if (op == EMU_OP_TERMINATE) {
                        ck_assert_uint_eq(g.u.term.hdrct, h.u.term.hdrct);
                        ck_assert_mem_eq(g.u.term.ddp_hdr, h.u.term.ddp_hdr, 18);
                    }
                    /* control bytes exactly as the reference cheat sheet */
                    ck_assert_uint_eq(out[3], 0x40 | op);
                    ck_assert_uint_eq(out[2], (g.tagged ? 0x80 : 0) | (g.last ? 0x40 : 0) | 1);
                }
            }
}
END_TEST

START_TEST(terminate_variants)
{
    /* RDMAP protection error about a Read Request: M, D, R and 28-byte copy */
    struct emu_term t;
    emu_term_init(&t, EMU_TERM_RDMAP, EMU_TERM_RDMAP_PROTECTION, EMU_RDMAP_EC_INV_STAG,
                  ex_rreq + 2, 46, 46);
    ck_assert_uint_eq(t.hdrct, EMU_TERM_HDRCT_M | EMU_TERM_HDRCT_D | EMU_TERM_HDRCT_R);
    ck_assert_uint_eq(t.seg_len, 46);
    ck_assert_mem_eq(t.rreq_hdr, ex_rreq + 20, 28);
    struct emu_ddp_hdr h, g;
    emu_term_hdr(&h, &t);
    ck_assert_uint_eq(emu_ddp_hdr_len(&h), 22 + 2 + 18 + 28);
    uint8_t out[128];
    size_t n = fpdu(&h, NULL, 0, true, out, sizeof out);
    ck_assert_int_eq(parse_fpdu(out, n, true, &g), EMU_DDP_OK);
    ck_assert_mem_eq(&g.u.term, &t, sizeof t);
    char d[128];
    ck_assert_str_eq(emu_term_describe(&t, d, sizeof d),
                     "RDMAP remote protection: invalid STag");
    /* protection error about a Write: tagged 14-byte copy, no R */
    emu_term_init(&t, EMU_TERM_RDMAP, EMU_TERM_RDMAP_PROTECTION, EMU_RDMAP_EC_BOUNDS,
                  ex_write + 2, 30, 30);
    ck_assert_uint_eq(t.hdrct, EMU_TERM_HDRCT_M | EMU_TERM_HDRCT_D);
    ck_assert_uint_eq(t.ddp_hdr_len, 14);
    emu_term_hdr(&h, &t);
    n = fpdu(&h, NULL, 0, true, out, sizeof out);
    ck_assert_uint_eq(n, emu_fpdu_wire_len(22 + 2 + 14));
    ck_assert_int_eq(parse_fpdu(out, n, true, &g), EMU_DDP_OK);
    ck_assert_mem_eq(&g.u.term, &t, sizeof t);
    /* no copies: LLP CRC error, catastrophic, version/opcode errors */
    emu_term_init(&t, EMU_TERM_LLP, 0, EMU_MPA_LLP_CRC, ex_write + 2, 30, 30);
    ck_assert_uint_eq(t.hdrct, 0);
    ck_assert_str_eq(emu_term_describe(&t, d, sizeof d), "LLP MPA: MPA CRC error");
    emu_term_hdr(&h, &t);
    n = fpdu(&h, NULL, 0, false, out, sizeof out);
    ck_assert_uint_eq(n, emu_fpdu_wire_len(22));
    ck_assert_int_eq(parse_fpdu(out, n, false, &g), EMU_DDP_OK);
    ck_assert_uint_eq(g.u.term.layer, EMU_TERM_LLP);
    emu_term_init(&t, EMU_TERM_RDMAP, EMU_TERM_RDMAP_OPERATION, EMU_RDMAP_EC_OPCODE,
                  ex_write + 2, 30, 30);
    ck_assert_uint_eq(t.hdrct, 0);
    emu_term_init(&t, EMU_TERM_DDP, EMU_TERM_DDP_TAGGED, EMU_DDP_EC_T_VERSION,
                  ex_write + 2, 30, 30);
    ck_assert_uint_eq(t.hdrct, 0);
    emu_term_init(&t, EMU_TERM_RDMAP, EMU_TERM_RDMAP_CATASTROPHIC, 0xFF, NULL, 0, 0);
    ck_assert_uint_eq(t.hdrct, 0);
    /* not enough bytes of the offending segment: length only */
    emu_term_init(&t, EMU_TERM_DDP, EMU_TERM_DDP_UNTAGGED, EMU_DDP_EC_U_MO, ex_hello + 2,
                  10, 31);
    ck_assert_uint_eq(t.hdrct, EMU_TERM_HDRCT_M);
    emu_term_hdr(&h, &t);
    n = fpdu(&h, NULL, 0, true, out, sizeof out);
    ck_assert_uint_eq(n, emu_fpdu_wire_len(24));
    ck_assert_int_eq(parse_fpdu(out, n, true, &g), EMU_DDP_OK);
    ck_assert_uint_eq(g.u.term.seg_len, 31);
    /* names */
    ck_assert_str_eq(emu_term_ecode_name(0, 2, 0x06), "unexpected opcode");
    ck_assert_str_eq(emu_term_ecode_name(1, 1, 0x00), "invalid STag");
    ck_assert_str_eq(emu_term_ecode_name(1, 2, 0x03), "invalid MSN - MSN range not valid");
    ck_assert_str_eq(emu_term_ecode_name(2, 0, 0x07), "no matching RTR option");
    ck_assert_str_eq(emu_term_ecode_name(0, 1, 0x77), "unknown error code");
    ck_assert_str_eq(emu_term_layer_name(9), "unknown layer");
    ck_assert_str_eq(emu_term_etype_name(1, 9), "unknown error type");
    /* build rejects inconsistent hdrct */
    t.hdrct = EMU_TERM_HDRCT_R;
    emu_term_hdr(&h, &t);
    size_t hl;
    ck_assert_int_eq(emu_fpdu_build_hdr(&h, 0, out, sizeof out, &hl), EMU_DDP_E_INVAL);
    t.hdrct = EMU_TERM_HDRCT_D;
    t.ddp_hdr_len = 15;
    emu_term_hdr(&h, &t);
    ck_assert_int_eq(emu_fpdu_build_hdr(&h, 0, out, sizeof out, &hl), EMU_DDP_E_INVAL);
}
END_TEST

/* ------------------------------------------------------------ parse errors */

static int parse_raw(const uint8_t *seg, size_t avail, uint16_t ul,
                     const struct emu_ddp_rx_state *st, struct emu_ddp_hdr *h)
{
    size_t need;
    return emu_ddp_parse(seg, avail, ul, st, h, &need);
}

static void expect_term(int err, const uint8_t *seg, size_t avail, uint16_t ul,
                        uint8_t layer, uint8_t etype, uint8_t ecode)
{
    struct emu_term t;
    ck_assert(emu_ddp_err_term(err, seg, avail, ul, &t));
    ck_assert_uint_eq(t.layer, layer);
    ck_assert_uint_eq(t.etype, etype);
    ck_assert_uint_eq(t.ecode, ecode);
}

START_TEST(parse_error_paths)
{
    uint8_t s[80];
    struct emu_ddp_hdr g;
    /* DDP version 0/2/3, untagged and tagged */
    for (uint8_t dv = 0; dv < 4; dv++) {
        if (dv == 1)
            continue;
        memcpy(s, ex_hello + 2, 31);
        s[0] = (uint8_t)(0x40 | dv);
        ck_assert_int_eq(parse_raw(s, 31, 31, NULL, &g), EMU_DDP_E_DDP_VERSION);
        expect_term(EMU_DDP_E_DDP_VERSION, s, 31, 31, 1, 2, 0x06);
        memcpy(s, ex_write + 2, 30);
        s[0] = (uint8_t)(0xC0 | dv);
        ck_assert_int_eq(parse_raw(s, 30, 30, NULL, &g), EMU_DDP_E_DDP_VERSION);
        expect_term(EMU_DDP_E_DDP_VERSION, s, 30, 30, 1, 1, 0x04);
    }
    /* RDMAP version 0, 2, 3 */
    for (uint8_t rv = 0; rv < 4; rv++) {
        if (rv == 1)
            continue;
        memcpy(s, ex_hello + 2, 31);
        s[1] = (uint8_t)(rv << 6 | 3);
        ck_assert_int_eq(parse_raw(s, 31, 31, NULL, &g), EMU_DDP_E_RDMAP_VERSION);
        expect_term(EMU_DDP_E_RDMAP_VERSION, s, 31, 31, 0, 2, 0x05);
    }
    /* reserved opcodes 0xC-0xF; RFC 7306 opcodes when not enabled */
    for (uint8_t op = 0xC; op <= 0xF; op++) {
        memcpy(s, ex_hello + 2, 31);
        s[1] = 0x40 | op;
        ck_assert_int_eq(parse_raw(s, 31, 31, NULL, &g), EMU_DDP_E_OPCODE);
        expect_term(EMU_DDP_E_OPCODE, s, 31, 31, 0, 2, 0x06);
    }
    struct emu_ddp_rx_state st;
    emu_ddp_rx_init(&st, false);
    ck_assert_int_eq(parse_raw(ex_imm + 2, 26, 26, &st, &g), EMU_DDP_E_OPCODE);
    st.rfc7306 = true;
    st.q[0].msn = 2;
    ck_assert_int_eq(parse_raw(ex_imm + 2, 26, 26, &st, &g), EMU_DDP_OK);
    /* T bit disagreeing with the opcode */
    memcpy(s, ex_hello + 2, 31);
    s[0] |= 0x80;
    ck_assert_int_eq(parse_raw(s, 31, 31, NULL, &g), EMU_DDP_E_T_MISMATCH);
    expect_term(EMU_DDP_E_T_MISMATCH, s, 31, 31, 0, 2, 0x06);
    memcpy(s, ex_write + 2, 30);
    s[0] &= 0x7F;
    ck_assert_int_eq(parse_raw(s, 30, 30, NULL, &g), EMU_DDP_E_T_MISMATCH);
    /* invalid QN: 4, 0xFFFFFFFF, and right queue numbers on the wrong opcode */
    static const uint32_t bad_qn[] = {1, 2, 3, 4, 0xFFFFFFFF};
    for (size_t i = 0; i < 5; i++) {
        memcpy(s, ex_hello + 2, 31);
        s[6] = (uint8_t)(bad_qn[i] >> 24), s[7] = (uint8_t)(bad_qn[i] >> 16);
        s[8] = (uint8_t)(bad_qn[i] >> 8), s[9] = (uint8_t)bad_qn[i];
        ck_assert_int_eq(parse_raw(s, 31, 31, NULL, &g), EMU_DDP_E_QN);
        expect_term(EMU_DDP_E_QN, s, 31, 31, 1, 2, 0x01);
    }
    memcpy(s, ex_rreq + 2, 46);
    s[9] = 0; /* Read Request on the Send queue */
    ck_assert_int_eq(parse_raw(s, 46, 46, NULL, &g), EMU_DDP_E_QN);
    memcpy(s, ex_aresp + 2, 30);
    s[9] = 1; /* Atomic Response on the Read Request queue */
    ck_assert_int_eq(parse_raw(s, 30, 30, NULL, &g), EMU_DDP_E_QN);
    /* MSN: stateful expectations */
    emu_ddp_rx_init(&st, true);
    ck_assert_int_eq(parse_raw(ex_hello + 2, 31, 31, &st, &g), EMU_DDP_OK); /* MSN 1 */
    st.q[0].msn = 2;
    ck_assert_int_eq(parse_raw(ex_hello + 2, 31, 31, &st, &g), EMU_DDP_E_MSN);
    expect_term(EMU_DDP_E_MSN, ex_hello + 2, 31, 31, 1, 2, 0x03);
    ck_assert_int_eq(parse_raw(ex_rreq + 2, 46, 46, &st, &g), EMU_DDP_E_MSN); /* MSN 2, want 1 */
    st.q[1].msn = 2;
    ck_assert_int_eq(parse_raw(ex_rreq + 2, 46, 46, &st, &g), EMU_DDP_OK);
    /* Terminate must be MSN 1 even without state */
    memcpy(s, ex_term + 2, 42);
    s[13] = 2;
    ck_assert_int_eq(parse_raw(s, 42, 42, NULL, &g), EMU_DDP_E_MSN);
    /* MO: first segment must be 0; continuation must be contiguous */
    emu_ddp_rx_init(&st, true);
    memcpy(s, ex_hello + 2, 31);
    s[17] = 4;
    ck_assert_int_eq(parse_raw(s, 31, 31, &st, &g), EMU_DDP_E_MO);
    expect_term(EMU_DDP_E_MO, s, 31, 31, 1, 2, 0x04);
    memcpy(s, ex_rreq + 2, 46);
    s[17] = 4; /* fixed message with MO != 0, stateless */
    ck_assert_int_eq(parse_raw(s, 46, 46, NULL, &g), EMU_DDP_E_MO);
    /* MO + payload beyond 2^32 */
    memcpy(s, ex_hello + 2, 31);
    s[14] = s[15] = s[16] = s[17] = 0xFF;
    ck_assert_int_eq(parse_raw(s, 31, 31, NULL, &g), EMU_DDP_E_MO);
    /* TO wrap */
    memcpy(s, ex_write + 2, 30);
    memset(s + 6, 0xFF, 8);
    ck_assert_int_eq(parse_raw(s, 30, 30, NULL, &g), EMU_DDP_E_TO_WRAP);
    expect_term(EMU_DDP_E_TO_WRAP, s, 30, 30, 1, 1, 0x03);
    ck_assert_int_eq(parse_raw(s, 14, 14, NULL, &g), EMU_DDP_OK); /* zero-length */
    /* ULPDU shorter than the header; fixed messages with payload / not last */
    ck_assert_int_eq(parse_raw(ex_hello + 2, 17, 17, NULL, &g), EMU_DDP_E_SHORT_ULPDU);
    ck_assert_int_eq(parse_raw(ex_write + 2, 13, 13, NULL, &g), EMU_DDP_E_SHORT_ULPDU);
    ck_assert_int_eq(parse_raw(ex_rreq + 2, 45, 45, NULL, &g), EMU_DDP_E_SHORT_ULPDU);
    ck_assert_int_eq(parse_raw(ex_rreq + 2, 1, 1, NULL, &g), EMU_DDP_E_SHORT_ULPDU);
    expect_term(EMU_DDP_E_SHORT_ULPDU, ex_rreq + 2, 45, 45, 0, 2, 0xFF);
    memcpy(s, ex_rreq + 2, 46);
    s[46] = 0;
    ck_assert_int_eq(parse_raw(s, 47, 47, NULL, &g), EMU_DDP_E_FIXED_LEN);
    memcpy(s, ex_rreq + 2, 46);
    s[0] = 0x01; /* L = 0 */
    ck_assert_int_eq(parse_raw(s, 46, 46, NULL, &g), EMU_DDP_E_FIXED_LEN);
    ck_assert_int_eq(parse_raw(ex_aresp + 2, 30, 31, NULL, &g), EMU_DDP_E_FIXED_LEN);
    /* atomic operation code */
    memcpy(s, ex_cmpswap + 2, 70);
    s[21] = 0x01;
    ck_assert_int_eq(parse_raw(s, 70, 70, NULL, &g), EMU_DDP_E_ATOMIC_OP);
    expect_term(EMU_DDP_E_ATOMIC_OP, s, 70, 70, 0, 2, 0x06);
    /* Terminate with R but no D */
    memcpy(s, ex_term + 2, 42);
    s[20] = EMU_TERM_HDRCT_R;
    ck_assert_int_eq(parse_raw(s, 42, 42, NULL, &g), EMU_DDP_E_TERM_HDRCT);
    /* Terminate claiming D but ULPDU too short for the copy */
    ck_assert_int_eq(parse_raw(ex_term + 2, 30, 30, NULL, &g), EMU_DDP_E_SHORT_ULPDU);
    /* build-side and non-parse errors are not Terminate-worthy */
    struct emu_term t;
    ck_assert(!emu_ddp_err_term(EMU_DDP_OK, s, 0, 0, &t));
    ck_assert(!emu_ddp_err_term(EMU_DDP_NEED_MORE, s, 0, 0, &t));
    ck_assert(!emu_ddp_err_term(EMU_DDP_E_INVAL, s, 0, 0, &t));
    /* reserved bits are ignored, reported */
    memcpy(s, ex_hello + 2, 31);
    s[0] |= 0x3C;
    s[1] |= 0x30;
    ck_assert_int_eq(parse_raw(s, 31, 31, NULL, &g), EMU_DDP_OK);
    ck_assert_uint_eq(g.ddp_rsvd, 0xF);
    ck_assert_uint_eq(g.rdmap_rsvd, 3);
    for (int i = 0; i < EMU_DDP_E_COUNT; i++)
        for (int j = i + 1; j < EMU_DDP_E_COUNT; j++)
            ck_assert_str_ne(emu_ddp_strerror(i), emu_ddp_strerror(j));
}
END_TEST

/* Byte-by-byte arrival: NEED_MORE until exactly the header is there, and
 * never asks for more than the ULPDU holds. */
START_TEST(incremental_header)
{
    static const struct {
        const uint8_t *f;
        size_t n;
    } ex[] = {{ex_hello, sizeof ex_hello}, {ex_write, sizeof ex_write},
              {ex_rreq, sizeof ex_rreq},   {ex_cmpswap, sizeof ex_cmpswap},
              {ex_aresp, sizeof ex_aresp}, {ex_imm, sizeof ex_imm},
              {ex_term, sizeof ex_term}};
    for (size_t k = 0; k < sizeof ex / sizeof *ex; k++) {
        const uint8_t *seg = ex[k].f + 2;
        uint16_t ul = (uint16_t)(ex[k].f[0] << 8 | ex[k].f[1]);
        size_t avail = 0, need = 0, calls = 0;
        struct emu_ddp_hdr g;
        int rc;
        while ((rc = emu_ddp_parse(seg, avail, ul, NULL, &g, &need)) == EMU_DDP_NEED_MORE) {
            ck_assert_uint_gt(need, avail);
            ck_assert_uint_le(need, ul);
            avail = need;
            ck_assert_uint_lt(++calls, 6);
        }
        ck_assert_int_eq(rc, EMU_DDP_OK);
        ck_assert_uint_eq(need, g.hdr_len);
        ck_assert_uint_eq(avail, g.hdr_len);
        ck_assert_uint_eq(g.hdr_len + g.payload_len, ul);
    }
}
END_TEST

START_TEST(build_errors)
{
    uint8_t out[EMU_FPDU_HDR_MAX];
    size_t hl;
    struct emu_ddp_hdr h = {.opcode = EMU_OP_SEND, .last = true};
    ck_assert_int_eq(emu_fpdu_build_hdr(&h, 65535 - 18, out, sizeof out, &hl), EMU_DDP_OK);
    ck_assert_uint_eq(out[0], 0xFF);
    ck_assert_uint_eq(out[1], 0xFF);
    ck_assert_int_eq(emu_fpdu_build_hdr(&h, 65535 - 17, out, sizeof out, &hl),
                     EMU_DDP_E_TOO_BIG);
    ck_assert_int_eq(emu_fpdu_build_hdr(&h, 0, out, 19, &hl), EMU_DDP_E_NOSPACE);
    ck_assert_int_eq(emu_fpdu_build_hdr(&h, 0, out, 20, &hl), EMU_DDP_OK);
    h.opcode = 0xC;
    ck_assert_int_eq(emu_fpdu_build_hdr(&h, 0, out, sizeof out, &hl), EMU_DDP_E_INVAL);
    h.opcode = EMU_OP_READ_REQ;
    ck_assert_int_eq(emu_fpdu_build_hdr(&h, 1, out, sizeof out, &hl), EMU_DDP_E_INVAL);
    h.opcode = EMU_OP_WRITE;
    ck_assert_int_eq(emu_fpdu_build_hdr(&h, 65535 - 14, out, sizeof out, &hl), EMU_DDP_OK);
    ck_assert_int_eq(emu_fpdu_build_hdr(NULL, 0, out, sizeof out, &hl), EMU_DDP_E_INVAL);
    /* fixed messages are forced last with MO 0 */
    h = (struct emu_ddp_hdr){.opcode = EMU_OP_READ_REQ, .last = false, .mo = 77, .msn = 1};
    ck_assert_int_eq(emu_fpdu_build_hdr(&h, 0, out, sizeof out, &hl), EMU_DDP_OK);
    ck_assert_uint_eq(out[2], 0x41);
    ck_assert_uint_eq(out[19], 0);
    /* opcode facts */
    ck_assert_str_eq(emu_rdmap_op_name(EMU_OP_SEND_SE_INV), "Send with SE and Invalidate");
    ck_assert_str_eq(emu_rdmap_op_name(0xD), "reserved opcode");
    ck_assert_int_eq(emu_rdmap_op_qn(EMU_OP_WRITE), -1);
    ck_assert_int_eq(emu_rdmap_op_qn(EMU_OP_ATOMIC_RESP), 3);
}
END_TEST

START_TEST(crc_check_iov)
{
    /* split the reference FPDU at every point into 3 iovecs */
    for (size_t a = 0; a <= sizeof ex_hello; a++)
        for (size_t b = a; b <= sizeof ex_hello; b += 3) {
            struct iovec iov[3] = {{(void *)ex_hello, a},
                                   {(void *)(ex_hello + a), b - a},
                                   {(void *)(ex_hello + b), sizeof ex_hello - b}};
            ck_assert(emu_fpdu_crc_ok(iov, 3));
        }
    uint8_t bad[sizeof ex_hello];
    for (size_t i = 0; i < sizeof bad; i++) {
        memcpy(bad, ex_hello, sizeof bad);
        bad[i] ^= 0x10;
        struct iovec iov = {bad, sizeof bad};
        ck_assert(!emu_fpdu_crc_ok(&iov, 1));
    }
    struct iovec tiny = {(void *)ex_hello, 5};
    ck_assert(!emu_fpdu_crc_ok(&tiny, 1));
    /* trailer over a multi-iovec payload equals the single-buffer one */
    struct emu_ddp_hdr h = {.opcode = EMU_OP_SEND, .last = true, .msn = 1};
    uint8_t hdr[EMU_FPDU_HDR_MAX], t1[8], t2[8];
    size_t hl;
    ck_assert_int_eq(emu_fpdu_build_hdr(&h, 13, hdr, sizeof hdr, &hl), 0);
    struct iovec one = {(void *)"Hello, iWARP!", 13};
    struct iovec three[3] = {{(void *)"Hell", 4}, {(void *)"", 0}, {(void *)"o, iWARP!", 9}};
    size_t l1 = emu_fpdu_build_trailer(hdr, hl, &one, 1, true, t1);
    size_t l2 = emu_fpdu_build_trailer(hdr, hl, three, 3, true, t2);
    ck_assert_uint_eq(l1, 7);
    ck_assert_uint_eq(l2, 7);
    ck_assert_mem_eq(t1, t2, 7);
    ck_assert_mem_eq(t1, ex_hello + 33, 7);
}
END_TEST

/* ------------------------------------------------------------ segmentation */

static void check_segments(uint64_t len, uint32_t mulpdu, bool tagged)
{
    struct emu_ddp_seg s;
    struct emu_ddp_seg_info si;
    ck_assert_int_eq(emu_ddp_seg_init(&s, len, mulpdu, tagged), 0);
    uint32_t max = emu_ddp_seg_max_payload(mulpdu, tagged);
    uint64_t off = 0, count = 0, wire = 0;
    uint32_t hlen = tagged ? 14 : 18;
    bool last = false;
    while (emu_ddp_seg_next(&s, &si)) {
        ck_assert(!last);
        ck_assert_uint_eq(si.off, off);
        ck_assert_uint_le(si.len, max);
        ck_assert_uint_le(si.len + hlen, mulpdu > 65535 ? 65535 : mulpdu);
        if (!si.last) {
            ck_assert_uint_eq(si.len, max);
            ck_assert_uint_eq(emu_fpdu_pad(hlen + si.len), 0);
        }
        off += si.len;
        wire += emu_fpdu_wire_len(hlen + si.len);
        last = si.last;
        count++;
    }
    ck_assert(last);
    ck_assert_uint_eq(off, len);
    ck_assert_uint_eq(count, emu_ddp_seg_count(len, mulpdu, tagged));
    ck_assert_uint_eq(wire, emu_ddp_msg_wire_len(len, mulpdu,
                                                 tagged ? EMU_OP_WRITE : EMU_OP_SEND));
    ck_assert(!emu_ddp_seg_next(&s, &si));
}

START_TEST(segmentation)
{
    const uint32_t mulpdus[] = {1454, 65535, 9000, 22, 32, 100000};
    for (size_t m = 0; m < sizeof mulpdus / sizeof *mulpdus; m++)
        for (int tagged = 0; tagged < 2; tagged++) {
            uint32_t max = emu_ddp_seg_max_payload(mulpdus[m], tagged);
            ck_assert_uint_gt(max, 0);
            ck_assert_uint_eq(max % 4, 0);
            const uint64_t lens[] = {0, 1, 3, max - 1, max, (uint64_t)max + 1,
                                     2ull * max, 2ull * max + 1, 100000};
            for (size_t l = 0; l < sizeof lens / sizeof *lens; l++)
                if (mulpdus[m] >= 1000 || lens[l] < 20000)
                    check_segments(lens[l], mulpdus[m], tagged);
        }
    /* MULPDU 65535: tagged 65520, untagged 65516 bytes per FPDU */
    ck_assert_uint_eq(emu_ddp_seg_max_payload(65535, true), 65520);
    ck_assert_uint_eq(emu_ddp_seg_max_payload(65535, false), 65516);
    ck_assert_uint_eq(emu_ddp_seg_max_payload(1454, true), 1440);
    ck_assert_uint_eq(emu_ddp_seg_max_payload(17, true), 0);
    ck_assert_uint_eq(emu_ddp_seg_max_payload(21, false), 0);
    ck_assert_uint_eq(emu_ddp_seg_max_payload(22, false), 4);
    /* 0-byte message: one segment, last, no payload */
    struct emu_ddp_seg s;
    struct emu_ddp_seg_info si;
    ck_assert_int_eq(emu_ddp_seg_init(&s, 0, 1454, false), 0);
    ck_assert(emu_ddp_seg_next(&s, &si));
    ck_assert(si.last && si.len == 0 && si.off == 0);
    ck_assert(!emu_ddp_seg_next(&s, &si));
    ck_assert_uint_eq(emu_ddp_msg_wire_len(0, 1454, EMU_OP_WRITE), 20);
    ck_assert_uint_eq(emu_ddp_msg_wire_len(0, 1454, EMU_OP_SEND), 24);
    ck_assert_uint_eq(emu_ddp_msg_wire_len(0, 1454, EMU_OP_READ_REQ), 52);
    ck_assert_uint_eq(emu_ddp_msg_wire_len(1, 1454, EMU_OP_READ_REQ), 0);
    /* exactly one full segment, and one byte more */
    ck_assert_uint_eq(emu_ddp_seg_count(65520, 65535, true), 1);
    ck_assert_uint_eq(emu_ddp_seg_count(65521, 65535, true), 2);
    ck_assert_uint_eq(emu_ddp_msg_wire_len(65520, 65535, EMU_OP_WRITE), 65540);
    ck_assert_uint_eq(emu_ddp_msg_wire_len(65521, 65535, EMU_OP_WRITE), 65540 + 20 + 4);
    /* 1 GiB: 16389 segments of 65516 (untagged) */
    uint64_t gib = 1ull << 30;
    ck_assert_uint_eq(emu_ddp_seg_count(gib, 65535, false), (gib + 65515) / 65516);
    ck_assert_uint_eq(emu_ddp_seg_count(gib, 65535, true), (gib + 65519) / 65520);
    check_segments(gib, 65535, false);
    check_segments(gib, 65535, true);
    /* limits: untagged up to 2^32-1 (32-bit MO); bad MULPDU */
    ck_assert_int_eq(emu_ddp_seg_init(&s, UINT32_MAX, 65535, false), 0);
    ck_assert_int_eq(emu_ddp_seg_init(&s, 1ull << 32, 65535, false), EMU_DDP_E_INVAL);
    ck_assert(!emu_ddp_seg_next(&s, &si));
    ck_assert_int_eq(emu_ddp_seg_init(&s, 1ull << 32, 65535, true), 0);
    ck_assert_int_eq(emu_ddp_seg_init(&s, 10, 10, true), EMU_DDP_E_INVAL);
    ck_assert_uint_eq(emu_ddp_seg_count(1ull << 32, 65535, false), 0);
}
END_TEST

/* Segment a message, build every FPDU, parse them back statefully: MSN
 * constant, MO increasing, L once, data intact. */
START_TEST(segment_build_parse_stream)
{
    enum { LEN = 10000, MUL = 1454 };
    uint8_t *msg = malloc(LEN), *rx = calloc(1, LEN), f[2048];
    for (int i = 0; i < LEN; i++)
        msg[i] = (uint8_t)(i * 13);
    struct emu_ddp_rx_state st;
    emu_ddp_rx_init(&st, true);
    for (uint32_t msn = 1; msn <= 3; msn++) {
        struct emu_ddp_hdr h = {.opcode = EMU_OP_SEND_SE, .msn = msn};
        struct emu_ddp_seg s;
        struct emu_ddp_seg_info si;
        ck_assert_int_eq(emu_ddp_seg_init(&s, LEN, MUL, false), 0);
        int lasts = 0;
        while (emu_ddp_seg_next(&s, &si)) {
            emu_ddp_seg_apply(&h, 0, &si);
            size_t n = fpdu(&h, msg + si.off, si.len, true, f, sizeof f);
            ck_assert_uint_le(n, MUL + 6 + 3);
            uint16_t ul = (uint16_t)(f[0] << 8 | f[1]);
            struct emu_ddp_hdr g;
            size_t need;
            ck_assert_int_eq(emu_ddp_parse(f + 2, n - 2, ul, &st, &g, &need), EMU_DDP_OK);
            ck_assert_uint_eq(g.msn, msn);
            ck_assert_uint_eq(g.mo, si.off);
            memcpy(rx + g.mo, f + 2 + g.hdr_len, g.payload_len);
            /* replaying the same segment is now an MO error */
            emu_ddp_rx_advance(&st, &g);
            if (!g.last)
                ck_assert_int_eq(emu_ddp_parse(f + 2, n - 2, ul, &st, &g, &need),
                                 EMU_DDP_E_MO);
            lasts += si.last;
        }
        ck_assert_int_eq(lasts, 1);
        ck_assert_mem_eq(rx, msg, LEN);
        ck_assert_uint_eq(st.q[0].msn, msn + 1);
        memset(rx, 0, LEN);
    }
    /* tagged: TO advances */
    struct emu_ddp_hdr w = {.opcode = EMU_OP_WRITE, .stag = 0x100};
    struct emu_ddp_seg s;
    struct emu_ddp_seg_info si;
    ck_assert_int_eq(emu_ddp_seg_init(&s, LEN, MUL, true), 0);
    uint64_t expect_to = 0x7000;
    while (emu_ddp_seg_next(&s, &si)) {
        emu_ddp_seg_apply(&w, 0x7000, &si);
        ck_assert_uint_eq(w.to, expect_to);
        expect_to += si.len;
    }
    ck_assert_uint_eq(expect_to, 0x7000 + LEN);
    free(msg);
    free(rx);
}
END_TEST

/* Random and mutated headers: parse never reads past avail, never asks for
 * more than the ULPDU, and every error maps to a Terminate. */
START_TEST(fuzz_parse)
{
    uint64_t x = 0x243F6A8885A308D3ull;
    const uint8_t *seeds[] = {ex_hello, ex_write, ex_rreq, ex_cmpswap, ex_aresp, ex_imm,
                              ex_term};
    const size_t seed_len[] = {sizeof ex_hello, sizeof ex_write, sizeof ex_rreq,
                               sizeof ex_cmpswap, sizeof ex_aresp, sizeof ex_imm,
                               sizeof ex_term};
    struct emu_ddp_rx_state st;
    emu_ddp_rx_init(&st, true);
    for (int it = 0; it < 200000; it++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        int k = (int)(x % 7);
        size_t n = seed_len[k] - 2;
        uint8_t *buf = malloc(n); /* exact size: ASan catches over-reads */
        memcpy(buf, seeds[k] + 2, n);
        for (int m = 0; m < 1 + (int)((x >> 8) & 3); m++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            buf[(x >> 16) % n] ^= (uint8_t)(1u << ((x >> 40) & 7));
        }
        uint16_t ul = (uint16_t)((x >> 24) & 1 ? n : (x >> 32) % (n + 1));
        size_t avail = ul < n ? ul : n, need = 0;
        struct emu_ddp_hdr g;
        int rc;
        while ((rc = emu_ddp_parse(buf, avail, ul, (x >> 50) & 1 ? &st : NULL, &g, &need)) ==
               EMU_DDP_NEED_MORE) {
            ck_assert_uint_gt(need, avail);
            ck_assert_uint_le(need, ul);
            avail = need;
        }
        if (rc == EMU_DDP_OK) {
            ck_assert_uint_eq(g.hdr_len + g.payload_len, ul);
            ck_assert_uint_le(g.hdr_len, avail);
        } else {
            struct emu_term t;
            ck_assert(emu_ddp_err_term(rc, buf, avail, ul, &t));
            char d[128];
            ck_assert_str_ne(emu_term_describe(&t, d, sizeof d), "");
            ck_assert(strstr(d, "unknown") == NULL);
        }
        free(buf);
    }
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("ddp");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, ref_send_hello);
    tcase_add_test(tc, ref_write_and_rtrs);
    tcase_add_test(tc, ref_read_request);
    tcase_add_test(tc, ref_rfc7306);
    tcase_add_test(tc, ref_terminate);
    tcase_add_test(tc, roundtrip_every_opcode);
    tcase_add_test(tc, terminate_variants);
    tcase_add_test(tc, parse_error_paths);
    tcase_add_test(tc, incremental_header);
    tcase_add_test(tc, build_errors);
    tcase_add_test(tc, crc_check_iov);
    tcase_add_test(tc, segmentation);
    tcase_add_test(tc, segment_build_parse_stream);
    tcase_add_test(tc, fuzz_parse);
    tcase_set_timeout(tc, 60);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int nf = srunner_ntests_failed(sr);
    srunner_free(sr);
    return nf ? 1 : 0;
}
