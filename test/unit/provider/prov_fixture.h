/* Shared fixture for the provider unit tests: attach a provider record
 * directly (no registry involved) and call its table. */
#ifndef SOFTDAT_TEST_PROV_FIXTURE_H
#define SOFTDAT_TEST_PROV_FIXTURE_H

#include <check.h>
#include <string.h>

#include "lib/provider/handle.h"
#include "lib/provider/ia.h"

#define ERRT(rc) DAT_GET_TYPE(rc)
#define ERRS(rc) DAT_GET_SUBTYPE(rc)

/* Assert "class error, type T, subtype S". */
#define ck_assert_dat_err(rc, T, S)                                                                \
    do {                                                                                           \
        DAT_RETURN r_ = (rc);                                                                      \
        ck_assert_msg((r_ & DAT_CLASS_ERROR) && ERRT(r_) == (DAT_UINT32)(T) &&                     \
                          ERRS(r_) == (DAT_UINT32)(S),                                             \
                      "got 0x%08x, want type 0x%x subtype %u", (unsigned)r_, (unsigned)(T),        \
                      (unsigned)(S));                                                              \
    } while (0)
#define ck_assert_dat_ok(rc)                                                                       \
    do {                                                                                           \
        DAT_RETURN r_ = (rc);                                                                      \
        ck_assert_msg(r_ == DAT_SUCCESS, "got 0x%08x, want DAT_SUCCESS", (unsigned)r_);            \
    } while (0)

static inline DAT_PROVIDER_INFO fx_info(const char *name, DAT_BOOLEAN ts)
{
    DAT_PROVIDER_INFO info;
    memset(&info, 0, sizeof info);
    strncpy(info.ia_name, name, sizeof info.ia_name - 1);
    info.dapl_version_major = 2;
    info.dapl_version_minor = 0;
    info.is_thread_safe = ts;
    return info;
}

/* Attach a record named `name` with `params`; returns its table. */
static inline DAT_PROVIDER *fx_provider(const char *name, const char *params, DAT_BOOLEAN ts)
{
    DAT_PROVIDER_INFO info = fx_info(name, ts);
    struct sd_provider_rec *rec = sd_provider_attach(&info, params);
    ck_assert_ptr_nonnull(rec);
    return &rec->table;
}

/* Open an IA through the table; fails the test on error. */
static inline DAT_IA_HANDLE fx_open(DAT_PROVIDER *p, DAT_EVD_HANDLE *async)
{
    DAT_IA_HANDLE ia = DAT_HANDLE_NULL;
    DAT_EVD_HANDLE local = DAT_HANDLE_NULL;
    ck_assert_dat_ok(p->ia_open_func((DAT_NAME_PTR)p->device_name, 16, async ? async : &local, &ia));
    ck_assert_ptr_nonnull(ia);
    return ia;
}

#endif
