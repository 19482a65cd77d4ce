#!/usr/bin/env bash
# Two-process CSP model and dat_cr_handoff: the dat_csp_peer helper as
# server and client (dat_ep_common_connect), through our libdat2 (IPv4 and
# IPv6) and through Debian's, where the helper reaches the CSP calls
# Debian's registry does not export through our provider table. Exit 0 pass.
set -u
. "$(cd "$(dirname "$0")" && pwd)/lib/peer_pair.sh"
pp_init dat_csp_peer
pp_ok_detail() { grep -h -o 'CSP calls .*\|calling the provider table' "$tmp/server.log" | head -1; }
pp_run "our libdat2: CSP accept, handoff to PSP and RSP, reject" ""
pp_run "our libdat2, IPv6 (::1)" "" softdat-lo6 ::1
pp_debian "Debian libdat2: same exchange"
exit $fail
