/* What an RNIC's memory pinning refuses: a range the process does not
 * have mapped (a hole, or a PROT_NONE guard page), or write access to a
 * mapping that is not writable.
 *
 * The fast path does what pinning does: madvise(MADV_POPULATE_WRITE, or
 * _READ for a read-only registration) faults the range in with the access
 * asked for, and the kernel refuses exactly holes (ENOMEM) and mappings
 * without that access (EINVAL). It costs a page-table walk once the pages
 * are present, so programs that register and deregister per message (Open
 * MPI's pipelined RDMA registers every 128 KiB fragment) pay about a
 * microsecond, where reading /proc/self/maps cost 20-50 µs per call.
 * Like pinning it commits untouched memory and breaks copy-on-write.
 *
 * Any refusal (and kernels before 5.14, which do not know the advice) is
 * judged by the kernel's own listing, /proc/self/maps: one sequential
 * read, which tells a hole from a missing permission. */
#include "emu/mem.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* One line's "start-end perms" prefix; false if it does not parse. */
static bool parse_line(const char *s, size_t n, uint64_t *lo, uint64_t *hi, char perms[4])
{
    char tmp[96];
    if (n >= sizeof tmp)
        n = sizeof tmp - 1;
    memcpy(tmp, s, n);
    tmp[n] = '\0';
    char *end;
    errno = 0;
    unsigned long long a = strtoull(tmp, &end, 16);
    if (errno != 0 || *end != '-')
        return false;
    unsigned long long b = strtoull(end + 1, &end, 16);
    if (errno != 0 || *end != ' ' || strlen(end + 1) < 4)
        return false;
    memcpy(perms, end + 1, 4);
    *lo = a;
    *hi = b;
    return true;
}

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#define MADV_POPULATE_WRITE 23
#endif

/* true: the whole range is mapped with the access asked for. */
static bool populate(const void *addr, uint64_t len, bool write)
{
    uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    uint64_t lo = (uint64_t)(uintptr_t)addr & ~(page - 1);
    uint64_t hi = (uint64_t)(uintptr_t)addr + len; /* caller checked wrap */
    if (hi > UINT64_MAX - page)
        return false;
    hi = (hi + page - 1) & ~(page - 1);
    int rc;
    do
        rc = madvise((void *)(uintptr_t)lo, (size_t)(hi - lo), write ? MADV_POPULATE_WRITE : MADV_POPULATE_READ);
    while (rc != 0 && errno == EINTR);
    return rc == 0;
}

static int judge_by_maps(const void *addr, uint64_t len, bool write);

int emu_mem_probe(const void *addr, uint64_t len, bool write)
{
    if (len == 0)
        return 0;
    if (populate(addr, len, write))
        return 0;
    return judge_by_maps(addr, len, write);
}

static int judge_by_maps(const void *addr, uint64_t len, bool write)
{
    uint64_t cur = (uint64_t)(uintptr_t)addr, last = cur + len; /* caller checked wrap */
    int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0; /* no procfs (chroot): nothing to judge by, accept as before */
    char buf[4096];
    char line[96];
    size_t ll = 0;
    bool skipping = false; /* rest of a long line (path) */
    int rc = -EFAULT;      /* a range not covered to its end is not mapped */
    bool done = false;
    /* Bounded: the file is finite; each read consumes bytes. */
    while (!done) {
        ssize_t n = read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        for (ssize_t i = 0; i < n && !done; i++) {
            char ch = buf[i];
            if (ch != '\n') {
                if (!skipping && ll < sizeof line)
                    line[ll++] = ch;
                if (ll == sizeof line)
                    skipping = true;
                continue;
            }
            uint64_t lo, hi;
            char perms[4];
            bool ok = parse_line(line, ll, &lo, &hi, perms);
            ll = 0;
            skipping = false;
            if (!ok || hi <= cur)
                continue;
            if (lo > cur || perms[0] != 'r') { /* a hole, or a no-access mapping */
                rc = -EFAULT;
                done = true;
            } else if (write && perms[1] != 'w') {
                rc = -EACCES;
                done = true;
            } else {
                cur = hi;
                if (cur >= last) {
                    rc = 0;
                    done = true;
                }
            }
        }
    }
    close(fd);
    return rc;
}
