/* tun_impair: a userspace network emulator for kernels without sch_netem.
 *
 *   tun_impair NAME_A NAME_B [--loss PCT] [--dup PCT] [--delay MS]
 *              [--jitter MS] [--reorder PCT] [--seed N] [--time S]
 *
 * Creates two TUN devices (IP packets, no link header) and forwards every
 * packet read from one into the other, impaired as netem would: dropped
 * with probability loss, sent twice with probability dup, held for delay
 * plus a uniform jitter in [-jitter, +jitter] (packets overtake each other
 * when the jitter exceeds their spacing), and, with probability reorder, sent
 * at once ahead of the held ones (netem's "reorder"). Both directions get
 * the same impairments, each packet its own draw from a seeded generator.
 *
 * Prints "ready" once both devices exist; the caller then moves one into
 * another network namespace (ip link set NAME netns PID: the descriptor
 * follows the device) and gives both addresses. Runs until SIGTERM/SIGINT
 * or --time seconds (default 600), and prints what it did on exit.
 * test/e2e/netfault.sh uses it where tc netem is missing. */
#include <errno.h>
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#define PKT_MAX 2048
#define HELD_MAX 8192 /* packets in flight in the emulated link; beyond: tail drop */

struct held {
    uint64_t due_ns;
    int to;       /* index of the device it goes out of */
    uint16_t len;
    uint8_t data[PKT_MAX];
};

static struct held *g_held; /* a binary min-heap on due_ns */
static int g_nheld;
static volatile sig_atomic_t g_stop;
static uint64_t g_rng;
static unsigned long g_in, g_out, g_lost, g_dup, g_reord, g_tail;

static void on_signal(int s)
{
    (void)s;
    g_stop = 1;
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* xorshift64*: reproducible with --seed. */
static double uniform(void)
{
    g_rng ^= g_rng >> 12;
    g_rng ^= g_rng << 25;
    g_rng ^= g_rng >> 27;
    return (double)((g_rng * 2685821657736338717ull) >> 11) / 9007199254740992.0;
}

static int tun_open(const char *name)
{
    int fd = open("/dev/net/tun", O_RDWR | O_CLOEXEC);
    if (fd < 0)
        return -1;
    struct ifreq ifr;
    memset(&ifr, 0, sizeof ifr);
    ifr.ifr_flags = IFF_TUN | IFF_NO_PI;
    snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "%s", name);
    if (ioctl(fd, TUNSETIFF, &ifr) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static void heap_swap(int a, int b)
{
    struct held t = g_held[a];
    g_held[a] = g_held[b];
    g_held[b] = t;
}

static void heap_push(uint64_t due, int to, const uint8_t *p, size_t len)
{
    if (g_nheld == HELD_MAX) {
        g_tail++;
        return;
    }
    int i = g_nheld++;
    g_held[i].due_ns = due;
    g_held[i].to = to;
    g_held[i].len = (uint16_t)len;
    memcpy(g_held[i].data, p, len);
    while (i > 0 && g_held[(i - 1) / 2].due_ns > g_held[i].due_ns) {
        heap_swap(i, (i - 1) / 2);
        i = (i - 1) / 2;
    }
}

static void heap_pop(void)
{
    g_held[0] = g_held[--g_nheld];
    for (int i = 0;;) {
        int l = 2 * i + 1, r = l + 1, m = i;
        if (l < g_nheld && g_held[l].due_ns < g_held[m].due_ns)
            m = l;
        if (r < g_nheld && g_held[r].due_ns < g_held[m].due_ns)
            m = r;
        if (m == i)
            break;
        heap_swap(i, m);
        i = m;
    }
}

struct knobs {
    double loss, dup, reorder; /* probabilities 0..1 */
    double delay_ms, jitter_ms;
};

/* One packet read from device `from`: lost, or out now / later, once or twice. */
static void impair(const struct knobs *k, const int *fd, int from, const uint8_t *p, size_t len)
{
    int to = 1 - from;
    g_in++;
    if (uniform() < k->loss) {
        g_lost++;
        return;
    }
    int copies = uniform() < k->dup ? 2 : 1;
    g_dup += (unsigned long)(copies - 1);
    for (int c = 0; c < copies; c++) {
        double ms = k->delay_ms + (2 * uniform() - 1) * k->jitter_ms;
        if (k->delay_ms > 0 && uniform() < k->reorder) {
            g_reord++;
            ms = 0;
        }
        if (ms <= 0) {
            if (write(fd[to], p, len) == (ssize_t)len)
                g_out++;
            continue;
        }
        heap_push(now_ns() + (uint64_t)(ms * 1e6), to, p, len);
    }
}

static int parse_pct(const char *s, double *out)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || *end != '\0' || v < 0 || v > 100)
        return -1;
    *out = v / 100.0;
    return 0;
}

static int parse_ms(const char *s, double *out)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || *end != '\0' || v < 0 || v > 10000)
        return -1;
    *out = v;
    return 0;
}

int main(int argc, char **argv)
{
    struct knobs k = {0};
    double seconds = 600;
    g_rng = 0x9E3779B97F4A7C15ull;
    if (argc < 3) {
        fprintf(stderr, "usage: tun_impair NAME_A NAME_B [--loss PCT] [--dup PCT] [--delay MS] [--jitter MS] "
                        "[--reorder PCT] [--seed N] [--time S]\n");
        return 2;
    }
    for (int i = 3; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        int bad = v == NULL;
        if (!bad && strcmp(argv[i], "--loss") == 0)
            bad = parse_pct(v, &k.loss);
        else if (!bad && strcmp(argv[i], "--dup") == 0)
            bad = parse_pct(v, &k.dup);
        else if (!bad && strcmp(argv[i], "--reorder") == 0)
            bad = parse_pct(v, &k.reorder);
        else if (!bad && strcmp(argv[i], "--delay") == 0)
            bad = parse_ms(v, &k.delay_ms);
        else if (!bad && strcmp(argv[i], "--jitter") == 0)
            bad = parse_ms(v, &k.jitter_ms);
        else if (!bad && strcmp(argv[i], "--seed") == 0)
            g_rng ^= strtoull(v, NULL, 0) * 0xBF58476D1CE4E5B9ull;
        else if (!bad && strcmp(argv[i], "--time") == 0)
            bad = parse_ms(v, &seconds);
        else
            bad = 1;
        if (bad) {
            fprintf(stderr, "tun_impair: bad option %s %s\n", argv[i], v ? v : "");
            return 2;
        }
        i++;
    }
    if (g_rng == 0)
        g_rng = 1;
    g_held = calloc(HELD_MAX, sizeof *g_held);
    int fd[2] = {tun_open(argv[1]), tun_open(argv[2])};
    if (g_held == NULL || fd[0] < 0 || fd[1] < 0) {
        fprintf(stderr, "tun_impair: cannot create TUN devices %s, %s: %s\n", argv[1], argv[2], strerror(errno));
        return 1;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    printf("ready\n");
    fflush(stdout);
    uint64_t end = now_ns() + (uint64_t)(seconds * 1e9);
    uint8_t buf[PKT_MAX];
    while (!g_stop && now_ns() < end) {
        int timeout = 100;
        if (g_nheld > 0) {
            uint64_t n = now_ns();
            timeout = g_held[0].due_ns <= n ? 0 : (int)((g_held[0].due_ns - n) / 1000000u) + 1;
            if (timeout > 100)
                timeout = 100;
        }
        struct pollfd p[2] = {{.fd = fd[0], .events = POLLIN}, {.fd = fd[1], .events = POLLIN}};
        int r = poll(p, 2, timeout);
        if (r < 0 && errno != EINTR)
            break;
        for (int d = 0; d < 2 && r > 0; d++) {
            /* A bounded batch per wakeup, so that one busy direction does
             * not starve the other or the held packets. */
            for (int b = 0; b < 64 && (p[d].revents & POLLIN); b++) {
                ssize_t n = read(fd[d], buf, sizeof buf);
                if (n <= 0)
                    break;
                impair(&k, fd, d, buf, (size_t)n);
                struct pollfd again = {.fd = fd[d], .events = POLLIN};
                if (poll(&again, 1, 0) != 1)
                    break;
            }
        }
        uint64_t n = now_ns();
        while (g_nheld > 0 && g_held[0].due_ns <= n) {
            if (write(fd[g_held[0].to], g_held[0].data, g_held[0].len) == (ssize_t)g_held[0].len)
                g_out++;
            heap_pop();
        }
    }
    printf("tun_impair: %lu packets in, %lu out, %lu lost, %lu duplicated, %lu sent ahead, %lu tail-dropped\n",
           g_in, g_out, g_lost, g_dup, g_reord, g_tail);
    fflush(stdout);
    free(g_held);
    return 0;
}
