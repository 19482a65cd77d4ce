/* The soft RNIC's progress engine: one thread running one libevent
 * event_base per open IA. It owns sockets, timers and deferred work, and
 * sleeps in epoll when idle (no spinning).
 *
 * Threads: every callback registered here (jobs, timers, fd watchers,
 * doorbells, destroy hooks) runs on the engine thread, with no emu lock
 * held. The functions below may be called from any thread unless noted.
 *
 * Lifetime: emu_engine_destroy() runs the jobs queued before it, then the
 * destroy hooks (newest first; emu/conn uses them to close every socket and
 * free its objects), stops the thread and frees every timer, watcher and
 * doorbell still registered. Handles to such leftovers are dead afterwards.
 * Nothing survives: the library can be unloaded and reloaded.
 *
 * Deadlock rules (see docs/emu-design.md):
 *  - emu_engine_run_sync() runs fn inline when called on the engine thread;
 *    from another thread it blocks until fn has run, so the caller must
 *    not hold a lock that any engine callback takes.
 *  - emu_timer_cancel/free and emu_fdw_disable/free from another thread
 *    wait for a callback of that object that is running right now; same
 *    rule.
 *  - emu_engine_destroy() must not be called on the engine thread
 *    (-EDEADLK). */
#ifndef SOFTDAT_EMU_ENGINE_H
#define SOFTDAT_EMU_ENGINE_H

#include <stdbool.h>
#include <stdint.h>

struct emu_engine;
struct event_base;

typedef void (*emu_fn)(void *arg);

/* Create an engine and start its thread. name (may be NULL) names the
 * thread for debuggers (at most 15 chars are kept). 0 or -errno.
 * First it grows the process's descriptor table to hold
 * min(RLIMIT_NOFILE, EMU_FD_TABLE_RESERVE) descriptors (no descriptor is
 * left open): later growth in a multi-threaded process waits for an RCU
 * grace period inside socket()/accept4() (engine.c). */
#define EMU_FD_TABLE_RESERVE 8192u
int emu_engine_create(const char *name, struct emu_engine **out);

/* Stop and free (see above). 0, or -EDEADLK when called on the engine
 * thread (nothing is done then). NULL is a no-op. */
int emu_engine_destroy(struct emu_engine *e);

/* The trace context of the engine's IA (docs/trace.md): its id and open
 * time, handed to every connection and UD endpoint the engine creates
 * afterwards (their frame records name the IA). Set once, before any. */
struct emu_engine_trace {
    uint32_t ia;
    uint64_t t0_ns;
};
void emu_engine_set_trace(struct emu_engine *e, const struct emu_engine_trace *t);
void emu_engine_get_trace(const struct emu_engine *e, struct emu_engine_trace *out);

/* True when the caller runs on e's engine thread. */
bool emu_engine_on_thread(const struct emu_engine *e);

/* Queue fn(arg) to run on the engine thread, FIFO with every other job.
 * Never runs fn inline, even on the engine thread. 0, -ESHUTDOWN once
 * destroy has begun (fn will never run), -ENOMEM. */
int emu_engine_run_async(struct emu_engine *e, emu_fn fn, void *arg);

/* Run fn(arg) on the engine thread and return when it has finished:
 * inline if already there, otherwise queued FIFO behind earlier jobs.
 * 0 or -ESHUTDOWN (fn was not run). */
int emu_engine_run_sync(struct emu_engine *e, emu_fn fn, void *arg);

/* The libevent base, for code that runs on the engine thread only. */
struct event_base *emu_engine_base(struct emu_engine *e);

/* Monotonic clock in microseconds. */
uint64_t emu_now_us(void);

/* ---- destroy hooks ----
 * An object that must be torn down with the engine embeds a hook. fn runs
 * on the engine thread during emu_engine_destroy(); it is removed from the
 * list before fn is called. add/del from any thread (del of a hook that
 * is not registered is a no-op). */
struct emu_engine_hook {
    struct emu_engine_hook *prev, *next;
    void (*fn)(struct emu_engine_hook *hook);
    bool linked;
};
int emu_engine_hook_add(struct emu_engine *e, struct emu_engine_hook *hook);
void emu_engine_hook_del(struct emu_engine *e, struct emu_engine_hook *hook);

/* ---- doorbells: allocation-free, coalescing wakeups ----
 * emu_doorbell_ring() from any thread makes fn(arg) run once on the engine
 * thread soon; rings before that run coalesce into one call. Meant for the
 * data path ("more work posted"), where run_async's malloc is not wanted. */
struct emu_doorbell;
struct emu_doorbell *emu_doorbell_new(struct emu_engine *e, emu_fn fn, void *arg);
void emu_doorbell_ring(struct emu_doorbell *d);
void emu_doorbell_free(struct emu_doorbell *d);

/* ---- one-shot timers ---- */
struct emu_timer;
struct emu_timer *emu_timer_new(struct emu_engine *e, emu_fn fn, void *arg);
/* (Re)arm: fires once, usec from now (a pending expiry is replaced). */
int emu_timer_arm(struct emu_timer *t, uint64_t usec);
/* Disarm; after return fn is neither pending nor running (unless called
 * from fn itself). No-op if not armed. */
void emu_timer_cancel(struct emu_timer *t);
bool emu_timer_pending(struct emu_timer *t);
void emu_timer_free(struct emu_timer *t);

/* ---- fd readiness watchers ----
 * One watcher per fd; read and write interest are enabled independently
 * and stay enabled (level-triggered) until disabled. fn gets the ready set.
 * The watcher never closes the fd. */
enum { EMU_EV_READ = 1u, EMU_EV_WRITE = 2u };
typedef void (*emu_fd_fn)(int fd, unsigned what, void *arg);
struct emu_fdw;
struct emu_fdw *emu_fdw_new(struct emu_engine *e, int fd, emu_fd_fn fn, void *arg);
int emu_fdw_enable(struct emu_fdw *w, unsigned what);
int emu_fdw_disable(struct emu_fdw *w, unsigned what);
void emu_fdw_free(struct emu_fdw *w);

#endif
