/*
 * The registry end to end through a real dlopen()ed provider: the fixture
 * test/fixtures/datfix_provider.c ($(BUILD)/test/fixtures/libdatfix.so).
 *
 * Each test writes its own dat.conf, points DAT_OVERRIDE at it and calls
 * dr_registry_reinit() (Check forks every test, so nothing leaks between
 * them). The constructor path itself is covered by re-executing this program
 * with DAT_OVERRIDE in its environment (--child-* modes in main).
 */
#include "lib/dat/dr.h"
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test/lib/dat_util.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <sys/wait.h>

enum { ST_INIT, ST_FINI, ST_OPEN, ST_CLOSE, ST_EXTOP, ST_ADD_RC, ST_QUERY, ST_REMOVE_RC,
       ST_N };
int datfix_stats[ST_N]; /* written by the fixture provider */

static const char *conf_path;

static void use_conf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void use_conf(const char *fmt, ...)
{
    char text[8192];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    conf_path = tu_write_file(text);
    setenv("DAT_OVERRIDE", conf_path, 1);
    ck_assert_int_eq(dr_registry_reinit(), 0);
    memset(datfix_stats, 0, sizeof datfix_stats);
}

static void teardown(void)
{
    if (conf_path)
        unlink(conf_path);
}

static const DAT_PROVIDER_INFO *key(const char *name, DAT_BOOLEAN ts)
{
    static DAT_PROVIDER_INFO k;

    memset(&k, 0, sizeof k);
    snprintf(k.ia_name, sizeof k.ia_name, "%s", name);
    k.dapl_version_major = 2;
    k.dapl_version_minor = 0;
    k.is_thread_safe = ts;
    return &k;
}

#define FIX(name, params) name " u2.0 nonthreadsafe default %s fix.1.0 \"" params "\" \"\"\n"

static DAT_RETURN open_ia(const char *name, DAT_IA_HANDLE *ia)
{
    DAT_EVD_HANDLE evd = DAT_HANDLE_NULL;

    return dat_ia_open((DAT_NAME_PTR)(uintptr_t)name, 8, &evd, ia);
}

START_TEST(open_query_close)
{
    DAT_IA_HANDLE ia = NULL, raw, back;
    DAT_IA_ATTR attr;
    DAT_PROVIDER_ATTR pattr;
    DAT_HANDLE_TYPE type;
    DAT_PZ_HANDLE pz;

    use_conf(FIX("fix", ""), tu_fixture_so());
    ck_assert(!dr_sr_is_loaded(key("fix", DAT_FALSE)));
    ck_assert_int_eq(open_ia("fix", &ia), DAT_SUCCESS);
    ck_assert_uint_eq((uintptr_t)ia, 1);
    ck_assert_int_eq(datfix_stats[ST_INIT], 1);
    ck_assert_int_eq(datfix_stats[ST_ADD_RC], 0);
    ck_assert_int_eq(datfix_stats[ST_OPEN], 1);
    /* the registry's own query right after open */
    ck_assert_int_eq(datfix_stats[ST_QUERY], 1);
    ck_assert_int_eq(dr_sr_refcount(key("fix", DAT_FALSE)), 1);

    ck_assert_int_eq(dat_ia_query(ia, NULL, DAT_IA_FIELD_ALL, &attr, DAT_PROVIDER_FIELD_ALL,
                                  &pattr), DAT_SUCCESS);
    ck_assert_str_eq(attr.adapter_name, "datfix");
    ck_assert_uint_eq(pattr.dapl_version_major, 2);
    /* the provider receives its raw pointer, never the small integer */
    ck_assert_int_eq(dat_get_handle_type(ia, &type), DAT_SUCCESS);
    ck_assert_int_eq(type, DAT_HANDLE_TYPE_IA);
    ck_assert_uint_eq(dat_pz_create(ia, &pz), 0xBFFF0000);
    raw = dr_ia_lookup(ia);
    ck_assert_ptr_nonnull(raw);
    ck_assert_int_eq(dats_get_ia_handle(raw, &back), DAT_SUCCESS);
    ck_assert_ptr_eq(back, ia);

    ck_assert_int_eq(dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS);
    ck_assert_int_eq(datfix_stats[ST_CLOSE], 1);
    ck_assert_int_eq(datfix_stats[ST_FINI], 1);
    ck_assert_int_eq(datfix_stats[ST_REMOVE_RC], 0);
    ck_assert(!dr_sr_is_loaded(key("fix", DAT_FALSE)));
    ck_assert_int_eq(dr_dyn_count(), 0);
    ck_assert_uint_eq(dat_ia_query(ia, NULL, 0, NULL, 0, NULL), 0x8005000B);
    ck_assert_uint_eq(dat_ia_close(ia, 0), 0x8005000B);
}
END_TEST

START_TEST(two_ias_share_a_load)
{
    DAT_IA_HANDLE a, b;

    use_conf(FIX("fix", ""), tu_fixture_so());
    ck_assert_int_eq(open_ia("fix", &a), DAT_SUCCESS);
    ck_assert_int_eq(open_ia("fix", &b), DAT_SUCCESS);
    ck_assert_uint_eq((uintptr_t)a, 1);
    ck_assert_uint_eq((uintptr_t)b, 2);
    ck_assert_int_eq(datfix_stats[ST_INIT], 1);
    ck_assert_int_eq(dr_sr_refcount(key("fix", DAT_FALSE)), 2);
    ck_assert_int_eq(dat_ia_close(a, DAT_CLOSE_GRACEFUL_FLAG), DAT_SUCCESS);
    ck_assert_int_eq(datfix_stats[ST_FINI], 0);
    ck_assert(dr_sr_is_loaded(key("fix", DAT_FALSE)));
    ck_assert_int_eq(dr_sr_refcount(key("fix", DAT_FALSE)), 1);
    ck_assert_int_eq(dat_ia_close(b, DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS);
    ck_assert_int_eq(datfix_stats[ST_FINI], 1);
    ck_assert(!dr_sr_is_loaded(key("fix", DAT_FALSE)));
}
END_TEST

START_TEST(unload_and_reload)
{
    DAT_IA_HANDLE ia;

    use_conf(FIX("fix", ""), tu_fixture_so());
    for (int i = 1; i <= 3; i++) {
        ck_assert_int_eq(open_ia("fix", &ia), DAT_SUCCESS);
        ck_assert_uint_eq((uintptr_t)ia, 1);
        ck_assert_int_eq(datfix_stats[ST_INIT], i);
        ck_assert_int_eq(datfix_stats[ST_ADD_RC], 0); /* fini removed it last time */
        ck_assert_int_eq(dat_ia_close(ia, 0), DAT_SUCCESS);
        ck_assert_int_eq(datfix_stats[ST_FINI], i);
    }
}
END_TEST

START_TEST(two_names_one_library)
{
    DAT_IA_HANDLE a, b;
    DAT_IA_ATTR attr;

    use_conf(FIX("fixA", "") FIX("fixB", "ext"), tu_fixture_so(), tu_fixture_so());
    ck_assert_int_eq(open_ia("fixA", &a), DAT_SUCCESS);
    ck_assert_int_eq(dr_extensions_enabled, 0);
    ck_assert_int_eq(open_ia("fixB", &b), DAT_SUCCESS);
    ck_assert_int_eq(dr_extensions_enabled, 1);
    ck_assert_int_eq(datfix_stats[ST_INIT], 2);
    ck_assert_int_eq(dat_ia_query(b, NULL, DAT_IA_FIELD_ALL, &attr, 0, NULL), DAT_SUCCESS);
    ck_assert_int_eq(attr.extension_supported, DAT_EXTENSION_IB);
    ck_assert_int_eq(dat_ia_close(a, 0), DAT_SUCCESS);
    ck_assert(!dr_sr_is_loaded(key("fixA", DAT_FALSE)));
    ck_assert(dr_sr_is_loaded(key("fixB", DAT_FALSE)));
    ck_assert_int_eq(dat_ia_close(b, 0), DAT_SUCCESS);
    ck_assert_int_eq(datfix_stats[ST_FINI], 2);
}
END_TEST

static void *open_close_loop(void *arg)
{
    DAT_IA_HANDLE ia;

    (void)arg;
    for (int i = 0; i < 100; i++) {
        if (open_ia("fix", &ia) != DAT_SUCCESS)
            return (void *)1;
        if (dat_ia_query(ia, NULL, 0, NULL, 0, NULL) != DAT_SUCCESS)
            return (void *)2;
        if (dat_ia_close(ia, 0) != DAT_SUCCESS)
            return (void *)3;
    }
    return NULL;
}

START_TEST(concurrent_open_close)
{
    pthread_t t[4];
    void *rc;

    use_conf(FIX("fix", ""), tu_fixture_so());
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, open_close_loop, NULL), 0);
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], &rc);
        ck_assert_ptr_null(rc);
    }
    ck_assert(!dr_sr_is_loaded(key("fix", DAT_FALSE)));
    ck_assert_int_ge(datfix_stats[ST_INIT], 1);
    ck_assert_int_eq(datfix_stats[ST_INIT], datfix_stats[ST_FINI]);
    ck_assert_int_eq(dr_ia_live_count(), 0);
    ck_assert_int_eq(dr_dyn_count(), 0);
}
END_TEST

START_TEST(fallback_chain)
{
    DAT_IA_HANDLE ia;

    use_conf("fix u2.0 nonthreadsafe default /nonexistent/libnope.so fix.1.0 \"\" \"\"\n"
             "fix u2.0 nonthreadsafe default /etc/passwd fix.1.0 \"\" \"\"\n"
             FIX("fix", ""), tu_fixture_so());
    ck_assert_int_eq(open_ia("fix", &ia), DAT_SUCCESS);
    ck_assert_int_eq(datfix_stats[ST_INIT], 1);
    ck_assert_int_eq(dat_ia_close(ia, 0), DAT_SUCCESS);
    ck_assert_int_eq(datfix_stats[ST_FINI], 1);
}
END_TEST

START_TEST(fallback_all_fail)
{
    DAT_IA_HANDLE ia;

    use_conf("fix u2.0 nonthreadsafe default /nonexistent/a.so fix.1.0 \"\" \"\"\n"
             "fix u2.0 nonthreadsafe default /nonexistent/b.so fix.1.0 \"\" \"\"\n");
    ck_assert_uint_eq(open_ia("fix", &ia), 0x800A0064);
}
END_TEST

START_TEST(key_mismatch)
{
    DAT_IA_HANDLE ia;
    DAT_EVD_HANDLE evd = NULL;

    use_conf(FIX("fix", "")
             "kfix k2.0 nonthreadsafe default %s fix.1.0 \"\" \"\"\n"
             "ndfix u2.0 nonthreadsafe nondefault %s fix.1.0 \"\" \"\"\n",
             tu_fixture_so(), tu_fixture_so(), tu_fixture_so());
    ck_assert_uint_eq(dat_ia_openv("fix", 8, &evd, &ia, 2, 0, DAT_TRUE), 0x800A0064);
    ck_assert_uint_eq(dat_ia_openv("fix", 8, &evd, &ia, 1, 2, DAT_FALSE), 0x800A0064);
    ck_assert_uint_eq(dat_ia_openv("fix", 8, &evd, &ia, 2, 1, DAT_FALSE), 0x800A0064);
    ck_assert_uint_eq(open_ia("fiX", &ia), 0x800A0064);
    ck_assert_uint_eq(open_ia("nope", &ia), 0x800A0064);
    ck_assert_uint_eq(open_ia("kfix", &ia), 0x800A0064);
    ck_assert_uint_eq(open_ia("ndfix", &ia), 0x800A0064);
    ck_assert_int_eq(datfix_stats[ST_INIT], 0);
    ck_assert_int_eq(dr_ia_live_count(), 0);
}
END_TEST

START_TEST(open_bad_arguments)
{
    DAT_IA_HANDLE ia;
    char name[300];

    use_conf(FIX("fix", ""), tu_fixture_so());
    ck_assert_uint_eq(open_ia(NULL, &ia), 0x80060025);
    memset(name, 'a', 256);
    name[256] = '\0';
    ck_assert_uint_eq(open_ia(name, &ia), 0x80060025);
    ck_assert_uint_eq(open_ia("fix", NULL), 0x8005000B);
    ck_assert_int_eq(datfix_stats[ST_INIT], 0);
}
END_TEST

START_TEST(provider_does_not_register)
{
    DAT_IA_HANDLE ia;

    use_conf(FIX("fix", "noreg"), tu_fixture_so());
    ck_assert_uint_eq(open_ia("fix", &ia), 0x800A0064);
    ck_assert_int_eq(datfix_stats[ST_INIT], 1);
    /* the reference taken for the load is dropped again */
    ck_assert_int_eq(datfix_stats[ST_FINI], 1);
    ck_assert(!dr_sr_is_loaded(key("fix", DAT_FALSE)));
}
END_TEST

START_TEST(close_with_misreported_attrs)
{
    DAT_IA_HANDLE ia;

    use_conf(FIX("fix", "lie"), tu_fixture_so());
    ck_assert_int_eq(open_ia("fix", &ia), DAT_SUCCESS);
    /* as OFA: the release key comes from the provider's attributes */
    ck_assert_uint_eq(dat_ia_close(ia, 0), 0x800A0064);
    ck_assert_int_eq(datfix_stats[ST_CLOSE], 1);
    ck_assert_int_eq(datfix_stats[ST_FINI], 0);
    ck_assert(dr_sr_is_loaded(key("fix", DAT_FALSE)));
    ck_assert_uint_eq(dat_ia_query(ia, NULL, 0, NULL, 0, NULL), 0x8005000B);
}
END_TEST

START_TEST(extension_open_close_query)
{
    DAT_HANDLE q = NULL;
    DAT_IA_ATTR attr;
    DAT_PROVIDER_ATTR pattr;
    DAT_IA_HANDLE ia;

    use_conf(FIX("fix", "ext") "tfix u2.0 threadsafe default %s fix.1.0 \"\" \"\"\n",
             tu_fixture_so(), tu_fixture_so());
    ck_assert_int_eq(dr_extensions_enabled, 0);
    ck_assert_int_eq(dat_extension_op(NULL, DAT_OPEN_EXTENSION_BASE, "fix", &q,
                                      DAT_IA_FIELD_ALL, &attr, DAT_PROVIDER_FIELD_ALL, &pattr),
                     DAT_SUCCESS);
    ck_assert_ptr_nonnull(q);
    ck_assert_str_eq(attr.adapter_name, "datfix");
    ck_assert_uint_eq(pattr.dapl_version_major, 2);
    ck_assert_int_eq(dr_extensions_enabled, 1);
    ck_assert_int_eq(dr_sr_refcount(key("fix", DAT_FALSE)), 1);
    ck_assert_int_eq(dat_extension_op(q, DAT_CLOSE_EXTENSION_BASE), DAT_SUCCESS);
    ck_assert(!dr_sr_is_loaded(key("fix", DAT_FALSE)));
    ck_assert_int_eq(datfix_stats[ST_FINI], 1);

    /* key is hard-coded 2.0 nonthreadsafe; unknown names are not found */
    ck_assert_uint_eq(dat_extension_op(NULL, DAT_OPEN_EXTENSION_BASE, "tfix", &q, 0, NULL,
                                       0, NULL), 0x800A0064);
    ck_assert_uint_eq(dat_extension_op(NULL, DAT_OPEN_EXTENSION_BASE, "nope", &q, 0, NULL,
                                       0, NULL), 0x800A0064);
    ck_assert_uint_eq(dat_extension_op(NULL, DAT_OPEN_EXTENSION_BASE, NULL), 0x80060027);

    /* an ordinary op on an IA reaches slot 80 with its varargs */
    ck_assert_int_eq(open_ia("fix", &ia), DAT_SUCCESS);
    ck_assert_uint_eq(dat_extension_op(ia, 3, 0x77), 0x77);
    ck_assert_int_eq(dat_ia_close(ia, 0), DAT_SUCCESS);
}
END_TEST

START_TEST(extensions_stay_off)
{
    DAT_IA_HANDLE ia;

    use_conf(FIX("fix", ""), tu_fixture_so());
    ck_assert_int_eq(open_ia("fix", &ia), DAT_SUCCESS);
    ck_assert_int_eq(dr_extensions_enabled, 0);
    ck_assert_uint_eq(dat_extension_op(ia, 3, 0x77), 0xBFFF0000);
    ck_assert_int_eq(datfix_stats[ST_EXTOP], 0);
    ck_assert_int_eq(dat_ia_close(ia, 0), DAT_SUCCESS);
}
END_TEST

START_TEST(list_providers)
{
    DAT_PROVIDER_INFO infos[4], *list[4] = { &infos[0], &infos[1], &infos[2], &infos[3] };
    DAT_COUNT n = -1;

    use_conf("b u2.0 nonthreadsafe default /x/b.so p.1.0 \"\" \"\"\n"
             "a u2.0 threadsafe default /x/a.so p.1.0 \"\" \"\"\n"
             "b u2.0 nonthreadsafe default /x/b2.so p.1.0 \"\" \"\"\n"  /* fallback */
             "k k2.0 nonthreadsafe default /x/k.so p.1.0 \"\" \"\"\n"
             "n u2.0 nonthreadsafe nondefault /x/n.so p.1.0 \"\" \"\"\n"
             "broken line\n"
             "c u1.2 nonthreadsafe default /x/c.so p.1.0 \"\" \"\"\n");
    ck_assert_uint_eq(dat_registry_list_providers(0, &n, list), 0x80060025);
    ck_assert_int_eq(n, 3);
    n = -1;
    ck_assert_uint_eq(dat_registry_list_providers(2, &n, list), 0x80060027);
    ck_assert_int_eq(n, 3);
    ck_assert_uint_eq(dat_registry_list_providers(4, &n, NULL), 0x80060027);
    ck_assert_uint_eq(dat_registry_list_providers(4, NULL, list), 0x80060026);
    n = -1;
    ck_assert_int_eq(dat_registry_list_providers(4, &n, list), DAT_SUCCESS);
    ck_assert_int_eq(n, 3);
    ck_assert_str_eq(infos[0].ia_name, "b");
    ck_assert_int_eq(infos[0].is_thread_safe, DAT_FALSE);
    ck_assert_str_eq(infos[1].ia_name, "a");
    ck_assert_int_eq(infos[1].is_thread_safe, DAT_TRUE);
    ck_assert_str_eq(infos[2].ia_name, "c");
    ck_assert_uint_eq(infos[2].dapl_version_major, 1);
    ck_assert_uint_eq(infos[2].dapl_version_minor, 2);
}
END_TEST

START_TEST(providers_related)
{
    DAT_HA_RELATIONSHIP r = DAT_HA_EXTENSION_BASE;
    char prov[PATH_MAX + 32];

    /* The real provider: slot 79 answers for softdat IAs. */
    snprintf(prov, sizeof prov, "%s/lib/libdaplsoft.so.2", tu_build_dir());
    use_conf("sa u2.0 nonthreadsafe default %s p.1.0 \"127.0.0.1\" \"\"\n"
             "sa u2.0 threadsafe default %s p.1.0 \"127.0.0.1\" \"\"\n"
             "sb u2.0 nonthreadsafe default %s p.1.0 \"::1\" \"\"\n"
             "oa u2.0 nonthreadsafe default libdaplofa.so.2 p.1.0 \"\" \"\"\n"
             "ob u2.0 nonthreadsafe default libdaplofa.so.2 p.1.0 \"\" \"\"\n",
             prov, prov, prov);
    ck_assert_int_eq(dat_registry_providers_related("sa", "sa", &r), DAT_SUCCESS);
    ck_assert_int_eq(r, DAT_HA_TRUE);
    /* No IA open: no provider can be asked. */
    ck_assert_int_eq(dat_registry_providers_related("sa", "sb", &r), DAT_SUCCESS);
    ck_assert_int_eq(r, DAT_HA_UNKNOWN);
    ck_assert_int_eq(dat_registry_providers_related("oa", "ob", &r), DAT_SUCCESS);
    ck_assert_int_eq(r, DAT_HA_UNKNOWN);
    /* The provider answers about records it was registered for: with only
     * sa open it has not heard of sb yet. */
    DAT_IA_HANDLE ia = DAT_HANDLE_NULL, ib = DAT_HANDLE_NULL;
    DAT_EVD_HANDLE async = DAT_HANDLE_NULL, asyncb = DAT_HANDLE_NULL;
    ck_assert_int_eq(dat_ia_open("sa", 4, &async, &ia), DAT_SUCCESS);
    ck_assert_int_eq(dat_registry_providers_related("sa", "sb", &r), DAT_SUCCESS);
    ck_assert_int_eq(r, DAT_HA_UNKNOWN);
    /* Both open: each provider side says 127.0.0.1 and ::1 share "lo". */
    ck_assert_int_eq(dat_ia_open("sb", 4, &asyncb, &ib), DAT_SUCCESS);
    ck_assert_int_eq(dat_registry_providers_related("sa", "sb", &r), DAT_SUCCESS);
    ck_assert_int_eq(r, DAT_HA_TRUE);
    ck_assert_int_eq(dat_registry_providers_related("sb", "sa", &r), DAT_SUCCESS);
    ck_assert_int_eq(r, DAT_HA_TRUE);
    /* softdat does not know OFA's IAs: no answer from either side. */
    ck_assert_int_eq(dat_registry_providers_related("oa", "sa", &r), DAT_SUCCESS);
    ck_assert_int_eq(r, DAT_HA_UNKNOWN);
    ck_assert_int_eq(dat_ia_close(ib, DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS);
    ck_assert_int_eq(dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS);
    ck_assert_uint_eq(dat_registry_providers_related("nope", "sa", &r), 0x80060025);
    ck_assert_uint_eq(dat_registry_providers_related("sa", "nope", &r), 0x80060026);
    ck_assert_uint_eq(dat_registry_providers_related(NULL, "sa", &r), 0x80060025);
    ck_assert_uint_eq(dat_registry_providers_related("sa", NULL, &r), 0x80060026);
    ck_assert_uint_eq(dat_registry_providers_related("sa", "sa", NULL), 0x80060027);
}
END_TEST

START_TEST(add_remove_provider)
{
    DAT_PROVIDER p = { 0 };
    DAT_PROVIDER_INFO info;
    struct dr_dyn_ent ent;

    use_conf("# nothing\n");
    info = *key("dyn", DAT_FALSE);
    ck_assert_uint_eq(dat_registry_add_provider(NULL, &info), 0x80060025);
    ck_assert_uint_eq(dat_registry_add_provider(&p, NULL), 0x80060026);
    ck_assert_uint_eq(dat_registry_remove_provider(&p, &info), 0x800A0064);
    ck_assert_int_eq(dat_registry_add_provider(&p, &info), DAT_SUCCESS);
    ck_assert_uint_eq(dat_registry_add_provider(&p, &info), 0x80100000);
    /* a different thread-safety is a different key */
    info.is_thread_safe = DAT_TRUE;
    ck_assert_int_eq(dat_registry_add_provider(&p, &info), DAT_SUCCESS);
    ck_assert_int_eq(dr_dyn_count(), 2);
    ck_assert_int_eq(dr_dyn_lookup(&info, &ent), 0);
    ck_assert_ptr_eq(ent.provider, &p);
    ck_assert_uint_eq(dat_registry_remove_provider(NULL, &info), 0x80060025);
    ck_assert_uint_eq(dat_registry_remove_provider(&p, NULL), 0x80060026);
    ck_assert_int_eq(dat_registry_remove_provider(&p, &info), DAT_SUCCESS);
    ck_assert_uint_eq(dat_registry_remove_provider(&p, &info), 0x800A0064);
    ck_assert_int_eq(dr_dyn_count(), 1);
}
END_TEST

static void reinit_cb(void *arg)
{
    (void)arg;
    ck_assert_int_eq(dr_registry_reinit(), 0);
}

START_TEST(override_missing_file)
{
    DAT_IA_HANDLE ia;
    DAT_COUNT n = -1;
    DAT_PROVIDER_INFO *list[1];
    char *err;

    setenv("DAT_OVERRIDE", "/nonexistent/softdat-missing.conf", 1);
    unsetenv("DAT_DBG_TYPE");
    err = tu_capture_stderr(reinit_cb, NULL);
    ck_assert_msg(strstr(err, "DAT_OVERRIDE") && strstr(err, "/nonexistent/softdat-missing.conf"),
                  "stderr: %s", err);
    free(err);
    /* no fallback to /etc/dat.conf */
    ck_assert_str_eq(dr_sr_conf_path(), "/nonexistent/softdat-missing.conf");
    ck_assert_uint_eq(dat_registry_list_providers(1, &n, list), DAT_SUCCESS);
    ck_assert_int_eq(n, 0);
    ck_assert_uint_eq(open_ia("softdat-lo", &ia), 0x800A0064);
}
END_TEST

/* ------------------------------------------------ re-executed children */

static char self[PATH_MAX];

/* Runs this program again with env prefix and args; stdout and stderr go to
 * files whose contents are returned (malloc'd). Returns the exit status. */
static int run_child(const char *env, const char *args, char **out, char **err)
{
    char cmd[4 * PATH_MAX], o[] = "/tmp/softdat-out-XXXXXX", e[] = "/tmp/softdat-err-XXXXXX";
    int fo = mkstemp(o), fe = mkstemp(e), st;
    FILE *f;

    close(fo);
    close(fe);
    snprintf(cmd, sizeof cmd, "env %s '%s' %s >%s 2>%s", env, self, args, o, e);
    st = system(cmd);
    for (int i = 0; i < 2; i++) {
        char **dst = i ? err : out;
        long len;

        f = fopen(i ? e : o, "r");
        fseek(f, 0, SEEK_END);
        len = ftell(f);
        rewind(f);
        *dst = calloc(1, (size_t)len + 1);
        if (fread(*dst, 1, (size_t)len, f) != (size_t)len)
            ck_abort_msg("short read");
        fclose(f);
    }
    unlink(o);
    unlink(e);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 255;
}

START_TEST(constructor_reads_override)
{
    char env[2 * PATH_MAX], *out, *err;
    const char *path;

    {
        char text[PATH_MAX + 200];

        snprintf(text, sizeof text, "broken u2.0\n" FIX("fix", ""), tu_fixture_so());
        path = tu_write_file(text);
    }
    /* the child opens and closes "fix" with nothing but its environment */
    snprintf(env, sizeof env, "DAT_OVERRIDE=%s", path);
    ck_assert_int_eq(run_child(env, "--child-open fix", &out, &err), 0);
    ck_assert_str_eq(out, "");                        /* never stdout */
    ck_assert_msg(strstr(err, ":1: corrupt"), "stderr: %s", err);
    free(out);
    free(err);

    /* DAT_DBG_TYPE=0x4 shows static-registry detail, still on stderr */
    snprintf(env, sizeof env, "DAT_OVERRIDE=%s DAT_DBG_TYPE=0x4", path);
    ck_assert_int_eq(run_child(env, "--child-open fix", &out, &err), 0);
    ck_assert_str_eq(out, "");
    ck_assert_msg(strstr(err, "loaded ") && strstr(err, "unloaded "), "stderr: %s", err);
    free(out);
    free(err);

    /* DAT_DBG_DEST=0x2: syslog only, nothing on stderr */
    snprintf(env, sizeof env, "DAT_OVERRIDE=%s DAT_DBG_DEST=0x2", path);
    ck_assert_int_eq(run_child(env, "--child-open fix", &out, &err), 0);
    ck_assert_str_eq(out, "");
    ck_assert_str_eq(err, "");
    free(out);
    free(err);
    unlink(path);
}
END_TEST

START_TEST(bare_library_name)
{
    char env[3 * PATH_MAX], dir[PATH_MAX + 32], *out, *err;
    const char *path;

    snprintf(dir, sizeof dir, "%s/test/fixtures", tu_build_dir());
    path = tu_write_file("fix u2.0 nonthreadsafe default libdatfix.so fix.1.0 \"\" \"\"\n");
    snprintf(env, sizeof env, "DAT_OVERRIDE=%s LD_LIBRARY_PATH=%s", path, dir);
    ck_assert_int_eq(run_child(env, "--child-open fix", &out, &err), 0);
    free(out);
    free(err);
    snprintf(env, sizeof env, "DAT_OVERRIDE=%s LD_LIBRARY_PATH=/nonexistent", path);
    ck_assert_int_eq(run_child(env, "--child-open fix", &out, &err), 3);
    free(out);
    free(err);
    unlink(path);
}
END_TEST

START_TEST(softdat_provider_if_built)
{
    char conf[PATH_MAX + 16], env[2 * PATH_MAX], *out, *err;
    int rc;

    snprintf(conf, sizeof conf, "%s/dat.conf", tu_build_dir());
    if (access(conf, R_OK) != 0)
        return;
    snprintf(env, sizeof env, "DAT_OVERRIDE=%s", conf);
    ck_assert_int_eq(run_child(env, "--child-list softdat-lo", &out, &err), 0);
    free(out);
    free(err);
    /* The provider is being written alongside; when it opens, it must also
     * close cleanly and unload (exit 4 would mean a failed close). */
    rc = run_child(env, "--child-open softdat-lo", &out, &err);
    fprintf(stderr, "softdat-lo open/close through the registry: exit %d %s\n", rc, err);
    ck_assert_int_ne(rc, 4);
    free(out);
    free(err);
}
END_TEST

/* Exit codes: 0 ok, 3 open failed, 4 close failed / still loaded, 5 usage. */
static int child_main(int argc, char **argv)
{
    DAT_IA_HANDLE ia;
    DAT_EVD_HANDLE evd = NULL;

    if (argc == 3 && strcmp(argv[1], "--child-open") == 0) {
        if (dat_ia_open(argv[2], 8, &evd, &ia) != DAT_SUCCESS)
            return 3;
        if (dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG) != DAT_SUCCESS ||
            dr_sr_is_loaded(key(argv[2], DAT_FALSE)))
            return 4;
        return 0;
    }
    if (argc == 3 && strcmp(argv[1], "--child-list") == 0) {
        DAT_PROVIDER_INFO infos[32], *list[32];
        DAT_COUNT n;

        for (int i = 0; i < 32; i++)
            list[i] = &infos[i];
        if (dat_registry_list_providers(32, &n, list) != DAT_SUCCESS)
            return 3;
        for (int i = 0; i < n; i++)
            if (strcmp(infos[i].ia_name, argv[2]) == 0)
                return 0;
        return 4;
    }
    return 5;
}

static Suite *suite(void)
{
    Suite *s = suite_create("dat_registry");
    TCase *tc = tcase_create("registry");
    TCase *tx = tcase_create("process");

    tcase_add_checked_fixture(tc, NULL, teardown);
    tcase_add_test(tc, open_query_close);
    tcase_add_test(tc, two_ias_share_a_load);
    tcase_add_test(tc, unload_and_reload);
    tcase_add_test(tc, two_names_one_library);
    tcase_add_test(tc, concurrent_open_close);
    tcase_add_test(tc, fallback_chain);
    tcase_add_test(tc, fallback_all_fail);
    tcase_add_test(tc, key_mismatch);
    tcase_add_test(tc, open_bad_arguments);
    tcase_add_test(tc, provider_does_not_register);
    tcase_add_test(tc, close_with_misreported_attrs);
    tcase_add_test(tc, extension_open_close_query);
    tcase_add_test(tc, extensions_stay_off);
    tcase_add_test(tc, list_providers);
    tcase_add_test(tc, providers_related);
    tcase_add_test(tc, add_remove_provider);
    tcase_add_test(tc, override_missing_file);
    suite_add_tcase(s, tc);
    tcase_add_test(tx, constructor_reads_override);
    tcase_add_test(tx, bare_library_name);
    tcase_add_test(tx, softdat_provider_if_built);
    tcase_set_timeout(tx, 60);
    suite_add_tcase(s, tx);
    return s;
}

int main(int argc, char **argv)
{
    ssize_t n;

    if (argc > 1)
        return child_main(argc, argv);
    n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0)
        return EXIT_FAILURE;
    self[n] = '\0';
    return tu_run(suite());
}
