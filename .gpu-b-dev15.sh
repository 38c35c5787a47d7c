#!/bin/bash
# the whole GPU check at this commit (every architecture's build, native sm_90), then the attention rows (--quick) with the hybrid
set -u
T0=$(date +%s)
cd .gpu-b
OUT=$OUT/gc timeout 300 sh tests/gpu_check.sh > $OUT/gc.txt 2>&1; echo "gpu_check rc=$?"
sed -n '/^check /,$p' $OUT/gc.txt
echo "t=$(( $(date +%s) - T0 ))s"
timeout 110 ./build/bench --quick --sections attn --seconds 0.1 --csv $OUT/attn.csv > $OUT/attn.log 2>&1; echo "bench rc=$?"
grep -E "^ceil (hbm|h2d_pinned|dram_read |cpu_dma)|hybrid|-1/2 |on-1/8|off-1/8" $OUT/attn.log | cut -c1-200
echo "t=$(( $(date +%s) - T0 ))s"
