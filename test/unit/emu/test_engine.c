/* emu/engine: thread lifecycle, jobs, timers, fd watchers, doorbells. */
#include "emu/engine.h"

#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static void sleep_us(long us)
{
    struct timespec ts = {.tv_sec = us / 1000000, .tv_nsec = (us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

/* Wait (bounded) until *v reaches want. */
static bool wait_for(atomic_int *v, int want, long max_ms)
{
    for (long i = 0; i < max_ms; i++) {
        if (atomic_load(v) >= want)
            return true;
        sleep_us(1000);
    }
    return atomic_load(v) >= want;
}

START_TEST(create_destroy_many)
{
    for (int i = 0; i < 50; i++) {
        struct emu_engine *e = NULL;
        ck_assert_int_eq(emu_engine_create("t-engine", &e), 0);
        ck_assert_ptr_nonnull(e);
        ck_assert(!emu_engine_on_thread(e));
        ck_assert_int_eq(emu_engine_destroy(e), 0);
    }
    ck_assert_int_eq(emu_engine_destroy(NULL), 0);
}
END_TEST

struct order {
    int seen[1001];
    int n;
    bool bad_thread;
    struct emu_engine *e;
};

struct order_job {
    struct order *o;
    int idx;
};

static void order_fn(void *arg)
{
    struct order_job *j = arg;
    if (!emu_engine_on_thread(j->o->e))
        j->o->bad_thread = true;
    j->o->seen[j->o->n++] = j->idx;
}

START_TEST(async_fifo_then_sync)
{
    struct emu_engine *e;
    ck_assert_int_eq(emu_engine_create(NULL, &e), 0);
    static struct order o;
    memset(&o, 0, sizeof o);
    o.e = e;
    static struct order_job jobs[1000];
    for (int i = 0; i < 1000; i++) {
        jobs[i] = (struct order_job){&o, i};
        ck_assert_int_eq(emu_engine_run_async(e, order_fn, &jobs[i]), 0);
    }
    /* run_sync queues behind every earlier job: a barrier. */
    struct order_job last = {&o, 1000};
    ck_assert_int_eq(emu_engine_run_sync(e, order_fn, &last), 0);
    ck_assert_int_eq(o.n, 1001);
    for (int i = 0; i <= 1000; i++)
        ck_assert_int_eq(o.seen[i], i);
    ck_assert(!o.bad_thread);
    ck_assert_int_eq(emu_engine_run_async(e, NULL, NULL), -EINVAL);
    emu_engine_destroy(e);
}
END_TEST

struct nest {
    struct emu_engine *e;
    int inner_ran;
    bool inner_inline;
    int destroy_rc;
    bool outer_on_thread;
};

static void inner_fn(void *arg)
{
    struct nest *n = arg;
    n->inner_ran++;
}

static void outer_fn(void *arg)
{
    struct nest *n = arg;
    n->outer_on_thread = emu_engine_on_thread(n->e);
    /* On the engine thread, run_sync must run inline (no self-deadlock). */
    int before = n->inner_ran;
    emu_engine_run_sync(n->e, inner_fn, n);
    n->inner_inline = n->inner_ran == before + 1;
    n->destroy_rc = emu_engine_destroy(n->e);
}

START_TEST(sync_from_engine_thread_is_inline)
{
    struct nest n = {0};
    ck_assert_int_eq(emu_engine_create(NULL, &n.e), 0);
    ck_assert_int_eq(emu_engine_run_sync(n.e, outer_fn, &n), 0);
    ck_assert(n.outer_on_thread);
    ck_assert(n.inner_inline);
    ck_assert_int_eq(n.destroy_rc, -EDEADLK);
    ck_assert_int_eq(emu_engine_destroy(n.e), 0);
}
END_TEST

struct mt {
    struct emu_engine *e;
    atomic_int count;
};

static void mt_inc(void *arg)
{
    struct mt *m = arg;
    atomic_fetch_add(&m->count, 1);
}

static void *mt_thread(void *arg)
{
    struct mt *m = arg;
    for (int i = 0; i < 500; i++) {
        if (i % 2)
            emu_engine_run_sync(m->e, mt_inc, m);
        else
            emu_engine_run_async(m->e, mt_inc, m);
    }
    return NULL;
}

START_TEST(many_threads_submit)
{
    struct mt m = {0};
    ck_assert_int_eq(emu_engine_create(NULL, &m.e), 0);
    pthread_t th[4];
    for (int i = 0; i < 4; i++)
        pthread_create(&th[i], NULL, mt_thread, &m);
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    emu_engine_destroy(m.e); /* runs whatever async jobs are still queued */
    ck_assert_int_eq(atomic_load(&m.count), 2000);
}
END_TEST

struct tctx {
    atomic_int fired;
    uint64_t armed_at, fired_at;
    struct emu_timer *self;
    struct emu_engine *e;
    bool on_thread;
};

static void t_fire(void *arg)
{
    struct tctx *t = arg;
    t->fired_at = emu_now_us();
    t->on_thread = emu_engine_on_thread(t->e);
    atomic_fetch_add(&t->fired, 1);
}

static void t_fire_and_free(void *arg)
{
    struct tctx *t = arg;
    emu_timer_free(t->self); /* freeing a timer from its own callback is allowed */
    atomic_fetch_add(&t->fired, 1);
}

START_TEST(timers)
{
    struct emu_engine *e;
    ck_assert_int_eq(emu_engine_create(NULL, &e), 0);

    /* one-shot fires once, not before its time */
    struct tctx a = {.e = e};
    struct emu_timer *ta = emu_timer_new(e, t_fire, &a);
    ck_assert_ptr_nonnull(ta);
    a.armed_at = emu_now_us();
    ck_assert_int_eq(emu_timer_arm(ta, 20000), 0);
    ck_assert(emu_timer_pending(ta));
    ck_assert(wait_for(&a.fired, 1, 2000));
    ck_assert_uint_ge(a.fired_at - a.armed_at, 19000);
    ck_assert(a.on_thread);
    sleep_us(50000);
    ck_assert_int_eq(atomic_load(&a.fired), 1);
    ck_assert(!emu_timer_pending(ta));

    /* cancelled before expiry: never fires; re-arm works afterwards */
    struct tctx b = {.e = e};
    struct emu_timer *tb = emu_timer_new(e, t_fire, &b);
    ck_assert_int_eq(emu_timer_arm(tb, 30000), 0);
    emu_timer_cancel(tb);
    ck_assert(!emu_timer_pending(tb));
    sleep_us(60000);
    ck_assert_int_eq(atomic_load(&b.fired), 0);
    /* re-arm replaces the pending expiry */
    ck_assert_int_eq(emu_timer_arm(tb, 5000000), 0);
    ck_assert_int_eq(emu_timer_arm(tb, 10000), 0);
    ck_assert(wait_for(&b.fired, 1, 2000));
    sleep_us(30000);
    ck_assert_int_eq(atomic_load(&b.fired), 1);

    /* free from own callback */
    struct tctx c = {.e = e};
    c.self = emu_timer_new(e, t_fire_and_free, &c);
    ck_assert_int_eq(emu_timer_arm(c.self, 1000), 0);
    ck_assert(wait_for(&c.fired, 1, 2000));

    emu_timer_free(ta);
    emu_timer_free(tb);
    emu_timer_cancel(NULL);
    emu_timer_free(NULL);
    emu_engine_destroy(e);
}
END_TEST

struct fdctx {
    atomic_int reads, writes;
    char got[16];
    int gotlen;
    struct emu_fdw *w;
};

static void fd_cb(int fd, unsigned what, void *arg)
{
    struct fdctx *f = arg;
    if (what & EMU_EV_READ) {
        ssize_t n = read(fd, f->got + f->gotlen, sizeof f->got - (size_t)f->gotlen);
        if (n > 0)
            f->gotlen += (int)n;
        atomic_fetch_add(&f->reads, 1);
    }
    if (what & EMU_EV_WRITE) {
        atomic_fetch_add(&f->writes, 1);
        emu_fdw_disable(f->w, EMU_EV_WRITE); /* one-shot interest */
    }
}

START_TEST(fd_watchers)
{
    struct emu_engine *e;
    ck_assert_int_eq(emu_engine_create(NULL, &e), 0);
    int p[2];
    ck_assert_int_eq(pipe(p), 0);
    static struct fdctx f;
    memset(&f, 0, sizeof f);
    f.w = emu_fdw_new(e, p[0], fd_cb, &f);
    ck_assert_ptr_nonnull(f.w);
    ck_assert_ptr_null(emu_fdw_new(e, -1, fd_cb, &f));
    ck_assert_int_eq(emu_fdw_enable(f.w, EMU_EV_READ), 0);
    ck_assert_int_eq(write(p[1], "hello", 5), 5);
    ck_assert(wait_for(&f.reads, 1, 2000));
    struct mt barrier = {0};
    emu_engine_run_sync(e, mt_inc, &barrier);
    ck_assert_int_eq(f.gotlen, 5);
    ck_assert(memcmp(f.got, "hello", 5) == 0);

    /* disabled: data stays unread, no callback */
    ck_assert_int_eq(emu_fdw_disable(f.w, EMU_EV_READ), 0);
    int r0 = atomic_load(&f.reads);
    ck_assert_int_eq(write(p[1], "x", 1), 1);
    sleep_us(50000);
    ck_assert_int_eq(atomic_load(&f.reads), r0);
    ck_assert_int_eq(emu_fdw_enable(f.w, EMU_EV_READ), 0);
    ck_assert(wait_for(&f.reads, r0 + 1, 2000));

    /* write readiness on the write end */
    struct fdctx g;
    memset(&g, 0, sizeof g);
    g.w = emu_fdw_new(e, p[1], fd_cb, &g);
    ck_assert_int_eq(emu_fdw_enable(g.w, EMU_EV_WRITE), 0);
    ck_assert(wait_for(&g.writes, 1, 2000));
    sleep_us(20000);
    ck_assert_int_eq(atomic_load(&g.writes), 1);

    emu_fdw_free(f.w);
    emu_fdw_free(g.w);
    close(p[0]);
    close(p[1]);
    emu_engine_destroy(e);
}
END_TEST

struct dbctx {
    atomic_int runs;
    atomic_int gate;
};

static void db_fn(void *arg)
{
    struct dbctx *d = arg;
    atomic_fetch_add(&d->runs, 1);
}

static void block_fn(void *arg)
{
    struct dbctx *d = arg;
    for (int i = 0; i < 5000 && !atomic_load(&d->gate); i++)
        sleep_us(1000);
}

START_TEST(doorbell_coalesces)
{
    struct emu_engine *e;
    ck_assert_int_eq(emu_engine_create(NULL, &e), 0);
    struct dbctx d = {0};
    struct emu_doorbell *db = emu_doorbell_new(e, db_fn, &d);
    ck_assert_ptr_nonnull(db);
    emu_engine_run_async(e, block_fn, &d); /* engine busy while we ring */
    for (int i = 0; i < 1000; i++)
        emu_doorbell_ring(db);
    atomic_store(&d.gate, 1);
    ck_assert(wait_for(&d.runs, 1, 2000));
    sleep_us(20000);
    ck_assert_int_le(atomic_load(&d.runs), 2);
    int before = atomic_load(&d.runs);
    emu_doorbell_ring(db);
    ck_assert(wait_for(&d.runs, before + 1, 2000));
    emu_doorbell_free(db);
    emu_engine_destroy(e);
}
END_TEST

struct pend {
    atomic_int ran;
    int hook_runs;
    int async_in_hook;
    struct emu_engine *e;
    struct emu_engine_hook hook, hook2;
};

static void slow_job(void *arg)
{
    struct pend *p = arg;
    sleep_us(200);
    atomic_fetch_add(&p->ran, 1);
}

static void never_fn(void *arg)
{
    (void)arg;
    ck_abort_msg("timer or watcher fired after destroy");
}

static struct pend *g_pend;

static void pend_hook(struct emu_engine_hook *h)
{
    (void)h;
    g_pend->hook_runs++;
    g_pend->async_in_hook = emu_engine_run_async(g_pend->e, slow_job, g_pend);
}

static void pend_fd_cb(int fd, unsigned what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
}

START_TEST(destroy_with_pending_work)
{
    for (int round = 0; round < 10; round++) {
        static struct pend p;
        memset(&p, 0, sizeof p);
        g_pend = &p;
        ck_assert_int_eq(emu_engine_create(NULL, &p.e), 0);
        p.hook.fn = pend_hook;
        p.hook2.fn = pend_hook;
        ck_assert_int_eq(emu_engine_hook_add(p.e, &p.hook), 0);
        ck_assert_int_eq(emu_engine_hook_add(p.e, &p.hook2), 0);
        emu_engine_hook_del(p.e, &p.hook2);
        emu_engine_hook_del(p.e, &p.hook2); /* twice: no-op */
        for (int i = 0; i < 100; i++)
            ck_assert_int_eq(emu_engine_run_async(p.e, slow_job, &p), 0);
        /* left for destroy to free: an armed timer, an enabled watcher, a doorbell */
        struct emu_timer *t = emu_timer_new(p.e, never_fn, NULL);
        emu_timer_arm(t, 10000000);
        int sp[2];
        ck_assert_int_eq(pipe(sp), 0);
        struct emu_fdw *w = emu_fdw_new(p.e, sp[0], pend_fd_cb, NULL);
        emu_fdw_enable(w, EMU_EV_READ);
        ck_assert_ptr_nonnull(emu_doorbell_new(p.e, never_fn, NULL));
        ck_assert_int_eq(emu_engine_destroy(p.e), 0);
        ck_assert_int_eq(atomic_load(&p.ran), 100); /* queued work ran */
        ck_assert_int_eq(p.hook_runs, 1);
        ck_assert_int_eq(p.async_in_hook, -ESHUTDOWN);
        close(sp[0]);
        close(sp[1]);
    }
}
END_TEST

/* Slots in this process's descriptor table (/proc/self/status FDSize). */
static long fd_table_size(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    ck_assert_ptr_nonnull(f);
    char line[256];
    long n = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "FDSize: %ld", &n) == 1)
            break;
    fclose(f);
    return n;
}

static int open_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    ck_assert_ptr_nonnull(d);
    int n = 0;
    while (readdir(d) != NULL)
        n++;
    closedir(d);
    return n;
}

/* The engine grows the descriptor table before its thread exists, so that
 * a burst of connections never waits in socket()/accept4() for the
 * table's growth (an RCU grace period in a multi-threaded process), and
 * leaves no descriptor behind. */
START_TEST(create_reserves_fd_table)
{
    struct rlimit rl;
    ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
    const rlim_t limits[] = {300, 2048, 100000};
    for (size_t i = 0; i < sizeof limits / sizeof limits[0]; i++) {
        struct rlimit set = rl;
        set.rlim_cur = limits[i] < rl.rlim_max ? limits[i] : rl.rlim_max;
        ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &set), 0);
        long want = set.rlim_cur < EMU_FD_TABLE_RESERVE ? (long)set.rlim_cur : (long)EMU_FD_TABLE_RESERVE;
        int before = open_fds();
        struct emu_engine *e = NULL;
        ck_assert_int_eq(emu_engine_create("t-fds", &e), 0);
        ck_assert_int_ge(fd_table_size(), want);
        ck_assert_int_eq(emu_engine_destroy(e), 0);
        ck_assert_int_eq(open_fds(), before);
    }
    ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &rl), 0);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("emu_engine");
    TCase *tc = tcase_create("engine");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, create_destroy_many);
    tcase_add_test(tc, async_fifo_then_sync);
    tcase_add_test(tc, sync_from_engine_thread_is_inline);
    tcase_add_test(tc, many_threads_submit);
    tcase_add_test(tc, timers);
    tcase_add_test(tc, fd_watchers);
    tcase_add_test(tc, doorbell_coalesces);
    tcase_add_test(tc, destroy_with_pending_work);
    tcase_add_test(tc, create_reserves_fd_table);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
