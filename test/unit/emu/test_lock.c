/* emu/lock.h: the data path's mutex excludes, sleeps when it must and
 * wakes its sleepers; trylock takes it only when free. */
#include "emu/lock.h"

#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

static void sleep_us(long us)
{
    struct timespec ts = {.tv_sec = us / 1000000, .tv_nsec = (us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

START_TEST(t_trylock)
{
    emu_lock_t l;
    emu_lock_init(&l);
    ck_assert(emu_trylock(&l));
    ck_assert(!emu_trylock(&l)); /* not recursive: held is held */
    emu_unlock(&l);
    ck_assert(emu_trylock(&l));
    emu_unlock(&l);
    emu_lock(&l);
    ck_assert(!emu_trylock(&l));
    emu_unlock(&l);
    emu_lock_destroy(&l);
}
END_TEST

#define THREADS 4
#define ROUNDS 200000

struct shared {
    emu_lock_t l;
    uint64_t plain; /* only under l: a lost update shows as a short count */
    atomic_int inside;
    atomic_int overlap;
};

static void *hammer(void *arg)
{
    struct shared *s = arg;
    for (int i = 0; i < ROUNDS; i++) {
        if ((i & 7) == 0) {
            while (!emu_trylock(&s->l))
                ;
        } else {
            emu_lock(&s->l);
        }
        if (atomic_fetch_add(&s->inside, 1) != 0)
            atomic_fetch_add(&s->overlap, 1);
        s->plain++;
        atomic_fetch_sub(&s->inside, 1);
        emu_unlock(&s->l);
    }
    return NULL;
}

START_TEST(t_excludes_under_contention)
{
    struct shared s = {.plain = 0};
    emu_lock_init(&s.l);
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, hammer, &s), 0);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    ck_assert_uint_eq(s.plain, (uint64_t)THREADS * ROUNDS);
    ck_assert_int_eq(atomic_load(&s.overlap), 0);
    emu_lock_destroy(&s.l);
}
END_TEST

struct sleeper {
    emu_lock_t *l;
    atomic_int got;
};

static void *take_and_leave(void *arg)
{
    struct sleeper *s = arg;
    emu_lock(s->l);
    atomic_fetch_add(&s->got, 1);
    emu_unlock(s->l);
    return NULL;
}

/* Threads that find the lock held for a while sleep (they do not spin it
 * out), and every one of them gets it once it is given back. */
START_TEST(t_sleepers_all_woken)
{
    emu_lock_t l;
    emu_lock_init(&l);
    struct sleeper s = {.l = &l};
    emu_lock(&l);
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, take_and_leave, &s), 0);
    sleep_us(100000);
    ck_assert_int_eq(atomic_load(&s.got), 0);
    emu_unlock(&l);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    ck_assert_int_eq(atomic_load(&s.got), THREADS);
    ck_assert(emu_trylock(&l)); /* free again, whatever the waiters left in the word */
    emu_unlock(&l);
    emu_lock_destroy(&l);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("emu-lock");
    TCase *tc = tcase_create("lock");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, t_trylock);
    tcase_add_test(tc, t_excludes_under_contention);
    tcase_add_test(tc, t_sleepers_all_woken);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int nf = srunner_ntests_failed(sr);
    srunner_free(sr);
    return nf == 0 ? 0 : 1;
}
