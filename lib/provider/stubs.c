/* softdat: DAT calls whose object issue has not landed yet. Each validates
 * its primary handle (so a bad handle still gets the spec's
 * DAT_INVALID_HANDLE subtype) and then answers DAT_NOT_IMPLEMENTED. When an
 * object lands, delete its group here and fill the slots from its own file. */
#include <stdarg.h>

#include "lib/provider/handle.h"

#define NOT_IMPLEMENTED SD_RET(DAT_NOT_IMPLEMENTED, 0)

static DAT_RETURN check(DAT_HANDLE raw, uint32_t type, uint32_t bad_subtype)
{
    struct sd_handle *h;
    DAT_RETURN rc = sd_handle_get(raw, type, bad_subtype, &h);
    if (rc != DAT_SUCCESS)
        return rc;
    sd_handle_put(h);
    return NOT_IMPLEMENTED;
}

#define IA(h) check((h), DAT_HANDLE_TYPE_IA, DAT_INVALID_HANDLE_IA)
#define EP(h) check((h), DAT_HANDLE_TYPE_EP, DAT_INVALID_HANDLE_EP)
#define RMR(h) check((h), DAT_HANDLE_TYPE_RMR, DAT_INVALID_HANDLE_RMR)
#define PZ(h) check((h), DAT_HANDLE_TYPE_PZ, DAT_INVALID_HANDLE_PZ)

/* ---- EP */

/* ---- RMR */

/* ---- IA extras */
static DAT_RETURN ia_ha_related(DAT_IA_HANDLE ia, const DAT_NAME_PTR name, DAT_BOOLEAN *related) { return IA(ia); }

void sd_stubs_fill_table(DAT_PROVIDER *p)
{
    p->ia_ha_related_func = ia_ha_related;
}
