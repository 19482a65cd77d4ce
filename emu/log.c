#include "emu/log.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static int g_level = SD_LOG_WARN;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

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

void sd_log_write(int level, const char *component, const char *fmt, ...)
{
    static const char *const tags[] = {"", "ERROR", "WARN", "INFO", "DEBUG", "TRACE"};
    char line[1024];
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    int n = snprintf(line, sizeof line, "softdat[%d/%ld] %ld.%06ld %s %s: ", (int)getpid(),
                     (long)syscall(SYS_gettid), (long)ts.tv_sec, ts.tv_nsec / 1000L,
                     tags[level < 0 || level > 5 ? 0 : level], component ? component : "-");
    va_list ap;
    va_start(ap, fmt);
    if (n >= 0 && (size_t)n < sizeof line)
        vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
    va_end(ap);
    /* One fputs per line so lines from several threads never interleave. */
    size_t len = strlen(line);
    if (len + 1 < sizeof line) {
        line[len] = '\n';
        line[len + 1] = '\0';
    }
    fputs(line, stderr);
}
