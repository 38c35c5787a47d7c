#!/bin/bash
# count_kernel.sh - a kernel patch's knob sets beside the library on one GPU, in one call: a copy of
# the tree with the patch applied, one bench build (sm_90) a knob set, built side by side, then the
# Llama-3-8B 4k sweep (bench --sections sweep --sweep-ctx 4096) of every build in turn, round after
# round, and last a table of the planner's row (eager), graph and graph-gm at the planner's split
# count (column 0), every round's figure in µs a call.
#   bash examples/bench/count_kernel.sh [rounds] [ctx]    defaults 3, 4096; raw rows and table in
#                                                          $OUT (default /tmp/neo-count)/count_kernel.txt
# PATCH (default examples/bench/count_kernel.patch; several, separated by spaces, are applied in
# turn) and SETS (name:flags, flags joined by '+'; a set with no flags is the library) choose what
# is timed. The default sets are count_kernel.patch's knobs: NEO_XP_F alone is left out (the
# single-attend kernels' code is byte for byte the library's with it; only the batch kernels, which
# copy the larger parameter block, change); cm is C=1 with M=1 (the build that was faster), c2m2 and
# u1m2 the two smaller changes of each side together. param_warm.patch's and merge_ml.patch's
# knobs beside the library (three builds, three rounds in about 1.5 minutes on an H200):
#   PATCH="examples/bench/param_warm.patch examples/bench/merge_ml.patch" \
#   SETS="lib: pw:-DNEO_XP_PW=1 ml:-DNEO_XP_ML=1" bash examples/bench/count_kernel.sh
# (Each patch names the commit it applies to; several in one copy must apply to the same tree.)
# Rounds stop early at 480 s, so that the whole script ends within 10 minutes. Reuses builds
# already in SRC (default /tmp/neo-count-src-NAME, NAME the patches' joined by '+').
# Where GPU time is short, build on a machine without a GPU first (nvcc is enough) into an ignored
# folder of the tree that the GPU call carries, then time there with the same SRC, PATCH and SETS:
#   SRC=xp/count BUILD_ONLY=1 PATCH=... SETS=... bash examples/bench/count_kernel.sh
# BUILD_ONLY strips each build's bench and removes its objects (about 6 MB a set is left).
set -u
ROUNDS=${1:-3}
CTX=${2:-4096}
OUT=${OUT:-/tmp/neo-count}
PATCH=${PATCH:-examples/bench/count_kernel.patch}
PATCHES="" NAME=""
for f in $PATCH; do # absolute, as they are applied from inside the copy
    PATCHES="$PATCHES $(cd "$(dirname "$f")" && pwd)/$(basename "$f")"
    NAME="$NAME${NAME:++}$(basename "$f" .patch)"
done
SRC=${SRC:-/tmp/neo-count-src-$NAME}
case "$SRC" in /*) ;; *) SRC=$PWD/$SRC ;; esac
EXCL="" # a SRC inside the tree is left out of its own copy
case "$SRC" in "$PWD"/*) EXCL="--exclude=./${SRC#"$PWD"/}" ;; esac
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd) # absolute: the builds run inside SRC
R=$OUT/count_kernel.txt
SETS=${SETS:-"lib: c1:-DNEO_XP_C=1 c2:-DNEO_XP_C=2 m1:-DNEO_XP_M=1 m2:-DNEO_XP_M=2 u1:-DNEO_XP_U=1 cm:-DNEO_XP_C=1+-DNEO_XP_M=1 c2m2:-DNEO_XP_C=2+-DNEO_XP_M=2 u1m2:-DNEO_XP_U=1+-DNEO_XP_M=2"}
if [ ! -d "$SRC" ]; then
    mkdir -p "$SRC"
    if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then # the tree's files, no build or ignored folder
        git ls-files -z --cached --others --exclude-standard | tar --null -T - -cf - | tar -xf - -C "$SRC"
    else
        tar --exclude=./build --exclude=./.git $EXCL -cf - . | tar -xf - -C "$SRC"
    fi
    for f in $PATCHES; do
        if command -v patch >/dev/null; then
            (cd "$SRC" && patch -s -p1 <"$f")
        else
            (cd "$SRC" && git apply "$f")
        fi || { echo "count_kernel: $f does not apply"; rm -rf "$SRC"; exit 1; }
    done
fi
for s in $SETS; do
    n=${s%%:*} d=${s#*:}
    [ -x "$SRC/build/k_$n/bench" ] && continue
    (cd "$SRC" && make -s B="build/k_$n" CUDA_ARCHS=90 \
        NVCCFLAGS="-O3 --threads 0 -gencode arch=compute_90,code=sm_90 ${d//+/ }" "build/k_$n/bench" >"$OUT/build_$n.log" 2>&1 ||
        echo "count_kernel: build $n failed (see $OUT/build_$n.log)") &
done
wait
if [ "${BUILD_ONLY:-0}" = 1 ]; then
    rc=0
    for s in $SETS; do
        b=$SRC/build/k_${s%%:*}
        [ -x "$b/bench" ] || { rc=1; continue; } # its build failed, said above
        strip "$b/bench" 2>/dev/null
        rm -rf "$b"/*.o "$b"/san "$b"/tsan
        echo "count_kernel: $b/bench $(du -k "$b/bench" | cut -f1) KB"
    done
    exit $rc
fi
{ date -u +"%F %T UTC"; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader; } >"$R"
sweep() { # build
    local f=$OUT/sweep_$1.tmp
    "$SRC/build/k_$1/bench" --sections sweep --sweep-ctx "$CTX" >"$f" 2>&1 &
    local pid=$!
    while kill -0 $pid 2>/dev/null && ! grep -q "^# graph-gm" "$f"; do sleep 0.2; done
    kill $pid 2>/dev/null
    wait $pid 2>/dev/null
    echo "== $1 $CTX $(date -u +%T)" >>"$R"
    grep '^# \(shape\|planner\|graph\)' "$f" >>"$R"
    rm -f "$f"
}
for _ in $(seq "$ROUNDS"); do
    for s in $SETS; do
        n=${s%%:*}
        [ -x "$SRC/build/k_$n/bench" ] && sweep "$n"
    done
    [ $SECONDS -gt 480 ] && break
done
awk '/^== /{b = $2; if (!(b in seen)) order[++nb] = b; seen[b] = 1; next}
     /^# (planner|graph|graph-gm) / && b != "" {k = b " " $2; if (k in v) v[k] = v[k] ","; v[k] = v[k] $3}
     END{printf "%-5s %-26s %-26s %-26s\n", "build", "eager", "graph", "graph-gm"
         for (i = 1; i <= nb; i++) printf "%-5s %-26s %-26s %-26s\n", order[i], v[order[i] " planner"], v[order[i] " graph"], v[order[i] " graph-gm"]}' "$R" | tee -a "$R"
