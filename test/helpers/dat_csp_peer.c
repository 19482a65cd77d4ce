/* dat_csp_peer: a DAT consumer of the CSP model and of dat_cr_handoff,
 * for the two-process test test/e2e/dat_csp.sh.
 *
 *   dat_csp_peer -s -P IA                  server: prints "ready PORT"
 *   dat_csp_peer -c -P IA -h HOST -p PORT  client
 *
 * The server binds a CSP to its IA's address with port 0 (we pick one)
 * and checks dat_csp_query; it also has a PSP and an RSP on ports of its
 * own. The client dat_ep_common_connect()s to HOST:PORT four times with
 * 32 bytes of private data (byte 0 = the round):
 *   round 0: the server accepts the CR from the CSP event;
 *   round 1: the server hands the CR off to its PSP, checks the old CR is
 *            dead, and accepts the new one from the PSP's EVD;
 *   round 2: the same to its RSP, accepted with the RSP's own EP;
 *   round 3: the server rejects with "no".
 * Accepts send the CR's private data back with each byte + 1; the client
 * checks it, disconnects (graceful, even rounds) or waits for the server's
 * abrupt disconnect (odd rounds).
 *
 * Debian's libdat2 exports neither dat_csp_* nor dat_ep_common_connect: the
 * helper looks them up with dlsym and, when absent, calls our provider's
 * slots through the DAT_PROVIDER * every handle of ours starts with (the
 * IA handle it passes is the registry's, which the provider maps). */
#include <dat2/udat.h>

#include "test/lib/peer.h"
#include <dat2/dat_registry.h> /* DAT_PROVIDER: the table behind every handle */

#include <dlfcn.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PD_LEN 32
#define ROUNDS 4


/* ---- the calls Debian's registry does not export */
typedef DAT_RETURN (*csp_create_fn)(DAT_IA_HANDLE, DAT_COMM *, DAT_IA_ADDRESS_PTR, DAT_EVD_HANDLE,
                                    DAT_CSP_HANDLE *);
typedef DAT_RETURN (*csp_query_fn)(DAT_CSP_HANDLE, DAT_CSP_PARAM_MASK, DAT_CSP_PARAM *);
typedef DAT_RETURN (*csp_free_fn)(DAT_CSP_HANDLE);
typedef DAT_RETURN (*common_connect_fn)(DAT_EP_HANDLE, DAT_IA_ADDRESS_PTR, DAT_TIMEOUT, DAT_COUNT,
                                        const DAT_PVOID);
static csp_create_fn p_csp_create;
static csp_query_fn p_csp_query;
static csp_free_fn p_csp_free;
static common_connect_fn p_common_connect;

/* `obj`: any handle of ours (an EVD), whose first word is our table. */
static void resolve(DAT_HANDLE obj)
{
    DAT_PROVIDER *prov = *(DAT_PROVIDER **)obj;
    void *f;
    if ((f = dlsym(RTLD_DEFAULT, "dat_csp_create")) != NULL) {
        *(void **)&p_csp_create = f;
        *(void **)&p_csp_query = dlsym(RTLD_DEFAULT, "dat_csp_query");
        *(void **)&p_csp_free = dlsym(RTLD_DEFAULT, "dat_csp_free");
        *(void **)&p_common_connect = dlsym(RTLD_DEFAULT, "dat_ep_common_connect");
        fprintf(stderr, "%s: CSP calls through the registry\n", peer_role);
    } else {
        p_csp_create = prov->csp_create_func;
        p_csp_query = prov->csp_query_func;
        p_csp_free = prov->csp_free_func;
        p_common_connect = prov->ep_common_connect_func;
        fprintf(stderr, "%s: registry lacks dat_csp_*: calling the provider table\n", peer_role);
    }
    if (!p_csp_create || !p_csp_query || !p_csp_free || !p_common_connect)
        PEER_FAIL("CSP calls missing");
}

static unsigned port_of(const struct sockaddr *sa)
{
    return ntohs(sa->sa_family == AF_INET6 ? ((const struct sockaddr_in6 *)sa)->sin6_port
                                           : ((const struct sockaddr_in *)sa)->sin_port);
}

/* A CR event on evd from sp on port; its CR after checking the pdata. */
static DAT_CR_HANDLE take_cr(DAT_EVD_HANDLE evd, DAT_HANDLE sp, DAT_CONN_QUAL port, int round, DAT_CR_PARAM *cp)
{
    DAT_EVENT ev = peer_wait_for(evd, DAT_CONNECTION_REQUEST_EVENT, "CR");
    DAT_CR_ARRIVAL_EVENT_DATA *d = &ev.event_data.cr_arrival_event_data;
    if (d->conn_qual != port || d->sp_handle.psp_handle != sp)
        PEER_FAIL("round %d: CR event conn_qual %llu sp %p (want %llu %p)", round, (unsigned long long)d->conn_qual,
             (void *)d->sp_handle.psp_handle, (unsigned long long)port, (void *)sp);
    PEER_CHECK(dat_cr_query(d->cr_handle, DAT_CR_FIELD_ALL, cp), "dat_cr_query");
    const unsigned char *b = cp->private_data;
    if (cp->private_data_size != PD_LEN || b[0] != round)
        PEER_FAIL("round %d: CR pdata size %d first byte %u", round, cp->private_data_size, b[0]);
    for (int i = 1; i < PD_LEN; i++)
        if (b[i] != (unsigned char)(i * 7 + round))
            PEER_FAIL("round %d: CR pdata[%d] = %u", round, i, b[i]);
    if (cp->remote_port_qual == 0 || cp->remote_ia_address_ptr == NULL ||
        port_of(cp->remote_ia_address_ptr) != cp->remote_port_qual)
        PEER_FAIL("round %d: CR remote port %llu", round, (unsigned long long)cp->remote_port_qual);
    return d->cr_handle;
}

static void accept_cr(DAT_CR_HANDLE cr, DAT_EP_HANDLE ep, DAT_CR_PARAM *cp, DAT_EVD_HANDLE conn_evd)
{
    unsigned char *b = cp->private_data;
    for (int i = 0; i < PD_LEN; i++)
        b[i]++;
    PEER_CHECK(dat_cr_accept(cr, ep, PD_LEN, b), "dat_cr_accept");
    peer_wait_for(conn_evd, DAT_CONNECTION_EVENT_ESTABLISHED, "ESTABLISHED");
}

static void server(const char *ia_name)
{
    DAT_IA_HANDLE ia;
    DAT_EVD_HANDLE async = DAT_HANDLE_NULL, csp_evd, psp_evd, rsp_evd, conn_evd, dto_evd;
    DAT_PZ_HANDLE pz;
    DAT_EP_HANDLE ep, rep;
    PEER_CHECK(dat_ia_open((DAT_NAME_PTR)ia_name, 8, &async, &ia), "dat_ia_open");
    PEER_CHECK(dat_pz_create(ia, &pz), "dat_pz_create");
    PEER_CHECK(dat_evd_create(ia, 8, DAT_HANDLE_NULL, DAT_EVD_CR_FLAG, &csp_evd), "dat_evd_create(CSP)");
    PEER_CHECK(dat_evd_create(ia, 8, DAT_HANDLE_NULL, DAT_EVD_CR_FLAG, &psp_evd), "dat_evd_create(PSP)");
    PEER_CHECK(dat_evd_create(ia, 8, DAT_HANDLE_NULL, DAT_EVD_CR_FLAG, &rsp_evd), "dat_evd_create(RSP)");
    PEER_CHECK(dat_evd_create(ia, 8, DAT_HANDLE_NULL, DAT_EVD_CONNECTION_FLAG, &conn_evd), "dat_evd_create(CONN)");
    PEER_CHECK(dat_evd_create(ia, 8, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &dto_evd), "dat_evd_create(DTO)");
    PEER_CHECK(dat_ep_create(ia, pz, dto_evd, dto_evd, conn_evd, NULL, &ep), "dat_ep_create");
    PEER_CHECK(dat_ep_create(ia, pz, dto_evd, dto_evd, conn_evd, NULL, &rep), "dat_ep_create(RSP EP)");
    resolve(csp_evd);

    /* The CSP: the IA's address, port 0 (ours to pick). */
    DAT_IA_ATTR ia_attr;
    PEER_CHECK(dat_ia_query(ia, NULL, DAT_IA_FIELD_IA_ADDRESS_PTR, &ia_attr, 0, NULL), "dat_ia_query");
    struct sockaddr_storage addr;
    memset(&addr, 0, sizeof addr);
    const struct sockaddr *ia_sa = ia_attr.ia_address_ptr;
    memcpy(&addr, ia_sa, ia_sa->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in));
    if (addr.ss_family == AF_INET6)
        ((struct sockaddr_in6 *)&addr)->sin6_port = 0;
    else
        ((struct sockaddr_in *)&addr)->sin_port = 0;
    DAT_COMM comm = {addr.ss_family, SOCK_STREAM, IPPROTO_TCP};
    DAT_CSP_HANDLE csp;
    PEER_CHECK(p_csp_create(ia, &comm, (DAT_IA_ADDRESS_PTR)&addr, csp_evd, &csp), "dat_csp_create");
    DAT_CSP_PARAM cq;
    memset(&cq, 0, sizeof cq);
    PEER_CHECK(p_csp_query(csp, DAT_CSP_FIELD_ALL, &cq), "dat_csp_query");
    if (cq.ia_handle != ia || cq.evd_handle != csp_evd || cq.comm == NULL || cq.comm->domain != comm.domain ||
        cq.comm->type != SOCK_STREAM || cq.comm->protocol != IPPROTO_TCP || cq.address_ptr == NULL ||
        cq.address_ptr->sa_family != addr.ss_family)
        PEER_FAIL("dat_csp_query: ia %p evd %p comm %p", (void *)cq.ia_handle, (void *)cq.evd_handle, (void *)cq.comm);
    DAT_CONN_QUAL cport = port_of(cq.address_ptr);
    if (cport == 0)
        PEER_FAIL("dat_csp_query: port 0");
    if (DAT_GET_TYPE(p_csp_create(ia, &comm, cq.address_ptr, csp_evd, &(DAT_CSP_HANDLE){0})) != DAT_PORT_IN_USE)
        PEER_FAIL("second CSP on port %llu not DAT_PORT_IN_USE", (unsigned long long)cport);

    DAT_PSP_HANDLE psp;
    DAT_CONN_QUAL pport, rport;
    PEER_CHECK(dat_psp_create_any(ia, &pport, psp_evd, DAT_PSP_CONSUMER_FLAG, &psp), "dat_psp_create_any");
    DAT_PSP_HANDLE tmp;
    PEER_CHECK(dat_psp_create_any(ia, &rport, rsp_evd, DAT_PSP_CONSUMER_FLAG, &tmp), "dat_psp_create_any");
    PEER_CHECK(dat_psp_free(tmp), "dat_psp_free");
    DAT_RSP_HANDLE rsp;
    PEER_CHECK(dat_rsp_create(ia, rport, rep, rsp_evd, &rsp), "dat_rsp_create");
    printf("ready %llu\n", (unsigned long long)cport);
    fflush(stdout);

    for (int r = 0; r < ROUNDS; r++) {
        DAT_CR_PARAM cp;
        DAT_CR_HANDLE cr = take_cr(csp_evd, csp, cport, r, &cp);
        DAT_EP_HANDLE aep = ep;
        if (r == 3) {
            PEER_CHECK(dat_cr_reject(cr, 3, "no"), "dat_cr_reject");
            break;
        }
        if (r == 1 || r == 2) {
            if (DAT_GET_TYPE(dat_cr_handoff(cr, 0)) != DAT_INVALID_PARAMETER)
                PEER_FAIL("dat_cr_handoff(0) not DAT_INVALID_PARAMETER");
            PEER_CHECK(dat_cr_handoff(cr, r == 1 ? pport : rport), "dat_cr_handoff");
            if (DAT_GET_TYPE(dat_cr_query(cr, DAT_CR_FIELD_ALL, &cp)) != DAT_INVALID_HANDLE)
                PEER_FAIL("round %d: the handed-off CR still answers", r);
            cr = r == 1 ? take_cr(psp_evd, psp, pport, r, &cp) : take_cr(rsp_evd, rsp, rport, r, &cp);
            if (r == 2) {
                if (cp.local_ep_handle != rep)
                    PEER_FAIL("RSP CR: local EP %p, want %p", (void *)cp.local_ep_handle, (void *)rep);
                aep = DAT_HANDLE_NULL;
            }
        }
        accept_cr(cr, aep, &cp, conn_evd);
        if (aep == DAT_HANDLE_NULL)
            aep = rep;
        if (r % 2 == 1)
            PEER_CHECK(dat_ep_disconnect(aep, DAT_CLOSE_ABRUPT_FLAG), "dat_ep_disconnect");
        peer_wait_for(conn_evd, DAT_CONNECTION_EVENT_DISCONNECTED, "DISCONNECTED");
        PEER_CHECK(dat_ep_reset(aep), "dat_ep_reset");
    }
    PEER_CHECK(dat_rsp_free(rsp), "dat_rsp_free");
    PEER_CHECK(dat_psp_free(psp), "dat_psp_free");
    PEER_CHECK(p_csp_free(csp), "dat_csp_free");
    if (DAT_GET_TYPE(p_csp_query(csp, DAT_CSP_FIELD_ALL, &cq)) != DAT_INVALID_HANDLE)
        PEER_FAIL("freed CSP still answers");
    PEER_CHECK(dat_ep_free(rep), "dat_ep_free");
    PEER_CHECK(dat_ep_free(ep), "dat_ep_free");
    PEER_CHECK(dat_evd_free(dto_evd), "dat_evd_free");
    PEER_CHECK(dat_evd_free(conn_evd), "dat_evd_free");
    PEER_CHECK(dat_evd_free(rsp_evd), "dat_evd_free");
    PEER_CHECK(dat_evd_free(psp_evd), "dat_evd_free");
    PEER_CHECK(dat_evd_free(csp_evd), "dat_evd_free");
    PEER_CHECK(dat_pz_free(pz), "dat_pz_free");
    PEER_CHECK(dat_ia_close(ia, DAT_CLOSE_GRACEFUL_FLAG), "dat_ia_close");
}

static void client(const char *ia_name, const char *host, const char *port)
{
    DAT_IA_HANDLE ia;
    DAT_EVD_HANDLE async = DAT_HANDLE_NULL, conn_evd, dto_evd;
    DAT_PZ_HANDLE pz;
    DAT_EP_HANDLE ep;
    PEER_CHECK(dat_ia_open((DAT_NAME_PTR)ia_name, 8, &async, &ia), "dat_ia_open");
    PEER_CHECK(dat_pz_create(ia, &pz), "dat_pz_create");
    PEER_CHECK(dat_evd_create(ia, 8, DAT_HANDLE_NULL, DAT_EVD_CONNECTION_FLAG, &conn_evd), "dat_evd_create(CONN)");
    PEER_CHECK(dat_evd_create(ia, 8, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &dto_evd), "dat_evd_create(DTO)");
    PEER_CHECK(dat_ep_create(ia, pz, dto_evd, dto_evd, conn_evd, NULL, &ep), "dat_ep_create");
    resolve(conn_evd);
    struct addrinfo hints, *ai;
    memset(&hints, 0, sizeof hints);
    hints.ai_socktype = SOCK_STREAM;
    if (getaddrinfo(host, port, &hints, &ai) != 0)
        PEER_FAIL("cannot resolve %s port %s", host, port);
    DAT_IA_ADDRESS_PTR to = (DAT_IA_ADDRESS_PTR)ai->ai_addr;
    unsigned char pd[PD_LEN];
    if (DAT_GET_TYPE(p_common_connect(ep, to, 0, 0, NULL)) != DAT_INVALID_PARAMETER)
        PEER_FAIL("common_connect with timeout 0 not DAT_INVALID_PARAMETER");
    for (int r = 0; r < ROUNDS; r++) {
        pd[0] = (unsigned char)r;
        for (int i = 1; i < PD_LEN; i++)
            pd[i] = (unsigned char)(i * 7 + r);
        PEER_CHECK(p_common_connect(ep, to, PEER_WAIT_US, PD_LEN, pd), "dat_ep_common_connect");
        if (r == 3) {
            DAT_EVENT ev = peer_wait_for(conn_evd, DAT_CONNECTION_EVENT_PEER_REJECTED, "PEER_REJECTED");
            DAT_CONNECTION_EVENT_DATA *c = &ev.event_data.connect_event_data;
            if (c->private_data_size != 3 || memcmp(c->private_data, "no", 3) != 0)
                PEER_FAIL("reject pdata (%d bytes)", c->private_data_size);
            break;
        }
        DAT_EVENT ev = peer_wait_for(conn_evd, DAT_CONNECTION_EVENT_ESTABLISHED, "ESTABLISHED");
        DAT_CONNECTION_EVENT_DATA *c = &ev.event_data.connect_event_data;
        if (c->ep_handle != ep || c->private_data_size != PD_LEN)
            PEER_FAIL("round %d: ESTABLISHED ep %p pdata size %d", r, (void *)c->ep_handle, c->private_data_size);
        for (int i = 0; i < PD_LEN; i++)
            if (((unsigned char *)c->private_data)[i] != (unsigned char)(pd[i] + 1))
                PEER_FAIL("round %d: accept pdata[%d]", r, i);
        DAT_EP_PARAM q;
        PEER_CHECK(dat_ep_query(ep, DAT_EP_FIELD_ALL, &q), "dat_ep_query");
        /* handed off or not, we are connected to the port we asked for */
        if (q.remote_port_qual != port_of(ai->ai_addr))
            PEER_FAIL("round %d: remote port %llu", r, (unsigned long long)q.remote_port_qual);
        if (r % 2 == 0)
            PEER_CHECK(dat_ep_disconnect(ep, DAT_CLOSE_GRACEFUL_FLAG), "dat_ep_disconnect");
        peer_wait_for(conn_evd, DAT_CONNECTION_EVENT_DISCONNECTED, "DISCONNECTED");
        PEER_CHECK(dat_ep_reset(ep), "dat_ep_reset");
    }
    freeaddrinfo(ai);
    PEER_CHECK(dat_ep_free(ep), "dat_ep_free");
    PEER_CHECK(dat_evd_free(dto_evd), "dat_evd_free");
    PEER_CHECK(dat_evd_free(conn_evd), "dat_evd_free");
    PEER_CHECK(dat_pz_free(pz), "dat_pz_free");
    PEER_CHECK(dat_ia_close(ia, DAT_CLOSE_GRACEFUL_FLAG), "dat_ia_close");
}

int main(int argc, char **argv)
{
    const char *ia_name = "softdat-lo", *host = "127.0.0.1", *port = NULL;
    int is_server = -1, opt;
    while ((opt = getopt(argc, argv, "scP:h:p:")) != -1) {
        switch (opt) {
        case 's': is_server = 1; break;
        case 'c': is_server = 0; break;
        case 'P': ia_name = optarg; break;
        case 'h': host = optarg; break;
        case 'p': port = optarg; break;
        default: return 2;
        }
    }
    if (is_server < 0 || (!is_server && port == NULL)) {
        fprintf(stderr, "usage: %s -s|-c -P IA [-h HOST] [-p PORT]\n", argv[0]);
        return 2;
    }
    peer_role = is_server ? "server" : "client";
    if (is_server)
        server(ia_name);
    else
        client(ia_name, host, port);
    printf("%s: ok\n", peer_role);
    return 0;
}
