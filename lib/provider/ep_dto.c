/* softdat data transfer: dat_ep_post_send / _send_with_invalidate /
 * _recv / _rdma_read / _rdma_write / _rdma_read_to_rmr, the IB extension
 * DTOs reached through slot 80, and their completions, over emu/qp.
 *
 * Posting: every synchronous check in the spec's order (handle, state,
 * num_segments against the EP's iov limits, completion flags, local iov),
 * then a slot of the EP's work-request ring (ep_dto.h) remembers what DAT
 * needs at completion; the emu_wr cookie is the slot index. Nothing is
 * allocated per post.
 *
 * Completions arrive through the QP's callbacks with its queue lock held:
 * we only look the slot up, apply the completion-flag decision tables and
 * sd_evd_post the event (request queue -> request_evd, receives ->
 * recv_evd). An event lost to a full EVD breaks that connection (spec
 * L2888), done from the engine thread.
 *
 * Flush ordering: completions of posts made once the connection is over
 * (state Disconnected, or the QP refusing because the connection just
 * died) must follow every earlier completion of the EP (L5370-5376). Such
 * posts are deferred until sd_ep_dto_flush has flushed the QP, or
 * completed at once when that already happened.
 *
 * Lnnnn = line of the DAT 2.0 spec text; digest:
 * shared/research/spec-part2.md §4. */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <pthread.h>
#include <string.h>

#include <dat2/dat_ib_extensions.h>

#include "emu/engine.h"
#include "emu/log.h"
#include "emu/mem.h"
#include "lib/provider/ep.h"
#include "lib/provider/ep_dto.h"
#include "lib/provider/ep_ud.h"
#include "lib/provider/evd.h"
#include "lib/provider/ia.h"
#include "lib/provider/ibext.h"
#include "lib/provider/lmr.h"
#include "lib/provider/pz.h"
#include "lib/provider/rmr.h"
#include "lib/provider/srq.h"

struct sd_ep_dto {
    struct sd_dto_ring sq, rq;
    atomic_bool dying;     /* fini: the EP's event streams are gone (L6032) */
    atomic_bool breaking;  /* an EVD overflow or a failed completion asked for the connection to break */
};

/* What a post needs from the EP, read under ep->lock in one go. */
struct ep_snap {
    DAT_EP_STATE state;
    struct sd_pz *pz;
    bool srq;
    DAT_COMPLETION_FLAGS req_flags, recv_flags;
    DAT_COUNT max_request_iov, max_recv_iov, max_read_iov, max_write_iov;
    uint64_t conn_id;
};

static void snap(struct sd_ep *ep, struct ep_snap *s)
{
    emu_lock(&ep->lock);
    s->state = ep->state;
    s->pz = ep->pz;
    s->srq = ep->srq != NULL;
    s->req_flags = ep->attr.request_completion_flags;
    s->recv_flags = ep->attr.recv_completion_flags;
    s->max_request_iov = ep->attr.max_request_iov;
    s->max_recv_iov = ep->attr.max_recv_iov;
    /* 0 = not given (dtest and OFA-era consumers leave the 2.0 RDMA iov
     * attributes zero): the request iov limit applies. */
    s->max_read_iov = ep->attr.max_rdma_read_iov ? ep->attr.max_rdma_read_iov : ep->attr.max_request_iov;
    s->max_write_iov = ep->attr.max_rdma_write_iov ? ep->attr.max_rdma_write_iov : ep->attr.max_request_iov;
    s->conn_id = ep->conn_id;
    emu_unlock(&ep->lock);
}

static bool is_connected(DAT_EP_STATE s)
{
    return s == DAT_EP_STATE_CONNECTED || s == DAT_EP_STATE_CONNECTED_SINGLE_PATH ||
           s == DAT_EP_STATE_CONNECTED_MULTI_PATH;
}

/* ---------------------------------------------------------------- overflow */

static void break_conn(struct sd_ep *ep, int err, const char *why)
{
    emu_lock(&ep->lock);
    if (ep->conn != NULL && sd_handle_alive(&ep->h)) {
        SD_EP_LOG(SD_LOG_WARN, "dto", ep, "%s; breaking the connection", why);
        emu_conn_fail(ep->conn, err); /* asynchronous: BROKEN comes later */
    }
    emu_unlock(&ep->lock);
    sd_handle_put(&ep->h);
}

/* One job per reason: the job must not look at ep->dto (the EP may be
 * torn down meanwhile; only its handle reference is held). */
static void break_job_overflow(void *arg)
{
    break_conn(arg, ENOSPC, "a completion was lost to a full EVD");
}

static void break_job_error(void *arg)
{
    break_conn(arg, EIO, "a DTO or bind completed in error");
}

/* Break the EP's connection: the event of a completion did not fit
 * (overflow, L2888), or a completion other than success / flushed
 * (L8505; for a bind also L8243) that the QP did not break on itself
 * (an RDMA Read with ORD 0, a window bind the memory table refused).
 * Called with the QP lock held, so the work goes to the engine thread. */
static void request_break(struct sd_ep *ep, bool overflow)
{
    struct sd_ep_dto *d = ep->dto;
    if (atomic_exchange(&d->breaking, true))
        return;
    struct sd_ia *ia = ep->h.ia;
    sd_handle_ref(&ep->h);
    if (ia->engine == NULL ||
        emu_engine_run_async(ia->engine, overflow ? break_job_overflow : break_job_error, ep) != 0) {
        SD_EP_LOG(SD_LOG_ERROR, "dto", ep, "cannot schedule the break of its connection");
        sd_handle_put(&ep->h);
    }
}

/* ---------------------------------------------------------------- completions */

static DAT_DTOS dto_op_of(enum sd_dto_kind k)
{
    switch (k) {
    case SD_DTO_SEND:
    case SD_DTO_SEND_INV: return DAT_DTO_SEND;
    case SD_DTO_RDMA_WRITE: return DAT_DTO_RDMA_WRITE;
    case SD_DTO_RDMA_READ:
    case SD_DTO_READ_TO_RMR: return DAT_DTO_RDMA_READ;
    case SD_DTO_WRITE_IMM: return (DAT_DTOS)DAT_IB_DTO_RDMA_WRITE_IMMED;
    case SD_DTO_FETCH_ADD: return (DAT_DTOS)DAT_IB_DTO_FETCH_ADD;
    case SD_DTO_CMP_SWAP: return (DAT_DTOS)DAT_IB_DTO_CMP_SWAP;
    case SD_DTO_RECV: return DAT_DTO_RECEIVE;
    case SD_DTO_BIND: break;
    }
    return DAT_DTO_SEND;
}

static void set_ext(DAT_EVENT *ev, DAT_IB_EXT_TYPE type, bool ok, uint32_t imm)
{
    DAT_IB_EXTENSION_EVENT_DATA *x = (DAT_IB_EXTENSION_EVENT_DATA *)(void *)ev->event_extension_data;
    x->type = type;
    x->status = ok ? DAT_OP_SUCCESS : DAT_IB_OP_ERR;
    x->val.immed.data = imm;
    ev->event_number = (DAT_EVENT_NUMBER)DAT_IB_DTO_EVENT;
}

/* One completion, from the QP (cqe) or synthesised for a flushed post.
 * recv: which ring. Runs with the QP's lock held when it comes from the
 * QP: record only. */
static void complete(struct sd_ep *ep, bool recv, const struct emu_cqe *cqe)
{
    struct sd_ep_dto *d = ep->dto;
    struct sd_dto_ring *r = recv ? &d->rq : &d->sq;
    uint32_t idx = (uint32_t)cqe->cookie;
    struct sd_dto_slot s;
    /* An SRQ EP's receives come from the SRQ's slots (srq.c). */
    struct sd_srq *srq = recv ? ep->srq : NULL;
    bool ok = cqe->status == EMU_WC_SUCCESS;
    DAT_COMPLETION_FLAGS ep_flags = recv ? ep->attr.recv_completion_flags : ep->attr.request_completion_flags;
    enum sd_dto_notify n;
    /* The ring's slot is released before the event becomes visible: a
     * consumer that reaps it may post again at once and must find the
     * slot free. A suppressed success keeps its slot (L8452); anything
     * that produced (or, dropped, would have produced) an event releases
     * it, together with the suppressed slots held before it. The slot's
     * data is in s. */
    if (srq != NULL) {
        memset(&s, 0, sizeof s);
        s.kind = SD_DTO_RECV;
        if (!sd_srq_take(srq, cqe->cookie, &s.cookie, &s.len)) {
            SD_EP_LOG(SD_LOG_ERROR, "dto", ep, "completion for unknown SRQ cookie %llu",
                   (unsigned long long)cqe->cookie);
            return;
        }
        n = sd_dto_decide((enum sd_dto_kind)s.kind, s.flags, ep_flags, ok, cqe->solicited);
    } else if (cqe->cookie > UINT32_MAX || !sd_dto_ring_finish(r, idx, ep_flags, ok, cqe->solicited, &s, &n)) {
        SD_EP_LOG(SD_LOG_ERROR, "dto", ep, "completion for unknown %s cookie %llu", recv ? "recv" : "request",
               (unsigned long long)cqe->cookie);
        return;
    }
    if (recv && ok)
        sd_cnt_ep_recv(ep, cqe->byte_len, cqe->op == EMU_WC_RECV_IMM);
    if (ok && s.kind == SD_DTO_BIND && s.obj != NULL) {
        struct sd_rmr *rmr = s.obj;
        if (cqe->bound_stag != 0 && cqe->bound_stag != s.rmr_context)
            SD_WARN("dto", "rmr %p: bound STag 0x%x, told the consumer 0x%x", (void *)rmr, cqe->bound_stag,
                    s.rmr_context);
    }
    struct sd_evd *evd = recv ? ep->recv_evd : ep->request_evd;
    bool dying = atomic_load(&d->dying);
    bool post = n != SD_DTO_NO_EVENT && evd != NULL && !dying;
    if (post) {
        DAT_EVENT ev;
        memset(&ev, 0, sizeof ev);
        enum sd_evq_kind kind = SD_EVQ_DTO;
        if (s.kind == SD_DTO_BIND) {
            ev.event_number = DAT_RMR_BIND_COMPLETION_EVENT;
            DAT_RMR_BIND_COMPLETION_EVENT_DATA *b = &ev.event_data.rmr_completion_event_data;
            b->rmr_handle = (DAT_RMR_HANDLE)s.obj;
            b->user_cookie = s.cookie;
            b->status = sd_dto_status(cqe->status);
        } else {
            ev.event_number = DAT_DTO_COMPLETION_EVENT;
            DAT_DTO_COMPLETION_EVENT_DATA *c = &ev.event_data.dto_completion_event_data;
            c->ep_handle = (DAT_EP_HANDLE)ep;
            c->user_cookie = s.cookie;
            c->status = sd_dto_status(cqe->status);
            c->transfered_length = ok ? cqe->byte_len : 0;
            c->operation = dto_op_of((enum sd_dto_kind)s.kind);
            switch ((enum sd_dto_kind)s.kind) {
            case SD_DTO_WRITE_IMM:
                set_ext(&ev, DAT_IB_RDMA_WRITE_IMMED, ok, cqe->imm);
                kind = SD_EVQ_EXT;
                break;
            case SD_DTO_FETCH_ADD:
                set_ext(&ev, DAT_IB_FETCH_AND_ADD, ok, 0);
                kind = SD_EVQ_EXT;
                break;
            case SD_DTO_CMP_SWAP:
                set_ext(&ev, DAT_IB_CMP_AND_SWAP, ok, 0);
                kind = SD_EVQ_EXT;
                break;
            case SD_DTO_RECV:
                if (ok && cqe->op == EMU_WC_RECV_INV) {
                    c->operation = DAT_DTO_RECEIVE_WITH_INVALIDATE;
                    c->rmr_context = cqe->inv_stag;
                } else if (ok && cqe->op == EMU_WC_RECV_IMM) {
                    /* RDMA Write with immediate data consumed this receive:
                     * the length is the RDMA payload's (abi §2.6). */
                    c->operation = (DAT_DTOS)DAT_IB_DTO_RECV_IMMED;
                    set_ext(&ev, DAT_IB_RDMA_WRITE_IMMED_DATA, ok, cqe->imm);
                    kind = SD_EVQ_EXT;
                }
                break;
            default:
                break;
            }
        }
        unsigned fl = n == SD_DTO_EVENT_NOTIFY ? SD_EVQ_F_NOTIFY : 0;
        /* An SRQ buffer's event is posted through the SRQ, whose queries
         * wait out the post so as not to count the buffer twice (srq.h). */
        DAT_RETURN rc = srq != NULL ? sd_srq_deliver(srq, evd, &ev, kind, fl) : sd_evd_post(evd, &ev, kind, fl);
        if (rc != DAT_SUCCESS && cqe->status != EMU_WC_FLUSHED)
            request_break(ep, true);
    }
    /* Any status but success (or flushed: the connection is already
     * over) breaks the connection (L8505, L8243). */
    if (!ok && cqe->status != EMU_WC_FLUSHED && !dying)
        request_break(ep, false);
    if (s.kind == SD_DTO_BIND && s.obj != NULL) {
        struct sd_rmr *rmr = s.obj;
        sd_handle_put(&rmr->h);
    }
    if (srq != NULL && !post)
        sd_srq_done(srq); /* no event: the buffer is no longer outstanding */
}

static void send_done(void *ctx, const struct emu_cqe *cqe)
{
    complete(ctx, false, cqe);
}

static void recv_done(void *ctx, const struct emu_cqe *cqe)
{
    complete(ctx, true, cqe);
}

static const struct emu_qp_ops dto_qp_ops = {
    .send_done = send_done,
    .recv_done = recv_done,
    .fatal = sd_cnt_qp_fatal, /* only counts (counters.c) */
};

static void complete_flushed(struct sd_ep *ep, bool recv, uint32_t idx)
{
    struct emu_cqe cqe;
    memset(&cqe, 0, sizeof cqe);
    cqe.cookie = idx;
    cqe.op = recv ? EMU_WC_RECV : EMU_WR_SEND;
    cqe.status = EMU_WC_FLUSHED;
    complete(ep, recv, &cqe);
}

/* A post that cannot reach the wire: its FLUSHED completion must come
 * after the QP's flush (see the top of the file). */
static void flush_post(struct sd_ep *ep, bool recv, uint32_t idx)
{
    struct sd_dto_ring *r = recv ? &ep->dto->rq : &ep->dto->sq;
    if (!sd_dto_ring_defer(r, idx))
        complete_flushed(ep, recv, idx);
}

/* ---------------------------------------------------------------- init & co */

/* Which length limit a DTO is held to (SOFTDAT_DTO_LENGTH_LIMIT):
 *  "ia" (default): the IA's limits (SD_MAX_MESSAGE_SIZE / SD_MAX_RDMA_SIZE),
 *      as OFA providers behave. Deployed programs rely on it: Debian's dtest
 *      asks for max_rdma_size 64 KiB and then writes its whole buffer
 *      (4 MiB by default).
 *  "ep": the EP's max_message_size / max_rdma_size, which the EP has
 *      exactly as requested (L6336); longer DTOs complete
 *      DAT_DTO_ERR_LOCAL_LENGTH (6.8.2, L8549-8552). The spec's strict
 *      reading, for checking that a program sizes its EPs right.
 * An EP attribute of 0 means "no limit beyond the IA's" either way. Read
 * once: it is consulted on every post. */
static bool g_ia_limits = true;
static pthread_once_t g_limits_once = PTHREAD_ONCE_INIT;

static void read_length_limit_env(void)
{
    const char *v = getenv("SOFTDAT_DTO_LENGTH_LIMIT");
    if (v == NULL || *v == '\0' || strcmp(v, "ia") == 0)
        g_ia_limits = true;
    else if (strcmp(v, "ep") == 0)
        g_ia_limits = false;
    else
        SD_WARN("dto", "SOFTDAT_DTO_LENGTH_LIMIT=%s: expected ia or ep; using ia", v);
}

static bool ia_length_limits(void)
{
    pthread_once(&g_limits_once, read_length_limit_env);
    return g_ia_limits;
}

static uint64_t length_limit(DAT_SEG_LENGTH ep_value, uint64_t ia_value)
{
    if (ep_value == 0 || ia_length_limits())
        return ia_value;
    return ep_value;
}

DAT_RETURN sd_ep_dto_init(struct sd_ep *ep)
{
    if (sd_ep_is_ud(ep))
        return sd_ud_ep_init(ep);
    if (ep->qp != NULL || ep->dto != NULL)
        sd_ep_dto_fini(ep);
    struct sd_ia *ia = ep->h.ia;
    struct sd_ep_dto *d = calloc(1, sizeof *d);
    if (d == NULL)
        return SD_RET(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
    const DAT_EP_ATTR *a = &ep->attr;
    uint32_t nsq = clamp_u32(a->max_request_dtos, 1, SD_MAX_DTO_PER_EP);
    uint32_t nrq = clamp_u32(a->max_recv_dtos, 1, SD_MAX_DTO_PER_EP);
    if (sd_dto_ring_init(&d->sq, nsq) != 0 || sd_dto_ring_init(&d->rq, nrq) != 0) {
        sd_dto_ring_fini(&d->sq);
        sd_dto_ring_fini(&d->rq);
        free(d);
        return SD_RET(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
    }
    DAT_COUNT sge = a->max_request_iov;
    if (a->max_recv_iov > sge)
        sge = a->max_recv_iov;
    if (a->max_rdma_read_iov > sge)
        sge = a->max_rdma_read_iov;
    if (a->max_rdma_write_iov > sge)
        sge = a->max_rdma_write_iov;
    struct emu_qp_attr qa = {
        .mem = ia->mem,
        .pz = ep->pz != NULL ? ep->pz->epz : NULL,
        .srq = ep->srq != NULL ? ep->srq->esrq : NULL, /* receives come from the SRQ */
        .max_send_wr = nsq,
        .max_recv_wr = nrq,
        .max_sge = clamp_u32(sge, 1, EMU_QP_MAX_SGE),
        .max_message_size = length_limit(a->max_message_size, SD_MAX_MESSAGE_SIZE),
        .max_rdma_size = length_limit(a->max_rdma_size, SD_MAX_RDMA_SIZE),
        .ird = (uint16_t)clamp_u32(a->max_rdma_read_in, 0, SD_MAX_RDMA_READ_PER_EP_IN),
        .ord = (uint16_t)clamp_u32(a->max_rdma_read_out, 0, SD_MAX_RDMA_READ_PER_EP_OUT),
        .rnr_retry = ia->sem.ib ? ia->sem.rnr_retry : 0,
        .rnr_timer_us = ia->sem.rnr_timer_us,
        .placement_ack = ia->sem.ib,
        .ops = &dto_qp_ops,
        .ctx = ep,
    };
    SD_EP_LOG(SD_LOG_DEBUG, "dto", ep,
              "qp sq %u rq %u sge %u msg %llu rdma %llu ird %u ord %u flags req 0x%x recv 0x%x", nsq, nrq,
              qa.max_sge, (unsigned long long)qa.max_message_size, (unsigned long long)qa.max_rdma_size, qa.ird,
              qa.ord, a->request_completion_flags, a->recv_completion_flags);
    ep->dto = d;
    int rc = emu_qp_create(&qa, &ep->qp);
    if (rc != 0) {
        SD_EP_LOG(SD_LOG_WARN, "dto", ep, "emu_qp_create: %s", strerror(-rc));
        ep->qp = NULL;
        ep->dto = NULL;
        sd_dto_ring_fini(&d->sq);
        sd_dto_ring_fini(&d->rq);
        free(d);
        return SD_RET(DAT_INSUFFICIENT_RESOURCES, rc == -ENOMEM ? DAT_RESOURCE_MEMORY : DAT_RESOURCE_TEP);
    }
    return DAT_SUCCESS;
}

static void drain_deferred(struct sd_ep *ep, bool recv)
{
    struct sd_dto_ring *r = recv ? &ep->dto->rq : &ep->dto->sq;
    uint32_t i = sd_dto_ring_set_flushed(r, true);
    while (i != SD_DTO_NONE) {
        uint32_t next = sd_dto_ring_next(r, i);
        complete_flushed(ep, recv, i);
        i = next;
    }
}

void sd_ep_dto_fini(struct sd_ep *ep)
{
    sd_ud_ep_fini(ep);
    struct sd_ep_dto *d = ep->dto;
    if (d != NULL)
        atomic_store(&d->dying, true); /* the EP's streams die with it (L6032) */
    if (ep->qp != NULL) {
        emu_qp_destroy(ep->qp); /* completes everything (events dropped) */
        ep->qp = NULL;
    }
    if (d != NULL) {
        drain_deferred(ep, false);
        drain_deferred(ep, true);
        ep->dto = NULL;
        sd_dto_ring_fini(&d->sq);
        sd_dto_ring_fini(&d->rq);
        free(d);
    }
}

void sd_ep_dto_flush(struct sd_ep *ep)
{
    if (ep->dto == NULL)
        return;
    if (ep->qp != NULL)
        emu_qp_flush(ep->qp);
    /* Then whatever was posted after the connection died, in post order. */
    drain_deferred(ep, false);
    drain_deferred(ep, true);
}

DAT_RETURN sd_ep_dto_reset(struct sd_ep *ep)
{
    if (ep->dto == NULL || ep->qp == NULL)
        return DAT_SUCCESS;
    sd_ep_dto_flush(ep);
    int rc = emu_qp_reset(ep->qp);
    if (rc != 0) {
        SD_EP_LOG(SD_LOG_WARN, "dto", ep, "emu_qp_reset: %s", strerror(-rc));
        return SD_RET(DAT_INVALID_STATE, DAT_INVALID_STATE_EP_DISCONNECTED);
    }
    /* Every completion was delivered (or is gone with the reset, L7040):
     * fresh rings, out of flushed mode. */
    sd_dto_ring_clear(&ep->dto->sq);
    sd_dto_ring_clear(&ep->dto->rq);
    atomic_store(&ep->dto->breaking, false);
    return DAT_SUCCESS;
}

/* ---------------------------------------------------------------- posting */

/* Common tail of every send-queue post: take a slot, hand the WR to the
 * QP (or flush it). wr->cookie is filled in here. */
static DAT_RETURN post_sq(struct sd_ep *ep, const struct ep_snap *sn, struct emu_wr *wr, enum sd_dto_kind kind,
                          DAT_COMPLETION_FLAGS flags, DAT_DTO_COOKIE cookie, uint64_t len, void *obj,
                          uint32_t rmr_context)
{
    struct sd_dto_ring *r = &ep->dto->sq;
    uint32_t idx = sd_dto_ring_get(r, kind, flags, cookie, len);
    if (idx == SD_DTO_NONE) {
        SD_EP_LOG(SD_LOG_DEBUG, "dto", ep, "request queue full (%u outstanding, %u held by suppressed successes)",
               sd_dto_ring_outstanding(r), sd_dto_ring_held(r));
        return SD_RET(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEP);
    }
    if (obj != NULL) {
        emu_lock(&r->lock);
        r->s[idx].obj = obj;
        r->s[idx].rmr_context = rmr_context;
        emu_unlock(&r->lock);
    }
    if (!is_connected(sn->state)) { /* Disconnected: accepted, flushed (L7139) */
        flush_post(ep, false, idx);
        return DAT_SUCCESS;
    }
    wr->cookie = idx;
    if (flags & DAT_COMPLETION_SOLICITED_WAIT_FLAG)
        wr->flags |= EMU_WR_SOLICITED;
    if (flags & DAT_COMPLETION_BARRIER_FENCE_FLAG)
        wr->flags |= EMU_WR_FENCE;
    if (sd_dto_decide(kind, flags, sn->req_flags, true, false) == SD_DTO_NO_EVENT)
        wr->flags |= EMU_WR_QUIET;
    int rc = emu_qp_post_send(ep->qp, wr);
    if (rc == 0) {
        sd_cnt_ep_post(ep, kind, len);
        return DAT_SUCCESS;
    }
    if (rc == -ENOTCONN) { /* the connection just ended: flushed */
        flush_post(ep, false, idx);
        return DAT_SUCCESS;
    }
    sd_dto_ring_cancel(r, idx);
    SD_EP_LOG(SD_LOG_DEBUG, "dto", ep, "emu_qp_post_send: %s", strerror(-rc));
    if (rc == -ENOSPC)
        return SD_RET(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEP);
    if (rc == -EOPNOTSUPP)
        return SD_RET(DAT_MODEL_NOT_SUPPORTED, 0);
    return SD_RET(DAT_INTERNAL_ERROR, 0);
}

/* Handle + EP state for a request-queue post. On success *ep holds a
 * reference and *sn the snapshot. */
static DAT_RETURN begin_request(DAT_EP_HANDLE h, struct sd_ep **out, struct ep_snap *sn)
{
    struct sd_ep *ep;
    DAT_RETURN rc = sd_ep_get(h, &ep);
    if (rc != DAT_SUCCESS)
        return rc;
    snap(ep, sn);
    if (sd_ep_is_ud(ep)) /* datagrams only: dat_ib_post_send_ud (ep_ud.c) */
        rc = SD_RET(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP);
    else if (!is_connected(sn->state) && sn->state != DAT_EP_STATE_DISCONNECTED)
        rc = SD_RET(DAT_INVALID_STATE, sd_ep_state_subtype(sn->state));
    else if (ep->qp == NULL || ep->dto == NULL || sn->pz == NULL)
        rc = SD_RET(DAT_INVALID_STATE, DAT_INVALID_STATE_EP_NOTREADY);
    if (rc != DAT_SUCCESS) {
        sd_handle_put(&ep->h);
        return rc;
    }
    *out = ep;
    return DAT_SUCCESS;
}

static DAT_RETURN check_count(DAT_COUNT n, const DAT_LMR_TRIPLET *iov, DAT_COUNT max)
{
    if (n < 0 || n > max || n > EMU_QP_MAX_SGE)
        return SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    if (n > 0 && iov == NULL)
        return SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    return DAT_SUCCESS;
}

static DAT_RETURN do_send(DAT_EP_HANDLE ep_handle, DAT_COUNT n, DAT_LMR_TRIPLET *iov, DAT_DTO_COOKIE cookie,
                          DAT_COMPLETION_FLAGS flags, bool inv, DAT_RMR_CONTEXT inv_ctx)
{
    struct sd_ep *ep;
    struct ep_snap sn;
    DAT_RETURN rc = begin_request(ep_handle, &ep, &sn);
    if (rc != DAT_SUCCESS)
        return rc;
    struct emu_sge sge[EMU_QP_MAX_SGE];
    uint64_t total = 0;
    enum sd_dto_kind kind = inv ? SD_DTO_SEND_INV : SD_DTO_SEND;
    if ((rc = check_count(n, iov, sn.max_request_iov)) != DAT_SUCCESS)
        goto out;
    if (!sd_dto_flags_ok(kind, flags, sn.req_flags)) {
        rc = SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG5);
        goto out;
    }
    rc = sd_lmr_check_iov(ep->h.ia, sn.pz, iov, n, EMU_ACC_LOCAL_READ, sge, &total);
    if (rc != DAT_SUCCESS)
        goto out;
    struct emu_wr wr = {.op = EMU_WR_SEND, .nsge = (uint32_t)n, .sge = sge};
    if (inv) {
        wr.flags = EMU_WR_INVALIDATE;
        wr.inv_stag = inv_ctx;
    }
    /* Over max_message_size: accepted, completes DAT_DTO_ERR_LOCAL_LENGTH
     * (the QP checks it against the limit it was created with). */
    rc = post_sq(ep, &sn, &wr, kind, flags, cookie, total, NULL, 0);
out:
    sd_handle_put(&ep->h);
    return rc;
}

static DAT_RETURN sd_ep_post_send(DAT_EP_HANDLE ep, DAT_COUNT n, DAT_LMR_TRIPLET *iov, DAT_DTO_COOKIE cookie,
                                  DAT_COMPLETION_FLAGS flags)
{
    return do_send(ep, n, iov, cookie, flags, false, 0);
}

static DAT_RETURN sd_ep_post_send_with_invalidate(DAT_EP_HANDLE ep, DAT_COUNT n, DAT_LMR_TRIPLET *iov,
                                                  DAT_DTO_COOKIE cookie, DAT_COMPLETION_FLAGS flags,
                                                  DAT_BOOLEAN invalidate, DAT_RMR_CONTEXT ctx)
{
    if (invalidate != DAT_TRUE && invalidate != DAT_FALSE) {
        struct sd_ep *e;
        DAT_RETURN rc = sd_ep_get(ep, &e);
        if (rc != DAT_SUCCESS)
            return rc;
        sd_handle_put(&e->h);
        return SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG6);
    }
    return do_send(ep, n, iov, cookie, flags, invalidate == DAT_TRUE, ctx);
}

static DAT_RETURN sd_ep_post_recv(DAT_EP_HANDLE ep_handle, DAT_COUNT n, DAT_LMR_TRIPLET *iov,
                                  DAT_DTO_COOKIE cookie, DAT_COMPLETION_FLAGS flags)
{
    struct sd_ep *ep;
    DAT_RETURN rc = sd_ep_get(ep_handle, &ep);
    if (rc != DAT_SUCCESS)
        return rc;
    if (sd_ep_is_ud(ep)) {
        rc = sd_ud_post_recv(ep, n, iov, cookie, flags);
        sd_handle_put(&ep->h);
        return rc;
    }
    struct ep_snap sn;
    snap(ep, &sn);
    struct emu_sge sge[EMU_QP_MAX_SGE];
    uint64_t total = 0;
    /* Any state (L5957), but not on an SRQ EP (L7336). */
    if (sn.srq) {
        rc = SD_RET(DAT_INVALID_STATE, sd_ep_state_subtype(sn.state));
        goto out;
    }
    if (ep->qp == NULL || ep->dto == NULL || sn.pz == NULL) {
        rc = SD_RET(DAT_INVALID_STATE, sd_ep_state_subtype(sn.state));
        goto out;
    }
    if ((rc = check_count(n, iov, sn.max_recv_iov)) != DAT_SUCCESS)
        goto out;
    if (!sd_dto_flags_ok(SD_DTO_RECV, flags, sn.recv_flags)) {
        rc = SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG5);
        goto out;
    }
    rc = sd_lmr_check_iov(ep->h.ia, sn.pz, iov, n, EMU_ACC_LOCAL_WRITE, sge, &total);
    if (rc != DAT_SUCCESS)
        goto out;
    struct sd_dto_ring *r = &ep->dto->rq;
    uint32_t idx = sd_dto_ring_get(r, SD_DTO_RECV, flags, cookie, total);
    if (idx == SD_DTO_NONE) {
        rc = SD_RET(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEP);
        goto out;
    }
    if (sn.state == DAT_EP_STATE_DISCONNECTED) { /* flushed at once (L7334) */
        flush_post(ep, true, idx);
        goto out;
    }
    int e = emu_qp_post_recv(ep->qp, idx, (uint32_t)n, sge);
    if (e == 0)
        sd_cnt_ep_post(ep, SD_DTO_RECV, total);
    if (e != 0) {
        sd_dto_ring_cancel(r, idx);
        rc = e == -ENOSPC ? SD_RET(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEP) : SD_RET(DAT_INTERNAL_ERROR, 0);
    }
out:
    sd_handle_put(&ep->h);
    return rc;
}

static DAT_RETURN do_rdma(DAT_EP_HANDLE ep_handle, bool read, DAT_COUNT n, DAT_LMR_TRIPLET *iov,
                          DAT_DTO_COOKIE cookie, const DAT_RMR_TRIPLET *remote, DAT_COMPLETION_FLAGS flags,
                          bool imm, uint32_t imm_data)
{
    struct sd_ep *ep;
    struct ep_snap sn;
    DAT_RETURN rc = begin_request(ep_handle, &ep, &sn);
    if (rc != DAT_SUCCESS)
        return rc;
    struct emu_sge sge[EMU_QP_MAX_SGE];
    uint64_t total = 0;
    enum sd_dto_kind kind = read ? SD_DTO_RDMA_READ : imm ? SD_DTO_WRITE_IMM : SD_DTO_RDMA_WRITE;
    if ((rc = check_count(n, iov, read ? sn.max_read_iov : sn.max_write_iov)) != DAT_SUCCESS)
        goto out;
    if (remote == NULL) {
        rc = SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG5);
        goto out;
    }
    if (!sd_dto_flags_ok(kind, flags, sn.req_flags)) {
        rc = SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG6);
        goto out;
    }
    rc = sd_lmr_check_iov(ep->h.ia, sn.pz, iov, n, read ? EMU_ACC_LOCAL_WRITE : EMU_ACC_LOCAL_READ, sge, &total);
    if (rc != DAT_SUCCESS)
        goto out;
    /* The transfer length is the local one (L7405, L7618); the remote
     * triplet's segment_length is not a bound the target checks (its
     * registration is, L7455), so it is not checked here either. The
     * remote buffer's real size is known only to the target (an overrun
     * completes REMOTE_ACCESS and breaks the connection); the one overrun
     * visible here is a remote range that wraps the address space, which
     * no buffer can hold: DAT_LENGTH_ERROR, no side effects (L7457). */
    if (total > 0 && remote->virtual_address + (total - 1) < remote->virtual_address) {
        rc = SD_RET(DAT_LENGTH_ERROR, 0);
        goto out;
    }
    struct emu_wr wr = {
        .op = read ? EMU_WR_READ : imm ? EMU_WR_WRITE_IMM : EMU_WR_WRITE,
        .nsge = (uint32_t)n,
        .sge = sge,
        .remote_stag = remote->rmr_context,
        .remote_to = remote->virtual_address,
        .imm = imm_data,
    };
    rc = post_sq(ep, &sn, &wr, kind, flags, cookie, total, NULL, 0);
out:
    sd_handle_put(&ep->h);
    return rc;
}

static DAT_RETURN sd_ep_post_rdma_read(DAT_EP_HANDLE ep, DAT_COUNT n, DAT_LMR_TRIPLET *iov, DAT_DTO_COOKIE cookie,
                                       const DAT_RMR_TRIPLET *remote, DAT_COMPLETION_FLAGS flags)
{
    return do_rdma(ep, true, n, iov, cookie, remote, flags, false, 0);
}

static DAT_RETURN sd_ep_post_rdma_write(DAT_EP_HANDLE ep, DAT_COUNT n, DAT_LMR_TRIPLET *iov, DAT_DTO_COOKIE cookie,
                                        const DAT_RMR_TRIPLET *remote, DAT_COMPLETION_FLAGS flags)
{
    return do_rdma(ep, false, n, iov, cookie, remote, flags, false, 0);
}

/* Read into a local RMR (L7459): the sink is the window's bound range.
 * "Local write privilege" of an RMR (L7512) is read as the window's
 * REMOTE_WRITE right: the window is checked exactly as an inbound RDMA
 * Write into it would be (STag, PZ, right, bounds, scope). */
static DAT_RETURN sd_ep_post_rdma_read_to_rmr(DAT_EP_HANDLE ep_handle, const DAT_RMR_TRIPLET *local,
                                              DAT_DTO_COOKIE cookie, const DAT_RMR_TRIPLET *remote,
                                              DAT_COMPLETION_FLAGS flags)
{
    struct sd_ep *ep;
    struct ep_snap sn;
    DAT_RETURN rc = begin_request(ep_handle, &ep, &sn);
    if (rc != DAT_SUCCESS)
        return rc;
    struct emu_sge sge[1];
    if (local == NULL) {
        rc = SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
        goto out;
    }
    if (remote == NULL) {
        rc = SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG4);
        goto out;
    }
    if (!sd_dto_flags_ok(SD_DTO_READ_TO_RMR, flags, sn.req_flags)) {
        rc = SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG5);
        goto out;
    }
    uint32_t nsge = 0;
    if (local->segment_length > 0) {
        struct emu_mem_ref ref;
        enum emu_mem_status st = emu_mem_check_remote(ep->h.ia->mem, local->rmr_context, local->virtual_address,
                                                      local->segment_length, EMU_MEM_OP_WRITE, sn.pz->epz,
                                                      sn.conn_id, &ref);
        switch (st) {
        case EMU_MEM_OK: break;
        case EMU_MEM_E_PZ:
        case EMU_MEM_E_SCOPE: rc = SD_RET(DAT_PROTECTION_VIOLATION, 0); break;
        case EMU_MEM_E_TO_WRAP:
        case EMU_MEM_E_BOUNDS: rc = SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2); break;
        default: rc = SD_RET(DAT_PRIVILEGES_VIOLATION, 0); break;
        }
        if (rc != DAT_SUCCESS)
            goto out;
        sge[0].addr = ref.ptr;
        sge[0].len = local->segment_length;
        nsge = 1;
        /* Like local iovecs: the consumer keeps the window bound while
         * the Read is outstanding. */
        emu_mem_put(&ref);
    }
    /* As for dat_ep_post_rdma_read: a wrapping remote range (L7510). */
    if (local->segment_length > 0 &&
        remote->virtual_address + (local->segment_length - 1) < remote->virtual_address) {
        rc = SD_RET(DAT_LENGTH_ERROR, 0);
        goto out;
    }
    struct emu_wr wr = {
        .op = EMU_WR_READ,
        .nsge = nsge,
        .sge = sge,
        .remote_stag = remote->rmr_context,
        .remote_to = remote->virtual_address,
    };
    rc = post_sq(ep, &sn, &wr, SD_DTO_READ_TO_RMR, flags, cookie, local->segment_length, NULL, 0);
out:
    sd_handle_put(&ep->h);
    return rc;
}

/* ---------------------------------------------------------------- atomics */

static DAT_RETURN do_atomic(DAT_EP_HANDLE ep_handle, bool cas, uint64_t a1, uint64_t a2,
                            const DAT_LMR_TRIPLET *lbuf, DAT_DTO_COOKIE cookie, const DAT_RMR_TRIPLET *remote,
                            DAT_COMPLETION_FLAGS flags)
{
    struct sd_ep *ep;
    struct ep_snap sn;
    DAT_RETURN rc = begin_request(ep_handle, &ep, &sn);
    if (rc != DAT_SUCCESS)
        return rc;
    struct emu_sge sge[1];
    uint64_t total = 0;
    enum sd_dto_kind kind = cas ? SD_DTO_CMP_SWAP : SD_DTO_FETCH_ADD;
    /* The original value lands in one 8-byte local buffer. */
    if (lbuf == NULL || lbuf->segment_length != sizeof(uint64_t)) {
        rc = SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
        goto out;
    }
    if (remote == NULL) {
        rc = SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG5);
        goto out;
    }
    if (!sd_dto_flags_ok(kind, flags, sn.req_flags)) {
        rc = SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG6);
        goto out;
    }
    rc = sd_lmr_check_iov(ep->h.ia, sn.pz, lbuf, 1, EMU_ACC_LOCAL_WRITE, sge, &total);
    if (rc != DAT_SUCCESS)
        goto out;
    struct emu_wr wr = {
        .op = cas ? EMU_WR_CMP_SWAP : EMU_WR_FETCH_ADD,
        .nsge = 1,
        .sge = sge,
        .remote_stag = remote->rmr_context,
        .remote_to = remote->virtual_address,
        .atomic_add_or_cmp = a1,
        .atomic_swap = a2,
    };
    rc = post_sq(ep, &sn, &wr, kind, flags, cookie, total, NULL, 0);
out:
    sd_handle_put(&ep->h);
    return rc;
}

/* Entry points of the IB extension DTOs for the slot-80 dispatcher
 * (ibext.c). */
DAT_RETURN sd_ep_post_write_immed(DAT_EP_HANDLE ep, DAT_COUNT n, DAT_LMR_TRIPLET *iov, DAT_DTO_COOKIE cookie,
                                  const DAT_RMR_TRIPLET *remote, uint32_t imm, DAT_COMPLETION_FLAGS flags)
{
    return do_rdma(ep, false, n, iov, cookie, remote, flags, true, imm);
}

DAT_RETURN sd_ep_post_atomic(DAT_EP_HANDLE ep, bool cas, uint64_t a1, uint64_t a2, const DAT_LMR_TRIPLET *lbuf,
                             DAT_DTO_COOKIE cookie, const DAT_RMR_TRIPLET *remote, DAT_COMPLETION_FLAGS flags)
{
    return do_atomic(ep, cas, a1, a2, lbuf, cookie, remote, flags);
}

/* dat_rmr_bind / dat_rmr_create_for_ep: ep_rmr_bind.c */
void sd_ep_rmr_fill_table(DAT_PROVIDER *p);

void sd_ep_dto_fill_table(DAT_PROVIDER *p)
{
    p->ep_post_send_func = sd_ep_post_send;
    p->ep_post_send_with_invalidate_func = sd_ep_post_send_with_invalidate;
    p->ep_post_recv_func = sd_ep_post_recv;
    p->ep_post_rdma_read_func = sd_ep_post_rdma_read;
    p->ep_post_rdma_write_func = sd_ep_post_rdma_write;
    p->ep_post_rdma_read_to_rmr_func = sd_ep_post_rdma_read_to_rmr;
    sd_ibext_fill_table(p);
    sd_ep_rmr_fill_table(p);
}

/* ---- for ep_rmr_bind.c */
DAT_RETURN sd_ep_dto_begin_request(DAT_EP_HANDLE h, struct sd_ep **out, DAT_EP_STATE *state,
                                   DAT_COMPLETION_FLAGS *req_flags);
DAT_RETURN sd_ep_dto_post_bind(struct sd_ep *ep, DAT_EP_STATE state, struct emu_wr *wr, DAT_COMPLETION_FLAGS flags,
                               DAT_RMR_COOKIE cookie, struct sd_rmr *rmr, uint32_t new_ctx);

DAT_RETURN sd_ep_dto_begin_request(DAT_EP_HANDLE h, struct sd_ep **out, DAT_EP_STATE *state,
                                   DAT_COMPLETION_FLAGS *req_flags)
{
    struct ep_snap sn;
    DAT_RETURN rc = begin_request(h, out, &sn);
    if (rc == DAT_SUCCESS) {
        *state = sn.state;
        *req_flags = sn.req_flags;
    }
    return rc;
}

DAT_RETURN sd_ep_dto_post_bind(struct sd_ep *ep, DAT_EP_STATE state, struct emu_wr *wr, DAT_COMPLETION_FLAGS flags,
                               DAT_RMR_COOKIE cookie, struct sd_rmr *rmr, uint32_t new_ctx)
{
    struct ep_snap sn = {.state = state};
    sd_handle_ref(&rmr->h); /* put at completion */
    DAT_RETURN rc = post_sq(ep, &sn, wr, SD_DTO_BIND, flags, cookie, 0, rmr, new_ctx);
    if (rc != DAT_SUCCESS)
        sd_handle_put(&rmr->h);
    return rc;
}
