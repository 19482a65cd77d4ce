# shellcheck shell=bash
# pcap_judge LABEL PCAP TRACE CRC: a SOFTDAT_PCAP capture decoded by tshark
# (MPA heuristic, docs/wire.md §5) against the same process's trace:
#   - zero malformed packets and zero expert errors;
#   - every TCP payload segment decodes as MPA or is part of a PDU tshark
#     reassembled (two passes);
#   - as many MPA Requests + Replies and as many FPDUs as the trace has
#     frame records (mpa_req/mpa_rep, fpdu);
#   - CRC on: a Good CRC32 for every FPDU, every fpdu record "crc":"ok".
# Prints "ok - ..." / "not ok - ..." through the caller's pj_ok/pj_notok.
PJ_R=(-o tcp.try_heuristic_first:TRUE --enable-heuristic iwarp_mpa_tcp
      --disable-heuristic rpcrdma_iwarp --disable-heuristic smb_direct_iwarp)
pcap_judge() {
    local label=$1 cap=$2 trace=$3 crc=$4
    pj_ts() { tshark -r "$cap" "${PJ_R[@]}" "$@" 2>/dev/null; }
    local bad undecoded mpa fpdus want_mpa want_fpdu good crc_ok
    bad=$(pj_ts -Y '_ws.malformed || _ws.expert.severity == error' | wc -l)
    undecoded=$(pj_ts -2 -Y 'tcp.len > 0 && !iwarp_mpa && !tcp.reassembled_in' | wc -l)
    mpa=$(pj_ts -Y 'iwarp_mpa.req || iwarp_mpa.rep' | wc -l)
    fpdus=$(pj_ts -Y iwarp_mpa.fpdu -T fields -e iwarp_mpa.ulpdulength -E occurrence=a -E aggregator=' ' | wc -w)
    want_mpa=$(grep -c '"rec":"frame".*"kind":"mpa_re[qp]"' "$trace")
    want_fpdu=$(grep -c '"rec":"frame".*"kind":"fpdu"' "$trace")
    if [ "$bad" -eq 0 ] && [ "$undecoded" -eq 0 ] && [ "$mpa" -eq "$want_mpa" ] && [ "$fpdus" -eq "$want_fpdu" ] &&
        [ "$fpdus" -gt 0 ]; then
        pj_ok "$label: tshark decodes $mpa MPA frames and $fpdus FPDUs = the trace's frame records, 0 malformed"
    else
        pj_notok "$label: malformed/errors $bad, undecoded segments $undecoded, MPA $mpa (trace $want_mpa)," \
            "FPDUs $fpdus (trace $want_fpdu)"
        pj_ts -2 -Y '_ws.malformed || _ws.expert.severity == error || (tcp.len > 0 && !iwarp_mpa && !tcp.reassembled_in)' |
            head -5 | sed 's/^/  # /'
    fi
    if [ "$crc" = on ]; then
        good=$(pj_ts -O iwarp_mpa | grep -c 'Good CRC32')
        crc_ok=$(grep -c '"rec":"frame".*"kind":"fpdu".*"crc":"ok"' "$trace")
        if [ "$good" -eq "$fpdus" ] && [ "$crc_ok" -eq "$want_fpdu" ]; then
            pj_ok "$label: CRC on: $good Good CRC32 in the capture, $crc_ok \"crc\":\"ok\" records"
        else
            pj_notok "$label: CRC on: Good CRC32 $good of $fpdus FPDUs, crc ok records $crc_ok of $want_fpdu"
        fi
    fi
}
