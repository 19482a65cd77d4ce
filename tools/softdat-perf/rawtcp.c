/* softdat-perf: the raw-TCP baseline. The same traffic patterns as the DAT
 * tests, over a plain TCP connection with TCP_NODELAY, so each softdat
 * figure can be printed beside what the kernel's TCP does on its own:
 *
 *   pingpong  client writes SIZE bytes, server answers SIZE bytes
 *             (baseline of send_lat and write_lat; one-way = RTT/2)
 *   reqresp   client writes a 16-byte request, server answers SIZE bytes
 *             (baseline of read_lat; full round trip, like a Read)
 *   stream    client writes SIZE-byte messages, one write() each, in bursts
 *             of WINDOW; the server acknowledges the last burst
 *             (baseline of send_bw and write_bw)
 *   pull      client keeps two requests for WINDOW messages outstanding,
 *             the server writes them (baseline of read_bw)
 *
 * Every frame header is 16 bytes in network byte order. Blocking mode uses
 * blocking sockets bounded by SO_RCVTIMEO/SO_SNDTIMEO; -W (poll) uses
 * non-blocking sockets and spins, like sockperf --nonblocked.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "emu/conn.h"
#include "tools/softdat-perf/perf.h"

#define RAW_MAGIC 0x53505231u /* "SPR1" */

enum raw_op {
    OP_HELLO = 1,   /* a = flags (1 last connection of the session, 2 poll), b = max size */
    OP_PINGPONG,    /* a = size */
    OP_REQRESP,     /* a = size; then OP_REQ ... OP_END */
    OP_STREAM,      /* a = size; then OP_BURST(a = n, b = last) + data ... */
    OP_PULL,        /* a = size; then OP_REQ(a = n) ... OP_END */
    OP_REQ,
    OP_BURST,
    OP_END,
    OP_ACK,         /* a = messages seen */
    OP_BYE,
};
#define HELLO_LAST 1u
#define HELLO_POLL 2u

struct frame {
    uint32_t magic, op, a, b;
};

struct rawconn {
    int fd;
    int spin;           /* non-blocking socket, busy-poll */
    double timeout;     /* seconds per blocking step */
};

/* ------------------------------------------------------------ I/O */

static int io_full(struct rawconn *c, void *buf, size_t len, int is_write)
{
    char *p = buf;
    double deadline = 0;
    unsigned spins = 0;

    while (len > 0) {
        ssize_t n = is_write ? send(c->fd, p, len, MSG_NOSIGNAL) : recv(c->fd, p, len, 0);
        if (n > 0) {
            p += n;
            len -= (size_t)n;
            continue;
        }
        if (n == 0) {
            errno = ECONNRESET;
            return -1;
        }
        if (errno == EINTR && !perf_stop)
            continue;
        if ((errno == EAGAIN || errno == EWOULDBLOCK) && c->spin && !perf_stop) {
            /* Bounded spin: check the clock every 1024 tries. */
            if ((++spins & 1023) == 0) {
                double now = perf_now();
                if (deadline == 0)
                    deadline = now + c->timeout;
                else if (now > deadline) {
                    errno = ETIMEDOUT;
                    return -1;
                }
            }
            continue;
        }
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            errno = ETIMEDOUT;
        return -1;
    }
    return 0;
}

static int rd(struct rawconn *c, void *b, size_t n) { return io_full(c, b, n, 0); }
static int wr(struct rawconn *c, const void *b, size_t n) { return io_full(c, (void *)b, n, 1); }

static int send_frame(struct rawconn *c, uint32_t op, uint32_t a, uint32_t b)
{
    struct frame f = { htonl(RAW_MAGIC), htonl(op), htonl(a), htonl(b) };
    return wr(c, &f, sizeof(f));
}

static int recv_frame(struct rawconn *c, struct frame *f)
{
    if (rd(c, f, sizeof(*f)) != 0)
        return -1;
    f->magic = ntohl(f->magic);
    f->op = ntohl(f->op);
    f->a = ntohl(f->a);
    f->b = ntohl(f->b);
    if (f->magic != RAW_MAGIC) {
        errno = EPROTO;
        return -1;
    }
    return 0;
}

/* The header and the first message in one system call. */
static int send_frame_with(struct rawconn *c, uint32_t op, uint32_t a, uint32_t b,
                           const void *data, size_t len)
{
    struct frame f = { htonl(RAW_MAGIC), htonl(op), htonl(a), htonl(b) };
    struct iovec iov[2] = { { &f, sizeof(f) }, { (void *)data, len } };
    ssize_t n = writev(c->fd, iov, 2);
    if (n == (ssize_t)(sizeof(f) + len))
        return 0;
    if (n < 0) {
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
            return -1;
        n = 0;
    }
    /* Short write: finish the rest the ordinary way. */
    if ((size_t)n < sizeof(f)) {
        if (wr(c, (char *)&f + n, sizeof(f) - (size_t)n) != 0)
            return -1;
        n = 0;
    } else {
        n -= (ssize_t)sizeof(f);
    }
    return wr(c, (const char *)data + n, len - (size_t)n);
}

static void conn_setup(struct rawconn *c, int fd, int spin, double timeout)
{
    int one = 1;
    struct timeval tv = { (time_t)timeout, (suseconds_t)((timeout - (double)(time_t)timeout) * 1e6) };

    c->fd = fd;
    c->spin = spin;
    c->timeout = timeout;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0)
        fcntl(fd, F_SETFL, spin ? (fl | O_NONBLOCK) : (fl & ~O_NONBLOCK));
}

/* ------------------------------------------------------------ server */

int raw_listen(const DAT_SOCK_ADDR *addr, unsigned port)
{
    struct sockaddr_storage ss;
    socklen_t len;
    int one = 1;

    memset(&ss, 0, sizeof(ss));
    if (addr != NULL && addr->sa_family == AF_INET6) {
        memcpy(&ss, addr, sizeof(struct sockaddr_in6));
        ((struct sockaddr_in6 *)&ss)->sin6_port = htons((uint16_t)port);
        len = sizeof(struct sockaddr_in6);
    } else {
        struct sockaddr_in *in = (struct sockaddr_in *)&ss;
        if (addr != NULL && addr->sa_family == AF_INET)
            memcpy(in, addr, sizeof(*in));
        else
            in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        in->sin_family = AF_INET;
        in->sin_port = htons((uint16_t)port);
        len = sizeof(*in);
    }
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    /* The congestion control softdat's own connections get (inherited by
     * accepted sockets): the baseline is TCP under the same conditions. */
    emu_tcp_congestion_apply(fd, (struct sockaddr *)&ss);
    if (bind(fd, (struct sockaddr *)&ss, len) != 0 || listen(fd, 4) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

/* Sends n messages of size bytes, one write each (the pull pattern). */
static int write_msgs(struct rawconn *c, const char *buf, uint32_t size, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        if (wr(c, buf, size) != 0)
            return -1;
    return 0;
}

int raw_serve_conn(const struct perf_opts *o, int fd, int *last)
{
    struct rawconn c;
    struct frame f;
    char *buf = NULL;
    size_t bufsize = 0;
    int rc = -1;
    const char *what = "hello";

    *last = 0;
    conn_setup(&c, fd, 0, o->op_timeout);
    if (recv_frame(&c, &f) != 0 || (f.op != OP_HELLO && f.op != OP_BYE))
        goto out;
    if (f.op == OP_BYE) {
        *last = 1;
        rc = 0;
        goto out;
    }
    *last = (f.a & HELLO_LAST) != 0;
    if (f.b == 0 || f.b > MAX_SIZE_LIMIT)
        goto out;
    bufsize = f.b < (256u << 10) ? (256u << 10) : f.b;
    buf = malloc(bufsize);
    if (buf == NULL)
        goto out;
    memset(buf, 'D', bufsize);
    conn_setup(&c, fd, (f.a & HELLO_POLL) != 0, o->op_timeout);
    if (send_frame(&c, OP_HELLO, 0, 0) != 0)
        goto out;

    /* Bounded: a session has at most one command per pattern, size and
     * repetition, each loop below at most SERVER_LOOP_MAX steps, and every
     * read or write is bounded in time by the socket timeouts. */
    for (int cmd = 0; cmd < RAW_NPAT * MAX_SIZES * 65 + 4 && !perf_stop; cmd++) {
        what = "command";
        if (recv_frame(&c, &f) != 0)
            goto out;
        uint32_t size = f.a;
        if (f.op == OP_BYE) {
            rc = 0;
            goto out;
        }
        if ((f.op == OP_PINGPONG || f.op == OP_REQRESP || f.op == OP_STREAM || f.op == OP_PULL) &&
            (size == 0 || size > bufsize)) {
            errno = EPROTO;
            goto out;
        }
        if (send_frame(&c, OP_ACK, 0, 0) != 0)
            goto out;
        switch (f.op) {
        case OP_PINGPONG:
            what = "pingpong";
            for (long step = 0;; step++) {
                if (step >= SERVER_LOOP_MAX) {
                    errno = E2BIG;
                    goto out;
                }
                if (rd(&c, buf, size) != 0 || wr(&c, buf, size) != 0)
                    goto out;
                if (buf[0] == 'E')
                    break;
            }
            buf[0] = 'D';
            break;
        case OP_REQRESP:
        case OP_PULL:
            what = f.op == OP_PULL ? "pull" : "reqresp";
            for (long step = 0;; step++) {
                if (step >= SERVER_LOOP_MAX) {
                    errno = E2BIG;
                    goto out;
                }
                if (recv_frame(&c, &f) != 0)
                    goto out;
                if (f.op == OP_END) {
                    if (send_frame(&c, OP_ACK, 0, 0) != 0)
                        goto out;
                    break;
                }
                if (f.op != OP_REQ || f.a == 0 || f.a > MAX_WINDOW) {
                    errno = EPROTO;
                    goto out;
                }
                if (write_msgs(&c, buf, size, f.a) != 0)
                    goto out;
            }
            break;
        case OP_STREAM: {
            uint64_t total = 0;
            what = "stream";
            for (long step = 0;; step++) {
                if (step >= SERVER_LOOP_MAX) {
                    errno = E2BIG;
                    goto out;
                }
                if (recv_frame(&c, &f) != 0)
                    goto out;
                if (f.op != OP_BURST || f.a == 0 || f.a > MAX_WINDOW) {
                    errno = EPROTO;
                    goto out;
                }
                total += f.a;
                size_t left = (size_t)f.a * size;
                while (left > 0) {
                    size_t n = left < bufsize ? left : bufsize;
                    if (rd(&c, buf, n) != 0)
                        goto out;
                    left -= n;
                }
                if (f.b) {
                    if (send_frame(&c, OP_ACK, (uint32_t)total, 0) != 0)
                        goto out;
                    break;
                }
            }
            break;
        }
        default:
            errno = EPROTO;
            goto out;
        }
    }
out:
    if (rc != 0 && !perf_stop)
        perf_err("raw TCP server: %s: %s", what, strerror(errno));
    free(buf);
    close(fd);
    return rc;
}

/* ------------------------------------------------------------ client */

static int raw_connect(const struct perf_opts *o, int quiet)
{
    struct addrinfo hints, *ai = NULL, *p;
    char port[16];
    int fd = -1, err;

    memset(&hints, 0, sizeof(hints));
    hints.ai_socktype = SOCK_STREAM;
    snprintf(port, sizeof(port), "%u", o->port + 1);
    err = getaddrinfo(o->host, port, &hints, &ai);
    if (err != 0) {
        if (!quiet)
            perf_err("raw TCP: %s: %s", o->host, gai_strerror(err));
        return -1;
    }
    for (p = ai; p != NULL; p = p->ai_next) {
        fd = socket(p->ai_family, p->ai_socktype | SOCK_CLOEXEC, p->ai_protocol);
        if (fd < 0)
            continue;
        emu_tcp_congestion_apply(fd, p->ai_addr);
        if (connect(fd, p->ai_addr, p->ai_addrlen) == 0)
            break;
        close(fd);
        fd = -1;
    }
    err = errno;
    freeaddrinfo(ai);
    if (fd < 0 && !quiet)
        perf_err("raw TCP: cannot connect to %s port %u: %s", o->host, o->port + 1, strerror(err));
    return fd;
}

void raw_client_bye(const struct perf_opts *o)
{
    struct rawconn c;
    int fd = raw_connect(o, 1);
    if (fd < 0)
        return;
    conn_setup(&c, fd, 0, 2.0);
    send_frame(&c, OP_BYE, 0, 0);
    close(fd);
}

static int command(struct rawconn *c, uint32_t op, uint32_t size)
{
    struct frame f;
    if (send_frame(c, op, size, 0) != 0 || recv_frame(c, &f) != 0)
        return -1;
    if (f.op != OP_ACK) {
        errno = EPROTO;
        return -1;
    }
    return 0;
}

/* Latency: pingpong (one-way = RTT/2) or reqresp (full round trip). */
static int run_lat(const struct perf_opts *o, struct rawconn *c, enum raw_pattern pat,
                   uint32_t size, char *buf, struct perf_result *r)
{
    long warm = o->iters / 10 < 100 ? o->iters / 10 : 100;
    long total = o->iters + warm, got = 0;
    double *samples = calloc((size_t)o->iters, sizeof(double));
    double start, t0, t1;
    struct frame f;

    if (samples == NULL)
        return -1;
    if (command(c, pat == RAW_PINGPONG ? OP_PINGPONG : OP_REQRESP, size) != 0)
        goto fail;
    start = perf_now();
    for (long i = 0; i < total; i++) {
        int last = i + 1 == total || perf_stop || (perf_now() - start >= o->time_cap && i >= warm);
        t0 = perf_now();
        if (pat == RAW_PINGPONG) {
            buf[0] = last ? 'E' : 'D';
            if (wr(c, buf, size) != 0 || rd(c, buf, size) != 0)
                goto fail;
        } else {
            if (send_frame(c, OP_REQ, 1, 0) != 0 || rd(c, buf, size) != 0)
                goto fail;
        }
        t1 = perf_now();
        if (i >= warm)
            samples[got++] = (t1 - t0) * 1e6 / (pat == RAW_PINGPONG ? 2.0 : 1.0);
        if (last)
            break;
    }
    if (pat == RAW_REQRESP && (send_frame(c, OP_END, 0, 0) != 0 || recv_frame(c, &f) != 0))
        goto fail;
    buf[0] = 'D';
    r->iters = got;
    perf_stats(samples, got, &r->lat_med_us, &r->lat_p99_us);
    r->valid = got > 0;
    free(samples);
    return 0;
fail:
    free(samples);
    return -1;
}

/* Bandwidth: stream (client writes) or pull (client requests, server writes). */
static int run_bw(const struct perf_opts *o, struct rawconn *c, enum raw_pattern pat,
                  uint32_t size, char *buf, size_t bufsize, struct perf_result *r)
{
    double gb[64], mm[64];
    int reps = o->reps;
    long msgs_total = 0;
    uint32_t win = (uint32_t)o->window;
    struct frame f;

    for (int rep = 0; rep < reps && !perf_stop; rep++) {
        /* Each repetition is one command: the server's mode ends with it. */
        if (command(c, pat == RAW_STREAM ? OP_STREAM : OP_PULL, size) != 0)
            return -1;
        double cap = o->time_cap / reps, start = perf_now();
        long sent = 0;

        if (pat == RAW_STREAM) {
            for (;;) {
                uint32_t n = win;
                if ((long)n > o->iters - sent)
                    n = (uint32_t)(o->iters - sent);
                int last = sent + n >= o->iters || perf_now() - start >= cap || perf_stop;
                if (send_frame_with(c, OP_BURST, n, (uint32_t)last, buf, size) != 0)
                    return -1;
                for (uint32_t k = 1; k < n; k++)
                    if (wr(c, buf, size) != 0)
                        return -1;
                sent += n;
                if (last)
                    break;
            }
            if (recv_frame(c, &f) != 0 || f.op != OP_ACK || (long)f.a != sent) {
                errno = EPROTO;
                return -1;
            }
        } else {
            /* Two requests in flight keep the server's socket busy. */
            long requested = 0, inflight = 0;
            uint32_t q[2] = { 0, 0 };
            int qh = 0, stop = 0;
            for (;;) {
                while (!stop && inflight < 2) {
                    uint32_t n = win;
                    if ((long)n > o->iters - requested)
                        n = (uint32_t)(o->iters - requested);
                    if (send_frame(c, OP_REQ, n, 0) != 0)
                        return -1;
                    q[(qh + inflight) % 2] = n;
                    requested += n;
                    inflight++;
                    if (requested >= o->iters || perf_now() - start >= cap || perf_stop)
                        stop = 1;
                }
                if (inflight == 0)
                    break;
                /* The oldest request's data: n messages of size bytes. */
                uint32_t n = q[qh];
                qh = (qh + 1) % 2;
                inflight--;
                size_t left = (size_t)n * size;
                while (left > 0) {
                    size_t k = left < bufsize ? left : bufsize;
                    if (rd(c, buf, k) != 0)
                        return -1;
                    left -= k;
                }
                sent += n;
            }
            if (send_frame(c, OP_END, 0, 0) != 0 || recv_frame(c, &f) != 0 || f.op != OP_ACK) {
                errno = EPROTO;
                return -1;
            }
        }
        double el = perf_now() - start;
        gb[rep] = (double)sent * size / el / 1e9;
        mm[rep] = (double)sent / el / 1e6;
        msgs_total += sent;
    }
    r->iters = msgs_total;
    r->gbps = perf_median(gb, reps);
    r->mmsgs = perf_median(mm, reps);
    r->valid = 1;
    return 0;
}

int raw_client_run(const struct perf_opts *o, struct perf_results *res)
{
    struct rawconn c;
    struct frame f;
    uint32_t maxsz = perf_max_size(o);
    size_t bufsize = maxsz < (256u << 10) ? (256u << 10) : maxsz;
    char *buf;
    int fd, rc = PERF_EXIT_OK;
    int need[RAW_NPAT] = { 0 };

    for (int t = 0; t < T_COUNT; t++)
        if (o->tests[t])
            need[perf_test_raw(t)] = 1;
    fd = raw_connect(o, 0);
    if (fd < 0)
        return PERF_EXIT_CONNECT;
    buf = malloc(bufsize);
    if (buf == NULL) {
        close(fd);
        return PERF_EXIT_FAIL;
    }
    memset(buf, 'D', bufsize);
    conn_setup(&c, fd, 0, o->op_timeout);
    if (send_frame(&c, OP_HELLO, HELLO_LAST | (o->poll ? HELLO_POLL : 0), maxsz) != 0 ||
        recv_frame(&c, &f) != 0 || f.op != OP_HELLO) {
        perf_err("raw TCP: handshake with %s port %u failed: %s", o->host, o->port + 1,
                 strerror(errno));
        free(buf);
        close(fd);
        return PERF_EXIT_CONNECT;
    }
    conn_setup(&c, fd, o->poll, o->op_timeout);

    for (int p = 0; p < RAW_NPAT && rc == PERF_EXIT_OK && !perf_stop; p++) {
        if (!need[p])
            continue;
        for (int s = 0; s < o->nsizes && !perf_stop; s++) {
            struct perf_result *r = &res->raw[p][s];
            char sz[16];
            int lat = p == RAW_PINGPONG || p == RAW_REQRESP;
            perf_fmt_size(o->sizes[s], sz, sizeof(sz));
            perf_status_step(1, "raw %s %s", perf_raw_name((enum raw_pattern)p), sz);
            int e = lat ? run_lat(o, &c, (enum raw_pattern)p, o->sizes[s], buf, r)
                        : run_bw(o, &c, (enum raw_pattern)p, o->sizes[s], buf, bufsize, r);
            perf_fmt_size(o->sizes[s], sz, sizeof(sz));
            if (e != 0) {
                snprintf(r->error, sizeof(r->error), "%s", strerror(errno));
                perf_err("raw TCP %s %s: %s", perf_raw_name((enum raw_pattern)p), sz, r->error);
                rc = PERF_EXIT_FAIL;
                break;
            }
            if (lat)
                perf_detail("raw  %-12s %6s: %ld iters, median %.2f us, p99 %.2f us",
                              perf_raw_name((enum raw_pattern)p), sz, r->iters, r->lat_med_us,
                              r->lat_p99_us);
            else
                perf_detail("raw  %-12s %6s: %ld msgs, %.4f GB/s, %.3f Mmsg/s",
                              perf_raw_name((enum raw_pattern)p), sz, r->iters, r->gbps,
                              r->mmsgs);
        }
    }
    if (rc == PERF_EXIT_OK) {
        conn_setup(&c, fd, 0, o->op_timeout);
        send_frame(&c, OP_BYE, 0, 0);
    }
    free(buf);
    close(fd);
    return rc;
}
