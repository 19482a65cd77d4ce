/* softdat CNO object: handle and references around the CNO wait core
 * (lib/provider/cnoq.h, docs/events.md). EVDs attached to a CNO hold a
 * dependency on it (dat_cno_free → DAT_INVALID_STATE meanwhile) and a
 * reference. */
#ifndef SOFTDAT_PROVIDER_CNO_H
#define SOFTDAT_PROVIDER_CNO_H

#include "lib/provider/cnoq.h"
#include "lib/provider/handle.h"

struct sd_cno {
    struct sd_handle h;
    struct sd_cnoq c;
    bool c_inited;
};

static inline DAT_RETURN sd_cno_get(DAT_CNO_HANDLE raw, struct sd_cno **out)
{
    struct sd_handle *h;
    DAT_RETURN rc = sd_handle_get(raw, DAT_HANDLE_TYPE_CNO, DAT_INVALID_HANDLE_CNO, &h);
    *out = rc == DAT_SUCCESS ? (struct sd_cno *)h : NULL;
    return rc;
}

void sd_cno_fill_table(DAT_PROVIDER *p);

#endif
