/* mkseeds: writes the seed corpus of the fuzz targets (test/fuzz/corpus/)
 * from the project's own encoders, so every seed is a real frame or stream:
 * MPA Requests/Replies (emu_mpa_*), FPDUs (emu_fpdu_build_hdr/trailer),
 * Terminates (emu_term_init), dat.conf lines. The receive-path seeds name
 * the STags fuzz_qp_rx registers (qp_env.h, same deterministic keys).
 *
 *   mkseeds DIR    writes DIR/{mpa,ddp,terminate,qp_rx,datconf}/NAME
 * `make fuzz-seeds` runs it into test/fuzz/corpus (committed). */
#include "test/fuzz/qp_env.h"

#include "emu/conn.h"
#include "emu/ddp.h"
#include "emu/mpa.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>

/* Same constant keys as fuzz_qp_rx.c. */
ssize_t getrandom(void *buf, size_t len, unsigned int flags)
{
    (void)flags;
    memset(buf, 0x5A, len);
    return (ssize_t)len;
}

static const char *top;

static void die(const char *what)
{
    fprintf(stderr, "mkseeds: %s\n", what);
    exit(1);
}

static void put(const char *target, const char *name, const void *p, size_t n)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", top, target);
    if (mkdir(path, 0755) != 0 && errno != EEXIST)
        die(path);
    snprintf(path, sizeof path, "%s/%s/%s", top, target, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(p, 1, n, f) != n || fclose(f) != 0)
        die(path);
}

/* ---- a growing byte buffer ---- */
struct buf {
    uint8_t b[80 * 1024];
    size_t n;
};

static void add(struct buf *b, const void *p, size_t n)
{
    if (b->n + n > sizeof b->b)
        die("seed too large");
    memcpy(b->b + b->n, p, n);
    b->n += n;
}

static void fpdu(struct buf *b, const struct emu_ddp_hdr *h, const void *pay, uint32_t plen,
                 bool crc)
{
    uint8_t hdr[EMU_FPDU_HDR_MAX], trl[EMU_FPDU_TRAILER_MAX];
    size_t hlen = 0;
    if (emu_fpdu_build_hdr(h, plen, hdr, sizeof hdr, &hlen) != EMU_DDP_OK)
        die("fpdu header");
    struct iovec iov = {(void *)pay, plen};
    size_t tlen = emu_fpdu_build_trailer(hdr, hlen, &iov, plen ? 1 : 0, crc, trl);
    add(b, hdr, hlen);
    if (plen)
        add(b, pay, plen);
    add(b, trl, tlen);
}

static uint8_t payload[64 * 1024];

/* ---- MPA ---- */
static void mpa_put(const char *name, uint8_t ctl, const struct emu_mpa_frame *f)
{
    uint8_t buf[1 + EMU_MPA_FRAME_MAX];
    size_t n = 0;
    buf[0] = ctl;
    if (emu_mpa_encode(f, buf + 1, sizeof buf - 1, &n) != EMU_MPA_OK)
        die(name);
    put("mpa", name, buf, n + 1);
}

static void seeds_mpa(void)
{
    uint8_t pd[EMU_CONN_CAP_MARKER_LEN + 32];
    emu_conn_caps_encode(pd, EMU_CONN_CAPS_LOCAL);
    memcpy(pd + EMU_CONN_CAP_MARKER_LEN, "softdat private data 0123456789", 32);
    struct emu_mpa_policy p2 = {.rev = 2, .crc = false, .p2p = true, .ird = 16, .ord = 16};
    struct emu_mpa_policy p2crc = {.rev = 2, .crc = true, .p2p = true, .ird = 1, .ord = 1,
                                   .rtr = EMU_MPA_RTR_READ};
    struct emu_mpa_policy p1 = {.rev = 1, .crc = true};
    struct emu_mpa_frame req, rep;
    struct emu_mpa_result res;

    emu_mpa_init_request(&req, &p2, pd, sizeof pd);
    mpa_put("req_v2_p2p_caps", 0x00, &req);
    emu_mpa_accept(&req, &p2, pd, sizeof pd, &rep, &res);
    mpa_put("rep_v2_accept_caps", 0x01, &rep);
    emu_mpa_reject(&req, &p2, "no", 2, &rep);
    mpa_put("rep_v2_reject", 0x01, &rep);

    emu_mpa_init_request(&req, &p2crc, NULL, 0);
    mpa_put("req_v2_crc_read_rtr", 0x80, &req);
    emu_mpa_accept(&req, &p2crc, NULL, 0, &rep, &res);
    mpa_put("rep_v2_crc_read_rtr", 0xA1, &rep);

    emu_mpa_init_request(&req, &p1, "hello", 5);
    mpa_put("req_v1_crc", 0x12, &req);
    emu_mpa_accept(&req, &p1, "world", 5, &rep, &res);
    mpa_put("rep_v1", 0x13, &rep);

    uint8_t big[EMU_MPA_PD_INTEROP - EMU_MPA_V2_LEN];
    memset(big, 'x', sizeof big);
    emu_mpa_init_request(&req, &p2, big, sizeof big);
    mpa_put("req_v2_pd_interop_max", 0x04, &req);
    req.markers = true;
    mpa_put("req_v2_markers", 0x00, &req);
}

/* ---- DDP ---- */
static struct emu_ddp_hdr send_h(uint8_t op, uint32_t msn, uint32_t mo, bool last)
{
    struct emu_ddp_hdr h = {.opcode = op, .last = last, .msn = msn, .mo = mo};
    if (op == EMU_OP_SEND_INV || op == EMU_OP_SEND_SE_INV)
        h.inv_stag = 0x10203;
    return h;
}

static struct emu_ddp_hdr write_h(uint32_t stag, uint64_t to, bool last)
{
    struct emu_ddp_hdr h = {.opcode = EMU_OP_WRITE, .last = last, .stag = stag, .to = to};
    return h;
}

static struct emu_ddp_hdr rreq_h(uint32_t msn, uint32_t sink, uint32_t size, uint32_t src,
                                 uint64_t src_to)
{
    struct emu_ddp_hdr h = {.opcode = EMU_OP_READ_REQ, .last = true, .msn = msn};
    h.u.rreq = (struct emu_rdmap_read_req){.sink_stag = sink, .sink_to = 0, .size = size,
                                           .src_stag = src, .src_to = src_to};
    return h;
}

static struct emu_ddp_hdr atomic_h(uint32_t msn, uint32_t stag, uint64_t to)
{
    struct emu_ddp_hdr h = {.opcode = EMU_OP_ATOMIC_REQ, .last = true, .msn = msn};
    h.u.areq = (struct emu_rdmap_atomic_req){.op = EMU_ATOMIC_FETCH_ADD, .req_id = 7,
                                             .stag = stag, .to = to, .add_swap = 5};
    return h;
}

static struct emu_ddp_hdr imm_h(uint32_t msn)
{
    struct emu_ddp_hdr h = {.opcode = EMU_OP_IMM, .last = true, .msn = msn};
    emu_rdmap_imm_from_u32(h.u.imm, 0xCAFEF00D);
    return h;
}

static struct emu_ddp_hdr term_h(uint8_t layer, uint8_t etype, uint8_t ecode,
                                 const struct buf *offending)
{
    struct emu_term t;
    const uint8_t *seg = offending ? offending->b + 2 : NULL;
    size_t avail = offending ? offending->n - 2 : 0;
    uint16_t ulpdu = offending ? (uint16_t)(offending->b[0] << 8 | offending->b[1]) : 0;
    emu_term_init(&t, layer, etype, ecode, seg, avail, ulpdu);
    struct emu_ddp_hdr h;
    emu_term_hdr(&h, &t);
    return h;
}

static void ddp_put(const char *name, uint8_t ctl, const struct buf *b)
{
    uint8_t out[1 + sizeof b->b];
    out[0] = ctl;
    memcpy(out + 1, b->b, b->n);
    put("ddp", name, out, b->n + 1);
}

static void seeds_ddp(void)
{
    static struct buf b;
    struct emu_ddp_hdr h;
#define ONE(name, ctl, hdr, plen)                \
    do {                                         \
        b.n = 0;                                 \
        h = (hdr);                               \
        fpdu(&b, &h, payload, (plen), false);    \
        ddp_put(name, ctl, &b);                  \
    } while (0)
    ONE("send", 0x00, send_h(EMU_OP_SEND, 1, 0, true), 100);
    ONE("send_se_inv", 0x00, send_h(EMU_OP_SEND_SE_INV, 1, 0, true), 3);
    ONE("write", 0x02, write_h(0x1234, 0x1000, true), 64);
    ONE("read_req", 0x00, rreq_h(1, 0x1A5, 4096, 0x1234, 0), 0);
    ONE("imm_7306", 0x01, imm_h(1), 0);
    ONE("atomic_7306", 0x01, atomic_h(1, 0x1234, 8), 0);
    ONE("term_ddp_nobuf", 0x00, term_h(EMU_TERM_DDP, EMU_TERM_DDP_UNTAGGED,
                                        EMU_DDP_EC_U_NO_BUF, NULL), 0);
    h = (struct emu_ddp_hdr){.opcode = EMU_OP_ATOMIC_RESP, .last = true, .msn = 1};
    h.u.aresp = (struct emu_rdmap_atomic_resp){.req_id = 7, .orig = 42};
    ONE("atomic_resp_7306", 0x01, h, 0);
    ONE("read_resp", 0x02, ((struct emu_ddp_hdr){.opcode = EMU_OP_READ_RESP, .last = true,
                                                 .stag = 0x1A5, .to = 0}), 32);

    /* A stream: a Send in three segments, a Write, a Read Request, a Send. */
    b.n = 0;
    h = send_h(EMU_OP_SEND, 1, 0, false);
    fpdu(&b, &h, payload, 16, false);
    h = send_h(EMU_OP_SEND, 1, 16, false);
    fpdu(&b, &h, payload, 16, false);
    h = send_h(EMU_OP_SEND, 1, 32, true);
    fpdu(&b, &h, payload, 5, false);
    h = write_h(0x77, 0, true);
    fpdu(&b, &h, payload, 9, false);
    h = rreq_h(1, 0x1A5, 0, 0x77, 0);
    fpdu(&b, &h, NULL, 0, false);
    h = send_h(EMU_OP_SEND_SE, 2, 0, true);
    fpdu(&b, &h, payload, 1, false);
    ddp_put("stream_mixed", 0x00, &b);
    ddp_put("stream_mixed_trickle", 0x04, &b);
#undef ONE
}

/* ---- Terminate ---- */
static void seeds_term(void)
{
    static struct buf off, t;
    struct emu_ddp_hdr h = write_h(0x1234, 0x40, true);
    off.n = 0;
    fpdu(&off, &h, payload, 8, false);
    struct emu_ddp_hdr rr = rreq_h(3, 0x1A5, 64, 0x99, 0);
    static struct buf offr;
    offr.n = 0;
    fpdu(&offr, &rr, NULL, 0, false);
    static const struct {
        const char *name;
        uint8_t layer, etype, ecode;
        int which; /* 0 none, 1 Write, 2 Read Request */
    } v[] = {
        {"llp_crc", EMU_TERM_LLP, EMU_TERM_LLP_MPA, EMU_MPA_LLP_CRC, 0},
        {"ddp_tagged_stag", EMU_TERM_DDP, EMU_TERM_DDP_TAGGED, EMU_DDP_EC_T_INV_STAG, 1},
        {"ddp_untagged_nobuf", EMU_TERM_DDP, EMU_TERM_DDP_UNTAGGED, EMU_DDP_EC_U_NO_BUF, 1},
        {"rdmap_prot_bounds_rreq", EMU_TERM_RDMAP, EMU_TERM_RDMAP_PROTECTION,
         EMU_RDMAP_EC_BOUNDS, 2},
        {"rdmap_op_opcode", EMU_TERM_RDMAP, EMU_TERM_RDMAP_OPERATION, EMU_RDMAP_EC_OPCODE, 1},
        {"rdmap_op_unspec", EMU_TERM_RDMAP, EMU_TERM_RDMAP_OPERATION,
         EMU_RDMAP_EC_UNSPECIFIED, 1},
    };
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        h = term_h(v[i].layer, v[i].etype, v[i].ecode,
                   v[i].which == 1 ? &off : v[i].which == 2 ? &offr : NULL);
        t.n = 0;
        fpdu(&t, &h, NULL, 0, false);
        /* fuzz_terminate: ULPDU_Length, then what follows the fixed
         * 18-byte untagged header. */
        uint8_t out[2 + EMU_DDP_HLEN_MAX];
        size_t body = (size_t)(t.b[0] << 8 | t.b[1]) - EMU_DDP_UNTAGGED_HLEN;
        out[0] = t.b[0];
        out[1] = t.b[1];
        memcpy(out + 2, t.b + 2 + EMU_DDP_UNTAGGED_HLEN, body);
        put("terminate", v[i].name, out, 2 + body);
    }
}

/* ---- the receive path ---- */
static void qp_put(const char *name, uint8_t fl, uint8_t irdord, uint16_t seed,
                   const struct buf *b)
{
    static uint8_t out[4 + sizeof b->b];
    out[0] = fl;
    out[1] = irdord;
    out[2] = (uint8_t)(seed >> 8);
    out[3] = (uint8_t)seed;
    memcpy(out + 4, b->b, b->n);
    put("qp_rx", name, out, b->n + 4);
}

#define F_CRC 0x01
#define F_7306 0x02
#define F_READ 0x04
#define F_RECV3 0x18
#define F_SGE2 0x20
#define F_SLOWTX 0x40
#define F_RNR 0x80
/* byte 1: 0x44 = IRD 4 / ORD 4; | 0x08 receives on an SRQ; | 0x80 a Send and a
 * Write outstanding (placement_ack) */

static void seeds_qp(const struct qpenv *e)
{
    static struct buf b;
    struct emu_ddp_hdr h;
    const uint32_t *st = e->stag;
    for (int crc = 0; crc < 2; crc++) {
        uint8_t fc = crc ? F_CRC : 0;
        char name[64];
#define QP(nm, fl, io, sd)                                                   \
    do {                                                                     \
        snprintf(name, sizeof name, "%s%s", nm, crc ? "_crc" : "");          \
        qp_put(name, (uint8_t)((fl) | fc), io, sd, &b);                      \
    } while (0)
        b.n = 0;
        h = write_h(st[0], 16, true);
        fpdu(&b, &h, payload, 200, crc);
        h = send_h(EMU_OP_SEND, 1, 0, true);
        fpdu(&b, &h, payload, 100, crc);
        QP("write_send", F_RECV3, 0x44, 1);
        QP("write_send_sge2", F_RECV3 | F_SGE2, 0x44, 2);

        b.n = 0;
        h = write_h(st[1], 100, true);
        fpdu(&b, &h, payload, 20000, crc); /* the direct (in-place) path */
        QP("write_large", 0, 0x44, 3);

        b.n = 0;
        h = rreq_h(1, 0x5000, 128, st[2], 0);
        fpdu(&b, &h, NULL, 0, crc);
        h = rreq_h(2, 0x5001, 0, 0, 0); /* a placement probe */
        fpdu(&b, &h, NULL, 0, crc);
        h = rreq_h(3, 0x5002, 64, st[1], 64);
        fpdu(&b, &h, NULL, 0, crc);
        QP("read_requests", 0, 0x44, 4);
        QP("read_requests_slowtx", F_SLOWTX, 0x44, 5);

        b.n = 0;
        h = send_h(EMU_OP_SEND_INV, 1, 0, true);
        h.inv_stag = st[3];
        fpdu(&b, &h, payload, 10, crc);
        h = write_h(st[3], 0, true); /* after the invalidation: refused */
        fpdu(&b, &h, payload, 8, crc);
        QP("send_inv_then_write", F_RECV3, 0x44, 6);

        b.n = 0;
        h = atomic_h(1, st[1], 8);
        fpdu(&b, &h, NULL, 0, crc);
        h = write_h(st[1], 0, true);
        fpdu(&b, &h, payload, 12, crc);
        h = imm_h(1);
        fpdu(&b, &h, NULL, 0, crc);
        QP("atomic_write_imm", F_7306 | F_RECV3, 0x44, 7);

        b.n = 0;
        h = (struct emu_ddp_hdr){.opcode = EMU_OP_READ_RESP, .last = false,
                                 .stag = QPENV_READ_SINK_STAG, .to = 0};
        fpdu(&b, &h, payload, 100, crc);
        h.to = 100;
        h.last = true;
        fpdu(&b, &h, payload, QPENV_SINK_LEN - 100, crc);
        QP("read_response", F_READ, 0x44, 8);

        b.n = 0;
        h = send_h(EMU_OP_SEND, 1, 0, false);
        fpdu(&b, &h, payload, 64, crc);
        h = send_h(EMU_OP_SEND, 1, 64, true);
        fpdu(&b, &h, payload, 64, crc);
        h = send_h(EMU_OP_SEND_SE, 2, 0, true);
        fpdu(&b, &h, payload, 201, crc); /* over max_message_size */
        QP("send_segments_then_too_long", F_RECV3, 0x44, 9);

        b.n = 0;
        h = write_h(st[2], 0, true); /* read-only region: refused */
        fpdu(&b, &h, payload, 4, crc);
        QP("write_readonly", 0, 0x44, 10);

        b.n = 0;
        h = write_h(st[0], 250, true); /* runs past the end: refused */
        fpdu(&b, &h, payload, 16, crc);
        QP("write_bounds", 0, 0x44, 11);

        b.n = 0;
        h = term_h(EMU_TERM_DDP, EMU_TERM_DDP_UNTAGGED, EMU_DDP_EC_U_NO_BUF, NULL);
        fpdu(&b, &h, NULL, 0, crc);
        QP("terminate_in", F_READ, 0x44, 12);

        b.n = 0;
        h = send_h(EMU_OP_SEND, 1, 0, true);
        fpdu(&b, &h, payload, 8, crc);
        QP("send_no_recv", 0, 0x44, 13);
        QP("send_srq", F_RECV3, 0x4C, 14);

        /* No receive posted, IB semantics: the harness posts one per stall. */
        b.n = 0;
        h = send_h(EMU_OP_SEND, 1, 0, true);
        fpdu(&b, &h, payload, 40, crc);
        h = send_h(EMU_OP_SEND_SE, 2, 0, false);
        fpdu(&b, &h, payload, 20, crc);
        h = send_h(EMU_OP_SEND_SE, 2, 20, true);
        fpdu(&b, &h, payload, 20, crc);
        h = imm_h(3);
        fpdu(&b, &h, NULL, 0, crc);
        QP("rnr_stall_then_recv", F_RNR | F_7306, 0x44, 17);
        QP("rnr_stall_then_recv_srq", F_RNR | F_7306, 0x4C, 18);

        /* The peer refuses our Send (QN 0, MSN 1) and then our Write: the
         * Terminates copy the offending headers, blaming those WRs. */
        static struct buf ours;
        ours.n = 0;
        h = send_h(EMU_OP_SEND, 1, 0, true);
        fpdu(&ours, &h, payload, 16, false);
        b.n = 0;
        h = term_h(EMU_TERM_DDP, EMU_TERM_DDP_UNTAGGED, EMU_DDP_EC_U_NO_BUF, &ours);
        fpdu(&b, &h, NULL, 0, crc);
        QP("terminate_blames_send", 0, 0xC4, 15);
        ours.n = 0;
        h = write_h(0x4321, 8, true);
        fpdu(&ours, &h, payload, 16, false);
        b.n = 0;
        h = term_h(EMU_TERM_DDP, EMU_TERM_DDP_TAGGED, EMU_DDP_EC_T_BOUNDS, &ours);
        fpdu(&b, &h, NULL, 0, crc);
        QP("terminate_blames_write", 0, 0xC4, 16);
#undef QP
    }
}

/* ---- dat.conf ---- */
static void seeds_datconf(void)
{
    static const char *const files[][2] = {
        {"softdat",
         "# softdat dat.conf entries\n"
         "softdat-lo     u2.0  nonthreadsafe  default  libdaplsoft.so.2  dapl.2.0  \"lo\"  \"\"\n"
         "softdat-lo6-iw u2.0  threadsafe     default  libdaplsoft.so.2  dapl.2.0  \"::1 iwarp\" \"\"\n"},
        {"ofa_style",
         "ofa-v2-ib0 u2.0 nonthreadsafe default libdaploscm.so.2 dapl.2.0 \"ib0 0\" \"\"\n"
         "ofa-v2-mlx4_0-1 u2.0 nonthreadsafe default libdaploucm.so.2 dapl.2.0 \"mlx4_0 1\" \"\"\n"
         "\n   # indented comment\n"
         "kernel-ia k1.2 threadsafe nondefault /abs/path/libx.so ri.1.1 \"a b c\" \"p q\"\n"},
        {"bad_lines",
         "too few fields u2.0\n"
         "x u9999999999.0 threadsafe default lib p.1.0 \"\" \"\"\n"
         "y u2.0 maybe default lib p.1.0 \"unterminated \"\"\n"
         "z u2.0 threadsafe default lib p.1.0 \"\" \"\" extra\n"},
    };
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++)
        put("datconf", files[i][0], files[i][1], strlen(files[i][1]));
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: mkseeds DIR\n");
        return 2;
    }
    top = argv[1];
    if (mkdir(top, 0755) != 0 && errno != EEXIST)
        die(top);
    for (size_t i = 0; i < sizeof payload; i++)
        payload[i] = (uint8_t)(i * 31u + 7u);
    seeds_mpa();
    seeds_ddp();
    seeds_term();
    static uint8_t arena[256 * 1024];
    struct qpenv e = {.arena = arena};
    if (QPENV_ARENA_LEN > sizeof arena || qpenv_setup(&e) != 0)
        die("qp env");
    seeds_qp(&e);
    if (qpenv_teardown(&e) != 0)
        die("qp env teardown");
    seeds_datconf();
    return 0;
}
