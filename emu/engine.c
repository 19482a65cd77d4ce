/* Progress engine: one libevent loop on one thread. See engine.h and
 * docs/emu-design.md. */
#include "emu/engine.h"

#include "emu/evlib.h"
#include "emu/log.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#define JOB_BATCH 64 /* jobs per wakeup before I/O gets a turn */

struct job {
    struct job *next;
    emu_fn fn;
    void *arg;
    bool sync;
    bool done; /* sync jobs: set under e->lock once fn returned */
    int rc;
};

/* Every timer, watcher and doorbell is on the engine's list so destroy can
 * free what its owner forgot. */
struct eobj {
    struct eobj *prev, *next;
    struct emu_engine *e;
    struct event *ev[2];
};

struct emu_engine {
    struct event_base *base;
    struct event *job_ev;
    pthread_t thread;
    char name[16];

    pthread_mutex_t lock; /* jobs, hooks, objs, stopping */
    pthread_cond_t done_cv;
    struct job *head, *tail;
    bool stopping;
    struct emu_engine_hook *hooks;
    struct eobj *objs;
    struct emu_engine_trace trace; /* set before any connection exists */
};

void emu_engine_set_trace(struct emu_engine *e, const struct emu_engine_trace *t)
{
    e->trace = *t;
}

void emu_engine_get_trace(const struct emu_engine *e, struct emu_engine_trace *out)
{
    *out = e->trace;
}

struct emu_timer {
    struct eobj o;
    emu_fn fn;
    void *arg;
};

struct emu_doorbell {
    struct eobj o;
    emu_fn fn;
    void *arg;
};

struct emu_fdw {
    struct eobj o;
    int fd;
    emu_fd_fn fn;
    void *arg;
};

static _Thread_local struct emu_engine *tl_engine;

/* libevent through its private table (evlib.h). Valid once an engine
 * exists: emu_engine_create fails when it cannot be loaded. */
static inline const struct emu_evlib *ev(void)
{
    return emu_evlib_get();
}

uint64_t emu_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

bool emu_engine_on_thread(const struct emu_engine *e)
{
    return e != NULL && tl_engine == e;
}

struct event_base *emu_engine_base(struct emu_engine *e)
{
    return e->base;
}

/* ---------------------------------------------------------------- jobs */

static void job_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct emu_engine *e = arg;
    for (int n = 0; n < JOB_BATCH; n++) {
        pthread_mutex_lock(&e->lock);
        struct job *j = e->head;
        if (j == NULL) {
            pthread_mutex_unlock(&e->lock);
            return;
        }
        e->head = j->next;
        if (e->head == NULL)
            e->tail = NULL;
        pthread_mutex_unlock(&e->lock);

        j->fn(j->arg);
        if (j->sync) {
            pthread_mutex_lock(&e->lock);
            j->done = true;
            pthread_cond_broadcast(&e->done_cv);
            pthread_mutex_unlock(&e->lock);
        } else {
            free(j);
        }
    }
    /* Batch used up: come back after pending I/O callbacks. */
    pthread_mutex_lock(&e->lock);
    bool more = e->head != NULL;
    pthread_mutex_unlock(&e->lock);
    if (more)
        ev()->event_active(e->job_ev, EV_READ, 0);
}

/* Append j; force bypasses the stopping check (the shutdown job). */
static int enqueue(struct emu_engine *e, struct job *j, bool force)
{
    pthread_mutex_lock(&e->lock);
    if (e->stopping && !force) {
        pthread_mutex_unlock(&e->lock);
        return -ESHUTDOWN;
    }
    j->next = NULL;
    bool was_empty = e->head == NULL;
    if (e->tail)
        e->tail->next = j;
    else
        e->head = j;
    e->tail = j;
    pthread_mutex_unlock(&e->lock);
    /* A non-empty queue already has a wakeup on its way (or job_cb is
     * running and will see j). */
    if (was_empty)
        ev()->event_active(e->job_ev, EV_READ, 0);
    return 0;
}

int emu_engine_run_async(struct emu_engine *e, emu_fn fn, void *arg)
{
    if (e == NULL || fn == NULL)
        return -EINVAL;
    struct job *j = calloc(1, sizeof *j);
    if (j == NULL)
        return -ENOMEM;
    j->fn = fn;
    j->arg = arg;
    int rc = enqueue(e, j, false);
    if (rc != 0)
        free(j);
    return rc;
}

static int wait_sync(struct emu_engine *e, struct job *j)
{
    pthread_mutex_lock(&e->lock);
    while (!j->done) /* bounded: the engine runs every queued job, even in destroy */
        pthread_cond_wait(&e->done_cv, &e->lock);
    pthread_mutex_unlock(&e->lock);
    return 0;
}

int emu_engine_run_sync(struct emu_engine *e, emu_fn fn, void *arg)
{
    if (e == NULL || fn == NULL)
        return -EINVAL;
    if (emu_engine_on_thread(e)) {
        fn(arg);
        return 0;
    }
    struct job j = {.fn = fn, .arg = arg, .sync = true};
    int rc = enqueue(e, &j, false);
    if (rc != 0)
        return rc;
    return wait_sync(e, &j);
}

/* ---------------------------------------------------------------- hooks */

int emu_engine_hook_add(struct emu_engine *e, struct emu_engine_hook *h)
{
    pthread_mutex_lock(&e->lock);
    if (e->stopping) {
        pthread_mutex_unlock(&e->lock);
        return -ESHUTDOWN;
    }
    h->prev = NULL;
    h->next = e->hooks;
    if (e->hooks)
        e->hooks->prev = h;
    e->hooks = h;
    h->linked = true;
    pthread_mutex_unlock(&e->lock);
    return 0;
}

static void hook_unlink_locked(struct emu_engine *e, struct emu_engine_hook *h)
{
    if (!h->linked)
        return;
    if (h->prev)
        h->prev->next = h->next;
    else
        e->hooks = h->next;
    if (h->next)
        h->next->prev = h->prev;
    h->prev = h->next = NULL;
    h->linked = false;
}

void emu_engine_hook_del(struct emu_engine *e, struct emu_engine_hook *h)
{
    pthread_mutex_lock(&e->lock);
    hook_unlink_locked(e, h);
    pthread_mutex_unlock(&e->lock);
}

/* ---------------------------------------------------------------- objects */

static int obj_link(struct emu_engine *e, struct eobj *o)
{
    o->e = e;
    pthread_mutex_lock(&e->lock);
    o->prev = NULL;
    o->next = e->objs;
    if (e->objs)
        e->objs->prev = o;
    e->objs = o;
    pthread_mutex_unlock(&e->lock);
    return 0;
}

static void obj_unlink(struct eobj *o)
{
    struct emu_engine *e = o->e;
    pthread_mutex_lock(&e->lock);
    if (o->prev)
        o->prev->next = o->next;
    else
        e->objs = o->next;
    if (o->next)
        o->next->prev = o->prev;
    pthread_mutex_unlock(&e->lock);
}

/* event_free waits for a callback running on the engine thread (libevent
 * 2.1 event_del autoblock), so o is unused once this returns. */
static void obj_free(struct eobj *o)
{
    for (int i = 0; i < 2; i++)
        if (o->ev[i])
            ev()->event_free(o->ev[i]);
    obj_unlink(o);
    free(o);
}

/* ---------------------------------------------------------------- timers */

static void timer_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct emu_timer *t = arg;
    t->fn(t->arg);
}

struct emu_timer *emu_timer_new(struct emu_engine *e, emu_fn fn, void *arg)
{
    struct emu_timer *t = calloc(1, sizeof *t);
    if (t == NULL)
        return NULL;
    t->fn = fn;
    t->arg = arg;
    t->o.ev[0] = ev()->event_new(e->base, -1, 0, timer_cb, t);
    if (t->o.ev[0] == NULL) {
        free(t);
        return NULL;
    }
    obj_link(e, &t->o);
    return t;
}

int emu_timer_arm(struct emu_timer *t, uint64_t usec)
{
    struct timeval tv = {.tv_sec = (time_t)(usec / 1000000u),
                         .tv_usec = (suseconds_t)(usec % 1000000u)};
    return ev()->event_add(t->o.ev[0], &tv) == 0 ? 0 : -EINVAL;
}

void emu_timer_cancel(struct emu_timer *t)
{
    if (t)
        ev()->event_del(t->o.ev[0]);
}

bool emu_timer_pending(struct emu_timer *t)
{
    return t && ev()->event_pending(t->o.ev[0], EV_TIMEOUT, NULL);
}

void emu_timer_free(struct emu_timer *t)
{
    if (t)
        obj_free(&t->o);
}

/* ---------------------------------------------------------------- doorbells */

static void doorbell_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct emu_doorbell *d = arg;
    d->fn(d->arg);
}

struct emu_doorbell *emu_doorbell_new(struct emu_engine *e, emu_fn fn, void *arg)
{
    struct emu_doorbell *d = calloc(1, sizeof *d);
    if (d == NULL)
        return NULL;
    d->fn = fn;
    d->arg = arg;
    d->o.ev[0] = ev()->event_new(e->base, -1, 0, doorbell_cb, d);
    if (d->o.ev[0] == NULL) {
        free(d);
        return NULL;
    }
    obj_link(e, &d->o);
    return d;
}

void emu_doorbell_ring(struct emu_doorbell *d)
{
    /* Activating an already-active event is a no-op: that is the coalescing. */
    ev()->event_active(d->o.ev[0], EV_READ, 0);
}

void emu_doorbell_free(struct emu_doorbell *d)
{
    if (d)
        obj_free(&d->o);
}

/* ---------------------------------------------------------------- fd watchers */

static void fdw_cb(evutil_socket_t fd, short what, void *arg)
{
    struct emu_fdw *w = arg;
    unsigned ready = 0;
    if (what & EV_READ)
        ready |= EMU_EV_READ;
    if (what & EV_WRITE)
        ready |= EMU_EV_WRITE;
    w->fn((int)fd, ready, w->arg);
}

struct emu_fdw *emu_fdw_new(struct emu_engine *e, int fd, emu_fd_fn fn, void *arg)
{
    if (fd < 0 || fn == NULL)
        return NULL;
    struct emu_fdw *w = calloc(1, sizeof *w);
    if (w == NULL)
        return NULL;
    w->fd = fd;
    w->fn = fn;
    w->arg = arg;
    w->o.ev[0] = ev()->event_new(e->base, fd, EV_READ | EV_PERSIST, fdw_cb, w);
    w->o.ev[1] = ev()->event_new(e->base, fd, EV_WRITE | EV_PERSIST, fdw_cb, w);
    if (w->o.ev[0] == NULL || w->o.ev[1] == NULL) {
        if (w->o.ev[0])
            ev()->event_free(w->o.ev[0]);
        if (w->o.ev[1])
            ev()->event_free(w->o.ev[1]);
        free(w);
        return NULL;
    }
    obj_link(e, &w->o);
    return w;
}

int emu_fdw_enable(struct emu_fdw *w, unsigned what)
{
    int rc = 0;
    if ((what & EMU_EV_READ) && ev()->event_add(w->o.ev[0], NULL) != 0)
        rc = -EINVAL;
    if ((what & EMU_EV_WRITE) && ev()->event_add(w->o.ev[1], NULL) != 0)
        rc = -EINVAL;
    return rc;
}

int emu_fdw_disable(struct emu_fdw *w, unsigned what)
{
    if (what & EMU_EV_READ)
        ev()->event_del(w->o.ev[0]);
    if (what & EMU_EV_WRITE)
        ev()->event_del(w->o.ev[1]);
    return 0;
}

void emu_fdw_free(struct emu_fdw *w)
{
    if (w)
        obj_free(&w->o);
}

/* ---------------------------------------------------------------- lifecycle */

static void *engine_main(void *arg)
{
    struct emu_engine *e = arg;
    tl_engine = e;
    SD_DBG("engine", "%s: thread up", e->name);
    /* Returns only on event_base_loopbreak from the shutdown job. */
    ev()->event_base_loop(e->base, EVLOOP_NO_EXIT_ON_EMPTY);
    SD_DBG("engine", "%s: thread down", e->name);
    tl_engine = NULL;
    return NULL;
}

/* Grow the process's descriptor table now to cover min(RLIMIT_NOFILE,
 * EMU_FD_TABLE_RESERVE) descriptors. Linux grows it by doubling when a
 * descriptor beyond it is allocated, and in a process with more than one
 * thread (every process with an open IA: the engine thread) each growth
 * waits for an RCU grace period inside socket()/accept4(), 4-16 ms on a
 * 2-vCPU machine. A burst of 500 connections crossed 64, 128, 256 and 512:
 * the engine thread stalled in accept4 and the consumer in
 * dat_ep_connect for most of the burst (dtestcm, docs/perf.md). Done
 * before the engine thread exists, the growth usually costs no grace
 * period at all. F_DUPFD takes the lowest free descriptor at or above the
 * one asked for, so no descriptor of the program is touched; the
 * duplicate is closed at once. Best effort. */
static void fd_table_reserve(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur < 2)
        return;
    rlim_t want = rl.rlim_cur < EMU_FD_TABLE_RESERVE ? rl.rlim_cur : EMU_FD_TABLE_RESERVE;
    int fd = eventfd(0, EFD_CLOEXEC);
    if (fd < 0)
        return;
    int high = fcntl(fd, F_DUPFD_CLOEXEC, (int)(want - 1));
    if (high >= 0)
        close(high);
    close(fd);
}

int emu_engine_create(const char *name, struct emu_engine **out)
{
    if (out == NULL)
        return -EINVAL;
    *out = NULL;
    if (emu_evlib_get() == NULL)
        return -ENOSYS;
    struct emu_engine *e = calloc(1, sizeof *e);
    if (e == NULL)
        return -ENOMEM;
    snprintf(e->name, sizeof e->name, "%s", name ? name : "sd-engine");
    fd_table_reserve();
    pthread_mutex_init(&e->lock, NULL);
    pthread_cond_init(&e->done_cv, NULL);

    struct event_config *cfg = ev()->event_config_new();
    if (cfg == NULL)
        goto fail;
    /* Precise timers: connection timeouts are given in microseconds. */
    ev()->event_config_set_flag(cfg, EVENT_BASE_FLAG_PRECISE_TIMER);
    e->base = ev()->event_base_new_with_config(cfg);
    ev()->event_config_free(cfg);
    if (e->base == NULL)
        goto fail;
    e->job_ev = ev()->event_new(e->base, -1, 0, job_cb, e);
    if (e->job_ev == NULL)
        goto fail;

    /* The engine thread takes no signals: they belong to the application. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&e->thread, NULL, engine_main, e);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        SD_ERR("engine", "pthread_create: %s", strerror(rc));
        goto fail;
    }
    pthread_setname_np(e->thread, e->name);
    *out = e;
    return 0;

fail:
    if (e->job_ev)
        ev()->event_free(e->job_ev);
    if (e->base)
        ev()->event_base_free(e->base);
    pthread_cond_destroy(&e->done_cv);
    pthread_mutex_destroy(&e->lock);
    free(e);
    return -ENOMEM;
}

static void shutdown_fn(void *arg)
{
    struct emu_engine *e = arg;
    /* Bounded: every iteration removes one hook, and no hook can be added
     * once stopping is set. */
    for (;;) {
        pthread_mutex_lock(&e->lock);
        struct emu_engine_hook *h = e->hooks;
        if (h)
            hook_unlink_locked(e, h);
        pthread_mutex_unlock(&e->lock);
        if (h == NULL)
            break;
        h->fn(h);
    }
    ev()->event_base_loopbreak(e->base);
}

int emu_engine_destroy(struct emu_engine *e)
{
    if (e == NULL)
        return 0;
    if (emu_engine_on_thread(e))
        return -EDEADLK;
    struct job j = {.fn = shutdown_fn, .arg = e, .sync = true};
    pthread_mutex_lock(&e->lock);
    e->stopping = true;
    pthread_mutex_unlock(&e->lock);
    enqueue(e, &j, true);
    wait_sync(e, &j);
    pthread_join(e->thread, NULL);

    /* Leftovers whose owners never freed them. */
    size_t n = 0;
    while (e->objs) {
        struct eobj *o = e->objs;
        obj_free(o);
        n++;
    }
    if (n)
        SD_DBG("engine", "%s: freed %zu leftover timers/watchers", e->name, n);
    ev()->event_free(e->job_ev);
    ev()->event_base_free(e->base);
    pthread_cond_destroy(&e->done_cv);
    pthread_mutex_destroy(&e->lock);
    free(e);
    return 0;
}
