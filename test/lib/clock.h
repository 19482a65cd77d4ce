/* The one monotonic clock of the tests (helpers, unit tests, the hostile
 * peer): seconds since an arbitrary start, as a double. Header-only, so
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

#endif
