/* Fault injection for users' CI (SOFTDAT_FAULT, docs/user-guide.md §2.3):
 * the soft RNIC misbehaves on purpose, deterministically, so that a DAT
 * program's error handling can be tested without broken hardware. Each
 * fault produces what a failing RNIC gives a DAT program: the events,
 * statuses and return codes of the spec.
 *
 *   SOFTDAT_FAULT="KEY=VALUE,KEY=VALUE,..."
 *
 * Trigger values (for create, register, refuse, drop, crc):
 *   nth:N    the Nth occurrence only (1 = the first)
 *   every:N  every Nth occurrence
 *   after:N  every occurrence after the Nth
 *   pct:P    each occurrence with probability P % (0-100), from a
 *            generator seeded by seed=N (default 1): the same program
 *            making the same calls sees the same faults
 * Keys:
 *   create=T     a DAT object creation (PZ, EVD, EP, LMR, RMR, PSP, RSP,
 *                SRQ, CNO) fails: DAT_INSUFFICIENT_RESOURCES
 *   register=T   a dat_lmr_create fails: DAT_INSUFFICIENT_RESOURCES,
 *                DAT_RESOURCE_MEMORY (counted separately from create)
 *   refuse=T     an outgoing connect is refused:
 *                DAT_CONNECTION_EVENT_NON_PEER_REJECTED
 *   connect_delay_ms=N  every outgoing connect starts N ms late
 *   drop=T       a received frame (FPDU) breaks its connection, as an
 *                RNIC failure (Terminate LLP catastrophic to the peer):
 *                DAT_CONNECTION_EVENT_BROKEN, every outstanding DTO
 *                DAT_DTO_ERR_FLUSHED
 *   crc=T        a sent FPDU carries a wrong CRC (on connections with CRC
 *                in use, SOFTDAT_CRC=on): the peer terminates (MPA CRC
 *                error) and both sides see the connection break
 *   completion_delay_us=N  every DTO completion reaches its EVD N µs late
 *   seed=N
 * A malformed value is reported once on stderr and that key ignored. */
#ifndef SOFTDAT_EMU_FAULT_H
#define SOFTDAT_EMU_FAULT_H

#include <stdbool.h>
#include <stdint.h>

enum emu_fault_kind {
    EMU_FAULT_CREATE,
    EMU_FAULT_REGISTER,
    EMU_FAULT_REFUSE,
    EMU_FAULT_DROP,
    EMU_FAULT_CRC,
    EMU_FAULT_KINDS
};

/* One more occurrence of kind: true when it must fail. Cheap when no fault
 * is configured (one relaxed load after the first call). */
bool emu_fault_hit(enum emu_fault_kind kind);
/* connect_delay_ms in microseconds, 0 when unset. */
uint64_t emu_fault_connect_delay_us(void);
/* completion_delay_us, 0 when unset. */
uint64_t emu_fault_completion_delay_us(void);
/* Whether any fault is configured. */
bool emu_fault_active(void);

/* Tests: parse spec as if it were SOFTDAT_FAULT (NULL: none), resetting
 * every count. Returns the number of keys rejected. */
int emu_fault_configure(const char *spec);

#endif
