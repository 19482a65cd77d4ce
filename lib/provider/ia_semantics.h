/* softdat: which hardware an IA behaves like. See docs/user-guide.md
 * ("InfiniBand or iWARP semantics"). */
#ifndef SOFTDAT_PROVIDER_IA_SEMANTICS_H
#define SOFTDAT_PROVIDER_IA_SEMANTICS_H

#include <stdbool.h>
#include <stdint.h>

struct sd_semantics {
    bool ib;              /* InfiniBand (default) or iWARP */
    uint8_t rnr_retry;    /* ib: 0-7, 7 = for ever */
    uint32_t rnr_timer_us;
};

/* From the words after the address in ia_params ("lo ib", "eth0 iwarp"),
 * then SOFTDAT_SEMANTICS (overrides for every IA), SOFTDAT_RNR_RETRY and
 * SOFTDAT_RNR_TIMER_US. Unknown words and values are logged and ignored. */
void sd_ia_semantics(const char *ia_name, const char *ia_params, struct sd_semantics *out);

const char *sd_semantics_name(const struct sd_semantics *s);

#endif
