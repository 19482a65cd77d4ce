/* Helpers shared by the registry's Check programs (test/unit/dat): the
 * build tree, the fixture provider, temporary files, captured stderr.
 * Linked from test/lib/ (libsdtest.a). */
#ifndef SOFTDAT_TEST_LIB_DAT_UTIL_H
#define SOFTDAT_TEST_LIB_DAT_UTIL_H

#include <check.h>

/* The build tree: this program is $(BUILD)/test/dat/NAME. */
const char *tu_build_dir(void);
/* The fixture provider the tests' dat.conf files name. */
const char *tu_fixture_so(void);
/* Writes text to a fresh temporary file and returns its (static) path. */
const char *tu_write_file(const char *text);
/* Runs fn with stderr captured; returns the captured text (malloc'd). */
char *tu_capture_stderr(void (*fn)(void *), void *arg);
/* Runs the suite; EXIT_SUCCESS when no check failed. */
int tu_run(Suite *s);

#endif
