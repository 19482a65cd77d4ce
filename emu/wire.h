/* Wire layout in one place: big-endian load/store helpers and the named
 * byte offsets of every header field the codecs read or write (MPA frames
 * and FPDUs, DDP tagged/untagged headers, the RDMAP headers that follow
 * them, Terminate, the UD datagram header). ddp.c, mpa.c, terminate.c,
 * qp_rx.c and ud.c use these instead of literal offsets, so the layout can
 * be checked against the RFCs (docs/wire.md) in one file. Facts from RFC
 * 5040/5041/5044/6581/7306 and the InfiniBand BTH/DETH layout. */
#ifndef SOFTDAT_EMU_WIRE_H
#define SOFTDAT_EMU_WIRE_H

#include <stdint.h>

/* ---------------------------------------------------------------- byte order */

static inline uint16_t emu_get_be16(const uint8_t *p)
{
    return (uint16_t)(p[0] << 8 | p[1]);
}
static inline uint32_t emu_get_be24(const uint8_t *p)
{
    return (uint32_t)p[0] << 16 | (uint32_t)p[1] << 8 | p[2];
}
static inline uint32_t emu_get_be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | emu_get_be24(p + 1);
}
static inline uint64_t emu_get_be64(const uint8_t *p)
{
    return (uint64_t)emu_get_be32(p) << 32 | emu_get_be32(p + 4);
}
static inline void emu_put_be16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}
static inline void emu_put_be24(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 16);
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)v;
}
static inline void emu_put_be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    emu_put_be24(p + 1, v);
}
static inline void emu_put_be64(uint8_t *p, uint64_t v)
{
    emu_put_be32(p, (uint32_t)(v >> 32));
    emu_put_be32(p + 4, (uint32_t)v);
}

/* ---------------------------------------------------------------- MPA (RFC 5044) */

/* Request/Reply frame: 16-byte key, flags, revision, private data length. */
#define EMU_WIRE_MPA_KEY 0
#define EMU_WIRE_MPA_FLAGS 16
#define EMU_WIRE_MPA_REV 17
#define EMU_WIRE_MPA_PD_LEN 18
/* Enhanced (RFC 6581) IRD/ORD block at the start of the private data. */
#define EMU_WIRE_MPA_V2_IRD 0
#define EMU_WIRE_MPA_V2_ORD 2
/* FPDU: ULPDU_Length, then the DDP segment (offsets below are relative
 * to the segment, i.e. to the byte after ULPDU_Length). */
#define EMU_WIRE_FPDU_ULPDU_LEN 0
#define EMU_WIRE_FPDU_SEG 2

/* softdat's capability marker at the start of MPA private data
 * (docs/wire.md §2.6): 3 magic bytes, a version, 32 capability bits. */
#define EMU_WIRE_CAP_VERSION 3
#define EMU_WIRE_CAP_BITS 4

/* ---------------------------------------------------------------- DDP (RFC 5041) */

#define EMU_WIRE_DDP_CTRL 0   /* T, L, reserved, DV */
#define EMU_WIRE_RDMAP_CTRL 1 /* RV, reserved, opcode */
/* Tagged buffer model. */
#define EMU_WIRE_DDP_T_STAG 2
#define EMU_WIRE_DDP_T_TO 6
/* Untagged buffer model. Bytes 2..5 are DDP-reserved for the ULP: RDMAP
 * carries the Invalidate STag of a Send with Invalidate there. */
#define EMU_WIRE_DDP_U_INV_STAG 2
#define EMU_WIRE_DDP_U_QN 6
#define EMU_WIRE_DDP_U_MSN 10
#define EMU_WIRE_DDP_U_MO 14

/* ---------------------------------------------------------------- RDMAP (RFC 5040, 7306)
 * Offsets relative to the RDMAP header, which follows the untagged DDP
 * header (EMU_DDP_UNTAGGED_HLEN bytes into the segment). */

#define EMU_WIRE_RREQ_SINK_STAG 0
#define EMU_WIRE_RREQ_SINK_TO 4
#define EMU_WIRE_RREQ_SIZE 12
#define EMU_WIRE_RREQ_SRC_STAG 16
#define EMU_WIRE_RREQ_SRC_TO 20

#define EMU_WIRE_AREQ_OP 0
#define EMU_WIRE_AREQ_REQ_ID 4
#define EMU_WIRE_AREQ_STAG 8
#define EMU_WIRE_AREQ_TO 12
#define EMU_WIRE_AREQ_ADD_SWAP 20
#define EMU_WIRE_AREQ_ADD_SWAP_MASK 28
#define EMU_WIRE_AREQ_COMPARE 36
#define EMU_WIRE_AREQ_COMPARE_MASK 44

#define EMU_WIRE_ARESP_REQ_ID 0
#define EMU_WIRE_ARESP_ORIG 4

/* Terminate: layer/etype, ecode, hdrct, reserved; then (M or D) the
 * DDP Segment Length, (D) the copied DDP header, (R) the copied Read
 * Request header. */
#define EMU_WIRE_TERM_LAYER_ETYPE 0
#define EMU_WIRE_TERM_ECODE 1
#define EMU_WIRE_TERM_HDRCT 2
#define EMU_WIRE_TERM_SEG_LEN_BYTES 2

/* ---------------------------------------------------------------- UD (IB BTH + DETH) */

#define EMU_WIRE_BTH_OPCODE 0
#define EMU_WIRE_BTH_FLAGS 1 /* SE, M, PadCnt, TVer */
#define EMU_WIRE_BTH_PKEY 2
#define EMU_WIRE_BTH_DEST_QP 5 /* 24 bits after a reserved byte */
#define EMU_WIRE_BTH_PSN 9     /* 24 bits after the A/reserved byte */
#define EMU_WIRE_DETH_QKEY 12
#define EMU_WIRE_DETH_SRC_QP 17 /* 24 bits after a reserved byte */

#endif
