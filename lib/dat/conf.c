/*
 * dat.conf parser (grammar: dat.conf(5) as OFA DAPL 2.1 implements it).
 *
 *   record  = 8 fields on one line; '#' outside quotes starts a comment
 *   field   = run of non-blank characters; "..." quotes may hold blanks and
 *             '#'; a backslash takes the next character literally
 *   1 IA name (<= 255 chars)  2 [u|k]major.minor  3 threadsafe|nonthreadsafe
 *   (prefix)  4 default|nondefault  5 library  6 id.major.minor
 *   7 ia_params  8 platform_params
 *
 * The parser knows nothing of the registry so the tests can drive it on a
 * string or on a file.
 */
#include "lib/dat/dr.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NFIELDS 8

static int is_blank(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

/* Splits line into at most NFIELDS tokens written into scratch (which must
 * hold strlen(line) + NFIELDS + 1 bytes). Returns the token count, or -1. */
static int tokenize(const char *line, char *scratch, char *tok[NFIELDS],
                    const char **why)
{
    const char *p = line;
    char *out = scratch;
    int n = 0;

    for (;;) {
        int inq = 0;

        while (is_blank(*p))
            p++;
        if (*p == '\0' || *p == '\n' || *p == '#')
            return n;
        if (n == NFIELDS) {
            *why = "more than 8 fields";
            return -1;
        }
        tok[n++] = out;
        while (*p != '\0' && *p != '\n') {
            char c = *p;

            if (!inq && (is_blank(c) || c == '#'))
                break;
            p++;
            if (c == '"') {
                inq = !inq;
                continue;
            }
            if (c == '\\') {
                if (*p == '\0' || *p == '\n') {
                    *why = "backslash at end of line";
                    return -1;
                }
                c = *p++;
            }
            *out++ = c;
        }
        if (inq) {
            *why = "unterminated quote";
            return -1;
        }
        *out++ = '\0';
    }
}

/* Unsigned decimal of at most 9 digits filling the whole [s, end) range. */
static int parse_uint(const char *s, const char *end, DAT_UINT32 *v)
{
    DAT_UINT32 x = 0;

    if (s == end || end - s > 9)
        return -1;
    for (; s < end; s++) {
        if (*s < '0' || *s > '9')
            return -1;
        x = x * 10 + (DAT_UINT32)(*s - '0');
    }
    *v = x;
    return 0;
}

/* "major.minor" */
static int parse_version(const char *s, DAT_UINT32 *maj, DAT_UINT32 *min)
{
    const char *dot = strchr(s, '.');

    if (!dot)
        return -1;
    if (parse_uint(s, dot, maj) || parse_uint(dot + 1, dot + 1 + strlen(dot + 1), min))
        return -1;
    return 0;
}

static int copy_field(char *dst, size_t cap, const char *src)
{
    size_t n = strlen(src);

    if (n >= cap)
        return -1;
    memcpy(dst, src, n + 1);
    return 0;
}

static int parse_fields(char *tok[NFIELDS], struct dr_conf_entry *e, const char **why)
{
    const char *s;
    char *dot2, *dot1;

    if (tok[0][0] == '\0') {
        *why = "empty IA name";
        return -1;
    }
    if (copy_field(e->ia_name, sizeof e->ia_name, tok[0])) {
        *why = "IA name longer than 255 characters";
        return -1;
    }

    s = tok[1];
    if (*s != 'u' && *s != 'k') {
        *why = "API version must start with 'u' or 'k'";
        return -1;
    }
    e->kernel = *s == 'k';
    if (parse_version(s + 1, &e->api_major, &e->api_minor)) {
        *why = "bad API version (expected [u|k]major.minor)";
        return -1;
    }

    if (strncmp(tok[2], "threadsafe", 10) == 0)
        e->thread_safe = DAT_TRUE;
    else if (strncmp(tok[2], "nonthreadsafe", 13) == 0)
        e->thread_safe = DAT_FALSE;
    else {
        *why = "thread safety must be 'threadsafe' or 'nonthreadsafe'";
        return -1;
    }

    if (strcmp(tok[3], "default") == 0)
        e->is_default = 1;
    else if (strcmp(tok[3], "nondefault") == 0)
        e->is_default = 0;
    else {
        *why = "must be 'default' or 'nondefault'";
        return -1;
    }

    if (tok[4][0] == '\0') {
        *why = "empty library path";
        return -1;
    }
    if (copy_field(e->lib_path, sizeof e->lib_path, tok[4])) {
        *why = "library path too long";
        return -1;
    }

    /* id.major.minor; the id itself may contain dots */
    dot2 = strrchr(tok[5], '.');
    dot1 = NULL;
    if (dot2) {
        *dot2 = '\0';
        dot1 = strrchr(tok[5], '.');
    }
    if (!dot1 || dot1 == tok[5] ||
        parse_uint(dot1 + 1, dot2, &e->prov_major) ||
        parse_uint(dot2 + 1, dot2 + 1 + strlen(dot2 + 1), &e->prov_minor)) {
        *why = "bad provider version (expected id.major.minor)";
        return -1;
    }
    *dot1 = '\0';
    if (copy_field(e->prov_id, sizeof e->prov_id, tok[5])) {
        *why = "provider id too long";
        return -1;
    }

    if (copy_field(e->ia_params, sizeof e->ia_params, tok[6])) {
        *why = "ia_params too long";
        return -1;
    }
    if (copy_field(e->platform_params, sizeof e->platform_params, tok[7])) {
        *why = "platform_params too long";
        return -1;
    }
    return 0;
}

int dr_conf_parse_line(const char *line, struct dr_conf_entry *e, const char **why)
{
    static const char *why_dummy;
    char *tok[NFIELDS];
    char *scratch;
    int n, rc;

    if (!why)
        why = &why_dummy;
    *why = NULL;
    scratch = malloc(strlen(line) + NFIELDS + 1);
    if (!scratch) {
        *why = "out of memory";
        return -1;
    }
    n = tokenize(line, scratch, tok, why);
    if (n <= 0) {
        free(scratch);
        return n;
    }
    if (n != NFIELDS) {
        free(scratch);
        *why = "wrong number of fields (expected 8)";
        return -1;
    }
    memset(e, 0, sizeof *e);
    rc = parse_fields(tok, e, why);
    free(scratch);
    return rc == 0 ? 1 : -1;
}

int dr_conf_parse_file(const char *path, dr_conf_cb cb, void *arg, int *n_corrupt)
{
    struct dr_conf_entry *e;
    char *line = NULL;
    size_t cap = 0;
    int lineno = 0, records = 0, bad = 0;
    FILE *f;

    if (n_corrupt)
        *n_corrupt = 0;
    f = fopen(path, "r");
    if (!f)
        return -1;
    e = malloc(sizeof *e);
    if (!e) {
        fclose(f);
        return -1;
    }
    while (getline(&line, &cap, f) != -1) {
        const char *why;
        int rc;

        lineno++;
        rc = dr_conf_parse_line(line, e, &why);
        if (rc < 0) {
            bad++;
            dr_dbg(DR_DBG_ERROR, "%s:%d: corrupt dat.conf entry skipped: %s",
                   path, lineno, why);
        } else if (rc > 0) {
            records++;
            dr_dbg(DR_DBG_SR, "%s:%d: record %s %c%u.%u %s %s %s", path, lineno,
                   e->ia_name, e->kernel ? 'k' : 'u', e->api_major, e->api_minor,
                   e->thread_safe ? "threadsafe" : "nonthreadsafe",
                   e->is_default ? "default" : "nondefault", e->lib_path);
            if (cb)
                cb(e, path, lineno, arg);
        }
    }
    free(line);
    free(e);
    fclose(f);
    if (n_corrupt)
        *n_corrupt = bad;
    return records;
}

const char *dr_conf_choose(const char *override, const char *etc_path,
                           const char *prefix_path)
{
    if (override)
        return override;
    if (etc_path && access(etc_path, R_OK) == 0)
        return etc_path;
    return prefix_path;
}
