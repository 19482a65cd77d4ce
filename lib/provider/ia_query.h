/* Open query of an IA by name (ia_query.c). */
#ifndef SOFTDAT_PROVIDER_IA_QUERY_H
#define SOFTDAT_PROVIDER_IA_QUERY_H

#include "lib/provider/provider.h"

#include "lib/provider/handle.h"

DAT_RETURN sd_ia_open_query(const char *name, DAT_HANDLE *out, DAT_IA_ATTR_MASK ia_mask, DAT_IA_ATTR *ia_attr,
                            DAT_PROVIDER_ATTR_MASK pr_mask, DAT_PROVIDER_ATTR *pr_attr);
DAT_RETURN sd_ia_close_query(DAT_HANDLE h);

#endif
