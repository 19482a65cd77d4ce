/* softdat diagnostics: one level variable (SOFTDAT_LOG), stderr by default,
 * and pluggable sinks (the trace, emu/trace.h, is one).
 *
 * SOFTDAT_LOG = none|error|warn|info|debug|trace or 0..5 (default: warn).
 * Libraries never print to stdout: applications own it.
 *
 * A line reads
 *   softdat[PID/TID] +SECONDS LEVEL COMPONENT FUNCTION [SCOPE]: message
 * where SECONDS count from the process's first use of the clock below
 * (monotonic, microsecond resolution): relative times are what a reader
 * compares, and they line up with the trace's mono_ns. SCOPE names the
 * object a message is about ("ep3 c2" = EP 3, connection 2), given with
 * SD_OLOG; messages about no one object carry none. */
#ifndef SOFTDAT_EMU_LOG_H
#define SOFTDAT_EMU_LOG_H

#include <stdarg.h>
#include <stdint.h>

enum sd_log_level {
    SD_LOG_NONE = 0,
    SD_LOG_ERROR = 1,
    SD_LOG_WARN = 2,
    SD_LOG_INFO = 3,
    SD_LOG_DEBUG = 4,
    SD_LOG_TRACE = 5,
};

/* Current level, read from SOFTDAT_LOG once (thread-safe, lazy). */
int sd_log_level(void);
/* Parse a level string ("warn", "3", ...); returns -1 if unrecognised. */
int sd_log_parse_level(const char *text);
/* The level's tag ("WARN"), "" when out of range. */
const char *sd_log_level_name(int level);

/* CLOCK_MONOTONIC in nanoseconds, and the process's log epoch on that
 * clock (fixed at first use of either sd_log_epoch_ns or a log line). */
uint64_t sd_mono_ns(void);
uint64_t sd_log_epoch_ns(void);

/* func and scope may be NULL. */
void sd_log_write(int level, const char *component, const char *func, const char *scope, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* ---- sinks
 * Every message that passes the level goes to stderr and to each added
 * sink, on the thread that logged it; a sink must be thread safe and must
 * not log. At most SD_LOG_MAX_SINKS; add returns 0, or -1 when full. */
#define SD_LOG_MAX_SINKS 4
struct sd_log_msg {
    int level;
    uint64_t mono_ns;
    const char *component, *func, *scope; /* never NULL ("" instead) */
    const char *text;                     /* the formatted message */
};
typedef void (*sd_log_sink_fn)(void *arg, const struct sd_log_msg *m);
int sd_log_add_sink(sd_log_sink_fn fn, void *arg);
void sd_log_remove_sink(sd_log_sink_fn fn, void *arg);
/* Keep (1, the default) or silence (0) the stderr sink: tests that check
 * what a sink received without cluttering their log. */
void sd_log_set_stderr(int on);

#define SD_LOG(level, comp, ...)                                          \
    do {                                                                  \
        if ((level) <= sd_log_level())                                    \
            sd_log_write((level), (comp), __func__, NULL, __VA_ARGS__);   \
    } while (0)

/* The same, about one object: scope is a string such as "ep3 c2". */
#define SD_OLOG(level, comp, scope, ...)                                  \
    do {                                                                  \
        if ((level) <= sd_log_level())                                    \
            sd_log_write((level), (comp), __func__, (scope), __VA_ARGS__); \
    } while (0)

#define SD_ERR(comp, ...) SD_LOG(SD_LOG_ERROR, comp, __VA_ARGS__)
#define SD_WARN(comp, ...) SD_LOG(SD_LOG_WARN, comp, __VA_ARGS__)
#define SD_INFO(comp, ...) SD_LOG(SD_LOG_INFO, comp, __VA_ARGS__)
#define SD_DBG(comp, ...) SD_LOG(SD_LOG_DEBUG, comp, __VA_ARGS__)
#define SD_TRACE(comp, ...) SD_LOG(SD_LOG_TRACE, comp, __VA_ARGS__)

#endif
