/* Private to emu/qp*.c: the queue pair's state, split by owner (as siw
 * splits its QP into tx context, rx stream, ORQ and IRQ): the link (the
 * attached connection), the transmit context, the outbound and inbound read
 * queues, the receive stream, the receive ring and the polling lease. Each
 * sub-structure below says which lock guards it; the lock order is written
 * above struct emu_qp. See docs/emu-datapath.md. */
#ifndef SOFTDAT_EMU_QP_INTERNAL_H
#define SOFTDAT_EMU_QP_INTERNAL_H

#include "emu/qp.h"

#include <pthread.h>

#include "emu/lock.h"
#include <stdatomic.h>

#define QP_PF_SIZE (64u * 1024u)        /* receive prefetch buffer */
/* CRC on: the prefetch buffer's reads may run this much further, so that
 * a largest FPDU (65,544 bytes) read from its start is whole in one read,
 * and the bytes of the next one carried over to the front are this few
 * (qp_rx.c, rx_run). */
#define QP_PF_CRC_ROOM 1024u
#define QP_PF_ALLOC (QP_PF_SIZE + QP_PF_CRC_ROOM)
#define QP_DIRECT_MIN (16u * 1024u)     /* payload >= this is read in place */
#define QP_PF_FIRST 1024u               /* a pass's first read on a stream of large payloads */
#define QP_LARGE_RUN 64u                /* small FPDUs in a row that end such a stream */
#define QP_DIRECT_TAIL 256u             /* prefetch bytes read behind it: trailer + next header */
#define QP_RX_ORDERED_TAIL 64u          /* last bytes of each copy stored in address order (qp_rx.c) */
#define QP_RX_CQES 32u                  /* receive completions held until a qp_rx_run ends */
#define QP_POLL_GAP_US 5u               /* polling passes further apart (time the polling
                                           thread spent outside them and its posts) start a new run */
#define QP_POLL_HOT_US 50u              /* a run this long earns the lease (emu_qp_poll_lease) */
#define QP_LEASE_LOOK_MAX_US 4000u     /* the engine looks at a renewed lease at least this often */
#define QP_DEFER_US 10u                 /* a kept probe answer waits this long for bytes to ride with, */
#define QP_DEFER_ENGINE_US 100u         /* ... and one the engine kept, this long (emu_qp_rx) */
#define QP_DEFER_RECENT_US 200u         /* on a QP that posted this recently (it answers, ping-pong) */
#define QP_PROBE_DEFER_US 200u          /* a probe only quiet WRs wait for waits this long for a post */
#define QP_PROBE_DEFER_ENGINE_US 1000u  /* ... and, with no lease, this long: the engine's timer is
                                           the bound (a wake-up, where a pass's look is free) */
#define QP_HOLD_INFLIGHT 4u             /* a post waits for the next pass only behind this many
                                           unfinished WRs (emu_qp_post_send: doorbell batching), */
#define QP_HOLD_MAX 16u                 /* at most this many posts wait: the next one sends them all, */
#define QP_HOLD_BYTES (16u * 1024u)     /* and only WRs this small (a larger one's bytes pay for its
                                           system call) */
#define QP_TXB_FPDUS 32u                /* FPDUs coalesced in one writev */
#define QP_TXB_IOV (QP_TXB_FPDUS * 4u + EMU_QP_MAX_SGE + 4u)
/* Stop adding FPDUs beyond this. A 1 MiB message is 16 full FPDUs and a
 * short last one (320 B of a Send, 256 B of a Write); with a probe behind
 * it, it leaves in one writev. At 512 KiB it took three, the third with
 * the short FPDU alone: three system calls and three part-filled TCP
 * segments per MiB where raw TCP pays one (docs/perf-log.md §11). */
#define QP_TXB_BYTES (1088u * 1024u)
#define QP_TX_ROUNDS 64                 /* writev rounds of one transmit pass (qp_tx_pump) */
#define QP_TX_MULPDU_MAX 65535u         /* 16-bit ULPDU_Length limit */
/* CRC on: every FPDU's payload is copied here and sent from the copy, so
 * the CRC covers exactly the bytes on the wire (the source may change under
 * us: a Read Response's region belongs to a running application). Holds
 * four maximum-size FPDUs; it bounds coalescing when CRC is on. */
#define QP_TX_STAGE_BYTES (256u * 1024u)
#define QP_TX_STAGE_ALIGN 64u           /* each FPDU's staged payload starts on a cache line */

/* WQ_WAIT: a Read/atomic sent, its response due. WQ_ACK: a Send/Write
 * handed to the socket, its placement not yet confirmed (placement_ack). */
enum wq_state { WQ_QUEUED = 0, WQ_TX, WQ_WAIT, WQ_ACK, WQ_DONE };

/* Outstanding Read Requests in order: a consumer's Read/atomic (its SQ
 * index), or a placement probe confirming every WR before SQ index idx. */
struct rd_ent {
    uint32_t idx;
    bool probe;
    uint32_t stag;              /* probe: the sink STag its response carries */
};

/* Placement probes in flight towards a softdat peer, which answers them
 * beyond its IRD (towards other peers: one, within the negotiated ORD). */
#define QP_PROBES_MAX 32u
/* While a probe is out, the next one waits for its answer unless this many
 * bytes, or a quarter of the send queue, would wait behind it: small
 * messages share a probe (one answer per batch, not per message), large
 * ones each get their own (a pipeline's Writes complete as they land). */
#define QP_PROBE_BATCH_BYTES (32u * 1024u)
/* How long emu_qp_quiesce waits for the peer's probe behind the last
 * message placed (one round trip on a loaded host). */
#define QP_CONFIRM_WAIT_US 200000u

/* qp_rx_run results beyond emu_conn.h's EMU_RX_OK (0) / EMU_RX_EOF (1) /
 * EMU_RX_PAUSE (2) and -errno. */
#define QP_RX_STALL 3  /* the receive side waits for a posted receive (RNR) */
#define QP_RX_FAILED 4 /* internal to qp_rx*.c: a failure is recorded in rx.fail */

struct sq_wqe {
    uint64_t cookie;
    uint8_t op;                 /* enum emu_wr_op */
    uint8_t st;                 /* enum wq_state */
    bool has_err;
    uint32_t flags;
    uint32_t nsge;
    uint64_t len;               /* sum of sge lengths */
    uint32_t rstag;
    uint64_t rto;
    uint32_t inv_stag, imm;
    uint64_t a1, a2;
    struct emu_mw *mw;
    struct emu_mw_bind_attr bind;
    uint32_t msn;               /* untagged message's MSN (Send: QN 0, Read: QN 1) */
    uint32_t sink_stag;         /* Read: the STag its responses carry */
    enum emu_wc_status err;
    struct emu_sge *sge;        /* max_sge entries in qp->sq_sge */
};

struct rq_wqe {
    uint64_t cookie;
    uint32_t nsge;
    uint64_t len;
    struct emu_sge sge[EMU_QP_MAX_SGE];
};

struct ird_ent {
    bool atomic;                /* Atomic Response (orig/req_id) instead of Read data */
    uint32_t req_id;
    uint64_t orig;
    uint32_t sink_stag;
    uint64_t sink_to;
    uint32_t size;
    struct emu_mem_ref ref;     /* source bytes, pinned until answered */
    bool counted;               /* within the negotiated IRD (not a softdat peer's probe) */
};

enum tx_kind { TXK_NONE = 0, TXK_SQ, TXK_IRD, TXK_CTRL, TXK_PROBE };

struct txrec {
    uint32_t len;               /* FPDU bytes */
    uint32_t iov_end;           /* one past its last iovec */
    uint8_t kind;               /* enum tx_kind */
    bool msg_end;               /* last FPDU of the item */
    uint32_t idx;               /* SQ index (absolute) / IRD slot */
};

struct txbatch {
    struct iovec iov[QP_TXB_IOV];
    uint32_t niov, iov_pos;
    struct txrec rec[QP_TXB_FPDUS];
    uint32_t nrec, rec_pos;
    uint32_t rec_done;          /* bytes of rec[rec_pos] already written */
    uint32_t bytes;             /* total bytes added */
    uint8_t *stage;             /* CRC on: payload copies (QP_TX_STAGE_BYTES), else NULL */
    uint32_t stage_used;
    uint8_t hdr[QP_TXB_FPDUS][EMU_FPDU_HDR_MAX];
    uint8_t trl[QP_TXB_FPDUS][EMU_FPDU_TRAILER_MAX];
};

/* The message being cut into FPDUs. */
struct txcur {
    uint8_t kind;               /* enum tx_kind, TXK_NONE = between messages */
    uint8_t part;               /* WRITE_IMM: 0 write, 1 immediate */
    uint32_t idx;
    struct emu_ddp_seg seg;
    struct emu_ddp_hdr tmpl;
    uint64_t base_to;
    const struct emu_sge *sge;
    uint32_t nsge, si;
    uint64_t soff;
    struct emu_sge one;         /* IRD source as a one-element list */
};

enum rx_phase { RX_LEN = 0, RX_HDR, RX_PAY, RX_TRL };

/* A ring of posted receives (a QP's private receive queue; an SRQ). */
struct rq_ring {
    emu_lock_t lock;
    struct rq_wqe *ring;
    uint32_t cap, head, tail;   /* tail - head = posted */
};

struct emu_srq {
    struct rq_ring rq;
    uint32_t max_sge;
    uint32_t lw;
    bool lw_armed;
    void (*lw_hit)(void *ctx);
    void *ctx;
    atomic_uint users;
};

/* The attached connection and what was negotiated on it. Written only with
 * rx.lock and tx.lock both held (attach, flush, reset), so either lock is
 * enough to read it: the receive path reads it without tx.lock. */
struct qp_link {
    struct emu_conn *c;         /* NULL when not attached */
    struct emu_wire_ep *wire;   /* c's wire endpoint (emu_wire_send/recv) */
    uint64_t conn_id;
    uint32_t caps;              /* RFC 7306 in use (EMU_CONN_CAP_*): attr.rfc7306, or what
                                   both ends offered (conn info) */
    bool crc;
    bool cut_writes;            /* CRC on: RDMA Writes too are placed before their CRC is
                                   checked (SOFTDAT_CRC_PLACEMENT=cut-through) */
    uint16_t ird, ord;          /* negotiated */
    uint32_t mulpdu;            /* transmit FPDU size */
};

/* Transmit context (tx.lock): the send queue, the message being cut into
 * FPDUs, the batch being written, our MSNs. siw's tx context. */
struct qp_tx {
    emu_lock_t lock;
    bool dead;                  /* error or Terminate sent: no more bytes */
    bool want_tx;               /* waiting for writability */
    bool disc_pending;          /* graceful disconnect once drained */
    bool disc_done;
    bool hold;                  /* passive without p2p: wait for the first FPDU (RFC 5044) */
    bool last_was_resp;         /* the last message started was a Read/Atomic Response */
    bool term_pending;          /* a Terminate waits for an FPDU boundary */
    struct sq_wqe *sq;
    struct emu_sge *sq_sge;
    uint32_t sq_cap, sq_head, sq_tx, sq_tail; /* absolute counters, mod sq_cap */
    uint32_t msn[EMU_QN_COUNT];
    uint32_t unacked;           /* WQ_ACK entries */
    uint32_t confirm_upto;      /* a probe's answer a consumer pass left to confirm ... */
    atomic_bool confirm_owed;   /* ... until after its application's turn (qp_sq_confirm_owed);
                                   written under tx.lock, read without it by pollers */
    uint32_t ack_tail;          /* one past the last started WR that needs confirming */
    uint32_t wanted_tail;       /* ... of those, one whose completion is awaited (not EMU_WR_QUIET) */
    atomic_bool probe_owed;     /* only quiet WRs wait for a probe, which waits for the next post
                                   or a pass QP_PROBE_DEFER_US later (probe_due, flush_deferred);
                                   written under tx.lock, read without it by pollers */
    _Atomic uint64_t probe_owed_us; /* emu_now_us() when the probe became owed */
    atomic_bool probe_look;     /* without a lease: the engine has its timer for the owed probe
                                   (or a kick to arm it) on the way (qp_probe_look) */
    bool probe_force;           /* flush_deferred: the owed probe goes now */
    uint64_t uncovered_bytes;   /* bytes of the WRs started since the last Read Request */
    bool probe_was_large;       /* the last probe covered QP_PROBE_BATCH_BYTES or more (probe_due) */
    uint32_t read_seq;          /* source of our Read sink tags */
    struct emu_term term_out;
    struct txcur cur;
    struct txbatch tb;
    uint32_t held;              /* posts queued without a transmit pass (doorbell batching) */
    uint64_t bytes, fpdus;
    uint64_t held_posts;        /* posts that waited for a later pass (statistics) */
    uint64_t writes;            /* socket writes that sent bytes (statistics) */
    uint64_t crc_in_place;      /* CRC on: payload bytes summed in the consumer's memory */
    uint64_t crc_staged;        /* CRC on: payload bytes copied to the staging area */
};

/* Outbound reads (ORQ): our Read/Atomic Requests and placement probes in
 * flight, in order. Guarded by tx.lock: the transmit side pushes, the
 * receive side pops when the response arrives, and every pop also
 * completes or confirms send-queue work, which needs tx.lock anyway. */
struct qp_orq {
    struct rd_ent *ent;         /* cap entries */
    uint32_t cap, head, tail;
    uint32_t reads_out;         /* the consumer's Read/atomic Requests sent, not yet answered */
    uint32_t probes_out;        /* placement probes awaiting their responses */
    uint32_t covered;           /* WRs before this SQ index have a Read Request after them */
    uint64_t probes;            /* placement probes sent (statistics) */
};

/* Inbound reads (IRQ, IRD): the peer's Read and Atomic Requests, answered
 * in arrival order from our byte stream. A single-producer single-consumer
 * ring without a lock of its own: the receive path (rx.lock held) is the
 * only producer (writes the entry, then publishes tail with release); the
 * transmit side (tx.lock held) the only consumer (tx: next to start; head:
 * oldest unanswered, its memory reference dropped before head is published
 * with release). Attach, flush and reset hold both locks. */
struct qp_irq {
    struct ird_ent *ent;        /* cap entries */
    uint32_t cap;
    uint32_t tx;                /* consumer only */
    _Atomic uint32_t head, tail;
    _Atomic uint32_t counted;   /* entries that count against IRD (the producer adds, the
                                   consumer's irq_pop subtracts): a softdat peer's probes
                                   ride beyond IRD, and answers kept for later must not
                                   make its real Reads look like an IRD overrun */
    atomic_bool deferred;       /* a zero-length Read's answer waits for the next pump (qp_rx.c);
                                   written under tx.lock or by the receive path, read without
                                   either by pollers */
    _Atomic uint64_t deferred_us; /* emu_now_us() when the oldest deferred answer was kept */
};

/* Receive stream (rx.lock): the FPDU state machine, the receive in
 * progress, placement counters. siw's rx stream. */
struct qp_rx {
    emu_lock_t lock;
    _Atomic int fd;             /* the socket, for consumer-thread progress (-1 once detached);
                                   written under rx.lock, read without it by emu_qp_progress_many */
    bool attached;
    bool dead;
    bool release_tx;            /* the first FPDU releases tx.hold */
    int err;                    /* what emu_qp_rx returns once dead */
    struct emu_ddp_rx_state ddp;
    uint8_t phase;              /* enum rx_phase */
    uint8_t hbuf[2 + EMU_DDP_HLEN_MAX + 8];
    size_t hhave, hneed;
    uint16_t ulpdu_len;
    struct emu_ddp_hdr h;
    uint32_t pay_left;
    struct iovec tgt[EMU_QP_MAX_SGE + 1];
    uint32_t tgt_n, tgt_i;
    uint8_t trl[8];
    size_t trl_have, trl_need;
    uint32_t crc_acc;
    bool cut;                   /* CRC on: this segment's payload is placed as it arrives and
                                   its CRC checked after (qp_rx_op_start) */
    struct emu_mem_ref wref;    /* Write target, held while placing */
    uint64_t wlen;              /* payload bytes of the RDMA Write message in progress */
    uint32_t last_wlen;         /* length of the last complete Write message ... */
    bool prev_write;            /* ... if it was the last message on the stream: an
                                   Immediate Data right after it reports that length */
    uint64_t rnr_since;         /* emu_now_us() of the first look that found no receive, 0 */
    bool rnr_kicked;            /* a consumer thread stalled: the engine was asked to take over */
    uint64_t rnr_stalls;
    bool have_imm_recv;         /* imm_recv: the receive an Immediate Data header took */
    struct rq_wqe imm_recv;
    bool rresp_probe;           /* the Read Response being received answers a probe */
    bool tx_owed;               /* responses queued by this pass wait for its kick_owed (qp_rx.c) */
    bool consumer_pass;         /* a consumer thread runs this pass (consumer_rx_run, qp.c) */
    bool answer_kept;           /* the engine's pass kept a probe answer (rreq_finish, qp_rx_op.c): flush it soon */
    bool peer_probes;           /* the peer confirms placement with zero-length Reads */
    uint32_t placed;            /* Sends and Writes placed (count, wraps) ... */
    uint32_t confirmed;         /* ... of which a Read or Atomic Request since then
                                   confirms placement to the peer (its answer follows them) */
    bool have_recv;             /* cur_recv holds a receive in progress */
    bool recv_err_set;
    enum emu_wc_status recv_err;
    struct rq_wqe cur_recv;
    uint32_t rresp_sq_idx;      /* Read being answered */
    uint64_t rresp_off;
    uint8_t *pf;                /* prefetch buffer */
    uint32_t pf_off, pf_len;
    uint32_t small_run;         /* FPDUs since the last payload >= QP_DIRECT_MIN (capped) */
    uint32_t ncomp;             /* completions produced (for progress) */
    struct emu_cqe rxc[QP_RX_CQES]; /* receive completions of this qp_rx_run, delivered at its end */
    uint32_t rxc_n;
    uint64_t bytes, fpdus;
    uint64_t small_fpdus;       /* of fpdus: payload below QP_DIRECT_MIN (a waiter's input window) */
    uint64_t bytes_in_place;    /* of bytes: read straight into the target */
    uint64_t consumer_runs;     /* consumer_rx_run calls (statistics) */
    uint64_t cut_through;       /* CRC on: of bytes, placed before their FPDU's CRC was checked */
    struct {                    /* what qp_rx_fail acts on (qp_rx_op.c) */
        struct emu_term t;      /* the Terminate to send, or the peer's */
        bool remote;            /* the peer's Terminate */
        int err;
    } fail;
};

/* A consumer thread's polling lease (emu_qp_poll_lease): atomics, read
 * and written without a lock by the engine and consumer threads. */
struct qp_poll {
    _Atomic uint64_t until_us;  /* a consumer polls until then */
    _Atomic uint64_t since_us;  /* start of its current run of close passes */
    _Atomic uintptr_t thread;   /* the thread of that run */
    atomic_bool off;            /* the consumer met the end of the stream: no more leases */
    atomic_bool engine_parked;  /* the engine paused reading for a lease, its timer armed */
    atomic_bool rx_held;        /* input waits in the QP (RNR stall), not in the socket */
    atomic_bool tx_waiting;     /* tx.want_tx, readable without tx.lock */
    _Atomic uint64_t last_post_us; /* emu_now_us() of the last send-queue post */
    atomic_bool posts_held;     /* tx.held != 0, readable without tx.lock */
    unsigned looks;             /* engine only: leases found renewed in a row */
};

/* Lock order: rx.lock -> tx.lock; rx.lock -> rq.lock / SRQ lock. tx.lock
 * and the receive-queue locks never nest. The ORQ lives under tx.lock, the
 * IRQ under its producer/consumer rule (struct qp_irq), the link under
 * both. send_done runs under tx.lock, recv_done under rx.lock (or rq.lock
 * while flushing queued receives). */
struct emu_qp {
    struct emu_qp_attr a;
    struct emu_qp_ops ops;
    struct qp_link link;
    struct qp_tx tx;
    struct qp_orq orq;
    struct qp_irq irq;
    struct qp_rx rx;
    struct rq_ring rq;          /* private receive queue (no SRQ) */
    struct qp_poll poll;
    atomic_bool fatal_sent;
};

/* (tx.lock) The send side waits for socket space, or no longer does. */
static inline void qp_set_want_tx(struct emu_qp *qp, bool on)
{
    qp->tx.want_tx = on;
    atomic_store_explicit(&qp->poll.tx_waiting, on, memory_order_relaxed);
}

/* qp.c */
void qp_fatal(struct emu_qp *qp, bool remote, const struct emu_term *t, int err);
bool qp_pop_recv(struct emu_qp *qp, struct rq_wqe *out);
void qp_sq_report(struct emu_qp *qp, uint32_t idx, enum emu_wc_status st, uint32_t len);
void qp_sq_confirm(struct emu_qp *qp, uint32_t upto);
void qp_sq_confirm_owed(struct emu_qp *qp);
uint32_t qp_sge_slice(const struct emu_sge *sge, uint32_t nsge, uint64_t off, uint64_t len,
                      struct iovec *iov, uint32_t max);

/* qp_tx.c (tx.lock held) */
void qp_tx_pump(struct emu_qp *qp);
void qp_tx_batch_reset(struct txbatch *b);
/* Send a Terminate as soon as the stream is at an FPDU boundary (best
 * effort), then transmit nothing more. */
void qp_tx_terminate(struct emu_qp *qp, const struct emu_term *t);

/* A consumer's lease keeps the engine off this QP's socket now (qp.c). */
bool qp_engine_parked(struct emu_qp *qp);
/* (tx.lock) A probe became owed with no lease: the engine's timer bounds it (qp.c). */
void qp_probe_look(struct emu_qp *qp);
/* emu_now_us(), or the time the calling thread's polling pass or post
 * began (qp.c). */
uint64_t qp_clock(void);
/* A post's clock is stale once it wrote to the socket (qp_tx_pump). */
void qp_clock_wrote(void);
/* Microseconds from this QP's last send-queue post to now (a qp_clock()
 * reading the caller has). */
uint64_t qp_us_since_post(struct emu_qp *qp, uint64_t now);

/* qp_rx.c (rx.lock held). qp_rx_run: EMU_RX_OK, EMU_RX_EOF, QP_RX_STALL
 * or a negative errno (a protocol failure, after qp_rx_fail: rx.dead is
 * set; or a socket error: rx.dead is not). The caller decides what that
 * means for the connection (emu_qp_rx: the engine; qp.c consumer_rx_run). */
int qp_rx_run(struct emu_qp *qp, int fd);
void qp_rx_deliver_pending(struct emu_qp *qp);
void qp_rx_reset(struct emu_qp *qp);

/* qp_rx_op.c (rx.lock held): the per-opcode handler table and the one
 * failure exit. start/finish return 0, QP_RX_STALL (start only) or
 * QP_RX_FAILED; refuse* record a failure and return QP_RX_FAILED. */
int qp_rx_op_start(struct emu_qp *qp);
int qp_rx_op_finish(struct emu_qp *qp);
int qp_rx_refuse(struct emu_qp *qp, uint8_t layer, uint8_t etype, uint8_t ecode);
int qp_rx_refuse_term(struct emu_qp *qp, const struct emu_term *t, int err);
int qp_rx_fail(struct emu_qp *qp);

static inline struct sq_wqe *sq_at(struct emu_qp *qp, uint32_t idx)
{
    return &qp->tx.sq[idx % qp->tx.sq_cap];
}

static inline struct rd_ent *orq_at(struct emu_qp *qp, uint32_t i)
{
    return &qp->orq.ent[i % qp->orq.cap];
}

/* ---- the IRQ's producer/consumer rule (struct qp_irq) ---- */

/* Either side, or both locks held: no answer waiting or being sent. */
static inline bool irq_empty(const struct emu_qp *qp)
{
    return atomic_load_explicit(&qp->irq.head, memory_order_acquire) ==
           atomic_load_explicit(&qp->irq.tail, memory_order_acquire);
}

/* Consumer (tx.lock): a request not yet started. */
static inline bool irq_has_new(struct emu_qp *qp)
{
    return qp->irq.tx != atomic_load_explicit(&qp->irq.tail, memory_order_acquire);
}

/* Consumer (tx.lock): the oldest answer left the socket entirely. */
static inline void irq_pop(struct emu_qp *qp, uint32_t slot)
{
    emu_mem_put(&qp->irq.ent[slot].ref);
    if (qp->irq.ent[slot].counted)
        atomic_fetch_sub_explicit(&qp->irq.counted, 1, memory_order_release);
    uint32_t h = atomic_load_explicit(&qp->irq.head, memory_order_relaxed);
    atomic_store_explicit(&qp->irq.head, h + 1, memory_order_release);
}

/* Both locks held (attach, flush, reset). */
static inline void irq_clear(struct emu_qp *qp)
{
    qp->irq.tx = 0;
    atomic_store_explicit(&qp->irq.counted, 0, memory_order_relaxed);
    atomic_store_explicit(&qp->irq.head, 0, memory_order_relaxed);
    atomic_store_explicit(&qp->irq.tail, 0, memory_order_relaxed);
}

#endif
