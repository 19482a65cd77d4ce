#!/usr/bin/env bash
# Two-process connection management through the public DAT API: the
# dat_cm_peer helper as server and client, through our libdat2 and
# through Debian's. Exit 0 pass.
set -u
. "$(cd "$(dirname "$0")" && pwd)/lib/peer_pair.sh"
pp_init dat_cm_peer
PP_SERVER_ARGS=(-n 4)
PP_CLIENT_ARGS=(-n 4)
pp_run "our libdat2: pdata both ways, disconnect from each side, reset+reuse, reject" ""
pp_run "our libdat2, IPv6 (::1)" "" softdat-lo6 ::1
pp_debian "Debian libdat2: same exchange"
exit $fail
