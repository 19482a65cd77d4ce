/* softdat: the provider side of dat_registry_providers_related (slot 79,
 * DAT_IA_HA_RELATED): do this IA and the IA named `name` share underlying
 * resources (spec 8.2.2.2)? A softdat IA's only resource is the network
 * interface its address lives on, so two softdat IAs are related exactly
 * when their addresses are on the same interface (softdat-lo on 127.0.0.1
 * and softdat-lo6 on ::1 both use "lo"), or are the same address. A name
 * this provider was not registered under is unknown to it:
 * DAT_INVALID_PARAMETER, as the registry call returns for an unknown IA. */
#include <string.h>

#include "lib/provider/ia.h"

static int same_address(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
    if (a->ss_family != b->ss_family)
        return 0;
    if (a->ss_family == AF_INET)
        return ((const struct sockaddr_in *)a)->sin_addr.s_addr == ((const struct sockaddr_in *)b)->sin_addr.s_addr;
    if (a->ss_family == AF_INET6)
        return memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr, &((const struct sockaddr_in6 *)b)->sin6_addr,
                      sizeof(struct in6_addr)) == 0;
    return 0;
}

static DAT_RETURN sd_ia_ha_related(DAT_IA_HANDLE ia_handle, const DAT_NAME_PTR name, DAT_BOOLEAN *related)
{
    struct sd_ia *ia;
    DAT_RETURN rc = sd_ia_get(ia_handle, &ia);
    if (rc != DAT_SUCCESS)
        return rc;
    char params[SD_IA_PARAMS_MAX];
    struct sockaddr_storage other;
    socklen_t other_len;
    char other_if[IF_NAMESIZE] = "";
    if (name == NULL || !sd_provider_find_params(name, params, sizeof params)) {
        rc = SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    } else if (related == NULL) {
        rc = SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    } else {
        int r = sd_ia_resolve_address(params, &other, &other_len, other_if);
        if (r == -2)
            rc = SD_RET(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
        else if (r != 0)
            *related = DAT_FALSE; /* its address is unusable now: nothing shared */
        else
            *related = (ia->ifname[0] != '\0' && strcmp(ia->ifname, other_if) == 0) ||
                               same_address(&ia->addr, &other)
                           ? DAT_TRUE
                           : DAT_FALSE;
    }
    sd_handle_put(&ia->h);
    return rc;
}

/* Several open instances of one IA (same dat.conf IA name, same address)
 * are one device: an event stream may feed an EVD of another instance, as
 * OFA DAPL allows and dapltest -T L -w N relies on (an EP of instance 1
 * with EVDs of instance 0). The spec neither requires nor forbids it.
 * Memory objects are not shared: each instance has its own memory table. */
bool sd_ia_same_device(const struct sd_ia *a, const struct sd_ia *b)
{
    if (a == b)
        return true;
    if (a == NULL || b == NULL || a->rec == NULL || b->rec == NULL)
        return false;
    return strcmp(a->rec->info.ia_name, b->rec->info.ia_name) == 0 && same_address(&a->addr, &b->addr);
}

void sd_ia_ha_fill_table(DAT_PROVIDER *p)
{
    p->ia_ha_related_func = sd_ia_ha_related;
}
