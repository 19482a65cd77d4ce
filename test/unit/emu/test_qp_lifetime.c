/* emu/qp and the connection it is linked to: the owner frees an
 * established connection (dat_ep_free while connected) while the QP may
 * still be in a polling consumer's set. The connection then lingers and is
 * released by its engine on the engine's own time; nothing a consumer's
 * later pass does with the QP may reach it (emu_qp_unlink).
 *
 * The race this pins down: a spinner's lease pass kicked the engine
 * through the QP's link to a connection already released (a segfault in
 * event_active, seen once in ten runs of test_progress's
 * free_and_disconnect_while_spinning). Here the release is made certain
 * (the engine that owned the connection is destroyed) and the pass is run
 * after it. */
#include "emu/conn.h"
#include "emu/engine.h"
#include "emu/qp.h"

#include <check.h>
#include <errno.h>
#include <stdint.h>

#include "test/lib/qp_pair.h"

/* Polling passes QP_POLL_GAP_US (5 µs) apart or closer for longer than
 * QP_POLL_HOT_US (50 µs) earn a lease, and the first pass of a lease
 * kicks the engine (emu_qp_poll_lease). Clock values are the caller's. */
static void poll_until_leased(struct emu_qp *qp, uint64_t t0)
{
    for (uint64_t t = t0; t <= t0 + 200; t += 4) {
        emu_qp_poll_lease(qp, 1000000, t);
        emu_qp_progress(qp);
        emu_qp_poll_pass_end_idle(t);
    }
}

START_TEST(t_owner_frees_established_connection_under_poller)
{
    qp_pair_up();
    uint8_t src[64], dst[64];
    qp_fill(src, sizeof src, 9);
    ck_assert_int_eq(emu_qp_post_recv(B.qp, 1, 1, &(struct emu_sge){dst, sizeof dst}), 0);
    ck_assert_int_eq(qp_post_send(&A, 1, src, sizeof src, 0), 0);
    ck_assert(QP_WAIT_FOR(&B, B.nr == 1));
    ck_assert_int_eq(memcmp(src, dst, sizeof src), 0);

    /* A's owner lets go of the live connection, as ep_teardown does. */
    emu_qp_unlink(A.qp);
    emu_conn_free(A.c);
    A.c = NULL;
    /* The peer sees the connection end. */
    ck_assert(QP_WAIT_FOR(&B, B.terminal == 1));
    /* Whatever still lingered is released now, with its engine. */
    ck_assert_int_eq(emu_engine_destroy(A.e), 0);
    A.e = NULL;

    /* A consumer's passes over A's QP: leases (engine kicks), receive
     * progress, transmit; none reaches the released connection. */
    poll_until_leased(A.qp, emu_now_us());
    ck_assert_int_eq(emu_qp_disconnect(A.qp, false), -ENOTCONN);
    ck_assert_int_eq(emu_qp_disconnect(A.qp, true), -ENOTCONN);
    qp_pair_down();
}
END_TEST

/* Unlinked before the connection is freed, the QP flushes and is reset
 * for a new connection like one whose connection ended on its own. */
START_TEST(t_unlinked_qp_flushes_and_resets)
{
    qp_pair_up();
    uint8_t buf[64];
    ck_assert_int_eq(emu_qp_post_recv(A.qp, 7, 1, &(struct emu_sge){buf, sizeof buf}), 0);
    emu_qp_unlink(A.qp);
    emu_conn_free(A.c);
    A.c = NULL;
    emu_qp_flush(A.qp);
    ck_assert(QP_WAIT_FOR(&A, A.nr == 1));
    ck_assert_int_eq(A.rcq[0].status, EMU_WC_FLUSHED);
    ck_assert_uint_eq(A.rcq[0].cookie, 7);
    ck_assert_int_eq(emu_qp_reset(A.qp), 0);
    ck_assert(QP_WAIT_FOR(&B, B.terminal == 1));
    qp_pair_down();
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("emu_qp_lifetime");
    TCase *tc = tcase_create("lifetime");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, t_owner_frees_established_connection_under_poller);
    tcase_add_test(tc, t_unlinked_qp_flushes_and_resets);
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
