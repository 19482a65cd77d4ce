/* test/lib/conn_fixture.h: engines, recording sinks and listeners for the emu/conn tests. */
#include "test/lib/conn_fixture.h"

#include "test/lib/clock.h"

void side_init(struct side *s)
{
    memset(s, 0, sizeof *s);
    pthread_mutex_init(&s->m, NULL);
    pthread_cond_init(&s->cv, NULL);
}

void on_event(struct emu_conn *c, const struct emu_conn_event *ev, void *ctx)
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

int on_rx(struct emu_conn *c, int fd, void *ctx)
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

void on_detach(struct emu_conn *c, void *ctx)
{
    (void)c;
    struct side *s = ctx;
    pthread_mutex_lock(&s->m);
    s->detached++;
    s->events_at_detach = s->n;
    pthread_mutex_unlock(&s->m);
}

const struct emu_conn_ops ops_plain = {.event = on_event};

const struct emu_conn_ops ops_rx = {.event = on_event, .rx = on_rx, .detach = on_detach};

void deadline(struct timespec *ts, int ms)
{
    test_deadline(ts, ms);
}

bool side_wait(struct side *s, int n, int ms)
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

bool side_wait_rx(struct side *s, size_t n, int ms)
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

int side_n(struct side *s)
{
    pthread_mutex_lock(&s->m);
    int n = s->n;
    pthread_mutex_unlock(&s->m);
    return n;
}

int side_type(struct side *s, int i)
{
    pthread_mutex_lock(&s->m);
    int t = i < s->n ? s->ev[i].type : -1;
    pthread_mutex_unlock(&s->m);
    return t;
}

void sleep_ms(int ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

void lis_init(struct lis *l, enum lmode mode)
{
    memset(l, 0, sizeof *l);
    pthread_mutex_init(&l->m, NULL);
    pthread_cond_init(&l->cv, NULL);
    l->mode = mode;
    l->ops = &ops_plain;
}

void on_request(struct emu_listener *ls, const struct emu_conn_request *r, void *ctx)
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

const struct emu_listener_ops lops = {.request = on_request};

bool lis_wait(struct lis *l, int n, int ms)
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

struct emu_conn *lis_req(struct lis *l, int i)
{
    pthread_mutex_lock(&l->m);
    struct emu_conn *c = l->req[i];
    pthread_mutex_unlock(&l->m);
    return c;
}

struct sockaddr_in a4(uint16_t port)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return a;
}

struct sockaddr_in6 a6(uint16_t port)
{
    struct sockaddr_in6 a = {.sin6_family = AF_INET6, .sin6_port = htons(port)};
    a.sin6_addr = in6addr_loopback;
    return a;
}

struct emu_engine *E1, *E2;

void setup(void)
{
    ck_assert_int_eq(emu_engine_create("t-active", &E1), 0);
    ck_assert_int_eq(emu_engine_create("t-passive", &E2), 0);
}

void teardown(void)
{
    emu_engine_destroy(E1);
    emu_engine_destroy(E2);
}

struct emu_listener *listen4(struct lis *l)
{
    struct emu_listener *ls = NULL;
    struct sockaddr_in a = a4(0);
    ck_assert_int_eq(emu_listener_create(E2, (struct sockaddr *)&a, sizeof a, 0, &lops, l, &ls),
                     0);
    ck_assert_uint_ne(emu_listener_port(ls), 0);
    return ls;
}

struct emu_conn *connect4(uint16_t port, const struct emu_conn_params *p, const void *pd,
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

void pair_up(struct pair *x, const struct emu_conn_ops *ops)
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

void pair_down(struct pair *x)
{
    emu_conn_free(x->ac);
    emu_conn_free(x->p[0].c);
    emu_listener_free(x->ls);
}

void check_one_terminal(struct side *s, int type)
{
    ck_assert(side_wait(s, 2, 5000));
    sleep_ms(100);
    ck_assert_int_eq(side_n(s), 2);
    ck_assert_msg(side_type(s, 1) == type, "got %s want %s",
                  emu_conn_event_name(side_type(s, 1)), emu_conn_event_name(type));
}

int raw_connect(uint16_t port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = a4(port);
    ck_assert_int_eq(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    return fd;
}

int raw_read_to_close(int fd, uint8_t *buf, int cap, int ms)
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

int recv_exact(int fd, uint8_t *buf, int len, int ms)
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

int conn_fixture_main(Suite *s)
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
