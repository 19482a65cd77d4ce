/*
 * Dispatch of every dat_* call: the NULL-handle code, the provider slot it
 * reaches, IA handle translation, and the IA handle table itself. Uses an
 * in-process fake provider whose slot n returns 0x1000 + n.
 */
#include "lib/dat/dr.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test/lib/dat_util.h"

#include <pthread.h>
#include <stdint.h>

#define NSLOTS 81
#define MARK(n) ((DAT_RETURN)(0x1000u + (n)))

#define STUB(n) static DAT_RETURN stub_##n(void) { return MARK(n); }
#define STUB10(d) STUB(d##0) STUB(d##1) STUB(d##2) STUB(d##3) STUB(d##4) \
                  STUB(d##5) STUB(d##6) STUB(d##7) STUB(d##8) STUB(d##9)
STUB(2) STUB(3) STUB(4) STUB(5) STUB(6) STUB(7) STUB(8) STUB(9)
STUB10(1) STUB10(2) STUB10(3) STUB10(4) STUB10(5) STUB10(6) STUB10(7) STUB(80)

#define P10(d) stub_##d##0, stub_##d##1, stub_##d##2, stub_##d##3, stub_##d##4, \
               stub_##d##5, stub_##d##6, stub_##d##7, stub_##d##8, stub_##d##9
static DAT_RETURN (*const stubs[NSLOTS])(void) = {
    NULL, NULL, stub_2, stub_3, stub_4, stub_5, stub_6, stub_7, stub_8, stub_9,
    P10(1), P10(2), P10(3), P10(4), P10(5), P10(6), P10(7), stub_80,
};

static DAT_PROVIDER fake_prov;
static struct { DAT_PROVIDER *p; int pad; } fake_obj = { &fake_prov, 0 },
                                            fake_ia = { &fake_prov, 1 };

static void setup(void)
{
    void (**slot)(void) = (void (**)(void))&fake_prov.ia_open_func;

    _Static_assert(sizeof(DAT_PROVIDER) == 8 * NSLOTS, "81-slot DAT_PROVIDER");
    for (int i = 2; i < NSLOTS; i++)
        slot[i - 2] = (void (*)(void))stubs[i];
    fake_prov.device_name = "fake";
    dr_ia_clear();
}

/* ------------------------------------------------------------ call table */

static DAT_OS_WAIT_PROXY_AGENT agent;
static DAT_REGION_DESCRIPTION region;
static DAT_DTO_COOKIE cookie;
static DAT_RMR_COOKIE rcookie;
static DAT_CONTEXT ctx;

#define CALL(fn, ...) static DAT_RETURN c_##fn(DAT_HANDLE h) { return dat_##fn(h, __VA_ARGS__); }
#define CALL0(fn) static DAT_RETURN c_##fn(DAT_HANDLE h) { return dat_##fn(h); }

CALL(ia_query, NULL, 0, NULL, 0, NULL)
CALL(cno_create, agent, NULL)
CALL(cno_modify_agent, agent)
CALL(cno_query, 0, NULL)
CALL0(cno_free)
CALL(cno_wait, 0, NULL)
CALL(cno_fd_create, NULL, NULL)
CALL(cno_trigger, NULL)
CALL(cr_query, 0, NULL)
CALL(cr_accept, NULL, 0, NULL)
CALL(cr_reject, 0, NULL)
CALL(cr_handoff, 0)
CALL(evd_create, 0, NULL, 0, NULL)
CALL(evd_query, 0, NULL)
CALL(evd_modify_cno, NULL)
CALL0(evd_enable)
CALL0(evd_disable)
CALL(evd_wait, 0, 0, NULL, NULL)
CALL(evd_resize, 0)
CALL(evd_post_se, NULL)
CALL(evd_dequeue, NULL)
CALL0(evd_free)
CALL0(evd_set_unwaitable)
CALL0(evd_clear_unwaitable)
CALL(ep_create, NULL, NULL, NULL, NULL, NULL, NULL)
CALL(ep_query, 0, NULL)
CALL(ep_modify, 0, NULL)
CALL(ep_connect, NULL, 0, 0, 0, NULL, 0, 0)
CALL(ep_dup_connect, NULL, 0, 0, NULL, 0)
CALL(ep_disconnect, 0)
CALL(ep_post_send, 0, NULL, cookie, 0)
CALL(ep_post_recv, 0, NULL, cookie, 0)
CALL(ep_post_rdma_read, 0, NULL, cookie, NULL, 0)
CALL(ep_post_rdma_write, 0, NULL, cookie, NULL, 0)
CALL(ep_get_status, NULL, NULL, NULL)
CALL0(ep_free)
CALL(lmr_create, 0, region, 0, NULL, 0, 0, NULL, NULL, NULL, NULL, NULL)
CALL(lmr_query, 0, NULL)
CALL0(lmr_free)
CALL(rmr_create, NULL)
CALL(rmr_query, 0, NULL)
CALL(rmr_bind, NULL, NULL, 0, 0, NULL, rcookie, 0, NULL)
CALL0(rmr_free)
CALL(psp_create, 0, NULL, 0, NULL)
CALL(psp_query, 0, NULL)
CALL0(psp_free)
CALL(rsp_create, 0, NULL, NULL, NULL)
CALL(rsp_query, 0, NULL)
CALL0(rsp_free)
CALL(pz_create, NULL)
CALL(pz_query, 0, NULL)
CALL0(pz_free)
CALL(psp_create_any, NULL, NULL, 0, NULL)
CALL0(ep_reset)
CALL(lmr_sync_rdma_read, NULL, 0)
CALL(lmr_sync_rdma_write, NULL, 0)
CALL(ep_create_with_srq, NULL, NULL, NULL, NULL, NULL, NULL, NULL)
CALL(ep_recv_query, NULL, NULL)
CALL(ep_set_watermark, 0, 0)
CALL(srq_create, NULL, NULL, NULL)
CALL0(srq_free)
CALL(srq_post_recv, 0, NULL, cookie)
CALL(srq_query, 0, NULL)
CALL(srq_resize, 0)
CALL(srq_set_lw, 0)
CALL(csp_create, NULL, NULL, NULL, NULL)
CALL(csp_query, 0, NULL)
CALL0(csp_free)
CALL(ep_common_connect, NULL, 0, 0, NULL)
CALL(rmr_create_for_ep, NULL)
CALL(ep_post_send_with_invalidate, 0, NULL, cookie, 0, DAT_FALSE, 0)
CALL(ep_post_rdma_read_to_rmr, NULL, cookie, NULL, 0)

#define IA 0xB /* marks "takes an IA handle" */
static const struct call {
    const char *name;
    DAT_RETURN (*fn)(DAT_HANDLE);
    int slot;
    DAT_UINT32 null_sub;
} calls[] = {
#define E(fn, slot, sub) { #fn, c_##fn, slot, sub }
    E(ia_query, 3, IA),
    E(cno_create, 8, IA), E(cno_modify_agent, 9, 0x13), E(cno_query, 10, 0x13),
    E(cno_free, 11, 0x13), E(cno_wait, 12, 0x13), E(cno_fd_create, 77, IA),
    E(cno_trigger, 78, 0x13),
    E(cr_query, 13, 0x12), E(cr_accept, 14, 0x12), E(cr_reject, 15, 0x12),
    E(cr_handoff, 16, 0x12),
    E(evd_create, 17, IA), E(evd_query, 18, 0x15), E(evd_modify_cno, 19, 0x15),
    E(evd_enable, 20, 0x15), E(evd_disable, 21, 0x15), E(evd_wait, 22, 0x15),
    E(evd_resize, 23, 0x15), E(evd_post_se, 24, 0x15), E(evd_dequeue, 25, 0x15),
    E(evd_free, 26, 0x15), E(evd_set_unwaitable, 57, 0x15),
    E(evd_clear_unwaitable, 58, 0x15),
    E(ep_create, 27, IA), E(ep_query, 28, 0xC), E(ep_modify, 29, 0xC),
    E(ep_connect, 30, 0xC), E(ep_dup_connect, 31, 0xC), E(ep_disconnect, 32, 0xC),
    E(ep_post_send, 33, 0xC), E(ep_post_recv, 34, 0xC), E(ep_post_rdma_read, 35, 0xC),
    E(ep_post_rdma_write, 36, 0xC), E(ep_get_status, 37, 0xC), E(ep_free, 38, 0xC),
    E(lmr_create, 39, IA), E(lmr_query, 40, 0xD), E(lmr_free, 41, 0xD),
    E(rmr_create, 42, 0xF), E(rmr_query, 43, 0xE), E(rmr_bind, 44, 0xE),
    E(rmr_free, 45, 0xE),
    E(psp_create, 46, IA), E(psp_query, 47, 0x10), E(psp_free, 48, 0x10),
    E(rsp_create, 49, IA), E(rsp_query, 50, 0x11), E(rsp_free, 51, 0x11),
    E(pz_create, 52, IA), E(pz_query, 53, 0xF), E(pz_free, 54, 0xF),
    E(psp_create_any, 55, IA), E(ep_reset, 56, 0xC),
    E(lmr_sync_rdma_read, 59, IA), E(lmr_sync_rdma_write, 60, IA),
    E(ep_create_with_srq, 61, IA), E(ep_recv_query, 62, 0xC),
    E(ep_set_watermark, 63, 0xC),
    E(srq_create, 64, IA), E(srq_free, 65, 0x19), E(srq_post_recv, 66, 0x19),
    E(srq_query, 67, 0x19), E(srq_resize, 68, 0x19), E(srq_set_lw, 69, 0x19),
    E(csp_create, 70, IA), E(csp_query, 71, 0x1A), E(csp_free, 72, 0x1A),
    E(ep_common_connect, 73, 0xC), E(rmr_create_for_ep, 74, 0xF),
    E(ep_post_send_with_invalidate, 75, 0xC), E(ep_post_rdma_read_to_rmr, 76, 0xC),
#undef E
};
#define NCALLS (int)(sizeof calls / sizeof *calls)

START_TEST(null_handle_codes)
{
    const struct call *c = &calls[_i];

    ck_assert_msg(c->fn(NULL) == (0x80050000u | c->null_sub),
                  "dat_%s(NULL) = 0x%08x", c->name, c->fn(NULL));
}
END_TEST

START_TEST(reaches_slot)
{
    const struct call *c = &calls[_i];
    DAT_IA_HANDLE small;

    if (c->null_sub == IA) {
        ck_assert_int_eq(dr_ia_insert(&fake_ia, &small), DAT_SUCCESS);
        ck_assert_msg(c->fn(small) == MARK(c->slot), "dat_%s(ia) = 0x%08x", c->name,
                      c->fn(small));
        /* a raw provider pointer or a dead small integer is not an IA */
        ck_assert_uint_eq(c->fn(&fake_ia), 0x8005000B);
        ck_assert_uint_eq(c->fn((DAT_HANDLE)(uintptr_t)77), 0x8005000B);
        ck_assert_int_eq(dr_ia_remove(small), DAT_SUCCESS);
        ck_assert_uint_eq(c->fn(small), 0x8005000B);
    } else {
        ck_assert_msg(c->fn(&fake_obj) == MARK(c->slot), "dat_%s(obj) = 0x%08x", c->name,
                      c->fn(&fake_obj));
    }
}
END_TEST

START_TEST(empty_slot_not_implemented)
{
    DAT_PROVIDER empty = { 0 };
    struct { DAT_PROVIDER *p; } obj = { &empty };

    ck_assert_uint_eq(dat_ep_free(&obj), 0xBFFF0000);
    ck_assert_uint_eq(dat_evd_wait(&obj, 0, 0, NULL, NULL), 0xBFFF0000);
}
END_TEST

START_TEST(generic_handle_calls)
{
    DAT_IA_HANDLE small;
    DAT_HANDLE_TYPE t;

    ck_assert_uint_eq(dat_set_consumer_context(NULL, ctx), 0x8005001B);
    ck_assert_uint_eq(dat_get_consumer_context(NULL, &ctx), 0x8005001B);
    ck_assert_uint_eq(dat_get_handle_type(NULL, &t), 0x8005001B);
    /* pass-through for object pointers */
    ck_assert_uint_eq(dat_set_consumer_context(&fake_obj, ctx), MARK(5));
    ck_assert_uint_eq(dat_get_consumer_context(&fake_obj, &ctx), MARK(6));
    ck_assert_uint_eq(dat_get_handle_type(&fake_obj, &t), MARK(7));
    /* live small integers are mapped, dead ones refused */
    ck_assert_int_eq(dr_ia_insert(&fake_ia, &small), DAT_SUCCESS);
    ck_assert_uint_eq(dat_get_handle_type(small, &t), MARK(7));
    ck_assert_uint_eq(dat_set_consumer_context(small, ctx), MARK(5));
    ck_assert_uint_eq(dat_get_consumer_context(small, &ctx), MARK(6));
    ck_assert_uint_eq(dat_get_handle_type((DAT_HANDLE)(uintptr_t)9, &t), 0x8005000B);
}
END_TEST

START_TEST(extension_op_gating)
{
    DAT_IA_HANDLE small;

    dr_extensions_enabled = 0;
    ck_assert_uint_eq(dat_extension_op(NULL, 2), 0x8005001B);
    /* no IA has reported extensions: refused without calling the provider */
    ck_assert_uint_eq(dat_extension_op(&fake_obj, 2), 0xBFFF0000);
    dr_extensions_enabled = 1;
    ck_assert_uint_eq(dat_extension_op(&fake_obj, 2), MARK(80));
    ck_assert_uint_eq(dat_extension_op(NULL, 2), 0x8005001B);
    ck_assert_int_eq(dr_ia_insert(&fake_ia, &small), DAT_SUCCESS);
    ck_assert_uint_eq(dat_extension_op(small, 2), MARK(80));
    ck_assert_uint_eq(dat_extension_op((DAT_HANDLE)(uintptr_t)5, 2), 0x8005000B);
    /* close query dispatches through the object's provider */
    ck_assert_uint_eq(dat_extension_op(NULL, DAT_CLOSE_EXTENSION_BASE), 0x8005001B);
}
END_TEST

START_TEST(ia_close_queries_first)
{
    DAT_IA_HANDLE small;

    ck_assert_uint_eq(dat_ia_close(NULL, 0), 0x8005000B);
    ck_assert_uint_eq(dat_ia_close(&fake_ia, 0), 0x8005000B);
    ck_assert_int_eq(dr_ia_insert(&fake_ia, &small), DAT_SUCCESS);
    /* the fake ia_query fails, so close stops there and the IA stays */
    ck_assert_uint_eq(dat_ia_close(small, 0), MARK(3));
    ck_assert_ptr_eq(dr_ia_lookup(small), &fake_ia);
}
END_TEST

/* ------------------------------------------------------------ IA table */

START_TEST(ia_small_integers)
{
    int objs[200];
    DAT_IA_HANDLE h[200], out;

    for (int i = 0; i < 200; i++) {
        ck_assert_int_eq(dr_ia_insert(&objs[i], &h[i]), DAT_SUCCESS);
        ck_assert_uint_eq((uintptr_t)h[i], (uintptr_t)i + 1);
    }
    ck_assert_int_eq(dr_ia_live_count(), 200);
    for (int i = 0; i < 200; i++) {
        ck_assert_ptr_eq(dr_ia_lookup(h[i]), &objs[i]);
        /* both directions */
        ck_assert_int_eq(dats_get_ia_handle(h[i], &out), DAT_SUCCESS);
        ck_assert_ptr_eq(out, &objs[i]);
        ck_assert_int_eq(dats_get_ia_handle(&objs[i], &out), DAT_SUCCESS);
        ck_assert_ptr_eq(out, h[i]);
    }
    /* freed numbers are reused, lowest first */
    ck_assert_int_eq(dr_ia_remove(h[1]), DAT_SUCCESS);
    ck_assert_int_eq(dr_ia_remove(h[1]), 0x8005000B);
    ck_assert_ptr_null(dr_ia_lookup(h[1]));
    ck_assert_uint_eq(dats_get_ia_handle(h[1], &out), 0x8005000B);
    ck_assert_uint_eq(dats_get_ia_handle(&objs[1], &out), 0x8005000B);
    ck_assert_int_eq(dr_ia_insert(&objs[1], &out), DAT_SUCCESS);
    ck_assert_uint_eq((uintptr_t)out, 2);
    /* bad arguments */
    ck_assert_uint_eq(dats_get_ia_handle(NULL, &out), 0x8005000B);
    ck_assert_uint_eq(dats_get_ia_handle(h[0], NULL), 0x80060026);
    ck_assert_uint_eq(dats_get_ia_handle((DAT_HANDLE)(uintptr_t)1000, &out), 0x8005000B);
    ck_assert_ptr_null(dr_ia_lookup((DAT_HANDLE)(uintptr_t)0));
}
END_TEST

static void *churn(void *arg)
{
    int objs[50];
    DAT_IA_HANDLE h[50], out;

    (void)arg;
    for (int round = 0; round < 200; round++) {
        for (int i = 0; i < 50; i++)
            if (dr_ia_insert(&objs[i], &h[i]) != DAT_SUCCESS)
                return (void *)1;
        for (int i = 0; i < 50; i++) {
            if (dats_get_ia_handle(h[i], &out) != DAT_SUCCESS || out != &objs[i])
                return (void *)2;
            if (dats_get_ia_handle(&objs[i], &out) != DAT_SUCCESS || out != h[i])
                return (void *)3;
        }
        for (int i = 0; i < 50; i++)
            if (dr_ia_remove(h[i]) != DAT_SUCCESS)
                return (void *)4;
    }
    return NULL;
}

START_TEST(ia_table_threads)
{
    pthread_t t[4];
    void *rc;

    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, churn, NULL), 0);
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], &rc);
        ck_assert_ptr_null(rc);
    }
    ck_assert_int_eq(dr_ia_live_count(), 0);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("dat_dispatch");
    TCase *tc = tcase_create("dispatch");
    TCase *ti = tcase_create("ia_table");

    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_add_loop_test(tc, null_handle_codes, 0, NCALLS);
    tcase_add_loop_test(tc, reaches_slot, 0, NCALLS);
    tcase_add_test(tc, empty_slot_not_implemented);
    tcase_add_test(tc, generic_handle_calls);
    tcase_add_test(tc, extension_op_gating);
    tcase_add_test(tc, ia_close_queries_first);
    suite_add_tcase(s, tc);
    tcase_add_checked_fixture(ti, setup, NULL);
    tcase_add_test(ti, ia_small_integers);
    tcase_add_test(ti, ia_table_threads);
    suite_add_tcase(s, ti);
    return s;
}

int main(void)
{
    return tu_run(suite());
}
