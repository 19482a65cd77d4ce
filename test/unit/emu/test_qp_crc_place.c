/* emu/qp with MPA CRC32c on: where the CRC is computed and when bytes are
 * placed (docs/emu-datapath.md, Transmit and Receive with CRC).
 *
 * - Sends and Writes are summed in the consumer's memory and written from
 *   it (no staging copy): a peer that checks every CRC accepts them and
 *   places exactly the bytes sent, over several FPDUs, several SGEs, and
 *   writes the socket only took in part (a receiver that stopped reading).
 * - Read Responses are still staged (the responder's region may change
 *   under them): the stat counters say which path each byte took.
 * - A Send or Read Response is placed as it arrives and checked after
 *   (cut-through); a bad CRC still terminates the connection (Terminate
 *   LLP/MPA 0x02) and the WR never completes successfully.
 * - An RDMA Write is checked before a byte reaches its region (verified,
 *   the default): a bad CRC leaves the region untouched. With
 *   SOFTDAT_CRC_PLACEMENT=cut-through its bytes may land first.
 *
 * Each test runs in its own process (Check's fork mode): SOFTDAT_FPDU_MAX
 * (read once per process) and the fault counts start fresh. */
#include "emu/ddp.h"
#include "emu/fault.h"
#include "emu/mpa.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "test/lib/qp_pair.h"

static const struct qpcfg cfg = {.sq = 128, .rq = 128, .sge = 4, .ird = 8, .ord = 8};

/* Mode _i of the loop tests: FPDU size (small: many FPDUs per message,
 * none read in place; default: payloads read in place) x Write placement. */
static void mode_up(int i)
{
    if (i & 1)
        setenv("SOFTDAT_FPDU_MAX", "1000", 1);
    if (i & 2)
        setenv("SOFTDAT_CRC_PLACEMENT", "cut-through", 1);
    qp_pair_up_cfg(&cfg, &cfg, EMU_CRC_ON);
    struct emu_conn_info ia;
    ck_assert_int_eq(emu_conn_get_info(A.c, &ia), 0);
    ck_assert(ia.crc);
}

static void mode_down(void)
{
    qp_pair_down();
    unsetenv("SOFTDAT_FPDU_MAX");
    unsetenv("SOFTDAT_CRC_PLACEMENT");
    emu_fault_configure(NULL);
}

/* The end of every test: the region (if any) and buffers freed, the pair
 * down. */
static void finish(struct emu_mr *mr, void *p1, void *p2, void *p3)
{
    if (mr)
        emu_mem_mr_free(mr, 1000);
    free(p1);
    free(p2);
    free(p3);
    mode_down();
}

/* buf[0, len) as n SGEs of uneven sizes (n <= 4). */
static uint32_t split(struct emu_sge *sg, uint8_t *buf, uint32_t len, uint32_t n)
{
    static const uint32_t cut[4] = {3, 7, 5, 11}; /* shares of len, in 26ths */
    uint32_t used = 0, k = 0;
    for (uint32_t i = 0; i < n && used < len; i++) {
        uint32_t part = i + 1 == n ? len - used : (uint32_t)((uint64_t)len * cut[i] / 26);
        if (part == 0)
            continue;
        sg[k++] = (struct emu_sge){buf + used, part};
        used += part;
    }
    return k;
}

static void post_recv_split(struct qp_side *s, uint64_t cookie, uint8_t *buf, uint32_t len)
{
    struct emu_sge sg[4];
    uint32_t n = split(sg, buf, len, 3);
    ck_assert_int_eq(emu_qp_post_recv(s->qp, cookie, n, sg), 0);
}

static int post_split(struct qp_side *s, enum emu_wr_op op, uint64_t cookie, uint8_t *buf, uint32_t len, uint32_t stag,
                      uint64_t to)
{
    struct emu_sge sg[4];
    uint32_t n = split(sg, buf, len, 4);
    struct emu_wr wr = {.cookie = cookie, .op = op, .nsge = n, .sge = sg, .remote_stag = stag, .remote_to = to};
    return emu_qp_post_send(s->qp, &wr);
}

static struct emu_qp_stats stats(struct qp_side *s)
{
    struct emu_qp_stats st;
    emu_qp_get_stats(s->qp, &st);
    return st;
}

/* The side's connection broke on an MPA CRC error it detected itself. */
static void assert_crc_terminate(struct qp_side *s)
{
    ck_assert(QP_WAIT_FOR(s, s->terminal != 0 && s->fatal));
    qp_lock(s);
    struct emu_qp_fatal f = s->f;
    qp_unlock(s);
    ck_assert(!f.remote);
    ck_assert(f.have_term);
    ck_assert_uint_eq(f.term.layer, EMU_TERM_LLP);
    ck_assert_uint_eq(f.term.etype, EMU_TERM_LLP_MPA);
    ck_assert_uint_eq(f.term.ecode, EMU_MPA_LLP_CRC);
}

/* ---------------------------------------------------------------- good frames */

static const uint32_t sizes[] = {1, 999, 1000, 3001, 65536, 200000};
#define NSIZES (sizeof sizes / sizeof sizes[0])
#define REGION (256u * 1024u)

/* Sends and Writes of several sizes and SGEs: every byte placed as sent,
 * every payload byte summed in place, none staged; Send payloads placed
 * cut-through, Write payloads only in cut-through mode. */
START_TEST(t_send_write_in_place)
{
    mode_up(_i);
    uint8_t *src = malloc(REGION), *dst = malloc(REGION), *region = calloc(1, REGION);
    struct emu_mr *mr;
    uint32_t stag =
        qp_reg(&B, region, REGION, B.pz, EMU_ACC_LOCAL_WRITE | EMU_ACC_REMOTE_WRITE, &mr);
    uint64_t sent = 0, written = 0;
    for (unsigned i = 0; i < NSIZES; i++) {
        uint32_t len = sizes[i];
        qp_fill(src, len, 100 + i);
        memset(dst, 0, REGION);
        post_recv_split(&B, i, dst, len);
        ck_assert_int_eq(post_split(&A, EMU_WR_SEND, i, src, len, 0, 0), 0);
        ck_assert(QP_WAIT_LIVE(&B, B.nr == (int)(2 * i + 1)));
        ck_assert_int_eq(B.rcq[2 * i].status, EMU_WC_SUCCESS);
        ck_assert_uint_eq(B.rcq[2 * i].byte_len, len);
        ck_assert_int_eq(memcmp(dst, src, len), 0);
        sent += len;

        /* The Write, then a Send behind it: once that Send's receive
         * completed, the Write was placed (one stream, in order). */
        qp_fill(src, len, 200 + i);
        ck_assert_int_eq(
            post_split(&A, EMU_WR_WRITE, 100 + i, src, len, stag, (uintptr_t)region), 0);
        ck_assert_int_eq(emu_qp_post_recv(B.qp, 1000 + i, 0, NULL), 0);
        ck_assert_int_eq(qp_post_send(&A, 1000 + i, NULL, 0, 0), 0);
        ck_assert(QP_WAIT_LIVE(&B, B.nr == (int)(2 * i + 2)));
        ck_assert_int_eq(B.rcq[2 * i + 1].status, EMU_WC_SUCCESS);
        ck_assert_int_eq(memcmp(region, src, len), 0);
        written += len;
    }
    ck_assert(QP_WAIT_LIVE(&A, A.ns == (int)(3 * NSIZES)));
    for (unsigned i = 0; i < 3 * NSIZES; i++)
        ck_assert_int_eq(A.scq[i].status, EMU_WC_SUCCESS);
    struct emu_qp_stats sa = stats(&A), sb = stats(&B);
    ck_assert_uint_eq(sa.tx_crc_in_place, sent + written);
    ck_assert_uint_eq(sa.tx_crc_staged, 0);
    ck_assert_uint_eq(sb.rx_crc_cut_through, (_i & 2) ? sent + written : sent);
    if (_i & 1)
        ck_assert_uint_ge(sa.tx_fpdus, (sent + written) / 1000);
    ck_assert(!A.fatal && !B.fatal);
    finish(mr, src, dst, region);
}
END_TEST

/* A receiver that does not read (its engine stalled) while 32 MiB of Sends
 * and Writes are posted: the socket takes part of a batch, the rest is
 * written later from where it stopped (partial writev, EAGAIN), from the
 * consumer's memory, with CRCs computed when the FPDUs were cut. */
#define BIG (1u << 20)
#define NBIG 16
START_TEST(t_resume_after_partial_write)
{
    mode_up(_i);
    uint8_t *src = malloc((size_t)NBIG * BIG), *dst = calloc(NBIG, BIG);
    uint8_t *region = calloc(NBIG, BIG);
    struct emu_mr *mr;
    uint32_t stag = qp_reg(&B, region, (uint64_t)NBIG * BIG, B.pz, EMU_ACC_LOCAL_WRITE | EMU_ACC_REMOTE_WRITE, &mr);
    qp_fill(src, (size_t)NBIG * BIG, 7);
    for (int i = 0; i < NBIG; i++)
        post_recv_split(&B, (uint64_t)i, dst + (size_t)i * BIG, BIG);
    qp_stall(&B);
    for (int i = 0; i < NBIG; i++) {
        uint8_t *p = src + (size_t)i * BIG;
        ck_assert_int_eq(
            post_split(&A, EMU_WR_WRITE, 100u + (uint64_t)i, p, BIG, stag, (uintptr_t)region + (size_t)i * BIG), 0);
        ck_assert_int_eq(post_split(&A, EMU_WR_SEND, (uint64_t)i, p, BIG, 0, 0), 0);
    }
    /* 32 MiB cannot all fit the two sockets' buffers: some of it waits. */
    struct emu_qp_stats sa = stats(&A);
    ck_assert_uint_gt(sa.send_outstanding, 0);
    qp_unstall();
    ck_assert(QP_WAIT_LIVE(&B, B.nr == NBIG));
    ck_assert(QP_WAIT_LIVE(&A, A.ns == 2 * NBIG));
    for (int i = 0; i < NBIG; i++) {
        ck_assert_int_eq(B.rcq[i].status, EMU_WC_SUCCESS);
        ck_assert_uint_eq(B.rcq[i].byte_len, BIG);
    }
    for (int i = 0; i < 2 * NBIG; i++)
        ck_assert_int_eq(A.scq[i].status, EMU_WC_SUCCESS);
    ck_assert_int_eq(memcmp(dst, src, (size_t)NBIG * BIG), 0);
    /* Each Write went before a Send: all placed once the last Send's
     * receive completed (one stream, in order). */
    ck_assert_int_eq(memcmp(region, src, (size_t)NBIG * BIG), 0);
    sa = stats(&A);
    ck_assert_uint_eq(sa.tx_crc_in_place, 2ull * NBIG * BIG);
    ck_assert_uint_eq(sa.tx_crc_staged, 0);
    ck_assert(!A.fatal && !B.fatal);
    finish(mr, src, dst, region);
}
END_TEST

/* Read Responses: staged at the responder (its region may change under
 * them), placed cut-through at the requester into the Read's sink. */
START_TEST(t_read_responses_staged)
{
    mode_up(_i);
    enum { LEN = 300001 };
    uint8_t *region = malloc(LEN), *sink = calloc(1, LEN);
    qp_fill(region, LEN, 5);
    struct emu_mr *mr;
    uint32_t stag = qp_reg(&B, region, LEN, B.pz, EMU_ACC_LOCAL_READ | EMU_ACC_REMOTE_READ, &mr);
    ck_assert_int_eq(post_split(&A, EMU_WR_READ, 1, sink, LEN, stag, (uintptr_t)region), 0);
    ck_assert(QP_WAIT_LIVE(&A, A.ns == 1));
    ck_assert_int_eq(A.scq[0].status, EMU_WC_SUCCESS);
    ck_assert_int_eq(memcmp(sink, region, LEN), 0);
    struct emu_qp_stats sa = stats(&A), sb = stats(&B);
    ck_assert_uint_eq(sb.tx_crc_staged, LEN);
    ck_assert_uint_eq(sb.tx_crc_in_place, 0);
    ck_assert_uint_eq(sa.rx_crc_cut_through, LEN);
    finish(mr, region, sink, NULL);
}
END_TEST

/* A receive whose two SGEs are the same memory (legal; what lands there is
 * the later bytes): with CRC on, such iovecs are not read in place, where
 * the second would overwrite the first before the CRC read it back and a
 * false CRC error would break the connection. A large Send first, so that
 * the receiver reads the next payload in place (rx.small_run). */
START_TEST(t_overlapping_receive_sges)
{
    mode_up(0);
    enum { HALF = 20000 };
    uint8_t *src = malloc(2 * HALF), *buf = calloc(1, 2 * HALF);
    qp_fill(src, 2 * HALF, 21);
    post_recv_split(&B, 1, buf, 2 * HALF);
    ck_assert_int_eq(post_split(&A, EMU_WR_SEND, 1, src, 2 * HALF, 0, 0), 0);
    ck_assert(QP_WAIT_LIVE(&B, B.nr == 1));
    struct emu_sge sg[2] = {{buf, HALF}, {buf, HALF}};
    ck_assert_int_eq(emu_qp_post_recv(B.qp, 2, 2, sg), 0);
    ck_assert_int_eq(post_split(&A, EMU_WR_SEND, 2, src, 2 * HALF, 0, 0), 0);
    ck_assert(QP_WAIT_LIVE(&B, B.nr == 2));
    ck_assert_int_eq(B.rcq[1].status, EMU_WC_SUCCESS);
    ck_assert_uint_eq(B.rcq[1].byte_len, 2 * HALF);
    ck_assert_int_eq(memcmp(buf, src + HALF, HALF), 0);
    ck_assert(!A.fatal && !B.fatal);
    finish(NULL, src, buf, NULL);
}
END_TEST

/* ---------------------------------------------------------------- bad frames */

/* A Send whose 5th FPDU (of 10) carries a bad CRC: the first four are
 * placed cut-through, the fifth is refused with Terminate LLP/MPA CRC, and
 * the receive never completes successfully. */
START_TEST(t_bad_crc_send)
{
    mode_up(1); /* FPDUs of 1000 bytes */
    enum { LEN = 9500 };
    uint8_t *src = malloc(LEN), *dst = calloc(1, LEN);
    qp_fill(src, LEN, 9);
    post_recv_split(&B, 1, dst, LEN);
    ck_assert_int_eq(emu_fault_configure("crc=nth:5"), 0);
    ck_assert_int_eq(post_split(&A, EMU_WR_SEND, 1, src, LEN, 0, 0), 0);
    assert_crc_terminate(&B);
    ck_assert(QP_WAIT_FOR(&A, A.terminal != 0));
    ck_assert(QP_WAIT_FOR(&B, B.nr == 1));
    ck_assert_int_ne(B.rcq[0].status, EMU_WC_SUCCESS);
    struct emu_qp_stats sb = stats(&B);
    ck_assert_uint_gt(sb.rx_crc_cut_through, 0);
    ck_assert_uint_lt(sb.rx_crc_cut_through, LEN);
    finish(NULL, src, dst, NULL);
}
END_TEST

/* A Read Response with a bad CRC (the responder's first FPDU after the
 * request): the requester terminates, the Read does not succeed. */
START_TEST(t_bad_crc_read_response)
{
    mode_up(0);
    enum { LEN = 5000 };
    uint8_t *region = malloc(LEN), *sink = calloc(1, LEN);
    qp_fill(region, LEN, 3);
    struct emu_mr *mr;
    uint32_t stag = qp_reg(&B, region, LEN, B.pz, EMU_ACC_LOCAL_READ | EMU_ACC_REMOTE_READ, &mr);
    ck_assert_int_eq(emu_fault_configure("crc=nth:2"), 0); /* 1: A's Read Request */
    ck_assert_int_eq(post_split(&A, EMU_WR_READ, 1, sink, LEN, stag, (uintptr_t)region), 0);
    assert_crc_terminate(&A);
    ck_assert(QP_WAIT_FOR(&A, A.ns == 1));
    ck_assert_int_ne(A.scq[0].status, EMU_WC_SUCCESS);
    finish(mr, region, sink, NULL);
}
END_TEST

/* An RDMA Write with a bad CRC. Verified (the default): the region is
 * byte-for-byte untouched, nothing was placed before the check.
 * Cut-through (SOFTDAT_CRC_PLACEMENT): the connection breaks the same
 * way, but the payload had landed before its CRC was checked. */
static void bad_crc_write(int mode)
{
    mode_up(mode);
    enum { LEN = 40000 };
    uint8_t *src = malloc(LEN), *region = malloc(LEN), *ref = malloc(LEN);
    qp_fill(src, LEN, 13);
    memset(region, 0xEE, LEN);
    memcpy(ref, region, LEN);
    struct emu_mr *mr;
    uint32_t stag = qp_reg(&B, region, LEN, B.pz, EMU_ACC_LOCAL_WRITE | EMU_ACC_REMOTE_WRITE, &mr);
    ck_assert_int_eq(emu_fault_configure("crc=nth:1"), 0);
    ck_assert_int_eq(post_split(&A, EMU_WR_WRITE, 1, src, LEN, stag, (uintptr_t)region), 0);
    assert_crc_terminate(&B);
    ck_assert(QP_WAIT_FOR(&A, A.terminal != 0));
    struct emu_qp_stats sb = stats(&B);
    if (mode & 2) {
        ck_assert_uint_eq(sb.rx_crc_cut_through, LEN);
        ck_assert_int_eq(memcmp(region, src, LEN), 0);
    } else {
        ck_assert_uint_eq(sb.rx_crc_cut_through, 0);
        ck_assert_int_eq(memcmp(region, ref, LEN), 0);
    }
    finish(mr, src, region, ref);
}

START_TEST(t_bad_crc_write_verified)
{
    bad_crc_write(0);
}
END_TEST

START_TEST(t_bad_crc_write_cut_through)
{
    bad_crc_write(2);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("emu_qp_crc_place");
    TCase *tc = tcase_create("place");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, t_send_write_in_place, 0, 4);
    tcase_add_loop_test(tc, t_resume_after_partial_write, 0, 4);
    tcase_add_loop_test(tc, t_read_responses_staged, 0, 2);
    tcase_add_test(tc, t_overlapping_receive_sges);
    tcase_add_test(tc, t_bad_crc_send);
    tcase_add_test(tc, t_bad_crc_read_response);
    tcase_add_test(tc, t_bad_crc_write_verified);
    tcase_add_test(tc, t_bad_crc_write_cut_through);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
