#!/usr/bin/env bash
# The benchmark's real-traffic capture (root): two network namespaces joined by a veth pair
# (MTU 1500, offloads off, IPv6 off), a Python server and client (bench/traffic.py) making
# SHORT short request/response connections, 4 bulk downloads and 8 persistent connections,
# captured with tcpdump in the client namespace (whole packets, as in the issue's anchor
# capture; SNAPLEN=96 in the environment for headers only). Traffic stays inside the
# namespaces; they are deleted on exit, also on failure or Ctrl-C.
#   bench/capture.sh OUT.pcap [SHORT=100000] [BULK_MB=400]
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
OUT="$1"; SHORT="${2:-100000}"; BULK="${3:-400}"
NA=twbench-a; NB=twbench-b
WORK="$(mktemp -d /tmp/twbench.XXXXXX)"
PIDS=()
cleanup() {
  for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done
  ip netns del "$NA" 2>/dev/null || true
  ip netns del "$NB" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT INT TERM
ip netns add "$NA"; ip netns add "$NB"
ip -n "$NA" link add twb-va mtu 1500 type veth peer name twb-vb netns "$NB"
for ns in "$NA" "$NB"; do
  ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1
  ip netns exec "$ns" sysctl -qw net.ipv4.ip_local_port_range="10000 65000"
  ip netns exec "$ns" sysctl -qw net.ipv4.tcp_tw_reuse=1
  ip -n "$ns" link set lo up
done
ip -n "$NA" addr add 10.98.0.1/24 dev twb-va
ip -n "$NB" addr add 10.98.0.2/24 dev twb-vb
ip netns exec "$NA" ethtool -K twb-va tso off gso off gro off >/dev/null
ip netns exec "$NB" ethtool -K twb-vb tso off gso off gro off >/dev/null
ip -n "$NA" link set twb-va up; ip -n "$NB" link set twb-vb up
ip netns exec "$NB" timeout 900 python3 "$HERE/traffic.py" server 10.98.0.2 "$WORK/ready" 900 &
PIDS+=($!)
for _ in $(seq 1 100); do [ -e "$WORK/ready" ] && break; sleep 0.1; done
ip netns exec "$NA" tcpdump -Z root -i twb-va -s "${SNAPLEN:-0}" -B 1048576 -w "$OUT" 2>"$WORK/td.log" &
TD=$!; PIDS+=("$TD")
for _ in $(seq 1 100); do grep -q "listening on" "$WORK/td.log" && break; sleep 0.1; done
ip netns exec "$NA" timeout 900 python3 "$HERE/traffic.py" client 10.98.0.2 "$SHORT" "$BULK" 8 4
sleep 2
kill -INT "$TD"; wait "$TD" || true
cat "$WORK/td.log" >&2
