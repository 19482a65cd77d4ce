/* softdat LMR object: a region registered in the IA's memory table
 * (emu/mem.h, docs/memory.md), plus the local-iovec check every DTO post
 * runs (sd_lmr_check_iov). */
#ifndef SOFTDAT_PROVIDER_LMR_H
#define SOFTDAT_PROVIDER_LMR_H

#include <pthread.h>
#include <stdint.h>

#include "emu/qp.h"
#include "lib/provider/handle.h"

struct sd_ia;
struct sd_pz;

struct sd_lmr {
    struct sd_handle h;
    /* The region. Guarded by mu: NULL once dat_lmr_free has freed it.
     * Users of the emu_mr pointer (dat_rmr_bind) hold mu around the emu
     * call so the region cannot be freed underneath them. */
    pthread_mutex_t mu;
    struct emu_mr *mr;
    struct sd_pz *pz;              /* dependency + reference held */
    /* Everything below is constant after create. */
    DAT_MEM_TYPE mem_type;
    DAT_REGION_DESCRIPTION region_desc; /* as given (cookie → our copy) */
    DAT_VLEN length;               /* as given (DAT_MEM_TYPE_LMR: the source's) */
    DAT_MEM_PRIV_FLAGS priv;
    DAT_VA_TYPE va_type;
    DAT_VADDR addr;                /* registered_address: start, consumer VA */
    DAT_VLEN len;                  /* registered_size */
    DAT_LMR_CONTEXT lmr_context;   /* = the region's STag */
    DAT_RMR_CONTEXT rmr_context;   /* same STag with remote rights, else 0 */
    char cookie[DAT_LMR_COOKIE_SIZE]; /* DAT_MEM_TYPE_SHARED_VIRTUAL id */
};

static inline DAT_RETURN sd_lmr_get(DAT_LMR_HANDLE raw, struct sd_lmr **out)
{
    struct sd_handle *h;
    DAT_RETURN rc = sd_handle_get(raw, DAT_HANDLE_TYPE_LMR, DAT_INVALID_HANDLE_LMR, &h);
    *out = rc == DAT_SUCCESS ? (struct sd_lmr *)h : NULL;
    return rc;
}

/* DAT_MEM_PRIV_FLAGS → EMU_ACC_* bits (bit by bit: DAT's are not
 * contiguous). DAT_IB_MEM_PRIV_REMOTE_ATOMIC (0x40) → EMU_ACC_REMOTE_ATOMIC.
 * Unknown bits are ignored (callers validate first). Adds no MW_BIND. */
uint32_t sd_mem_priv_to_emu(DAT_MEM_PRIV_FLAGS priv);
/* The inverse, for queries. */
DAT_MEM_PRIV_FLAGS sd_mem_priv_from_emu(uint32_t acc);

/* Validate a DTO's local iovec against the memory table and translate it.
 *   ia, pz     the posting EP's (or SRQ's) IA and PZ
 *   iov, n     the consumer's triplets (n >= 0; iov may be NULL if n == 0)
 *   need       EMU_ACC_LOCAL_READ (sources: Send, Write) or
 *              EMU_ACC_LOCAL_WRITE (sinks: Recv, Read)
 *   out        n entries; out[i] is segment i's bytes, {NULL, 0} for a
 *              zero-length segment (skipped without validation: its other
 *              fields may be garbage, dat.h triplet rules)
 *   total      sum of the lengths (may be NULL)
 * The region reference a check takes is dropped at once (emu_mem_put):
 * the pointers stay usable because dat_lmr_free must not be called while
 * a DTO using the LMR is outstanding (L7935: a free under way makes it
 * complete with DAT_DTO_ERR_LOCAL_PROTECTION at the latest).
 * Returns DAT_SUCCESS, or the first failing segment's code:
 *   DAT_INVALID_PARAMETER|DAT_INVALID_ARG3   segment outside its LMR, or
 *                                            address + length wraps; also
 *                                            iov NULL with n > 0
 *   DAT_INVALID_PARAMETER|DAT_INVALID_ARG2   n < 0
 *   DAT_PROTECTION_VIOLATION                 LMR's PZ != pz (L7149)
 *   DAT_PRIVILEGES_VIOLATION                 unknown / freed lmr_context or
 *                                            the right `need` missing (every
 *                                            LMR is locally readable, verbs
 *                                            style: only LOCAL_WRITE can be
 *                                            missing)
 * (ARG3 because local_iov is the third argument of every post call:
 * post_send/recv/rdma_read/rdma_write and srq_post_recv.) */
DAT_RETURN sd_lmr_check_iov(struct sd_ia *ia, struct sd_pz *pz, const DAT_LMR_TRIPLET *iov, DAT_COUNT n,
                            uint32_t need, struct emu_sge *out, uint64_t *total);

void sd_lmr_fill_table(DAT_PROVIDER *p);

#endif
