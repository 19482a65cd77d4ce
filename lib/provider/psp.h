/* softdat service points: PSP (psp.c) and RSP (rsp.c) share one object
 * layout. Each owns an emu listener on the IA's address; the conn qual is
 * the TCP port. Incoming requests become CR objects (cr.c) announced by a
 * DAT_CONNECTION_REQUEST_EVENT on the SP's EVD. */
#ifndef SOFTDAT_PROVIDER_PSP_H
#define SOFTDAT_PROVIDER_PSP_H

#include <pthread.h>
#include <stdbool.h>

#include "emu/conn.h"
#include "lib/provider/handle.h"

struct sd_evd;
struct sd_ep;

/* dat_psp_create_any picks a free port in this range: below Linux's
 * default ephemeral range (32768-60999), so outgoing connections do not
 * compete for it, and above the registered ports the Debian tests use
 * below 20000 (15828 side channel). */
#define SD_PSP_ANY_LO 20000
#define SD_PSP_ANY_HI 32767

struct sd_sp {
    struct sd_handle h;
    pthread_mutex_t lock;         /* used, ep */
    struct emu_listener *listener;/* set at create, freed by teardown */
    struct sd_evd *evd;           /* dependency + reference held */
    DAT_CONN_QUAL conn_qual;
    DAT_PSP_FLAGS flags;          /* PSP */
    struct sd_ep *ep;             /* RSP: the reserved EP (reference held) */
    bool used;                    /* RSP: its one request has arrived */
    bool ep_is_provider;          /* RSP: ep was created by us (NULL ep_handle) */
    struct sd_sp *next;           /* process-wide list (cr_handoff lookup) */
};

/* Teardown shared by PSP and RSP handle ops. */
void sd_sp_teardown(struct sd_handle *h);
void sd_sp_release(struct sd_handle *h);

/* Registry of live SPs for cr_handoff. */
void sd_sp_register(struct sd_sp *sp);
void sd_sp_unregister(struct sd_sp *sp);
/* A live PSP of `ia` listening on `qual`, with a reference; NULL if none. */
struct sd_sp *sd_sp_find_psp(struct sd_ia *ia, DAT_CONN_QUAL qual);

/* Create a listener for sp on ia's address: port `qual`, or any in the
 * SD_PSP_ANY range when any is set. DAT_SUCCESS or the DAT error. */
DAT_RETURN sd_sp_listen(struct sd_sp *sp, DAT_CONN_QUAL qual, bool any);
/* The listener's request callback (ctx = the SP). */
extern const struct emu_listener_ops sd_sp_listener_ops;

/* Turn a request into a CR on sp (PSP: provider EP if asked; RSP: its EP)
 * and post the CR event. On failure the request connection is closed (the
 * initiator sees a non-peer reject). Engine or consumer thread. */
void sd_sp_deliver(struct sd_sp *sp, struct emu_conn *conn, const void *pdata, uint16_t pdata_len,
                   const struct sockaddr *peer, socklen_t peer_len, uint16_t peer_ird, uint16_t peer_ord);

void sd_psp_fill_table(DAT_PROVIDER *p);
void sd_rsp_fill_table(DAT_PROVIDER *p);
void sd_cr_fill_table(DAT_PROVIDER *p);

#endif
