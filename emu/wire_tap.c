/* The wire tap (emu/wire_tap.h): stream cutter, frame records, pcap. */
#include "emu/wire_tap.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "emu/crc32c.h"
#include "emu/ddp.h"
#include "emu/mpa.h"
#include "emu/pcapng.h"
#include "emu/trace.h"
#include "emu/ud.h"
#include "emu/wire.h"
#include "emu/wire_io.h"

#define CUT_HDR 80 /* >= EMU_FPDU_HDR_MAX and the 20-byte MPA header */
#define FLOW_MAX 112

enum cut_phase { CUT_MPA, CUT_FPDU, CUT_LOST };

/* One direction of one connection. Touched by one thread at a time (the
 * caller of that direction's sends or receives); `off` is also read by
 * the other direction for the pcap's acknowledgement numbers. */
struct cut {
    enum cut_phase phase;
    _Atomic uint64_t off;    /* stream bytes so far */
    uint64_t start;          /* stream offset of the frame in progress */
    uint32_t got, total;     /* its bytes seen; its length (0: not known yet) */
    uint8_t hdr[CUT_HDR];    /* its first bytes */
    uint8_t trl[4];          /* its CRC field */
    uint32_t crc;            /* CRC32c of [0, total - 4) so far */
    bool crc_on;             /* CRC in use (both MPA frames' C flags) */
    uint8_t mpa_flags;       /* its MPA frame's flags; read by the other direction
                              * (__atomic: written once, by this one) */
    /* pcap: the bytes of this direction not yet written, written as one
     * TCP segment when a frame ends (or the buffer fills), so that packets
     * start at frame boundaries as a sender's would, whatever the sizes
     * of the reads were. */
    uint8_t *pend;
    uint32_t pend_len;
    _Atomic uint64_t pend_seq; /* stream offset of pend[0]: the bytes before it
                                * are in the file (the other direction's
                                * packets acknowledge no more than that) */
};

struct tap {
    struct cut cut[2];       /* [EMU_WIRE_TX / RX] */
    uint64_t t_call[2];      /* when the call being cut began (tx) or returned (rx) */
    struct sockaddr_storage local, peer;
    bool have_local, have_peer;
    char flow[2][FLOW_MAX];  /* tx: local>peer; rx: peer>local */
    bool pcap;               /* a TCP stream with IP addresses, and SOFTDAT_PCAP on */
};

/* The MPA frame keys (RFC 5044 §7.1). */
static const char KEY_REQ[] = "MPA ID Req Frame", KEY_REP[] = "MPA ID Rep Frame";

static bool g_records;
static bool g_pcap;
static bool g_env_on;

static void addr_text(const struct sockaddr *sa, char *out, size_t cap)
{
    char ip[INET6_ADDRSTRLEN] = "?";
    unsigned port = 0;
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *s = (const struct sockaddr_in *)sa;
        inet_ntop(AF_INET, &s->sin_addr, ip, sizeof ip);
        port = ntohs(s->sin_port);
        snprintf(out, cap, "%s:%u", ip, port);
    } else if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *s = (const struct sockaddr_in6 *)sa;
        port = ntohs(s->sin6_port);
        if (IN6_IS_ADDR_V4MAPPED(&s->sin6_addr)) {
            inet_ntop(AF_INET, s->sin6_addr.s6_addr + 12, ip, sizeof ip);
            snprintf(out, cap, "%s:%u", ip, port);
        } else {
            inet_ntop(AF_INET6, &s->sin6_addr, ip, sizeof ip);
            snprintf(out, cap, "[%s]:%u", ip, port);
        }
    } else {
        snprintf(out, cap, "?");
    }
}

static void set_flows(struct tap *t)
{
    char l[FLOW_MAX / 2], p[FLOW_MAX / 2];
    addr_text((struct sockaddr *)&t->local, l, sizeof l);
    addr_text((struct sockaddr *)&t->peer, p, sizeof p);
    snprintf(t->flow[EMU_WIRE_TX], FLOW_MAX, "%s>%s", l, p);
    snprintf(t->flow[EMU_WIRE_RX], FLOW_MAX, "%s>%s", p, l);
}

/* pcap of a TCP stream starts with a synthesized three-way handshake
 * (ISN 0 both ways, data from sequence 1), the side that moved the first
 * bytes taken for the initiator (it sends the MPA Request). */
static void pcap_handshake(const struct tap *t, enum emu_wire_dir first)
{
    const struct sockaddr *l = (const struct sockaddr *)&t->local, *p = (const struct sockaddr *)&t->peer;
    const struct sockaddr *a = first == EMU_WIRE_TX ? l : p, *b = first == EMU_WIRE_TX ? p : l;
    emu_pcap_tcp(a, b, 0, 0, EMU_PCAP_SYN, NULL, 0, 0, 0);
    emu_pcap_tcp(b, a, 0, 1, EMU_PCAP_SYN | EMU_PCAP_ACK, NULL, 0, 0, 0);
    emu_pcap_tcp(a, b, 1, 1, EMU_PCAP_ACK, NULL, 0, 0, 0);
}

static struct tap *tap_of(struct emu_wire_ep *ep, int fd, enum emu_wire_dir dir)
{
    struct tap *t = atomic_load_explicit(&ep->tap, memory_order_acquire);
    if (t != NULL)
        return t;
    t = calloc(1, sizeof *t);
    if (t == NULL)
        return NULL;
    socklen_t sl = sizeof t->local;
    t->have_local = getsockname(fd, (struct sockaddr *)&t->local, &sl) == 0;
    if (!ep->datagram) {
        sl = sizeof t->peer;
        t->have_peer = getpeername(fd, (struct sockaddr *)&t->peer, &sl) == 0;
        if (!t->have_peer && ep->peer_len > 0) {
            /* Reset before its first traced frame (a rejected connect). */
            memcpy(&t->peer, &ep->peer, ep->peer_len);
            t->have_peer = true;
        }
        set_flows(t);
    }
    void *none = NULL;
    if (!atomic_compare_exchange_strong(&ep->tap, &none, t)) {
        free(t);
        return none;
    }
    t->pcap = g_pcap && !ep->datagram && t->have_local && t->have_peer;
    if (t->pcap)
        pcap_handshake(t, dir);
    return t;
}

static void pcap_flush(struct tap *t, enum emu_wire_dir dir)
{
    struct cut *c = &t->cut[dir];
    if (c->pend_len == 0)
        return;
    const struct sockaddr *l = (const struct sockaddr *)&t->local, *p = (const struct sockaddr *)&t->peer;
    uint32_t ack = 1 + (uint32_t)atomic_load_explicit(&t->cut[!dir].pend_seq, memory_order_acquire);
    uint64_t seq = atomic_load_explicit(&c->pend_seq, memory_order_relaxed);
    struct iovec v = {c->pend, c->pend_len};
    emu_pcap_tcp(dir == EMU_WIRE_TX ? l : p, dir == EMU_WIRE_TX ? p : l, 1 + (uint32_t)seq, ack,
                 EMU_PCAP_PSH | EMU_PCAP_ACK, &v, 1, 0, c->pend_len);
    atomic_store_explicit(&c->pend_seq, seq + c->pend_len, memory_order_release);
    c->pend_len = 0;
}

static void pcap_add(struct tap *t, enum emu_wire_dir dir, const uint8_t *p, size_t n)
{
    struct cut *c = &t->cut[dir];
    if (c->pend == NULL && (c->pend = malloc(EMU_PCAP_SEG_MAX)) == NULL)
        return;
    while (n > 0) {
        if (c->pend_len == EMU_PCAP_SEG_MAX)
            pcap_flush(t, dir);
        size_t take = EMU_PCAP_SEG_MAX - c->pend_len < n ? EMU_PCAP_SEG_MAX - c->pend_len : n;
        memcpy(c->pend + c->pend_len, p, take);
        c->pend_len += (uint32_t)take;
        p += take;
        n -= take;
    }
}

static void tap_release(void *ctx, struct emu_wire_ep *ep)
{
    (void)ctx;
    struct tap *t = atomic_load_explicit(&ep->tap, memory_order_acquire);
    if (t == NULL)
        return;
    for (int d = 0; d < 2; d++) {
        if (t->pcap)
            pcap_flush(t, (enum emu_wire_dir)d);
        free(t->cut[d].pend);
    }
    free(t);
}

/* ---------------------------------------------------------------- records */

static void frame_ctx(const struct emu_wire_ep *ep, struct sd_trace_ctx *ctx, struct sd_trace_frame *f,
                      enum emu_wire_dir dir)
{
    ctx->ia = ep->ia;
    ctx->t0_ns = ep->ia_t0_ns;
    memset(f, 0, sizeof *f);
    f->dir = dir == EMU_WIRE_TX ? SD_TRACE_TX : SD_TRACE_RX;
    const struct tap *t = atomic_load_explicit(&((struct emu_wire_ep *)ep)->tap, memory_order_relaxed);
    f->mono_ns = t ? t->t_call[dir] : 0;
    f->conn = atomic_load_explicit(&((struct emu_wire_ep *)ep)->conn_id, memory_order_relaxed);
}

static void record_mpa(const struct emu_wire_ep *ep, const struct tap *t, enum emu_wire_dir dir,
                       const struct cut *c)
{
    struct sd_trace_ctx ctx;
    struct sd_trace_frame f;
    frame_ctx(ep, &ctx, &f, dir);
    f.kind = memcmp(c->hdr, KEY_REQ, EMU_MPA_KEY_LEN) == 0 ? SD_TRACE_MPA_REQ : SD_TRACE_MPA_REP;
    uint8_t fl = c->hdr[EMU_WIRE_MPA_FLAGS];
    f.mpa_reject = (fl & EMU_MPA_FLAG_R) != 0;
    f.mpa_crc = (fl & EMU_MPA_FLAG_C) != 0;
    f.mpa_markers = (fl & EMU_MPA_FLAG_M) != 0;
    f.mpa_rev = c->hdr[EMU_WIRE_MPA_REV];
    f.pdata_len = emu_get_be16(c->hdr + EMU_WIRE_MPA_PD_LEN);
    f.frame_len = c->total;
    f.flow = t->flow[dir];
    f.seq = c->start;
    sd_trace_frame(&ctx, &f);
}

static void record_fpdu(const struct emu_wire_ep *ep, const struct tap *t, enum emu_wire_dir dir,
                        const struct cut *c)
{
    struct sd_trace_ctx ctx;
    struct sd_trace_frame f;
    frame_ctx(ep, &ctx, &f, dir);
    f.kind = SD_TRACE_FPDU;
    f.frame_len = c->total;
    f.flow = t->flow[dir];
    f.seq = c->start;
    uint16_t ulpdu = emu_get_be16(c->hdr);
    size_t have = (c->got < CUT_HDR ? c->got : CUT_HDR) - EMU_FPDU_LEN_BYTES;
    const uint8_t *s = c->hdr + EMU_FPDU_LEN_BYTES;
    struct emu_ddp_hdr h;
    size_t need = 0;
    char why[128];
    if (emu_ddp_parse(s, have, ulpdu, NULL, &h, &need) == EMU_DDP_OK) {
        f.opcode = h.opcode;
        f.tagged = h.tagged;
        f.last = h.last;
        f.stag = h.stag;
        f.to = h.to;
        f.queue = h.qn;
        f.msn = h.msn;
        f.mo = h.mo;
        f.payload_len = h.payload_len;
        f.inv_stag = h.inv_stag;
        if (h.opcode == EMU_OP_READ_REQ) {
            f.rreq = true;
            f.rreq_sink_stag = h.u.rreq.sink_stag;
            f.rreq_sink_to = h.u.rreq.sink_to;
            f.rreq_size = h.u.rreq.size;
            f.rreq_src_stag = h.u.rreq.src_stag;
            f.rreq_src_to = h.u.rreq.src_to;
        }
        if (h.opcode == EMU_OP_TERMINATE) {
            f.term = emu_get_be24(s + EMU_DDP_UNTAGGED_HLEN);
            f.term_text = emu_term_describe(&h.u.term, why, sizeof why);
        }
    } else {
        /* Not a header we accept: what the control bytes say. */
        f.opcode = s[EMU_WIRE_RDMAP_CTRL] & EMU_RDMAP_OP_MASK;
        f.tagged = (s[EMU_WIRE_DDP_CTRL] & EMU_DDP_T) != 0;
        f.last = (s[EMU_WIRE_DDP_CTRL] & EMU_DDP_L) != 0;
        f.payload_len = ulpdu;
    }
    f.crc = !c->crc_on ? SD_TRACE_CRC_NONE
            : emu_crc32c_get_le(c->trl) == c->crc ? SD_TRACE_CRC_OK
                                                  : SD_TRACE_CRC_BAD;
    sd_trace_frame(&ctx, &f);
}

/* ---------------------------------------------------------------- cutter */

static void frame_done(struct emu_wire_ep *ep, struct tap *t, enum emu_wire_dir dir, struct cut *c)
{
    if (g_records && SD_TRACE_ON()) {
        if (c->phase == CUT_MPA)
            record_mpa(ep, t, dir, c);
        else
            record_fpdu(ep, t, dir, c);
    }
    if (c->phase == CUT_MPA) {
        __atomic_store_n(&c->mpa_flags, c->hdr[EMU_WIRE_MPA_FLAGS], __ATOMIC_RELAXED);
        c->phase = (c->hdr[EMU_WIRE_MPA_FLAGS] & EMU_MPA_FLAG_M) ? CUT_LOST : CUT_FPDU;
    }
    c->got = 0;
    c->total = 0;
    c->crc = 0;
    c->start = atomic_load_explicit(&c->off, memory_order_relaxed);
}

/* The frame's length once its first bytes are in: 0 when they say the
 * stream is not one we can cut. */
static uint32_t frame_total(struct tap *t, struct cut *c)
{
    if (c->phase == CUT_MPA) {
        if (memcmp(c->hdr, KEY_REQ, EMU_MPA_KEY_LEN) != 0 &&
            memcmp(c->hdr, KEY_REP, EMU_MPA_KEY_LEN) != 0)
            return 0;
        return EMU_MPA_HDR_LEN + emu_get_be16(c->hdr + EMU_WIRE_MPA_PD_LEN);
    }
    c->crc_on = ((__atomic_load_n(&t->cut[0].mpa_flags, __ATOMIC_RELAXED) |
                  __atomic_load_n(&t->cut[1].mpa_flags, __ATOMIC_RELAXED)) &
                 EMU_MPA_FLAG_C) != 0;
    return emu_fpdu_wire_len(emu_get_be16(c->hdr));
}

static void cut_feed(struct emu_wire_ep *ep, struct tap *t, enum emu_wire_dir dir, const uint8_t *p, size_t n)
{
    struct cut *c = &t->cut[dir];
    bool crc = g_records;
    while (n > 0 && c->phase != CUT_LOST) {
        size_t take;
        if (c->total == 0) {
            uint32_t want = c->phase == CUT_MPA ? EMU_MPA_HDR_LEN : EMU_FPDU_LEN_BYTES;
            take = want - c->got < n ? want - c->got : n;
            memcpy(c->hdr + c->got, p, take);
        } else {
            uint32_t left = c->total - c->got;
            take = left < n ? left : n;
            if (c->got < CUT_HDR)
                memcpy(c->hdr + c->got, p, CUT_HDR - c->got < take ? CUT_HDR - c->got : take);
            /* The CRC field: the last 4 bytes. */
            uint32_t tstart = c->total - EMU_FPDU_CRC_BYTES;
            if (c->got + take > tstart) {
                size_t from = c->got >= tstart ? 0 : tstart - c->got;
                memcpy(c->trl + (c->got + from - tstart), p + from, take - from);
            }
        }
        if (crc && c->phase == CUT_FPDU) {
            /* CRC over [got, got + take) within [0, total - 4); total 0: the length field. */
            uint32_t end = c->total ? c->total - EMU_FPDU_CRC_BYTES : UINT32_MAX;
            if (c->got < end) {
                size_t l = end - c->got < take ? end - c->got : take;
                c->crc = emu_crc32c(c->crc, p, l);
            }
        }
        if (t->pcap)
            pcap_add(t, dir, p, take);
        c->got += (uint32_t)take;
        atomic_fetch_add_explicit(&c->off, take, memory_order_relaxed);
        p += take;
        n -= take;
        if (c->total == 0 && c->got == (c->phase == CUT_MPA ? EMU_MPA_HDR_LEN : EMU_FPDU_LEN_BYTES)) {
            c->total = frame_total(t, c);
            if (c->total == 0) {
                c->phase = CUT_LOST;
                break;
            }
        }
        if (c->total != 0 && c->got == c->total) {
            frame_done(ep, t, dir, c);
            if (t->pcap)
                pcap_flush(t, dir);
        }
    }
    if (n > 0) { /* not cut (any more): the bytes as they came */
        if (t->pcap) {
            pcap_add(t, dir, p, n);
            pcap_flush(t, dir);
        }
        atomic_fetch_add_explicit(&c->off, n, memory_order_relaxed);
    }
}

/* ---------------------------------------------------------------- datagrams */

static void datagram(struct emu_wire_ep *ep, struct tap *t, enum emu_wire_dir dir, const struct msghdr *mh,
                     size_t len)
{
    const struct sockaddr *peer = mh->msg_name != NULL && mh->msg_namelen > 0 ? mh->msg_name : NULL;
    if (g_pcap && peer != NULL && t->have_local) {
        const struct sockaddr *l = (const struct sockaddr *)&t->local;
        emu_pcap_udp(dir == EMU_WIRE_TX ? l : peer, dir == EMU_WIRE_TX ? peer : l, mh->msg_iov,
                     (size_t)mh->msg_iovlen, len);
    }
    if (!(g_records && SD_TRACE_ON()))
        return;
    uint8_t h[EMU_UD_HDR_LEN];
    size_t got = 0;
    for (size_t i = 0; i < (size_t)mh->msg_iovlen && got < sizeof h; i++) {
        size_t l = mh->msg_iov[i].iov_len < sizeof h - got ? mh->msg_iov[i].iov_len : sizeof h - got;
        memcpy(h + got, mh->msg_iov[i].iov_base, l);
        got += l;
    }
    if (got > len)
        got = len;
    struct sd_trace_ctx ctx;
    struct sd_trace_frame f;
    frame_ctx(ep, &ctx, &f, dir);
    f.kind = SD_TRACE_DATAGRAM;
    f.frame_len = (uint32_t)len;
    char flow[FLOW_MAX];
    if (peer != NULL && t->have_local) {
        char l[FLOW_MAX / 2], r[FLOW_MAX / 2];
        addr_text((const struct sockaddr *)&t->local, l, sizeof l);
        addr_text(peer, r, sizeof r);
        snprintf(flow, sizeof flow, "%s>%s", dir == EMU_WIRE_TX ? l : r, dir == EMU_WIRE_TX ? r : l);
        f.flow = flow;
    }
    if (got == sizeof h) {
        f.opcode = h[EMU_WIRE_BTH_OPCODE];
        f.queue = emu_get_be24(h + EMU_WIRE_BTH_DEST_QP);
        f.msn = emu_get_be24(h + EMU_WIRE_BTH_PSN);
        f.seq = f.msn;
        unsigned pad = (h[EMU_WIRE_BTH_FLAGS] >> 4) & 3;
        size_t over = sizeof h + pad + EMU_UD_ICRC_LEN;
        f.payload_len = len > over ? (uint32_t)(len - over) : 0;
    }
    sd_trace_frame(&ctx, &f);
}

/* ---------------------------------------------------------------- observer */

static void tap_bytes(void *ctx, struct emu_wire_ep *ep, int fd, enum emu_wire_dir dir, const struct msghdr *mh,
                      size_t len, uint64_t began_ns)
{
    (void)ctx;
    struct tap *t = tap_of(ep, fd, dir);
    if (t == NULL)
        return;
    t->t_call[dir] = dir == EMU_WIRE_TX ? began_ns : 0;
    if (ep->datagram) {
        datagram(ep, t, dir, mh, len);
        return;
    }
    size_t left = len;
    for (size_t i = 0; i < (size_t)mh->msg_iovlen && left > 0; i++) {
        size_t l = mh->msg_iov[i].iov_len < left ? mh->msg_iov[i].iov_len : left;
        cut_feed(ep, t, dir, mh->msg_iov[i].iov_base, l);
        left -= l;
    }
}

static const struct emu_wire_observer g_tap = {tap_bytes, tap_release, NULL};

void emu_wire_tap_start(bool records)
{
    g_records = records;
    g_pcap = emu_pcap_is_open();
    emu_wire_observe(&g_tap);
}

void emu_wire_tap_stop(void)
{
    emu_wire_observe(NULL);
}

static void read_env(void)
{
    const char *path = getenv("SOFTDAT_PCAP");
    if (path != NULL && *path != '\0') {
        uint64_t max = 0;
        const char *m = getenv("SOFTDAT_PCAP_MAX");
        if (m != NULL && *m != '\0' && (max = sd_trace_parse_size(m)) == 0)
            fprintf(stderr, "softdat: SOFTDAT_PCAP_MAX=%s not understood (bytes, or with K/M/G); using 64M\n", m);
        (void)emu_pcap_open(path, max);
    }
    if (SD_TRACE_ON() || emu_pcap_is_open()) {
        emu_wire_tap_start(SD_TRACE_ON());
        g_env_on = true;
    }
}

bool emu_wire_tap_init_from_env(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, read_env);
    return g_env_on;
}
