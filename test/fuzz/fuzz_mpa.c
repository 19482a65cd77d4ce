/* libFuzzer target: the MPA handshake codec (emu/mpa.h) and the capability
 * marker in the private data (emu_conn_caps_parse).
 *
 * Input: byte 0 chooses the context (which frame kind is expected, the
 * highest revision, the PD_Length limit, the local policy), the rest is
 * what arrived on the socket. Properties besides "no sanitizer report":
 * parse_header and parse agree on the frame length; a frame that parses
 * re-encodes to the same bytes; the Reply we would answer with (accept or
 * reject) and the result of confirming a Reply are well-formed frames that
 * parse back to what was encoded. */
#include "test/fuzz/fuzz.h"

#include "emu/conn.h"
#include "emu/mpa.h"

#include <string.h>

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    return 0;
}

static void roundtrip(const struct emu_mpa_frame *f)
{
    uint8_t buf[EMU_MPA_FRAME_MAX];
    size_t n = 0;
    if (emu_mpa_encode(f, buf, sizeof buf, &n) != EMU_MPA_OK)
        return;
    FUZZ_CHECK(n == emu_mpa_frame_len(f));
    struct emu_mpa_frame g;
    int rc = emu_mpa_parse_strict(buf, n, f->kind, 2, 0, &g);
    FUZZ_CHECK(rc == EMU_MPA_OK || rc == EMU_MPA_E_MARKERS || rc == EMU_MPA_E_REJECT_IN_REQ);
    FUZZ_CHECK(g.rev == f->rev && g.crc == f->crc && g.reject == f->reject &&
               g.enhanced == f->enhanced && g.pd_len == f->pd_len);
    if (f->enhanced)
        FUZZ_CHECK(g.ird == (f->ird & EMU_MPA_V2_VAL) && g.ord == (f->ord & EMU_MPA_V2_VAL) &&
                   g.p2p == f->p2p);
    FUZZ_CHECK(f->pd_len == 0 || memcmp(g.pd, f->pd, f->pd_len) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    uint8_t ctl = data[0];
    const uint8_t *buf = data + 1;
    size_t len = size - 1;
    enum emu_mpa_kind kind = (ctl & 1) ? EMU_MPA_REPLY : EMU_MPA_REQUEST;
    uint8_t max_rev = (ctl & 2) ? 1 : 0;
    static const uint16_t limits[4] = {0, EMU_MPA_PD_INTEROP, 16, EMU_MPA_PD_MAX};
    uint16_t pd_limit = limits[(ctl >> 2) & 3];
    struct emu_mpa_policy pol = {
        .rev = (ctl & 0x10) ? 1 : 2,
        .crc = (ctl & 0x20) != 0,
        .p2p = (ctl & 0x40) != 0 && !(ctl & 0x10),
        .rtr = (ctl & 0x80) ? EMU_MPA_RTR_READ : 0,
        .ird = (uint16_t)(ctl * 37u),
        .ord = (uint16_t)(ctl * 11u),
    };

    size_t more = 0;
    int hrc = emu_mpa_parse_header(buf, len, kind, max_rev, pd_limit, &more);
    struct emu_mpa_frame f;
    memset(&f, 0, sizeof f);
    int rc = emu_mpa_parse(buf, len, kind, max_rev, pd_limit, &f);
    if (hrc == EMU_MPA_OK && len >= EMU_MPA_HDR_LEN + more)
        FUZZ_CHECK(rc != EMU_MPA_E_SHORT && rc != EMU_MPA_E_KEY && rc != EMU_MPA_E_REV &&
                   rc != EMU_MPA_E_PD_LEN);
    if (hrc != EMU_MPA_OK && hrc != EMU_MPA_E_SHORT)
        FUZZ_CHECK(rc != EMU_MPA_OK);
    struct emu_mpa_frame fs;
    int src = emu_mpa_parse_strict(buf, len, kind, max_rev, pd_limit, &fs);
    if (src == EMU_MPA_OK)
        FUZZ_CHECK(rc == EMU_MPA_OK && len == emu_mpa_frame_len(&f));
    (void)emu_mpa_strerror(rc);
    (void)emu_mpa_err_llp_ecode(rc);

    if (rc == EMU_MPA_OK || rc == EMU_MPA_E_MARKERS) {
        FUZZ_CHECK(f.pd_len == 0 || (f.pd >= buf && f.pd + f.pd_len <= buf + len));
        uint32_t caps = 0;
        (void)emu_conn_caps_parse(f.pd, f.pd_len, &caps);
    }
    if (rc == EMU_MPA_OK) {
        /* Re-encoding what was decoded gives the same frame (reserved flag
         * bits are sent as 0, so compare from PD_Length on). */
        uint8_t enc[EMU_MPA_FRAME_MAX];
        size_t n = 0;
        if (emu_mpa_encode(&f, enc, sizeof enc, &n) == EMU_MPA_OK) {
            FUZZ_CHECK(n == emu_mpa_frame_len(&f));
            FUZZ_CHECK(memcmp(enc + 18, buf + 18, n - 18) == 0);
        }
        roundtrip(&f);
    }

    if (kind == EMU_MPA_REQUEST && (rc == EMU_MPA_OK || rc == EMU_MPA_E_MARKERS)) {
        struct emu_mpa_frame rep;
        struct emu_mpa_result res;
        static const uint8_t pd[] = "softdat fuzz reply";
        if (emu_mpa_accept(&f, &pol, pd, (uint16_t)(ctl % sizeof pd), &rep, &res) ==
            EMU_MPA_OK) {
            FUZZ_CHECK(res.ird <= EMU_MPA_IRD_ORD_MAX && res.ord <= EMU_MPA_IRD_ORD_MAX);
            roundtrip(&rep);
        }
        if (emu_mpa_reject(&f, &pol, pd, (uint16_t)(ctl % sizeof pd), &rep) == EMU_MPA_OK) {
            FUZZ_CHECK(rep.reject);
            roundtrip(&rep);
        }
    } else if (kind == EMU_MPA_REPLY && rc != EMU_MPA_E_SHORT && rc != EMU_MPA_E_KEY &&
               rc != EMU_MPA_E_KEY_KIND && rc != EMU_MPA_E_REV && rc != EMU_MPA_E_PD_LEN) {
        struct emu_mpa_frame req;
        struct emu_mpa_result res;
        if (emu_mpa_init_request(&req, &pol, NULL, 0) == EMU_MPA_OK) {
            roundtrip(&req);
            if (emu_mpa_confirm(&req, &f, &pol, &res) == EMU_MPA_OK)
                FUZZ_CHECK(res.rev == req.rev && res.ord <= EMU_MPA_IRD_ORD_MAX);
        }
    }
    return 0;
}
