/* SOFTDAT_PCAP writer (emu/pcapng.h): pcapng blocks (SHB, one Ethernet
 * IDB with nanosecond timestamps, one EPB per packet) and the synthesized
 * link, network and transport headers. Layouts: the pcapng specification
 * (draft-ietf-opsawg-pcapng), RFC 791, 8200, 793, 768. */
#include "emu/pcapng.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "emu/trace.h"
#include "emu/wire.h"

#define ETH_LEN 14
#define IP4_LEN 20
#define IP6_LEN 40
#define TCP_LEN 20
#define UDP_LEN 8
#define EPB_HDR 28
#define PKT_MAX (ETH_LEN + IP6_LEN + TCP_LEN + 65536 + 8)

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static int g_fd = -1;
static uint64_t g_bytes, g_max;
static bool g_full;
static uint8_t g_pkt[EPB_HDR + PKT_MAX + 8]; /* under g_mu */

static void put_le16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}
static void put_le32(uint8_t *p, uint32_t v)
{
    put_le16(p, (uint16_t)v);
    put_le16(p + 2, (uint16_t)(v >> 16));
}

int emu_pcap_open(const char *path, uint64_t max_bytes)
{
    char full[4096];
    if (path == NULL || sd_trace_expand_path(path, full, sizeof full) != 0) {
        fprintf(stderr, "softdat: SOFTDAT_PCAP: path too long\n");
        errno = ENAMETOOLONG;
        return -1;
    }
    int fd = open(full, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        int e = errno;
        fprintf(stderr, "softdat: SOFTDAT_PCAP=%s: %s\n", full, strerror(e));
        errno = e;
        return -1;
    }
    /* Section Header Block: magic, byte order, version 1.0, length unknown. */
    uint8_t shb[28] = {0};
    put_le32(shb, 0x0A0D0D0Au);
    put_le32(shb + 4, sizeof shb);
    put_le32(shb + 8, 0x1A2B3C4Du);
    put_le16(shb + 12, 1);
    put_le16(shb + 14, 0);
    memset(shb + 16, 0xff, 8);
    put_le32(shb + 24, sizeof shb);
    /* Interface Description Block: Ethernet, if_tsresol = 9 (ns). */
    uint8_t idb[32] = {0};
    put_le32(idb, 1);
    put_le32(idb + 4, sizeof idb);
    put_le16(idb + 8, 1 /* LINKTYPE_ETHERNET */);
    put_le32(idb + 12, 262144);
    put_le16(idb + 16, 9 /* if_tsresol */);
    put_le16(idb + 18, 1);
    idb[20] = 9;
    /* idb[24..28): opt_endofopt */
    put_le32(idb + 28, sizeof idb);
    if (!sd_trace_write_all(fd, shb, sizeof shb) || !sd_trace_write_all(fd, idb, sizeof idb)) {
        int e = errno;
        fprintf(stderr, "softdat: SOFTDAT_PCAP=%s: %s\n", full, strerror(e));
        close(fd);
        errno = e;
        return -1;
    }
    pthread_mutex_lock(&g_mu);
    if (g_fd >= 0)
        close(g_fd);
    g_fd = fd;
    g_bytes = sizeof shb + sizeof idb;
    g_max = max_bytes ? max_bytes : EMU_PCAP_DEFAULT_MAX;
    g_full = false;
    pthread_mutex_unlock(&g_mu);
    return 0;
}

void emu_pcap_close(void)
{
    pthread_mutex_lock(&g_mu);
    if (g_fd >= 0)
        close(g_fd);
    g_fd = -1;
    pthread_mutex_unlock(&g_mu);
}

bool emu_pcap_is_open(void)
{
    pthread_mutex_lock(&g_mu);
    bool on = g_fd >= 0 && !g_full;
    pthread_mutex_unlock(&g_mu);
    return on;
}

/* An address as IPv4 (4 bytes, v4-mapped IPv6 included) or IPv6 (16):
 * the length, 0 for anything else. */
static int ip_of(const struct sockaddr *sa, uint8_t out[16], uint16_t *port)
{
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *s = (const struct sockaddr_in *)sa;
        memcpy(out, &s->sin_addr, 4);
        *port = ntohs(s->sin_port);
        return 4;
    }
    if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *s = (const struct sockaddr_in6 *)sa;
        *port = ntohs(s->sin6_port);
        if (IN6_IS_ADDR_V4MAPPED(&s->sin6_addr)) {
            memcpy(out, s->sin6_addr.s6_addr + 12, 4);
            return 4;
        }
        memcpy(out, &s->sin6_addr, 16);
        return 16;
    }
    return 0;
}

static uint16_t ip4_csum(const uint8_t *h)
{
    uint32_t s = 0;
    for (int i = 0; i < IP4_LEN; i += 2)
        s += (uint32_t)emu_get_be16(h + i);
    while (s >> 16)
        s = (s & 0xffff) + (s >> 16);
    return (uint16_t)~s;
}

/* Ethernet + IP headers at p for a transport of tlen bytes (header and
 * payload): the header length, 0 when the addresses are not IP. */
static size_t link_ip(uint8_t *p, const struct sockaddr *src, const struct sockaddr *dst, uint8_t proto,
                      size_t tlen, uint16_t *sport, uint16_t *dport)
{
    uint8_t sa[16], da[16];
    int sl = ip_of(src, sa, sport), dl = ip_of(dst, da, dport);
    if (sl == 0 || sl != dl)
        return 0;
    /* Locally administered MACs derived from nothing: 02:00:00:00:00:01/02. */
    static const uint8_t mac_dst[6] = {2, 0, 0, 0, 0, 2}, mac_src[6] = {2, 0, 0, 0, 0, 1};
    memcpy(p, mac_dst, 6);
    memcpy(p + 6, mac_src, 6);
    uint8_t *ip = p + ETH_LEN;
    if (sl == 4) {
        emu_put_be16(p + 12, 0x0800);
        memset(ip, 0, IP4_LEN);
        ip[0] = 0x45;
        emu_put_be16(ip + 2, (uint16_t)(IP4_LEN + tlen));
        emu_put_be16(ip + 6, 0x4000); /* DF */
        ip[8] = 64;
        ip[9] = proto;
        memcpy(ip + 12, sa, 4);
        memcpy(ip + 16, da, 4);
        emu_put_be16(ip + 10, ip4_csum(ip));
        return ETH_LEN + IP4_LEN;
    }
    emu_put_be16(p + 12, 0x86DD);
    memset(ip, 0, 8);
    ip[0] = 0x60;
    emu_put_be16(ip + 4, (uint16_t)tlen);
    ip[6] = proto;
    ip[7] = 64;
    memcpy(ip + 8, sa, 16);
    memcpy(ip + 24, da, 16);
    return ETH_LEN + IP6_LEN;
}

/* Copy [skip, skip + len) of the iovecs to out. */
static void gather(uint8_t *out, const struct iovec *iov, size_t iovcnt, size_t skip, size_t len)
{
    for (size_t i = 0; i < iovcnt && len > 0; i++) {
        size_t l = iov[i].iov_len;
        if (skip >= l) {
            skip -= l;
            continue;
        }
        size_t take = l - skip < len ? l - skip : len;
        memcpy(out, (const uint8_t *)iov[i].iov_base + skip, take);
        out += take;
        len -= take;
        skip = 0;
    }
}

/* Wrap the packet at g_pkt + EPB_HDR (plen bytes) in an EPB and write it.
 * g_mu held. */
static void emit_locked(size_t plen)
{
    size_t padded = (plen + 3) & ~(size_t)3;
    size_t total = EPB_HDR + padded + 4;
    if (g_bytes + total > g_max) {
        g_full = true;
        fprintf(stderr, "softdat: SOFTDAT_PCAP reached SOFTDAT_PCAP_MAX (%llu bytes): capture stopped\n",
                (unsigned long long)g_max);
        return;
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
    uint8_t *b = g_pkt;
    put_le32(b, 6);
    put_le32(b + 4, (uint32_t)total);
    put_le32(b + 8, 0);
    put_le32(b + 12, (uint32_t)(ns >> 32));
    put_le32(b + 16, (uint32_t)ns);
    put_le32(b + 20, (uint32_t)plen);
    put_le32(b + 24, (uint32_t)plen);
    memset(b + EPB_HDR + plen, 0, padded - plen);
    put_le32(b + EPB_HDR + padded, (uint32_t)total);
    if (sd_trace_write_all(g_fd, b, total))
        g_bytes += total;
}

void emu_pcap_tcp(const struct sockaddr *src, const struct sockaddr *dst, uint32_t seq, uint32_t ack,
                  uint8_t flags, const struct iovec *iov, size_t iovcnt, size_t skip, size_t len)
{
    if (len > EMU_PCAP_SEG_MAX)
        return;
    pthread_mutex_lock(&g_mu);
    if (g_fd >= 0 && !g_full) {
        uint8_t *p = g_pkt + EPB_HDR;
        uint16_t sport, dport;
        size_t h = link_ip(p, src, dst, 6, TCP_LEN + len, &sport, &dport);
        if (h != 0) {
            uint8_t *t = p + h;
            memset(t, 0, TCP_LEN);
            emu_put_be16(t, sport);
            emu_put_be16(t + 2, dport);
            emu_put_be32(t + 4, seq);
            emu_put_be32(t + 8, ack);
            t[12] = (TCP_LEN / 4) << 4;
            t[13] = flags;
            emu_put_be16(t + 14, 65535);
            gather(t + TCP_LEN, iov, iovcnt, skip, len);
            emit_locked(h + TCP_LEN + len);
        }
    }
    pthread_mutex_unlock(&g_mu);
}

void emu_pcap_udp(const struct sockaddr *src, const struct sockaddr *dst, const struct iovec *iov,
                  size_t iovcnt, size_t len)
{
    if (len > 65535 - UDP_LEN - IP6_LEN)
        return;
    pthread_mutex_lock(&g_mu);
    if (g_fd >= 0 && !g_full) {
        uint8_t *p = g_pkt + EPB_HDR;
        uint16_t sport, dport;
        size_t h = link_ip(p, src, dst, 17, UDP_LEN + len, &sport, &dport);
        if (h != 0) {
            uint8_t *u = p + h;
            emu_put_be16(u, sport);
            emu_put_be16(u + 2, dport);
            emu_put_be16(u + 4, (uint16_t)(UDP_LEN + len));
            emu_put_be16(u + 6, 0); /* no checksum (IPv4); see docs/trace.md */
            gather(u + UDP_LEN, iov, iovcnt, 0, len);
            emit_locked(h + UDP_LEN + len);
        }
    }
    pthread_mutex_unlock(&g_mu);
}
