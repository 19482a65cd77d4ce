/* The contended halves of emu_lock (emu/lock.h). */
#include "emu/lock.h"

#if !SD_SANITIZER_THREAD

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Marks the word "held, waiters" and sleeps until it was free when
 * marked: whoever then unlocks sees 2 and wakes one sleeper, which marks
 * it 2 again when it takes it (it cannot know whether others still
 * sleep: one wake-up too many at most). */
void emu_lock_wait(emu_lock_t *l)
{
    int was = atomic_exchange_explicit(&l->word, 2, memory_order_acquire);
    while (was != 0) {
        /* Returns at once if the word is no longer 2 (EAGAIN), or on a
         * signal (EINTR): either way, look again. */
        syscall(SYS_futex, &l->word, FUTEX_WAIT_PRIVATE, 2, NULL, NULL, 0);
        was = atomic_exchange_explicit(&l->word, 2, memory_order_acquire);
    }
}

void emu_lock_wake(emu_lock_t *l)
{
    syscall(SYS_futex, &l->word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

#endif
