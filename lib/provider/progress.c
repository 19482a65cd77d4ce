/* softdat consumer-driven receive progress. See progress.h for the
 * contract and docs/perf.md ("Latency design") for the numbers behind it.
 *
 * Locks: g_mu (the registry of every registration, add/remove only) before
 * a set's mu. A consumer pass takes only its set's mu (trylock) and, below
 * it, the QP's receive lock (trylock) and whatever the receive path takes
 * (send/receive queue locks, EVD queue locks): never g_mu, never an EP
 * lock, so add/remove may wait for a pass from any thread that holds
 * neither (engine callbacks, dat_ep_free under cm_lock). */
#include "lib/provider/progress.h"

#include <poll.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "emu/engine.h"
#include "emu/log.h"
#include "emu/qp.h"
#include "lib/provider/ep.h"
#include "lib/provider/evd.h"

struct sd_prog_ent {
    struct sd_prog_ent *next, **pprev; /* in evd->ps, under its mu: O(1) unlink */
    struct sd_ep *ep;          /* key only: never dereferenced by a pass */
    struct emu_qp *qp;         /* valid until sd_progress_remove(ep) returns */
    struct sd_evd *evd;        /* holds a handle reference */
};

/* The registry is the entries themselves, hung off their EP (ep->prog[],
 * at most one per EVD, the receive and the request EVD): adding and
 * removing cost the same with 10,000 connections as with one. */
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static atomic_uint_fast64_t g_completions, g_registered, g_sleeps;

/* ------------------------------------------------------------ config */

static pthread_once_t g_env_once = PTHREAD_ONCE_INIT;
static unsigned g_poll_us = SD_POLL_US_DEFAULT;
static bool g_off; /* SOFTDAT_POLL_US=off: no consumer progress at all */
static unsigned g_lease_us = SD_POLL_LEASE_US_DEFAULT;
#define SD_PROG_BATCH 16 /* QPs handed to emu_qp_progress_many at once */
/* Beyond this many connections on one EVD a consumer pass would cost more
 * than it saves (one poll(2) per 16 sockets, every pass: latency grew from
 * 44 µs at 1 endpoint to 350 µs at 1,000 in test/e2e/scale.sh); the engine's
 * epoll, whose cost follows the ready sockets only, does it all. */
#define SD_PROG_MAX_QPS 64
/* Sleeping on the sockets: this many at most (one poll(2) over them). */
#define SD_SLEEP_MAX_QPS 8

static void thread_idle_hook(void *progress_arg);

static void read_env(void)
{
    const char *l = getenv("SOFTDAT_POLL_LEASE_US");
    if (l != NULL && *l != '\0') {
        char *end;
        unsigned long v = strtoul(l, &end, 10);
        if (*end != '\0' || v > 1000000)
            SD_WARN("progress", "SOFTDAT_POLL_LEASE_US=%s ignored (0..1000000)", l);
        else
            g_lease_us = (unsigned)v;
    }
    const char *s = getenv("SOFTDAT_POLL_US");
    if (s != NULL && strcmp(s, "off") == 0) {
        g_off = true;
    } else if (s != NULL && *s != '\0') {
        char *end;
        unsigned long v = strtoul(s, &end, 10);
        if (*end != '\0' || v > SD_POLL_US_MAX)
            SD_WARN("progress", "SOFTDAT_POLL_US=%s ignored (0..%u)", s, SD_POLL_US_MAX);
        else
            g_poll_us = (unsigned)v;
    }
    /* Threads hold leases only with consumer progress on and a lease. */
    if (!g_off && g_lease_us > 0)
        sd_evq_set_idle_hook(thread_idle_hook);
}

unsigned sd_progress_poll_us(void)
{
    pthread_once(&g_env_once, read_env);
    return g_poll_us;
}

static bool progress_off(void)
{
    pthread_once(&g_env_once, read_env);
    return g_off;
}

/* ------------------------------------------------------------ sets */

/* Sets that may hold leases (ps->leased), for sd_progress_thread_idle.
 * Order: a set's mu, then g_leased_mu; the idle walk, which goes the other
 * way, only try-locks a set's mu. */
static pthread_mutex_t g_leased_mu = PTHREAD_MUTEX_INITIALIZER;
static struct sd_progress_set *g_leased_head;

/* (ps->mu held, ps->leased just flipped) The list follows ps->leased. */
static void list_leased(struct sd_progress_set *ps, bool on)
{
    pthread_mutex_lock(&g_leased_mu);
    if (on) {
        ps->lprev = NULL;
        ps->lnext = g_leased_head;
        if (g_leased_head != NULL)
            g_leased_head->lprev = ps;
        g_leased_head = ps;
    } else {
        if (ps->lprev != NULL)
            ps->lprev->lnext = ps->lnext;
        else
            g_leased_head = ps->lnext;
        if (ps->lnext != NULL)
            ps->lnext->lprev = ps->lprev;
        ps->lprev = ps->lnext = NULL;
    }
    pthread_mutex_unlock(&g_leased_mu);
}

/* (ps->mu held) A pass may now give leases on this set's QPs. */
static void mark_leased(struct sd_progress_set *ps)
{
    if (ps->leased)
        return;
    ps->leased = true;
    list_leased(ps, true);
}

void sd_progress_thread_idle(struct sd_evd *except)
{
    pthread_mutex_lock(&g_leased_mu);
    for (struct sd_progress_set *ps = g_leased_head; ps != NULL; ps = ps->lnext) {
        if ((except != NULL && ps == &except->ps) || !emu_trylock(&ps->mu))
            continue; /* a thread in that set's pass renews or gives back itself */
        for (struct sd_prog_ent *e = ps->head; e != NULL; e = e->next)
            emu_qp_poll_release_mine(e->qp);
        emu_unlock(&ps->mu);
    }
    pthread_mutex_unlock(&g_leased_mu);
}

static void thread_idle_hook(void *progress_arg)
{
    sd_progress_thread_idle(progress_arg);
}

void sd_progress_set_init(struct sd_progress_set *ps)
{
    emu_lock_init(&ps->mu);
    ps->head = NULL;
    ps->leased = false;
    ps->lprev = ps->lnext = NULL;
    atomic_init(&ps->n, 0);
}

void sd_progress_set_fini(struct sd_progress_set *ps)
{
    /* Entries hold EVD references: none can be left at release. */
    if (ps->head != NULL)
        SD_ERR("progress", "set %p released with registrations", (void *)ps);
    if (ps->leased) /* nobody passes any more: no lock needed for the flag */
        list_leased(ps, false);
    emu_lock_destroy(&ps->mu);
}

void sd_progress_evd_init(struct sd_evd *evd)
{
    sd_progress_set_init(&evd->ps);
    if (progress_off())
        return; /* no hook: nothing registers, the engine does everything */
    sd_evq_set_progress(&evd->q, sd_progress_evd_pass, evd, sd_progress_poll_us());
    if (g_lease_us > 0)
        sd_evq_set_sleep(&evd->q, sd_progress_evd_sleep, sd_progress_evd_sleep_done,
                         emu_qp_thread_rx_small_fpdus);
    sd_evq_arm_progress(&evd->q, false);
}

/* (ps->mu held) Give back every lease a pass may have taken. */
static void release_leases(struct sd_progress_set *ps)
{
    if (!ps->leased)
        return;
    for (struct sd_prog_ent *e = ps->head; e != NULL; e = e->next)
        emu_qp_poll_release(e->qp);
    ps->leased = false;
    list_leased(ps, false);
}

int sd_progress_evd_pass(void *arg, struct sd_evq *q)
{
    (void)q;
    struct sd_evd *evd = arg;
    struct sd_progress_set *ps = &evd->ps;
    int members = atomic_load_explicit(&ps->n, memory_order_relaxed);
    if (members == 0)
        return -1;
    if (members > SD_PROG_MAX_QPS) {
        /* Leases taken while the set was small go back once, not on every
         * pass: a walk of 10,000 entries per wakeup was most of the
         * latency at 10,000 endpoints (docs/reliability.md). */
        if (sd_evq_consumer_sleeping() && emu_trylock(&ps->mu)) {
            release_leases(ps);
            emu_unlock(&ps->mu);
        }
        return -1;
    }
    if (!emu_trylock(&ps->mu))
        return 0; /* another consumer (or add/remove) is at it */
    int n = 0;
    /* A polling consumer takes over the receive side: the engine stays
     * off these sockets while it keeps polling (emu_qp_poll_lease), so the
     * two do not fight over two CPUs for every frame. */
    /* A waiter's spin leases only what it can then sleep on: more
     * sockets than that would go back to the engine, kicked, before it
     * sleeps on its condition variable. */
    bool polling = sd_evq_consumer_polling() && g_lease_us > 0 &&
                   !(sd_evq_consumer_wait_spinning() && members > SD_SLEEP_MAX_QPS);
    if (sd_evq_consumer_sleeping())
        release_leases(ps);
    if (polling)
        mark_leased(ps);
    uint64_t now = polling ? emu_now_us() : 0;
    uint64_t fpdus0 = emu_qp_thread_rx_fpdus();
    struct emu_qp *qps[SD_PROG_BATCH];
    unsigned nq = 0;
    for (struct sd_prog_ent *e = ps->head; e != NULL; e = e->next) {
        if (polling)
            emu_qp_poll_lease(e->qp, g_lease_us, now);
        qps[nq++] = e->qp;
        if (nq == SD_PROG_BATCH) {
            n += emu_qp_progress_many(qps, nq);
            nq = 0;
        }
    }
    if (nq > 0)
        n += emu_qp_progress_many(qps, nq);
    if (polling && (n > 0 || emu_qp_thread_rx_fpdus() != fpdus0))
        emu_qp_poll_pass_end();
    else if (polling)
        emu_qp_poll_pass_end_idle(now); /* spinning on nothing: one clock read a pass */
    bool empty = ps->head == NULL;
    emu_unlock(&ps->mu);
    if (n > 0)
        atomic_fetch_add_explicit(&g_completions, (uint64_t)n, memory_order_relaxed);
    return empty ? -1 : n;
}

int sd_progress_evd_sleep(void *arg, struct sd_evq *q, int wake_fd, int timeout_ms)
{
    (void)q;
    struct sd_evd *evd = arg;
    struct sd_progress_set *ps = &evd->ps;
    int members = atomic_load_explicit(&ps->n, memory_order_relaxed);
    if (members < 1 || members > SD_SLEEP_MAX_QPS || !emu_trylock(&ps->mu))
        return -1;
    struct pollfd pfd[SD_SLEEP_MAX_QPS + 1];
    nfds_t n = 0;
    /* The lease outlasts the sleep a little: the engine must not take the
     * socket back (and be woken by the data too) just before we wake. */
    uint64_t until = emu_now_us() + (uint64_t)timeout_ms * 1000u + g_lease_us;
    bool ok = true;
    mark_leased(ps);
    for (struct sd_prog_ent *e = ps->head; e != NULL && ok; e = e->next) {
        int fd = n < SD_SLEEP_MAX_QPS ? emu_qp_sleep_fd(e->qp, until) : -1;
        ok = fd >= 0;
        pfd[n].fd = fd;
        pfd[n].events = POLLIN;
        pfd[n].revents = 0;
        n++;
    }
    if (!ok || n == 0) {
        release_leases(ps);
        emu_unlock(&ps->mu);
        return -1;
    }
    /* Unlocked while asleep: sd_progress_remove must not wait for a
     * sleeper. A descriptor closed meanwhile costs a wake-up at most (the
     * pass after it revalidates everything under the lock); the removal's
     * flush completions or terminal event wake us through wake_fd. */
    emu_unlock(&ps->mu);
    pfd[n].fd = wake_fd;
    pfd[n].events = POLLIN;
    pfd[n].revents = 0;
    int r = poll(pfd, n + 1, timeout_ms);
    if (r > 0 && pfd[n].revents != 0) {
        uint64_t v;
        ssize_t got = read(wake_fd, &v, sizeof v);
        (void)got;
    }
    atomic_fetch_add_explicit(&g_sleeps, 1, memory_order_relaxed);
    if (r > 0)
        emu_qp_sleep_woken();
    return r > 0 ? 1 : 0;
}

void sd_progress_evd_sleep_done(void *arg)
{
    struct sd_evd *evd = arg;
    struct sd_progress_set *ps = &evd->ps;
    if (atomic_load_explicit(&ps->n, memory_order_relaxed) > SD_SLEEP_MAX_QPS ||
        !emu_trylock(&ps->mu))
        return; /* another consumer holds the set: it renews or gives back itself */
    uint64_t until = emu_now_us() + g_lease_us;
    for (struct sd_prog_ent *e = ps->head; e != NULL; e = e->next)
        emu_qp_poll_trim(e->qp, until);
    emu_unlock(&ps->mu);
}

/* ------------------------------------------------------------ registry */

static bool registered_locked(const struct sd_ep *ep, const struct sd_evd *evd)
{
    for (int i = 0; i < SD_EP_PROG_SLOTS; i++)
        if (ep->prog[i] != NULL && ep->prog[i]->evd == evd)
            return true;
    return false;
}

static void add_one(struct sd_ep *ep, struct emu_qp *qp, struct sd_evd *evd)
{
    if (evd == NULL || !evd->ps_inited || registered_locked(ep, evd))
        return;
    int slot = ep->prog[0] == NULL ? 0 : 1;
    if (ep->prog[slot] != NULL)
        return;
    struct sd_prog_ent *e = calloc(1, sizeof *e);
    if (e == NULL) {
        /* Not fatal: the engine thread still makes every completion. */
        SD_WARN("progress", "ep %p: no memory, consumer progress off for it", (void *)ep);
        return;
    }
    e->ep = ep;
    e->qp = qp;
    e->evd = evd;
    sd_handle_ref(&evd->h);
    ep->prog[slot] = e;
    emu_lock(&evd->ps.mu);
    e->next = evd->ps.head;
    if (e->next != NULL)
        e->next->pprev = &e->next;
    e->pprev = &evd->ps.head;
    evd->ps.head = e;
    int n = atomic_load_explicit(&evd->ps.n, memory_order_relaxed) + 1;
    atomic_store_explicit(&evd->ps.n, n, memory_order_relaxed);
    emu_unlock(&evd->ps.mu);
    if (n == 1)
        sd_evq_arm_progress(&evd->q, true);
    atomic_fetch_add_explicit(&g_registered, 1, memory_order_relaxed);
}

void sd_progress_add(struct sd_ep *ep)
{
    if (ep == NULL || progress_off())
        return;
    emu_lock(&ep->lock);
    struct sd_evd *rv = ep->recv_evd, *rq = ep->request_evd;
    emu_unlock(&ep->lock);
    struct emu_qp *qp = ep->qp;
    if (qp == NULL)
        return;
    pthread_mutex_lock(&g_mu);
    add_one(ep, qp, rv);
    if (rq != rv)
        add_one(ep, qp, rq);
    pthread_mutex_unlock(&g_mu);
}

void sd_progress_remove(struct sd_ep *ep)
{
    if (ep == NULL)
        return;
    pthread_mutex_lock(&g_mu);
    for (int i = 0; i < SD_EP_PROG_SLOTS; i++) {
        struct sd_prog_ent *e = ep->prog[i];
        if (e == NULL)
            continue;
        ep->prog[i] = NULL;
        struct sd_progress_set *ps = &e->evd->ps;
        /* Blocking: waits for a pass over this set to end, after which
         * no consumer thread holds e->qp. */
        emu_lock(&ps->mu);
        *e->pprev = e->next;
        if (e->next != NULL)
            e->next->pprev = e->pprev;
        int n = atomic_load_explicit(&ps->n, memory_order_relaxed) - 1;
        atomic_store_explicit(&ps->n, n, memory_order_relaxed);
        emu_unlock(&ps->mu);
        if (n == 0)
            sd_evq_arm_progress(&e->evd->q, false);
        atomic_fetch_sub_explicit(&g_registered, 1, memory_order_relaxed);
        sd_handle_put(&e->evd->h);
        free(e);
    }
    pthread_mutex_unlock(&g_mu);
}

void sd_progress_get_stats(struct sd_progress_stats *out)
{
    out->completions = atomic_load(&g_completions);
    out->registered = atomic_load(&g_registered);
    out->sleeps = atomic_load(&g_sleeps);
}
