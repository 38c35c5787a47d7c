# neo_attn: `make` builds the examples, `make test` runs every CPU test (what CI runs),
# `make demo` runs mini-chat on stories260K, `make bench` runs the CPU attention benchmark.
CC      ?= cc
CXX     ?= c++
CLANG   ?= clang
NVCC    ?= nvcc
CSTD     = -std=c11 -D_POSIX_C_SOURCE=200809L
WARN     = -Wall -Wextra -Wpedantic -Werror -Wshadow -Wundef
CWARN    = $(WARN) -Wstrict-prototypes
OPT     ?= -O2 -g
LDLIBS   = -lm -lpthread
SAN      = -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
B        = build
HDR      = neo_attn.h
# The model files the tests read (never copied into the repository).
NEO_MODEL_DIR ?= ../shared/models
export NEO_MODEL_DIR

UNIT     = test_api test_ref test_model
FUZZ_SECONDS ?= 30

.PHONY: all test test-unit test-variants test-san test-tsan test-compile test-golden test-fuzz demo bench probe-cpu clean

all: $(B)/mini-chat $(B)/bench-cpu $(B)/probe-cpu

$(B):
	mkdir -p $(B) $(B)/san $(B)/tsan

$(B)/mini-chat: examples/mini-chat/mini_chat.c $(HDR) | $(B)
	$(CC) $(CSTD) $(CWARN) $(OPT) -I. $< -o $@ $(LDLIBS)

$(B)/bench-cpu: examples/bench/bench_cpu.c examples/bench/bench_util.h $(HDR) | $(B)
	$(CC) $(CSTD) $(CWARN) -O3 -g -I. $< -o $@ $(LDLIBS)

$(B)/probe-cpu: examples/bench/probe_cpu.c examples/bench/bench_util.h $(HDR) | $(B)
	$(CC) $(CSTD) $(CWARN) -O3 -g -I. $< -o $@ $(LDLIBS)

$(B)/test_%: tests/test_%.c tests/check.h $(HDR) | $(B)
	$(CC) $(CSTD) $(CWARN) $(OPT) -I. $< -o $@ $(LDLIBS)

$(B)/san/test_%: tests/test_%.c tests/check.h $(HDR) | $(B)
	$(CC) $(CSTD) $(CWARN) -O1 -g $(SAN) -I. $< -o $@ $(LDLIBS)

$(B)/tsan/test_pool: tests/test_pool.c tests/check.h $(HDR) | $(B)
	$(CC) $(CSTD) $(CWARN) -O1 -g -fsanitize=thread -I. $< -o $@ $(LDLIBS)

test: test-compile test-unit test-variants test-golden test-san test-tsan test-fuzz
	@echo "make test: all passed"

test-unit: $(addprefix $(B)/,$(UNIT))
	@for t in $(UNIT); do echo "== $$t"; ./$(B)/$$t || exit 1; done

# the header built without threads and without SIMD: the serial pool and the scalar kernels alone
test-variants: | $(B)
	$(CC) $(CSTD) $(CWARN) $(OPT) -I. -DNEO_ATTN_NO_THREADS=1 -DNEO_ATTN_NO_SIMD=1 tests/test_ref.c -o $(B)/test_ref_plain $(LDLIBS)
	$(CC) $(CSTD) $(CWARN) $(OPT) -I. -DNEO_ATTN_NO_THREADS=1 -DNEO_ATTN_NO_SIMD=1 tests/test_api.c -o $(B)/test_api_plain $(LDLIBS)
	@echo "== test_ref, test_api: NEO_ATTN_NO_THREADS, NEO_ATTN_NO_SIMD"; ./$(B)/test_ref_plain && ./$(B)/test_api_plain

test-san: $(addprefix $(B)/san/,$(UNIT))
	@for t in $(UNIT); do echo "== asan+ubsan $$t"; ./$(B)/san/$$t || exit 1; done

test-tsan: $(B)/tsan/test_pool
	@echo "== tsan test_pool"; TSAN_OPTIONS=halt_on_error=1 ./$(B)/tsan/test_pool

# The header as C11 and C++17, with and without the implementation, linked from two
# translation units, and once more with NEO_ATTN_STATIC.
test-compile: | $(B)
	$(CC)  $(CSTD) $(CWARN) -c tests/test_compile.c -I. -o $(B)/compile_a.o
	$(CC)  $(CSTD) $(CWARN) -c tests/test_compile_impl.c -I. -o $(B)/compile_b.o
	$(CC)  $(B)/compile_a.o $(B)/compile_b.o -o $(B)/compile_c $(LDLIBS) && ./$(B)/compile_c
	$(CXX) -std=c++17 $(WARN) -O2 -c tests/test_compile.cc -I. -o $(B)/compile_cc_a.o
	$(CXX) -std=c++17 $(WARN) -O2 -DNEO_TEST_IMPL -c tests/test_compile.cc -I. -o $(B)/compile_cc_b.o
	$(CXX) $(B)/compile_cc_a.o $(B)/compile_cc_b.o -o $(B)/compile_cc $(LDLIBS) && ./$(B)/compile_cc
	$(CC)  $(CSTD) $(CWARN) -DNEO_ATTN_STATIC tests/test_compile_impl.c -DNEO_TEST_MAIN -I. -o $(B)/compile_static $(LDLIBS) && ./$(B)/compile_static
	$(MAKE) --no-print-directory $(B)/probe-cpu && ./$(B)/probe-cpu --ctx 600 --layers 2 --calls 5 --threads 2 --gap-us 0

test-golden: $(B)/mini-chat
	sh tests/test_golden.sh $(B)/mini-chat

$(B)/fuzz_model: tests/fuzz_model.c $(HDR) | $(B)
	$(CLANG) $(CSTD) -O1 -g -fsanitize=fuzzer,address,undefined -I. $< -o $@ -lm -lpthread

$(B)/fuzz_tokenizer: tests/fuzz_tokenizer.c examples/mini-chat/mini_chat.c $(HDR) | $(B)
	$(CLANG) $(CSTD) -O1 -g -fsanitize=fuzzer,address,undefined -I. $< -o $@ -lm -lpthread

test-fuzz: $(B)/fuzz_model $(B)/fuzz_tokenizer
	mkdir -p $(B)/corpus_model && cp tests/fuzz_seeds/model/* $(B)/corpus_model/ && ./$(B)/fuzz_model -max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=2048 $(B)/corpus_model
	mkdir -p $(B)/corpus_tokenizer && cp tests/fuzz_seeds/tokenizer/* $(B)/corpus_tokenizer/ && ./$(B)/fuzz_tokenizer -max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=2048 $(B)/corpus_tokenizer

demo: $(B)/mini-chat
	./$(B)/mini-chat -t 0.8 -p 0.9 -s 7 -n 200 -i "Once upon a time"

bench: $(B)/bench-cpu
	./$(B)/bench-cpu

probe-cpu: $(B)/probe-cpu
	./$(B)/probe-cpu

clean:
	rm -rf $(B)

# --- the CUDA companion -------------------------------------------------------------------------
# --- CUDA ---------------------------------------------------------------------------------
# cuda-build compiles neo_attn_cuda.cu and links it with the header into the GPU programs when
# nvcc is there (CI runs it with no GPU; it passes with a message when nvcc is missing).
# test-cuda-ops, test-cuda and gpu-check need a CUDA GPU. nvcc's launch stubs use the C++
# runtime, hence -lstdc++ when a C compiler links.
CUDA_HOME ?= /usr/local/cuda
NVCCFLAGS ?= -O3 -arch=sm_90
CUDA_LIBS  = -L$(CUDA_HOME)/lib64 -lcudart -lstdc++
CUDA_CC    = $(CC) $(CSTD) $(CWARN) -O2 -g -I. -isystem $(CUDA_HOME)/include

$(B)/neo_attn_cuda.o: neo_attn_cuda.cu $(HDR) | $(B)
	$(NVCC) $(NVCCFLAGS) -Xcompiler -Wall,-Wextra -c $< -o $@

$(B)/test_cuda_ops: tests/test_cuda_ops.c $(HDR) $(B)/neo_attn_cuda.o
	$(CUDA_CC) $< $(B)/neo_attn_cuda.o -o $@ $(CUDA_LIBS) $(LDLIBS)

$(B)/cuda/test_ref: tests/test_ref.c tests/check.h $(HDR) $(B)/neo_attn_cuda.o
	mkdir -p $(B)/cuda
	$(CUDA_CC) -DNEO_ATTN_CUDA=1 -DNEO_TEST_CUDA=1 $< $(B)/neo_attn_cuda.o -o $@ $(CUDA_LIBS) $(LDLIBS)

$(B)/cuda/mini-chat: examples/mini-chat/mini_chat.c $(HDR) $(B)/neo_attn_cuda.o
	mkdir -p $(B)/cuda
	$(CUDA_CC) -DNEO_ATTN_CUDA=1 $< $(B)/neo_attn_cuda.o -o $@ $(CUDA_LIBS) $(LDLIBS)

CUDA_PROGRAMS = $(B)/test_cuda_ops $(B)/cuda/test_ref $(B)/cuda/mini-chat $(B)/bench

cuda-build:
	@if command -v $(NVCC) >/dev/null 2>&1; then $(MAKE) --no-print-directory $(CUDA_PROGRAMS); \
	else echo "cuda-build: $(NVCC) not found, skipping neo_attn_cuda.cu"; fi

test-cuda-ops: $(B)/test_cuda_ops
	./$(B)/test_cuda_ops

test-cuda: $(CUDA_PROGRAMS)
	./$(B)/test_cuda_ops
	./$(B)/cuda/test_ref

# the whole H200 check in one call: kernels, the API suite on the GPU, the seeds' C1/C3/C4,
# compute-sanitizer (tests/gpu_check.sh)
gpu-check:
	sh tests/gpu_check.sh

.PHONY: cuda-build test-cuda-ops test-cuda gpu-check

# --- the GPU benchmark (issue 4) -----------------------------------------------------------------
# bench-gpu builds build/bench: ceilings, attention rows, the decode loop and the capacity row in
# one program, for the lent GPU machine (build/bench --quick | --csv FILE; see examples/bench/bench.c).
# examples/bench/peers.py (torch SDPA) and plot.py (docs/bench.png) run beside it there.
BENCH_COMMIT ?= $(shell git describe --always --dirty --abbrev=7 2>/dev/null || echo unknown)

$(B)/bench: examples/bench/bench.c examples/bench/bench_util.h $(HDR) $(B)/neo_attn_cuda.o
	$(CC) $(CSTD) $(CWARN) -O3 -g -I. -isystem $(CUDA_HOME)/include -DNEO_ATTN_CUDA=1 \
	  -DNEO_BENCH_COMMIT='"$(BENCH_COMMIT)"' $< $(B)/neo_attn_cuda.o -o $@ -Wl,-rpath,$(CUDA_HOME)/lib64 $(CUDA_LIBS) $(LDLIBS)

bench-gpu: $(B)/bench

.PHONY: bench-gpu

# --- bitwise identity and lint -------------------------------------------------------------------
# test-bits: the outputs of a fixed set of cases (every CPU path this machine has, the stand-in,
# the decode loop) hashed and compared with tests/data/bits_d3e7625.txt, made by the header at
# d3e7625; `build/test_bits --write` adds the lines of a CPU path that file lacks (AVX-512).
test-bits: $(B)/test_bits
	./$(B)/test_bits

$(B)/test_bits: tests/test_bits.c tests/check.h tests/cpu_isa.h tests/synth_model.h $(HDR) | $(B)
	$(CC) $(CSTD) $(CWARN) $(OPT) -I. $< -o $@ $(LDLIBS)

# test-bits-ref: writes this machine's lines of that file from a build against the header at
# d3e7625 (how the AVX-512 lines are made, on a machine that has AVX-512); then run test-bits.
BITS_REF ?= d3e7625
test-bits-ref: | $(B)
	mkdir -p $(B)/bits_ref && git show $(BITS_REF):neo_attn.h > $(B)/bits_ref/neo_attn.h
	$(CC) $(CSTD) $(CWARN) $(OPT) -I$(B)/bits_ref tests/test_bits.c -o $(B)/bits_ref/test_bits $(LDLIBS)
	./$(B)/bits_ref/test_bits --write

# test-no-model: the header without the decode loop (NEO_ATTN_NO_MODEL) compiles, links and runs
test-no-model: | $(B)
	$(CC) $(CSTD) $(CWARN) -DNEO_ATTN_NO_MODEL -DNEO_ATTN_STATIC -DNEO_TEST_MAIN -I. tests/test_compile_impl.c \
	  -o $(B)/compile_no_model $(LDLIBS) && ./$(B)/compile_no_model

.PHONY: test-bits test-bits-ref test-no-model

# lint: the complexity gates (no function over 120 lines or cyclomatic complexity 40) and no
# repeated block of 6 or more lines, over the library's two files (lizard: pip install -r
# tests/requirements.txt). LINT_FILES may name fewer files.
LINT_FILES ?= neo_attn.h neo_attn_cuda.cu
LIZARD     ?= lizard

lint:
	$(LIZARD) -C 40 -L 120 -w $(LINT_FILES)
	@$(LIZARD) -Eduplicate $(LINT_FILES) | awk ' \
	  /^[^ ]+:[0-9]+ ~ [0-9]+$$/ { split($$1, a, ":"); if ($$3 - a[2] + 1 >= 6) { print "repeated block of " ($$3 - a[2] + 1) " lines: " $$0; bad = 1 } } \
	  END { if (bad) exit 1; print "lint: no repeated block of 6 or more lines" }'

.PHONY: lint

# --- the documentation's programs ---------------------------------------------------------------
# test-snippets cuts the quick-start programs out of README.md and neo_attn.h's manual, checks
# that the two copies agree, and builds and runs each as C (ASan + UBSan, leaks fail) and as C++
# (tests/test_snippets.sh).
test-snippets: | $(B)
	CC="$(CC)" CXX="$(CXX)" sh tests/test_snippets.sh $(B)

.PHONY: test-snippets
