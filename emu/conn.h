/* Connection manager of the soft RNIC: TCP listeners, active connect,
 * accept/reject, the MPA v2 handshake with peer-to-peer RTR, and teardown.
 * The data path (QPs) sits on an established struct emu_conn: it reads the
 * socket in its rx hook (engine thread) and writes with emu_conn_writev()
 * from any thread.
 *
 * Threads and locks (docs/emu-design.md has the full story):
 *  - Every callback (listener request, conn event, rx, tx) runs on the
 *    engine thread with NO emu lock held; a callback may call any function
 *    of this file, including emu_conn_free() / emu_listener_free() on the
 *    object it is called for.
 *  - connect/accept/reject/disconnect/fail never block and never deliver an
 *    event before they return: outcomes come later, as callbacks.
 *  - emu_conn_free()/emu_listener_free() block until the engine has
 *    detached the object (inline on the engine thread). After they return
 *    no callback for that object runs or is running. Do not call them while
 *    holding a lock that your callbacks take.
 *  - emu_engine_destroy() closes and frees every listener and connection of
 *    that engine without events; handles to them are dead afterwards.
 *
 * Events: each connection that was connected (active) or accepted
 * (passive) gets at most one ESTABLISHED and then exactly one terminal
 * event (every other type), unless it is freed first: after emu_conn_free()
 * nothing more is delivered. */
#ifndef SOFTDAT_EMU_CONN_H
#define SOFTDAT_EMU_CONN_H

#include "emu/engine.h"
#include "emu/mpa.h"

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

struct emu_conn;
struct emu_listener;

/* softdat capability marker (docs/wire.md §2.6): 8 bytes at the start of
 * the MPA private data (after the v2 IRD/ORD block) of both the Request and
 * the Reply: 'S' 'D' 'T' version(1) + capability mask (32-bit big-endian).
 * emu/conn adds and strips it; the consumer never sees it. */
#define EMU_CONN_CAP_MARKER_LEN 8
#define EMU_CONN_CAP_VERSION 1
#define EMU_CONN_CAP_ATOMICS (1u << 0) /* RFC 7306 Atomic Request/Response */
#define EMU_CONN_CAP_IMM (1u << 1)     /* RFC 7306 Immediate Data (write with immediate) */
#define EMU_CONN_CAPS_LOCAL (EMU_CONN_CAP_ATOMICS | EMU_CONN_CAP_IMM) /* what we offer */
/* Not negotiated but announced: this side confirms its Sends and Writes
 * with zero-length Reads (InfiniBand semantics), so its peer answers the
 * one in flight before it closes (emu_qp_quiesce). */
#define EMU_CONN_CAP_PROBES (1u << 2)

/* Largest consumer private data we send (connect, accept, reject): a v2
 * frame with PD_Length <= 256 (what siw and Chelsio accept) holding the
 * IRD/ORD block, our capability marker and the consumer's bytes: 244, the
 * provider's max_private_data_size (lib/provider/limits.h). Received
 * private data may be up to EMU_MPA_PD_MAX - 4 (508) bytes (a foreign peer
 * sends no marker). */
#define EMU_CONN_PDATA_MAX (EMU_MPA_PD_INTEROP - EMU_MPA_V2_LEN - EMU_CONN_CAP_MARKER_LEN)
#define EMU_CONN_PDATA_RX_MAX (EMU_MPA_PD_MAX - EMU_MPA_V2_LEN)

#define EMU_TIMEOUT_INFINITE UINT64_MAX

/* Defaults (microseconds). */
#define EMU_CONN_REQ_TIMEOUT_US 5000000u   /* passive: TCP accept -> whole MPA Request */
#define EMU_CONN_RTR_TIMEOUT_US 10000000u  /* passive: Reply sent -> RTR received */
#define EMU_CONN_CLOSE_TIMEOUT_US 3000000u /* graceful: our FIN -> peer's FIN */
#define EMU_CONN_REJECT_LINGER_US 1000000u /* reject Reply sent -> close */
#define EMU_CONN_ABORT_LINGER_US 2000000u  /* abrupt disconnect: our FIN -> peer's EOF, then close */
#define EMU_CONN_PEER_TIMEOUT_MS 60000u    /* a silent peer is given up after this
                                              (SOFTDAT_PEER_TIMEOUT_MS; conn_sock_tune) */
/* Active: a refused TCP connect (RST, nobody listens yet) is retried with a
 * fresh socket after 1, 2, 4, ... ms (at most EMU_CONN_REFUSED_BACKOFF_MAX_US
 * apart) for this long from the connect, and never past the caller's
 * timeout; only then NON_PEER_REJECTED (ECONNREFUSED). IB and iWARP
 * connection managers retry their requests likewise, and applications
 * (dtestx) connect a moment before the server listens. Environment
 * SOFTDAT_CONNECT_RETRY_MS overrides it (0: the first refusal is final). */
#define EMU_CONN_REFUSED_RETRY_US 250000u
#define EMU_CONN_REFUSED_BACKOFF_MAX_US 32000u

enum emu_conn_event_type {
    EMU_CONN_ESTABLISHED = 1,   /* both sides; active side carries the Reply's pdata */
    EMU_CONN_PEER_REJECTED,     /* active: Reply with R; carries its pdata */
    EMU_CONN_NON_PEER_REJECTED, /* active: refused (no listener), bad/no Reply, EOF */
    EMU_CONN_UNREACHABLE,       /* active: TCP connect failed to route / timed out */
    EMU_CONN_TIMED_OUT,         /* active: TCP up but no Reply within the timeout */
    EMU_CONN_ACCEPT_ERROR,      /* passive, after accept: no/bad RTR, peer gone */
    EMU_CONN_DISCONNECTED,      /* local disconnect done, or peer closed (FIN or RST) */
    EMU_CONN_BROKEN,            /* local error: emu_conn_fail, rx error, socket error */
};

struct emu_conn_event {
    enum emu_conn_event_type type;
    int err;                    /* errno-style detail, 0 if none (e.g. ECONNREFUSED,
                                   ECONNRESET, ETIMEDOUT, EPROTO) */
    uint32_t retries;           /* active: refused TCP connects retried so far
                                   (EMU_CONN_REFUSED_RETRY_US) */
    const void *pdata;          /* valid during the callback only */
    uint16_t pdata_len;
};

static inline bool emu_conn_event_is_terminal(enum emu_conn_event_type t)
{
    return t != EMU_CONN_ESTABLISHED;
}
const char *emu_conn_event_name(enum emu_conn_event_type t);

/* CRC policy. DEFAULT = environment SOFTDAT_CRC (on|off|auto, default auto).
 * auto: do not ask for CRC when both ends are loopback addresses, ask
 * otherwise. CRC is in use iff either side asks (RFC 5044), so "off" only
 * means "we do not ask". */
enum emu_crc_mode { EMU_CRC_DEFAULT = 0, EMU_CRC_AUTO, EMU_CRC_ON, EMU_CRC_OFF };
/* The mode SOFTDAT_CRC selects (read once). */
enum emu_crc_mode emu_conn_crc_env(void);

struct emu_conn_params {
    uint16_t ird;               /* inbound RDMA Reads we can serve (DAT max_rdma_read_in) */
    uint16_t ord;               /* outbound RDMA Reads we want (DAT max_rdma_read_out) */
    uint64_t timeout_us;        /* connect: establishment deadline (0 or
                                   EMU_TIMEOUT_INFINITE = none); accept: RTR wait
                                   (0 = EMU_CONN_RTR_TIMEOUT_US) */
    enum emu_crc_mode crc;
    bool no_p2p;                /* connect: plain RFC 5044 client/server mode
                                   (no RTR; interop/testing) */
    unsigned rtr_offer;         /* connect: enum emu_mpa_rtr set to offer;
                                   0 = WRITE|READ (SEND is never offered) */
    bool no_caps;               /* send no capability marker: behave like a plain
                                   iWARP peer (interop/testing; connect and accept) */
    bool probes;                /* announce EMU_CONN_CAP_PROBES in the marker */
    uint64_t trace_conn;        /* the trace's connection id for its frame records
                                   (emu/wire_tap.c); 0 = none */
};

/* Data path hooks. All optional; all run on the engine thread. */
struct emu_conn_ops {
    void (*event)(struct emu_conn *c, const struct emu_conn_event *ev, void *ctx);
    /* The socket is readable and the connection is established (or closing
     * after our FIN). Read with recv/readv on fd until EAGAIN (or stop early:
     * the watcher is level-triggered). Return EMU_RX_OK, EMU_RX_EOF (read
     * returned 0) or a negative errno: -ECONNRESET means the peer aborted
     * (DISCONNECTED), anything else (e.g. -EPROTO after sending a Terminate)
     * breaks the connection (BROKEN), EMU_RX_PAUSE: stop reading the socket
     * for now (receive flow control: the peer's bytes wait in TCP's window)
     * and call rx again after emu_conn_set_rx_retry's delay, or at once on
     * emu_conn_rx_kick. Without an rx hook the connection reads and
     * discards. Never close fd. */
    int (*rx)(struct emu_conn *c, int fd, void *ctx);
    /* The socket became writable after emu_conn_want_tx(c, true). */
    void (*tx)(struct emu_conn *c, void *ctx);
    /* An established connection's socket is about to be closed (peer
     * closed, disconnect, failure): after this returns nobody may touch the
     * fd (take your receive lock and forget it; emu_conn_writev is already
     * safe). Runs before the terminal event. Not called from
     * emu_conn_free() or engine destroy: stop using the fd before those. */
    void (*detach)(struct emu_conn *c, void *ctx);
};
enum { EMU_RX_OK = 0, EMU_RX_EOF = 1, EMU_RX_PAUSE = 2 };

/* Negotiated parameters of an established connection. */
struct emu_conn_info {
    bool initiator;
    int fd;
    struct sockaddr_storage local, peer;
    socklen_t local_len, peer_len;
    uint8_t mpa_rev;
    bool crc;                   /* CRC32c in both directions */
    bool p2p;                   /* an RTR was exchanged */
    enum emu_mpa_rtr rtr;       /* which one (WRITE or READ; NONE without p2p).
                                   A READ RTR used MSN 1 of queue 1 both ways:
                                   the data path starts Read Requests at MSN 2 */
    bool recv_first;            /* passive, no p2p: RFC 5044 requires us to receive
                                   one FPDU before sending any */
    uint16_t ird;               /* inbound reads we must serve */
    uint16_t ord;               /* outbound reads we may have in flight */
    uint32_t emss;              /* TCP_MAXSEG */
    uint32_t mulpdu;            /* emu_mpa_mulpdu(emss) */
    uint32_t caps;              /* EMU_CONN_CAP_* offered by both sides (capability
                                   markers in Request and Reply); 0 with a plain
                                   iWARP peer. The data path enables RFC 7306 from it */
    bool peer_probes;           /* the peer announced EMU_CONN_CAP_PROBES */
    bool request_early;         /* active: the TCP handshake was complete when
                                   connect() returned, the Request went out at once
                                   (no wait for write readiness) */
};

/* What a listener's owner learns about an incoming connection. */
struct emu_conn_request {
    struct emu_conn *conn;      /* the request handle: accept, reject or free it */
    const struct sockaddr *peer;
    socklen_t peer_len;
    const struct sockaddr *local;
    socklen_t local_len;
    uint16_t local_port;
    const void *pdata;          /* valid during the callback (also later via
                                   emu_conn_request_pdata) */
    uint16_t pdata_len;
    uint16_t peer_ird, peer_ord;
    bool peer_p2p;
    uint8_t mpa_rev;
    bool peer_marker;           /* the Request carried our capability marker */
    uint32_t peer_caps;         /* its mask (0 without a marker) */
};

struct emu_listener_ops {
    void (*request)(struct emu_listener *l, const struct emu_conn_request *req, void *ctx);
    /* Optional, adopted listeners only: the socket failed or closed
     * before a Request arrived (err: errno-style, 0 if unknown). */
    void (*lost)(struct emu_listener *l, int err, void *ctx);
};

/* ---- listeners ----
 * addr: IA address (IPv4 or IPv6; the port inside is ignored); port 0 =
 * kernel picks. SO_REUSEADDR; IPv6 listeners are V6ONLY. Returns 0,
 * -EADDRINUSE (port taken), -EADDRNOTAVAIL (address not local),
 * -EAFNOSUPPORT, -EINVAL, -EACCES or another -errno. */
int emu_listener_create(struct emu_engine *e, const struct sockaddr *addr, socklen_t len,
                        uint16_t port, const struct emu_listener_ops *ops, void *ctx,
                        struct emu_listener **out);
/* Same, on the first free port of [lo, hi], starting at a random point
 * (for dat_psp_create_any). -EADDRINUSE when all are taken. */
int emu_listener_create_range(struct emu_engine *e, const struct sockaddr *addr,
                              socklen_t len, uint16_t lo, uint16_t hi,
                              const struct emu_listener_ops *ops, void *ctx,
                              struct emu_listener **out);
uint16_t emu_listener_port(const struct emu_listener *l);
/* Stop listening. Connections still in their MPA Request phase are closed
 * (their initiators see NON_PEER_REJECTED); requests already delivered
 * belong to the owner and are not touched. */
void emu_listener_free(struct emu_listener *l);

/* ---- active side ----
 * Starts TCP connect + MPA Request with pdata (<= EMU_CONN_PDATA_MAX).
 * local (may be NULL) binds the source address (port 0). Active sockets get
 * SO_REUSEADDR, so their TIME_WAIT remnants never keep a later listener off
 * that port. The outcome is one of ESTABLISHED, PEER_REJECTED,
 * NON_PEER_REJECTED, UNREACHABLE, TIMED_OUT. A refused TCP connect is
 * retried for EMU_CONN_REFUSED_RETRY_US; if the timeout ends the retries
 * first the outcome is still NON_PEER_REJECTED (ECONNREFUSED): the host
 * answered, so neither UNREACHABLE nor TIMED_OUT fits.
 * Synchronous errors: -EINVAL (pdata too long, bad address), -EAFNOSUPPORT,
 * -EADDRNOTAVAIL (local bind), -EMFILE..., -ESHUTDOWN. */
int emu_conn_connect(struct emu_engine *e, const struct sockaddr *peer, socklen_t peer_len,
                     const struct sockaddr *local, socklen_t local_len,
                     const struct emu_conn_params *p, const void *pdata, uint16_t pdata_len,
                     const struct emu_conn_ops *ops, void *ctx, struct emu_conn **out);

/* The peer timeout in force (SOFTDAT_PEER_TIMEOUT_MS, read once). */
unsigned emu_conn_peer_timeout_ms(void);

/* ---- adopted sockets (iWARP socket service points) ----
 * The consumer's own connected TCP socket `fd` carries the MPA exchange.
 * emu works on a duplicate descriptor (non-blocking, Nagle off). The
 * consumer's descriptor is closed by emu at the moment the socket passes
 * to the connection for good (active: ESTABLISHED; passive: the Request is
 * delivered); until then, and on any other outcome, it stays the
 * consumer's with its file status flags restored.
 *
 * connect_fd: as emu_conn_connect to the socket's peer; the MPA Request
 * is sent at once. Errors: -EBADF/-ENOTSOCK (not a socket),
 * -EPROTONOSUPPORT (not a TCP stream socket), -ENOTCONN (not connected),
 * and those of emu_conn_connect. */
int emu_conn_connect_fd(struct emu_engine *e, int fd, const struct emu_conn_params *p, const void *pdata,
                        uint16_t pdata_len, const struct emu_conn_ops *ops, void *ctx, struct emu_conn **out);
/* listener_adopt: a listener with one connection, the socket fd, on which
 * it waits (without a deadline) for one MPA Request, delivered through
 * ops->request as from a listener. ops->lost reports a socket that fails
 * or closes first (the listener then has nothing left to deliver).
 * emu_listener_free before that gives the socket back to the consumer
 * (bytes of a partly read Request are lost). Same errors as connect_fd. */
int emu_listener_adopt(struct emu_engine *e, int fd, const struct emu_listener_ops *ops, void *ctx,
                       struct emu_listener **out);
/* The local and peer addresses of a TCP socket (for checks before
 * adopting it): 0, or the errors of connect_fd. */
int emu_sock_tcp_addrs(int fd, struct sockaddr_storage *local, socklen_t *llen, struct sockaddr_storage *peer,
                       socklen_t *plen);

/* ---- passive side ----
 * accept: send the Reply (pdata <= EMU_CONN_PDATA_MAX), wait for the RTR,
 * then ESTABLISHED; or ACCEPT_ERROR. The handle stays the caller's.
 * -EINVAL (pdata), -EALREADY (already answered). */
int emu_conn_accept(struct emu_conn *req, const struct emu_conn_params *p, const void *pdata,
                    uint16_t pdata_len, const struct emu_conn_ops *ops, void *ctx);
/* reject: Reply with R and pdata, then close. Consumes the handle (on
 * success the caller must not use req again). -EINVAL, -EALREADY. */
int emu_conn_reject(struct emu_conn *req, const void *pdata, uint16_t pdata_len);
/* The request's private data (valid until accept/reject/free). */
const void *emu_conn_request_pdata(const struct emu_conn *req, uint16_t *len);

/* ---- teardown ----
 * graceful: shutdown(SHUT_WR) (call it once your send side has handed every
 * byte to emu_conn_writev), DISCONNECTED when the peer's FIN arrives (or
 * after EMU_CONN_CLOSE_TIMEOUT_US, then err = ETIMEDOUT). Abrupt:
 * DISCONNECTED at once (detach first; emu_conn_writev fails from then on),
 * but on the wire a FIN after every byte already written, never a RST
 * while the peer may still be reading: the engine keeps the socket, reads
 * and discards until the peer's EOF or EMU_CONN_ABORT_LINGER_US (then RST),
 * and closes it. emu_conn_free during that time hands the socket to the
 * engine (no events either way). While connecting/accepting: aborts (RST),
 * DISCONNECTED. Already terminal: no-op. 0 or -EINVAL (a request not yet
 * accepted: reject or free it instead). */
int emu_conn_disconnect(struct emu_conn *c, bool graceful);
/* The data path found a fatal error: deliver BROKEN (err) and end the
 * connection. No-op if terminal. Without last words (below) with a RST;
 * after them like an abrupt disconnect: the last words, then FIN, then
 * the linger (EMU_CONN_ABORT_LINGER_US, RST if the peer does not read
 * them or close by then). */
int emu_conn_fail(struct emu_conn *c, int err);
/* The data path sent (or is sending) a Terminate: the connection must end
 * with a FIN behind it, never a RST that would discard it (finding H2,
 * docs/reliability.md). iov holds the bytes of it the socket did not take
 * yet (the rest of the FPDU in flight, then the Terminate FPDU; possibly
 * none): they are copied (at most EMU_CONN_LAST_WORDS_MAX bytes in all,
 * -ENOSPC beyond) and written by the engine, through the one frame exit,
 * once the connection fails (emu_conn_fail, or the rx hook's error).
 * emu_conn_writev fails from then on (-EPIPE): nothing may follow them.
 * Any thread, serialised with emu_conn_writev by the caller (its send-queue
 * lock). Appends; 0, -EINVAL, -ENOMEM, -ENOSPC. */
int emu_conn_last_words(struct emu_conn *c, const struct iovec *iov, int iovcnt);
#define EMU_CONN_LAST_WORDS_MAX (66u * 1024u) /* an FPDU (16-bit ULPDU) + a Terminate */
/* Close in any state, no further events. An established (or closing)
 * connection ends like an abrupt disconnect on the wire (FIN after the
 * bytes already written; the engine lingers, then closes and frees it);
 * one still connecting or accepting is reset. */
void emu_conn_free(struct emu_conn *c);

/* ---- data path access ---- */
int emu_conn_get_info(struct emu_conn *c, struct emu_conn_info *out);
/* The connection's wire endpoint (emu/wire_io.h): what the QP passes to
 * emu_wire_send/recv for the connection's socket. */
struct emu_wire_ep *emu_conn_wire(struct emu_conn *c);
struct emu_engine *emu_conn_engine(const struct emu_conn *c);
void *emu_conn_ctx(const struct emu_conn *c);
/* Replace ops/ctx (engine thread, e.g. from the ESTABLISHED callback). */
void emu_conn_set_ops(struct emu_conn *c, const struct emu_conn_ops *ops, void *ctx);
/* Non-blocking gather write from any thread, serialised with teardown
 * (the fd stays valid for the call). Returns bytes written (possibly
 * partial), -EAGAIN, -ENOTCONN (not established / closed) or -errno.
 * Callers serialise among themselves (their send-queue lock). */
ssize_t emu_conn_writev(struct emu_conn *c, const struct iovec *iov, int iovcnt);
/* Ask for (or stop) ops->tx calls on writability. Any thread. */
void emu_conn_want_tx(struct emu_conn *c, bool on);
/* After an rx hook returned EMU_RX_PAUSE, run it again after usec (default
 * 1 ms). Engine thread (e.g. from the ESTABLISHED callback). */
void emu_conn_set_rx_retry(struct emu_conn *c, uint32_t usec);
/* Engine thread, from the rx hook: run the hook again within usec even if
 * nothing arrives (reading goes on meanwhile), unless it is due to run
 * again by then already: what it kept for later (emu/qp: a probe answer
 * waiting for the application's reply, an owed probe) goes by then. A
 * later deadline does not re-arm the timer: re-arming at every call (a
 * ping-pong keeps an answer per message) cost a blocking 64 B Write
 * ping-pong 2-3 us a message. */
void emu_conn_rx_again_after(struct emu_conn *c, uint32_t usec);
/* Engine thread: the hook is due to run again within usec (a timer). */
bool emu_conn_rx_again_within(struct emu_conn *c, uint32_t usec);
/* Any thread: run the rx hook of an established connection soon on the
 * engine, reading or not (a paused hook may now make progress, or bytes
 * another thread already took off the socket wait to be processed). */
int emu_conn_rx_kick(struct emu_conn *c);

/* Capability marker codec (docs/wire.md §2.6). encode writes
 * EMU_CONN_CAP_MARKER_LEN bytes. parse: true iff pd starts with a complete
 * version-1 marker (then *caps = its mask); anything else (shorter, other
 * bytes) is not a marker and belongs to the consumer. */
void emu_conn_caps_encode(uint8_t out[EMU_CONN_CAP_MARKER_LEN], uint32_t caps);
bool emu_conn_caps_parse(const uint8_t *pd, size_t len, uint32_t *caps);

/* Helpers for addresses (also used by the provider). */
bool emu_sockaddr_is_loopback(const struct sockaddr *sa);
/* Set on fd the TCP congestion control a connection to or from sa gets
 * (SOFTDAT_TCP_CONGESTION: unset or "auto": "reno" on loopback, where
 * pacing only delays, else the system's; "system": never set; a name: that
 * one everywhere). softdat-perf's raw-TCP baseline makes the same choice. */
void emu_tcp_congestion_apply(int fd, const struct sockaddr *sa);
/* The SO_RCVBUF a connection's socket gets, in bytes (0: none, the
 * kernel's own tuning; -1: env not understood). env is SOFTDAT_TCP_RCVBUF:
 * unset or "auto": on loopback EMU_TCP_RCVBUF_AUTO, or rmem_max
 * (net.core.rmem_max) if less, when rmem_max is at least
 * EMU_TCP_RCVBUF_MIN_AUTO (below that a fixed buffer would be no larger
 * than what the kernel's tuning reaches),
 * elsewhere none; "system": none; a number of bytes: that everywhere. */
#define EMU_TCP_RCVBUF_AUTO (4L << 20)
#define EMU_TCP_RCVBUF_MIN_AUTO (1L << 20)
long emu_tcp_rcvbuf_choice(const char *env, bool loopback, long rmem_max);
uint16_t emu_sockaddr_port(const struct sockaddr *sa);
/* "1.2.3.4:5" / "[::1]:5" into buf; returns buf. */
char *emu_sockaddr_str(const struct sockaddr *sa, char *buf, size_t len);

#endif
