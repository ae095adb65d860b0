#!/usr/bin/env bash
# Fuzz every target for SECONDS each (default 60: CI's smoke run; one hour per target is the
# long run: `fuzz/smoke.sh 3600`). Needs the nightly toolchain; installs cargo-fuzz if missing.
# Seeds: the fixtures, fuzz/seeds/ and tcpdump's test captures under 64 KB
# (../shared/corpus/tcpdump-tests).
# A crash fails the run; the input is left in fuzz/artifacts/TARGET/: copy it to
# fixtures/fuzz/ (tests/it/fuzz_regressions.rs checks every file there) and fix the cause.
set -euo pipefail
cd "$(dirname "$0")"
SECONDS_EACH="${1:-60}"
export PATH="$HOME/.cargo/bin:$PATH"
# CI sets TCPWHY_FUZZ_REQUIRED=1: there a missing nightly is installed, and if that fails the
# run fails (a smoke run that skips itself silently proves nothing). By hand it is skipped.
if ! rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
  if [ "${TCPWHY_FUZZ_REQUIRED:-0}" = 1 ]; then
    echo "fuzz: no nightly toolchain; installing it (the fuzz smoke run is required here)" >&2
    if ! rustup toolchain install nightly --profile minimal >&2 \
      || ! rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
      echo "fuzz: FAILED: the nightly toolchain is missing and could not be installed" >&2
      exit 1
    fi
  else
    echo "fuzz: no nightly toolchain here; skipping the fuzz smoke run (rustup toolchain install nightly)" >&2
    exit 0
  fi
fi
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked --quiet
CORPUS_SRC="${TCPWHY_CORPUS:-../../shared/corpus/tcpdump-tests}"
for t in capture pipeline decode; do
  mkdir -p "corpus/$t"
done
cp ../fixtures/captures/*.pcap* ../fixtures/captures/*.zst ../fixtures/lab/*.pcap ../fixtures/fuzz/* corpus/pipeline/ 2>/dev/null || true
# Hand-built seeds for paths the captures above never reach (seeds/*.py build them).
cp seeds/*.pcap* corpus/pipeline/ 2>/dev/null || true
if [ -d "$CORPUS_SRC" ]; then
  mapfile -d '' -t seeds < <(find "$CORPUS_SRC" -type f -size -64k -print0 | sort -z)
  ((${#seeds[@]})) && cp "${seeds[@]:0:400}" corpus/pipeline/
fi
cp corpus/pipeline/* corpus/capture/
# -a: with debug assertions, so an arithmetic overflow panics (a release build wraps it into a
# wrong span or deadline: pcapng times 146 000 years apart did that, unseen by the fuzzers).
cargo +nightly fuzz build -O -a
for t in capture pipeline decode; do
  echo "fuzz: $t for ${SECONDS_EACH} s"
  cargo +nightly fuzz run -O -a "$t" "corpus/$t" -- -max_total_time="$SECONDS_EACH" \
    -rss_limit_mb=2048 -max_len=1048576 -print_final_stats=1 2>&1 | grep -E "^(Done|stat::number_of_executed_units|==|thread)|panicked" || true
  # (one ls over three globs failed whenever one of them matched nothing: a crash went unseen)
  if compgen -G "artifacts/$t/crash-*" >/dev/null || compgen -G "artifacts/$t/oom-*" >/dev/null \
    || compgen -G "artifacts/$t/timeout-*" >/dev/null; then
    echo "fuzz: $t found a failing input: fuzz/artifacts/$t/" >&2
    exit 1
  fi
done
