/* emu/qp: the iWARP data path between two engines in one process over
 * 127.0.0.1 — Send/Recv, RDMA Write/Read, ORD queueing, Terminate paths,
 * flush, CRC, a hostile peer, and a small throughput/latency printout.
 * What a polling consumer and InfiniBand semantics add (leases, placement
 * probes, held posts) is test_qp_poll.c. */
#include "emu/conn.h"
#include "emu/ddp.h"
#include "emu/engine.h"
#include "emu/mem.h"
#include "emu/qp.h"
#include "emu/wire_io.h"
#include "test/lib/clock.h"

#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "test/lib/qp_pair.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---------------------------------------------------------------- Send/Recv */

static void send_recv_size(uint32_t len)
{
    uint8_t *src = malloc(len + 1), *dst = malloc(len + 16);
    qp_fill(src, len, len);
    memset(dst, 0xEE, len + 16);
    ck_assert_int_eq(emu_qp_post_recv(B.qp, 77, 1, &(struct emu_sge){dst, len + 8}), 0);
    int ns0 = qp_get_ns(&A), nr0 = qp_get_nr(&B);
    ck_assert_int_eq(qp_post_send(&A, 5, src, len, 0), 0);
    ck_assert(QP_WAIT_FOR(&B, B.nr > nr0));
    ck_assert(QP_WAIT_FOR(&A, A.ns > ns0));
    ck_assert_int_eq(B.rcq[nr0].status, EMU_WC_SUCCESS);
    ck_assert_int_eq(B.rcq[nr0].byte_len, len);
    ck_assert_uint_eq(B.rcq[nr0].cookie, 77);
    ck_assert_int_eq(B.rcq[nr0].op, EMU_WC_RECV);
    ck_assert_int_eq(A.scq[ns0].status, EMU_WC_SUCCESS);
    ck_assert_int_eq(A.scq[ns0].op, EMU_WR_SEND);
    ck_assert_int_eq(memcmp(src, dst, len), 0);
    ck_assert_int_eq(dst[len], 0xEE);
    free(src);
    free(dst);
}

START_TEST(t_send_sizes)
{
    qp_pair_up();
    send_recv_size(0);
    send_recv_size(1);
    send_recv_size(4096);
    send_recv_size(1u << 20);
    send_recv_size(3 * 65536 + 7);
    qp_pair_down();
}
END_TEST

/* The ordered tail of every copy (copy_ordered, qp_rx.c: words where
 * aligned, the last byte alone): every length up to a little past
 * QP_RX_ORDERED_TAIL, at every alignment of the receive buffer, lands
 * exactly, and not a byte around it changes. */
START_TEST(t_send_tail_alignments)
{
    qp_pair_up();
    enum { MAXLEN = 80, GUARD = 16 };
    static uint8_t src[MAXLEN], dst[GUARD + 8 + MAXLEN + GUARD];
    int n = 0;
    for (uint32_t len = 1; len <= MAXLEN; len++) {
        for (uint32_t off = 0; off < 8; off++) {
            qp_fill(src, len, len * 8 + off);
            memset(dst, 0xEE, sizeof dst);
            uint8_t *at = dst + GUARD + off;
            ck_assert_int_eq(emu_qp_post_recv(B.qp, (uint64_t)n, 1, &(struct emu_sge){at, len}), 0);
            ck_assert_int_eq(qp_post_send(&A, (uint64_t)n, src, len, 0), 0);
            n++;
            ck_assert(QP_WAIT_FOR(&B, B.nr >= n));
            ck_assert_int_eq(memcmp(at, src, len), 0);
            for (uint8_t *p = dst; p < at; p++)
                ck_assert_int_eq(*p, 0xEE);
            for (uint8_t *p = at + len; p < dst + sizeof dst; p++)
                ck_assert_int_eq(*p, 0xEE);
        }
    }
    qp_pair_down();
}
END_TEST

/* A wire observer: the bytes each direction carried. */
static _Atomic uint64_t obs_bytes[2]; /* [EMU_WIRE_TX / RX] */

static void count_bytes(void *ctx, struct emu_wire_ep *ep, int fd, enum emu_wire_dir dir,
                        const struct msghdr *mh, size_t len, uint64_t began_ns)
{
    (void)ctx;
    (void)began_ns;
    (void)fd;
    (void)mh;
    if (ep)
        atomic_fetch_add(&obs_bytes[dir], len);
}

/* emu/wire_io.h: the observer sees every byte sent and received, the
 * handshake included: once the traffic settles, the bytes it saw leave
 * (both sides live in this process) are the bytes it saw arrive, and the
 * QP's data bytes are among them. */
START_TEST(t_wire_observer)
{
    static const struct emu_wire_observer obs = {count_bytes, NULL, NULL};
    emu_wire_observe(&obs);
    qp_pair_up();
    send_recv_size(100);
    send_recv_size(200000);
    bool settled = false;
    for (int i = 0; i < 1000 && !settled; i++) {
        settled = atomic_load(&obs_bytes[EMU_WIRE_TX]) == atomic_load(&obs_bytes[EMU_WIRE_RX]);
        if (!settled)
            nanosleep(&(struct timespec){0, 1000000}, NULL);
    }
    ck_assert(settled);
    struct emu_qp_stats st;
    emu_qp_get_stats(A.qp, &st);
    ck_assert_uint_ge(st.tx_bytes, 200100);
    ck_assert_uint_gt(atomic_load(&obs_bytes[EMU_WIRE_TX]), st.tx_bytes);
    emu_wire_observe(NULL);
    qp_pair_down();
}
END_TEST

START_TEST(t_send_multi_sge)
{
    qp_pair_up();
    uint8_t s1[100], s2[5000], s3[3];
    qp_fill(s1, sizeof s1, 1);
    qp_fill(s2, sizeof s2, 2);
    qp_fill(s3, sizeof s3, 3);
    uint8_t d1[7], d2[4000], d3[2000];
    ck_assert_int_eq(emu_qp_post_recv(B.qp, 1, 3,
                                      (struct emu_sge[]){{d1, 7}, {d2, 4000}, {d3, 2000}}),
                     0);
    struct emu_sge sg[3] = {{s1, 100}, {s2, 5000}, {s3, 3}};
    struct emu_wr wr = {.cookie = 9, .op = EMU_WR_SEND, .nsge = 3, .sge = sg};
    ck_assert_int_eq(emu_qp_post_send(A.qp, &wr), 0);
    ck_assert(QP_WAIT_FOR(&B, B.nr == 1));
    ck_assert_int_eq(B.rcq[0].status, EMU_WC_SUCCESS);
    ck_assert_int_eq(B.rcq[0].byte_len, 5103);
    uint8_t all[5103], got[6007];
    memcpy(all, s1, 100);
    memcpy(all + 100, s2, 5000);
    memcpy(all + 5100, s3, 3);
    memcpy(got, d1, 7);
    memcpy(got + 7, d2, 4000);
    memcpy(got + 4007, d3, 2000);
    ck_assert_int_eq(memcmp(all, got, 5103), 0);
    qp_pair_down();
}
END_TEST

START_TEST(t_send_many)
{
    qp_pair_up();
    enum { N = 3000, SZ = 100 };
    static uint8_t src[N][SZ], dst[N][SZ + 4];
    int posted_r = 0, posted_s = 0;
    for (int i = 0; i < N; i++)
        qp_fill(src[i], SZ, (unsigned)i + 100);
    double t0 = now_s();
    while (posted_s < N) {
        while (posted_r < N && posted_r - qp_get_nr(&B) < 1000 &&
               emu_qp_post_recv(B.qp, (uint64_t)posted_r, 1,
                                &(struct emu_sge){dst[posted_r], SZ + 4}) == 0)
            posted_r++;
        if (posted_s >= posted_r) {
            QP_WAIT_FOR(&B, B.nr > posted_s - 900 || B.nr == posted_r);
            continue;
        }
        int rc = qp_post_send(&A, (uint64_t)posted_s, src[posted_s], SZ,
                           (posted_s & 1) ? EMU_WR_SOLICITED : 0);
        if (rc == -ENOSPC) {
            QP_WAIT_FOR(&A, A.ns > posted_s - 900);
            continue;
        }
        ck_assert_int_eq(rc, 0);
        posted_s++;
    }
    ck_assert(QP_WAIT_FOR(&B, B.nr == N));
    ck_assert(QP_WAIT_FOR(&A, A.ns == N));
    double dt = now_s() - t0;
    for (int i = 0; i < N; i++) {
        ck_assert_uint_eq(B.rcq[i].cookie, (uint64_t)i);
        ck_assert_int_eq(B.rcq[i].status, EMU_WC_SUCCESS);
        ck_assert_int_eq(B.rcq[i].byte_len, SZ);
        ck_assert_int_eq(B.rcq[i].solicited, (i & 1) != 0);
        ck_assert_uint_eq(A.scq[i].cookie, (uint64_t)i);
        ck_assert_int_eq(memcmp(src[i], dst[i], SZ), 0);
    }
    struct emu_qp_stats st;
    emu_qp_get_stats(A.qp, &st);
    printf("[perf] %d x %d B Sends: %.0f msgs/s, %llu FPDUs\n", N, SZ, N / dt,
           (unsigned long long)st.tx_fpdus);
    qp_pair_down();
}
END_TEST

START_TEST(t_recv_too_small)
{
    qp_pair_up();
    uint8_t src[300], dst[100];
    qp_fill(src, sizeof src, 4);
    ck_assert_int_eq(emu_qp_post_recv(B.qp, 1, 1, &(struct emu_sge){dst, 100}), 0);
    ck_assert_int_eq(emu_qp_post_recv(B.qp, 2, 1, &(struct emu_sge){dst, 100}), 0);
    ck_assert_int_eq(qp_post_send(&A, 1, src, 300, 0), 0);
    ck_assert(QP_WAIT_FOR(&B, B.terminal == 1));
    ck_assert(QP_WAIT_FOR(&B, B.nr == 2));
    ck_assert_int_eq(B.rcq[0].status, EMU_WC_LOC_LEN);
    ck_assert_uint_eq(B.rcq[0].cookie, 1);
    ck_assert_int_eq(B.rcq[1].status, EMU_WC_FLUSHED);
    ck_assert_int_eq(B.term_type, EMU_CONN_BROKEN);
    ck_assert(B.fatal && !B.f.remote);
    ck_assert(QP_WAIT_FOR(&A, A.terminal == 1));
    ck_assert(QP_WAIT_FOR(&A, A.fatal));
    ck_assert(A.f.remote && A.f.have_term);
    ck_assert_int_eq(A.f.term.layer, EMU_TERM_DDP);
    ck_assert_int_eq(A.f.term.etype, EMU_TERM_DDP_UNTAGGED);
    ck_assert_int_eq(A.f.term.ecode, EMU_DDP_EC_U_TOO_LONG);
    qp_pair_down();
}
END_TEST

START_TEST(t_no_recv_posted)
{
    qp_pair_up();
    uint8_t src[10] = {0};
    ck_assert_int_eq(qp_post_send(&A, 1, src, 10, 0), 0);
    ck_assert(QP_WAIT_FOR(&A, A.fatal && A.terminal == 1));
    ck_assert(A.f.remote);
    ck_assert_int_eq(A.f.term.layer, EMU_TERM_DDP);
    ck_assert_int_eq(A.f.term.etype, EMU_TERM_DDP_UNTAGGED);
    ck_assert_int_eq(A.f.term.ecode, EMU_DDP_EC_U_NO_BUF);
    ck_assert(QP_WAIT_FOR(&B, B.terminal == 1));
    qp_pair_down();
}
END_TEST

/* ---------------------------------------------------------------- RDMA Write */

START_TEST(t_write)
{
    qp_pair_up();
    enum { LEN = 200000, PADB = 64 };
    uint8_t *region = malloc(LEN + 2 * PADB);
    memset(region, 0xCC, LEN + 2 * PADB);
    struct emu_mr *mr;
    uint8_t *tgt = region + PADB;
    uint32_t stag = qp_reg(&B, tgt, LEN, B.pz, EMU_ACC_LOCAL_WRITE | EMU_ACC_REMOTE_WRITE, &mr);
    uint8_t *src = malloc(LEN);
    qp_fill(src, LEN, 9);
    /* whole region, then a small unaligned piece in the middle */
    ck_assert_int_eq(qp_post_rdma(&A, EMU_WR_WRITE, 1, src, LEN, stag, (uintptr_t)tgt, 0), 0);
    ck_assert_int_eq(qp_post_rdma(&A, EMU_WR_WRITE, 2, src, 5, stag, (uintptr_t)tgt + 1001, 0), 0);
    ck_assert_int_eq(qp_post_rdma(&A, EMU_WR_WRITE, 3, src, 0, stag, (uintptr_t)tgt, 0), 0);
    /* a Send after the Writes tells us they are placed */
    uint8_t d[4];
    ck_assert_int_eq(emu_qp_post_recv(B.qp, 1, 1, &(struct emu_sge){d, 4}), 0);
    ck_assert_int_eq(qp_post_send(&A, 4, src, 4, 0), 0);
    ck_assert(QP_WAIT_FOR(&B, B.nr == 1));
    ck_assert(QP_WAIT_FOR(&A, A.ns == 4));
    for (int i = 0; i < 4; i++) {
        ck_assert_uint_eq(A.scq[i].cookie, (uint64_t)i + 1);
        ck_assert_int_eq(A.scq[i].status, EMU_WC_SUCCESS);
    }
    ck_assert_int_eq(A.scq[0].op, EMU_WR_WRITE);
    ck_assert_int_eq(memcmp(tgt, src, 1001), 0);
    ck_assert_int_eq(memcmp(tgt + 1001, src, 5), 0);
    ck_assert_int_eq(memcmp(tgt + 1006, src + 1006, LEN - 1006), 0);
    for (int i = 0; i < PADB; i++) {
        ck_assert_int_eq(region[i], 0xCC);
        ck_assert_int_eq(region[PADB + LEN + i], 0xCC);
    }
    ck_assert_int_eq(emu_mem_mr_free(mr, 1000), EMU_MEM_OK);
    free(region);
    free(src);
    qp_pair_down();
}
END_TEST

/* Write-then-Send: by the time the receive completes, the Write is placed. */
START_TEST(t_write_then_send)
{
    qp_pair_up();
    enum { LEN = 1 << 20 };
    uint8_t *tgt = calloc(1, LEN), *src = malloc(LEN);
    struct emu_mr *mr;
    uint32_t stag = qp_reg(&B, tgt, LEN, B.pz, EMU_ACC_LOCAL_WRITE | EMU_ACC_REMOTE_WRITE, &mr);
    uint8_t d[8];
    for (int round = 0; round < 5; round++) {
        qp_fill(src, LEN, 50 + (unsigned)round);
        qp_lock(&B);
        B.chk_buf = tgt;
        B.chk_ref = src;
        B.chk_len = LEN;
        qp_unlock(&B);
        ck_assert_int_eq(emu_qp_post_recv(B.qp, 1, 1, &(struct emu_sge){d, 8}), 0);
        ck_assert_int_eq(qp_post_rdma(&A, EMU_WR_WRITE, 1, src, LEN, stag, (uintptr_t)tgt, 0), 0);
        ck_assert_int_eq(qp_post_send(&A, 2, d, 0, 0), 0);
        ck_assert(QP_WAIT_FOR(&B, B.nr == round + 1));
        ck_assert(QP_WAIT_FOR(&A, A.ns == 2 * (round + 1)));
    }
    ck_assert_int_eq(B.chk_bad, 0);
    emu_mem_mr_free(mr, 1000);
    free(tgt);
    free(src);
    qp_pair_down();
}
END_TEST

/* Open MPI's pipeline: 128 KiB Writes one at a time, each read by a
 * receiver that has drained its socket. Each pass's first read stops
 * short, so the payload is read in place instead of half of it being
 * copied through the prefetch buffer (it was ~50 %). */
START_TEST(t_large_writes_read_in_place)
{
    qp_pair_up();
    enum { LEN = 128 * 1024, ROUNDS = 16 };
    uint8_t *tgt = calloc(1, LEN), *src = malloc(LEN);
    struct emu_mr *mr;
    uint32_t stag = qp_reg(&B, tgt, LEN, B.pz, EMU_ACC_LOCAL_WRITE | EMU_ACC_REMOTE_WRITE, &mr);
    uint8_t d[8];
    struct emu_qp_stats st0, st;
    emu_qp_get_stats(B.qp, &st0);
    for (int round = 0; round < ROUNDS; round++) {
        qp_fill(src, LEN, 70 + (unsigned)round);
        ck_assert_int_eq(emu_qp_post_recv(B.qp, 1, 1, &(struct emu_sge){d, 8}), 0);
        ck_assert_int_eq(qp_post_rdma(&A, EMU_WR_WRITE, 1, src, LEN, stag, (uintptr_t)tgt, 0), 0);
        ck_assert_int_eq(qp_post_send(&A, 2, d, 0, 0), 0);
        ck_assert(QP_WAIT_FOR(&B, B.nr == round + 1));
        ck_assert_int_eq(memcmp(tgt, src, LEN), 0);
    }
    emu_qp_get_stats(B.qp, &st);
    uint64_t payload = (uint64_t)ROUNDS * LEN, in_place = st.rx_bytes_in_place - st0.rx_bytes_in_place;
    ck_assert_uint_ge(st.rx_bytes - st0.rx_bytes, payload);
    ck_assert_msg(in_place * 10 >= payload * 9, "%llu of %llu payload bytes read in place",
                  (unsigned long long)in_place, (unsigned long long)payload);
    emu_mem_mr_free(mr, 1000);
    free(tgt);
    free(src);
    qp_pair_down();
}
END_TEST

/* The largest number of bytes one transmit call offered its socket (the
 * socket may take fewer; the rest is offered again). */
static atomic_size_t tx_offer_max;

static void offer_seen(void *ctx, struct emu_wire_ep *ep, int fd, enum emu_wire_dir dir, const struct msghdr *mh,
                       size_t len, uint64_t began_ns)
{
    (void)ctx, (void)ep, (void)fd, (void)len, (void)began_ns;
    if (dir != EMU_WIRE_TX)
        return;
    size_t total = 0;
    for (size_t i = 0; i < mh->msg_iovlen; i++)
        total += mh->msg_iov[i].iov_len;
    size_t seen = atomic_load(&tx_offer_max);
    while (total > seen && !atomic_compare_exchange_weak(&tx_offer_max, &seen, total))
        ;
}

/* A 1 MiB Write or Send is 16 full FPDUs and a short 17th: the whole
 * message is offered to the socket in one writev. Cut into 512 KiB
 * batches it took three system calls, the short FPDU alone in the third. */
START_TEST(t_large_message_one_writev)
{
    qp_pair_up();
    enum { LEN = 1 << 20 };
    static const struct emu_wire_observer obs = {offer_seen, NULL, NULL};
    uint8_t *tgt = calloc(1, LEN), *dst = calloc(1, LEN), *src = malloc(LEN), d[8];
    struct emu_mr *mr;
    uint32_t stag = qp_reg(&B, tgt, LEN, B.pz, EMU_ACC_LOCAL_WRITE | EMU_ACC_REMOTE_WRITE, &mr);
    for (int send = 0; send < 2; send++) {
        qp_fill(src, LEN, 90 + (unsigned)send);
        int nr0 = qp_get_nr(&B);
        ck_assert_int_eq(emu_qp_post_recv(B.qp, 1, 1, &(struct emu_sge){send ? dst : d, send ? LEN : 8}), 0);
        atomic_store(&tx_offer_max, 0);
        emu_wire_observe(&obs);
        if (send) {
            ck_assert_int_eq(qp_post_send(&A, 2, src, LEN, 0), 0);
        } else {
            ck_assert_int_eq(qp_post_rdma(&A, EMU_WR_WRITE, 1, src, LEN, stag, (uintptr_t)tgt, 0), 0);
            ck_assert_int_eq(qp_post_send(&A, 2, d, 0, 0), 0);
        }
        ck_assert(QP_WAIT_FOR(&B, B.nr == nr0 + 1));
        emu_wire_observe(NULL);
        ck_assert_int_eq(memcmp(send ? dst : tgt, src, LEN), 0);
        ck_assert_msg(atomic_load(&tx_offer_max) > LEN, "%s of %d bytes: at most %zu offered in one call",
                      send ? "Send" : "Write", LEN, atomic_load(&tx_offer_max));
    }
    emu_mem_mr_free(mr, 1000);
    free(tgt);
    free(dst);
    free(src);
    qp_pair_down();
}
END_TEST

/* A transmit pass is bounded (64 writev rounds), then hands over to the
 * engine. A backlog queued while the socket was full (B stalled) goes out
 * in such passes; when the 64th round ends exactly at a message's end
 * (every 32-Write batch of small Writes does), the WRs not started yet
 * must still be handed over, not stranded until the next post. */
START_TEST(t_tx_backlog_beyond_one_pass)
{
    struct qpcfg cfg = qp_defcfg;
    cfg.sq = 4096;
    qp_pair_up_cfg(&cfg, &qp_defcfg, EMU_CRC_OFF);
    enum { BIG = 32 << 20, SMALL = 3000 };
    uint8_t *tgt = calloc(1, BIG), *src = malloc(BIG);
    qp_fill(src, BIG, 31);
    struct emu_mr *mr;
    uint32_t stag = qp_reg(&B, tgt, BIG, B.pz, EMU_ACC_LOCAL_WRITE | EMU_ACC_REMOTE_WRITE, &mr);
    qp_stall(&B);
    /* More than the socket buffers hold: the pass stops on EAGAIN, the
     * small Writes after it queue up behind. */
    ck_assert_int_eq(qp_post_rdma(&A, EMU_WR_WRITE, 0, src, BIG, stag, (uintptr_t)tgt, 0), 0);
    for (int i = 1; i <= SMALL; i++)
        ck_assert_int_eq(qp_post_rdma(&A, EMU_WR_WRITE, (uint64_t)i, src + 8 * (i % 64), 8, stag,
                                      (uintptr_t)tgt + 8 * (i % 64), 0),
                         0);
    qp_unstall();
    ck_assert_msg(QP_WAIT_FOR(&A, A.ns == SMALL + 1), "%d of %d Writes completed", qp_get_ns(&A),
                  SMALL + 1);
    for (int i = 0; i <= SMALL; i++)
        ck_assert_uint_eq(A.scq[i].cookie, (uint64_t)i);
    emu_mem_mr_free(mr, 1000);
    free(tgt);
    free(src);
    qp_pair_down();
}
END_TEST

enum werr { WE_STAG, WE_PZ, WE_ACCESS, WE_BOUNDS };

static void write_error(enum werr kind)
{
    qp_pair_up();
    static uint8_t tgt[4096], src[4096], rd[64];
    struct emu_mr *mr, *mr_ok;
    uint32_t acc = EMU_ACC_LOCAL_WRITE | EMU_ACC_REMOTE_WRITE | EMU_ACC_REMOTE_READ;
    if (kind == WE_ACCESS)
        acc = EMU_ACC_LOCAL_WRITE | EMU_ACC_REMOTE_READ;
    uint32_t stag = qp_reg(&B, tgt, sizeof tgt, kind == WE_PZ ? B.pz2 : B.pz, acc, &mr);
    uint32_t stag_ok = qp_reg(&B, tgt, sizeof tgt, B.pz, EMU_ACC_REMOTE_READ, &mr_ok);
    uint64_t to = (uintptr_t)tgt;
    uint32_t len = 100;
    if (kind == WE_STAG)
        stag ^= 0x55; /* wrong key */
    if (kind == WE_BOUNDS)
        to += sizeof tgt - 50;
    memset(tgt, 0, sizeof tgt);
    /* a good Read queued behind the bad Write: flushed */
    qp_stall(&B);
    ck_assert_int_eq(qp_post_rdma(&A, EMU_WR_WRITE, 1, src, len, stag, to, 0), 0);
    ck_assert_int_eq(qp_post_rdma(&A, EMU_WR_READ, 2, rd, 64, stag_ok, (uintptr_t)tgt,
                               EMU_WR_FENCE),
                     0);
    qp_unstall();
    ck_assert(QP_WAIT_FOR(&A, A.terminal == 1 && A.fatal));
    ck_assert(QP_WAIT_FOR(&B, B.terminal == 1 && B.fatal));
    ck_assert(A.f.remote && A.f.have_term);
    ck_assert(!B.f.remote && B.f.have_term);
    enum emu_mem_status st = kind == WE_STAG  ? EMU_MEM_E_STAG
                             : kind == WE_PZ  ? EMU_MEM_E_PZ
                             : kind == WE_ACCESS ? EMU_MEM_E_ACCESS
                                                 : EMU_MEM_E_BOUNDS;
    struct emu_mem_term mt = emu_mem_term_code(st, EMU_MEM_OP_WRITE);
    ck_assert_int_eq(A.f.term.layer, mt.layer);
    ck_assert_int_eq(A.f.term.etype, mt.etype);
    ck_assert_int_eq(A.f.term.ecode, mt.ecode);
    ck_assert(A.f.term.hdrct & EMU_TERM_HDRCT_D);
    ck_assert_int_eq(A.term_type, EMU_CONN_BROKEN);
    ck_assert(QP_WAIT_FOR(&A, A.ns == 2));
    ck_assert_int_eq(A.scq[0].status, EMU_WC_SUCCESS); /* handed to TCP before the error */
    ck_assert_uint_eq(A.scq[1].cookie, 2);
    ck_assert_int_eq(A.scq[1].status, EMU_WC_FLUSHED);
    ck_assert_int_eq(tgt[0], 0);
    /* posting after the failure */
    ck_assert_int_eq(qp_post_send(&A, 3, src, 1, 0), -ENOTCONN);
    qp_pair_down();
}

START_TEST(t_write_bad_stag) { write_error(WE_STAG); }
END_TEST
START_TEST(t_write_bad_pz) { write_error(WE_PZ); }
END_TEST
START_TEST(t_write_no_access) { write_error(WE_ACCESS); }
END_TEST
START_TEST(t_write_bounds) { write_error(WE_BOUNDS); }
END_TEST

/* ---------------------------------------------------------------- RDMA Read */

static void read_size(uint32_t len)
{
    uint8_t *src = malloc(len + 1), *dst = malloc(len + 64);
    qp_fill(src, len, len + 3);
    memset(dst, 0xAB, len + 64);
    struct emu_mr *mr;
    uint32_t stag = qp_reg(&B, src, len, B.pz, EMU_ACC_LOCAL_READ | EMU_ACC_REMOTE_READ, &mr);
    int n0 = qp_get_ns(&A);
    double t0 = now_s();
    ck_assert_int_eq(qp_post_rdma(&A, EMU_WR_READ, 42, dst, len, stag, (uintptr_t)src, 0), 0);
    ck_assert(QP_WAIT_FOR(&A, A.ns > n0));
    double dt = now_s() - t0;
    ck_assert_int_eq(A.scq[n0].status, EMU_WC_SUCCESS);
    ck_assert_int_eq(A.scq[n0].op, EMU_WR_READ);
    ck_assert_int_eq(A.scq[n0].byte_len, len);
    ck_assert_int_eq(memcmp(src, dst, len), 0);
    ck_assert_int_eq(dst[len], 0xAB);
    if (len >= (1u << 20))
        printf("[perf] RDMA Read %u B: %.0f MB/s\n", len, len / dt / 1e6);
    emu_mem_mr_free(mr, 1000);
    free(src);
    free(dst);
}

START_TEST(t_read)
{
    qp_pair_up();
    read_size(1);
    read_size(100);
    read_size(0);
    read_size(8u << 20);
    qp_pair_down();
}
END_TEST

START_TEST(t_read_ord_queue)
{
    struct qpcfg qa = qp_defcfg, qb = qp_defcfg;
    qa.ord = 2;
    qb.ird = 2;
    qp_pair_up_cfg(&qa, &qb, EMU_CRC_DEFAULT);
    enum { N = 12, L = 70000 };
    uint8_t *src = malloc(N * L), *dst = calloc(N, L), sbuf[16] = {0};
    qp_fill(src, N * L, 77);
    struct emu_mr *mr;
    uint32_t stag = qp_reg(&B, src, N * L, B.pz, EMU_ACC_REMOTE_READ, &mr);
    uint8_t d[16];
    ck_assert_int_eq(emu_qp_post_recv(B.qp, 1, 1, &(struct emu_sge){d, 16}), 0);
    for (int i = 0; i < N; i++) {
        ck_assert_int_eq(qp_post_rdma(&A, EMU_WR_READ, (uint64_t)i, dst + i * L, L, stag,
                                   (uintptr_t)src + (uint64_t)i * L, 0),
                         0);
        if (i == 5) /* a Send among the Reads: stalls behind the ORD limit */
            ck_assert_int_eq(qp_post_send(&A, 100, sbuf, 16, 0), 0);
    }
    ck_assert(QP_WAIT_FOR(&A, A.ns == N + 1));
    ck_assert(QP_WAIT_FOR(&B, B.nr == 1));
    int r = 0;
    for (int i = 0; i < N + 1; i++) {
        ck_assert_int_eq(A.scq[i].status, EMU_WC_SUCCESS);
        if (A.scq[i].cookie == 100)
            continue;
        ck_assert_uint_eq(A.scq[i].cookie, (uint64_t)r); /* Reads in order */
        r++;
    }
    ck_assert_int_eq(memcmp(src, dst, N * L), 0);
    struct emu_qp_stats st;
    emu_qp_get_stats(A.qp, &st);
    ck_assert_int_eq(st.ord, 2);
    emu_mem_mr_free(mr, 1000);
    free(src);
    free(dst);
    qp_pair_down();
}
END_TEST

START_TEST(t_read_protection)
{
    qp_pair_up();
    static uint8_t src[4096], dst[4096];
    struct emu_mr *mr;
    uint32_t stag = qp_reg(&B, src, sizeof src, B.pz, EMU_ACC_LOCAL_READ, &mr); /* no REMOTE_READ */
    uint8_t d[8];
    ck_assert_int_eq(emu_qp_post_recv(B.qp, 1, 1, &(struct emu_sge){d, 8}), 0);
    qp_stall(&B);
    ck_assert_int_eq(qp_post_rdma(&A, EMU_WR_READ, 1, dst, 100, stag, (uintptr_t)src, 0), 0);
    ck_assert_int_eq(qp_post_rdma(&A, EMU_WR_READ, 2, dst, 100, stag, (uintptr_t)src, 0), 0);
    qp_unstall();
    ck_assert(QP_WAIT_FOR(&A, A.terminal == 1 && A.ns == 2));
    ck_assert_int_eq(A.scq[0].status, EMU_WC_REM_ACCESS);
    ck_assert_int_eq(A.scq[1].status, EMU_WC_FLUSHED);
    ck_assert(A.f.remote);
    ck_assert_int_eq(A.f.term.layer, EMU_TERM_RDMAP);
    ck_assert_int_eq(A.f.term.etype, EMU_TERM_RDMAP_PROTECTION);
    ck_assert_int_eq(A.f.term.ecode, EMU_RDMAP_EC_ACCESS);
    ck_assert(A.f.term.hdrct & EMU_TERM_HDRCT_R);
    ck_assert(QP_WAIT_FOR(&B, B.terminal == 1 && B.nr == 1));
    ck_assert_int_eq(B.rcq[0].status, EMU_WC_FLUSHED);
    qp_pair_down();
}
END_TEST

/* ---------------------------------------------------------------- flush */

START_TEST(t_flush_on_disconnect)
{
    qp_pair_up();
    static uint8_t d[8][64], s[64];
    for (int i = 0; i < 8; i++)
        ck_assert_int_eq(emu_qp_post_recv(B.qp, (uint64_t)i, 1, &(struct emu_sge){d[i], 64}),
                         0);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(emu_qp_post_recv(A.qp, 10 + (uint64_t)i, 1,
                                          &(struct emu_sge){d[i], 64}),
                         0);
    ck_assert_int_eq(qp_post_send(&A, 1, s, 64, 0), 0);
    ck_assert(QP_WAIT_FOR(&B, B.nr == 1));
    ck_assert_int_eq(emu_qp_disconnect(A.qp, true), 0);
    ck_assert(QP_WAIT_FOR(&B, B.terminal == 1 && B.nr == 8));
    ck_assert(QP_WAIT_FOR(&A, A.terminal == 1 && A.nr == 3));
    ck_assert_int_eq(B.term_type, EMU_CONN_DISCONNECTED);
    ck_assert_int_eq(A.term_type, EMU_CONN_DISCONNECTED);
    ck_assert_int_eq(B.rcq[0].status, EMU_WC_SUCCESS);
    for (int i = 1; i < 8; i++) {
        ck_assert_uint_eq(B.rcq[i].cookie, (uint64_t)i);
        ck_assert_int_eq(B.rcq[i].status, EMU_WC_FLUSHED);
    }
    for (int i = 0; i < 3; i++) {
        ck_assert_uint_eq(A.rcq[i].cookie, 10 + (uint64_t)i);
        ck_assert_int_eq(A.rcq[i].status, EMU_WC_FLUSHED);
    }
    ck_assert(!A.fatal && !B.fatal);
    ck_assert_int_eq(qp_post_send(&A, 1, s, 64, 0), -ENOTCONN);
    qp_pair_down();
}
END_TEST

/* Sends queued behind a stalled Read, connection aborted: flushed in order. */
START_TEST(t_flush_sq_order)
{
    struct qpcfg qa = qp_defcfg;
    qa.ord = 1;
    qp_pair_up_cfg(&qa, &qp_defcfg, EMU_CRC_DEFAULT);
    static uint8_t src[1 << 16], dst[1 << 16], s[8];
    struct emu_mr *mr;
    uint32_t stag = qp_reg(&B, src, sizeof src, B.pz, EMU_ACC_REMOTE_READ, &mr);
    static uint8_t rb[8];
    ck_assert_int_eq(emu_qp_post_recv(B.qp, 1, 1, &(struct emu_sge){rb, 8}), 0);
    /* abort A right after posting: whatever has not finished flushes */
    for (int i = 0; i < 6; i++)
        ck_assert_int_eq(qp_post_rdma(&A, EMU_WR_READ, (uint64_t)i, dst, sizeof dst, stag,
                                   (uintptr_t)src, 0),
                         0);
    ck_assert_int_eq(qp_post_send(&A, 6, s, 8, 0), 0);
    ck_assert_int_eq(emu_qp_disconnect(A.qp, false), 0);
    ck_assert(QP_WAIT_FOR(&A, A.terminal == 1 && A.ns == 7));
    /* Reads complete in order among themselves (the Send may pass them);
     * after the first FLUSHED everything is FLUSHED, in post order. */
    int last_read = -1, last_flushed = -1;
    bool seen7[7] = {0};
    for (int i = 0; i < 7; i++) {
        int ck = (int)A.scq[i].cookie;
        ck_assert(ck >= 0 && ck < 7 && !seen7[ck]);
        seen7[ck] = true;
        if (ck < 6) {
            ck_assert_int_gt(ck, last_read);
            last_read = ck;
        }
        if (A.scq[i].status == EMU_WC_FLUSHED) {
            ck_assert_int_gt(ck, last_flushed);
            last_flushed = ck;
        } else {
            ck_assert_int_eq(A.scq[i].status, EMU_WC_SUCCESS);
            ck_assert_int_eq(last_flushed, -1);
        }
    }
    ck_assert(QP_WAIT_FOR(&B, B.terminal == 1));
    qp_pair_down();
}
END_TEST

/* ---------------------------------------------------------------- CRC */

static void crc_round(enum emu_crc_mode m)
{
    qp_pair_up_cfg(&qp_defcfg, &qp_defcfg, m);
    struct emu_conn_info ia;
    ck_assert_int_eq(emu_conn_get_info(A.c, &ia), 0);
    ck_assert_int_eq(ia.crc, m == EMU_CRC_ON);
    send_recv_size(1);
    send_recv_size(300000);
    read_size(200001);
    qp_pair_down();
}

START_TEST(t_crc_on) { crc_round(EMU_CRC_ON); }
END_TEST
START_TEST(t_crc_off) { crc_round(EMU_CRC_OFF); }
END_TEST

/* Small FPDUs: multi-segment Sends, Writes and Read Responses. */
START_TEST(t_small_fpdus)
{
    setenv("SOFTDAT_FPDU_MAX", "1000", 1);
    qp_pair_up_cfg(&qp_defcfg, &qp_defcfg, EMU_CRC_ON);
    send_recv_size(12345);
    read_size(54321);
    struct emu_qp_stats st;
    emu_qp_get_stats(A.qp, &st);
    ck_assert_uint_ge(st.tx_fpdus, 12345 / 1000);
    qp_pair_down();
}
END_TEST

/* ---------------------------------------------------------------- RFC 7306, invalidate, SRQ, bind */

START_TEST(t_write_imm_atomics)
{
    struct qpcfg q = qp_defcfg;
    q.rfc7306 = true;
    qp_pair_up_cfg(&q, &q, EMU_CRC_ON);
    static uint8_t tgt[4096], src[4096];
    static uint64_t words[4] __attribute__((aligned(8)));
    words[1] = 100;
    qp_fill(src, sizeof src, 11);
    struct emu_mr *mr, *mw;
    uint32_t stag = qp_reg(&B, tgt, sizeof tgt, B.pz, EMU_ACC_LOCAL_WRITE | EMU_ACC_REMOTE_WRITE,
                        &mr);
    uint32_t wstag = qp_reg(&B, words, sizeof words, B.pz,
                         EMU_ACC_LOCAL_WRITE | EMU_ACC_REMOTE_ATOMIC, &mw);
    qp_lock(&B);
    B.chk_buf = tgt;
    B.chk_ref = src;
    B.chk_len = 3000;
    qp_unlock(&B);
    ck_assert_int_eq(emu_qp_post_recv(B.qp, 7, 0, NULL), 0);
    struct emu_sge sg = {src, 3000};
    struct emu_wr wr = {.cookie = 1, .op = EMU_WR_WRITE_IMM, .flags = EMU_WR_SOLICITED,
                        .nsge = 1, .sge = &sg, .remote_stag = stag,
                        .remote_to = (uintptr_t)tgt, .imm = 0xdeadbeef};
    ck_assert_int_eq(emu_qp_post_send(A.qp, &wr), 0);
    ck_assert(QP_WAIT_FOR(&B, B.nr == 1));
    ck_assert_int_eq(B.rcq[0].status, EMU_WC_SUCCESS);
    ck_assert_int_eq(B.rcq[0].op, EMU_WC_RECV_IMM);
    ck_assert_uint_eq(B.rcq[0].imm, 0xdeadbeef);
    ck_assert(B.rcq[0].solicited);
    ck_assert_int_eq(B.chk_bad, 0);
    /* FetchAdd 5 on words[1] (100), then CmpSwap 105 -> 7, then a failing CmpSwap */
    uint64_t r1 = 0, r2 = 0, r3 = 0;
    struct emu_wr fa = {.cookie = 2, .op = EMU_WR_FETCH_ADD, .nsge = 1,
                        .sge = &(struct emu_sge){&r1, 8}, .remote_stag = wstag,
                        .remote_to = (uintptr_t)&words[1], .atomic_add_or_cmp = 5};
    struct emu_wr cs = {.cookie = 3, .op = EMU_WR_CMP_SWAP, .nsge = 1,
                        .sge = &(struct emu_sge){&r2, 8}, .remote_stag = wstag,
                        .remote_to = (uintptr_t)&words[1], .atomic_add_or_cmp = 105,
                        .atomic_swap = 7};
    struct emu_wr cs2 = cs;
    cs2.cookie = 4;
    cs2.sge = &(struct emu_sge){&r3, 8};
    ck_assert_int_eq(emu_qp_post_send(A.qp, &fa), 0);
    ck_assert_int_eq(emu_qp_post_send(A.qp, &cs), 0);
    ck_assert_int_eq(emu_qp_post_send(A.qp, &cs2), 0);
    ck_assert(QP_WAIT_FOR(&A, A.ns == 4));
    for (int i = 0; i < 4; i++) {
        ck_assert_uint_eq(A.scq[i].cookie, (uint64_t)i + 1);
        ck_assert_int_eq(A.scq[i].status, EMU_WC_SUCCESS);
    }
    ck_assert_uint_eq(r1, 100);
    ck_assert_uint_eq(r2, 105);
    ck_assert_uint_eq(r3, 7);
    ck_assert_uint_eq(__atomic_load_n(&words[1], __ATOMIC_ACQUIRE), 7);
    ck_assert_uint_eq(words[0], 0);
    ck_assert_uint_eq(words[2], 0);
    /* without REMOTE_ATOMIC: remote access error */
    uint32_t nstag = qp_reg(&B, tgt, sizeof tgt, B.pz, EMU_ACC_LOCAL_WRITE | EMU_ACC_REMOTE_WRITE,
                         &mr);
    fa.cookie = 5;
    fa.remote_stag = nstag;
    fa.remote_to = (uintptr_t)tgt;
    qp_stall(&B);
    ck_assert_int_eq(emu_qp_post_send(A.qp, &fa), 0);
    ck_assert_int_eq(emu_qp_post_send(A.qp, &fa), 0);
    qp_unstall();
    ck_assert(QP_WAIT_FOR(&A, A.terminal == 1 && A.ns == 6));
    ck_assert_int_eq(A.scq[4].status, EMU_WC_REM_ACCESS);
    ck_assert_int_eq(A.scq[5].status, EMU_WC_FLUSHED);
    qp_pair_down();
}
END_TEST

START_TEST(t_rfc7306_off)
{
    /* _i 1: the initiator is a plain iWARP peer (no marker); 2: the
     * responder answers without one. Either way nothing is negotiated. */
    qp_no_caps = _i;
    qp_pair_up();
    struct emu_conn_info ai, bi;
    ck_assert_int_eq(emu_conn_get_info(A.c, &ai), 0);
    ck_assert_int_eq(emu_conn_get_info(B.c, &bi), 0);
    ck_assert_uint_eq(ai.caps, 0);
    ck_assert_uint_eq(bi.caps, 0);
    uint64_t r;
    struct emu_wr fa = {.cookie = 2, .op = EMU_WR_FETCH_ADD, .nsge = 1,
                        .sge = &(struct emu_sge){&r, 8}, .remote_stag = 1};
    ck_assert_int_eq(emu_qp_post_send(A.qp, &fa), -EOPNOTSUPP);
    fa.op = EMU_WR_WRITE_IMM;
    ck_assert_int_eq(emu_qp_post_send(A.qp, &fa), -EOPNOTSUPP);
    fa.op = EMU_WR_SEND;
    fa.nsge = EMU_QP_MAX_SGE + 1;
    ck_assert_int_eq(emu_qp_post_send(A.qp, &fa), -EINVAL);
    qp_pair_down();
}
END_TEST

/* Two softdat QPs without attr.rfc7306: the capability markers enable
 * write-with-immediate and atomics; the receiver of the immediate learns
 * the length of the Write before it. */
START_TEST(t_rfc7306_negotiated)
{
    qp_pair_up();
    struct emu_conn_info ai, bi;
    ck_assert_int_eq(emu_conn_get_info(A.c, &ai), 0);
    ck_assert_int_eq(emu_conn_get_info(B.c, &bi), 0);
    ck_assert_uint_eq(ai.caps, EMU_CONN_CAP_ATOMICS | EMU_CONN_CAP_IMM);
    ck_assert_uint_eq(bi.caps, EMU_CONN_CAP_ATOMICS | EMU_CONN_CAP_IMM);
    static uint8_t tgt[70000], src[70000], d[16];
    static uint64_t word __attribute__((aligned(8))) = 40;
    qp_fill(src, sizeof src, 5);
    struct emu_mr *mr, *mw;
    uint32_t stag = qp_reg(&B, tgt, sizeof tgt, B.pz, EMU_ACC_LOCAL_WRITE | EMU_ACC_REMOTE_WRITE,
                        &mr);
    uint32_t wstag = qp_reg(&B, &word, 8, B.pz, EMU_ACC_LOCAL_WRITE | EMU_ACC_REMOTE_ATOMIC, &mw);
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(emu_qp_post_recv(B.qp, 10 + (uint64_t)i, 1, &(struct emu_sge){d, 16}),
                         0);
    /* 256 B (dtestx's size), a multi-FPDU 70000 B, then a zero-length one
     * (must report 0, not the previous Write's length) */
    static const uint32_t lens[3] = {256, 70000, 0};
    for (int i = 0; i < 3; i++) {
        struct emu_sge sg = {src, lens[i]};
        struct emu_wr wr = {.cookie = 1 + (uint64_t)i, .op = EMU_WR_WRITE_IMM,
                            .nsge = lens[i] ? 1 : 0, .sge = &sg, .remote_stag = stag,
                            .remote_to = (uintptr_t)tgt, .imm = 0x1111u * (i + 1)};
        ck_assert_int_eq(emu_qp_post_send(A.qp, &wr), 0);
        ck_assert(QP_WAIT_FOR(&B, B.nr == i + 1));
        ck_assert_int_eq(B.rcq[i].status, EMU_WC_SUCCESS);
        ck_assert_int_eq(B.rcq[i].op, EMU_WC_RECV_IMM);
        ck_assert_uint_eq(B.rcq[i].cookie, 10 + (uint64_t)i);
        ck_assert_uint_eq(B.rcq[i].imm, 0x1111u * (i + 1));
        ck_assert_uint_eq(B.rcq[i].byte_len, lens[i]);
    }
    ck_assert_int_eq(memcmp(tgt, src, 70000), 0);
    ck_assert(QP_WAIT_FOR(&A, A.ns == 3));
    ck_assert_uint_eq(A.scq[0].byte_len, 256);
    ck_assert_uint_eq(A.scq[0].imm, 0x1111);
    uint64_t r1 = 0, r2 = 0;
    struct emu_wr fa = {.cookie = 4, .op = EMU_WR_FETCH_ADD, .nsge = 1,
                        .sge = &(struct emu_sge){&r1, 8}, .remote_stag = wstag,
                        .remote_to = (uintptr_t)&word, .atomic_add_or_cmp = 2};
    struct emu_wr cs = {.cookie = 5, .op = EMU_WR_CMP_SWAP, .nsge = 1,
                        .sge = &(struct emu_sge){&r2, 8}, .remote_stag = wstag,
                        .remote_to = (uintptr_t)&word, .atomic_add_or_cmp = 42,
                        .atomic_swap = 9};
    ck_assert_int_eq(emu_qp_post_send(A.qp, &fa), 0);
    ck_assert_int_eq(emu_qp_post_send(A.qp, &cs), 0);
    ck_assert(QP_WAIT_FOR(&A, A.ns == 5));
    ck_assert_int_eq(A.scq[3].status, EMU_WC_SUCCESS);
    ck_assert_int_eq(A.scq[4].status, EMU_WC_SUCCESS);
    ck_assert_uint_eq(r1, 40);
    ck_assert_uint_eq(r2, 42);
    ck_assert_uint_eq(__atomic_load_n(&word, __ATOMIC_ACQUIRE), 9);
    qp_pair_down();
}
END_TEST

START_TEST(t_send_invalidate)
{
    qp_pair_up();
    static uint8_t tgt[4096], src[64], d[64];
    struct emu_mr *mr;
    uint32_t stag = qp_reg(&B, tgt, sizeof tgt, B.pz,
                        EMU_ACC_LOCAL_WRITE | EMU_ACC_REMOTE_WRITE | EMU_ACC_REMOTE_INVALIDATE,
                        &mr);
    ck_assert_int_eq(emu_qp_post_recv(B.qp, 1, 1, &(struct emu_sge){d, 64}), 0);
    struct emu_sge sg = {src, 64};
    struct emu_wr wr = {.cookie = 1, .op = EMU_WR_SEND, .flags = EMU_WR_INVALIDATE, .nsge = 1,
                        .sge = &sg, .inv_stag = stag};
    ck_assert_int_eq(emu_qp_post_send(A.qp, &wr), 0);
    ck_assert(QP_WAIT_FOR(&B, B.nr == 1));
    ck_assert_int_eq(B.rcq[0].status, EMU_WC_SUCCESS);
    ck_assert_int_eq(B.rcq[0].op, EMU_WC_RECV_INV);
    ck_assert_uint_eq(B.rcq[0].inv_stag, stag);
    struct emu_mr_info mi;
    ck_assert_int_eq(emu_mem_mr_query(mr, &mi), EMU_MEM_OK);
    ck_assert(mi.remote_revoked);
    /* the STag no longer admits Writes */
    ck_assert_int_eq(qp_post_rdma(&A, EMU_WR_WRITE, 2, src, 8, stag, (uintptr_t)tgt, 0), 0);
    ck_assert(QP_WAIT_FOR(&A, A.terminal == 1 && A.fatal));
    ck_assert(A.f.remote);
    ck_assert_int_eq(A.f.term.layer, EMU_TERM_DDP);
    ck_assert_int_eq(A.f.term.etype, EMU_TERM_DDP_TAGGED);
    ck_assert_int_eq(tgt[0], 0);
    qp_pair_down();
}
END_TEST

static atomic_int lw_hits;
static void on_lw(void *ctx)
{
    (void)ctx;
    atomic_fetch_add(&lw_hits, 1);
}

START_TEST(t_srq)
{
    struct emu_srq *srq;
    struct emu_srq_attr sa = {.max_recv_wr = 8, .max_sge = 2, .low_watermark = 2,
                              .low_watermark_hit = on_lw};
    ck_assert_int_eq(emu_srq_create(&sa, &srq), 0);
    static uint8_t d[8][32], src[32];
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(emu_srq_post_recv(srq, (uint64_t)i, 1, &(struct emu_sge){d[i], 32}),
                         0);
    ck_assert_uint_eq(emu_srq_posted(srq), 4);
    struct qpcfg qb = qp_defcfg;
    qb.srq = srq;
    qp_pair_up_cfg(&qp_defcfg, &qb, EMU_CRC_DEFAULT);
    ck_assert_int_eq(emu_qp_post_recv(B.qp, 0, 0, NULL), -EINVAL);
    for (int i = 0; i < 3; i++) {
        qp_fill(src, 32, (unsigned)i);
        ck_assert_int_eq(qp_post_send(&A, (uint64_t)i, src, 32, 0), 0);
        ck_assert(QP_WAIT_FOR(&B, B.nr == i + 1));
        ck_assert_uint_eq(B.rcq[i].cookie, (uint64_t)i);
        ck_assert_int_eq(memcmp(d[i], src, 32), 0);
    }
    ck_assert_uint_eq(emu_srq_posted(srq), 1);
    ck_assert_int_eq(atomic_load(&lw_hits), 1);
    ck_assert_int_eq(emu_srq_resize(srq, 16), 0);
    ck_assert_uint_eq(emu_srq_posted(srq), 1);
    qp_pair_down();
    /* flushing the QP leaves the SRQ's receives alone */
    ck_assert_uint_eq(emu_srq_posted(srq), 1);
    emu_srq_destroy(srq);
}
END_TEST

START_TEST(t_bind_window)
{
    qp_pair_up();
    static uint8_t buf[8192], src[100];
    qp_fill(src, sizeof src, 5);
    struct emu_mr *mr;
    qp_reg(&B, buf, sizeof buf, B.pz, EMU_ACC_LOCAL_WRITE | EMU_ACC_LOCAL_READ | EMU_ACC_MW_BIND,
        &mr);
    struct emu_mw *mw;
    ck_assert_int_eq(emu_mem_mw_create(B.mt, B.pz, EMU_MW_SCOPE_PZ, &mw), EMU_MEM_OK);
    struct emu_wr wr = {.cookie = 9, .op = EMU_WR_BIND, .mw = mw,
                        .bind = {.mr = mr, .addr = (uintptr_t)buf + 4096, .length = 1024,
                                 .access = EMU_ACC_REMOTE_WRITE, .va_type = EMU_VA_ABS,
                                 .ep_pz = B.pz}};
    ck_assert_int_eq(emu_qp_post_send(B.qp, &wr), 0);
    ck_assert(QP_WAIT_FOR(&B, B.ns == 1));
    ck_assert_int_eq(B.scq[0].status, EMU_WC_SUCCESS);
    ck_assert_int_eq(B.scq[0].op, EMU_WR_BIND);
    uint32_t wst = B.scq[0].bound_stag;
    ck_assert_uint_ne(wst, 0);
    uint8_t d[4];
    ck_assert_int_eq(emu_qp_post_recv(B.qp, 1, 1, &(struct emu_sge){d, 4}), 0);
    ck_assert_int_eq(qp_post_rdma(&A, EMU_WR_WRITE, 1, src, 100, wst, (uintptr_t)buf + 4100, 0),
                     0);
    ck_assert_int_eq(qp_post_send(&A, 2, src, 0, 0), 0);
    ck_assert(QP_WAIT_FOR(&B, B.nr == 1));
    ck_assert_int_eq(memcmp(buf + 4100, src, 100), 0);
    /* a bind refused by the memory table completes BIND_FAILED */
    wr.bind.length = 1u << 20;
    wr.cookie = 10;
    ck_assert_int_eq(emu_qp_post_send(B.qp, &wr), 0);
    ck_assert(QP_WAIT_FOR(&B, B.ns == 2));
    ck_assert_int_eq(B.scq[1].status, EMU_WC_BIND_FAILED);
    qp_pair_down();
}
END_TEST

/* dat_ep_reset: after a disconnect both QPs are reset and reused on a new
 * connection; MSNs start again at 1. Also a Read into a multi-SGE sink. */
START_TEST(t_reuse_after_reset)
{
    qp_pair_up();
    static uint8_t s[4096], d[4096];
    qp_fill(s, sizeof s, 3);
    for (int round = 0; round < 3; round++) {
        if (round > 0) {
            ck_assert_int_eq(emu_qp_reset(A.qp), 0);
            ck_assert_int_eq(emu_qp_reset(B.qp), 0);
            qp_lock(&A);
            A.established = A.terminal = 0;
            qp_unlock(&A);
            qp_lock(&B);
            B.established = B.terminal = 0;
            qp_unlock(&B);
            struct sockaddr_in sin = {.sin_family = AF_INET,
                                      .sin_port = htons(emu_listener_port(qp_lis))};
            sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
            ck_assert_int_eq(emu_conn_connect(A.e, (struct sockaddr *)&sin, sizeof sin, NULL, 0,
                                              &qp_params, NULL, 0, &qp_cops, &A, &A.c),
                             0);
            ck_assert(QP_WAIT_FOR(&A, A.established == 1));
            ck_assert(QP_WAIT_FOR(&B, B.established == 1));
        }
        int nr0 = qp_get_nr(&B), ns0 = qp_get_ns(&A);
        memset(d, 0, sizeof d);
        ck_assert_int_eq(emu_qp_post_recv(B.qp, 1, 1, &(struct emu_sge){d, sizeof d}), 0);
        ck_assert_int_eq(qp_post_send(&A, 1, s, 1000 + (uint32_t)round, 0), 0);
        ck_assert(QP_WAIT_FOR(&B, B.nr == nr0 + 1));
        ck_assert_int_eq(B.rcq[nr0].status, EMU_WC_SUCCESS);
        ck_assert_int_eq(memcmp(d, s, 1000 + (size_t)round), 0);
        /* Read into three SGEs */
        struct emu_mr *mr;
        uint32_t st = qp_reg(&B, s, sizeof s, B.pz, EMU_ACC_REMOTE_READ, &mr);
        static uint8_t r1[100], r2[1], r3[3995];
        struct emu_sge sg[3] = {{r1, 100}, {r2, 1}, {r3, 3995}};
        struct emu_wr wr = {.cookie = 2, .op = EMU_WR_READ, .nsge = 3, .sge = sg,
                            .remote_stag = st, .remote_to = (uintptr_t)s};
        ck_assert_int_eq(emu_qp_post_send(A.qp, &wr), 0);
        ck_assert(QP_WAIT_FOR(&A, A.ns == ns0 + 2));
        ck_assert_int_eq(A.scq[ns0 + 1].status, EMU_WC_SUCCESS);
        ck_assert_int_eq(memcmp(r1, s, 100), 0);
        ck_assert_int_eq(r2[0], s[100]);
        ck_assert_int_eq(memcmp(r3, s + 101, 3995), 0);
        emu_mem_mr_free(mr, 1000);
        ck_assert_int_eq(emu_qp_disconnect(A.qp, true), 0);
        ck_assert(QP_WAIT_FOR(&A, A.terminal == 1));
        ck_assert(QP_WAIT_FOR(&B, B.terminal == 1));
        ck_assert_int_eq(emu_qp_reset(A.qp) == 0 && emu_qp_reset(B.qp) == 0, 1);
        emu_conn_free(A.c);
        emu_conn_free(B.c);
        A.c = B.c = NULL;
    }
    qp_pair_down();
}
END_TEST

/* RFC 5044 client/server mode: the passive side holds its sends until the
 * first FPDU from the initiator arrived. */
START_TEST(t_no_p2p_recv_first)
{
    qp_no_p2p = true;
    qp_pair_up();
    struct emu_conn_info ib;
    ck_assert_int_eq(emu_conn_get_info(B.c, &ib), 0);
    ck_assert(ib.recv_first);
    static uint8_t a[16], b[16], da[16], db[16];
    qp_fill(a, 16, 1);
    qp_fill(b, 16, 2);
    ck_assert_int_eq(emu_qp_post_recv(A.qp, 1, 1, &(struct emu_sge){da, 16}), 0);
    ck_assert_int_eq(emu_qp_post_recv(B.qp, 1, 1, &(struct emu_sge){db, 16}), 0);
    ck_assert_int_eq(qp_post_send(&B, 1, b, 16, 0), 0);
    usleep(50000);
    ck_assert_int_eq(qp_get_nr(&A), 0); /* held */
    ck_assert_int_eq(qp_post_send(&A, 1, a, 16, 0), 0);
    ck_assert(QP_WAIT_FOR(&A, A.nr == 1));
    ck_assert(QP_WAIT_FOR(&B, B.nr == 1));
    ck_assert_int_eq(memcmp(da, b, 16), 0);
    ck_assert_int_eq(memcmp(db, a, 16), 0);
    qp_pair_down();
}
END_TEST

/* ---------------------------------------------------------------- hostile peer */

/* A writes one FPDU by hand: header h, payload, trailer (CRC optionally broken). */
static void raw_fpdu(const struct emu_ddp_hdr *h, const void *pay, uint32_t len, bool crc,
                     bool corrupt)
{
    uint8_t hb[EMU_FPDU_HDR_MAX], tb[EMU_FPDU_TRAILER_MAX];
    size_t hl = 0;
    ck_assert_int_eq(emu_fpdu_build_hdr(h, len, hb, sizeof hb, &hl), EMU_DDP_OK);
    struct iovec p = {(void *)pay, len};
    size_t tl = emu_fpdu_build_trailer(hb, hl, &p, len ? 1 : 0, crc, tb);
    if (corrupt)
        tb[tl - 1] ^= 0x5A;
    struct iovec v[3] = {{hb, hl}, {(void *)pay, len}, {tb, tl}};
    ck_assert_int_eq(emu_conn_writev(A.c, v, 3), (ssize_t)(hl + len + tl));
}

/* Returns B's Terminate as seen on the wire, decoded. */
static void raw_expect_term(struct emu_term *t)
{
    ck_assert(QP_WAIT_FOR(&A, A.raw_len >= 2 + EMU_DDP_UNTAGGED_HLEN + 4));
    struct emu_ddp_hdr h;
    size_t need = 0;
    qp_lock(&A);
    uint16_t ul = (uint16_t)(A.raw_in[0] << 8 | A.raw_in[1]);
    int rc = emu_ddp_parse(A.raw_in + 2, A.raw_len - 2, ul, NULL, &h, &need);
    qp_unlock(&A);
    ck_assert_int_eq(rc, EMU_DDP_OK);
    ck_assert_int_eq(h.opcode, EMU_OP_TERMINATE);
    *t = h.u.term;
}

static void raw_case(bool crc, void (*inject)(void), uint8_t layer, uint8_t etype,
                     uint8_t ecode, int err)
{
    qp_raw_a = true;
    qp_pair_up_cfg(&qp_defcfg, &qp_defcfg, crc ? EMU_CRC_ON : EMU_CRC_OFF);
    static uint8_t d[64];
    ck_assert_int_eq(emu_qp_post_recv(B.qp, 1, 1, &(struct emu_sge){d, 64}), 0);
    inject();
    struct emu_term t;
    raw_expect_term(&t);
    ck_assert_int_eq(t.layer, layer);
    ck_assert_int_eq(t.etype, etype);
    ck_assert_int_eq(t.ecode, ecode);
    ck_assert(QP_WAIT_FOR(&B, B.terminal == 1 && B.nr == 1 && B.fatal));
    ck_assert_int_eq(B.term_type, EMU_CONN_BROKEN);
    ck_assert(!B.f.remote);
    ck_assert_int_eq(B.f.err, err);
    ck_assert_int_eq(B.rcq[0].status, EMU_WC_FLUSHED);
    qp_pair_down();
}

static void inj_bad_crc(void)
{
    struct emu_ddp_hdr h = {.opcode = EMU_OP_SEND, .last = true, .msn = 1};
    raw_fpdu(&h, "hello", 5, true, true);
}

static void inj_bad_msn(void)
{
    struct emu_ddp_hdr h = {.opcode = EMU_OP_SEND, .last = true, .msn = 7};
    raw_fpdu(&h, "hello", 5, false, false);
}

static void inj_bad_opcode(void)
{
    /* (raw_case sets qp_no_caps for this one: nothing negotiated) */
    /* RFC 7306 Immediate Data while it was not enabled */
    struct emu_ddp_hdr h = {.opcode = EMU_OP_IMM, .last = true, .msn = 1};
    raw_fpdu(&h, NULL, 0, false, false);
}

static void inj_stray_read_resp(void)
{
    struct emu_ddp_hdr h = {.opcode = EMU_OP_READ_RESP, .tagged = true, .last = true,
                            .stag = 0x1234, .to = 0};
    raw_fpdu(&h, "abcd", 4, false, false);
}

/* IRD limits the peer's Reads, not its placement probes: eight probes
 * (zero-length Reads, beyond IRD towards a softdat peer) whose answers are
 * still queued, then IRD (8) real Reads, all in one write that B processes
 * in one run: every Read is answered, nothing is refused. Counting the
 * queued probe answers against IRD broke the connection with an RDMAP
 * "catastrophic" Terminate (e2e/mt, under load). */
START_TEST(t_probes_do_not_count_against_ird)
{
    qp_raw_a = true;
    qp_pair_up_cfg(&qp_defcfg, &qp_defcfg, EMU_CRC_OFF);
    enum { PROBES = 8, READS = 8, L = 64 };
    static uint8_t src[L];
    qp_fill(src, L, 9);
    struct emu_mr *mr;
    uint32_t stag = qp_reg(&B, src, L, B.pz, EMU_ACC_REMOTE_READ, &mr);
    qp_stall(&B); /* B reads all of it at once */
    uint32_t msn = 1;
    for (int i = 0; i < PROBES + READS; i++) {
        struct emu_ddp_hdr h = {.opcode = EMU_OP_READ_REQ, .last = true, .msn = msn++};
        h.u.rreq.sink_stag = 0x100u + (uint32_t)i;
        if (i >= PROBES) {
            h.u.rreq.size = L;
            h.u.rreq.src_stag = stag;
            h.u.rreq.src_to = (uintptr_t)src;
        }
        raw_fpdu(&h, NULL, 0, false, false);
    }
    qp_unstall();
    /* Every answer, in order: 8 zero-length Read Responses, 8 of 64 bytes. */
    size_t want = PROBES * (2 + EMU_DDP_TAGGED_HLEN + 4) + READS * (2 + EMU_DDP_TAGGED_HLEN + L + 4);
    ck_assert(QP_WAIT_FOR(&A, A.raw_len >= want));
    qp_lock(&A);
    size_t at = 0;
    for (int i = 0; i < PROBES + READS; i++) {
        uint16_t ul = (uint16_t)(A.raw_in[at] << 8 | A.raw_in[at + 1]);
        struct emu_ddp_hdr h;
        size_t need = 0;
        ck_assert_int_eq(emu_ddp_parse(A.raw_in + at + 2, ul, ul, NULL, &h, &need), EMU_DDP_OK);
        ck_assert_int_eq(h.opcode, EMU_OP_READ_RESP);
        ck_assert_uint_eq(h.stag, 0x100u + (uint32_t)i);
        ck_assert_uint_eq(h.payload_len, i < PROBES ? 0u : (uint32_t)L);
        if (i >= PROBES)
            ck_assert_int_eq(memcmp(A.raw_in + at + 2 + EMU_DDP_TAGGED_HLEN, src, L), 0);
        at += 2 + ul + emu_fpdu_pad(ul) + 4;
    }
    ck_assert_uint_eq(at, A.raw_len);
    qp_unlock(&A);
    ck_assert(!B.fatal);
    emu_mem_mr_free(mr, 1000);
    qp_pair_down();
}
END_TEST

START_TEST(t_hostile_crc)
{
    raw_case(true, inj_bad_crc, EMU_TERM_LLP, EMU_TERM_LLP_MPA, 0x02, EBADMSG);
}
END_TEST
START_TEST(t_hostile_msn)
{
    raw_case(false, inj_bad_msn, EMU_TERM_DDP, EMU_TERM_DDP_UNTAGGED, EMU_DDP_EC_U_MSN_RANGE,
             EPROTO);
}
END_TEST
START_TEST(t_hostile_opcode)
{
    qp_no_caps = 1;
    raw_case(false, inj_bad_opcode, EMU_TERM_RDMAP, EMU_TERM_RDMAP_OPERATION,
             EMU_RDMAP_EC_OPCODE, EPROTO);
}
END_TEST
START_TEST(t_hostile_read_resp)
{
    raw_case(false, inj_stray_read_resp, EMU_TERM_DDP, EMU_TERM_DDP_TAGGED,
             EMU_DDP_EC_T_INV_STAG, EPROTO);
}
END_TEST

/* ---------------------------------------------------------------- perf */

static int g_mode; /* 0 wait on completions, 1 spin in emu_qp_progress, 2 poll(fd) + progress */

static void wait_recv(struct qp_side *s, int i)
{
    if (g_mode == 0) {
        QP_WAIT_FOR(s, s->nr > i);
        return;
    }
    struct emu_conn_info ci;
    emu_conn_get_info(s->c, &ci);
    for (long k = 0; atomic_load(&s->nr_atomic) <= i && k < 200000000L; k++) {
        if (g_mode == 2) {
            struct pollfd pfd = {.fd = ci.fd, .events = POLLIN};
            poll(&pfd, 1, 100);
        }
        emu_qp_progress(s->qp);
    }
}

static void *echo_thread(void *arg)
{
    int n = (int)(intptr_t)arg;
    static uint8_t buf[64], rb[64];
    for (int i = 0; i < n; i++) {
        wait_recv(&B, i);
        emu_qp_post_recv(B.qp, 0, 1, &(struct emu_sge){rb, 64});
        qp_post_send(&B, 0, buf, 64, 0);
    }
    return NULL;
}

static double pingpong(int iters, int mode)
{
    static uint8_t buf[64], rb[64];
    g_mode = mode;
    for (int i = 0; i < 2; i++) {
        emu_qp_post_recv(A.qp, 0, 1, &(struct emu_sge){rb, 64});
        emu_qp_post_recv(B.qp, 0, 1, &(struct emu_sge){rb, 64});
    }
    atomic_store(&B.nr_atomic, 0);
    atomic_store(&A.nr_atomic, 0);
    qp_lock(&B);
    B.nr = 0;
    qp_unlock(&B);
    qp_lock(&A);
    A.nr = 0;
    A.ns = 0;
    qp_unlock(&A);
    pthread_t th;
    pthread_create(&th, NULL, echo_thread, (void *)(intptr_t)iters);
    double t0 = now_s();
    for (int i = 0; i < iters; i++) {
        qp_post_send(&A, 0, buf, 64, 0);
        wait_recv(&A, i);
        emu_qp_post_recv(A.qp, 0, 1, &(struct emu_sge){rb, 64});
    }
    double dt = now_s() - t0;
    pthread_join(th, NULL);
    ck_assert_int_eq(atomic_load(&A.nr_atomic), iters);
    return dt / iters / 2 * 1e6;
}

START_TEST(t_perf)
{
    struct qpcfg q = qp_defcfg;
    q.sq = 256;
    q.rq = 256;
    qp_pair_up_cfg(&q, &q, EMU_CRC_DEFAULT);
    enum { MB = 1 << 20, N = 200 };
    uint8_t *src = malloc(MB), *dst = malloc(MB);
    qp_fill(src, MB, 1);
    struct emu_mr *mr;
    uint32_t stag = qp_reg(&B, dst, MB, B.pz, EMU_ACC_REMOTE_WRITE | EMU_ACC_LOCAL_WRITE, &mr);
    /* 1 MiB Sends */
    double t0 = now_s();
    int ps = 0, pr = 0;
    while (ps < N) {
        while (pr < N && pr - qp_get_nr(&B) < 200 &&
               emu_qp_post_recv(B.qp, 0, 1, &(struct emu_sge){dst, MB}) == 0)
            pr++;
        if (ps < pr && qp_post_send(&A, 0, src, MB, 0) == 0)
            ps++;
        else
            QP_WAIT_FOR(&A, A.ns > ps - 100);
    }
    ck_assert(QP_WAIT_FOR(&B, B.nr == N));
    double dt = now_s() - t0;
    printf("[perf] 1 MiB Sends: %.0f MB/s\n", (double)N * MB / dt / 1e6);
    /* 1 MiB Writes + a final Send */
    int a0 = qp_get_ns(&A);
    t0 = now_s();
    for (int i = 0; i < N; i++) {
        while (qp_post_rdma(&A, EMU_WR_WRITE, 0, src, MB, stag, (uintptr_t)dst, 0) == -ENOSPC)
            QP_WAIT_FOR(&A, A.ns > a0 + i - 128);
    }
    int b0 = qp_get_nr(&B);
    ck_assert_int_eq(emu_qp_post_recv(B.qp, 0, 1, &(struct emu_sge){dst, 8}), 0);
    while (qp_post_send(&A, 0, src, 1, 0) == -ENOSPC)
        QP_WAIT_FOR(&A, A.ns > a0 + N - 128);
    ck_assert(QP_WAIT_FOR(&B, B.nr == b0 + 1));
    dt = now_s() - t0;
    printf("[perf] 1 MiB RDMA Writes: %.0f MB/s\n", (double)N * MB / dt / 1e6);
    ck_assert(QP_WAIT_FOR(&A, A.ns == a0 + N + 1));
    /* 64 B ping-pong */
    double lat = pingpong(3000, 0);
    printf("[perf] 64 B ping-pong, waiting for the engine's completion: %.1f us one-way\n", lat);
    lat = pingpong(3000, 1);
    printf("[perf] 64 B ping-pong, spinning in emu_qp_progress: %.1f us one-way\n", lat);
    fflush(stdout);
    emu_mem_mr_free(mr, 1000);
    free(src);
    free(dst);
    qp_pair_down();
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("emu_qp");
    TCase *tc = tcase_create("qp");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, t_send_sizes);
    tcase_add_test(tc, t_send_tail_alignments);
    tcase_add_test(tc, t_wire_observer);
    tcase_add_test(tc, t_send_multi_sge);
    tcase_add_test(tc, t_send_many);
    tcase_add_test(tc, t_recv_too_small);
    tcase_add_test(tc, t_no_recv_posted);
    tcase_add_test(tc, t_write);
    tcase_add_test(tc, t_write_then_send);
    tcase_add_test(tc, t_large_writes_read_in_place);
    tcase_add_test(tc, t_large_message_one_writev);
    tcase_add_test(tc, t_tx_backlog_beyond_one_pass);
    tcase_add_test(tc, t_write_bad_stag);
    tcase_add_test(tc, t_write_bad_pz);
    tcase_add_test(tc, t_write_no_access);
    tcase_add_test(tc, t_write_bounds);
    tcase_add_test(tc, t_read);
    tcase_add_test(tc, t_read_ord_queue);
    tcase_add_test(tc, t_read_protection);
    tcase_add_test(tc, t_flush_on_disconnect);
    tcase_add_test(tc, t_flush_sq_order);
    tcase_add_test(tc, t_crc_on);
    tcase_add_test(tc, t_crc_off);
    tcase_add_test(tc, t_small_fpdus);
    tcase_add_test(tc, t_write_imm_atomics);
    tcase_add_loop_test(tc, t_rfc7306_off, 1, 3);
    tcase_add_test(tc, t_rfc7306_negotiated);
    tcase_add_test(tc, t_send_invalidate);
    tcase_add_test(tc, t_srq);
    tcase_add_test(tc, t_bind_window);
    tcase_add_test(tc, t_no_p2p_recv_first);
    tcase_add_test(tc, t_reuse_after_reset);
    tcase_add_test(tc, t_hostile_crc);
    tcase_add_test(tc, t_hostile_msn);
    tcase_add_test(tc, t_hostile_opcode);
    tcase_add_test(tc, t_hostile_read_resp);
    tcase_add_test(tc, t_probes_do_not_count_against_ird);
    suite_add_tcase(s, tc);
    TCase *tp = tcase_create("perf");
    tcase_set_timeout(tp, 120);
    tcase_add_test(tp, t_perf);
    suite_add_tcase(s, tp);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
