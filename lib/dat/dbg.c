/*
 * Registry diagnostics: DAT_DBG_TYPE selects classes, DAT_DBG_DEST the sinks.
 * Unlike OFA, the default sink is stderr: a library must never write to the
 * consumer's stdout.
 */
#include "lib/dat/dr.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <syslog.h>

static unsigned dbg_type = DR_DBG_ERROR;
static unsigned dbg_dest = DR_DEST_STDERR;

static unsigned env_mask(const char *name, unsigned dflt)
{
    const char *v = getenv(name);
    char *end;
    unsigned long x;

    if (!v || !*v)
        return dflt;
    x = strtoul(v, &end, 0);
    if (*end != '\0')
        return dflt;
    return (unsigned)x;
}

void dr_dbg_init(void)
{
    dbg_type = env_mask("DAT_DBG_TYPE", DR_DBG_ERROR);
    dbg_dest = env_mask("DAT_DBG_DEST", DR_DEST_STDERR);
}

unsigned dr_dbg_type(void) { return dbg_type; }
unsigned dr_dbg_dest(void) { return dbg_dest; }

void dr_dbg(unsigned type, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;

    if (!(dbg_type & type))
        return;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (dbg_dest & DR_DEST_STDERR)
        fprintf(stderr, "libdat2: %s\n", buf);
    if (dbg_dest & DR_DEST_SYSLOG)
        syslog((type & DR_DBG_ERROR) ? LOG_ERR : LOG_DEBUG, "libdat2: %s", buf);
}
