#!/bin/sh
# test_snippets.sh - the quick-start programs of the documentation are real programs.
#
# README.md and the manual at the top of neo_attn.h show the same complete programs, each
# starting with a line "// quick start N: ...". This script cuts program N out of both files,
# checks that the two copies are the same text, then compiles it
#   - as C11 with -Wall -Wextra -Wpedantic -Werror under ASan + UBSan (leaks are errors), and
#   - as C++17 with -Wmissing-field-initializers too, each `= {0};` written `= {};` as the
#     manual says a C++ program writes it,
# and runs both builds, which must exit 0. It also checks that the two files' "Supported GPUs:"
# lines say the same.
#
# Usage: sh tests/test_snippets.sh [build-dir [all|build|run]]
#   all (the default) builds and runs; build cuts out and compiles the programs (make test does
#   this with the other builds; it exits non-zero, saying why, when one does not compile); run
#   runs what build made and prints the count line.
# NEO_SNIPPET_IMPL_C and NEO_SNIPPET_IMPL_CXX may name objects holding the implementation, built
# with the same flags (C: ASan + UBSan; C++), that the programs then link instead of compiling
# the implementation again: make test's objects, which its other tests compile the same way.
set -u
MODE=${2:-all}
B=${1:-build}/snippets
case "$B" in /*) ;; *) B="./$B" ;; esac
CC=${CC:-cc}
CXX=${CXX:-c++}
WARN="-Wall -Wextra -Wpedantic -Werror -Wshadow"
SAN="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
PROGRAMS="1 2"
IMPL_C=${NEO_SNIPPET_IMPL_C:-}
IMPL_CXX=${NEO_SNIPPET_IMPL_CXX:-}
# a program whose implementation comes from an object: its own NEO_ATTN_IMPLEMENTATION compiles
# nothing (the implementation's include guard is already defined)
[ -n "$IMPL_C" ] && IMPL_C="-DNEO_ATTN_IMPLEMENTATION_INCLUDED $IMPL_C"
[ -n "$IMPL_CXX" ] && IMPL_CXX="-DNEO_ATTN_IMPLEMENTATION_INCLUDED $IMPL_CXX"
case $MODE in all|build|run) ;; *) echo "usage: sh tests/test_snippets.sh [build-dir [all|build|run]]" >&2; exit 2 ;; esac
mkdir -p "$B" || exit 1
passed=0
failed=0

fail() { echo "test_snippets: FAIL: $*"; failed=$((failed + 1)); }

# program N from the manual: the comment before the header guard, code indented by 7 spaces
from_manual() {
    awk -v n="$1" '
        /^#ifndef NEO_ATTN_H_INCLUDED/ { exit }
        !on && substr($0, 8) ~ ("^// quick start " n ":") { on = 1 }
        on { line = substr($0, 1, 7); if (line !~ /^ *$/) { print "misindented: " $0 > "/dev/stderr"; exit 1 }
             print substr($0, 8); if (substr($0, 8) == "int main(void) {") m = 1
             if (m && substr($0, 8) == "}") exit }' neo_attn.h
}

# program N from the README: the fenced block whose first line is its "// quick start N:"
from_readme() {
    awk -v n="$1" '
        /^```/ { if (on) exit; fence = 1; next }
        fence && !on && $0 ~ ("^// quick start " n ":") { on = 1 }
        { fence = 0 }
        on { print }' README.md
}

# build: cut program N out of both texts, compare, compile as C (ASan + UBSan) and as C++
build() {
    n=$1
    src="$B/quick_start_$n.c"
    rm -f "$B/quick_start_$n" "$B/quick_start_${n}_cc"
    from_manual "$n" > "$src"
    from_readme "$n" > "$B/readme_$n.c"
    if [ ! -s "$src" ] || ! grep -q '^int main(void) {$' "$src" || [ "$(tail -n 1 "$src")" != "}" ]; then
        fail "quick start $n: not found whole in neo_attn.h's manual"; return
    fi
    if ! cmp -s "$src" "$B/readme_$n.c"; then
        fail "quick start $n: README.md and neo_attn.h differ:"; diff "$src" "$B/readme_$n.c"; return
    fi
    # shellcheck disable=SC2086 # IMPL_C, IMPL_CXX: a flag and an object, or nothing
    $CC -std=c11 $WARN -Wstrict-prototypes -O1 -g $SAN -I. "$src" $IMPL_C \
        -o "$B/quick_start_$n" -lm -lpthread || fail "quick start $n as C (ASan + UBSan): does not compile"
    sed 's/= {0};/= {};/g' "$src" > "$B/quick_start_$n.cc"
    # shellcheck disable=SC2086
    $CXX -std=c++17 $WARN -Wmissing-field-initializers -O1 -g -I. "$B/quick_start_$n.cc" $IMPL_CXX \
        -o "$B/quick_start_${n}_cc" -lm -lpthread || fail "quick start $n as C++: does not compile"
}

# run: both builds of program N must exist and exit 0
run() {
    n=$1
    if [ -x "$B/quick_start_$n" ] && ASAN_OPTIONS=detect_leaks=1 "$B/quick_start_$n"; then
        passed=$((passed + 1))
    else
        fail "quick start $n as C (ASan + UBSan)"
    fi
    if [ -x "$B/quick_start_${n}_cc" ] && "$B/quick_start_${n}_cc"; then
        passed=$((passed + 1))
    else
        fail "quick start $n as C++"
    fi
}

for n in $PROGRAMS; do
    [ "$MODE" = run ] || build "$n"
done
if [ "$MODE" = build ]; then
    [ "$failed" -eq 0 ] || echo "test_snippets: $failed of the programs failed to build"
    [ "$failed" -eq 0 ]
    exit
fi
for n in $PROGRAMS; do
    run "$n"
done
# the one statement of which GPUs are supported, the same in both texts
gpus_manual=$(sed -n '/^#ifndef NEO_ATTN_H_INCLUDED/q; s/^   Supported GPUs: //p' neo_attn.h)
gpus_readme=$(sed -n 's/^  Supported GPUs: //p' README.md)
if [ -n "$gpus_manual" ] && [ "$gpus_manual" = "$gpus_readme" ]; then
    passed=$((passed + 1))
else
    fail "the 'Supported GPUs:' lines of neo_attn.h ($gpus_manual) and README.md ($gpus_readme) differ"
fi
echo "test_snippets: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
