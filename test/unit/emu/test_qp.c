/* emu/qp: the iWARP data path between two engines in one process over
 * 127.0.0.1 — Send/Recv, RDMA Write/Read, ORD queueing, Terminate paths,
 * flush, CRC, and a small throughput/latency printout. */
#include "emu/conn.h"
#include "emu/ddp.h"
#include "emu/engine.h"
#include "emu/mem.h"
#include "emu/qp.h"
#include "emu/wire_io.h"

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

#define MAXC 8192
#define WAIT_MS 15000

struct side {
    const char *name;
    struct emu_engine *e;
    struct emu_mem_table *mt;
    struct emu_pz *pz, *pz2;
    struct emu_qp *qp;
    struct emu_conn *c;
    pthread_mutex_t m;
    pthread_cond_t cv;
    struct emu_cqe *scq, *rcq;
    int ns, nr;
    atomic_int nr_atomic;
    int established, terminal, term_type, term_err;
    bool fatal;
    struct emu_qp_fatal f;
    /* write-then-send check: bytes that must be in place when a recv completes */
    const uint8_t *chk_buf, *chk_ref;
    size_t chk_len;
    int chk_bad;
    /* raw: no QP attached; the test writes FPDUs itself and collects bytes */
    bool raw;
    uint8_t raw_in[4096];
    size_t raw_len;
};

static void s_lock(struct side *s) { pthread_mutex_lock(&s->m); }
static void s_unlock(struct side *s)
{
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->m);
}

static int get_ns(struct side *s)
{
    pthread_mutex_lock(&s->m);
    int n = s->ns;
    pthread_mutex_unlock(&s->m);
    return n;
}

static int get_nr(struct side *s)
{
    pthread_mutex_lock(&s->m);
    int n = s->nr;
    pthread_mutex_unlock(&s->m);
    return n;
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
    struct side *s = ctx;
    s_lock(s);
    if (s->chk_buf && cqe->status == EMU_WC_SUCCESS &&
        memcmp(s->chk_buf, s->chk_ref, s->chk_len) != 0)
        s->chk_bad++;
    if (s->nr < MAXC)
        s->rcq[s->nr] = *cqe;
    s->nr++;
    atomic_fetch_add(&s->nr_atomic, 1);
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
        int rc = s->raw ? 0 : emu_qp_attach(s->qp, c, (uint64_t)(uintptr_t)c);
        s_lock(s);
        s->established = rc == 0 ? 1 : -1;
        s_unlock(s);
        return;
    }
    emu_qp_flush(s->qp);
    s_lock(s);
    s->terminal++;
    s->term_type = ev->type;
    s->term_err = ev->err;
    s_unlock(s);
}

static int on_rx(struct emu_conn *c, int fd, void *ctx)
{
    (void)c;
    struct side *s = ctx;
    if (!s->raw)
        return emu_qp_rx(s->qp, fd);
    s_lock(s);
    int rc = EMU_RX_OK;
    for (;;) {
        ssize_t n = recv(fd, s->raw_in + s->raw_len, sizeof s->raw_in - s->raw_len,
                         MSG_DONTWAIT);
        if (n > 0) {
            s->raw_len += (size_t)n;
            if (s->raw_len == sizeof s->raw_in)
                s->raw_len = 0;
            continue;
        }
        if (n == 0)
            rc = EMU_RX_EOF;
        else if (errno != EAGAIN)
            rc = -errno;
        break;
    }
    s_unlock(s);
    return rc;
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
static bool g_no_p2p;
static int g_no_caps; /* 1: initiator sends no capability marker; 2: responder answers without */

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

#define WAIT_FOR(s, cond)                                                   \
    ({                                                                      \
        struct timespec ts_;                                                \
        deadline(&ts_, WAIT_MS);                                            \
        pthread_mutex_lock(&(s)->m);                                        \
        while (!(cond))                                                     \
            if (pthread_cond_timedwait(&(s)->cv, &(s)->m, &ts_) != 0)      \
                break;                                                      \
        bool ok_ = (cond);                                                  \
        pthread_mutex_unlock(&(s)->m);                                      \
        ok_;                                                                \
    })

static struct side A, B; /* A: active (client), B: passive (server) */
static struct emu_listener *g_lis;

struct qpcfg {
    uint32_t sq, rq, sge;
    uint16_t ird, ord;
    uint64_t max_msg;
    bool rfc7306;
    struct emu_srq *srq;
};

static bool g_raw_a;

static void side_setup(struct side *s, const char *name, const struct qpcfg *q)
{
    memset(s, 0, sizeof *s);
    s->raw = s == &A && g_raw_a;
    s->name = name;
    pthread_mutex_init(&s->m, NULL);
    pthread_cond_init(&s->cv, NULL);
    s->scq = calloc(MAXC, sizeof *s->scq);
    s->rcq = calloc(MAXC, sizeof *s->rcq);
    ck_assert_int_eq(emu_engine_create(name, &s->e), 0);
    struct emu_mem_limits lim = {.max_pzs = 4, .max_regions = 64, .max_windows = 16};
    ck_assert_int_eq(emu_mem_table_create(&lim, &s->mt), EMU_MEM_OK);
    ck_assert_int_eq(emu_mem_pz_create(s->mt, &s->pz), EMU_MEM_OK);
    ck_assert_int_eq(emu_mem_pz_create(s->mt, &s->pz2), EMU_MEM_OK);
    struct emu_qp_attr a = {.mem = s->mt, .pz = s->pz, .max_send_wr = q->sq,
                            .max_recv_wr = q->rq, .max_sge = q->sge,
                            .max_message_size = q->max_msg, .ird = q->ird, .ord = q->ord,
                            .rfc7306 = q->rfc7306, .srq = q->srq, .ops = &qops, .ctx = s};
    ck_assert_int_eq(emu_qp_create(&a, &s->qp), 0);
}

/* Block s's engine thread (so its receive side does nothing) until unstall. */
static pthread_mutex_t stall_m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t stall_cv = PTHREAD_COND_INITIALIZER;
static int stall_state; /* 0 idle, 1 requested, 2 engine blocked */

static void stall_job(void *arg)
{
    (void)arg;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += 10;
    pthread_mutex_lock(&stall_m);
    stall_state = 2;
    pthread_cond_broadcast(&stall_cv);
    while (stall_state == 2)
        if (pthread_cond_timedwait(&stall_cv, &stall_m, &ts) != 0)
            break;
    stall_state = 0;
    pthread_mutex_unlock(&stall_m);
}

static void stall(struct side *s)
{
    pthread_mutex_lock(&stall_m);
    stall_state = 1;
    pthread_mutex_unlock(&stall_m);
    ck_assert_int_eq(emu_engine_run_async(s->e, stall_job, NULL), 0);
    pthread_mutex_lock(&stall_m);
    while (stall_state != 2)
        pthread_cond_wait(&stall_cv, &stall_m);
    pthread_mutex_unlock(&stall_m);
}

static void unstall(void)
{
    pthread_mutex_lock(&stall_m);
    stall_state = 3;
    pthread_cond_broadcast(&stall_cv);
    pthread_mutex_unlock(&stall_m);
}

static const struct qpcfg defcfg = {.sq = 1024, .rq = 1024, .sge = 4, .ird = 8, .ord = 8};

/* Connect A -> B with QPs configured by qa/qb. */
static void pair_up_cfg(const struct qpcfg *qa, const struct qpcfg *qb, enum emu_crc_mode crc)
{
    side_setup(&A, "qpA", qa);
    side_setup(&B, "qpB", qb);
    struct sockaddr_in sin = {.sin_family = AF_INET};
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert_int_eq(emu_listener_create(B.e, (struct sockaddr *)&sin, sizeof sin, 0, &lops,
                                         &B, &g_lis),
                     0);
    sin.sin_port = htons(emu_listener_port(g_lis));
    struct emu_conn_params p = {.ird = qa->ird, .ord = qa->ord, .crc = crc,
                                .no_p2p = g_no_p2p, .no_caps = g_no_caps == 1};
    g_params = (struct emu_conn_params){.ird = qb->ird, .ord = qb->ord, .crc = crc,
                                        .no_caps = g_no_caps == 2};
    ck_assert_int_eq(emu_conn_connect(A.e, (struct sockaddr *)&sin, sizeof sin, NULL, 0, &p,
                                      NULL, 0, &cops, &A, &A.c),
                     0);
    ck_assert(WAIT_FOR(&A, A.established != 0));
    ck_assert(WAIT_FOR(&B, B.established != 0));
    ck_assert_int_eq(A.established, 1);
    ck_assert_int_eq(B.established, 1);
}

static void pair_up(void) { pair_up_cfg(&defcfg, &defcfg, EMU_CRC_DEFAULT); }

static void side_teardown(struct side *s)
{
    if (s->c) {
        emu_qp_detach(s->qp);
        emu_conn_free(s->c);
    }
    emu_qp_destroy(s->qp);
    emu_engine_destroy(s->e);
    emu_mem_table_destroy(s->mt);
    free(s->scq);
    free(s->rcq);
}

static void pair_down(void)
{
    g_raw_a = g_no_p2p = false;
    g_no_caps = 0;
    emu_listener_free(g_lis);
    side_teardown(&A);
    side_teardown(&B);
}

static uint32_t reg(struct side *s, void *addr, uint64_t len, struct emu_pz *pz, uint32_t acc,
                    struct emu_mr **mr)
{
    uint32_t stag = 0;
    struct emu_mr_attr ma = {.addr = addr, .length = len, .pz = pz, .access = acc,
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

static int post_send(struct side *s, uint64_t cookie, void *buf, uint32_t len, uint32_t flags)
{
    struct emu_sge sg = {buf, len};
    struct emu_wr wr = {.cookie = cookie, .op = EMU_WR_SEND, .flags = flags,
                        .nsge = len ? 1 : 0, .sge = &sg};
    return emu_qp_post_send(s->qp, &wr);
}

static int post_rdma(struct side *s, enum emu_wr_op op, uint64_t cookie, void *buf,
                     uint32_t len, uint32_t stag, uint64_t to, uint32_t flags)
{
    struct emu_sge sg = {buf, len};
    struct emu_wr wr = {.cookie = cookie, .op = op, .flags = flags, .nsge = len ? 1 : 0,
                        .sge = &sg, .remote_stag = stag, .remote_to = to};
    return emu_qp_post_send(s->qp, &wr);
}

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
    fill(src, len, len);
    memset(dst, 0xEE, len + 16);
    ck_assert_int_eq(emu_qp_post_recv(B.qp, 77, 1, &(struct emu_sge){dst, len + 8}), 0);
    int ns0 = get_ns(&A), nr0 = get_nr(&B);
    ck_assert_int_eq(post_send(&A, 5, src, len, 0), 0);
    ck_assert(WAIT_FOR(&B, B.nr > nr0));
    ck_assert(WAIT_FOR(&A, A.ns > ns0));
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
    pair_up();
    send_recv_size(0);
    send_recv_size(1);
    send_recv_size(4096);
    send_recv_size(1u << 20);
    send_recv_size(3 * 65536 + 7);
    pair_down();
}
END_TEST

/* emu/wire_io.h: the observer sees every byte sent and received, the
 * handshake included: once the traffic settles, the bytes it saw leave
 * (both sides live in this process) are the bytes it saw arrive, and the
 * QP's data bytes are among them. */
static _Atomic uint64_t obs_bytes[2]; /* [EMU_WIRE_TX / RX] */

static void obs_bytes_cb(void *ctx, struct emu_wire_ep *ep, int fd, enum emu_wire_dir dir,
                         const struct msghdr *mh, size_t len, uint64_t began_ns)
{
    (void)ctx;
    (void)began_ns;
    (void)fd;
    (void)mh;
    if (ep)
        atomic_fetch_add(&obs_bytes[dir], len);
}

START_TEST(t_wire_observer)
{
    static const struct emu_wire_observer obs = {obs_bytes_cb, NULL, NULL};
    emu_wire_observe(&obs);
    pair_up();
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
    pair_down();
}
END_TEST

/* emu_qp_progress_many: with B's engine blocked, a consumer pass over two
 * QPs (B's, with a Send waiting in its socket, and A's, idle) completes
 * B's receive; a pass with nothing readable completes nothing. */
START_TEST(t_progress_many)
{
    pair_up();
    uint8_t src[300], dst[300];
    fill(src, sizeof src, 9);
    memset(dst, 0, sizeof dst);
    ck_assert_int_eq(emu_qp_post_recv(B.qp, 41, 1, &(struct emu_sge){dst, sizeof dst}), 0);
    struct emu_qp *both[2] = {A.qp, B.qp};
    ck_assert_int_eq(emu_qp_progress_many(both, 2), 0); /* nothing readable yet */
    stall(&B);
    int nr0 = get_nr(&B);
    ck_assert_int_eq(post_send(&A, 1, src, sizeof src, 0), 0);
    int made = 0;
    for (int i = 0; i < 200000 && made == 0; i++) /* bounded: ~seconds at worst */
        made += emu_qp_progress_many(both, 2);
    unstall();
    ck_assert_int_ge(made, 1);
    ck_assert(WAIT_FOR(&B, B.nr > nr0));
    ck_assert_uint_eq(B.rcq[nr0].cookie, 41);
    ck_assert_int_eq(memcmp(src, dst, sizeof src), 0);
    pair_down();
}
END_TEST

START_TEST(t_send_multi_sge)
{
    pair_up();
    uint8_t s1[100], s2[5000], s3[3];
    fill(s1, sizeof s1, 1);
    fill(s2, sizeof s2, 2);
    fill(s3, sizeof s3, 3);
    uint8_t d1[7], d2[4000], d3[2000];
    ck_assert_int_eq(emu_qp_post_recv(B.qp, 1, 3,
                                      (struct emu_sge[]){{d1, 7}, {d2, 4000}, {d3, 2000}}),
                     0);
    struct emu_sge sg[3] = {{s1, 100}, {s2, 5000}, {s3, 3}};
    struct emu_wr wr = {.cookie = 9, .op = EMU_WR_SEND, .nsge = 3, .sge = sg};
    ck_assert_int_eq(emu_qp_post_send(A.qp, &wr), 0);
    ck_assert(WAIT_FOR(&B, B.nr == 1));
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
    pair_down();
}
END_TEST

START_TEST(t_send_many)
{
    pair_up();
    enum { N = 3000, SZ = 100 };
    static uint8_t src[N][SZ], dst[N][SZ + 4];
    int posted_r = 0, posted_s = 0;
    for (int i = 0; i < N; i++)
        fill(src[i], SZ, (unsigned)i + 100);
    double t0 = now_s();
    while (posted_s < N) {
        while (posted_r < N && posted_r - get_nr(&B) < 1000 &&
               emu_qp_post_recv(B.qp, (uint64_t)posted_r, 1,
                                &(struct emu_sge){dst[posted_r], SZ + 4}) == 0)
            posted_r++;
        if (posted_s >= posted_r) {
            WAIT_FOR(&B, B.nr > posted_s - 900 || B.nr == posted_r);
            continue;
        }
        int rc = post_send(&A, (uint64_t)posted_s, src[posted_s], SZ,
                           (posted_s & 1) ? EMU_WR_SOLICITED : 0);
        if (rc == -ENOSPC) {
            WAIT_FOR(&A, A.ns > posted_s - 900);
            continue;
        }
        ck_assert_int_eq(rc, 0);
        posted_s++;
    }
    ck_assert(WAIT_FOR(&B, B.nr == N));
    ck_assert(WAIT_FOR(&A, A.ns == N));
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
    pair_down();
}
END_TEST

START_TEST(t_recv_too_small)
{
    pair_up();
    uint8_t src[300], dst[100];
    fill(src, sizeof src, 4);
    ck_assert_int_eq(emu_qp_post_recv(B.qp, 1, 1, &(struct emu_sge){dst, 100}), 0);
    ck_assert_int_eq(emu_qp_post_recv(B.qp, 2, 1, &(struct emu_sge){dst, 100}), 0);
    ck_assert_int_eq(post_send(&A, 1, src, 300, 0), 0);
    ck_assert(WAIT_FOR(&B, B.terminal == 1));
    ck_assert(WAIT_FOR(&B, B.nr == 2));
    ck_assert_int_eq(B.rcq[0].status, EMU_WC_LOC_LEN);
    ck_assert_uint_eq(B.rcq[0].cookie, 1);
    ck_assert_int_eq(B.rcq[1].status, EMU_WC_FLUSHED);
    ck_assert_int_eq(B.term_type, EMU_CONN_BROKEN);
    ck_assert(B.fatal && !B.f.remote);
    ck_assert(WAIT_FOR(&A, A.terminal == 1));
    ck_assert(WAIT_FOR(&A, A.fatal));
    ck_assert(A.f.remote && A.f.have_term);
    ck_assert_int_eq(A.f.term.layer, EMU_TERM_DDP);
    ck_assert_int_eq(A.f.term.etype, EMU_TERM_DDP_UNTAGGED);
    ck_assert_int_eq(A.f.term.ecode, EMU_DDP_EC_U_TOO_LONG);
    pair_down();
}
END_TEST

START_TEST(t_no_recv_posted)
{
    pair_up();
    uint8_t src[10] = {0};
    ck_assert_int_eq(post_send(&A, 1, src, 10, 0), 0);
    ck_assert(WAIT_FOR(&A, A.fatal && A.terminal == 1));
    ck_assert(A.f.remote);
    ck_assert_int_eq(A.f.term.layer, EMU_TERM_DDP);
    ck_assert_int_eq(A.f.term.etype, EMU_TERM_DDP_UNTAGGED);
    ck_assert_int_eq(A.f.term.ecode, EMU_DDP_EC_U_NO_BUF);
    ck_assert(WAIT_FOR(&B, B.terminal == 1));
    pair_down();
}
END_TEST

/* ---------------------------------------------------------------- RDMA Write */

START_TEST(t_write)
{
    pair_up();
    enum { LEN = 200000, PADB = 64 };
    uint8_t *region = malloc(LEN + 2 * PADB);
    memset(region, 0xCC, LEN + 2 * PADB);
    struct emu_mr *mr;
    uint8_t *tgt = region + PADB;
    uint32_t stag = reg(&B, tgt, LEN, B.pz, EMU_ACC_LOCAL_WRITE | EMU_ACC_REMOTE_WRITE, &mr);
    uint8_t *src = malloc(LEN);
    fill(src, LEN, 9);
    /* whole region, then a small unaligned piece in the middle */
    ck_assert_int_eq(post_rdma(&A, EMU_WR_WRITE, 1, src, LEN, stag, (uintptr_t)tgt, 0), 0);
    ck_assert_int_eq(post_rdma(&A, EMU_WR_WRITE, 2, src, 5, stag, (uintptr_t)tgt + 1001, 0), 0);
    ck_assert_int_eq(post_rdma(&A, EMU_WR_WRITE, 3, src, 0, stag, (uintptr_t)tgt, 0), 0);
    /* a Send after the Writes tells us they are placed */
    uint8_t d[4];
    ck_assert_int_eq(emu_qp_post_recv(B.qp, 1, 1, &(struct emu_sge){d, 4}), 0);
    ck_assert_int_eq(post_send(&A, 4, src, 4, 0), 0);
    ck_assert(WAIT_FOR(&B, B.nr == 1));
    ck_assert(WAIT_FOR(&A, A.ns == 4));
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
    pair_down();
}
END_TEST

/* Write-then-Send: by the time the receive completes, the Write is placed. */
START_TEST(t_write_then_send)
{
    pair_up();
    enum { LEN = 1 << 20 };
    uint8_t *tgt = calloc(1, LEN), *src = malloc(LEN);
    struct emu_mr *mr;
    uint32_t stag = reg(&B, tgt, LEN, B.pz, EMU_ACC_LOCAL_WRITE | EMU_ACC_REMOTE_WRITE, &mr);
    uint8_t d[8];
    for (int round = 0; round < 5; round++) {
        fill(src, LEN, 50 + (unsigned)round);
        s_lock(&B);
        B.chk_buf = tgt;
        B.chk_ref = src;
        B.chk_len = LEN;
        s_unlock(&B);
        ck_assert_int_eq(emu_qp_post_recv(B.qp, 1, 1, &(struct emu_sge){d, 8}), 0);
        ck_assert_int_eq(post_rdma(&A, EMU_WR_WRITE, 1, src, LEN, stag, (uintptr_t)tgt, 0), 0);
        ck_assert_int_eq(post_send(&A, 2, d, 0, 0), 0);
        ck_assert(WAIT_FOR(&B, B.nr == round + 1));
        ck_assert(WAIT_FOR(&A, A.ns == 2 * (round + 1)));
    }
    ck_assert_int_eq(B.chk_bad, 0);
    emu_mem_mr_free(mr, 1000);
    free(tgt);
    free(src);
    pair_down();
}
END_TEST

enum werr { WE_STAG, WE_PZ, WE_ACCESS, WE_BOUNDS };

static void write_error(enum werr kind)
{
    pair_up();
    static uint8_t tgt[4096], src[4096], rd[64];
    struct emu_mr *mr, *mr_ok;
    uint32_t acc = EMU_ACC_LOCAL_WRITE | EMU_ACC_REMOTE_WRITE | EMU_ACC_REMOTE_READ;
    if (kind == WE_ACCESS)
        acc = EMU_ACC_LOCAL_WRITE | EMU_ACC_REMOTE_READ;
    uint32_t stag = reg(&B, tgt, sizeof tgt, kind == WE_PZ ? B.pz2 : B.pz, acc, &mr);
    uint32_t stag_ok = reg(&B, tgt, sizeof tgt, B.pz, EMU_ACC_REMOTE_READ, &mr_ok);
    uint64_t to = (uintptr_t)tgt;
    uint32_t len = 100;
    if (kind == WE_STAG)
        stag ^= 0x55; /* wrong key */
    if (kind == WE_BOUNDS)
        to += sizeof tgt - 50;
    memset(tgt, 0, sizeof tgt);
    /* a good Read queued behind the bad Write: flushed */
    stall(&B);
    ck_assert_int_eq(post_rdma(&A, EMU_WR_WRITE, 1, src, len, stag, to, 0), 0);
    ck_assert_int_eq(post_rdma(&A, EMU_WR_READ, 2, rd, 64, stag_ok, (uintptr_t)tgt,
                               EMU_WR_FENCE),
                     0);
    unstall();
    ck_assert(WAIT_FOR(&A, A.terminal == 1 && A.fatal));
    ck_assert(WAIT_FOR(&B, B.terminal == 1 && B.fatal));
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
    ck_assert(WAIT_FOR(&A, A.ns == 2));
    ck_assert_int_eq(A.scq[0].status, EMU_WC_SUCCESS); /* handed to TCP before the error */
    ck_assert_uint_eq(A.scq[1].cookie, 2);
    ck_assert_int_eq(A.scq[1].status, EMU_WC_FLUSHED);
    ck_assert_int_eq(tgt[0], 0);
    /* posting after the failure */
    ck_assert_int_eq(post_send(&A, 3, src, 1, 0), -ENOTCONN);
    pair_down();
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
    fill(src, len, len + 3);
    memset(dst, 0xAB, len + 64);
    struct emu_mr *mr;
    uint32_t stag = reg(&B, src, len, B.pz, EMU_ACC_LOCAL_READ | EMU_ACC_REMOTE_READ, &mr);
    int n0 = get_ns(&A);
    double t0 = now_s();
    ck_assert_int_eq(post_rdma(&A, EMU_WR_READ, 42, dst, len, stag, (uintptr_t)src, 0), 0);
    ck_assert(WAIT_FOR(&A, A.ns > n0));
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
    pair_up();
    read_size(1);
    read_size(100);
    read_size(0);
    read_size(8u << 20);
    pair_down();
}
END_TEST

START_TEST(t_read_ord_queue)
{
    struct qpcfg qa = defcfg, qb = defcfg;
    qa.ord = 2;
    qb.ird = 2;
    pair_up_cfg(&qa, &qb, EMU_CRC_DEFAULT);
    enum { N = 12, L = 70000 };
    uint8_t *src = malloc(N * L), *dst = calloc(N, L), sbuf[16] = {0};
    fill(src, N * L, 77);
    struct emu_mr *mr;
    uint32_t stag = reg(&B, src, N * L, B.pz, EMU_ACC_REMOTE_READ, &mr);
    uint8_t d[16];
    ck_assert_int_eq(emu_qp_post_recv(B.qp, 1, 1, &(struct emu_sge){d, 16}), 0);
    for (int i = 0; i < N; i++) {
        ck_assert_int_eq(post_rdma(&A, EMU_WR_READ, (uint64_t)i, dst + i * L, L, stag,
                                   (uintptr_t)src + (uint64_t)i * L, 0),
                         0);
        if (i == 5) /* a Send among the Reads: stalls behind the ORD limit */
            ck_assert_int_eq(post_send(&A, 100, sbuf, 16, 0), 0);
    }
    ck_assert(WAIT_FOR(&A, A.ns == N + 1));
    ck_assert(WAIT_FOR(&B, B.nr == 1));
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
    pair_down();
}
END_TEST

START_TEST(t_read_protection)
{
    pair_up();
    static uint8_t src[4096], dst[4096];
    struct emu_mr *mr;
    uint32_t stag = reg(&B, src, sizeof src, B.pz, EMU_ACC_LOCAL_READ, &mr); /* no REMOTE_READ */
    uint8_t d[8];
    ck_assert_int_eq(emu_qp_post_recv(B.qp, 1, 1, &(struct emu_sge){d, 8}), 0);
    stall(&B);
    ck_assert_int_eq(post_rdma(&A, EMU_WR_READ, 1, dst, 100, stag, (uintptr_t)src, 0), 0);
    ck_assert_int_eq(post_rdma(&A, EMU_WR_READ, 2, dst, 100, stag, (uintptr_t)src, 0), 0);
    unstall();
    ck_assert(WAIT_FOR(&A, A.terminal == 1 && A.ns == 2));
    ck_assert_int_eq(A.scq[0].status, EMU_WC_REM_ACCESS);
    ck_assert_int_eq(A.scq[1].status, EMU_WC_FLUSHED);
    ck_assert(A.f.remote);
    ck_assert_int_eq(A.f.term.layer, EMU_TERM_RDMAP);
    ck_assert_int_eq(A.f.term.etype, EMU_TERM_RDMAP_PROTECTION);
    ck_assert_int_eq(A.f.term.ecode, EMU_RDMAP_EC_ACCESS);
    ck_assert(A.f.term.hdrct & EMU_TERM_HDRCT_R);
    ck_assert(WAIT_FOR(&B, B.terminal == 1 && B.nr == 1));
    ck_assert_int_eq(B.rcq[0].status, EMU_WC_FLUSHED);
    pair_down();
}
END_TEST

/* ---------------------------------------------------------------- flush */

START_TEST(t_flush_on_disconnect)
{
    pair_up();
    static uint8_t d[8][64], s[64];
    for (int i = 0; i < 8; i++)
        ck_assert_int_eq(emu_qp_post_recv(B.qp, (uint64_t)i, 1, &(struct emu_sge){d[i], 64}),
                         0);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(emu_qp_post_recv(A.qp, 10 + (uint64_t)i, 1,
                                          &(struct emu_sge){d[i], 64}),
                         0);
    ck_assert_int_eq(post_send(&A, 1, s, 64, 0), 0);
    ck_assert(WAIT_FOR(&B, B.nr == 1));
    ck_assert_int_eq(emu_qp_disconnect(A.qp, true), 0);
    ck_assert(WAIT_FOR(&B, B.terminal == 1 && B.nr == 8));
    ck_assert(WAIT_FOR(&A, A.terminal == 1 && A.nr == 3));
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
    ck_assert_int_eq(post_send(&A, 1, s, 64, 0), -ENOTCONN);
    pair_down();
}
END_TEST

/* Sends queued behind a stalled Read, connection aborted: flushed in order. */
START_TEST(t_flush_sq_order)
{
    struct qpcfg qa = defcfg;
    qa.ord = 1;
    pair_up_cfg(&qa, &defcfg, EMU_CRC_DEFAULT);
    static uint8_t src[1 << 16], dst[1 << 16], s[8];
    struct emu_mr *mr;
    uint32_t stag = reg(&B, src, sizeof src, B.pz, EMU_ACC_REMOTE_READ, &mr);
    static uint8_t rb[8];
    ck_assert_int_eq(emu_qp_post_recv(B.qp, 1, 1, &(struct emu_sge){rb, 8}), 0);
    /* abort A right after posting: whatever has not finished flushes */
    for (int i = 0; i < 6; i++)
        ck_assert_int_eq(post_rdma(&A, EMU_WR_READ, (uint64_t)i, dst, sizeof dst, stag,
                                   (uintptr_t)src, 0),
                         0);
    ck_assert_int_eq(post_send(&A, 6, s, 8, 0), 0);
    ck_assert_int_eq(emu_qp_disconnect(A.qp, false), 0);
    ck_assert(WAIT_FOR(&A, A.terminal == 1 && A.ns == 7));
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
    ck_assert(WAIT_FOR(&B, B.terminal == 1));
    pair_down();
}
END_TEST

/* ---------------------------------------------------------------- CRC */

static void crc_round(enum emu_crc_mode m)
{
    pair_up_cfg(&defcfg, &defcfg, m);
    struct emu_conn_info ia;
    ck_assert_int_eq(emu_conn_get_info(A.c, &ia), 0);
    ck_assert_int_eq(ia.crc, m == EMU_CRC_ON);
    send_recv_size(1);
    send_recv_size(300000);
    read_size(200001);
    pair_down();
}

START_TEST(t_crc_on) { crc_round(EMU_CRC_ON); }
END_TEST
START_TEST(t_crc_off) { crc_round(EMU_CRC_OFF); }
END_TEST

/* Small FPDUs: multi-segment Sends, Writes and Read Responses. */
START_TEST(t_small_fpdus)
{
    setenv("SOFTDAT_FPDU_MAX", "1000", 1);
    pair_up_cfg(&defcfg, &defcfg, EMU_CRC_ON);
    send_recv_size(12345);
    read_size(54321);
    struct emu_qp_stats st;
    emu_qp_get_stats(A.qp, &st);
    ck_assert_uint_ge(st.tx_fpdus, 12345 / 1000);
    pair_down();
}
END_TEST

/* ---------------------------------------------------------------- RFC 7306, invalidate, SRQ, bind */

START_TEST(t_write_imm_atomics)
{
    struct qpcfg q = defcfg;
    q.rfc7306 = true;
    pair_up_cfg(&q, &q, EMU_CRC_ON);
    static uint8_t tgt[4096], src[4096];
    static uint64_t words[4] __attribute__((aligned(8)));
    words[1] = 100;
    fill(src, sizeof src, 11);
    struct emu_mr *mr, *mw;
    uint32_t stag = reg(&B, tgt, sizeof tgt, B.pz, EMU_ACC_LOCAL_WRITE | EMU_ACC_REMOTE_WRITE,
                        &mr);
    uint32_t wstag = reg(&B, words, sizeof words, B.pz,
                         EMU_ACC_LOCAL_WRITE | EMU_ACC_REMOTE_ATOMIC, &mw);
    s_lock(&B);
    B.chk_buf = tgt;
    B.chk_ref = src;
    B.chk_len = 3000;
    s_unlock(&B);
    ck_assert_int_eq(emu_qp_post_recv(B.qp, 7, 0, NULL), 0);
    struct emu_sge sg = {src, 3000};
    struct emu_wr wr = {.cookie = 1, .op = EMU_WR_WRITE_IMM, .flags = EMU_WR_SOLICITED,
                        .nsge = 1, .sge = &sg, .remote_stag = stag,
                        .remote_to = (uintptr_t)tgt, .imm = 0xdeadbeef};
    ck_assert_int_eq(emu_qp_post_send(A.qp, &wr), 0);
    ck_assert(WAIT_FOR(&B, B.nr == 1));
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
    ck_assert(WAIT_FOR(&A, A.ns == 4));
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
    uint32_t nstag = reg(&B, tgt, sizeof tgt, B.pz, EMU_ACC_LOCAL_WRITE | EMU_ACC_REMOTE_WRITE,
                         &mr);
    fa.cookie = 5;
    fa.remote_stag = nstag;
    fa.remote_to = (uintptr_t)tgt;
    stall(&B);
    ck_assert_int_eq(emu_qp_post_send(A.qp, &fa), 0);
    ck_assert_int_eq(emu_qp_post_send(A.qp, &fa), 0);
    unstall();
    ck_assert(WAIT_FOR(&A, A.terminal == 1 && A.ns == 6));
    ck_assert_int_eq(A.scq[4].status, EMU_WC_REM_ACCESS);
    ck_assert_int_eq(A.scq[5].status, EMU_WC_FLUSHED);
    pair_down();
}
END_TEST

START_TEST(t_rfc7306_off)
{
    /* _i 1: the initiator is a plain iWARP peer (no marker); 2: the
     * responder answers without one. Either way nothing is negotiated. */
    g_no_caps = _i;
    pair_up();
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
    pair_down();
}
END_TEST

/* Two softdat QPs without attr.rfc7306: the capability markers enable
 * write-with-immediate and atomics; the receiver of the immediate learns
 * the length of the Write before it. */
START_TEST(t_rfc7306_negotiated)
{
    pair_up();
    struct emu_conn_info ai, bi;
    ck_assert_int_eq(emu_conn_get_info(A.c, &ai), 0);
    ck_assert_int_eq(emu_conn_get_info(B.c, &bi), 0);
    ck_assert_uint_eq(ai.caps, EMU_CONN_CAP_ATOMICS | EMU_CONN_CAP_IMM);
    ck_assert_uint_eq(bi.caps, EMU_CONN_CAP_ATOMICS | EMU_CONN_CAP_IMM);
    static uint8_t tgt[70000], src[70000], d[16];
    static uint64_t word __attribute__((aligned(8))) = 40;
    fill(src, sizeof src, 5);
    struct emu_mr *mr, *mw;
    uint32_t stag = reg(&B, tgt, sizeof tgt, B.pz, EMU_ACC_LOCAL_WRITE | EMU_ACC_REMOTE_WRITE,
                        &mr);
    uint32_t wstag = reg(&B, &word, 8, B.pz, EMU_ACC_LOCAL_WRITE | EMU_ACC_REMOTE_ATOMIC, &mw);
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
        ck_assert(WAIT_FOR(&B, B.nr == i + 1));
        ck_assert_int_eq(B.rcq[i].status, EMU_WC_SUCCESS);
        ck_assert_int_eq(B.rcq[i].op, EMU_WC_RECV_IMM);
        ck_assert_uint_eq(B.rcq[i].cookie, 10 + (uint64_t)i);
        ck_assert_uint_eq(B.rcq[i].imm, 0x1111u * (i + 1));
        ck_assert_uint_eq(B.rcq[i].byte_len, lens[i]);
    }
    ck_assert_int_eq(memcmp(tgt, src, 70000), 0);
    ck_assert(WAIT_FOR(&A, A.ns == 3));
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
    ck_assert(WAIT_FOR(&A, A.ns == 5));
    ck_assert_int_eq(A.scq[3].status, EMU_WC_SUCCESS);
    ck_assert_int_eq(A.scq[4].status, EMU_WC_SUCCESS);
    ck_assert_uint_eq(r1, 40);
    ck_assert_uint_eq(r2, 42);
    ck_assert_uint_eq(__atomic_load_n(&word, __ATOMIC_ACQUIRE), 9);
    pair_down();
}
END_TEST

START_TEST(t_send_invalidate)
{
    pair_up();
    static uint8_t tgt[4096], src[64], d[64];
    struct emu_mr *mr;
    uint32_t stag = reg(&B, tgt, sizeof tgt, B.pz,
                        EMU_ACC_LOCAL_WRITE | EMU_ACC_REMOTE_WRITE | EMU_ACC_REMOTE_INVALIDATE,
                        &mr);
    ck_assert_int_eq(emu_qp_post_recv(B.qp, 1, 1, &(struct emu_sge){d, 64}), 0);
    struct emu_sge sg = {src, 64};
    struct emu_wr wr = {.cookie = 1, .op = EMU_WR_SEND, .flags = EMU_WR_INVALIDATE, .nsge = 1,
                        .sge = &sg, .inv_stag = stag};
    ck_assert_int_eq(emu_qp_post_send(A.qp, &wr), 0);
    ck_assert(WAIT_FOR(&B, B.nr == 1));
    ck_assert_int_eq(B.rcq[0].status, EMU_WC_SUCCESS);
    ck_assert_int_eq(B.rcq[0].op, EMU_WC_RECV_INV);
    ck_assert_uint_eq(B.rcq[0].inv_stag, stag);
    struct emu_mr_info mi;
    ck_assert_int_eq(emu_mem_mr_query(mr, &mi), EMU_MEM_OK);
    ck_assert(mi.remote_revoked);
    /* the STag no longer admits Writes */
    ck_assert_int_eq(post_rdma(&A, EMU_WR_WRITE, 2, src, 8, stag, (uintptr_t)tgt, 0), 0);
    ck_assert(WAIT_FOR(&A, A.terminal == 1 && A.fatal));
    ck_assert(A.f.remote);
    ck_assert_int_eq(A.f.term.layer, EMU_TERM_DDP);
    ck_assert_int_eq(A.f.term.etype, EMU_TERM_DDP_TAGGED);
    ck_assert_int_eq(tgt[0], 0);
    pair_down();
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
    struct qpcfg qb = defcfg;
    qb.srq = srq;
    pair_up_cfg(&defcfg, &qb, EMU_CRC_DEFAULT);
    ck_assert_int_eq(emu_qp_post_recv(B.qp, 0, 0, NULL), -EINVAL);
    for (int i = 0; i < 3; i++) {
        fill(src, 32, (unsigned)i);
        ck_assert_int_eq(post_send(&A, (uint64_t)i, src, 32, 0), 0);
        ck_assert(WAIT_FOR(&B, B.nr == i + 1));
        ck_assert_uint_eq(B.rcq[i].cookie, (uint64_t)i);
        ck_assert_int_eq(memcmp(d[i], src, 32), 0);
    }
    ck_assert_uint_eq(emu_srq_posted(srq), 1);
    ck_assert_int_eq(atomic_load(&lw_hits), 1);
    ck_assert_int_eq(emu_srq_resize(srq, 16), 0);
    ck_assert_uint_eq(emu_srq_posted(srq), 1);
    pair_down();
    /* flushing the QP leaves the SRQ's receives alone */
    ck_assert_uint_eq(emu_srq_posted(srq), 1);
    emu_srq_destroy(srq);
}
END_TEST

START_TEST(t_bind_window)
{
    pair_up();
    static uint8_t buf[8192], src[100];
    fill(src, sizeof src, 5);
    struct emu_mr *mr;
    reg(&B, buf, sizeof buf, B.pz, EMU_ACC_LOCAL_WRITE | EMU_ACC_LOCAL_READ | EMU_ACC_MW_BIND,
        &mr);
    struct emu_mw *mw;
    ck_assert_int_eq(emu_mem_mw_create(B.mt, B.pz, EMU_MW_SCOPE_PZ, &mw), EMU_MEM_OK);
    struct emu_wr wr = {.cookie = 9, .op = EMU_WR_BIND, .mw = mw,
                        .bind = {.mr = mr, .addr = (uintptr_t)buf + 4096, .length = 1024,
                                 .access = EMU_ACC_REMOTE_WRITE, .va_type = EMU_VA_ABS,
                                 .ep_pz = B.pz}};
    ck_assert_int_eq(emu_qp_post_send(B.qp, &wr), 0);
    ck_assert(WAIT_FOR(&B, B.ns == 1));
    ck_assert_int_eq(B.scq[0].status, EMU_WC_SUCCESS);
    ck_assert_int_eq(B.scq[0].op, EMU_WR_BIND);
    uint32_t wst = B.scq[0].bound_stag;
    ck_assert_uint_ne(wst, 0);
    uint8_t d[4];
    ck_assert_int_eq(emu_qp_post_recv(B.qp, 1, 1, &(struct emu_sge){d, 4}), 0);
    ck_assert_int_eq(post_rdma(&A, EMU_WR_WRITE, 1, src, 100, wst, (uintptr_t)buf + 4100, 0),
                     0);
    ck_assert_int_eq(post_send(&A, 2, src, 0, 0), 0);
    ck_assert(WAIT_FOR(&B, B.nr == 1));
    ck_assert_int_eq(memcmp(buf + 4100, src, 100), 0);
    /* a bind refused by the memory table completes BIND_FAILED */
    wr.bind.length = 1u << 20;
    wr.cookie = 10;
    ck_assert_int_eq(emu_qp_post_send(B.qp, &wr), 0);
    ck_assert(WAIT_FOR(&B, B.ns == 2));
    ck_assert_int_eq(B.scq[1].status, EMU_WC_BIND_FAILED);
    pair_down();
}
END_TEST

/* dat_ep_reset: after a disconnect both QPs are reset and reused on a new
 * connection; MSNs start again at 1. Also a Read into a multi-SGE sink. */
START_TEST(t_reuse_after_reset)
{
    pair_up();
    static uint8_t s[4096], d[4096];
    fill(s, sizeof s, 3);
    for (int round = 0; round < 3; round++) {
        if (round > 0) {
            ck_assert_int_eq(emu_qp_reset(A.qp), 0);
            ck_assert_int_eq(emu_qp_reset(B.qp), 0);
            s_lock(&A);
            A.established = A.terminal = 0;
            s_unlock(&A);
            s_lock(&B);
            B.established = B.terminal = 0;
            s_unlock(&B);
            struct sockaddr_in sin = {.sin_family = AF_INET,
                                      .sin_port = htons(emu_listener_port(g_lis))};
            sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
            ck_assert_int_eq(emu_conn_connect(A.e, (struct sockaddr *)&sin, sizeof sin, NULL, 0,
                                              &g_params, NULL, 0, &cops, &A, &A.c),
                             0);
            ck_assert(WAIT_FOR(&A, A.established == 1));
            ck_assert(WAIT_FOR(&B, B.established == 1));
        }
        int nr0 = get_nr(&B), ns0 = get_ns(&A);
        memset(d, 0, sizeof d);
        ck_assert_int_eq(emu_qp_post_recv(B.qp, 1, 1, &(struct emu_sge){d, sizeof d}), 0);
        ck_assert_int_eq(post_send(&A, 1, s, 1000 + (uint32_t)round, 0), 0);
        ck_assert(WAIT_FOR(&B, B.nr == nr0 + 1));
        ck_assert_int_eq(B.rcq[nr0].status, EMU_WC_SUCCESS);
        ck_assert_int_eq(memcmp(d, s, 1000 + (size_t)round), 0);
        /* Read into three SGEs */
        struct emu_mr *mr;
        uint32_t st = reg(&B, s, sizeof s, B.pz, EMU_ACC_REMOTE_READ, &mr);
        static uint8_t r1[100], r2[1], r3[3995];
        struct emu_sge sg[3] = {{r1, 100}, {r2, 1}, {r3, 3995}};
        struct emu_wr wr = {.cookie = 2, .op = EMU_WR_READ, .nsge = 3, .sge = sg,
                            .remote_stag = st, .remote_to = (uintptr_t)s};
        ck_assert_int_eq(emu_qp_post_send(A.qp, &wr), 0);
        ck_assert(WAIT_FOR(&A, A.ns == ns0 + 2));
        ck_assert_int_eq(A.scq[ns0 + 1].status, EMU_WC_SUCCESS);
        ck_assert_int_eq(memcmp(r1, s, 100), 0);
        ck_assert_int_eq(r2[0], s[100]);
        ck_assert_int_eq(memcmp(r3, s + 101, 3995), 0);
        emu_mem_mr_free(mr, 1000);
        ck_assert_int_eq(emu_qp_disconnect(A.qp, true), 0);
        ck_assert(WAIT_FOR(&A, A.terminal == 1));
        ck_assert(WAIT_FOR(&B, B.terminal == 1));
        ck_assert_int_eq(emu_qp_reset(A.qp) == 0 && emu_qp_reset(B.qp) == 0, 1);
        emu_conn_free(A.c);
        emu_conn_free(B.c);
        A.c = B.c = NULL;
    }
    pair_down();
}
END_TEST

/* RFC 5044 client/server mode: the passive side holds its sends until the
 * first FPDU from the initiator arrived. */
START_TEST(t_no_p2p_recv_first)
{
    g_no_p2p = true;
    pair_up();
    struct emu_conn_info ib;
    ck_assert_int_eq(emu_conn_get_info(B.c, &ib), 0);
    ck_assert(ib.recv_first);
    static uint8_t a[16], b[16], da[16], db[16];
    fill(a, 16, 1);
    fill(b, 16, 2);
    ck_assert_int_eq(emu_qp_post_recv(A.qp, 1, 1, &(struct emu_sge){da, 16}), 0);
    ck_assert_int_eq(emu_qp_post_recv(B.qp, 1, 1, &(struct emu_sge){db, 16}), 0);
    ck_assert_int_eq(post_send(&B, 1, b, 16, 0), 0);
    usleep(50000);
    ck_assert_int_eq(get_nr(&A), 0); /* held */
    ck_assert_int_eq(post_send(&A, 1, a, 16, 0), 0);
    ck_assert(WAIT_FOR(&A, A.nr == 1));
    ck_assert(WAIT_FOR(&B, B.nr == 1));
    ck_assert_int_eq(memcmp(da, b, 16), 0);
    ck_assert_int_eq(memcmp(db, a, 16), 0);
    pair_down();
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
    ck_assert(WAIT_FOR(&A, A.raw_len >= 2 + EMU_DDP_UNTAGGED_HLEN + 4));
    struct emu_ddp_hdr h;
    size_t need = 0;
    s_lock(&A);
    uint16_t ul = (uint16_t)(A.raw_in[0] << 8 | A.raw_in[1]);
    int rc = emu_ddp_parse(A.raw_in + 2, A.raw_len - 2, ul, NULL, &h, &need);
    s_unlock(&A);
    ck_assert_int_eq(rc, EMU_DDP_OK);
    ck_assert_int_eq(h.opcode, EMU_OP_TERMINATE);
    *t = h.u.term;
}

static void raw_case(bool crc, void (*inject)(void), uint8_t layer, uint8_t etype,
                     uint8_t ecode, int err)
{
    g_raw_a = true;
    pair_up_cfg(&defcfg, &defcfg, crc ? EMU_CRC_ON : EMU_CRC_OFF);
    static uint8_t d[64];
    ck_assert_int_eq(emu_qp_post_recv(B.qp, 1, 1, &(struct emu_sge){d, 64}), 0);
    inject();
    struct emu_term t;
    raw_expect_term(&t);
    ck_assert_int_eq(t.layer, layer);
    ck_assert_int_eq(t.etype, etype);
    ck_assert_int_eq(t.ecode, ecode);
    ck_assert(WAIT_FOR(&B, B.terminal == 1 && B.nr == 1 && B.fatal));
    ck_assert_int_eq(B.term_type, EMU_CONN_BROKEN);
    ck_assert(!B.f.remote);
    ck_assert_int_eq(B.f.err, err);
    ck_assert_int_eq(B.rcq[0].status, EMU_WC_FLUSHED);
    pair_down();
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
    /* (raw_case sets g_no_caps for this one: nothing negotiated) */
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
    g_no_caps = 1;
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

static void wait_recv(struct side *s, int i)
{
    if (g_mode == 0) {
        WAIT_FOR(s, s->nr > i);
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
        post_send(&B, 0, buf, 64, 0);
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
    s_lock(&B);
    B.nr = 0;
    s_unlock(&B);
    s_lock(&A);
    A.nr = 0;
    A.ns = 0;
    s_unlock(&A);
    pthread_t th;
    pthread_create(&th, NULL, echo_thread, (void *)(intptr_t)iters);
    double t0 = now_s();
    for (int i = 0; i < iters; i++) {
        post_send(&A, 0, buf, 64, 0);
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
    struct qpcfg q = defcfg;
    q.sq = 256;
    q.rq = 256;
    pair_up_cfg(&q, &q, EMU_CRC_DEFAULT);
    enum { MB = 1 << 20, N = 200 };
    uint8_t *src = malloc(MB), *dst = malloc(MB);
    fill(src, MB, 1);
    struct emu_mr *mr;
    uint32_t stag = reg(&B, dst, MB, B.pz, EMU_ACC_REMOTE_WRITE | EMU_ACC_LOCAL_WRITE, &mr);
    /* 1 MiB Sends */
    double t0 = now_s();
    int ps = 0, pr = 0;
    while (ps < N) {
        while (pr < N && pr - get_nr(&B) < 200 &&
               emu_qp_post_recv(B.qp, 0, 1, &(struct emu_sge){dst, MB}) == 0)
            pr++;
        if (ps < pr && post_send(&A, 0, src, MB, 0) == 0)
            ps++;
        else
            WAIT_FOR(&A, A.ns > ps - 100);
    }
    ck_assert(WAIT_FOR(&B, B.nr == N));
    double dt = now_s() - t0;
    printf("[perf] 1 MiB Sends: %.0f MB/s\n", (double)N * MB / dt / 1e6);
    /* 1 MiB Writes + a final Send */
    int a0 = get_ns(&A);
    t0 = now_s();
    for (int i = 0; i < N; i++) {
        while (post_rdma(&A, EMU_WR_WRITE, 0, src, MB, stag, (uintptr_t)dst, 0) == -ENOSPC)
            WAIT_FOR(&A, A.ns > a0 + i - 128);
    }
    int b0 = get_nr(&B);
    ck_assert_int_eq(emu_qp_post_recv(B.qp, 0, 1, &(struct emu_sge){dst, 8}), 0);
    while (post_send(&A, 0, src, 1, 0) == -ENOSPC)
        WAIT_FOR(&A, A.ns > a0 + N - 128);
    ck_assert(WAIT_FOR(&B, B.nr == b0 + 1));
    dt = now_s() - t0;
    printf("[perf] 1 MiB RDMA Writes: %.0f MB/s\n", (double)N * MB / dt / 1e6);
    ck_assert(WAIT_FOR(&A, A.ns == a0 + N + 1));
    /* 64 B ping-pong */
    double lat = pingpong(3000, 0);
    printf("[perf] 64 B ping-pong, waiting for the engine's completion: %.1f us one-way\n", lat);
    lat = pingpong(3000, 1);
    printf("[perf] 64 B ping-pong, spinning in emu_qp_progress: %.1f us one-way\n", lat);
    fflush(stdout);
    emu_mem_mr_free(mr, 1000);
    free(src);
    free(dst);
    pair_down();
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("emu_qp");
    TCase *tc = tcase_create("qp");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, t_send_sizes);
    tcase_add_test(tc, t_wire_observer);
    tcase_add_test(tc, t_progress_many);
    tcase_add_test(tc, t_send_multi_sge);
    tcase_add_test(tc, t_send_many);
    tcase_add_test(tc, t_recv_too_small);
    tcase_add_test(tc, t_no_recv_posted);
    tcase_add_test(tc, t_write);
    tcase_add_test(tc, t_write_then_send);
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
