/* Unreliable datagrams: the soft RNIC's UD queue pair.
 *
 * One emu_ud is one UD endpoint: a UDP socket bound to the IA's address
 * (ephemeral port), a send ring and a receive ring, and a read watcher on
 * the engine thread. Each datagram is one message (boundaries kept), in
 * RoCEv2 framing: BTH (12) + DETH (8) + payload + pad to 4 + ICRC (4),
 * docs/wire.md §7.
 *
 * Addressing: the QP number is the UDP port the endpoint is bound to (a
 * 24-bit QPN space holds 16-bit ports), so a remote address is (IP, QPN)
 * plus the peer's Q_Key. The receiver drops a datagram whose BTH
 * DestQP is not its QPN or whose DETH Q_Key is not its Q_Key.
 *
 * Semantics, as real UD:
 *  - a send longer than the MTU is refused at post (-EMSGSIZE);
 *  - a send completes once the kernel took the datagram (sendmsg
 *    returned), whether or not anybody receives it; EAGAIN queues it and
 *    the engine sends it when the socket is writable;
 *  - a datagram that finds no posted receive, carries a wrong Q_Key or
 *    QPN, is malformed or does not fit the receive is dropped and counted
 *    (emu_ud_get_stats); the endpoint is never broken by what arrives;
 *  - a receive buffer starts with the 40-byte GRH slot (IB UD convention,
 *    IB extension spec §2.3 step 3): the payload is placed after it and
 *    the completion's byte_len counts it (EMU_UD_GRH_LEN + payload).
 *
 * Completions: through ops in post order per ring; send_done on the
 * posting thread (fast path) or the engine thread, with the send lock
 * held; recv_done on the engine thread, no lock held. Callbacks must not
 * call back into this emu_ud. No allocation per operation. */
#ifndef SOFTDAT_EMU_UD_H
#define SOFTDAT_EMU_UD_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "emu/engine.h"
#include "emu/qp.h" /* struct emu_sge, enum emu_wc_status, EMU_QP_MAX_SGE */

#define EMU_UD_GRH_LEN 40
#define EMU_UD_BTH_LEN 12
#define EMU_UD_DETH_LEN 8
#define EMU_UD_ICRC_LEN 4
#define EMU_UD_HDR_LEN (EMU_UD_BTH_LEN + EMU_UD_DETH_LEN)
/* Largest payload any emu_ud accepts: a UDP datagram holds 65507 bytes. */
#define EMU_UD_MTU_MAX 65472u
/* BTH opcodes (IB spec Table 38, UD): Send Only, Send Only with Immediate. */
#define EMU_UD_OP_SEND_ONLY 0x64
#define EMU_UD_OP_SEND_ONLY_IMM 0x65
#define EMU_UD_PKEY_DEFAULT 0xFFFF

/* Where a datagram goes. */
struct emu_ud_dest {
    struct sockaddr_storage addr; /* IP of the peer (port ignored: the QPN is) */
    uint32_t qpn;
    uint32_t qkey;
};

struct emu_ud_cqe {
    uint64_t cookie;
    enum emu_wc_status status;   /* SUCCESS, FLUSHED, LOC_LEN, LOC_QP */
    uint32_t byte_len;           /* send: payload; recv: GRH + payload */
    bool solicited;              /* recv: the sender asked for SE */
    struct sockaddr_storage src; /* recv: the sender's IP and UDP port */
    uint32_t src_qpn;            /* recv: DETH SrcQP */
};

struct emu_ud_ops {
    void (*send_done)(void *ctx, const struct emu_ud_cqe *cqe);
    void (*recv_done)(void *ctx, const struct emu_ud_cqe *cqe);
};

struct emu_ud_attr {
    struct emu_engine *engine;
    const struct sockaddr *addr; /* local IP; port 0 = ephemeral */
    socklen_t addr_len;
    uint32_t max_send_wr, max_recv_wr; /* >= 1 */
    uint32_t max_sge;                  /* 1..EMU_QP_MAX_SGE */
    uint32_t mtu;                      /* payload limit, <= EMU_UD_MTU_MAX */
    uint32_t qkey;
    const struct emu_ud_ops *ops;
    void *ctx;
};

/* Drop counters (monotonic). */
struct emu_ud_stats {
    uint64_t tx_datagrams;    /* handed to the kernel */
    uint64_t tx_errors;       /* sendmsg failed for good (unreachable, ...) */
    uint64_t rx_datagrams;    /* placed into a receive */
    uint64_t rx_no_recv;      /* dropped: no receive posted */
    uint64_t rx_bad_qkey;     /* dropped: DETH Q_Key mismatch */
    uint64_t rx_bad_qpn;      /* dropped: BTH DestQP is not ours */
    uint64_t rx_malformed;    /* dropped: short, bad opcode/version/pad */
    uint64_t rx_too_long;     /* dropped: longer than the receive (LOC_LEN) */
};

struct emu_ud;

/* Socket bound, watcher running. 0 or -errno (-EINVAL for bad attrs). */
int emu_ud_create(const struct emu_ud_attr *a, struct emu_ud **out);
/* Stops the watcher (waits for a running callback: hold no lock the
 * callbacks take), completes everything outstanding FLUSHED, closes the
 * socket, frees. NULL is a no-op. */
void emu_ud_destroy(struct emu_ud *ud);

uint32_t emu_ud_qpn(const struct emu_ud *ud);
uint32_t emu_ud_qkey(const struct emu_ud *ud);
uint32_t emu_ud_mtu(const struct emu_ud *ud);
/* The bound address (IP and port). */
void emu_ud_local_addr(const struct emu_ud *ud, struct sockaddr_storage *out);

/* flags: EMU_WR_SOLICITED (BTH SE bit). 0; -EMSGSIZE over the MTU; -ENOSPC ring full; -EINVAL bad arguments
 * (nsge, address family). */
int emu_ud_post_send(struct emu_ud *ud, uint64_t cookie, const struct emu_ud_dest *dest, uint32_t nsge,
                     const struct emu_sge *sge, uint32_t flags);
/* 0; -ENOSPC ring full; -EINVAL. */
int emu_ud_post_recv(struct emu_ud *ud, uint64_t cookie, uint32_t nsge, const struct emu_sge *sge);
/* Every posted receive and queued send completes FLUSHED, in post order. */
void emu_ud_flush(struct emu_ud *ud);

void emu_ud_get_stats(const struct emu_ud *ud, struct emu_ud_stats *out);
/* Sends not yet handed to the kernel, receives posted and not completed. */
void emu_ud_queue_counts(struct emu_ud *ud, uint32_t *send_queued, uint32_t *recv_posted);

/* Pure codec (tests, tools): build the 20-byte BTH+DETH header; parse one
 * (0, or -EBADMSG). */
void emu_ud_build_hdr(uint8_t *hdr, uint8_t opcode, bool se, uint8_t pad, uint32_t dest_qpn, uint32_t psn,
                      uint32_t qkey, uint32_t src_qpn);
struct emu_ud_hdr {
    uint8_t opcode;
    bool se;
    uint8_t pad;
    uint32_t dest_qpn, psn, qkey, src_qpn;
};
int emu_ud_parse_hdr(const uint8_t *hdr, struct emu_ud_hdr *out);

#endif
