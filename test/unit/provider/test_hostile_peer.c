/* The hostile-peer suite (issue 13 §2): a scripted iWARP peer of our own
 * (hostile_wire.h: its own encoder, no emu/ code) connects to a softdat
 * endpoint over loopback and attacks it: bad, stale and wrong-key STags,
 * the wrong PZ, missing privileges, out-of-bounds and wrapping offsets,
 * Read Requests beyond the IRD, Sends with no receive or too long, bad
 * queue numbers and MSNs, bad DDP/RDMAP versions and opcodes, bad CRCs,
 * lying lengths, garbage instead of the handshake, a flood of tiny frames,
 * an idle half-open connection.
 *
 * For each: the Terminate's layer / error type / error code (RFC 5040
 * §7.2, RFC 5041 §7.2, RFC 5044 §8; the mapping softdat documents in
 * docs/wire.md §3) or the spec's handling; the target's memory outside
 * what a valid operation may write is unchanged (every registered page and
 * the guard pages around them, checked byte for byte); the EP sees its
 * connection end; and another connection of the same IA carries on (a
 * Send/Receive round over it after every attack). */
#include <sys/ioctl.h>
#include <sys/mman.h>

#include "hostile_wire.h"
#include "test/lib/rc_pair.h"

enum { PG = 4096, NPAGES = 6 };
/* Pages of the target arena: guard | R (all rights) | RO (remote read, no
 * remote write) | WO (remote write, no remote read) | P2 (all rights, the
 * other PZ) | guard. */
enum { P_R = 1, P_RO = 2, P_WO = 3, P_P2 = 4 };

struct arena {
    struct rp_pair x;
    uint8_t *mem, *snap;
    DAT_LMR_HANDLE lmr[NPAGES];
    DAT_RMR_CONTEXT stag[NPAGES];
    uint64_t va[NPAGES];
};

static void reg(struct arena *a, int page, DAT_PZ_HANDLE pz, DAT_MEM_PRIV_FLAGS priv)
{
    struct rp_side *s = &a->x.s;
    DAT_REGION_DESCRIPTION rd;
    rd.for_va = a->mem + page * PG;
    DAT_LMR_CONTEXT lc;
    DAT_VLEN sz;
    DAT_VADDR va;
    ck_assert_dat_ok(s->p->lmr_create_func(s->ia, DAT_MEM_TYPE_VIRTUAL, rd, PG, pz, priv, DAT_VA_TYPE_VA,
                                           &a->lmr[page], &lc, &a->stag[page], &sz, &va));
    a->va[page] = (uint64_t)va;
}

static void arena_open(struct arena *a, const char *params)
{
    memset(a, 0, sizeof *a);
    rp_open_params(&a->x, "t-hostile", params, NULL, NULL);
    a->mem = mmap(NULL, NPAGES * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ck_assert_ptr_ne(a->mem, MAP_FAILED);
    a->snap = malloc(NPAGES * PG);
    ck_assert_ptr_nonnull(a->snap);
    for (int i = 0; i < NPAGES * PG; i++)
        a->mem[i] = (uint8_t)(0xE0 ^ (i * 7));
    memcpy(a->snap, a->mem, NPAGES * PG);
    const DAT_MEM_PRIV_FLAGS local = DAT_MEM_PRIV_LOCAL_READ_FLAG | DAT_MEM_PRIV_LOCAL_WRITE_FLAG;
    reg(a, P_R, a->x.s.pz, DAT_MEM_PRIV_ALL_FLAG);
    reg(a, P_RO, a->x.s.pz, local | DAT_MEM_PRIV_REMOTE_READ_FLAG);
    reg(a, P_WO, a->x.s.pz, local | DAT_MEM_PRIV_REMOTE_WRITE_FLAG);
    reg(a, P_P2, a->x.s.pz2, DAT_MEM_PRIV_ALL_FLAG);
}

static void arena_close(struct arena *a)
{
    rp_close(&a->x);
    munmap(a->mem, NPAGES * PG);
    free(a->snap);
}

/* Nothing changed outside what the scenario allowed (a->snap tracks it). */
static void assert_memory_intact(const struct arena *a, const char *what)
{
    for (int i = 0; i < NPAGES * PG; i++)
        ck_assert_msg(a->mem[i] == a->snap[i], "%s: byte %d of the arena (page %d, offset %d) changed", what, i,
                      i / PG, i % PG);
}

/* The other connection of the IA still moves data both ways. */
static void assert_neighbour_alive(struct arena *a, const char *what)
{
    struct rp_side *c = &a->x.c, *s = &a->x.s;
    static unsigned round;
    round++;
    for (int dir = 0; dir < 2; dir++) {
        struct rp_side *tx = dir ? s : c, *rx = dir ? c : s;
        DAT_EP_HANDLE txep = dir ? a->x.sep : a->x.cep, rxep = dir ? a->x.cep : a->x.sep;
        memset(rx->buf, 0, 64);
        snprintf(tx->buf, 64, "alive %u/%d", round, dir);
        DAT_LMR_TRIPLET rt = rp_tri(rx->lc, rx->buf, 64);
        ck_assert_dat_ok(rx->p->ep_post_recv_func(rxep, 1, &rt, rp_ck(9), 0));
        DAT_LMR_TRIPLET t = rp_tri(tx->lc, tx->buf, 32);
        ck_assert_dat_ok(tx->p->ep_post_send_func(txep, 1, &t, rp_ck(8), 0));
        DAT_DTO_COMPLETION_EVENT_DATA d = rp_dto(rx, rx->rcv);
        ck_assert_msg(d.status == DAT_DTO_SUCCESS, "%s: neighbour receive status %d", what, (int)d.status);
        ck_assert_str_eq(rx->buf, tx->buf);
        d = rp_dto(tx, tx->req);
        ck_assert_int_eq(d.status, DAT_DTO_SUCCESS);
    }
}

/* A hostile connection accepted onto a fresh EP (IRD 2). */
struct hostile {
    int fd;
    bool crc;
    DAT_EP_HANDLE ep;
};

static struct hostile hostile_connect(struct arena *a, bool crc)
{
    struct rp_side *s = &a->x.s;
    struct hostile h = {.fd = hw_connect((uint16_t)a->x.port), .crc = crc};
    ck_assert_int_ge(h.fd, 0);
    DAT_EP_ATTR at;
    rp_attr(&at, DAT_COMPLETION_EVD_THRESHOLD_FLAG, DAT_COMPLETION_EVD_THRESHOLD_FLAG);
    at.max_rdma_read_in = 2;
    at.max_rdma_read_out = 2;
    h.ep = rp_ep(s, &at);
    return h;
}

/* Handshake on h (the target accepts), then ESTABLISHED at the target. */
static void hostile_establish(struct arena *a, struct hostile *h)
{
    struct rp_side *s = &a->x.s;
    /* (not hw_handshake: the Reply comes only after the consumer accepts) */
    uint8_t req[24];
    memcpy(req, "MPA ID Req Frame", 16);
    req[16] = (uint8_t)(0x10 | (h->crc ? 0x40 : 0));
    req[17] = 2;
    hw_be16(req + 18, 4);
    hw_be16(req + 20, 0x8000 | 4);
    hw_be16(req + 22, 0x8000 | 4);
    ck_assert(hw_send_all(h->fd, req, sizeof req));
    DAT_EVENT ev = rp_wait(s, s->cr, DAT_CONNECTION_REQUEST_EVENT);
    ck_assert_dat_ok(s->p->cr_accept_func(ev.event_data.cr_arrival_event_data.cr_handle, h->ep, 0, NULL));
    uint8_t rep[20 + 512];
    ck_assert_uint_eq(hw_recv_n(h->fd, rep, 20, 3000), 20);
    ck_assert(memcmp(rep, "MPA ID Rep Frame", 16) == 0);
    size_t pd = (size_t)(rep[18] << 8 | rep[19]);
    ck_assert_uint_le(pd, 512);
    ck_assert_uint_eq(hw_recv_n(h->fd, rep + 20, pd, 3000), pd);
    h->crc = h->crc || (rep[16] & 0x40);
    struct hw_frame f;
    hw_tagged(&f, HW_DDP(1, 1, 1), HW_RDMAP(HW_WRITE, 1), 1, 0, NULL, 0, h->crc);
    ck_assert(hw_send_all(h->fd, f.b, f.n));
    ev = rp_wait(s, s->conn, DAT_CONNECTION_EVENT_ESTABLISHED);
    ck_assert_ptr_eq(ev.event_data.connect_event_data.ep_handle, h->ep);
}

static void hostile_send(struct hostile *h, const struct hw_frame *f)
{
    ck_assert(hw_send_all(h->fd, f->b, f->n));
}

/* Every scenario ends here. With a connection (h): the attacker closes its
 * socket (if it has not yet: h->fd -1), the target's EP sees the
 * connection end with `want` (0: BROKEN or DISCONNECTED) and is freed.
 * Then `settle` (NULL: none) records in a->snap what the attack was
 * allowed to change; nothing else in the arena changed, the neighbour
 * connection still moves data both ways, and the arena closes. */
static void expect_end(struct arena *a, struct hostile *h, const char *what, DAT_EVENT_NUMBER want,
                       void (*settle)(struct arena *a))
{
    if (h != NULL) {
        struct rp_side *s = &a->x.s;
        if (h->fd >= 0)
            close(h->fd);
        h->fd = -1;
        DAT_EVENT ev;
        DAT_COUNT n;
        ck_assert_dat_ok(s->p->evd_wait_func(s->conn, 5000000, 1, &ev, &n));
        if (want != 0)
            ck_assert_msg(ev.event_number == want, "%s: connection event 0x%x, want 0x%x", what, ev.event_number,
                          want);
        else
            ck_assert_msg(ev.event_number == DAT_CONNECTION_EVENT_BROKEN ||
                              ev.event_number == DAT_CONNECTION_EVENT_DISCONNECTED,
                          "%s: connection event 0x%x", what, ev.event_number);
        ck_assert_ptr_eq(ev.event_data.connect_event_data.ep_handle, h->ep);
        ck_assert_dat_ok(s->p->ep_free_func(h->ep));
    }
    if (settle != NULL)
        settle(a);
    assert_memory_intact(a, what);
    assert_neighbour_alive(a, what);
    arena_close(a);
}

/* The target terminated with (layer, etype, ecode), its EP saw the
 * connection end, nothing else changed, and the neighbour lives. */
static void expect_terminate(struct arena *a, struct hostile *h, const char *what, int layer, int etype,
                             int ecode)
{
    struct hw_term t = hw_await_terminate(h->fd, 5000);
    ck_assert_msg(t.seen, "%s: no Terminate (eof %d)", what, t.eof);
    ck_assert_msg(t.layer == layer && t.etype == etype && t.ecode == ecode,
                  "%s: Terminate layer %u type %u code 0x%02x, want %d %d 0x%02x", what, t.layer, t.etype,
                  t.ecode, layer, etype, ecode);
    ck_assert_msg(t.eof, "%s: the connection stayed open after the Terminate", what);
    expect_end(a, h, what, DAT_CONNECTION_EVENT_BROKEN, NULL);
}

/* One attack frame on a fresh connection of an iWARP-semantics IA. */
static void one_frame(const char *params, const char *what, bool crc,
                      void (*build)(struct arena *, struct hw_frame *, bool), int layer, int etype, int ecode)
{
    struct arena a;
    arena_open(&a, params);
    struct hostile h = hostile_connect(&a, crc);
    hostile_establish(&a, &h);
    static struct hw_frame f;
    build(&a, &f, h.crc);
    hostile_send(&h, &f);
    expect_terminate(&a, &h, what, layer, etype, ecode);
}

/* ---------------------------------------------------------------- Writes */

static const uint8_t junk[100] = "hostile bytes that must not land anywhere in the target's memory";

static void w_bad_index(struct arena *a, struct hw_frame *f, bool crc)
{
    hw_write(f, a->stag[P_R] + 0x4000u * 256u, a->va[P_R], junk, 8, crc);
}
static void w_wrong_key(struct arena *a, struct hw_frame *f, bool crc)
{
    hw_write(f, a->stag[P_R] ^ 0x5Au, a->va[P_R], junk, 8, crc);
}
static void w_wrong_pz(struct arena *a, struct hw_frame *f, bool crc)
{
    hw_write(f, a->stag[P_P2], a->va[P_P2], junk, 8, crc);
}
static void w_no_right(struct arena *a, struct hw_frame *f, bool crc)
{
    hw_write(f, a->stag[P_RO], a->va[P_RO], junk, 8, crc);
}
static void w_past_end(struct arena *a, struct hw_frame *f, bool crc)
{
    hw_write(f, a->stag[P_R], a->va[P_R] + PG - 10, junk, 100, crc);
}
static void w_before_start(struct arena *a, struct hw_frame *f, bool crc)
{
    hw_write(f, a->stag[P_R], a->va[P_R] - 16, junk, 8, crc);
}
static void w_far(struct arena *a, struct hw_frame *f, bool crc)
{
    hw_write(f, a->stag[P_R], a->va[P_R] + (1ull << 40), junk, 8, crc);
}
static void w_wrap(struct arena *a, struct hw_frame *f, bool crc)
{
    hw_write(f, a->stag[P_R], UINT64_MAX - 10, junk, 100, crc);
}

START_TEST(write_bad_stag)
{
    one_frame("lo iwarp", "Write, STag of no region", false, w_bad_index, 1, 1, 0x00);
}
END_TEST
START_TEST(write_wrong_key)
{
    one_frame("lo iwarp", "Write, right index, wrong key", false, w_wrong_key, 1, 1, 0x00);
}
END_TEST
START_TEST(write_wrong_pz)
{
    one_frame("lo iwarp", "Write, region of another PZ", false, w_wrong_pz, 1, 1, 0x02);
}
END_TEST
START_TEST(write_no_remote_write)
{
    /* DDP has no access-rights code: Invalid STag, as siw reports it */
    one_frame("lo iwarp", "Write, region without remote write", false, w_no_right, 1, 1, 0x00);
}
END_TEST
START_TEST(write_out_of_bounds)
{
    one_frame("lo iwarp", "Write across the region's end", false, w_past_end, 1, 1, 0x01);
    one_frame("lo iwarp", "Write before the region's start", false, w_before_start, 1, 1, 0x01);
    one_frame("lo iwarp", "Write 1 TiB past the region", false, w_far, 1, 1, 0x01);
}
END_TEST
START_TEST(write_to_wrap)
{
    one_frame("lo iwarp", "Write whose offset wraps 2^64", false, w_wrap, 1, 1, 0x03);
}
END_TEST

/* A region freed before the Write arrives: its STag is stale. */
START_TEST(write_stale_stag)
{
    struct arena a;
    arena_open(&a, "lo iwarp");
    struct rp_side *s = &a.x.s;
    uint32_t stale = a.stag[P_R];
    ck_assert_dat_ok(s->p->lmr_free_func(a.lmr[P_R]));
    struct hostile h = hostile_connect(&a, false);
    hostile_establish(&a, &h);
    static struct hw_frame f;
    hw_write(&f, stale, a.va[P_R], junk, 8, false);
    hostile_send(&h, &f);
    expect_terminate(&a, &h, "Write to a freed region's STag", 1, 1, 0x00);
}
END_TEST

/* ---------------------------------------------------------------- Reads */

static void r_bad_index(struct arena *a, struct hw_frame *f, bool crc)
{
    hw_read_req(f, 1, 0x77, 0, 8, a->stag[P_R] + 0x4000u * 256u, a->va[P_R], crc);
}
static void r_past_end(struct arena *a, struct hw_frame *f, bool crc)
{
    hw_read_req(f, 1, 0x77, 0, 100, a->stag[P_R], a->va[P_R] + PG - 10, crc);
}
static void r_no_right(struct arena *a, struct hw_frame *f, bool crc)
{
    hw_read_req(f, 1, 0x77, 0, 8, a->stag[P_WO], a->va[P_WO], crc);
}
static void r_wrong_pz(struct arena *a, struct hw_frame *f, bool crc)
{
    hw_read_req(f, 1, 0x77, 0, 8, a->stag[P_P2], a->va[P_P2], crc);
}
static void r_wrap(struct arena *a, struct hw_frame *f, bool crc)
{
    hw_read_req(f, 1, 0x77, 0, 100, a->stag[P_R], UINT64_MAX - 10, crc);
}

START_TEST(read_protection)
{
    one_frame("lo iwarp", "Read Request, STag of no region", false, r_bad_index, 0, 1, 0x00);
    one_frame("lo iwarp", "Read Request across the region's end", false, r_past_end, 0, 1, 0x01);
    one_frame("lo iwarp", "Read Request, region without remote read", false, r_no_right, 0, 1, 0x02);
    one_frame("lo iwarp", "Read Request, region of another PZ", false, r_wrong_pz, 0, 1, 0x03);
    one_frame("lo iwarp", "Read Request whose offset wraps 2^64", false, r_wrap, 0, 1, 0x04);
}
END_TEST

/* IRD is 2 (the EP's max_rdma_read_in on an iWARP IA). A peer that sends
 * 2,000 Read Requests for 4 KiB each and reads nothing fills the target's
 * socket; its responses queue, the third outstanding Read exceeds the
 * IRD, and the target ends the connection instead of queueing without
 * bound. When the peer then reads, it finds well-formed Read Responses
 * carrying the region's bytes (the stream frame-aligned: the one FPDU in
 * flight finished, none started after), then the Terminate RDMAP remote
 * operation 0x07 (catastrophic, local to this stream: RFC 5040 §7.2, as
 * siw sends), then a FIN, not a reset (finding H2, docs/reliability.md:
 * the Terminate is sent "ahead" of everything not yet started). Nothing is
 * written anywhere. */
START_TEST(reads_beyond_ird)
{
    struct arena a;
    arena_open(&a, "lo iwarp");
    struct hostile h = hostile_connect(&a, false);
    /* A small receive buffer: the target's socket fills with well under
     * the 8 MiB of responses asked for, however slowly it runs (under
     * ThreadSanitizer autotuned buffers took them all). */
    int rcvbuf = 64 * 1024;
    ck_assert_int_eq(setsockopt(h.fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf), 0);
    hostile_establish(&a, &h);
    enum { N = 2000, BATCH = 100 };
    static uint8_t burst[BATCH * 64]; /* a Read Request FPDU: 52 bytes */
    struct hw_frame f;
    int sent = 0;
    for (uint32_t i = 0; i < N; i += BATCH) {
        size_t n = 0;
        for (uint32_t k = 0; k < BATCH; k++) {
            hw_read_req(&f, 1 + i + k, 0x77, 0, PG, a.stag[P_R], a.va[P_R], false);
            memcpy(burst + n, f.b, f.n);
            n += f.n;
        }
        struct pollfd pf = {.fd = h.fd, .events = POLLOUT};
        if (poll(&pf, 1, 500) <= 0 || !hw_send_all(h.fd, burst, n))
            break; /* the target stopped reading, or has gone */
        sent += BATCH;
    }
    ck_assert_int_gt(sent, 2);
    /* Read nothing until the responses stop arriving (the target's socket
     * full, the Read beyond the IRD refused): 500 ms without growth, at
     * most 20 s. Reading at once let a slow target (ThreadSanitizer) answer
     * every request as fast as the attacker drained the answers. */
    int queued = -1, still = 0;
    for (int i = 0; i < 400 && still < 10; i++) {
        usleep(50000);
        int q = 0;
        ck_assert_int_eq(ioctl(h.fd, FIONREAD, &q), 0);
        still = q == queued ? still + 1 : 0;
        queued = q;
    }
    /* Read everything back: Read Responses (tagged, opcode 2, sink STag
     * 0x77, the region's bytes), the Terminate, then the end of the stream. */
    int responses = 0;
    bool ended = false;
    struct hw_term t = {0};
    static uint8_t body[HW_FPDU_BODY_MAX];
    for (int i = 0; i < N + 10; i++) {
        bool closed;
        long ulpdu = hw_recv_fpdu(h.fd, body, 10000, &closed);
        if (ulpdu < 0) {
            ended = closed;
            break;
        }
        if (hw_is_terminate(body, ulpdu, &t))
            break;
        ck_assert_uint_eq(body[1] & 0x0F, HW_READ_RESP);
        ck_assert(body[0] & 0x80);
        ck_assert_uint_eq(body[2] << 24 | body[3] << 16 | body[4] << 8 | body[5], 0x77);
        uint64_t to = 0;
        for (int k = 6; k < 14; k++)
            to = to << 8 | body[k];
        size_t pay = (size_t)ulpdu - 14;
        ck_assert_uint_le(to + pay, PG);
        ck_assert(memcmp(body + 14, a.mem + P_R * PG + to, pay) == 0);
        if (body[0] & 0x40)
            responses++;
    }
    fprintf(stderr, "reads_beyond_ird: %d Read Requests sent, %d Read Responses read, then %s\n", sent, responses,
            t.seen ? "the Terminate" : ended ? "the end of the stream" : "nothing");
    ck_assert_msg(t.seen, "no Terminate after %d Read Responses (the stream %s)", responses,
                  ended ? "ended" : "stalled");
    ck_assert_msg(t.layer == 0 && t.etype == 2 && t.ecode == 0x07,
                  "Terminate layer %u type %u code 0x%02x, want RDMAP remote operation 0x07", t.layer,
                  t.etype, t.ecode);
    /* Then a FIN: recv returns 0 (a reset would fail it with ECONNRESET). */
    struct pollfd pf = {.fd = h.fd, .events = POLLIN};
    ck_assert_int_eq(poll(&pf, 1, 3000), 1);
    uint8_t x;
    ssize_t r = recv(h.fd, &x, 1, 0);
    ck_assert_msg(r == 0, "after the Terminate: recv %zd (%s), want the peer's FIN", r,
                  r < 0 ? strerror(errno) : "bytes");
    ck_assert_int_lt(responses, sent);
    expect_end(&a, &h, "Read Requests beyond the IRD", DAT_CONNECTION_EVENT_BROKEN, NULL);
}
END_TEST

/* ---------------------------------------------------------------- Sends */

static void s_plain(struct arena *a, struct hw_frame *f, bool crc)
{
    (void)a;
    hw_send(f, 1, junk, 64, crc);
}
static void s_bad_qn(struct arena *a, struct hw_frame *f, bool crc)
{
    (void)a;
    hw_untagged(f, HW_DDP(0, 1, 1), HW_RDMAP(HW_SEND, 1), 7, 1, 0, NULL, 0, junk, 8, crc);
}
static void s_bad_msn(struct arena *a, struct hw_frame *f, bool crc)
{
    (void)a;
    hw_send(f, 1000, junk, 8, crc);
}

START_TEST(send_without_receive_iwarp)
{
    one_frame("lo iwarp", "Send with no receive posted (iWARP IA)", false, s_plain, 1, 2, 0x02);
}
END_TEST
START_TEST(send_bad_queue_and_msn)
{
    one_frame("lo iwarp", "untagged frame on queue 7", false, s_bad_qn, 1, 2, 0x01);
    one_frame("lo iwarp", "Send with MSN 1000", false, s_bad_msn, 1, 2, 0x03);
}
END_TEST

/* A receive of 16 bytes, a Send of 64: too long for the buffer. */
/* The posted 16 bytes may hold part of the message: take them as they are. */
static void settle_recv16(struct arena *a)
{
    memcpy(a->snap + P_R * PG + 128, a->mem + P_R * PG + 128, 16);
}

START_TEST(send_too_long)
{
    struct arena a;
    arena_open(&a, "lo iwarp");
    struct hostile h = hostile_connect(&a, false);
    hostile_establish(&a, &h);
    struct rp_side *s = &a.x.s;
    DAT_LMR_PARAM lp;
    ck_assert_dat_ok(s->p->lmr_query_func(a.lmr[P_R], DAT_LMR_FIELD_ALL, &lp));
    DAT_LMR_TRIPLET rt = rp_tri(lp.lmr_context, a.mem + P_R * PG + 128, 16);
    ck_assert_dat_ok(s->p->ep_post_recv_func(h.ep, 1, &rt, rp_ck(5), 0));
    static struct hw_frame f;
    hw_send(&f, 1, junk, 64, false);
    hostile_send(&h, &f);
    /* The receive completes in error first (flushed or length error):
     * whatever its status, no byte beyond its 16 may change, and none of
     * the 64 is promised. */
    struct hw_term t = hw_await_terminate(h.fd, 5000);
    ck_assert(t.seen);
    ck_assert_msg(t.layer == 1 && t.etype == 2 && t.ecode == 0x05, "Terminate %u %u 0x%02x", t.layer, t.etype,
                  t.ecode);
    DAT_DTO_COMPLETION_EVENT_DATA d = rp_dto(s, s->rcv);
    ck_assert_int_ne(d.status, DAT_DTO_SUCCESS);
    expect_end(&a, &h, "Send longer than the receive", DAT_CONNECTION_EVENT_BROKEN, settle_recv16);
}
END_TEST

/* InfiniBand semantics: a Send with no receive waits (receiver not ready)
 * instead of breaking the connection, and lands once one is posted. */
START_TEST(send_without_receive_ib_waits)
{
    struct arena a;
    arena_open(&a, "lo");
    struct hostile h = hostile_connect(&a, false);
    hostile_establish(&a, &h);
    struct rp_side *s = &a.x.s;
    static struct hw_frame f;
    hw_send(&f, 1, "rnr-then-placed", 16, false);
    hostile_send(&h, &f);
    struct hw_term t = hw_await_terminate(h.fd, 300);
    ck_assert_msg(!t.seen && !t.eof, "IB semantics: the Send was refused instead of waiting");
    DAT_LMR_PARAM lp;
    ck_assert_dat_ok(s->p->lmr_query_func(a.lmr[P_R], DAT_LMR_FIELD_ALL, &lp));
    DAT_LMR_TRIPLET rt = rp_tri(lp.lmr_context, a.mem + P_R * PG, 64);
    ck_assert_dat_ok(s->p->ep_post_recv_func(h.ep, 1, &rt, rp_ck(5), 0));
    DAT_DTO_COMPLETION_EVENT_DATA d = rp_dto(s, s->rcv);
    ck_assert_int_eq(d.status, DAT_DTO_SUCCESS);
    ck_assert_uint_eq(d.transfered_length, 16);
    ck_assert(memcmp(a.mem + P_R * PG, "rnr-then-placed", 16) == 0);
    memcpy(a.snap + P_R * PG, a.mem + P_R * PG, 16);
    expect_end(&a, &h, "IB Send after a wait", DAT_CONNECTION_EVENT_DISCONNECTED, NULL);
}
END_TEST

/* ---------------------------------------------------------------- versions, opcodes */

static void v_ddp_untagged(struct arena *a, struct hw_frame *f, bool crc)
{
    (void)a;
    hw_untagged(f, HW_DDP(0, 1, 0), HW_RDMAP(HW_SEND, 1), 0, 1, 0, NULL, 0, junk, 8, crc);
}
static void v_ddp_tagged(struct arena *a, struct hw_frame *f, bool crc)
{
    hw_tagged(f, HW_DDP(1, 1, 2), HW_RDMAP(HW_WRITE, 1), a->stag[P_R], a->va[P_R], junk, 8, crc);
}
static void v_rdmap(struct arena *a, struct hw_frame *f, bool crc)
{
    hw_tagged(f, HW_DDP(1, 1, 1), HW_RDMAP(HW_WRITE, 2), a->stag[P_R], a->va[P_R], junk, 8, crc);
}
static void v_opcode(struct arena *a, struct hw_frame *f, bool crc)
{
    (void)a;
    hw_untagged(f, HW_DDP(0, 1, 1), HW_RDMAP(0xF, 1), 0, 1, 0, NULL, 0, junk, 8, crc);
}

START_TEST(bad_versions_and_opcode)
{
    one_frame("lo iwarp", "untagged frame, DDP version 0", false, v_ddp_untagged, 1, 2, 0x06);
    one_frame("lo iwarp", "tagged frame, DDP version 2", false, v_ddp_tagged, 1, 1, 0x04);
    one_frame("lo iwarp", "RDMAP version 2", false, v_rdmap, 0, 2, 0x05);
    one_frame("lo iwarp", "RDMAP opcode 0xF", false, v_opcode, 0, 2, 0x06);
}
END_TEST

/* ---------------------------------------------------------------- CRC, lengths */

static void c_bad_crc(struct arena *a, struct hw_frame *f, bool crc)
{
    ck_assert(crc);
    hw_write(f, a->stag[P_R], a->va[P_R], junk, 64, true);
    f->b[f->n - 1] ^= 0x01;
}

/* CRC negotiated (our Request sets C): a Write whose CRC fails is MPA
 * "CRC error" and changes nothing (small Writes are checked before they
 * are placed). */
static void c_bad_crc_page(struct arena *a, struct hw_frame *f, bool crc)
{
    static uint8_t page[PG];
    memset(page, 0xA5, sizeof page);
    ck_assert(crc);
    hw_write(f, a->stag[P_R], a->va[P_R], page, PG, true);
    f->b[f->n - 1] ^= 0x80;
}

START_TEST(bad_crc)
{
    one_frame("lo iwarp", "Write with a bad CRC", true, c_bad_crc, 2, 0, 0x02);
    one_frame("lo iwarp", "4 KiB Write with a bad CRC", true, c_bad_crc_page, 2, 0, 0x02);
}
END_TEST

/* A length field that promises 8 KiB, then the peer goes: the target ends
 * the connection without placing a byte. */
/* Up to the 44 payload bytes that arrived may be placed (cut-through,
 * inside the region, as an RNIC may); nothing else. */
static void settle_first44(struct arena *a)
{
    memcpy(a->snap + P_R * PG, a->mem + P_R * PG, 44);
}

START_TEST(lying_length_then_close)
{
    struct arena a;
    arena_open(&a, "lo iwarp");
    struct hostile h = hostile_connect(&a, false);
    hostile_establish(&a, &h);
    static struct hw_frame f;
    hw_write(&f, a.stag[P_R], a.va[P_R], junk, 100, false);
    hw_be16(f.b, 0x2000);
    ck_assert(hw_send_all(h.fd, f.b, 60)); /* header and part of the payload */
    expect_end(&a, &h, "lying length", 0, settle_first44);
}
END_TEST

/* ULPDU_Length too short to hold a tagged header. */
static void l_short(struct arena *a, struct hw_frame *f, bool crc)
{
    hw_write(f, a->stag[P_R], a->va[P_R], NULL, 0, crc);
    hw_be16(f->b, 4);
    f->n = 6;
    hw_finish(f, crc);
}

START_TEST(length_below_header)
{
    struct arena a;
    arena_open(&a, "lo iwarp");
    struct hostile h = hostile_connect(&a, false);
    hostile_establish(&a, &h);
    static struct hw_frame f;
    l_short(&a, &f, false);
    hostile_send(&h, &f);
    /* Whatever the Terminate says (an RNIC may call it a DDP or an MPA
     * framing error), the connection ends and nothing is placed. */
    struct hw_term t = hw_await_terminate(h.fd, 5000);
    ck_assert(t.seen || t.eof);
    expect_end(&a, &h, "ULPDU_Length 4", DAT_CONNECTION_EVENT_BROKEN, NULL);
}
END_TEST

/* ---------------------------------------------------------------- handshake */

/* Garbage instead of an MPA Request: the target closes the socket, no
 * connection request reaches the consumer. */
START_TEST(garbage_before_handshake)
{
    struct arena a;
    arena_open(&a, "lo iwarp");
    int fd = hw_connect((uint16_t)a.x.port);
    ck_assert_int_ge(fd, 0);
    ck_assert(hw_send_all(fd, "GET / HTTP/1.1\r\nHost: softdat\r\n\r\n", 34));
    uint8_t b[64];
    double t0 = test_now_s();
    size_t got = hw_recv_n(fd, b, sizeof b, 3000);
    ck_assert_uint_eq(got, 0);
    ck_assert_msg(test_now_s() - t0 < 2.5, "the target kept the socket open");
    close(fd);
    rp_none(&a.x.s, a.x.s.cr, 200000);
    expect_end(&a, NULL, "garbage handshake", 0, NULL);
}
END_TEST

/* A TCP connection that never sends its Request is closed after the
 * Request timeout (EMU_CONN_REQ_TIMEOUT_US, 5 s); meanwhile the IA works. */
START_TEST(idle_half_open)
{
    struct arena a;
    arena_open(&a, "lo iwarp");
    int fd = hw_connect((uint16_t)a.x.port);
    ck_assert_int_ge(fd, 0);
    assert_neighbour_alive(&a, "idle connection pending");
    uint8_t b[8];
    double t0 = test_now_s();
    ck_assert_uint_eq(hw_recv_n(fd, b, sizeof b, 8000), 0);
    double took = test_now_s() - t0;
    ck_assert_msg(took < 7.5, "idle connection held %.1f s", took);
    close(fd);
    rp_none(&a.x.s, a.x.s.cr, 100000);
    expect_end(&a, NULL, "idle connection closed", 0, NULL);
}
END_TEST

/* ---------------------------------------------------------------- flood */

/* 20,000 zero-length RDMA Writes and 20,000 one-byte ones in large
 * batches: all legal, the connection stays up, the last byte lands. */
START_TEST(flood_of_tiny_frames)
{
    struct arena a;
    arena_open(&a, "lo iwarp");
    struct hostile h = hostile_connect(&a, false);
    hostile_establish(&a, &h);
    enum { N = 20000, BATCH = 500 };
    static uint8_t out[BATCH * 24];
    struct hw_frame f;
    for (int i = 0; i < 2 * N; i += BATCH) {
        size_t n = 0;
        for (int k = 0; k < BATCH; k++) {
            uint8_t v = (uint8_t)(i + k);
            bool one = i + k >= N;
            hw_write(&f, a.stag[P_R], a.va[P_R] + 200, &v, one ? 1 : 0, false);
            memcpy(out + n, f.b, f.n);
            n += f.n;
        }
        ck_assert(hw_send_all(h.fd, out, n));
    }
    /* The last byte, read back with a Read Request (served after every
     * Write before it was placed): the test does not look at the target's
     * memory while the target's engine writes it. */
    uint8_t last = (uint8_t)(2 * N - 1);
    hw_read_req(&f, 1, 0x77, 0, 1, a.stag[P_R], a.va[P_R] + 200, false);
    hostile_send(&h, &f);
    static uint8_t body[HW_FPDU_BODY_MAX];
    bool closed;
    long ulpdu = hw_recv_fpdu(h.fd, body, 5000, &closed);
    ck_assert_int_eq(ulpdu, 15); /* tagged header 14 + the byte */
    ck_assert_uint_eq(body[1] & 0x0F, HW_READ_RESP);
    ck_assert_uint_eq(body[14], last);
    a.snap[P_R * PG + 200] = last;
    struct hw_term t = hw_await_terminate(h.fd, 200);
    ck_assert_msg(!t.seen && !t.eof, "the flood broke the connection");
    DAT_EP_STATE st;
    ck_assert_dat_ok(a.x.s.p->ep_get_status_func(h.ep, &st, NULL, NULL));
    ck_assert_int_eq(st, DAT_EP_STATE_CONNECTED);
    expect_end(&a, &h, "flood", DAT_CONNECTION_EVENT_DISCONNECTED, NULL);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("provider-hostile-peer");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, write_bad_stag);
    tcase_add_test(tc, write_wrong_key);
    tcase_add_test(tc, write_wrong_pz);
    tcase_add_test(tc, write_no_remote_write);
    tcase_add_test(tc, write_out_of_bounds);
    tcase_add_test(tc, write_to_wrap);
    tcase_add_test(tc, write_stale_stag);
    tcase_add_test(tc, read_protection);
    tcase_add_test(tc, reads_beyond_ird);
    tcase_add_test(tc, send_without_receive_iwarp);
    tcase_add_test(tc, send_bad_queue_and_msn);
    tcase_add_test(tc, send_too_long);
    tcase_add_test(tc, send_without_receive_ib_waits);
    tcase_add_test(tc, bad_versions_and_opcode);
    tcase_add_test(tc, bad_crc);
    tcase_add_test(tc, lying_length_then_close);
    tcase_add_test(tc, length_below_header);
    tcase_add_test(tc, garbage_before_handshake);
    tcase_add_test(tc, idle_half_open);
    tcase_add_test(tc, flood_of_tiny_frames);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
