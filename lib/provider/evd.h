/* softdat EVD object. This issue provides the object (create/query/free and
 * the provider-created async EVD). The data path embeds the event-queue core
 * (lib/provider/evq.h, struct sd_evq) here and wires the remaining EVD slots
 * (wait/dequeue/post_se/resize/enable/disable/unwaitable/modify_cno) to it;
 * evd.c keeps the handle, argument checks and IA/CNO references. */
#ifndef SOFTDAT_PROVIDER_EVD_H
#define SOFTDAT_PROVIDER_EVD_H

#include "lib/provider/handle.h"

struct sd_evd {
    struct sd_handle h;
    DAT_EVD_FLAGS flags;
    DAT_COUNT qlen;      /* capacity granted (>= requested) */
    DAT_EVD_STATE state; /* ENABLED|WAITABLE|CONFIG_NOTIFY at creation */
    struct sd_handle *cno; /* attached CNO (holds a dep on it), or NULL */
    /* Data path: struct sd_evq q; (event ring, waiters, overflow rules). */
};

#define SD_EVD_VALID_FLAGS                                                                     \
    (DAT_EVD_SOFTWARE_FLAG | DAT_EVD_CR_FLAG | DAT_EVD_DTO_FLAG | DAT_EVD_CONNECTION_FLAG |    \
     DAT_EVD_RMR_BIND_FLAG | DAT_EVD_ASYNC_FLAG | DAT_EVD_EXTENSION_BASE)

/* Create and publish an EVD of `ia` (ia->h reference held by caller).
 * Validates qlen/flags like dat_evd_create; cno may be NULL. */
DAT_RETURN sd_evd_create_obj(struct sd_ia *ia, DAT_COUNT min_qlen, struct sd_handle *cno, DAT_EVD_FLAGS flags,
                             struct sd_evd **out);

/* Validate an EVD handle; +1 ref. bad_subtype selects the INVALID_HANDLE
 * subtype for the parameter it came from (EVD_ASYNC, EVD_RECV, ...). */
static inline DAT_RETURN sd_evd_get(DAT_EVD_HANDLE raw, uint32_t bad_subtype, struct sd_evd **out)
{
    struct sd_handle *h;
    DAT_RETURN rc = sd_handle_get(raw, DAT_HANDLE_TYPE_EVD, bad_subtype, &h);
    *out = rc == DAT_SUCCESS ? (struct sd_evd *)h : NULL;
    return rc;
}

#endif
