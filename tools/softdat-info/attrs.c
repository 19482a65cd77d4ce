/* softdat-info: printing of DAT_IA_ATTR and DAT_PROVIDER_ATTR.
 *
 * Every field is printed, in header order, so that a reader can compare two
 * providers (or two versions of softdat) with diff. Enumerations and flag
 * sets are decoded by name; unknown bits are shown in hex rather than
 * dropped, since a provider reporting them is exactly what one wants to see.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "tools/softdat-info/info.h"

#define KEY_WIDTH 38

void info_line(const char *key, const char *fmt, ...)
{
    va_list ap;

    printf("    %-*s ", KEY_WIDTH, key);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
}

const char *info_strerror(DAT_RETURN ret, char *buf, size_t len)
{
    const char *major = NULL, *minor = NULL;

    if (dat_strerror(ret, &major, &minor) != DAT_SUCCESS || major == NULL)
        major = "unknown DAT error";
    if (minor != NULL && minor[0] != '\0')
        snprintf(buf, len, "%s %s (0x%08x)", major, minor, (unsigned)ret);
    else
        snprintf(buf, len, "%s (0x%08x)", major, (unsigned)ret);
    return buf;
}

const char *info_addr(const DAT_SOCK_ADDR *sa, char *buf, size_t len)
{
    char text[INET6_ADDRSTRLEN];

    if (sa == NULL) {
        snprintf(buf, len, "(none)");
    } else if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)(const void *)sa;
        inet_ntop(AF_INET, &in->sin_addr, text, sizeof(text));
        snprintf(buf, len, "%s (AF_INET)", text);
    } else if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)(const void *)sa;
        inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof(text));
        if (in6->sin6_scope_id != 0)
            snprintf(buf, len, "%s%%%u (AF_INET6)", text, (unsigned)in6->sin6_scope_id);
        else
            snprintf(buf, len, "%s (AF_INET6)", text);
    } else {
        snprintf(buf, len, "(address family %u)", (unsigned)sa->sa_family);
    }
    return buf;
}

static const char *yesno(DAT_BOOLEAN b)
{
    return b == DAT_TRUE ? "yes" : b == DAT_FALSE ? "no" : "invalid boolean";
}

struct flag_name {
    unsigned long long bit;
    const char *name;
};

/* "LOW_LATENCY|PREMIUM" (or zero_name when no bit is set); unknown bits in hex. */
static const char *flags_text(unsigned long long v, const struct flag_name *names,
                              const char *zero_name, char *buf, size_t len)
{
    size_t used = 0;
    unsigned long long known = 0;

    buf[0] = '\0';
    if (v == 0) {
        snprintf(buf, len, "%s", zero_name);
        return buf;
    }
    for (const struct flag_name *f = names; f->name != NULL; f++) {
        known |= f->bit;
        if ((v & f->bit) && used < len)
            used += (size_t)snprintf(buf + used, len - used, "%s%s", used ? "|" : "", f->name);
    }
    if ((v & ~known) && used < len)
        snprintf(buf + used, len - used, "%s0x%llx", used ? "|" : "", v & ~known);
    return buf;
}

static void print_named_attrs(const char *what, DAT_COUNT n, const DAT_NAMED_ATTR *attrs)
{
    char key[64];

    snprintf(key, sizeof(key), "%s:", what);
    if (n <= 0 || attrs == NULL) {
        info_line(key, "(none)");
        return;
    }
    info_line(key, "%d", (int)n);
    for (DAT_COUNT i = 0; i < n; i++)
        printf("        %s=%s\n", attrs[i].name ? attrs[i].name : "(null)",
               attrs[i].value ? attrs[i].value : "(null)");
}

static int has_attr(const DAT_PROVIDER_ATTR *p, const char *name)
{
    for (DAT_COUNT i = 0; i < p->num_provider_specific_attr; i++)
        if (p->provider_specific_attr[i].name && strcmp(p->provider_specific_attr[i].name, name) == 0)
            return 1;
    return 0;
}

/* The optional extension features, by the attribute names that announce
 * them (IB extension: DAT_COUNTERS etc.; iWARP: DAT_IW_ATTR_SSP). */
static void print_extensions(const DAT_PROVIDER_ATTR *p)
{
    static const struct {
        const char *attr, *what;
    } feats[] = {
        {"DAT_IB_IMMED_DATA", "rdma-write-immediate"},
        {"DAT_IB_CMP_AND_SWAP", "cmp-and-swap"},
        {"DAT_IB_FETCH_AND_ADD", "fetch-and-add"},
        {"DAT_IB_UD", "ud"},
        {"DAT_COUNTERS", "counters"},
        {"DAT_IW_ATTR_SSP", "iwarp-socket-service-points"},
    };
    char buf[256] = "";
    size_t len = 0;
    for (size_t i = 0; i < sizeof feats / sizeof feats[0]; i++)
        if (has_attr(p, feats[i].attr) && len < sizeof buf)
            len += (size_t)snprintf(buf + len, sizeof buf - len, "%s%s", len ? " " : "", feats[i].what);
    info_line("extension_features:", "%s", len ? buf : "(none)");
}

void info_print_ia_attr(const DAT_IA_ATTR *a, int verbose)
{
    char buf[128];
    const char *ext;

    info_line("adapter_name:", "%.*s", DAT_NAME_MAX_LENGTH, a->adapter_name);
    info_line("vendor_name:", "%.*s", DAT_NAME_MAX_LENGTH, a->vendor_name);
    info_line("hardware_version:", "%u.%u", (unsigned)a->hardware_version_major,
              (unsigned)a->hardware_version_minor);
    info_line("firmware_version:", "%u.%u", (unsigned)a->firmware_version_major,
              (unsigned)a->firmware_version_minor);
    info_line("ia_address:", "%s", info_addr(a->ia_address_ptr, buf, sizeof(buf)));

#define COUNT(f) info_line(#f ":", "%d", (int)a->f)
#define U64(f) info_line(#f ":", "%llu", (unsigned long long)a->f)
#define HEX(f) info_line(#f ":", "0x%llx", (unsigned long long)a->f)
#define BOOL(f) info_line(#f ":", "%s", yesno(a->f))
    COUNT(max_eps);
    COUNT(max_dto_per_ep);
    COUNT(max_rdma_read_per_ep_in);
    COUNT(max_rdma_read_per_ep_out);
    COUNT(max_evds);
    COUNT(max_evd_qlen);
    COUNT(max_iov_segments_per_dto);
    COUNT(max_lmrs);
    U64(max_lmr_block_size);
    HEX(max_lmr_virtual_address);
    COUNT(max_pzs);
    U64(max_message_size);
    U64(max_rdma_size);
    COUNT(max_rmrs);
    HEX(max_rmr_target_address);
    COUNT(max_srqs);
    COUNT(max_ep_per_srq);
    COUNT(max_recv_per_srq);
    COUNT(max_iov_segments_per_rdma_read);
    COUNT(max_iov_segments_per_rdma_write);
    COUNT(max_rdma_read_in);
    COUNT(max_rdma_read_out);
    BOOL(max_rdma_read_per_ep_in_guaranteed);
    BOOL(max_rdma_read_per_ep_out_guaranteed);
    BOOL(zb_supported);
#undef COUNT
#undef U64
#undef HEX
#undef BOOL

    switch ((int)a->extension_supported) {
    case DAT_EXTENSION_NONE: ext = "none"; break;
    case DAT_EXTENSION_IB: ext = "IB"; break;
    case DAT_EXTENSION_IW: ext = "iWARP"; break;
    default: ext = "unknown"; break;
    }
    if ((int)a->extension_supported == DAT_EXTENSION_NONE)
        info_line("extension_supported:", "none");
    else
        info_line("extension_supported:", "%s (%d), version %d (%d.%d.%d)", ext,
                  (int)a->extension_supported, (int)a->extension_version,
                  (int)a->extension_version / 100, (int)a->extension_version / 10 % 10,
                  (int)a->extension_version % 10);
    print_named_attrs("transport_attr", a->num_transport_attr, a->transport_attr);
    print_named_attrs("vendor_attr", a->num_vendor_attr, a->vendor_attr);
    (void)verbose;
}

/* Index order of evd_stream_merging_supported = bit order of DAT_EVD_FLAGS. */
static const char *const stream_names[6] = {
    "software", "cr", "dto", "connection", "rmr_bind", "async",
};

static void print_merging(const DAT_PROVIDER_ATTR *p, int verbose)
{
    int yes = 0, diag = 1;

    for (int i = 0; i < 6; i++)
        for (int j = 0; j < 6; j++) {
            if (p->evd_stream_merging_supported[i][j] == DAT_TRUE)
                yes++;
            else if (i == j)
                diag = 0;
        }
    if (!verbose && yes == 36) {
        info_line("evd_stream_merging_supported:", "all (any streams may share one EVD)");
        return;
    }
    if (!verbose && yes == 6 && diag) {
        info_line("evd_stream_merging_supported:", "none (one stream per EVD)");
        return;
    }
    /* Compact matrix: one row per stream, a column letter per stream. */
    info_line("evd_stream_merging_supported:", "%d of 36 pairs%s", yes,
              diag ? "" : " (diagonal incomplete!)");
    printf("        %-12s  S C D N R A\n", "");
    for (int i = 0; i < 6; i++) {
        printf("        %-12s ", stream_names[i]);
        for (int j = 0; j < 6; j++)
            printf(" %c", p->evd_stream_merging_supported[i][j] == DAT_TRUE ? 'y' : '.');
        putchar('\n');
    }
}

void info_print_provider_attr(const DAT_PROVIDER_ATTR *p, int verbose)
{
    static const struct flag_name mem_types[] = {
        { DAT_MEM_TYPE_LMR, "LMR" },
        { DAT_MEM_TYPE_SHARED_VIRTUAL, "SHARED_VIRTUAL" },
        { 0, NULL },
    };
    static const struct flag_name qos[] = {
        { DAT_QOS_HIGH_THROUGHPUT, "HIGH_THROUGHPUT" },
        { DAT_QOS_LOW_LATENCY, "LOW_LATENCY" },
        { DAT_QOS_ECONOMY, "ECONOMY" },
        { DAT_QOS_PREMIUM, "PREMIUM" },
        { 0, NULL },
    };
    static const struct flag_name completion[] = {
        { DAT_COMPLETION_SUPPRESS_FLAG, "SUPPRESS" },
        { DAT_COMPLETION_SOLICITED_WAIT_FLAG, "SOLICITED_WAIT" },
        { DAT_COMPLETION_UNSIGNALLED_FLAG, "UNSIGNALLED" },
        { DAT_COMPLETION_BARRIER_FENCE_FLAG, "BARRIER_FENCE" },
        { DAT_COMPLETION_EVD_THRESHOLD_FLAG, "EVD_THRESHOLD" },
        { DAT_COMPLETION_LMR_INVALIDATE_FENCE_FLAG, "LMR_INVALIDATE_FENCE" },
        { 0, NULL },
    };
    static const char *const iov_names[] = { "CONSUMER", "PROVIDER_NOMOD", "PROVIDER_MOD" };
    static const char *const creator_names[] = { "NEVER", "IFASKED", "ALWAYS" };
    static const char *const scope_names[] = { "EP", "PZ", "ANY" };
    static const char *const ha_lb_names[] = { "NONE", "INTERCOMM", "INTRACOMM" };
    char buf[160];
    unsigned v;

    info_line("provider_name:", "%.*s", DAT_NAME_MAX_LENGTH, p->provider_name);
    info_line("provider_version:", "%u.%u", (unsigned)p->provider_version_major,
              (unsigned)p->provider_version_minor);
    info_line("dapl_version:", "%u.%u", (unsigned)p->dapl_version_major,
              (unsigned)p->dapl_version_minor);
    info_line("is_thread_safe:", "%s", yesno(p->is_thread_safe));
    /* DAT_MEM_TYPE_VIRTUAL is 0, so it cannot be a bit: it is always there. */
    info_line("lmr_mem_types_supported:", "VIRTUAL%s%s",
              p->lmr_mem_types_supported ? "|" : "",
              p->lmr_mem_types_supported
                  ? flags_text((unsigned long long)p->lmr_mem_types_supported, mem_types, "",
                               buf, sizeof(buf))
                  : "");
    v = (unsigned)p->iov_ownership_on_return;
    info_line("iov_ownership_on_return:", "%s", v < 3 ? iov_names[v] : "unknown");
    info_line("dat_qos_supported:", "%s",
              flags_text((unsigned long long)p->dat_qos_supported, qos, "BEST_EFFORT",
                         buf, sizeof(buf)));
    info_line("completion_flags_supported:", "%s",
              flags_text((unsigned long long)p->completion_flags_supported, completion,
                         "none", buf, sizeof(buf)));
    info_line("max_private_data_size:", "%d", (int)p->max_private_data_size);
    info_line("supports_multipath:", "%s", yesno(p->supports_multipath));
    v = (unsigned)p->ep_creator;
    info_line("ep_creator:", "%s", v < 3 ? creator_names[v] : "unknown");
    info_line("pz_support:", "%s", (int)p->pz_support == DAT_PZ_UNIQUE ? "UNIQUE"
                                   : (int)p->pz_support == DAT_PZ_SHAREABLE ? "SHAREABLE"
                                                                            : "unknown");
    info_line("optimal_buffer_alignment:", "%u", (unsigned)p->optimal_buffer_alignment);
    print_merging(p, verbose);
    info_line("srq_supported:", "%s", yesno(p->srq_supported));
    info_line("srq_watermarks_supported:", "%d", (int)p->srq_watermarks_supported);
    info_line("srq_ep_pz_difference_supported:", "%s",
              yesno(p->srq_ep_pz_difference_supported));
    info_line("srq_info_supported:", "%d", (int)p->srq_info_supported);
    info_line("ep_recv_info_supported:", "%d", (int)p->ep_recv_info_supported);
    info_line("lmr_sync_req:", "%s", yesno(p->lmr_sync_req));
    info_line("dto_async_return_guaranteed:", "%s", yesno(p->dto_async_return_guaranteed));
    info_line("rdma_write_for_rdma_read_req:", "%s", yesno(p->rdma_write_for_rdma_read_req));
    info_line("rdma_read_lmr_rmr_context_exposure:", "%s",
              yesno(p->rdma_read_lmr_rmr_context_exposure));
    v = (unsigned)p->rmr_scope_supported;
    info_line("rmr_scope_supported:", "%s", v < 3 ? scope_names[v] : "unknown");
    info_line("is_signal_safe:", "%s", yesno(p->is_signal_safe));
    info_line("ha_supported:", "%s", yesno(p->ha_supported));
    v = (unsigned)p->ha_loadbalancing;
    info_line("ha_loadbalancing:", "%s", v < 3 ? ha_lb_names[v] : "unknown");
    print_named_attrs("provider_specific_attr", p->num_provider_specific_attr,
                      p->provider_specific_attr);
    print_extensions(p);
}
