/* Return codes of dat_set_consumer_context, dat_get_consumer_context and
 * dat_get_handle_type (L2557-2661): INVALID_HANDLE for every kind of bad
 * generic handle (subtype DAT_INVALID_HANDLE1, as the OFA registry uses for
 * generic handles), INVALID_PARAMETER for a NULL out-pointer, success and
 * the right type for every object kind of this scope. */
#include <stdint.h>

#include "test/lib/prov_fixture.h"

static _Alignas(64) char junk[256];

START_TEST(bad_generic_handles)
{
    DAT_PROVIDER *p = fx_provider("t-rc-h", "lo", DAT_FALSE);
    DAT_IA_HANDLE ia = fx_open(p, NULL);
    DAT_PZ_HANDLE dead;
    ck_assert_dat_ok(p->pz_create_func(ia, &dead));
    ck_assert_dat_ok(p->pz_free_func(dead));
    DAT_HANDLE bad[] = {DAT_HANDLE_NULL, (DAT_HANDLE)junk, (DAT_HANDLE)(junk + 1), dead,
                        (DAT_HANDLE)DAT_EVD_ASYNC_EXISTS, (DAT_HANDLE)DAT_EVD_OUT_OF_SCOPE,
                        (DAT_HANDLE)(uintptr_t)3};
    DAT_CONTEXT ctx = {.as_64 = 7};
    DAT_HANDLE_TYPE type;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_dat_err(p->set_consumer_context_func(bad[i], ctx), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE1);
        ck_assert_dat_err(p->get_consumer_context_func(bad[i], &ctx), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE1);
        ck_assert_dat_err(p->get_handle_type_func(bad[i], &type), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE1);
    }
    ck_assert_dat_ok(p->ia_close_func(ia, DAT_CLOSE_ABRUPT_FLAG));
}
END_TEST

START_TEST(null_out_pointers)
{
    DAT_PROVIDER *p = fx_provider("t-rc-h", "lo", DAT_FALSE);
    DAT_IA_HANDLE ia = fx_open(p, NULL);
    ck_assert_dat_err(p->get_consumer_context_func(ia, NULL), DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    ck_assert_dat_err(p->get_handle_type_func(ia, NULL), DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    ck_assert_dat_ok(p->ia_close_func(ia, DAT_CLOSE_ABRUPT_FLAG));
}
END_TEST

START_TEST(every_object_kind)
{
    DAT_PROVIDER *p = fx_provider("t-rc-h", "lo", DAT_FALSE);
    DAT_EVD_HANDLE async = DAT_HANDLE_NULL; /* INOUT: NULL asks for a new async EVD */
    DAT_IA_HANDLE ia = fx_open(p, &async);
    DAT_PZ_HANDLE pz;
    DAT_CNO_HANDLE cno;
    DAT_EVD_HANDLE evd;
    DAT_LMR_HANDLE lmr;
    DAT_RMR_HANDLE rmr;
    static char buf[64];
    ck_assert_dat_ok(p->pz_create_func(ia, &pz));
    ck_assert_dat_ok(p->cno_create_func(ia, DAT_OS_WAIT_PROXY_AGENT_NULL, &cno));
    ck_assert_dat_ok(p->evd_create_func(ia, 4, cno, DAT_EVD_SOFTWARE_FLAG, &evd));
    ck_assert_dat_ok(p->lmr_create_func(ia, DAT_MEM_TYPE_VIRTUAL, (DAT_REGION_DESCRIPTION){.for_va = buf},
                                        sizeof buf, pz, DAT_MEM_PRIV_ALL_FLAG, DAT_VA_TYPE_VA, &lmr, NULL, NULL,
                                        NULL, NULL));
    ck_assert_dat_ok(p->rmr_create_func(pz, &rmr));
    struct {
        DAT_HANDLE h;
        DAT_HANDLE_TYPE t;
    } objs[] = {{ia, DAT_HANDLE_TYPE_IA},   {pz, DAT_HANDLE_TYPE_PZ},   {cno, DAT_HANDLE_TYPE_CNO},
                {evd, DAT_HANDLE_TYPE_EVD}, {async, DAT_HANDLE_TYPE_EVD}, {lmr, DAT_HANDLE_TYPE_LMR},
                {rmr, DAT_HANDLE_TYPE_RMR}};
    for (size_t i = 0; i < sizeof objs / sizeof objs[0]; i++) {
        DAT_HANDLE_TYPE t = (DAT_HANDLE_TYPE)-1;
        ck_assert_dat_ok(p->get_handle_type_func(objs[i].h, &t));
        ck_assert_int_eq(t, objs[i].t);
        DAT_CONTEXT c = {.as_64 = 1};
        ck_assert_dat_ok(p->get_consumer_context_func(objs[i].h, &c));
        ck_assert_uint_eq(c.as_64, 0); /* NULL by default (L2555) */
        /* Any value is accepted: the spec's INVALID_PARAMETER for a bad
         * context cannot arise (no check is made, L2578). */
        c.as_64 = 0xFFFFFFFFFFFFFFFFull - i;
        ck_assert_dat_ok(p->set_consumer_context_func(objs[i].h, c));
        DAT_CONTEXT back;
        ck_assert_dat_ok(p->get_consumer_context_func(objs[i].h, &back));
        ck_assert_uint_eq(back.as_64, c.as_64);
    }
    ck_assert_dat_ok(p->ia_close_func(ia, DAT_CLOSE_ABRUPT_FLAG));
    for (size_t i = 0; i < sizeof objs / sizeof objs[0]; i++) {
        DAT_HANDLE_TYPE t;
        ck_assert_dat_err(p->get_handle_type_func(objs[i].h, &t), DAT_INVALID_HANDLE, DAT_INVALID_HANDLE1);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("rc_handle");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, bad_generic_handles);
    tcase_add_test(tc, null_out_pointers);
    tcase_add_test(tc, every_object_kind);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int nf = srunner_ntests_failed(sr);
    srunner_free(sr);
    return nf == 0 ? 0 : 1;
}
