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
#define CSP(h) check((h), DAT_HANDLE_TYPE_CSP, DAT_INVALID_HANDLE_CSP)
#define SRQ(h) check((h), DAT_HANDLE_TYPE_SRQ, DAT_INVALID_HANDLE_SRQ)

/* ---- EP */
static DAT_RETURN ep_create_with_srq(DAT_IA_HANDLE ia, DAT_PZ_HANDLE pz, DAT_EVD_HANDLE r, DAT_EVD_HANDLE q,
                                     DAT_EVD_HANDLE c, DAT_SRQ_HANDLE s, const DAT_EP_ATTR *a,
                                     DAT_EP_HANDLE *ep) { return IA(ia); }
static DAT_RETURN ep_common_connect(DAT_EP_HANDLE ep, DAT_IA_ADDRESS_PTR a, DAT_TIMEOUT t, DAT_COUNT n,
                                    const DAT_PVOID pd) { return EP(ep); }
static DAT_RETURN ep_set_watermark(DAT_EP_HANDLE ep, DAT_COUNT soft, DAT_COUNT hard) { return EP(ep); }

/* ---- RMR */

/* ---- service points */
static DAT_RETURN csp_create(DAT_IA_HANDLE ia, DAT_COMM *comm, DAT_IA_ADDRESS_PTR a, DAT_EVD_HANDLE evd,
                             DAT_CSP_HANDLE *csp) { return IA(ia); }
static DAT_RETURN csp_query(DAT_CSP_HANDLE csp, DAT_CSP_PARAM_MASK m, DAT_CSP_PARAM *p) { return CSP(csp); }
static DAT_RETURN csp_free(DAT_CSP_HANDLE csp) { return CSP(csp); }

/* ---- SRQ */
static DAT_RETURN srq_create(DAT_IA_HANDLE ia, DAT_PZ_HANDLE pz, DAT_SRQ_ATTR *a, DAT_SRQ_HANDLE *srq) { return IA(ia); }
static DAT_RETURN srq_free(DAT_SRQ_HANDLE srq) { return SRQ(srq); }
static DAT_RETURN srq_post_recv(DAT_SRQ_HANDLE srq, DAT_COUNT n, DAT_LMR_TRIPLET *iov, DAT_DTO_COOKIE c) { return SRQ(srq); }
static DAT_RETURN srq_query(DAT_SRQ_HANDLE srq, DAT_SRQ_PARAM_MASK m, DAT_SRQ_PARAM *p) { return SRQ(srq); }
static DAT_RETURN srq_resize(DAT_SRQ_HANDLE srq, DAT_COUNT n) { return SRQ(srq); }
static DAT_RETURN srq_set_lw(DAT_SRQ_HANDLE srq, DAT_COUNT lw) { return SRQ(srq); }

/* ---- IA extras */
static DAT_RETURN ia_ha_related(DAT_IA_HANDLE ia, const DAT_NAME_PTR name, DAT_BOOLEAN *related) { return IA(ia); }

void sd_stubs_fill_table(DAT_PROVIDER *p)
{
    p->ep_create_with_srq_func = ep_create_with_srq;
    p->ep_common_connect_func = ep_common_connect;
    p->ep_set_watermark_func = ep_set_watermark;
    p->csp_create_func = csp_create;
    p->csp_query_func = csp_query;
    p->csp_free_func = csp_free;
    p->srq_create_func = srq_create;
    p->srq_free_func = srq_free;
    p->srq_post_recv_func = srq_post_recv;
    p->srq_query_func = srq_query;
    p->srq_resize_func = srq_resize;
    p->srq_set_lw_func = srq_set_lw;
    p->ia_ha_related_func = ia_ha_related;
}
