/* The wire tap: the observer (emu/wire_io.h) that turns the bytes every
 * connection and UD endpoint moves into frame records for the trace
 * (docs/trace.md §frame) and packets for SOFTDAT_PCAP (emu/pcapng.h).
 *
 * Per endpoint and direction a small stream cutter follows the TCP byte
 * stream whatever the sizes of the reads and writes: the MPA Request or
 * Reply first, then FPDUs (2-byte ULPDU_Length, header, payload, pad,
 * CRC; no markers: a stream that asks for them, or does not start with an
 * MPA frame, is not cut further). It keeps only the first bytes of the
 * frame in progress (enough for every DDP/RDMAP header) and a running
 * CRC32c; nothing of the payload. A UD datagram is one frame.
 *
 * Off (no SOFTDAT_TRACE, no SOFTDAT_PCAP), no observer is installed: the
 * wire costs one relaxed load and a predictable branch per call. */
#ifndef SOFTDAT_EMU_WIRE_TAP_H
#define SOFTDAT_EMU_WIRE_TAP_H

#include <stdbool.h>
#include <stdint.h>

/* Read SOFTDAT_PCAP / SOFTDAT_PCAP_MAX (once per process), and install the
 * tap when the trace is on (sd_trace_init_from_env first) or a capture was
 * asked for. Returns true when the tap is installed. */
bool emu_wire_tap_init_from_env(void);
/* Install the tap explicitly (tests): frame records when `records`, pcap
 * packets when a capture file is open (emu_pcap_open). */
void emu_wire_tap_start(bool records);
void emu_wire_tap_stop(void);

#endif
