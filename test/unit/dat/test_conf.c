/* dat.conf parser: lines, files, diagnostics and the choice of file. */
#include "lib/dat/dr.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test/lib/dat_util.h"

static struct dr_conf_entry e;
static const char *why;

static int parse(const char *line)
{
    return dr_conf_parse_line(line, &e, &why);
}

START_TEST(good_basic)
{
    ck_assert_int_eq(parse("softdat-lo u2.0 nonthreadsafe default libdaplsoft.so.2 "
                           "dapl.2.0 \"lo\" \"\"\n"), 1);
    ck_assert_str_eq(e.ia_name, "softdat-lo");
    ck_assert_int_eq(e.kernel, 0);
    ck_assert_uint_eq(e.api_major, 2);
    ck_assert_uint_eq(e.api_minor, 0);
    ck_assert_int_eq(e.thread_safe, DAT_FALSE);
    ck_assert_int_eq(e.is_default, 1);
    ck_assert_str_eq(e.lib_path, "libdaplsoft.so.2");
    ck_assert_str_eq(e.prov_id, "dapl");
    ck_assert_uint_eq(e.prov_major, 2);
    ck_assert_uint_eq(e.prov_minor, 0);
    ck_assert_str_eq(e.ia_params, "lo");
    ck_assert_str_eq(e.platform_params, "");
}
END_TEST

START_TEST(good_variants)
{
    /* tabs, trailing comment, k type, threadsafe, nondefault, dotted id */
    ck_assert_int_eq(parse("\tib0\tk1.12\tthreadsafe\tnondefault\t/usr/lib/x.so\t"
                           "ofa.v2.2.1\tmlx4_0\tplat # trailing comment"), 1);
    ck_assert_str_eq(e.ia_name, "ib0");
    ck_assert_int_eq(e.kernel, 1);
    ck_assert_uint_eq(e.api_major, 1);
    ck_assert_uint_eq(e.api_minor, 12);
    ck_assert_int_eq(e.thread_safe, DAT_TRUE);
    ck_assert_int_eq(e.is_default, 0);
    ck_assert_str_eq(e.prov_id, "ofa.v2");
    ck_assert_uint_eq(e.prov_major, 2);
    ck_assert_uint_eq(e.prov_minor, 1);
    ck_assert_str_eq(e.ia_params, "mlx4_0");
    ck_assert_str_eq(e.platform_params, "plat");
    /* thread-safety words match by prefix, as OFA */
    ck_assert_int_eq(parse("a u2.0 threadsafeXYZ default l p.1.0 \"\" \"\""), 1);
    ck_assert_int_eq(e.thread_safe, DAT_TRUE);
    ck_assert_int_eq(parse("a u2.0 nonthreadsafe_really default l p.1.0 \"\" \"\""), 1);
    ck_assert_int_eq(e.thread_safe, DAT_FALSE);
    /* CRLF line ending */
    ck_assert_int_eq(parse("a u2.0 threadsafe default l p.1.0 x y\r\n"), 1);
    ck_assert_str_eq(e.platform_params, "y");
}
END_TEST

START_TEST(quotes_and_escapes)
{
    ck_assert_int_eq(parse("\"my ia\" u2.0 nonthreadsafe default \"/p a/t h.so\" d.2.0 "
                           "\"a \\\"quoted\\\" # not a comment\" \"x\\\\y\""), 1);
    ck_assert_str_eq(e.ia_name, "my ia");
    ck_assert_str_eq(e.lib_path, "/p a/t h.so");
    ck_assert_str_eq(e.ia_params, "a \"quoted\" # not a comment");
    ck_assert_str_eq(e.platform_params, "x\\y");
    /* backslash outside quotes escapes a blank; quotes may join a token */
    ck_assert_int_eq(parse("ia\\ 1 u2.0 nonthreadsafe default li\"b x\".so d.2.0 \"\" \"\""), 1);
    ck_assert_str_eq(e.ia_name, "ia 1");
    ck_assert_str_eq(e.lib_path, "lib x.so");
}
END_TEST

START_TEST(blank_and_comment)
{
    ck_assert_int_eq(parse(""), 0);
    ck_assert_int_eq(parse("\n"), 0);
    ck_assert_int_eq(parse("   \t  \n"), 0);
    ck_assert_int_eq(parse("# a u2.0 nonthreadsafe default l p.1.0 \"\" \"\""), 0);
    ck_assert_int_eq(parse("    # indented comment"), 0);
}
END_TEST

static const char *const bad_lines[] = {
    /* field count */
    "a u2.0 nonthreadsafe default l p.1.0 \"\"",
    "a u2.0 nonthreadsafe default l p.1.0 \"\" \"\" extra",
    "a",
    "a u2.0 nonthreadsafe default l p.1.0 \"\" # \"\"",
    /* API version */
    "a 2.0 nonthreadsafe default l p.1.0 \"\" \"\"",
    "a x2.0 nonthreadsafe default l p.1.0 \"\" \"\"",
    "a u2 nonthreadsafe default l p.1.0 \"\" \"\"",
    "a u2. nonthreadsafe default l p.1.0 \"\" \"\"",
    "a u.0 nonthreadsafe default l p.1.0 \"\" \"\"",
    "a u2.0x nonthreadsafe default l p.1.0 \"\" \"\"",
    "a u2.0.1 nonthreadsafe default l p.1.0 \"\" \"\"",
    "a u-2.0 nonthreadsafe default l p.1.0 \"\" \"\"",
    "a u1234567890.0 nonthreadsafe default l p.1.0 \"\" \"\"",
    /* thread safety */
    "a u2.0 safe default l p.1.0 \"\" \"\"",
    "a u2.0 thread default l p.1.0 \"\" \"\"",
    "a u2.0 \"\" default l p.1.0 \"\" \"\"",
    /* default */
    "a u2.0 threadsafe yes l p.1.0 \"\" \"\"",
    "a u2.0 threadsafe defaults l p.1.0 \"\" \"\"",
    /* library */
    "a u2.0 threadsafe default \"\" p.1.0 \"\" \"\"",
    /* provider version */
    "a u2.0 threadsafe default l p \"\" \"\"",
    "a u2.0 threadsafe default l p.1 \"\" \"\"",
    "a u2.0 threadsafe default l .1.0 \"\" \"\"",
    "a u2.0 threadsafe default l p.x.0 \"\" \"\"",
    "a u2.0 threadsafe default l p.1. \"\" \"\"",
    /* quoting */
    "a u2.0 threadsafe default l p.1.0 \"unterminated \"\"",
    "\"a u2.0 threadsafe default l p.1.0 x y",
    "a u2.0 threadsafe default l p.1.0 x y\\",
    /* empty name */
    "\"\" u2.0 threadsafe default l p.1.0 x y",
};

START_TEST(malformed)
{
    const char *line = bad_lines[_i];

    ck_assert_msg(parse(line) == -1, "accepted: %s", line);
    ck_assert_ptr_nonnull(why);
    ck_assert_int_gt(strlen(why), 0);
}
END_TEST

START_TEST(overlong_fields)
{
    char line[8192], name[300];

    memset(name, 'n', 255);
    name[255] = '\0';
    snprintf(line, sizeof line, "%s u2.0 threadsafe default l p.1.0 x y", name);
    ck_assert_int_eq(parse(line), 1);
    ck_assert_int_eq(strlen(e.ia_name), 255);

    memset(name, 'n', 256);
    name[256] = '\0';
    snprintf(line, sizeof line, "%s u2.0 threadsafe default l p.1.0 x y", name);
    ck_assert_int_eq(parse(line), -1);
    ck_assert_ptr_nonnull(strstr(why, "255"));

    {
        char params[DR_PARAMS_MAX + 10];

        memset(params, 'p', sizeof params - 1);
        params[sizeof params - 1] = '\0';
        snprintf(line, sizeof line, "a u2.0 threadsafe default l p.1.0 %s y", params);
        ck_assert_int_eq(parse(line), -1);
    }
}
END_TEST

struct collect {
    int n;
    char names[16][DAT_NAME_MAX_LENGTH];
    int lines[16];
};

static void collect_cb(const struct dr_conf_entry *ent, const char *path, int lineno,
                       void *arg)
{
    struct collect *c = arg;

    if (c->n < 16) {
        snprintf(c->names[c->n], sizeof c->names[0], "%s", ent->ia_name);
        c->lines[c->n] = lineno;
    }
    c->n++;
}

static const char *const conf_text =
    "# comment line\n"
    "\n"
    "first u2.0 nonthreadsafe default /x/one.so d.2.0 \"p\" \"\"\n"
    "broken u2.0 nonthreadsafe\n"
    "kern k2.0 nonthreadsafe default /x/k.so d.2.0 \"\" \"\"\n"
    "second u2.0 threadsafe nondefault /x/two.so d.2.0 \"\" \"\"   # trailing\n"
    "bad u2.0 maybe default /x/k.so d.2.0 \"\" \"\"\n"
    "third u2.0 threadsafe default /x/three.so d.2.0 \"\" \"\"";   /* no final newline */

static const char *parse_path;
static int parse_rc, parse_bad;
static struct collect parse_col;

static void do_parse(void *arg)
{
    (void)arg;
    memset(&parse_col, 0, sizeof parse_col);
    parse_rc = dr_conf_parse_file(parse_path, collect_cb, &parse_col, &parse_bad);
}

START_TEST(file_records_and_messages)
{
    char *err, expect[128];

    setenv("DAT_DBG_TYPE", "1", 1);
    unsetenv("DAT_DBG_DEST");
    dr_dbg_init();
    parse_path = tu_write_file(conf_text);
    err = tu_capture_stderr(do_parse, NULL);
    ck_assert_int_eq(parse_rc, 4);
    ck_assert_int_eq(parse_bad, 2);
    ck_assert_int_eq(parse_col.n, 4);
    ck_assert_str_eq(parse_col.names[0], "first");
    ck_assert_int_eq(parse_col.lines[0], 3);
    ck_assert_str_eq(parse_col.names[1], "kern");
    ck_assert_str_eq(parse_col.names[2], "second");
    ck_assert_str_eq(parse_col.names[3], "third");
    ck_assert_int_eq(parse_col.lines[3], 8);
    /* each corrupt line is reported with file and line number */
    snprintf(expect, sizeof expect, "%s:4:", parse_path);
    ck_assert_msg(strstr(err, expect), "stderr was: %s", err);
    snprintf(expect, sizeof expect, "%s:7:", parse_path);
    ck_assert_msg(strstr(err, expect), "stderr was: %s", err);
    ck_assert_ptr_null(strstr(err, ":3:"));
    free(err);
    unlink(parse_path);
}
END_TEST

START_TEST(file_messages_silenced)
{
    char *err;

    setenv("DAT_DBG_TYPE", "0", 1);
    dr_dbg_init();
    parse_path = tu_write_file(conf_text);
    err = tu_capture_stderr(do_parse, NULL);
    ck_assert_int_eq(parse_bad, 2);
    ck_assert_str_eq(err, "");
    free(err);
    unlink(parse_path);
}
END_TEST

START_TEST(file_missing)
{
    int bad = 7;

    ck_assert_int_eq(dr_conf_parse_file("/nonexistent/dat.conf", NULL, NULL, &bad), -1);
    ck_assert_int_eq(bad, 0);
}
END_TEST

START_TEST(choose_path)
{
    const char *exists = tu_write_file("# empty\n");

    /* DAT_OVERRIDE wins even if it does not exist (no fallback) */
    ck_assert_str_eq(dr_conf_choose("/nonexistent/o.conf", exists, "/p/dat.conf"),
                     "/nonexistent/o.conf");
    ck_assert_str_eq(dr_conf_choose(NULL, exists, "/p/dat.conf"), exists);
    ck_assert_str_eq(dr_conf_choose(NULL, "/nonexistent/etc.conf", "/p/dat.conf"),
                     "/p/dat.conf");
    unlink(exists);
    /* compile-time prefix default */
    ck_assert_str_eq(DR_CONF_ETC, "/etc/dat.conf");
    ck_assert_int_gt(strlen(DR_CONF_PREFIX), strlen("/dat.conf"));
    ck_assert_str_eq(DR_CONF_PREFIX + strlen(DR_CONF_PREFIX) - 9, "/dat.conf");
}
END_TEST

START_TEST(long_line_file)
{
    /* a comment far longer than any fixed buffer, then a record */
    size_t big = 100000;
    char *text = malloc(big + 200);
    struct collect c = { 0 };
    const char *path;

    text[0] = '#';
    memset(text + 1, 'x', big);
    strcpy(text + 1 + big, "\nz u2.0 threadsafe default l p.1.0 x y\n");
    path = tu_write_file(text);
    ck_assert_int_eq(dr_conf_parse_file(path, collect_cb, &c, NULL), 1);
    ck_assert_str_eq(c.names[0], "z");
    ck_assert_int_eq(c.lines[0], 2);
    unlink(path);
    free(text);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("dat_conf");
    TCase *tc = tcase_create("parser");

    tcase_add_test(tc, good_basic);
    tcase_add_test(tc, good_variants);
    tcase_add_test(tc, quotes_and_escapes);
    tcase_add_test(tc, blank_and_comment);
    tcase_add_loop_test(tc, malformed, 0, (int)(sizeof bad_lines / sizeof *bad_lines));
    tcase_add_test(tc, overlong_fields);
    tcase_add_test(tc, file_records_and_messages);
    tcase_add_test(tc, file_messages_silenced);
    tcase_add_test(tc, file_missing);
    tcase_add_test(tc, choose_path);
    tcase_add_test(tc, long_line_file);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run(suite());
}
