#!/usr/bin/env python3
"""kernel_code.py - what nvcc makes of one kernel of neo_attn_cuda.cu, on a machine without a GPU.

For the library and for each variant (a patch and/or -D flags): the PTX for compute_90, the one
entry cut out of it, ptxas for sm_90 (registers a thread, spills), and, where nvdisasm is on the
PATH (pip install nvidia-cuda-nvdisasm), the SASS compared with the library's in three regions:
up to the wait for the kernel ahead (ACQBULK, griddepcontrol.wait), from there to the arrival
count (ATOMG: the tiles, the combine), and the rest (the merge). What a variant changes in
the instructions is no timing; it tells which builds are worth a GPU's time.

  python3 examples/bench/kernel_code.py [--entry NAME] [--patch FILE] [VARIANT ...]
      VARIANT: -D flags joined by '+', e.g. -DNEO_XP_M=2 or -DNEO_XP_C=1+-DNEO_XP_M=1
  The default entry is the Llama-3-8B 4k call's kernel (f16, head_dim 128, the wide block,
  no device-side length). Work files go to $OUT (default /tmp/neo-kernel-code).
"""
import argparse
import difflib
import os
import re
import shutil
import subprocess
import sys

ENTRY = "_Z13neo__attn_mmaI6__halfLi128ELi1ELb0EEv12neo__cu_attn"
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def cut_entry(ptx, entry):
    """the PTX's module header, globals and .func bodies, and the one .entry named"""
    lines, out, i = ptx.split("\n"), [], 0
    while i < len(lines):
        if re.match(r"^\s*(\.visible\s+|\.weak\s+)?\.(entry|func)\b", lines[i]):
            j = i
            while j < len(lines) and lines[j].strip() != "{" and not lines[j].rstrip().endswith(";"):
                j += 1
            if j < len(lines) and lines[j].strip() != "{":  # a declaration
                out += lines[i:j + 1]
                i = j + 1
                continue
            k = j
            while k < len(lines) and lines[k] != "}":
                k += 1
            if ".func" in lines[i] or entry in lines[i]:
                out += lines[i:k + 1]
            i = k + 1
            continue
        out.append(lines[i])
        i += 1
    return "\n".join(out)


def build(src, flags, entry, work):
    ptx = os.path.join(work, "k.ptx")
    subprocess.run(["nvcc", "-O3", "-arch=compute_90", "-I", src, *flags, "-ptx",
                    os.path.join(src, "neo_attn_cuda.cu"), "-o", ptx], check=True)
    text = open(ptx).read()
    if ".entry " + entry not in text:
        sys.exit(f"kernel_code: no entry {entry} in the PTX")
    one = os.path.join(work, "one.ptx")
    open(one, "w").write(cut_entry(text, entry))
    cubin = os.path.join(work, "one.cubin")
    r = subprocess.run(["ptxas", "-arch=sm_90", "-O3", "-v", one, "-o", cubin], capture_output=True, text=True, check=True)
    regs = re.search(r"Used (\d+) registers", r.stderr)
    spill = re.search(r"(\d+) bytes spill stores", r.stderr)
    sass = None
    if shutil.which("nvdisasm"):
        sass = subprocess.run(["nvdisasm", "-c", cubin], capture_output=True, text=True, check=True).stdout
    return int(regs.group(1)) if regs else -1, int(spill.group(1)) if spill else 0, sass


def regions(sass):
    ops = []
    for line in sass.split("\n"):
        m = re.match(r"\s*/\*[0-9a-f]+\*/\s+(@!?U?P\w+\s+)?([A-Z0-9_.]+)", line)
        if m:
            ops.append(m.group(2))
    a = next((i for i, o in enumerate(ops) if o == "ACQBULK"), 0)
    b = next((i for i, o in enumerate(ops) if o.startswith("ATOMG")), len(ops))
    return ops[:a], ops[a:b], ops[b:]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--entry", default=ENTRY)
    ap.add_argument("--patch")
    ap.add_argument("variants", nargs="*")
    args, rest = ap.parse_known_args()  # -D flags look like options to argparse
    bad = [r for r in rest if not r.startswith("-D")]
    if bad:
        ap.error("unrecognized arguments: " + " ".join(bad))
    args.variants += rest
    out = os.environ.get("OUT", "/tmp/neo-kernel-code")
    src = os.path.join(out, "src")
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(src)
    for f in ("neo_attn.h", "neo_attn_cuda.cu"):
        shutil.copy(os.path.join(ROOT, f), src)
    lib_dir = os.path.join(out, "lib")
    os.makedirs(lib_dir)
    base = build(src, [], args.entry, lib_dir)
    if args.patch and subprocess.run(["patch", "-s", "-p1", "-i", os.path.abspath(args.patch)], cwd=src).returncode != 0:
        sys.exit(f"kernel_code: {args.patch} does not apply to this tree")
    print(f"{'build':<28} {'regs':>4} {'spill':>5}  instructions changed against the library's "
          "(prologue / tiles / merge)")
    print(f"{'library':<28} {base[0]:>4} {base[1]:>5}  " +
          (" / ".join(str(len(r)) for r in regions(base[2])) + " instructions" if base[2] else "(no nvdisasm)"))
    for n, v in enumerate(args.variants or ([""] if args.patch else [])):  # "": the patch with no flags
        work = os.path.join(out, f"v{n}")
        os.makedirs(work)
        regs, spill, sass = build(src, [f for f in v.split("+") if f], args.entry, work)
        line = f"{(v or 'patch'):<28} {regs:>4} {spill:>5}  "
        if sass and base[2]:
            parts = []
            for ra, rb in zip(regions(base[2]), regions(sass)):
                sm = difflib.SequenceMatcher(None, ra, rb, autojunk=False)
                parts.append(str(sum(max(i2 - i1, j2 - j1) for t, i1, i2, j1, j2 in sm.get_opcodes() if t != "equal")))
            line += " / ".join(parts)
        print(line, flush=True)


if __name__ == "__main__":
    main()
