/* DAT 1.2 names on top of DAT 2.0, for building Open MPI 1.6's udapl BTL
 * (written against <dat/udat.h> 1.2) with softdat's <dat2/udat.h>. Only
 * what that BTL uses differs:
 *   - DAT_RMR_TRIPLET.target_address is DAT 2.0's virtual_address;
 *   - dat_lmr_create gained a DAT_VA_TYPE argument (DAT_VA_TYPE_VA keeps
 *     1.2's meaning: addresses are virtual addresses).
 * Test-side only: never installed, never part of softdat. */
#ifndef SOFTDAT_OMPI_SHIM_DAT_UDAT_H
#define SOFTDAT_OMPI_SHIM_DAT_UDAT_H

#include <dat2/udat.h>

#define target_address virtual_address

#define dat_lmr_create(ia, type, region, len, pz, priv, lmr, lctx, rctx, rlen, raddr) \
    dat_lmr_create((ia), (type), (region), (len), (pz), (priv), DAT_VA_TYPE_VA, (lmr), \
                   (lctx), (rctx), (rlen), (raddr))

#endif
