#!/usr/bin/env bash
# Coverage-guided fuzzing (cargo-fuzz / libFuzzer, nightly toolchain) of every parser that
# reads bytes from the network; the targets are in fuzz/fuzz_targets (see docs/fuzzing.md).
#
#   scripts/fuzz.sh                 1,000,000 runs of every target (the campaign)
#   scripts/fuzz.sh --smoke [SECS]  SECS seconds (default 20) of every target (CI), built
#                                   with the dev profile (--dev: overflow checks and debug
#                                   assertions on, a build about half as long; the campaign
#                                   builds optimized)
#   scripts/fuzz.sh TARGET...       only these targets (either mode)
#
# Corpora are seeded from tests/vectors (params, results, iperf 2 captures) and a few
# hand-written HTTP heads / peer specs, and kept in fuzz/corpus/TARGET (not committed).
# Every run is bounded: -malloc_limit_mb=512 (no input may make a parser allocate more at
# once), -rss_limit_mb=1024 for the whole process (ASan's quarantine and the corpus take
# ~480 MB by themselves: the peer_answer campaign stopped at 512 MB after 783,875 runs on an
# empty input, a limit of the process, not of any input),
# -timeout=10 (no input may loop), -max_len=1 MiB + 4 (the largest frame a server reads).
# A crash, leak, OOM or timeout fails the script; its input is in fuzz/artifacts/TARGET.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD

MODE=runs
SECS=20
RUNS=${FUZZ_RUNS:-1000000}
if [[ ${1:-} == --smoke ]]; then
    MODE=smoke
    shift
    if [[ ${1:-} =~ ^[0-9]+$ ]]; then SECS=$1; shift; fi
fi
ALL=(iperf3_frame iperf3_params iperf3_results iperf3_udp iperf2_wire http_head peer_spec peer_answer history_import suite_def schedule)
TARGETS=("$@")
[[ ${#TARGETS[@]} -gt 0 ]] || TARGETS=("${ALL[@]}")

if ! cargo +nightly --version >/dev/null 2>&1; then
    echo "fuzz: the nightly toolchain is needed (rustup toolchain install nightly)" >&2
    exit 1
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "fuzz: installing cargo-fuzz"
    cargo install cargo-fuzz --locked
fi

# Write bytes given as hex digits to a file.
hex2bin() {
    local hex=$1 out=$2 i esc=""
    for ((i = 0; i < ${#hex}; i += 2)); do esc+="\\x${hex:i:2}"; done
    printf "$esc" >"$out"
}

# A file's contents behind iperf3's 4-byte big-endian length.
framed() {
    local body=$1 out=$2 len
    len=$(wc -c <"$body")
    hex2bin "$(printf '%08x' "$len")" "$out"
    cat "$body" >>"$out"
}

seed() {
    local c=fuzz/corpus f n=0
    mkdir -p "$c"/{iperf3_frame,iperf3_params,iperf3_results,iperf3_udp,iperf2_wire,http_head,peer_spec,peer_answer,history_import,suite_def,schedule}
    for f in tests/vectors/iperf3-3.12/params-*.json; do
        cp "$f" "$c/iperf3_params/"
        framed "$f" "$c/iperf3_frame/$(basename "$f")"
    done
    for f in tests/vectors/iperf3-3.12/results-*.json; do
        cp "$f" "$c/iperf3_results/"
        framed "$f" "$c/iperf3_frame/$(basename "$f")"
    done
    # iperf 2 captures: datagrams and headers as big-endian 32-bit words.
    for f in tests/vectors/iperf2-2.1.8/capture-*.txt; do
        while IFS= read -r words; do
            n=$((n + 1))
            hex2bin "$words" "$c/iperf2_wire/$(basename "$f" .txt)-$n"
            # The same words as iperf3-style UDP datagrams: flags byte, then length bytes.
            hex2bin "00$(printf '%02x' $(((${#words} / 2 - 1) % 64)))$words" "$c/iperf3_udp/$(basename "$f" .txt)-$n"
        done < <(grep -o "ints=\[[^]]*\]" "$f" | sed "s/ints=//; s/[][' ]//g; s/0x//g" |
            awk -F, '{ s = ""; for (i = 1; i <= NF; i++) s = s sprintf("%08s", $i); gsub(/ /, "0", s); print s }')
    done
    # iperf 2 TCP connections: their first 64 bytes, in hex.
    for f in tests/vectors/iperf2-2.1.8/capture-tcp*.txt; do
        while IFS= read -r hex; do
            n=$((n + 1))
            hex2bin "$hex" "$c/iperf2_wire/$(basename "$f" .txt)-$n"
        done < <(grep -o "first 64: [0-9a-f]*" "$f" | sed 's/first 64: //')
    done
    # iperf3 UDP: sec, usec, 32-bit and 64-bit sequence numbers.
    hex2bin "000f000000010000000200000003000f0000000100000002000000000000000400" "$c/iperf3_udp/seq32"
    hex2bin "010f00000001000000020000000000000003000f000000010000000200000000000004" "$c/iperf3_udp/seq64"
    printf 'GET /payload?size=10M HTTP/1.1\r\nHost: board\r\nRange: bytes=0-1023\r\nUser-Agent: curl/8\r\n\r\n' >"$c/http_head/range"
    printf 'GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n' >"$c/http_head/http10"
    printf 'POST /sink HTTP/1.1\r\nContent-Length: 100\r\nRange: bytes=-5\r\n\r\n' >"$c/http_head/post"
    printf 'bytes=5-' >"$c/http_head/open-range"
    printf '{"host":"192.168.1.1","port":5201,"time":10,"parallel":4,"reverse":true}' >"$c/peer_spec/reverse"
    printf '{"host":"fe80::1%%eth0","udp":true,"bitrate":100000000,"length":1400}' >"$c/peer_spec/udp"
    printf '{"host":"board.local","bidir":true,"time":86400}' >"$c/peer_spec/bidir"
    # Agent answers (first byte: the cap / 257, 255 = none; second: where the reads split).
    printf '\xff\x80HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 8\r\n\r\n{"id":7}' >"$c/peer_answer/length"
    printf '\xff\x40HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\n{"a"\r\n3;x=y\r\n:1}\r\n0\r\nT: 1\r\n\r\n' >"$c/peer_answer/chunked"
    printf '\x10\x20HTTP/1.0 401 Unauthorized\r\n\r\n{"error":"missing or wrong token"}' >"$c/peer_answer/eof"
    printf '\xff\x10HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffff\r\nab\r\n0\r\n\r\n' >"$c/peer_answer/huge-chunk"
    printf '\x01\xf0HTTP/1.1 204 No Content\r\nContent-Length: 18446744073709551615\r\n\r\n' >"$c/peer_answer/cl-max"
    # History files: one run with a suite, a leg and run data (times in 2026).
    printf '%s' '{"format":"netperfd-history","version":1,"board":{"id":"ab12","label":"a"},"suite_defs":[{"name":"q","builtin":false,"body":{"name":"q","steps":[]}}],"suites":[{"id":1,"name":"q","peer_host":"192.0.2.2","status":"completed","created_at":1796000000000,"ended_at":1796000010000,"def_name":"q","origin_board":"ab12","origin_id":1}],"runs":[{"id":1,"role":"client","protocol":"TCP","status":"completed","peer_host":"192.0.2.2","peer_port":5201,"direction":"send","params_json":"{}","started_at":1796000000000,"ended_at":1796000001000,"kind":"multi","suite_id":1,"origin_board":"ab12","origin_id":1},{"id":2,"role":"client","protocol":"UDP","status":"failed","peer_host":"192.0.2.2","peer_port":5201,"direction":"receive","params_json":"{\"time\":1}","started_at":1796000000000,"kind":"iperf3","parent_id":1,"error":"x","origin_board":"ab12","origin_id":2}],"run_data":{"intervals":[{"run_id":2,"seq":0,"stream_id":1,"socket":5,"start":0.0,"end":1.0,"bytes":10,"bits_per_second":80.0,"sender":0,"omitted":0,"packets":3,"lost":1,"jitter_ms":0.1}],"streams":[{"run_id":2,"stream_id":1,"socket":5,"local_sender":0,"sender_bytes":10,"sender_seconds":1.0,"retransmits":0,"max_snd_cwnd":0,"min_rtt":0,"mean_rtt":0,"max_rtt":0}]}}' >"$c/history_import/suite-and-leg"
    printf '%s' '{"format":"netperfd-history","version":1,"board":{"id":"cd34"},"runs":[{"id":7,"role":"server","protocol":"TCP","status":"aborted","peer_host":"h","peer_port":1,"direction":"bidir","params_json":"{}","started_at":1796000000000,"kind":"http-serve","summary_json":"{\"connections\":2}","origin_board":"cd34","origin_id":7}]}' >"$c/history_import/served"
    printf '%s' '{"name":"seed","steps":[{"kind":"tcp","direction":"send","time":5},{"kind":"udp","direction":"receive","bitrate":"100M"}]}' >"$c/suite_def/tcp-udp"
    printf '%s' '{"name":"ladder","time":2,"steps":[{"kind":"tcp","direction":"bidir","parallel":4}]}' >"$c/suite_def/bidir"
    printf '%s' '{"suite":"seed","host":"192.0.2.2","every":"2h","stop_at":"2026-12-31"}' >"$c/schedule/every"
    printf '%s' '{"suite":"3","host":"board.local","daily_at":"06:30","enabled":false}' >"$c/schedule/daily"
    printf '%s' '90m' >"$c/schedule/period"
}

seed
mkdir -p fuzz/logs
status=0
for t in "${TARGETS[@]}"; do
    if [[ $MODE == smoke ]]; then
        limit=(-max_total_time="$SECS")
        profile=(--dev)
    else
        limit=(-runs="$RUNS")
        profile=()
    fi
    log=fuzz/logs/$t.log
    start=$(date +%s)
    echo "=== fuzz $t (${limit[*]})"
    if ! nice -n 10 cargo +nightly fuzz run "${profile[@]}" --fuzz-dir fuzz "$t" "fuzz/corpus/$t" -- \
        "${limit[@]}" -rss_limit_mb=1024 -malloc_limit_mb=512 -timeout=10 -max_len=1048580 \
        -print_final_stats=1 >"$log" 2>&1; then
        echo "fuzz $t FAILED: see $ROOT/$log and fuzz/artifacts/$t" >&2
        tail -40 "$log" >&2
        status=1
    fi
    runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
    rss=$(grep -o 'stat::peak_rss_mb: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
    echo "fuzz $t: ${runs:-?} runs in $(($(date +%s) - start)) s, peak RSS ${rss:-?} MB"
done
exit $status
