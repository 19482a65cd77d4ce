/* The single point every frame leaves and enters through. Every socket
 * send and receive of the soft RNIC goes through emu_wire_send /
 * emu_wire_recv: MPA Request/Reply frames and RTR/Terminate FPDUs during
 * the handshake (emu/conn.c), the QP's FPDUs (emu_conn_writev, emu/qp_rx.c),
 * bytes drained after the QP let go, UD datagrams (emu/ud.c).
 *
 * An observer installed with emu_wire_observe (a trace, a capture) sees
 * the bytes each call moved, in stream order per endpoint (`who`: the
 * emu_conn, or the emu_ud), both directions: enough to cut them into MPA
 * frames and FPDUs as a packet capture would. Without an observer the cost
 * is one relaxed atomic load per call. */
#ifndef SOFTDAT_EMU_WIRE_IO_H
#define SOFTDAT_EMU_WIRE_IO_H

#include <stddef.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

enum emu_wire_dir { EMU_WIRE_TX = 0, EMU_WIRE_RX = 1 };

struct emu_wire_observer {
    /* len bytes moved, the first len bytes of iov[0..iovcnt). Runs on the
     * thread that made the call, under whatever locks it holds: copy what
     * is needed and return; never call back into emu. */
    void (*bytes)(void *ctx, const void *who, enum emu_wire_dir dir, const struct iovec *iov,
                  size_t iovcnt, size_t len);
    void *ctx;
};

/* Install (or, with NULL, remove) the process-wide observer. The struct
 * must stay valid until it is removed and no call is in flight. */
void emu_wire_observe(const struct emu_wire_observer *obs);

/* sendmsg/recvmsg with the same results (-1 and errno on failure). */
ssize_t emu_wire_send(const void *who, int fd, const struct msghdr *mh, int flags);
ssize_t emu_wire_recv(const void *who, int fd, struct msghdr *mh, int flags);

/* One buffer: the common case. */
ssize_t emu_wire_send1(const void *who, int fd, const void *buf, size_t len, int flags);
ssize_t emu_wire_recv1(const void *who, int fd, void *buf, size_t len, int flags);

#endif
