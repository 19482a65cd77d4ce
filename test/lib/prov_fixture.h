/* Shared fixture for the provider unit tests: attach a provider record
 * directly (no registry involved) and call its table. Linked from
 * test/lib/ (libsdtest.a). */
#ifndef SOFTDAT_TEST_LIB_PROV_FIXTURE_H
#define SOFTDAT_TEST_LIB_PROV_FIXTURE_H

#include <check.h>
#include <stdbool.h>
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

/* A provider record's identity: name, DAT 2.0, thread safety ts. */
DAT_PROVIDER_INFO fx_info(const char *name, DAT_BOOLEAN ts);
/* Attach a record named `name` with `params`; returns its table. */
DAT_PROVIDER *fx_provider(const char *name, const char *params, DAT_BOOLEAN ts);
/* Open an IA through the table; fails the test on error. */
DAT_IA_HANDLE fx_open(DAT_PROVIDER *p, DAT_EVD_HANDLE *async);

/* The next event on evd (5 s at most), which must be `want`. */
DAT_EVENT fx_wait(DAT_PROVIDER *p, DAT_EVD_HANDLE evd, DAT_EVENT_NUMBER want);
/* No event on evd within us microseconds. */
void fx_none(DAT_PROVIDER *p, DAT_EVD_HANDLE evd, DAT_TIMEOUT us);
DAT_EP_STATE fx_ep_state(DAT_PROVIDER *p, DAT_EP_HANDLE ep);

/* Put an EP in a state directly (decision tables only: the flows that
 * reach each state are exercised by test_cm.c / test_csp.c). */
void fx_force_state(DAT_EP_HANDLE ep, DAT_EP_STATE s);

/* Every state of the enum and the DAT_INVALID_STATE subtype naming it
 * (dat_error.h; the multipath variants are reported as CONNECTED). */
struct fx_ep_state_sub {
    DAT_EP_STATE s;
    DAT_UINT32 sub;
};
extern const struct fx_ep_state_sub fx_ep_states[];
extern const unsigned fx_ep_nstates;
/* Connected in any form, or Disconnected: where request posts and binds
 * are accepted (L7139); every other state refuses them. */
bool fx_state_posts_ok(DAT_EP_STATE s);

#endif
