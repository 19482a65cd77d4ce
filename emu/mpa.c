/* MPA Request/Reply codec and negotiation (RFC 5044, RFC 6581).
 * Choices (RTR type, CRC rule, IRD/ORD clamping) are documented in
 * docs/wire.md. */
#include "emu/mpa.h"
#include "emu/wire.h"

#include <string.h>
#include <strings.h>

static const char key_req[EMU_MPA_KEY_LEN] = {'M', 'P', 'A', ' ', 'I', 'D', ' ', 'R',
                                              'e', 'q', ' ', 'F', 'r', 'a', 'm', 'e'};
static const char key_rep[EMU_MPA_KEY_LEN] = {'M', 'P', 'A', ' ', 'I', 'D', ' ', 'R',
                                              'e', 'p', ' ', 'F', 'r', 'a', 'm', 'e'};

static inline uint16_t clamp_iro(uint32_t v)
{
    return v > EMU_MPA_IRD_ORD_MAX ? EMU_MPA_IRD_ORD_MAX : (uint16_t)v;
}

static inline uint16_t min16(uint16_t a, uint16_t b)
{
    return a < b ? a : b;
}

size_t emu_mpa_frame_len(const struct emu_mpa_frame *f)
{
    return EMU_MPA_HDR_LEN + (f->enhanced ? EMU_MPA_V2_LEN : 0) + f->pd_len;
}

int emu_mpa_encode(const struct emu_mpa_frame *f, uint8_t *buf, size_t cap,
                   size_t *out_len)
{
    if (!f || (f->rev != 1 && f->rev != 2) || (f->enhanced && f->rev != 2) ||
        (f->reject && f->kind != EMU_MPA_REPLY) || (f->pd_len && !f->pd))
        return EMU_MPA_E_INVAL;
    size_t pdl = (f->enhanced ? EMU_MPA_V2_LEN : 0) + (size_t)f->pd_len;
    if (pdl > EMU_MPA_PD_MAX)
        return EMU_MPA_E_INVAL;
    if (!buf || cap < EMU_MPA_HDR_LEN + pdl)
        return EMU_MPA_E_NOSPACE;
    memcpy(buf, f->kind == EMU_MPA_REQUEST ? key_req : key_rep, EMU_MPA_KEY_LEN);
    buf[EMU_WIRE_MPA_FLAGS] = (uint8_t)((f->markers ? EMU_MPA_FLAG_M : 0) | (f->crc ? EMU_MPA_FLAG_C : 0) |
                        (f->reject ? EMU_MPA_FLAG_R : 0) |
                        (f->enhanced ? EMU_MPA_FLAG_ENH : 0));
    buf[EMU_WIRE_MPA_REV] = f->rev;
    emu_put_be16(buf + EMU_WIRE_MPA_PD_LEN, (uint16_t)pdl);
    uint8_t *p = buf + EMU_MPA_HDR_LEN;
    if (f->enhanced) {
        uint16_t ird = f->ird & EMU_MPA_V2_VAL, ord = f->ord & EMU_MPA_V2_VAL;
        if (f->p2p)
            ird |= EMU_MPA_V2_P2P;
        if (f->rtr & EMU_MPA_RTR_SEND)
            ird |= EMU_MPA_V2_RTR_SEND;
        if (f->rtr & EMU_MPA_RTR_WRITE)
            ord |= EMU_MPA_V2_RTR_WRITE;
        if (f->rtr & EMU_MPA_RTR_READ)
            ord |= EMU_MPA_V2_RTR_READ;
        emu_put_be16(p + EMU_WIRE_MPA_V2_IRD, ird);
        emu_put_be16(p + EMU_WIRE_MPA_V2_ORD, ord);
        p += EMU_MPA_V2_LEN;
    }
    if (f->pd_len)
        memmove(p, f->pd, f->pd_len); /* pd may live in buf (re-encoding in place) */
    if (out_len)
        *out_len = EMU_MPA_HDR_LEN + pdl;
    return EMU_MPA_OK;
}

int emu_mpa_parse_header(const uint8_t *buf, size_t len, enum emu_mpa_kind expect,
                         uint8_t max_rev, uint16_t pd_limit, size_t *more)
{
    if (!buf || len < EMU_MPA_HDR_LEN)
        return EMU_MPA_E_SHORT;
    const char *want = expect == EMU_MPA_REQUEST ? key_req : key_rep;
    const char *other = expect == EMU_MPA_REQUEST ? key_rep : key_req;
    if (memcmp(buf, want, EMU_MPA_KEY_LEN) != 0)
        return memcmp(buf, other, EMU_MPA_KEY_LEN) == 0 ? EMU_MPA_E_KEY_KIND
                                                        : EMU_MPA_E_KEY;
    if (!max_rev)
        max_rev = 2;
    if (buf[EMU_WIRE_MPA_REV] < 1 || buf[EMU_WIRE_MPA_REV] > max_rev)
        return EMU_MPA_E_REV;
    uint16_t pdl = emu_get_be16(buf + EMU_WIRE_MPA_PD_LEN);
    if (!pd_limit || pd_limit > EMU_MPA_PD_MAX)
        pd_limit = EMU_MPA_PD_MAX;
    if (pdl > pd_limit)
        return EMU_MPA_E_PD_LEN;
    if (more)
        *more = pdl;
    return EMU_MPA_OK;
}

int emu_mpa_parse(const uint8_t *buf, size_t len, enum emu_mpa_kind expect,
                  uint8_t max_rev, uint16_t pd_limit, struct emu_mpa_frame *f)
{
    size_t pdl;
    int rc = emu_mpa_parse_header(buf, len, expect, max_rev, pd_limit, &pdl);
    if (rc)
        return rc;
    if (len < EMU_MPA_HDR_LEN + pdl)
        return EMU_MPA_E_SHORT;
    memset(f, 0, sizeof *f);
    uint8_t fl = buf[EMU_WIRE_MPA_FLAGS];
    f->kind = expect;
    f->rev = buf[EMU_WIRE_MPA_REV];
    f->markers = fl & EMU_MPA_FLAG_M;
    f->crc = fl & EMU_MPA_FLAG_C;
    f->reject = fl & EMU_MPA_FLAG_R;
    f->enhanced = fl & EMU_MPA_FLAG_ENH;
    f->rsvd_flags = fl & EMU_MPA_FLAG_RSVD;
    const uint8_t *p = buf + EMU_MPA_HDR_LEN;
    /* Decode as much as possible before reporting a semantic error, so a
     * responder can still answer with a v2 reject. */
    int err = EMU_MPA_OK;
    if (f->enhanced && f->rev < 2) {
        /* A revision-1 frame has no IRD/ORD block: its PD is opaque. */
        err = EMU_MPA_E_ENH_REV1;
        f->enhanced = false;
    } else if (f->enhanced && pdl < EMU_MPA_V2_LEN) {
        err = EMU_MPA_E_V2_SHORT;
        f->enhanced = false;
    }
    if (f->enhanced) {
        uint16_t ird = emu_get_be16(p + EMU_WIRE_MPA_V2_IRD);
        uint16_t ord = emu_get_be16(p + EMU_WIRE_MPA_V2_ORD);
        f->p2p = ird & EMU_MPA_V2_P2P;
        f->rtr = ((ird & EMU_MPA_V2_RTR_SEND) ? EMU_MPA_RTR_SEND : 0) |
                 ((ord & EMU_MPA_V2_RTR_WRITE) ? EMU_MPA_RTR_WRITE : 0) |
                 ((ord & EMU_MPA_V2_RTR_READ) ? EMU_MPA_RTR_READ : 0);
        f->ird = ird & EMU_MPA_V2_VAL;
        f->ord = ord & EMU_MPA_V2_VAL;
        p += EMU_MPA_V2_LEN;
        pdl -= EMU_MPA_V2_LEN;
    }
    f->pd = pdl ? p : NULL;
    f->pd_len = (uint16_t)pdl;
    if (err)
        return err;
    if (f->reject && expect == EMU_MPA_REQUEST)
        return EMU_MPA_E_REJECT_IN_REQ;
    if (f->markers)
        return EMU_MPA_E_MARKERS;
    return EMU_MPA_OK;
}

int emu_mpa_parse_strict(const uint8_t *buf, size_t len, enum emu_mpa_kind expect,
                         uint8_t max_rev, uint16_t pd_limit, struct emu_mpa_frame *f)
{
    size_t pdl;
    int rc = emu_mpa_parse_header(buf, len, expect, max_rev, pd_limit, &pdl);
    if (rc)
        return rc;
    if (len > EMU_MPA_HDR_LEN + pdl)
        return EMU_MPA_E_TRAILING;
    return emu_mpa_parse(buf, len, expect, max_rev, pd_limit, f);
}

static unsigned pol_rtr(const struct emu_mpa_policy *pol)
{
    unsigned r = pol->rtr ? pol->rtr : (EMU_MPA_RTR_WRITE | EMU_MPA_RTR_READ);
    /* Zero-length Send RTR consumes a receive buffer and siw/Intel do not
     * support it: never offered nor chosen. */
    return r & (EMU_MPA_RTR_WRITE | EMU_MPA_RTR_READ);
}

static int check_pd(uint16_t pd_len, const void *pd, bool enhanced)
{
    if (pd_len && !pd)
        return EMU_MPA_E_INVAL;
    if ((size_t)pd_len + (enhanced ? EMU_MPA_V2_LEN : 0) > EMU_MPA_PD_MAX)
        return EMU_MPA_E_INVAL;
    return EMU_MPA_OK;
}

int emu_mpa_init_request(struct emu_mpa_frame *req, const struct emu_mpa_policy *pol,
                         const void *pd, uint16_t pd_len)
{
    if (!req || !pol || (pol->rev != 1 && pol->rev != 2))
        return EMU_MPA_E_INVAL;
    memset(req, 0, sizeof *req);
    req->kind = EMU_MPA_REQUEST;
    req->rev = pol->rev;
    req->crc = pol->crc;
    req->enhanced = pol->rev == 2;
    int rc = check_pd(pd_len, pd, req->enhanced);
    if (rc)
        return rc;
    if (req->enhanced) {
        req->ird = clamp_iro(pol->ird);
        req->ord = clamp_iro(pol->ord);
        if (pol->p2p) {
            req->p2p = true;
            req->rtr = pol_rtr(pol);
            if (!req->rtr)
                return EMU_MPA_E_INVAL;
            /* A Read RTR takes one ORD slot of ours for the handshake. */
            if ((req->rtr & EMU_MPA_RTR_READ) && req->ord == 0 &&
                !(req->rtr & EMU_MPA_RTR_WRITE))
                req->ord = 1;
        }
    }
    req->pd = pd_len ? pd : NULL;
    req->pd_len = pd_len;
    return EMU_MPA_OK;
}

static void rep_common(const struct emu_mpa_frame *req, const struct emu_mpa_policy *pol,
                       const void *pd, uint16_t pd_len, struct emu_mpa_frame *rep)
{
    memset(rep, 0, sizeof *rep);
    rep->kind = EMU_MPA_REPLY;
    rep->rev = req->rev;
    /* RFC 6581: an Enhanced Request gets an Enhanced Reply (also a reject). */
    rep->enhanced = req->enhanced && req->rev == 2;
    rep->crc = emu_mpa_crc_negotiate(req->crc, pol->crc);
    rep->pd = pd_len ? pd : NULL;
    rep->pd_len = pd_len;
}

int emu_mpa_accept(const struct emu_mpa_frame *req, const struct emu_mpa_policy *pol,
                   const void *pd, uint16_t pd_len, struct emu_mpa_frame *rep,
                   struct emu_mpa_result *res)
{
    if (!req || !pol || !rep || req->kind != EMU_MPA_REQUEST)
        return EMU_MPA_E_INVAL;
    if (req->markers)
        return EMU_MPA_E_MARKERS;
    if (req->reject)
        return EMU_MPA_E_REJECT_IN_REQ;
    int rc = check_pd(pd_len, pd, req->enhanced);
    if (rc)
        return rc;
    rep_common(req, pol, pd, pd_len, rep);
    struct emu_mpa_result r = {.rev = rep->rev, .crc = rep->crc};
    uint16_t ird = clamp_iro(pol->ird), ord = clamp_iro(pol->ord);
    if (rep->enhanced) {
        if (req->p2p) {
            unsigned acc = pol_rtr(pol);
            unsigned both = req->rtr & acc;
            if (both & EMU_MPA_RTR_WRITE)
                r.rtr = EMU_MPA_RTR_WRITE;
            else if (both & EMU_MPA_RTR_READ)
                r.rtr = EMU_MPA_RTR_READ;
            else if (req->rtr & EMU_MPA_RTR_READ)
                r.rtr = EMU_MPA_RTR_READ; /* offered, just not our preference */
            else
                r.rtr = EMU_MPA_RTR_WRITE; /* none usable: initiator terminates */
            r.p2p = true;
            /* Serving the zero-length Read RTR takes one inbound slot. */
            if (r.rtr == EMU_MPA_RTR_READ && ird == 0)
                ird = 1;
        }
        /* Never ask for more outstanding reads than the initiator can serve;
         * our inbound capacity is advertised as is (the initiator lowers
         * its ORD to it). */
        ord = min16(ord, req->ird);
        rep->p2p = r.p2p;
        rep->rtr = r.rtr;
        rep->ird = ird;
        rep->ord = ord;
        r.ird = ird;
        r.ord = ord;
    } else {
        r.ird = ird;
        r.ord = ord;
    }
    if (res)
        *res = r;
    return EMU_MPA_OK;
}

int emu_mpa_reject(const struct emu_mpa_frame *req, const struct emu_mpa_policy *pol,
                   const void *pd, uint16_t pd_len, struct emu_mpa_frame *rep)
{
    if (!req || !pol || !rep)
        return EMU_MPA_E_INVAL;
    bool enh = req->enhanced && req->rev == 2;
    int rc = check_pd(pd_len, pd, enh);
    if (rc)
        return rc;
    rep_common(req, pol, pd, pd_len, rep);
    rep->reject = true;
    if (rep->enhanced) {
        rep->ird = clamp_iro(pol->ird);
        rep->ord = min16(clamp_iro(pol->ord), req->ird);
    }
    return EMU_MPA_OK;
}

int emu_mpa_confirm(const struct emu_mpa_frame *req, const struct emu_mpa_frame *rep,
                    const struct emu_mpa_policy *pol, struct emu_mpa_result *res)
{
    if (!req || !rep || !pol || rep->kind != EMU_MPA_REPLY)
        return EMU_MPA_E_INVAL;
    if (rep->reject)
        return EMU_MPA_E_REJECTED;
    if (rep->markers)
        return EMU_MPA_E_MARKERS;
    if (rep->rev != req->rev || rep->enhanced != req->enhanced)
        return EMU_MPA_E_ENH_MISMATCH;
    struct emu_mpa_result r = {.rev = rep->rev,
                               .crc = emu_mpa_crc_negotiate(req->crc, rep->crc),
                               .ird = req->enhanced ? req->ird : clamp_iro(pol->ird),
                               .ord = req->enhanced ? req->ord : clamp_iro(pol->ord)};
    if (req->enhanced) {
        if (req->p2p) {
            unsigned chosen = rep->rtr;
            bool one = chosen == EMU_MPA_RTR_WRITE || chosen == EMU_MPA_RTR_READ ||
                       chosen == EMU_MPA_RTR_SEND;
            if (!rep->p2p || !one || !(chosen & req->rtr))
                return EMU_MPA_E_NO_RTR;
            r.p2p = true;
            r.rtr = (enum emu_mpa_rtr)chosen;
        } else if (rep->p2p) {
            return EMU_MPA_E_NO_RTR; /* responder invented P2P */
        }
        if (rep->ord > req->ird)
            return EMU_MPA_E_IRD;
        /* Relaxed rule: our effective ORD is what the responder can serve. */
        if (r.ord > rep->ird)
            r.ord = rep->ird;
    }
    if (res)
        *res = r;
    return EMU_MPA_OK;
}

uint8_t emu_mpa_err_llp_ecode(int err)
{
    switch (err) {
    case EMU_MPA_E_NO_RTR:
        return EMU_MPA_LLP_NO_RTR;
    case EMU_MPA_E_IRD:
        return EMU_MPA_LLP_NO_IRD;
    case EMU_MPA_E_KEY:
    case EMU_MPA_E_KEY_KIND:
    case EMU_MPA_E_REV:
    case EMU_MPA_E_PD_LEN:
    case EMU_MPA_E_MARKERS:
    case EMU_MPA_E_REJECT_IN_REQ:
    case EMU_MPA_E_V2_SHORT:
    case EMU_MPA_E_ENH_REV1:
    case EMU_MPA_E_TRAILING:
    case EMU_MPA_E_ENH_MISMATCH:
        return EMU_MPA_LLP_BAD_REQREP;
    default:
        return 0;
    }
}

const char *emu_mpa_strerror(int err)
{
    static const char *const names[EMU_MPA_E_COUNT] = {
        [EMU_MPA_OK] = "ok",
        [EMU_MPA_E_SHORT] = "frame incomplete",
        [EMU_MPA_E_KEY] = "bad MPA key",
        [EMU_MPA_E_KEY_KIND] = "MPA key of the wrong frame kind",
        [EMU_MPA_E_REV] = "unsupported MPA revision",
        [EMU_MPA_E_PD_LEN] = "private data length over the limit",
        [EMU_MPA_E_MARKERS] = "peer requires markers",
        [EMU_MPA_E_REJECT_IN_REQ] = "reject flag set in a Request",
        [EMU_MPA_E_V2_SHORT] = "Enhanced flag without IRD/ORD block",
        [EMU_MPA_E_ENH_REV1] = "Enhanced flag in a revision 1 frame",
        [EMU_MPA_E_TRAILING] = "bytes after the Request frame",
        [EMU_MPA_E_REJECTED] = "connection rejected by peer",
        [EMU_MPA_E_ENH_MISMATCH] = "Reply revision/Enhanced differs from Request",
        [EMU_MPA_E_NO_RTR] = "no matching RTR option",
        [EMU_MPA_E_IRD] = "insufficient IRD resources",
        [EMU_MPA_E_NOSPACE] = "buffer too small",
        [EMU_MPA_E_INVAL] = "invalid argument",
    };
    if (err < 0 || err >= EMU_MPA_E_COUNT)
        return "unknown MPA error";
    return names[err];
}

uint32_t emu_mpa_mulpdu(uint32_t emss)
{
    if (emss < 6 + 3 + 14 + 4)
        return 0;
    uint32_t m = emss - (6 + emss % 4);
    return m > EMU_MPA_ULPDU_MAX ? EMU_MPA_ULPDU_MAX : m;
}

int emu_mpa_crc_mode_parse(const char *text)
{
    static const struct {
        const char *name;
        int mode;
    } names[] = {{"auto", EMU_MPA_CRC_AUTO}, {"on", EMU_MPA_CRC_ON},
                 {"1", EMU_MPA_CRC_ON},      {"yes", EMU_MPA_CRC_ON},
                 {"true", EMU_MPA_CRC_ON},   {"off", EMU_MPA_CRC_OFF},
                 {"0", EMU_MPA_CRC_OFF},     {"no", EMU_MPA_CRC_OFF},
                 {"false", EMU_MPA_CRC_OFF}};
    if (!text || !*text)
        return EMU_MPA_CRC_AUTO;
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (strcasecmp(text, names[i].name) == 0)
            return names[i].mode;
    return -1;
}
