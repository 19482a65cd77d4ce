/* Two-sided connection tests through the provider table (test_cm.c,
 * test_csp.c, the rc_* audits): an IA on 127.0.0.1 with a PZ and CR /
 * connection / DTO EVDs per side, EP creation and event waits. Linked
 * from test/lib/ (libsdtest.a). */
#ifndef SOFTDAT_TEST_LIB_CM_FIXTURE_H
#define SOFTDAT_TEST_LIB_CM_FIXTURE_H

#include <netinet/in.h>

#include "test/lib/prov_fixture.h"

struct side {
    DAT_PROVIDER *p;
    DAT_IA_HANDLE ia;
    DAT_PZ_HANDLE pz;
    DAT_EVD_HANDLE cr, conn, dto;
};

/* Open an IA of p with a PZ and CR (16), connection (16), DTO (64) EVDs. */
void side_open(struct side *s, DAT_PROVIDER *p);
void side_close(struct side *s);
/* An EP with the side's PZ and EVDs. */
DAT_EP_HANDLE mk_ep(struct side *s);
/* The next event on evd (5 s at most), which must be `want`. */
DAT_EVENT wait_ev(struct side *s, DAT_EVD_HANDLE evd, DAT_EVENT_NUMBER want);
/* No event on evd within us. */
void no_event(struct side *s, DAT_EVD_HANDLE evd, DAT_TIMEOUT us);
DAT_EP_STATE ep_state(struct side *s, DAT_EP_HANDLE ep);
/* An IPv4 address (ip, port). */
struct sockaddr_in v4(const char *ip, unsigned port);
/* A port nobody listens on right now (a PSP of s created and freed). */
DAT_CONN_QUAL free_port(struct side *s);

#endif
