# The netem cases of the labelled truth set (tests/truth_vm.rs), run by busybox sh inside the
# VM of scripts/vm-lab.sh (Debian's kernel: netem as a module). Writes into the working
# directory (/out, returned to the host), per run NAME:
#   NAME.server.json / NAME.client.json   the receiver's (server, -s -1 -J) and the sender's
#                                         (client, -c ... -J) JSON
#   NAME.tc.json                          `tc -s -j qdisc show dev a0` after the run
#   NAME.pcap                             (reorder runs) the data datagrams as they reached b0
# Topology: namespace a (10.77.0.1, the sender) --veth a0/b0-- namespace b (10.77.0.2, the
# receiver). On a0: prio, whose band 3 (handle 30:) is netem; a u32 filter sends only the
# test's data datagrams (UDP, IP total length 1024..2047) there, so that netem never touches
# the control connection or the 4-byte UDP connect datagram, and its counters count data only.
set -u
mkdir -p /var && ln -sf /run /var/run
ip netns add a
ip netns add b
ip link add a0 netns a type veth peer name b0 netns b
ip -n a addr add 10.77.0.1/24 dev a0
ip -n b addr add 10.77.0.2/24 dev b0
for n in a b; do ip -n $n link set lo up; done
ip -n a link set a0 up
ip -n b link set b0 up

netem() { # netem ARGS...: a fresh netem (fresh counters) on the data datagrams a -> b
    # One tc process (every exec costs ~0.3 s under TCG).
    cat >/tmp/tc.batch <<TC
qdisc add dev a0 root handle 1: prio
qdisc add dev a0 parent 1:3 handle 30: netem $*
filter add dev a0 parent 1: protocol ip prio 1 u32 match ip protocol 17 0xff match u16 0x0400 0xfc00 at 2 flowid 1:3
TC
    tc -n a qdisc del dev a0 root 2>/dev/null
    tc -n a -batch /tmp/tc.batch || exit 10
}

listening() { # listening PID PORT: wait up to 10 s for PID's TCP listener on PORT (its netns)
    hex=$(printf '%04X' "$2")
    i=0
    while [ $i -lt 200 ]; do
        while read -r _ addr _ st _; do
            case "$addr:$st" in *":$hex:0A") return 0 ;; esac
        done <"/proc/$1/net/tcp6" 2>/dev/null
        while read -r _ addr _ st _; do
            case "$addr:$st" in *":$hex:0A") return 0 ;; esac
        done <"/proc/$1/net/tcp" 2>/dev/null
        sleep 0.05
        i=$((i + 1))
    done
    echo "nothing listens on $2 in pid $1's namespace" >&2
    return 1
}

run() { # run NAME SENDER RECEIVER CLIENT_ARGS...: one UDP test a -> b; SENDER/RECEIVER: netperfd|iperf3
    name=$1 snd=$2 rcv=$3
    shift 3
    t0=$(cut -d' ' -f1 /proc/uptime)
    ip netns exec b "$rcv" -s -1 -J >"$name.server.json" 2>"$name.server.err" &
    spid=$!
    listening "$spid" 5201 || return 1
    ip netns exec a "$snd" -c 10.77.0.2 -u -J "$@" >"$name.client.json" 2>"$name.client.err"
    echo "$?" >"$name.client.rc"
    wait "$spid"
    echo "$?" >"$name.server.rc"
    tc -n a -s -j qdisc show dev a0 >"$name.tc.json"
    echo "$name: $snd -> $rcv $*: $(awk -v a="$t0" '{printf "%.1f", $1 - a}' /proc/uptime) s"
}

capture() { # capture NAME: tcpdump the data datagrams reaching b0 into NAME.pcap
    ip netns exec b tcpdump -Z root -i b0 -s 64 -U -w "$1.pcap" 'udp and greater 1000' 2>"$1.tcpdump.err" &
    cpid=$!
    i=0
    while [ $i -lt 100 ] && ! grep -q listening "$1.tcpdump.err"; do sleep 0.1; i=$((i + 1)); done
}

stop_capture() {
    sleep 0.3
    kill -INT "$cpid"
    wait "$cpid"
}

echo "modules:$VMLAB_MODULES"
# Loss: 10 % random, nothing else. 5 Mbit/s of 1448-byte datagrams: the pacer sends one
# datagram per wake-up (no GSO batch), so netem's drop counter counts datagrams.
netem loss 10%
run loss_nn netperfd netperfd -b 5M -l 1448 -t 2
netem loss 10%
run loss_in iperf3 netperfd -b 5M -l 1448 -t 2
netem loss 10%
run loss_ni netperfd iperf3 -b 5M -l 1448 -t 2

# Duplication: 10 %, nothing else.
netem duplicate 10%
run dup_nn netperfd netperfd -b 5M -l 1448 -t 2
netem duplicate 10%
run dup_in iperf3 netperfd -b 5M -l 1448 -t 2

# Reordering: 25 % of the datagrams leave at once, the others 10 ms later (a datagram every
# 2.3 ms: each early one overtakes the ~4 held back).
netem delay 10ms reorder 25%
capture reorder_nn
run reorder_nn netperfd netperfd -b 5M -l 1448 -t 2
stop_capture
netem delay 10ms reorder 25%
capture reorder_in
run reorder_in iperf3 netperfd -b 5M -l 1448 -t 2
stop_capture

# The noise floor of the delay path: 20 ms, no jitter (what the VM's timers add).
netem delay 20ms
run delay_ni netperfd iperf3 -b 320K -l 1000 -t 3

# Delay with jitter: 20 ms +- 10 ms, uniform (no distribution table). 1000-byte datagrams at
# 320 kbit/s: one every 25 ms, more than the 20 ms spread of the delay, so none overtakes
# another.
netem delay 20ms 10ms
run jitter_nn netperfd netperfd -b 320K -l 1000 -t 5
netem delay 20ms 10ms
run jitter_in iperf3 netperfd -b 320K -l 1000 -t 5

# Kernel pacing (issue 39 item 4): fq at a0's root paces the netperfd sender's socket
# (SO_MAX_PACING_RATE); the sender hands it 8 ms per wake-up. 20 Mbit/s of 1448-byte
# datagrams, netperfd's choice (auto: the kernel, fq on a0), then the user-space pacer through
# the same fq for comparison. fq's counters (sent packets, flows throttled) come with each run.
fq() {
    tc -n a qdisc del dev a0 root 2>/dev/null
    tc -n a qdisc add dev a0 root fq || exit 11
}
fq
run kpace_kernel netperfd netperfd -b 20M -l 1448 -t 2
fq
run kpace_user netperfd netperfd -b 20M -l 1448 -t 2 --udp-pacing user
echo done
