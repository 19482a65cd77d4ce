/* softdat data transfer: the pieces of ep_dto.c that need no network and
 * no handles, so that they can be unit-tested on their own:
 *
 *  - the per-EP work-request ring (one per direction): a fixed array of
 *    slots holding what DAT needs back at completion (user cookie, flags,
 *    operation, requested length). The emu_wr cookie is the slot index, so
 *    a post allocates nothing. It also does the spec's slot accounting
 *    (L8448-8452): a request is outstanding until its completion is
 *    reaped; a SUPPRESSed request that succeeded has no completion, so its
 *    slot stays taken until a later completion on the same queue is
 *    generated.
 *  - the completion-flag rules: which flags a post may carry given the
 *    EP's completion-flag attribute, and whether a completion produces an
 *    event and whether that event is a notification (decision tables
 *    L8463-8500).
 *  - the emu_wc_status -> DAT_DTO_COMPLETION_STATUS mapping. */
#ifndef SOFTDAT_PROVIDER_EP_DTO_H
#define SOFTDAT_PROVIDER_EP_DTO_H

#include "emu/lock.h"
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "emu/qp.h"
#include "lib/provider/provider.h"

/* What a slot was posted as (decides the event built at completion). */
enum sd_dto_kind {
    SD_DTO_SEND = 1,
    SD_DTO_SEND_INV,
    SD_DTO_RDMA_WRITE,
    SD_DTO_RDMA_READ,
    SD_DTO_READ_TO_RMR,
    SD_DTO_BIND,
    SD_DTO_WRITE_IMM,  /* DAT_IB_RDMA_WRITE_IMMED_OP */
    SD_DTO_FETCH_ADD,  /* DAT_IB_FETCH_AND_ADD_OP */
    SD_DTO_CMP_SWAP,   /* DAT_IB_CMP_AND_SWAP_OP */
    SD_DTO_RECV,       /* the only kind on the receive ring */
};

static inline bool sd_dto_is_recv(enum sd_dto_kind k)
{
    return k == SD_DTO_RECV;
}

/* ---- work-request ring ---- */

#define SD_DTO_NONE UINT32_MAX

enum sd_dto_slot_state { SD_SLOT_FREE = 0, SD_SLOT_POSTED, SD_SLOT_HELD, SD_SLOT_DEFERRED };

struct sd_dto_slot {
    DAT_DTO_COOKIE cookie; /* the consumer's user_cookie (or rmr cookie) */
    void *obj;             /* bind: the struct sd_rmr being bound */
    uint64_t len;          /* requested length (sum of the local segments) */
    uint32_t next;         /* free list / held list */
    uint32_t rmr_context;  /* bind: the context returned to the consumer */
    uint16_t flags;        /* DAT_COMPLETION_FLAGS of the post */
    uint8_t kind;          /* enum sd_dto_kind */
    uint8_t state;         /* enum sd_dto_slot_state */
};

struct sd_dto_ring {
    emu_lock_t lock;
    struct sd_dto_slot *s;
    uint32_t cap;
    uint32_t nfree;
    uint32_t free_head;              /* LIFO free list (warm slots first) */
    uint32_t held_head, held_tail;   /* suppressed successes, FIFO */
    uint32_t nheld;
    uint32_t def_head, def_tail;     /* waiting for the connection's flush */
    bool flushed;                    /* connection over: posts flush at once */
    bool inited;
};

/* cap slots (>= 1). 0, or -ENOMEM. */
int sd_dto_ring_init(struct sd_dto_ring *r, uint32_t cap);
void sd_dto_ring_fini(struct sd_dto_ring *r);
/* Every slot free again (reset; caller made sure nothing is in flight). */
void sd_dto_ring_clear(struct sd_dto_ring *r);
/* Take a slot for a post; SD_DTO_NONE when every slot is outstanding. */
uint32_t sd_dto_ring_get(struct sd_dto_ring *r, enum sd_dto_kind kind, DAT_COMPLETION_FLAGS flags,
                         DAT_DTO_COOKIE cookie, uint64_t len);
/* The post did not happen (queue refused it): give the slot back. */
void sd_dto_ring_cancel(struct sd_dto_ring *r, uint32_t idx);
/* The slot's work request completed. generated: an event was produced for
 * it — the slot is released together with every earlier suppressed
 * success still held. !generated (suppressed success): the slot is held
 * until the next generated completion on this ring. */
void sd_dto_ring_complete(struct sd_dto_ring *r, uint32_t idx, bool generated);
/* A copy of slot idx, false if idx is out of range or the slot is not
 * outstanding (a cookie we never issued). */
bool sd_dto_ring_peek(struct sd_dto_ring *r, uint32_t idx, struct sd_dto_slot *out);
/* Outstanding slots (posted + held): what "queue full" is measured against. */
uint32_t sd_dto_ring_outstanding(struct sd_dto_ring *r);
/* Flushed completions must come after every earlier completion of the EP
 * (spec L5370-5376). A post that cannot reach the wire (state
 * Disconnected, or the QP refused it because the connection just died) is
 * deferred until sd_ep_dto_flush has flushed the QP, unless that already
 * happened: then false, and the caller completes it FLUSHED at once. */
bool sd_dto_ring_defer(struct sd_dto_ring *r, uint32_t idx);
/* Enter (on = true) or leave flushed mode. Entering returns the deferred
 * slots' list head (walk with sd_dto_ring_next, complete each FLUSHED). */
uint32_t sd_dto_ring_set_flushed(struct sd_dto_ring *r, bool on);
uint32_t sd_dto_ring_next(struct sd_dto_ring *r, uint32_t idx);
uint32_t sd_dto_ring_held(struct sd_dto_ring *r);

/* ---- completion flags ---- */

/* May a post of `kind` carry `flags` on an EP whose completion-flag
 * attribute for that queue is `ep_flags` (recv_completion_flags for Recv,
 * request_completion_flags otherwise)? Implements Tables 9-12/16 (flags
 * allowed per operation) and the "post error - invalid flag value" rows of
 * the decision tables. */
bool sd_dto_flags_ok(enum sd_dto_kind kind, DAT_COMPLETION_FLAGS flags, DAT_COMPLETION_FLAGS ep_flags);

/* What a completion produces. */
enum sd_dto_notify {
    SD_DTO_NO_EVENT = 0,  /* suppressed success: nothing queued */
    SD_DTO_EVENT_QUIET,   /* queued without notification */
    SD_DTO_EVENT_NOTIFY,  /* queued with notification */
};
enum sd_dto_notify sd_dto_decide(enum sd_dto_kind kind, DAT_COMPLETION_FLAGS post_flags,
                                 DAT_COMPLETION_FLAGS ep_flags, bool success, bool solicited);
/* A completion of slot idx in one step (one lock, where peek, decide and
 * complete took two): a copy of the slot in *out, whether it makes an
 * event in *n (sd_dto_decide with the EP's flags, the outcome and the
 * solicited bit), and the slot completed accordingly. false, nothing
 * changed, when the slot is not outstanding (a cookie we never issued). */
bool sd_dto_ring_finish(struct sd_dto_ring *r, uint32_t idx, DAT_COMPLETION_FLAGS ep_flags, bool ok, bool solicited,
                        struct sd_dto_slot *out, enum sd_dto_notify *n);

/* ---- statuses ---- */
DAT_DTO_COMPLETION_STATUS sd_dto_status(enum emu_wc_status st);

/* A consumer's count as a queue size within [lo, hi] (RC and UD rings). */
static inline uint32_t clamp_u32(DAT_COUNT v, uint32_t lo, uint32_t hi)
{
    if (v < (DAT_COUNT)lo)
        return lo;
    if ((uint32_t)v > hi)
        return hi;
    return (uint32_t)v;
}

#endif
