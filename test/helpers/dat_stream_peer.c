/* dat_stream_peer: one side of the network-fault end-to-end test
 * (test/e2e/netfault.sh), public DAT API only.
 *
 *   dat_stream_peer server IA PORT MODE
 *   dat_stream_peer client IA HOST PORT MODE [SECONDS]
 *
 * MODE verify: ROUNDS rounds; in each the client RDMA-Writes 256 KiB of a
 *   round-specific pattern into the server's target, then Sends a message
 *   of a round-specific length (up to 60 KiB, patterned) that names the
 *   round; the server checks every byte of both, RDMA-Reads 128 KiB of
 *   the client's read area (patterned per round) and checks it, then Sends
 *   its verdict. Any wrong byte, error status or lost message fails. Run
 *   over netem delay, loss, reordering and duplication: the data arrives
 *   intact, in order, exactly once.
 * MODE stream: the client keeps 16 RDMA Writes of 64 KiB and a Send in
 *   flight for SECONDS (or until the connection fails); the server reposts
 *   its receives. When the link is cut or the peer killed, each side checks
 *   that every DTO it posted completes (FLUSHED or an error), that one
 *   connection event (BROKEN or DISCONNECTED) arrives, and how long that
 *   took from the first failure; after freeing everything and closing the
 *   IA, the process holds as many descriptors as before dat_ia_open.
 *   Prints "result posted=P completed=C errors=E event=0xN drain_ms=D
 *   fds=F0/F1" (drain_ms: first failed completion or connection event ->
 *   last completion and the connection event).
 * Prints "FAIL ..." and exits 1 on a failed check, 0 otherwise. */
#include <arpa/inet.h>
#include <dirent.h>
#include <netdb.h>
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
    ROUNDS = 24,
    WR_LEN = 256 * 1024,
    RD_LEN = 128 * 1024,
    MSG_MAX = 60 * 1024,
    NRECV = 8,
    SLOT = MSG_MAX + 64,
    ST_WRITE = 64 * 1024,
    ST_WINDOW = 16,
    AREA = 1024 * 1024,
};
#define TMO (30u * 1000000u) /* one wait, under netem loss */

struct peer {
    DAT_IA_HANDLE ia;
    DAT_PZ_HANDLE pz;
    DAT_EVD_HANDLE async, req, rcv, conn, cr;
    DAT_EP_HANDLE ep;
    DAT_PSP_HANDLE psp;
    uint8_t *slots, *area; /* receive slots; RDMA area (target, read area, send source) */
    DAT_LMR_HANDLE lmr_slots, lmr_area;
    DAT_LMR_CONTEXT lc_slots, lc_area;
    DAT_RMR_CONTEXT rc_area;
    DAT_RMR_TRIPLET remote; /* the peer's area */
};

static double g_t0;

static uint8_t pat(uint32_t round, uint32_t kind, size_t i)
{
    return (uint8_t)((i * 131u) ^ (round * 7u) ^ (kind * 0x5Bu) ^ (i >> 9));
}

static void post_recv(struct peer *p, int slot)
{
    DAT_LMR_TRIPLET t = peer_triplet(p->lc_slots, p->slots + (size_t)slot * SLOT, SLOT);
    PEER_MUST(dat_ep_post_recv(p->ep, 1, &t, peer_cookie((uint64_t)slot), DAT_COMPLETION_DEFAULT_FLAG));
}

static void setup(struct peer *p, char *ia)
{
    memset(p, 0, sizeof *p);
    p->async = DAT_HANDLE_NULL;
    PEER_MUST(dat_ia_open(ia, 16, &p->async, &p->ia));
    PEER_MUST(dat_pz_create(p->ia, &p->pz));
    PEER_MUST(dat_evd_create(p->ia, 64, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &p->req));
    PEER_MUST(dat_evd_create(p->ia, 64, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &p->rcv));
    PEER_MUST(dat_evd_create(p->ia, 8, DAT_HANDLE_NULL, DAT_EVD_CONNECTION_FLAG, &p->conn));
    PEER_MUST(dat_evd_create(p->ia, 4, DAT_HANDLE_NULL, DAT_EVD_CR_FLAG, &p->cr));
    p->slots = aligned_alloc(4096, ((size_t)SLOT * NRECV + 4095) & ~(size_t)4095); /* C11: a multiple */
    p->area = aligned_alloc(4096, AREA);
    if (!p->slots || !p->area)
        exit(1);
    memset(p->slots, 0, (size_t)SLOT * NRECV);
    memset(p->area, 0, AREA);
    peer_register(p->ia, p->pz, p->slots, (DAT_VLEN)SLOT * NRECV, DAT_MEM_PRIV_ALL_FLAG, &p->lmr_slots, &p->lc_slots,
                  NULL);
    peer_register(p->ia, p->pz, p->area, AREA, DAT_MEM_PRIV_ALL_FLAG, &p->lmr_area, &p->lc_area, &p->rc_area);
    DAT_EP_ATTR a = peer_rc_attr(AREA, NRECV, ST_WINDOW + 8, 1, 4);
    PEER_MUST(dat_ep_create(p->ia, p->pz, p->rcv, p->req, p->conn, &a, &p->ep));
    for (int i = 0; i < NRECV; i++)
        post_recv(p, i);
}

static void teardown(struct peer *p)
{
    PEER_MUST(dat_ep_free(p->ep));
    if (p->psp)
        PEER_MUST(dat_psp_free(p->psp));
    PEER_MUST(dat_lmr_free(p->lmr_slots));
    PEER_MUST(dat_lmr_free(p->lmr_area));
    DAT_EVD_HANDLE evds[] = {p->req, p->rcv, p->conn, p->cr};
    for (size_t i = 0; i < sizeof evds / sizeof evds[0]; i++)
        PEER_MUST(dat_evd_free(evds[i]));
    PEER_MUST(dat_pz_free(p->pz));
    PEER_MUST(dat_ia_close(p->ia, DAT_CLOSE_GRACEFUL_FLAG));
    free(p->slots);
    free(p->area);
}

static void connect_pair(struct peer *p, bool server, const char *host, unsigned port)
{
    if (server) {
        PEER_MUST(dat_psp_create(p->ia, port, p->cr, DAT_PSP_CONSUMER_FLAG, &p->psp));
        printf("listening\n");
        fflush(stdout);
        DAT_EVENT ev = peer_wait(p->cr, "a connection request");
        PEER_MUST(dat_cr_accept(ev.event_data.cr_arrival_event_data.cr_handle, p->ep, 0, NULL));
    } else {
        struct addrinfo *ai = NULL;
        struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM};
        if (getaddrinfo(host, NULL, &hints, &ai) != 0 || ai == NULL) {
            PEER_EXPECT(0, "cannot resolve %s", host);
            exit(1);
        }
        PEER_MUST(dat_ep_connect(p->ep, (DAT_IA_ADDRESS_PTR)ai->ai_addr, port, TMO, 0, NULL, DAT_QOS_BEST_EFFORT,
                            DAT_CONNECT_DEFAULT_FLAG));
        freeaddrinfo(ai);
    }
    DAT_EVENT ev = peer_wait(p->conn, "ESTABLISHED");
    if (ev.event_number != DAT_CONNECTION_EVENT_ESTABLISHED) {
        PEER_EXPECT(0, "connection event 0x%x", ev.event_number);
        exit(1);
    }
    /* Each side Sends its area's triplet. */
    uint8_t *out = p->area + AREA - 64;
    DAT_RMR_TRIPLET mine = {.rmr_context = p->rc_area, .virtual_address = (DAT_VADDR)(uintptr_t)p->area,
                            .segment_length = AREA};
    memcpy(out, &mine, sizeof mine);
    DAT_LMR_TRIPLET t = peer_triplet(p->lc_area, out, sizeof mine);
    PEER_MUST(dat_ep_post_send(p->ep, 1, &t, peer_cookie(900), DAT_COMPLETION_DEFAULT_FLAG));
    DAT_DTO_COMPLETION_EVENT_DATA d = peer_wait_ok(p->rcv, "the peer's triplet");
    memcpy(&p->remote, p->slots + d.user_cookie.as_64 * SLOT, sizeof p->remote);
    post_recv(p, (int)d.user_cookie.as_64);
    peer_wait_ok(p->req, "our triplet's Send");
}

/* ---------------------------------------------------------------- verify */

struct round_msg {
    uint32_t round, len, verdict;
};

static int verify_client(struct peer *p)
{
    for (uint32_t r = 0; r < ROUNDS; r++) {
        uint32_t len = 1 + (r * 7919u) % (MSG_MAX - 16);
        for (size_t i = 0; i < WR_LEN; i++)
            p->area[i] = pat(r, 1, i);
        for (size_t i = 0; i < RD_LEN; i++)
            p->area[WR_LEN + i] = pat(r, 2, i);
        uint8_t *m = p->area + WR_LEN + RD_LEN;
        struct round_msg h = {r, len, 0};
        memcpy(m, &h, sizeof h);
        for (size_t i = sizeof h; i < len + sizeof h; i++)
            m[i] = pat(r, 3, i);
        DAT_LMR_TRIPLET wt = peer_triplet(p->lc_area, p->area, WR_LEN);
        DAT_RMR_TRIPLET rt = {.rmr_context = p->remote.rmr_context,
                              .virtual_address = p->remote.virtual_address,
                              .segment_length = WR_LEN};
        PEER_MUST(dat_ep_post_rdma_write(p->ep, 1, &wt, peer_cookie(1), &rt, DAT_COMPLETION_DEFAULT_FLAG));
        DAT_LMR_TRIPLET st = peer_triplet(p->lc_area, m, (DAT_VLEN)(len + sizeof h));
        PEER_MUST(dat_ep_post_send(p->ep, 1, &st, peer_cookie(2), DAT_COMPLETION_DEFAULT_FLAG));
        peer_wait_ok(p->req, "the round's RDMA Write");
        peer_wait_ok(p->req, "the round's Send");
        DAT_DTO_COMPLETION_EVENT_DATA d = peer_wait_ok(p->rcv, "the server's verdict");
        struct round_msg v;
        memcpy(&v, p->slots + d.user_cookie.as_64 * SLOT, sizeof v);
        post_recv(p, (int)d.user_cookie.as_64);
        if (v.round != r || v.verdict != 1) {
            PEER_EXPECT(0, "round %u: verdict for round %u = %u", r, v.round, v.verdict);
            return 1;
        }
    }
    printf("verified %d rounds: %d KiB written, %d KiB read, sends of up to %d bytes\n", ROUNDS,
           ROUNDS * WR_LEN / 1024, ROUNDS * RD_LEN / 1024, MSG_MAX);
    return 0;
}

static int verify_server(struct peer *p)
{
    uint8_t *sink = p->area + WR_LEN + RD_LEN + SLOT;
    for (uint32_t r = 0; r < ROUNDS; r++) {
        DAT_DTO_COMPLETION_EVENT_DATA d = peer_wait_ok(p->rcv, "the round's Send");
        uint8_t *m = p->slots + d.user_cookie.as_64 * SLOT;
        struct round_msg h;
        memcpy(&h, m, sizeof h);
        uint32_t ok = 1;
        if (h.round != r || d.transfered_length != h.len + sizeof h) {
            PEER_EXPECT(0, "round %u: message of round %u, %u bytes (want %zu)", r, h.round,
                 (unsigned)d.transfered_length, h.len + sizeof h);
            ok = 0;
        }
        for (size_t i = sizeof h; ok && i < h.len + sizeof h; i++)
            if (m[i] != pat(r, 3, i)) {
                PEER_EXPECT(0, "round %u: Send byte %zu", r, i);
                ok = 0;
            }
        for (size_t i = 0; ok && i < WR_LEN; i++)
            if (p->area[i] != pat(r, 1, i)) {
                PEER_EXPECT(0, "round %u: RDMA Write byte %zu", r, i);
                ok = 0;
            }
        post_recv(p, (int)d.user_cookie.as_64);
        memset(sink, 0, RD_LEN);
        DAT_LMR_TRIPLET lt = peer_triplet(p->lc_area, sink, RD_LEN);
        DAT_RMR_TRIPLET rt = {.rmr_context = p->remote.rmr_context,
                              .virtual_address = p->remote.virtual_address + WR_LEN,
                              .segment_length = RD_LEN};
        PEER_MUST(dat_ep_post_rdma_read(p->ep, 1, &lt, peer_cookie(3), &rt, DAT_COMPLETION_DEFAULT_FLAG));
        peer_wait_ok(p->req, "the round's RDMA Read");
        for (size_t i = 0; ok && i < RD_LEN; i++)
            if (sink[i] != pat(r, 2, i)) {
                PEER_EXPECT(0, "round %u: RDMA Read byte %zu", r, i);
                ok = 0;
            }
        uint8_t *out = p->area + WR_LEN + RD_LEN;
        struct round_msg v = {r, 0, ok};
        memcpy(out, &v, sizeof v);
        DAT_LMR_TRIPLET st = peer_triplet(p->lc_area, out, sizeof v);
        PEER_MUST(dat_ep_post_send(p->ep, 1, &st, peer_cookie(4), DAT_COMPLETION_DEFAULT_FLAG));
        peer_wait_ok(p->req, "the verdict's Send");
        if (!ok)
            return 1;
    }
    return 0;
}

/* ---------------------------------------------------------------- stream */

struct tally {
    long posted, completed, errors;
    double first_fail, last;
    DAT_EVENT_NUMBER event;
};

static void note_fail(struct tally *t)
{
    if (t->first_fail == 0)
        t->first_fail = test_now_s();
}

/* Reap what is there (wait up to us for the first). */
static void reap(struct peer *p, DAT_EVD_HANDLE evd, struct tally *t, DAT_TIMEOUT us, bool repost)
{
    DAT_EVENT ev;
    DAT_COUNT n;
    if (dat_evd_wait(evd, us, 1, &ev, &n) != DAT_SUCCESS)
        return;
    for (;;) {
        DAT_DTO_COMPLETION_EVENT_DATA d = ev.event_data.dto_completion_event_data;
        t->completed++;
        t->last = test_now_s();
        if (d.status != DAT_DTO_SUCCESS) {
            t->errors++;
            note_fail(t);
        } else if (repost) {
            post_recv(p, (int)d.user_cookie.as_64);
            t->posted++;
        }
        if (dat_evd_dequeue(evd, &ev) != DAT_SUCCESS)
            return;
    }
}

static void conn_event(struct peer *p, struct tally *t, DAT_TIMEOUT us)
{
    DAT_EVENT ev;
    DAT_COUNT n;
    if (t->event == 0 && dat_evd_wait(p->conn, us, 1, &ev, &n) == DAT_SUCCESS) {
        t->event = ev.event_number;
        note_fail(t);
        t->last = test_now_s();
    }
}

static int stream(struct peer *p, bool client, double seconds)
{
    struct tally t = {.posted = client ? 0 : NRECV};
    double end = test_now_s() + seconds;
    long outstanding = 0;
    while (t.event == 0 && t.errors == 0 && test_now_s() < end) {
        if (client) {
            while (outstanding < ST_WINDOW) {
                size_t off = (size_t)(t.posted % 8) * ST_WRITE;
                DAT_LMR_TRIPLET wt = peer_triplet(p->lc_area, p->area + off, ST_WRITE);
                DAT_RMR_TRIPLET rt = {.rmr_context = p->remote.rmr_context,
                                      .virtual_address = p->remote.virtual_address + off,
                                      .segment_length = ST_WRITE};
                if (dat_ep_post_rdma_write(p->ep, 1, &wt, peer_cookie(1), &rt, DAT_COMPLETION_DEFAULT_FLAG) != DAT_SUCCESS)
                    break;
                t.posted++;
                outstanding++;
            }
            long before = t.completed;
            reap(p, p->req, &t, 100000, false);
            outstanding -= t.completed - before;
        } else {
            reap(p, p->rcv, &t, 100000, true);
        }
        conn_event(p, &t, 0);
    }
    if (t.event == 0 && t.errors == 0) {
        printf("no failure within %.0f s\n", seconds);
        return 1;
    }
    /* The connection failed: everything posted must complete, and the
     * connection event arrive. Bounded by the IA's own detection (the
     * test sets SOFTDAT_PEER_TIMEOUT_MS) plus slack. */
    double deadline = test_now_s() + 20;
    while ((t.completed < t.posted || t.event == 0) && test_now_s() < deadline) {
        reap(p, client ? p->req : p->rcv, &t, 50000, false);
        conn_event(p, &t, 0);
    }
    outstanding = t.posted - t.completed;
    int rc = 0;
    if (t.event != DAT_CONNECTION_EVENT_BROKEN && t.event != DAT_CONNECTION_EVENT_DISCONNECTED) {
        PEER_EXPECT(0, "connection event 0x%x", t.event);
        rc = 1;
    }
    if (outstanding != 0) {
        PEER_EXPECT(0, "%ld posted DTOs never completed (posted %ld, completed %ld)", outstanding, t.posted, t.completed);
        rc = 1;
    }
    printf("result posted=%ld completed=%ld errors=%ld event=0x%x drain_ms=%.0f failed_at=%.1fs\n", t.posted,
           t.completed, t.errors, t.event, (t.last - t.first_fail) * 1000.0, t.first_fail - g_t0);
    return rc;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc < 5) {
        fprintf(stderr, "usage: dat_stream_peer server IA PORT MODE | client IA HOST PORT MODE [SECONDS]\n");
        return 2;
    }
    bool server = strcmp(argv[1], "server") == 0;
    peer_role = argv[1];
    char *ia = argv[2];
    const char *host = server ? NULL : argv[3];
    unsigned port = (unsigned)atoi(server ? argv[3] : argv[4]);
    const char *mode = server ? argv[4] : (argc > 5 ? argv[5] : "verify");
    double seconds = (!server && argc > 6) ? atof(argv[6]) : 30;
    g_t0 = test_now_s();
    int fds0 = peer_count_fds();
    struct peer p;
    setup(&p, ia);
    connect_pair(&p, server, host, port);
    int rc;
    if (strcmp(mode, "verify") == 0) {
        rc = server ? verify_server(&p) : verify_client(&p);
        if (!server)
            PEER_MUST(dat_ep_disconnect(p.ep, DAT_CLOSE_GRACEFUL_FLAG));
        DAT_EVENT ev = peer_wait(p.conn, "DISCONNECTED");
        if (ev.event_number != DAT_CONNECTION_EVENT_DISCONNECTED)
            PEER_EXPECT(0, "end of connection: event 0x%x", ev.event_number);
    } else if (strcmp(mode, "stream") == 0) {
        printf("streaming\n");
        rc = stream(&p, !server, seconds);
    } else {
        fprintf(stderr, "unknown mode %s\n", mode);
        return 2;
    }
    teardown(&p);
    int fds1 = peer_count_fds();
    printf("fds=%d/%d\n", fds0, fds1);
    printf("done at=%.1fs\n", test_now_s() - g_t0);
    if (fds1 != fds0)
        PEER_EXPECT(0, "descriptors: %d before dat_ia_open, %d after dat_ia_close", fds0, fds1);
    return rc != 0 || peer_failures != 0 ? 1 : 0;
}
