/* Queue pair: the data path of one soft-RNIC connection.
 *
 * A QP owns a send queue (Send family, RDMA Write, RDMA Read, atomics,
 * immediate data, window binds), a receive queue (or a shared one, emu_srq)
 * and, once attached to an established emu_conn, the iWARP byte stream in
 * both directions: FPDUs carrying DDP/RDMAP (emu/ddp.h), remote accesses
 * checked against the memory table (emu/mem.h), Read Requests served from
 * an inbound read queue (IRD) without consumer involvement, Terminate on
 * protocol or protection errors.
 *
 * It exists before the connection (receives may be posted while
 * unconnected) and after it (reset for reuse).
 *
 * Completions: every work request completes exactly once, through
 * ops->send_done (send queue) or ops->recv_done (receive queue), in post
 * order within each queue, except that RDMA Reads/atomics complete in order
 * among themselves and may pass later Sends/Writes (DAT ch. 5 rules). A
 * Send/Write completes when its last byte was accepted by the socket (or,
 * with attr.placement_ack, once the peer has placed it); a Receive when its
 * payload is placed; a Read when the last response byte is placed. Callbacks run on the thread that made the progress (a posting
 * thread on the fast path, the engine thread, or a thread in
 * emu_qp_progress) with the QP's queue lock held: they must only record
 * the completion (e.g. enqueue an event) and must not call back into this
 * QP.
 *
 * Local buffers: the caller (the provider) checks local segments against
 * the memory table at post time and passes plain pointers; the QP does not
 * copy payload and does not allocate per operation (queues are fixed-size
 * rings sized at create).
 *
 * Errors: when the connection fails (Terminate sent or received, socket
 * error, peer gone) the WR that caused it completes with its error status,
 * every other outstanding WR completes FLUSHED in post order, ops->fatal
 * reports what happened once, and the connection is broken through
 * emu_conn_fail (so the conn's owner sees exactly one BROKEN or
 * DISCONNECTED). */
#ifndef SOFTDAT_EMU_QP_H
#define SOFTDAT_EMU_QP_H

#include "emu/conn.h"
#include "emu/ddp.h"
#include "emu/mem.h"

#include <stdbool.h>
#include <stdint.h>

struct emu_qp;
struct emu_srq;

/* ---- work requests ---- */
enum emu_wr_op {
    EMU_WR_SEND = 1,      /* Send (+SE with EMU_WR_SOLICITED, +Invalidate with inv_stag) */
    EMU_WR_WRITE,         /* RDMA Write */
    EMU_WR_WRITE_IMM,     /* RDMA Write then Immediate Data (RFC 7306) carrying imm */
    EMU_WR_READ,          /* RDMA Read */
    EMU_WR_FETCH_ADD,     /* RFC 7306 atomics; result (8 bytes) into sge[0] */
    EMU_WR_CMP_SWAP,
    EMU_WR_BIND,          /* memory window bind/unbind, done in queue order */
    /* receive-side completion kinds (emu_cqe.op) */
    EMU_WC_RECV,
    EMU_WC_RECV_INV,      /* Send with Invalidate: inv_stag was invalidated */
    EMU_WC_RECV_IMM,      /* Immediate Data consumed a receive: imm valid, byte_len =
                             the RDMA Write right before it (0 if none) */
};

enum {
    EMU_WR_SOLICITED = 1u << 0,  /* Send with SE / Immediate with SE */
    EMU_WR_INVALIDATE = 1u << 1, /* Send with Invalidate of inv_stag */
    EMU_WR_FENCE = 1u << 2,      /* start only after every earlier Read/atomic completed */
    EMU_WR_QUIET = 1u << 3,      /* its success completes without an event (DAT's suppressed
                                    completion): no placement probe is due for it alone */
};

#define EMU_QP_MAX_SGE 16

struct emu_sge {
    void *addr;
    uint32_t len;
};

struct emu_wr {
    uint64_t cookie;
    enum emu_wr_op op;
    uint32_t flags;              /* EMU_WR_* */
    uint32_t nsge;               /* <= the QP's max_sge; copied at post */
    const struct emu_sge *sge;
    uint32_t remote_stag;        /* Write/Read/atomics */
    uint64_t remote_to;
    uint32_t inv_stag;           /* with EMU_WR_INVALIDATE */
    uint32_t imm;                /* WRITE_IMM */
    uint64_t atomic_add_or_cmp;
    uint64_t atomic_swap;
    /* BIND */
    struct emu_mw *mw;
    struct emu_mw_bind_attr bind; /* bind.length == 0 with bind.mr == NULL: unbind */
};

enum emu_wc_status {
    EMU_WC_SUCCESS = 0,
    EMU_WC_FLUSHED,        /* never started: connection gone or QP flushed */
    EMU_WC_LOC_LEN,        /* receive too small / message over the limit */
    EMU_WC_LOC_PROT,       /* local protection (e.g. ORD 0 for a Read) */
    EMU_WC_LOC_QP,         /* internal local error */
    EMU_WC_BAD_RESP,       /* unexpected response from the peer */
    EMU_WC_REM_ACCESS,     /* peer's Terminate: remote protection */
    EMU_WC_REM_OP,         /* peer's Terminate: remote operation / responder error */
    EMU_WC_TRANSPORT,      /* socket error, CRC error, peer vanished mid-operation */
    EMU_WC_RNR,            /* peer had no receive posted */
    EMU_WC_BIND_FAILED,    /* window bind refused by the memory table */
};

struct emu_cqe {
    uint64_t cookie;
    enum emu_wr_op op;         /* the WR's op, or EMU_WC_RECV* */
    enum emu_wc_status status;
    uint32_t byte_len;         /* bytes sent / placed / read */
    uint32_t inv_stag;         /* RECV_INV */
    uint32_t imm;              /* RECV_IMM, WRITE_IMM */
    uint32_t bound_stag;       /* BIND: the window's new STag */
    bool solicited;            /* receive: the Send carried SE */
};

/* What ended the connection, for diagnostics and DAT event mapping. */
struct emu_qp_fatal {
    bool remote;               /* the peer sent the Terminate */
    bool have_term;
    struct emu_term term;
    int err;                   /* errno-style: EPROTO, ECONNRESET, EBADMSG (CRC) ... */
};

struct emu_qp_ops {
    void (*send_done)(void *ctx, const struct emu_cqe *cqe);
    void (*recv_done)(void *ctx, const struct emu_cqe *cqe);
    void (*fatal)(void *ctx, const struct emu_qp_fatal *f);   /* optional */
};

struct emu_qp_attr {
    struct emu_mem_table *mem;
    struct emu_pz *pz;           /* remote accesses must be in this PZ */
    struct emu_srq *srq;         /* NULL: private receive queue */
    uint32_t max_send_wr;
    uint32_t max_recv_wr;        /* ignored with srq */
    uint32_t max_sge;            /* <= EMU_QP_MAX_SGE */
    uint64_t max_message_size;   /* Send/Recv limit (EMU_WC_LOC_LEN beyond) */
    uint64_t max_rdma_size;
    uint16_t ird, ord;           /* local limits; negotiated values apply once attached */
    bool rfc7306;                /* force RFC 7306 on (tests, or an owner that knows
                                    the peer). Otherwise emu_qp_attach enables what both
                                    ends offered in the MPA capability marker
                                    (emu_conn_info.caps): WRITE_IMM needs the immediate
                                    bit, atomics the atomics bit, else those posts return
                                    -EOPNOTSUPP; opcodes 0x8-0xB are received iff any
                                    capability is in use, else a protocol error. */
    /* InfiniBand semantics (docs/emu-datapath.md §7). */
    uint8_t rnr_retry;           /* a Send or Immediate that finds no receive posted:
                                    0 = Terminate at once (iWARP); 1-6 = stop reading the
                                    stream (TCP holds the peer) and look again every
                                    rnr_timer_us, Terminate after rnr_retry looks; 7 = wait
                                    for ever (IB's "infinite retry") */
    uint32_t rnr_timer_us;       /* 0: EMU_QP_RNR_TIMER_US */
    bool placement_ack;          /* Sends and Writes complete once the peer has placed
                                    them: a zero-length RDMA Read after them (or any Read)
                                    confirms, as an IB ACK does. Needs a negotiated ORD >= 1,
                                    else they complete on socket acceptance. */
    const struct emu_qp_ops *ops;
    void *ctx;
};

#define EMU_QP_RNR_TIMER_US 640u  /* IB RNR timer code 12 (0.64 ms), OFA DAPL's default */
#define EMU_QP_RNR_INFINITE 7u

int emu_qp_create(const struct emu_qp_attr *a, struct emu_qp **out);
/* Flushes anything outstanding (completions delivered), detaches, frees. */
void emu_qp_destroy(struct emu_qp *qp);

/* ---- connection ----
 * attach: called from the conn's ESTABLISHED callback (engine thread).
 * From then on the owner's emu_conn_ops.rx must call emu_qp_rx and .tx must
 * call emu_qp_tx (the owner keeps .event). conn_id identifies the
 * connection for window scope. Work queued before attach starts now. */
int emu_qp_attach(struct emu_qp *qp, struct emu_conn *c, uint64_t conn_id);
int emu_qp_rx(struct emu_qp *qp, struct emu_conn *c, int fd);
void emu_qp_tx(struct emu_qp *qp);
/* The owner's emu_conn_ops.detach must call this: consumer threads in
 * emu_qp_progress stop touching the socket. Transmit is unaffected
 * (emu_conn_writev is safe). */
void emu_qp_detach(struct emu_qp *qp);
/* The owner is about to emu_conn_free the connection: the QP lets go of
 * it entirely (socket and link), so that a consumer thread's later pass
 * over this QP (a lease's engine kick, a transmit, a disconnect) cannot
 * reach a connection the engine has already released. A connection freed
 * while established lingers and is released by the engine on its own
 * time, while the QP may still be in a polling consumer's set. Transmit
 * then finds no connection; the QP can only be flushed, reset or
 * destroyed. */
void emu_qp_unlink(struct emu_qp *qp);
/* Graceful: stop accepting posts, finish handing queued bytes to the
 * socket, then emu_conn_disconnect(c, true). Abrupt: emu_conn_disconnect(c,
 * false) at once. Outstanding WRs then flush. */
int emu_qp_disconnect(struct emu_qp *qp, bool graceful);
/* Before the owner ends the connection (disconnect, abort, free): process
 * what the peer already sent and send the answers that wait, so that a
 * placement probe right behind the peer's last message is answered and the
 * peer's Send completes, as an HCA that ACKs in hardware would have it
 * (emu_qp_disconnect does this itself). Any thread but the engine's. */
void emu_qp_quiesce(struct emu_qp *qp);
/* After the conn's terminal event: complete every outstanding WR as
 * FLUSHED (post order) and forget the connection. Idempotent. */
void emu_qp_flush(struct emu_qp *qp);
/* Back to the fresh state (dat_ep_reset): requires no connection. */
int emu_qp_reset(struct emu_qp *qp);

/* ---- posting (any thread; send and receive sides have separate locks) ----
 * 0, -ENOSPC (queue full), -EINVAL (bad WR: nsge, op), -ENOTCONN (send side
 * while not attached, after a failure or once a graceful disconnect began:
 * the caller decides between queueing semantics and flushing per its state
 * machine), -EOPNOTSUPP (WRITE_IMM / atomics not negotiated, see attr.rfc7306).
 * Atomics need sge[0].len >= 8 (the original value lands there, host
 * order) and an 8-byte aligned remote target. The posting thread writes
 * directly to the socket when the send queue is idle. Sends over max_message_size and RDMA over max_rdma_size
 * are accepted and complete EMU_WC_LOC_LEN (the connection breaks), as DAT
 * wants; an RDMA Read with a negotiated ORD of 0 completes EMU_WC_LOC_PROT.
 * Errored WRs (local or blamed by a peer's Terminate) report their status
 * from emu_qp_flush, in post order with the FLUSHED ones. */
int emu_qp_post_send(struct emu_qp *qp, const struct emu_wr *wr);
int emu_qp_post_recv(struct emu_qp *qp, uint64_t cookie, uint32_t nsge,
                     const struct emu_sge *sge);

/* Let a consumer thread make receive progress (non-blocking; skips if the
 * engine holds the receive side). Returns completions produced (>= 0). */
int emu_qp_progress(struct emu_qp *qp);
/* emu_qp_progress over several QPs, with one poll(2) to find those whose
 * socket has bytes (the others only send answers that wait): a consumer
 * polling two or more connections pays one system call per pass instead of
 * one per connection. Returns completions produced. */
int emu_qp_progress_many(struct emu_qp *const *qps, unsigned n);

/* A consumer thread polls this QP (it calls emu_qp_progress in a loop):
 * for the next usec the engine leaves the socket to it, looking again
 * once the lease ran out. now_us: emu_now_us(). Any thread; cheap. */
void emu_qp_poll_lease(struct emu_qp *qp, uint32_t usec, uint64_t now_us);
/* The polling thread stops polling (it is about to sleep in an EVD wait):
 * the lease ends now, and a parked engine resumes reading at once instead
 * of when the lease would have run out. */
void emu_qp_poll_release(struct emu_qp *qp);
/* emu_qp_poll_release if the calling thread holds the lease (a thread
 * about to sleep elsewhere gives back only its own). */
void emu_qp_poll_release_mine(struct emu_qp *qp);
/* A consumer thread is about to sleep in poll(2) on this QP's socket
 * instead of leaving the receive side to the engine (dat_evd_wait,
 * lib/provider/progress.c): answers held back for a reply go out now
 * (nothing will carry them), the thread gets the lease until until_us
 * (the engine stays off the socket, so the data wakes one thread, not
 * two) and the socket descriptor is returned. -1 (no lease taken) when
 * the socket cannot serve as a wake-up: input is held in the QP (RNR
 * stall), the stream ended, or the QP is not attached. */
int emu_qp_sleep_fd(struct emu_qp *qp, uint64_t until_us);
/* The consumer's lease ends at until_us at the latest; a parked engine
 * is kicked to look at it again (its timer may be set for the old end). */
void emu_qp_poll_trim(struct emu_qp *qp, uint64_t until_us);
/* The calling thread was woken from poll(2) on the descriptors of
 * emu_qp_sleep_fd: its next pass reads (no skipped pass). */
void emu_qp_sleep_woken(void);
/* How many frames the calling thread's emu_qp_progress passes have
 * processed so far: a polling thread that finds no event may still be
 * moving data (RDMA Writes placed by its passes), for lib/provider/evd.c. */
uint64_t emu_qp_thread_rx_fpdus(void);
/* Of those, the frames whose payload is small enough (below 16 KiB) that
 * sleeping between them would cost more than the frames: what keeps a
 * waiter's spin window open (lib/provider/progress.c). A stream of large
 * payloads does not: a waiter that spun on one read every arrival's few
 * kilobytes in a system call of its own, on a CPU the sender needed. */
uint64_t emu_qp_thread_rx_small_fpdus(void);
/* How many times a consumer pass continued a send side that waited for
 * socket space (instead of the engine thread), process-wide, for tests. */
uint64_t emu_qp_consumer_tx_count(void);
/* Microseconds left of the consumer's lease (0: none), for tests. */
uint64_t emu_qp_poll_lease_left_us(struct emu_qp *qp);
/* A polling thread ends a pass over its QPs (after emu_qp_poll_lease and
 * emu_qp_progress*): the time it spends until its next pass, outside its
 * own posts, is what tells whether it keeps polling. */
void emu_qp_poll_pass_end(void);
/* The same for a pass that read nothing (no frame, no completion): it took
 * no time worth a clock read, so it ends at started_us, the now_us given
 * to emu_qp_poll_lease. */
void emu_qp_poll_pass_end_idle(uint64_t started_us);

struct emu_qp_stats {
    uint32_t send_outstanding, recv_posted;
    uint16_t ird, ord;           /* negotiated */
    uint64_t tx_bytes, rx_bytes, tx_fpdus, rx_fpdus;
    uint64_t rx_bytes_in_place;  /* payload read from the socket straight into place (no copy) */
    uint64_t rnr_stalls;         /* times the receive side waited for a receive */
    uint64_t placement_probes;   /* zero-length Reads sent to confirm placement */
    uint64_t tx_writes;          /* socket writes (one writev carries many FPDUs) */
    uint64_t held_posts;         /* posts that waited for a later pass (doorbell batching) */
    uint64_t tx_crc_in_place;    /* CRC on: Send/Write payload summed in the consumer's memory */
    uint64_t tx_crc_staged;      /* CRC on: Read Response payload copied and summed (staging) */
    uint64_t rx_crc_cut_through; /* CRC on: payload placed before its FPDU's CRC was checked */
    uint64_t consumer_rx_runs;   /* receive-side runs by consumer threads' passes */
};
void emu_qp_get_stats(struct emu_qp *qp, struct emu_qp_stats *out);

/* ---- shared receive queue ---- */
struct emu_srq_attr {
    uint32_t max_recv_wr;
    uint32_t max_sge;
    uint32_t low_watermark;      /* 0: off */
    void (*low_watermark_hit)(void *ctx);  /* fires once per arming */
    void *ctx;
};
int emu_srq_create(const struct emu_srq_attr *a, struct emu_srq **out);
void emu_srq_destroy(struct emu_srq *srq);
int emu_srq_post_recv(struct emu_srq *srq, uint64_t cookie, uint32_t nsge,
                      const struct emu_sge *sge);
int emu_srq_resize(struct emu_srq *srq, uint32_t max_recv_wr);
int emu_srq_set_lw(struct emu_srq *srq, uint32_t low_watermark);
uint32_t emu_srq_posted(const struct emu_srq *srq);

#endif
