/* softdat CSP calls: dat_csp_create / dat_csp_query / dat_csp_free.
 *
 * A CSP is a listening TCP socket bound where the consumer says, feeding
 * CRs to its EVD like a consumer-flag PSP (the spec's "PSP model 2",
 * L4287): the consumer accepts with its own EP. The active side reaches
 * it with dat_ep_common_connect (the port is in the address) or with
 * dat_ep_connect (conn qual = port): on the wire both are one MPA request.
 *
 * Choices (the spec lets the provider restrict, L4313-4323):
 *  - comm: domain and type are required (0/negative, or a negative
 *    protocol ⇒ DAT_INVALID_PARAMETER|ARG2); only TCP stream sockets are
 *    served: domain AF_INET/AF_INET6, type SOCK_STREAM (SOCK_NONBLOCK /
 *    SOCK_CLOEXEC ignored), protocol 0 or IPPROTO_TCP, else
 *    DAT_COMM_NOT_SUPPORTED. A domain other than the IA address's family
 *    is DAT_INVALID_PARAMETER|ARG2 (the IA cannot serve it).
 *  - address: NULL ⇒ the IA's address and a free port of the
 *    dat_psp_create_any range. Otherwise its family must be comm's domain
 *    and its IP the IA's or the wildcard (else DAT_INVALID_PARAMETER|ARG3);
 *    port 0 ⇒ we pick one as for NULL. Port taken ⇒ DAT_PORT_IN_USE.
 *  - A wildcard CSP hears every local address, but the requests it gets
 *    are the IA's (L4319): one that arrived on another address is closed
 *    without a CR (L4267; the initiator sees NON_PEER_REJECTED).
 *  - Arrival events carry sp_handle.csp_handle, conn_qual = the port and
 *    local_ia_address_ptr = the IA address; dat_cr_query gives the
 *    initiator's socket address and port.
 *  - dat_csp_query's comm and address_ptr point into the CSP (valid until
 *    it is freed); address_ptr holds the port actually bound. */
#include "lib/provider/csp.h"

#include <errno.h>
#include <netinet/in.h>
#include <string.h>

#include "emu/log.h"
#include "lib/provider/evd.h"
#include "lib/provider/ia.h"

static bool is_wildcard(const struct sockaddr *sa)
{
    if (sa->sa_family == AF_INET)
        return ((const struct sockaddr_in *)sa)->sin_addr.s_addr == htonl(INADDR_ANY);
    if (sa->sa_family == AF_INET6)
        return IN6_IS_ADDR_UNSPECIFIED(&((const struct sockaddr_in6 *)sa)->sin6_addr);
    return false;
}

static void set_port(struct sockaddr_storage *ss, uint16_t port)
{
    if (ss->ss_family == AF_INET)
        ((struct sockaddr_in *)ss)->sin_port = htons(port);
    else
        ((struct sockaddr_in6 *)ss)->sin6_port = htons(port);
}

bool sd_csp_serves(const struct sd_sp *sp, const struct sockaddr *local)
{
    const struct sockaddr *a = (const struct sockaddr *)&((const struct sd_csp *)sp)->addr;
    return a->sa_family == local->sa_family && (is_wildcard(a) || sd_same_ip(a, local));
}

static void csp_request(struct emu_listener *l, const struct emu_conn_request *req, void *ctx)
{
    (void)l;
    struct sd_sp *sp = ctx;
    if (req->local == NULL || !sd_same_ip(req->local, (const struct sockaddr *)&sp->h.ia->addr)) {
        char buf[64];
        SD_DBG("csp", "request on %s is not for this IA: refused",
               req->local ? emu_sockaddr_str(req->local, buf, sizeof buf) : "?");
        emu_conn_free(req->conn);
        return;
    }
    sd_sp_deliver(sp, req->conn, req->pdata, req->pdata_len, req->peer, req->peer_len, req->peer_ird,
                  req->peer_ord);
}

static const struct emu_listener_ops csp_listener_ops = {.request = csp_request};

static const struct sd_handle_ops csp_ops = {
    .type = DAT_HANDLE_TYPE_CSP,
    .name = "csp",
    .size = sizeof(struct sd_csp),
    .phase = SD_PHASE_SP,
    .teardown = sd_sp_teardown,
    .release = sd_sp_release,
};

static DAT_RETURN check_comm(const DAT_COMM *comm, const struct sd_ia *ia)
{
    if (comm == NULL || comm->domain <= 0 || comm->type <= 0 || comm->protocol < 0)
        return SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    int type = comm->type & ~(SOCK_NONBLOCK | SOCK_CLOEXEC);
    if ((comm->domain != AF_INET && comm->domain != AF_INET6) || type != SOCK_STREAM ||
        (comm->protocol != 0 && comm->protocol != IPPROTO_TCP))
        return SD_RET(DAT_COMM_NOT_SUPPORTED, 0);
    if (comm->domain != ia->addr.ss_family)
        return SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    return DAT_SUCCESS;
}

/* The address to bind (port 0: any), from the consumer's or the IA's. */
static DAT_RETURN check_address(const struct sockaddr *a, const DAT_COMM *comm, const struct sd_ia *ia,
                                struct sockaddr_storage *out, socklen_t *len)
{
    memset(out, 0, sizeof *out);
    if (a == NULL) {
        memcpy(out, &ia->addr, ia->addr_len);
        *len = ia->addr_len;
        set_port(out, 0);
        return DAT_SUCCESS;
    }
    if (a->sa_family != comm->domain ||
        (!is_wildcard(a) && !sd_same_ip(a, (const struct sockaddr *)&ia->addr)))
        return SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    *len = a->sa_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
    memcpy(out, a, *len);
    return DAT_SUCCESS;
}

static DAT_RETURN csp_listen(struct sd_sp *sp, void *arg)
{
    (void)arg;
    struct sd_csp *csp = (struct sd_csp *)sp;
    uint16_t port = emu_sockaddr_port((const struct sockaddr *)&csp->addr);
    int r = sd_sp_listen_at(sp, (const struct sockaddr *)&csp->addr, csp->addr_len, port, port == 0,
                            &csp_listener_ops);
    switch (r) {
    case 0:
        pthread_mutex_lock(&sp->lock);
        set_port(&csp->addr, (uint16_t)sp->conn_qual);
        pthread_mutex_unlock(&sp->lock);
        return DAT_SUCCESS;
    case -ESHUTDOWN: return SD_RET(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);
    case -EADDRINUSE:
        /* Port 0 with the whole range taken is a resource shortage. */
        return port == 0 ? SD_RET(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEP) : SD_RET(DAT_PORT_IN_USE, 0);
    case -EACCES:        /* privileged port */
    case -EADDRNOTAVAIL:
    case -EINVAL: return SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    case -EAFNOSUPPORT: return SD_RET(DAT_COMM_NOT_SUPPORTED, 0);
    default:
        SD_WARN("csp", "listen on port %u failed: %s", (unsigned)port, strerror(-r));
        return SD_RET(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEP);
    }
}

static DAT_RETURN sd_csp_create(DAT_IA_HANDLE ia_handle, DAT_COMM *comm, DAT_IA_ADDRESS_PTR address,
                                DAT_EVD_HANDLE evd_handle, DAT_CSP_HANDLE *csp_handle)
{
    struct sd_ia *ia;
    DAT_RETURN rc = sd_ia_get(ia_handle, &ia);
    if (rc != DAT_SUCCESS)
        return rc;
    struct sockaddr_storage addr;
    socklen_t addr_len = 0;
    struct sd_sp *sp;
    if (csp_handle == NULL)
        rc = SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG5);
    else if ((rc = check_comm(comm, ia)) != DAT_SUCCESS)
        ;
    else if ((rc = check_address((const struct sockaddr *)address, comm, ia, &addr, &addr_len)) != DAT_SUCCESS)
        ;
    else if ((rc = sd_sp_new(ia, &csp_ops, evd_handle, &sp)) == DAT_SUCCESS) {
        struct sd_csp *csp = (struct sd_csp *)sp;
        csp->comm = *comm;
        csp->addr = addr;
        csp->addr_len = addr_len;
        sp->flags = DAT_PSP_CONSUMER_FLAG; /* consumer EPs only (L4287) */
        if ((rc = sd_sp_start(sp, csp_listen, NULL)) == DAT_SUCCESS)
            *csp_handle = (DAT_CSP_HANDLE)sp;
    }
    sd_handle_put(&ia->h);
    return rc;
}

static DAT_RETURN sd_csp_query(DAT_CSP_HANDLE csp_handle, DAT_CSP_PARAM_MASK mask, DAT_CSP_PARAM *p)
{
    struct sd_sp *sp;
    DAT_RETURN rc = sd_sp_query_get(csp_handle, DAT_HANDLE_TYPE_CSP, DAT_INVALID_HANDLE_CSP, (unsigned)mask,
                                    (unsigned)DAT_CSP_FIELD_ALL, p, &sp);
    if (rc != DAT_SUCCESS)
        return rc;
    struct sd_csp *csp = (struct sd_csp *)sp;
    pthread_mutex_lock(&sp->lock);
    p->ia_handle = sd_ia_consumer_handle(sp->h.ia);
    p->comm = &csp->comm;
    p->address_ptr = (DAT_IA_ADDRESS_PTR)&csp->addr;
    p->evd_handle = (DAT_EVD_HANDLE)sp->evd;
    pthread_mutex_unlock(&sp->lock);
    sd_handle_put(&sp->h);
    return DAT_SUCCESS;
}

static DAT_RETURN sd_csp_free(DAT_CSP_HANDLE csp_handle)
{
    return sd_sp_free(csp_handle, DAT_HANDLE_TYPE_CSP, DAT_INVALID_HANDLE_CSP);
}

void sd_csp_fill_table(DAT_PROVIDER *p)
{
    p->csp_create_func = sd_csp_create;
    p->csp_query_func = sd_csp_query;
    p->csp_free_func = sd_csp_free;
}
