#!/bin/sh
# tests/fuzz/run.sh - build the libFuzzer targets, then fuzz each one.
#
#   tests/fuzz/run.sh [SECONDS] [TARGET ...]     (from the repository root)
#
# SECONDS per target (default 60); TARGETs default to all of them.  Each target
# starts from its seeds in tests/fuzz/corpus/<target>/ and keeps what it
# learns in build/fuzz/corpus/<target>/ (the seed directory is never
# written).  Crash/leak/timeout/OOM inputs go to build/fuzz/artifacts/<target>/,
# logs to build/fuzz/logs/<target>.log.  FUZZ_JOBS=2 runs two targets at a
# time (default 1).  Extra libFuzzer flags may be given in FUZZ_FLAGS.
# Exits non-zero if any target found a crash.
set -u

if [ ! -f proto/ndjson.h ] || [ ! -d tests/fuzz ]; then
    echo "run.sh: run me from the repository root" >&2
    exit 2
fi

SECONDS_EACH=${1:-60}
[ $# -gt 0 ] && shift
TARGETS=${*:-fuzz_ndjson_rpc fuzz_chan fuzz_codec fuzz_bindings fuzz_limits fuzz_jsonpass fuzz_tools fuzz_pattern fuzz_luadiff}
JOBS=${FUZZ_JOBS:-1}
OUT=build/fuzz

tests/fuzz/build.sh $TARGETS || exit 2
mkdir -p "$OUT/logs"

run_one() {
    t=$1
    mkdir -p "$OUT/corpus/$t" "$OUT/artifacts/$t"
    echo "== $t: ${SECONDS_EACH}s"
    # shellcheck disable=SC2086
    "$OUT/$t" -max_total_time="$SECONDS_EACH" -max_len=65536 -timeout=20 \
        -print_final_stats=1 -artifact_prefix="$OUT/artifacts/$t/" ${FUZZ_FLAGS:-} \
        "$OUT/corpus/$t" "tests/fuzz/corpus/$t" >"$OUT/logs/$t.log" 2>&1
    echo $? >"$OUT/logs/$t.rc"
}

set -- $TARGETS
while [ $# -gt 0 ]; do
    i=0
    while [ $# -gt 0 ] && [ $i -lt "$JOBS" ]; do
        run_one "$1" &
        shift
        i=$((i + 1))
    done
    wait
done

status=0
for t in $TARGETS; do
    rc=$(cat "$OUT/logs/$t.rc" 2>/dev/null || echo 99)
    stats=$(grep -E '^#[0-9]+' "$OUT/logs/$t.log" | tail -1)
    execs=$(grep -E 'stat::average_exec_per_sec' "$OUT/logs/$t.log" | awk '{print $2}')
    echo "$t: rc=$rc  ${stats}  avg exec/s: ${execs:-?}"
    if [ "$rc" != 0 ]; then
        status=1
        grep -E 'contract violated|ERROR: |SUMMARY: |Test unit written to' "$OUT/logs/$t.log" \
            | head -5 | sed 's/^/    /'
    fi
done
exit $status
