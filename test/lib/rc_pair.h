/* Two IAs of one provider record on 127.0.0.1, a client EP connected to a
 * server EP through a PSP, each side with its own PZs, EVDs and LMRs over
 * one buffer (the DTO, bind, counter, fault and hostile-peer tests). Also:
 * stalling an IA's engine thread, so that a peer does not answer (an RDMA
 * Read stays outstanding) until the test lets it go. Linked from
 * test/lib/ (libsdtest.a). */
#ifndef SOFTDAT_TEST_LIB_RC_PAIR_H
#define SOFTDAT_TEST_LIB_RC_PAIR_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>

#include "lib/provider/ep.h"
#include "test/lib/prov_fixture.h"

#define RP_BUF 65536

struct rp_side {
    DAT_PROVIDER *p;
    DAT_IA_HANDLE ia;
    DAT_PZ_HANDLE pz, pz2;
    DAT_EVD_HANDLE cr, conn, req, rcv;
    char *buf;
    /* lmr: ALL rights; ro: LOCAL_READ only; pz2: ALL in pz2; rw: local
     * rights + REMOTE_WRITE only (no REMOTE_READ). */
    DAT_LMR_HANDLE lmr, lmr_ro, lmr_pz2, lmr_rw;
    DAT_LMR_CONTEXT lc, lc_ro, lc_pz2, lc_rw;
    DAT_RMR_CONTEXT rc, rc_rw;
};

struct rp_pair {
    struct rp_side c, s;
    DAT_EP_HANDLE cep, sep;
    DAT_PSP_HANDLE psp;
    DAT_CONN_QUAL port;
};

/* EP attributes the tests use unless they say otherwise. */
void rp_attr(DAT_EP_ATTR *a, DAT_COMPLETION_FLAGS req_flags, DAT_COMPLETION_FLAGS recv_flags);
/* Register the side's buffer (RP_BUF bytes) in pz with priv; rc may be NULL. */
void rp_lmr(struct rp_side *s, DAT_PZ_HANDLE pz, DAT_MEM_PRIV_FLAGS priv, DAT_LMR_HANDLE *lmr,
            DAT_LMR_CONTEXT *lc, DAT_RMR_CONTEXT *rc);
void rp_side_open(struct rp_side *s, DAT_PROVIDER *p);
void rp_side_close(struct rp_side *s);

DAT_EVENT rp_wait(struct rp_side *s, DAT_EVD_HANDLE evd, DAT_EVENT_NUMBER want);
DAT_DTO_COMPLETION_EVENT_DATA rp_dto(struct rp_side *s, DAT_EVD_HANDLE evd);
/* Nothing arrives on evd within us microseconds. */
void rp_none(struct rp_side *s, DAT_EVD_HANDLE evd, DAT_TIMEOUT us);
DAT_EP_STATE rp_state(struct rp_side *s, DAT_EP_HANDLE ep);
/* An EP with the side's PZ and request / receive / connection EVDs. */
DAT_EP_HANDLE rp_ep(struct rp_side *s, const DAT_EP_ATTR *a);

/* Connect cep (client side) to a new server EP created with sa; both end
 * up Connected. The PSP stays (for more connections). */
DAT_EP_HANDLE rp_connect(struct rp_pair *x, DAT_EP_HANDLE cep, const DAT_EP_ATTR *sa);
/* Open both sides (record `name`, ia_params "lo" for InfiniBand semantics,
 * the default, or e.g. "lo iwarp") and connect a client EP (attributes ca)
 * to a server EP (sa). NULL attributes: rp_attr(threshold, threshold). */
void rp_open_params(struct rp_pair *x, const char *name, const char *params, const DAT_EP_ATTR *ca,
                    const DAT_EP_ATTR *sa);
void rp_open(struct rp_pair *x, const char *name, const DAT_EP_ATTR *ca, const DAT_EP_ATTR *sa);
void rp_close(struct rp_pair *x);

static inline DAT_LMR_TRIPLET rp_tri(DAT_LMR_CONTEXT lc, const void *addr, DAT_SEG_LENGTH len)
{
    DAT_LMR_TRIPLET t;
    t.lmr_context = lc;
    t.virtual_address = (DAT_VADDR)(uintptr_t)addr;
    t.segment_length = len;
    return t;
}

static inline DAT_RMR_TRIPLET rp_rtri(DAT_RMR_CONTEXT rc, const void *addr, DAT_SEG_LENGTH len)
{
    DAT_RMR_TRIPLET t;
    t.rmr_context = rc;
    t.virtual_address = (DAT_VADDR)(uintptr_t)addr;
    t.segment_length = len;
    return t;
}

static inline DAT_DTO_COOKIE rp_ck(uint64_t v)
{
    DAT_DTO_COOKIE c;
    c.as_64 = v;
    return c;
}

/* ---- stalling an IA's engine thread (the peer stops answering) ---- */

struct rp_stall {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int state; /* 0 queued, 1 engine held, 2 released, 3 job done */
};

/* Hold ia's engine thread until rp_stall_end (5 s at most). */
void rp_stall_begin(struct rp_stall *b, DAT_IA_HANDLE ia);
void rp_stall_end(struct rp_stall *b);

#endif
