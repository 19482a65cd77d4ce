/* dat_cm_peer: a DAT consumer using only the public API (-ldat2), for the
 * two-process connection-management test (test/e2e/dat_cm.sh).
 *
 *   dat_cm_peer -s -P IA [-p PORT] [-n N]      server (no -p: any port)
 *   dat_cm_peer -c -P IA -h HOST -p PORT [-n N] client
 *
 * N rounds of: connect with 48 bytes of private data (1..48), the server
 * checks the CR event (conn_qual, psp_handle), adds 1 to each byte of the
 * CR's own buffer and accepts with it, the client checks the ESTABLISHED
 * pdata; the client disconnects gracefully (odd rounds) or the server
 * abruptly (even rounds); each side waits for exactly one DISCONNECTED and
 * resets its EP for the next round. Then one rejected round (pdata starts
 * with 0xEE; the reject carries "no"). The server prints "ready PORT" once
 * listening. Exit 0 on success. */
#include <dat2/udat.h>

#include "test/lib/peer.h"

#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PD_LEN 48


static void expect_quiet(DAT_EVD_HANDLE evd, const char *what)
{
    DAT_EVENT ev;
    DAT_COUNT n;
    DAT_RETURN rc = dat_evd_wait(evd, 100000, 1, &ev, &n);
    if (DAT_GET_TYPE(rc) != DAT_TIMEOUT_EXPIRED)
        PEER_FAIL("%s: unexpected event 0x%x (rc 0x%x)", what, (unsigned)ev.event_number, (unsigned)rc);
}

static DAT_EP_STATE state_of(DAT_EP_HANDLE ep)
{
    DAT_EP_STATE s;
    PEER_CHECK(dat_ep_get_status(ep, &s, NULL, NULL), "dat_ep_get_status");
    return s;
}

int main(int argc, char **argv)
{
    char *ia_name = (char[]){"softdat-lo"};
    const char *host = "127.0.0.1";
    int server = -1, rounds = 3, opt;
    DAT_CONN_QUAL port = 0;
    while ((opt = getopt(argc, argv, "scP:h:p:n:")) != -1) {
        switch (opt) {
        case 's': server = 1; break;
        case 'c': server = 0; break;
        case 'P': ia_name = optarg; break;
        case 'h': host = optarg; break;
        case 'p': port = strtoul(optarg, NULL, 0); break;
        case 'n': rounds = atoi(optarg); break;
        default: return 2;
        }
    }
    if (server < 0 || (!server && port == 0)) {
        fprintf(stderr, "usage: %s -s|-c -P IA [-h HOST] -p PORT [-n N]\n", argv[0]);
        return 2;
    }
    peer_role = server ? "server" : "client";

    DAT_IA_HANDLE ia;
    DAT_EVD_HANDLE async = DAT_HANDLE_NULL, cr_evd, conn_evd, dto_evd;
    DAT_PZ_HANDLE pz;
    DAT_EP_HANDLE ep;
    PEER_CHECK(dat_ia_open(ia_name, 8, &async, &ia), "dat_ia_open");
    PEER_CHECK(dat_pz_create(ia, &pz), "dat_pz_create");
    PEER_CHECK(dat_evd_create(ia, 8, DAT_HANDLE_NULL, DAT_EVD_CR_FLAG, &cr_evd), "dat_evd_create(CR)");
    PEER_CHECK(dat_evd_create(ia, 8, DAT_HANDLE_NULL, DAT_EVD_CONNECTION_FLAG, &conn_evd), "dat_evd_create(CONN)");
    PEER_CHECK(dat_evd_create(ia, 8, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &dto_evd), "dat_evd_create(DTO)");
    PEER_CHECK(dat_ep_create(ia, pz, dto_evd, dto_evd, conn_evd, NULL, &ep), "dat_ep_create");

    unsigned char pd[PD_LEN];
    if (server) {
        DAT_PSP_HANDLE psp;
        if (port == 0)
            PEER_CHECK(dat_psp_create_any(ia, &port, cr_evd, DAT_PSP_CONSUMER_FLAG, &psp), "dat_psp_create_any");
        else
            PEER_CHECK(dat_psp_create(ia, port, cr_evd, DAT_PSP_CONSUMER_FLAG, &psp), "dat_psp_create");
        printf("ready %llu\n", (unsigned long long)port);
        fflush(stdout);
        for (int r = 0; r <= rounds; r++) {
            DAT_EVENT ev = peer_wait_for(cr_evd, DAT_CONNECTION_REQUEST_EVENT, "CR");
            DAT_CR_ARRIVAL_EVENT_DATA *d = &ev.event_data.cr_arrival_event_data;
            if (d->conn_qual != port || d->sp_handle.psp_handle != psp)
                PEER_FAIL("CR event: conn_qual %llu psp %p", (unsigned long long)d->conn_qual,
                     (void *)d->sp_handle.psp_handle);
            DAT_CR_PARAM cp;
            PEER_CHECK(dat_cr_query(d->cr_handle, DAT_CR_FIELD_ALL, &cp), "dat_cr_query");
            if (cp.private_data_size != PD_LEN)
                PEER_FAIL("CR pdata size %d", cp.private_data_size);
            unsigned char *b = cp.private_data;
            if (r == rounds) {
                if (b[0] != 0xEE)
                    PEER_FAIL("reject round: pdata[0] = %u", b[0]);
                char no[3] = "no";
                PEER_CHECK(dat_cr_reject(d->cr_handle, 3, no), "dat_cr_reject");
                break;
            }
            for (int i = 0; i < PD_LEN; i++) {
                if (b[i] != (unsigned char)(i + 1 + r))
                    PEER_FAIL("CR pdata[%d] = %u", i, b[i]);
                b[i]++;
            }
            PEER_CHECK(dat_cr_accept(d->cr_handle, ep, PD_LEN, cp.private_data), "dat_cr_accept");
            peer_wait_for(conn_evd, DAT_CONNECTION_EVENT_ESTABLISHED, "ESTABLISHED");
            DAT_EP_STATE st = state_of(ep); /* the client may already be closing */
            if (st != DAT_EP_STATE_CONNECTED && st != DAT_EP_STATE_DISCONNECTED)
                PEER_FAIL("state %d after ESTABLISHED", (int)st);
            if (r % 2 == 0)
                PEER_CHECK(dat_ep_disconnect(ep, DAT_CLOSE_ABRUPT_FLAG), "dat_ep_disconnect");
            peer_wait_for(conn_evd, DAT_CONNECTION_EVENT_DISCONNECTED, "DISCONNECTED");
            PEER_CHECK(dat_ep_disconnect(ep, DAT_CLOSE_GRACEFUL_FLAG), "dat_ep_disconnect (again)");
            expect_quiet(conn_evd, "after DISCONNECTED");
            PEER_CHECK(dat_ep_reset(ep), "dat_ep_reset");
        }
        PEER_CHECK(dat_psp_free(psp), "dat_psp_free");
    } else {
        struct addrinfo hints, *ai;
        memset(&hints, 0, sizeof hints);
        hints.ai_socktype = SOCK_STREAM;
        if (getaddrinfo(host, NULL, &hints, &ai) != 0)
            PEER_FAIL("cannot resolve %s", host);
        for (int r = 0; r <= rounds; r++) {
            for (int i = 0; i < PD_LEN; i++)
                pd[i] = (unsigned char)(i + 1 + r);
            if (r == rounds)
                pd[0] = 0xEE;
            PEER_CHECK(dat_ep_connect(ep, (DAT_IA_ADDRESS_PTR)ai->ai_addr, port, PEER_WAIT_US, PD_LEN, pd,
                                 DAT_QOS_BEST_EFFORT, DAT_CONNECT_DEFAULT_FLAG),
                  "dat_ep_connect");
            if (r == rounds) {
                DAT_EVENT ev = peer_wait_for(conn_evd, DAT_CONNECTION_EVENT_PEER_REJECTED, "PEER_REJECTED");
                DAT_CONNECTION_EVENT_DATA *c = &ev.event_data.connect_event_data;
                if (c->private_data_size != 3 || memcmp(c->private_data, "no", 3) != 0)
                    PEER_FAIL("reject pdata (%d bytes)", c->private_data_size);
                break;
            }
            DAT_EVENT ev = peer_wait_for(conn_evd, DAT_CONNECTION_EVENT_ESTABLISHED, "ESTABLISHED");
            DAT_CONNECTION_EVENT_DATA *c = &ev.event_data.connect_event_data;
            if (c->ep_handle != ep || c->private_data_size != PD_LEN)
                PEER_FAIL("ESTABLISHED: ep %p pdata size %d", (void *)c->ep_handle, c->private_data_size);
            for (int i = 0; i < PD_LEN; i++)
                if (((unsigned char *)c->private_data)[i] != (unsigned char)(i + 2 + r))
                    PEER_FAIL("accept pdata[%d]", i);
            DAT_EP_PARAM q;
            PEER_CHECK(dat_ep_query(ep, DAT_EP_FIELD_ALL, &q), "dat_ep_query");
            /* (the server may already have disconnected: no state check) */
            if (q.remote_port_qual != port)
                PEER_FAIL("ep_query: remote port %llu", (unsigned long long)q.remote_port_qual);
            if (r % 2 == 1)
                PEER_CHECK(dat_ep_disconnect(ep, DAT_CLOSE_GRACEFUL_FLAG), "dat_ep_disconnect");
            peer_wait_for(conn_evd, DAT_CONNECTION_EVENT_DISCONNECTED, "DISCONNECTED");
            PEER_CHECK(dat_ep_disconnect(ep, DAT_CLOSE_ABRUPT_FLAG), "dat_ep_disconnect (again)");
            expect_quiet(conn_evd, "after DISCONNECTED");
            PEER_CHECK(dat_ep_reset(ep), "dat_ep_reset");
        }
        freeaddrinfo(ai);
    }
    PEER_CHECK(dat_ep_free(ep), "dat_ep_free");
    PEER_CHECK(dat_evd_free(dto_evd), "dat_evd_free");
    PEER_CHECK(dat_evd_free(conn_evd), "dat_evd_free");
    PEER_CHECK(dat_evd_free(cr_evd), "dat_evd_free");
    PEER_CHECK(dat_pz_free(pz), "dat_pz_free");
    PEER_CHECK(dat_ia_close(ia, DAT_CLOSE_GRACEFUL_FLAG), "dat_ia_close");
    printf("%s: ok\n", peer_role);
    return 0;
}
