/* Shared between the generated ABI tables and test_abi.c. */
#ifndef SOFTDAT_TEST_ABI_TABLE_H
#define SOFTDAT_TEST_ABI_TABLE_H

struct abi_entry {
    const char *key;           /* "sizeof(DAT_EVENT)", "enum DAT_SUCCESS", ... */
    unsigned long long value;  /* the value as the compiler computed it */
    int negative;              /* sign, for values that can be negative */
    const char *string;        /* string-valued macros: the text */
};

/* The same generated table, compiled against each header set. */
extern const struct abi_entry abi_table_ref[];
extern const struct abi_entry abi_table_ours[];
/* Differences found while generating (names we lack, ...); NULL-terminated. */
extern const char *const abi_findings[];
/* Deliberate differences, each with its reason; NULL-terminated. */
extern const char *const abi_accepted[];
extern const char *const abi_counts;

#endif
