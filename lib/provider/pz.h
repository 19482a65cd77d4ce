/* softdat PZ object. Users (EP, LMR, RMR, SRQ) take a dependency with
 * sd_handle_dep_get(&pz->h) when they are created and drop it in their
 * teardown; dat_pz_free fails with DAT_INVALID_STATE|PZ_IN_USE meanwhile. */
#ifndef SOFTDAT_PROVIDER_PZ_H
#define SOFTDAT_PROVIDER_PZ_H

#include "lib/provider/handle.h"

struct emu_pz;

struct sd_pz {
    struct sd_handle h;
    /* The zone in the IA's memory table (ia->mem). Set before publish,
     * constant while the handle is live; regions, windows and
     * emu_mem_pz_hold users (EPs, SRQs) are tagged with it. */
    struct emu_pz *epz;
};

static inline DAT_RETURN sd_pz_get(DAT_PZ_HANDLE raw, struct sd_pz **out)
{
    struct sd_handle *h;
    DAT_RETURN rc = sd_handle_get(raw, DAT_HANDLE_TYPE_PZ, DAT_INVALID_HANDLE_PZ, &h);
    *out = rc == DAT_SUCCESS ? (struct sd_pz *)h : NULL;
    return rc;
}

#endif
