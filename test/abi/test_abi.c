/*
 * ABI comparison: include/dat2 against the Debian libdapl-dev headers.
 *
 * abi_gen.py enumerated every name the Debian headers define and wrote one
 * table of sizes, offsets, enum and macro values; that table was compiled
 * once against each header set. Here the two compiled tables are compared
 * entry by entry, and the generator's findings (names missing from ours,
 * conflicting prototypes) are reported. Every difference is printed.
 */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "test/abi/abi_table.h"

static void print_value(const struct abi_entry *e)
{
    if (e->negative)
        printf("%lld", (long long)e->value);
    else
        printf("%llu (0x%llx)", e->value, e->value);
}

START_TEST(test_abi_identical)
{
    unsigned compared = 0, diffs = 0, findings = 0;

    for (const char *const *f = abi_accepted; *f; f++)
        printf("ABI: note: %s\n", *f);
    for (const char *const *f = abi_findings; *f; f++) {
        printf("ABI: %s\n", *f);
        findings++;
    }
    for (size_t i = 0; abi_table_ref[i].key; i++) {
        const struct abi_entry *r = &abi_table_ref[i], *o = &abi_table_ours[i];
        ck_assert_ptr_nonnull(o->key);
        ck_assert_str_eq(r->key, o->key);
        compared++;
        if (r->string || o->string) {
            if (!r->string || !o->string || strcmp(r->string, o->string)) {
                diffs++;
                printf("ABI: %s: ours \"%s\", Debian \"%s\"\n", r->key,
                       o->string ? o->string : "(none)",
                       r->string ? r->string : "(none)");
            }
            continue;
        }
        if (r->value != o->value || r->negative != o->negative) {
            diffs++;
            printf("ABI: %s: ours ", r->key);
            print_value(o);
            printf(", Debian ");
            print_value(r);
            printf("\n");
        }
    }
    printf("ABI: %s\n", abi_counts);
    printf("ABI: %u values compared (sizes, offsets, signedness, enum and "
           "macro values), %u differ; %u other findings\n",
           compared, diffs, findings);
    fflush(stdout);
    ck_assert_msg(diffs == 0 && findings == 0,
                  "%u ABI differences and %u findings (see the lines above)",
                  diffs, findings);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("abi");
    TCase *tc = tcase_create("abi");
    tcase_add_test(tc, test_abi_identical);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
