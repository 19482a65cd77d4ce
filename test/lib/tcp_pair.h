/* Both ends of a TCP connection over the loopback of one family (AF_INET:
 * 127.0.0.1, AF_INET6: ::1), for Check tests that drive sockets
 * themselves: *a connected, *b accepted, the listener closed. Header-only:
 * the emu tests link no provider code. */
#ifndef SOFTDAT_TEST_LIB_TCP_PAIR_H
#define SOFTDAT_TEST_LIB_TCP_PAIR_H

#include <arpa/inet.h>
#include <check.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static inline void test_tcp_pair(int family, int *a, int *b)
{
    int l = socket(family, SOCK_STREAM, 0);
    ck_assert_int_ge(l, 0);
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    socklen_t len;
    if (family == AF_INET) {
        struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
        s4->sin_family = AF_INET;
        s4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        len = sizeof *s4;
    } else {
        struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
        s6->sin6_family = AF_INET6;
        s6->sin6_addr = in6addr_loopback;
        len = sizeof *s6;
    }
    ck_assert_int_eq(bind(l, (struct sockaddr *)&ss, len), 0);
    ck_assert_int_eq(listen(l, 1), 0);
    socklen_t sl = sizeof ss;
    ck_assert_int_eq(getsockname(l, (struct sockaddr *)&ss, &sl), 0);
    *a = socket(family, SOCK_STREAM, 0);
    ck_assert_int_ge(*a, 0);
    ck_assert_int_eq(connect(*a, (struct sockaddr *)&ss, sl), 0);
    *b = accept(l, NULL, NULL);
    ck_assert_int_ge(*b, 0);
    close(l);
}

#endif
