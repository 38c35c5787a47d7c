#!/bin/bash
# ncu_stalls.sh - why the tensor-core kernel's warps wait, from Nsight Compute's counters (not part
# of the library; needs a GPU machine whose ncu can read the counters).
#
# Profiles one launch of neo__attn_mma from `build/bench --sections sweep --sweep-ctx CTX` (the
# planner's plan; by default the 301st such launch, well into the sweep's first row) with the warp
# state, scheduler, occupancy and source-counter sections, prints the warps' stall reasons, and
# writes every SASS instruction's counters (stalls included) to a CSV. The profiled launch runs alone (ncu serializes it), so its
# stalls are those of one call, not of calls back to back. ncu leaves the clocks alone
# (--clock-control none) and ends the bench once the launch is profiled.
#
#     make bench-gpu CUDA_ARCHS=90
#     bash examples/bench/ncu_stalls.sh [CTX] [OUTDIR]        (defaults 4096, build/ncu)
set -eu
ctx=${1:-4096}
out=${2:-build/ncu}
mkdir -p "$out"
rep="$out/attn_mma_$ctx"
# ncu exits non-zero when --kill ends the target: the report is what matters
ncu --clock-control none --kill yes -f -k regex:neo__attn_mma --launch-skip 300 --launch-count 1 \
    --section WarpStateStats --section SchedulerStats --section SourceCounters --section LaunchStats --section Occupancy \
    -o "$rep" ./build/bench --sections sweep --sweep-ctx "$ctx" > "$out/ncu_run.txt" 2>&1 || true
if [ ! -f "$rep.ncu-rep" ]; then
    echo "ncu_stalls: no report; ncu said:" >&2
    tail -5 "$out/ncu_run.txt" >&2
    exit 1
fi
ncu -i "$rep.ncu-rep" --page details --print-details all > "$out/details_$ctx.txt"
ncu -i "$rep.ncu-rep" --page source --csv --print-source sass > "$out/source_$ctx.csv"
grep -i "stall\|warp cycles per\|issued\|eligible\|active warps\|registers\|achieved occupancy" "$out/details_$ctx.txt"
echo "ncu_stalls: the report $rep.ncu-rep, the per-instruction counters $out/source_$ctx.csv"
