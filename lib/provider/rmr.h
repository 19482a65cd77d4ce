/* softdat RMR object: a memory window of the IA's memory table
 * (emu/mem.h). Create/query/free live in rmr.c; dat_rmr_bind (and
 * dat_rmr_create_for_ep) belong with the EP send queue. */
#ifndef SOFTDAT_PROVIDER_RMR_H
#define SOFTDAT_PROVIDER_RMR_H

#include <pthread.h>

#include "lib/provider/handle.h"

struct emu_mw;
struct sd_pz;

struct sd_rmr {
    struct sd_handle h;
    struct emu_mw *mw;     /* constant while the handle is live */
    struct sd_pz *pz;      /* dependency + reference held */
    DAT_RMR_SCOPE scope;   /* DAT_RMR_SCOPE_PZ (dat_rmr_create) or _EP */
    /* Bind bookkeeping, written by the bind path under mu and reported by
     * dat_rmr_query while the window is bound (the window itself knows the
     * range, rights and STag; these are what it does not keep). */
    pthread_mutex_t mu;
    DAT_LMR_CONTEXT lmr_context; /* of the LMR it is bound into */
    DAT_MEM_PRIV_FLAGS priv;     /* as given to dat_rmr_bind (remote bits) */
    DAT_VA_TYPE va_type;
};

static inline DAT_RETURN sd_rmr_get(DAT_RMR_HANDLE raw, struct sd_rmr **out)
{
    struct sd_handle *h;
    DAT_RETURN rc = sd_handle_get(raw, DAT_HANDLE_TYPE_RMR, DAT_INVALID_HANDLE_RMR, &h);
    *out = rc == DAT_SUCCESS ? (struct sd_rmr *)h : NULL;
    return rc;
}

/* Create and publish a window in pz (caller holds a reference on pz):
 * scope DAT_RMR_SCOPE_PZ for dat_rmr_create, DAT_RMR_SCOPE_EP for
 * dat_rmr_create_for_ep (the connection is fixed at bind). Returns
 * DAT_SUCCESS, DAT_INSUFFICIENT_RESOURCES, DAT_INVALID_HANDLE|PZ (dying). */
DAT_RETURN sd_rmr_create_obj(struct sd_pz *pz, DAT_RMR_SCOPE scope, struct sd_rmr **out);
/* dat_rmr_create (scope PZ) and dat_rmr_create_for_ep (scope EP): the
 * handle checks around sd_rmr_create_obj. */
DAT_RETURN sd_rmr_create_in(DAT_PZ_HANDLE pz_handle, DAT_RMR_SCOPE scope, DAT_RMR_HANDLE *rmr_handle);

void sd_rmr_fill_table(DAT_PROVIDER *p);

#endif
