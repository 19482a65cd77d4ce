/* emu/conn_adopt.c: connections on sockets the consumer connected itself
 * (iWARP socket service points): both sides adopted, the MPA exchange on
 * the existing TCP connection, the consumer's descriptors closed only when
 * the socket passes for good, given back intact otherwise, the adopted
 * listener's loss report, and the socket checks. */
#include <fcntl.h>

#include "test/lib/conn_fixture.h"
#include "test/lib/tcp_pair.h"

static bool fd_open(int fd)
{
    return fcntl(fd, F_GETFD) != -1;
}

static int lost_calls, lost_err = -1;
static void on_lost(struct emu_listener *l, int err, void *ctx)
{
    (void)l;
    struct lis *li = ctx;
    pthread_mutex_lock(&li->m);
    lost_calls++;
    lost_err = err;
    pthread_cond_broadcast(&li->cv);
    pthread_mutex_unlock(&li->m);
}
static const struct emu_listener_ops adopt_lops = {.request = on_request, .lost = on_lost};

START_TEST(adopted_both_sides)
{
    int a, b;
    test_tcp_pair(AF_INET, &a, &b);
    struct lis l;
    struct side ps, cs;
    lis_init(&l, L_ACCEPT);
    side_init(&ps);
    side_init(&cs);
    l.sides = &ps;
    l.nsides = 1;
    struct emu_listener *ls = NULL;
    ck_assert_int_eq(emu_listener_adopt(E2, b, &adopt_lops, &l, &ls), 0);
    struct emu_conn *c = NULL;
    ck_assert_int_eq(emu_conn_connect_fd(E1, a, NULL, "sock", 4, &ops_plain, &cs, &c), 0);
    ck_assert(side_wait(&cs, 1, 5000));
    ck_assert(side_wait(&ps, 1, 5000));
    ck_assert_int_eq(side_type(&cs, 0), EMU_CONN_ESTABLISHED);
    ck_assert_int_eq(side_type(&ps, 0), EMU_CONN_ESTABLISHED);
    ck_assert_int_eq(l.pdlen, 4);
    ck_assert_int_eq(memcmp(l.pd, "sock", 4), 0);
    /* Both sockets passed to their connections: the descriptors are gone. */
    ck_assert(!fd_open(a));
    ck_assert(!fd_open(b));
    struct emu_conn_info in;
    ck_assert_int_eq(emu_conn_get_info(c, &in), 0);
    ck_assert(in.initiator);
    ck_assert(in.p2p);
    emu_conn_disconnect(c, true);
    ck_assert(side_wait(&cs, 2, 5000));
    ck_assert(side_wait(&ps, 2, 5000));
    ck_assert_int_eq(side_type(&ps, 1), EMU_CONN_DISCONNECTED);
    emu_conn_free(c);
    emu_conn_free(ps.c);
    emu_listener_free(ls);
    ck_assert_int_eq(lost_calls, 0);
}
END_TEST

START_TEST(socket_checks)
{
    struct lis l;
    lis_init(&l, L_MANUAL);
    struct emu_listener *ls = NULL;
    struct emu_conn *c = NULL;
    struct side cs;
    side_init(&cs);
    ck_assert_int_eq(emu_conn_connect_fd(E1, -1, NULL, NULL, 0, &ops_plain, &cs, &c), -EBADF);
    ck_assert_int_eq(emu_listener_adopt(E2, -1, &adopt_lops, &l, &ls), -EBADF);
    int nul = open("/dev/null", O_RDWR);
    ck_assert_int_eq(emu_conn_connect_fd(E1, nul, NULL, NULL, 0, &ops_plain, &cs, &c), -ENOTSOCK);
    int udp = socket(AF_INET, SOCK_DGRAM, 0);
    ck_assert_int_eq(emu_listener_adopt(E2, udp, &adopt_lops, &l, &ls), -EPROTONOSUPPORT);
    int un = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_eq(emu_conn_connect_fd(E1, un, NULL, NULL, 0, &ops_plain, &cs, &c), -ENOTCONN);
    ck_assert_int_eq(emu_listener_adopt(E2, un, &adopt_lops, &l, &ls), -ENOTCONN);
    ck_assert_int_eq(emu_listener_adopt(E2, un, NULL, &l, &ls), -EINVAL);
    ck_assert_ptr_null(c);
    ck_assert_ptr_null(ls);
    close(nul);
    close(udp);
    close(un);
}
END_TEST

/* Freed before a Request: the socket is the consumer's again, intact. */
START_TEST(listener_free_gives_back)
{
    int a, b;
    test_tcp_pair(AF_INET, &a, &b);
    int fl = fcntl(b, F_GETFL);
    struct lis l;
    lis_init(&l, L_MANUAL);
    struct emu_listener *ls = NULL;
    ck_assert_int_eq(emu_listener_adopt(E2, b, &adopt_lops, &l, &ls), 0);
    ck_assert_int_ne(fcntl(b, F_GETFL) & O_NONBLOCK, 0); /* shared while adopted */
    emu_listener_free(ls);
    ck_assert(fd_open(b));
    ck_assert_int_eq(fcntl(b, F_GETFL), fl);
    ck_assert_int_eq(write(a, "abc", 3), 3);
    uint8_t buf[3];
    ck_assert_int_eq(recv_exact(b, buf, 3, 2000), 3);
    ck_assert_int_eq(write(b, "xyz", 3), 3);
    ck_assert_int_eq(recv_exact(a, buf, 3, 2000), 3);
    ck_assert_int_eq(memcmp(buf, "xyz", 3), 0);
    ck_assert_int_eq(lost_calls, 0);
    close(a);
    close(b);
}
END_TEST

/* The peer goes away before its Request: one loss report. */
START_TEST(listener_lost)
{
    int a, b;
    test_tcp_pair(AF_INET, &a, &b);
    struct lis l;
    lis_init(&l, L_MANUAL);
    struct emu_listener *ls = NULL;
    lost_calls = 0;
    ck_assert_int_eq(emu_listener_adopt(E2, b, &adopt_lops, &l, &ls), 0);
    close(a);
    struct timespec ts;
    deadline(&ts, 5000);
    pthread_mutex_lock(&l.m);
    while (lost_calls == 0)
        if (pthread_cond_timedwait(&l.cv, &l.m, &ts) != 0)
            break;
    pthread_mutex_unlock(&l.m);
    ck_assert_int_eq(lost_calls, 1);
    ck_assert_int_eq(l.n, 0);
    emu_listener_free(ls);
    ck_assert_int_eq(lost_calls, 1);
    ck_assert(fd_open(b)); /* never passed: still the consumer's */
    close(b);
}
END_TEST

/* A rejected connect_fd: PEER_REJECTED and the socket back, blocking. */
START_TEST(connect_fd_rejected_gives_back)
{
    int a, b;
    test_tcp_pair(AF_INET, &a, &b);
    struct lis l;
    lis_init(&l, L_REJECT);
    struct emu_listener *ls = NULL;
    ck_assert_int_eq(emu_listener_adopt(E2, b, &adopt_lops, &l, &ls), 0);
    struct side cs;
    side_init(&cs);
    struct emu_conn *c = NULL;
    ck_assert_int_eq(emu_conn_connect_fd(E1, a, NULL, NULL, 0, &ops_plain, &cs, &c), 0);
    ck_assert(side_wait(&cs, 1, 5000));
    ck_assert_int_eq(side_type(&cs, 0), EMU_CONN_PEER_REJECTED);
    ck_assert(fd_open(a));
    ck_assert_int_eq(fcntl(a, F_GETFL) & O_NONBLOCK, 0);
    emu_conn_free(c);
    emu_listener_free(ls);
    close(a);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("emu-conn-adopt");
    TCase *tc = tcase_create("adopt");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, adopted_both_sides);
    tcase_add_test(tc, socket_checks);
    tcase_add_test(tc, listener_free_gives_back);
    tcase_add_test(tc, listener_lost);
    tcase_add_test(tc, connect_fd_rejected_gives_back);
    suite_add_tcase(s, tc);
    return conn_fixture_main(s);
}
