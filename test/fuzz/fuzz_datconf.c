/* libFuzzer target: dat.conf parsing in the registry (lib/dat/conf.c).
 *
 * The input is a dat.conf file. It is parsed twice: line by line through
 * dr_conf_parse_line (split at '\n' as getline does; a NUL ends a line
 * early, as it would for the C string getline hands over), and whole
 * through dr_conf_parse_file on a memfd, with the diagnostics formatted
 * but sent nowhere. Properties: a record's string fields are terminated
 * within their arrays, a corrupt line always has a reason, and both
 * paths count the same records. */
#include "test/fuzz/fuzz.h"

#include "lib/dat/dr.h"

#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static int mfd = -1;
static char mpath[64];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    setenv("DAT_DBG_TYPE", "0xffffffff", 1); /* format every diagnostic ... */
    setenv("DAT_DBG_DEST", "0", 1);          /* ... and print none */
    dr_dbg_init();
    mfd = memfd_create("datconf", 0);
    if (mfd < 0)
        abort();
    snprintf(mpath, sizeof mpath, "/proc/self/fd/%d", mfd);
    return 0;
}

static void check_entry(const struct dr_conf_entry *e)
{
    FUZZ_CHECK(memchr(e->ia_name, 0, sizeof e->ia_name) != NULL);
    FUZZ_CHECK(memchr(e->lib_path, 0, sizeof e->lib_path) != NULL);
    FUZZ_CHECK(memchr(e->prov_id, 0, sizeof e->prov_id) != NULL);
    FUZZ_CHECK(memchr(e->ia_params, 0, sizeof e->ia_params) != NULL);
    FUZZ_CHECK(memchr(e->platform_params, 0, sizeof e->platform_params) != NULL);
}

static void on_record(const struct dr_conf_entry *e, const char *path, int lineno, void *arg)
{
    (void)path;
    FUZZ_CHECK(lineno > 0);
    check_entry(e);
    (*(int *)arg)++;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct dr_conf_entry e;
    int records = 0;
    size_t at = 0;
    while (at < size) {
        const uint8_t *nl = memchr(data + at, '\n', size - at);
        size_t end = nl ? (size_t)(nl - data) + 1 : size;
        char *line = malloc(end - at + 1);
        FUZZ_CHECK(line != NULL);
        memcpy(line, data + at, end - at);
        line[end - at] = '\0';
        const char *why = NULL;
        int rc = dr_conf_parse_line(line, &e, &why);
        FUZZ_CHECK(rc >= -1 && rc <= 1);
        if (rc == 1) {
            check_entry(&e);
            records++;
        } else if (rc < 0) {
            FUZZ_CHECK(why != NULL);
        }
        free(line);
        at = end;
    }

    if (ftruncate(mfd, 0) != 0 || pwrite(mfd, data, size, 0) != (ssize_t)size)
        abort();
    int seen = 0, corrupt = 0;
    int n = dr_conf_parse_file(mpath, on_record, &seen, &corrupt);
    FUZZ_CHECK(n == seen && n == records);
    return 0;
}
