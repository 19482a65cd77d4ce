/* Shared by the libFuzzer targets in test/fuzz (see docs/reliability.md).
 * A failed property is a crash for libFuzzer: abort() after saying which
 * one, so the saved input comes with a reason. */
#ifndef SOFTDAT_TEST_FUZZ_H
#define SOFTDAT_TEST_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

#define FUZZ_CHECK(cond)                                                          \
    do {                                                                          \
        if (!(cond)) {                                                            \
            fprintf(stderr, "%s:%d: property failed: %s\n", __FILE__, __LINE__, #cond); \
            abort();                                                              \
        }                                                                         \
    } while (0)

#endif
