/* Two-process driver for emu/conn (test/e2e/emu_conn.sh).
 *
 *   emu_conn_peer server [--addr A] [--port P] [--count N] [--timeout S]
 *       prints "LISTEN <port>", then per request "REQUEST <pdata>";
 *       pdata starting with "reject" is rejected with "no:<pdata>",
 *       anything else accepted with "srv:<pdata>". On each accepted
 *       connection it answers a received "ping" with "pong" and prints
 *       "ESTABLISHED", "RX <bytes>" and the terminal event. Exits 0 after N
 *       requests have finished.
 *   emu_conn_peer client --port P [--addr A] [--pdata S] [--abrupt] [--timeout S]
 *       prints the outcome ("ESTABLISHED <pdata>" / "PEER_REJECTED <pdata>" /
 *       other event name); when established sends "ping", prints "RX pong",
 *       disconnects (graceful unless --abrupt) and prints the terminal event.
 * Every wait is bounded by --timeout (default 20 s); exit 2 on timeout. */
#include "emu/conn.h"
#include "emu/engine.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

struct msg {
    char text[600];
};

/* A small queue of lines produced on the engine thread, printed by main. */
static pthread_mutex_t g_m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv = PTHREAD_COND_INITIALIZER;
static struct msg g_q[64];
static int g_head, g_tail;
static int g_timeout_s = 20;

static void push(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void push(const char *fmt, ...)
{
    pthread_mutex_lock(&g_m);
    if (g_tail - g_head < 64) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(g_q[g_tail % 64].text, sizeof g_q[0].text, fmt, ap);
        va_end(ap);
        g_tail++;
    }
    pthread_cond_broadcast(&g_cv);
    pthread_mutex_unlock(&g_m);
}

/* Next line, or NULL after the timeout. */
static bool pop(struct msg *out)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += g_timeout_s;
    pthread_mutex_lock(&g_m);
    while (g_head == g_tail)
        if (pthread_cond_timedwait(&g_cv, &g_m, &ts) != 0)
            break;
    bool ok = g_head != g_tail;
    if (ok)
        *out = g_q[g_head++ % 64];
    pthread_mutex_unlock(&g_m);
    return ok;
}

static void pd_str(char *dst, size_t cap, const void *pd, uint16_t len)
{
    size_t n = len < cap - 1 ? len : cap - 1;
    memcpy(dst, pd, n);
    dst[n] = '\0';
}

static void on_event(struct emu_conn *c, const struct emu_conn_event *ev, void *ctx)
{
    (void)c;
    (void)ctx;
    char pd[EMU_CONN_PDATA_RX_MAX + 1];
    pd_str(pd, sizeof pd, ev->pdata, ev->pdata_len);
    if (ev->pdata_len)
        push("%s %s", emu_conn_event_name(ev->type), pd);
    else
        push("%s", emu_conn_event_name(ev->type));
}

static int on_rx(struct emu_conn *c, int fd, void *ctx)
{
    bool server = ctx != NULL;
    char buf[256];
    ssize_t n = recv(fd, buf, sizeof buf - 1, 0);
    if (n == 0)
        return EMU_RX_EOF;
    if (n < 0)
        return errno == EAGAIN ? EMU_RX_OK : -errno;
    buf[n] = '\0';
    push("RX %s", buf);
    if (server && strcmp(buf, "ping") == 0) {
        struct iovec v = {.iov_base = "pong", .iov_len = 4};
        emu_conn_writev(c, &v, 1);
    }
    return EMU_RX_OK;
}

static const struct emu_conn_ops srv_ops = {.event = on_event, .rx = on_rx};
static const struct emu_conn_ops cli_ops = {.event = on_event, .rx = on_rx};

static void on_request(struct emu_listener *l, const struct emu_conn_request *r, void *ctx)
{
    (void)l;
    (void)ctx;
    char pd[EMU_CONN_PDATA_RX_MAX + 1], reply[EMU_CONN_PDATA_MAX];
    pd_str(pd, sizeof pd, r->pdata, r->pdata_len);
    push("REQUEST %s", pd);
    if (strncmp(pd, "reject", 6) == 0) {
        int n = snprintf(reply, sizeof reply, "no:%s", pd);
        emu_conn_reject(r->conn, reply, (uint16_t)n);
        push("REJECTED");
    } else {
        int n = snprintf(reply, sizeof reply, "srv:%s", pd);
        /* ctx != NULL marks the server side in on_rx */
        emu_conn_accept(r->conn, NULL, reply, (uint16_t)n, &srv_ops, (void *)1);
    }
}

static const struct emu_listener_ops lops = {.request = on_request};

static int make_addr(const char *host, uint16_t port, struct sockaddr_storage *ss, socklen_t *len)
{
    memset(ss, 0, sizeof *ss);
    struct sockaddr_in *in = (struct sockaddr_in *)ss;
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;
    if (inet_pton(AF_INET, host, &in->sin_addr) == 1) {
        in->sin_family = AF_INET;
        in->sin_port = htons(port);
        *len = sizeof *in;
        return 0;
    }
    if (inet_pton(AF_INET6, host, &in6->sin6_addr) == 1) {
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons(port);
        *len = sizeof *in6;
        return 0;
    }
    return -1;
}

static bool terminal_line(const char *t)
{
    static const char *const names[] = {"PEER_REJECTED", "NON_PEER_REJECTED", "UNREACHABLE",
                                        "TIMED_OUT", "ACCEPT_ERROR", "DISCONNECTED", "BROKEN",
                                        "REJECTED"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        size_t n = strlen(names[i]);
        if (strncmp(t, names[i], n) == 0 && (t[n] == '\0' || t[n] == ' '))
            return true;
    }
    return false;
}

static int run_server(struct emu_engine *e, const char *host, uint16_t port, int count)
{
    struct sockaddr_storage ss;
    socklen_t len;
    if (make_addr(host, 0, &ss, &len) != 0) {
        fprintf(stderr, "bad address %s\n", host);
        return 1;
    }
    struct emu_listener *l = NULL;
    int rc = emu_listener_create(e, (struct sockaddr *)&ss, len, port, &lops, NULL, &l);
    if (rc != 0) {
        fprintf(stderr, "listen: %s\n", strerror(-rc));
        return 1;
    }
    printf("LISTEN %u\n", emu_listener_port(l));
    fflush(stdout);
    int done = 0;
    struct msg m;
    /* Bounded: each pop waits at most the timeout; count ends it. */
    while (done < count) {
        if (!pop(&m)) {
            fprintf(stderr, "server: timeout\n");
            return 2;
        }
        printf("%s\n", m.text);
        fflush(stdout);
        if (terminal_line(m.text))
            done++;
    }
    emu_listener_free(l);
    return 0;
}

static int run_client(struct emu_engine *e, const char *host, uint16_t port, const char *pdata,
                      bool abrupt)
{
    struct sockaddr_storage ss;
    socklen_t len;
    if (make_addr(host, port, &ss, &len) != 0) {
        fprintf(stderr, "bad address %s\n", host);
        return 1;
    }
    struct emu_conn_params p = {.ird = 4, .ord = 4, .timeout_us = (uint64_t)g_timeout_s * 1000000u};
    struct emu_conn *c = NULL;
    int rc = emu_conn_connect(e, (struct sockaddr *)&ss, len, NULL, 0, &p, pdata,
                              (uint16_t)strlen(pdata), &cli_ops, NULL, &c);
    if (rc != 0) {
        fprintf(stderr, "connect: %s\n", strerror(-rc));
        return 1;
    }
    struct msg m;
    int status = 0;
    for (int steps = 0; steps < 8; steps++) {
        if (!pop(&m)) {
            fprintf(stderr, "client: timeout\n");
            status = 2;
            break;
        }
        printf("%s\n", m.text);
        fflush(stdout);
        if (strncmp(m.text, "ESTABLISHED", 11) == 0) {
            struct iovec v = {.iov_base = "ping", .iov_len = 4};
            if (emu_conn_writev(c, &v, 1) != 4)
                fprintf(stderr, "client: short write\n");
        } else if (strcmp(m.text, "RX pong") == 0) {
            emu_conn_disconnect(c, !abrupt);
        } else if (terminal_line(m.text)) {
            break;
        }
    }
    emu_conn_free(c);
    return status;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s server|client [options]\n", argv[0]);
        return 1;
    }
    const char *host = "127.0.0.1", *pdata = "";
    int port = 0, count = 1;
    bool abrupt = false;
    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "--addr") == 0 && i + 1 < argc)
            host = argv[++i];
        else if (strcmp(argv[i], "--port") == 0 && i + 1 < argc)
            port = atoi(argv[++i]);
        else if (strcmp(argv[i], "--count") == 0 && i + 1 < argc)
            count = atoi(argv[++i]);
        else if (strcmp(argv[i], "--pdata") == 0 && i + 1 < argc)
            pdata = argv[++i];
        else if (strcmp(argv[i], "--timeout") == 0 && i + 1 < argc)
            g_timeout_s = atoi(argv[++i]);
        else if (strcmp(argv[i], "--abrupt") == 0)
            abrupt = true;
        else {
            fprintf(stderr, "unknown option %s\n", argv[i]);
            return 1;
        }
    }
    if (port < 0 || port > 65535 || strlen(pdata) > EMU_CONN_PDATA_MAX) {
        fprintf(stderr, "bad --port or --pdata\n");
        return 1;
    }
    struct emu_engine *e = NULL;
    if (emu_engine_create("peer", &e) != 0)
        return 1;
    int rc;
    if (strcmp(argv[1], "server") == 0)
        rc = run_server(e, host, (uint16_t)port, count);
    else if (strcmp(argv[1], "client") == 0 && port > 0)
        rc = run_client(e, host, (uint16_t)port, pdata, abrupt);
    else
        rc = 1;
    emu_engine_destroy(e);
    return rc;
}
