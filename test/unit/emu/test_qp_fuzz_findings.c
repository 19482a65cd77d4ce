/* emu/qp: regression tests for what the fuzzers found (docs/reliability.md,
 * "Findings"). Each case feeds the receive path the bytes of the finding
 * and checks what the QP does and sends.
 *
 * Seam (as in test/fuzz/fuzz_qp_rx.c): the QP is attached to a stand-in
 * struct emu_conn defined here, over a socketpair; the emu_conn_* functions
 * the QP calls are defined below, so emu/conn.o is not linked in. What the
 * QP transmits is collected for the checks. */
#include "emu/conn.h"
#include "emu/wire_io.h"
#include "emu/ddp.h"
#include "emu/mem.h"
#include "emu/qp.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

struct emu_conn {
    struct emu_wire_ep wire;
    struct emu_conn_info info;
    int failed;
    uint8_t out[64 * 1024];
    size_t out_len;
};

struct emu_wire_ep *emu_conn_wire(struct emu_conn *c)
{
    return &c->wire;
}

int emu_conn_get_info(struct emu_conn *c, struct emu_conn_info *out)
{
    *out = c->info;
    return 0;
}

ssize_t emu_conn_writev(struct emu_conn *c, const struct iovec *iov, int iovcnt)
{
    if (c->failed)
        return -ENOTCONN;
    size_t n = 0;
    for (int i = 0; i < iovcnt; i++) {
        ck_assert_uint_le(c->out_len + iov[i].iov_len, sizeof c->out);
        memcpy(c->out + c->out_len, iov[i].iov_base, iov[i].iov_len);
        c->out_len += iov[i].iov_len;
        n += iov[i].iov_len;
    }
    return (ssize_t)n;
}

int emu_conn_last_words(struct emu_conn *c, const struct iovec *iov, int iovcnt)
{
    return iovcnt == 0 ? 0 : (int)emu_conn_writev(c, iov, iovcnt) < 0 ? -ENOTCONN : 0;
}

int emu_conn_fail(struct emu_conn *c, int err)
{
    if (!c->failed)
        c->failed = err;
    return 0;
}

int emu_conn_disconnect(struct emu_conn *c, bool graceful)
{
    (void)graceful;
    if (!c->failed)
        c->failed = ESHUTDOWN;
    return 0;
}

void emu_conn_want_tx(struct emu_conn *c, bool on)
{
    (void)c;
    (void)on;
}

void emu_conn_set_rx_retry(struct emu_conn *c, uint32_t usec)
{
    (void)c;
    (void)usec;
}

void emu_conn_rx_again_after(struct emu_conn *c, uint32_t usec)
{
    (void)c;
    (void)usec;
}

bool emu_conn_rx_again_within(struct emu_conn *c, uint32_t usec)
{
    (void)c;
    (void)usec;
    return false;
}

int emu_conn_rx_kick(struct emu_conn *c)
{
    (void)c;
    return 0;
}

/* ---- a QP with one readable region, attached over a socketpair ---- */
static int g_fatal;
static struct emu_qp_fatal g_f;

static void on_done(void *ctx, const struct emu_cqe *cqe)
{
    (void)ctx;
    (void)cqe;
}

static void on_fatal(void *ctx, const struct emu_qp_fatal *f)
{
    (void)ctx;
    g_fatal++;
    g_f = *f;
}

static const struct emu_qp_ops ops = {on_done, on_done, on_fatal};

struct rig {
    int sv[2];
    struct emu_mem_table *mt;
    struct emu_pz *pz;
    struct emu_mr *mr;
    uint32_t stag;
    uint8_t mem[4096];
    struct emu_qp *qp;
    struct emu_conn c;
};

static struct rig R;

static void rig_up(void)
{
    memset(&R, 0, sizeof R);
    g_fatal = 0;
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, R.sv), 0);
    fcntl(R.sv[1], F_SETFL, fcntl(R.sv[1], F_GETFL) | O_NONBLOCK);
    struct emu_mem_limits lim = {.max_pzs = 1, .max_regions = 2, .max_windows = 0};
    ck_assert_int_eq(emu_mem_table_create(&lim, &R.mt), EMU_MEM_OK);
    ck_assert_int_eq(emu_mem_pz_create(R.mt, &R.pz), EMU_MEM_OK);
    struct emu_mr_attr a = {.addr = R.mem, .length = sizeof R.mem, .pz = R.pz,
                            .access = EMU_ACC_LOCAL_READ | EMU_ACC_REMOTE_READ,
                            .va_type = EMU_VA_ZB};
    ck_assert_int_eq(emu_mem_mr_register(R.mt, &a, &R.mr, &R.stag), EMU_MEM_OK);
    struct emu_qp_attr qa = {.mem = R.mt, .pz = R.pz, .max_send_wr = 4, .max_recv_wr = 4,
                             .ird = 4, .ord = 4, .ops = &ops};
    ck_assert_int_eq(emu_qp_create(&qa, &R.qp), 0);
    R.c.info = (struct emu_conn_info){.initiator = true, .fd = R.sv[1], .mpa_rev = 2,
                                      .p2p = true, .rtr = EMU_MPA_RTR_WRITE, .ird = 4,
                                      .ord = 4, .emss = 65483, .mulpdu = 65535};
    ck_assert_int_eq(emu_qp_attach(R.qp, &R.c, 1), 0);
}

static void rig_down(void)
{
    emu_qp_detach(R.qp);
    emu_qp_flush(R.qp);
    emu_qp_destroy(R.qp);
    ck_assert_int_eq(emu_mem_mr_free(R.mr, 0), EMU_MEM_OK);
    ck_assert_int_eq(emu_mem_pz_free(R.pz), EMU_MEM_OK);
    emu_mem_table_destroy(R.mt);
    close(R.sv[0]);
    close(R.sv[1]);
}

/* The peer sends one FPDU; the QP's receive path runs once. */
static int peer_sends(const struct emu_ddp_hdr *h)
{
    uint8_t hb[EMU_FPDU_HDR_MAX], tb[EMU_FPDU_TRAILER_MAX];
    size_t hl = 0;
    ck_assert_int_eq(emu_fpdu_build_hdr(h, 0, hb, sizeof hb, &hl), EMU_DDP_OK);
    size_t tl = emu_fpdu_build_trailer(hb, hl, NULL, 0, false, tb);
    ck_assert_int_eq(write(R.sv[0], hb, hl), (ssize_t)hl);
    ck_assert_int_eq(write(R.sv[0], tb, tl), (ssize_t)tl);
    return emu_qp_rx(R.qp, NULL, R.sv[1]);
}

/* The first FPDU the QP sent, decoded (our parser must accept it). */
static struct emu_ddp_hdr first_sent(void)
{
    ck_assert_uint_ge(R.c.out_len, 2);
    uint16_t ulpdu = (uint16_t)(R.c.out[0] << 8 | R.c.out[1]);
    ck_assert_uint_ge(R.c.out_len, emu_fpdu_wire_len(ulpdu));
    struct emu_ddp_hdr h;
    size_t need = 0;
    ck_assert_int_eq(emu_ddp_parse(R.c.out + 2, ulpdu, ulpdu, NULL, &h, &need), EMU_DDP_OK);
    return h;
}

static struct emu_ddp_hdr read_req(uint64_t sink_to, uint32_t size)
{
    struct emu_ddp_hdr h = {.opcode = EMU_OP_READ_REQ, .last = true, .msn = 1};
    h.u.rreq = (struct emu_rdmap_read_req){.sink_stag = 0x50fb, .sink_to = sink_to,
                                           .size = size, .src_stag = R.stag, .src_to = 0};
    return h;
}

/* Finding 1 (fuzz_qp_rx): a Read Request whose Data Sink range wraps 2^64
 * was served with Read Responses whose tagged offsets wrap, which the
 * requester must reject (DDP tagged "TO wrap"). Now: Terminate RDMAP
 * remote protection / TO wrap, with the Read Request header copied, and
 * no Read Response. */
START_TEST(t_read_sink_to_wraps)
{
    rig_up();
    struct emu_ddp_hdr rq = read_req(0xFFFFFFFFFFFFFF00ull, 0x200); /* source in bounds */
    ck_assert_int_lt(peer_sends(&rq), 0);
    struct emu_ddp_hdr h = first_sent();
    ck_assert_int_eq(h.opcode, EMU_OP_TERMINATE);
    ck_assert_int_eq(h.u.term.layer, EMU_TERM_RDMAP);
    ck_assert_int_eq(h.u.term.etype, EMU_TERM_RDMAP_PROTECTION);
    ck_assert_int_eq(h.u.term.ecode, EMU_RDMAP_EC_TO_WRAP);
    ck_assert(h.u.term.hdrct & EMU_TERM_HDRCT_R);
    ck_assert_uint_eq(R.c.out_len, emu_fpdu_wire_len(h.hdr_len)); /* the Terminate alone */
    ck_assert_int_eq(g_fatal, 1);
    ck_assert(!g_f.remote && g_f.have_term);
    ck_assert_int_eq(g_f.err, EPROTO);
    rig_down();
}
END_TEST

/* The edge: a sink range ending exactly at 2^64 - 1 does not wrap and is
 * answered. */
START_TEST(t_read_sink_to_at_top)
{
    rig_up();
    struct emu_ddp_hdr rq = read_req(0xFFFFFFFFFFFFFF00ull, 0x100);
    ck_assert_int_ge(peer_sends(&rq), 0);
    struct emu_ddp_hdr h = first_sent();
    ck_assert_int_eq(h.opcode, EMU_OP_READ_RESP);
    ck_assert_uint_eq(h.stag, 0x50fb);
    ck_assert_uint_eq(h.to, 0xFFFFFFFFFFFFFF00ull);
    ck_assert_uint_eq(h.payload_len, 0x100);
    ck_assert_int_eq(g_fatal, 0);
    rig_down();
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("emu_qp_fuzz_findings");
    TCase *tc = tcase_create("findings");
    tcase_set_timeout(tc, 20);
    tcase_add_test(tc, t_read_sink_to_wraps);
    tcase_add_test(tc, t_read_sink_to_at_top);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    setenv("SOFTDAT_LOG", "error", 0);
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
