/* Two engines in one process over 127.0.0.1, each with a memory table,
 * PZs and a QP, connected A (active) -> B (passive): the emu/qp tests
 * (test_qp.c, test_qp_poll.c, test_qp_lifetime.c, test_qp_crc.c).
 * Completions are recorded per side; a side can be "raw" (no QP attached:
 * the test writes FPDUs itself). Linked from test/lib/ (libsdtest.a). */
#ifndef SOFTDAT_TEST_LIB_QP_PAIR_H
#define SOFTDAT_TEST_LIB_QP_PAIR_H

#include "emu/conn.h"
#include "emu/engine.h"
#include "emu/mem.h"
#include "emu/qp.h"

#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#define QP_MAXC 8192      /* completions recorded per side */
#define QP_WAIT_MS 20000  /* QP_WAIT_FOR's bound */

struct qp_side {
    const char *name;
    struct emu_engine *e;
    struct emu_mem_table *mt;
    struct emu_pz *pz, *pz2;
    struct emu_qp *qp;
    struct emu_conn *c;
    pthread_mutex_t m;
    pthread_cond_t cv;
    struct emu_cqe *scq, *rcq;
    int ns, nr;
    atomic_int nr_atomic;
    atomic_int rx_hook_calls;   /* the engine's rx hook runs (reads or lease looks) */
    int established, terminal, term_type, term_err;
    bool fatal;
    struct emu_qp_fatal f;
    /* write-then-send check: bytes that must be in place when a recv completes */
    const uint8_t *chk_buf, *chk_ref;
    size_t chk_len;
    int chk_bad;
    /* raw: no QP attached; the test writes FPDUs itself and collects bytes */
    bool raw;
    uint8_t raw_in[4096];
    size_t raw_len;
};

struct qpcfg {
    uint32_t sq, rq, sge;
    uint16_t ird, ord;
    uint64_t max_msg;
    bool rfc7306;
    bool ib;                    /* InfiniBand semantics: placement probes (placement_ack) */
    struct emu_srq *srq;
};

/* A (active, client) and B (passive, server) of the running test. */
extern struct qp_side A, B;
extern struct emu_listener *qp_lis;
/* The passive side's connection parameters (set by qp_pair_up_cfg). */
extern struct emu_conn_params qp_params;
extern const struct emu_conn_ops qp_cops;
extern const struct qpcfg qp_defcfg;  /* sq/rq 1024, 4 SGEs, IRD/ORD 8 */
/* Options of the next qp_pair_up*, reset by qp_pair_down: the initiator
 * does not ask for peer-to-peer RTR; no capability marker (1: initiator
 * sends none, 2: responder answers without); A is raw. */
extern bool qp_no_p2p;
extern int qp_no_caps;
extern bool qp_raw_a;

void qp_lock(struct qp_side *s);
void qp_unlock(struct qp_side *s); /* wakes QP_WAIT_FOR waiters */
int qp_get_ns(struct qp_side *s);
int qp_get_nr(struct qp_side *s);
void qp_deadline(struct timespec *ts, int ms);

/* Until cond holds (read under s->m) or stop does, at most QP_WAIT_MS;
 * cond's final value. */
#define QP_WAIT_UNTIL_(s, cond, stop)                                                               \
    ({                                                                                             \
        struct timespec ts_;                                                                       \
        qp_deadline(&ts_, QP_WAIT_MS);                                                             \
        pthread_mutex_lock(&(s)->m);                                                               \
        while (!(cond) && !(stop))                                                                 \
            if (pthread_cond_timedwait(&(s)->cv, &(s)->m, &ts_) != 0)                              \
                break;                                                                             \
        bool ok_ = (cond);                                                                         \
        pthread_mutex_unlock(&(s)->m);                                                             \
        ok_;                                                                                       \
    })
#define QP_WAIT_FOR(s, cond) QP_WAIT_UNTIL_(s, cond, false)
/* The same, but giving up as soon as s's connection ended. */
#define QP_WAIT_LIVE(s, cond) QP_WAIT_UNTIL_(s, cond, (s)->terminal != 0)

/* Connect A -> B with QPs configured by qa/qb and MPA CRC mode crc. */
void qp_pair_up_cfg(const struct qpcfg *qa, const struct qpcfg *qb, enum emu_crc_mode crc);
void qp_pair_up(void);
void qp_pair_down(void);
/* Block s's engine thread (so its receive side does nothing) until qp_unstall. */
void qp_stall(struct qp_side *s);
void qp_unstall(void);

uint32_t qp_reg(struct qp_side *s, void *addr, uint64_t len, struct emu_pz *pz, uint32_t acc, struct emu_mr **mr);
/* Deterministic pseudo-random bytes. */
void qp_fill(uint8_t *p, size_t n, unsigned seed);
int qp_post_send(struct qp_side *s, uint64_t cookie, void *buf, uint32_t len, uint32_t flags);
int qp_post_rdma(struct qp_side *s, enum emu_wr_op op, uint64_t cookie, void *buf, uint32_t len, uint32_t stag,
                 uint64_t to, uint32_t flags);

#endif
