/* softdat: dat_rmr_bind and dat_rmr_create_for_ep. A bind is a work
 * request on the EP's send queue (EMU_WR_BIND, done in queue order, so
 * later posts are fenced behind it, L8239); it completes on the request
 * EVD as DAT_RMR_BIND_COMPLETION_EVENT (completion side: ep_dto.c).
 * Spec digest: shared/research/spec-part2.md §5.6. */
#include <string.h>

#include "emu/log.h"
#include "emu/mem.h"
#include "lib/provider/ep.h"
#include "lib/provider/ep_dto.h"
#include "lib/provider/ia.h"
#include "lib/provider/lmr.h"
#include "lib/provider/pz.h"
#include "lib/provider/rmr.h"

DAT_RETURN sd_ep_dto_begin_request(DAT_EP_HANDLE h, struct sd_ep **out, DAT_EP_STATE *state,
                                   DAT_COMPLETION_FLAGS *req_flags);
DAT_RETURN sd_ep_dto_post_bind(struct sd_ep *ep, DAT_EP_STATE state, struct emu_wr *wr, DAT_COMPLETION_FLAGS flags,
                               DAT_RMR_COOKIE cookie, struct sd_rmr *rmr, uint32_t new_ctx);
void sd_ep_rmr_fill_table(DAT_PROVIDER *p);

#define RMR_PRIV_OK (DAT_MEM_PRIV_ALL_FLAG | DAT_MEM_PRIV_EXTENSION_BASE)

/* The rmr_context the next bind of mw publishes. The consumer gets it
 * synchronously (L8222) while the bind itself runs later in queue order;
 * the memory table advances a window's key by one per publish, so it is
 * the current STag with the next key. A window never bound has no STag
 * yet: an empty bind + unbind gives it one (invisible to the peer: an
 * empty range admits no access). The completion checks the prediction. */
static enum emu_mem_status next_context(struct emu_mw *mw, const struct emu_mw_bind_attr *ba, uint32_t *out)
{
    struct emu_mw_info info;
    enum emu_mem_status st = emu_mem_mw_query(mw, &info);
    if (st != EMU_MEM_OK)
        return st;
    if (info.stag == 0) {
        struct emu_mw_bind_attr empty = *ba;
        empty.length = 0;
        empty.access = 0;
        uint32_t s;
        if ((st = emu_mem_mw_bind(mw, &empty, &s)) != EMU_MEM_OK)
            return st;
        emu_mem_mw_unbind(mw);
        info.stag = s;
    }
    *out = (info.stag & ~0xFFu) | ((info.stag + 1) & 0xFFu);
    return EMU_MEM_OK;
}

static DAT_RETURN sd_rmr_bind(DAT_RMR_HANDLE rmr_handle, DAT_LMR_HANDLE lmr_handle, const DAT_LMR_TRIPLET *iov,
                              DAT_MEM_PRIV_FLAGS priv, DAT_VA_TYPE va_type, DAT_EP_HANDLE ep_handle,
                              DAT_RMR_COOKIE cookie, DAT_COMPLETION_FLAGS flags, DAT_RMR_CONTEXT *ctx_out)
{
    struct sd_rmr *rmr;
    DAT_RETURN rc = sd_rmr_get(rmr_handle, &rmr);
    if (rc != DAT_SUCCESS)
        return rc;
    struct sd_ep *ep = NULL;
    struct sd_lmr *lmr = NULL;
    DAT_EP_STATE state;
    DAT_COMPLETION_FLAGS req_flags;
    if ((rc = sd_ep_dto_begin_request(ep_handle, &ep, &state, &req_flags)) != DAT_SUCCESS) {
        ep = NULL;
        goto out;
    }
    if (iov == NULL) {
        rc = SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
        goto out;
    }
    if (priv & ~(DAT_MEM_PRIV_FLAGS)RMR_PRIV_OK) {
        rc = SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG4);
        goto out;
    }
    if (va_type != DAT_VA_TYPE_VA && va_type != DAT_VA_TYPE_ZB) {
        rc = SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG5);
        goto out;
    }
    if (!sd_dto_flags_ok(SD_DTO_BIND, flags, req_flags)) {
        rc = SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG8);
        goto out;
    }
    if (ctx_out == NULL) {
        rc = SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG9);
        goto out;
    }
    struct emu_wr wr = {.op = EMU_WR_BIND, .mw = rmr->mw};
    uint32_t new_ctx = 0;
    if (iov->segment_length == 0) {
        /* Unbind (L8269): the returned context is undefined; we say 0. */
        wr.bind.mr = NULL;
        wr.bind.length = 0;
    } else {
        if ((rc = sd_lmr_get(lmr_handle, &lmr)) != DAT_SUCCESS) {
            lmr = NULL;
            goto out;
        }
        /* LMR, RMR and EP in one PZ (L5556-5559). */
        if (lmr->pz != rmr->pz || lmr->pz != ep->pz) {
            rc = SD_RET(DAT_PROTECTION_VIOLATION, 0);
            goto out;
        }
        /* Only the remote rights mean something for a window (Table 15;
         * local bits of DAT_MEM_PRIV_ALL_FLAG are ignored). Each must be
         * backed by the LMR (L8259-8265). */
        bool rr = priv & DAT_MEM_PRIV_REMOTE_READ_FLAG;
        bool rw = priv & DAT_MEM_PRIV_REMOTE_WRITE_FLAG;
        bool ra = priv & DAT_MEM_PRIV_EXTENSION_BASE;
        if ((rr && !(lmr->priv & DAT_MEM_PRIV_LOCAL_READ_FLAG)) ||
            ((rw || ra) && !(lmr->priv & DAT_MEM_PRIV_LOCAL_WRITE_FLAG))) {
            rc = SD_RET(DAT_PRIVILEGES_VIOLATION, 0);
            goto out;
        }
        /* The range inside the LMR (L8283), in the LMR's address space. */
        uint64_t base = lmr->va_type == DAT_VA_TYPE_ZB ? 0 : lmr->addr;
        uint64_t va = iov->virtual_address, len = iov->segment_length;
        if (va < base || va - base > lmr->len || len > lmr->len - (va - base)) {
            rc = SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
            goto out;
        }
        pthread_mutex_lock(&lmr->mu);
        wr.bind.mr = lmr->mr;
        pthread_mutex_unlock(&lmr->mu);
        if (wr.bind.mr == NULL) {
            rc = SD_RET(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_LMR);
            goto out;
        }
        wr.bind.addr = va;
        wr.bind.length = len;
        wr.bind.access = sd_mem_priv_to_emu(priv & (DAT_MEM_PRIV_REMOTE_READ_FLAG | DAT_MEM_PRIV_REMOTE_WRITE_FLAG |
                                                    DAT_MEM_PRIV_EXTENSION_BASE)) &
                         EMU_ACC_REMOTE_MASK;
        wr.bind.va_type = va_type == DAT_VA_TYPE_ZB ? EMU_VA_ZB : EMU_VA_ABS;
        wr.bind.ep_pz = ep->pz->epz;
        enum emu_mem_status st = next_context(rmr->mw, &wr.bind, &new_ctx);
        if (st != EMU_MEM_OK) {
            SD_WARN("dto", "rmr %p: preparing the bind: %s", (void *)rmr, emu_mem_status_str(st));
            rc = st == EMU_MEM_E_PZ ? SD_RET(DAT_PROTECTION_VIOLATION, 0)
                 : st == EMU_MEM_E_ACCESS ? SD_RET(DAT_PRIVILEGES_VIOLATION, 0)
                                          : SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
            goto out;
        }
        pthread_mutex_lock(&rmr->mu);
        rmr->lmr_context = lmr->lmr_context;
        rmr->priv = priv & (DAT_MEM_PRIV_REMOTE_READ_FLAG | DAT_MEM_PRIV_REMOTE_WRITE_FLAG | DAT_MEM_PRIV_EXTENSION_BASE);
        rmr->va_type = va_type;
        pthread_mutex_unlock(&rmr->mu);
    }
    rc = sd_ep_dto_post_bind(ep, state, &wr, flags, cookie, rmr, new_ctx);
    if (rc == DAT_SUCCESS)
        *ctx_out = new_ctx;
out:
    if (lmr != NULL)
        sd_handle_put(&lmr->h);
    if (ep != NULL)
        sd_handle_put(&ep->h);
    sd_handle_put(&rmr->h);
    return rc;
}

static DAT_RETURN sd_rmr_create_for_ep(DAT_PZ_HANDLE pz_handle, DAT_RMR_HANDLE *rmr_handle)
{
    return sd_rmr_create_in(pz_handle, DAT_RMR_SCOPE_EP, rmr_handle);
}

void sd_ep_rmr_fill_table(DAT_PROVIDER *p)
{
    p->rmr_bind_func = sd_rmr_bind;
    p->rmr_create_for_ep_func = sd_rmr_create_for_ep;
}
