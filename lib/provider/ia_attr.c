/* softdat dat_ia_query: IA and provider attributes. Every number comes from
 * limits.h, which the object code enforces. */
#include <stdio.h>
#include <string.h>

#include "lib/provider/evd.h"
#include "lib/provider/ia.h"

/* Names the OFA test programs look for (abi-and-loading §2.6, §4.6). */
static DAT_NAMED_ATTR provider_specific[] = {
    {"DAT_EXTENSION_INTERFACE", "TRUE"},
    {"DAT_EXTENSION_VERSION", "209"},
    {"DAT_IB_RDMA_READ", "TRUE"},
    /* RFC 7306 over the wire, between softdat peers (MPA capability marker,
     * docs/wire.md §2.6); towards a plain iWARP peer the posts return
     * DAT_MODEL_NOT_SUPPORTED. */
    {"DAT_IB_IMMED_DATA", "TRUE"},
    {"DAT_IB_CMP_AND_SWAP", "TRUE"},
    {"DAT_IB_FETCH_AND_ADD", "TRUE"},
    {"DAT_IB_TRANSPORT_MTU", "32768"},
    /* Unreliable datagrams over UDP (ep_ud.c, emu/ud.c); UD MTU = the
     * transport MTU above. */
    {"DAT_IB_UD", "TRUE"},
    /* dat_ib_query_counters & co. count real events (counters.c). */
    {"DAT_COUNTERS", "TRUE"},
    /* iWARP extension: socket service points (ssp.c, docs/iwarp-ssp.md). */
    {"DAT_IW_ATTR_SSP", "TRUE"},
};
_Static_assert(SD_TRANSPORT_MTU == 32768, "DAT_IB_TRANSPORT_MTU string must match limits.h");

static DAT_NAMED_ATTR transport_attrs[] = {
    {"SOFTDAT_TRANSPORT", "iWARP (MPA/DDP/RDMAP) over TCP"},
    {"SOFTDAT_MPA_REVISION", "2"},
};

static DAT_NAMED_ATTR vendor_attrs[] = {
    {"SOFTDAT_VERSION", SD_VERSION_STRING},
};

#define NELEM(a) ((DAT_COUNT)(sizeof(a) / sizeof((a)[0])))

static void fill_ia_attr(struct sd_ia *ia, DAT_IA_ATTR *a)
{
    memset(a, 0, sizeof *a);
    snprintf(a->adapter_name, sizeof a->adapter_name, "%s", ia->rec->info.ia_name);
    snprintf(a->vendor_name, sizeof a->vendor_name, "%s", SD_VENDOR_NAME);
    a->hardware_version_major = SD_PROVIDER_VERSION_MAJOR;
    a->hardware_version_minor = SD_PROVIDER_VERSION_MINOR;
    a->firmware_version_major = SD_PROVIDER_VERSION_MAJOR;
    a->firmware_version_minor = SD_PROVIDER_VERSION_MINOR;
    a->ia_address_ptr = (DAT_IA_ADDRESS_PTR)&ia->addr;
    a->max_eps = SD_MAX_EPS;
    a->max_dto_per_ep = SD_MAX_DTO_PER_EP;
    a->max_rdma_read_per_ep_in = SD_MAX_RDMA_READ_PER_EP_IN;
    a->max_rdma_read_per_ep_out = SD_MAX_RDMA_READ_PER_EP_OUT;
    a->max_evds = SD_MAX_EVDS;
    a->max_evd_qlen = SD_MAX_EVD_QLEN;
    a->max_iov_segments_per_dto = SD_MAX_IOV_PER_DTO;
    a->max_lmrs = SD_MAX_LMRS;
    a->max_lmr_block_size = SD_MAX_LMR_BLOCK_SIZE;
    a->max_lmr_virtual_address = SD_MAX_LMR_VIRTUAL_ADDRESS;
    a->max_pzs = SD_MAX_PZS;
    a->max_message_size = SD_MAX_MESSAGE_SIZE;
    a->max_rdma_size = SD_MAX_RDMA_SIZE;
    a->max_rmrs = SD_MAX_RMRS;
    a->max_rmr_target_address = SD_MAX_RMR_TARGET_ADDRESS;
    a->max_srqs = SD_MAX_SRQS;
    a->max_ep_per_srq = SD_MAX_EP_PER_SRQ;
    a->max_recv_per_srq = SD_MAX_RECV_PER_SRQ;
    a->max_iov_segments_per_rdma_read = SD_MAX_IOV_PER_RDMA_READ;
    a->max_iov_segments_per_rdma_write = SD_MAX_IOV_PER_RDMA_WRITE;
    a->max_rdma_read_in = SD_MAX_RDMA_READ_IN;
    a->max_rdma_read_out = SD_MAX_RDMA_READ_OUT;
    /* DAT_FALSE = "guaranteed per EP" (L2262-2266). */
    a->max_rdma_read_per_ep_in_guaranteed = DAT_FALSE;
    a->max_rdma_read_per_ep_out_guaranteed = DAT_FALSE;
    a->zb_supported = DAT_TRUE;
    a->extension_supported = DAT_EXTENSION_IB;
    a->extension_version = SD_IB_EXTENSION_VERSION;
    a->num_transport_attr = NELEM(transport_attrs);
    a->transport_attr = transport_attrs;
    a->num_vendor_attr = NELEM(vendor_attrs);
    a->vendor_attr = vendor_attrs;
}

static void fill_provider_attr(struct sd_ia *ia, DAT_PROVIDER_ATTR *p)
{
    memset(p, 0, sizeof *p);
    snprintf(p->provider_name, sizeof p->provider_name, "%s", SD_PROVIDER_NAME);
    p->provider_version_major = SD_PROVIDER_VERSION_MAJOR;
    p->provider_version_minor = SD_PROVIDER_VERSION_MINOR;
    /* Exactly what the record was registered with: the registry releases
     * the record by these values at dat_ia_close (abi §3.4 step 5). */
    p->dapl_version_major = ia->rec->info.dapl_version_major;
    p->dapl_version_minor = ia->rec->info.dapl_version_minor;
    p->is_thread_safe = ia->rec->info.is_thread_safe;
    p->lmr_mem_types_supported =
        (DAT_MEM_TYPE)(DAT_MEM_TYPE_VIRTUAL | DAT_MEM_TYPE_LMR | DAT_MEM_TYPE_SHARED_VIRTUAL);
    p->iov_ownership_on_return = DAT_IOV_CONSUMER;
    p->dat_qos_supported = DAT_QOS_BEST_EFFORT;
    p->completion_flags_supported =
        (DAT_COMPLETION_FLAGS)(DAT_COMPLETION_SUPPRESS_FLAG | DAT_COMPLETION_UNSIGNALLED_FLAG |
                               DAT_COMPLETION_SOLICITED_WAIT_FLAG | DAT_COMPLETION_BARRIER_FENCE_FLAG);
    p->max_private_data_size = SD_MAX_PRIVATE_DATA;
    p->supports_multipath = DAT_FALSE;
    p->ep_creator = DAT_PSP_CREATES_EP_IFASKED;
    p->pz_support = DAT_PZ_UNIQUE;
    p->optimal_buffer_alignment = SD_OPTIMAL_ALIGNMENT;
    /* Any stream may share an EVD with any other (L2379 recommends it). The
     * field is const in the ABI; it is ours to fill. */
    DAT_BOOLEAN *m = (DAT_BOOLEAN *)(void *)p->evd_stream_merging_supported;
    for (int i = 0; i < 36; i++)
        m[i] = DAT_TRUE;
    p->srq_supported = DAT_TRUE;
    p->srq_watermarks_supported = 0x001;    /* low watermark */
    p->srq_ep_pz_difference_supported = DAT_TRUE;
    p->srq_info_supported = 0x11;           /* available + outstanding counts */
    p->ep_recv_info_supported = 0x11;       /* nbufs_allocated + bufs_alloc_span */
    p->lmr_sync_req = DAT_FALSE;            /* memory is coherent: CPU does the DMA */
    p->dto_async_return_guaranteed = DAT_FALSE;
    p->rdma_write_for_rdma_read_req = DAT_FALSE;
    p->rdma_read_lmr_rmr_context_exposure = DAT_FALSE;
    p->rmr_scope_supported = DAT_RMR_SCOPE_ANY;
    p->is_signal_safe = DAT_FALSE;
    p->ha_supported = DAT_FALSE;
    p->ha_loadbalancing = DAT_HA_LB_NONE;
    p->num_provider_specific_attr = NELEM(provider_specific);
    p->provider_specific_attr = provider_specific;
}

void sd_ia_fill_attrs(struct sd_ia *ia, DAT_IA_ATTR *ia_attr, DAT_PROVIDER_ATTR *pr_attr)
{
    if (ia_attr != NULL)
        fill_ia_attr(ia, ia_attr);
    if (pr_attr != NULL)
        fill_provider_attr(ia, pr_attr);
}

DAT_RETURN sd_ia_query(DAT_IA_HANDLE ia_handle, DAT_EVD_HANDLE *async_evd_handle, DAT_IA_ATTR_MASK ia_mask,
                       DAT_IA_ATTR *ia_attr, DAT_PROVIDER_ATTR_MASK pr_mask, DAT_PROVIDER_ATTR *pr_attr)
{
    struct sd_ia *ia;
    DAT_RETURN rc = sd_ia_get(ia_handle, &ia);
    if (rc != DAT_SUCCESS)
        return rc;
    if ((ia_mask & ~(DAT_IA_ATTR_MASK)DAT_IA_FIELD_ALL) != 0)
        rc = SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    else if ((pr_mask & ~(DAT_PROVIDER_ATTR_MASK)DAT_PROVIDER_FIELD_ALL) != 0)
        rc = SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG5);
    if (rc == DAT_SUCCESS) {
        /* NULL out-pointers mean "not wanted" (libdat2 queries with NULLs). */
        if (async_evd_handle != NULL) {
            if (ia->async_evd != NULL && sd_handle_alive(&ia->async_evd->h))
                *async_evd_handle = (DAT_EVD_HANDLE)ia->async_evd;
            else if (ia->async_exists)
                *async_evd_handle = DAT_EVD_OUT_OF_SCOPE;
            else
                *async_evd_handle = DAT_HANDLE_NULL;
        }
        if (ia_attr != NULL)
            fill_ia_attr(ia, ia_attr);
        if (pr_attr != NULL)
            fill_provider_attr(ia, pr_attr);
    }
    sd_handle_put(&ia->h);
    return rc;
}
