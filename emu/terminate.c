/* Terminate messages: choosing layer/etype/ecode and header copies, and the
 * name tables used in diagnostics. API in emu/ddp.h. */
#include "emu/ddp.h"

#include "emu/mem.h"
#include "emu/mpa.h"
#include "emu/wire.h"

#include <stdio.h>
#include <string.h>

void emu_term_init(struct emu_term *t, uint8_t layer, uint8_t etype, uint8_t ecode,
                   const uint8_t *seg, size_t avail, uint16_t ulpdu_len)
{
    memset(t, 0, sizeof *t);
    t->layer = layer & 0xF;
    t->etype = etype & 0xF;
    t->ecode = ecode;
    bool copy_ddp = false, copy_rreq = false;
    if (layer == EMU_TERM_DDP) {
        bool version = (etype == EMU_TERM_DDP_TAGGED && ecode == EMU_DDP_EC_T_VERSION) ||
                       (etype == EMU_TERM_DDP_UNTAGGED && ecode == EMU_DDP_EC_U_VERSION);
        /* A header of an unknown DDP version has no known layout. */
        copy_ddp = etype != EMU_TERM_DDP_CATASTROPHIC && !version;
    } else if (layer == EMU_TERM_RDMAP) {
        if (etype == EMU_TERM_RDMAP_PROTECTION) {
            copy_ddp = true;
            copy_rreq = true;
        } else if (etype == EMU_TERM_RDMAP_OPERATION) {
            copy_ddp = ecode != EMU_RDMAP_EC_VERSION && ecode != EMU_RDMAP_EC_OPCODE;
        }
    }
    if (!copy_ddp)
        return;
    t->hdrct = EMU_TERM_HDRCT_M;
    t->seg_len = ulpdu_len;
    if (!seg || avail < 1)
        return;
    uint8_t dlen = (seg[EMU_WIRE_DDP_CTRL] & EMU_DDP_T) ? EMU_DDP_TAGGED_HLEN : EMU_DDP_UNTAGGED_HLEN;
    if (avail < dlen)
        return;
    t->hdrct |= EMU_TERM_HDRCT_D;
    t->ddp_hdr_len = dlen;
    memcpy(t->ddp_hdr, seg, dlen);
    /* The Read Request header only when the failing message was one. */
    if (copy_rreq && dlen == EMU_DDP_UNTAGGED_HLEN &&
        (seg[EMU_WIRE_RDMAP_CTRL] & EMU_RDMAP_OP_MASK) == EMU_OP_READ_REQ &&
        avail >= EMU_DDP_UNTAGGED_HLEN + EMU_RDMAP_READ_REQ_LEN) {
        t->hdrct |= EMU_TERM_HDRCT_R;
        memcpy(t->rreq_hdr, seg + EMU_DDP_UNTAGGED_HLEN, EMU_RDMAP_READ_REQ_LEN);
    }
}

bool emu_ddp_err_term(int err, const uint8_t *seg, size_t avail, uint16_t ulpdu_len,
                      struct emu_term *t)
{
    uint8_t layer, etype, ecode;
    bool tagged = seg && avail >= 1 && (seg[EMU_WIRE_DDP_CTRL] & EMU_DDP_T);
    switch (err) {
    case EMU_DDP_E_DDP_VERSION:
        layer = EMU_TERM_DDP;
        etype = tagged ? EMU_TERM_DDP_TAGGED : EMU_TERM_DDP_UNTAGGED;
        ecode = tagged ? EMU_DDP_EC_T_VERSION : EMU_DDP_EC_U_VERSION;
        break;
    case EMU_DDP_E_RDMAP_VERSION:
        layer = EMU_TERM_RDMAP, etype = EMU_TERM_RDMAP_OPERATION;
        ecode = EMU_RDMAP_EC_VERSION;
        break;
    case EMU_DDP_E_OPCODE:
    case EMU_DDP_E_T_MISMATCH:
    case EMU_DDP_E_ATOMIC_OP:
        layer = EMU_TERM_RDMAP, etype = EMU_TERM_RDMAP_OPERATION;
        ecode = EMU_RDMAP_EC_OPCODE;
        break;
    case EMU_DDP_E_QN:
        layer = EMU_TERM_DDP, etype = EMU_TERM_DDP_UNTAGGED, ecode = EMU_DDP_EC_U_QN;
        break;
    case EMU_DDP_E_MSN:
        layer = EMU_TERM_DDP, etype = EMU_TERM_DDP_UNTAGGED;
        ecode = EMU_DDP_EC_U_MSN_RANGE;
        break;
    case EMU_DDP_E_MO:
        layer = EMU_TERM_DDP, etype = EMU_TERM_DDP_UNTAGGED, ecode = EMU_DDP_EC_U_MO;
        break;
    case EMU_DDP_E_TO_WRAP:
        layer = EMU_TERM_DDP, etype = EMU_TERM_DDP_TAGGED, ecode = EMU_DDP_EC_T_TO_WRAP;
        break;
    case EMU_DDP_E_SHORT_ULPDU:
    case EMU_DDP_E_FIXED_LEN:
    case EMU_DDP_E_TERM_HDRCT:
        layer = EMU_TERM_RDMAP, etype = EMU_TERM_RDMAP_OPERATION;
        ecode = EMU_RDMAP_EC_UNSPECIFIED;
        break;
    default:
        return false;
    }
    emu_term_init(t, layer, etype, ecode, seg, avail, ulpdu_len);
    return true;
}

/* Memory-check failures (emu/mem.c) as the Terminate a data sink or
 * responder sends. A Write's target is a DDP tagged buffer (RFC 5041
 * §7.2: DDP has no access-rights code, so an access failure is an invalid
 * STag); a Read's source and an atomic's target are RDMAP remote
 * protection errors (RFC 5040 §7.2); a failed Send with Invalidate is
 * "STag cannot be invalidated", a protection error when the STag belongs
 * to another protection domain or stream, an operation error otherwise. */
struct emu_mem_term emu_mem_term_code(enum emu_mem_status st, enum emu_mem_op op)
{
    struct emu_mem_term tc = {0, 0, 0};
    if (st == EMU_MEM_OK)
        return tc;
    if (op == EMU_MEM_OP_INVALIDATE) {
        tc.layer = EMU_TERM_RDMAP;
        tc.etype = (st == EMU_MEM_E_PZ || st == EMU_MEM_E_SCOPE) ? EMU_TERM_RDMAP_PROTECTION
                                                                 : EMU_TERM_RDMAP_OPERATION;
        tc.ecode = EMU_RDMAP_EC_CANT_INVALIDATE;
        return tc;
    }
    if (op == EMU_MEM_OP_WRITE) {
        tc.layer = EMU_TERM_DDP;
        tc.etype = EMU_TERM_DDP_TAGGED;
        switch (st) {
        case EMU_MEM_E_BOUNDS: tc.ecode = EMU_DDP_EC_T_BOUNDS; break;
        case EMU_MEM_E_PZ:
        case EMU_MEM_E_SCOPE: tc.ecode = EMU_DDP_EC_T_STAG_STREAM; break;
        case EMU_MEM_E_TO_WRAP: tc.ecode = EMU_DDP_EC_T_TO_WRAP; break;
        default: tc.ecode = EMU_DDP_EC_T_INV_STAG; break;
        }
        return tc;
    }
    tc.layer = EMU_TERM_RDMAP;
    tc.etype = EMU_TERM_RDMAP_PROTECTION;
    switch (st) {
    case EMU_MEM_E_STAG: tc.ecode = EMU_RDMAP_EC_INV_STAG; break;
    case EMU_MEM_E_BOUNDS: tc.ecode = EMU_RDMAP_EC_BOUNDS; break;
    case EMU_MEM_E_ACCESS: tc.ecode = EMU_RDMAP_EC_ACCESS; break;
    case EMU_MEM_E_PZ:
    case EMU_MEM_E_SCOPE: tc.ecode = EMU_RDMAP_EC_STAG_STREAM; break;
    case EMU_MEM_E_TO_WRAP: tc.ecode = EMU_RDMAP_EC_TO_WRAP; break;
    default: tc.ecode = EMU_RDMAP_EC_UNSPECIFIED; break;
    }
    return tc;
}

void emu_term_hdr(struct emu_ddp_hdr *h, const struct emu_term *t)
{
    memset(h, 0, sizeof *h);
    h->opcode = EMU_OP_TERMINATE;
    h->last = true;
    h->qn = EMU_QN_TERMINATE;
    h->msn = 1;
    h->u.term = *t;
    h->hdr_len = (uint16_t)emu_ddp_hdr_len(h);
}

const char *emu_term_layer_name(unsigned layer)
{
    switch (layer) {
    case EMU_TERM_RDMAP:
        return "RDMAP";
    case EMU_TERM_DDP:
        return "DDP";
    case EMU_TERM_LLP:
        return "LLP";
    default:
        return "unknown layer";
    }
}

const char *emu_term_etype_name(unsigned layer, unsigned etype)
{
    if (layer == EMU_TERM_RDMAP) {
        switch (etype) {
        case EMU_TERM_RDMAP_CATASTROPHIC:
            return "local catastrophic";
        case EMU_TERM_RDMAP_PROTECTION:
            return "remote protection";
        case EMU_TERM_RDMAP_OPERATION:
            return "remote operation";
        }
    } else if (layer == EMU_TERM_DDP) {
        switch (etype) {
        case EMU_TERM_DDP_CATASTROPHIC:
            return "local catastrophic";
        case EMU_TERM_DDP_TAGGED:
            return "tagged buffer";
        case EMU_TERM_DDP_UNTAGGED:
            return "untagged buffer";
        }
    } else if (layer == EMU_TERM_LLP && etype == EMU_TERM_LLP_MPA) {
        return "MPA";
    }
    return "unknown error type";
}

const char *emu_term_ecode_name(unsigned layer, unsigned etype, unsigned ecode)
{
    if (layer == EMU_TERM_RDMAP) {
        if (etype == EMU_TERM_RDMAP_CATASTROPHIC)
            return "local catastrophic error";
        if (etype == EMU_TERM_RDMAP_PROTECTION) {
            switch (ecode) {
            case EMU_RDMAP_EC_INV_STAG:
                return "invalid STag";
            case EMU_RDMAP_EC_BOUNDS:
                return "base or bounds violation";
            case EMU_RDMAP_EC_ACCESS:
                return "access rights violation";
            case EMU_RDMAP_EC_STAG_STREAM:
                return "STag not associated with RDMAP stream";
            case EMU_RDMAP_EC_TO_WRAP:
                return "TO wrap";
            case EMU_RDMAP_EC_CANT_INVALIDATE:
                return "STag cannot be invalidated";
            case EMU_RDMAP_EC_UNSPECIFIED:
                return "unspecified";
            }
        } else if (etype == EMU_TERM_RDMAP_OPERATION) {
            switch (ecode) {
            case EMU_RDMAP_EC_VERSION:
                return "invalid RDMAP version";
            case EMU_RDMAP_EC_OPCODE:
                return "unexpected opcode";
            case EMU_RDMAP_EC_CATA_STREAM:
                return "catastrophic error, localized to RDMAP stream";
            case EMU_RDMAP_EC_CATA_GLOBAL:
                return "catastrophic error, global";
            case EMU_RDMAP_EC_CANT_INVALIDATE:
                return "STag cannot be invalidated";
            case EMU_RDMAP_EC_UNSPECIFIED:
                return "unspecified";
            }
        }
    } else if (layer == EMU_TERM_DDP) {
        if (etype == EMU_TERM_DDP_CATASTROPHIC)
            return "local catastrophic error";
        if (etype == EMU_TERM_DDP_TAGGED) {
            switch (ecode) {
            case EMU_DDP_EC_T_INV_STAG:
                return "invalid STag";
            case EMU_DDP_EC_T_BOUNDS:
                return "base or bounds violation";
            case EMU_DDP_EC_T_STAG_STREAM:
                return "STag not associated with DDP stream";
            case EMU_DDP_EC_T_TO_WRAP:
                return "TO wrap";
            case EMU_DDP_EC_T_VERSION:
                return "invalid DDP version";
            }
        } else if (etype == EMU_TERM_DDP_UNTAGGED) {
            switch (ecode) {
            case EMU_DDP_EC_U_QN:
                return "invalid QN";
            case EMU_DDP_EC_U_NO_BUF:
                return "invalid MSN - no buffer available";
            case EMU_DDP_EC_U_MSN_RANGE:
                return "invalid MSN - MSN range not valid";
            case EMU_DDP_EC_U_MO:
                return "invalid MO";
            case EMU_DDP_EC_U_TOO_LONG:
                return "DDP message too long for available buffer";
            case EMU_DDP_EC_U_VERSION:
                return "invalid DDP version";
            }
        }
    } else if (layer == EMU_TERM_LLP && etype == EMU_TERM_LLP_MPA) {
        switch (ecode) {
        case EMU_MPA_LLP_CLOSED:
            return "TCP connection closed, terminated or lost";
        case EMU_MPA_LLP_CRC:
            return "MPA CRC error";
        case EMU_MPA_LLP_MARKER:
            return "marker / ULPDU_Length mismatch";
        case EMU_MPA_LLP_BAD_REQREP:
            return "invalid MPA Request or Reply frame";
        case EMU_MPA_LLP_CATASTROPHIC:
            return "local catastrophic error";
        case EMU_MPA_LLP_NO_IRD:
            return "insufficient IRD resources";
        case EMU_MPA_LLP_NO_RTR:
            return "no matching RTR option";
        }
    }
    return "unknown error code";
}

char *emu_term_describe(const struct emu_term *t, char *buf, size_t len)
{
    if (!buf || !len)
        return buf;
    snprintf(buf, len, "%s %s: %s", emu_term_layer_name(t->layer),
             emu_term_etype_name(t->layer, t->etype),
             emu_term_ecode_name(t->layer, t->etype, t->ecode));
    return buf;
}
