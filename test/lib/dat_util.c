/* test/lib/dat_util.h: helpers of the registry tests. */
#include "test/lib/dat_util.h"

#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char *tu_build_dir(void)
{
    static char dir[PATH_MAX];

    if (!dir[0]) {
        char exe[PATH_MAX];
        ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);

        ck_assert_int_gt(n, 0);
        exe[n] = '\0';
        snprintf(dir, sizeof dir, "%s/../..", dirname(exe));
    }
    return dir;
}

const char *tu_fixture_so(void)
{
    static char path[PATH_MAX + 64];

    snprintf(path, sizeof path, "%s/test/fixtures/libdatfix.so", tu_build_dir());
    return path;
}

const char *tu_write_file(const char *text)
{
    static char path[64];
    int fd;

    strcpy(path, "/tmp/softdat-datconf-XXXXXX");
    fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    return path;
}

char *tu_capture_stderr(void (*fn)(void *), void *arg)
{
    char path[] = "/tmp/softdat-stderr-XXXXXX";
    int fd = mkstemp(path), saved;
    char *buf;
    off_t len;

    ck_assert_int_ge(fd, 0);
    fflush(stderr);
    saved = dup(2);
    dup2(fd, 2);
    fn(arg);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    len = lseek(fd, 0, SEEK_END);
    buf = calloc(1, (size_t)len + 1);
    ck_assert_ptr_nonnull(buf);
    ck_assert_int_eq(pread(fd, buf, (size_t)len, 0), len);
    close(fd);
    unlink(path);
    return buf;
}

int tu_run(Suite *s)
{
    SRunner *sr = srunner_create(s);
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
