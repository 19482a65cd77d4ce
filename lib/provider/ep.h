/* softdat EP object: the DAT endpoint.
 *
 * Two files share it:
 *  - ep.c / ep_cm.c (with psp.c, rsp.c, cr.c): the object, its attributes,
 *    the connection state machine over emu/conn, connection events;
 *  - ep_dto.c: data-transfer posts and their completions over emu/qp.
 * Fields are grouped by owner; each side adds what it needs in its own
 * section. The EP's emu_qp exists for the EP's whole life (receives may be
 * posted while unconnected); it is attached to the emu_conn when the
 * connection is established and flushed when it ends. */
#ifndef SOFTDAT_PROVIDER_EP_H
#define SOFTDAT_PROVIDER_EP_H

#include <pthread.h>
#include <stdbool.h>
#include <sys/socket.h>

#include "emu/conn.h"
#include "emu/lock.h"
#include "emu/qp.h"
#include <stdio.h>

#include "emu/log.h"
#include "lib/provider/counters.h"
#include "lib/provider/handle.h"
#include "lib/provider/trace_rec.h"

struct sd_ia;
struct sd_pz;
struct sd_evd;
struct sd_srq;
struct sd_cr;
struct sd_ep_ud;

struct sd_prog_ent;

struct sd_ep {
    struct sd_handle h;

    /* ---- object and connection (ep.c, ep_cm.c) ---- */
    emu_lock_t lock;                /* state, conn, addresses, pdata */
    DAT_EP_STATE state;
    DAT_EP_ATTR attr;
    struct sd_pz *pz;               /* dependency held */
    struct sd_evd *recv_evd;        /* dependencies held; may be NULL */
    struct sd_evd *request_evd;
    struct sd_evd *connect_evd;
    struct sd_srq *srq;             /* dependency held; permanent (srq.c) */
    struct sd_link srq_link;        /* on srq->eps, under srq->lock */
    struct emu_conn *conn;          /* while connecting / connected / disconnecting */
    uint64_t conn_id;               /* unique per connection (window scope) */
    struct sockaddr_storage local_addr, remote_addr;
    DAT_CONN_QUAL local_port, remote_port;
    /* Serialises the consumer's connection calls on this EP (connect,
     * disconnect, accept, reset, free) around emu calls that may block
     * (emu_conn_free). Engine callbacks never take it; they take `lock`.
     * Order: cm_lock before lock. */
    pthread_mutex_t cm_lock;
    bool remote_set;                /* remote_addr/remote_port valid */
    bool local_set;                 /* local_addr/local_port valid (else the IA's) */
    bool aborting;                  /* disconnect asked while establishing */
    bool initiator;                 /* the current/last connection was ours (connect) */
    bool crc_known, crc_on;         /* MPA CRC of the current/last connection (ep_query) */
    bool provider_ep;               /* created by a PSP_PROVIDER_FLAG PSP, not yet accepted */
    struct sd_handle *rsp;          /* the RSP reserving this EP (no reference) */
    DAT_COMM comm;                  /* communicator (dat_ep_modify, set once) */
    bool comm_set;
    uint16_t ev_pdata_len;          /* private data of the last connection event */
    uint8_t ev_pdata[EMU_CONN_PDATA_RX_MAX];

    /* ---- data transfer (ep_dto.c) ---- */
    struct emu_qp *qp;
    /* consumer-progress registrations (progress.c), under its registry lock */
#define SD_EP_PROG_SLOTS 2
    struct sd_prog_ent *prog[SD_EP_PROG_SLOTS];
    /* Work-request rings (cookie slots, SUPPRESS accounting, deferred
     * flushes), lib/provider/ep_dto.h. Allocated by sd_ep_dto_init. */
    struct sd_ep_dto *dto;

    /* ---- unreliable datagrams (ep_ud.c): UD EPs only, instead of qp/dto ---- */
    struct sd_ep_ud *ud;
    struct sd_cnt_ep cnt; /* dat_ib_query_counters (counters.h) */
};

static inline DAT_RETURN sd_ep_get(DAT_EP_HANDLE raw, struct sd_ep **out)
{
    struct sd_handle *h;
    DAT_RETURN rc = sd_handle_get(raw, DAT_HANDLE_TYPE_EP, DAT_INVALID_HANDLE_EP, &h);
    *out = rc == DAT_SUCCESS ? (struct sd_ep *)h : NULL;
    return rc;
}

/* The log scope of an EP, "ep3 c2" (its id and current connection). */
static inline const char *sd_ep_scope(const struct sd_ep *ep, char buf[48])
{
    if (ep->conn_id != 0)
        snprintf(buf, 48, "ep%u c%llu", (unsigned)ep->h.id, (unsigned long long)ep->conn_id);
    else
        snprintf(buf, 48, "ep%u", (unsigned)ep->h.id);
    return buf;
}
/* A log message about an EP (emu/log.h SD_OLOG with the EP's scope). */
#define SD_EP_LOG(level, comp, ep, ...)                                                            \
    do {                                                                                           \
        char scope_[48];                                                                           \
        SD_OLOG((level), (comp), sd_ep_scope((ep), scope_), __VA_ARGS__);                          \
    } while (0)

/* Every EP state change goes through here (caller holds ep->lock) so that
 * the trace sees each one. */
static inline void sd_ep_set_state(struct sd_ep *ep, DAT_EP_STATE s)
{
    if (SD_TRACE_ON() && ep->state != s)
        sd_trace_ep_state(ep, ep->state, s);
    ep->state = s;
}

/* ---- provided by ep_dto.c, used by ep.c / ep_cm.c ---- */
/* Create ep->qp from ep->attr (at ep_create; after ep_modify of queue
 * sizes). DAT_SUCCESS or DAT_INSUFFICIENT_RESOURCES. */
DAT_RETURN sd_ep_dto_init(struct sd_ep *ep);
/* Destroy ep->qp (ep teardown): everything outstanding completes flushed. */
void sd_ep_dto_fini(struct sd_ep *ep);
/* The connection reached a terminal state: every outstanding DTO completes
 * DAT_DTO_ERR_FLUSHED in post order (before the DISCONNECTED / BROKEN
 * event is posted by the caller). */
void sd_ep_dto_flush(struct sd_ep *ep);
/* dat_ep_reset: back to a fresh QP. */
DAT_RETURN sd_ep_dto_reset(struct sd_ep *ep);
void sd_ep_dto_fill_table(DAT_PROVIDER *p);

/* ---- provided by ep.c / ep_cm.c ---- */
void sd_ep_fill_table(DAT_PROVIDER *p);
void sd_cm_fill_table(DAT_PROVIDER *p);   /* psp/rsp/cr/connect/disconnect */

/* ep.c: create an EP object (attr NULL: defaults; pz/evds may be NULL:
 * unconfigured). Arguments already validated and referenced by the caller;
 * the EP takes its own dependencies. */
DAT_RETURN sd_ep_create_obj(struct sd_ia *ia, struct sd_pz *pz, struct sd_evd *recv_evd,
                            struct sd_evd *request_evd, struct sd_evd *connect_evd,
                            const DAT_EP_ATTR *attr, DAT_EP_STATE state, struct sd_ep **out);
/* Provider defaults for a NULL ep_attributes. */
void sd_ep_default_attr(DAT_EP_ATTR *a);
/* True when the EP has everything a connection needs. */
bool sd_ep_configured_locked(const struct sd_ep *ep);
/* The DAT_INVALID_STATE subtype naming the EP's state. */
DAT_UINT32 sd_ep_state_subtype(DAT_EP_STATE s);
/* ep_cm.c: the emu_conn hooks of an EP's connection (ctx = the EP). */
extern const struct emu_conn_ops sd_ep_conn_ops;
/* Tests: when set, called on the engine thread once an EP's connection is
 * established and consumer threads may drive its receive side, before the
 * ESTABLISHED event is posted, to hold that moment open. */
extern void (*sd_ep_test_established_hook)(struct sd_ep *ep);
uint64_t sd_ep_next_conn_id(void);
/* ep_cm.c, ep->lock held and the connect's checks passed: ep becomes the
 * active side of a new connection to peer (port), *prm its parameters
 * (dat_ep_connect, dat_ep_common_connect, dat_iw_socket_connect). */
struct sockaddr_storage;
void sd_ep_begin_active_locked(struct sd_ep *ep, const struct sockaddr_storage *peer, DAT_CONN_QUAL port,
                               DAT_TIMEOUT timeout, struct emu_conn_params *prm);
/* ep_cm.c: emu_conn_params for ep (IRD/ORD from its attributes). */
void sd_ep_conn_params(const struct sd_ep *ep, struct emu_conn_params *p, uint64_t timeout_us);
struct sd_ia;
void sd_ep_connect_started(struct sd_ep *ep, struct sd_ia *ia, int r, struct emu_conn *c);

#endif
