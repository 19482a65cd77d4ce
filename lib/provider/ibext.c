/* Slot 80 (handle_extendedop_func): every dat_extension_op reaches the
 * provider here: IB extension DTOs, counters and open/close query; the
 * IB unreliable datagrams (ep_ud.c); the iWARP extension's socket service
 * points (ssp.c). The va_list orders are the ones the extension headers'
 * macros push (abi-and-loading.md §2.6). Open-query ops pass the IA *name*
 * as handle (abi §3.7) and must not be looked up as a handle. */
#include <stdarg.h>

#include <dat2/dat_ib_extensions.h>

#include "lib/provider/counters.h"
#include "lib/provider/ep_ud.h"
#include "lib/provider/handle.h"
#include "lib/provider/ia_query.h"
#include "lib/provider/ibext.h"
#include "lib/provider/ssp.h"

static DAT_RETURN sd_handle_extendedop(DAT_HANDLE handle, DAT_EXTENDED_OP op, va_list args)
{
    va_list ap;
    va_copy(ap, args);
    DAT_RETURN rc;
    if (op & DAT_OPEN_EXTENSION_BASE) {
        DAT_HANDLE *out = va_arg(ap, DAT_HANDLE *);
        DAT_IA_ATTR_MASK im = va_arg(ap, DAT_IA_ATTR_MASK);
        DAT_IA_ATTR *ia_attr = va_arg(ap, DAT_IA_ATTR *);
        DAT_PROVIDER_ATTR_MASK pm = va_arg(ap, DAT_PROVIDER_ATTR_MASK);
        DAT_PROVIDER_ATTR *pr_attr = va_arg(ap, DAT_PROVIDER_ATTR *);
        rc = sd_ia_open_query((const char *)handle, out, im, ia_attr, pm, pr_attr);
        va_end(ap);
        return rc;
    }
    if (op & DAT_CLOSE_EXTENSION_BASE) {
        va_end(ap);
        return sd_ia_close_query(handle);
    }
    switch ((int)op) {
    case DAT_IB_RDMA_WRITE_IMMED_OP: {
        DAT_COUNT n = va_arg(ap, DAT_COUNT);
        DAT_LMR_TRIPLET *l = va_arg(ap, DAT_LMR_TRIPLET *);
        DAT_DTO_COOKIE c = va_arg(ap, DAT_DTO_COOKIE);
        DAT_RMR_TRIPLET *r = va_arg(ap, DAT_RMR_TRIPLET *);
        uint32_t imm = va_arg(ap, DAT_UINT32);
        DAT_COMPLETION_FLAGS f = va_arg(ap, DAT_COMPLETION_FLAGS);
        rc = sd_ep_post_write_immed(handle, n, l, c, r, imm, f);
        break;
    }
    case DAT_IB_FETCH_AND_ADD_OP: {
        uint64_t add = va_arg(ap, DAT_UINT64);
        DAT_LMR_TRIPLET *l = va_arg(ap, DAT_LMR_TRIPLET *);
        DAT_DTO_COOKIE c = va_arg(ap, DAT_DTO_COOKIE);
        DAT_RMR_TRIPLET *r = va_arg(ap, DAT_RMR_TRIPLET *);
        DAT_COMPLETION_FLAGS f = va_arg(ap, DAT_COMPLETION_FLAGS);
        rc = sd_ep_post_atomic(handle, false, add, 0, l, c, r, f);
        break;
    }
    case DAT_IB_CMP_AND_SWAP_OP: {
        uint64_t cmp = va_arg(ap, DAT_UINT64);
        uint64_t swp = va_arg(ap, DAT_UINT64);
        DAT_LMR_TRIPLET *l = va_arg(ap, DAT_LMR_TRIPLET *);
        DAT_DTO_COOKIE c = va_arg(ap, DAT_DTO_COOKIE);
        DAT_RMR_TRIPLET *r = va_arg(ap, DAT_RMR_TRIPLET *);
        DAT_COMPLETION_FLAGS f = va_arg(ap, DAT_COMPLETION_FLAGS);
        rc = sd_ep_post_atomic(handle, true, cmp, swp, l, c, r, f);
        break;
    }
    case DAT_IB_QUERY_COUNTERS_OP: {
        int cntr = va_arg(ap, int);
        DAT_UINT64 *out = va_arg(ap, DAT_UINT64 *);
        int reset = va_arg(ap, int);
        rc = sd_cnt_query(handle, cntr, out, reset);
        break;
    }
    case DAT_IB_PRINT_COUNTERS_OP: {
        int cntr = va_arg(ap, int);
        int reset = va_arg(ap, int);
        rc = sd_cnt_print(handle, cntr, reset);
        break;
    }
    case DAT_IB_START_COUNTERS_OP:
    case DAT_IB_STOP_COUNTERS_OP: {
        int type = va_arg(ap, int);
        rc = sd_cnt_start_stop(handle, type, op == DAT_IB_START_COUNTERS_OP);
        break;
    }
    case DAT_IW_SSP_CREATE_OP: {
        DAT_IW_SOCKET fd = va_arg(ap, DAT_IW_SOCKET);
        DAT_EP_HANDLE ep = va_arg(ap, DAT_EP_HANDLE);
        DAT_EVD_HANDLE evd = va_arg(ap, DAT_EVD_HANDLE);
        DAT_PVOID msg = va_arg(ap, DAT_PVOID);
        DAT_COUNT len = va_arg(ap, DAT_COUNT);
        DAT_IW_SSP_HANDLE *out = va_arg(ap, DAT_IW_SSP_HANDLE *);
        rc = sd_iw_ssp_create(handle, fd, ep, evd, msg, len, out);
        break;
    }
    case DAT_IW_SSP_FREE_OP:
        rc = sd_iw_ssp_free(handle);
        break;
    case DAT_IW_SSP_QUERY_OP: {
        DAT_IW_SSP_PARAM_MASK mask = va_arg(ap, DAT_IW_SSP_PARAM_MASK);
        DAT_IW_SSP_PARAM *p = va_arg(ap, DAT_IW_SSP_PARAM *);
        rc = sd_iw_ssp_query(handle, mask, p);
        break;
    }
    case DAT_IW_SOCKET_CONNECT_OP: {
        DAT_IW_SOCKET fd = va_arg(ap, DAT_IW_SOCKET);
        DAT_TIMEOUT t = va_arg(ap, DAT_TIMEOUT);
        DAT_COUNT n = va_arg(ap, DAT_COUNT);
        DAT_PVOID pd = va_arg(ap, DAT_PVOID);
        rc = sd_iw_socket_connect(handle, fd, t, n, pd);
        break;
    }
    case DAT_IB_UD_SEND_OP:
    case DAT_IB_UD_CM_FREE_OP:
    case DAT_IB_UD_AH_FREE_OP:
        rc = sd_ud_extop(handle, (int)op, ap);
        break;
    default: {
        struct sd_handle *h;
        rc = sd_handle_get(handle, SD_HTYPE_ANY, DAT_INVALID_HANDLE1, &h);
        if (rc == DAT_SUCCESS) {
            sd_handle_put(h);
            rc = SD_RET(DAT_NOT_IMPLEMENTED, 0);
        }
        break;
    }
    }
    va_end(ap);
    return rc;
}

void sd_ibext_fill_table(DAT_PROVIDER *p)
{
    p->handle_extendedop_func = sd_handle_extendedop;
}
