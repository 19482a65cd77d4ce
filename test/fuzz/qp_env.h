/* The receive-path fuzz target's world (fuzz_qp_rx.c), shared with the seed
 * generator (mkseeds.c) so that seeds name the STags the target registers.
 *
 * One arena holds every byte the QP may touch, each area between guard
 * bands:
 *   R0  write-only sink (REMOTE_WRITE)                        256 B
 *   R1  read/write/atomic target, large enough for the direct
 *       (in-place) receive path of payloads >= 16 KiB          24 KiB
 *   R2  read-only source (REMOTE_READ): must never change      128 B
 *   R3  write target a peer may invalidate (REMOTE_INVALIDATE)  64 B
 *   RECV0..2  posted receive buffers (plain pointers)        3 x 256 B
 *   SINK  the local sink of an RDMA Read the QP has out         256 B
 * All regions are zero-based (TO = offset). STags are deterministic: the
 * memory table starts at index QPENV_FIRST_INDEX and its random initial
 * keys come from getrandom(), which the programs linking this file define
 * to return a constant (a link-time seam, no production change). */
#ifndef SOFTDAT_TEST_FUZZ_QP_ENV_H
#define SOFTDAT_TEST_FUZZ_QP_ENV_H

#include "emu/mem.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>

#define QPENV_GUARD 64u
#define QPENV_FIRST_INDEX 0x100u
#define QPENV_NR 4
#define QPENV_NRECV 3
#define QPENV_RECV_LEN 256u
#define QPENV_SINK_LEN 256u
#define QPENV_FILL 0xA5u

static const uint32_t qpenv_len[QPENV_NR] = {256u, 24u * 1024u, 128u, 64u};
static const uint32_t qpenv_acc[QPENV_NR] = {
    EMU_ACC_LOCAL_WRITE | EMU_ACC_REMOTE_WRITE,
    EMU_ACC_LOCAL_READ | EMU_ACC_LOCAL_WRITE | EMU_ACC_REMOTE_READ | EMU_ACC_REMOTE_WRITE |
        EMU_ACC_REMOTE_ATOMIC,
    EMU_ACC_LOCAL_READ | EMU_ACC_REMOTE_READ,
    EMU_ACC_LOCAL_READ | EMU_ACC_LOCAL_WRITE | EMU_ACC_REMOTE_WRITE |
        EMU_ACC_REMOTE_INVALIDATE,
};

/* Area i of the arena: regions 0..3, receives 4..6, sink 7. */
#define QPENV_AREAS (QPENV_NR + QPENV_NRECV + 1)
static inline uint32_t qpenv_area_len(unsigned i)
{
    return i < QPENV_NR ? qpenv_len[i] : i < QPENV_NR + QPENV_NRECV ? QPENV_RECV_LEN
                                                                  : QPENV_SINK_LEN;
}
static inline size_t qpenv_area_off(unsigned i)
{
    size_t off = QPENV_GUARD;
    for (unsigned k = 0; k < i; k++)
        off += qpenv_area_len(k) + QPENV_GUARD;
    return off;
}
#define QPENV_ARENA_LEN (qpenv_area_off(QPENV_AREAS))

struct qpenv {
    uint8_t *arena; /* 64-byte aligned, QPENV_ARENA_LEN bytes */
    struct emu_mem_table *mt;
    struct emu_pz *pz;
    struct emu_mr *mr[QPENV_NR];
    uint32_t stag[QPENV_NR];
};

/* The first RDMA Read the QP sends carries this sink STag once its
 * read_seq is reset to 0 (emu/qp_tx.c: next_read_tag). */
#define QPENV_READ_SINK_STAG ((1u << 8) | 0xA5u)

static inline int qpenv_setup(struct qpenv *e)
{
    struct emu_mem_limits lim = {.max_pzs = 2, .max_regions = 8, .max_windows = 2,
                                 .first_index = QPENV_FIRST_INDEX};
    if (emu_mem_table_create(&lim, &e->mt) != EMU_MEM_OK)
        return -1;
    if (emu_mem_pz_create(e->mt, &e->pz) != EMU_MEM_OK)
        return -1;
    for (unsigned i = 0; i < QPENV_NR; i++) {
        struct emu_mr_attr a = {.addr = e->arena + qpenv_area_off(i), .length = qpenv_len[i],
                                .pz = e->pz, .access = qpenv_acc[i], .va_type = EMU_VA_ZB};
        if (emu_mem_mr_register(e->mt, &a, &e->mr[i], &e->stag[i]) != EMU_MEM_OK)
            return -1;
    }
    return 0;
}

/* 0, or -1 if a region was still referenced (a leaked emu_mem_ref). */
static inline int qpenv_teardown(struct qpenv *e)
{
    int rc = 0;
    for (unsigned i = 0; i < QPENV_NR; i++)
        if (emu_mem_mr_free(e->mr[i], 0) != EMU_MEM_OK)
            rc = -1;
    if (emu_mem_pz_free(e->pz) != EMU_MEM_OK)
        rc = -1;
    emu_mem_table_destroy(e->mt);
    return rc;
}

/* Byte k of area i before each run: distinct per area, so a misplaced
 * copy from one into another is visible too. */
static inline uint8_t qpenv_pattern(unsigned i, size_t k)
{
    return (uint8_t)(0x11u * (i + 1) + k * 7u);
}

#endif
