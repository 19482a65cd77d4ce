/* softdat provider: what every object file shares — the DAT headers, the
 * per-dat.conf-record provider instance and the error-code helper. */
#ifndef SOFTDAT_PROVIDER_PROVIDER_H
#define SOFTDAT_PROVIDER_PROVIDER_H

#include <dat2/udat.h>
#include <dat2/dat_registry.h>

#include "lib/provider/limits.h"

/* Error returns are class|type|subtype; success is exactly 0. */
#define SD_RET(type, subtype) \
    ((DAT_RETURN)(DAT_CLASS_ERROR | (DAT_UINT32)(type) | (DAT_UINT32)(subtype)))

#define SD_PROVIDER_NAME "softdat"
#define SD_VENDOR_NAME "softdat"
#define SD_PROVIDER_VERSION_MAJOR 0
#define SD_PROVIDER_VERSION_MINOR 1
/* From the top-level VERSION file (the Makefile passes it). */
#define SD_VERSION_STRING SOFTDAT_VERSION

/* One instance per registered dat.conf record: the registry keys records by
 * (IA name, API version, thread safety) and releases them by what
 * dat_ia_query reports, so every IA must point at the instance (and hence the
 * info) it was opened through. `table` is first: objects store a
 * DAT_PROVIDER * and get their record back with a cast. */
struct sd_provider_rec {
    DAT_PROVIDER table;
    DAT_PROVIDER_INFO info;
    char ia_params[SD_IA_PARAMS_MAX];
    int slot;
    int in_use;
};

static inline struct sd_provider_rec *sd_provider_rec_of(const DAT_PROVIDER *p)
{
    return (struct sd_provider_rec *)(void *)(DAT_PROVIDER *)p;
}

/* Set up (without registering) the instance for one record; NULL when all
 * SD_MAX_PROVIDER_RECORDS slots are taken. An identical key returns the
 * existing instance. dat_provider_init = attach + dat_registry_add_provider. */
struct sd_provider_rec *sd_provider_attach(const DAT_PROVIDER_INFO *info, const char *ia_params);
/* Undo attach; returns 0, or -1 if no such record. The last detach drains
 * the handle registry so the library can be unloaded. */
int sd_provider_detach(const DAT_PROVIDER_INFO *info);
/* The ia_params of an attached record named ia_name (any key) into params;
 * 1 if found, else 0. */
int sd_provider_find_params(const char *ia_name, char *params, size_t len);
/* An attached record named ia_name, the one with this thread safety if
 * there are several; NULL if none. */
struct sd_provider_rec *sd_provider_find(const char *ia_name, DAT_BOOLEAN thread_safe);
/* Number of attached records (tests). */
int sd_provider_attached_count(void);

/* Each object file fills the slots it implements (provider.c calls them all;
 * a test checks that no slot is left NULL). */
void sd_handle_fill_table(DAT_PROVIDER *p);
void sd_ia_fill_table(DAT_PROVIDER *p);
void sd_pz_fill_table(DAT_PROVIDER *p);
void sd_evd_fill_table(DAT_PROVIDER *p);
void sd_ia_ha_fill_table(DAT_PROVIDER *p);

/* Exported entry points (libdaplsoft.map), called by the registry. */
void dat_provider_init(const DAT_PROVIDER_INFO *info, const char *ia_params);
void dat_provider_fini(const DAT_PROVIDER_INFO *info);

/* The IA open entry, reached through a per-record trampoline. */
DAT_RETURN sd_ia_open(struct sd_provider_rec *rec, const DAT_NAME_PTR name, DAT_COUNT async_evd_qlen,
                      DAT_EVD_HANDLE *async_evd_handle, DAT_IA_HANDLE *ia_handle);

#endif
