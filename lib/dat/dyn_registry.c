/*
 * Dynamic registry: the providers that registered themselves through
 * dat_registry_add_provider (normally from dat_provider_init). Keyed by
 * {IA name, DAT API major/minor, thread safety}, exact match.
 */
#include "lib/dat/dr.h"

#include <stdlib.h>
#include <string.h>

pthread_mutex_t dr_tables_lock = PTHREAD_MUTEX_INITIALIZER;

static struct dr_dyn_ent *dyn;
static int dyn_n, dyn_cap;

int dr_key_equal(const DAT_PROVIDER_INFO *a, const DAT_PROVIDER_INFO *b)
{
    return strncmp(a->ia_name, b->ia_name, DAT_NAME_MAX_LENGTH) == 0 &&
           a->dapl_version_major == b->dapl_version_major &&
           a->dapl_version_minor == b->dapl_version_minor &&
           (a->is_thread_safe != DAT_FALSE) == (b->is_thread_safe != DAT_FALSE);
}

/* Caller holds dr_tables_lock. */
static int find(const DAT_PROVIDER_INFO *key)
{
    for (int i = 0; i < dyn_n; i++)
        if (dr_key_equal(&dyn[i].key, key))
            return i;
    return -1;
}

static int name_ok(const DAT_PROVIDER_INFO *info)
{
    return memchr(info->ia_name, '\0', DAT_NAME_MAX_LENGTH) != NULL;
}

DAT_RETURN dat_registry_add_provider(const DAT_PROVIDER *provider,
                                     const DAT_PROVIDER_INFO *info)
{
    DAT_RETURN rc = DAT_SUCCESS;

    if (!provider)
        return DR_ERR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG1);
    if (!info || !name_ok(info))
        return DR_ERR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    dr_dbg(DR_DBG_PROVIDER, "add_provider %s %u.%u %s", info->ia_name,
           info->dapl_version_major, info->dapl_version_minor,
           info->is_thread_safe ? "threadsafe" : "nonthreadsafe");

    pthread_mutex_lock(&dr_tables_lock);
    if (find(info) >= 0) {
        rc = DR_ERR(DAT_PROVIDER_ALREADY_REGISTERED, DAT_NO_SUBTYPE);
    } else {
        if (dyn_n == dyn_cap) {
            int ncap = dyn_cap ? dyn_cap * 2 : 8;
            struct dr_dyn_ent *n = realloc(dyn, (size_t)ncap * sizeof *n);

            if (!n) {
                rc = DR_ERR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
                goto out;
            }
            dyn = n;
            dyn_cap = ncap;
        }
        dyn[dyn_n].key = *info;
        dyn[dyn_n].provider = provider;
        dyn[dyn_n].ia_open = provider->ia_open_func;
        dyn[dyn_n].extendedop = provider->handle_extendedop_func;
        dyn_n++;
    }
out:
    pthread_mutex_unlock(&dr_tables_lock);
    return rc;
}

DAT_RETURN dat_registry_remove_provider(const DAT_PROVIDER *provider,
                                        const DAT_PROVIDER_INFO *info)
{
    DAT_RETURN rc = DAT_SUCCESS;
    int i;

    if (!provider)
        return DR_ERR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG1);
    if (!info || !name_ok(info))
        return DR_ERR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    dr_dbg(DR_DBG_PROVIDER, "remove_provider %s", info->ia_name);

    pthread_mutex_lock(&dr_tables_lock);
    i = find(info);
    if (i < 0) {
        rc = DR_ERR(DAT_PROVIDER_NOT_FOUND, DAT_NAME_NOT_REGISTERED);
    } else {
        memmove(&dyn[i], &dyn[i + 1], (size_t)(dyn_n - i - 1) * sizeof *dyn);
        dyn_n--;
    }
    pthread_mutex_unlock(&dr_tables_lock);
    return rc;
}

int dr_dyn_lookup(const DAT_PROVIDER_INFO *key, struct dr_dyn_ent *out)
{
    int i;

    pthread_mutex_lock(&dr_tables_lock);
    i = find(key);
    if (i >= 0 && out)
        *out = dyn[i];
    pthread_mutex_unlock(&dr_tables_lock);
    dr_dbg(DR_DBG_DR, "lookup %s %u.%u: %s", key->ia_name, key->dapl_version_major,
           key->dapl_version_minor, i >= 0 ? "found" : "not registered");
    return i >= 0 ? 0 : -1;
}

int dr_dyn_count(void)
{
    int n;

    pthread_mutex_lock(&dr_tables_lock);
    n = dyn_n;
    pthread_mutex_unlock(&dr_tables_lock);
    return n;
}

void dr_dyn_clear(void)
{
    pthread_mutex_lock(&dr_tables_lock);
    free(dyn);
    dyn = NULL;
    dyn_n = dyn_cap = 0;
    pthread_mutex_unlock(&dr_tables_lock);
}
