/* softdat-trace: merge the traces of the processes of one run
 * (SOFTDAT_TRACE files, docs/trace.md) into one timeline and print it as
 * a text sequence view: one column ("lane") per trace file, one row per
 * record, in CLOCK_MONOTONIC order.
 *
 * Both sides of a run on one machine share CLOCK_MONOTONIC; traces from
 * two machines do not: every lane's clock offset against the first is
 * estimated from the frames one side sent and the other received
 * (align.c) and taken off before the merge.
 *
 *   softdat-trace [-a] [-w WIDTH] FILE...   text sequence view
 *   softdat-trace --json FILE...            the merged records, JSON Lines
 *   softdat-trace --html OUT FILE [FILE]    HTML/SVG sequence diagram (html.c)
 */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/softdat-trace/jsonl.h"
#include "tools/softdat-trace/merge.h"

#define TIME_COL 12

static struct entry *g_ent;
static size_t g_n, g_cap;
static const char *g_prog = "softdat-trace";

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: error: ", g_prog);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}

static void usage(FILE *to, int rc)
{
    fprintf(to, "usage: %s [-a|-v] [-w WIDTH] [--json | --html OUT.html] [-n] TRACE.jsonl...\n", g_prog);
    if (to == stderr) {
        fprintf(to, "Try '%s --help' for the options, or see softdat-trace(1).\n", g_prog);
        exit(rc);
    }
    fprintf(to,
            "Merge the SOFTDAT_TRACE files of one run into one timeline (docs/trace.md).\n\n"
            "  -a, --all        every record (default: leave out queries, waits that\n"
            "                   only return an event already shown, the trace header)\n"
            "  -v, --verbose    the same as -a (the tools' -v: more detail)\n"
            "  -w, --width N    width of one lane's column (default 60)\n"
            "  -j, --json       print the merged records as JSON Lines, in time order,\n"
            "                   each with a \"lane\" field (the file it came from)\n"
            "  -H, --html FILE  write a self-contained HTML/SVG sequence diagram of one\n"
            "                   or two traces to FILE (consumer, RNIC, wire, RNIC,\n"
            "                   consumer; open it in any browser)\n"
            "  -n, --no-align   do not correct the lanes' clocks from matched frames\n"
            "  -V, --version    print the version and exit\n"
            "  -h, --help       show this help\n\n"
            "Exit status: 0 success, 1 a file could not be read or parsed, 2 usage.\n");
    exit(rc);
}

static void load(const char *path, int lane, char *label, size_t label_len, int *pid_out)
{
    FILE *f = fopen(path, "r");
    if (f == NULL)
        die("%s: %s", path, strerror(errno));
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    snprintf(label, label_len, "%s", base);
    char *dot = strstr(label, ".jsonl");
    if (dot)
        *dot = '\0';
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    size_t lineno = 0;
    static struct rec r;
    while ((len = getline(&line, &cap, f)) > 0) {
        lineno++;
        if (line[len - 1] == '\n')
            line[--len] = '\0';
        if (len == 0)
            continue;
        const char *err = NULL;
        if (!rec_parse(line, &r, &err))
            die("%s:%zu: not a trace record (%s)", path, lineno, err);
        if (rec_get(&r, "mono_ns") == NULL)
            die("%s:%zu: no mono_ns", path, lineno);
        if (*pid_out == 0)
            *pid_out = (int)rec_u64(&r, "pid");
        if (g_n == g_cap) {
            g_cap = g_cap ? g_cap * 2 : 1024;
            g_ent = realloc(g_ent, g_cap * sizeof *g_ent);
            if (g_ent == NULL)
                die("out of memory");
        }
        g_ent[g_n] = (struct entry){.mono = rec_u64(&r, "mono_ns"), .lane = lane, .seq = g_n, .line = strdup(line)};
        if (g_ent[g_n].line == NULL)
            die("out of memory");
        g_n++;
    }
    free(line);
    fclose(f);
}

static int by_time(const void *a, const void *b)
{
    const struct entry *x = a, *y = b;
    if (x->mono != y->mono)
        return x->mono < y->mono ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* ---------------------------------------------------------------- summaries */

struct out {
    char s[600];
    size_t n;
};

static void add(struct out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add(struct out *o, const char *fmt, ...)
{
    if (o->n >= sizeof o->s - 1)
        return;
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(o->s + o->n, sizeof o->s - o->n, fmt, ap);
    va_end(ap);
    if (w > 0)
        o->n += (size_t)w < sizeof o->s - o->n ? (size_t)w : sizeof o->s - o->n - 1;
}

/* " key=value" for each key present. */
static void kvs(struct out *o, const struct rec *r, const char *const *keys)
{
    for (int i = 0; keys[i]; i++) {
        const char *v = rec_get(r, keys[i]);
        if (v != NULL && strcmp(v, "null") != 0)
            add(o, " %s=%s", keys[i], v);
    }
}

/* One line describing the record; false to leave it out. */
static bool summarize(const struct rec *r, bool all, struct out *o)
{
    const char *kind = rec_get(r, "rec");
    const char *rc = rec_get(r, "rc");
    bool ok = rc == NULL || strcmp(rc, "DAT_SUCCESS") == 0;
    if (kind == NULL)
        return false;
    if (strcmp(kind, "call") == 0) {
        const char *fn = rec_get(r, "fn");
        if (!all && fn && ok && rec_quiet_call(fn))
            return false;
        add(o, "%s", fn ? fn : "?");
        const char *obj = rec_get(r, "obj");
        if (obj && strcmp(obj, "null") != 0)
            add(o, "(%s)", obj);
        static const char *const keys[] = {"name",  "remote", "conn_qual", "ep",   "pdata_len", "mode", "len",
                                           "priv",  "qlen",   "got",       "state", "op",       NULL};
        kvs(o, r, keys);
        const char *nw = rec_get(r, "new");
        if (nw)
            add(o, " -> %s", nw);
        if (!ok)
            add(o, " = %s", rc);
        return true;
    }
    if (strcmp(kind, "post") == 0) {
        add(o, "POST %s(%s)", rec_get(r, "op") ? rec_get(r, "op") : "?",
            rec_get(r, "obj") ? rec_get(r, "obj") : "?");
        static const char *const keys[] = {"len", "cookie", "rmr_ctx", "remote_addr", "imm", "add", "compare",
                                           "swap", NULL};
        kvs(o, r, keys);
        if (!ok)
            add(o, " = %s", rc);
        return true;
    }
    if (strcmp(kind, "event") == 0) {
        add(o, "EVENT %s", rec_get(r, "type") ? rec_get(r, "type") : "?");
        const char *op = rec_get(r, "op"), *st = rec_get(r, "status");
        if (op)
            add(o, " %s", op);
        if (st)
            add(o, " %s", st);
        static const char *const keys[] = {"ext", "len", "cookie", "imm", "ep", NULL};
        kvs(o, r, keys);
        const char *q = rec_get(r, "queued");
        if (q && strcmp(q, "false") == 0)
            add(o, " LOST (queue full)");
        return true;
    }
    if (strcmp(kind, "state") == 0) {
        add(o, "%s", rec_get(r, "ep") ? rec_get(r, "ep") : "ep?");
        if (rec_get(r, "conn"))
            add(o, " %s", rec_get(r, "conn"));
        add(o, ": %s -> %s", rec_get(r, "from") ? rec_get(r, "from") : "?",
            rec_get(r, "to") ? rec_get(r, "to") : "?");
        return true;
    }
    if (strcmp(kind, "log") == 0) {
        add(o, "log %s %s", rec_get(r, "level") ? rec_get(r, "level") : "?", rec_get(r, "fn") ? rec_get(r, "fn") : "");
        if (rec_get(r, "scope"))
            add(o, " [%s]", rec_get(r, "scope"));
        add(o, ": %s", rec_get(r, "msg") ? rec_get(r, "msg") : "");
        return true;
    }
    if (strcmp(kind, "frame") == 0) {
        bool tx = rec_get(r, "dir") && strcmp(rec_get(r, "dir"), "tx") == 0;
        add(o, "%s %s", tx ? "==>" : "<==", rec_get(r, "op") ? rec_get(r, "op") : rec_get(r, "kind"));
        static const char *const keys[] = {"conn",     "stag", "to",  "msn",       "mo", "src_stag", "src_to", "size",
                                           "payload_len", "crc", "term_text", NULL};
        kvs(o, r, keys);
        return true;
    }
    if (strcmp(kind, "memcheck") == 0) {
        const char *al = rec_get(r, "allowed");
        add(o, "MEMCHECK %s %s", rec_get(r, "access") ? rec_get(r, "access") : "?",
            al && strcmp(al, "true") == 0 ? "allowed" : "DENIED");
        static const char *const keys[] = {"reason", "stag", "to", "len", NULL};
        kvs(o, r, keys);
        return true;
    }
    if (strcmp(kind, "trace") == 0) {
        const char *what = rec_get(r, "what");
        if (!all && what && strcmp(what, "open") == 0)
            return false;
        add(o, "trace %s", what ? what : "?");
        return true;
    }
    add(o, "%s", kind);
    return all;
}

int main(int argc, char **argv)
{
    bool all = false, json = false, align = true;
    const char *html = NULL;
    int width = 60;
    static const struct option opts[] = {{"all", no_argument, NULL, 'a'},   {"verbose", no_argument, NULL, 'v'},
                                         {"width", required_argument, NULL, 'w'},
                                         {"json", no_argument, NULL, 'j'}, {"html", required_argument, NULL, 'H'},
                                         {"no-align", no_argument, NULL, 'n'},
                                         {"version", no_argument, NULL, 'V'},
                                         {"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "avw:jH:nVh", opts, NULL)) != -1) {
        switch (c) {
        case 'a':
        case 'v': all = true; break;
        case 'j': json = true; break;
        case 'H': html = optarg; break;
        case 'n': align = false; break;
        case 'w':
            width = atoi(optarg);
            if (width < 20 || width > 400)
                usage(stderr, 2);
            break;
        case 'V': printf("softdat-trace (softdat) %s\n", SOFTDAT_VERSION); return 0;
        case 'h': usage(stdout, 0); break;
        default: usage(stderr, 2);
        }
    }
    int nlanes = argc - optind;
    if (nlanes < 1 || nlanes > MAX_LANES)
        usage(stderr, 2);
    char labels[MAX_LANES][64];
    int pids[MAX_LANES] = {0};
    if (html && nlanes > 2)
        die("--html draws one or two traces");
    for (int i = 0; i < nlanes; i++)
        load(argv[optind + i], i, labels[i], sizeof labels[i], &pids[i]);
    int64_t off[MAX_LANES];
    size_t pairs_with[MAX_LANES];
    size_t pairs = align_lanes(g_ent, g_n, nlanes, off, pairs_with);
    for (int l = 1; l < nlanes; l++) {
        if (!align)
            off[l] = 0;
        if (pairs_with[l] > 0)
            fprintf(stderr, "%s: %s: %zu frames matched with %s, clock offset %+.1f us%s\n", g_prog, labels[l],
                    pairs_with[l], labels[0], (double)off[l] / 1000.0, align ? "" : " (not applied: -n)");
    }
    (void)pairs;
    for (size_t i = 0; i < g_n; i++)
        g_ent[i].mono -= (uint64_t)off[g_ent[i].lane];
    qsort(g_ent, g_n, sizeof *g_ent, by_time);

    if (html) {
        FILE *o = fopen(html, "w");
        if (o == NULL)
            die("%s: %s", html, strerror(errno));
        int rc = render_html(o, g_ent, g_n, nlanes, labels, pids, off);
        if (fclose(o) != 0 || rc != 0)
            die("%s: could not write the diagram", html);
        fprintf(stderr, "%s: wrote %s (%zu records)\n", g_prog, html, g_n);
        return 0;
    }

    if (json) {
        for (size_t i = 0; i < g_n; i++) {
            /* The record with "lane" added after its first field. */
            char *comma = strchr(g_ent[i].line, ',');
            if (comma == NULL)
                continue;
            printf("%.*s,\"lane\":\"%s\"%s\n", (int)(comma - g_ent[i].line), g_ent[i].line, labels[g_ent[i].lane],
                   comma);
        }
        return 0;
    }

    uint64_t t0 = g_n ? g_ent[0].mono : 0;
    printf("%*s", TIME_COL, "time_ms");
    for (int i = 0; i < nlanes; i++) {
        char head[128];
        snprintf(head, sizeof head, "%.63s (pid %d)", labels[i], pids[i]);
        printf("  %-*.*s", width, width, head);
    }
    printf("\n");
    static struct rec r;
    size_t shown = 0;
    for (size_t i = 0; i < g_n; i++) {
        const char *err;
        if (!rec_parse(g_ent[i].line, &r, &err))
            continue;
        struct out o = {.n = 0};
        o.s[0] = '\0';
        if (!summarize(&r, all, &o))
            continue;
        shown++;
        double ms = (double)(g_ent[i].mono - t0) / 1e6;
        printf("%*.3f", TIME_COL, ms);
        int lane = g_ent[i].lane;
        for (int l = 0; l < lane; l++)
            printf("  %-*s", width, l == lane ? "" : "|");
        /* A summary longer than the lane runs on to the right (the last
         * lane has room); earlier lanes are cut with '~'. */
        if (lane < nlanes - 1 && (int)o.n > width)
            printf("  %.*s~", width - 1, o.s);
        else
            printf("  %s", o.s);
        printf("\n");
    }
    fprintf(stderr, "%s: %zu of %zu records from %d trace%s (-a shows all)\n", g_prog, shown, g_n, nlanes,
            nlanes == 1 ? "" : "s");
    return 0;
}
