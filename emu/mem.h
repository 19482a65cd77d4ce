/* The soft RNIC's memory table: protection zones, memory regions (LMR-like)
 * and memory windows (RMR-like), their STags, and the access checks the
 * data path runs on every tagged placement, Read Request and local iovec.
 * docs/memory.md has the model, the check order and the error mappings.
 *
 * STag = (24-bit index << 8) | 8-bit key. Indexes come from one window
 * [first, first + max_regions + max_windows) that starts at a random
 * offset (never 0, so no STag is 0); a slot's key advances every time the
 * slot is (re)published (registration, bind), so a stale STag never matches.
 * A region has one STag, used both as lmr_context and as rmr_context.
 *
 * Threads: management calls (pz/mr/mw create, free, bind, unbind,
 * invalidate) serialise on one table mutex and may run on any thread.
 * The checks (emu_mem_check_remote/local) take no lock and never allocate:
 * an atomic reference on the slot, an acquire load of its STag, plain
 * field reads. A successful check holds a reference on the region that
 * owns the bytes until emu_mem_put(); freeing that region waits (bounded)
 * for such references, so bytes are never placed into memory whose
 * registration has been freed.
 *
 * Pages are not pinned (no mlock): the engine copies through the socket
 * with readv/writev in this process, so it only needs the mapping to exist,
 * which the consumer guarantees until emu_mem_mr_free() returns. */
#ifndef SOFTDAT_EMU_MEM_H
#define SOFTDAT_EMU_MEM_H

#include <stdbool.h>
#include <stdint.h>

/* ---- results ---- */
enum emu_mem_status {
    EMU_MEM_OK = 0,
    /* access-check failures, in check order (see docs/memory.md) */
    EMU_MEM_E_STAG,           /* index out of range, free slot, key mismatch,
                               * invalidated/unbound, or wrong object kind */
    EMU_MEM_E_PZ,             /* STag's PZ != the connection's / EP's PZ */
    EMU_MEM_E_ACCESS,         /* privilege missing */
    EMU_MEM_E_TO_WRAP,        /* TO + length wraps 2^64 */
    EMU_MEM_E_BOUNDS,         /* [TO, TO+len) not inside the registered range */
    EMU_MEM_E_SCOPE,          /* EP-scoped window used on another connection */
    EMU_MEM_E_CANT_INVALIDATE,/* STag kind cannot be invalidated */
    /* management failures */
    EMU_MEM_E_INVAL,          /* bad parameter */
    EMU_MEM_E_HANDLE,         /* object not live (freed, wrong kind, other table) */
    EMU_MEM_E_LIMIT,          /* max_pzs / max_regions / max_windows reached */
    EMU_MEM_E_NOMEM,
    EMU_MEM_E_BUSY,           /* PZ in use; region has bound windows */
    EMU_MEM_E_INFLIGHT,       /* accesses still hold the object after the
                               * timeout; it is already invalid, retry free */
};

const char *emu_mem_status_str(enum emu_mem_status st);

/* ---- privileges (bits; the provider maps DAT_MEM_PRIV_FLAGS onto them) ---- */
enum {
    EMU_ACC_LOCAL_READ = 1u << 0,
    EMU_ACC_LOCAL_WRITE = 1u << 1,
    EMU_ACC_REMOTE_READ = 1u << 2,
    EMU_ACC_REMOTE_WRITE = 1u << 3,
    EMU_ACC_REMOTE_ATOMIC = 1u << 4,
    EMU_ACC_MW_BIND = 1u << 5,          /* regions: windows may be bound into it */
    EMU_ACC_REMOTE_INVALIDATE = 1u << 6,/* regions: a peer's Send with Invalidate
                                         * may revoke remote access (local use stays) */
};
#define EMU_ACC_LOCAL_MASK (EMU_ACC_LOCAL_READ | EMU_ACC_LOCAL_WRITE)
#define EMU_ACC_REMOTE_MASK \
    (EMU_ACC_REMOTE_READ | EMU_ACC_REMOTE_WRITE | EMU_ACC_REMOTE_ATOMIC)
#define EMU_ACC_MR_MASK \
    (EMU_ACC_LOCAL_MASK | EMU_ACC_REMOTE_MASK | EMU_ACC_MW_BIND | EMU_ACC_REMOTE_INVALIDATE)

/* Tagged-offset space of a region or window. */
enum emu_mem_va_type {
    EMU_VA_ABS = 0,     /* TO = process virtual address (DAT_VA_TYPE_VA) */
    EMU_VA_ZB = 1,      /* TO = offset from the start (DAT_VA_TYPE_ZB) */
};

/* What a remote access does; also the context for the Terminate mapping. */
enum emu_mem_op {
    EMU_MEM_OP_WRITE = 1,   /* tagged placement: RDMA Write (needs REMOTE_WRITE) */
    EMU_MEM_OP_READ,        /* Read Request source (needs REMOTE_READ) */
    EMU_MEM_OP_ATOMIC,      /* RFC 7306 atomic target (needs REMOTE_ATOMIC) */
    EMU_MEM_OP_INVALIDATE,  /* Send with Invalidate (emu_mem_invalidate only) */
};

/* Window scope. */
enum emu_mw_scope {
    EMU_MW_SCOPE_PZ = 0,    /* any connection in the window's PZ */
    EMU_MW_SCOPE_CONN = 1,  /* only the connection given at bind */
};

enum emu_mw_state { EMU_MW_UNBOUND = 0, EMU_MW_BOUND, EMU_MW_INVALIDATED };

/* ---- objects (opaque) ---- */
struct emu_mem_table;
struct emu_pz;
struct emu_mr;
struct emu_mw;

struct emu_mem_limits {
    uint32_t max_pzs;
    uint32_t max_regions;
    uint32_t max_windows;       /* max_regions + max_windows <= EMU_MEM_MAX_SLOTS */
    uint32_t first_index;       /* 0: random start (normal use); tests may fix it */
};
#define EMU_MEM_MAX_SLOTS 0x800000u  /* half the 24-bit index space */

enum emu_mem_status emu_mem_table_create(const struct emu_mem_limits *lim,
                                         struct emu_mem_table **out);
/* Frees everything; no check may run concurrently or afterwards. */
void emu_mem_table_destroy(struct emu_mem_table *t);
/* The limits in force (first_index = the chosen start). */
void emu_mem_table_limits(const struct emu_mem_table *t, struct emu_mem_limits *out);

/* ---- protection zones ---- */
enum emu_mem_status emu_mem_pz_create(struct emu_mem_table *t, struct emu_pz **out);
/* E_BUSY while a region, window or emu_mem_pz_hold() user references it. */
enum emu_mem_status emu_mem_pz_free(struct emu_pz *pz);
/* Count an outside user (EP, SRQ) so pz_free reports busy. */
enum emu_mem_status emu_mem_pz_hold(struct emu_pz *pz);
void emu_mem_pz_unhold(struct emu_pz *pz);

/* ---- regions ---- */
struct emu_mr_attr {
    void *addr;                 /* start of the consumer's memory (not copied) */
    uint64_t length;            /* may be 0 */
    struct emu_pz *pz;
    uint32_t access;            /* EMU_ACC_* within EMU_ACC_MR_MASK */
    enum emu_mem_va_type va_type;
};

/* stag (out, may be NULL): the region's STag (lmr_context == rmr_context). */
enum emu_mem_status emu_mem_mr_register(struct emu_mem_table *t, const struct emu_mr_attr *a,
                                        struct emu_mr **out, uint32_t *stag);
/* Invalidates the STag at once (new checks fail), then waits up to
 * timeout_ms for accesses that still hold the region. E_BUSY (nothing
 * changed) while windows are bound; E_INFLIGHT if holders remain (the
 * region stays dead and counted; call again). Never call while this thread
 * holds a reference on the region. */
enum emu_mem_status emu_mem_mr_free(struct emu_mr *mr, unsigned timeout_ms);

struct emu_mr_info {
    uint32_t stag;
    void *addr;
    uint64_t length;
    uint64_t to_base;           /* TO of addr: addr itself, or 0 when ZB */
    uint32_t access;
    struct emu_pz *pz;
    uint32_t bound_windows;
    bool remote_revoked;        /* a peer invalidated the remote STag */
};
enum emu_mem_status emu_mem_mr_query(struct emu_mr *mr, struct emu_mr_info *out);

/* ---- windows ---- */
enum emu_mem_status emu_mem_mw_create(struct emu_mem_table *t, struct emu_pz *pz,
                                      enum emu_mw_scope scope, struct emu_mw **out);
/* Implicitly unbinds. Waits (bounded) for checks reading the window;
 * E_INFLIGHT if they did not finish (window unbound, still allocated). */
enum emu_mem_status emu_mem_mw_free(struct emu_mw *mw);

struct emu_mw_bind_attr {
    struct emu_mr *mr;
    uint64_t addr;              /* start of the sub-range, in the region's TO space */
    uint64_t length;            /* 0 is a valid empty binding (DAT's "length 0 =
                                 * unbind" is the provider's job: emu_mem_mw_unbind) */
    uint32_t access;            /* remote bits only: EMU_ACC_REMOTE_MASK */
    enum emu_mem_va_type va_type;
    const struct emu_pz *ep_pz; /* PZ of the EP issuing the bind; NULL = no check */
    uint64_t conn_id;           /* opaque connection id, used by SCOPE_CONN */
};
/* Validation order: window live (E_HANDLE) → region live (E_HANDLE) →
 * PZs equal (E_PZ) → region allows binding and backs every requested right
 * (REMOTE_READ needs LOCAL_READ, REMOTE_WRITE/ATOMIC need LOCAL_WRITE)
 * (E_ACCESS) → sub-range inside the region (E_BOUNDS). On those failures
 * the old binding is untouched. On success the old STag is dead and *stag
 * (new key) differs from it. E_INFLIGHT (a check kept reading the window
 * for seconds: should not happen) leaves the window UNBOUND. */
enum emu_mem_status emu_mem_mw_bind(struct emu_mw *mw, const struct emu_mw_bind_attr *a,
                                    uint32_t *stag);
/* Unbound/invalidated windows: no-op success. */
enum emu_mem_status emu_mem_mw_unbind(struct emu_mw *mw);

struct emu_mw_info {
    enum emu_mw_state state;
    enum emu_mw_scope scope;
    uint32_t stag;              /* last bound STag (dead unless BOUND) */
    struct emu_pz *pz;
    struct emu_mr *mr;          /* NULL unless BOUND */
    uint64_t addr, length;
    uint32_t access;
    uint64_t conn_id;
};
enum emu_mem_status emu_mem_mw_query(struct emu_mw *mw, struct emu_mw_info *out);

/* ---- invalidation by STag ----
 * Remote (Send with Invalidate arriving on connection conn_id in PZ pz):
 * STag valid (E_STAG) → PZ (E_PZ) → kind invalidatable (windows; regions
 * only with EMU_ACC_REMOTE_INVALIDATE, else E_CANT_INVALIDATE) → scope
 * (E_SCOPE). A window becomes INVALIDATED (unbound from its
 * region); a region loses remote access only. */
enum emu_mem_status emu_mem_invalidate(struct emu_mem_table *t, uint32_t stag,
                                       const struct emu_pz *pz, uint64_t conn_id);
/* Local invalidate posted by the consumer: same, without the scope check. */
enum emu_mem_status emu_mem_invalidate_local(struct emu_mem_table *t, uint32_t stag,
                                             const struct emu_pz *pz);

/* ---- access checks (hot path) ---- */

/* A successful check's result. ptr/len are the bytes to place or read;
 * hold pins the owning region until emu_mem_put(). Caller-allocated. */
struct emu_mem_ref {
    void *ptr;
    uint64_t len;
    void *hold;                 /* internal; NULL when nothing is held */
};

/* Remote access: stag, tagged offset to, length len, op (WRITE/READ/ATOMIC),
 * the PZ and the id of the connection the request arrived on. Order:
 * STag valid → PZ → privilege → bounds (wrap, then range) → window scope.
 * len 0 is checked like any other access (an empty range at to; to may be
 * the end of the range); DDP says zero-length tagged messages skip STag
 * checks, so the engine does not call this for them. */
enum emu_mem_status emu_mem_check_remote(struct emu_mem_table *t, uint32_t stag, uint64_t to,
                                         uint64_t len, enum emu_mem_op op,
                                         const struct emu_pz *pz, uint64_t conn_id,
                                         struct emu_mem_ref *out);

/* What a remote check or invalidation (status st) found, for the trace's
 * memcheck record (docs/trace.md): the object the STag's index names,
 * when there is one. Reads the slot under a reference, so it describes
 * the object as it is now (normally: as the check just saw it). */
struct emu_mem_why {
    bool found;                 /* a live object holds this STag, or its index (key) */
    bool window;
    uint8_t key;                /* the key the object holds now */
    uint32_t pz_trace_id;       /* its PZ's emu_mem_pz_set_trace_id (0: none) */
    uint32_t access;            /* EMU_ACC_* it grants */
    uint64_t base, bound;       /* its [base, bound) in TO space (fields read only
                                 * when the STag itself is live) */
    const char *reason;         /* "ok", "no such stag", "key mismatch", "invalidated",
                                 * "pz mismatch", "no privilege", "to wraps",
                                 * "out of bounds", "window scope",
                                 * "cannot invalidate", "misaligned" */
};
void emu_mem_explain(struct emu_mem_table *t, uint32_t stag, enum emu_mem_status st,
                     struct emu_mem_why *out);
/* The PZ's name in traces (the provider's pz id); 0 = none. */
void emu_mem_pz_set_trace_id(struct emu_pz *pz, uint32_t id);
uint32_t emu_mem_pz_trace_id(const struct emu_pz *pz);

/* Local iovec: lmr_context (a region STag), address in the region's TO
 * space (VA, or offset for ZB regions), length, need = EMU_ACC_LOCAL_READ
 * and/or EMU_ACC_LOCAL_WRITE, the EP's (or SRQ's) PZ. Same order, minus
 * scope. Windows are not valid lmr_contexts (E_STAG). */
enum emu_mem_status emu_mem_check_local(struct emu_mem_table *t, uint32_t lmr_context,
                                        uint64_t addr, uint64_t len, uint32_t need,
                                        const struct emu_pz *pz, struct emu_mem_ref *out);
/* Another range of the region `held` (a reference a successful
 * emu_mem_check_local took, for the same lmr_context) checked the same
 * way, without a second reference: an iovec of several segments of one
 * registration. *ptr is the range's address. */
enum emu_mem_status emu_mem_check_local_more(const struct emu_mem_ref *held, uint64_t addr, uint64_t len,
                                             uint32_t need, const struct emu_pz *pz, void **ptr);

/* Drop the reference a successful check took. Idempotent per ref. */
void emu_mem_put(struct emu_mem_ref *ref);

/* ---- error mappings ---- */
struct emu_mem_term {
    uint8_t layer;              /* 0 RDMAP, 1 DDP (values of emu/ddp.h) */
    uint8_t etype;
    uint8_t ecode;
};
/* The Terminate a data sink/responder sends for failure st of op.
 * WRITE: DDP tagged-buffer codes; READ/ATOMIC: RDMAP remote-protection
 * codes; INVALIDATE: RDMAP "STag cannot be invalidated" (etype 1 for PZ /
 * scope failures, 2 otherwise). EMU_MEM_OK gives {0,0,0}. Defined in
 * emu/terminate.c, beside the other Terminate codes. */
struct emu_mem_term emu_mem_term_code(enum emu_mem_status st, enum emu_mem_op op);

/* Local check failures, as the provider reports them. */
enum emu_mem_local_err {
    EMU_MEM_LOCAL_OK = 0,
    EMU_MEM_LOCAL_PROTECTION,   /* bad/stale lmr_context, PZ, privilege */
    EMU_MEM_LOCAL_RANGE,        /* segment outside the region (or wraps) */
};
enum emu_mem_local_err emu_mem_local_class(enum emu_mem_status st);

/* Would an RNIC pin [addr, addr+len) for this access (mem_probe.c)?
 * 0; -EFAULT: part of it is not mapped, or mapped without any access;
 * -EACCES: write asked for and part of it is not writable. The caller
 * has checked that the range does not wrap. */
int emu_mem_probe(const void *addr, uint64_t len, bool write);

#endif
