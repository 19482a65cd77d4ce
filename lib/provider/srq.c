/* softdat SRQ: dat_srq_create / _free / _post_recv / _query / _resize /
 * _set_lw over emu_srq (lib/provider/srq.h for the accounting model).
 *
 * States: a software SRQ has nothing that can fail (no registered work
 * request memory to lose, L4903), so it is always OPERATIONAL while its
 * handle is live. The ERROR rules (set_lw/query/resize refused with
 * DAT_INVALID_STATE_SRQ_ERROR, post_recv still allowed, L4899) are
 * implemented and unit-tested through sd_srq_test_set_state. SHUTDOWN (the
 * deployed enum's third value) is never reported: a freed SRQ has no handle
 * to query.
 *
 * No buffer when a Send arrives for an SRQ EP (L4853: as an EP with an
 * empty receive queue): iWARP has no RNR retry, so the QP sends Terminate
 * (DDP untagged, error 0x02 "no buffer"), the connection breaks, the EP
 * gets DAT_CONNECTION_EVENT_BROKEN and the async DAT_ASYNC_ERROR_EP_BROKEN
 * (ep_cm.c). The SRQ itself stays OPERATIONAL.
 *
 * Lnnnn = line of the DAT 2.0 spec text (shared/research/spec-part2.md §2). */
#include "lib/provider/srq.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <dat2/dat_ib_extensions.h>

#include "emu/log.h"
#include "lib/provider/ep.h"
#include "lib/provider/evd.h"
#include "lib/provider/ia.h"
#include "lib/provider/limits.h"
#include "lib/provider/lmr.h"
#include "lib/provider/pz.h"

#define NONE UINT32_MAX

/* How long a query waits for other threads' EVD posts for this SRQ to end.
 * A post takes microseconds; the bound covers a loaded host under a
 * sanitizer. Past it the count is DAT_VALUE_UNKNOWN rather than a guess. */
#define POSTING_WAIT_US 2000000u

/* The EVD posts this thread is inside, innermost first (a CNO proxy agent
 * run by a post may query the SRQ, or complete another of its receives
 * through consumer progress): a query never waits for its own thread. */
struct posting_frame {
    const struct sd_srq *srq;
    struct posting_frame *prev;
};
static _Thread_local struct posting_frame *tl_posting;

/* ---------------------------------------------------------------- list */

static void link_init(struct sd_link *l)
{
    l->prev = l->next = l;
}

static void link_add(struct sd_link *head, struct sd_link *l)
{
    l->next = head;
    l->prev = head->prev;
    head->prev->next = l;
    head->prev = l;
}

static void link_del(struct sd_link *l)
{
    if (l->next == NULL)
        return;
    l->prev->next = l->next;
    l->next->prev = l->prev;
    l->prev = l->next = NULL;
}

#define EP_OF(l) ((struct sd_ep *)((char *)(l) - offsetof(struct sd_ep, srq_link)))

/* ---------------------------------------------------------------- slots */

/* Grow the slot table to n entries (srq->lock held, or not yet shared). */
static int slots_grow(struct sd_srq *srq, uint32_t n)
{
    if (n <= srq->nslots)
        return 0;
    struct sd_srq_slot *s = realloc(srq->slots, (size_t)n * sizeof *s);
    if (s == NULL)
        return -ENOMEM;
    /* New slots go on the free list after the existing ones. */
    for (uint32_t i = srq->nslots; i < n; i++) {
        memset(&s[i], 0, sizeof s[i]);
        s[i].next = i + 1 < n ? i + 1 : srq->free_head;
    }
    srq->free_head = srq->nslots;
    srq->slots = s;
    srq->nslots = n;
    return 0;
}

/* ---------------------------------------------------------------- events */

static void post_lw_event(struct sd_srq *srq)
{
    SD_DBG("srq", "srq %p: low watermark %d reached", (void *)srq, srq->lw);
    sd_ia_post_async(srq->h.ia, SD_SRQ_ASYNC_EVENT, (DAT_HANDLE)srq, DAT_SRQ_LOW_WATERMARK_EVENT);
}

/* emu_srq: an EP took a buffer and fewer than lw remain (QP receive lock
 * held). Fires once per arming: set_lw may already have fired it. */
static void lw_hit(void *ctx)
{
    struct sd_srq *srq = ctx;
    if (atomic_exchange(&srq->lw_armed, false))
        post_lw_event(srq);
}

/* ---------------------------------------------------------------- object */

static void srq_teardown(struct sd_handle *h)
{
    struct sd_srq *srq = (struct sd_srq *)h;
    if (srq->pz != NULL) {
        sd_handle_dep_put(&srq->pz->h);
        sd_handle_put(&srq->pz->h);
        srq->pz = NULL;
    }
}

static void srq_release(struct sd_handle *h)
{
    struct sd_srq *srq = (struct sd_srq *)h;
    /* No QP uses it any more: every attached EP (a dependency) is gone.
     * Buffers still on it return to the consumer (L4891). */
    if (srq->esrq != NULL)
        emu_srq_destroy(srq->esrq);
    srq->esrq = NULL;
    free(srq->slots);
    srq->slots = NULL;
    pthread_cond_destroy(&srq->posted);
    pthread_mutex_destroy(&srq->lock);
}

static const struct sd_handle_ops srq_ops = {
    .type = DAT_HANDLE_TYPE_SRQ,
    .name = "srq",
    .size = sizeof(struct sd_srq),
    .phase = SD_PHASE_SRQ,
    .teardown = srq_teardown,
    .release = srq_release,
};

static DAT_RETURN sd_srq_create(DAT_IA_HANDLE ia_handle, DAT_PZ_HANDLE pz_handle, DAT_SRQ_ATTR *attr,
                                DAT_SRQ_HANDLE *srq_handle)
{
    struct sd_ia *ia;
    DAT_RETURN rc = sd_ia_get(ia_handle, &ia);
    if (rc != DAT_SUCCESS)
        return rc;
    struct sd_pz *pz = NULL;
    if ((rc = sd_pz_get(pz_handle, &pz)) != DAT_SUCCESS)
        goto out;
    if (pz->h.ia != ia) {
        rc = SD_RET(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_PZ);
        goto out;
    }
    if (attr == NULL) {
        rc = SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
        goto out;
    }
    if (srq_handle == NULL) {
        rc = SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG4);
        goto out;
    }
    /* Beyond the advertised max_recv_per_srq / max_iov_segments_per_dto
     * is an invalid attribute (as for dat_ep_create). */
    if (attr->max_recv_dtos < 1 || attr->max_recv_dtos > SD_MAX_RECV_PER_SRQ || attr->max_recv_iov < 0 ||
        attr->max_recv_iov > SD_MAX_IOV_PER_DTO || attr->low_watermark < 0 ||
        attr->low_watermark > attr->max_recv_dtos) {
        rc = SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
        goto out;
    }
    struct sd_srq *srq = (struct sd_srq *)sd_handle_alloc(&srq_ops, ia);
    if (srq == NULL) {
        rc = SD_RET(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
        goto out;
    }
    pthread_mutex_init(&srq->lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&srq->posted, &ca);
    pthread_condattr_destroy(&ca);
    link_init(&srq->eps);
    srq->state = DAT_SRQ_STATE_OPERATIONAL;
    srq->max_recv_dtos = attr->max_recv_dtos;
    srq->max_recv_iov = attr->max_recv_iov > 0 ? attr->max_recv_iov : 1;
    srq->free_head = NONE;
    if (slots_grow(srq, (uint32_t)srq->max_recv_dtos) != 0) {
        sd_handle_discard(&srq->h);
        rc = SD_RET(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
        goto out;
    }
    struct emu_srq_attr ea = {
        .max_recv_wr = (uint32_t)srq->max_recv_dtos,
        .max_sge = (uint32_t)srq->max_recv_iov,
        .low_watermark = 0, /* armed below, after publish */
        .low_watermark_hit = lw_hit,
        .ctx = srq,
    };
    int erc = emu_srq_create(&ea, &srq->esrq);
    if (erc != 0) {
        srq->esrq = NULL;
        sd_handle_discard(&srq->h);
        rc = SD_RET(DAT_INSUFFICIENT_RESOURCES, erc == -ENOMEM ? DAT_RESOURCE_MEMORY : DAT_RESOURCE_SRQ);
        goto out;
    }
    if (!sd_handle_dep_get(&pz->h)) {
        sd_handle_discard(&srq->h);
        rc = SD_RET(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_PZ);
        goto out;
    }
    sd_handle_ref(&pz->h);
    srq->pz = pz;
    rc = sd_handle_publish(&srq->h);
    if (rc != DAT_SUCCESS) {
        sd_handle_dep_put(&pz->h);
        sd_handle_put(&pz->h);
        srq->pz = NULL;
        sd_handle_discard(&srq->h);
        goto out;
    }
    /* A non-default watermark on an empty SRQ fires at once (L4851). */
    if (attr->low_watermark > 0) {
        pthread_mutex_lock(&srq->lock);
        srq->lw = attr->low_watermark;
        atomic_store(&srq->lw_armed, true);
        emu_srq_set_lw(srq->esrq, (uint32_t)srq->lw);
        bool fire = atomic_exchange(&srq->lw_armed, false);
        pthread_mutex_unlock(&srq->lock);
        if (fire)
            post_lw_event(srq);
    }
    *srq_handle = (DAT_SRQ_HANDLE)srq;
out:
    if (pz != NULL)
        sd_handle_put(&pz->h);
    sd_handle_put(&ia->h);
    return rc;
}

static DAT_RETURN sd_srq_free(DAT_SRQ_HANDLE srq_handle)
{
    struct sd_srq *srq;
    DAT_RETURN rc = sd_srq_get(srq_handle, &srq);
    if (rc != DAT_SUCCESS)
        return rc;
    /* Allowed in any state, but only without EPs (L4893, L4997). */
    if (!sd_handle_try_retire(&srq->h))
        rc = SD_RET(DAT_INVALID_STATE, DAT_INVALID_STATE_SRQ_IN_USE);
    else
        rc = sd_handle_destroy(&srq->h, DAT_INVALID_HANDLE_SRQ);
    sd_handle_put(&srq->h);
    return rc;
}

/* Valid in every SRQ state (L5169); allocates nothing (L5155). */
static DAT_RETURN sd_srq_post_recv(DAT_SRQ_HANDLE srq_handle, DAT_COUNT n, DAT_LMR_TRIPLET *iov,
                                   DAT_DTO_COOKIE cookie)
{
    struct sd_srq *srq;
    DAT_RETURN rc = sd_srq_get(srq_handle, &srq);
    if (rc != DAT_SUCCESS)
        return rc;
    struct emu_sge sge[EMU_QP_MAX_SGE];
    uint64_t total = 0;
    if (n < 0 || n > srq->max_recv_iov) {
        rc = SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
        goto out;
    }
    /* Buffers must be in the SRQ's PZ (L4847, L5178). */
    rc = sd_lmr_check_iov(srq->h.ia, srq->pz, iov, n, EMU_ACC_LOCAL_WRITE, sge, &total);
    if (rc != DAT_SUCCESS)
        goto out;
    pthread_mutex_lock(&srq->lock);
    uint32_t idx = srq->free_head;
    if (srq->in_use >= (uint32_t)srq->max_recv_dtos || idx == NONE) {
        pthread_mutex_unlock(&srq->lock);
        rc = SD_RET(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_SRQ);
        goto out;
    }
    struct sd_srq_slot *s = &srq->slots[idx];
    int erc = emu_srq_post_recv(srq->esrq, idx, (uint32_t)n, sge);
    if (erc == 0) {
        srq->free_head = s->next;
        s->next = NONE;
        s->cookie = cookie;
        s->len = total;
        s->used = true;
        srq->in_use++;
    }
    pthread_mutex_unlock(&srq->lock);
    if (erc != 0)
        rc = erc == -ENOSPC ? SD_RET(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_SRQ)
                            : SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
out:
    sd_handle_put(&srq->h);
    return rc;
}

/* Is ev a receive completion of one of eps[0..n)? Pointer comparison only:
 * the EP an event names may be gone. */
static bool is_srq_recv(const DAT_EVENT *ev, struct sd_ep *const *eps, unsigned n)
{
    const DAT_DTO_COMPLETION_EVENT_DATA *c = &ev->event_data.dto_completion_event_data;
    if (ev->event_number == DAT_DTO_COMPLETION_EVENT) {
        if (c->operation != DAT_DTO_RECEIVE && c->operation != DAT_DTO_RECEIVE_WITH_INVALIDATE)
            return false;
    } else if (ev->event_number == (DAT_EVENT_NUMBER)DAT_IB_DTO_EVENT) {
        if (c->operation != (DAT_DTOS)DAT_IB_DTO_RECV_IMMED)
            return false;
    } else {
        return false;
    }
    for (unsigned i = 0; i < n; i++)
        if (c->ep_handle == (DAT_EP_HANDLE)eps[i])
            return true;
    return false;
}

/* Receive completions of the SRQ's EPs still waiting in their recv EVDs
 * (srq->lock held: no completion of the SRQ's EPs moves meanwhile). The
 * EVDs found get a reference in evds[] (put by the caller, unlocked);
 * -1 if out of memory. */
static DAT_COUNT count_unreaped_locked(struct sd_srq *srq, struct sd_evd **evds, unsigned *nevd_out)
{
    unsigned n = srq->neps;
    struct sd_ep **eps = n ? calloc(n, sizeof *eps) : NULL;
    unsigned nevd = 0, i = 0;
    *nevd_out = 0;
    if (n > 0 && eps == NULL)
        return -1;
    for (struct sd_link *l = srq->eps.next; l != &srq->eps && i < n; l = l->next) {
        struct sd_ep *ep = EP_OF(l);
        eps[i++] = ep;
        emu_lock(&ep->lock);
        struct sd_evd *evd = ep->recv_evd;
        bool seen = evd == NULL;
        for (unsigned j = 0; j < nevd && !seen; j++)
            seen = evds[j] == evd;
        if (!seen) {
            sd_handle_ref(&evd->h);
            evds[nevd++] = evd;
        }
        emu_unlock(&ep->lock);
    }
    *nevd_out = nevd;
    DAT_COUNT total = 0;
    for (unsigned j = 0; j < nevd; j++) {
        struct sd_evq *q = &evds[j]->q;
        if (!evds[j]->q_inited)
            continue;
        /* The queue's ring, read under its own lock (evq.h keeps the
         * layout public for the embedding EVD). Order: srq->lock before
         * an EVD queue's lock (evq calls out of nothing while holding it). */
        pthread_mutex_lock(&q->mu);
        DAT_COUNT cnt = atomic_load(&q->count);
        for (DAT_COUNT k = 0; k < cnt; k++) {
            DAT_COUNT at = q->head + k;
            if (at >= q->cap)
                at -= q->cap;
            if (is_srq_recv(&q->ring[at], eps, i))
                total++;
        }
        pthread_mutex_unlock(&q->mu);
    }
    free(eps);
    return total;
}

static unsigned own_posting(const struct sd_srq *srq)
{
    unsigned n = 0;
    for (const struct posting_frame *f = tl_posting; f != NULL; f = f->prev)
        n += f->srq == srq;
    return n;
}

DAT_COUNT sd_srq_outstanding(struct sd_srq *srq)
{
    unsigned own = own_posting(srq);
    struct timespec dl;
    clock_gettime(CLOCK_MONOTONIC, &dl);
    dl.tv_sec += POSTING_WAIT_US / 1000000u;
    dl.tv_nsec += (long)(POSTING_WAIT_US % 1000000u) * 1000;
    if (dl.tv_nsec >= 1000000000L) {
        dl.tv_sec++;
        dl.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&srq->lock);
    /* Another thread's event may be in its EVD already while its buffer
     * is still counted as posting: wait until only our own posts remain
     * (their events are queued, or lost to an overflow: either way the
     * scan is right about them). New posts need srq->lock to begin. */
    bool timed_out = false;
    while (srq->posting > own && !timed_out) {
        srq->posting_waiters++;
        timed_out = pthread_cond_timedwait(&srq->posted, &srq->lock, &dl) == ETIMEDOUT;
        srq->posting_waiters--;
    }
    if (srq->posting > own) {
        pthread_mutex_unlock(&srq->lock);
        SD_WARN("srq", "srq %p: deliveries did not end in %u us, outstanding count unknown", (void *)srq,
                POSTING_WAIT_US);
        return DAT_VALUE_UNKNOWN;
    }
    unsigned cap = srq->neps;
    struct sd_evd **evds = cap ? calloc(cap, sizeof *evds) : NULL;
    unsigned nevd = 0;
    DAT_COUNT queued = cap > 0 && evds == NULL ? -1 : count_unreaped_locked(srq, evds, &nevd);
    DAT_COUNT n = (DAT_COUNT)(srq->in_use + srq->delivering);
    pthread_mutex_unlock(&srq->lock);
    for (unsigned j = 0; j < nevd; j++)
        sd_handle_put(&evds[j]->h);
    free(evds);
    return queued < 0 ? DAT_VALUE_UNKNOWN : n + queued;
}

static DAT_RETURN sd_srq_query(DAT_SRQ_HANDLE srq_handle, DAT_SRQ_PARAM_MASK mask, DAT_SRQ_PARAM *p)
{
    struct sd_srq *srq;
    DAT_RETURN rc = sd_srq_get(srq_handle, &srq);
    if (rc != DAT_SUCCESS)
        return rc;
    if ((unsigned)mask & ~(unsigned)DAT_SRQ_FIELD_ALL) {
        rc = SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
        goto out;
    }
    if (p == NULL) {
        rc = SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
        goto out;
    }
    pthread_mutex_lock(&srq->lock);
    DAT_SRQ_STATE st = srq->state;
    pthread_mutex_unlock(&srq->lock);
    if (st == DAT_SRQ_STATE_ERROR) { /* not an allowed operation (L4899) */
        rc = SD_RET(DAT_INVALID_STATE, DAT_INVALID_STATE_SRQ_ERROR);
        goto out;
    }
    /* Every field, whatever the mask (a query may return more). */
    DAT_COUNT outstanding = sd_srq_outstanding(srq);
    pthread_mutex_lock(&srq->lock);
    p->ia_handle = sd_ia_consumer_handle(srq->h.ia);
    p->srq_state = srq->state;
    p->pz_handle = (DAT_PZ_HANDLE)srq->pz;
    p->max_recv_dtos = srq->max_recv_dtos;
    p->max_recv_iov = srq->max_recv_iov;
    p->low_watermark = srq->lw;
    p->available_dto_count = (DAT_COUNT)emu_srq_posted(srq->esrq);
    pthread_mutex_unlock(&srq->lock);
    p->outstanding_dto_count = outstanding;
out:
    sd_handle_put(&srq->h);
    return rc;
}

static DAT_RETURN sd_srq_resize(DAT_SRQ_HANDLE srq_handle, DAT_COUNT n)
{
    struct sd_srq *srq;
    DAT_RETURN rc = sd_srq_get(srq_handle, &srq);
    if (rc != DAT_SUCCESS)
        return rc;
    pthread_mutex_lock(&srq->lock);
    DAT_SRQ_STATE st = srq->state;
    pthread_mutex_unlock(&srq->lock);
    if (st == DAT_SRQ_STATE_ERROR) {
        rc = SD_RET(DAT_INVALID_STATE, DAT_INVALID_STATE_SRQ_ERROR);
        goto out;
    }
    if (n < 1 || n > SD_MAX_RECV_PER_SRQ) {
        rc = SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
        goto out;
    }
    /* Never below what is outstanding, unreaped completions included, and
     * never below the low watermark (L5082-5084): refused, unchanged. */
    DAT_COUNT outstanding = sd_srq_outstanding(srq);
    pthread_mutex_lock(&srq->lock);
    if (n < srq->lw || outstanding == DAT_VALUE_UNKNOWN || n < outstanding ||
        (uint32_t)n < srq->in_use + srq->delivering) {
        pthread_mutex_unlock(&srq->lock);
        rc = SD_RET(DAT_INVALID_STATE, DAT_INVALID_STATE_SRQ_OPERATIONAL);
        goto out;
    }
    if (slots_grow(srq, (uint32_t)n) != 0) {
        pthread_mutex_unlock(&srq->lock);
        rc = SD_RET(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
        goto out;
    }
    int erc = emu_srq_resize(srq->esrq, (uint32_t)n);
    if (erc == 0)
        srq->max_recv_dtos = n;
    pthread_mutex_unlock(&srq->lock);
    if (erc == -ENOMEM)
        rc = SD_RET(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
    else if (erc != 0)
        rc = SD_RET(DAT_INVALID_STATE, DAT_INVALID_STATE_SRQ_OPERATIONAL);
out:
    sd_handle_put(&srq->h);
    return rc;
}

static DAT_RETURN sd_srq_set_lw(DAT_SRQ_HANDLE srq_handle, DAT_COUNT lw)
{
    struct sd_srq *srq;
    DAT_RETURN rc = sd_srq_get(srq_handle, &srq);
    if (rc != DAT_SUCCESS)
        return rc;
    pthread_mutex_lock(&srq->lock);
    if (srq->state == DAT_SRQ_STATE_ERROR) {
        pthread_mutex_unlock(&srq->lock);
        rc = SD_RET(DAT_INVALID_STATE, DAT_INVALID_STATE_SRQ_ERROR);
        goto out;
    }
    if (lw < 0 || lw > srq->max_recv_dtos) {
        pthread_mutex_unlock(&srq->lock);
        rc = SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
        goto out;
    }
    /* (Re)arm whether or not the previous arming fired (L4979); the emu
     * side fires when an EP takes a buffer, we fire here when the SRQ is
     * already below. Whichever comes first disarms. */
    srq->lw = lw;
    atomic_store(&srq->lw_armed, lw > 0);
    emu_srq_set_lw(srq->esrq, (uint32_t)lw);
    bool fire = lw > 0 && emu_srq_posted(srq->esrq) < (uint32_t)lw && atomic_exchange(&srq->lw_armed, false);
    pthread_mutex_unlock(&srq->lock);
    if (fire)
        post_lw_event(srq);
out:
    sd_handle_put(&srq->h);
    return rc;
}

/* ---------------------------------------------------------------- EPs */

void sd_srq_attach_ep(struct sd_srq *srq, struct sd_ep *ep)
{
    pthread_mutex_lock(&srq->lock);
    link_add(&srq->eps, &ep->srq_link);
    srq->neps++;
    pthread_mutex_unlock(&srq->lock);
}

void sd_srq_detach_ep(struct sd_srq *srq, struct sd_ep *ep)
{
    pthread_mutex_lock(&srq->lock);
    if (ep->srq_link.next != NULL) {
        link_del(&ep->srq_link);
        srq->neps--;
    }
    pthread_mutex_unlock(&srq->lock);
}

uint32_t sd_srq_held_by_eps(struct sd_srq *srq)
{
    pthread_mutex_lock(&srq->lock);
    /* Posts and completions change in_use under our lock; EPs taking
     * buffers only lower the posted count: the difference is exact at the
     * moment the posted count is read. */
    uint32_t posted = emu_srq_posted(srq->esrq);
    uint32_t held = srq->in_use > posted ? srq->in_use - posted : 0;
    pthread_mutex_unlock(&srq->lock);
    return held;
}

bool sd_srq_take(struct sd_srq *srq, uint64_t emu_cookie, DAT_DTO_COOKIE *cookie, uint64_t *len)
{
    bool ok = false;
    pthread_mutex_lock(&srq->lock);
    if (emu_cookie < srq->nslots && srq->slots[emu_cookie].used) {
        struct sd_srq_slot *s = &srq->slots[emu_cookie];
        *cookie = s->cookie;
        *len = s->len;
        s->used = false;
        s->next = srq->free_head;
        srq->free_head = (uint32_t)emu_cookie;
        srq->in_use--;
        srq->delivering++;
        ok = true;
    }
    pthread_mutex_unlock(&srq->lock);
    return ok;
}

DAT_RETURN sd_srq_deliver(struct sd_srq *srq, struct sd_evd *evd, const DAT_EVENT *ev, enum sd_evq_kind kind,
                          unsigned flags)
{
    struct posting_frame f = {.srq = srq, .prev = tl_posting};
    pthread_mutex_lock(&srq->lock);
    if (srq->delivering > 0)
        srq->delivering--;
    srq->posting++;
    pthread_mutex_unlock(&srq->lock);
    /* Not under srq->lock: the post may run a CNO proxy agent. */
    tl_posting = &f;
    DAT_RETURN rc = sd_evd_post(evd, ev, kind, flags);
    tl_posting = f.prev;
    pthread_mutex_lock(&srq->lock);
    srq->posting--;
    if (srq->posting_waiters > 0)
        pthread_cond_broadcast(&srq->posted);
    pthread_mutex_unlock(&srq->lock);
    return rc;
}

void sd_srq_done(struct sd_srq *srq)
{
    pthread_mutex_lock(&srq->lock);
    if (srq->delivering > 0)
        srq->delivering--;
    pthread_mutex_unlock(&srq->lock);
}

void sd_srq_test_set_state(struct sd_srq *srq, DAT_SRQ_STATE s)
{
    pthread_mutex_lock(&srq->lock);
    srq->state = s;
    pthread_mutex_unlock(&srq->lock);
}

void sd_srq_fill_table(DAT_PROVIDER *p)
{
    p->srq_create_func = sd_srq_create;
    p->srq_free_func = sd_srq_free;
    p->srq_post_recv_func = sd_srq_post_recv;
    p->srq_query_func = sd_srq_query;
    p->srq_resize_func = sd_srq_resize;
    p->srq_set_lw_func = sd_srq_set_lw;
}
