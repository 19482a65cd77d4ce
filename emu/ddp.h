/* DDP (RFC 5041) + RDMAP (RFC 5040, RFC 7306) header codec, segmentation
 * arithmetic and Terminate messages. Pure functions over byte buffers.
 *
 * Send side, per segment (one FPDU):
 *     uint8_t hdr[EMU_FPDU_HDR_MAX], trl[EMU_FPDU_TRAILER_MAX];
 *     emu_fpdu_build_hdr(&h, payload_len, hdr, sizeof hdr, &hlen);
 *     tlen = emu_fpdu_build_trailer(hdr, hlen, payload_iov, n, crc_on, trl);
 *     writev({hdr,hlen}, payload_iov..., {trl,tlen});
 * hdr starts with the 2-byte MPA ULPDU_Length; trl is pad (0-3 zero bytes)
 * plus the 4-byte CRC field (CRC32c LSB-first, or zeros when CRC is off).
 *
 * Receive side: read the 2-byte ULPDU_Length, then feed the bytes that follow
 * to emu_ddp_parse (it says how many header bytes it needs), which validates
 * the whole header -- versions, opcode, T bit vs opcode, QN, MSN, MO, fixed
 * lengths -- before any payload byte is placed. Errors map 1:1 onto
 * Terminate layer/etype/ecode (emu_ddp_err_term). */
#ifndef SOFTDAT_EMU_DDP_H
#define SOFTDAT_EMU_DDP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

/* ---- sizes (counted from the first DDP byte) ---- */
#define EMU_DDP_TAGGED_HLEN 14
#define EMU_DDP_UNTAGGED_HLEN 18
#define EMU_RDMAP_READ_REQ_LEN 28
#define EMU_RDMAP_ATOMIC_REQ_LEN 52
#define EMU_RDMAP_ATOMIC_RESP_LEN 12
#define EMU_RDMAP_IMM_LEN 8
#define EMU_RDMAP_TERM_LEN 4            /* layer/etype, ecode, hdrct, rsvd */
#define EMU_DDP_HLEN_MAX 70             /* atomic request; terminate w/ all copies */
#define EMU_FPDU_HDR_MAX (2 + EMU_DDP_HLEN_MAX) /* incl. ULPDU_Length */
#define EMU_FPDU_TRAILER_MAX 8          /* pad 3 + CRC 4, rounded */
/* Project choice (docs/wire.md): FPDUs up to the 16-bit ULPDU limit, not
 * MSS-sized; emu_mpa_mulpdu(emss) is the RFC's MSS-aligned value. */
#define EMU_DDP_MULPDU_DEFAULT 65535u

/* ---- control bytes ---- */
#define EMU_DDP_T 0x80u
#define EMU_DDP_L 0x40u
#define EMU_DDP_RSVD 0x3Cu
#define EMU_DDP_DV_MASK 0x03u
#define EMU_DDP_VERSION 1u
#define EMU_RDMAP_RV_MASK 0xC0u
#define EMU_RDMAP_VERSION 1u            /* byte = 0x40 | opcode */
#define EMU_RDMAP_OP_MASK 0x0Fu

enum emu_rdmap_op {
    EMU_OP_WRITE = 0x0,
    EMU_OP_READ_REQ = 0x1,
    EMU_OP_READ_RESP = 0x2,
    EMU_OP_SEND = 0x3,
    EMU_OP_SEND_INV = 0x4,
    EMU_OP_SEND_SE = 0x5,
    EMU_OP_SEND_SE_INV = 0x6,
    EMU_OP_TERMINATE = 0x7,
    EMU_OP_IMM = 0x8,                   /* RFC 7306 Immediate Data */
    EMU_OP_IMM_SE = 0x9,
    EMU_OP_ATOMIC_REQ = 0xA,
    EMU_OP_ATOMIC_RESP = 0xB,
    EMU_OP_COUNT
};

/* Untagged queue numbers. */
enum emu_ddp_qn {
    EMU_QN_SEND = 0,                    /* Sends, Immediate Data */
    EMU_QN_READ_REQ = 1,                /* Read and Atomic Requests */
    EMU_QN_TERMINATE = 2,
    EMU_QN_ATOMIC_RESP = 3,
    EMU_QN_COUNT
};

enum emu_atomic_op { EMU_ATOMIC_FETCH_ADD = 0x0, EMU_ATOMIC_CMP_SWAP = 0x2 };

/* ---- Terminate layer / etype / ecode values ---- */
enum emu_term_layer { EMU_TERM_RDMAP = 0, EMU_TERM_DDP = 1, EMU_TERM_LLP = 2 };

/* RDMAP (layer 0) etypes */
#define EMU_TERM_RDMAP_CATASTROPHIC 0
#define EMU_TERM_RDMAP_PROTECTION 1
#define EMU_TERM_RDMAP_OPERATION 2
/* DDP (layer 1) etypes */
#define EMU_TERM_DDP_CATASTROPHIC 0
#define EMU_TERM_DDP_TAGGED 1
#define EMU_TERM_DDP_UNTAGGED 2
/* LLP (layer 2) etype: always 0 (MPA); codes in emu/mpa.h */
#define EMU_TERM_LLP_MPA 0

/* RDMAP remote protection (etype 1) codes */
#define EMU_RDMAP_EC_INV_STAG 0x00
#define EMU_RDMAP_EC_BOUNDS 0x01
#define EMU_RDMAP_EC_ACCESS 0x02
#define EMU_RDMAP_EC_STAG_STREAM 0x03
#define EMU_RDMAP_EC_TO_WRAP 0x04
#define EMU_RDMAP_EC_CANT_INVALIDATE 0x09   /* etype 1 or 2 */
#define EMU_RDMAP_EC_UNSPECIFIED 0xFF       /* etype 1 or 2 */
/* RDMAP remote operation (etype 2) codes */
#define EMU_RDMAP_EC_VERSION 0x05
#define EMU_RDMAP_EC_OPCODE 0x06
#define EMU_RDMAP_EC_CATA_STREAM 0x07
#define EMU_RDMAP_EC_CATA_GLOBAL 0x08
/* DDP tagged (etype 1) codes */
#define EMU_DDP_EC_T_INV_STAG 0x00
#define EMU_DDP_EC_T_BOUNDS 0x01
#define EMU_DDP_EC_T_STAG_STREAM 0x02
#define EMU_DDP_EC_T_TO_WRAP 0x03
#define EMU_DDP_EC_T_VERSION 0x04
/* DDP untagged (etype 2) codes */
#define EMU_DDP_EC_U_QN 0x01
#define EMU_DDP_EC_U_NO_BUF 0x02
#define EMU_DDP_EC_U_MSN_RANGE 0x03
#define EMU_DDP_EC_U_MO 0x04
#define EMU_DDP_EC_U_TOO_LONG 0x05
#define EMU_DDP_EC_U_VERSION 0x06

/* Terminate hdrct bits (byte 20 of the ULPDU). */
#define EMU_TERM_HDRCT_M 0x80u          /* DDP Segment Length valid */
#define EMU_TERM_HDRCT_D 0x40u          /* DDP header copied */
#define EMU_TERM_HDRCT_R 0x20u          /* Read Request header copied */

/* ---- decoded message bodies ---- */
struct emu_rdmap_read_req {
    uint32_t sink_stag;
    uint64_t sink_to;
    uint32_t size;                      /* RDMA Read Message Size (0 allowed) */
    uint32_t src_stag;
    uint64_t src_to;
};

struct emu_rdmap_atomic_req {
    uint8_t op;                         /* enum emu_atomic_op */
    uint32_t req_id;
    uint32_t stag;
    uint64_t to;
    uint64_t add_swap;                  /* Add Data / Swap Data */
    uint64_t add_swap_mask;             /* Add Mask / Swap Mask */
    uint64_t compare;
    uint64_t compare_mask;
};

struct emu_rdmap_atomic_resp {
    uint32_t req_id;                    /* Original Request Identifier */
    uint64_t orig;                      /* Original Remote Data Value */
};

struct emu_term {
    uint8_t layer;                      /* enum emu_term_layer (4 bits) */
    uint8_t etype;                      /* 4 bits */
    uint8_t ecode;
    uint8_t hdrct;                      /* EMU_TERM_HDRCT_* */
    uint16_t seg_len;                   /* valid iff hdrct & M */
    uint8_t ddp_hdr_len;                /* 14 or 18 when hdrct & D, else 0 */
    uint8_t ddp_hdr[EMU_DDP_UNTAGGED_HLEN];
    uint8_t rreq_hdr[EMU_RDMAP_READ_REQ_LEN]; /* valid iff hdrct & R */
};

/* One DDP segment's header, decoded (parse) or described (build).
 * Build: T and QN are implied by opcode; set last, and msn/mo (untagged)
 * or stag/to (tagged), inv_stag for *_INV, the body for fixed messages. */
struct emu_ddp_hdr {
    uint8_t opcode;                     /* enum emu_rdmap_op */
    bool tagged;
    bool last;
    uint8_t ddp_rsvd;                   /* parse: reserved DDP bits (ignored) */
    uint8_t rdmap_rsvd;                 /* parse: reserved RDMAP bits (ignored) */
    uint16_t hdr_len;                   /* DDP+RDMAP header bytes */
    uint32_t payload_len;               /* parse: ULPDU_Length - hdr_len */
    /* tagged */
    uint32_t stag;
    uint64_t to;
    /* untagged */
    uint32_t inv_stag;                  /* Send*_INV (RsvdULP bytes 2-5) */
    uint32_t qn, msn, mo;
    union {
        struct emu_rdmap_read_req rreq;
        struct emu_rdmap_atomic_req areq;
        struct emu_rdmap_atomic_resp aresp;
        uint8_t imm[EMU_RDMAP_IMM_LEN];
        struct emu_term term;
    } u;
};

/* Static facts about an opcode. */
bool emu_rdmap_op_valid(unsigned op);         /* 0x0..0xB */
bool emu_rdmap_op_tagged(unsigned op);        /* Write, Read Response */
int emu_rdmap_op_qn(unsigned op);             /* -1 for tagged/invalid */
bool emu_rdmap_op_has_payload(unsigned op);   /* Write/ReadResp/Send family */
const char *emu_rdmap_op_name(unsigned op);   /* "Send with SE", ... */

/* DDP+RDMAP header length for h (uses opcode and, for Terminate, hdrct). */
size_t emu_ddp_hdr_len(const struct emu_ddp_hdr *h);
/* The header length the RDMAP control byte (the segment's second byte)
 * promises, when its opcode alone says it (not a Terminate, not a reserved
 * opcode); otherwise 2, the bytes that tell the rest. emu_ddp_parse checks
 * the header; this only lets a reader gather it in one go. */
size_t emu_ddp_hdr_len_hint(uint8_t rdmap_ctrl);

/* ---- send side ---- */

enum emu_ddp_err {
    EMU_DDP_OK = 0,
    EMU_DDP_NEED_MORE,          /* parse: supply *need bytes and call again */
    /* parse errors, each with a fixed Terminate mapping */
    EMU_DDP_E_DDP_VERSION,      /* DDP tagged 0x04 / untagged 0x06 */
    EMU_DDP_E_RDMAP_VERSION,    /* RDMAP op 0x05 */
    EMU_DDP_E_OPCODE,           /* RDMAP op 0x06: reserved opcode, or RFC 7306 not enabled */
    EMU_DDP_E_T_MISMATCH,       /* RDMAP op 0x06: T bit disagrees with opcode */
    EMU_DDP_E_QN,               /* DDP untagged 0x01 */
    EMU_DDP_E_MSN,              /* DDP untagged 0x03: MSN range */
    EMU_DDP_E_MO,               /* DDP untagged 0x04: MO not the expected offset */
    EMU_DDP_E_SHORT_ULPDU,      /* RDMAP op 0xFF: ULPDU_Length < header */
    EMU_DDP_E_FIXED_LEN,        /* RDMAP op 0xFF: fixed-size message with payload / not last */
    EMU_DDP_E_ATOMIC_OP,        /* RDMAP op 0x06: unknown atomic operation */
    EMU_DDP_E_TERM_HDRCT,       /* RDMAP op 0xFF: Terminate hdrct inconsistent */
    EMU_DDP_E_TO_WRAP,          /* DDP tagged 0x03: TO + payload wraps 2^64 */
    /* build errors */
    EMU_DDP_E_INVAL,            /* bad opcode / field for the opcode */
    EMU_DDP_E_TOO_BIG,          /* header + payload > 65535 */
    EMU_DDP_E_NOSPACE,          /* caller buffer too small */
    EMU_DDP_E_COUNT
};

/* Write ULPDU_Length (2 bytes) + DDP/RDMAP header for one segment carrying
 * payload_len bytes into buf. *out_len = 2 + header length. Fixed-size
 * messages (Read Request, Terminate, atomics, Immediate) need
 * payload_len 0 and are always last. */
int emu_fpdu_build_hdr(const struct emu_ddp_hdr *h, uint32_t payload_len,
                       uint8_t *buf, size_t cap, size_t *out_len);

/* Build pad + CRC field into trailer[EMU_FPDU_TRAILER_MAX] for the FPDU
 * whose header (starting at ULPDU_Length) is hdr[0..hdr_len) and whose
 * payload is the iovecs (their total must be ULPDU_Length - header). With
 * crc_on false the CRC field is zero. Returns the trailer length (4..7). */
/* Control FPDUs (no payload) whole into buf (cap >= EMU_FPDU_HDR_MAX +
 * EMU_FPDU_TRAILER_MAX is always enough): header, pad, CRC (when crc_on).
 * Returns the FPDU's length, 0 if h cannot be built. The one builder of
 * the handshake's RTR FPDUs, their Read Response and the conn's LLP
 * Terminate (emu/conn.c). */
size_t emu_fpdu_build_ctrl(const struct emu_ddp_hdr *h, bool crc_on, uint8_t *buf, size_t cap);
/* Headers of the control FPDUs: a tagged zero-length message (RTR Write:
 * STag 1 TO 0; the Read Response answering a Read RTR) and the Read RTR
 * (zero-length Read Request, MSN 1 on queue 1, STags 1; RFC 6581). */
void emu_ddp_tagged0_hdr(struct emu_ddp_hdr *h, unsigned op, uint32_t stag, uint64_t to);
void emu_ddp_read_rtr_hdr(struct emu_ddp_hdr *h);

size_t emu_fpdu_build_trailer(const uint8_t *hdr, size_t hdr_len,
                              const struct iovec *payload, int iovcnt,
                              bool crc_on, uint8_t *trailer);

/* The same with CRC on, for a caller that already has the CRC (emu_crc32c
 * value) over the header and the payload: it summed the payload while
 * copying it (emu_crc32c_copy, emu/qp_tx.c). Adds the pad, stores the CRC
 * field; returns the trailer length (4..7). */
size_t emu_fpdu_trailer_crc(const uint8_t *hdr, uint32_t crc, uint8_t *trailer);

/* Receive-side CRC check of a complete FPDU held as iovecs (from the
 * ULPDU_Length field to the end of the CRC field). True if it matches. */
bool emu_fpdu_crc_ok(const struct iovec *fpdu, int iovcnt);

/* ---- segmentation ---- */

/* Max payload per segment for a MULPDU: (mulpdu - header) rounded down to a
 * multiple of 4, so only a message's last FPDU needs pad bytes and tagged
 * offsets stay 4-aligned. 0 if mulpdu cannot hold header + 4 bytes. */
uint32_t emu_ddp_seg_max_payload(uint32_t mulpdu, bool tagged);

struct emu_ddp_seg {
    uint64_t msg_len;
    uint64_t off;                       /* next segment's offset (MO / TO delta) */
    uint32_t max_payload;
    bool started, done;
};

struct emu_ddp_seg_info {
    uint64_t off;                       /* MO (untagged) or TO - base TO (tagged) */
    uint32_t len;                       /* payload bytes in this segment */
    bool last;                          /* L flag */
};

/* Start segmenting a message. Untagged messages are limited to 2^32-1
 * bytes (32-bit MO); tagged to 2^64-1. Returns E_INVAL for a too-small
 * mulpdu or too-long untagged message. A 0-byte message yields one
 * segment (len 0, last). */
int emu_ddp_seg_init(struct emu_ddp_seg *s, uint64_t msg_len, uint32_t mulpdu,
                     bool tagged);
/* Next segment; false once all were returned. */
bool emu_ddp_seg_next(struct emu_ddp_seg *s, struct emu_ddp_seg_info *out);
/* Number of segments (FPDUs) for a message; 0 on bad arguments. */
uint64_t emu_ddp_seg_count(uint64_t msg_len, uint32_t mulpdu, bool tagged);
/* Bytes on the wire for the whole message (all FPDUs, incl. trailers). */
uint64_t emu_ddp_msg_wire_len(uint64_t msg_len, uint32_t mulpdu, unsigned opcode);

/* Apply a segment to a header template: sets last and mo (untagged) or
 * to = base_to + off (tagged). */
void emu_ddp_seg_apply(struct emu_ddp_hdr *h, uint64_t base_to,
                       const struct emu_ddp_seg_info *si);

/* ---- receive side ---- */

/* Per-connection receive expectations, per untagged queue. Pass NULL to
 * emu_ddp_parse for stateless checks (QN, versions, opcodes, lengths). */
struct emu_ddp_rx_queue {
    uint32_t msn;                       /* MSN of the message in progress or next */
    uint32_t mo;                        /* next expected MO within it */
    bool in_progress;                   /* a non-last segment was seen */
};
struct emu_ddp_rx_state {
    bool rfc7306;                       /* accept opcodes 0x8-0xB */
    struct emu_ddp_rx_queue q[EMU_QN_COUNT];
};

/* Every queue expects MSN 1, MO 0. */
void emu_ddp_rx_init(struct emu_ddp_rx_state *st, bool rfc7306);

/* Validate and decode the header at p[0..avail) (the bytes after the
 * ULPDU_Length field) of a segment whose ULPDU_Length is ulpdu_len.
 * Returns NEED_MORE with *need = total header bytes required when avail is
 * short (call again with more), OK with *h filled, or an EMU_DDP_E_* parse
 * error (map it with emu_ddp_err_term). Checks, in order: DDP version,
 * RDMAP version, opcode, T vs opcode, header length vs ULPDU, then TO wrap
 * (tagged) or QN, MSN, MO, fixed-message rules, atomic op (untagged). Stateless w.r.t. st: call emu_ddp_rx_advance after
 * the segment was accepted and placed. */
int emu_ddp_parse(const uint8_t *p, size_t avail, uint16_t ulpdu_len,
                  const struct emu_ddp_rx_state *st, struct emu_ddp_hdr *h,
                  size_t *need);

/* Account an accepted untagged segment: advances MO, and MSN on L. */
void emu_ddp_rx_advance(struct emu_ddp_rx_state *st, const struct emu_ddp_hdr *h);

/* ---- Terminate ---- */

/* Fill t for (layer, etype, ecode) about the offending segment seg[0..avail)
 * (bytes after ULPDU_Length; may be NULL/short) with ULPDU_Length
 * ulpdu_len, choosing which headers to copy the way siw does: DDP errors
 * copy length + DDP header (not for version errors); RDMAP protection
 * errors copy it plus a Read Request header; RDMAP operation errors copy
 * the DDP header except for version/opcode errors; catastrophic and LLP
 * errors copy nothing. DDP Segment Length = the whole ULPDU_Length. */
void emu_term_init(struct emu_term *t, uint8_t layer, uint8_t etype, uint8_t ecode,
                   const uint8_t *seg, size_t avail, uint16_t ulpdu_len);

/* The Terminate triple for a parse error (returns false for OK/NEED_MORE
 * and build errors). seg/avail/ulpdu_len as for emu_term_init. */
bool emu_ddp_err_term(int err, const uint8_t *seg, size_t avail, uint16_t ulpdu_len,
                      struct emu_term *t);

/* Header template for a Terminate (QN 2, MSN 1, MO 0, L) carrying t. */
void emu_term_hdr(struct emu_ddp_hdr *h, const struct emu_term *t);

/* Names for diagnostics: "RDMAP", "remote protection", "invalid STag". */
const char *emu_term_layer_name(unsigned layer);
const char *emu_term_etype_name(unsigned layer, unsigned etype);
const char *emu_term_ecode_name(unsigned layer, unsigned etype, unsigned ecode);
/* "RDMAP remote protection: invalid STag" into buf; returns buf. */
char *emu_term_describe(const struct emu_term *t, char *buf, size_t len);

const char *emu_ddp_strerror(int err);

/* Project convention: a 32-bit DAT immediate occupies Immediate Data bytes
 * 0-3 big-endian, bytes 4-7 zero. */
void emu_rdmap_imm_from_u32(uint8_t imm[EMU_RDMAP_IMM_LEN], uint32_t v);
uint32_t emu_rdmap_imm_to_u32(const uint8_t imm[EMU_RDMAP_IMM_LEN]);

#endif
