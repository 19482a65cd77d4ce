/* The wire tap (emu/wire_tap.c): a real loopback TCP connection whose
 * bytes go through emu_wire_send1/recv1 in odd-sized pieces (1, 3, 7, ...
 * bytes: every frame boundary falls inside a call somewhere) must come
 * out as exactly the frames that were written, decoded, with CRC verdicts,
 * on both sides, in the trace; and as a well-formed pcapng whose packets
 * carry every byte. */
#include "emu/crc32c.h"
#include "emu/ddp.h"
#include "emu/mpa.h"
#include "emu/pcapng.h"
#include "emu/trace.h"
#include "emu/wire.h"
#include "emu/wire_io.h"
#include "emu/wire_tap.h"

#include <arpa/inet.h>
#include <check.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "test/lib/tcp_pair.h"

static char g_trace[256], g_pcap[256];

/* Both ends of a loopback TCP connection with their wire endpoints
 * (IA ids 1 and ia_b), and their teardown: endpoints first (the tap
 * frees its state and writes what is pending), then the tap, the capture,
 * the trace and the sockets. */
struct pair {
    int a, b;
    struct emu_wire_ep ea, eb;
};
static void pair_up(struct pair *p, uint32_t ia_b)
{
    test_tcp_pair(AF_INET, &p->a, &p->b);
    emu_wire_ep_init(&p->ea, false, 1, 0);
    emu_wire_ep_init(&p->eb, false, ia_b, 0);
}
static void pair_down(struct pair *p)
{
    emu_wire_ep_fini(&p->ea);
    emu_wire_ep_fini(&p->eb);
    emu_wire_tap_stop();
    emu_pcap_close();
    sd_trace_close();
    close(p->a);
    close(p->b);
}

/* An MPA frame: key, flags, rev 2, private data of pd bytes. */
static size_t mpa(uint8_t *p, bool req, uint8_t flags, uint16_t pd)
{
    memcpy(p, req ? "MPA ID Req Frame" : "MPA ID Rep Frame", 16);
    p[16] = flags;
    p[17] = 2;
    emu_put_be16(p + 18, pd);
    memset(p + 20, 0x5a, pd);
    return 20u + pd;
}

/* An FPDU of h with payload_len bytes of payload; bad: corrupt the CRC. */
static size_t fpdu(uint8_t *p, const struct emu_ddp_hdr *h, uint32_t payload_len, bool bad)
{
    size_t hl;
    ck_assert_int_eq(emu_fpdu_build_hdr(h, payload_len, p, EMU_FPDU_HDR_MAX, &hl), 0);
    memset(p + hl, 0xab, payload_len);
    struct iovec v = {p + hl, payload_len};
    uint8_t trl[EMU_FPDU_TRAILER_MAX];
    size_t tl = emu_fpdu_build_trailer(p, hl, &v, 1, true, trl);
    if (bad)
        trl[tl - 1] ^= 0xff;
    memcpy(p + hl + payload_len, trl, tl);
    return hl + payload_len + tl;
}

/* Write buf over fd in pieces of 1, 3, 7, 13, ... bytes, reading it back
 * on the other fd in pieces of other sizes. */
static void move(struct emu_wire_ep *tx, int a, struct emu_wire_ep *rx, int b, const uint8_t *buf, size_t len)
{
    static const size_t wsz[] = {1, 3, 7, 13, 64, 1000, 5};
    static const size_t rsz[] = {2, 5, 11, 700, 1, 17};
    uint8_t got[1024];
    size_t w = 0, r = 0;
    for (int i = 0; (w < len || r < len) && i < 100000; i++) {
        if (w < len) {
            size_t n = wsz[i % 7] < len - w ? wsz[i % 7] : len - w;
            ssize_t s = emu_wire_send1(tx, a, buf + w, n, 0);
            ck_assert_int_gt(s, 0);
            w += (size_t)s;
        }
        while (r < w) {
            size_t n = rsz[i % 6] < sizeof got ? rsz[i % 6] : sizeof got;
            if (n > w - r)
                n = w - r;
            ssize_t s = emu_wire_recv1(rx, b, got, n, 0);
            ck_assert_int_gt(s, 0);
            ck_assert_mem_eq(got, buf + r, (size_t)s);
            r += (size_t)s;
        }
    }
    ck_assert_uint_eq(r, len);
}

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    char *b = malloc(4 << 20);
    size_t n = fread(b, 1, (4 << 20) - 1, f);
    fclose(f);
    b[n] = '\0';
    if (len)
        *len = n;
    return b;
}

static int count(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *p = hay; (p = strstr(p, needle)) != NULL; p++)
        n++;
    return n;
}

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

START_TEST(stream_cut_both_sides)
{
    snprintf(g_trace, sizeof g_trace, "/tmp/softdat-test-tap-%d.jsonl", (int)getpid());
    snprintf(g_pcap, sizeof g_pcap, "/tmp/softdat-test-tap-%%p.pcapng");
    ck_assert_int_eq(sd_trace_open(g_trace, 0), 0);
    ck_assert_int_eq(emu_pcap_open(g_pcap, 0), 0);
    snprintf(g_pcap, sizeof g_pcap, "/tmp/softdat-test-tap-%d.pcapng", (int)getpid());
    emu_wire_tap_start(true);

    struct pair pr;
    pair_up(&pr, 2);
    emu_wire_ep_set_conn(&pr.ea, 7);
    emu_wire_ep_set_conn(&pr.eb, 9);

    static uint8_t req[600], rep[600], data[200000];
    size_t rq = mpa(req, true, EMU_MPA_FLAG_C, 12), rp = mpa(rep, false, 0, 300);
    move(&pr.ea, pr.a, &pr.eb, pr.b, req, rq);
    move(&pr.eb, pr.b, &pr.ea, pr.a, rep, rp);

    size_t n = 0;
    struct emu_ddp_hdr h;
    memset(&h, 0, sizeof h);
    h.opcode = EMU_OP_WRITE, h.last = true, h.stag = 0x1234, h.to = 0x1000;
    n += fpdu(data + n, &h, 1000, false);
    memset(&h, 0, sizeof h);
    h.opcode = EMU_OP_SEND, h.last = true, h.msn = 1;
    n += fpdu(data + n, &h, 3, true); /* bad CRC */
    memset(&h, 0, sizeof h);
    h.opcode = EMU_OP_READ_REQ, h.last = true, h.msn = 1;
    h.u.rreq = (struct emu_rdmap_read_req){.sink_stag = 0x77, .sink_to = 8, .size = 64, .src_stag = 0x88, .src_to = 16};
    n += fpdu(data + n, &h, 0, false);
    memset(&h, 0, sizeof h);
    h.opcode = EMU_OP_WRITE, h.last = false, h.stag = 0x1234, h.to = 0x2000;
    n += fpdu(data + n, &h, 60000, false); /* big: many calls, two pcap segments */
    struct emu_term t;
    emu_term_init(&t, EMU_TERM_RDMAP, EMU_TERM_RDMAP_PROTECTION, EMU_RDMAP_EC_INV_STAG, NULL, 0, 0);
    emu_term_hdr(&h, &t);
    n += fpdu(data + n, &h, 0, false);
    move(&pr.ea, pr.a, &pr.eb, pr.b, data, n);
    pair_down(&pr);

    char *tr = slurp(g_trace, NULL);
    /* 2 MPA frames and 5 FPDUs, each seen sent (ia1/c7 or ia2/c9) and received. */
    ck_assert_int_eq(count(tr, "\"rec\":\"frame\""), 14);
    ck_assert_int_eq(count(tr, "\"dir\":\"tx\""), 7);
    ck_assert_int_eq(count(tr, "\"kind\":\"mpa_req\""), 2);
    ck_assert_int_eq(count(tr, "\"kind\":\"mpa_rep\""), 2);
    ck_assert_int_eq(count(tr, "\"pdata_len\":300"), 2);
    ck_assert_int_eq(count(tr, "\"crc_flag\":true"), 2);
    ck_assert_int_eq(count(tr, "\"op\":\"rdma_write\""), 4);
    ck_assert_int_eq(count(tr, "\"stag\":\"0x1234\",\"to\":\"0x1000\",\"payload_len\":1000,\"frame_len\":1020"), 2);
    ck_assert_int_eq(count(tr, "\"last\":false,\"stag\":\"0x1234\",\"to\":\"0x2000\",\"payload_len\":60000"), 2);
    ck_assert_int_eq(count(tr, "\"crc\":\"bad\""), 2);
    ck_assert_int_eq(count(tr, "\"crc\":\"ok\""), 8);
    ck_assert_int_eq(count(tr, "\"src_stag\":\"0x88\",\"src_to\":\"0x10\""), 2);
    ck_assert_int_eq(count(tr, "\"term_text\":\"RDMAP remote protection: invalid STag\""), 2);
    ck_assert_int_eq(count(tr, "\"ia\":\"ia1\",\"dir\":\"tx\",\"kind\":\"mpa_req\",\"conn\":\"c7\""), 1);
    ck_assert_int_eq(count(tr, "\"ia\":\"ia2\",\"dir\":\"rx\",\"kind\":\"mpa_req\",\"conn\":\"c9\""), 1);
    /* The sender's and the receiver's record of a frame name the same flow and offset. */
    ck_assert_int_eq(count(tr, "\"seq\":32,"), 2); /* the first FPDU, after the 32-byte Request */
    free(tr);

    size_t len;
    uint8_t *p = (uint8_t *)slurp(g_pcap, &len);
    ck_assert_uint_ge(len, 28 + 32);
    ck_assert_uint_eq(le32(p), 0x0A0D0D0Au);
    ck_assert_uint_eq(le32(p + 8), 0x1A2B3C4Du);
    /* Walk the blocks: the lengths chain to the end of the file; count
     * the packets and the TCP payload bytes in them. */
    size_t off = 0, epbs = 0, payload = 0;
    for (int i = 0; off < len && i < 100000; i++) {
        uint32_t type = le32(p + off), bl = le32(p + off + 4);
        ck_assert_uint_ge(bl, 12);
        ck_assert_uint_le(off + bl, len);
        ck_assert_uint_eq(le32(p + off + bl - 4), bl);
        if (type == 6) {
            uint32_t cap = le32(p + off + 20);
            const uint8_t *pk = p + off + 28;
            ck_assert_uint_eq(emu_get_be16(pk + 12), 0x0800);
            ck_assert_uint_eq(pk[14 + 9], 6);
            payload += cap - 14 - 20 - 20;
            epbs++;
        }
        off += bl;
    }
    ck_assert_uint_eq(off, len);
    ck_assert_uint_eq(payload, 2 * (rq + rp + n)); /* both sides wrote every byte */
    ck_assert_uint_ge(epbs, 6 + 4);
    free(p);
    unlink(g_trace);
    if (!getenv("KEEP_PCAP"))
        unlink(g_pcap);
}
END_TEST

/* A stream that does not start with an MPA frame is not cut: no records. */
START_TEST(not_mpa_not_cut)
{
    snprintf(g_trace, sizeof g_trace, "/tmp/softdat-test-tap2-%d.jsonl", (int)getpid());
    ck_assert_int_eq(sd_trace_open(g_trace, 0), 0);
    emu_wire_tap_start(true);
    struct pair pr;
    pair_up(&pr, 1);
    static uint8_t junk[5000];
    memset(junk, 'x', sizeof junk);
    move(&pr.ea, pr.a, &pr.eb, pr.b, junk, sizeof junk);
    pair_down(&pr);
    char *tr = slurp(g_trace, NULL);
    ck_assert_int_eq(count(tr, "\"rec\":\"frame\""), 0);
    free(tr);
    unlink(g_trace);
}
END_TEST


/* What a frame costs the sender and the receiver together (CPU time of
 * the process, so that waiting for a busy machine does not count): one Send FPDU
 * (64 B payload) written with emu_wire_send1 and read with
 * emu_wire_recv1, N times, with no observer, with the frame records on,
 * and with SOFTDAT_PCAP only. Reported on stderr ("wire tap bench", the
 * figures of docs/trace.md §5); asserted only to be finite. */
static double bench_round(int a, int b, struct emu_wire_ep *ea, struct emu_wire_ep *eb, const uint8_t *f, size_t fl,
                          int n)
{
    uint8_t in[256];
    struct timespec t0, t1;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t0);
    for (int i = 0; i < n; i++) {
        ck_assert_int_eq(emu_wire_send1(ea, a, f, fl, 0), (ssize_t)fl);
        size_t got = 0;
        for (int k = 0; got < fl && k < 1000; k++) {
            ssize_t r = emu_wire_recv1(eb, b, in + got, fl - got, 0);
            ck_assert_int_gt(r, 0);
            got += (size_t)r;
        }
    }
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t1);
    return ((double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec)) / n;
}

START_TEST(bench_cost_per_frame)
{
    enum { N = 5000 };
    snprintf(g_trace, sizeof g_trace, "/tmp/softdat-test-tap3-%d.jsonl", (int)getpid());
    snprintf(g_pcap, sizeof g_pcap, "/tmp/softdat-test-tap3-%d.pcapng", (int)getpid());
    double ns[3][3];
    for (int rep = 0; rep < 3; rep++) {
        for (int mode = 0; mode < 3; mode++) {
            struct pair pr;
            pair_up(&pr, 1);
            if (mode == 1) {
                ck_assert_int_eq(sd_trace_open(g_trace, 1ull << 30), 0);
                emu_wire_tap_start(true);
            } else if (mode == 2) {
                ck_assert_int_eq(emu_pcap_open(g_pcap, 1ull << 30), 0);
                emu_wire_tap_start(false);
            }
            static uint8_t req[64], f[200];
            size_t rq = mpa(req, true, 0, 0);
            move(&pr.ea, pr.a, &pr.eb, pr.b, req, rq);
            struct emu_ddp_hdr h;
            memset(&h, 0, sizeof h);
            h.opcode = EMU_OP_SEND, h.last = true, h.msn = 1;
            size_t fl = fpdu(f, &h, 64, false);
            ns[mode][rep] = bench_round(pr.a, pr.b, &pr.ea, &pr.eb, f, fl, N);
            pair_down(&pr);
        }
    }
    double best[3];
    for (int m = 0; m < 3; m++) {
        best[m] = ns[m][0];
        for (int r = 1; r < 3; r++)
            if (ns[m][r] < best[m])
                best[m] = ns[m][r];
        ck_assert(best[m] > 0 && best[m] < 1e7);
    }
    fprintf(stderr,
            "wire tap bench: one 84-byte FPDU sent and received, best of 3 x %d: no observer %.0f ns, "
            "frame records (2: tx and rx) %.0f ns (+%.0f ns a record), SOFTDAT_PCAP only %.0f ns (+%.0f ns a packet)\n",
            N, best[0], best[1], (best[1] - best[0]) / 2, best[2], (best[2] - best[0]) / 2);
    unlink(g_trace);
    unlink(g_pcap);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("wire_tap");
    TCase *tc = tcase_create("tap");
    tcase_add_test(tc, stream_cut_both_sides);
    tcase_add_test(tc, not_mpa_not_cut);
    tcase_add_test(tc, bench_cost_per_frame);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
