/* An MPI job that checks what it moves, run over Open MPI's uDAPL transport
 * on softdat (test/e2e/ompi_udapl.sh). Two ranks.
 *
 *   mpi_check            correctness: ping-pong of every size 1 B..4 MiB
 *                        (powers of two and odd sizes between), both ways,
 *                        data verified; a multi-message exchange; allreduce;
 *                        bcast. Prints "mpi_check: ok" on rank 0.
 *   mpi_check perf       8 B ping-pong latency and 4 MiB bandwidth (median
 *                        of rounds), one line on rank 0, for docs/perf.md.
 * Exit status 0 only when every check passed on every rank. */
#include <mpi.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SIZE (4u << 20)

static int g_rank, g_fail;

#define CHECK(cond, ...)                                                                        \
    do {                                                                                        \
        if (!(cond)) {                                                                          \
            fprintf(stderr, "rank %d: FAIL %s:%d: ", g_rank, __FILE__, __LINE__);               \
            fprintf(stderr, __VA_ARGS__);                                                       \
            fputc('\n', stderr);                                                                \
            g_fail++;                                                                           \
        }                                                                                       \
    } while (0)

static unsigned char pattern(size_t i, unsigned seed)
{
    return (unsigned char)((i * 131u + seed * 7u + (i >> 8)) & 0xFF);
}

static void fill(unsigned char *b, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        b[i] = pattern(i, seed);
}

static size_t first_bad(const unsigned char *b, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        if (b[i] != pattern(i, seed))
            return i;
    return n;
}

static void pingpong_size(unsigned char *sb, unsigned char *rb, size_t n, int iters)
{
    int peer = 1 - g_rank;
    if (getenv("MPI_CHECK_VERBOSE"))
        fprintf(stderr, "rank %d: pingpong %zu\n", g_rank, n);
    for (int it = 0; it < iters; it++) {
        unsigned seed = (unsigned)(n * 3 + (size_t)it);
        if (g_rank == 0) {
            fill(sb, n, seed);
            MPI_Send(sb, (int)n, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
            memset(rb, 0, n);
            MPI_Status st;
            MPI_Recv(rb, (int)n, MPI_BYTE, peer, 2, MPI_COMM_WORLD, &st);
            int got = 0;
            MPI_Get_count(&st, MPI_BYTE, &got);
            CHECK((size_t)got == n, "pingpong %zu: got %d bytes", n, got);
            size_t bad = first_bad(rb, n, seed + 1);
            CHECK(bad == n, "pingpong %zu iter %d: byte %zu differs", n, it, bad);
        } else {
            memset(rb, 0, n);
            MPI_Recv(rb, (int)n, MPI_BYTE, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            size_t bad = first_bad(rb, n, seed);
            CHECK(bad == n, "pingpong %zu iter %d: byte %zu differs", n, it, bad);
            fill(sb, n, seed + 1);
            MPI_Send(sb, (int)n, MPI_BYTE, peer, 2, MPI_COMM_WORLD);
        }
    }
}

static void pingpong_all(unsigned char *sb, unsigned char *rb)
{
    for (size_t n = 1; n <= MAX_SIZE; n *= 2) {
        int iters = n <= 65536 ? 20 : 4;
        pingpong_size(sb, rb, n, iters);
        if (n > 2 && n < MAX_SIZE)
            pingpong_size(sb, rb, n + n / 2 + 1, 2); /* odd sizes between */
    }
}

/* Many messages in flight at once, of mixed sizes, both directions. */
static void exchange(unsigned char *sb, unsigned char *rb)
{
    enum { N = 64 };
    static const size_t sizes[] = {1, 17, 256, 1000, 4096, 8191, 12288, 65536, 100000};
    const size_t ns = sizeof sizes / sizeof sizes[0];
    MPI_Request rq[2 * N];
    size_t off_s = 0, off_r = 0, so[N], ro[N];
    int peer = 1 - g_rank;
    for (int i = 0; i < N; i++) {
        size_t n = sizes[(size_t)i % ns];
        ro[i] = off_r;
        memset(rb + off_r, 0, n);
        MPI_Irecv(rb + off_r, (int)n, MPI_BYTE, peer, 100 + i, MPI_COMM_WORLD, &rq[i]);
        off_r += n;
    }
    for (int i = 0; i < N; i++) {
        size_t n = sizes[(size_t)i % ns];
        so[i] = off_s;
        fill(sb + off_s, n, (unsigned)(1000 * g_rank + i));
        MPI_Isend(sb + off_s, (int)n, MPI_BYTE, peer, 100 + i, MPI_COMM_WORLD, &rq[N + i]);
        off_s += n;
    }
    MPI_Waitall(2 * N, rq, MPI_STATUSES_IGNORE);
    for (int i = 0; i < N; i++) {
        size_t n = sizes[(size_t)i % ns];
        size_t bad = first_bad(rb + ro[i], n, (unsigned)(1000 * peer + i));
        CHECK(bad == n, "exchange msg %d (%zu B): byte %zu differs", i, n, bad);
    }
    (void)so;
}

static void collectives(void)
{
    enum { V = 100000 };
    double *in = malloc(V * sizeof *in), *out = malloc(V * sizeof *out);
    for (int i = 0; i < V; i++)
        in[i] = (double)(i % 1000) * (g_rank + 1);
    MPI_Allreduce(in, out, V, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    int bad = -1;
    for (int i = 0; i < V && bad < 0; i++)
        if (out[i] != (double)(i % 1000) * 3)
            bad = i;
    CHECK(bad < 0, "allreduce: element %d is %g", bad, bad >= 0 ? out[bad] : 0.0);
    long small = g_rank + 5, ssum = 0;
    MPI_Allreduce(&small, &ssum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    CHECK(ssum == 11, "small allreduce: %ld", ssum);
    for (size_t n = 4; n <= MAX_SIZE; n *= 16) {
        unsigned char *b = malloc(n);
        if (g_rank == 0)
            fill(b, n, 77);
        else
            memset(b, 0, n);
        MPI_Bcast(b, (int)n, MPI_BYTE, 0, MPI_COMM_WORLD);
        size_t bb = first_bad(b, n, 77);
        CHECK(bb == n, "bcast %zu: byte %zu differs", n, bb);
        free(b);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    free(in);
    free(out);
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return v[n / 2];
}

/* One-way latency (us) of an n-byte ping-pong, iters round trips. */
static double pp_time(unsigned char *sb, unsigned char *rb, size_t n, int iters)
{
    int peer = 1 - g_rank;
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < iters; i++) {
        if (g_rank == 0) {
            MPI_Send(sb, (int)n, MPI_BYTE, peer, 3, MPI_COMM_WORLD);
            MPI_Recv(rb, (int)n, MPI_BYTE, peer, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(rb, (int)n, MPI_BYTE, peer, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(sb, (int)n, MPI_BYTE, peer, 3, MPI_COMM_WORLD);
        }
    }
    return (MPI_Wtime() - t0) * 1e6 / (2.0 * iters);
}

/* Streaming bandwidth (MB/s): rank 0 sends `window` n-byte messages, rank
 * 1 answers with one byte, `reps` times. */
static double bw_time(unsigned char *sb, unsigned char *rb, size_t n, int window, int reps)
{
    int peer = 1 - g_rank;
    MPI_Request rq[16];
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int r = 0; r < reps; r++) {
        for (int w = 0; w < window; w++) {
            if (g_rank == 0)
                MPI_Isend(sb, (int)n, MPI_BYTE, peer, 4, MPI_COMM_WORLD, &rq[w]);
            else
                MPI_Irecv(rb, (int)n, MPI_BYTE, peer, 4, MPI_COMM_WORLD, &rq[w]);
        }
        MPI_Waitall(window, rq, MPI_STATUSES_IGNORE);
        if (g_rank == 0)
            MPI_Recv(rb, 1, MPI_BYTE, peer, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        else
            MPI_Send(sb, 1, MPI_BYTE, peer, 5, MPI_COMM_WORLD);
    }
    double secs = MPI_Wtime() - t0;
    return (double)n * window * reps / secs / 1e6;
}

static void perf(unsigned char *sb, unsigned char *rb)
{
    enum { ROUNDS = 5 };
    double lat[ROUNDS], bw[ROUNDS];
    pp_time(sb, rb, 8, 200); /* warm-up: connections, eager-RDMA buffers */
    bw_time(sb, rb, MAX_SIZE, 4, 2);
    bool lat_only = getenv("MPI_CHECK_LAT_ONLY") != NULL; /* for profiling */
    bool bw_only = getenv("MPI_CHECK_BW_ONLY") != NULL;
    for (int r = 0; r < ROUNDS; r++) {
        lat[r] = bw_only ? 0 : pp_time(sb, rb, 8, lat_only ? 20000 : 2000);
        bw[r] = lat_only ? 0 : bw_time(sb, rb, MAX_SIZE, 8, 8);
    }
    if (g_rank == 0)
        printf("mpi_check perf: 8B latency %.2f us, 4MiB bandwidth %.0f MB/s (median of %d)\n",
               median(lat, ROUNDS), median(bw, ROUNDS), ROUNDS);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int size = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != 2) {
        if (g_rank == 0)
            fprintf(stderr, "mpi_check: run with 2 ranks\n");
        MPI_Finalize();
        return 2;
    }
    unsigned char *sb = malloc(MAX_SIZE * 2), *rb = malloc(MAX_SIZE * 2);
    if (argc > 1 && strcmp(argv[1], "perf") == 0) {
        perf(sb, rb);
    } else {
        pingpong_all(sb, rb);
        exchange(sb, rb);
        collectives();
    }
    int total = 0;
    MPI_Allreduce(&g_fail, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (g_rank == 0 && (argc < 2 || strcmp(argv[1], "perf") != 0))
        printf("mpi_check: %s (%d failures)\n", total ? "FAILED" : "ok", total);
    free(sb);
    free(rb);
    MPI_Finalize();
    return total ? 1 : 0;
}
