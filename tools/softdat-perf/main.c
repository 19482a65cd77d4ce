/* softdat-perf: a perftest-like benchmark over the DAT API, with a raw-TCP
 * baseline measured in the same run.
 *
 *   server: softdat-perf -s [-P IA] [-p PORT]
 *   client: softdat-perf -c HOST [-P IA] [-p PORT] [options] [TEST...]
 *
 * The server listens with a DAT PSP on conn_qual PORT and with a plain TCP
 * socket on PORT+1 (raw-TCP baseline). See softdat-perf(1) and docs/perf.md.
 */
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/softdat-perf/perf.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: %s -s [options]             (server)\n"
            "       %s -c HOST [options] [TEST...] (client)\n"
            "A perftest-like benchmark of a DAT provider, with a raw-TCP baseline.\n"
            "\n"
            "TEST: send_lat write_lat read_lat send_bw write_bw read_bw, or lat, bw, all\n"
            "      (default all)\n"
            "\n"
            "  -s, --server           serve clients (DAT conn_qual PORT, raw TCP PORT+1)\n"
            "  -c, --client HOST      run the tests against the server on HOST\n"
            "  -P, --ia NAME          DAT interface adapter (default softdat-lo)\n"
            "  -p, --port PORT        DAT conn_qual; raw TCP uses PORT+1 (default %u)\n"
            "  -m, --sizes LIST       message sizes, e.g. 64,4K,64K,1M (the default)\n"
            "  -n, --iters N          latency samples / messages per bandwidth repetition\n"
            "                         (default 5000)\n"
            "  -t, --time SEC         time cap per test and size (default 1.0)\n"
            "  -r, --reps N           bandwidth repetitions, median reported (default 5)\n"
            "  -w, --window N         outstanding operations in bandwidth tests (default 32)\n"
            "  -W, --poll             poll completions (dat_evd_dequeue spin) instead of\n"
            "                         blocking in dat_evd_wait\n"
            "      --crc on|off|auto  set SOFTDAT_CRC before dat_ia_open (start the server\n"
            "                         with the same choice)\n"
            "      --raw-tcp          only the raw-TCP baseline (no DAT; server: no IA)\n"
            "      --connect-rate N   no server: N raw TCP connections set up in one burst on\n"
            "                         127.0.0.1, timed as dtestcm times DAT connections\n"
            "      --presize-fds      with --connect-rate: grow the descriptor table before\n"
            "                         the burst, as a softdat IA does at dat_ia_open\n"
            "      --compare          the DAT tests, then the raw-TCP baseline, side by side\n"
            "      --json             print the results as JSON instead of a table\n"
            "      --persist          server: keep serving after a client session\n"
            "      --timeout SEC      longest single wait before a test fails (default 10)\n"
            "      --idle SEC         server: exit if no client comes (default 300)\n"
            "  -v, --verbose          more detail on stderr: each result as it comes,\n"
            "                         connection details, the negotiated CRC\n"
            "  -V, --version          print the version and exit\n"
            "  -h, --help             show this help\n"
            "\n"
            "Exit status: 0 success, 1 a test failed, 2 usage, 3 cannot open the IA or\n"
            "connect, 4 the DAT provider answered DAT_NOT_IMPLEMENTED.\n",
            perf_prog, perf_prog, DEFAULT_PORT);
}

/* What a mistyped command line gets: the synopsis and where to look. */
static void short_usage(void)
{
    fprintf(stderr,
            "usage: %s -s [options]  |  %s -c HOST [options] [TEST...]\n"
            "Try '%s --help' for the options, or see softdat-perf(1).\n",
            perf_prog, perf_prog, perf_prog);
}

static int select_test(struct perf_opts *o, const char *name)
{
    if (strcmp(name, "all") == 0) {
        for (int t = 0; t < T_COUNT; t++)
            o->tests[t] = 1;
        return 0;
    }
    if (strcmp(name, "lat") == 0 || strcmp(name, "bw") == 0) {
        for (int t = 0; t < T_COUNT; t++)
            if (perf_test_is_lat(t) == (name[0] == 'l'))
                o->tests[t] = 1;
        return 0;
    }
    for (int t = 0; t < T_COUNT; t++)
        if (strcmp(name, perf_test_name(t)) == 0) {
            o->tests[t] = 1;
            return 0;
        }
    return -1;
}

static int parse_double(const char *s, double lo, double hi, double *out)
{
    char *end = NULL;
    double v = strtod(s, &end);
    if (end == s || *end != '\0' || !(v >= lo && v <= hi))
        return -1;
    *out = v;
    return 0;
}

static int parse_long(const char *s, long lo, long hi, long *out)
{
    char *end = NULL;
    long v = strtol(s, &end, 10);
    if (end == s || *end != '\0' || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

static void on_signal(int sig)
{
    (void)sig;
    perf_stop = 1;
}

/* ------------------------------------------------------------ output */

static void cell_f(char *buf, size_t len, int ok, double v, int prec)
{
    if (ok)
        snprintf(buf, len, "%.*f", prec, v);
    else
        snprintf(buf, len, "-");
}

/* The CRC as the connection negotiated it, which is what the figures were
 * measured with; "?" when the provider does not say (not softdat). */
static const char *crc_state(const struct perf_opts *o, const struct perf_results *res)
{
    if (o->raw_only)
        return "-";
    return res->crc[0] ? res->crc : "?";
}

static int anything_ran(const struct perf_opts *o, const struct perf_results *res)
{
    for (int t = 0; t < T_COUNT; t++)
        for (int i = 0; i < o->nsizes; i++)
            if (res->dat[t][i].valid)
                return 1;
    for (int p = 0; p < RAW_NPAT; p++)
        for (int i = 0; i < o->nsizes; i++)
            if (res->raw[p][i].valid)
                return 1;
    return 0;
}

static void print_table(const struct perf_opts *o, const struct perf_results *res)
{
    char sz[16], a[6][24];

    printf("# softdat-perf %s: %s, IA %s, %s completions, crc %s, window %d\n", SOFTDAT_VERSION,
           o->raw_only ? "raw TCP only" : o->compare ? "DAT vs raw TCP" : "DAT",
           o->raw_only ? "-" : o->ia_name, o->poll ? "polled" : "blocking", crc_state(o, res),
           o->window);
    printf("# lat: one-way us (RTT/2) for send/write, full round trip for read; GB/s = 1e9 B/s\n");
    printf("# ratio: softdat/raw (latency: >1 is slower; bandwidth: <1 is slower)\n");
    printf("%-12s %6s %8s %10s %10s %8s %8s %12s %10s %7s\n", "test", "size", "iters", "lat_us",
           "p99_us", "GB/s", "Mmsg/s", "raw_lat_us", "raw_GB/s", "ratio");
    if (o->raw_only) {
        for (int p = 0; p < RAW_NPAT; p++) {
            int used = 0;
            for (int t = 0; t < T_COUNT; t++)
                used |= o->tests[t] && perf_test_raw(t) == (enum raw_pattern)p;
            if (!used)
                continue;
            int lat = p == RAW_PINGPONG || p == RAW_REQRESP;
            for (int i = 0; i < o->nsizes; i++) {
                const struct perf_result *r = &res->raw[p][i];
                perf_fmt_size(o->sizes[i], sz, sizeof(sz));
                cell_f(a[0], sizeof(a[0]), r->valid && lat, r->lat_med_us, 2);
                cell_f(a[1], sizeof(a[1]), r->valid && lat, r->lat_p99_us, 2);
                cell_f(a[2], sizeof(a[2]), r->valid && !lat, r->gbps, 4);
                cell_f(a[3], sizeof(a[3]), r->valid && !lat, r->mmsgs, 3);
                printf("%-12s %6s %8ld %10s %10s %8s %8s %12s %10s %7s\n",
                       perf_raw_name((enum raw_pattern)p), sz, r->valid ? r->iters : 0, a[0], a[1],
                       a[2], a[3], "-", "-", "-");
            }
        }
        return;
    }
    for (int t = 0; t < T_COUNT; t++) {
        if (!o->tests[t])
            continue;
        int lat = perf_test_is_lat(t);
        for (int i = 0; i < o->nsizes; i++) {
            const struct perf_result *r = &res->dat[t][i];
            const struct perf_result *b = &res->raw[perf_test_raw(t)][i];
            perf_fmt_size(o->sizes[i], sz, sizeof(sz));
            cell_f(a[0], sizeof(a[0]), r->valid && lat, r->lat_med_us, 2);
            cell_f(a[1], sizeof(a[1]), r->valid && lat, r->lat_p99_us, 2);
            cell_f(a[2], sizeof(a[2]), r->valid && !lat, r->gbps, 4);
            cell_f(a[3], sizeof(a[3]), r->valid && !lat, r->mmsgs, 3);
            cell_f(a[4], sizeof(a[4]), b->valid, lat ? b->lat_med_us : b->gbps, lat ? 2 : 4);
            double ratio = 0;
            int rok = r->valid && b->valid;
            if (rok)
                ratio = lat ? r->lat_med_us / b->lat_med_us : r->gbps / b->gbps;
            rok = rok && isfinite(ratio);
            cell_f(a[5], sizeof(a[5]), rok, ratio, 2);
            printf("%-12s %6s %8ld %10s %10s %8s %8s %12s %10s %7s%s\n", perf_test_name(t), sz,
                   r->valid ? r->iters : 0, r->valid ? a[0] : "n/a", r->valid ? a[1] : "n/a",
                   r->valid ? a[2] : "n/a", r->valid ? a[3] : "n/a", lat ? a[4] : "-",
                   lat ? "-" : a[4], a[5], r->valid || r->error[0] == '\0' ? "" : "  (failed)");
        }
    }
}

static void json_num(const char *key, int ok, double v, int comma)
{
    if (ok && isfinite(v))
        printf("\"%s\": %.6g%s", key, v, comma ? ", " : "");
    else
        printf("\"%s\": null%s", key, comma ? ", " : "");
}

static void json_str(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            printf("\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            printf("\\u%04x", (unsigned char)*s);
        else
            putchar(*s);
    }
    putchar('"');
}

static void print_json(const struct perf_opts *o, const struct perf_results *res, int rc)
{
    int first = 1;
    printf("{\"tool\": \"softdat-perf\", \"mode\": \"%s\", \"ia\": ",
           o->raw_only ? "raw" : o->compare ? "compare" : "dat");
    json_str(o->ia_name);
    printf(", \"version\": \"%s\", \"completion\": \"%s\", \"crc\": \"%s\", \"crc_requested\": \"%s\", "
           "\"window\": %d, \"exit\": %d,\n \"results\": [",
           SOFTDAT_VERSION, o->poll ? "poll" : "wait", crc_state(o, res),
           o->crc == CRC_ON ? "on" : o->crc == CRC_OFF ? "off" : o->crc == CRC_AUTO ? "auto" : "default",
           o->window, rc);
    for (int t = 0; t < T_COUNT; t++) {
        if (!o->tests[t])
            continue;
        int lat = perf_test_is_lat(t);
        for (int i = 0; i < o->nsizes; i++) {
            const struct perf_result *r = &res->dat[t][i];
            const struct perf_result *b = &res->raw[perf_test_raw(t)][i];
            int dv = r->valid && !o->raw_only;
            printf("%s\n  {\"test\": \"%s\", \"size\": %u, ", first ? "" : ",", perf_test_name(t),
                   o->sizes[i]);
            first = 0;
            printf("\"iters\": %ld, ", dv ? r->iters : 0);
            json_num("lat_median_us", dv && lat, r->lat_med_us, 1);
            json_num("lat_p99_us", dv && lat, r->lat_p99_us, 1);
            json_num("gbps", dv && !lat, r->gbps, 1);
            json_num("mmsgs", dv && !lat, r->mmsgs, 1);
            printf("\"raw\": {\"pattern\": \"%s\", \"iters\": %ld, ",
                   perf_raw_name(perf_test_raw(t)), b->valid ? b->iters : 0);
            json_num("lat_median_us", b->valid && lat, b->lat_med_us, 1);
            json_num("lat_p99_us", b->valid && lat, b->lat_p99_us, 1);
            json_num("gbps", b->valid && !lat, b->gbps, 1);
            json_num("mmsgs", b->valid && !lat, b->mmsgs, 0);
            printf("}, ");
            double ratio = lat ? r->lat_med_us / b->lat_med_us : r->gbps / b->gbps;
            json_num("ratio", dv && b->valid, ratio, 1);
            printf("\"error\": ");
            json_str(r->error);
            printf("}");
        }
    }
    printf("\n]}\n");
}

/* ------------------------------------------------------------ main */

int main(int argc, char **argv)
{
    enum { O_CRC = 256, O_RAW, O_COMPARE, O_JSON, O_PERSIST, O_TIMEOUT, O_IDLE, O_CONNRATE, O_PRESIZE };
    static const struct option longopts[] = {
        { "server", no_argument, NULL, 's' },
        { "client", required_argument, NULL, 'c' },
        { "ia", required_argument, NULL, 'P' },
        { "port", required_argument, NULL, 'p' },
        { "sizes", required_argument, NULL, 'm' },
        { "iters", required_argument, NULL, 'n' },
        { "time", required_argument, NULL, 't' },
        { "reps", required_argument, NULL, 'r' },
        { "window", required_argument, NULL, 'w' },
        { "poll", no_argument, NULL, 'W' },
        { "crc", required_argument, NULL, O_CRC },
        { "raw-tcp", no_argument, NULL, O_RAW },
        { "connect-rate", required_argument, NULL, O_CONNRATE },
        { "presize-fds", no_argument, NULL, O_PRESIZE },
        { "compare", no_argument, NULL, O_COMPARE },
        { "json", no_argument, NULL, O_JSON },
        { "persist", no_argument, NULL, O_PERSIST },
        { "timeout", required_argument, NULL, O_TIMEOUT },
        { "idle", required_argument, NULL, O_IDLE },
        { "verbose", no_argument, NULL, 'v' },
        { "help", no_argument, NULL, 'h' },
        { "version", no_argument, NULL, 'V' },
        { NULL, 0, NULL, 0 },
    };
    struct perf_opts o;
    int opt;
    long v, conn_rate = 0;

    if (argc > 0 && argv[0] != NULL && strrchr(argv[0], '/') != NULL)
        perf_prog = strrchr(argv[0], '/') + 1;
    memset(&o, 0, sizeof(o));
    o.ia_name = "softdat-lo";
    o.port = DEFAULT_PORT;
    o.iters = 5000;
    o.time_cap = 1.0;
    o.reps = 5;
    o.window = 32;
    o.op_timeout = 10.0;
    o.idle_timeout = 300.0;
    perf_parse_sizes("64,4K,64K,1M", o.sizes, &o.nsizes);

    while ((opt = getopt_long(argc, argv, "sc:P:p:m:n:t:r:w:WvVh", longopts, NULL)) != -1) {
        switch (opt) {
        case 's': o.server = 1; break;
        case 'c': o.host = optarg; break;
        case 'P': o.ia_name = optarg; break;
        case 'p':
            if (parse_long(optarg, 1, 65534, &v) != 0)
                goto bad;
            o.port = (unsigned)v;
            break;
        case 'm':
            if (perf_parse_sizes(optarg, o.sizes, &o.nsizes) != 0) {
                fprintf(stderr, "%s: bad size list '%s' (1 to 64M each, at most %d)\n", perf_prog,
                        optarg, MAX_SIZES);
                return PERF_EXIT_USAGE;
            }
            break;
        case 'n':
            if (parse_long(optarg, 1, 10000000, &o.iters) != 0)
                goto bad;
            break;
        case 't':
            if (parse_double(optarg, 0.001, 3600, &o.time_cap) != 0)
                goto bad;
            break;
        case 'r':
            if (parse_long(optarg, 1, 64, &v) != 0)
                goto bad;
            o.reps = (int)v;
            break;
        case 'w':
            if (parse_long(optarg, 1, MAX_WINDOW, &v) != 0)
                goto bad;
            o.window = (int)v;
            break;
        case 'W': o.poll = 1; break;
        case O_CRC:
            if (strcmp(optarg, "on") == 0) o.crc = CRC_ON;
            else if (strcmp(optarg, "off") == 0) o.crc = CRC_OFF;
            else if (strcmp(optarg, "auto") == 0) o.crc = CRC_AUTO;
            else goto bad;
            break;
        case O_RAW: o.raw_only = 1; break;
        case O_CONNRATE:
            if (parse_long(optarg, 1, 100000, &conn_rate) != 0)
                goto bad;
            break;
        case O_PRESIZE: o.presize_fds = 1; break;
        case O_COMPARE: o.compare = 1; break;
        case O_JSON: o.json = 1; break;
        case O_PERSIST: o.persist = 1; break;
        case O_TIMEOUT:
            if (parse_double(optarg, 0.1, 3600, &o.op_timeout) != 0)
                goto bad;
            break;
        case O_IDLE:
            if (parse_double(optarg, 1, 86400 * 7, &o.idle_timeout) != 0)
                goto bad;
            break;
        case 'v': o.verbose = 1; perf_verbose = 1; break;
        case 'V': printf("%s (softdat) %s\n", perf_prog, SOFTDAT_VERSION); return PERF_EXIT_OK;
        case 'h': usage(stdout); return PERF_EXIT_OK;
        default: short_usage(); return PERF_EXIT_USAGE;
        }
    }
    for (int i = optind; i < argc; i++)
        if (select_test(&o, argv[i]) != 0) {
            fprintf(stderr, "%s: unknown test '%s'\n", perf_prog, argv[i]);
            return PERF_EXIT_USAGE;
        }
    {
        int any = 0;
        for (int t = 0; t < T_COUNT; t++)
            any |= o.tests[t];
        if (!any)
            select_test(&o, "all");
    }
    if (conn_rate > 0) {
        signal(SIGPIPE, SIG_IGN);
        return perf_connect_rate(&o, conn_rate);
    }
    if (o.server == (o.host != NULL)) {
        fprintf(stderr, "%s: give exactly one of -s (server) and -c HOST (client)\n", perf_prog);
        short_usage();
        return PERF_EXIT_USAGE;
    }
    if (o.raw_only && o.compare) {
        fprintf(stderr, "%s: --raw-tcp and --compare exclude each other\n", perf_prog);
        return PERF_EXIT_USAGE;
    }

    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    if (o.server)
        return perf_server_run(&o);

    struct perf_results *res = calloc(1, sizeof(*res));
    int rc = PERF_EXIT_OK, rc_raw = PERF_EXIT_OK;
    if (res == NULL)
        return PERF_EXIT_FAIL;
    {
        int steps = 0, pats[RAW_NPAT] = { 0 };
        for (int t = 0; t < T_COUNT; t++)
            if (o.tests[t]) {
                steps += o.raw_only ? 0 : o.nsizes;
                pats[perf_test_raw(t)] = 1;
            }
        if (o.raw_only || o.compare)
            for (int p = 0; p < RAW_NPAT; p++)
                steps += pats[p] * o.nsizes;
        perf_status_begin(steps);
    }
    if (!o.raw_only) {
        int connected = 0;
        rc = dat_client_run(&o, res, o.compare, &connected);
        if (rc == PERF_EXIT_NOTIMPL)
            perf_err("the DAT provider behind %s does not implement a call this benchmark needs "
                     "(DAT_NOT_IMPLEMENTED); DAT figures are missing", o.ia_name);
        /* The server waits for this session until it hears from us. */
        if (!connected && (!o.compare || rc == PERF_EXIT_CONNECT))
            raw_client_bye(&o);
    }
    /* No baseline after a failed open or connect: the run is over. */
    if ((o.raw_only || o.compare) && rc != PERF_EXIT_CONNECT)
        rc_raw = raw_client_run(&o, res);
    perf_status_end();
    if (o.json)
        print_json(&o, res, rc != PERF_EXIT_OK ? rc : rc_raw);
    else if (anything_ran(&o, res))
        print_table(&o, res);
    fflush(stdout);
    free(res);
    /* The DAT verdict first: DAT_NOT_IMPLEMENTED stays recognisable (4). */
    return rc != PERF_EXIT_OK ? rc : rc_raw;
bad:
    fprintf(stderr, "%s: bad value '%s' for -%c\n", perf_prog, optarg, opt < 256 ? opt : '-');
    short_usage();
    return PERF_EXIT_USAGE;
}
