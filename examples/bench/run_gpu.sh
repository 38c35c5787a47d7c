#!/bin/bash
# run_gpu.sh - the whole GPU benchmark in one device call: build/bench (built here if the carried
# binary does not run), the torch peers, the plot, the CPU probe (probe-cpu) and what the host's
# cores read while they do the CPU kernels' arithmetic (read-compute). Everything lands in $OUT
# (default /tmp/neo-bench):
#   bench.txt bench.csv peers.txt peers.csv bench.png probe.txt read_compute.txt
#   bash examples/bench/run_gpu.sh            the full run (docs/BENCHMARKS.md says how long it takes)
#   bash examples/bench/run_gpu.sh --quick    a small subset, to shake out problems
set -u
OUT=${OUT:-/tmp/neo-bench}
mkdir -p "$OUT"
Q=""
[ "${1:-}" = "--quick" ] && Q="--quick"
nvidia-smi --query-gpu=name,memory.total,memory.used,clocks.sm,clocks.mem,driver_version --format=csv,noheader 2>&1 | head -n 1
if ! ./build/bench --help >/dev/null 2>&1; then
    echo "run_gpu: the carried build/bench does not run here; building it"
    make -s bench-gpu >"$OUT/build.log" 2>&1 || { cat "$OUT/build.log"; exit 1; }
fi
set -o pipefail
./build/bench $Q --csv "$OUT/bench.csv" 2>&1 | tee "$OUT/bench.txt"
rc=$?
PYTHONUNBUFFERED=1 python3 examples/bench/peers.py --ceilings "$OUT/bench.csv" --csv "$OUT/peers.csv" $Q 2>&1 | tee "$OUT/peers.txt"
python3 examples/bench/plot.py "$OUT/bench.csv" "$OUT/peers.csv" --out "$OUT/bench.png" 2>&1 | tail -n 3
# the host's CPU decode call, task by task: the Qwen layer's host half (1 of 2 KV heads) and one Llama KV head
if make -s build/probe-cpu >"$OUT/probe_build.log" 2>&1; then
    { ./build/probe-cpu; ./build/probe-cpu --shape 4,1,128; } 2>&1 | tee "$OUT/probe.txt"
else
    cat "$OUT/probe_build.log"
fi
# the read rate the cores keep while computing, at both layers' shapes (AVX-512 hosts only)
if grep -q avx512f /proc/cpuinfo && make -s build/read-compute >"$OUT/rc_build.log" 2>&1; then
    { ./build/read-compute; ./build/read-compute --shape 14,2,64; } 2>&1 | tee "$OUT/read_compute.txt"
fi
exit $rc
