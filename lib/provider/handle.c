/* softdat handle framework (see handle.h for the contract). */
#include "emu/fault.h"
#include "lib/provider/handle.h"

#include <pthread.h>
#include <stdalign.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "emu/log.h"
#include "lib/provider/ia.h"

/* Resolved against whichever registry loaded us; absent (NULL) when the
 * provider is linked into a test program without one. */
extern DAT_RETURN dats_get_ia_handle(DAT_IA_HANDLE, DAT_IA_HANDLE *);
#pragma weak dats_get_ia_handle

/* Values below this are never object addresses (the first page(s) are never
 * mapped); the OFA registry's consumer IA handles are small integers. */
#define SD_SMALL_HANDLE_LIMIT 65536u

/* ------------------------------------------------------------ live set */

#define SD_SHARD_BITS 4
#define SD_SHARDS (1u << SD_SHARD_BITS)

struct shard {
    pthread_rwlock_t lock;
    uintptr_t *slots; /* 0 = empty; linear probing, backward-shift delete */
    size_t cap;       /* power of two or 0 */
    size_t count;
};

#define SHARD_INIT {PTHREAD_RWLOCK_INITIALIZER, NULL, 0, 0}
static struct shard g_shards[SD_SHARDS] = {
    SHARD_INIT, SHARD_INIT, SHARD_INIT, SHARD_INIT, SHARD_INIT, SHARD_INIT, SHARD_INIT, SHARD_INIT,
    SHARD_INIT, SHARD_INIT, SHARD_INIT, SHARD_INIT, SHARD_INIT, SHARD_INIT, SHARD_INIT, SHARD_INIT,
};

static inline uint64_t ptr_hash(uintptr_t p)
{
    uint64_t x = (uint64_t)p >> 4;
    x *= 0x9E3779B97F4A7C15ull;
    return x ^ (x >> 31);
}

static inline struct shard *shard_of(uintptr_t p)
{
    return &g_shards[ptr_hash(p) >> (64 - SD_SHARD_BITS)];
}

static inline size_t home_of(const struct shard *s, uintptr_t p)
{
    return (size_t)ptr_hash(p) & (s->cap - 1);
}

static bool shard_find(const struct shard *s, uintptr_t p)
{
    if (s->cap == 0)
        return false;
    size_t mask = s->cap - 1;
    for (size_t i = home_of(s, p), n = 0; n < s->cap; i = (i + 1) & mask, n++) {
        if (s->slots[i] == p)
            return true;
        if (s->slots[i] == 0)
            return false;
    }
    return false;
}

static void shard_place(struct shard *s, uintptr_t p)
{
    size_t mask = s->cap - 1;
    size_t i = home_of(s, p);
    while (s->slots[i] != 0)
        i = (i + 1) & mask;
    s->slots[i] = p;
}

static bool shard_insert(struct shard *s, uintptr_t p)
{
    if ((s->count + 1) * 2 > s->cap) {
        size_t ncap = s->cap ? s->cap * 2 : 64;
        uintptr_t *nslots = calloc(ncap, sizeof *nslots);
        if (nslots == NULL)
            return false;
        uintptr_t *old = s->slots;
        size_t ocap = s->cap;
        s->slots = nslots;
        s->cap = ncap;
        for (size_t i = 0; i < ocap; i++)
            if (old[i] != 0)
                shard_place(s, old[i]);
        free(old);
    }
    shard_place(s, p);
    s->count++;
    return true;
}

static bool shard_remove(struct shard *s, uintptr_t p)
{
    if (s->cap == 0)
        return false;
    size_t mask = s->cap - 1;
    size_t i = home_of(s, p), n = 0;
    for (; n < s->cap; i = (i + 1) & mask, n++) {
        if (s->slots[i] == p)
            break;
        if (s->slots[i] == 0)
            return false;
    }
    if (n == s->cap)
        return false;
    /* Backward shift: pull later members of the probe run into the hole so
     * lookups never need tombstones. */
    size_t j = i;
    for (;;) {
        j = (j + 1) & mask;
        uintptr_t q = s->slots[j];
        if (q == 0)
            break;
        size_t k = home_of(s, q);
        bool movable = (j > i) ? (k <= i || k > j) : (k <= i && k > j);
        if (movable) {
            s->slots[i] = q;
            i = j;
        }
    }
    s->slots[i] = 0;
    s->count--;
    return true;
}

static bool set_insert(uintptr_t p)
{
    struct shard *s = shard_of(p);
    pthread_rwlock_wrlock(&s->lock);
    bool ok = shard_insert(s, p);
    pthread_rwlock_unlock(&s->lock);
    return ok;
}

/* Counts handles that left the live set: a thread's cached look-up
 * (lookup_cached) holds only while it is unchanged. */
static _Atomic uint64_t g_unpublished;

/* Removal and the magic flip happen under the shard lock, so a concurrent
 * sd_handle_get either found the handle live (and holds a reference) or
 * does not find it at all. */
static bool set_remove_and_kill(struct sd_handle *h)
{
    uintptr_t p = (uintptr_t)h;
    struct shard *s = shard_of(p);
    pthread_rwlock_wrlock(&s->lock);
    bool ok = shard_remove(s, p);
    if (ok) {
        atomic_fetch_add(&g_unpublished, 1); /* before the creation reference can go */
        atomic_store_explicit(&h->magic, SD_HANDLE_MAGIC_DEAD, memory_order_release);
    }
    pthread_rwlock_unlock(&s->lock);
    return ok;
}

size_t sd_handle_live_count(void)
{
    size_t n = 0;
    for (unsigned i = 0; i < SD_SHARDS; i++) {
        pthread_rwlock_rdlock(&g_shards[i].lock);
        n += g_shards[i].count;
        pthread_rwlock_unlock(&g_shards[i].lock);
    }
    return n;
}

/* ------------------------------------------------------------ quarantine */

#define SD_QUARANTINE 1024

static pthread_mutex_t g_q_lock = PTHREAD_MUTEX_INITIALIZER;
static void *g_q[SD_QUARANTINE];
static size_t g_q_head, g_q_count;

static void quarantine_push(void *mem)
{
    void *evict = NULL;
    pthread_mutex_lock(&g_q_lock);
    if (g_q_count == SD_QUARANTINE) {
        evict = g_q[g_q_head];
        g_q[g_q_head] = mem;
        g_q_head = (g_q_head + 1) % SD_QUARANTINE;
    } else {
        g_q[(g_q_head + g_q_count) % SD_QUARANTINE] = mem;
        g_q_count++;
    }
    pthread_mutex_unlock(&g_q_lock);
    free(evict);
}

void sd_handle_registry_shutdown(void)
{
    pthread_mutex_lock(&g_q_lock);
    for (size_t i = 0; i < g_q_count; i++)
        free(g_q[(g_q_head + i) % SD_QUARANTINE]);
    g_q_head = g_q_count = 0;
    pthread_mutex_unlock(&g_q_lock);

    size_t leaked = 0;
    for (unsigned i = 0; i < SD_SHARDS; i++) {
        struct shard *s = &g_shards[i];
        pthread_rwlock_wrlock(&s->lock);
        if (s->count == 0) {
            free(s->slots);
            s->slots = NULL;
            s->cap = 0;
        }
        leaked += s->count;
        pthread_rwlock_unlock(&s->lock);
    }
    if (leaked)
        SD_WARN("handle", "%zu handles still live at provider shutdown", leaked);
}

/* ------------------------------------------------------------ lifetime */

/* One counter per DAT handle type (and one for the two private extension
 * types and anything else): ids stay small and read as "the third EP". */
#define ID_SLOTS 15
static atomic_uint g_next_id[ID_SLOTS];

static unsigned id_slot(uint32_t type)
{
    if (type < DAT_HANDLE_TYPE_EXTENSION_BASE)
        return type;
    return type == SD_HTYPE_SSP ? 12 : type == SD_HTYPE_IA_QUERY ? 13 : 14;
}

const char *sd_handle_type_prefix(uint32_t type)
{
    static const char *const names[ID_SLOTS] = {"cr",  "ep",  "evd", "ia",  "lmr", "psp", "pz",   "rmr",
                                                "rsp", "cno", "srq", "csp", "ssp", "iaq", "obj"};
    return names[id_slot(type)];
}

struct sd_handle *sd_handle_alloc(const struct sd_handle_ops *ops, struct sd_ia *ia)
{
    /* SOFTDAT_FAULT create=: a consumer's object creation fails as for lack
     * of memory (the IA itself and incoming connection requests excepted). */
    if (ia != NULL && ops->type != DAT_HANDLE_TYPE_CR && emu_fault_hit(EMU_FAULT_CREATE))
        return NULL;
    struct sd_handle *h = calloc(1, ops->size);
    if (h == NULL)
        return NULL;
    h->provider = ia ? ia->h.provider : NULL;
    atomic_init(&h->magic, SD_HANDLE_MAGIC_LIVE);
    h->type = ops->type;
    h->ia = ia;
    h->ops = ops;
    atomic_init(&h->refs, 1);
    atomic_init(&h->deps, 0);
    h->ia_link.prev = h->ia_link.next = &h->ia_link;
    h->id = atomic_fetch_add(&g_next_id[id_slot(ops->type)], 1) + 1;
    return h;
}

static inline bool is_child(const struct sd_handle *h)
{
    return h->ia != NULL && &h->ia->h != h;
}

static void link_del(struct sd_link *l)
{
    l->prev->next = l->next;
    l->next->prev = l->prev;
    l->prev = l->next = l;
}

static void child_unlink_locked(struct sd_handle *h)
{
    struct sd_ia *ia = h->ia;
    link_del(&h->ia_link);
    sd_cnt_object(h, false);
    ia->nchildren--;
    if (h->type < SD_NTYPES)
        ia->per_type[h->type]--;
}

DAT_RETURN sd_handle_publish(struct sd_handle *h)
{
    struct sd_ia *ia = h->ia;
    bool child = is_child(h);
    if (child) {
        pthread_mutex_lock(&ia->lock);
        if (ia->closing) {
            pthread_mutex_unlock(&ia->lock);
            return SD_RET(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);
        }
        uint32_t sub = DAT_RESOURCE_MEMORY;
        unsigned limit = sd_ia_type_limit(h->type, &sub);
        if (limit != 0 && h->type < SD_NTYPES && ia->per_type[h->type] >= limit) {
            pthread_mutex_unlock(&ia->lock);
            SD_DBG("handle", "%s limit %u reached", h->ops->name, limit);
            return SD_RET(DAT_INSUFFICIENT_RESOURCES, sub);
        }
    }
    bool ok = set_insert((uintptr_t)h);
    if (ok && child) {
        struct sd_link *head = &ia->children;
        h->ia_link.prev = head->prev;
        h->ia_link.next = head;
        head->prev->next = &h->ia_link;
        head->prev = &h->ia_link;
        ia->nchildren++;
        if (h->type < SD_NTYPES)
            ia->per_type[h->type]++;
        sd_cnt_object(h, true);
    }
    if (child)
        pthread_mutex_unlock(&ia->lock);
    return ok ? DAT_SUCCESS : SD_RET(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
}

void sd_handle_discard(struct sd_handle *h)
{
    if (h == NULL)
        return;
    if (h->ops->release)
        h->ops->release(h);
    free(h);
}

static void final_release(struct sd_handle *h)
{
    const struct sd_handle_ops *ops = h->ops;
    if (ops->release)
        ops->release(h);
    /* Poison all but the provider word, which the registry dereferences
     * when a consumer uses the stale handle. */
    h->magic = SD_HANDLE_MAGIC_DEAD;
    h->type = SD_HTYPE_DEAD;
    h->ia = NULL;
    h->ops = NULL;
    memset(&h->context, 0, sizeof h->context);
    if (ops->size > sizeof *h)
        memset((char *)h + sizeof *h, 0xDB, ops->size - sizeof *h);
    quarantine_push(h);
}

void sd_handle_ref(struct sd_handle *h)
{
    atomic_fetch_add_explicit(&h->refs, 1, memory_order_relaxed);
}

void sd_handle_put(struct sd_handle *h)
{
    if (h == NULL)
        return;
    if (atomic_fetch_sub_explicit(&h->refs, 1, memory_order_acq_rel) == 1)
        final_release(h);
}

/* A thread's last few validated handles. Every DAT call looks its handle
 * up, a polling loop millions of times a second (the EVD on each
 * dat_evd_dequeue, the EP on each post): the shard's read lock and the
 * hash probe were a third of an empty dequeue. An entry holds while no
 * handle has left the live set since it was filled (g_unpublished): the
 * handle was live then, so it is still. */
#define HCACHE_WAYS 4
struct hcache_ent {
    uintptr_t p;
    uint32_t type;
    uint64_t epoch;
};
static _Thread_local struct hcache_ent tl_hcache[HCACHE_WAYS];
static _Thread_local unsigned tl_hcache_next;

/* The reference for a cached handle, or NULL (look it up under the lock).
 * The count is raised only from non-zero: an object whose last reference
 * went meanwhile is not revived. The second look at the epoch orders the
 * look-up before any unpublish that follows it (sequentially consistent
 * operations: an unpublish not seen by that load comes after the raise,
 * so the creation reference was still held and the object still live). */
static struct sd_handle *lookup_cached(uintptr_t p, uint32_t type)
{
    uint64_t epoch = atomic_load(&g_unpublished);
    for (unsigned i = 0; i < HCACHE_WAYS; i++) {
        const struct hcache_ent *e = &tl_hcache[i];
        if (e->p != p || e->epoch != epoch || (type != SD_HTYPE_ANY && e->type != type))
            continue;
        struct sd_handle *h = (struct sd_handle *)p;
        unsigned r = atomic_load_explicit(&h->refs, memory_order_relaxed);
        do {
            if (r == 0)
                return NULL;
        } while (!atomic_compare_exchange_weak(&h->refs, &r, r + 1));
        if (atomic_load(&g_unpublished) == epoch)
            return h;
        sd_handle_put(h); /* something left the live set meanwhile: look it up */
        return NULL;
    }
    return NULL;
}

/* (after a locked look-up found h live) Remember it, stamped with an epoch
 * read before that look-up began. */
static void hcache_fill(uintptr_t p, uint32_t type, uint64_t epoch)
{
    unsigned i = tl_hcache_next++ % HCACHE_WAYS;
    tl_hcache[i].p = p;
    tl_hcache[i].type = type;
    tl_hcache[i].epoch = epoch;
}

DAT_RETURN sd_handle_get(DAT_HANDLE raw, uint32_t type, uint32_t bad_subtype, struct sd_handle **out)
{
    DAT_RETURN bad = SD_RET(DAT_INVALID_HANDLE, bad_subtype);
    uintptr_t p = (uintptr_t)raw;
    *out = NULL;
    if (p == 0)
        return bad;
    if (p >= SD_SMALL_HANDLE_LIMIT) {
        struct sd_handle *h = lookup_cached(p, type);
        if (h != NULL) {
            *out = h;
            return DAT_SUCCESS;
        }
    }
    if (p < SD_SMALL_HANDLE_LIMIT) {
        /* A consumer IA handle that reached us without the registry's
         * mapping (dats_get_ia_handle is bidirectional). */
        DAT_IA_HANDLE mapped = NULL;
        if (type != DAT_HANDLE_TYPE_IA && type != SD_HTYPE_ANY)
            return bad;
        if (!dats_get_ia_handle || dats_get_ia_handle(raw, &mapped) != DAT_SUCCESS)
            return bad;
        p = (uintptr_t)mapped;
        if (p < SD_SMALL_HANDLE_LIMIT)
            return bad;
    }
    if (p % alignof(struct sd_handle) != 0)
        return bad;
    struct shard *s = shard_of(p);
    DAT_RETURN rc = bad;
    uint32_t found_type = 0;
    uint64_t epoch = atomic_load(&g_unpublished);
    pthread_rwlock_rdlock(&s->lock);
    if (shard_find(s, p)) {
        struct sd_handle *h = (struct sd_handle *)p;
        if (h->magic == SD_HANDLE_MAGIC_LIVE && (type == SD_HTYPE_ANY || h->type == type)) {
            atomic_fetch_add_explicit(&h->refs, 1, memory_order_relaxed);
            found_type = h->type;
            *out = h;
            rc = DAT_SUCCESS;
        }
    }
    pthread_rwlock_unlock(&s->lock);
    if (rc == DAT_SUCCESS)
        hcache_fill(p, found_type, epoch);
    return rc;
}

bool sd_handle_peek(DAT_HANDLE raw, struct sd_handle_peek *out)
{
    uintptr_t p = (uintptr_t)raw;
    if (p < SD_SMALL_HANDLE_LIMIT) {
        DAT_IA_HANDLE mapped = NULL;
        if (p == 0 || !dats_get_ia_handle || dats_get_ia_handle(raw, &mapped) != DAT_SUCCESS)
            return false;
        p = (uintptr_t)mapped;
        if (p < SD_SMALL_HANDLE_LIMIT)
            return false;
    }
    if (p % alignof(struct sd_handle) != 0)
        return false;
    struct shard *s = shard_of(p);
    bool ok = false;
    pthread_rwlock_rdlock(&s->lock);
    if (shard_find(s, p)) {
        /* Published: not yet unpublished (that needs this lock for
         * writing), so neither it nor its IA has been released. */
        const struct sd_handle *h = (const struct sd_handle *)p;
        if (h->magic == SD_HANDLE_MAGIC_LIVE) {
            out->type = h->type;
            out->id = h->id;
            out->ia_id = h->ia ? h->ia->h.id : 0;
            out->ia_t0_ns = h->ia ? h->ia->t0_ns : 0;
            ok = true;
        }
    }
    pthread_rwlock_unlock(&s->lock);
    return ok;
}

/* Unpublish: out of the live set and off the IA's list, atomically with
 * respect to publish/take_child (ia->lock, then shard lock). */
static bool unpublish(struct sd_handle *h)
{
    bool child = is_child(h);
    struct sd_ia *ia = h->ia;
    if (child)
        pthread_mutex_lock(&ia->lock);
    bool ok = set_remove_and_kill(h);
    if (ok && child)
        child_unlink_locked(h);
    if (child)
        pthread_mutex_unlock(&ia->lock);
    return ok;
}

DAT_RETURN sd_handle_destroy(struct sd_handle *h, uint32_t bad_subtype)
{
    if (!unpublish(h))
        return SD_RET(DAT_INVALID_HANDLE, bad_subtype);
    if (h->ops->teardown)
        h->ops->teardown(h);
    sd_handle_put(h); /* the creation reference */
    return DAT_SUCCESS;
}

struct sd_handle *sd_handle_take_child(struct sd_ia *ia, enum sd_phase phase)
{
    struct sd_handle *found = NULL;
    pthread_mutex_lock(&ia->lock);
    for (struct sd_link *l = ia->children.next; l != &ia->children; l = l->next) {
        struct sd_handle *h = (struct sd_handle *)((char *)l - offsetof(struct sd_handle, ia_link));
        if (h->ops->phase != phase)
            continue;
        if (set_remove_and_kill(h)) {
            child_unlink_locked(h);
            found = h;
        }
        break;
    }
    pthread_mutex_unlock(&ia->lock);
    return found;
}

void sd_handle_finish_child(struct sd_handle *h)
{
    if (h->ops->teardown)
        h->ops->teardown(h);
    sd_handle_put(h);
}

/* ------------------------------------------------------------ dependencies */

int sd_handle_dep_get(struct sd_handle *h)
{
    unsigned v = atomic_load_explicit(&h->deps, memory_order_relaxed);
    do {
        if (v & SD_DEPS_DYING)
            return 0;
    } while (!atomic_compare_exchange_weak_explicit(&h->deps, &v, v + 1, memory_order_acq_rel,
                                                    memory_order_relaxed));
    return 1;
}

void sd_handle_dep_put(struct sd_handle *h)
{
    atomic_fetch_sub_explicit(&h->deps, 1, memory_order_acq_rel);
}

int sd_handle_try_retire(struct sd_handle *h)
{
    unsigned expect = 0;
    return atomic_compare_exchange_strong_explicit(&h->deps, &expect, SD_DEPS_DYING, memory_order_acq_rel,
                                                   memory_order_relaxed);
}

void sd_handle_unretire(struct sd_handle *h)
{
    atomic_fetch_and_explicit(&h->deps, ~SD_DEPS_DYING, memory_order_acq_rel);
}

/* ------------------------------------------------------------ consumer IA handles */

DAT_IA_HANDLE sd_ia_consumer_handle(struct sd_ia *ia)
{
    DAT_IA_HANDLE out = NULL;
    if (ia == NULL)
        return NULL;
    if (dats_get_ia_handle && dats_get_ia_handle((DAT_IA_HANDLE)ia, &out) == DAT_SUCCESS && out != NULL)
        return out;
    return (DAT_IA_HANDLE)ia;
}

/* ------------------------------------------------------------ generic entry points */

static DAT_RETURN sd_set_consumer_context(DAT_HANDLE handle, DAT_CONTEXT context)
{
    struct sd_handle *h;
    DAT_RETURN rc = sd_handle_get(handle, SD_HTYPE_ANY, DAT_INVALID_HANDLE1, &h);
    if (rc != DAT_SUCCESS)
        return rc;
    /* Unsynchronised by the spec (L2578); relaxed atomics keep concurrent
     * set/get well defined without ordering anything else. */
    __atomic_store_n(&h->context.as_64, context.as_64, __ATOMIC_RELAXED);
    sd_handle_put(h);
    return DAT_SUCCESS;
}

static DAT_RETURN sd_get_consumer_context(DAT_HANDLE handle, DAT_CONTEXT *context)
{
    struct sd_handle *h;
    DAT_RETURN rc = sd_handle_get(handle, SD_HTYPE_ANY, DAT_INVALID_HANDLE1, &h);
    if (rc != DAT_SUCCESS)
        return rc;
    if (context == NULL)
        rc = SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    else
        context->as_64 = __atomic_load_n(&h->context.as_64, __ATOMIC_RELAXED);
    sd_handle_put(h);
    return rc;
}

static DAT_RETURN sd_get_handle_type(DAT_HANDLE handle, DAT_HANDLE_TYPE *type)
{
    struct sd_handle *h;
    DAT_RETURN rc = sd_handle_get(handle, SD_HTYPE_ANY, DAT_INVALID_HANDLE1, &h);
    if (rc != DAT_SUCCESS)
        return rc;
    if (type == NULL)
        rc = SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    else if (h->type == SD_HTYPE_SSP)
        *type = (DAT_HANDLE_TYPE)DAT_HANDLE_TYPE_EXTENSION_BASE; /* DAT_IW_HANDLE_TYPE_SSP */
    else if (h->type == SD_HTYPE_IA_QUERY)
        *type = DAT_HANDLE_TYPE_IA; /* dat_ib_open_query returns it as an IA handle */
    else
        *type = (DAT_HANDLE_TYPE)h->type;
    sd_handle_put(h);
    return rc;
}

void sd_handle_fill_table(DAT_PROVIDER *p)
{
    p->set_consumer_context_func = sd_set_consumer_context;
    p->get_consumer_context_func = sd_get_consumer_context;
    p->get_handle_type_func = sd_get_handle_type;
}
