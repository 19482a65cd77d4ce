/* softdat-trace: reading one trace record (docs/trace.md) into a flat
 * key -> value table. The trace's records are flat objects whose values
 * are strings, integers, booleans, null, or (for "segs") an array; that is
 * all this reader needs to understand, so it is not a general JSON parser.
 * Arrays and objects are kept as their raw text. */
#ifndef SOFTDAT_TOOLS_TRACE_JSONL_H
#define SOFTDAT_TOOLS_TRACE_JSONL_H

#include <stdbool.h>
#include <stdint.h>

#define REC_MAX_FIELDS 48
#define REC_KEY_MAX 32
#define REC_VAL_MAX 512

struct rec_field {
    char key[REC_KEY_MAX];
    char val[REC_VAL_MAX]; /* strings unescaped; other values as written */
    bool is_str;
};

struct rec {
    int n;
    struct rec_field f[REC_MAX_FIELDS];
};

/* Parse one line; false (and *err set) when it is not a JSON object of
 * the shape above. Over-long keys/values are cut, extra fields dropped. */
bool rec_parse(const char *line, struct rec *r, const char **err);
/* The value of key, or NULL. */
const char *rec_get(const struct rec *r, const char *key);
/* Integer value (0 when absent or not a number). */
uint64_t rec_u64(const struct rec *r, const char *key);
/* A call the views leave out unless asked (queries, waits: their events
 * are shown as events). */
bool rec_quiet_call(const char *fn);

#endif
