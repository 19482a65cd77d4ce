/* dat_ibext_peer: one side of the IB-extension end-to-end test, using only
 * the public DAT API and the dat_ib_* macros (registry + dat.conf,
 * DAT_OVERRIDE).
 *
 *   dat_ibext_peer server IA PORT
 *   dat_ibext_peer client IA HOST PORT
 *
 * Both sides: the IA reports DAT_EXTENSION_IB and provider attributes
 * DAT_IB_IMMED_DATA, DAT_IB_FETCH_AND_ADD and DAT_IB_CMP_AND_SWAP = TRUE;
 * triplet exchange by Send. Then:
 *  - client: RDMA Write with immediate, 256 B, imm 0x7777. Requester event:
 *    DAT_IB_DTO_EVENT, type RDMA_WRITE_IMMED, length 256. Server: the next
 *    receive completes as DAT_IB_DTO_EVENT, type RDMA_WRITE_IMMED_DATA,
 *    immed 0x7777, transfered_length 256, bytes placed.
 *  - server: Write with immediate of 70000 B (several FPDUs) imm 0x1111,
 *    then one with no segments imm 0x2222: the client sees 70000 and 0.
 *  - client: fetch-and-add 5 on the server's word (100 -> 105, returns
 *    100), compare-and-swap 105 -> 7 (returns 105), compare-and-swap 1 -> 9
 *    (fails, returns 7): extended events FETCH_AND_ADD / CMP_AND_SWAP.
 *  - client: "D"; server checks the word is 7 and answers "OK".
 *  - client: NSENDS Sends of 8 KiB, waits for their completions and at
 *    once disconnects ABRUPT: the server must still receive all of them
 *    (no RST while bytes are in flight), then DISCONNECTED.
 * Prints "FAIL ..." and exits 1 on any failed check, 0 otherwise. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dat2/udat.h>

#include "test/lib/peer.h"
#include <dat2/dat_ib_extensions.h>


#define SLOT 65536
#define NRECV 24
#define NSENDS 16
#define TGT 131072
#define BIG 70000
#define BURST (TGT / NSENDS) /* bytes per Send of the burst before the abrupt disconnect */

struct peer {
    DAT_IA_HANDLE ia;
    DAT_PZ_HANDLE pz;
    DAT_EVD_HANDLE async, req, rcv, conn, cr;
    DAT_EP_HANDLE ep;
    DAT_PSP_HANDLE psp;
    char *msg, *tgt, *src;
    uint64_t *word, *result;    /* atomic target (server) / original values (client) */
    DAT_LMR_HANDLE lmr_msg, lmr_tgt, lmr_src, lmr_word, lmr_res;
    DAT_LMR_CONTEXT lc_msg, lc_tgt, lc_src, lc_word, lc_res;
    DAT_RMR_CONTEXT rc_tgt, rc_word;
    DAT_RMR_TRIPLET remote[2];  /* the peer's target and word */
    int next_recv;
};

static void reg(struct peer *p, void *buf, DAT_VLEN len, DAT_MEM_PRIV_FLAGS priv, DAT_LMR_HANDLE *h,
                DAT_LMR_CONTEXT *lc, DAT_RMR_CONTEXT *rc)
{
    peer_register(p->ia, p->pz, buf, len, priv, h, lc, rc);
}

static void check_attrs(struct peer *p)
{
    DAT_IA_ATTR ia;
    DAT_PROVIDER_ATTR pa;
    PEER_MUST(dat_ia_query(p->ia, NULL, DAT_IA_ALL, &ia, DAT_PROVIDER_FIELD_ALL, &pa));
    PEER_EXPECT(ia.extension_supported == DAT_EXTENSION_IB, "extension_supported %d", (int)ia.extension_supported);
    static const char *const names[] = {"DAT_IB_IMMED_DATA", "DAT_IB_FETCH_AND_ADD", "DAT_IB_CMP_AND_SWAP"};
    for (int i = 0; i < 3; i++)
        PEER_EXPECT(strcmp(peer_provider_attr(&pa, names[i]), "TRUE") == 0, "%s = %s", names[i], peer_provider_attr(&pa, names[i]));
}

static void setup(struct peer *p, char *ia_name)
{
    memset(p, 0, sizeof *p);
    p->async = DAT_HANDLE_NULL;
    PEER_MUST(dat_ia_open(ia_name, 16, &p->async, &p->ia));
    check_attrs(p);
    PEER_MUST(dat_pz_create(p->ia, &p->pz));
    DAT_EVD_FLAGS f = DAT_EVD_DTO_FLAG | (DAT_EVD_FLAGS)DAT_IB_EVD_EXTENSION_FLAG;
    PEER_MUST(dat_evd_create(p->ia, 64, DAT_HANDLE_NULL, f, &p->req));
    PEER_MUST(dat_evd_create(p->ia, 64, DAT_HANDLE_NULL, f, &p->rcv));
    PEER_MUST(dat_evd_create(p->ia, 16, DAT_HANDLE_NULL, DAT_EVD_CONNECTION_FLAG, &p->conn));
    PEER_MUST(dat_evd_create(p->ia, 4, DAT_HANDLE_NULL, DAT_EVD_CR_FLAG, &p->cr));
    p->msg = aligned_alloc(4096, (size_t)SLOT * NRECV);
    p->tgt = aligned_alloc(4096, TGT);
    p->src = aligned_alloc(4096, TGT);
    p->word = aligned_alloc(64, 64);
    p->result = aligned_alloc(64, 64);
    memset(p->msg, 0, (size_t)SLOT * NRECV);
    memset(p->tgt, 0, TGT);
    memset(p->word, 0, 64);
    memset(p->result, 0, 64);
    *p->word = 100;
    DAT_MEM_PRIV_FLAGS all = DAT_MEM_PRIV_ALL_FLAG;
    reg(p, p->msg, (DAT_VLEN)SLOT * NRECV, all, &p->lmr_msg, &p->lc_msg, NULL);
    reg(p, p->tgt, TGT, all, &p->lmr_tgt, &p->lc_tgt, &p->rc_tgt);
    reg(p, p->src, TGT, all, &p->lmr_src, &p->lc_src, NULL);
    reg(p, p->word, 64, all | (DAT_MEM_PRIV_FLAGS)DAT_IB_MEM_PRIV_REMOTE_ATOMIC, &p->lmr_word, &p->lc_word,
        &p->rc_word);
    reg(p, p->result, 64, all, &p->lmr_res, &p->lc_res, NULL);
    DAT_EP_ATTR a;
    memset(&a, 0, sizeof a);
    a.service_type = DAT_SERVICE_TYPE_RC;
    a.max_message_size = 1 << 20;
    a.max_rdma_size = 1 << 20;
    a.qos = DAT_QOS_BEST_EFFORT;
    a.recv_completion_flags = DAT_COMPLETION_DEFAULT_FLAG;
    a.request_completion_flags = DAT_COMPLETION_DEFAULT_FLAG;
    a.max_recv_dtos = NRECV;
    a.max_request_dtos = NSENDS + 8;
    a.max_recv_iov = 1;
    a.max_request_iov = 1;
    a.max_rdma_read_in = 4;
    a.max_rdma_read_out = 4;
    PEER_MUST(dat_ep_create(p->ia, p->pz, p->rcv, p->req, p->conn, &a, &p->ep));
    for (int i = 0; i < NRECV; i++) {
        DAT_LMR_TRIPLET t = peer_triplet(p->lc_msg, p->msg + (size_t)i * SLOT, SLOT);
        PEER_MUST(dat_ep_post_recv(p->ep, 1, &t, peer_cookie((uint64_t)i), DAT_COMPLETION_DEFAULT_FLAG));
    }
}

static char *expect_recv(struct peer *p, DAT_COUNT len, const char *what)
{
    DAT_EVENT ev = peer_wait(p->rcv, what);
    PEER_EXPECT(ev.event_number == DAT_DTO_COMPLETION_EVENT, "%s: event 0x%x", what, ev.event_number);
    DAT_DTO_COMPLETION_EVENT_DATA d = ev.event_data.dto_completion_event_data;
    PEER_EXPECT(d.status == DAT_DTO_SUCCESS, "%s: status %d", what, d.status);
    PEER_EXPECT(d.user_cookie.as_64 == (uint64_t)p->next_recv, "%s: cookie %llu want %d", what,
          (unsigned long long)d.user_cookie.as_64, p->next_recv);
    PEER_EXPECT(d.transfered_length == (DAT_SEG_LENGTH)len, "%s: length %u want %d", what,
          (unsigned)d.transfered_length, len);
    return p->msg + (size_t)p->next_recv++ * SLOT;
}

/* The next receive, consumed by an RDMA Write with immediate. */
static void expect_immed(struct peer *p, uint32_t imm, DAT_SEG_LENGTH len, const char *what)
{
    DAT_EVENT ev = peer_wait(p->rcv, what);
    PEER_EXPECT(ev.event_number == (DAT_EVENT_NUMBER)DAT_IB_DTO_EVENT, "%s: event 0x%x", what, ev.event_number);
    DAT_DTO_COMPLETION_EVENT_DATA d = ev.event_data.dto_completion_event_data;
    PEER_EXPECT(d.status == DAT_DTO_SUCCESS, "%s: status %d", what, d.status);
    PEER_EXPECT(d.user_cookie.as_64 == (uint64_t)p->next_recv, "%s: cookie %llu want %d", what,
          (unsigned long long)d.user_cookie.as_64, p->next_recv);
    PEER_EXPECT(d.transfered_length == len, "%s: transfered_length %u want %u", what, (unsigned)d.transfered_length,
          (unsigned)len);
    PEER_EXPECT(d.operation == (DAT_DTOS)DAT_IB_DTO_RECV_IMMED, "%s: operation %d", what, (int)d.operation);
    PEER_EXPECT(peer_ib_ext(&ev)->type == DAT_IB_RDMA_WRITE_IMMED_DATA, "%s: ext type %d", what, (int)peer_ib_ext(&ev)->type);
    PEER_EXPECT(peer_ib_ext(&ev)->status == DAT_OP_SUCCESS, "%s: ext status %d", what, (int)peer_ib_ext(&ev)->status);
    PEER_EXPECT(peer_ib_ext(&ev)->val.immed.data == imm, "%s: immed 0x%x want 0x%x", what, peer_ib_ext(&ev)->val.immed.data, imm);
    p->next_recv++;
}

static void send_msg(struct peer *p, const void *data, DAT_SEG_LENGTH len, uint64_t cookie, const char *what)
{
    memcpy(p->src, data, len);
    DAT_LMR_TRIPLET t = peer_triplet(p->lc_src, p->src, len);
    PEER_MUST(dat_ep_post_send(p->ep, 1, &t, peer_cookie(cookie), DAT_COMPLETION_DEFAULT_FLAG));
    DAT_EVENT ev = peer_wait(p->req, what);
    DAT_DTO_COMPLETION_EVENT_DATA d = ev.event_data.dto_completion_event_data;
    PEER_EXPECT(ev.event_number == DAT_DTO_COMPLETION_EVENT && d.status == DAT_DTO_SUCCESS &&
              d.user_cookie.as_64 == cookie,
          "%s: event 0x%x status %d", what, ev.event_number, d.status);
}

static void exchange(struct peer *p)
{
    DAT_RMR_TRIPLET mine[2] = {
        {.virtual_address = (DAT_VADDR)(uintptr_t)p->tgt, .segment_length = TGT, .rmr_context = p->rc_tgt},
        {.virtual_address = (DAT_VADDR)(uintptr_t)p->word, .segment_length = 8, .rmr_context = p->rc_word},
    };
    send_msg(p, mine, sizeof mine, 1000, "triplet send");
    char *m = expect_recv(p, sizeof mine, "triplet recv");
    memcpy(p->remote, m, sizeof p->remote);
}

static void write_immed(struct peer *p, DAT_SEG_LENGTH len, uint32_t imm, uint64_t cookie, unsigned seed)
{
    for (DAT_SEG_LENGTH i = 0; i < len; i++)
        p->src[i] = (char)(i * seed + 1);
    DAT_LMR_TRIPLET t = peer_triplet(p->lc_src, p->src, len);
    DAT_RMR_TRIPLET r = p->remote[0];
    r.segment_length = len;
    PEER_MUST(dat_ib_post_rdma_write_immed(p->ep, len ? 1 : 0, &t, peer_cookie(cookie), &r, imm, DAT_COMPLETION_DEFAULT_FLAG));
    DAT_EVENT ev = peer_wait(p->req, "write immed completion");
    DAT_DTO_COMPLETION_EVENT_DATA d = ev.event_data.dto_completion_event_data;
    PEER_EXPECT(ev.event_number == (DAT_EVENT_NUMBER)DAT_IB_DTO_EVENT, "write immed: event 0x%x", ev.event_number);
    PEER_EXPECT(d.status == DAT_DTO_SUCCESS && d.user_cookie.as_64 == cookie && d.transfered_length == len,
          "write immed: status %d cookie %llu len %u", d.status, (unsigned long long)d.user_cookie.as_64,
          (unsigned)d.transfered_length);
    PEER_EXPECT(peer_ib_ext(&ev)->type == DAT_IB_RDMA_WRITE_IMMED, "write immed: ext type %d", (int)peer_ib_ext(&ev)->type);
}

static int check_pattern(const char *b, DAT_SEG_LENGTH len, unsigned seed)
{
    int bad = 0;
    for (DAT_SEG_LENGTH i = 0; i < len; i++)
        bad += b[i] != (char)(i * seed + 1);
    return bad;
}

static uint64_t atomic_op(struct peer *p, bool cas, uint64_t a1, uint64_t a2, uint64_t cookie)
{
    *p->result = 0xdeadbeefdeadbeefull;
    DAT_LMR_TRIPLET t = peer_triplet(p->lc_res, p->result, 8);
    DAT_RMR_TRIPLET r = p->remote[1];
    if (cas)
        PEER_MUST(dat_ib_post_cmp_and_swap(p->ep, a1, a2, &t, peer_cookie(cookie), &r, DAT_COMPLETION_DEFAULT_FLAG));
    else
        PEER_MUST(dat_ib_post_fetch_and_add(p->ep, a1, &t, peer_cookie(cookie), &r, DAT_COMPLETION_DEFAULT_FLAG));
    DAT_EVENT ev = peer_wait(p->req, cas ? "cmp-and-swap" : "fetch-and-add");
    DAT_DTO_COMPLETION_EVENT_DATA d = ev.event_data.dto_completion_event_data;
    PEER_EXPECT(ev.event_number == (DAT_EVENT_NUMBER)DAT_IB_DTO_EVENT, "atomic: event 0x%x", ev.event_number);
    PEER_EXPECT(d.status == DAT_DTO_SUCCESS && d.user_cookie.as_64 == cookie, "atomic: status %d", d.status);
    PEER_EXPECT(peer_ib_ext(&ev)->type == (cas ? DAT_IB_CMP_AND_SWAP : DAT_IB_FETCH_AND_ADD), "atomic: ext type %d",
          (int)peer_ib_ext(&ev)->type);
    return *p->result;
}

static void client(struct peer *p)
{
    exchange(p);
    write_immed(p, 256, 0x7777, 1, 3);
    expect_immed(p, 0x1111, BIG, "immed 0x1111");
    PEER_EXPECT(check_pattern(p->tgt, BIG, 5) == 0, "70000-byte write: bytes differ");
    expect_immed(p, 0x2222, 0, "immed 0x2222 (no data)");
    PEER_EXPECT(atomic_op(p, false, 5, 0, 2) == 100, "fetch-and-add original");
    PEER_EXPECT(atomic_op(p, true, 105, 7, 3) == 105, "cmp-and-swap original");
    PEER_EXPECT(atomic_op(p, true, 1, 9, 4) == 7, "failing cmp-and-swap original");
    send_msg(p, "D", 1, 5, "done");
    char *ans = expect_recv(p, 2, "verdict");
    PEER_EXPECT(memcmp(ans, "OK", 2) == 0, "verdict %.2s", ans);
    /* Sends, completed, then an abrupt disconnect at once. */
    for (int i = 0; i < NSENDS; i++) {
        memset(p->src + i * BURST, 'a' + i, BURST);
        DAT_LMR_TRIPLET t = peer_triplet(p->lc_src, p->src + i * BURST, BURST);
        PEER_MUST(dat_ep_post_send(p->ep, 1, &t, peer_cookie(100 + (uint64_t)i), DAT_COMPLETION_DEFAULT_FLAG));
    }
    for (int i = 0; i < NSENDS; i++) {
        DAT_EVENT ev = peer_wait(p->req, "burst send");
        PEER_EXPECT(ev.event_data.dto_completion_event_data.status == DAT_DTO_SUCCESS, "burst send %d: status %d", i,
              ev.event_data.dto_completion_event_data.status);
    }
    PEER_MUST(dat_ep_disconnect(p->ep, DAT_CLOSE_ABRUPT_FLAG));
    DAT_EVENT ev = peer_wait(p->conn, "disconnected");
    PEER_EXPECT(ev.event_number == DAT_CONNECTION_EVENT_DISCONNECTED, "conn event 0x%x", ev.event_number);
}

static void server(struct peer *p)
{
    exchange(p);
    expect_immed(p, 0x7777, 256, "immed 0x7777");
    PEER_EXPECT(check_pattern(p->tgt, 256, 3) == 0, "256-byte write: bytes differ");
    write_immed(p, BIG, 0x1111, 1, 5);
    write_immed(p, 0, 0x2222, 2, 1);
    char *m = expect_recv(p, 1, "done");
    PEER_EXPECT(m[0] == 'D', "done message %c", m[0]);
    uint64_t w = __atomic_load_n(p->word, __ATOMIC_ACQUIRE);
    PEER_EXPECT(w == 7, "atomic word %llu want 7", (unsigned long long)w);
    send_msg(p, w == 7 ? "OK" : "NO", 2, 3, "verdict");
    for (int i = 0; i < NSENDS; i++) {
        char what[32];
        snprintf(what, sizeof what, "burst recv %d", i);
        m = expect_recv(p, BURST, what);
        PEER_EXPECT(m[0] == 'a' + i && m[BURST - 1] == 'a' + i, "%s: content", what);
    }
    DAT_EVENT ev = peer_wait(p->conn, "disconnected");
    PEER_EXPECT(ev.event_number == DAT_CONNECTION_EVENT_DISCONNECTED, "conn event 0x%x", ev.event_number);
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    struct peer p;
    bool srv = argc == 4 && strcmp(argv[1], "server") == 0;
    if (!srv && !(argc == 5 && strcmp(argv[1], "client") == 0)) {
        fprintf(stderr, "usage: %s server IA PORT | client IA HOST PORT\n", argv[0]);
        return 2;
    }
    peer_role = srv ? "server" : "client";
    DAT_CONN_QUAL port = (DAT_CONN_QUAL)strtoul(argv[srv ? 3 : 4], NULL, 10);
    setup(&p, argv[2]);
    if (srv) {
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
    PEER_EXPECT(ev.event_number == DAT_CONNECTION_EVENT_ESTABLISHED, "conn event 0x%x", ev.event_number);
    if (srv)
        server(&p);
    else
        client(&p);
    if (srv)
        dat_psp_free(p.psp);
    dat_ep_free(p.ep);
    dat_lmr_free(p.lmr_msg);
    dat_lmr_free(p.lmr_tgt);
    dat_lmr_free(p.lmr_src);
    dat_lmr_free(p.lmr_word);
    dat_lmr_free(p.lmr_res);
    dat_evd_free(p.req);
    dat_evd_free(p.rcv);
    dat_evd_free(p.conn);
    dat_evd_free(p.cr);
    dat_pz_free(p.pz);
    dat_ia_close(p.ia, DAT_CLOSE_ABRUPT_FLAG);
    free(p.msg);
    free(p.tgt);
    free(p.src);
    free(p.word);
    free(p.result);
    printf("%s: %s\n", peer_role, peer_failures ? "FAILED" : "passed");
    return peer_failures ? 1 : 0;
}
