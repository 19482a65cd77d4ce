/* dat_ssp_peer: a DAT consumer of the iWARP extension's socket service
 * points, for test/e2e/dat_ssp.sh (two processes, loopback or two network
 * namespaces, either registry: the calls are dat_extension_op macros).
 *
 *   dat_ssp_peer -s -P IA                  server: prints "ready PORT"
 *   dat_ssp_peer -c -P IA -h HOST -p PORT  client
 *
 * Both sides first talk plain TCP on a socket they made themselves (the
 * "streaming mode" of spec 003 §1): the client says "HELLO\n", the server
 * answers "SSP\n". Then the server turns its socket into an SSP whose final
 * streaming-mode message is "RDMA-OK\n"; the client reads it and calls
 * dat_iw_socket_connect on its socket with private data "ssp-client". The
 * server checks the CR (its private data, the SSP as sp_handle, the SSP
 * now NON_OPERATIONAL) and accepts; then over the RDMA connection: the
 * server sends its buffer's RMR triplet, the client RDMA-writes 4 KiB
 * into it and sends "done", the server checks the bytes, both
 * disconnect. Exit 0 on success; every wait is bounded. */
#include <dat2/udat.h>

#include "test/lib/peer.h"
#include <dat2/dat_iw_extensions.h>

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define RDMA_LEN 4096


struct peer {
    DAT_IA_HANDLE ia;
    DAT_PZ_HANDLE pz;
    DAT_EVD_HANDLE cr, conn, dto;
    DAT_EP_HANDLE ep;
    char *buf;
    DAT_LMR_HANDLE lmr;
    DAT_LMR_CONTEXT lc;
    DAT_RMR_CONTEXT rc;
    struct sockaddr_storage addr; /* the IA's */
};

static void open_ia(struct peer *p, char *name)
{
    DAT_EVD_HANDLE async = DAT_HANDLE_NULL;
    PEER_CHECK(dat_ia_open(name, 8, &async, &p->ia), "dat_ia_open");
    DAT_IA_ATTR ia_attr;
    DAT_PROVIDER_ATTR pr_attr;
    PEER_CHECK(dat_ia_query(p->ia, NULL, DAT_IA_FIELD_ALL, &ia_attr, DAT_PROVIDER_FIELD_ALL, &pr_attr), "dat_ia_query");
    int ssp = 0;
    for (int i = 0; i < pr_attr.num_provider_specific_attr; i++)
        ssp |= strcmp(pr_attr.provider_specific_attr[i].name, DAT_IW_ATTR_SSP) == 0;
    if (!ssp)
        PEER_FAIL("the IA does not advertise %s", DAT_IW_ATTR_SSP);
    memcpy(&p->addr, ia_attr.ia_address_ptr,
           ia_attr.ia_address_ptr->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
                                                        : sizeof(struct sockaddr_in));
    PEER_CHECK(dat_pz_create(p->ia, &p->pz), "dat_pz_create");
    PEER_CHECK(dat_evd_create(p->ia, 4, DAT_HANDLE_NULL, DAT_EVD_CR_FLAG, &p->cr), "evd cr");
    PEER_CHECK(dat_evd_create(p->ia, 4, DAT_HANDLE_NULL, DAT_EVD_CONNECTION_FLAG, &p->conn), "evd conn");
    PEER_CHECK(dat_evd_create(p->ia, 16, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &p->dto), "evd dto");
    DAT_EP_ATTR a;
    memset(&a, 0, sizeof a);
    a.max_message_size = RDMA_LEN;
    a.max_rdma_size = RDMA_LEN;
    a.max_recv_dtos = 4;
    a.max_request_dtos = 4;
    a.max_recv_iov = 1;
    a.max_request_iov = 1;
    a.max_rdma_read_iov = 1;
    a.max_rdma_write_iov = 1;
    a.request_completion_flags = DAT_COMPLETION_DEFAULT_FLAG;
    a.recv_completion_flags = DAT_COMPLETION_DEFAULT_FLAG;
    PEER_CHECK(dat_ep_create(p->ia, p->pz, p->dto, p->dto, p->conn, &a, &p->ep), "dat_ep_create");
    p->buf = calloc(1, 2 * RDMA_LEN);
    if (p->buf == NULL)
        PEER_FAIL("out of memory");
    DAT_REGION_DESCRIPTION rd = {.for_va = p->buf};
    DAT_VLEN sz;
    DAT_VADDR va;
    PEER_CHECK(dat_lmr_create(p->ia, DAT_MEM_TYPE_VIRTUAL, rd, 2 * RDMA_LEN, p->pz, DAT_MEM_PRIV_ALL_FLAG,
                         DAT_VA_TYPE_VA, &p->lmr, &p->lc, &p->rc, &sz, &va),
          "dat_lmr_create");
}

static DAT_DTO_COMPLETION_EVENT_DATA wait_dto(struct peer *p, const char *what)
{
    DAT_EVENT ev = peer_wait_for(p->dto, DAT_DTO_COMPLETION_EVENT, what);
    if (ev.event_data.dto_completion_event_data.status != DAT_DTO_SUCCESS)
        PEER_FAIL("%s: DTO status %d", what, (int)ev.event_data.dto_completion_event_data.status);
    return ev.event_data.dto_completion_event_data;
}

static void post_recv(struct peer *p, size_t off, DAT_VLEN len, uint64_t ck)
{
    DAT_LMR_TRIPLET t = {.lmr_context = p->lc, .virtual_address = (DAT_VADDR)(uintptr_t)(p->buf + off),
                         .segment_length = len};
    PEER_CHECK(dat_ep_post_recv(p->ep, 1, &t, (DAT_DTO_COOKIE){.as_64 = ck}, DAT_COMPLETION_DEFAULT_FLAG),
          "dat_ep_post_recv");
}

static void post_send(struct peer *p, size_t off, DAT_VLEN len, uint64_t ck)
{
    DAT_LMR_TRIPLET t = {.lmr_context = p->lc, .virtual_address = (DAT_VADDR)(uintptr_t)(p->buf + off),
                         .segment_length = len};
    PEER_CHECK(dat_ep_post_send(p->ep, 1, &t, (DAT_DTO_COOKIE){.as_64 = ck}, DAT_COMPLETION_DEFAULT_FLAG),
          "dat_ep_post_send");
}

/* Blocking line exchange on the plain socket, bounded by 10 s. */
static void sock_read(int fd, char *buf, size_t n)
{
    size_t got = 0;
    for (int i = 0; i < 100 && got < n; i++) {
        struct pollfd pf = {.fd = fd, .events = POLLIN};
        if (poll(&pf, 1, 10000) != 1)
            PEER_FAIL("socket: nothing to read");
        ssize_t r = read(fd, buf + got, n - got);
        if (r <= 0)
            PEER_FAIL("socket: read %zd", r);
        got += (size_t)r;
    }
    if (got != n)
        PEER_FAIL("socket: short read");
}

static void close_peer(struct peer *p)
{
    PEER_CHECK(dat_ep_disconnect(p->ep, DAT_CLOSE_GRACEFUL_FLAG), "dat_ep_disconnect");
    peer_wait_for(p->conn, DAT_CONNECTION_EVENT_DISCONNECTED, "disconnected");
    PEER_CHECK(dat_ia_close(p->ia, DAT_CLOSE_ABRUPT_FLAG), "dat_ia_close");
    free(p->buf);
}

static int server(char *ia)
{
    peer_role = "server";
    struct peer p;
    memset(&p, 0, sizeof p);
    open_ia(&p, ia);
    /* A plain TCP listener on the IA's address, port chosen by the kernel. */
    int l = socket(p.addr.ss_family, SOCK_STREAM, 0);
    socklen_t al = p.addr.ss_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
    ((struct sockaddr_in *)&p.addr)->sin_port = 0; /* same offset for sin6_port */
    if (l < 0 || bind(l, (struct sockaddr *)&p.addr, al) != 0 || listen(l, 1) != 0)
        PEER_FAIL("listen: %m");
    socklen_t sl = al;
    getsockname(l, (struct sockaddr *)&p.addr, &sl);
    printf("ready %u\n", ntohs(((struct sockaddr_in *)&p.addr)->sin_port));
    fflush(stdout);
    struct pollfd pf = {.fd = l, .events = POLLIN};
    if (poll(&pf, 1, 20000) != 1)
        PEER_FAIL("no client");
    int fd = accept(l, NULL, NULL);
    close(l);
    char line[16];
    sock_read(fd, line, 6);
    if (memcmp(line, "HELLO\n", 6) != 0)
        PEER_FAIL("streaming mode: got %.6s", line);
    if (write(fd, "SSP\n", 4) != 4)
        PEER_FAIL("write: %m");

    post_recv(&p, 0, 64, 1);
    DAT_IW_SSP_HANDLE ssp;
    PEER_CHECK(dat_iw_ssp_create(p.ia, fd, p.ep, p.cr, "RDMA-OK\n", 8, &ssp), "dat_iw_ssp_create");
    DAT_IW_SSP_PARAM q;
    PEER_CHECK(dat_iw_ssp_query(ssp, DAT_IW_SSP_FIELD_ALL, &q), "dat_iw_ssp_query");
    if (q.socket_id != fd || q.ep_handle != p.ep || q.evd_handle != p.cr)
        PEER_FAIL("dat_iw_ssp_query: wrong parameters");
    DAT_EVENT ev = peer_wait_for(p.cr, DAT_CONNECTION_REQUEST_EVENT, "connection request");
    DAT_CR_ARRIVAL_EVENT_DATA *a = &ev.event_data.cr_arrival_event_data;
    if (a->sp_handle.psp_handle != (DAT_PSP_HANDLE)ssp)
        PEER_FAIL("CR from another service point");
    DAT_CR_PARAM crp;
    PEER_CHECK(dat_cr_query(a->cr_handle, DAT_CR_FIELD_ALL, &crp), "dat_cr_query");
    if (crp.private_data_size < 10 || memcmp(crp.private_data, "ssp-client", 10) != 0)
        PEER_FAIL("CR private data");
    PEER_CHECK(dat_iw_ssp_query(ssp, DAT_IW_SSP_FIELD_SSP_STATE, &q), "dat_iw_ssp_query");
    if (q.ssp_state != DAT_IW_SSP_STATE_NON_OPERATIONAL)
        PEER_FAIL("SSP still operational after its request");
    PEER_CHECK(dat_cr_accept(a->cr_handle, p.ep, 0, NULL), "dat_cr_accept");
    peer_wait_for(p.conn, DAT_CONNECTION_EVENT_ESTABLISHED, "established");
    fprintf(stderr, "server: SSP connection established\n");

    /* Our buffer's RMR triplet, then wait for the client's write + "done". */
    DAT_RMR_TRIPLET r = {.rmr_context = p.rc,
                         .virtual_address = (DAT_VADDR)(uintptr_t)(p.buf + RDMA_LEN),
                         .segment_length = RDMA_LEN};
    memcpy(p.buf + 128, &r, sizeof r);
    post_send(&p, 128, sizeof r, 2);
    /* The send's and the receive's completions share the EVD; their
     * order between the two queues is not defined. */
    int got_send = 0, got_recv = 0;
    for (int i = 0; i < 2; i++) {
        DAT_DTO_COMPLETION_EVENT_DATA d = wait_dto(&p, "send triplet / recv done");
        if (d.user_cookie.as_64 == 2) {
            got_send++;
        } else if (d.user_cookie.as_64 == 1) {
            got_recv++;
            if (d.transfered_length != 5 || memcmp(p.buf, "done", 5) != 0)
                PEER_FAIL("expected \"done\"");
        }
    }
    if (got_send != 1 || got_recv != 1)
        PEER_FAIL("expected one send and one receive completion");
    for (int i = 0; i < RDMA_LEN; i++)
        if ((unsigned char)p.buf[RDMA_LEN + i] != (unsigned char)(i * 7 + 1))
            PEER_FAIL("RDMA write: byte %d is 0x%02x", i, (unsigned char)p.buf[RDMA_LEN + i]);
    peer_wait_for(p.conn, DAT_CONNECTION_EVENT_DISCONNECTED, "client disconnect");
    PEER_CHECK(dat_iw_ssp_free(ssp), "dat_iw_ssp_free");
    PEER_CHECK(dat_ia_close(p.ia, DAT_CLOSE_ABRUPT_FLAG), "dat_ia_close");
    free(p.buf);
    fprintf(stderr, "server: %d bytes of RDMA write verified\n", RDMA_LEN);
    return 0;
}

static int client(char *ia, const char *host, const char *port)
{
    peer_role = "client";
    struct peer p;
    memset(&p, 0, sizeof p);
    open_ia(&p, ia);
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res;
    if (getaddrinfo(host, port, &hints, &res) != 0)
        PEER_FAIL("cannot resolve %s", host);
    int fd = socket(res->ai_family, SOCK_STREAM, 0);
    /* Through the IA: bind to its address. */
    struct sockaddr_storage la = p.addr;
    ((struct sockaddr_in *)&la)->sin_port = 0;
    if (fd < 0 || la.ss_family != res->ai_family ||
        bind(fd, (struct sockaddr *)&la, res->ai_addrlen) != 0 || connect(fd, res->ai_addr, res->ai_addrlen) != 0)
        PEER_FAIL("connect to %s:%s: %m", host, port);
    freeaddrinfo(res);
    if (write(fd, "HELLO\n", 6) != 6)
        PEER_FAIL("write: %m");
    char line[16];
    sock_read(fd, line, 4);
    if (memcmp(line, "SSP\n", 4) != 0)
        PEER_FAIL("streaming mode: got %.4s", line);
    sock_read(fd, line, 8); /* the SSP's final streaming-mode message */
    if (memcmp(line, "RDMA-OK\n", 8) != 0)
        PEER_FAIL("final streaming-mode message: got %.8s", line);

    post_recv(&p, 0, 64, 1);
    PEER_CHECK(dat_iw_socket_connect(p.ep, fd, PEER_WAIT_US, 10, "ssp-client"), "dat_iw_socket_connect");
    peer_wait_for(p.conn, DAT_CONNECTION_EVENT_ESTABLISHED, "established");
    fprintf(stderr, "client: SSP connection established\n");
    DAT_DTO_COMPLETION_EVENT_DATA d = wait_dto(&p, "recv triplet");
    DAT_RMR_TRIPLET r;
    if (d.transfered_length != sizeof r)
        PEER_FAIL("triplet length %u", (unsigned)d.transfered_length);
    memcpy(&r, p.buf, sizeof r);
    for (int i = 0; i < RDMA_LEN; i++)
        p.buf[RDMA_LEN + i] = (char)(i * 7 + 1);
    DAT_LMR_TRIPLET t = {.lmr_context = p.lc, .virtual_address = (DAT_VADDR)(uintptr_t)(p.buf + RDMA_LEN),
                         .segment_length = RDMA_LEN};
    PEER_CHECK(dat_ep_post_rdma_write(p.ep, 1, &t, (DAT_DTO_COOKIE){.as_64 = 3}, &r, DAT_COMPLETION_DEFAULT_FLAG),
          "dat_ep_post_rdma_write");
    wait_dto(&p, "rdma write");
    memcpy(p.buf + 256, "done", 5);
    post_send(&p, 256, 5, 4);
    wait_dto(&p, "send done");
    close_peer(&p);
    return 0;
}

int main(int argc, char **argv)
{
    char *ia = (char *)"softdat-lo";
    const char *host = NULL, *port = NULL;
    int mode = 0, o;
    while ((o = getopt(argc, argv, "scP:h:p:")) != -1) {
        switch (o) {
        case 's': mode = 's'; break;
        case 'c': mode = 'c'; break;
        case 'P': ia = optarg; break;
        case 'h': host = optarg; break;
        case 'p': port = optarg; break;
        default: return 2;
        }
    }
    if (mode == 's')
        return server(ia);
    if (mode == 'c' && host && port)
        return client(ia, host, port);
    fprintf(stderr, "usage: %s -s -P IA | -c -P IA -h HOST -p PORT\n", argv[0]);
    return 2;
}
