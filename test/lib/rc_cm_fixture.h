/* The connection-management return-code audits (test_rc_cm.c,
 * test_rc_sp.c): PSPs on free ports, connects to 127.0.0.1, the next
 * connection request, on top of cm_fixture's sides. Linked from test/lib/
 * (libsdtest.a). */
#ifndef SOFTDAT_TEST_LIB_RC_CM_FIXTURE_H
#define SOFTDAT_TEST_LIB_RC_CM_FIXTURE_H

#include "test/lib/cm_fixture.h"

/* A PSP on a free port of s (*q gets the port). */
DAT_PSP_HANDLE mk_psp(struct side *s, DAT_PSP_FLAGS flags, DAT_CONN_QUAL *q);
/* dat_ep_connect of ep to 127.0.0.1 qualifier q with n bytes of private data pd. */
DAT_RETURN connect_to(struct side *c, DAT_EP_HANDLE ep, DAT_CONN_QUAL q, DAT_COUNT n, const void *pd);
/* The CR of the next request on s's CR EVD. */
DAT_CR_HANDLE next_cr(struct side *s);

#endif
