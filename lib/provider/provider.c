/* softdat provider entry points: dat_provider_init/fini and the per-record
 * DAT_PROVIDER tables.
 *
 * The registry calls dat_provider_init once per dat.conf record it loads us
 * for (e.g. softdat-lo nonthreadsafe and softdat-lo threadsafe) and only
 * remembers each table's ia_open_func. An open must land on the record it
 * was made through (the close key is what dat_ia_query reports), so every
 * record slot has its own ia_open trampoline. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "emu/log.h"
#include "emu/wire_tap.h"
#include "lib/provider/ep.h"
#include "lib/provider/handle.h"
#include "lib/provider/srq.h"
#include "lib/provider/trace_rec.h"

#pragma weak dat_registry_add_provider
#pragma weak dat_registry_remove_provider

#define SD_EXPORT __attribute__((visibility("default")))

/* Probed with dlsym by the registry: "this provider speaks extended DAT". */
SD_EXPORT const char dapl_extensions[] = "softdat";

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sd_provider_rec g_recs[SD_MAX_PROVIDER_RECORDS];

static DAT_RETURN ia_open_traced(struct sd_provider_rec *rec, const DAT_NAME_PTR name, DAT_COUNT qlen,
                                 DAT_EVD_HANDLE *evd, DAT_IA_HANDLE *ia)
{
    DAT_RETURN rc = sd_ia_open(rec, name, qlen, evd, ia);
    if (SD_TRACE_ON())
        sd_trace_ia_open(name, rc, rc == DAT_SUCCESS ? *ia : DAT_HANDLE_NULL);
    return rc;
}

#define TRAMPOLINE(n)                                                                              \
    static DAT_RETURN ia_open_##n(const DAT_NAME_PTR name, DAT_COUNT qlen, DAT_EVD_HANDLE *evd,    \
                                  DAT_IA_HANDLE *ia)                                               \
    {                                                                                              \
        return ia_open_traced(&g_recs[n], name, qlen, evd, ia);                                    \
    }
TRAMPOLINE(0) TRAMPOLINE(1) TRAMPOLINE(2) TRAMPOLINE(3) TRAMPOLINE(4) TRAMPOLINE(5) TRAMPOLINE(6)
TRAMPOLINE(7) TRAMPOLINE(8) TRAMPOLINE(9) TRAMPOLINE(10) TRAMPOLINE(11) TRAMPOLINE(12) TRAMPOLINE(13)
TRAMPOLINE(14) TRAMPOLINE(15)

static const DAT_IA_OPEN_FUNC g_ia_open[SD_MAX_PROVIDER_RECORDS] = {
    ia_open_0, ia_open_1, ia_open_2,   ia_open_3,   ia_open_4,   ia_open_5,   ia_open_6,   ia_open_7,
    ia_open_8, ia_open_9, ia_open_10, ia_open_11, ia_open_12, ia_open_13, ia_open_14, ia_open_15,
};
_Static_assert(SD_MAX_PROVIDER_RECORDS == 16, "one trampoline per record slot");

static int same_key(const DAT_PROVIDER_INFO *a, const DAT_PROVIDER_INFO *b)
{
    return strncmp(a->ia_name, b->ia_name, DAT_NAME_MAX_LENGTH) == 0 &&
           a->dapl_version_major == b->dapl_version_major && a->dapl_version_minor == b->dapl_version_minor &&
           a->is_thread_safe == b->is_thread_safe;
}

static void fill_table(struct sd_provider_rec *rec)
{
    DAT_PROVIDER *p = &rec->table;
    memset(p, 0, sizeof *p);
    sd_handle_fill_table(p);
    sd_ia_fill_table(p);
    sd_pz_fill_table(p);
    sd_evd_fill_table(p);
    sd_ep_fill_table(p);
    sd_cm_fill_table(p);     /* connect/disconnect, PSP, RSP, CR */
    sd_ep_dto_fill_table(p); /* DTO posts, rmr_bind, slot 80 */
    sd_srq_fill_table(p);
    sd_ia_ha_fill_table(p);
    p->device_name = rec->info.ia_name;
    p->extension = NULL;
    p->ia_open_func = g_ia_open[rec->slot];
    /* SOFTDAT_TRACE: the table itself becomes the tracing one. Decided
     * here, once, so an untraced process runs the plain table. */
    if (sd_trace_init_from_env())
        sd_trace_wrap_table(p);
    /* Frame records (trace on) and SOFTDAT_PCAP: the wire observer. */
    emu_wire_tap_init_from_env();
}

struct sd_provider_rec *sd_provider_attach(const DAT_PROVIDER_INFO *info, const char *ia_params)
{
    if (info == NULL)
        return NULL;
    struct sd_provider_rec *found = NULL, *free_slot = NULL;
    pthread_mutex_lock(&g_lock);
    for (int i = 0; i < SD_MAX_PROVIDER_RECORDS; i++) {
        if (g_recs[i].in_use && same_key(&g_recs[i].info, info)) {
            found = &g_recs[i];
            break;
        }
        if (!g_recs[i].in_use && free_slot == NULL)
            free_slot = &g_recs[i];
    }
    if (found == NULL && free_slot != NULL) {
        struct sd_provider_rec *rec = free_slot;
        memset(&rec->info, 0, sizeof rec->info);
        memcpy(rec->info.ia_name, info->ia_name, strnlen(info->ia_name, DAT_NAME_MAX_LENGTH - 1));
        rec->info.dapl_version_major = info->dapl_version_major;
        rec->info.dapl_version_minor = info->dapl_version_minor;
        rec->info.is_thread_safe = info->is_thread_safe;
        snprintf(rec->ia_params, sizeof rec->ia_params, "%s", ia_params ? ia_params : "");
        rec->slot = (int)(rec - g_recs);
        fill_table(rec);
        rec->in_use = 1;
        found = rec;
    }
    pthread_mutex_unlock(&g_lock);
    return found;
}

int sd_provider_detach(const DAT_PROVIDER_INFO *info)
{
    int rc = -1, left = 0;
    pthread_mutex_lock(&g_lock);
    for (int i = 0; i < SD_MAX_PROVIDER_RECORDS; i++) {
        if (g_recs[i].in_use && info != NULL && same_key(&g_recs[i].info, info)) {
            /* The table stays intact: quarantined stale handles still point
             * at it until the library is unloaded. */
            g_recs[i].in_use = 0;
            rc = 0;
        }
        left += g_recs[i].in_use;
    }
    pthread_mutex_unlock(&g_lock);
    if (rc == 0 && left == 0)
        sd_handle_registry_shutdown();
    return rc;
}

int sd_provider_find_params(const char *ia_name, char *params, size_t len)
{
    int found = 0;
    pthread_mutex_lock(&g_lock);
    for (int i = 0; i < SD_MAX_PROVIDER_RECORDS && !found; i++) {
        if (g_recs[i].in_use && strncmp(g_recs[i].info.ia_name, ia_name, DAT_NAME_MAX_LENGTH) == 0) {
            snprintf(params, len, "%s", g_recs[i].ia_params);
            found = 1;
        }
    }
    pthread_mutex_unlock(&g_lock);
    return found;
}

struct sd_provider_rec *sd_provider_find(const char *ia_name, DAT_BOOLEAN thread_safe)
{
    struct sd_provider_rec *found = NULL;
    pthread_mutex_lock(&g_lock);
    for (int i = 0; i < SD_MAX_PROVIDER_RECORDS; i++) {
        if (!g_recs[i].in_use || strncmp(g_recs[i].info.ia_name, ia_name, DAT_NAME_MAX_LENGTH) != 0)
            continue;
        if (found == NULL || g_recs[i].info.is_thread_safe == thread_safe)
            found = &g_recs[i];
    }
    pthread_mutex_unlock(&g_lock);
    return found;
}

int sd_provider_attached_count(void)
{
    int n = 0;
    pthread_mutex_lock(&g_lock);
    for (int i = 0; i < SD_MAX_PROVIDER_RECORDS; i++)
        n += g_recs[i].in_use;
    pthread_mutex_unlock(&g_lock);
    return n;
}

SD_EXPORT void dat_provider_init(const DAT_PROVIDER_INFO *info, const char *ia_params)
{
    struct sd_provider_rec *rec = sd_provider_attach(info, ia_params);
    if (rec == NULL) {
        SD_ERR("provider", "cannot serve %s: no free record slot (max %d)", info ? info->ia_name : "(null)",
               SD_MAX_PROVIDER_RECORDS);
        return;
    }
    if (!dat_registry_add_provider) {
        SD_WARN("provider", "no DAT registry loaded; %s not registered", rec->info.ia_name);
        return;
    }
    DAT_RETURN rc = dat_registry_add_provider(&rec->table, info);
    if (rc != DAT_SUCCESS)
        SD_ERR("provider", "dat_registry_add_provider(%s) failed: 0x%x", rec->info.ia_name, (unsigned)rc);
    else
        SD_DBG("provider", "registered %s (u%u.%u %s) ia_params \"%s\"", rec->info.ia_name,
               (unsigned)rec->info.dapl_version_major, (unsigned)rec->info.dapl_version_minor,
               rec->info.is_thread_safe ? "threadsafe" : "nonthreadsafe", rec->ia_params);
}

SD_EXPORT void dat_provider_fini(const DAT_PROVIDER_INFO *info)
{
    struct sd_provider_rec *rec = NULL;
    pthread_mutex_lock(&g_lock);
    for (int i = 0; info != NULL && i < SD_MAX_PROVIDER_RECORDS; i++)
        if (g_recs[i].in_use && same_key(&g_recs[i].info, info))
            rec = &g_recs[i];
    pthread_mutex_unlock(&g_lock);
    if (rec == NULL)
        return;
    if (dat_registry_remove_provider) {
        DAT_RETURN rc = dat_registry_remove_provider(&rec->table, info);
        if (rc != DAT_SUCCESS)
            SD_WARN("provider", "dat_registry_remove_provider(%s): 0x%x", rec->info.ia_name, (unsigned)rc);
    }
    sd_provider_detach(info);
}
