/* Unit tests for lib/provider/cnoq.[ch]: the CNO wait core. Every wait is
 * bounded. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lib/provider/cnoq.h"

#define EVD1 ((DAT_EVD_HANDLE)(uintptr_t)0xe1)
#define EVD2 ((DAT_EVD_HANDLE)(uintptr_t)0xe2)
#define TYPE(rc) DAT_GET_TYPE(rc)

static const DAT_OS_WAIT_PROXY_AGENT no_agent = {NULL, NULL};

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

static void await_waiters(struct sd_cnoq *c, int n)
{
    for (int i = 0; i < 2000 && sd_cnoq_waiters(c) < n; i++)
        sleep_ms(1);
    ck_assert_int_eq(sd_cnoq_waiters(c), n);
}

struct cw {
    struct sd_cnoq *c;
    DAT_TIMEOUT timeout;
    DAT_RETURN rc;
    DAT_EVD_HANDLE h;
};

static void *cw_main(void *arg)
{
    struct cw *w = arg;
    w->h = EVD2; /* must be overwritten */
    w->rc = sd_cnoq_wait(w->c, w->timeout, &w->h);
    return NULL;
}

START_TEST(trigger_before_wait_is_remembered)
{
    struct sd_cnoq c;
    ck_assert_int_eq(sd_cnoq_init(&c, no_agent), DAT_SUCCESS);
    DAT_EVD_HANDLE h = EVD2;
    ck_assert_ptr_null(sd_cnoq_last(&c)); /* nothing triggered yet */
    ck_assert_int_eq(TYPE(sd_cnoq_wait(&c, 0, &h)), DAT_QUEUE_EMPTY);
    ck_assert_ptr_null(h);
    sd_cnoq_trigger(&c, EVD1);
    sd_cnoq_trigger(&c, EVD1); /* coalesced */
    ck_assert_int_eq(sd_cnoq_wait(&c, 0, &h), DAT_SUCCESS);
    ck_assert_ptr_eq(h, EVD1);
    ck_assert_int_eq(TYPE(sd_cnoq_wait(&c, 0, &h)), DAT_QUEUE_EMPTY);
    ck_assert_int_eq(TYPE(sd_cnoq_wait(&c, 0, NULL)), DAT_INVALID_PARAMETER);
    ck_assert_int_eq(sd_cnoq_fini(&c), DAT_SUCCESS);
}
END_TEST

START_TEST(wait_timeout_returns_queue_empty)
{
    struct sd_cnoq c;
    ck_assert_int_eq(sd_cnoq_init(&c, no_agent), DAT_SUCCESS);
    DAT_EVD_HANDLE h = EVD1;
    uint64_t t0 = ms_now();
    ck_assert_int_eq(TYPE(sd_cnoq_wait(&c, 30000, &h)), DAT_QUEUE_EMPTY);
    uint64_t dt = ms_now() - t0;
    ck_assert_uint_ge(dt, 29);
    ck_assert_uint_lt(dt, 2000);
    ck_assert_ptr_null(h); /* L3129 */
    sd_cnoq_fini(&c);
}
END_TEST

START_TEST(trigger_wakes_blocked_waiter)
{
    struct sd_cnoq c;
    ck_assert_int_eq(sd_cnoq_init(&c, no_agent), DAT_SUCCESS);
    struct cw w = {&c, DAT_TIMEOUT_INFINITE, 0, NULL};
    pthread_t t;
    pthread_create(&t, NULL, cw_main, &w);
    await_waiters(&c, 1);
    ck_assert_int_eq(TYPE(sd_cnoq_fini(&c)), DAT_INVALID_STATE); /* L3073-3075 */
    sd_cnoq_trigger(&c, EVD1);
    pthread_join(t, NULL);
    ck_assert_int_eq(w.rc, DAT_SUCCESS);
    ck_assert_ptr_eq(w.h, EVD1);
    /* consumed by the waiter: nothing left pending */
    DAT_EVD_HANDLE h;
    ck_assert_int_eq(TYPE(sd_cnoq_wait(&c, 0, &h)), DAT_QUEUE_EMPTY);
    ck_assert_int_eq(sd_cnoq_fini(&c), DAT_SUCCESS);
}
END_TEST

START_TEST(multiple_waiters)
{
    struct sd_cnoq c;
    ck_assert_int_eq(sd_cnoq_init(&c, no_agent), DAT_SUCCESS);
    enum { N = 3 };
    struct cw w[N];
    pthread_t t[N];
    for (int i = 0; i < N; i++) {
        w[i] = (struct cw){&c, 5000000, 0, NULL};
        pthread_create(&t[i], NULL, cw_main, &w[i]);
    }
    await_waiters(&c, N);
    /* one trigger wakes one waiter */
    sd_cnoq_trigger(&c, EVD1);
    for (int i = 0; i < 2000 && sd_cnoq_waiters(&c) > N - 1; i++)
        sleep_ms(1);
    sleep_ms(20);
    ck_assert_int_eq(sd_cnoq_waiters(&c), N - 1);
    sd_cnoq_trigger(&c, EVD2);
    sd_cnoq_trigger(&c, EVD2);
    int ok = 0;
    for (int i = 0; i < N; i++) {
        pthread_join(t[i], NULL);
        ck_assert_int_eq(w[i].rc, DAT_SUCCESS);
        ck_assert(w[i].h == EVD1 || w[i].h == EVD2);
        ok++;
    }
    ck_assert_int_eq(ok, N);
    ck_assert_ptr_eq(sd_cnoq_last(&c), EVD2); /* dat_cno_trigger: latest */
    sd_cnoq_fini(&c);
}
END_TEST

START_TEST(trigger_not_lost_when_waiter_times_out)
{
    /* Race a short-timeout waiter against triggers; whatever the
     * interleaving, every trigger is seen by a waiter or stays pending. */
    struct sd_cnoq c;
    ck_assert_int_eq(sd_cnoq_init(&c, no_agent), DAT_SUCCESS);
    for (int round = 0; round < 50; round++) {
        struct cw w = {&c, 1000, 0, NULL};
        pthread_t t;
        pthread_create(&t, NULL, cw_main, &w);
        sleep_ms((unsigned)(round % 3));
        sd_cnoq_trigger(&c, EVD1);
        pthread_join(t, NULL);
        if (w.rc != DAT_SUCCESS) {
            DAT_EVD_HANDLE h;
            ck_assert_int_eq(TYPE(w.rc), DAT_QUEUE_EMPTY);
            ck_assert_int_eq(sd_cnoq_wait(&c, 0, &h), DAT_SUCCESS);
            ck_assert_ptr_eq(h, EVD1);
        }
    }
    sd_cnoq_fini(&c);
}
END_TEST

/* ------------------------------------------------------------ agents */

struct agent_log {
    int calls;
    DAT_EVD_HANDLE last;
    struct sd_cnoq *rearm; /* re-arm on this CNO from inside the callback */
};

static void agent_fn(DAT_PVOID data, DAT_EVD_HANDLE evd)
{
    struct agent_log *l = data;
    l->calls++;
    l->last = evd;
    if (l->rearm) {
        DAT_OS_WAIT_PROXY_AGENT a = {l, agent_fn};
        ck_assert_int_eq(sd_cnoq_set_agent(l->rearm, a), DAT_SUCCESS);
    }
}

START_TEST(agent_invoked_once_then_disassociated)
{
    struct agent_log log = {0, NULL, NULL};
    DAT_OS_WAIT_PROXY_AGENT a = {&log, agent_fn};
    struct sd_cnoq c, c2;
    ck_assert_int_eq(sd_cnoq_init(&c, a), DAT_SUCCESS);
    ck_assert_int_eq(sd_cnoq_init(&c2, a), DAT_SUCCESS); /* same agent, two CNOs */
    DAT_PROXY_TYPE pt;
    DAT_OS_WAIT_PROXY_AGENT qa;
    sd_cnoq_query(&c, &pt, &qa, NULL);
    ck_assert_int_eq(pt, DAT_PROXY_TYPE_AGENT);
    ck_assert_ptr_eq(qa.instance_data, &log);

    sd_cnoq_trigger(&c, EVD1);
    ck_assert_int_eq(log.calls, 1);
    ck_assert_ptr_eq(log.last, EVD1);
    /* local delivery happens as well */
    DAT_EVD_HANDLE h;
    ck_assert_int_eq(sd_cnoq_wait(&c, 0, &h), DAT_SUCCESS);
    /* disassociated from every CNO (L2960) */
    sd_cnoq_query(&c, &pt, &qa, NULL);
    ck_assert_int_eq(pt, DAT_PROXY_TYPE_NONE);
    ck_assert_ptr_null(qa.proxy_agent_func);
    sd_cnoq_query(&c2, &pt, NULL, NULL);
    ck_assert_int_eq(pt, DAT_PROXY_TYPE_NONE);
    sd_cnoq_trigger(&c, EVD2);
    sd_cnoq_trigger(&c2, EVD2);
    ck_assert_int_eq(log.calls, 1);

    /* re-armed; and re-arming from inside the callback sticks */
    log.rearm = &c;
    ck_assert_int_eq(sd_cnoq_set_agent(&c, a), DAT_SUCCESS);
    sd_cnoq_trigger(&c, EVD2);
    ck_assert_int_eq(log.calls, 2);
    ck_assert_ptr_eq(log.last, EVD2);
    sd_cnoq_trigger(&c, EVD1);
    ck_assert_int_eq(log.calls, 3);
    log.rearm = NULL;
    ck_assert_int_eq(sd_cnoq_set_agent(&c, no_agent), DAT_SUCCESS);
    sd_cnoq_trigger(&c, EVD1);
    ck_assert_int_eq(log.calls, 3);

    DAT_OS_WAIT_PROXY_AGENT half = {&log, NULL};
    ck_assert_int_eq(TYPE(sd_cnoq_set_agent(&c, half)), DAT_INVALID_PARAMETER);
    struct sd_cnoq c3;
    ck_assert_int_eq(TYPE(sd_cnoq_init(&c3, half)), DAT_INVALID_PARAMETER);
    sd_cnoq_fini(&c);
    sd_cnoq_fini(&c2);
}
END_TEST

START_TEST(wake_all_unblocks_everyone)
{
    struct agent_log log = {0, EVD1, NULL};
    DAT_OS_WAIT_PROXY_AGENT a = {&log, agent_fn};
    struct sd_cnoq c;
    ck_assert_int_eq(sd_cnoq_init(&c, a), DAT_SUCCESS);
    struct cw w[2];
    pthread_t t[2];
    for (int i = 0; i < 2; i++) {
        w[i] = (struct cw){&c, DAT_TIMEOUT_INFINITE, 0, NULL};
        pthread_create(&t[i], NULL, cw_main, &w[i]);
    }
    await_waiters(&c, 2);
    sd_cnoq_wake_all(&c, DAT_ABORT | DAT_CLASS_ERROR);
    for (int i = 0; i < 2; i++) {
        pthread_join(t[i], NULL);
        ck_assert_int_eq(TYPE(w[i].rc), DAT_ABORT);
        ck_assert_ptr_null(w[i].h);
    }
    ck_assert_int_eq(log.calls, 1);
    ck_assert_ptr_null(log.last); /* agent gets the NULL handle (L3135) */
    DAT_EVD_HANDLE h;
    ck_assert_int_eq(TYPE(sd_cnoq_wait(&c, 0, &h)), DAT_QUEUE_EMPTY); /* nothing pending */
    sd_cnoq_fini(&c);
}
END_TEST

/* ------------------------------------------------------------ fd */

static int readable(int fd, int ms)
{
    struct pollfd p = {fd, POLLIN, 0};
    int n = poll(&p, 1, ms);
    return n == 1 && (p.revents & POLLIN);
}

START_TEST(fd_readable_on_trigger)
{
    struct sd_cnoq c;
    int fd = -1;
    ck_assert_int_eq(sd_cnoq_init_fd(&c, &fd), DAT_SUCCESS);
    ck_assert_int_ge(fd, 0);
    DAT_PROXY_TYPE pt;
    int qfd;
    sd_cnoq_query(&c, &pt, NULL, &qfd);
    ck_assert_int_eq(pt, DAT_PROXY_TYPE_FD);
    ck_assert_int_eq(qfd, fd);
    DAT_OS_WAIT_PROXY_AGENT a = {NULL, (DAT_AGENT_FUNC)agent_fn};
    ck_assert_int_eq(TYPE(sd_cnoq_set_agent(&c, a)), DAT_INVALID_PARAMETER);

    ck_assert(!readable(fd, 0));
    sd_cnoq_trigger(&c, EVD1);
    sd_cnoq_trigger(&c, EVD2);
    ck_assert(readable(fd, 1000));
    DAT_EVD_HANDLE got[4] = {0};
    ssize_t n = read(fd, got, sizeof(got));
    ck_assert_int_eq(n, (ssize_t)sizeof(DAT_EVD_HANDLE));
    ck_assert_ptr_eq(got[0], EVD2); /* the latest, coalesced (L3268) */
    ck_assert(!readable(fd, 0));     /* read cleared it */

    /* a poller in another thread is woken by a trigger */
    sd_cnoq_trigger(&c, EVD1);
    ck_assert(readable(fd, 1000));
    ck_assert_int_eq(read(fd, got, sizeof(got)), (ssize_t)sizeof(DAT_EVD_HANDLE));
    ck_assert_ptr_eq(got[0], EVD1);
    /* the CNO itself was triggered too */
    DAT_EVD_HANDLE h;
    ck_assert_int_eq(sd_cnoq_wait(&c, 0, &h), DAT_SUCCESS);

    /* consumer close: association gone (L3270), free does not re-close */
    close(fd);
    sd_cnoq_query(&c, &pt, NULL, &qfd);
    ck_assert_int_eq(pt, DAT_PROXY_TYPE_NONE);
    sd_cnoq_trigger(&c, EVD1); /* harmless */
    ck_assert_int_eq(sd_cnoq_fini(&c), DAT_SUCCESS);
}
END_TEST

struct poller {
    int fd;
    int ok;
};

static void *poller_main(void *arg)
{
    struct poller *p = arg;
    p->ok = readable(p->fd, 5000);
    return NULL;
}

START_TEST(fd_poller_thread_woken)
{
    struct sd_cnoq c;
    int fd = -1;
    ck_assert_int_eq(sd_cnoq_init_fd(&c, &fd), DAT_SUCCESS);
    struct poller p = {fd, 0};
    pthread_t t;
    pthread_create(&t, NULL, poller_main, &p);
    sleep_ms(20);
    sd_cnoq_trigger(&c, EVD1);
    pthread_join(t, NULL);
    ck_assert_int_eq(p.ok, 1);
    /* free closes the fd it handed out (L3100) */
    ck_assert_int_eq(sd_cnoq_fini(&c), DAT_SUCCESS);
    errno = 0;
    ck_assert_int_eq(fcntl(fd, F_GETFD), -1);
    ck_assert_int_eq(errno, EBADF);
}
END_TEST

static Suite *cnoq_suite(void)
{
    Suite *s = suite_create("cnoq");
    TCase *tc = tcase_create("cnoq");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, trigger_before_wait_is_remembered);
    tcase_add_test(tc, wait_timeout_returns_queue_empty);
    tcase_add_test(tc, trigger_wakes_blocked_waiter);
    tcase_add_test(tc, multiple_waiters);
    tcase_add_test(tc, trigger_not_lost_when_waiter_times_out);
    tcase_add_test(tc, agent_invoked_once_then_disassociated);
    tcase_add_test(tc, wake_all_unblocks_everyone);
    tcase_add_test(tc, fd_readable_on_trigger);
    tcase_add_test(tc, fd_poller_thread_woken);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(cnoq_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
