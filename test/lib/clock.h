/* The one monotonic clock of the tests (helpers, unit tests, the hostile
 * peer): seconds since an arbitrary start, as a double; and deadlines for
 * condition-variable waits. Header-only, so
 * that test/unit/provider/hostile_wire.h (which links nothing of softdat)
 * can use it too. */
#ifndef SOFTDAT_TEST_LIB_CLOCK_H
#define SOFTDAT_TEST_LIB_CLOCK_H

#include <time.h>

static inline double test_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* *ts = now + ms on the clock pthread_cond_timedwait uses by default. */
static inline void test_deadline(struct timespec *ts, int ms)
{
    clock_gettime(CLOCK_REALTIME, ts);
    ts->tv_sec += ms / 1000;
    ts->tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000L;
    }
}

#endif
