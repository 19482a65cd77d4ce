/* softdat LMR: dat_lmr_create/query/free, dat_lmr_sync_rdma_read/write and
 * the local-iovec check of the data path. Regions live in the IA's memory
 * table (emu/mem.h); spec digest: shared/research/spec-part2.md §5;
 * Lnnnn = DAT 2.0 spec text lines. */
#include "emu/fault.h"
#include "lib/provider/lmr.h"

#include <errno.h>
#include <stdatomic.h>
#include <string.h>

#include "emu/log.h"
#include "emu/mem.h"
#include "lib/provider/ia.h"
#include "lib/provider/pz.h"

/* Local and remote read/write plus the IB extension's remote atomic. */
#define SD_LMR_VALID_PRIV ((DAT_MEM_PRIV_FLAGS)(DAT_MEM_PRIV_ALL_FLAG | DAT_MEM_PRIV_EXTENSION_BASE))
#define SD_PRIV_REMOTE_ATOMIC ((DAT_MEM_PRIV_FLAGS)DAT_MEM_PRIV_EXTENSION_BASE)

/* How long one emu_mem_mr_free waits for in-flight accesses, and how many
 * times we retry after E_INFLIGHT before giving the slot up. */
#define SD_MR_FREE_WAIT_MS 2000u
#define SD_MR_FREE_TRIES 5

uint32_t sd_mem_priv_to_emu(DAT_MEM_PRIV_FLAGS priv)
{
    uint32_t a = 0;
    if (priv & DAT_MEM_PRIV_LOCAL_READ_FLAG)
        a |= EMU_ACC_LOCAL_READ;
    if (priv & DAT_MEM_PRIV_LOCAL_WRITE_FLAG)
        a |= EMU_ACC_LOCAL_WRITE;
    if (priv & DAT_MEM_PRIV_REMOTE_READ_FLAG)
        a |= EMU_ACC_REMOTE_READ;
    if (priv & DAT_MEM_PRIV_REMOTE_WRITE_FLAG)
        a |= EMU_ACC_REMOTE_WRITE;
    if (priv & SD_PRIV_REMOTE_ATOMIC)
        a |= EMU_ACC_REMOTE_ATOMIC;
    return a;
}

DAT_MEM_PRIV_FLAGS sd_mem_priv_from_emu(uint32_t acc)
{
    unsigned p = 0;
    if (acc & EMU_ACC_LOCAL_READ)
        p |= DAT_MEM_PRIV_LOCAL_READ_FLAG;
    if (acc & EMU_ACC_LOCAL_WRITE)
        p |= DAT_MEM_PRIV_LOCAL_WRITE_FLAG;
    if (acc & EMU_ACC_REMOTE_READ)
        p |= DAT_MEM_PRIV_REMOTE_READ_FLAG;
    if (acc & EMU_ACC_REMOTE_WRITE)
        p |= DAT_MEM_PRIV_REMOTE_WRITE_FLAG;
    if (acc & EMU_ACC_REMOTE_ATOMIC)
        p |= SD_PRIV_REMOTE_ATOMIC;
    return (DAT_MEM_PRIV_FLAGS)p;
}

/* ------------------------------------------------------------ local iovecs */

static DAT_RETURN local_status_to_dat(enum emu_mem_status st)
{
    switch (st) {
    case EMU_MEM_E_PZ: return SD_RET(DAT_PROTECTION_VIOLATION, 0);
    case EMU_MEM_E_BOUNDS:
    case EMU_MEM_E_TO_WRAP: return SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    case EMU_MEM_E_INVAL: return SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    default: return SD_RET(DAT_PRIVILEGES_VIOLATION, 0); /* E_STAG, E_ACCESS */
    }
}

DAT_RETURN sd_lmr_check_iov(struct sd_ia *ia, struct sd_pz *pz, const DAT_LMR_TRIPLET *iov, DAT_COUNT n,
                            uint32_t need, struct emu_sge *out, uint64_t *total)
{
    uint64_t sum = 0;
    if (n < 0)
        return SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    if (n > 0 && iov == NULL)
        return SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    /* Segments of one registration (a header and a payload in one
     * buffer) are checked under one reference to it. */
    struct emu_mem_ref held = {0};
    uint32_t held_ctx = 0;
    enum emu_mem_status st = EMU_MEM_OK;
    DAT_COUNT i;
    for (i = 0; i < n; i++) {
        const DAT_LMR_TRIPLET *t = &iov[i];
        if (t->segment_length == 0) {
            out[i].addr = NULL;
            out[i].len = 0;
            continue;
        }
        void *ptr;
        if (held.hold != NULL && (uint32_t)t->lmr_context == held_ctx) {
            st = emu_mem_check_local_more(&held, t->virtual_address, t->segment_length, need, pz->epz, &ptr);
        } else {
            emu_mem_put(&held); /* see lmr.h: the LMR outlives the DTO */
            held_ctx = (uint32_t)t->lmr_context;
            st = emu_mem_check_local(ia->mem, held_ctx, t->virtual_address, t->segment_length, need, pz->epz,
                                     &held);
            ptr = held.ptr;
        }
        if (st != EMU_MEM_OK)
            break;
        out[i].addr = ptr;
        out[i].len = (uint32_t)t->segment_length;
        sum += t->segment_length;
    }
    emu_mem_put(&held);
    if (st != EMU_MEM_OK) {
        const DAT_LMR_TRIPLET *t = &iov[i];
        SD_DBG("lmr", "iov[%d] {ctx 0x%x va 0x%llx len %u} need 0x%x: %s", (int)i, (unsigned)t->lmr_context,
               (unsigned long long)t->virtual_address, (unsigned)t->segment_length, need, emu_mem_status_str(st));
        return local_status_to_dat(st);
    }
    if (total != NULL)
        *total = sum;
    return DAT_SUCCESS;
}

/* ------------------------------------------------------------ object */

/* Free the region, waiting (bounded) for accesses in flight. E_BUSY is
 * passed back (windows bound: nothing changed). */
static enum emu_mem_status region_free(struct emu_mr *mr)
{
    enum emu_mem_status st = EMU_MEM_E_INFLIGHT;
    for (int i = 0; i < SD_MR_FREE_TRIES && st == EMU_MEM_E_INFLIGHT; i++)
        st = emu_mem_mr_free(mr, SD_MR_FREE_WAIT_MS);
    if (st == EMU_MEM_E_INFLIGHT)
        SD_ERR("lmr", "region still accessed after %u ms; slot leaked until IA close",
               SD_MR_FREE_WAIT_MS * SD_MR_FREE_TRIES);
    return st;
}

static void lmr_teardown(struct sd_handle *h)
{
    struct sd_lmr *lmr = (struct sd_lmr *)h;
    pthread_mutex_lock(&lmr->mu);
    struct emu_mr *mr = lmr->mr;
    lmr->mr = NULL;
    if (mr != NULL) {
        /* IA close: RMRs went first, so no window is bound any more. */
        enum emu_mem_status st = region_free(mr);
        if (st != EMU_MEM_OK && st != EMU_MEM_E_INFLIGHT)
            SD_WARN("lmr", "region free: %s", emu_mem_status_str(st));
    }
    pthread_mutex_unlock(&lmr->mu);
    if (lmr->pz != NULL) {
        sd_handle_dep_put(&lmr->pz->h);
        sd_handle_put(&lmr->pz->h);
        lmr->pz = NULL;
    }
}

static void lmr_release(struct sd_handle *h)
{
    pthread_mutex_destroy(&((struct sd_lmr *)h)->mu);
}

static const struct sd_handle_ops lmr_ops = {
    .type = DAT_HANDLE_TYPE_LMR,
    .name = "lmr",
    .size = sizeof(struct sd_lmr),
    .phase = SD_PHASE_LMR,
    .teardown = lmr_teardown,
    .release = lmr_release,
};

/* dat_lmr_create's arguments once checked: the PZ and (DAT_MEM_TYPE_LMR)
 * the source LMR, referenced, and the memory range. */
struct lmr_args {
    struct sd_pz *pz;
    struct sd_lmr *src;
    void *ptr;
    DAT_VLEN len;
};

/* dat_lmr_create, step 1: check every argument, nothing created. */
static DAT_RETURN lmr_validate(struct sd_ia *ia, DAT_MEM_TYPE mem_type, DAT_REGION_DESCRIPTION region,
                               DAT_PZ_HANDLE pz_handle, DAT_MEM_PRIV_FLAGS priv, DAT_VA_TYPE va_type,
                               const DAT_LMR_HANDLE *lmr_handle, struct lmr_args *v)
{
    DAT_RETURN rc;
    if (lmr_handle == NULL)
        return SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG8);
    rc = sd_pz_get(pz_handle, &v->pz);
    if (rc != DAT_SUCCESS)
        return rc;
    if (v->pz->h.ia != ia)
        return SD_RET(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_PZ);
    if ((priv & ~SD_LMR_VALID_PRIV) != 0)
        return SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG6);
    if (va_type != DAT_VA_TYPE_VA && va_type != DAT_VA_TYPE_ZB)
        return SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG7);
    switch (mem_type) {
    case DAT_MEM_TYPE_VIRTUAL:
        v->ptr = region.for_va;
        break;
    case DAT_MEM_TYPE_SHARED_VIRTUAL:
        /* Same process, same mapping: registered like virtual memory; the
         * 40-byte cookie is kept for query (L7849). */
        v->ptr = region.for_shared_memory.virtual_address;
        if (region.for_shared_memory.shared_memory_id == NULL) 
            return SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
        break;
    case DAT_MEM_TYPE_LMR:
        /* The same memory again, with this call's PZ/privileges/VA type;
         * length is ignored (Table 13, L7870). */
        rc = sd_lmr_get(region.for_lmr_handle, &v->src);
        if (rc != DAT_SUCCESS)
            return rc;
        if (v->src->h.ia != ia) 
            return SD_RET(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_LMR);
        v->ptr = (void *)(uintptr_t)v->src->addr;
        v->len = v->src->len;
        break;
    default:
        return SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    }
    if (v->len > SD_MAX_LMR_BLOCK_SIZE) /* max_lmr_block_size */
        return SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG4);
    if (v->ptr == NULL && v->len > 0)
        return SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    if ((uint64_t)(uintptr_t)v->ptr + v->len < (uint64_t)(uintptr_t)v->ptr) /* range wraps */
        return SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG4);
    /* Refuse what an HCA's pinning refuses (L7841: "previously allocated
     * by the Consumer"): memory that is not mapped, or a write right the
     * mapping cannot grant (any write right: local, remote, atomic). */
    switch (emu_mem_probe(v->ptr, v->len, (priv & ~(DAT_MEM_PRIV_LOCAL_READ_FLAG | DAT_MEM_PRIV_REMOTE_READ_FLAG)) != 0)) {
    case 0: break;
    case -EACCES: return SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG6);
    default: return SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    }
    return DAT_SUCCESS;
}

/* Step 2: create the LMR, register its region, publish its handle. */
static DAT_RETURN lmr_apply(struct sd_ia *ia, DAT_MEM_TYPE mem_type, DAT_REGION_DESCRIPTION region,
                            DAT_MEM_PRIV_FLAGS priv, DAT_VA_TYPE va_type, const struct lmr_args *v,
                            struct sd_lmr **out)
{
    if (emu_fault_hit(EMU_FAULT_REGISTER)) /* SOFTDAT_FAULT register= */
        return SD_RET(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
    struct sd_lmr *lmr = (struct sd_lmr *)sd_handle_alloc(&lmr_ops, ia);
    if (lmr == NULL)
        return SD_RET(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
    pthread_mutex_init(&lmr->mu, NULL);
    if (!sd_handle_dep_get(&v->pz->h)) { /* PZ being freed right now */
        sd_handle_discard(&lmr->h);
        return SD_RET(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_PZ);
    }
    sd_handle_ref(&v->pz->h);
    lmr->pz = v->pz;
    lmr->mem_type = mem_type;
    lmr->region_desc = region;
    if (mem_type == DAT_MEM_TYPE_SHARED_VIRTUAL) {
        memcpy(lmr->cookie, *region.for_shared_memory.shared_memory_id, sizeof lmr->cookie);
        lmr->region_desc.for_shared_memory.shared_memory_id = &lmr->cookie;
    }
    lmr->length = v->len;
    lmr->priv = priv;
    lmr->va_type = va_type;
    lmr->addr = (DAT_VADDR)(uintptr_t)v->ptr;
    lmr->len = v->len;

    struct emu_mr_attr a = {
        .addr = v->ptr,
        .length = v->len,
        .pz = v->pz->epz,
        /* Every LMR can have RMRs bound into it (DAT has no bind right).
         * Local read is always granted, as verbs RNICs do (an MR is always
         * locally readable; OFA DAPL never asks for it): consumers rely on
         * it — Debian's dtest sends from an LMR registered LOCAL_WRITE
         * only. So DAT_PRIVILEGES_VIOLATION at post time means a bad
         * lmr_context or a missing LOCAL_WRITE on a sink. Query reports the
         * privileges as requested. A peer's Send with Invalidate may
         * invalidate the rmr_context of an LMR as well as of an RMR
         * (L7219, L7359), so a region with remote rights (the only ones
         * that have an rmr_context) accepts it. */
        .access = sd_mem_priv_to_emu(priv) | EMU_ACC_LOCAL_READ | EMU_ACC_MW_BIND |
                  ((priv & (DAT_MEM_PRIV_REMOTE_READ_FLAG | DAT_MEM_PRIV_REMOTE_WRITE_FLAG | SD_PRIV_REMOTE_ATOMIC))
                       ? EMU_ACC_REMOTE_INVALIDATE
                       : 0u),
        .va_type = va_type == DAT_VA_TYPE_ZB ? EMU_VA_ZB : EMU_VA_ABS,
    };
    uint32_t stag = 0;
    enum emu_mem_status st = emu_mem_mr_register(ia->mem, &a, &lmr->mr, &stag);
    if (st != EMU_MEM_OK) {
        lmr_teardown(&lmr->h);
        sd_handle_discard(&lmr->h);
        DAT_RETURN rc;
        switch (st) {
        case EMU_MEM_E_LIMIT: rc = SD_RET(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY_REGION); break;
        case EMU_MEM_E_NOMEM: rc = SD_RET(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY); break;
        case EMU_MEM_E_HANDLE: rc = SD_RET(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_PZ); break;
        default: rc = SD_RET(DAT_INVALID_PARAMETER, 0); break;
        }
        return rc;
    }
    lmr->lmr_context = (DAT_LMR_CONTEXT)stag;
    /* L7853: no rmr_context unless remote access was asked for. */
    lmr->rmr_context = (priv & (DAT_MEM_PRIV_REMOTE_READ_FLAG | DAT_MEM_PRIV_REMOTE_WRITE_FLAG |
                                SD_PRIV_REMOTE_ATOMIC))
                           ? (DAT_RMR_CONTEXT)stag
                           : 0;
    DAT_RETURN rc = sd_handle_publish(&lmr->h);
    if (rc != DAT_SUCCESS) {
        lmr_teardown(&lmr->h);
        sd_handle_discard(&lmr->h);
        return rc;
    }
    *out = lmr;
    return DAT_SUCCESS;
}

static DAT_RETURN sd_lmr_create(DAT_IA_HANDLE ia_handle, DAT_MEM_TYPE mem_type, DAT_REGION_DESCRIPTION region,
                                DAT_VLEN length, DAT_PZ_HANDLE pz_handle, DAT_MEM_PRIV_FLAGS priv,
                                DAT_VA_TYPE va_type, DAT_LMR_HANDLE *lmr_handle, DAT_LMR_CONTEXT *lmr_context,
                                DAT_RMR_CONTEXT *rmr_context, DAT_VLEN *registered_size,
                                DAT_VADDR *registered_address)
{
    struct sd_ia *ia;
    DAT_RETURN rc = sd_ia_get(ia_handle, &ia);
    if (rc != DAT_SUCCESS)
        return rc;
    struct lmr_args v = {.len = length};
    struct sd_lmr *lmr = NULL;
    rc = lmr_validate(ia, mem_type, region, pz_handle, priv, va_type, lmr_handle, &v);
    if (rc == DAT_SUCCESS)
        rc = lmr_apply(ia, mem_type, region, priv, va_type, &v, &lmr);
    if (rc != DAT_SUCCESS)
        goto out;
    SD_DBG("lmr", "create type %d va %p len %llu priv 0x%x %s: ctx 0x%x", (int)mem_type, v.ptr,
           (unsigned long long)v.len, (unsigned)priv, va_type == DAT_VA_TYPE_ZB ? "zb" : "va",
           (unsigned)lmr->lmr_context);
    *lmr_handle = (DAT_LMR_HANDLE)lmr;
    if (lmr_context != NULL)
        *lmr_context = lmr->lmr_context;
    if (rmr_context != NULL)
        *rmr_context = lmr->rmr_context;
    if (registered_size != NULL)
        *registered_size = lmr->len;
    if (registered_address != NULL) /* consumer VA of the start (L7843) */
        *registered_address = lmr->addr;
out:
    if (v.src != NULL)
        sd_handle_put(&v.src->h);
    if (v.pz != NULL)
        sd_handle_put(&v.pz->h);
    sd_handle_put(&ia->h);
    return rc;
}

static DAT_RETURN sd_lmr_query(DAT_LMR_HANDLE lmr_handle, DAT_LMR_PARAM_MASK mask, DAT_LMR_PARAM *param)
{
    struct sd_lmr *lmr;
    DAT_RETURN rc = sd_lmr_get(lmr_handle, &lmr);
    if (rc != DAT_SUCCESS)
        return rc;
    if ((mask & ~(DAT_LMR_PARAM_MASK)DAT_LMR_FIELD_ALL) != 0)
        rc = SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    else if (param == NULL)
        rc = SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    else {
        param->ia_handle = sd_ia_consumer_handle(lmr->h.ia);
        param->mem_type = lmr->mem_type;
        param->region_desc = lmr->region_desc;
        param->length = lmr->length;
        param->pz_handle = (DAT_PZ_HANDLE)lmr->pz;
        param->mem_priv = lmr->priv;
        param->va_type = lmr->va_type;
        param->lmr_context = lmr->lmr_context;
        param->rmr_context = lmr->rmr_context;
        param->registered_size = lmr->len;
        param->registered_address = lmr->addr;
    }
    sd_handle_put(&lmr->h);
    return rc;
}

static DAT_RETURN sd_lmr_free(DAT_LMR_HANDLE lmr_handle)
{
    struct sd_lmr *lmr;
    DAT_RETURN rc = sd_lmr_get(lmr_handle, &lmr);
    if (rc != DAT_SUCCESS)
        return rc;
    if (!sd_handle_try_retire(&lmr->h)) {
        rc = SD_RET(DAT_INVALID_STATE, DAT_INVALID_STATE_LMR_IN_USE);
        goto out;
    }
    /* The table refuses (nothing changed) while RMRs are bound into the
     * region (L7933, L7945). */
    pthread_mutex_lock(&lmr->mu);
    enum emu_mem_status st = lmr->mr != NULL ? region_free(lmr->mr) : EMU_MEM_OK;
    if (st == EMU_MEM_E_BUSY) {
        pthread_mutex_unlock(&lmr->mu);
        sd_handle_unretire(&lmr->h);
        rc = SD_RET(DAT_INVALID_STATE, DAT_INVALID_STATE_LMR_IN_USE);
        goto out;
    }
    if (st != EMU_MEM_OK && st != EMU_MEM_E_INFLIGHT)
        SD_WARN("lmr", "region free: %s", emu_mem_status_str(st));
    lmr->mr = NULL;
    pthread_mutex_unlock(&lmr->mu);
    rc = sd_handle_destroy(&lmr->h, DAT_INVALID_HANDLE_LMR);
out:
    sd_handle_put(&lmr->h);
    return rc;
}

/* ------------------------------------------------------------ sync (6.7.4) */

/* The live LMR of ia whose lmr_context is ctx: its zone, for a check that
 * must accept any PZ (segments may span PZs, L8333). */
static struct emu_pz *zone_of_context(struct sd_ia *ia, DAT_LMR_CONTEXT ctx)
{
    struct emu_pz *epz = NULL;
    pthread_mutex_lock(&ia->lock);
    for (struct sd_link *l = ia->children.next; l != &ia->children; l = l->next) {
        struct sd_handle *h = (struct sd_handle *)((char *)l - offsetof(struct sd_handle, ia_link));
        if (h->type != DAT_HANDLE_TYPE_LMR)
            continue;
        struct sd_lmr *lmr = (struct sd_lmr *)h;
        if (lmr->lmr_context == ctx && lmr->pz != NULL) {
            epz = lmr->pz->epz;
            break;
        }
    }
    pthread_mutex_unlock(&ia->lock);
    return epz;
}

static DAT_RETURN lmr_sync(DAT_IA_HANDLE ia_handle, const DAT_LMR_TRIPLET *iov, DAT_VLEN n)
{
    struct sd_ia *ia;
    DAT_RETURN rc = sd_ia_get(ia_handle, &ia);
    if (rc != DAT_SUCCESS)
        return rc;
    if (n > 0 && iov == NULL)
        rc = SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    for (DAT_VLEN i = 0; rc == DAT_SUCCESS && i < n; i++) {
        if (iov[i].segment_length == 0)
            continue; /* zero-length: other fields may be garbage */
        struct emu_pz *epz = zone_of_context(ia, iov[i].lmr_context);
        struct emu_mem_ref ref;
        /* need = 0: no privilege is implied by a sync, only a valid
         * lmr_context and a range inside its LMR (L8343, L8429). */
        if (epz == NULL || emu_mem_check_local(ia->mem, (uint32_t)iov[i].lmr_context, iov[i].virtual_address,
                                               iov[i].segment_length, 0, epz, &ref) != EMU_MEM_OK)
            rc = SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
        else
            emu_mem_put(&ref);
    }
    /* The soft RNIC reads and writes through the CPU: memory is coherent,
     * a full fence orders the consumer's accesses against the engine's. */
    atomic_thread_fence(memory_order_seq_cst);
    sd_handle_put(&ia->h);
    return rc;
}

static DAT_RETURN sd_lmr_sync_rdma_read(DAT_IA_HANDLE ia_handle, const DAT_LMR_TRIPLET *iov, DAT_VLEN n)
{
    return lmr_sync(ia_handle, iov, n);
}

static DAT_RETURN sd_lmr_sync_rdma_write(DAT_IA_HANDLE ia_handle, const DAT_LMR_TRIPLET *iov, DAT_VLEN n)
{
    return lmr_sync(ia_handle, iov, n);
}

void sd_lmr_fill_table(DAT_PROVIDER *p)
{
    p->lmr_create_func = sd_lmr_create;
    p->lmr_query_func = sd_lmr_query;
    p->lmr_free_func = sd_lmr_free;
    p->lmr_sync_rdma_read_func = sd_lmr_sync_rdma_read;
    p->lmr_sync_rdma_write_func = sd_lmr_sync_rdma_write;
}
