/* softdat-perf --connect-rate N: the raw-TCP baseline of connection setup.
 * Debian's dtestcm measures DAT connection setup this way: the client
 * issues N connects in one burst and times them until every one is
 * established (its "Connections: X usec, CPS Y" line). Here the same burst
 * with plain sockets on loopback: N non-blocking connect(2)s, a thread
 * accepting them, timed until all N are connected and accepted. scripts/
 * bench sets the two side by side (docs/perf.md). */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sched.h>
#include <stdbool.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tools/softdat-perf/perf.h"

struct acceptor {
    int lfd;
    long n;
    int *fds;
    atomic_long accepted;
    atomic_bool stop;
    double deadline;
};

static void *accept_loop(void *arg)
{
    struct acceptor *a = arg;
    while (atomic_load(&a->accepted) < a->n && !atomic_load(&a->stop) && perf_now() < a->deadline && !perf_stop) {
        struct pollfd p = {.fd = a->lfd, .events = POLLIN};
        if (poll(&p, 1, 100) <= 0)
            continue;
        int fd = accept4(a->lfd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0)
            continue;
        int one = 1;
        (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        a->fds[atomic_load(&a->accepted)] = fd;
        atomic_fetch_add(&a->accepted, 1);
    }
    return NULL;
}

/* Room for 2n descriptors (both ends live in this process). */
static int fd_room(long n)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return -1;
    rlim_t want = (rlim_t)(2 * n + 64);
    if (rl.rlim_cur >= want)
        return 0;
    if (rl.rlim_max < want)
        return -1;
    rl.rlim_cur = want;
    return setrlimit(RLIMIT_NOFILE, &rl);
}

/* --presize-fds: grow the descriptor table to hold `want` descriptors
 * while the process has one thread. Otherwise every doubling during the
 * burst (64, 128, ..., 1024 for 500 connections) waits for an RCU grace
 * period in socket()/accept4(), because the acceptor thread shares the
 * table; a softdat IA grows its table at dat_ia_open (emu/engine.c), so
 * this is the like-for-like baseline (docs/perf.md). */
static void presize_fds(long want)
{
    int probe = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (probe < 0)
        return;
    int high = fcntl(probe, F_DUPFD_CLOEXEC, (int)(want - 1));
    if (high >= 0)
        close(high);
    close(probe);
}

/* Connect all n sockets (non-blocking, one burst); 0 once every one is
 * connected, -1 on an error or the deadline. */
static int connect_burst(const struct sockaddr_in *sa, int *cfd, long n, double deadline)
{
    for (long i = 0; i < n; i++) {
        cfd[i] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (cfd[i] < 0)
            return -1;
        int one = 1;
        (void)setsockopt(cfd[i], IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        if (connect(cfd[i], (const struct sockaddr *)sa, sizeof *sa) != 0 && errno != EINPROGRESS)
            return -1;
    }
    struct pollfd *p = calloc((size_t)n, sizeof *p);
    if (p == NULL)
        return -1;
    long left = n;
    int rc = 0;
    for (long i = 0; i < n; i++)
        p[i] = (struct pollfd){.fd = cfd[i], .events = POLLOUT};
    while (left > 0 && rc == 0) {
        if (perf_now() > deadline || perf_stop) {
            rc = -1;
            break;
        }
        if (poll(p, (nfds_t)n, 100) < 0 && errno != EINTR) {
            rc = -1;
            break;
        }
        for (long i = 0; i < n; i++) {
            if (p[i].fd < 0 || p[i].revents == 0)
                continue;
            int err = 0;
            socklen_t len = sizeof err;
            if (getsockopt(p[i].fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0) {
                rc = -1;
                break;
            }
            p[i].fd = -1; /* connected: poll ignores it from now on */
            left--;
        }
    }
    free(p);
    return rc;
}

int perf_connect_rate(const struct perf_opts *o, long n)
{
    if (fd_room(n) != 0) {
        perf_err("--connect-rate %ld needs %ld descriptors (ulimit -n)", n, 2 * n + 64);
        return PERF_EXIT_FAIL;
    }
    struct acceptor a = {.n = n, .deadline = perf_now() + o->op_timeout};
    int *cfd = malloc((size_t)n * sizeof *cfd);
    a.fds = malloc((size_t)n * sizeof *a.fds);
    a.lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof sa;
    int rc = PERF_EXIT_FAIL;
    pthread_t th;
    int started = 0;
    long made = 0;
    if (cfd == NULL || a.fds == NULL || a.lfd < 0 || bind(a.lfd, (struct sockaddr *)&sa, sizeof sa) != 0 ||
        listen(a.lfd, (int)n) != 0 || getsockname(a.lfd, (struct sockaddr *)&sa, &sl) != 0) {
        perf_err("connect rate: cannot listen on 127.0.0.1: %s", strerror(errno));
        goto out;
    }
    if (o->presize_fds)
        presize_fds(2 * n + 64);
    if (pthread_create(&th, NULL, accept_loop, &a) != 0)
        goto out;
    started = 1;
    double t0 = perf_now();
    made = n;
    for (long i = 0; i < n; i++)
        cfd[i] = -1;
    if (connect_burst(&sa, cfd, n, a.deadline) != 0) {
        perf_err("connect rate: a connect failed or timed out: %s", strerror(errno));
        goto out;
    }
    while (atomic_load(&a.accepted) < n && perf_now() < a.deadline && !perf_stop)
        sched_yield();
    double dt = perf_now() - t0;
    if (atomic_load(&a.accepted) < n) {
        perf_err("connect rate: %ld of %ld accepted within %.1f s", atomic_load(&a.accepted), n, o->op_timeout);
        goto out;
    }
    if (o->json)
        printf("{\"tool\": \"softdat-perf\", \"mode\": \"connect-rate\", \"connections\": %ld, \"seconds\": %.6f, "
               "\"us_per_connection\": %.3f, \"cps\": %.1f}\n",
               n, dt, dt * 1e6 / (double)n, (double)n / dt);
    else
        printf("# softdat-perf %s: raw TCP connect/accept, %ld connections in one burst on 127.0.0.1\n"
               "connect_rate  %ld connections in %.4f s: %.2f us per connection, CPS %.1f\n",
               SOFTDAT_VERSION, n, n, dt, dt * 1e6 / (double)n, (double)n / dt);
    rc = PERF_EXIT_OK;
out:
    atomic_store(&a.stop, true);
    if (started)
        pthread_join(th, NULL);
    for (long i = 0; i < made; i++)
        if (cfd[i] >= 0)
            close(cfd[i]);
    for (long i = 0; i < atomic_load(&a.accepted); i++)
        close(a.fds[i]);
    if (a.lfd >= 0)
        close(a.lfd);
    free(cfd);
    free(a.fds);
    return rc;
}
