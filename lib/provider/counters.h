/* softdat counters of the IB extension (dat_ib_query_counters & co.):
 * one array of relaxed atomics per IA, EP and EVD, indexed by the
 * DCNT_IA_* / DCNT_EP_* / DCNT_EVD_* enums of dat_ib_extensions.h.
 *
 * Counting is one relaxed fetch-add at a point the object already passes
 * (publish/unpublish of a handle, a post, a completion, a connection
 * event, an event queued on an EVD): no lock, no allocation. Which event
 * each counter counts is listed in docs/counters.md. */
#ifndef SOFTDAT_PROVIDER_COUNTERS_H
#define SOFTDAT_PROVIDER_COUNTERS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <dat2/dat_ib_extensions.h>

struct sd_handle;
struct sd_ia;
struct sd_ep;
struct sd_evd;
struct emu_qp_fatal;

struct sd_cnt_ia {
    _Atomic uint64_t v[DCNT_IA_ALL_COUNTERS];
};
struct sd_cnt_ep {
    _Atomic uint64_t v[DCNT_EP_ALL_COUNTERS];
};
/* The dequeue group is derived (sd_cnt_query): a dequeue counts only
 * FOUND or NOT_FOUND, one locked add instead of four on every call of a
 * polling loop; DEQUEUE is their sum, the POLL pair equals it on a DTO
 * EVD (whose dequeue always polls its connections) and is 0 elsewhere.
 * Those two are never zeroed: a reset moves dq_base, what the derived
 * values are counted from. */
#define SD_CNT_EVD_DQ_FIRST DCNT_EVD_DEQUEUE
#define SD_CNT_EVD_DQ_N (DCNT_EVD_DEQUEUE_POLL_FOUND - DCNT_EVD_DEQUEUE + 1)
struct sd_cnt_evd {
    _Atomic uint64_t v[DCNT_EVD_ALL_COUNTERS];
    _Atomic uint64_t dq_base[SD_CNT_EVD_DQ_N];
};
_Static_assert(DCNT_EVD_DEQUEUE_FOUND == DCNT_EVD_DEQUEUE + 1 && DCNT_EVD_DEQUEUE_NOT_FOUND == DCNT_EVD_DEQUEUE + 2 &&
                   DCNT_EVD_DEQUEUE_POLL == DCNT_EVD_DEQUEUE + 3,
               "the dequeue counters are one group");

static inline void sd_cnt_add(_Atomic uint64_t *v, uint64_t n)
{
    atomic_fetch_add_explicit(v, n, memory_order_relaxed);
}

/* Each object embeds its array as member `cnt` (zeroed by calloc). */
#define SD_CNT_IA(ia, c) sd_cnt_add(&(ia)->cnt.v[(c)], 1)
#define SD_CNT_EP(ep, c, n) sd_cnt_add(&(ep)->cnt.v[(c)], (n))
#define SD_CNT_EVD(evd, c) sd_cnt_add(&(evd)->cnt.v[(c)], 1)

/* handle.c: an object of `h`'s type was published (created) or left its
 * IA (freed, or destroyed by IA close). Under the IA lock. */
void sd_cnt_object(struct sd_handle *h, bool created);
/* ep_dto.c: a request of `kind` (enum sd_dto_kind) of `len` bytes was
 * posted; a receive completed successfully with `len` bytes, `imm` when
 * it carried immediate data (Write with immediate). */
void sd_cnt_ep_post(struct sd_ep *ep, int kind, uint64_t len);
void sd_cnt_ep_recv(struct sd_ep *ep, uint64_t len, bool imm);
/* ep_dto.c: the QP's fatal error (emu_qp_ops.fatal; ctx is the EP):
 * link integrity (CRC), local or remote access errors. */
void sd_cnt_qp_fatal(void *ctx, const struct emu_qp_fatal *f);
/* ep_cm.c: an emu connection event (enum emu_conn_event_type) reached
 * this EP (engine thread; takes ep->lock); retries: refused connects the
 * soft RNIC retried for it (counted once, with its first event). */
void sd_cnt_conn_event(struct sd_ep *ep, int type, uint32_t retries);

/* Slot-80 operations (ibext.c). */
DAT_RETURN sd_cnt_query(DAT_HANDLE h, int cntr, DAT_UINT64 *out, int reset);
DAT_RETURN sd_cnt_print(DAT_HANDLE h, int cntr, int reset);
DAT_RETURN sd_cnt_start_stop(DAT_HANDLE h, int type, bool start);

#endif
