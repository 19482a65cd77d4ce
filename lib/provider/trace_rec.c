/* Provider-level trace records: helpers, events, EP states, IA open. */
#include "lib/provider/trace_rec.h"

#include <dat2/dat_ib_extensions.h>

#include "lib/provider/ep.h"
#include "lib/provider/evd.h"
#include "lib/provider/handle.h"
#include "lib/provider/ia.h"

void sd_trace_ctx_of(const struct sd_handle *h, struct sd_trace_ctx *ctx)
{
    ctx->ia = 0;
    ctx->t0_ns = 0;
    if (h != NULL && h->ia != NULL) {
        ctx->ia = h->ia->h.id;
        ctx->t0_ns = h->ia->t0_ns;
    }
}

void sd_trace_kv_obj(struct sd_trace_rec *r, const char *key, const struct sd_handle *h)
{
    if (h != NULL)
        sd_trace_kv_id(r, key, sd_handle_type_prefix(h->type), h->id);
}

void sd_trace_kv_raw_handle(struct sd_trace_rec *r, const char *key, DAT_HANDLE raw)
{
    if (raw == DAT_HANDLE_NULL) {
        sd_trace_kv_str(r, key, NULL);
        return;
    }
    struct sd_handle_peek pk;
    if (!sd_handle_peek(raw, &pk)) {
        sd_trace_kv_str(r, key, "invalid");
        return;
    }
    sd_trace_kv_id(r, key, sd_handle_type_prefix(pk.type), pk.id);
}

static const char *rc_type_name(DAT_RETURN rc)
{
    static const char *const names[] = {
        "DAT_SUCCESS",          "DAT_ABORT",
        "DAT_CONN_QUAL_IN_USE", "DAT_INSUFFICIENT_RESOURCES",
        "DAT_INTERNAL_ERROR",   "DAT_INVALID_HANDLE",
        "DAT_INVALID_PARAMETER", "DAT_INVALID_STATE",
        "DAT_LENGTH_ERROR",     "DAT_MODEL_NOT_SUPPORTED",
        "DAT_PROVIDER_NOT_FOUND", "DAT_PRIVILEGES_VIOLATION",
        "DAT_PROTECTION_VIOLATION", "DAT_QUEUE_EMPTY",
        "DAT_QUEUE_FULL",       "DAT_TIMEOUT_EXPIRED",
        "DAT_PROVIDER_ALREADY_REGISTERED", "DAT_PROVIDER_IN_USE",
        "DAT_INVALID_ADDRESS",  "DAT_INTERRUPTED_CALL",
        "DAT_CONN_QUAL_UNAVAILABLE", "DAT_RESERVED_LMR",
        "DAT_PORT_IN_USE",      "DAT_COMM_NOT_SUPPORTED"};
    /* The class bits (0xc0000000) are not part of the type. */
    uint32_t type = (rc & 0x3fff0000u) >> 16;
    if (type < sizeof names / sizeof names[0])
        return names[type];
    return (rc & 0x3fff0000u) == DAT_NOT_IMPLEMENTED ? "DAT_NOT_IMPLEMENTED" : "DAT_EXTENSION";
}

void sd_trace_kv_rc(struct sd_trace_rec *r, DAT_RETURN rc)
{
    sd_trace_kv_str(r, "rc", rc_type_name(rc));
    if (rc != DAT_SUCCESS)
        sd_trace_kv_hex(r, "rc_hex", rc);
}

const char *sd_trace_event_name(DAT_EVENT_NUMBER num)
{
    switch ((int)num) {
    case DAT_DTO_COMPLETION_EVENT: return "DTO_COMPLETION";
    case DAT_RMR_BIND_COMPLETION_EVENT: return "RMR_BIND_COMPLETION";
    case DAT_CONNECTION_REQUEST_EVENT: return "CONNECTION_REQUEST";
    case DAT_CONNECTION_EVENT_ESTABLISHED: return "CONNECTION_ESTABLISHED";
    case DAT_CONNECTION_EVENT_PEER_REJECTED: return "CONNECTION_PEER_REJECTED";
    case DAT_CONNECTION_EVENT_NON_PEER_REJECTED: return "CONNECTION_NON_PEER_REJECTED";
    case DAT_CONNECTION_EVENT_ACCEPT_COMPLETION_ERROR: return "CONNECTION_ACCEPT_COMPLETION_ERROR";
    case DAT_CONNECTION_EVENT_DISCONNECTED: return "CONNECTION_DISCONNECTED";
    case DAT_CONNECTION_EVENT_BROKEN: return "CONNECTION_BROKEN";
    case DAT_CONNECTION_EVENT_TIMED_OUT: return "CONNECTION_TIMED_OUT";
    case DAT_CONNECTION_EVENT_UNREACHABLE: return "CONNECTION_UNREACHABLE";
    case DAT_ASYNC_ERROR_EVD_OVERFLOW: return "ASYNC_EVD_OVERFLOW";
    case DAT_ASYNC_ERROR_IA_CATASTROPHIC: return "ASYNC_IA_CATASTROPHIC";
    case DAT_ASYNC_ERROR_EP_BROKEN: return "ASYNC_EP_BROKEN";
    case DAT_ASYNC_ERROR_TIMED_OUT: return "ASYNC_TIMED_OUT";
    case DAT_ASYNC_ERROR_PROVIDER_INTERNAL_ERROR: return "ASYNC_PROVIDER_INTERNAL_ERROR";
    case DAT_HA_DOWN_TO_1: return "HA_DOWN_TO_1";
    case DAT_HA_UP_TO_MULTI_PATH: return "HA_UP_TO_MULTI_PATH";
    case DAT_SOFTWARE_EVENT: return "SOFTWARE";
    case DAT_IB_DTO_EVENT: return "IB_DTO";
    case DAT_IB_UD_CONNECTION_REQUEST_EVENT: return "IB_UD_CONNECTION_REQUEST";
    case DAT_IB_UD_CONNECTION_EVENT_ESTABLISHED: return "IB_UD_CONNECTION_ESTABLISHED";
    case DAT_IB_UD_CONNECTION_REJECT_EVENT: return "IB_UD_CONNECTION_REJECT";
    case DAT_IB_UD_CONNECTION_ERROR_EVENT: return "IB_UD_CONNECTION_ERROR";
    default: return "OTHER";
    }
}

const char *sd_trace_ep_state_name(DAT_EP_STATE s)
{
    static const char *const names[] = {"UNCONNECTED",
                                        "UNCONFIGURED_UNCONNECTED",
                                        "RESERVED",
                                        "UNCONFIGURED_RESERVED",
                                        "PASSIVE_CONNECTION_PENDING",
                                        "UNCONFIGURED_PASSIVE",
                                        "ACTIVE_CONNECTION_PENDING",
                                        "TENTATIVE_CONNECTION_PENDING",
                                        "UNCONFIGURED_TENTATIVE",
                                        "CONNECTED",
                                        "DISCONNECT_PENDING",
                                        "DISCONNECTED",
                                        "COMPLETION_PENDING",
                                        "CONNECTED_SINGLE_PATH",
                                        "CONNECTED_MULTI_PATH"};
    return (unsigned)s < sizeof names / sizeof names[0] ? names[s] : "UNKNOWN";
}

const char *sd_trace_dto_status_name(DAT_DTO_COMPLETION_STATUS s)
{
    static const char *const names[] = {"SUCCESS",           "ERR_FLUSHED",          "ERR_LOCAL_LENGTH",
                                        "ERR_LOCAL_EP",      "ERR_LOCAL_PROTECTION", "ERR_BAD_RESPONSE",
                                        "ERR_REMOTE_ACCESS", "ERR_REMOTE_RESPONDER", "ERR_TRANSPORT",
                                        "ERR_RECEIVER_NOT_READY", "ERR_PARTIAL_PACKET", "RMR_OPERATION_FAILED",
                                        "ERR_LOCAL_MM_ERROR"};
    return (unsigned)s < sizeof names / sizeof names[0] ? names[s] : "UNKNOWN";
}

static const char *dto_op_name(DAT_DTOS op)
{
    static const char *const names[] = {"send", "rdma_write", "rdma_read", "receive", "receive_with_invalidate",
                                        "bind_mw", "lmr_fmr", "lmr_invalidate"};
    return (unsigned)op < sizeof names / sizeof names[0] ? names[op] : "extension";
}

static const char *ib_ext_type_name(DAT_IB_EXT_TYPE t)
{
    switch ((int)t) {
    case DAT_IB_FETCH_AND_ADD: return "fetch_add";
    case DAT_IB_CMP_AND_SWAP: return "cmp_swap";
    case DAT_IB_RDMA_WRITE_IMMED: return "write_imm";
    case DAT_IB_RDMA_WRITE_IMMED_DATA: return "write_imm_data";
    default: return "other";
    }
}

static const char *kind_name(enum sd_evq_kind k)
{
    static const char *const names[] = {"dto", "cr", "conn", "async", "software", "ext"};
    return (unsigned)k < sizeof names / sizeof names[0] ? names[k] : "?";
}

/* The EP an event names, looked up without trusting the value (a
 * connection event may carry a handle that is being freed). */
static void kv_event_ep(struct sd_trace_rec *r, DAT_EP_HANDLE ep)
{
    sd_trace_kv_raw_handle(r, "ep", ep);
}

void sd_trace_event(struct sd_evd *evd, const DAT_EVENT *ev, enum sd_evq_kind kind, DAT_RETURN rc)
{
    struct sd_trace_ctx ctx;
    sd_trace_ctx_of(&evd->h, &ctx);
    struct sd_trace_rec r;
    sd_trace_begin(&r, "event", &ctx);
    sd_trace_kv_obj(&r, "evd", &evd->h);
    sd_trace_kv_str(&r, "type", sd_trace_event_name(ev->event_number));
    sd_trace_kv_hex(&r, "number", (uint64_t)ev->event_number);
    sd_trace_kv_str(&r, "stream", kind_name(kind));
    const DAT_EVENT_DATA *d = &ev->event_data;
    switch ((int)ev->event_number) {
    case DAT_DTO_COMPLETION_EVENT:
    case DAT_IB_DTO_EVENT: {
        const DAT_DTO_COMPLETION_EVENT_DATA *c = &d->dto_completion_event_data;
        kv_event_ep(&r, c->ep_handle);
        sd_trace_kv_str(&r, "op", dto_op_name(c->operation));
        sd_trace_kv_str(&r, "status", sd_trace_dto_status_name(c->status));
        sd_trace_kv_u64(&r, "len", c->transfered_length);
        sd_trace_kv_hex(&r, "cookie", c->user_cookie.as_64);
        if (ev->event_number == (DAT_EVENT_NUMBER)DAT_IB_DTO_EVENT) {
            const DAT_IB_EXTENSION_EVENT_DATA *x = (const DAT_IB_EXTENSION_EVENT_DATA *)ev->event_extension_data;
            sd_trace_kv_str(&r, "ext", ib_ext_type_name(x->type));
            if (x->type == DAT_IB_RDMA_WRITE_IMMED_DATA)
                sd_trace_kv_hex(&r, "imm", x->val.immed.data);
        }
        break;
    }
    case DAT_RMR_BIND_COMPLETION_EVENT:
        sd_trace_kv_raw_handle(&r, "rmr", d->rmr_completion_event_data.rmr_handle);
        sd_trace_kv_str(&r, "status", sd_trace_dto_status_name(d->rmr_completion_event_data.status));
        sd_trace_kv_hex(&r, "cookie", d->rmr_completion_event_data.user_cookie.as_64);
        break;
    case DAT_CONNECTION_REQUEST_EVENT:
        sd_trace_kv_raw_handle(&r, "sp", d->cr_arrival_event_data.sp_handle.psp_handle);
        sd_trace_kv_raw_handle(&r, "cr", d->cr_arrival_event_data.cr_handle);
        sd_trace_kv_u64(&r, "conn_qual", d->cr_arrival_event_data.conn_qual);
        break;
    case DAT_CONNECTION_EVENT_ESTABLISHED:
    case DAT_CONNECTION_EVENT_PEER_REJECTED:
    case DAT_CONNECTION_EVENT_NON_PEER_REJECTED:
    case DAT_CONNECTION_EVENT_ACCEPT_COMPLETION_ERROR:
    case DAT_CONNECTION_EVENT_DISCONNECTED:
    case DAT_CONNECTION_EVENT_BROKEN:
    case DAT_CONNECTION_EVENT_TIMED_OUT:
    case DAT_CONNECTION_EVENT_UNREACHABLE:
        kv_event_ep(&r, d->connect_event_data.ep_handle);
        sd_trace_kv_i64(&r, "pdata_len", d->connect_event_data.private_data_size);
        break;
    default:
        if (((int)ev->event_number & 0xFF000) == 0x08000) {
            sd_trace_kv_raw_handle(&r, "about", d->asynch_error_event_data.dat_handle);
            sd_trace_kv_i64(&r, "reason", d->asynch_error_event_data.reason);
        }
        break;
    }
    sd_trace_kv_bool(&r, "queued", rc == DAT_SUCCESS);
    if (rc != DAT_SUCCESS)
        sd_trace_kv_rc(&r, rc);
    sd_trace_end(&r);
}

void sd_trace_ep_state(const struct sd_ep *ep, DAT_EP_STATE from, DAT_EP_STATE to)
{
    struct sd_trace_ctx ctx;
    sd_trace_ctx_of(&ep->h, &ctx);
    struct sd_trace_rec r;
    sd_trace_begin(&r, "state", &ctx);
    sd_trace_kv_obj(&r, "ep", &ep->h);
    if (ep->conn_id != 0)
        sd_trace_kv_id(&r, "conn", "c", ep->conn_id);
    sd_trace_kv_str(&r, "from", sd_trace_ep_state_name(from));
    sd_trace_kv_str(&r, "to", sd_trace_ep_state_name(to));
    sd_trace_end(&r);
}

void sd_trace_ia_open(const char *name, DAT_RETURN rc, DAT_IA_HANDLE ia_handle)
{
    struct sd_ia *ia = rc == DAT_SUCCESS ? (struct sd_ia *)ia_handle : NULL;
    struct sd_trace_ctx ctx = {0, 0};
    if (ia != NULL)
        sd_trace_ctx_of(&ia->h, &ctx);
    struct sd_trace_rec r;
    sd_trace_begin(&r, "call", &ctx);
    sd_trace_kv_str(&r, "fn", "ia_open");
    sd_trace_kv_str(&r, "name", name);
    if (ia != NULL) {
        sd_trace_kv_obj(&r, "obj", &ia->h);
        sd_trace_kv_u64(&r, "open_mono_ns", ia->t0_ns);
    }
    sd_trace_kv_rc(&r, rc);
    sd_trace_end(&r);
}
