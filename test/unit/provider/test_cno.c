/* CNO object through the DAT table: create/fd_create/query/modify_agent/
 * free/wait/trigger, agent and fd delivery from an attached EVD. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <unistd.h>

#include "lib/provider/cno.h"
#include "test/lib/prov_fixture.h"

static DAT_EVENT se(uintptr_t v)
{
    DAT_EVENT ev;
    memset(&ev, 0, sizeof ev);
    ev.event_number = DAT_SOFTWARE_EVENT;
    ev.event_data.software_event_data.pointer = (DAT_PVOID)v;
    return ev;
}

static int agent_calls;
static DAT_EVD_HANDLE agent_evd;
static DAT_PVOID agent_data;
static void agent_fn(DAT_PVOID data, DAT_EVD_HANDLE evd)
{
    agent_calls++;
    agent_data = data;
    agent_evd = evd;
}

START_TEST(cno_create_query_agent)
{
    DAT_PROVIDER *p = fx_provider("t-cno1", "lo", DAT_FALSE);
    DAT_IA_HANDLE ia = fx_open(p, NULL);
    DAT_CNO_HANDLE cno = DAT_HANDLE_NULL;
    int token = 5;
    DAT_OS_WAIT_PROXY_AGENT agent = {.instance_data = &token, .proxy_agent_func = agent_fn};
    DAT_OS_WAIT_PROXY_AGENT half = {.instance_data = &token, .proxy_agent_func = NULL};

    ck_assert_dat_err(p->cno_create_func(NULL, agent, &cno), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);
    ck_assert_dat_err(p->cno_create_func(ia, agent, NULL), DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    ck_assert_dat_err(p->cno_create_func(ia, half, &cno), DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    ck_assert_ptr_null(cno);
    ck_assert_dat_ok(p->cno_create_func(ia, agent, &cno));

    DAT_CNO_PARAM cp;
    memset(&cp, 0xAB, sizeof cp);
    ck_assert_dat_ok(p->cno_query_func(cno, DAT_CNO_FIELD_ALL, &cp));
    ck_assert_ptr_eq(cp.ia_handle, ia);
    ck_assert_int_eq(cp.proxy_type, DAT_PROXY_TYPE_AGENT);
    ck_assert_ptr_eq(cp.proxy.agent.instance_data, &token);
    ck_assert_ptr_eq((void *)cp.proxy.agent.proxy_agent_func, (void *)agent_fn);
    ck_assert_dat_err(p->cno_query_func(cno, 8, &cp), DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    ck_assert_dat_err(p->cno_query_func(cno, DAT_CNO_FIELD_ALL, NULL), DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    ck_assert_dat_err(p->cno_query_func(ia, DAT_CNO_FIELD_ALL, &cp), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_CNO);

    /* Agent: invoked on a trigger from an attached EVD, then disassociated
     * (one-shot, L2993-2997); modify_agent re-arms. */
    DAT_EVD_HANDLE evd, got;
    ck_assert_dat_ok(p->evd_create_func(ia, 8, cno, DAT_EVD_SOFTWARE_FLAG, &evd));
    DAT_EVENT in = se(1), ev;
    ck_assert_dat_ok(p->evd_post_se_func(evd, &in));
    ck_assert_int_eq(agent_calls, 1);
    ck_assert_ptr_eq(agent_evd, evd);
    ck_assert_ptr_eq(agent_data, &token);
    ck_assert_dat_ok(p->cno_query_func(cno, DAT_CNO_FIELD_ALL, &cp));
    ck_assert_int_eq(cp.proxy_type, DAT_PROXY_TYPE_NONE);
    ck_assert_dat_ok(p->evd_post_se_func(evd, &in));
    ck_assert_int_eq(agent_calls, 1);
    ck_assert_dat_err(p->cno_modify_agent_func(cno, half), DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    ck_assert_dat_ok(p->cno_modify_agent_func(cno, agent));
    ck_assert_dat_ok(p->evd_post_se_func(evd, &in));
    ck_assert_int_eq(agent_calls, 2);
    /* Local delivery happened too. */
    ck_assert_dat_ok(p->cno_wait_func(cno, 0, &got));
    ck_assert_ptr_eq(got, evd);
    ck_assert_dat_err(p->cno_wait_func(cno, 0, NULL), DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    ck_assert_dat_err(p->cno_trigger_func(cno, NULL), DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    ck_assert_dat_ok(p->cno_trigger_func(cno, &got));
    ck_assert_ptr_eq(got, evd);
    while (p->evd_dequeue_func(evd, &ev) == DAT_SUCCESS)
        ;

    ck_assert_dat_err(p->cno_free_func(cno), DAT_INVALID_STATE, DAT_INVALID_STATE_CNO_IN_USE);
    ck_assert_dat_ok(p->evd_free_func(evd));
    ck_assert_dat_ok(p->cno_free_func(cno));
    ck_assert_dat_err(p->cno_free_func(cno), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_CNO);
    ck_assert_dat_ok(p->ia_close_func(ia, DAT_CLOSE_GRACEFUL_FLAG));
    ck_assert_uint_eq(sd_handle_live_count(), 0);
}
END_TEST

START_TEST(cno_fd)
{
    DAT_PROVIDER *p = fx_provider("t-cno2", "lo", DAT_FALSE);
    DAT_IA_HANDLE ia = fx_open(p, NULL);
    DAT_CNO_HANDLE cno;
    DAT_FD fd = -1;
    ck_assert_dat_err(p->cno_fd_create_func(ia, NULL, &cno), DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    ck_assert_dat_err(p->cno_fd_create_func(ia, &fd, NULL), DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    ck_assert_dat_err(p->cno_fd_create_func((DAT_IA_HANDLE)&fd, &fd, &cno), DAT_INVALID_HANDLE,
                      DAT_INVALID_HANDLE_IA);
    ck_assert_dat_ok(p->cno_fd_create_func(ia, &fd, &cno));
    ck_assert_int_ge(fd, 0);
    DAT_CNO_PARAM cp;
    ck_assert_dat_ok(p->cno_query_func(cno, DAT_CNO_FIELD_ALL, &cp));
    ck_assert_int_eq(cp.proxy_type, DAT_PROXY_TYPE_FD);
    ck_assert_int_eq(cp.proxy.fd, fd);
    /* The fd is its permanent proxy. */
    DAT_OS_WAIT_PROXY_AGENT agent = {.instance_data = NULL, .proxy_agent_func = agent_fn};
    ck_assert_int_eq(ERRT(p->cno_modify_agent_func(cno, agent)), DAT_INVALID_PARAMETER);

    DAT_EVD_HANDLE evd, got = NULL;
    ck_assert_dat_ok(p->evd_create_func(ia, 8, cno, DAT_EVD_SOFTWARE_FLAG, &evd));
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    ck_assert_int_eq(poll(&pfd, 1, 0), 0);
    DAT_EVENT in = se(3);
    ck_assert_dat_ok(p->evd_post_se_func(evd, &in));
    ck_assert_int_eq(poll(&pfd, 1, 1000), 1);
    ck_assert(pfd.revents & POLLIN);
    ck_assert_int_eq(read(fd, &got, sizeof got), (ssize_t)sizeof got);
    ck_assert_ptr_eq(got, evd);
    ck_assert_int_eq(poll(&pfd, 1, 0), 0); /* read cleared readiness */

    ck_assert_dat_ok(p->evd_free_func(evd));
    ck_assert_dat_ok(p->cno_free_func(cno));
    /* Free closed the consumer's descriptor (L3100). */
    errno = 0;
    ck_assert_int_eq(fcntl(fd, F_GETFD), -1);
    ck_assert_int_eq(errno, EBADF);
    ck_assert_dat_ok(p->ia_close_func(ia, DAT_CLOSE_GRACEFUL_FLAG));
    ck_assert_uint_eq(sd_handle_live_count(), 0);
}
END_TEST

struct waiter {
    DAT_PROVIDER *p;
    DAT_CNO_HANDLE cno;
    DAT_RETURN rc;
    DAT_EVD_HANDLE evd;
};

static void *cno_waiter(void *arg)
{
    struct waiter *w = arg;
    w->rc = w->p->cno_wait_func(w->cno, DAT_TIMEOUT_INFINITE, &w->evd);
    return NULL;
}

START_TEST(cno_wait_rules)
{
    DAT_PROVIDER *p = fx_provider("t-cno3", "lo", DAT_FALSE);
    DAT_IA_HANDLE ia = fx_open(p, NULL);
    DAT_CNO_HANDLE cno;
    DAT_EVD_HANDLE got = (DAT_EVD_HANDLE)1;
    ck_assert_dat_ok(p->cno_create_func(ia, DAT_OS_WAIT_PROXY_AGENT_NULL, &cno));
    DAT_CNO_PARAM cp;
    ck_assert_dat_ok(p->cno_query_func(cno, DAT_CNO_FIELD_PROXY_TYPE, &cp));
    ck_assert_int_eq(cp.proxy_type, DAT_PROXY_TYPE_NONE);
    ck_assert_dat_ok(p->cno_trigger_func(cno, &got));
    ck_assert_ptr_null(got); /* never triggered */
    got = (DAT_EVD_HANDLE)1;
    ck_assert_dat_err(p->cno_wait_func(cno, 1000, &got), DAT_QUEUE_EMPTY, 0); /* not TIMEOUT_EXPIRED */
    ck_assert_ptr_null(got);

    /* A thread blocked on it: free refuses; abrupt IA close releases it
     * with DAT_ABORT and a NULL EVD. */
    struct waiter w = {.p = p, .cno = cno, .evd = (DAT_EVD_HANDLE)1};
    pthread_t t;
    pthread_create(&t, NULL, cno_waiter, &w);
    for (int i = 0; i < 2000 && sd_cnoq_waiters(&((struct sd_cno *)cno)->c) == 0; i++)
        usleep(1000);
    ck_assert_dat_err(p->cno_free_func(cno), DAT_INVALID_STATE, DAT_INVALID_STATE_CNO_IN_USE);
    ck_assert_dat_ok(p->ia_close_func(ia, DAT_CLOSE_ABRUPT_FLAG));
    pthread_join(t, NULL);
    ck_assert_int_eq(ERRT(w.rc), DAT_ABORT);
    ck_assert_ptr_null(w.evd);
    ck_assert_dat_err(p->cno_wait_func(cno, 0, &got), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_CNO);
    ck_assert_uint_eq(sd_handle_live_count(), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("provider-cno");
    TCase *tc = tcase_create("cno");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, cno_create_query_agent);
    tcase_add_test(tc, cno_fd);
    tcase_add_test(tc, cno_wait_rules);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
