/* dat_scale_peer: one side of the scale test (test/e2e/scale.sh), public
 * DAT API only.
 *
 *   dat_scale_peer server IA PORT N [CYCLES]
 *   dat_scale_peer client IA HOST PORT N [CYCLES]
 *
 * The client connects N endpoints to the server (one shared set of EVDs on
 * each side, as a large program would have), and at 1, 100, 1,000 and
 * 10,000 connected endpoints (those <= N) measures a 64-byte Send
 * ping-pong (1,000 round trips, median one-way µs) on the newest endpoint,
 * and the process's resident memory and descriptors per endpoint. Then it
 * disconnects them all, frees everything, and checks that descriptors
 * return to their count before dat_ia_open. With CYCLES, it then runs that
 * many connect / 4 KiB Send / disconnect cycles on one EP and checks
 * descriptors and memory again.
 *
 * Prints "at N eps: lat_us=L rss_kib_per_ep=R fds=F" lines, "cycles C:
 * fds A/B rss_kib A/B", and "FAIL ..." (exit 1) on a failed check. */
#include <arpa/inet.h>
#include <dirent.h>
#include <netdb.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <dat2/udat.h>

#include "test/lib/clock.h"
#include "test/lib/peer.h"



enum { MSG = 64, BIG = 4096, SLOT = 4096, NREC = 2, PINGS = 1000 };
#define TMO (60u * 1000000u)


static double now_us(void)
{
    return test_now_s() * 1e6;
}

struct ctx {
    DAT_IA_HANDLE ia;
    DAT_PZ_HANDLE pz;
    DAT_EVD_HANDLE async, req, rcv, conn, cr;
    DAT_PSP_HANDLE psp;
    uint8_t *buf;
    size_t buflen;
    DAT_LMR_HANDLE lmr;
    DAT_LMR_CONTEXT lc;
    DAT_EP_HANDLE *ep;
    int n;
};

static DAT_LMR_TRIPLET tri(struct ctx *c, size_t off, DAT_SEG_LENGTH len)
{
    DAT_LMR_TRIPLET t = {.lmr_context = c->lc, .virtual_address = (DAT_VADDR)(uintptr_t)(c->buf + off),
                         .segment_length = len};
    return t;
}

static void open_ia(struct ctx *c, char *ia, int n, int nconn)
{
    memset(c, 0, sizeof *c);
    c->async = DAT_HANDLE_NULL;
    PEER_MUST(dat_ia_open(ia, 64, &c->async, &c->ia));
    PEER_MUST(dat_pz_create(c->ia, &c->pz));
    PEER_MUST(dat_evd_create(c->ia, 1024, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &c->req));
    PEER_MUST(dat_evd_create(c->ia, 1024, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &c->rcv));
    /* every EP's connection events may queue at once (an overflowed
     * connection EVD loses them, as the spec allows) */
    PEER_MUST(dat_evd_create(c->ia, nconn + 1024, DAT_HANDLE_NULL, DAT_EVD_CONNECTION_FLAG, &c->conn));
    PEER_MUST(dat_evd_create(c->ia, 1024, DAT_HANDLE_NULL, DAT_EVD_CR_FLAG, &c->cr));
    /* receive slots: NREC per EP on the server; the client uses slot 0 */
    c->buflen = (size_t)SLOT * NREC * (size_t)(n + 1); /* a multiple of 4096 (aligned_alloc) */
    c->buf = aligned_alloc(4096, c->buflen);
    if (c->buf == NULL)
        exit(1);
    memset(c->buf, 0, c->buflen);
    peer_register(c->ia, c->pz, c->buf, c->buflen, DAT_MEM_PRIV_ALL_FLAG, &c->lmr, &c->lc, NULL);
    c->ep = calloc((size_t)n + 1, sizeof *c->ep);
}

static void close_ia(struct ctx *c)
{
    if (c->psp)
        PEER_MUST(dat_psp_free(c->psp));
    PEER_MUST(dat_lmr_free(c->lmr));
    DAT_EVD_HANDLE evds[] = {c->req, c->rcv, c->conn, c->cr};
    for (size_t i = 0; i < 4; i++)
        PEER_MUST(dat_evd_free(evds[i]));
    PEER_MUST(dat_pz_free(c->pz));
    PEER_MUST(dat_ia_close(c->ia, DAT_CLOSE_GRACEFUL_FLAG));
    free(c->buf);
    free(c->ep);
}

static DAT_EP_HANDLE new_ep(struct ctx *c)
{
    DAT_EP_ATTR a = peer_rc_attr(BIG, NREC, 2, 1, 1);
    DAT_EP_HANDLE ep;
    PEER_MUST(dat_ep_create(c->ia, c->pz, c->rcv, c->req, c->conn, &a, &ep));
    return ep;
}

/* ---------------------------------------------------------------- server */

static void echo(struct ctx *c, const DAT_EVENT *ev)
{
    DAT_DTO_COMPLETION_EVENT_DATA d = ev->event_data.dto_completion_event_data;
    if (d.status != DAT_DTO_SUCCESS)
        return; /* flushed on disconnect */
    uint64_t slot = d.user_cookie.as_64;
    DAT_LMR_TRIPLET t = tri(c, slot * SLOT, d.transfered_length);
    PEER_MUST(dat_ep_post_send(d.ep_handle, 1, &t, peer_cookie(slot), DAT_COMPLETION_DEFAULT_FLAG));
    DAT_LMR_TRIPLET r = tri(c, slot * SLOT, SLOT);
    PEER_MUST(dat_ep_post_recv(d.ep_handle, 1, &r, peer_cookie(slot), DAT_COMPLETION_DEFAULT_FLAG));
}

/* Accepts `expect` connections in all (at most n live at once: slots are
 * reused by index modulo n + 1), echoes every message on its EP, frees
 * each EP when it disconnects, and ends when the last one has. */
static int server(char *ia, unsigned port, int n, int expect)
{
    struct ctx c;
    open_ia(&c, ia, n + 1, n);
    PEER_MUST(dat_psp_create(c.ia, port, c.cr, DAT_PSP_CONSUMER_FLAG, &c.psp));
    printf("listening\n");
    fflush(stdout);
    int live = 0, accepted = 0, ended = 0;
    while (ended < expect) {
        DAT_EVENT ev;
        DAT_COUNT k;
        bool busy = false;
        while (dat_evd_dequeue(c.cr, &ev) == DAT_SUCCESS) {
            busy = true;
            int i = accepted++ % (n + 1);
            if (c.ep[i] != NULL) {
                printf("FAIL server: more than %d live connections\n", n);
                return 1;
            }
            c.ep[i] = new_ep(&c);
            for (int r = 0; r < NREC; r++) {
                DAT_LMR_TRIPLET t = tri(&c, ((size_t)i * NREC + r) * SLOT, SLOT);
                PEER_MUST(dat_ep_post_recv(c.ep[i], 1, &t, peer_cookie((uint64_t)i * NREC + r), DAT_COMPLETION_DEFAULT_FLAG));
            }
            PEER_MUST(dat_cr_accept(ev.event_data.cr_arrival_event_data.cr_handle, c.ep[i], 0, NULL));
        }
        while (dat_evd_dequeue(c.conn, &ev) == DAT_SUCCESS) {
            busy = true;
            DAT_EP_HANDLE ep = ev.event_data.connect_event_data.ep_handle;
            if (ev.event_number == DAT_CONNECTION_EVENT_ESTABLISHED) {
                live++;
                continue;
            }
            live--;
            ended++;
            for (int i = 0; i <= n; i++)
                if (c.ep[i] == ep) {
                    PEER_MUST(dat_ep_free(ep));
                    c.ep[i] = NULL;
                    break;
                }
        }
        while (dat_evd_dequeue(c.rcv, &ev) == DAT_SUCCESS) {
            busy = true;
            echo(&c, &ev);
        }
        while (dat_evd_dequeue(c.req, &ev) == DAT_SUCCESS)
            busy = true;
        if (!busy && dat_evd_wait(c.rcv, 1000, 1, &ev, &k) == DAT_SUCCESS)
            echo(&c, &ev);
    }
    printf("served %d connections, %d live\n", accepted, live);
    close_ia(&c);
    return 0;
}

/* ---------------------------------------------------------------- client */

static struct sockaddr_in g_peer;

static void connect_ep(struct ctx *c, DAT_EP_HANDLE ep, unsigned port)
{
    PEER_MUST(dat_ep_connect(ep, (DAT_IA_ADDRESS_PTR)&g_peer, port, TMO, 0, NULL, DAT_QOS_BEST_EFFORT,
                        DAT_CONNECT_DEFAULT_FLAG));
}

static double pingpong(struct ctx *c, DAT_EP_HANDLE ep, size_t len, int iters)
{
    static double lat[PINGS];
    for (int i = 0; i < iters; i++) {
        DAT_LMR_TRIPLET r = tri(c, 0, SLOT);
        PEER_MUST(dat_ep_post_recv(ep, 1, &r, peer_cookie(1), DAT_COMPLETION_DEFAULT_FLAG));
        double t0 = now_us();
        DAT_LMR_TRIPLET t = tri(c, SLOT, len);
        PEER_MUST(dat_ep_post_send(ep, 1, &t, peer_cookie(2), DAT_COMPLETION_DEFAULT_FLAG));
        DAT_DTO_COMPLETION_EVENT_DATA d = peer_wait_ok(c->rcv, "the echo");
        if (d.transfered_length != len)
            printf("FAIL client: echo of %zu bytes came back %u\n", len, (unsigned)d.transfered_length);
        peer_wait_ok(c->req, "the ping's Send");
        if (i < PINGS)
            lat[i] = (now_us() - t0) / 2;
    }
    int n = iters < PINGS ? iters : PINGS;
    /* median */
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && lat[j - 1] > lat[j]; j--) {
            double x = lat[j];
            lat[j] = lat[j - 1];
            lat[j - 1] = x;
        }
    return lat[n / 2];
}

static int client(char *ia, const char *host, unsigned port, int n, int cycles)
{
    memset(&g_peer, 0, sizeof g_peer);
    g_peer.sin_family = AF_INET;
    if (inet_pton(AF_INET, host, &g_peer.sin_addr) != 1) {
        printf("FAIL client: bad address %s\n", host);
        return 1;
    }
    int fds0 = peer_count_fds();
    long rss0 = peer_rss_kib();
    struct ctx c;
    open_ia(&c, ia, 1, n);
    free(c.ep);
    c.ep = calloc((size_t)n, sizeof *c.ep);
    int fds_open = peer_count_fds();
    long rss_open = peer_rss_kib();
    static const int marks[] = {1, 100, 1000, 10000};
    int next_mark = 0, rc = 0;
    double t_start = now_us();
    /* Connect in windows of 64: requests out, then their events. */
    for (int i = 0; i < n;) {
        int w = n - i < 64 ? n - i : 64;
        for (int k = 0; k < w; k++) {
            c.ep[i + k] = new_ep(&c);
            connect_ep(&c, c.ep[i + k], port);
        }
        for (int k = 0; k < w; k++) {
            DAT_EVENT ev = peer_wait(c.conn, "ESTABLISHED");
            if (ev.event_number != DAT_CONNECTION_EVENT_ESTABLISHED) {
                printf("FAIL client: connection %d: event 0x%x\n", i + k, ev.event_number);
                return 1;
            }
        }
        i += w;
        while (next_mark < 4 && marks[next_mark] <= i) {
            int at = marks[next_mark++];
            if (at > n)
                break;
            usleep(200000); /* let the server finish its accepts */
            (void)pingpong(&c, c.ep[at - 1], MSG, 100); /* warm-up */
            double lat = pingpong(&c, c.ep[at - 1], MSG, PINGS);
            long rss = peer_rss_kib();
            printf("at %d eps: lat_us=%.2f rss_kib_per_ep=%.1f fds=%d connect_s=%.1f\n", at, lat,
                   (double)(rss - rss_open) / at, peer_count_fds() - fds_open, (now_us() - t_start) / 1e6);
            fflush(stdout);
        }
    }
    if (next_mark < 4 && marks[next_mark] > n) {
        double lat = pingpong(&c, c.ep[n - 1], MSG, PINGS);
        printf("at %d eps: lat_us=%.2f rss_kib_per_ep=%.1f fds=%d\n", n, lat,
               (double)(peer_rss_kib() - rss_open) / n, peer_count_fds() - fds_open);
    }
    for (int i = 0; i < n; i++)
        PEER_MUST(dat_ep_disconnect(c.ep[i], DAT_CLOSE_ABRUPT_FLAG));
    for (int i = 0; i < n; i++) {
        DAT_EVENT ev = peer_wait(c.conn, "DISCONNECTED");
        if (ev.event_number != DAT_CONNECTION_EVENT_DISCONNECTED) {
            printf("FAIL client: disconnect: event 0x%x\n", ev.event_number);
            rc = 1;
        }
    }
    for (int i = 0; i < n; i++)
        PEER_MUST(dat_ep_free(c.ep[i]));
    /* An abrupt disconnect closes its socket once the peer's FIN is in (or
     * after a linger): give the engine a moment, bounded. */
    int fds_after = peer_count_fds();
    for (int k = 0; k < 100 && fds_after != fds_open; k++) {
        usleep(50000);
        fds_after = peer_count_fds();
    }
    if (fds_after != fds_open) {
        printf("FAIL client: %d descriptors after freeing %d EPs, %d before\n", fds_after, n, fds_open);
        rc = 1;
    }
    /* connect / transfer / disconnect cycles on one EP at a time */
    if (cycles > 0) {
        long rss_c0 = 0;
        int fds_c0 = 0;
        for (int k = 0; k < cycles; k++) {
            DAT_EP_HANDLE ep = new_ep(&c);
            connect_ep(&c, ep, port);
            DAT_EVENT ev = peer_wait(c.conn, "ESTABLISHED");
            if (ev.event_number != DAT_CONNECTION_EVENT_ESTABLISHED) {
                printf("FAIL client: cycle %d: event 0x%x\n", k, ev.event_number);
                return 1;
            }
            memset(c.buf + SLOT, (int)(k & 0xFF), BIG);
            (void)pingpong(&c, ep, BIG, 1);
            for (int b = 0; b < BIG; b++)
                if (c.buf[b] != (uint8_t)(k & 0xFF)) {
                    printf("FAIL client: cycle %d: echo byte %d\n", k, b);
                    return 1;
                }
            PEER_MUST(dat_ep_disconnect(ep, DAT_CLOSE_GRACEFUL_FLAG));
            ev = peer_wait(c.conn, "DISCONNECTED");
            PEER_MUST(dat_ep_free(ep));
            if (k == 9) { /* after warm-up: allocator arenas settled */
                rss_c0 = peer_rss_kib();
                fds_c0 = peer_count_fds();
            }
        }
        long rss_c1 = peer_rss_kib();
        int fds_c1 = peer_count_fds();
        for (int k = 0; k < 100 && fds_c1 != fds_c0; k++) {
            usleep(50000);
            fds_c1 = peer_count_fds();
        }
        printf("cycles %d: fds %d/%d rss_kib %ld/%ld\n", cycles, fds_c0, fds_c1, rss_c0, rss_c1);
        if (fds_c1 != fds_c0) {
            printf("FAIL client: descriptors %d after %d cycles, %d after 10\n", fds_c1, cycles, fds_c0);
            rc = 1;
        }
        if (rss_c1 > rss_c0 + 4096 && getenv("SCALE_NO_RSS_CHECK") == NULL) {
            printf("FAIL client: memory grew %ld KiB over %d cycles\n", rss_c1 - rss_c0, cycles - 10);
            rc = 1;
        }
    }
    close_ia(&c);
    int fds1 = peer_count_fds();
    printf("fds=%d/%d rss_kib=%ld/%ld\n", fds0, fds1, rss0, peer_rss_kib());
    if (fds1 != fds0) {
        printf("FAIL client: %d descriptors after dat_ia_close, %d before dat_ia_open\n", fds1, fds0);
        rc = 1;
    }
    return rc;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc < 5) {
        fprintf(stderr, "usage: dat_scale_peer server IA PORT N [CYCLES] | client IA HOST PORT N [CYCLES]\n");
        return 2;
    }
    /* two descriptors per connection at most (socket, a duplicate for SSP
     * is not used here), plus slack */
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < 65536) {
        rl.rlim_cur = rl.rlim_max < 65536 ? rl.rlim_max : 65536;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    peer_role = argv[1];
    if (strcmp(argv[1], "server") == 0)
        return server(argv[2], (unsigned)atoi(argv[3]), atoi(argv[4]), atoi(argv[4]) + (argc > 5 ? atoi(argv[5]) : 0));
    return client(argv[2], argv[3], (unsigned)atoi(argv[4]), atoi(argv[5]), argc > 6 ? atoi(argv[6]) : 0);
}
