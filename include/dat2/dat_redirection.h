/*
 * softdat — DAT 2.0 public headers: provider dispatch, calls common to the
 * user and kernel APIs.
 *
 * Every DAT object handle points at an object whose first member is the
 * DAT_PROVIDER pointer of the provider that made it; the registry forwards
 * each dat_* call through that table. The typedefs below are the table's
 * slot types, the DAT_* macros perform one such dispatch. Provider-side
 * only: included through <dat2/dat_registry.h>.
 */
#ifndef SOFTDAT_DAT2_REDIRECTION_H
#define SOFTDAT_DAT2_REDIRECTION_H

#include <stdarg.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dat_provider DAT_PROVIDER;

/* The provider table of any DAT handle. */
#define DAT_HANDLE_TO_PROVIDER(handle) (*(DAT_PROVIDER **)(handle))

/* ------------------------------------------------------------ dispatch */

#define DAT_IA_QUERY(ia, evd, ia_mask, ia_attr, prov_mask, prov_attr) \
    (*DAT_HANDLE_TO_PROVIDER(ia)->ia_query_func)((ia), (evd), (ia_mask), \
        (ia_attr), (prov_mask), (prov_attr))

#define DAT_SET_CONSUMER_CONTEXT(h, ctx) \
    (*DAT_HANDLE_TO_PROVIDER(h)->set_consumer_context_func)((h), (ctx))

#define DAT_GET_CONSUMER_CONTEXT(h, ctx) \
    (*DAT_HANDLE_TO_PROVIDER(h)->get_consumer_context_func)((h), (ctx))

#define DAT_GET_HANDLE_TYPE(h, type) \
    (*DAT_HANDLE_TO_PROVIDER(h)->get_handle_type_func)((h), (type))

#define DAT_CR_QUERY(cr, mask, param) \
    (*DAT_HANDLE_TO_PROVIDER(cr)->cr_query_func)((cr), (mask), (param))

#define DAT_CR_ACCEPT(cr, ep, len, pdata) \
    (*DAT_HANDLE_TO_PROVIDER(cr)->cr_accept_func)((cr), (ep), (len), (pdata))

#define DAT_CR_REJECT(cr, len, pdata) \
    (*DAT_HANDLE_TO_PROVIDER(cr)->cr_reject_func)((cr), (len), (pdata))

#define DAT_CR_HANDOFF(cr, qual) \
    (*DAT_HANDLE_TO_PROVIDER(cr)->cr_handoff_func)((cr), (qual))

#define DAT_EVD_QUERY(evd, mask, param) \
    (*DAT_HANDLE_TO_PROVIDER(evd)->evd_query_func)((evd), (mask), (param))

#define DAT_EVD_RESIZE(evd, qlen) \
    (*DAT_HANDLE_TO_PROVIDER(evd)->evd_resize_func)((evd), (qlen))

#define DAT_EVD_POST_SE(evd, ev) \
    (*DAT_HANDLE_TO_PROVIDER(evd)->evd_post_se_func)((evd), (ev))

#define DAT_EVD_DEQUEUE(evd, ev) \
    (*DAT_HANDLE_TO_PROVIDER(evd)->evd_dequeue_func)((evd), (ev))

#define DAT_EVD_FREE(evd) \
    (*DAT_HANDLE_TO_PROVIDER(evd)->evd_free_func)((evd))

#define DAT_EP_CREATE(ia, pz, recv_evd, req_evd, conn_evd, attr, ep) \
    (*DAT_HANDLE_TO_PROVIDER(ia)->ep_create_func)((ia), (pz), (recv_evd), \
        (req_evd), (conn_evd), (attr), (ep))

#define DAT_EP_CREATE_WITH_SRQ(ia, pz, recv_evd, req_evd, conn_evd, srq, attr, ep) \
    (*DAT_HANDLE_TO_PROVIDER(ia)->ep_create_with_srq_func)((ia), (pz), \
        (recv_evd), (req_evd), (conn_evd), (srq), (attr), (ep))

#define DAT_EP_QUERY(ep, mask, param) \
    (*DAT_HANDLE_TO_PROVIDER(ep)->ep_query_func)((ep), (mask), (param))

#define DAT_EP_MODIFY(ep, mask, param) \
    (*DAT_HANDLE_TO_PROVIDER(ep)->ep_modify_func)((ep), (mask), (param))

#define DAT_EP_CONNECT(ep, addr, qual, tmo, len, pdata, qos, flags) \
    (*DAT_HANDLE_TO_PROVIDER(ep)->ep_connect_func)((ep), (addr), (qual), \
        (tmo), (len), (pdata), (qos), (flags))

#define DAT_EP_COMMON_CONNECT(ep, addr, tmo, len, pdata) \
    (*DAT_HANDLE_TO_PROVIDER(ep)->ep_common_connect_func)((ep), (addr), \
        (tmo), (len), (pdata))

#define DAT_EP_DUP_CONNECT(ep, dup_ep, tmo, len, pdata, qos) \
    (*DAT_HANDLE_TO_PROVIDER(ep)->ep_dup_connect_func)((ep), (dup_ep), \
        (tmo), (len), (pdata), (qos))

#define DAT_EP_DISCONNECT(ep, flags) \
    (*DAT_HANDLE_TO_PROVIDER(ep)->ep_disconnect_func)((ep), (flags))

#define DAT_EP_POST_SEND(ep, nseg, iov, cookie, flags) \
    (*DAT_HANDLE_TO_PROVIDER(ep)->ep_post_send_func)((ep), (nseg), (iov), \
        (cookie), (flags))

#define DAT_EP_POST_SEND_WITH_INVALIDATE(ep, nseg, iov, cookie, flags, inv, rmr_ctx) \
    (*DAT_HANDLE_TO_PROVIDER(ep)->ep_post_send_with_invalidate_func)((ep), \
        (nseg), (iov), (cookie), (flags), (inv), (rmr_ctx))

#define DAT_EP_POST_RECV(ep, nseg, iov, cookie, flags) \
    (*DAT_HANDLE_TO_PROVIDER(ep)->ep_post_recv_func)((ep), (nseg), (iov), \
        (cookie), (flags))

#define DAT_EP_POST_RDMA_READ(ep, nseg, iov, cookie, remote, flags) \
    (*DAT_HANDLE_TO_PROVIDER(ep)->ep_post_rdma_read_func)((ep), (nseg), \
        (iov), (cookie), (remote), (flags))

#define DAT_EP_POST_RDMA_READ_TO_RMR(ep, local, cookie, remote, flags) \
    (*DAT_HANDLE_TO_PROVIDER(ep)->ep_post_rdma_read_to_rmr_func)((ep), \
        (local), (cookie), (remote), (flags))

#define DAT_EP_POST_RDMA_WRITE(ep, nseg, iov, cookie, remote, flags) \
    (*DAT_HANDLE_TO_PROVIDER(ep)->ep_post_rdma_write_func)((ep), (nseg), \
        (iov), (cookie), (remote), (flags))

#define DAT_EP_GET_STATUS(ep, state, recv_idle, req_idle) \
    (*DAT_HANDLE_TO_PROVIDER(ep)->ep_get_status_func)((ep), (state), \
        (recv_idle), (req_idle))

#define DAT_EP_FREE(ep) \
    (*DAT_HANDLE_TO_PROVIDER(ep)->ep_free_func)((ep))

#define DAT_EP_RESET(ep) \
    (*DAT_HANDLE_TO_PROVIDER(ep)->ep_reset_func)((ep))

#define DAT_EP_RECV_QUERY(ep, nbufs, span) \
    (*DAT_HANDLE_TO_PROVIDER(ep)->ep_recv_query_func)((ep), (nbufs), (span))

#define DAT_EP_SET_WATERMARK(ep, soft_hw, hard_hw) \
    (*DAT_HANDLE_TO_PROVIDER(ep)->ep_set_watermark_func)((ep), (soft_hw), \
        (hard_hw))

#define DAT_LMR_QUERY(lmr, mask, param) \
    (*DAT_HANDLE_TO_PROVIDER(lmr)->lmr_query_func)((lmr), (mask), (param))

#define DAT_LMR_FREE(lmr) \
    (*DAT_HANDLE_TO_PROVIDER(lmr)->lmr_free_func)((lmr))

#define DAT_LMR_SYNC_RDMA_READ(ia, segs, nseg) \
    (*DAT_HANDLE_TO_PROVIDER(ia)->lmr_sync_rdma_read_func)((ia), (segs), (nseg))

#define DAT_LMR_SYNC_RDMA_WRITE(ia, segs, nseg) \
    (*DAT_HANDLE_TO_PROVIDER(ia)->lmr_sync_rdma_write_func)((ia), (segs), (nseg))

#define DAT_RMR_CREATE(pz, rmr) \
    (*DAT_HANDLE_TO_PROVIDER(pz)->rmr_create_func)((pz), (rmr))

#define DAT_RMR_CREATE_FOR_EP(pz, rmr) \
    (*DAT_HANDLE_TO_PROVIDER(pz)->rmr_create_for_ep_func)((pz), (rmr))

#define DAT_RMR_QUERY(rmr, mask, param) \
    (*DAT_HANDLE_TO_PROVIDER(rmr)->rmr_query_func)((rmr), (mask), (param))

#define DAT_RMR_BIND(rmr, lmr, triplet, priv, va_type, ep, cookie, flags, rmr_ctx) \
    (*DAT_HANDLE_TO_PROVIDER(rmr)->rmr_bind_func)((rmr), (lmr), (triplet), \
        (priv), (va_type), (ep), (cookie), (flags), (rmr_ctx))

#define DAT_RMR_FREE(rmr) \
    (*DAT_HANDLE_TO_PROVIDER(rmr)->rmr_free_func)((rmr))

#define DAT_PSP_CREATE(ia, qual, evd, flags, psp) \
    (*DAT_HANDLE_TO_PROVIDER(ia)->psp_create_func)((ia), (qual), (evd), \
        (flags), (psp))

#define DAT_PSP_CREATE_ANY(ia, qual, evd, flags, psp) \
    (*DAT_HANDLE_TO_PROVIDER(ia)->psp_create_any_func)((ia), (qual), (evd), \
        (flags), (psp))

#define DAT_PSP_QUERY(psp, mask, param) \
    (*DAT_HANDLE_TO_PROVIDER(psp)->psp_query_func)((psp), (mask), (param))

#define DAT_PSP_FREE(psp) \
    (*DAT_HANDLE_TO_PROVIDER(psp)->psp_free_func)((psp))

#define DAT_RSP_CREATE(ia, qual, ep, evd, rsp) \
    (*DAT_HANDLE_TO_PROVIDER(ia)->rsp_create_func)((ia), (qual), (ep), \
        (evd), (rsp))

#define DAT_RSP_QUERY(rsp, mask, param) \
    (*DAT_HANDLE_TO_PROVIDER(rsp)->rsp_query_func)((rsp), (mask), (param))

#define DAT_RSP_FREE(rsp) \
    (*DAT_HANDLE_TO_PROVIDER(rsp)->rsp_free_func)((rsp))

#define DAT_CSP_CREATE(ia, comm, addr, evd, csp) \
    (*DAT_HANDLE_TO_PROVIDER(ia)->csp_create_func)((ia), (comm), (addr), \
        (evd), (csp))

#define DAT_CSP_QUERY(csp, mask, param) \
    (*DAT_HANDLE_TO_PROVIDER(csp)->csp_query_func)((csp), (mask), (param))

#define DAT_CSP_FREE(csp) \
    (*DAT_HANDLE_TO_PROVIDER(csp)->csp_free_func)((csp))

#define DAT_PZ_CREATE(ia, pz) \
    (*DAT_HANDLE_TO_PROVIDER(ia)->pz_create_func)((ia), (pz))

#define DAT_PZ_QUERY(pz, mask, param) \
    (*DAT_HANDLE_TO_PROVIDER(pz)->pz_query_func)((pz), (mask), (param))

#define DAT_PZ_FREE(pz) \
    (*DAT_HANDLE_TO_PROVIDER(pz)->pz_free_func)((pz))

#define DAT_SRQ_CREATE(ia, pz, attr, srq) \
    (*DAT_HANDLE_TO_PROVIDER(ia)->srq_create_func)((ia), (pz), (attr), (srq))

#define DAT_SRQ_SET_LW(srq, lw) \
    (*DAT_HANDLE_TO_PROVIDER(srq)->srq_set_lw_func)((srq), (lw))

#define DAT_SRQ_FREE(srq) \
    (*DAT_HANDLE_TO_PROVIDER(srq)->srq_free_func)((srq))

#define DAT_SRQ_QUERY(srq, mask, param) \
    (*DAT_HANDLE_TO_PROVIDER(srq)->srq_query_func)((srq), (mask), (param))

#define DAT_SRQ_RESIZE(srq, qlen) \
    (*DAT_HANDLE_TO_PROVIDER(srq)->srq_resize_func)((srq), (qlen))

#define DAT_SRQ_POST_RECV(srq, nseg, iov, cookie) \
    (*DAT_HANDLE_TO_PROVIDER(srq)->srq_post_recv_func)((srq), (nseg), \
        (iov), (cookie))

#define DAT_IA_HA_RELATED(ia, name, answer) \
    (*DAT_HANDLE_TO_PROVIDER(ia)->ia_ha_related_func)((ia), (name), (answer))

#define DAT_HANDLE_EXTENDEDOP(h, op, args) \
    (*DAT_HANDLE_TO_PROVIDER(h)->handle_extendedop_func)((h), (op), (args))

/* ------------------------------------------------------------ slot types */

/* Slot 2 omits the version and thread-safety arguments of dat_ia_openv():
 * the registry consumes them when it selects the provider. */
typedef DAT_RETURN (DAT_API *DAT_IA_OPEN_FUNC)(
    IN const DAT_NAME_PTR, IN DAT_COUNT, INOUT DAT_EVD_HANDLE *,
    OUT DAT_IA_HANDLE *);

typedef DAT_RETURN (DAT_API *DAT_IA_OPENV_FUNC)(
    IN const DAT_NAME_PTR, IN DAT_COUNT, INOUT DAT_EVD_HANDLE *,
    OUT DAT_IA_HANDLE *, IN DAT_UINT32, IN DAT_UINT32, IN DAT_BOOLEAN);

typedef DAT_RETURN (DAT_API *DAT_IA_CLOSE_FUNC)(
    IN DAT_IA_HANDLE, IN DAT_CLOSE_FLAGS);

typedef DAT_RETURN (DAT_API *DAT_IA_QUERY_FUNC)(
    IN DAT_IA_HANDLE, OUT DAT_EVD_HANDLE *, IN DAT_IA_ATTR_MASK,
    OUT DAT_IA_ATTR *, IN DAT_PROVIDER_ATTR_MASK, OUT DAT_PROVIDER_ATTR *);

typedef DAT_RETURN (DAT_API *DAT_SET_CONSUMER_CONTEXT_FUNC)(
    IN DAT_HANDLE, IN DAT_CONTEXT);

typedef DAT_RETURN (DAT_API *DAT_GET_CONSUMER_CONTEXT_FUNC)(
    IN DAT_HANDLE, OUT DAT_CONTEXT *);

typedef DAT_RETURN (DAT_API *DAT_GET_HANDLE_TYPE_FUNC)(
    IN DAT_HANDLE, OUT DAT_HANDLE_TYPE *);

typedef DAT_RETURN (DAT_API *DAT_CR_QUERY_FUNC)(
    IN DAT_CR_HANDLE, IN DAT_CR_PARAM_MASK, OUT DAT_CR_PARAM *);

typedef DAT_RETURN (DAT_API *DAT_CR_ACCEPT_FUNC)(
    IN DAT_CR_HANDLE, IN DAT_EP_HANDLE, IN DAT_COUNT, IN const DAT_PVOID);

typedef DAT_RETURN (DAT_API *DAT_CR_REJECT_FUNC)(
    IN DAT_CR_HANDLE, IN DAT_COUNT, IN const DAT_PVOID);

typedef DAT_RETURN (DAT_API *DAT_CR_HANDOFF_FUNC)(
    IN DAT_CR_HANDLE, IN DAT_CONN_QUAL);

typedef DAT_RETURN (DAT_API *DAT_EVD_RESIZE_FUNC)(
    IN DAT_EVD_HANDLE, IN DAT_COUNT);

typedef DAT_RETURN (DAT_API *DAT_EVD_POST_SE_FUNC)(
    IN DAT_EVD_HANDLE, IN const DAT_EVENT *);

typedef DAT_RETURN (DAT_API *DAT_EVD_DEQUEUE_FUNC)(
    IN DAT_EVD_HANDLE, OUT DAT_EVENT *);

typedef DAT_RETURN (DAT_API *DAT_EVD_FREE_FUNC)(
    IN DAT_EVD_HANDLE);

typedef DAT_RETURN (DAT_API *DAT_EVD_QUERY_FUNC)(
    IN DAT_EVD_HANDLE, IN DAT_EVD_PARAM_MASK, OUT DAT_EVD_PARAM *);

typedef DAT_RETURN (DAT_API *DAT_EP_CREATE_FUNC)(
    IN DAT_IA_HANDLE, IN DAT_PZ_HANDLE, IN DAT_EVD_HANDLE,
    IN DAT_EVD_HANDLE, IN DAT_EVD_HANDLE, IN const DAT_EP_ATTR *,
    OUT DAT_EP_HANDLE *);

typedef DAT_RETURN (DAT_API *DAT_EP_CREATE_WITH_SRQ_FUNC)(
    IN DAT_IA_HANDLE, IN DAT_PZ_HANDLE, IN DAT_EVD_HANDLE,
    IN DAT_EVD_HANDLE, IN DAT_EVD_HANDLE, IN DAT_SRQ_HANDLE,
    IN const DAT_EP_ATTR *, OUT DAT_EP_HANDLE *);

typedef DAT_RETURN (DAT_API *DAT_EP_QUERY_FUNC)(
    IN DAT_EP_HANDLE, IN DAT_EP_PARAM_MASK, OUT DAT_EP_PARAM *);

typedef DAT_RETURN (DAT_API *DAT_EP_MODIFY_FUNC)(
    IN DAT_EP_HANDLE, IN DAT_EP_PARAM_MASK, IN const DAT_EP_PARAM *);

typedef DAT_RETURN (DAT_API *DAT_EP_CONNECT_FUNC)(
    IN DAT_EP_HANDLE, IN DAT_IA_ADDRESS_PTR, IN DAT_CONN_QUAL,
    IN DAT_TIMEOUT, IN DAT_COUNT, IN const DAT_PVOID, IN DAT_QOS,
    IN DAT_CONNECT_FLAGS);

typedef DAT_RETURN (DAT_API *DAT_EP_COMMON_CONNECT_FUNC)(
    IN DAT_EP_HANDLE, IN DAT_IA_ADDRESS_PTR, IN DAT_TIMEOUT,
    IN DAT_COUNT, IN const DAT_PVOID);

typedef DAT_RETURN (DAT_API *DAT_EP_DUP_CONNECT_FUNC)(
    IN DAT_EP_HANDLE, IN DAT_EP_HANDLE, IN DAT_TIMEOUT, IN DAT_COUNT,
    IN const DAT_PVOID, IN DAT_QOS);

typedef DAT_RETURN (DAT_API *DAT_EP_DISCONNECT_FUNC)(
    IN DAT_EP_HANDLE, IN DAT_CLOSE_FLAGS);

typedef DAT_RETURN (DAT_API *DAT_EP_POST_SEND_FUNC)(
    IN DAT_EP_HANDLE, IN DAT_COUNT, IN DAT_LMR_TRIPLET *,
    IN DAT_DTO_COOKIE, IN DAT_COMPLETION_FLAGS);

typedef DAT_RETURN (DAT_API *DAT_EP_POST_SEND_WITH_INVALIDATE_FUNC)(
    IN DAT_EP_HANDLE, IN DAT_COUNT, IN DAT_LMR_TRIPLET *,
    IN DAT_DTO_COOKIE, IN DAT_COMPLETION_FLAGS, IN DAT_BOOLEAN,
    IN DAT_RMR_CONTEXT);

typedef DAT_RETURN (DAT_API *DAT_EP_POST_RECV_FUNC)(
    IN DAT_EP_HANDLE, IN DAT_COUNT, IN DAT_LMR_TRIPLET *,
    IN DAT_DTO_COOKIE, IN DAT_COMPLETION_FLAGS);

typedef DAT_RETURN (DAT_API *DAT_EP_POST_RDMA_READ_FUNC)(
    IN DAT_EP_HANDLE, IN DAT_COUNT, IN DAT_LMR_TRIPLET *,
    IN DAT_DTO_COOKIE, IN const DAT_RMR_TRIPLET *, IN DAT_COMPLETION_FLAGS);

typedef DAT_RETURN (DAT_API *DAT_EP_POST_RDMA_READ_TO_RMR_FUNC)(
    IN DAT_EP_HANDLE, IN const DAT_RMR_TRIPLET *, IN DAT_DTO_COOKIE,
    IN const DAT_RMR_TRIPLET *, IN DAT_COMPLETION_FLAGS);

typedef DAT_RETURN (DAT_API *DAT_EP_POST_RDMA_WRITE_FUNC)(
    IN DAT_EP_HANDLE, IN DAT_COUNT, IN DAT_LMR_TRIPLET *,
    IN DAT_DTO_COOKIE, IN const DAT_RMR_TRIPLET *, IN DAT_COMPLETION_FLAGS);

typedef DAT_RETURN (DAT_API *DAT_EP_GET_STATUS_FUNC)(
    IN DAT_EP_HANDLE, OUT DAT_EP_STATE *, OUT DAT_BOOLEAN *,
    OUT DAT_BOOLEAN *);

typedef DAT_RETURN (DAT_API *DAT_EP_FREE_FUNC)(
    IN DAT_EP_HANDLE);

typedef DAT_RETURN (DAT_API *DAT_EP_RESET_FUNC)(
    IN DAT_EP_HANDLE);

typedef DAT_RETURN (DAT_API *DAT_EP_RECV_QUERY_FUNC)(
    IN DAT_EP_HANDLE, OUT DAT_COUNT *, OUT DAT_COUNT *);

typedef DAT_RETURN (DAT_API *DAT_EP_SET_WATERMARK_FUNC)(
    IN DAT_EP_HANDLE, IN DAT_COUNT, IN DAT_COUNT);

typedef DAT_RETURN (DAT_API *DAT_LMR_FREE_FUNC)(
    IN DAT_LMR_HANDLE);

typedef DAT_RETURN (DAT_API *DAT_LMR_SYNC_RDMA_READ_FUNC)(
    IN DAT_IA_HANDLE, IN const DAT_LMR_TRIPLET *, IN DAT_VLEN);

typedef DAT_RETURN (DAT_API *DAT_LMR_SYNC_RDMA_WRITE_FUNC)(
    IN DAT_IA_HANDLE, IN const DAT_LMR_TRIPLET *, IN DAT_VLEN);

typedef DAT_RETURN (DAT_API *DAT_RMR_CREATE_FUNC)(
    IN DAT_PZ_HANDLE, OUT DAT_RMR_HANDLE *);

typedef DAT_RETURN (DAT_API *DAT_RMR_CREATE_FOR_EP_FUNC)(
    IN DAT_PZ_HANDLE, OUT DAT_RMR_HANDLE *);

typedef DAT_RETURN (DAT_API *DAT_RMR_QUERY_FUNC)(
    IN DAT_RMR_HANDLE, IN DAT_RMR_PARAM_MASK, OUT DAT_RMR_PARAM *);

typedef DAT_RETURN (DAT_API *DAT_RMR_BIND_FUNC)(
    IN DAT_RMR_HANDLE, IN DAT_LMR_HANDLE, IN const DAT_LMR_TRIPLET *,
    IN DAT_MEM_PRIV_FLAGS, IN DAT_VA_TYPE, IN DAT_EP_HANDLE,
    IN DAT_RMR_COOKIE, IN DAT_COMPLETION_FLAGS, OUT DAT_RMR_CONTEXT *);

typedef DAT_RETURN (DAT_API *DAT_RMR_FREE_FUNC)(
    IN DAT_RMR_HANDLE);

typedef DAT_RETURN (DAT_API *DAT_PSP_CREATE_FUNC)(
    IN DAT_IA_HANDLE, IN DAT_CONN_QUAL, IN DAT_EVD_HANDLE,
    IN DAT_PSP_FLAGS, OUT DAT_PSP_HANDLE *);

typedef DAT_RETURN (DAT_API *DAT_PSP_CREATE_ANY_FUNC)(
    IN DAT_IA_HANDLE, OUT DAT_CONN_QUAL *, IN DAT_EVD_HANDLE,
    IN DAT_PSP_FLAGS, OUT DAT_PSP_HANDLE *);

typedef DAT_RETURN (DAT_API *DAT_PSP_QUERY_FUNC)(
    IN DAT_PSP_HANDLE, IN DAT_PSP_PARAM_MASK, OUT DAT_PSP_PARAM *);

typedef DAT_RETURN (DAT_API *DAT_PSP_FREE_FUNC)(
    IN DAT_PSP_HANDLE);

typedef DAT_RETURN (DAT_API *DAT_RSP_CREATE_FUNC)(
    IN DAT_IA_HANDLE, IN DAT_CONN_QUAL, IN DAT_EP_HANDLE,
    IN DAT_EVD_HANDLE, OUT DAT_RSP_HANDLE *);

typedef DAT_RETURN (DAT_API *DAT_RSP_QUERY_FUNC)(
    IN DAT_RSP_HANDLE, IN DAT_RSP_PARAM_MASK, OUT DAT_RSP_PARAM *);

typedef DAT_RETURN (DAT_API *DAT_RSP_FREE_FUNC)(
    IN DAT_RSP_HANDLE);

typedef DAT_RETURN (DAT_API *DAT_CSP_CREATE_FUNC)(
    IN DAT_IA_HANDLE, IN DAT_COMM *, IN DAT_IA_ADDRESS_PTR,
    IN DAT_EVD_HANDLE, OUT DAT_CSP_HANDLE *);

typedef DAT_RETURN (DAT_API *DAT_CSP_QUERY_FUNC)(
    IN DAT_CSP_HANDLE, IN DAT_CSP_PARAM_MASK, OUT DAT_CSP_PARAM *);

typedef DAT_RETURN (DAT_API *DAT_CSP_FREE_FUNC)(
    IN DAT_CSP_HANDLE);

typedef DAT_RETURN (DAT_API *DAT_PZ_CREATE_FUNC)(
    IN DAT_IA_HANDLE, OUT DAT_PZ_HANDLE *);

typedef DAT_RETURN (DAT_API *DAT_PZ_QUERY_FUNC)(
    IN DAT_PZ_HANDLE, IN DAT_PZ_PARAM_MASK, OUT DAT_PZ_PARAM *);

typedef DAT_RETURN (DAT_API *DAT_PZ_FREE_FUNC)(
    IN DAT_PZ_HANDLE);

typedef DAT_RETURN (DAT_API *DAT_SRQ_CREATE_FUNC)(
    IN DAT_IA_HANDLE, IN DAT_PZ_HANDLE, IN DAT_SRQ_ATTR *,
    OUT DAT_SRQ_HANDLE *);

typedef DAT_RETURN (DAT_API *DAT_SRQ_SET_LW_FUNC)(
    IN DAT_SRQ_HANDLE, IN DAT_COUNT);

typedef DAT_RETURN (DAT_API *DAT_SRQ_FREE_FUNC)(
    IN DAT_SRQ_HANDLE);

typedef DAT_RETURN (DAT_API *DAT_SRQ_QUERY_FUNC)(
    IN DAT_SRQ_HANDLE, IN DAT_SRQ_PARAM_MASK, OUT DAT_SRQ_PARAM *);

typedef DAT_RETURN (DAT_API *DAT_SRQ_RESIZE_FUNC)(
    IN DAT_SRQ_HANDLE, IN DAT_COUNT);

typedef DAT_RETURN (DAT_API *DAT_SRQ_POST_RECV_FUNC)(
    IN DAT_SRQ_HANDLE, IN DAT_COUNT, IN DAT_LMR_TRIPLET *,
    IN DAT_DTO_COOKIE);

/* High availability: are this IA and the named one paths to the same
 * fabric? */
typedef DAT_RETURN (DAT_API *DAT_IA_HA_RELATED_FUNC)(
    IN DAT_IA_HANDLE, IN const DAT_NAME_PTR, OUT DAT_BOOLEAN *);

/* Slot 80: the extension dispatcher behind dat_extension_op(). */
typedef DAT_RETURN (DAT_API *DAT_HANDLE_EXTENDEDOP_FUNC)(
    IN DAT_HANDLE, IN DAT_EXTENDED_OP, IN va_list);

#ifdef __cplusplus
}
#endif

#endif /* SOFTDAT_DAT2_REDIRECTION_H */
