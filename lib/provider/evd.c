/* softdat EVD: handle, argument checks, IA/CNO references and the async
 * EVD wiring around the event-queue core (evq.c). Spec line numbers (Lnnnn)
 * refer to the DAT 2.0 text; docs/events.md has the semantics. */
#include <sched.h>
#include <stdatomic.h>
#include <time.h>

#include "emu/engine.h"
#include "emu/fault.h"
#include "emu/qp.h"
#include "lib/provider/evd.h"
#include "lib/provider/trace_rec.h"

#define SD_EVD_SPIN_YIELD 16 /* empty dequeues between two yields */

#include "emu/log.h"
#include "lib/provider/cno.h"
#include "lib/provider/ia.h"

/* ------------------------------------------------------------ producers */

DAT_RETURN sd_evd_post(struct sd_evd *evd, const DAT_EVENT *ev, enum sd_evq_kind kind, unsigned flags)
{
    uint64_t late = kind == SD_EVQ_DTO ? emu_fault_completion_delay_us() : 0;
    if (late != 0) { /* SOFTDAT_FAULT completion_delay_us=: a slow RNIC */
        struct timespec ts = {(time_t)(late / 1000000u), (long)(late % 1000000u) * 1000};
        nanosleep(&ts, NULL);
    }
    if (kind == SD_EVQ_DTO || kind == SD_EVQ_EXT)
        SD_CNT_EVD(evd, DCNT_EVD_DTO_CALLBACK);
    else if (kind == SD_EVQ_CONN || kind == SD_EVQ_CR)
        SD_CNT_EVD(evd, DCNT_EVD_CONN_CALLBACK);
    DAT_RETURN rc = sd_evq_post(&evd->q, ev, kind, flags);
    if (SD_TRACE_ON())
        sd_trace_event(evd, ev, kind, rc);
    return rc;
}

void sd_ia_post_async(struct sd_ia *ia, DAT_EVENT_NUMBER num, DAT_HANDLE handle, DAT_COUNT reason)
{
    if (ia == NULL)
        return;
    SD_CNT_IA(ia, DCNT_IA_ASYNC_ERROR);
    pthread_mutex_lock(&ia->lock);
    struct sd_evd *evd = ia->async_evd;
    if (evd != NULL && sd_handle_alive(&evd->h))
        sd_handle_ref(&evd->h);
    else
        evd = NULL;
    pthread_mutex_unlock(&ia->lock);
    if (evd == NULL) {
        SD_DBG("evd", "async event 0x%x dropped: IA has no async EVD", (unsigned)num);
        return;
    }
    DAT_EVENT ev = {0};
    ev.event_number = num;
    ev.event_data.asynch_error_event_data.dat_handle = handle;
    ev.event_data.asynch_error_event_data.reason = reason;
    /* A full async EVD keeps its last slot for its own overflow (evq). */
    DAT_RETURN rc = sd_evq_post(&evd->q, &ev, SD_EVQ_ASYNC, 0);
    if (SD_TRACE_ON())
        sd_trace_event(evd, &ev, SD_EVQ_ASYNC, rc);
    if (rc != DAT_SUCCESS)
        SD_DBG("evd", "async event 0x%x lost: async EVD full", (unsigned)num);
    sd_handle_put(&evd->h);
}

/* An event was lost to a full queue (coalesced per overflow episode). */
static void evd_overflow(void *arg, struct sd_evq *q, enum sd_evq_kind kind)
{
    (void)q;
    struct sd_evd *evd = arg;
    if (kind == SD_EVQ_ASYNC)
        return; /* this is the async EVD: the catastrophic event is queued */
    SD_DBG("evd", "evd %p overflowed (kind %d)", (void *)evd, (int)kind);
    SD_CNT_IA(evd->h.ia, DCNT_IA_ASYNC_CQ_ERROR);
    sd_ia_post_async(evd->h.ia, DAT_ASYNC_ERROR_EVD_OVERFLOW, (DAT_HANDLE)evd, DAT_EVD_OVERFLOW_ERROR);
}

/* ------------------------------------------------------------ object */

/* Detach the CNO (modify_cno to NULL, or teardown). */
static struct sd_cno *evd_swap_cno(struct sd_evd *evd, struct sd_cno *cno)
{
    pthread_mutex_lock(&evd->cno_mu);
    struct sd_cno *old = evd->cno;
    evd->cno = cno;
    if (evd->q_inited)
        sd_evq_set_cno(&evd->q, cno != NULL ? &cno->c : NULL);
    pthread_mutex_unlock(&evd->cno_mu);
    return old;
}

static void cno_drop(struct sd_cno *cno, bool freed)
{
    if (cno == NULL)
        return;
    sd_handle_dep_put(&cno->h);
    /* L3135: when every EVD of a CNO has been freed its waiters (and agent)
     * are released with a NULL EVD. Only a free counts, not modify_cno. */
    if (freed && (atomic_load(&cno->h.deps) & ~SD_DEPS_DYING) == 0 && cno->c_inited)
        sd_cnoq_wake_all(&cno->c, SD_RET(DAT_ABORT, 0));
    sd_handle_put(&cno->h);
}

static void evd_teardown(struct sd_handle *h)
{
    struct sd_evd *evd = (struct sd_evd *)h;
    if (evd->q_inited)
        sd_evq_abort(&evd->q); /* a blocked waiter returns DAT_ABORT (L3739) */
    cno_drop(evd_swap_cno(evd, NULL), true);
}

static void evd_release(struct sd_handle *h)
{
    struct sd_evd *evd = (struct sd_evd *)h;
    if (evd->q_inited) {
        /* No reference left, so no thread is inside sd_evq_wait. */
        DAT_RETURN rc = sd_evq_fini(&evd->q);
        if (rc != DAT_SUCCESS)
            SD_ERR("evd", "queue fini: 0x%x", (unsigned)rc);
        evd->q_inited = false;
    }
    if (evd->ps_inited) {
        sd_progress_set_fini(&evd->ps);
        evd->ps_inited = false;
    }
    pthread_mutex_destroy(&evd->cno_mu);
}

static const struct sd_handle_ops evd_ops = {
    .type = DAT_HANDLE_TYPE_EVD,
    .name = "evd",
    .size = sizeof(struct sd_evd),
    .phase = SD_PHASE_EVD,
    .teardown = evd_teardown,
    .release = evd_release,
};

DAT_RETURN sd_evd_create_obj(struct sd_ia *ia, DAT_COUNT min_qlen, struct sd_cno *cno, DAT_EVD_FLAGS flags,
                             struct sd_evd **out)
{
    /* L3328: beyond max_evd_qlen is an invalid parameter. */
    if (min_qlen < 0 || min_qlen > SD_MAX_EVD_QLEN)
        return SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    if (flags == 0 || (flags & ~(DAT_EVD_FLAGS)SD_EVD_VALID_FLAGS) != 0)
        return SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG4);
    struct sd_evd *evd = (struct sd_evd *)sd_handle_alloc(&evd_ops, ia);
    if (evd == NULL)
        return SD_RET(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
    pthread_mutex_init(&evd->cno_mu, NULL);
    evd->flags = flags;
    /* The core needs at least one slot; L3324 lets us grant more. */
    evd->qlen = min_qlen < 1 ? 1 : min_qlen;
    DAT_RETURN rc = sd_evq_init(&evd->q, evd->qlen, (DAT_EVD_HANDLE)evd);
    if (rc != DAT_SUCCESS) {
        sd_handle_discard(&evd->h);
        return DAT_GET_TYPE(rc) == DAT_INSUFFICIENT_RESOURCES
                   ? SD_RET(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY)
                   : rc;
    }
    evd->q_inited = true;
    sd_evq_set_overflow_cb(&evd->q, evd_overflow, evd);
    if (flags & DAT_EVD_DTO_FLAG) {
        /* Waiters and pollers drive receive progress of the connections
         * that complete here (architecture §6, progress.h). */
        sd_progress_evd_init(evd);
        evd->ps_inited = true;
    }
    if (cno != NULL) {
        if (!sd_handle_dep_get(&cno->h)) {
            sd_handle_discard(&evd->h);
            return SD_RET(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_CNO);
        }
        sd_handle_ref(&cno->h);
        evd_swap_cno(evd, cno);
    }
    rc = sd_handle_publish(&evd->h);
    if (rc != DAT_SUCCESS) {
        cno_drop(evd_swap_cno(evd, NULL), false);
        sd_handle_discard(&evd->h);
        return rc;
    }
    *out = evd;
    return DAT_SUCCESS;
}

/* The CNO argument of create/modify_cno: NULL, or a live CNO of this IA
 * (L3326, L1589). Returns it with a reference. */
static DAT_RETURN get_cno_of(struct sd_ia *ia, DAT_CNO_HANDLE raw, struct sd_cno **out)
{
    *out = NULL;
    if (raw == DAT_HANDLE_NULL)
        return DAT_SUCCESS;
    struct sd_cno *cno;
    DAT_RETURN rc = sd_cno_get(raw, &cno);
    if (rc != DAT_SUCCESS)
        return rc;
    if (cno->h.ia != ia) {
        sd_handle_put(&cno->h);
        return SD_RET(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_CNO);
    }
    *out = cno;
    return DAT_SUCCESS;
}

/* ------------------------------------------------------------ entry points */

static DAT_RETURN sd_evd_create(DAT_IA_HANDLE ia_handle, DAT_COUNT min_qlen, DAT_CNO_HANDLE cno_handle,
                                DAT_EVD_FLAGS flags, DAT_EVD_HANDLE *evd_handle)
{
    struct sd_ia *ia;
    DAT_RETURN rc = sd_ia_get(ia_handle, &ia);
    if (rc != DAT_SUCCESS)
        return rc;
    struct sd_cno *cno = NULL;
    if (evd_handle == NULL) {
        rc = SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG5);
        goto out;
    }
    rc = get_cno_of(ia, cno_handle, &cno);
    if (rc != DAT_SUCCESS)
        goto out;
    struct sd_evd *evd;
    rc = sd_evd_create_obj(ia, min_qlen, cno, flags, &evd);
    if (rc == DAT_SUCCESS)
        *evd_handle = (DAT_EVD_HANDLE)evd;
out:
    if (cno != NULL)
        sd_handle_put(&cno->h);
    sd_handle_put(&ia->h);
    return rc;
}

#define EVD_GET(raw, evd)                                                          \
    struct sd_evd *evd;                                                            \
    do {                                                                           \
        DAT_RETURN grc_ = sd_evd_get((raw), DAT_INVALID_HANDLE_EVD_REQUEST, &evd); \
        if (grc_ != DAT_SUCCESS)                                                   \
            return grc_;                                                           \
    } while (0)

static DAT_RETURN sd_evd_query(DAT_EVD_HANDLE evd_handle, DAT_EVD_PARAM_MASK mask, DAT_EVD_PARAM *param)
{
    EVD_GET(evd_handle, evd);
    DAT_RETURN rc = DAT_SUCCESS;
    if ((mask & ~(DAT_EVD_PARAM_MASK)DAT_EVD_FIELD_ALL) != 0)
        rc = SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    else if (param == NULL)
        rc = SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    else {
        struct sd_evq_info info;
        sd_evq_info(&evd->q, &info);
        param->ia_handle = sd_ia_consumer_handle(evd->h.ia);
        param->evd_qlen = info.qlen; /* current capacity (after resizes) */
        param->evd_state = (DAT_EVD_STATE)info.state;
        pthread_mutex_lock(&evd->cno_mu);
        param->cno_handle = (DAT_CNO_HANDLE)evd->cno;
        pthread_mutex_unlock(&evd->cno_mu);
        param->evd_flags = evd->flags;
    }
    sd_handle_put(&evd->h);
    return rc;
}

static DAT_RETURN sd_evd_free(DAT_EVD_HANDLE evd_handle)
{
    EVD_GET(evd_handle, evd);
    DAT_RETURN rc;
    struct sd_evq_info info;
    sd_evq_info(&evd->q, &info);
    if (info.waiter) /* L2793 */
        rc = SD_RET(DAT_INVALID_STATE, DAT_INVALID_STATE_EVD_WAITER);
    /* Deps count the EPs/SPs whose streams feed this EVD (L3375, L3384). */
    else if (!sd_handle_try_retire(&evd->h))
        rc = SD_RET(DAT_INVALID_STATE, DAT_INVALID_STATE_EVD_IN_USE);
    else
        rc = sd_handle_destroy(&evd->h, DAT_INVALID_HANDLE_EVD_REQUEST);
    sd_handle_put(&evd->h);
    return rc;
}

static DAT_RETURN sd_evd_modify_cno(DAT_EVD_HANDLE evd_handle, DAT_CNO_HANDLE cno_handle)
{
    EVD_GET(evd_handle, evd);
    struct sd_cno *cno;
    DAT_RETURN rc = get_cno_of(evd->h.ia, cno_handle, &cno);
    if (rc == DAT_SUCCESS && cno != NULL && !sd_handle_dep_get(&cno->h)) {
        sd_handle_put(&cno->h); /* being freed right now */
        rc = SD_RET(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_CNO);
    }
    if (rc == DAT_SUCCESS) {
        /* The reference from get_cno_of becomes the EVD's. A notification
         * already under way may still reach the old CNO (L3462). */
        cno_drop(evd_swap_cno(evd, cno), false);
    }
    sd_handle_put(&evd->h);
    return rc;
}

static DAT_RETURN sd_evd_enable(DAT_EVD_HANDLE evd_handle)
{
    EVD_GET(evd_handle, evd);
    sd_evq_set_enabled(&evd->q, true);
    sd_handle_put(&evd->h);
    return DAT_SUCCESS;
}

static DAT_RETURN sd_evd_disable(DAT_EVD_HANDLE evd_handle)
{
    EVD_GET(evd_handle, evd);
    sd_evq_set_enabled(&evd->q, false);
    sd_handle_put(&evd->h);
    return DAT_SUCCESS;
}

static DAT_RETURN sd_evd_set_unwaitable(DAT_EVD_HANDLE evd_handle)
{
    EVD_GET(evd_handle, evd);
    sd_evq_set_waitable(&evd->q, false);
    sd_handle_put(&evd->h);
    return DAT_SUCCESS;
}

static DAT_RETURN sd_evd_clear_unwaitable(DAT_EVD_HANDLE evd_handle)
{
    EVD_GET(evd_handle, evd);
    sd_evq_set_waitable(&evd->q, true);
    sd_handle_put(&evd->h);
    return DAT_SUCCESS;
}

static DAT_RETURN sd_evd_resize(DAT_EVD_HANDLE evd_handle, DAT_COUNT qlen)
{
    EVD_GET(evd_handle, evd);
    DAT_RETURN rc;
    if (qlen < 0 || qlen > SD_MAX_EVD_QLEN)
        rc = SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    else {
        /* As at create, 0 is granted as 1. Refused (INVALID_STATE, nothing
         * changed) below the queued count (L3617-3621). */
        rc = sd_evq_resize(&evd->q, qlen < 1 ? 1 : qlen);
        if (DAT_GET_TYPE(rc) == DAT_INSUFFICIENT_RESOURCES)
            rc = SD_RET(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
    }
    sd_handle_put(&evd->h);
    return rc;
}

static DAT_RETURN sd_evd_post_se(DAT_EVD_HANDLE evd_handle, const DAT_EVENT *event)
{
    EVD_GET(evd_handle, evd);
    DAT_RETURN rc;
    /* Only EVDs created with DAT_EVD_SOFTWARE_FLAG carry the SE stream
     * (L3751); the spec names no code: the handle is of the wrong kind for
     * this call, so ARG1 as an invalid parameter. */
    if ((evd->flags & DAT_EVD_SOFTWARE_FLAG) == 0)
        rc = SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG1);
    else if (event == NULL || event->event_number != DAT_SOFTWARE_EVENT)
        rc = SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    else /* full: DAT_QUEUE_FULL, no overflow condition (L3848-3850) */
    {
        rc = sd_evq_post(&evd->q, event, SD_EVQ_SOFTWARE, 0);
        if (SD_TRACE_ON())
            sd_trace_event(evd, event, SD_EVQ_SOFTWARE, rc);
    }
    sd_handle_put(&evd->h);
    return rc;
}

/* A thread spinning on an empty EVD gives its CPU away now and then, so
 * that the threads which will produce the event run.
 * - An EVD that only the engine fills (CR, connection, async: no receive
 *   progress of its own to make): every SD_EVD_SPIN_YIELD-th empty dequeue.
 *   With two CPUs, two spinning programs and their engines, each
 *   connection step otherwise waits for the scheduler to preempt a spinner
 *   (dtestcm: 1,000-3,200 connections/s before, 8,500-12,400 after). A
 *   thread that also polls a DTO EVD (Open MPI's progress loop polls its
 *   DTO and connection EVDs in turn) is left to the next rule.
 * - A DTO EVD, whose dequeue drives receive progress itself: only on a
 *   thread allowed on a single CPU (a 1-CPU container, taskset), once it
 *   has found nothing for a while. There the peer program, queued behind
 *   the spinner, can run only when the spinner lets it: two polled
 *   programs pinned to one CPU ping-pong in tens of microseconds instead
 *   of 0.5-4 ms. Elsewhere a DTO EVD that shows nothing does not mean
 *   nothing happens (Open MPI's ranks find their messages in memory, placed
 *   by the engine thread when they lose the lease), and a yield on a
 *   loaded host hands the CPU to an unrelated program for its time slice:
 *   yielding there after 1 ms of nothing made those ranks yield
 *   7,000-110,000 times per latency run (8 B: 7 -> 11-27 us), and after
 *   10 us cost a 2-CPU machine with a busy loop 6.5 -> 13 us of ping-pong
 *   latency. "A while" starts at SD_EVD_YIELD_START_US and adapts per
 *   thread: a yield that was away for SD_EVD_YIELD_LONG_US or more (an
 *   unrelated program took the CPU) doubles it, up to SD_EVD_YIELD_MAX_US;
 *   one that was away for less (but long enough for another thread to have
 *   run, SD_EVD_YIELD_SWITCH_US) and was followed within
 *   SD_EVD_YIELD_PAID_US by an event (the producer ran meanwhile) halves
 *   it, down to the start. A dequeue whose pass placed frames (RDMA Writes
 *   the program finds in memory) counts as finding something. */
#define SD_EVD_YIELD_START_US 10u
#define SD_EVD_YIELD_MAX_US 1000u
#define SD_EVD_YIELD_LONG_US 200u
#define SD_EVD_YIELD_PAID_US 50u
#define SD_EVD_YIELD_SWITCH_US 3u

static atomic_uint_fast64_t g_spin_yields;

uint64_t sd_evd_spin_yields(void)
{
    return atomic_load_explicit(&g_spin_yields, memory_order_relaxed);
}

static void spin_yield(void)
{
    atomic_fetch_add_explicit(&g_spin_yields, 1, memory_order_relaxed);
    sched_yield();
}

struct spin_state {
    unsigned engine_empty; /* empty dequeues in a row on engine-only EVDs */
    unsigned dto_empty;    /* ... on DTO EVDs */
    uint64_t since_us;     /* when the DTO run was first timed */
    uint64_t after_us;     /* nothing found this long: yield (0: not set yet) */
    uint64_t floor_us;     /* where after_us started: it never goes lower */
    uint64_t rx_fpdus;     /* emu_qp_thread_rx_fpdus() when last looked */
    uint64_t back_us;      /* when the last short yield returned */
    bool short_yield;      /* the last yield was short, no event since */
};

static _Thread_local struct spin_state tl_spin;

#define SD_EVD_YIELD_NEVER UINT64_MAX

/* Only a thread allowed on a single CPU yields (see above). */
static uint64_t start_after_us(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) == 1)
        return SD_EVD_YIELD_START_US;
    return SD_EVD_YIELD_NEVER;
}

static void dto_spin(struct spin_state *st, bool found)
{
    /* A pass that placed frames (an RDMA Write the program will find in
     * its memory: Open MPI's eager messages) found something too. */
    uint64_t fpdus = emu_qp_thread_rx_fpdus();
    if (fpdus != st->rx_fpdus) {
        st->rx_fpdus = fpdus;
        found = true;
    }
    if (st->after_us == 0)
        st->after_us = st->floor_us = start_after_us();
    if (st->after_us == SD_EVD_YIELD_NEVER)
        return;
    if (found) {
        if (st->short_yield && emu_now_us() - st->back_us < SD_EVD_YIELD_PAID_US &&
            st->after_us / 2 >= st->floor_us)
            st->after_us /= 2;
        st->short_yield = false;
        st->dto_empty = 0;
        return;
    }
    if (++st->dto_empty % SD_EVD_SPIN_YIELD != 0)
        return;
    uint64_t now = emu_now_us();
    if (st->dto_empty == SD_EVD_SPIN_YIELD) {
        st->since_us = now;
        return;
    }
    if (now - st->since_us < st->after_us)
        return;
    spin_yield();
    uint64_t back = emu_now_us();
    /* Back at once: nothing else wanted this CPU, the yield changed
     * nothing. */
    uint64_t away = back - now;
    st->short_yield = away >= SD_EVD_YIELD_SWITCH_US && away < SD_EVD_YIELD_LONG_US;
    st->back_us = back;
    /* The next yield needs another whole wait of finding nothing: on a
     * loaded host the wall clock runs on while the thread is preempted,
     * and a yield at every 16th dequeue from then on fed itself (Open
     * MPI's ranks: 100,000 yields per latency run at load 5). */
    st->since_us = back;
    if (away >= SD_EVD_YIELD_LONG_US && st->after_us * 2 <= SD_EVD_YIELD_MAX_US)
        st->after_us *= 2;
}

static void yield_if_spinning(bool engine_only, bool found)
{
    struct spin_state *st = &tl_spin;
    if (!engine_only) {
        st->engine_empty = 0;
        dto_spin(st, found);
    } else if (found) {
        st->engine_empty = 0;
    } else if (++st->engine_empty % SD_EVD_SPIN_YIELD == 0) {
        spin_yield();
    }
}

static DAT_RETURN sd_evd_dequeue(DAT_EVD_HANDLE evd_handle, DAT_EVENT *event)
{
    EVD_GET(evd_handle, evd);
    DAT_RETURN rc = event == NULL ? SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2)
                                  : sd_evq_dequeue(&evd->q, event);
    if (event != NULL) {
        bool found = rc == DAT_SUCCESS;
        /* The rest of the group is derived from these (counters.h). */
        SD_CNT_EVD(evd, found ? DCNT_EVD_DEQUEUE_FOUND : DCNT_EVD_DEQUEUE_NOT_FOUND);
        yield_if_spinning(!evd->ps_inited, found);
    }
    sd_handle_put(&evd->h);
    return rc;
}

static DAT_RETURN sd_evd_wait(DAT_EVD_HANDLE evd_handle, DAT_TIMEOUT timeout, DAT_COUNT threshold, DAT_EVENT *event,
                              DAT_COUNT *nmore)
{
    EVD_GET(evd_handle, evd);
    bool blocked = false;
    if (event != NULL) {
        /* The waiter blocks when fewer events than the threshold are queued. */
        struct sd_evq_info in;
        sd_evq_info(&evd->q, &in);
        blocked = in.count < (threshold > 1 ? threshold : 1);
        SD_CNT_EVD(evd, DCNT_EVD_WAIT);
        if (blocked)
            SD_CNT_EVD(evd, DCNT_EVD_WAIT_BLOCKED);
    }
    DAT_RETURN rc = event == NULL ? SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG4)
                                  : sd_evq_wait(&evd->q, timeout, threshold, event, nmore);
    if (blocked && rc == DAT_SUCCESS)
        SD_CNT_EVD(evd, DCNT_EVD_WAIT_NOTIFY); /* woken by an arriving event */
    sd_handle_put(&evd->h);
    return rc;
}

void sd_evd_fill_table(DAT_PROVIDER *p)
{
    p->evd_create_func = sd_evd_create;
    p->evd_query_func = sd_evd_query;
    p->evd_free_func = sd_evd_free;
    p->evd_modify_cno_func = sd_evd_modify_cno;
    p->evd_enable_func = sd_evd_enable;
    p->evd_disable_func = sd_evd_disable;
    p->evd_wait_func = sd_evd_wait;
    p->evd_resize_func = sd_evd_resize;
    p->evd_post_se_func = sd_evd_post_se;
    p->evd_dequeue_func = sd_evd_dequeue;
    p->evd_set_unwaitable_func = sd_evd_set_unwaitable;
    p->evd_clear_unwaitable_func = sd_evd_clear_unwaitable;
    /* provider.c fills the objects it knows; the CNO rides along here. */
    sd_cno_fill_table(p);
}
