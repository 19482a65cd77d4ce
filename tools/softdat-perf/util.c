/* softdat-perf: clocks, statistics, parsing and error text. */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tools/softdat-perf/perf.h"

const char *perf_prog = "softdat-perf";
volatile int perf_stop;

double perf_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static const char *const test_names[T_COUNT] = {
    "send_lat", "write_lat", "read_lat", "send_bw", "write_bw", "read_bw",
};

const char *perf_test_name(int t)
{
    return (t >= 0 && t < T_COUNT) ? test_names[t] : "?";
}

int perf_test_is_lat(int t)
{
    return t == T_SEND_LAT || t == T_WRITE_LAT || t == T_READ_LAT;
}

/* Send and Write ping-pongs move the same bytes on the wire as a TCP
 * ping-pong; a Read is a small request answered by the data; Send and Write
 * streams are a TCP stream; a Read stream is pipelined requests. */
enum raw_pattern perf_test_raw(int t)
{
    switch (t) {
    case T_SEND_LAT:
    case T_WRITE_LAT: return RAW_PINGPONG;
    case T_READ_LAT: return RAW_REQRESP;
    case T_SEND_BW:
    case T_WRITE_BW: return RAW_STREAM;
    default: return RAW_PULL;
    }
}

const char *perf_raw_name(enum raw_pattern p)
{
    static const char *const n[RAW_NPAT] = { "tcp_pingpong", "tcp_reqresp", "tcp_stream",
                                             "tcp_pull" };
    return (unsigned)p < RAW_NPAT ? n[p] : "?";
}

const char *perf_dat_strerror(DAT_RETURN ret, char *buf, size_t len)
{
    const char *major = NULL, *minor = NULL;

    if (dat_strerror(ret, &major, &minor) != DAT_SUCCESS || major == NULL)
        major = "unknown DAT error";
    if (minor != NULL && minor[0] != '\0')
        snprintf(buf, len, "%s %s (0x%08x)", major, minor, (unsigned)ret);
    else
        snprintf(buf, len, "%s (0x%08x)", major, (unsigned)ret);
    return buf;
}

int perf_parse_size(const char *s, uint32_t *out)
{
    char *end = NULL;
    unsigned long long v;

    if (s == NULL || !isdigit((unsigned char)*s))
        return -1;
    v = strtoull(s, &end, 10);
    switch (*end) {
    case 'k': case 'K': v <<= 10; end++; break;
    case 'm': case 'M': v <<= 20; end++; break;
    default: break;
    }
    if ((*end == 'i' || *end == 'I') && (end[1] == 'B' || end[1] == 'b'))
        end += 2;
    else if (*end == 'B' || *end == 'b')
        end++;
    if (*end != '\0' || v == 0 || v > MAX_SIZE_LIMIT)
        return -1;
    *out = (uint32_t)v;
    return 0;
}

int perf_parse_sizes(const char *list, uint32_t *sizes, int *n)
{
    char buf[512], *save = NULL, *tok;
    int count = 0;

    if (strlen(list) >= sizeof(buf))
        return -1;
    strcpy(buf, list);
    for (tok = strtok_r(buf, ", ", &save); tok != NULL; tok = strtok_r(NULL, ", ", &save)) {
        if (count >= MAX_SIZES || perf_parse_size(tok, &sizes[count]) != 0)
            return -1;
        count++;
    }
    if (count == 0)
        return -1;
    *n = count;
    return 0;
}

void perf_fmt_size(uint32_t size, char *buf, size_t len)
{
    if (size >= (1u << 20) && size % (1u << 20) == 0)
        snprintf(buf, len, "%uM", size >> 20);
    else if (size >= 1024 && size % 1024 == 0)
        snprintf(buf, len, "%uK", size >> 10);
    else
        snprintf(buf, len, "%u", size);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void perf_stats(double *v, long n, double *median, double *p99)
{
    if (n <= 0) {
        *median = *p99 = 0;
        return;
    }
    qsort(v, (size_t)n, sizeof(*v), cmp_double);
    *median = (n % 2) ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
    long i = (long)((double)n * 0.99 + 0.999999) - 1; /* nearest rank */
    if (i < 0)
        i = 0;
    if (i >= n)
        i = n - 1;
    *p99 = v[i];
}

double perf_median(double *v, int n)
{
    double m, p;
    perf_stats(v, n, &m, &p);
    return m;
}

void perf_progress(const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "%s: ", perf_prog);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

void perf_err(const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "%s: error: ", perf_prog);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

uint32_t perf_max_size(const struct perf_opts *o)
{
    uint32_t m = 64;
    for (int i = 0; i < o->nsizes; i++)
        if (o->sizes[i] > m)
            m = o->sizes[i];
    return m;
}
