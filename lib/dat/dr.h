/*
 * Internal interface of the DAT registry (libdat2.so.2).
 *
 * Nothing declared here is exported from the shared library (the version
 * script keeps only dat_* and dats_get_ia_handle global). The unit tests in
 * test/unit/dat link the static archive and call these functions directly.
 */
#ifndef SOFTDAT_LIB_DAT_DR_H
#define SOFTDAT_LIB_DAT_DR_H

#include <dat2/udat.h>
#include <dat2/dat_registry.h>
#include <pthread.h>
#include <stddef.h>

/* An error return: class bit | type | subtype. */
#define DR_ERR(type, sub) ((DAT_RETURN)(DAT_CLASS_ERROR | (DAT_UINT32)(type) | (DAT_UINT32)(sub)))

/* ------------------------------------------------------------------ dbg.c */

/* DAT_DBG_TYPE bits (values fixed by OFA DAPL; see docs/registry.md). */
enum {
    DR_DBG_ERROR    = 0x01,
    DR_DBG_GENERIC  = 0x02,
    DR_DBG_SR       = 0x04, /* static registry: parser, load/unload */
    DR_DBG_DR       = 0x08, /* dynamic registry */
    DR_DBG_PROVIDER = 0x10, /* provider API: add/remove, IA handle mapping */
    DR_DBG_CONSUMER = 0x20, /* consumer API: open/close, extension ops */
};
/* DAT_DBG_DEST bits. Our build: 0x1 is stderr (never stdout), 0x2 syslog. */
enum { DR_DEST_STDERR = 0x1, DR_DEST_SYSLOG = 0x2 };

void dr_dbg_init(void);                 /* (re)reads DAT_DBG_TYPE/DAT_DBG_DEST */
unsigned dr_dbg_type(void);
unsigned dr_dbg_dest(void);
void dr_dbg(unsigned type, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ----------------------------------------------------------------- conf.c */

#define DR_LIB_MAX    4096
#define DR_PARAMS_MAX 1024

/* One parsed dat.conf record, all eight fields. */
struct dr_conf_entry {
    char        ia_name[DAT_NAME_MAX_LENGTH];
    int         kernel;                 /* API field started with 'k' */
    DAT_UINT32  api_major, api_minor;
    DAT_BOOLEAN thread_safe;
    int         is_default;
    char        lib_path[DR_LIB_MAX];
    char        prov_id[DAT_NAME_MAX_LENGTH];
    DAT_UINT32  prov_major, prov_minor;
    char        ia_params[DR_PARAMS_MAX];
    char        platform_params[DR_PARAMS_MAX];
};

/* Parses one line (no trailing newline needed). Returns 1 and fills *e for
 * a record, 0 for a blank/comment-only line, -1 for a corrupt line with a
 * static reason in *why. */
int dr_conf_parse_line(const char *line, struct dr_conf_entry *e, const char **why);

typedef void (*dr_conf_cb)(const struct dr_conf_entry *e, const char *path,
                           int lineno, void *arg);
/* Parses a whole file, calling cb for every well-formed record (of any type)
 * in file order and reporting every corrupt line as "path:line: ..." through
 * dr_dbg(DR_DBG_ERROR). Returns the number of records, or -1 if the file
 * cannot be opened. *n_corrupt (may be NULL) receives the corrupt count. */
int dr_conf_parse_file(const char *path, dr_conf_cb cb, void *arg, int *n_corrupt);

/* Chooses the dat.conf path: override (DAT_OVERRIDE) if non-NULL, used even
 * if it does not exist; else etc_path if it can be read; else prefix_path. */
const char *dr_conf_choose(const char *override, const char *etc_path,
                           const char *prefix_path);

#ifndef SOFTDAT_SYSCONFDIR
#define SOFTDAT_SYSCONFDIR "/usr/local/etc"
#endif
#define DR_CONF_ETC    "/etc/dat.conf"
#define DR_CONF_PREFIX SOFTDAT_SYSCONFDIR "/dat.conf"

/* ------------------------------------------------------- static_registry.c */

/* Serialises open/close sequences: record reference counts, dlopen/dlclose,
 * dat_provider_init/fini. Never taken by anything the provider calls back. */
void dr_sr_lock(void);
void dr_sr_unlock(void);

/* Both expect dr_sr_lock held. acquire: takes one reference on the loaded
 * record for key, loading the first loadable library of its fallback chain
 * if none is loaded. release: drops it; the last one calls fini + dlclose. */
DAT_RETURN dr_sr_acquire(const DAT_PROVIDER_INFO *key);
DAT_RETURN dr_sr_release(const DAT_PROVIDER_INFO *key);

int dr_sr_count(void);                  /* distinct registered keys */
int dr_sr_refcount(const DAT_PROVIDER_INFO *key); /* -1: no such record */
int dr_sr_is_loaded(const DAT_PROVIDER_INFO *key);
const char *dr_sr_conf_path(void);      /* file read by the last (re)init */

/* Test hook: forgets every record, the dynamic registry, the IA table and the
 * extensions flag, then re-reads DAT_DBG_* and dat.conf exactly as the
 * library constructor does. Refuses (returns -1) while a provider is loaded. */
int dr_registry_reinit(void);

int dr_key_equal(const DAT_PROVIDER_INFO *a, const DAT_PROVIDER_INFO *b);

/* ------------------------------------------------------- dyn_registry.c */

/* The one mutex guarding the dynamic registry and the IA handle table. */
extern pthread_mutex_t dr_tables_lock;

struct dr_dyn_ent {
    DAT_PROVIDER_INFO          key;
    const DAT_PROVIDER        *provider;
    DAT_IA_OPEN_FUNC           ia_open;
    DAT_HANDLE_EXTENDEDOP_FUNC extendedop;
};
int dr_dyn_lookup(const DAT_PROVIDER_INFO *key, struct dr_dyn_ent *out);
int dr_dyn_count(void);
void dr_dyn_clear(void);

/* ------------------------------------------------------------- ia_map.c */

/* Small-integer IA handles live in [1, DR_IA_SMALL_MAX]; anything in that
 * range is never a provider pointer. */
#define DR_IA_SMALL_MAX 65535u

DAT_RETURN dr_ia_insert(DAT_IA_HANDLE raw, DAT_IA_HANDLE *small);
DAT_IA_HANDLE dr_ia_lookup(DAT_IA_HANDLE small); /* NULL if not live */
int dr_ia_is_small(DAT_HANDLE h);
DAT_RETURN dr_ia_remove(DAT_IA_HANDLE small);
int dr_ia_live_count(void);
/* The provider IA of some open IA named ia_name, or NULL. */
DAT_IA_HANDLE dr_ia_find_open(const char *ia_name);
void dr_ia_clear(void);

/* ------------------------------------------------------------- api_ia.c */

/* Set (never cleared) once any IA reports extension_supported != 0. */
extern int dr_extensions_enabled;

/* Exported but declared by no public header: providers call it to translate
 * IA handles in both directions (see ia_map.c). */
DAT_RETURN dats_get_ia_handle(DAT_IA_HANDLE handle, DAT_IA_HANDLE *out);

#endif
