/* emu/conn against raw sockets: hostile or foreign peers on the wire
 * (malformed Requests, RTR rules, Read RTR both ways, a SYN-dropping
 * listener, a peer that never closes after our abrupt disconnect). */
#include "test/lib/conn_fixture.h"

/* An MPA Reply (rev 2, CRC, private data "yes") with enhanced RTR
 * negotiation: IRD 1, ORD 2 and the RTR control bits rtr. */
static void send_mpa_reply(int fd, uint8_t rtr)
{
    uint8_t rep[27];
    memcpy(rep, "MPA ID Rep Frame", 16);
    rep[16] = 0x10;
    rep[17] = 2;
    rep[18] = 0;
    rep[19] = 7;
    rep[20] = 0x80; /* A | IRD 1 */
    rep[21] = 1;
    rep[22] = rtr; /* | ORD 2 */
    rep[23] = 2;
    memcpy(rep + 24, "yes", 3);
    ck_assert_int_eq(send(fd, rep, 27, 0), 27);
}

/* A listener whose accept queue is full drops SYNs: TCP never completes. */
START_TEST(unreachable_when_tcp_never_completes)
{
    int lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in la = a4(0);
    ck_assert_int_eq(bind(lfd, (struct sockaddr *)&la, sizeof la), 0);
    ck_assert_int_eq(listen(lfd, 0), 0);
    socklen_t sl = sizeof la;
    getsockname(lfd, (struct sockaddr *)&la, &sl);
    int fill[4];
    for (int i = 0; i < 4; i++) {
        fill[i] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
        connect(fill[i], (struct sockaddr *)&la, sizeof la);
    }
    sleep_ms(100);
    struct side a;
    side_init(&a);
    struct emu_conn_params ap = {.timeout_us = 300000};
    struct emu_conn *ac = connect4(ntohs(la.sin_port), &ap, NULL, 0, &ops_plain, &a);
    ck_assert(side_wait(&a, 1, 5000));
    /* Either TCP stalled (UNREACHABLE) or the kernel completed it and no
     * Reply came (TIMED_OUT): both are "no answer within the timeout". */
    ck_assert_msg(a.ev[0].type == EMU_CONN_UNREACHABLE || a.ev[0].type == EMU_CONN_TIMED_OUT,
                  "got %s", emu_conn_event_name(a.ev[0].type));
    ck_assert_int_eq(a.ev[0].err, ETIMEDOUT);
    emu_conn_free(ac);
    for (int i = 0; i < 4; i++)
        close(fill[i]);
    close(lfd);
}
END_TEST

/* The TCP handshake is not complete when connect() returns (the listener's
 * full accept queue drops the SYN): the Request cannot go out at once, the
 * connection waits for write readiness and sends it once the retransmitted
 * SYN gets through; nothing is lost or sent twice. */
START_TEST(request_waits_for_a_slow_handshake)
{
    int lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in la = a4(0);
    ck_assert_int_eq(bind(lfd, (struct sockaddr *)&la, sizeof la), 0);
    ck_assert_int_eq(listen(lfd, 0), 0); /* room for one queued connection */
    socklen_t sl = sizeof la;
    getsockname(lfd, (struct sockaddr *)&la, &sl);
    int fill = raw_connect(ntohs(la.sin_port));
    ck_assert_int_ge(fill, 0);
    sleep_ms(100);
    struct side a;
    side_init(&a);
    struct emu_conn_params ap = {.ird = 2, .ord = 3, .timeout_us = 10000000};
    struct emu_conn *ac = connect4(ntohs(la.sin_port), &ap, "rd", 2, &ops_rx, &a);
    sleep_ms(200); /* our SYN was dropped: still connecting */
    int q = accept(lfd, NULL, NULL); /* the queued filler: room for our retransmitted SYN */
    ck_assert_int_ge(q, 0);
    struct pollfd pf = {.fd = lfd, .events = POLLIN};
    ck_assert_int_eq(poll(&pf, 1, 5000), 1);
    int fd = accept(lfd, NULL, NULL);
    ck_assert_int_ge(fd, 0);
    uint8_t req[34];
    ck_assert_int_eq(recv_exact(fd, req, 34, 3000), 34);
    ck_assert(memcmp(req, "MPA ID Req Frame", 16) == 0);
    ck_assert(memcmp(req + 32, "rd", 2) == 0);
    send_mpa_reply(fd, 0x80); /* C: Write RTR */
    ck_assert(side_wait(&a, 1, 5000));
    ck_assert_int_eq(a.ev[0].type, EMU_CONN_ESTABLISHED);
    struct emu_conn_info ai;
    ck_assert_int_eq(emu_conn_get_info(ac, &ai), 0);
    ck_assert(!ai.request_early);
    ck_assert_int_eq(ai.rtr, EMU_MPA_RTR_WRITE);
    /* exactly one Request, then the RTR (a zero-length tagged FPDU) */
    uint8_t rtr[64];
    ck_assert_int_eq(recv_exact(fd, rtr, 2, 3000), 2);
    ck_assert_uint_lt(((unsigned)rtr[0] << 8) | rtr[1], 32);
    close(fd);
    check_one_terminal(&a, EMU_CONN_DISCONNECTED);
    emu_conn_free(ac);
    close(q);
    close(fill);
    close(lfd);
}
END_TEST

START_TEST(malformed_request_closed_listener_survives)
{
    struct lis l;
    lis_init(&l, L_ACCEPT);
    struct side p;
    side_init(&p);
    l.sides = &p;
    l.nsides = 1;
    struct emu_listener *ls = listen4(&l);
    uint16_t port = emu_listener_port(ls);
    uint8_t buf[600];

    /* garbage key */
    int fd = raw_connect(port);
    const char *junk = "GET / HTTP/1.0\r\nHost: x\r\n\r\n";
    ck_assert_int_eq(send(fd, junk, strlen(junk), 0), (ssize_t)strlen(junk));
    ck_assert_int_eq(raw_read_to_close(fd, buf, sizeof buf, 3000), 0);
    close(fd);

    /* valid key, PD_Length beyond 512 */
    fd = raw_connect(port);
    uint8_t hdr[20];
    memcpy(hdr, "MPA ID Req Frame", 16);
    hdr[16] = 0x10;
    hdr[17] = 2;
    hdr[18] = 0x04;
    hdr[19] = 0x00; /* 1024 */
    ck_assert_int_eq(send(fd, hdr, 20, 0), 20);
    ck_assert_int_eq(raw_read_to_close(fd, buf, sizeof buf, 3000), 0);
    close(fd);

    /* a Request asking for markers: polite reject (R set), then close */
    fd = raw_connect(port);
    uint8_t mreq[24];
    memcpy(mreq, "MPA ID Req Frame", 16);
    mreq[16] = 0x80 | 0x10;
    mreq[17] = 2;
    mreq[18] = 0;
    mreq[19] = 4;
    mreq[20] = 0x80;
    mreq[21] = 4;
    mreq[22] = 0x80;
    mreq[23] = 4;
    ck_assert_int_eq(send(fd, mreq, 24, 0), 24);
    int n = raw_read_to_close(fd, buf, sizeof buf, 3000);
    ck_assert_int_ge(n, 20);
    ck_assert(memcmp(buf, "MPA ID Rep Frame", 16) == 0);
    ck_assert(buf[16] & 0x20);    /* R */
    ck_assert(!(buf[16] & 0x80)); /* M clear */
    close(fd);

    /* close half-way through a Request */
    fd = raw_connect(port);
    ck_assert_int_eq(send(fd, "MPA ID Req", 10, 0), 10);
    close(fd);

    ck_assert_int_eq(l.n, 0); /* none of these reached the owner */
    /* the listener still works */
    struct side a;
    side_init(&a);
    struct emu_conn *ac = connect4(port, NULL, "ok", 2, &ops_plain, &a);
    ck_assert(side_wait(&a, 1, 5000));
    ck_assert_int_eq(a.ev[0].type, EMU_CONN_ESTABLISHED);
    ck_assert(side_wait(&p, 1, 5000));
    emu_conn_free(ac);
    emu_conn_free(p.c);
    emu_listener_free(ls);
}
END_TEST

/* A raw initiator that sends a proper Request and RTR, to check the bytes
 * of our Reply and that a wrong RTR is refused. */
START_TEST(raw_initiator_rtr_rules)
{
    struct lis l;
    lis_init(&l, L_ACCEPT);
    struct side p[2];
    side_init(&p[0]);
    side_init(&p[1]);
    l.sides = p;
    l.nsides = 2;
    struct emu_listener *ls = listen4(&l);
    uint16_t port = emu_listener_port(ls);
    uint8_t req[24];
    memcpy(req, "MPA ID Req Frame", 16);
    req[16] = 0x10; /* Enhanced, C=0 */
    req[17] = 2;
    req[18] = 0;
    req[19] = 4;
    req[20] = 0x80; /* A | IRD 4 */
    req[21] = 4;
    req[22] = 0x80; /* C (Write RTR) | ORD 4 */
    req[23] = 4;
    for (int k = 0; k < 2; k++) {
        int fd = raw_connect(port);
        ck_assert_int_eq(send(fd, req, 24, 0), 24);
        uint8_t rep[24];
        int got = 0;
        for (int i = 0; i < 300 && got < 24; i++) {
            ssize_t n = recv(fd, rep + got, (size_t)(24 - got), MSG_DONTWAIT);
            if (n > 0)
                got += (int)n;
            else
                sleep_ms(10);
        }
        ck_assert_int_eq(got, 24);
        ck_assert(memcmp(rep, "MPA ID Rep Frame", 16) == 0);
        ck_assert_uint_eq(rep[16] & 0xF0, 0x10); /* Enhanced, no C/R/M */
        ck_assert_uint_eq(rep[17], 2);
        ck_assert_uint_eq(rep[20] & 0x80, 0x80); /* A echoed */
        ck_assert_uint_eq(rep[22] & 0xC0, 0x80); /* Write RTR chosen */
        ck_assert_int_eq(side_n(&p[k]), 0);      /* no ESTABLISHED before the RTR */
        if (k == 0) {
            static const uint8_t rtr[20] = {0x00, 0x0e, 0xc1, 0x40, 0, 0, 0, 1, 0, 0,
                                            0,    0,    0,    0,    0, 0, 0, 0, 0, 0};
            ck_assert_int_eq(send(fd, rtr, 20, 0), 20);
            ck_assert(side_wait(&p[k], 1, 5000));
            ck_assert_int_eq(p[k].ev[0].type, EMU_CONN_ESTABLISHED);
        } else {
            /* a Send instead of the RTR */
            static const uint8_t send_fpdu[24] = {0x00, 0x12, 0x41, 0x43, 0, 0, 0, 0, 0, 0,
                                                  0,    0,    0,    0,    0, 1, 0, 0, 0, 0};
            ck_assert_int_eq(send(fd, send_fpdu, 24, 0), 24);
            ck_assert(side_wait(&p[k], 1, 5000));
            ck_assert_int_eq(p[k].ev[0].type, EMU_CONN_ACCEPT_ERROR);
        }
        close(fd);
    }
    check_one_terminal(&p[0], EMU_CONN_DISCONNECTED);
    emu_conn_free(p[0].c);
    emu_conn_free(p[1].c);
    emu_listener_free(ls);
}
END_TEST

/* Our initiator against a raw responder that picks the Read RTR (as irdma does). */
START_TEST(initiator_read_rtr)
{
    int lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in la = a4(0);
    ck_assert_int_eq(bind(lfd, (struct sockaddr *)&la, sizeof la), 0);
    ck_assert_int_eq(listen(lfd, 4), 0);
    socklen_t sl = sizeof la;
    getsockname(lfd, (struct sockaddr *)&la, &sl);
    struct side a;
    side_init(&a);
    struct emu_conn_params ap = {.ird = 2, .ord = 3, .timeout_us = 5000000};
    struct emu_conn *ac = connect4(ntohs(la.sin_port), &ap, "rd", 2, &ops_rx, &a);
    int fd = accept(lfd, NULL, NULL);
    ck_assert_int_ge(fd, 0);
    uint8_t req[34];
    ck_assert_int_eq(recv_exact(fd, req, 34, 3000), 34);
    ck_assert(memcmp(req, "MPA ID Req Frame", 16) == 0);
    ck_assert_uint_eq(req[16], 0x10); /* Enhanced; no C on loopback */
    ck_assert_uint_eq(req[19], 14);   /* v2 block + marker + 2 */
    ck_assert_uint_eq(req[20], 0x80); /* A | IRD 2 */
    ck_assert_uint_eq(req[21], 2);
    ck_assert_uint_eq(req[22], 0xC0); /* C | D offered, ORD 3 */
    ck_assert_uint_eq(req[23], 3);
    static const uint8_t marker[8] = {'S', 'D', 'T', 1, 0, 0, 0, 3};
    ck_assert(memcmp(req + 24, marker, 8) == 0);
    ck_assert(memcmp(req + 32, "rd", 2) == 0);
    send_mpa_reply(fd, 0x40); /* D: Read RTR */
    uint8_t rtr[52];
    ck_assert_int_eq(recv_exact(fd, rtr, 52, 3000), 52);
    static const uint8_t want[48] = {0x00, 0x2e, 0x41, 0x41, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1,
                                     0,    0,    0,    0,    0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0,
                                     0,    0,    0,    0,    0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0};
    ck_assert(memcmp(rtr, want, 48) == 0);
    sleep_ms(50);
    ck_assert_int_eq(side_n(&a), 0); /* not before the Read Response */
    static const uint8_t resp[20] = {0x00, 0x0e, 0xc1, 0x42, 0, 0, 0, 1, 0, 0,
                                     0,    0,    0,    0,    0, 0, 0, 0, 0, 0};
    ck_assert_int_eq(send(fd, resp, 20, 0), 20);
    ck_assert_int_eq(send(fd, "data", 4, 0), 4); /* first real bytes go to rx */
    ck_assert(side_wait(&a, 1, 5000));
    ck_assert_int_eq(a.ev[0].type, EMU_CONN_ESTABLISHED);
    ck_assert_int_eq(a.ev[0].len, 3);
    ck_assert(memcmp(a.ev[0].pd, "yes", 3) == 0);
    struct emu_conn_info ai;
    ck_assert_int_eq(emu_conn_get_info(ac, &ai), 0);
    ck_assert_int_eq(ai.rtr, EMU_MPA_RTR_READ);
    ck_assert_uint_eq(ai.ord, 1); /* lowered to the responder's IRD */
    ck_assert_uint_eq(ai.ird, 2);
    ck_assert_uint_eq(ai.caps, 0); /* a plain iWARP responder: no marker, no RFC 7306 */
    ck_assert(side_wait_rx(&a, 4, 5000));
    ck_assert(memcmp(a.rx, "data", 4) == 0);
    close(fd);
    check_one_terminal(&a, EMU_CONN_DISCONNECTED);
    emu_conn_free(ac);
    close(lfd);
}
END_TEST

/* A raw initiator offering only the Read RTR: our responder serves it. */
START_TEST(responder_read_rtr)
{
    struct lis l;
    lis_init(&l, L_ACCEPT);
    struct side p;
    side_init(&p);
    l.sides = &p;
    l.nsides = 1;
    l.ops = &ops_rx;
    struct emu_listener *ls = listen4(&l);
    int fd = raw_connect(emu_listener_port(ls));
    static const uint8_t req[24] = {'M', 'P', 'A', ' ', 'I', 'D', ' ', 'R', 'e', 'q', ' ', 'F',
                                    'r', 'a', 'm', 'e', 0x10, 2, 0, 4, 0x80, 4, 0x40, 4};
    ck_assert_int_eq(send(fd, req, 24, 0), 24);
    uint8_t rep[24];
    ck_assert_int_eq(recv_exact(fd, rep, 24, 3000), 24);
    ck_assert_uint_eq(rep[22] & 0xC0, 0x40); /* Read RTR chosen */
    ck_assert_uint_ge(((rep[20] & 0x3F) << 8) | rep[21], 1); /* IRD >= 1 for it */
    static const uint8_t rtr[52] = {0x00, 0x2e, 0x41, 0x41, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1,
                                    0,    0,    0,    0,    0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0, 9,
                                    0,    0,    0,    0,    0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0,
                                    0,    0,    0,    0};
    ck_assert_int_eq(send(fd, rtr, 52, 0), 52);
    uint8_t resp[20];
    ck_assert_int_eq(recv_exact(fd, resp, 20, 3000), 20);
    ck_assert_uint_eq(resp[0], 0x00);
    ck_assert_uint_eq(resp[1], 0x0e);
    ck_assert_uint_eq(resp[2], 0xc1);
    ck_assert_uint_eq(resp[3], 0x42);
    ck_assert_uint_eq(resp[7], 7);  /* sink STag */
    ck_assert_uint_eq(resp[15], 9); /* sink TO */
    ck_assert(side_wait(&p, 1, 5000));
    ck_assert_int_eq(p.ev[0].type, EMU_CONN_ESTABLISHED);
    struct emu_conn_info pi;
    ck_assert_int_eq(emu_conn_get_info(p.c, &pi), 0);
    ck_assert_int_eq(pi.rtr, EMU_MPA_RTR_READ);
    ck_assert_int_eq(send(fd, "after", 5, 0), 5);
    ck_assert(side_wait_rx(&p, 5, 5000));
    ck_assert(memcmp(p.rx, "after", 5) == 0);
    close(fd);
    check_one_terminal(&p, EMU_CONN_DISCONNECTED);
    emu_conn_free(p.c);
    emu_listener_free(ls);
}
END_TEST

/* A peer that neither reads nor closes: the lingering socket is reset after
 * EMU_CONN_ABORT_LINGER_US; the local event came at once. */
START_TEST(abrupt_disconnect_linger_times_out)
{
    int lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in la = a4(0);
    ck_assert_int_eq(bind(lfd, (struct sockaddr *)&la, sizeof la), 0);
    ck_assert_int_eq(listen(lfd, 4), 0);
    socklen_t sl = sizeof la;
    getsockname(lfd, (struct sockaddr *)&la, &sl);
    struct side a;
    side_init(&a);
    struct emu_conn *ac = connect4(ntohs(la.sin_port), NULL, NULL, 0, &ops_rx, &a);
    int fd = accept(lfd, NULL, NULL);
    ck_assert_int_ge(fd, 0);
    uint8_t req[32];
    ck_assert_int_eq(recv_exact(fd, req, 32, 3000), 32);
    static const uint8_t rep[24] = {'M', 'P', 'A', ' ', 'I', 'D', ' ', 'R', 'e', 'p', ' ', 'F',
                                    'r', 'a', 'm', 'e', 0x10, 2, 0, 4, 0x80, 4, 0x80, 0};
    ck_assert_int_eq(send(fd, rep, 24, 0), 24);
    uint8_t rtr[20];
    ck_assert_int_eq(recv_exact(fd, rtr, 20, 3000), 20);
    ck_assert(side_wait(&a, 1, 5000));
    ck_assert_int_eq(a.ev[0].type, EMU_CONN_ESTABLISHED);
    ck_assert_int_eq(emu_conn_disconnect(ac, false), 0);
    ck_assert(side_wait(&a, 2, 1000));
    ck_assert_int_eq(a.ev[1].type, EMU_CONN_DISCONNECTED);
    emu_conn_free(ac); /* orphaned to the engine */
    /* FIN first (recv 0), the raw peer keeps its end open and silent */
    struct pollfd pf = {.fd = fd, .events = POLLIN};
    ck_assert_int_eq(poll(&pf, 1, 1000), 1);
    uint8_t b;
    ck_assert_int_eq(recv(fd, &b, 1, 0), 0);
    /* data after our FIN is read and discarded, then the timer resets */
    ck_assert_int_eq(send(fd, "late", 4, MSG_NOSIGNAL), 4);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int err = 0;
    for (int i = 0; i < 60 && err == 0; i++) {
        sleep_ms(100);
        if (send(fd, "x", 1, MSG_NOSIGNAL) < 0)
            err = errno;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    ck_assert_int_eq(err == EPIPE || err == ECONNRESET, 1);
    double dt = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    ck_assert_msg(dt > 1.0 && dt < 4.0, "reset after %.2f s", dt);
    close(fd);
    close(lfd);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("emu_conn_wire");
    TCase *tc = tcase_create("wire");
    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, unreachable_when_tcp_never_completes);
    tcase_add_test(tc, request_waits_for_a_slow_handshake);
    tcase_add_test(tc, malformed_request_closed_listener_survives);
    tcase_add_test(tc, raw_initiator_rtr_rules);
    tcase_add_test(tc, initiator_read_rtr);
    tcase_add_test(tc, responder_read_rtr);
    tcase_add_test(tc, abrupt_disconnect_linger_times_out);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return conn_fixture_main(suite());
}
