/* softdat: the event queue core — the semantics behind one DAT EVD
 * (dat_evd_wait/dequeue/post_se/resize/enable/disable/set_unwaitable and
 * the overflow rules), independent of handles and of the network. One
 * struct sd_evq lives inside each EVD object; evd.c owns the handle,
 * argument validation, flag checks and the IA/CNO references.
 *
 * Producers (engine thread, posting threads, dat_evd_post_se) call
 * sd_evq_post; consumers call sd_evq_dequeue / sd_evq_wait. Every function
 * is thread safe. No allocation after sd_evq_init except in sd_evq_resize.
 * Callbacks (overflow, CNO trigger, progress) run without the queue lock.
 *
 * Semantics and spec line references: docs/events.md. */
#ifndef SOFTDAT_PROVIDER_EVQ_H
#define SOFTDAT_PROVIDER_EVQ_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include <dat2/udat.h>

struct sd_cnoq;
struct sd_evq;

/* The event stream an event comes from: it decides what a full queue
 * does (spec L2886-2902). */
enum sd_evq_kind {
    SD_EVQ_DTO,      /* DTO and RMR-bind completions. Full: dropped,
                      * DAT_QUEUE_FULL, overflow callback; the caller
                      * breaks the connection whose completion was lost */
    SD_EVQ_CR,       /* connection requests. Full: DAT_QUEUE_FULL, no
                      * callback; the caller rejects the peer itself */
    SD_EVQ_CONN,     /* connection events. Full: event lost, DAT_QUEUE_FULL,
                      * overflow callback; EVD stays operational */
    SD_EVQ_ASYNC,    /* IA async errors and HA events. The last slot is kept
                      * for this queue's own overflow (catastrophic) */
    SD_EVQ_SOFTWARE, /* dat_evd_post_se. Full: DAT_QUEUE_FULL, nothing else */
    SD_EVQ_EXT,      /* extension events: treated like SD_EVQ_DTO */
};

/* sd_evq_post flags */
#define SD_EVQ_F_NOTIFY 0x1u   /* DTO/EXT only: a notification event (the
                                * other kinds always are) */
#define SD_EVQ_F_RESERVED 0x2u /* uses a slot taken by sd_evq_reserve:
                                * cannot overflow */

/* De-facto configuration of the EVD (spec L2753-2756): decided by the EP
 * completion streams attached; evd.c/ep.c keep it up to date. */
enum sd_evq_config {
    SD_EVQ_CFG_THRESHOLD, /* default: every event counts toward threshold */
    SD_EVQ_CFG_NOTIFY,    /* an EP stream uses DAT_COMPLETION_UNSIGNALLED_FLAG */
    SD_EVQ_CFG_SOLICITED, /* an EP stream uses DAT_COMPLETION_SOLICITED_WAIT_FLAG */
};

/* Called (unlocked) when an event was lost to a full queue and an
 * asynchronous DAT_ASYNC_ERROR_EVD_OVERFLOW must be raised for this EVD.
 * Coalesced: at most once until the queue has been drained empty.
 * kind == SD_EVQ_ASYNC means this queue (the async EVD) overflowed: the
 * catastrophic event is already queued in it; post nothing more. */
typedef void (*sd_evq_overflow_fn)(void *arg, struct sd_evq *q, enum sd_evq_kind kind);

/* "Consumer wants progress" (architecture §6): called unlocked by a waiter
 * repeatedly during a bounded poll window (at least once before it first
 * sleeps), and once by dequeue/wait(0) on a queue that cannot satisfy
 * them; only while armed (sd_evq_arm_progress). Must not block.
 * Return > 0: made progress, 0: nothing to do, < 0: stop polling. */
typedef int (*sd_evq_progress_fn)(void *arg, struct sd_evq *q);

/* "Sleep on the data itself": called unlocked by a waiter whose spin
 * window ran out, instead of sleeping on its condition variable. It blocks
 * in poll(2) on the sockets the progress hook reads and on wake_fd (an
 * eventfd the queue writes when an event arrives for the waiter), at most
 * timeout_ms, so that arriving data wakes the waiter itself rather than
 * the provider thread, which then wakes the waiter: one wake-up per
 * message instead of two. Return > 0: woken by a descriptor, 0: timed
 * out, < 0: cannot sleep this way now (the waiter uses its condition
 * variable). Same arg as the progress hook. */
typedef int (*sd_evq_sleep_fn)(void *arg, struct sd_evq *q, int wake_fd, int timeout_ms);

/* The waiter that slept in sleep_fn returns: a lease taken for a long
 * sleep is cut back to what a polling consumer holds, so that the provider
 * thread resumes soon if the application does not call DAT again. */
typedef void (*sd_evq_sleep_done_fn)(void *arg);

/* A counter of the input the calling thread's progress calls have
 * processed (frames read from the sockets), whether or not it made
 * events: a waiter keeps spinning while input keeps coming. */
typedef uint64_t (*sd_evq_input_fn)(void);

/* Inside a progress hook: true when it was called by dat_evd_dequeue or a
 * zero-timeout dat_evd_wait (a polling consumer), or by the spin window of
 * a waiter that will sleep on its sockets (sd_evq_set_sleep); false in the
 * spin window of one that will sleep on its condition variable. */
bool sd_evq_consumer_polling(void);
/* Inside a progress hook called as a poller: true when the caller is a
 * waiter's spin window (it will sleep on the sockets if it can), not
 * dat_evd_dequeue. */
bool sd_evq_consumer_wait_spinning(void);
/* Inside a progress hook: true for the last call of a waiter that is about
 * to sleep (it should give back whatever it took for polling). */
bool sd_evq_consumer_sleeping(void);

/* Private to evq.c; public so that the EVD can embed it. */
struct sd_evq {
    pthread_mutex_t mu;
    pthread_cond_t cv;           /* waiter; CLOCK_MONOTONIC */
    DAT_EVENT *ring;
    DAT_COUNT cap;               /* = evd_qlen */
    DAT_COUNT head;
    atomic_int count;            /* written under mu; read unlocked */
    DAT_COUNT reserved;
    DAT_EVD_HANDLE self;         /* stamped into every event */
    enum sd_evq_config cfg;
    bool enabled;
    bool waitable;
    bool aborted;
    atomic_bool waiter;          /* a thread is blocked in sd_evq_wait */
    DAT_COUNT w_threshold;
    bool w_wake;                 /* notification arrived for the waiter */
    DAT_RETURN w_rc;             /* != 0: waiter must return this */
    bool ovf_reported;           /* coalesces overflow callbacks */
    bool catastrophic;           /* async queue: own overflow queued */
    unsigned long dropped;
    struct sd_cnoq *cno;
    sd_evq_overflow_fn on_overflow;
    void *overflow_arg;
    sd_evq_progress_fn progress;
    void *progress_arg;
    unsigned progress_us;
    unsigned spin_fail;          /* waits in a row whose spin did not pay */
    unsigned spin_skip;          /* waits left that do not spin */
    atomic_bool has_progress;    /* hook set and armed */
    sd_evq_sleep_fn sleep;       /* NULL: waiters sleep on cv only */
    sd_evq_sleep_done_fn sleep_done;
    sd_evq_input_fn input;
    int wake_fd;                 /* eventfd for a waiter in sleep (-1: none; closed when disarmed) */
    bool w_in_sleep;             /* the waiter is in the sleep hook */
};

struct sd_evq_info {
    DAT_COUNT qlen;     /* capacity (dat_evd_query evd_qlen) */
    DAT_COUNT count;    /* queued events */
    DAT_COUNT reserved; /* slots held by sd_evq_reserve */
    int state;          /* DAT_EVD_STATE_* bits, one per band */
    bool waiter;
    unsigned long dropped; /* events lost to overflow since init */
};

/* Create with capacity qlen (1..SD_MAX_EVD_QLEN, else
 * DAT_INVALID_PARAMETER; DAT_INSUFFICIENT_RESOURCES on ENOMEM). self is
 * the EVD handle stamped into events. Starts enabled, waitable, threshold
 * config, no CNO, no callbacks (spec L3330). */
DAT_RETURN sd_evq_init(struct sd_evq *q, DAT_COUNT qlen, DAT_EVD_HANDLE self);

/* Destroy. DAT_INVALID_STATE (nothing changed) while a waiter is blocked;
 * queued events are discarded (spec L3375). */
DAT_RETURN sd_evq_fini(struct sd_evq *q);

/* Producer side. Copies *ev, sets its evd_handle to self. Returns
 * DAT_SUCCESS or DAT_QUEUE_FULL (not queued; see enum sd_evq_kind).
 * Wakes a satisfied waiter; else, if the event is notifiable, the EVD is
 * enabled and a CNO is attached, triggers the CNO. */
DAT_RETURN sd_evq_post(struct sd_evq *q, const DAT_EVENT *ev,
                       enum sd_evq_kind kind, unsigned flags);

/* Reserve n slots for events that will be posted with SD_EVQ_F_RESERVED
 * (e.g. completions of a DTO being posted). DAT_QUEUE_FULL if
 * count + reserved + n > qlen. Unreserve returns unused slots. */
DAT_RETURN sd_evq_reserve(struct sd_evq *q, DAT_COUNT n);
void sd_evq_unreserve(struct sd_evq *q, DAT_COUNT n);

/* dat_evd_dequeue: DAT_SUCCESS, DAT_QUEUE_EMPTY, or DAT_INVALID_STATE
 * while a waiter is blocked. */
DAT_RETURN sd_evq_dequeue(struct sd_evq *q, DAT_EVENT *ev);

/* dat_evd_wait. timeout in µs (0 = poll, DAT_TIMEOUT_INFINITE). nmore may
 * be NULL. Returns DAT_SUCCESS, DAT_TIMEOUT_EXPIRED (nmore set, no event
 * taken), DAT_INVALID_PARAMETER (threshold < 1 or > qlen),
 * DAT_INVALID_STATE (another waiter / unwaitable / set unwaitable while
 * blocked / threshold != 1 on a notify-or-solicited EVD), DAT_ABORT. */
DAT_RETURN sd_evq_wait(struct sd_evq *q, DAT_TIMEOUT timeout, DAT_COUNT threshold,
                       DAT_EVENT *ev, DAT_COUNT *nmore);

/* dat_evd_resize: DAT_INVALID_PARAMETER (qlen < 1 or > SD_MAX_EVD_QLEN),
 * DAT_INVALID_STATE (qlen < queued + reserved, or a blocked waiter's
 * threshold > qlen), DAT_INSUFFICIENT_RESOURCES. Keeps every event. */
DAT_RETURN sd_evq_resize(struct sd_evq *q, DAT_COUNT qlen);

/* dat_evd_enable / dat_evd_disable: gate CNO triggering only. */
void sd_evq_set_enabled(struct sd_evq *q, bool enabled);
/* dat_evd_clear_unwaitable (true) / dat_evd_set_unwaitable (false): the
 * latter wakes a blocked waiter, which returns DAT_INVALID_STATE. */
void sd_evq_set_waitable(struct sd_evq *q, bool waitable);
/* IA closed (abrupt): the waiter and every later wait get DAT_ABORT. */
void sd_evq_abort(struct sd_evq *q);

void sd_evq_set_config(struct sd_evq *q, enum sd_evq_config cfg);
/* dat_evd_modify_cno; returns the previous CNO. A trigger already under
 * way may still reach the old CNO (spec L3462); sd_cnoq_fini waits for it. */
struct sd_cnoq *sd_evq_set_cno(struct sd_evq *q, struct sd_cnoq *cno);
void sd_evq_set_overflow_cb(struct sd_evq *q, sd_evq_overflow_fn fn, void *arg);
/* poll_us: how long a waiter keeps calling fn before sleeping (0: once,
 * right before the first sleep). Arms the hook when fn != NULL.
 * Adaptive: after SD_EVQ_SPIN_FAILS waits in a row whose window ran out
 * (the waiter had to sleep), the next SD_EVQ_SPIN_SKIP waits call fn once
 * and sleep. */
#define SD_EVQ_SPIN_FAILS 4
#define SD_EVQ_SPIN_SKIP 64
void sd_evq_set_progress(struct sd_evq *q, sd_evq_progress_fn fn, void *arg,
                         unsigned poll_us);
/* Arm/disarm a set hook without the lock (lock-free: the empty dequeue
 * fast path reads it): disarmed, dequeue, wait(0) and waiters behave as if
 * there were no hook. The owner disarms while it has nothing to progress. */
void sd_evq_arm_progress(struct sd_evq *q, bool armed);
/* Let waiters sleep in fn (see sd_evq_sleep_fn) instead of on their
 * condition variable, in chunks (the hook's sockets are leased to the
 * sleeper for that long): SD_EVQ_SLEEP_CHUNK_MS, doubling after each chunk
 * that brought nothing up to SD_EVQ_SLEEP_CHUNK_MAX_MS, so that an idle
 * waiter wakes a few times a second only. done runs when a waiter leaves
 * after a chunk longer than the first. input (may be NULL): a waiter
 * whose progress calls process small frames without an event for it (a
 * stream of small RDMA Writes into its memory, whose probes it answers;
 * emu_qp_thread_rx_small_fpdus: large ones do not count) spins on for
 * another poll_us after each such call, and after a wake-up by input,
 * instead of sleeping between every two bursts: each sleep costs a
 * wake-up on the sending side's system call and a context switch here. */
#define SD_EVQ_SLEEP_CHUNK_MS 2
#define SD_EVQ_SLEEP_CHUNK_MAX_MS 64
void sd_evq_set_sleep(struct sd_evq *q, sd_evq_sleep_fn fn, sd_evq_sleep_done_fn done,
                      sd_evq_input_fn input);

/* A thread is about to sleep in an EVD wait (its queue's progress
 * argument) or a CNO wait (NULL): the hook (lib/provider/progress.c) gives
 * back the polling leases it still holds on other connections, so that the
 * engine reads them again at once. Called with no lock held. */
typedef void (*sd_evq_idle_fn)(void *progress_arg);
void sd_evq_set_idle_hook(sd_evq_idle_fn fn);
void sd_evq_thread_idle(void *progress_arg);

void sd_evq_info(struct sd_evq *q, struct sd_evq_info *info);

/* dat_evd_dequeue's "nothing there": the bare type, without the error
 * class bit. Deployed consumers (Debian's dtest -p) poll with
 * `while (dat_evd_dequeue(...) == DAT_QUEUE_EMPTY)`, others with
 * DAT_GET_TYPE(); the bare value satisfies both. */
#define SD_EVQ_EMPTY ((DAT_RETURN)DAT_QUEUE_EMPTY)

#endif
