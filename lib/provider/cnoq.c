/* softdat: CNO wait core. See cnoq.h for the contract and docs/events.md
 * for the spec rules (line numbers refer to the DAT 2.0 spec text). */
#include "lib/provider/cnoq.h"
#include "lib/provider/evq.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "emu/log.h"

#define CNO_ERR(type) ((DAT_RETURN)(DAT_CLASS_ERROR | (type)))

/* dat_cno_free waits this long for triggers still running on another
 * thread (normally microseconds; an agent callback is consumer code). */
#define CNOQ_FINI_WAIT_MS 10000

/* Every CNO, so that invoking an agent can disassociate it from all CNOs
 * that hold it (spec L2960). Lock order: cnoq_list_mu before any c->mu;
 * nobody takes cnoq_list_mu while holding a c->mu. */
static pthread_mutex_t cnoq_list_mu = PTHREAD_MUTEX_INITIALIZER;
static struct sd_cnoq *cnoq_list;

static void deadline_after_us(struct timespec *ts, DAT_TIMEOUT us)
{
    clock_gettime(CLOCK_MONOTONIC, ts);
    ts->tv_sec += us / 1000000u;
    ts->tv_nsec += (long)(us % 1000000u) * 1000;
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000L;
    }
}

static bool agent_valid(DAT_OS_WAIT_PROXY_AGENT a)
{
    /* Half-NULL agents are the "invalid agent" of spec L3004/L3213: a
     * function without data is fine, data without a function is not. */
    return a.proxy_agent_func != NULL || a.instance_data == NULL;
}

static int common_init(struct sd_cnoq *c)
{
    memset(c, 0, sizeof(*c));
    c->fd = c->fd_w = c->fd_priv = -1;
    pthread_condattr_t ca;
    if (pthread_condattr_init(&ca))
        return -1;
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    if (pthread_mutex_init(&c->mu, NULL)) {
        pthread_condattr_destroy(&ca);
        return -1;
    }
    if (pthread_cond_init(&c->cv, &ca)) {
        pthread_mutex_destroy(&c->mu);
        pthread_condattr_destroy(&ca);
        return -1;
    }
    if (pthread_cond_init(&c->idle_cv, &ca)) {
        pthread_cond_destroy(&c->cv);
        pthread_mutex_destroy(&c->mu);
        pthread_condattr_destroy(&ca);
        return -1;
    }
    pthread_condattr_destroy(&ca);
    return 0;
}

static void list_add(struct sd_cnoq *c)
{
    pthread_mutex_lock(&cnoq_list_mu);
    c->prev_agent = NULL;
    c->next_agent = cnoq_list;
    if (cnoq_list)
        cnoq_list->prev_agent = c;
    cnoq_list = c;
    pthread_mutex_unlock(&cnoq_list_mu);
}

static void list_del(struct sd_cnoq *c)
{
    pthread_mutex_lock(&cnoq_list_mu);
    if (c->prev_agent)
        c->prev_agent->next_agent = c->next_agent;
    else
        cnoq_list = c->next_agent;
    if (c->next_agent)
        c->next_agent->prev_agent = c->prev_agent;
    c->next_agent = c->prev_agent = NULL;
    pthread_mutex_unlock(&cnoq_list_mu);
}

DAT_RETURN sd_cnoq_init(struct sd_cnoq *c, DAT_OS_WAIT_PROXY_AGENT agent)
{
    if (!agent_valid(agent))
        return CNO_ERR(DAT_INVALID_PARAMETER);
    if (common_init(c))
        return CNO_ERR(DAT_INSUFFICIENT_RESOURCES);
    c->agent = agent;
    list_add(c);
    return DAT_SUCCESS;
}

DAT_RETURN sd_cnoq_init_fd(struct sd_cnoq *c, int *fd_out)
{
    if (!fd_out)
        return CNO_ERR(DAT_INVALID_PARAMETER);
    if (common_init(c))
        return CNO_ERR(DAT_INSUFFICIENT_RESOURCES);
    /* A datagram socketpair rather than an eventfd: read() must return the
     * latest triggering EVD handle (spec L3268), and one datagram is one
     * handle however large the consumer's buffer is. */
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, sv))
        goto fail;
    int priv = fcntl(sv[0], F_DUPFD_CLOEXEC, 0);
    struct stat st;
    if (priv < 0 || fstat(sv[0], &st)) {
        if (priv >= 0)
            close(priv);
        close(sv[0]);
        close(sv[1]);
        goto fail;
    }
    c->fd = sv[0];
    c->fd_w = sv[1];
    c->fd_priv = priv;
    c->fd_dev = st.st_dev;
    c->fd_ino = st.st_ino;
    list_add(c);
    *fd_out = sv[0];
    return DAT_SUCCESS;
fail:
    pthread_cond_destroy(&c->idle_cv);
    pthread_cond_destroy(&c->cv);
    pthread_mutex_destroy(&c->mu);
    return CNO_ERR(DAT_INSUFFICIENT_RESOURCES);
}

/* Is the consumer's descriptor still our socket? After the consumer closes
 * it the number may be reused for anything; our private dup keeps the
 * socket (and so its inode) alive, which makes the comparison exact. */
static bool fd_still_ours(const struct sd_cnoq *c)
{
    struct stat st;
    if (c->fd < 0 || fstat(c->fd, &st))
        return false;
    return st.st_dev == c->fd_dev && st.st_ino == c->fd_ino;
}

DAT_RETURN sd_cnoq_fini(struct sd_cnoq *c)
{
    pthread_mutex_lock(&c->mu);
    if (c->waiters > 0) {
        pthread_mutex_unlock(&c->mu);
        return CNO_ERR(DAT_INVALID_STATE) | DAT_INVALID_STATE_CNO_IN_USE;
    }
    struct timespec dl;
    deadline_after_us(&dl, CNOQ_FINI_WAIT_MS * 1000u);
    while (c->inflight > 0) {
        if (pthread_cond_timedwait(&c->idle_cv, &c->mu, &dl) == ETIMEDOUT) {
            SD_ERR("cno", "free: %d trigger(s) still running after %d ms",
                   c->inflight, CNOQ_FINI_WAIT_MS);
            pthread_mutex_unlock(&c->mu);
            return CNO_ERR(DAT_INVALID_STATE) | DAT_INVALID_STATE_CNO_IN_USE;
        }
    }
    pthread_mutex_unlock(&c->mu);
    list_del(c);
    if (c->fd_w >= 0) {
        if (fd_still_ours(c)) /* spec L3100: free closes the consumer's fd */
            close(c->fd);
        close(c->fd_w);
        close(c->fd_priv);
    }
    pthread_cond_destroy(&c->idle_cv);
    pthread_cond_destroy(&c->cv);
    pthread_mutex_destroy(&c->mu);
    return DAT_SUCCESS;
}

DAT_RETURN sd_cnoq_wait(struct sd_cnoq *c, DAT_TIMEOUT timeout, DAT_EVD_HANDLE *evd)
{
    if (!evd)
        return CNO_ERR(DAT_INVALID_PARAMETER) | DAT_INVALID_ARG3;
    DAT_RETURN rc;
    pthread_mutex_lock(&c->mu);
    /* A trigger with nobody waiting is remembered (spec L2874). */
    if (c->pending) {
        c->pending = false;
        *evd = c->pending_evd;
        pthread_mutex_unlock(&c->mu);
        return DAT_SUCCESS;
    }
    if (timeout == 0) {
        pthread_mutex_unlock(&c->mu);
        *evd = DAT_HANDLE_NULL;
        return CNO_ERR(DAT_QUEUE_EMPTY); /* spec L3129, L3143 */
    }
    /* It may sleep: leases this thread holds go back to the engine first
     * (unlocked: they take other locks). A trigger meanwhile is kept. */
    pthread_mutex_unlock(&c->mu);
    sd_evq_thread_idle(NULL);
    pthread_mutex_lock(&c->mu);
    struct timespec dl;
    bool infinite = timeout == DAT_TIMEOUT_INFINITE;
    if (!infinite)
        deadline_after_us(&dl, timeout);
    unsigned long gen = c->bcast_gen;
    c->waiters++;
    for (;;) {
        if (c->bcast_gen != gen) {
            rc = c->bcast_rc;
            *evd = DAT_HANDLE_NULL;
            break;
        }
        if (c->tokens > 0) {
            c->tokens--;
            *evd = c->token_evd;
            rc = DAT_SUCCESS;
            break;
        }
        if (c->pending) {
            c->pending = false;
            *evd = c->pending_evd;
            rc = DAT_SUCCESS;
            break;
        }
        int e = infinite ? pthread_cond_wait(&c->cv, &c->mu)
                         : pthread_cond_timedwait(&c->cv, &c->mu, &dl);
        if (e == ETIMEDOUT && c->bcast_gen == gen && c->tokens == 0 && !c->pending) {
            rc = CNO_ERR(DAT_QUEUE_EMPTY);
            *evd = DAT_HANDLE_NULL;
            break;
        }
    }
    c->waiters--;
    /* A trigger aimed at a waiter that left by timeout must not be lost. */
    if (c->tokens > c->waiters) {
        c->pending = true;
        c->pending_evd = c->token_evd;
        c->tokens = c->waiters;
    }
    pthread_mutex_unlock(&c->mu);
    return rc;
}

static void fd_post_locked(struct sd_cnoq *c, DAT_EVD_HANDLE evd)
{
    if (c->fd_w < 0)
        return;
    /* Coalesce: at most one handle waits in the socket, and it is the
     * latest (spec L3268). The drain is bounded by what can be queued. */
    char buf[64];
    for (int i = 0; i < 256; i++) {
        if (recv(c->fd_priv, buf, sizeof(buf), MSG_DONTWAIT) < 0)
            break;
    }
    if (send(c->fd_w, &evd, sizeof(evd), MSG_DONTWAIT | MSG_NOSIGNAL) < 0)
        SD_DBG("cno", "fd trigger: send: %s", strerror(errno));
}

static void agent_disassociate_all(DAT_OS_WAIT_PROXY_AGENT a)
{
    pthread_mutex_lock(&cnoq_list_mu);
    for (struct sd_cnoq *o = cnoq_list; o; o = o->next_agent) {
        pthread_mutex_lock(&o->mu);
        if (o->agent.proxy_agent_func == a.proxy_agent_func &&
            o->agent.instance_data == a.instance_data) {
            o->agent.proxy_agent_func = NULL;
            o->agent.instance_data = NULL;
        }
        pthread_mutex_unlock(&o->mu);
    }
    pthread_mutex_unlock(&cnoq_list_mu);
}

static void agent_invoke(DAT_OS_WAIT_PROXY_AGENT a, DAT_EVD_HANDLE evd)
{
    /* Disassociate first, so that an agent re-armed from inside its own
     * callback stays armed (spec L2779: rearm for each use). */
    agent_disassociate_all(a);
    a.proxy_agent_func(a.instance_data, evd);
}

void sd_cnoq_trigger(struct sd_cnoq *c, DAT_EVD_HANDLE evd)
{
    pthread_mutex_lock(&c->mu);
    c->last_evd = evd;
    if (c->waiters > c->tokens) {
        c->tokens++;
        c->token_evd = evd;
        pthread_cond_signal(&c->cv);
    } else {
        c->pending = true;
        c->pending_evd = evd;
    }
    fd_post_locked(c, evd);
    DAT_OS_WAIT_PROXY_AGENT a = c->agent;
    c->agent.proxy_agent_func = NULL;
    c->agent.instance_data = NULL;
    c->inflight++; /* the agent call below runs unlocked */
    pthread_mutex_unlock(&c->mu);
    if (a.proxy_agent_func)
        agent_invoke(a, evd);
    sd_cnoq_release(c);
}

void sd_cnoq_hold(struct sd_cnoq *c)
{
    pthread_mutex_lock(&c->mu);
    c->inflight++;
    pthread_mutex_unlock(&c->mu);
}

void sd_cnoq_release(struct sd_cnoq *c)
{
    pthread_mutex_lock(&c->mu);
    if (--c->inflight == 0)
        pthread_cond_broadcast(&c->idle_cv);
    pthread_mutex_unlock(&c->mu);
}

void sd_cnoq_wake_all(struct sd_cnoq *c, DAT_RETURN rc)
{
    pthread_mutex_lock(&c->mu);
    c->bcast_gen++;
    c->bcast_rc = rc;
    c->tokens = 0;
    c->pending = false;
    pthread_cond_broadcast(&c->cv);
    fd_post_locked(c, DAT_HANDLE_NULL);
    DAT_OS_WAIT_PROXY_AGENT a = c->agent;
    c->agent.proxy_agent_func = NULL;
    c->agent.instance_data = NULL;
    c->inflight++;
    pthread_mutex_unlock(&c->mu);
    if (a.proxy_agent_func)
        agent_invoke(a, DAT_HANDLE_NULL);
    sd_cnoq_release(c);
}

DAT_EVD_HANDLE sd_cnoq_last(struct sd_cnoq *c)
{
    pthread_mutex_lock(&c->mu);
    DAT_EVD_HANDLE e = c->last_evd;
    pthread_mutex_unlock(&c->mu);
    return e;
}

DAT_RETURN sd_cnoq_set_agent(struct sd_cnoq *c, DAT_OS_WAIT_PROXY_AGENT agent)
{
    if (!agent_valid(agent))
        return CNO_ERR(DAT_INVALID_PARAMETER) | DAT_INVALID_ARG2;
    pthread_mutex_lock(&c->mu);
    if (c->fd_w >= 0) {
        pthread_mutex_unlock(&c->mu);
        return CNO_ERR(DAT_INVALID_PARAMETER) | DAT_INVALID_ARG2;
    }
    c->agent = agent;
    pthread_mutex_unlock(&c->mu);
    return DAT_SUCCESS;
}

void sd_cnoq_query(struct sd_cnoq *c, DAT_PROXY_TYPE *type,
                   DAT_OS_WAIT_PROXY_AGENT *agent, int *fd)
{
    pthread_mutex_lock(&c->mu);
    DAT_PROXY_TYPE t = DAT_PROXY_TYPE_NONE;
    DAT_OS_WAIT_PROXY_AGENT a = c->agent;
    int f = -1;
    if (c->fd_w >= 0) {
        if (fd_still_ours(c)) {
            t = DAT_PROXY_TYPE_FD;
            f = c->fd;
        }
    } else if (a.proxy_agent_func) {
        t = DAT_PROXY_TYPE_AGENT;
    }
    pthread_mutex_unlock(&c->mu);
    if (type)
        *type = t;
    if (agent) {
        if (t == DAT_PROXY_TYPE_AGENT) {
            *agent = a;
        } else {
            agent->instance_data = NULL;
            agent->proxy_agent_func = NULL;
        }
    }
    if (fd)
        *fd = f;
}

int sd_cnoq_waiters(struct sd_cnoq *c)
{
    pthread_mutex_lock(&c->mu);
    int n = c->waiters;
    pthread_mutex_unlock(&c->mu);
    return n;
}
