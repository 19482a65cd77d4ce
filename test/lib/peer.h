/* Support shared by the helper programs the end-to-end tests drive
 * (test/helpers/dat_*_peer.c): the peer's role in messages, how a failed
 * check is reported, waiting for an event. Linked from test/lib/ as
 * libsdtest.a (Makefile), not copied into each program.
 *
 * Two kinds of check, as the scripts read them:
 *   PEER_CHECK(rc, what) / PEER_FAIL(...)   fatal, "role: ..." on stderr;
 *   PEER_EXPECT(cond, ...) / PEER_MUST(call) "FAIL role file:line: ..." on
 *   stdout; EXPECT counts (peer_failures) and goes on, MUST exits. */
#ifndef SOFTDAT_TEST_LIB_PEER_H
#define SOFTDAT_TEST_LIB_PEER_H

#include <dat2/udat.h>
#include <dat2/dat_ib_extensions.h>

#include <stdint.h>

extern const char *peer_role; /* "server", "client", ...: set by main */
extern int peer_failures;     /* PEER_EXPECT failures so far */

_Noreturn void peer_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void peer_check(DAT_RETURN rc, const char *what);
void peer_expect_failed(const char *file, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
_Noreturn void peer_must_failed(const char *file, int line, const char *call, DAT_RETURN rc);

#define PEER_FAIL(...) peer_fail(__VA_ARGS__)
#define PEER_CHECK(rc, what) peer_check((rc), (what))
#define PEER_EXPECT(cond, ...)                                                                                         \
    do {                                                                                                               \
        if (!(cond))                                                                                                   \
            peer_expect_failed(__FILE__, __LINE__, __VA_ARGS__);                                                       \
    } while (0)
#define PEER_MUST(call)                                                                                                \
    do {                                                                                                               \
        DAT_RETURN r_ = (call);                                                                                        \
        if (r_ != DAT_SUCCESS)                                                                                         \
            peer_must_failed(__FILE__, __LINE__, #call, r_);                                                           \
    } while (0)

/* How long a peer waits for any one event before it gives up. */
#define PEER_WAIT_US (10u * 1000000u)

/* The next event on evd; a failed wait is fatal (PEER_MUST style). */
DAT_EVENT peer_wait(DAT_EVD_HANDLE evd, const char *what);
/* The next event, which must be `want`; anything else is fatal
 * (PEER_FAIL style). */
DAT_EVENT peer_wait_for(DAT_EVD_HANDLE evd, DAT_EVENT_NUMBER want, const char *what);

/* A completion on evd, which must be a successful DTO completion; anything
 * else prints "FAIL role: what: ..." and exits 1. */
DAT_DTO_COMPLETION_EVENT_DATA peer_wait_ok(DAT_EVD_HANDLE evd, const char *what);

/* Register len bytes at buf in pz with the rights priv (PEER_MUST;
 * DAT_MEM_PRIV_ALL_FLAG: every right). rc may be NULL when the remote
 * context is not wanted. */
void peer_register(DAT_IA_HANDLE ia, DAT_PZ_HANDLE pz, void *buf, DAT_VLEN len, DAT_MEM_PRIV_FLAGS priv,
                   DAT_LMR_HANDLE *h, DAT_LMR_CONTEXT *lc, DAT_RMR_CONTEXT *rc);

/* RC endpoint attributes: default completion flags, best-effort QoS, max
 * message and RDMA size `size`, recv/request queue depths, `iov` segments
 * for every kind of DTO, RDMA Read depth `reads` both ways. */
DAT_EP_ATTR peer_rc_attr(DAT_VLEN size, DAT_COUNT recvs, DAT_COUNT requests, DAT_COUNT iov, DAT_COUNT reads);

/* Small builders and lookups every data-transfer peer used to copy. */
DAT_LMR_TRIPLET peer_triplet(DAT_LMR_CONTEXT lc, const void *addr, DAT_SEG_LENGTH len);
DAT_DTO_COOKIE peer_cookie(uint64_t v);
/* The IB extension data of an event (DAT_IB_EXTENSION_EVENT_DATA). */
const DAT_IB_EXTENSION_EVENT_DATA *peer_ib_ext(const DAT_EVENT *ev);
/* Descriptors this process holds (for leak checks), -1 if unknown. */
int peer_count_fds(void);
/* This process's resident memory in KiB (0 if unknown). */
long peer_rss_kib(void);
/* A provider-specific attribute's value, "(absent)" if it has none. */
const char *peer_provider_attr(const DAT_PROVIDER_ATTR *pa, const char *name);

#endif
