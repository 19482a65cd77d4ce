/* emu/evlib: libevent loaded privately, so no host symbol can capture it
 * and none of its symbols leak into the program's global scope. */
#include "emu/engine.h"
#include "emu/evlib.h"
#include "emu/sanitizer.h"

#include <check.h>
#include <dlfcn.h>
#include <stdlib.h>

START_TEST(table_complete)
{
    const struct emu_evlib *l = emu_evlib_get();
    ck_assert_ptr_nonnull(l);
    const void *const *slot = (const void *const *)(const void *)l;
    for (size_t i = 0; i < sizeof *l / sizeof(void *); i++)
        ck_assert_msg(slot[i] != NULL, "slot %zu unresolved", i);
    ck_assert_ptr_eq(emu_evlib_get(), l); /* loaded once */
}
END_TEST

START_TEST(not_in_global_scope)
{
    ck_assert_ptr_nonnull(emu_evlib_get());
    /* RTLD_LOCAL: the program (and anything it dlopens later) cannot bind
     * to our libevent by accident either. */
    ck_assert_ptr_null(dlsym(RTLD_DEFAULT, "event_base_new_with_config"));
    ck_assert_ptr_null(dlsym(RTLD_DEFAULT, "evthread_use_pthreads"));
}
END_TEST

START_TEST(deepbind_outside_sanitizers)
{
#if SD_SANITIZER_ANY
    ck_assert(!emu_evlib_deepbind());
#else
    ck_assert(emu_evlib_deepbind());
#endif
}
END_TEST

START_TEST(engine_runs_on_private_libevent)
{
    struct emu_engine *e = NULL;
    ck_assert_int_eq(emu_engine_create("t-evlib", &e), 0);
    ck_assert_ptr_nonnull(emu_engine_base(e));
    ck_assert_int_eq(emu_engine_destroy(e), 0);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("emu_evlib");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, table_complete);
    tcase_add_test(tc, not_in_global_scope);
    tcase_add_test(tc, deepbind_outside_sanitizers);
    tcase_add_test(tc, engine_runs_on_private_libevent);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
