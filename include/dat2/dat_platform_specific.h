/*
 * softdat — DAT 2.0 public headers: platform layer.
 *
 * The DAT specification leaves the scalar types, the socket address types
 * and the export decorations to each platform. softdat targets LP64 Linux
 * only and follows the sizes of the OFA DAPL 2.1.10 build on x86-64, so that
 * binaries built against either header set interoperate.
 */
#ifndef SOFTDAT_DAT2_PLATFORM_SPECIFIC_H
#define SOFTDAT_DAT2_PLATFORM_SPECIFIC_H

#if !defined(__linux__)
#error "softdat <dat2/dat_platform_specific.h>: only Linux is supported"
#endif

#include <sys/types.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>
/* Complete struct sockaddr_in6, needed by DAT_IB_ADDR_HANDLE. */
#include <netinet/in.h>

/* Buffers handed to the provider are best aligned to this many bytes. */
#ifndef DAT_OPTIMAL_ALIGNMENT
#define DAT_OPTIMAL_ALIGNMENT 256
#endif

/* Scalar types of the interface. */
typedef uint32_t            DAT_UINT32;
typedef uint64_t            DAT_UINT64;
typedef unsigned long long  DAT_UVERYLONG;
typedef void               *DAT_PVOID;
typedef int                 DAT_COUNT;
typedef DAT_UINT64          DAT_PADDR;

/* Socket triple identifying a consumer-supplied communication endpoint. */
typedef struct dat_comm {
    int domain;
    int type;
    int protocol;
} DAT_COMM;

/* Operating-system file descriptor used by FD-backed CNOs. */
typedef int                 DAT_FD;

/* Native socket address types. */
typedef struct sockaddr     DAT_SOCK_ADDR;
typedef struct sockaddr_in6 DAT_SOCK_ADDR6;

#define DAT_AF_INET   AF_INET
#define DAT_AF_INET6  AF_INET6

/* Conversions used by registries that hand out numeric IA handles. */
#define DAT_IA_HANDLE_TO_UL(a)  (unsigned long)(a)
#define DAT_UL_TO_IA_HANDLE(a)  (DAT_IA_HANDLE)(a)

/* No calling-convention or import decoration is needed on Linux. */
#define DAT_API
#define DAT_EXPORT extern

/* Parameter direction annotations used in prototypes; they expand to nothing. */
#define IN
#define OUT
#define INOUT

#endif /* SOFTDAT_DAT2_PLATFORM_SPECIFIC_H */
