/* SOFTDAT_FAULT: deliberate, deterministic misbehaviour (emu/fault.h). */
#include "emu/fault.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emu/log.h"

enum trig { T_NONE, T_NTH, T_EVERY, T_AFTER, T_PCT };

struct rule {
    enum trig t;
    uint64_t n;
};

static const char *const kind_key[EMU_FAULT_KINDS] = {"create", "register", "refuse", "drop", "crc"};

static struct {
    pthread_mutex_t mu; /* the generator and the counts, for determinism */
    struct rule rule[EMU_FAULT_KINDS];
    uint64_t seen[EMU_FAULT_KINDS];
    uint64_t rng;
    /* read without the lock on the data path (a reconfiguration may run
     * while an engine thread completes work: the tests do it) */
    _Atomic uint64_t connect_delay_us, completion_delay_us;
} g = {.mu = PTHREAD_MUTEX_INITIALIZER};

static atomic_bool g_active;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static bool parse_u64(const char *s, uint64_t max, uint64_t *out)
{
    if (s == NULL || *s < '0' || *s > '9')
        return false;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (*end != '\0' || v > max)
        return false;
    *out = v;
    return true;
}

static bool parse_trigger(const char *v, struct rule *r)
{
    static const struct {
        const char *name;
        enum trig t;
        uint64_t max;
    } forms[] = {{"nth:", T_NTH, UINT64_MAX}, {"every:", T_EVERY, UINT64_MAX},
                 {"after:", T_AFTER, UINT64_MAX}, {"pct:", T_PCT, 100}};
    for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
        size_t l = strlen(forms[i].name);
        if (strncmp(v, forms[i].name, l) == 0 && parse_u64(v + l, forms[i].max, &r->n)) {
            if ((forms[i].t == T_NTH || forms[i].t == T_EVERY) && r->n == 0)
                return false;
            r->t = forms[i].t;
            return true;
        }
    }
    return false;
}

static bool apply(char *item)
{
    char *eq = strchr(item, '=');
    if (eq == NULL)
        return false;
    *eq = '\0';
    const char *k = item, *v = eq + 1;
    for (int i = 0; i < EMU_FAULT_KINDS; i++)
        if (strcmp(k, kind_key[i]) == 0)
            return parse_trigger(v, &g.rule[i]);
    uint64_t n;
    if (strcmp(k, "seed") == 0 && parse_u64(v, UINT64_MAX, &n)) {
        g.rng = n;
        return true;
    }
    if (strcmp(k, "connect_delay_ms") == 0 && parse_u64(v, 3600000, &n)) {
        atomic_store_explicit(&g.connect_delay_us, n * 1000, memory_order_relaxed);
        return true;
    }
    if (strcmp(k, "completion_delay_us") == 0 && parse_u64(v, 10000000, &n)) {
        atomic_store_explicit(&g.completion_delay_us, n, memory_order_relaxed);
        return true;
    }
    return false;
}

static int configure(const char *spec)
{
    pthread_mutex_lock(&g.mu);
    memset(g.rule, 0, sizeof g.rule);
    memset(g.seen, 0, sizeof g.seen);
    g.rng = 1;
    atomic_store_explicit(&g.connect_delay_us, 0, memory_order_relaxed);
    atomic_store_explicit(&g.completion_delay_us, 0, memory_order_relaxed);
    int bad = 0;
    if (spec != NULL && *spec != '\0') {
        char *copy = strdup(spec);
        char *save = NULL;
        for (char *it = copy ? strtok_r(copy, ",", &save) : NULL; it != NULL; it = strtok_r(NULL, ",", &save)) {
            char key[64];
            snprintf(key, sizeof key, "%s", it);
            if (!apply(it)) {
                SD_WARN("fault", "SOFTDAT_FAULT: \"%s\" ignored (see emu/fault.h or the user guide)", key);
                bad++;
            }
        }
        free(copy);
    }
    bool any = g.connect_delay_us != 0 || g.completion_delay_us != 0;
    for (int i = 0; i < EMU_FAULT_KINDS; i++)
        any = any || g.rule[i].t != T_NONE;
    atomic_store(&g_active, any);
    if (any)
        SD_INFO("fault", "fault injection on: %s", spec);
    pthread_mutex_unlock(&g.mu);
    return bad;
}

static void init_once(void)
{
    configure(getenv("SOFTDAT_FAULT"));
}

int emu_fault_configure(const char *spec)
{
    pthread_once(&g_once, init_once); /* the environment first, then spec */
    return configure(spec);
}

bool emu_fault_active(void)
{
    pthread_once(&g_once, init_once);
    return atomic_load_explicit(&g_active, memory_order_relaxed);
}

/* splitmix64: small, good enough, and the same everywhere. */
static uint64_t next_random(void)
{
    uint64_t z = (g.rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

bool emu_fault_hit(enum emu_fault_kind kind)
{
    if (!emu_fault_active() || kind < 0 || kind >= EMU_FAULT_KINDS)
        return false;
    pthread_mutex_lock(&g.mu);
    const struct rule *r = &g.rule[kind];
    bool hit = false;
    uint64_t n = 0;
    if (r->t != T_NONE) {
        n = ++g.seen[kind];
        switch (r->t) {
        case T_NTH: hit = n == r->n; break;
        case T_EVERY: hit = n % r->n == 0; break;
        case T_AFTER: hit = n > r->n; break;
        case T_PCT: hit = next_random() % 100 < r->n; break;
        default: break;
        }
    }
    pthread_mutex_unlock(&g.mu);
    if (hit)
        SD_INFO("fault", "injected: %s (occurrence %llu)", kind_key[kind], (unsigned long long)n);
    return hit;
}

uint64_t emu_fault_connect_delay_us(void)
{
    return emu_fault_active() ? atomic_load_explicit(&g.connect_delay_us, memory_order_relaxed) : 0;
}

uint64_t emu_fault_completion_delay_us(void)
{
    return emu_fault_active() ? atomic_load_explicit(&g.completion_delay_us, memory_order_relaxed) : 0;
}
