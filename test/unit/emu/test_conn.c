/* emu/conn: listeners, MPA v2 handshake, accept/reject, events, teardown.
 * Two engines in one process talk over 127.0.0.1 / ::1. Raw-socket and
 * hostile-peer cases: test_conn_wire.c; capability marker: test_conn_caps.c. */
#include "test/lib/conn_fixture.h"
#include <string.h>
#include <stdlib.h>
#include <stdio.h>

#include <netinet/tcp.h>

/* ---------------------------------------------------------------- tests */

START_TEST(connect_accept_pdata_and_data)
{
    struct lis l;
    lis_init(&l, L_MANUAL);
    struct emu_listener *ls = listen4(&l);
    struct side a, p;
    side_init(&a);
    side_init(&p);
    struct emu_conn_params ap = {.ird = 4, .ord = 8, .timeout_us = 5000000, .crc = EMU_CRC_AUTO};
    struct emu_conn *ac = connect4(emu_listener_port(ls), &ap, "hello", 5, &ops_rx, &a);

    ck_assert(lis_wait(&l, 1, 5000));
    ck_assert_int_eq(l.pdlen, 5);
    ck_assert(memcmp(l.pd, "hello", 5) == 0);
    ck_assert_msg(strncmp(l.peer, "127.0.0.1:", 10) == 0, "peer %s", l.peer);
    ck_assert_uint_eq(l.peer_ird, 4);
    ck_assert_uint_eq(l.peer_ord, 8);
    ck_assert(l.peer_marker); /* stripped from the pdata above */
    ck_assert_uint_eq(l.peer_caps, EMU_CONN_CAPS_LOCAL);
    uint16_t rl = 0;
    ck_assert(memcmp(emu_conn_request_pdata(lis_req(&l, 0), &rl), "hello", 5) == 0);
    ck_assert_uint_eq(rl, 5);
    /* active side must not be established before the accept */
    sleep_ms(50);
    ck_assert_int_eq(side_n(&a), 0);

    struct emu_conn *pc = lis_req(&l, 0);
    p.c = pc;
    struct emu_conn_params pp = {.ird = 16, .ord = 2, .crc = EMU_CRC_AUTO};
    ck_assert_int_eq(emu_conn_accept(pc, &pp, "world!", 6, &ops_rx, &p), 0);
    ck_assert_int_eq(emu_conn_accept(pc, &pp, NULL, 0, &ops_rx, &p), -EALREADY);
    ck_assert(side_wait(&a, 1, 5000));
    ck_assert(side_wait(&p, 1, 5000));
    ck_assert_int_eq(a.ev[0].type, EMU_CONN_ESTABLISHED);
    ck_assert_int_eq(a.ev[0].len, 6);
    ck_assert(memcmp(a.ev[0].pd, "world!", 6) == 0);
    ck_assert_int_eq(p.ev[0].type, EMU_CONN_ESTABLISHED);
    ck_assert_int_eq(p.ev[0].len, 0);

    struct emu_conn_info ai, pi;
    ck_assert_int_eq(emu_conn_get_info(ac, &ai), 0);
    ck_assert_int_eq(emu_conn_get_info(pc, &pi), 0);
    ck_assert(ai.initiator && !pi.initiator);
    ck_assert(!ai.crc && !pi.crc); /* auto: both ends loopback */
    ck_assert(ai.p2p && pi.p2p);
    ck_assert_int_eq(ai.rtr, EMU_MPA_RTR_WRITE);
    ck_assert_int_eq(pi.rtr, EMU_MPA_RTR_WRITE);
    ck_assert_uint_eq(ai.mpa_rev, 2);
    ck_assert_uint_eq(pi.ord, 2);  /* min(our ord 2, initiator ird 4) */
    ck_assert_uint_eq(pi.ird, 16);
    ck_assert_uint_eq(ai.ord, 8);  /* initiator ord 8 <= responder ird 16 */
    ck_assert_uint_eq(ai.ird, 4);
    ck_assert_uint_eq(ai.caps, EMU_CONN_CAP_ATOMICS | EMU_CONN_CAP_IMM);
    ck_assert_uint_eq(pi.caps, EMU_CONN_CAP_ATOMICS | EMU_CONN_CAP_IMM);
    ck_assert_uint_gt(ai.mulpdu, 1000);
    ck_assert_int_ge(ai.fd, 0);
    ck_assert_uint_eq(emu_sockaddr_port((struct sockaddr *)&ai.peer), emu_listener_port(ls));

    /* After the RTR either side may send first; bytes arrive intact. */
    struct iovec v[2] = {{"pas", 3}, {"sive", 4}};
    ck_assert_int_eq(emu_conn_writev(pc, v, 2), 7);
    ck_assert(side_wait_rx(&a, 7, 5000));
    ck_assert(memcmp(a.rx, "passive", 7) == 0);
    struct iovec w = {"active", 6};
    ck_assert_int_eq(emu_conn_writev(ac, &w, 1), 6);
    ck_assert(side_wait_rx(&p, 6, 5000));
    ck_assert(memcmp(p.rx, "active", 6) == 0);

    /* graceful from the active side: one DISCONNECTED each */
    ck_assert_int_eq(emu_conn_disconnect(ac, true), 0);
    ck_assert(side_wait(&a, 2, 5000));
    ck_assert(side_wait(&p, 2, 5000));
    ck_assert_int_eq(a.ev[1].type, EMU_CONN_DISCONNECTED);
    ck_assert_int_eq(a.ev[1].err, 0);
    ck_assert_int_eq(p.ev[1].type, EMU_CONN_DISCONNECTED);
    ck_assert_int_eq(emu_conn_writev(ac, &w, 1), -ENOTCONN);
    ck_assert_int_eq(emu_conn_disconnect(ac, false), 0); /* terminal: no-op */
    sleep_ms(100);
    ck_assert_int_eq(side_n(&a), 2);
    ck_assert_int_eq(side_n(&p), 2);
    emu_conn_free(ac);
    emu_conn_free(pc);
    emu_listener_free(ls);
}
END_TEST

START_TEST(pdata_sizes)
{
    static const uint16_t sizes[] = {0, 1, 64, EMU_CONN_PDATA_MAX};
    uint8_t big[EMU_CONN_PDATA_MAX + 1], back[EMU_CONN_PDATA_MAX];
    for (int i = 0; i < (int)sizeof big; i++)
        big[i] = (uint8_t)(i * 7 + 1);
    for (int i = 0; i < (int)sizeof back; i++)
        back[i] = (uint8_t)(255 - i);
    struct lis l;
    lis_init(&l, L_MANUAL);
    struct emu_listener *ls = listen4(&l);
    struct sockaddr_in dst = a4(emu_listener_port(ls));
    struct emu_conn *bad = NULL;
    ck_assert_int_eq(emu_conn_connect(E1, (struct sockaddr *)&dst, sizeof dst, NULL, 0, NULL, big,
                                      EMU_CONN_PDATA_MAX + 1, &ops_plain, NULL, &bad),
                     -EINVAL);
    ck_assert_ptr_null(bad);
    for (int k = 0; k < 4; k++) {
        uint16_t sz = sizes[k];
        struct side a, p;
        side_init(&a);
        side_init(&p);
        struct emu_conn *ac = connect4(emu_listener_port(ls), NULL, sz ? big : NULL, sz,
                                       &ops_plain, &a);
        ck_assert(lis_wait(&l, k + 1, 5000));
        ck_assert_int_eq(l.pdlen, sz);
        ck_assert(memcmp(l.pd, big, sz) == 0);
        struct emu_conn *pc = lis_req(&l, k);
        ck_assert_int_eq(emu_conn_accept(pc, NULL, back, EMU_CONN_PDATA_MAX + 1, &ops_plain, &p),
                         -EINVAL);
        ck_assert_int_eq(emu_conn_accept(pc, NULL, sz ? back : NULL, sz, &ops_plain, &p), 0);
        ck_assert(side_wait(&a, 1, 5000));
        ck_assert(side_wait(&p, 1, 5000));
        ck_assert_int_eq(a.ev[0].type, EMU_CONN_ESTABLISHED);
        ck_assert_int_eq(a.ev[0].len, sz);
        ck_assert(memcmp(a.ev[0].pd, back, sz) == 0);
        ck_assert_int_eq(p.ev[0].type, EMU_CONN_ESTABLISHED);
        emu_conn_free(ac); /* abortive close, no local event */
        ck_assert_int_eq(a.detached, 0);
        ck_assert(side_wait(&p, 2, 5000));
        ck_assert_int_eq(p.ev[1].type, EMU_CONN_DISCONNECTED);
        ck_assert_int_eq(side_n(&a), 1);
        emu_conn_free(pc);
    }
    emu_listener_free(ls);
}
END_TEST

START_TEST(reject_with_pdata)
{
    struct lis l;
    lis_init(&l, L_MANUAL);
    struct emu_listener *ls = listen4(&l);
    for (int k = 0; k < 2; k++) {
        struct side a;
        side_init(&a);
        struct emu_conn *ac = connect4(emu_listener_port(ls), NULL, "knock", 5, &ops_plain, &a);
        ck_assert(lis_wait(&l, k + 1, 5000));
        struct emu_conn *pc = lis_req(&l, k);
        if (k == 0) {
            ck_assert_int_eq(emu_conn_reject(pc, "go away", 7), 0);
        } else {
            ck_assert_int_eq(emu_conn_reject(pc, NULL, 0), 0);
        }
        ck_assert(side_wait(&a, 1, 5000));
        ck_assert_int_eq(a.ev[0].type, EMU_CONN_PEER_REJECTED);
        if (k == 0) {
            ck_assert_int_eq(a.ev[0].len, 7);
            ck_assert(memcmp(a.ev[0].pd, "go away", 7) == 0);
        } else {
            ck_assert_int_eq(a.ev[0].len, 0);
        }
        sleep_ms(50);
        ck_assert_int_eq(side_n(&a), 1);
        emu_conn_free(ac);
    }
    /* rejecting from inside the listener callback */
    l.mode = L_REJECT;
    memcpy(l.apd, "full", 4);
    l.apd_len = 4;
    struct side a;
    side_init(&a);
    struct emu_conn *ac = connect4(emu_listener_port(ls), NULL, NULL, 0, &ops_plain, &a);
    ck_assert(side_wait(&a, 1, 5000));
    ck_assert_int_eq(a.ev[0].type, EMU_CONN_PEER_REJECTED);
    ck_assert_int_eq(a.ev[0].len, 4);
    emu_conn_free(ac);
    emu_listener_free(ls);
}
END_TEST

START_TEST(closed_port_is_non_peer_reject)
{
    struct lis l;
    lis_init(&l, L_MANUAL);
    struct emu_listener *ls = listen4(&l);
    uint16_t port = emu_listener_port(ls);
    emu_listener_free(ls);
    struct side a;
    side_init(&a);
    struct emu_conn *ac = connect4(port, NULL, "x", 1, &ops_plain, &a);
    ck_assert(side_wait(&a, 1, 5000));
    ck_assert_int_eq(a.ev[0].type, EMU_CONN_NON_PEER_REJECTED);
    ck_assert_int_eq(a.ev[0].err, ECONNREFUSED);
    sleep_ms(50);
    ck_assert_int_eq(side_n(&a), 1);
    emu_conn_free(ac);
}
END_TEST

START_TEST(timeout_when_owner_never_answers)
{
    struct lis l;
    lis_init(&l, L_MANUAL);
    struct emu_listener *ls = listen4(&l);
    struct side a, p;
    side_init(&a);
    side_init(&p);
    struct emu_conn_params ap = {.timeout_us = 200000};
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    struct emu_conn *ac = connect4(emu_listener_port(ls), &ap, NULL, 0, &ops_plain, &a);
    ck_assert(lis_wait(&l, 1, 5000));
    ck_assert(side_wait(&a, 1, 5000));
    clock_gettime(CLOCK_MONOTONIC, &t1);
    long ms = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
    ck_assert_int_eq(a.ev[0].type, EMU_CONN_TIMED_OUT);
    ck_assert_int_ge(ms, 190);
    ck_assert_int_lt(ms, 3000);
    /* The late accept finds the initiator gone. */
    sleep_ms(50);
    struct emu_conn *pc = lis_req(&l, 0);
    ck_assert_int_eq(emu_conn_accept(pc, NULL, NULL, 0, &ops_plain, &p), 0);
    ck_assert(side_wait(&p, 1, 5000));
    ck_assert_int_eq(p.ev[0].type, EMU_CONN_ACCEPT_ERROR);
    sleep_ms(50);
    ck_assert_int_eq(side_n(&a), 1);
    ck_assert_int_eq(side_n(&p), 1);
    emu_conn_free(ac);
    emu_conn_free(pc);
    emu_listener_free(ls);
}
END_TEST

START_TEST(disconnect_matrix)
{
    /* _i: 0 active graceful, 1 passive graceful, 2 active abrupt, 3 passive abrupt;
     * with and without an rx hook */
    for (int hook = 0; hook < 2; hook++) {
        struct pair x;
        pair_up(&x, hook ? &ops_rx : &ops_plain);
        bool graceful = _i < 2;
        struct emu_conn *who = (_i % 2) == 0 ? x.ac : x.p[0].c;
        ck_assert_int_eq(emu_conn_disconnect(who, graceful), 0);
        ck_assert_int_eq(emu_conn_disconnect(who, graceful), 0); /* repeat: harmless */
        check_one_terminal(&x.a, EMU_CONN_DISCONNECTED);
        check_one_terminal(&x.p[0], EMU_CONN_DISCONNECTED);
        if (hook) {
            /* the data path let go of the fd once, before the terminal event */
            ck_assert_int_eq(x.a.detached, 1);
            ck_assert_int_eq(x.a.events_at_detach, 1);
            ck_assert_int_eq(x.p[0].detached, 1);
            ck_assert_int_eq(x.p[0].events_at_detach, 1);
        }
        pair_down(&x);
    }
}
END_TEST

START_TEST(fail_is_broken_peer_disconnected)
{
    struct pair x;
    pair_up(&x, &ops_plain);
    ck_assert_int_eq(emu_conn_fail(x.ac, EPROTO), 0);
    check_one_terminal(&x.a, EMU_CONN_BROKEN);
    ck_assert_int_eq(x.a.ev[1].err, EPROTO);
    check_one_terminal(&x.p[0], EMU_CONN_DISCONNECTED);
    pair_down(&x);
}
END_TEST

START_TEST(simultaneous_disconnects)
{
    for (int i = 0; i < 10; i++) {
        struct pair x;
        pair_up(&x, &ops_rx);
        emu_conn_disconnect(x.ac, i % 2);
        emu_conn_disconnect(x.p[0].c, i % 3 == 0);
        emu_conn_fail(x.ac, EIO); /* may lose the race: still one terminal */
        ck_assert(side_wait(&x.a, 2, 5000));
        ck_assert(side_wait(&x.p[0], 2, 5000));
        sleep_ms(30);
        ck_assert_int_eq(side_n(&x.a), 2);
        ck_assert_int_eq(side_n(&x.p[0]), 2);
        pair_down(&x);
    }
}
END_TEST

START_TEST(ipv6_loopback)
{
    struct lis l;
    lis_init(&l, L_ACCEPT);
    struct side a, p;
    side_init(&a);
    side_init(&p);
    l.sides = &p;
    l.nsides = 1;
    memcpy(l.apd, "v6", 2);
    l.apd_len = 2;
    struct sockaddr_in6 la = a6(0);
    struct emu_listener *ls = NULL;
    int rc = emu_listener_create(E2, (struct sockaddr *)&la, sizeof la, 0, &lops, &l, &ls);
    if (rc == -EADDRNOTAVAIL || rc == -EAFNOSUPPORT)
        return; /* no IPv6 on this host */
    ck_assert_int_eq(rc, 0);
    struct sockaddr_in6 dst = a6(emu_listener_port(ls));
    struct emu_conn *ac = NULL;
    ck_assert_int_eq(emu_conn_connect(E1, (struct sockaddr *)&dst, sizeof dst, NULL, 0, NULL,
                                      "six", 3, &ops_plain, &a, &ac),
                     0);
    ck_assert(side_wait(&a, 1, 5000));
    ck_assert(side_wait(&p, 1, 5000));
    ck_assert_int_eq(a.ev[0].type, EMU_CONN_ESTABLISHED);
    ck_assert_int_eq(a.ev[0].len, 2);
    ck_assert_msg(strncmp(l.peer, "[::1]:", 6) == 0, "peer %s", l.peer);
    struct emu_conn_info ai;
    ck_assert_int_eq(emu_conn_get_info(ac, &ai), 0);
    ck_assert_int_eq(ai.peer.ss_family, AF_INET6);
    ck_assert(!ai.crc);
    /* The passive side's addresses come from its listener and accept4:
     * the same bytes the socket reports. */
    struct emu_conn_info pi;
    ck_assert_int_eq(emu_conn_get_info(p.c, &pi), 0);
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    ck_assert_int_eq(getsockname(pi.fd, (struct sockaddr *)&ss, &sl), 0);
    ck_assert_int_eq(pi.local_len, sl);
    ck_assert(memcmp(&pi.local, &ss, sl) == 0);
    sl = sizeof ss;
    ck_assert_int_eq(getpeername(pi.fd, (struct sockaddr *)&ss, &sl), 0);
    ck_assert_int_eq(pi.peer_len, sl);
    ck_assert(memcmp(&pi.peer, &ss, sl) == 0);
    ck_assert_int_eq(emu_conn_disconnect(p.c, true), 0);
    check_one_terminal(&a, EMU_CONN_DISCONNECTED);
    check_one_terminal(&p, EMU_CONN_DISCONNECTED);
    emu_conn_free(ac);
    emu_conn_free(p.c);
    emu_listener_free(ls);
}
END_TEST

START_TEST(crc_negotiation)
{
    /* on at either end -> on at both ends */
    for (int k = 0; k < 2; k++) {
        struct lis l;
        lis_init(&l, L_ACCEPT);
        struct side a, p;
        side_init(&a);
        side_init(&p);
        l.sides = &p;
        l.nsides = 1;
        l.params.crc = k == 0 ? EMU_CRC_OFF : EMU_CRC_ON;
        l.ops = &ops_rx;
        struct emu_listener *ls = listen4(&l);
        struct emu_conn_params ap = {.crc = k == 0 ? EMU_CRC_ON : EMU_CRC_OFF};
        struct emu_conn *ac = connect4(emu_listener_port(ls), &ap, "c", 1, &ops_rx, &a);
        ck_assert(side_wait(&a, 1, 5000));
        ck_assert(side_wait(&p, 1, 5000));
        ck_assert_int_eq(a.ev[0].type, EMU_CONN_ESTABLISHED);
        ck_assert_int_eq(p.ev[0].type, EMU_CONN_ESTABLISHED); /* RTR CRC checked */
        struct emu_conn_info ai, pi;
        emu_conn_get_info(ac, &ai);
        emu_conn_get_info(p.c, &pi);
        ck_assert(ai.crc && pi.crc);
        emu_conn_free(ac);
        emu_conn_free(p.c);
        emu_listener_free(ls);
    }
}
END_TEST

/* The congestion control of a connection's sockets, both ends:
 * SOFTDAT_TCP_CONGESTION unset picks reno on loopback (no pacing),
 * "system" leaves the kernel's default, a name the kernel refuses leaves
 * it too, and the connection works either way. */
static void cc_of(struct emu_conn *c, char *out, size_t cap)
{
    struct emu_conn_info ci;
    ck_assert_int_eq(emu_conn_get_info(c, &ci), 0);
    socklen_t len = (socklen_t)cap;
    memset(out, 0, cap);
    ck_assert_int_eq(getsockopt(ci.fd, IPPROTO_TCP, TCP_CONGESTION, out, &len), 0);
}

START_TEST(loopback_congestion_control)
{
    char sys[32] = "", a[32], p[32];
    FILE *f = fopen("/proc/sys/net/ipv4/tcp_congestion_control", "r");
    if (f != NULL) {
        if (fgets(sys, sizeof sys, f) != NULL)
            sys[strcspn(sys, "\n")] = '\0';
        fclose(f);
    }
    static const char *const env[] = {NULL, "system", "no-such-algorithm"};
    for (int k = 0; k < 3; k++) {
        if (env[k])
            setenv("SOFTDAT_TCP_CONGESTION", env[k], 1);
        else
            unsetenv("SOFTDAT_TCP_CONGESTION");
        struct pair x;
        pair_up(&x, &ops_rx);
        cc_of(x.ac, a, sizeof a);
        cc_of(x.p[0].c, p, sizeof p);
        const char *want = k == 0 ? "reno" : sys;
        if (*want) {
            ck_assert_str_eq(a, want);
            ck_assert_str_eq(p, want);
        }
        struct iovec w = {(void *)"ping", 4};
        ck_assert_int_eq(emu_conn_writev(x.ac, &w, 1), 4);
        ck_assert(side_wait_rx(&x.p[0], 4, 5000));
        pair_down(&x);
    }
    unsetenv("SOFTDAT_TCP_CONGESTION");
}
END_TEST

/* The receive buffer of a connection's sockets, both ends: the choice
 * (emu_tcp_rcvbuf_choice) for each setting, then real loopback
 * connections: SOFTDAT_TCP_RCVBUF unset gives both ends the fixed buffer
 * when net.core.rmem_max allows at least 1 MiB (the kernel reports twice
 * what was asked), "system" and a value the kernel takes give what they
 * say, and the connection works either way. */
static long rcvbuf_of(struct emu_conn *c)
{
    struct emu_conn_info ci;
    ck_assert_int_eq(emu_conn_get_info(c, &ci), 0);
    int v = 0;
    socklen_t len = sizeof v;
    ck_assert_int_eq(getsockopt(ci.fd, SOL_SOCKET, SO_RCVBUF, &v, &len), 0);
    return v;
}

START_TEST(loopback_receive_buffer)
{
    const long M = 1L << 20;
    ck_assert_int_eq(emu_tcp_rcvbuf_choice(NULL, true, 4 * M), 4 * M);
    ck_assert_int_eq(emu_tcp_rcvbuf_choice("auto", true, 32 * M), 4 * M);
    ck_assert_int_eq(emu_tcp_rcvbuf_choice(NULL, true, 2 * M), 2 * M);
    ck_assert_int_eq(emu_tcp_rcvbuf_choice(NULL, true, 212992), 0); /* Debian's default rmem_max */
    ck_assert_int_eq(emu_tcp_rcvbuf_choice(NULL, false, 4 * M), 0);
    ck_assert_int_eq(emu_tcp_rcvbuf_choice("system", true, 4 * M), 0);
    ck_assert_int_eq(emu_tcp_rcvbuf_choice("262144", false, 4 * M), 262144);
    ck_assert_int_eq(emu_tcp_rcvbuf_choice("12x", true, 4 * M), -1);
    ck_assert_int_eq(emu_tcp_rcvbuf_choice("100", true, 4 * M), -1);

    long rmem_max = 0;
    FILE *f = fopen("/proc/sys/net/core/rmem_max", "r");
    if (f != NULL) {
        if (fscanf(f, "%ld", &rmem_max) != 1)
            rmem_max = 0;
        fclose(f);
    }
    static const char *const env[] = {NULL, "system", "262144"};
    for (int k = 0; k < 3; k++) {
        if (env[k])
            setenv("SOFTDAT_TCP_RCVBUF", env[k], 1);
        else
            unsetenv("SOFTDAT_TCP_RCVBUF");
        struct pair x;
        pair_up(&x, &ops_rx);
        long a = rcvbuf_of(x.ac), p = rcvbuf_of(x.p[0].c);
        long asked = emu_tcp_rcvbuf_choice(env[k], true, rmem_max);
        if (asked > rmem_max)
            asked = rmem_max; /* the kernel caps what it is asked */
        if (asked > 0) {
            ck_assert_int_eq(a, 2 * asked);
            ck_assert_int_eq(p, 2 * asked);
        } else {
            /* The kernel's own tuning: it starts from tcp_rmem's default,
             * nowhere near a fixed multi-MiB buffer. */
            ck_assert_int_lt(a, 2 * M);
            ck_assert_int_lt(p, 2 * M);
        }
        struct iovec w = {(void *)"ping", 4};
        ck_assert_int_eq(emu_conn_writev(x.ac, &w, 1), 4);
        ck_assert(side_wait_rx(&x.p[0], 4, 5000));
        pair_down(&x);
    }
    unsetenv("SOFTDAT_TCP_RCVBUF");
}
END_TEST

START_TEST(many_connections)
{
    enum { N = 200 };
    static struct side as[N], ps[N];
    struct lis *l = calloc(1, sizeof *l);
    lis_init(l, L_ACCEPT);
    l->sides = ps;
    l->nsides = N;
    memcpy(l->apd, "acc", 3);
    l->apd_len = 3;
    for (int i = 0; i < N; i++) {
        side_init(&as[i]);
        side_init(&ps[i]);
    }
    struct emu_listener *ls = listen4(l);
    for (int i = 0; i < N; i++) {
        char pd[16];
        int len = snprintf(pd, sizeof pd, "c%d", i);
        connect4(emu_listener_port(ls), NULL, pd, (uint16_t)len, &ops_plain, &as[i]);
    }
    for (int i = 0; i < N; i++) {
        ck_assert_msg(side_wait(&as[i], 1, 10000), "conn %d", i);
        ck_assert_int_eq(as[i].ev[0].type, EMU_CONN_ESTABLISHED);
        ck_assert_int_eq(as[i].ev[0].len, 3);
    }
    for (int i = 0; i < N; i++) {
        ck_assert(side_wait(&ps[i], 1, 10000));
        ck_assert_int_eq(ps[i].ev[0].type, EMU_CONN_ESTABLISHED);
    }
    ck_assert_int_eq(l->accept_rc, 0);
    for (int i = 0; i < N; i++)
        emu_conn_disconnect(as[i].c, i % 2 == 0);
    for (int i = 0; i < N; i++) {
        ck_assert(side_wait(&as[i], 2, 10000));
        ck_assert(side_wait(&ps[i], 2, 10000));
    }
    sleep_ms(100);
    for (int i = 0; i < N; i++) {
        ck_assert_int_eq(side_n(&as[i]), 2);
        ck_assert_int_eq(side_n(&ps[i]), 2);
        ck_assert_int_eq(side_type(&as[i], 1), EMU_CONN_DISCONNECTED);
        ck_assert_int_eq(side_type(&ps[i], 1), EMU_CONN_DISCONNECTED);
        emu_conn_free(as[i].c);
        emu_conn_free(ps[i].c);
    }
    emu_listener_free(ls);
    free(l);
}
END_TEST

START_TEST(listener_freed_in_its_callback)
{
    struct lis l;
    lis_init(&l, L_RSP);
    struct side p, a, b;
    side_init(&p);
    side_init(&a);
    side_init(&b);
    l.sides = &p;
    l.nsides = 1;
    struct emu_listener *ls = listen4(&l);
    uint16_t port = emu_listener_port(ls);
    struct emu_conn *ac = connect4(port, NULL, NULL, 0, &ops_plain, &a);
    ck_assert(side_wait(&a, 1, 5000));
    ck_assert_int_eq(a.ev[0].type, EMU_CONN_ESTABLISHED);
    ck_assert(side_wait(&p, 1, 5000));
    /* the listener is gone: the next initiator finds no one */
    struct emu_conn *bc = connect4(port, NULL, NULL, 0, &ops_plain, &b);
    ck_assert(side_wait(&b, 1, 5000));
    ck_assert_int_eq(b.ev[0].type, EMU_CONN_NON_PEER_REJECTED);
    ck_assert_int_eq(l.n, 1);
    emu_conn_free(ac);
    emu_conn_free(bc);
    emu_conn_free(p.c);
}
END_TEST

START_TEST(free_in_any_state)
{
    struct lis l;
    lis_init(&l, L_MANUAL);
    struct emu_listener *ls = listen4(&l);
    uint16_t port = emu_listener_port(ls);
    /* freed before the connect job can even run, and while waiting for a Reply */
    for (int i = 0; i < 20; i++) {
        struct side a;
        side_init(&a);
        struct emu_conn *ac = connect4(port, NULL, NULL, 0, &ops_plain, &a);
        if (i % 2)
            ck_assert(lis_wait(&l, (i + 1) / 2, 5000));
        emu_conn_free(ac);
        ck_assert_int_eq(side_n(&a), 0);
    }
    /* pending requests: free them unanswered */
    ck_assert(lis_wait(&l, 10, 5000));
    sleep_ms(50);
    for (int i = 0; i < l.n && i < 20; i++)
        emu_conn_free(lis_req(&l, i));
    /* free from inside the ESTABLISHED callback, on both sides */
    struct side a, p;
    side_init(&a);
    side_init(&p);
    a.free_on_established = true;
    p.free_on_established = true;
    int n0 = l.n;
    connect4(port, NULL, NULL, 0, &ops_plain, &a);
    ck_assert(lis_wait(&l, n0 + 1, 5000));
    ck_assert_int_eq(emu_conn_accept(lis_req(&l, n0), NULL, NULL, 0, &ops_plain, &p), 0);
    ck_assert(side_wait(&a, 1, 5000));
    ck_assert(side_wait(&p, 1, 5000));
    sleep_ms(100);
    ck_assert_int_eq(side_n(&a), 1);
    ck_assert_int_eq(side_n(&p), 1);
    emu_listener_free(ls);
}
END_TEST

START_TEST(listener_errors_and_ranges)
{
    struct lis l;
    lis_init(&l, L_MANUAL);
    struct emu_listener *ls = listen4(&l), *ls2 = NULL;
    uint16_t port = emu_listener_port(ls);
    struct sockaddr_in a = a4(0);
    ck_assert_int_eq(emu_listener_create(E2, (struct sockaddr *)&a, sizeof a, port, &lops, &l,
                                         &ls2),
                     -EADDRINUSE);
    ck_assert_ptr_null(ls2);
    /* an address that is not ours (TEST-NET-1, nothing is sent) */
    struct sockaddr_in far = {.sin_family = AF_INET};
    inet_pton(AF_INET, "192.0.2.1", &far.sin_addr);
    ck_assert_int_eq(emu_listener_create(E2, (struct sockaddr *)&far, sizeof far, 0, &lops, &l,
                                         &ls2),
                     -EADDRNOTAVAIL);
    struct sockaddr bad = {.sa_family = AF_UNIX};
    ck_assert_int_eq(emu_listener_create(E2, &bad, sizeof bad, 0, &lops, &l, &ls2),
                     -EAFNOSUPPORT);
    ck_assert_int_eq(emu_listener_create(E2, (struct sockaddr *)&a, sizeof a, 0, NULL, &l, &ls2),
                     -EINVAL);

    /* range [port, port+3] with port itself taken */
    struct emu_listener *r[5] = {0};
    int made = 0;
    for (int i = 0; i < 5; i++) {
        int rc = emu_listener_create_range(E2, (struct sockaddr *)&a, sizeof a, port,
                                           (uint16_t)(port + 3), &lops, &l, &r[i]);
        if (rc == -EADDRINUSE)
            break;
        ck_assert_int_eq(rc, 0);
        uint16_t q = emu_listener_port(r[i]);
        ck_assert(q > port && q <= port + 3);
        for (int j = 0; j < i; j++)
            ck_assert_uint_ne(q, emu_listener_port(r[j]));
        made++;
    }
    ck_assert_int_le(made, 3);
    ck_assert_int_ge(made, 1); /* (flaky only if 3 neighbours are busy) */
    ck_assert_int_eq(emu_listener_create_range(E2, (struct sockaddr *)&a, sizeof a, 10, 5, &lops,
                                               &l, &ls2),
                     -EINVAL);
    for (int i = 0; i < made; i++)
        emu_listener_free(r[i]);
    emu_listener_free(ls);
    /* the port is free again */
    ck_assert_int_eq(emu_listener_create(E2, (struct sockaddr *)&a, sizeof a, port, &lops, &l,
                                         &ls2),
                     0);
    emu_listener_free(ls2);
}
END_TEST

START_TEST(destroy_engines_with_live_connections)
{
    /* own engines: the fixture's are replaced */
    for (int round = 0; round < 3; round++) {
        struct lis *l = calloc(1, sizeof *l);
        lis_init(l, L_ACCEPT);
        struct side *ps = calloc(4, sizeof *ps), *as = calloc(6, sizeof *as);
        for (int i = 0; i < 4; i++)
            side_init(&ps[i]);
        for (int i = 0; i < 6; i++)
            side_init(&as[i]);
        l->sides = ps;
        l->nsides = 3; /* the 4th request stays unanswered */
        struct emu_listener *ls = listen4(l);
        for (int i = 0; i < 4; i++)
            connect4(emu_listener_port(ls), NULL, NULL, 0, &ops_rx, &as[i]);
        for (int i = 0; i < 3; i++)
            ck_assert(side_wait(&as[i], 1, 5000));
        ck_assert(lis_wait(l, 4, 5000));
        /* one connecting to nowhere-answering, one half-closed */
        struct emu_listener *ls2 = listen4(l);
        connect4(emu_listener_port(ls2), NULL, NULL, 0, &ops_plain, &as[4]);
        emu_conn_disconnect(as[0].c, true);
        emu_engine_destroy(E1);
        emu_engine_destroy(E2);
        setup();
        free(l);
        free(ps);
        free(as);
    }
}
END_TEST

/* ---------------------------------------------------------------- abrupt disconnect keeps data */

struct sink {
    pthread_mutex_t m;
    pthread_cond_t cv;
    bool hold;
    uint64_t got;
    bool bad;
};

static struct sink g_sink;

/* Counting rx hook; the first call blocks (bounded) while hold is set, so
 * the bytes pile up in the socket buffers. */
static int on_rx_count(struct emu_conn *c, int fd, void *ctx)
{
    (void)c;
    (void)ctx;
    struct sink *k = &g_sink;
    struct timespec ts;
    deadline(&ts, 10000);
    pthread_mutex_lock(&k->m);
    while (k->hold)
        if (pthread_cond_timedwait(&k->cv, &k->m, &ts) != 0)
            break;
    pthread_mutex_unlock(&k->m);
    static uint8_t buf[65536];
    int rc = EMU_RX_OK;
    for (int i = 0; i < 64; i++) {
        ssize_t n = recv(fd, buf, sizeof buf, 0);
        if (n > 0) {
            pthread_mutex_lock(&k->m);
            for (ssize_t j = 0; j < n; j++)
                if (buf[j] != (uint8_t)((k->got + (uint64_t)j) * 13))
                    k->bad = true;
            k->got += (uint64_t)n;
            pthread_cond_broadcast(&k->cv);
            pthread_mutex_unlock(&k->m);
            continue;
        }
        if (n == 0)
            rc = EMU_RX_EOF;
        else if (errno != EAGAIN)
            rc = -errno;
        break;
    }
    return rc;
}

static const struct emu_conn_ops ops_count = {.event = on_event, .rx = on_rx_count,
                                              .detach = on_detach};

START_TEST(abrupt_disconnect_delivers_written_bytes)
{
    /* _i 0: the owner keeps the conn until the end; 1: frees it right after
     * DISCONNECTED (the engine finishes the linger on its own); 2: frees
     * the established conn without disconnecting (same wire behaviour, no
     * local event) */
    memset(&g_sink, 0, sizeof g_sink);
    pthread_mutex_init(&g_sink.m, NULL);
    pthread_cond_init(&g_sink.cv, NULL);
    g_sink.hold = true;
    struct lis l;
    lis_init(&l, L_ACCEPT);
    struct side a, p;
    side_init(&a);
    side_init(&p);
    l.sides = &p;
    l.nsides = 1;
    l.ops = &ops_count;
    struct emu_listener *ls = listen4(&l);
    struct emu_conn *ac = connect4(emu_listener_port(ls), NULL, NULL, 0, &ops_rx, &a);
    ck_assert(side_wait(&a, 1, 5000));
    ck_assert(side_wait(&p, 1, 5000));
    /* "Completed sends": everything the socket accepted, up to 16 MiB. */
    static uint8_t chunk[65536];
    uint64_t sent = 0;
    for (int i = 0; i < 256; i++) {
        for (size_t j = 0; j < sizeof chunk; j++)
            chunk[j] = (uint8_t)((sent + j) * 13);
        struct iovec v = {chunk, sizeof chunk};
        ssize_t n = emu_conn_writev(ac, &v, 1);
        if (n == -EAGAIN)
            break;
        ck_assert_int_gt(n, 0);
        sent += (uint64_t)n;
        if ((size_t)n < sizeof chunk)
            break;
    }
    ck_assert_uint_gt(sent, 65536);
    int a_events = 1;
    if (_i == 2) {
        emu_conn_free(ac);
        ac = NULL;
    } else {
        ck_assert_int_eq(emu_conn_disconnect(ac, false), 0);
        /* local side: DISCONNECTED at once, fd already let go of */
        ck_assert(side_wait(&a, 2, 2000));
        ck_assert_int_eq(a.ev[1].type, EMU_CONN_DISCONNECTED);
        ck_assert_int_eq(a.detached, 1);
        ck_assert_int_eq(a.events_at_detach, 1);
        a_events = 2;
        struct iovec v = {chunk, 1};
        ck_assert_int_eq(emu_conn_writev(ac, &v, 1), -ENOTCONN);
        struct emu_conn_info ai;
        ck_assert_int_eq(emu_conn_get_info(ac, &ai), -ENOTCONN);
    }
    if (_i == 1) {
        emu_conn_free(ac);
        ac = NULL;
    }
    sleep_ms(100);
    pthread_mutex_lock(&g_sink.m);
    g_sink.hold = false;
    pthread_cond_broadcast(&g_sink.cv);
    pthread_mutex_unlock(&g_sink.m);
    /* the peer reads every byte, then a clean EOF (FIN, not RST) */
    check_one_terminal(&p, EMU_CONN_DISCONNECTED);
    ck_assert_int_eq(p.ev[1].err, 0);
    pthread_mutex_lock(&g_sink.m);
    ck_assert_uint_eq(g_sink.got, sent);
    ck_assert(!g_sink.bad);
    pthread_mutex_unlock(&g_sink.m);
    sleep_ms(50);
    ck_assert_int_eq(side_n(&a), a_events); /* still exactly one terminal event (none if freed) */
    emu_conn_free(ac);
    emu_conn_free(p.c);
    emu_listener_free(ls);
}
END_TEST

/* ---------------------------------------------------------------- refused connect: retry window */

/* A port nobody listens on (just released by a listener of ours). */
static uint16_t free_port(void)
{
    struct lis l;
    lis_init(&l, L_MANUAL);
    struct emu_listener *ls = listen4(&l);
    uint16_t port = emu_listener_port(ls);
    emu_listener_free(ls);
    return port;
}

static long ms_since(const struct timespec *t0)
{
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (t1.tv_sec - t0->tv_sec) * 1000 + (t1.tv_nsec - t0->tv_nsec) / 1000000;
}

#define RETRY_WINDOW_MS ((long)(EMU_CONN_REFUSED_RETRY_US / 1000))

/* The connect starts before the server listens (dtestx's race): refused
 * TCP connects are retried, and the late listener is found. */
START_TEST(refused_retry_finds_late_listener)
{
    uint16_t port = free_port();
    struct side a, p;
    side_init(&a);
    side_init(&p);
    struct emu_conn_params ap = {.timeout_us = 5000000};
    struct emu_conn *ac = connect4(port, &ap, "early", 5, &ops_plain, &a);
    sleep_ms(30);
    ck_assert_int_eq(side_n(&a), 0); /* still retrying, nothing reported */
    struct lis l;
    lis_init(&l, L_ACCEPT);
    l.sides = &p;
    l.nsides = 1;
    struct sockaddr_in la = a4(0);
    struct emu_listener *ls = NULL;
    ck_assert_int_eq(emu_listener_create(E2, (struct sockaddr *)&la, sizeof la, port, &lops, &l,
                                         &ls),
                     0);
    ck_assert(side_wait(&a, 1, 5000));
    ck_assert_msg(a.ev[0].type == EMU_CONN_ESTABLISHED, "got %s",
                  emu_conn_event_name(a.ev[0].type));
    ck_assert(side_wait(&p, 1, 5000));
    ck_assert_int_eq(p.ev[0].type, EMU_CONN_ESTABLISHED);
    ck_assert_int_eq(l.pdlen, 5);
    ck_assert(memcmp(l.pd, "early", 5) == 0);
    ck_assert_int_eq(l.n, 1); /* the refused attempts never reached the owner */
    emu_conn_free(ac);
    emu_conn_free(p.c);
    emu_listener_free(ls);
}
END_TEST

/* Nobody ever listens: NON_PEER_REJECTED (ECONNREFUSED) once the window is
 * used up, not before, and only once. */
START_TEST(refused_retry_window_then_non_peer_reject)
{
    uint16_t port = free_port();
    struct side a;
    side_init(&a);
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    struct emu_conn *ac = connect4(port, NULL, NULL, 0, &ops_plain, &a);
    ck_assert(side_wait(&a, 1, 5000));
    long ms = ms_since(&t0);
    ck_assert_int_eq(a.ev[0].type, EMU_CONN_NON_PEER_REJECTED);
    ck_assert_int_eq(a.ev[0].err, ECONNREFUSED);
    ck_assert_msg(ms >= RETRY_WINDOW_MS - 5 && ms < RETRY_WINDOW_MS + 750,
                  "refused after %ld ms (window %ld)", ms, RETRY_WINDOW_MS);
    sleep_ms(50);
    ck_assert_int_eq(side_n(&a), 1);
    emu_conn_free(ac);
}
END_TEST

/* A connect timeout shorter than the window ends the retries at the
 * timeout. The host answered (RST), so it is still NON_PEER_REJECTED with
 * ECONNREFUSED: not UNREACHABLE (the host responded) nor TIMED_OUT (TCP
 * never connected, so no consumer was asked). */
START_TEST(refused_retry_capped_by_connect_timeout)
{
    uint16_t port = free_port();
    struct side a;
    side_init(&a);
    struct emu_conn_params ap = {.timeout_us = 40000};
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    struct emu_conn *ac = connect4(port, &ap, NULL, 0, &ops_plain, &a);
    ck_assert(side_wait(&a, 1, 5000));
    long ms = ms_since(&t0);
    ck_assert_int_eq(a.ev[0].type, EMU_CONN_NON_PEER_REJECTED);
    ck_assert_int_eq(a.ev[0].err, ECONNREFUSED);
    ck_assert_msg(ms >= 35 && ms < RETRY_WINDOW_MS - 20, "refused after %ld ms", ms);
    sleep_ms(RETRY_WINDOW_MS); /* the window's end brings nothing more */
    ck_assert_int_eq(side_n(&a), 1);
    emu_conn_free(ac);
}
END_TEST

/* Free, disconnect and engine destroy while waiting to retry. */
START_TEST(refused_retry_free_and_disconnect)
{
    uint16_t port = free_port();
    /* free: nothing is ever delivered */
    for (int i = 0; i < 6; i++) {
        struct side a;
        side_init(&a);
        struct emu_conn *ac = connect4(port, NULL, NULL, 0, &ops_plain, &a);
        sleep_ms(i * 7);
        emu_conn_free(ac);
        ck_assert_int_eq(side_n(&a), 0);
    }
    /* disconnect: exactly one DISCONNECTED, the window's end adds nothing */
    struct side d;
    side_init(&d);
    struct emu_conn *dc = connect4(port, NULL, NULL, 0, &ops_plain, &d);
    sleep_ms(20);
    ck_assert_int_eq(emu_conn_disconnect(dc, false), 0);
    ck_assert(side_wait(&d, 1, 5000));
    ck_assert_int_eq(d.ev[0].type, EMU_CONN_DISCONNECTED);
    sleep_ms(RETRY_WINDOW_MS + 50);
    ck_assert_int_eq(side_n(&d), 1);
    emu_conn_free(dc);
    /* left retrying: the fixture's engine destroy closes and frees it */
    static struct side z;
    side_init(&z);
    connect4(port, NULL, NULL, 0, &ops_plain, &z);
    sleep_ms(10);
}
END_TEST

/* ---------------------------------------------------------------- active sockets and TIME_WAIT */

/* Active sockets carry SO_REUSEADDR (with and without a local bind), so
 * their TIME_WAIT remnants do not block a later listener on that port:
 * Linux refuses the bind only if the TIME_WAIT socket lacked the flag. */
START_TEST(active_socket_reuseaddr_time_wait)
{
    for (int k = 0; k < 2; k++) {
        struct lis l;
        lis_init(&l, L_ACCEPT);
        struct side a, p;
        side_init(&a);
        side_init(&p);
        l.sides = &p;
        l.nsides = 1;
        struct emu_listener *ls = listen4(&l);
        struct sockaddr_in dst = a4(emu_listener_port(ls)), src = a4(0);
        struct emu_conn *ac = NULL;
        ck_assert_int_eq(emu_conn_connect(E1, (struct sockaddr *)&dst, sizeof dst,
                                          k ? (struct sockaddr *)&src : NULL, k ? sizeof src : 0,
                                          NULL, NULL, 0, &ops_plain, &a, &ac),
                         0);
        ck_assert(side_wait(&a, 1, 5000));
        ck_assert(side_wait(&p, 1, 5000));
        ck_assert_int_eq(a.ev[0].type, EMU_CONN_ESTABLISHED);
        struct emu_conn_info ai;
        ck_assert_int_eq(emu_conn_get_info(ac, &ai), 0);
        int on = 0;
        socklen_t sl = sizeof on;
        ck_assert_int_eq(getsockopt(ai.fd, SOL_SOCKET, SO_REUSEADDR, &on, &sl), 0);
        ck_assert_int_eq(on, 1);
        uint16_t lport = emu_sockaddr_port((struct sockaddr *)&ai.local);
        /* the active side closes first: its socket ends in TIME_WAIT */
        ck_assert_int_eq(emu_conn_disconnect(ac, true), 0);
        check_one_terminal(&a, EMU_CONN_DISCONNECTED);
        check_one_terminal(&p, EMU_CONN_DISCONNECTED);
        emu_conn_free(ac);
        emu_conn_free(p.c);
        emu_listener_free(ls);
        struct emu_listener *again = NULL;
        struct sockaddr_in la = a4(0);
        ck_assert_int_eq(emu_listener_create(E2, (struct sockaddr *)&la, sizeof la, lport, &lops,
                                             &l, &again),
                         0);
        emu_listener_free(again);
    }
}
END_TEST


/* The handshake's short cuts change nothing a consumer sees: the Request
 * leaves as soon as connect() returns on loopback (no write-readiness
 * round), the passive side takes its addresses from the listener and
 * accept4 instead of asking the socket, and its socket gets Nagle off,
 * keepalive and the user timeout from the listening socket instead of
 * being tuned itself. */
static int sockopt(int fd, int level, int name)
{
    int v = -1;
    socklen_t l = sizeof v;
    ck_assert_int_eq(getsockopt(fd, level, name, &v, &l), 0);
    return v;
}

static void same_addr(const struct sockaddr_storage *a, socklen_t alen, const struct sockaddr_storage *b,
                      socklen_t blen)
{
    ck_assert_int_eq(alen, blen);
    ck_assert(memcmp(a, b, alen) == 0);
}

START_TEST(handshake_short_cuts)
{
    struct pair x;
    pair_up(&x, &ops_rx);
    struct emu_conn_info ai, pi;
    ck_assert_int_eq(emu_conn_get_info(x.ac, &ai), 0);
    ck_assert_int_eq(emu_conn_get_info(x.p[0].c, &pi), 0);
    ck_assert(ai.request_early);
    ck_assert(!pi.request_early);
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    ck_assert_int_eq(getsockname(pi.fd, (struct sockaddr *)&ss, &sl), 0);
    same_addr(&pi.local, pi.local_len, &ss, sl);
    sl = sizeof ss;
    ck_assert_int_eq(getpeername(pi.fd, (struct sockaddr *)&ss, &sl), 0);
    same_addr(&pi.peer, pi.peer_len, &ss, sl);
    sl = sizeof ss;
    ck_assert_int_eq(getpeername(ai.fd, (struct sockaddr *)&ss, &sl), 0);
    same_addr(&ai.peer, ai.peer_len, &ss, sl);
    same_addr(&ai.local, ai.local_len, &pi.peer, pi.peer_len);
    ck_assert_uint_eq(ai.emss, pi.emss); /* the negotiated MSS, not SYN_SENT's guess */
    static const int opts[][2] = {{IPPROTO_TCP, TCP_NODELAY},   {SOL_SOCKET, SO_KEEPALIVE},
                                  {IPPROTO_TCP, TCP_KEEPIDLE},  {IPPROTO_TCP, TCP_KEEPINTVL},
                                  {IPPROTO_TCP, TCP_KEEPCNT},   {IPPROTO_TCP, TCP_USER_TIMEOUT}};
    for (size_t i = 0; i < sizeof opts / sizeof opts[0]; i++)
        ck_assert_int_eq(sockopt(pi.fd, opts[i][0], opts[i][1]), sockopt(ai.fd, opts[i][0], opts[i][1]));
    ck_assert_int_eq(sockopt(pi.fd, IPPROTO_TCP, TCP_NODELAY), 1);
    ck_assert_int_eq(sockopt(pi.fd, IPPROTO_TCP, TCP_USER_TIMEOUT), (int)emu_conn_peer_timeout_ms());
    pair_down(&x);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("emu_conn");
    TCase *tc = tcase_create("conn");
    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, connect_accept_pdata_and_data);
    tcase_add_test(tc, pdata_sizes);
    tcase_add_test(tc, reject_with_pdata);
    tcase_add_test(tc, closed_port_is_non_peer_reject);
    tcase_add_test(tc, timeout_when_owner_never_answers);
    tcase_add_loop_test(tc, disconnect_matrix, 0, 4);
    tcase_add_test(tc, fail_is_broken_peer_disconnected);
    tcase_add_test(tc, simultaneous_disconnects);
    tcase_add_test(tc, ipv6_loopback);
    tcase_add_test(tc, crc_negotiation);
    tcase_add_test(tc, loopback_congestion_control);
    tcase_add_test(tc, loopback_receive_buffer);
    tcase_add_test(tc, many_connections);
    tcase_add_test(tc, listener_freed_in_its_callback);
    tcase_add_test(tc, free_in_any_state);
    tcase_add_test(tc, listener_errors_and_ranges);
    tcase_add_test(tc, destroy_engines_with_live_connections);
    tcase_add_loop_test(tc, abrupt_disconnect_delivers_written_bytes, 0, 3);
    tcase_add_test(tc, refused_retry_finds_late_listener);
    tcase_add_test(tc, refused_retry_window_then_non_peer_reject);
    tcase_add_test(tc, refused_retry_capped_by_connect_timeout);
    tcase_add_test(tc, refused_retry_free_and_disconnect);
    tcase_add_test(tc, active_socket_reuseaddr_time_wait);
    tcase_add_test(tc, handshake_short_cuts);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return conn_fixture_main(suite());
}
