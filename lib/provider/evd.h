/* softdat EVD object: handle, argument checks, IA/CNO references, the IA
 * async EVD. The queue semantics (waiting, overflow, CNO notification) are
 * the embedded event-queue core, struct sd_evq (lib/provider/evq.h,
 * docs/events.md).
 *
 * Producers (EPs, SPs, the engine) post with sd_evd_post(); IA-wide errors
 * go through sd_ia_post_async(). Before attaching a stream to an EVD, check
 * its flags with sd_evd_accepts() and take a dependency on it
 * (sd_handle_dep_get(&evd->h), dropped in the producer's teardown): that is
 * what makes dat_evd_free answer DAT_INVALID_STATE while streams feed it. */
#ifndef SOFTDAT_PROVIDER_EVD_H
#define SOFTDAT_PROVIDER_EVD_H

#include "lib/provider/evq.h"
#include "lib/provider/counters.h"
#include "lib/provider/handle.h"
#include "lib/provider/progress.h"

struct sd_ia;
struct sd_cno;

struct sd_evd {
    struct sd_handle h;
    DAT_EVD_FLAGS flags;   /* constant after create */
    DAT_COUNT qlen;        /* capacity granted at create (query reports the live value) */
    pthread_mutex_t cno_mu; /* guards cno (modify_cno vs teardown/query) */
    struct sd_cno *cno;    /* attached CNO (holds a dep + ref on it), or NULL */
    struct sd_evq q;       /* the queue; initialised with qlen = max(1, requested) */
    bool q_inited;
    /* DTO EVDs: the QPs whose completions land here, for consumer-driven
     * receive progress (progress.h). */
    struct sd_progress_set ps;
    bool ps_inited;

    struct sd_cnt_evd cnt; /* dat_ib_query_counters (counters.h) */
};

#define SD_EVD_VALID_FLAGS                                                                     \
    (DAT_EVD_SOFTWARE_FLAG | DAT_EVD_CR_FLAG | DAT_EVD_DTO_FLAG | DAT_EVD_CONNECTION_FLAG |    \
     DAT_EVD_RMR_BIND_FLAG | DAT_EVD_ASYNC_FLAG | DAT_EVD_EXTENSION_BASE)

/* Create and publish an EVD of `ia` (ia->h reference held by caller).
 * Validates qlen/flags like dat_evd_create; cno may be NULL. */
DAT_RETURN sd_evd_create_obj(struct sd_ia *ia, DAT_COUNT min_qlen, struct sd_cno *cno, DAT_EVD_FLAGS flags,
                             struct sd_evd **out);

/* Validate an EVD handle; +1 ref. bad_subtype selects the INVALID_HANDLE
 * subtype for the parameter it came from (EVD_ASYNC, EVD_RECV, ...). */
static inline DAT_RETURN sd_evd_get(DAT_EVD_HANDLE raw, uint32_t bad_subtype, struct sd_evd **out)
{
    struct sd_handle *h;
    DAT_RETURN rc = sd_handle_get(raw, DAT_HANDLE_TYPE_EVD, bad_subtype, &h);
    *out = rc == DAT_SUCCESS ? (struct sd_evd *)h : NULL;
    return rc;
}

/* Enqueue *ev (copied; evd_handle is stamped with this EVD). Overflow is
 * handled per kind (enum sd_evq_kind): a lost DTO/EXT/CONN event raises
 * DAT_ASYNC_ERROR_EVD_OVERFLOW on the IA's async EVD (coalesced). Notifies
 * a waiter or the attached CNO. Any thread, no provider lock held; the
 * caller holds a reference on evd (or a dependency that keeps it live).
 * Returns DAT_SUCCESS or DAT_QUEUE_FULL (not queued). */
DAT_RETURN sd_evd_post(struct sd_evd *evd, const DAT_EVENT *ev, enum sd_evq_kind kind, unsigned flags);

/* Post an asynch_error_event {num, handle, reason} on ia's async EVD, if it
 * has one (dropped otherwise, or when the IA is closing). IA-affiliated
 * events must pass sd_ia_consumer_handle(ia) as handle. */
void sd_ia_post_async(struct sd_ia *ia, DAT_EVENT_NUMBER num, DAT_HANDLE handle, DAT_COUNT reason);

/* How many times a thread spinning on an empty EVD has given its CPU away
 * (dat_evd_dequeue, process-wide), for tests and diagnostics. */
uint64_t sd_evd_spin_yields(void);

/* True if every bit of `stream` (DAT_EVD_*_FLAG, possibly several) is in
 * the EVD's flags: recv_evd needs DTO, request_evd DTO (and RMR_BIND for
 * binds), connect_evd CONNECTION, SP evd CR. */
static inline int sd_evd_accepts(const struct sd_evd *evd, DAT_EVD_FLAGS stream)
{
    return evd != NULL && (evd->flags & stream) == stream;
}

/* Set the de-facto notification config (ep.c, when completion streams with
 * UNSIGNALLED / SOLICITED_WAIT attach). */
static inline void sd_evd_set_config(struct sd_evd *evd, enum sd_evq_config cfg)
{
    sd_evq_set_config(&evd->q, cfg);
}

#endif
