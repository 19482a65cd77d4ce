/* A hostile iWARP peer's own wire codec for the hostile-peer suite
 * (test_hostile_peer.c): MPA v2 Request/RTR, DDP/RDMAP frames built byte by
 * byte from RFC 5044/5041/5040/6581 (shared/spec/iwarp-wire-reference.md),
 * and a Terminate decoder. Deliberately independent of emu/: a mistake in
 * the codec under test must not be mirrored by the attacker. */
#ifndef SOFTDAT_TEST_HOSTILE_WIRE_H
#define SOFTDAT_TEST_HOSTILE_WIRE_H

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "test/lib/clock.h"

/* RDMAP opcodes (RFC 5040 §4.3). */
enum hw_op {
    HW_WRITE = 0x0,
    HW_READ_REQ = 0x1,
    HW_READ_RESP = 0x2,
    HW_SEND = 0x3,
    HW_TERMINATE = 0x7,
};

struct hw_frame {
    uint8_t b[70000];
    size_t n;
};

static inline void hw_be16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}

static inline void hw_be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

static inline void hw_be64(uint8_t *p, uint64_t v)
{
    hw_be32(p, (uint32_t)(v >> 32));
    hw_be32(p + 4, (uint32_t)v);
}

/* CRC32c, bit by bit (Castagnoli, reflected 0x82F63B78). */
static inline uint32_t hw_crc32c(const uint8_t *p, size_t n)
{
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1u)));
    }
    return ~c;
}

/* Pad and the CRC field after a frame of f->n bytes (length field included). */
static inline void hw_finish(struct hw_frame *f, bool crc)
{
    while (f->n % 4 != 0)
        f->b[f->n++] = 0;
    uint32_t c = crc ? hw_crc32c(f->b, f->n) : 0;
    /* stored least-significant byte first (RFC 5044 §4.4, as siw and softdat) */
    f->b[f->n++] = (uint8_t)c;
    f->b[f->n++] = (uint8_t)(c >> 8);
    f->b[f->n++] = (uint8_t)(c >> 16);
    f->b[f->n++] = (uint8_t)(c >> 24);
}

/* DDP control byte: T (tagged), L (last), DV = 1; RDMAP control: RV = 1. */
#define HW_DDP(tagged, last, dv) (uint8_t)(((tagged) ? 0x80 : 0) | ((last) ? 0x40 : 0) | ((dv) & 3))
#define HW_RDMAP(op, rv) (uint8_t)((((rv) & 3) << 6) | ((op) & 0x0F))

/* A tagged FPDU (RDMA Write, Read Response). */
static inline void hw_tagged(struct hw_frame *f, uint8_t ddp, uint8_t rdmap, uint32_t stag, uint64_t to,
                             const void *pay, size_t len, bool crc)
{
    hw_be16(f->b, (uint16_t)(14 + len));
    f->b[2] = ddp;
    f->b[3] = rdmap;
    hw_be32(f->b + 4, stag);
    hw_be64(f->b + 8, to);
    if (len)
        memcpy(f->b + 16, pay, len);
    f->n = 16 + len;
    hw_finish(f, crc);
}

/* An untagged FPDU: header (reserved/inv STag, QN, MSN, MO), then ext (a
 * Read Request's 28 bytes) and payload. */
static inline void hw_untagged(struct hw_frame *f, uint8_t ddp, uint8_t rdmap, uint32_t qn, uint32_t msn,
                               uint32_t mo, const void *ext, size_t elen, const void *pay, size_t len,
                               bool crc)
{
    hw_be16(f->b, (uint16_t)(18 + elen + len));
    f->b[2] = ddp;
    f->b[3] = rdmap;
    hw_be32(f->b + 4, 0);
    hw_be32(f->b + 8, qn);
    hw_be32(f->b + 12, msn);
    hw_be32(f->b + 16, mo);
    f->n = 20;
    if (elen)
        memcpy(f->b + f->n, ext, elen);
    f->n += elen;
    if (len)
        memcpy(f->b + f->n, pay, len);
    f->n += len;
    hw_finish(f, crc);
}

static inline void hw_send(struct hw_frame *f, uint32_t msn, const void *pay, size_t len, bool crc)
{
    hw_untagged(f, HW_DDP(0, 1, 1), HW_RDMAP(HW_SEND, 1), 0, msn, 0, NULL, 0, pay, len, crc);
}

static inline void hw_write(struct hw_frame *f, uint32_t stag, uint64_t to, const void *pay, size_t len,
                            bool crc)
{
    hw_tagged(f, HW_DDP(1, 1, 1), HW_RDMAP(HW_WRITE, 1), stag, to, pay, len, crc);
}

static inline void hw_read_req(struct hw_frame *f, uint32_t msn, uint32_t sink_stag, uint64_t sink_to,
                               uint32_t size, uint32_t src_stag, uint64_t src_to, bool crc)
{
    uint8_t r[28];
    hw_be32(r, sink_stag);
    hw_be64(r + 4, sink_to);
    hw_be32(r + 12, size);
    hw_be32(r + 16, src_stag);
    hw_be64(r + 20, src_to);
    hw_untagged(f, HW_DDP(0, 1, 1), HW_RDMAP(HW_READ_REQ, 1), 1, msn, 0, r, sizeof r, NULL, 0, crc);
}

/* ---------------------------------------------------------------- socket */

static inline int hw_connect(uint16_t port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(port);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static inline bool hw_send_all(int fd, const void *p, size_t n)
{
    const uint8_t *b = p;
    while (n > 0) {
        ssize_t w = send(fd, b, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return false;
        b += w;
        n -= (size_t)w;
    }
    return true;
}

/* Read exactly n bytes within ms; returns bytes read (< n: EOF, error or
 * timeout; *closed, if given, tells EOF or error from a timeout). */
static inline size_t hw_recv_n2(int fd, void *p, size_t n, int ms, bool *closed)
{
    uint8_t *b = p;
    size_t got = 0;
    double end = test_now_s() + ms / 1000.0;
    if (closed)
        *closed = false;
    while (got < n) {
        int left = (int)((end - test_now_s()) * 1000.0);
        if (left <= 0)
            break;
        struct pollfd pf = {.fd = fd, .events = POLLIN};
        if (poll(&pf, 1, left) <= 0)
            continue;
        ssize_t r = recv(fd, b + got, n - got, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            if (closed)
                *closed = true;
            break;
        }
        got += (size_t)r;
    }
    return got;
}

static inline size_t hw_recv_n(int fd, void *p, size_t n, int ms)
{
    return hw_recv_n2(fd, p, n, ms, NULL);
}

/* MPA v2 Request (enhanced, P2P, Write RTR offered, IRD/ORD ird/ord), C if
 * crc; reads the Reply. Returns the Reply's C bit, or -1. Then the RTR
 * (zero-length RDMA Write, STag 1) goes out. */
static inline int hw_handshake(int fd, uint16_t ird, uint16_t ord, bool crc)
{
    uint8_t req[24];
    memcpy(req, "MPA ID Req Frame", 16);
    req[16] = (uint8_t)(0x10 | (crc ? 0x40 : 0));
    req[17] = 2;
    hw_be16(req + 18, 4);
    hw_be16(req + 20, (uint16_t)(0x8000 | ird));
    hw_be16(req + 22, (uint16_t)(0x8000 | ord));
    if (!hw_send_all(fd, req, sizeof req))
        return -1;
    uint8_t rep[20 + 512];
    if (hw_recv_n(fd, rep, 20, 3000) != 20 || memcmp(rep, "MPA ID Rep Frame", 16) != 0 || (rep[16] & 0x20))
        return -1;
    size_t pd = (size_t)(rep[18] << 8 | rep[19]);
    if (pd > 512 || hw_recv_n(fd, rep + 20, pd, 3000) != pd)
        return -1;
    int c = (rep[16] & 0x40) != 0 || crc;
    struct hw_frame f;
    hw_tagged(&f, HW_DDP(1, 1, 1), HW_RDMAP(HW_WRITE, 1), 1, 0, NULL, 0, c);
    return hw_send_all(fd, f.b, f.n) ? c : -1;
}

/* What the peer's Terminate said. */
struct hw_term {
    bool seen;
    uint8_t layer, etype, ecode;
    bool eof; /* the connection ended after it (or without one) */
};

#define HW_FPDU_BODY_MAX 70000 /* a ULPDU of 65535, pad, CRC field */

/* One FPDU: the ULPDU (DDP header first), its pad and CRC field into body
 * (HW_FPDU_BODY_MAX bytes); returns ULPDU_Length, or -1 on EOF, error or
 * timeout (*closed: EOF or error). */
static inline long hw_recv_fpdu(int fd, uint8_t *body, int ms, bool *closed)
{
    uint8_t h[2];
    if (hw_recv_n2(fd, h, 2, ms, closed) != 2)
        return -1;
    size_t ulpdu = (size_t)(h[0] << 8 | h[1]);
    size_t rest = ulpdu + ((4 - (ulpdu + 2) % 4) % 4) + 4;
    if (hw_recv_n2(fd, body, rest, ms, closed) != rest)
        return -1;
    return (long)ulpdu;
}

/* Is this FPDU body a Terminate? Then its triple into t. */
static inline bool hw_is_terminate(const uint8_t *body, long ulpdu, struct hw_term *t)
{
    if (ulpdu < 20 || (body[0] & 0x80) || (body[1] & 0x0F) != HW_TERMINATE)
        return false;
    t->seen = true;
    t->layer = body[18] >> 4;
    t->etype = body[18] & 0x0F;
    t->ecode = body[19];
    return true;
}

/* Read FPDUs until a Terminate, EOF or ms pass. Other FPDUs (Read
 * Responses) are skipped by their length. */
static inline struct hw_term hw_await_terminate(int fd, int ms)
{
    struct hw_term t;
    memset(&t, 0, sizeof t);
    double end = test_now_s() + ms / 1000.0;
    for (int frames = 0; frames < 100000; frames++) {
        int left = (int)((end - test_now_s()) * 1000.0);
        if (left <= 0)
            return t;
        static uint8_t body[HW_FPDU_BODY_MAX];
        bool closed;
        long ulpdu = hw_recv_fpdu(fd, body, left, &closed);
        if (ulpdu < 0) {
            t.eof = closed;
            return t;
        }
        if (hw_is_terminate(body, ulpdu, &t)) {
            uint8_t x;
            hw_recv_n2(fd, &x, 1, 3000, &t.eof);
            return t;
        }
    }
    return t;
}

#endif
