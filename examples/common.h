/* examples/common.h: the plumbing every example shares, so that each
 * example file shows only the RDMA semantics it is about.
 *
 * One example program plays both roles: "server" (passive side: listens,
 * accepts, usually the *target* of one-sided operations) and "client"
 * (active side: connects, usually the *requester*). examples/run NAME
 * starts both with a trace each (SOFTDAT_TRACE).
 *
 * What a DAT program always needs, in order:
 *   1. an IA (interface adapter): dat_ia_open;
 *   2. a PZ (protection zone): memory and endpoints must share one;
 *   3. EVDs (event dispatchers): where completions and connection events
 *      arrive; here one for requests (what we post), one for receives,
 *      one for connection events, one for connection requests;
 *   4. LMRs: registered memory (dat_lmr_create); only registered memory
 *      can be sent from, received into, or exposed to the peer;
 *   5. an EP (endpoint, i.e. a queue pair), then a connection.
 *
 * Everything here exits with status 1 and a line "FAIL ..." on stdout
 * when something is not as expected: the examples double as tests. */
#ifndef SOFTDAT_EXAMPLES_COMMON_H
#define SOFTDAT_EXAMPLES_COMMON_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <dat2/udat.h>
#include <dat2/dat_ib_extensions.h>

#define EX_TIMEOUT_US (10u * 1000000u) /* no wait in an example lasts longer */
#define EX_CTL_SLOTS 8                 /* control-message receives kept posted */
#define EX_CTL_SIZE 256

struct ex_buf {
    char *p;
    DAT_VLEN len;
    DAT_LMR_HANDLE lmr;
    DAT_LMR_CONTEXT lctx; /* names the buffer in our own posts */
    DAT_RMR_CONTEXT rctx; /* names it for the peer (an STag on the wire) */
};

struct ex {
    const char *role;
    DAT_IA_HANDLE ia;
    DAT_PZ_HANDLE pz;
    DAT_EVD_HANDLE async, req, rcv, conn, cr;
    DAT_EP_HANDLE ep;
    DAT_PSP_HANDLE psp;
    struct ex_buf ctl; /* control messages (buffer descriptions, "bye") */
    int ctl_next;      /* the receive slot the next message lands in */
};

static const char *ex_role = "?";

static inline void ex_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static inline void ex_say(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("[%s] ", ex_role);
    vprintf(fmt, ap);
    printf("\n");
    fflush(stdout);
    va_end(ap);
}

#define EX_FAIL(...)                                                                               \
    do {                                                                                           \
        printf("FAIL [%s] %s:%d: ", ex_role, __FILE__, __LINE__);                                  \
        printf(__VA_ARGS__);                                                                       \
        printf("\n");                                                                              \
        exit(1);                                                                                   \
    } while (0)
#define EX_CHECK(cond, ...)                                                                        \
    do {                                                                                           \
        if (!(cond))                                                                               \
            EX_FAIL(__VA_ARGS__);                                                                  \
    } while (0)
/* Every DAT call returns DAT_SUCCESS or an error code (type | subtype). */
#define EX_MUST(call)                                                                              \
    do {                                                                                           \
        DAT_RETURN r_ = (call);                                                                    \
        if (r_ != DAT_SUCCESS)                                                                     \
            EX_FAIL("%s = 0x%08x", #call, (unsigned)r_);                                           \
    } while (0)

static inline DAT_DTO_COOKIE ex_cookie(uint64_t v)
{
    DAT_DTO_COOKIE c;
    c.as_64 = v; /* the cookie comes back, unchanged, in the completion */
    return c;
}

/* Register len bytes: returns the LMR context (for local use) and the RMR
 * context (to hand to the peer, when priv lets the peer in). */
static inline void ex_reg(struct ex *x, struct ex_buf *b, size_t len, DAT_MEM_PRIV_FLAGS priv)
{
    b->p = aligned_alloc(4096, (len + 4095) / 4096 * 4096);
    EX_CHECK(b->p != NULL, "out of memory");
    memset(b->p, 0, len);
    b->len = len;
    DAT_REGION_DESCRIPTION rd;
    rd.for_va = b->p;
    DAT_VLEN reg_len;
    DAT_VADDR reg_addr;
    EX_MUST(dat_lmr_create(x->ia, DAT_MEM_TYPE_VIRTUAL, rd, len, x->pz, priv, DAT_VA_TYPE_VA, &b->lmr, &b->lctx,
                           &b->rctx, &reg_len, &reg_addr));
}

static inline void ex_unreg(struct ex_buf *b)
{
    EX_MUST(dat_lmr_free(b->lmr));
    free(b->p);
}

/* A local segment (for our own posts) and a remote one (for the peer's). */
static inline DAT_LMR_TRIPLET ex_local(const struct ex_buf *b, size_t off, size_t len)
{
    DAT_LMR_TRIPLET t = {.virtual_address = (DAT_VADDR)(uintptr_t)(b->p + off),
                         .segment_length = (DAT_SEG_LENGTH)len, .lmr_context = b->lctx};
    return t;
}
static inline DAT_RMR_TRIPLET ex_remote(const struct ex_buf *b, size_t off, size_t len)
{
    DAT_RMR_TRIPLET t = {.virtual_address = (DAT_VADDR)(uintptr_t)(b->p + off),
                         .segment_length = (DAT_SEG_LENGTH)len, .rmr_context = b->rctx};
    return t;
}

static inline DAT_EVENT ex_wait(DAT_EVD_HANDLE evd, const char *what)
{
    DAT_EVENT ev;
    DAT_COUNT nmore;
    DAT_RETURN rc = dat_evd_wait(evd, EX_TIMEOUT_US, 1, &ev, &nmore);
    if (rc != DAT_SUCCESS)
        EX_FAIL("waiting for %s: 0x%08x", what, (unsigned)rc);
    return ev;
}

/* Wait for a DTO completion and check its cookie and status. */
static inline DAT_DTO_COMPLETION_EVENT_DATA ex_wait_dto(DAT_EVD_HANDLE evd, const char *what, uint64_t cookie,
                                                 DAT_DTO_COMPLETION_STATUS want)
{
    DAT_EVENT ev = ex_wait(evd, what);
    EX_CHECK(ev.event_number == DAT_DTO_COMPLETION_EVENT || ev.event_number == (DAT_EVENT_NUMBER)DAT_IB_DTO_EVENT,
             "%s: event 0x%x, not a DTO completion", what, ev.event_number);
    DAT_DTO_COMPLETION_EVENT_DATA d = ev.event_data.dto_completion_event_data;
    EX_CHECK(d.user_cookie.as_64 == cookie, "%s: cookie %llu, want %llu", what,
             (unsigned long long)d.user_cookie.as_64, (unsigned long long)cookie);
    EX_CHECK(d.status == want, "%s: status %d, want %d", what, (int)d.status, (int)want);
    return d;
}

static inline void ex_post_ctl_recv(struct ex *x, int slot)
{
    DAT_LMR_TRIPLET t = ex_local(&x->ctl, (size_t)slot * EX_CTL_SIZE, EX_CTL_SIZE);
    EX_MUST(dat_ep_post_recv(x->ep, 1, &t, ex_cookie(1000 + (uint64_t)slot), DAT_COMPLETION_DEFAULT_FLAG));
}

/* IA, PZ, EVDs, the control buffer. The IA name: softdat-lo (InfiniBand
 * semantics, with the IB extensions), or $EX_IA. */
static inline void ex_open(struct ex *x, const char *role)
{
    memset(x, 0, sizeof *x);
    x->role = ex_role = role;
    char *ia = getenv("EX_IA") ? getenv("EX_IA") : (char *)"softdat-lo";
    x->async = DAT_HANDLE_NULL; /* "create one for me" */
    EX_MUST(dat_ia_open(ia, 8, &x->async, &x->ia));
    EX_MUST(dat_pz_create(x->ia, &x->pz));
    /* DTO EVDs also take the IB extension events (write-immediate, atomics). */
    DAT_EVD_FLAGS dto = DAT_EVD_DTO_FLAG | (DAT_EVD_FLAGS)DAT_IB_EVD_EXTENSION_FLAG;
    EX_MUST(dat_evd_create(x->ia, 32, DAT_HANDLE_NULL, dto, &x->req));
    EX_MUST(dat_evd_create(x->ia, 32, DAT_HANDLE_NULL, dto, &x->rcv));
    EX_MUST(dat_evd_create(x->ia, 8, DAT_HANDLE_NULL, DAT_EVD_CONNECTION_FLAG, &x->conn));
    EX_MUST(dat_evd_create(x->ia, 8, DAT_HANDLE_NULL, DAT_EVD_CR_FLAG, &x->cr));
    ex_reg(x, &x->ctl, (size_t)EX_CTL_SLOTS * EX_CTL_SIZE, DAT_MEM_PRIV_LOCAL_READ_FLAG | DAT_MEM_PRIV_LOCAL_WRITE_FLAG);
}

static inline void ex_ep_attr(DAT_EP_ATTR *a)
{
    memset(a, 0, sizeof *a);
    a->service_type = DAT_SERVICE_TYPE_RC; /* reliable connection */
    a->max_message_size = 1 << 20;
    a->max_rdma_size = 1 << 20;
    a->qos = DAT_QOS_BEST_EFFORT;
    a->recv_completion_flags = DAT_COMPLETION_DEFAULT_FLAG;
    a->request_completion_flags = DAT_COMPLETION_DEFAULT_FLAG;
    a->max_recv_dtos = 16;
    a->max_request_dtos = 16;
    a->max_recv_iov = 2;
    a->max_request_iov = 2;
    a->max_rdma_read_in = 4;
    a->max_rdma_read_out = 4;
}

/* The EP, with the control receives posted *before* connecting: a Send
 * that finds no posted receive is an error in RDMA (there is no buffering
 * behind the receive queue). */
static inline void ex_ctl_post_all(struct ex *x)
{
    for (int i = 0; i < EX_CTL_SLOTS; i++)
        ex_post_ctl_recv(x, i);
    x->ctl_next = 0;
}

static inline void ex_ep_bare(struct ex *x) /* no receives posted yet */
{
    DAT_EP_ATTR a;
    ex_ep_attr(&a);
    EX_MUST(dat_ep_create(x->ia, x->pz, x->rcv, x->req, x->conn, &a, &x->ep));
}

static inline void ex_ep(struct ex *x)
{
    ex_ep_bare(x);
    ex_ctl_post_all(x);
}

static inline DAT_CONN_QUAL ex_port(int argc, char **argv)
{
    return argc > 2 ? (DAT_CONN_QUAL)strtoul(argv[2], NULL, 10) : 20790;
}

/* Server: listen on the port, take one connection request, accept it. */
static inline void ex_accept(struct ex *x, DAT_CONN_QUAL port)
{
    if (x->psp == DAT_HANDLE_NULL)
        EX_MUST(dat_psp_create(x->ia, port, x->cr, DAT_PSP_CONSUMER_FLAG, &x->psp));
    ex_say("listening on conn_qual %llu", (unsigned long long)port);
    DAT_EVENT ev = ex_wait(x->cr, "a connection request");
    EX_CHECK(ev.event_number == DAT_CONNECTION_REQUEST_EVENT, "event 0x%x", ev.event_number);
    EX_MUST(dat_cr_accept(ev.event_data.cr_arrival_event_data.cr_handle, x->ep, 0, NULL));
    ev = ex_wait(x->conn, "established");
    EX_CHECK(ev.event_number == DAT_CONNECTION_EVENT_ESTABLISHED, "event 0x%x", ev.event_number);
    ex_say("connected");
}

/* Client: connect; the server may not be listening yet, so a refused
 * connection is retried (bounded). Returns the connection event. */
static inline DAT_EVENT_NUMBER ex_connect_once(struct ex *x, const char *host, DAT_CONN_QUAL port, int tries)
{
    struct sockaddr_in sa = {.sin_family = AF_INET};
    EX_CHECK(inet_pton(AF_INET, host, &sa.sin_addr) == 1, "bad address %s", host);
    for (int i = 0;; i++) {
        EX_MUST(dat_ep_connect(x->ep, (DAT_IA_ADDRESS_PTR)&sa, port, EX_TIMEOUT_US, 0, NULL, DAT_QOS_BEST_EFFORT,
                               DAT_CONNECT_DEFAULT_FLAG));
        DAT_EVENT ev = ex_wait(x->conn, "the connection's outcome");
        if (ev.event_number != DAT_CONNECTION_EVENT_NON_PEER_REJECTED || i + 1 >= tries)
            return ev.event_number;
        /* Nobody listens yet: back to a fresh EP state, try again. The
         * control receives completed FLUSHED when the attempt failed:
         * take those events off the queue before posting the receives
         * again, or the next "control receive" would read one of them. */
        EX_MUST(dat_ep_reset(x->ep));
        DAT_EVENT stale;
        for (int k = 0; k < 4 * EX_CTL_SLOTS && dat_evd_dequeue(x->rcv, &stale) == DAT_SUCCESS; k++)
            ;
        ex_ctl_post_all(x);
        struct timespec ts = {0, 100 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

static inline void ex_connect(struct ex *x, int argc, char **argv)
{
    DAT_EVENT_NUMBER n = ex_connect_once(x, argc > 3 ? argv[3] : "127.0.0.1", ex_port(argc, argv), 50);
    EX_CHECK(n == DAT_CONNECTION_EVENT_ESTABLISHED, "connect: event 0x%x", n);
    ex_say("connected");
}

/* Control messages: a Send from one side lands in the other's next
 * posted receive (in order), and completes on both sides. */
static inline void ex_send_ctl(struct ex *x, const void *msg, size_t len)
{
    static struct ex_buf out;
    if (out.p == NULL)
        ex_reg(x, &out, EX_CTL_SIZE, DAT_MEM_PRIV_LOCAL_READ_FLAG | DAT_MEM_PRIV_LOCAL_WRITE_FLAG);
    memcpy(out.p, msg, len);
    DAT_LMR_TRIPLET t = ex_local(&out, 0, len);
    EX_MUST(dat_ep_post_send(x->ep, 1, &t, ex_cookie(900), DAT_COMPLETION_DEFAULT_FLAG));
    ex_wait_dto(x->req, "control send", 900, DAT_DTO_SUCCESS);
}

static inline const char *ex_recv_ctl(struct ex *x, size_t want_len)
{
    int slot = x->ctl_next;
    DAT_DTO_COMPLETION_EVENT_DATA d =
        ex_wait_dto(x->rcv, "control receive", 1000 + (uint64_t)slot, DAT_DTO_SUCCESS);
    EX_CHECK(d.transfered_length == want_len, "control message of %u bytes, want %zu",
             (unsigned)d.transfered_length, want_len);
    x->ctl_next = (slot + 1) % EX_CTL_SLOTS;
    ex_post_ctl_recv(x, slot); /* keep the receive queue stocked */
    return x->ctl.p + (size_t)slot * EX_CTL_SIZE;
}

/* Tell the peer where a buffer is (address, length, RMR context). This is
 * what "exchanging keys" means: without it the peer cannot name our memory. */
static inline void ex_send_buf(struct ex *x, const struct ex_buf *b)
{
    DAT_RMR_TRIPLET r = ex_remote(b, 0, b->len);
    ex_send_ctl(x, &r, sizeof r);
}
static inline DAT_RMR_TRIPLET ex_recv_buf(struct ex *x)
{
    DAT_RMR_TRIPLET r;
    memcpy(&r, ex_recv_ctl(x, sizeof r), sizeof r);
    return r;
}

/* The end of a healthy connection: the client says "bye" when it is done
 * (so the server does not disconnect under its feet), the server
 * disconnects, both see DISCONNECTED. */
static inline void ex_bye(struct ex *x, bool server)
{
    if (server) {
        const char *m = ex_recv_ctl(x, 4);
        EX_CHECK(memcmp(m, "bye", 4) == 0, "expected bye");
        EX_MUST(dat_ep_disconnect(x->ep, DAT_CLOSE_GRACEFUL_FLAG));
    } else {
        ex_send_ctl(x, "bye", 4);
    }
    DAT_EVENT ev = ex_wait(x->conn, "disconnected");
    EX_CHECK(ev.event_number == DAT_CONNECTION_EVENT_DISCONNECTED, "event 0x%x", ev.event_number);
}

/* The EP's receives still posted complete FLUSHED when it disconnects:
 * reap them so the EP can be freed with an empty queue. */
static inline void ex_reap_flushed(struct ex *x)
{
    DAT_EVENT ev;
    while (dat_evd_dequeue(x->rcv, &ev) == DAT_SUCCESS)
        ;
    while (dat_evd_dequeue(x->req, &ev) == DAT_SUCCESS)
        ;
}

static inline void ex_close(struct ex *x)
{
    ex_reap_flushed(x);
    if (x->ep != DAT_HANDLE_NULL)
        EX_MUST(dat_ep_free(x->ep));
    if (x->psp != DAT_HANDLE_NULL)
        EX_MUST(dat_psp_free(x->psp));
    ex_reap_flushed(x);
    ex_unreg(&x->ctl);
    EX_MUST(dat_ia_close(x->ia, DAT_CLOSE_ABRUPT_FLAG)); /* abrupt: frees what is left */
    ex_say("done");
}

/* argv[1] is the role. */
static inline bool ex_is_server(int argc, char **argv)
{
    if (argc < 2 || (strcmp(argv[1], "server") != 0 && strcmp(argv[1], "client") != 0)) {
        fprintf(stderr, "usage: %s server [PORT] | client [PORT [HOST]]\n  (examples/run NAME runs both)\n",
                argv[0]);
        exit(2);
    }
    return strcmp(argv[1], "server") == 0;
}

#endif
