/*
 * softdat — DAT 2.0 public headers: the interface between the DAT registry
 * (libdat2) and providers.
 *
 * A provider library exports DAT_PROVIDER_INIT_FUNC_NAME and
 * DAT_PROVIDER_FINI_FUNC_NAME. The registry loads it on the first
 * dat_ia_open() of a matching dat.conf entry and calls the init function,
 * which must register its DAT_PROVIDER under the DAT_PROVIDER_INFO it was
 * given; fini must remove it again before the library is unloaded.
 *
 * Consumers handed small integer IA handles by the registry; a provider
 * converts between those and its own IA pointers with
 * dats_get_ia_handle() (the mapping works in both directions).
 */
#ifndef SOFTDAT_DAT2_REGISTRY_H
#define SOFTDAT_DAT2_REGISTRY_H

#include <dat2/udat.h>
#include <dat2/udat_redirection.h>

#ifdef __cplusplus
extern "C" {
#endif

DAT_EXPORT DAT_RETURN DAT_API dat_registry_add_provider(
    IN  const DAT_PROVIDER      *provider,
    IN  const DAT_PROVIDER_INFO *provider_info);

DAT_EXPORT DAT_RETURN DAT_API dat_registry_remove_provider(
    IN  const DAT_PROVIDER      *provider,
    IN  const DAT_PROVIDER_INFO *provider_info);

/* Maps a registry IA handle to the provider's IA object and back. */
DAT_EXPORT DAT_RETURN DAT_API dats_get_ia_handle(
    IN  DAT_IA_HANDLE  handle,
    OUT DAT_IA_HANDLE *ia_handle_p);

/* Entry points a provider library exports, with their dlsym() names. */
#define DAT_PROVIDER_INIT_FUNC_NAME dat_provider_init
#define DAT_PROVIDER_FINI_FUNC_NAME dat_provider_fini
#define DAT_PROVIDER_INIT_FUNC_STR  "dat_provider_init"
#define DAT_PROVIDER_FINI_FUNC_STR  "dat_provider_fini"

typedef void (DAT_API *DAT_PROVIDER_INIT_FUNC)(
    IN const DAT_PROVIDER_INFO *provider_info,
    IN const char              *instance_data);

typedef void (DAT_API *DAT_PROVIDER_FINI_FUNC)(
    IN const DAT_PROVIDER_INFO *provider_info);

/* Answer of dat_registry_providers_related(). */
typedef enum dat_ha_relationship {
    DAT_HA_FALSE,               /* not related */
    DAT_HA_TRUE,                /* related */
    DAT_HA_UNKNOWN,             /* cannot tell */
    DAT_HA_CONFLICTING,         /* the providers disagree */
    DAT_HA_EXTENSION_BASE
} DAT_HA_RELATIONSHIP;

DAT_EXPORT DAT_RETURN DAT_API dat_registry_providers_related(
    IN  const DAT_NAME_PTR   provider_1,
    IN  const DAT_NAME_PTR   provider_2,
    OUT DAT_HA_RELATIONSHIP *relationship);

#ifdef __cplusplus
}
#endif

#endif /* SOFTDAT_DAT2_REGISTRY_H */
