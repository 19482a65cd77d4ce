/* softdat: every limit the provider reports in dat_ia_query /
 * DAT_PROVIDER_ATTR, in one place. Code that creates objects or posts work
 * enforces exactly these values (architecture §8), so change a number here
 * and both the report and the check follow.
 *
 * Limits are per open IA unless noted. No DAT header is needed here: plain
 * integer constants, usable from emu/ as well. */
#ifndef SOFTDAT_PROVIDER_LIMITS_H
#define SOFTDAT_PROVIDER_LIMITS_H

/* ---- provider instances */
#define SD_MAX_PROVIDER_RECORDS 16 /* dat.conf records served by one library load */
#define SD_IA_PARAMS_MAX 256       /* ia_params string kept per record */

/* ---- objects per IA (create returns DAT_INSUFFICIENT_RESOURCES beyond) */
#define SD_MAX_EPS 16384  /* 10,000 connected EPs per process (test/e2e/scale.sh) with room */
#define SD_MAX_EVDS 32768 /* two per EP plus IA-wide ones */
#define SD_MAX_PZS 4096
#define SD_MAX_LMRS 65536 /* STag index space is 24 bits; this bounds table memory */
#define SD_MAX_RMRS 65536
#define SD_MAX_SRQS 1024
#define SD_MAX_CNOS 4096
#define SD_MAX_SPS 4096   /* PSP + RSP + CSP */
#define SD_MAX_CRS 4096   /* pending connection requests */

/* ---- queues */
#define SD_MAX_DTO_PER_EP 4096      /* per direction: send+read+write+bind, and recv */
#define SD_MAX_EVD_QLEN 262144      /* events; rings are sized by the request, not this */
#define SD_ASYNC_EVD_MIN_QLEN 64    /* provider-created async EVD is at least this long */
#define SD_MAX_EP_PER_SRQ SD_MAX_EPS
#define SD_MAX_RECV_PER_SRQ 65536

/* ---- scatter/gather */
#define SD_MAX_IOV_PER_DTO 16       /* send/recv local segments */
#define SD_MAX_IOV_PER_RDMA_READ 16 /* local sink segments of a Read */
#define SD_MAX_IOV_PER_RDMA_WRITE 16

/* ---- sizes (DAT_SEG_LENGTH is 32 bits) */
#define SD_MAX_MESSAGE_SIZE (1u << 30) /* 1 GiB Send/Recv */
#define SD_MAX_RDMA_SIZE (1u << 30)    /* 1 GiB per RDMA Read/Write */
#define SD_MAX_LMR_BLOCK_SIZE 0xFFFFFFFFu /* DAT_SEG_LENGTH maximum */
#define SD_MAX_LMR_VIRTUAL_ADDRESS 0xFFFFFFFFFFFFFFFFull /* any 64-bit VA (bounds are overflow-checked) */
#define SD_MAX_RMR_TARGET_ADDRESS 0xFFFFFFFFFFFFFFFFull

/* ---- RDMA Read credits (MPA v2 IRD/ORD) */
#define SD_MAX_RDMA_READ_PER_EP_IN 16  /* IRD: inbound Read Requests queued per EP */
#define SD_MAX_RDMA_READ_PER_EP_OUT 16 /* ORD: outstanding Reads per EP */
/* Guaranteed per EP (DAT_FALSE in the attribute: spec's inverted sense), so the
 * RNIC-wide totals are simply per-EP times EPs. */
#define SD_MAX_RDMA_READ_IN (SD_MAX_RDMA_READ_PER_EP_IN * SD_MAX_EPS)
#define SD_MAX_RDMA_READ_OUT (SD_MAX_RDMA_READ_PER_EP_OUT * SD_MAX_EPS)

/* ---- private data (connect/accept/reject)
 * MPA allows 512 bytes of private data, but Linux siw and Chelsio reject more
 * than 256; a v2 frame spends 4 of them on the IRD/ORD block and we reserve 8
 * for the softdat capability marker (wire reference §5.9). 244 >= 64 (spec). */
#define SD_MPA_PD_INTEROP_LIMIT 256
#define SD_MPA_IRD_ORD_BYTES 4
#define SD_MPA_CAP_MARKER_BYTES 8
#define SD_MAX_PRIVATE_DATA (SD_MPA_PD_INTEROP_LIMIT - SD_MPA_IRD_ORD_BYTES - SD_MPA_CAP_MARKER_BYTES)

/* ---- transport */
/* IB-style MTU advertised as DAT_IB_TRANSPORT_MTU: the UD extension runs
 * over UDP, whose datagrams carry at most 65507 bytes; 32 KiB leaves room for
 * our headers. RC messages are not limited by it (max_message_size). */
#define SD_TRANSPORT_MTU 32768
#define SD_OPTIMAL_ALIGNMENT 64 /* cache line; divides DAT_OPTIMAL_ALIGNMENT (256) */

/* IB extension version reported in DAT_IA_ATTR.extension_version (2.0.9). */
#define SD_IB_EXTENSION_VERSION 209

#endif
