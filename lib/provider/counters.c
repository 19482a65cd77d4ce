/* softdat counters (IB extension): what each DCNT_* counts, the queries
 * and printing. See counters.h for the design and docs/counters.md for
 * the table of counted events. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "emu/conn.h"
#include "emu/ddp.h"
#include "emu/mpa.h"
#include "emu/qp.h"
#include "lib/provider/counters.h"
#include "lib/provider/ep.h"
#include "lib/provider/ep_dto.h"
#include "lib/provider/evd.h"
#include "lib/provider/ia.h"

/* Printed names: the enumerators of dat_ib_extensions.h, in order. */
static const char *const ia_names[] = {
    "DCNT_IA_PZ_CREATE",
    "DCNT_IA_PZ_FREE",
    "DCNT_IA_LMR_CREATE",
    "DCNT_IA_LMR_FREE",
    "DCNT_IA_RMR_CREATE",
    "DCNT_IA_RMR_FREE",
    "DCNT_IA_PSP_CREATE",
    "DCNT_IA_PSP_CREATE_ANY",
    "DCNT_IA_PSP_FREE",
    "DCNT_IA_RSP_CREATE",
    "DCNT_IA_RSP_FREE",
    "DCNT_IA_EVD_CREATE",
    "DCNT_IA_EVD_FREE",
    "DCNT_IA_EP_CREATE",
    "DCNT_IA_EP_FREE",
    "DCNT_IA_SRQ_CREATE",
    "DCNT_IA_SRQ_FREE",
    "DCNT_IA_SP_CR",
    "DCNT_IA_SP_CR_ACCEPTED",
    "DCNT_IA_SP_CR_REJECTED",
    "DCNT_IA_MEM_ALLOC",
    "DCNT_IA_MEM_ALLOC_DATA",
    "DCNT_IA_MEM_FREE",
    "DCNT_IA_ASYNC_ERROR",
    "DCNT_IA_ASYNC_QP_ERROR",
    "DCNT_IA_ASYNC_CQ_ERROR",
    "DCNT_IA_CM_LISTEN",
    "DCNT_IA_CM_REQ_TX",
    "DCNT_IA_CM_REQ_RX",
    "DCNT_IA_CM_REP_TX",
    "DCNT_IA_CM_REP_RX",
    "DCNT_IA_CM_RTU_TX",
    "DCNT_IA_CM_RTU_RX",
    "DCNT_IA_CM_USER_REJ_TX",
    "DCNT_IA_CM_USER_REJ_RX",
    "DCNT_IA_CM_ACTIVE_EST",
    "DCNT_IA_CM_PASSIVE_EST",
    "DCNT_IA_CM_AH_REQ_TX",
    "DCNT_IA_CM_AH_REQ_RX",
    "DCNT_IA_CM_AH_RESOLVED",
    "DCNT_IA_CM_DREQ_TX",
    "DCNT_IA_CM_DREQ_RX",
    "DCNT_IA_CM_DREP_TX",
    "DCNT_IA_CM_DREP_RX",
    "DCNT_IA_CM_MRA_TX",
    "DCNT_IA_CM_MRA_RX",
    "DCNT_IA_CM_REQ_FULLQ_POLL",
    "DCNT_IA_CM_ERR",
    "DCNT_IA_CM_ERR_REQ_FULLQ",
    "DCNT_IA_CM_ERR_REQ_DUP",
    "DCNT_IA_CM_ERR_REQ_RETRY",
    "DCNT_IA_CM_ERR_REP_DUP",
    "DCNT_IA_CM_ERR_REP_RETRY",
    "DCNT_IA_CM_ERR_RTU_DUP",
    "DCNT_IA_CM_ERR_RTU_RETRY",
    "DCNT_IA_CM_ERR_REFUSED",
    "DCNT_IA_CM_ERR_RESET",
    "DCNT_IA_CM_ERR_TIMEOUT",
    "DCNT_IA_CM_ERR_REJ_TX",
    "DCNT_IA_CM_ERR_REJ_RX",
    "DCNT_IA_CM_ERR_DREQ_DUP",
    "DCNT_IA_CM_ERR_DREQ_RETRY",
    "DCNT_IA_CM_ERR_DREP_DUP",
    "DCNT_IA_CM_ERR_DREP_RETRY",
    "DCNT_IA_CM_ERR_MRA_DUP",
    "DCNT_IA_CM_ERR_MRA_RETRY",
    "DCNT_IA_CM_ERR_UNEXPECTED",
    "DCNT_IA_LNK_ERR_RCV",
    "DCNT_IA_LNK_ERR_RCV_REM_PHYS",
    "DCNT_IA_LNK_ERR_RCV_CONSTRAINT",
    "DCNT_IA_LNK_ERR_XMT_DISCARDS",
    "DCNT_IA_LNK_ERR_XMT_CONTRAINT",
    "DCNT_IA_LNK_ERR_INTEGRITY",
    "DCNT_IA_LNK_ERR_EXC_BUF_OVERRUN",
    "DCNT_IA_LNK_WARN_RCV_SW_RELAY",
    "DCNT_IA_LNK_WARN_XMT_WAIT",
    "DCNT_IA_DIAG_ERR_RQ_RAE",
    "DCNT_IA_DIAG_ERR_RQ_OOS",
    "DCNT_IA_DIAG_ERR_RQ_RIRE",
    "DCNT_IA_DIAG_ERR_RQ_UDSDPRD",
    "DCNT_IA_DIAG_ERR_SQ_RAE",
    "DCNT_IA_DIAG_ERR_SQ_OOS",
    "DCNT_IA_DIAG_ERR_SQ_RIRE",
    "DCNT_IA_DIAG_ERR_SQ_RREE",
    "DCNT_IA_DIAG_ERR_SQ_TREE",
};

static const char *const ep_names[] = {
    "DCNT_EP_CONNECT",
    "DCNT_EP_DISCONNECT",
    "DCNT_EP_POST_SEND",
    "DCNT_EP_POST_SEND_DATA",
    "DCNT_EP_POST_SEND_UD",
    "DCNT_EP_POST_SEND_UD_DATA",
    "DCNT_EP_POST_RECV",
    "DCNT_EP_POST_RECV_DATA",
    "DCNT_EP_POST_WRITE",
    "DCNT_EP_POST_WRITE_DATA",
    "DCNT_EP_POST_WRITE_IMM",
    "DCNT_EP_POST_WRITE_IMM_DATA",
    "DCNT_EP_POST_READ",
    "DCNT_EP_POST_READ_DATA",
    "DCNT_EP_POST_CMP_SWAP",
    "DCNT_EP_POST_FETCH_ADD",
    "DCNT_EP_RECV",
    "DCNT_EP_RECV_DATA",
    "DCNT_EP_RECV_UD",
    "DCNT_EP_RECV_UD_DATA",
    "DCNT_EP_RECV_IMM",
    "DCNT_EP_RECV_IMM_DATA",
    "DCNT_EP_RECV_RDMA_IMM",
    "DCNT_EP_RECV_RDMA_IMM_DATA",
};

static const char *const evd_names[] = {
    "DCNT_EVD_WAIT",
    "DCNT_EVD_WAIT_BLOCKED",
    "DCNT_EVD_WAIT_NOTIFY",
    "DCNT_EVD_DEQUEUE",
    "DCNT_EVD_DEQUEUE_FOUND",
    "DCNT_EVD_DEQUEUE_NOT_FOUND",
    "DCNT_EVD_DEQUEUE_POLL",
    "DCNT_EVD_DEQUEUE_POLL_FOUND",
    "DCNT_EVD_CONN_CALLBACK",
    "DCNT_EVD_DTO_CALLBACK",
};

_Static_assert(sizeof ia_names / sizeof ia_names[0] == DCNT_IA_ALL_COUNTERS, "IA counter names");
_Static_assert(sizeof ep_names / sizeof ep_names[0] == DCNT_EP_ALL_COUNTERS, "EP counter names");
_Static_assert(sizeof evd_names / sizeof evd_names[0] == DCNT_EVD_ALL_COUNTERS, "EVD counter names");

/* ------------------------------------------------------------ counting */

void sd_cnt_object(struct sd_handle *h, bool created)
{
    struct sd_ia *ia = h->ia;
    if (ia == NULL || &ia->h == h)
        return;
    int c = -1;
    switch (h->type) {
    case DAT_HANDLE_TYPE_PZ: c = created ? DCNT_IA_PZ_CREATE : DCNT_IA_PZ_FREE; break;
    case DAT_HANDLE_TYPE_LMR: c = created ? DCNT_IA_LMR_CREATE : DCNT_IA_LMR_FREE; break;
    case DAT_HANDLE_TYPE_RMR: c = created ? DCNT_IA_RMR_CREATE : DCNT_IA_RMR_FREE; break;
    case DAT_HANDLE_TYPE_PSP:
    case DAT_HANDLE_TYPE_CSP: c = created ? DCNT_IA_PSP_CREATE : DCNT_IA_PSP_FREE; break;
    case DAT_HANDLE_TYPE_RSP: c = created ? DCNT_IA_RSP_CREATE : DCNT_IA_RSP_FREE; break;
    case DAT_HANDLE_TYPE_EVD: c = created ? DCNT_IA_EVD_CREATE : DCNT_IA_EVD_FREE; break;
    case DAT_HANDLE_TYPE_EP: c = created ? DCNT_IA_EP_CREATE : DCNT_IA_EP_FREE; break;
    case DAT_HANDLE_TYPE_SRQ: c = created ? DCNT_IA_SRQ_CREATE : DCNT_IA_SRQ_FREE; break;
    case DAT_HANDLE_TYPE_CR:
        /* A CR is a connection request that reached a service point. */
        if (created) {
            SD_CNT_IA(ia, DCNT_IA_SP_CR);
            SD_CNT_IA(ia, DCNT_IA_CM_REQ_RX);
        }
        break;
    default: break;
    }
    if (c >= 0)
        SD_CNT_IA(ia, c);
    if (created && (h->type == DAT_HANDLE_TYPE_PSP || h->type == DAT_HANDLE_TYPE_RSP ||
                    h->type == DAT_HANDLE_TYPE_CSP))
        SD_CNT_IA(ia, DCNT_IA_CM_LISTEN);
    /* Every DAT object is one allocation of ops->size bytes. */
    if (created) {
        SD_CNT_IA(ia, DCNT_IA_MEM_ALLOC);
        sd_cnt_add(&ia->cnt.v[DCNT_IA_MEM_ALLOC_DATA], h->ops->size);
    } else {
        SD_CNT_IA(ia, DCNT_IA_MEM_FREE);
    }
}

void sd_cnt_ep_post(struct sd_ep *ep, int kind, uint64_t len)
{
    switch ((enum sd_dto_kind)kind) {
    case SD_DTO_SEND:
    case SD_DTO_SEND_INV:
        SD_CNT_EP(ep, DCNT_EP_POST_SEND, 1);
        SD_CNT_EP(ep, DCNT_EP_POST_SEND_DATA, len);
        break;
    case SD_DTO_RDMA_WRITE:
        SD_CNT_EP(ep, DCNT_EP_POST_WRITE, 1);
        SD_CNT_EP(ep, DCNT_EP_POST_WRITE_DATA, len);
        break;
    case SD_DTO_WRITE_IMM:
        SD_CNT_EP(ep, DCNT_EP_POST_WRITE_IMM, 1);
        SD_CNT_EP(ep, DCNT_EP_POST_WRITE_IMM_DATA, len);
        break;
    case SD_DTO_RDMA_READ:
    case SD_DTO_READ_TO_RMR:
        SD_CNT_EP(ep, DCNT_EP_POST_READ, 1);
        SD_CNT_EP(ep, DCNT_EP_POST_READ_DATA, len);
        break;
    case SD_DTO_CMP_SWAP: SD_CNT_EP(ep, DCNT_EP_POST_CMP_SWAP, 1); break;
    case SD_DTO_FETCH_ADD: SD_CNT_EP(ep, DCNT_EP_POST_FETCH_ADD, 1); break;
    case SD_DTO_RECV:
        SD_CNT_EP(ep, DCNT_EP_POST_RECV, 1);
        SD_CNT_EP(ep, DCNT_EP_POST_RECV_DATA, len);
        break;
    case SD_DTO_BIND: break;
    }
}

void sd_cnt_ep_recv(struct sd_ep *ep, uint64_t len, bool imm)
{
    if (imm) {
        /* An RDMA Write with immediate consumed a receive (IB semantics):
         * the data went to the RDMA target, the immediate to this receive. */
        SD_CNT_EP(ep, DCNT_EP_RECV_RDMA_IMM, 1);
        SD_CNT_EP(ep, DCNT_EP_RECV_RDMA_IMM_DATA, len);
    } else {
        SD_CNT_EP(ep, DCNT_EP_RECV, 1);
        SD_CNT_EP(ep, DCNT_EP_RECV_DATA, len);
    }
}

/* The soft RNIC's link and adapter diagnostics come from the Terminate
 * that ended a connection: who sent it and which layer it blames. */
void sd_cnt_qp_fatal(void *ctx, const struct emu_qp_fatal *f)
{
    struct sd_ep *ep = ctx;
    struct sd_ia *ia = ep->h.ia;
    int c;
    if (!f->have_term) {
        c = f->err == EPROTO || f->err == EBADMSG ? DCNT_IA_LNK_ERR_RCV : -1;
    } else if (f->term.layer == EMU_TERM_LLP) {
        c = f->term.ecode == EMU_MPA_LLP_CRC ? DCNT_IA_LNK_ERR_INTEGRITY
            : f->remote                      ? DCNT_IA_DIAG_ERR_SQ_RREE
                                             : DCNT_IA_LNK_ERR_RCV;
    } else {
        bool access = (f->term.layer == EMU_TERM_RDMAP && f->term.etype == EMU_TERM_RDMAP_PROTECTION) ||
                      (f->term.layer == EMU_TERM_DDP && f->term.etype == EMU_TERM_DDP_TAGGED);
        if (f->remote) /* the peer refused one of our requests */
            c = access ? DCNT_IA_DIAG_ERR_SQ_RAE : DCNT_IA_DIAG_ERR_SQ_RIRE;
        else /* we refused one of the peer's */
            c = access ? DCNT_IA_DIAG_ERR_RQ_RAE : DCNT_IA_DIAG_ERR_RQ_RIRE;
    }
    if (c >= 0)
        SD_CNT_IA(ia, c);
    SD_CNT_IA(ia, DCNT_IA_ASYNC_QP_ERROR);
}

void sd_cnt_conn_event(struct sd_ep *ep, int type, uint32_t retries)
{
    struct sd_ia *ia = ep->h.ia;
    /* A connection's retries happen before its first event: ESTABLISHED
     * or a failure, and later events report the same total. */
    if (retries != 0 && (type != EMU_CONN_DISCONNECTED && type != EMU_CONN_BROKEN))
        sd_cnt_add(&ia->cnt.v[DCNT_IA_CM_ERR_REQ_RETRY], retries);
    emu_lock(&ep->lock);
    bool initiator = ep->initiator;
    /* Our own disconnect left the EP DISCONNECT_PENDING: the peer's FIN
     * answers it (DREP); otherwise the peer asked (DREQ). */
    bool ours = ep->state == DAT_EP_STATE_DISCONNECT_PENDING;
    emu_unlock(&ep->lock);
    switch ((enum emu_conn_event_type)type) {
    case EMU_CONN_ESTABLISHED:
        /* iWARP: MPA Reply = REP, the peer-to-peer RTR = RTU. */
        if (initiator) {
            SD_CNT_IA(ia, DCNT_IA_CM_REP_RX);
            SD_CNT_IA(ia, DCNT_IA_CM_RTU_TX);
            SD_CNT_IA(ia, DCNT_IA_CM_ACTIVE_EST);
        } else {
            SD_CNT_IA(ia, DCNT_IA_CM_RTU_RX);
            SD_CNT_IA(ia, DCNT_IA_CM_PASSIVE_EST);
        }
        break;
    case EMU_CONN_PEER_REJECTED:
        SD_CNT_IA(ia, DCNT_IA_CM_USER_REJ_RX);
        SD_CNT_IA(ia, DCNT_IA_CM_ERR_REJ_RX);
        break;
    case EMU_CONN_NON_PEER_REJECTED:
        SD_CNT_IA(ia, DCNT_IA_CM_ERR);
        SD_CNT_IA(ia, DCNT_IA_CM_ERR_REFUSED);
        break;
    case EMU_CONN_TIMED_OUT:
    case EMU_CONN_UNREACHABLE:
        SD_CNT_IA(ia, DCNT_IA_CM_ERR);
        SD_CNT_IA(ia, DCNT_IA_CM_ERR_TIMEOUT);
        break;
    case EMU_CONN_ACCEPT_ERROR:
        SD_CNT_IA(ia, DCNT_IA_CM_ERR);
        SD_CNT_IA(ia, DCNT_IA_CM_ERR_UNEXPECTED);
        break;
    case EMU_CONN_DISCONNECTED:
        SD_CNT_IA(ia, ours ? DCNT_IA_CM_DREP_RX : DCNT_IA_CM_DREQ_RX);
        break;
    case EMU_CONN_BROKEN:
        SD_CNT_IA(ia, DCNT_IA_CM_ERR);
        SD_CNT_IA(ia, DCNT_IA_CM_ERR_RESET);
        break;
    }
}

/* ------------------------------------------------------------ queries */

struct cnt_view {
    struct sd_handle *h;
    struct sd_evd *evd; /* EVD counters: the derived dequeue group */
    _Atomic uint64_t *v;
    const char *const *names;
    int n;
    const char *what;
};

static DAT_RETURN view_of(DAT_HANDLE raw, struct cnt_view *out)
{
    struct sd_handle *h;
    DAT_RETURN rc = sd_handle_get(raw, SD_HTYPE_ANY, DAT_INVALID_HANDLE1, &h);
    if (rc != DAT_SUCCESS)
        return rc;
    out->h = h;
    out->evd = NULL;
    switch (h->type) {
    case DAT_HANDLE_TYPE_IA:
        out->v = ((struct sd_ia *)h)->cnt.v;
        out->names = ia_names;
        out->n = DCNT_IA_ALL_COUNTERS;
        out->what = "IA";
        return DAT_SUCCESS;
    case DAT_HANDLE_TYPE_EP:
        out->v = ((struct sd_ep *)h)->cnt.v;
        out->names = ep_names;
        out->n = DCNT_EP_ALL_COUNTERS;
        out->what = "EP";
        return DAT_SUCCESS;
    case DAT_HANDLE_TYPE_EVD:
        out->evd = (struct sd_evd *)h;
        out->v = out->evd->cnt.v;
        out->names = evd_names;
        out->n = DCNT_EVD_ALL_COUNTERS;
        out->what = "EVD";
        return DAT_SUCCESS;
    default:
        /* Counters exist for IAs, EPs and EVDs only. */
        sd_handle_put(h);
        return SD_RET(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE1);
    }
}

/* A dequeue counter as counters.h derives it, since the last reset. */
static uint64_t read_dequeue(struct sd_evd *evd, int c, int reset)
{
    struct sd_cnt_evd *k = &evd->cnt;
    uint64_t found = atomic_load_explicit(&k->v[DCNT_EVD_DEQUEUE_FOUND], memory_order_relaxed);
    uint64_t none = atomic_load_explicit(&k->v[DCNT_EVD_DEQUEUE_NOT_FOUND], memory_order_relaxed);
    uint64_t total;
    switch (c) {
    case DCNT_EVD_DEQUEUE: total = found + none; break;
    case DCNT_EVD_DEQUEUE_FOUND: total = found; break;
    case DCNT_EVD_DEQUEUE_NOT_FOUND: total = none; break;
    case DCNT_EVD_DEQUEUE_POLL: total = evd->ps_inited ? found + none : 0; break;
    default: total = evd->ps_inited ? found : 0; break;
    }
    _Atomic uint64_t *base = &k->dq_base[c - SD_CNT_EVD_DQ_FIRST];
    uint64_t v = total - atomic_load_explicit(base, memory_order_relaxed);
    if (reset)
        atomic_store_explicit(base, total, memory_order_relaxed);
    return v;
}

static uint64_t read_one(const struct cnt_view *w, int c, int reset)
{
    if (w->evd != NULL && c >= SD_CNT_EVD_DQ_FIRST && c < SD_CNT_EVD_DQ_FIRST + SD_CNT_EVD_DQ_N)
        return read_dequeue(w->evd, c, reset);
    _Atomic uint64_t *v = &w->v[c];
    return reset ? atomic_exchange_explicit(v, 0, memory_order_relaxed)
                 : atomic_load_explicit(v, memory_order_relaxed);
}

/* cntr: one counter (0..ALL-1) into *out, or ALL: every counter into
 * out[0..ALL-1]. reset: zero what was read. */
DAT_RETURN sd_cnt_query(DAT_HANDLE raw, int cntr, DAT_UINT64 *out, int reset)
{
    struct cnt_view w;
    DAT_RETURN rc = view_of(raw, &w);
    if (rc != DAT_SUCCESS)
        return rc;
    if (cntr < 0 || cntr > w.n)
        rc = SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    else if (out == NULL)
        rc = SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    else if (cntr == w.n)
        for (int i = 0; i < w.n; i++)
            out[i] = read_one(&w, i, reset);
    else
        *out = read_one(&w, cntr, reset);
    sd_handle_put(w.h);
    return rc;
}

/* The consumer asked for the counters to be printed: stdout, like the OFA
 * providers (this is output the application requested, not a
 * diagnostic). Zero counters are skipped when printing all of them. */
DAT_RETURN sd_cnt_print(DAT_HANDLE raw, int cntr, int reset)
{
    struct cnt_view w;
    DAT_RETURN rc = view_of(raw, &w);
    if (rc != DAT_SUCCESS)
        return rc;
    if (cntr < 0 || cntr > w.n) {
        rc = SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    } else {
        flockfile(stdout);
        printf("softdat %s %p counters:\n", w.what, (void *)w.h);
        for (int i = cntr == w.n ? 0 : cntr; i < (cntr == w.n ? w.n : cntr + 1); i++) {
            uint64_t x = read_one(&w, i, reset);
            if (x != 0 || cntr != w.n)
                printf("  %-32s %" PRIu64 "\n", w.names[i], x);
        }
        fflush(stdout);
        funlockfile(stdout);
    }
    sd_handle_put(w.h);
    return rc;
}

/* Start/stop a counter group of an IA. softdat counts every group all the
 * time (counting is a relaxed add), so these only validate. */
DAT_RETURN sd_cnt_start_stop(DAT_HANDLE raw, int type, bool start)
{
    (void)start;
    struct cnt_view w;
    DAT_RETURN rc = view_of(raw, &w);
    if (rc != DAT_SUCCESS)
        return rc;
    if (w.h->type != DAT_HANDLE_TYPE_IA)
        rc = SD_RET(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);
    else if (type != DCNT_IA_CM && type != DCNT_IA_LNK && type != DCNT_IA_DIAG)
        rc = SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    sd_handle_put(w.h);
    return rc;
}
