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

#define MAXC 1024
#define WAIT_MS 20000

struct side {
    const char *name;
    struct emu_engine *e;
    struct emu_mem_table *mt;
    struct emu_pz *pz;
    struct emu_qp *qp;
    struct emu_conn *c;
    pthread_mutex_t m;
    pthread_cond_t cv;
    struct emu_cqe scq[MAXC];
    int ns, nr;
    int established, terminal;
    bool fatal;
    struct emu_qp_fatal f;
};

static void s_lock(struct side *s) { pthread_mutex_lock(&s->m); }
static void s_unlock(struct side *s)
{
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->m);
}

static void on_send_done(void *ctx, const struct emu_cqe *cqe)
{
    struct side *s = ctx;
    s_lock(s);
    if (s->ns < MAXC)
        s->scq[s->ns] = *cqe;
    s->ns++;
    s_unlock(s);
}

static void on_recv_done(void *ctx, const struct emu_cqe *cqe)
{
    (void)cqe;
    struct side *s = ctx;
    s_lock(s);
    s->nr++;
    s_unlock(s);
}

static void on_fatal(void *ctx, const struct emu_qp_fatal *f)
{
    struct side *s = ctx;
    s_lock(s);
    s->fatal = true;
    s->f = *f;
    s_unlock(s);
}

static const struct emu_qp_ops qops = {on_send_done, on_recv_done, on_fatal};

static void on_event(struct emu_conn *c, const struct emu_conn_event *ev, void *ctx)
{
    struct side *s = ctx;
    if (ev->type == EMU_CONN_ESTABLISHED) {
        int rc = emu_qp_attach(s->qp, c, (uint64_t)(uintptr_t)c);
        s_lock(s);
        s->established = rc == 0 ? 1 : -1;
        s_unlock(s);
        return;
    }
    emu_qp_flush(s->qp);
    s_lock(s);
    s->terminal++;
    s_unlock(s);
}

static int on_rx(struct emu_conn *c, int fd, void *ctx)
{
    (void)c;
    return emu_qp_rx(((struct side *)ctx)->qp, fd);
}

static void on_tx(struct emu_conn *c, void *ctx)
{
    (void)c;
    emu_qp_tx(((struct side *)ctx)->qp);
}

static void on_detach(struct emu_conn *c, void *ctx)
{
    (void)c;
    emu_qp_detach(((struct side *)ctx)->qp);
}

static const struct emu_conn_ops cops = {.event = on_event, .rx = on_rx, .tx = on_tx,
                                         .detach = on_detach};

static struct emu_conn_params g_params;

static void on_request(struct emu_listener *l, const struct emu_conn_request *r, void *ctx)
{
    (void)l;
    struct side *s = ctx;
    s->c = r->conn;
    ck_assert_int_eq(emu_conn_accept(r->conn, &g_params, NULL, 0, &cops, s), 0);
}

static const struct emu_listener_ops lops = {.request = on_request};

static void deadline(struct timespec *ts, int ms)
{
    clock_gettime(CLOCK_REALTIME, ts);
    ts->tv_sec += ms / 1000;
    ts->tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000L;
    }
}

/* Wait until cond holds, or the peer connection ended, or WAIT_MS. */
#define WAIT_FOR(s, cond)                                                   \
    ({                                                                      \
        struct timespec ts_;                                                \
        deadline(&ts_, WAIT_MS);                                            \
        pthread_mutex_lock(&(s)->m);                                        \
        while (!(cond) && (s)->terminal == 0)                               \
            if (pthread_cond_timedwait(&(s)->cv, &(s)->m, &ts_) != 0)      \
                break;                                                      \
        bool ok_ = (cond);                                                  \
        pthread_mutex_unlock(&(s)->m);                                      \
        ok_;                                                                \
    })

static struct side A, B; /* A: active (client), B: passive (server) */
static struct emu_listener *g_lis;

static void side_setup(struct side *s, const char *name)
{
    memset(s, 0, sizeof *s);
    s->name = name;
    pthread_mutex_init(&s->m, NULL);
    pthread_cond_init(&s->cv, NULL);
    ck_assert_int_eq(emu_engine_create(name, &s->e), 0);
    struct emu_mem_limits lim = {.max_pzs = 2, .max_regions = 16, .max_windows = 4};
    ck_assert_int_eq(emu_mem_table_create(&lim, &s->mt), EMU_MEM_OK);
    ck_assert_int_eq(emu_mem_pz_create(s->mt, &s->pz), EMU_MEM_OK);
    struct emu_qp_attr a = {.mem = s->mt, .pz = s->pz, .max_send_wr = 512,
                            .max_recv_wr = 16, .max_sge = 2, .ird = 8, .ord = 8,
                            .ops = &qops, .ctx = s};
    ck_assert_int_eq(emu_qp_create(&a, &s->qp), 0);
}

static void pair_up(enum emu_crc_mode crc)
{
    side_setup(&A, "crcA");
    side_setup(&B, "crcB");
    struct sockaddr_in sin = {.sin_family = AF_INET};
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert_int_eq(emu_listener_create(B.e, (struct sockaddr *)&sin, sizeof sin, 0, &lops,
                                         &B, &g_lis),
                     0);
    sin.sin_port = htons(emu_listener_port(g_lis));
    struct emu_conn_params p = {.ird = 8, .ord = 8, .crc = crc};
    g_params = (struct emu_conn_params){.ird = 8, .ord = 8, .crc = crc};
    ck_assert_int_eq(emu_conn_connect(A.e, (struct sockaddr *)&sin, sizeof sin, NULL, 0, &p,
                                      NULL, 0, &cops, &A, &A.c),
                     0);
    ck_assert(WAIT_FOR(&A, A.established != 0));
    ck_assert(WAIT_FOR(&B, B.established != 0));
    ck_assert_int_eq(A.established, 1);
    ck_assert_int_eq(B.established, 1);
    struct emu_conn_info ia;
    ck_assert_int_eq(emu_conn_get_info(A.c, &ia), 0);
    ck_assert_int_eq(ia.crc, crc == EMU_CRC_ON);
}

static void side_teardown(struct side *s)
{
    if (s->c) {
        emu_qp_detach(s->qp);
        emu_conn_free(s->c);
    }
    emu_qp_destroy(s->qp);
    emu_engine_destroy(s->e);
    emu_mem_table_destroy(s->mt);
}

static void pair_down(void)
{
    emu_listener_free(g_lis);
    side_teardown(&A);
    side_teardown(&B);
}

static uint32_t reg(struct side *s, void *addr, uint64_t len, uint32_t acc, struct emu_mr **mr)
{
    uint32_t stag = 0;
    struct emu_mr_attr ma = {.addr = addr, .length = len, .pz = s->pz, .access = acc,
                             .va_type = EMU_VA_ABS};
    ck_assert_int_eq(emu_mem_mr_register(s->mt, &ma, mr, &stag), EMU_MEM_OK);
    return stag;
}

static void fill(uint8_t *p, size_t n, unsigned seed)
{
    uint32_t x = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) {
        x = x * 1103515245u + 12345u;
        p[i] = (uint8_t)(x >> 16);
    }
}

static int post_rdma(struct side *s, enum emu_wr_op op, uint64_t cookie, void *buf,
                     uint32_t len, uint32_t stag, uint64_t to)
{
    struct emu_sge sg = {buf, len};
    struct emu_wr wr = {.cookie = cookie, .op = op, .nsge = len ? 1 : 0, .sge = &sg,
                        .remote_stag = stag, .remote_to = to};
    return emu_qp_post_send(s->qp, &wr);
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
    s_lock(&A);
    bool fa = A.fatal;
    int ta = A.terminal;
    struct emu_qp_fatal f = A.f;
    s_unlock(&A);
    s_lock(&B);
    bool fb = B.fatal;
    int tb = B.terminal;
    struct emu_qp_fatal g = B.f;
    s_unlock(&B);
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
        s_lock(&A);
        A.ns = 0;
        s_unlock(&A);
        for (int i = 0; i < ROUND; i++)
            if (post_rdma(&A, op, (uint64_t)i, local, LEN, stag, (uintptr_t)remote) != 0)
                return ok;
        if (!WAIT_FOR(&A, A.ns >= ROUND))
            return ok;
        s_lock(&A);
        for (int i = 0; i < ROUND; i++)
            if (A.scq[i].status == EMU_WC_SUCCESS && A.scq[i].byte_len == LEN)
                ok++;
        int ns = A.ns;
        s_unlock(&A);
        if (ns != ROUND || ok % ROUND != 0)
            return ok;
    }
    return ok;
}

/* RDMA Reads of a region whose owner keeps writing into it: every Read
 * completes SUCCESS (data undefined), no CRC error, no Terminate. */
static void read_under_writer(enum emu_crc_mode crc)
{
    pair_up(crc);
    struct shared *sh = shared_map(LEN);
    fill(sh->data, LEN, 7);
    uint8_t *dst = malloc(LEN);
    struct emu_mr *smr;
    uint32_t stag = reg(&B, sh->data, LEN, EMU_ACC_LOCAL_READ | EMU_ACC_REMOTE_READ, &smr);
    pid_t pid = writer_start(sh, LEN);
    int ok = rounds(EMU_WR_READ, dst, stag, sh->data);
    writer_stop(sh, pid);
    assert_no_break();
    ck_assert_int_ge(ok, MIN_OPS);

    /* Writer gone: the next Read returns exactly the region. */
    memset(dst, 0, LEN);
    s_lock(&A);
    A.ns = 0;
    s_unlock(&A);
    ck_assert_int_eq(post_rdma(&A, EMU_WR_READ, 999, dst, LEN, stag, (uintptr_t)sh->data), 0);
    ck_assert(WAIT_FOR(&A, A.ns > 0));
    ck_assert_int_eq(A.scq[0].status, EMU_WC_SUCCESS);
    ck_assert_int_eq(memcmp(dst, sh->data, LEN), 0);
    assert_no_break();

    emu_mem_mr_free(smr, 1000);
    free(dst);
    pair_down();
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
    pair_up(crc);
    struct shared *sh = shared_map(LEN);
    uint8_t *src = malloc(LEN);
    fill(src, LEN, 11);
    struct emu_mr *tmr;
    uint32_t stag = reg(&B, sh->data, LEN,
                        EMU_ACC_LOCAL_WRITE | EMU_ACC_REMOTE_WRITE | EMU_ACC_REMOTE_READ, &tmr);
    pid_t pid = writer_start(sh, LEN);
    int ok = rounds(EMU_WR_WRITE, src, stag, sh->data);
    /* A Read behind the last Writes: all of them were received and checked. */
    uint8_t *back = malloc(LEN);
    s_lock(&A);
    A.ns = 0;
    s_unlock(&A);
    int prc = post_rdma(&A, EMU_WR_READ, 999, back, LEN, stag, (uintptr_t)sh->data);
    bool rd = prc == 0 && WAIT_FOR(&A, A.ns > 0);
    writer_stop(sh, pid);
    assert_no_break();
    ck_assert_int_ge(ok, MIN_OPS);
    ck_assert(rd);
    ck_assert_int_eq(A.scq[0].status, EMU_WC_SUCCESS);
    emu_mem_mr_free(tmr, 1000);
    free(back);
    free(src);
    pair_down();
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
