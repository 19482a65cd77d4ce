/* Reading trace records (jsonl.h). */
#include "tools/softdat-trace/jsonl.h"

#include <stdlib.h>
#include <string.h>

static const char *skip_ws(const char *p)
{
    while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n')
        p++;
    return p;
}

/* A JSON string at p (after the opening quote) into out; returns the
 * character after the closing quote, or NULL. \uXXXX escapes below 0x100
 * become that byte (the trace writes nothing else), others '?'. */
static const char *read_str(const char *p, char *out, size_t cap)
{
    size_t n = 0;
    while (*p && *p != '"') {
        char c = *p++;
        if (c == '\\') {
            char e = *p++;
            switch (e) {
            case 'n': c = '\n'; break;
            case 't': c = '\t'; break;
            case 'r': c = '\r'; break;
            case 'b': c = '\b'; break;
            case 'f': c = '\f'; break;
            case 'u': {
                char hex[5] = {0};
                for (int i = 0; i < 4; i++) {
                    if (!p[i])
                        return NULL;
                    hex[i] = p[i];
                }
                p += 4;
                unsigned long v = strtoul(hex, NULL, 16);
                c = v < 0x100 ? (char)v : '?';
                break;
            }
            case '\0': return NULL;
            default: c = e; break; /* \" \\ \/ */
            }
        }
        if (n + 1 < cap)
            out[n++] = c;
    }
    if (*p != '"')
        return NULL;
    out[n] = '\0';
    return p + 1;
}

/* A non-string value: up to the ',' or '}' at depth 0 (arrays and
 * objects kept raw, strings inside them skipped correctly). */
static const char *read_raw(const char *p, char *out, size_t cap)
{
    const char *start = p;
    int depth = 0;
    bool in_str = false;
    for (; *p; p++) {
        if (in_str) {
            if (*p == '\\' && p[1])
                p++;
            else if (*p == '"')
                in_str = false;
            continue;
        }
        if (*p == '"')
            in_str = true;
        else if (*p == '[' || *p == '{')
            depth++;
        else if (*p == ']' || *p == '}') {
            if (depth == 0)
                break;
            depth--;
        } else if (*p == ',' && depth == 0)
            break;
    }
    if (depth != 0 || in_str)
        return NULL;
    size_t n = (size_t)(p - start);
    while (n > 0 && (start[n - 1] == ' ' || start[n - 1] == '\t'))
        n--;
    if (n == 0)
        return NULL;
    if (n >= cap)
        n = cap - 1;
    memcpy(out, start, n);
    out[n] = '\0';
    return p;
}

bool rec_parse(const char *line, struct rec *r, const char **err)
{
    r->n = 0;
    const char *p = skip_ws(line);
    if (*p++ != '{') {
        *err = "not an object";
        return false;
    }
    p = skip_ws(p);
    if (*p == '}')
        return true;
    for (;;) {
        p = skip_ws(p);
        struct rec_field scratch, *f = r->n < REC_MAX_FIELDS ? &r->f[r->n] : &scratch;
        if (*p++ != '"' || (p = read_str(p, f->key, sizeof f->key)) == NULL) {
            *err = "bad key";
            return false;
        }
        p = skip_ws(p);
        if (*p++ != ':') {
            *err = "no ':' after a key";
            return false;
        }
        p = skip_ws(p);
        if (*p == '"') {
            f->is_str = true;
            p = read_str(p + 1, f->val, sizeof f->val);
        } else {
            f->is_str = false;
            p = read_raw(p, f->val, sizeof f->val);
        }
        if (p == NULL) {
            *err = "bad value";
            return false;
        }
        if (f != &scratch)
            r->n++;
        p = skip_ws(p);
        if (*p == ',') {
            p++;
            continue;
        }
        if (*p == '}') {
            p = skip_ws(p + 1);
            if (*p != '\0') {
                *err = "text after the object";
                return false;
            }
            return true;
        }
        *err = "expected ',' or '}'";
        return false;
    }
}

const char *rec_get(const struct rec *r, const char *key)
{
    for (int i = 0; i < r->n; i++)
        if (strcmp(r->f[i].key, key) == 0)
            return r->f[i].val;
    return NULL;
}

uint64_t rec_u64(const struct rec *r, const char *key)
{
    const char *v = rec_get(r, key);
    return v ? strtoull(v, NULL, 10) : 0;
}

bool rec_quiet_call(const char *fn)
{
    static const char *const quiet[] = {"ia_query",  "ep_query",  "evd_query", "lmr_query", "rmr_query",
                                        "pz_query",  "psp_query", "rsp_query", "cr_query",  "srq_query",
                                        "cno_query", "csp_query", "get_consumer_context", "set_consumer_context",
                                        "get_handle_type", "ep_get_status", "evd_wait", "evd_dequeue", NULL};
    for (int i = 0; quiet[i]; i++)
        if (strcmp(fn, quiet[i]) == 0)
            return true;
    return false;
}
