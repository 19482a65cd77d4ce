/* softdat CSP: the Common Service Point, a service point named by a socket
 * address (IP and port) and a communicator (socket domain/type/protocol)
 * instead of a conn qual. It is a struct sd_sp (psp.h) with the socket
 * part added; requests become CRs exactly as on a consumer-flag PSP. */
#ifndef SOFTDAT_PROVIDER_CSP_H
#define SOFTDAT_PROVIDER_CSP_H

#include <sys/socket.h>

#include "lib/provider/psp.h"

struct sd_csp {
    struct sd_sp sp;              /* first: a CSP is an SP */
    /* Constant once the CSP is published. */
    DAT_COMM comm;                /* what the consumer passed */
    struct sockaddr_storage addr; /* bound address, with the port in use */
    socklen_t addr_len;
};

/* True when a CSP takes requests that arrive on `local` (an IA address):
 * its address is that IP or the wildcard of its family. sp must be a CSP. */
bool sd_csp_serves(const struct sd_sp *sp, const struct sockaddr *local);

void sd_csp_fill_table(DAT_PROVIDER *p);

#endif
