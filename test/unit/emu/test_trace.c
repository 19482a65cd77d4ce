/* The trace writer (emu/trace.c): records are single valid JSON lines with
 * the common fields, strings are escaped, the size cap keeps the beginning
 * and ends with one "truncated" record, several threads never interleave
 * lines, the frame and memory-check records carry their fields, and log
 * messages reach the trace through the log's sink. */
#include "emu/log.h"
#include "emu/trace.h"

#include <check.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char g_path[256];

static void fresh_path(const char *tag)
{
    snprintf(g_path, sizeof g_path, "/tmp/softdat-test-trace-%s-%d.jsonl", tag, (int)getpid());
}

/* Read the whole file; caller frees. */
static char *slurp(const char *path, size_t *len_out)
{
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    ck_assert_uint_eq(fread(b, 1, (size_t)n, f), (size_t)n);
    b[n] = '\0';
    fclose(f);
    if (len_out)
        *len_out = (size_t)n;
    return b;
}

/* Every line is {...}: braces balanced outside strings, quotes closed,
 * no raw control characters. Returns the number of lines. */
static int check_lines(const char *b)
{
    int lines = 0;
    const char *p = b;
    while (*p) {
        const char *nl = strchr(p, '\n');
        ck_assert_msg(nl != NULL, "last line not terminated");
        ck_assert_int_eq(p[0], '{');
        ck_assert_int_eq(nl[-1], '}');
        int depth = 0;
        bool in_str = false;
        for (const char *q = p; q < nl; q++) {
            ck_assert_msg((unsigned char)*q >= 0x20, "raw control byte in line %d", lines + 1);
            if (in_str) {
                if (*q == '\\')
                    q++;
                else if (*q == '"')
                    in_str = false;
            } else if (*q == '"') {
                in_str = true;
            } else if (*q == '{' || *q == '[') {
                depth++;
            } else if (*q == '}' || *q == ']') {
                depth--;
            }
        }
        ck_assert_msg(!in_str && depth == 0, "unbalanced line %d", lines + 1);
        lines++;
        p = nl + 1;
    }
    return lines;
}

START_TEST(open_writes_header_and_records)
{
    fresh_path("basic");
    ck_assert_int_eq(sd_trace_open(g_path, 0), 0);
    ck_assert(SD_TRACE_ON());
    struct sd_trace_ctx ctx = {.ia = 7, .t0_ns = sd_mono_ns()};
    struct sd_trace_rec r;
    sd_trace_begin(&r, "call", &ctx);
    sd_trace_kv_str(&r, "fn", "ep_connect");
    sd_trace_kv_u64(&r, "n", 42);
    sd_trace_kv_i64(&r, "neg", -5);
    sd_trace_kv_hex(&r, "stag", 0xabcd);
    sd_trace_kv_bool(&r, "ok", true);
    sd_trace_kv_id(&r, "obj", "ep", 3);
    sd_trace_kv_str(&r, "nul", NULL);
    sd_trace_kv_json(&r, "segs", "[1,2]");
    sd_trace_end(&r);
    sd_trace_close();
    ck_assert(!SD_TRACE_ON());

    char *b = slurp(g_path, NULL);
    ck_assert_int_eq(check_lines(b), 2);
    ck_assert_ptr_nonnull(strstr(b, "{\"rec\":\"trace\","));
    ck_assert_ptr_nonnull(strstr(b, "\"what\":\"open\",\"schema\":1"));
    ck_assert_ptr_nonnull(strstr(b, "{\"rec\":\"call\",\"mono_ns\":"));
    ck_assert_ptr_nonnull(strstr(b, ",\"ia\":\"ia7\",\"fn\":\"ep_connect\",\"n\":42,\"neg\":-5,\"stag\":\"0xabcd\","
                                    "\"ok\":true,\"obj\":\"ep3\",\"nul\":null,\"segs\":[1,2]}\n"));
    char pid[32];
    snprintf(pid, sizeof pid, "\"pid\":%d,", (int)getpid());
    ck_assert_ptr_nonnull(strstr(b, pid));
    free(b);
    unlink(g_path);
}
END_TEST

START_TEST(strings_are_escaped)
{
    fresh_path("esc");
    ck_assert_int_eq(sd_trace_open(g_path, 0), 0);
    struct sd_trace_rec r;
    sd_trace_begin(&r, "log", NULL);
    sd_trace_kv_str(&r, "msg", "a\"b\\c\nd\te\x01\xc3\xa9");
    sd_trace_end(&r);
    sd_trace_close();
    char *b = slurp(g_path, NULL);
    check_lines(b);
    ck_assert_ptr_nonnull(strstr(b, "\"msg\":\"a\\\"b\\\\c\\u000ad\\u0009e\\u0001\\u00c3\\u00a9\""));
    free(b);
    unlink(g_path);
}
END_TEST

START_TEST(long_fields_are_cut_not_broken)
{
    fresh_path("cut");
    ck_assert_int_eq(sd_trace_open(g_path, 0), 0);
    static char big[SD_TRACE_LINE_MAX * 2];
    memset(big, 'x', sizeof big - 1);
    struct sd_trace_rec r;
    sd_trace_begin(&r, "log", NULL);
    sd_trace_kv_str(&r, "small", "kept");
    sd_trace_kv_str(&r, "big", big);
    sd_trace_kv_u64(&r, "after", 1);
    sd_trace_end(&r);
    sd_trace_close();
    char *b = slurp(g_path, NULL);
    ck_assert_int_eq(check_lines(b), 2);
    ck_assert_ptr_nonnull(strstr(b, "\"small\":\"kept\""));
    ck_assert_ptr_null(strstr(b, "\"big\""));
    ck_assert_ptr_nonnull(strstr(b, "\"after\":1,\"cut\":true}"));
    free(b);
    unlink(g_path);
}
END_TEST

START_TEST(cap_keeps_the_beginning)
{
    fresh_path("cap");
    ck_assert_int_eq(sd_trace_open(g_path, 4096), 0);
    for (int i = 0; i < 1000; i++) {
        struct sd_trace_rec r;
        sd_trace_begin(&r, "call", NULL);
        sd_trace_kv_u64(&r, "i", (uint64_t)i);
        sd_trace_end(&r);
    }
    ck_assert(sd_trace_truncated());
    uint64_t written = sd_trace_bytes();
    sd_trace_close();
    size_t len;
    char *b = slurp(g_path, &len);
    ck_assert_uint_eq(len, written);
    ck_assert_uint_le(len, 4096 + 200); /* the cap plus the final record */
    int lines = check_lines(b);
    ck_assert_int_gt(lines, 5);
    ck_assert_ptr_nonnull(strstr(b, "\"i\":0}"));
    ck_assert_ptr_null(strstr(b, "\"i\":999}"));
    /* Exactly one truncation record, and it is the last line. */
    const char *t = strstr(b, "\"what\":\"truncated\"");
    ck_assert_ptr_nonnull(t);
    ck_assert_ptr_null(strstr(t + 1, "\"what\":\"truncated\""));
    ck_assert_ptr_eq(strchr(t, '\n'), b + len - 1);
    free(b);
    unlink(g_path);
}
END_TEST

#define NTHREADS 4
#define PER_THREAD 2000
static void *writer(void *arg)
{
    for (int i = 0; i < PER_THREAD; i++) {
        struct sd_trace_rec r;
        sd_trace_begin(&r, "event", NULL);
        sd_trace_kv_u64(&r, "thread", (uint64_t)(uintptr_t)arg);
        sd_trace_kv_u64(&r, "i", (uint64_t)i);
        sd_trace_kv_str(&r, "pad", "0123456789012345678901234567890123456789");
        sd_trace_end(&r);
    }
    return NULL;
}

START_TEST(threads_never_interleave)
{
    fresh_path("mt");
    ck_assert_int_eq(sd_trace_open(g_path, 0), 0);
    pthread_t t[NTHREADS];
    for (uintptr_t i = 0; i < NTHREADS; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, writer, (void *)i), 0);
    for (int i = 0; i < NTHREADS; i++)
        pthread_join(t[i], NULL);
    sd_trace_close();
    char *b = slurp(g_path, NULL);
    ck_assert_int_eq(check_lines(b), 1 + NTHREADS * PER_THREAD);
    free(b);
    unlink(g_path);
}
END_TEST

START_TEST(frame_and_memcheck_records)
{
    fresh_path("frame");
    ck_assert_int_eq(sd_trace_open(g_path, 0), 0);
    struct sd_trace_ctx ctx = {.ia = 1, .t0_ns = sd_mono_ns()};
    struct sd_trace_frame f = {.dir = SD_TRACE_TX, .kind = SD_TRACE_FPDU, .conn = 2, .opcode = 0, .tagged = true,
                               .last = true, .stag = 0x1234, .to = 0x1000, .payload_len = 64, .frame_len = 96,
                               .crc = SD_TRACE_CRC_OK};
    sd_trace_frame(&ctx, &f);
    struct sd_trace_frame g = {.dir = SD_TRACE_RX, .kind = SD_TRACE_FPDU, .conn = 2, .opcode = 3, .tagged = false,
                               .last = true, .queue = 0, .msn = 5, .mo = 0, .payload_len = 8, .frame_len = 40,
                               .crc = SD_TRACE_CRC_BAD};
    sd_trace_frame(&ctx, &g);
    struct sd_trace_frame t = {.dir = SD_TRACE_TX, .kind = SD_TRACE_FPDU, .opcode = 7, .term = 0x020100};
    sd_trace_frame(NULL, &t);
    struct sd_trace_frame m = {.dir = SD_TRACE_RX, .kind = SD_TRACE_MPA_REP, .mpa_reject = true, .pdata_len = 3};
    sd_trace_frame(&ctx, &m);
    struct sd_trace_memcheck mc = {.conn = 2, .access = "write", .stag = 0x1299, .key = 0x34, .pz = 1, .qp_pz = 1,
                                   .priv_need = 0x20, .priv_have = 0x22, .to = 0x1000, .len = 64, .base = 0x1000,
                                   .bound = 0x2000, .allowed = false, .reason = "key mismatch"};
    sd_trace_memcheck(&ctx, &mc);
    sd_trace_close();
    char *b = slurp(g_path, NULL);
    ck_assert_int_eq(check_lines(b), 6);
    ck_assert_ptr_nonnull(strstr(b, "\"rec\":\"frame\""));
    ck_assert_ptr_nonnull(strstr(b, "\"dir\":\"tx\",\"kind\":\"fpdu\",\"conn\":\"c2\",\"op\":\"rdma_write\",\"opcode\":0,"
                                    "\"tagged\":true,\"last\":true,\"stag\":\"0x1234\",\"to\":\"0x1000\","
                                    "\"payload_len\":64,\"frame_len\":96,\"crc\":\"ok\"}"));
    ck_assert_ptr_nonnull(strstr(b, "\"dir\":\"rx\",\"kind\":\"fpdu\",\"conn\":\"c2\",\"op\":\"send\",\"opcode\":3,"
                                    "\"tagged\":false,\"last\":true,\"queue\":0,\"msn\":5,\"mo\":0,"
                                    "\"payload_len\":8,\"frame_len\":40,\"crc\":\"bad\"}"));
    ck_assert_ptr_nonnull(strstr(b, "\"op\":\"terminate\""));
    ck_assert_ptr_nonnull(strstr(b, "\"term\":\"0x20100\""));
    ck_assert_ptr_nonnull(strstr(b, "\"kind\":\"mpa_rep\",\"rev\":0,\"crc_flag\":false,\"markers\":false,"
                                    "\"reject\":true,\"pdata_len\":3"));
    ck_assert_ptr_nonnull(strstr(b, "\"rec\":\"memcheck\""));
    ck_assert_ptr_nonnull(strstr(b, "\"access\":\"write\",\"stag\":\"0x1299\",\"key\":\"0x34\",\"pz\":\"pz1\","
                                    "\"qp_pz\":\"pz1\",\"priv_need\":\"0x20\",\"priv_have\":\"0x22\","
                                    "\"need\":\"mw_bind\",\"have\":\"local_write|mw_bind\",\"to\":\"0x1000\",\"len\":64,\"base\":\"0x1000\",\"bound\":\"0x2000\","
                                    "\"allowed\":false,\"reason\":\"key mismatch\"}"));
    free(b);
    unlink(g_path);
}
END_TEST

START_TEST(opcode_names)
{
    ck_assert_str_eq(sd_trace_opcode_name(0), "rdma_write");
    ck_assert_str_eq(sd_trace_opcode_name(1), "rdma_read_req");
    ck_assert_str_eq(sd_trace_opcode_name(2), "rdma_read_resp");
    ck_assert_str_eq(sd_trace_opcode_name(7), "terminate");
    ck_assert_str_eq(sd_trace_opcode_name(8), "imm_data");
    ck_assert_str_eq(sd_trace_opcode_name(0xA), "atomic_req");
    ck_assert_str_eq(sd_trace_opcode_name(0xC), "reserved");
}
END_TEST

START_TEST(log_messages_reach_the_trace)
{
    fresh_path("log");
    setenv("SOFTDAT_LOG", "info", 1);
    sd_log_set_stderr(0);
    ck_assert_int_eq(sd_trace_open(g_path, 0), 0);
    SD_INFO("conn", "hello %d", 5);
    SD_OLOG(SD_LOG_WARN, "qp", "ep3 c2", "scoped \"quoted\"");
    SD_DBG("conn", "below the level: not written");
    sd_trace_close();
    SD_INFO("conn", "after close: not written");
    sd_log_set_stderr(1);
    char *b = slurp(g_path, NULL);
    ck_assert_int_eq(check_lines(b), 3);
    ck_assert_ptr_nonnull(strstr(b, "\"rec\":\"log\""));
    /* fn is the function that logged (Check names it after the test). */
    ck_assert_ptr_nonnull(strstr(b, "\"level\":\"INFO\",\"comp\":\"conn\",\"fn\":\""));
    ck_assert_ptr_nonnull(strstr(b, "log_messages_reach_the_trace"));
    ck_assert_ptr_nonnull(strstr(b, "\"msg\":\"hello 5\"}"));
    ck_assert_ptr_nonnull(strstr(b, "\"level\":\"WARN\",\"comp\":\"qp\",\"fn\":\""));
    ck_assert_ptr_nonnull(strstr(b, "\"scope\":\"ep3 c2\",\"msg\":\"scoped \\\"quoted\\\"\"}"));
    ck_assert_ptr_null(strstr(b, "not written"));
    free(b);
    unlink(g_path);
}
END_TEST

/* The stderr line: relative seconds, level, component, function, scope. */
START_TEST(stderr_line_format)
{
    fresh_path("stderr");
    fflush(stderr);
    int saved = dup(2);
    FILE *f = fopen(g_path, "w+");
    ck_assert_ptr_nonnull(f);
    dup2(fileno(f), 2);
    setenv("SOFTDAT_LOG", "info", 1);
    SD_OLOG(SD_LOG_WARN, "qp", "ep3 c2", "scoped %d", 7);
    SD_INFO("conn", "plain");
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    fclose(f);
    char *b = slurp(g_path, NULL);
    char want[64];
    snprintf(want, sizeof want, "softdat[%d/", (int)getpid());
    ck_assert_ptr_nonnull(strstr(b, want));
    const char *p = strstr(b, "] +");
    ck_assert_ptr_nonnull(p);
    /* "+S.UUUUUU " */
    p += 3;
    while (*p >= '0' && *p <= '9')
        p++;
    ck_assert_int_eq(*p, '.');
    for (int i = 1; i <= 6; i++)
        ck_assert(p[i] >= '0' && p[i] <= '9');
    ck_assert_int_eq(p[7], ' ');
    ck_assert_ptr_nonnull(strstr(b, " WARN qp "));
    ck_assert_ptr_nonnull(strstr(b, "stderr_line_format"));
    ck_assert_ptr_nonnull(strstr(b, " [ep3 c2]: scoped 7\n"));
    ck_assert_ptr_nonnull(strstr(b, " INFO conn "));
    ck_assert_ptr_nonnull(strstr(b, ": plain\n"));
    ck_assert_ptr_null(strstr(b, "[]"));
    free(b);
    unlink(g_path);
}
END_TEST

START_TEST(env_switch)
{
    fresh_path("env-%p");
    /* fresh_path put our pid in already; "%p" must expand to the same. */
    setenv("SOFTDAT_TRACE", g_path, 1);
    setenv("SOFTDAT_TRACE_MAX", "1K", 1);
    ck_assert_int_eq(sd_trace_init_from_env(), 1);
    ck_assert_int_eq(sd_trace_init_from_env(), 1); /* once */
    char expanded[300];
    snprintf(expanded, sizeof expanded, "/tmp/softdat-test-trace-env-%d-%d.jsonl", (int)getpid(), (int)getpid());
    ck_assert_int_eq(access(expanded, F_OK), 0);
    for (int i = 0; i < 100; i++) {
        struct sd_trace_rec r;
        sd_trace_begin(&r, "call", NULL);
        sd_trace_end(&r);
    }
    ck_assert(sd_trace_truncated());
    ck_assert_uint_le(sd_trace_bytes(), 1024 + 200);
    sd_trace_close();
    unlink(expanded);
}
END_TEST

START_TEST(parse_size)
{
    ck_assert_uint_eq(sd_trace_parse_size("4096"), 4096);
    ck_assert_uint_eq(sd_trace_parse_size("64K"), 64u << 10);
    ck_assert_uint_eq(sd_trace_parse_size("64M"), 64u << 20);
    ck_assert_uint_eq(sd_trace_parse_size("1g"), 1ull << 30);
    ck_assert_uint_eq(sd_trace_parse_size(""), 0);
    ck_assert_uint_eq(sd_trace_parse_size("12Q"), 0);
    ck_assert_uint_eq(sd_trace_parse_size("K"), 0);
    ck_assert_uint_eq(sd_trace_parse_size("1M1"), 0);
}
END_TEST

START_TEST(unwritable_path_fails_cleanly)
{
    ck_assert_int_eq(sd_trace_open("/nonexistent-dir/x.jsonl", 0), -1);
    ck_assert(!SD_TRACE_ON());
}
END_TEST

int main(void)
{
    Suite *s = suite_create("trace");
    TCase *tc = tcase_create("writer");
    tcase_add_test(tc, open_writes_header_and_records);
    tcase_add_test(tc, strings_are_escaped);
    tcase_add_test(tc, long_fields_are_cut_not_broken);
    tcase_add_test(tc, cap_keeps_the_beginning);
    tcase_add_test(tc, threads_never_interleave);
    tcase_add_test(tc, frame_and_memcheck_records);
    tcase_add_test(tc, opcode_names);
    tcase_add_test(tc, log_messages_reach_the_trace);
    tcase_add_test(tc, stderr_line_format);
    tcase_add_test(tc, env_switch);
    tcase_add_test(tc, parse_size);
    tcase_add_test(tc, unwritable_path_fails_cleanly);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
