/* test/lib/prov_fixture.h: a provider record attached directly, its IAs. */
#include "test/lib/prov_fixture.h"

DAT_PROVIDER_INFO fx_info(const char *name, DAT_BOOLEAN ts)
{
    DAT_PROVIDER_INFO info;
    memset(&info, 0, sizeof info);
    strncpy(info.ia_name, name, sizeof info.ia_name - 1);
    info.dapl_version_major = 2;
    info.dapl_version_minor = 0;
    info.is_thread_safe = ts;
    return info;
}

DAT_PROVIDER *fx_provider(const char *name, const char *params, DAT_BOOLEAN ts)
{
    DAT_PROVIDER_INFO info = fx_info(name, ts);
    struct sd_provider_rec *rec = sd_provider_attach(&info, params);
    ck_assert_ptr_nonnull(rec);
    return &rec->table;
}

DAT_IA_HANDLE fx_open(DAT_PROVIDER *p, DAT_EVD_HANDLE *async)
{
    DAT_IA_HANDLE ia = DAT_HANDLE_NULL;
    DAT_EVD_HANDLE local = DAT_HANDLE_NULL;
    ck_assert_dat_ok(p->ia_open_func((DAT_NAME_PTR)p->device_name, 16, async ? async : &local, &ia));
    ck_assert_ptr_nonnull(ia);
    return ia;
}
