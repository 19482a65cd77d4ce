/* softdat diagnostics: one sink (stderr), one level variable (SOFTDAT_LOG).
 *
 * SOFTDAT_LOG = none|error|warn|info|debug|trace or 0..5 (default: warn).
 * Libraries never print to stdout: applications own it. */
#ifndef SOFTDAT_EMU_LOG_H
#define SOFTDAT_EMU_LOG_H

#include <stdarg.h>

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
void sd_log_write(int level, const char *component, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define SD_LOG(level, comp, ...)                                   \
    do {                                                           \
        if ((level) <= sd_log_level())                             \
            sd_log_write((level), (comp), __VA_ARGS__);            \
    } while (0)

#define SD_ERR(comp, ...) SD_LOG(SD_LOG_ERROR, comp, __VA_ARGS__)
#define SD_WARN(comp, ...) SD_LOG(SD_LOG_WARN, comp, __VA_ARGS__)
#define SD_INFO(comp, ...) SD_LOG(SD_LOG_INFO, comp, __VA_ARGS__)
#define SD_DBG(comp, ...) SD_LOG(SD_LOG_DEBUG, comp, __VA_ARGS__)
#define SD_TRACE(comp, ...) SD_LOG(SD_LOG_TRACE, comp, __VA_ARGS__)

#endif
