/* softdat-perf -v: the IB extension counters (dat_ib_query_counters) of
 * the run's IA, EP and DTO EVD, after the run, on stderr. Only when the
 * provider advertises DAT_COUNTERS; zero counters are left out. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <dat2/udat.h>
#include <dat2/dat_ib_extensions.h>

#include "tools/softdat-perf/perf.h"

static const char *const ia_names[DCNT_IA_ALL_COUNTERS] = {
    "IA_PZ_CREATE",
    "IA_PZ_FREE",
    "IA_LMR_CREATE",
    "IA_LMR_FREE",
    "IA_RMR_CREATE",
    "IA_RMR_FREE",
    "IA_PSP_CREATE",
    "IA_PSP_CREATE_ANY",
    "IA_PSP_FREE",
    "IA_RSP_CREATE",
    "IA_RSP_FREE",
    "IA_EVD_CREATE",
    "IA_EVD_FREE",
    "IA_EP_CREATE",
    "IA_EP_FREE",
    "IA_SRQ_CREATE",
    "IA_SRQ_FREE",
    "IA_SP_CR",
    "IA_SP_CR_ACCEPTED",
    "IA_SP_CR_REJECTED",
    "IA_MEM_ALLOC",
    "IA_MEM_ALLOC_DATA",
    "IA_MEM_FREE",
    "IA_ASYNC_ERROR",
    "IA_ASYNC_QP_ERROR",
    "IA_ASYNC_CQ_ERROR",
    "IA_CM_LISTEN",
    "IA_CM_REQ_TX",
    "IA_CM_REQ_RX",
    "IA_CM_REP_TX",
    "IA_CM_REP_RX",
    "IA_CM_RTU_TX",
    "IA_CM_RTU_RX",
    "IA_CM_USER_REJ_TX",
    "IA_CM_USER_REJ_RX",
    "IA_CM_ACTIVE_EST",
    "IA_CM_PASSIVE_EST",
    "IA_CM_AH_REQ_TX",
    "IA_CM_AH_REQ_RX",
    "IA_CM_AH_RESOLVED",
    "IA_CM_DREQ_TX",
    "IA_CM_DREQ_RX",
    "IA_CM_DREP_TX",
    "IA_CM_DREP_RX",
    "IA_CM_MRA_TX",
    "IA_CM_MRA_RX",
    "IA_CM_REQ_FULLQ_POLL",
    "IA_CM_ERR",
    "IA_CM_ERR_REQ_FULLQ",
    "IA_CM_ERR_REQ_DUP",
    "IA_CM_ERR_REQ_RETRY",
    "IA_CM_ERR_REP_DUP",
    "IA_CM_ERR_REP_RETRY",
    "IA_CM_ERR_RTU_DUP",
    "IA_CM_ERR_RTU_RETRY",
    "IA_CM_ERR_REFUSED",
    "IA_CM_ERR_RESET",
    "IA_CM_ERR_TIMEOUT",
    "IA_CM_ERR_REJ_TX",
    "IA_CM_ERR_REJ_RX",
    "IA_CM_ERR_DREQ_DUP",
    "IA_CM_ERR_DREQ_RETRY",
    "IA_CM_ERR_DREP_DUP",
    "IA_CM_ERR_DREP_RETRY",
    "IA_CM_ERR_MRA_DUP",
    "IA_CM_ERR_MRA_RETRY",
    "IA_CM_ERR_UNEXPECTED",
    "IA_LNK_ERR_RCV",
    "IA_LNK_ERR_RCV_REM_PHYS",
    "IA_LNK_ERR_RCV_CONSTRAINT",
    "IA_LNK_ERR_XMT_DISCARDS",
    "IA_LNK_ERR_XMT_CONTRAINT",
    "IA_LNK_ERR_INTEGRITY",
    "IA_LNK_ERR_EXC_BUF_OVERRUN",
    "IA_LNK_WARN_RCV_SW_RELAY",
    "IA_LNK_WARN_XMT_WAIT",
    "IA_DIAG_ERR_RQ_RAE",
    "IA_DIAG_ERR_RQ_OOS",
    "IA_DIAG_ERR_RQ_RIRE",
    "IA_DIAG_ERR_RQ_UDSDPRD",
    "IA_DIAG_ERR_SQ_RAE",
    "IA_DIAG_ERR_SQ_OOS",
    "IA_DIAG_ERR_SQ_RIRE",
    "IA_DIAG_ERR_SQ_RREE",
    "IA_DIAG_ERR_SQ_TREE",
};

static const char *const ep_names[DCNT_EP_ALL_COUNTERS] = {
    "EP_CONNECT",
    "EP_DISCONNECT",
    "EP_POST_SEND",
    "EP_POST_SEND_DATA",
    "EP_POST_SEND_UD",
    "EP_POST_SEND_UD_DATA",
    "EP_POST_RECV",
    "EP_POST_RECV_DATA",
    "EP_POST_WRITE",
    "EP_POST_WRITE_DATA",
    "EP_POST_WRITE_IMM",
    "EP_POST_WRITE_IMM_DATA",
    "EP_POST_READ",
    "EP_POST_READ_DATA",
    "EP_POST_CMP_SWAP",
    "EP_POST_FETCH_ADD",
    "EP_RECV",
    "EP_RECV_DATA",
    "EP_RECV_UD",
    "EP_RECV_UD_DATA",
    "EP_RECV_IMM",
    "EP_RECV_IMM_DATA",
    "EP_RECV_RDMA_IMM",
    "EP_RECV_RDMA_IMM_DATA",
};

static const char *const evd_names[DCNT_EVD_ALL_COUNTERS] = {
    "EVD_WAIT",
    "EVD_WAIT_BLOCKED",
    "EVD_WAIT_NOTIFY",
    "EVD_DEQUEUE",
    "EVD_DEQUEUE_FOUND",
    "EVD_DEQUEUE_NOT_FOUND",
    "EVD_DEQUEUE_POLL",
    "EVD_DEQUEUE_POLL_FOUND",
    "EVD_CONN_CALLBACK",
    "EVD_DTO_CALLBACK",
};


static int has_counters(DAT_IA_HANDLE ia)
{
    DAT_PROVIDER_ATTR pa;
    if (dat_ia_query(ia, NULL, 0, NULL, DAT_PROVIDER_FIELD_PROVIDER_SPECIFIC_ATTR, &pa) != DAT_SUCCESS)
        return 0;
    for (DAT_COUNT i = 0; i < pa.num_provider_specific_attr; i++)
        if (pa.provider_specific_attr[i].name && strcmp(pa.provider_specific_attr[i].name, DAT_IB_ATTR_COUNTERS) == 0)
            return 1;
    return 0;
}

static void dump(const char *what, DAT_HANDLE h, int all, const char *const *names)
{
    DAT_UINT64 v[DCNT_IA_ALL_COUNTERS];
    if (h == DAT_HANDLE_NULL || dat_ib_query_counters(h, all, v, 0) != DAT_SUCCESS)
        return;
    fprintf(stderr, "counters (%s):", what);
    int n = 0;
    for (int i = 0; i < all; i++) {
        if (v[i] == 0)
            continue;
        fprintf(stderr, "%s %s=%" PRIu64, n % 4 == 0 ? "\n " : "", names[i], (uint64_t)v[i]);
        n++;
    }
    fprintf(stderr, "%s\n", n ? "" : " (all zero)");
}

void perf_print_counters(DAT_IA_HANDLE ia, DAT_EP_HANDLE ep, DAT_EVD_HANDLE evd)
{
    if (ia == DAT_HANDLE_NULL || !has_counters(ia))
        return;
    dump("IA", ia, DCNT_IA_ALL_COUNTERS, ia_names);
    dump("EP", ep, DCNT_EP_ALL_COUNTERS, ep_names);
    dump("DTO EVD", evd, DCNT_EVD_ALL_COUNTERS, evd_names);
}
