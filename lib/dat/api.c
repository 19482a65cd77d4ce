/*
 * Dispatch of every object-level dat_* call to the provider that owns the
 * handle: (*(DAT_PROVIDER **)handle)->slot(handle, ...).
 *
 * A NULL handle gets the OFA subtype for its kind. Calls that take an IA
 * translate the consumer's small integer first and refuse anything else
 * (OFA would dereference a stale or raw value). Other non-NULL handles are
 * the provider's to validate. A provider that leaves a slot empty gets
 * DAT_NOT_IMPLEMENTED instead of a jump to address 0.
 */
#include "lib/dat/dr.h"

#define PROV(h) (*(DAT_PROVIDER *const *)(h))
#define NOT_IMPL DR_ERR(DAT_NOT_IMPLEMENTED, DAT_NO_SUBTYPE)

/* Binds p_ to h's provider table, or returns the error a bad handle or a
 * missing slot gets. */
#define PROV_OR_RETURN(h, sub, slot)                                        \
    const DAT_PROVIDER *p_;                                                 \
    if (!(h))                                                               \
        return DR_ERR(DAT_INVALID_HANDLE, sub);                             \
    p_ = PROV(h);                                                           \
    if (!p_)                                                                \
        return DR_ERR(DAT_INVALID_HANDLE, sub);                             \
    if (!p_->slot)                                                          \
        return NOT_IMPL

#define DISPATCH(h, sub, slot, ...)                                         \
    do {                                                                    \
        PROV_OR_RETURN(h, sub, slot);                                       \
        return p_->slot(h, __VA_ARGS__);                                    \
    } while (0)

#define DISPATCH0(h, sub, slot)                                             \
    do {                                                                    \
        PROV_OR_RETURN(h, sub, slot);                                       \
        return p_->slot(h);                                                 \
    } while (0)

#define IA_DISPATCH(ia, slot, ...)                                          \
    do {                                                                    \
        DAT_IA_HANDLE raw_ = dr_ia_is_small(ia) ? dr_ia_lookup(ia) : NULL;  \
        if (!raw_)                                                          \
            return DR_ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);       \
        if (!PROV(raw_)->slot)                                              \
            return NOT_IMPL;                                                \
        return PROV(raw_)->slot(raw_, __VA_ARGS__);                         \
    } while (0)

#define H_CR  DAT_INVALID_HANDLE_CR
#define H_EVD DAT_INVALID_HANDLE_EVD_REQUEST
#define H_CNO DAT_INVALID_HANDLE_CNO
#define H_EP  DAT_INVALID_HANDLE_EP
#define H_LMR DAT_INVALID_HANDLE_LMR
#define H_RMR DAT_INVALID_HANDLE_RMR
#define H_PZ  DAT_INVALID_HANDLE_PZ
#define H_PSP DAT_INVALID_HANDLE_PSP
#define H_RSP DAT_INVALID_HANDLE_RSP
#define H_CSP DAT_INVALID_HANDLE_CSP
#define H_SRQ DAT_INVALID_HANDLE_SRQ

/* ---------------------------------------------------------------- CR */

DAT_RETURN dat_cr_query(DAT_CR_HANDLE cr, DAT_CR_PARAM_MASK mask, DAT_CR_PARAM *param)
{ DISPATCH(cr, H_CR, cr_query_func, mask, param); }

DAT_RETURN dat_cr_accept(DAT_CR_HANDLE cr, DAT_EP_HANDLE ep, DAT_COUNT size,
                         const DAT_PVOID pdata)
{ DISPATCH(cr, H_CR, cr_accept_func, ep, size, pdata); }

DAT_RETURN dat_cr_reject(DAT_CR_HANDLE cr, DAT_COUNT size, const DAT_PVOID pdata)
{ DISPATCH(cr, H_CR, cr_reject_func, size, pdata); }

DAT_RETURN dat_cr_handoff(DAT_CR_HANDLE cr, DAT_CONN_QUAL qual)
{ DISPATCH(cr, H_CR, cr_handoff_func, qual); }

/* ---------------------------------------------------------------- EVD */

DAT_RETURN dat_evd_create(DAT_IA_HANDLE ia, DAT_COUNT qlen, DAT_CNO_HANDLE cno,
                          DAT_EVD_FLAGS flags, DAT_EVD_HANDLE *evd)
{ IA_DISPATCH(ia, evd_create_func, qlen, cno, flags, evd); }

DAT_RETURN dat_evd_modify_cno(DAT_EVD_HANDLE evd, DAT_CNO_HANDLE cno)
{ DISPATCH(evd, H_EVD, evd_modify_cno_func, cno); }

DAT_RETURN dat_evd_enable(DAT_EVD_HANDLE evd)
{ DISPATCH0(evd, H_EVD, evd_enable_func); }

DAT_RETURN dat_evd_disable(DAT_EVD_HANDLE evd)
{ DISPATCH0(evd, H_EVD, evd_disable_func); }

DAT_RETURN dat_evd_wait(DAT_EVD_HANDLE evd, DAT_TIMEOUT timeout, DAT_COUNT threshold,
                        DAT_EVENT *event, DAT_COUNT *nmore)
{ DISPATCH(evd, H_EVD, evd_wait_func, timeout, threshold, event, nmore); }

DAT_RETURN dat_evd_resize(DAT_EVD_HANDLE evd, DAT_COUNT qlen)
{ DISPATCH(evd, H_EVD, evd_resize_func, qlen); }

DAT_RETURN dat_evd_post_se(DAT_EVD_HANDLE evd, const DAT_EVENT *event)
{ DISPATCH(evd, H_EVD, evd_post_se_func, event); }

DAT_RETURN dat_evd_dequeue(DAT_EVD_HANDLE evd, DAT_EVENT *event)
{ DISPATCH(evd, H_EVD, evd_dequeue_func, event); }

DAT_RETURN dat_evd_query(DAT_EVD_HANDLE evd, DAT_EVD_PARAM_MASK mask, DAT_EVD_PARAM *param)
{ DISPATCH(evd, H_EVD, evd_query_func, mask, param); }

DAT_RETURN dat_evd_free(DAT_EVD_HANDLE evd)
{ DISPATCH0(evd, H_EVD, evd_free_func); }

DAT_RETURN dat_evd_set_unwaitable(DAT_EVD_HANDLE evd)
{ DISPATCH0(evd, H_EVD, evd_set_unwaitable_func); }

DAT_RETURN dat_evd_clear_unwaitable(DAT_EVD_HANDLE evd)
{ DISPATCH0(evd, H_EVD, evd_clear_unwaitable_func); }

/* ---------------------------------------------------------------- CNO */

DAT_RETURN dat_cno_create(DAT_IA_HANDLE ia, DAT_OS_WAIT_PROXY_AGENT agent, DAT_CNO_HANDLE *cno)
{ IA_DISPATCH(ia, cno_create_func, agent, cno); }

DAT_RETURN dat_cno_modify_agent(DAT_CNO_HANDLE cno, DAT_OS_WAIT_PROXY_AGENT agent)
{ DISPATCH(cno, H_CNO, cno_modify_agent_func, agent); }

DAT_RETURN dat_cno_query(DAT_CNO_HANDLE cno, DAT_CNO_PARAM_MASK mask, DAT_CNO_PARAM *param)
{ DISPATCH(cno, H_CNO, cno_query_func, mask, param); }

DAT_RETURN dat_cno_free(DAT_CNO_HANDLE cno)
{ DISPATCH0(cno, H_CNO, cno_free_func); }

DAT_RETURN dat_cno_wait(DAT_CNO_HANDLE cno, DAT_TIMEOUT timeout, DAT_EVD_HANDLE *evd)
{ DISPATCH(cno, H_CNO, cno_wait_func, timeout, evd); }

DAT_RETURN dat_cno_fd_create(DAT_IA_HANDLE ia, DAT_FD *fd, DAT_CNO_HANDLE *cno)
{ IA_DISPATCH(ia, cno_fd_create_func, fd, cno); }

DAT_RETURN dat_cno_trigger(DAT_CNO_HANDLE cno, DAT_EVD_HANDLE *evd)
{ DISPATCH(cno, H_CNO, cno_trigger_func, evd); }

/* ---------------------------------------------------------------- EP */

DAT_RETURN dat_ep_create(DAT_IA_HANDLE ia, DAT_PZ_HANDLE pz, DAT_EVD_HANDLE recv_evd,
                         DAT_EVD_HANDLE req_evd, DAT_EVD_HANDLE conn_evd,
                         const DAT_EP_ATTR *attr, DAT_EP_HANDLE *ep)
{ IA_DISPATCH(ia, ep_create_func, pz, recv_evd, req_evd, conn_evd, attr, ep); }

DAT_RETURN dat_ep_create_with_srq(DAT_IA_HANDLE ia, DAT_PZ_HANDLE pz, DAT_EVD_HANDLE recv_evd,
                                  DAT_EVD_HANDLE req_evd, DAT_EVD_HANDLE conn_evd,
                                  DAT_SRQ_HANDLE srq, const DAT_EP_ATTR *attr,
                                  DAT_EP_HANDLE *ep)
{ IA_DISPATCH(ia, ep_create_with_srq_func, pz, recv_evd, req_evd, conn_evd, srq, attr, ep); }

DAT_RETURN dat_ep_query(DAT_EP_HANDLE ep, DAT_EP_PARAM_MASK mask, DAT_EP_PARAM *param)
{ DISPATCH(ep, H_EP, ep_query_func, mask, param); }

DAT_RETURN dat_ep_modify(DAT_EP_HANDLE ep, DAT_EP_PARAM_MASK mask, const DAT_EP_PARAM *param)
{ DISPATCH(ep, H_EP, ep_modify_func, mask, param); }

DAT_RETURN dat_ep_connect(DAT_EP_HANDLE ep, DAT_IA_ADDRESS_PTR addr, DAT_CONN_QUAL qual,
                          DAT_TIMEOUT timeout, DAT_COUNT size, const DAT_PVOID pdata,
                          DAT_QOS qos, DAT_CONNECT_FLAGS flags)
{ DISPATCH(ep, H_EP, ep_connect_func, addr, qual, timeout, size, pdata, qos, flags); }

DAT_RETURN dat_ep_dup_connect(DAT_EP_HANDLE ep, DAT_EP_HANDLE dup, DAT_TIMEOUT timeout,
                              DAT_COUNT size, const DAT_PVOID pdata, DAT_QOS qos)
{ DISPATCH(ep, H_EP, ep_dup_connect_func, dup, timeout, size, pdata, qos); }

DAT_RETURN dat_ep_common_connect(DAT_EP_HANDLE ep, DAT_IA_ADDRESS_PTR addr,
                                 DAT_TIMEOUT timeout, DAT_COUNT size, const DAT_PVOID pdata)
{ DISPATCH(ep, H_EP, ep_common_connect_func, addr, timeout, size, pdata); }

DAT_RETURN dat_ep_disconnect(DAT_EP_HANDLE ep, DAT_CLOSE_FLAGS flags)
{ DISPATCH(ep, H_EP, ep_disconnect_func, flags); }

DAT_RETURN dat_ep_post_send(DAT_EP_HANDLE ep, DAT_COUNT n, DAT_LMR_TRIPLET *iov,
                            DAT_DTO_COOKIE cookie, DAT_COMPLETION_FLAGS flags)
{ DISPATCH(ep, H_EP, ep_post_send_func, n, iov, cookie, flags); }

DAT_RETURN dat_ep_post_send_with_invalidate(DAT_EP_HANDLE ep, DAT_COUNT n, DAT_LMR_TRIPLET *iov,
                                            DAT_DTO_COOKIE cookie, DAT_COMPLETION_FLAGS flags,
                                            DAT_BOOLEAN invalidate, DAT_RMR_CONTEXT rmr)
{ DISPATCH(ep, H_EP, ep_post_send_with_invalidate_func, n, iov, cookie, flags, invalidate, rmr); }

DAT_RETURN dat_ep_post_recv(DAT_EP_HANDLE ep, DAT_COUNT n, DAT_LMR_TRIPLET *iov,
                            DAT_DTO_COOKIE cookie, DAT_COMPLETION_FLAGS flags)
{ DISPATCH(ep, H_EP, ep_post_recv_func, n, iov, cookie, flags); }

DAT_RETURN dat_ep_post_rdma_read(DAT_EP_HANDLE ep, DAT_COUNT n, DAT_LMR_TRIPLET *iov,
                                 DAT_DTO_COOKIE cookie, const DAT_RMR_TRIPLET *remote,
                                 DAT_COMPLETION_FLAGS flags)
{ DISPATCH(ep, H_EP, ep_post_rdma_read_func, n, iov, cookie, remote, flags); }

DAT_RETURN dat_ep_post_rdma_read_to_rmr(DAT_EP_HANDLE ep, const DAT_RMR_TRIPLET *local,
                                        DAT_DTO_COOKIE cookie, const DAT_RMR_TRIPLET *remote,
                                        DAT_COMPLETION_FLAGS flags)
{ DISPATCH(ep, H_EP, ep_post_rdma_read_to_rmr_func, local, cookie, remote, flags); }

DAT_RETURN dat_ep_post_rdma_write(DAT_EP_HANDLE ep, DAT_COUNT n, DAT_LMR_TRIPLET *iov,
                                  DAT_DTO_COOKIE cookie, const DAT_RMR_TRIPLET *remote,
                                  DAT_COMPLETION_FLAGS flags)
{ DISPATCH(ep, H_EP, ep_post_rdma_write_func, n, iov, cookie, remote, flags); }

DAT_RETURN dat_ep_get_status(DAT_EP_HANDLE ep, DAT_EP_STATE *state, DAT_BOOLEAN *in_idle,
                             DAT_BOOLEAN *out_idle)
{ DISPATCH(ep, H_EP, ep_get_status_func, state, in_idle, out_idle); }

DAT_RETURN dat_ep_free(DAT_EP_HANDLE ep)
{ DISPATCH0(ep, H_EP, ep_free_func); }

DAT_RETURN dat_ep_reset(DAT_EP_HANDLE ep)
{ DISPATCH0(ep, H_EP, ep_reset_func); }

DAT_RETURN dat_ep_recv_query(DAT_EP_HANDLE ep, DAT_COUNT *nbufs, DAT_COUNT *bufsize)
{ DISPATCH(ep, H_EP, ep_recv_query_func, nbufs, bufsize); }

DAT_RETURN dat_ep_set_watermark(DAT_EP_HANDLE ep, DAT_COUNT soft, DAT_COUNT hard)
{ DISPATCH(ep, H_EP, ep_set_watermark_func, soft, hard); }

/* ---------------------------------------------------------------- LMR / RMR */

DAT_RETURN dat_lmr_create(DAT_IA_HANDLE ia, DAT_MEM_TYPE type, DAT_REGION_DESCRIPTION region,
                          DAT_VLEN length, DAT_PZ_HANDLE pz, DAT_MEM_PRIV_FLAGS priv,
                          DAT_VA_TYPE va_type, DAT_LMR_HANDLE *lmr, DAT_LMR_CONTEXT *lctx,
                          DAT_RMR_CONTEXT *rctx, DAT_VLEN *reg_size, DAT_VADDR *reg_addr)
{
    IA_DISPATCH(ia, lmr_create_func, type, region, length, pz, priv, va_type, lmr, lctx,
                rctx, reg_size, reg_addr);
}

DAT_RETURN dat_lmr_query(DAT_LMR_HANDLE lmr, DAT_LMR_PARAM_MASK mask, DAT_LMR_PARAM *param)
{ DISPATCH(lmr, H_LMR, lmr_query_func, mask, param); }

DAT_RETURN dat_lmr_free(DAT_LMR_HANDLE lmr)
{ DISPATCH0(lmr, H_LMR, lmr_free_func); }

DAT_RETURN dat_lmr_sync_rdma_read(DAT_IA_HANDLE ia, const DAT_LMR_TRIPLET *iov, DAT_VLEN n)
{ IA_DISPATCH(ia, lmr_sync_rdma_read_func, iov, n); }

DAT_RETURN dat_lmr_sync_rdma_write(DAT_IA_HANDLE ia, const DAT_LMR_TRIPLET *iov, DAT_VLEN n)
{ IA_DISPATCH(ia, lmr_sync_rdma_write_func, iov, n); }

DAT_RETURN dat_rmr_create(DAT_PZ_HANDLE pz, DAT_RMR_HANDLE *rmr)
{ DISPATCH(pz, H_PZ, rmr_create_func, rmr); }

DAT_RETURN dat_rmr_create_for_ep(DAT_PZ_HANDLE pz, DAT_RMR_HANDLE *rmr)
{ DISPATCH(pz, H_PZ, rmr_create_for_ep_func, rmr); }

DAT_RETURN dat_rmr_query(DAT_RMR_HANDLE rmr, DAT_RMR_PARAM_MASK mask, DAT_RMR_PARAM *param)
{ DISPATCH(rmr, H_RMR, rmr_query_func, mask, param); }

DAT_RETURN dat_rmr_bind(DAT_RMR_HANDLE rmr, DAT_LMR_HANDLE lmr, const DAT_LMR_TRIPLET *iov,
                        DAT_MEM_PRIV_FLAGS priv, DAT_VA_TYPE va_type, DAT_EP_HANDLE ep,
                        DAT_RMR_COOKIE cookie, DAT_COMPLETION_FLAGS flags,
                        DAT_RMR_CONTEXT *ctx)
{ DISPATCH(rmr, H_RMR, rmr_bind_func, lmr, iov, priv, va_type, ep, cookie, flags, ctx); }

DAT_RETURN dat_rmr_free(DAT_RMR_HANDLE rmr)
{ DISPATCH0(rmr, H_RMR, rmr_free_func); }

/* ---------------------------------------------------------------- service points */

DAT_RETURN dat_psp_create(DAT_IA_HANDLE ia, DAT_CONN_QUAL qual, DAT_EVD_HANDLE evd,
                          DAT_PSP_FLAGS flags, DAT_PSP_HANDLE *psp)
{ IA_DISPATCH(ia, psp_create_func, qual, evd, flags, psp); }

DAT_RETURN dat_psp_create_any(DAT_IA_HANDLE ia, DAT_CONN_QUAL *qual, DAT_EVD_HANDLE evd,
                              DAT_PSP_FLAGS flags, DAT_PSP_HANDLE *psp)
{ IA_DISPATCH(ia, psp_create_any_func, qual, evd, flags, psp); }

DAT_RETURN dat_psp_query(DAT_PSP_HANDLE psp, DAT_PSP_PARAM_MASK mask, DAT_PSP_PARAM *param)
{ DISPATCH(psp, H_PSP, psp_query_func, mask, param); }

DAT_RETURN dat_psp_free(DAT_PSP_HANDLE psp)
{ DISPATCH0(psp, H_PSP, psp_free_func); }

DAT_RETURN dat_rsp_create(DAT_IA_HANDLE ia, DAT_CONN_QUAL qual, DAT_EP_HANDLE ep,
                          DAT_EVD_HANDLE evd, DAT_RSP_HANDLE *rsp)
{ IA_DISPATCH(ia, rsp_create_func, qual, ep, evd, rsp); }

DAT_RETURN dat_rsp_query(DAT_RSP_HANDLE rsp, DAT_RSP_PARAM_MASK mask, DAT_RSP_PARAM *param)
{ DISPATCH(rsp, H_RSP, rsp_query_func, mask, param); }

DAT_RETURN dat_rsp_free(DAT_RSP_HANDLE rsp)
{ DISPATCH0(rsp, H_RSP, rsp_free_func); }

DAT_RETURN dat_csp_create(DAT_IA_HANDLE ia, DAT_COMM *comm, DAT_IA_ADDRESS_PTR addr,
                          DAT_EVD_HANDLE evd, DAT_CSP_HANDLE *csp)
{ IA_DISPATCH(ia, csp_create_func, comm, addr, evd, csp); }

DAT_RETURN dat_csp_query(DAT_CSP_HANDLE csp, DAT_CSP_PARAM_MASK mask, DAT_CSP_PARAM *param)
{ DISPATCH(csp, H_CSP, csp_query_func, mask, param); }

DAT_RETURN dat_csp_free(DAT_CSP_HANDLE csp)
{ DISPATCH0(csp, H_CSP, csp_free_func); }

/* ---------------------------------------------------------------- PZ / SRQ */

DAT_RETURN dat_pz_create(DAT_IA_HANDLE ia, DAT_PZ_HANDLE *pz)
{ IA_DISPATCH(ia, pz_create_func, pz); }

DAT_RETURN dat_pz_query(DAT_PZ_HANDLE pz, DAT_PZ_PARAM_MASK mask, DAT_PZ_PARAM *param)
{ DISPATCH(pz, H_PZ, pz_query_func, mask, param); }

DAT_RETURN dat_pz_free(DAT_PZ_HANDLE pz)
{ DISPATCH0(pz, H_PZ, pz_free_func); }

DAT_RETURN dat_srq_create(DAT_IA_HANDLE ia, DAT_PZ_HANDLE pz, DAT_SRQ_ATTR *attr,
                          DAT_SRQ_HANDLE *srq)
{ IA_DISPATCH(ia, srq_create_func, pz, attr, srq); }

DAT_RETURN dat_srq_free(DAT_SRQ_HANDLE srq)
{ DISPATCH0(srq, H_SRQ, srq_free_func); }

DAT_RETURN dat_srq_post_recv(DAT_SRQ_HANDLE srq, DAT_COUNT n, DAT_LMR_TRIPLET *iov,
                             DAT_DTO_COOKIE cookie)
{ DISPATCH(srq, H_SRQ, srq_post_recv_func, n, iov, cookie); }

DAT_RETURN dat_srq_query(DAT_SRQ_HANDLE srq, DAT_SRQ_PARAM_MASK mask, DAT_SRQ_PARAM *param)
{ DISPATCH(srq, H_SRQ, srq_query_func, mask, param); }

DAT_RETURN dat_srq_resize(DAT_SRQ_HANDLE srq, DAT_COUNT qlen)
{ DISPATCH(srq, H_SRQ, srq_resize_func, qlen); }

DAT_RETURN dat_srq_set_lw(DAT_SRQ_HANDLE srq, DAT_COUNT lw)
{ DISPATCH(srq, H_SRQ, srq_set_lw_func, lw); }
