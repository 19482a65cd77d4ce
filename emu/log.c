#include "emu/log.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static int g_level = SD_LOG_WARN;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static const char *const g_tags[] = {"", "ERROR", "WARN", "INFO", "DEBUG", "TRACE"};

int sd_log_parse_level(const char *text)
{
    static const char *const names[] = {"none", "error", "warn", "info", "debug", "trace"};
    if (text == NULL || *text == '\0')
        return -1;
    for (int i = 0; i < (int)(sizeof(names) / sizeof(names[0])); i++)
        if (strcasecmp(text, names[i]) == 0)
            return i;
    if (text[0] >= '0' && text[0] <= '5' && text[1] == '\0')
        return text[0] - '0';
    return -1;
}

const char *sd_log_level_name(int level)
{
    return g_tags[level < 0 || level > 5 ? 0 : level];
}

static void read_env(void)
{
    const char *env = getenv("SOFTDAT_LOG");
    int level = sd_log_parse_level(env);
    if (level >= 0)
        g_level = level;
    else if (env != NULL && *env != '\0')
        fprintf(stderr, "softdat: SOFTDAT_LOG=%s not understood (none|error|warn|info|debug|trace)\n", env);
}

int sd_log_level(void)
{
    pthread_once(&g_once, read_env);
    return g_level;
}

uint64_t sd_mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t g_epoch;
static pthread_once_t g_epoch_once = PTHREAD_ONCE_INIT;
static void set_epoch(void)
{
    g_epoch = sd_mono_ns();
}

uint64_t sd_log_epoch_ns(void)
{
    pthread_once(&g_epoch_once, set_epoch);
    return g_epoch;
}

/* Sinks: a fixed table read without a lock on every message. A slot is
 * published by storing fn last (release) and read fn first (acquire); a
 * removed sink may still see a message already on its way, so the trace
 * removes its sink only at exit. */
static struct {
    _Atomic(sd_log_sink_fn) fn;
    void *_Atomic arg;
} g_sinks[SD_LOG_MAX_SINKS];
static pthread_mutex_t g_sink_mu = PTHREAD_MUTEX_INITIALIZER;
static atomic_int g_stderr_on = 1;

int sd_log_add_sink(sd_log_sink_fn fn, void *arg)
{
    int rc = -1;
    pthread_mutex_lock(&g_sink_mu);
    for (int i = 0; i < SD_LOG_MAX_SINKS && rc != 0; i++) {
        if (atomic_load(&g_sinks[i].fn) == NULL) {
            atomic_store(&g_sinks[i].arg, arg);
            atomic_store_explicit(&g_sinks[i].fn, fn, memory_order_release);
            rc = 0;
        }
    }
    pthread_mutex_unlock(&g_sink_mu);
    return rc;
}

void sd_log_remove_sink(sd_log_sink_fn fn, void *arg)
{
    pthread_mutex_lock(&g_sink_mu);
    for (int i = 0; i < SD_LOG_MAX_SINKS; i++)
        if (atomic_load(&g_sinks[i].fn) == fn && atomic_load(&g_sinks[i].arg) == arg)
            atomic_store(&g_sinks[i].fn, NULL);
    pthread_mutex_unlock(&g_sink_mu);
}

void sd_log_set_stderr(int on)
{
    atomic_store(&g_stderr_on, on != 0);
}

void sd_log_write(int level, const char *component, const char *func, const char *scope, const char *fmt, ...)
{
    char text[900];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);

    uint64_t epoch = sd_log_epoch_ns();
    uint64_t now = sd_mono_ns();
    struct sd_log_msg m = {.level = level,
                           .mono_ns = now,
                           .component = component ? component : "-",
                           .func = func ? func : "",
                           .scope = scope ? scope : "",
                           .text = text};
    if (atomic_load(&g_stderr_on)) {
        uint64_t rel = now >= epoch ? now - epoch : 0;
        char line[1200];
        int n = snprintf(line, sizeof line, "softdat[%d/%ld] +%llu.%06llu %s %s %s%s%s%s: %s\n", (int)getpid(),
                         (long)syscall(SYS_gettid), (unsigned long long)(rel / 1000000000u),
                         (unsigned long long)(rel % 1000000000u / 1000u), sd_log_level_name(level), m.component,
                         m.func, *m.scope ? " [" : "", m.scope, *m.scope ? "]" : "", text);
        if (n >= (int)sizeof line) { /* keep the newline on a cut line */
            line[sizeof line - 2] = '\n';
            line[sizeof line - 1] = '\0';
        }
        /* One fputs per line so lines from several threads never interleave. */
        fputs(line, stderr);
    }
    for (int i = 0; i < SD_LOG_MAX_SINKS; i++) {
        sd_log_sink_fn fn = atomic_load_explicit(&g_sinks[i].fn, memory_order_acquire);
        if (fn != NULL)
            fn(atomic_load(&g_sinks[i].arg), &m);
    }
}
