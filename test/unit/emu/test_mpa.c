/* MPA Request/Reply codec and negotiation (emu/mpa.[ch]). */
#include "emu/mpa.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

static const uint8_t ref_req[24] = {0x4d, 0x50, 0x41, 0x20, 0x49, 0x44, 0x20, 0x52,
                                    0x65, 0x71, 0x20, 0x46, 0x72, 0x61, 0x6d, 0x65,
                                    0x50, 0x02, 0x00, 0x04, 0x80, 0x10, 0xc0, 0x10};
static const uint8_t ref_rep[24] = {0x4d, 0x50, 0x41, 0x20, 0x49, 0x44, 0x20, 0x52,
                                    0x65, 0x70, 0x20, 0x46, 0x72, 0x61, 0x6d, 0x65,
                                    0x50, 0x02, 0x00, 0x04, 0x80, 0x10, 0x80, 0x10};

static struct emu_mpa_policy pol_default(void)
{
    struct emu_mpa_policy p = {.rev = 2, .crc = true, .p2p = true, .ird = 16, .ord = 16};
    return p;
}

/* Reference §2.3 example bytes, both directions. */
START_TEST(reference_bytes)
{
    struct emu_mpa_policy pol = pol_default();
    struct emu_mpa_frame req, rep, got;
    struct emu_mpa_result rres, ires;
    uint8_t buf[EMU_MPA_FRAME_MAX];
    size_t n;
    ck_assert_int_eq(emu_mpa_init_request(&req, &pol, NULL, 0), EMU_MPA_OK);
    ck_assert_int_eq(emu_mpa_encode(&req, buf, sizeof buf, &n), EMU_MPA_OK);
    ck_assert_uint_eq(n, 24);
    ck_assert_mem_eq(buf, ref_req, 24);
    ck_assert_uint_eq(emu_mpa_frame_len(&req), 24);

    ck_assert_int_eq(emu_mpa_parse_strict(buf, n, EMU_MPA_REQUEST, 2, 0, &got), EMU_MPA_OK);
    ck_assert(got.p2p && got.crc && got.enhanced && !got.markers && !got.reject);
    ck_assert_uint_eq(got.rtr, EMU_MPA_RTR_WRITE | EMU_MPA_RTR_READ);
    ck_assert_uint_eq(got.ird, 16);
    ck_assert_uint_eq(got.ord, 16);
    ck_assert_uint_eq(got.pd_len, 0);

    ck_assert_int_eq(emu_mpa_accept(&got, &pol, NULL, 0, &rep, &rres), EMU_MPA_OK);
    ck_assert_int_eq(emu_mpa_encode(&rep, buf, sizeof buf, &n), EMU_MPA_OK);
    ck_assert_uint_eq(n, 24);
    ck_assert_mem_eq(buf, ref_rep, 24);
    ck_assert(rres.p2p && rres.crc);
    ck_assert_int_eq(rres.rtr, EMU_MPA_RTR_WRITE);

    struct emu_mpa_frame prep;
    ck_assert_int_eq(emu_mpa_parse(buf, n, EMU_MPA_REPLY, 2, 0, &prep), EMU_MPA_OK);
    ck_assert_int_eq(emu_mpa_confirm(&req, &prep, &pol, &ires), EMU_MPA_OK);
    ck_assert(ires.p2p && ires.crc);
    ck_assert_int_eq(ires.rtr, EMU_MPA_RTR_WRITE);
    ck_assert_uint_eq(ires.ird, 16);
    ck_assert_uint_eq(ires.ord, 16);
}
END_TEST

/* Every flag combination and both revisions round-trip through encode/parse. */
START_TEST(roundtrip_all_flags)
{
    uint8_t pd[300], buf[EMU_MPA_FRAME_MAX];
    for (size_t i = 0; i < sizeof pd; i++)
        pd[i] = (uint8_t)(i * 7 + 1);
    for (int kind = 0; kind < 2; kind++)
        for (int rev = 1; rev <= 2; rev++)
            for (unsigned bits = 0; bits < 64; bits++) {
                struct emu_mpa_frame f = {
                    .kind = kind, .rev = (uint8_t)rev, .markers = bits & 1,
                    .crc = bits & 2, .reject = kind == EMU_MPA_REPLY && (bits & 4),
                    .enhanced = rev == 2 && (bits & 8), .p2p = bits & 16,
                    .rtr = (bits >> 5) ? 7 : 2, .ird = 0x1234, .ord = 0x3FFE,
                    .pd = pd, .pd_len = (uint16_t)(bits * 4)};
                size_t n;
                ck_assert_int_eq(emu_mpa_encode(&f, buf, sizeof buf, &n), EMU_MPA_OK);
                ck_assert_uint_eq(n, emu_mpa_frame_len(&f));
                size_t more;
                ck_assert_int_eq(emu_mpa_parse_header(buf, 20, kind, 2, 0, &more),
                                 EMU_MPA_OK);
                ck_assert_uint_eq(20 + more, n);
                struct emu_mpa_frame g;
                int rc = emu_mpa_parse(buf, n, kind, 2, 0, &g);
                ck_assert_int_eq(rc, f.markers ? EMU_MPA_E_MARKERS : EMU_MPA_OK);
                ck_assert_int_eq(g.kind, kind);
                ck_assert_uint_eq(g.rev, rev);
                ck_assert_int_eq(g.markers, f.markers);
                ck_assert_int_eq(g.crc, f.crc);
                ck_assert_int_eq(g.reject, f.reject);
                ck_assert_int_eq(g.enhanced, f.enhanced);
                if (f.enhanced) {
                    ck_assert_int_eq(g.p2p, f.p2p);
                    ck_assert_uint_eq(g.rtr, f.rtr);
                    ck_assert_uint_eq(g.ird, 0x1234);
                    ck_assert_uint_eq(g.ord, 0x3FFE);
                }
                ck_assert_uint_eq(g.pd_len, f.pd_len);
                if (f.pd_len) {
                    ck_assert_ptr_eq(g.pd, buf + (f.enhanced ? 24 : 20));
                    ck_assert_mem_eq(g.pd, pd, f.pd_len);
                }
            }
}
END_TEST

static void make_hdr(uint8_t *b, const char *key, uint8_t flags, uint8_t rev, uint16_t pdl)
{
    memcpy(b, key, 16);
    b[16] = flags;
    b[17] = rev;
    b[18] = (uint8_t)(pdl >> 8);
    b[19] = (uint8_t)pdl;
}

START_TEST(parse_errors)
{
    uint8_t b[EMU_MPA_FRAME_MAX + 16] = {0};
    struct emu_mpa_frame f;
    size_t more;
    /* truncated header, at every length */
    make_hdr(b, "MPA ID Req Frame", 0x40, 1, 0);
    for (size_t l = 0; l < 20; l++) {
        ck_assert_int_eq(emu_mpa_parse_header(b, l, EMU_MPA_REQUEST, 2, 0, &more),
                         EMU_MPA_E_SHORT);
        ck_assert_int_eq(emu_mpa_parse(b, l, EMU_MPA_REQUEST, 2, 0, &f), EMU_MPA_E_SHORT);
    }
    ck_assert_int_eq(emu_mpa_parse_header(NULL, 20, EMU_MPA_REQUEST, 2, 0, &more),
                     EMU_MPA_E_SHORT);
    /* truncated private data */
    make_hdr(b, "MPA ID Req Frame", 0x40, 1, 10);
    ck_assert_int_eq(emu_mpa_parse_header(b, 20, EMU_MPA_REQUEST, 2, 0, &more), EMU_MPA_OK);
    ck_assert_uint_eq(more, 10);
    ck_assert_int_eq(emu_mpa_parse(b, 29, EMU_MPA_REQUEST, 2, 0, &f), EMU_MPA_E_SHORT);
    ck_assert_int_eq(emu_mpa_parse(b, 30, EMU_MPA_REQUEST, 2, 0, &f), EMU_MPA_OK);
    /* trailing bytes: fine for parse (Reply + FPDU), not for strict */
    ck_assert_int_eq(emu_mpa_parse(b, 31, EMU_MPA_REQUEST, 2, 0, &f), EMU_MPA_OK);
    ck_assert_int_eq(emu_mpa_parse_strict(b, 31, EMU_MPA_REQUEST, 2, 0, &f),
                     EMU_MPA_E_TRAILING);
    ck_assert_int_eq(emu_mpa_parse_strict(b, 30, EMU_MPA_REQUEST, 2, 0, &f), EMU_MPA_OK);
    /* bad key: one byte off anywhere; lower-case; key of the other kind */
    for (int i = 0; i < 16; i++) {
        make_hdr(b, "MPA ID Req Frame", 0, 1, 0);
        b[i] ^= 0x01; /* byte 9: 'q' ^ 1 = 'p' makes the Reply key */
        ck_assert_int_eq(emu_mpa_parse(b, 20, EMU_MPA_REQUEST, 2, 0, &f),
                         i == 9 ? EMU_MPA_E_KEY_KIND : EMU_MPA_E_KEY);
    }
    make_hdr(b, "mpa id req frame", 0, 1, 0);
    ck_assert_int_eq(emu_mpa_parse(b, 20, EMU_MPA_REQUEST, 2, 0, &f), EMU_MPA_E_KEY);
    make_hdr(b, "MPA ID Rep Frame", 0, 1, 0);
    ck_assert_int_eq(emu_mpa_parse(b, 20, EMU_MPA_REQUEST, 2, 0, &f), EMU_MPA_E_KEY_KIND);
    make_hdr(b, "MPA ID Req Frame", 0, 1, 0);
    ck_assert_int_eq(emu_mpa_parse(b, 20, EMU_MPA_REPLY, 2, 0, &f), EMU_MPA_E_KEY_KIND);
    /* bad revision: 0, 3, 255; 2 when we only speak 1 */
    static const uint8_t bad_rev[] = {0, 3, 255};
    for (size_t i = 0; i < sizeof bad_rev; i++) {
        make_hdr(b, "MPA ID Req Frame", 0, bad_rev[i], 0);
        ck_assert_int_eq(emu_mpa_parse(b, 20, EMU_MPA_REQUEST, 2, 0, &f), EMU_MPA_E_REV);
    }
    make_hdr(b, "MPA ID Req Frame", 0, 2, 0);
    ck_assert_int_eq(emu_mpa_parse(b, 20, EMU_MPA_REQUEST, 1, 0, &f), EMU_MPA_E_REV);
    ck_assert_int_eq(emu_mpa_parse(b, 20, EMU_MPA_REQUEST, 0, 0, &f), EMU_MPA_OK);
    /* PD_Length: 512 ok, 513 and 0xFFFF not; a lower caller limit */
    make_hdr(b, "MPA ID Req Frame", 0, 1, 512);
    ck_assert_int_eq(emu_mpa_parse(b, 20 + 512, EMU_MPA_REQUEST, 2, 0, &f), EMU_MPA_OK);
    ck_assert_int_eq(emu_mpa_parse_header(b, 20, EMU_MPA_REQUEST, 2, 256, &more),
                     EMU_MPA_E_PD_LEN);
    make_hdr(b, "MPA ID Req Frame", 0, 1, 513);
    ck_assert_int_eq(emu_mpa_parse_header(b, 20, EMU_MPA_REQUEST, 2, 0, &more),
                     EMU_MPA_E_PD_LEN);
    ck_assert_int_eq(emu_mpa_parse_header(b, 20, EMU_MPA_REQUEST, 2, 1000, &more),
                     EMU_MPA_E_PD_LEN);
    make_hdr(b, "MPA ID Req Frame", 0, 1, 0xFFFF);
    ck_assert_int_eq(emu_mpa_parse_header(b, 20, EMU_MPA_REQUEST, 2, 0, &more),
                     EMU_MPA_E_PD_LEN);
    /* markers: decoded but reported */
    make_hdr(b, "MPA ID Req Frame", 0xC0, 1, 0);
    ck_assert_int_eq(emu_mpa_parse(b, 20, EMU_MPA_REQUEST, 2, 0, &f), EMU_MPA_E_MARKERS);
    ck_assert(f.markers && f.crc);
    /* R in a Request */
    make_hdr(b, "MPA ID Req Frame", 0x20, 1, 0);
    ck_assert_int_eq(emu_mpa_parse(b, 20, EMU_MPA_REQUEST, 2, 0, &f),
                     EMU_MPA_E_REJECT_IN_REQ);
    /* Enhanced with too little PD, and in a rev 1 frame */
    make_hdr(b, "MPA ID Req Frame", 0x10, 2, 3);
    ck_assert_int_eq(emu_mpa_parse(b, 23, EMU_MPA_REQUEST, 2, 0, &f), EMU_MPA_E_V2_SHORT);
    ck_assert_uint_eq(f.pd_len, 3);
    make_hdr(b, "MPA ID Req Frame", 0x10, 1, 4);
    ck_assert_int_eq(emu_mpa_parse(b, 24, EMU_MPA_REQUEST, 2, 0, &f), EMU_MPA_E_ENH_REV1);
    /* reserved flag bits are ignored */
    make_hdr(b, "MPA ID Rep Frame", 0x0F, 1, 0);
    ck_assert_int_eq(emu_mpa_parse(b, 20, EMU_MPA_REPLY, 2, 0, &f), EMU_MPA_OK);
    ck_assert_uint_eq(f.rsvd_flags, 0x0F);
    ck_assert(!f.crc && !f.markers && !f.reject && !f.enhanced);
    /* every error has a distinct message */
    for (int i = 0; i < EMU_MPA_E_COUNT; i++)
        for (int j = i + 1; j < EMU_MPA_E_COUNT; j++)
            ck_assert_str_ne(emu_mpa_strerror(i), emu_mpa_strerror(j));
    ck_assert_str_eq(emu_mpa_strerror(-1), "unknown MPA error");
}
END_TEST

START_TEST(encode_errors)
{
    uint8_t buf[EMU_MPA_FRAME_MAX], pd[600] = {0};
    size_t n;
    struct emu_mpa_frame f = {.kind = EMU_MPA_REQUEST, .rev = 1};
    ck_assert_int_eq(emu_mpa_encode(&f, buf, 19, &n), EMU_MPA_E_NOSPACE);
    ck_assert_int_eq(emu_mpa_encode(&f, buf, 20, &n), EMU_MPA_OK);
    f.rev = 0;
    ck_assert_int_eq(emu_mpa_encode(&f, buf, sizeof buf, &n), EMU_MPA_E_INVAL);
    f.rev = 1;
    f.enhanced = true;
    ck_assert_int_eq(emu_mpa_encode(&f, buf, sizeof buf, &n), EMU_MPA_E_INVAL);
    f.enhanced = false;
    f.reject = true;
    ck_assert_int_eq(emu_mpa_encode(&f, buf, sizeof buf, &n), EMU_MPA_E_INVAL);
    f.reject = false;
    f.pd = pd;
    f.pd_len = 512;
    ck_assert_int_eq(emu_mpa_encode(&f, buf, sizeof buf, &n), EMU_MPA_OK);
    f.rev = 2;
    f.enhanced = true; /* 512 + 4 > limit */
    ck_assert_int_eq(emu_mpa_encode(&f, buf, sizeof buf, &n), EMU_MPA_E_INVAL);
    f.pd_len = 508;
    ck_assert_int_eq(emu_mpa_encode(&f, buf, sizeof buf, &n), EMU_MPA_OK);
    ck_assert_uint_eq(n, EMU_MPA_FRAME_MAX);
    f.pd = NULL;
    ck_assert_int_eq(emu_mpa_encode(&f, buf, sizeof buf, &n), EMU_MPA_E_INVAL);
    /* IRD/ORD values are clamped to 14 bits and never leak into flag bits */
    struct emu_mpa_frame g = {.kind = EMU_MPA_REPLY, .rev = 2, .enhanced = true,
                              .ird = 0xFFFF, .ord = 0xFFFF};
    ck_assert_int_eq(emu_mpa_encode(&g, buf, sizeof buf, &n), EMU_MPA_OK);
    ck_assert_uint_eq(buf[20], 0x3F);
    ck_assert_uint_eq(buf[22], 0x3F);
    /* request helper limits */
    struct emu_mpa_policy pol = pol_default();
    struct emu_mpa_frame r;
    ck_assert_int_eq(emu_mpa_init_request(&r, &pol, pd, 509), EMU_MPA_E_INVAL);
    ck_assert_int_eq(emu_mpa_init_request(&r, &pol, pd, 508), EMU_MPA_OK);
    pol.rev = 1;
    ck_assert_int_eq(emu_mpa_init_request(&r, &pol, pd, 512), EMU_MPA_OK);
    ck_assert(!r.enhanced && !r.p2p);
    pol.rev = 3;
    ck_assert_int_eq(emu_mpa_init_request(&r, &pol, pd, 0), EMU_MPA_E_INVAL);
    pol = pol_default();
    pol.rtr = EMU_MPA_RTR_SEND; /* Send RTR is never offered */
    ck_assert_int_eq(emu_mpa_init_request(&r, &pol, NULL, 0), EMU_MPA_E_INVAL);
}
END_TEST

START_TEST(crc_negotiation)
{
    ck_assert(!emu_mpa_crc_negotiate(false, false));
    ck_assert(emu_mpa_crc_negotiate(true, false));
    ck_assert(emu_mpa_crc_negotiate(false, true));
    ck_assert(emu_mpa_crc_negotiate(true, true));
    for (int ic = 0; ic < 2; ic++)
        for (int rc = 0; rc < 2; rc++) {
            struct emu_mpa_policy ip = pol_default(), rp = pol_default();
            ip.crc = ic;
            rp.crc = rc;
            struct emu_mpa_frame req, rep;
            struct emu_mpa_result a, b;
            ck_assert_int_eq(emu_mpa_init_request(&req, &ip, NULL, 0), 0);
            ck_assert_int_eq(emu_mpa_accept(&req, &rp, NULL, 0, &rep, &a), 0);
            ck_assert_int_eq(rep.crc, ic || rc);
            ck_assert_int_eq(emu_mpa_confirm(&req, &rep, &ip, &b), 0);
            ck_assert_int_eq(a.crc, ic || rc);
            ck_assert_int_eq(b.crc, ic || rc);
        }
}
END_TEST

/* IRD/ORD per RFC 6581: R.ord <= I.ird, initiator's ORD lowered to R.ird. */
START_TEST(ird_ord_negotiation)
{
    struct emu_mpa_policy ip = pol_default(), rp = pol_default();
    struct emu_mpa_frame req, rep;
    struct emu_mpa_result a, b;
    ip.ird = 4;
    ip.ord = 8;
    rp.ird = 2;
    rp.ord = 32;
    ck_assert_int_eq(emu_mpa_init_request(&req, &ip, NULL, 0), 0);
    ck_assert_int_eq(emu_mpa_accept(&req, &rp, NULL, 0, &rep, &a), 0);
    ck_assert_uint_eq(rep.ord, 4); /* clamped to initiator IRD */
    ck_assert_uint_eq(rep.ird, 2);
    ck_assert_uint_eq(a.ord, 4);
    ck_assert_uint_eq(a.ird, 2);
    ck_assert_int_eq(emu_mpa_confirm(&req, &rep, &ip, &b), 0);
    ck_assert_uint_eq(b.ird, 4);
    ck_assert_uint_eq(b.ord, 2); /* lowered to responder's IRD */
    /* a Reply asking for more reads than we serve: insufficient IRD */
    rep.ord = 5;
    ck_assert_int_eq(emu_mpa_confirm(&req, &rep, &ip, &b), EMU_MPA_E_IRD);
    ck_assert_uint_eq(emu_mpa_err_llp_ecode(EMU_MPA_E_IRD), EMU_MPA_LLP_NO_IRD);
    /* huge local values are capped at 0x3FFE (0x3FFF means "not negotiated") */
    ip.ird = ip.ord = 0xFFFF;
    ck_assert_int_eq(emu_mpa_init_request(&req, &ip, NULL, 0), 0);
    ck_assert_uint_eq(req.ird, EMU_MPA_IRD_ORD_MAX);
    ck_assert_uint_eq(req.ord, EMU_MPA_IRD_ORD_MAX);
    /* a peer sending 0x3FFF ("no limit") lets us use our own ORD */
    rp.ord = 100;
    req.ird = 0x3FFF;
    ck_assert_int_eq(emu_mpa_accept(&req, &rp, NULL, 0, &rep, &a), 0);
    ck_assert_uint_eq(a.ord, 100);
    /* rev 1: no block, local values stand */
    ip = pol_default();
    ip.rev = 1;
    ck_assert_int_eq(emu_mpa_init_request(&req, &ip, NULL, 0), 0);
    ck_assert_int_eq(emu_mpa_accept(&req, &rp, NULL, 0, &rep, &a), 0);
    ck_assert(!rep.enhanced && rep.rev == 1 && !a.p2p);
    ck_assert_uint_eq(a.ird, 2);
    ck_assert_uint_eq(a.ord, 100);
    ck_assert_int_eq(emu_mpa_confirm(&req, &rep, &ip, &b), 0);
    ck_assert(!b.p2p);
    ck_assert_uint_eq(b.rev, 1);
}
END_TEST

START_TEST(rtr_selection)
{
    struct emu_mpa_policy ip = pol_default(), rp = pol_default();
    struct emu_mpa_frame req, rep;
    struct emu_mpa_result a, b;
    /* both offered -> Write (our choice) */
    ck_assert_int_eq(emu_mpa_init_request(&req, &ip, NULL, 0), 0);
    ck_assert_int_eq(emu_mpa_accept(&req, &rp, NULL, 0, &rep, &a), 0);
    ck_assert_int_eq(a.rtr, EMU_MPA_RTR_WRITE);
    ck_assert_uint_eq(rep.rtr, EMU_MPA_RTR_WRITE);
    /* only Read offered (Intel-style responder choice) -> Read, IRD >= 1 */
    ip.rtr = EMU_MPA_RTR_READ;
    rp.ird = 0;
    ck_assert_int_eq(emu_mpa_init_request(&req, &ip, NULL, 0), 0);
    ck_assert_int_eq(emu_mpa_accept(&req, &rp, NULL, 0, &rep, &a), 0);
    ck_assert_int_eq(a.rtr, EMU_MPA_RTR_READ);
    ck_assert_uint_ge(rep.ird, 1);
    ck_assert_int_eq(emu_mpa_confirm(&req, &rep, &ip, &b), 0);
    ck_assert_int_eq(b.rtr, EMU_MPA_RTR_READ);
    /* Reply choosing a type we did not offer -> NO_RTR (Terminate 0x07) */
    rep.rtr = EMU_MPA_RTR_WRITE;
    ck_assert_int_eq(emu_mpa_confirm(&req, &rep, &ip, &b), EMU_MPA_E_NO_RTR);
    ck_assert_uint_eq(emu_mpa_err_llp_ecode(EMU_MPA_E_NO_RTR), EMU_MPA_LLP_NO_RTR);
    rep.rtr = EMU_MPA_RTR_WRITE | EMU_MPA_RTR_READ; /* more than one */
    ck_assert_int_eq(emu_mpa_confirm(&req, &rep, &ip, &b), EMU_MPA_E_NO_RTR);
    rep.rtr = 0;
    ck_assert_int_eq(emu_mpa_confirm(&req, &rep, &ip, &b), EMU_MPA_E_NO_RTR);
    rep.rtr = EMU_MPA_RTR_READ;
    rep.p2p = false; /* A not echoed */
    ck_assert_int_eq(emu_mpa_confirm(&req, &rep, &ip, &b), EMU_MPA_E_NO_RTR);
    /* a peer offering only Send: we answer Write; its confirm would fail */
    struct emu_mpa_frame sreq = {.kind = EMU_MPA_REQUEST, .rev = 2, .enhanced = true,
                                 .p2p = true, .rtr = EMU_MPA_RTR_SEND, .ird = 1, .ord = 1};
    ck_assert_int_eq(emu_mpa_accept(&sreq, &rp, NULL, 0, &rep, &a), 0);
    ck_assert_int_eq(a.rtr, EMU_MPA_RTR_WRITE);
    /* no P2P requested: none chosen, none in the reply */
    ip = pol_default();
    ip.p2p = false;
    ck_assert_int_eq(emu_mpa_init_request(&req, &ip, NULL, 0), 0);
    ck_assert(!req.p2p && req.rtr == 0);
    ck_assert_int_eq(emu_mpa_accept(&req, &rp, NULL, 0, &rep, &a), 0);
    ck_assert(!a.p2p && a.rtr == EMU_MPA_RTR_NONE && !rep.p2p && rep.rtr == 0);
    ck_assert_int_eq(emu_mpa_confirm(&req, &rep, &ip, &b), 0);
    ck_assert(!b.p2p);
    rep.p2p = true; /* responder invents P2P */
    ck_assert_int_eq(emu_mpa_confirm(&req, &rep, &ip, &b), EMU_MPA_E_NO_RTR);
}
END_TEST

START_TEST(reject_with_private_data)
{
    static const char why[] = "no such service";
    struct emu_mpa_policy ip = pol_default(), rp = pol_default();
    struct emu_mpa_frame req, rep, got;
    struct emu_mpa_result b;
    uint8_t buf[EMU_MPA_FRAME_MAX];
    size_t n;
    for (int rev = 1; rev <= 2; rev++) {
        ip.rev = (uint8_t)rev;
        ck_assert_int_eq(emu_mpa_init_request(&req, &ip, "hi", 2), 0);
        ck_assert_int_eq(emu_mpa_reject(&req, &rp, why, sizeof why, &rep), 0);
        ck_assert_int_eq(emu_mpa_encode(&rep, buf, sizeof buf, &n), 0);
        ck_assert_uint_eq(n, 20 + (rev == 2 ? 4 : 0) + sizeof why);
        ck_assert_uint_eq(buf[16] & EMU_MPA_FLAG_R, EMU_MPA_FLAG_R);
        ck_assert_uint_eq(buf[16] & EMU_MPA_FLAG_M, 0);
        ck_assert_int_eq(emu_mpa_parse(buf, n, EMU_MPA_REPLY, 2, 0, &got), 0);
        ck_assert(got.reject);
        ck_assert_int_eq(got.enhanced, rev == 2);
        ck_assert_uint_eq(got.pd_len, sizeof why);
        ck_assert_mem_eq(got.pd, why, sizeof why);
        ck_assert_int_eq(emu_mpa_confirm(&req, &got, &ip, &b), EMU_MPA_E_REJECTED);
        ck_assert_uint_eq(emu_mpa_err_llp_ecode(EMU_MPA_E_REJECTED), 0);
    }
    /* a Request asking for markers cannot be accepted, only rejected */
    ip = pol_default();
    ck_assert_int_eq(emu_mpa_init_request(&req, &ip, NULL, 0), 0);
    req.markers = true;
    ck_assert_int_eq(emu_mpa_accept(&req, &rp, NULL, 0, &rep, NULL), EMU_MPA_E_MARKERS);
    ck_assert_int_eq(emu_mpa_reject(&req, &rp, NULL, 0, &rep), 0);
    ck_assert(rep.reject && !rep.markers);
    /* a Reply with markers is refused by the initiator */
    req.markers = false;
    ck_assert_int_eq(emu_mpa_accept(&req, &rp, NULL, 0, &rep, NULL), 0);
    rep.markers = true;
    ck_assert_int_eq(emu_mpa_confirm(&req, &rep, &ip, &b), EMU_MPA_E_MARKERS);
    /* revision/Enhanced mismatch */
    rep.markers = false;
    rep.enhanced = false;
    ck_assert_int_eq(emu_mpa_confirm(&req, &rep, &ip, &b), EMU_MPA_E_ENH_MISMATCH);
    ck_assert_uint_eq(emu_mpa_err_llp_ecode(EMU_MPA_E_ENH_MISMATCH),
                      EMU_MPA_LLP_BAD_REQREP);
}
END_TEST

START_TEST(private_data_passthrough)
{
    uint8_t pd[508], buf[EMU_MPA_FRAME_MAX];
    for (size_t i = 0; i < sizeof pd; i++)
        pd[i] = (uint8_t)rand();
    struct emu_mpa_policy ip = pol_default(), rp = pol_default();
    struct emu_mpa_frame req, rep, g1, g2;
    struct emu_mpa_result a, b;
    size_t n;
    ck_assert_int_eq(emu_mpa_init_request(&req, &ip, pd, sizeof pd), 0);
    ck_assert_int_eq(emu_mpa_encode(&req, buf, sizeof buf, &n), 0);
    ck_assert_uint_eq(n, EMU_MPA_FRAME_MAX);
    ck_assert_int_eq(emu_mpa_parse_strict(buf, n, EMU_MPA_REQUEST, 2, 0, &g1), 0);
    ck_assert_mem_eq(g1.pd, pd, sizeof pd);
    ck_assert_int_eq(emu_mpa_accept(&g1, &rp, pd + 8, 100, &rep, &a), 0);
    uint8_t buf2[EMU_MPA_FRAME_MAX];
    ck_assert_int_eq(emu_mpa_encode(&rep, buf2, sizeof buf2, &n), 0);
    ck_assert_int_eq(emu_mpa_parse(buf2, n, EMU_MPA_REPLY, 2, 256, &g2), 0);
    ck_assert_uint_eq(g2.pd_len, 100);
    ck_assert_mem_eq(g2.pd, pd + 8, 100);
    ck_assert_int_eq(emu_mpa_confirm(&req, &g2, &ip, &b), 0);
}
END_TEST

START_TEST(framing_arithmetic)
{
    /* (2 + ulpdu + pad) % 4 == 0 for every length */
    for (uint32_t l = 0; l <= 65535; l++) {
        unsigned pad = emu_fpdu_pad(l);
        ck_assert_uint_lt(pad, 4);
        ck_assert_uint_eq((2 + l + pad) % 4, 0);
        ck_assert_uint_eq(emu_fpdu_wire_len(l), 2 + l + pad + 4);
    }
    ck_assert_uint_eq(emu_fpdu_pad(18 + 13), 3); /* "Hello, iWARP!" */
    ck_assert_uint_eq(emu_fpdu_pad(14), 0);
    /* MULPDU = EMSS - (6 + EMSS % 4), capped, ULPDU+pad+6 fits the EMSS */
    ck_assert_uint_eq(emu_mpa_mulpdu(1460), 1454);
    ck_assert_uint_eq(emu_mpa_mulpdu(1448), 1442);
    ck_assert_uint_eq(emu_mpa_mulpdu(65483), 65483 - 9);
    ck_assert_uint_eq(emu_mpa_mulpdu(1u << 20), 65535);
    ck_assert_uint_eq(emu_mpa_mulpdu(10), 0);
    for (uint32_t e = 100; e < 70000; e += 7) {
        uint32_t m = emu_mpa_mulpdu(e);
        if (m < 65535)
            ck_assert_uint_le(emu_fpdu_wire_len(m), e);
    }
}
END_TEST

START_TEST(crc_policy)
{
    ck_assert_int_eq(emu_mpa_crc_mode_parse(NULL), EMU_MPA_CRC_AUTO);
    ck_assert_int_eq(emu_mpa_crc_mode_parse(""), EMU_MPA_CRC_AUTO);
    ck_assert_int_eq(emu_mpa_crc_mode_parse("AUTO"), EMU_MPA_CRC_AUTO);
    ck_assert_int_eq(emu_mpa_crc_mode_parse("on"), EMU_MPA_CRC_ON);
    ck_assert_int_eq(emu_mpa_crc_mode_parse("1"), EMU_MPA_CRC_ON);
    ck_assert_int_eq(emu_mpa_crc_mode_parse("Off"), EMU_MPA_CRC_OFF);
    ck_assert_int_eq(emu_mpa_crc_mode_parse("no"), EMU_MPA_CRC_OFF);
    ck_assert_int_eq(emu_mpa_crc_mode_parse("maybe"), -1);
    ck_assert(!emu_mpa_crc_want(EMU_MPA_CRC_AUTO, true));
    ck_assert(emu_mpa_crc_want(EMU_MPA_CRC_AUTO, false));
    ck_assert(emu_mpa_crc_want(EMU_MPA_CRC_ON, true));
    ck_assert(!emu_mpa_crc_want(EMU_MPA_CRC_OFF, false));
}
END_TEST

/* Mutated frames: parse never crashes, reads only len bytes, and every
 * error has a name. */
START_TEST(fuzz_parse)
{
    uint64_t x = 0x13198A2E03707344ull;
    for (int it = 0; it < 100000; it++) {
        uint8_t src[EMU_MPA_FRAME_MAX], pd[40];
        size_t n;
        struct emu_mpa_frame f = {.kind = (enum emu_mpa_kind)(it & 1), .rev = 2,
                                  .enhanced = true, .p2p = true, .rtr = 6,
                                  .pd = pd, .pd_len = (uint16_t)(it % 40)};
        memset(pd, 0x5A, sizeof pd);
        ck_assert_int_eq(emu_mpa_encode(&f, src, sizeof src, &n), 0);
        for (int m = 0; m < 1 + (it & 3); m++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            src[(x >> 16) % 24] ^= (uint8_t)(1u << ((x >> 40) & 7));
        }
        size_t len = (x >> 30) & 1 ? n : (x >> 33) % (n + 1);
        uint8_t *buf = malloc(len ? len : 1);
        memcpy(buf, src, len);
        struct emu_mpa_frame g;
        int rc = emu_mpa_parse(buf, len, f.kind, 2, 0, &g);
        ck_assert_int_ge(rc, 0);
        ck_assert_int_lt(rc, EMU_MPA_E_COUNT);
        if (rc == EMU_MPA_OK)
            ck_assert_uint_le(emu_mpa_frame_len(&g), len);
        free(buf);
    }
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("mpa");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, reference_bytes);
    tcase_add_test(tc, roundtrip_all_flags);
    tcase_add_test(tc, parse_errors);
    tcase_add_test(tc, encode_errors);
    tcase_add_test(tc, crc_negotiation);
    tcase_add_test(tc, ird_ord_negotiation);
    tcase_add_test(tc, rtr_selection);
    tcase_add_test(tc, reject_with_private_data);
    tcase_add_test(tc, private_data_passthrough);
    tcase_add_test(tc, framing_arithmetic);
    tcase_add_test(tc, crc_policy);
    tcase_add_test(tc, fuzz_parse);
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
