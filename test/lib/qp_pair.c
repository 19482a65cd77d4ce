/* test/lib/qp_pair.h: a connected QP pair for the emu/qp tests. */
#include "test/lib/qp_pair.h"

#include "test/lib/clock.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

void qp_lock(struct qp_side *s)
{
    pthread_mutex_lock(&s->m);
}

void qp_unlock(struct qp_side *s)
{
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->m);
}

int qp_get_ns(struct qp_side *s)
{
    pthread_mutex_lock(&s->m);
    int n = s->ns;
    pthread_mutex_unlock(&s->m);
    return n;
}

int qp_get_nr(struct qp_side *s)
{
    pthread_mutex_lock(&s->m);
    int n = s->nr;
    pthread_mutex_unlock(&s->m);
    return n;
}

static void on_send_done(void *ctx, const struct emu_cqe *cqe)
{
    struct qp_side *s = ctx;
    qp_lock(s);
    if (s->ns < QP_MAXC)
        s->scq[s->ns] = *cqe;
    s->ns++;
    qp_unlock(s);
}

static void on_recv_done(void *ctx, const struct emu_cqe *cqe)
{
    struct qp_side *s = ctx;
    qp_lock(s);
    if (s->chk_buf && cqe->status == EMU_WC_SUCCESS &&
        memcmp(s->chk_buf, s->chk_ref, s->chk_len) != 0)
        s->chk_bad++;
    if (s->nr < QP_MAXC)
        s->rcq[s->nr] = *cqe;
    s->nr++;
    atomic_fetch_add(&s->nr_atomic, 1);
    qp_unlock(s);
}

static void on_fatal(void *ctx, const struct emu_qp_fatal *f)
{
    struct qp_side *s = ctx;
    qp_lock(s);
    s->fatal = true;
    s->f = *f;
    qp_unlock(s);
}

static const struct emu_qp_ops qp_qops = {on_send_done, on_recv_done, on_fatal};

static void on_event(struct emu_conn *c, const struct emu_conn_event *ev, void *ctx)
{
    struct qp_side *s = ctx;
    if (ev->type == EMU_CONN_ESTABLISHED) {
        int rc = s->raw ? 0 : emu_qp_attach(s->qp, c, (uint64_t)(uintptr_t)c);
        qp_lock(s);
        s->established = rc == 0 ? 1 : -1;
        qp_unlock(s);
        return;
    }
    emu_qp_flush(s->qp);
    qp_lock(s);
    s->terminal++;
    s->term_type = ev->type;
    s->term_err = ev->err;
    qp_unlock(s);
}

static int on_rx(struct emu_conn *c, int fd, void *ctx)
{
    struct qp_side *s = ctx;
    atomic_fetch_add(&s->rx_hook_calls, 1);
    if (!s->raw)
        return emu_qp_rx(s->qp, c, fd);
    qp_lock(s);
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
    qp_unlock(s);
    return rc;
}

static void on_tx(struct emu_conn *c, void *ctx)
{
    (void)c;
    emu_qp_tx(((struct qp_side *)ctx)->qp);
}

static void on_detach(struct emu_conn *c, void *ctx)
{
    (void)c;
    emu_qp_detach(((struct qp_side *)ctx)->qp);
}

const struct emu_conn_ops qp_cops = {.event = on_event, .rx = on_rx, .tx = on_tx,
                                         .detach = on_detach};

struct emu_conn_params qp_params;
bool qp_no_p2p;
int qp_no_caps;

static void on_request(struct emu_listener *l, const struct emu_conn_request *r, void *ctx)
{
    (void)l;
    struct qp_side *s = ctx;
    s->c = r->conn;
    ck_assert_int_eq(emu_conn_accept(r->conn, &qp_params, NULL, 0, &qp_cops, s), 0);
}

static const struct emu_listener_ops qp_lops = {.request = on_request};

void qp_deadline(struct timespec *ts, int ms)
{
    test_deadline(ts, ms);
}


struct qp_side A, B;
struct emu_listener *qp_lis;


bool qp_raw_a;

static void side_setup(struct qp_side *s, const char *name, const struct qpcfg *q)
{
    memset(s, 0, sizeof *s);
    s->raw = s == &A && qp_raw_a;
    s->name = name;
    pthread_mutex_init(&s->m, NULL);
    pthread_cond_init(&s->cv, NULL);
    s->scq = calloc(QP_MAXC, sizeof *s->scq);
    s->rcq = calloc(QP_MAXC, sizeof *s->rcq);
    ck_assert_int_eq(emu_engine_create(name, &s->e), 0);
    struct emu_mem_limits lim = {.max_pzs = 4, .max_regions = 64, .max_windows = 16};
    ck_assert_int_eq(emu_mem_table_create(&lim, &s->mt), EMU_MEM_OK);
    ck_assert_int_eq(emu_mem_pz_create(s->mt, &s->pz), EMU_MEM_OK);
    ck_assert_int_eq(emu_mem_pz_create(s->mt, &s->pz2), EMU_MEM_OK);
    struct emu_qp_attr a = {.mem = s->mt, .pz = s->pz, .max_send_wr = q->sq,
                            .max_recv_wr = q->rq, .max_sge = q->sge,
                            .max_message_size = q->max_msg, .ird = q->ird, .ord = q->ord,
                            .rfc7306 = q->rfc7306, .placement_ack = q->ib, .srq = q->srq,
                            .ops = &qp_qops, .ctx = s};
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

void qp_stall(struct qp_side *s)
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

void qp_unstall(void)
{
    pthread_mutex_lock(&stall_m);
    stall_state = 3;
    pthread_cond_broadcast(&stall_cv);
    pthread_mutex_unlock(&stall_m);
}

const struct qpcfg qp_defcfg = {.sq = 1024, .rq = 1024, .sge = 4, .ird = 8, .ord = 8};

/* Connect A -> B with QPs configured by qa/qb. */
void qp_pair_up_cfg(const struct qpcfg *qa, const struct qpcfg *qb, enum emu_crc_mode crc)
{
    side_setup(&A, "qpA", qa);
    side_setup(&B, "qpB", qb);
    struct sockaddr_in sin = {.sin_family = AF_INET};
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert_int_eq(emu_listener_create(B.e, (struct sockaddr *)&sin, sizeof sin, 0, &qp_lops,
                                         &B, &qp_lis),
                     0);
    sin.sin_port = htons(emu_listener_port(qp_lis));
    struct emu_conn_params p = {.ird = qa->ird, .ord = qa->ord, .crc = crc, .probes = qa->ib,
                                .no_p2p = qp_no_p2p, .no_caps = qp_no_caps == 1};
    qp_params = (struct emu_conn_params){.ird = qb->ird, .ord = qb->ord, .crc = crc, .probes = qb->ib,
                                        .no_caps = qp_no_caps == 2};
    ck_assert_int_eq(emu_conn_connect(A.e, (struct sockaddr *)&sin, sizeof sin, NULL, 0, &p,
                                      NULL, 0, &qp_cops, &A, &A.c),
                     0);
    ck_assert(QP_WAIT_FOR(&A, A.established != 0));
    ck_assert(QP_WAIT_FOR(&B, B.established != 0));
    ck_assert_int_eq(A.established, 1);
    ck_assert_int_eq(B.established, 1);
}

void qp_pair_up(void)
{
    qp_pair_up_cfg(&qp_defcfg, &qp_defcfg, EMU_CRC_DEFAULT);
}

static void side_teardown(struct qp_side *s)
{
    if (s->c) {
        emu_qp_unlink(s->qp);
        emu_conn_free(s->c);
    }
    emu_qp_destroy(s->qp);
    emu_engine_destroy(s->e);
    emu_mem_table_destroy(s->mt);
    free(s->scq);
    free(s->rcq);
}

void qp_pair_down(void)
{
    qp_raw_a = qp_no_p2p = false;
    qp_no_caps = 0;
    emu_listener_free(qp_lis);
    side_teardown(&A);
    side_teardown(&B);
}

uint32_t qp_reg(struct qp_side *s, void *addr, uint64_t len, struct emu_pz *pz, uint32_t acc,
                    struct emu_mr **mr)
{
    uint32_t stag = 0;
    struct emu_mr_attr ma = {.addr = addr, .length = len, .pz = pz, .access = acc,
                             .va_type = EMU_VA_ABS};
    ck_assert_int_eq(emu_mem_mr_register(s->mt, &ma, mr, &stag), EMU_MEM_OK);
    return stag;
}

void qp_fill(uint8_t *p, size_t n, unsigned seed)
{
    uint32_t x = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) {
        x = x * 1103515245u + 12345u;
        p[i] = (uint8_t)(x >> 16);
    }
}

int qp_post_send(struct qp_side *s, uint64_t cookie, void *buf, uint32_t len, uint32_t flags)
{
    struct emu_sge sg = {buf, len};
    struct emu_wr wr = {.cookie = cookie, .op = EMU_WR_SEND, .flags = flags,
                        .nsge = len ? 1 : 0, .sge = &sg};
    return emu_qp_post_send(s->qp, &wr);
}

int qp_post_rdma(struct qp_side *s, enum emu_wr_op op, uint64_t cookie, void *buf,
                     uint32_t len, uint32_t stag, uint64_t to, uint32_t flags)
{
    struct emu_sge sg = {buf, len};
    struct emu_wr wr = {.cookie = cookie, .op = op, .flags = flags, .nsge = len ? 1 : 0,
                        .sge = &sg, .remote_stag = stag, .remote_to = to};
    return emu_qp_post_send(s->qp, &wr);
}

