/* softdat: event queue core. See evq.h for the contract and docs/events.md
 * for the spec rules (line numbers refer to the DAT 2.0 spec text). */
#include "lib/provider/evq.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "lib/provider/cnoq.h"
#include "lib/provider/limits.h"

#define EVQ_ERR(type) ((DAT_RETURN)(DAT_CLASS_ERROR | (type)))

static uint64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static void us_to_ts(uint64_t us, struct timespec *ts)
{
    ts->tv_sec = (time_t)(us / 1000000u);
    ts->tv_nsec = (long)(us % 1000000u) * 1000;
}

DAT_RETURN sd_evq_init(struct sd_evq *q, DAT_COUNT qlen, DAT_EVD_HANDLE self)
{
    if (qlen < 1 || qlen > SD_MAX_EVD_QLEN)
        return EVQ_ERR(DAT_INVALID_PARAMETER) | DAT_INVALID_ARG2;
    memset(q, 0, sizeof(*q));
    q->ring = calloc((size_t)qlen, sizeof(DAT_EVENT));
    if (!q->ring)
        return EVQ_ERR(DAT_INSUFFICIENT_RESOURCES);
    pthread_condattr_t ca;
    if (pthread_condattr_init(&ca))
        goto fail;
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    int e = pthread_cond_init(&q->cv, &ca);
    pthread_condattr_destroy(&ca);
    if (e)
        goto fail;
    if (pthread_mutex_init(&q->mu, NULL)) {
        pthread_cond_destroy(&q->cv);
        goto fail;
    }
    q->cap = qlen;
    q->self = self;
    q->cfg = SD_EVQ_CFG_THRESHOLD;
    q->enabled = true;  /* spec L3330: created enabled and waitable */
    q->waitable = true;
    atomic_init(&q->count, 0);
    atomic_init(&q->waiter, false);
    atomic_init(&q->has_progress, false);
    q->wake_fd = -1;
    return DAT_SUCCESS;
fail:
    free(q->ring);
    q->ring = NULL;
    return EVQ_ERR(DAT_INSUFFICIENT_RESOURCES);
}

DAT_RETURN sd_evq_fini(struct sd_evq *q)
{
    pthread_mutex_lock(&q->mu);
    if (atomic_load_explicit(&q->waiter, memory_order_relaxed)) {
        pthread_mutex_unlock(&q->mu);
        return EVQ_ERR(DAT_INVALID_STATE) | DAT_INVALID_STATE_EVD_WAITER; /* L2793 */
    }
    pthread_mutex_unlock(&q->mu);
    pthread_cond_destroy(&q->cv);
    pthread_mutex_destroy(&q->mu);
    if (q->wake_fd >= 0)
        close(q->wake_fd);
    q->wake_fd = -1;
    free(q->ring);
    q->ring = NULL;
    return DAT_SUCCESS;
}

static inline DAT_COUNT cnt(const struct sd_evq *q)
{
    return atomic_load_explicit(&q->count, memory_order_relaxed);
}

/* (mu held) Wake the waiter, wherever it sleeps. */
static void wake_waiter_locked(struct sd_evq *q)
{
    pthread_cond_signal(&q->cv);
    if (q->w_in_sleep) {
        uint64_t one = 1;
        ssize_t n = write(q->wake_fd, &one, sizeof one);
        (void)n; /* EAGAIN: the counter is already non-zero, it wakes anyway */
    }
}

static void push_locked(struct sd_evq *q, const DAT_EVENT *ev)
{
    DAT_COUNT n = cnt(q);
    DAT_COUNT tail = q->head + n;
    if (tail >= q->cap)
        tail -= q->cap;
    q->ring[tail] = *ev;
    q->ring[tail].evd_handle = q->self;
    atomic_store_explicit(&q->count, n + 1, memory_order_relaxed);
}

static void pop_locked(struct sd_evq *q, DAT_EVENT *ev)
{
    DAT_COUNT n = cnt(q);
    *ev = q->ring[q->head];
    if (++q->head == q->cap)
        q->head = 0;
    atomic_store_explicit(&q->count, n - 1, memory_order_relaxed);
    if (n == 1) {
        /* Drained: the next overflow is a new episode worth reporting. */
        q->ovf_reported = false;
        q->catastrophic = false;
    }
}

DAT_RETURN sd_evq_post(struct sd_evq *q, const DAT_EVENT *ev,
                       enum sd_evq_kind kind, unsigned flags)
{
    if (!ev)
        return EVQ_ERR(DAT_INVALID_PARAMETER) | DAT_INVALID_ARG2;
    bool notify = (kind != SD_EVQ_DTO && kind != SD_EVQ_EXT) || (flags & SD_EVQ_F_NOTIFY);
    bool report = false;
    enum sd_evq_kind report_kind = kind;
    struct sd_cnoq *cno = NULL;
    DAT_RETURN rc = DAT_SUCCESS;

    pthread_mutex_lock(&q->mu);
    DAT_COUNT n = cnt(q);
    bool fits;
    if (flags & SD_EVQ_F_RESERVED) {
        fits = q->reserved > 0 && n < q->cap;
        if (fits)
            q->reserved--;
        else
            fits = n + q->reserved < q->cap; /* unbalanced reservation: best effort */
    } else if (kind == SD_EVQ_ASYNC) {
        fits = n + q->reserved < q->cap - 1; /* last slot: own overflow, L1573 */
    } else {
        fits = n + q->reserved < q->cap;
    }

    if (!fits) {
        q->dropped++;
        rc = EVQ_ERR(DAT_QUEUE_FULL);
        switch (kind) {
        case SD_EVQ_SOFTWARE: /* L1604-1606, L2894, L3848-3850 */
        case SD_EVQ_CR:       /* L2898: provider rejects the peer, no overflow event */
            break;
        case SD_EVQ_ASYNC:
            /* L1573, L2886: the last error reported is the async EVD's own
             * (catastrophic) overflow; later async events are lost. */
            if (!q->catastrophic && n + q->reserved < q->cap) {
                DAT_EVENT cat;
                memset(&cat, 0, sizeof(cat));
                cat.event_number = DAT_ASYNC_ERROR_EVD_OVERFLOW;
                cat.event_data.asynch_error_event_data.dat_handle = q->self;
                cat.event_data.asynch_error_event_data.reason = DAT_EVD_OVERFLOW_ERROR;
                push_locked(q, &cat);
                q->catastrophic = true;
                report = true;
                notify = true;
                goto queued; /* wake/notify for the catastrophic event */
            }
            break;
        case SD_EVQ_DTO:  /* L2888: caller breaks that connection */
        case SD_EVQ_EXT:  /* L2896: provider-defined; same as DTO */
        case SD_EVQ_CONN: /* L2900: event lost, overflow event, EVD operational */
        default:
            if (!q->ovf_reported) { /* L1572: sticky, one report per episode */
                q->ovf_reported = true;
                report = true;
            }
            break;
        }
        sd_evq_overflow_fn fn = q->on_overflow;
        void *arg = q->overflow_arg;
        pthread_mutex_unlock(&q->mu);
        if (report && fn)
            fn(arg, q, report_kind);
        return rc;
    }

    push_locked(q, ev);
queued:
    if (q->cfg == SD_EVQ_CFG_THRESHOLD)
        notify = true; /* every event of a threshold EVD is a notification */
    if (atomic_load_explicit(&q->waiter, memory_order_relaxed)) {
        /* L2819-2826; the CNO is never triggered with a waiter (L2767). */
        if ((q->cfg == SD_EVQ_CFG_THRESHOLD && cnt(q) >= q->w_threshold) ||
            (q->cfg != SD_EVQ_CFG_THRESHOLD && notify)) {
            q->w_wake = true;
            wake_waiter_locked(q);
        }
    } else if (notify && q->enabled && q->cno) {
        /* L2775, L2852-2854. Held so that a concurrent modify_cno +
         * cno_free cannot free it under the trigger (L3462). */
        cno = q->cno;
        sd_cnoq_hold(cno);
    }
    sd_evq_overflow_fn ofn = q->on_overflow;
    void *oarg = q->overflow_arg;
    pthread_mutex_unlock(&q->mu);
    if (cno) {
        sd_cnoq_trigger(cno, q->self);
        sd_cnoq_release(cno);
    }
    if (report && ofn)
        ofn(oarg, q, report_kind);
    return rc;
}

DAT_RETURN sd_evq_reserve(struct sd_evq *q, DAT_COUNT n)
{
    if (n < 0)
        return EVQ_ERR(DAT_INVALID_PARAMETER);
    pthread_mutex_lock(&q->mu);
    DAT_RETURN rc = DAT_SUCCESS;
    if ((long)cnt(q) + q->reserved + n > q->cap)
        rc = EVQ_ERR(DAT_QUEUE_FULL);
    else
        q->reserved += n;
    pthread_mutex_unlock(&q->mu);
    return rc;
}

void sd_evq_unreserve(struct sd_evq *q, DAT_COUNT n)
{
    pthread_mutex_lock(&q->mu);
    q->reserved = n >= q->reserved ? 0 : q->reserved - n;
    pthread_mutex_unlock(&q->mu);
}

/* Set while a dequeue or a zero-timeout wait calls the progress hook: the
 * consumer is polling, not about to sleep (sd_evq_consumer_polling). */
static _Thread_local bool tl_polling;

bool sd_evq_consumer_polling(void)
{
    return tl_polling;
}

/* Set while a waiter's spin window calls the hook as a poller. */
static _Thread_local bool tl_wait_spin;

bool sd_evq_consumer_wait_spinning(void)
{
    return tl_wait_spin;
}

static _Thread_local bool tl_sleeping;

bool sd_evq_consumer_sleeping(void)
{
    return tl_sleeping;
}

static int call_progress_polling(struct sd_evq *q);

static _Atomic(sd_evq_idle_fn) g_idle_hook;

void sd_evq_set_idle_hook(sd_evq_idle_fn fn)
{
    atomic_store_explicit(&g_idle_hook, fn, memory_order_release);
}

void sd_evq_thread_idle(void *progress_arg)
{
    sd_evq_idle_fn fn = atomic_load_explicit(&g_idle_hook, memory_order_acquire);
    if (fn != NULL)
        fn(progress_arg);
}

static int call_progress(struct sd_evq *q)
{
    /* Caller holds mu; fn runs unlocked because it posts into this queue. */
    sd_evq_progress_fn fn = q->progress;
    void *arg = q->progress_arg;
    if (!fn || !atomic_load_explicit(&q->has_progress, memory_order_relaxed))
        return -1;
    pthread_mutex_unlock(&q->mu);
    int r = fn(arg, q);
    pthread_mutex_lock(&q->mu);
    return r;
}

static int call_progress_polling(struct sd_evq *q)
{
    tl_polling = true;
    int r = call_progress(q);
    tl_polling = false;
    return r;
}

DAT_RETURN sd_evq_dequeue(struct sd_evq *q, DAT_EVENT *ev)
{
    /* Cheap on an empty queue: relaxed loads, no lock (spinning
     * consumers, L3767). The answers are snapshots, as the spec allows. */
    if (!ev)
        return EVQ_ERR(DAT_INVALID_PARAMETER) | DAT_INVALID_ARG2;
    if (atomic_load_explicit(&q->waiter, memory_order_relaxed))
        return EVQ_ERR(DAT_INVALID_STATE) | DAT_INVALID_STATE_EVD_WAITER;
    if (cnt(q) == 0) {
        if (!atomic_load_explicit(&q->has_progress, memory_order_relaxed))
            return SD_EVQ_EMPTY;
        /* The hook runs unlocked in any case (it posts into this queue),
         * and is set before the EVD is published: a poll that finds
         * nothing takes no lock of the queue's. */
        sd_evq_progress_fn fn = q->progress;
        if (fn != NULL) {
            tl_polling = true;
            fn(q->progress_arg, q);
            tl_polling = false;
        }
        if (atomic_load_explicit(&q->waiter, memory_order_relaxed))
            return EVQ_ERR(DAT_INVALID_STATE) | DAT_INVALID_STATE_EVD_WAITER; /* L3804-3807 */
        if (cnt(q) == 0)
            return SD_EVQ_EMPTY;
    }
    pthread_mutex_lock(&q->mu);
    DAT_RETURN rc;
    if (atomic_load_explicit(&q->waiter, memory_order_relaxed))
        rc = EVQ_ERR(DAT_INVALID_STATE) | DAT_INVALID_STATE_EVD_WAITER;
    else if (cnt(q) == 0)
        rc = SD_EVQ_EMPTY; /* another consumer took it */
    else {
        pop_locked(q, ev);
        rc = DAT_SUCCESS;
    }
    pthread_mutex_unlock(&q->mu);
    return rc;
}

/* Record whether a wait's spin window paid off (see sd_evq_wait). */
static void spin_outcome(struct sd_evq *q, bool paid)
{
    if (paid) {
        q->spin_fail = 0;
    } else if (++q->spin_fail >= SD_EVQ_SPIN_FAILS) {
        q->spin_fail = 0;
        q->spin_skip = SD_EVQ_SPIN_SKIP;
    }
}

static DAT_RETURN deliver_locked(struct sd_evq *q, DAT_EVENT *ev, DAT_COUNT *nmore)
{
    pop_locked(q, ev); /* L3733: the first event in the queue */
    if (nmore)
        *nmore = cnt(q);
    return DAT_SUCCESS;
}

/* (mu held, waiter set) One chunk of sleep in the queue's sleep hook:
 * chunk_ms, at most left_us (0: no deadline). Returns the hook's answer
 * (< 0: use cv). */
static int sleep_in_hook(struct sd_evq *q, uint64_t left_us, int chunk_ms)
{
    if (q->wake_fd < 0) {
        q->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        if (q->wake_fd < 0)
            return -1;
    }
    int ms = chunk_ms;
    if (left_us != 0 && left_us < (uint64_t)ms * 1000u)
        ms = (int)((left_us + 999u) / 1000u);
    sd_evq_sleep_fn fn = q->sleep;
    void *arg = q->progress_arg;
    q->w_in_sleep = true;
    pthread_mutex_unlock(&q->mu);
    int r = fn(arg, q, q->wake_fd, ms);
    pthread_mutex_lock(&q->mu);
    q->w_in_sleep = false;
    return r;
}

/* A waiter's passes processed input since *seen that made no event for
 * it (sd_evq_set_sleep's input): its spin window is reopened for
 * window_us, up to the deadline. */
static bool input_reopens(sd_evq_input_fn input, uint64_t *seen, unsigned window_us,
                          uint64_t deadline, uint64_t *poll_end)
{
    if (input == NULL || window_us == 0)
        return false;
    uint64_t n = input();
    if (n == *seen)
        return false;
    *seen = n;
    uint64_t end = now_us() + window_us;
    *poll_end = end < deadline ? end : deadline;
    return true;
}

DAT_RETURN sd_evq_wait(struct sd_evq *q, DAT_TIMEOUT timeout, DAT_COUNT threshold,
                       DAT_EVENT *ev, DAT_COUNT *nmore)
{
    DAT_RETURN rc;
    sd_evq_sleep_done_fn done = NULL; /* after a long sleep on the sockets */
    void *done_arg = NULL;
    if (!ev)
        return EVQ_ERR(DAT_INVALID_PARAMETER) | DAT_INVALID_ARG4;
    pthread_mutex_lock(&q->mu);
    if (threshold < 1 || threshold > q->cap) { /* L3713-3715 */
        rc = EVQ_ERR(DAT_INVALID_PARAMETER) | DAT_INVALID_ARG3;
        goto out;
    }
    if (q->aborted) { /* L3739 */
        rc = EVQ_ERR(DAT_ABORT);
        goto out;
    }
    if (atomic_load_explicit(&q->waiter, memory_order_relaxed)) { /* L3683-3686 */
        rc = EVQ_ERR(DAT_INVALID_STATE) | DAT_INVALID_STATE_EVD_WAITER;
        goto out;
    }
    if (!q->waitable) { /* L3727, L2865-2868 */
        rc = EVQ_ERR(DAT_INVALID_STATE) | DAT_INVALID_STATE_EVD_UNWAITABLE;
        goto out;
    }
    if (q->cfg != SD_EVQ_CFG_THRESHOLD && threshold != 1) { /* L2736-2741, L3717 */
        rc = EVQ_ERR(DAT_INVALID_STATE) |
             (q->cfg == SD_EVQ_CFG_NOTIFY ? DAT_INVALID_STATE_EVD_CONFIG_NOTIFY
                                          : DAT_INVALID_STATE_EVD_CONFIG_SOLICITED);
        goto out;
    }
    /* Waitable row (L2856-2863): any queued event satisfies threshold 1,
     * notification or not; for threshold > 1 we make the optional check
     * and block until enough events are queued (no premature wakeup, L2880). */
    if (cnt(q) >= threshold) {
        rc = deliver_locked(q, ev, nmore);
        goto out;
    }
    if (timeout == 0) { /* L3704-3709: never blocks */
        call_progress_polling(q);
        if (cnt(q) >= threshold &&
            !atomic_load_explicit(&q->waiter, memory_order_relaxed) && q->waitable &&
            !q->aborted) {
            rc = deliver_locked(q, ev, nmore);
            goto out;
        }
        if (nmore)
            *nmore = cnt(q);
        rc = EVQ_ERR(DAT_TIMEOUT_EXPIRED);
        goto out;
    }

    bool infinite = timeout == DAT_TIMEOUT_INFINITE;
    uint64_t start = now_us();
    uint64_t deadline = infinite ? UINT64_MAX : start + timeout;
    /* Adaptive spin (docs/perf.md, "Latency design"): after
     * SD_EVQ_SPIN_FAILS waits in a row whose spin window ran out, the next
     * SD_EVQ_SPIN_SKIP waits only call the hook once before sleeping. */
    unsigned spin_us = q->progress_us;
    if (q->spin_skip > 0) {
        q->spin_skip--;
        spin_us = 0;
    }
    uint64_t poll_end = start + spin_us;
    if (poll_end > deadline)
        poll_end = deadline;
    struct timespec dl_ts;
    if (!infinite)
        us_to_ts(deadline, &dl_ts);
    bool polling = q->progress != NULL;
    bool polled = false; /* the hook ran at least once before sleeping */
    bool spun = false;   /* a spin window is being used */
    bool released = !polling; /* the hook was told this thread sleeps now */
    bool sleep_ok = q->sleep != NULL; /* sleeping in the hook, not on cv */
    int chunk_ms = SD_EVQ_SLEEP_CHUNK_MS; /* the next sleep in the hook */
    bool long_lease = false;          /* the last one leased for longer than the first */
    /* Input without an event keeps the window open (sd_evq_set_sleep). */
    sd_evq_input_fn input = q->sleep != NULL ? q->input : NULL;
    uint64_t seen = input ? input() : 0;
    bool respin = false; /* a window reopened after a wake-up: its outcome is not counted */
    bool idled = false;  /* leases held elsewhere were given back (sd_evq_thread_idle) */
    /* Input reopens the configured window even in a wait whose own spin
     * was skipped (spin_skip): the skip is for waits on an idle stream. */
    unsigned respin_us = q->progress_us;

    atomic_store_explicit(&q->waiter, true, memory_order_relaxed);
    q->w_threshold = threshold;
    q->w_wake = false;
    q->w_rc = 0;
    for (;;) {
        if (q->w_rc) { /* set_unwaitable (L3727) or abort (L3739) */
            rc = q->w_rc;
            break;
        }
        bool satisfied = q->cfg == SD_EVQ_CFG_THRESHOLD ? cnt(q) >= threshold
                                                        : (q->w_wake && cnt(q) > 0);
        if (satisfied) {
            rc = deliver_locked(q, ev, nmore);
            if (spun)
                spin_outcome(q, true);
            break;
        }
        uint64_t now = now_us();
        if (!infinite && now >= deadline) {
            /* L3759, L2765: recheck the count before timing out. */
            if (cnt(q) >= threshold) {
                rc = deliver_locked(q, ev, nmore);
            } else {
                if (nmore)
                    *nmore = cnt(q);
                rc = EVQ_ERR(DAT_TIMEOUT_EXPIRED);
            }
            break;
        }
        if (polling && (now < poll_end || !polled)) {
            polled = true;
            int r;
            if (sleep_ok) {
                /* It will sleep on the sockets: it may hold them now too,
                 * as a polling consumer does, so that the engine stays
                 * off them (no second thread woken for the same data). */
                tl_wait_spin = true;
                r = call_progress_polling(q);
                tl_wait_spin = false;
            } else {
                /* Without a spin window this one call is also the last
                 * before sleeping (see `released` below). */
                if (spin_us == 0) {
                    released = true;
                    tl_sleeping = true;
                }
                r = call_progress(q);
                tl_sleeping = false;
            }
            if (r < 0)
                polling = false; /* nothing to progress: not a spin */
            else
                spun = spin_us > 0 && !respin;
            if (sleep_ok && r >= 0)
                input_reopens(input, &seen, respin_us, deadline, &poll_end);
            continue;
        }
        if (spun) { /* the window ran out: sleeping after all */
            spin_outcome(q, false);
            spun = false;
        }
        if (!idled) {
            /* Sleeping: what this thread leased on other connections
             * goes back to the engine first (unlocked: it takes their
             * locks), then the count is checked once more. */
            idled = true;
            void *arg = q->progress_arg;
            pthread_mutex_unlock(&q->mu);
            sd_evq_thread_idle(arg);
            pthread_mutex_lock(&q->mu);
            continue;
        }
        if (sleep_ok && polling) {
            int r = sleep_in_hook(q, infinite ? 0 : deadline - now, chunk_ms);
            long_lease = r >= 0 && chunk_ms > SD_EVQ_SLEEP_CHUNK_MS;
            if (r < 0) {
                sleep_ok = false; /* the cv from now on, */
                released = false; /* its sockets given back to the engine first */
            } else {
                chunk_ms = r > 0 ? SD_EVQ_SLEEP_CHUNK_MS
                                 : (chunk_ms * 2 > SD_EVQ_SLEEP_CHUNK_MAX_MS ? SD_EVQ_SLEEP_CHUNK_MAX_MS
                                                                          : chunk_ms * 2);
                call_progress(q); /* read what woke it */
                /* Input came, no event yet: more may follow at once. */
                if (input_reopens(input, &seen, respin_us, deadline, &poll_end))
                    respin = true;
            }
            continue;
        }
        if (!released) {
            /* A thread that polled until now (and may hold its QPs' sockets
             * for that) sleeps: the hook gives them back to the engine
             * first, then the count is checked once more. */
            released = true;
            tl_sleeping = true;
            call_progress(q);
            tl_sleeping = false;
            continue;
        }
        if (infinite)
            pthread_cond_wait(&q->cv, &q->mu);
        else
            pthread_cond_timedwait(&q->cv, &q->mu, &dl_ts);
    }
    atomic_store_explicit(&q->waiter, false, memory_order_relaxed);
    q->w_wake = false;
    q->w_rc = 0;
    if (long_lease) {
        done = q->sleep_done;
        done_arg = q->progress_arg;
    }
out:
    pthread_mutex_unlock(&q->mu);
    if (done)
        done(done_arg); /* unlocked: it takes the progress set's lock */
    return rc;
}

DAT_RETURN sd_evq_resize(struct sd_evq *q, DAT_COUNT qlen)
{
    if (qlen < 1 || qlen > SD_MAX_EVD_QLEN)
        return EVQ_ERR(DAT_INVALID_PARAMETER) | DAT_INVALID_ARG2;
    /* Allocate before locking: producers must not wait on malloc. */
    DAT_EVENT *ring = calloc((size_t)qlen, sizeof(DAT_EVENT));
    if (!ring)
        return EVQ_ERR(DAT_INSUFFICIENT_RESOURCES);
    pthread_mutex_lock(&q->mu);
    DAT_COUNT n = cnt(q);
    if (n + q->reserved > qlen || /* L3612, L3621: EVD unchanged */
        (atomic_load_explicit(&q->waiter, memory_order_relaxed) && q->w_threshold > qlen)) {
        pthread_mutex_unlock(&q->mu);
        free(ring);
        return EVQ_ERR(DAT_INVALID_STATE);
    }
    for (DAT_COUNT i = 0; i < n; i++) {
        DAT_COUNT j = q->head + i;
        if (j >= q->cap)
            j -= q->cap;
        ring[i] = q->ring[j];
    }
    DAT_EVENT *old = q->ring;
    q->ring = ring;
    q->head = 0;
    q->cap = qlen;
    pthread_mutex_unlock(&q->mu);
    free(old);
    return DAT_SUCCESS;
}

void sd_evq_set_enabled(struct sd_evq *q, bool enabled)
{
    pthread_mutex_lock(&q->mu);
    q->enabled = enabled;
    pthread_mutex_unlock(&q->mu);
}

void sd_evq_set_waitable(struct sd_evq *q, bool waitable)
{
    pthread_mutex_lock(&q->mu);
    q->waitable = waitable;
    /* L2816-2818; clearing it with a waiter is a no-op (L2791). */
    if (!waitable && atomic_load_explicit(&q->waiter, memory_order_relaxed)) {
        q->w_rc = EVQ_ERR(DAT_INVALID_STATE) | DAT_INVALID_STATE_EVD_UNWAITABLE;
        wake_waiter_locked(q);
    }
    pthread_mutex_unlock(&q->mu);
}

void sd_evq_abort(struct sd_evq *q)
{
    pthread_mutex_lock(&q->mu);
    q->aborted = true;
    if (atomic_load_explicit(&q->waiter, memory_order_relaxed)) {
        q->w_rc = EVQ_ERR(DAT_ABORT);
        wake_waiter_locked(q);
    }
    pthread_mutex_unlock(&q->mu);
}

void sd_evq_set_config(struct sd_evq *q, enum sd_evq_config cfg)
{
    pthread_mutex_lock(&q->mu);
    q->cfg = cfg;
    pthread_mutex_unlock(&q->mu);
}

struct sd_cnoq *sd_evq_set_cno(struct sd_evq *q, struct sd_cnoq *cno)
{
    pthread_mutex_lock(&q->mu);
    struct sd_cnoq *old = q->cno;
    q->cno = cno;
    pthread_mutex_unlock(&q->mu);
    return old;
}

void sd_evq_set_overflow_cb(struct sd_evq *q, sd_evq_overflow_fn fn, void *arg)
{
    pthread_mutex_lock(&q->mu);
    q->on_overflow = fn;
    q->overflow_arg = arg;
    pthread_mutex_unlock(&q->mu);
}

void sd_evq_set_progress(struct sd_evq *q, sd_evq_progress_fn fn, void *arg,
                         unsigned poll_us)
{
    pthread_mutex_lock(&q->mu);
    q->progress = fn;
    q->progress_arg = arg;
    q->progress_us = poll_us;
    atomic_store_explicit(&q->has_progress, fn != NULL, memory_order_relaxed);
    pthread_mutex_unlock(&q->mu);
}

void sd_evq_set_sleep(struct sd_evq *q, sd_evq_sleep_fn fn, sd_evq_sleep_done_fn done,
                      sd_evq_input_fn input)
{
    pthread_mutex_lock(&q->mu);
    q->sleep = fn;
    q->sleep_done = done;
    q->input = input;
    pthread_mutex_unlock(&q->mu);
}

void sd_evq_arm_progress(struct sd_evq *q, bool armed)
{
    /* Only the flag: call_progress still checks the hook under mu. */
    atomic_store_explicit(&q->has_progress, armed, memory_order_relaxed);
    if (armed)
        return;
    /* Nothing left to sleep on: the waiters' eventfd goes (an EVD without
     * connections holds no descriptor; the next sleep makes a new one). */
    pthread_mutex_lock(&q->mu);
    if (q->wake_fd >= 0 && !q->w_in_sleep) {
        close(q->wake_fd);
        q->wake_fd = -1;
    }
    pthread_mutex_unlock(&q->mu);
}

void sd_evq_info(struct sd_evq *q, struct sd_evq_info *info)
{
    pthread_mutex_lock(&q->mu);
    info->qlen = q->cap;
    info->count = cnt(q);
    info->reserved = q->reserved;
    info->waiter = atomic_load_explicit(&q->waiter, memory_order_relaxed);
    info->dropped = q->dropped;
    int st = q->enabled ? DAT_EVD_STATE_ENABLED : DAT_EVD_STATE_DISABLED;
    st |= q->waitable ? DAT_EVD_STATE_WAITABLE : DAT_EVD_STATE_UNWAITABLE;
    st |= q->cfg == SD_EVQ_CFG_NOTIFY      ? DAT_EVD_STATE_CONFIG_NOTIFY
          : q->cfg == SD_EVQ_CFG_SOLICITED ? DAT_EVD_STATE_CONFIG_SOLICITED
                                           : DAT_EVD_STATE_CONFIG_THRESHOLD;
    info->state = st;
    pthread_mutex_unlock(&q->mu);
}
