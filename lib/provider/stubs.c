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
#define EVD(h) check((h), DAT_HANDLE_TYPE_EVD, DAT_INVALID_HANDLE_EVD_REQUEST)
#define CNO(h) check((h), DAT_HANDLE_TYPE_CNO, DAT_INVALID_HANDLE_CNO)
#define CR(h) check((h), DAT_HANDLE_TYPE_CR, DAT_INVALID_HANDLE_CR)
#define LMR(h) check((h), DAT_HANDLE_TYPE_LMR, DAT_INVALID_HANDLE_LMR)
#define RMR(h) check((h), DAT_HANDLE_TYPE_RMR, DAT_INVALID_HANDLE_RMR)
#define PZ(h) check((h), DAT_HANDLE_TYPE_PZ, DAT_INVALID_HANDLE_PZ)
#define PSP(h) check((h), DAT_HANDLE_TYPE_PSP, DAT_INVALID_HANDLE_PSP)
#define RSP(h) check((h), DAT_HANDLE_TYPE_RSP, DAT_INVALID_HANDLE_RSP)
#define CSP(h) check((h), DAT_HANDLE_TYPE_CSP, DAT_INVALID_HANDLE_CSP)
#define SRQ(h) check((h), DAT_HANDLE_TYPE_SRQ, DAT_INVALID_HANDLE_SRQ)

/* ---- CNO */
static DAT_RETURN cno_create(DAT_IA_HANDLE ia, DAT_OS_WAIT_PROXY_AGENT agent, DAT_CNO_HANDLE *cno) { return IA(ia); }
static DAT_RETURN cno_modify_agent(DAT_CNO_HANDLE cno, DAT_OS_WAIT_PROXY_AGENT agent) { return CNO(cno); }
static DAT_RETURN cno_query(DAT_CNO_HANDLE cno, DAT_CNO_PARAM_MASK m, DAT_CNO_PARAM *p) { return CNO(cno); }
static DAT_RETURN cno_free(DAT_CNO_HANDLE cno) { return CNO(cno); }
static DAT_RETURN cno_wait(DAT_CNO_HANDLE cno, DAT_TIMEOUT t, DAT_EVD_HANDLE *evd) { return CNO(cno); }
static DAT_RETURN cno_fd_create(DAT_IA_HANDLE ia, DAT_FD *fd, DAT_CNO_HANDLE *cno) { return IA(ia); }
static DAT_RETURN cno_trigger(DAT_CNO_HANDLE cno, DAT_EVD_HANDLE *evd) { return CNO(cno); }

/* ---- CR */
static DAT_RETURN cr_query(DAT_CR_HANDLE cr, DAT_CR_PARAM_MASK m, DAT_CR_PARAM *p) { return CR(cr); }
static DAT_RETURN cr_accept(DAT_CR_HANDLE cr, DAT_EP_HANDLE ep, DAT_COUNT n, const DAT_PVOID pd) { return CR(cr); }
static DAT_RETURN cr_reject(DAT_CR_HANDLE cr, DAT_COUNT n, const DAT_PVOID pd) { return CR(cr); }
static DAT_RETURN cr_handoff(DAT_CR_HANDLE cr, DAT_CONN_QUAL q) { return CR(cr); }

/* ---- EVD (beyond the object: events, waiting, CNO) */
static DAT_RETURN evd_modify_cno(DAT_EVD_HANDLE evd, DAT_CNO_HANDLE cno) { return EVD(evd); }
static DAT_RETURN evd_enable(DAT_EVD_HANDLE evd) { return EVD(evd); }
static DAT_RETURN evd_disable(DAT_EVD_HANDLE evd) { return EVD(evd); }
static DAT_RETURN evd_wait(DAT_EVD_HANDLE evd, DAT_TIMEOUT t, DAT_COUNT th, DAT_EVENT *e, DAT_COUNT *n) { return EVD(evd); }
static DAT_RETURN evd_resize(DAT_EVD_HANDLE evd, DAT_COUNT qlen) { return EVD(evd); }
static DAT_RETURN evd_post_se(DAT_EVD_HANDLE evd, const DAT_EVENT *e) { return EVD(evd); }
static DAT_RETURN evd_dequeue(DAT_EVD_HANDLE evd, DAT_EVENT *e) { return EVD(evd); }
static DAT_RETURN evd_set_unwaitable(DAT_EVD_HANDLE evd) { return EVD(evd); }
static DAT_RETURN evd_clear_unwaitable(DAT_EVD_HANDLE evd) { return EVD(evd); }

/* ---- EP */
static DAT_RETURN ep_create(DAT_IA_HANDLE ia, DAT_PZ_HANDLE pz, DAT_EVD_HANDLE r, DAT_EVD_HANDLE q,
                            DAT_EVD_HANDLE c, const DAT_EP_ATTR *a, DAT_EP_HANDLE *ep) { return IA(ia); }
static DAT_RETURN ep_create_with_srq(DAT_IA_HANDLE ia, DAT_PZ_HANDLE pz, DAT_EVD_HANDLE r, DAT_EVD_HANDLE q,
                                     DAT_EVD_HANDLE c, DAT_SRQ_HANDLE s, const DAT_EP_ATTR *a,
                                     DAT_EP_HANDLE *ep) { return IA(ia); }
static DAT_RETURN ep_query(DAT_EP_HANDLE ep, DAT_EP_PARAM_MASK m, DAT_EP_PARAM *p) { return EP(ep); }
static DAT_RETURN ep_modify(DAT_EP_HANDLE ep, DAT_EP_PARAM_MASK m, const DAT_EP_PARAM *p) { return EP(ep); }
static DAT_RETURN ep_connect(DAT_EP_HANDLE ep, DAT_IA_ADDRESS_PTR a, DAT_CONN_QUAL q, DAT_TIMEOUT t, DAT_COUNT n,
                             const DAT_PVOID pd, DAT_QOS qos, DAT_CONNECT_FLAGS f) { return EP(ep); }
static DAT_RETURN ep_common_connect(DAT_EP_HANDLE ep, DAT_IA_ADDRESS_PTR a, DAT_TIMEOUT t, DAT_COUNT n,
                                    const DAT_PVOID pd) { return EP(ep); }
static DAT_RETURN ep_dup_connect(DAT_EP_HANDLE ep, DAT_EP_HANDLE dup, DAT_TIMEOUT t, DAT_COUNT n,
                                 const DAT_PVOID pd, DAT_QOS qos) { return EP(ep); }
static DAT_RETURN ep_disconnect(DAT_EP_HANDLE ep, DAT_CLOSE_FLAGS f) { return EP(ep); }
static DAT_RETURN ep_post_send(DAT_EP_HANDLE ep, DAT_COUNT n, DAT_LMR_TRIPLET *iov, DAT_DTO_COOKIE c,
                               DAT_COMPLETION_FLAGS f) { return EP(ep); }
static DAT_RETURN ep_post_send_with_invalidate(DAT_EP_HANDLE ep, DAT_COUNT n, DAT_LMR_TRIPLET *iov,
                                               DAT_DTO_COOKIE c, DAT_COMPLETION_FLAGS f, DAT_BOOLEAN inv,
                                               DAT_RMR_CONTEXT ctx) { return EP(ep); }
static DAT_RETURN ep_post_recv(DAT_EP_HANDLE ep, DAT_COUNT n, DAT_LMR_TRIPLET *iov, DAT_DTO_COOKIE c,
                               DAT_COMPLETION_FLAGS f) { return EP(ep); }
static DAT_RETURN ep_post_rdma_read(DAT_EP_HANDLE ep, DAT_COUNT n, DAT_LMR_TRIPLET *iov, DAT_DTO_COOKIE c,
                                    const DAT_RMR_TRIPLET *r, DAT_COMPLETION_FLAGS f) { return EP(ep); }
static DAT_RETURN ep_post_rdma_read_to_rmr(DAT_EP_HANDLE ep, const DAT_RMR_TRIPLET *l, DAT_DTO_COOKIE c,
                                           const DAT_RMR_TRIPLET *r, DAT_COMPLETION_FLAGS f) { return EP(ep); }
static DAT_RETURN ep_post_rdma_write(DAT_EP_HANDLE ep, DAT_COUNT n, DAT_LMR_TRIPLET *iov, DAT_DTO_COOKIE c,
                                     const DAT_RMR_TRIPLET *r, DAT_COMPLETION_FLAGS f) { return EP(ep); }
static DAT_RETURN ep_get_status(DAT_EP_HANDLE ep, DAT_EP_STATE *s, DAT_BOOLEAN *ri, DAT_BOOLEAN *qi) { return EP(ep); }
static DAT_RETURN ep_free(DAT_EP_HANDLE ep) { return EP(ep); }
static DAT_RETURN ep_reset(DAT_EP_HANDLE ep) { return EP(ep); }
static DAT_RETURN ep_recv_query(DAT_EP_HANDLE ep, DAT_COUNT *n, DAT_COUNT *span) { return EP(ep); }
static DAT_RETURN ep_set_watermark(DAT_EP_HANDLE ep, DAT_COUNT soft, DAT_COUNT hard) { return EP(ep); }

/* ---- LMR */
static DAT_RETURN lmr_create(DAT_IA_HANDLE ia, DAT_MEM_TYPE t, DAT_REGION_DESCRIPTION d, DAT_VLEN len,
                             DAT_PZ_HANDLE pz, DAT_MEM_PRIV_FLAGS priv, DAT_VA_TYPE va, DAT_LMR_HANDLE *lmr,
                             DAT_LMR_CONTEXT *lc, DAT_RMR_CONTEXT *rc, DAT_VLEN *sz, DAT_VADDR *addr) { return IA(ia); }
static DAT_RETURN lmr_query(DAT_LMR_HANDLE lmr, DAT_LMR_PARAM_MASK m, DAT_LMR_PARAM *p) { return LMR(lmr); }
static DAT_RETURN lmr_free(DAT_LMR_HANDLE lmr) { return LMR(lmr); }
static DAT_RETURN lmr_sync_rdma_read(DAT_IA_HANDLE ia, const DAT_LMR_TRIPLET *iov, DAT_VLEN n) { return IA(ia); }
static DAT_RETURN lmr_sync_rdma_write(DAT_IA_HANDLE ia, const DAT_LMR_TRIPLET *iov, DAT_VLEN n) { return IA(ia); }

/* ---- RMR */
static DAT_RETURN rmr_create(DAT_PZ_HANDLE pz, DAT_RMR_HANDLE *rmr) { return PZ(pz); }
static DAT_RETURN rmr_create_for_ep(DAT_PZ_HANDLE pz, DAT_RMR_HANDLE *rmr) { return PZ(pz); }
static DAT_RETURN rmr_query(DAT_RMR_HANDLE rmr, DAT_RMR_PARAM_MASK m, DAT_RMR_PARAM *p) { return RMR(rmr); }
static DAT_RETURN rmr_bind(DAT_RMR_HANDLE rmr, DAT_LMR_HANDLE lmr, const DAT_LMR_TRIPLET *iov,
                           DAT_MEM_PRIV_FLAGS priv, DAT_VA_TYPE va, DAT_EP_HANDLE ep, DAT_RMR_COOKIE c,
                           DAT_COMPLETION_FLAGS f, DAT_RMR_CONTEXT *ctx) { return RMR(rmr); }
static DAT_RETURN rmr_free(DAT_RMR_HANDLE rmr) { return RMR(rmr); }

/* ---- service points */
static DAT_RETURN psp_create(DAT_IA_HANDLE ia, DAT_CONN_QUAL q, DAT_EVD_HANDLE evd, DAT_PSP_FLAGS f,
                             DAT_PSP_HANDLE *psp) { return IA(ia); }
static DAT_RETURN psp_create_any(DAT_IA_HANDLE ia, DAT_CONN_QUAL *q, DAT_EVD_HANDLE evd, DAT_PSP_FLAGS f,
                                 DAT_PSP_HANDLE *psp) { return IA(ia); }
static DAT_RETURN psp_query(DAT_PSP_HANDLE psp, DAT_PSP_PARAM_MASK m, DAT_PSP_PARAM *p) { return PSP(psp); }
static DAT_RETURN psp_free(DAT_PSP_HANDLE psp) { return PSP(psp); }
static DAT_RETURN rsp_create(DAT_IA_HANDLE ia, DAT_CONN_QUAL q, DAT_EP_HANDLE ep, DAT_EVD_HANDLE evd,
                             DAT_RSP_HANDLE *rsp) { return IA(ia); }
static DAT_RETURN rsp_query(DAT_RSP_HANDLE rsp, DAT_RSP_PARAM_MASK m, DAT_RSP_PARAM *p) { return RSP(rsp); }
static DAT_RETURN rsp_free(DAT_RSP_HANDLE rsp) { return RSP(rsp); }
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

/* ---- extension op (slot 80). Open-query ops pass the IA *name* as handle
 * (abi §3.7) and must not be looked up as a handle. */
static DAT_RETURN handle_extendedop(DAT_HANDLE handle, DAT_EXTENDED_OP op, va_list args)
{
    if (op & DAT_OPEN_EXTENSION_BASE)
        return NOT_IMPLEMENTED;
    return check(handle, SD_HTYPE_ANY, DAT_INVALID_HANDLE1);
}

void sd_stubs_fill_table(DAT_PROVIDER *p)
{
    p->cno_create_func = cno_create;
    p->cno_modify_agent_func = cno_modify_agent;
    p->cno_query_func = cno_query;
    p->cno_free_func = cno_free;
    p->cno_wait_func = cno_wait;
    p->cno_fd_create_func = cno_fd_create;
    p->cno_trigger_func = cno_trigger;
    p->cr_query_func = cr_query;
    p->cr_accept_func = cr_accept;
    p->cr_reject_func = cr_reject;
    p->cr_handoff_func = cr_handoff;
    p->evd_modify_cno_func = evd_modify_cno;
    p->evd_enable_func = evd_enable;
    p->evd_disable_func = evd_disable;
    p->evd_wait_func = evd_wait;
    p->evd_resize_func = evd_resize;
    p->evd_post_se_func = evd_post_se;
    p->evd_dequeue_func = evd_dequeue;
    p->evd_set_unwaitable_func = evd_set_unwaitable;
    p->evd_clear_unwaitable_func = evd_clear_unwaitable;
    p->ep_create_func = ep_create;
    p->ep_create_with_srq_func = ep_create_with_srq;
    p->ep_query_func = ep_query;
    p->ep_modify_func = ep_modify;
    p->ep_connect_func = ep_connect;
    p->ep_common_connect_func = ep_common_connect;
    p->ep_dup_connect_func = ep_dup_connect;
    p->ep_disconnect_func = ep_disconnect;
    p->ep_post_send_func = ep_post_send;
    p->ep_post_send_with_invalidate_func = ep_post_send_with_invalidate;
    p->ep_post_recv_func = ep_post_recv;
    p->ep_post_rdma_read_func = ep_post_rdma_read;
    p->ep_post_rdma_read_to_rmr_func = ep_post_rdma_read_to_rmr;
    p->ep_post_rdma_write_func = ep_post_rdma_write;
    p->ep_get_status_func = ep_get_status;
    p->ep_free_func = ep_free;
    p->ep_reset_func = ep_reset;
    p->ep_recv_query_func = ep_recv_query;
    p->ep_set_watermark_func = ep_set_watermark;
    p->lmr_create_func = lmr_create;
    p->lmr_query_func = lmr_query;
    p->lmr_free_func = lmr_free;
    p->lmr_sync_rdma_read_func = lmr_sync_rdma_read;
    p->lmr_sync_rdma_write_func = lmr_sync_rdma_write;
    p->rmr_create_func = rmr_create;
    p->rmr_create_for_ep_func = rmr_create_for_ep;
    p->rmr_query_func = rmr_query;
    p->rmr_bind_func = rmr_bind;
    p->rmr_free_func = rmr_free;
    p->psp_create_func = psp_create;
    p->psp_create_any_func = psp_create_any;
    p->psp_query_func = psp_query;
    p->psp_free_func = psp_free;
    p->rsp_create_func = rsp_create;
    p->rsp_query_func = rsp_query;
    p->rsp_free_func = rsp_free;
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
    p->handle_extendedop_func = handle_extendedop;
}
