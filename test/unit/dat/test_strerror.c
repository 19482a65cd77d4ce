/* dat_strerror: a distinct text for every type and subtype, OFA numbering. */
#include "lib/dat/dr.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test/lib/dat_util.h"

static const DAT_UINT32 types[] = {
    DAT_SUCCESS, DAT_ABORT, DAT_CONN_QUAL_IN_USE, DAT_INSUFFICIENT_RESOURCES,
    DAT_INTERNAL_ERROR, DAT_INVALID_HANDLE, DAT_INVALID_PARAMETER, DAT_INVALID_STATE,
    DAT_LENGTH_ERROR, DAT_MODEL_NOT_SUPPORTED, DAT_PROVIDER_NOT_FOUND,
    DAT_PRIVILEGES_VIOLATION, DAT_PROTECTION_VIOLATION, DAT_QUEUE_EMPTY, DAT_QUEUE_FULL,
    DAT_TIMEOUT_EXPIRED, DAT_PROVIDER_ALREADY_REGISTERED, DAT_PROVIDER_IN_USE,
    DAT_INVALID_ADDRESS, DAT_INTERRUPTED_CALL, DAT_CONN_QUAL_UNAVAILABLE,
    0x00150000 /* DAT_RESERVED_LMR */, DAT_PORT_IN_USE, DAT_COMM_NOT_SUPPORTED,
    DAT_EXTENSION_BASE, DAT_NOT_IMPLEMENTED,
};
#define NTYPES (int)(sizeof types / sizeof *types)
#define NSUB 104 /* DAT_NO_SUBTYPE .. DAT_THREAD_SAFETY_NOT_FOUND */

START_TEST(every_type_distinct)
{
    const char *maj[NTYPES], *min;

    for (int i = 0; i < NTYPES; i++) {
        ck_assert_int_eq(dat_strerror(DAT_CLASS_ERROR | types[i], &maj[i], &min), DAT_SUCCESS);
        ck_assert_ptr_nonnull(maj[i]);
        ck_assert_int_gt(strlen(maj[i]), 4);
        ck_assert_str_eq(min, "DAT_NO_SUBTYPE");
        for (int j = 0; j < i; j++)
            ck_assert_str_ne(maj[i], maj[j]);
    }
}
END_TEST

START_TEST(every_subtype_distinct)
{
    static const char *min[NSUB];
    const char *maj;

    for (int i = 0; i < NSUB; i++) {
        ck_assert_int_eq(dat_strerror(DAT_CLASS_ERROR | DAT_INVALID_STATE | (DAT_UINT32)i,
                                      &maj, &min[i]), DAT_SUCCESS);
        ck_assert_str_eq(maj, "DAT_INVALID_STATE");
        ck_assert_ptr_nonnull(min[i]);
        ck_assert_int_gt(strlen(min[i]), 4);
        for (int j = 0; j < i; j++)
            ck_assert_str_ne(min[i], min[j]);
    }
}
END_TEST

static void expect(DAT_RETURN v, const char *major, const char *minor)
{
    const char *a = NULL, *b = NULL;

    ck_assert_int_eq(dat_strerror(v, &a, &b), DAT_SUCCESS);
    ck_assert_str_eq(a, major);
    ck_assert_str_eq(b, minor);
}

START_TEST(ofa_numbering)
{
    expect(0x800A0064, "DAT_PROVIDER_NOT_FOUND", "DAT_NAME_NOT_REGISTERED");
    expect(0x8005000B, "DAT_INVALID_HANDLE", "DAT_INVALID_HANDLE_IA");
    expect(0x8005001B, "DAT_INVALID_HANDLE", "DAT_INVALID_HANDLE1");
    expect(0x80060025, "DAT_INVALID_PARAMETER", "DAT_INVALID_ARG1");
    expect(0x8007002F, "DAT_INVALID_STATE", "DAT_INVALID_STATE_EP_UNCONNECTED");
    expect(0x80070045, "DAT_INVALID_STATE", "DAT_INVALID_STATE_EVD_OPEN");
    expect(0x80070057, "DAT_INVALID_STATE", "DAT_INVALID_STATE_SRQ_IN_USE");
    expect(0x80070058, "DAT_INVALID_STATE", "DAT_INVALID_STATE_SRQ_SHUTDOWN");
    expect(0x800B0059, "DAT_PRIVILEGES_VIOLATION", "DAT_PRIVILEGES_READ");
    expect(0x800C005D, "DAT_PROTECTION_VIOLATION", "DAT_PROTECTION_READ");
    expect(0x80120061, "DAT_INVALID_ADDRESS", "DAT_INVALID_ADDRESS_UNSUPPORTED");
    expect(0x80120063, "DAT_INVALID_ADDRESS", "DAT_INVALID_ADDRESS_MALFORMED");
    expect(0x800A0067, "DAT_PROVIDER_NOT_FOUND", "DAT_THREAD_SAFETY_NOT_FOUND");
    expect(0xBFFF0000, "DAT_NOT_IMPLEMENTED", "DAT_NO_SUBTYPE");
    expect(0x00000000, "DAT_SUCCESS", "DAT_NO_SUBTYPE");
    /* the class bits do not matter */
    expect(0x400D0000, "DAT_QUEUE_EMPTY", "DAT_NO_SUBTYPE");
    expect(0x000D0000, "DAT_QUEUE_EMPTY", "DAT_NO_SUBTYPE");
}
END_TEST

START_TEST(unknown_values)
{
    const char *a, *b;

    ck_assert_int_eq(dat_strerror(0x80050068, &a, &b), DAT_INVALID_PARAMETER); /* subtype 104 */
    ck_assert_int_eq(dat_strerror(0x8005FFFF, &a, &b), DAT_INVALID_PARAMETER);
    ck_assert_int_eq(dat_strerror(0x00180000, &a, &b), DAT_INVALID_PARAMETER);
    ck_assert_int_eq(dat_strerror(0x10010000, &a, &b), DAT_INVALID_PARAMETER);
    ck_assert_int_eq(dat_strerror(0x3FFE0000, &a, &b), DAT_INVALID_PARAMETER);
    /* the outputs are still printable */
    ck_assert_ptr_nonnull(a);
    ck_assert_ptr_nonnull(b);
    ck_assert_int_eq(dat_strerror(0, NULL, &b), DAT_INVALID_PARAMETER);
    ck_assert_int_eq(dat_strerror(0, &a, NULL), DAT_INVALID_PARAMETER);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("dat_strerror");
    TCase *tc = tcase_create("strerror");

    tcase_add_test(tc, every_type_distinct);
    tcase_add_test(tc, every_subtype_distinct);
    tcase_add_test(tc, ofa_numbering);
    tcase_add_test(tc, unknown_values);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run(suite());
}
