/* softdat extension operations: the slot-80 dispatcher (ibext.c) and the
 * entry points it reaches in other object files. */
#ifndef SOFTDAT_PROVIDER_IBEXT_H
#define SOFTDAT_PROVIDER_IBEXT_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>

#include "lib/provider/provider.h"

/* Fills slot 80 (handle_extendedop_func). */
void sd_ibext_fill_table(DAT_PROVIDER *p);

/* ep_dto.c: the IB extension DTOs. */
DAT_RETURN sd_ep_post_write_immed(DAT_EP_HANDLE ep, DAT_COUNT n, DAT_LMR_TRIPLET *iov, DAT_DTO_COOKIE cookie,
                                  const DAT_RMR_TRIPLET *remote, uint32_t imm, DAT_COMPLETION_FLAGS flags);
DAT_RETURN sd_ep_post_atomic(DAT_EP_HANDLE ep, bool cas, uint64_t a1, uint64_t a2, const DAT_LMR_TRIPLET *lbuf,
                             DAT_DTO_COOKIE cookie, const DAT_RMR_TRIPLET *remote, DAT_COMPLETION_FLAGS flags);

#endif
