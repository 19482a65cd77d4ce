/* Private to emu/qp*.c: the queue pair's state. See docs/emu-datapath.md.
 *
 * Locks (order: rx_lock -> rq_lock / srq lock, rx_lock -> sq_lock; rq_lock
 * and sq_lock are never nested):
 *   sq_lock  send queue ring, transmit batch, inbound read queue (IRD: its
 *            responses are interleaved into our byte stream), tx MSNs,
 *            ORD accounting, conn pointer for writes. send_done runs under it.
 *   rx_lock  the receive state machine (header -> payload -> trailer), the
 *            prefetch buffer, the receive in progress. recv_done runs under
 *            it. The engine takes it blocking; consumer threads try it.
 *   rq_lock  the private receive ring (post_recv vs the receive path). */
#ifndef SOFTDAT_EMU_QP_INTERNAL_H
#define SOFTDAT_EMU_QP_INTERNAL_H

#include "emu/qp.h"

#include <pthread.h>
#include <stdatomic.h>

#define QP_PF_SIZE (64u * 1024u)        /* receive prefetch buffer */
#define QP_DIRECT_MIN (16u * 1024u)     /* payload >= this is read in place */
#define QP_DIRECT_TAIL 256u             /* prefetch bytes read behind it: trailer + next header */
#define QP_RX_ORDERED_TAIL 64u          /* last bytes of each copy stored in address order (qp_rx.c) */
#define QP_RX_CQES 32u                  /* receive completions held until a qp_rx_run ends */
#define QP_POLL_GAP_US 5u               /* polling passes further apart (time the polling
                                           thread spent outside them and its posts) start a new run */
#define QP_POLL_HOT_US 50u              /* a run this long earns the lease (emu_qp_poll_lease) */
#define QP_TXB_FPDUS 32u                /* FPDUs coalesced in one writev */
#define QP_TXB_IOV (QP_TXB_FPDUS * 4u + EMU_QP_MAX_SGE + 4u)
#define QP_TXB_BYTES (512u * 1024u)     /* stop adding FPDUs beyond this */
#define QP_TX_MULPDU_MAX 65535u         /* 16-bit ULPDU_Length limit */
/* CRC on: every FPDU's payload is copied here and sent from the copy, so
 * the CRC covers exactly the bytes on the wire (the source may change under
 * us: a Read Response's region belongs to a running application). Holds
 * four maximum-size FPDUs; it bounds coalescing when CRC is on. */
#define QP_TX_STAGE_BYTES (256u * 1024u)

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
/* How long emu_qp_quiesce waits for the peer's probe behind the last
 * message placed (one round trip on a loaded host). */
#define QP_CONFIRM_WAIT_US 200000u

#define QP_RX_STALL 1 /* receive side waits for a posted receive (RNR) */

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
enum rx_kind { RXK_NONE = 0, RXK_SEND, RXK_WRITE, RXK_RRESP, RXK_FIXED };

struct emu_srq {
    pthread_mutex_t lock;
    struct rq_wqe *ring;
    uint32_t cap, head, tail;   /* tail - head = posted */
    uint32_t max_sge;
    uint32_t lw;
    bool lw_armed;
    void (*lw_hit)(void *ctx);
    void *ctx;
    atomic_uint users;
};

struct emu_qp {
    struct emu_qp_attr a;
    struct emu_qp_ops ops;

    /* ---- send side (sq_lock) ---- */
    pthread_mutex_t sq_lock;
    struct emu_conn *c;         /* attached connection (NULL when not attached) */
    uint32_t caps;              /* RFC 7306 in use (EMU_CONN_CAP_*): attr.rfc7306, or what
                                   both ends offered (conn info); written with sq_lock and
                                   rx_lock held, read under either */
    uint64_t conn_id;
    bool crc;
    bool tx_dead;               /* error or Terminate sent: no more bytes */
    bool want_tx;               /* waiting for writability */
    bool disc_pending;          /* graceful disconnect once drained */
    bool disc_done;
    bool tx_hold;               /* passive without p2p: wait for the first FPDU (RFC 5044) */
    struct sq_wqe *sq;
    struct emu_sge *sq_sge;
    uint32_t sq_cap, sq_head, sq_tx, sq_tail; /* absolute counters, mod sq_cap */
    uint32_t tx_msn[EMU_QN_COUNT];
    uint32_t mulpdu;            /* transmit FPDU size */
    uint16_t ird, ord;          /* negotiated */
    uint32_t reads_out;         /* the consumer's Read/atomic Requests sent, not yet answered */
    struct rd_ent *rd_fifo;     /* outstanding Read Requests, in order (rd_cap) */
    uint32_t rd_cap, rd_head, rd_tail;
    uint32_t unacked;           /* WQ_ACK entries */
    uint32_t ack_tail;          /* one past the last started WR that needs confirming */
    uint32_t covered;           /* WRs before this SQ index have a Read Request after them */
    uint32_t probes_out;        /* placement probes awaiting their responses */
    uint64_t probes;
    uint32_t read_seq;
    struct ird_ent *irq;        /* inbound Read Requests (IRD) */
    uint32_t irq_cap, irq_head, irq_tx, irq_tail; /* head: oldest unanswered; tx: next to start */
    bool last_was_resp;
    bool term_pending;          /* a Terminate waits for an FPDU boundary */
    atomic_bool irq_deferred;   /* a zero-length Read's answer waits for the next pump (qp_rx.c);
                                   written under sq_lock, read without it by pollers */
    struct emu_term term_out;
    struct txcur cur;
    struct txbatch tb;
    uint64_t tx_bytes, tx_fpdus;

    /* ---- receive side (rx_lock) ---- */
    pthread_mutex_t rx_lock;
    _Atomic int rx_fd;          /* the socket, for consumer-thread progress (-1 once detached);
                                   written under rx_lock, read without it by emu_qp_progress_many */
    bool rx_attached;
    bool rx_dead;
    bool rx_release_tx;         /* the first FPDU releases tx_hold */
    int rx_err;                 /* what emu_qp_rx returns once dead */
    struct emu_ddp_rx_state ddp;
    uint8_t phase, kind;
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
    struct emu_mem_ref wref;    /* Write target, held while placing */
    uint64_t rx_wlen;           /* payload bytes of the RDMA Write message in progress */
    uint32_t rx_last_wlen;      /* length of the last complete Write message ... */
    bool rx_prev_write;         /* ... if it was the last message on the stream: an
                                   Immediate Data right after it reports that length */
    uint64_t rnr_since;         /* emu_now_us() of the first look that found no receive, 0 */
    bool rnr_kicked;            /* a consumer thread stalled: the engine was asked to take over */
    uint64_t rnr_stalls;
    bool have_imm_recv;         /* imm_recv: the receive an Immediate Data header took */
    struct rq_wqe imm_recv;
    bool rresp_probe;           /* the Read Response being received answers a probe */
    bool peer_probes;           /* the peer confirms placement with zero-length Reads */
    uint32_t rx_placed;         /* Sends and Writes placed (count, wraps) ... */
    uint32_t rx_confirmed;      /* ... of which a Read or Atomic Request since then
                                   confirms placement to the peer (its answer follows them) */
    bool have_recv;             /* cur_recv holds a receive in progress */
    bool recv_err_set;
    enum emu_wc_status recv_err;
    struct rq_wqe cur_recv;
    uint32_t rresp_sq_idx;      /* Read being answered */
    uint64_t rresp_off;
    uint8_t *pf;                /* prefetch buffer */
    uint32_t pf_off, pf_len;
    uint32_t ncomp;             /* completions produced (for progress) */
    struct emu_cqe rxc[QP_RX_CQES]; /* receive completions of this qp_rx_run, delivered at its end */
    uint32_t rxc_n;
    uint64_t rx_bytes, rx_fpdus;

    /* ---- private receive queue (rq_lock) ---- */
    pthread_mutex_t rq_lock;
    struct rq_wqe *rq;
    uint32_t rq_cap, rq_head, rq_tail;

    atomic_bool fatal_sent;
    _Atomic uint64_t poll_until_us; /* emu_qp_poll_lease: a consumer polls until then */
    _Atomic uint64_t poll_since_us; /* start of its current run of close passes */
    _Atomic uintptr_t poll_thread;  /* the thread of that run */
    atomic_bool poll_off;       /* the consumer met the end of the stream: no more leases */
    atomic_bool engine_parked;  /* the engine paused reading for a lease, its timer armed */
    atomic_bool rx_held;        /* input waits in the QP (RNR stall), not in the socket */
};

/* qp.c */
void qp_fatal(struct emu_qp *qp, bool remote, const struct emu_term *t, int err);
bool qp_pop_recv(struct emu_qp *qp, struct rq_wqe *out);
void qp_sq_report(struct emu_qp *qp, uint32_t idx, enum emu_wc_status st, uint32_t len);
void qp_sq_confirm(struct emu_qp *qp, uint32_t upto);
uint32_t qp_sge_slice(const struct emu_sge *sge, uint32_t nsge, uint64_t off, uint64_t len,
                      struct iovec *iov, uint32_t max);

/* qp_tx.c (sq_lock held) */
void qp_tx_pump(struct emu_qp *qp);
/* Send a Terminate as soon as the stream is at an FPDU boundary (best
 * effort), then transmit nothing more. */
void qp_tx_terminate(struct emu_qp *qp, const struct emu_term *t);

/* A consumer's lease keeps the engine off this QP's socket now (qp.c). */
bool qp_engine_parked(struct emu_qp *qp);

/* qp_rx.c (rx_lock held) */
int qp_rx_run(struct emu_qp *qp, int fd, bool engine);
void qp_rx_deliver_pending(struct emu_qp *qp);
void qp_rx_reset(struct emu_qp *qp);

static inline struct sq_wqe *sq_at(struct emu_qp *qp, uint32_t idx)
{
    return &qp->sq[idx % qp->sq_cap];
}

static inline struct rd_ent *rd_at(struct emu_qp *qp, uint32_t i)
{
    return &qp->rd_fifo[i % qp->rd_cap];
}

#endif
