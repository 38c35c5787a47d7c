#!/bin/bash
# run_gpu.sh - the whole GPU benchmark in one device call: build/bench (built here if the carried
# binary does not run), the torch peers, and the plot. Everything lands in $OUT (default /tmp/neo-bench):
#   bench.txt bench.csv peers.txt peers.csv bench.png
#   bash examples/bench/run_gpu.sh            the full run (about 3 minutes on the H200 machine)
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
exit $rc
