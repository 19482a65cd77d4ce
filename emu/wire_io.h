/* The single point every frame leaves and enters through. Every socket
 * send and receive of the soft RNIC goes through emu_wire_send /
 * emu_wire_recv: MPA Request/Reply frames and RTR/Terminate FPDUs during
 * the handshake (emu/conn.c), the QP's FPDUs (emu_conn_writev, emu/qp_rx.c),
 * bytes drained after the QP let go, UD datagrams (emu/ud.c).
 *
 * An observer installed with emu_wire_observe (a trace, a capture) sees
 * the bytes each call moved, in stream order per endpoint (`ep`: the
 * struct emu_wire_ep an emu_conn or emu_ud embeds), both directions:
 * enough to cut them into MPA frames and FPDUs as a packet capture would
 * (emu/wire_tap.c). Without an observer the cost is one relaxed atomic
 * load per call. */
#ifndef SOFTDAT_EMU_WIRE_IO_H
#define SOFTDAT_EMU_WIRE_IO_H

#include <stddef.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

enum emu_wire_dir { EMU_WIRE_TX = 0, EMU_WIRE_RX = 1 };

/* One wire endpoint: a TCP connection (emu_conn) or a UDP socket (emu_ud)
 * embeds one and passes it to every send and receive. It carries what an
 * observer needs to name the endpoint's frames, and the observer's own
 * state (`tap`, created by the observer on first use, freed by
 * emu_wire_ep_fini through the observer's release hook). */
struct emu_wire_ep {
    _Atomic(void *) tap;
    _Atomic uint64_t conn_id; /* the trace's connection id (0: not known yet) */
    uint32_t ia;              /* the trace's IA id (0: none) and its open time */
    uint64_t ia_t0_ns;
    bool datagram;            /* UDP (emu_ud), else a TCP stream */
    /* The stream's peer as the connection learned it (emu_wire_ep_set_peer),
     * for a trace whose first frame comes after a reset: getpeername then
     * fails. peer_len 0: not known. */
    struct sockaddr_storage peer;
    socklen_t peer_len;
};

struct emu_wire_observer {
    /* len bytes moved on fd, the first len bytes of mh->msg_iov; for a
     * datagram, mh->msg_name is the peer (when the caller gave one). Runs
     * on the thread that made the call, under whatever locks it holds (one
     * thread at a time per endpoint and direction): copy what is needed
     * and return; never call back into emu. began_ns: CLOCK_MONOTONIC
     * before the call (a frame is "sent" when it is handed to the socket,
     * so a receiver never sees it earlier than that). */
    void (*bytes)(void *ctx, struct emu_wire_ep *ep, int fd, enum emu_wire_dir dir,
                  const struct msghdr *mh, size_t len, uint64_t began_ns);
    /* The endpoint is going away: free ep->tap (never NULL here). */
    void (*release)(void *ctx, struct emu_wire_ep *ep);
    void *ctx;
};

/* Fresh endpoint (no tap, no connection id) of the IA whose trace id and
 * open time are ia/ia_t0_ns. */
void emu_wire_ep_init(struct emu_wire_ep *ep, bool datagram, uint32_t ia, uint64_t ia_t0_ns);
/* Before the stream's first frame: its peer's address. */
void emu_wire_ep_set_peer(struct emu_wire_ep *ep, const struct sockaddr *sa, socklen_t len);
/* Before the endpoint's memory goes: hands its tap to the observer. */
void emu_wire_ep_fini(struct emu_wire_ep *ep);
static inline void emu_wire_ep_set_conn(struct emu_wire_ep *ep, uint64_t conn_id)
{
    atomic_store_explicit(&ep->conn_id, conn_id, memory_order_relaxed);
}

/* Install (or, with NULL, remove) the process-wide observer. The struct
 * must stay valid until it is removed and no call is in flight. */
void emu_wire_observe(const struct emu_wire_observer *obs);

/* sendmsg/recvmsg with the same results (-1 and errno on failure). */
ssize_t emu_wire_send(struct emu_wire_ep *ep, int fd, const struct msghdr *mh, int flags);
ssize_t emu_wire_recv(struct emu_wire_ep *ep, int fd, struct msghdr *mh, int flags);

/* One buffer: the common case. */
ssize_t emu_wire_send1(struct emu_wire_ep *ep, int fd, const void *buf, size_t len, int flags);
ssize_t emu_wire_recv1(struct emu_wire_ep *ep, int fd, void *buf, size_t len, int flags);

#endif
