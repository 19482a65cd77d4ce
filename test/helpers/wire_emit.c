/* wire_emit: runs synthetic iWARP connections over loopback TCP using only
 * the emu wire codec (MPA handshake, FPDUs of every kind, Terminate), so
 * test/e2e/wire_tshark.sh can capture them and have tshark judge the bytes.
 * Both ends live in this process; each received FPDU is also checked with
 * our own parser (stateful MSN/MO rules, CRC).
 *
 *   wire_emit PORTFILE   bind 127.0.0.1:0, write the port to PORTFILE, wait
 *                        for one line on stdin, run the connections, print
 *                        "fpdus_crc=N fpdus_nocrc=M" on stdout, exit 0. */
#include "emu/crc32c.h"
#include "emu/ddp.h"
#include "emu/mpa.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#define MULPDU 1454u /* Ethernet-sized FPDUs so the Write/Read Response segment */

static int fails;
#define CHECK(c)                                                               \
    do {                                                                       \
        if (!(c)) {                                                            \
            fprintf(stderr, "wire_emit: %s:%d: check failed: %s\n", __FILE__, \
                    __LINE__, #c);                                             \
            fails++;                                                           \
            exit(1);                                                           \
        }                                                                      \
    } while (0)

static void write_all(int fd, const void *b, size_t n)
{
    const uint8_t *p = b;
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        CHECK(w > 0);
        p += w;
        n -= (size_t)w;
    }
}

static void writev_all(int fd, struct iovec *iov, int cnt)
{
    size_t total = 0;
    for (int i = 0; i < cnt; i++)
        total += iov[i].iov_len;
    while (total) {
        ssize_t w = writev(fd, iov, cnt);
        if (w < 0 && errno == EINTR)
            continue;
        CHECK(w > 0);
        total -= (size_t)w;
        while (w > 0) {
            if ((size_t)w >= iov->iov_len) {
                w -= (ssize_t)iov->iov_len;
                iov++;
                cnt--;
            } else {
                iov->iov_base = (uint8_t *)iov->iov_base + w;
                iov->iov_len -= (size_t)w;
                w = 0;
            }
        }
    }
}

static void read_all(int fd, void *b, size_t n)
{
    uint8_t *p = b;
    while (n) {
        ssize_t r = read(fd, p, n);
        if (r < 0 && errno == EINTR)
            continue;
        CHECK(r > 0);
        p += r;
        n -= (size_t)r;
    }
}

struct side {
    int fd;
    bool crc;
    uint32_t tx_msn[EMU_QN_COUNT];   /* next MSN per untagged queue */
    struct emu_ddp_rx_state rx;
    unsigned fpdus_sent;
};

static void side_init(struct side *s, int fd, bool crc)
{
    memset(s, 0, sizeof *s);
    s->fd = fd;
    s->crc = crc;
    for (int i = 0; i < EMU_QN_COUNT; i++)
        s->tx_msn[i] = 1;
    emu_ddp_rx_init(&s->rx, true);
}

/* Send one message (segmented) from template h; untagged MSN assigned here. */
static void send_msg(struct side *s, struct emu_ddp_hdr h, const void *data, uint64_t len)
{
    bool tagged = emu_rdmap_op_tagged(h.opcode);
    int qn = emu_rdmap_op_qn(h.opcode);
    if (!tagged)
        h.msn = s->tx_msn[qn]++;
    uint64_t base_to = h.to;
    struct emu_ddp_seg seg;
    struct emu_ddp_seg_info si;
    CHECK(emu_ddp_seg_init(&seg, len, MULPDU, tagged) == EMU_DDP_OK);
    while (emu_ddp_seg_next(&seg, &si)) {
        emu_ddp_seg_apply(&h, base_to, &si);
        uint8_t hdr[EMU_FPDU_HDR_MAX], trl[EMU_FPDU_TRAILER_MAX];
        size_t hl;
        CHECK(emu_fpdu_build_hdr(&h, si.len, hdr, sizeof hdr, &hl) == EMU_DDP_OK);
        struct iovec pl = {(uint8_t *)data + si.off, si.len};
        size_t tl = emu_fpdu_build_trailer(hdr, hl, &pl, 1, s->crc, trl);
        struct iovec iov[3] = {{hdr, hl}, pl, {trl, tl}};
        writev_all(s->fd, iov, 3);
        s->fpdus_sent++;
    }
}

/* Receive one FPDU into buf, validate it; payload copied to dst+off. */
static void recv_fpdu(struct side *s, struct emu_ddp_hdr *h, uint8_t *dst, size_t dst_len)
{
    static uint8_t buf[70000];
    read_all(s->fd, buf, 2);
    uint16_t ul = (uint16_t)(buf[0] << 8 | buf[1]);
    uint32_t wl = emu_fpdu_wire_len(ul);
    read_all(s->fd, buf + 2, wl - 2);
    struct iovec all = {buf, wl};
    if (s->crc)
        CHECK(emu_fpdu_crc_ok(&all, 1));
    else
        CHECK(emu_crc32c_get_le(buf + wl - 4) == 0);
    size_t need;
    int rc = emu_ddp_parse(buf + 2, ul, ul, &s->rx, h, &need);
    if (rc)
        fprintf(stderr, "wire_emit: parse: %s\n", emu_ddp_strerror(rc));
    CHECK(rc == EMU_DDP_OK);
    uint64_t off = h->tagged ? h->to : h->mo;
    if (h->payload_len) {
        CHECK(dst && off + h->payload_len <= dst_len);
        memcpy(dst + off, buf + 2 + h->hdr_len, h->payload_len);
    }
    emu_ddp_rx_advance(&s->rx, h);
}

/* Receive a whole message of the given opcode; returns its length. */
static uint64_t recv_msg(struct side *s, unsigned op, struct emu_ddp_hdr *h, uint8_t *dst,
                         size_t dst_len)
{
    uint64_t n = 0;
    do {
        recv_fpdu(s, h, dst, dst_len);
        CHECK(h->opcode == op);
        n += h->payload_len;
    } while (!h->last);
    return n;
}

static void mpa_handshake(int cfd, int sfd, const struct emu_mpa_policy *ip,
                          const struct emu_mpa_policy *rp, struct emu_mpa_result *ires,
                          struct emu_mpa_result *rres)
{
    static const char ipd[] = "softdat wire test";
    static const char rpd[] = "accepted";
    struct emu_mpa_frame req, rep, preq, prep;
    uint8_t b[EMU_MPA_FRAME_MAX], r[EMU_MPA_FRAME_MAX];
    size_t n, more;
    CHECK(emu_mpa_init_request(&req, ip, ipd, sizeof ipd) == 0);
    CHECK(emu_mpa_encode(&req, b, sizeof b, &n) == 0);
    write_all(cfd, b, n);

    read_all(sfd, r, EMU_MPA_HDR_LEN);
    CHECK(emu_mpa_parse_header(r, EMU_MPA_HDR_LEN, EMU_MPA_REQUEST, 2, 0, &more) == 0);
    read_all(sfd, r + EMU_MPA_HDR_LEN, more);
    CHECK(emu_mpa_parse_strict(r, EMU_MPA_HDR_LEN + more, EMU_MPA_REQUEST, 2, 0, &preq) == 0);
    CHECK(preq.pd_len == sizeof ipd && memcmp(preq.pd, ipd, sizeof ipd) == 0);
    CHECK(emu_mpa_accept(&preq, rp, rpd, sizeof rpd, &rep, rres) == 0);
    CHECK(emu_mpa_encode(&rep, b, sizeof b, &n) == 0);
    write_all(sfd, b, n);

    read_all(cfd, r, EMU_MPA_HDR_LEN);
    CHECK(emu_mpa_parse_header(r, EMU_MPA_HDR_LEN, EMU_MPA_REPLY, 2, 0, &more) == 0);
    read_all(cfd, r + EMU_MPA_HDR_LEN, more);
    CHECK(emu_mpa_parse(r, EMU_MPA_HDR_LEN + more, EMU_MPA_REPLY, 2, 0, &prep) == 0);
    CHECK(prep.pd_len == sizeof rpd && memcmp(prep.pd, rpd, sizeof rpd) == 0);
    CHECK(emu_mpa_confirm(&req, &prep, ip, ires) == 0);
    CHECK(ires->crc == rres->crc && ires->p2p == rres->p2p && ires->rtr == rres->rtr);
}

static unsigned run_conn(int lfd, uint16_t port, const struct emu_mpa_policy *ip,
                         const struct emu_mpa_policy *rp)
{
    int cfd = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(cfd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    CHECK(connect(cfd, (struct sockaddr *)&a, sizeof a) == 0);
    int sfd = accept(lfd, NULL, NULL);
    CHECK(sfd >= 0);
    int one = 1;
    setsockopt(cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(sfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);

    struct emu_mpa_result ires, rres;
    mpa_handshake(cfd, sfd, ip, rp, &ires, &rres);
    struct side ini, rsp;
    side_init(&ini, cfd, ires.crc);
    side_init(&rsp, sfd, rres.crc);

    static uint8_t big[20000], got[20000];
    for (size_t i = 0; i < sizeof big; i++)
        big[i] = (uint8_t)(i * 7 + 3);
    struct emu_ddp_hdr h;

    /* RTR: the initiator's first FPDU */
    if (ires.p2p) {
        if (ires.rtr == EMU_MPA_RTR_WRITE) {
            send_msg(&ini, (struct emu_ddp_hdr){.opcode = EMU_OP_WRITE, .stag = 1}, NULL, 0);
            CHECK(recv_msg(&rsp, EMU_OP_WRITE, &h, NULL, 0) == 0);
        } else {
            struct emu_ddp_hdr rr = {.opcode = EMU_OP_READ_REQ,
                                     .u.rreq = {.sink_stag = 1, .src_stag = 1}};
            send_msg(&ini, rr, NULL, 0);
            recv_msg(&rsp, EMU_OP_READ_REQ, &h, NULL, 0);
            send_msg(&rsp, (struct emu_ddp_hdr){.opcode = EMU_OP_READ_RESP, .stag = 1},
                     NULL, 0);
            CHECK(recv_msg(&ini, EMU_OP_READ_RESP, &h, NULL, 0) == 0);
        }
    }

    /* initiator -> responder: the Send family */
    static const char hello[] = "Hello, iWARP!";
    const unsigned sends[] = {EMU_OP_SEND, EMU_OP_SEND_SE, EMU_OP_SEND_INV,
                              EMU_OP_SEND_SE_INV};
    for (unsigned i = 0; i < 4; i++) {
        send_msg(&ini, (struct emu_ddp_hdr){.opcode = (uint8_t)sends[i],
                                            .inv_stag = 0x00ABCD00 | i},
                 hello, sizeof hello - 1);
        memset(got, 0, sizeof got);
        CHECK(recv_msg(&rsp, sends[i], &h, got, sizeof got) == sizeof hello - 1);
        CHECK(memcmp(got, hello, sizeof hello - 1) == 0);
        if (sends[i] == EMU_OP_SEND_INV || sends[i] == EMU_OP_SEND_SE_INV)
            CHECK(h.inv_stag == (0x00ABCD00u | i));
    }
    /* a zero-length Send and a multi-segment Send */
    send_msg(&ini, (struct emu_ddp_hdr){.opcode = EMU_OP_SEND}, NULL, 0);
    CHECK(recv_msg(&rsp, EMU_OP_SEND, &h, NULL, 0) == 0);
    send_msg(&ini, (struct emu_ddp_hdr){.opcode = EMU_OP_SEND}, big, 5000);
    memset(got, 0, sizeof got);
    CHECK(recv_msg(&rsp, EMU_OP_SEND, &h, got, sizeof got) == 5000);
    CHECK(memcmp(got, big, 5000) == 0);

    /* RDMA Write, 16 KiB + 3 (segmented, odd tail so the last FPDU pads) */
    send_msg(&ini, (struct emu_ddp_hdr){.opcode = EMU_OP_WRITE, .stag = 0x12345601, .to = 0},
             big, 16387);
    memset(got, 0, sizeof got);
    CHECK(recv_msg(&rsp, EMU_OP_WRITE, &h, got, sizeof got) == 16387);
    CHECK(memcmp(got, big, 16387) == 0);

    /* RDMA Read Request -> segmented Read Response */
    struct emu_ddp_hdr rr = {.opcode = EMU_OP_READ_REQ,
                             .u.rreq = {.sink_stag = 0xAABBCC01, .sink_to = 0,
                                        .size = 8191, .src_stag = 0x12345601,
                                        .src_to = 0x1000}};
    send_msg(&ini, rr, NULL, 0);
    recv_msg(&rsp, EMU_OP_READ_REQ, &h, NULL, 0);
    CHECK(h.u.rreq.size == 8191 && h.u.rreq.sink_stag == 0xAABBCC01);
    send_msg(&rsp, (struct emu_ddp_hdr){.opcode = EMU_OP_READ_RESP, .stag = h.u.rreq.sink_stag,
                                        .to = h.u.rreq.sink_to},
             big + 100, h.u.rreq.size);
    memset(got, 0, sizeof got);
    CHECK(recv_msg(&ini, EMU_OP_READ_RESP, &h, got, sizeof got) == 8191);
    CHECK(memcmp(got, big + 100, 8191) == 0);

    /* RFC 7306: Write + Immediate Data, an atomic and its response */
    send_msg(&ini, (struct emu_ddp_hdr){.opcode = EMU_OP_WRITE, .stag = 0x12345601, .to = 64},
             big, 64);
    recv_msg(&rsp, EMU_OP_WRITE, &h, got, sizeof got);
    struct emu_ddp_hdr im = {.opcode = EMU_OP_IMM_SE};
    emu_rdmap_imm_from_u32(im.u.imm, 0xC0FFEE);
    send_msg(&ini, im, NULL, 0);
    recv_msg(&rsp, EMU_OP_IMM_SE, &h, NULL, 0);
    CHECK(emu_rdmap_imm_to_u32(h.u.imm) == 0xC0FFEE);
    im.opcode = EMU_OP_IMM;
    send_msg(&ini, im, NULL, 0);
    recv_msg(&rsp, EMU_OP_IMM, &h, NULL, 0);
    CHECK(h.msn == rsp.rx.q[EMU_QN_SEND].msn - 1); /* shares the Send queue MSNs */
    struct emu_ddp_hdr at = {.opcode = EMU_OP_ATOMIC_REQ,
                             .u.areq = {.op = EMU_ATOMIC_FETCH_ADD, .req_id = 5,
                                        .stag = 0x12345601, .to = 0x2000, .add_swap = 1}};
    send_msg(&ini, at, NULL, 0);
    recv_msg(&rsp, EMU_OP_ATOMIC_REQ, &h, NULL, 0);
    CHECK(h.u.areq.req_id == 5 && h.u.areq.add_swap == 1);
    send_msg(&rsp, (struct emu_ddp_hdr){.opcode = EMU_OP_ATOMIC_RESP,
                                        .u.aresp = {.req_id = 5, .orig = 41}},
             NULL, 0);
    recv_msg(&ini, EMU_OP_ATOMIC_RESP, &h, NULL, 0);
    CHECK(h.u.aresp.req_id == 5 && h.u.aresp.orig == 41);

    /* responder's Send, then the initiator ends with a Terminate about a
     * (made-up) Send on an invalid queue */
    send_msg(&rsp, (struct emu_ddp_hdr){.opcode = EMU_OP_SEND_SE}, "bye", 3);
    recv_msg(&ini, EMU_OP_SEND_SE, &h, got, sizeof got);
    static const uint8_t bad_seg[18] = {0x41, 0x43, 0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0, 3};
    size_t need;
    struct emu_ddp_hdr bh;
    int rc = emu_ddp_parse(bad_seg, sizeof bad_seg, sizeof bad_seg, NULL, &bh, &need);
    CHECK(rc == EMU_DDP_E_QN);
    struct emu_term t;
    CHECK(emu_ddp_err_term(rc, bad_seg, sizeof bad_seg, sizeof bad_seg, &t));
    struct emu_ddp_hdr th;
    emu_term_hdr(&th, &t);
    send_msg(&ini, th, NULL, 0);
    recv_msg(&rsp, EMU_OP_TERMINATE, &h, NULL, 0);
    char d[128];
    fprintf(stderr, "wire_emit: terminate received: %s\n",
            emu_term_describe(&h.u.term, d, sizeof d));
    CHECK(h.u.term.layer == EMU_TERM_DDP && h.u.term.ecode == EMU_DDP_EC_U_QN);

    close(cfd);
    close(sfd);
    return ini.fpdus_sent + rsp.fpdus_sent;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: wire_emit PORTFILE\n");
        return 2;
    }
    int lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    CHECK(lfd >= 0);
    CHECK(bind(lfd, (struct sockaddr *)&a, sizeof a) == 0);
    CHECK(listen(lfd, 4) == 0);
    CHECK(getsockname(lfd, (struct sockaddr *)&a, &al) == 0);
    uint16_t port = ntohs(a.sin_port);
    FILE *pf = fopen(argv[1], "w");
    CHECK(pf);
    fprintf(pf, "%u\n", port);
    fclose(pf);
    char line[64];
    if (!fgets(line, sizeof line, stdin))
        return 1;

    /* 1: our default -- MPA v2, CRC on, P2P with the Write RTR */
    struct emu_mpa_policy p2 = {.rev = 2, .crc = true, .p2p = true, .ird = 8, .ord = 8};
    unsigned n_crc = run_conn(lfd, port, &p2, &p2);
    /* 2: MPA v2, P2P with the Read RTR, CRC on */
    struct emu_mpa_policy pr = p2;
    pr.rtr = EMU_MPA_RTR_READ;
    n_crc += run_conn(lfd, port, &pr, &p2);
    /* 3: MPA v1, CRC off (what loopback uses by default), no RTR */
    struct emu_mpa_policy p1 = {.rev = 1, .crc = false, .ird = 8, .ord = 8};
    unsigned n_nocrc = run_conn(lfd, port, &p1, &p1);
    close(lfd);
    printf("fpdus_crc=%u fpdus_nocrc=%u\n", n_crc, n_nocrc);
    return fails ? 1 : 0;
}
