/* The trace's view of the DAT calls: one wrapper per entry point of the
 * provider table, installed by fill_table only when SOFTDAT_TRACE is set
 * (so the untraced table is the plain one and costs nothing).
 *
 * Each wrapper names the object the call is about before calling (a free
 * makes it unnamable afterwards), calls the real entry point, and writes
 * one record: "call" (name, key arguments, return code, duration) or, for
 * DTO and bind posts, "post" (operation, lengths, LMR/RMR contexts,
 * cookie, flags). Polls that find nothing (dat_evd_dequeue answering
 * DAT_QUEUE_EMPTY) are not recorded: a polling consumer would fill the
 * trace with them.
 *
 * Every record slot's table holds the same functions except ia_open
 * (per-slot trampolines, traced in provider.c), so one saved copy of the
 * real table serves all records. */
#include <arpa/inet.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <dat2/dat_ib_extensions.h>
#include <dat2/dat_iw_extensions.h>

#include "emu/log.h"
#include "lib/provider/handle.h"
#include "lib/provider/provider.h"
#include "lib/provider/trace_rec.h"

static DAT_PROVIDER g_real;

struct call {
    struct sd_trace_rec r;
    uint64_t start;
};

static void call_begin(struct call *c, const char *kind, const char *fn, DAT_HANDLE obj)
{
    struct sd_trace_ctx ctx = {0, 0};
    struct sd_handle_peek pk;
    bool live = obj != DAT_HANDLE_NULL && sd_handle_peek(obj, &pk);
    if (live) {
        ctx.ia = pk.ia_id;
        ctx.t0_ns = pk.ia_t0_ns;
    }
    sd_trace_begin(&c->r, kind, &ctx);
    sd_trace_kv_str(&c->r, "fn", fn);
    if (live)
        sd_trace_kv_id(&c->r, "obj", sd_handle_type_prefix(pk.type), pk.id);
    else
        sd_trace_kv_str(&c->r, "obj", obj == DAT_HANDLE_NULL ? NULL : "invalid");
    c->start = sd_mono_ns();
}

static void call_end(struct call *c, DAT_RETURN rc)
{
    sd_trace_kv_rc(&c->r, rc);
    sd_trace_kv_u64(&c->r, "dur_ns", sd_mono_ns() - c->start);
    sd_trace_end(&c->r);
}

/* The handle a create call returned, as "new":"ep4". Objects are named
 * with sd_handle_peek (no reference taken) throughout. */
static void kv_new(struct call *c, DAT_RETURN rc, const DAT_HANDLE *out)
{
    if (rc == DAT_SUCCESS && out != NULL)
        sd_trace_kv_raw_handle(&c->r, "new", *out);
}

static void kv_addr(struct call *c, const char *key, const struct sockaddr *sa)
{
    char host[INET6_ADDRSTRLEN] = "?";
    if (sa == NULL) {
        sd_trace_kv_str(&c->r, key, NULL);
        return;
    }
    if (sa->sa_family == AF_INET)
        inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, host, sizeof host);
    else if (sa->sa_family == AF_INET6)
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, host, sizeof host);
    sd_trace_kv_str(&c->r, key, host);
}

/* Segments as [{"lmr_ctx":"0x..","addr":"0x..","len":N},...] and their total. */
static void kv_iov(struct call *c, DAT_COUNT n, const DAT_LMR_TRIPLET *iov)
{
    char buf[600];
    size_t len = 0;
    uint64_t total = 0;
    buf[len++] = '[';
    for (DAT_COUNT i = 0; iov != NULL && i >= 0 && i < n; i++) {
        total += iov[i].segment_length;
        if (i >= 8) /* the record stays one line; the total still counts all */
            continue;
        int w = snprintf(buf + len, sizeof buf - len, "%s{\"lmr_ctx\":\"0x%x\",\"addr\":\"0x%llx\",\"len\":%llu}",
                         i ? "," : "", (unsigned)iov[i].lmr_context, (unsigned long long)iov[i].virtual_address,
                         (unsigned long long)iov[i].segment_length);
        if (w < 0 || (size_t)w >= sizeof buf - len - 2)
            break;
        len += (size_t)w;
    }
    buf[len++] = ']';
    buf[len] = '\0';
    sd_trace_kv_i64(&c->r, "nseg", n);
    sd_trace_kv_json(&c->r, "segs", buf);
    sd_trace_kv_u64(&c->r, "len", total);
}

static void kv_remote(struct call *c, const DAT_RMR_TRIPLET *r)
{
    if (r == NULL)
        return;
    sd_trace_kv_hex(&c->r, "rmr_ctx", r->rmr_context);
    sd_trace_kv_hex(&c->r, "remote_addr", r->virtual_address);
    sd_trace_kv_u64(&c->r, "remote_len", r->segment_length);
}

static void post_begin(struct call *c, const char *fn, const char *op, DAT_HANDLE ep, DAT_DTO_COOKIE cookie,
                       DAT_COMPLETION_FLAGS flags)
{
    call_begin(c, "post", fn, ep);
    sd_trace_kv_str(&c->r, "op", op);
    sd_trace_kv_hex(&c->r, "cookie", cookie.as_64);
    sd_trace_kv_hex(&c->r, "flags", flags);
}

/* ------------------------------------------------------------ generic calls */

#define FN(name) g_real.name##_func

#define GEN1(name, T1)                                                                             \
    static DAT_RETURN w_##name(T1 a1)                                                              \
    {                                                                                              \
        struct call c;                                                                             \
        call_begin(&c, "call", #name, (DAT_HANDLE)a1);                                             \
        DAT_RETURN rc = FN(name)(a1);                                                              \
        call_end(&c, rc);                                                                          \
        return rc;                                                                                 \
    }
#define GEN2(name, T1, T2)                                                                         \
    static DAT_RETURN w_##name(T1 a1, T2 a2)                                                       \
    {                                                                                              \
        struct call c;                                                                             \
        call_begin(&c, "call", #name, (DAT_HANDLE)a1);                                             \
        DAT_RETURN rc = FN(name)(a1, a2);                                                          \
        call_end(&c, rc);                                                                          \
        return rc;                                                                                 \
    }
#define GEN3(name, T1, T2, T3)                                                                     \
    static DAT_RETURN w_##name(T1 a1, T2 a2, T3 a3)                                                \
    {                                                                                              \
        struct call c;                                                                             \
        call_begin(&c, "call", #name, (DAT_HANDLE)a1);                                             \
        DAT_RETURN rc = FN(name)(a1, a2, a3);                                                      \
        call_end(&c, rc);                                                                          \
        return rc;                                                                                 \
    }
/* Creates: the last argument returns the new handle. */
#define NEW2(name, T1, T2)                                                                         \
    static DAT_RETURN w_##name(T1 a1, T2 *out)                                                     \
    {                                                                                              \
        struct call c;                                                                             \
        call_begin(&c, "call", #name, (DAT_HANDLE)a1);                                             \
        DAT_RETURN rc = FN(name)(a1, out);                                                         \
        kv_new(&c, rc, (const DAT_HANDLE *)out);                                                   \
        call_end(&c, rc);                                                                          \
        return rc;                                                                                 \
    }

GEN2(ia_close, DAT_IA_HANDLE, DAT_CLOSE_FLAGS)
static DAT_RETURN w_ia_query(DAT_IA_HANDLE ia, DAT_EVD_HANDLE *evd, DAT_IA_ATTR_MASK im, DAT_IA_ATTR *ia_attr,
                             DAT_PROVIDER_ATTR_MASK pm, DAT_PROVIDER_ATTR *pr_attr)
{
    struct call c;
    call_begin(&c, "call", "ia_query", ia);
    DAT_RETURN rc = FN(ia_query)(ia, evd, im, ia_attr, pm, pr_attr);
    call_end(&c, rc);
    return rc;
}
GEN2(set_consumer_context, DAT_HANDLE, DAT_CONTEXT)
GEN2(get_consumer_context, DAT_HANDLE, DAT_CONTEXT *)
GEN2(get_handle_type, DAT_HANDLE, DAT_HANDLE_TYPE *)

static DAT_RETURN w_cno_create(DAT_IA_HANDLE ia, DAT_OS_WAIT_PROXY_AGENT agent, DAT_CNO_HANDLE *out)
{
    struct call c;
    call_begin(&c, "call", "cno_create", ia);
    DAT_RETURN rc = FN(cno_create)(ia, agent, out);
    kv_new(&c, rc, (const DAT_HANDLE *)out);
    call_end(&c, rc);
    return rc;
}
GEN2(cno_modify_agent, DAT_CNO_HANDLE, DAT_OS_WAIT_PROXY_AGENT)
GEN3(cno_query, DAT_CNO_HANDLE, DAT_CNO_PARAM_MASK, DAT_CNO_PARAM *)
GEN1(cno_free, DAT_CNO_HANDLE)
GEN3(cno_wait, DAT_CNO_HANDLE, DAT_TIMEOUT, DAT_EVD_HANDLE *)
static DAT_RETURN w_cno_fd_create(DAT_IA_HANDLE ia, DAT_FD *fd, DAT_CNO_HANDLE *out)
{
    struct call c;
    call_begin(&c, "call", "cno_fd_create", ia);
    DAT_RETURN rc = FN(cno_fd_create)(ia, fd, out);
    kv_new(&c, rc, (const DAT_HANDLE *)out);
    call_end(&c, rc);
    return rc;
}
GEN2(cno_trigger, DAT_CNO_HANDLE, DAT_EVD_HANDLE *)

GEN3(cr_query, DAT_CR_HANDLE, DAT_CR_PARAM_MASK, DAT_CR_PARAM *)
static DAT_RETURN w_cr_accept(DAT_CR_HANDLE cr, DAT_EP_HANDLE ep, DAT_COUNT len, const DAT_PVOID pdata)
{
    struct call c;
    call_begin(&c, "call", "cr_accept", cr);
    sd_trace_kv_raw_handle(&c.r, "ep", ep);
    sd_trace_kv_i64(&c.r, "pdata_len", len);
    DAT_RETURN rc = FN(cr_accept)(cr, ep, len, pdata);
    call_end(&c, rc);
    return rc;
}
static DAT_RETURN w_cr_reject(DAT_CR_HANDLE cr, DAT_COUNT len, const DAT_PVOID pdata)
{
    struct call c;
    call_begin(&c, "call", "cr_reject", cr);
    sd_trace_kv_i64(&c.r, "pdata_len", len);
    DAT_RETURN rc = FN(cr_reject)(cr, len, pdata);
    call_end(&c, rc);
    return rc;
}
GEN2(cr_handoff, DAT_CR_HANDLE, DAT_CONN_QUAL)

static DAT_RETURN w_evd_create(DAT_IA_HANDLE ia, DAT_COUNT qlen, DAT_CNO_HANDLE cno, DAT_EVD_FLAGS flags,
                               DAT_EVD_HANDLE *out)
{
    struct call c;
    call_begin(&c, "call", "evd_create", ia);
    sd_trace_kv_i64(&c.r, "qlen", qlen);
    sd_trace_kv_hex(&c.r, "evd_flags", flags);
    DAT_RETURN rc = FN(evd_create)(ia, qlen, cno, flags, out);
    kv_new(&c, rc, (const DAT_HANDLE *)out);
    call_end(&c, rc);
    return rc;
}
GEN3(evd_query, DAT_EVD_HANDLE, DAT_EVD_PARAM_MASK, DAT_EVD_PARAM *)
GEN2(evd_modify_cno, DAT_EVD_HANDLE, DAT_CNO_HANDLE)
GEN1(evd_enable, DAT_EVD_HANDLE)
GEN1(evd_disable, DAT_EVD_HANDLE)
GEN2(evd_resize, DAT_EVD_HANDLE, DAT_COUNT)
GEN2(evd_post_se, DAT_EVD_HANDLE, const DAT_EVENT *)
GEN1(evd_free, DAT_EVD_HANDLE)
GEN1(evd_set_unwaitable, DAT_EVD_HANDLE)
GEN1(evd_clear_unwaitable, DAT_EVD_HANDLE)

static void kv_got(struct call *c, DAT_RETURN rc, const DAT_EVENT *ev)
{
    if (rc == DAT_SUCCESS && ev != NULL)
        sd_trace_kv_str(&c->r, "got", sd_trace_event_name(ev->event_number));
}

static DAT_RETURN w_evd_dequeue(DAT_EVD_HANDLE evd, DAT_EVENT *ev)
{
    struct call c;
    call_begin(&c, "call", "evd_dequeue", evd);
    DAT_RETURN rc = FN(evd_dequeue)(evd, ev);
    if ((rc & 0x3fff0000u) == DAT_QUEUE_EMPTY)
        return rc; /* polls that find nothing are not recorded */
    kv_got(&c, rc, ev);
    call_end(&c, rc);
    return rc;
}

static DAT_RETURN w_evd_wait(DAT_EVD_HANDLE evd, DAT_TIMEOUT tmo, DAT_COUNT threshold, DAT_EVENT *ev,
                             DAT_COUNT *nmore)
{
    struct call c;
    call_begin(&c, "call", "evd_wait", evd);
    sd_trace_kv_i64(&c.r, "timeout", tmo == DAT_TIMEOUT_INFINITE ? -1 : (int64_t)tmo);
    sd_trace_kv_i64(&c.r, "threshold", threshold);
    DAT_RETURN rc = FN(evd_wait)(evd, tmo, threshold, ev, nmore);
    kv_got(&c, rc, ev);
    call_end(&c, rc);
    return rc;
}

static void kv_ep_create_args(struct call *c, DAT_PZ_HANDLE pz, DAT_EVD_HANDLE recv, DAT_EVD_HANDLE req,
                              DAT_EVD_HANDLE conn)
{
    sd_trace_kv_raw_handle(&c->r, "pz", pz);
    sd_trace_kv_raw_handle(&c->r, "recv_evd", recv);
    sd_trace_kv_raw_handle(&c->r, "request_evd", req);
    sd_trace_kv_raw_handle(&c->r, "connect_evd", conn);
}

static DAT_RETURN w_ep_create(DAT_IA_HANDLE ia, DAT_PZ_HANDLE pz, DAT_EVD_HANDLE recv, DAT_EVD_HANDLE req,
                              DAT_EVD_HANDLE conn, const DAT_EP_ATTR *attr, DAT_EP_HANDLE *out)
{
    struct call c;
    call_begin(&c, "call", "ep_create", ia);
    kv_ep_create_args(&c, pz, recv, req, conn);
    DAT_RETURN rc = FN(ep_create)(ia, pz, recv, req, conn, attr, out);
    kv_new(&c, rc, (const DAT_HANDLE *)out);
    call_end(&c, rc);
    return rc;
}

static DAT_RETURN w_ep_create_with_srq(DAT_IA_HANDLE ia, DAT_PZ_HANDLE pz, DAT_EVD_HANDLE recv, DAT_EVD_HANDLE req,
                                       DAT_EVD_HANDLE conn, DAT_SRQ_HANDLE srq, const DAT_EP_ATTR *attr,
                                       DAT_EP_HANDLE *out)
{
    struct call c;
    call_begin(&c, "call", "ep_create_with_srq", ia);
    kv_ep_create_args(&c, pz, recv, req, conn);
    sd_trace_kv_raw_handle(&c.r, "srq", srq);
    DAT_RETURN rc = FN(ep_create_with_srq)(ia, pz, recv, req, conn, srq, attr, out);
    kv_new(&c, rc, (const DAT_HANDLE *)out);
    call_end(&c, rc);
    return rc;
}

GEN3(ep_query, DAT_EP_HANDLE, DAT_EP_PARAM_MASK, DAT_EP_PARAM *)
GEN3(ep_modify, DAT_EP_HANDLE, DAT_EP_PARAM_MASK, const DAT_EP_PARAM *)

static DAT_RETURN w_ep_connect(DAT_EP_HANDLE ep, DAT_IA_ADDRESS_PTR addr, DAT_CONN_QUAL qual, DAT_TIMEOUT tmo,
                               DAT_COUNT len, const DAT_PVOID pdata, DAT_QOS qos, DAT_CONNECT_FLAGS flags)
{
    struct call c;
    call_begin(&c, "call", "ep_connect", ep);
    kv_addr(&c, "remote", addr);
    sd_trace_kv_u64(&c.r, "conn_qual", qual);
    sd_trace_kv_i64(&c.r, "pdata_len", len);
    DAT_RETURN rc = FN(ep_connect)(ep, addr, qual, tmo, len, pdata, qos, flags);
    call_end(&c, rc);
    return rc;
}

static DAT_RETURN w_ep_common_connect(DAT_EP_HANDLE ep, DAT_IA_ADDRESS_PTR addr, DAT_TIMEOUT tmo, DAT_COUNT len,
                                      const DAT_PVOID pdata)
{
    struct call c;
    call_begin(&c, "call", "ep_common_connect", ep);
    kv_addr(&c, "remote", addr);
    sd_trace_kv_i64(&c.r, "pdata_len", len);
    DAT_RETURN rc = FN(ep_common_connect)(ep, addr, tmo, len, pdata);
    call_end(&c, rc);
    return rc;
}

static DAT_RETURN w_ep_dup_connect(DAT_EP_HANDLE ep, DAT_EP_HANDLE dup, DAT_TIMEOUT tmo, DAT_COUNT len,
                                   const DAT_PVOID pdata, DAT_QOS qos)
{
    struct call c;
    call_begin(&c, "call", "ep_dup_connect", ep);
    sd_trace_kv_raw_handle(&c.r, "dup_ep", dup);
    DAT_RETURN rc = FN(ep_dup_connect)(ep, dup, tmo, len, pdata, qos);
    call_end(&c, rc);
    return rc;
}

static DAT_RETURN w_ep_disconnect(DAT_EP_HANDLE ep, DAT_CLOSE_FLAGS flags)
{
    struct call c;
    call_begin(&c, "call", "ep_disconnect", ep);
    sd_trace_kv_str(&c.r, "mode", flags == DAT_CLOSE_ABRUPT_FLAG ? "abrupt" : "graceful");
    DAT_RETURN rc = FN(ep_disconnect)(ep, flags);
    call_end(&c, rc);
    return rc;
}

GEN3(ep_recv_query, DAT_EP_HANDLE, DAT_COUNT *, DAT_COUNT *)
GEN3(ep_set_watermark, DAT_EP_HANDLE, DAT_COUNT, DAT_COUNT)
static DAT_RETURN w_ep_get_status(DAT_EP_HANDLE ep, DAT_EP_STATE *st, DAT_BOOLEAN *ri, DAT_BOOLEAN *qi)
{
    struct call c;
    call_begin(&c, "call", "ep_get_status", ep);
    DAT_RETURN rc = FN(ep_get_status)(ep, st, ri, qi);
    if (rc == DAT_SUCCESS && st != NULL)
        sd_trace_kv_str(&c.r, "state", sd_trace_ep_state_name(*st));
    call_end(&c, rc);
    return rc;
}
GEN1(ep_free, DAT_EP_HANDLE)
GEN1(ep_reset, DAT_EP_HANDLE)

/* ------------------------------------------------------------ posts */

static DAT_RETURN w_ep_post_send(DAT_EP_HANDLE ep, DAT_COUNT n, DAT_LMR_TRIPLET *iov, DAT_DTO_COOKIE cookie,
                                 DAT_COMPLETION_FLAGS flags)
{
    struct call c;
    post_begin(&c, "ep_post_send", "send", ep, cookie, flags);
    kv_iov(&c, n, iov);
    DAT_RETURN rc = FN(ep_post_send)(ep, n, iov, cookie, flags);
    call_end(&c, rc);
    return rc;
}

static DAT_RETURN w_ep_post_send_with_invalidate(DAT_EP_HANDLE ep, DAT_COUNT n, DAT_LMR_TRIPLET *iov,
                                                 DAT_DTO_COOKIE cookie, DAT_COMPLETION_FLAGS flags,
                                                 DAT_BOOLEAN inv, DAT_RMR_CONTEXT rmr_ctx)
{
    struct call c;
    post_begin(&c, "ep_post_send_with_invalidate", "send_inv", ep, cookie, flags);
    kv_iov(&c, n, iov);
    sd_trace_kv_bool(&c.r, "invalidate", inv != DAT_FALSE);
    sd_trace_kv_hex(&c.r, "inv_rmr_ctx", rmr_ctx);
    DAT_RETURN rc = FN(ep_post_send_with_invalidate)(ep, n, iov, cookie, flags, inv, rmr_ctx);
    call_end(&c, rc);
    return rc;
}

static DAT_RETURN w_ep_post_recv(DAT_EP_HANDLE ep, DAT_COUNT n, DAT_LMR_TRIPLET *iov, DAT_DTO_COOKIE cookie,
                                 DAT_COMPLETION_FLAGS flags)
{
    struct call c;
    post_begin(&c, "ep_post_recv", "recv", ep, cookie, flags);
    kv_iov(&c, n, iov);
    DAT_RETURN rc = FN(ep_post_recv)(ep, n, iov, cookie, flags);
    call_end(&c, rc);
    return rc;
}

static DAT_RETURN w_ep_post_rdma_read(DAT_EP_HANDLE ep, DAT_COUNT n, DAT_LMR_TRIPLET *iov, DAT_DTO_COOKIE cookie,
                                      const DAT_RMR_TRIPLET *remote, DAT_COMPLETION_FLAGS flags)
{
    struct call c;
    post_begin(&c, "ep_post_rdma_read", "rdma_read", ep, cookie, flags);
    kv_iov(&c, n, iov);
    kv_remote(&c, remote);
    DAT_RETURN rc = FN(ep_post_rdma_read)(ep, n, iov, cookie, remote, flags);
    call_end(&c, rc);
    return rc;
}

static DAT_RETURN w_ep_post_rdma_write(DAT_EP_HANDLE ep, DAT_COUNT n, DAT_LMR_TRIPLET *iov, DAT_DTO_COOKIE cookie,
                                       const DAT_RMR_TRIPLET *remote, DAT_COMPLETION_FLAGS flags)
{
    struct call c;
    post_begin(&c, "ep_post_rdma_write", "rdma_write", ep, cookie, flags);
    kv_iov(&c, n, iov);
    kv_remote(&c, remote);
    DAT_RETURN rc = FN(ep_post_rdma_write)(ep, n, iov, cookie, remote, flags);
    call_end(&c, rc);
    return rc;
}

static DAT_RETURN w_ep_post_rdma_read_to_rmr(DAT_EP_HANDLE ep, const DAT_RMR_TRIPLET *local, DAT_DTO_COOKIE cookie,
                                             const DAT_RMR_TRIPLET *remote, DAT_COMPLETION_FLAGS flags)
{
    struct call c;
    post_begin(&c, "ep_post_rdma_read_to_rmr", "rdma_read_to_rmr", ep, cookie, flags);
    if (local != NULL) {
        sd_trace_kv_hex(&c.r, "local_rmr_ctx", local->rmr_context);
        sd_trace_kv_u64(&c.r, "len", local->segment_length);
    }
    kv_remote(&c, remote);
    DAT_RETURN rc = FN(ep_post_rdma_read_to_rmr)(ep, local, cookie, remote, flags);
    call_end(&c, rc);
    return rc;
}

static DAT_RETURN w_srq_post_recv(DAT_SRQ_HANDLE srq, DAT_COUNT n, DAT_LMR_TRIPLET *iov, DAT_DTO_COOKIE cookie)
{
    struct call c;
    post_begin(&c, "srq_post_recv", "recv", srq, cookie, 0);
    kv_iov(&c, n, iov);
    DAT_RETURN rc = FN(srq_post_recv)(srq, n, iov, cookie);
    call_end(&c, rc);
    return rc;
}

static DAT_RETURN w_rmr_bind(DAT_RMR_HANDLE rmr, DAT_LMR_HANDLE lmr, const DAT_LMR_TRIPLET *iov,
                             DAT_MEM_PRIV_FLAGS priv, DAT_VA_TYPE va, DAT_EP_HANDLE ep, DAT_RMR_COOKIE cookie,
                             DAT_COMPLETION_FLAGS flags, DAT_RMR_CONTEXT *out)
{
    struct call c;
    post_begin(&c, "rmr_bind", "bind", rmr, cookie, flags);
    sd_trace_kv_raw_handle(&c.r, "lmr", lmr);
    sd_trace_kv_raw_handle(&c.r, "ep", ep);
    if (iov != NULL) {
        sd_trace_kv_hex(&c.r, "lmr_ctx", iov->lmr_context);
        sd_trace_kv_hex(&c.r, "addr", iov->virtual_address);
        sd_trace_kv_u64(&c.r, "len", iov->segment_length);
    }
    sd_trace_kv_hex(&c.r, "priv", priv);
    DAT_RETURN rc = FN(rmr_bind)(rmr, lmr, iov, priv, va, ep, cookie, flags, out);
    if (rc == DAT_SUCCESS && out != NULL)
        sd_trace_kv_hex(&c.r, "rmr_ctx", *out);
    call_end(&c, rc);
    return rc;
}

/* ------------------------------------------------------------ memory */

static DAT_RETURN w_lmr_create(DAT_IA_HANDLE ia, DAT_MEM_TYPE type, DAT_REGION_DESCRIPTION region, DAT_VLEN len,
                               DAT_PZ_HANDLE pz, DAT_MEM_PRIV_FLAGS priv, DAT_VA_TYPE va, DAT_LMR_HANDLE *out,
                               DAT_LMR_CONTEXT *lctx, DAT_RMR_CONTEXT *rctx, DAT_VLEN *reg_len,
                               DAT_VADDR *reg_addr)
{
    struct call c;
    call_begin(&c, "call", "lmr_create", ia);
    sd_trace_kv_hex(&c.r, "mem_type", type);
    sd_trace_kv_u64(&c.r, "len", len);
    sd_trace_kv_raw_handle(&c.r, "pz", pz);
    sd_trace_kv_hex(&c.r, "priv", priv);
    DAT_RETURN rc = FN(lmr_create)(ia, type, region, len, pz, priv, va, out, lctx, rctx, reg_len, reg_addr);
    kv_new(&c, rc, (const DAT_HANDLE *)out);
    if (rc == DAT_SUCCESS) {
        if (lctx != NULL)
            sd_trace_kv_hex(&c.r, "lmr_ctx", *lctx);
        if (rctx != NULL)
            sd_trace_kv_hex(&c.r, "rmr_ctx", *rctx);
        if (reg_addr != NULL)
            sd_trace_kv_hex(&c.r, "reg_addr", *reg_addr);
        if (reg_len != NULL)
            sd_trace_kv_u64(&c.r, "reg_len", *reg_len);
    }
    call_end(&c, rc);
    return rc;
}
GEN3(lmr_query, DAT_LMR_HANDLE, DAT_LMR_PARAM_MASK, DAT_LMR_PARAM *)
GEN1(lmr_free, DAT_LMR_HANDLE)
GEN3(lmr_sync_rdma_read, DAT_IA_HANDLE, const DAT_LMR_TRIPLET *, DAT_VLEN)
GEN3(lmr_sync_rdma_write, DAT_IA_HANDLE, const DAT_LMR_TRIPLET *, DAT_VLEN)

NEW2(rmr_create, DAT_PZ_HANDLE, DAT_RMR_HANDLE)
NEW2(rmr_create_for_ep, DAT_PZ_HANDLE, DAT_RMR_HANDLE)
GEN3(rmr_query, DAT_RMR_HANDLE, DAT_RMR_PARAM_MASK, DAT_RMR_PARAM *)
GEN1(rmr_free, DAT_RMR_HANDLE)

NEW2(pz_create, DAT_IA_HANDLE, DAT_PZ_HANDLE)
GEN3(pz_query, DAT_PZ_HANDLE, DAT_PZ_PARAM_MASK, DAT_PZ_PARAM *)
GEN1(pz_free, DAT_PZ_HANDLE)

/* ------------------------------------------------------------ service points */

static DAT_RETURN w_psp_create(DAT_IA_HANDLE ia, DAT_CONN_QUAL qual, DAT_EVD_HANDLE evd, DAT_PSP_FLAGS flags,
                               DAT_PSP_HANDLE *out)
{
    struct call c;
    call_begin(&c, "call", "psp_create", ia);
    sd_trace_kv_u64(&c.r, "conn_qual", qual);
    sd_trace_kv_raw_handle(&c.r, "evd", evd);
    DAT_RETURN rc = FN(psp_create)(ia, qual, evd, flags, out);
    kv_new(&c, rc, (const DAT_HANDLE *)out);
    call_end(&c, rc);
    return rc;
}

static DAT_RETURN w_psp_create_any(DAT_IA_HANDLE ia, DAT_CONN_QUAL *qual, DAT_EVD_HANDLE evd, DAT_PSP_FLAGS flags,
                                   DAT_PSP_HANDLE *out)
{
    struct call c;
    call_begin(&c, "call", "psp_create_any", ia);
    sd_trace_kv_raw_handle(&c.r, "evd", evd);
    DAT_RETURN rc = FN(psp_create_any)(ia, qual, evd, flags, out);
    if (rc == DAT_SUCCESS && qual != NULL)
        sd_trace_kv_u64(&c.r, "conn_qual", *qual);
    kv_new(&c, rc, (const DAT_HANDLE *)out);
    call_end(&c, rc);
    return rc;
}
GEN3(psp_query, DAT_PSP_HANDLE, DAT_PSP_PARAM_MASK, DAT_PSP_PARAM *)
GEN1(psp_free, DAT_PSP_HANDLE)

static DAT_RETURN w_rsp_create(DAT_IA_HANDLE ia, DAT_CONN_QUAL qual, DAT_EP_HANDLE ep, DAT_EVD_HANDLE evd,
                               DAT_RSP_HANDLE *out)
{
    struct call c;
    call_begin(&c, "call", "rsp_create", ia);
    sd_trace_kv_u64(&c.r, "conn_qual", qual);
    sd_trace_kv_raw_handle(&c.r, "ep", ep);
    DAT_RETURN rc = FN(rsp_create)(ia, qual, ep, evd, out);
    kv_new(&c, rc, (const DAT_HANDLE *)out);
    call_end(&c, rc);
    return rc;
}
GEN3(rsp_query, DAT_RSP_HANDLE, DAT_RSP_PARAM_MASK, DAT_RSP_PARAM *)
GEN1(rsp_free, DAT_RSP_HANDLE)

static DAT_RETURN w_csp_create(DAT_IA_HANDLE ia, DAT_COMM *comm, DAT_IA_ADDRESS_PTR addr, DAT_EVD_HANDLE evd,
                               DAT_CSP_HANDLE *out)
{
    struct call c;
    call_begin(&c, "call", "csp_create", ia);
    kv_addr(&c, "addr", addr);
    DAT_RETURN rc = FN(csp_create)(ia, comm, addr, evd, out);
    kv_new(&c, rc, (const DAT_HANDLE *)out);
    call_end(&c, rc);
    return rc;
}
GEN3(csp_query, DAT_CSP_HANDLE, DAT_CSP_PARAM_MASK, DAT_CSP_PARAM *)
GEN1(csp_free, DAT_CSP_HANDLE)

/* ------------------------------------------------------------ SRQ, HA */

static DAT_RETURN w_srq_create(DAT_IA_HANDLE ia, DAT_PZ_HANDLE pz, DAT_SRQ_ATTR *attr, DAT_SRQ_HANDLE *out)
{
    struct call c;
    call_begin(&c, "call", "srq_create", ia);
    sd_trace_kv_raw_handle(&c.r, "pz", pz);
    DAT_RETURN rc = FN(srq_create)(ia, pz, attr, out);
    kv_new(&c, rc, (const DAT_HANDLE *)out);
    call_end(&c, rc);
    return rc;
}
GEN2(srq_set_lw, DAT_SRQ_HANDLE, DAT_COUNT)
GEN1(srq_free, DAT_SRQ_HANDLE)
GEN3(srq_query, DAT_SRQ_HANDLE, DAT_SRQ_PARAM_MASK, DAT_SRQ_PARAM *)
GEN2(srq_resize, DAT_SRQ_HANDLE, DAT_COUNT)
GEN3(ia_ha_related, DAT_IA_HANDLE, const DAT_NAME_PTR, DAT_BOOLEAN *)

/* ------------------------------------------------------------ slot 80 */

static const char *ext_op_name(int op)
{
    switch (op) {
    case DAT_IB_FETCH_AND_ADD_OP: return "fetch_add";
    case DAT_IB_CMP_AND_SWAP_OP: return "cmp_swap";
    case DAT_IB_RDMA_WRITE_IMMED_OP: return "write_imm";
    case DAT_IB_UD_SEND_OP: return "ud_send";
    case DAT_IB_QUERY_COUNTERS_OP: return "query_counters";
    case DAT_IB_PRINT_COUNTERS_OP: return "print_counters";
    case DAT_IB_START_COUNTERS_OP: return "start_counters";
    case DAT_IB_STOP_COUNTERS_OP: return "stop_counters";
    case DAT_IB_UD_CM_FREE_OP: return "ud_cm_free";
    case DAT_IB_UD_AH_FREE_OP: return "ud_ah_free";
    case DAT_IW_SSP_CREATE_OP: return "iw_ssp_create";
    case DAT_IW_SSP_FREE_OP: return "iw_ssp_free";
    case DAT_IW_SSP_QUERY_OP: return "iw_ssp_query";
    case DAT_IW_SOCKET_CONNECT_OP: return "iw_socket_connect";
    default: return "other";
    }
}

/* The extension DTOs are posts: decode their arguments from a copy of
 * the va_list, in the order ibext.c reads them. */
static DAT_RETURN w_handle_extendedop(DAT_HANDLE h, DAT_EXTENDED_OP op, va_list args)
{
    struct call c;
    if (op & (DAT_OPEN_EXTENSION_BASE | DAT_CLOSE_EXTENSION_BASE)) {
        /* Open-query passes the IA *name* as handle: never look it up. */
        call_begin(&c, "call", (op & DAT_OPEN_EXTENSION_BASE) ? "ib_open_query" : "ib_close_query", DAT_HANDLE_NULL);
        DAT_RETURN rc = FN(handle_extendedop)(h, op, args);
        call_end(&c, rc);
        return rc;
    }
    va_list ap;
    va_copy(ap, args);
    switch ((int)op) {
    case DAT_IB_RDMA_WRITE_IMMED_OP: {
        DAT_COUNT n = va_arg(ap, DAT_COUNT);
        DAT_LMR_TRIPLET *l = va_arg(ap, DAT_LMR_TRIPLET *);
        DAT_DTO_COOKIE ck = va_arg(ap, DAT_DTO_COOKIE);
        DAT_RMR_TRIPLET *r = va_arg(ap, DAT_RMR_TRIPLET *);
        uint32_t imm = va_arg(ap, DAT_UINT32);
        DAT_COMPLETION_FLAGS f = va_arg(ap, DAT_COMPLETION_FLAGS);
        post_begin(&c, "extension_op", "write_imm", h, ck, f);
        kv_iov(&c, n, l);
        kv_remote(&c, r);
        sd_trace_kv_hex(&c.r, "imm", imm);
        break;
    }
    case DAT_IB_FETCH_AND_ADD_OP:
    case DAT_IB_CMP_AND_SWAP_OP: {
        bool cas = op == DAT_IB_CMP_AND_SWAP_OP;
        uint64_t a1 = va_arg(ap, DAT_UINT64);
        uint64_t a2 = cas ? va_arg(ap, DAT_UINT64) : 0;
        DAT_LMR_TRIPLET *l = va_arg(ap, DAT_LMR_TRIPLET *);
        DAT_DTO_COOKIE ck = va_arg(ap, DAT_DTO_COOKIE);
        DAT_RMR_TRIPLET *r = va_arg(ap, DAT_RMR_TRIPLET *);
        DAT_COMPLETION_FLAGS f = va_arg(ap, DAT_COMPLETION_FLAGS);
        post_begin(&c, "extension_op", cas ? "cmp_swap" : "fetch_add", h, ck, f);
        kv_iov(&c, l != NULL ? 1 : 0, l);
        kv_remote(&c, r);
        sd_trace_kv_hex(&c.r, cas ? "compare" : "add", a1);
        if (cas)
            sd_trace_kv_hex(&c.r, "swap", a2);
        break;
    }
    default:
        call_begin(&c, "call", "extension_op", h);
        sd_trace_kv_str(&c.r, "op", ext_op_name((int)op));
        break;
    }
    va_end(ap);
    DAT_RETURN rc = FN(handle_extendedop)(h, op, args);
    call_end(&c, rc);
    return rc;
}

/* ------------------------------------------------------------ the table */

#define WRAP(name)                                                                                 \
    do {                                                                                           \
        if (p->name##_func != NULL)                                                                \
            p->name##_func = w_##name;                                                             \
    } while (0)

void sd_trace_wrap_table(DAT_PROVIDER *p)
{
    /* Every record slot has the same real functions: keep the first
     * table, before wrapping it. fill_table runs under provider.c's lock. */
    static bool saved;
    if (!saved) {
        g_real = *p;
        saved = true;
    }
    WRAP(ia_query); WRAP(ia_close);
    WRAP(set_consumer_context); WRAP(get_consumer_context); WRAP(get_handle_type);
    WRAP(cno_create); WRAP(cno_modify_agent); WRAP(cno_query); WRAP(cno_free); WRAP(cno_wait);
    WRAP(cr_query); WRAP(cr_accept); WRAP(cr_reject); WRAP(cr_handoff);
    WRAP(evd_create); WRAP(evd_query); WRAP(evd_modify_cno); WRAP(evd_enable); WRAP(evd_disable);
    WRAP(evd_wait); WRAP(evd_resize); WRAP(evd_post_se); WRAP(evd_dequeue); WRAP(evd_free);
    WRAP(ep_create); WRAP(ep_query); WRAP(ep_modify); WRAP(ep_connect); WRAP(ep_dup_connect);
    WRAP(ep_disconnect); WRAP(ep_post_send); WRAP(ep_post_recv); WRAP(ep_post_rdma_read);
    WRAP(ep_post_rdma_write); WRAP(ep_get_status); WRAP(ep_free);
    WRAP(lmr_create); WRAP(lmr_query); WRAP(lmr_free);
    WRAP(rmr_create); WRAP(rmr_query); WRAP(rmr_bind); WRAP(rmr_free);
    WRAP(psp_create); WRAP(psp_query); WRAP(psp_free);
    WRAP(rsp_create); WRAP(rsp_query); WRAP(rsp_free);
    WRAP(pz_create); WRAP(pz_query); WRAP(pz_free);
    WRAP(psp_create_any); WRAP(ep_reset);
    WRAP(evd_set_unwaitable); WRAP(evd_clear_unwaitable);
    WRAP(lmr_sync_rdma_read); WRAP(lmr_sync_rdma_write);
    WRAP(ep_create_with_srq); WRAP(ep_recv_query); WRAP(ep_set_watermark);
    WRAP(srq_create); WRAP(srq_free); WRAP(srq_post_recv); WRAP(srq_query); WRAP(srq_resize); WRAP(srq_set_lw);
    WRAP(csp_create); WRAP(csp_query); WRAP(csp_free);
    WRAP(ep_common_connect); WRAP(rmr_create_for_ep); WRAP(ep_post_send_with_invalidate);
    WRAP(ep_post_rdma_read_to_rmr); WRAP(cno_fd_create); WRAP(cno_trigger); WRAP(ia_ha_related);
    WRAP(handle_extendedop);
}
