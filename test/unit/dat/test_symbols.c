/*
 * The exported interface of $(BUILD)/lib/libdat2.so.2: SONAME, every symbol
 * OFA's libdat2 exports (74) plus the DAT 2.0 calls OFA leaves out, all at
 * version DAT_2.0, and nothing else.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test/lib/dat_util.h"

#include <dlfcn.h>

static const char *const ofa_symbols[] = {
    "dat_cno_create", "dat_cno_free", "dat_cno_modify_agent", "dat_cno_query", "dat_cno_wait",
    "dat_cr_accept", "dat_cr_handoff", "dat_cr_query", "dat_cr_reject",
    "dat_ep_connect", "dat_ep_create", "dat_ep_create_with_srq", "dat_ep_disconnect",
    "dat_ep_dup_connect", "dat_ep_free", "dat_ep_get_status", "dat_ep_modify",
    "dat_ep_post_rdma_read", "dat_ep_post_rdma_write", "dat_ep_post_recv", "dat_ep_post_send",
    "dat_ep_query", "dat_ep_recv_query", "dat_ep_reset", "dat_ep_set_watermark",
    "dat_evd_clear_unwaitable", "dat_evd_create", "dat_evd_dequeue", "dat_evd_disable",
    "dat_evd_enable", "dat_evd_free", "dat_evd_modify_cno", "dat_evd_post_se", "dat_evd_query",
    "dat_evd_resize", "dat_evd_set_unwaitable", "dat_evd_wait",
    "dat_extension_op", "dat_get_consumer_context", "dat_get_handle_type",
    "dat_ia_close", "dat_ia_openv", "dat_ia_query",
    "dat_lmr_create", "dat_lmr_free", "dat_lmr_query", "dat_lmr_sync_rdma_read",
    "dat_lmr_sync_rdma_write",
    "dat_psp_create", "dat_psp_create_any", "dat_psp_free", "dat_psp_query",
    "dat_pz_create", "dat_pz_free", "dat_pz_query",
    "dat_registry_add_provider", "dat_registry_list_providers", "dat_registry_remove_provider",
    "dat_rmr_bind", "dat_rmr_create", "dat_rmr_free", "dat_rmr_query",
    "dat_rsp_create", "dat_rsp_free", "dat_rsp_query",
    "dat_set_consumer_context",
    "dat_srq_create", "dat_srq_free", "dat_srq_post_recv", "dat_srq_query", "dat_srq_resize",
    "dat_srq_set_lw",
    "dat_strerror", "dats_get_ia_handle",
};

static const char *const extra_symbols[] = {
    "dat_csp_create", "dat_csp_query", "dat_csp_free", "dat_ep_common_connect",
    "dat_ep_post_send_with_invalidate", "dat_ep_post_rdma_read_to_rmr",
    "dat_rmr_create_for_ep", "dat_cno_fd_create", "dat_cno_trigger",
    "dat_registry_providers_related",
};

#define N(a) (int)(sizeof a / sizeof *a)

static char libpath[PATH_MAX + 32];

static void setup(void)
{
    snprintf(libpath, sizeof libpath, "%s/lib/libdat2.so.2", tu_build_dir());
}

START_TEST(count_of_ofa_list)
{
    ck_assert_int_eq(N(ofa_symbols), 74);
    ck_assert_int_eq(N(extra_symbols), 10);
}
END_TEST

START_TEST(versioned_exports)
{
    void *h = dlopen(libpath, RTLD_NOW | RTLD_LOCAL);

    ck_assert_msg(h, "dlopen %s: %s", libpath, dlerror());
    for (int i = 0; i < N(ofa_symbols); i++)
        ck_assert_msg(dlvsym(h, ofa_symbols[i], "DAT_2.0"), "%s@DAT_2.0 missing",
                      ofa_symbols[i]);
    for (int i = 0; i < N(extra_symbols); i++)
        ck_assert_msg(dlvsym(h, extra_symbols[i], "DAT_2.0"), "%s@DAT_2.0 missing",
                      extra_symbols[i]);
    /* internals stay local */
    ck_assert_ptr_null(dlsym(h, "dr_conf_parse_line"));
    ck_assert_ptr_null(dlsym(h, "dr_registry_reinit"));
    ck_assert_ptr_null(dlsym(h, "dr_tables_lock"));
    dlclose(h);
}
END_TEST

static int in_list(const char *name)
{
    for (int i = 0; i < N(ofa_symbols); i++)
        if (strcmp(name, ofa_symbols[i]) == 0)
            return 1;
    for (int i = 0; i < N(extra_symbols); i++)
        if (strcmp(name, extra_symbols[i]) == 0)
            return 1;
    return 0;
}

/* The full dynamic symbol table, read with readelf. */
START_TEST(nothing_else_exported)
{
    char cmd[PATH_MAX + 128], line[1024];
    int defined = 0, version_node = 0;
    FILE *p;

    snprintf(cmd, sizeof cmd, "readelf -W --dyn-syms '%s' 2>/dev/null", libpath);
    p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    while (fgets(line, sizeof line, p)) {
        char num[16], val[32], size[16], type[16], bind[16], vis[16], ndx[16], name[512];

        if (sscanf(line, "%15s %31s %15s %15s %15s %15s %15s %511s", num, val, size, type,
                   bind, vis, ndx, name) != 8 || strcmp(ndx, "UND") == 0 ||
            strcmp(bind, "GLOBAL") != 0)
            continue;
        if (strcmp(name, "DAT_2.0") == 0) {
            version_node++;
            continue;
        }
        ck_assert_msg(strstr(name, "@@DAT_2.0") || strstr(name, "@DAT_2.0"),
                      "unversioned export %s", name);
        *strchr(name, '@') = '\0';
        ck_assert_msg(in_list(name), "unexpected export %s", name);
        defined++;
    }
    pclose(p);
    if (defined == 0)
        return; /* readelf not installed: versioned_exports covers the list */
    ck_assert_int_eq(defined, N(ofa_symbols) + N(extra_symbols));
}
END_TEST

START_TEST(soname)
{
    char cmd[PATH_MAX + 128], line[512];
    int found = 0;
    FILE *p;

    snprintf(cmd, sizeof cmd, "readelf -d '%s' 2>/dev/null", libpath);
    p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    while (fgets(line, sizeof line, p))
        if (strstr(line, "(SONAME)"))
            found = strstr(line, "[libdat2.so.2]") != NULL ? 1 : -1;
    pclose(p);
    ck_assert_int_ne(found, -1);
}
END_TEST

/* If Debian's libdat2 is installed, our export set must cover it. */
START_TEST(superset_of_installed_ofa)
{
    const char *deb = "/usr/lib/x86_64-linux-gnu/libdat2.so.2";
    char cmd[PATH_MAX + 128], line[512];
    void *ours;
    FILE *p;
    int n = 0;

    if (access(deb, R_OK) != 0)
        return;
    ours = dlopen(libpath, RTLD_NOW | RTLD_LOCAL);
    ck_assert_ptr_nonnull(ours);
    snprintf(cmd, sizeof cmd, "nm -D --defined-only '%s' 2>/dev/null", deb);
    p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    while (fgets(line, sizeof line, p)) {
        char addr[32], type[8], name[256], *at;

        if (sscanf(line, "%31s %7s %255s", addr, type, name) != 3 || strcmp(type, "T") != 0)
            continue;
        at = strchr(name, '@');
        if (at)
            *at = '\0';
        ck_assert_msg(dlvsym(ours, name, "DAT_2.0"), "Debian exports %s, we do not", name);
        n++;
    }
    pclose(p);
    dlclose(ours);
    ck_assert(n == 0 || n == 74);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("dat_symbols");
    TCase *tc = tcase_create("symbols");

    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_add_test(tc, count_of_ofa_list);
    tcase_add_test(tc, versioned_exports);
    tcase_add_test(tc, nothing_else_exported);
    tcase_add_test(tc, soname);
    tcase_add_test(tc, superset_of_installed_ofa);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run(suite());
}
