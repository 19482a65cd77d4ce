/* libFuzzer target: the whole receive state machine (emu/qp_rx.c, with the
 * transmit side it drives: Read Responses, Terminates) of a real emu_qp, fed
 * an arbitrary byte stream cut at arbitrary points.
 *
 * Seam: the QP is attached to a stand-in struct emu_conn defined here (the
 * emu_conn_* functions the QP calls are defined in this file, so emu/conn.c
 * is not linked): its fd is one end of a socketpair. Each input is written
 * into the other end in chunks whose sizes come from the input, and
 * emu_qp_rx runs after each chunk, exactly as the engine's rx hook would.
 * What the QP transmits (Read Responses, Terminate) is copied out by the
 * stand-in writev (so ASan checks every source byte) and must be a
 * well-formed FPDU stream.
 *
 * Input: byte 0 flags (bit 0 CRC negotiated, bit 1 RFC 7306 on, bit 2 an
 * RDMA Read is outstanding, bits 3-4 receives posted (0-3), bit 5 receives
 * split into 2 SGEs, bit 6 the socket accepts 64 bytes per writev, bit 7
 * InfiniBand receiver-not-ready semantics: rnr_retry 7, and each time the
 * receive side stalls for want of a receive, one more is posted and the
 * stream goes on); byte 1: IRD (bits 0-2), receives on a
 * shared receive queue (bit 3), ORD (bits 4-6), a Send and an RDMA Write
 * outstanding with placement_ack (bit 7: a Terminate must find them);
 * bytes 2-3 seed of the chunk sizes; then the stream (FPDUs, right after
 * the MPA exchange).
 *
 * Properties: no sanitizer report; nothing outside R0/R1/R3, the posted
 * receive buffers and the Read sink changes (guard bands, the read-only
 * region R2); completions stay within their buffers; every FPDU the QP
 * sent parses (and its CRC holds); no memory reference
 * outlives the QP (every region frees at once). */
#include "test/fuzz/fuzz.h"
#include "test/fuzz/qp_env.h"

#include "emu/conn.h"
#include "emu/wire_io.h"
#include "emu/qp.h"
#include "emu/qp_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

/* ---- the seam: a connection that is only a socket ---- */
struct emu_conn {
    struct emu_wire_ep wire;
    struct emu_conn_info info;
    int failed;
    bool want_tx;
    uint32_t wcap;          /* bytes one writev accepts (0: all) */
    uint64_t written;
    bool term;              /* last words said: nothing may follow */
};

/* Deterministic STag keys (qp_env.h). */
ssize_t getrandom(void *buf, size_t len, unsigned int flags)
{
    (void)flags;
    memset(buf, 0x5A, len);
    return (ssize_t)len;
}

struct emu_wire_ep *emu_conn_wire(struct emu_conn *c)
{
    return &c->wire;
}

int emu_conn_get_info(struct emu_conn *c, struct emu_conn_info *out)
{
    *out = c->info;
    return 0;
}

/* Everything the QP transmitted during one input, checked at its end. */
static uint8_t txs[1u << 20];
static size_t txn;
static bool tx_overflow;

ssize_t emu_conn_writev(struct emu_conn *c, const struct iovec *iov, int iovcnt)
{
    if (c->failed)
        return -ENOTCONN;
    if (c->term)
        return -EPIPE;
    size_t n = 0;
    for (int i = 0; i < iovcnt; i++) {
        size_t k = iov[i].iov_len;
        if (c->wcap && k > c->wcap - n)
            k = c->wcap - n;
        /* memcpy: ASan checks the whole source range in one go. */
        if (txn + k <= sizeof txs) {
            memcpy(txs + txn, iov[i].iov_base, k);
            txn += k;
        } else {
            tx_overflow = true;
        }
        n += k;
        if (c->wcap && n == c->wcap)
            break;
    }
    c->written += n;
    return n ? (ssize_t)n : -EAGAIN;
}

/* The Terminate's bytes the socket did not take: the real connection
 * writes them before its FIN, so they join the stream checked below. */
int emu_conn_last_words(struct emu_conn *c, const struct iovec *iov, int iovcnt)
{
    if (c->failed)
        return -ENOTCONN;
    c->term = true;
    for (int i = 0; i < iovcnt; i++) {
        if (txn + iov[i].iov_len <= sizeof txs) {
            memcpy(txs + txn, iov[i].iov_base, iov[i].iov_len);
            txn += iov[i].iov_len;
        } else {
            tx_overflow = true;
        }
    }
    return 0;
}

/* What the QP sent is a well-formed FPDU stream (our own parser accepts
 * every header, CRCs hold when negotiated); a last FPDU may be cut short
 * by the failure that ended the input. */
static void check_tx(bool crc)
{
    size_t off = 0;
    while (!tx_overflow && off + 2 <= txn) {
        uint16_t ulpdu = (uint16_t)(txs[off] << 8 | txs[off + 1]);
        size_t wire = emu_fpdu_wire_len(ulpdu);
        if (off + wire > txn)
            break;
        struct emu_ddp_hdr h;
        size_t need = 0;
        int rc = emu_ddp_parse(txs + off + 2, ulpdu, ulpdu, NULL, &h, &need);
        if (rc != EMU_DDP_OK) {
            fprintf(stderr, "transmitted FPDU at %zu: %s; the stream sent:", off,
                    emu_ddp_strerror(rc));
            for (size_t i = 0; i < txn && i < 256; i++)
                fprintf(stderr, "%s%02x", i % 32 ? " " : "\n  ", txs[i]);
            fprintf(stderr, "\n");
            abort();
        }
        if (crc) {
            struct iovec v = {txs + off, wire};
            FUZZ_CHECK(emu_fpdu_crc_ok(&v, 1));
        }
        off += wire;
    }
    txn = 0;
    tx_overflow = false;
}

int emu_conn_fail(struct emu_conn *c, int err)
{
    if (!c->failed)
        c->failed = err ? err : EPROTO;
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
    c->want_tx = on;
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

/* ---- completions ---- */
struct ctx {
    struct qpenv *env;
    uint32_t recv_len[QPENV_NRECV];
    unsigned nrecv_done, nsend_done, nfatal;
};

static void on_recv(void *vctx, const struct emu_cqe *cqe)
{
    struct ctx *x = vctx;
    FUZZ_CHECK(cqe->cookie < QPENV_NRECV);
    if (cqe->status == EMU_WC_SUCCESS && cqe->op != EMU_WC_RECV_IMM)
        FUZZ_CHECK(cqe->byte_len <= x->recv_len[cqe->cookie]);
    x->nrecv_done++;
}

static void on_send(void *vctx, const struct emu_cqe *cqe)
{
    struct ctx *x = vctx;
    if (cqe->status == EMU_WC_SUCCESS)
        FUZZ_CHECK(cqe->byte_len <= QPENV_SINK_LEN);
    x->nsend_done++;
}

static void on_fatal(void *vctx, const struct emu_qp_fatal *f)
{
    struct ctx *x = vctx;
    FUZZ_CHECK(f->err != 0);
    x->nfatal++;
}

static const struct emu_qp_ops ops = {on_send, on_recv, on_fatal};

static int sv[2] = {-1, -1};
static uint8_t *arena;
/* The arena as each run starts (built once): the checks compare with it. */
static uint8_t *image;
static void build_image(void);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    setenv("SOFTDAT_LOG", "none", 0); /* a Terminate per input: keep stderr quiet */
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0)
        abort();
    for (int i = 0; i < 2; i++)
        fcntl(sv[i], F_SETFL, fcntl(sv[i], F_GETFL) | O_NONBLOCK);
    int big = 1 << 20;
    setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
    setsockopt(sv[1], SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
    arena = aligned_alloc(64, (QPENV_ARENA_LEN + 63) & ~(size_t)63);
    image = malloc(QPENV_ARENA_LEN);
    if (!arena || !image)
        abort();
    build_image();
    return 0;
}

static void drain(int fd)
{
    uint8_t buf[4096];
    for (int i = 0; i < 1024 && recv(fd, buf, sizeof buf, MSG_DONTWAIT) > 0; i++)
        ;
}

/* The areas the peer may legitimately change. */
static bool writable(unsigned area)
{
    return area != 2;
}

static void fill_arena(void)
{
    memcpy(arena, image, QPENV_ARENA_LEN);
}

static void build_image(void)
{
    memset(image, QPENV_FILL, QPENV_ARENA_LEN);
    for (unsigned i = 0; i < QPENV_AREAS; i++) {
        uint8_t *a = image + qpenv_area_off(i);
        for (size_t k = 0; k < qpenv_area_len(i); k++)
            a[k] = qpenv_pattern(i, k);
    }
}

static void check_arena(void)
{
    size_t at = 0;
    for (unsigned i = 0; i <= QPENV_AREAS; i++) {
        size_t start = i < QPENV_AREAS ? qpenv_area_off(i) : QPENV_ARENA_LEN;
        if (memcmp(arena + at, image + at, start - at) != 0) {
            fprintf(stderr, "guard band before area %u changed\n", i);
            abort();
        }
        if (i == QPENV_AREAS)
            break;
        if (!writable(i) && memcmp(arena + start, image + start, qpenv_area_len(i)) != 0) {
            fprintf(stderr, "read-only area %u changed\n", i);
            abort();
        }
        at = start + qpenv_area_len(i);
    }
}

static uint32_t xs(uint32_t *s)
{
    uint32_t x = *s;
    x ^= x << 13, x ^= x >> 17, x ^= x << 5;
    return *s = x;
}

/* 1..n, mostly small: cuts inside length fields and headers matter most. */
static size_t chunk_len(uint32_t *s, size_t left)
{
    uint32_t r = xs(s);
    size_t max;
    switch (r & 3) {
    case 0: max = 3; break;
    case 1: max = 32; break;
    case 2: max = 512; break;
    default: max = 65536; break;
    }
    size_t n = 1 + (r >> 2) % max;
    return n < left ? n : left;
}

/* Receive i (any number: buffer and cookie i mod 3; a buffer reused while
 * an earlier receive still fills it is fine, it is writable either way). */
static int post_recv(struct emu_qp *qp, struct emu_srq *srq, struct ctx *x, unsigned i,
                     uint8_t fl)
{
    unsigned k = i % QPENV_NRECV;
    uint8_t *b = arena + qpenv_area_off(QPENV_NR + k);
    struct emu_sge sge[2] = {{b, QPENV_RECV_LEN / 2}, {b + QPENV_RECV_LEN / 2,
                                                       QPENV_RECV_LEN / 2}};
    if (!(fl & 0x20))
        sge[0].len = QPENV_RECV_LEN;
    x->recv_len[k] = QPENV_RECV_LEN;
    return srq ? emu_srq_post_recv(srq, k, (fl & 0x20) ? 2 : 1, sge)
               : emu_qp_post_recv(qp, k, (fl & 0x20) ? 2 : 1, sge);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 4)
        return 0;
    uint8_t fl = data[0];
    uint16_t ird = data[1] & 7, ord = (data[1] >> 4) & 7;
    bool use_srq = data[1] & 0x08, sends = data[1] & 0x80;
    uint32_t seed = 0x9E3779B9u ^ ((uint32_t)data[2] << 8 | data[3]);
    const uint8_t *stream = data + 4;
    size_t len = size - 4;

    fill_arena();
    struct qpenv env = {.arena = arena};
    FUZZ_CHECK(qpenv_setup(&env) == 0);
    struct ctx x = {.env = &env};

    struct emu_srq *srq = NULL;
    if (use_srq) {
        struct emu_srq_attr sa = {.max_recv_wr = QPENV_NRECV, .max_sge = 2};
        FUZZ_CHECK(emu_srq_create(&sa, &srq) == 0);
    }
    struct emu_qp_attr a = {
        .mem = env.mt, .pz = env.pz, .srq = srq, .placement_ack = sends, .max_send_wr = 4,
        .max_recv_wr = QPENV_NRECV, .max_sge = 2,
        .rnr_retry = (fl & 0x80) ? EMU_QP_RNR_INFINITE : 0,
        .max_message_size = 200, /* below a receive buffer: LOC_LEN paths too */
        .ird = ird, .ord = ord, .rfc7306 = (fl & 2) != 0, .ops = &ops, .ctx = &x,
    };
    struct emu_qp *qp = NULL;
    FUZZ_CHECK(emu_qp_create(&a, &qp) == 0);
    qp->tx.read_seq = 0; /* deterministic sink STags (QPENV_READ_SINK_STAG) */

    unsigned nrecv = (fl >> 3) & 3;
    for (unsigned i = 0; i < nrecv; i++)
        if (post_recv(qp, srq, &x, i, fl) != 0)
            break;

    struct emu_conn c = {.info = {.initiator = true, .fd = sv[1], .mpa_rev = 2,
                                  .crc = (fl & 1) != 0, .p2p = true, .rtr = EMU_MPA_RTR_WRITE,
                                  .ird = ird, .ord = ord, .emss = 65483,
                                  .mulpdu = 65535, .caps = 0},
                         .wcap = (fl & 0x40) ? 64 : 0};
    FUZZ_CHECK(emu_qp_attach(qp, &c, 1) == 0);

    if (fl & 4) {
        struct emu_sge sink = {arena + qpenv_area_off(QPENV_AREAS - 1), QPENV_SINK_LEN};
        struct emu_wr wr = {.cookie = 99, .op = EMU_WR_READ, .nsge = 1, .sge = &sink,
                            .remote_stag = 0x1234, .remote_to = 0};
        (void)emu_qp_post_send(qp, &wr);
    }
    if (sends) {
        /* Sources in the read-only region R2: sending must not change it. */
        struct emu_sge src = {arena + qpenv_area_off(2), 16};
        struct emu_wr s1 = {.cookie = 1, .op = EMU_WR_SEND, .nsge = 1, .sge = &src};
        struct emu_wr w1 = {.cookie = 2, .op = EMU_WR_WRITE, .nsge = 1, .sge = &src,
                            .remote_stag = 0x4321, .remote_to = 8};
        (void)emu_qp_post_send(qp, &s1);
        (void)emu_qp_post_send(qp, &w1);
    }

    size_t off = 0;
    for (int i = 0; off < len && i < 100000; i++) {
        size_t n = chunk_len(&seed, len - off);
        ssize_t w = send(sv[0], stream + off, n, MSG_DONTWAIT);
        if (w <= 0)
            break; /* the QP stopped reading and the socket is full */
        off += (size_t)w;
        int rc = emu_qp_rx(qp, NULL, sv[1]);
        if (c.want_tx)
            emu_qp_tx(qp);
        /* Receiver not ready (rnr_retry 7): the header waits; a new receive
         * lets the stream go on, as the engine's retry would find it. */
        for (int k = 0; rc == EMU_RX_PAUSE && k < 4; k++) {
            if (post_recv(qp, srq, &x, nrecv++, fl) != 0)
                break;
            rc = emu_qp_rx(qp, NULL, sv[1]);
            if (c.want_tx)
                emu_qp_tx(qp);
        }
        if (rc < 0 || rc == EMU_RX_EOF || rc == EMU_RX_PAUSE)
            break;
    }
    emu_qp_detach(qp);
    emu_qp_flush(qp);
    emu_qp_destroy(qp);
    emu_srq_destroy(srq);
    check_tx(c.info.crc);
    drain(sv[1]);
    check_arena();
    FUZZ_CHECK(qpenv_teardown(&env) == 0);
    return 0;
}
