/* softdat service points: PSP (psp.c), RSP (rsp.c) and CSP (csp.c) share
 * one object layout (a CSP extends it, csp.h). Each owns an emu listener;
 * PSPs and RSPs listen on the IA's address and their conn qual is the TCP
 * port, a CSP listens on the consumer's socket address. Incoming requests
 * become CR objects (cr.c) announced by a DAT_CONNECTION_REQUEST_EVENT on
 * the SP's EVD. */
#ifndef SOFTDAT_PROVIDER_PSP_H
#define SOFTDAT_PROVIDER_PSP_H

#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>

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

/* Teardown shared by every SP's handle ops. */
void sd_sp_teardown(struct sd_handle *h);
void sd_sp_release(struct sd_handle *h);

/* The common part of every SP create: validate evd_handle (live EVD of ia
 * with DAT_EVD_CR_FLAG, else DAT_INVALID_HANDLE|EVD_CR), allocate the
 * object of `ops` (unpublished) holding a dependency and a reference on
 * the EVD. On failure nothing is left behind. */
DAT_RETURN sd_sp_new(struct sd_ia *ia, const struct sd_handle_ops *ops, DAT_EVD_HANDLE evd_handle,
                     struct sd_sp **out);
/* The EP argument of dat_rsp_create / dat_iw_ssp_create: ep_handle's EP
 * (+1 ref), or with DAT_HANDLE_NULL a new provider EP (+1 ref); it must
 * belong to ia. *ep may be set on failure too: release it with
 * sd_sp_ep_put. */
DAT_RETURN sd_sp_ep_arg(struct sd_ia *ia, DAT_EP_HANDLE ep_handle, struct sd_ep **ep);
/* Reserve ep for sp (an idle EP: UNCONNECTED or UNCONFIGURED_UNCONNECTED,
 * else DAT_INVALID_STATE) and tie them: sp holds a reference on ep, a
 * provider EP (prov) is marked so. On failure sp is torn down and
 * discarded. */
DAT_RETURN sd_sp_reserve_ep(struct sd_sp *sp, struct sd_ep *ep, bool prov);
/* Drop the call's reference on ep (NULL: nothing); a provider EP that did
 * not end up reserved (rc failed) is destroyed. */
void sd_sp_ep_put(struct sd_ep *ep, bool prov, DAT_RETURN rc);
/* Publish sp and start listening with `listen` (which returns the DAT
 * error). On failure the SP is destroyed or discarded: do not touch it. */
DAT_RETURN sd_sp_start(struct sd_sp *sp, DAT_RETURN (*listen)(struct sd_sp *sp, void *arg), void *arg);
/* The common part of every SP query: validate the handle (+1 ref), the
 * mask against `all` (DAT_INVALID_PARAMETER|ARG2) and p (ARG3). */
DAT_RETURN sd_sp_query_get(DAT_HANDLE raw, uint32_t type, uint32_t bad_subtype, unsigned mask, unsigned all,
                           const void *p, struct sd_sp **out);
/* dat_{psp,rsp,csp}_free. */
DAT_RETURN sd_sp_free(DAT_HANDLE raw, uint32_t type, uint32_t bad_subtype);

/* Registry of live SPs for cr_handoff. */
void sd_sp_register(struct sd_sp *sp);
void sd_sp_unregister(struct sd_sp *sp);
/* A conn qual names a TCP port: its low 16 bits (spec: for IP transports
 * the port is the low-order 16 bits of the qualifier; dapltest's limit test
 * uses qualifiers like 184527646). Events and queries keep the full value;
 * two qualifiers with the same low bits share a port (DAT_CONN_QUAL_IN_USE).
 * Port 0 cannot be listened on or connected to. */
static inline int sd_conn_qual_ok(DAT_CONN_QUAL qual)
{
    return (qual & 0xFFFFu) != 0;
}

/* The live SP a CR of `ia` is handed off to on `qual`, with a reference;
 * NULL if none (cr.c documents the rule). */
struct sd_sp *sd_sp_find_handoff(struct sd_ia *ia, DAT_CONN_QUAL qual);

/* Create a listener for sp on `addr` (the IA's for PSP/RSP): port `port`,
 * or any in the SD_PSP_ANY range when any is set. 0 or the emu -errno;
 * on success the SP is registered and sp->conn_qual is the port. */
int sd_sp_listen_at(struct sd_sp *sp, const struct sockaddr *addr, socklen_t len, DAT_CONN_QUAL port, bool any,
                    const struct emu_listener_ops *ops);
/* Tests: when set, called by sd_sp_listen_at once the socket listens and
 * before the listener is published in sp->listener (under sp->lock), to
 * hold open the moment a request may arrive in. */
extern void (*sd_sp_test_listen_hook)(void);
/* sd_sp_listen_at on the IA's address with the PSP/RSP error mapping. */
DAT_RETURN sd_sp_listen(struct sd_sp *sp, DAT_CONN_QUAL qual, bool any);
/* The PSP/RSP listener's request callback (ctx = the SP). */
extern const struct emu_listener_ops sd_sp_listener_ops;

/* An EP that came with a request (provider-created: `prov`; else an RSP's
 * consumer EP) goes back where it came from: a provider EP is destroyed;
 * a consumer EP returns to RESERVED (keep_reserved: the request never
 * became a CR) or to UNCONNECTED and leaves its RSP. Drops the caller's
 * reference on ep. */
void sd_sp_ep_giveback(struct sd_ep *ep, bool prov, bool keep_reserved);

/* Turn a request into a CR on sp (PSP: provider EP if asked; RSP: its EP)
 * and post the CR event. On failure the request connection is closed (the
 * initiator sees a non-peer reject). Engine or consumer thread. */
void sd_sp_deliver(struct sd_sp *sp, struct emu_conn *conn, const void *pdata, uint16_t pdata_len,
                   const struct sockaddr *peer, socklen_t peer_len, uint16_t peer_ird, uint16_t peer_ord);

/* Same family and IP address (ports ignored). */
static inline bool sd_same_ip(const struct sockaddr *a, const struct sockaddr *b)
{
    if (a->sa_family != b->sa_family)
        return false;
    if (a->sa_family == AF_INET)
        return ((const struct sockaddr_in *)a)->sin_addr.s_addr == ((const struct sockaddr_in *)b)->sin_addr.s_addr;
    if (a->sa_family == AF_INET6)
        return memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr, &((const struct sockaddr_in6 *)b)->sin6_addr,
                      sizeof(struct in6_addr)) == 0;
    return false;
}

void sd_psp_fill_table(DAT_PROVIDER *p);
void sd_rsp_fill_table(DAT_PROVIDER *p);
void sd_cr_fill_table(DAT_PROVIDER *p);

#endif
