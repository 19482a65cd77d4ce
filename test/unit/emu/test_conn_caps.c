/* emu/conn: the softdat capability marker in MPA private data (docs/wire.md
 * §2.6): codec, foreign initiators, no_caps and rejects. */
#include "test/lib/conn_fixture.h"
#include "lib/provider/limits.h"

/* What the provider reports as max_private_data_size is exactly what fits
 * beside the IRD/ORD block and the capability marker in PD_Length 256. */
_Static_assert(EMU_CONN_PDATA_MAX == SD_MAX_PRIVATE_DATA, "private data limits disagree");
_Static_assert(EMU_CONN_CAP_MARKER_LEN == SD_MPA_CAP_MARKER_BYTES, "marker size disagrees");

START_TEST(caps_marker_codec)
{
    uint8_t m[8];
    uint32_t caps = 0;
    emu_conn_caps_encode(m, EMU_CONN_CAP_ATOMICS | EMU_CONN_CAP_IMM | 0x80000000u);
    static const uint8_t want[8] = {'S', 'D', 'T', 1, 0x80, 0, 0, 3};
    ck_assert(memcmp(m, want, 8) == 0);
    ck_assert(emu_conn_caps_parse(m, 8, &caps));
    ck_assert_uint_eq(caps, 0x80000003u); /* unknown bits reported, callers mask */
    ck_assert(!emu_conn_caps_parse(m, 7, &caps)); /* truncated */
    ck_assert(!emu_conn_caps_parse(NULL, 8, &caps));
    m[3] = 2;
    ck_assert(!emu_conn_caps_parse(m, 8, &caps)); /* other version: not ours */
    m[3] = 1;
    m[0] = 's';
    ck_assert(!emu_conn_caps_parse(m, 8, &caps)); /* other magic */
}
END_TEST

/* A raw initiator's Request: enhanced v2 + Write RTR, then pd. Returns the
 * responder's Reply private data (after the IRD/ORD block) in out. */
static int raw_request_reply(uint16_t port, const uint8_t *pd, uint16_t pd_len, uint8_t *out,
                             int *fd_out)
{
    uint8_t req[24 + 64];
    memcpy(req, "MPA ID Req Frame", 16);
    req[16] = 0x10;
    req[17] = 2;
    req[18] = 0;
    req[19] = (uint8_t)(4 + pd_len);
    req[20] = 0x80;
    req[21] = 4;
    req[22] = 0x80;
    req[23] = 4;
    memcpy(req + 24, pd, pd_len);
    int fd = raw_connect(port);
    ck_assert_int_eq(send(fd, req, 24u + pd_len, 0), (ssize_t)(24u + pd_len));
    uint8_t hdr[20];
    ck_assert_int_eq(recv_exact(fd, hdr, 20, 3000), 20);
    ck_assert(memcmp(hdr, "MPA ID Rep Frame", 16) == 0);
    int len = hdr[18] << 8 | hdr[19];
    uint8_t blk[4];
    ck_assert_int_ge(len, 4);
    ck_assert_int_eq(recv_exact(fd, blk, 4, 3000), 4);
    if (len > 4)
        ck_assert_int_eq(recv_exact(fd, out, len - 4, 3000), len - 4);
    *fd_out = fd;
    return len - 4;
}

/* Foreign (raw) initiators: without the marker, with a truncated one, with
 * bytes that merely look like one, and with a real one. */
START_TEST(caps_marker_foreign_initiator)
{
    struct lis l;
    lis_init(&l, L_ACCEPT);
    struct side p[4];
    for (int i = 0; i < 4; i++)
        side_init(&p[i]);
    l.sides = p;
    l.nsides = 4;
    memcpy(l.apd, "ok!", 3);
    l.apd_len = 3;
    struct emu_listener *ls = listen4(&l);
    uint16_t port = emu_listener_port(ls);
    static const uint8_t plain[] = "hello world";
    static const uint8_t trunc[6] = {'S', 'D', 'T', 1, 0, 0};
    static const uint8_t other[10] = {'S', 'D', 'T', 9, 0, 0, 0, 3, 'z', 'z'};
    static const uint8_t real[10] = {'S', 'D', 'T', 1, 0, 0, 0, 2, 'x', 'y'};
    const struct {
        const uint8_t *pd;
        uint16_t len;
        bool marker;
    } cases[4] = {{plain, 11, false}, {trunc, 6, false}, {other, 10, false}, {real, 10, true}};
    for (int k = 0; k < 4; k++) {
        uint8_t rpd[64];
        int fd = -1;
        int rl = raw_request_reply(port, cases[k].pd, cases[k].len, rpd, &fd);
        ck_assert(lis_wait(&l, k + 1, 5000));
        pthread_mutex_lock(&l.m);
        if (cases[k].marker) {
            ck_assert(l.peer_marker);
            ck_assert_uint_eq(l.peer_caps, EMU_CONN_CAP_IMM);
            ck_assert_int_eq(l.pdlen, 2);
            ck_assert(memcmp(l.pd, "xy", 2) == 0);
        } else {
            /* the consumer's bytes, untouched */
            ck_assert(!l.peer_marker);
            ck_assert_uint_eq(l.peer_caps, 0);
            ck_assert_int_eq(l.pdlen, cases[k].len);
            ck_assert(memcmp(l.pd, cases[k].pd, cases[k].len) == 0);
        }
        pthread_mutex_unlock(&l.m);
        if (cases[k].marker) {
            /* answered with our marker, then the consumer's bytes */
            ck_assert_int_eq(rl, 11);
            static const uint8_t mk[8] = {'S', 'D', 'T', 1, 0, 0, 0, 3};
            ck_assert(memcmp(rpd, mk, 8) == 0);
            ck_assert(memcmp(rpd + 8, "ok!", 3) == 0);
        } else {
            ck_assert_int_eq(rl, 3); /* no marker towards a plain peer */
            ck_assert(memcmp(rpd, "ok!", 3) == 0);
        }
        static const uint8_t rtr[20] = {0x00, 0x0e, 0xc1, 0x40, 0, 0, 0, 1, 0, 0,
                                        0,    0,    0,    0,    0, 0, 0, 0, 0, 0};
        ck_assert_int_eq(send(fd, rtr, 20, 0), 20);
        ck_assert(side_wait(&p[k], 1, 5000));
        ck_assert_int_eq(p[k].ev[0].type, EMU_CONN_ESTABLISHED);
        struct emu_conn_info pi;
        ck_assert_int_eq(emu_conn_get_info(p[k].c, &pi), 0);
        /* only what both offered: the raw peer offered IMM only */
        ck_assert_uint_eq(pi.caps, cases[k].marker ? EMU_CONN_CAP_IMM : 0);
        close(fd);
        check_one_terminal(&p[k], EMU_CONN_DISCONNECTED);
        emu_conn_free(p[k].c);
    }
    emu_listener_free(ls);
}
END_TEST

/* Our initiator and responder with no_caps on either side, and rejects:
 * private data is exact in every combination. */
START_TEST(caps_marker_no_caps_and_reject)
{
    for (int k = 0; k < 3; k++) {
        /* k 0: initiator no_caps, 1: responder no_caps, 2: reject (both offer) */
        struct lis l;
        lis_init(&l, k == 2 ? L_REJECT : L_ACCEPT);
        struct side a, p;
        side_init(&a);
        side_init(&p);
        l.sides = &p;
        l.nsides = 1;
        l.params.no_caps = k == 1;
        /* Looks like a marker: must survive where the initiator knows the
         * Reply's marker position (its own no_caps, or a softdat responder).
         * From a plain responder (k 1) such bytes would be taken for a
         * marker, the documented price of the convention. */
        memcpy(l.apd, k == 1 ? "abcdefgh" : "SDT\001abcd", 8);
        l.apd_len = 8;
        struct emu_listener *ls = listen4(&l);
        struct emu_conn_params ap = {.no_caps = k == 0};
        /* (a no_caps initiator whose own bytes started with a marker would
         * be taken for softdat: the price of the convention; not tested) */
        struct emu_conn *ac = connect4(emu_listener_port(ls), &ap, "plain:)", 7, &ops_plain, &a);
        ck_assert(lis_wait(&l, 1, 5000));
        ck_assert(side_wait(&a, 1, 5000));
        ck_assert(l.peer_marker == (k != 0));
        ck_assert_int_eq(l.pdlen, 7);
        ck_assert(memcmp(l.pd, "plain:)", 7) == 0);
        ck_assert_int_eq(a.ev[0].type, k == 2 ? EMU_CONN_PEER_REJECTED : EMU_CONN_ESTABLISHED);
        /* the responder's bytes, exactly, even though they look like a marker */
        ck_assert_int_eq(a.ev[0].len, 8);
        ck_assert(memcmp(a.ev[0].pd, k == 1 ? "abcdefgh" : "SDT\001abcd", 8) == 0);
        if (k != 2) {
            ck_assert(side_wait(&p, 1, 5000));
            struct emu_conn_info ai, pi;
            ck_assert_int_eq(emu_conn_get_info(ac, &ai), 0);
            ck_assert_int_eq(emu_conn_get_info(p.c, &pi), 0);
            ck_assert_uint_eq(ai.caps, 0);
            ck_assert_uint_eq(pi.caps, 0);
            emu_conn_free(p.c);
        }
        emu_conn_free(ac);
        emu_listener_free(ls);
    }
}
END_TEST

/* Bit 2 (placement probes) is announced, not negotiated: each side learns
 * whether the other probes, in all four combinations, and the RFC 7306
 * intersection is unaffected. */
START_TEST(caps_marker_probes_announced)
{
    for (int k = 0; k < 4; k++) {
        bool a_probes = k & 1, p_probes = k & 2;
        struct lis l;
        lis_init(&l, L_ACCEPT);
        struct side a, p;
        side_init(&a);
        side_init(&p);
        l.sides = &p;
        l.nsides = 1;
        l.params.probes = p_probes;
        struct emu_listener *ls = listen4(&l);
        struct emu_conn_params ap = {.probes = a_probes};
        struct emu_conn *ac = connect4(emu_listener_port(ls), &ap, "pd", 2, &ops_plain, &a);
        ck_assert(lis_wait(&l, 1, 5000));
        ck_assert(side_wait(&a, 1, 5000));
        ck_assert(side_wait(&p, 1, 5000));
        ck_assert_int_eq(a.ev[0].type, EMU_CONN_ESTABLISHED);
        pthread_mutex_lock(&l.m);
        ck_assert_uint_eq(l.peer_caps, EMU_CONN_CAPS_LOCAL | (a_probes ? EMU_CONN_CAP_PROBES : 0));
        ck_assert_int_eq(l.pdlen, 2);
        pthread_mutex_unlock(&l.m);
        struct emu_conn_info ai, pi;
        ck_assert_int_eq(emu_conn_get_info(ac, &ai), 0);
        ck_assert_int_eq(emu_conn_get_info(p.c, &pi), 0);
        ck_assert(ai.peer_probes == p_probes);
        ck_assert(pi.peer_probes == a_probes);
        ck_assert_uint_eq(ai.caps, EMU_CONN_CAPS_LOCAL);
        ck_assert_uint_eq(pi.caps, EMU_CONN_CAPS_LOCAL);
        ck_assert_int_eq(a.ev[0].len, 0);
        emu_conn_free(p.c);
        emu_conn_free(ac);
        emu_listener_free(ls);
    }
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("emu_conn_caps");
    TCase *tc = tcase_create("caps");
    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, caps_marker_codec);
    tcase_add_test(tc, caps_marker_foreign_initiator);
    tcase_add_test(tc, caps_marker_no_caps_and_reject);
    tcase_add_test(tc, caps_marker_probes_announced);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return conn_fixture_main(suite());
}
