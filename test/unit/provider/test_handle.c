/* Handle framework: table completeness, validation of NULL / garbage /
 * stale / wrong-type handles for every slot family, consumer context,
 * handle types, per-IA limits, concurrent validate-vs-free. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "test/lib/prov_fixture.h"

#define NSLOTS (sizeof(DAT_PROVIDER) / sizeof(void *))

START_TEST(table_has_81_filled_slots)
{
    DAT_PROVIDER *p = fx_provider("t-handle", "lo", DAT_FALSE);
    ck_assert_uint_eq(sizeof(DAT_PROVIDER), 648);
    ck_assert_uint_eq(NSLOTS, 81);
    void *const *slot = (void *const *)p;
    for (size_t i = 0; i < NSLOTS; i++) {
        if (i == 1) /* `extension` is data, not a function */
            continue;
        ck_assert_msg(slot[i] != NULL, "slot %zu is NULL", i);
    }
    ck_assert_str_eq(p->device_name, "t-handle");
}
END_TEST

START_TEST(records_get_distinct_ia_open)
{
    DAT_PROVIDER *a = fx_provider("t-rec", "lo", DAT_FALSE);
    DAT_PROVIDER *b = fx_provider("t-rec", "lo", DAT_TRUE);
    DAT_PROVIDER *a2 = fx_provider("t-rec", "lo", DAT_FALSE);
    ck_assert_ptr_ne(a, b);
    ck_assert_ptr_eq(a, a2);
    ck_assert_ptr_ne((void *)a->ia_open_func, (void *)b->ia_open_func);
    /* Each open lands on its own record: is_thread_safe follows it. */
    DAT_IA_HANDLE ia_a = fx_open(a, NULL), ia_b = fx_open(b, NULL);
    DAT_PROVIDER_ATTR pa, pb;
    ck_assert_dat_ok(a->ia_query_func(ia_a, NULL, 0, NULL, DAT_PROVIDER_FIELD_ALL, &pa));
    ck_assert_dat_ok(b->ia_query_func(ia_b, NULL, 0, NULL, DAT_PROVIDER_FIELD_ALL, &pb));
    ck_assert_int_eq(pa.is_thread_safe, DAT_FALSE);
    ck_assert_int_eq(pb.is_thread_safe, DAT_TRUE);
    ck_assert_ptr_eq(*(DAT_PROVIDER **)ia_a, a);
    ck_assert_ptr_eq(*(DAT_PROVIDER **)ia_b, b);
    ck_assert_dat_ok(a->ia_close_func(ia_a, DAT_CLOSE_ABRUPT_FLAG));
    ck_assert_dat_ok(b->ia_close_func(ia_b, DAT_CLOSE_ABRUPT_FLAG));
    DAT_PROVIDER_INFO ia = fx_info("t-rec", DAT_FALSE), ib = fx_info("t-rec", DAT_TRUE);
    ck_assert_int_eq(sd_provider_detach(&ia), 0);
    ck_assert_int_eq(sd_provider_detach(&ib), 0);
    ck_assert_int_eq(sd_provider_detach(&ib), -1);
    ck_assert_uint_eq(sd_handle_live_count(), 0);
}
END_TEST

/* Values that must be answered without being dereferenced. */
static void *garbage_values(int i)
{
    static char stack_like[64];
    static void *heap;
    if (heap == NULL)
        heap = malloc(256);
    switch (i) {
    case 0: return NULL;
    case 1: return (void *)(uintptr_t)1; /* DAT_EVD_ASYNC_EXISTS */
    case 2: return (void *)(uintptr_t)2;
    case 3: return (void *)(uintptr_t)0x7fff; /* small integer, no registry */
    case 4: return (void *)(uintptr_t)0xdeadbeefdeadbee0ull; /* unmapped */
    case 5: return stack_like + 8;
    case 6: return (char *)heap + 3; /* misaligned */
    case 7: return heap;
    default: return (void *)(uintptr_t)-16;
    }
}
#define NGARBAGE 9

START_TEST(garbage_handles_every_family)
{
    DAT_PROVIDER *p = fx_provider("t-garbage", "lo", DAT_FALSE);
    for (int i = 0; i < NGARBAGE; i++) {
        void *g = garbage_values(i);
        DAT_CONTEXT ctx;
        DAT_HANDLE_TYPE t;
        DAT_PZ_HANDLE pz;
        DAT_EVD_HANDLE evd;
        DAT_PZ_PARAM pp;
        DAT_EVD_PARAM ep;
        ck_assert_dat_err(p->ia_query_func(g, NULL, 0, NULL, 0, NULL), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);
        ck_assert_dat_err(p->ia_close_func(g, DAT_CLOSE_ABRUPT_FLAG), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);
        ck_assert_dat_err(p->set_consumer_context_func(g, ctx), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE1);
        ck_assert_dat_err(p->get_consumer_context_func(g, &ctx), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE1);
        ck_assert_dat_err(p->get_handle_type_func(g, &t), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE1);
        ck_assert_dat_err(p->pz_create_func(g, &pz), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);
        ck_assert_dat_err(p->pz_query_func(g, DAT_PZ_FIELD_ALL, &pp), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_PZ);
        ck_assert_dat_err(p->pz_free_func(g), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_PZ);
        ck_assert_dat_err(p->evd_create_func(g, 8, NULL, DAT_EVD_DTO_FLAG, &evd), DAT_INVALID_HANDLE,
                          DAT_INVALID_HANDLE_IA);
        ck_assert_dat_err(p->evd_query_func(g, DAT_EVD_FIELD_ALL, &ep), DAT_INVALID_HANDLE,
                          DAT_INVALID_HANDLE_EVD_REQUEST);
        ck_assert_dat_err(p->evd_free_func(g), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_REQUEST);
        /* Stubbed families still validate first. */
        ck_assert_dat_err(p->ep_free_func(g), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP);
        ck_assert_dat_err(p->ep_post_send_func(g, 0, NULL, (DAT_DTO_COOKIE){0}, 0), DAT_INVALID_HANDLE,
                          DAT_INVALID_HANDLE_EP);
        ck_assert_dat_err(p->lmr_free_func(g), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_LMR);
        ck_assert_dat_err(p->rmr_free_func(g), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_RMR);
        ck_assert_dat_err(p->psp_free_func(g), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_PSP);
        ck_assert_dat_err(p->rsp_free_func(g), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_RSP);
        ck_assert_dat_err(p->csp_free_func(g), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_CSP);
        ck_assert_dat_err(p->cr_reject_func(g, 0, NULL), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_CR);
        ck_assert_dat_err(p->cno_free_func(g), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_CNO);
        ck_assert_dat_err(p->srq_free_func(g), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_SRQ);
        ck_assert_dat_err(p->evd_dequeue_func(g, NULL), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_REQUEST);
        ck_assert_dat_err(p->rmr_create_func(g, NULL), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_PZ);
    }
}
END_TEST

START_TEST(stale_and_wrong_type_handles)
{
    DAT_PROVIDER *p = fx_provider("t-stale", "lo", DAT_FALSE);
    DAT_EVD_HANDLE async = DAT_HANDLE_NULL;
    DAT_IA_HANDLE ia = fx_open(p, &async);
    DAT_PZ_HANDLE pz;
    DAT_EVD_HANDLE evd;
    ck_assert_dat_ok(p->pz_create_func(ia, &pz));
    ck_assert_dat_ok(p->evd_create_func(ia, 8, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &evd));

    /* Wrong type: a live PZ where an EP/EVD/LMR is expected, and so on. */
    ck_assert_dat_err(p->ep_free_func(pz), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP);
    ck_assert_dat_err(p->evd_free_func(pz), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_REQUEST);
    ck_assert_dat_err(p->lmr_free_func(evd), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_LMR);
    ck_assert_dat_err(p->pz_free_func(evd), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_PZ);
    ck_assert_dat_err(p->pz_create_func(pz, &pz), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);
    ck_assert_dat_err(p->ia_close_func(evd, DAT_CLOSE_ABRUPT_FLAG), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);
    /* Right type: the call gets past handle validation to its argument checks. */
    ck_assert_dat_err(p->rmr_create_func(pz, NULL), DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    ck_assert_dat_err(p->evd_dequeue_func(evd, NULL), DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);

    /* Stale handles of each live kind. The freed memory is quarantined and
     * poisoned, but keeps its provider word. */
    ck_assert_dat_ok(p->pz_free_func(pz));
    ck_assert_dat_ok(p->evd_free_func(evd));
    ck_assert_ptr_eq(*(DAT_PROVIDER **)pz, p);
    ck_assert_uint_eq(((struct sd_handle *)pz)->type, SD_HTYPE_DEAD);
    ck_assert_dat_err(p->pz_free_func(pz), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_PZ);
    ck_assert_dat_err(p->pz_query_func(pz, DAT_PZ_FIELD_ALL, &(DAT_PZ_PARAM){0}), DAT_INVALID_HANDLE,
                      DAT_INVALID_HANDLE_PZ);
    ck_assert_dat_err(p->evd_free_func(evd), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_REQUEST);
    DAT_HANDLE_TYPE t;
    ck_assert_dat_err(p->get_handle_type_func(pz, &t), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE1);

    ck_assert_dat_ok(p->ia_close_func(ia, DAT_CLOSE_GRACEFUL_FLAG));
    ck_assert_dat_err(p->ia_close_func(ia, DAT_CLOSE_ABRUPT_FLAG), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);
    ck_assert_dat_err(p->ia_query_func(ia, NULL, 0, NULL, 0, NULL), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);
    ck_assert_dat_err(p->evd_query_func(async, DAT_EVD_FIELD_ALL, &(DAT_EVD_PARAM){0}), DAT_INVALID_HANDLE,
                      DAT_INVALID_HANDLE_EVD_REQUEST);
    ck_assert_uint_eq(sd_handle_live_count(), 0);
}
END_TEST

START_TEST(context_and_handle_type)
{
    DAT_PROVIDER *p = fx_provider("t-ctx", "lo", DAT_FALSE);
    DAT_EVD_HANDLE async = DAT_HANDLE_NULL;
    DAT_IA_HANDLE ia = fx_open(p, &async);
    DAT_PZ_HANDLE pz;
    DAT_EVD_HANDLE evd;
    ck_assert_dat_ok(p->pz_create_func(ia, &pz));
    ck_assert_dat_ok(p->evd_create_func(ia, 4, DAT_HANDLE_NULL, DAT_EVD_SOFTWARE_FLAG, &evd));
    struct {
        DAT_HANDLE h;
        DAT_HANDLE_TYPE t;
    } cases[] = {{ia, DAT_HANDLE_TYPE_IA}, {pz, DAT_HANDLE_TYPE_PZ}, {evd, DAT_HANDLE_TYPE_EVD},
                 {async, DAT_HANDLE_TYPE_EVD}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        DAT_HANDLE_TYPE t = (DAT_HANDLE_TYPE)-1;
        DAT_CONTEXT c = {.as_64 = 42}, got;
        ck_assert_dat_ok(p->get_handle_type_func(cases[i].h, &t));
        ck_assert_int_eq(t, cases[i].t);
        ck_assert_dat_ok(p->get_consumer_context_func(cases[i].h, &got));
        ck_assert_uint_eq(got.as_64, 0); /* NULL by default (L2555) */
        c.as_64 = 0x1000 + i;
        ck_assert_dat_ok(p->set_consumer_context_func(cases[i].h, c));
        ck_assert_dat_ok(p->get_consumer_context_func(cases[i].h, &got));
        ck_assert_uint_eq(got.as_64, 0x1000 + i);
        ck_assert_dat_err(p->get_consumer_context_func(cases[i].h, NULL), DAT_INVALID_PARAMETER,
                          DAT_INVALID_ARG2);
        ck_assert_dat_err(p->get_handle_type_func(cases[i].h, NULL), DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    }
    ck_assert_dat_ok(p->ia_close_func(ia, DAT_CLOSE_ABRUPT_FLAG));
}
END_TEST

START_TEST(pz_limit_enforced_and_set_survives_churn)
{
    DAT_PROVIDER *p = fx_provider("t-limit", "lo", DAT_FALSE);
    DAT_IA_HANDLE ia = fx_open(p, NULL);
    DAT_IA_ATTR attr;
    ck_assert_dat_ok(p->ia_query_func(ia, NULL, DAT_IA_FIELD_ALL, &attr, 0, NULL));
    int n = attr.max_pzs;
    ck_assert_int_eq(n, SD_MAX_PZS);
    DAT_PZ_HANDLE *pz = calloc((size_t)n, sizeof *pz);
    for (int i = 0; i < n; i++)
        ck_assert_dat_ok(p->pz_create_func(ia, &pz[i]));
    DAT_PZ_HANDLE extra;
    ck_assert_dat_err(p->pz_create_func(ia, &extra), DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_PROTECTION_DOMAIN);
    /* Free in a scrambled order; every survivor must still validate. */
    for (int i = 0; i < n; i += 2)
        ck_assert_dat_ok(p->pz_free_func(pz[(i * 7919) % n]));
    for (int i = 0; i < n; i++) {
        int freed = 0;
        for (int k = 0; k < n; k += 2)
            if ((k * 7919) % n == i) {
                freed = 1;
                break;
            }
        DAT_PZ_PARAM pp;
        DAT_RETURN rc = p->pz_query_func(pz[i], DAT_PZ_FIELD_ALL, &pp);
        if (freed)
            ck_assert_dat_err(rc, DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_PZ);
        else
            ck_assert_dat_ok(rc);
    }
    ck_assert_dat_ok(p->pz_create_func(ia, &extra));
    ck_assert_dat_ok(p->ia_close_func(ia, DAT_CLOSE_ABRUPT_FLAG));
    for (int i = 0; i < n; i++)
        ck_assert_dat_err(p->pz_free_func(pz[i]), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_PZ);
    free(pz);
    ck_assert_uint_eq(sd_handle_live_count(), 0);
}
END_TEST

/* Threads validate and query one PZ while it is freed; frees race. Nobody
 * may crash, each free succeeds exactly once. */
struct race {
    DAT_PROVIDER *p;
    DAT_PZ_HANDLE pz;
    atomic_int go, frees_ok, queries_ok;
};

static void *racer(void *arg)
{
    struct race *r = arg;
    while (!atomic_load(&r->go))
        ;
    for (int i = 0; i < 2000; i++) {
        DAT_PZ_PARAM pp;
        if (r->p->pz_query_func(r->pz, DAT_PZ_FIELD_ALL, &pp) == DAT_SUCCESS)
            atomic_fetch_add(&r->queries_ok, 1);
        DAT_CONTEXT c = {.as_64 = (DAT_UINT64)i};
        (void)r->p->set_consumer_context_func(r->pz, c);
    }
    if (r->p->pz_free_func(r->pz) == DAT_SUCCESS)
        atomic_fetch_add(&r->frees_ok, 1);
    return NULL;
}

START_TEST(concurrent_validate_and_free)
{
    DAT_PROVIDER *p = fx_provider("t-race", "lo", DAT_FALSE);
    DAT_IA_HANDLE ia = fx_open(p, NULL);
    for (int round = 0; round < 20; round++) {
        struct race r = {.p = p};
        ck_assert_dat_ok(p->pz_create_func(ia, &r.pz));
        pthread_t t[4];
        for (int i = 0; i < 4; i++)
            pthread_create(&t[i], NULL, racer, &r);
        atomic_store(&r.go, 1);
        for (int i = 0; i < 4; i++)
            pthread_join(t[i], NULL);
        ck_assert_int_eq(atomic_load(&r.frees_ok), 1);
        ck_assert_dat_err(p->pz_free_func(r.pz), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_PZ);
    }
    ck_assert_dat_ok(p->ia_close_func(ia, DAT_CLOSE_GRACEFUL_FLAG));
    ck_assert_uint_eq(sd_handle_live_count(), 0);
}
END_TEST

/* A reference held across a destroy keeps the memory valid and live-tagged
 * as dead; the last put releases it. */
START_TEST(reference_outlives_destroy)
{
    DAT_PROVIDER *p = fx_provider("t-ref", "lo", DAT_FALSE);
    DAT_IA_HANDLE ia = fx_open(p, NULL);
    DAT_PZ_HANDLE pz;
    ck_assert_dat_ok(p->pz_create_func(ia, &pz));
    struct sd_handle *h;
    ck_assert_dat_ok(sd_handle_get(pz, DAT_HANDLE_TYPE_PZ, DAT_INVALID_HANDLE_PZ, &h));
    ck_assert_dat_ok(p->pz_free_func(pz));
    ck_assert(!sd_handle_alive(h));
    ck_assert_uint_eq(h->type, DAT_HANDLE_TYPE_PZ); /* not yet poisoned */
    ck_assert_dat_err(sd_handle_get(pz, DAT_HANDLE_TYPE_PZ, DAT_INVALID_HANDLE_PZ, &h), DAT_INVALID_HANDLE,
                      DAT_INVALID_HANDLE_PZ);
    ck_assert_ptr_null(h);
    h = (struct sd_handle *)pz;
    sd_handle_put(h);
    ck_assert_uint_eq(h->type, SD_HTYPE_DEAD);
    ck_assert_dat_ok(p->ia_close_func(ia, DAT_CLOSE_GRACEFUL_FLAG));
}
END_TEST

/* sd_handle_get remembers each thread's last handles (handle.c,
 * lookup_cached). A remembered handle must answer exactly as the locked
 * look-up: the wrong type is refused, and a handle freed by any thread is
 * stale at once, whatever else was freed meanwhile. */
static void *free_pz(void *arg)
{
    void **a = arg;
    DAT_PROVIDER *p = a[0];
    return (void *)(uintptr_t)p->pz_free_func(a[1]);
}

START_TEST(cached_lookup_sees_every_free)
{
    DAT_PROVIDER *p = fx_provider("t-cache", "lo", DAT_FALSE);
    DAT_IA_HANDLE ia = fx_open(p, NULL);
    DAT_PZ_HANDLE a, b;
    DAT_PZ_PARAM pp;
    ck_assert_dat_ok(p->pz_create_func(ia, &a));
    ck_assert_dat_ok(p->pz_create_func(ia, &b));
    for (int i = 0; i < 3; i++) /* the first look-up remembers, the others hit */
        ck_assert_dat_ok(p->pz_query_func(a, DAT_PZ_FIELD_ALL, &pp));
    ck_assert_dat_err(p->ep_free_func(a), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP);
    ck_assert_dat_err(p->evd_free_func(a), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_REQUEST);

    /* References taken through the cache count like any other. */
    struct sd_handle *h1, *h2;
    ck_assert_dat_ok(sd_handle_get(a, DAT_HANDLE_TYPE_PZ, DAT_INVALID_HANDLE_PZ, &h1));
    ck_assert_dat_ok(sd_handle_get(a, SD_HTYPE_ANY, DAT_INVALID_HANDLE_PZ, &h2));
    ck_assert_uint_eq(atomic_load(&h1->refs), 3);
    sd_handle_put(h1);
    sd_handle_put(h2);

    /* Another handle's free: a still answers. */
    ck_assert_dat_ok(p->pz_free_func(b));
    ck_assert_dat_ok(p->pz_query_func(a, DAT_PZ_FIELD_ALL, &pp));
    ck_assert_dat_err(p->pz_query_func(b, DAT_PZ_FIELD_ALL, &pp), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_PZ);

    /* Freed by another thread while remembered here: stale at once. */
    ck_assert_dat_ok(p->pz_query_func(a, DAT_PZ_FIELD_ALL, &pp));
    void *arg[2] = {p, a};
    pthread_t t;
    void *res;
    pthread_create(&t, NULL, free_pz, arg);
    pthread_join(t, &res);
    ck_assert_int_eq((DAT_RETURN)(uintptr_t)res, DAT_SUCCESS);
    ck_assert_dat_err(p->pz_query_func(a, DAT_PZ_FIELD_ALL, &pp), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_PZ);
    ck_assert_dat_err(p->pz_free_func(a), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_PZ);
    ck_assert_dat_ok(p->ia_close_func(ia, DAT_CLOSE_GRACEFUL_FLAG));
    ck_assert_uint_eq(sd_handle_live_count(), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("provider-handle");
    TCase *tc = tcase_create("handle");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, table_has_81_filled_slots);
    tcase_add_test(tc, records_get_distinct_ia_open);
    tcase_add_test(tc, garbage_handles_every_family);
    tcase_add_test(tc, stale_and_wrong_type_handles);
    tcase_add_test(tc, context_and_handle_type);
    tcase_add_test(tc, pz_limit_enforced_and_set_survives_churn);
    tcase_add_test(tc, concurrent_validate_and_free);
    tcase_add_test(tc, reference_outlives_destroy);
    tcase_add_test(tc, cached_lookup_sees_every_free);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
