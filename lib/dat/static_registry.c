/*
 * Static registry: the dat.conf records, read once by the library
 * constructor, and the provider libraries they name.
 *
 * Records with the same key {IA name, API version, thread safety} form a
 * fallback chain in file order: the first library that dlopen()s serves the
 * key. Libraries are loaded lazily by the first open and unloaded after the
 * last close, so the next open loads (and initialises) them again.
 */
#include "lib/dat/dr.h"

#include <dlfcn.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

struct sr_rec {
    DAT_PROVIDER_INFO      info;   /* handed to init/fini; must not move */
    char                  *lib_path;
    char                  *ia_params;
    char                  *conf_path;
    int                    lineno;
    void                  *dl;
    DAT_PROVIDER_INIT_FUNC init;
    DAT_PROVIDER_FINI_FUNC fini;
    int                    refcnt;
};

static pthread_mutex_t sr_mutex = PTHREAD_MUTEX_INITIALIZER;
static struct sr_rec **recs;
static int n_recs, cap_recs;
static char *conf_path;
static char *conf_path2;    /* PREFIX's file, read after /etc/dat.conf */
static int n_first;         /* records that came from conf_path */

void dr_sr_lock(void) { pthread_mutex_lock(&sr_mutex); }
void dr_sr_unlock(void) { pthread_mutex_unlock(&sr_mutex); }

const char *dr_sr_conf_path(void) { return conf_path; }

static void add_record(const struct dr_conf_entry *e, const char *path, int lineno,
                       void *arg)
{
    struct sr_rec *r;

    /* Only user-level, default records are registered (as OFA does). */
    if (e->kernel || !e->is_default) {
        dr_dbg(DR_DBG_SR, "%s:%d: %s ignored (%s)", path, lineno, e->ia_name,
               e->kernel ? "kernel API" : "nondefault");
        return;
    }
    /* The second file only adds names the first one does not use. */
    if (arg != NULL) {
        for (int i = 0; i < n_first; i++)
            if (strcmp(recs[i]->info.ia_name, e->ia_name) == 0) {
                dr_dbg(DR_DBG_SR, "%s:%d: %s hidden by %s", path, lineno, e->ia_name,
                       conf_path);
                return;
            }
    }
    if (n_recs == cap_recs) {
        int ncap = cap_recs ? cap_recs * 2 : 16;
        struct sr_rec **n = realloc(recs, (size_t)ncap * sizeof *n);

        if (!n)
            return;
        recs = n;
        cap_recs = ncap;
    }
    r = calloc(1, sizeof *r);
    if (!r)
        return;
    strcpy(r->info.ia_name, e->ia_name);
    r->info.dapl_version_major = e->api_major;
    r->info.dapl_version_minor = e->api_minor;
    r->info.is_thread_safe = e->thread_safe;
    r->lib_path = strdup(e->lib_path);
    r->ia_params = strdup(e->ia_params);
    r->conf_path = strdup(path);
    r->lineno = lineno;
    if (!r->lib_path || !r->ia_params || !r->conf_path) {
        free(r->lib_path);
        free(r->ia_params);
        free(r->conf_path);
        free(r);
        return;
    }
    recs[n_recs++] = r;
}

static void load_conf(void)
{
    const char *override = getenv("DAT_OVERRIDE");
    const char *path = dr_conf_choose(override, DR_CONF_ETC, DR_CONF_PREFIX);
    int n;

    free(conf_path);
    free(conf_path2);
    conf_path = strdup(path);
    conf_path2 = NULL;
    n_first = 0;
    n = dr_conf_parse_file(path, add_record, NULL, NULL);
    if (n < 0) {
        if (override)
            dr_dbg(DR_DBG_ERROR, "DAT_OVERRIDE=%s cannot be read; no providers registered",
                   path);
        else
            dr_dbg(DR_DBG_GENERIC, "no dat.conf (tried %s and %s)", DR_CONF_ETC,
                   DR_CONF_PREFIX);
        return;
    }
    dr_dbg(DR_DBG_GENERIC, "using config file %s (%d records, %d registered)", path, n,
           n_recs);
    /* softdat installed under a PREFIX on a host whose /etc/dat.conf
     * (Debian's libdapl2) does not name it: its own file adds its IAs, so
     * the installation works without DAT_OVERRIDE or editing /etc. */
    n_first = n_recs;
    if (!override && strcmp(path, DR_CONF_ETC) == 0 && strcmp(DR_CONF_PREFIX, DR_CONF_ETC) != 0 &&
        access(DR_CONF_PREFIX, R_OK) == 0) {
        conf_path2 = strdup(DR_CONF_PREFIX);
        n = dr_conf_parse_file(DR_CONF_PREFIX, add_record, (void *)DR_CONF_PREFIX, NULL);
        dr_dbg(DR_DBG_GENERIC, "also read %s (%d records, %d registered in all)", DR_CONF_PREFIX,
               n, n_recs);
    }
}

/* How useful a name is to someone who typed `want`: names sharing its
 * first four characters (softdat-lo for softdat-lo7), then PREFIX's own
 * (next to the dozens of OFA names of a Debian /etc/dat.conf they would
 * otherwise be cut off), then the rest. */
static int name_rank(int i, const char *want)
{
    if (strncasecmp(recs[i]->info.ia_name, want, 4) == 0)
        return 0;
    return i >= n_first ? 1 : 2;
}

/* An unknown IA name is the usual first mistake (a typo, or a dat.conf
 * that is not the one the user edited): say which files were read and
 * which names they hold. Caller holds sr_mutex. */
static void explain_unknown(const char *name)
{
    char names[600];
    size_t len = 0;
    int shown = 0, more = 0;

    names[0] = '\0';
    for (int rank = 0; rank < 3; rank++) {
        for (int i = 0; i < n_recs; i++) {
            int dup = 0;
            if (name_rank(i, name) != rank)
                continue;
            for (int j = 0; j < i && !dup; j++)
                dup = strcmp(recs[j]->info.ia_name, recs[i]->info.ia_name) == 0;
            if (dup)
                continue;
            size_t need = strlen(recs[i]->info.ia_name) + 2;
            if (len + need + 40 >= sizeof names) {
                more++;
                continue;
            }
            len += (size_t)snprintf(names + len, sizeof names - len, "%s%s", shown ? ", " : "",
                                    recs[i]->info.ia_name);
            shown++;
        }
    }
    if (more)
        snprintf(names + len, sizeof names - len, " and %d more (softdat-info -l)", more);
    dr_dbg(DR_DBG_ERROR, "warning: no IA named '%s' in %s%s%s%s; %s%s", name,
           conf_path ? conf_path : "(no dat.conf)", conf_path2 ? " or " : "",
           conf_path2 ? conf_path2 : "",
           getenv("DAT_OVERRIDE") ? " (DAT_OVERRIDE)" : "",
           shown ? "names there: " : "it names no IA",
           names);
}

__attribute__((constructor)) static void dr_init(void)
{
    dr_dbg_init();
    dr_sr_lock();
    load_conf();
    dr_sr_unlock();
}

static void free_records(void)
{
    for (int i = 0; i < n_recs; i++) {
        free(recs[i]->lib_path);
        free(recs[i]->ia_params);
        free(recs[i]->conf_path);
        free(recs[i]);
    }
    free(recs);
    recs = NULL;
    n_recs = cap_recs = 0;
}

/* libdat2 itself may be dlclose()d. Free the records then, but only if no
 * provider is still loaded: a loaded provider holds pointers into them. */
__attribute__((destructor)) static void dr_fini(void)
{
    dr_sr_lock();
    for (int i = 0; i < n_recs; i++) {
        if (recs[i]->dl) {
            dr_sr_unlock();
            return;
        }
    }
    free_records();
    free(conf_path);
    free(conf_path2);
    conf_path = conf_path2 = NULL;
    dr_sr_unlock();
    dr_dyn_clear();
    dr_ia_clear();
}

int dr_registry_reinit(void)
{
    dr_sr_lock();
    for (int i = 0; i < n_recs; i++) {
        if (recs[i]->dl) {
            dr_sr_unlock();
            return -1;
        }
    }
    free_records();
    dr_dyn_clear();
    dr_ia_clear();
    __atomic_store_n(&dr_extensions_enabled, 0, __ATOMIC_RELAXED);
    dr_dbg_init();
    load_conf();
    dr_sr_unlock();
    return 0;
}

/* The loaded record serving key, or NULL. Caller holds sr_mutex. */
static struct sr_rec *find_loaded(const DAT_PROVIDER_INFO *key)
{
    for (int i = 0; i < n_recs; i++)
        if (recs[i]->dl && dr_key_equal(&recs[i]->info, key))
            return recs[i];
    return NULL;
}

static int try_load(struct sr_rec *r)
{
    void *dl;

    dl = dlopen(r->lib_path, RTLD_NOW | RTLD_GLOBAL);
    if (!dl) {
        dr_dbg(DR_DBG_SR, "%s:%d: cannot load %s: %s", r->conf_path, r->lineno,
               r->lib_path, dlerror());
        return -1;
    }
    *(void **)&r->init = dlsym(dl, DAT_PROVIDER_INIT_FUNC_STR);
    *(void **)&r->fini = dlsym(dl, DAT_PROVIDER_FINI_FUNC_STR);
    if (!r->init || !r->fini) {
        dr_dbg(DR_DBG_ERROR, "%s: not a DAT provider (no %s)", r->lib_path,
               r->init ? DAT_PROVIDER_FINI_FUNC_STR : DAT_PROVIDER_INIT_FUNC_STR);
        dlclose(dl);
        return -1;
    }
    if (!dlsym(dl, "dapl_extensions"))
        dr_dbg(DR_DBG_SR, "%s: extended DAT expected extended uDAPL (no dapl_extensions)",
               r->lib_path);
    r->dl = dl;
    r->refcnt = 0;
    dr_dbg(DR_DBG_SR, "loaded %s for %s", r->lib_path, r->info.ia_name);
    r->init(&r->info, r->ia_params);
    return 0;
}

DAT_RETURN dr_sr_acquire(const DAT_PROVIDER_INFO *key)
{
    struct sr_rec *r = find_loaded(key);
    int matched = 0;

    if (!r) {
        for (int i = 0; i < n_recs && !r; i++) {
            if (!dr_key_equal(&recs[i]->info, key))
                continue;
            matched++;
            if (try_load(recs[i]) == 0)
                r = recs[i];
        }
        if (!r) {
            int named = 0;
            for (int i = 0; i < n_recs && !named; i++)
                named = strcmp(recs[i]->info.ia_name, key->ia_name) == 0;
            if (!named)
                explain_unknown(key->ia_name);
            if (matched)
                dr_dbg(DR_DBG_ERROR, "%s: no provider library could be loaded "
                       "(DAT_DBG_TYPE=0x4 shows why)", key->ia_name);
            return DR_ERR(DAT_PROVIDER_NOT_FOUND, DAT_NAME_NOT_REGISTERED);
        }
    }
    r->refcnt++;
    return DAT_SUCCESS;
}

DAT_RETURN dr_sr_release(const DAT_PROVIDER_INFO *key)
{
    struct sr_rec *r = find_loaded(key);

    if (!r)
        return DR_ERR(DAT_PROVIDER_NOT_FOUND, DAT_NAME_NOT_REGISTERED);
    if (--r->refcnt > 0)
        return DAT_SUCCESS;
    r->fini(&r->info);
    dlclose(r->dl);
    dr_dbg(DR_DBG_SR, "unloaded %s", r->lib_path);
    r->dl = NULL;
    r->init = NULL;
    r->fini = NULL;
    return DAT_SUCCESS;
}

int dr_sr_refcount(const DAT_PROVIDER_INFO *key)
{
    int rc = -1;

    dr_sr_lock();
    for (int i = 0; i < n_recs; i++) {
        if (dr_key_equal(&recs[i]->info, key)) {
            rc = 0;
            if (recs[i]->dl) {
                rc = recs[i]->refcnt;
                break;
            }
        }
    }
    dr_sr_unlock();
    return rc;
}

int dr_sr_is_loaded(const DAT_PROVIDER_INFO *key)
{
    int rc;

    dr_sr_lock();
    rc = find_loaded(key) != NULL;
    dr_sr_unlock();
    return rc;
}

/* Is recs[i] the first record of its key (the head of a fallback chain)? */
static int is_chain_head(int i)
{
    for (int j = 0; j < i; j++)
        if (dr_key_equal(&recs[j]->info, &recs[i]->info))
            return 0;
    return 1;
}

static int count_keys_locked(void)
{
    int n = 0;

    for (int i = 0; i < n_recs; i++)
        n += is_chain_head(i);
    return n;
}

int dr_sr_count(void)
{
    int n;

    dr_sr_lock();
    n = count_keys_locked();
    dr_sr_unlock();
    return n;
}

DAT_RETURN dat_registry_list_providers(DAT_COUNT max_to_return, DAT_COUNT *entries_returned,
                                       DAT_PROVIDER_INFO *(dat_provider_list[]))
{
    DAT_RETURN rc = DAT_SUCCESS;
    int total, k = 0;

    if (!entries_returned)
        return DR_ERR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    dr_sr_lock();
    total = count_keys_locked();
    *entries_returned = total;
    if (max_to_return <= 0)
        rc = DR_ERR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG1);
    else if (!dat_provider_list || max_to_return < total)
        rc = DR_ERR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    else {
        for (int i = 0; i < n_recs; i++) {
            if (!is_chain_head(i))
                continue;
            if (!dat_provider_list[k]) {
                rc = DR_ERR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
                break;
            }
            *dat_provider_list[k++] = recs[i]->info;
        }
    }
    dr_sr_unlock();
    return rc;
}

/* A record served by the softdat provider (whose IAs share nothing). */
/* The first record named name, or NULL. Caller holds sr_mutex. */
static struct sr_rec *find_name(const char *name)
{
    for (int i = 0; i < n_recs; i++)
        if (strncmp(recs[i]->info.ia_name, name, DAT_NAME_MAX_LENGTH) == 0)
            return recs[i];
    return NULL;
}

/*
 * Whether two IAs share hardware resources. An IA is related to itself.
 * Every softdat IA has its own engine, sockets and memory table, so a
 * softdat IA is related to no other IA; for two IAs of other providers the
 * registry has no way to know (it would have to open both IAs and ask
 * slot ia_ha_related), so the answer is DAT_HA_UNKNOWN.
 */
/* What the provider of an open IA named `self` says about `other`:
 * 1 related, 0 not, -1 no answer (no open IA, or the provider cannot tell). */
static int ask_related(const char *self, const char *other)
{
    DAT_IA_HANDLE raw = dr_ia_find_open(self);
    DAT_BOOLEAN related = DAT_FALSE;

    if (raw == NULL)
        return -1;
    const DAT_PROVIDER *p = *(DAT_PROVIDER *const *)raw;
    if (p->ia_ha_related_func == NULL ||
        p->ia_ha_related_func(raw, (const DAT_NAME_PTR)other, &related) != DAT_SUCCESS)
        return -1;
    return related == DAT_TRUE;
}

DAT_RETURN dat_registry_providers_related(const DAT_NAME_PTR ia1_name_ptr,
                                          const DAT_NAME_PTR ia2_name_ptr,
                                          DAT_HA_RELATIONSHIP *relationship)
{
    struct sr_rec *a, *b;
    DAT_RETURN rc = DAT_SUCCESS;

    if (!ia1_name_ptr)
        return DR_ERR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG1);
    if (!ia2_name_ptr)
        return DR_ERR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    if (!relationship)
        return DR_ERR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    dr_sr_lock();
    a = find_name(ia1_name_ptr);
    b = find_name(ia2_name_ptr);
    if (!a)
        rc = DR_ERR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG1);
    else if (!b)
        rc = DR_ERR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    else if (a == b)
        *relationship = DAT_HA_TRUE;
    dr_sr_unlock();
    if (rc != DAT_SUCCESS || a == b)
        return rc;
    /* Spec 8.2.2.2: ask each IA's provider (DAT_IA_HA_RELATED, slot 79)
     * about the other; agreeing answers are the result, disagreeing ones
     * CONFLICTING. Only an open IA can be asked: with neither open, or no
     * provider able to answer, the relationship is UNKNOWN. */
    int ab = ask_related(ia1_name_ptr, ia2_name_ptr);
    int ba = ask_related(ia2_name_ptr, ia1_name_ptr);
    if (ab < 0 && ba < 0)
        *relationship = DAT_HA_UNKNOWN;
    else if (ab >= 0 && ba >= 0 && ab != ba)
        *relationship = DAT_HA_CONFLICTING;
    else
        *relationship = (ab >= 0 ? ab : ba) ? DAT_HA_TRUE : DAT_HA_FALSE;
    return rc;
}
