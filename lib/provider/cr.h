/* softdat CR object: one pending connection request, from its
 * DAT_CONNECTION_REQUEST_EVENT to dat_cr_accept / reject / handoff. */
#ifndef SOFTDAT_PROVIDER_CR_H
#define SOFTDAT_PROVIDER_CR_H

#include <pthread.h>
#include <stdbool.h>
#include <sys/socket.h>

#include "emu/conn.h"
#include "lib/provider/handle.h"

struct sd_ep;

struct sd_cr {
    struct sd_handle h;
    pthread_mutex_t lock;         /* conn, ep */
    struct emu_conn *conn;        /* the request; NULL once answered or handed off */
    struct sd_ep *ep;             /* RSP EP or provider-created EP (reference held) */
    bool ep_is_provider;          /* ep was created for this CR: destroyed on reject */
    DAT_CONN_QUAL conn_qual;      /* the SP's qualifier */
    struct sockaddr_storage remote;
    socklen_t remote_len;
    DAT_PORT_QUAL remote_port;
    uint16_t peer_ird, peer_ord;
    bool ud;                      /* a UD address exchange (ep_ud.c): the initiator's */
    uint32_t ud_qpn, ud_qkey;     /* UD QPN and Q_Key */
    DAT_COUNT pdata_len;
    /* The consumer may rewrite this in place (dtest does) and hand it back
     * to dat_cr_accept: it lives as long as the CR. */
    uint8_t pdata[EMU_CONN_PDATA_RX_MAX];
};

/* Allocate (unpublished) a CR for `conn`. NULL on allocation failure. */
struct sd_cr *sd_cr_new(struct sd_ia *ia, struct emu_conn *conn, DAT_CONN_QUAL qual,
                        const void *pdata, uint16_t pdata_len, const struct sockaddr *peer,
                        socklen_t peer_len, uint16_t peer_ird, uint16_t peer_ord);

/* Private data arguments of connect/accept/reject: size in
 * [0, max_private_data_size] (else DAT_INVALID_PARAMETER|size_arg), data
 * non-NULL when size > 0 (else |pd_arg). */
/* Answering cr: take its request's connection (the CR no longer owns
 * it). DAT_INVALID_STATE when it was answered or handed off already. */
DAT_RETURN sd_cr_take_conn(struct sd_cr *cr, struct emu_conn **conn);
DAT_RETURN sd_cm_check_pdata(DAT_COUNT size, const void *pd, DAT_UINT32 size_arg, DAT_UINT32 pd_arg);

#endif
