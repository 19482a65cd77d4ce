/* Data transfer logic without a network: the work-request ring and its
 * SUPPRESS slot accounting, deferred flushes, the completion-flag rules
 * (flags allowed per post, decision tables of spec 6.8.1) and the status
 * mapping. */
#include <check.h>
#include <pthread.h>
#include <stdlib.h>

#include "lib/provider/ep_dto.h"

#define SUP DAT_COMPLETION_SUPPRESS_FLAG
#define SOL DAT_COMPLETION_SOLICITED_WAIT_FLAG
#define UNS DAT_COMPLETION_UNSIGNALLED_FLAG
#define FEN DAT_COMPLETION_BARRIER_FENCE_FLAG
#define THR DAT_COMPLETION_EVD_THRESHOLD_FLAG
#define DEF DAT_COMPLETION_DEFAULT_FLAG

static DAT_DTO_COOKIE ck(uint64_t v)
{
    DAT_DTO_COOKIE c;
    c.as_64 = v;
    return c;
}

START_TEST(ring_get_peek_complete)
{
    struct sd_dto_ring r;
    ck_assert_int_eq(sd_dto_ring_init(&r, 4), 0);
    uint32_t a = sd_dto_ring_get(&r, SD_DTO_SEND, SUP, ck(11), 100);
    uint32_t b = sd_dto_ring_get(&r, SD_DTO_RDMA_WRITE, 0, ck(12), 200);
    ck_assert_uint_ne(a, b);
    struct sd_dto_slot s;
    ck_assert(sd_dto_ring_peek(&r, a, &s));
    ck_assert_uint_eq(s.cookie.as_64, 11);
    ck_assert_uint_eq(s.len, 100);
    ck_assert_uint_eq(s.kind, SD_DTO_SEND);
    ck_assert_uint_eq(s.flags, SUP);
    ck_assert(sd_dto_ring_peek(&r, b, &s));
    ck_assert_uint_eq(s.cookie.as_64, 12);
    ck_assert_uint_eq(s.kind, SD_DTO_RDMA_WRITE);
    /* Unknown / free / out-of-range cookies are refused. */
    ck_assert(!sd_dto_ring_peek(&r, 4, &s));
    ck_assert(!sd_dto_ring_peek(&r, SD_DTO_NONE, &s));
    uint32_t free_idx = 0;
    while (free_idx == a || free_idx == b)
        free_idx++;
    ck_assert(!sd_dto_ring_peek(&r, free_idx, &s));
    ck_assert_uint_eq(sd_dto_ring_outstanding(&r), 2);
    sd_dto_ring_complete(&r, b, true);
    ck_assert_uint_eq(sd_dto_ring_outstanding(&r), 1);
    ck_assert(!sd_dto_ring_peek(&r, b, &s));
    /* A second completion of the same cookie is ignored. */
    sd_dto_ring_complete(&r, b, true);
    ck_assert_uint_eq(sd_dto_ring_outstanding(&r), 1);
    sd_dto_ring_cancel(&r, a);
    ck_assert_uint_eq(sd_dto_ring_outstanding(&r), 0);
    sd_dto_ring_fini(&r);
}
END_TEST

START_TEST(ring_full_and_reuse)
{
    struct sd_dto_ring r;
    ck_assert_int_eq(sd_dto_ring_init(&r, 3), 0);
    uint32_t i[3];
    for (int k = 0; k < 3; k++)
        ck_assert_uint_ne(i[k] = sd_dto_ring_get(&r, SD_DTO_RECV, 0, ck(k), 0), SD_DTO_NONE);
    ck_assert_uint_eq(sd_dto_ring_get(&r, SD_DTO_RECV, 0, ck(9), 0), SD_DTO_NONE);
    sd_dto_ring_complete(&r, i[1], true);
    uint32_t again = sd_dto_ring_get(&r, SD_DTO_RECV, 0, ck(10), 0);
    ck_assert_uint_eq(again, i[1]); /* the freed slot */
    ck_assert_uint_eq(sd_dto_ring_get(&r, SD_DTO_RECV, 0, ck(11), 0), SD_DTO_NONE);
    sd_dto_ring_clear(&r);
    ck_assert_uint_eq(sd_dto_ring_outstanding(&r), 0);
    for (int k = 0; k < 3; k++)
        ck_assert_uint_ne(sd_dto_ring_get(&r, SD_DTO_RECV, 0, ck(k), 0), SD_DTO_NONE);
    sd_dto_ring_fini(&r);
}
END_TEST

/* Spec L8452: a suppressed success stays outstanding until a completion
 * of a later request on the same queue is generated. */
START_TEST(ring_suppressed_slots_held)
{
    struct sd_dto_ring r;
    ck_assert_int_eq(sd_dto_ring_init(&r, 4), 0);
    uint32_t s1 = sd_dto_ring_get(&r, SD_DTO_RDMA_WRITE, SUP, ck(1), 8);
    uint32_t s2 = sd_dto_ring_get(&r, SD_DTO_RDMA_WRITE, SUP, ck(2), 8);
    uint32_t s3 = sd_dto_ring_get(&r, SD_DTO_RDMA_WRITE, SUP, ck(3), 8);
    uint32_t s4 = sd_dto_ring_get(&r, SD_DTO_SEND, 0, ck(4), 8);
    ck_assert_uint_eq(sd_dto_ring_get(&r, SD_DTO_SEND, 0, ck(5), 8), SD_DTO_NONE);
    sd_dto_ring_complete(&r, s1, false);
    sd_dto_ring_complete(&r, s2, false);
    sd_dto_ring_complete(&r, s3, false);
    /* Completed, no events: the queue is still full. */
    ck_assert_uint_eq(sd_dto_ring_outstanding(&r), 4);
    ck_assert_uint_eq(sd_dto_ring_held(&r), 3);
    ck_assert_uint_eq(sd_dto_ring_get(&r, SD_DTO_SEND, 0, ck(5), 8), SD_DTO_NONE);
    /* The signalled Send after them completes: all four are free. */
    sd_dto_ring_complete(&r, s4, true);
    ck_assert_uint_eq(sd_dto_ring_outstanding(&r), 0);
    ck_assert_uint_eq(sd_dto_ring_held(&r), 0);
    /* dtest's pattern: bursts of 9 suppressed + 1 signalled fit a ring of
     * 10 forever. */
    struct sd_dto_ring q;
    ck_assert_int_eq(sd_dto_ring_init(&q, 10), 0);
    for (int burst = 0; burst < 50; burst++) {
        uint32_t idx[10];
        for (int k = 0; k < 10; k++) {
            idx[k] = sd_dto_ring_get(&q, SD_DTO_RDMA_WRITE, k == 9 ? 0 : SUP, ck(k), 1);
            ck_assert_uint_ne(idx[k], SD_DTO_NONE);
        }
        for (int k = 0; k < 10; k++)
            sd_dto_ring_complete(&q, idx[k], k == 9);
        ck_assert_uint_eq(sd_dto_ring_outstanding(&q), 0);
    }
    sd_dto_ring_fini(&q);
    sd_dto_ring_fini(&r);
}
END_TEST

/* finish = peek + decide + complete under one lock: a suppressed success
 * stays held (no event), the next signalled one makes an event and
 * releases both; an error always makes one; a stale cookie changes
 * nothing. */
START_TEST(ring_finish_in_one_step)
{
    struct sd_dto_ring r;
    ck_assert_int_eq(sd_dto_ring_init(&r, 4), 0);
    uint32_t a = sd_dto_ring_get(&r, SD_DTO_SEND, SUP, ck(21), 10);
    uint32_t b = sd_dto_ring_get(&r, SD_DTO_SEND, DEF, ck(22), 20);
    uint32_t c = sd_dto_ring_get(&r, SD_DTO_SEND, SUP, ck(23), 30);
    struct sd_dto_slot s;
    enum sd_dto_notify n;
    ck_assert(sd_dto_ring_finish(&r, a, DEF, true, false, &s, &n));
    ck_assert_uint_eq(s.cookie.as_64, 21);
    ck_assert_uint_eq(s.len, 10);
    ck_assert_int_eq(n, SD_DTO_NO_EVENT);
    ck_assert_uint_eq(sd_dto_ring_held(&r), 1);
    ck_assert_uint_eq(sd_dto_ring_outstanding(&r), 3);
    ck_assert(!sd_dto_ring_finish(&r, a, DEF, true, false, &s, &n)); /* held: not outstanding */
    ck_assert(sd_dto_ring_finish(&r, b, DEF, true, false, &s, &n));
    ck_assert_uint_eq(s.cookie.as_64, 22);
    ck_assert_int_ne(n, SD_DTO_NO_EVENT);
    ck_assert_uint_eq(sd_dto_ring_held(&r), 0);
    ck_assert_uint_eq(sd_dto_ring_outstanding(&r), 1);
    ck_assert(sd_dto_ring_finish(&r, c, DEF, false, false, &s, &n)); /* a suppressed error reports */
    ck_assert_int_ne(n, SD_DTO_NO_EVENT);
    ck_assert_uint_eq(sd_dto_ring_outstanding(&r), 0);
    n = SD_DTO_EVENT_QUIET;
    s.cookie.as_64 = 99;
    ck_assert(!sd_dto_ring_finish(&r, c, DEF, true, false, &s, &n));
    ck_assert(!sd_dto_ring_finish(&r, 7, DEF, true, false, &s, &n));
    ck_assert_int_eq(n, SD_DTO_EVENT_QUIET);
    ck_assert_uint_eq(s.cookie.as_64, 99);
    sd_dto_ring_fini(&r);
}
END_TEST

START_TEST(ring_deferred_flush)
{
    struct sd_dto_ring r;
    ck_assert_int_eq(sd_dto_ring_init(&r, 8), 0);
    uint32_t a = sd_dto_ring_get(&r, SD_DTO_SEND, 0, ck(1), 0);
    uint32_t b = sd_dto_ring_get(&r, SD_DTO_SEND, 0, ck(2), 0);
    uint32_t c = sd_dto_ring_get(&r, SD_DTO_SEND, 0, ck(3), 0);
    ck_assert(sd_dto_ring_defer(&r, b));
    ck_assert(sd_dto_ring_defer(&r, a));
    ck_assert(sd_dto_ring_defer(&r, c));
    struct sd_dto_slot s;
    ck_assert(sd_dto_ring_peek(&r, b, &s)); /* still outstanding */
    /* Flush: they come back in defer (= post) order. */
    uint32_t i = sd_dto_ring_set_flushed(&r, true);
    uint32_t order[3], n = 0;
    while (i != SD_DTO_NONE && n < 3) {
        order[n++] = i;
        uint32_t next = sd_dto_ring_next(&r, i);
        sd_dto_ring_complete(&r, i, true);
        i = next;
    }
    ck_assert_uint_eq(n, 3);
    ck_assert_uint_eq(order[0], b);
    ck_assert_uint_eq(order[1], a);
    ck_assert_uint_eq(order[2], c);
    ck_assert_uint_eq(sd_dto_ring_outstanding(&r), 0);
    /* Once flushed, later posts are not deferred: completed at once. */
    uint32_t d = sd_dto_ring_get(&r, SD_DTO_SEND, 0, ck(4), 0);
    ck_assert(!sd_dto_ring_defer(&r, d));
    sd_dto_ring_complete(&r, d, true);
    /* Reset (clear) leaves flushed mode. */
    sd_dto_ring_clear(&r);
    d = sd_dto_ring_get(&r, SD_DTO_SEND, 0, ck(5), 0);
    ck_assert(sd_dto_ring_defer(&r, d));
    ck_assert_uint_eq(sd_dto_ring_set_flushed(&r, true), d);
    sd_dto_ring_fini(&r);
}
END_TEST

struct stress {
    struct sd_dto_ring *r;
    int posts;
};

static void *stress_thread(void *arg)
{
    struct stress *st = arg;
    int done = 0, spins = 0;
    while (done < st->posts && spins < 10000000) {
        uint32_t i = sd_dto_ring_get(st->r, SD_DTO_SEND, 0, ck((uint64_t)done), 1);
        if (i == SD_DTO_NONE) {
            spins++;
            continue;
        }
        struct sd_dto_slot s;
        if (!sd_dto_ring_peek(st->r, i, &s) || s.cookie.as_64 != (uint64_t)done)
            return (void *)1;
        sd_dto_ring_complete(st->r, i, true);
        done++;
    }
    return done == st->posts ? NULL : (void *)2;
}

START_TEST(ring_threads)
{
    struct sd_dto_ring r;
    ck_assert_int_eq(sd_dto_ring_init(&r, 8), 0);
    pthread_t t[4];
    struct stress st = {&r, 20000};
    for (int k = 0; k < 4; k++)
        pthread_create(&t[k], NULL, stress_thread, &st);
    for (int k = 0; k < 4; k++) {
        void *res;
        pthread_join(t[k], &res);
        ck_assert_ptr_null(res);
    }
    ck_assert_uint_eq(sd_dto_ring_outstanding(&r), 0);
    sd_dto_ring_fini(&r);
}
END_TEST

/* Tables 9-12, 16 and the "post error" rows of 6.8.1. */
START_TEST(flags_allowed)
{
    /* Default / threshold EP: no UNSIGNALLED anywhere. */
    DAT_COMPLETION_FLAGS eps[] = {DEF, THR};
    for (unsigned e = 0; e < 2; e++) {
        DAT_COMPLETION_FLAGS ep = eps[e];
        ck_assert(sd_dto_flags_ok(SD_DTO_SEND, DEF, ep));
        ck_assert(sd_dto_flags_ok(SD_DTO_SEND, SUP | SOL | FEN, ep));
        ck_assert(!sd_dto_flags_ok(SD_DTO_SEND, UNS, ep));
        ck_assert(!sd_dto_flags_ok(SD_DTO_SEND, SUP | UNS, ep));
        ck_assert(sd_dto_flags_ok(SD_DTO_RDMA_WRITE, SUP | FEN, ep));
        ck_assert(!sd_dto_flags_ok(SD_DTO_RDMA_WRITE, SOL, ep)); /* SE is a Send thing */
        ck_assert(sd_dto_flags_ok(SD_DTO_RDMA_READ, SUP | FEN, ep));
        ck_assert(!sd_dto_flags_ok(SD_DTO_RDMA_READ, UNS, ep));
        ck_assert(sd_dto_flags_ok(SD_DTO_BIND, SUP | FEN, ep));
        ck_assert(!sd_dto_flags_ok(SD_DTO_BIND, SOL, ep));
        ck_assert(sd_dto_flags_ok(SD_DTO_RECV, DEF, ep));
        ck_assert(!sd_dto_flags_ok(SD_DTO_RECV, SUP, ep));
        ck_assert(!sd_dto_flags_ok(SD_DTO_RECV, UNS, ep));
        ck_assert(!sd_dto_flags_ok(SD_DTO_RECV, SOL, ep));
        ck_assert(!sd_dto_flags_ok(SD_DTO_RECV, FEN, ep));
    }
    /* EVD_THRESHOLD and unknown bits are never post flags. */
    ck_assert(!sd_dto_flags_ok(SD_DTO_SEND, THR, DEF));
    ck_assert(!sd_dto_flags_ok(SD_DTO_SEND, 0x20, DEF));
    ck_assert(!sd_dto_flags_ok(SD_DTO_SEND, 0x100, UNS));
    /* Request side with UNSIGNALLED support. */
    ck_assert(sd_dto_flags_ok(SD_DTO_SEND, UNS, UNS));
    ck_assert(sd_dto_flags_ok(SD_DTO_SEND, SUP | UNS | SOL | FEN, UNS));
    ck_assert(sd_dto_flags_ok(SD_DTO_RDMA_WRITE, SUP | UNS, UNS));
    ck_assert(sd_dto_flags_ok(SD_DTO_BIND, UNS, UNS));
    /* Recv side with UNSIGNALLED support: UNSIGNALLED ok, SUPPRESS not. */
    ck_assert(sd_dto_flags_ok(SD_DTO_RECV, UNS, UNS));
    ck_assert(!sd_dto_flags_ok(SD_DTO_RECV, SUP, UNS));
    ck_assert(!sd_dto_flags_ok(SD_DTO_RECV, SUP | UNS, UNS));
    /* Recv side with SOLICITED_WAIT: neither SUPPRESS nor UNSIGNALLED. */
    ck_assert(sd_dto_flags_ok(SD_DTO_RECV, DEF, SOL));
    ck_assert(!sd_dto_flags_ok(SD_DTO_RECV, UNS, SOL));
    ck_assert(!sd_dto_flags_ok(SD_DTO_RECV, SUP, SOL));
    /* Extension DTOs. */
    ck_assert(sd_dto_flags_ok(SD_DTO_WRITE_IMM, SUP | SOL, DEF));
    ck_assert(sd_dto_flags_ok(SD_DTO_FETCH_ADD, SUP, DEF));
    ck_assert(!sd_dto_flags_ok(SD_DTO_CMP_SWAP, SOL, DEF));
}
END_TEST

#define NO SD_DTO_NO_EVENT
#define QUIET SD_DTO_EVENT_QUIET
#define NOTIFY SD_DTO_EVENT_NOTIFY

/* Decision tables of 6.8.1 (L8463-8500), row by row. */
START_TEST(decision_tables)
{
    enum sd_dto_kind req[] = {SD_DTO_SEND, SD_DTO_RDMA_READ, SD_DTO_RDMA_WRITE, SD_DTO_BIND};
    for (unsigned k = 0; k < 4; k++) {
        enum sd_dto_kind o = req[k];
        /* Threshold EP. */
        ck_assert_int_eq(sd_dto_decide(o, SUP, THR, true, false), NO);
        ck_assert_int_eq(sd_dto_decide(o, SUP, THR, false, false), NOTIFY);
        ck_assert_int_eq(sd_dto_decide(o, 0, THR, true, false), NOTIFY);
        ck_assert_int_eq(sd_dto_decide(o, 0, THR, false, false), NOTIFY);
        ck_assert_int_eq(sd_dto_decide(o, SUP, DEF, true, false), NO);
        ck_assert_int_eq(sd_dto_decide(o, 0, DEF, true, false), NOTIFY);
        /* Request flags = UNSIGNALLED. */
        ck_assert_int_eq(sd_dto_decide(o, SUP, UNS, true, false), NO);
        ck_assert_int_eq(sd_dto_decide(o, SUP | UNS, UNS, true, false), NO);
        ck_assert_int_eq(sd_dto_decide(o, SUP, UNS, false, false), NOTIFY);
        ck_assert_int_eq(sd_dto_decide(o, SUP | UNS, UNS, false, false), QUIET);
        ck_assert_int_eq(sd_dto_decide(o, 0, UNS, false, false), NOTIFY);
        ck_assert_int_eq(sd_dto_decide(o, 0, UNS, true, false), NOTIFY);
        ck_assert_int_eq(sd_dto_decide(o, UNS, UNS, true, false), QUIET);
        ck_assert_int_eq(sd_dto_decide(o, UNS, UNS, false, false), QUIET);
    }
    /* Recv, threshold: always generated with notification. */
    ck_assert_int_eq(sd_dto_decide(SD_DTO_RECV, 0, THR, true, false), NOTIFY);
    ck_assert_int_eq(sd_dto_decide(SD_DTO_RECV, 0, THR, true, true), NOTIFY);
    ck_assert_int_eq(sd_dto_decide(SD_DTO_RECV, 0, THR, false, false), NOTIFY);
    /* Recv, UNSIGNALLED EP. */
    ck_assert_int_eq(sd_dto_decide(SD_DTO_RECV, UNS, UNS, true, true), QUIET);
    ck_assert_int_eq(sd_dto_decide(SD_DTO_RECV, UNS, UNS, false, false), QUIET);
    ck_assert_int_eq(sd_dto_decide(SD_DTO_RECV, 0, UNS, true, false), NOTIFY);
    ck_assert_int_eq(sd_dto_decide(SD_DTO_RECV, 0, UNS, false, true), NOTIFY);
    /* Recv, SOLICITED_WAIT EP: the peer's SE decides, success or not. */
    ck_assert_int_eq(sd_dto_decide(SD_DTO_RECV, 0, SOL, true, true), NOTIFY);
    ck_assert_int_eq(sd_dto_decide(SD_DTO_RECV, 0, SOL, true, false), QUIET);
    ck_assert_int_eq(sd_dto_decide(SD_DTO_RECV, 0, SOL, false, true), NOTIFY);
    ck_assert_int_eq(sd_dto_decide(SD_DTO_RECV, 0, SOL, false, false), QUIET);
}
END_TEST

START_TEST(status_map)
{
    ck_assert_int_eq(sd_dto_status(EMU_WC_SUCCESS), DAT_DTO_SUCCESS);
    ck_assert_int_eq(sd_dto_status(EMU_WC_FLUSHED), DAT_DTO_ERR_FLUSHED);
    ck_assert_int_eq(sd_dto_status(EMU_WC_LOC_LEN), DAT_DTO_ERR_LOCAL_LENGTH);
    ck_assert_int_eq(sd_dto_status(EMU_WC_LOC_PROT), DAT_DTO_ERR_LOCAL_PROTECTION);
    ck_assert_int_eq(sd_dto_status(EMU_WC_LOC_QP), DAT_DTO_ERR_LOCAL_EP);
    ck_assert_int_eq(sd_dto_status(EMU_WC_BAD_RESP), DAT_DTO_ERR_BAD_RESPONSE);
    ck_assert_int_eq(sd_dto_status(EMU_WC_REM_ACCESS), DAT_DTO_ERR_REMOTE_ACCESS);
    ck_assert_int_eq(sd_dto_status(EMU_WC_REM_OP), DAT_DTO_ERR_REMOTE_RESPONDER);
    ck_assert_int_eq(sd_dto_status(EMU_WC_TRANSPORT), DAT_DTO_ERR_TRANSPORT);
    ck_assert_int_eq(sd_dto_status(EMU_WC_RNR), DAT_DTO_ERR_RECEIVER_NOT_READY);
    ck_assert_int_eq(sd_dto_status(EMU_WC_BIND_FAILED), DAT_RMR_OPERATION_FAILED);
    ck_assert_int_eq(sd_dto_status((enum emu_wc_status)999), DAT_DTO_ERR_LOCAL_EP);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("dto_logic");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, ring_get_peek_complete);
    tcase_add_test(tc, ring_full_and_reuse);
    tcase_add_test(tc, ring_suppressed_slots_held);
    tcase_add_test(tc, ring_finish_in_one_step);
    tcase_add_test(tc, ring_deferred_flush);
    tcase_add_test(tc, ring_threads);
    tcase_add_test(tc, flags_allowed);
    tcase_add_test(tc, decision_tables);
    tcase_add_test(tc, status_map);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
