/* emu_mem_probe: what an RNIC's pinning would refuse (issue 8 §4b). */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "emu/mem.h"

static long pg(void)
{
    return sysconf(_SC_PAGESIZE);
}

START_TEST(mapped_rw_ro_none_hole)
{
    long p = pg();
    char *m = mmap(NULL, (size_t)(4 * p), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ck_assert_ptr_ne(m, MAP_FAILED);
    ck_assert_int_eq(emu_mem_probe(m, (uint64_t)(4 * p), true), 0);
    ck_assert_int_eq(emu_mem_probe(m + 1, 10, false), 0);
    ck_assert_int_eq(emu_mem_probe(m, 0, true), 0);
    /* Page 1 read-only: reading fine, writing refused, but only where it
     * overlaps page 1. */
    ck_assert_int_eq(mprotect(m + p, (size_t)p, PROT_READ), 0);
    ck_assert_int_eq(emu_mem_probe(m, (uint64_t)(4 * p), false), 0);
    ck_assert_int_eq(emu_mem_probe(m, (uint64_t)(4 * p), true), -EACCES);
    ck_assert_int_eq(emu_mem_probe(m, (uint64_t)p, true), 0);
    ck_assert_int_eq(emu_mem_probe(m + p - 1, 2, true), -EACCES);
    /* Page 2 PROT_NONE: not validly mapped for anything. */
    ck_assert_int_eq(mprotect(m + 2 * p, (size_t)p, PROT_NONE), 0);
    ck_assert_int_eq(emu_mem_probe(m + 2 * p, 1, false), -EFAULT);
    /* Page 3 unmapped: a hole. */
    ck_assert_int_eq(munmap(m + 3 * p, (size_t)p), 0);
    ck_assert_int_eq(emu_mem_probe(m + 3 * p, 1, false), -EFAULT);
    ck_assert_int_eq(emu_mem_probe(m + 3 * p - 1, 2, false), -EFAULT);
    munmap(m, (size_t)(3 * p));
    ck_assert_int_eq(emu_mem_probe(m, 1, false), -EFAULT);
}
END_TEST

START_TEST(heap_stack_and_adjacent_mappings)
{
    char stackbuf[256] = {0};
    ck_assert_int_eq(emu_mem_probe(stackbuf, sizeof stackbuf, true), 0);
    char *h = malloc(1 << 20);
    ck_assert_ptr_nonnull(h);
    ck_assert_int_eq(emu_mem_probe(h, 1 << 20, true), 0);
    free(h);
    /* Two adjacent mappings with different flags are one valid range. */
    long p = pg();
    char *m = mmap(NULL, (size_t)(2 * p), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ck_assert_ptr_ne(m, MAP_FAILED);
    ck_assert_int_eq(madvise(m + p, (size_t)p, MADV_DONTFORK), 0); /* splits the VMA */
    ck_assert_int_eq(emu_mem_probe(m, (uint64_t)(2 * p), true), 0);
    munmap(m, (size_t)(2 * p));
    /* Code is readable, not writable. */
    ck_assert_int_eq(emu_mem_probe((const void *)(uintptr_t)&pg, 16, false), 0);
    ck_assert_int_eq(emu_mem_probe((const void *)(uintptr_t)&pg, 16, true), -EACCES);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("emu-mem-probe");
    TCase *tc = tcase_create("probe");
    tcase_add_test(tc, mapped_rw_ro_none_hole);
    tcase_add_test(tc, heap_stack_and_adjacent_mappings);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int nf = srunner_ntests_failed(sr);
    srunner_free(sr);
    return nf == 0 ? 0 : 1;
}
