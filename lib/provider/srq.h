/* softdat SRQ object: a DAT shared receive queue over emu_srq.
 *
 * Buffers: a fixed slot table (resized only by dat_srq_resize) remembers
 * each posted buffer's user cookie and length; the emu_srq work request's
 * cookie is the slot index, so a post allocates nothing. A slot is in use
 * from the post until the completion of the receive that consumed it is
 * generated (ep_dto.c calls sd_srq_take, then sd_srq_deliver to queue the
 * event, or sd_srq_done when there is none). Admission
 * (DAT_INSUFFICIENT_RESOURCES) counts slots in use.
 *
 * outstanding_dto_count (the spec's "occupies an entry until its
 * completion is dequeued", L4917) is counted at query time, honestly:
 * slots in use + completions being delivered + receive completions of this
 * SRQ's EPs still queued (not yet dequeued) in their recv EVDs, found by
 * scanning those EVDs' queues under their locks. No hook in the EVD
 * dequeue path is needed and nothing is counted twice or lost when an EVD
 * drops an event (overflow) or an EP's stream dies with it.
 *
 * Each buffer is counted exactly once at every instant: the query holds
 * srq->lock over the counters and the EVD scan (no take or delivery can
 * move a buffer meanwhile), and waits, bounded, until no other thread is
 * inside an EVD post for this SRQ ("posting": the event may or may not be
 * visible yet, so it could be seen both in the EVD and as delivering).
 * The post itself runs without srq->lock: it may call a CNO's proxy agent,
 * which may call back into the SRQ (a thread's own posts are known and
 * never waited for).
 *
 * Low watermark: the async event is posted on the IA's async EVD with
 * event_number DAT_ASYNC_ERROR_PROVIDER_INTERNAL_ERROR (the spec defines
 * no event number for SRQ events, only the reason enum), dat_handle = the
 * SRQ, reason DAT_SRQ_LOW_WATERMARK_EVENT. Once per arming. */
#ifndef SOFTDAT_PROVIDER_SRQ_H
#define SOFTDAT_PROVIDER_SRQ_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "emu/qp.h"
#include "lib/provider/evq.h"
#include "lib/provider/handle.h"

struct sd_pz;
struct sd_ep;
struct sd_evd;

/* The event number SRQ async events (low watermark) are posted with. */
#define SD_SRQ_ASYNC_EVENT DAT_ASYNC_ERROR_PROVIDER_INTERNAL_ERROR

struct sd_srq_slot {
    DAT_DTO_COOKIE cookie;
    uint64_t len;
    uint32_t next; /* free list */
    bool used;
};

struct sd_srq {
    struct sd_handle h;
    /* Order: srq->lock before the emu_srq's lock and before ep->lock. The
     * completion path takes it under the QP's receive lock. */
    pthread_mutex_t lock;
    struct sd_pz *pz;          /* dependency held */
    struct emu_srq *esrq;      /* constant while live */
    DAT_SRQ_STATE state;
    DAT_COUNT max_recv_dtos;   /* admission limit (slots in use) */
    DAT_COUNT max_recv_iov;
    DAT_COUNT lw;
    atomic_bool lw_armed;
    struct sd_srq_slot *slots;
    uint32_t nslots;           /* >= max_recv_dtos (never shrinks) */
    uint32_t free_head;
    uint32_t in_use;           /* posted (on the SRQ or held by an EP) */
    uint32_t delivering;       /* taken, event not yet being posted */
    uint32_t posting;          /* taken, event being posted (visible or not) */
    unsigned posting_waiters;  /* queries waiting for posting to drain */
    pthread_cond_t posted;     /* posting dropped (CLOCK_MONOTONIC) */
    struct sd_link eps;        /* attached EPs (ep->srq_link) */
    unsigned neps;
};

static inline DAT_RETURN sd_srq_get(DAT_SRQ_HANDLE raw, struct sd_srq **out)
{
    struct sd_handle *h;
    DAT_RETURN rc = sd_handle_get(raw, DAT_HANDLE_TYPE_SRQ, DAT_INVALID_HANDLE_SRQ, &h);
    *out = rc == DAT_SUCCESS ? (struct sd_srq *)h : NULL;
    return rc;
}

void sd_srq_fill_table(DAT_PROVIDER *p);

/* ---- for ep.c: EP attachment (dependency taken/dropped by ep.c) */
void sd_srq_attach_ep(struct sd_srq *srq, struct sd_ep *ep);
void sd_srq_detach_ep(struct sd_srq *srq, struct sd_ep *ep);
/* Buffers currently held by EPs (taken from the SRQ, no completion
 * generated yet), over all the SRQ's EPs. */
uint32_t sd_srq_held_by_eps(struct sd_srq *srq);

/* ---- for ep_dto.c: the receive completion of an SRQ EP.
 * take: release the slot named by the emu cookie and return what was
 * posted; false for a cookie we never issued. The caller then builds the
 * event and posts it through deliver (sd_evd_post's result), which also
 * ends the delivery; without an event to post it calls done instead. */
bool sd_srq_take(struct sd_srq *srq, uint64_t emu_cookie, DAT_DTO_COOKIE *cookie, uint64_t *len);
DAT_RETURN sd_srq_deliver(struct sd_srq *srq, struct sd_evd *evd, const DAT_EVENT *ev, enum sd_evq_kind kind,
                          unsigned flags);
void sd_srq_done(struct sd_srq *srq);

/* ---- tests */
/* Force a state (ERROR/SHUTDOWN paths are otherwise unreachable: nothing in
 * a software SRQ can fail). */
void sd_srq_test_set_state(struct sd_srq *srq, DAT_SRQ_STATE s);
/* outstanding_dto_count as dat_srq_query computes it. */
DAT_COUNT sd_srq_outstanding(struct sd_srq *srq);

#endif
