/* dat_ud_peer: one side of the IB unreliable-datagram end-to-end test,
 * using only the public DAT API and the dat_ib_* macros (registry +
 * dat.conf, DAT_OVERRIDE).
 *
 *   dat_ud_peer server IA PORT
 *   dat_ud_peer client IA HOST PORT
 *
 * Both: the IA advertises DAT_IB_UD = TRUE; one UD EP
 * (DAT_IB_SERVICE_TYPE_UD) with NRECV receives of GRH + MTU posted.
 *  - client: dat_ep_connect(pdata "UDCLI") -> DAT_IB_UD_CONNECTION_EVENT_ESTABLISHED,
 *    type DAT_IB_UD_REMOTE_AH, pdata "UDSRV", an AH with a QPN.
 *  - server: the CR shows "UDCLI"; dat_cr_accept(pdata "UDSRV") ->
 *    ..._ESTABLISHED with DAT_IB_UD_PASSIVE_REMOTE_AH, pdata "UDCLI".
 *  - ping-pong: the client sends one datagram of each size in SIZES
 *    (0 .. the MTU); the server checks length (GRH + payload), pattern,
 *    the source (remote_ah.qpn and .ah = its resolved AH) and echoes it;
 *    the client checks the echo the same way.
 *  - burst: the client sends BURST datagrams back to back (the server has
 *    that many receives posted); every one is echoed and arrives: nothing
 *    lost on a healthy link.
 *  - the client's MTU + 1 post is refused with DAT_LENGTH_ERROR.
 *  - the client sends "BYE"; both free the CM object and the AH.
 * Prints "FAIL ..." and exits 1 on any failed check, 0 otherwise. */
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dat2/dat_ib_extensions.h>
#include <dat2/udat.h>

#include "test/lib/peer.h"


#define GRH 40
#define NRECV 40
#define BURST 32
static const unsigned SIZES[] = {0, 1, 13, 256, 1000, 4096, 9000, 32768};
#define NSIZES (sizeof SIZES / sizeof SIZES[0])

struct peer {
    DAT_IA_HANDLE ia;
    DAT_PZ_HANDLE pz;
    DAT_EVD_HANDLE async, req, rcv, conn, cr;
    DAT_EP_HANDLE ep;
    DAT_PSP_HANDLE psp;
    unsigned mtu;
    char *rbuf, *sbuf;     /* NRECV slots of GRH + mtu; one send slot of mtu + 1 */
    DAT_LMR_HANDLE lr, ls;
    DAT_LMR_CONTEXT lcr, lcs;
    DAT_IB_ADDR_HANDLE ah; /* the peer */
    DAT_CONTEXT cm;
};

static void post_recv(struct peer *p, int slot)
{
    DAT_LMR_TRIPLET t = peer_triplet(p->lcr, p->rbuf + (size_t)slot * (GRH + p->mtu), GRH + p->mtu);
    PEER_MUST(dat_ep_post_recv(p->ep, 1, &t, peer_cookie((uint64_t)slot), DAT_COMPLETION_DEFAULT_FLAG));
}

static void open_peer(struct peer *p, char *ia_name)
{
    memset(p, 0, sizeof *p);
    PEER_MUST(dat_ia_open(ia_name, 8, &p->async, &p->ia));
    DAT_IA_ATTR ia;
    DAT_PROVIDER_ATTR pa;
    PEER_MUST(dat_ia_query(p->ia, NULL, DAT_IA_ALL, &ia, DAT_PROVIDER_FIELD_ALL, &pa));
    PEER_EXPECT(ia.extension_supported == DAT_EXTENSION_IB, "extension_supported %d", (int)ia.extension_supported);
    PEER_EXPECT(strcmp(peer_provider_attr(&pa, "DAT_IB_UD"), "TRUE") == 0, "DAT_IB_UD = %s", peer_provider_attr(&pa, "DAT_IB_UD"));
    p->mtu = (unsigned)atoi(peer_provider_attr(&pa, "DAT_IB_TRANSPORT_MTU"));
    PEER_EXPECT(p->mtu >= 4096, "DAT_IB_TRANSPORT_MTU %u", p->mtu);
    if (p->mtu < 4096 || p->mtu > 65000)
        exit(1);
    PEER_MUST(dat_pz_create(p->ia, &p->pz));
    PEER_MUST(dat_evd_create(p->ia, 8, DAT_HANDLE_NULL, DAT_EVD_CR_FLAG, &p->cr));
    PEER_MUST(dat_evd_create(p->ia, 8, DAT_HANDLE_NULL, DAT_EVD_CONNECTION_FLAG, &p->conn));
    PEER_MUST(dat_evd_create(p->ia, 128, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &p->req));
    PEER_MUST(dat_evd_create(p->ia, 128, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &p->rcv));
    DAT_EP_ATTR a;
    memset(&a, 0, sizeof a);
    a.service_type = (DAT_SERVICE_TYPE)DAT_IB_SERVICE_TYPE_UD;
    a.max_message_size = p->mtu;
    a.max_recv_dtos = NRECV;
    a.max_request_dtos = BURST + 8;
    a.max_recv_iov = 1;
    a.max_request_iov = 1;
    a.qos = DAT_QOS_BEST_EFFORT;
    a.recv_completion_flags = DAT_COMPLETION_DEFAULT_FLAG;
    a.request_completion_flags = DAT_COMPLETION_DEFAULT_FLAG;
    PEER_MUST(dat_ep_create(p->ia, p->pz, p->rcv, p->req, p->conn, &a, &p->ep));
    size_t rlen = (size_t)NRECV * (GRH + p->mtu);
    p->rbuf = calloc(1, rlen);
    p->sbuf = calloc(1, p->mtu + 1);
    if (p->rbuf == NULL || p->sbuf == NULL)
        exit(1);
    peer_register(p->ia, p->pz, p->rbuf, rlen, DAT_MEM_PRIV_ALL_FLAG, &p->lr, &p->lcr, NULL);
    peer_register(p->ia, p->pz, p->sbuf, p->mtu + 1, DAT_MEM_PRIV_ALL_FLAG, &p->ls, &p->lcs, NULL);
    for (int i = 0; i < NRECV; i++)
        post_recv(p, i);
}

static void fill(char *b, unsigned len, unsigned seq)
{
    for (unsigned i = 0; i < len; i++)
        b[i] = (char)(seq * 31 + i);
}

static bool same(const char *b, unsigned len, unsigned seq)
{
    for (unsigned i = 0; i < len; i++)
        if (b[i] != (char)(seq * 31 + i))
            return false;
    return true;
}

static void send_dgram(struct peer *p, unsigned len, unsigned seq)
{
    fill(p->sbuf, len, seq);
    DAT_LMR_TRIPLET t = peer_triplet(p->lcs, p->sbuf, len);
    PEER_MUST(dat_ib_post_send_ud(p->ep, 1, &t, &p->ah, peer_cookie(seq), DAT_COMPLETION_DEFAULT_FLAG));
    DAT_EVENT ev = peer_wait(p->req, "send completion");
    const DAT_DTO_COMPLETION_EVENT_DATA *d = &ev.event_data.dto_completion_event_data;
    PEER_EXPECT(ev.event_number == (DAT_EVENT_NUMBER)DAT_IB_DTO_EVENT, "send event 0x%x", (unsigned)ev.event_number);
    PEER_EXPECT(d->status == DAT_DTO_SUCCESS && d->operation == (DAT_DTOS)DAT_IB_DTO_SEND_UD &&
              d->transfered_length == len && d->user_cookie.as_64 == seq && peer_ib_ext(&ev)->type == DAT_IB_UD_SEND,
          "send completion: status %d op %d len %llu cookie %llu type %d", (int)d->status, (int)d->operation,
          (unsigned long long)d->transfered_length, (unsigned long long)d->user_cookie.as_64, (int)peer_ib_ext(&ev)->type);
}

/* Next datagram: its slot and payload length; the source must be the peer. */
static int recv_dgram(struct peer *p, unsigned *len)
{
    DAT_EVENT ev = peer_wait(p->rcv, "a datagram");
    const DAT_DTO_COMPLETION_EVENT_DATA *d = &ev.event_data.dto_completion_event_data;
    PEER_EXPECT(ev.event_number == (DAT_EVENT_NUMBER)DAT_IB_DTO_EVENT && d->status == DAT_DTO_SUCCESS &&
              d->operation == (DAT_DTOS)DAT_IB_DTO_RECV_UD && peer_ib_ext(&ev)->type == DAT_IB_UD_RECV,
          "recv event 0x%x status %d op %d", (unsigned)ev.event_number, (int)d->status, (int)d->operation);
    PEER_EXPECT(d->transfered_length >= GRH, "recv length %llu < GRH", (unsigned long long)d->transfered_length);
    PEER_EXPECT(peer_ib_ext(&ev)->remote_ah.qpn == p->ah.qpn, "source qpn 0x%x, peer 0x%x", peer_ib_ext(&ev)->remote_ah.qpn, p->ah.qpn);
    PEER_EXPECT(peer_ib_ext(&ev)->remote_ah.ah == p->ah.ah, "source ah %p, peer %p", (void *)peer_ib_ext(&ev)->remote_ah.ah,
          (void *)p->ah.ah);
    *len = (unsigned)(d->transfered_length - GRH);
    return (int)d->user_cookie.as_64;
}

static char *slot_data(struct peer *p, int slot)
{
    return p->rbuf + (size_t)slot * (GRH + p->mtu) + GRH;
}

static void take_ah(struct peer *p, const DAT_EVENT *ev, DAT_IB_EXT_TYPE want, const char *pdata)
{
    PEER_EXPECT(ev->event_number == (DAT_EVENT_NUMBER)DAT_IB_UD_CONNECTION_EVENT_ESTABLISHED, "conn event 0x%x",
          (unsigned)ev->event_number);
    if (ev->event_number != (DAT_EVENT_NUMBER)DAT_IB_UD_CONNECTION_EVENT_ESTABLISHED)
        exit(1);
    PEER_EXPECT(peer_ib_ext(ev)->type == want, "ext type %d, want %d", (int)peer_ib_ext(ev)->type, (int)want);
    const DAT_CONNECTION_EVENT_DATA *c = &ev->event_data.connect_event_data;
    PEER_EXPECT(c->private_data_size == (DAT_COUNT)strlen(pdata) && memcmp(c->private_data, pdata, strlen(pdata)) == 0,
          "event pdata size %d", (int)c->private_data_size);
    p->ah = peer_ib_ext(ev)->remote_ah;
    p->cm = peer_ib_ext(ev)->context;
    PEER_EXPECT(p->ah.ah != NULL && p->ah.qpn != 0, "AH %p qpn 0x%x", (void *)p->ah.ah, p->ah.qpn);
    char buf[64];
    const struct sockaddr *sa = (const struct sockaddr *)&p->ah.ia_addr;
    getnameinfo(sa, sa->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in), buf,
                sizeof buf, NULL, 0, NI_NUMERICHOST);
    printf("%s: remote AH %s qpn 0x%x\n", peer_role, buf, p->ah.qpn);
    fflush(stdout);
}

static void release(struct peer *p)
{
    PEER_MUST(dat_ib_ud_cm_free(p->ep, p->cm));
    PEER_MUST(dat_ib_ud_ah_free(p->ep, &p->ah));
    DAT_RETURN rc = dat_ib_post_send_ud(p->ep, 0, NULL, &p->ah, peer_cookie(0), DAT_COMPLETION_DEFAULT_FLAG);
    PEER_EXPECT(DAT_GET_TYPE(rc) == DAT_INVALID_PARAMETER, "send to a freed AH: 0x%08x", (unsigned)rc);
    PEER_MUST(dat_ep_free(p->ep));
    PEER_MUST(dat_lmr_free(p->lr));
    PEER_MUST(dat_lmr_free(p->ls));
    PEER_MUST(dat_ia_close(p->ia, DAT_CLOSE_ABRUPT_FLAG));
    free(p->rbuf);
    free(p->sbuf);
}

static int server(char *ia_name, DAT_CONN_QUAL port)
{
    peer_role = "server";
    struct peer p;
    open_peer(&p, ia_name);
    PEER_MUST(dat_psp_create(p.ia, port, p.cr, DAT_PSP_CONSUMER_FLAG, &p.psp));
    printf("server: listening on %llu\n", (unsigned long long)port);
    fflush(stdout);
    DAT_EVENT ev = peer_wait(p.cr, "a request");
    PEER_EXPECT(ev.event_number == (DAT_EVENT_NUMBER)DAT_IB_UD_CONNECTION_REQUEST_EVENT &&
              peer_ib_ext(&ev)->type == DAT_IB_UD_CONNECT_REQUEST,
          "cr event 0x%x", (unsigned)ev.event_number);
    DAT_CR_HANDLE cr = ev.event_data.cr_arrival_event_data.cr_handle;
    DAT_CR_PARAM cp;
    PEER_MUST(dat_cr_query(cr, DAT_CR_FIELD_ALL, &cp));
    PEER_EXPECT(cp.private_data_size == 5 && memcmp(cp.private_data, "UDCLI", 5) == 0, "CR pdata size %d",
          (int)cp.private_data_size);
    PEER_MUST(dat_cr_accept(cr, p.ep, 5, "UDSRV"));
    ev = peer_wait(p.conn, "UD established");
    take_ah(&p, &ev, DAT_IB_UD_PASSIVE_REMOTE_AH, "UDCLI");
    /* echo until BYE */
    unsigned echoed = 0;
    for (unsigned n = 0; n < NSIZES + BURST + 1; n++) {
        unsigned len;
        int slot = recv_dgram(&p, &len);
        char *d = slot_data(&p, slot);
        if (len == 3 && memcmp(d, "BYE", 3) == 0)
            break;
        memcpy(p.sbuf, d, len);
        post_recv(&p, slot);
        DAT_LMR_TRIPLET t = peer_triplet(p.lcs, p.sbuf, len);
        PEER_MUST(dat_ib_post_send_ud(p.ep, 1, &t, &p.ah, peer_cookie(n), DAT_COMPLETION_DEFAULT_FLAG));
        ev = peer_wait(p.req, "echo completion");
        PEER_EXPECT(ev.event_data.dto_completion_event_data.status == DAT_DTO_SUCCESS, "echo status %d",
              (int)ev.event_data.dto_completion_event_data.status);
        echoed++;
    }
    PEER_EXPECT(echoed == NSIZES + BURST, "echoed %u datagrams, want %u", echoed, (unsigned)(NSIZES + BURST));
    PEER_MUST(dat_psp_free(p.psp));
    release(&p);
    printf("server: %s (%u datagrams echoed)\n", peer_failures ? "FAILED" : "ok", echoed);
    return peer_failures ? 1 : 0;
}

static int client(char *ia_name, const char *host, DAT_CONN_QUAL port)
{
    peer_role = "client";
    struct peer p;
    open_peer(&p, ia_name);
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai = NULL;
    if (getaddrinfo(host, NULL, &hints, &ai) != 0 || ai == NULL) {
        printf("FAIL client: cannot resolve %s\n", host);
        return 1;
    }
    PEER_MUST(dat_ep_connect(p.ep, (DAT_IA_ADDRESS_PTR)ai->ai_addr, port, PEER_WAIT_US, 5, "UDCLI", DAT_QOS_BEST_EFFORT,
                        DAT_CONNECT_DEFAULT_FLAG));
    freeaddrinfo(ai);
    DAT_EVENT ev = peer_wait(p.conn, "UD established");
    take_ah(&p, &ev, DAT_IB_UD_REMOTE_AH, "UDSRV");
    /* over the MTU: refused at post */
    DAT_LMR_TRIPLET big = peer_triplet(p.lcs, p.sbuf, p.mtu + 1);
    DAT_RETURN rc = dat_ib_post_send_ud(p.ep, 1, &big, &p.ah, peer_cookie(0), DAT_COMPLETION_DEFAULT_FLAG);
    PEER_EXPECT(DAT_GET_TYPE(rc) == DAT_LENGTH_ERROR, "MTU + 1: 0x%08x", (unsigned)rc);
    /* ping-pong over every size */
    for (unsigned i = 0; i < NSIZES; i++) {
        unsigned len = SIZES[i] <= p.mtu ? SIZES[i] : p.mtu;
        send_dgram(&p, len, i);
        unsigned got;
        int slot = recv_dgram(&p, &got);
        PEER_EXPECT(got == len && same(slot_data(&p, slot), len, i), "echo of %u bytes: %u bytes%s", len, got,
              got == len ? ", wrong bytes" : "");
        post_recv(&p, slot);
    }
    /* burst: BURST datagrams back to back; every one comes back */
    bool seen[BURST] = {false};
    for (unsigned k = 0; k < BURST; k++) {
        unsigned seq = 100 + k;
        fill(p.sbuf, 64, seq);
        p.sbuf[0] = (char)k;
        DAT_LMR_TRIPLET t = peer_triplet(p.lcs, p.sbuf, 64);
        PEER_MUST(dat_ib_post_send_ud(p.ep, 1, &t, &p.ah, peer_cookie(seq), DAT_COMPLETION_DEFAULT_FLAG));
        ev = peer_wait(p.req, "burst send");
        PEER_EXPECT(ev.event_data.dto_completion_event_data.status == DAT_DTO_SUCCESS, "burst send status");
    }
    for (unsigned k = 0; k < BURST; k++) {
        unsigned got;
        int slot = recv_dgram(&p, &got);
        char *d = slot_data(&p, slot);
        unsigned idx = (unsigned char)d[0];
        PEER_EXPECT(got == 64 && idx < BURST && !seen[idx], "burst echo %u bytes idx %u", got, idx);
        if (idx < BURST)
            seen[idx] = true;
        post_recv(&p, slot);
    }
    memcpy(p.sbuf, "BYE", 3);
    DAT_LMR_TRIPLET t = peer_triplet(p.lcs, p.sbuf, 3);
    PEER_MUST(dat_ib_post_send_ud(p.ep, 1, &t, &p.ah, peer_cookie(999), DAT_COMPLETION_DEFAULT_FLAG));
    peer_wait(p.req, "BYE completion");
    release(&p);
    printf("client: %s\n", peer_failures ? "FAILED" : "ok");
    return peer_failures ? 1 : 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc == 4 && strcmp(argv[1], "server") == 0)
        return server(argv[2], (DAT_CONN_QUAL)strtoul(argv[3], NULL, 10));
    if (argc == 5 && strcmp(argv[1], "client") == 0)
        return client(argv[2], argv[3], (DAT_CONN_QUAL)strtoul(argv[4], NULL, 10));
    fprintf(stderr, "usage: %s server IA PORT | client IA HOST PORT\n", argv[0]);
    return 2;
}
