#!/usr/bin/env bash
# tcpwhy's benchmark: builds its captures, runs tcpwhy, tshark, tcptrace, tcpdump and a C
# header-walk (the floor) side by side, alternating them round by round, and prints wall time,
# packets/s, MB/s, peak RSS and the ratios; then two synthetic series: captures of 10 k .. 1 M
# (or 10 M) connections with 10 000 open at a time (cost per packet and memory as the capture
# grows), and 1 M connections with 10 k .. 1 M open at a time, idle between their exchange
# and their close (memory per open connection).
#
#   bench/run.sh [--short N] [--bulk-mb M] [--rounds R] [--scaling LIST] [--open LIST]
#                [--skip-slow] [--no-tmpfs] [--series-only]
#
# The captures are read from /dev/shm (tmpfs) when it has room: on the development VM the
# kernel's DAMON reclaim pages out cached file pages after about a second unused, so "page
# cache warm" runs read part of the file from disk again (2.2-4.7 s for the same run); tmpfs
# pages stay (no swap). Reads from tmpfs still copy through the page cache like a warm file.
# tshark runs with -o tcp.desegment_tcp_streams:FALSE (as in the issue's anchors: with stream
# reassembly it is quadratic on bulk transfers) and tcpdump with TZ=UTC (otherwise it stats
# /etc/localtime for every packet).
#
# --short/--bulk-mb size the real-traffic capture (bench/capture.sh, root: two namespaces,
# veth MTU 1500, offloads off; defaults 300 000 short connections and 2 000 MB of bulk
# downloads); it is built once and kept in bench/out/. --scaling is a comma list of connection
# counts for the first synthetic series (default 10000,100000,1000000; add 10000000 if you
# have the disk: 7 GB); --open the counts open at once for the second (default
# 10000,100000,1000000; 700 MB each). --skip-slow leaves out tshark's full analysis (the
# slowest row); --series-only runs only the synthetic series.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH:/usr/sbin:/sbin"
SHORT=300000; BULK=2000; ROUNDS=3; SCALING=10000,100000,1000000; OPEN=10000,100000,1000000; SKIP_SLOW=0; TMPFS=1; SERIES_ONLY=0
while (($#)); do
  case "$1" in
    --short) SHORT="$2"; shift 2 ;;
    --bulk-mb) BULK="$2"; shift 2 ;;
    --rounds) ROUNDS="$2"; shift 2 ;;
    --scaling) SCALING="$2"; shift 2 ;;
    --open) OPEN="$2"; shift 2 ;;
    --skip-slow) SKIP_SLOW=1; shift ;;
    --no-tmpfs) TMPFS=0; shift ;;
    --series-only) SERIES_ONLY=1; shift ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
need=()
command -v tshark >/dev/null || need+=(tshark)
command -v tcptrace >/dev/null || need+=(tcptrace)
command -v tcpdump >/dev/null || need+=(tcpdump)
command -v zstd >/dev/null || need+=(zstd)
command -v ethtool >/dev/null || need+=(ethtool)
command -v cc >/dev/null || need+=(gcc)
if ((${#need[@]})); then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi
cargo build --release --locked -p tcpwhy --bin tcpwhy --example synth 2>&1 | tail -1
OUT=bench/out; mkdir -p "$OUT"
cc -O2 -o "$OUT/walk" bench/walk.c
TCPWHY=target/release/tcpwhy

# measure LABEL CMD...: wall seconds and peak RSS (KB) of one run -> "wall rss"
measure() {
  shift # the label, for the reader
  /usr/bin/time -f "%e %M" -o "$OUT/time.txt" "$@" >/dev/null 2>"$OUT/stderr.txt" || {
    echo "failed: $*" >&2; cat "$OUT/stderr.txt" >&2; }
  cat "$OUT/time.txt" | tail -1
}
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

# stage FILE: the path to read it from (a tmpfs copy when there is room, see above)
STAGED=()
stage() {
  local f="$1" size avail
  size=$(stat -c %s "$f")
  avail=$(df -B1 --output=avail /dev/shm 2>/dev/null | tail -1 || echo 0)
  if ((TMPFS)) && [ -n "$avail" ] && ((avail > 2 * size)); then
    cp "$f" "/dev/shm/$(basename "$f")"
    echo "/dev/shm/$(basename "$f")"
  else
    cat "$f" >/dev/null; echo "$f"
  fi
}
trap 'rm -f "${STAGED[@]:-}"' EXIT
# The real-traffic rows (tool, median wall) and the series' rows, for the targets at the end.
: >"$OUT/tools.txt"
: >"$OUT/rows.txt"
if ! ((SERIES_ONLY)); then
REAL="$OUT/real-$SHORT-$BULK.pcap"
if [ ! -s "$REAL" ]; then
  echo "building $REAL (real kernel traffic in two namespaces; a few minutes)"
  bench/capture.sh "$REAL.tmp" "$SHORT" "$BULK" 2>"$OUT/capture.log" && mv "$REAL.tmp" "$REAL"
fi
FILE=$(stage "$REAL")
case "$FILE" in /dev/shm/*) STAGED+=("$FILE") ;; esac
PKTS=$("$OUT/walk" "$FILE" | awk '{print $1}')
MB=$(du -m "$FILE" | awk '{print $1}')
echo
echo "capture: $REAL: $PKTS packets, $MB MB ($(nproc) cores, read from $FILE, median of $ROUNDS rounds)"
declare -A CMD
CMD[floor]="$OUT/walk $FILE"
CMD[tcpwhy]="$TCPWHY analyze --quiet -o /dev/null $FILE"
CMD[tcpwhy-1thread]="$TCPWHY analyze --threads 1 --quiet -o /dev/null $FILE"
CMD[tcpwhy-json]="$TCPWHY analyze --quiet --format json -o /dev/null $FILE"
CMD[tcptrace]="tcptrace -l -n $FILE"
CMD[tcpdump]="env TZ=UTC tcpdump -r $FILE -nn -q"
CMD[tshark-conv]="tshark -o tcp.desegment_tcp_streams:FALSE -q -z conv,tcp -r $FILE"
CMD[tshark-expert]="tshark -o tcp.desegment_tcp_streams:FALSE -q -Y tcp.analysis.flags -z expert -r $FILE"
ORDER=(floor tcpwhy tcpwhy-1thread tcpwhy-json tcpdump tcptrace tshark-conv tshark-expert)
((SKIP_SLOW)) && ORDER=(floor tcpwhy tcpwhy-1thread tcpwhy-json tcpdump tcptrace tshark-conv)
declare -A WALL RSS
for r in $(seq 1 "$ROUNDS"); do
  for t in "${ORDER[@]}"; do
    read -r w m < <(measure "$t" ${CMD[$t]})
    WALL[$t]+="$w "; RSS[$t]+="$m "
  done
done
printf "%-14s %9s %12s %9s %11s %14s\n" tool wall packets/s MB/s "peak RSS" "tcpwhy is"
TW=$(echo ${WALL[tcpwhy]} | tr ' ' '\n' | median)
for t in "${ORDER[@]}"; do
  w=$(echo ${WALL[$t]} | tr ' ' '\n' | median)
  m=$(echo ${RSS[$t]} | tr ' ' '\n' | median)
  awk -v t="$t" -v w="$w" -v m="$m" -v p="$PKTS" -v mb="$MB" -v tw="$TW" 'BEGIN {
    if (w <= 0) w = 0.01;
    ratio = (t == "tcpwhy") ? "-" : (t == "floor" ? sprintf("%.1fx the floor", tw / w) : sprintf("%.1fx faster", w / tw));
    printf "%-14s %8.2fs %12.0f %9.0f %8.0f MB %14s\n", t, w, p / w, mb / w, m / 1024, ratio }'
  echo "$t $w" >>"$OUT/tools.txt"
done

# Compressed and standard input: the same capture as zstd (-3) and gzip (-1), built once,
# each decompressor alone beside tcpwhy on its output, and tcpwhy reading a pipe.
echo
echo "compressed and standard input (the same capture; median of $ROUNDS rounds):"
for z in zst gz; do
  if [ ! -s "$REAL.$z" ]; then
    case "$z" in
      zst) zstd -q -3 -T0 -c "$REAL" >"$REAL.$z.tmp" ;;
      gz) gzip -1 -c "$REAL" >"$REAL.$z.tmp" ;;
    esac
    mv "$REAL.$z.tmp" "$REAL.$z"
  fi
done
ZST=$(stage "$REAL.zst"); GZ=$(stage "$REAL.gz")
for f in "$ZST" "$GZ"; do case "$f" in /dev/shm/*) STAGED+=("$f") ;; esac; done
declare -A ZCMD
ZCMD[zstd-dc]="zstd -dc $ZST"
ZCMD[tcpwhy-zst]="$TCPWHY analyze --quiet -o /dev/null $ZST"
ZCMD[tcpwhy-zst-1thread]="$TCPWHY analyze --threads 1 --quiet -o /dev/null $ZST"
ZCMD[gzip-dc]="gzip -dc $GZ"
ZCMD[tcpwhy-gz]="$TCPWHY analyze --quiet -o /dev/null $GZ"
ZCMD[cat-pipe]="sh -c 'cat $FILE | $TCPWHY analyze --quiet -o /dev/null -'"
ZCMD[zstd-pipe]="sh -c 'zstd -dc $ZST | $TCPWHY analyze --quiet -o /dev/null -'"
ZORDER=(zstd-dc tcpwhy-zst tcpwhy-zst-1thread gzip-dc tcpwhy-gz cat-pipe zstd-pipe)
declare -A ZWALL
for r in $(seq 1 "$ROUNDS"); do
  for t in "${ZORDER[@]}"; do
    read -r w m < <(eval measure "$t" "${ZCMD[$t]}")
    ZWALL[$t]+="$w "
  done
done
for t in "${ZORDER[@]}"; do
  w=$(echo ${ZWALL[$t]} | tr ' ' '\n' | median)
  printf "  %-20s %8.2fs   %s\n" "$t" "$w" "${ZCMD[$t]//$OUT\//}"
  echo "$t $w" >>"$OUT/tools.txt"
done
fi

# synth N OPEN [SHAPE]: the synthetic capture's path, built once (the name carries the
# arguments; SHAPE spread, the default, or idle: see bench/synth.rs).
synth() {
  local f="$OUT/synth-$1-$2${3:+-$3}.pcap"
  [ -s "$f" ] || target/release/examples/synth "$1" "$2" "$f" ${3:+"$3"}
  echo "$f"
}

# run_series [TCPWHY ARGS...]: a table with one row per capture in CAPS (tcpwhy with every
# detector, median of ROUNDS); each row's open count and peak RSS also go to series.txt.
run_series() {
  local f w m n open
  printf "%12s %10s %12s %12s %10s %11s\n" connections "open" packets wall ns/packet "peak RSS"
  : >"$OUT/series.txt"
  for spec in "${CAPS[@]}"; do
    read -r n open shape <<<"$spec"
    f=$(stage "$(synth "$n" "$open" $shape)")
    local walls=() rss=()
    for r in $(seq 1 "$ROUNDS"); do
      read -r w m < <(measure tcpwhy "$TCPWHY" analyze --quiet -o /dev/null "$@" "$f")
      walls+=("$w"); rss+=("$m")
    done
    w=$(printf "%s\n" "${walls[@]}" | median); m=$(printf "%s\n" "${rss[@]}" | median)
    awk -v n="$n" -v o="$open" -v p="$((n * 10))" -v w="$w" -v m="$m" 'BEGIN {
      printf "%12d %10d %12d %11.2fs %10.0f %8.0f MB\n", n, o, p, w, w * 1e9 / p, m / 1024 }'
    echo "$open $m" >>"$OUT/series.txt"
    echo "$SERIES $n $open $w $m" >>"$OUT/rows.txt"
    case "$f" in /dev/shm/*) rm -f "$f" ;; esac
  done
}

echo
echo "scaling: synthetic short connections (bench/synth.rs, 10 packets each), tcpwhy with every"
echo "detector. Growing captures, 10 000 connections open at once: the cost per packet and the"
echo "memory should stay flat."
IFS=, read -ra NS <<<"$SCALING"
CAPS=(); for n in "${NS[@]}"; do CAPS+=("$n 10000"); done
SERIES=growing run_series

echo
echo "open at once: 1 M connections, more of them open at the same time (the flow table's"
echo "size; --max-connections 2000000 so nothing is evicted), each idle between its exchange"
echo "and its close like a pool of persistent connections: memory per open connection."
IFS=, read -ra OS <<<"$OPEN"
CAPS=(); for o in "${OS[@]}"; do CAPS+=("1000000 $o idle"); done
SERIES=open run_series --max-connections 2000000
sort -n "$OUT/series.txt" | awk 'NR == 1 { o0 = $1; m0 = $2 } { o = $1; m = $2 } END {
  if (o > o0) printf "memory per open connection: %.0f bytes ((peak RSS at %d open - at %d open) / %d)\n",
    (m - m0) * 1024 / (o - o0), o, o0, o - o0 }'

# Issue 7's targets, judged from this run's numbers: speed against the other tools on the
# real-traffic capture, memory per open connection (second series), flat cost per packet
# (first series, captures of 100 000 connections and more: the 10 000 one is mostly start-up)
# and a 10 GB capture (first series, when --scaling includes 14300000).
echo
echo "issue 7's targets, from this run:"
awk -v tools="$OUT/tools.txt" -v rows="$OUT/rows.txt" '
  function verdict(ok) { return ok ? "met" : "NOT met" }
  BEGIN {
    while ((getline l < tools) > 0) { split(l, f, " "); wall[f[1]] = f[2] }
    while ((getline l < rows) > 0) {
      split(l, f, " "); s = f[1]; n = f[2]; o = f[3]; w = f[4]; m = f[5]
      if (s == "open") { om[o] = m; if (o0 == "" || o < o0) o0 = o; if (o > o1) o1 = o }
      if (s == "growing" && n >= 100000) {
        ns = w * 1e9 / (n * 10); flat++
        if (lo == "" || ns < lo) lo = ns
        if (ns > hi) hi = ns
      }
      if (s == "growing" && n >= 14300000) big = m
    }
    t = wall["tcpwhy"]
    if (t > 0 && wall["floor"] > 0)
      printf "  %-44s %12s  %s\n", "within 3x of the header-walk floor", sprintf("%.1fx", t / wall["floor"]), verdict(t / wall["floor"] <= 3)
    if (t > 0 && wall["tcptrace"] > 0)
      printf "  %-44s %12s  %s\n", ">= 20x tcptrace", sprintf("%.1fx", wall["tcptrace"] / t), verdict(wall["tcptrace"] / t >= 20)
    if (t > 0 && wall["tshark-expert"] > 0)
      printf "  %-44s %12s  %s\n", ">= 100x tshark (full TCP analysis)", sprintf("%.1fx", wall["tshark-expert"] / t), verdict(wall["tshark-expert"] / t >= 100)
    # Compressed input keeps pace: no slower than 1.5x the slower of the decompressor alone
    # and tcpwhy on the uncompressed file (both must happen; on two cores they share them).
    if (t > 0 && wall["tcpwhy-zst"] > 0 && wall["zstd-dc"] > 0) {
      pace = wall["tcpwhy-zst"] / (wall["zstd-dc"] > t ? wall["zstd-dc"] : t)
      printf "  %-44s %12s  %s\n", "zstd input keeps pace (<= 1.5x, see script)", sprintf("%.2fx", pace), verdict(pace <= 1.5)
    }
    if (t > 0 && wall["tcpwhy-gz"] > 0 && wall["gzip-dc"] > 0) {
      pace = wall["tcpwhy-gz"] / (wall["gzip-dc"] > t ? wall["gzip-dc"] : t)
      printf "  %-44s %12s  %s\n", "gzip input keeps pace (<= 1.5x, see script)", sprintf("%.2fx", pace), verdict(pace <= 1.5)
    }
    if (o1 > o0) {
      b = (om[o1] - om[o0]) * 1024 / (o1 - o0)
      printf "  %-44s %12s  %s\n", "about 1 KB per open connection (<= 1.1 KB)", sprintf("%.0f B", b), verdict(b <= 1126)
    }
    if (flat >= 2)
      printf "  %-44s %12s  %s\n", "flat cost per packet (largest/smallest <= 1.25)", sprintf("%.0f-%.0f ns", lo, hi), verdict(hi / lo <= 1.25)
    if (big != "")
      printf "  %-44s %12s  %s\n", "10 GB of short connections under 500 MB", sprintf("%.0f MB", big / 1024), verdict(big / 1024 < 500)
    else
      printf "  %-44s %s\n", "10 GB of short connections under 500 MB", "not run (--scaling ...,14300000)"
  }'
