# shellcheck shell=bash
# Two network namespaces joined by a veth pair, for end-to-end tests that
# must cross a real (virtual) link instead of loopback. Source it from a
# script already running as root of a private network namespace (the
# interop.sh re-exec gives that: "unshare -rn" when not root); it never
# touches the host's namespace. Addresses are private to the namespaces
# this creates: 10.77.0.1 (here, sd-va) and 10.77.0.2 (the second
# namespace, sd-vb); IPv6 fd77::1 / fd77::2.
#
#   ns2_setup          0 = ready (NS2_PID holds the second namespace), else
#                      the reason is in NS2_WHY (the caller skips)
#   ns2_b CMD...       runs CMD in the second namespace
#   ns2_conf FILE LIB  writes a dat.conf with IAs softdat-nsa (sd-va) and
#                      softdat-nsb (sd-vb) for provider library LIB
#   ns2_cleanup        stops the namespace holder (by its PID)
NS2_PID= NS2_WHY=

ns2_setup() {
    local t
    for t in ip nsenter unshare; do
        command -v "$t" >/dev/null 2>&1 || { NS2_WHY="$t not installed"; return 1; }
    done
    if [ "${IL_NETNS:-}" = host ]; then
        NS2_WHY="no private network namespace (would touch the host's)"
        return 1
    fi
    ip link add sd-va type veth peer name sd-vb 2>/dev/null || { NS2_WHY="cannot create a veth pair"; return 1; }
    # The holder: a process in a fresh network namespace, bounded in time.
    unshare -n sleep 900 &
    NS2_PID=$!
    local i=0
    while [ "$(readlink /proc/$NS2_PID/ns/net 2>/dev/null)" = "$(readlink /proc/$$/ns/net)" ]; do
        i=$((i + 1))
        [ $i -gt 50 ] && { NS2_WHY="second namespace did not appear"; ns2_cleanup; return 1; }
        sleep 0.05
    done
    ip link set sd-vb netns "$NS2_PID" || { NS2_WHY="cannot move sd-vb"; ns2_cleanup; return 1; }
    ip addr add 10.77.0.1/24 dev sd-va &&
        ip -6 addr add fd77::1/64 dev sd-va nodad &&
        ip link set sd-va up &&
        ns2_b ip link set lo up &&
        ns2_b ip addr add 10.77.0.2/24 dev sd-vb &&
        ns2_b ip -6 addr add fd77::2/64 dev sd-vb nodad &&
        ns2_b ip link set sd-vb up || { NS2_WHY="cannot configure the link"; ns2_cleanup; return 1; }
    return 0
}

ns2_b() { nsenter -t "$NS2_PID" -n "$@"; }

ns2_conf() {
    cat >"$1" <<EOC
softdat-nsa u2.0 nonthreadsafe default $2 dapl.2.0 "sd-va" ""
softdat-nsa u2.0 threadsafe default $2 dapl.2.0 "sd-va" ""
softdat-nsb u2.0 nonthreadsafe default $2 dapl.2.0 "sd-vb" ""
softdat-nsb u2.0 threadsafe default $2 dapl.2.0 "sd-vb" ""
softdat-nsa6 u2.0 nonthreadsafe default $2 dapl.2.0 "fd77::1" ""
softdat-nsb6 u2.0 nonthreadsafe default $2 dapl.2.0 "fd77::2" ""
EOC
}

ns2_cleanup() {
    if [ -n "$NS2_PID" ] && kill -0 "$NS2_PID" 2>/dev/null; then
        kill "$NS2_PID" 2>/dev/null
        wait "$NS2_PID" 2>/dev/null
    fi
    NS2_PID=
}
