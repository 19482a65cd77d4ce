/* softdat trace: one JSON object a line (JSON Lines) per thing that
 * happened, written by every thread of a process to one file.
 * Schema and examples: docs/trace.md.
 *
 * Switch: SOFTDAT_TRACE=FILE ("%p" in FILE becomes the process id), read
 * once, when the provider is loaded (sd_trace_init_from_env). Off, the
 * only cost is SD_TRACE_ON(), one predictable branch on a global that
 * never changes; the provider's function table is not even wrapped
 * (lib/provider/trace_calls.c).
 *
 * Bounded: SOFTDAT_TRACE_MAX bytes (default 64 MiB, suffixes K/M/G). The
 * policy is "keep the beginning": when the next record would pass the cap,
 * one {"rec":"trace","what":"truncated"} record is written and the trace
 * stops. The beginning (IA open, connection setup, the first operations)
 * is what explains a run; a ring would lose it.
 *
 * Thread safe: a record is built in the caller's stack buffer and written
 * with one write(2) under a mutex, so lines never interleave and a crash
 * loses nothing already traced (no user-space buffering).
 *
 * Records are built with sd_trace_begin / sd_trace_kv_* / sd_trace_end;
 * the frame and memory-check records have their own entry points so that
 * the soft RNIC's frame path and memory table describe them the same way
 * everywhere. */
#ifndef SOFTDAT_EMU_TRACE_H
#define SOFTDAT_EMU_TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Nonzero once a trace file is open. Hidden from other libraries. Read
 * with a relaxed atomic load: a plain load on every target we build for,
 * and no data race for ThreadSanitizer when a test turns the trace off. */
extern int sd_trace_enabled;
#define SD_TRACE_ON() __builtin_expect(__atomic_load_n(&sd_trace_enabled, __ATOMIC_RELAXED) != 0, 0)

#define SD_TRACE_SCHEMA 1
#define SD_TRACE_DEFAULT_MAX (64ull << 20)
#define SD_TRACE_LINE_MAX 2048

/* Read SOFTDAT_TRACE / SOFTDAT_TRACE_MAX and open the file (once per
 * process; later calls return the first answer). Returns 1 when tracing. */
int sd_trace_init_from_env(void);
/* Open `path` (truncating it) with a cap of max_bytes (0 = default) and
 * turn tracing on; "%p" expands to the pid. 0, or -1 (errno kept, a line
 * on stderr). Tests and init_from_env use it. */
int sd_trace_open(const char *path, uint64_t max_bytes);
/* A file name with "%p" replaced by the pid and "%%" by "%" (also for
 * SOFTDAT_PCAP); -1 when it does not fit in cap. */
int sd_trace_expand_path(const char *in, char *out, size_t cap);
/* write(2) all of buf (EINTR and short writes retried, bounded); false
 * when the file will not take it. Also the pcap writer's. */
bool sd_trace_write_all(int fd, const void *buf, size_t n);
/* Turn tracing off and close the file (tests; the library never closes). */
void sd_trace_close(void);
/* Bytes written so far, and whether the cap stopped the trace. */
uint64_t sd_trace_bytes(void);
bool sd_trace_truncated(void);
/* Parse "64M", "1G", "4096" (bytes); 0 when invalid. */
uint64_t sd_trace_parse_size(const char *text);

/* Where a record belongs: the IA (its id and the CLOCK_MONOTONIC time it
 * was opened; t_ns counts from there). ia = 0: no IA, t_ns counts from
 * the trace's opening. */
struct sd_trace_ctx {
    uint32_t ia;
    uint64_t t0_ns;
};

struct sd_trace_rec {
    char buf[SD_TRACE_LINE_MAX];
    size_t len;
    bool cut; /* a field did not fit: dropped, "cut":true added */
};

/* Starts {"rec":KIND,"mono_ns":..,"t_ns":..,"pid":..,"tid":..[,"ia":"iaN"] */
void sd_trace_begin(struct sd_trace_rec *r, const char *kind, const struct sd_trace_ctx *ctx);
/* The same with mono_ns = `mono` (0: now). */
void sd_trace_begin_at(struct sd_trace_rec *r, const char *kind, const struct sd_trace_ctx *ctx, uint64_t mono);
void sd_trace_kv_str(struct sd_trace_rec *r, const char *key, const char *val); /* NULL -> null */
void sd_trace_kv_u64(struct sd_trace_rec *r, const char *key, uint64_t val);
void sd_trace_kv_i64(struct sd_trace_rec *r, const char *key, int64_t val);
void sd_trace_kv_hex(struct sd_trace_rec *r, const char *key, uint64_t val); /* "0x1f" */
void sd_trace_kv_bool(struct sd_trace_rec *r, const char *key, bool val);
void sd_trace_kv_id(struct sd_trace_rec *r, const char *key, const char *prefix, uint64_t id); /* "ep3" */
/* An already-formed JSON value (array, object); the caller vouches for it. */
void sd_trace_kv_json(struct sd_trace_rec *r, const char *key, const char *json);
/* Close the object and write the line. */
void sd_trace_end(struct sd_trace_rec *r);

/* ---- frame records: one per frame sent or received (docs/trace.md §frame) */
enum sd_trace_dir { SD_TRACE_TX, SD_TRACE_RX };
enum sd_trace_crc { SD_TRACE_CRC_NONE, SD_TRACE_CRC_OK, SD_TRACE_CRC_BAD };
enum sd_trace_frame_kind {
    SD_TRACE_FPDU,     /* an MPA FPDU carrying DDP/RDMAP */
    SD_TRACE_MPA_REQ,  /* MPA handshake frames */
    SD_TRACE_MPA_REP,
    SD_TRACE_DATAGRAM, /* UD: one UDP datagram */
};
struct sd_trace_frame {
    enum sd_trace_dir dir;
    enum sd_trace_frame_kind kind;
    uint64_t conn;        /* connection id (0: none) */
    uint8_t opcode;       /* RDMAP opcode (FPDU, datagram) */
    bool tagged;          /* DDP T bit: stag/to valid, else queue/msn/mo */
    bool last;            /* DDP L bit */
    uint32_t stag;
    uint64_t to;
    uint32_t queue, msn, mo;
    uint32_t payload_len; /* DDP payload (ULPDU data) bytes */
    uint32_t frame_len;   /* whole frame on the wire, MPA header to CRC */
    enum sd_trace_crc crc;
    /* Terminate only: its first 3 bytes, layer/etype, ecode, hdrct (0 otherwise). */
    uint32_t term;
    /* MPA frames only: the reject bit and private-data length; C (CRC)
     * and M (markers) flags and the revision. */
    bool mpa_reject;
    uint32_t pdata_len;
    bool mpa_crc, mpa_markers;
    uint8_t mpa_rev;
    /* Where the frame is: the flow "SRC:PORT>DST:PORT" (sender first;
     * NULL: unknown) and the stream offset of its first byte in that
     * direction (TCP; the datagram's PSN for UD). The two sides' records
     * of one frame have the same flow and seq: softdat-trace matches them. */
    const char *flow;
    uint64_t seq;
    /* Send with Invalidate: the STag; RDMA Read Request: its body. */
    uint32_t inv_stag;
    const char *term_text; /* Terminate: its meaning ("RDMAP remote protection: invalid STag") */
    bool rreq;
    uint32_t rreq_sink_stag, rreq_size, rreq_src_stag;
    uint64_t rreq_sink_to, rreq_src_to;
    /* CLOCK_MONOTONIC of the record (0: now). A sent frame's is when it was
     * handed to the socket. */
    uint64_t mono_ns;
};
void sd_trace_frame(const struct sd_trace_ctx *ctx, const struct sd_trace_frame *f);
const char *sd_trace_opcode_name(unsigned opcode);

/* ---- memory-check records: one per remote-access decision of the memory
 * table (docs/trace.md §memcheck). */
struct sd_trace_memcheck {
    uint64_t conn;
    const char *access;  /* "write", "read", "atomic", "invalidate" */
    uint32_t stag;       /* as received: index << 8 | key */
    uint8_t key;         /* the key the region holds (0 when none found) */
    uint32_t pz;         /* the region's PZ id (0 when none found) */
    uint32_t qp_pz;      /* the PZ of the QP asking */
    unsigned priv_need;  /* DAT_MEM_PRIV_* bits the access needs */
    unsigned priv_have;  /* ... and the region grants */
    uint64_t to, len;    /* the range asked for */
    uint64_t base, bound; /* the region's [base, bound) (0,0 when none) */
    bool allowed;
    const char *reason;  /* denied: "no such stag", "key mismatch", "pz mismatch",
                          * "no privilege", "out of bounds", ...; allowed: "ok" */
};
void sd_trace_memcheck(const struct sd_trace_ctx *ctx, const struct sd_trace_memcheck *m);

#endif
