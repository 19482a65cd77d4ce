/* emu/qp, the parts a polling consumer and InfiniBand semantics bring:
 * consumer-driven receive progress (emu_qp_progress), the polling lease
 * and how the engine backs off behind it, placement probes and their
 * batching, posts held for one write, answers kept for the reply, and
 * Read Responses sharing a write. Two engines in one process over
 * 127.0.0.1 (test/lib/qp_pair). The plain data path is test_qp.c. */
#include "emu/conn.h"
#include "emu/engine.h"
#include "emu/mem.h"
#include "emu/qp.h"
#include "emu/wire_io.h"
#include "test/lib/clock.h"

#include <check.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "test/lib/qp_pair.h"

/* Consumer passes over qps until one completes something (bounded: a few
 * seconds at worst); what that pass made. */
static int progress_until_made(struct emu_qp *const *qps, unsigned n)
{
    int made = 0;
    for (int i = 0; i < 200000 && made == 0; i++)
        made += emu_qp_progress_many(qps, n);
    return made;
}

/* The end of a Write test: the target holds the source's bytes, the
 * region frees cleanly, the buffers go, the pair goes down. */
static void written_then_down(uint8_t *src, uint8_t *dst, size_t len, struct emu_mr *mr)
{
    ck_assert_int_eq(memcmp(src, dst, len), 0);
    ck_assert_int_eq(emu_mem_mr_free(mr, 1000), EMU_MEM_OK);
    free(src);
    free(dst);
    qp_pair_down();
}

/* A and B connected with InfiniBand semantics (receiver-not-ready retry,
 * completion on the peer's placement), the default sizes otherwise. */
static void ib_pair_up(enum emu_crc_mode crc)
{
    struct qpcfg ib = qp_defcfg;
    ib.ib = true;
    qp_pair_up_cfg(&ib, &ib, crc);
}

/* InfiniBand semantics: every Send and Write completes only once a
 * placement probe behind it is answered. A burst of small Sends shares
 * probes (while one is out, the next waits for its answer: one answer per
 * batch, not per message); Writes of 64 KiB or more each get their own, so
 * that a pipeline's Writes complete as they land. Every WR completes. */
START_TEST(t_probes_batch_small_messages)
{
    ib_pair_up(EMU_CRC_DEFAULT);
    enum { NSEND = 400, NWRITE = 8, WLEN = 128 * 1024 };
    static uint8_t small[64], rbuf[NSEND][64];
    for (int i = 0; i < NSEND; i++)
        ck_assert_int_eq(emu_qp_post_recv(B.qp, (uint64_t)i, 1, &(struct emu_sge){rbuf[i], 64}), 0);
    struct emu_qp_stats st0, st1, st2;
    emu_qp_get_stats(A.qp, &st0);
    /* B answers nothing until every Send is posted: on a loaded host (or
     * under a sanitizer) posts far apart would otherwise each meet the
     * last probe already answered, and get a probe of their own. */
    qp_stall(&B);
    for (int i = 0; i < NSEND; i++)
        ck_assert_int_eq(qp_post_send(&A, (uint64_t)i, small, sizeof small, 0), 0);
    qp_unstall();
    ck_assert(QP_WAIT_FOR(&A, A.ns >= NSEND));
    ck_assert(QP_WAIT_FOR(&B, B.nr >= NSEND));
    emu_qp_get_stats(A.qp, &st1);
    uint64_t small_probes = st1.placement_probes - st0.placement_probes;
    ck_assert_msg(small_probes >= 1 && small_probes <= NSEND / 8, "%llu probes for %d Sends",
                  (unsigned long long)small_probes, NSEND);
    uint8_t *src = malloc(WLEN), *dst = malloc(WLEN);
    qp_fill(src, WLEN, 3);
    struct emu_mr *mr;
    uint32_t stag = qp_reg(&B, dst, WLEN, B.pz, EMU_ACC_LOCAL_WRITE | EMU_ACC_REMOTE_WRITE, &mr);
    for (int i = 0; i < NWRITE; i++)
        ck_assert_int_eq(qp_post_rdma(&A, EMU_WR_WRITE, 1000 + (uint64_t)i, src, WLEN, stag, (uintptr_t)dst, 0), 0);
    ck_assert(QP_WAIT_FOR(&A, A.ns >= NSEND + NWRITE));
    emu_qp_get_stats(A.qp, &st2);
    uint64_t write_probes = st2.placement_probes - st1.placement_probes;
    ck_assert_msg(write_probes >= NWRITE / 2, "%llu probes for %d Writes of 128 KiB",
                  (unsigned long long)write_probes, NWRITE);
    for (int i = 0; i < NSEND + NWRITE; i++)
        ck_assert_int_eq(A.scq[i].status, EMU_WC_SUCCESS);
    written_then_down(src, dst, WLEN, mr);
}
END_TEST

/* A wire observer: the sends of 52 bytes exactly (a Read Request FPDU
 * alone: a placement probe in a system call of its own). */
static atomic_int bare_probes;

static void count_bare_probes(void *ctx, struct emu_wire_ep *ep, int fd, enum emu_wire_dir dir,
                              const struct msghdr *mh, size_t len, uint64_t began_ns)
{
    (void)ctx;
    (void)began_ns;
    (void)fd;
    (void)mh;
    if (ep && dir == EMU_WIRE_TX && len == 52)
        atomic_fetch_add(&bare_probes, 1);
}

/* A small Send behind a large Write's unanswered probe carries a probe of
 * its own in the same writev, instead of waiting for the Write's answer
 * and then sending its probe alone (a Read Request FPDU, 52 bytes, in a
 * system call of its own: Open MPI's FIN behind a pipeline fragment). */
START_TEST(t_probe_not_held_behind_large_write)
{
    ib_pair_up(EMU_CRC_DEFAULT);
    enum { WLEN = 40 * 1024 };
    static uint8_t small[64], rbuf[64];
    uint8_t *src = malloc(WLEN), *dst = malloc(WLEN);
    qp_fill(src, WLEN, 4);
    struct emu_mr *mr;
    uint32_t stag = qp_reg(&B, dst, WLEN, B.pz, EMU_ACC_LOCAL_WRITE | EMU_ACC_REMOTE_WRITE, &mr);
    ck_assert_int_eq(emu_qp_post_recv(B.qp, 1, 1, &(struct emu_sge){rbuf, sizeof rbuf}), 0);
    static const struct emu_wire_observer obs = {count_bare_probes, NULL, NULL};
    struct emu_qp_stats st0, st1;
    emu_qp_get_stats(A.qp, &st0);
    qp_stall(&B); /* the Write's probe stays unanswered */
    atomic_store(&bare_probes, 0);
    emu_wire_observe(&obs);
    ck_assert_int_eq(qp_post_rdma(&A, EMU_WR_WRITE, 1, src, WLEN, stag, (uintptr_t)dst, 0), 0);
    ck_assert_int_eq(qp_post_send(&A, 2, small, sizeof small, 0), 0);
    qp_unstall();
    ck_assert(QP_WAIT_FOR(&A, A.ns >= 2));
    ck_assert(QP_WAIT_FOR(&B, B.nr >= 1));
    emu_wire_observe(NULL);
    emu_qp_get_stats(A.qp, &st1);
    ck_assert_uint_eq(st1.placement_probes - st0.placement_probes, 2);
    int bare = atomic_load(&bare_probes);
    ck_assert_int_eq(bare, 0);
    ck_assert_int_eq(A.scq[0].status, EMU_WC_SUCCESS);
    ck_assert_int_eq(A.scq[1].status, EMU_WC_SUCCESS);
    written_then_down(src, dst, WLEN, mr);
}
END_TEST

/* emu_qp_progress_many: with B's engine blocked, a consumer pass over two
 * QPs (B's, with a Send waiting in its socket, and A's, idle) completes
 * B's receive; a pass with nothing readable completes nothing. */
START_TEST(t_progress_many)
{
    qp_pair_up();
    uint8_t src[300], dst[300];
    qp_fill(src, sizeof src, 9);
    memset(dst, 0, sizeof dst);
    ck_assert_int_eq(emu_qp_post_recv(B.qp, 41, 1, &(struct emu_sge){dst, sizeof dst}), 0);
    struct emu_qp *both[2] = {A.qp, B.qp};
    ck_assert_int_eq(emu_qp_progress_many(both, 2), 0); /* nothing readable yet */
    qp_stall(&B);
    int nr0 = qp_get_nr(&B);
    ck_assert_int_eq(qp_post_send(&A, 1, src, sizeof src, 0), 0);
    int made = progress_until_made(both, 2);
    qp_unstall();
    ck_assert_int_ge(made, 1);
    ck_assert(QP_WAIT_FOR(&B, B.nr > nr0));
    ck_assert_uint_eq(B.rcq[nr0].cookie, 41);
    ck_assert_int_eq(memcmp(src, dst, sizeof src), 0);
    qp_pair_down();
}
END_TEST

/* The pass right after one that read is skipped once (it would find the
 * socket just drained; in Open MPI's loop it sat between the data placed
 * and the application seeing it); the pass after it reads again. */
START_TEST(t_progress_skips_once_after_read)
{
    qp_pair_up();
    uint8_t src[64], d1[64], d2[64];
    qp_fill(src, sizeof src, 3);
    ck_assert_int_eq(emu_qp_post_recv(B.qp, 1, 1, &(struct emu_sge){d1, sizeof d1}), 0);
    ck_assert_int_eq(emu_qp_post_recv(B.qp, 2, 1, &(struct emu_sge){d2, sizeof d2}), 0);
    struct emu_qp *both[2] = {A.qp, B.qp};
    qp_stall(&B);
    ck_assert_int_eq(qp_post_send(&A, 1, src, sizeof src, 0), 0);
    ck_assert_int_eq(progress_until_made(both, 2), 1);
    ck_assert_int_eq(qp_post_send(&A, 2, src, sizeof src, 0), 0);
    ck_assert(QP_WAIT_FOR(&A, A.ns >= 2)); /* both Sends are in B's socket */
    ck_assert_int_eq(emu_qp_progress_many(both, 2), 0); /* skipped */
    int made = progress_until_made(both, 2);
    qp_unstall();
    ck_assert_int_eq(made, 1);
    ck_assert(QP_WAIT_FOR(&B, B.nr >= 2));
    ck_assert_int_eq(memcmp(src, d2, sizeof src), 0);
    qp_pair_down();
}
END_TEST

/* A consumer that keeps its lease renewed for 300 ms costs the engine a
 * few looks, not one per lease period (600 at 500 µs): each look is a
 * wake-up that preempts the spinning consumer on a busy machine. Once the
 * consumer stops, the engine reads again on its own. */
START_TEST(t_lease_engine_looks_back_off)
{
    qp_pair_up();
    enum { MSGS = 100 };
    uint8_t src[64], dst[64];
    qp_fill(src, sizeof src, 5);
    for (int i = 0; i <= MSGS; i++)
        ck_assert_int_eq(emu_qp_post_recv(B.qp, (uint64_t)i, 1, &(struct emu_sge){dst, sizeof dst}), 0);
    int hooks0 = atomic_load(&B.rx_hook_calls);
    /* B polls without pause for 300 ms while A sends every 3 ms: the
     * traffic is what shows the engine the lease. */
    double start = test_now_s(), next = start;
    int sent = 0;
    while (test_now_s() < start + 0.3) {
        if (sent < MSGS && test_now_s() >= next) {
            ck_assert_int_eq(qp_post_send(&A, (uint64_t)sent, src, sizeof src, 0), 0);
            sent++;
            next += 0.003;
        }
        uint64_t now = emu_now_us();
        emu_qp_poll_lease(B.qp, 500, now);
        emu_qp_progress(B.qp);
        emu_qp_poll_pass_end();
    }
    int looks = atomic_load(&B.rx_hook_calls) - hooks0;
    /* Without the back-off: ~600 looks. With it: 500 µs doubling to 4 ms,
     * ~80. A consumer too slow to earn the lease (sanitizers) leaves the
     * engine one call per message. */
    ck_assert_int_lt(looks, 250);
    ck_assert(QP_WAIT_FOR(&B, B.nr >= sent));
    /* The consumer has stopped: the engine alone receives the last one. */
    ck_assert_int_eq(qp_post_send(&A, 999, src, sizeof src, 0), 0);
    ck_assert(QP_WAIT_FOR(&B, B.nr >= sent + 1));
    ck_assert_uint_eq(B.rcq[sent].cookie, (uint64_t)sent);
    ck_assert_int_eq(memcmp(src, dst, sizeof src), 0);
    qp_pair_down();
}
END_TEST

/* Until s's engine has run its receive hook once more than `calls` (its
 * look at a lease parks it), at most 5 s. */
static bool engine_looked(struct qp_side *s, int calls)
{
    for (int i = 0; i < 5000 && atomic_load(&s->rx_hook_calls) <= calls; i++)
        usleep(1000);
    return atomic_load(&s->rx_hook_calls) > calls;
}

static struct emu_qp_stats stats_of(struct qp_side *s)
{
    struct emu_qp_stats st;
    emu_qp_get_stats(s->qp, &st);
    return st;
}

static uint64_t tx_writes(struct qp_side *s)
{
    return stats_of(s).tx_writes;
}

static uint64_t held_posts(struct qp_side *s)
{
    return stats_of(s).held_posts;
}

/* Doorbell batching (emu_qp_post_send): with a consumer thread holding the
 * lease and the engine parked, a small post behind 4 unfinished WRs waits
 * for that thread's next pass, and every held post leaves in one writev.
 * A lone post leaves at once; 16 held posts are sent by the 16th; a
 * consumer that stops calling has its held posts sent by the engine when
 * it looks at the lease again; another thread's post is never held.
 * Everything arrives, in order. */
/* A's test thread holds A's polling lease (1 s, longer than the tests'
 * steps take under a sanitizer), A's engine parked behind it: the lease's
 * start makes the engine look (emu_qp_poll_lease). Then B sends A one
 * message, which waits in the socket for A's thread, not the engine. */
static void hold_a_lease(void)
{
    int looks = atomic_load(&A.rx_hook_calls);
    /* 2 ms of close passes, and more until the lease holds (up to 1 s): a
     * preemption longer than QP_POLL_GAP_US restarts the run that earns
     * it, and on a busy CI machine one run of 2 ms was not always enough. */
    uint64_t t0 = emu_now_us();
    for (;;) {
        uint64_t now = emu_now_us();
        if (now - t0 >= 1000000 || (now - t0 >= 2000 && emu_qp_poll_lease_left_us(A.qp) > 500000))
            break;
        emu_qp_poll_lease(A.qp, 1000000, now);
        emu_qp_progress(A.qp);
        emu_qp_poll_pass_end();
    }
    ck_assert_uint_gt(emu_qp_poll_lease_left_us(A.qp), 500000);
    ck_assert(engine_looked(&A, looks));
}

static void lease_a_to_test_thread(uint8_t *in, size_t len)
{
    ck_assert_int_eq(emu_qp_post_recv(A.qp, 0, 1, &(struct emu_sge){in, len}), 0);
    hold_a_lease();
    ck_assert_int_eq(qp_post_send(&B, 900, in, len, 0), 0);
    usleep(20000);
    ck_assert_int_eq(qp_get_nr(&A), 0);
}

static void *post_from_thread(void *buf)
{
    ck_assert_int_eq(qp_post_send(&A, 23, buf, 64, 0), 0);
    return NULL;
}

/* What keeps a waiter's spin window open is the small frames its passes
 * read, not every frame: on a stream of 64 KiB frames it sleeps between
 * arrivals instead of reading each arrival's few kilobytes in a system
 * call of its own (lib/provider/progress.c, docs/perf-log.md §14). Here the
 * test thread holds A's lease, so its passes read everything B sends: a
 * 100,000-byte Send (two frames of 16 KiB or more) and a 64-byte one. */
START_TEST(t_thread_counts_small_frames_apart)
{
    qp_pair_up();
    enum { BIG = 100000, SMALL = 64 };
    uint8_t *src = malloc(BIG), *big = calloc(1, BIG), small[SMALL];
    qp_fill(src, BIG, 9);
    ck_assert_int_eq(emu_qp_post_recv(A.qp, 1, 1, &(struct emu_sge){big, BIG}), 0);
    ck_assert_int_eq(emu_qp_post_recv(A.qp, 2, 1, &(struct emu_sge){small, SMALL}), 0);
    hold_a_lease();
    uint64_t f0 = emu_qp_thread_rx_fpdus(), s0 = emu_qp_thread_rx_small_fpdus();
    ck_assert_int_eq(qp_post_send(&B, 1, src, BIG, 0), 0);
    ck_assert_int_eq(qp_post_send(&B, 2, src, SMALL, 0), 0);
    uint64_t t0 = emu_now_us();
    while (qp_get_nr(&A) < 2 && emu_now_us() - t0 < 5000000) {
        emu_qp_poll_lease(A.qp, 1000000, emu_now_us());
        emu_qp_progress(A.qp);
        emu_qp_poll_pass_end();
    }
    ck_assert_int_eq(qp_get_nr(&A), 2);
    ck_assert_int_eq(memcmp(big, src, BIG), 0);
    ck_assert_int_eq(memcmp(small, src, SMALL), 0);
    uint64_t frames = emu_qp_thread_rx_fpdus() - f0, small_frames = emu_qp_thread_rx_small_fpdus() - s0;
    ck_assert_uint_ge(small_frames, 1); /* the 64-byte Send (and any probe) */
    ck_assert_uint_eq(frames - small_frames, 2); /* the large Send's two frames */
    free(src);
    free(big);
    qp_pair_down();
}
END_TEST

START_TEST(t_posts_held_for_one_write)
{
    ib_pair_up(EMU_CRC_OFF); /* a Send completes once the peer confirms it: unfinished meanwhile */
    enum { N = 27 };
    static uint8_t src[N][64], dst[N + 1][64], in[64];
    for (int i = 0; i < N; i++) {
        qp_fill(src[i], 64, 100u + (unsigned)i);
        ck_assert_int_eq(emu_qp_post_recv(B.qp, (uint64_t)i, 1, &(struct emu_sge){dst[i], 64}), 0);
    }
    lease_a_to_test_thread(in, sizeof in);
    qp_stall(&B); /* nothing is confirmed from now on */

    uint64_t w0 = tx_writes(&A), h0 = held_posts(&A);
    for (int i = 0; i < 4; i++) /* the first four go at once, one write each */
        ck_assert_int_eq(qp_post_send(&A, (uint64_t)i, src[i], 64, 0), 0);
    ck_assert_uint_eq(tx_writes(&A) - w0, 4);
    for (int i = 4; i < 19; i++) /* behind 4 unfinished: held */
        ck_assert_int_eq(qp_post_send(&A, (uint64_t)i, src[i], 64, 0), 0);
    ck_assert_uint_eq(tx_writes(&A) - w0, 4);
    ck_assert_uint_eq(held_posts(&A) - h0, 15);
    ck_assert_int_eq(qp_post_send(&A, 19, src[19], 64, 0), 0); /* the 16th sends all */
    ck_assert_uint_eq(tx_writes(&A) - w0, 5);

    for (int i = 20; i < 23; i++)
        ck_assert_int_eq(qp_post_send(&A, (uint64_t)i, src[i], 64, 0), 0);
    ck_assert_uint_eq(tx_writes(&A) - w0, 5);
    emu_qp_progress(A.qp); /* the consumer's next pass sends them */
    ck_assert_uint_eq(tx_writes(&A) - w0, 6);

    /* Another thread's post is not held: the lease holder might be asleep. */
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, post_from_thread, src[23]), 0);
    ck_assert_int_eq(pthread_join(th, NULL), 0);
    ck_assert_uint_eq(tx_writes(&A) - w0, 7);
    ck_assert_uint_eq(held_posts(&A) - h0, 18);

    for (int i = 24; i < N; i++)
        ck_assert_int_eq(qp_post_send(&A, (uint64_t)i, src[i], 64, 0), 0);
    ck_assert_uint_eq(tx_writes(&A) - w0, 7);
    /* No more calls from A's thread: the engine sends them at the end of
     * the lease (a kick stands in for its timer: the lease's second half
     * need not be waited out). */
    emu_qp_poll_trim(A.qp, emu_now_us());
    for (int i = 0; i < 5000 && tx_writes(&A) - w0 < 8; i++)
        usleep(1000);
    ck_assert_uint_eq(tx_writes(&A) - w0, 8);

    qp_unstall();
    ck_assert(QP_WAIT_FOR(&B, B.nr >= N));
    ck_assert(QP_WAIT_FOR(&A, A.ns >= N));
    for (int i = 0; i < N; i++) {
        ck_assert_uint_eq(B.rcq[i].cookie, (uint64_t)i);
        ck_assert_int_eq(memcmp(dst[i], src[i], 64), 0);
        ck_assert_uint_eq(A.scq[i].cookie, (uint64_t)i);
        ck_assert_int_eq(A.scq[i].status, EMU_WC_SUCCESS);
    }
    qp_pair_down();
}
END_TEST

/* InfiniBand semantics: the answer to a probe that a consumer's pass reads
 * (typically with the peer's reply) confirms our Sends only after that
 * pass: at the thread's next pass, or right after its next post has left,
 * or when the QP is flushed (successfully: the peer placed them). The
 * reply reaches the application first. */
START_TEST(t_confirmation_after_the_pass)
{
    ib_pair_up(EMU_CRC_OFF);
    static uint8_t src[3][64], dst[3][64], in[64];
    for (int i = 0; i < 3; i++) {
        qp_fill(src[i], 64, 7u + (unsigned)i);
        ck_assert_int_eq(emu_qp_post_recv(B.qp, (uint64_t)i, 1, &(struct emu_sge){dst[i], 64}), 0);
    }
    lease_a_to_test_thread(in, sizeof in);
    emu_qp_progress(A.qp); /* B's message */
    ck_assert_int_eq(qp_get_nr(&A), 1);

    /* 1. the next pass */
    ck_assert_int_eq(qp_post_send(&A, 0, src[0], 64, 0), 0);
    ck_assert(QP_WAIT_FOR(&B, B.nr >= 1));
    usleep(20000); /* B's engine answered the probe at once */
    emu_qp_progress(A.qp);
    ck_assert_int_eq(qp_get_ns(&A), 0); /* read, not yet reported */
    emu_qp_progress(A.qp);
    ck_assert_int_eq(qp_get_ns(&A), 1);
    ck_assert_uint_eq(A.scq[0].cookie, 0);
    ck_assert_int_eq(A.scq[0].status, EMU_WC_SUCCESS);

    /* 2. the next post, once its bytes left */
    ck_assert_int_eq(qp_post_send(&A, 1, src[1], 64, 0), 0);
    ck_assert(QP_WAIT_FOR(&B, B.nr >= 2));
    usleep(20000);
    emu_qp_progress(A.qp);
    ck_assert_int_eq(qp_get_ns(&A), 1);
    ck_assert_int_eq(qp_post_send(&A, 2, src[2], 64, 0), 0);
    ck_assert_int_eq(qp_get_ns(&A), 2);
    ck_assert_uint_eq(A.scq[1].cookie, 1);
    ck_assert_int_eq(A.scq[1].status, EMU_WC_SUCCESS);

    /* 3. a flush: the peer placed it, so it succeeded */
    ck_assert(QP_WAIT_FOR(&B, B.nr >= 3));
    usleep(20000);
    emu_qp_progress(A.qp);
    ck_assert_int_eq(qp_get_ns(&A), 2);
    emu_qp_flush(A.qp);
    ck_assert_int_eq(qp_get_ns(&A), 3);
    ck_assert_uint_eq(A.scq[2].cookie, 2);
    ck_assert_int_eq(A.scq[2].status, EMU_WC_SUCCESS);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(memcmp(dst[i], src[i], 64), 0);
    qp_pair_down();
}
END_TEST

/* The same answer read by a pass while nobody holds a lease (the engine
 * not parked) confirms at once. Left for the thread's next pass, it waited
 * for a thread that may be on its way to a condition variable, and the
 * engine found no bytes to look again: dapltest's two threads each waited
 * for the other's next message (emu-datapath.md, "Completion means
 * placement"). A's engine is held, so that A's pass is what reads the
 * answer; once let go, it finds nothing to read. */
START_TEST(t_confirmation_without_lease_at_once)
{
    ib_pair_up(EMU_CRC_OFF);
    static uint8_t src[64], dst[64];
    qp_fill(src, sizeof src, 11);
    ck_assert_int_eq(emu_qp_post_recv(B.qp, 0, 1, &(struct emu_sge){dst, sizeof dst}), 0);
    qp_stall(&A);
    uint64_t p0 = stats_of(&B).tx_fpdus;
    ck_assert_int_eq(qp_post_send(&A, 0, src, sizeof src, 0), 0);
    ck_assert(QP_WAIT_FOR(&B, B.nr >= 1));
    for (int i = 0; i < 2000 && stats_of(&B).tx_fpdus == p0; i++)
        usleep(1000);
    ck_assert_uint_gt(stats_of(&B).tx_fpdus, p0);
    usleep(20000); /* the answer is in A's socket */
    ck_assert_int_eq(qp_get_ns(&A), 0);
    emu_qp_progress(A.qp);
    int sent = qp_get_ns(&A);
    qp_unstall();
    ck_assert_int_eq(sent, 1); /* in the pass that read it */
    ck_assert_uint_eq(A.scq[0].cookie, 0);
    ck_assert_int_eq(A.scq[0].status, EMU_WC_SUCCESS);
    ck_assert_int_eq(memcmp(dst, src, sizeof src), 0);
    qp_pair_down();
}
END_TEST

/* A's first n send completions: cookies 0..n-1 in order, all successful. */
static void assert_sent_in_order(int n)
{
    for (int i = 0; i < n; i++) {
        ck_assert_uint_eq(A.scq[i].cookie, (uint64_t)i);
        ck_assert_int_eq(A.scq[i].status, EMU_WC_SUCCESS);
    }
}

static uint64_t probes_sent(struct qp_side *s)
{
    return stats_of(s).placement_probes;
}

/* InfiniBand semantics with suppressed completions (EMU_WR_QUIET): while
 * the application polls (A's lease, its engine parked), a Send nobody
 * waits for carries no placement probe. The next Send that is waited for
 * brings one, which confirms every Send before it, in order; probes only
 * quiet Sends wait for go at a pass QP_PROBE_DEFER_US later, or at once
 * when the thread is about to sleep (emu_qp_sleep_fd); a graceful
 * disconnect sends one at once. Without the lease (nobody polls) the
 * engine's timer is the bound (t_engine_bounds_an_owed_probe). */
START_TEST(t_quiet_sends_wait_for_a_wanted_probe)
{
    ib_pair_up(EMU_CRC_OFF);
    enum { N = 12 };
    static uint8_t src[64], dst[N][64], in[64];
    qp_fill(src, sizeof src, 5);
    for (int i = 0; i < N; i++)
        ck_assert_int_eq(emu_qp_post_recv(B.qp, (uint64_t)i, 1, &(struct emu_sge){dst[i], 64}), 0);

    /* Nobody polls: the engine's timer sends the probe (t_engine_bounds_an_owed_probe). */
    uint64_t p0 = probes_sent(&A);
    ck_assert_int_eq(qp_post_send(&A, 0, src, 64, EMU_WR_QUIET), 0);
    ck_assert(QP_WAIT_FOR(&A, A.ns >= 1));
    ck_assert_uint_eq(probes_sent(&A), p0 + 1);

    /* Polled: three quiet Sends leave without a probe and stay unconfirmed. */
    lease_a_to_test_thread(in, sizeof in);
    emu_qp_progress(A.qp); /* B's message */
    uint64_t p1 = probes_sent(&A);
    for (int i = 1; i <= 3; i++)
        ck_assert_int_eq(qp_post_send(&A, (uint64_t)i, src, 64, EMU_WR_QUIET), 0);
    ck_assert_uint_eq(probes_sent(&A), p1);
    ck_assert(QP_WAIT_FOR(&B, B.nr >= 4));
    ck_assert_uint_eq(probes_sent(&A), p1); /* no pass of A's since: still owed */
    ck_assert_int_eq(qp_get_ns(&A), 1);

    /* A wanted Send: one probe confirms all four, in post order. */
    ck_assert_int_eq(qp_post_send(&A, 4, src, 64, 0), 0);
    ck_assert_uint_eq(probes_sent(&A), p1 + 1);
    ck_assert(QP_WAIT_FOR(&B, B.nr >= 5));
    for (int i = 0; i < 50 && qp_get_ns(&A) < 5; i++) {
        usleep(2000);
        emu_qp_progress(A.qp);
    }
    ck_assert_int_eq(qp_get_ns(&A), 5);
    assert_sent_in_order(5);

    /* Owed: a pass within QP_PROBE_DEFER_US leaves it, a later one sends it. */
    emu_qp_poll_lease(A.qp, 1000000, emu_now_us());
    uint64_t t0 = emu_now_us();
    ck_assert_int_eq(qp_post_send(&A, 5, src, 64, EMU_WR_QUIET), 0);
    emu_qp_progress(A.qp);
    if (emu_now_us() - t0 < 150) /* not preempted past QP_PROBE_DEFER_US meanwhile */
        ck_assert_uint_eq(probes_sent(&A), p1 + 1);
    usleep(1000); /* > QP_PROBE_DEFER_US (200 us) */
    emu_qp_poll_lease(A.qp, 1000000, emu_now_us());
    emu_qp_progress(A.qp);
    ck_assert_uint_eq(probes_sent(&A), p1 + 2);
    ck_assert(QP_WAIT_FOR(&B, B.nr >= 6));
    for (int i = 0; i < 50 && qp_get_ns(&A) < 6; i++) {
        usleep(2000);
        emu_qp_progress(A.qp);
    }
    ck_assert_int_eq(qp_get_ns(&A), 6);

    /* About to sleep: sent at once. */
    ck_assert_int_eq(qp_post_send(&A, 6, src, 64, EMU_WR_QUIET), 0);
    ck_assert_uint_eq(probes_sent(&A), p1 + 2);
    ck_assert_int_ge(emu_qp_sleep_fd(A.qp, emu_now_us() + 1000000), 0);
    ck_assert_uint_eq(probes_sent(&A), p1 + 3);
    emu_qp_poll_lease(A.qp, 1000000, emu_now_us());

    /* A graceful disconnect: probed at once, confirmed, nothing flushed. */
    ck_assert_int_eq(qp_post_send(&A, 7, src, 64, EMU_WR_QUIET), 0);
    ck_assert(QP_WAIT_FOR(&B, B.nr >= 8));
    ck_assert_int_eq(emu_qp_disconnect(A.qp, true), 0);
    ck_assert_uint_eq(probes_sent(&A), p1 + 4);
    for (int i = 0; i < 500 && qp_get_ns(&A) < 8; i++) {
        usleep(2000);
        emu_qp_progress(A.qp);
    }
    ck_assert_int_eq(qp_get_ns(&A), 8);
    assert_sent_in_order(8);
    for (int i = 0; i < 8; i++)
        ck_assert_int_eq(memcmp(dst[i], src, 64), 0);
    qp_pair_down();
}
END_TEST

/* The engine (nobody polls) keeps a placement probe's answer for the
 * reply of a QP that posts (a ping-pong with blocking waits): the reply's
 * write carries it. Without a reply it still leaves, QP_DEFER_ENGINE_US
 * (100 us) later, and the prober's Send completes. */
START_TEST(t_engine_keeps_probe_answer_for_the_reply)
{
    ib_pair_up(EMU_CRC_OFF);
    static uint8_t src[64], a_dst[4][64], b_dst[4][64];
    qp_fill(src, sizeof src, 7);
    for (int i = 0; i < 4; i++) {
        ck_assert_int_eq(emu_qp_post_recv(A.qp, (uint64_t)i, 1, &(struct emu_sge){a_dst[i], 64}), 0);
        ck_assert_int_eq(emu_qp_post_recv(B.qp, (uint64_t)i, 1, &(struct emu_sge){b_dst[i], 64}), 0);
    }

    /* No reply: B posted a moment before A's Send came, then stays silent. */
    qp_stall(&B);
    ck_assert_int_eq(qp_post_send(&A, 0, src, 64, 0), 0); /* signalled: its probe goes with it */
    ck_assert_int_eq(qp_post_send(&B, 100, src, 64, 0), 0);
    qp_unstall();
    ck_assert(QP_WAIT_FOR(&A, A.ns >= 1 && A.nr >= 1));
    ck_assert_int_eq(A.scq[0].status, EMU_WC_SUCCESS);
    ck_assert(QP_WAIT_FOR(&B, B.ns >= 1 && B.nr >= 1));

    /* A reply at once: one write of B's carries it and the answer. */
    qp_stall(&B);
    ck_assert_int_eq(qp_post_send(&B, 101, src, 64, 0), 0); /* B posts: it replies */
    uint64_t tb = emu_now_us();
    ck_assert(QP_WAIT_FOR(&A, A.nr >= 2));
    ck_assert_int_eq(qp_post_send(&A, 1, src, 64, 0), 0);
    uint64_t w0 = tx_writes(&B);
    uint64_t t0 = emu_now_us();
    qp_unstall();
    while (qp_get_nr(&B) < 2 && emu_now_us() - t0 < 2000000)
        ;
    ck_assert_int_eq(qp_get_nr(&B), 2);
    uint64_t t1 = emu_now_us();
    ck_assert_int_eq(qp_post_send(&B, 102, src, 64, 0), 0);
    /* The engine kept the answer only if B had posted within
     * QP_DEFER_RECENT_US (200 us) when it read A's Send (by t1; a loaded
     * host can take longer from B's post to there, and the engine then
     * answers at once, in a write of its own), and the reply came within
     * QP_DEFER_ENGINE_US (100 us) of the keep. */
    bool prompt = t1 - tb < 200 && emu_now_us() - t0 < 80;
    ck_assert(QP_WAIT_FOR(&A, A.ns >= 2 && A.nr >= 3));
    ck_assert_int_eq(A.scq[1].status, EMU_WC_SUCCESS);
    if (prompt)
        ck_assert_uint_eq(tx_writes(&B) - w0, 1);
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(memcmp(b_dst[i], src, 64), 0);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(memcmp(a_dst[i], src, 64), 0);
    qp_pair_down();
}
END_TEST

/* An abrupt close right after quiet Sends whose probe was kept back for a
 * later post (nothing came) sends that probe and waits for its answer
 * (emu_qp_quiesce), as an HCA's acknowledgments of those messages would
 * long have come: a program that closes right after the reply to its last
 * suppressed Send (dtest) sees it succeed, not flushed. */
START_TEST(t_abrupt_close_confirms_quiet_sends)
{
    ib_pair_up(EMU_CRC_OFF);
    static uint8_t src[64], dst[2][64], in[64];
    qp_fill(src, sizeof src, 11);
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(emu_qp_post_recv(B.qp, (uint64_t)i, 1, &(struct emu_sge){dst[i], 64}), 0);
    lease_a_to_test_thread(in, sizeof in);
    emu_qp_progress(A.qp); /* B's message */
    uint64_t p1 = probes_sent(&A);
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(qp_post_send(&A, (uint64_t)i, src, 64, EMU_WR_QUIET), 0);
    ck_assert(QP_WAIT_FOR(&B, B.nr >= 2));
    ck_assert_uint_eq(probes_sent(&A), p1); /* owed */
    ck_assert_int_eq(emu_qp_disconnect(A.qp, false), 0);
    ck_assert_uint_eq(probes_sent(&A), p1 + 1);
    ck_assert_int_eq(qp_get_ns(&A), 2);
    assert_sent_in_order(2);
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(memcmp(dst[i], src, 64), 0);
    qp_pair_down();
}
END_TEST

/* Doorbell batching counts what is in flight: WRs whose confirmation a
 * pass has just read (with the reply the next post answers) are not. So
 * the reply that follows a burst of quiet Sends and one wanted one leaves
 * at once, not at the thread's next pass. */
START_TEST(t_post_after_confirming_reply_not_held)
{
    ib_pair_up(EMU_CRC_OFF);
    enum { N = 6 };
    static uint8_t src[64], dst[N + 1][64], in[64];
    qp_fill(src, sizeof src, 9);
    for (int i = 0; i <= N; i++)
        ck_assert_int_eq(emu_qp_post_recv(B.qp, (uint64_t)i, 1, &(struct emu_sge){dst[i], 64}), 0);
    lease_a_to_test_thread(in, sizeof in);
    emu_qp_progress(A.qp); /* B's message */
    for (int i = 0; i < N; i++) /* 5 quiet, the last wanted: one probe for all */
        ck_assert_int_eq(qp_post_send(&A, (uint64_t)i, src, 64, i < N - 1 ? EMU_WR_QUIET : 0), 0);
    ck_assert(QP_WAIT_FOR(&B, B.nr >= N));
    usleep(20000); /* B's engine answered the probe */
    emu_qp_progress(A.qp); /* reads the answer: confirmation owed */
    ck_assert_int_eq(qp_get_ns(&A), 0);
    uint64_t w0 = tx_writes(&A), h0 = held_posts(&A);
    ck_assert_int_eq(qp_post_send(&A, N, src, 64, 0), 0);
    ck_assert_uint_eq(tx_writes(&A), w0 + 1);
    ck_assert_uint_eq(held_posts(&A), h0);
    ck_assert_int_eq(qp_get_ns(&A), N); /* confirmed once the post's bytes left */
    assert_sent_in_order(N);
    ck_assert(QP_WAIT_FOR(&B, B.nr >= N + 1));
    qp_pair_down();
}
END_TEST

/* A consumer pass over one QP whose send side waits for room (a large
 * transfer to a peer that does not read) asks poll(2) about both
 * directions at once: with nothing to read it runs no receive side (no
 * recv(2), which takes the socket lock the peer's ACKs need), where it
 * used to run one on every pass. */
START_TEST(t_waiting_sender_passes_poll_once)
{
    qp_pair_up();
    enum { W = 1 << 20, N = 24 };
    uint8_t *src = malloc(W), *dst = malloc(W);
    qp_fill(src, W, 21);
    struct emu_mr *mr;
    uint32_t stag = qp_reg(&B, dst, W, B.pz, EMU_ACC_LOCAL_WRITE | EMU_ACC_REMOTE_WRITE, &mr);
    static uint8_t in[64], out[64];
    ck_assert_int_eq(emu_qp_post_recv(B.qp, 1, 1, &(struct emu_sge){in, sizeof in}), 0);
    qp_stall(&B); /* B reads nothing: A's socket fills */
    for (int i = 0; i < N; i++)
        ck_assert_int_eq(qp_post_rdma(&A, EMU_WR_WRITE, (uint64_t)i, src, W, stag, (uintptr_t)dst, 0), 0);
    /* Its receive proves every Write before it placed (stream order). */
    ck_assert_int_eq(qp_post_send(&A, N, out, sizeof out, 0), 0);
    struct emu_qp_stats st0, st1;
    uint64_t w = 0;
    for (int i = 0; i < 200; i++) { /* until A's writes stop: it waits for room */
        usleep(5000);
        emu_qp_get_stats(A.qp, &st0);
        if (i > 0 && st0.tx_writes == w)
            break;
        w = st0.tx_writes;
    }
    ck_assert_uint_lt(st0.tx_bytes, (uint64_t)N * W);
    for (int i = 0; i < 100; i++)
        emu_qp_progress_many(&A.qp, 1);
    emu_qp_get_stats(A.qp, &st1);
    /* Every 1024th pass looks at everything whatever poll says. */
    ck_assert_uint_le(st1.consumer_rx_runs - st0.consumer_rx_runs, 1);
    qp_unstall();
    ck_assert(QP_WAIT_FOR(&A, A.ns >= N + 1));
    ck_assert(QP_WAIT_FOR(&B, B.nr >= 1));
    for (int i = 0; i <= N; i++)
        ck_assert_int_eq(A.scq[i].status, EMU_WC_SUCCESS);
    ck_assert_int_eq(B.rcq[0].status, EMU_WC_SUCCESS);
    written_then_down(src, dst, W, mr);
}
END_TEST


/* A Read Request is answered when the bytes read with it are processed:
 * requests that arrived together get their responses in one writev. */
START_TEST(t_read_responses_share_a_write)
{
    qp_pair_up_cfg(&qp_defcfg, &qp_defcfg, EMU_CRC_OFF);
    enum { N = 8, L = 256 };
    uint8_t *src = malloc(N * L), *dst = calloc(N, L);
    qp_fill(src, N * L, 55);
    struct emu_mr *mr;
    uint32_t stag = qp_reg(&B, src, N * L, B.pz, EMU_ACC_REMOTE_READ, &mr);
    qp_stall(&B); /* the requests pile up in B's socket */
    uint64_t w0 = tx_writes(&B);
    for (int i = 0; i < N; i++)
        ck_assert_int_eq(qp_post_rdma(&A, EMU_WR_READ, (uint64_t)i, dst + i * L, L, stag,
                                      (uintptr_t)src + (uint64_t)i * L, 0),
                         0);
    usleep(20000);
    qp_unstall();
    ck_assert(QP_WAIT_FOR(&A, A.ns >= N));
    ck_assert_uint_eq(tx_writes(&B) - w0, 1);
    for (int i = 0; i < N; i++) {
        ck_assert_int_eq(A.scq[i].status, EMU_WC_SUCCESS);
        ck_assert_uint_eq(A.scq[i].cookie, (uint64_t)i);
    }
    ck_assert_int_eq(memcmp(src, dst, N * L), 0);
    emu_mem_mr_free(mr, 1000);
    free(src);
    free(dst);
    qp_pair_down();
}
END_TEST

/* The bound of a probe only quiet WRs wait for when nobody polls (the
 * engine drives both sides): QP_PROBE_DEFER_ENGINE_US (emu/qp_internal.h). */
#define ENGINE_PROBE_BOUND_US 1000u

/* InfiniBand semantics, nobody polls (a blocking program; the engines
 * place everything): a quiet Send leaves without a placement probe, and
 * with no further traffic at all the engine's timer sends the probe
 * QP_PROBE_DEFER_ENGINE_US after the post, which confirms the Send. In an
 * engine-driven ping-pong of quiet Sends with every 8th signalled, only
 * the signalled ones carry probes (and at most one more per bound of time
 * the run took): each message carried one before, three FPDUs a message
 * with its answer. Every Send completes successfully, in order. */
START_TEST(t_engine_bounds_an_owed_probe)
{
    ib_pair_up(EMU_CRC_OFF);
    enum { N = 64, EVERY = 8 };
    static uint8_t src[64], adst[N][64], bdst[N + 1][64];
    qp_fill(src, sizeof src, 9);
    for (int i = 0; i <= N; i++)
        ck_assert_int_eq(emu_qp_post_recv(B.qp, (uint64_t)i, 1, &(struct emu_sge){bdst[i], 64}), 0);
    for (int i = 0; i < N; i++)
        ck_assert_int_eq(emu_qp_post_recv(A.qp, (uint64_t)i, 1, &(struct emu_sge){adst[i], 64}), 0);

    /* One quiet Send, then silence: the timer's probe. */
    uint64_t p0 = probes_sent(&A);
    uint64_t t0 = emu_now_us();
    ck_assert_int_eq(qp_post_send(&A, 0, src, 64, EMU_WR_QUIET), 0);
    if (emu_now_us() - t0 < ENGINE_PROBE_BOUND_US / 2) /* not preempted past the bound meanwhile */
        ck_assert_uint_eq(probes_sent(&A), p0);
    ck_assert(QP_WAIT_FOR(&B, B.nr >= 1));
    ck_assert(QP_WAIT_FOR(&A, A.ns >= 1));
    uint64_t waited = emu_now_us() - t0;
    ck_assert_msg(waited >= ENGINE_PROBE_BOUND_US - 50, "confirmed after %llu us: sent before the bound",
                  (unsigned long long)waited);
    ck_assert_uint_eq(probes_sent(&A), p0 + 1);
    ck_assert_uint_eq(A.scq[0].cookie, 0);
    ck_assert_int_eq(A.scq[0].status, EMU_WC_SUCCESS);

    /* An engine-driven ping-pong: A's Sends quiet but every 8th, B's replies quiet. */
    uint64_t p1 = probes_sent(&A), b1 = probes_sent(&B);
    uint64_t t1 = emu_now_us();
    for (int i = 1; i <= N; i++) {
        uint32_t fl = i % EVERY == 0 ? 0 : EMU_WR_QUIET;
        ck_assert_int_eq(qp_post_send(&A, (uint64_t)i, src, 64, fl), 0);
        ck_assert(QP_WAIT_FOR(&B, B.nr >= i + 1));
        ck_assert_int_eq(qp_post_send(&B, (uint64_t)i, src, 64, EMU_WR_QUIET), 0);
        ck_assert(QP_WAIT_FOR(&A, A.nr >= i));
    }
    uint64_t took_us = emu_now_us() - t1;
    uint64_t a_probes = probes_sent(&A) - p1, b_probes = probes_sent(&B) - b1;
    uint64_t by_time = took_us / ENGINE_PROBE_BOUND_US + 1;
    ck_assert_msg(a_probes <= N / EVERY + by_time, "A: %llu probes for %d Sends (%d signalled) in %llu us",
                  (unsigned long long)a_probes, N, N / EVERY, (unsigned long long)took_us);
    ck_assert_msg(b_probes <= by_time, "B: %llu probes for %d quiet Sends in %llu us",
                  (unsigned long long)b_probes, N, (unsigned long long)took_us);
    /* Every Send is confirmed (the last of A's is signalled, B's last
     * probe goes by the timer), in post order. */
    ck_assert(QP_WAIT_FOR(&A, A.ns >= N + 1));
    ck_assert(QP_WAIT_FOR(&B, B.ns >= N));
    assert_sent_in_order(N + 1);
    for (int i = 0; i < N; i++) {
        ck_assert_uint_eq(B.scq[i].cookie, (uint64_t)(i + 1));
        ck_assert_int_eq(B.scq[i].status, EMU_WC_SUCCESS);
    }
    for (int i = 0; i <= N; i++)
        ck_assert_int_eq(memcmp(bdst[i], src, 64), 0);
    for (int i = 0; i < N; i++)
        ck_assert_int_eq(memcmp(adst[i], src, 64), 0);
    qp_pair_down();
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("emu_qp_poll");
    TCase *tc = tcase_create("poll");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, t_probes_batch_small_messages);
    tcase_add_test(tc, t_probe_not_held_behind_large_write);
    tcase_add_test(tc, t_progress_many);
    tcase_add_test(tc, t_progress_skips_once_after_read);
    tcase_add_test(tc, t_lease_engine_looks_back_off);
    tcase_add_test(tc, t_thread_counts_small_frames_apart);
    tcase_add_test(tc, t_posts_held_for_one_write);
    tcase_add_test(tc, t_confirmation_after_the_pass);
    tcase_add_test(tc, t_confirmation_without_lease_at_once);
    tcase_add_test(tc, t_quiet_sends_wait_for_a_wanted_probe);
    tcase_add_test(tc, t_engine_bounds_an_owed_probe);
    tcase_add_test(tc, t_engine_keeps_probe_answer_for_the_reply);
    tcase_add_test(tc, t_abrupt_close_confirms_quiet_sends);
    tcase_add_test(tc, t_post_after_confirming_reply_not_held);
    tcase_add_test(tc, t_waiting_sender_passes_poll_once);
    tcase_add_test(tc, t_read_responses_share_a_write);
    suite_add_tcase(s, tc);
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
