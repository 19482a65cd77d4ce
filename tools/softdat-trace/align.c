/* Frame matching and clock offsets between lanes (merge.h). */
#include "tools/softdat-trace/merge.h"

#include <stdlib.h>
#include <string.h>

#include "tools/softdat-trace/jsonl.h"

struct fkey {
    char key[160]; /* flow|seq|kind */
    bool tx;
    size_t idx;    /* into e[] */
};

static int by_key(const void *a, const void *b)
{
    const struct fkey *x = a, *y = b;
    int c = strcmp(x->key, y->key);
    if (c)
        return c;
    return (int)x->tx - (int)y->tx;
}

size_t align_lanes(struct entry *e, size_t n, int nlanes, int64_t *offset_ns, size_t *pairs_with)
{
    for (int i = 0; i < nlanes; i++) {
        offset_ns[i] = 0;
        pairs_with[i] = 0;
    }
    for (size_t i = 0; i < n; i++)
        e[i].peer = -1;
    struct fkey *k = calloc(n ? n : 1, sizeof *k);
    if (k == NULL)
        return 0;
    size_t nk = 0;
    static struct rec r;
    for (size_t i = 0; i < n; i++) {
        if (strstr(e[i].line, "\"rec\":\"frame\"") == NULL)
            continue;
        const char *err;
        if (!rec_parse(e[i].line, &r, &err))
            continue;
        const char *flow = rec_get(&r, "flow"), *dir = rec_get(&r, "dir"), *kind = rec_get(&r, "kind");
        if (flow == NULL || dir == NULL || kind == NULL)
            continue;
        snprintf(k[nk].key, sizeof k[nk].key, "%s|%llu|%s", flow, (unsigned long long)rec_u64(&r, "seq"), kind);
        k[nk].tx = strcmp(dir, "tx") == 0;
        k[nk].idx = i;
        nk++;
    }
    qsort(k, nk, sizeof *k, by_key);
    /* min one-way delay lane 0 -> lane i (d0) and lane i -> lane 0 (d1). */
    int64_t d0[MAX_LANES], d1[MAX_LANES];
    bool h0[MAX_LANES] = {false}, h1[MAX_LANES] = {false};
    size_t pairs = 0;
    for (size_t a = 0; a + 1 < nk; a++) {
        /* Sorted: rx (tx=false) before tx for one key; one of each, in different lanes. */
        if (strcmp(k[a].key, k[a + 1].key) != 0 || k[a].tx || !k[a + 1].tx)
            continue;
        struct entry *rx = &e[k[a].idx], *tx = &e[k[a + 1].idx];
        if (rx->lane == tx->lane)
            continue;
        rx->peer = (long)tx->seq;
        tx->peer = (long)rx->seq;
        pairs++;
        int64_t d = (int64_t)(rx->mono - tx->mono);
        if (tx->lane == 0) {
            int l = rx->lane;
            pairs_with[l]++;
            if (!h0[l] || d < d0[l])
                d0[l] = d, h0[l] = true;
        } else if (rx->lane == 0) {
            int l = tx->lane;
            pairs_with[l]++;
            if (!h1[l] || d < d1[l])
                d1[l] = d, h1[l] = true;
        }
        a++;
    }
    /* Any offset in (-min d1, min d0) keeps every matched frame causal
     * (received after sent). When 0 is in it (one machine, one clock) the
     * clocks are left alone: the midpoint of the delays would only add
     * the asymmetry of the delays as an error. Otherwise the midpoint. */
    for (int l = 1; l < nlanes; l++)
        if (h0[l] && h1[l] && (d0[l] <= 0 || d1[l] <= 0))
            offset_ns[l] = (d0[l] - d1[l]) / 2;
    free(k);
    return pairs;
}
