#!/bin/sh
# test_golden.sh BUILT_MINI_CHAT
#
# mini-chat on stories260K against llama2.c run.c's own output (tests/data/reference, byte for
# byte), with the neo_attn flags that must not change the greedy text, plus its error paths and the
# interactive mode. The model files come from $NEO_MODEL_DIR (default tests/data); without them
# the test fails, it never skips. Prints a PASS/FAIL line per check; exits non-zero on any failure.
# Run from the repository root: make test-golden   (or: sh tests/test_golden.sh build/mini-chat)
set -e

if [ $# -ne 1 ]; then
    echo "usage: sh tests/test_golden.sh BUILT_MINI_CHAT" >&2
    exit 2
fi
BIN=$1
if [ ! -x "$BIN" ]; then
    echo "FAIL: $BIN is not an executable (build it first: make build/mini-chat)"
    exit 1
fi
case $BIN in /*) ;; *) BIN=$(pwd)/$BIN ;; esac

DIR=${NEO_MODEL_DIR:-tests/data}
GREEDY=reference/greedy-once-upon-a-time.txt
SAMPLE=reference/sample-t1.0-p0.9-s42-once-upon-a-time.txt
for f in stories260K.bin tok512.bin $GREEDY $SAMPLE; do
    if [ ! -f "$DIR/$f" ]; then
        echo "FAIL: test data $DIR/$f not found; set NEO_MODEL_DIR to the folder that holds stories260K.bin," \
             "tok512.bin and reference/ (the repository carries them in tests/data; see tests/data/README.md)"
        exit 1
    fi
done
DIR=$(cd "$DIR" && pwd)
MODEL=$DIR/stories260K.bin
TOK=$DIR/tok512.bin
GREEDY=$DIR/$GREEDY
SAMPLE=$DIR/$SAMPLE
PROMPT="Once upon a time"

T=$(mktemp -d "${TMPDIR:-/tmp}/neo_golden.XXXXXX")
# mini-chat with a time limit where a bug would make it wait forever (timeout(1) where there is one)
timeout_bin() {
    if command -v timeout >/dev/null 2>&1; then timeout 60 "$BIN" "$@"; else "$BIN" "$@"; fi
}
trap 'rm -rf "$T"' EXIT
trap 'exit 1' INT TERM HUP
mkdir "$T/empty" "$T/work" "$T/bad"

n_checks=0
n_failed=0
pass() {
    n_checks=$((n_checks + 1))
    echo "PASS: $1"
}
fail() {
    n_checks=$((n_checks + 1))
    n_failed=$((n_failed + 1))
    echo "FAIL: $1"
    if [ $# -ge 2 ] && [ -s "$2" ]; then head -n 20 "$2" | sed 's/^/    | /'; fi
}

# golden NAME REFERENCE COMMAND...: run in $RUN_DIR, stdout must equal REFERENCE byte for byte, exit 0
RUN_DIR=.
golden() {
    g_name=$1
    g_ref=$2
    shift 2
    if (cd "$RUN_DIR" && exec "$@") >"$T/out" 2>"$T/err" </dev/null; then g_rc=0; else g_rc=$?; fi
    if [ "$g_rc" -ne 0 ]; then
        fail "$g_name: exit status $g_rc" "$T/err"
    elif cmp "$T/out" "$g_ref" >"$T/cmp" 2>&1; then
        pass "$g_name"
    else
        fail "$g_name: stdout differs from $(basename "$g_ref")" "$T/cmp"
        printf '    got:      %s\n' "$(head -c 300 "$T/out" | tr '\n' '~')"
        printf '    expected: %s\n' "$(head -c 300 "$g_ref" | tr '\n' '~')"
    fi
}

# load_error NAME TEXT ARGS...: exit non-zero, nothing on stdout, one line on stderr that holds TEXT
load_error() {
    e_name=$1
    e_text=$2
    shift 2
    if timeout_bin "$@" >"$T/out" 2>"$T/err" </dev/null; then e_rc=0; else e_rc=$?; fi
    e_lines=$(wc -l <"$T/err" | tr -d ' ')
    if [ "$e_rc" -eq 0 ]; then
        fail "$e_name: exit status 0, expected an error" "$T/err"
    elif [ -s "$T/out" ]; then
        fail "$e_name: printed on stdout" "$T/out"
    elif [ "$e_lines" != 1 ]; then
        fail "$e_name: $e_lines lines on stderr, expected one" "$T/err"
    elif ! grep -qF -- "$e_text" "$T/err"; then
        fail "$e_name: the message does not name '$e_text'" "$T/err"
    else
        pass "$e_name (exit $e_rc: $(cat "$T/err"))"
    fi
}

# --- run.c's output, byte for byte --------------------------------------------------------------
golden "greedy: -t 0 -n 256" "$GREEDY" "$BIN" "$MODEL" -z "$TOK" -t 0 -n 256 -i "$PROMPT"
golden "sampled: -t 1.0 -p 0.9 -s 42 -n 256" "$SAMPLE" "$BIN" "$MODEL" -z "$TOK" -t 1.0 -p 0.9 -s 42 -n 256 -i "$PROMPT"

# --- neo_attn options that must not change the greedy text --------------------------------------
golden "greedy with --threads 2" "$GREEDY" "$BIN" "$MODEL" -z "$TOK" -t 0 -n 256 -i "$PROMPT" --threads 2
golden "greedy with --threads 1" "$GREEDY" "$BIN" "$MODEL" -z "$TOK" -t 0 -n 256 -i "$PROMPT" --threads 1
golden "greedy with --neo-pipeline on" "$GREEDY" "$BIN" "$MODEL" -z "$TOK" -t 0 -n 256 -i "$PROMPT" --neo-pipeline on
golden "greedy with NEO_THREADS=2 NEO_PIPELINE=on NEO_GPU_HEADS_FRAC=0.25" "$GREEDY" \
    env NEO_THREADS=2 NEO_PIPELINE=on NEO_GPU_HEADS_FRAC=0.25 "$BIN" "$MODEL" -z "$TOK" -t 0 -n 256 -i "$PROMPT"
if grep -qF "NEO_GPU_HEADS_FRAC is ignored without --gpu or --gpu-standin" "$T/err"; then
    pass "NEO_GPU_HEADS_FRAC without a GPU: a warning on stderr"
else
    fail "NEO_GPU_HEADS_FRAC without a GPU: no warning" "$T/err"
fi
# a temperature so small that the logits over it overflow: greedy, as -t 0
golden "-t 1e-45 is greedy" "$GREEDY" "$BIN" "$MODEL" -z "$TOK" -t 1e-45 -n 256 -i "$PROMPT"

# --- finding the model ---------------------------------------------------------------------------
# $NEO_MODEL as a directory and as a file, from a directory with no models/ nor tests/data/;
# the tokenizer is then tok512.bin beside the model
RUN_DIR=$T/work
golden "model from NEO_MODEL=<dir>, tokenizer beside it" "$GREEDY" env NEO_MODEL="$DIR" "$BIN" -t 0 -n 256 -i "$PROMPT"
golden "model from NEO_MODEL=<file>" "$GREEDY" env NEO_MODEL="$MODEL" "$BIN" -t 0 -n 256 -i "$PROMPT"
RUN_DIR=.
golden "tokenizer defaults to tok512.bin beside a MODEL argument" "$GREEDY" "$BIN" "$MODEL" -t 0 -n 256 -i "$PROMPT"

if (cd "$T/work" && NEO_MODEL="$T/empty" "$BIN" -t 0 -i "$PROMPT" >"$T/out" 2>"$T/err" </dev/null); then
    fail "no model found: exit status 0"
elif [ -s "$T/out" ]; then
    fail "no model found: printed on stdout" "$T/out"
elif ! grep -qF "https://huggingface.co/karpathy/tinyllamas/tree/main/stories260K" "$T/err" ||
     ! grep -qF "stories260K.bin" "$T/err" || ! grep -qF "tok512.bin" "$T/err"; then
    fail "no model found: the message does not say where to get stories260K" "$T/err"
else
    pass "no model found: says where to get stories260K, exits non-zero"
fi

# --- bad files: one line that names the file, exit non-zero --------------------------------------
head -c 100000 "$MODEL" >"$T/bad/truncated_model.bin"
head -c 3000 "$TOK" >"$T/bad/truncated_tok.bin"
: >"$T/bad/empty_tok.bin"
load_error "missing model file" "$T/bad/no_such_model.bin" "$T/bad/no_such_model.bin" -z "$TOK" -i "$PROMPT"
load_error "truncated model file" "$T/bad/truncated_model.bin" "$T/bad/truncated_model.bin" -z "$TOK" -i "$PROMPT"
load_error "missing tokenizer file" "$T/bad/no_such_tok.bin" "$MODEL" -z "$T/bad/no_such_tok.bin" -i "$PROMPT"
load_error "truncated tokenizer file" "$T/bad/truncated_tok.bin" "$MODEL" -z "$T/bad/truncated_tok.bin" -i "$PROMPT"
load_error "empty tokenizer file" "$T/bad/empty_tok.bin" "$MODEL" -z "$T/bad/empty_tok.bin" -i "$PROMPT"
load_error "model file given as the tokenizer" "$MODEL" "$MODEL" -z "$MODEL" -i "$PROMPT"
# only regular files: a FIFO (which would block a read forever) or a directory is refused at once
mkfifo "$T/bad/fifo"
load_error "FIFO as the model" "not a regular file" "$T/bad/fifo" -z "$TOK" -i "$PROMPT"
load_error "FIFO as the tokenizer" "not a regular file" "$MODEL" -z "$T/bad/fifo" -i "$PROMPT"
load_error "directory as the model" "not a regular file" "$T/bad" -z "$TOK" -i "$PROMPT"
# llama2.c's version 1 and 2 exports: the magic 0x616b3432 (little-endian "24ka"), a version, then
# their own header; the message says which export run.c reads
{ printf '24ka'; printf '\002\000\000\000'; head -c 248 /dev/zero; } >"$T/bad/v2.bin"
load_error "a version 2 export" "export.py --version 0" "$T/bad/v2.bin" -z "$TOK" -i "$PROMPT"
# a model of one token (which the library accepts) and a tokenizer of one: mini-chat needs <unk>,
# BOS and EOS. Header {dim 8, hidden 8, 1 layer, 2 heads, 2 KV heads, vocab 1, seq_len 8}, then
# zero weights: 480 floats, and the RoPE tables, 8 x 4 / 2 x 2 floats.
le32() { printf "\\$(printf %03o "$1")\\000\\000\\000"; }
{ for v in 8 8 1 2 2 1 8; do le32 $v; done; head -c $((4 * 480 + 4 * 32)) /dev/zero; } >"$T/bad/vocab1.bin"
{ le32 2; head -c 4 /dev/zero; le32 2; printf 'hi'; } >"$T/bad/tok1.bin"
load_error "a model of one token" "needs at least 3" "$T/bad/vocab1.bin" -z "$T/bad/tok1.bin" -n 8 -i hi
load_error "a model of one token, chat mode" "needs at least 3" "$T/bad/vocab1.bin" -z "$T/bad/tok1.bin" -n 8
# a prompt longer than the context runs as in run.c: at most -n positions (0 or past seq_len 512:
# 512), each printing the prompt's next token. 1000 tildes are BOS, " " (printed as nothing after
# BOS) and a token a tilde: -n 0 prints 511 of them, -n 20 19.
tildes=$(head -c 1000 /dev/zero | tr '\000' '~')
{ head -c 511 /dev/zero | tr '\000' '~'; echo; } >"$T/tildes511.txt"
{ head -c 19 /dev/zero | tr '\000' '~'; echo; } >"$T/tildes19.txt"
golden "a prompt of 1002 tokens, -n 0: its first 511 tokens" "$T/tildes511.txt" "$BIN" "$MODEL" -z "$TOK" -t 0 -n 0 -i "$tildes"
golden "a prompt of 1002 tokens, -n 20: its first 19" "$T/tildes19.txt" "$BIN" "$MODEL" -z "$TOK" -t 0 -n 20 -i "$tildes"
# 5000 bytes of "a": whatever tokens they merge into, 511 of them print a prefix of the prompt
long=$(head -c 5000 /dev/zero | tr '\000' a)
if timeout_bin "$MODEL" -z "$TOK" -t 0 -n 0 -i "$long" >"$T/out" 2>"$T/err" </dev/null; then l_rc=0; else l_rc=$?; fi
l_text=$(head -n 1 "$T/out")
if [ "$l_rc" -eq 0 ] && [ "$(wc -l <"$T/out" | tr -d ' ')" = 1 ] && [ ${#l_text} -ge 511 ] && [ ${#l_text} -le 5000 ] &&
    [ -z "$(printf '%s' "$l_text" | tr -d a)" ]; then
    pass "a 5000-byte prompt, -n 0: a prefix of it, ${#l_text} bytes"
else
    fail "a 5000-byte prompt, -n 0: exit $l_rc, ${#l_text} bytes on stdout's first line" "$T/err"
fi

# --- flags ---------------------------------------------------------------------------------------
load_error "--gpu-heads-frac without --gpu: refused" "--gpu-heads-frac needs --gpu or --gpu-standin" \
    "$MODEL" -z "$TOK" -t 0 -n 16 -i "$PROMPT" --gpu-heads-frac 0.5
load_error "--gpu-kv-budget without --gpu: refused" "--gpu-kv-budget needs --gpu or --gpu-standin" \
    "$MODEL" -z "$TOK" -t 0 -n 16 -i "$PROMPT" --gpu-kv-budget 1000
if "$BIN" "$MODEL" -z "$TOK" -t 0 -n 16 -i "$PROMPT" --threads 1 >"$T/out" 2>"$T/err" </dev/null &&
   grep -q ": 1 thread, " "$T/err"; then
    pass "--threads 1: the stats say '1 thread'"
else
    fail "--threads 1: the stats line" "$T/err"
fi
for bad in "--threads x" "--gpu-heads-frac 2" "--gpu-kv-budget -1" "--neo-pipeline sideways" "--kv-type f8" "-t abc" "--nope 1"; do
    # shellcheck disable=SC2086  # split "flag value" on purpose
    if "$BIN" "$MODEL" -z "$TOK" $bad -i "$PROMPT" >"$T/out" 2>"$T/err" </dev/null; then b_rc=0; else b_rc=$?; fi
    if [ "$b_rc" -eq 1 ] && [ ! -s "$T/out" ] && grep -q "Usage" "$T/err"; then
        pass "bad flag '$bad': message and usage, exit 1"
    else
        fail "bad flag '$bad': exit $b_rc" "$T/err"
    fi
done
if NEO_THREADS=lots "$BIN" "$MODEL" -z "$TOK" -i "$PROMPT" >"$T/out" 2>"$T/err" </dev/null; then b_rc=0; else b_rc=$?; fi
if [ "$b_rc" -eq 1 ] && grep -qF "NEO_THREADS" "$T/err"; then
    pass "bad NEO_THREADS: message, exit 1"
else
    fail "bad NEO_THREADS: exit $b_rc" "$T/err"
fi
if "$BIN" --help >"$T/out" 2>"$T/err" </dev/null && grep -q -- "--gpu-heads-frac" "$T/out"; then
    pass "--help prints usage, exit 0"
else
    fail "--help" "$T/err"
fi
# a flag replaces its variable, which is then not read: a bad one does not stop the run, nor --help
if NEO_THREADS=lots NEO_PIPELINE=x "$BIN" --help >"$T/out" 2>"$T/err" </dev/null && grep -q -- "--gpu-heads-frac" "$T/out"; then
    pass "--help with bad NEO_THREADS and NEO_PIPELINE: usage, exit 0"
else
    fail "--help with bad NEO_THREADS and NEO_PIPELINE" "$T/err"
fi
golden "bad NEO_THREADS, NEO_PIPELINE, NEO_CUDA_GRAPHS under their flags" "$GREEDY" env NEO_THREADS=lots NEO_PIPELINE=x \
    NEO_CUDA_GRAPHS=maybe "$BIN" "$MODEL" -z "$TOK" -t 0 -n 256 -i "$PROMPT" --threads 1 --neo-pipeline on --cuda-graphs off
# the GPU share is one setting: the last flag of the two wins, and a flag replaces both variables
# (stories260K: 4 KV heads a layer, 2 KB a head at 512 cells of f32)
share() { # NAME EXPECTED_HEADS ARGS...: the greedy text, and the stats line's heads
    s_name=$1
    s_heads=$2
    shift 2
    golden "$s_name" "$GREEDY" "$@" "$MODEL" -z "$TOK" -t 0 -n 256 -i "$PROMPT" --gpu-standin
    if grep -qF "KV heads per layer $s_heads" "$T/err"; then pass "$s_name: $s_heads"; else fail "$s_name: not $s_heads" "$T/err"; fi
}
share "NEO_GPU_KV_BUDGET=0 under --gpu-heads-frac 0.5" "2 GPU + 2 CPU" env NEO_GPU_KV_BUDGET=0 "$BIN" --gpu-heads-frac 0.5
share "NEO_GPU_HEADS_FRAC=0.25 under --gpu-kv-budget 0" "0 GPU + 4 CPU" env NEO_GPU_HEADS_FRAC=0.25 "$BIN" --gpu-kv-budget 0
share "--gpu-kv-budget 0 then --gpu-heads-frac 0.5" "2 GPU + 2 CPU" "$BIN" --gpu-kv-budget 0 --gpu-heads-frac 0.5
share "--gpu-heads-frac 0.5 then --gpu-kv-budget 0" "0 GPU + 4 CPU" "$BIN" --gpu-heads-frac 0.5 --gpu-kv-budget 0
share "NEO_GPU_HEADS_FRAC=0.5 and NEO_GPU_KV_BUDGET=0: the budget" "0 GPU + 4 CPU" env NEO_GPU_HEADS_FRAC=0.5 NEO_GPU_KV_BUDGET=0 "$BIN"
# CUDA graphs need a GPU runtime, as a GPU share does
load_error "--cuda-graphs on without --gpu: refused" "--cuda-graphs on needs --gpu or --gpu-standin" \
    "$MODEL" -z "$TOK" -t 0 -n 16 -i "$PROMPT" --cuda-graphs on
golden "NEO_CUDA_GRAPHS=on without a GPU" "$GREEDY" env NEO_CUDA_GRAPHS=on "$BIN" "$MODEL" -z "$TOK" -t 0 -n 256 -i "$PROMPT"
if grep -qF "NEO_CUDA_GRAPHS is ignored without --gpu or --gpu-standin" "$T/err"; then
    pass "NEO_CUDA_GRAPHS without a GPU: a warning on stderr"
else
    fail "NEO_CUDA_GRAPHS without a GPU: no warning" "$T/err"
fi
# --gpu: the greedy text with a GPU build, else a clear message (the reason, then what to do)
if "$BIN" "$MODEL" -z "$TOK" -t 0 -n 256 -i "$PROMPT" --gpu >"$T/out" 2>"$T/err" </dev/null; then
    if cmp -s "$T/out" "$GREEDY"; then pass "--gpu: greedy text on the GPU"; else fail "--gpu: text differs" "$T/out"; fi
elif [ "$(wc -l <"$T/err" | tr -d ' ')" -le 2 ] && tail -n 1 "$T/err" | grep -q "GPU" && [ ! -s "$T/out" ]; then
    # the library's log line says why, then mini-chat's own says what to do
    pass "--gpu on a CPU-only build: $(tail -n 1 "$T/err")"
else
    fail "--gpu: no clear message" "$T/err"
fi
for kv in f16 bf16; do
    if "$BIN" "$MODEL" -z "$TOK" -t 0 -n 64 -i "$PROMPT" --kv-type $kv >"$T/out" 2>"$T/err" </dev/null &&
       grep -q "^Once upon a time" "$T/out"; then
        pass "--kv-type $kv runs"
    else
        fail "--kv-type $kv" "$T/err"
    fi
done

# --- sampling edges ------------------------------------------------------------------------------
# -p 1 is no top-p, as -p 0 (run.c samples the whole distribution for both)
if "$BIN" "$MODEL" -z "$TOK" -t 1 -p 0 -s 42 -n 256 -i "$PROMPT" >"$T/p0.txt" 2>"$T/err" </dev/null; then
    golden "-p 1.0 samples as -p 0" "$T/p0.txt" "$BIN" "$MODEL" -z "$TOK" -t 1 -p 1.0 -s 42 -n 256 -i "$PROMPT"
else
    fail "-p 0: exit status" "$T/err"
fi
# a top-p so small that no token passes run.c's cutoff: the most likely token, so the greedy text
golden "-t 10000 -p 0.00001: no token past the cutoff, the most likely" "$GREEDY" \
    "$BIN" "$MODEL" -z "$TOK" -t 10000 -p 0.00001 -s 1 -n 256 -i "$PROMPT"

# the logits are divided by the temperature: a small one leaves the most likely token all the
# probability (the greedy text), a large one spreads it nearly evenly (anything but the greedy text)
golden "-t 0.00001 -p 0: the greedy text" "$GREEDY" "$BIN" "$MODEL" -z "$TOK" -t 0.00001 -p 0 -s 42 -n 256 -i "$PROMPT"
if "$BIN" "$MODEL" -z "$TOK" -t 100000 -p 0 -s 42 -n 256 -i "$PROMPT" >"$T/out" 2>"$T/err" </dev/null &&
    [ -s "$T/out" ] && ! cmp -s "$T/out" "$GREEDY"; then
    pass "-t 100000 -p 0: not the greedy text"
else
    fail "-t 100000 -p 0: the greedy text, or an error" "$T/err"
fi

# --- interactive mode on a scripted stdin --------------------------------------------------------
# the counts of /stats: two lines of 5 and 4 tokens (BOS with the first only), replies of 5
if printf 'Once upon a time\nHello\n/stats\n' | "$BIN" "$MODEL" -n 5 -t 0 >"$T/out" 2>"$T/err"; then i_rc=0; else i_rc=$?; fi
if [ "$i_rc" -eq 0 ] && grep -qF "[stats] 18 tokens run" "$T/out" && grep -qF "last reply 5 tokens" "$T/out" &&
    grep -qF "context 18 of 512 tokens" "$T/out"; then
    pass "chat: /stats counts 18 tokens run, a last reply of 5, a context of 18"
else
    fail "chat: /stats counts (exit $i_rc)" "$T/out"
fi
# a reply that fills the context ends with a marker; later lines are refused, and the chat exits 0
if printf 'Once upon a time\nThe\nThe\n' | "$BIN" "$MODEL" -n 0 -t 1.0 -s 5 >"$T/out" 2>"$T/err"; then i_rc=0; else i_rc=$?; fi
if [ "$i_rc" -eq 0 ] && grep -qF "[the context is full (512 tokens); type /reset to start over]" "$T/out" &&
    [ "$(grep -cF "[the context is full: 512 of 512 tokens used" "$T/out")" = 2 ]; then
    pass "chat: a reply that fills the context, then two lines refused, exit 0"
else
    fail "chat: filling the context (exit $i_rc)" "$T/err"
fi
if printf 'Once upon a time\n/stats\n/reset\nHello\n/quit\n' |
    "$BIN" "$MODEL" -n 30 -t 0 >"$T/out" 2>"$T/err"; then i_rc=0; else i_rc=$?; fi
if [ "$i_rc" -ne 0 ]; then
    fail "chat: exit status $i_rc" "$T/err"
elif ! grep -qF "> , there was a little girl named Lily" "$T/out"; then
    fail "chat: the greedy reply to '$PROMPT' is not run.c's continuation" "$T/out"
elif ! grep -qF "[stats]" "$T/out" || ! grep -q "tok/s" "$T/out" || ! grep -q "bytes host" "$T/out"; then
    fail "chat: /stats printed no tok/s or KV bytes" "$T/out"
elif ! grep -qF "[context cleared]" "$T/out"; then
    fail "chat: /reset did not answer" "$T/out"
elif ! grep -qF "[the reply stopped at the step limit, -n 30]" "$T/out"; then
    fail "chat: a reply cut at -n has no marker" "$T/out"
else
    pass "chat: reply (cut at -n, with a marker), /stats, /reset, /quit, exit 0"
fi
# after /reset the session starts over: the same line gives the same greedy reply as at first
if printf 'Once upon a time\n/reset\nOnce upon a time\n' | "$BIN" "$MODEL" -n 20 -t 0 >"$T/out" 2>"$T/err"; then
    if [ "$(grep -c "^> , there was a little girl" "$T/out")" = 2 ]; then
        pass "chat: /reset clears the session; EOF leaves with exit 0"
    else
        fail "chat: the reply after /reset differs" "$T/out"
    fi
else
    fail "chat: EOF without /quit" "$T/err"
fi
# a long scripted session fills the context: it says so and keeps going until /quit
i=0
: >"$T/long_input"
while [ $i -lt 40 ]; do
    echo "The little dog ran to the park and played with a big red ball all day long." >>"$T/long_input"
    i=$((i + 1))
done
echo "/quit" >>"$T/long_input"
if "$BIN" "$MODEL" -n 20 -s 7 <"$T/long_input" >"$T/out" 2>"$T/err" && grep -q "/reset" "$T/out" &&
   grep -qi "context is full" "$T/out"; then
    pass "chat: a full context is reported (and /reset suggested), exit 0"
else
    fail "chat: full context" "$T/err"
fi

# a line that cannot fit the context is refused before it is encoded; the chat goes on
{ echo "Once upon a time"; head -c 100000 /dev/zero | tr '\000' a; echo; echo "/quit"; } >"$T/huge_line"
if "$BIN" "$MODEL" -n 5 -t 0 <"$T/huge_line" >"$T/out" 2>"$T/err" &&
   grep -qF "that line needs at least 14286 more" "$T/out"; then
    pass "chat: a 100 KB line is refused at once, exit 0"
else
    fail "chat: a 100 KB line" "$T/out"
fi

# --- split output = unsplit output, on the host stand-in GPU (the same split orchestration as CUDA) --------
# greedy output identical with no split, split + stream-back (OFF), split + both halves (ON) and
# split + the host cells shared by the CPU and the stream-back (HYBRID)
for split in "" "--gpu-heads-frac 0.5 --neo-pipeline off" "--gpu-heads-frac 0.5 --neo-pipeline on" \
             "--gpu-heads-frac 0.5 --neo-pipeline hybrid" "--gpu-heads-frac 0.25 --neo-pipeline hybrid --kv-type bf16" \
             "--gpu-heads-frac 0.25 --neo-pipeline auto" "--gpu-heads-frac 0.75 --neo-pipeline on --kv-type f16" \
             "--gpu-kv-budget 300000 --neo-pipeline on" "--gpu-kv-budget 0 --neo-pipeline off"; do
    # shellcheck disable=SC2086  # split "flag value" on purpose
    golden "split = unsplit, stand-in GPU $split: greedy" "$GREEDY" "$BIN" "$MODEL" -z "$TOK" -t 0 -n 256 -i "$PROMPT" --gpu-standin $split
done
# --neo-pipeline off with no split is byte-identical to no split
golden "stand-in GPU, no split, --neo-pipeline off: greedy" "$GREEDY" "$BIN" "$MODEL" -z "$TOK" -t 0 -n 256 -i "$PROMPT" \
    --gpu-standin --neo-pipeline off
# the split moves KV bytes from the GPU to the host: half of them at frac 0.5
kv_bytes() { # prints "GPU HOST" from mini-chat's info line
    sed -n 's/.*: \([0-9]*\) bytes GPU + \([0-9]*\) bytes host.*/\1 \2/p' "$1" | head -n 1
}
"$BIN" "$MODEL" -z "$TOK" -t 0 -n 16 -i "$PROMPT" --gpu-standin >/dev/null 2>"$T/c3a" </dev/null || true
"$BIN" "$MODEL" -z "$TOK" -t 0 -n 16 -i "$PROMPT" --gpu-standin --gpu-heads-frac 0.5 >/dev/null 2>"$T/c3b" </dev/null || true
set -- $(kv_bytes "$T/c3a") $(kv_bytes "$T/c3b")
if [ $# -eq 4 ] && [ "$1" -gt 0 ] && [ "$2" -eq 0 ] && [ "$3" -eq $(($1 / 2)) ] && [ "$4" -eq $(($1 / 2)) ]; then
    pass "a split moves KV, stand-in GPU: GPU $1 -> $3, host $2 -> $4 at --gpu-heads-frac 0.5"
else
    fail "a split moves KV, stand-in GPU: '$*'" "$T/c3b"
fi
# the stand-in's stats say what it does, not "0 with both halves overlapped"
if grep -qF "the stand-in GPU runs its half on the host, one half after the other" "$T/c3b" &&
   ! grep -q "overlapped" "$T/c3b"; then
    pass "stand-in GPU: the stats say the halves take turns"
else
    fail "stand-in GPU: the stats line" "$T/c3b"
fi

echo "test_golden: $((n_checks - n_failed)) passed, $n_failed failed"
if [ "$n_failed" -ne 0 ]; then
    echo "test_golden: FAILED"
    exit 1
fi
