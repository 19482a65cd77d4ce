/* softdat consumer-driven receive progress (architecture §6, docs/perf.md
 * "Latency design").
 *
 * The engine thread always makes progress (it keeps its fd watcher on every
 * connection). In addition, a consumer thread that waits in dat_evd_wait or
 * spins on dat_evd_dequeue runs the receive side of the connections whose
 * completions land on that EVD (emu_qp_progress: non-blocking, try-locks
 * the QP's receive lock), so that a ping-pong does not pay the
 * engine -> consumer wake-up.
 *
 * Each EVD that can receive DTO completions embeds a struct
 * sd_progress_set: the QPs of the connected EPs whose recv_evd or
 * request_evd it is. Registration (sd_progress_add) happens when the QP is
 * attached to its established connection and the EP is CONNECTED (ep_cm.c:
 * a receive a consumer completes may be answered at once); removal
 * (sd_progress_remove) on the terminal event and at EP free, always before
 * the QP can be destroyed. Removal waits for a consumer pass over that set
 * to finish (a pass never blocks on anything the remover holds: engine
 * callbacks run with no emu lock held), so after it returns no consumer
 * thread touches the QP. The EVD's queue only asks for progress while its
 * set is non-empty, so the empty-queue dequeue fast path stays two relaxed
 * loads when nothing is connected. */
#ifndef SOFTDAT_PROVIDER_PROGRESS_H
#define SOFTDAT_PROVIDER_PROGRESS_H

#include <pthread.h>

#include "emu/lock.h"
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

struct sd_evd;
struct sd_ep;
struct sd_evq;
struct sd_prog_ent;

struct sd_progress_set {
    /* Guards the list. Held for a whole consumer pass (try-locked: a
     * second consumer skips instead of waiting) and by add/remove. */
    emu_lock_t mu;
    struct sd_prog_ent *head;
    atomic_int n; /* entries; read unlocked by the pass */
    bool leased;  /* (mu) a pass may have given leases not yet released: a
                     sleeping consumer's pass walks the set only then */
    /* While leased, the set is on a process-wide list (its own lock), so
     * that a thread about to sleep elsewhere finds the leases it holds
     * here (sd_progress_thread_idle). */
    struct sd_progress_set *lprev, *lnext;
};

/* Default spin window of dat_evd_wait, µs (docs/perf.md "Latency design");
 * SOFTDAT_POLL_US overrides it (0..SD_POLL_US_MAX, or "off": no consumer
 * progress at all, dequeue and wait(0) included). */
#define SD_POLL_US_DEFAULT 30u
/* How long one dat_evd_dequeue keeps the engine thread off the polled
 * connections' sockets (SOFTDAT_POLL_LEASE_US; 0 = never). */
#define SD_POLL_LEASE_US_DEFAULT 500u
#define SD_POLL_US_MAX 1000000u

void sd_progress_set_init(struct sd_progress_set *ps);
void sd_progress_set_fini(struct sd_progress_set *ps);

/* Wire an EVD's queue to its set (at EVD creation, before publish):
 * sd_evq_set_progress(sd_progress_evd_pass, evd, poll_us), disarmed until
 * a QP registers. */
void sd_progress_evd_init(struct sd_evd *evd);

/* The sd_evq_progress_fn of an EVD (arg = the EVD): one non-blocking
 * receive pass over its QPs. > 0: completions produced, 0: nothing (or
 * another consumer is in a pass), < 0: no QP registered. */
int sd_progress_evd_pass(void *arg, struct sd_evq *q);

/* The sd_evq_sleep_fn of an EVD: a waiter sleeps in poll(2) on the
 * sockets of its QPs (at most SD_SLEEP_MAX_QPS, each leased to it so that
 * the engine thread stays off them, emu_qp_sleep_fd) and on wake_fd. */
int sd_progress_evd_sleep(void *arg, struct sd_evq *q, int wake_fd, int timeout_ms);
/* Its sd_evq_sleep_done_fn: the leases end within SOFTDAT_POLL_LEASE_US. */
void sd_progress_evd_sleep_done(void *arg);

/* The calling thread is about to sleep on a condition variable (an EVD or
 * CNO wait) or in another EVD's sleep hook: every lease it still holds on
 * the QPs of other sets than except's (NULL: all) ends now, and an engine
 * parked behind one reads again at once. Without this, a thread that
 * polled its DTO EVD and then waits for the connection EVD's event keeps
 * the engine off its sockets until the lease's end and the engine's next
 * look (up to 4 ms): a frame arriving meanwhile (a peer's placement probe)
 * would wait that long. Any thread, no lock held. */
void sd_progress_thread_idle(struct sd_evd *except);

/* ESTABLISHED, after emu_qp_attach: register ep->qp with ep->recv_evd and
 * ep->request_evd (once each). Idempotent. Any thread, no lock held. */
void sd_progress_add(struct sd_ep *ep);
/* Terminal event / EP free, before the QP is flushed or destroyed:
 * unregister ep everywhere and wait for consumer passes using it. Idempotent.
 * Must not be called from a progress pass. */
void sd_progress_remove(struct sd_ep *ep);

/* The spin window dat_evd_wait uses (SOFTDAT_POLL_US, read once at the
 * first DTO EVD). */
unsigned sd_progress_poll_us(void);

/* Process-wide counters, for tests and diagnostics. */
struct sd_progress_stats {
    uint64_t completions; /* completions produced by consumer passes */
    uint64_t registered;  /* (QP, EVD) registrations currently held */
    uint64_t sleeps;      /* waiters' sleeps in poll(2) on their sockets */
};
void sd_progress_get_stats(struct sd_progress_stats *out);

#endif
