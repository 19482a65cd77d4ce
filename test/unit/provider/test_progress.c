/* Consumer-driven receive progress (lib/provider/progress.h): a thread in
 * dat_evd_wait or spinning on dat_evd_dequeue runs the receive side of the
 * connections completing on that EVD.
 *
 * The mechanism is proven by stalling both IAs' engine threads (a job that
 * blocks on the engine) and ping-ponging anyway: every receive completion
 * must then come from the consumers, and the progress counters say so.
 * Registration follows the connection (ESTABLISHED .. terminal / EP free),
 * and an EP freed or disconnected while another thread spins on its EVD
 * must not be touched after free (run under ASan/TSan). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <errno.h>
#include <sched.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "emu/engine.h"
#include "lib/provider/ep.h"
#include "lib/provider/evd.h"
#include "lib/provider/progress.h"
#include "test/lib/prov_fixture.h"

#define MSG 64
#define NRECV 8

struct side {
    DAT_PROVIDER *p;
    DAT_IA_HANDLE ia;
    DAT_PZ_HANDLE pz;
    DAT_EVD_HANDLE cr, conn, dto;
    DAT_LMR_HANDLE lmr;
    DAT_LMR_CONTEXT lctx;
    char buf[(NRECV + 1) * MSG];
};

static void side_open(struct side *s, DAT_PROVIDER *p)
{
    memset(s, 0, sizeof *s);
    s->p = p;
    s->ia = fx_open(p, NULL);
    ck_assert_dat_ok(p->pz_create_func(s->ia, &s->pz));
    ck_assert_dat_ok(p->evd_create_func(s->ia, 16, DAT_HANDLE_NULL, DAT_EVD_CR_FLAG, &s->cr));
    ck_assert_dat_ok(p->evd_create_func(s->ia, 16, DAT_HANDLE_NULL, DAT_EVD_CONNECTION_FLAG, &s->conn));
    ck_assert_dat_ok(p->evd_create_func(s->ia, 1024, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &s->dto));
    DAT_REGION_DESCRIPTION rd;
    rd.for_va = s->buf;
    DAT_RMR_CONTEXT rmc;
    DAT_VLEN sz;
    DAT_VADDR va;
    ck_assert_dat_ok(p->lmr_create_func(s->ia, DAT_MEM_TYPE_VIRTUAL, rd, sizeof s->buf, s->pz,
                                        DAT_MEM_PRIV_ALL_FLAG, DAT_VA_TYPE_VA, &s->lmr, &s->lctx, &rmc, &sz,
                                        &va));
}

static void side_close(struct side *s)
{
    ck_assert_dat_ok(s->p->ia_close_func(s->ia, DAT_CLOSE_ABRUPT_FLAG));
}

static DAT_EP_HANDLE mk_ep(struct side *s)
{
    DAT_EP_HANDLE ep = DAT_HANDLE_NULL;
    ck_assert_dat_ok(s->p->ep_create_func(s->ia, s->pz, s->dto, s->dto, s->conn, NULL, &ep));
    return ep;
}

static DAT_EVENT wait_ev(struct side *s, DAT_EVD_HANDLE evd, DAT_EVENT_NUMBER want)
{
    DAT_EVENT ev;
    DAT_COUNT n = 0;
    memset(&ev, 0, sizeof ev);
    DAT_RETURN rc = s->p->evd_wait_func(evd, 5000000, 1, &ev, &n);
    ck_assert_msg(rc == DAT_SUCCESS, "evd_wait: 0x%x (want event 0x%x)", (unsigned)rc, (unsigned)want);
    ck_assert_msg(ev.event_number == want, "event 0x%x, want 0x%x", (unsigned)ev.event_number, (unsigned)want);
    return ev;
}

/* The next connection event of `ep` on evd (events of EPs freed in
 * earlier rounds are skipped); returns its number. */
static DAT_EVENT_NUMBER wait_conn(struct side *s, DAT_EVD_HANDLE evd, DAT_EP_HANDLE ep)
{
    for (;;) {
        DAT_EVENT ev;
        DAT_COUNT n = 0;
        DAT_RETURN rc = s->p->evd_wait_func(evd, 5000000, 1, &ev, &n);
        ck_assert_msg(rc == DAT_SUCCESS, "evd_wait: 0x%x", (unsigned)rc);
        if (ev.event_data.connect_event_data.ep_handle == ep)
            return ev.event_number;
    }
}

static void post_recv(struct side *s, DAT_EP_HANDLE ep, int slot)
{
    DAT_LMR_TRIPLET t = {(DAT_VADDR)(uintptr_t)(s->buf + (size_t)(slot + 1) * MSG), MSG, s->lctx};
    ck_assert_dat_ok(s->p->ep_post_recv_func(ep, 1, &t, (DAT_DTO_COOKIE){.as_64 = (DAT_UINT64)slot},
                                             DAT_COMPLETION_DEFAULT_FLAG));
}

static void post_send(struct side *s, DAT_EP_HANDLE ep, uint64_t cookie)
{
    DAT_LMR_TRIPLET t = {(DAT_VADDR)(uintptr_t)s->buf, MSG, s->lctx};
    ck_assert_dat_ok(s->p->ep_post_send_func(ep, 1, &t, (DAT_DTO_COOKIE){.as_64 = cookie},
                                             DAT_COMPLETION_DEFAULT_FLAG));
}

/* Connect c's cep to s's sep (receives already posted by the caller). */
static void connect_pair(struct side *c, DAT_EP_HANDLE cep, struct side *s, DAT_EP_HANDLE sep)
{
    DAT_PSP_HANDLE psp;
    DAT_CONN_QUAL port;
    ck_assert_dat_ok(s->p->psp_create_any_func(s->ia, &port, s->cr, DAT_PSP_CONSUMER_FLAG, &psp));
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert_dat_ok(c->p->ep_connect_func(cep, (DAT_IA_ADDRESS_PTR)&a, port, 5000000, 0, NULL,
                                           DAT_QOS_BEST_EFFORT, DAT_CONNECT_DEFAULT_FLAG));
    DAT_EVENT ev = wait_ev(s, s->cr, DAT_CONNECTION_REQUEST_EVENT);
    ck_assert_dat_ok(s->p->cr_accept_func(ev.event_data.cr_arrival_event_data.cr_handle, sep, 0, NULL));
    ck_assert_int_eq(wait_conn(c, c->conn, cep), DAT_CONNECTION_EVENT_ESTABLISHED);
    ck_assert_int_eq(wait_conn(s, s->conn, sep), DAT_CONNECTION_EVENT_ESTABLISHED);
    ck_assert_dat_ok(s->p->psp_free_func(psp));
}

/* Two sides on p, an EP each with NRECV receives posted, c's connected to
 * s's. */
static void open_connected(DAT_PROVIDER *p, struct side *s, DAT_EP_HANDLE *sep, struct side *c,
                           DAT_EP_HANDLE *cep)
{
    side_open(s, p);
    side_open(c, p);
    *sep = mk_ep(s);
    *cep = mk_ep(c);
    for (int i = 0; i < NRECV; i++) {
        post_recv(s, *sep, i);
        post_recv(c, *cep, i);
    }
    connect_pair(c, *cep, s, *sep);
}

static struct sd_evq *evq_of(DAT_EVD_HANDLE h)
{
    return &((struct sd_evd *)h)->q;
}

static bool armed(DAT_EVD_HANDLE h)
{
    return atomic_load(&evq_of(h)->has_progress);
}

static uint64_t consumer_completions(void)
{
    struct sd_progress_stats st;
    sd_progress_get_stats(&st);
    return st.completions;
}

static uint64_t registered(void)
{
    struct sd_progress_stats st;
    sd_progress_get_stats(&st);
    return st.registered;
}

/* ------------------------------------------------------------ engine stall */

struct stall {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int entered; /* jobs blocked on an engine */
    bool release;
};

static struct stall g_stall = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, false};

static void stall_job(void *arg)
{
    struct stall *st = arg;
    pthread_mutex_lock(&st->mu);
    st->entered++;
    pthread_cond_broadcast(&st->cv);
    while (!st->release)
        pthread_cond_wait(&st->cv, &st->mu);
    pthread_mutex_unlock(&st->mu);
}

/* Block the engine threads of both sides (receive progress, timers and
 * deferred jobs all stop) until stall_end. */
static void stall_begin(struct side *a, struct side *b)
{
    g_stall.entered = 0;
    g_stall.release = false;
    struct side *sides[2] = {a, b};
    for (int i = 0; i < 2; i++) {
        struct sd_ia *ia;
        ck_assert_dat_ok(sd_ia_get(sides[i]->ia, &ia));
        ck_assert_int_eq(emu_engine_run_async(ia->engine, stall_job, &g_stall), 0);
        sd_handle_put(&ia->h);
    }
    pthread_mutex_lock(&g_stall.mu);
    while (g_stall.entered < 2)
        pthread_cond_wait(&g_stall.cv, &g_stall.mu);
    pthread_mutex_unlock(&g_stall.mu);
}

static void stall_end(void)
{
    pthread_mutex_lock(&g_stall.mu);
    g_stall.release = true;
    pthread_cond_broadcast(&g_stall.cv);
    pthread_mutex_unlock(&g_stall.mu);
}

/* ------------------------------------------------------------ ping-pong */

struct pp {
    struct side *s;
    DAT_EP_HANDLE ep;
    int iters;
    bool poll;    /* dequeue spin; else dat_evd_wait */
    bool server;
    int errors;
};

/* The next receive completion (send completions are skipped). */
static bool next_recv(struct pp *x)
{
    for (;;) {
        DAT_EVENT ev;
        DAT_RETURN rc;
        if (x->poll) {
            struct timespec t0, t1;
            clock_gettime(CLOCK_MONOTONIC, &t0);
            for (unsigned spins = 1;; spins++) {
                rc = x->s->p->evd_dequeue_func(x->s->dto, &ev);
                if (rc != SD_EVQ_EMPTY)
                    break;
                if ((spins & 1023) == 0) {
                    clock_gettime(CLOCK_MONOTONIC, &t1);
                    if (t1.tv_sec - t0.tv_sec > 10)
                        return false;
                }
            }
        } else {
            DAT_COUNT n;
            rc = x->s->p->evd_wait_func(x->s->dto, 10000000, 1, &ev, &n);
        }
        if (rc != DAT_SUCCESS || ev.event_number != DAT_DTO_COMPLETION_EVENT ||
            ev.event_data.dto_completion_event_data.status != DAT_DTO_SUCCESS)
            return false;
        if (ev.event_data.dto_completion_event_data.operation == DAT_DTO_RECEIVE) {
            int slot = (int)ev.event_data.dto_completion_event_data.user_cookie.as_64;
            post_recv(x->s, x->ep, slot);
            return true;
        }
    }
}

static void *pp_main(void *arg)
{
    struct pp *x = arg;
    for (int i = 0; i < x->iters; i++) {
        if (!x->server)
            post_send(x->s, x->ep, (uint64_t)i);
        if (!next_recv(x)) {
            x->errors++;
            break;
        }
        if (x->server)
            post_send(x->s, x->ep, (uint64_t)i);
    }
    return NULL;
}

/* Ping-pong `iters` messages with both engines stalled: only consumer
 * progress can complete the receives. */
static void pingpong_stalled(bool poll, int iters)
{
    DAT_PROVIDER *p = fx_provider(poll ? "t-prog-poll" : "t-prog-wait", "lo", DAT_FALSE);
    struct side s, c;
    side_open(&s, p);
    side_open(&c, p);
    DAT_EP_HANDLE sep = mk_ep(&s), cep = mk_ep(&c);
    ck_assert(!armed(s.dto) && !armed(c.dto)); /* nothing connected: fast path */
    for (int i = 0; i < NRECV; i++) {
        post_recv(&s, sep, i);
        post_recv(&c, cep, i);
    }
    uint64_t reg0 = registered();
    connect_pair(&c, cep, &s, sep);
    ck_assert_uint_eq(registered(), reg0 + 2); /* one EVD each (recv == request) */
    ck_assert(armed(s.dto) && armed(c.dto));

    stall_begin(&s, &c);
    uint64_t before = consumer_completions();
    struct pp sx = {&s, sep, iters, poll, true, 0}, cx = {&c, cep, iters, poll, false, 0};
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, pp_main, &sx), 0);
    pp_main(&cx);
    pthread_join(th, NULL);
    uint64_t made = consumer_completions() - before;
    stall_end();
    ck_assert_int_eq(cx.errors, 0);
    ck_assert_int_eq(sx.errors, 0);
    /* Every receive (2 per round trip) was completed by a consumer. */
    ck_assert_uint_ge(made, 2u * (uint64_t)iters);

    ck_assert_dat_ok(p->ep_disconnect_func(cep, DAT_CLOSE_GRACEFUL_FLAG));
    wait_ev(&c, c.conn, DAT_CONNECTION_EVENT_DISCONNECTED);
    wait_ev(&s, s.conn, DAT_CONNECTION_EVENT_DISCONNECTED);
    ck_assert_uint_eq(registered(), reg0); /* terminal path unregistered both */
    ck_assert(!armed(s.dto) && !armed(c.dto));
    side_close(&c);
    side_close(&s);
    ck_assert_uint_eq(sd_handle_live_count(), 0);
}

START_TEST(pingpong_dequeue_engines_stalled)
{
    pingpong_stalled(true, 200);
}
END_TEST

START_TEST(pingpong_wait_engines_stalled)
{
    /* SOFTDAT_POLL_US is 200 ms in this program (main): the waiter's spin
     * window outlasts each round trip. */
    pingpong_stalled(false, 200);
}
END_TEST

/* With the default configuration and live engines, a blocking ping-pong
 * works whatever the split of the work between engine and consumer. */
START_TEST(pingpong_wait_engines_live)
{
    DAT_PROVIDER *p = fx_provider("t-prog-live", "lo", DAT_FALSE);
    struct side s, c;
    DAT_EP_HANDLE sep, cep;
    open_connected(p, &s, &sep, &c, &cep);
    struct pp sx = {&s, sep, 500, false, true, 0}, cx = {&c, cep, 500, false, false, 0};
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, pp_main, &sx), 0);
    pp_main(&cx);
    pthread_join(th, NULL);
    ck_assert_int_eq(cx.errors, 0);
    ck_assert_int_eq(sx.errors, 0);
    /* Free a connected EP: EP free unregisters (no terminal event; the
     * peer's terminal event may unregister the other one at any time). */
    uint64_t reg = registered();
    ck_assert_uint_ge(reg, 2);
    ck_assert_dat_ok(p->ep_free_func(sep));
    ck_assert_uint_le(registered(), reg - 1);
    side_close(&c);
    side_close(&s);
    ck_assert_uint_eq(registered(), reg - 2);
    ck_assert_uint_eq(sd_handle_live_count(), 0);
}
END_TEST

/* ------------------------------------------------------------ established */

/* Holds the engine thread of the EP `ep` in on_established at the hook
 * (sd_ep_test_established_hook) until released, bounded. */
static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct sd_ep *ep;
    bool entered, release;
} g_hold = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, NULL, false, false};

static void hold_established(struct sd_ep *ep)
{
    pthread_mutex_lock(&g_hold.mu);
    if (ep == g_hold.ep) {
        g_hold.entered = true;
        pthread_cond_broadcast(&g_hold.cv);
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += 10;
        while (!g_hold.release && pthread_cond_timedwait(&g_hold.cv, &g_hold.mu, &until) == 0)
            ;
    }
    pthread_mutex_unlock(&g_hold.mu);
}

static void hold_release(void)
{
    pthread_mutex_lock(&g_hold.mu);
    g_hold.release = true;
    pthread_cond_broadcast(&g_hold.cv);
    pthread_mutex_unlock(&g_hold.mu);
}

/* Finding S2 (docs/reliability.md): the passive side's engine registers
 * the new connection for consumer progress and only then made the EP
 * CONNECTED. A server thread waiting on the receive EVD in between (the
 * soak's dat_scale_peer, its client sending right after ESTABLISHED)
 * completed the receive itself and answered it with a Send, which met
 * DAT_INVALID_STATE / EP_COMPLPENDING. The hook holds the engine at that
 * moment: the receive completes by consumer progress, and its answer must
 * be accepted. */
START_TEST(send_answering_receive_before_established_event)
{
    DAT_PROVIDER *p = fx_provider("t-prog-est", "lo", DAT_FALSE);
    struct side s, c;
    side_open(&s, p);
    side_open(&c, p);
    DAT_EP_HANDLE sep = mk_ep(&s), cep = mk_ep(&c);
    post_recv(&s, sep, 0);
    post_recv(&c, cep, 0);
    g_hold.ep = (struct sd_ep *)sep;
    g_hold.entered = g_hold.release = false;
    sd_ep_test_established_hook = hold_established;

    DAT_PSP_HANDLE psp;
    DAT_CONN_QUAL port;
    ck_assert_dat_ok(p->psp_create_any_func(s.ia, &port, s.cr, DAT_PSP_CONSUMER_FLAG, &psp));
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert_dat_ok(p->ep_connect_func(cep, (DAT_IA_ADDRESS_PTR)&a, port, 5000000, 0, NULL,
                                        DAT_QOS_BEST_EFFORT, DAT_CONNECT_DEFAULT_FLAG));
    DAT_EVENT ev = wait_ev(&s, s.cr, DAT_CONNECTION_REQUEST_EVENT);
    ck_assert_dat_ok(p->cr_accept_func(ev.event_data.cr_arrival_event_data.cr_handle, sep, 0, NULL));
    /* The server's engine is held (its EP registered for progress, no
     * ESTABLISHED event yet); the client's is not: it connects and sends. */
    pthread_mutex_lock(&g_hold.mu);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 5;
    while (!g_hold.entered && pthread_cond_timedwait(&g_hold.cv, &g_hold.mu, &until) == 0)
        ;
    bool entered = g_hold.entered;
    pthread_mutex_unlock(&g_hold.mu);
    ck_assert_msg(entered, "the server's connection never reached the hook");
    ck_assert_int_eq(wait_conn(&c, c.conn, cep), DAT_CONNECTION_EVENT_ESTABLISHED);
    uint64_t before = consumer_completions();
    post_send(&c, cep, 1);

    /* The server's thread completes the receive (its engine is held) and
     * answers at once, as an echo server does. */
    DAT_COUNT n = 0;
    DAT_RETURN rc;
    do {
        rc = p->evd_wait_func(s.dto, 5000000, 1, &ev, &n);
    } while (rc == DAT_SUCCESS && ev.event_data.dto_completion_event_data.operation != DAT_DTO_RECEIVE);
    DAT_RETURN got = rc, sent = DAT_INTERNAL_ERROR;
    DAT_EP_STATE st = DAT_EP_STATE_UNCONNECTED;
    if (rc == DAT_SUCCESS) {
        ck_assert_dat_ok(p->ep_get_status_func(sep, &st, NULL, NULL));
        DAT_LMR_TRIPLET t = {(DAT_VADDR)(uintptr_t)s.buf, MSG, s.lctx};
        sent = p->ep_post_send_func(sep, 1, &t, (DAT_DTO_COOKIE){.as_64 = 2}, DAT_COMPLETION_DEFAULT_FLAG);
    }
    uint64_t made = consumer_completions() - before;
    hold_release();
    sd_ep_test_established_hook = NULL;
    ck_assert_msg(got == DAT_SUCCESS, "server receive: 0x%x", (unsigned)got);
    ck_assert_msg(ev.event_data.dto_completion_event_data.status == DAT_DTO_SUCCESS, "receive status %d",
                  (int)ev.event_data.dto_completion_event_data.status);
    ck_assert_uint_ge(made, 1); /* by the consumer: the engine was held */
    ck_assert_msg(sent == DAT_SUCCESS, "server's answering Send: 0x%x", (unsigned)sent);
    ck_assert_msg(st == DAT_EP_STATE_CONNECTED, "server EP state %d at its first receive", (int)st);

    /* Everything else as usual: both ESTABLISHED, the answer arrives. */
    ck_assert_int_eq(wait_conn(&s, s.conn, sep), DAT_CONNECTION_EVENT_ESTABLISHED);
    do {
        rc = p->evd_wait_func(c.dto, 5000000, 1, &ev, &n);
        ck_assert_dat_ok(rc);
        ck_assert_int_eq(ev.event_data.dto_completion_event_data.status, DAT_DTO_SUCCESS);
    } while (ev.event_data.dto_completion_event_data.operation != DAT_DTO_RECEIVE);
    ck_assert_dat_ok(p->psp_free_func(psp));
    ck_assert_dat_ok(p->ep_disconnect_func(cep, DAT_CLOSE_GRACEFUL_FLAG));
    ck_assert_int_eq(wait_conn(&c, c.conn, cep), DAT_CONNECTION_EVENT_DISCONNECTED);
    ck_assert_int_eq(wait_conn(&s, s.conn, sep), DAT_CONNECTION_EVENT_DISCONNECTED);
    side_close(&c);
    side_close(&s);
    ck_assert_uint_eq(sd_handle_live_count(), 0);
}
END_TEST

/* ------------------------------------------------------------ lifetime */

struct spinner {
    struct side *s;
    bool wait; /* dat_evd_wait with a short timeout (spin window, then asleep on the sockets) */
    atomic_bool stop;
    unsigned long spins;
};

static void *spin_main(void *arg)
{
    struct spinner *sp = arg;
    while (!atomic_load(&sp->stop)) {
        DAT_EVENT ev;
        DAT_COUNT n;
        /* flushed receives come and go */
        if (sp->wait)
            (void)sp->s->p->evd_wait_func(sp->s->dto, 2000, 1, &ev, &n);
        else
            (void)sp->s->p->evd_dequeue_func(sp->s->dto, &ev);
        sp->spins++;
    }
    return NULL;
}

/* Threads dequeue from (or wait on) both DTO EVDs, driving progress of
 * whatever is registered, while EPs are connected, disconnected, reset and
 * freed under them. ASan/TSan builds catch any use of a freed QP or EP;
 * a connection freed while established and released by its engine while
 * a consumer still passed over the QP crashed even without them
 * (test_qp_lifetime, docs/reliability.md). */
static void lifecycle_under_consumers(const char *ia_name, bool wait)
{
    DAT_PROVIDER *p = fx_provider(ia_name, "lo", DAT_FALSE);
    struct side s, c;
    side_open(&s, p);
    side_open(&c, p);
    uint64_t reg0 = registered();
    struct spinner ss = {.s = &s, .wait = wait}, cs = {.s = &c, .wait = wait};
    atomic_init(&ss.stop, false);
    atomic_init(&cs.stop, false);
    pthread_t t1, t2;
    ck_assert_int_eq(pthread_create(&t1, NULL, spin_main, &ss), 0);
    ck_assert_int_eq(pthread_create(&t2, NULL, spin_main, &cs), 0);
    for (int round = 0; round < 12; round++) {
        DAT_EP_HANDLE sep = mk_ep(&s), cep = mk_ep(&c);
        for (int i = 0; i < NRECV; i++) {
            post_recv(&s, sep, i);
            post_recv(&c, cep, i);
        }
        connect_pair(&c, cep, &s, sep);
        for (int i = 0; i < 4; i++)
            post_send(&c, cep, (uint64_t)i); /* the consumers reap these */
        switch (round % 3) {
        case 0: /* free both while connected: no terminal event */
            ck_assert_dat_ok(p->ep_free_func(cep));
            ck_assert_dat_ok(p->ep_free_func(sep));
            break;
        case 1: /* abrupt disconnect: terminal path, then reset and free */
            ck_assert_dat_ok(p->ep_disconnect_func(cep, DAT_CLOSE_ABRUPT_FLAG));
            ck_assert_int_eq(wait_conn(&c, c.conn, cep), DAT_CONNECTION_EVENT_DISCONNECTED);
            ck_assert_int_eq(wait_conn(&s, s.conn, sep), DAT_CONNECTION_EVENT_DISCONNECTED);
            ck_assert_dat_ok(p->ep_reset_func(cep));
            ck_assert_dat_ok(p->ep_free_func(cep));
            ck_assert_dat_ok(p->ep_free_func(sep));
            break;
        default: /* the server frees, the client sees the peer go */
            ck_assert_dat_ok(p->ep_free_func(sep));
            DAT_EVENT_NUMBER e = wait_conn(&c, c.conn, cep);
            ck_assert(e == DAT_CONNECTION_EVENT_DISCONNECTED || e == DAT_CONNECTION_EVENT_BROKEN);
            ck_assert_dat_ok(p->ep_free_func(cep));
            break;
        }
        ck_assert_uint_eq(registered(), reg0);
    }
    atomic_store(&ss.stop, true);
    atomic_store(&cs.stop, true);
    pthread_join(t1, NULL);
    pthread_join(t2, NULL);
    ck_assert_uint_gt(ss.spins + cs.spins, 0);
    ck_assert(!armed(s.dto) && !armed(c.dto));
    side_close(&c);
    side_close(&s);
    ck_assert_uint_eq(sd_handle_live_count(), 0);
}

START_TEST(free_and_disconnect_while_spinning)
{
    lifecycle_under_consumers("t-prog-life", false);
}
END_TEST

START_TEST(free_and_disconnect_while_waiting)
{
    lifecycle_under_consumers("t-prog-life-w", true);
}
END_TEST

/* Abrupt IA close while a thread is blocked in dat_evd_wait polling a
 * connected EP's QP: the EP is torn down (unregistered) under the waiter,
 * which returns DAT_ABORT. */
struct blocked {
    struct side *s;
    DAT_RETURN rc;
};

static void *blocked_main(void *arg)
{
    struct blocked *b = arg;
    DAT_EVENT ev;
    DAT_COUNT n;
    b->rc = b->s->p->evd_wait_func(b->s->dto, 10000000, 1, &ev, &n);
    return NULL;
}

START_TEST(ia_close_under_polling_waiter)
{
    DAT_PROVIDER *p = fx_provider("t-prog-close", "lo", DAT_FALSE);
    struct side s, c;
    side_open(&s, p);
    side_open(&c, p);
    DAT_EP_HANDLE sep = mk_ep(&s), cep = mk_ep(&c);
    post_recv(&s, sep, 0);
    connect_pair(&c, cep, &s, sep);
    struct blocked b = {&s, DAT_SUCCESS};
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, blocked_main, &b), 0);
    struct sd_evq_info info;
    for (int i = 0; i < 2000; i++) { /* until the waiter is in */
        sd_evq_info(evq_of(s.dto), &info);
        if (info.waiter)
            break;
        usleep(1000);
    }
    ck_assert(info.waiter);
    usleep(20000); /* well inside its 200 ms poll window */
    side_close(&s);
    pthread_join(th, NULL);
    ck_assert_int_eq(DAT_GET_TYPE(b.rc), DAT_ABORT);
    side_close(&c);
    ck_assert_uint_eq(sd_handle_live_count(), 0);
}
END_TEST

/* ------------------------------------------------------------ adaptive spin */

static atomic_int g_calls;

static int idle_hook(void *arg, struct sd_evq *q)
{
    (void)arg;
    (void)q;
    atomic_fetch_add(&g_calls, 1);
    return 0; /* never produces anything */
}

/* A waiter whose spin windows never pay stops spinning for a while (the
 * hook is then called once before sleeping), and spins again later. */
START_TEST(adaptive_spin_backs_off)
{
    struct sd_evq q;
    ck_assert_int_eq(sd_evq_init(&q, 8, (DAT_EVD_HANDLE)&q), DAT_SUCCESS);
    sd_evq_set_progress(&q, idle_hook, NULL, 2000); /* 2 ms window, 5 ms waits */
    DAT_EVENT e;
    DAT_COUNT n;
    /* Spin windows that never pay: after SD_EVQ_SPIN_FAILS of them the
     * waiter stops spinning (the hook runs once, then it sleeps). On a busy
     * machine a preempted spin may not count as a failed one, so allow a
     * few more waits before the back-off engages. */
    int skipped_at = -1;
    for (int i = 0; i < 10 * SD_EVQ_SPIN_FAILS && skipped_at < 0; i++) {
        atomic_store(&g_calls, 0);
        ck_assert_int_eq(DAT_GET_TYPE(sd_evq_wait(&q, 5000, 1, &e, &n)), DAT_TIMEOUT_EXPIRED);
        if (atomic_load(&g_calls) == 1)
            skipped_at = i;
    }
    ck_assert_int_ge(skipped_at, 0);
    /* The rest of the back-off: no spinning, whatever the timing. */
    for (int i = 1; i < SD_EVQ_SPIN_SKIP; i++) {
        atomic_store(&g_calls, 0);
        ck_assert_int_eq(DAT_GET_TYPE(sd_evq_wait(&q, 1000, 1, &e, &n)), DAT_TIMEOUT_EXPIRED);
        ck_assert_int_eq(atomic_load(&g_calls), 1); /* once, then slept */
    }
    /* Then it spins again (within a few waits, in case one is preempted). */
    int spun = 0;
    for (int i = 0; i < 3 && !spun; i++) {
        atomic_store(&g_calls, 0);
        ck_assert_int_eq(DAT_GET_TYPE(sd_evq_wait(&q, 5000, 1, &e, &n)), DAT_TIMEOUT_EXPIRED);
        spun = atomic_load(&g_calls) > 1;
    }
    ck_assert(spun);
    sd_evq_set_progress(&q, NULL, NULL, 0);
    ck_assert_int_eq(sd_evq_fini(&q), DAT_SUCCESS);
}
END_TEST

/* ------------------------------------------------------------ consumer transmit */

static double now_s(void);
static void disconnect_pair(struct side *c, DAT_EP_HANDLE cep, struct side *s);

/* More than the two sockets hold: 16 MiB against a loopback receive
 * buffer of 8 MiB (SOFTDAT_TCP_RCVBUF) and a send buffer of up to 4 MiB. */
#define BIG (16u << 20)

static DAT_LMR_CONTEXT reg_big(struct side *x, char *buf, DAT_LMR_HANDLE *lmr)
{
    DAT_REGION_DESCRIPTION rd;
    rd.for_va = buf;
    DAT_LMR_CONTEXT lctx;
    DAT_RMR_CONTEXT rmc;
    DAT_VLEN sz;
    DAT_VADDR va;
    ck_assert_dat_ok(x->p->lmr_create_func(x->ia, DAT_MEM_TYPE_VIRTUAL, rd, BIG, x->pz,
                                           DAT_MEM_PRIV_ALL_FLAG, DAT_VA_TYPE_VA, lmr, &lctx, &rmc,
                                           &sz, &va));
    return lctx;
}

/* A Send larger than the sockets hold meets a full socket: its sender's
 * send side waits for space. A thread polling the EVD continues it itself
 * (emu/qp.c consumer_tx), as it reads for the receiver: with both engines
 * stalled the whole 4 MiB still arrives, byte for byte. */
START_TEST(large_send_continues_from_polling_thread)
{
    DAT_PROVIDER *p = fx_provider("t-prog-bigtx", "lo", DAT_FALSE);
    struct side s, c;
    side_open(&s, p);
    side_open(&c, p);
    char *src = malloc(BIG), *dst = calloc(1, BIG);
    ck_assert(src != NULL && dst != NULL);
    for (unsigned i = 0; i < BIG; i++)
        src[i] = (char)(i * 131u + 7u);
    DAT_LMR_HANDLE sl, cl;
    DAT_LMR_CONTEXT sctx = reg_big(&s, src, &sl), cctx = reg_big(&c, dst, &cl);
    DAT_EP_HANDLE sep = mk_ep(&s), cep = mk_ep(&c);
    DAT_LMR_TRIPLET rt = {(DAT_VADDR)(uintptr_t)dst, BIG, cctx};
    ck_assert_dat_ok(p->ep_post_recv_func(cep, 1, &rt, (DAT_DTO_COOKIE){.as_64 = 1},
                                          DAT_COMPLETION_DEFAULT_FLAG));
    connect_pair(&c, cep, &s, sep);

    stall_begin(&s, &c);
    uint64_t tx0 = emu_qp_consumer_tx_count();
    DAT_LMR_TRIPLET st = {(DAT_VADDR)(uintptr_t)src, BIG, sctx};
    ck_assert_dat_ok(p->ep_post_send_func(sep, 1, &st, (DAT_DTO_COOKIE){.as_64 = 2},
                                          DAT_COMPLETION_DEFAULT_FLAG));
    bool sent = false, received = false;
    double end = now_s() + 20.0;
    while ((!sent || !received) && now_s() < end) {
        DAT_EVENT ev;
        if (!received && p->evd_dequeue_func(c.dto, &ev) == DAT_SUCCESS) {
            ck_assert_int_eq(ev.event_data.dto_completion_event_data.status, DAT_DTO_SUCCESS);
            ck_assert_uint_eq(ev.event_data.dto_completion_event_data.transfered_length, BIG);
            received = true;
        }
        if (!sent && p->evd_dequeue_func(s.dto, &ev) == DAT_SUCCESS) {
            ck_assert_int_eq(ev.event_data.dto_completion_event_data.status, DAT_DTO_SUCCESS);
            sent = true;
        }
    }
    uint64_t continued = emu_qp_consumer_tx_count() - tx0;
    stall_end();
    ck_assert_msg(received && sent, "with the engines stalled: received %d, sent %d", received, sent);
    ck_assert_uint_gt(continued, 0);
    ck_assert_int_eq(memcmp(src, dst, BIG), 0);

    disconnect_pair(&c, cep, &s);
    ck_assert_dat_ok(p->lmr_free_func(sl));
    ck_assert_dat_ok(p->lmr_free_func(cl));
    side_close(&c);
    side_close(&s);
    free(src);
    free(dst);
    ck_assert_uint_eq(sd_handle_live_count(), 0);
}
END_TEST

/* ------------------------------------------------------------ sleeping waiter */

/* Until evd holds an event (no DAT call: its queue's count), at most ms
 * milliseconds. */
static bool wait_queued(DAT_EVD_HANDLE evd, int ms)
{
    for (int i = 0; i < ms && atomic_load(&evq_of(evd)->count) == 0; i++) {
        struct timespec d = {0, 1000000L};
        nanosleep(&d, NULL);
    }
    return atomic_load(&evq_of(evd)->count) > 0;
}

static uint64_t waiter_sleeps(void)
{
    struct sd_progress_stats st;
    sd_progress_get_stats(&st);
    return st.sleeps;
}

struct late_send {
    struct side *s;
    DAT_EP_HANDLE ep;
    unsigned delay_ms;
};

static void *send_late(void *arg)
{
    struct late_send *l = arg;
    struct timespec d = {0, (long)l->delay_ms * 1000000L};
    nanosleep(&d, NULL);
    post_send(l->s, l->ep, 7);
    return NULL;
}

static void disconnect_pair(struct side *c, DAT_EP_HANDLE cep, struct side *s)
{
    ck_assert_dat_ok(c->p->ep_disconnect_func(cep, DAT_CLOSE_GRACEFUL_FLAG));
    wait_ev(c, c->conn, DAT_CONNECTION_EVENT_DISCONNECTED);
    wait_ev(s, s->conn, DAT_CONNECTION_EVENT_DISCONNECTED);
}

/* The end of a test on an open_connected pair: disconnect, close both IAs,
 * nothing left behind. */
static void close_connected(struct side *c, DAT_EP_HANDLE cep, struct side *s)
{
    disconnect_pair(c, cep, s);
    side_close(c);
    side_close(s);
    ck_assert_uint_eq(sd_handle_live_count(), 0);
}

/* A thread blocked in dat_evd_wait past its spin window sleeps in poll(2)
 * on its connections' sockets (lib/provider/evq.c, progress.c): the data
 * wakes it, and it completes the receive itself, with no engine thread in
 * between. Proven with both engines stalled and a Send that comes well
 * after the waiter went to sleep: sleeping on its condition variable, the
 * waiter would wait for an engine that never comes. The sender, waiting
 * for its Send's completion (placement confirmed by the receiver's answer
 * to its probe), sleeps the same way. */
START_TEST(blocking_waiter_sleeps_on_its_sockets)
{
    setenv("SOFTDAT_POLL_US", "0", 1); /* no spin: one pass, then sleep */
    DAT_PROVIDER *p = fx_provider("t-prog-sleep", "lo", DAT_FALSE);
    struct side s, c;
    DAT_EP_HANDLE sep, cep;
    open_connected(p, &s, &sep, &c, &cep);

    stall_begin(&s, &c);
    uint64_t sleeps0 = waiter_sleeps(), made0 = consumer_completions();
    struct late_send l = {&s, sep, 300}; /* longer than any spin window here */
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, send_late, &l), 0);
    DAT_EVENT ev = wait_ev(&c, c.dto, DAT_DTO_COMPLETION_EVENT);
    pthread_join(th, NULL);
    ck_assert_int_eq(ev.event_data.dto_completion_event_data.operation, DAT_DTO_RECEIVE);
    ck_assert_int_eq(ev.event_data.dto_completion_event_data.status, DAT_DTO_SUCCESS);
    ck_assert_uint_eq(ev.event_data.dto_completion_event_data.transfered_length, MSG);
    ev = wait_ev(&s, s.dto, DAT_DTO_COMPLETION_EVENT);
    ck_assert_int_eq(ev.event_data.dto_completion_event_data.operation, DAT_DTO_SEND);
    ck_assert_int_eq(ev.event_data.dto_completion_event_data.status, DAT_DTO_SUCCESS);
    uint64_t slept = waiter_sleeps() - sleeps0, made = consumer_completions() - made0;
    stall_end();
    ck_assert_uint_gt(slept, 0);
    ck_assert_uint_ge(made, 2);

    close_connected(&c, cep, &s);
}
END_TEST

/* A waiter asleep on its sockets is woken by what wakes one asleep on its
 * condition variable: dat_evd_set_unwaitable returns it at once with
 * DAT_INVALID_STATE (through the EVD's eventfd), not at the end of its
 * sleep chunk or timeout. */
START_TEST(sleeping_waiter_woken_by_set_unwaitable)
{
    setenv("SOFTDAT_POLL_US", "0", 1);
    DAT_PROVIDER *p = fx_provider("t-prog-unwait", "lo", DAT_FALSE);
    struct side s, c;
    DAT_EP_HANDLE sep, cep;
    open_connected(p, &s, &sep, &c, &cep);
    struct blocked b = {&c, DAT_SUCCESS};
    uint64_t sleeps0 = waiter_sleeps();
    pthread_t th;
    double t0 = now_s();
    ck_assert_int_eq(pthread_create(&th, NULL, blocked_main, &b), 0);
    /* Until it sleeps on its sockets (bounded). */
    for (int i = 0; i < 5000 && waiter_sleeps() == sleeps0; i++) {
        struct timespec d = {0, 1000000L};
        nanosleep(&d, NULL);
    }
    ck_assert_uint_gt(waiter_sleeps(), sleeps0);
    ck_assert_dat_ok(p->evd_set_unwaitable_func(c.dto));
    pthread_join(th, NULL);
    ck_assert_int_eq(DAT_GET_TYPE(b.rc), DAT_INVALID_STATE);
    ck_assert_int_eq(DAT_GET_SUBTYPE(b.rc), DAT_INVALID_STATE_EVD_UNWAITABLE);
    ck_assert_msg(now_s() - t0 < 5.0, "the waiter took %.1f s to return", now_s() - t0);
    ck_assert_dat_ok(p->evd_clear_unwaitable_func(c.dto));
    close_connected(&c, cep, &s);
}
END_TEST

/* Sleeping on its sockets, an idle waiter wakes less and less often (the
 * chunk doubles up to SD_EVQ_SLEEP_CHUNK_MAX_MS). One woken in a long chunk
 * leaves with its lease cut back to a polling consumer's (the engine then
 * resumes within SOFTDAT_POLL_LEASE_US if the application does not call
 * DAT again), and the engine completes what comes next on its own. */
START_TEST(sleeping_waiter_leases_and_gives_back)
{
    setenv("SOFTDAT_POLL_US", "0", 1);
    DAT_PROVIDER *p = fx_provider("t-prog-idle", "lo", DAT_FALSE);
    struct side s, c;
    DAT_EP_HANDLE sep, cep;
    open_connected(p, &s, &sep, &c, &cep);

    /* 60 ms of nothing: chunks of 2, 4, 8, 16 ms and the rest, not 30. */
    uint64_t sleeps0 = waiter_sleeps();
    DAT_EVENT ev;
    DAT_COUNT n = 0;
    ck_assert_int_eq(DAT_GET_TYPE(p->evd_wait_func(c.dto, 60000, 1, &ev, &n)), DAT_TIMEOUT_EXPIRED);
    uint64_t slept = waiter_sleeps() - sleeps0;
    ck_assert_uint_ge(slept, 1);
    ck_assert_uint_le(slept, 8);

    /* Woken 300 ms into a wait, in a chunk of up to 64 ms. */
    struct late_send l = {&s, sep, 300};
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, send_late, &l), 0);
    ev = wait_ev(&c, c.dto, DAT_DTO_COMPLETION_EVENT);
    pthread_join(th, NULL);
    ck_assert_int_eq(ev.event_data.dto_completion_event_data.operation, DAT_DTO_RECEIVE);
    struct emu_qp *qp = ((struct sd_ep *)cep)->qp;
    ck_assert_uint_le(emu_qp_poll_lease_left_us(qp), SD_POLL_LEASE_US_DEFAULT);

    /* No DAT call on c from here: its engine completes the next Send. */
    post_send(&s, sep, 2);
    ck_assert(wait_queued(c.dto, 5000));
    close_connected(&c, cep, &s);
}
END_TEST

/* A thread that polled its DTO EVD (and so holds its connection's lease,
 * the engine parked behind it) and then waits on another EVD (the
 * connection EVD, for a disconnect) gives the lease back before it sleeps:
 * the engine reads again at once. Before, the engine stayed off the socket
 * until the lease ran out (here 1 s; by default up to 4 ms after the last
 * poll): a placement probe arriving meanwhile waited that long for its
 * answer, and a peer that closed in between saw its delivered Send
 * flushed (e2e/trace_dtest, dtest's last suppressed Send). */
static void dequeue_empty(struct side *x, DAT_EVD_HANDLE evd, int times);

struct lease_check {
    struct side *s, *c;
    DAT_EP_HANDLE sep;
    struct emu_qp *qp;
    uint64_t left_us;
    bool completed;
};

static void *check_while_waiting(void *arg)
{
    struct lease_check *k = arg;
    struct timespec d = {0, 20 * 1000000L};
    nanosleep(&d, NULL); /* the main thread sleeps on c's connection EVD */
    k->left_us = emu_qp_poll_lease_left_us(k->qp);
    post_send(k->s, k->sep, 3);
    k->completed = wait_queued(k->c->dto, 200);
    return NULL;
}

START_TEST(poller_waiting_elsewhere_gives_back_its_lease)
{
    setenv("SOFTDAT_POLL_LEASE_US", "1000000", 1);
    DAT_PROVIDER *p = fx_provider("t-prog-idle-lease", "lo", DAT_FALSE);
    struct side s, c;
    DAT_EP_HANDLE sep, cep;
    open_connected(p, &s, &sep, &c, &cep);
    struct emu_qp *qp = ((struct sd_ep *)cep)->qp;

    /* Poll c's DTO EVD until its connection is leased to this thread. */
    double t0 = now_s();
    while (emu_qp_poll_lease_left_us(qp) < 500000 && now_s() - t0 < 5.0)
        dequeue_empty(&c, c.dto, 1);
    ck_assert_uint_ge(emu_qp_poll_lease_left_us(qp), 500000);

    struct lease_check k = {&s, &c, sep, qp, UINT64_MAX, false};
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, check_while_waiting, &k), 0);
    DAT_EVENT ev;
    DAT_COUNT n = 0;
    ck_assert_int_eq(DAT_GET_TYPE(p->evd_wait_func(c.conn, 300000, 1, &ev, &n)), DAT_TIMEOUT_EXPIRED);
    pthread_join(th, NULL);
    ck_assert_uint_eq(k.left_us, 0);
    ck_assert_msg(k.completed, "the engine did not complete the receive within 200 ms");
    ev = wait_ev(&c, c.dto, DAT_DTO_COMPLETION_EVENT);
    ck_assert_int_eq(ev.event_data.dto_completion_event_data.operation, DAT_DTO_RECEIVE);
    ck_assert_int_eq(ev.event_data.dto_completion_event_data.status, DAT_DTO_SUCCESS);
    close_connected(&c, cep, &s);
}
END_TEST

/* ------------------------------------------------------------ yield */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void dequeue_empty(struct side *x, DAT_EVD_HANDLE evd, int times)
{
    DAT_EVENT ev;
    for (int i = 0; i < times; i++)
        ck_assert_int_eq(DAT_GET_TYPE(x->p->evd_dequeue_func(evd, &ev)), DAT_QUEUE_EMPTY);
}

struct spin_arg {
    struct side *s, *c;
    DAT_EP_HANDLE sep;
    bool one_cpu;
    uint64_t yields_early, yields, yields_after_event;
};

/* On c's DTO EVD, finding nothing, from a new thread (the state is per
 * thread), allowed on one CPU if asked: 15 dequeues (less than a yield
 * period), then 300 us and 64 dequeues at least (sanitizers slow each
 * down a lot), then one event from s and 15 more empty dequeues. */
static void *spin_thread(void *arg)
{
    struct spin_arg *a = arg;
    if (a->one_cpu) {
        cpu_set_t set;
        CPU_ZERO(&set);
        int cpu = sched_getcpu();
        CPU_SET(cpu >= 0 ? cpu : 0, &set);
        ck_assert_int_eq(sched_setaffinity(0, sizeof set, &set), 0);
    }
    uint64_t y0 = sd_evd_spin_yields();
    dequeue_empty(a->c, a->c->dto, 15);
    a->yields_early = sd_evd_spin_yields() - y0;
    double start = now_s();
    for (int i = 0; i < 64 || now_s() < start + 0.0003; i++)
        dequeue_empty(a->c, a->c->dto, 1);
    a->yields = sd_evd_spin_yields() - y0;
    /* An event ends the empty run: the count starts again from zero. */
    post_send(a->s, a->sep, 1);
    DAT_EVENT ev;
    DAT_RETURN rc = DAT_QUEUE_EMPTY;
    for (double end = now_s() + 5.0; now_s() < end && rc != DAT_SUCCESS;)
        rc = a->c->p->evd_dequeue_func(a->c->dto, &ev);
    ck_assert_dat_ok(rc);
    ck_assert_int_eq(ev.event_data.dto_completion_event_data.operation, DAT_DTO_RECEIVE);
    uint64_t y1 = sd_evd_spin_yields();
    dequeue_empty(a->c, a->c->dto, 15);
    a->yields_after_event = sd_evd_spin_yields() - y1;
    return NULL;
}

/* A thread spinning on a DTO EVD gives its CPU away only where its peer
 * may need that CPU to run (a thread allowed on one CPU) and only once it
 * has found nothing for a while (evd.c, yield_if_spinning): two polling
 * programs that share one CPU let each other run instead of waiting for
 * the scheduler's tick, and nowhere does a polled ping-pong whose answer
 * is microseconds away pay a sched_yield (docs/perf.md). */
START_TEST(dto_spinner_yields_only_after_finding_nothing)
{
    DAT_PROVIDER *p = fx_provider("t-prog-yield", "lo", DAT_FALSE);
    struct side s, c;
    DAT_EP_HANDLE sep, cep;
    open_connected(p, &s, &sep, &c, &cep);
    ck_assert(armed(c.dto));

    struct spin_arg one = {&s, &c, sep, true, 0, 0, 0};
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, spin_thread, &one), 0);
    pthread_join(th, NULL);
    ck_assert_uint_eq(one.yields_early, 0);
    ck_assert_uint_gt(one.yields, 0);
    ck_assert_uint_eq(one.yields_after_event, 0);

    cpu_set_t set;
    ck_assert_int_eq(sched_getaffinity(0, sizeof set, &set), 0);
    if (CPU_COUNT(&set) > 1) {
        struct spin_arg many = {&s, &c, sep, false, 0, 0, 0};
        ck_assert_int_eq(pthread_create(&th, NULL, spin_thread, &many), 0);
        pthread_join(th, NULL);
        ck_assert_uint_eq(many.yields, 0);
    }

    /* An EVD only the engine fills yields at every 16th empty dequeue. */
    uint64_t y0 = sd_evd_spin_yields();
    dequeue_empty(&c, c.cr, 16);
    ck_assert_uint_eq(sd_evd_spin_yields(), y0 + 1);

    side_close(&c);
    side_close(&s);
    ck_assert_uint_eq(sd_handle_live_count(), 0);
}
END_TEST

int main(void)
{
    /* Long spin window, so that a waiter alone completes a round trip when
     * the engines are stalled (read once, at the first EVD). */
    setenv("SOFTDAT_POLL_US", "200000", 1);
    Suite *s = suite_create("progress");
    TCase *tc = tcase_create("progress");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, pingpong_dequeue_engines_stalled);
    tcase_add_test(tc, pingpong_wait_engines_stalled);
    tcase_add_test(tc, pingpong_wait_engines_live);
    tcase_add_test(tc, send_answering_receive_before_established_event);
    tcase_add_test(tc, free_and_disconnect_while_spinning);
    tcase_add_test(tc, free_and_disconnect_while_waiting);
    tcase_add_test(tc, ia_close_under_polling_waiter);
    tcase_add_test(tc, adaptive_spin_backs_off);
    tcase_add_test(tc, dto_spinner_yields_only_after_finding_nothing);
    tcase_add_test(tc, blocking_waiter_sleeps_on_its_sockets);
    tcase_add_test(tc, sleeping_waiter_leases_and_gives_back);
    tcase_add_test(tc, large_send_continues_from_polling_thread);
    tcase_add_test(tc, sleeping_waiter_woken_by_set_unwaitable);
    tcase_add_test(tc, poller_waiting_elsewhere_gives_back_its_lease);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
