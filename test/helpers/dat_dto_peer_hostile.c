/* dat_dto_peer inside a host program that exports libevent 1.4's symbol
 * names (hostile_host_syms.h), as Open MPI 1.6 built without
 * -fvisibility=hidden does. test/e2e/symbol_capture.sh runs it. */
#include "hostile_host_syms.h"

#include "dat_dto_peer.c"
