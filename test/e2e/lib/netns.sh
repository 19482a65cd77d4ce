# shellcheck shell=bash
# shellcheck disable=SC2034  # NS_* results are read by the sourcing script
# Two network "hosts" for end-to-end tests: the script's own (private)
# network namespace, A, and a child namespace, B, joined by a veth pair:
# A = 192.0.2.1/24 (interface sdveth-a), B = 192.0.2.2/24 (sdveth-b).
# 192.0.2.0/24 is TEST-NET-1 and lives only inside namespaces we create.
#
# Source after test/e2e/lib/interop.sh, which re-executes the script in a
# private namespace; in the host's namespace (IL_NETNS=host) we do not
# touch the host's interfaces, and ns_setup fails.
#
# ns_setup: creates B (held by a `sleep` we started, PID NS_PID, killed by
# PID at exit through il_pids), the veth pair and addresses, and a dat.conf
# ($NS_CONF) with IA softdat-nsa (192.0.2.1) and softdat-nsb (192.0.2.2).
# Returns 1 (with NS_WHY set) when namespaces or veth are not available.
# ns_exec CMD...: runs CMD inside B.
NS_A=192.0.2.1 NS_B=192.0.2.2
NS_PID='' NS_WHY=''

ns_setup() {
    if [ "$IL_NETNS" != private ]; then
        NS_WHY="not in a private network namespace (IL_NETNS=$IL_NETNS)"; return 1
    fi
    command -v nsenter >/dev/null 2>&1 || { NS_WHY="no nsenter"; return 1; }
    unshare -n sleep 600 </dev/null >/dev/null 2>&1 &
    NS_PID=$!
    il_pids+=("$NS_PID")
    local i=0
    # The child has its own namespace once its net link differs from ours.
    until [ "$(readlink "/proc/$NS_PID/ns/net" 2>/dev/null)" != "$(readlink /proc/self/ns/net)" ]; do
        i=$((i + 1))
        if [ $i -gt 50 ] || ! kill -0 "$NS_PID" 2>/dev/null; then
            NS_WHY="cannot create a network namespace"; return 1
        fi
        sleep 0.1
    done
    if ! ip link add sdveth-a type veth peer name sdveth-b 2>"$IL_TMP/veth.err" ||
        ! ip link set sdveth-b netns "$NS_PID" 2>>"$IL_TMP/veth.err"; then
        NS_WHY="cannot create a veth pair: $(head -1 "$IL_TMP/veth.err")"; return 1
    fi
    if ! ip addr add "$NS_A/24" dev sdveth-a || ! ip link set sdveth-a up; then
        NS_WHY="veth A setup"; return 1
    fi
    nsenter -t "$NS_PID" -n sh -c "ip link set lo up && ip addr add $NS_B/24 dev sdveth-b && ip link set sdveth-b up" ||
        { NS_WHY="veth B setup"; return 1; }
    NS_CONF=$IL_TMP/netns-dat.conf
    awk -v a="$NS_A" -v b="$NS_B" '$1 == "softdat-lo" {
            l = $0; sub(/"lo"/, "\"" a "\"", l); sub(/^softdat-lo /, "softdat-nsa ", l); print l
            l = $0; sub(/"lo"/, "\"" b "\"", l); sub(/^softdat-lo /, "softdat-nsb ", l); print l
        }' "$IL_CONF" >"$NS_CONF"
    grep -q softdat-nsb "$NS_CONF" || { NS_WHY="no softdat-lo entry in $IL_CONF"; return 1; }
    # The link needs a moment before the first packet is not lost to DAD/carrier.
    i=0
    until nsenter -t "$NS_PID" -n ip -br addr show dev sdveth-b 2>/dev/null | grep -q UP; do
        i=$((i + 1)); [ $i -gt 50 ] && break; sleep 0.1
    done
    return 0
}

ns_exec() { nsenter -t "$NS_PID" -n "$@"; }
