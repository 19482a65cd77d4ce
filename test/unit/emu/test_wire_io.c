/* emu/wire_io: emu_wire_send gathers several small iovecs into one
 * buffer and sends it with sendto(2) (larger ones keep sendmsg(2)). What
 * the peer receives, the count the caller gets back (a partial write
 * included), a datagram's destination and what an observer sees must be
 * those of sendmsg(2) over the same iovecs. */
#include "emu/wire_io.h"

#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "test/lib/tcp_pair.h"

/* Read exactly len bytes from fd (blocking, bounded by len). */
static void read_all(int fd, uint8_t *buf, size_t len)
{
    size_t got = 0;
    while (got < len) {
        ssize_t n = recv(fd, buf + got, len - got, 0);
        ck_assert_int_gt(n, 0);
        got += (size_t)n;
    }
}

/* iovecs over src: lens[i] bytes each, back to back (zero-length ones
 * point into src too). Returns the total. */
static size_t cut(const uint8_t *src, const size_t *lens, int n, struct iovec *iov)
{
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        iov[i].iov_base = (void *)(src + off);
        iov[i].iov_len = lens[i];
        off += lens[i];
    }
    return off;
}

static uint8_t *pattern(size_t len, unsigned seed)
{
    uint8_t *p = malloc(len);
    ck_assert_ptr_nonnull(p);
    for (size_t i = 0; i < len; i++)
        p[i] = (uint8_t)(i * 31u + seed);
    return p;
}

/* Frames of header, payload and trailer (and empty entries) up to the
 * gather limit, and just past it (sendmsg): the peer receives the bytes
 * in order. */
START_TEST(stream_bytes_in_order)
{
    static const size_t small[] = {20, 64, 4, 0, 20, 64, 4, 20, 1, 4};
    static const size_t at_limit[] = {20, 4096 - 48, 4, 20, 4};         /* 4,096 in all */
    static const size_t past_limit[] = {20, 4096 - 47, 4, 20, 4};       /* 4,097 */
    const size_t *sets[] = {small, at_limit, past_limit};
    const int counts[] = {10, 5, 5};
    int a, b;
    test_tcp_pair(AF_INET, &a, &b);
    struct emu_wire_ep ep;
    emu_wire_ep_init(&ep, false, 0, 0);
    for (int s = 0; s < 3; s++) {
        struct iovec iov[16];
        size_t total = 0;
        for (int i = 0; i < counts[s]; i++)
            total += sets[s][i];
        uint8_t *src = pattern(total, (unsigned)s), *dst = malloc(total);
        ck_assert_uint_eq(cut(src, sets[s], counts[s], iov), total);
        struct msghdr mh = {.msg_iov = iov, .msg_iovlen = (size_t)counts[s]};
        /* An idle connection's socket takes a few KiB at once. */
        ck_assert_int_eq(emu_wire_send(&ep, a, &mh, MSG_NOSIGNAL | MSG_DONTWAIT), (ssize_t)total);
        read_all(b, dst, total);
        ck_assert_int_eq(memcmp(src, dst, total), 0);
        free(src);
        free(dst);
    }
    emu_wire_ep_fini(&ep);
    close(a);
    close(b);
}
END_TEST

/* A full socket takes part of a gathered send: the count returned is the
 * prefix of the iovecs' bytes that the peer receives, as with sendmsg. */
START_TEST(partial_send_is_a_prefix)
{
    int a, b;
    test_tcp_pair(AF_INET, &a, &b);
    int small_buf = 4096;
    ck_assert_int_eq(setsockopt(a, SOL_SOCKET, SO_SNDBUF, &small_buf, sizeof small_buf), 0);
    ck_assert_int_eq(setsockopt(b, SOL_SOCKET, SO_RCVBUF, &small_buf, sizeof small_buf), 0);
    struct emu_wire_ep ep;
    emu_wire_ep_init(&ep, false, 0, 0);
    /* Up to 4 MiB of 3,000-byte gathered sends until the socket refuses
     * or takes part of one. */
    static const size_t lens[] = {20, 2976, 4};
    enum { ONE = 3000, MAXB = 4 << 20 };
    uint8_t *stream = malloc(MAXB);
    size_t queued = 0;
    bool short_write = false;
    for (unsigned k = 0; queued + ONE <= MAXB; k++) {
        uint8_t *src = stream + queued;
        for (size_t i = 0; i < ONE; i++)
            src[i] = (uint8_t)(i * 7u + k);
        struct iovec iov[3];
        cut(src, lens, 3, iov);
        struct msghdr mh = {.msg_iov = iov, .msg_iovlen = 3};
        ssize_t n = emu_wire_send(&ep, a, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0) {
            ck_assert(errno == EAGAIN || errno == EWOULDBLOCK);
            break;
        }
        queued += (size_t)n;
        if ((size_t)n < ONE) {
            short_write = true;
            break;
        }
    }
    ck_assert_uint_gt(queued, 0);
    ck_assert_uint_lt(queued, MAXB); /* the socket did fill up */
    uint8_t *got = malloc(queued);
    read_all(b, got, queued);
    ck_assert_int_eq(memcmp(got, stream, queued), 0);
    /* Nothing more than the count said. */
    uint8_t extra;
    ck_assert_int_eq(recv(b, &extra, 1, MSG_DONTWAIT), -1);
    (void)short_write; /* either way (a partial write or EAGAIN at a boundary) the count held */
    free(got);
    free(stream);
    emu_wire_ep_fini(&ep);
    close(a);
    close(b);
}
END_TEST

/* A datagram with a destination (UD's msg_name) gathered: one datagram
 * to that address with the iovecs' bytes. */
START_TEST(datagram_to_its_destination)
{
    int rx = socket(AF_INET, SOCK_DGRAM, 0), tx = socket(AF_INET, SOCK_DGRAM, 0);
    ck_assert_int_ge(rx, 0);
    ck_assert_int_ge(tx, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    ck_assert_int_eq(bind(rx, (struct sockaddr *)&sa, sizeof sa), 0);
    socklen_t sl = sizeof sa;
    ck_assert_int_eq(getsockname(rx, (struct sockaddr *)&sa, &sl), 0);
    static const size_t lens[] = {40, 0, 100, 4};
    uint8_t *src = pattern(144, 3);
    struct iovec iov[4];
    cut(src, lens, 4, iov);
    struct msghdr mh = {.msg_name = &sa, .msg_namelen = sizeof sa, .msg_iov = iov, .msg_iovlen = 4};
    struct emu_wire_ep ep;
    emu_wire_ep_init(&ep, true, 0, 0);
    ck_assert_int_eq(emu_wire_send(&ep, tx, &mh, 0), 144);
    uint8_t got[256];
    ck_assert_int_eq(recv(rx, got, sizeof got, 0), 144);
    ck_assert_int_eq(memcmp(got, src, 144), 0);
    emu_wire_ep_fini(&ep);
    free(src);
    close(rx);
    close(tx);
}
END_TEST

/* An observer sees the iovecs of the call and the count it returned. */
static uint8_t g_seen[8192];
static size_t g_seen_len;
static void seen_bytes(void *ctx, struct emu_wire_ep *ep, int fd, enum emu_wire_dir dir, const struct msghdr *mh,
                       size_t len, uint64_t began_ns)
{
    (void)ctx;
    (void)ep;
    (void)fd;
    (void)began_ns;
    if (dir != EMU_WIRE_TX)
        return;
    size_t left = len;
    for (size_t i = 0; i < (size_t)mh->msg_iovlen && left > 0; i++) {
        size_t n = mh->msg_iov[i].iov_len < left ? mh->msg_iov[i].iov_len : left;
        ck_assert_uint_le(g_seen_len + n, sizeof g_seen);
        memcpy(g_seen + g_seen_len, mh->msg_iov[i].iov_base, n);
        g_seen_len += n;
        left -= n;
    }
}
static void seen_release(void *ctx, struct emu_wire_ep *ep)
{
    (void)ctx;
    (void)ep;
}

START_TEST(observer_sees_the_bytes)
{
    int a, b;
    test_tcp_pair(AF_INET, &a, &b);
    static const struct emu_wire_observer obs = {.bytes = seen_bytes, .release = seen_release};
    g_seen_len = 0;
    emu_wire_observe(&obs);
    static const size_t lens[] = {20, 64, 4, 20, 64, 4};
    uint8_t *src = pattern(176, 9), got[176];
    struct iovec iov[6];
    cut(src, lens, 6, iov);
    struct msghdr mh = {.msg_iov = iov, .msg_iovlen = 6};
    struct emu_wire_ep ep;
    emu_wire_ep_init(&ep, false, 0, 0);
    ck_assert_int_eq(emu_wire_send(&ep, a, &mh, MSG_NOSIGNAL), 176);
    emu_wire_observe(NULL);
    read_all(b, got, sizeof got);
    ck_assert_int_eq(memcmp(got, src, sizeof got), 0);
    ck_assert_uint_eq(g_seen_len, 176);
    ck_assert_int_eq(memcmp(g_seen, src, 176), 0);
    emu_wire_ep_fini(&ep);
    free(src);
    close(a);
    close(b);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("wire_io");
    TCase *tc = tcase_create("send");
    tcase_add_test(tc, stream_bytes_in_order);
    tcase_add_test(tc, partial_send_is_a_prefix);
    tcase_add_test(tc, datagram_to_its_destination);
    tcase_add_test(tc, observer_sees_the_bytes);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
