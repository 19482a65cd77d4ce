/* Memory table: see emu/mem.h and docs/memory.md.
 *
 * Concurrency protocol (one slot = one region or window):
 *  - stag (atomic) is the publication word: non-zero only while the slot's
 *    reader fields describe a live, accessible object. Writers (under the
 *    table mutex) write the reader fields while stag == 0 and no reader
 *    holds the slot, then publish with a release store.
 *  - A reader first increments refs, then loads stag (both seq_cst) and
 *    compares it with the STag it was given; only on a match does it read
 *    the reader fields. A writer that retires a slot stores stag = 0
 *    (seq_cst) and then waits for refs == 0 (acquire). Store-then-load on
 *    both sides means either the reader sees 0, or the writer sees the
 *    reader's reference and waits for it: reader field reads always happen
 *    before the next rewrite.
 *  - Readers that lose the race (speculative increment, stale STag) never
 *    touch the fields, so a writer may rewrite a slot they transiently
 *    hold.
 *  - Window checks hold the window only while reading its fields, then
 *    move the reference to the region (re-validating the region's STag),
 *    so only region frees can wait on real data transfers. */
#include "emu/mem.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#define INDEX_MAX 0xFFFFFFu
#define MW_DRAIN_MS 2000u   /* window readers hold it for a few loads only */

enum { K_NONE = 0, K_MR, K_MW };
enum { S_FREE = 0, S_MR, S_MR_DYING, S_MW };

struct emu_mem_slot {
    _Atomic uint32_t stag;          /* published STag, 0 = inaccessible */
    _Atomic uint32_t refs;          /* checks in progress + held accesses */
    _Atomic bool rrevoked;          /* region: remote access invalidated */
    /* reader fields: rewritten only while unpublished and drained */
    uint8_t kind;
    uint8_t scope;
    uint32_t access;
    struct emu_pz *pz;
    uintptr_t base;                 /* local address of to_base */
    uint64_t len;
    uint64_t to_base;
    uint64_t conn_id;
    struct emu_mem_slot *mr;        /* window: region it is bound into */
    uint32_t mr_stag;               /* window: that region's STag */
    /* writer fields: table mutex only */
    uint8_t state;
    uint8_t mw_state;
    uint8_t key;
    uint32_t last_stag;
    uint64_t bind_addr;             /* window: sub-range start as given */
    uint32_t nbound;                /* region: windows bound into it */
    uint32_t slotno;
    struct emu_mem_table *t;
};

struct emu_pz {
    struct emu_mem_table *t;
    uint32_t users;
    bool live;
    uint32_t trace_id;
};

struct emu_mem_table {
    pthread_mutex_t lock;
    struct emu_mem_limits lim;
    uint32_t nslots;
    struct emu_mem_slot *slots;
    uint32_t *fifo;                 /* free slots, oldest first: delays reuse */
    uint32_t fifo_head, fifo_n;
    struct emu_pz *pzs;
    uint32_t *pz_free;              /* stack of free PZ numbers */
    uint32_t pz_nfree;
    uint32_t nmr, nmw;
};

/* Objects handed out are slots; the public types are never defined. */
static inline struct emu_mem_slot *mr_slot(struct emu_mr *mr) { return (struct emu_mem_slot *)(void *)mr; }
static inline struct emu_mem_slot *mw_slot(struct emu_mw *mw) { return (struct emu_mem_slot *)(void *)mw; }

const char *emu_mem_status_str(enum emu_mem_status st)
{
    switch (st) {
    case EMU_MEM_OK: return "ok";
    case EMU_MEM_E_STAG: return "invalid STag";
    case EMU_MEM_E_PZ: return "protection zone mismatch";
    case EMU_MEM_E_ACCESS: return "access rights violation";
    case EMU_MEM_E_TO_WRAP: return "tagged offset wraps";
    case EMU_MEM_E_BOUNDS: return "base or bounds violation";
    case EMU_MEM_E_SCOPE: return "window bound to another connection";
    case EMU_MEM_E_CANT_INVALIDATE: return "STag cannot be invalidated";
    case EMU_MEM_E_INVAL: return "invalid parameter";
    case EMU_MEM_E_HANDLE: return "invalid handle";
    case EMU_MEM_E_LIMIT: return "limit reached";
    case EMU_MEM_E_NOMEM: return "out of memory";
    case EMU_MEM_E_BUSY: return "in use";
    case EMU_MEM_E_INFLIGHT: return "accesses in flight";
    }
    return "unknown";
}

/* ------------------------------------------------------------ helpers */

static uint64_t rand64(void)
{
    uint64_t v = 0;
    if (getrandom(&v, sizeof v, GRND_NONBLOCK) != (ssize_t)sizeof v) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        v = (uint64_t)ts.tv_nsec * 0x9E3779B97F4A7C15ull ^ (uint64_t)ts.tv_sec ^
            (uint64_t)(uintptr_t)&v;
    }
    return v;
}

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static inline uint32_t stag_index(const struct emu_mem_table *t, const struct emu_mem_slot *s)
{
    return t->lim.first_index + s->slotno;
}

static inline struct emu_mem_slot *slot_of(struct emu_mem_table *t, uint32_t stag)
{
    uint32_t n = (stag >> 8) - t->lim.first_index;   /* wraps huge if below */
    return n < t->nslots ? &t->slots[n] : NULL;
}

static inline bool slot_get(struct emu_mem_slot *s, uint32_t stag)
{
    /* Filter first: stale or forged STags never touch refs, so a flood of
     * them cannot keep a dying slot from draining. */
    if (atomic_load_explicit(&s->stag, memory_order_relaxed) != stag)
        return false;
    atomic_fetch_add_explicit(&s->refs, 1, memory_order_seq_cst);
    if (atomic_load_explicit(&s->stag, memory_order_seq_cst) == stag)
        return true;
    atomic_fetch_sub_explicit(&s->refs, 1, memory_order_release);
    return false;
}

static inline void slot_put(struct emu_mem_slot *s)
{
    atomic_fetch_sub_explicit(&s->refs, 1, memory_order_release);
}

/* Make the slot's current STag dead for every later check. */
static inline void unpublish(struct emu_mem_slot *s)
{
    atomic_store_explicit(&s->stag, 0, memory_order_seq_cst);
}

/* New key, new STag, visible with the fields written before. */
static uint32_t publish(struct emu_mem_slot *s)
{
    s->key = (uint8_t)(s->key + 1);
    uint32_t stag = (stag_index(s->t, s) << 8) | s->key;
    s->last_stag = stag;
    atomic_store_explicit(&s->stag, stag, memory_order_release);
    return stag;
}

/* Bounded wait until no reader holds s (s already unpublished). */
static bool drain(struct emu_mem_slot *s, unsigned timeout_ms)
{
    for (int i = 0; i < 256; i++) {
        if (atomic_load_explicit(&s->refs, memory_order_acquire) == 0)
            return true;
        if (i >= 64)
            sched_yield();
    }
    uint64_t deadline = now_ms() + timeout_ms;
    for (;;) {
        if (atomic_load_explicit(&s->refs, memory_order_acquire) == 0)
            return true;
        if (now_ms() >= deadline)
            return false;
        struct timespec ts = {0, 50 * 1000};
        nanosleep(&ts, NULL);
    }
}

static struct emu_mem_slot *slot_alloc(struct emu_mem_table *t)
{
    if (t->fifo_n == 0)
        return NULL;
    uint32_t n = t->fifo[t->fifo_head];
    t->fifo_head = (t->fifo_head + 1) % t->nslots;
    t->fifo_n--;
    return &t->slots[n];
}

static void slot_release_to_fifo(struct emu_mem_table *t, struct emu_mem_slot *s)
{
    s->state = S_FREE;
    t->fifo[(t->fifo_head + t->fifo_n) % t->nslots] = s->slotno;
    t->fifo_n++;
}

/* Overflow-safe: [to, to+len) inside [base, base+rlen). */
static inline enum emu_mem_status range_check(uint64_t to, uint64_t len, uint64_t base,
                                              uint64_t rlen, uint64_t *off)
{
    if (len > UINT64_MAX - to)
        return EMU_MEM_E_TO_WRAP;
    if (to < base)
        return EMU_MEM_E_BOUNDS;
    uint64_t o = to - base;
    if (o > rlen || len > rlen - o)
        return EMU_MEM_E_BOUNDS;
    *off = o;
    return EMU_MEM_OK;
}

/* ------------------------------------------------------------ table */

enum emu_mem_status emu_mem_table_create(const struct emu_mem_limits *lim,
                                         struct emu_mem_table **out)
{
    if (!lim || !out)
        return EMU_MEM_E_INVAL;
    *out = NULL;
    uint64_t nslots = (uint64_t)lim->max_regions + lim->max_windows;
    if (nslots == 0 || nslots > EMU_MEM_MAX_SLOTS)
        return EMU_MEM_E_INVAL;
    uint32_t first = lim->first_index;
    if (first != 0 && (uint64_t)first + nslots - 1 > INDEX_MAX)
        return EMU_MEM_E_INVAL;

    struct emu_mem_table *t = calloc(1, sizeof *t);
    if (!t)
        return EMU_MEM_E_NOMEM;
    t->nslots = (uint32_t)nslots;
    t->slots = calloc(nslots, sizeof *t->slots);
    t->fifo = malloc(nslots * sizeof *t->fifo);
    t->pzs = calloc(lim->max_pzs ? lim->max_pzs : 1, sizeof *t->pzs);
    t->pz_free = malloc((lim->max_pzs ? lim->max_pzs : 1) * sizeof *t->pz_free);
    if (!t->slots || !t->fifo || !t->pzs || !t->pz_free) {
        free(t->slots), free(t->fifo), free(t->pzs), free(t->pz_free), free(t);
        return EMU_MEM_E_NOMEM;
    }
    pthread_mutex_init(&t->lock, NULL);
    t->lim = *lim;

    uint64_t r = rand64();
    if (first == 0) /* random start, never 0, the whole window below 2^24 */
        first = 1 + (uint32_t)(r % (INDEX_MAX - nslots + 1));
    t->lim.first_index = first;

    /* Random initial keys: a restarted process does not hand out the
     * STags of its previous life in the same order. */
    for (uint32_t i = 0; i < t->nslots; i++) {
        struct emu_mem_slot *s = &t->slots[i];
        r ^= r << 13, r ^= r >> 7, r ^= r << 17;
        s->key = (uint8_t)r;
        s->slotno = i;
        s->t = t;
        atomic_init(&s->stag, 0);
        atomic_init(&s->refs, 0);
        atomic_init(&s->rrevoked, false);
        t->fifo[i] = i;
    }
    t->fifo_head = 0;
    t->fifo_n = t->nslots;
    for (uint32_t i = 0; i < lim->max_pzs; i++) {
        t->pzs[i].t = t;
        t->pz_free[i] = lim->max_pzs - 1 - i;
    }
    t->pz_nfree = lim->max_pzs;
    *out = t;
    return EMU_MEM_OK;
}

void emu_mem_table_destroy(struct emu_mem_table *t)
{
    if (!t)
        return;
    pthread_mutex_destroy(&t->lock);
    free(t->slots);
    free(t->fifo);
    free(t->pzs);
    free(t->pz_free);
    free(t);
}

void emu_mem_table_limits(const struct emu_mem_table *t, struct emu_mem_limits *out)
{
    *out = t->lim;
}

/* ------------------------------------------------------------ PZ */

enum emu_mem_status emu_mem_pz_create(struct emu_mem_table *t, struct emu_pz **out)
{
    if (!t || !out)
        return EMU_MEM_E_INVAL;
    pthread_mutex_lock(&t->lock);
    if (t->pz_nfree == 0) {
        pthread_mutex_unlock(&t->lock);
        return EMU_MEM_E_LIMIT;
    }
    struct emu_pz *pz = &t->pzs[t->pz_free[--t->pz_nfree]];
    pz->live = true;
    pz->users = 0;
    pthread_mutex_unlock(&t->lock);
    *out = pz;
    return EMU_MEM_OK;
}

enum emu_mem_status emu_mem_pz_free(struct emu_pz *pz)
{
    if (!pz)
        return EMU_MEM_E_HANDLE;
    struct emu_mem_table *t = pz->t;
    enum emu_mem_status st = EMU_MEM_OK;
    pthread_mutex_lock(&t->lock);
    if (!pz->live)
        st = EMU_MEM_E_HANDLE;
    else if (pz->users)
        st = EMU_MEM_E_BUSY;
    else {
        pz->live = false;
        t->pz_free[t->pz_nfree++] = (uint32_t)(pz - t->pzs);
    }
    pthread_mutex_unlock(&t->lock);
    return st;
}

enum emu_mem_status emu_mem_pz_hold(struct emu_pz *pz)
{
    if (!pz)
        return EMU_MEM_E_HANDLE;
    enum emu_mem_status st = EMU_MEM_OK;
    pthread_mutex_lock(&pz->t->lock);
    if (pz->live)
        pz->users++;
    else
        st = EMU_MEM_E_HANDLE;
    pthread_mutex_unlock(&pz->t->lock);
    return st;
}

void emu_mem_pz_unhold(struct emu_pz *pz)
{
    if (!pz)
        return;
    pthread_mutex_lock(&pz->t->lock);
    if (pz->live && pz->users)
        pz->users--;
    pthread_mutex_unlock(&pz->t->lock);
}

static inline bool pz_ok(struct emu_mem_table *t, const struct emu_pz *pz)
{
    return pz && pz->t == t && pz->live;
}

/* ------------------------------------------------------------ regions */

enum emu_mem_status emu_mem_mr_register(struct emu_mem_table *t, const struct emu_mr_attr *a,
                                        struct emu_mr **out, uint32_t *stag)
{
    if (!t || !a || !out)
        return EMU_MEM_E_INVAL;
    if ((a->access & ~(uint32_t)EMU_ACC_MR_MASK) ||
        (a->va_type != EMU_VA_ABS && a->va_type != EMU_VA_ZB))
        return EMU_MEM_E_INVAL;
    uintptr_t base = (uintptr_t)a->addr;
    /* The end must be representable: accesses are [to, to+len) with
     * to+len <= 2^64-1, so the last byte of the address space is never
     * registrable (it is kernel space anyway). */
    if ((a->length && !a->addr) || a->length > UINTPTR_MAX - base)
        return EMU_MEM_E_INVAL;

    pthread_mutex_lock(&t->lock);
    enum emu_mem_status st = EMU_MEM_OK;
    struct emu_mem_slot *s = NULL;
    if (!pz_ok(t, a->pz))
        st = EMU_MEM_E_HANDLE;
    else if (t->nmr >= t->lim.max_regions || !(s = slot_alloc(t)))
        st = EMU_MEM_E_LIMIT;
    if (st) {
        pthread_mutex_unlock(&t->lock);
        return st;
    }
    s->kind = K_MR;
    s->scope = EMU_MW_SCOPE_PZ;
    s->access = a->access;
    s->pz = a->pz;
    s->base = base;
    s->len = a->length;
    s->to_base = a->va_type == EMU_VA_ZB ? 0 : (uint64_t)base;
    s->conn_id = 0;
    s->mr = NULL;
    s->mr_stag = 0;
    atomic_store_explicit(&s->rrevoked, false, memory_order_relaxed);
    s->state = S_MR;
    s->nbound = 0;
    a->pz->users++;
    t->nmr++;
    uint32_t v = publish(s);
    pthread_mutex_unlock(&t->lock);
    *out = (struct emu_mr *)(void *)s;
    if (stag)
        *stag = v;
    return EMU_MEM_OK;
}

enum emu_mem_status emu_mem_mr_free(struct emu_mr *mr, unsigned timeout_ms)
{
    if (!mr)
        return EMU_MEM_E_HANDLE;
    struct emu_mem_slot *s = mr_slot(mr);
    struct emu_mem_table *t = s->t;
    pthread_mutex_lock(&t->lock);
    if (s->state == S_MR) {
        if (s->nbound) {
            pthread_mutex_unlock(&t->lock);
            return EMU_MEM_E_BUSY;
        }
        unpublish(s);
        s->state = S_MR_DYING;
    } else if (s->state != S_MR_DYING) {
        pthread_mutex_unlock(&t->lock);
        return EMU_MEM_E_HANDLE;
    }
    pthread_mutex_unlock(&t->lock);

    /* Unlocked: a placement may take a while; the table stays usable. */
    if (!drain(s, timeout_ms))
        return EMU_MEM_E_INFLIGHT;

    pthread_mutex_lock(&t->lock);
    if (s->state == S_MR_DYING) {
        s->pz->users--;
        t->nmr--;
        s->kind = K_NONE;
        slot_release_to_fifo(t, s);
    }
    pthread_mutex_unlock(&t->lock);
    return EMU_MEM_OK;
}

enum emu_mem_status emu_mem_mr_query(struct emu_mr *mr, struct emu_mr_info *out)
{
    if (!mr || !out)
        return EMU_MEM_E_INVAL;
    struct emu_mem_slot *s = mr_slot(mr);
    enum emu_mem_status st = EMU_MEM_OK;
    pthread_mutex_lock(&s->t->lock);
    if (s->state != S_MR)
        st = EMU_MEM_E_HANDLE;
    else {
        out->stag = s->last_stag;
        out->addr = (void *)s->base;
        out->length = s->len;
        out->to_base = s->to_base;
        out->access = s->access;
        out->pz = s->pz;
        out->bound_windows = s->nbound;
        out->remote_revoked = atomic_load_explicit(&s->rrevoked, memory_order_relaxed);
    }
    pthread_mutex_unlock(&s->t->lock);
    return st;
}

/* ------------------------------------------------------------ windows */

enum emu_mem_status emu_mem_mw_create(struct emu_mem_table *t, struct emu_pz *pz,
                                      enum emu_mw_scope scope, struct emu_mw **out)
{
    if (!t || !out || (scope != EMU_MW_SCOPE_PZ && scope != EMU_MW_SCOPE_CONN))
        return EMU_MEM_E_INVAL;
    pthread_mutex_lock(&t->lock);
    enum emu_mem_status st = EMU_MEM_OK;
    struct emu_mem_slot *s = NULL;
    if (!pz_ok(t, pz))
        st = EMU_MEM_E_HANDLE;
    else if (t->nmw >= t->lim.max_windows || !(s = slot_alloc(t)))
        st = EMU_MEM_E_LIMIT;
    if (st) {
        pthread_mutex_unlock(&t->lock);
        return st;
    }
    s->kind = K_MW;
    s->scope = (uint8_t)scope;
    s->access = 0;
    s->pz = pz;
    s->base = 0;
    s->len = 0;
    s->to_base = 0;
    s->conn_id = 0;
    s->mr = NULL;
    s->mr_stag = 0;
    s->state = S_MW;
    s->mw_state = EMU_MW_UNBOUND;
    s->last_stag = 0;
    pz->users++;
    t->nmw++;
    pthread_mutex_unlock(&t->lock);
    *out = (struct emu_mw *)(void *)s;
    return EMU_MEM_OK;
}

/* Locked. Kills the window's STag and its claim on the region; the reader
 * fields stay as they are (checks may still be reading them). */
static void mw_detach(struct emu_mem_slot *w, uint8_t new_state)
{
    if (w->mw_state == EMU_MW_BOUND) {
        unpublish(w);
        w->mr->nbound--;
    }
    w->mw_state = new_state;
}

enum emu_mem_status emu_mem_mw_free(struct emu_mw *mw)
{
    if (!mw)
        return EMU_MEM_E_HANDLE;
    struct emu_mem_slot *w = mw_slot(mw);
    struct emu_mem_table *t = w->t;
    pthread_mutex_lock(&t->lock);
    if (w->state != S_MW) {
        pthread_mutex_unlock(&t->lock);
        return EMU_MEM_E_HANDLE;
    }
    mw_detach(w, EMU_MW_UNBOUND);
    if (!drain(w, MW_DRAIN_MS)) {
        pthread_mutex_unlock(&t->lock);
        return EMU_MEM_E_INFLIGHT;
    }
    w->pz->users--;
    t->nmw--;
    w->kind = K_NONE;
    slot_release_to_fifo(t, w);
    pthread_mutex_unlock(&t->lock);
    return EMU_MEM_OK;
}

enum emu_mem_status emu_mem_mw_bind(struct emu_mw *mw, const struct emu_mw_bind_attr *a,
                                    uint32_t *stag)
{
    if (!mw || !a)
        return EMU_MEM_E_INVAL;
    if ((a->access & ~(uint32_t)EMU_ACC_REMOTE_MASK) ||
        (a->va_type != EMU_VA_ABS && a->va_type != EMU_VA_ZB))
        return EMU_MEM_E_INVAL;
    struct emu_mem_slot *w = mw_slot(mw);
    struct emu_mem_table *t = w->t;
    enum emu_mem_status st = EMU_MEM_OK;
    uint64_t off = 0;
    pthread_mutex_lock(&t->lock);
    struct emu_mem_slot *r = a->mr ? mr_slot(a->mr) : NULL;
    if (w->state != S_MW || !r || r->t != t || r->state != S_MR)
        st = EMU_MEM_E_HANDLE;
    else if (w->pz != r->pz || (a->ep_pz && a->ep_pz != w->pz))
        st = EMU_MEM_E_PZ;
    else if (!(r->access & EMU_ACC_MW_BIND) ||
             ((a->access & EMU_ACC_REMOTE_READ) && !(r->access & EMU_ACC_LOCAL_READ)) ||
             ((a->access & (EMU_ACC_REMOTE_WRITE | EMU_ACC_REMOTE_ATOMIC)) &&
              !(r->access & EMU_ACC_LOCAL_WRITE)))
        st = EMU_MEM_E_ACCESS;
    else if (range_check(a->addr, a->length, r->to_base, r->len, &off) != EMU_MEM_OK)
        st = EMU_MEM_E_BOUNDS;
    if (st) {
        pthread_mutex_unlock(&t->lock);
        return st;
    }
    mw_detach(w, EMU_MW_UNBOUND);
    if (!drain(w, MW_DRAIN_MS)) {
        pthread_mutex_unlock(&t->lock);
        return EMU_MEM_E_INFLIGHT;
    }
    w->mr = r;
    w->mr_stag = r->last_stag;
    w->base = r->base + (uintptr_t)off;
    w->len = a->length;
    w->to_base = a->va_type == EMU_VA_ZB ? 0 : a->addr;
    w->access = a->access;
    w->conn_id = a->conn_id;
    w->bind_addr = a->addr;
    r->nbound++;
    w->mw_state = EMU_MW_BOUND;
    uint32_t v = publish(w);
    pthread_mutex_unlock(&t->lock);
    if (stag)
        *stag = v;
    return EMU_MEM_OK;
}

enum emu_mem_status emu_mem_mw_unbind(struct emu_mw *mw)
{
    if (!mw)
        return EMU_MEM_E_HANDLE;
    struct emu_mem_slot *w = mw_slot(mw);
    enum emu_mem_status st = EMU_MEM_OK;
    pthread_mutex_lock(&w->t->lock);
    if (w->state != S_MW)
        st = EMU_MEM_E_HANDLE;
    else
        mw_detach(w, EMU_MW_UNBOUND);
    pthread_mutex_unlock(&w->t->lock);
    return st;
}

enum emu_mem_status emu_mem_mw_query(struct emu_mw *mw, struct emu_mw_info *out)
{
    if (!mw || !out)
        return EMU_MEM_E_INVAL;
    struct emu_mem_slot *w = mw_slot(mw);
    enum emu_mem_status st = EMU_MEM_OK;
    pthread_mutex_lock(&w->t->lock);
    if (w->state != S_MW)
        st = EMU_MEM_E_HANDLE;
    else {
        bool b = w->mw_state == EMU_MW_BOUND;
        out->state = (enum emu_mw_state)w->mw_state;
        out->scope = (enum emu_mw_scope)w->scope;
        out->stag = w->last_stag;
        out->pz = w->pz;
        out->mr = b ? (struct emu_mr *)(void *)w->mr : NULL;
        out->addr = b ? w->bind_addr : 0;
        out->length = b ? w->len : 0;
        out->access = b ? w->access : 0;
        out->conn_id = b ? w->conn_id : 0;
    }
    pthread_mutex_unlock(&w->t->lock);
    return st;
}

/* ------------------------------------------------------------ invalidate */

static enum emu_mem_status invalidate(struct emu_mem_table *t, uint32_t stag,
                                      const struct emu_pz *pz, bool remote, uint64_t conn_id)
{
    if (!t)
        return EMU_MEM_E_INVAL;
    struct emu_mem_slot *s = slot_of(t, stag);
    if (!s)
        return EMU_MEM_E_STAG;
    enum emu_mem_status st = EMU_MEM_OK;
    pthread_mutex_lock(&t->lock);
    /* Publication changes only under this lock, so one load suffices. */
    if (atomic_load_explicit(&s->stag, memory_order_relaxed) != stag)
        st = EMU_MEM_E_STAG;
    else if (s->kind == K_MR && atomic_load_explicit(&s->rrevoked, memory_order_relaxed))
        st = EMU_MEM_E_STAG;
    else if (s->pz != pz)
        st = EMU_MEM_E_PZ;
    else if (s->kind == K_MR && !(s->access & EMU_ACC_REMOTE_INVALIDATE))
        st = EMU_MEM_E_CANT_INVALIDATE;
    else if (s->kind == K_MW && remote && s->scope == EMU_MW_SCOPE_CONN && s->conn_id != conn_id)
        st = EMU_MEM_E_SCOPE;
    else if (s->kind == K_MR)
        atomic_store_explicit(&s->rrevoked, true, memory_order_relaxed);
    else
        mw_detach(s, EMU_MW_INVALIDATED);
    pthread_mutex_unlock(&t->lock);
    return st;
}

enum emu_mem_status emu_mem_invalidate(struct emu_mem_table *t, uint32_t stag,
                                       const struct emu_pz *pz, uint64_t conn_id)
{
    return invalidate(t, stag, pz, true, conn_id);
}

enum emu_mem_status emu_mem_invalidate_local(struct emu_mem_table *t, uint32_t stag,
                                             const struct emu_pz *pz)
{
    return invalidate(t, stag, pz, false, 0);
}

/* ------------------------------------------------------------ checks */

static inline enum emu_mem_status check_fields(const struct emu_mem_slot *s, uint64_t to,
                                               uint64_t len, uint32_t need,
                                               const struct emu_pz *pz, void **ptr)
{
    if (s->pz != pz)
        return EMU_MEM_E_PZ;
    if ((s->access & need) != need)
        return EMU_MEM_E_ACCESS;
    uint64_t off;
    enum emu_mem_status st = range_check(to, len, s->to_base, s->len, &off);
    if (st)
        return st;
    *ptr = (void *)(s->base + (uintptr_t)off);
    return EMU_MEM_OK;
}

enum emu_mem_status emu_mem_check_remote(struct emu_mem_table *t, uint32_t stag, uint64_t to,
                                         uint64_t len, enum emu_mem_op op,
                                         const struct emu_pz *pz, uint64_t conn_id,
                                         struct emu_mem_ref *out)
{
    out->ptr = NULL;
    out->len = 0;
    out->hold = NULL;
    uint32_t need;
    switch (op) {
    case EMU_MEM_OP_WRITE: need = EMU_ACC_REMOTE_WRITE; break;
    case EMU_MEM_OP_READ: need = EMU_ACC_REMOTE_READ; break;
    case EMU_MEM_OP_ATOMIC: need = EMU_ACC_REMOTE_ATOMIC; break;
    default: return EMU_MEM_E_INVAL;
    }
    struct emu_mem_slot *s = slot_of(t, stag);
    if (!s || !slot_get(s, stag))
        return EMU_MEM_E_STAG;

    void *ptr = NULL;
    enum emu_mem_status st;
    if (s->kind == K_MR) {
        if (atomic_load_explicit(&s->rrevoked, memory_order_relaxed))
            st = EMU_MEM_E_STAG;
        else
            st = check_fields(s, to, len, need, pz, &ptr);
        if (st) {
            slot_put(s);
            return st;
        }
        out->hold = s;
    } else {
        st = check_fields(s, to, len, need, pz, &ptr);
        if (!st && s->scope == EMU_MW_SCOPE_CONN && s->conn_id != conn_id)
            st = EMU_MEM_E_SCOPE;
        /* Move the hold to the region; it cannot be freed while bound, but
         * the window may have been unbound meanwhile. */
        struct emu_mem_slot *r = st ? NULL : s->mr;
        if (r && !slot_get(r, s->mr_stag))
            st = EMU_MEM_E_STAG;
        slot_put(s);
        if (st)
            return st;
        out->hold = r;
    }
    out->ptr = ptr;
    out->len = len;
    return EMU_MEM_OK;
}

enum emu_mem_status emu_mem_check_local(struct emu_mem_table *t, uint32_t lmr_context,
                                        uint64_t addr, uint64_t len, uint32_t need,
                                        const struct emu_pz *pz, struct emu_mem_ref *out)
{
    out->ptr = NULL;
    out->len = 0;
    out->hold = NULL;
    if (need & ~(uint32_t)EMU_ACC_LOCAL_MASK)
        return EMU_MEM_E_INVAL;
    struct emu_mem_slot *s = slot_of(t, lmr_context);
    if (!s || !slot_get(s, lmr_context))
        return EMU_MEM_E_STAG;
    void *ptr = NULL;
    enum emu_mem_status st =
        s->kind == K_MR ? check_fields(s, addr, len, need, pz, &ptr) : EMU_MEM_E_STAG;
    if (st) {
        slot_put(s);
        return st;
    }
    out->hold = s;
    out->ptr = ptr;
    out->len = len;
    return EMU_MEM_OK;
}

enum emu_mem_status emu_mem_check_local_more(const struct emu_mem_ref *held, uint64_t addr, uint64_t len,
                                             uint32_t need, const struct emu_pz *pz, void **ptr)
{
    *ptr = NULL;
    if (need & ~(uint32_t)EMU_ACC_LOCAL_MASK)
        return EMU_MEM_E_INVAL;
    const struct emu_mem_slot *s = held->hold;
    if (s == NULL)
        return EMU_MEM_E_STAG;
    return check_fields(s, addr, len, need, pz, ptr);
}

void emu_mem_put(struct emu_mem_ref *ref)
{
    if (ref && ref->hold) {
        slot_put(ref->hold);
        ref->hold = NULL;
    }
}

/* ------------------------------------------------------------ mappings */

enum emu_mem_local_err emu_mem_local_class(enum emu_mem_status st)
{
    switch (st) {
    case EMU_MEM_OK: return EMU_MEM_LOCAL_OK;
    case EMU_MEM_E_TO_WRAP:
    case EMU_MEM_E_BOUNDS: return EMU_MEM_LOCAL_RANGE;
    default: return EMU_MEM_LOCAL_PROTECTION;
    }
}

/* ------------------------------------------------------------ trace */

void emu_mem_pz_set_trace_id(struct emu_pz *pz, uint32_t id)
{
    pz->trace_id = id;
}

uint32_t emu_mem_pz_trace_id(const struct emu_pz *pz)
{
    return pz ? pz->trace_id : 0;
}

void emu_mem_explain(struct emu_mem_table *t, uint32_t stag, enum emu_mem_status st,
                     struct emu_mem_why *out)
{
    memset(out, 0, sizeof *out);
    struct emu_mem_slot *s = slot_of(t, stag);
    if (s != NULL && slot_get(s, stag)) {
        out->found = true;
        out->window = s->kind == K_MW;
        out->key = (uint8_t)stag;
        out->pz_trace_id = emu_mem_pz_trace_id(s->pz);
        out->access = s->access;
        out->base = s->to_base;
        out->bound = s->to_base + s->len;
        if (s->kind == K_MR && atomic_load_explicit(&s->rrevoked, memory_order_relaxed))
            out->reason = "invalidated";
        slot_put(s);
    } else if (s != NULL) {
        uint32_t now = atomic_load_explicit(&s->stag, memory_order_relaxed);
        if (now != 0) {
            out->found = true;
            out->key = (uint8_t)now;
        }
    }
    static const char *const why[] = {
        [EMU_MEM_OK] = "ok",
        [EMU_MEM_E_STAG] = "no such stag",
        [EMU_MEM_E_PZ] = "pz mismatch",
        [EMU_MEM_E_ACCESS] = "no privilege",
        [EMU_MEM_E_TO_WRAP] = "to wraps",
        [EMU_MEM_E_BOUNDS] = "out of bounds",
        [EMU_MEM_E_SCOPE] = "window scope",
        [EMU_MEM_E_CANT_INVALIDATE] = "cannot invalidate",
    };
    if (st == EMU_MEM_E_STAG && out->reason == NULL && out->found)
        out->reason = "key mismatch";
    if (out->reason == NULL || st != EMU_MEM_E_STAG)
        out->reason = (unsigned)st < sizeof why / sizeof why[0] && why[st] ? why[st] : emu_mem_status_str(st);
}
