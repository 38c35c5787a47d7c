#!/bin/sh
# run_test.sh NAME COMMAND...   runs one test with its output in build/log/NAME.log and prints its
#                               count line, "NAME: N passed, M failed", which it also appends to
#                               build/results
# run_test.sh --summary [RC]    prints the sum of build/results, "N passed, M failed", and exits
#                               non-zero if any failed (or RC, make's own status, is not 0)
#
# A test prints its count line in that format (tests/check.h's check_summary; test_golden.sh);
# a program that counts nothing (the compile tests, a fuzzer) counts as one check that passes
# when it exits 0. A libFuzzer run's count line carries its "Done N runs in S second(s)".
# A non-zero exit is a failure even when the count line says none failed. On a failure the
# end of the log is printed. Run from the repository root (make test does).
B=${NEO_BUILD_DIR:-build}
RESULTS=$B/results

if [ "${1-}" = --summary ]; then
    rc=${2:-0}
    if [ ! -f "$RESULTS" ]; then
        echo "0 passed, 1 failed (no test ran)"
        exit 1
    fi
    set -- $(sed -n 's/.*: \([0-9][0-9]*\) passed, \([0-9][0-9]*\) failed.*/\1 \2/p' "$RESULTS" |
        awk '{ p += $1; f += $2 } END { print p + 0, f + 0 }')
    passed=$1 failed=$2
    if [ "$rc" -ne 0 ] && [ "$failed" -eq 0 ]; then
        echo "$passed passed, $failed failed (but make stopped with status $rc; see above)"
        exit 1
    fi
    echo "$passed passed, $failed failed"
    [ "$failed" -eq 0 ]
    exit
fi

if [ $# -lt 2 ]; then
    echo "usage: sh tests/run_test.sh NAME COMMAND... | --summary [RC]" >&2
    exit 2
fi
name=$1
shift
mkdir -p "$B/log"
log=$B/log/$(echo "$name" | tr ' /+' '___').log
t0=$(date +%s)
if "$@" >"$log" 2>&1 </dev/null; then rc=0; else rc=$?; fi
seconds=$(($(date +%s) - t0))

counts=$(sed -n 's/^[^ :]*: \([0-9][0-9]*\) passed, \([0-9][0-9]*\) failed.*/\1 \2/p' "$log" | tail -n 1)
detail=""
if [ -n "$counts" ]; then
    set -- $counts
    passed=$1 failed=$2
elif [ "$rc" -eq 0 ]; then
    passed=1 failed=0
else
    passed=0 failed=1
fi
runs=$(sed -n 's/^Done \([0-9]* runs in [0-9]* second(s)\).*/\1/p' "$log" | tail -n 1)
[ -n "$runs" ] && detail=" ($runs)"
if [ "$rc" -ne 0 ] && [ "$failed" -eq 0 ]; then
    failed=1
fi
[ "$rc" -ne 0 ] && detail="$detail (exit status $rc)"
line="$name: $passed passed, $failed failed$detail, ${seconds} s"
echo "$line" >>"$RESULTS"
if [ "$failed" -ne 0 ]; then
    echo "---- $log (last 40 lines)"
    tail -n 40 "$log"
    echo "----"
fi
echo "$line"
[ "$failed" -eq 0 ]
