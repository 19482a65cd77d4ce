/* dat_srq_peer: one side of the shared-receive-queue end-to-end test,
 * using only the public DAT API (registry + dat.conf, DAT_OVERRIDE).
 *
 *   dat_srq_peer server IA PORT NCLIENTS NMSG
 *   dat_srq_peer client IA HOST PORT ID NMSG
 *
 * Server: one SRQ holding NCLIENTS*NMSG buffers of SLOT bytes, NCLIENTS
 * SRQ EPs sharing one recv EVD, accepted as the clients arrive. Low
 * watermark = half the buffers. Nothing is re-posted until the low
 * watermark event has arrived (exactly one per arming, dat_handle = the
 * SRQ, reason DAT_SRQ_LOW_WATERMARK_EVENT); then every reaped buffer is
 * re-posted. Every receive is checked: success, transfered_length, bytes
 * (client id, message number, pattern), per-connection order, the EP it
 * names is the one that client is connected to. available/outstanding
 * counts are checked against what the server knows at the end. Each
 * client disconnect must give one DISCONNECTED on the connect EVD and
 * exactly one DAT_ASYNC_ERROR_EP_BROKEN for that EP on the async EVD.
 *
 * Client: connects (private data = its id), sends NMSG messages of varying
 * length (each completion checked), then disconnects gracefully.
 *
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

#include "test/lib/peer.h"


#define SLOT 4096
#define MAXC 64
/* The SRQ low watermark event: DAT defines only the reason; softdat posts
 * it with this event number (lib/provider/srq.h). */
#define SRQ_EVENT DAT_ASYNC_ERROR_PROVIDER_INTERNAL_ERROR

static uint32_t msg_len(int id, int i)
{
    return 16 + (uint32_t)((id * 131 + i * 97) % (SLOT - 16));
}

static unsigned char pat(int id, int i, uint32_t j)
{
    return (unsigned char)(id * 31 + i * 7 + j);
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void ep_attr(DAT_EP_ATTR *a, bool srq)
{
    memset(a, 0, sizeof *a);
    a->service_type = DAT_SERVICE_TYPE_RC;
    a->max_message_size = SLOT;
    a->max_rdma_size = SLOT;
    a->qos = DAT_QOS_BEST_EFFORT;
    a->recv_completion_flags = DAT_COMPLETION_DEFAULT_FLAG;
    a->request_completion_flags = DAT_COMPLETION_DEFAULT_FLAG;
    a->max_recv_dtos = srq ? DAT_HW_DEFAULT : 4;
    a->max_request_dtos = 16;
    a->max_recv_iov = 1;
    a->max_request_iov = 1;
    a->srq_soft_hw = DAT_HW_DEFAULT;
}

/* ------------------------------------------------------------ server */

/* Dequeue every connection event; count DISCONNECTED per EP. */
static bool drain_conn(DAT_EVD_HANDLE conn, const DAT_EP_HANDLE *eps, int nc, int *disc, int *ndisc)
{
    bool any = false;
    DAT_EVENT ev;
    while (dat_evd_dequeue(conn, &ev) == DAT_SUCCESS) {
        any = true;
        DAT_EP_HANDLE e = ev.event_data.connect_event_data.ep_handle;
        int k = 0;
        while (k < nc && eps[k] != e)
            k++;
        PEER_EXPECT(k < nc, "connection event 0x%x for an unknown EP", ev.event_number);
        if (k == nc || ev.event_number == DAT_CONNECTION_EVENT_ESTABLISHED)
            continue;
        PEER_EXPECT(ev.event_number == DAT_CONNECTION_EVENT_DISCONNECTED, "ep %d: event 0x%x", k, ev.event_number);
        disc[k]++;
        (*ndisc)++;
    }
    return any;
}

static int server(char *ia_name, DAT_CONN_QUAL port, int nc, int nm)
{
    peer_role = "server";
    if (nc < 1 || nc > MAXC || nm < 2 || nc * nm > 4096) {
        printf("FAIL bad arguments\n");
        return 1;
    }
    int total = nc * nm;
    DAT_IA_HANDLE ia;
    DAT_EVD_HANDLE async = DAT_HANDLE_NULL, cr, conn, req, rcv;
    DAT_PZ_HANDLE pz;
    PEER_MUST(dat_ia_open(ia_name, 64, &async, &ia));
    PEER_MUST(dat_pz_create(ia, &pz));
    PEER_MUST(dat_evd_create(ia, nc, DAT_HANDLE_NULL, DAT_EVD_CR_FLAG, &cr));
    PEER_MUST(dat_evd_create(ia, 2 * nc, DAT_HANDLE_NULL, DAT_EVD_CONNECTION_FLAG, &conn));
    PEER_MUST(dat_evd_create(ia, 16, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &req));
    PEER_MUST(dat_evd_create(ia, total, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &rcv));
    char *buf = aligned_alloc(4096, (size_t)total * SLOT);
    memset(buf, 0, (size_t)total * SLOT);
    DAT_LMR_HANDLE lmr;
    DAT_LMR_CONTEXT lc;
    peer_register(ia, pz, buf, (DAT_VLEN)total * SLOT, DAT_MEM_PRIV_LOCAL_WRITE_FLAG | DAT_MEM_PRIV_LOCAL_READ_FLAG,
                  &lmr, &lc, NULL);
    DAT_SRQ_ATTR sa = {.max_recv_dtos = total, .max_recv_iov = 1, .low_watermark = DAT_SRQ_LW_DEFAULT};
    DAT_SRQ_HANDLE srq;
    PEER_MUST(dat_srq_create(ia, pz, &sa, &srq));
    for (int i = 0; i < total; i++) {
        DAT_LMR_TRIPLET t = peer_triplet(lc, buf + (size_t)i * SLOT, SLOT);
        DAT_DTO_COOKIE c = {.as_64 = (uint64_t)i};
        PEER_MUST(dat_srq_post_recv(srq, 1, &t, c));
    }
    DAT_SRQ_PARAM q;
    PEER_MUST(dat_srq_query(srq, DAT_SRQ_FIELD_ALL, &q));
    PEER_EXPECT(q.srq_state == DAT_SRQ_STATE_OPERATIONAL, "srq_state %d", q.srq_state);
    PEER_EXPECT(q.available_dto_count == total && q.outstanding_dto_count == total, "after posts: avail %d outst %d",
          q.available_dto_count, q.outstanding_dto_count);
    int lw = total / 2;
    PEER_MUST(dat_srq_set_lw(srq, lw));
    DAT_EP_HANDLE eps[MAXC];
    DAT_EP_ATTR a;
    ep_attr(&a, true);
    for (int i = 0; i < nc; i++)
        PEER_MUST(dat_ep_create_with_srq(ia, pz, rcv, req, conn, srq, &a, &eps[i]));
    DAT_PSP_HANDLE psp;
    PEER_MUST(dat_psp_create(ia, port, cr, DAT_PSP_CONSUMER_FLAG, &psp));
    printf("listening\n");
    fflush(stdout);

    int client_of[MAXC];        /* EP index -> client id (-1: not yet) */
    int next_idx[MAXC];         /* per client: next message number */
    int broken[MAXC], disc[MAXC];
    for (int i = 0; i < MAXC; i++)
        client_of[i] = -1, next_idx[i] = 0, broken[i] = disc[i] = 0;
    int accepted = 0, received = 0, ndisc = 0, nbroken = 0, lw_events = 0;
    int reaped[4096], nreaped = 0; /* cookies waiting for the watermark */
    bool reposting = false;
    double deadline = now() + 30;
    while ((received < total || ndisc < nc || nbroken < nc) && now() < deadline) {
        bool idle = true;
        DAT_EVENT ev;
        if (accepted < nc && dat_evd_dequeue(cr, &ev) == DAT_SUCCESS) {
            idle = false;
            PEER_EXPECT(ev.event_number == DAT_CONNECTION_REQUEST_EVENT, "cr event 0x%x", ev.event_number);
            PEER_MUST(dat_cr_accept(ev.event_data.cr_arrival_event_data.cr_handle, eps[accepted], 0, NULL));
            accepted++;
        }
        if (drain_conn(conn, eps, nc, disc, &ndisc))
            idle = false;
        while (dat_evd_dequeue(async, &ev) == DAT_SUCCESS) {
            idle = false;
            const DAT_ASYNCH_ERROR_EVENT_DATA *d = &ev.event_data.asynch_error_event_data;
            if (ev.event_number == SRQ_EVENT && d->dat_handle == srq) {
                PEER_EXPECT(d->reason == DAT_SRQ_LOW_WATERMARK_EVENT, "srq async reason %d", d->reason);
                lw_events++;
                /* Fewer than lw on the SRQ when it fired. */
                PEER_MUST(dat_srq_query(srq, DAT_SRQ_FIELD_ALL, &q));
                PEER_EXPECT(q.available_dto_count < lw || reposting, "lw event with %d available", q.available_dto_count);
                reposting = true;
                continue;
            }
            PEER_EXPECT(ev.event_number == DAT_ASYNC_ERROR_EP_BROKEN, "async event 0x%x", ev.event_number);
            int k = 0;
            while (k < nc && eps[k] != d->dat_handle)
                k++;
            PEER_EXPECT(k < nc, "EP_BROKEN for an unknown handle");
            if (k < nc) {
                broken[k]++;
                nbroken++;
                /* DISCONNECTED is queued on the connect EVD before
                 * EP_BROKEN: it may just not have been dequeued yet. */
                if (disc[k] == 0)
                    drain_conn(conn, eps, nc, disc, &ndisc);
                PEER_EXPECT(disc[k] == 1, "ep %d: EP_BROKEN without its DISCONNECTED first", k);
                PEER_EXPECT(broken[k] == 1, "ep %d: %d EP_BROKEN events", k, broken[k]);
            }
        }
        while (dat_evd_dequeue(rcv, &ev) == DAT_SUCCESS) {
            idle = false;
            const DAT_DTO_COMPLETION_EVENT_DATA *d = &ev.event_data.dto_completion_event_data;
            PEER_EXPECT(ev.event_number == DAT_DTO_COMPLETION_EVENT, "recv event 0x%x", ev.event_number);
            PEER_EXPECT(d->status == DAT_DTO_SUCCESS, "recv status %d", d->status);
            PEER_EXPECT(d->operation == DAT_DTO_RECEIVE, "operation %d", d->operation);
            uint64_t c = d->user_cookie.as_64;
            PEER_EXPECT(c < (uint64_t)total, "cookie %llu", (unsigned long long)c);
            if (d->status != DAT_DTO_SUCCESS || c >= (uint64_t)total)
                continue;
            const unsigned char *m = (unsigned char *)buf + c * SLOT;
            int id = m[0] | m[1] << 8, idx = m[2] | m[3] << 8;
            PEER_EXPECT(id >= 0 && id < nc, "client id %d", id);
            if (id < 0 || id >= nc)
                continue;
            int k = 0;
            while (k < nc && eps[k] != d->ep_handle)
                k++;
            PEER_EXPECT(k < nc, "receive on an unknown EP");
            if (k < nc) {
                if (client_of[k] < 0)
                    client_of[k] = id;
                PEER_EXPECT(client_of[k] == id, "ep %d carries clients %d and %d", k, client_of[k], id);
            }
            PEER_EXPECT(idx == next_idx[id], "client %d: message %d, want %d", id, idx, next_idx[id]);
            next_idx[id] = idx + 1;
            uint32_t len = msg_len(id, idx);
            PEER_EXPECT(d->transfered_length == len, "client %d msg %d: length %u, want %u", id, idx,
                  (unsigned)d->transfered_length, len);
            for (uint32_t j = 4; j < len && j < d->transfered_length; j++)
                if (m[j] != pat(id, idx, j)) {
                    PEER_EXPECT(0, "client %d msg %d: byte %u is 0x%02x, want 0x%02x", id, idx, j, m[j], pat(id, idx, j));
                    break;
                }
            received++;
            reaped[nreaped++] = (int)c;
        }
        if (reposting && nreaped > 0) {
            for (int i = 0; i < nreaped; i++) {
                DAT_LMR_TRIPLET t = peer_triplet(lc, buf + (size_t)reaped[i] * SLOT, SLOT);
                DAT_DTO_COOKIE c = {.as_64 = (uint64_t)reaped[i]};
                memset(buf + (size_t)reaped[i] * SLOT, 0, SLOT);
                PEER_MUST(dat_srq_post_recv(srq, 1, &t, c));
            }
            nreaped = 0;
        }
        if (idle)
            usleep(500);
    }
    PEER_EXPECT(received == total, "received %d of %d messages", received, total);
    PEER_EXPECT(ndisc == nc, "%d DISCONNECTED events, want %d", ndisc, nc);
    PEER_EXPECT(nbroken == nc, "%d EP_BROKEN events, want %d", nbroken, nc);
    PEER_EXPECT(lw_events == 1, "%d low watermark events, want 1", lw_events);
    for (int i = 0; i < nc; i++)
        PEER_EXPECT(next_idx[i] == nm, "client %d: %d messages", i, next_idx[i]);
    /* Nothing more arrives on the async EVD (one EP_BROKEN per EP). */
    usleep(100000);
    DAT_EVENT ev;
    while (dat_evd_dequeue(async, &ev) == DAT_SUCCESS)
        PEER_EXPECT(0, "extra async event 0x%x", ev.event_number);
    /* Every completion was reaped: outstanding == available. */
    PEER_MUST(dat_srq_query(srq, DAT_SRQ_FIELD_ALL, &q));
    PEER_EXPECT(q.available_dto_count == total - nreaped && q.outstanding_dto_count == q.available_dto_count,
          "end: avail %d outst %d, want %d", q.available_dto_count, q.outstanding_dto_count, total - nreaped);
    PEER_EXPECT(dat_srq_free(srq) != DAT_SUCCESS, "srq_free with EPs succeeded");
    PEER_MUST(dat_psp_free(psp));
    for (int i = 0; i < nc; i++)
        PEER_MUST(dat_ep_free(eps[i]));
    PEER_MUST(dat_srq_free(srq));
    PEER_MUST(dat_lmr_free(lmr));
    PEER_MUST(dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG));
    free(buf);
    printf("server: %d messages from %d clients, %d low watermark event, %d EP_BROKEN\n", received, nc,
           lw_events, nbroken);
    return peer_failures ? 1 : 0;
}

/* ------------------------------------------------------------ client */

static int client(char *ia_name, const char *host, DAT_CONN_QUAL port, int id, int nm)
{
    peer_role = "client";
    DAT_IA_HANDLE ia;
    DAT_EVD_HANDLE async = DAT_HANDLE_NULL, conn, req, rcv;
    DAT_PZ_HANDLE pz;
    PEER_MUST(dat_ia_open(ia_name, 16, &async, &ia));
    PEER_MUST(dat_pz_create(ia, &pz));
    PEER_MUST(dat_evd_create(ia, 4, DAT_HANDLE_NULL, DAT_EVD_CONNECTION_FLAG, &conn));
    PEER_MUST(dat_evd_create(ia, 16, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &req));
    PEER_MUST(dat_evd_create(ia, 4, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &rcv));
    char *buf = aligned_alloc(4096, SLOT);
    DAT_LMR_HANDLE lmr;
    DAT_LMR_CONTEXT lc;
    peer_register(ia, pz, buf, SLOT, DAT_MEM_PRIV_LOCAL_READ_FLAG, &lmr, &lc, NULL);
    DAT_EP_ATTR a;
    ep_attr(&a, false);
    DAT_EP_HANDLE ep;
    PEER_MUST(dat_ep_create(ia, pz, rcv, req, conn, &a, &ep));
    struct sockaddr_in sin;
    memset(&sin, 0, sizeof sin);
    sin.sin_family = AF_INET;
    if (inet_pton(AF_INET, host, &sin.sin_addr) != 1) {
        printf("FAIL client: bad host %s\n", host);
        return 1;
    }
    uint32_t pd = htonl((uint32_t)id);
    PEER_MUST(dat_ep_connect(ep, (DAT_IA_ADDRESS_PTR)&sin, port, PEER_WAIT_US, sizeof pd, &pd, DAT_QOS_BEST_EFFORT,
                        DAT_CONNECT_DEFAULT_FLAG));
    DAT_EVENT ev = peer_wait(conn, "ESTABLISHED");
    if (ev.event_number != DAT_CONNECTION_EVENT_ESTABLISHED) {
        printf("FAIL client %d: connection event 0x%x\n", id, ev.event_number);
        return 1;
    }
    for (int i = 0; i < nm; i++) {
        uint32_t len = msg_len(id, i);
        buf[0] = (char)(id & 0xff), buf[1] = (char)(id >> 8), buf[2] = (char)(i & 0xff), buf[3] = (char)(i >> 8);
        for (uint32_t j = 4; j < len; j++)
            buf[j] = (char)pat(id, i, j);
        DAT_LMR_TRIPLET t = peer_triplet(lc, buf, len);
        DAT_DTO_COOKIE c = {.as_64 = (uint64_t)i};
        PEER_MUST(dat_ep_post_send(ep, 1, &t, c, DAT_COMPLETION_DEFAULT_FLAG));
        ev = peer_wait(req, "send completion");
        const DAT_DTO_COMPLETION_EVENT_DATA *d = &ev.event_data.dto_completion_event_data;
        PEER_EXPECT(ev.event_number == DAT_DTO_COMPLETION_EVENT && d->status == DAT_DTO_SUCCESS &&
                  d->user_cookie.as_64 == (uint64_t)i && d->transfered_length == len,
              "send %d: event 0x%x status %d length %u", i, ev.event_number, d->status, (unsigned)d->transfered_length);
    }
    PEER_MUST(dat_ep_disconnect(ep, DAT_CLOSE_GRACEFUL_FLAG));
    ev = peer_wait(conn, "DISCONNECTED");
    PEER_EXPECT(ev.event_number == DAT_CONNECTION_EVENT_DISCONNECTED, "client %d: event 0x%x", id, ev.event_number);
    PEER_MUST(dat_ep_free(ep));
    PEER_MUST(dat_lmr_free(lmr));
    PEER_MUST(dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG));
    free(buf);
    printf("client %d: %d messages sent\n", id, nm);
    return peer_failures ? 1 : 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc == 6 && strcmp(argv[1], "server") == 0)
        return server(argv[2], (DAT_CONN_QUAL)strtoul(argv[3], NULL, 10), atoi(argv[4]), atoi(argv[5]));
    if (argc == 7 && strcmp(argv[1], "client") == 0)
        return client(argv[2], argv[3], (DAT_CONN_QUAL)strtoul(argv[4], NULL, 10), atoi(argv[5]), atoi(argv[6]));
    fprintf(stderr, "usage: %s server IA PORT NCLIENTS NMSG | client IA HOST PORT ID NMSG\n", argv[0]);
    return 2;
}
