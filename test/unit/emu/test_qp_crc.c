/* emu/qp with MPA CRC32c on, while the memory behind the wire bytes keeps
 * changing: the responder's application writes into a region the peer
 * RDMA-Reads (legal: the Read returns undefined data), and the target's
 * application writes into a region the peer RDMA-Writes. Either way the
 * stream must stay intact: the CRC of every FPDU must match the bytes on
 * the wire, and no CRC error may break the connection.
 *
 * The writer is a forked process hammering a shared mapping: it models
 * "the application" without a data race the sanitizers would (rightly)
 * report inside this process, and it is bounded in time. */
#include "emu/conn.h"
#include "emu/engine.h"
#include "emu/mem.h"
#include "emu/qp.h"

#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "test/lib/qp_pair.h"

/* A pair with CRC mode crc (negotiated as asked): small receive queues,
 * room for 512 outstanding requests. */
static void crc_pair_up(enum emu_crc_mode crc)
{
    static const struct qpcfg cfg = {.sq = 512, .rq = 16, .sge = 2, .ird = 8, .ord = 8};
    qp_pair_up_cfg(&cfg, &cfg, crc);
    struct emu_conn_info ia;
    ck_assert_int_eq(emu_conn_get_info(A.c, &ia), 0);
    ck_assert_int_eq(ia.crc, crc == EMU_CRC_ON);
}

/* ---- the "application" writer: another process, on a shared mapping ---- */

struct shared {
    atomic_int stop;
    atomic_int started;
    uint8_t data[];
};

static pid_t writer_start(struct shared *sh, size_t len)
{
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        /* Bounded: stops when told, or after 60 s whatever happens. */
        time_t end = time(NULL) + 60;
        atomic_store(&sh->started, 1);
        uint32_t v = 1;
        while (!atomic_load_explicit(&sh->stop, memory_order_relaxed) && time(NULL) < end) {
            volatile uint32_t *w = (volatile uint32_t *)sh->data;
            for (size_t i = 0; i < len / 4; i++)
                w[i] = v + (uint32_t)i;
            v++;
        }
        _exit(0);
    }
    for (int i = 0; i < 5000 && !atomic_load(&sh->started); i++)
        usleep(1000);
    ck_assert_int_eq(atomic_load(&sh->started), 1);
    return pid;
}

static void writer_stop(struct shared *sh, pid_t pid)
{
    atomic_store(&sh->stop, 1);
    int st = 0;
    for (int i = 0; i < 5000; i++) {
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid)
            return;
        usleep(1000);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
}

static struct shared *shared_map(size_t len)
{
    void *p = mmap(NULL, sizeof(struct shared) + len, PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    ck_assert(p != MAP_FAILED);
    return p;
}

static void assert_no_break(void)
{
    qp_lock(&A);
    bool fa = A.fatal;
    int ta = A.terminal;
    struct emu_qp_fatal f = A.f;
    qp_unlock(&A);
    qp_lock(&B);
    bool fb = B.fatal;
    int tb = B.terminal;
    struct emu_qp_fatal g = B.f;
    qp_unlock(&B);
    if (fa)
        fprintf(stderr, "A fatal: remote %d err %d term %u/%u/%u\n", f.remote, f.err,
                f.term.layer, f.term.etype, f.term.ecode);
    if (fb)
        fprintf(stderr, "B fatal: remote %d err %d term %u/%u/%u\n", g.remote, g.err,
                g.term.layer, g.term.etype, g.term.ecode);
    ck_assert_msg(!fa && !fb, "connection failed (A fatal %d, B fatal %d)", fa, fb);
    ck_assert_int_eq(ta, 0);
    ck_assert_int_eq(tb, 0);
}

/* ---------------------------------------------------------------- tests */

/* Rounds of RDMA operations while the writer runs: at least MIN_OPS and
 * MIN_MS (so the writer surely overlaps them, whatever the scheduling), at
 * most MAX_OPS. Returns how many completed SUCCESS; stops at the first
 * failure (post error, bad completion, timeout). */
enum { LEN = 200000, ROUND = 8, MIN_OPS = 200, MIN_MS = 1000, MAX_OPS = 4000 };

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int rounds(enum emu_wr_op op, void *local, uint32_t stag, void *remote)
{
    double t0 = now_ms();
    int ok = 0;
    while (ok < MAX_OPS && (ok < MIN_OPS || now_ms() - t0 < MIN_MS)) {
        qp_lock(&A);
        A.ns = 0;
        qp_unlock(&A);
        for (int i = 0; i < ROUND; i++)
            if (qp_post_rdma(&A, op, (uint64_t)i, local, LEN, stag, (uintptr_t)remote, 0) != 0)
                return ok;
        if (!QP_WAIT_LIVE(&A, A.ns >= ROUND))
            return ok;
        qp_lock(&A);
        for (int i = 0; i < ROUND; i++)
            if (A.scq[i].status == EMU_WC_SUCCESS && A.scq[i].byte_len == LEN)
                ok++;
        int ns = A.ns;
        qp_unlock(&A);
        if (ns != ROUND || ok % ROUND != 0)
            return ok;
    }
    return ok;
}

/* RDMA Reads of a region whose owner keeps writing into it: every Read
 * completes SUCCESS (data undefined), no CRC error, no Terminate. */
static void read_under_writer(enum emu_crc_mode crc)
{
    crc_pair_up(crc);
    struct shared *sh = shared_map(LEN);
    qp_fill(sh->data, LEN, 7);
    uint8_t *dst = malloc(LEN);
    struct emu_mr *smr;
    uint32_t stag = qp_reg(&B, sh->data, LEN, B.pz, EMU_ACC_LOCAL_READ | EMU_ACC_REMOTE_READ, &smr);
    pid_t pid = writer_start(sh, LEN);
    int ok = rounds(EMU_WR_READ, dst, stag, sh->data);
    writer_stop(sh, pid);
    assert_no_break();
    ck_assert_int_ge(ok, MIN_OPS);

    /* Writer gone: the next Read returns exactly the region. */
    memset(dst, 0, LEN);
    qp_lock(&A);
    A.ns = 0;
    qp_unlock(&A);
    ck_assert_int_eq(qp_post_rdma(&A, EMU_WR_READ, 999, dst, LEN, stag, (uintptr_t)sh->data, 0), 0);
    ck_assert(QP_WAIT_LIVE(&A, A.ns > 0));
    ck_assert_int_eq(A.scq[0].status, EMU_WC_SUCCESS);
    ck_assert_int_eq(memcmp(dst, sh->data, LEN), 0);
    assert_no_break();

    emu_mem_mr_free(smr, 1000);
    free(dst);
    qp_pair_down();
    munmap(sh, sizeof *sh + LEN);
}

START_TEST(t_crc_read_source_changing) { read_under_writer(EMU_CRC_ON); }
END_TEST

START_TEST(t_nocrc_read_source_changing) { read_under_writer(EMU_CRC_OFF); }
END_TEST

/* RDMA Writes into a region whose owner keeps writing into it: the
 * receiver must not see a (false) CRC error. */
static void write_under_writer(enum emu_crc_mode crc)
{
    crc_pair_up(crc);
    struct shared *sh = shared_map(LEN);
    uint8_t *src = malloc(LEN);
    qp_fill(src, LEN, 11);
    struct emu_mr *tmr;
    uint32_t stag = qp_reg(&B, sh->data, LEN, B.pz,
                        EMU_ACC_LOCAL_WRITE | EMU_ACC_REMOTE_WRITE | EMU_ACC_REMOTE_READ, &tmr);
    pid_t pid = writer_start(sh, LEN);
    int ok = rounds(EMU_WR_WRITE, src, stag, sh->data);
    /* A Read behind the last Writes: all of them were received and checked. */
    uint8_t *back = malloc(LEN);
    qp_lock(&A);
    A.ns = 0;
    qp_unlock(&A);
    int prc = qp_post_rdma(&A, EMU_WR_READ, 999, back, LEN, stag, (uintptr_t)sh->data, 0);
    bool rd = prc == 0 && QP_WAIT_LIVE(&A, A.ns > 0);
    writer_stop(sh, pid);
    assert_no_break();
    ck_assert_int_ge(ok, MIN_OPS);
    ck_assert(rd);
    ck_assert_int_eq(A.scq[0].status, EMU_WC_SUCCESS);
    emu_mem_mr_free(tmr, 1000);
    free(back);
    free(src);
    qp_pair_down();
    munmap(sh, sizeof *sh + LEN);
}

START_TEST(t_crc_write_target_changing) { write_under_writer(EMU_CRC_ON); }
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("emu_qp_crc");
    TCase *tc = tcase_create("crc");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, t_crc_read_source_changing);
    tcase_add_test(tc, t_nocrc_read_source_changing);
    tcase_add_test(tc, t_crc_write_target_changing);
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
