/* SOFTDAT_PCAP: the frames a process sends and receives, written by the
 * provider itself as a pcapng file that Wireshark/tshark read like a
 * capture: each packet gets a synthesized Ethernet, IPv4-or-IPv6 and TCP
 * (or UDP) header carrying the connection's real addresses and ports, and
 * TCP sequence numbers that continue the stream per direction, so that
 * tshark reassembles the stream and its MPA/DDP/RDMAP dissectors decode
 * it (docs/trace.md §pcap). No root, no capture device.
 *
 * Bounded like the trace: SOFTDAT_PCAP_MAX bytes (default 64M, K/M/G),
 * the beginning kept: the first packet that would pass the cap stops the
 * capture for the rest of the process (one line on stderr says so).
 * Thread safe: one write(2) per packet under a mutex. */
#ifndef SOFTDAT_EMU_PCAPNG_H
#define SOFTDAT_EMU_PCAPNG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>

#define EMU_PCAP_DEFAULT_MAX (64ull << 20)
/* Largest TCP payload per synthesized segment: bigger writes are cut. */
#define EMU_PCAP_SEG_MAX 32768u

/* Open path ("%p" -> pid; truncated first) with a cap (0: default) and
 * write the section and interface headers. 0, or -1 (a line on stderr). */
int emu_pcap_open(const char *path, uint64_t max_bytes);
void emu_pcap_close(void);
bool emu_pcap_is_open(void);

#define EMU_PCAP_FIN 0x01
#define EMU_PCAP_SYN 0x02
#define EMU_PCAP_PSH 0x08
#define EMU_PCAP_ACK 0x10

/* One TCP segment from src to dst: seq/ack, flags, and the payload bytes
 * [skip, skip + len) of iov[0..iovcnt) (len <= EMU_PCAP_SEG_MAX). */
void emu_pcap_tcp(const struct sockaddr *src, const struct sockaddr *dst, uint32_t seq, uint32_t ack,
                  uint8_t flags, const struct iovec *iov, size_t iovcnt, size_t skip, size_t len);
/* One UDP datagram from src to dst: the first len bytes of iov. */
void emu_pcap_udp(const struct sockaddr *src, const struct sockaddr *dst, const struct iovec *iov,
                  size_t iovcnt, size_t len);

#endif
