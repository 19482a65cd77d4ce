/* Shared fixture of the emu/conn test programs (test_conn*.c): two engines
 * in one process over 127.0.0.1 / ::1, recording event sinks, a listener
 * owner that answers manually or automatically, raw-socket helpers. Header
 * only (static inline), since every Check program is one .c file. */
#ifndef SOFTDAT_TEST_CONN_FIXTURE_H
#define SOFTDAT_TEST_CONN_FIXTURE_H

#include "emu/conn.h"
#include "emu/engine.h"

#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* ---------------------------------------------------------------- helpers */

struct evrec {
    int type, err;
    uint16_t len;
    uint8_t pd[EMU_CONN_PDATA_RX_MAX];
};

struct side {
    pthread_mutex_t m;
    pthread_cond_t cv;
    int n;
    struct evrec ev[8];
    struct emu_conn *c;
    uint8_t rx[4096];
    size_t rxlen;
    int rx_calls;
    bool free_on_established; /* free the conn from inside the callback */
    bool freed;
    int detached;             /* ops.detach calls */
    int events_at_detach;
};

static inline void side_init(struct side *s)
{
    memset(s, 0, sizeof *s);
    pthread_mutex_init(&s->m, NULL);
    pthread_cond_init(&s->cv, NULL);
}

static inline void on_event(struct emu_conn *c, const struct emu_conn_event *ev, void *ctx)
{
    struct side *s = ctx;
    pthread_mutex_lock(&s->m);
    if (s->n < 8) {
        struct evrec *r = &s->ev[s->n];
        r->type = ev->type;
        r->err = ev->err;
        r->len = ev->pdata_len;
        if (ev->pdata_len)
            memcpy(r->pd, ev->pdata, ev->pdata_len);
    }
    s->n++;
    bool do_free = s->free_on_established && ev->type == EMU_CONN_ESTABLISHED;
    if (do_free)
        s->freed = true;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->m);
    if (do_free)
        emu_conn_free(c); /* deferred by the conn until this callback returns */
}

static inline int on_rx(struct emu_conn *c, int fd, void *ctx)
{
    (void)c;
    struct side *s = ctx;
    pthread_mutex_lock(&s->m);
    s->rx_calls++;
    int rc = EMU_RX_OK;
    for (int i = 0; i < 64; i++) {
        ssize_t n = recv(fd, s->rx + s->rxlen, sizeof s->rx - s->rxlen, 0);
        if (n > 0) {
            s->rxlen += (size_t)n;
            continue;
        }
        if (n == 0)
            rc = EMU_RX_EOF;
        else if (errno != EAGAIN)
            rc = -errno;
        break;
    }
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->m);
    return rc;
}

static inline void on_detach(struct emu_conn *c, void *ctx)
{
    (void)c;
    struct side *s = ctx;
    pthread_mutex_lock(&s->m);
    s->detached++;
    s->events_at_detach = s->n;
    pthread_mutex_unlock(&s->m);
}

static const struct emu_conn_ops ops_plain __attribute__((unused)) = {.event = on_event};
static const struct emu_conn_ops ops_rx __attribute__((unused)) = {.event = on_event, .rx = on_rx, .detach = on_detach};

static inline void deadline(struct timespec *ts, int ms)
{
    clock_gettime(CLOCK_REALTIME, ts);
    ts->tv_sec += ms / 1000;
    ts->tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000L;
    }
}

/* Wait until s has at least n events (bounded). */
static inline bool side_wait(struct side *s, int n, int ms)
{
    struct timespec ts;
    deadline(&ts, ms);
    pthread_mutex_lock(&s->m);
    while (s->n < n)
        if (pthread_cond_timedwait(&s->cv, &s->m, &ts) != 0)
            break;
    bool ok = s->n >= n;
    pthread_mutex_unlock(&s->m);
    return ok;
}

static inline bool side_wait_rx(struct side *s, size_t n, int ms)
{
    struct timespec ts;
    deadline(&ts, ms);
    pthread_mutex_lock(&s->m);
    while (s->rxlen < n)
        if (pthread_cond_timedwait(&s->cv, &s->m, &ts) != 0)
            break;
    bool ok = s->rxlen >= n;
    pthread_mutex_unlock(&s->m);
    return ok;
}

static inline int side_n(struct side *s)
{
    pthread_mutex_lock(&s->m);
    int n = s->n;
    pthread_mutex_unlock(&s->m);
    return n;
}

static inline int side_type(struct side *s, int i)
{
    pthread_mutex_lock(&s->m);
    int t = i < s->n ? s->ev[i].type : -1;
    pthread_mutex_unlock(&s->m);
    return t;
}

static inline void sleep_ms(int ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

enum lmode { L_MANUAL, L_ACCEPT, L_REJECT, L_RSP };

struct lis {
    pthread_mutex_t m;
    pthread_cond_t cv;
    enum lmode mode;
    int n;
    struct emu_conn *req[512];
    uint8_t pd[EMU_CONN_PDATA_RX_MAX];
    uint16_t pdlen;
    char peer[64];
    uint16_t peer_ird, peer_ord;
    bool peer_marker;
    uint32_t peer_caps;
    /* auto-accept */
    struct side *sides;
    int nsides;
    uint8_t apd[EMU_CONN_PDATA_MAX];
    uint16_t apd_len;
    struct emu_conn_params params;
    const struct emu_conn_ops *ops;
    int accept_rc;
};

static inline void lis_init(struct lis *l, enum lmode mode)
{
    memset(l, 0, sizeof *l);
    pthread_mutex_init(&l->m, NULL);
    pthread_cond_init(&l->cv, NULL);
    l->mode = mode;
    l->ops = &ops_plain;
}

static inline void on_request(struct emu_listener *ls, const struct emu_conn_request *r, void *ctx)
{
    struct lis *l = ctx;
    pthread_mutex_lock(&l->m);
    int idx = l->n;
    if (l->n < 512)
        l->req[l->n] = r->conn;
    l->n++;
    if (r->pdata_len)
        memcpy(l->pd, r->pdata, r->pdata_len);
    l->pdlen = r->pdata_len;
    emu_sockaddr_str(r->peer, l->peer, sizeof l->peer);
    l->peer_ird = r->peer_ird;
    l->peer_ord = r->peer_ord;
    l->peer_marker = r->peer_marker;
    l->peer_caps = r->peer_caps;
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->m);
    /* Answer from the engine thread itself: must not deadlock. */
    if (l->mode == L_RSP) {
        /* reserved service point: one request, then stop listening, all
         * from inside the callback */
        emu_listener_free(ls);
        if (idx < l->nsides) {
            l->sides[idx].c = r->conn;
            emu_conn_accept(r->conn, NULL, NULL, 0, l->ops, &l->sides[idx]);
        }
    } else if (l->mode == L_ACCEPT && idx < l->nsides) {
        l->sides[idx].c = r->conn;
        int rc = emu_conn_accept(r->conn, &l->params, l->apd, l->apd_len, l->ops,
                                 &l->sides[idx]);
        if (rc)
            l->accept_rc = rc;
    } else if (l->mode == L_REJECT) {
        emu_conn_reject(r->conn, l->apd, l->apd_len);
    }
}

static const struct emu_listener_ops lops __attribute__((unused)) = {.request = on_request};

static inline bool lis_wait(struct lis *l, int n, int ms)
{
    struct timespec ts;
    deadline(&ts, ms);
    pthread_mutex_lock(&l->m);
    while (l->n < n)
        if (pthread_cond_timedwait(&l->cv, &l->m, &ts) != 0)
            break;
    bool ok = l->n >= n;
    pthread_mutex_unlock(&l->m);
    return ok;
}

static inline struct emu_conn *lis_req(struct lis *l, int i)
{
    pthread_mutex_lock(&l->m);
    struct emu_conn *c = l->req[i];
    pthread_mutex_unlock(&l->m);
    return c;
}

static inline struct sockaddr_in a4(uint16_t port)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return a;
}

static inline struct sockaddr_in6 a6(uint16_t port)
{
    struct sockaddr_in6 a = {.sin6_family = AF_INET6, .sin6_port = htons(port)};
    a.sin6_addr = in6addr_loopback;
    return a;
}

static struct emu_engine *E1, *E2;

static inline void setup(void)
{
    ck_assert_int_eq(emu_engine_create("t-active", &E1), 0);
    ck_assert_int_eq(emu_engine_create("t-passive", &E2), 0);
}

static inline void teardown(void)
{
    emu_engine_destroy(E1);
    emu_engine_destroy(E2);
}

static inline struct emu_listener *listen4(struct lis *l)
{
    struct emu_listener *ls = NULL;
    struct sockaddr_in a = a4(0);
    ck_assert_int_eq(emu_listener_create(E2, (struct sockaddr *)&a, sizeof a, 0, &lops, l, &ls),
                     0);
    ck_assert_uint_ne(emu_listener_port(ls), 0);
    return ls;
}

static inline struct emu_conn *connect4(uint16_t port, const struct emu_conn_params *p, const void *pd,
                                 uint16_t len, const struct emu_conn_ops *ops, struct side *s)
{
    struct sockaddr_in a = a4(port);
    struct emu_conn *c = NULL;
    ck_assert_int_eq(emu_conn_connect(E1, (struct sockaddr *)&a, sizeof a, NULL, 0, p, pd, len,
                                      ops, s, &c),
                     0);
    s->c = c;
    return c;
}

/* Establish one connection pair through an auto-accepting listener. */
struct pair {
    struct lis l;
    struct emu_listener *ls;
    struct side a, p[1];
    struct emu_conn *ac;
};

static inline void pair_up(struct pair *x, const struct emu_conn_ops *ops)
{
    lis_init(&x->l, L_ACCEPT);
    x->l.sides = x->p;
    x->l.nsides = 1;
    x->l.ops = ops;
    side_init(&x->a);
    side_init(&x->p[0]);
    x->ls = listen4(&x->l);
    x->ac = connect4(emu_listener_port(x->ls), NULL, NULL, 0, ops, &x->a);
    ck_assert(side_wait(&x->a, 1, 5000));
    ck_assert(side_wait(&x->p[0], 1, 5000));
    ck_assert_int_eq(x->a.ev[0].type, EMU_CONN_ESTABLISHED);
    ck_assert_int_eq(x->p[0].ev[0].type, EMU_CONN_ESTABLISHED);
}

static inline void pair_down(struct pair *x)
{
    emu_conn_free(x->ac);
    emu_conn_free(x->p[0].c);
    emu_listener_free(x->ls);
}

static inline void check_one_terminal(struct side *s, int type)
{
    ck_assert(side_wait(s, 2, 5000));
    sleep_ms(100);
    ck_assert_int_eq(side_n(s), 2);
    ck_assert_msg(side_type(s, 1) == type, "got %s want %s",
                  emu_conn_event_name(side_type(s, 1)), emu_conn_event_name(type));
}

static inline int raw_connect(uint16_t port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = a4(port);
    ck_assert_int_eq(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    return fd;
}

/* Read until EOF/RST; returns bytes read, or -1 on timeout. */
static inline int raw_read_to_close(int fd, uint8_t *buf, int cap, int ms)
{
    int got = 0;
    for (int i = 0; i < ms / 10; i++) {
        struct pollfd pf = {.fd = fd, .events = POLLIN};
        if (poll(&pf, 1, 10) <= 0)
            continue;
        ssize_t n = recv(fd, buf + got, (size_t)(cap - got), 0);
        if (n <= 0)
            return got;
        got += (int)n;
        if (got >= cap)
            return got;
    }
    return -1;
}

static inline int recv_exact(int fd, uint8_t *buf, int len, int ms)
{
    int got = 0;
    for (int i = 0; i < ms / 10 && got < len; i++) {
        struct pollfd pf = {.fd = fd, .events = POLLIN};
        if (poll(&pf, 1, 10) <= 0)
            continue;
        ssize_t n = recv(fd, buf + got, (size_t)(len - got), 0);
        if (n <= 0)
            break;
        got += (int)n;
    }
    return got;
}

/* Run one suite (the fixture: fresh engines per test). */
static inline int conn_fixture_main(Suite *s)
{
    /* Some checks compare raw handshake bytes that depend on the CRC policy;
     * others time the refused-connect retry window. */
    unsetenv("SOFTDAT_CRC");
    unsetenv("SOFTDAT_CONNECT_RETRY_MS");
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

#endif
