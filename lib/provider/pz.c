/* softdat PZ: a protection zone is an object that LMRs, RMRs, EPs and SRQs
 * reference (as a dependency); the memory table in emu/ tags regions and
 * windows with its emu_pz. */
#include "lib/provider/pz.h"

#include "emu/log.h"
#include "emu/mem.h"
#include "lib/provider/ia.h"
#include "lib/provider/lmr.h"
#include "lib/provider/rmr.h"

static void pz_teardown(struct sd_handle *h)
{
    struct sd_pz *pz = (struct sd_pz *)h;
    if (pz->epz == NULL)
        return;
    /* Handle dependants are gone (free retired us; IA close tears down
     * EPs/LMRs/RMRs first). A region whose free timed out with accesses in
     * flight still counts: the table goes with the IA anyway. */
    enum emu_mem_status st = emu_mem_pz_free(pz->epz);
    if (st != EMU_MEM_OK)
        SD_WARN("pz", "emu pz free: %s", emu_mem_status_str(st));
    pz->epz = NULL;
}

static const struct sd_handle_ops pz_ops = {
    .type = DAT_HANDLE_TYPE_PZ,
    .name = "pz",
    .size = sizeof(struct sd_pz),
    .phase = SD_PHASE_PZ,
    .teardown = pz_teardown,
};

static DAT_RETURN sd_pz_create(DAT_IA_HANDLE ia_handle, DAT_PZ_HANDLE *pz_handle)
{
    struct sd_ia *ia;
    DAT_RETURN rc = sd_ia_get(ia_handle, &ia);
    if (rc != DAT_SUCCESS)
        return rc;
    if (pz_handle == NULL) {
        rc = SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
        goto out;
    }
    struct sd_pz *pz = (struct sd_pz *)sd_handle_alloc(&pz_ops, ia);
    if (pz == NULL) {
        rc = SD_RET(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
        goto out;
    }
    enum emu_mem_status st = emu_mem_pz_create(ia->mem, &pz->epz);
    if (st != EMU_MEM_OK) {
        sd_handle_discard(&pz->h);
        rc = SD_RET(DAT_INSUFFICIENT_RESOURCES,
                    st == EMU_MEM_E_LIMIT ? DAT_RESOURCE_PROTECTION_DOMAIN : DAT_RESOURCE_MEMORY);
        goto out;
    }
    emu_mem_pz_set_trace_id(pz->epz, pz->h.id); /* memcheck records name it */
    rc = sd_handle_publish(&pz->h);
    if (rc != DAT_SUCCESS) {
        pz_teardown(&pz->h);
        sd_handle_discard(&pz->h);
        goto out;
    }
    *pz_handle = (DAT_PZ_HANDLE)pz;
out:
    sd_handle_put(&ia->h);
    return rc;
}

static DAT_RETURN sd_pz_query(DAT_PZ_HANDLE pz_handle, DAT_PZ_PARAM_MASK mask, DAT_PZ_PARAM *param)
{
    struct sd_pz *pz;
    DAT_RETURN rc = sd_pz_get(pz_handle, &pz);
    if (rc != DAT_SUCCESS)
        return rc;
    if ((mask & ~(DAT_PZ_PARAM_MASK)DAT_PZ_FIELD_ALL) != 0)
        rc = SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    else if (param == NULL)
        rc = SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    else
        param->ia_handle = sd_ia_consumer_handle(pz->h.ia);
    sd_handle_put(&pz->h);
    return rc;
}

static DAT_RETURN sd_pz_free(DAT_PZ_HANDLE pz_handle)
{
    struct sd_pz *pz;
    DAT_RETURN rc = sd_pz_get(pz_handle, &pz);
    if (rc != DAT_SUCCESS)
        return rc;
    if (!sd_handle_try_retire(&pz->h))
        rc = SD_RET(DAT_INVALID_STATE, DAT_INVALID_STATE_PZ_IN_USE);
    else
        rc = sd_handle_destroy(&pz->h, DAT_INVALID_HANDLE_PZ);
    sd_handle_put(&pz->h);
    return rc;
}

void sd_pz_fill_table(DAT_PROVIDER *p)
{
    p->pz_create_func = sd_pz_create;
    p->pz_query_func = sd_pz_query;
    p->pz_free_func = sd_pz_free;
    /* provider.c fills objects it knows; memory objects ride along here. */
    sd_lmr_fill_table(p);
    sd_rmr_fill_table(p);
}
