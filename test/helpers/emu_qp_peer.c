/* Two-process soft-RNIC data path check (driven by test/e2e/emu_qp.sh).
 *
 *   emu_qp_peer server        listen on 127.0.0.1, print "port N", serve one
 *                             connection: echo every Send back, expose a
 *                             1 MiB region (STag/address in the MPA Reply's
 *                             private data) for RDMA Write and Read
 *   emu_qp_peer client PORT   connect, echo Sends of several sizes (two
 *                             SGEs each), RDMA Write a pattern, Read it back,
 *                             compare, disconnect
 *
 * With CRC on, each side also checks which path its bytes took
 * (emu_qp_stats): Sends and Writes summed in place, Read Responses staged,
 * Send and Read Response payloads placed cut-through, Write payloads only
 * with SOFTDAT_CRC_PLACEMENT=cut-through.
 *
 * Exit 0 on success. Every wait is bounded. */
#include "emu/conn.h"
#include "emu/engine.h"
#include "emu/mem.h"
#include "emu/qp.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define REGION (1u << 20)
#define NMSG 64
#define WAIT_MS 20000

struct peer {
    struct emu_engine *e;
    struct emu_mem_table *mt;
    struct emu_pz *pz;
    struct emu_qp *qp;
    struct emu_conn *c;
    pthread_mutex_t m;
    pthread_cond_t cv;
    int ns, nr, nerr, established, terminal;
    uint32_t rlen[NMSG * 2];
    uint8_t pd[64];
    uint16_t pdlen;
};

static struct peer P;
static uint8_t *region;
static uint8_t rbuf[NMSG][REGION / 8];

static void lock(void) { pthread_mutex_lock(&P.m); }
static void unlock(void)
{
    pthread_cond_broadcast(&P.cv);
    pthread_mutex_unlock(&P.m);
}

static void send_done(void *ctx, const struct emu_cqe *c)
{
    (void)ctx;
    lock();
    P.ns++;
    if (c->status != EMU_WC_SUCCESS) {
        fprintf(stderr, "send wr %llu status %d\n", (unsigned long long)c->cookie, c->status);
        P.nerr++;
    }
    unlock();
}

static void recv_done(void *ctx, const struct emu_cqe *c)
{
    (void)ctx;
    lock();
    if (c->status == EMU_WC_SUCCESS && P.nr < NMSG * 2)
        P.rlen[P.nr] = c->byte_len;
    else if (c->status != EMU_WC_FLUSHED)
        P.nerr++;
    P.nr++;
    unlock();
}

static void fatal(void *ctx, const struct emu_qp_fatal *f)
{
    (void)ctx;
    char b[128];
    fprintf(stderr, "fatal: remote %d err %d %s\n", f->remote, f->err,
            f->have_term ? emu_term_describe(&f->term, b, sizeof b) : "");
}

static const struct emu_qp_ops qops = {send_done, recv_done, fatal};

static void on_event(struct emu_conn *c, const struct emu_conn_event *ev, void *ctx)
{
    (void)ctx;
    if (ev->type == EMU_CONN_ESTABLISHED) {
        int rc = emu_qp_attach(P.qp, c, 1);
        lock();
        if (ev->pdata_len <= sizeof P.pd) {
            memcpy(P.pd, ev->pdata, ev->pdata_len);
            P.pdlen = ev->pdata_len;
        }
        P.established = rc == 0 ? 1 : -1;
        unlock();
        return;
    }
    emu_qp_flush(P.qp);
    lock();
    P.terminal = ev->type;
    unlock();
}

static int on_rx(struct emu_conn *c, int fd, void *ctx) { return emu_qp_rx(P.qp, c, fd); }
static void on_tx(struct emu_conn *c, void *ctx) { emu_qp_tx(P.qp); }
static void on_detach(struct emu_conn *c, void *ctx) { emu_qp_detach(P.qp); }
static const struct emu_conn_ops cops = {on_event, on_rx, on_tx, on_detach};

static uint32_t g_stag;

static void on_request(struct emu_listener *l, const struct emu_conn_request *r, void *ctx)
{
    (void)l;
    (void)ctx;
    if (P.c) {
        emu_conn_reject(r->conn, NULL, 0);
        return;
    }
    P.c = r->conn;
    uint64_t addr = (uintptr_t)region;
    uint8_t pd[12];
    memcpy(pd, &g_stag, 4);
    memcpy(pd + 4, &addr, 8);
    struct emu_conn_params p = {.ird = 4, .ord = 4};
    if (emu_conn_accept(r->conn, &p, pd, sizeof pd, &cops, NULL) != 0)
        fprintf(stderr, "accept failed\n");
}

static const struct emu_listener_ops lops = {.request = on_request};

static bool wait_until(bool (*pred)(void))
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += WAIT_MS / 1000;
    lock();
    while (!pred())
        if (pthread_cond_timedwait(&P.cv, &P.m, &ts) != 0)
            break;
    bool ok = pred();
    pthread_mutex_unlock(&P.m);
    return ok;
}

static int g_target;
static bool p_est(void) { return P.established != 0; }
static bool p_term(void) { return P.terminal != 0; }
static bool p_nr(void) { return P.nr >= g_target || P.terminal; }
static bool p_ns(void) { return P.ns >= g_target || P.terminal; }

static void setup(void)
{
    pthread_mutex_init(&P.m, NULL);
    pthread_cond_init(&P.cv, NULL);
    region = calloc(1, REGION);
    if (emu_engine_create("qp-peer", &P.e) != 0)
        exit(2);
    struct emu_mem_limits lim = {.max_pzs = 2, .max_regions = 8, .max_windows = 2};
    emu_mem_table_create(&lim, &P.mt);
    emu_mem_pz_create(P.mt, &P.pz);
    struct emu_mr *mr;
    struct emu_mr_attr ma = {.addr = region, .length = REGION, .pz = P.pz,
                             .access = EMU_ACC_LOCAL_WRITE | EMU_ACC_LOCAL_READ |
                                       EMU_ACC_REMOTE_WRITE | EMU_ACC_REMOTE_READ,
                             .va_type = EMU_VA_ABS};
    emu_mem_mr_register(P.mt, &ma, &mr, &g_stag);
    struct emu_qp_attr a = {.mem = P.mt, .pz = P.pz, .max_send_wr = 256, .max_recv_wr = 256,
                            .max_sge = 2, .ird = 4, .ord = 4, .ops = &qops};
    if (emu_qp_create(&a, &P.qp) != 0)
        exit(2);
    for (int i = 0; i < NMSG; i++)
        emu_qp_post_recv(P.qp, (uint64_t)i, 1, &(struct emu_sge){rbuf[i], sizeof rbuf[i]});
}

static uint32_t msg_len(int i)
{
    static const uint32_t sizes[] = {0, 1, 64, 4096, 65536, 100000, REGION / 8};
    return sizes[i % 7];
}

static uint64_t echo_bytes(void)
{
    uint64_t n = 0;
    for (int i = 0; i < NMSG; i++)
        n += msg_len(i);
    return n;
}

/* CRC on: the payload bytes each path handled are what this side sent
 * from its consumer's memory (in_place), copied for Read Responses
 * (staged) and placed before the CRC check (cut). 1 if they differ. */
static int check_crc_paths(const char *who, uint64_t in_place, uint64_t staged, uint64_t cut)
{
    const char *crc = getenv("SOFTDAT_CRC"); /* the script sets it for both peers */
    if (!crc || strcmp(crc, "on") != 0)
        return 0;
    struct emu_qp_stats st;
    emu_qp_get_stats(P.qp, &st);
    if (st.tx_crc_in_place == in_place && st.tx_crc_staged == staged &&
        st.rx_crc_cut_through == cut)
        return 0;
    fprintf(stderr,
            "%s: CRC paths in place %llu staged %llu cut-through %llu, expected %llu %llu %llu\n",
            who, (unsigned long long)st.tx_crc_in_place, (unsigned long long)st.tx_crc_staged,
            (unsigned long long)st.rx_crc_cut_through, (unsigned long long)in_place,
            (unsigned long long)staged, (unsigned long long)cut);
    return 1;
}

static bool cut_writes(void)
{
    const char *s = getenv("SOFTDAT_CRC_PLACEMENT");
    return s && strcmp(s, "cut-through") == 0;
}

static int server(void)
{
    struct sockaddr_in sin = {.sin_family = AF_INET};
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    struct emu_listener *l;
    if (emu_listener_create(P.e, (struct sockaddr *)&sin, sizeof sin, 0, &lops, NULL, &l) != 0)
        return 2;
    printf("port %u\n", emu_listener_port(l));
    fflush(stdout);
    if (!wait_until(p_est))
        return 3;
    /* echo each message back */
    for (int i = 0; i < NMSG; i++) {
        g_target = i + 1;
        if (!wait_until(p_nr) || P.terminal)
            break;
        struct emu_sge sg = {rbuf[i], P.rlen[i]};
        struct emu_wr wr = {.cookie = (uint64_t)i, .op = EMU_WR_SEND, .nsge = 1, .sge = &sg};
        if (emu_qp_post_send(P.qp, &wr) != 0)
            return 4;
    }
    if (!wait_until(p_term))
        return 5;
    /* Echoes sent in place, the 1 MiB Read answered from staging; the
     * client's echoes placed cut-through, its Write only if so asked. */
    if (check_crc_paths("server", echo_bytes(), REGION, echo_bytes() + (cut_writes() ? REGION : 0)))
        return 7;
    emu_listener_free(l);
    lock();
    int bad = P.nerr;
    pthread_mutex_unlock(&P.m);
    printf("server: %d messages echoed, terminal %s\n", NMSG,
           emu_conn_event_name((enum emu_conn_event_type)P.terminal));
    return bad ? 6 : 0;
}

static int client(int port)
{
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    struct emu_conn_params p = {.ird = 4, .ord = 4};
    if (emu_conn_connect(P.e, (struct sockaddr *)&sin, sizeof sin, NULL, 0, &p, NULL, 0, &cops,
                         NULL, &P.c) != 0)
        return 2;
    if (!wait_until(p_est) || P.established != 1 || P.pdlen < 12)
        return 3;
    uint32_t rstag;
    uint64_t raddr;
    memcpy(&rstag, P.pd, 4);
    memcpy(&raddr, P.pd + 4, 8);
    static uint8_t src[REGION / 8];
    for (size_t i = 0; i < sizeof src; i++)
        src[i] = (uint8_t)(i * 7 + 3);
    for (int i = 0; i < NMSG; i++) {
        uint32_t len = msg_len(i), half = len / 2;
        struct emu_sge sg[2] = {{src, half}, {src + half, len - half}};
        struct emu_wr wr = {.cookie = (uint64_t)i, .op = EMU_WR_SEND, .nsge = half ? 2 : 1,
                            .sge = half ? sg : sg + 1};
        if (emu_qp_post_send(P.qp, &wr) != 0)
            return 4;
        g_target = i + 1;
        if (!wait_until(p_nr) || P.terminal)
            return 5;
        if (P.rlen[i] != msg_len(i) || memcmp(rbuf[i], src, msg_len(i)) != 0) {
            fprintf(stderr, "echo %d: bad bytes (len %u)\n", i, P.rlen[i]);
            return 6;
        }
    }
    /* RDMA Write the whole remote region, then Read it back. */
    uint8_t *w = malloc(REGION), *r = calloc(1, REGION);
    for (uint32_t i = 0; i < REGION; i++)
        w[i] = (uint8_t)(i * 13 + 1);
    struct emu_sge ws = {w, REGION}, rs = {r, REGION};
    struct emu_wr ww = {.cookie = 100, .op = EMU_WR_WRITE, .nsge = 1, .sge = &ws,
                        .remote_stag = rstag, .remote_to = raddr};
    struct emu_wr rr = {.cookie = 101, .op = EMU_WR_READ, .nsge = 1, .sge = &rs,
                        .remote_stag = rstag, .remote_to = raddr};
    int ns0 = P.ns;
    if (emu_qp_post_send(P.qp, &ww) != 0 || emu_qp_post_send(P.qp, &rr) != 0)
        return 7;
    g_target = ns0 + 2;
    if (!wait_until(p_ns) || P.terminal)
        return 8;
    if (memcmp(w, r, REGION) != 0) {
        fprintf(stderr, "read-back differs\n");
        return 9;
    }
    /* Sends and the Write summed in place; echoes and the Read placed
     * cut-through. */
    if (check_crc_paths("client", echo_bytes() + REGION, 0, echo_bytes() + REGION))
        return 12;
    emu_qp_disconnect(P.qp, true);
    if (!wait_until(p_term))
        return 10;
    printf("client: %d echoes, 1 MiB write+read ok, terminal %s, errors %d\n", NMSG,
           emu_conn_event_name((enum emu_conn_event_type)P.terminal), P.nerr);
    free(w);
    free(r);
    return P.nerr ? 11 : 0;
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return 2;
    setup();
    int rc;
    if (strcmp(argv[1], "server") == 0)
        rc = server();
    else if (strcmp(argv[1], "client") == 0 && argc > 2)
        rc = client(atoi(argv[2]));
    else
        rc = 2;
    if (P.c) {
        emu_qp_unlink(P.qp);
        emu_conn_free(P.c);
    }
    emu_engine_destroy(P.e);
    emu_qp_destroy(P.qp);
    if (rc)
        fprintf(stderr, "%s: failed (%d)\n", argv[1], rc);
    return rc;
}
