/* iWARP socket service points and dat_iw_socket_connect (ssp.c). */
#ifndef SOFTDAT_PROVIDER_SSP_H
#define SOFTDAT_PROVIDER_SSP_H

#include <dat2/dat_iw_extensions.h>

#include "lib/provider/provider.h"

DAT_RETURN sd_iw_ssp_create(DAT_IA_HANDLE ia, DAT_IW_SOCKET fd, DAT_EP_HANDLE ep, DAT_EVD_HANDLE evd, DAT_PVOID msg,
                            DAT_COUNT msg_len, DAT_IW_SSP_HANDLE *out);
DAT_RETURN sd_iw_ssp_free(DAT_IW_SSP_HANDLE ssp);
DAT_RETURN sd_iw_ssp_query(DAT_IW_SSP_HANDLE ssp, DAT_IW_SSP_PARAM_MASK mask, DAT_IW_SSP_PARAM *p);
DAT_RETURN sd_iw_socket_connect(DAT_EP_HANDLE ep, DAT_IW_SOCKET fd, DAT_TIMEOUT timeout, DAT_COUNT pdata_size,
                                DAT_PVOID pdata);

#endif
