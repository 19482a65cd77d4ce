/* softdat: InfiniBand or iWARP semantics per IA.
 *
 * Most DAT programs were written against OFA DAPL on InfiniBand HCAs and
 * rely on two things iWARP does not promise: a Send that arrives before
 * the receive is posted waits (RNR retry) instead of breaking the
 * connection, and a Write's completion means the data is at the target.
 * A program correct under iWARP's rules stays correct under IB's, not the
 * other way round, so IB is the default; "iwarp" in ia_params selects the
 * plain iWARP behaviour. */
#include "lib/provider/ia_semantics.h"

#include "emu/log.h"
#include "emu/qp.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

static bool parse_mode(const char *word, bool *ib)
{
    if (strcasecmp(word, "ib") == 0 || strcasecmp(word, "infiniband") == 0) {
        *ib = true;
        return true;
    }
    if (strcasecmp(word, "iwarp") == 0 || strcasecmp(word, "iw") == 0) {
        *ib = false;
        return true;
    }
    return false;
}

static long env_long(const char *name, long lo, long hi, long dflt)
{
    const char *v = getenv(name);
    if (v == NULL || *v == '\0')
        return dflt;
    char *end = NULL;
    long l = strtol(v, &end, 0);
    if (end == v || *end != '\0' || l < lo || l > hi) {
        SD_WARN("ia", "%s=%s: expected %ld..%ld; using %ld", name, v, lo, hi, dflt);
        return dflt;
    }
    return l;
}

void sd_ia_semantics(const char *ia_name, const char *ia_params, struct sd_semantics *out)
{
    out->ib = true;
    const char *p = ia_params ? ia_params : "";
    p += strspn(p, " \t");
    p += strcspn(p, " \t"); /* the address word: ia_addr.c */
    for (;;) {
        p += strspn(p, " \t");
        size_t n = strcspn(p, " \t");
        if (n == 0)
            break;
        char word[32];
        if (n < sizeof word) {
            memcpy(word, p, n);
            word[n] = '\0';
            if (!parse_mode(word, &out->ib))
                SD_WARN("ia", "%s: ia_params word \"%s\" ignored (expected ib or iwarp)",
                        ia_name, word);
        }
        p += n;
    }
    const char *env = getenv("SOFTDAT_SEMANTICS");
    if (env && *env && !parse_mode(env, &out->ib))
        SD_WARN("ia", "SOFTDAT_SEMANTICS=%s: expected ib or iwarp; ignored", env);
    out->rnr_retry = (uint8_t)env_long("SOFTDAT_RNR_RETRY", 0, EMU_QP_RNR_INFINITE,
                                       EMU_QP_RNR_INFINITE);
    out->rnr_timer_us = (uint32_t)env_long("SOFTDAT_RNR_TIMER_US", 10, 655360,
                                           EMU_QP_RNR_TIMER_US);
    SD_DBG("ia", "%s: %s semantics (rnr_retry %u, rnr timer %u us)", ia_name,
           sd_semantics_name(out), (unsigned)out->rnr_retry, (unsigned)out->rnr_timer_us);
}

const char *sd_semantics_name(const struct sd_semantics *s)
{
    return s->ib ? "InfiniBand" : "iWARP";
}
