#!/usr/bin/env bash
# The md5 of tcpwhy's output on every fixture, the real-world corpus and any extra captures,
# one line per run: compare two builds with
#   diff <(bench/same-output.sh OLD) <(bench/same-output.sh NEW)
# A change that must leave the output byte for byte the same shows no line.
#
#   bench/same-output.sh TCPWHY [EXTRA.pcap ...]
#
# Every fixture and corpus capture: `--format json` with the default threads and with
# `--threads 1`; tcpdump's test captures (TCPWHY_CORPUS) JSON with the default threads; the
# extra captures (large synthetic ones, say) also as text and with `--max-connections 1000`
# (the table full: evictions). Exit codes are part of the line (1: a --fail-on hit, 2: an
# error). Run from anywhere: paths are taken from the project's root.
set -uo pipefail
cd "$(dirname "$0")/.."
BIN="$1"; shift
CORPUS="${TCPWHY_REAL_CORPUS:-../shared/corpus/real}"
TCPDUMP="${TCPWHY_CORPUS:-../shared/corpus/tcpdump-tests}"
run() { # LABEL ARGS...
  local label="$1"; shift
  local sum rc
  sum=$("$BIN" analyze --quiet "$@" 2>/dev/null | md5sum | cut -c1-32; exit "${PIPESTATUS[0]}")
  rc=$?
  echo "$sum rc=$rc $label"
}
mapfile -t files < <(find fixtures -name '*.pcap*' -type f | sort; ls "$CORPUS"/*.pcap* 2>/dev/null | sort)
mapfile -t tcpdump < <(find "$TCPDUMP" -type f 2>/dev/null | sort)
for f in "${files[@]}"; do
  run "json $f" --format json "$f"
  run "json-1 $f" --format json --threads 1 "$f"
done
# tcpdump's test captures (most are not TCP, some are broken on purpose): JSON only.
for f in "${tcpdump[@]}"; do
  run "json $f" --format json "$f"
done
for f in "$@"; do
  run "json $f" --format json "$f"
  run "json-1 $f" --format json --threads 1 "$f"
  run "text $f" "$f"
  run "json-cap $f" --format json --max-connections 1000 "$f"
  run "json-1-cap $f" --format json --threads 1 --max-connections 1000 "$f"
done
