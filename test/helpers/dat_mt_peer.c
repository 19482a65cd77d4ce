/* dat_mt_peer: the multi-threaded run of issue 13 (test/e2e/mt.sh), public
 * DAT API only, both ends in one process.
 *
 *   dat_mt_peer IA PORT [ROUNDS [CYCLES [SECONDS]]]
 *
 * Opens two thread-safe IAs named IA (dat_ia_openv, thread_safety
 * DAT_TRUE: the dat.conf entry must say "threadsafe"), connects NEP
 * endpoints from the client IA to the server IA, every EP of a side
 * sharing that side's EVDs. Then, at the same time:
 *   - NPOST poster threads post Sends, RDMA Writes and RDMA Reads to the
 *     shared client EPs (thread t, operation k goes to EP (t + k) % NEP),
 *     at most WINDOW outstanding each, ROUNDS rounds of OPS operations,
 *     lengths 16 B - 8 KiB, every byte patterned by (thread, round, op);
 *   - one thread waits on the client's shared request EVD: every
 *     completion must be successful; a Read's bytes are compared before
 *     the poster gets its window slot back;
 *   - one thread waits on the server's shared receive EVD, checks every
 *     Send's bytes and that it arrives exactly once, and reposts the
 *     receive on the EP it completed on.
 * At the end every count must match (posted = completed per kind, Sends
 * received = Sends posted), the EPs disconnect, every Write's bytes are
 * compared at the target (each Write has a target slot of its own), and
 * everything is freed;
 * after dat_ia_close the process holds the descriptors it had before.
 * CYCLES (default 3) repeats all that (with SECONDS: until that many
 * seconds have passed, at most CYCLES times; scripts/soak); resident memory after the last
 * cycle may exceed that after the second by at most 4 MiB (the first one
 * warms the allocator up: glibc raises its mmap threshold once the large
 * buffers are freed, and keeps later ones on its heap). Skipped with
 * MT_NO_RSS_CHECK=1: a sanitizer's quarantine keeps freed memory.
 * Prints "mt cycle C: ..." lines, "FAIL ..." and exits 1 on a failed
 * check. Every wait is bounded. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <dat2/udat.h>

#include "test/lib/clock.h"
#include "test/lib/peer.h"

enum {
    NPOST = 4,   /* poster threads */
    NEP = 2,     /* shared endpoints */
    OPS = 30,    /* operations per thread per round: Send, Write, Read in turn */
    WINDOW = 4,  /* outstanding per poster */
    SZ = 8192,   /* largest message */
    NRECV = 32,  /* receives per server EP */
    RD_AREA = 64 * 1024,
    HDR = 16,
    MAX_ROUNDS = 50,
};
enum { K_SEND = 0, K_WRITE = 1, K_READ = 2, NKIND = 3 };
static const char *const kind_name[NKIND] = {"Send", "Write", "Read"};
#define WAIT_US (10u * 1000000u) /* one wait for any one thing */

/* Client region: source slots (t, k), then sink slots (t, k). Server
 * region: receive slots (ep, i), the Read source, Write target slots
 * (t, round, k): one per Write of a cycle, checked at its end. */
#define SLOTS ((size_t)NPOST * OPS)
#define CL_SRC 0
#define CL_SNK (SLOTS * SZ)
#define CL_LEN (2 * SLOTS * SZ)
#define SV_RCV 0
#define SV_RD ((size_t)NEP * NRECV * SZ)
#define SV_WT (SV_RD + RD_AREA)
#define SV_LEN(rounds) (SV_WT + (size_t)NPOST * (size_t)(rounds) * OPS * SZ)

struct side {
    DAT_IA_HANDLE ia;
    DAT_PZ_HANDLE pz;
    DAT_EVD_HANDLE async, req, rcv, conn, cr;
    DAT_PSP_HANDLE psp;
    DAT_EP_HANDLE ep[NEP];
    uint8_t *buf;
    DAT_LMR_HANDLE lmr;
    DAT_LMR_CONTEXT lc;
    DAT_RMR_CONTEXT rc;
};

struct poster {
    int t;
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int outstanding;
};

static struct side S, C;
static struct poster P[NPOST];
static int g_rounds;
static atomic_bool g_stop;
static atomic_int g_failed;
static atomic_uint_fast64_t g_posted[NKIND], g_done[NKIND], g_bytes[NKIND], g_received;
static atomic_uchar g_seen[NPOST][MAX_ROUNDS][OPS]; /* Sends received, per (t, round, k) */

#define FAILF(...)                                                                                                     \
    do {                                                                                                               \
        printf("FAIL mt: " __VA_ARGS__);                                                                               \
        printf("\n");                                                                                                  \
        fflush(stdout);                                                                                                \
        atomic_store(&g_failed, 1);                                                                                    \
    } while (0)

static uint32_t mix(uint32_t x)
{
    x ^= x >> 16;
    x *= 0x7feb352dU;
    x ^= x >> 15;
    x *= 0x846ca68bU;
    return x ^ (x >> 16);
}

static uint32_t seed_of(int t, int round, int k)
{
    return (uint32_t)t << 24 | (uint32_t)round << 8 | (uint32_t)k;
}

static uint32_t len_of(uint32_t seed)
{
    return HDR + mix(seed) % (SZ - HDR + 1);
}

static uint8_t pat(uint32_t seed, size_t i)
{
    return (uint8_t)((i * 131u) ^ (seed * 7u) ^ (seed >> 8) ^ (i >> 9));
}

static bool pat_ok(const uint8_t *p, uint32_t seed, size_t from, size_t len)
{
    for (size_t i = from; i < len; i++)
        if (p[i] != pat(seed, i))
            return false;
    return true;
}

/* Read source: fixed bytes; a Read of (t, round, k) takes len at off. */
static uint8_t rd_byte(size_t i)
{
    return (uint8_t)(i * 29u + (i >> 11));
}

static size_t rd_off(uint32_t seed, uint32_t len)
{
    return mix(seed ^ 0xABCDu) % (RD_AREA - len + 1);
}

/* cookie: kind (2 bits) | t (6) | k (8) | round (16) */
static DAT_DTO_COOKIE cookie_of(int kind, int t, int k, int round)
{
    return peer_cookie((uint64_t)kind | (uint64_t)t << 2 | (uint64_t)k << 8 | (uint64_t)round << 16);
}

static void open_side(struct side *s, const char *ia, size_t len)
{
    memset(s, 0, sizeof *s);
    s->async = DAT_HANDLE_NULL;
    PEER_MUST(dat_ia_openv((DAT_NAME_PTR)ia, 16, &s->async, &s->ia, DAT_VERSION_MAJOR, DAT_VERSION_MINOR, DAT_TRUE));
    PEER_MUST(dat_pz_create(s->ia, &s->pz));
    PEER_MUST(dat_evd_create(s->ia, 512, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &s->req));
    PEER_MUST(dat_evd_create(s->ia, 512, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &s->rcv));
    PEER_MUST(dat_evd_create(s->ia, 16, DAT_HANDLE_NULL, DAT_EVD_CONNECTION_FLAG, &s->conn));
    PEER_MUST(dat_evd_create(s->ia, 16, DAT_HANDLE_NULL, DAT_EVD_CR_FLAG, &s->cr));
    s->buf = aligned_alloc(4096, len);
    if (s->buf == NULL)
        PEER_FAIL("no memory");
    memset(s->buf, 0, len);
    peer_register(s->ia, s->pz, s->buf, len, DAT_MEM_PRIV_ALL_FLAG, &s->lmr, &s->lc, &s->rc);
    DAT_EP_ATTR a = peer_rc_attr(SZ, NRECV, 64, 1, 4);
    for (int e = 0; e < NEP; e++)
        PEER_MUST(dat_ep_create(s->ia, s->pz, s->rcv, s->req, s->conn, &a, &s->ep[e]));
}

static void close_side(struct side *s)
{
    for (int e = 0; e < NEP; e++)
        PEER_MUST(dat_ep_free(s->ep[e]));
    if (s->psp)
        PEER_MUST(dat_psp_free(s->psp));
    PEER_MUST(dat_lmr_free(s->lmr));
    DAT_EVD_HANDLE evds[] = {s->req, s->rcv, s->conn, s->cr};
    for (size_t i = 0; i < sizeof evds / sizeof evds[0]; i++)
        PEER_MUST(dat_evd_free(evds[i]));
    PEER_MUST(dat_pz_free(s->pz));
    PEER_MUST(dat_ia_close(s->ia, DAT_CLOSE_GRACEFUL_FLAG));
    free(s->buf);
}

static void post_recv(DAT_EP_HANDLE ep, int e, int i)
{
    DAT_LMR_TRIPLET r = peer_triplet(S.lc, S.buf + SV_RCV + ((size_t)e * NRECV + (size_t)i) * SZ, SZ);
    PEER_MUST(dat_ep_post_recv(ep, 1, &r, peer_cookie((uint64_t)e << 8 | (uint64_t)i), DAT_COMPLETION_DEFAULT_FLAG));
}

static void connect_all(unsigned port)
{
    PEER_MUST(dat_psp_create(S.ia, port, S.cr, DAT_PSP_CONSUMER_FLAG, &S.psp));
    for (int e = 0; e < NEP; e++)
        for (int i = 0; i < NRECV; i++)
            post_recv(S.ep[e], e, i);
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    for (int e = 0; e < NEP; e++) {
        PEER_MUST(dat_ep_connect(C.ep[e], (DAT_IA_ADDRESS_PTR)&sa, port, WAIT_US, 0, NULL, DAT_QOS_BEST_EFFORT,
                                 DAT_CONNECT_DEFAULT_FLAG));
        DAT_EVENT ev = peer_wait_for(S.cr, DAT_CONNECTION_REQUEST_EVENT, "the connection request");
        PEER_MUST(dat_cr_accept(ev.event_data.cr_arrival_event_data.cr_handle, S.ep[e], 0, NULL));
        peer_wait_for(S.conn, DAT_CONNECTION_EVENT_ESTABLISHED, "ESTABLISHED (server)");
        peer_wait_for(C.conn, DAT_CONNECTION_EVENT_ESTABLISHED, "ESTABLISHED (client)");
    }
}

static bool take_slot(struct poster *p)
{
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += WAIT_US / 1000000u;
    bool ok = true;
    pthread_mutex_lock(&p->mu);
    while (ok && p->outstanding >= WINDOW)
        ok = pthread_cond_timedwait(&p->cv, &p->mu, &dl) == 0 || p->outstanding < WINDOW;
    if (ok)
        p->outstanding++;
    pthread_mutex_unlock(&p->mu);
    return ok;
}

static bool drain(struct poster *p)
{
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += WAIT_US / 1000000u;
    bool ok = true;
    pthread_mutex_lock(&p->mu);
    while (ok && p->outstanding > 0)
        ok = pthread_cond_timedwait(&p->cv, &p->mu, &dl) == 0 || p->outstanding == 0;
    pthread_mutex_unlock(&p->mu);
    return ok;
}

static void give_slot(struct poster *p)
{
    pthread_mutex_lock(&p->mu);
    p->outstanding--;
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
}

static size_t wt_off(int t, int round, int k)
{
    return SV_WT + (((size_t)t * (size_t)g_rounds + (size_t)round) * OPS + (size_t)k) * SZ;
}

static void *poster_main(void *arg)
{
    struct poster *p = arg;
    int t = p->t;
    for (int round = 0; round < g_rounds && !atomic_load(&g_failed); round++) {
        for (int k = 0; k < OPS && !atomic_load(&g_failed); k++) {
            if (!take_slot(p)) {
                FAILF("poster %d: no window slot within %u s (round %d op %d)", t, WAIT_US / 1000000u, round, k);
                return NULL;
            }
            int kind = k % NKIND;
            DAT_EP_HANDLE ep = C.ep[(t + k) % NEP];
            uint32_t seed = seed_of(t, round, k);
            uint32_t len = len_of(seed);
            size_t slot = (size_t)t * OPS + (size_t)k;
            uint8_t *src = C.buf + CL_SRC + slot * SZ;
            DAT_DTO_COOKIE ck = cookie_of(kind, t, k, round);
            DAT_RETURN rc;
            if (kind == K_READ) {
                DAT_LMR_TRIPLET l = peer_triplet(C.lc, C.buf + CL_SNK + slot * SZ, len);
                memset(C.buf + CL_SNK + slot * SZ, 0, len);
                DAT_RMR_TRIPLET r = {.rmr_context = S.rc,
                                     .virtual_address = (DAT_VADDR)(uintptr_t)(S.buf + SV_RD + rd_off(seed, len)),
                                     .segment_length = len};
                rc = dat_ep_post_rdma_read(ep, 1, &l, ck, &r, DAT_COMPLETION_DEFAULT_FLAG);
            } else {
                for (size_t i = 0; i < len; i++)
                    src[i] = pat(seed, i);
                DAT_LMR_TRIPLET l = peer_triplet(C.lc, src, len);
                if (kind == K_SEND) {
                    uint32_t h[4] = {0x4D54u, (uint32_t)t, (uint32_t)round, (uint32_t)k};
                    memcpy(src, h, HDR);
                    rc = dat_ep_post_send(ep, 1, &l, ck, DAT_COMPLETION_DEFAULT_FLAG);
                } else {
                    DAT_RMR_TRIPLET r = {.rmr_context = S.rc,
                                         .virtual_address = (DAT_VADDR)(uintptr_t)(S.buf + wt_off(t, round, k)),
                                         .segment_length = len};
                    rc = dat_ep_post_rdma_write(ep, 1, &l, ck, &r, DAT_COMPLETION_DEFAULT_FLAG);
                }
            }
            if (rc != DAT_SUCCESS) {
                FAILF("poster %d: posting a %s: 0x%08x", t, kind_name[kind], (unsigned)rc);
                give_slot(p);
                return NULL;
            }
            atomic_fetch_add(&g_posted[kind], 1);
        }
        /* The round's slots are reused by the next one. */
        if (!drain(p)) {
            FAILF("poster %d: round %d did not complete within %u s", t, round, WAIT_US / 1000000u);
            return NULL;
        }
    }
    return NULL;
}

/* Client request EVD: every completion, checked before its slot returns. */
static void *client_waiter(void *arg)
{
    (void)arg;
    double end = test_now_s() + 600;
    while (!atomic_load(&g_stop) && test_now_s() < end) {
        DAT_EVENT ev;
        DAT_COUNT n;
        DAT_RETURN rc = dat_evd_wait(C.req, 100000, 1, &ev, &n);
        if (DAT_GET_TYPE(rc) == DAT_TIMEOUT_EXPIRED)
            continue;
        if (rc != DAT_SUCCESS) {
            FAILF("client waiter: dat_evd_wait 0x%08x", (unsigned)rc);
            return NULL;
        }
        DAT_DTO_COMPLETION_EVENT_DATA d = ev.event_data.dto_completion_event_data;
        uint64_t c = d.user_cookie.as_64;
        int kind = (int)(c & 3), t = (int)(c >> 2 & 0x3F), k = (int)(c >> 8 & 0xFF), round = (int)(c >> 16 & 0xFFFF);
        if (ev.event_number != DAT_DTO_COMPLETION_EVENT || d.status != DAT_DTO_SUCCESS || kind >= NKIND ||
            t >= NPOST || k >= OPS) {
            FAILF("client waiter: event 0x%x status %d cookie 0x%llx", ev.event_number, (int)d.status,
                  (unsigned long long)c);
            return NULL;
        }
        uint32_t seed = seed_of(t, round, k);
        uint32_t len = len_of(seed);
        size_t slot = (size_t)t * OPS + (size_t)k;
        if (d.transfered_length != len && kind != K_WRITE)
            FAILF("%s t%d r%d k%d: %u bytes, want %u", kind_name[kind], t, round, k, (unsigned)d.transfered_length,
                  len);
        if (kind == K_READ) {
            const uint8_t *snk = C.buf + CL_SNK + slot * SZ;
            size_t off = rd_off(seed, len);
            for (size_t i = 0; i < len; i++)
                if (snk[i] != rd_byte(off + i)) {
                    FAILF("Read t%d r%d k%d: byte %zu is 0x%02x, want 0x%02x", t, round, k, i, snk[i],
                          rd_byte(off + i));
                    break;
                }
        }
        atomic_fetch_add(&g_done[kind], 1);
        atomic_fetch_add(&g_bytes[kind], len);
        give_slot(&P[t]);
    }
    return NULL;
}

/* Server receive EVD: every Send's bytes, exactly once; the receive is
 * posted again on the EP it completed on. */
static void *server_waiter(void *arg)
{
    (void)arg;
    double end = test_now_s() + 600;
    while (!atomic_load(&g_stop) && test_now_s() < end) {
        DAT_EVENT ev;
        DAT_COUNT n;
        DAT_RETURN rc = dat_evd_wait(S.rcv, 100000, 1, &ev, &n);
        if (DAT_GET_TYPE(rc) == DAT_TIMEOUT_EXPIRED)
            continue;
        if (rc != DAT_SUCCESS) {
            FAILF("server waiter: dat_evd_wait 0x%08x", (unsigned)rc);
            return NULL;
        }
        DAT_DTO_COMPLETION_EVENT_DATA d = ev.event_data.dto_completion_event_data;
        uint64_t c = d.user_cookie.as_64;
        int e = (int)(c >> 8), i = (int)(c & 0xFF);
        if (ev.event_number != DAT_DTO_COMPLETION_EVENT || d.status != DAT_DTO_SUCCESS || e >= NEP || i >= NRECV) {
            FAILF("server waiter: event 0x%x status %d cookie 0x%llx", ev.event_number, (int)d.status,
                  (unsigned long long)c);
            return NULL;
        }
        const uint8_t *m = S.buf + SV_RCV + ((size_t)e * NRECV + (size_t)i) * SZ;
        uint32_t h[4];
        memcpy(h, m, HDR);
        if (h[0] != 0x4D54u || h[1] >= NPOST || h[2] >= (uint32_t)g_rounds || h[3] >= OPS) {
            FAILF("a Send with a bad header (%u bytes)", (unsigned)d.transfered_length);
        } else {
            uint32_t seed = seed_of((int)h[1], (int)h[2], (int)h[3]);
            uint32_t len = len_of(seed);
            if (d.transfered_length != len || !pat_ok(m, seed, HDR, len))
                FAILF("Send t%u r%u k%u: %u bytes, want %u, or wrong bytes", h[1], h[2], h[3],
                      (unsigned)d.transfered_length, len);
            if (atomic_exchange(&g_seen[h[1]][h[2]][h[3]], 1))
                FAILF("Send t%u r%u k%u received twice", h[1], h[2], h[3]);
            if (d.ep_handle != S.ep[(h[1] + h[3]) % NEP])
                FAILF("Send t%u r%u k%u arrived on the wrong EP", h[1], h[2], h[3]);
        }
        atomic_fetch_add(&g_received, 1);
        post_recv(d.ep_handle, e, i);
    }
    return NULL;
}

static void disconnect_all(void)
{
    for (int e = 0; e < NEP; e++)
        PEER_MUST(dat_ep_disconnect(C.ep[e], DAT_CLOSE_GRACEFUL_FLAG));
    for (int e = 0; e < NEP; e++) {
        peer_wait_for(C.conn, DAT_CONNECTION_EVENT_DISCONNECTED, "DISCONNECTED (client)");
        peer_wait_for(S.conn, DAT_CONNECTION_EVENT_DISCONNECTED, "DISCONNECTED (server)");
    }
    /* The server's receives come back FLUSHED. */
    for (int i = 0; i < NEP * NRECV; i++) {
        DAT_EVENT ev = peer_wait(S.rcv, "a flushed receive");
        if (ev.event_data.dto_completion_event_data.status != DAT_DTO_ERR_FLUSHED)
            FAILF("a receive completed with %d at disconnect, want FLUSHED",
                  (int)ev.event_data.dto_completion_event_data.status);
    }
}

static int cycle(const char *ia, unsigned port, int cyc)
{
    memset(g_seen, 0, sizeof g_seen);
    for (int k = 0; k < NKIND; k++) {
        atomic_store(&g_posted[k], 0);
        atomic_store(&g_done[k], 0);
        atomic_store(&g_bytes[k], 0);
    }
    atomic_store(&g_received, 0);
    atomic_store(&g_stop, false);
    open_side(&S, ia, SV_LEN(g_rounds));
    open_side(&C, ia, CL_LEN);
    for (size_t i = 0; i < RD_AREA; i++)
        S.buf[SV_RD + i] = rd_byte(i);
    connect_all(port);
    double t0 = test_now_s();
    pthread_t cw, sw;
    if (pthread_create(&cw, NULL, client_waiter, NULL) || pthread_create(&sw, NULL, server_waiter, NULL))
        PEER_FAIL("pthread_create");
    for (int t = 0; t < NPOST; t++) {
        P[t].t = t;
        P[t].outstanding = 0;
        pthread_mutex_init(&P[t].mu, NULL);
        pthread_cond_init(&P[t].cv, NULL);
        if (pthread_create(&P[t].th, NULL, poster_main, &P[t]))
            PEER_FAIL("pthread_create");
    }
    for (int t = 0; t < NPOST; t++)
        pthread_join(P[t].th, NULL);
    uint64_t sends = atomic_load(&g_posted[K_SEND]);
    for (int i = 0; i < 1000 && atomic_load(&g_received) < sends && !atomic_load(&g_failed); i++) {
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    atomic_store(&g_stop, true);
    pthread_join(cw, NULL);
    pthread_join(sw, NULL);
    double secs = test_now_s() - t0;
    uint64_t want = (uint64_t)NPOST * (uint64_t)g_rounds * (OPS / NKIND);
    for (int k = 0; k < NKIND; k++) {
        uint64_t p = atomic_load(&g_posted[k]), d = atomic_load(&g_done[k]);
        if (p != want || d != want)
            FAILF("%s: %llu posted, %llu completed, want %llu", kind_name[k], (unsigned long long)p,
                  (unsigned long long)d, (unsigned long long)want);
    }
    if (atomic_load(&g_received) != want)
        FAILF("%llu Sends received, want %llu", (unsigned long long)atomic_load(&g_received),
              (unsigned long long)want);
    for (int t = 0; t < NPOST; t++)
        for (int r = 0; r < g_rounds; r++)
            for (int k = 0; k < OPS; k += NKIND)
                if (!atomic_load(&g_seen[t][r][k])) {
                    FAILF("Send t%d r%d k%d never arrived", t, r, k);
                    r = g_rounds;
                    t = NPOST;
                    break;
                }
    if (!atomic_load(&g_failed))
        disconnect_all();
    /* After DISCONNECTED the server placed everything that arrived. */
    for (int t = 0; t < NPOST; t++)
        for (int r = 0; r < g_rounds; r++)
            for (int k = K_WRITE; k < OPS; k += NKIND) {
                uint32_t seed = seed_of(t, r, k);
                if (!pat_ok(S.buf + wt_off(t, r, k), seed, 0, len_of(seed))) {
                    FAILF("Write t%d r%d k%d: the target does not hold its %u bytes", t, r, k, len_of(seed));
                    r = g_rounds;
                    t = NPOST;
                    break;
                }
            }
    for (int t = 0; t < NPOST; t++) {
        pthread_mutex_destroy(&P[t].mu);
        pthread_cond_destroy(&P[t].cv);
    }
    close_side(&C);
    close_side(&S);
    printf("mt cycle %d: %d threads x %d rounds x %d ops on %d shared EPs: %llu Sends, %llu Writes, %llu Reads "
           "(%.1f MiB) in %.2f s, every byte checked\n",
           cyc, NPOST, g_rounds, OPS, NEP, (unsigned long long)atomic_load(&g_done[K_SEND]),
           (unsigned long long)atomic_load(&g_done[K_WRITE]), (unsigned long long)atomic_load(&g_done[K_READ]),
           (double)(atomic_load(&g_bytes[0]) + atomic_load(&g_bytes[1]) + atomic_load(&g_bytes[2])) / 1048576.0,
           secs);
    return atomic_load(&g_failed);
}

int main(int argc, char **argv)
{
    peer_role = "mt";
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc < 3) {
        fprintf(stderr, "usage: %s IA PORT [ROUNDS [CYCLES]]\n", argv[0]);
        return 2;
    }
    unsigned port = (unsigned)atoi(argv[2]);
    g_rounds = argc > 3 ? atoi(argv[3]) : 20;
    int cycles = argc > 4 ? atoi(argv[4]) : 3;
    double seconds = argc > 5 ? atof(argv[5]) : 0;
    if (g_rounds < 1 || g_rounds > MAX_ROUNDS || cycles < 1 || cycles > 10000000 || seconds < 0) {
        fprintf(stderr, "ROUNDS 1-%d, CYCLES 1-10000000, SECONDS >= 0\n", MAX_ROUNDS);
        return 2;
    }
    double end = test_now_s() + seconds;
    int fds0 = peer_count_fds();
    long rss_base = 0;
    for (int c = 1; c <= cycles && !atomic_load(&g_failed) && (seconds == 0 || c <= 3 || test_now_s() < end); c++) {
        cycle(argv[1], port, c);
        int fds = peer_count_fds();
        long rss = peer_rss_kib();
        printf("mt cycle %d: fds %d (before dat_ia_open %d), rss %ld KiB\n", c, fds, fds0, rss);
        if (fds != fds0)
            FAILF("%d descriptors after closing the IAs, %d before opening them", fds, fds0);
        if (c <= 2)
            rss_base = rss;
        else if (!getenv("MT_NO_RSS_CHECK") && rss > rss_base + 4096)
            FAILF("resident memory grew from %ld KiB after cycle 2 to %ld KiB", rss_base, rss);
    }
    return atomic_load(&g_failed) ? 1 : 0;
}
