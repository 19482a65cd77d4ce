/* softdat-perf: the DAT side. A plain DAT consumer (public API only, linked
 * with -ldat2), so it measures whatever provider dat.conf names.
 *
 * Connection: the server listens with dat_psp_create(port); the client
 * connects with dat_ep_connect, its private data carrying the session
 * parameters (largest size, window, completion mode, CRC choice) so the
 * server can size its buffers and queues before it accepts. Both sides
 * then exchange the DAT_RMR_TRIPLET of their RDMA area (network byte order)
 * in a HELLO Send/Recv: no side channel.
 *
 * Memory: one LMR per side, laid out as
 *   rdma area   SLOT bytes: target of the peer's Writes, source of its Reads
 *   local area  SLOT bytes: source of our Sends/Writes, sink of our Reads
 *   recv slots  NRECV x SLOT bytes, always posted (cookie = slot index)
 *   ctrl slots  CTRL_SLOTS x 64 bytes for control messages
 * Data messages start with 'D'; control messages are 64 bytes starting
 * with the magic "SPC1".
 *
 * Requests: the DTO cookie is a running sequence number. Completions of one
 * EP's requests arrive in order, so a signalled completion with cookie q
 * means every request up to q is done; unsignalled (SUPPRESS) requests are
 * retired that way. A sender never has more than WINDOW requests
 * unretired, and the last one of a burst is always signalled.
 *
 * Send bandwidth needs flow control (iWARP has no receiver-not-ready retry:
 * a Send without a posted receive breaks the connection): the receiver
 * returns credits in CREDIT messages as it reposts its receives.
 */
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tools/softdat-perf/perf.h"

#define CTRL_SIZE 64
#define CTRL_SLOTS 16
#define QUEUE_HEADROOM 8        /* see sess_setup */
#define CTRL_RESERVE 4          /* receives never spent on data: room for control */
#define READ_FILL 'R'            /* server's RDMA area during Read tests */
#define CTRL_MAGIC 0x53504331u  /* "SPC1" */
#define PDATA_MAGIC 0x53505031u /* "SPP1" */
#define PDATA_VERSION 1
#define PD_POLL 1u
#define PD_RAW_FOLLOWS 2u

enum ctrl_type { C_HELLO = 1, C_CMD, C_READY, C_END, C_FIN, C_CREDIT, C_BYE };

/* 64 bytes on the wire, network byte order. */
struct ctrl_msg {
    uint32_t magic, type, test, size;
    uint64_t a, b;
    DAT_RMR_TRIPLET rmr;  /* HELLO: the sender's RDMA area */
    char text[16];
};
_Static_assert(sizeof(struct ctrl_msg) == CTRL_SIZE, "control message is 64 bytes");

/* Connect private data (network byte order). */
struct conn_pdata {
    uint32_t magic, version, flags, crc, max_size, window, nrecv, reserved;
};

struct sess {
    const struct perf_opts *o;
    DAT_IA_HANDLE ia;
    DAT_PZ_HANDLE pz;
    DAT_EVD_HANDLE dto_evd, conn_evd;
    DAT_EP_HANDLE ep;
    DAT_LMR_HANDLE lmr;
    DAT_LMR_CONTEXT lmr_ctx;
    DAT_RMR_CONTEXT rmr_ctx;
    char *region;
    size_t region_len;
    uint32_t slot;
    int nrecv;
    char *rdma, *local, *recvs, *recv_tail, *ctrl;
    DAT_RMR_TRIPLET peer;       /* host byte order */
    int poll, window, sig_every, read_depth, max_req;
    uint64_t req_posted, req_done;
    uint64_t ctrl_seq[CTRL_SLOTS];
    unsigned ctrl_next;
    int arr[MAX_WINDOW + CTRL_SLOTS + 8];
    uint32_t arr_len[MAX_WINDOW + CTRL_SLOTS + 8];
    int arr_head, arr_count;
    long credits;               /* send_bw: receives the peer has posted for us */
    double timeout;             /* seconds per wait */
    int notimpl;                /* some call said DAT_NOT_IMPLEMENTED */
    int closing;                /* BYE sent or received: flushes are expected */
    char err[256];
};

static void query_crc(DAT_EP_HANDLE ep, char *out, size_t len);

static const char *crc_text(enum crc_choice c)
{
    switch (c) {
    case CRC_ON: return "on";
    case CRC_OFF: return "off";
    case CRC_AUTO: return "auto";
    default: return "unset";
    }
}

/* Records a failed DAT call; returns -1 for "goto fail" chains. */
static int dat_fail(struct sess *s, const char *what, DAT_RETURN ret)
{
    char e[160];
    if (DAT_GET_TYPE(ret) == DAT_NOT_IMPLEMENTED)
        s->notimpl = 1;
    snprintf(s->err, sizeof(s->err), "%s: %s", what, perf_dat_strerror(ret, e, sizeof(e)));
    return -1;
}

static int fail(struct sess *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(struct sess *s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->err, sizeof(s->err), fmt, ap);
    va_end(ap);
    return -1;
}

#define DAT_TRY(s, call, what)                                  \
    do {                                                        \
        DAT_RETURN r_ = (call);                                 \
        if (r_ != DAT_SUCCESS)                                  \
            return dat_fail((s), (what), r_);                   \
    } while (0)

/* ------------------------------------------------------------ events */

/* One event from evd within timeout seconds: dat_evd_wait, or with -W a
 * dat_evd_dequeue spin that looks at the clock every 256 tries. */
static int get_event(struct sess *s, DAT_EVD_HANDLE evd, double timeout, DAT_EVENT *ev,
                     const char *what)
{
    DAT_RETURN ret;

    if (!s->poll) {
        DAT_COUNT nmore = 0;
        double t = timeout * 1e6;
        DAT_TIMEOUT us = t >= 4e9 ? DAT_TIMEOUT_INFINITE - 1 : (DAT_TIMEOUT)t;
        ret = dat_evd_wait(evd, us, 1, ev, &nmore);
        if (ret == DAT_SUCCESS)
            return 0;
        if (DAT_GET_TYPE(ret) == DAT_TIMEOUT_EXPIRED)
            return fail(s, "timed out after %.1f s waiting for %s", timeout, what);
        return dat_fail(s, "dat_evd_wait", ret);
    }
    double deadline = perf_now() + timeout;
    for (unsigned spins = 1;; spins++) {
        ret = dat_evd_dequeue(evd, ev);
        if (ret == DAT_SUCCESS)
            return 0;
        if (DAT_GET_TYPE(ret) != DAT_QUEUE_EMPTY)
            return dat_fail(s, "dat_evd_dequeue", ret);
        if ((spins & 255) == 0 && (perf_now() > deadline || perf_stop))
            return fail(s, "timed out after %.1f s waiting for %s", timeout, what);
    }
}

/* A receive slot: a head of its own, CTRL_SIZE bytes (a whole control
 * message, the first bytes of a data message), and the rest of the
 * largest message in one area every receive shares. Nothing past a head
 * is looked at, so receives in flight may overwrite each other there:
 * payload lands in one message's worth of memory, as the raw-TCP
 * baseline's (and perftest's) one buffer. With a buffer per receive (40 of
 * 1 MiB) send_bw measured the memory system more than the transport: a
 * cold 40 MiB working set took 1.6-2x the receiver's CPU per byte. */
static char *recv_head(struct sess *s, int slot)
{
    return s->recvs + (size_t)slot * CTRL_SIZE;
}

static int repost(struct sess *s, int slot)
{
    DAT_LMR_TRIPLET iov[2] = {
        { (DAT_VADDR)(uintptr_t)recv_head(s, slot), CTRL_SIZE, s->lmr_ctx },
        { (DAT_VADDR)(uintptr_t)s->recv_tail, s->slot - CTRL_SIZE, s->lmr_ctx },
    };
    DAT_DTO_COOKIE ck = { .as_64 = (DAT_UINT64)slot };
    DAT_TRY(s, dat_ep_post_recv(s->ep, s->slot > CTRL_SIZE ? 2 : 1, iov, ck, DAT_COMPLETION_DEFAULT_FLAG),
            "dat_ep_post_recv");
    return 0;
}

static const struct ctrl_msg *as_ctrl(struct sess *s, int slot, uint32_t len)
{
    const struct ctrl_msg *m = (const void *)recv_head(s, slot);
    if (len == CTRL_SIZE && ntohl(m->magic) == CTRL_MAGIC)
        return m;
    return NULL;
}

static const char *dto_op_name(DAT_DTOS op)
{
    switch (op) {
    case DAT_DTO_SEND: return "Send";
    case DAT_DTO_RDMA_WRITE: return "RDMA Write";
    case DAT_DTO_RDMA_READ: return "RDMA Read";
    case DAT_DTO_RECEIVE: return "Receive";
    default: return "DTO";
    }
}

static const char *dto_status_name(DAT_DTO_COMPLETION_STATUS st)
{
    static const char *const n[] = {
        "DAT_DTO_SUCCESS", "DAT_DTO_ERR_FLUSHED", "DAT_DTO_ERR_LOCAL_LENGTH",
        "DAT_DTO_ERR_LOCAL_EP", "DAT_DTO_ERR_LOCAL_PROTECTION", "DAT_DTO_ERR_BAD_RESPONSE",
        "DAT_DTO_ERR_REMOTE_ACCESS", "DAT_DTO_ERR_REMOTE_RESPONDER", "DAT_DTO_ERR_TRANSPORT",
        "DAT_DTO_ERR_RECEIVER_NOT_READY", "DAT_DTO_ERR_PARTIAL_PACKET", "DAT_RMR_OPERATION_FAILED",
        "DAT_DTO_ERR_LOCAL_MM_ERROR",
    };
    return (unsigned)st < sizeof(n) / sizeof(n[0]) ? n[st] : "unknown";
}

static int account(struct sess *s, const DAT_EVENT *ev);

/* Waits for one DTO event and accounts for it. CREDIT messages are
 * consumed here; other receives are queued for wait_msg. */
static int pump(struct sess *s, const char *what)
{
    DAT_EVENT ev;

    if (get_event(s, s->dto_evd, s->timeout, &ev, what) != 0) {
        /* A timeout is often a lost connection: say so if we know. */
        DAT_EVENT cev;
        if (dat_evd_dequeue(s->conn_evd, &cev) == DAT_SUCCESS &&
            cev.event_number != DAT_CONNECTION_EVENT_ESTABLISHED) {
            size_t l = strlen(s->err);
            snprintf(s->err + l, sizeof(s->err) - l, " (connection event 0x%x)",
                     (unsigned)cev.event_number);
        }
        return -1;
    }
    return account(s, &ev);
}

/* With -W, one non-blocking look at the DTO EVD (accounting for what it
 * finds). A consumer that polls memory calls into its provider too, as
 * UCX's put_lat calls ucp_worker_progress while it polls: on a soft RNIC
 * that call is what moves the peer's Write into memory without waiting for
 * the provider's own thread to be scheduled. */
static int pump_nowait(struct sess *s)
{
    DAT_EVENT ev;
    DAT_RETURN ret = dat_evd_dequeue(s->dto_evd, &ev);
    if (ret == DAT_SUCCESS)
        return account(s, &ev);
    if (DAT_GET_TYPE(ret) != DAT_QUEUE_EMPTY)
        return dat_fail(s, "dat_evd_dequeue", ret);
    return 0;
}

static int account(struct sess *s, const DAT_EVENT *ev)
{
    if (ev->event_number != DAT_DTO_COMPLETION_EVENT)
        return fail(s, "unexpected event 0x%x on the DTO EVD", (unsigned)ev->event_number);
    const DAT_DTO_COMPLETION_EVENT_DATA *d = &ev->event_data.dto_completion_event_data;
    if (s->closing && d->status == DAT_DTO_ERR_FLUSHED) {
        /* After BYE the peer disconnects: our receives are flushed. */
        if (d->operation != DAT_DTO_RECEIVE && d->user_cookie.as_64 < s->req_posted &&
            d->user_cookie.as_64 >= s->req_done)
            s->req_done = d->user_cookie.as_64 + 1;
        return 0;
    }
    if (d->status != DAT_DTO_SUCCESS)
        return fail(s, "%s completion with status %s (%d)%s", dto_op_name(d->operation),
                    dto_status_name(d->status), (int)d->status,
                    d->status == DAT_DTO_ERR_FLUSHED ? ": the connection is gone (peer exited?)" : "");
    if (d->operation == DAT_DTO_RECEIVE) {
        int slot = (int)d->user_cookie.as_64;
        if (slot < 0 || slot >= s->nrecv)
            return fail(s, "receive completion with a bad cookie %d", slot);
        const struct ctrl_msg *m = as_ctrl(s, slot, d->transfered_length);
        if (m != NULL && ntohl(m->type) == C_CREDIT) {
            s->credits += (long)be64toh(m->a);
            return repost(s, slot);
        }
        if (s->arr_count >= (int)(sizeof(s->arr) / sizeof(s->arr[0])))
            return fail(s, "too many unprocessed receives");
        int i = (s->arr_head + s->arr_count) % (int)(sizeof(s->arr) / sizeof(s->arr[0]));
        s->arr[i] = slot;
        s->arr_len[i] = d->transfered_length;
        s->arr_count++;
        return 0;
    }
    uint64_t q = d->user_cookie.as_64;
    if (q >= s->req_posted || q < s->req_done)
        return fail(s, "request completion out of order (cookie %llu, done %llu, posted %llu)",
                    (unsigned long long)q, (unsigned long long)s->req_done,
                    (unsigned long long)s->req_posted);
    s->req_done = q + 1;
    return 0;
}

/* The next received message (data or control); the caller reposts. */
static int wait_msg(struct sess *s, int *slot, uint32_t *len, const char *what)
{
    while (s->arr_count == 0)
        if (pump(s, what) != 0)
            return -1;
    *slot = s->arr[s->arr_head];
    *len = s->arr_len[s->arr_head];
    s->arr_head = (s->arr_head + 1) % (int)(sizeof(s->arr) / sizeof(s->arr[0]));
    s->arr_count--;
    return 0;
}

static int drain_requests(struct sess *s)
{
    while (s->req_done < s->req_posted)
        if (pump(s, "request completions") != 0)
            return -1;
    return 0;
}

enum req_kind { R_SEND, R_WRITE, R_READ };

/* Posts one request of len bytes from/to addr, keeping at most depth
 * unretired; signalled when forced or every sig_every-th. */
static int post_req(struct sess *s, enum req_kind k, void *addr, uint32_t len, int depth,
                    int force_signal)
{
    while (s->req_posted - s->req_done >= (uint64_t)depth)
        if (pump(s, "a free request slot") != 0)
            return -1;
    uint64_t seq = s->req_posted;
    /* Among any `depth` consecutive posts at least one must be signalled,
     * or a full window could never retire. */
    int every = depth / 4 > 0 ? depth / 4 : 1;
    if (every > s->sig_every)
        every = s->sig_every;
    int sig = force_signal || ((seq + 1) % (uint64_t)every) == 0;
    DAT_COMPLETION_FLAGS fl = sig ? DAT_COMPLETION_DEFAULT_FLAG : DAT_COMPLETION_SUPPRESS_FLAG;
    DAT_LMR_TRIPLET iov = { (DAT_VADDR)(uintptr_t)addr, len, s->lmr_ctx };
    DAT_RMR_TRIPLET rem = { s->peer.virtual_address, len, s->peer.rmr_context };
    DAT_DTO_COOKIE ck = { .as_64 = seq };
    DAT_RETURN ret;

    switch (k) {
    case R_SEND: ret = dat_ep_post_send(s->ep, 1, &iov, ck, fl); break;
    case R_WRITE: ret = dat_ep_post_rdma_write(s->ep, 1, &iov, ck, &rem, fl); break;
    default: ret = dat_ep_post_rdma_read(s->ep, 1, &iov, ck, &rem, fl); break;
    }
    if (ret != DAT_SUCCESS)
        return dat_fail(s, k == R_SEND ? "dat_ep_post_send" :
                           k == R_WRITE ? "dat_ep_post_rdma_write" : "dat_ep_post_rdma_read", ret);
    s->req_posted++;
    return 0;
}

static int send_ctrl(struct sess *s, uint32_t type, uint32_t test, uint32_t size, uint64_t a,
                     uint64_t b, int with_rmr)
{
    unsigned c = s->ctrl_next++ % CTRL_SLOTS;
    while (s->ctrl_seq[c] != 0 && s->req_done < s->ctrl_seq[c])
        if (pump(s, "a free control buffer") != 0)
            return -1;
    struct ctrl_msg *m = (void *)(s->ctrl + (size_t)c * CTRL_SIZE);
    memset(m, 0, sizeof(*m));
    m->magic = htonl(CTRL_MAGIC);
    m->type = htonl(type);
    m->test = htonl(test);
    m->size = htonl(size);
    m->a = htobe64(a);
    m->b = htobe64(b);
    if (with_rmr) {
        m->rmr.virtual_address = htobe64((uint64_t)(uintptr_t)s->rdma);
        m->rmr.segment_length = htonl(s->slot);
        m->rmr.rmr_context = htonl(s->rmr_ctx);
        snprintf(m->text, sizeof(m->text), "crc=%s", crc_text(s->o->crc));
    }
    s->ctrl_seq[c] = s->req_posted + 1;
    return post_req(s, R_SEND, m, CTRL_SIZE, s->max_req, 1);
}

/* Waits for a control message of the given type; data is a protocol error. */
static int wait_ctrl(struct sess *s, uint32_t type, struct ctrl_msg *out, const char *what)
{
    int slot;
    uint32_t len;
    if (wait_msg(s, &slot, &len, what) != 0)
        return -1;
    const struct ctrl_msg *m = as_ctrl(s, slot, len);
    if (m == NULL || ntohl(m->type) != type)
        return fail(s, "protocol error: expected %s, got %s (%u bytes)", what,
                    m ? "another control message" : "data", len);
    *out = *m;
    return repost(s, slot);
}

/* ------------------------------------------------------------ setup / teardown */

static int sess_open_ia(struct sess *s, DAT_IA_HANDLE *ia)
{
    DAT_EVD_HANDLE async_evd = DAT_HANDLE_NULL;
    char *name = strdup(s->o->ia_name);
    if (name == NULL)
        return fail(s, "out of memory");
    if (s->o->crc != CRC_UNSET)
        setenv("SOFTDAT_CRC", crc_text(s->o->crc), 1);
    DAT_RETURN ret = dat_ia_open(name, 8, &async_evd, ia);
    free(name);
    if (ret != DAT_SUCCESS)
        return dat_fail(s, "dat_ia_open", ret);
    return 0;
}

/* Everything per connection: EVDs, memory, EP, posted receives. */
static int sess_setup(struct sess *s, uint32_t max_size, int window, int poll_mode)
{
    DAT_IA_ATTR ia_attr;
    DAT_EP_ATTR attr;

    memset(&ia_attr, 0, sizeof(ia_attr));
    DAT_TRY(s, dat_ia_query(s->ia, NULL, DAT_IA_FIELD_ALL, &ia_attr, DAT_PROVIDER_FIELD_NONE, NULL),
            "dat_ia_query");
    s->poll = poll_mode;
    s->window = window;
    s->sig_every = window / 4 > 0 ? window / 4 : 1;
    s->slot = (max_size + 63u) & ~63u;
    if (s->slot < CTRL_SIZE)
        s->slot = CTRL_SIZE;
    if (ia_attr.max_message_size != 0 && max_size > ia_attr.max_message_size)
        return fail(s, "size %u exceeds the IA's max_message_size %u", max_size,
                    (unsigned)ia_attr.max_message_size);
    s->nrecv = window + CTRL_RESERVE + 4;
    s->max_req = window + CTRL_SLOTS;
    s->read_depth = window;
    if (ia_attr.max_rdma_read_per_ep_out > 0 && s->read_depth > ia_attr.max_rdma_read_per_ep_out)
        s->read_depth = ia_attr.max_rdma_read_per_ep_out;
    int ird = window;
    if (ia_attr.max_rdma_read_per_ep_in > 0 && ird > ia_attr.max_rdma_read_per_ep_in)
        ird = ia_attr.max_rdma_read_per_ep_in;

    s->region_len = (size_t)s->slot * 3 + (size_t)s->nrecv * CTRL_SIZE + CTRL_SLOTS * CTRL_SIZE;
    s->region_len = (s->region_len + 4095) & ~(size_t)4095;
    s->region = aligned_alloc(4096, s->region_len);
    if (s->region == NULL)
        return fail(s, "cannot allocate %zu bytes", s->region_len);
    memset(s->region, 0, s->region_len);
    s->rdma = s->region;
    s->local = s->region + s->slot;
    s->recvs = s->local + s->slot;
    s->recv_tail = s->recvs + (size_t)s->nrecv * CTRL_SIZE;
    s->ctrl = s->recv_tail + s->slot;
    memset(s->local, 'D', s->slot);

    DAT_TRY(s, dat_evd_create(s->ia, s->nrecv + s->max_req + 16, DAT_HANDLE_NULL,
                              DAT_EVD_DTO_FLAG, &s->dto_evd), "dat_evd_create (DTO)");
    DAT_TRY(s, dat_evd_create(s->ia, 8, DAT_HANDLE_NULL, DAT_EVD_CONNECTION_FLAG, &s->conn_evd),
            "dat_evd_create (connection)");
    DAT_REGION_DESCRIPTION rd = { .for_va = s->region };
    DAT_VLEN reg_len = 0;
    DAT_VADDR reg_addr = 0;
    DAT_TRY(s, dat_lmr_create(s->ia, DAT_MEM_TYPE_VIRTUAL, rd, s->region_len, s->pz,
                              DAT_MEM_PRIV_ALL_FLAG, DAT_VA_TYPE_VA, &s->lmr, &s->lmr_ctx,
                              &s->rmr_ctx, &reg_len, &reg_addr), "dat_lmr_create");

    memset(&attr, 0, sizeof(attr));
    attr.service_type = DAT_SERVICE_TYPE_RC;
    attr.max_message_size = s->slot;
    attr.max_rdma_size = s->slot;
    attr.qos = DAT_QOS_BEST_EFFORT;
    attr.recv_completion_flags = DAT_COMPLETION_DEFAULT_FLAG;
    attr.request_completion_flags = DAT_COMPLETION_DEFAULT_FLAG;
    /* Headroom over what we ever keep outstanding: a provider may release a
     * queue slot a moment after the completion event is visible, and an
     * immediate repost must not fail for that. */
    attr.max_recv_dtos = s->nrecv + QUEUE_HEADROOM;
    attr.max_request_dtos = s->max_req + QUEUE_HEADROOM;
    attr.max_recv_iov = 2;
    attr.max_request_iov = 1;
    attr.max_rdma_read_in = ird;
    attr.max_rdma_read_out = s->read_depth;
    attr.srq_soft_hw = DAT_HW_DEFAULT;
    attr.max_rdma_read_iov = 1;
    attr.max_rdma_write_iov = 1;
    DAT_TRY(s, dat_ep_create(s->ia, s->pz, s->dto_evd, s->dto_evd, s->conn_evd, &attr, &s->ep),
            "dat_ep_create");
    for (int i = 0; i < s->nrecv; i++)
        if (repost(s, i) != 0)
            return -1;
    s->timeout = s->o->op_timeout + s->o->time_cap;
    return 0;
}

/* Disconnects (if connected) and frees the per-connection objects. */
static void sess_teardown(struct sess *s, int connected)
{
    char e[160];
    DAT_RETURN ret;

    if (s->ep != DAT_HANDLE_NULL && connected) {
        ret = dat_ep_disconnect(s->ep, DAT_CLOSE_GRACEFUL_FLAG);
        if (ret != DAT_SUCCESS)
            ret = dat_ep_disconnect(s->ep, DAT_CLOSE_ABRUPT_FLAG);
        if (ret == DAT_SUCCESS) {
            /* Bounded: a few events, 5 s at most. */
            double deadline = perf_now() + 5.0;
            for (int i = 0; i < 8 && perf_now() < deadline; i++) {
                DAT_EVENT ev;
                DAT_COUNT nmore;
                ret = dat_evd_wait(s->conn_evd, 500000, 1, &ev, &nmore);
                if (ret == DAT_SUCCESS && (ev.event_number == DAT_CONNECTION_EVENT_DISCONNECTED ||
                                           ev.event_number == DAT_CONNECTION_EVENT_BROKEN))
                    break;
            }
        } else if (s->o->verbose) {
            perf_progress("dat_ep_disconnect: %s", perf_dat_strerror(ret, e, sizeof(e)));
        }
    }
    if (s->o->verbose)
        perf_print_counters(s->ia, s->ep, s->dto_evd);
    if (s->ep != DAT_HANDLE_NULL && (ret = dat_ep_free(s->ep)) != DAT_SUCCESS)
        perf_progress("warning: dat_ep_free: %s", perf_dat_strerror(ret, e, sizeof(e)));
    if (s->lmr != DAT_HANDLE_NULL && (ret = dat_lmr_free(s->lmr)) != DAT_SUCCESS)
        perf_progress("warning: dat_lmr_free: %s", perf_dat_strerror(ret, e, sizeof(e)));
    if (s->dto_evd != DAT_HANDLE_NULL && (ret = dat_evd_free(s->dto_evd)) != DAT_SUCCESS)
        perf_progress("warning: dat_evd_free: %s", perf_dat_strerror(ret, e, sizeof(e)));
    if (s->conn_evd != DAT_HANDLE_NULL && (ret = dat_evd_free(s->conn_evd)) != DAT_SUCCESS)
        perf_progress("warning: dat_evd_free: %s", perf_dat_strerror(ret, e, sizeof(e)));
    free(s->region);
    s->ep = s->lmr = s->dto_evd = s->conn_evd = DAT_HANDLE_NULL;
    s->region = NULL;
}

static void close_ia(DAT_IA_HANDLE ia, DAT_PZ_HANDLE pz)
{
    char e[160];
    DAT_RETURN ret;
    if (pz != DAT_HANDLE_NULL && (ret = dat_pz_free(pz)) != DAT_SUCCESS)
        perf_progress("warning: dat_pz_free: %s", perf_dat_strerror(ret, e, sizeof(e)));
    if (ia == DAT_HANDLE_NULL)
        return;
    ret = dat_ia_close(ia, DAT_CLOSE_GRACEFUL_FLAG);
    if (ret != DAT_SUCCESS) {
        ret = dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
        if (ret != DAT_SUCCESS)
            perf_progress("warning: dat_ia_close: %s", perf_dat_strerror(ret, e, sizeof(e)));
    }
}

static void take_peer_rmr(struct sess *s, const struct ctrl_msg *m)
{
    s->peer.virtual_address = be64toh(m->rmr.virtual_address);
    s->peer.segment_length = ntohl(m->rmr.segment_length);
    s->peer.rmr_context = ntohl(m->rmr.rmr_context);
}

/* The value a Write ping-pong leaves in the last byte: never 0, changes
 * every iteration, high bit on the last one. */
static inline uint8_t wl_mark(long i, int last)
{
    return (uint8_t)(((i % 127) + 1) | (last ? 0x80 : 0));
}

/* Spins until the last byte of the rdma area reads want (or want|0x80 when
 * any_last). Returns the byte, or -1 on timeout. Polling memory that the
 * peer's RNIC writes is the RDMA idiom (the NIC is no thread the compiler
 * or ThreadSanitizer knows about), so this reader is not instrumented. */
__attribute__((no_sanitize("thread"))) static int spin_byte(struct sess *s, uint32_t size, uint8_t want, int any_last)
{
    volatile uint8_t *p = (volatile uint8_t *)(s->rdma + size - 1);
    double deadline = 0;
    for (unsigned spins = 1;; spins++) {
        uint8_t v = __atomic_load_n(p, __ATOMIC_ACQUIRE);
        if (v == want || (any_last && v == (want | 0x80)))
            return v;
        if (s->poll) {
            /* -W: drive the provider, as a polling RDMA program does. */
            if (pump_nowait(s) != 0)
                return -1;
        } else if (spins > 2048) {
            /* Blocking mode leaves progress to the provider's threads: spin
             * briefly, then yield, or on a machine with few CPUs the spin
             * starves them (the ones that will write this byte) for a whole
             * scheduler quantum. */
            sched_yield();
        }
        if ((spins & 1023) == 0) {
            double now = perf_now();
            if (deadline == 0)
                deadline = now + s->timeout;
            else if (now > deadline || perf_stop)
                return fail(s, "timed out waiting for the peer's RDMA Write (last byte 0x%02x, "
                               "want 0x%02x)", (unsigned)v, (unsigned)want);
        }
    }
}

/* ------------------------------------------------------------ server */

/* The server's half of one test; returns at the client's END (or the last
 * Write of a Write ping-pong). */
static int serve_test(struct sess *s, uint32_t test, uint32_t size)
{
    int slot;
    uint32_t len;

    if (test == T_WRITE_LAT) {
        for (long i = 0; i < SERVER_LOOP_MAX; i++) {
            uint8_t want = wl_mark(i, 0);
            int v = spin_byte(s, size, want, 1);
            if (v < 0)
                return -1;
            s->local[size - 1] = (char)v;
            if (post_req(s, R_WRITE, s->local, size, s->window, (v & 0x80) != 0) != 0)
                return -1;
            if (v & 0x80) {
                /* Sends start with 'D': restore the byte once the Write is done. */
                if (drain_requests(s) != 0)
                    return -1;
                s->local[size - 1] = 'D';
                return 0;
            }
        }
        return fail(s, "more than %ld Write ping-pongs", SERVER_LOOP_MAX);
    }
    long count = 0, since_credit = 0;
    long credit_batch = (s->nrecv - CTRL_RESERVE) / 4 > 0 ? (s->nrecv - CTRL_RESERVE) / 4 : 1;
    for (long step = 0;; step++) {
        if (step >= SERVER_LOOP_MAX)
            return fail(s, "more than %ld messages in one test", SERVER_LOOP_MAX);
        if (wait_msg(s, &slot, &len, "the client's next message") != 0)
            return -1;
        const struct ctrl_msg *c = as_ctrl(s, slot, len);
        if (c != NULL) {
            uint32_t type = ntohl(c->type);
            if (repost(s, slot) != 0)
                return -1;
            if (type != C_END)
                return fail(s, "protocol error: control message %u during a test", type);
            if (test == T_WRITE_BW && (s->rdma[0] != 'D' || s->rdma[size - 1] != 'D'))
                return fail(s, "RDMA Write data not in place at END: bytes 0x%02x..0x%02x, want 'D'",
                            (unsigned)(uint8_t)s->rdma[0], (unsigned)(uint8_t)s->rdma[size - 1]);
            return send_ctrl(s, C_FIN, test, size, (uint64_t)count, (uint64_t)since_credit, 0);
        }
        if (len != size || recv_head(s, slot)[0] != 'D')
            return fail(s, "bad data message: %u bytes (want %u)", len, size);
        count++;
        if (repost(s, slot) != 0)
            return -1;
        if (test == T_SEND_LAT) {
            if (post_req(s, R_SEND, s->local, size, s->window, 0) != 0)
                return -1;
        } else if (test == T_SEND_BW) {
            if (++since_credit >= credit_batch) {
                if (send_ctrl(s, C_CREDIT, test, size, (uint64_t)since_credit, 0, 0) != 0)
                    return -1;
                since_credit = 0;
            }
        } else {
            return fail(s, "protocol error: data message during %s", perf_test_name((int)test));
        }
    }
}

/* One client connection, from the connection request to the teardown.
 * *raw_follows tells the caller whether the client will use raw TCP next. */
static int serve_session(const struct perf_opts *o, DAT_IA_HANDLE ia, DAT_PZ_HANDLE pz,
                         DAT_CR_HANDLE cr, int *raw_follows)
{
    struct sess *s = calloc(1, sizeof(*s));
    DAT_CR_PARAM crp;
    struct conn_pdata pd;
    struct ctrl_msg m;
    int connected = 0, rc = -1;
    DAT_EVENT ev;

    if (s == NULL)
        return -1;
    s->o = o;
    s->ia = ia;
    s->pz = pz;
    s->timeout = o->op_timeout;
    *raw_follows = 0;
    memset(&crp, 0, sizeof(crp));
    DAT_RETURN ret = dat_cr_query(cr, DAT_CR_FIELD_ALL, &crp);
    if (ret != DAT_SUCCESS) {
        dat_fail(s, "dat_cr_query", ret);
        dat_cr_reject(cr, 0, NULL);
        goto out;
    }
    memset(&pd, 0, sizeof(pd));
    if (crp.private_data != NULL && crp.private_data_size >= (DAT_COUNT)sizeof(pd))
        memcpy(&pd, crp.private_data, sizeof(pd));
    uint32_t max_size = ntohl(pd.max_size), window = ntohl(pd.window), flags = ntohl(pd.flags);
    if (ntohl(pd.magic) != PDATA_MAGIC || ntohl(pd.version) != PDATA_VERSION ||
        max_size == 0 || max_size > MAX_SIZE_LIMIT || window == 0 || window > MAX_WINDOW) {
        fail(s, "connection request without softdat-perf private data: rejected");
        dat_cr_reject(cr, 0, NULL);
        goto out;
    }
    *raw_follows = (flags & PD_RAW_FOLLOWS) != 0;
    enum crc_choice ccrc = (enum crc_choice)ntohl(pd.crc);
    perf_progress("client connected: max size %u, window %u, %s, crc client=%s server=%s", max_size,
                  window, (flags & PD_POLL) ? "polling" : "blocking", crc_text(ccrc),
                  crc_text(o->crc));
    if (sess_setup(s, max_size, (int)window, (flags & PD_POLL) != 0) != 0) {
        dat_cr_reject(cr, 0, NULL);
        goto out;
    }
    ret = dat_cr_accept(cr, s->ep, 0, NULL);
    if (ret != DAT_SUCCESS) {
        dat_fail(s, "dat_cr_accept", ret);
        goto out;
    }
    if (get_event(s, s->conn_evd, o->op_timeout, &ev, "the connection to be established") != 0)
        goto out;
    if (ev.event_number != DAT_CONNECTION_EVENT_ESTABLISHED) {
        fail(s, "accept: connection event 0x%x, not ESTABLISHED", (unsigned)ev.event_number);
        goto out;
    }
    connected = 1;
    {
        char crc[16];
        query_crc(s->ep, crc, sizeof(crc));
        perf_progress("connection established: MPA CRC %s", crc[0] ? crc : "not reported");
    }
    if (wait_ctrl(s, C_HELLO, &m, "the client's HELLO") != 0)
        goto out;
    take_peer_rmr(s, &m);
    if (send_ctrl(s, C_HELLO, 0, 0, 0, 0, 1) != 0)
        goto out;

    /* Bounded: one command per test, size and repetition (at most 64), plus
     * the BYE. */
    for (int n = 0; n < T_COUNT * MAX_SIZES * 65 + 1 && !perf_stop; n++) {
        int slot;
        uint32_t len;
        if (wait_msg(s, &slot, &len, "the client's next command") != 0)
            goto out;
        const struct ctrl_msg *c = as_ctrl(s, slot, len);
        if (c == NULL) {
            fail(s, "protocol error: data message between tests");
            goto out;
        }
        m = *c;
        if (repost(s, slot) != 0)
            goto out;
        if (ntohl(m.type) == C_BYE) {
            s->closing = 1;
            rc = 0;
            goto out;
        }
        if (ntohl(m.type) != C_CMD) {
            fail(s, "protocol error: control message %u between tests", ntohl(m.type));
            goto out;
        }
        uint32_t test = ntohl(m.test), size = ntohl(m.size);
        if (test >= T_COUNT || size == 0 || size > s->slot) {
            fail(s, "bad command: test %u size %u", test, size);
            goto out;
        }
        s->timeout = s->o->op_timeout + (double)be64toh(m.a) / 1000.0;
        if (test == T_WRITE_LAT)
            s->rdma[size - 1] = 0;
        if (test == T_READ_LAT || test == T_READ_BW)
            memset(s->rdma, READ_FILL, size);   /* the client checks what it read */
        long credits = s->nrecv - CTRL_RESERVE;
        if (send_ctrl(s, C_READY, test, size, (uint64_t)credits, 0, 0) != 0 ||
            serve_test(s, test, size) != 0)
            goto out;
    }
    fail(s, "too many commands");
out:
    if (rc != 0 && s->err[0] != '\0')
        perf_err("DAT session: %s", s->err);
    if (connected && rc == 0)
        drain_requests(s);
    sess_teardown(s, connected);
    if (rc == 0)
        perf_progress("client session over");
    free(s);
    return rc;
}

int perf_server_run(const struct perf_opts *o)
{
    struct sess boot;
    DAT_IA_HANDLE ia = DAT_HANDLE_NULL;
    DAT_PZ_HANDLE pz = DAT_HANDLE_NULL;
    DAT_EVD_HANDLE cr_evd = DAT_HANDLE_NULL;
    DAT_PSP_HANDLE psp = DAT_HANDLE_NULL;
    DAT_IA_ATTR ia_attr;
    DAT_SOCK_ADDR *addr = NULL;
    struct sockaddr_storage addr_copy;
    int dat_ok = 0, rc = PERF_EXIT_OK, rawfd;
    char e[160];

    memset(&boot, 0, sizeof(boot));
    boot.o = o;
    if (o->raw_only) {
        snprintf(boot.err, sizeof(boot.err), "--raw-tcp given");
    } else if (sess_open_ia(&boot, &ia) != 0) {
        /* Serving only raw TCP would look like a working server to the
         * user and to a client; a wrong IA name is a mistake to report. */
        perf_err("cannot open IA '%s' (%s); 'softdat-info -l' lists the IAs the registry knows",
                 o->ia_name, boot.err);
        return PERF_EXIT_CONNECT;
    } else {
        DAT_RETURN ret;
        memset(&ia_attr, 0, sizeof(ia_attr));
        if ((ret = dat_ia_query(ia, NULL, DAT_IA_FIELD_ALL, &ia_attr, DAT_PROVIDER_FIELD_NONE,
                                NULL)) == DAT_SUCCESS && ia_attr.ia_address_ptr != NULL) {
            memset(&addr_copy, 0, sizeof(addr_copy));
            memcpy(&addr_copy, ia_attr.ia_address_ptr,
                   ia_attr.ia_address_ptr->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
                                                                 : sizeof(struct sockaddr_in));
            addr = (DAT_SOCK_ADDR *)&addr_copy;
        }
        if (ret != DAT_SUCCESS)
            dat_fail(&boot, "dat_ia_query", ret);
        else if ((ret = dat_pz_create(ia, &pz)) != DAT_SUCCESS)
            dat_fail(&boot, "dat_pz_create", ret);
        else if ((ret = dat_evd_create(ia, 8, DAT_HANDLE_NULL, DAT_EVD_CR_FLAG, &cr_evd)) != DAT_SUCCESS)
            dat_fail(&boot, "dat_evd_create (CR)", ret);
        else if ((ret = dat_psp_create(ia, o->port, cr_evd, DAT_PSP_CONSUMER_FLAG, &psp)) != DAT_SUCCESS)
            dat_fail(&boot, "dat_psp_create", ret);
        else
            dat_ok = 1;
    }
    if (!dat_ok && !boot.notimpl && strstr(boot.err, "dat_psp_create") != NULL) {
        /* The port is taken (or similar): a real error, not a missing feature. */
        perf_err("%s (conn_qual %u)", boot.err, o->port);
        rc = PERF_EXIT_FAIL;
        goto out;
    }
    if (!dat_ok && !o->raw_only)
        perf_err("DAT unavailable on %s: %s; serving raw TCP only", o->ia_name, boot.err);

    rawfd = raw_listen(addr, o->port + 1);
    if (rawfd < 0) {
        perf_err("raw TCP: cannot listen on port %u: %s", o->port + 1, strerror(errno));
        rc = PERF_EXIT_FAIL;
        goto out;
    }
    {
        char a[64] = "127.0.0.1";
        if (addr != NULL && addr->sa_family == AF_INET)
            inet_ntop(AF_INET, &((struct sockaddr_in *)(void *)addr)->sin_addr, a, sizeof(a));
        else if (addr != NULL && addr->sa_family == AF_INET6)
            inet_ntop(AF_INET6, &((struct sockaddr_in6 *)(void *)addr)->sin6_addr, a, sizeof(a));
        if (o->raw_only)
            perf_progress("server ready: raw TCP only (--raw-tcp), %s port %u", a, o->port + 1);
        else
            perf_progress("server ready: DAT IA %s conn_qual %u%s; raw TCP %s port %u", o->ia_name,
                          o->port, dat_ok ? "" : " (unavailable)", a, o->port + 1);
    }

    double deadline = perf_now() + o->idle_timeout;
    int dat_err_shown = 0;
    while (!perf_stop) {
        if (perf_now() > deadline) {
            perf_err("no client for %.0f s; exiting", o->idle_timeout);
            rc = PERF_EXIT_FAIL;
            break;
        }
        struct pollfd pfd = { rawfd, POLLIN, 0 };
        if (poll(&pfd, 1, 10) > 0) {
            int fd = accept4(rawfd, NULL, NULL, SOCK_CLOEXEC);
            if (fd >= 0) {
                int last = 0;
                int r = raw_serve_conn(o, fd, &last);
                if (r != 0)
                    rc = PERF_EXIT_FAIL;
                else
                    perf_progress("raw TCP session over");
                if (last && !o->persist)
                    break;
                deadline = perf_now() + o->idle_timeout;
            }
        }
        if (!dat_ok)
            continue;
        DAT_EVENT ev;
        DAT_RETURN ret = dat_evd_dequeue(cr_evd, &ev);
        if (DAT_GET_TYPE(ret) == DAT_QUEUE_EMPTY)
            continue;
        if (ret != DAT_SUCCESS) {
            if (!dat_err_shown)
                perf_err("dat_evd_dequeue (CR): %s; serving raw TCP only",
                         perf_dat_strerror(ret, e, sizeof(e)));
            dat_err_shown = 1;
            dat_ok = 0;
            continue;
        }
        if (ev.event_number != DAT_CONNECTION_REQUEST_EVENT)
            continue;
        int raw_follows = 0;
        if (serve_session(o, ia, pz, ev.event_data.cr_arrival_event_data.cr_handle,
                          &raw_follows) != 0)
            rc = PERF_EXIT_FAIL;
        if (!raw_follows && !o->persist)
            break;
        deadline = perf_now() + o->idle_timeout;
    }
    close(rawfd);
out:
    if (psp != DAT_HANDLE_NULL && dat_psp_free(psp) != DAT_SUCCESS)
        perf_progress("warning: dat_psp_free failed");
    if (cr_evd != DAT_HANDLE_NULL && dat_evd_free(cr_evd) != DAT_SUCCESS)
        perf_progress("warning: dat_evd_free (CR) failed");
    close_ia(ia, pz);
    return rc;
}

/* ------------------------------------------------------------ client */

static int begin_test(struct sess *s, int test, uint32_t size, struct ctrl_msg *ready)
{
    /* a: our time cap (ms), so the server waits long enough for our END. */
    if (send_ctrl(s, C_CMD, (uint32_t)test, size, (uint64_t)(s->o->time_cap * 1000), 0, 0) != 0)
        return -1;
    return wait_ctrl(s, C_READY, ready, "the server's READY");
}

static int end_test(struct sess *s, int test, uint32_t size, struct ctrl_msg *fin)
{
    if (send_ctrl(s, C_END, (uint32_t)test, size, 0, 0, 0) != 0)
        return -1;
    return wait_ctrl(s, C_FIN, fin, "the server's FIN");
}

/* After a Read test the local area holds the server's READ_FILL bytes:
 * check them, then restore the 'D' that Sends and Writes start with. */
static int check_read_data(struct sess *s, uint32_t size)
{
    uint32_t at[3] = { 0, size / 2, size - 1 };
    for (int i = 0; i < 3; i++)
        if (s->local[at[i]] != READ_FILL)
            return fail(s, "RDMA Read data wrong at offset %u: 0x%02x, want 0x%02x", at[i],
                        (unsigned)(uint8_t)s->local[at[i]], (unsigned)READ_FILL);
    memset(s->local, 'D', size);
    return 0;
}

static int client_lat(struct sess *s, int test, uint32_t size, struct perf_result *r)
{
    const struct perf_opts *o = s->o;
    long warm = o->iters / 10 < 100 ? o->iters / 10 : 100, total = o->iters + warm, got = 0;
    double *samples = calloc((size_t)o->iters, sizeof(double));
    struct ctrl_msg m;
    int slot;
    uint32_t len;

    if (samples == NULL)
        return fail(s, "out of memory");
    if (test == T_WRITE_LAT)
        s->rdma[size - 1] = 0;
    if (begin_test(s, test, size, &m) != 0)
        goto fail;
    double start = perf_now();
    for (long i = 0; i < total; i++) {
        int last = i + 1 == total || perf_stop || (i >= warm && perf_now() - start >= o->time_cap);
        double t0 = perf_now();
        if (test == T_SEND_LAT) {
            if (post_req(s, R_SEND, s->local, size, s->window, 0) != 0 ||
                wait_msg(s, &slot, &len, "the server's Send") != 0)
                goto fail;
            if (len != size || as_ctrl(s, slot, len) != NULL) {
                fail(s, "bad reply: %u bytes, want %u", len, size);
                goto fail;
            }
            if (repost(s, slot) != 0)
                goto fail;
        } else if (test == T_WRITE_LAT) {
            uint8_t mark = wl_mark(i, last);
            s->local[size - 1] = (char)mark;
            if (post_req(s, R_WRITE, s->local, size, s->window, last) != 0 ||
                spin_byte(s, size, mark, 0) < 0)
                goto fail;
        } else {
            if (post_req(s, R_READ, s->local, size, 1, 1) != 0 || drain_requests(s) != 0)
                goto fail;
        }
        double t1 = perf_now();
        if (i >= warm)
            samples[got++] = (t1 - t0) * 1e6 / (test == T_READ_LAT ? 1.0 : 2.0);
        if (last)
            break;
    }
    if (test != T_WRITE_LAT && end_test(s, test, size, &m) != 0)
        goto fail;
    if (test == T_WRITE_LAT) {
        /* Sends start with 'D': restore the byte once the last Write is done. */
        if (drain_requests(s) != 0)
            goto fail;
        s->local[size - 1] = 'D';
    }
    if (test == T_READ_LAT && check_read_data(s, size) != 0)
        goto fail;
    r->iters = got;
    perf_stats(samples, got, &r->lat_med_us, &r->lat_p99_us);
    r->valid = got > 0;
    free(samples);
    return 0;
fail:
    free(samples);
    return -1;
}

static int client_bw(struct sess *s, int test, uint32_t size, struct perf_result *r)
{
    const struct perf_opts *o = s->o;
    struct ctrl_msg m;
    double gb[64], mm[64];
    long total = 0;
    int reps = o->reps;
    enum req_kind k = test == T_SEND_BW ? R_SEND : test == T_WRITE_BW ? R_WRITE : R_READ;
    int depth = k == R_READ ? s->read_depth : s->window;

    if (begin_test(s, test, size, &m) != 0)
        return -1;
    s->credits = k == R_SEND ? (long)be64toh(m.a) : 0;
    if (k == R_SEND && s->credits < 1)
        return fail(s, "the server granted no receive credits");
    for (int rep = 0; rep < reps && !perf_stop; rep++) {
        double cap = o->time_cap / reps, start = perf_now();
        long sent = 0;
        for (;;) {
            int last = sent + 1 >= o->iters || perf_stop || perf_now() - start >= cap;
            while (k == R_SEND && s->credits < 1)
                if (pump(s, "receive credits from the server") != 0)
                    return -1;
            if (post_req(s, k, s->local, size, depth, last) != 0)
                return -1;
            if (k == R_SEND)
                s->credits--;
            sent++;
            if (last)
                break;
        }
        if (drain_requests(s) != 0)
            return -1;
        /* The FIN proves delivery: it follows the data on the connection. */
        if (send_ctrl(s, C_END, (uint32_t)test, size, 0, 0, 0) != 0 ||
            wait_ctrl(s, C_FIN, &m, "the server's FIN") != 0)
            return -1;
        double el = perf_now() - start;
        if (k == R_SEND) {
            if ((long)be64toh(m.a) != sent)
                return fail(s, "the server received %llu messages, %ld were sent",
                            (unsigned long long)be64toh(m.a), sent);
            s->credits += (long)be64toh(m.b);
        }
        gb[rep] = (double)sent * size / el / 1e9;
        mm[rep] = (double)sent / el / 1e6;
        total += sent;
        if (rep + 1 < reps && begin_test(s, test, size, &m) != 0)
            return -1;
    }
    if (k == R_READ && check_read_data(s, size) != 0)
        return -1;
    r->iters = total;
    r->gbps = perf_median(gb, reps);
    r->mmsgs = perf_median(mm, reps);
    r->valid = 1;
    return 0;
}

static int resolve(const char *host, int family, struct sockaddr_storage *ss, struct sess *s)
{
    struct addrinfo hints, *ai = NULL;
    memset(&hints, 0, sizeof(hints));
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_family = family;
    int err = getaddrinfo(host, NULL, &hints, &ai);
    if (err != 0 || ai == NULL)
        return fail(s, "%s: %s", host, gai_strerror(err));
    memset(ss, 0, sizeof(*ss));
    memcpy(ss, ai->ai_addr, ai->ai_addrlen);
    freeaddrinfo(ai);
    return 0;
}

static int is_loopback(const struct sockaddr_storage *ss)
{
    if (ss->ss_family == AF_INET)
        return (ntohl(((const struct sockaddr_in *)ss)->sin_addr.s_addr) >> 24) == 127;
    if (ss->ss_family == AF_INET6)
        return IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)ss)->sin6_addr);
    return 0;
}

/* The provider's word on the connection's MPA CRC: softdat reports it as
 * the EP provider-specific attribute SOFTDAT_CRC; other providers leave
 * out empty. */
static void query_crc(DAT_EP_HANDLE ep, char *out, size_t len)
{
    DAT_EP_PARAM p;
    out[0] = '\0';
    memset(&p, 0, sizeof(p));
    if (dat_ep_query(ep, DAT_EP_FIELD_EP_ATTR_NUM_PROVIDER_ATTR |
                             DAT_EP_FIELD_EP_ATTR_PROVIDER_SPECIFIC_ATTR, &p) != DAT_SUCCESS)
        return;
    for (DAT_COUNT i = 0; i < p.ep_attr.ep_provider_specific_count; i++) {
        const DAT_NAMED_ATTR *a = &p.ep_attr.ep_provider_specific[i];
        if (a->name != NULL && a->value != NULL && strcmp(a->name, "SOFTDAT_CRC") == 0)
            snprintf(out, len, "%s", a->value);
    }
}

int dat_client_run(const struct perf_opts *o, struct perf_results *res, int raw_follows,
                   int *connected)
{
    struct sess *s = calloc(1, sizeof(*s));
    struct sockaddr_storage ss;
    struct conn_pdata pd;
    struct ctrl_msg m;
    DAT_EVENT ev;
    int rc = PERF_EXIT_FAIL;

    *connected = 0;
    if (s == NULL)
        return PERF_EXIT_FAIL;
    s->o = o;
    s->timeout = o->op_timeout;
    perf_status_step(0, "opening IA %s", o->ia_name);
    if (sess_open_ia(s, &s->ia) != 0) {
        char why[sizeof(s->err)];
        snprintf(why, sizeof(why), "%s", s->err);
        fail(s, "cannot open IA '%.40s' (%.150s); 'softdat-info -l' lists the IAs the registry knows",
             o->ia_name, why);
        rc = PERF_EXIT_CONNECT;
        goto out;
    }
    /* The server's address in the IA's own family ("localhost" may be both). */
    DAT_IA_ATTR ia_attr;
    memset(&ia_attr, 0, sizeof(ia_attr));
    DAT_RETURN ret = dat_ia_query(s->ia, NULL, DAT_IA_FIELD_IA_ADDRESS_PTR, &ia_attr,
                                  DAT_PROVIDER_FIELD_NONE, NULL);
    int family = ret == DAT_SUCCESS && ia_attr.ia_address_ptr != NULL
                     ? ia_attr.ia_address_ptr->sa_family : AF_UNSPEC;
    if (resolve(o->host, family, &ss, s) != 0) {
        rc = PERF_EXIT_CONNECT;
        goto out;
    }
    ret = dat_pz_create(s->ia, &s->pz);
    if (ret != DAT_SUCCESS) {
        dat_fail(s, "dat_pz_create", ret);
        goto out;
    }
    if (sess_setup(s, perf_max_size(o), o->window, o->poll) != 0)
        goto out;

    memset(&pd, 0, sizeof(pd));
    pd.magic = htonl(PDATA_MAGIC);
    pd.version = htonl(PDATA_VERSION);
    pd.flags = htonl((o->poll ? PD_POLL : 0) | (raw_follows ? PD_RAW_FOLLOWS : 0));
    pd.crc = htonl((uint32_t)o->crc);
    pd.max_size = htonl(perf_max_size(o));
    pd.window = htonl((uint32_t)o->window);
    pd.nrecv = htonl((uint32_t)s->nrecv);
    perf_detail("connecting to %s conn_qual %u over %s", o->host, o->port, o->ia_name);
    perf_status_step(0, "connecting to %s conn_qual %u", o->host, o->port);
    ret = dat_ep_connect(s->ep, (DAT_IA_ADDRESS_PTR)&ss, o->port,
                         (DAT_TIMEOUT)(o->op_timeout * 1e6), (DAT_COUNT)sizeof(pd), &pd,
                         DAT_QOS_BEST_EFFORT, DAT_CONNECT_DEFAULT_FLAG);
    if (ret != DAT_SUCCESS) {
        dat_fail(s, "dat_ep_connect", ret);
        goto out;
    }
    if (get_event(s, s->conn_evd, o->op_timeout, &ev, "the connection to be established") != 0)
        goto out;
    if (ev.event_number != DAT_CONNECTION_EVENT_ESTABLISHED) {
        int remote = !is_loopback(&ss);
        fail(s, "connection to %s conn_qual %u failed: event 0x%x (%s)%s", o->host, o->port,
             (unsigned)ev.event_number,
             ev.event_number == DAT_CONNECTION_EVENT_PEER_REJECTED ? "rejected by the server" :
             ev.event_number == DAT_CONNECTION_EVENT_UNREACHABLE ? "unreachable" :
             ev.event_number == DAT_CONNECTION_EVENT_TIMED_OUT ? "timed out" :
             ev.event_number == DAT_CONNECTION_EVENT_NON_PEER_REJECTED ? "no server listening" :
             "not established",
             ev.event_number != DAT_CONNECTION_EVENT_NON_PEER_REJECTED
                 ? ""
                 : remote ? "; is 'softdat-perf -s' running there on an IA bound to a reachable "
                            "interface (not softdat-lo)?"
                          : "; is 'softdat-perf -s' running with the same -p?");
        rc = PERF_EXIT_CONNECT;
        goto out;
    }
    *connected = 1;
    query_crc(s->ep, res->crc, sizeof(res->crc));
    perf_detail("connected to %s conn_qual %u over %s, MPA CRC %s", o->host, o->port, o->ia_name,
                res->crc[0] ? res->crc : "not reported by the provider");
    if (send_ctrl(s, C_HELLO, 0, 0, 0, 0, 1) != 0 ||
        wait_ctrl(s, C_HELLO, &m, "the server's HELLO") != 0)
        goto out;
    take_peer_rmr(s, &m);
    {
        char want[16];
        snprintf(want, sizeof(want), "crc=%s", crc_text(o->crc));
        m.text[sizeof(m.text) - 1] = '\0';
        if (o->crc != CRC_UNSET && strcmp(m.text, "crc=unset") != 0 && strcmp(m.text, want) != 0) {
            fail(s, "the server was started with --%s, this client with --%s: start both with "
                    "the same --crc", m.text, want);
            /* Let the server end the session cleanly. */
            s->closing = 1;
            if (send_ctrl(s, C_BYE, 0, 0, 0, 0, 0) == 0)
                drain_requests(s);
            goto out;
        }
    }
    if (s->peer.segment_length < perf_max_size(o)) {
        fail(s, "the server's RDMA area (%u bytes) is smaller than the largest size",
             s->peer.segment_length);
        goto out;
    }

    rc = PERF_EXIT_OK;
    for (int t = 0; t < T_COUNT && rc == PERF_EXIT_OK && !perf_stop; t++) {
        if (!o->tests[t])
            continue;
        for (int i = 0; i < o->nsizes && !perf_stop; i++) {
            struct perf_result *r = &res->dat[t][i];
            char sz[16];
            perf_fmt_size(o->sizes[i], sz, sizeof(sz));
            perf_status_step(1, "dat %s %s", perf_test_name(t), sz);
            int e = perf_test_is_lat(t) ? client_lat(s, t, o->sizes[i], r)
                                        : client_bw(s, t, o->sizes[i], r);
            if (e != 0) {
                snprintf(r->error, sizeof(r->error), "%s", s->err);
                perf_err("DAT %s %s: %s", perf_test_name(t), sz, s->err);
                s->err[0] = '\0';
                rc = s->notimpl ? PERF_EXIT_NOTIMPL : PERF_EXIT_FAIL;
                break;
            }
            if (perf_test_is_lat(t))
                perf_detail("dat  %-12s %6s: %ld iters, median %.2f us, p99 %.2f us",
                              perf_test_name(t), sz, r->iters, r->lat_med_us, r->lat_p99_us);
            else
                perf_detail("dat  %-12s %6s: %ld msgs, %.4f GB/s, %.3f Mmsg/s",
                              perf_test_name(t), sz, r->iters, r->gbps, r->mmsgs);
        }
    }
    s->closing = 1;
    if (rc == PERF_EXIT_OK && (send_ctrl(s, C_BYE, 0, 0, 0, 0, 0) != 0 || drain_requests(s) != 0))
        rc = s->notimpl ? PERF_EXIT_NOTIMPL : PERF_EXIT_FAIL;
    if (rc == PERF_EXIT_OK)
        s->err[0] = '\0';
out:
    if (rc != PERF_EXIT_OK) {
        if (s->notimpl)
            rc = PERF_EXIT_NOTIMPL;
        if (s->err[0] != '\0')
            perf_err("DAT: %s", s->err);
    }
    sess_teardown(s, *connected);
    close_ia(s->ia, s->pz);
    free(s);
    return rc;
}
