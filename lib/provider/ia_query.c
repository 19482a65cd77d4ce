/* dat_ib_open_query / dat_ib_close_query (IB extension ops 0x1000 /
 * 0x2000): the attributes of an IA, by name, without opening it.
 *
 * The registry loads us, then calls slot 80 with the IA *name* as handle
 * (abi-and-loading.md §3.7). We answer with a query object: a handle of
 * a private type (not DAT_HANDLE_TYPE_IA, so no IA call accepts it) whose
 * first word is the record's DAT_PROVIDER, because close_query dispatches
 * through that word and releases the registry's reference by its
 * device_name. It holds the IA address the returned attributes point at;
 * no engine thread and no memory table are created. */
#include <string.h>

#include "emu/log.h"
#include "lib/provider/ia.h"
#include "lib/provider/ia_query.h"

static const struct sd_handle_ops query_ops = {
    .type = SD_HTYPE_IA_QUERY,
    .name = "ia-query",
    .size = sizeof(struct sd_ia),
};

DAT_RETURN sd_ia_open_query(const char *name, DAT_HANDLE *out, DAT_IA_ATTR_MASK ia_mask, DAT_IA_ATTR *ia_attr,
                            DAT_PROVIDER_ATTR_MASK pr_mask, DAT_PROVIDER_ATTR *pr_attr)
{
    if (name == NULL)
        return SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG1);
    if (out == NULL)
        return SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    if ((ia_mask & ~(DAT_IA_ATTR_MASK)DAT_IA_FIELD_ALL) != 0)
        return SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    if ((pr_mask & ~(DAT_PROVIDER_ATTR_MASK)DAT_PROVIDER_FIELD_ALL) != 0)
        return SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG5);
    /* The registry's open query keys the record as 2.0, non-thread-safe. */
    struct sd_provider_rec *rec = sd_provider_find(name, DAT_FALSE);
    if (rec == NULL)
        return SD_RET(DAT_PROVIDER_NOT_FOUND, DAT_NAME_NOT_REGISTERED);
    struct sd_ia *q = (struct sd_ia *)sd_handle_alloc(&query_ops, NULL);
    if (q == NULL)
        return SD_RET(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
    q->h.provider = &rec->table;
    q->rec = rec;
    int res = sd_ia_resolve_address(rec->ia_params, &q->addr, &q->addr_len, q->ifname);
    if (res != 0) {
        sd_handle_discard(&q->h);
        return res == -2 ? SD_RET(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY)
                         : SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG1);
    }
    DAT_RETURN rc = sd_handle_publish(&q->h);
    if (rc != DAT_SUCCESS) {
        sd_handle_discard(&q->h);
        return rc;
    }
    sd_ia_fill_attrs(q, ia_attr, pr_attr);
    *out = (DAT_HANDLE)q;
    return DAT_SUCCESS;
}

DAT_RETURN sd_ia_close_query(DAT_HANDLE raw)
{
    struct sd_handle *h;
    DAT_RETURN rc = sd_handle_get(raw, SD_HTYPE_IA_QUERY, DAT_INVALID_HANDLE_IA, &h);
    if (rc != DAT_SUCCESS)
        return rc;
    rc = sd_handle_destroy(h, DAT_INVALID_HANDLE_IA);
    sd_handle_put(h);
    return rc;
}
