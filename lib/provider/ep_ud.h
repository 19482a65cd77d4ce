/* softdat IB unreliable datagrams (DAT_IB_SERVICE_TYPE_UD endpoints), the
 * provider half over emu/ud: see ep_ud.c. The hooks below are called
 * from ep_dto.c, ep_cm.c, cr.c and psp.c for UD endpoints / requests. */
#ifndef SOFTDAT_PROVIDER_EP_UD_H
#define SOFTDAT_PROVIDER_EP_UD_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include <dat2/dat_ib_extensions.h>

#include "emu/ud.h"
#include "lib/provider/ep.h"

struct sd_cr;

/* UD info carried in front of the consumer's private data in the MPA
 * Request and Reply of a UD address exchange (docs/wire.md §7.3). */
#define SD_UD_PDATA_HDR 16
/* Q_Key every softdat UD endpoint uses (exchanged, so a peer may differ). */
#define SD_UD_QKEY 0x5D0DA7A5u

static inline bool sd_ep_is_ud(const struct sd_ep *ep)
{
    return ep->attr.service_type == (DAT_SERVICE_TYPE)DAT_IB_SERVICE_TYPE_UD;
}

/* ep_dto.c hooks: create (or rebuild) / destroy the UD transport. */
DAT_RETURN sd_ud_ep_init(struct sd_ep *ep);
void sd_ud_ep_fini(struct sd_ep *ep);
DAT_RETURN sd_ud_post_recv(struct sd_ep *ep, DAT_COUNT n, DAT_LMR_TRIPLET *iov, DAT_DTO_COOKIE cookie,
                           DAT_COMPLETION_FLAGS flags);
/* Slot 80: DAT_IB_UD_SEND_OP, DAT_IB_UD_CM_FREE_OP, DAT_IB_UD_AH_FREE_OP
 * (arguments still in ap, in the order of dat_ib_extensions.h). */
DAT_RETURN sd_ud_extop(DAT_HANDLE handle, int op, va_list ap);

/* ep_cm.c hooks: dat_ep_connect / dat_ep_disconnect of a UD EP. */
DAT_RETURN sd_ud_connect(struct sd_ep *ep, const struct sockaddr *peer, socklen_t plen, const struct sockaddr *local,
                         socklen_t llen, uint64_t timeout_us, DAT_COUNT pdata_size, const void *pdata);
DAT_RETURN sd_ud_disconnect(struct sd_ep *ep, DAT_CLOSE_FLAGS flags);

/* psp.c hook: a request's private data. Returns how many leading bytes
 * are the UD header (0: an RC request) and fills qpn/qkey. */
uint16_t sd_ud_parse_request(const void *pdata, uint16_t len, uint32_t *qpn, uint32_t *qkey);
/* psp.c hook: turn a UD request's DAT_CONNECTION_REQUEST_EVENT into
 * DAT_IB_UD_CONNECTION_REQUEST_EVENT (type DAT_IB_UD_CONNECT_REQUEST, the
 * initiator's address in remote_ah). */
void sd_ud_request_event(const struct sd_cr *cr, DAT_EVENT *ev);
/* cr.c hook (dat_cr_handoff): a UD CR's private data with the UD header
 * put back in front, into out (cap bytes); returns its length. */
uint16_t sd_ud_request_pdata(const struct sd_cr *cr, uint8_t *out, size_t cap);
/* cr.c hook: dat_cr_accept where the CR or the EP is UD. */
DAT_RETURN sd_ud_accept(struct sd_cr *cr, struct sd_ep *ep, DAT_COUNT pdata_size, const void *pdata);

/* Drop counters of a UD EP (for the counters extension); false if the EP
 * is not UD. */
bool sd_ud_get_stats(struct sd_ep *ep, struct emu_ud_stats *out);
/* dat_ep_get_status / dat_ep_recv_query of a UD EP: sends not yet taken
 * by the kernel, receives posted. false if the EP has no UD transport. */
bool sd_ud_queue_counts(struct sd_ep *ep, uint32_t *send_queued, uint32_t *recv_posted);
/* The UD EP's QPN (its UDP port); 0 if not UD. */
uint32_t sd_ud_qpn(struct sd_ep *ep);

#endif
