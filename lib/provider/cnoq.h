/* softdat: the CNO wait core — the semantics behind dat_cno_wait,
 * dat_cno_trigger (the query), the OS wait proxy agent and the CNO file
 * descriptor, independent of handles. One struct sd_cnoq lives inside each
 * CNO object; cno.c owns the handle, validation and the IA/EVD references.
 *
 * Semantics and spec line references: docs/events.md. */
#ifndef SOFTDAT_PROVIDER_CNOQ_H
#define SOFTDAT_PROVIDER_CNOQ_H

#include <pthread.h>
#include <stdbool.h>
#include <sys/types.h>

#include <dat2/udat.h>

/* All fields are private to cnoq.c; the struct is public only so that the
 * CNO object can embed it (no separate allocation). */
struct sd_cnoq {
    pthread_mutex_t mu;
    pthread_cond_t cv;          /* CLOCK_MONOTONIC */
    pthread_cond_t idle_cv;     /* in-flight triggers drained */
    int waiters;                /* threads blocked in sd_cnoq_wait */
    int tokens;                 /* triggers handed to blocked waiters, not yet taken */
    DAT_EVD_HANDLE token_evd;   /* EVD the waiters woken by tokens report */
    bool pending;               /* triggered with no waiter: next wait returns at once */
    DAT_EVD_HANDLE pending_evd;
    DAT_EVD_HANDLE last_evd;    /* latest triggering EVD (dat_cno_trigger, fd read) */
    unsigned long bcast_gen;    /* bumped by sd_cnoq_wake_all */
    DAT_RETURN bcast_rc;
    int inflight;               /* sd_cnoq_hold() without sd_cnoq_release() */
    DAT_OS_WAIT_PROXY_AGENT agent; /* one-shot; cleared when invoked */
    int fd;                     /* consumer's read end (-1: none) */
    int fd_w;                   /* our write end */
    int fd_priv;                /* our dup of the read end, for coalescing */
    dev_t fd_dev;               /* identity of the read end, to spot a */
    ino_t fd_ino;               /* consumer close + fd number reuse */
    struct sd_cnoq *next_agent; /* global list of CNOs (agent disassociation) */
    struct sd_cnoq *prev_agent;
};

/* Initialise. agent may be DAT_OS_WAIT_PROXY_AGENT_NULL (both fields NULL).
 * An agent with exactly one NULL field is DAT_INVALID_PARAMETER.
 * Returns DAT_SUCCESS, DAT_INVALID_PARAMETER or DAT_INSUFFICIENT_RESOURCES. */
DAT_RETURN sd_cnoq_init(struct sd_cnoq *c, DAT_OS_WAIT_PROXY_AGENT agent);

/* Initialise a CNO with a file descriptor (dat_cno_fd_create). *fd_out is the
 * read end handed to the consumer: readable after every trigger; read()
 * returns sizeof(DAT_EVD_HANDLE) bytes, the latest triggering EVD, and
 * clears readiness. Returns DAT_SUCCESS or DAT_INSUFFICIENT_RESOURCES. */
DAT_RETURN sd_cnoq_init_fd(struct sd_cnoq *c, int *fd_out);

/* Tear down (dat_cno_free). DAT_INVALID_STATE, with nothing changed, when
 * a thread is blocked in sd_cnoq_wait. Otherwise waits (bounded) for
 * in-flight triggers to leave, closes the descriptor if the consumer has
 * not closed it already, and returns DAT_SUCCESS. Referencing EVDs are the
 * caller's check. */
DAT_RETURN sd_cnoq_fini(struct sd_cnoq *c);

/* dat_cno_wait. timeout in µs, 0 = poll, DAT_TIMEOUT_INFINITE = forever.
 *   DAT_SUCCESS        *evd = an EVD that triggered (a hint)
 *   DAT_QUEUE_EMPTY    timed out, *evd = DAT_HANDLE_NULL
 *   rc of sd_cnoq_wake_all, *evd = DAT_HANDLE_NULL
 *   DAT_INVALID_PARAMETER  evd == NULL
 * Any number of concurrent waiters. */
DAT_RETURN sd_cnoq_wait(struct sd_cnoq *c, DAT_TIMEOUT timeout, DAT_EVD_HANDLE *evd);

/* Trigger (from an EVD's notification, or directly). Wakes one blocked
 * waiter, or remembers the trigger for the next wait; records evd as the
 * latest; makes the fd readable; then, outside the lock, invokes and
 * disassociates the proxy agent (from every CNO holding the same agent). */
void sd_cnoq_trigger(struct sd_cnoq *c, DAT_EVD_HANDLE evd);

/* Keep c alive across a trigger made after the caller dropped its own
 * lock: hold under the lock that guards the caller's pointer to c, trigger,
 * then release. sd_cnoq_fini waits for holds to be released. */
void sd_cnoq_hold(struct sd_cnoq *c);
void sd_cnoq_release(struct sd_cnoq *c);

/* Unblock every current waiter with rc and a NULL EVD, and invoke the
 * agent with a NULL EVD (IA destroyed / all EVDs freed, spec L3135).
 * Does not leave a pending trigger behind. */
void sd_cnoq_wake_all(struct sd_cnoq *c, DAT_RETURN rc);

/* dat_cno_trigger (a query): the latest EVD that triggered, or NULL. */
DAT_EVD_HANDLE sd_cnoq_last(struct sd_cnoq *c);

/* dat_cno_modify_agent. DAT_INVALID_PARAMETER for a half-NULL agent or on
 * an fd CNO (the fd is its permanent proxy, spec L2960). */
DAT_RETURN sd_cnoq_set_agent(struct sd_cnoq *c, DAT_OS_WAIT_PROXY_AGENT agent);

/* dat_cno_query: proxy type and value. The fd is reported until the
 * consumer closes it (then DAT_PROXY_TYPE_NONE, spec L3270). */
void sd_cnoq_query(struct sd_cnoq *c, DAT_PROXY_TYPE *type,
                   DAT_OS_WAIT_PROXY_AGENT *agent, int *fd);

/* Threads currently blocked in sd_cnoq_wait (dat_cno_free's check). */
int sd_cnoq_waiters(struct sd_cnoq *c);

#endif
