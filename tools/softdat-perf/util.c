/* softdat-perf: clocks, statistics, parsing and error text. */
#include <ctype.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tools/softdat-perf/perf.h"

const char *perf_prog = "softdat-perf";
volatile int perf_stop;
int perf_verbose;

/* Progress of a client run: a thread that shows the running step every
 * second (a line) or, when stderr is a terminal, redraws a bar. Messages
 * printed meanwhile take the lock and wipe the bar first. */
static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t thread;
    int running, quit, tty, bar_shown;
    int done, total;            /* done: counted steps started so far */
    double t0, step_t0;
    char what[96];
} st = { .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER };

static void bar_wipe_locked(void)
{
    if (st.bar_shown) {
        fputs("\r\033[K", stderr);
        st.bar_shown = 0;
    }
}

static void status_show_locked(void)
{
    double now = perf_now();
    if (st.tty) {
        char bar[21];
        int fill = st.total > 0 && st.done > 0 ? ((st.done - 1) * 20) / st.total : 0;
        for (int i = 0; i < 20; i++)
            bar[i] = i < fill ? '#' : '.';
        bar[20] = '\0';
        fprintf(stderr, "\r\033[K%s: [%s] %d/%d %s (%.0f s)", perf_prog, bar, st.done, st.total,
                st.what, now - st.t0);
        st.bar_shown = 1;
    } else {
        fprintf(stderr, "%s: step %d/%d: %s (%.1f s, %.0f s in all)\n", perf_prog,
                st.done, st.total, st.what, now - st.step_t0, now - st.t0);
    }
    fflush(stderr);
}

static void *status_thread(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&st.mu);
    while (!st.quit) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        long step_ns = st.tty ? 250000000L : 1000000000L;
        ts.tv_nsec += step_ns;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&st.cv, &st.mu, &ts);
        if (!st.quit && st.what[0] != '\0')
            status_show_locked();
    }
    bar_wipe_locked();
    pthread_mutex_unlock(&st.mu);
    return NULL;
}

void perf_status_begin(int total)
{
    pthread_mutex_lock(&st.mu);
    st.total = total;
    st.done = 0;
    st.t0 = st.step_t0 = perf_now();
    st.what[0] = '\0';
    st.quit = 0;
    st.tty = isatty(STDERR_FILENO);
    st.running = pthread_create(&st.thread, NULL, status_thread, NULL) == 0;
    pthread_mutex_unlock(&st.mu);
}

void perf_status_step(int counts, const char *fmt, ...)
{
    va_list ap;
    pthread_mutex_lock(&st.mu);
    if (counts && st.done < st.total)
        st.done++;
    va_start(ap, fmt);
    vsnprintf(st.what, sizeof(st.what), fmt, ap);
    va_end(ap);
    st.step_t0 = perf_now();
    pthread_mutex_unlock(&st.mu);
}

void perf_status_end(void)
{
    pthread_mutex_lock(&st.mu);
    int running = st.running;
    st.quit = 1;
    st.running = 0;
    pthread_cond_signal(&st.cv);
    pthread_mutex_unlock(&st.mu);
    if (running)
        pthread_join(st.thread, NULL);
}

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

static void emit(const char *tag, const char *fmt, va_list ap)
{
    pthread_mutex_lock(&st.mu);
    bar_wipe_locked();
    fprintf(stderr, "%s: %s", perf_prog, tag);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    pthread_mutex_unlock(&st.mu);
}

void perf_progress(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    emit("", fmt, ap);
    va_end(ap);
}

void perf_detail(const char *fmt, ...)
{
    va_list ap;
    if (!perf_verbose)
        return;
    va_start(ap, fmt);
    emit("", fmt, ap);
    va_end(ap);
}

void perf_err(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    emit("error: ", fmt, ap);
    va_end(ap);
}

uint32_t perf_max_size(const struct perf_opts *o)
{
    uint32_t m = 64;
    for (int i = 0; i < o->nsizes; i++)
        if (o->sizes[i] > m)
            m = o->sizes[i];
    return m;
}
