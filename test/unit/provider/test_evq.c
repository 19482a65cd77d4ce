/* Unit tests for lib/provider/evq.[ch]: the EVD semantics engine. Every
 * wait is bounded (timeouts, or a producer guaranteed to post). */
#include <check.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lib/provider/cnoq.h"
#include "lib/provider/evq.h"

#define SELF ((DAT_EVD_HANDLE)(uintptr_t)0x5e1f)
#define TYPE(rc) DAT_GET_TYPE(rc)

static DAT_EVENT mk(DAT_EVENT_NUMBER num, uintptr_t tag)
{
    DAT_EVENT e;
    memset(&e, 0, sizeof(e));
    e.event_number = num;
    e.event_data.software_event_data.pointer = (DAT_PVOID)tag;
    return e;
}

static uintptr_t tag_of(const DAT_EVENT *e)
{
    return (uintptr_t)e->event_data.software_event_data.pointer;
}

static DAT_RETURN post_se(struct sd_evq *q, uintptr_t tag)
{
    DAT_EVENT e = mk(DAT_SOFTWARE_EVENT, tag);
    return sd_evq_post(q, &e, SD_EVQ_SOFTWARE, 0);
}

static uint64_t ms_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void sleep_ms(unsigned ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Wait (bounded) until a thread is blocked in sd_evq_wait. */
static void await_waiter(struct sd_evq *q)
{
    struct sd_evq_info in;
    for (int i = 0; i < 2000; i++) {
        sd_evq_info(q, &in);
        if (in.waiter)
            return;
        sleep_ms(1);
    }
    ck_abort_msg("no waiter appeared");
}

/* ------------------------------------------------------------ basics */

START_TEST(order_and_contents)
{
    struct sd_evq q;
    ck_assert_int_eq(sd_evq_init(&q, 4, SELF), DAT_SUCCESS);
    DAT_EVENT e;
    ck_assert_uint_eq(sd_evq_dequeue(&q, &e), DAT_QUEUE_EMPTY); /* bare type: dtest -p compares it with == */
    /* Many rounds so the ring wraps several times. */
    uintptr_t next_in = 1, next_out = 1;
    for (int round = 0; round < 10; round++) {
        for (int i = 0; i < 3; i++) {
            DAT_EVENT in = mk(DAT_SOFTWARE_EVENT, next_in++);
            in.evd_handle = (DAT_EVD_HANDLE)(uintptr_t)0xbad; /* overwritten */
            in.event_extension_data[7] = 0x1234;
            ck_assert_int_eq(sd_evq_post(&q, &in, SD_EVQ_SOFTWARE, 0), DAT_SUCCESS);
        }
        for (int i = 0; i < 3; i++) {
            memset(&e, 0xff, sizeof(e));
            ck_assert_int_eq(sd_evq_dequeue(&q, &e), DAT_SUCCESS);
            ck_assert_uint_eq(e.event_number, DAT_SOFTWARE_EVENT);
            ck_assert_ptr_eq(e.evd_handle, SELF);
            ck_assert_uint_eq(tag_of(&e), next_out++);
            ck_assert_uint_eq(e.event_extension_data[7], 0x1234);
        }
        ck_assert_int_eq(TYPE(sd_evq_dequeue(&q, &e)), DAT_QUEUE_EMPTY);
    }
    struct sd_evq_info in;
    sd_evq_info(&q, &in);
    ck_assert_int_eq(in.qlen, 4);
    ck_assert_int_eq(in.count, 0);
    ck_assert_int_eq(in.state, DAT_EVD_STATE_ENABLED | DAT_EVD_STATE_WAITABLE |
                                   DAT_EVD_STATE_CONFIG_THRESHOLD);
    ck_assert_int_eq(sd_evq_fini(&q), DAT_SUCCESS);
}
END_TEST

START_TEST(init_bad_qlen)
{
    struct sd_evq q;
    ck_assert_int_eq(TYPE(sd_evq_init(&q, 0, SELF)), DAT_INVALID_PARAMETER);
    ck_assert_int_eq(TYPE(sd_evq_init(&q, -3, SELF)), DAT_INVALID_PARAMETER);
    ck_assert_int_eq(sd_evq_init(&q, 2, SELF), DAT_SUCCESS);
    DAT_COUNT nmore;
    ck_assert_int_eq(TYPE(sd_evq_post(&q, NULL, SD_EVQ_SOFTWARE, 0)), DAT_INVALID_PARAMETER);
    ck_assert_int_eq(TYPE(sd_evq_dequeue(&q, NULL)), DAT_INVALID_PARAMETER);
    ck_assert_int_eq(TYPE(sd_evq_wait(&q, 0, 1, NULL, &nmore)), DAT_INVALID_PARAMETER);
    ck_assert_int_eq(sd_evq_fini(&q), DAT_SUCCESS);
}
END_TEST

/* ------------------------------------------------------------ overflow */

static int ovf_calls;
static enum sd_evq_kind ovf_kind;
static void on_ovf(void *arg, struct sd_evq *q, enum sd_evq_kind kind)
{
    ck_assert_ptr_eq(arg, &ovf_calls);
    ovf_calls++;
    ovf_kind = kind;
}

static void ovf_setup(struct sd_evq *q, DAT_COUNT qlen)
{
    ovf_calls = 0;
    ovf_kind = (enum sd_evq_kind)-1;
    ck_assert_int_eq(sd_evq_init(q, qlen, SELF), DAT_SUCCESS);
    sd_evq_set_overflow_cb(q, on_ovf, &ovf_calls);
}

START_TEST(overflow_software)
{
    struct sd_evq q;
    ovf_setup(&q, 2);
    ck_assert_int_eq(post_se(&q, 1), DAT_SUCCESS);
    ck_assert_int_eq(post_se(&q, 2), DAT_SUCCESS);
    ck_assert_int_eq(TYPE(post_se(&q, 3)), DAT_QUEUE_FULL);
    ck_assert_int_eq(ovf_calls, 0); /* no overflow event for SEs */
    DAT_EVENT e;
    ck_assert_int_eq(sd_evq_dequeue(&q, &e), DAT_SUCCESS);
    ck_assert_uint_eq(tag_of(&e), 1);
    ck_assert_int_eq(post_se(&q, 4), DAT_SUCCESS); /* still operational */
    ck_assert_int_eq(sd_evq_dequeue(&q, &e), DAT_SUCCESS);
    ck_assert_uint_eq(tag_of(&e), 2);
    ck_assert_int_eq(sd_evq_dequeue(&q, &e), DAT_SUCCESS);
    ck_assert_uint_eq(tag_of(&e), 4);
    sd_evq_fini(&q);
}
END_TEST

START_TEST(overflow_dto_coalesced)
{
    struct sd_evq q;
    ovf_setup(&q, 2);
    DAT_EVENT d = mk(DAT_DTO_COMPLETION_EVENT, 7);
    ck_assert_int_eq(sd_evq_post(&q, &d, SD_EVQ_DTO, SD_EVQ_F_NOTIFY), DAT_SUCCESS);
    ck_assert_int_eq(sd_evq_post(&q, &d, SD_EVQ_DTO, 0), DAT_SUCCESS);
    ck_assert_int_eq(TYPE(sd_evq_post(&q, &d, SD_EVQ_DTO, 0)), DAT_QUEUE_FULL);
    ck_assert_int_eq(TYPE(sd_evq_post(&q, &d, SD_EVQ_DTO, 0)), DAT_QUEUE_FULL);
    ck_assert_int_eq(ovf_calls, 1); /* sticky: one report for the episode */
    ck_assert_int_eq(ovf_kind, SD_EVQ_DTO);
    struct sd_evq_info in;
    sd_evq_info(&q, &in);
    ck_assert_uint_eq(in.dropped, 2);
    ck_assert_int_eq(in.count, 2); /* queued events not disturbed */
    DAT_EVENT e;
    ck_assert_int_eq(sd_evq_dequeue(&q, &e), DAT_SUCCESS);
    ck_assert_int_eq(TYPE(sd_evq_post(&q, &d, SD_EVQ_DTO, 0)), DAT_SUCCESS);
    ck_assert_int_eq(TYPE(sd_evq_post(&q, &d, SD_EVQ_DTO, 0)), DAT_QUEUE_FULL);
    ck_assert_int_eq(ovf_calls, 1); /* not drained yet: same episode */
    /* Drain completely: a new overflow is reported again. */
    ck_assert_int_eq(sd_evq_dequeue(&q, &e), DAT_SUCCESS);
    ck_assert_int_eq(sd_evq_dequeue(&q, &e), DAT_SUCCESS);
    ck_assert_int_eq(sd_evq_post(&q, &d, SD_EVQ_EXT, 0), DAT_SUCCESS);
    ck_assert_int_eq(sd_evq_post(&q, &d, SD_EVQ_EXT, 0), DAT_SUCCESS);
    ck_assert_int_eq(TYPE(sd_evq_post(&q, &d, SD_EVQ_EXT, 0)), DAT_QUEUE_FULL);
    ck_assert_int_eq(ovf_calls, 2);
    ck_assert_int_eq(ovf_kind, SD_EVQ_EXT);
    sd_evq_fini(&q);
}
END_TEST

START_TEST(overflow_cr_and_conn)
{
    struct sd_evq q;
    ovf_setup(&q, 1);
    DAT_EVENT cr = mk(DAT_CONNECTION_REQUEST_EVENT, 1);
    DAT_EVENT ce = mk(DAT_CONNECTION_EVENT_DISCONNECTED, 2);
    ck_assert_int_eq(sd_evq_post(&q, &cr, SD_EVQ_CR, 0), DAT_SUCCESS);
    ck_assert_int_eq(TYPE(sd_evq_post(&q, &cr, SD_EVQ_CR, 0)), DAT_QUEUE_FULL);
    ck_assert_int_eq(ovf_calls, 0); /* CR: provider rejects, no overflow event */
    ck_assert_int_eq(TYPE(sd_evq_post(&q, &ce, SD_EVQ_CONN, 0)), DAT_QUEUE_FULL);
    ck_assert_int_eq(ovf_calls, 1); /* connection event lost: overflow event */
    ck_assert_int_eq(ovf_kind, SD_EVQ_CONN);
    DAT_EVENT e;
    ck_assert_int_eq(sd_evq_dequeue(&q, &e), DAT_SUCCESS);
    ck_assert_uint_eq(e.event_number, DAT_CONNECTION_REQUEST_EVENT);
    /* Operational again once there is room. */
    ck_assert_int_eq(sd_evq_post(&q, &ce, SD_EVQ_CONN, 0), DAT_SUCCESS);
    ck_assert_int_eq(sd_evq_dequeue(&q, &e), DAT_SUCCESS);
    ck_assert_uint_eq(e.event_number, DAT_CONNECTION_EVENT_DISCONNECTED);
    sd_evq_fini(&q);
}
END_TEST

START_TEST(overflow_async_catastrophic)
{
    struct sd_evq q;
    ovf_setup(&q, 4);
    DAT_EVENT a = mk(DAT_ASYNC_ERROR_EP_BROKEN, 0);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(sd_evq_post(&q, &a, SD_EVQ_ASYNC, 0), DAT_SUCCESS);
    ck_assert_int_eq(TYPE(sd_evq_post(&q, &a, SD_EVQ_ASYNC, 0)), DAT_QUEUE_FULL);
    ck_assert_int_eq(TYPE(sd_evq_post(&q, &a, SD_EVQ_ASYNC, 0)), DAT_QUEUE_FULL);
    ck_assert_int_eq(ovf_calls, 1);
    ck_assert_int_eq(ovf_kind, SD_EVQ_ASYNC);
    DAT_EVENT e;
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(sd_evq_dequeue(&q, &e), DAT_SUCCESS);
        ck_assert_uint_eq(e.event_number, DAT_ASYNC_ERROR_EP_BROKEN);
    }
    /* The last reported error is the async EVD's own overflow. */
    ck_assert_int_eq(sd_evq_dequeue(&q, &e), DAT_SUCCESS);
    ck_assert_uint_eq(e.event_number, DAT_ASYNC_ERROR_EVD_OVERFLOW);
    ck_assert_ptr_eq(e.event_data.asynch_error_event_data.dat_handle, SELF);
    ck_assert_int_eq(e.event_data.asynch_error_event_data.reason, DAT_EVD_OVERFLOW_ERROR);
    ck_assert_int_eq(TYPE(sd_evq_dequeue(&q, &e)), DAT_QUEUE_EMPTY);
    sd_evq_fini(&q);
}
END_TEST

START_TEST(disabled_and_unwaitable_still_queue)
{
    struct sd_evq q;
    ovf_setup(&q, 1);
    sd_evq_set_enabled(&q, false);
    sd_evq_set_waitable(&q, false);
    DAT_EVENT d = mk(DAT_DTO_COMPLETION_EVENT, 1);
    ck_assert_int_eq(sd_evq_post(&q, &d, SD_EVQ_DTO, SD_EVQ_F_NOTIFY), DAT_SUCCESS);
    ck_assert_int_eq(TYPE(sd_evq_post(&q, &d, SD_EVQ_DTO, SD_EVQ_F_NOTIFY)), DAT_QUEUE_FULL);
    ck_assert_int_eq(ovf_calls, 1); /* spec L2697, L3556 */
    struct sd_evq_info in;
    sd_evq_info(&q, &in);
    ck_assert_int_eq(in.state, DAT_EVD_STATE_DISABLED | DAT_EVD_STATE_UNWAITABLE |
                                   DAT_EVD_STATE_CONFIG_THRESHOLD);
    DAT_EVENT e;
    ck_assert_int_eq(sd_evq_dequeue(&q, &e), DAT_SUCCESS);
    sd_evq_fini(&q);
}
END_TEST

/* ------------------------------------------------------------ resize, reserve */

START_TEST(resize_rules)
{
    struct sd_evq q;
    ck_assert_int_eq(sd_evq_init(&q, 4, SELF), DAT_SUCCESS);
    DAT_EVENT e;
    /* Move head off zero so the copy must unwrap. */
    ck_assert_int_eq(post_se(&q, 100), DAT_SUCCESS);
    ck_assert_int_eq(post_se(&q, 101), DAT_SUCCESS);
    ck_assert_int_eq(sd_evq_dequeue(&q, &e), DAT_SUCCESS);
    ck_assert_int_eq(sd_evq_dequeue(&q, &e), DAT_SUCCESS);
    for (uintptr_t i = 1; i <= 3; i++)
        ck_assert_int_eq(post_se(&q, i), DAT_SUCCESS);
    ck_assert_int_eq(TYPE(sd_evq_resize(&q, 2)), DAT_INVALID_STATE);
    ck_assert_int_eq(TYPE(sd_evq_resize(&q, 0)), DAT_INVALID_PARAMETER);
    struct sd_evq_info in;
    sd_evq_info(&q, &in);
    ck_assert_int_eq(in.qlen, 4); /* unchanged after failures */
    ck_assert_int_eq(in.count, 3);
    ck_assert_int_eq(sd_evq_resize(&q, 3), DAT_SUCCESS); /* exactly fits */
    ck_assert_int_eq(TYPE(post_se(&q, 9)), DAT_QUEUE_FULL);
    ck_assert_int_eq(sd_evq_resize(&q, 8), DAT_SUCCESS);
    for (uintptr_t i = 4; i <= 8; i++)
        ck_assert_int_eq(post_se(&q, i), DAT_SUCCESS);
    ck_assert_int_eq(TYPE(post_se(&q, 9)), DAT_QUEUE_FULL);
    for (uintptr_t i = 1; i <= 8; i++) {
        ck_assert_int_eq(sd_evq_dequeue(&q, &e), DAT_SUCCESS);
        ck_assert_uint_eq(tag_of(&e), i);
    }
    /* threshold is checked against the current length */
    DAT_COUNT nmore;
    ck_assert_int_eq(TYPE(sd_evq_wait(&q, 0, 9, &e, &nmore)), DAT_INVALID_PARAMETER);
    ck_assert_int_eq(TYPE(sd_evq_wait(&q, 0, 8, &e, &nmore)), DAT_TIMEOUT_EXPIRED);
    sd_evq_fini(&q);
}
END_TEST

START_TEST(reserve_commit)
{
    struct sd_evq q;
    ovf_setup(&q, 3);
    ck_assert_int_eq(sd_evq_reserve(&q, 2), DAT_SUCCESS);
    ck_assert_int_eq(TYPE(sd_evq_reserve(&q, 2)), DAT_QUEUE_FULL);
    ck_assert_int_eq(post_se(&q, 1), DAT_SUCCESS);
    ck_assert_int_eq(TYPE(post_se(&q, 2)), DAT_QUEUE_FULL); /* room is reserved */
    ck_assert_int_eq(TYPE(sd_evq_resize(&q, 2)), DAT_INVALID_STATE);
    DAT_EVENT d = mk(DAT_DTO_COMPLETION_EVENT, 10);
    ck_assert_int_eq(sd_evq_post(&q, &d, SD_EVQ_DTO, SD_EVQ_F_RESERVED), DAT_SUCCESS);
    ck_assert_int_eq(sd_evq_post(&q, &d, SD_EVQ_DTO, SD_EVQ_F_RESERVED), DAT_SUCCESS);
    ck_assert_int_eq(ovf_calls, 0);
    struct sd_evq_info in;
    sd_evq_info(&q, &in);
    ck_assert_int_eq(in.count, 3);
    ck_assert_int_eq(in.reserved, 0);
    DAT_EVENT e;
    ck_assert_int_eq(sd_evq_dequeue(&q, &e), DAT_SUCCESS);
    ck_assert_int_eq(sd_evq_reserve(&q, 1), DAT_SUCCESS);
    sd_evq_unreserve(&q, 1); /* e.g. a suppressed completion */
    ck_assert_int_eq(post_se(&q, 3), DAT_SUCCESS);
    sd_evq_fini(&q);
}
END_TEST

/* ------------------------------------------------------------ wait */

START_TEST(wait_timeout_zero)
{
    struct sd_evq q;
    ck_assert_int_eq(sd_evq_init(&q, 8, SELF), DAT_SUCCESS);
    DAT_EVENT e;
    DAT_COUNT nmore = -1;
    ck_assert_int_eq(TYPE(sd_evq_wait(&q, 0, 1, &e, &nmore)), DAT_TIMEOUT_EXPIRED);
    ck_assert_int_eq(nmore, 0);
    post_se(&q, 1);
    post_se(&q, 2);
    ck_assert_int_eq(TYPE(sd_evq_wait(&q, 0, 3, &e, &nmore)), DAT_TIMEOUT_EXPIRED);
    ck_assert_int_eq(nmore, 2); /* snapshot, nothing dequeued */
    ck_assert_int_eq(sd_evq_wait(&q, 0, 2, &e, &nmore), DAT_SUCCESS);
    ck_assert_uint_eq(tag_of(&e), 1);
    ck_assert_int_eq(nmore, 1);
    ck_assert_int_eq(TYPE(sd_evq_wait(&q, 0, 0, &e, &nmore)), DAT_INVALID_PARAMETER);
    ck_assert_int_eq(TYPE(sd_evq_wait(&q, 0, 9, &e, &nmore)), DAT_INVALID_PARAMETER);
    ck_assert_int_eq(TYPE(sd_evq_wait(&q, 1000, 9, &e, &nmore)), DAT_INVALID_PARAMETER);
    sd_evq_fini(&q);
}
END_TEST

START_TEST(wait_short_timeout)
{
    struct sd_evq q;
    ck_assert_int_eq(sd_evq_init(&q, 8, SELF), DAT_SUCCESS);
    DAT_EVENT e;
    DAT_COUNT nmore = -1;
    uint64_t t0 = ms_now();
    ck_assert_int_eq(TYPE(sd_evq_wait(&q, 30000, 1, &e, &nmore)), DAT_TIMEOUT_EXPIRED);
    uint64_t dt = ms_now() - t0;
    ck_assert_uint_ge(dt, 29);
    ck_assert_uint_lt(dt, 2000);
    ck_assert_int_eq(nmore, 0);
    /* not enough for the threshold at the deadline: nmore = queued */
    post_se(&q, 1);
    ck_assert_int_eq(TYPE(sd_evq_wait(&q, 10000, 2, &e, &nmore)), DAT_TIMEOUT_EXPIRED);
    ck_assert_int_eq(nmore, 1);
    sd_evq_fini(&q);
}
END_TEST

struct producer {
    struct sd_evq *q;
    int n;
    unsigned gap_ms;
    enum sd_evq_kind kind;
    unsigned flags;
    uintptr_t base;
};

static void *producer_main(void *arg)
{
    struct producer *p = arg;
    for (int i = 0; i < p->n; i++) {
        sleep_ms(p->gap_ms);
        DAT_EVENT e = mk(p->kind == SD_EVQ_SOFTWARE ? DAT_SOFTWARE_EVENT : DAT_DTO_COMPLETION_EVENT,
                         p->base + (uintptr_t)i);
        ck_assert_int_eq(sd_evq_post(p->q, &e, p->kind, p->flags), DAT_SUCCESS);
    }
    return NULL;
}

START_TEST(wait_infinite_with_producer)
{
    struct sd_evq q;
    ck_assert_int_eq(sd_evq_init(&q, 8, SELF), DAT_SUCCESS);
    struct producer p = {&q, 1, 20, SD_EVQ_SOFTWARE, 0, 42};
    pthread_t t;
    pthread_create(&t, NULL, producer_main, &p);
    DAT_EVENT e;
    DAT_COUNT nmore = -1;
    ck_assert_int_eq(sd_evq_wait(&q, DAT_TIMEOUT_INFINITE, 1, &e, &nmore), DAT_SUCCESS);
    ck_assert_uint_eq(tag_of(&e), 42);
    ck_assert_ptr_eq(e.evd_handle, SELF);
    ck_assert_int_eq(nmore, 0);
    pthread_join(t, NULL);
    sd_evq_fini(&q);
}
END_TEST

START_TEST(wait_threshold_not_premature)
{
    struct sd_evq q;
    ck_assert_int_eq(sd_evq_init(&q, 8, SELF), DAT_SUCCESS);
    struct producer p = {&q, 3, 15, SD_EVQ_DTO, SD_EVQ_F_NOTIFY, 0};
    pthread_t t;
    uint64_t t0 = ms_now();
    pthread_create(&t, NULL, producer_main, &p);
    DAT_EVENT e;
    DAT_COUNT nmore = -1;
    ck_assert_int_eq(sd_evq_wait(&q, 5000000, 3, &e, &nmore), DAT_SUCCESS);
    ck_assert_uint_ge(ms_now() - t0, 40); /* woke at the third event, not before */
    ck_assert_uint_eq(tag_of(&e), 0);     /* the first event is delivered */
    ck_assert_int_eq(nmore, 2);           /* >= threshold - 1 */
    pthread_join(t, NULL);
    sd_evq_fini(&q);
}
END_TEST

struct waiter {
    struct sd_evq *q;
    DAT_TIMEOUT timeout;
    DAT_COUNT threshold;
    DAT_RETURN rc;
    DAT_EVENT ev;
    DAT_COUNT nmore;
};

static void *waiter_main(void *arg)
{
    struct waiter *w = arg;
    w->rc = sd_evq_wait(w->q, w->timeout, w->threshold, &w->ev, &w->nmore);
    return NULL;
}

START_TEST(second_waiter_rejected)
{
    struct sd_evq q;
    ck_assert_int_eq(sd_evq_init(&q, 8, SELF), DAT_SUCCESS);
    struct waiter w = {&q, 5000000, 1, 0, {0}, 0};
    pthread_t t;
    pthread_create(&t, NULL, waiter_main, &w);
    await_waiter(&q);
    DAT_EVENT e;
    DAT_COUNT nmore;
    DAT_RETURN rc = sd_evq_wait(&q, 0, 1, &e, &nmore);
    ck_assert_int_eq(TYPE(rc), DAT_INVALID_STATE);
    ck_assert_int_eq(DAT_GET_SUBTYPE(rc), DAT_INVALID_STATE_EVD_WAITER);
    ck_assert_int_eq(TYPE(sd_evq_wait(&q, 1000, 1, &e, &nmore)), DAT_INVALID_STATE);
    ck_assert_int_eq(TYPE(sd_evq_dequeue(&q, &e)), DAT_INVALID_STATE);
    ck_assert_int_eq(TYPE(sd_evq_fini(&q)), DAT_INVALID_STATE);
    /* clear_unwaitable with a waiter is a successful no-op (L2791) */
    sd_evq_set_waitable(&q, true);
    ck_assert_int_eq(post_se(&q, 5), DAT_SUCCESS); /* SE always allowed (L1828) */
    pthread_join(t, NULL);
    ck_assert_int_eq(w.rc, DAT_SUCCESS);
    ck_assert_uint_eq(tag_of(&w.ev), 5);
    ck_assert_int_eq(sd_evq_fini(&q), DAT_SUCCESS);
}
END_TEST

START_TEST(unwaitable_wakes_waiter)
{
    struct sd_evq q;
    ck_assert_int_eq(sd_evq_init(&q, 8, SELF), DAT_SUCCESS);
    struct waiter w = {&q, DAT_TIMEOUT_INFINITE, 1, 0, {0}, 0};
    pthread_t t;
    pthread_create(&t, NULL, waiter_main, &w);
    await_waiter(&q);
    sd_evq_set_waitable(&q, false);
    pthread_join(t, NULL);
    ck_assert_int_eq(TYPE(w.rc), DAT_INVALID_STATE);
    DAT_EVENT e;
    DAT_COUNT nmore;
    post_se(&q, 1);
    ck_assert_int_eq(TYPE(sd_evq_wait(&q, 0, 1, &e, &nmore)), DAT_INVALID_STATE);
    ck_assert_int_eq(sd_evq_dequeue(&q, &e), DAT_SUCCESS); /* dequeue still works */
    sd_evq_set_waitable(&q, true);
    post_se(&q, 2);
    ck_assert_int_eq(sd_evq_wait(&q, 0, 1, &e, &nmore), DAT_SUCCESS);
    ck_assert_uint_eq(tag_of(&e), 2);
    sd_evq_fini(&q);
}
END_TEST

START_TEST(abort_wakes_waiter)
{
    struct sd_evq q;
    ck_assert_int_eq(sd_evq_init(&q, 8, SELF), DAT_SUCCESS);
    struct waiter w = {&q, DAT_TIMEOUT_INFINITE, 1, 0, {0}, 0};
    pthread_t t;
    pthread_create(&t, NULL, waiter_main, &w);
    await_waiter(&q);
    sd_evq_abort(&q);
    pthread_join(t, NULL);
    ck_assert_int_eq(TYPE(w.rc), DAT_ABORT);
    DAT_EVENT e;
    DAT_COUNT nmore;
    ck_assert_int_eq(TYPE(sd_evq_wait(&q, 0, 1, &e, &nmore)), DAT_ABORT);
    sd_evq_fini(&q);
}
END_TEST

START_TEST(notify_config)
{
    struct sd_evq q;
    ck_assert_int_eq(sd_evq_init(&q, 8, SELF), DAT_SUCCESS);
    sd_evq_set_config(&q, SD_EVQ_CFG_SOLICITED);
    DAT_EVENT e;
    DAT_COUNT nmore;
    DAT_RETURN rc = sd_evq_wait(&q, 0, 2, &e, &nmore);
    ck_assert_int_eq(TYPE(rc), DAT_INVALID_STATE); /* L2736-2741 */
    ck_assert_int_eq(DAT_GET_SUBTYPE(rc), DAT_INVALID_STATE_EVD_CONFIG_SOLICITED);
    struct sd_evq_info in;
    sd_evq_info(&q, &in);
    ck_assert_int_eq(in.state & 0x30, DAT_EVD_STATE_CONFIG_SOLICITED);
    sd_evq_set_config(&q, SD_EVQ_CFG_NOTIFY);

    /* A queued non-notification event satisfies a new wait at once. */
    DAT_EVENT d = mk(DAT_DTO_COMPLETION_EVENT, 1);
    sd_evq_post(&q, &d, SD_EVQ_DTO, 0);
    ck_assert_int_eq(sd_evq_wait(&q, 1000, 1, &e, &nmore), DAT_SUCCESS);

    /* A blocked waiter is not woken by non-notification events... */
    struct waiter w = {&q, 5000000, 1, 0, {0}, 0};
    pthread_t t;
    pthread_create(&t, NULL, waiter_main, &w);
    await_waiter(&q);
    d = mk(DAT_DTO_COMPLETION_EVENT, 2);
    sd_evq_post(&q, &d, SD_EVQ_DTO, 0);
    sleep_ms(30);
    sd_evq_info(&q, &in);
    ck_assert(in.waiter);
    /* ...but by a notification one, and gets the first queued event. */
    d = mk(DAT_DTO_COMPLETION_EVENT, 3);
    sd_evq_post(&q, &d, SD_EVQ_DTO, SD_EVQ_F_NOTIFY);
    pthread_join(t, NULL);
    ck_assert_int_eq(w.rc, DAT_SUCCESS);
    ck_assert_uint_eq(tag_of(&w.ev), 2);
    ck_assert_int_eq(w.nmore, 1);
    ck_assert_int_eq(sd_evq_dequeue(&q, &e), DAT_SUCCESS);

    /* A non-DTO stream always notifies. */
    pthread_create(&t, NULL, waiter_main, &w);
    await_waiter(&q);
    post_se(&q, 4);
    pthread_join(t, NULL);
    ck_assert_int_eq(w.rc, DAT_SUCCESS);
    ck_assert_uint_eq(tag_of(&w.ev), 4);

    /* At the deadline the count is rechecked (L3759): success. */
    w.timeout = 40000;
    pthread_create(&t, NULL, waiter_main, &w);
    await_waiter(&q);
    d = mk(DAT_DTO_COMPLETION_EVENT, 5);
    sd_evq_post(&q, &d, SD_EVQ_DTO, 0);
    pthread_join(t, NULL);
    ck_assert_int_eq(w.rc, DAT_SUCCESS);
    ck_assert_uint_eq(tag_of(&w.ev), 5);
    ck_assert_int_eq(w.nmore, 0);
    sd_evq_fini(&q);
}
END_TEST

/* ------------------------------------------------------------ CNO hook */

START_TEST(cno_trigger_rules)
{
    struct sd_evq q;
    struct sd_cnoq c;
    DAT_OS_WAIT_PROXY_AGENT none = {NULL, NULL};
    ck_assert_int_eq(sd_cnoq_init(&c, none), DAT_SUCCESS);
    ck_assert_int_eq(sd_evq_init(&q, 8, SELF), DAT_SUCCESS);
    ck_assert_ptr_null(sd_evq_set_cno(&q, &c));
    DAT_EVD_HANDLE h = NULL;
    DAT_EVENT e;

    post_se(&q, 1); /* enabled, no waiter: triggers */
    ck_assert_int_eq(sd_cnoq_wait(&c, 0, &h), DAT_SUCCESS);
    ck_assert_ptr_eq(h, SELF);
    ck_assert_int_eq(TYPE(sd_cnoq_wait(&c, 0, &h)), DAT_QUEUE_EMPTY);
    ck_assert_ptr_null(h);

    sd_evq_set_enabled(&q, false); /* disabled: queues, no trigger */
    post_se(&q, 2);
    ck_assert_int_eq(TYPE(sd_cnoq_wait(&c, 10000, &h)), DAT_QUEUE_EMPTY);
    struct sd_evq_info in;
    sd_evq_info(&q, &in);
    ck_assert_int_eq(in.count, 2);
    sd_evq_set_enabled(&q, true);
    post_se(&q, 3);
    ck_assert_int_eq(sd_cnoq_wait(&c, 0, &h), DAT_SUCCESS);

    /* A direct EVD waiter pre-empts the CNO (L2767, L3688-3690). */
    while (sd_evq_dequeue(&q, &e) == DAT_SUCCESS)
        ;
    struct waiter w = {&q, 5000000, 1, 0, {0}, 0};
    pthread_t t;
    pthread_create(&t, NULL, waiter_main, &w);
    await_waiter(&q);
    post_se(&q, 4);
    pthread_join(t, NULL);
    ck_assert_int_eq(w.rc, DAT_SUCCESS);
    ck_assert_int_eq(TYPE(sd_cnoq_wait(&c, 0, &h)), DAT_QUEUE_EMPTY);

    /* Non-notification completions of a notify-controlled EVD: no trigger. */
    sd_evq_set_config(&q, SD_EVQ_CFG_NOTIFY);
    DAT_EVENT d = mk(DAT_DTO_COMPLETION_EVENT, 5);
    sd_evq_post(&q, &d, SD_EVQ_DTO, 0);
    ck_assert_int_eq(TYPE(sd_cnoq_wait(&c, 0, &h)), DAT_QUEUE_EMPTY);
    sd_evq_post(&q, &d, SD_EVQ_DTO, SD_EVQ_F_NOTIFY);
    ck_assert_int_eq(sd_cnoq_wait(&c, 0, &h), DAT_SUCCESS);
    /* Threshold config: every completion is a notification. */
    sd_evq_set_config(&q, SD_EVQ_CFG_THRESHOLD);
    sd_evq_post(&q, &d, SD_EVQ_DTO, 0);
    ck_assert_int_eq(sd_cnoq_wait(&c, 0, &h), DAT_SUCCESS);
    ck_assert_ptr_eq(sd_cnoq_last(&c), SELF);

    /* Detached: no trigger. */
    ck_assert_ptr_eq(sd_evq_set_cno(&q, NULL), &c);
    post_se(&q, 6);
    ck_assert_int_eq(TYPE(sd_cnoq_wait(&c, 0, &h)), DAT_QUEUE_EMPTY);
    sd_evq_fini(&q);
    ck_assert_int_eq(sd_cnoq_fini(&c), DAT_SUCCESS);
}
END_TEST

struct cno_waiter {
    struct sd_cnoq *c;
    DAT_RETURN rc;
    DAT_EVD_HANDLE h;
};

static void *cno_waiter_main(void *arg)
{
    struct cno_waiter *w = arg;
    w->rc = sd_cnoq_wait(w->c, 5000000, &w->h);
    return NULL;
}

START_TEST(cno_woken_by_evd_event)
{
    struct sd_evq q;
    struct sd_cnoq c;
    DAT_OS_WAIT_PROXY_AGENT none = {NULL, NULL};
    ck_assert_int_eq(sd_cnoq_init(&c, none), DAT_SUCCESS);
    ck_assert_int_eq(sd_evq_init(&q, 8, SELF), DAT_SUCCESS);
    sd_evq_set_cno(&q, &c);
    struct cno_waiter w = {&c, 0, NULL};
    pthread_t t;
    pthread_create(&t, NULL, cno_waiter_main, &w);
    for (int i = 0; i < 2000 && sd_cnoq_waiters(&c) == 0; i++)
        sleep_ms(1);
    ck_assert_int_eq(sd_cnoq_waiters(&c), 1);
    ck_assert_int_eq(TYPE(sd_cnoq_fini(&c)), DAT_INVALID_STATE);
    post_se(&q, 1);
    pthread_join(t, NULL);
    ck_assert_int_eq(w.rc, DAT_SUCCESS);
    ck_assert_ptr_eq(w.h, SELF);
    DAT_EVENT e;
    ck_assert_int_eq(sd_evq_dequeue(&q, &e), DAT_SUCCESS); /* event is on the EVD */
    sd_evq_set_cno(&q, NULL);
    sd_evq_fini(&q);
    ck_assert_int_eq(sd_cnoq_fini(&c), DAT_SUCCESS);
}
END_TEST

/* ------------------------------------------------------------ progress hook */

static int progress_calls;
static int progress_fire_at;
static int progress_fn(void *arg, struct sd_evq *q)
{
    ck_assert_ptr_eq(arg, &progress_calls);
    if (++progress_calls == progress_fire_at) {
        DAT_EVENT e = mk(DAT_SOFTWARE_EVENT, 77);
        sd_evq_post(q, &e, SD_EVQ_SOFTWARE, 0);
        return 1;
    }
    return 0;
}

START_TEST(progress_hook)
{
    struct sd_evq q;
    ck_assert_int_eq(sd_evq_init(&q, 8, SELF), DAT_SUCCESS);
    DAT_EVENT e;
    DAT_COUNT nmore;
    ck_assert_int_eq(TYPE(sd_evq_dequeue(&q, &e)), DAT_QUEUE_EMPTY); /* default: none */
    progress_calls = 0;
    progress_fire_at = 3;
    sd_evq_set_progress(&q, progress_fn, &progress_calls, 1000000);
    uint64_t t0 = ms_now();
    ck_assert_int_eq(sd_evq_wait(&q, 5000000, 1, &e, &nmore), DAT_SUCCESS);
    ck_assert_uint_lt(ms_now() - t0, 1000); /* did not sleep to the deadline */
    ck_assert_uint_eq(tag_of(&e), 77);
    ck_assert_int_eq(progress_calls, 3);
    /* dequeue and wait(0) give it one chance */
    progress_calls = 0;
    progress_fire_at = 1;
    ck_assert_int_eq(sd_evq_dequeue(&q, &e), DAT_SUCCESS);
    ck_assert_uint_eq(tag_of(&e), 77);
    progress_calls = 0;
    ck_assert_int_eq(sd_evq_wait(&q, 0, 1, &e, &nmore), DAT_SUCCESS);
    /* a short poll window, then sleep; the timeout still holds */
    progress_calls = 0;
    progress_fire_at = -1;
    sd_evq_set_progress(&q, progress_fn, &progress_calls, 2000);
    ck_assert_int_eq(TYPE(sd_evq_wait(&q, 30000, 1, &e, &nmore)), DAT_TIMEOUT_EXPIRED);
    ck_assert_int_ge(progress_calls, 1);
    sd_evq_set_progress(&q, NULL, NULL, 0);
    sd_evq_fini(&q);
}
END_TEST

/* Input without events keeps a waiter spinning (sd_evq_set_sleep's
 * input): a stream of frames for it (RDMA Writes into its memory) would
 * otherwise cost a sleep and a wake-up between every two bursts. */
static struct {
    uint64_t t0;
    unsigned input_ms;      /* progress calls before then bring input */
    int calls;
    uint64_t input;
    bool pending;           /* the next call brings input (what woke the sleeper) */
    int sleeps;
    int calls_at_sleep[8];
    uint64_t first_sleep_ms;
    bool wake_first;        /* the first sleep returns at once, "woken by data" */
} g_in;

static int input_progress(void *arg, struct sd_evq *q)
{
    g_in.calls++;
    if (ms_now() - g_in.t0 < g_in.input_ms || g_in.pending) {
        g_in.input++;
        g_in.pending = false;
    }
    return 0;
}

static uint64_t input_count(void)
{
    return g_in.input;
}

static int input_sleep(void *arg, struct sd_evq *q, int wake_fd, int timeout_ms)
{
    if (g_in.sleeps == 0)
        g_in.first_sleep_ms = ms_now() - g_in.t0;
    if (g_in.sleeps < 8)
        g_in.calls_at_sleep[g_in.sleeps] = g_in.calls;
    g_in.sleeps++;
    if (g_in.wake_first && g_in.sleeps == 1) {
        g_in.pending = true;
        return 1;
    }
    sleep_ms((unsigned)timeout_ms);
    return 0;
}

static void input_done(void *arg)
{
}

START_TEST(input_keeps_spin_window_open)
{
    struct sd_evq q;
    ck_assert_int_eq(sd_evq_init(&q, 8, SELF), DAT_SUCCESS);
    DAT_EVENT e;
    DAT_COUNT nmore;
    /* A 20 ms spin window: longer than a preemption on a loaded machine
     * under a sanitizer, so that only the absence of input ends it. */
    sd_evq_set_progress(&q, input_progress, NULL, 20000);
    sd_evq_set_sleep(&q, input_sleep, input_done, input_count);
    /* Input for 150 ms: no sleep before it stops. */
    memset(&g_in, 0, sizeof g_in);
    g_in.input_ms = 150;
    g_in.t0 = ms_now();
    ck_assert_int_eq(TYPE(sd_evq_wait(&q, 250000, 1, &e, &nmore)), DAT_TIMEOUT_EXPIRED);
    ck_assert_int_ge(g_in.sleeps, 1);
    ck_assert_uint_ge(g_in.first_sleep_ms, 150);
    /* No input: it sleeps once its window runs out. */
    memset(&g_in, 0, sizeof g_in);
    g_in.t0 = ms_now();
    ck_assert_int_eq(TYPE(sd_evq_wait(&q, 100000, 1, &e, &nmore)), DAT_TIMEOUT_EXPIRED);
    ck_assert_uint_lt(g_in.first_sleep_ms, 100);
    /* Waits that spin in vain make the next ones skip their spin window
     * (SD_EVQ_SPIN_FAILS, then SD_EVQ_SPIN_SKIP waits)... */
    for (int i = 0; i < SD_EVQ_SPIN_FAILS; i++) {
        memset(&g_in, 0, sizeof g_in);
        g_in.t0 = ms_now();
        ck_assert_int_eq(TYPE(sd_evq_wait(&q, 30000, 1, &e, &nmore)), DAT_TIMEOUT_EXPIRED);
    }
    ck_assert_uint_gt(q.spin_skip, 0);
    /* ...but input still reopens it. Woken by input that made no event:
     * it spins again before the next sleep (more than the one call that
     * reads what woke it). */
    memset(&g_in, 0, sizeof g_in);
    g_in.wake_first = true;
    g_in.t0 = ms_now();
    ck_assert_int_eq(TYPE(sd_evq_wait(&q, 60000, 1, &e, &nmore)), DAT_TIMEOUT_EXPIRED);
    ck_assert_int_ge(g_in.sleeps, 2);
    ck_assert_int_gt(g_in.calls_at_sleep[1] - g_in.calls_at_sleep[0], 2);
    sd_evq_set_sleep(&q, NULL, NULL, NULL);
    sd_evq_set_progress(&q, NULL, NULL, 0);
    sd_evq_fini(&q);
}
END_TEST

/* ------------------------------------------------------------ stress */

#define STRESS_PRODUCERS 4
#define STRESS_EVENTS 20000

struct stress_consumer {
    struct sd_evq *q;
    int got[STRESS_PRODUCERS];
    int total;
};

static void *stress_consumer_main(void *arg)
{
    struct stress_consumer *s = arg;
    int want = STRESS_PRODUCERS * STRESS_EVENTS;
    uint64_t t0 = ms_now();
    while (s->total < want && ms_now() - t0 < 20000) {
        DAT_EVENT e;
        DAT_COUNT nmore;
        DAT_RETURN rc = (s->total & 1) ? sd_evq_dequeue(s->q, &e)
                                       : sd_evq_wait(s->q, 100000, 1, &e, &nmore);
        if (rc != DAT_SUCCESS)
            continue;
        uintptr_t tag = tag_of(&e);
        unsigned p = (unsigned)(tag >> 24), seq = (unsigned)(tag & 0xffffff);
        ck_assert_uint_lt(p, STRESS_PRODUCERS);
        ck_assert_int_eq((int)seq, s->got[p]); /* per-stream order kept */
        s->got[p]++;
        s->total++;
    }
    return NULL;
}

static void *stress_producer_main(void *arg)
{
    struct producer *p = arg;
    for (int i = 0; i < p->n; i++) {
        DAT_EVENT e = mk(DAT_DTO_COMPLETION_EVENT, p->base + (uintptr_t)i);
        /* Reserve-then-commit: a completion never overflows. */
        int tries = 0;
        while (sd_evq_reserve(p->q, 1) != DAT_SUCCESS) {
            ck_assert_int_lt(++tries, 1000000);
            sched_yield();
        }
        ck_assert_int_eq(sd_evq_post(p->q, &e, SD_EVQ_DTO, SD_EVQ_F_RESERVED | SD_EVQ_F_NOTIFY),
                         DAT_SUCCESS);
    }
    return NULL;
}

START_TEST(stress_producers_consumer)
{
    struct sd_evq q;
    struct sd_cnoq c;
    DAT_OS_WAIT_PROXY_AGENT none = {NULL, NULL};
    ck_assert_int_eq(sd_cnoq_init(&c, none), DAT_SUCCESS);
    ck_assert_int_eq(sd_evq_init(&q, 64, SELF), DAT_SUCCESS);
    sd_evq_set_cno(&q, &c);
    struct stress_consumer s;
    memset(&s, 0, sizeof(s));
    s.q = &q;
    pthread_t ct, pt[STRESS_PRODUCERS];
    struct producer p[STRESS_PRODUCERS];
    pthread_create(&ct, NULL, stress_consumer_main, &s);
    for (int i = 0; i < STRESS_PRODUCERS; i++) {
        p[i] = (struct producer){&q, STRESS_EVENTS, 0, SD_EVQ_DTO, 0, (uintptr_t)i << 24};
        pthread_create(&pt[i], NULL, stress_producer_main, &p[i]);
    }
    /* meanwhile poke the control paths */
    for (int i = 0; i < 200; i++) {
        DAT_EVD_HANDLE h;
        sd_evq_set_enabled(&q, i & 1);
        sd_cnoq_wait(&c, 0, &h);
        if (i % 50 == 0)
            sd_evq_resize(&q, 64 + i);
        struct sd_evq_info in;
        sd_evq_info(&q, &in);
    }
    for (int i = 0; i < STRESS_PRODUCERS; i++)
        pthread_join(pt[i], NULL);
    pthread_join(ct, NULL);
    ck_assert_int_eq(s.total, STRESS_PRODUCERS * STRESS_EVENTS);
    struct sd_evq_info in;
    sd_evq_info(&q, &in);
    ck_assert_uint_eq(in.dropped, 0);
    sd_evq_set_cno(&q, NULL);
    ck_assert_int_eq(sd_evq_fini(&q), DAT_SUCCESS);
    ck_assert_int_eq(sd_cnoq_fini(&c), DAT_SUCCESS);
}
END_TEST

static Suite *evq_suite(void)
{
    Suite *s = suite_create("evq");
    TCase *tc = tcase_create("evq");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, order_and_contents);
    tcase_add_test(tc, init_bad_qlen);
    tcase_add_test(tc, overflow_software);
    tcase_add_test(tc, overflow_dto_coalesced);
    tcase_add_test(tc, overflow_cr_and_conn);
    tcase_add_test(tc, overflow_async_catastrophic);
    tcase_add_test(tc, disabled_and_unwaitable_still_queue);
    tcase_add_test(tc, resize_rules);
    tcase_add_test(tc, reserve_commit);
    tcase_add_test(tc, wait_timeout_zero);
    tcase_add_test(tc, wait_short_timeout);
    tcase_add_test(tc, wait_infinite_with_producer);
    tcase_add_test(tc, wait_threshold_not_premature);
    tcase_add_test(tc, second_waiter_rejected);
    tcase_add_test(tc, unwaitable_wakes_waiter);
    tcase_add_test(tc, abort_wakes_waiter);
    tcase_add_test(tc, notify_config);
    tcase_add_test(tc, cno_trigger_rules);
    tcase_add_test(tc, cno_woken_by_evd_event);
    tcase_add_test(tc, progress_hook);
    tcase_add_test(tc, input_keeps_spin_window_open);
    tcase_add_test(tc, stress_producers_consumer);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(evq_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
