/* softdat data transfer: the work-request ring, the completion-flag
 * decision tables and the status mapping (lib/provider/ep_dto.h). Pure
 * logic, no handles, no network: unit-tested by test_dto_logic. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "lib/provider/ep_dto.h"

/* ---------------------------------------------------------------- ring */

static void ring_reset_locked(struct sd_dto_ring *r)
{
    for (uint32_t i = 0; i < r->cap; i++) {
        memset(&r->s[i], 0, sizeof r->s[i]);
        r->s[i].next = i + 1 < r->cap ? i + 1 : SD_DTO_NONE;
    }
    r->free_head = r->cap ? 0 : SD_DTO_NONE;
    r->nfree = r->cap;
    r->held_head = r->held_tail = SD_DTO_NONE;
    r->nheld = 0;
    r->def_head = r->def_tail = SD_DTO_NONE;
    r->flushed = false;
}

int sd_dto_ring_init(struct sd_dto_ring *r, uint32_t cap)
{
    memset(r, 0, sizeof *r);
    if (cap == 0)
        cap = 1;
    r->s = calloc(cap, sizeof *r->s);
    if (r->s == NULL)
        return -ENOMEM;
    r->cap = cap;
    emu_lock_init(&r->lock);
    ring_reset_locked(r);
    r->inited = true;
    return 0;
}

void sd_dto_ring_fini(struct sd_dto_ring *r)
{
    if (!r->inited)
        return;
    emu_lock_destroy(&r->lock);
    free(r->s);
    memset(r, 0, sizeof *r);
}

void sd_dto_ring_clear(struct sd_dto_ring *r)
{
    emu_lock(&r->lock);
    ring_reset_locked(r);
    emu_unlock(&r->lock);
}

uint32_t sd_dto_ring_get(struct sd_dto_ring *r, enum sd_dto_kind kind, DAT_COMPLETION_FLAGS flags,
                         DAT_DTO_COOKIE cookie, uint64_t len)
{
    emu_lock(&r->lock);
    uint32_t idx = r->free_head;
    if (idx != SD_DTO_NONE) {
        struct sd_dto_slot *s = &r->s[idx];
        r->free_head = s->next;
        r->nfree--;
        s->cookie = cookie;
        s->obj = NULL;
        s->len = len;
        s->next = SD_DTO_NONE;
        s->rmr_context = 0;
        s->flags = (uint16_t)flags;
        s->kind = (uint8_t)kind;
        s->state = SD_SLOT_POSTED;
    }
    emu_unlock(&r->lock);
    return idx;
}

static void free_locked(struct sd_dto_ring *r, uint32_t idx)
{
    struct sd_dto_slot *s = &r->s[idx];
    s->state = SD_SLOT_FREE;
    s->obj = NULL;
    s->next = r->free_head;
    r->free_head = idx;
    r->nfree++;
}

void sd_dto_ring_cancel(struct sd_dto_ring *r, uint32_t idx)
{
    emu_lock(&r->lock);
    if (idx < r->cap && r->s[idx].state == SD_SLOT_POSTED)
        free_locked(r, idx);
    emu_unlock(&r->lock);
}

static bool outstanding_locked(const struct sd_dto_ring *r, uint32_t idx)
{
    return idx < r->cap && (r->s[idx].state == SD_SLOT_POSTED || r->s[idx].state == SD_SLOT_DEFERRED);
}

/* (lock held, idx outstanding) */
static void complete_locked(struct sd_dto_ring *r, uint32_t idx, bool generated)
{
    if (!generated) {
        /* Suppressed success: stays outstanding (L8452). */
        struct sd_dto_slot *s = &r->s[idx];
        s->state = SD_SLOT_HELD;
        s->next = SD_DTO_NONE;
        if (r->held_tail == SD_DTO_NONE)
            r->held_head = idx;
        else
            r->s[r->held_tail].next = idx;
        r->held_tail = idx;
        r->nheld++;
    } else {
        free_locked(r, idx);
        /* A later completion was generated: the suppressed ones before it
         * are no longer outstanding. */
        uint32_t h = r->held_head;
        while (h != SD_DTO_NONE) {
            uint32_t n = r->s[h].next;
            free_locked(r, h);
            h = n;
        }
        r->held_head = r->held_tail = SD_DTO_NONE;
        r->nheld = 0;
    }
}

void sd_dto_ring_complete(struct sd_dto_ring *r, uint32_t idx, bool generated)
{
    emu_lock(&r->lock);
    if (outstanding_locked(r, idx))
        complete_locked(r, idx, generated);
    emu_unlock(&r->lock);
}

bool sd_dto_ring_finish(struct sd_dto_ring *r, uint32_t idx, DAT_COMPLETION_FLAGS ep_flags, bool ok, bool solicited,
                        struct sd_dto_slot *out, enum sd_dto_notify *n)
{
    emu_lock(&r->lock);
    bool known = outstanding_locked(r, idx);
    if (known) {
        *out = r->s[idx];
        *n = sd_dto_decide((enum sd_dto_kind)out->kind, out->flags, ep_flags, ok, solicited);
        complete_locked(r, idx, *n != SD_DTO_NO_EVENT);
    }
    emu_unlock(&r->lock);
    return known;
}

bool sd_dto_ring_peek(struct sd_dto_ring *r, uint32_t idx, struct sd_dto_slot *out)
{
    bool ok = false;
    emu_lock(&r->lock);
    if (outstanding_locked(r, idx)) {
        *out = r->s[idx];
        ok = true;
    }
    emu_unlock(&r->lock);
    return ok;
}

uint32_t sd_dto_ring_outstanding(struct sd_dto_ring *r)
{
    emu_lock(&r->lock);
    uint32_t n = r->cap - r->nfree;
    emu_unlock(&r->lock);
    return n;
}

uint32_t sd_dto_ring_held(struct sd_dto_ring *r)
{
    emu_lock(&r->lock);
    uint32_t n = r->nheld;
    emu_unlock(&r->lock);
    return n;
}

bool sd_dto_ring_defer(struct sd_dto_ring *r, uint32_t idx)
{
    bool queued = false;
    emu_lock(&r->lock);
    if (!r->flushed && idx < r->cap && r->s[idx].state == SD_SLOT_POSTED) {
        struct sd_dto_slot *s = &r->s[idx];
        s->state = SD_SLOT_DEFERRED;
        s->next = SD_DTO_NONE;
        if (r->def_tail == SD_DTO_NONE)
            r->def_head = idx;
        else
            r->s[r->def_tail].next = idx;
        r->def_tail = idx;
        queued = true;
    }
    emu_unlock(&r->lock);
    return queued;
}

uint32_t sd_dto_ring_set_flushed(struct sd_dto_ring *r, bool on)
{
    emu_lock(&r->lock);
    r->flushed = on;
    uint32_t head = SD_DTO_NONE;
    if (on) {
        head = r->def_head;
        r->def_head = r->def_tail = SD_DTO_NONE;
    }
    emu_unlock(&r->lock);
    return head;
}

uint32_t sd_dto_ring_next(struct sd_dto_ring *r, uint32_t idx)
{
    emu_lock(&r->lock);
    uint32_t n = idx < r->cap ? r->s[idx].next : SD_DTO_NONE;
    emu_unlock(&r->lock);
    return n;
}

/* ---------------------------------------------------------------- flags */

/* Flags each operation accepts (Tables 9-12 and 16). */
static DAT_COMPLETION_FLAGS allowed_flags(enum sd_dto_kind kind)
{
    switch (kind) {
    case SD_DTO_SEND:
    case SD_DTO_SEND_INV:
        return DAT_COMPLETION_SUPPRESS_FLAG | DAT_COMPLETION_SOLICITED_WAIT_FLAG |
               DAT_COMPLETION_UNSIGNALLED_FLAG | DAT_COMPLETION_BARRIER_FENCE_FLAG;
    case SD_DTO_WRITE_IMM: /* consumes a receive at the peer: SE applies */
        return DAT_COMPLETION_SUPPRESS_FLAG | DAT_COMPLETION_SOLICITED_WAIT_FLAG |
               DAT_COMPLETION_UNSIGNALLED_FLAG | DAT_COMPLETION_BARRIER_FENCE_FLAG;
    case SD_DTO_RDMA_WRITE:
    case SD_DTO_RDMA_READ:
    case SD_DTO_READ_TO_RMR:
    case SD_DTO_BIND:
    case SD_DTO_FETCH_ADD:
    case SD_DTO_CMP_SWAP:
        return DAT_COMPLETION_SUPPRESS_FLAG | DAT_COMPLETION_UNSIGNALLED_FLAG |
               DAT_COMPLETION_BARRIER_FENCE_FLAG;
    case SD_DTO_RECV:
        return DAT_COMPLETION_UNSIGNALLED_FLAG;
    }
    return 0;
}

bool sd_dto_flags_ok(enum sd_dto_kind kind, DAT_COMPLETION_FLAGS flags, DAT_COMPLETION_FLAGS ep_flags)
{
    if (flags & ~allowed_flags(kind))
        return false; /* includes SUPPRESS on a Recv, EVD_THRESHOLD on any post */
    /* UNSIGNALLED only on an EP whose completion-flag attribute for this
     * queue is UNSIGNALLED (L7135, L7288, L7411, L8271): a threshold EP or
     * a solicited-wait receive side refuses it (decision tables). */
    if ((flags & DAT_COMPLETION_UNSIGNALLED_FLAG) && !(ep_flags & DAT_COMPLETION_UNSIGNALLED_FLAG))
        return false;
    return true;
}

enum sd_dto_notify sd_dto_decide(enum sd_dto_kind kind, DAT_COMPLETION_FLAGS post_flags,
                                 DAT_COMPLETION_FLAGS ep_flags, bool success, bool solicited)
{
    if (sd_dto_is_recv(kind)) {
        /* Solicited-wait receive side: the peer's SE decides, success or
         * not (last table of 6.8.1). */
        if (ep_flags & DAT_COMPLETION_SOLICITED_WAIT_FLAG)
            return solicited ? SD_DTO_EVENT_NOTIFY : SD_DTO_EVENT_QUIET;
        return (post_flags & DAT_COMPLETION_UNSIGNALLED_FLAG) ? SD_DTO_EVENT_QUIET : SD_DTO_EVENT_NOTIFY;
    }
    if ((post_flags & DAT_COMPLETION_SUPPRESS_FLAG) && success)
        return SD_DTO_NO_EVENT;
    /* Errors always produce an event. The UNSIGNALLED table's row
     * "SUPPRESS=1, UNSIGNALLED=1, unsuccessful => WITHOUT notification"
     * is followed over the prose of L8454 (same result as the generic
     * rule below). A threshold EP cannot carry UNSIGNALLED, so all its
     * events are notifications. */
    return (post_flags & DAT_COMPLETION_UNSIGNALLED_FLAG) ? SD_DTO_EVENT_QUIET : SD_DTO_EVENT_NOTIFY;
}

/* ---------------------------------------------------------------- status */

DAT_DTO_COMPLETION_STATUS sd_dto_status(enum emu_wc_status st)
{
    switch (st) {
    case EMU_WC_SUCCESS: return DAT_DTO_SUCCESS;
    case EMU_WC_FLUSHED: return DAT_DTO_ERR_FLUSHED;
    case EMU_WC_LOC_LEN: return DAT_DTO_ERR_LOCAL_LENGTH;
    case EMU_WC_LOC_PROT: return DAT_DTO_ERR_LOCAL_PROTECTION;
    case EMU_WC_LOC_QP: return DAT_DTO_ERR_LOCAL_EP;
    case EMU_WC_BAD_RESP: return DAT_DTO_ERR_BAD_RESPONSE;
    case EMU_WC_REM_ACCESS: return DAT_DTO_ERR_REMOTE_ACCESS;
    case EMU_WC_REM_OP: return DAT_DTO_ERR_REMOTE_RESPONDER;
    case EMU_WC_TRANSPORT: return DAT_DTO_ERR_TRANSPORT;
    case EMU_WC_RNR: return DAT_DTO_ERR_RECEIVER_NOT_READY;
    case EMU_WC_BIND_FAILED: return DAT_RMR_OPERATION_FAILED;
    }
    return DAT_DTO_ERR_LOCAL_EP;
}
