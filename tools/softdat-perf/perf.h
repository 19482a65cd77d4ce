/* softdat-perf: shared declarations of the benchmark's parts.
 *
 *   main.c    command line, run orchestration, result table / JSON
 *   datperf.c the DAT side (client and server), written against the public
 *             DAT API only: it benchmarks any DAT provider
 *   rawtcp.c  the same traffic patterns over plain TCP sockets (baseline)
 *   util.c    clocks, statistics, parsing, error text
 */
#ifndef SOFTDAT_PERF_H
#define SOFTDAT_PERF_H

#include <stddef.h>
#include <stdint.h>

#include <dat2/udat.h>

/* Exit codes (documented in softdat-perf.1). */
#define PERF_EXIT_OK 0
#define PERF_EXIT_FAIL 1        /* a test failed: DAT error, timeout, bad data */
#define PERF_EXIT_USAGE 2
#define PERF_EXIT_CONNECT 3     /* could not open the IA, reach or connect to the server */
#define PERF_EXIT_NOTIMPL 4     /* the provider answered DAT_NOT_IMPLEMENTED */

enum perf_test {
    T_SEND_LAT,
    T_WRITE_LAT,
    T_READ_LAT,
    T_SEND_BW,
    T_WRITE_BW,
    T_READ_BW,
    T_COUNT
};

#define MAX_SIZES 32
#define MAX_WINDOW 256
#define MAX_SIZE_LIMIT (64u << 20)  /* largest message the tool accepts */
#define DEFAULT_PORT 19875u
/* Upper bound of any per-message server loop: more than a client can ask
 * for (-n at most 10^7 per test/repetition, plus warm-up). */
#define SERVER_LOOP_MAX 20000000L          /* DAT conn_qual; raw TCP listens on port+1 */

enum crc_choice { CRC_UNSET = 0, CRC_ON, CRC_OFF, CRC_AUTO };

struct perf_opts {
    int server;
    int persist;
    const char *host;       /* client: server name or address */
    const char *ia_name;    /* -P */
    unsigned port;          /* DAT conn_qual; raw TCP uses port + 1 */
    int tests[T_COUNT];     /* which tests to run */
    uint32_t sizes[MAX_SIZES];
    int nsizes;
    long iters;             /* -n: latency samples / messages per bw repetition */
    double time_cap;        /* -t: seconds per (test, size), all repetitions */
    int reps;               /* bandwidth repetitions (median taken) */
    int window;             /* outstanding operations in bandwidth tests */
    int signal_every;       /* bandwidth: one signalled completion per N posts */
    int poll;               /* -W: dat_evd_dequeue spin instead of dat_evd_wait */
    enum crc_choice crc;
    int raw_only;           /* --raw-tcp */
    int presize_fds;        /* --presize-fds (--connect-rate) */
    int compare;            /* --compare: DAT run, then the raw-TCP run */
    int json;
    int verbose;
    double op_timeout;      /* seconds any single wait may take */
    double idle_timeout;    /* server: seconds to wait for a client */
};

/* The raw-TCP pattern that serves as baseline for each test. */
enum raw_pattern { RAW_PINGPONG, RAW_REQRESP, RAW_STREAM, RAW_PULL, RAW_NPAT };

struct perf_result {
    int valid;
    long iters;             /* latency samples, or messages over all reps */
    double lat_med_us;      /* one-way (RTT/2) for send/write; full op for read */
    double lat_p99_us;
    double gbps;            /* 10^9 B/s, median of repetitions */
    double mmsgs;           /* 10^6 messages/s, median of repetitions */
    char error[256];        /* why the row is missing, if it is */
};

struct perf_results {
    char crc[16];           /* MPA CRC as negotiated: "on", "off", or "" unknown */
    struct perf_result dat[T_COUNT][MAX_SIZES];
    struct perf_result raw[RAW_NPAT][MAX_SIZES];
};

/* ------------------------------------------------------------ util.c */
extern const char *perf_prog;
extern volatile int perf_stop;     /* set by SIGINT/SIGTERM */

double perf_now(void);             /* CLOCK_MONOTONIC seconds */
const char *perf_test_name(int t);
int perf_test_is_lat(int t);
enum raw_pattern perf_test_raw(int t);
const char *perf_raw_name(enum raw_pattern p);
/* "DAT_NOT_IMPLEMENTED (0x3fff0000)", from dat_strerror. */
const char *perf_dat_strerror(DAT_RETURN ret, char *buf, size_t len);
int perf_parse_sizes(const char *list, uint32_t *sizes, int *n);
int perf_parse_size(const char *s, uint32_t *out);
void perf_fmt_size(uint32_t size, char *buf, size_t len);
/* Median and p99 of v[0..n) (sorts v). */
void perf_stats(double *v, long n, double *median, double *p99);
double perf_median(double *v, int n);
void perf_progress(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Like perf_progress, only with -v (per-row figures: the table has them). */
void perf_detail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
extern int perf_verbose;
/* Progress of a client run over `total` steps (a line a second on stderr,
 * a bar when stderr is a terminal). A step with counts set marks the
 * previous one done. */
void perf_status_begin(int total);
void perf_status_step(int counts, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void perf_status_end(void);
void perf_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
uint32_t perf_max_size(const struct perf_opts *o);

/* ------------------------------------------------------------ datperf.c */
/* Runs every selected DAT test against the server; fills res->dat.
 * Returns a PERF_EXIT_* code. raw_follows tells the server whether a
 * raw-TCP connection follows in the same session; *connected says whether
 * the DAT connection was ever established (if not, the server still waits). */
int dat_client_run(const struct perf_opts *o, struct perf_results *res, int raw_follows,
                   int *connected);
/* Serves clients until one session ends (or forever with --persist). */
int perf_server_run(const struct perf_opts *o);

/* ------------------------------------------------------------ rawtcp.c */
int raw_client_run(const struct perf_opts *o, struct perf_results *res);
/* Tell the server (through its raw port) that this client's session is
 * over; used when the DAT part failed before connecting. Best effort. */
void raw_client_bye(const struct perf_opts *o);
/* Listening socket for raw mode on addr (NULL: 127.0.0.1), port. */
int raw_listen(const DAT_SOCK_ADDR *addr, unsigned port);
/* Serves one accepted raw connection. Returns 0, or -1 on error. *last is
 * set when the client said its session ends with this connection. */
int raw_serve_conn(const struct perf_opts *o, int fd, int *last);

/* counters.c: -v prints the IB extension counters after a run. */
void perf_print_counters(DAT_IA_HANDLE ia, DAT_EP_HANDLE ep, DAT_EVD_HANDLE evd);

/* --connect-rate N (connrate.c): N raw TCP connections set up in one burst
 * on loopback, the baseline of dtestcm's connection rate. */
int perf_connect_rate(const struct perf_opts *o, long n);

#endif
