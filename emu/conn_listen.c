/* Connection manager, listening side: TCP listeners, the accept path into
 * the MPA Request phase, and the address / CRC-policy / socket helpers
 * (active sockets, the refused-connect retry window). */
#include "emu/conn_int.h"

#include "emu/log.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

/* ---------------------------------------------------------------- helpers */

const char *emu_conn_event_name(enum emu_conn_event_type t)
{
    switch (t) {
    case EMU_CONN_ESTABLISHED: return "ESTABLISHED";
    case EMU_CONN_PEER_REJECTED: return "PEER_REJECTED";
    case EMU_CONN_NON_PEER_REJECTED: return "NON_PEER_REJECTED";
    case EMU_CONN_UNREACHABLE: return "UNREACHABLE";
    case EMU_CONN_TIMED_OUT: return "TIMED_OUT";
    case EMU_CONN_ACCEPT_ERROR: return "ACCEPT_ERROR";
    case EMU_CONN_DISCONNECTED: return "DISCONNECTED";
    case EMU_CONN_BROKEN: return "BROKEN";
    }
    return "?";
}

static pthread_once_t g_crc_once = PTHREAD_ONCE_INIT;
static enum emu_crc_mode g_crc_mode = EMU_CRC_AUTO;

static void crc_env_init(void)
{
    const char *v = getenv("SOFTDAT_CRC");
    switch (emu_mpa_crc_mode_parse(v)) {
    case EMU_MPA_CRC_ON: g_crc_mode = EMU_CRC_ON; break;
    case EMU_MPA_CRC_OFF: g_crc_mode = EMU_CRC_OFF; break;
    case EMU_MPA_CRC_AUTO: g_crc_mode = EMU_CRC_AUTO; break;
    default:
        SD_WARN("conn", "SOFTDAT_CRC=%s not understood (on|off|auto); using auto", v);
        g_crc_mode = EMU_CRC_AUTO;
    }
}

enum emu_crc_mode emu_conn_crc_env(void)
{
    pthread_once(&g_crc_once, crc_env_init);
    return g_crc_mode;
}

bool emu_sockaddr_is_loopback(const struct sockaddr *sa)
{
    if (sa == NULL)
        return false;
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
        return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
    }
    if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
        if (IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr))
            return true;
        if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr))
            return in6->sin6_addr.s6_addr[12] == 127;
    }
    return false;
}

uint16_t emu_sockaddr_port(const struct sockaddr *sa)
{
    if (sa && sa->sa_family == AF_INET)
        return ntohs(((const struct sockaddr_in *)sa)->sin_port);
    if (sa && sa->sa_family == AF_INET6)
        return ntohs(((const struct sockaddr_in6 *)sa)->sin6_port);
    return 0;
}

void conn_sockaddr_set_port(struct sockaddr_storage *ss, uint16_t port)
{
    if (ss->ss_family == AF_INET)
        ((struct sockaddr_in *)ss)->sin_port = htons(port);
    else if (ss->ss_family == AF_INET6)
        ((struct sockaddr_in6 *)ss)->sin6_port = htons(port);
}

char *emu_sockaddr_str(const struct sockaddr *sa, char *buf, size_t len)
{
    char host[INET6_ADDRSTRLEN] = "?";
    if (sa && sa->sa_family == AF_INET) {
        inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, host, sizeof host);
        snprintf(buf, len, "%s:%u", host, emu_sockaddr_port(sa));
    } else if (sa && sa->sa_family == AF_INET6) {
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, host, sizeof host);
        snprintf(buf, len, "[%s]:%u", host, emu_sockaddr_port(sa));
    } else {
        snprintf(buf, len, "?");
    }
    return buf;
}

/* Copy a caller's address into ss; -EINVAL / -EAFNOSUPPORT. */
int conn_addr_copy(struct sockaddr_storage *ss, socklen_t *sslen, const struct sockaddr *sa,
                     socklen_t len)
{
    if (sa == NULL)
        return -EINVAL;
    memset(ss, 0, sizeof *ss);
    if (sa->sa_family == AF_INET) {
        if (len < (socklen_t)sizeof(struct sockaddr_in))
            return -EINVAL;
        memcpy(ss, sa, sizeof(struct sockaddr_in));
        *sslen = sizeof(struct sockaddr_in);
        return 0;
    }
    if (sa->sa_family == AF_INET6) {
        if (len < (socklen_t)sizeof(struct sockaddr_in6))
            return -EINVAL;
        memcpy(ss, sa, sizeof(struct sockaddr_in6));
        *sslen = sizeof(struct sockaddr_in6);
        return 0;
    }
    return -EAFNOSUPPORT;
}

bool conn_crc_wanted(enum emu_crc_mode m, const struct sockaddr *local,
                       const struct sockaddr *peer)
{
    if (m == EMU_CRC_DEFAULT)
        m = emu_conn_crc_env();
    enum emu_mpa_crc_mode mm = m == EMU_CRC_ON    ? EMU_MPA_CRC_ON
                               : m == EMU_CRC_OFF ? EMU_MPA_CRC_OFF
                                                  : EMU_MPA_CRC_AUTO;
    return emu_mpa_crc_want(mm, emu_sockaddr_is_loopback(local) && emu_sockaddr_is_loopback(peer));
}

static pthread_once_t g_peer_to_once = PTHREAD_ONCE_INIT;
static unsigned g_peer_to_ms = EMU_CONN_PEER_TIMEOUT_MS;

static void peer_to_env_init(void)
{
    const char *v = getenv("SOFTDAT_PEER_TIMEOUT_MS");
    if (v == NULL || *v == '\0')
        return;
    char *end = NULL;
    errno = 0;
    unsigned long ms = strtoul(v, &end, 10);
    if (errno != 0 || end == v || *end != '\0' || v[0] == '-' || ms < 1000ul || ms > 3600000ul) {
        SD_WARN("conn", "SOFTDAT_PEER_TIMEOUT_MS=%s not understood (1000-3600000); using %u", v,
                EMU_CONN_PEER_TIMEOUT_MS);
        return;
    }
    g_peer_to_ms = (unsigned)ms;
}

unsigned emu_conn_peer_timeout_ms(void)
{
    pthread_once(&g_peer_to_once, peer_to_env_init);
    return g_peer_to_ms;
}

/* The TCP congestion control for a connection to or from sa (see
 * emu_tcp_congestion_apply); NULL: leave the system's. */
static const char *congestion_for(const struct sockaddr *sa)
{
    const char *v = getenv("SOFTDAT_TCP_CONGESTION");
    if (v == NULL || *v == '\0' || strcasecmp(v, "auto") == 0)
        return emu_sockaddr_is_loopback(sa) ? "reno" : NULL;
    if (strcasecmp(v, "system") == 0)
        return NULL;
    return v;
}

/* The congestion control of a connection's socket (congestion_for).
 * A kernel default that paces (bbr, Debian's choice) only delays loopback:
 * a message just past the 64 KiB loopback MSS waits a pacing gap for its
 * last segment, and its receiver a wake-up more for it (64 KiB send_bw
 * 1.8 GB/s paced, 4.4 with reno; perf-log.md §17). Reno is built into every
 * kernel and allowed to every user. A choice the kernel refuses leaves the
 * default, said once. */
void emu_tcp_congestion_apply(int fd, const struct sockaddr *sa)
{
    const char *cc = congestion_for(sa);
    if (cc == NULL)
        return;
    if (setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, cc, (socklen_t)strlen(cc)) != 0) {
        static atomic_bool said;
        if (!atomic_exchange(&said, true))
            SD_WARN("conn", "TCP congestion control \"%s\" refused (%s): the system's default stays", cc,
                    strerror(errno));
    }
}

/* net.core.rmem_max, read once: the most SO_RCVBUF may ask for (the
 * kernel doubles it). 0 when unknown. */
static pthread_once_t g_rmem_once = PTHREAD_ONCE_INIT;
static long g_rmem_max;

static void rmem_max_read(void)
{
    FILE *f = fopen("/proc/sys/net/core/rmem_max", "r");
    if (f == NULL)
        return;
    long v = 0;
    if (fscanf(f, "%ld", &v) == 1 && v > 0)
        g_rmem_max = v;
    fclose(f);
}

long emu_tcp_rcvbuf_choice(const char *env, bool loopback, long rmem_max)
{
    if (env == NULL || *env == '\0' || strcasecmp(env, "auto") == 0) {
        if (!loopback || rmem_max < EMU_TCP_RCVBUF_MIN_AUTO)
            return 0;
        return rmem_max < EMU_TCP_RCVBUF_AUTO ? rmem_max : EMU_TCP_RCVBUF_AUTO;
    }
    if (strcasecmp(env, "system") == 0)
        return 0;
    char *end = NULL;
    errno = 0;
    long v = strtol(env, &end, 10);
    if (errno != 0 || end == env || *end != '\0' || v < 4096 || v > (1L << 30))
        return -1;
    return v;
}

/* The receive buffer of a connection's socket (emu_tcp_rcvbuf_choice).
 * Linux grows a socket's receive buffer when one round trip's reads took
 * more than the buffer's current measure, and on loopback a round trip is
 * a few microseconds: one recv(2). Each of softdat's reads takes at most
 * one FPDU (64 KiB and a short tail; the next header decides where the
 * next payload goes), so the buffer stops at about twice that (ss -tmi:
 * 460 KiB, where raw TCP's 1 MiB reads grow its own to 2-4.6 MiB) and the
 * sender is window-limited 99% of the time. A fixed 4 MiB (8 MiB to the
 * kernel), 1 MiB ratio to raw TCP, medians of 8 alternated rounds: send_bw
 * 0.61 -> 0.78 blocking, 0.78 -> 0.82 polled; write_bw 0.67 -> 0.76,
 * 0.81 -> 0.80; read_bw 0.76 -> 0.79, 0.70 -> 0.82 (perf-log.md §12). Not
 * where the network has a real delay: there a round trip spans many
 * reads and the kernel's tuning may go further than a fixed size. */
static void rcvbuf_apply(int fd, const struct sockaddr *sa)
{
    pthread_once(&g_rmem_once, rmem_max_read);
    const char *env = getenv("SOFTDAT_TCP_RCVBUF");
    long v = emu_tcp_rcvbuf_choice(env, emu_sockaddr_is_loopback(sa), g_rmem_max);
    if (v < 0) {
        static atomic_bool said;
        if (!atomic_exchange(&said, true))
            SD_WARN("conn", "SOFTDAT_TCP_RCVBUF=%s not understood (auto, system, or 4096-1073741824 bytes): "
                            "auto",
                    env);
        v = emu_tcp_rcvbuf_choice(NULL, emu_sockaddr_is_loopback(sa), g_rmem_max);
    }
    if (v > 0) {
        int b = (int)v;
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &b, sizeof b);
    }
}

/* A peer that vanishes without a FIN or RST (its host died, the link was
 * cut) is noticed within the peer timeout, not the kernel's two hours of
 * keepalive or fifteen minutes of retransmissions: keepalive probes when
 * the connection is idle (first after half the timeout, then three more
 * in the other half), TCP_USER_TIMEOUT when sent data goes unacknowledged.
 * The connection then breaks (ETIMEDOUT -> BROKEN) and every outstanding
 * DTO completes FLUSHED. end (the target, the listener's address, an
 * adopted socket's peer; NULL: unknown) decides the congestion control
 * (emu_tcp_congestion_apply) and the receive buffer (rcvbuf_apply). Before
 * connect or listen: the window scale is chosen at the handshake. */
void conn_sock_tune(int fd, const struct sockaddr *end)
{
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (end != NULL) {
        emu_tcp_congestion_apply(fd, end);
        rcvbuf_apply(fd, end);
    }
    unsigned ms = emu_conn_peer_timeout_ms();
    int idle = (int)(ms / 2000u), intvl = (int)(ms / 6000u), cnt = 3;
    if (idle < 1)
        idle = 1;
    if (intvl < 1)
        intvl = 1;
    unsigned user = ms;
    setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof intvl);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof cnt);
    setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user, sizeof user);
}

/* A fresh non-blocking socket for c's next TCP connect, bound to c->src
 * (port 0) if set. SO_REUSEADDR: the TIME_WAIT socket an active close
 * leaves behind keeps the flag, and Linux lets a later listener (which sets
 * it too) bind that port only if both have it; dtestcm's 1000 connections
 * would otherwise block a listener on any of their ports for a minute.
 * 0 or -errno (nothing left open). */
int conn_active_socket(const struct emu_conn *c, int *out)
{
    int fd = socket(c->target.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    conn_sock_tune(fd, (const struct sockaddr *)&c->target);
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (c->src_len && bind(fd, (const struct sockaddr *)&c->src, c->src_len) != 0) {
        int rc = -errno;
        close(fd);
        return rc;
    }
    *out = fd;
    return 0;
}

static pthread_once_t g_retry_once = PTHREAD_ONCE_INIT;
static uint64_t g_retry_us = EMU_CONN_REFUSED_RETRY_US;

static void retry_env_init(void)
{
    const char *v = getenv("SOFTDAT_CONNECT_RETRY_MS");
    if (v == NULL || *v == '\0')
        return;
    char *end = NULL;
    errno = 0;
    unsigned long ms = strtoul(v, &end, 10);
    if (errno != 0 || end == v || *end != '\0' || v[0] == '-' || ms > 600000ul) {
        SD_WARN("conn", "SOFTDAT_CONNECT_RETRY_MS=%s not understood (0-600000); using %u", v,
                EMU_CONN_REFUSED_RETRY_US / 1000u);
        return;
    }
    g_retry_us = (uint64_t)ms * 1000u;
}

/* How long refused TCP connects are retried (read once). */
uint64_t conn_refused_retry_us(void)
{
    pthread_once(&g_retry_once, retry_env_init);
    return g_retry_us;
}

/* Close fd; abortive = RST instead of FIN (SO_LINGER 0). */
void conn_close_fd(int fd, bool abortive)
{
    if (fd < 0)
        return;
    if (abortive) {
        struct linger lg = {.l_onoff = 1, .l_linger = 0};
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    }
    close(fd);
}

/* ---------------------------------------------------------------- listeners */

static void listener_accept(int fd, unsigned what, void *arg)
{
    (void)what;
    struct emu_listener *l = arg;
    for (int i = 0; i < ACCEPT_BATCH && !l->released; i++) {
        struct sockaddr_storage peer;
        socklen_t plen = sizeof peer;
        int cfd = accept4(fd, (struct sockaddr *)&peer, &plen, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (cfd < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ||
                errno == ECONNABORTED)
                return;
            /* Out of fds or memory: the listen socket stays readable, so
             * pause instead of spinning on a level-triggered watcher. */
            SD_WARN("conn", "accept on port %u: %s (pausing 100 ms)", l->port,
                    strerror(errno));
            emu_fdw_disable(l->w, EMU_EV_READ);
            emu_timer_arm(l->backoff, 100000);
            return;
        }
        /* No conn_sock_tune: Linux copies Nagle, keepalive, the user
         * timeout and the congestion control from the listening socket,
         * tuned once at creation (six system calls less per connection). */
        struct emu_conn *c = conn_alloc(l->e);
        if (c == NULL) {
            conn_close_fd(cfd, true);
            continue;
        }
        c->fd = cfd;
        c->state = CS_P_WAIT_REQ;
        conn_fill_addrs_known(c, l->addr_specific ? &l->addr : NULL, l->alen, &peer, plen);
        conn_fill_mss(c);
        if (conn_attach(c) != 0) {
            c->released = true;
            emu_engine_hook_del(c->e, &c->hook);
            emu_fdw_free(c->w);
            emu_timer_free(c->timer);
            conn_close_fd(cfd, true);
            emu_lock_destroy(&c->lock);
            free(c);
            continue;
        }
        c->listener = l;
        c->lnext = l->pending;
        if (l->pending)
            l->pending->lprev = c;
        l->pending = c;
        conn_expect(c, EMU_MPA_HDR_LEN);
        emu_timer_arm(c->timer, EMU_CONN_REQ_TIMEOUT_US);
        conn_watch(c, EMU_EV_READ, 0);
    }
}

void conn_listener_release(struct emu_listener *l)
{
    if (l->released)
        return;
    l->released = true;
    emu_timer_free(l->backoff);
    l->backoff = NULL;
    emu_fdw_free(l->w);
    l->w = NULL;
    conn_close_fd(l->fd, false);
    l->fd = -1;
    /* Bounded: each release unlinks one pending connection. */
    while (l->pending)
        conn_release(l->pending);
    emu_engine_hook_del(l->e, &l->hook);
    free(l);
}

static void listener_resume(void *arg)
{
    struct emu_listener *l = arg;
    if (!l->released)
        emu_fdw_enable(l->w, EMU_EV_READ);
}

static void listener_hook_fn(struct emu_engine_hook *h)
{
    conn_listener_release((struct emu_listener *)((char *)h - offsetof(struct emu_listener, hook)));
}

int emu_listener_create(struct emu_engine *e, const struct sockaddr *addr, socklen_t len,
                        uint16_t port, const struct emu_listener_ops *ops, void *ctx,
                        struct emu_listener **out)
{
    if (e == NULL || out == NULL || ops == NULL || ops->request == NULL)
        return -EINVAL;
    *out = NULL;
    struct emu_listener *l = calloc(1, sizeof *l);
    if (l == NULL)
        return -ENOMEM;
    l->e = e;
    l->ops = *ops;
    l->ctx = ctx;
    l->fd = -1;
    l->hook.fn = listener_hook_fn;
    int rc = conn_addr_copy(&l->addr, &l->alen, addr, len);
    if (rc != 0)
        goto fail;
    conn_sockaddr_set_port(&l->addr, port);
    l->fd = socket(l->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (l->fd < 0) {
        rc = -errno;
        goto fail;
    }
    int one = 1;
    setsockopt(l->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (l->addr.ss_family == AF_INET6)
        setsockopt(l->fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
    conn_sock_tune(l->fd, (const struct sockaddr *)&l->addr); /* inherited by every accepted socket */
    if (bind(l->fd, (struct sockaddr *)&l->addr, l->alen) != 0 ||
        listen(l->fd, SOMAXCONN) != 0) {
        rc = -errno;
        goto fail;
    }
    socklen_t sl = sizeof l->addr;
    getsockname(l->fd, (struct sockaddr *)&l->addr, &sl);
    l->alen = sl;
    l->addr_specific = l->addr.ss_family == AF_INET
                           ? ((struct sockaddr_in *)&l->addr)->sin_addr.s_addr != htonl(INADDR_ANY)
                           : !IN6_IS_ADDR_UNSPECIFIED(&((struct sockaddr_in6 *)&l->addr)->sin6_addr);
    l->port = emu_sockaddr_port((struct sockaddr *)&l->addr);
    rc = emu_engine_hook_add(e, &l->hook);
    if (rc != 0)
        goto fail;
    l->w = emu_fdw_new(e, l->fd, listener_accept, l);
    l->backoff = emu_timer_new(e, listener_resume, l);
    if (l->w == NULL || l->backoff == NULL) {
        rc = -ENOMEM;
        emu_engine_hook_del(e, &l->hook);
        emu_fdw_free(l->w);
        emu_timer_free(l->backoff);
        goto fail;
    }
    emu_fdw_enable(l->w, EMU_EV_READ);
    char buf[64];
    SD_DBG("conn", "listening on %s", emu_sockaddr_str((struct sockaddr *)&l->addr, buf,
                                                       sizeof buf));
    *out = l;
    return 0;

fail:
    conn_close_fd(l->fd, false);
    free(l);
    return rc;
}

int emu_listener_create_range(struct emu_engine *e, const struct sockaddr *addr,
                              socklen_t len, uint16_t lo, uint16_t hi,
                              const struct emu_listener_ops *ops, void *ctx,
                              struct emu_listener **out)
{
    if (lo == 0 || hi < lo)
        return -EINVAL;
    uint32_t n = (uint32_t)hi - lo + 1;
    uint32_t start = (uint32_t)(emu_now_us() ^ ((uint64_t)getpid() << 16)) % n;
    for (uint32_t i = 0; i < n; i++) {
        uint16_t port = (uint16_t)(lo + (start + i) % n);
        int rc = emu_listener_create(e, addr, len, port, ops, ctx, out);
        if (rc != -EADDRINUSE)
            return rc;
    }
    return -EADDRINUSE;
}

uint16_t emu_listener_port(const struct emu_listener *l)
{
    return l ? l->port : 0;
}

static void listener_free_job(void *arg)
{
    struct emu_listener *l = arg;
    if (l->in_cb > 0)
        l->free_pending = true;
    else
        conn_listener_release(l);
}

void emu_listener_free(struct emu_listener *l)
{
    if (l == NULL)
        return;
    emu_engine_run_sync(l->e, listener_free_job, l);
}
