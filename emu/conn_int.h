/* Private to emu/conn.c and emu/conn_listen.c: the connection and listener
 * objects and the helpers the two files share. See docs/emu-design.md. */
#ifndef SOFTDAT_EMU_CONN_INT_H
#define SOFTDAT_EMU_CONN_INT_H

#include "emu/conn.h"
#include "emu/lock.h"
#include "emu/wire_io.h"

#include <pthread.h>
#include <stdatomic.h>

#define ACCEPT_BATCH 32 /* TCP accepts per readiness callback */
#define DRAIN_ROUNDS 16 /* reads per callback when there is no rx hook */
#define RTR_MAX_FPDU 64 /* a Read Request RTR is 52 bytes on the wire */

enum cstate {
    CS_NEW,             /* active: connect job not run yet */
    CS_A_TCP,           /* active: TCP connect in progress */
    CS_A_RETRY,         /* active: TCP refused, no socket; retry timer armed */
    CS_A_SEND_REQ,      /* active: writing the MPA Request */
    CS_A_WAIT_REP,      /* active: reading the MPA Reply */
    CS_A_SEND_RTR,      /* active: writing the RTR */
    CS_A_WAIT_RTR_RESP, /* active: Read RTR sent, reading its zero-length Response */
    CS_P_WAIT_REQ,      /* passive: reading the MPA Request (listener owns it) */
    CS_P_PENDING,       /* passive: delivered, waiting for accept/reject */
    CS_P_DEAD,          /* passive: delivered, peer gone or misbehaved */
    CS_P_SEND_REP,      /* passive: writing the accepting Reply */
    CS_P_WAIT_RTR,      /* passive: reading the RTR */
    CS_P_SEND_RTR_RESP, /* passive: writing the zero-length Read Response */
    CS_REJECTING,       /* passive: reject Reply written, lingering (engine owns it) */
    CS_EST,             /* established */
    CS_CLOSING,         /* established, our FIN sent, waiting for the peer's */
    CS_LINGER,          /* abrupt disconnect reported; FIN sent (after the data path's
                           last words, if any), reading and discarding until the peer's
                           EOF or the linger timer, then close */
    CS_CLOSED,          /* socket closed */
};

struct emu_conn {
    struct emu_engine *e;
    struct emu_wire_ep wire;    /* passed to every emu_wire_send/recv of fd */
    atomic_int refs;            /* owner (user, listener or engine) + queued jobs */
    emu_lock_t lock;            /* state, fd, w, want_tx, info (cross-thread readers) */
    enum cstate state;
    int fd;
    struct emu_fdw *w;
    struct emu_timer *timer;
    struct emu_timer *retry;    /* active: next TCP connect after a refusal */
    struct emu_timer *rx_timer; /* established: rx hook paused (EMU_RX_PAUSE), run it again */
    uint32_t rx_retry_us;       /* that pause; engine thread */
    uint64_t rx_timer_at;       /* emu_now_us() when rx_timer fires (0: not armed); engine thread */
    struct emu_engine_hook hook;
    bool want_tx;
    bool term;                  /* the data path sent a Terminate: end with FIN, not RST */
    uint8_t *last;              /* its last words not yet written (EMU_CONN_LAST_WORDS_MAX) */
    size_t last_len, last_off;

    /* engine thread only below (or before the first job is queued) */
    bool initiator;
    bool released;              /* resources gone, owner ref dropped */
    bool user_gone;             /* no more events (freed, consumed by reject) */
    bool free_pending;          /* emu_conn_free from inside a callback */
    bool terminal_sent;
    bool answered;              /* passive: accept/reject called (under lock) */
    int in_cb;
    int dead_err;               /* CS_P_DEAD: why */
    bool orphan;                /* CS_LINGER: freed by the owner, the engine closes and frees */
    bool peer_marker;           /* passive: the Request carried a capability marker */
    uint32_t peer_caps;         /* passive: its mask */
    bool refused;               /* active: a TCP connect was refused (RST) */
    uint64_t retry_deadline;    /* active: emu_now_us() after which a refusal is final */
    uint32_t retry_delay_us;    /* active: the next backoff */
    uint32_t retries;           /* active: TCP connects retried after a refusal */
    bool adopted;               /* fd duplicates the consumer's socket orig_fd (conn_adopt.c) */
    int orig_fd, orig_fl;       /* adopted: the consumer's descriptor and its file status flags */

    struct emu_listener *listener; /* CS_P_WAIT_REQ only */
    struct emu_conn *lprev, *lnext;

    struct emu_conn_ops ops;
    void *ctx;
    struct emu_conn_params params;
    struct emu_mpa_policy pol;
    struct emu_mpa_frame req;   /* sent (active) / received (passive); pd -> req_pd */
    uint8_t req_pd[EMU_MPA_PD_MAX];
    uint8_t apd[EMU_CONN_PDATA_MAX]; /* accept/reject private data */
    uint16_t apd_len;
    uint8_t rep_pd[EMU_CONN_PDATA_RX_MAX]; /* active: the Reply's private data */
    uint16_t rep_pd_len;
    struct emu_conn_info info;
    struct sockaddr_storage target;
    socklen_t target_len;
    struct sockaddr_storage src;   /* active: source address to bind (port 0), if src_len */
    socklen_t src_len;

    uint8_t in[EMU_MPA_FRAME_MAX];
    size_t in_len, in_need;
    int in_phase;
    uint8_t out[EMU_MPA_FRAME_MAX + RTR_MAX_FPDU];
    size_t out_len, out_off;
};

struct emu_listener {
    struct emu_engine *e;
    int fd;
    struct emu_fdw *w;
    struct emu_listener_ops ops;
    void *ctx;
    struct sockaddr_storage addr;
    socklen_t alen;
    uint16_t port;
    struct emu_conn *pending;   /* CS_P_WAIT_REQ connections */
    struct emu_timer *backoff;  /* re-enables accepting after EMFILE & co. */
    bool addr_specific;         /* bound to one address (not the wildcard): it is
                                   every accepted connection's local address */
    struct emu_engine_hook hook;
    int in_cb;
    bool free_pending;
    bool released;
};

/* conn.c */
struct emu_conn *conn_alloc(struct emu_engine *e);
int conn_attach(struct emu_conn *c);
void conn_release(struct emu_conn *c);
void conn_expect(struct emu_conn *c, size_t need);
void conn_watch(struct emu_conn *c, unsigned on, unsigned off);
void conn_fill_addrs(struct emu_conn *c);
void conn_fill_addrs_known(struct emu_conn *c, const struct sockaddr_storage *local, socklen_t local_len,
                           const struct sockaddr_storage *peer, socklen_t peer_len);
void conn_fill_mss(struct emu_conn *c);
void conn_listener_unlink(struct emu_conn *c);

int conn_connect_start(struct emu_engine *e, const struct sockaddr *peer, socklen_t peer_len,
                       const struct sockaddr *local, socklen_t local_len,
                       const struct emu_conn_params *p, const void *pdata, uint16_t pdata_len,
                       const struct emu_conn_ops *ops, void *ctx, struct emu_conn **out, int adopt_fd);

/* conn_adopt.c */
int conn_adopt_socket(struct emu_conn *c, int fd);
/* The adopted socket's fate is decided: established (the consumer's
 * descriptor is closed: the socket is the connection's now) or not (it
 * stays the consumer's, flags restored). No-op when not adopted. */
void conn_adopt_settle(struct emu_conn *c, bool established);

/* conn_listen.c */
void conn_listener_release(struct emu_listener *l);
void conn_sockaddr_set_port(struct sockaddr_storage *ss, uint16_t port);
int conn_addr_copy(struct sockaddr_storage *ss, socklen_t *sslen, const struct sockaddr *sa,
                   socklen_t len);
bool conn_crc_wanted(enum emu_crc_mode m, const struct sockaddr *local,
                     const struct sockaddr *peer);
void conn_sock_tune(int fd, const struct sockaddr *end);
int conn_active_socket(const struct emu_conn *c, int *out);
uint64_t conn_refused_retry_us(void);
void conn_close_fd(int fd, bool abortive);

#endif
