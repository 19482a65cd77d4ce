/* MPA connection setup (RFC 5044 Request/Reply + RFC 6581 "enhanced" v2
 * IRD/ORD block) and FPDU framing arithmetic. Pure codec: no sockets.
 *
 * Wire layout of a Request/Reply frame (see docs/wire.md):
 *   0  16  key "MPA ID Req Frame" / "MPA ID Rep Frame"
 *   16  1  flags M 0x80 | C 0x40 | R 0x20 | Enhanced 0x10 (0x0F reserved)
 *   17  1  revision (1 or 2)
 *   18  2  PD_Length (big-endian; includes the 4-byte v2 block if present)
 *   20  .. [v2: IRD word, ORD word] then the consumer's private data
 *
 * Typical connection-manager use:
 *   initiator: emu_mpa_init_request -> emu_mpa_encode -> send;
 *              read 20 bytes -> emu_mpa_parse_header (how many more) ->
 *              read them -> emu_mpa_parse -> emu_mpa_confirm.
 *   responder: read 20 -> emu_mpa_parse_header -> read rest -> emu_mpa_parse
 *              -> (consumer decides) emu_mpa_accept or emu_mpa_reject ->
 *              emu_mpa_encode -> send.
 *
 * All functions return 0 (EMU_MPA_OK) or a positive enum emu_mpa_err. */
#ifndef SOFTDAT_EMU_MPA_H
#define SOFTDAT_EMU_MPA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define EMU_MPA_KEY_LEN 16
#define EMU_MPA_HDR_LEN 20          /* key + flags + rev + PD_Length */
#define EMU_MPA_V2_LEN 4            /* IRD/ORD block at the start of PD */
#define EMU_MPA_PD_MAX 512          /* RFC limit on PD_Length (incl. v2 block) */
#define EMU_MPA_PD_INTEROP 256      /* what siw/Chelsio accept */
#define EMU_MPA_FRAME_MAX (EMU_MPA_HDR_LEN + EMU_MPA_PD_MAX)

/* Flags byte (offset 16). */
#define EMU_MPA_FLAG_M 0x80u        /* sender wants to receive markers */
#define EMU_MPA_FLAG_C 0x40u        /* sender wants CRC32c */
#define EMU_MPA_FLAG_R 0x20u        /* Reply only: connection rejected */
#define EMU_MPA_FLAG_ENH 0x10u      /* RFC 6581 IRD/ORD block present */
#define EMU_MPA_FLAG_RSVD 0x0Fu     /* sent 0, ignored on receive */

/* v2 IRD/ORD words. */
#define EMU_MPA_V2_P2P 0x8000u      /* IRD word, "A": peer-to-peer, RTR follows */
#define EMU_MPA_V2_RTR_SEND 0x4000u /* IRD word, "B": zero-length Send RTR */
#define EMU_MPA_V2_RTR_WRITE 0x8000u /* ORD word, "C": zero-length Write RTR */
#define EMU_MPA_V2_RTR_READ 0x4000u /* ORD word, "D": zero-length Read RTR */
#define EMU_MPA_V2_VAL 0x3FFFu      /* 14-bit IRD / ORD value */
#define EMU_MPA_IRD_ORD_MAX 0x3FFEu /* 0x3FFF means "not negotiated": never sent */

/* MPA (LLP layer 2, etype 0) Terminate error codes. */
enum emu_mpa_llp_ecode {
    EMU_MPA_LLP_CLOSED = 0x01,
    EMU_MPA_LLP_CRC = 0x02,
    EMU_MPA_LLP_MARKER = 0x03,
    EMU_MPA_LLP_BAD_REQREP = 0x04,
    EMU_MPA_LLP_CATASTROPHIC = 0x05,
    EMU_MPA_LLP_NO_IRD = 0x06,
    EMU_MPA_LLP_NO_RTR = 0x07,
};

enum emu_mpa_kind { EMU_MPA_REQUEST = 0, EMU_MPA_REPLY = 1 };

/* RTR (ready-to-receive) message types, usable as a bit set. We only ever
 * offer/choose WRITE or READ (never SEND; see docs/wire.md). */
enum emu_mpa_rtr {
    EMU_MPA_RTR_NONE = 0,
    EMU_MPA_RTR_SEND = 1u << 0,
    EMU_MPA_RTR_WRITE = 1u << 1,
    EMU_MPA_RTR_READ = 1u << 2,
};

enum emu_mpa_err {
    EMU_MPA_OK = 0,
    EMU_MPA_E_SHORT,        /* fewer bytes than the frame needs (not fatal) */
    EMU_MPA_E_KEY,          /* key is not the expected Req/Rep key */
    EMU_MPA_E_KEY_KIND,     /* valid key of the other kind (Req where Rep expected...) */
    EMU_MPA_E_REV,          /* revision not 1 or 2 (or above our max) */
    EMU_MPA_E_PD_LEN,       /* PD_Length above the limit */
    EMU_MPA_E_MARKERS,      /* M flag set: we never do markers (frame still decoded) */
    EMU_MPA_E_REJECT_IN_REQ,/* R flag set in a Request */
    EMU_MPA_E_V2_SHORT,     /* Enhanced flag but PD_Length < 4 */
    EMU_MPA_E_ENH_REV1,     /* Enhanced flag in a revision 1 frame */
    EMU_MPA_E_TRAILING,     /* bytes beyond 20 + PD_Length (Request only) */
    EMU_MPA_E_REJECTED,     /* confirm: peer set R (consumer reject) */
    EMU_MPA_E_ENH_MISMATCH, /* confirm: Reply revision/Enhanced differs from Request */
    EMU_MPA_E_NO_RTR,       /* confirm: P2P requested but no usable RTR type */
    EMU_MPA_E_IRD,          /* confirm: peer's ORD exceeds our IRD */
    EMU_MPA_E_NOSPACE,      /* encode: caller buffer too small */
    EMU_MPA_E_INVAL,        /* bad argument (PD too big to encode, rev 0...) */
    EMU_MPA_E_COUNT
};

/* A decoded (or to-be-encoded) Request or Reply. */
struct emu_mpa_frame {
    enum emu_mpa_kind kind;
    uint8_t rev;            /* 1 or 2 */
    bool markers;           /* M */
    bool crc;               /* C */
    bool reject;            /* R (Reply only) */
    bool enhanced;          /* v2 IRD/ORD block present (rev 2 only) */
    uint8_t rsvd_flags;     /* low 4 flag bits as received (ignored) */
    /* v2 block; meaningful iff enhanced */
    bool p2p;               /* A */
    unsigned rtr;           /* enum emu_mpa_rtr bit set (B/C/D) */
    uint16_t ird, ord;      /* 14-bit values */
    /* consumer private data (after the v2 block); on parse it points into
     * the caller's buffer */
    const uint8_t *pd;
    uint16_t pd_len;
};

/* Local configuration for the handshake. */
struct emu_mpa_policy {
    uint8_t rev;            /* highest revision we speak/initiate: 1 or 2 */
    bool crc;               /* we want CRC (sets C) */
    bool p2p;               /* initiator: request P2P + RTR (needs rev 2) */
    unsigned rtr;           /* RTR types we can send (initiator) / accept
                               (responder); 0 = WRITE|READ */
    uint16_t ird, ord;      /* local resources (clamped to 0x3FFE) */
    uint16_t pd_limit;      /* max PD_Length we accept; 0 = EMU_MPA_PD_MAX */
};

/* The negotiated outcome, from this side's point of view. */
struct emu_mpa_result {
    uint8_t rev;
    bool crc;               /* CRC in use in both directions */
    bool p2p;               /* an RTR FPDU follows the Reply */
    enum emu_mpa_rtr rtr;   /* chosen RTR type (NONE unless p2p) */
    uint16_t ird;           /* inbound reads we must serve */
    uint16_t ord;           /* outbound reads we may have in flight */
};

/* Bytes of a frame on the wire: 20 + PD_Length. */
size_t emu_mpa_frame_len(const struct emu_mpa_frame *f);

/* Encode f into buf. The v2 block is emitted iff f->enhanced; IRD/ORD are
 * clamped to 14 bits. *out_len = bytes written. Errors: E_NOSPACE, E_INVAL
 * (rev not 1/2, enhanced with rev 1, PD_Length > 512, R in a Request). */
int emu_mpa_encode(const struct emu_mpa_frame *f, uint8_t *buf, size_t cap,
                   size_t *out_len);

/* Validate the fixed 20-byte header and tell how many bytes follow
 * (*more = PD_Length). Structural errors, checked in this order:
 * E_SHORT (len < 20), E_KEY / E_KEY_KIND, E_REV (0 or > max_rev; max_rev 0
 * means 2), E_PD_LEN (> pd_limit; 0 means 512). Semantic flag problems
 * (markers, R in a Request) are left to emu_mpa_parse so the caller can
 * still reject politely. */
int emu_mpa_parse_header(const uint8_t *buf, size_t len, enum emu_mpa_kind expect,
                         uint8_t max_rev, uint16_t pd_limit, size_t *more);

/* Decode a whole frame (header + PD_Length bytes) from buf[0..len).
 * len < 20 + PD_Length -> E_SHORT. len > that -> accepted (the bytes after a
 * Reply may legitimately be the first FPDU); a Request followed by extra
 * bytes should be treated by the caller as E_TRAILING (see
 * emu_mpa_parse_strict). On success or E_MARKERS / E_REJECT_IN_REQ /
 * E_V2_SHORT / E_ENH_REV1, *f is filled as far as it could be decoded
 * (pd points into buf). */
int emu_mpa_parse(const uint8_t *buf, size_t len, enum emu_mpa_kind expect,
                  uint8_t max_rev, uint16_t pd_limit, struct emu_mpa_frame *f);

/* Like emu_mpa_parse but len must be exactly the frame length
 * (E_TRAILING otherwise): use for Requests. */
int emu_mpa_parse_strict(const uint8_t *buf, size_t len, enum emu_mpa_kind expect,
                         uint8_t max_rev, uint16_t pd_limit,
                         struct emu_mpa_frame *f);

/* Initiator: fill a Request from the policy and consumer private data.
 * Rev 2 requests are Enhanced with IRD/ORD; P2P offers pol->rtr (minus
 * SEND). Returns E_INVAL if pd_len doesn't fit in 512 (with the v2 block). */
int emu_mpa_init_request(struct emu_mpa_frame *req, const struct emu_mpa_policy *pol,
                         const void *pd, uint16_t pd_len);

/* Responder: build the accepting Reply to a parsed Request and compute the
 * result. Rules (docs/wire.md): same revision; C = req.C || pol.crc;
 * P2P honoured whenever the Request has A; RTR = WRITE if offered and
 * accepted, else READ if offered, else WRITE (the initiator will then
 * Terminate with NO_RTR); R.ord = min(pol.ord, req.ird); R.ird = pol.ird
 * (at least 1 for a READ RTR). Returns E_MARKERS for a Request with M (the
 * caller must then emu_mpa_reject), E_INVAL for a bad pd_len. */
int emu_mpa_accept(const struct emu_mpa_frame *req, const struct emu_mpa_policy *pol,
                   const void *pd, uint16_t pd_len, struct emu_mpa_frame *rep,
                   struct emu_mpa_result *res);

/* Responder: build a rejecting Reply (R=1, M=0) carrying the consumer's
 * private data; a v2 Request gets a v2 reject (IRD/ORD block first). */
int emu_mpa_reject(const struct emu_mpa_frame *req, const struct emu_mpa_policy *pol,
                   const void *pd, uint16_t pd_len, struct emu_mpa_frame *rep);

/* Initiator: check the parsed Reply against the Request we sent and compute
 * the result. Errors: E_REJECTED (consumer reject; rep->pd holds its
 * private data), E_MARKERS, E_ENH_MISMATCH, E_NO_RTR, E_IRD. For the last
 * three the initiator should send a Terminate LLP/MPA with the code from
 * emu_mpa_err_llp_ecode() and close. */
int emu_mpa_confirm(const struct emu_mpa_frame *req, const struct emu_mpa_frame *rep,
                    const struct emu_mpa_policy *pol, struct emu_mpa_result *res);

/* CRC rule (RFC 5044): on in both directions iff either side set C. */
static inline bool emu_mpa_crc_negotiate(bool req_c, bool rep_c)
{
    return req_c || rep_c;
}

/* CRC policy (SOFTDAT_CRC=on|off|auto; docs/wire.md): whether this side
 * sets C. "auto" (also NULL or empty) = off on loopback, on elsewhere. */
enum emu_mpa_crc_mode { EMU_MPA_CRC_AUTO = 0, EMU_MPA_CRC_ON, EMU_MPA_CRC_OFF };
/* Parse "on|off|auto" (also 1/0, yes/no, true/false; case-insensitive);
 * NULL/"" -> AUTO; anything else -> -1. */
int emu_mpa_crc_mode_parse(const char *text);
static inline bool emu_mpa_crc_want(enum emu_mpa_crc_mode mode, bool loopback)
{
    return mode == EMU_MPA_CRC_ON || (mode == EMU_MPA_CRC_AUTO && !loopback);
}

/* The MPA Terminate error code (enum emu_mpa_llp_ecode) for a handshake
 * error, or 0 if none applies (e.g. E_REJECTED). */
uint8_t emu_mpa_err_llp_ecode(int err);

/* Static text for an emu_mpa_err. */
const char *emu_mpa_strerror(int err);

/* ---- FPDU framing arithmetic (markers off) ---- */

#define EMU_FPDU_LEN_BYTES 2        /* ULPDU_Length field */
#define EMU_FPDU_CRC_BYTES 4
#define EMU_MPA_ULPDU_MAX 65535u

/* Pad bytes after a ULPDU of this length: (2 + ulpdu + pad) % 4 == 0. */
static inline unsigned emu_fpdu_pad(uint32_t ulpdu_len)
{
    return (4u - ((ulpdu_len + 2u) & 3u)) & 3u;
}

/* Whole FPDU on the wire: 2 + ULPDU + pad + CRC. */
static inline uint32_t emu_fpdu_wire_len(uint32_t ulpdu_len)
{
    return 2u + ulpdu_len + emu_fpdu_pad(ulpdu_len) + 4u;
}

/* MULPDU for an effective MSS (markers off): EMSS - (6 + EMSS % 4), capped
 * at 65535; 0 if emss is too small to be useful. */
uint32_t emu_mpa_mulpdu(uint32_t emss);

#endif
