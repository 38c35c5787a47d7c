#!/bin/sh
# gpu_check.sh - the whole GPU check in one call (make gpu-check on a machine with a CUDA GPU):
#   1. build: neo_attn_cuda.cu (make cuda-build: every architecture), the CUDA test_ref,
#      test_cuda_ops, mini-chat --gpu; which image the GPU runs (ptxVersion / binaryVersion)
#   2. the kernels against float64 (test_cuda_ops, the hybrid's merge op and the device-side
#      lengths' graph replays included) and the API suite on the GPU (test_ref with a real GPU
#      runtime: no split for every shape case, split OFF / ON / AUTO / HYBRID for the split cases)
#   3. end-to-end checks with mini-chat on stories260K: greedy output identical with no split,
#      split OFF, ON, AUTO and HYBRID; GPU KV bytes shrink by the split and host bytes appear;
#      --neo-pipeline off with no split byte-identical to no split; ON and HYBRID report overlapped
#      calls; the same greedy output with --cuda-graphs on (no split, OFF, ON and HYBRID replayed
#      from a CUDA graph)
#   4. compute-sanitizer memcheck and racecheck on the CUDA tests, on test_ref's host heads read
#      in place and on its batches (every pipeline, stream-backs included) (GPU_CHECK_SAN=0
#      leaves them out, GPU_CHECK_SAN=only runs the build and them alone: two calls where one's
#      time is short)
# The model comes from $NEO_MODEL_DIR (default tests/data, the repository's own copy).
# Prints a short table last; exits non-zero if any check failed.
#
# GPU_CHECK_ARCH=80 (or 86, 89): the same checks on the Ampere / Ada path. neo_attn_cuda.cu is
# built (into build/jitNN) with PTX for compute_NN only, so the driver compiles that PTX for the
# GPU at hand (__CUDA_ARCH__ is NN00: cp.async loads, plain launches); the first row proves it
# (the kernels' ptxVersion NN, binaryVersion the GPU's).
set -u
DIR=${NEO_MODEL_DIR:-tests/data}
ARCH=${GPU_CHECK_ARCH:-}
B=build
if [ -n "$ARCH" ]; then
    case "$ARCH" in 80 | 86 | 89 | 90) ;; *) echo "gpu_check: GPU_CHECK_ARCH must be 80, 86, 89 or 90"; exit 2 ;; esac
    B=build/jit$ARCH
    set -- "B=$B" "CUDA_GENCODE=-gencode arch=compute_$ARCH,code=compute_$ARCH"
else
    set --
fi
OUT=${OUT:-/tmp}
mkdir -p "$OUT"
results=""
failed=0
row() { # row NAME RESULT DETAIL (also printed at once, so that a check cut short still shows its rows)
    results="$results$(printf '%-44s %-5s %s' "$1" "$2" "$3")
"
    printf '%s %-44s %-5s %s\n' "$(date +%H:%M:%S)" "$1" "$2" "$3"
    [ "$2" = "PASS" ] || [ "$2" = "SKIP" ] || failed=1
}

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | head -n 1
if ! make -s "$@" cuda-build >"$OUT/build.log" 2>&1 || [ ! -x $B/cuda/mini-chat ]; then
    cat "$OUT/build.log"
    echo "gpu_check: build failed"
    exit 1
fi

# --- 1. which code runs: test_cuda_ops --image prints "image: ptxVersion P binaryVersion B" ---
img=$(./$B/test_cuda_ops --image 2>&1)
ptx=$(echo "$img" | sed -n 's/.*ptxVersion \([0-9]*\).*/\1/p')
bin=$(echo "$img" | sed -n 's/.*binaryVersion \([0-9]*\).*/\1/p')
if [ -n "$ARCH" ]; then
    # the JIT path: code from compute_$ARCH PTX, compiled by the driver for this GPU
    if [ "${ptx:-0}" -eq "$ARCH" ] && [ -n "$bin" ]; then r=PASS; else r=FAIL; fi
    row "JIT path (compute_$ARCH PTX on this GPU)" $r "$img"
else
    if [ -n "$ptx" ] && [ "${bin:-0}" -ge 80 ]; then r=PASS; else r=FAIL; fi
    row "native image" $r "$img"
fi

# mini-chat on stories260K (sections 3 and 4)
MCB="./$B/cuda/mini-chat $DIR/stories260K.bin -z $DIR/tok512.bin -t 0 -n 256 -i"
MC="timeout 120 $MCB"
P="Once upon a time"
REF=$DIR/reference/greedy-once-upon-a-time.txt

if [ "${GPU_CHECK_SAN:-1}" != only ]; then
# --- 2. kernels and the API suite ---
if timeout 300 ./$B/test_cuda_ops >"$OUT/test_cuda_ops.log" 2>&1; then r=PASS; else r=FAIL; fi
row "kernels vs float64 (test_cuda_ops)" $r "$(tail -n 1 "$OUT/test_cuda_ops.log")"
# every case also ran under forced plans (wide, narrow, one split, generic): their rows
n=$(grep -c '^merge .* ok$' "$OUT/test_cuda_ops.log")
bad=$(grep -c '^merge .* FAIL$' "$OUT/test_cuda_ops.log")
if [ "$n" -gt 0 ] && [ "$bad" -eq 0 ]; then r=PASS; else r=FAIL; fi
row "  the hybrid's merge op" $r "$n cases ok, $bad failed"
for f in wide narrow S=1 generic; do
    n=$(grep -c "\[$f\] .* ok$" "$OUT/test_cuda_ops.log")
    bad=$(grep -c "\[$f\] .* FAIL$" "$OUT/test_cuda_ops.log")
    if [ "$n" -gt 0 ] && [ "$bad" -eq 0 ]; then r=PASS; else r=FAIL; fi
    row "  forced plan [$f]" $r "$n cases ok, $bad failed"
done
# device-side lengths: eager calls with len, append + attend captured into a graph and replayed
n=$(grep -c '^graph .* ok$' "$OUT/test_cuda_ops.log")
bad=$(grep -c '^graph .* FAIL$' "$OUT/test_cuda_ops.log")
if [ "$n" -gt 0 ] && [ "$bad" -eq 0 ]; then r=PASS; else r=FAIL; fi
row "  device-side lengths, graph replays" $r "$n cases ok, $bad failed"
if NEO_MODEL_DIR=$DIR timeout 300 ./$B/cuda/test_ref >"$OUT/test_ref.log" 2>&1 &&
   NEO_TEST_CUDA_THREADS=1 NEO_TEST_ONLY_SPLIT=4 timeout 300 ./$B/cuda/test_ref >"$OUT/test_ref_split.log" 2>&1; then r=PASS; else r=FAIL; fi
row "API suite on the GPU (test_ref)" $r "$(grep 'cuda ' "$OUT/test_ref.log" | sed 's/test_ref: *//')"
row "  CPU paths in the same run" $r "$(grep -c 'max relative' "$OUT/test_ref.log") paths, $(tail -n 1 "$OUT/test_ref.log" | sed 's/test_ref: //')"
row "  split cases x4, 1 CPU thread (timing)" $r "$(grep 'cuda ' "$OUT/test_ref_split.log" | sed 's/test_ref: *//'); $(tail -n 1 "$OUT/test_ref_split.log" | sed 's/test_ref: //')"

# --- 3. end-to-end checks with mini-chat ---
# a hang (the both-halves handoff waits on flags) is a failure, not a lost device call
$MC "$P" --gpu >"$OUT/B.txt" 2>"$OUT/B.err"
$MC "$P" --gpu --gpu-heads-frac 0.5 --neo-pipeline off >"$OUT/M.txt" 2>"$OUT/M.err"
$MC "$P" --gpu --gpu-heads-frac 0.5 --neo-pipeline on >"$OUT/N.txt" 2>"$OUT/N.err"
$MC "$P" --gpu --neo-pipeline off >"$OUT/O.txt" 2>"$OUT/O.err"
$MC "$P" --gpu --gpu-heads-frac 0.5 --neo-pipeline auto >"$OUT/A.txt" 2>"$OUT/A.err"
$MC "$P" --gpu --gpu-heads-frac 0.5 --neo-pipeline hybrid >"$OUT/H.txt" 2>"$OUT/H.err"
if cmp -s "$OUT/B.txt" "$REF" && cmp -s "$OUT/M.txt" "$REF" && cmp -s "$OUT/N.txt" "$REF" && cmp -s "$OUT/A.txt" "$REF" &&
   cmp -s "$OUT/H.txt" "$REF"; then r=PASS; else r=FAIL; fi
row "split = unsplit: greedy none=OFF=ON=AUTO=HYBRID=run.c" $r "$(wc -c <"$OUT/B.txt") bytes each"
# each step replayed from a CUDA graph: no split, OFF, ON and HYBRID (the listener answering
# each layer: ON's output, or the CPU's state of the hybrid's cells before the cut)
$MC "$P" --gpu --cuda-graphs on >"$OUT/BG.txt" 2>"$OUT/BG.err"
$MC "$P" --gpu --gpu-heads-frac 0.5 --neo-pipeline off --cuda-graphs on >"$OUT/MG.txt" 2>"$OUT/MG.err"
$MC "$P" --gpu --gpu-heads-frac 0.5 --neo-pipeline on --cuda-graphs on >"$OUT/NG.txt" 2>"$OUT/NG.err"
$MC "$P" --gpu --gpu-heads-frac 0.5 --neo-pipeline hybrid --cuda-graphs on >"$OUT/HG.txt" 2>"$OUT/HG.err"
r=PASS
for x in BG MG NG HG; do
    cmp -s "$OUT/$x.txt" "$REF" && grep -q 'steps replayed from a CUDA graph' "$OUT/$x.err" || r=FAIL
done
row "CUDA graphs: greedy none=OFF=ON=HYBRID=run.c" $r "$(wc -c <"$OUT/BG.txt") bytes each, every step replayed from the session's graph"
kv() { sed -n 's/.*: \([0-9]*\) bytes GPU + \([0-9]*\) bytes host.*/\1 \2/p' "$1" | head -n 1; }
set -- $(kv "$OUT/B.err") $(kv "$OUT/N.err")
if [ $# -eq 4 ] && [ "$3" -eq $(($1 / 2)) ] && [ "$4" -eq $(($1 / 2)) ] && [ "$2" -eq 0 ]; then r=PASS; else r=FAIL; fi
row "a split moves KV: GPU / host, none -> 0.5" $r "$1 / $2 -> $3 / $4"
if cmp -s "$OUT/O.txt" "$OUT/B.txt"; then r=PASS; else r=FAIL; fi
row "--neo-pipeline off, no split = no split" $r ""
ov=$(sed -n 's/.*(\([0-9]*\) with both halves overlapped).*/\1/p' "$OUT/N.err" | head -n 1)
if [ "${ov:-0}" -gt 0 ]; then r=PASS; else r=FAIL; fi
row "ON: overlapped decode calls" $r "$(sed -n 's/.* \([0-9]* decode calls ([0-9]* with both halves overlapped)\).*/\1/p' "$OUT/N.err")"
ov=$(sed -n 's/.*(\([0-9]*\) with both halves overlapped).*/\1/p' "$OUT/H.err" | head -n 1)
if [ "${ov:-0}" -gt 0 ]; then r=PASS; else r=FAIL; fi
row "HYBRID: overlapped decode calls" $r "$(sed -n 's/.* \([0-9]* decode calls ([0-9]* with both halves overlapped)\).*/\1/p' "$OUT/H.err")"
# with blocking launches the handoff's waiting kernel goes after the CPU half (else it would wait forever)
CUDA_LAUNCH_BLOCKING=1 $MC "$P" --gpu --gpu-heads-frac 0.5 --neo-pipeline on >"$OUT/NB.txt" 2>"$OUT/NB.err"
CUDA_LAUNCH_BLOCKING=1 $MC "$P" --gpu --gpu-heads-frac 0.5 --neo-pipeline hybrid >"$OUT/HB.txt" 2>"$OUT/HB.err"
if cmp -s "$OUT/NB.txt" "$REF" && cmp -s "$OUT/HB.txt" "$REF"; then r=PASS; else r=FAIL; fi
row "ON, HYBRID with CUDA_LAUNCH_BLOCKING=1 = run.c" $r "$(wc -c <"$OUT/NB.txt") bytes"
for x in B M N A H BG MG NG HG; do
    printf '%s: %s %s\n' "$x" "$(grep 'achieved tok/s' "$OUT/$x.err")" "$(grep -o 'pipeline [a-z]*' "$OUT/$x.err")"
done >"$OUT/tok_s.txt"

fi # sections 2 and 3

# --- 4. sanitizers (GPU_CHECK_SAN=0 leaves them out, =only runs them alone: a device call each) ---
if [ "${GPU_CHECK_SAN:-1}" = 0 ]; then
    row "compute-sanitizer" SKIP "GPU_CHECK_SAN=0"
elif command -v compute-sanitizer >/dev/null 2>&1; then
    # one row a run, each with its own time limit, so that one that hangs costs its limit alone
    san() { # san TOOL NAME LIMIT_S COMMAND...
        tool=$1 name=$2 lim=$3
        shift 3
        t0=$(date +%s)
        if timeout "$lim" compute-sanitizer --tool "$tool" --error-exitcode 9 "$@" >"$OUT/san_${tool}_$name.log" 2>&1; then r=PASS
        else r=FAIL; fi
        row "compute-sanitizer $tool: $name" $r "$(grep -h 'ERROR SUMMARY\|RACECHECK SUMMARY' "$OUT/san_${tool}_$name.log" | tr '\n' ' ')$(($(date +%s) - t0)) s"
    }
    for tool in memcheck racecheck; do
        # test_cuda_ops asks for 1 PiB on purpose (the out-of-memory statuses): not an error here
        san $tool kernels 400 --report-api-errors no ./$B/test_cuda_ops --quick
        san $tool on 150 $MCB "$P" --gpu --gpu-heads-frac 0.5 --neo-pipeline on -n 40
        san $tool on-graph 150 $MCB "$P" --gpu --gpu-heads-frac 0.5 --neo-pipeline on --cuda-graphs on -n 40
        san $tool hybrid-graph 150 $MCB "$P" --gpu --gpu-heads-frac 0.5 --neo-pipeline hybrid --cuda-graphs on -n 40
        san $tool hybrid 150 $MCB "$P" --gpu --gpu-heads-frac 0.5 --neo-pipeline hybrid -n 40
        # head_dim 128 OFF layers whose host heads the kernels read in place, single and batched
        NEO_TEST_ONLY="in place"
        export NEO_TEST_ONLY
        san $tool in-place 300 --report-api-errors no ./$B/cuda/test_ref
        NEO_TEST_ONLY=batches
        san $tool batches 300 --report-api-errors no ./$B/cuda/test_ref
        unset NEO_TEST_ONLY
    done
else
    row "compute-sanitizer" FAIL "not found"
fi

[ -f "$OUT/tok_s.txt" ] && cat "$OUT/tok_s.txt"
echo
printf '%-44s %-5s %s\n' "check" "result" "detail"
printf '%s' "$results"
exit $failed
