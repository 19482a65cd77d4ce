/* Shared fixture of the emu/conn test programs (test_conn*.c): two engines
 * in one process over 127.0.0.1 / ::1, recording event sinks, a listener
 * owner that answers manually or automatically, raw-socket helpers. Linked
 * from test/lib/ (libsdtest.a). */
#ifndef SOFTDAT_TEST_LIB_CONN_FIXTURE_H
#define SOFTDAT_TEST_LIB_CONN_FIXTURE_H

#include "emu/conn.h"
#include "emu/engine.h"

#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

struct evrec {
    int type, err;
    uint16_t len;
    uint8_t pd[EMU_CONN_PDATA_RX_MAX];
};

struct side {
    pthread_mutex_t m;
    pthread_cond_t cv;
    int n;
    struct evrec ev[8];
    struct emu_conn *c;
    uint8_t rx[4096];
    size_t rxlen;
    int rx_calls;
    bool free_on_established; /* free the conn from inside the callback */
    bool freed;
    int detached;             /* ops.detach calls */
    int events_at_detach;
};

void side_init(struct side *s);
void on_event(struct emu_conn *c, const struct emu_conn_event *ev, void *ctx);
int on_rx(struct emu_conn *c, int fd, void *ctx);
void on_detach(struct emu_conn *c, void *ctx);

/* Event sinks: events only, or events + receive + detach. */
extern const struct emu_conn_ops ops_plain;
extern const struct emu_conn_ops ops_rx;

void deadline(struct timespec *ts, int ms);

/* Wait until s has at least n events (bounded). */
bool side_wait(struct side *s, int n, int ms);
bool side_wait_rx(struct side *s, size_t n, int ms);
int side_n(struct side *s);
int side_type(struct side *s, int i);
void sleep_ms(int ms);

enum lmode { L_MANUAL, L_ACCEPT, L_REJECT, L_RSP };

struct lis {
    pthread_mutex_t m;
    pthread_cond_t cv;
    enum lmode mode;
    int n;
    struct emu_conn *req[512];
    uint8_t pd[EMU_CONN_PDATA_RX_MAX];
    uint16_t pdlen;
    char peer[64];
    uint16_t peer_ird, peer_ord;
    bool peer_marker;
    uint32_t peer_caps;
    /* auto-accept */
    struct side *sides;
    int nsides;
    uint8_t apd[EMU_CONN_PDATA_MAX];
    uint16_t apd_len;
    struct emu_conn_params params;
    const struct emu_conn_ops *ops;
    int accept_rc;
};

void lis_init(struct lis *l, enum lmode mode);
void on_request(struct emu_listener *ls, const struct emu_conn_request *r, void *ctx);

extern const struct emu_listener_ops lops;

bool lis_wait(struct lis *l, int n, int ms);
struct emu_conn *lis_req(struct lis *l, int i);
struct sockaddr_in a4(uint16_t port);
struct sockaddr_in6 a6(uint16_t port);

/* The active (E1) and passive (E2) engines of the running test (setup). */
extern struct emu_engine *E1, *E2;

void setup(void);
void teardown(void);
struct emu_listener *listen4(struct lis *l);

struct emu_conn *connect4(uint16_t port, const struct emu_conn_params *p, const void *pd,
                                 uint16_t len, const struct emu_conn_ops *ops, struct side *s);

/* Establish one connection pair through an auto-accepting listener. */
struct pair {
    struct lis l;
    struct emu_listener *ls;
    struct side a, p[1];
    struct emu_conn *ac;
};

void pair_up(struct pair *x, const struct emu_conn_ops *ops);
void pair_down(struct pair *x);
void check_one_terminal(struct side *s, int type);
int raw_connect(uint16_t port);

/* Read until EOF/RST; returns bytes read, or -1 on timeout. */
int raw_read_to_close(int fd, uint8_t *buf, int cap, int ms);
int recv_exact(int fd, uint8_t *buf, int len, int ms);

/* Run one suite (the fixture: fresh engines per test). */
int conn_fixture_main(Suite *s);

#endif
