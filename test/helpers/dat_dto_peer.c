/* dat_dto_peer: one side of the data-transfer end-to-end test, using only
 * the public DAT API (registry + dat.conf, DAT_OVERRIDE).
 *
 *   dat_dto_peer server IA PORT SCENARIO
 *   dat_dto_peer client IA HOST PORT SCENARIO
 *
 * SCENARIO basic: triplet exchange; Sends of 0 B, 1 B, 64 KiB and a
 *   3-segment message into a 2-segment receive; RDMA Write then Send
 *   (bytes checked at the target, canaries around them untouched); RDMA
 *   Read (bytes checked); 20 RDMA Writes of which every 5th is signalled
 *   (exactly 4 completions, right cookies) and a queue that only has room
 *   because suppressed slots are released; then the client disconnects and
 *   both sides check that their unmatched receives complete FLUSHED in post
 *   order.
 * SCENARIO violation: the client RDMA-Reads with a corrupted rmr_context
 *   (SUPPRESSed: errors are reported anyway): the Read completes
 *   DAT_DTO_ERR_REMOTE_ACCESS, the connection event is BROKEN, a post
 *   after the break completes FLUSHED, leftover receives flush in post
 *   order.
 * SCENARIO bind: dat_rmr_bind of a window over part of the server's
 *   target; the client Writes and Reads through its context; after an
 *   unbind (length 0) the old context fails REMOTE_ACCESS + BROKEN.
 * SCENARIO length: the client's EP limits are 4096 bytes; an 8192-byte
 *   RDMA Write completes DAT_DTO_ERR_LOCAL_LENGTH and the connection
 *   breaks; with SOFTDAT_DTO_LENGTH_LIMIT=ia it (and a Send as long)
 *   succeed. The server side is the overflow one (count, then flushed).
 * SCENARIO overflow: the client's request EVD holds 2 events and 4
 *   signalled Sends are left unreaped: the lost completion breaks the
 *   connection (BROKEN), the async EVD gets DAT_ASYNC_ERROR_EVD_OVERFLOW,
 *   the 2 queued completions are intact.
 * SCENARIO quiet: see server_quiet.
 * Prints "FAIL ..." lines and exits 1 on any failed check, 0 otherwise. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <dat2/udat.h>

#include "test/lib/clock.h"
#include "test/lib/peer.h"


#define SLOT (65536 + 64)
#define NRECV 12
#define TGT 65536
#define W_OFF 1024
#define W_LEN 4096
#define R_OFF 32768
#define R_LEN 8192
#define NWRITES 20
#define B_OFF 49152 /* burst target: nothing reads it */

struct peer {
    DAT_IA_HANDLE ia;
    DAT_PZ_HANDLE pz;
    DAT_EVD_HANDLE async, req, rcv, conn, cr;
    DAT_EP_HANDLE ep;
    DAT_PSP_HANDLE psp;
    char *msg, *tgt, *snk;      /* receive slots; RDMA target; local sink / send source */
    DAT_LMR_HANDLE lmr_msg, lmr_tgt, lmr_snk;
    DAT_LMR_CONTEXT lc_msg, lc_tgt, lc_snk;
    DAT_RMR_CONTEXT rc_tgt;
    DAT_RMR_TRIPLET remote;     /* the peer's target */
    int next_recv;              /* next receive slot cookie to complete */
};

static DAT_DTO_COMPLETION_EVENT_DATA wait_dto(DAT_EVD_HANDLE evd, const char *what)
{
    DAT_EVENT ev = peer_wait(evd, what);
    PEER_EXPECT(ev.event_number == DAT_DTO_COMPLETION_EVENT, "%s: event 0x%x", what, ev.event_number);
    return ev.event_data.dto_completion_event_data;
}

static bool g_late_recvs;
static void post_recvs(struct peer *p);

static void setup(struct peer *p, char *ia_name, DAT_COUNT req_qlen, bool small_limits)
{
    memset(p, 0, sizeof *p);
    p->async = DAT_HANDLE_NULL;
    PEER_MUST(dat_ia_open(ia_name, 16, &p->async, &p->ia));
    PEER_MUST(dat_pz_create(p->ia, &p->pz));
    PEER_MUST(dat_evd_create(p->ia, req_qlen, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG | DAT_EVD_RMR_BIND_FLAG, &p->req));
    PEER_MUST(dat_evd_create(p->ia, 256, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &p->rcv));
    PEER_MUST(dat_evd_create(p->ia, 16, DAT_HANDLE_NULL, DAT_EVD_CONNECTION_FLAG, &p->conn));
    PEER_MUST(dat_evd_create(p->ia, 4, DAT_HANDLE_NULL, DAT_EVD_CR_FLAG, &p->cr));
    p->msg = aligned_alloc(4096, ((size_t)SLOT * NRECV + 4095) & ~(size_t)4095);
    p->tgt = aligned_alloc(4096, TGT);
    p->snk = aligned_alloc(4096, TGT);
    memset(p->msg, 0, (size_t)SLOT * NRECV);
    memset(p->tgt, 0xCC, TGT);
    for (int i = 0; i < R_LEN; i++)
        p->tgt[R_OFF + i] = (char)(i * 7 + 3);
    memset(p->snk, 0, TGT);
    peer_register(p->ia, p->pz, p->msg, (DAT_VLEN)SLOT * NRECV, DAT_MEM_PRIV_ALL_FLAG, &p->lmr_msg, &p->lc_msg, NULL);
    peer_register(p->ia, p->pz, p->tgt, TGT, DAT_MEM_PRIV_ALL_FLAG, &p->lmr_tgt, &p->lc_tgt, &p->rc_tgt);
    peer_register(p->ia, p->pz, p->snk, TGT, DAT_MEM_PRIV_ALL_FLAG, &p->lmr_snk, &p->lc_snk, NULL);
    /* max_request_dtos small: the suppressed-write burst needs slot release */
    DAT_EP_ATTR a = peer_rc_attr(small_limits ? 4096 : 1 << 20, NRECV, 8, 4, 4);
    PEER_MUST(dat_ep_create(p->ia, p->pz, p->rcv, p->req, p->conn, &a, &p->ep));
    /* Every receive up front: slot i, cookie i. Slot 1 gets two segments.
     * (Scenario rnr: the server posts them late, post_recvs.) */
    if (!g_late_recvs)
        post_recvs(p);
}

static void post_recvs(struct peer *p)
{
    for (int i = 0; i < NRECV; i++) {
        char *s = p->msg + (size_t)i * SLOT;
        if (i == 4) {
            DAT_LMR_TRIPLET v[2] = {peer_triplet(p->lc_msg, s, 500), peer_triplet(p->lc_msg, s + 500, SLOT - 500)};
            PEER_MUST(dat_ep_post_recv(p->ep, 2, v, peer_cookie((uint64_t)i), DAT_COMPLETION_DEFAULT_FLAG));
        } else {
            DAT_LMR_TRIPLET t = peer_triplet(p->lc_msg, s, SLOT);
            PEER_MUST(dat_ep_post_recv(p->ep, 1, &t, peer_cookie((uint64_t)i), DAT_COMPLETION_DEFAULT_FLAG));
        }
    }
}

/* The next receive: in post order, success, the given length. */
static char *expect_recv(struct peer *p, DAT_COUNT len, const char *what)
{
    DAT_DTO_COMPLETION_EVENT_DATA d = wait_dto(p->rcv, what);
    PEER_EXPECT(d.status == DAT_DTO_SUCCESS, "%s: status %d", what, d.status);
    PEER_EXPECT(d.user_cookie.as_64 == (uint64_t)p->next_recv, "%s: cookie %llu, want %d", what,
          (unsigned long long)d.user_cookie.as_64, p->next_recv);
    PEER_EXPECT(d.transfered_length == (DAT_SEG_LENGTH)len, "%s: transfered_length %u, want %d", what,
          (unsigned)d.transfered_length, len);
    PEER_EXPECT(d.operation == DAT_DTO_RECEIVE, "%s: operation %d", what, d.operation);
    PEER_EXPECT(d.ep_handle == p->ep, "%s: ep_handle", what);
    return p->msg + (size_t)p->next_recv++ * SLOT;
}

static void send_msg(struct peer *p, const void *data, DAT_SEG_LENGTH len, uint64_t cookie, const char *what)
{
    memcpy(p->snk, data, len);
    DAT_LMR_TRIPLET t = peer_triplet(p->lc_snk, p->snk, len);
    PEER_MUST(dat_ep_post_send(p->ep, 1, &t, peer_cookie(cookie), DAT_COMPLETION_DEFAULT_FLAG));
    DAT_DTO_COMPLETION_EVENT_DATA d = wait_dto(p->req, what);
    PEER_EXPECT(d.status == DAT_DTO_SUCCESS, "%s: status %d", what, d.status);
    PEER_EXPECT(d.user_cookie.as_64 == cookie, "%s: cookie", what);
    PEER_EXPECT(d.transfered_length == len, "%s: transfered_length %u want %u", what, (unsigned)d.transfered_length,
          (unsigned)len);
    PEER_EXPECT(d.operation == DAT_DTO_SEND, "%s: op %d", what, d.operation);
}

/* Both sides: send our target's triplet, receive the peer's. */
static void exchange(struct peer *p)
{
    DAT_RMR_TRIPLET mine = {.virtual_address = (DAT_VADDR)(uintptr_t)p->tgt, .segment_length = TGT,
                            .rmr_context = p->rc_tgt};
    send_msg(p, &mine, sizeof mine, 1000, "triplet send");
    char *m = expect_recv(p, sizeof mine, "triplet recv");
    memcpy(&p->remote, m, sizeof p->remote);
}

static void check_flush(struct peer *p)
{
    /* Every receive not consumed completes FLUSHED, in post order. */
    for (int i = p->next_recv; i < NRECV; i++) {
        DAT_DTO_COMPLETION_EVENT_DATA d = wait_dto(p->rcv, "flushed recv");
        PEER_EXPECT(d.status == DAT_DTO_ERR_FLUSHED, "flush: status %d", d.status);
        PEER_EXPECT(d.user_cookie.as_64 == (uint64_t)i, "flush: cookie %llu want %d", (unsigned long long)d.user_cookie.as_64,
              i);
    }
    DAT_EVENT ev;
    PEER_EXPECT(DAT_GET_TYPE(dat_evd_dequeue(p->rcv, &ev)) == DAT_QUEUE_EMPTY, "extra recv event");
}

static void client_basic(struct peer *p)
{
    exchange(p);
    /* Sends: 0 B, 1 B, 64 KiB, 3 segments into the 2-segment receive. */
    send_msg(p, "", 0, 1, "send 0");
    send_msg(p, "\x5a", 1, 2, "send 1");
    char *big = malloc(65536);
    for (int i = 0; i < 65536; i++)
        big[i] = (char)(i ^ (i >> 8));
    send_msg(p, big, 65536, 3, "send 64k");
    for (int i = 0; i < 600; i++)
        p->snk[i] = (char)(i + 1);
    DAT_LMR_TRIPLET v[3] = {peer_triplet(p->lc_snk, p->snk, 100), peer_triplet(p->lc_snk, p->snk + 100, 200),
                            peer_triplet(p->lc_snk, p->snk + 300, 300)};
    PEER_MUST(dat_ep_post_send(p->ep, 3, v, peer_cookie(4), DAT_COMPLETION_DEFAULT_FLAG));
    DAT_DTO_COMPLETION_EVENT_DATA d = wait_dto(p->req, "send 3seg");
    PEER_EXPECT(d.status == DAT_DTO_SUCCESS && d.transfered_length == 600, "3seg: %d %u", d.status,
          (unsigned)d.transfered_length);
    /* RDMA Write, then a Send: the target checks the bytes. */
    for (int i = 0; i < W_LEN; i++)
        p->snk[1024 + i] = (char)(i * 13 + 1);
    DAT_LMR_TRIPLET w = peer_triplet(p->lc_snk, p->snk + 1024, W_LEN);
    DAT_RMR_TRIPLET r = p->remote;
    r.virtual_address += W_OFF;
    r.segment_length = W_LEN;
    PEER_MUST(dat_ep_post_rdma_write(p->ep, 1, &w, peer_cookie(5), &r, DAT_COMPLETION_DEFAULT_FLAG));
    d = wait_dto(p->req, "rdma write");
    PEER_EXPECT(d.status == DAT_DTO_SUCCESS && d.transfered_length == W_LEN && d.operation == DAT_DTO_RDMA_WRITE &&
              d.user_cookie.as_64 == 5,
          "write: %d %u %d", d.status, (unsigned)d.transfered_length, d.operation);
    send_msg(p, "W", 1, 6, "send after write");
    /* RDMA Read of the peer's pattern. */
    memset(p->snk + 16384, 0, R_LEN);
    DAT_LMR_TRIPLET rs = peer_triplet(p->lc_snk, p->snk + 16384, R_LEN);
    DAT_RMR_TRIPLET rr = p->remote;
    rr.virtual_address += R_OFF;
    rr.segment_length = R_LEN;
    PEER_MUST(dat_ep_post_rdma_read(p->ep, 1, &rs, peer_cookie(7), &rr, DAT_COMPLETION_DEFAULT_FLAG));
    d = wait_dto(p->req, "rdma read");
    PEER_EXPECT(d.status == DAT_DTO_SUCCESS && d.transfered_length == R_LEN && d.operation == DAT_DTO_RDMA_READ &&
              d.user_cookie.as_64 == 7,
          "read: %d %u %d", d.status, (unsigned)d.transfered_length, d.operation);
    int bad = 0;
    for (int i = 0; i < R_LEN; i++)
        bad += p->snk[16384 + i] != (char)(i * 7 + 3);
    PEER_EXPECT(bad == 0, "rdma read: %d bytes differ", bad);
    /* 20 Writes, every 5th signalled, with only 8 request slots: the
     * suppressed ones are released by the signalled completions. */
    int got = 0;
    for (int i = 0; i < NWRITES; i++) {
        DAT_LMR_TRIPLET one = peer_triplet(p->lc_snk, p->snk + 1024, 64);
        DAT_RMR_TRIPLET rw = p->remote;
        rw.virtual_address += B_OFF;
        rw.segment_length = 64;
        bool sig = i % 5 == 4;
        DAT_RETURN rc;
        int tries = 0;
        while ((rc = dat_ep_post_rdma_write(p->ep, 1, &one, peer_cookie(100 + (uint64_t)i), &rw,
                                            sig ? DAT_COMPLETION_DEFAULT_FLAG : DAT_COMPLETION_SUPPRESS_FLAG)) !=
                   DAT_SUCCESS &&
               DAT_GET_TYPE(rc) == DAT_INSUFFICIENT_RESOURCES && tries++ < NWRITES / 5 &&
               got < NWRITES / 5) {
            /* Queue full: reaping signalled completions frees it (with
             * InfiniBand semantics they come once the peer placed the
             * Writes, so the one reaped may free no slot yet). */
            d = wait_dto(p->req, "signalled write");
            PEER_EXPECT(d.user_cookie.as_64 == 100 + (uint64_t)(got * 5 + 4), "burst cookie %llu",
                  (unsigned long long)d.user_cookie.as_64);
            got++;
        }
        PEER_EXPECT(rc == DAT_SUCCESS, "burst post %d: 0x%x", i, (unsigned)rc);
    }
    while (got < NWRITES / 5) {
        d = wait_dto(p->req, "signalled write");
        PEER_EXPECT(d.status == DAT_DTO_SUCCESS, "burst status %d", d.status);
        PEER_EXPECT(d.user_cookie.as_64 == 100 + (uint64_t)(got * 5 + 4), "burst cookie %llu want %d",
              (unsigned long long)d.user_cookie.as_64, 100 + got * 5 + 4);
        got++;
    }
    DAT_EVENT ev;
    PEER_EXPECT(DAT_GET_TYPE(dat_evd_dequeue(p->req, &ev)) == DAT_QUEUE_EMPTY, "suppressed writes produced events");
    /* Tell the server we are done; it checks and answers. */
    send_msg(p, "D", 1, 8, "send done");
    char *ans = expect_recv(p, 2, "server verdict");
    PEER_EXPECT(memcmp(ans, "OK", 2) == 0, "server verdict %.2s", ans);
    free(big);
    PEER_MUST(dat_ep_disconnect(p->ep, DAT_CLOSE_ABRUPT_FLAG));
    ev = peer_wait(p->conn, "disconnected");
    PEER_EXPECT(ev.event_number == DAT_CONNECTION_EVENT_DISCONNECTED, "conn event 0x%x", ev.event_number);
    check_flush(p);
}

static void server_basic(struct peer *p)
{
    exchange(p);
    char *m = expect_recv(p, 0, "recv 0");
    (void)m;
    m = expect_recv(p, 1, "recv 1");
    PEER_EXPECT(m[0] == 0x5a, "recv 1 byte %02x", (unsigned char)m[0]);
    m = expect_recv(p, 65536, "recv 64k");
    int bad = 0;
    for (int i = 0; i < 65536; i++)
        bad += m[i] != (char)(i ^ (i >> 8));
    PEER_EXPECT(bad == 0, "64k: %d bytes differ", bad);
    m = expect_recv(p, 600, "recv 3seg");
    bad = 0;
    for (int i = 0; i < 600; i++)
        bad += m[i] != (char)(i + 1);
    PEER_EXPECT(bad == 0, "3seg: %d bytes differ", bad);
    m = expect_recv(p, 1, "recv after write");
    PEER_EXPECT(m[0] == 'W', "after write: %c", m[0]);
    bad = 0;
    for (int i = 0; i < W_LEN; i++)
        bad += p->tgt[W_OFF + i] != (char)(i * 13 + 1);
    PEER_EXPECT(bad == 0, "rdma write target: %d bytes differ", bad);
    int canary = 0;
    for (int i = 0; i < W_OFF; i++)
        canary += (unsigned char)p->tgt[i] != 0xCC;
    for (int i = W_OFF + W_LEN; i < R_OFF; i++)
        canary += (unsigned char)p->tgt[i] != 0xCC;
    PEER_EXPECT(canary == 0, "rdma write: %d canary bytes changed", canary);
    m = expect_recv(p, 1, "recv done");
    PEER_EXPECT(m[0] == 'D', "done: %c", m[0]);
    send_msg(p, peer_failures ? "NO" : "OK", 2, 9, "verdict");
    DAT_EVENT ev = peer_wait(p->conn, "disconnected");
    PEER_EXPECT(ev.event_number == DAT_CONNECTION_EVENT_DISCONNECTED || ev.event_number == DAT_CONNECTION_EVENT_BROKEN,
          "conn event 0x%x", ev.event_number);
    check_flush(p);
}

static void client_violation(struct peer *p)
{
    exchange(p);
    /* A Read is outstanding until its response, so the target's Terminate
     * for the bad rmr_context is reported on it. (A Write completes once
     * its bytes are on the socket, before any verdict of the target:
     * dto_async_return_guaranteed is FALSE; the break still follows.) */
    DAT_LMR_TRIPLET s = peer_triplet(p->lc_snk, p->snk, 256);
    DAT_RMR_TRIPLET r = p->remote;
    r.rmr_context ^= 0x5555u;
    r.segment_length = 256;
    PEER_MUST(dat_ep_post_rdma_read(p->ep, 1, &s, peer_cookie(77), &r, DAT_COMPLETION_SUPPRESS_FLAG));
    DAT_DTO_COMPLETION_EVENT_DATA d = wait_dto(p->req, "bad read");
    PEER_EXPECT(d.user_cookie.as_64 == 77, "bad read cookie");
    PEER_EXPECT(d.status == DAT_DTO_ERR_REMOTE_ACCESS, "bad read: status %d, want REMOTE_ACCESS", d.status);
    PEER_EXPECT(d.operation == DAT_DTO_RDMA_READ, "bad read: op %d", d.operation);
    DAT_EVENT ev = peer_wait(p->conn, "broken");
    PEER_EXPECT(ev.event_number == DAT_CONNECTION_EVENT_BROKEN, "conn event 0x%x, want BROKEN", ev.event_number);
    /* Posts after the break are flushed, after everything earlier. */
    PEER_MUST(dat_ep_post_send(p->ep, 0, NULL, peer_cookie(78), DAT_COMPLETION_DEFAULT_FLAG));
    d = wait_dto(p->req, "post after break");
    PEER_EXPECT(d.user_cookie.as_64 == 78 && d.status == DAT_DTO_ERR_FLUSHED, "after break: %llu %d",
          (unsigned long long)d.user_cookie.as_64, d.status);
    check_flush(p);
}

static void server_violation(struct peer *p)
{
    exchange(p);
    DAT_EVENT ev = peer_wait(p->conn, "connection end");
    PEER_EXPECT(ev.event_number == DAT_CONNECTION_EVENT_BROKEN || ev.event_number == DAT_CONNECTION_EVENT_DISCONNECTED,
          "conn event 0x%x", ev.event_number);
    int canary = 0;
    for (int i = 0; i < R_OFF; i++)
        canary += (unsigned char)p->tgt[i] != 0xCC;
    PEER_EXPECT(canary == 0, "bad write changed %d target bytes", canary);
    check_flush(p);
}

/* The request EVD holds 2 events; 4 signalled Sends are not reaped: the
 * third completion has no room, so the connection breaks (L2888) and the
 * IA's async EVD reports the overflow. */
static void client_overflow(struct peer *p)
{
    exchange(p);
    for (int i = 0; i < 4; i++) {
        DAT_LMR_TRIPLET t = peer_triplet(p->lc_snk, p->snk, 1);
        PEER_MUST(dat_ep_post_send(p->ep, 1, &t, peer_cookie(200 + (uint64_t)i), DAT_COMPLETION_DEFAULT_FLAG));
    }
    DAT_EVENT ev = peer_wait(p->conn, "broken after overflow");
    PEER_EXPECT(ev.event_number == DAT_CONNECTION_EVENT_BROKEN, "conn event 0x%x, want BROKEN", ev.event_number);
    for (int i = 0; i < 2; i++) {
        DAT_DTO_COMPLETION_EVENT_DATA d = wait_dto(p->req, "kept completion");
        PEER_EXPECT(d.status == DAT_DTO_SUCCESS && d.user_cookie.as_64 == 200 + (uint64_t)i, "kept %d: %d %llu", i,
              d.status, (unsigned long long)d.user_cookie.as_64);
    }
    ev = peer_wait(p->async, "overflow async event");
    PEER_EXPECT(ev.event_number == DAT_ASYNC_ERROR_EVD_OVERFLOW, "async event 0x%x", ev.event_number);
    check_flush(p);
}

static void server_overflow(struct peer *p)
{
    exchange(p);
    DAT_EVENT ev = peer_wait(p->conn, "connection end");
    PEER_EXPECT(ev.event_number == DAT_CONNECTION_EVENT_BROKEN || ev.event_number == DAT_CONNECTION_EVENT_DISCONNECTED,
          "conn event 0x%x", ev.event_number);
    /* Some of the 1-byte Sends may have landed before the break. */
    DAT_DTO_COMPLETION_EVENT_DATA d;
    int i = p->next_recv;
    for (; i < NRECV; i++) {
        d = wait_dto(p->rcv, "recv");
        PEER_EXPECT(d.user_cookie.as_64 == (uint64_t)i, "cookie %llu want %d", (unsigned long long)d.user_cookie.as_64, i);
        if (d.status != DAT_DTO_SUCCESS)
            break;
        PEER_EXPECT(d.transfered_length == 1 || d.transfered_length == 8192, "len %u", (unsigned)d.transfered_length);
    }
    PEER_EXPECT(i < NRECV && d.status == DAT_DTO_ERR_FLUSHED, "no flushed receive");
    p->next_recv = i + 1;
    check_flush(p);
}

/* dat_rmr_bind on a live connection: the server binds a window over part
 * of its target (REMOTE_READ|WRITE), hands the context over; the client
 * writes and reads through it; the server checks, unbinds, says so; the
 * client's next Read with the old context fails REMOTE_ACCESS + BROKEN. */
static void server_bind(struct peer *p)
{
    exchange(p);
    DAT_RMR_HANDLE rmr;
    PEER_MUST(dat_rmr_create(p->pz, &rmr));
    DAT_LMR_TRIPLET range = peer_triplet(p->lc_tgt, p->tgt + W_OFF, W_LEN);
    DAT_RMR_CONTEXT ctx = 0;
    DAT_RMR_COOKIE c = peer_cookie(0xB1);
    PEER_MUST(dat_rmr_bind(rmr, p->lmr_tgt, &range, DAT_MEM_PRIV_REMOTE_READ_FLAG | DAT_MEM_PRIV_REMOTE_WRITE_FLAG,
                      DAT_VA_TYPE_VA, p->ep, c, DAT_COMPLETION_DEFAULT_FLAG, &ctx));
    PEER_EXPECT(ctx != 0 && ctx != p->rc_tgt, "bind context 0x%x", ctx);
    DAT_EVENT ev = peer_wait(p->req, "bind completion");
    PEER_EXPECT(ev.event_number == DAT_RMR_BIND_COMPLETION_EVENT, "bind event 0x%x", ev.event_number);
    PEER_EXPECT(ev.event_data.rmr_completion_event_data.status == DAT_RMR_BIND_SUCCESS, "bind status %d",
          ev.event_data.rmr_completion_event_data.status);
    PEER_EXPECT(ev.event_data.rmr_completion_event_data.rmr_handle == rmr, "bind rmr handle");
    PEER_EXPECT(ev.event_data.rmr_completion_event_data.user_cookie.as_64 == 0xB1, "bind cookie");
    DAT_RMR_PARAM rp;
    PEER_MUST(dat_rmr_query(rmr, DAT_RMR_FIELD_ALL, &rp));
    PEER_EXPECT(rp.rmr_context == ctx, "query context 0x%x, bind said 0x%x", rp.rmr_context, ctx);
    DAT_RMR_TRIPLET w = {.virtual_address = (DAT_VADDR)(uintptr_t)(p->tgt + W_OFF), .segment_length = W_LEN,
                         .rmr_context = ctx};
    send_msg(p, &w, sizeof w, 10, "rmr triplet");
    char *m = expect_recv(p, 1, "written via rmr");
    PEER_EXPECT(m[0] == 'W', "msg %c", m[0]);
    int bad = 0;
    for (int i = 0; i < W_LEN; i++)
        bad += p->tgt[W_OFF + i] != (char)(i * 5 + 2);
    PEER_EXPECT(bad == 0, "write via rmr: %d bytes differ", bad);
    DAT_LMR_TRIPLET none = peer_triplet(0, NULL, 0);
    PEER_MUST(dat_rmr_bind(rmr, DAT_HANDLE_NULL, &none, 0, DAT_VA_TYPE_VA, p->ep, peer_cookie(0xB2), DAT_COMPLETION_DEFAULT_FLAG,
                      &ctx));
    ev = peer_wait(p->req, "unbind completion");
    PEER_EXPECT(ev.event_number == DAT_RMR_BIND_COMPLETION_EVENT &&
              ev.event_data.rmr_completion_event_data.status == DAT_RMR_BIND_SUCCESS,
          "unbind event 0x%x status %d", ev.event_number, ev.event_data.rmr_completion_event_data.status);
    send_msg(p, "U", 1, 11, "unbound");
    ev = peer_wait(p->conn, "connection end");
    PEER_EXPECT(ev.event_number == DAT_CONNECTION_EVENT_BROKEN || ev.event_number == DAT_CONNECTION_EVENT_DISCONNECTED,
          "conn event 0x%x", ev.event_number);
    check_flush(p);
    PEER_MUST(dat_rmr_free(rmr));
}

static void client_bind(struct peer *p)
{
    exchange(p);
    DAT_RMR_TRIPLET w;
    memcpy(&w, expect_recv(p, sizeof w, "rmr triplet"), sizeof w);
    for (int i = 0; i < W_LEN; i++)
        p->snk[i] = (char)(i * 5 + 2);
    DAT_LMR_TRIPLET src = peer_triplet(p->lc_snk, p->snk, W_LEN);
    PEER_MUST(dat_ep_post_rdma_write(p->ep, 1, &src, peer_cookie(20), &w, DAT_COMPLETION_DEFAULT_FLAG));
    DAT_DTO_COMPLETION_EVENT_DATA d = wait_dto(p->req, "write via rmr");
    PEER_EXPECT(d.status == DAT_DTO_SUCCESS, "write via rmr: %d", d.status);
    DAT_LMR_TRIPLET snk = peer_triplet(p->lc_snk, p->snk + 8192, W_LEN);
    PEER_MUST(dat_ep_post_rdma_read(p->ep, 1, &snk, peer_cookie(21), &w, DAT_COMPLETION_DEFAULT_FLAG));
    d = wait_dto(p->req, "read via rmr");
    PEER_EXPECT(d.status == DAT_DTO_SUCCESS && d.transfered_length == W_LEN, "read via rmr: %d", d.status);
    PEER_EXPECT(memcmp(p->snk, p->snk + 8192, W_LEN) == 0, "read via rmr: bytes differ");
    send_msg(p, "W", 1, 22, "written");
    char *m = expect_recv(p, 1, "unbound");
    PEER_EXPECT(m[0] == 'U', "msg %c", m[0]);
    PEER_MUST(dat_ep_post_rdma_read(p->ep, 1, &snk, peer_cookie(23), &w, DAT_COMPLETION_DEFAULT_FLAG));
    d = wait_dto(p->req, "read after unbind");
    PEER_EXPECT(d.status == DAT_DTO_ERR_REMOTE_ACCESS, "read after unbind: status %d", d.status);
    DAT_EVENT ev = peer_wait(p->conn, "broken");
    PEER_EXPECT(ev.event_number == DAT_CONNECTION_EVENT_BROKEN, "conn event 0x%x", ev.event_number);
    check_flush(p);
}

/* The client's EP has max_message_size = max_rdma_size = 4096. A Send
 * and an RDMA Write of 8192 bytes are accepted; they complete
 * DAT_DTO_ERR_LOCAL_LENGTH and break the connection (6.8.2) with
 * SOFTDAT_DTO_LENGTH_LIMIT=ep; by default (ia) the IA's limits apply, as
 * with OFA, and both succeed. */
static void client_length(struct peer *p)
{
    exchange(p);
    /* The server's triplet Send completes when this side confirms its
     * placement (InfiniBand semantics); this side is about to break the
     * connection on purpose: give that confirmation time to leave. */
    usleep(50000);
    const char *v = getenv("SOFTDAT_DTO_LENGTH_LIMIT");
    bool ia = v == NULL || strcmp(v, "ep") != 0;
    DAT_LMR_TRIPLET src = peer_triplet(p->lc_snk, p->snk, 8192);
    DAT_RMR_TRIPLET r = p->remote;
    r.segment_length = 8192;
    PEER_MUST(dat_ep_post_rdma_write(p->ep, 1, &src, peer_cookie(30), &r, DAT_COMPLETION_DEFAULT_FLAG));
    DAT_DTO_COMPLETION_EVENT_DATA d = wait_dto(p->req, "long write");
    PEER_EXPECT(d.user_cookie.as_64 == 30, "long write cookie");
    if (ia) {
        PEER_EXPECT(d.status == DAT_DTO_SUCCESS && d.transfered_length == 8192, "long write (ia limits): %d %u",
              d.status, (unsigned)d.transfered_length);
        PEER_MUST(dat_ep_post_send(p->ep, 1, &src, peer_cookie(31), DAT_COMPLETION_DEFAULT_FLAG));
        d = wait_dto(p->req, "long send");
        PEER_EXPECT(d.status == DAT_DTO_SUCCESS && d.transfered_length == 8192, "long send (ia limits): %d", d.status);
        PEER_MUST(dat_ep_disconnect(p->ep, DAT_CLOSE_ABRUPT_FLAG));
        DAT_EVENT ev = peer_wait(p->conn, "disconnected");
        PEER_EXPECT(ev.event_number == DAT_CONNECTION_EVENT_DISCONNECTED, "conn event 0x%x", ev.event_number);
    } else {
        PEER_EXPECT(d.status == DAT_DTO_ERR_LOCAL_LENGTH, "long write: status %d, want LOCAL_LENGTH", d.status);
        DAT_EVENT ev = peer_wait(p->conn, "broken");
        PEER_EXPECT(ev.event_number == DAT_CONNECTION_EVENT_BROKEN, "conn event 0x%x, want BROKEN", ev.event_number);
    }
    check_flush(p);
}

static void teardown(struct peer *p)
{
    if (p->psp)
        PEER_MUST(dat_psp_free(p->psp));
    PEER_MUST(dat_ep_free(p->ep));
    PEER_MUST(dat_lmr_free(p->lmr_msg));
    PEER_MUST(dat_lmr_free(p->lmr_tgt));
    PEER_MUST(dat_lmr_free(p->lmr_snk));
    PEER_MUST(dat_evd_free(p->req));
    PEER_MUST(dat_evd_free(p->rcv));
    PEER_MUST(dat_evd_free(p->conn));
    PEER_MUST(dat_evd_free(p->cr));
    PEER_MUST(dat_pz_free(p->pz));
    PEER_MUST(dat_ia_close(p->ia, DAT_CLOSE_GRACEFUL_FLAG));
    free(p->msg);
    free(p->tgt);
    free(p->snk);
}

/* SCENARIO eager: the eager-RDMA pattern of Open MPI's uDAPL transport,
 * without MPI. The client RDMA-Writes fragments into a ring of EAGER_SLOTS
 * slots in the server's target, each fragment ending at its slot's end
 * with a nonzero flag byte; the server never calls DAT to learn of them:
 * it polls the flag in memory and, the moment it changes, checks every
 * byte before it (InfiniBand HCAs place in address order: programs rely on
 * it). Sizes cross glibc's rep-movsb threshold (4 KiB), whose stores may
 * become visible out of order. After each EAGER_SLOTS fragments the server
 * returns a credit by Send. */
#define EAGER_SLOTS 4
#define EAGER_SLOT (TGT / EAGER_SLOTS)
#define EAGER_FRAGS 400

static const uint32_t eager_sizes[] = {4097, 4120, 5000, 8192, 12000, 16384, 64, 2100};

static unsigned char eager_byte(int frag, uint32_t j)
{
    return (unsigned char)(frag * 31 + (int)j * 7 + 3);
}

static unsigned char eager_flag(int frag)
{
    return (unsigned char)((frag % 127) + 1);
}

static uint32_t eager_len(int frag)
{
    return eager_sizes[(size_t)frag % (sizeof eager_sizes / sizeof eager_sizes[0])];
}

/* A credit Send arrived: repost its receive (the slot its cookie names). */
static void eager_credit(struct peer *p)
{
    DAT_DTO_COMPLETION_EVENT_DATA d = wait_dto(p->rcv, "credit");
    PEER_EXPECT(d.status == DAT_DTO_SUCCESS, "credit: status %d", d.status);
    uint64_t slot = d.user_cookie.as_64 % NRECV;
    DAT_LMR_TRIPLET t = peer_triplet(p->lc_msg, p->msg + slot * SLOT, SLOT);
    PEER_MUST(dat_ep_post_recv(p->ep, 1, &t, peer_cookie(d.user_cookie.as_64 + NRECV), DAT_COMPLETION_DEFAULT_FLAG));
}

static void client_eager(struct peer *p)
{
    exchange(p);
    for (int f = 0; f < EAGER_FRAGS && peer_failures == 0; f++) {
        if (f > 0 && f % EAGER_SLOTS == 0)
            eager_credit(p);
        uint32_t len = eager_len(f);
        char *src = p->snk + (size_t)(f % EAGER_SLOTS) * EAGER_SLOT;
        for (uint32_t j = 0; j + 1 < len; j++)
            src[j] = (char)eager_byte(f, j);
        src[len - 1] = (char)eager_flag(f);
        DAT_LMR_TRIPLET t = peer_triplet(p->lc_snk, src, len);
        DAT_RMR_TRIPLET r = p->remote;
        r.virtual_address += (DAT_VADDR)((f % EAGER_SLOTS + 1) * EAGER_SLOT - len);
        r.segment_length = len;
        PEER_MUST(dat_ep_post_rdma_write(p->ep, 1, &t, peer_cookie(5000 + (uint64_t)f), &r, DAT_COMPLETION_DEFAULT_FLAG));
        DAT_DTO_COMPLETION_EVENT_DATA d = wait_dto(p->req, "eager write");
        PEER_EXPECT(d.status == DAT_DTO_SUCCESS, "eager write %d: status %d", f, d.status);
    }
    eager_credit(p);
    PEER_MUST(dat_ep_disconnect(p->ep, DAT_CLOSE_GRACEFUL_FLAG));
    peer_wait(p->conn, "disconnected");
}

/* Wait (10 s at most) for fragment f's flag, then check the bytes before
 * it and clear the flag. -2: never came; -1: all placed; else the first
 * stale byte. Not TSan-instrumented: the peer's RNIC (our engine thread)
 * writes this memory, as an HCA's DMA would, outside any lock. */
__attribute__((no_sanitize("thread"))) static int eager_poll(volatile unsigned char *end,
                                                             const unsigned char *frag, uint32_t len,
                                                             int f)
{
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (end[-1] != eager_flag(f)) {
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec - t0.tv_sec > 10)
            return -2;
    }
    __atomic_signal_fence(__ATOMIC_ACQUIRE); /* x86: loads are not reordered with loads */
    int bad = -1;
    for (uint32_t j = 0; j + 1 < len && bad < 0; j++)
        if (((const volatile unsigned char *)frag)[j] != eager_byte(f, j))
            bad = (int)j;
    end[-1] = 0;
    return bad;
}

static void server_eager(struct peer *p)
{
    memset(p->tgt, 0, TGT); /* before the peer learns where it may write */
    exchange(p);
    int stale = 0;
    for (int f = 0; f < EAGER_FRAGS && stale == 0; f++) {
        uint32_t len = eager_len(f);
        volatile unsigned char *end = (volatile unsigned char *)p->tgt + (f % EAGER_SLOTS + 1) * EAGER_SLOT;
        const unsigned char *frag = (const unsigned char *)end - len;
        int bad = eager_poll(end, frag, len, f);
        if (bad == -2) {
            PEER_EXPECT(0, "eager fragment %d never arrived", f);
            return;
        }
        if (bad >= 0) {
            PEER_EXPECT(0, "eager fragment %d (%u B): byte %d not yet placed when the flag was", f, len, bad);
            stale = 1;
        }
        if ((f + 1) % EAGER_SLOTS == 0 || f + 1 == EAGER_FRAGS) {
            char one = 1;
            DAT_LMR_TRIPLET t = peer_triplet(p->lc_snk, p->snk, 1);
            memcpy(p->snk, &one, 1);
            PEER_MUST(dat_ep_post_send(p->ep, 1, &t, peer_cookie(9000 + (uint64_t)f), DAT_COMPLETION_DEFAULT_FLAG));
            DAT_DTO_COMPLETION_EVENT_DATA d = wait_dto(p->req, "credit send");
            PEER_EXPECT(d.status == DAT_DTO_SUCCESS, "credit send: status %d", d.status);
        }
    }
    peer_wait(p->conn, "disconnected");
}

/* SCENARIO rnr (InfiniBand semantics, softdat-lo): the client Sends the
 * moment the connection is up; the server posts its receives only 300 ms
 * later. As on an HCA (receiver-not-ready retry) nothing breaks: every
 * Send arrives, in order, intact, and each completes at the client only
 * once the server had a receive for it. */
#define RNR_DELAY_US 300000
#define RNR_SENDS 3

static void client_rnr(struct peer *p)
{
    double t0 = test_now_s();
    for (int i = 0; i < RNR_SENDS; i++) {
        char *src = p->snk + i * 64;
        snprintf(src, 64, "rnr message %d", i);
        DAT_LMR_TRIPLET t = peer_triplet(p->lc_snk, src, 64);
        PEER_MUST(dat_ep_post_send(p->ep, 1, &t, peer_cookie(700 + (uint64_t)i), DAT_COMPLETION_DEFAULT_FLAG));
    }
    for (int i = 0; i < RNR_SENDS; i++) {
        DAT_DTO_COMPLETION_EVENT_DATA d = wait_dto(p->req, "rnr send");
        PEER_EXPECT(d.status == DAT_DTO_SUCCESS, "rnr send %d: status %d", i, d.status);
        PEER_EXPECT(d.user_cookie.as_64 == 700 + (uint64_t)i, "rnr send %d: cookie", i);
    }
    double waited = test_now_s() - t0;
    PEER_EXPECT(waited >= 0.8 * RNR_DELAY_US / 1e6, "Sends completed after %.3f s, before the receives were posted", waited);
    expect_recv(p, 8, "rnr reply");
    PEER_MUST(dat_ep_disconnect(p->ep, DAT_CLOSE_GRACEFUL_FLAG));
    peer_wait(p->conn, "disconnected");
}

static void server_rnr(struct peer *p)
{
    usleep(RNR_DELAY_US);
    post_recvs(p);
    for (int i = 0; i < RNR_SENDS; i++) {
        char want[64];
        snprintf(want, sizeof want, "rnr message %d", i);
        char *m = expect_recv(p, 64, "rnr recv");
        PEER_EXPECT(strcmp(m, want) == 0, "rnr recv %d: \"%.20s\"", i, m);
    }
    DAT_EVENT ev;
    PEER_EXPECT(DAT_GET_TYPE(dat_evd_dequeue(p->conn, &ev)) == DAT_QUEUE_EMPTY, "connection event during RNR wait");
    send_msg(p, "rnr-done", 8, 710, "rnr reply");
    peer_wait(p->conn, "disconnected");
}

/* SCENARIO quiet (InfiniBand semantics, softdat-lo): a ping-pong, both
 * sides polling (dat_evd_dequeue), whose client Sends mostly with
 * DAT_COMPLETION_SUPPRESS_FLAG (every QUIET_EVERY-th one signalled, the
 * last one suppressed), as benchmarks and HPC codes do. Every message arrives intact and in order; each
 * signalled Send completes successfully, in order, and the suppressed ones
 * produce no event, then or when the server disconnects right after the
 * last one (it waits for the client to confirm it). The e2e script also
 * counts the placement probes on the wire (fewer than the messages). */
#define QUIET_ROUNDS 2002
#define QUIET_EVERY 4

/* The next receive of a ring of NRECV slots reposted in turn: cookie n
 * uses slot n % NRECV. Polled (dat_evd_dequeue) when spin. */
static char *ring_recv(struct peer *p, uint64_t n, bool spin, const char *what)
{
    DAT_EVENT ev;
    if (spin) {
        double t0 = test_now_s();
        DAT_RETURN r;
        while ((r = dat_evd_dequeue(p->rcv, &ev)) != DAT_SUCCESS)
            if (DAT_GET_TYPE(r) != DAT_QUEUE_EMPTY || test_now_s() - t0 > PEER_WAIT_US / 1e6) {
                printf("FAIL %s: %s: dequeue 0x%x\n", peer_role, what, (unsigned)r);
                exit(1);
            }
    } else {
        ev = peer_wait(p->rcv, what);
    }
    PEER_EXPECT(ev.event_number == DAT_DTO_COMPLETION_EVENT, "%s: event 0x%x", what, ev.event_number);
    DAT_DTO_COMPLETION_EVENT_DATA d = ev.event_data.dto_completion_event_data;
    PEER_EXPECT(d.status == DAT_DTO_SUCCESS && d.user_cookie.as_64 == n, "%s: status %d cookie %llu, want %llu",
                what, d.status, (unsigned long long)d.user_cookie.as_64, (unsigned long long)n);
    char *s = p->msg + (size_t)(n % NRECV) * SLOT;
    static char got[64];
    memcpy(got, s, sizeof got);
    DAT_LMR_TRIPLET t = peer_triplet(p->lc_msg, s, SLOT);
    PEER_MUST(dat_ep_post_recv(p->ep, 1, &t, peer_cookie(n + NRECV), DAT_COMPLETION_DEFAULT_FLAG));
    return got;
}

static void client_quiet(struct peer *p)
{
    uint64_t want_done = 0;
    for (int i = 0; i < QUIET_ROUNDS; i++) {
        char *src = p->snk + (i % 8) * 64;
        snprintf(src, 64, "quiet %d", i);
        bool sig = i % QUIET_EVERY == QUIET_EVERY - 1;
        DAT_LMR_TRIPLET t = peer_triplet(p->lc_snk, src, 64);
        PEER_MUST(dat_ep_post_send(p->ep, 1, &t, peer_cookie(800 + (uint64_t)i),
                                   sig ? DAT_COMPLETION_DEFAULT_FLAG : DAT_COMPLETION_SUPPRESS_FLAG));
        char *m = ring_recv(p, (uint64_t)i, true, "quiet reply");
        char want[64];
        snprintf(want, sizeof want, "reply %d", i);
        PEER_EXPECT(strcmp(m, want) == 0, "quiet reply %d: \"%.20s\"", i, m);
        DAT_EVENT ev;
        while (dat_evd_dequeue(p->req, &ev) == DAT_SUCCESS) {
            DAT_DTO_COMPLETION_EVENT_DATA d = ev.event_data.dto_completion_event_data;
            uint64_t next = 800 + want_done * QUIET_EVERY + QUIET_EVERY - 1;
            PEER_EXPECT(d.status == DAT_DTO_SUCCESS && d.user_cookie.as_64 == next,
                        "quiet send: status %d cookie %llu, want %llu", d.status,
                        (unsigned long long)d.user_cookie.as_64, (unsigned long long)next);
            want_done++;
        }
    }
    PEER_EXPECT(QUIET_ROUNDS % QUIET_EVERY != 0, "the last Send must be suppressed");
    peer_wait_for(p->conn, DAT_CONNECTION_EVENT_DISCONNECTED, "disconnected by the server");
    DAT_EVENT ev;
    while (dat_evd_dequeue(p->req, &ev) == DAT_SUCCESS) {
        DAT_DTO_COMPLETION_EVENT_DATA d = ev.event_data.dto_completion_event_data;
        PEER_EXPECT(d.status == DAT_DTO_SUCCESS, "quiet send %llu: status %d after the disconnect",
                    (unsigned long long)d.user_cookie.as_64, d.status);
        PEER_EXPECT(d.user_cookie.as_64 % QUIET_EVERY == 3, "suppressed Send %llu made an event",
                    (unsigned long long)d.user_cookie.as_64);
        want_done++;
    }
    PEER_EXPECT(want_done == QUIET_ROUNDS / QUIET_EVERY, "%llu signalled Sends completed, want %d",
                (unsigned long long)want_done, QUIET_ROUNDS / QUIET_EVERY);
}

static void server_quiet(struct peer *p)
{
    uint64_t replies_done = 0;
    for (int i = 0; i < QUIET_ROUNDS; i++) {
        char *m = ring_recv(p, (uint64_t)i, true, "quiet recv");
        char want[64];
        snprintf(want, sizeof want, "quiet %d", i);
        PEER_EXPECT(strcmp(m, want) == 0, "quiet recv %d: \"%.20s\"", i, m);
        char *src = p->snk + (i % 8) * 64;
        snprintf(src, 64, "reply %d", i);
        DAT_LMR_TRIPLET t = peer_triplet(p->lc_snk, src, 64);
        PEER_MUST(dat_ep_post_send(p->ep, 1, &t, peer_cookie(900 + (uint64_t)i), DAT_COMPLETION_DEFAULT_FLAG));
        DAT_EVENT ev;
        while (dat_evd_dequeue(p->req, &ev) == DAT_SUCCESS) {
            DAT_DTO_COMPLETION_EVENT_DATA d = ev.event_data.dto_completion_event_data;
            PEER_EXPECT(d.status == DAT_DTO_SUCCESS && d.user_cookie.as_64 == 900 + replies_done,
                        "reply %llu: status %d cookie %llu", (unsigned long long)replies_done, d.status,
                        (unsigned long long)d.user_cookie.as_64);
            replies_done++;
        }
    }
    while (replies_done < QUIET_ROUNDS) {
        DAT_DTO_COMPLETION_EVENT_DATA d = wait_dto(p->req, "reply send");
        PEER_EXPECT(d.status == DAT_DTO_SUCCESS && d.user_cookie.as_64 == 900 + replies_done, "reply %llu: status %d",
                    (unsigned long long)replies_done, d.status);
        replies_done++;
    }
    /* Right after the last (suppressed) message: it must still count as
     * delivered at the client. */
    PEER_MUST(dat_ep_disconnect(p->ep, DAT_CLOSE_GRACEFUL_FLAG));
    peer_wait_for(p->conn, DAT_CONNECTION_EVENT_DISCONNECTED, "disconnected");
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    struct peer p;
    bool server = argc == 5 && strcmp(argv[1], "server") == 0;
    bool client = argc == 6 && strcmp(argv[1], "client") == 0;
    if (!server && !client) {
        fprintf(stderr, "usage: %s server IA PORT SCENARIO | client IA HOST PORT SCENARIO\n", argv[0]);
        return 2;
    }
    peer_role = argv[1];
    const char *scenario = argv[argc - 1];
    DAT_CONN_QUAL port = (DAT_CONN_QUAL)strtoul(argv[argc - 2], NULL, 10);
    g_late_recvs = server && strcmp(scenario, "rnr") == 0;
    setup(&p, argv[2], strcmp(scenario, "overflow") == 0 && client ? 2 : 256,
          strcmp(scenario, "length") == 0 && client);
    if (server) {
        PEER_MUST(dat_psp_create(p.ia, port, p.cr, DAT_PSP_CONSUMER_FLAG, &p.psp));
        printf("server: listening\n");
        DAT_EVENT ev = peer_wait(p.cr, "connection request");
        PEER_EXPECT(ev.event_number == DAT_CONNECTION_REQUEST_EVENT, "cr event 0x%x", ev.event_number);
        PEER_MUST(dat_cr_accept(ev.event_data.cr_arrival_event_data.cr_handle, p.ep, 0, NULL));
    } else {
        struct sockaddr_in sin = {.sin_family = AF_INET};
        inet_pton(AF_INET, argv[3], &sin.sin_addr);
        PEER_MUST(dat_ep_connect(p.ep, (DAT_IA_ADDRESS_PTR)&sin, port, PEER_WAIT_US, 0, NULL, DAT_QOS_BEST_EFFORT,
                            DAT_CONNECT_DEFAULT_FLAG));
    }
    DAT_EVENT ev = peer_wait(p.conn, "established");
    if (ev.event_number != DAT_CONNECTION_EVENT_ESTABLISHED) {
        printf("FAIL %s: connection event 0x%x\n", peer_role, ev.event_number);
        return 1;
    }
    if (strcmp(scenario, "basic") == 0)
        server ? server_basic(&p) : client_basic(&p);
    else if (strcmp(scenario, "violation") == 0)
        server ? server_violation(&p) : client_violation(&p);
    else if (strcmp(scenario, "bind") == 0)
        server ? server_bind(&p) : client_bind(&p);
    else if (strcmp(scenario, "length") == 0)
        server ? server_overflow(&p) : client_length(&p);
    else if (strcmp(scenario, "overflow") == 0)
        server ? server_overflow(&p) : client_overflow(&p);
    else if (strcmp(scenario, "eager") == 0)
        server ? server_eager(&p) : client_eager(&p);
    else if (strcmp(scenario, "rnr") == 0)
        server ? server_rnr(&p) : client_rnr(&p);
    else if (strcmp(scenario, "quiet") == 0)
        server ? server_quiet(&p) : client_quiet(&p);
    else {
        printf("FAIL unknown scenario %s\n", scenario);
        return 2;
    }
    teardown(&p);
    printf("%s %s: %s (%d peer_failures)\n", peer_role, scenario, peer_failures ? "FAILED" : "passed", peer_failures);
    return peer_failures ? 1 : 0;
}
