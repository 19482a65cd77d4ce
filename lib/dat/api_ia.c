/*
 * The consumer calls that involve the registry itself: IA open/close (load,
 * reference counting, IA handle mapping), handle-generic calls that may
 * receive an IA handle, and dat_extension_op with its open/close queries.
 */
#include "lib/dat/dr.h"

#include <stdarg.h>
#include <stdint.h>
#include <string.h>

int dr_extensions_enabled;

#define PROV(h) (*(DAT_PROVIDER *const *)(h))

static DAT_RETURN make_key(const char *name, DAT_UINT32 major, DAT_UINT32 minor,
                           DAT_BOOLEAN ts, DAT_PROVIDER_INFO *key)
{
    size_t n;

    if (!name)
        return DR_ERR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG1);
    n = strnlen(name, DAT_NAME_MAX_LENGTH);
    if (n >= DAT_NAME_MAX_LENGTH)
        return DR_ERR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG1);
    memset(key, 0, sizeof *key);
    memcpy(key->ia_name, name, n);
    key->dapl_version_major = major;
    key->dapl_version_minor = minor;
    key->is_thread_safe = ts;
    return DAT_SUCCESS;
}

DAT_RETURN dat_ia_openv(const DAT_NAME_PTR name, DAT_COUNT async_evd_qlen,
                        DAT_EVD_HANDLE *async_evd_handle, DAT_IA_HANDLE *ia_handle,
                        DAT_UINT32 dapl_major, DAT_UINT32 dapl_minor,
                        DAT_BOOLEAN thread_safety)
{
    DAT_PROVIDER_INFO key;
    struct dr_dyn_ent ent;
    DAT_IA_HANDLE raw = NULL, small;
    DAT_IA_ATTR attr;
    DAT_RETURN rc;

    rc = make_key(name, dapl_major, dapl_minor, thread_safety, &key);
    if (rc != DAT_SUCCESS)
        return rc;
    if (!ia_handle)
        return DR_ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);
    dr_dbg(DR_DBG_CONSUMER, "ia_open %s %u.%u %s", key.ia_name, dapl_major, dapl_minor,
           thread_safety ? "threadsafe" : "nonthreadsafe");

    dr_sr_lock();
    rc = dr_sr_acquire(&key);
    if (rc != DAT_SUCCESS)
        goto out;
    if (dr_dyn_lookup(&key, &ent) != 0 || !ent.ia_open) {
        rc = DR_ERR(DAT_PROVIDER_NOT_FOUND, DAT_NAME_NOT_REGISTERED);
        goto release;
    }
    rc = ent.ia_open(key.ia_name, async_evd_qlen, async_evd_handle, &raw);
    if (rc != DAT_SUCCESS)
        goto release;
    rc = dr_ia_insert(raw, &small);
    if (rc != DAT_SUCCESS) {
        PROV(raw)->ia_close_func(raw, DAT_CLOSE_ABRUPT_FLAG);
        goto release;
    }
    dr_sr_unlock();

    *ia_handle = small;
    /* Extension ops are refused until some IA says it has extensions. */
    memset(&attr, 0, sizeof attr);
    if (dat_ia_query(small, NULL, DAT_IA_FIELD_ALL, &attr, 0, NULL) == DAT_SUCCESS &&
        attr.extension_supported != 0)
        __atomic_store_n(&dr_extensions_enabled, 1, __ATOMIC_RELAXED);
    return DAT_SUCCESS;

release:
    dr_sr_release(&key);
out:
    dr_sr_unlock();
    dr_dbg(DR_DBG_CONSUMER, "ia_open %s failed: 0x%08x", key.ia_name, rc);
    return rc;
}

DAT_RETURN dat_ia_query(DAT_IA_HANDLE ia_handle, DAT_EVD_HANDLE *async_evd_handle,
                        DAT_IA_ATTR_MASK ia_attr_mask, DAT_IA_ATTR *ia_attr,
                        DAT_PROVIDER_ATTR_MASK provider_attr_mask,
                        DAT_PROVIDER_ATTR *provider_attr)
{
    DAT_IA_HANDLE raw = dr_ia_is_small(ia_handle) ? dr_ia_lookup(ia_handle) : NULL;

    if (!raw)
        return DR_ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);
    if (!PROV(raw)->ia_query_func)
        return DR_ERR(DAT_NOT_IMPLEMENTED, DAT_NO_SUBTYPE);
    return PROV(raw)->ia_query_func(raw, async_evd_handle, ia_attr_mask, ia_attr,
                                    provider_attr_mask, provider_attr);
}

DAT_RETURN dat_ia_close(DAT_IA_HANDLE ia_handle, DAT_CLOSE_FLAGS close_flags)
{
    DAT_PROVIDER_ATTR pattr;
    DAT_PROVIDER_INFO key;
    const DAT_PROVIDER *prov;
    DAT_IA_HANDLE raw;
    DAT_RETURN rc;

    dr_sr_lock();
    raw = dr_ia_is_small(ia_handle) ? dr_ia_lookup(ia_handle) : NULL;
    if (!raw) {
        rc = DR_ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);
        goto out;
    }
    prov = PROV(raw);
    if (!prov || !prov->ia_query_func || !prov->ia_close_func) {
        rc = DR_ERR(DAT_NOT_IMPLEMENTED, DAT_NO_SUBTYPE);
        goto out;
    }
    /* The release key is what the provider says it is (device_name and its
     * attributes), exactly as OFA: a provider that misreports is never
     * unloaded. Copy it now; the provider may free it in ia_close. */
    rc = make_key(prov->device_name, 0, 0, DAT_FALSE, &key);
    if (rc != DAT_SUCCESS) {
        rc = DR_ERR(DAT_INTERNAL_ERROR, DAT_NO_SUBTYPE);
        goto out;
    }
    memset(&pattr, 0, sizeof pattr);
    rc = prov->ia_query_func(raw, NULL, 0, NULL, DAT_PROVIDER_FIELD_ALL, &pattr);
    if (rc != DAT_SUCCESS)
        goto out;
    rc = prov->ia_close_func(raw, close_flags);
    if (rc != DAT_SUCCESS)
        goto out;
    dr_ia_remove(ia_handle);
    key.dapl_version_major = pattr.dapl_version_major;
    key.dapl_version_minor = pattr.dapl_version_minor;
    key.is_thread_safe = pattr.is_thread_safe;
    rc = dr_sr_release(&key);
out:
    dr_sr_unlock();
    dr_dbg(DR_DBG_CONSUMER, "ia_close %p: 0x%08x", ia_handle, rc);
    return rc;
}

/*
 * For calls that take any handle: a live small integer becomes its IA; a
 * dead one is refused (OFA would dereference it); other values pass through.
 */
static DAT_RETURN map_any(DAT_HANDLE *h)
{
    DAT_IA_HANDLE raw;

    if (!*h)
        return DR_ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE1);
    if (!dr_ia_is_small(*h))
        return DAT_SUCCESS;
    raw = dr_ia_lookup(*h);
    if (!raw)
        return DR_ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);
    *h = raw;
    return DAT_SUCCESS;
}

DAT_RETURN dat_set_consumer_context(DAT_HANDLE dat_handle, DAT_CONTEXT context)
{
    DAT_RETURN rc = map_any(&dat_handle);

    if (rc != DAT_SUCCESS)
        return rc;
    if (!PROV(dat_handle)->set_consumer_context_func)
        return DR_ERR(DAT_NOT_IMPLEMENTED, DAT_NO_SUBTYPE);
    return PROV(dat_handle)->set_consumer_context_func(dat_handle, context);
}

DAT_RETURN dat_get_consumer_context(DAT_HANDLE dat_handle, DAT_CONTEXT *context)
{
    DAT_RETURN rc = map_any(&dat_handle);

    if (rc != DAT_SUCCESS)
        return rc;
    if (!PROV(dat_handle)->get_consumer_context_func)
        return DR_ERR(DAT_NOT_IMPLEMENTED, DAT_NO_SUBTYPE);
    return PROV(dat_handle)->get_consumer_context_func(dat_handle, context);
}

DAT_RETURN dat_get_handle_type(DAT_HANDLE dat_handle, DAT_HANDLE_TYPE *handle_type)
{
    DAT_RETURN rc = map_any(&dat_handle);

    if (rc != DAT_SUCCESS)
        return rc;
    if (!PROV(dat_handle)->get_handle_type_func)
        return DR_ERR(DAT_NOT_IMPLEMENTED, DAT_NO_SUBTYPE);
    return PROV(dat_handle)->get_handle_type_func(dat_handle, handle_type);
}

/* DAT_OPEN_EXTENSION_BASE: the first vararg is the IA name; the provider's
 * slot 80 gets the name as handle and the remaining varargs. */
static DAT_RETURN open_query(DAT_EXTENDED_OP op, va_list ap)
{
    const char *name = va_arg(ap, const char *);
    DAT_PROVIDER_INFO key;
    struct dr_dyn_ent ent;
    DAT_RETURN rc;

    rc = make_key(name, DAT_VERSION_MAJOR, DAT_VERSION_MINOR, DAT_FALSE, &key);
    if (rc != DAT_SUCCESS)
        return DR_ERR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    dr_sr_lock();
    rc = dr_sr_acquire(&key);
    if (rc == DAT_SUCCESS && (dr_dyn_lookup(&key, &ent) != 0 || !ent.extendedop)) {
        dr_sr_release(&key);
        rc = DR_ERR(DAT_PROVIDER_NOT_FOUND, DAT_NAME_NOT_REGISTERED);
    }
    dr_sr_unlock();
    if (rc != DAT_SUCCESS)
        return rc;
    __atomic_store_n(&dr_extensions_enabled, 1, __ATOMIC_RELAXED);
    rc = ent.extendedop((DAT_HANDLE)key.ia_name, op, ap);
    if (rc != DAT_SUCCESS) {
        dr_sr_lock();
        dr_sr_release(&key);
        dr_sr_unlock();
    }
    return rc;
}

/* DAT_CLOSE_EXTENSION_BASE: the provider closes the query object, then the
 * reference the open query took is dropped. */
static DAT_RETURN close_query(DAT_HANDLE h, DAT_EXTENDED_OP op, va_list ap)
{
    const DAT_PROVIDER *prov = PROV(h);
    DAT_PROVIDER_INFO key;
    DAT_RETURN rc;

    if (!prov || !prov->handle_extendedop_func)
        return DR_ERR(DAT_NOT_IMPLEMENTED, DAT_NO_SUBTYPE);
    rc = make_key(prov->device_name, DAT_VERSION_MAJOR, DAT_VERSION_MINOR, DAT_FALSE, &key);
    if (rc != DAT_SUCCESS)
        return DR_ERR(DAT_INTERNAL_ERROR, DAT_NO_SUBTYPE);
    rc = prov->handle_extendedop_func(h, op, ap);
    if (rc != DAT_SUCCESS)
        return rc;
    dr_sr_lock();
    rc = dr_sr_release(&key);
    dr_sr_unlock();
    return rc;
}

DAT_RETURN dat_extension_op(DAT_HANDLE handle, DAT_EXTENDED_OP op, ...)
{
    DAT_RETURN rc;
    va_list ap;

    if (handle && dr_ia_is_small(handle)) {
        handle = dr_ia_lookup(handle);
        if (!handle)
            return DR_ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);
    }
    if (handle && !__atomic_load_n(&dr_extensions_enabled, __ATOMIC_RELAXED))
        return DR_ERR(DAT_NOT_IMPLEMENTED, DAT_NO_SUBTYPE);
    dr_dbg(DR_DBG_CONSUMER, "extension_op %p op 0x%x", handle, (unsigned)op);

    va_start(ap, op);
    if (op & DAT_OPEN_EXTENSION_BASE) {
        rc = open_query(op, ap);
    } else if (!handle) {
        rc = DR_ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE1);
    } else if (op & DAT_CLOSE_EXTENSION_BASE) {
        rc = close_query(handle, op, ap);
    } else if (!PROV(handle) || !PROV(handle)->handle_extendedop_func) {
        rc = DR_ERR(DAT_NOT_IMPLEMENTED, DAT_NO_SUBTYPE);
    } else {
        rc = PROV(handle)->handle_extendedop_func(handle, op, ap);
    }
    va_end(ap);
    return rc;
}
