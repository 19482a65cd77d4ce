/* Return codes of dat_ia_open, dat_ia_close and dat_ia_query: one check per
 * code the spec lists (L2089-2093, L2170-2176, L2532-2534) in the situation
 * it names. docs/compliance-notes-core.md maps each code to its check. */
#include <fcntl.h>
#include <pthread.h>
#include <sys/resource.h>
#include <unistd.h>
#include <stdint.h>
#include <time.h>

#include "lib/provider/cno.h"
#include "lib/provider/evd.h"
#include "lib/provider/pz.h"
#include "test/lib/prov_fixture.h"

#define NAME "t-rc-ia"

static _Alignas(64) char junk[256]; /* a plausible, never-published pointer */

static DAT_PROVIDER *prov(void)
{
    return fx_provider(NAME, "lo", DAT_FALSE);
}

static void sleep_ms(int ms)
{
    struct timespec ts = {.tv_sec = 0, .tv_nsec = ms * 1000000L};
    nanosleep(&ts, NULL);
}

/* ---------------------------------------------------------------- open */

START_TEST(open_invalid_parameter)
{
    DAT_PROVIDER *p = prov();
    DAT_IA_HANDLE ia = DAT_HANDLE_NULL;
    DAT_EVD_HANDLE evd = DAT_HANDLE_NULL;
    DAT_NAME_PTR name = (DAT_NAME_PTR)p->device_name;
    ck_assert_dat_err(p->ia_open_func(NULL, 8, &evd, &ia), DAT_INVALID_PARAMETER, DAT_INVALID_ARG1);
    /* async_evd_min_qlen counts only when we create the EVD: negative, or
     * beyond max_evd_qlen (the limit dat_ia_query reports). */
    ck_assert_dat_err(p->ia_open_func(name, -1, &evd, &ia), DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    ck_assert_dat_err(p->ia_open_func(name, SD_MAX_EVD_QLEN + 1, &evd, &ia), DAT_INVALID_PARAMETER,
                      DAT_INVALID_ARG2);
    ck_assert_dat_err(p->ia_open_func(name, 8, NULL, &ia), DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    ck_assert_dat_err(p->ia_open_func(name, 8, &evd, NULL), DAT_INVALID_PARAMETER, DAT_INVALID_ARG4);
    ck_assert_ptr_null(evd);
    ck_assert_ptr_null(ia);
    /* max_evd_qlen itself is accepted. */
    ck_assert_dat_ok(p->ia_open_func(name, SD_MAX_EVD_QLEN, &evd, &ia));
    DAT_EVD_PARAM ep;
    ck_assert_dat_ok(p->evd_query_func(evd, DAT_EVD_FIELD_EVD_QLEN, &ep));
    ck_assert_int_ge(ep.evd_qlen, SD_MAX_EVD_QLEN);
    ck_assert_dat_ok(p->ia_close_func(ia, DAT_CLOSE_GRACEFUL_FLAG));
}
END_TEST

START_TEST(open_unusable_ia_params_is_invalid_name)
{
    /* The IA name names a record whose ia_params resolve to nothing: the
     * name argument is what is wrong (ARG1). */
    DAT_PROVIDER *p = fx_provider("t-rc-ia-bad", "no-such-if-zz9", DAT_FALSE);
    DAT_IA_HANDLE ia = DAT_HANDLE_NULL;
    DAT_EVD_HANDLE evd = DAT_HANDLE_NULL;
    ck_assert_dat_err(p->ia_open_func((DAT_NAME_PTR)p->device_name, 8, &evd, &ia), DAT_INVALID_PARAMETER,
                      DAT_INVALID_ARG1);
    ck_assert_ptr_null(ia);
}
END_TEST

START_TEST(open_name_not_found)
{
    DAT_PROVIDER *p = prov();
    DAT_IA_HANDLE ia = DAT_HANDLE_NULL;
    DAT_EVD_HANDLE evd = DAT_HANDLE_NULL;
    /* DAT_NAME_NOT_FOUND is DAT_PROVIDER_NOT_FOUND (dat_error.h alias). */
    ck_assert_int_eq(DAT_NAME_NOT_FOUND, DAT_PROVIDER_NOT_FOUND);
    ck_assert_dat_err(p->ia_open_func((DAT_NAME_PTR) "t-rc-no-such-ia", 8, &evd, &ia), DAT_NAME_NOT_FOUND,
                      DAT_NAME_NOT_REGISTERED);
    ck_assert_ptr_null(ia);
}
END_TEST

START_TEST(open_invalid_async_evd_handle)
{
    DAT_PROVIDER *p = prov();
    DAT_EVD_HANDLE own = DAT_HANDLE_NULL; /* INOUT: NULL asks for a new async EVD */
    DAT_IA_HANDLE ia = fx_open(p, &own);
    DAT_NAME_PTR name = (DAT_NAME_PTR)p->device_name;
    DAT_IA_HANDLE ia2 = DAT_HANDLE_NULL;
    DAT_PZ_HANDLE pz;
    DAT_EVD_HANDLE plain, dead;
    ck_assert_dat_ok(p->pz_create_func(ia, &pz));
    ck_assert_dat_ok(p->evd_create_func(ia, 8, NULL, DAT_EVD_DTO_FLAG, &plain));
    ck_assert_dat_ok(p->evd_create_func(ia, 8, NULL, DAT_EVD_ASYNC_FLAG, &dead));
    ck_assert_dat_ok(p->evd_free_func(dead));

    /* garbage, another object type, an EVD without DAT_EVD_ASYNC_FLAG, a
     * freed EVD, OUT_OF_SCOPE: each INVALID_HANDLE|EVD_ASYNC, and the
     * handle is left unchanged (L2073-2075). */
    DAT_EVD_HANDLE bad[] = {(DAT_EVD_HANDLE)junk, (DAT_EVD_HANDLE)pz, plain, dead, DAT_EVD_OUT_OF_SCOPE,
                            (DAT_EVD_HANDLE)ia};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        DAT_EVD_HANDLE in = bad[i];
        ck_assert_dat_err(p->ia_open_func(name, 8, &in, &ia2), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_ASYNC);
        ck_assert_ptr_eq(in, bad[i]);
        ck_assert_ptr_null(ia2);
    }
    /* A live async EVD (another IA's) is accepted and not owned. */
    DAT_EVD_HANDLE in = own;
    ck_assert_dat_ok(p->ia_open_func(name, 8, &in, &ia2));
    ck_assert_ptr_eq(in, own);
    ck_assert_dat_ok(p->ia_close_func(ia2, DAT_CLOSE_GRACEFUL_FLAG));
    DAT_EVD_PARAM ep;
    ck_assert_dat_ok(p->evd_query_func(own, DAT_EVD_FIELD_ALL, &ep)); /* still live */
    ck_assert_dat_ok(p->evd_free_func(plain));
    ck_assert_dat_ok(p->pz_free_func(pz));
    ck_assert_dat_ok(p->ia_close_func(ia, DAT_CLOSE_GRACEFUL_FLAG));
}
END_TEST

/* Open with every file descriptor taken (the engine and interface lookup
 * need some): DAT_INSUFFICIENT_RESOURCES, never a misleading
 * INVALID_PARAMETER, for a record naming an interface or a literal. */
static void open_without_fds(const char *name, const char *params)
{
    DAT_PROVIDER *p = fx_provider(name, params, DAT_FALSE);
    struct rlimit rl = {.rlim_cur = 64, .rlim_max = 64};
    ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &rl), 0);
    int fds[64], n = 0, fd;
    while (n < 64 && (fd = open("/dev/null", O_RDONLY)) >= 0)
        fds[n++] = fd;
    DAT_IA_HANDLE ia = DAT_HANDLE_NULL;
    DAT_EVD_HANDLE evd = DAT_HANDLE_NULL;
    DAT_RETURN rc = p->ia_open_func((DAT_NAME_PTR)p->device_name, 8, &evd, &ia);
    while (n > 0)
        close(fds[--n]);
    ck_assert_dat_err(rc, DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
    ck_assert_ptr_null(ia);
    ck_assert_ptr_null(evd);
    ck_assert_dat_ok(p->ia_open_func((DAT_NAME_PTR)p->device_name, 8, &evd, &ia));
    ck_assert_dat_ok(p->ia_close_func(ia, DAT_CLOSE_GRACEFUL_FLAG));
}

START_TEST(open_insufficient_resources)
{
    open_without_fds("t-rc-ia-fd1", "lo");
    open_without_fds("t-rc-ia-fd2", "127.0.0.1");
}
END_TEST

/* ---------------------------------------------------------------- close */

START_TEST(close_invalid_handle)
{
    DAT_PROVIDER *p = prov();
    DAT_IA_HANDLE ia = fx_open(p, NULL), dead = fx_open(p, NULL);
    DAT_PZ_HANDLE pz;
    ck_assert_dat_ok(p->pz_create_func(ia, &pz));
    ck_assert_dat_ok(p->ia_close_func(dead, DAT_CLOSE_ABRUPT_FLAG));
    DAT_IA_HANDLE bad[] = {DAT_HANDLE_NULL, (DAT_IA_HANDLE)junk, (DAT_IA_HANDLE)pz, dead, (DAT_IA_HANDLE)(uintptr_t)5};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_dat_err(p->ia_close_func(bad[i], DAT_CLOSE_ABRUPT_FLAG), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);
        ck_assert_dat_err(p->ia_close_func(bad[i], DAT_CLOSE_GRACEFUL_FLAG), DAT_INVALID_HANDLE,
                          DAT_INVALID_HANDLE_IA);
    }
    ck_assert_dat_ok(p->ia_close_func(ia, DAT_CLOSE_ABRUPT_FLAG));
}
END_TEST

START_TEST(close_invalid_flags)
{
    DAT_PROVIDER *p = prov();
    DAT_IA_HANDLE ia = fx_open(p, NULL);
    ck_assert_dat_err(p->ia_close_func(ia, (DAT_CLOSE_FLAGS)2), DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    ck_assert_dat_err(p->ia_close_func(ia, (DAT_CLOSE_FLAGS)-1), DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    /* Nothing happened: the IA still works. */
    DAT_PZ_HANDLE pz;
    ck_assert_dat_ok(p->pz_create_func(ia, &pz));
    ck_assert_dat_ok(p->pz_free_func(pz));
    /* DAT_CLOSE_DEFAULT is the abrupt flag (0). */
    ck_assert_dat_ok(p->ia_close_func(ia, DAT_CLOSE_DEFAULT));
}
END_TEST

START_TEST(close_graceful_invalid_state)
{
    DAT_PROVIDER *p = prov();
    DAT_IA_HANDLE ia = fx_open(p, NULL);
    DAT_PZ_HANDLE pz;
    DAT_EVD_HANDLE evd;
    DAT_CNO_HANDLE cno;
    static char buf[64];
    DAT_REGION_DESCRIPTION d = {.for_va = buf};
    DAT_LMR_HANDLE lmr;
    DAT_RMR_HANDLE rmr;

    /* Each kind of consumer-created object alone blocks a graceful close,
     * and the failed close changes nothing (L2152-2155). */
    ck_assert_dat_ok(p->pz_create_func(ia, &pz));
    ck_assert_dat_err(p->ia_close_func(ia, DAT_CLOSE_GRACEFUL_FLAG), DAT_INVALID_STATE, DAT_INVALID_STATE_IA_IN_USE);
    ck_assert_dat_ok(p->lmr_create_func(ia, DAT_MEM_TYPE_VIRTUAL, d, sizeof buf, pz, DAT_MEM_PRIV_ALL_FLAG,
                                        DAT_VA_TYPE_VA, &lmr, NULL, NULL, NULL, NULL));
    ck_assert_dat_ok(p->rmr_create_func(pz, &rmr));
    ck_assert_dat_err(p->ia_close_func(ia, DAT_CLOSE_GRACEFUL_FLAG), DAT_INVALID_STATE, DAT_INVALID_STATE_IA_IN_USE);
    ck_assert_dat_ok(p->rmr_free_func(rmr));
    ck_assert_dat_err(p->ia_close_func(ia, DAT_CLOSE_GRACEFUL_FLAG), DAT_INVALID_STATE, DAT_INVALID_STATE_IA_IN_USE);
    ck_assert_dat_ok(p->lmr_free_func(lmr));
    ck_assert_dat_ok(p->pz_free_func(pz));

    ck_assert_dat_ok(p->cno_create_func(ia, DAT_OS_WAIT_PROXY_AGENT_NULL, &cno));
    ck_assert_dat_err(p->ia_close_func(ia, DAT_CLOSE_GRACEFUL_FLAG), DAT_INVALID_STATE, DAT_INVALID_STATE_IA_IN_USE);
    ck_assert_dat_ok(p->evd_create_func(ia, 4, cno, DAT_EVD_SOFTWARE_FLAG, &evd));
    ck_assert_dat_ok(p->cno_query_func(cno, DAT_CNO_FIELD_ALL, &(DAT_CNO_PARAM){0})); /* still live */
    ck_assert_dat_err(p->ia_close_func(ia, DAT_CLOSE_GRACEFUL_FLAG), DAT_INVALID_STATE, DAT_INVALID_STATE_IA_IN_USE);
    ck_assert_dat_ok(p->evd_free_func(evd));
    ck_assert_dat_err(p->ia_close_func(ia, DAT_CLOSE_GRACEFUL_FLAG), DAT_INVALID_STATE, DAT_INVALID_STATE_IA_IN_USE);
    ck_assert_dat_ok(p->cno_free_func(cno));
    /* Only the async EVD open created is left: graceful close succeeds
     * and destroys it (L2157). */
    DAT_EVD_HANDLE async = DAT_HANDLE_NULL; /* INOUT: NULL asks for a new async EVD */
    ck_assert_dat_ok(p->ia_query_func(ia, &async, 0, NULL, 0, NULL));
    ck_assert_dat_ok(p->ia_close_func(ia, DAT_CLOSE_GRACEFUL_FLAG));
    DAT_EVD_PARAM ep;
    ck_assert_dat_err(p->evd_query_func(async, DAT_EVD_FIELD_ALL, &ep), DAT_INVALID_HANDLE,
                      DAT_INVALID_HANDLE_EVD_REQUEST);
}
END_TEST

struct evd_waiter {
    DAT_PROVIDER *p;
    DAT_EVD_HANDLE evd;
    DAT_RETURN rc;
};

static void *evd_wait_thread(void *arg)
{
    struct evd_waiter *w = arg;
    DAT_EVENT ev;
    DAT_COUNT nmore;
    w->rc = w->p->evd_wait_func(w->evd, 10 * 1000 * 1000, 1, &ev, &nmore);
    return NULL;
}

struct cno_waiter {
    DAT_PROVIDER *p;
    DAT_CNO_HANDLE cno;
    DAT_EVD_HANDLE got;
    DAT_RETURN rc;
};

static void *cno_wait_thread(void *arg)
{
    struct cno_waiter *w = arg;
    w->got = (DAT_EVD_HANDLE)junk;
    w->rc = w->p->cno_wait_func(w->cno, 10 * 1000 * 1000, &w->got);
    return NULL;
}

START_TEST(close_abrupt_aborts_waiters)
{
    /* L2147-2150: EVD waiters return DAT_ABORT, CNO waiters are woken
     * with a NULL EVD. Abrupt close itself succeeds with objects left. */
    DAT_PROVIDER *p = prov();
    DAT_IA_HANDLE ia = fx_open(p, NULL);
    DAT_EVD_HANDLE evd, evd2;
    DAT_CNO_HANDLE cno;
    DAT_PZ_HANDLE pz;
    ck_assert_dat_ok(p->pz_create_func(ia, &pz));
    ck_assert_dat_ok(p->cno_create_func(ia, DAT_OS_WAIT_PROXY_AGENT_NULL, &cno));
    ck_assert_dat_ok(p->evd_create_func(ia, 4, NULL, DAT_EVD_SOFTWARE_FLAG, &evd));
    ck_assert_dat_ok(p->evd_create_func(ia, 4, cno, DAT_EVD_SOFTWARE_FLAG, &evd2));
    struct evd_waiter ew = {.p = p, .evd = evd};
    struct cno_waiter cw = {.p = p, .cno = cno};
    pthread_t t1, t2;
    pthread_create(&t1, NULL, evd_wait_thread, &ew);
    pthread_create(&t2, NULL, cno_wait_thread, &cw);
    struct sd_evq_info info = {0};
    for (int i = 0; i < 2000; i++) {
        sd_evq_info(&((struct sd_evd *)evd)->q, &info);
        if (info.waiter && sd_cnoq_waiters(&((struct sd_cno *)cno)->c) == 1)
            break;
        sleep_ms(1);
    }
    ck_assert(info.waiter);
    ck_assert_int_eq(sd_cnoq_waiters(&((struct sd_cno *)cno)->c), 1);
    ck_assert_dat_ok(p->ia_close_func(ia, DAT_CLOSE_ABRUPT_FLAG));
    pthread_join(t1, NULL);
    pthread_join(t2, NULL);
    ck_assert_dat_err(ew.rc, DAT_ABORT, 0);
    ck_assert_dat_err(cw.rc, DAT_ABORT, 0);
    ck_assert_ptr_null(cw.got);
    /* Everything it owned is gone. */
    ck_assert_dat_err(p->pz_free_func(pz), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_PZ);
    ck_assert_dat_err(p->cno_free_func(cno), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_CNO);
}
END_TEST

/* ---------------------------------------------------------------- query */

START_TEST(query_invalid_handle)
{
    DAT_PROVIDER *p = prov();
    DAT_IA_HANDLE ia = fx_open(p, NULL), dead = fx_open(p, NULL);
    DAT_PZ_HANDLE pz;
    ck_assert_dat_ok(p->pz_create_func(ia, &pz));
    ck_assert_dat_ok(p->ia_close_func(dead, DAT_CLOSE_ABRUPT_FLAG));
    DAT_IA_ATTR a;
    DAT_IA_HANDLE bad[] = {DAT_HANDLE_NULL, (DAT_IA_HANDLE)junk, (DAT_IA_HANDLE)pz, dead};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ck_assert_dat_err(p->ia_query_func(bad[i], NULL, DAT_IA_FIELD_ALL, &a, 0, NULL), DAT_INVALID_HANDLE,
                          DAT_INVALID_HANDLE_IA);
    ck_assert_dat_ok(p->ia_close_func(ia, DAT_CLOSE_ABRUPT_FLAG));
}
END_TEST

START_TEST(query_invalid_parameter)
{
    DAT_PROVIDER *p = prov();
    DAT_IA_HANDLE ia = fx_open(p, NULL);
    DAT_IA_ATTR a;
    DAT_PROVIDER_ATTR pa;
    ck_assert_dat_err(p->ia_query_func(ia, NULL, (DAT_IA_ATTR_MASK)DAT_IA_FIELD_ALL + 1, &a, 0, NULL),
                      DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    ck_assert_dat_err(p->ia_query_func(ia, NULL, 1ull << 63, &a, 0, NULL), DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    ck_assert_dat_err(p->ia_query_func(ia, NULL, 0, NULL, (DAT_PROVIDER_ATTR_MASK)DAT_PROVIDER_FIELD_ALL + 1, &pa),
                      DAT_INVALID_PARAMETER, DAT_INVALID_ARG5);
    /* FIELD_NONE / ALL and NULL outputs are fine (L2539). */
    ck_assert_dat_ok(p->ia_query_func(ia, NULL, DAT_IA_FIELD_NONE, NULL, DAT_PROVIDER_FIELD_NONE, NULL));
    ck_assert_dat_ok(p->ia_query_func(ia, NULL, DAT_IA_FIELD_ALL, &a, DAT_PROVIDER_FIELD_ALL, &pa));
    ck_assert_dat_ok(p->ia_close_func(ia, DAT_CLOSE_ABRUPT_FLAG));
}
END_TEST

START_TEST(query_reports_enforced_limits)
{
    /* The limits the per-object test programs (test_rc_*) exceed are
     * exactly the ones reported here. */
    DAT_PROVIDER *p = prov();
    DAT_IA_HANDLE ia = fx_open(p, NULL);
    DAT_IA_ATTR a;
    ck_assert_dat_ok(p->ia_query_func(ia, NULL, DAT_IA_FIELD_ALL, &a, 0, NULL));
    ck_assert_int_eq(a.max_pzs, SD_MAX_PZS);
    ck_assert_int_eq(a.max_evds, SD_MAX_EVDS);
    ck_assert_int_eq(a.max_evd_qlen, SD_MAX_EVD_QLEN);
    ck_assert_int_eq(a.max_lmrs, SD_MAX_LMRS);
    ck_assert_int_eq(a.max_rmrs, SD_MAX_RMRS);
    ck_assert_uint_eq(a.max_lmr_block_size, SD_MAX_LMR_BLOCK_SIZE);
    ck_assert_int_eq(a.max_eps, SD_MAX_EPS);
    ck_assert_int_eq(a.max_srqs, SD_MAX_SRQS);
    ck_assert_dat_ok(p->ia_close_func(ia, DAT_CLOSE_ABRUPT_FLAG));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("rc_ia");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, open_invalid_parameter);
    tcase_add_test(tc, open_unusable_ia_params_is_invalid_name);
    tcase_add_test(tc, open_name_not_found);
    tcase_add_test(tc, open_invalid_async_evd_handle);
    tcase_add_test(tc, open_insufficient_resources);
    tcase_add_test(tc, close_invalid_handle);
    tcase_add_test(tc, close_invalid_flags);
    tcase_add_test(tc, close_graceful_invalid_state);
    tcase_add_test(tc, close_abrupt_aborts_waiters);
    tcase_add_test(tc, query_invalid_handle);
    tcase_add_test(tc, query_invalid_parameter);
    tcase_add_test(tc, query_reports_enforced_limits);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int nf = srunner_ntests_failed(sr);
    srunner_free(sr);
    return nf == 0 ? 0 : 1;
}
