/* The trace writer (emu/trace.h): file, cap, record builder, and the
 * frame and memory-check records. */
#include "emu/trace.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "emu/log.h"

int sd_trace_enabled;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static int g_fd = -1;
static uint64_t g_bytes, g_max;
static bool g_truncated;
static uint64_t g_t0; /* CLOCK_MONOTONIC at open: t_ns of IA-less records */

static pthread_once_t g_env_once = PTHREAD_ONCE_INIT;
static int g_env_on;

uint64_t sd_trace_parse_size(const char *text)
{
    if (text == NULL || *text == '\0')
        return 0;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    if (errno != 0 || end == text)
        return 0;
    unsigned shift = 0;
    switch (*end) {
    case '\0': break;
    case 'k': case 'K': shift = 10; end++; break;
    case 'm': case 'M': shift = 20; end++; break;
    case 'g': case 'G': shift = 30; end++; break;
    default: return 0;
    }
    if (*end != '\0' || v > (UINT64_MAX >> shift))
        return 0;
    return (uint64_t)v << shift;
}

/* "%p" -> pid, "%%" -> "%"; anything else is copied. */
int sd_trace_expand_path(const char *in, char *out, size_t cap)
{
    size_t n = 0;
    for (const char *p = in; *p; p++) {
        char tmp[24];
        const char *add = tmp;
        if (p[0] == '%' && p[1] == 'p') {
            snprintf(tmp, sizeof tmp, "%d", (int)getpid());
            p++;
        } else if (p[0] == '%' && p[1] == '%') {
            tmp[0] = '%', tmp[1] = '\0';
            p++;
        } else {
            tmp[0] = *p, tmp[1] = '\0';
        }
        size_t l = strlen(add);
        if (n + l + 1 > cap)
            return -1;
        memcpy(out + n, add, l);
        n += l;
    }
    out[n] = '\0';
    return 0;
}

static void log_sink(void *arg, const struct sd_log_msg *m);

int sd_trace_open(const char *path, uint64_t max_bytes)
{
    char full[4096];
    if (path == NULL || sd_trace_expand_path(path, full, sizeof full) != 0) {
        errno = ENAMETOOLONG;
        fprintf(stderr, "softdat: SOFTDAT_TRACE: path too long\n");
        return -1;
    }
    int fd = open(full, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) {
        int e = errno;
        /* Not SD_ERR: the log's sinks may include this trace. */
        fprintf(stderr, "softdat: SOFTDAT_TRACE=%s: %s\n", full, strerror(e));
        errno = e;
        return -1;
    }
    pthread_mutex_lock(&g_mu);
    if (g_fd >= 0)
        close(g_fd);
    g_fd = fd;
    g_bytes = 0;
    g_max = max_bytes ? max_bytes : SD_TRACE_DEFAULT_MAX;
    g_truncated = false;
    g_t0 = sd_mono_ns();
    pthread_mutex_unlock(&g_mu);
    __atomic_store_n(&sd_trace_enabled, 1, __ATOMIC_RELEASE);

    struct sd_trace_rec r;
    sd_trace_begin(&r, "trace", NULL);
    sd_trace_kv_str(&r, "what", "open");
    sd_trace_kv_u64(&r, "schema", SD_TRACE_SCHEMA);
#ifdef SOFTDAT_VERSION
    sd_trace_kv_str(&r, "version", SOFTDAT_VERSION);
#endif
    sd_trace_kv_u64(&r, "max_bytes", g_max);
    sd_trace_kv_u64(&r, "log_epoch_ns", sd_log_epoch_ns());
    sd_trace_end(&r);
    static bool sink_added;
    if (!sink_added && sd_log_add_sink(log_sink, NULL) == 0)
        sink_added = true;
    return 0;
}

void sd_trace_close(void)
{
    __atomic_store_n(&sd_trace_enabled, 0, __ATOMIC_RELEASE);
    pthread_mutex_lock(&g_mu);
    if (g_fd >= 0)
        close(g_fd);
    g_fd = -1;
    pthread_mutex_unlock(&g_mu);
}

static void read_env(void)
{
    const char *path = getenv("SOFTDAT_TRACE");
    if (path == NULL || *path == '\0')
        return;
    uint64_t max = 0;
    const char *m = getenv("SOFTDAT_TRACE_MAX");
    if (m != NULL && *m != '\0' && (max = sd_trace_parse_size(m)) == 0)
        fprintf(stderr, "softdat: SOFTDAT_TRACE_MAX=%s not understood (bytes, or with K/M/G); using 64M\n", m);
    g_env_on = sd_trace_open(path, max) == 0;
}

int sd_trace_init_from_env(void)
{
    pthread_once(&g_env_once, read_env);
    return g_env_on;
}

uint64_t sd_trace_bytes(void)
{
    pthread_mutex_lock(&g_mu);
    uint64_t b = g_bytes;
    pthread_mutex_unlock(&g_mu);
    return b;
}

bool sd_trace_truncated(void)
{
    pthread_mutex_lock(&g_mu);
    bool t = g_truncated;
    pthread_mutex_unlock(&g_mu);
    return t;
}

/* ---------------------------------------------------------------- builder */

/* Append raw bytes; false (nothing appended) when they do not fit with
 * room left for the closing ,"cut":true}\n. */
#define TAIL_RESERVE 16
static bool put(struct sd_trace_rec *r, const char *s, size_t n)
{
    if (r->len + n + TAIL_RESERVE > sizeof r->buf)
        return false;
    memcpy(r->buf + r->len, s, n);
    r->len += n;
    return true;
}

static bool putf(struct sd_trace_rec *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool putf(struct sd_trace_rec *r, const char *fmt, ...)
{
    char tmp[128];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    return n >= 0 && (size_t)n < sizeof tmp && put(r, tmp, (size_t)n);
}

/* A JSON string: quotes, backslash and every byte outside printable ASCII
 * escaped as \u00XX, so the line is valid JSON (and UTF-8) whatever the
 * bytes were (interface names, private data, log text). */
static bool put_str(struct sd_trace_rec *r, const char *s)
{
    if (!put(r, "\"", 1))
        return false;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        bool ok;
        if (*p == '"' || *p == '\\') {
            char e[2] = {'\\', (char)*p};
            ok = put(r, e, 2);
        } else if (*p < 0x20 || *p >= 0x7f) {
            ok = putf(r, "\\u%04x", *p);
        } else {
            ok = put(r, (const char *)p, 1);
        }
        if (!ok)
            return false;
    }
    return put(r, "\"", 1);
}

/* One ,"key":value field, all or nothing. */
static bool key_begin(struct sd_trace_rec *r, const char *key, size_t *mark)
{
    *mark = r->len;
    return put(r, ",", 1) && put_str(r, key) && put(r, ":", 1);
}
static void key_end(struct sd_trace_rec *r, size_t mark, bool ok)
{
    if (!ok) {
        r->len = mark;
        r->cut = true;
    }
}

void sd_trace_begin(struct sd_trace_rec *r, const char *kind, const struct sd_trace_ctx *ctx)
{
    sd_trace_begin_at(r, kind, ctx, 0);
}

/* pid and thread id of every record, without two system calls each time:
 * cached (per process, per thread) and forgotten in a forked child. */
static int g_pid;
static __thread long t_tid;
static pthread_once_t g_fork_once = PTHREAD_ONCE_INIT;
static void forked_child(void)
{
    __atomic_store_n(&g_pid, 0, __ATOMIC_RELAXED);
    t_tid = 0;
}
static void install_fork_handler(void)
{
    pthread_atfork(NULL, NULL, forked_child);
}
static void ids(int *pid, long *tid)
{
    pthread_once(&g_fork_once, install_fork_handler);
    int p = __atomic_load_n(&g_pid, __ATOMIC_RELAXED);
    if (p == 0) {
        p = (int)getpid();
        __atomic_store_n(&g_pid, p, __ATOMIC_RELAXED);
    }
    if (t_tid == 0)
        t_tid = (long)syscall(SYS_gettid);
    *pid = p;
    *tid = t_tid;
}

void sd_trace_begin_at(struct sd_trace_rec *r, const char *kind, const struct sd_trace_ctx *ctx, uint64_t mono)
{
    int pid;
    long tid;
    ids(&pid, &tid);
    uint64_t now = mono ? mono : sd_mono_ns();
    uint64_t t0 = ctx != NULL && ctx->ia != 0 ? ctx->t0_ns : g_t0;
    r->len = 0;
    r->cut = false;
    put(r, "{\"rec\":", 7);
    put_str(r, kind);
    putf(r, ",\"mono_ns\":%" PRIu64 ",\"t_ns\":%" PRIu64 ",\"pid\":%d,\"tid\":%ld", now, now >= t0 ? now - t0 : 0,
         pid, tid);
    if (ctx != NULL && ctx->ia != 0)
        sd_trace_kv_id(r, "ia", "ia", ctx->ia);
}

void sd_trace_kv_str(struct sd_trace_rec *r, const char *key, const char *val)
{
    size_t m;
    bool ok = key_begin(r, key, &m) && (val ? put_str(r, val) : put(r, "null", 4));
    key_end(r, m, ok);
}

void sd_trace_kv_u64(struct sd_trace_rec *r, const char *key, uint64_t val)
{
    size_t m;
    bool ok = key_begin(r, key, &m) && putf(r, "%" PRIu64, val);
    key_end(r, m, ok);
}

void sd_trace_kv_i64(struct sd_trace_rec *r, const char *key, int64_t val)
{
    size_t m;
    bool ok = key_begin(r, key, &m) && putf(r, "%" PRId64, val);
    key_end(r, m, ok);
}

void sd_trace_kv_hex(struct sd_trace_rec *r, const char *key, uint64_t val)
{
    size_t m;
    bool ok = key_begin(r, key, &m) && putf(r, "\"0x%" PRIx64 "\"", val);
    key_end(r, m, ok);
}

void sd_trace_kv_bool(struct sd_trace_rec *r, const char *key, bool val)
{
    size_t m;
    bool ok = key_begin(r, key, &m) && (val ? put(r, "true", 4) : put(r, "false", 5));
    key_end(r, m, ok);
}

void sd_trace_kv_id(struct sd_trace_rec *r, const char *key, const char *prefix, uint64_t id)
{
    size_t m;
    bool ok = key_begin(r, key, &m) && putf(r, "\"%s%" PRIu64 "\"", prefix, id);
    key_end(r, m, ok);
}

void sd_trace_kv_json(struct sd_trace_rec *r, const char *key, const char *json)
{
    size_t m;
    bool ok = key_begin(r, key, &m) && put(r, json, strlen(json));
    key_end(r, m, ok);
}

bool sd_trace_write_all(int fd, const void *buf, size_t n)
{
    const char *p = buf;
    for (int tries = 0; n > 0 && tries < 100; tries++) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return false; /* disk full or gone: best effort */
        p += w;
        n -= (size_t)w;
    }
    return n == 0;
}

void sd_trace_end(struct sd_trace_rec *r)
{
    /* TAIL_RESERVE guarantees room for this. */
    if (r->cut) {
        memcpy(r->buf + r->len, ",\"cut\":true", 11);
        r->len += 11;
    }
    r->buf[r->len++] = '}';
    r->buf[r->len++] = '\n';
    pthread_mutex_lock(&g_mu);
    if (g_fd >= 0 && !g_truncated) {
        if (g_bytes + r->len > g_max) {
            g_truncated = true;
            char last[160];
            int n = snprintf(last, sizeof last,
                             "{\"rec\":\"trace\",\"mono_ns\":%" PRIu64 ",\"t_ns\":%" PRIu64
                             ",\"pid\":%d,\"tid\":%ld,\"what\":\"truncated\",\"max_bytes\":%" PRIu64 "}\n",
                             sd_mono_ns(), sd_mono_ns() - g_t0, (int)getpid(), (long)syscall(SYS_gettid), g_max);
            sd_trace_write_all(g_fd, last, (size_t)n);
            g_bytes += (uint64_t)n;
        } else {
            sd_trace_write_all(g_fd, r->buf, r->len);
            g_bytes += r->len;
        }
    }
    pthread_mutex_unlock(&g_mu);
}

/* ---------------------------------------------------------------- log sink */

static void log_sink(void *arg, const struct sd_log_msg *m)
{
    if (!SD_TRACE_ON())
        return;
    struct sd_trace_rec r;
    sd_trace_begin(&r, "log", NULL);
    sd_trace_kv_str(&r, "level", sd_log_level_name(m->level));
    sd_trace_kv_str(&r, "comp", m->component);
    sd_trace_kv_str(&r, "fn", m->func);
    if (*m->scope)
        sd_trace_kv_str(&r, "scope", m->scope);
    sd_trace_kv_str(&r, "msg", m->text);
    sd_trace_end(&r);
}

/* ---------------------------------------------------------------- frames */

const char *sd_trace_opcode_name(unsigned opcode)
{
    /* RDMAP (RFC 5040 §4.3) and RFC 7306 opcodes. */
    static const char *const names[] = {"rdma_write",   "rdma_read_req", "rdma_read_resp", "send",
                                        "send_inv",     "send_se",       "send_se_inv",    "terminate",
                                        "imm_data",     "imm_data_se",   "atomic_req",     "atomic_resp"};
    return opcode < sizeof names / sizeof names[0] ? names[opcode] : "reserved";
}

void sd_trace_frame(const struct sd_trace_ctx *ctx, const struct sd_trace_frame *f)
{
    static const char *const kinds[] = {"fpdu", "mpa_req", "mpa_rep", "datagram"};
    static const char *const crcs[] = {"none", "ok", "bad"};
    struct sd_trace_rec r;
    sd_trace_begin_at(&r, "frame", ctx, f->mono_ns);
    sd_trace_kv_str(&r, "dir", f->dir == SD_TRACE_TX ? "tx" : "rx");
    sd_trace_kv_str(&r, "kind", kinds[(unsigned)f->kind < 4 ? f->kind : 0]);
    if (f->conn != 0)
        sd_trace_kv_id(&r, "conn", "c", f->conn);
    if (f->flow != NULL) {
        sd_trace_kv_str(&r, "flow", f->flow);
        sd_trace_kv_u64(&r, "seq", f->seq);
    }
    if (f->kind == SD_TRACE_MPA_REQ || f->kind == SD_TRACE_MPA_REP) {
        sd_trace_kv_u64(&r, "rev", f->mpa_rev);
        sd_trace_kv_bool(&r, "crc_flag", f->mpa_crc);
        sd_trace_kv_bool(&r, "markers", f->mpa_markers);
        sd_trace_kv_bool(&r, "reject", f->mpa_reject);
        sd_trace_kv_u64(&r, "pdata_len", f->pdata_len);
    } else if (f->kind == SD_TRACE_DATAGRAM) {
        /* UD (docs/wire.md §7): the BTH opcode, DestQP and PSN. */
        sd_trace_kv_str(&r, "op", f->opcode == 0x64 ? "ud_send_only" : "ud_other");
        sd_trace_kv_hex(&r, "opcode", f->opcode);
        sd_trace_kv_u64(&r, "dest_qp", f->queue);
        sd_trace_kv_u64(&r, "psn", f->msn);
        sd_trace_kv_u64(&r, "payload_len", f->payload_len);
    } else {
        sd_trace_kv_str(&r, "op", sd_trace_opcode_name(f->opcode));
        sd_trace_kv_u64(&r, "opcode", f->opcode);
        sd_trace_kv_bool(&r, "tagged", f->tagged);
        sd_trace_kv_bool(&r, "last", f->last);
        if (f->tagged) {
            sd_trace_kv_hex(&r, "stag", f->stag);
            sd_trace_kv_hex(&r, "to", f->to);
        } else {
            sd_trace_kv_u64(&r, "queue", f->queue);
            sd_trace_kv_u64(&r, "msn", f->msn);
            sd_trace_kv_u64(&r, "mo", f->mo);
        }
        sd_trace_kv_u64(&r, "payload_len", f->payload_len);
        if (f->opcode == 4 || f->opcode == 6) /* Send with Invalidate (+SE) */
            sd_trace_kv_hex(&r, "inv_stag", f->inv_stag);
        if (f->rreq) {
            sd_trace_kv_hex(&r, "sink_stag", f->rreq_sink_stag);
            sd_trace_kv_hex(&r, "sink_to", f->rreq_sink_to);
            sd_trace_kv_u64(&r, "size", f->rreq_size);
            sd_trace_kv_hex(&r, "src_stag", f->rreq_src_stag);
            sd_trace_kv_hex(&r, "src_to", f->rreq_src_to);
        }
        if (f->opcode == 7 /* Terminate */ && f->kind == SD_TRACE_FPDU) {
            sd_trace_kv_hex(&r, "term", f->term);
            sd_trace_kv_str(&r, "term_text", f->term_text);
        }
    }
    sd_trace_kv_u64(&r, "frame_len", f->frame_len);
    sd_trace_kv_str(&r, "crc", crcs[(unsigned)f->crc < 3 ? f->crc : 0]);
    sd_trace_end(&r);
}

/* Privilege bits (emu/mem.h EMU_ACC_*) as "remote_write|local_write". */
static void priv_names(unsigned bits, char *out, size_t cap)
{
    static const char *const names[] = {"local_read",    "local_write", "remote_read",      "remote_write",
                                        "remote_atomic", "mw_bind",     "remote_invalidate"};
    size_t n = 0;
    out[0] = '\0';
    for (unsigned i = 0; i < sizeof names / sizeof names[0]; i++)
        if (bits & (1u << i)) {
            int w = snprintf(out + n, cap - n, "%s%s", n ? "|" : "", names[i]);
            if (w < 0 || (size_t)w >= cap - n)
                break;
            n += (size_t)w;
        }
}

void sd_trace_memcheck(const struct sd_trace_ctx *ctx, const struct sd_trace_memcheck *m)
{
    char need[128], have[128];
    priv_names(m->priv_need, need, sizeof need);
    priv_names(m->priv_have, have, sizeof have);
    struct sd_trace_rec r;
    sd_trace_begin(&r, "memcheck", ctx);
    if (m->conn != 0)
        sd_trace_kv_id(&r, "conn", "c", m->conn);
    sd_trace_kv_str(&r, "access", m->access ? m->access : "?");
    sd_trace_kv_hex(&r, "stag", m->stag);
    sd_trace_kv_hex(&r, "key", m->key);
    if (m->pz != 0)
        sd_trace_kv_id(&r, "pz", "pz", m->pz);
    if (m->qp_pz != 0)
        sd_trace_kv_id(&r, "qp_pz", "pz", m->qp_pz);
    sd_trace_kv_hex(&r, "priv_need", m->priv_need);
    sd_trace_kv_hex(&r, "priv_have", m->priv_have);
    sd_trace_kv_str(&r, "need", need);
    sd_trace_kv_str(&r, "have", have);
    sd_trace_kv_hex(&r, "to", m->to);
    sd_trace_kv_u64(&r, "len", m->len);
    sd_trace_kv_hex(&r, "base", m->base);
    sd_trace_kv_hex(&r, "bound", m->bound);
    sd_trace_kv_bool(&r, "allowed", m->allowed);
    sd_trace_kv_str(&r, "reason", m->reason ? m->reason : (m->allowed ? "ok" : "denied"));
    sd_trace_end(&r);
}
