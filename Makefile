# neo_attn: `make` builds the examples, `make test` runs every CPU test (what CI runs),
# `make demo` runs mini-chat on stories260K, `make bench` runs the CPU attention benchmark.
# `make help` lists the targets.
CC      ?= cc
CXX     ?= c++
CLANG   ?= clang
NVCC    ?= nvcc
# The tests are POSIX programs; the header itself is compiled as plain C11 (HSTD: the implementation's
# objects and the compile tests), as engines that ask for no POSIX feature macro compile it.
CSTD     = -std=c11 -D_POSIX_C_SOURCE=200809L
HSTD     = -std=c11
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

FUZZ_SECONDS ?= 30
RUN      = NEO_BUILD_DIR=$(B) sh tests/run_test.sh

.PHONY: all help install test test-build test-run test-unit test-variants test-san test-tsan test-compile \
        test-golden test-fuzz test-bits test-snippets test-no-model demo bench probe-cpu clean

all: $(B)/mini-chat $(B)/bench-cpu $(B)/probe-cpu $(B)/read-balance

help:
	@echo "make                  build/mini-chat, build/bench-cpu, build/probe-cpu, build/read-balance"
	@echo "make demo             mini-chat tells a story with stories260K (tests/data)"
	@echo "make test             every CPU test (what CI runs), two jobs at a time (TEST_J=2): one"
	@echo "                      count line a test and a last line 'N passed, M failed'; the tests'"
	@echo "                      output is in build/log/. The sanitizer runs set NEO_TEST_QUICK=1:"
	@echo "                      every case kind and path, fewer repetitions"
	@echo "make test-build       every test program, built only (make -j2 test-build)"
	@echo "make test-unit        test_api, test_ref, test_model, test_tokenizer"
	@echo "make test-variants    test_ref and test_api built without threads and without SIMD"
	@echo "make test-san         the unit tests under ASan + UBSan"
	@echo "make test-tsan        the thread pool under TSan"
	@echo "make test-compile     the header as C11 and C++17, static, from two translation units, and"
	@echo "                      without the decode loop (test-no-model)"
	@echo "make test-bits        outputs bitwise equal to those of commit BITS_REF (tests/data/bits.txt), gcc and clang"
	@echo "make test-snippets    the README's and manual's programs as C (ASan + UBSan) and C++"
	@echo "make test-golden      mini-chat against llama2.c run.c's output, and its error paths"
	@echo "make test-fuzz        libFuzzer on the model loader and the tokenizer (FUZZ_SECONDS=$(FUZZ_SECONDS) each)"
	@echo "make bench            the CPU attention benchmark"
	@echo "make probe-cpu        where one CPU decode call's time goes"
	@echo "make build/scores-cell, build/vector-rates, build/read-compute"
	@echo "                      x86 tools: one SIMD scores kernel alone; the vector rates of pinned threads;"
	@echo "                      what the cores read while doing a decode kernel's arithmetic"
	@echo "make install          the header, neo_attn_cuda.cu and mini-chat under PREFIX ($(PREFIX)), DESTDIR"
	@echo "make cuda-build       the CUDA programs (needs nvcc); test-cuda-ops, test-cuda, gpu-check need a GPU"
	@echo "make bench-gpu        build/bench, the GPU benchmark"
	@echo "make build/in-place   how fast the GPU reads a split layer's host heads in place, by block shape"
	@echo "make lint             the library's complexity gates and repeated code (pip install -r tests/requirements.txt)"
	@echo "make clean            remove build/"

# the build folders, made once (a stamp, so that a build/ made by hand gets its subfolders too)
$(B)/.dirs:
	mkdir -p $(B) $(B)/san $(B)/tsan && touch $@

# mini-chat links the implementation's object that the tests share (see "tests" below)
$(B)/mini-chat: examples/mini-chat/mini_chat.c $(HDR) $(B)/impl.o
	$(CC) $(CSTD) $(CWARN) $(OPT) $(LINK_IMPL) -I. $< $(B)/impl.o -o $@ $(LDLIBS)

$(B)/bench-cpu: examples/bench/bench_cpu.c examples/bench/bench_util.h $(HDR) | $(B)/.dirs
	$(CC) $(CSTD) $(CWARN) -O3 -g -I. $< -o $@ $(LDLIBS)

$(B)/probe-cpu: examples/bench/probe_cpu.c examples/bench/bench_util.h $(HDR) | $(B)/.dirs
	$(CC) $(CSTD) $(CWARN) -O3 -g1 -I. $< -o $@ $(LDLIBS)

$(B)/read-balance: examples/bench/read_balance.c examples/bench/bench_util.h | $(B)/.dirs
	$(CC) $(CSTD) $(CWARN) -O2 -I. $< -o $@ $(LDLIBS)

# x86-64 tools, built on demand: one SIMD scores kernel alone (examples/bench/scores_cell.c), the
# vector instruction rates of pinned threads (examples/bench/vector_rates.c, AVX-512), and what
# the cores read while doing a decode kernel's arithmetic (examples/bench/read_compute.c, AVX-512)
$(B)/scores-cell: examples/bench/scores_cell.c $(HDR) | $(B)/.dirs
	$(CC) $(CSTD) $(CWARN) -O3 -g1 -I. $< -o $@ $(LDLIBS)

$(B)/read-compute: examples/bench/read_compute.c examples/bench/bench_util.h $(HDR) | $(B)/.dirs
	$(CC) $(CSTD) $(CWARN) -O3 -g1 -I. $< -o $@ $(LDLIBS)

$(B)/vector-rates: examples/bench/vector_rates.c | $(B)/.dirs
	$(CC) $(CWARN) -O2 -mavx512f $< -o $@ -lpthread

install: $(B)/mini-chat
	install -d $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/neo_attn
	install -m 644 $(HDR) $(DESTDIR)$(PREFIX)/include/$(HDR)
	install -m 644 neo_attn_cuda.cu $(DESTDIR)$(PREFIX)/share/neo_attn/neo_attn_cuda.cu
	install -m 755 $(B)/mini-chat $(DESTDIR)$(PREFIX)/bin/mini-chat

# --- tests ---------------------------------------------------------------------------------------
# make test runs every test through tests/run_test.sh (output in build/log/, one count line on the
# screen and in build/results, which the last line adds up). Its jobs (TEST_JOBS) run two at a
# time (TEST_J), each a make of its own that builds what its tests need and runs them, so that
# tests run while other programs build. They start in TEST_JOBS's order, the costliest first
# (test_ref under ASan, build and run, is a quarter of all the CPU time of a run) and the briefest
# last, so that both cores stay busy to the end; the two fuzzers, built earlier, come last of all
# and run beside each other, each with a core of its own, as the other tests finish. A build of a
# program with the implementation's SIMD kernels costs about as much CPU time as running most of
# the tests; docs/BENCHMARKS.md has the cost of each build and run.
#
# The implementation is compiled once per configuration (tests/test_compile_impl.c: the header with
# NEO_ATTN_IMPLEMENTATION, as C11) into an object that programs using only the public API link:
# -DNEO_ATTN_IMPLEMENTATION_INCLUDED (the implementation's include guard) makes their own
# "#define NEO_ATTN_IMPLEMENTATION" compile nothing more. Tests that reach internals (test_ref,
# test_model, test_api), set the implementation's macros (test_ref, probe-cpu) or need their own
# flags (fuzzers, TSan, no threads / no SIMD) keep the implementation in their translation unit.
LINK_IMPL = -DNEO_ATTN_IMPLEMENTATION_INCLUDED
# The sanitizer runs and the build without threads and SIMD: every case kind and path, fewer
# random repetitions (test_ref's and test_pool's NEO_TEST_QUICK; the plain runs do them all).
QUICK     = NEO_TEST_QUICK=1
# Test programs carry line tables only (-g1): enough for the sanitizers' and a debugger's
# backtraces, and full debug info of the SIMD kernels is a large part of their compile time.
# Each build's optimisation level is the one with the least CPU time for building and running
# it together: -O3 for test_ref (its float64 reference and the scalar kernels vectorised take
# more off the run than the build adds), none for the programs that run in a second or two
# (test_api and test_model, plain and under ASan + UBSan, which instruments every access all the
# same; the shared object of the sanitizer builds), -O2 for the rest. The implementation's code
# under the optimiser, and its warnings that need the optimiser's data flow, are what test_ref
# (-O3), build/impl.o (-O2: test_bits, mini-chat's golden test, compile_c), probe-cpu (-O3) and
# compile_cc (C++, -O1) check.
TOPT      = -O2 -g1
TOPT_O0   = -O0 -g1
TOPT_O3   = -O3 -g1
SAN_O1    = -O1 -g1 $(SAN)
SAN_O0    = -O0 -g1 $(SAN)

$(B)/impl.o: tests/test_compile_impl.c $(HDR) | $(B)/.dirs
	$(CC) $(HSTD) $(CWARN) $(TOPT) -I. -c $< -o $@
$(B)/san/impl.o: tests/test_compile_impl.c $(HDR) | $(B)/.dirs
	$(CC) $(HSTD) $(CWARN) $(SAN_O0) -I. -c $< -o $@

# linked with the implementation's object: the public API only
$(B)/test_bits: tests/test_bits.c $(TEST_H) $(HDR) $(B)/impl.o
	$(CC) $(CSTD) $(CWARN) $(TOPT) $(LINK_IMPL) -I. $< $(B)/impl.o -o $@ $(LDLIBS)
# the same outputs from clang's optimiser (its unrolling and contraction of the SIMD kernels), and
# its warnings
$(B)/clang/test_bits: tests/test_bits.c $(TEST_H) $(HDR) | $(B)/.dirs
	@mkdir -p $(B)/clang
	$(CLANG) $(CSTD) $(CWARN) $(TOPT) -I. $< -o $@ $(LDLIBS)

$(B)/test_%: tests/test_%.c $(TEST_H) $(HDR) | $(B)/.dirs
	$(CC) $(CSTD) $(CWARN) $(TOPT) -I. $< -o $@ $(LDLIBS)
$(B)/test_api $(B)/test_model: $(B)/test_%: tests/test_%.c $(TEST_H) $(HDR) | $(B)/.dirs
	$(CC) $(CSTD) $(CWARN) $(TOPT_O0) -I. $< -o $@ $(LDLIBS)
$(B)/test_ref: tests/test_ref.c $(TEST_H) $(HDR) | $(B)/.dirs
	$(CC) $(CSTD) $(CWARN) $(TOPT_O3) -I. $< -o $@ $(LDLIBS)

$(B)/san/test_%: tests/test_%.c $(TEST_H) $(HDR) | $(B)/.dirs
	$(CC) $(CSTD) $(CWARN) $(SAN_O1) -I. $< -o $@ $(LDLIBS)
$(B)/san/test_model $(B)/san/test_api: $(B)/san/test_%: tests/test_%.c $(TEST_H) $(HDR) | $(B)/.dirs
	$(CC) $(CSTD) $(CWARN) $(SAN_O0) -I. $< -o $@ $(LDLIBS)

# the tokenizer test needs none of the header's SIMD kernels (which take most of a build's time)
$(B)/test_tokenizer: tests/test_tokenizer.c examples/mini-chat/mini_chat.c tests/check.h $(HDR) | $(B)/.dirs
	$(CC) $(CSTD) $(CWARN) $(TOPT) -DNEO_ATTN_NO_SIMD=1 -I. $< -o $@ $(LDLIBS)

$(B)/san/test_tokenizer: tests/test_tokenizer.c examples/mini-chat/mini_chat.c tests/check.h $(HDR) | $(B)/.dirs
	$(CC) $(CSTD) $(CWARN) $(SAN_O1) -DNEO_ATTN_NO_SIMD=1 -I. $< -o $@ $(LDLIBS)

$(B)/tsan/test_pool: tests/test_pool.c $(TEST_H) $(HDR) | $(B)/.dirs
	$(CC) $(CSTD) $(CWARN) -O1 -g1 -fsanitize=thread -I. $< -o $@ $(LDLIBS)

# the header built without threads and without SIMD: the serial pool and the scalar kernels alone
PLAIN     = -DNEO_ATTN_NO_THREADS=1 -DNEO_ATTN_NO_SIMD=1
$(B)/test_%_plain: tests/test_%.c $(TEST_H) $(HDR) | $(B)/.dirs
	$(CC) $(CSTD) $(CWARN) $(TOPT) -I. $(PLAIN) $< -o $@ $(LDLIBS)
$(B)/test_ref_plain: tests/test_ref.c $(TEST_H) $(HDR) | $(B)/.dirs
	$(CC) $(CSTD) $(CWARN) $(TOPT_O3) -I. $(PLAIN) $< -o $@ $(LDLIBS)

# The header as C11 and C++17, with and without the implementation, linked from two
# translation units, once more with NEO_ATTN_STATIC, and once without the decode loop
# (NEO_ATTN_NO_MODEL). The C program links the implementation's object that the tests share;
# the C++ implementation's object is also what the documentation's programs link as C++.
$(B)/compile_a.o: tests/test_compile.c $(HDR) | $(B)/.dirs
	$(CC) $(HSTD) $(CWARN) -c $< -I. -o $@
$(B)/compile_c: $(B)/compile_a.o $(B)/impl.o
	$(CC) $^ -o $@ $(LDLIBS)
$(B)/compile_cc_a.o: tests/test_compile.cc $(HDR) | $(B)/.dirs
	$(CXX) -std=c++17 $(WARN) -O1 -c $< -I. -o $@
$(B)/compile_cc_b.o: tests/test_compile.cc $(HDR) | $(B)/.dirs
	$(CXX) -std=c++17 $(WARN) -O1 -DNEO_TEST_IMPL -c $< -I. -o $@
$(B)/compile_cc: $(B)/compile_cc_a.o $(B)/compile_cc_b.o
	$(CXX) $^ -o $@ $(LDLIBS)
$(B)/compile_static: tests/test_compile_impl.c $(HDR) | $(B)/.dirs
	$(CC) $(HSTD) $(CWARN) -DNEO_ATTN_STATIC $< -DNEO_TEST_MAIN -I. -o $@ $(LDLIBS)
$(B)/compile_no_model: tests/test_compile_impl.c $(HDR) | $(B)/.dirs
	$(CC) $(HSTD) $(CWARN) -DNEO_ATTN_NO_MODEL -DNEO_ATTN_STATIC -DNEO_TEST_MAIN -I. $< -o $@ $(LDLIBS)

# libFuzzer targets, with ASan and UBSan. The tokenizer's needs none of the header's SIMD
# kernels, so they are left out. The model loader's runs a session step through them, and is
# built at -O0: clang's optimising pipeline over the sanitized SIMD kernels costs many times the
# CPU of a whole fuzzing run, and at -O0 it still runs about half as many executions a second.
# Line tables only (-g1), as the test programs: a crash's backtrace keeps its file and line.
FUZZ_FLAGS = $(CSTD) -g1 -I. -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all
$(B)/fuzz_model: tests/fuzz_model.c $(HDR) | $(B)/.dirs
	$(CLANG) $(FUZZ_FLAGS) -O0 $< -o $@ $(LDLIBS)
$(B)/fuzz_tokenizer: tests/fuzz_tokenizer.c tests/bpe_reference.h examples/mini-chat/mini_chat.c $(HDR) | $(B)/.dirs
	$(CLANG) $(FUZZ_FLAGS) -O1 -DNEO_ATTN_NO_SIMD=1 $< -o $@ $(LDLIBS)

FUZZ_BINS    = $(B)/fuzz_model $(B)/fuzz_tokenizer
COMPILE_BINS = $(B)/compile_c $(B)/compile_cc $(B)/compile_static $(B)/compile_no_model $(B)/probe-cpu
TEST_BINS    = $(B)/san/test_ref $(B)/probe-cpu $(B)/test_ref $(B)/test_api $(B)/test_model $(B)/impl.o \
               $(B)/san/test_api $(B)/san/test_model $(B)/san/impl.o $(B)/tsan/test_pool $(FUZZ_BINS) \
               $(B)/compile_cc $(B)/san/test_tokenizer $(B)/test_tokenizer $(B)/test_bits $(B)/mini-chat \
               $(B)/snippets/built $(B)/test_ref_plain $(B)/test_api_plain $(B)/clang/test_bits $(COMPILE_BINS)

# Each run-NAME target runs one test (run-san-NAME under ASan + UBSan), built first if need be.
# A job named job-X runs the tests JOB_X names, or run-X alone; the programs that link an object
# another program also links are in one job, so that no two jobs build the same file at once.
TEST_J   ?= 2
TEST_JOBS = run-san-test_ref run-tsan-test_pool run-test_ref run-test_ref_plain impl-tests san-impl-tests \
            run-san-test_api run-san-test_tokenizer run-san-test_model run-probe-cpu build-fuzz_tokenizer \
            build-fuzz_model run-test_api_plain run-test_tokenizer run-test_api run-test_model run-compile_static \
            run-compile_no_model run-fuzz_model run-fuzz_tokenizer run-clang-test_bits
JOB_impl-tests           = run-test_bits run-test_golden run-compile_c
JOB_san-impl-tests       = run-test_snippets run-compile_cc
JOB_build-fuzz_model     = $(B)/fuzz_model
JOB_build-fuzz_tokenizer = $(B)/fuzz_tokenizer

test:
	@rm -f $(B)/results
	@$(MAKE) --no-print-directory -j$(TEST_J) -k test-run; $(RUN) --summary $$?

# builds every test program (make -j2 test-build), for those who want the builds first
test-build: $(TEST_BINS)

test-run: $(addprefix job-,$(TEST_JOBS))
job-%: | $(B)/.dirs
	@$(MAKE) --no-print-directory $(or $(JOB_$*),$*)

run-test_%: $(B)/test_%
	@$(RUN) test_$* ./$(B)/test_$*
run-compile_%: $(B)/compile_%
	@$(RUN) compile_$* ./$(B)/compile_$*
run-san-%: $(B)/san/%
	@$(QUICK) $(RUN) "$* asan+ubsan" ./$(B)/san/$*
run-test_ref_plain run-test_api_plain: run-%_plain: $(B)/%_plain
	@$(QUICK) $(RUN) "$* no-threads no-simd" ./$(B)/$*_plain
run-clang-test_bits: $(B)/clang/test_bits
	@$(RUN) "test_bits clang" ./$(B)/clang/test_bits
run-tsan-test_pool: $(B)/tsan/test_pool
	@TSAN_OPTIONS=halt_on_error=1 $(QUICK) $(RUN) "test_pool tsan" ./$(B)/tsan/test_pool
run-probe-cpu: $(B)/probe-cpu
	@$(RUN) probe-cpu ./$(B)/probe-cpu --ctx 600 --layers 2 --calls 5 --threads 2 --gap-us 0
run-test_golden: $(B)/mini-chat
	@$(RUN) test_golden sh tests/test_golden.sh $(B)/mini-chat
# the documentation's programs are cut out and built first, then run here
run-test_snippets: $(B)/snippets/built
	@$(RUN) test_snippets sh tests/test_snippets.sh $(B) run

test-unit:     run-test_api run-test_ref run-test_model run-test_tokenizer
test-variants: run-test_ref_plain run-test_api_plain
# test_api asks for a 1 PiB cache on purpose (NEO_ERR_NO_MEMORY must come back), with ASan's
# allocator_may_return_null=1, so ASan warns "failed to allocate 0x1fffffffc0000 bytes": that
# line stays in build/log/test_api_asan_ubsan.log with the rest of the test's output.
test-san:      run-san-test_api run-san-test_ref run-san-test_model run-san-test_tokenizer
test-tsan:     run-tsan-test_pool
test-compile:  run-compile_c run-compile_cc run-compile_static run-compile_no_model run-probe-cpu
test-golden:   run-test_golden
test-bits:     run-test_bits run-clang-test_bits
test-snippets: run-test_snippets
test-no-model: run-compile_no_model

# Each fuzzer runs FUZZ_SECONDS from its seeds (tests/fuzz_seeds/NAME), its output in
# build/log/fuzz_NAME.log; test-fuzz runs the two at once (each is one thread).
FUZZ_RUN = -max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=2048 -print_final_stats=1
run-fuzz_%: $(B)/fuzz_%
	@rm -rf $(B)/corpus_$* && mkdir -p $(B)/corpus_$* && cp tests/fuzz_seeds/$*/* $(B)/corpus_$*/
	@$(RUN) fuzz_$* ./$(B)/fuzz_$* $(FUZZ_RUN) $(B)/corpus_$*
test-fuzz: $(FUZZ_BINS)
	@$(MAKE) --no-print-directory -j2 -k run-fuzz_model run-fuzz_tokenizer

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

$(B)/neo_attn_cuda.o: neo_attn_cuda.cu $(HDR) | $(B)/.dirs
	$(NVCC) $(NVCCFLAGS) -Xcompiler -Wall,-Wextra -c $< -o $@

$(B)/test_cuda_ops: tests/test_cuda_ops.c $(HDR) $(B)/neo_attn_cuda.o
	$(CUDA_CC) $< $(B)/neo_attn_cuda.o -o $@ $(CUDA_LIBS) $(LDLIBS)

$(B)/cuda/test_ref: tests/test_ref.c tests/check.h $(HDR) $(B)/neo_attn_cuda.o
	mkdir -p $(B)/cuda
	$(CUDA_CC) -DNEO_ATTN_CUDA=1 -DNEO_TEST_CUDA=1 $< $(B)/neo_attn_cuda.o -o $@ $(CUDA_LIBS) $(LDLIBS)

$(B)/cuda/mini-chat: examples/mini-chat/mini_chat.c $(HDR) $(B)/neo_attn_cuda.o
	mkdir -p $(B)/cuda
	$(CUDA_CC) -DNEO_ATTN_CUDA=1 $< $(B)/neo_attn_cuda.o -o $@ $(CUDA_LIBS) $(LDLIBS)

CUDA_PROGRAMS = $(B)/test_cuda_ops $(B)/cuda/test_ref $(B)/cuda/mini-chat $(B)/bench $(B)/in-place

cuda-build:
	@if command -v $(NVCC) >/dev/null 2>&1; then $(MAKE) --no-print-directory $(CUDA_PROGRAMS); \
	else echo "cuda-build: $(NVCC) not found, skipping neo_attn_cuda.cu"; fi

test-cuda-ops: $(B)/test_cuda_ops
	./$(B)/test_cuda_ops

test-cuda: $(CUDA_PROGRAMS)
	./$(B)/test_cuda_ops
	./$(B)/cuda/test_ref

# the whole GPU check in one run: kernels against float64, the API suite on the GPU, split output =
# unsplit output with mini-chat, compute-sanitizer (tests/gpu_check.sh; GPU_CHECK_ARCH=80 or 86 or 89
# runs it on the Ampere / Ada path through the driver's PTX compiler)
gpu-check:
	sh tests/gpu_check.sh

.PHONY: cuda-build test-cuda-ops test-cuda gpu-check

# --- the GPU benchmark ---------------------------------------------------------------------------
# bench-gpu builds build/bench: ceilings, attention rows, the decode loop and the capacity row in
# one program, for a machine with a CUDA GPU (build/bench --quick | --csv FILE; see examples/bench/bench.c).
# examples/bench/peers.py (torch SDPA) and plot.py (docs/bench.png) run beside it there.
BENCH_COMMIT ?= $(shell git describe --always --dirty --abbrev=7 2>/dev/null || echo unknown)

$(B)/bench: examples/bench/bench.c examples/bench/bench_util.h examples/bench/floors.h $(HDR) $(B)/neo_attn_cuda.o $(B)/floors.o
	$(CC) $(CSTD) $(CWARN) -O3 -g -I. -isystem $(CUDA_HOME)/include -DNEO_ATTN_CUDA=1 \
	  -DNEO_BENCH_COMMIT='"$(BENCH_COMMIT)"' $< $(B)/neo_attn_cuda.o $(B)/floors.o -o $@ -Wl,-rpath,$(CUDA_HOME)/lib64 $(CUDA_LIBS) $(LDLIBS)

# the floors of a decode-shaped kernel, which bench's sweep times beside the library's call
$(B)/floors.o: examples/bench/floors.cu examples/bench/floors.h | $(B)/.dirs
	$(NVCC) $(NVCCFLAGS) -Xcompiler -Wall,-Wextra -c $< -o $@

bench-gpu: $(B)/bench

# how fast the attention kernel reads a split layer's host heads in place over the bus, by block
# shape and split count (examples/bench/in_place.c; a machine with a CUDA GPU)
$(B)/in-place: examples/bench/in_place.c examples/bench/bench_util.h $(HDR) $(B)/neo_attn_cuda.o
	$(CC) $(CSTD) $(CWARN) -O2 -g -I. -isystem $(CUDA_HOME)/include -DNEO_ATTN_CUDA=1 \
	  $< $(B)/neo_attn_cuda.o -o $@ -Wl,-rpath,$(CUDA_HOME)/lib64 $(CUDA_LIBS) $(LDLIBS)

.PHONY: bench-gpu

# --- bitwise identity and lint -------------------------------------------------------------------
# test-bits: the outputs of a fixed set of cases (every CPU path this machine has, the stand-in,
# the decode loop) hashed and compared with tests/data/bits.txt, made by the header at BITS_REF
# (make test runs it); `build/test_bits --write` adds the lines of a CPU path that file lacks.
# test-bits-ref: writes this machine's lines of that file from a build against the header at
# BITS_REF (how the AVX-512 and AMX lines are made, on a machine that has them); then run test-bits.
BITS_REF ?= 91e0f02
test-bits-ref: | $(B)/.dirs
	mkdir -p $(B)/bits_ref && git show $(BITS_REF):neo_attn.h > $(B)/bits_ref/neo_attn.h
	$(CC) $(CSTD) $(CWARN) $(OPT) -I$(B)/bits_ref tests/test_bits.c -o $(B)/bits_ref/test_bits $(LDLIBS)
	./$(B)/bits_ref/test_bits --write

.PHONY: test-bits-ref

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
# (tests/test_snippets.sh). Built with the other test programs, they link the implementation's
# objects: ASan + UBSan's for C, compile_cc's for C++.
$(B)/snippets/built: tests/test_snippets.sh README.md $(HDR) $(B)/san/impl.o $(B)/compile_cc_b.o
	@CC="$(CC)" CXX="$(CXX)" NEO_SNIPPET_IMPL_C=$(B)/san/impl.o NEO_SNIPPET_IMPL_CXX=$(B)/compile_cc_b.o \
	  sh tests/test_snippets.sh $(B) build && touch $@

