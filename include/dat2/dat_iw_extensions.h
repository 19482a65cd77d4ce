/*
 * softdat — DAT 2.0 iWARP extensions: socket service points (SSP).
 *
 * Written from the "DAPL Extension Design and API" iWARP seed (rev 0.7).
 * OFA DAPL ships no iWARP extension header, so there is no deployed
 * binary to match; the values the seed leaves open are chosen here:
 *
 *   - Operation codes start at 0x100. They stay clear of the IB operation
 *     codes (0..29) and of the DAT_OPEN_EXTENSION_BASE (0x1000) and
 *     DAT_CLOSE_EXTENSION_BASE (0x2000) bits, which the registry
 *     interprets itself in dat_extension_op(). An IA can therefore report
 *     DAT_EXTENSION_IB in extension_supported (as IB consumers such as
 *     dtestx require) and still accept these operations.
 *   - Events number from DAT_IW_EXTENSION_RANGE_BASE (0x80000).
 *   - A socket is an operating-system socket descriptor (int on Linux).
 *   - The extension version reported for this interface is 1.0.0 (100).
 *
 * As in the IB extension header, every call is a macro over
 * dat_extension_op(); the argument order after (handle, op) is what the
 * provider's extension dispatcher reads from its va_list.
 */
#ifndef SOFTDAT_DAT2_IW_EXTENSIONS_H
#define SOFTDAT_DAT2_IW_EXTENSIONS_H

#include <dat2/udat.h>

#ifdef __cplusplus
extern "C" {
#endif

#define DAT_IW_EXTENSION_VERSION 100

/* Provider-specific attribute announcing socket service points. */
#define DAT_IW_ATTR_SSP "DAT_IW_ATTR_SSP"

/* A connected socket handed to the provider. */
typedef int DAT_IW_SOCKET;

/* Socket service point: a DAT object whose handle type is the first
 * extension handle type. */
typedef enum dat_handle_iw_ext_type {
    DAT_IW_HANDLE_TYPE_SSP = DAT_HANDLE_TYPE_EXTENSION_BASE
} DAT_HANDLE_IW_EXT_TYPE;

typedef DAT_HANDLE DAT_IW_SSP_HANDLE;

typedef enum dat_iw_ssp_state {
    DAT_IW_SSP_STATE_OPERATIONAL,
    DAT_IW_SSP_STATE_NON_OPERATIONAL    /* socket gone or CR generated */
} DAT_IW_SSP_STATE;

typedef struct dat_iw_ssp_param {
    DAT_IA_HANDLE    ia_handle;
    DAT_IW_SOCKET    socket_id;
    DAT_EVD_HANDLE   evd_handle;
    DAT_EP_HANDLE    ep_handle;
    DAT_IW_SSP_STATE ssp_state;
} DAT_IW_SSP_PARAM;

typedef enum dat_iw_ssp_param_mask {
    DAT_IW_SSP_FIELD_IA_HANDLE  = 0x01,
    DAT_IW_SSP_FIELD_SOCKET_ID  = 0x02,
    DAT_IW_SSP_FIELD_EVD_HANDLE = 0x04,
    DAT_IW_SSP_FIELD_EP_HANDLE  = 0x08,
    DAT_IW_SSP_FIELD_SSP_STATE  = 0x10,
    DAT_IW_SSP_FIELD_ALL        = 0x1f
} DAT_IW_SSP_PARAM_MASK;

/* Operation codes for dat_extension_op() (see the note at the top). */
typedef enum dat_iw_op {
    DAT_IW_SSP_CREATE_OP = 0x100,
    DAT_IW_SSP_FREE_OP,
    DAT_IW_SSP_QUERY_OP,
    DAT_IW_SOCKET_CONNECT_OP
} DAT_IW_OP;

/* Events. SOCKET_DOWN is posted on the SSP's EVD when its socket is or
 * becomes disconnected before a connection request was generated. */
typedef enum dat_iw_event_number {
    DAT_CONNECTION_EVENT_SOCKET_DOWN = DAT_IW_EXTENSION_RANGE_BASE
} DAT_IW_EVENT_NUMBER;

/* Creates an SSP on a connected socket. At most one connection request is
 * generated, on evd; final_sm_msg (optional) is sent on the socket before
 * the provider waits for the MPA request. ep may be DAT_HANDLE_NULL. */
#define dat_iw_ssp_create(ia, socket_id, ep, evd, final_sm_msg, \
                          final_sm_msg_len, ssp_handle) \
    dat_extension_op((DAT_IA_HANDLE)(ia), (DAT_IW_OP)DAT_IW_SSP_CREATE_OP, \
        (DAT_IW_SOCKET)(socket_id), (DAT_EP_HANDLE)(ep), \
        (DAT_EVD_HANDLE)(evd), (DAT_PVOID)(final_sm_msg), \
        (DAT_COUNT)(final_sm_msg_len), (DAT_IW_SSP_HANDLE *)(ssp_handle))

#define dat_iw_ssp_free(ssp_handle) \
    dat_extension_op((DAT_IW_SSP_HANDLE)(ssp_handle), \
        (DAT_IW_OP)DAT_IW_SSP_FREE_OP)

#define dat_iw_ssp_query(ssp_handle, ssp_param_mask, ssp_param) \
    dat_extension_op((DAT_IW_SSP_HANDLE)(ssp_handle), \
        (DAT_IW_OP)DAT_IW_SSP_QUERY_OP, \
        (DAT_IW_SSP_PARAM_MASK)(ssp_param_mask), \
        (DAT_IW_SSP_PARAM *)(ssp_param))

/* Active side: turn an already connected socket into an RDMA connection
 * of ep (MPA request carries the private data). */
#define dat_iw_socket_connect(ep, socket_id, timeout, private_data_size, \
                              private_data) \
    dat_extension_op((DAT_EP_HANDLE)(ep), (DAT_IW_OP)DAT_IW_SOCKET_CONNECT_OP, \
        (DAT_IW_SOCKET)(socket_id), (DAT_TIMEOUT)(timeout), \
        (DAT_COUNT)(private_data_size), (DAT_PVOID)(private_data))

#ifdef __cplusplus
}
#endif

#endif /* SOFTDAT_DAT2_IW_EXTENSIONS_H */
