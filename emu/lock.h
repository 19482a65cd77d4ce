/* emu_lock: the mutex of the data path (the QP's send, receive and
 * receive-ring locks, the connection's, the provider's EP, DTO ring and
 * progress-set locks).
 *
 * A polled round trip takes and gives back some sixteen of these on each
 * side, uncontended: glibc's pthread_mutex_lock and _unlock cost about 55
 * instructions a pair through the PLT (the mutex type's dispatch, owner
 * and user counts), a fifth of the provider's instructions per hop
 * (docs/perf-log.md §23). This one is a futex word, inline: a
 * compare-and-swap to take it, an exchange to give it back, the kernel
 * only when a thread must wait (0 free, 1 held, 2 held with waiters; the
 * scheme of Drepper's "Futexes Are Tricky", mutex 3). Not recursive, no
 * condition variables: a lock that needs either stays a pthread mutex.
 *
 * ThreadSanitizer builds use pthread mutexes instead, which it models (it
 * would see the futex word's users as racing), so `make tsan` still checks
 * the locking of everything these locks protect. */
#ifndef SOFTDAT_EMU_LOCK_H
#define SOFTDAT_EMU_LOCK_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "emu/sanitizer.h"

#if SD_SANITIZER_THREAD

typedef struct {
    pthread_mutex_t m;
} emu_lock_t;

static inline void emu_lock_init(emu_lock_t *l)
{
    pthread_mutex_init(&l->m, NULL);
}

static inline void emu_lock_destroy(emu_lock_t *l)
{
    pthread_mutex_destroy(&l->m);
}

static inline void emu_lock(emu_lock_t *l)
{
    pthread_mutex_lock(&l->m);
}

/* Taken: true. Held by another thread: false, at once. */
static inline bool emu_trylock(emu_lock_t *l)
{
    return pthread_mutex_trylock(&l->m) == 0;
}

static inline void emu_unlock(emu_lock_t *l)
{
    pthread_mutex_unlock(&l->m);
}

#else

typedef struct {
    _Atomic int word; /* 0 free, 1 held, 2 held and a thread waits (or did) */
} emu_lock_t;

/* emu/lock.c: the contended halves. */
void emu_lock_wait(emu_lock_t *l);
void emu_lock_wake(emu_lock_t *l);

static inline void emu_lock_init(emu_lock_t *l)
{
    atomic_init(&l->word, 0);
}

static inline void emu_lock_destroy(emu_lock_t *l)
{
    (void)l;
}

/* Taken: true. Held by another thread: false, at once. */
static inline bool emu_trylock(emu_lock_t *l)
{
    int free_word = 0;
    return atomic_compare_exchange_strong_explicit(&l->word, &free_word, 1, memory_order_acquire,
                                                   memory_order_relaxed);
}

static inline void emu_lock(emu_lock_t *l)
{
    if (__builtin_expect(!emu_trylock(l), 0))
        emu_lock_wait(l);
}

static inline void emu_unlock(emu_lock_t *l)
{
    if (__builtin_expect(atomic_exchange_explicit(&l->word, 0, memory_order_release) == 2, 0))
        emu_lock_wake(l);
}

#endif

#endif
