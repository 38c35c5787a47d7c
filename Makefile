# neo_attn: `make` builds the examples, `make test` runs every CPU test (what CI runs),
# `make demo` runs mini-chat on stories260K, `make bench` runs the CPU attention benchmark.
# `make help` lists the targets.
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
TEST_H   = tests/check.h tests/cpu_isa.h tests/synth_model.h
# The model files the tests read: the repository's own copy (tests/data/README.md says where it
# came from).
NEO_MODEL_DIR ?= tests/data
export NEO_MODEL_DIR
# make install
PREFIX  ?= /usr/local
DESTDIR ?=

UNIT     = test_api test_ref test_model test_tokenizer
FUZZ_SECONDS ?= 30
RUN      = NEO_BUILD_DIR=$(B) sh tests/run_test.sh

.PHONY: all help install test test-build test-run test-unit test-variants test-san test-tsan test-compile \
        test-golden test-fuzz demo bench probe-cpu clean

all: $(B)/mini-chat $(B)/bench-cpu $(B)/probe-cpu

help:
	@echo "make                  build/mini-chat, build/bench-cpu, build/probe-cpu"
	@echo "make demo             mini-chat tells a story with stories260K (tests/data)"
	@echo "make test             every CPU test (what CI runs): builds first (make -j2), then runs"
	@echo "                      each test, one count line each, and a last line 'N passed, M failed';"
	@echo "                      the tests' output is in build/log/"
	@echo "make test-unit        test_api, test_ref, test_model, test_tokenizer"
	@echo "make test-variants    test_ref and test_api built without threads and without SIMD"
	@echo "make test-san         the unit tests under ASan + UBSan"
	@echo "make test-tsan        the thread pool under TSan"
	@echo "make test-compile     the header as C11 and C++17, static, from two translation units"
	@echo "make test-golden      mini-chat against llama2.c run.c's output, and its error paths"
	@echo "make test-fuzz        libFuzzer on the model loader and the tokenizer (FUZZ_SECONDS=$(FUZZ_SECONDS) each)"
	@echo "make bench            the CPU attention benchmark"
	@echo "make probe-cpu        where one CPU decode call's time goes"
	@echo "make install          the header, neo_attn_cuda.cu and mini-chat under PREFIX ($(PREFIX)), DESTDIR"
	@echo "make cuda-build       the CUDA programs (needs nvcc); test-cuda-ops, test-cuda, gpu-check need a GPU"
	@echo "make bench-gpu        build/bench, the GPU benchmark"
	@echo "make clean            remove build/"

$(B):
	mkdir -p $(B) $(B)/san $(B)/tsan

$(B)/mini-chat: examples/mini-chat/mini_chat.c $(HDR) | $(B)
	$(CC) $(CSTD) $(CWARN) $(OPT) -I. $< -o $@ $(LDLIBS)

$(B)/bench-cpu: examples/bench/bench_cpu.c examples/bench/bench_util.h $(HDR) | $(B)
	$(CC) $(CSTD) $(CWARN) -O3 -g -I. $< -o $@ $(LDLIBS)

$(B)/probe-cpu: examples/bench/probe_cpu.c examples/bench/bench_util.h $(HDR) | $(B)
	$(CC) $(CSTD) $(CWARN) -O3 -g -I. $< -o $@ $(LDLIBS)

install: $(B)/mini-chat
	install -d $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/neo_attn
	install -m 644 $(HDR) $(DESTDIR)$(PREFIX)/include/$(HDR)
	install -m 644 neo_attn_cuda.cu $(DESTDIR)$(PREFIX)/share/neo_attn/neo_attn_cuda.cu
	install -m 755 $(B)/mini-chat $(DESTDIR)$(PREFIX)/bin/mini-chat

# --- tests ---------------------------------------------------------------------------------------
# make test builds every test program first, two at a time, then runs the tests one at a time
# (they use both cores), each through tests/run_test.sh: its output goes to build/log/, its count
# line to the screen and build/results, which the last line adds up.
$(B)/test_%: tests/test_%.c $(TEST_H) $(HDR) | $(B)
	$(CC) $(CSTD) $(CWARN) $(OPT) -I. $< -o $@ $(LDLIBS)

$(B)/san/test_%: tests/test_%.c $(TEST_H) $(HDR) | $(B)
	$(CC) $(CSTD) $(CWARN) -O1 -g $(SAN) -I. $< -o $@ $(LDLIBS)

# the tokenizer test needs none of the header's SIMD kernels (which take most of a build's time)
$(B)/test_tokenizer: tests/test_tokenizer.c examples/mini-chat/mini_chat.c tests/check.h $(HDR) | $(B)
	$(CC) $(CSTD) $(CWARN) $(OPT) -DNEO_ATTN_NO_SIMD=1 -I. $< -o $@ $(LDLIBS)

$(B)/san/test_tokenizer: tests/test_tokenizer.c examples/mini-chat/mini_chat.c tests/check.h $(HDR) | $(B)
	$(CC) $(CSTD) $(CWARN) -O1 -g $(SAN) -DNEO_ATTN_NO_SIMD=1 -I. $< -o $@ $(LDLIBS)

$(B)/tsan/test_pool: tests/test_pool.c $(TEST_H) $(HDR) | $(B)
	$(CC) $(CSTD) $(CWARN) -O1 -g -fsanitize=thread -I. $< -o $@ $(LDLIBS)

# the header built without threads and without SIMD: the serial pool and the scalar kernels alone
$(B)/test_%_plain: tests/test_%.c $(TEST_H) $(HDR) | $(B)
	$(CC) $(CSTD) $(CWARN) $(OPT) -I. -DNEO_ATTN_NO_THREADS=1 -DNEO_ATTN_NO_SIMD=1 $< -o $@ $(LDLIBS)

# The header as C11 and C++17, with and without the implementation, linked from two
# translation units, and once more with NEO_ATTN_STATIC.
$(B)/compile_a.o: tests/test_compile.c $(HDR) | $(B)
	$(CC) $(CSTD) $(CWARN) -c $< -I. -o $@
$(B)/compile_b.o: tests/test_compile_impl.c $(HDR) | $(B)
	$(CC) $(CSTD) $(CWARN) -c $< -I. -o $@
$(B)/compile_c: $(B)/compile_a.o $(B)/compile_b.o
	$(CC) $^ -o $@ $(LDLIBS)
$(B)/compile_cc_a.o: tests/test_compile.cc $(HDR) | $(B)
	$(CXX) -std=c++17 $(WARN) -O2 -c $< -I. -o $@
$(B)/compile_cc_b.o: tests/test_compile.cc $(HDR) | $(B)
	$(CXX) -std=c++17 $(WARN) -O2 -DNEO_TEST_IMPL -c $< -I. -o $@
$(B)/compile_cc: $(B)/compile_cc_a.o $(B)/compile_cc_b.o
	$(CXX) $^ -o $@ $(LDLIBS)
$(B)/compile_static: tests/test_compile_impl.c $(HDR) | $(B)
	$(CC) $(CSTD) $(CWARN) -DNEO_ATTN_STATIC $< -DNEO_TEST_MAIN -I. -o $@ $(LDLIBS)

# libFuzzer targets, with ASan and UBSan. The tokenizer's needs none of the header's SIMD
# kernels, so they are left out. The model loader's runs a session step through them, and is
# built at -O0: clang's optimising pipeline over the sanitized SIMD kernels costs many times the
# CPU of a whole fuzzing run, and at -O0 it still runs about half as many executions a second.
FUZZ_FLAGS = $(CSTD) -g -I. -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all
$(B)/fuzz_model: tests/fuzz_model.c $(HDR) | $(B)
	$(CLANG) $(FUZZ_FLAGS) -O0 $< -o $@ $(LDLIBS)
$(B)/fuzz_tokenizer: tests/fuzz_tokenizer.c tests/bpe_reference.h examples/mini-chat/mini_chat.c $(HDR) | $(B)
	$(CLANG) $(FUZZ_FLAGS) -O1 -DNEO_ATTN_NO_SIMD=1 $< -o $@ $(LDLIBS)

FUZZ_BINS    = $(B)/fuzz_model $(B)/fuzz_tokenizer
COMPILE_BINS = $(B)/compile_c $(B)/compile_cc $(B)/compile_static $(B)/probe-cpu
# the longest builds first, so that two jobs keep both cores busy to the end
TEST_BINS    = $(FUZZ_BINS) $(addprefix $(B)/san/,$(UNIT)) $(B)/tsan/test_pool $(addprefix $(B)/,$(UNIT)) \
               $(B)/test_ref_plain $(B)/test_api_plain $(COMPILE_BINS) $(B)/mini-chat

test:
	@rm -f $(B)/results
	@$(MAKE) --no-print-directory -j2 test-build
	@$(MAKE) --no-print-directory -j1 -k test-run; $(RUN) --summary $$?

test-build: $(TEST_BINS)

test-run: test-compile test-unit test-variants test-golden test-san test-tsan test-fuzz

test-unit: $(addprefix $(B)/,$(UNIT))
	@f=0; for t in $(UNIT); do $(RUN) $$t ./$(B)/$$t || f=1; done; exit $$f

test-variants: $(B)/test_ref_plain $(B)/test_api_plain
	@f=0; for t in test_ref test_api; do $(RUN) "$$t no-threads no-simd" ./$(B)/$${t}_plain || f=1; done; exit $$f

# test_api asks for a 1 PiB cache on purpose (NEO_ERR_NO_MEMORY must come back), with ASan's
# allocator_may_return_null=1, so ASan warns "failed to allocate 0x1fffffffc0000 bytes": that
# line stays in build/log/test_api_asan_ubsan.log with the rest of the test's output.
test-san: $(addprefix $(B)/san/,$(UNIT))
	@f=0; for t in $(UNIT); do $(RUN) "$$t asan+ubsan" ./$(B)/san/$$t || f=1; done; exit $$f

test-tsan: $(B)/tsan/test_pool
	@TSAN_OPTIONS=halt_on_error=1 $(RUN) "test_pool tsan" ./$(B)/tsan/test_pool

test-compile: $(COMPILE_BINS)
	@f=0; for t in compile_c compile_cc compile_static; do $(RUN) $$t ./$(B)/$$t || f=1; done; \
	$(RUN) probe-cpu ./$(B)/probe-cpu --ctx 600 --layers 2 --calls 5 --threads 2 --gap-us 0 || f=1; exit $$f

test-golden: $(B)/mini-chat
	@$(RUN) test_golden sh tests/test_golden.sh $(B)/mini-chat

# The two fuzzers run at once (each is one thread), FUZZ_SECONDS each from their seeds; their
# output is in build/log/fuzz_*.log.
FUZZ_RUN = -max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=2048 -print_final_stats=1
test-fuzz: $(FUZZ_BINS)
	@rm -rf $(B)/corpus_model $(B)/corpus_tokenizer
	@mkdir -p $(B)/corpus_model $(B)/corpus_tokenizer
	@cp tests/fuzz_seeds/model/* $(B)/corpus_model/ && cp tests/fuzz_seeds/tokenizer/* $(B)/corpus_tokenizer/
	@f=0; $(RUN) fuzz_tokenizer ./$(B)/fuzz_tokenizer $(FUZZ_RUN) $(B)/corpus_tokenizer & \
	$(RUN) fuzz_model ./$(B)/fuzz_model $(FUZZ_RUN) $(B)/corpus_model || f=1; wait $$! || f=1; exit $$f

demo: $(B)/mini-chat
	./$(B)/mini-chat $(NEO_MODEL_DIR)/stories260K.bin -z $(NEO_MODEL_DIR)/tok512.bin -t 0.8 -p 0.9 -s 7 -n 200 \
	  -i "Once upon a time"

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
# One object serves every supported GPU: SASS for each of CUDA_ARCHS (Ampere sm_80 and sm_86, Ada
# sm_89, Hopper sm_90) plus PTX of the first, which the driver compiles for newer GPUs (nvcc
# builds the architectures in parallel). Narrow it for a faster build (make cuda-build
# CUDA_ARCHS=90), or set CUDA_GENCODE outright (gpu_check's JIT modes build PTX only).
CUDA_HOME ?= /usr/local/cuda
CUDA_ARCHS ?= 80 86 89 90
CUDA_GENCODE ?= $(foreach a,$(CUDA_ARCHS),-gencode arch=compute_$(a),code=sm_$(a)) \
                -gencode arch=compute_$(firstword $(CUDA_ARCHS)),code=compute_$(firstword $(CUDA_ARCHS))
NVCCFLAGS ?= -O3 --threads 0 $(CUDA_GENCODE)
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
