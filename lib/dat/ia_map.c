/*
 * IA handle indirection. Consumers see small integers (1, 2, ...); the
 * provider's IA pointer stays inside the registry. dats_get_ia_handle maps in
 * both directions so providers can report the consumer's value.
 */
#include "lib/dat/dr.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define GROW 64

static DAT_IA_HANDLE *tab;   /* tab[i] is the provider IA of handle i + 1 */
static unsigned tab_cap;

static DAT_IA_HANDLE small_of(unsigned idx)
{
    return (DAT_IA_HANDLE)(uintptr_t)(idx + 1);
}

int dr_ia_is_small(DAT_HANDLE h)
{
    uintptr_t v = (uintptr_t)h;

    return v >= 1 && v <= DR_IA_SMALL_MAX;
}

DAT_RETURN dr_ia_insert(DAT_IA_HANDLE raw, DAT_IA_HANDLE *small)
{
    DAT_RETURN rc = DAT_SUCCESS;
    unsigned i;

    pthread_mutex_lock(&dr_tables_lock);
    for (i = 0; i < tab_cap && tab[i]; i++)
        ;
    if (i == tab_cap) {
        unsigned ncap = tab_cap + GROW;
        DAT_IA_HANDLE *n;

        if (ncap > DR_IA_SMALL_MAX) {
            rc = DR_ERR(DAT_INSUFFICIENT_RESOURCES, DAT_NO_SUBTYPE);
            goto out;
        }
        n = realloc(tab, ncap * sizeof *n);
        if (!n) {
            rc = DR_ERR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
            goto out;
        }
        memset(n + tab_cap, 0, GROW * sizeof *n);
        tab = n;
        tab_cap = ncap;
    }
    tab[i] = raw;
    *small = small_of(i);
out:
    pthread_mutex_unlock(&dr_tables_lock);
    if (rc == DAT_SUCCESS)
        dr_dbg(DR_DBG_PROVIDER, "IA %p is handle %u", raw, i + 1);
    return rc;
}

/* Caller holds dr_tables_lock. */
static DAT_IA_HANDLE lookup_locked(DAT_IA_HANDLE small)
{
    uintptr_t v = (uintptr_t)small;

    if (v < 1 || v > tab_cap)
        return NULL;
    return tab[v - 1];
}

DAT_IA_HANDLE dr_ia_lookup(DAT_IA_HANDLE small)
{
    DAT_IA_HANDLE raw;

    pthread_mutex_lock(&dr_tables_lock);
    raw = lookup_locked(small);
    pthread_mutex_unlock(&dr_tables_lock);
    return raw;
}

DAT_RETURN dr_ia_remove(DAT_IA_HANDLE small)
{
    DAT_RETURN rc = DR_ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);

    pthread_mutex_lock(&dr_tables_lock);
    if (lookup_locked(small)) {
        tab[(uintptr_t)small - 1] = NULL;
        rc = DAT_SUCCESS;
    }
    pthread_mutex_unlock(&dr_tables_lock);
    return rc;
}

DAT_IA_HANDLE dr_ia_find_open(const char *ia_name)
{
    DAT_IA_HANDLE raw = NULL;

    pthread_mutex_lock(&dr_tables_lock);
    for (unsigned i = 0; i < tab_cap && raw == NULL; i++) {
        const DAT_PROVIDER *p = tab[i] ? *(DAT_PROVIDER *const *)tab[i] : NULL;
        if (p && p->device_name && strncmp(p->device_name, ia_name, DAT_NAME_MAX_LENGTH) == 0)
            raw = tab[i];
    }
    pthread_mutex_unlock(&dr_tables_lock);
    return raw;
}

int dr_ia_live_count(void)
{
    int n = 0;

    pthread_mutex_lock(&dr_tables_lock);
    for (unsigned i = 0; i < tab_cap; i++)
        n += tab[i] != NULL;
    pthread_mutex_unlock(&dr_tables_lock);
    return n;
}

void dr_ia_clear(void)
{
    pthread_mutex_lock(&dr_tables_lock);
    free(tab);
    tab = NULL;
    tab_cap = 0;
    pthread_mutex_unlock(&dr_tables_lock);
}

DAT_RETURN dats_get_ia_handle(DAT_IA_HANDLE handle, DAT_IA_HANDLE *out)
{
    DAT_RETURN rc = DR_ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);
    DAT_IA_HANDLE raw;

    if (!out)
        return DR_ERR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    if (!handle)
        return rc;
    pthread_mutex_lock(&dr_tables_lock);
    if (dr_ia_is_small(handle)) {
        raw = lookup_locked(handle);
        if (raw) {
            *out = raw;
            rc = DAT_SUCCESS;
        }
    } else {
        for (unsigned i = 0; i < tab_cap; i++) {
            if (tab[i] == handle) {
                *out = small_of(i);
                rc = DAT_SUCCESS;
                break;
            }
        }
    }
    pthread_mutex_unlock(&dr_tables_lock);
    return rc;
}
