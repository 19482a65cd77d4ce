/* Provider records of the trace (lib/provider/trace_calls.c, trace_rec.c):
 * with SOFTDAT_TRACE set when the table is filled, every call through the
 * table writes a "call" or "post" record naming its object by stable id,
 * events offered to an EVD write "event" records, and EP state changes
 * write "state" records. Each test runs in its own process (Check fork
 * mode), so the trace is "%p" and read back from this pid's file. */
#include <dat2/dat_ib_extensions.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "emu/trace.h"
#include "test/lib/prov_fixture.h"

static char g_file[256];

static void start(void)
{
    setenv("SOFTDAT_TRACE", "/tmp/softdat-test-trace-calls-%p.jsonl", 1);
    snprintf(g_file, sizeof g_file, "/tmp/softdat-test-trace-calls-%d.jsonl", (int)getpid());
}

static char *slurp(void)
{
    FILE *f = fopen(g_file, "rb");
    ck_assert_ptr_nonnull(f);
    static char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

/* The line holding every one of the fragments (NULL-terminated list), or NULL. */
static const char *line_with(const char *b, const char *const *frags)
{
    for (const char *p = b; *p;) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        char line[4096];
        if (len < sizeof line) {
            memcpy(line, p, len);
            line[len] = '\0';
            bool all = true;
            for (int i = 0; frags[i] && all; i++)
                all = strstr(line, frags[i]) != NULL;
            if (all)
                return p;
        }
        if (!nl)
            break;
        p = nl + 1;
    }
    return NULL;
}
#define HAS(b, ...) ck_assert_msg(line_with((b), (const char *const[]){__VA_ARGS__, NULL}) != NULL, \
                                  "no line with " #__VA_ARGS__)
#define HASNT(b, ...) ck_assert_msg(line_with((b), (const char *const[]){__VA_ARGS__, NULL}) == NULL, \
                                    "unexpected line with " #__VA_ARGS__)

/* Slot 80 as the registry's dat_extension_op calls it. */
static DAT_RETURN ext(DAT_PROVIDER *p, DAT_HANDLE h, int op, ...)
{
    va_list ap;
    va_start(ap, op);
    DAT_RETURN rc = p->handle_extendedop_func(h, (DAT_EXTENDED_OP)op, ap);
    va_end(ap);
    return rc;
}

START_TEST(calls_and_events_are_recorded)
{
    start();
    DAT_PROVIDER *p = fx_provider("t-trace1", "lo", DAT_FALSE);
    ck_assert(SD_TRACE_ON());
    DAT_IA_HANDLE ia = fx_open(p, NULL);
    DAT_PZ_HANDLE pz;
    ck_assert_dat_ok(p->pz_create_func(ia, &pz));
    DAT_EVD_HANDLE evd;
    ck_assert_dat_ok(p->evd_create_func(ia, 4, DAT_HANDLE_NULL, DAT_EVD_SOFTWARE_FLAG, &evd));
    DAT_EVENT ev = {.event_number = DAT_SOFTWARE_EVENT};
    DAT_EVENT got;
    ck_assert_uint_eq(p->evd_dequeue_func(evd, &got), DAT_QUEUE_EMPTY);
    ck_assert_dat_ok(p->evd_post_se_func(evd, &ev));
    ck_assert_dat_ok(p->evd_dequeue_func(evd, &got));
    ck_assert_dat_ok(p->evd_free_func(evd));
    ck_assert_uint_ne(p->evd_free_func(evd), DAT_SUCCESS);
    ck_assert_dat_ok(p->pz_free_func(pz));
    ck_assert_dat_ok(p->ia_close_func(ia, DAT_CLOSE_GRACEFUL_FLAG));

    char *b = slurp();
    HAS(b, "\"rec\":\"trace\"", "\"what\":\"open\"");
    HAS(b, "\"rec\":\"call\"", "\"fn\":\"ia_open\"", "\"name\":\"t-trace1\"", "\"rc\":\"DAT_SUCCESS\"");
    HAS(b, "\"fn\":\"pz_create\"", "\"new\":\"pz", "\"ia\":\"ia");
    HAS(b, "\"fn\":\"evd_create\"", "\"qlen\":4", "\"new\":\"evd");
    HAS(b, "\"rec\":\"event\"", "\"type\":\"SOFTWARE\"", "\"stream\":\"software\"", "\"queued\":true");
    HAS(b, "\"fn\":\"evd_dequeue\"", "\"got\":\"SOFTWARE\"");
    /* The empty poll is not recorded: exactly one dequeue line. */
    const char *d = strstr(b, "\"fn\":\"evd_dequeue\"");
    ck_assert_ptr_null(strstr(d + 1, "\"fn\":\"evd_dequeue\""));
    HAS(b, "\"fn\":\"evd_free\"", "\"obj\":\"evd", "\"rc\":\"DAT_SUCCESS\"");
    HAS(b, "\"fn\":\"evd_free\"", "\"obj\":\"invalid\"", "\"rc\":\"DAT_INVALID_HANDLE\"", "\"rc_hex\":");
    HAS(b, "\"fn\":\"ia_close\"", "\"rc\":\"DAT_SUCCESS\"");
    if (!getenv("KEEP_TRACE")) unlink(g_file);
}
END_TEST

START_TEST(ids_are_stable_per_type)
{
    start();
    DAT_PROVIDER *p = fx_provider("t-trace2", "lo", DAT_FALSE);
    DAT_IA_HANDLE ia = fx_open(p, NULL);
    DAT_PZ_HANDLE pz[3];
    for (int i = 0; i < 3; i++)
        ck_assert_dat_ok(p->pz_create_func(ia, &pz[i]));
    uint32_t first = ((struct sd_handle *)pz[0])->id;
    ck_assert_uint_eq(((struct sd_handle *)pz[1])->id, first + 1);
    ck_assert_uint_eq(((struct sd_handle *)pz[2])->id, first + 2);
    ck_assert_str_eq(sd_handle_type_prefix(DAT_HANDLE_TYPE_EP), "ep");
    ck_assert_str_eq(sd_handle_type_prefix(DAT_HANDLE_TYPE_PZ), "pz");
    char want[32];
    snprintf(want, sizeof want, "\"new\":\"pz%u\"", first + 2);
    /* sd_handle_peek names an object without taking a reference. */
    struct sd_handle_peek pk;
    ck_assert(sd_handle_peek(pz[1], &pk));
    ck_assert_uint_eq(pk.type, DAT_HANDLE_TYPE_PZ);
    ck_assert_uint_eq(pk.id, first + 1);
    ck_assert_uint_eq(pk.ia_id, ((struct sd_handle *)ia)->id);
    ck_assert_uint_eq(pk.ia_t0_ns, ((struct sd_ia *)ia)->t0_ns);
    ck_assert_uint_eq(atomic_load(&((struct sd_handle *)pz[1])->refs), 1);
    ck_assert(!sd_handle_peek((DAT_HANDLE)(uintptr_t)0x12345678, &pk));
    ck_assert(!sd_handle_peek(DAT_HANDLE_NULL, &pk));
    for (int i = 0; i < 3; i++)
        ck_assert_dat_ok(p->pz_free_func(pz[i]));
    ck_assert(!sd_handle_peek(pz[1], &pk)); /* freed: no longer named */
    ck_assert_dat_ok(p->ia_close_func(ia, DAT_CLOSE_GRACEFUL_FLAG));
    char *b = slurp();
    HAS(b, "\"fn\":\"pz_create\"", want);
    snprintf(want, sizeof want, "\"obj\":\"pz%u\"", first + 1);
    HAS(b, "\"fn\":\"pz_free\"", want);
    if (!getenv("KEEP_TRACE")) unlink(g_file);
}
END_TEST

START_TEST(posts_states_and_connection_events)
{
    start();
    DAT_PROVIDER *p = fx_provider("t-trace3", "127.0.0.1", DAT_FALSE);
    DAT_IA_HANDLE ia = fx_open(p, NULL);
    DAT_PZ_HANDLE pz;
    ck_assert_dat_ok(p->pz_create_func(ia, &pz));
    DAT_EVD_HANDLE dto, conn;
    ck_assert_dat_ok(p->evd_create_func(ia, 8, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &dto));
    ck_assert_dat_ok(p->evd_create_func(ia, 8, DAT_HANDLE_NULL, DAT_EVD_CONNECTION_FLAG, &conn));
    static char buf[256];
    DAT_REGION_DESCRIPTION d = {.for_va = buf};
    DAT_LMR_HANDLE lmr;
    DAT_LMR_CONTEXT lctx;
    DAT_RMR_CONTEXT rctx;
    DAT_VLEN rlen;
    DAT_VADDR raddr;
    ck_assert_dat_ok(p->lmr_create_func(ia, DAT_MEM_TYPE_VIRTUAL, d, sizeof buf, pz, DAT_MEM_PRIV_ALL_FLAG,
                                        DAT_VA_TYPE_VA, &lmr, &lctx, &rctx, &rlen, &raddr));
    DAT_EP_HANDLE ep;
    ck_assert_dat_ok(p->ep_create_func(ia, pz, dto, dto, conn, NULL, &ep));

    DAT_LMR_TRIPLET iov = {.virtual_address = (DAT_VADDR)(uintptr_t)buf, .segment_length = 100,
                           .lmr_context = lctx};
    DAT_DTO_COOKIE ck = {.as_64 = 0xc0ffee};
    ck_assert_dat_ok(p->ep_post_recv_func(ep, 1, &iov, ck, DAT_COMPLETION_DEFAULT_FLAG));
    /* An extension post on an unconnected EP is refused; still recorded. */
    DAT_RMR_TRIPLET r = {.virtual_address = 0x1000, .segment_length = 8, .rmr_context = 0x77};
    DAT_RETURN rc = ext(p, ep, DAT_IB_RDMA_WRITE_IMMED_OP, (DAT_COUNT)1, &iov, ck, &r, (DAT_UINT32)0xabcd,
                        (DAT_COMPLETION_FLAGS)DAT_COMPLETION_DEFAULT_FLAG);
    ck_assert_uint_ne(rc, DAT_SUCCESS);

    /* Connect to a port nobody listens on: the EP goes pending, then the
     * connection fails with an event. */
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    ck_assert_dat_ok(p->ep_connect_func(ep, (DAT_IA_ADDRESS_PTR)&sa, 1, 5000000, 0, NULL, DAT_QOS_BEST_EFFORT,
                                        DAT_CONNECT_DEFAULT_FLAG));
    DAT_EVENT ev;
    DAT_COUNT nmore;
    ck_assert_dat_ok(p->evd_wait_func(conn, 5000000, 1, &ev, &nmore));
    ck_assert_uint_ne(ev.event_number, DAT_CONNECTION_EVENT_ESTABLISHED);
    /* The flushed receive completes on the DTO EVD. */
    ck_assert_dat_ok(p->evd_wait_func(dto, 5000000, 1, &ev, &nmore));
    ck_assert_dat_ok(p->ep_free_func(ep));
    ck_assert_dat_ok(p->lmr_free_func(lmr));
    ck_assert_dat_ok(p->evd_free_func(dto));
    ck_assert_dat_ok(p->evd_free_func(conn));
    ck_assert_dat_ok(p->pz_free_func(pz));
    ck_assert_dat_ok(p->ia_close_func(ia, DAT_CLOSE_GRACEFUL_FLAG));

    char *b = slurp();
    char lc[32];
    snprintf(lc, sizeof lc, "\"lmr_ctx\":\"0x%x\"", (unsigned)lctx);
    HAS(b, "\"fn\":\"lmr_create\"", "\"len\":256", "\"new\":\"lmr", lc);
    HAS(b, "\"rec\":\"post\"", "\"fn\":\"ep_post_recv\"", "\"op\":\"recv\"", "\"cookie\":\"0xc0ffee\"", lc,
        "\"len\":100", "\"nseg\":1", "\"rc\":\"DAT_SUCCESS\"");
    HAS(b, "\"rec\":\"post\"", "\"op\":\"write_imm\"", "\"imm\":\"0xabcd\"", "\"rmr_ctx\":\"0x77\"",
        "\"remote_addr\":\"0x1000\"", "\"rc\":\"DAT_INVALID_STATE\"");
    HAS(b, "\"fn\":\"ep_connect\"", "\"remote\":\"127.0.0.1\"", "\"conn_qual\":1");
    HAS(b, "\"rec\":\"state\"", "\"to\":\"ACTIVE_CONNECTION_PENDING\"", "\"conn\":\"c");
    HAS(b, "\"rec\":\"state\"", "\"from\":\"ACTIVE_CONNECTION_PENDING\"", "\"to\":\"DISCONNECTED\"");
    HAS(b, "\"rec\":\"event\"", "\"stream\":\"conn\"", "\"type\":\"CONNECTION_");
    HAS(b, "\"rec\":\"event\"", "\"type\":\"DTO_COMPLETION\"", "\"status\":\"ERR_FLUSHED\"", "\"cookie\":\"0xc0ffee\"",
        "\"op\":\"receive\"", "\"ep\":\"ep");
    HASNT(b, "\"type\":\"CONNECTION_ESTABLISHED\"");
    HAS(b, "\"fn\":\"evd_wait\"", "\"got\":\"DTO_COMPLETION\"");
    if (!getenv("KEEP_TRACE")) unlink(g_file);
}
END_TEST

START_TEST(untraced_process_writes_nothing)
{
    unsetenv("SOFTDAT_TRACE");
    snprintf(g_file, sizeof g_file, "/tmp/softdat-test-trace-calls-%d.jsonl", (int)getpid());
    DAT_PROVIDER *p = fx_provider("t-trace4", "lo", DAT_FALSE);
    ck_assert(!SD_TRACE_ON());
    DAT_IA_HANDLE ia = fx_open(p, NULL);
    ck_assert_dat_ok(p->ia_close_func(ia, DAT_CLOSE_GRACEFUL_FLAG));
    ck_assert_int_ne(access(g_file, F_OK), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("trace_calls");
    TCase *tc = tcase_create("records");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, calls_and_events_are_recorded);
    tcase_add_test(tc, ids_are_stable_per_type);
    tcase_add_test(tc, posts_states_and_connection_events);
    tcase_add_test(tc, untraced_process_writes_nothing);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
