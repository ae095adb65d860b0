#!/usr/bin/env bash
# What `tcpwhy watch` costs a busy host (root). Two namespaces joined by veth (made here,
# removed on exit, also on Ctrl-C); a client paced at RATE connect()s a second for SECS, then
# one bulk transfer for SECS, each without and with `tcpwhy watch --all-netns` running.
# Measured: connections a second and Gbit/s achieved, the machine's CPU (/proc/stat), the
# watch process's CPU (user + system), and the BPF programs' own time (run_time_ns and run_cnt
# with kernel.bpf_stats_enabled=1, restored afterwards): CPU per program run and in all. The
# stats add two clock reads to every run: the cheapest program's run (in the connect run
# on_cong_state, which returns at its first test outside the Loss state) is printed as
# bpf_floor_ns_per_run, an upper bound on that, and bpf_cpu_pct_above_floor is the programs'
# time above it (a lower bound on their own work; the truth lies between the two).
#
#   sudo bash bench/watch-overhead.sh [RATE=20000] [SECS=10]
set -euo pipefail
cd "$(dirname "$0")/.."
RATE=${1:-20000}
SECS=${2:-10}
export PATH="$HOME/.cargo/bin:$PATH:/usr/sbin:/sbin"
[ "$(id -u)" = 0 ] || { echo "watch-overhead: needs root (namespaces, BPF)" >&2; exit 2; }
command -v bpftool >/dev/null || { echo "watch-overhead: needs bpftool (apt-get install bpftool)" >&2; exit 2; }
cargo build --release --quiet -p tcpwhy -p tcpwhy-watch --example connect_load
BIN=$PWD/target/release/tcpwhy
LOAD=$PWD/target/release/examples/connect_load
C=twbench$$c
S=twbench$$s
TMP=$(mktemp -d)
STATS=$(cat /proc/sys/kernel/bpf_stats_enabled)
WATCH_PID=
cleanup() {
  [ -n "$WATCH_PID" ] && kill -INT "$WATCH_PID" 2>/dev/null || true
  ip netns del "$C" 2>/dev/null || true
  ip netns del "$S" 2>/dev/null || true
  echo "$STATS" > /proc/sys/kernel/bpf_stats_enabled
  rm -rf "$TMP"
}
trap cleanup EXIT INT TERM
ip netns add "$C"
ip netns add "$S"
ip link add twb0 netns "$C" type veth peer name twb1 netns "$S"
ip -n "$C" addr add 10.250.0.1/24 dev twb0
ip -n "$S" addr add 10.250.0.2/24 dev twb1
for ns in "$C" "$S"; do ip -n "$ns" link set lo up; done
ip -n "$C" link set twb0 up
ip -n "$S" link set twb1 up
echo 1 > /proc/sys/kernel/bpf_stats_enabled

busy() { awk '/^cpu /{print $2+$3+$4+$7+$8, $2+$3+$4+$5+$6+$7+$8}' /proc/stat; }

# One run: $1 = none|watch, $2 = connect|bulk. Prints a JSON line.
run() {
  local mode=$1 kind=$2 port=$((5000 + RANDOM % 1000))
  ip netns exec "$S" "$LOAD" serve "10.250.0.2:$port" $((SECS + 3)) > "$TMP/serve" &
  local serve=$!
  sleep 0.3
  if [ "$mode" = watch ]; then
    /usr/bin/time -f '%U %S' -o "$TMP/watch-time" "$BIN" watch --all-netns --format json \
      --duration $((SECS + 60)) > "$TMP/watch.jsonl" 2> "$TMP/watch.err" &
    WATCH_PID=$!
    for _ in $(seq 300); do grep -q "watching" "$TMP/watch.err" 2>/dev/null && break; sleep 0.1; done
    # `time` forks: signal the watch process itself.
    WATCH_PID=$(pgrep -P "$WATCH_PID" -x tcpwhy || echo "$WATCH_PID")
  fi
  read -r b0 t0 < <(busy)
  if [ "$kind" = connect ]; then
    ip netns exec "$C" "$LOAD" connect "10.250.0.2:$port" "$RATE" "$SECS" > "$TMP/client"
  else
    ip netns exec "$C" "$LOAD" bulk "10.250.0.2:$port" "$SECS" > "$TMP/client"
  fi
  read -r b1 t1 < <(busy)
  local progs='{}'
  if [ "$mode" = watch ]; then
    progs=$(bpftool prog show --json | python3 -c '
import json, sys
out = {}
for p in json.load(sys.stdin):
    if p.get("name", "").startswith("on_"):
        out[p["name"]] = [p.get("run_cnt", 0), p.get("run_time_ns", 0)]
print(json.dumps(out))')
    kill -INT "$WATCH_PID"
    wait 2>/dev/null || true
    WATCH_PID=
  fi
  wait "$serve" 2>/dev/null || true
  python3 - "$mode" "$kind" "$TMP" "$b0" "$t0" "$b1" "$t1" "$progs" "$(nproc)" <<'PY'
import json, sys, os
mode, kind, tmp = sys.argv[1:4]
b0, t0, b1, t1 = map(float, sys.argv[4:8])
progs = json.loads(sys.argv[8]); cores = int(sys.argv[9])
client = json.load(open(os.path.join(tmp, "client")))
secs = client["seconds"]
row = {"mode": mode, "kind": kind, "seconds": secs,
       "host_cpu_pct_of_one_core": round((b1 - b0) / (t1 - t0) * cores * 100, 1)}
row.update({k: v for k, v in client.items() if k in ("per_s", "failed", "gbit_per_s")})
if mode == "watch":
    u, s = map(float, open(os.path.join(tmp, "watch-time")).read().split()[-2:])
    runs = sum(v[0] for v in progs.values()); ns = sum(v[1] for v in progs.values())
    summ = [json.loads(l) for l in open(os.path.join(tmp, "watch.jsonl")) if '"watch-summary"' in l]
    s0 = summ[-1] if summ else {}
    row.update({
        "watch_process_cpu_s": round(u + s, 3),
        "bpf_runs": runs,
        "bpf_ns_per_run": round(ns / runs, 1) if runs else None,
        "bpf_cpu_pct_of_one_core": round(ns / 1e9 / secs * 100, 2),
        "watch_total_cpu_pct_of_one_core": round((ns / 1e9 + u + s) / secs * 100, 2),
        "per_program": {k: {"runs": v[0], "ns_per_run": round(v[1] / v[0], 1) if v[0] else None} for k, v in progs.items()},
    })
    busy = [v[1] / v[0] for v in progs.values() if v[0] >= 1000]
    floor = min(busy) if busy else None
    row.update({
        "bpf_floor_ns_per_run": round(floor, 1) if floor else None,
        "bpf_cpu_pct_above_floor": round(max(0, ns - floor * runs) / 1e9 / secs * 100, 2) if floor else None,
        "events": s0.get("events"), "events_lost": s0.get("events_lost"),
    })
print(json.dumps(row))
PY
}

for kind in connect bulk; do
  for mode in none watch; do
    run "$mode" "$kind"
  done
done
