/* softdat handle framework: the contract every DAT object follows.
 *
 * Layout: every object embeds `struct sd_handle` as its FIRST member, and the
 * handle's first word is the DAT_PROVIDER * the registry dispatches through.
 *
 * Validation: a process-wide set of live handle addresses (sharded open
 * addressing hash, one rwlock per shard). sd_handle_get() looks the raw
 * value up BEFORE touching it, so NULL, garbage, small integers and stale
 * pointers are all answered with DAT_INVALID_HANDLE|<subtype> and never
 * dereferenced. Small integers (consumer IA handles of the OFA registry) are
 * mapped with dats_get_ia_handle() when the expected type allows an IA.
 *
 * Lifetime:
 *   h = sd_handle_alloc(&ops, ia)        refs = 1 (the "creation" reference)
 *   ... fill the object ...
 *   sd_handle_publish(h)                 visible to lookups, on ia's child list
 *   sd_handle_get(raw, type, sub, &h)    +1 ref, for the duration of a call
 *   sd_handle_put(h)                     -1 ref
 *   sd_handle_destroy(h)                 unpublish (lookups now fail), mark
 *                                        dead, ops->teardown, drop creation ref
 *   last put                             ops->release, poison, quarantine
 * So an object destroyed by one thread while another thread is inside a call
 * on it stays valid memory until that call puts its reference.
 *
 * Freed memory is poisoned (magic/type = dead, body filled) but keeps its
 * DAT_PROVIDER * and sits in a FIFO quarantine before free(): a stale handle
 * that the registry dereferences still dispatches into us, and we answer
 * DAT_INVALID_HANDLE. The spec asks that freed handle values not be reused
 * soon; the quarantine delays that.
 *
 * Dependencies ("PZ in use by an LMR"): sd_handle_dep_get/put count users;
 * sd_handle_try_retire() atomically turns a zero count into "dying", after
 * which dep_get fails — free with users returns DAT_INVALID_STATE, and a
 * create racing with the free cannot attach to a dying object.
 *
 * Children: every object except the IA is on its IA's child list. Abrupt IA
 * close destroys them phase by phase (ops->phase, lower first).
 */
#ifndef SOFTDAT_PROVIDER_HANDLE_H
#define SOFTDAT_PROVIDER_HANDLE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/provider/provider.h"

struct sd_ia;
struct sd_handle;

#define SD_HANDLE_MAGIC_LIVE 0x5D0B1EC7u
#define SD_HANDLE_MAGIC_DEAD 0xDEADD47Au
/* Type tags are DAT_HANDLE_TYPE values; these two are ours. */
#define SD_HTYPE_ANY 0xFFFFFFFEu  /* sd_handle_get: accept any live type */
#define SD_HTYPE_DEAD 0xFFFFFFFFu /* stored in poisoned memory */
/* Private handle types of extension objects, outside every DAT value so
 * that two extensions sharing DAT_HANDLE_TYPE_EXTENSION_BASE never accept
 * each other's handles; dat_get_handle_type reports the extension's type. */
#define SD_HTYPE_IA_QUERY 0x7D000001u /* dat_ib_open_query object (ia_query.c) */
#define SD_HTYPE_SSP 0x7D000002u      /* DAT_IW_HANDLE_TYPE_SSP (ssp.c) */

/* Teardown phases of abrupt IA close (architecture: SPs → CRs → EPs → SRQs →
 * RMRs → LMRs → PZs → EVDs → CNOs). */
enum sd_phase {
    SD_PHASE_SP = 0,
    SD_PHASE_CR,
    SD_PHASE_EP,
    SD_PHASE_SRQ,
    SD_PHASE_RMR,
    SD_PHASE_LMR,
    SD_PHASE_PZ,
    SD_PHASE_EVD,
    SD_PHASE_CNO,
    SD_PHASE_COUNT
};

struct sd_handle_ops {
    uint32_t type;    /* DAT_HANDLE_TYPE_* */
    const char *name; /* for diagnostics: "pz", "evd", ... */
    size_t size;      /* size of the whole object (sd_handle_alloc) */
    enum sd_phase phase;
    /* Once, right after the object became unreachable (free or IA close):
     * stop activity, drop dependencies on other objects. May be NULL. */
    void (*teardown)(struct sd_handle *h);
    /* Once, when the last reference is gone: free what the object owns.
     * Must not touch other handles. May be NULL. */
    void (*release)(struct sd_handle *h);
};

struct sd_link {
    struct sd_link *prev, *next;
};

#define SD_DEPS_DYING 0x80000000u

struct sd_handle {
    DAT_PROVIDER *provider; /* must stay the first word */
    _Atomic uint32_t magic; /* LIVE until unpublished, then DEAD */
    uint32_t type;
    struct sd_ia *ia; /* owning IA; the IA itself points to itself */
    DAT_CONTEXT context;
    const struct sd_handle_ops *ops;
    atomic_uint refs;
    atomic_uint deps;
    struct sd_link ia_link; /* on ia->children, under ia->lock */
    /* Stable per-type number, 1, 2, ... in creation order within the
     * process (the trace and log call this EP "ep3"); never reused. */
    uint32_t id;
};

/* The trace/log name prefix of a handle type ("ep", "evd", ...). */
const char *sd_handle_type_prefix(uint32_t type);

/* What the trace needs to name an object, read without taking a
 * reference (so it may run anywhere, even with a queue lock held, and
 * never ends up dropping an object's last reference): the raw value is
 * looked up like sd_handle_get and the fields copied under the lookup's
 * lock. false when raw is not a live handle. */
struct sd_handle_peek {
    uint32_t type, id;
    uint32_t ia_id;     /* the owning IA's id, and its open time */
    uint64_t ia_t0_ns;
};
bool sd_handle_peek(DAT_HANDLE raw, struct sd_handle_peek *out);

/* ---- creation */
/* calloc(ops->size) with the header initialised (refs = 1, owner ia, the
 * provider of ia). For the IA itself pass ia = NULL and set ->provider and
 * ->ia afterwards. NULL on allocation failure. */
struct sd_handle *sd_handle_alloc(const struct sd_handle_ops *ops, struct sd_ia *ia);
/* Make h visible. Fails (DAT_INSUFFICIENT_RESOURCES) beyond the per-IA limit
 * for its type or on allocation failure, and with DAT_INVALID_HANDLE|IA if
 * the IA is closing. On failure the caller still owns h: sd_handle_discard. */
DAT_RETURN sd_handle_publish(struct sd_handle *h);
/* Free an object that was never published (ops->release runs). */
void sd_handle_discard(struct sd_handle *h);

/* ---- use */
/* Validate `raw` as a live handle of `type` (or SD_HTYPE_ANY) and take a
 * reference. Returns 0 or DAT_INVALID_HANDLE|bad_subtype. */
DAT_RETURN sd_handle_get(DAT_HANDLE raw, uint32_t type, uint32_t bad_subtype, struct sd_handle **out);
void sd_handle_ref(struct sd_handle *h); /* caller already holds a reference */
void sd_handle_put(struct sd_handle *h);
/* Liveness test on an object we hold a reference to. */
static inline int sd_handle_alive(const struct sd_handle *h)
{
    return h->magic == SD_HANDLE_MAGIC_LIVE;
}

/* ---- destruction */
/* Unpublish + teardown + drop the creation reference. The caller must hold
 * its own reference (from sd_handle_get) and put it afterwards. Returns
 * DAT_INVALID_HANDLE|bad_subtype if someone else destroyed it first. */
DAT_RETURN sd_handle_destroy(struct sd_handle *h, uint32_t bad_subtype);

/* ---- dependencies */
int sd_handle_dep_get(struct sd_handle *h); /* 1 ok, 0 if h is dying */
void sd_handle_dep_put(struct sd_handle *h);
int sd_handle_try_retire(struct sd_handle *h); /* 1 if no users: now dying */
void sd_handle_unretire(struct sd_handle *h);

/* ---- IA children (used by ia.c) */
/* Unpublish the first child of `phase` on ia's list and return it with a
 * reference (teardown not yet run), or NULL when there is none. */
struct sd_handle *sd_handle_take_child(struct sd_ia *ia, enum sd_phase phase);
/* Finish what take_child started: teardown, drop creation + our reference. */
void sd_handle_finish_child(struct sd_handle *h);

/* ---- library lifetime */
/* Drain the quarantine and free empty tables (last dat_provider_fini). */
void sd_handle_registry_shutdown(void);
size_t sd_handle_live_count(void);

/* ---- consumer IA handles */
/* The value to show the consumer for an IA (the registry's small integer
 * when the OFA registry maps IA handles; else the pointer). */
DAT_IA_HANDLE sd_ia_consumer_handle(struct sd_ia *ia);

#endif
