# shellcheck shell=bash
# shellcheck disable=SC2034  # NS_* results are read by the sourcing script
# Two network "hosts" for end-to-end tests that must cross a real (virtual)
# link instead of loopback: the script's own private network namespace, A,
# and a child namespace, B, joined by a veth pair:
#   A = 10.77.0.1/24, fd77::1/64 (interface sd-va)
#   B = 10.77.0.2/24, fd77::2/64 (interface sd-vb)
# Private addresses that live only inside namespaces we create.
#
# Source after test/e2e/lib/interop.sh, which re-executes the script in a
# private namespace; in the host's namespace (IL_NETNS=host) we do not
# touch the host's interfaces, and ns_setup fails.
#
#   ns_setup      0 = ready; else NS_WHY says why (the caller skips). Creates
#                 B (held by a `sleep` we started, PID NS_PID, killed at exit
#                 through il_pids, or earlier by ns_cleanup), the veth pair
#                 and addresses, and a dat.conf ($NS_CONF) with IAs
#                 softdat-nsa / softdat-nsb (IPv4) and softdat-nsa6 /
#                 softdat-nsb6 (IPv6) for IL_CONF's softdat library.
#   ns_exec CMD   runs CMD inside B.
#   ns_cleanup    stops B now (the veth pair goes with it).
NS_A=10.77.0.1 NS_B=10.77.0.2 NS_A6=fd77::1 NS_B6=fd77::2
NS_PID='' NS_WHY='' NS_CONF=''

ns_setup() {
    local t i=0
    if [ "${IL_NETNS:-}" != private ]; then
        NS_WHY="not in a private network namespace (IL_NETNS=${IL_NETNS:-unset})"; return 1
    fi
    for t in ip nsenter unshare; do
        command -v "$t" >/dev/null 2>&1 || { NS_WHY="$t not installed"; return 1; }
    done
    unshare -n sleep 900 </dev/null >/dev/null 2>&1 &
    NS_PID=$!
    il_pids+=("$NS_PID")
    # The child has its own namespace once its net link differs from ours.
    until [ "$(readlink "/proc/$NS_PID/ns/net" 2>/dev/null)" != "$(readlink /proc/self/ns/net)" ]; do
        i=$((i + 1))
        if [ $i -gt 50 ] || ! kill -0 "$NS_PID" 2>/dev/null; then
            NS_WHY="cannot create a network namespace"; ns_cleanup; return 1
        fi
        sleep 0.1
    done
    if ! ip link add sd-va type veth peer name sd-vb 2>"$IL_TMP/veth.err" ||
        ! ip link set sd-vb netns "$NS_PID" 2>>"$IL_TMP/veth.err"; then
        NS_WHY="cannot create a veth pair: $(head -1 "$IL_TMP/veth.err")"; ns_cleanup; return 1
    fi
    if ! ip addr add "$NS_A/24" dev sd-va || ! ip -6 addr add "$NS_A6/64" dev sd-va nodad ||
        ! ip link set sd-va up; then
        NS_WHY="veth A setup"; ns_cleanup; return 1
    fi
    ns_exec sh -c "ip link set lo up && ip addr add $NS_B/24 dev sd-vb &&
                   ip -6 addr add $NS_B6/64 dev sd-vb nodad && ip link set sd-vb up" ||
        { NS_WHY="veth B setup"; ns_cleanup; return 1; }
    NS_CONF=$IL_TMP/netns-dat.conf
    awk -v a="$NS_A" -v b="$NS_B" -v a6="$NS_A6" -v b6="$NS_B6" '
        function both(l, from, ip, name, n) {
            sub(from, "\"" ip "\"", l); sub(/^softdat-lo6? /, name " ", l); print l
        }
        $1 == "softdat-lo" { both($0, "\"lo\"", a, "softdat-nsa"); both($0, "\"lo\"", b, "softdat-nsb") }
        $1 == "softdat-lo6" { both($0, "\"::1\"", a6, "softdat-nsa6"); both($0, "\"::1\"", b6, "softdat-nsb6") }
        ' "$IL_CONF" >"$NS_CONF"
    grep -q softdat-nsb "$NS_CONF" || { NS_WHY="no softdat-lo entry in $IL_CONF"; ns_cleanup; return 1; }
    # The link needs a moment before the first packet is not lost to DAD/carrier.
    i=0
    until ns_exec ip -br addr show dev sd-vb 2>/dev/null | grep -q UP; do
        i=$((i + 1)); [ $i -gt 50 ] && break; sleep 0.1
    done
    return 0
}

ns_exec() { nsenter -t "$NS_PID" -n "$@"; }

ns_cleanup() {
    if [ -n "$NS_PID" ] && kill -0 "$NS_PID" 2>/dev/null; then
        kill "$NS_PID" 2>/dev/null
        wait "$NS_PID" 2>/dev/null
    fi
    NS_PID=
}
