/* Return codes of every dat_cno_* call (L2970-3254): create, fd_create,
 * modify_agent, query, free, wait, trigger. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "lib/provider/cno.h"
#include "test/lib/prov_fixture.h"

static _Alignas(64) char junk[256];

#define ck_bad_cno(rc) ck_assert_dat_err((rc), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_CNO)

static DAT_PROVIDER *prov(void)
{
    return fx_provider("t-rc-cno", "lo", DAT_FALSE);
}

static void agent_fn(DAT_PVOID data, DAT_EVD_HANDLE evd)
{
    (void)data;
    (void)evd;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {.tv_sec = 0, .tv_nsec = ms * 1000000L};
    nanosleep(&ts, NULL);
}

struct bad {
    DAT_CNO_HANDLE h[5];
};

static struct bad bad_cnos(DAT_PROVIDER *p, DAT_IA_HANDLE ia)
{
    DAT_PZ_HANDLE pz;
    DAT_CNO_HANDLE dead;
    ck_assert_dat_ok(p->pz_create_func(ia, &pz));
    ck_assert_dat_ok(p->cno_create_func(ia, DAT_OS_WAIT_PROXY_AGENT_NULL, &dead));
    ck_assert_dat_ok(p->cno_free_func(dead));
    struct bad b = {{DAT_HANDLE_NULL, (DAT_CNO_HANDLE)junk, (DAT_CNO_HANDLE)pz, (DAT_CNO_HANDLE)ia, dead}};
    return b;
}

struct waiter {
    DAT_PROVIDER *p;
    DAT_CNO_HANDLE cno;
    DAT_EVD_HANDLE got;
    DAT_RETURN rc;
};

static void *wait_thread(void *arg)
{
    struct waiter *w = arg;
    w->got = (DAT_EVD_HANDLE)junk;
    w->rc = w->p->cno_wait_func(w->cno, 10 * 1000 * 1000, &w->got);
    return NULL;
}

static void start_waiter(pthread_t *t, struct waiter *w)
{
    pthread_create(t, NULL, wait_thread, w);
    for (int i = 0; i < 5000 && sd_cnoq_waiters(&((struct sd_cno *)w->cno)->c) == 0; i++)
        sleep_ms(1);
    ck_assert_int_eq(sd_cnoq_waiters(&((struct sd_cno *)w->cno)->c), 1);
}

START_TEST(create_errors)
{
    DAT_PROVIDER *p = prov();
    DAT_IA_HANDLE ia = fx_open(p, NULL), dead = fx_open(p, NULL);
    ck_assert_dat_ok(p->ia_close_func(dead, DAT_CLOSE_ABRUPT_FLAG));
    DAT_PZ_HANDLE pz;
    ck_assert_dat_ok(p->pz_create_func(ia, &pz));
    DAT_CNO_HANDLE cno = DAT_HANDLE_NULL;
    DAT_FD fd = -1;
    DAT_IA_HANDLE bad[] = {DAT_HANDLE_NULL, (DAT_IA_HANDLE)junk, (DAT_IA_HANDLE)pz, dead};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_dat_err(p->cno_create_func(bad[i], DAT_OS_WAIT_PROXY_AGENT_NULL, &cno), DAT_INVALID_HANDLE,
                          DAT_INVALID_HANDLE_IA);
        ck_assert_dat_err(p->cno_fd_create_func(bad[i], &fd, &cno), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);
    }
    /* An agent with data but no function is invalid (ARG2; docs/events.md
     * §3.2). A function with NULL instance data is a valid agent. */
    DAT_OS_WAIT_PROXY_AGENT half1 = {.instance_data = junk, .proxy_agent_func = NULL};
    ck_assert_dat_err(p->cno_create_func(ia, half1, &cno), DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    ck_assert_dat_err(p->cno_create_func(ia, DAT_OS_WAIT_PROXY_AGENT_NULL, NULL), DAT_INVALID_PARAMETER,
                      DAT_INVALID_ARG3);
    ck_assert_dat_err(p->cno_fd_create_func(ia, NULL, &cno), DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    ck_assert_dat_err(p->cno_fd_create_func(ia, &fd, NULL), DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    ck_assert_ptr_null(cno);
    ck_assert_int_eq(fd, -1);
    DAT_OS_WAIT_PROXY_AGENT full = {.instance_data = junk, .proxy_agent_func = agent_fn};
    ck_assert_dat_ok(p->cno_create_func(ia, full, &cno));
    ck_assert_dat_ok(p->cno_free_func(cno));
    DAT_OS_WAIT_PROXY_AGENT fn_only = {.instance_data = NULL, .proxy_agent_func = agent_fn};
    ck_assert_dat_ok(p->cno_create_func(ia, fn_only, &cno));
    ck_assert_dat_ok(p->cno_free_func(cno));
    ck_assert_dat_ok(p->cno_fd_create_func(ia, &fd, &cno)); /* supported: no MODEL_NOT_SUPPORTED */
    ck_assert_int_ge(fd, 0);
    ck_assert_dat_ok(p->cno_free_func(cno));
    ck_assert_dat_ok(p->ia_close_func(ia, DAT_CLOSE_ABRUPT_FLAG));
}
END_TEST

START_TEST(create_beyond_limit)
{
    /* No max_cnos attribute exists; the per-IA CNO limit (limits.h) answers
     * DAT_INSUFFICIENT_RESOURCES|DAT_RESOURCE_MEMORY, for both creates. */
    DAT_PROVIDER *p = prov();
    DAT_IA_HANDLE ia = fx_open(p, NULL);
    DAT_CNO_HANDLE *c = calloc(SD_MAX_CNOS, sizeof *c);
    for (int i = 0; i < SD_MAX_CNOS; i++)
        ck_assert_dat_ok(p->cno_create_func(ia, DAT_OS_WAIT_PROXY_AGENT_NULL, &c[i]));
    DAT_CNO_HANDLE extra = DAT_HANDLE_NULL;
    DAT_FD fd = -1;
    ck_assert_dat_err(p->cno_create_func(ia, DAT_OS_WAIT_PROXY_AGENT_NULL, &extra), DAT_INSUFFICIENT_RESOURCES,
                      DAT_RESOURCE_MEMORY);
    ck_assert_dat_err(p->cno_fd_create_func(ia, &fd, &extra), DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
    ck_assert_ptr_null(extra);
    ck_assert_int_eq(fd, -1);
    ck_assert_dat_ok(p->cno_free_func(c[5]));
    ck_assert_dat_ok(p->cno_fd_create_func(ia, &fd, &c[5]));
    for (int i = 0; i < SD_MAX_CNOS; i++)
        ck_assert_dat_ok(p->cno_free_func(c[i]));
    free(c);
    ck_assert_dat_ok(p->ia_close_func(ia, DAT_CLOSE_GRACEFUL_FLAG));
}
END_TEST

START_TEST(fd_create_out_of_descriptors)
{
    /* A real resource limitation: no file descriptors left. */
    DAT_PROVIDER *p = prov();
    DAT_IA_HANDLE ia = fx_open(p, NULL);
    struct rlimit rl = {.rlim_cur = 64, .rlim_max = 64};
    struct rlimit old;
    getrlimit(RLIMIT_NOFILE, &old);
    if (old.rlim_max < 64)
        rl.rlim_max = old.rlim_max;
    ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &rl), 0);
    DAT_CNO_HANDLE c[64];
    int n = 0;
    DAT_RETURN rc = DAT_SUCCESS;
    DAT_FD fd;
    while (n < 64 && (rc = p->cno_fd_create_func(ia, &fd, &c[n])) == DAT_SUCCESS)
        n++;
    ck_assert_int_lt(n, 64);
    ck_assert_dat_err(rc, DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
    for (int i = 0; i < n; i++)
        ck_assert_dat_ok(p->cno_free_func(c[i]));
    ck_assert_dat_ok(p->cno_fd_create_func(ia, &fd, &c[0])); /* descriptors came back */
    ck_assert_dat_ok(p->ia_close_func(ia, DAT_CLOSE_ABRUPT_FLAG));
}
END_TEST

START_TEST(modify_agent_errors)
{
    DAT_PROVIDER *p = prov();
    DAT_IA_HANDLE ia = fx_open(p, NULL);
    struct bad b = bad_cnos(p, ia);
    DAT_OS_WAIT_PROXY_AGENT full = {.instance_data = junk, .proxy_agent_func = agent_fn};
    DAT_OS_WAIT_PROXY_AGENT half = {.instance_data = junk, .proxy_agent_func = NULL};
    for (int i = 0; i < 5; i++)
        ck_bad_cno(p->cno_modify_agent_func(b.h[i], full));
    DAT_CNO_HANDLE cno, fdcno;
    DAT_FD fd;
    ck_assert_dat_ok(p->cno_create_func(ia, DAT_OS_WAIT_PROXY_AGENT_NULL, &cno));
    ck_assert_dat_ok(p->cno_fd_create_func(ia, &fd, &fdcno));
    ck_assert_dat_err(p->cno_modify_agent_func(cno, half), DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    /* The fd is an fd CNO's permanent proxy (L3033): no agent on it. */
    ck_assert_dat_err(p->cno_modify_agent_func(fdcno, full), DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    ck_assert_dat_ok(p->cno_modify_agent_func(cno, full));
    DAT_CNO_PARAM cp;
    ck_assert_dat_ok(p->cno_query_func(cno, DAT_CNO_FIELD_ALL, &cp));
    ck_assert_int_eq(cp.proxy_type, DAT_PROXY_TYPE_AGENT);
    ck_assert_dat_ok(p->cno_modify_agent_func(cno, DAT_OS_WAIT_PROXY_AGENT_NULL));
    ck_assert_dat_ok(p->ia_close_func(ia, DAT_CLOSE_ABRUPT_FLAG));
}
END_TEST

START_TEST(query_errors)
{
    DAT_PROVIDER *p = prov();
    DAT_IA_HANDLE ia = fx_open(p, NULL);
    struct bad b = bad_cnos(p, ia);
    DAT_CNO_PARAM cp;
    for (int i = 0; i < 5; i++)
        ck_bad_cno(p->cno_query_func(b.h[i], DAT_CNO_FIELD_ALL, &cp));
    DAT_CNO_HANDLE cno;
    ck_assert_dat_ok(p->cno_create_func(ia, DAT_OS_WAIT_PROXY_AGENT_NULL, &cno));
    ck_assert_dat_err(p->cno_query_func(cno, 8, &cp), DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    ck_assert_dat_err(p->cno_query_func(cno, (DAT_CNO_PARAM_MASK)-1, &cp), DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    ck_assert_dat_err(p->cno_query_func(cno, DAT_CNO_FIELD_ALL, NULL), DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    for (DAT_CNO_PARAM_MASK m = 0; m <= 7; m++) /* not a clean bit mask: 0..7 are all valid */
        ck_assert_dat_ok(p->cno_query_func(cno, m, &cp));
    ck_assert_int_eq(cp.proxy_type, DAT_PROXY_TYPE_NONE);
    ck_assert_ptr_eq(cp.ia_handle, ia);
    ck_assert_dat_ok(p->ia_close_func(ia, DAT_CLOSE_ABRUPT_FLAG));
}
END_TEST

START_TEST(free_errors)
{
    DAT_PROVIDER *p = prov();
    DAT_IA_HANDLE ia = fx_open(p, NULL);
    struct bad b = bad_cnos(p, ia);
    for (int i = 0; i < 5; i++)
        ck_bad_cno(p->cno_free_func(b.h[i]));
    DAT_CNO_HANDLE cno;
    DAT_EVD_HANDLE evd, evd2;
    ck_assert_dat_ok(p->cno_create_func(ia, DAT_OS_WAIT_PROXY_AGENT_NULL, &cno));
    /* Referenced by an EVD, at create or by modify_cno (L3064). */
    ck_assert_dat_ok(p->evd_create_func(ia, 4, cno, DAT_EVD_SOFTWARE_FLAG, &evd));
    ck_assert_dat_err(p->cno_free_func(cno), DAT_INVALID_STATE, DAT_INVALID_STATE_CNO_IN_USE);
    ck_assert_dat_ok(p->evd_modify_cno_func(evd, DAT_HANDLE_NULL));
    ck_assert_dat_ok(p->evd_create_func(ia, 4, NULL, DAT_EVD_SOFTWARE_FLAG, &evd2));
    ck_assert_dat_ok(p->evd_modify_cno_func(evd2, cno));
    ck_assert_dat_err(p->cno_free_func(cno), DAT_INVALID_STATE, DAT_INVALID_STATE_CNO_IN_USE);
    ck_assert_dat_ok(p->evd_modify_cno_func(evd2, DAT_HANDLE_NULL));
    /* A thread blocked on it (L3073-3075). */
    struct waiter w = {.p = p, .cno = cno};
    pthread_t t;
    start_waiter(&t, &w);
    ck_assert_dat_err(p->cno_free_func(cno), DAT_INVALID_STATE, DAT_INVALID_STATE_CNO_IN_USE);
    /* The recipe of L3079-3090: attach an SE EVD and post. */
    ck_assert_dat_ok(p->evd_modify_cno_func(evd, cno));
    DAT_EVENT e = {.event_number = DAT_SOFTWARE_EVENT};
    ck_assert_dat_ok(p->evd_post_se_func(evd, &e));
    pthread_join(t, NULL);
    ck_assert_dat_ok(w.rc);
    ck_assert_ptr_eq(w.got, evd);
    ck_assert_dat_ok(p->evd_modify_cno_func(evd, DAT_HANDLE_NULL));
    ck_assert_dat_ok(p->cno_free_func(cno));
    ck_bad_cno(p->cno_free_func(cno));
    ck_assert_dat_ok(p->ia_close_func(ia, DAT_CLOSE_ABRUPT_FLAG));
}
END_TEST

START_TEST(wait_errors)
{
    DAT_PROVIDER *p = prov();
    DAT_IA_HANDLE ia = fx_open(p, NULL);
    struct bad b = bad_cnos(p, ia);
    DAT_EVD_HANDLE got;
    for (int i = 0; i < 5; i++)
        ck_bad_cno(p->cno_wait_func(b.h[i], 0, &got));
    DAT_CNO_HANDLE cno;
    ck_assert_dat_ok(p->cno_create_func(ia, DAT_OS_WAIT_PROXY_AGENT_NULL, &cno));
    ck_assert_dat_err(p->cno_wait_func(cno, 0, NULL), DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    /* Timed out: DAT_QUEUE_EMPTY (not TIMEOUT_EXPIRED), *evd NULL (L3129). */
    got = (DAT_EVD_HANDLE)junk;
    ck_assert_dat_err(p->cno_wait_func(cno, 0, &got), DAT_QUEUE_EMPTY, 0);
    ck_assert_ptr_null(got);
    got = (DAT_EVD_HANDLE)junk;
    ck_assert_dat_err(p->cno_wait_func(cno, 2000, &got), DAT_QUEUE_EMPTY, 0);
    ck_assert_ptr_null(got);
    /* Every timeout value is valid (DAT_TIMEOUT is unsigned µs with
     * INFINITE = ~0): the spec's "bad timeout" cannot arise. */
    DAT_EVD_HANDLE evd;
    ck_assert_dat_ok(p->evd_create_func(ia, 4, cno, DAT_EVD_SOFTWARE_FLAG, &evd));
    DAT_EVENT e = {.event_number = DAT_SOFTWARE_EVENT};
    ck_assert_dat_ok(p->evd_post_se_func(evd, &e));
    ck_assert_dat_ok(p->cno_wait_func(cno, DAT_TIMEOUT_INFINITE, &got));
    ck_assert_ptr_eq(got, evd);
    /* The CNO's last EVD is freed under a waiter: woken with a NULL EVD
     * (L3135); the code is DAT_ABORT ("IA closed or EVD destroyed"). */
    struct waiter w = {.p = p, .cno = cno};
    pthread_t t;
    start_waiter(&t, &w);
    ck_assert_dat_ok(p->evd_free_func(evd));
    pthread_join(t, NULL);
    ck_assert_dat_err(w.rc, DAT_ABORT, 0);
    ck_assert_ptr_null(w.got);
    ck_assert_dat_ok(p->ia_close_func(ia, DAT_CLOSE_ABRUPT_FLAG));
}
END_TEST

START_TEST(trigger_errors)
{
    DAT_PROVIDER *p = prov();
    DAT_IA_HANDLE ia = fx_open(p, NULL);
    struct bad b = bad_cnos(p, ia);
    DAT_EVD_HANDLE got;
    for (int i = 0; i < 5; i++)
        ck_bad_cno(p->cno_trigger_func(b.h[i], &got));
    DAT_CNO_HANDLE cno;
    ck_assert_dat_ok(p->cno_create_func(ia, DAT_OS_WAIT_PROXY_AGENT_NULL, &cno));
    ck_assert_dat_err(p->cno_trigger_func(cno, NULL), DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    got = (DAT_EVD_HANDLE)junk;
    ck_assert_dat_ok(p->cno_trigger_func(cno, &got)); /* never triggered: NULL */
    ck_assert_ptr_null(got);
    DAT_EVD_HANDLE evd;
    ck_assert_dat_ok(p->evd_create_func(ia, 4, cno, DAT_EVD_SOFTWARE_FLAG, &evd));
    DAT_EVENT e = {.event_number = DAT_SOFTWARE_EVENT};
    ck_assert_dat_ok(p->evd_post_se_func(evd, &e));
    ck_assert_dat_ok(p->cno_trigger_func(cno, &got));
    ck_assert_ptr_eq(got, evd);
    ck_assert_dat_ok(p->ia_close_func(ia, DAT_CLOSE_ABRUPT_FLAG));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("rc_cno");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, create_errors);
    tcase_add_test(tc, create_beyond_limit);
    tcase_add_test(tc, fd_create_out_of_descriptors);
    tcase_add_test(tc, modify_agent_errors);
    tcase_add_test(tc, query_errors);
    tcase_add_test(tc, free_errors);
    tcase_add_test(tc, wait_errors);
    tcase_add_test(tc, trigger_errors);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int nf = srunner_ntests_failed(sr);
    srunner_free(sr);
    return nf == 0 ? 0 : 1;
}
