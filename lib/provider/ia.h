/* softdat IA object: root of every other handle. */
#ifndef SOFTDAT_PROVIDER_IA_H
#define SOFTDAT_PROVIDER_IA_H

#include <net/if.h>
#include <pthread.h>
#include <stdbool.h>
#include <sys/socket.h>

#include "lib/provider/counters.h"
#include "lib/provider/handle.h"
#include "lib/provider/ia_semantics.h"

struct sd_evd;
struct emu_engine;
struct emu_mem_table;

#define SD_NTYPES 12 /* DAT_HANDLE_TYPE_CR .. DAT_HANDLE_TYPE_CSP */

struct sd_ia {
    struct sd_handle h;
    struct sd_provider_rec *rec;
    pthread_mutex_t lock; /* children, nchildren, per_type, closing */
    struct sd_link children;
    unsigned nchildren;
    unsigned per_type[SD_NTYPES];
    bool closing;

    struct sockaddr_storage addr; /* what dat_ia_query reports */
    socklen_t addr_len;
    char ifname[IF_NAMESIZE]; /* interface the address was found on, if any */
    struct sd_semantics sem;  /* InfiniBand or iWARP behaviour (ia_semantics.c) */

    /* Async EVD: created by open (owned) or passed in by the consumer; we
     * hold a reference either way. NULL with async_exists when the consumer
     * passed DAT_EVD_ASYNC_EXISTS. */
    struct sd_evd *async_evd;
    bool async_evd_owned;
    bool async_exists;

    /* Soft RNIC runtime, one of each per open IA. Both are created by
     * dat_ia_open before the IA is published and are valid while the caller
     * holds an IA reference. `engine` (one thread) is destroyed by IA
     * teardown after every child object has been torn down (child teardown
     * may still use it); after that it is NULL, so code that starts engine
     * work must publish its object first (publish fails once the IA is
     * closing). `mem` (PZs, LMRs, RMRs) is destroyed when the last IA
     * reference is dropped. */
    struct emu_engine *engine;
    struct emu_mem_table *mem;

    struct sd_cnt_ia cnt; /* dat_ib_query_counters (counters.h) */
    uint64_t t0_ns;       /* CLOCK_MONOTONIC at open: the trace's t_ns origin */
};

/* Limit of live children of one type per IA (0 = unlimited) and the
 * DAT_INSUFFICIENT_RESOURCES subtype reported beyond it. */
unsigned sd_ia_type_limit(uint32_t type, uint32_t *resource_subtype);

/* Resolve ia_params ("lo", "eth0", "127.0.0.1", "::1", "host") to an
 * address. 0 on success; -2 when out of descriptors or memory (the lookup
 * could not be made); -1, with a logged reason, when it names nothing
 * usable. */
int sd_ia_resolve_address(const char *ia_params, struct sockaddr_storage *out, socklen_t *len,
                          char ifname[IF_NAMESIZE]);

/* Validate an IA handle (pointer or registry small integer); +1 ref. */
static inline DAT_RETURN sd_ia_get(DAT_IA_HANDLE raw, struct sd_ia **out)
{
    struct sd_handle *h;
    DAT_RETURN rc = sd_handle_get(raw, DAT_HANDLE_TYPE_IA, DAT_INVALID_HANDLE_IA, &h);
    *out = rc == DAT_SUCCESS ? (struct sd_ia *)h : NULL;
    return rc;
}

/* a and b are open instances of the same IA (ia_ha.c): objects that hold
 * no memory-table state (EVDs) may be shared between them. */
bool sd_ia_same_device(const struct sd_ia *a, const struct sd_ia *b);

/* Query implementation (ia_attr.c). */
DAT_RETURN sd_ia_query(DAT_IA_HANDLE ia_handle, DAT_EVD_HANDLE *async_evd_handle, DAT_IA_ATTR_MASK ia_mask,
                       DAT_IA_ATTR *ia_attr, DAT_PROVIDER_ATTR_MASK pr_mask, DAT_PROVIDER_ATTR *pr_attr);
DAT_RETURN sd_ia_close(DAT_IA_HANDLE ia_handle, DAT_CLOSE_FLAGS flags);
/* The attributes dat_ia_query reports for ia (either pointer may be NULL);
 * ia needs only rec and addr (open query, ia_query.c). */
void sd_ia_fill_attrs(struct sd_ia *ia, DAT_IA_ATTR *ia_attr, DAT_PROVIDER_ATTR *pr_attr);

#endif
