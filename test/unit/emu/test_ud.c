/* emu/ud: datagrams between two UD endpoints on loopback — bytes placed
 * after the 40-byte GRH slot, the GRH itself, source address and QPN in
 * the completion, message boundaries, the MTU refused at post, drops
 * counted (no receive, wrong Q_Key, wrong QPN, malformed, too long) while
 * the endpoint keeps working, flush, and the header codec. */
#include "emu/ud.h"

#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAXC 64

struct sink {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    struct emu_ud_cqe send[MAXC], recv[MAXC];
    int nsend, nrecv;
};

static void send_done(void *ctx, const struct emu_ud_cqe *c)
{
    struct sink *s = ctx;
    pthread_mutex_lock(&s->lock);
    if (s->nsend < MAXC)
        s->send[s->nsend++] = *c;
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
}

static void recv_done(void *ctx, const struct emu_ud_cqe *c)
{
    struct sink *s = ctx;
    pthread_mutex_lock(&s->lock);
    if (s->nrecv < MAXC)
        s->recv[s->nrecv++] = *c;
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
}

static const struct emu_ud_ops OPS = {.send_done = send_done, .recv_done = recv_done};

static struct emu_engine *E;
static struct emu_ud *A, *B;
static struct sink SA, SB;
static const uint32_t QKEY = 0x11223344;

static struct emu_ud *mk(struct sink *s, uint32_t qkey, uint32_t mtu)
{
    struct sockaddr_in lo = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    struct emu_ud_attr a = {.engine = E, .addr = (struct sockaddr *)&lo, .addr_len = sizeof lo,
                            .max_send_wr = 16, .max_recv_wr = 16, .max_sge = 4, .mtu = mtu,
                            .qkey = qkey, .ops = &OPS, .ctx = s};
    struct emu_ud *u = NULL;
    ck_assert_int_eq(emu_ud_create(&a, &u), 0);
    return u;
}

static void sink_init(struct sink *s)
{
    memset(s, 0, sizeof *s);
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->cond, NULL);
}

static void setup(void)
{
    ck_assert_int_eq(emu_engine_create("t-ud", &E), 0);
    sink_init(&SA);
    sink_init(&SB);
    A = mk(&SA, QKEY, 1024);
    B = mk(&SB, QKEY, 1024);
}

static void teardown(void)
{
    emu_ud_destroy(A);
    emu_ud_destroy(B);
    emu_engine_destroy(E);
}

/* Wait (at most 5 s) until *count >= n. */
static bool wait_n(struct sink *s, int *count, int n)
{
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += 5;
    pthread_mutex_lock(&s->lock);
    int rc = 0;
    while (*count < n && rc == 0)
        rc = pthread_cond_timedwait(&s->cond, &s->lock, &dl);
    bool ok = *count >= n;
    pthread_mutex_unlock(&s->lock);
    return ok;
}

static struct emu_ud_dest dest_of(struct emu_ud *u, uint32_t qkey)
{
    struct emu_ud_dest d;
    memset(&d, 0, sizeof d);
    emu_ud_local_addr(u, &d.addr);
    d.qpn = emu_ud_qpn(u);
    d.qkey = qkey;
    return d;
}

/* Poll B's stats until pred holds (at most 5 s). */
#define WAIT_STAT(u, field, want)                                                                  \
    do {                                                                                           \
        struct emu_ud_stats st_;                                                                   \
        for (int i_ = 0; i_ < 500; i_++) {                                                         \
            emu_ud_get_stats(u, &st_);                                                             \
            if (st_.field >= (want))                                                               \
                break;                                                                             \
            usleep(10000);                                                                         \
        }                                                                                          \
        emu_ud_get_stats(u, &st_);                                                                 \
        ck_assert_uint_eq(st_.field, (want));                                                      \
    } while (0)

START_TEST(send_recv_places_after_grh)
{
    uint8_t rbuf[40 + 100];
    memset(rbuf, 0xEE, sizeof rbuf);
    struct emu_sge rs = {rbuf, sizeof rbuf};
    ck_assert_int_eq(emu_ud_post_recv(B, 7, 1, &rs), 0);
    uint8_t p1[] = "hello, ", p2[] = "datagram";
    struct emu_sge ss[2] = {{p1, 7}, {p2, 8}};
    struct emu_ud_dest d = dest_of(B, QKEY);
    ck_assert_int_eq(emu_ud_post_send(A, 42, &d, 2, ss, EMU_WR_SOLICITED), 0);
    ck_assert(wait_n(&SA, &SA.nsend, 1));
    ck_assert_uint_eq(SA.send[0].cookie, 42);
    ck_assert_int_eq(SA.send[0].status, EMU_WC_SUCCESS);
    ck_assert_uint_eq(SA.send[0].byte_len, 15);
    ck_assert(wait_n(&SB, &SB.nrecv, 1));
    struct emu_ud_cqe *c = &SB.recv[0];
    ck_assert_uint_eq(c->cookie, 7);
    ck_assert_int_eq(c->status, EMU_WC_SUCCESS);
    ck_assert_uint_eq(c->byte_len, EMU_UD_GRH_LEN + 15);
    ck_assert(c->solicited);
    ck_assert_uint_eq(c->src_qpn, emu_ud_qpn(A));
    ck_assert_int_eq(c->src.ss_family, AF_INET);
    ck_assert_uint_eq(ntohs(((struct sockaddr_in *)&c->src)->sin_port), emu_ud_qpn(A));
    ck_assert_mem_eq(rbuf + 40, "hello, datagram", 15);
    ck_assert_uint_eq(rbuf[40 + 15 + 4 + 1], 0xEE); /* nothing beyond payload + pad + ICRC */
    /* GRH: IPv6 version, next header IBA, GIDs ::ffff:127.0.0.1 */
    ck_assert_uint_eq(rbuf[0] >> 4, 6);
    ck_assert_uint_eq(rbuf[6], 0x1B);
    static const uint8_t gid[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 1};
    ck_assert_mem_eq(rbuf + 8, gid, 16);
    ck_assert_mem_eq(rbuf + 24, gid, 16);
    struct emu_ud_stats st;
    emu_ud_get_stats(B, &st);
    ck_assert_uint_eq(st.rx_datagrams, 1);
    emu_ud_get_stats(A, &st);
    ck_assert_uint_eq(st.tx_datagrams, 1);
}
END_TEST

START_TEST(boundaries_kept_and_sge_scatter)
{
    /* Receive across three segments: GRH split over the first two. */
    uint8_t r1[8][3][64];
    for (int i = 0; i < 8; i++) {
        struct emu_sge rs[3] = {{r1[i][0], 30}, {r1[i][1], 20}, {r1[i][2], 64}};
        ck_assert_int_eq(emu_ud_post_recv(B, (uint64_t)i, 3, rs), 0);
    }
    struct emu_ud_dest d = dest_of(B, QKEY);
    uint8_t msg[8][32];
    for (int i = 0; i < 8; i++) {
        memset(msg[i], 'a' + i, sizeof msg[i]);
        struct emu_sge ss = {msg[i], (uint32_t)(i + 1) * 4 - 1}; /* odd lengths: pad 1 */
        ck_assert_int_eq(emu_ud_post_send(A, (uint64_t)i, &d, 1, &ss, 0), 0);
    }
    ck_assert(wait_n(&SB, &SB.nrecv, 8));
    for (int i = 0; i < 8; i++) {
        struct emu_ud_cqe *c = &SB.recv[i];
        ck_assert_int_eq(c->status, EMU_WC_SUCCESS);
        uint32_t len = c->byte_len - EMU_UD_GRH_LEN;
        int k = (int)c->cookie;
        ck_assert_uint_eq(len, (uint32_t)(k + 1) * 4 - 1); /* one datagram, one message */
        /* payload starts at offset 40 = r1[k][1] + 10 */
        ck_assert_uint_eq(r1[k][1][10], 'a' + k);
        ck_assert(!c->solicited);
    }
}
END_TEST

START_TEST(mtu_refused_at_post)
{
    static uint8_t big[1025];
    struct emu_sge ss = {big, sizeof big};
    struct emu_ud_dest d = dest_of(B, QKEY);
    ck_assert_int_eq(emu_ud_post_send(A, 1, &d, 1, &ss, 0), -EMSGSIZE);
    ss.len = 1024;
    ck_assert_int_eq(emu_ud_post_send(A, 2, &d, 1, &ss, 0), 0);
    ck_assert(wait_n(&SA, &SA.nsend, 1));
    ck_assert_uint_eq(SA.send[0].cookie, 2); /* the refused one never completes */
    ck_assert_int_eq(emu_ud_post_send(A, 3, &d, 5, &ss, 0), -EINVAL); /* > max_sge */
    d.qpn = 0;
    ck_assert_int_eq(emu_ud_post_send(A, 3, &d, 1, &ss, 0), -EINVAL);
}
END_TEST

START_TEST(drops_counted_endpoint_survives)
{
    struct emu_ud_dest d = dest_of(B, QKEY);
    uint8_t m[16] = "drop me";
    struct emu_sge ss = {m, sizeof m};
    /* 1. no receive posted */
    ck_assert_int_eq(emu_ud_post_send(A, 1, &d, 1, &ss, 0), 0);
    WAIT_STAT(B, rx_no_recv, 1);
    uint8_t rbuf[40 + 16];
    struct emu_sge rs = {rbuf, sizeof rbuf};
    ck_assert_int_eq(emu_ud_post_recv(B, 9, 1, &rs), 0);
    /* 2. wrong Q_Key: dropped, the receive stays posted */
    struct emu_ud_dest bad = dest_of(B, QKEY ^ 1);
    ck_assert_int_eq(emu_ud_post_send(A, 2, &bad, 1, &ss, 0), 0);
    WAIT_STAT(B, rx_bad_qkey, 1);
    /* 3. wrong QPN in the BTH (raw datagram to B's port) */
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_storage bs;
    emu_ud_local_addr(B, &bs);
    uint8_t raw[EMU_UD_HDR_LEN + 4 + 4] = {0};
    emu_ud_build_hdr(raw, EMU_UD_OP_SEND_ONLY, false, 0, emu_ud_qpn(B) + 1, 0, QKEY, 77);
    ck_assert_int_eq(sendto(fd, raw, sizeof raw, 0, (struct sockaddr *)&bs, sizeof(struct sockaddr_in)),
                     (ssize_t)sizeof raw);
    WAIT_STAT(B, rx_bad_qpn, 1);
    /* 4. malformed: short, and a non-UD opcode */
    ck_assert_int_eq(sendto(fd, raw, 5, 0, (struct sockaddr *)&bs, sizeof(struct sockaddr_in)), 5);
    emu_ud_build_hdr(raw, 0x04 /* RC Send Only */, false, 0, emu_ud_qpn(B), 0, QKEY, 77);
    ck_assert_int_eq(sendto(fd, raw, sizeof raw, 0, (struct sockaddr *)&bs, sizeof(struct sockaddr_in)),
                     (ssize_t)sizeof raw);
    WAIT_STAT(B, rx_malformed, 2);
    close(fd);
    ck_assert_int_eq(SB.nrecv, 0);
    /* 5. the endpoint still works: the good one lands in the same receive */
    ck_assert_int_eq(emu_ud_post_send(A, 3, &d, 1, &ss, 0), 0);
    ck_assert(wait_n(&SB, &SB.nrecv, 1));
    ck_assert_uint_eq(SB.recv[0].cookie, 9);
    ck_assert_int_eq(SB.recv[0].status, EMU_WC_SUCCESS);
    ck_assert_mem_eq(rbuf + 40, "drop me", 7);
    /* 6. too long for the receive: LOC_LEN completion, counted, then fine */
    uint8_t small[40 + 4];
    struct emu_sge sm = {small, sizeof small};
    ck_assert_int_eq(emu_ud_post_recv(B, 10, 1, &sm), 0);
    ck_assert_int_eq(emu_ud_post_send(A, 4, &d, 1, &ss, 0), 0);
    ck_assert(wait_n(&SB, &SB.nrecv, 2));
    ck_assert_uint_eq(SB.recv[1].cookie, 10);
    ck_assert_int_eq(SB.recv[1].status, EMU_WC_LOC_LEN);
    WAIT_STAT(B, rx_too_long, 1);
    ck_assert_int_eq(emu_ud_post_recv(B, 11, 1, &rs), 0);
    ck_assert_int_eq(emu_ud_post_send(A, 5, &d, 1, &ss, 0), 0);
    ck_assert(wait_n(&SB, &SB.nrecv, 3));
    ck_assert_int_eq(SB.recv[2].status, EMU_WC_SUCCESS);
}
END_TEST

START_TEST(flush_in_post_order)
{
    uint8_t b[3][64];
    for (int i = 0; i < 3; i++) {
        struct emu_sge rs = {b[i], 64};
        ck_assert_int_eq(emu_ud_post_recv(B, (uint64_t)(100 + i), 1, &rs), 0);
    }
    emu_ud_flush(B);
    ck_assert_int_eq(SB.nrecv, 3);
    for (int i = 0; i < 3; i++) {
        ck_assert_uint_eq(SB.recv[i].cookie, (uint64_t)(100 + i));
        ck_assert_int_eq(SB.recv[i].status, EMU_WC_FLUSHED);
    }
    /* ring is free again: 16 posts fit, the 17th does not */
    for (int i = 0; i < 16; i++) {
        struct emu_sge rs = {b[0], 64};
        ck_assert_int_eq(emu_ud_post_recv(B, (uint64_t)i, 1, &rs), 0);
    }
    struct emu_sge rs = {b[0], 64};
    ck_assert_int_eq(emu_ud_post_recv(B, 99, 1, &rs), -ENOSPC);
}
END_TEST

START_TEST(many_datagrams_nothing_lost)
{
    /* 16 receives in flight, re-posted as they complete: 400 datagrams on a
     * healthy loopback all arrive (sender paced by the receive window). */
    static uint8_t rb[16][40 + 64];
    for (int i = 0; i < 16; i++) {
        struct emu_sge rs = {rb[i], sizeof rb[i]};
        ck_assert_int_eq(emu_ud_post_recv(B, (uint64_t)i, 1, &rs), 0);
    }
    struct emu_ud_dest d = dest_of(B, QKEY);
    uint8_t m[64];
    int sent = 0, seen = 0;
    for (int round = 0; round < 25; round++) {
        for (int k = 0; k < 16; k++, sent++) {
            memset(m, (uint8_t)sent, sizeof m);
            struct emu_sge ss = {m, sizeof m};
            while (emu_ud_post_send(A, (uint64_t)sent, &d, 1, &ss, 0) == -ENOSPC)
                usleep(1000);
        }
        ck_assert(wait_n(&SB, &SB.nrecv, 16));
        pthread_mutex_lock(&SB.lock);
        for (int k = 0; k < 16; k++) {
            ck_assert_int_eq(SB.recv[k].status, EMU_WC_SUCCESS);
            ck_assert_uint_eq(SB.recv[k].byte_len, 40 + 64);
            seen++;
        }
        SB.nrecv = 0;
        SA.nsend = 0;
        pthread_mutex_unlock(&SB.lock);
        for (int i = 0; i < 16; i++) {
            struct emu_sge rs = {rb[i], sizeof rb[i]};
            ck_assert_int_eq(emu_ud_post_recv(B, (uint64_t)i, 1, &rs), 0);
        }
    }
    ck_assert_int_eq(seen, 400);
    struct emu_ud_stats st;
    emu_ud_get_stats(B, &st);
    ck_assert_uint_eq(st.rx_no_recv, 0);
    ck_assert_uint_eq(st.rx_datagrams, 400);
}
END_TEST

START_TEST(codec_roundtrip)
{
    uint8_t h[EMU_UD_HDR_LEN];
    emu_ud_build_hdr(h, EMU_UD_OP_SEND_ONLY, true, 3, 0xABCDEF, 0x123456, 0xDEADBEEF, 0x010203);
    ck_assert_uint_eq(h[0], 0x64);
    ck_assert_uint_eq(h[1], 0x80 | 0x30);
    ck_assert_uint_eq(h[2], 0xFF);
    ck_assert_uint_eq(h[3], 0xFF);
    struct emu_ud_hdr p;
    ck_assert_int_eq(emu_ud_parse_hdr(h, &p), 0);
    ck_assert(p.se);
    ck_assert_uint_eq(p.pad, 3);
    ck_assert_uint_eq(p.dest_qpn, 0xABCDEF);
    ck_assert_uint_eq(p.psn, 0x123456);
    ck_assert_uint_eq(p.qkey, 0xDEADBEEF);
    ck_assert_uint_eq(p.src_qpn, 0x010203);
    h[1] |= 1; /* TVer != 0 */
    ck_assert_int_eq(emu_ud_parse_hdr(h, &p), -EBADMSG);
}
END_TEST

START_TEST(create_rejects_bad_attrs)
{
    struct sockaddr_in lo = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    struct emu_ud_attr a = {.engine = E, .addr = (struct sockaddr *)&lo, .addr_len = sizeof lo,
                            .max_send_wr = 1, .max_recv_wr = 1, .max_sge = 1, .mtu = 100,
                            .ops = &OPS, .ctx = &SA};
    struct emu_ud *u;
    a.max_sge = EMU_QP_MAX_SGE + 1;
    ck_assert_int_eq(emu_ud_create(&a, &u), -EINVAL);
    a.max_sge = 1;
    a.mtu = EMU_UD_MTU_MAX + 1;
    ck_assert_int_eq(emu_ud_create(&a, &u), -EINVAL);
    a.mtu = 100;
    a.max_send_wr = 0;
    ck_assert_int_eq(emu_ud_create(&a, &u), -EINVAL);
}
END_TEST

START_TEST(engine_destroyed_first)
{
    /* The IA's engine may go before the endpoint: destroy stays safe. */
    struct emu_engine *e2;
    ck_assert_int_eq(emu_engine_create("t-ud2", &e2), 0);
    struct sockaddr_in lo = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    struct emu_ud_attr a = {.engine = e2, .addr = (struct sockaddr *)&lo, .addr_len = sizeof lo,
                            .max_send_wr = 2, .max_recv_wr = 2, .max_sge = 1, .mtu = 100,
                            .ops = &OPS, .ctx = &SA};
    struct emu_ud *u;
    ck_assert_int_eq(emu_ud_create(&a, &u), 0);
    uint8_t b[64];
    struct emu_sge rs = {b, 64};
    ck_assert_int_eq(emu_ud_post_recv(u, 5, 1, &rs), 0);
    ck_assert_int_eq(emu_engine_destroy(e2), 0);
    emu_ud_destroy(u);
    ck_assert_int_eq(SA.nrecv, 1);
    ck_assert_int_eq(SA.recv[0].status, EMU_WC_FLUSHED);
}
END_TEST

static Suite *ud_suite(void)
{
    Suite *s = suite_create("emu_ud");
    TCase *tc = tcase_create("ud");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, send_recv_places_after_grh);
    tcase_add_test(tc, boundaries_kept_and_sge_scatter);
    tcase_add_test(tc, mtu_refused_at_post);
    tcase_add_test(tc, drops_counted_endpoint_survives);
    tcase_add_test(tc, flush_in_post_order);
    tcase_add_test(tc, many_datagrams_nothing_lost);
    tcase_add_test(tc, codec_roundtrip);
    tcase_add_test(tc, create_rejects_bad_attrs);
    tcase_add_test(tc, engine_destroyed_first);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(ud_suite());
    srunner_run_all(sr, CK_NORMAL);
    int nf = srunner_ntests_failed(sr);
    srunner_free(sr);
    return nf ? 1 : 0;
}
