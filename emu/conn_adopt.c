/* Connections on a socket the consumer already connected (the iWARP
 * extension's socket service points, docs/iwarp-ssp.md): the active side
 * sends its MPA Request on it (emu_conn_connect_fd), the passive side
 * waits for one on it (emu_listener_adopt: a listener with no listening
 * socket and exactly one pending connection).
 *
 * Ownership: emu works on a duplicate of the consumer's descriptor, so
 * that until the socket passes to a connection for good the consumer's
 * descriptor, its number and its TCP connection are untouched by anything
 * emu does (closing the duplicate neither closes nor resets the socket).
 * When the socket does pass, the consumer's descriptor is closed, since
 * the spec gives the socket to the Endpoint and a second open descriptor
 * would keep the TCP connection alive after the Endpoint closes it. */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "emu/conn_int.h"
#include "emu/log.h"

int emu_sock_tcp_addrs(int fd, struct sockaddr_storage *local, socklen_t *llen, struct sockaddr_storage *peer,
                       socklen_t *plen)
{
    int type = 0, proto = 0;
    socklen_t sl = sizeof type;
    if (fd < 0)
        return -EBADF;
    if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &sl) != 0)
        return -errno; /* EBADF, ENOTSOCK */
    sl = sizeof proto;
    if (type != SOCK_STREAM || getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &proto, &sl) != 0 || proto != IPPROTO_TCP)
        return -EPROTONOSUPPORT;
    *llen = sizeof *local;
    if (getsockname(fd, (struct sockaddr *)local, llen) != 0)
        return -errno;
    if (local->ss_family != AF_INET && local->ss_family != AF_INET6)
        return -EPROTONOSUPPORT;
    *plen = sizeof *peer;
    if (getpeername(fd, (struct sockaddr *)peer, plen) != 0)
        return -errno; /* ENOTCONN */
    return 0;
}

int conn_adopt_socket(struct emu_conn *c, int fd)
{
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0)
        return -errno;
    int d = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (d < 0)
        return -errno;
    /* File status flags belong to the shared open file: restored at settle. */
    if (fcntl(d, F_SETFL, fl | O_NONBLOCK) != 0) {
        int rc = -errno;
        close(d);
        return rc;
    }
    struct sockaddr_storage peer;
    socklen_t plen = sizeof peer;
    bool known = getpeername(d, (struct sockaddr *)&peer, &plen) == 0;
    conn_sock_tune(d, known ? (struct sockaddr *)&peer : NULL);
    c->fd = d;
    c->adopted = true;
    c->orig_fd = fd;
    c->orig_fl = fl;
    return 0;
}

void conn_adopt_settle(struct emu_conn *c, bool established)
{
    if (!c->adopted)
        return;
    c->adopted = false;
    if (established) {
        close(c->orig_fd);
    } else {
        fcntl(c->orig_fd, F_SETFL, c->orig_fl);
        /* Our close may have asked for a reset on the shared socket. */
        struct linger lg = {.l_onoff = 0, .l_linger = 0};
        setsockopt(c->orig_fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    }
    c->orig_fd = -1;
}

int emu_conn_connect_fd(struct emu_engine *e, int fd, const struct emu_conn_params *p, const void *pdata,
                        uint16_t pdata_len, const struct emu_conn_ops *ops, void *ctx, struct emu_conn **out)
{
    struct sockaddr_storage local, peer;
    socklen_t llen, plen;
    int rc = emu_sock_tcp_addrs(fd, &local, &llen, &peer, &plen);
    if (rc != 0)
        return rc;
    return conn_connect_start(e, (struct sockaddr *)&peer, plen, NULL, 0, p, pdata, pdata_len, ops, ctx, out, fd);
}

/* ---------------------------------------------------------------- passive */

struct adopt_job {
    struct emu_listener *l;
    int fd;
    int rc;
};

static void adopt_listener_hook(struct emu_engine_hook *h)
{
    conn_listener_release((struct emu_listener *)((char *)h - offsetof(struct emu_listener, hook)));
}

/* The one pending connection, set up on the engine thread like a
 * connection a listener accepted, but without the Request deadline: the
 * consumer's peer decides when (and whether) to send its Request. */
static void adopt_job_fn(void *arg)
{
    struct adopt_job *j = arg;
    struct emu_listener *l = j->l;
    struct emu_conn *c = conn_alloc(l->e);
    if (c == NULL) {
        j->rc = -ENOMEM;
        return;
    }
    int rc = conn_adopt_socket(c, j->fd);
    if (rc == 0) {
        c->state = CS_P_WAIT_REQ;
        conn_fill_addrs(c);
        rc = conn_attach(c);
    }
    if (rc != 0) {
        if (c->adopted) {
            close(c->fd);
            c->adopted = false;
        }
        emu_engine_hook_del(c->e, &c->hook);
        emu_fdw_free(c->w);
        emu_timer_free(c->timer);
        emu_wire_ep_fini(&c->wire);
        emu_lock_destroy(&c->lock);
        free(c);
        j->rc = rc;
        return;
    }
    if (emu_engine_hook_add(l->e, &l->hook) != 0) {
        conn_release(c);
        j->rc = -ENOMEM;
        return;
    }
    c->listener = l;
    l->pending = c;
    conn_expect(c, EMU_MPA_HDR_LEN);
    conn_watch(c, EMU_EV_READ, 0);
    j->rc = 0;
}

/* The Request arrived: the socket is the request's now. */
static void adopt_request(struct emu_listener *l, const struct emu_conn_request *req, void *ctx)
{
    (void)ctx;
    conn_adopt_settle(req->conn, true);
    struct emu_listener_ops *user = (struct emu_listener_ops *)(l + 1);
    user->request(l, req, l->ctx);
}

static void adopt_lost(struct emu_listener *l, int err, void *ctx)
{
    (void)ctx;
    struct emu_listener_ops *user = (struct emu_listener_ops *)(l + 1);
    if (user->lost)
        user->lost(l, err, l->ctx);
}

static const struct emu_listener_ops adopt_ops = {.request = adopt_request, .lost = adopt_lost};

int emu_listener_adopt(struct emu_engine *e, int fd, const struct emu_listener_ops *ops, void *ctx,
                       struct emu_listener **out)
{
    if (e == NULL || out == NULL || ops == NULL || ops->request == NULL)
        return -EINVAL;
    *out = NULL;
    struct sockaddr_storage local, peer;
    socklen_t llen, plen;
    int rc = emu_sock_tcp_addrs(fd, &local, &llen, &peer, &plen);
    if (rc != 0)
        return rc;
    /* The owner's ops ride behind the listener (freed with it): the
     * listener itself calls our wrappers. */
    struct emu_listener *l = calloc(1, sizeof *l + sizeof *ops);
    if (l == NULL)
        return -ENOMEM;
    memcpy(l + 1, ops, sizeof *ops);
    l->e = e;
    l->ops = adopt_ops;
    l->ctx = ctx;
    l->fd = -1;
    l->hook.fn = adopt_listener_hook;
    memcpy(&l->addr, &local, llen);
    l->alen = llen;
    l->port = emu_sockaddr_port((struct sockaddr *)&local);
    struct adopt_job j = {.l = l, .fd = fd, .rc = -EIO};
    rc = emu_engine_run_sync(e, adopt_job_fn, &j);
    if (rc == 0)
        rc = j.rc;
    if (rc != 0) {
        free(l);
        return rc;
    }
    *out = l;
    return 0;
}
