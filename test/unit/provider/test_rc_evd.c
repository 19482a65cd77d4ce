/* Return codes of every dat_evd_* call of the EVD object (L3276-3865):
 * create, query, free, modify_cno, enable, disable, set/clear_unwaitable,
 * resize, wait, dequeue, post_se. One check per listed code in the
 * situation the spec names; docs/compliance-notes-core.md has the map. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "lib/provider/cno.h"
#include "lib/provider/evd.h"
#include "test/lib/prov_fixture.h"

static _Alignas(64) char junk[256];

#define ck_bad_evd(rc) ck_assert_dat_err((rc), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_REQUEST)

/* dat_evd_dequeue's "empty" is the bare DAT_QUEUE_EMPTY type (evq.h:
 * deployed consumers compare with ==); accept it with or without the
 * error class, subtype 0. */
#define ck_queue_empty(rc)                                                                         \
    do {                                                                                           \
        DAT_RETURN e_ = (rc);                                                                      \
        ck_assert_msg(DAT_GET_TYPE(e_) == DAT_QUEUE_EMPTY && DAT_GET_SUBTYPE(e_) == 0,             \
                      "got 0x%08x, want DAT_QUEUE_EMPTY", (unsigned)e_);                           \
    } while (0)

static DAT_PROVIDER *prov(void)
{
    return fx_provider("t-rc-evd", "lo", DAT_FALSE);
}

static DAT_EVENT se(uintptr_t v)
{
    DAT_EVENT e;
    memset(&e, 0, sizeof e);
    e.event_number = DAT_SOFTWARE_EVENT;
    e.event_data.software_event_data.pointer = (DAT_PVOID)v;
    return e;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {.tv_sec = 0, .tv_nsec = ms * 1000000L};
    nanosleep(&ts, NULL);
}

struct waiter {
    DAT_PROVIDER *p;
    DAT_EVD_HANDLE evd;
    DAT_COUNT threshold;
    DAT_RETURN rc;
    DAT_EVENT ev;
    DAT_COUNT nmore;
};

static void *wait_thread(void *arg)
{
    struct waiter *w = arg;
    w->rc = w->p->evd_wait_func(w->evd, 10 * 1000 * 1000, w->threshold, &w->ev, &w->nmore);
    return NULL;
}

static void start_waiter(pthread_t *t, struct waiter *w)
{
    pthread_create(t, NULL, wait_thread, w);
    struct sd_evq_info info = {0};
    for (int i = 0; i < 5000 && !info.waiter; i++) {
        sd_evq_info(&((struct sd_evd *)w->evd)->q, &info);
        if (!info.waiter)
            sleep_ms(1);
    }
    ck_assert(info.waiter);
}

/* The bad EVD handles every call is tried with. */
struct bad {
    DAT_EVD_HANDLE h[6];
};

static struct bad bad_evds(DAT_PROVIDER *p, DAT_IA_HANDLE ia)
{
    DAT_PZ_HANDLE pz;
    DAT_EVD_HANDLE dead;
    ck_assert_dat_ok(p->pz_create_func(ia, &pz));
    ck_assert_dat_ok(p->evd_create_func(ia, 1, NULL, DAT_EVD_DTO_FLAG, &dead));
    ck_assert_dat_ok(p->evd_free_func(dead));
    struct bad b = {{DAT_HANDLE_NULL, (DAT_EVD_HANDLE)junk, (DAT_EVD_HANDLE)pz, (DAT_EVD_HANDLE)ia, dead,
                     DAT_EVD_ASYNC_EXISTS}};
    return b;
}

/* ---------------------------------------------------------------- create */

START_TEST(create_errors)
{
    DAT_PROVIDER *p = prov();
    DAT_IA_HANDLE ia = fx_open(p, NULL), ia2 = fx_open(p, NULL), dead_ia = fx_open(p, NULL);
    ck_assert_dat_ok(p->ia_close_func(dead_ia, DAT_CLOSE_ABRUPT_FLAG));
    DAT_CNO_HANDLE cno, cno2, dead_cno;
    DAT_PZ_HANDLE pz;
    ck_assert_dat_ok(p->pz_create_func(ia, &pz));
    ck_assert_dat_ok(p->cno_create_func(ia, DAT_OS_WAIT_PROXY_AGENT_NULL, &cno));
    ck_assert_dat_ok(p->cno_create_func(ia2, DAT_OS_WAIT_PROXY_AGENT_NULL, &cno2));
    ck_assert_dat_ok(p->cno_create_func(ia, DAT_OS_WAIT_PROXY_AGENT_NULL, &dead_cno));
    ck_assert_dat_ok(p->cno_free_func(dead_cno));
    DAT_EVD_HANDLE evd = DAT_HANDLE_NULL;
    const DAT_EVD_FLAGS F = DAT_EVD_DEFAULT_FLAG;

    DAT_IA_HANDLE bad_ia[] = {DAT_HANDLE_NULL, (DAT_IA_HANDLE)junk, (DAT_IA_HANDLE)pz, dead_ia};
    for (size_t i = 0; i < sizeof bad_ia / sizeof bad_ia[0]; i++)
        ck_assert_dat_err(p->evd_create_func(bad_ia[i], 4, NULL, F, &evd), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);
    DAT_CNO_HANDLE bad_cno[] = {(DAT_CNO_HANDLE)junk, (DAT_CNO_HANDLE)pz, dead_cno, cno2 /* other IA, L3326 */};
    for (size_t i = 0; i < sizeof bad_cno / sizeof bad_cno[0]; i++)
        ck_assert_dat_err(p->evd_create_func(ia, 4, bad_cno[i], F, &evd), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_CNO);
    /* qlen out of range: < 0, > max_evd_qlen (L3328). */
    ck_assert_dat_err(p->evd_create_func(ia, -1, NULL, F, &evd), DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    ck_assert_dat_err(p->evd_create_func(ia, SD_MAX_EVD_QLEN + 1, NULL, F, &evd), DAT_INVALID_PARAMETER,
                      DAT_INVALID_ARG2);
    /* flags: none, unknown bits. */
    ck_assert_dat_err(p->evd_create_func(ia, 4, NULL, 0, &evd), DAT_INVALID_PARAMETER, DAT_INVALID_ARG4);
    ck_assert_dat_err(p->evd_create_func(ia, 4, NULL, 0x400, &evd), DAT_INVALID_PARAMETER, DAT_INVALID_ARG4);
    ck_assert_dat_err(p->evd_create_func(ia, 4, NULL, F | 0x8000, &evd), DAT_INVALID_PARAMETER, DAT_INVALID_ARG4);
    ck_assert_dat_err(p->evd_create_func(ia, 4, NULL, F, NULL), DAT_INVALID_PARAMETER, DAT_INVALID_ARG5);
    ck_assert_ptr_null(evd);
    /* Every stream combination is allowed (evd_stream_merging_supported is
     * all TRUE), and max_evd_qlen itself is fine. */
    ck_assert_dat_ok(p->evd_create_func(ia, SD_MAX_EVD_QLEN, cno, SD_EVD_VALID_FLAGS, &evd));
    ck_assert_dat_ok(p->evd_free_func(evd));
    ck_assert_dat_ok(p->ia_close_func(ia, DAT_CLOSE_ABRUPT_FLAG));
    ck_assert_dat_ok(p->ia_close_func(ia2, DAT_CLOSE_ABRUPT_FLAG));
}
END_TEST

static void fill_to_max(DAT_PROVIDER *p, DAT_IA_HANDLE ia, DAT_COUNT n)
{
    DAT_EVD_HANDLE *e = calloc((size_t)n + 1, sizeof *e);
    for (DAT_COUNT i = 0; i < n; i++)
        ck_assert_dat_ok(p->evd_create_func(ia, 1, NULL, DAT_EVD_DTO_FLAG, &e[i]));
    DAT_EVD_HANDLE extra = DAT_HANDLE_NULL;
    ck_assert_dat_err(p->evd_create_func(ia, 1, NULL, DAT_EVD_DTO_FLAG, &extra), DAT_INSUFFICIENT_RESOURCES,
                      DAT_RESOURCE_TEVD);
    ck_assert_ptr_null(extra);
    ck_assert_dat_ok(p->evd_free_func(e[n / 2]));
    ck_assert_dat_ok(p->evd_create_func(ia, 1, NULL, DAT_EVD_DTO_FLAG, &e[n / 2]));
    for (DAT_COUNT i = 0; i < n; i++)
        ck_assert_dat_ok(p->evd_free_func(e[i]));
    free(e);
}

START_TEST(create_beyond_max_evds)
{
    DAT_PROVIDER *p = prov();
    /* max_evds counts every EVD of the IA, the async EVD open created
     * included: the consumer gets max_evds - 1 more. */
    DAT_IA_HANDLE ia = fx_open(p, NULL);
    DAT_IA_ATTR a;
    ck_assert_dat_ok(p->ia_query_func(ia, NULL, DAT_IA_FIELD_IA_MAX_EVDS, &a, 0, NULL));
    ck_assert_int_eq(a.max_evds, SD_MAX_EVDS);
    fill_to_max(p, ia, a.max_evds - 1);
    ck_assert_dat_ok(p->ia_close_func(ia, DAT_CLOSE_GRACEFUL_FLAG));
    /* With DAT_EVD_ASYNC_EXISTS there is no async EVD: all max_evds. */
    DAT_EVD_HANDLE ex = DAT_EVD_ASYNC_EXISTS;
    ck_assert_dat_ok(p->ia_open_func((DAT_NAME_PTR)p->device_name, 0, &ex, &ia));
    fill_to_max(p, ia, a.max_evds);
    ck_assert_dat_ok(p->ia_close_func(ia, DAT_CLOSE_GRACEFUL_FLAG));
}
END_TEST

/* ---------------------------------------------------------------- query / free */

START_TEST(query_errors)
{
    DAT_PROVIDER *p = prov();
    DAT_IA_HANDLE ia = fx_open(p, NULL);
    struct bad b = bad_evds(p, ia);
    DAT_EVD_HANDLE evd;
    ck_assert_dat_ok(p->evd_create_func(ia, 4, NULL, DAT_EVD_SOFTWARE_FLAG, &evd));
    DAT_EVD_PARAM ep;
    for (int i = 0; i < 6; i++)
        ck_bad_evd(p->evd_query_func(b.h[i], DAT_EVD_FIELD_ALL, &ep));
    ck_assert_dat_err(p->evd_query_func(evd, (DAT_EVD_PARAM_MASK)DAT_EVD_FIELD_ALL + 1, &ep), DAT_INVALID_PARAMETER,
                      DAT_INVALID_ARG2);
    ck_assert_dat_err(p->evd_query_func(evd, DAT_EVD_FIELD_ALL, NULL), DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    ck_assert_dat_ok(p->evd_query_func(evd, DAT_EVD_FIELD_ALL, &ep));
    ck_assert_int_eq(ep.evd_flags, DAT_EVD_SOFTWARE_FLAG);
    ck_assert_dat_ok(p->ia_close_func(ia, DAT_CLOSE_ABRUPT_FLAG));
}
END_TEST

START_TEST(free_errors)
{
    DAT_PROVIDER *p = prov();
    DAT_IA_HANDLE ia = fx_open(p, NULL);
    struct bad b = bad_evds(p, ia);
    for (int i = 0; i < 6; i++)
        ck_bad_evd(p->evd_free_func(b.h[i]));
    DAT_EVD_HANDLE evd;
    DAT_CNO_HANDLE cno;
    ck_assert_dat_ok(p->cno_create_func(ia, DAT_OS_WAIT_PROXY_AGENT_NULL, &cno));
    ck_assert_dat_ok(p->evd_create_func(ia, 4, cno, DAT_EVD_SOFTWARE_FLAG | DAT_EVD_DTO_FLAG, &evd));

    /* A stream still feeds it (an EP/SP holds this dependency): L3375. */
    struct sd_evd *o = (struct sd_evd *)evd;
    ck_assert_int_eq(sd_handle_dep_get(&o->h), 1);
    ck_assert_dat_err(p->evd_free_func(evd), DAT_INVALID_STATE, DAT_INVALID_STATE_EVD_IN_USE);
    sd_handle_dep_put(&o->h);

    /* A thread blocked in dat_evd_wait: L2793. */
    struct waiter w = {.p = p, .evd = evd, .threshold = 1};
    pthread_t t;
    start_waiter(&t, &w);
    ck_assert_dat_err(p->evd_free_func(evd), DAT_INVALID_STATE, DAT_INVALID_STATE_EVD_WAITER);
    DAT_EVENT e = se(9);
    ck_assert_dat_ok(p->evd_post_se_func(evd, &e));
    pthread_join(t, NULL);
    ck_assert_dat_ok(w.rc);

    /* Queued events and an attached CNO do not block the free. */
    ck_assert_dat_ok(p->evd_post_se_func(evd, &e));
    ck_assert_dat_ok(p->evd_free_func(evd));
    ck_bad_evd(p->evd_free_func(evd));
    ck_assert_dat_ok(p->cno_free_func(cno)); /* no longer referenced */
    ck_assert_dat_ok(p->ia_close_func(ia, DAT_CLOSE_ABRUPT_FLAG));
}
END_TEST

/* ---------------------------------------------------------------- modify_cno, enable, ... */

START_TEST(modify_cno_errors)
{
    DAT_PROVIDER *p = prov();
    DAT_IA_HANDLE ia = fx_open(p, NULL), ia2 = fx_open(p, NULL);
    struct bad b = bad_evds(p, ia);
    DAT_EVD_HANDLE evd;
    DAT_CNO_HANDLE cno, cno2, dead;
    ck_assert_dat_ok(p->evd_create_func(ia, 4, NULL, DAT_EVD_SOFTWARE_FLAG, &evd));
    ck_assert_dat_ok(p->cno_create_func(ia, DAT_OS_WAIT_PROXY_AGENT_NULL, &cno));
    ck_assert_dat_ok(p->cno_create_func(ia2, DAT_OS_WAIT_PROXY_AGENT_NULL, &cno2));
    ck_assert_dat_ok(p->cno_create_func(ia, DAT_OS_WAIT_PROXY_AGENT_NULL, &dead));
    ck_assert_dat_ok(p->cno_free_func(dead));
    for (int i = 0; i < 6; i++)
        ck_bad_evd(p->evd_modify_cno_func(b.h[i], cno));
    DAT_CNO_HANDLE bad_cno[] = {(DAT_CNO_HANDLE)junk, (DAT_CNO_HANDLE)evd, dead, cno2};
    for (size_t i = 0; i < sizeof bad_cno / sizeof bad_cno[0]; i++)
        ck_assert_dat_err(p->evd_modify_cno_func(evd, bad_cno[i]), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_CNO);
    DAT_EVD_PARAM ep;
    ck_assert_dat_ok(p->evd_query_func(evd, DAT_EVD_FIELD_CNO, &ep));
    ck_assert_ptr_null(ep.cno_handle); /* refused calls changed nothing */
    ck_assert_dat_ok(p->evd_modify_cno_func(evd, cno));
    ck_assert_dat_ok(p->evd_modify_cno_func(evd, DAT_HANDLE_NULL)); /* detach */
    ck_assert_dat_ok(p->cno_free_func(cno));
    ck_assert_dat_ok(p->ia_close_func(ia, DAT_CLOSE_ABRUPT_FLAG));
    ck_assert_dat_ok(p->ia_close_func(ia2, DAT_CLOSE_ABRUPT_FLAG));
}
END_TEST

START_TEST(state_calls_errors)
{
    /* enable, disable, set_unwaitable, clear_unwaitable list only
     * SUCCESS and INVALID_HANDLE; each is idempotent. */
    DAT_PROVIDER *p = prov();
    DAT_IA_HANDLE ia = fx_open(p, NULL);
    struct bad b = bad_evds(p, ia);
    DAT_RETURN (*fn[4])(DAT_EVD_HANDLE) = {p->evd_enable_func, p->evd_disable_func, p->evd_set_unwaitable_func,
                                           p->evd_clear_unwaitable_func};
    DAT_EVD_HANDLE evd;
    ck_assert_dat_ok(p->evd_create_func(ia, 4, NULL, DAT_EVD_SOFTWARE_FLAG, &evd));
    for (int f = 0; f < 4; f++) {
        for (int i = 0; i < 6; i++)
            ck_bad_evd(fn[f](b.h[i]));
        ck_assert_dat_ok(fn[f](evd));
        ck_assert_dat_ok(fn[f](evd));
    }
    /* clear_unwaitable while a waiter is blocked: successful no-op (L2791). */
    struct waiter w = {.p = p, .evd = evd, .threshold = 1};
    pthread_t t;
    start_waiter(&t, &w);
    ck_assert_dat_ok(p->evd_clear_unwaitable_func(evd));
    ck_assert_dat_ok(p->evd_disable_func(evd));
    ck_assert_dat_ok(p->evd_enable_func(evd));
    ck_assert_dat_ok(p->evd_set_unwaitable_func(evd));
    pthread_join(t, NULL);
    ck_assert_dat_err(w.rc, DAT_INVALID_STATE, DAT_INVALID_STATE_EVD_UNWAITABLE);
    ck_assert_dat_ok(p->ia_close_func(ia, DAT_CLOSE_ABRUPT_FLAG));
}
END_TEST

/* ---------------------------------------------------------------- resize */

START_TEST(resize_errors)
{
    DAT_PROVIDER *p = prov();
    DAT_IA_HANDLE ia = fx_open(p, NULL);
    struct bad b = bad_evds(p, ia);
    DAT_EVD_HANDLE evd;
    ck_assert_dat_ok(p->evd_create_func(ia, 4, NULL, DAT_EVD_SOFTWARE_FLAG, &evd));
    for (int i = 0; i < 6; i++)
        ck_bad_evd(p->evd_resize_func(b.h[i], 8));
    ck_assert_dat_err(p->evd_resize_func(evd, -1), DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    ck_assert_dat_err(p->evd_resize_func(evd, SD_MAX_EVD_QLEN + 1), DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    /* Fewer slots than queued events: INVALID_STATE, EVD unchanged
     * (L3617-3621). */
    DAT_EVENT e = se(1);
    for (int i = 0; i < 3; i++)
        ck_assert_dat_ok(p->evd_post_se_func(evd, &e));
    ck_assert_dat_err(p->evd_resize_func(evd, 2), DAT_INVALID_STATE, 0);
    DAT_EVD_PARAM ep;
    ck_assert_dat_ok(p->evd_query_func(evd, DAT_EVD_FIELD_EVD_QLEN, &ep));
    ck_assert_int_eq(ep.evd_qlen, 4);
    ck_assert_dat_ok(p->evd_resize_func(evd, 3)); /* exactly the queued count */
    ck_assert_dat_ok(p->evd_resize_func(evd, SD_MAX_EVD_QLEN));
    DAT_EVENT out;
    for (int i = 0; i < 3; i++) /* nothing lost (L3612) */
        ck_assert_dat_ok(p->evd_dequeue_func(evd, &out));
    ck_assert_dat_ok(p->evd_resize_func(evd, 4));
    /* A blocked waiter's threshold above the new length: INVALID_STATE. */
    struct waiter w = {.p = p, .evd = evd, .threshold = 3};
    pthread_t t;
    start_waiter(&t, &w);
    ck_assert_dat_err(p->evd_resize_func(evd, 2), DAT_INVALID_STATE, 0);
    ck_assert_dat_ok(p->evd_resize_func(evd, 3));
    for (int i = 0; i < 3; i++)
        ck_assert_dat_ok(p->evd_post_se_func(evd, &e));
    pthread_join(t, NULL);
    ck_assert_dat_ok(w.rc);
    ck_assert_int_eq(w.nmore, 2);
    ck_assert_dat_ok(p->ia_close_func(ia, DAT_CLOSE_ABRUPT_FLAG));
}
END_TEST

/* ---------------------------------------------------------------- wait */

START_TEST(wait_errors)
{
    DAT_PROVIDER *p = prov();
    DAT_IA_HANDLE ia = fx_open(p, NULL);
    struct bad b = bad_evds(p, ia);
    DAT_EVD_HANDLE evd;
    ck_assert_dat_ok(p->evd_create_func(ia, 4, NULL, DAT_EVD_SOFTWARE_FLAG | DAT_EVD_DTO_FLAG, &evd));
    DAT_EVENT ev;
    DAT_COUNT nmore = -1;
    for (int i = 0; i < 6; i++)
        ck_bad_evd(p->evd_wait_func(b.h[i], 0, 1, &ev, &nmore));
    /* threshold < 1, > queue length (L3713-3715); event NULL. */
    ck_assert_dat_err(p->evd_wait_func(evd, 0, 0, &ev, &nmore), DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    ck_assert_dat_err(p->evd_wait_func(evd, 0, -3, &ev, &nmore), DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    ck_assert_dat_err(p->evd_wait_func(evd, 0, 5, &ev, &nmore), DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    ck_assert_dat_err(p->evd_wait_func(evd, 0, 1, NULL, &nmore), DAT_INVALID_PARAMETER, DAT_INVALID_ARG4);
    /* threshold == queue length is valid. */
    ck_assert_dat_err(p->evd_wait_func(evd, 0, 4, &ev, &nmore), DAT_TIMEOUT_EXPIRED, 0);

    /* TIMEOUT_EXPIRED: fewer than threshold events, none taken, nmore is
     * the count (L3697-3702), both for 0 and a real timeout. */
    DAT_EVENT e = se(5);
    ck_assert_dat_ok(p->evd_post_se_func(evd, &e));
    ck_assert_dat_err(p->evd_wait_func(evd, 0, 2, &ev, &nmore), DAT_TIMEOUT_EXPIRED, 0);
    ck_assert_int_eq(nmore, 1);
    nmore = -1;
    ck_assert_dat_err(p->evd_wait_func(evd, 2000, 2, &ev, &nmore), DAT_TIMEOUT_EXPIRED, 0);
    ck_assert_int_eq(nmore, 1);
    ck_assert_dat_ok(p->evd_wait_func(evd, 0, 1, &ev, &nmore));
    ck_assert_ptr_eq(ev.event_data.software_event_data.pointer, (DAT_PVOID)5);
    ck_assert_ptr_eq(ev.evd_handle, evd);
    ck_assert_int_eq(nmore, 0);

    /* Unwaitable (L3727). */
    ck_assert_dat_ok(p->evd_set_unwaitable_func(evd));
    ck_assert_dat_err(p->evd_wait_func(evd, 0, 1, &ev, &nmore), DAT_INVALID_STATE, DAT_INVALID_STATE_EVD_UNWAITABLE);
    ck_assert_dat_ok(p->evd_clear_unwaitable_func(evd));

    /* Another waiter already blocked (L3683-3686). */
    struct waiter w = {.p = p, .evd = evd, .threshold = 1};
    pthread_t t;
    start_waiter(&t, &w);
    ck_assert_dat_err(p->evd_wait_func(evd, 0, 1, &ev, &nmore), DAT_INVALID_STATE, DAT_INVALID_STATE_EVD_WAITER);
    ck_assert_dat_err(p->evd_wait_func(evd, 1000, 1, &ev, &nmore), DAT_INVALID_STATE, DAT_INVALID_STATE_EVD_WAITER);
    ck_assert_dat_ok(p->evd_post_se_func(evd, &e));
    pthread_join(t, NULL);
    ck_assert_dat_ok(w.rc);

    /* threshold != 1 while an EP stream configures notify / solicited
     * control (L3717, L2736-2741): ep.c sets the config this way. */
    sd_evd_set_config((struct sd_evd *)evd, SD_EVQ_CFG_NOTIFY);
    ck_assert_dat_err(p->evd_wait_func(evd, 0, 2, &ev, &nmore), DAT_INVALID_STATE,
                      DAT_INVALID_STATE_EVD_CONFIG_NOTIFY);
    ck_assert_dat_err(p->evd_wait_func(evd, 0, 1, &ev, &nmore), DAT_TIMEOUT_EXPIRED, 0);
    sd_evd_set_config((struct sd_evd *)evd, SD_EVQ_CFG_SOLICITED);
    ck_assert_dat_err(p->evd_wait_func(evd, 0, 2, &ev, &nmore), DAT_INVALID_STATE,
                      DAT_INVALID_STATE_EVD_CONFIG_SOLICITED);
    sd_evd_set_config((struct sd_evd *)evd, SD_EVQ_CFG_THRESHOLD);

    /* DAT_ABORT: the IA is closed under a blocked waiter (L3739). */
    start_waiter(&t, &w);
    ck_assert_dat_ok(p->ia_close_func(ia, DAT_CLOSE_ABRUPT_FLAG));
    pthread_join(t, NULL);
    ck_assert_dat_err(w.rc, DAT_ABORT, 0);
}
END_TEST

/* ---------------------------------------------------------------- dequeue */

START_TEST(dequeue_errors)
{
    DAT_PROVIDER *p = prov();
    DAT_IA_HANDLE ia = fx_open(p, NULL);
    struct bad b = bad_evds(p, ia);
    DAT_EVD_HANDLE evd;
    ck_assert_dat_ok(p->evd_create_func(ia, 4, NULL, DAT_EVD_SOFTWARE_FLAG, &evd));
    DAT_EVENT ev;
    for (int i = 0; i < 6; i++)
        ck_bad_evd(p->evd_dequeue_func(b.h[i], &ev));
    ck_assert_dat_err(p->evd_dequeue_func(evd, NULL), DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    ck_queue_empty(p->evd_dequeue_func(evd, &ev));
    /* Works disabled and unwaitable (L2844-2850). */
    DAT_EVENT e = se(3);
    ck_assert_dat_ok(p->evd_disable_func(evd));
    ck_assert_dat_ok(p->evd_set_unwaitable_func(evd));
    ck_assert_dat_ok(p->evd_post_se_func(evd, &e));
    ck_assert_dat_ok(p->evd_dequeue_func(evd, &ev));
    ck_queue_empty(p->evd_dequeue_func(evd, &ev));
    ck_assert_dat_ok(p->evd_clear_unwaitable_func(evd));
    /* A waiter is blocked (L3804-3807). */
    struct waiter w = {.p = p, .evd = evd, .threshold = 1};
    pthread_t t;
    start_waiter(&t, &w);
    ck_assert_dat_err(p->evd_dequeue_func(evd, &ev), DAT_INVALID_STATE, DAT_INVALID_STATE_EVD_WAITER);
    ck_assert_dat_ok(p->evd_post_se_func(evd, &e));
    pthread_join(t, NULL);
    ck_assert_dat_ok(w.rc);
    ck_assert_dat_ok(p->ia_close_func(ia, DAT_CLOSE_ABRUPT_FLAG));
}
END_TEST

/* ---------------------------------------------------------------- post_se */

START_TEST(post_se_errors)
{
    DAT_PROVIDER *p = prov();
    DAT_EVD_HANDLE async = DAT_HANDLE_NULL; /* INOUT: NULL asks for a new async EVD */
    DAT_IA_HANDLE ia = fx_open(p, &async);
    struct bad b = bad_evds(p, ia);
    DAT_EVD_HANDLE evd, nosw;
    ck_assert_dat_ok(p->evd_create_func(ia, 2, NULL, DAT_EVD_SOFTWARE_FLAG, &evd));
    ck_assert_dat_ok(p->evd_create_func(ia, 2, NULL, DAT_EVD_DEFAULT_FLAG, &nosw));
    DAT_EVENT e = se(1);
    for (int i = 0; i < 6; i++)
        ck_bad_evd(p->evd_post_se_func(b.h[i], &e));
    ck_assert_dat_err(p->evd_post_se_func(evd, NULL), DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    DAT_EVENT wrong = e;
    wrong.event_number = DAT_CONNECTION_EVENT_ESTABLISHED;
    ck_assert_dat_err(p->evd_post_se_func(evd, &wrong), DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    /* No SE stream on an EVD without DAT_EVD_SOFTWARE_FLAG (L3751): the
     * handle is of the wrong kind for this call (our choice: ARG1). */
    ck_assert_dat_err(p->evd_post_se_func(nosw, &e), DAT_INVALID_PARAMETER, DAT_INVALID_ARG1);
    /* Full: QUEUE_FULL, not queued, no overflow event anywhere
     * (L3848-3850). */
    ck_assert_dat_ok(p->evd_post_se_func(evd, &e));
    ck_assert_dat_ok(p->evd_post_se_func(evd, &e));
    ck_assert_dat_err(p->evd_post_se_func(evd, &e), DAT_QUEUE_FULL, 0);
    DAT_EVENT ev;
    ck_queue_empty(p->evd_dequeue_func(async, &ev));
    ck_assert_dat_ok(p->evd_dequeue_func(evd, &ev));
    ck_assert_dat_ok(p->evd_dequeue_func(evd, &ev));
    ck_queue_empty(p->evd_dequeue_func(evd, &ev));
    ck_assert_dat_ok(p->evd_post_se_func(evd, &e)); /* usable after */
    ck_assert_dat_ok(p->ia_close_func(ia, DAT_CLOSE_ABRUPT_FLAG));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("rc_evd");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, create_errors);
    tcase_add_test(tc, create_beyond_max_evds);
    tcase_add_test(tc, query_errors);
    tcase_add_test(tc, free_errors);
    tcase_add_test(tc, modify_cno_errors);
    tcase_add_test(tc, state_calls_errors);
    tcase_add_test(tc, resize_errors);
    tcase_add_test(tc, wait_errors);
    tcase_add_test(tc, dequeue_errors);
    tcase_add_test(tc, post_se_errors);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int nf = srunner_ntests_failed(sr);
    srunner_free(sr);
    return nf == 0 ? 0 : 1;
}
