/* EVD object through the DAT table: create/query/free errors, software
 * events with wait/dequeue, enable/disable/unwaitable/resize, CNO wiring,
 * async EVD overflow, abort on IA close. */
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include "lib/provider/cno.h"
#include "lib/provider/evd.h"
#include "test/lib/prov_fixture.h"

#define STATE_DEFAULT (DAT_EVD_STATE_ENABLED | DAT_EVD_STATE_WAITABLE | DAT_EVD_STATE_CONFIG_THRESHOLD)

static uint64_t mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static DAT_EVENT se(uintptr_t v)
{
    DAT_EVENT ev;
    memset(&ev, 0, sizeof ev);
    ev.event_number = DAT_SOFTWARE_EVENT;
    ev.event_data.software_event_data.pointer = (DAT_PVOID)v;
    return ev;
}

/* Bounded: until a thread is blocked in dat_evd_wait on evd. */
static void wait_for_waiter(DAT_EVD_HANDLE evd)
{
    struct sd_evq_info info;
    for (int i = 0; i < 2000; i++) {
        sd_evq_info(&((struct sd_evd *)evd)->q, &info);
        if (info.waiter)
            return;
        usleep(1000);
    }
    ck_abort_msg("no waiter blocked on the EVD");
}

START_TEST(evd_create_query_free)
{
    DAT_PROVIDER *p = fx_provider("t-evd1", "lo", DAT_FALSE);
    DAT_IA_HANDLE ia = fx_open(p, NULL), ia2 = fx_open(p, NULL);
    DAT_EVD_HANDLE evd = DAT_HANDLE_NULL;
    DAT_CNO_HANDLE cno2;
    ck_assert_dat_ok(p->cno_create_func(ia2, DAT_OS_WAIT_PROXY_AGENT_NULL, &cno2));

    ck_assert_dat_err(p->evd_create_func(NULL, 4, NULL, DAT_EVD_DTO_FLAG, &evd), DAT_INVALID_HANDLE,
                      DAT_INVALID_HANDLE_IA);
    ck_assert_dat_err(p->evd_create_func(ia, -1, NULL, DAT_EVD_DTO_FLAG, &evd), DAT_INVALID_PARAMETER,
                      DAT_INVALID_ARG2);
    ck_assert_dat_err(p->evd_create_func(ia, SD_MAX_EVD_QLEN + 1, NULL, DAT_EVD_DTO_FLAG, &evd),
                      DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    ck_assert_dat_err(p->evd_create_func(ia, 4, NULL, 0, &evd), DAT_INVALID_PARAMETER, DAT_INVALID_ARG4);
    ck_assert_dat_err(p->evd_create_func(ia, 4, NULL, 0x400, &evd), DAT_INVALID_PARAMETER, DAT_INVALID_ARG4);
    ck_assert_dat_err(p->evd_create_func(ia, 4, NULL, DAT_EVD_DTO_FLAG, NULL), DAT_INVALID_PARAMETER,
                      DAT_INVALID_ARG5);
    ck_assert_dat_err(p->evd_create_func(ia, 4, (DAT_CNO_HANDLE)&evd, DAT_EVD_DTO_FLAG, &evd), DAT_INVALID_HANDLE,
                      DAT_INVALID_HANDLE_CNO);
    /* A CNO of another IA (L3326). */
    ck_assert_dat_err(p->evd_create_func(ia, 4, cno2, DAT_EVD_DTO_FLAG, &evd), DAT_INVALID_HANDLE,
                      DAT_INVALID_HANDLE_CNO);
    ck_assert_ptr_null(evd);

    /* qlen 0 is granted as 1 (query reports >= requested). */
    ck_assert_dat_ok(p->evd_create_func(ia, 0, NULL, DAT_EVD_SOFTWARE_FLAG, &evd));
    DAT_EVD_PARAM ep;
    memset(&ep, 0xAB, sizeof ep);
    ck_assert_dat_ok(p->evd_query_func(evd, DAT_EVD_FIELD_ALL, &ep));
    ck_assert_int_eq(ep.evd_qlen, 1);
    ck_assert_dat_ok(p->evd_free_func(evd));

    ck_assert_dat_ok(p->evd_create_func(ia, 5, NULL, DAT_EVD_DTO_FLAG | DAT_EVD_RMR_BIND_FLAG, &evd));
    memset(&ep, 0xAB, sizeof ep);
    ck_assert_dat_ok(p->evd_query_func(evd, DAT_EVD_FIELD_ALL, &ep));
    ck_assert_ptr_eq(ep.ia_handle, ia);
    ck_assert_int_eq(ep.evd_qlen, 5);
    ck_assert_int_eq(ep.evd_state, STATE_DEFAULT);
    ck_assert_ptr_null(ep.cno_handle);
    ck_assert_int_eq(ep.evd_flags, DAT_EVD_DTO_FLAG | DAT_EVD_RMR_BIND_FLAG);
    ck_assert_dat_err(p->evd_query_func(evd, 0x20, &ep), DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    ck_assert_dat_err(p->evd_query_func(evd, DAT_EVD_FIELD_ALL, NULL), DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    ck_assert_dat_err(p->evd_query_func(ia, DAT_EVD_FIELD_ALL, &ep), DAT_INVALID_HANDLE,
                      DAT_INVALID_HANDLE_EVD_REQUEST);

    /* sd_evd_accepts: the stream check ep/psp create use. */
    struct sd_evd *e = (struct sd_evd *)evd;
    ck_assert(sd_evd_accepts(e, DAT_EVD_DTO_FLAG));
    ck_assert(sd_evd_accepts(e, DAT_EVD_DTO_FLAG | DAT_EVD_RMR_BIND_FLAG));
    ck_assert(!sd_evd_accepts(e, DAT_EVD_CONNECTION_FLAG));
    ck_assert(!sd_evd_accepts(e, DAT_EVD_CR_FLAG | DAT_EVD_DTO_FLAG));

    /* In use by a stream (an EP/SP holds a dependency). */
    ck_assert_int_eq(sd_handle_dep_get(&e->h), 1);
    ck_assert_dat_err(p->evd_free_func(evd), DAT_INVALID_STATE, DAT_INVALID_STATE_EVD_IN_USE);
    sd_handle_dep_put(&e->h);
    ck_assert_dat_ok(p->evd_free_func(evd));
    ck_assert_dat_err(p->evd_free_func(evd), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_REQUEST);

    ck_assert_dat_ok(p->cno_free_func(cno2));
    ck_assert_dat_ok(p->ia_close_func(ia, DAT_CLOSE_GRACEFUL_FLAG));
    ck_assert_dat_ok(p->ia_close_func(ia2, DAT_CLOSE_GRACEFUL_FLAG));
    ck_assert_uint_eq(sd_handle_live_count(), 0);
}
END_TEST

START_TEST(evd_software_wait_dequeue)
{
    DAT_PROVIDER *p = fx_provider("t-evd2", "lo", DAT_FALSE);
    DAT_EVD_HANDLE async = DAT_HANDLE_NULL;
    DAT_IA_HANDLE ia = fx_open(p, &async);
    DAT_EVD_HANDLE evd, dto;
    ck_assert_dat_ok(p->evd_create_func(ia, 4, NULL, DAT_EVD_SOFTWARE_FLAG, &evd));
    ck_assert_dat_ok(p->evd_create_func(ia, 4, NULL, DAT_EVD_DTO_FLAG, &dto));
    DAT_EVENT ev, in = se(1);
    DAT_COUNT nmore = -1;

    ck_assert_uint_eq(p->evd_dequeue_func(evd, &ev), DAT_QUEUE_EMPTY);
    ck_assert_dat_err(p->evd_dequeue_func(evd, NULL), DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    ck_assert_dat_err(p->evd_wait_func(evd, 0, 1, &ev, &nmore), DAT_TIMEOUT_EXPIRED, 0);
    ck_assert_int_eq(nmore, 0);
    uint64_t t0 = mono_us();
    ck_assert_dat_err(p->evd_wait_func(evd, 20000, 1, &ev, &nmore), DAT_TIMEOUT_EXPIRED, 0);
    ck_assert_uint_ge(mono_us() - t0, 19000);
    ck_assert_int_eq(ERRT(p->evd_wait_func(evd, 0, 0, &ev, &nmore)), DAT_INVALID_PARAMETER);
    ck_assert_int_eq(ERRT(p->evd_wait_func(evd, 0, 5, &ev, &nmore)), DAT_INVALID_PARAMETER); /* > qlen */
    ck_assert_dat_err(p->evd_wait_func(evd, 0, 1, NULL, &nmore), DAT_INVALID_PARAMETER, DAT_INVALID_ARG4);

    /* post_se argument rules. */
    ck_assert_dat_err(p->evd_post_se_func(evd, NULL), DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    DAT_EVENT bad = se(9);
    bad.event_number = DAT_DTO_COMPLETION_EVENT;
    ck_assert_dat_err(p->evd_post_se_func(evd, &bad), DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    ck_assert_dat_err(p->evd_post_se_func(dto, &in), DAT_INVALID_PARAMETER, DAT_INVALID_ARG1);

    for (uintptr_t i = 1; i <= 3; i++) {
        in = se(i);
        ck_assert_dat_ok(p->evd_post_se_func(evd, &in));
    }
    /* threshold 3 is met: the first event, two more left. */
    ck_assert_dat_ok(p->evd_wait_func(evd, DAT_TIMEOUT_INFINITE, 3, &ev, &nmore));
    ck_assert_int_eq(ev.event_number, DAT_SOFTWARE_EVENT);
    ck_assert_ptr_eq(ev.evd_handle, evd);
    ck_assert_ptr_eq(ev.event_data.software_event_data.pointer, (DAT_PVOID)1);
    ck_assert_int_eq(nmore, 2);
    /* threshold 3 with 2 queued times out without dequeuing. */
    ck_assert_dat_err(p->evd_wait_func(evd, 1000, 3, &ev, &nmore), DAT_TIMEOUT_EXPIRED, 0);
    ck_assert_int_eq(nmore, 2);
    ck_assert_dat_ok(p->evd_dequeue_func(evd, &ev));
    ck_assert_ptr_eq(ev.event_data.software_event_data.pointer, (DAT_PVOID)2);
    ck_assert_dat_ok(p->evd_dequeue_func(evd, &ev));
    ck_assert_ptr_eq(ev.event_data.software_event_data.pointer, (DAT_PVOID)3);

    /* Full: DAT_QUEUE_FULL, nothing queued, no overflow event (L3848). */
    for (uintptr_t i = 0; i < 4; i++) {
        in = se(10 + i);
        ck_assert_dat_ok(p->evd_post_se_func(evd, &in));
    }
    ck_assert_dat_err(p->evd_post_se_func(evd, &in), DAT_QUEUE_FULL, 0);
    ck_assert_uint_eq(p->evd_dequeue_func(async, &ev), DAT_QUEUE_EMPTY);
    for (uintptr_t i = 0; i < 4; i++) {
        ck_assert_dat_ok(p->evd_dequeue_func(evd, &ev));
        ck_assert_ptr_eq(ev.event_data.software_event_data.pointer, (DAT_PVOID)(10 + i));
    }
    ck_assert_uint_eq(p->evd_dequeue_func(evd, &ev), DAT_QUEUE_EMPTY);

    ck_assert_dat_ok(p->evd_free_func(evd));
    ck_assert_dat_ok(p->evd_free_func(dto));
    ck_assert_dat_ok(p->ia_close_func(ia, DAT_CLOSE_GRACEFUL_FLAG));
    ck_assert_uint_eq(sd_handle_live_count(), 0);
}
END_TEST

struct waiter {
    DAT_PROVIDER *p;
    DAT_HANDLE h;
    DAT_TIMEOUT timeout;
    DAT_RETURN rc;
    DAT_EVENT ev;
    DAT_COUNT nmore;
    DAT_EVD_HANDLE evd; /* cno wait result */
};

static void *evd_waiter(void *arg)
{
    struct waiter *w = arg;
    w->rc = w->p->evd_wait_func(w->h, w->timeout, 1, &w->ev, &w->nmore);
    return NULL;
}

static void *cno_waiter(void *arg)
{
    struct waiter *w = arg;
    w->rc = w->p->cno_wait_func(w->h, w->timeout, &w->evd);
    return NULL;
}

START_TEST(evd_blocking_wait_rules)
{
    DAT_PROVIDER *p = fx_provider("t-evd3", "lo", DAT_FALSE);
    DAT_IA_HANDLE ia = fx_open(p, NULL);
    DAT_EVD_HANDLE evd;
    ck_assert_dat_ok(p->evd_create_func(ia, 4, NULL, DAT_EVD_SOFTWARE_FLAG, &evd));

    /* A blocked waiter gets the posted event. While it waits, dequeue,
     * another wait and free are refused (L3683-3686, L2793). */
    struct waiter w = {.p = p, .h = evd, .timeout = 5000000};
    pthread_t t;
    pthread_create(&t, NULL, evd_waiter, &w);
    wait_for_waiter(evd);
    DAT_EVENT ev, in = se(42);
    DAT_COUNT nmore;
    ck_assert_dat_err(p->evd_dequeue_func(evd, &ev), DAT_INVALID_STATE, DAT_INVALID_STATE_EVD_WAITER);
    ck_assert_dat_err(p->evd_wait_func(evd, 0, 1, &ev, &nmore), DAT_INVALID_STATE, DAT_INVALID_STATE_EVD_WAITER);
    ck_assert_dat_err(p->evd_free_func(evd), DAT_INVALID_STATE, DAT_INVALID_STATE_EVD_WAITER);
    ck_assert_dat_ok(p->evd_post_se_func(evd, &in));
    pthread_join(t, NULL);
    ck_assert_dat_ok(w.rc);
    ck_assert_ptr_eq(w.ev.event_data.software_event_data.pointer, (DAT_PVOID)42);
    ck_assert_int_eq(w.nmore, 0);

    /* set_unwaitable wakes the waiter with DAT_INVALID_STATE; later waits
     * fail, dequeue still works (L3554-3556). */
    pthread_create(&t, NULL, evd_waiter, &w);
    wait_for_waiter(evd);
    ck_assert_dat_ok(p->evd_set_unwaitable_func(evd));
    pthread_join(t, NULL);
    ck_assert_int_eq(ERRT(w.rc), DAT_INVALID_STATE);
    DAT_EVD_PARAM ep;
    ck_assert_dat_ok(p->evd_query_func(evd, DAT_EVD_FIELD_EVD_STATE, &ep));
    ck_assert_int_eq(ep.evd_state, DAT_EVD_STATE_ENABLED | DAT_EVD_STATE_UNWAITABLE | DAT_EVD_STATE_CONFIG_THRESHOLD);
    ck_assert_dat_ok(p->evd_post_se_func(evd, &in));
    ck_assert_int_eq(ERRT(p->evd_wait_func(evd, 0, 1, &ev, &nmore)), DAT_INVALID_STATE);
    ck_assert_dat_ok(p->evd_dequeue_func(evd, &ev));
    ck_assert_dat_ok(p->evd_clear_unwaitable_func(evd));
    ck_assert_dat_ok(p->evd_post_se_func(evd, &in));
    ck_assert_dat_ok(p->evd_wait_func(evd, 0, 1, &ev, &nmore));

    /* enable/disable show in the state and are idempotent. */
    ck_assert_dat_ok(p->evd_disable_func(evd));
    ck_assert_dat_ok(p->evd_disable_func(evd));
    ck_assert_dat_ok(p->evd_query_func(evd, DAT_EVD_FIELD_ALL, &ep));
    ck_assert_int_eq(ep.evd_state, DAT_EVD_STATE_DISABLED | DAT_EVD_STATE_WAITABLE | DAT_EVD_STATE_CONFIG_THRESHOLD);
    ck_assert_dat_ok(p->evd_post_se_func(evd, &in)); /* still queues */
    ck_assert_dat_ok(p->evd_enable_func(evd));
    ck_assert_dat_ok(p->evd_query_func(evd, DAT_EVD_FIELD_ALL, &ep));
    ck_assert_int_eq(ep.evd_state, STATE_DEFAULT);

    /* resize: keeps events, refuses below the queued count. */
    ck_assert_dat_ok(p->evd_post_se_func(evd, &in));
    ck_assert_dat_ok(p->evd_post_se_func(evd, &in)); /* 3 queued */
    ck_assert_int_eq(ERRT(p->evd_resize_func(evd, 2)), DAT_INVALID_STATE);
    ck_assert_dat_err(p->evd_resize_func(evd, -1), DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    ck_assert_dat_err(p->evd_resize_func(evd, SD_MAX_EVD_QLEN + 1), DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    ck_assert_dat_ok(p->evd_resize_func(evd, 16));
    ck_assert_dat_ok(p->evd_query_func(evd, DAT_EVD_FIELD_EVD_QLEN, &ep));
    ck_assert_int_eq(ep.evd_qlen, 16);
    for (int i = 0; i < 3; i++)
        ck_assert_dat_ok(p->evd_dequeue_func(evd, &ev));
    ck_assert_uint_eq(p->evd_dequeue_func(evd, &ev), DAT_QUEUE_EMPTY);
    ck_assert_dat_ok(p->evd_resize_func(evd, 0)); /* granted as 1 */
    ck_assert_dat_ok(p->evd_query_func(evd, DAT_EVD_FIELD_EVD_QLEN, &ep));
    ck_assert_int_eq(ep.evd_qlen, 1);

    /* Abrupt IA close: a blocked waiter returns DAT_ABORT (L3739). */
    w.timeout = DAT_TIMEOUT_INFINITE;
    pthread_create(&t, NULL, evd_waiter, &w);
    wait_for_waiter(evd);
    ck_assert_dat_ok(p->ia_close_func(ia, DAT_CLOSE_ABRUPT_FLAG));
    pthread_join(t, NULL);
    ck_assert_int_eq(ERRT(w.rc), DAT_ABORT);
    ck_assert_uint_eq(sd_handle_live_count(), 0);
}
END_TEST

START_TEST(evd_cno_notification)
{
    DAT_PROVIDER *p = fx_provider("t-evd4", "lo", DAT_FALSE);
    DAT_IA_HANDLE ia = fx_open(p, NULL), ia2 = fx_open(p, NULL);
    DAT_CNO_HANDLE cno, cno2;
    DAT_EVD_HANDLE evd, got = (DAT_EVD_HANDLE)1;
    ck_assert_dat_ok(p->cno_create_func(ia, DAT_OS_WAIT_PROXY_AGENT_NULL, &cno));
    ck_assert_dat_ok(p->cno_create_func(ia2, DAT_OS_WAIT_PROXY_AGENT_NULL, &cno2));
    ck_assert_dat_ok(p->evd_create_func(ia, 8, cno, DAT_EVD_SOFTWARE_FLAG, &evd));
    DAT_EVD_PARAM ep;
    ck_assert_dat_ok(p->evd_query_func(evd, DAT_EVD_FIELD_CNO, &ep));
    ck_assert_ptr_eq(ep.cno_handle, cno);

    ck_assert_dat_err(p->cno_wait_func(cno, 0, &got), DAT_QUEUE_EMPTY, 0);
    ck_assert_ptr_null(got);
    DAT_EVENT in = se(7), ev;
    ck_assert_dat_ok(p->evd_post_se_func(evd, &in));
    ck_assert_dat_ok(p->cno_wait_func(cno, 0, &got));
    ck_assert_ptr_eq(got, evd);
    ck_assert_dat_ok(p->cno_trigger_func(cno, &got)); /* a query: the latest */
    ck_assert_ptr_eq(got, evd);
    ck_assert_dat_ok(p->evd_dequeue_func(evd, &ev));

    /* A blocked CNO waiter is woken by a post_se (L3149). */
    struct waiter w = {.p = p, .h = cno, .timeout = 5000000};
    pthread_t t;
    pthread_create(&t, NULL, cno_waiter, &w);
    for (int i = 0; i < 2000 && sd_cnoq_waiters(&((struct sd_cno *)cno)->c) == 0; i++)
        usleep(1000);
    ck_assert_dat_err(p->cno_free_func(cno), DAT_INVALID_STATE, DAT_INVALID_STATE_CNO_IN_USE);
    ck_assert_dat_ok(p->evd_post_se_func(evd, &in));
    pthread_join(t, NULL);
    ck_assert_dat_ok(w.rc);
    ck_assert_ptr_eq(w.evd, evd);
    ck_assert_dat_ok(p->evd_dequeue_func(evd, &ev));

    /* Disabled EVDs do not notify (L3125). */
    ck_assert_dat_ok(p->evd_disable_func(evd));
    ck_assert_dat_ok(p->evd_post_se_func(evd, &in));
    ck_assert_dat_err(p->cno_wait_func(cno, 0, &got), DAT_QUEUE_EMPTY, 0);
    ck_assert_dat_ok(p->evd_enable_func(evd));
    ck_assert_dat_ok(p->evd_dequeue_func(evd, &ev));

    /* Referenced by an EVD: free refuses; modify_cno rules. */
    ck_assert_dat_err(p->cno_free_func(cno), DAT_INVALID_STATE, DAT_INVALID_STATE_CNO_IN_USE);
    ck_assert_dat_err(p->evd_modify_cno_func(evd, cno2), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_CNO);
    ck_assert_dat_err(p->evd_modify_cno_func(evd, (DAT_CNO_HANDLE)&in), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_CNO);
    ck_assert_dat_ok(p->evd_modify_cno_func(evd, cno)); /* same one again */
    ck_assert_dat_err(p->cno_free_func(cno), DAT_INVALID_STATE, DAT_INVALID_STATE_CNO_IN_USE);
    ck_assert_dat_ok(p->evd_modify_cno_func(evd, DAT_HANDLE_NULL));
    ck_assert_dat_ok(p->evd_query_func(evd, DAT_EVD_FIELD_CNO, &ep));
    ck_assert_ptr_null(ep.cno_handle);
    ck_assert_dat_ok(p->evd_post_se_func(evd, &in)); /* detached: no trigger */
    ck_assert_dat_err(p->cno_wait_func(cno, 0, &got), DAT_QUEUE_EMPTY, 0);
    ck_assert_dat_ok(p->evd_modify_cno_func(evd, cno));
    ck_assert_dat_ok(p->evd_post_se_func(evd, &in));
    ck_assert_dat_ok(p->cno_wait_func(cno, 0, &got));
    ck_assert_ptr_eq(got, evd);

    /* Freeing the CNO's last EVD releases its waiters with a NULL EVD
     * (L3135). */
    w.timeout = DAT_TIMEOUT_INFINITE;
    w.evd = (DAT_EVD_HANDLE)1;
    pthread_create(&t, NULL, cno_waiter, &w);
    for (int i = 0; i < 2000 && sd_cnoq_waiters(&((struct sd_cno *)cno)->c) == 0; i++)
        usleep(1000);
    ck_assert_dat_ok(p->evd_free_func(evd));
    pthread_join(t, NULL);
    ck_assert_int_eq(ERRT(w.rc), DAT_ABORT);
    ck_assert_ptr_null(w.evd);
    ck_assert_dat_ok(p->cno_free_func(cno));
    ck_assert_dat_ok(p->cno_free_func(cno2));
    ck_assert_dat_ok(p->ia_close_func(ia, DAT_CLOSE_GRACEFUL_FLAG));
    ck_assert_dat_ok(p->ia_close_func(ia2, DAT_CLOSE_GRACEFUL_FLAG));
    ck_assert_uint_eq(sd_handle_live_count(), 0);
}
END_TEST

START_TEST(evd_async_overflow)
{
    DAT_PROVIDER *p = fx_provider("t-evd5", "lo", DAT_FALSE);
    DAT_EVD_HANDLE async = DAT_HANDLE_NULL;
    DAT_IA_HANDLE ia = fx_open(p, &async);
    DAT_EVD_HANDLE dto;
    ck_assert_dat_ok(p->evd_create_func(ia, 1, NULL, DAT_EVD_DTO_FLAG, &dto));
    struct sd_evd *e = (struct sd_evd *)dto;
    DAT_EVENT in, ev;
    memset(&in, 0, sizeof in);
    in.event_number = DAT_DTO_COMPLETION_EVENT;
    in.event_data.dto_completion_event_data.user_cookie.as_64 = 77;
    ck_assert_dat_ok(sd_evd_post(e, &in, SD_EVQ_DTO, 0));
    ck_assert_dat_err(sd_evd_post(e, &in, SD_EVQ_DTO, 0), DAT_QUEUE_FULL, 0);
    ck_assert_dat_err(sd_evd_post(e, &in, SD_EVQ_DTO, 0), DAT_QUEUE_FULL, 0); /* coalesced */

    ck_assert_dat_ok(p->evd_dequeue_func(async, &ev));
    ck_assert_int_eq(ev.event_number, DAT_ASYNC_ERROR_EVD_OVERFLOW);
    ck_assert_ptr_eq(ev.evd_handle, async);
    ck_assert_ptr_eq(ev.event_data.asynch_error_event_data.dat_handle, dto);
    ck_assert_int_eq(ev.event_data.asynch_error_event_data.reason, DAT_EVD_OVERFLOW_ERROR);
    ck_assert_uint_eq(p->evd_dequeue_func(async, &ev), DAT_QUEUE_EMPTY);
    /* The queued completion is intact (L2902). */
    ck_assert_dat_ok(p->evd_dequeue_func(dto, &ev));
    ck_assert_int_eq(ev.event_data.dto_completion_event_data.user_cookie.as_64, 77);
    ck_assert_ptr_eq(ev.evd_handle, dto);

    /* sd_ia_post_async: EP broken, IA catastrophic with the consumer IA. */
    sd_ia_post_async((struct sd_ia *)ia, DAT_ASYNC_ERROR_EP_BROKEN, (DAT_HANDLE)dto, DAT_EP_OTHER_ERROR);
    sd_ia_post_async((struct sd_ia *)ia, DAT_ASYNC_ERROR_IA_CATASTROPHIC,
                     (DAT_HANDLE)sd_ia_consumer_handle((struct sd_ia *)ia), DAT_IA_CATASTROPHIC_ERROR);
    ck_assert_dat_ok(p->evd_dequeue_func(async, &ev));
    ck_assert_int_eq(ev.event_number, DAT_ASYNC_ERROR_EP_BROKEN);
    ck_assert_ptr_eq(ev.event_data.asynch_error_event_data.dat_handle, dto);
    ck_assert_dat_ok(p->evd_dequeue_func(async, &ev));
    ck_assert_int_eq(ev.event_number, DAT_ASYNC_ERROR_IA_CATASTROPHIC);
    ck_assert_ptr_eq(ev.event_data.asynch_error_event_data.dat_handle, ia);

    /* The async EVD's own overflow: its last slot reports itself. */
    DAT_EVD_PARAM ep;
    ck_assert_dat_ok(p->evd_query_func(async, DAT_EVD_FIELD_ALL, &ep));
    ck_assert_int_ge(ep.evd_qlen, SD_ASYNC_EVD_MIN_QLEN);
    ck_assert_int_eq(ep.evd_flags, DAT_EVD_ASYNC_FLAG);
    for (int i = 0; i < ep.evd_qlen + 3; i++)
        sd_ia_post_async((struct sd_ia *)ia, DAT_ASYNC_ERROR_EP_BROKEN, (DAT_HANDLE)dto, DAT_EP_OTHER_ERROR);
    int n = 0;
    DAT_EVENT last;
    while (p->evd_dequeue_func(async, &ev) == DAT_SUCCESS) {
        last = ev;
        n++;
    }
    ck_assert_int_eq(n, ep.evd_qlen);
    ck_assert_int_eq(last.event_number, DAT_ASYNC_ERROR_EVD_OVERFLOW);
    ck_assert_ptr_eq(last.event_data.asynch_error_event_data.dat_handle, async);

    /* IA without an async EVD (DAT_EVD_ASYNC_EXISTS): dropped quietly. */
    DAT_IA_HANDLE ia2;
    DAT_EVD_HANDLE none = DAT_EVD_ASYNC_EXISTS;
    ck_assert_dat_ok(p->ia_open_func((DAT_NAME_PTR)p->device_name, 0, &none, &ia2));
    sd_ia_post_async((struct sd_ia *)ia2, DAT_ASYNC_ERROR_EP_BROKEN, NULL, 0);
    ck_assert_dat_ok(p->ia_close_func(ia2, DAT_CLOSE_GRACEFUL_FLAG));

    ck_assert_dat_ok(p->evd_free_func(dto));
    ck_assert_dat_ok(p->ia_close_func(ia, DAT_CLOSE_GRACEFUL_FLAG));
    ck_assert_uint_eq(sd_handle_live_count(), 0);
}
END_TEST

START_TEST(evd_ia_runtime)
{
    /* The IA runtime: engine and memory table exist while it is open. */
    DAT_PROVIDER *p = fx_provider("t-evd6", "lo", DAT_FALSE);
    DAT_IA_HANDLE ia = fx_open(p, NULL);
    struct sd_ia *sia = (struct sd_ia *)ia;
    ck_assert_ptr_nonnull(sia->engine);
    ck_assert_ptr_nonnull(sia->mem);
    DAT_EVD_HANDLE evd;
    DAT_CNO_HANDLE cno;
    ck_assert_dat_ok(p->cno_create_func(ia, DAT_OS_WAIT_PROXY_AGENT_NULL, &cno));
    ck_assert_dat_ok(p->evd_create_func(ia, 4, cno, DAT_EVD_SOFTWARE_FLAG, &evd));
    /* Graceful close refuses while the consumer's objects exist. */
    ck_assert_dat_err(p->ia_close_func(ia, DAT_CLOSE_GRACEFUL_FLAG), DAT_INVALID_STATE,
                      DAT_INVALID_STATE_IA_IN_USE);
    ck_assert_dat_ok(p->ia_close_func(ia, DAT_CLOSE_ABRUPT_FLAG));
    ck_assert_uint_eq(sd_handle_live_count(), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("provider-evd");
    TCase *tc = tcase_create("evd");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, evd_create_query_free);
    tcase_add_test(tc, evd_software_wait_dequeue);
    tcase_add_test(tc, evd_blocking_wait_rules);
    tcase_add_test(tc, evd_cno_notification);
    tcase_add_test(tc, evd_async_overflow);
    tcase_add_test(tc, evd_ia_runtime);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
