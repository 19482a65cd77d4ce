/* softdat RMR: dat_rmr_create/query/free over the memory table's windows.
 * Binding is done on an EP's send queue (ep side). Spec digest:
 * shared/research/spec-part2.md §5.5; Lnnnn = DAT 2.0 spec text lines. */
#include "lib/provider/rmr.h"

#include "emu/log.h"
#include "emu/mem.h"
#include "lib/provider/ia.h"
#include "lib/provider/lmr.h"
#include "lib/provider/pz.h"

static void rmr_teardown(struct sd_handle *h)
{
    struct sd_rmr *rmr = (struct sd_rmr *)h;
    if (rmr->mw != NULL) {
        /* Implicitly unbinds (L8088): later remote accesses fail. */
        enum emu_mem_status st = EMU_MEM_E_INFLIGHT;
        for (int i = 0; i < 5 && st == EMU_MEM_E_INFLIGHT; i++)
            st = emu_mem_mw_free(rmr->mw);
        if (st != EMU_MEM_OK)
            SD_WARN("rmr", "window free: %s", emu_mem_status_str(st));
        rmr->mw = NULL;
    }
    if (rmr->pz != NULL) {
        sd_handle_dep_put(&rmr->pz->h);
        sd_handle_put(&rmr->pz->h);
        rmr->pz = NULL;
    }
}

static void rmr_release(struct sd_handle *h)
{
    pthread_mutex_destroy(&((struct sd_rmr *)h)->mu);
}

static const struct sd_handle_ops rmr_ops = {
    .type = DAT_HANDLE_TYPE_RMR,
    .name = "rmr",
    .size = sizeof(struct sd_rmr),
    .phase = SD_PHASE_RMR,
    .teardown = rmr_teardown,
    .release = rmr_release,
};

DAT_RETURN sd_rmr_create_obj(struct sd_pz *pz, DAT_RMR_SCOPE scope, struct sd_rmr **out)
{
    struct sd_ia *ia = pz->h.ia;
    struct sd_rmr *rmr = (struct sd_rmr *)sd_handle_alloc(&rmr_ops, ia);
    if (rmr == NULL)
        return SD_RET(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
    pthread_mutex_init(&rmr->mu, NULL);
    if (!sd_handle_dep_get(&pz->h)) {
        sd_handle_discard(&rmr->h);
        return SD_RET(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_PZ);
    }
    sd_handle_ref(&pz->h);
    rmr->pz = pz;
    rmr->scope = scope;
    enum emu_mem_status st = emu_mem_mw_create(
        ia->mem, pz->epz, scope == DAT_RMR_SCOPE_EP ? EMU_MW_SCOPE_CONN : EMU_MW_SCOPE_PZ, &rmr->mw);
    DAT_RETURN rc = DAT_SUCCESS;
    if (st != EMU_MEM_OK) {
        rmr->mw = NULL;
        rc = st == EMU_MEM_E_LIMIT ? SD_RET(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY_REGION)
             : st == EMU_MEM_E_NOMEM ? SD_RET(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY)
                                     : SD_RET(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_PZ);
    } else
        rc = sd_handle_publish(&rmr->h);
    if (rc != DAT_SUCCESS) {
        rmr_teardown(&rmr->h);
        sd_handle_discard(&rmr->h);
        return rc;
    }
    *out = rmr;
    return DAT_SUCCESS;
}

DAT_RETURN sd_rmr_create_in(DAT_PZ_HANDLE pz_handle, DAT_RMR_SCOPE scope, DAT_RMR_HANDLE *rmr_handle)
{
    struct sd_pz *pz;
    DAT_RETURN rc = sd_pz_get(pz_handle, &pz);
    if (rc != DAT_SUCCESS)
        return rc;
    struct sd_rmr *rmr;
    if (rmr_handle == NULL)
        rc = SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    else if ((rc = sd_rmr_create_obj(pz, scope, &rmr)) == DAT_SUCCESS)
        *rmr_handle = (DAT_RMR_HANDLE)rmr;
    sd_handle_put(&pz->h);
    return rc;
}

static DAT_RETURN sd_rmr_create(DAT_PZ_HANDLE pz_handle, DAT_RMR_HANDLE *rmr_handle)
{
    return sd_rmr_create_in(pz_handle, DAT_RMR_SCOPE_PZ, rmr_handle);
}

static DAT_RETURN sd_rmr_query(DAT_RMR_HANDLE rmr_handle, DAT_RMR_PARAM_MASK mask, DAT_RMR_PARAM *param)
{
    struct sd_rmr *rmr;
    DAT_RETURN rc = sd_rmr_get(rmr_handle, &rmr);
    if (rc != DAT_SUCCESS)
        return rc;
    if ((mask & ~(DAT_RMR_PARAM_MASK)DAT_RMR_FIELD_ALL) != 0)
        rc = SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    else if (param == NULL)
        rc = SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    else {
        struct emu_mw_info info;
        enum emu_mem_status st = emu_mem_mw_query(rmr->mw, &info);
        param->ia_handle = sd_ia_consumer_handle(rmr->h.ia);
        param->pz_handle = (DAT_PZ_HANDLE)rmr->pz;
        param->rmr_scope = rmr->scope;
        pthread_mutex_lock(&rmr->mu);
        if (st == EMU_MEM_OK && info.state == EMU_MW_BOUND) {
            param->lmr_triplet.lmr_context = rmr->lmr_context;
            param->lmr_triplet.virtual_address = info.addr;
            param->lmr_triplet.segment_length = (DAT_SEG_LENGTH)info.length;
            param->mem_priv = sd_mem_priv_from_emu(info.access);
            param->rmr_context = (DAT_RMR_CONTEXT)info.stag;
            param->va_type = rmr->va_type;
        } else {
            /* Unbound: these fields are undefined (L8142); report zeros. */
            param->lmr_triplet.lmr_context = 0;
            param->lmr_triplet.virtual_address = 0;
            param->lmr_triplet.segment_length = 0;
            param->mem_priv = DAT_MEM_PRIV_NONE_FLAG;
            param->rmr_context = 0;
            param->va_type = DAT_VA_TYPE_VA;
        }
        pthread_mutex_unlock(&rmr->mu);
    }
    sd_handle_put(&rmr->h);
    return rc;
}

static DAT_RETURN sd_rmr_free(DAT_RMR_HANDLE rmr_handle)
{
    struct sd_rmr *rmr;
    DAT_RETURN rc = sd_rmr_get(rmr_handle, &rmr);
    if (rc != DAT_SUCCESS)
        return rc;
    /* Bound or not (L8088). Nothing takes a dependency on an RMR, so a
     * failed retire means another free of this handle is under way: the
     * handle is going away, and dat_rmr_free lists only SUCCESS and
     * INVALID_HANDLE (L8067-8100). */
    if (!sd_handle_try_retire(&rmr->h))
        rc = SD_RET(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_RMR);
    else
        rc = sd_handle_destroy(&rmr->h, DAT_INVALID_HANDLE_RMR);
    sd_handle_put(&rmr->h);
    return rc;
}

void sd_rmr_fill_table(DAT_PROVIDER *p)
{
    p->rmr_create_func = sd_rmr_create;
    p->rmr_query_func = sd_rmr_query;
    p->rmr_free_func = sd_rmr_free;
    /* rmr_create_for_ep and rmr_bind: EP side (sd_rmr_create_obj). */
}
