/* neo_attn.h - v0.1.0 - decode attention over a KV cache split between GPU and host memory - MIT or public domain, see end of file

   neo_attn keeps some KV heads of every attention layer in GPU memory and the rest in host
   memory, and attends over both halves at once: the GPU half on the engine's CUDA stream, the
   host half with CPU flash-attention on a pthread pool, joined through flags in pinned memory.
   With no GPU it is a fast, exact CPU decode attention library. It also carries a tiny
   llama-style decode loop (llama2.c checkpoints).

   DO THIS
   -------
       #define NEO_ATTN_IMPLEMENTATION
       #include "neo_attn.h"
   in exactly one C or C++ file; every other file just includes the header. Link with -lm
   -lpthread. For the GPU path, also compile neo_attn_cuda.cu for your GPU (see PLATFORMS),
   define NEO_ATTN_CUDA=1 where the implementation is compiled, and link that object, cudart and
   the C++ runtime (nvcc's launch stubs use it):
       nvcc -O3 -arch=native -c neo_attn_cuda.cu      (one GPU; make cuda-build: every one)
       cc -DNEO_ATTN_CUDA=1 -I$CUDA_HOME/include engine.c neo_attn_cuda.o \
          -L$CUDA_HOME/lib64 -lcudart -lstdc++ -lm -lpthread

   PLATFORMS
   ---------
   CPU: a C11 or C++17 compiler and POSIX threads (NEO_ATTN_NO_THREADS=1 needs none); built and
   tested with gcc and clang on Linux. On x86-64 with gcc or clang the kernels are picked at run
   time from what the CPU has: AVX-512 (F, BW, VL) or AVX2 + F16C + FMA, and on Linux with AMX
   (Sapphire Rapids and later) AMX tile products for the tasks that carry many queries (prefill
   blocks, GQA groups of 48 or more). The first layer that can use the tiles asks Linux for
   their state (arch_prctl); from then on the process's alternate signal stacks must hold the
   tile state's signal frame (sigaltstack refuses smaller ones). cpu_isa = NEO_CPU_AVX512 or
   NEO_ATTN_NO_AMX leaves the tiles alone. Every other CPU (ARM included) and compiler gets the
   portable scalar kernels: the same results within the error bound below, at a lower speed.
   GPU: the GPU path (neo_attn_cuda.cu) needs an NVIDIA GPU and the CUDA toolkit (cudart only).
   Supported GPUs: compute capability 8.0 and up, tested with CUDA 13.0: Ampere (sm_80, sm_86),
   Ada (sm_89) and Hopper (sm_90, which also gets bulk copies and programmatic launches); later
   GPUs run the compute_80 PTX. `make cuda-build` builds all of them into one object
   (CUDA_ARCHS="86" narrows it); a GPU below 8.0, or a CUDA driver older than the build's
   toolkit (or none), gets NEO_ERR_UNSUPPORTED from runtime create, and a gpu_device that is not
   there NEO_ERR_DEVICE; an engine then makes its runtime with gpu = 0. In a build without
   NEO_ATTN_CUDA=1, neo_runtime_desc.gpu = 1 returns NEO_ERR_UNSUPPORTED; everything else runs
   on the CPU alone.

   CONFIGURATION MACROS (define before the implementing include)
   ------------------------------------------------------------
       NEO_ATTN_API              extern        linkage of every public function
       NEO_ATTN_STATIC           off           make every public function static (one TU only)
       NEO_ATTN_MALLOC(sz, u)    malloc(sz)    host allocator; define with NEO_ATTN_FREE or neither
       NEO_ATTN_FREE(p, u)       free(p)       (a runtime's neo_runtime_desc.allocator wins over both)
       NEO_ATTN_ASSERT(x)        assert(x)     internal invariants only, never caller input
       NEO_ATTN_CUDA             0             1 = call into neo_attn_cuda.cu for gpu = 1 runtimes;
                                               needs that file compiled for a supported GPU
                                               (PLATFORMS) and linked with -lcudart -lstdc++
       NEO_ATTN_NO_THREADS       0             1 = no pthread pool; every parallel loop runs inline
       NEO_ATTN_NO_SIMD          0             1 = only the portable scalar kernels
       NEO_ATTN_NO_AMX           undefined     defined = no AMX path (needed with an assembler
                                               older than binutils 2.36; gcc below 10 and
                                               clang below 12 leave it out themselves)
       NEO_ATTN_SPIN_US          300           how long idle pool workers spin before sleeping
       NEO_ATTN_LISTEN_US        2000          how long the listener of captured ON calls spins
                                               after the last one before sleeping (CUDA GRAPHS)
       NEO_ATTN_STAGE_BYTES      16 MiB        stream-back chunk of a split layer (two are allocated);
                                               a batch's copies run ahead of its GPU heads' launch
                                               by up to two of them
       NEO_ATTN_IN_PLACE_BYTES   4 MiB         an OFF decode (head_dim 128, f16 or bf16, GQA
                                               group <= 8) whose host heads' valid cells hold at
                                               most this many bytes has the GPU read them in
                                               place over the bus, beside its own heads, instead
                                               of copying them, and so does a HYBRID decode
                                               whose cells after its cut hold at most this many
                                               (0 = always copy)
       NEO_ATTN_DECODE_HOOK(e,t,th) nothing    a profiler's probe, called by CPU decode task t on
                                               thread th: e = 0 it starts, 1 its chunk is attended,
                                               2 it has finished its head's merge (probe_cpu.c)

   QUICK START
   -----------
   Two complete programs; README.md shows the same two, and tests/test_snippets.sh builds and
   runs them from both texts, as C and as C++. In C++ write each `= {0}` as `= {}`. First, one
   attention layer on the CPU:

       // quick start 1: decode attention on the CPU
       #define NEO_ATTN_IMPLEMENTATION
       #include "neo_attn.h"
       #include <stdio.h>

       enum { N_HEAD = 32, N_HEAD_KV = 8, HEAD_DIM = 128, N_PROMPT = 16 };
       static float k[N_PROMPT][N_HEAD_KV][HEAD_DIM];   // the prompt's keys and values, as your
       static float v[N_PROMPT][N_HEAD_KV][HEAD_DIM];   // model's projections write them (float32)
       static float q[N_HEAD][HEAD_DIM];                // the last token's queries
       static float out[N_HEAD][HEAD_DIM];              // attention output (head_dim_v = head_dim)

       static void fill(float *x, int n) {               // stands in for your model
           for (int i = 0; i < n; i++) x[i] = (float)(i % 13) / 13.0f - 0.5f;
       }

       int main(void) {
           fill(&k[0][0][0], N_PROMPT * N_HEAD_KV * HEAD_DIM);
           fill(&v[0][0][0], N_PROMPT * N_HEAD_KV * HEAD_DIM);
           fill(&q[0][0], N_HEAD * HEAD_DIM);
           neo_runtime_desc rd = {0};                   // n_threads 0 = one thread per online core
           neo_runtime *rt = NULL;
           neo_status s = neo_runtime_create(&rd, &rt);
           neo_layer_desc d = {0};                      // F16 cache, scale 1/sqrt(head_dim)
           d.n_head = N_HEAD; d.n_head_kv = N_HEAD_KV; d.head_dim = HEAD_DIM; d.n_ctx = 4096;
           neo_layer *layer = NULL;
           if (s == NEO_OK) s = neo_layer_create(rt, &d, &layer);
           if (s == NEO_OK) s = neo_attn_append(layer, &k[0][0][0], &v[0][0][0], N_PROMPT);
           if (s == NEO_OK) s = neo_attn_decode(layer, &q[0][0], &out[0][0]);   // position N_PROMPT - 1
           if (s == NEO_OK) printf("out[0][0..1] = %.6f %.6f\n", out[0][0], out[0][1]);
           else fprintf(stderr, "neo_attn: %s\n", neo_status_string(s));
           neo_layer_destroy(layer);                    // NULL is fine
           neo_runtime_destroy(rt);
           return s == NEO_OK ? 0 : 1;
       }

   Second, a layer split between GPU and host memory, run for a few decode steps. It runs on the
   host stand-in for the GPU, so it needs no GPU: on a CUDA build, delete the gpu_standin line
   and give q, k, v and out in device memory; the calls stay the same.

       // quick start 2: a layer split between GPU and host memory
       #define NEO_ATTN_IMPLEMENTATION
       #include "neo_attn.h"
       #include <stdio.h>

       enum { N_HEAD = 32, N_HEAD_KV = 8, HEAD_DIM = 128, N_STEPS = 64 };
       // On a GPU these four live in device memory (cudaMalloc); the stand-in takes host memory.
       static float k[N_HEAD_KV][HEAD_DIM], v[N_HEAD_KV][HEAD_DIM];   // one new token's key and value
       static float q[N_HEAD][HEAD_DIM], out[N_HEAD][HEAD_DIM];       // its queries, the output

       static void fill(float *x, int n, int t) {       // stands in for your model
           for (int i = 0; i < n; i++) x[i] = (float)((i + t) % 13) / 13.0f - 0.5f;
       }

       int main(void) {
           neo_runtime_desc rd = {0};
           rd.gpu = 1;                                  // the GPU path (a build with NEO_ATTN_CUDA=1) ...
           rd.gpu_standin = 1;                          // ... played by the host stand-in: delete on a GPU
           neo_runtime *rt = NULL;
           neo_status s = neo_runtime_create(&rd, &rt);
           neo_layer_desc d = {0};
           d.n_head = N_HEAD; d.n_head_kv = N_HEAD_KV; d.head_dim = HEAD_DIM; d.n_ctx = 4096;
           d.gpu_heads = 6;                             // KV heads 0-5 in GPU memory, 6-7 in host memory
           d.pipeline = NEO_PIPELINE_AUTO;              // time stream-back against both halves at once
           neo_layer *layer = NULL;
           if (s == NEO_OK) s = neo_layer_create(rt, &d, &layer);
           for (int t = 0; t < N_STEPS && s == NEO_OK; t++) {   // one decode step a token
               fill(&k[0][0], N_HEAD_KV * HEAD_DIM, t);
               fill(&v[0][0], N_HEAD_KV * HEAD_DIM, t + 1);
               fill(&q[0][0], N_HEAD * HEAD_DIM, t + 2);
               s = neo_attn_append(layer, &k[0][0], &v[0][0], 1);
               if (s == NEO_OK) s = neo_attn_decode(layer, &q[0][0], &out[0][0]);
           }
           neo_layer_info info = {0};
           if (s == NEO_OK) s = neo_layer_get_info(layer, &info);
           if (s == NEO_OK)
               printf("KV heads: %d in GPU memory (%zu bytes), %d in host memory (%zu bytes)\n",
                      info.gpu_heads, info.gpu_bytes, info.cpu_heads, info.host_bytes);
           else fprintf(stderr, "neo_attn: %s\n", neo_status_string(s));
           neo_layer_destroy(layer);
           neo_runtime_destroy(rt);
           return s == NEO_OK ? 0 : 1;
       }

   THE ATTENTION FUNCTION
   ----------------------
   Query head h reads KV head h / (n_head / n_head_kv). For key cell j and a query at
   position p, only cells j <= p take part:
       s_j = scale * dot(q_h, k_j)                      (k as stored, rounded to kv_type)
       softcap > 0:        s_j = softcap * tanh(s_j / softcap)
       max_alibi_bias > 0: s_j = s_j - slope(h) * (p - j)
       out_h = sum_j softmax(s)_j * v_j, the softmax denominator also holding exp(sinks[h]) if given
   Arithmetic is float32 (q is never rounded to the storage type); against a float64 evaluation
   the relative L2 error stays under 1e-4 for every kv_type.
   Non-finite values: when scale * dot(q_h, k_j) of a visible cell is NaN or infinite (a NaN or
   inf in q_h or in the stored k_j, such as a key of 65520 or more stored as F16, or a product
   beyond the float range), every element of out_h is NaN; softcap does not bound such a score.
   A NaN or inf in element d of a visible v_j makes element d of out_h NaN or +-inf and leaves
   the others as they would be. Cells after a query's position never change its output,
   whatever they hold. Every path (scalar, AVX2, AVX-512, AMX, GPU) follows these rules.

   THE GPU, SPLIT LAYERS AND THE PIPELINES
   ---------------------------------------
   With neo_runtime_desc.gpu = 1 (a build with NEO_ATTN_CUDA=1 and neo_attn_cuda.cu linked), q, k,
   v and out are device pointers (on gpu_device; the calls leave the calling thread's current
   CUDA device as they found it), and every call is ordered on the engine's stream
   (gpu_stream, or the runtime's own): a call returns once its work is queued, so q, k, v and
   out must stay valid until the stream has reached it (on a CPU runtime out is complete, and
   q, k and v no longer read, when the call returns). The CPU half of a split layer is shared
   by the calling thread and the pool's workers, who may still be at it when the call returns
   (the stream waits for their output; the next call that needs the pool waits for them). Each
   layer keeps KV heads [0, gpu_heads) in device memory and the rest in pinned host memory, so a
   context whose cache does not fit in the GPU still runs. A split layer attends in one of these
   ways:
     NEO_PIPELINE_OFF   stream-back: the host heads' valid cells are copied to the GPU in
                        chunks of up to NEO_ATTN_STAGE_BYTES through two staging buffers and
                        attended there as they arrive. A decode whose host cells are few
                        (NEO_ATTN_IN_PLACE_BYTES; head_dim 128, f16 or bf16, a GQA group of at
                        most 8), alone or in a batch, has the GPU read them in place over the
                        bus instead, beside its own heads: the copies' fixed costs would
                        outweigh their higher rate.
     NEO_PIPELINE_ON    both halves at once: the pool takes the host heads and waits for their
                        queries, which a kernel on the engine's stream writes into pinned
                        memory and flags; the GPU heads follow on that stream, then a kernel
                        that polls a flag the pool sets and pulls the CPU half's output up.
                        No CUDA call sits between the halves (with CUDA_LAUNCH_BLOCKING=1 the
                        last two are enqueued after the CPU half instead). Captured into a CUDA
                        graph, the CPU half is started by the graph itself (see CUDA GRAPHS).
     NEO_PIPELINE_HYBRID  the host half read by the CPU and by the copy engine at once: of its
                        cells [0, len), the pool attends [0, c) into an online-softmax state
                        while [c, len) are streamed back and attended on the GPU as under OFF
                        (read in place when they are few, by OFF's rule);
                        the GPU then pulls the CPU's state up (the same flag as ON, so the
                        stream-back never waits for the CPU) and merges the two, sinks added
                        once, into the host heads' output. c = cpu_share * len, rounded; a
                        decode where that leaves one side no cell runs as ON or OFF, and a
                        prefill runs as OFF. Captured into a CUDA graph, the cut is made at each
                        replay from the length then (see CUDA GRAPHS).
     NEO_PIPELINE_AUTO  the first decode calls alternate OFF and ON, timed; when the host half's
                        valid cells fill a stream-back chunk, the hybrid is timed next with the
                        CPU share that makes both engines finish together by those timings,
                        ON's standing for the CPU's over all the host cells and OFF's for the
                        stream-back's: c / len = t_off / (t_on + t_off). Each engine reads
                        slower while the other reads too, so a second share is made from the
                        hybrid's own calls (the CPU half's time, and the call's) and timed as
                        well when it differs by 0.01 or more. The fastest runs from then on
                        (the runtime's logger says which, and the shares), and the timing is
                        repeated when the context doubles.
   Which is faster depends on the machine and the shape. OFF copies the host half over PCIe
   while the GPU attends its own heads, then attends it, so its cost is about the copies plus
   that last attend (a short host half read in place costs about the read alone). ON attends the
   host half on the CPU while the GPU attends its own, so its cost is the slower of the two plus
   a fixed handoff a call; the CPU half runs at the host's memory read rate, or at its
   arithmetic rate where that is lower (large GQA groups at a small head_dim). So ON wins when
   the host half is large and the CPU reads it faster than PCIe carries it, the two are close
   when the host half is small (the handoff weighs most), and OFF wins when the CPU half is
   bound by arithmetic. AUTO measures this on the machine at hand; docs/BENCHMARKS.md has
   measured figures. HYBRID wins where the host's memory serves the CPU and the copy engine
   together faster than either alone: with the share right, its host half costs the host bytes
   over that joint read rate.
   neo_runtime_desc.gpu_standin = 1 runs the same orchestration on a host stand-in for the GPU
   (host memory, each op run when queued), which is how the split paths are tested where there
   is no GPU.
   It also checks the orchestration's events: a stream's wait for an event not recorded since
   that stream's last wait for it, which would order nothing on a GPU, fails (NEO_ERR_DEVICE).
   gpu_standin = 2 or 3 runs one stream late (the runtime's copy stream, or the engine's): its
   work waits until the other stream waits for it, or the host does (a sync, a free), so that
   work ordered behind nothing it reads gets wrong data, as it may on a GPU. An engine's own
   tests can run there too, writing q and reading out through its stream, or after a sync.
   Many sequences: neo_attn_append_batch and neo_attn_decode_batch take one token for each of n
   layers of one shape (n sequences' caches of one model layer), with the host halves of all of
   them in one job of the pool and one join, the device halves together, and the results of n
   single calls. gpu_heads = NEO_GPU_HEADS_NONE keeps a layer's whole cache in host memory;
   neo_layer_set_gpu_heads moves heads between the sides with their contents (a scheduler
   rebalancing, an idle sequence giving its GPU share back); neo_plan_gpu_heads places heads from
   a GPU byte budget; neo_runtime_sync waits for everything queued.

   CUDA GRAPHS
   -----------
   An engine that captures its decode step (cudaStreamBeginCapture on the stream it gave the
   runtime, gpu_stream) may capture neo_attn_append, neo_attn_decode and their batch forms. The
   device keeps each layer's length, so a replay appends at the row the layer has reached and
   attends what it holds then: a captured append + decode replayed k times does what k eager
   calls would (within the tolerance: the plan is sized for n_ctx, not for one length). Capture
   a step once and replay it for every token. Captured calls change nothing on the host:
   neo_layer_length (and the next eager call) counts replayed appends once neo_runtime_sync has
   returned, so call it between replays and eager calls on the same runtime. A replayed append
   that would pass n_ctx writes nothing and its decode attends what is there; the next
   neo_runtime_sync returns NEO_ERR_FULL (and logs which layer). Under capture each layer of a
   batch append finds out for itself (not all or nothing). A batch decode attends the device
   heads of its layers (and the host heads OFF reads in place) together, as the eager batch
   does (with CUDA one launch per storage type and head_dim of its f16 / bf16 layers of head_dim
   64, 128 or 256), each layer's length read on the device and its split count fixed by its
   n_ctx; with CUDA each such launch keeps its table (a few hundred bytes a layer) in device memory
   for the runtime's life, and every capture adds one: capture once, replay many times. ON and
   HYBRID layers ring their own bells. What a capture holds, by pipeline:
     no split, OFF      kernels only. A captured split layer's host heads are attended in
                        place, the GPU reading their pinned memory over the bus (a stream-back's
                        chunk count depends on the length, which a graph cannot know).
     ON                 the CPU half too, with no host call per layer per replay: the graph
                        rings a bell in pinned memory (the device counts the replays and writes
                        the queries and the length there), the runtime's listener thread
                        attends the host heads on the pool and answers, and the graph's next
                        kernel waits for the answer and pulls the output up. The listener spins
                        while bells ring and for NEO_ATTN_LISTEN_US microseconds after the last,
                        then dozes, looking once a millisecond; each captured step wakes it with
                        one host function, run on a side branch of the graph so that the wake-up
                        is off the critical path (a step whose ON layers are further apart than
                        NEO_ATTN_LISTEN_US finds it dozing: up to a millisecond late).
                        While such a graph may run, the pool is the listener's: make no other
                        call on the runtime until neo_runtime_sync (or a sync of the stream).
                        An engine's neo_runtime_desc.parallel_for is then called from the
                        listener's thread.
                        Each captured ON decode keeps its bell (a few pinned rows) for the
                        runtime's life: capture a step once and replay it, rather than
                        capturing anew for every token.
     HYBRID             as ON, except that the listener attends only the host heads' cells
                        before the cut of the length the bell carries (cpu_share of them,
                        rounded as the eager call rounds) into an online-softmax state, while
                        the GPU attends the cells from that cut on in place, reading their
                        pinned memory over the bus as under OFF (a stream-back's chunk count
                        depends on the length), the cut computed on the device from the same
                        length to the same cell; the graph then pulls the CPU's state up and
                        merges the two. Where the cut leaves one side no cell (short contexts)
                        that side's state is empty and weighs nothing. Each captured HYBRID
                        decode keeps its bell, and two states of the host heads in device memory.
                        Built with NEO_ATTN_NO_THREADS=1 there is no listener: ON and HYBRID
                        refuse.
     AUTO               as the pipeline it has chosen (with the hybrid's share it measured);
                        still measuring, it refuses.
   Calls that wait for the device or allocate (layer and session create, destroy and step,
   truncate, prefill, moving heads, neo_runtime_sync) refuse on a capturing stream too:
   NEO_ERR_UNSUPPORTED with a log line, the capture left valid. A graph holds the layers' memory
   as it was when captured: destroying a layer or moving its heads (neo_layer_set_gpu_heads)
   retires the graphs that hold it (capture again); truncating does not. The decode loop
   captures its own step with neo_session_desc.graphs.

   THREADS AND DETERMINISM
   -----------------------
   A runtime owns a persistent pool of n_threads - 1 workers; the calling thread is the last
   one. Workers spin for NEO_ATTN_SPIN_US microseconds after a job before they sleep, because
   the wake-up is paid once per layer per token. A call waits for its tasks, never for a
   worker that has no core at the moment: such a worker misses the job and the others take its
   tasks, so asking for more threads than the machine has free cores costs little. An engine
   with a pool of its own passes it instead (neo_runtime_desc.parallel_for): the runtime then
   starts no threads and runs every parallel job through it, output unchanged. A job too small to
   be worth a wake-up (under 65536 multiply-adds, such as a decode over a few cells) runs on the
   calling thread, with the runtime's pool or the engine's. CPU attention
   splits every KV head's cells into chunks whose size depends only on the context length, and
   merges the chunks pairwise up a fixed tree, so the output is bitwise identical for any thread
   count on a given CPU path (scalar, AVX2, AVX-512 or AMX; neo_runtime_desc.cpu_isa can force one).
   A runtime, and the layers and sessions made from it, are used from one thread at a time;
   different runtimes are independent. A call that changes or uses the runtime's state and
   overlaps another on the same runtime (from a second thread, the logger or an engine's
   parallel-for task) is refused with NEO_ERR_INVALID_ARG and a log line, and the call in
   progress is unharmed; a refused destroy frees nothing (destroy again once the call is over).
   The getters (neo_layer_length, neo_layer_get_info, neo_session_length, neo_session_get_info,
   neo_runtime_get_info) are not checked: they read what the call in progress may be writing.

   THE DECODE LOOP
   ---------------
   neo_model loads a llama2.c checkpoint (the legacy version-0 layout: seven int32 header
   fields, float32 weights, the skipped RoPE tables, and a classifier only when vocab_size is
   negative in the header). neo_session runs one token at a time through every layer the way
   llama2.c's run.c does, with attention through neo_attn_append / neo_attn_decode and the
   matmuls on the runtime's pool. On a GPU runtime they run on the device, each with what run.c
   does around it folded in (the rmsnorm before, the residual add, SwiGLU or RoPE after) and
   each layer's wq | wk | wv rows stored back to back, the token's k and v appended to the
   layer's cache by that projection itself: a layer is four launches and attention.
   Tokenizers and samplers belong to the program (examples/mini-chat has run.c's).

   FINDING YOUR WAY
   ----------------
   The implementation is in banners, each with a grep tag, in dependency order:
       >>config  >>util  >>status  >>pool (thread pool: launch, help, wait)  >>cpu (SIMD
       and AMX kernels)  >>attn (CPU flash-attention: ranges, merge tree)  >>host (the CPU backend)
       >>standin (the GPU stand-in for tests)  >>runtime  >>layer (KV cache, append)  >>split
       (stream-back OFF, both halves ON, HYBRID, AUTO)  >>batch (many layers in one call, moving
       heads, placement)  >>model (llama2.c decode loop and its ops;
       NEO_ATTN_NO_MODEL leaves it out). The GPU kernels are in neo_attn_cuda.cu, with banners of
       their own, behind three tables: neo__dev_mem, neo__dev_attn, neo__dev_model.

   neo_attn DOES NOT
   -----------------
   - own or load an engine's weights (the decode loop owns only what it loads itself)
   - tokenize, sample, schedule sequences, or page the cache
   - quantize the cache below 16 bits

   TRUST BOUNDARY
   --------------
   Descriptors, shapes, token ids, lengths and model files are validated: bad values give a
   status and change nothing. Pointers are trusted to point at as many elements as their
   shape comment says. Nothing here aborts, exits or prints because of caller input; a
   runtime with a logger (neo_runtime_desc.log) also says why a call was refused, when it runs
   fewer threads than asked, and what AUTO chose.
*/
#ifndef NEO_ATTN_H_INCLUDED
#define NEO_ATTN_H_INCLUDED

#include <stddef.h>
#include <stdint.h>

#define NEO_ATTN_VERSION_MAJOR 0
#define NEO_ATTN_VERSION_MINOR 1
#define NEO_ATTN_VERSION_PATCH 0
#define NEO_ATTN_VERSION_STRING "0.1.0"

#ifndef NEO_ATTN_API
#ifdef NEO_ATTN_STATIC
#define NEO_ATTN_API static
#else
#define NEO_ATTN_API extern
#endif
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* --- status and enums --- */

/* clang-format off */
#define NEO__STATUS_LIST(X) \
    X(NEO_OK,                "ok") \
    X(NEO_ERR_INVALID_ARG,   "invalid argument") \
    X(NEO_ERR_NO_MEMORY,     "out of host memory") \
    X(NEO_ERR_DEVICE_MEMORY, "out of GPU memory") \
    X(NEO_ERR_FULL,          "KV cache full") \
    X(NEO_ERR_DEVICE,        "CUDA runtime error") \
    X(NEO_ERR_UNSUPPORTED,   "not supported by this build or machine, or not now") \
    X(NEO_ERR_IO,            "file could not be opened or read") \
    X(NEO_ERR_FORMAT,        "file is not in the expected format")
/* clang-format on */
/* What each failure means, and what it leaves (every failure is also a line to the runtime's
   logger, once the call has a runtime):
   INVALID_ARG    a bad value or pointer, or a call overlapping another one on the same runtime;
                  nothing changed.
   NO_MEMORY      host memory could not be had; nothing changed.
   DEVICE_MEMORY  GPU memory could not be had; nothing changed. Fewer heads on the GPU
                  (neo_plan_gpu_heads, neo_layer_set_gpu_heads) may fit.
   FULL           the layer holds n_ctx tokens; nothing was written.
   DEVICE         CUDA reported an error (the log names the call), or there is no such GPU.
                  The calls clear CUDA's last error (cudaGetLastError) after a failure and before
                  the launches that report through it: read an error of your own before calling
                  in. After one from work on the stream the CUDA context may be unusable (CUDA's
                  sticky errors): destroy the runtime and its layers.
   UNSUPPORTED    not in this build or on this machine: gpu = 1 without NEO_ATTN_CUDA, a GPU below
                  compute capability 8.0 or none this build has code for, a CUDA driver older
                  than the build's toolkit, a cpu_isa the CPU lacks, a shape past the build's
                  limits (NEO__MAX_HEADS, NEO__MAX_HEAD_DIM), a neo_attn_cuda.cu of another
                  version; or not now: a call that cannot be captured while the stream captures
                  (AUTO still measuring, ON and HYBRID in a build without threads, calls that
                  allocate or wait; the capture stays valid). Nothing changed.
   IO, FORMAT     a model file could not be read, or is not a llama2.c checkpoint. */
#define NEO__STATUS_ENUM(name, text) name,
typedef enum neo_status { NEO__STATUS_LIST(NEO__STATUS_ENUM) NEO__STATUS_COUNT } neo_status;
#undef NEO__STATUS_ENUM

NEO_ATTN_API const char *neo_status_string(neo_status s);   /* "unknown status" for other values */
NEO_ATTN_API const char *neo_attn_version(void);            /* NEO_ATTN_VERSION_STRING */

typedef enum neo_type { NEO_TYPE_F16 = 0, NEO_TYPE_BF16, NEO_TYPE_F32 } neo_type;   /* KV storage */
typedef enum neo_pipeline { NEO_PIPELINE_OFF = 0, NEO_PIPELINE_ON, NEO_PIPELINE_AUTO, NEO_PIPELINE_HYBRID } neo_pipeline;
typedef enum neo_cpu_isa { NEO_CPU_AUTO = 0, NEO_CPU_SCALAR, NEO_CPU_AVX2, NEO_CPU_AVX512, NEO_CPU_AMX } neo_cpu_isa;

/* --- runtime: thread pool, GPU device and streams --- */

typedef struct neo_runtime neo_runtime;
/* One task of a parallel-for: task index in [0, n_tasks), thread in [0, n_threads). */
typedef void (*neo_task_fn)(void *arg, int task, int thread);
typedef enum neo_log_level { NEO_LOG_ERROR = 0, NEO_LOG_WARN, NEO_LOG_INFO } neo_log_level;
/* Host memory for a runtime and what is made from it; both functions or neither. */
typedef struct neo_allocator {
    void *(*alloc)(void *user, size_t bytes); /* NULL when out of memory */
    void  (*free)(void *user, void *ptr);     /* ptr from alloc, never NULL */
    void   *user;
} neo_allocator;
typedef struct neo_runtime_desc {
    int         n_threads;   /* CPU threads, the caller's included; 0 = online cores */
    int         gpu;         /* 1 = use a CUDA GPU (needs NEO_ATTN_CUDA, else NEO_ERR_UNSUPPORTED); 0 = CPU only */
    int         gpu_device;  /* CUDA device ordinal when gpu = 1 */
    void       *gpu_stream;  /* the engine's cudaStream_t to order against; NULL = the runtime makes its own,
                                which is ordered with the legacy default stream */
    neo_cpu_isa cpu_isa;     /* AUTO = best the CPU has; forcing one it lacks is NEO_ERR_UNSUPPORTED */
    int         gpu_standin; /* with gpu = 1, a host stand-in plays the GPU (same orchestration, host
                                memory), so the split paths can be tested with no GPU: 1 runs each
                                op when it is queued; 2 runs the runtime's copy stream late, 3 the
                                engine's stream, as a GPU may (read results after neo_runtime_sync) */
    /* The engine's own parallel-for, or NULL for the runtime's pool. It must run task(arg, i,
       thread) for every i in [0, n_tasks) and return when all are done, with thread in
       [0, n_threads) and never the same for two tasks running at once (it picks per-thread
       scratch); called from the thread that called into neo_attn (or, while a captured ON or
       HYBRID graph may run, from the runtime's listener thread), never from inside one of its
       own tasks. The runtime then starts no threads, and n_threads (not 0) is the engine
       pool's size. */
    void      (*parallel_for)(void *user, int n_tasks, neo_task_fn task, void *arg);
    void       *parallel_for_user;
    /* Optional: what the runtime and its layers have to say (why a call was refused, fewer
       threads than asked, what AUTO chose), one line without a newline, valid during the call
       only; called from the thread that called into neo_attn. NULL = silent. A call into the
       same runtime from the logger or from a parallel_for task is refused (NEO_ERR_INVALID_ARG),
       as is one that overlaps another thread's call. What the logger calls into neo_attn logs
       nothing itself. */
    void      (*log)(void *user, neo_log_level level, const char *msg);
    void       *log_user;
    /* Host memory of the runtime, its layers (a CPU runtime's KV caches included) and its
       sessions; zero = NEO_ATTN_MALLOC / NEO_ATTN_FREE. Pinned and device memory come from CUDA,
       and models (loaded without a runtime) from the macros. */
    neo_allocator allocator;
} neo_runtime_desc;

typedef struct neo_runtime_info {
    int         n_threads;   /* threads actually running (fewer than asked if pthread_create failed) */
    int         gpu;         /* 1 when a GPU is in use */
    neo_cpu_isa cpu_isa;     /* the CPU kernels in use, never AUTO */
} neo_runtime_info;

/* Makes the pool (and the GPU context when gpu = 1). desc NULL = all defaults. */
NEO_ATTN_API neo_status neo_runtime_create(const neo_runtime_desc *desc, neo_runtime **out);
NEO_ATTN_API void       neo_runtime_destroy(neo_runtime *rt);   /* NULL is fine; destroy its layers and sessions first */
NEO_ATTN_API neo_status neo_runtime_get_info(const neo_runtime *rt, neo_runtime_info *info);
NEO_ATTN_API const char *neo_cpu_isa_name(neo_cpu_isa isa);     /* "auto", "scalar", "avx2", "avx512", "amx" */

/* --- layer: one attention layer's KV cache, split by KV head --- */

/* neo_layer_desc.gpu_heads = NEO_GPU_HEADS_NONE keeps every KV head in host memory: the GPU half
   is empty. Under OFF the whole cache is streamed back and attended on the GPU; under ON the CPU
   pool attends all of it while the GPU goes on; AUTO chooses as for any split layer.
   neo_layer_get_info reports gpu_heads = 0, cpu_heads = n_head_kv for such a layer. On a CPU-only
   runtime it means what 0 means there: every head in host memory. */
#define NEO_GPU_HEADS_NONE (-1)

typedef struct neo_layer neo_layer;
typedef struct neo_layer_desc {
    int          n_head;         /* query heads */
    int          n_head_kv;      /* KV heads; n_head % n_head_kv == 0 (GQA group = n_head / n_head_kv) */
    int          head_dim;       /* Q/K head size */
    int          head_dim_v;     /* V head size; 0 = head_dim */
    int          n_ctx;          /* capacity in tokens */
    neo_type     kv_type;        /* storage type of the cache; default F16 */
    int          gpu_heads;      /* KV heads kept in GPU memory; 0 = all (no split), NEO_GPU_HEADS_NONE =
                                    none. Heads [0, gpu_heads) live on the GPU, [gpu_heads, n_head_kv) in
                                    host memory. On a CPU-only runtime every head is in host memory. */
    neo_pipeline pipeline;       /* how a split layer runs: OFF = host half streamed back to the GPU and
                                    attended there; ON = GPU half and CPU half attended concurrently;
                                    HYBRID = the host half's cells shared between the CPU and the
                                    stream-back, both at once; AUTO = chosen from measured costs.
                                    0 = OFF; AUTO is the usual choice for a split layer. */
    float        scale;          /* 0 = 1/sqrt(head_dim) */
    float        softcap;        /* 0 = off */
    float        max_alibi_bias; /* 0 = off */
    const float *sinks;          /* [n_head] sink logits or NULL; copied at create */
    float        cpu_share;      /* HYBRID: the CPU's share of the host heads' cells, in (0, 1) (the
                                    stream-back takes the rest); 0 = 0.5. AUTO measures its own. */
} neo_layer_desc;

/* KV heads on the GPU for a share frac of them (mini-chat's --gpu-heads-frac): frac >= 1 or
   n_head_kv <= 1 gives 0 (every head on the GPU, no split); otherwise round(frac * n_head_kv)
   clamped to [1, n_head_kv - 1], so that a split keeps at least one head on each side. */
NEO_ATTN_API int neo_gpu_heads_for_frac(int n_head_kv, float frac);

/* Allocates the cache for n_ctx tokens (length 0). rt must outlive the layer. */
NEO_ATTN_API neo_status neo_layer_create(neo_runtime *rt, const neo_layer_desc *desc, neo_layer **out);
NEO_ATTN_API void       neo_layer_destroy(neo_layer *layer);   /* NULL is fine */

/* Stores n_tokens (>= 1) new rows at positions [len, len + n_tokens).
   k: [n_tokens][n_head_kv][head_dim], v: [n_tokens][n_head_kv][head_dim_v], activation memory.
   NEO_ERR_FULL if len + n_tokens > n_ctx: then nothing is written and len is unchanged. */
NEO_ATTN_API neo_status neo_attn_append(neo_layer *layer, const float *k, const float *v, int n_tokens);

/* One query token at position len - 1 attending to cells [0, len).
   q: [n_head][head_dim], out: [n_head][head_dim_v]. NEO_ERR_INVALID_ARG if len == 0. */
NEO_ATTN_API neo_status neo_attn_decode(neo_layer *layer, const float *q, float *out);

/* n_tokens queries for the last n_tokens cells, causal: query i sits at position
   len - n_tokens + i and attends to cells [0, len - n_tokens + i].
   q: [n_tokens][n_head][head_dim], out: [n_tokens][n_head][head_dim_v].
   NEO_ERR_INVALID_ARG unless 1 <= n_tokens <= len. */
NEO_ATTN_API neo_status neo_attn_prefill(neo_layer *layer, const float *q, int n_tokens, float *out);

NEO_ATTN_API int        neo_layer_length(const neo_layer *layer);   /* 0 for NULL */
/* Keeps the first n_tokens cells; 0 clears. n_tokens < 0 or > length is NEO_ERR_INVALID_ARG. */
NEO_ATTN_API neo_status neo_layer_truncate(neo_layer *layer, int n_tokens);

typedef struct neo_layer_info {
    int          gpu_heads, cpu_heads;      /* KV heads resident on each side */
    size_t       gpu_bytes, host_bytes;     /* KV cache bytes allocated on each side */
    neo_pipeline pipeline;                  /* as configured */
    long long    n_decode;                  /* decode calls so far */
    long long    n_overlapped;              /* decode calls whose two halves ran concurrently (CPU and GPU: ON, HYBRID) */
} neo_layer_info;
NEO_ATTN_API neo_status neo_layer_get_info(const neo_layer *layer, neo_layer_info *info);

/* --- many sequences, placement, moving heads --- */

/* Moves KV heads between GPU and host memory keeping their contents (same values as
   neo_layer_desc.gpu_heads, including 0 and NEO_GPU_HEADS_NONE): a scheduler rebalances a
   running sequence, or shrinks an idle one's GPU share. The new layout is allocated and filled
   before the old one is freed, so on failure (NEO_ERR_DEVICE_MEMORY, NEO_ERR_NO_MEMORY, ...)
   nothing moved. Output after the move equals output before it within the tolerance, and equals
   bitwise that of a layer made with the new gpu_heads. Waits for the runtime's queued work. On a
   CPU-only runtime every valid value is accepted and nothing moves. An AUTO layer measures afresh. */
NEO_ATTN_API neo_status neo_layer_set_gpu_heads(neo_layer *layer, int gpu_heads);

/* Placement from a GPU byte budget: writes gpu_heads[i] (as neo_layer_desc.gpu_heads: 0 = all,
   NEO_GPU_HEADS_NONE = none) for each of the n_layers layers so that their GPU KV bytes at their
   n_ctx (n_ctx * (head_dim + head_dim_v) * the kv_type's size a head) fit in gpu_bytes, as much KV
   as possible is on the GPU, and host heads are spread evenly over the layers. The rule: of the
   placements that fit, one with the most GPU bytes, and of those the one with the most heads of the
   largest size on the GPU, then of the next size, and so on; the heads of one size go one at a time
   to the layer with the most host heads (the lowest index on a tie), so layers of one shape end up
   with host heads that differ by at most one. The most GPU bytes is searched for exactly when the
   heads that fit come in at most 8 sizes (a model's layers have one, or two with sliding-window
   layers whose n_ctx is the window); a search that reaches 2^20 steps keeps the best placement
   found by then. With more sizes each size in turn, from the largest, takes as many heads as fit.
   Either way no layer could take one more head within the budget. descs[i].gpu_heads is ignored.
   gpu_bytes is for the KV cache alone: a GPU runtime also holds the stream-back's two chunks of
   NEO_ATTN_STAGE_BYTES, the split partials' workspace (grown with the calls, up to 512 MiB a
   stream), the batch calls' tables, and a session its model's weights; leave them room. Returns the
   number of KV heads placed on the host (0 = everything fits), or -1 for bad arguments (NULL
   pointers, n_layers < 1, an invalid descriptor). */
NEO_ATTN_API int neo_plan_gpu_heads(const neo_layer_desc *descs, int n_layers, size_t gpu_bytes, int *gpu_heads);

/* One token for each of n (>= 1) distinct layers (n sequences' caches for the same model layer) in
   one call: k: [n][n_head_kv][head_dim], v: [n][n_head_kv][head_dim_v], q: [n][n_head][head_dim],
   out: [n][n_head][head_dim_v], activation memory. The layers share one runtime and n_head,
   n_head_kv, head_dim, head_dim_v; n_ctx, kv_type, gpu_heads and pipeline may differ. Everything is
   checked before anything runs. Results equal n single calls (bitwise on a CPU runtime and the
   stand-in, within the tolerance on a GPU). neo_attn_append_batch is all or nothing: NEO_ERR_FULL
   if any layer is full, and then no layer changes; with CUDA it is one launch for all n layers
   (their device and pinned host heads), eager or captured. neo_attn_decode_batch attends every
   layer's host heads in one job of the CPU pool (tasks over layer, head and cell chunk) with one
   join, and their GPU heads together on the stream: with CUDA, the f16 / bf16 layers of head_dim
   64, 128 or 256 in one varlen tensor-core launch per storage type, whose splits of equal cells
   span the whole batch so that short and long sequences alike fill the GPU (other layers one launch
   each; while the stream is being captured, see CUDA GRAPHS). Split layers under OFF stream their
   host heads back through the runtime's two shared staging buffers, the short chunks of many
   layers one after another in a buffer (so that the copies do not wait for the GPU heads'
   launch) and a buffer's chunks attended in one launch, except where a single decode would read
   them in place (NEO_ATTN_IN_PLACE_BYTES): those layers' host heads are read so, all in one
   launch beside the device heads, so that a batch of short layers pays no copy's fixed cost.
   ON layers' host outputs come up in one copy. A split HYBRID layer (or AUTO layer that chose
   it) has its CPU cells attended in the same job of the pool, its other host cells streamed back
   after the OFF layers' or read in place with them (the same rule on those cells), and the two
   merged on the device once the job is done (its CPU states come up in one copy; one merge
   launch for neighbouring hybrid layers with the same GPU heads). AUTO's share is timed on
   single calls; docs/BENCHMARKS.md has a batch's hybrid layers measured at other shares, and
   against ON.
   A split AUTO layer that is still measuring runs as its own single call. A call that fails
   counts no decode (neo_layer_info) and leaves out undefined. */
NEO_ATTN_API neo_status neo_attn_append_batch(neo_layer *const *layers, int n, const float *k, const float *v);
NEO_ATTN_API neo_status neo_attn_decode_batch(neo_layer *const *layers, int n, const float *q, float *out);

/* Returns when everything the runtime has queued (on its streams and on its CPU pool) is done,
   with the first error the device reports for that work, if any. Then the lengths of layers
   with captured appends are read back from the device (see CUDA GRAPHS): NEO_ERR_FULL when a
   replayed append found its layer full since the last sync. On a capturing stream: refused. */
NEO_ATTN_API neo_status neo_runtime_sync(neo_runtime *rt);

/* --- decode loop: llama2.c checkpoints (compiled out with NEO_ATTN_NO_MODEL) --- */
#if !defined(NEO_ATTN_NO_MODEL)

typedef struct neo_model neo_model;
typedef struct neo_model_info {
    int dim;                 /* residual width */
    int hidden_dim;          /* FFN width */
    int n_layers;
    int n_heads;             /* query heads; head_dim = dim / n_heads */
    int n_kv_heads;
    int vocab_size;
    int seq_len;             /* trained context length, the default n_ctx of a session */
    int shared_classifier;   /* 1 = the classifier is the token embedding table */
    size_t weight_bytes;     /* float32 weights held */
} neo_model_info;

/* Reads a whole checkpoint. NEO_ERR_IO if the file cannot be opened or read or is not a regular
   file (a FIFO or a device is refused at once, not waited on), NEO_ERR_FORMAT if its header is
   implausible or its size is not exactly what the header implies. */
NEO_ATTN_API neo_status neo_model_load(const char *path, neo_model **out);
/* The same from memory; the bytes are copied, so data may be freed after the call. */
NEO_ATTN_API neo_status neo_model_load_memory(const void *data, size_t size, neo_model **out);
NEO_ATTN_API void       neo_model_destroy(neo_model *model);   /* NULL is fine; destroy its sessions first */
NEO_ATTN_API neo_status neo_model_get_info(const neo_model *model, neo_model_info *info);

typedef struct neo_session neo_session;
typedef struct neo_session_desc {
    int          n_ctx;        /* tokens of KV cache per layer; 0 = the model's seq_len */
    neo_type     kv_type;      /* default F16 */
    int          gpu_heads;    /* per layer, as neo_layer_desc.gpu_heads; 0 = no split */
    neo_pipeline pipeline;     /* as neo_layer_desc.pipeline */
    const int   *layer_gpu_heads; /* [n_layers] each layer's own gpu_heads (as neo_plan_gpu_heads writes
                                     them), or NULL = gpu_heads for every layer; read at create */
    float        cpu_share;    /* as neo_layer_desc.cpu_share */
    int          graphs;       /* 1 = on a GPU runtime, each step's layers and logits are one CUDA graph,
                                  captured once and replayed for every token (see neo_session_step);
                                  0 = every step launches its kernels one by one */
} neo_session_desc;

/* One sequence's state (KV cache of every layer and activations). model and rt must outlive it. */
NEO_ATTN_API neo_status neo_session_create(neo_runtime *rt, const neo_model *model, const neo_session_desc *desc,
                                           neo_session **out);
NEO_ATTN_API void       neo_session_destroy(neo_session *s);   /* NULL is fine */
/* Runs token at position neo_session_length(s) through every layer and writes logits: [vocab_size]
   (host memory). NEO_ERR_INVALID_ARG for a token outside [0, vocab_size), NEO_ERR_FULL when the
   cache holds n_ctx tokens; on an error nothing changes. With neo_session_desc.graphs, the first
   step whose layers can all be captured (see CUDA GRAPHS: no AUTO layer still measuring, and
   ON and HYBRID need the listener thread) captures the layers and logits into a CUDA graph, and
   every later step replays it (lengths and positions live on the device); steps before, or where
   capture fails (logged), run as without graphs. The output is the same either way. */
NEO_ATTN_API neo_status neo_session_step(neo_session *s, int token, float *logits);
/* The same step, for greedy decoding: *next = the index of the largest logit (the lowest on ties,
   as llama2.c's argmax), found where the logits are, so on a GPU only one int comes back. */
NEO_ATTN_API neo_status neo_session_step_argmax(neo_session *s, int token, int *next);
NEO_ATTN_API int        neo_session_length(const neo_session *s);   /* 0 for NULL */
NEO_ATTN_API neo_status neo_session_truncate(neo_session *s, int n_tokens);   /* as neo_layer_truncate */
/* Sums of every layer's neo_layer_info (bytes and calls over all layers; gpu_heads and cpu_heads
   are the last layer's, which other layers share unless layer_gpu_heads placed them apart). */
NEO_ATTN_API neo_status neo_session_get_info(const neo_session *s, neo_layer_info *info);
#endif /* NEO_ATTN_NO_MODEL */


/* --- the GPU bridge ------------------------------------------------------------------------
   Private, but declared here because two files share it. The header drives the device through
   three small tables, each with one concern and its own ABI version: memory, copies and streams
   (neo__dev_mem); attention, append, the both-halves handoff and the hybrid's merge
   (neo__dev_attn); and the decode loop's optional ops (neo__dev_model: an entry left NULL runs on
   the host). neo_attn_cuda.cu fills them (neo__cuda_get_mem / _attn / _model, NEO_ATTN_CUDA=1); the header's own host
   backend (a CPU runtime) and its GPU stand-in (neo_runtime_desc.gpu_standin = 1, which runs
   the split paths in CI with no GPU) fill them too. Only plain C crosses: pointers, ints, size_t
   and the POD structs below. Every entry that can fail returns a neo_status (as int).
   Streams: NEO__STREAM_MAIN is the engine's (or the runtime's own); NEO__STREAM_COPY moves the
   host half of a stream-back layer. Events are small integers below NEO__EVENTS. */
#define NEO__DEV_MEM_ABI 2
#define NEO__DEV_ATTN_ABI 9
#define NEO__DEV_MODEL_ABI 3
#define NEO__STREAM_MAIN 0
#define NEO__STREAM_COPY 1
#define NEO__EVENTS 8

/* Attention of query heads [h0 * group, h1 * group) over cells [c0, c1), as an online-softmax
   state that can be continued over further cell ranges and finally normalised into out. */
typedef struct neo__attn_args {
    const void  *k;          /* [h1 - kv_h0 or more][kv_cells][head_dim] of kv_type: KV head h at (h - kv_h0) */
    const void  *v;          /* [..][kv_cells][head_dim_v] of kv_type */
    int          kv_cells;   /* rows per head in k and v */
    int          kv_h0;      /* KV head stored first in k and v */
    int          cell_base;  /* absolute position of row 0 of each head */
    int          h0, h1;     /* KV heads attended */
    int          c0, c1;     /* absolute cell range attended, cell_base <= c0 < c1 <= cell_base + kv_cells */
    const float *q;          /* [n_tokens][n_head][head_dim] */
    int          n_tokens;
    int          pos0;       /* position of token 0: token t attends cells <= pos0 + t */
    float       *state;      /* [n_tokens][n_head][head_dim_v + 2] as (m, l, acc[head_dim_v]), or NULL */
    int          accumulate; /* 1 = continue the state in *state; 0 = start afresh */
    float       *out;        /* [n_tokens][n_head][head_dim_v]: set = finish here (sinks added); NULL = leave it in state */
    const float *sinks;      /* [n_head] or NULL */
    const float *slopes;     /* [n_head] ALiBi slopes or NULL */
    int          n_head, n_head_kv, head_dim, head_dim_v;
    int          kv_type;    /* neo_type */
    float        scale, softcap;
    const unsigned *gate;    /* CPU only, or NULL: tasks read q only once *gate == gate_seq (the device wrote it) */
    unsigned     gate_seq;
    /* Device int or NULL. Set: the length is read when the op runs (a call captured into a CUDA
       graph attends what the layer holds at each replay): c1 becomes min(c1, *len) and pos0
       *len - n_tokens, and the c1 given is the bound the launch is sized for (the layer's n_ctx).
       A backend that cannot do that refuses with NEO_ERR_UNSUPPORTED. */
    const int   *len;
    /* 0, or with len a CPU share in (0, 1): the attend starts at the hybrid's cut of the length it
       reads, c0 = max(c0, neo__hybrid_cut(*len, cut_share)), the cells before it being the CPU's
       (a captured hybrid decode: >>bells). The cut is floor(fma(share, len, 0.5)) in double, one
       rounding, so that the device's and the host's cuts of one length are the same cell. A range
       left empty (the cut at the length) attends no cell: an empty state (m = -inf, l = 0, acc
       = 0), a continued state unchanged, or the finished output of those. */
    float        cut_share;
    /* 1: k and v are pinned host memory that the device reads in place over the bus (the host
       heads of a split layer); a backend may plan such an attend differently */
    int          kv_host;
} neo__attn_args;

/* What every attend checks of cut_share (both implementations): 1 when it can be run. */
static inline int neo__cut_ok(const neo__attn_args *a) {
    return a->cut_share == 0.0f || (a->len && a->cut_share > 0.0f && a->cut_share < 1.0f);
}

/* The device halves of many layers attended together (neo_attn_decode_batch): entry i is a whole
   neo__attn_args of its own (cache, cell range, q, out, sinks, slopes, scale, softcap, kv_type),
   every entry with the same n_head, n_head_kv, head_dim and head_dim_v. A backend with a varlen
   kernel launches them at once, splitting the cells of the whole batch so that short and long
   entries alike fill the device. */
typedef struct neo__attn_batch {
    const neo__attn_args *entries; /* [n] host memory, read during the call only */
    int                   n;
} neo__attn_batch;

/* Two online-softmax states of the same queries over disjoint cell ranges (the hybrid's CPU and
   device parts) merged and finished: for query head h of token t, with (m, l, acc) each state's,
   M = the larger m, Mf = max(M, sinks[h]), w_x = e^(m_x - M) and s = e^(M - Mf),
       out = (acc_a w_a + acc_b w_b) s / ((l_a w_a + l_b w_b) s + e^(sinks[h] - Mf)),
   the sink term only with sinks. An empty state (m = -inf, l = 0) weighs 0; a NaN m makes the
   query's output NaN. */
typedef struct neo__merge_args {
    const float *a;          /* [n_tokens][n_head][head_dim_v + 2] as (m, l, acc[head_dim_v]) */
    const float *b;          /* [n_tokens][n_head][head_dim_v + 2] */
    float       *out;        /* [n_tokens][n_head][head_dim_v]: rows of heads [h0, h1) written */
    const float *sinks;      /* [n_head] or NULL */
    int          h0, h1;     /* query heads merged */
    int          n_tokens, n_head, head_dim_v;
} neo__merge_args;

/* What every merge op checks first (both implementations): 1 when m can be run. */
static inline int neo__merge_ok(const neo__merge_args *m) {
    return m && m->a && m->b && m->out && m->n_tokens >= 1 && m->n_head >= 1 && m->head_dim_v >= 1 && m->h0 >= 0 &&
           m->h1 > m->h0 && m->h1 <= m->n_head;
}

/* Rows of heads [h0, h1) of new tokens written into a cache in its storage type. */
typedef struct neo__append_args {
    void        *k;          /* [..][kv_cells][head_dim] of kv_type: KV head h at (h - kv_h0) */
    void        *v;          /* [..][kv_cells][head_dim_v] */
    void        *k2, *v2;    /* or NULL: heads [h2, h1) go here instead, head h at (h - h2) (a split layer's host half) */
    int          h2;
    int          kv_cells, kv_h0, h0, h1;
    int          row0;       /* row of the first new token, or -1: len[0], read when the op runs */
    const float *src_k;      /* [n_tokens][n_head_kv][head_dim] */
    const float *src_v;      /* [n_tokens][n_head_kv][head_dim_v] */
    int          n_tokens, n_head_kv, head_dim, head_dim_v;
    int          kv_type;
    /* Device [3] or NULL: the layer's length and full flag, which the device keeps so that a
       captured append replays at the right row, and a count the append's device op keeps (0
       between ops). row0 >= 0: len[0] = row0 + n_tokens once the rows are written. row0 = -1: the
       rows go at len[0] and len[0] advances by n_tokens, or, when len[0] + n_tokens > kv_cells,
       nothing is written and len[1] = 1. */
    int         *len;
} neo__append_args;

/* One projection of the decode loop with what run.c does around it folded in, so that a layer is
   a few launches: y = W . x (x first through run.c's rmsnorm when norm is set), then the
   epilogue. All pointers device memory; y overlaps none of the inputs. */
enum { NEO__MV_STORE, NEO__MV_ADD, NEO__MV_SWIGLU, NEO__MV_ROPE };
typedef struct neo__matvec_args {
    float       *y;          /* [d] */
    const float *w;          /* [d][n], rows are outputs */
    const float *w_mul;      /* [d][n], NEO__MV_SWIGLU only: y = silu(w . x) * (w_mul . x) */
    const float *x;          /* [n] */
    const float *norm;       /* [n] rmsnorm weights, or NULL */
    int          n, d;
    int          epilogue;   /* NEO__MV_STORE: y = ..; _ADD: y += .. (the residual); _SWIGLU; _ROPE */
    /* NEO__MV_ROPE: pairs of rows [0, rope_q) rotate as run.c's q at pos, pairs of
       [rope_q, rope_q + rope_k) as its k (each pair by its index from the start of its range) */
    int          pos, rope_q, rope_k, head_size;
    /* device int or NULL: the position read when the op runs instead of pos (a step captured into
       a CUDA graph: the layer's length before its append) */
    const int   *pos_dev;
    /* NEO__MV_ROPE only, or NULL: the token's k (rows [rope_q, rope_q + rope_k), after RoPE) and v
       (the rows after them) also appended to the cache app describes, as the append op would
       with src_k = y + rope_q and src_v = y + rope_q + rope_k (its src_k, src_v unused), so that
       a layer's projections and append are one op */
    const neo__append_args *app;
} neo__matvec_args;

/* The appended token of a (neo__matvec_args.app): one token of every KV head, k rows of
   head_size with RoPE, v rows in pairs, filling y after the queries. */
static inline int neo__matvec_app_ok(const neo__matvec_args *a) {
    const neo__append_args *p = a->app;
    return a->epilogue == NEO__MV_ROPE && p->n_tokens == 1 && p->h0 == 0 && p->h1 == p->n_head_kv && p->head_dim == a->head_size &&
           p->head_dim_v % 2 == 0 && (long long)p->n_head_kv * p->head_dim == a->rope_k &&
           (long long)p->n_head_kv * p->head_dim_v == (long long)a->d - a->rope_q - a->rope_k && p->kv_type >= NEO_TYPE_F16 &&
           p->kv_type <= NEO_TYPE_F32 && p->kv_cells >= 1 && (p->row0 == -1 ? p->len != NULL : p->row0 >= 0 && p->row0 < p->kv_cells) &&
           (p->h2 == 0 && p->k2 && p->v2 ? 1 : p->k && p->v && p->kv_h0 == 0) && (!p->k2 == !p->v2) &&
           (!p->k2 || (p->h2 >= 0 && p->h2 <= p->n_head_kv)) && (uintptr_t)p->len % 4 == 0;
}

/* What every matvec op checks first (both implementations): 1 when a can be run. */
static inline int neo__matvec_ok(const neo__matvec_args *a) {
    if (!a || !a->y || !a->w || !a->x || a->n < 1 || a->d < 0 || a->epilogue < NEO__MV_STORE || a->epilogue > NEO__MV_ROPE)
        return 0;
    if (a->app && !neo__matvec_app_ok(a)) return 0;
    if (a->epilogue == NEO__MV_SWIGLU) return a->w_mul != NULL;
    if (a->epilogue == NEO__MV_ROPE)
        return a->d % 2 == 0 && a->head_size >= 2 && a->head_size % 2 == 0 && a->rope_q >= 0 && a->rope_k >= 0 &&
               a->rope_q % 2 == 0 && a->rope_k % 2 == 0 && a->rope_q <= a->d - a->rope_k;
    return 1;
}

/* Memory, copies and streams. */
typedef struct neo__dev_mem {
    /* Makes the device's state; on failure writes why (the device's own reason, NUL-terminated,
       at most why_size bytes) for the runtime's log. */
    int  (*init)(int device, void *engine_stream, void **state, char *why, size_t why_size);
    void (*release)(void *state);
    int  (*dev_alloc)(void *state, void **ptr, size_t bytes);   /* NEO_ERR_DEVICE_MEMORY when out */
    void (*dev_free)(void *state, void *ptr);
    /* host memory the device copies from and to (pinned); NEO_ERR_NO_MEMORY when out */
    int  (*host_alloc)(void *state, void **ptr, size_t bytes);
    void (*host_free)(void *state, void *ptr);
    /* asynchronous on stream; any direction (host memory from host_alloc, or device memory) */
    int  (*copy)(void *state, void *dst, const void *src, size_t bytes, int stream);
    int  (*copy2d)(void *state, void *dst, size_t dst_pitch, const void *src, size_t src_pitch, size_t width,
                   size_t rows, int stream);
    int  (*record)(void *state, int event, int stream);
    int  (*wait)(void *state, int stream, int event);         /* stream waits for event */
    int  (*event_sync)(void *state, int event);               /* the host waits for event */
    int  (*stream_sync)(void *state, int stream);
    /* 1 when stream is being captured into a CUDA graph (its ops are recorded, not run), else 0;
       *id (unless NULL) = a number that tells this capture from every other */
    int  (*capturing)(void *state, int stream, unsigned long long *id);
} neo__dev_mem;

/* Attention, append and the both-halves handoff. */
typedef struct neo__dev_attn {
    int  (*append)(void *state, const neo__append_args *a, int stream);
    int  (*attend)(void *state, const neo__attn_args *a, int stream);
    /* The both-halves handoff, with no host call on its critical path: rows of floats (widths and
       pitches in bytes, multiples of 4) between device and pinned host memory, copied by the device
       itself. copy_signal copies, then sets *flag = seq once the rows are visible to the host;
       await_copy waits in stream order until the host has set *flag = seq, then copies. flag:
       pinned host memory. Both return NEO_ERR_UNSUPPORTED on a stream that is being captured.
       NULL on a backend with no device memory (a CPU runtime). */
    int  (*copy_signal)(void *state, void *dst, size_t dst_pitch, const void *src, size_t src_pitch, size_t width,
                        size_t rows, unsigned *flag, unsigned seq, int stream);
    int  (*await_copy)(void *state, void *dst, size_t dst_pitch, const void *src, size_t src_pitch, size_t width,
                       size_t rows, const unsigned *flag, unsigned seq, int stream);
    /* 1 = a launch returns at once and the device runs concurrently with the host, so the
       both-halves call enqueues all its device work before it takes part in the CPU half;
       0 = an op is done when it returns (the stand-in, or CUDA_LAUNCH_BLOCKING=1), so an
       await_copy must not be enqueued before its flag is set. Asked just before the call hands
       its CPU half to the pool (the stand-in's late stream catches up there). */
    int  (*launch_async)(void *state);
    /* Optional, NULL = the header calls attend once per entry: every entry of b attended, as
       attend would each, in stream order. */
    int  (*attend_batch)(void *state, const neo__attn_batch *b, int stream);
    /* a[0..n): appends to distinct layers, each done as append would do it, in stream order */
    int  (*append_batch)(void *state, const neo__append_args *a, int n, int stream);
    /* The hybrid's last step: two states merged and finished into out (neo__merge_args). */
    int  (*merge)(void *state, const neo__merge_args *m, int stream);
    /* len[0] = value, len[1] = len[2] = 0 in stream order (len: device [3], see neo__append_args.len) */
    int  (*set_length)(void *state, int *len, int value, int stream);
    /* The both-halves handoff inside a CUDA graph, where no host call numbers a replay: the
       device counts replays itself, in bell (pinned host memory [NEO__BELL_WORDS], see
       neo__bell). ring: bell[SEQ] += 1, the rows copied (as copy_signal), bell[LEN] = *len (a
       device int: the layer's length), then bell[RING] = bell[SEQ] once all are visible to the
       host. answer: waits in stream order until bell[DONE] == bell[SEQ], then copies (as
       await_copy). host_fn: fn(arg) on a host thread once the stream reaches it. */
    int  (*ring)(void *state, void *dst, size_t dst_pitch, const void *src, size_t src_pitch, size_t width, size_t rows,
                 unsigned *bell, const int *len, int stream);
    int  (*answer)(void *state, void *dst, size_t dst_pitch, const void *src, size_t src_pitch, size_t width, size_t rows,
                   unsigned *bell, int stream);
    int  (*host_fn)(void *state, void (*fn)(void *), void *arg, int stream);
} neo__dev_attn;

/* The words of a graph's handoff (neo__dev_attn.ring): the device's replay count, the count the
   host has seen rung, the count it has answered, and the length the device read. */
enum { NEO__BELL_SEQ, NEO__BELL_RING, NEO__BELL_DONE, NEO__BELL_LEN, NEO__BELL_WORDS = 16 };

/* The decode loop's ops on the device; all pointers device memory. A NULL entry runs on the
   host (activations in host memory). */
typedef struct neo__dev_model {
    int  (*matvec)(void *state, const neo__matvec_args *a, int stream);
    /* *out (device int) = the lowest index of the largest of x[n] (NaN never wins; 0 if none is > -inf) */
    int  (*argmax)(void *state, int *out, const float *x, int n, int stream);
    /* The step as a CUDA graph, or NULL where there are none: graph_begin starts capturing the
       stream's ops; graph_end ends it into *graph, ready to replay (NEO_ERR_UNSUPPORTED when an
       op broke the capture: nothing is made, and the stream captures no more); graph_launch
       replays it on the stream; graph_free frees it. */
    int  (*graph_begin)(void *state, int stream);
    int  (*graph_end)(void *state, int stream, void **graph);
    int  (*graph_launch)(void *state, void *graph, int stream);
    void (*graph_free)(void *state, void *graph);
} neo__dev_model;

/* Each fills its table when the caller's ABI version of it matches; NEO_ERR_UNSUPPORTED otherwise. */
int neo__cuda_get_mem(int abi_version, neo__dev_mem *t);
int neo__cuda_get_attn(int abi_version, neo__dev_attn *t);
int neo__cuda_get_model(int abi_version, neo__dev_model *t);

#ifdef __cplusplus
}
#endif
#endif /* NEO_ATTN_H_INCLUDED */

/* ---------------------------------------------------------------------------------------------
   Stop here if you only need the API. The implementation follows.
   --------------------------------------------------------------------------------------------- */
#ifdef NEO_ATTN_IMPLEMENTATION
#ifndef NEO_ATTN_IMPLEMENTATION_INCLUDED
#define NEO_ATTN_IMPLEMENTATION_INCLUDED

/* =============================================================================================
   >>config: macro defaults and includes
   ============================================================================================= */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(NEO_ATTN_MALLOC) && !defined(NEO_ATTN_FREE) || !defined(NEO_ATTN_MALLOC) && defined(NEO_ATTN_FREE)
#error "neo_attn.h: define both NEO_ATTN_MALLOC and NEO_ATTN_FREE, or neither"
#endif
#ifndef NEO_ATTN_MALLOC
#define NEO_ATTN_MALLOC(sz, u) ((void)(u), malloc(sz))
#define NEO_ATTN_FREE(p, u) ((void)(u), free(p))
#endif
#ifndef NEO_ATTN_ASSERT
#include <assert.h>
#define NEO_ATTN_ASSERT(x) assert(x)
#endif
#ifndef NEO_ATTN_CUDA
#define NEO_ATTN_CUDA 0
#endif
#ifndef NEO_ATTN_NO_THREADS
#define NEO_ATTN_NO_THREADS 0
#endif
#ifndef NEO_ATTN_NO_SIMD
#define NEO_ATTN_NO_SIMD 0
#endif
#ifndef NEO_ATTN_STAGE_BYTES
#define NEO_ATTN_STAGE_BYTES (16u << 20) /* one stream-back chunk of the host heads, double-buffered */
#endif
#ifndef NEO_ATTN_IN_PLACE_BYTES
#define NEO_ATTN_IN_PLACE_BYTES (4u << 20) /* a decode's streamed host cells read in place up to this many bytes */
#endif
#ifndef NEO_ATTN_SPIN_US
#define NEO_ATTN_SPIN_US 300 /* how long an idle worker spins before it sleeps */
#endif
#ifndef NEO_ATTN_DECODE_HOOK
#define NEO_ATTN_DECODE_HOOK(event, task, thread) ((void)0)
#endif

#if !NEO_ATTN_NO_THREADS
#include <pthread.h>
#include <sched.h>
#include <unistd.h>
#endif

#if defined(__unix__) || defined(__APPLE__)
#define NEO__POSIX_FILES 1 /* neo_model_load opens without blocking and takes regular files only */
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#else
#define NEO__POSIX_FILES 0
#endif

#if !NEO_ATTN_NO_SIMD && defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define NEO__X86 1
#include <cpuid.h>
#include <immintrin.h>
#else
#define NEO__X86 0
#endif

#if defined(__GNUC__) || defined(__clang__)
#define NEO_ATTN__PRIVATE static __attribute__((unused))
#define NEO__TARGET(x) __attribute__((target(x)))
#else
#define NEO_ATTN__PRIVATE static
#define NEO__TARGET(x)
#endif
/* NEO__UNROLL(n) before a loop of at most n iterations, a constant once inlined (a SIMD tile's
   queries, cells or columns), unrolls it fully, so that its vectors stay in registers: clang
   takes GCC's "unroll n" as a factor, and its plain "unroll" left some tiles' loops (2, 4, 7 and
   8 queries) rolled, their accumulators on the stack; "clang loop unroll(full)" does not. */
#define NEO__PRAGMA(x) _Pragma(#x)
#if defined(__clang__)
#define NEO__UNROLL(n) NEO__PRAGMA(clang loop unroll(full))
#elif defined(__GNUC__)
#define NEO__UNROLL(n) NEO__PRAGMA(GCC unroll n)
#else
#define NEO__UNROLL(n)
#endif

#ifdef NEO_ATTN_STATIC
#if defined(__GNUC__) || defined(__clang__)
#define NEO_ATTN__PUBLIC static __attribute__((unused)) /* a program may use only part of the API */
#else
#define NEO_ATTN__PUBLIC static
#endif
#else
#define NEO_ATTN__PUBLIC
#endif

/* Internal limits. Cells per block bound the per-thread scratch; a decode splits each KV head
   into at most NEO__MAX_CHUNKS chunks of NEO__MIN_CHUNK to NEO__MAX_CHUNK cells (more past
   NEO__MAX_CHUNK * NEO__MAX_CHUNKS cells), the last ones a quarter of that (neo__chunk_plan). A
   block's softmax steps (max, exp-sum, rescale) run once per query and block, so larger blocks
   mean fewer of them; the block also bounds the per-thread scores scratch. */
#define NEO__BLOCK 64
#define NEO__MIN_CHUNK 256
#define NEO__MAX_CHUNK 1024
#define NEO__MIN_TASKS 64 /* decode tasks (heads x chunks) to aim for: enough for 16+ threads */
#define NEO__MAX_CHUNKS 256
#define NEO__PREFETCH 4096    /* bytes the SIMD kernels ask ahead of each K row they read */
#define NEO__PREFETCH_L2 6144 /* and, where that goes to L1, ahead of each K and V row into L2 */
#ifndef NEO__PREFETCH_L2_BELOW
#define NEO__PREFETCH_L2_BELOW 49152 /* cores whose L1 data cache is smaller take those prefetches into L2 */
#endif
#define NEO__MAX_HEAD_DIM 16384
#define NEO__MAX_HEADS 65536
#define NEO__PREFILL_QUERIES 64 /* queries (tokens x group heads) one prefill task carries */
#ifndef NEO__PREFILL_SLICE
#define NEO__PREFILL_SLICE (1 << 30) /* queries (tokens x heads) of one prefill pass: counts stay ints */
#endif
#define NEO__AUTO_PROBES 3 /* timed decode calls of each pipeline before AUTO decides (a median of 3) */
#define NEO__HYBRID_SHARE 0.5f /* the hybrid's CPU share of the host cells when the descriptor gives none */
#define NEO__FLAG_OUT 32   /* unsigneds from the handoff's first flag to its second: 128 bytes */

/* =============================================================================================
   >>util: allocation, checked size math, f16 / bf16, clocks
   ============================================================================================= */
/* Host memory from a runtime's allocator (neo_runtime_desc.allocator), or, with none (a = NULL
   or unset), from NEO_ATTN_MALLOC / NEO_ATTN_FREE. */
NEO_ATTN__PRIVATE void *neo__alloc(const neo_allocator *a, size_t n) {
    if (!n) return NULL;
    return a && a->alloc ? a->alloc(a->user, n) : NEO_ATTN_MALLOC(n, NULL);
}
NEO_ATTN__PRIVATE void *neo__calloc(const neo_allocator *a, size_t n) {
    void *p = neo__alloc(a, n);
    if (p) memset(p, 0, n);
    return p;
}
NEO_ATTN__PRIVATE void neo__free(const neo_allocator *a, void *p) {
    if (!p) return;
    if (a && a->free) a->free(a->user, p);
    else NEO_ATTN_FREE(p, NULL);
}
/* a * b into *out; 0 on overflow. */
NEO_ATTN__PRIVATE int neo__mul(size_t a, size_t b, size_t *out) {
    if (b && a > (size_t)-1 / b) return 0;
    *out = a * b;
    return 1;
}
NEO_ATTN__PRIVATE int neo__mul3(size_t a, size_t b, size_t c, size_t *out) {
    size_t t;
    return neo__mul(a, b, &t) && neo__mul(t, c, out);
}
NEO_ATTN__PRIVATE int neo__add(size_t a, size_t b, size_t *out) {
    if (a > (size_t)-1 - b) return 0;
    *out = a + b;
    return 1;
}

NEO_ATTN__PRIVATE uint32_t neo__f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
NEO_ATTN__PRIVATE float neo__bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}
NEO_ATTN__PRIVATE float neo__f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ffu;
    if (exp == 0x1f) return neo__bits_f32(sign | 0x7f800000u | (man << 13));
    if (exp == 0) {   /* zero or subnormal: man * 2^-24, exact in float */
        float f = (float)man * (1.0f / 16777216.0f);
        return sign ? -f : f;
    }
    return neo__bits_f32(sign | ((exp + 112) << 23) | (man << 13));
}
/* Round to nearest even, overflow to infinity, NaN stays NaN. */
NEO_ATTN__PRIVATE uint16_t neo__f32_to_f16(float f) {
    uint32_t u = neo__f32_bits(f), sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* rounds to >= 65520: infinity */
    if (a < 0x38800000u) {                                   /* below the smallest normal half */
        /* Adding 0.5 makes the FPU round the value to a multiple of 2^-24 for us. */
        float r = neo__bits_f32(a) + 0.5f;
        return (uint16_t)(sign | (neo__f32_bits(r) - 0x3f000000u));
    }
    uint32_t mant_odd = (a >> 13) & 1u;
    a += 0xc8000fffu + mant_odd; /* rebias exponent (-112 << 23) and round */
    return (uint16_t)(sign | (a >> 13));
}
NEO_ATTN__PRIVATE float neo__bf16_to_f32(uint16_t h) { return neo__bits_f32((uint32_t)h << 16); }
NEO_ATTN__PRIVATE uint16_t neo__f32_to_bf16(float f) {
    uint32_t u = neo__f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
NEO_ATTN__PRIVATE size_t neo__type_size(neo_type t) { return t == NEO_TYPE_F32 ? 4 : 2; }

NEO_ATTN__PRIVATE double neo__now_us(void) {
    struct timespec ts;
    timespec_get(&ts, TIME_UTC);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

/* The hybrid's cut for a CPU share: round(share * len) cells for the CPU, halves up. One fused
   rounding (fma), which a compiler never splits, so that the CUDA kernels' cut of a length read on
   the device (neo__attn_args.cut_share) is this one: below 2^29 cells the product is exact, and
   this equals floor(share * len + 0.5) however that is compiled. */
NEO_ATTN__PRIVATE int neo__hybrid_cut(int len, float share) {
    double c = floor(fma((double)share, (double)len, 0.5));
    return c < 0.0 ? 0 : c > (double)len ? len : (int)c;
}

/* =============================================================================================
   >>status
   ============================================================================================= */
NEO_ATTN__PUBLIC const char *neo_status_string(neo_status s) {
#define NEO__STATUS_TEXT(name, text) case name: return text;
    switch (s) {
        NEO__STATUS_LIST(NEO__STATUS_TEXT)
    default: break;
    }
#undef NEO__STATUS_TEXT
    return "unknown status";
}
NEO_ATTN__PUBLIC const char *neo_attn_version(void) { return NEO_ATTN_VERSION_STRING; }
NEO_ATTN__PUBLIC const char *neo_cpu_isa_name(neo_cpu_isa isa) {
    switch (isa) {
    case NEO_CPU_AUTO: return "auto";
    case NEO_CPU_SCALAR: return "scalar";
    case NEO_CPU_AVX2: return "avx2";
    case NEO_CPU_AVX512: return "avx512";
    case NEO_CPU_AMX: return "amx";
    }
    return "unknown";
}

/* =============================================================================================
   >>pool: persistent workers and a parallel-for the caller takes part in (launch, help, wait)
   =============================================================================================
   A job is (fn, user, n_tasks); each thread first takes the task of its own number, if no one
   has, then tasks from an atomic counter, so which thread runs which task varies, and callers
   must make results independent of that. The caller waits for a
   job's tasks, never for its workers: a worker that sleeps, or that the system has not given a
   core (more threads than free cores), misses the job and the others take its share. A worker
   joins a job by counting itself in and then checking that the job is still the published one;
   before it writes the next job, the caller closes the slot and waits until no worker is inside
   (a few instructions after the last task), so job fields are never read while written. Idle
   workers spin for NEO_ATTN_SPIN_US, then sleep on a condition variable; the caller signals only
   when someone sleeps.
   A job runs in two calls, so the caller can do its own work between them while the workers
   already spin on the job: neo__pool_launch hands it out, neo__pool_help takes tasks on the
   caller until none is left. A job without a finish step is then over. One with a finish step
   is asynchronous: the thread that finishes its last task runs the step, and the next launch
   (or neo__pool_wait) first waits for that. A serial job, a job of one task and every job of a
   pool without workers run on the caller in neo__pool_help, the finish step after them. With an
   engine's parallel-for (neo_runtime_desc.parallel_for) the pool has no workers, and
   neo__pool_help hands every job of more than one task to it. */
typedef struct neo__job {
    neo_task_fn fn;
    void       *user;           /* fn's; must outlive an asynchronous job */
    int         n_tasks;
    void      (*finish)(void *ctx); /* or NULL: run once after the last task */
    void       *finish_ctx;
    int         serial;         /* 1 = on the caller alone (a job too small to wake the workers for) */
} neo__job;
#define NEO__LINE 64 /* bytes that keep atomics different threads write off each other's cache line */

#if !NEO_ATTN_NO_THREADS
typedef struct neo__worker {
    struct neo__pool *pool;
    int               id; /* 1 .. n_threads - 1; the caller is 0 */
} neo__worker;
#endif

typedef struct neo__pool {
    int                  n_threads; /* caller included */
    const neo_allocator *alloc;     /* the runtime's */
    void               (*ext)(void *user, int n_tasks, neo_task_fn task, void *arg); /* the engine's parallel-for, or NULL */
    void                *ext_user;
    int                  pending;   /* the caller's: 1 = the published job may still run; 2 = held waits for help */
    neo__job             held;      /* a job neo__pool_help runs on the caller */
#if !NEO_ATTN_NO_THREADS
    int             n_workers;
    pthread_t      *threads; /* [n_workers] */
    neo__worker    *workers; /* [n_workers] */
    unsigned char  *home;    /* atomic [n_threads][NEO__LINE]: [i][0] = 1 once task i (< n_threads) of the current job is taken */
    pthread_mutex_t mu;
    pthread_cond_t  cv;       /* workers sleep here between jobs */
    pthread_cond_t  cv_done;  /* the caller sleeps here when a job's tasks (or its workers) are slow to finish */
    /* What the workers touch at once sits on cache lines of its own, apart by the pads: idle
       workers spin reading gen while each one joining a job adds to active and takes from next,
       and on one line every such add is a transfer of the line the other spinners read. */
    char            pad0[NEO__LINE];
    unsigned        gen;      /* atomic: even: job gen is open; odd: the slot is closed while the caller writes */
    int             stop;     /* atomic */
    neo_task_fn     fn;       /* the job: written only while the slot is closed and no worker is inside */
    void           *user;
    int             n_tasks;
    void          (*finish)(void *ctx); /* the job's finish step, run after its last task */
    void           *finish_ctx;
    char            pad1[NEO__LINE];
    int             active;     /* atomic: workers inside the current job */
    int             sleeping;   /* atomic: workers waiting on cv */
    char            pad2[NEO__LINE];
    int             next;       /* atomic: next task index */
    char            pad3[NEO__LINE];
    int             tasks_done; /* atomic: tasks of the current job finished (and its finish step, if any, run) */
    int             waiting;    /* atomic: the caller sleeps on cv_done */
    char            pad4[NEO__LINE];
#endif
} neo__pool;

NEO_ATTN__PRIVATE void neo__cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* Spins until *flag == seq: a handoff flag set by another thread or by the device. */
NEO_ATTN__PRIVATE void neo__spin_until(const unsigned *flag, unsigned seq) {
    for (int spins = 1; __atomic_load_n(flag, __ATOMIC_ACQUIRE) != seq; spins++) {
        neo__cpu_relax();
#if !NEO_ATTN_NO_THREADS
        if ((spins & 4095) == 0) sched_yield(); /* more threads than cores: let the one that sets it run */
#endif
    }
}

#if !NEO_ATTN_NO_THREADS

/* Wakes the caller if it sleeps on cv_done: a count it waits on has moved. */
NEO_ATTN__PRIVATE void neo__pool_poke(neo__pool *p) {
    if (!__atomic_load_n(&p->waiting, __ATOMIC_SEQ_CST)) return;
    pthread_mutex_lock(&p->mu);
    pthread_cond_signal(&p->cv_done);
    pthread_mutex_unlock(&p->mu);
}

/* Takes tasks of the current job until none is left, then counts them finished in one add (one
   write to the shared line a thread and job, not one a task). The thread whose add completes the
   count runs the job's finish step and only then marks the job over (tasks_done = n_tasks + 1),
   so a wait for the job is a wait for its finish step too. */
NEO_ATTN__PRIVATE void neo__pool_take(neo__pool *p, int thread) {
    int n = 0;
    /* Task `thread` first: a decode of as many chunks as threads then runs each chunk on the same
       thread call after call, and a thread that joins late still finds its own task, not the
       counter's next, so the last task of a job starts sooner (docs/ has the measurement). */
    if (thread < p->n_tasks && !__atomic_exchange_n(&p->home[(size_t)thread * NEO__LINE], 1, __ATOMIC_RELAXED)) {
        p->fn(p->user, thread, thread);
        n++;
    }
    for (;;) {
        int i = __atomic_fetch_add(&p->next, 1, __ATOMIC_RELAXED);
        if (i >= p->n_tasks) break;
        if (i < p->n_threads && __atomic_exchange_n(&p->home[(size_t)i * NEO__LINE], 1, __ATOMIC_RELAXED)) continue;
        p->fn(p->user, i, thread);
        n++;
    }
    /* seq_cst: with the caller's store of waiting and its reload of the count (neo__pool_settle),
       either the caller sees the job over or this thread sees it waiting and signals */
    if (!n || __atomic_add_fetch(&p->tasks_done, n, __ATOMIC_SEQ_CST) < p->n_tasks) return;
    if (p->finish) p->finish(p->finish_ctx);
    __atomic_add_fetch(&p->tasks_done, 1, __ATOMIC_SEQ_CST);
    neo__pool_poke(p);
}

NEO_ATTN__PRIVATE void *neo__worker_main(void *arg) {
    neo__worker *w = (neo__worker *)arg;
    neo__pool   *p = w->pool;
    unsigned     seen = 0, g = 0; /* the last job this worker looked at; the published one */
    for (;;) {
        double t0 = neo__now_us();
        for (int spins = 0;; spins++) {
            g = __atomic_load_n(&p->gen, __ATOMIC_ACQUIRE);
            if ((g != seen && !(g & 1u)) || __atomic_load_n(&p->stop, __ATOMIC_ACQUIRE)) break;
            if ((spins & 255) == 255) {
                if (neo__now_us() - t0 > NEO_ATTN_SPIN_US) {
                    pthread_mutex_lock(&p->mu);
                    __atomic_fetch_add(&p->sleeping, 1, __ATOMIC_SEQ_CST);
                    for (;;) {
                        g = __atomic_load_n(&p->gen, __ATOMIC_SEQ_CST);
                        if ((g != seen && !(g & 1u)) || __atomic_load_n(&p->stop, __ATOMIC_SEQ_CST)) break;
                        pthread_cond_wait(&p->cv, &p->mu);
                    }
                    __atomic_fetch_sub(&p->sleeping, 1, __ATOMIC_SEQ_CST);
                    pthread_mutex_unlock(&p->mu);
                    t0 = neo__now_us();
                } else if (spins > 1024) {
                    sched_yield(); /* more threads than cores: let the caller run */
                }
            }
            neo__cpu_relax();
        }
        if (__atomic_load_n(&p->stop, __ATOMIC_ACQUIRE)) break;
        seen = g;
        /* counted in first, then checked: either the caller, closing the slot, sees this worker
           inside and waits, or this worker sees the slot moved on and leaves */
        __atomic_fetch_add(&p->active, 1, __ATOMIC_SEQ_CST);
        if (__atomic_load_n(&p->gen, __ATOMIC_SEQ_CST) == g) neo__pool_take(p, w->id);
        if (__atomic_sub_fetch(&p->active, 1, __ATOMIC_SEQ_CST) == 0) neo__pool_poke(p);
    }
    return NULL;
}
#endif

NEO_ATTN__PRIVATE void neo__pool_wait(neo__pool *p);

NEO_ATTN__PRIVATE void neo__pool_destroy(neo__pool *p) {
#if !NEO_ATTN_NO_THREADS
    if (p->threads) {
        neo__pool_wait(p);
        pthread_mutex_lock(&p->mu);
        __atomic_store_n(&p->stop, 1, __ATOMIC_SEQ_CST);
        pthread_cond_broadcast(&p->cv);
        pthread_mutex_unlock(&p->mu);
        for (int i = 0; i < p->n_workers; i++) pthread_join(p->threads[i], NULL);
        pthread_cond_destroy(&p->cv);
        pthread_cond_destroy(&p->cv_done);
        pthread_mutex_destroy(&p->mu);
    }
    neo__free(p->alloc, p->threads);
    neo__free(p->alloc, p->workers);
    neo__free(p->alloc, p->home);
    p->threads = NULL;
    p->workers = NULL;
    p->home = NULL;
#endif
    p->n_threads = 1;
}

/* Starts n_threads - 1 workers; if the system refuses some, runs with fewer. With ext (the
   engine's parallel-for) it starts none and n_threads is the engine's. */
NEO_ATTN__PRIVATE neo_status neo__pool_init(neo__pool *p, int n_threads, void (*ext)(void *, int, neo_task_fn, void *),
                                            void *ext_user, const neo_allocator *alloc) {
    memset(p, 0, sizeof *p);
    p->n_threads = 1;
    p->alloc = alloc;
    if (ext) {
        p->n_threads = n_threads;
        p->ext = ext;
        p->ext_user = ext_user;
        return NEO_OK;
    }
#if !NEO_ATTN_NO_THREADS
    if (n_threads <= 1) return NEO_OK;
    p->threads = (pthread_t *)neo__alloc(p->alloc, sizeof(pthread_t) * (size_t)(n_threads - 1));
    p->workers = (neo__worker *)neo__alloc(p->alloc, sizeof(neo__worker) * (size_t)(n_threads - 1));
    p->home = (unsigned char *)neo__alloc(p->alloc, (size_t)n_threads * NEO__LINE);
    if (!p->threads || !p->workers || !p->home) {
        neo__free(p->alloc, p->threads);
        neo__free(p->alloc, p->workers);
        neo__free(p->alloc, p->home);
        p->threads = NULL;
        p->workers = NULL;
        p->home = NULL;
        return NEO_ERR_NO_MEMORY;
    }
    if (pthread_mutex_init(&p->mu, NULL) != 0) goto no_threads;
    if (pthread_cond_init(&p->cv, NULL) != 0) {
        pthread_mutex_destroy(&p->mu);
        goto no_threads;
    }
    if (pthread_cond_init(&p->cv_done, NULL) != 0) {
        pthread_cond_destroy(&p->cv);
        pthread_mutex_destroy(&p->mu);
        goto no_threads;
    }
    for (int i = 0; i < n_threads - 1; i++) {
        p->workers[i].pool = p;
        p->workers[i].id = i + 1;
        if (pthread_create(&p->threads[i], NULL, neo__worker_main, &p->workers[i]) != 0) break;
        p->n_workers++;
    }
    p->n_threads = 1 + p->n_workers;
    return NEO_OK;
no_threads:
    neo__free(p->alloc, p->threads);
    neo__free(p->alloc, p->workers);
    neo__free(p->alloc, p->home);
    p->threads = NULL;
    p->workers = NULL;
    p->home = NULL;
#else
    (void)n_threads;
#endif
    return NEO_OK;
}

#if !NEO_ATTN_NO_THREADS
/* what = 0: the current job is over (its done step run); 1: no worker is inside it */
NEO_ATTN__PRIVATE int neo__pool_settled(neo__pool *p, int what) {
    return what ? __atomic_load_n(&p->active, __ATOMIC_SEQ_CST) == 0
                : __atomic_load_n(&p->tasks_done, __ATOMIC_SEQ_CST) > p->n_tasks;
}
/* Spins briefly, then sleeps, until settled: a worker that shares this CPU (an oversubscribed or
   busy machine) can only finish once the caller stops spinning. */
NEO_ATTN__PRIVATE void neo__pool_settle(neo__pool *p, int what) {
    for (int spins = 0; !neo__pool_settled(p, what); spins++) {
        if (spins < 2048) {
            neo__cpu_relax();
            continue;
        }
        pthread_mutex_lock(&p->mu);
        __atomic_store_n(&p->waiting, 1, __ATOMIC_SEQ_CST);
        while (!neo__pool_settled(p, what)) pthread_cond_wait(&p->cv_done, &p->mu);
        __atomic_store_n(&p->waiting, 0, __ATOMIC_SEQ_CST);
        pthread_mutex_unlock(&p->mu);
    }
}

/* Publishes a job to the workers; the last one is over. The slot is closed (gen odd) and the
   workers still inside the last job (past its last task) are let out before its fields change. */
NEO_ATTN__PRIVATE void neo__pool_publish(neo__pool *p, const neo__job *j) {
    int n_tasks = j->n_tasks;
    __atomic_fetch_add(&p->gen, 1u, __ATOMIC_SEQ_CST);
    neo__pool_settle(p, 1);
    p->fn = j->fn;
    p->user = j->user;
    p->n_tasks = n_tasks;
    p->finish = j->finish;
    p->finish_ctx = j->finish_ctx;
    p->pending = 1;
    __atomic_store_n(&p->next, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&p->tasks_done, 0, __ATOMIC_RELAXED);
    /* only the flags this job's tasks can read (task t < n_tasks): each is another core's line */
    for (int t = 0; t < p->n_threads && t < n_tasks; t++) __atomic_store_n(&p->home[(size_t)t * NEO__LINE], 0, __ATOMIC_RELAXED);
    __atomic_fetch_add(&p->gen, 1u, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&p->sleeping, __ATOMIC_SEQ_CST)) {
        pthread_mutex_lock(&p->mu);
        pthread_cond_broadcast(&p->cv);
        pthread_mutex_unlock(&p->mu);
    }
}
#endif

/* Waits for an asynchronous job to be over (no-op if none): before anything the job reads or
   writes is reused. */
NEO_ATTN__PRIVATE void neo__pool_wait(neo__pool *p) {
#if !NEO_ATTN_NO_THREADS
    if (p->pending != 1) return;
    neo__pool_settle(p, 0);
    p->pending = 0;
#else
    (void)p;
#endif
}

/* Hands job j out (after the last asynchronous job is over): published to the workers, or held
   for neo__pool_help to run on the caller. */
NEO_ATTN__PRIVATE void neo__pool_launch(neo__pool *p, const neo__job *j) {
    neo__pool_wait(p);
#if !NEO_ATTN_NO_THREADS
    if (!j->serial && !p->ext && p->n_workers > 0 && j->n_tasks > 1) {
        neo__pool_publish(p, j);
        return;
    }
#endif
    p->held = *j;
    p->pending = 2;
}

/* The caller's part of the launched job: tasks until none is left to take; for a job without a
   finish step, until all are done. */
NEO_ATTN__PRIVATE void neo__pool_help(neo__pool *p) {
    if (p->pending == 2) {
        const neo__job j = p->held;
        p->pending = 0;
        if (p->ext && !j.serial && j.n_tasks > 1) p->ext(p->ext_user, j.n_tasks, j.fn, j.user);
        else
            for (int i = 0; i < j.n_tasks; i++) j.fn(j.user, i, 0);
        if (j.finish) j.finish(j.finish_ctx);
        return;
    }
#if !NEO_ATTN_NO_THREADS
    if (p->pending != 1) return;
    neo__pool_take(p, 0);
    if (!p->finish) {
        neo__pool_settle(p, 0);
        p->pending = 0;
    }
#endif
}

/* fn(user, task, thread) for task in [0, n_tasks) with thread in [0, n_threads), the caller
   taking tasks too; returns when all are done. */
NEO_ATTN__PRIVATE void neo__pool_run(neo__pool *p, int n_tasks, neo_task_fn fn, void *user) {
    neo__job j;
    memset(&j, 0, sizeof j);
    j.fn = fn;
    j.user = user;
    j.n_tasks = n_tasks;
    neo__pool_launch(p, &j);
    neo__pool_help(p);
}

/* =============================================================================================
   >>cpu: CPU kernels (scalar, AVX2 + F16C + FMA, AVX-512, AMX tiles) behind one small table
   =============================================================================================
   Attention works on blocks of NEO__BLOCK cells, reading K and V in their storage type and
   widening in registers. A tile of up to eight queries (a whole GQA group of up to 8) shares
   every K and V load and widening, so DRAM sees each row once per call and each element is
   widened once. Function pointers are called once per block (and query), never per row. The
   AMX runtime keeps the AVX-512 kernels and adds tile kernels for tasks of many queries (see
   "AMX" below). */
/* The AMX tile path's shapes and work area (the kernels are in the AVX-512 part below). */
#ifndef NEO__TILE_MIN_QUERIES
#define NEO__TILE_MIN_QUERIES 48
#endif
#define NEO__TILE_MAX_DIM 512
NEO_ATTN__PRIVATE int neo__tile_fits(neo_type t, int d, int dv, int nq) {
    return (t == NEO_TYPE_F16 || t == NEO_TYPE_BF16) && d % 32 == 0 && dv % 16 == 0 && d <= NEO__TILE_MAX_DIM &&
           dv <= NEO__TILE_MAX_DIM && nq >= NEO__TILE_MIN_QUERIES;
}
/* The tile path's per-thread work area, 64-byte aligned, in this order (pv uses only the parts
   before k, whose sizes do not depend on head_dim): */
typedef struct neo__tile_area {
    unsigned char *cfg; /* [64] the tile configuration */
    float         *c;   /* [16][16] scores of 16 cells (rows) x 16 queries, from tmm0 */
    uint16_t      *p;   /* [2 chunks][2 parts][16 queries][32 cells] bf16: a block's weights as A tiles */
    uint32_t      *v;   /* [2 chunks][dv / 16][2 parts][16 cell pairs][16 columns] bf16 pairs: a block's V as B tiles */
    float         *acc; /* [16][dv] 16 queries' accumulators, as tmm0 loads them */
    uint16_t      *k;   /* [d / 32][2 parts][16 cells][32 dims] bf16: 16 cells' K as A tiles */
    uint32_t      *q;   /* [query groups of 16][d / 32][3 parts][16 dim pairs][16 queries] bf16 pairs: Q^T as B tiles */
} neo__tile_area;
/* Fills ar from w (or only counts, w NULL); returns the bytes from the aligned start. */
NEO_ATTN__PRIVATE size_t neo__tile_layout(void *w, int d, int dv, int nq, neo__tile_area *ar) {
    size_t sz[7] = {64, 1024, 4096, (size_t)dv * 256, (size_t)dv * 64, (size_t)d * 64, (size_t)(nq + 15) / 16 * (size_t)d * 96};
    unsigned char *b = (unsigned char *)(((uintptr_t)w + 63) & ~(uintptr_t)63), *o[7];
    size_t         n = 0;
    for (int i = 0; i < 7; i++) {
        o[i] = b + n;
        n += sz[i];
    }
    if (w) {
        ar->cfg = o[0], ar->c = (float *)(void *)o[1], ar->p = (uint16_t *)(void *)o[2], ar->v = (uint32_t *)(void *)o[3];
        ar->acc = (float *)(void *)o[4], ar->k = (uint16_t *)(void *)o[5], ar->q = (uint32_t *)(void *)o[6];
    }
    return n;
}

typedef struct neo__kernels {
    neo_cpu_isa isa;
    /* s: [nq][NEO__BLOCK] <- q: [nq][d] . k: [nk][d] of type t (row dot products); v: [nk][dv] of
       type t, the same cells' V rows, is only asked toward the core as K is read, so that pv,
       next, finds it there (SIMD paths, into the cache level pf says: see pf below) */
    void (*scores)(float *s, const float *q, const void *k, const void *v, neo_type t, int nq, int nk, int d, int dv, int pf);
    /* the largest of x: [n], n >= 1 (exact, so every path finds the same one) */
    float (*max)(const float *x, int n);
    /* x: [n] *= c (a new running max rescales an accumulator) */
    void (*scale)(float *x, int n, float c);
    /* x: [n] <- exp(x - m); returns the sum */
    float (*exp_sum)(float *x, int n, float m);
    /* One block's online-softmax step for nq queries that all see its NEO__BLOCK cells (no mask,
       softcap or slope): s: [nq][NEO__BLOCK] scores <- e^(s - m), with m: [nq] the running max,
       l: [nq] the running sum and acc: [nq][dv] the accumulators, all times e^(m - m') where the
       max grows to m'. Returns 0, having changed nothing, when a score is not finite; else the
       bits of max, neo__rescale and exp_sum query by query (neo__attend's steps for the other
       blocks), in one call and one pass of the finite test. */
    int (*softmax)(float *s, int nq, float *m, float *l, float *acc, int dv);
    /* acc: [nq][dv] += p: [nq][NEO__BLOCK] x v: [nk][dv] of type t */
    void (*pv)(float *acc, const float *p, const void *v, neo_type t, int nq, int nk, int dv);
    /* dot product of two [n] vectors (the decode loop's matmuls) */
    float (*dot)(const float *a, const float *b, int n);
    /* The tile path (AMX; NULL on the others), for layers neo__tile_fits takes, in place of scores
       and pv. w: the thread's work area (neo__tile_layout), set up by tile_begin with the task's
       queries q: [nq][d]; tile_end gives the tile registers back at the end of the task. */
    void (*tile_begin)(void *w, const float *q, int nq, int d, int dv);
    void (*tile_scores)(float *s, void *w, const void *k, const void *v, neo_type t, int nq, int nk, int d, int dv, int pf);
    void (*tile_pv)(float *acc, const float *p, void *w, const void *v, neo_type t, int nq, int nk, int dv);
    void (*tile_end)(void);
    /* where the scores kernels' prefetches go (neo__prefetch_lines): 1 L1, 2 L2, by this CPU's L1
       data cache (neo__kernels_init) */
    int pf;
} neo__kernels;

/* --- scalar: the portable reference path --- */
NEO_ATTN__PRIVATE float neo__ld1(const void *p, size_t i, neo_type t) {
    if (t == NEO_TYPE_F32) return ((const float *)p)[i];
    if (t == NEO_TYPE_F16) return neo__f16_to_f32(((const uint16_t *)p)[i]);
    return neo__bf16_to_f32(((const uint16_t *)p)[i]);
}
NEO_ATTN__PRIVATE float neo__dot_scalar(const float *a, const float *b, int n) {
    float s = 0.0f;
    for (int i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}
/* q: [d] . row: [d] of type t, from element j0 on, onto s */
NEO_ATTN__PRIVATE float neo__dot_tail(float s, const float *q, const void *row, neo_type t, int j0, int d) {
    for (int j = j0; j < d; j++) s += q[j] * neo__ld1(row, (size_t)j, t);
    return s;
}
NEO_ATTN__PRIVATE void neo__scores_scalar(float *s, const float *q, const void *k, const void *v, neo_type t, int nq, int nk, int d,
                                          int dv, int pf) {
    size_t es = neo__type_size(t);
    (void)v, (void)dv, (void)pf;
    for (int r = 0; r < nq; r++)
        for (int b = 0; b < nk; b++)
            s[r * NEO__BLOCK + b] = neo__dot_tail(0.0f, q + (size_t)r * d, (const char *)k + (size_t)b * d * es, t, 0, d);
}
NEO_ATTN__PRIVATE float neo__max_scalar(const float *x, int n) {
    float m = x[0];
    for (int i = 1; i < n; i++) m = x[i] > m ? x[i] : m;
    return m;
}
NEO_ATTN__PRIVATE void neo__scale_scalar(float *x, int n, float c) {
    for (int i = 0; i < n; i++) x[i] *= c;
}
NEO_ATTN__PRIVATE float neo__exp_sum_scalar(float *x, int n, float m) {
    float sum = 0.0f;
    for (int i = 0; i < n; i++) {
        x[i] = expf(x[i] - m);
        sum += x[i];
    }
    return sum;
}
/* 1 when none of x: [n] is NaN or infinite: bit 31 of (exponent bits + 1 << 23) is set only when
   the exponent is all ones. Run on blocks' scores, so four lanes at a time where SSE2 is. */
NEO_ATTN__PRIVATE int neo__finite(const float *x, size_t n) {
    uint32_t e = 0;
    size_t   i = 0;
#if NEO__X86
    const __m128i m = _mm_set1_epi32(0x7f800000), one = _mm_set1_epi32(0x00800000);
    __m128i       v0 = _mm_setzero_si128(), v1 = _mm_setzero_si128();
    for (; i + 8 <= n; i += 8) {
        v0 = _mm_or_si128(v0, _mm_add_epi32(_mm_and_si128(_mm_castps_si128(_mm_loadu_ps(x + i)), m), one));
        v1 = _mm_or_si128(v1, _mm_add_epi32(_mm_and_si128(_mm_castps_si128(_mm_loadu_ps(x + i + 4)), m), one));
    }
    e = _mm_movemask_ps(_mm_castsi128_ps(_mm_or_si128(v0, v1))) ? 0x80000000u : 0u; /* any lane's bit 31 */
#endif
    for (; i < n; i++) e |= (neo__f32_bits(x[i]) & 0x7f800000u) + 0x00800000u;
    return !(e >> 31);
}
/* a running max that grows to mx (> *m) rescales the running sum *l and the accumulators acc: [dv]
   by e^(m - mx); from -inf (nothing attended: l and acc are still 0) the factor 0 changes nothing */
NEO_ATTN__PRIVATE void neo__rescale(float mx, float *m, float *l, float *acc, int dv, void (*scale)(float *x, int n, float c)) {
    if (*m != -INFINITY) {
        float corr = expf(*m - mx);
        *l *= corr;
        scale(acc, dv, corr);
    }
    *m = mx;
}
NEO_ATTN__PRIVATE int neo__softmax_scalar(float *s, int nq, float *m, float *l, float *acc, int dv) {
    if (!neo__finite(s, (size_t)nq * NEO__BLOCK)) return 0;
    for (int r = 0; r < nq; r++) {
        float *x = s + r * NEO__BLOCK, mx = neo__max_scalar(x, NEO__BLOCK);
        if (mx > m[r]) neo__rescale(mx, m + r, l + r, acc + (size_t)r * dv, dv, neo__scale_scalar);
        l[r] += neo__exp_sum_scalar(x, NEO__BLOCK, m[r]);
    }
    return 1;
}
/* acc: [nq][dv] += p x v, for columns [j0, dv) */
NEO_ATTN__PRIVATE void neo__pv_cols(float *acc, const float *p, const void *v, neo_type t, int nq, int nk, int dv, int j0) {
    size_t es = neo__type_size(t);
    for (int r = 0; r < nq; r++)
        for (int b = 0; b < nk; b++) {
            float       pb = p[r * NEO__BLOCK + b];
            const char *vr = (const char *)v + (size_t)b * dv * es;
            for (int j = j0; j < dv; j++) acc[(size_t)r * dv + j] += pb * neo__ld1(vr, (size_t)j, t);
        }
}
NEO_ATTN__PRIVATE void neo__pv_scalar(float *acc, const float *p, const void *v, neo_type t, int nq, int nk, int dv) {
    neo__pv_cols(acc, p, v, t, nq, nk, dv, 0);
}

#if NEO__X86
/* GCC 12's intrinsic headers initialise undefined vectors from themselves, which g++ -O2 -Wall
   reports as maybe-uninitialized in every caller (GCC PR 105593). */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
/* One core's hardware prefetcher does not keep enough misses in flight to stream at DRAM speed
   while the core also computes, so each K row read asks for the row NEO__PREFETCH bytes ahead as
   well, and for the same cell's V row, which the block's p . v reads next: its first pass over
   the block's V rows takes a few columns of each, too fast for a read-ahead from inside it to
   arrive in time. Where they go depends on the L1 data cache (pf, neo__kernels.pf): a block's V
   rows asked early (16 KB at head_dim 128 in f16) beside its K rows and the read-ahead can
   overflow a 32 KB L1 and push out K rows before the scores read them, so on cores whose L1 is
   under NEO__PREFETCH_L2_BELOW the lines go to L2 (pf 2), from where the loads and L1's own
   prefetcher take them in time; a 48 KB L1 holds them all, and there they go to L1 (pf 1)
   (docs/BENCHMARKS.md, "CPU decode attention"). Where they go to L1, the same K and V lines
   NEO__PREFETCH_L2 bytes further on are asked into L2 as well: an L1 prefetch holds one of the
   core's few L1 fill buffers until its line arrives, and one that finds its line in L2 frees it
   soon, so the L2 requests let a core that computes as it reads keep more misses in flight (the
   measured gain: docs/BENCHMARKS.md, "The read-ahead into L2 beside the one into L1").
   Prefetches never fault, so running past the cache's end is harmless. */
static inline __attribute__((always_inline)) void neo__prefetch_lines(const char *p, size_t bytes, int pf) {
    if (pf == 2)
        for (size_t o = 0; o < bytes; o += 64) _mm_prefetch(p + o, _MM_HINT_T1);
    else
        for (size_t o = 0; o < bytes; o += 64) _mm_prefetch(p + o, _MM_HINT_T0);
}
static inline __attribute__((always_inline)) void neo__prefetch_row(const char *row, size_t bytes, int pf) {
    neo__prefetch_lines(row + NEO__PREFETCH, bytes, pf);
}
/* The read-ahead of the SIMD scores kernels for cells whose K rows (kbytes from k) they read now
   and whose V rows (vbytes from v) p . v reads next. */
static inline __attribute__((always_inline)) void neo__prefetch_cells(const char *k, size_t kbytes, const char *v, size_t vbytes, int pf) {
    neo__prefetch_row(k, kbytes, pf);
    neo__prefetch_lines(v, vbytes, pf);
    if (pf == 1) {
        neo__prefetch_lines(k + NEO__PREFETCH_L2, kbytes, 2);
        neo__prefetch_lines(v + NEO__PREFETCH_L2, vbytes, 2);
    }
}

/* --- AVX2 + FMA + F16C: 8 lanes; the d % 8 tail columns go through the scalar helpers --- */
#define NEO__AVX2 NEO__TARGET("avx2,fma,f16c")
NEO__AVX2 static inline float neo__hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
/* 8 elements of p (type t) from element i, widened */
NEO__AVX2 static inline __m256 neo__ld8(const void *p, size_t i, neo_type t) {
    if (t == NEO_TYPE_F32) return _mm256_loadu_ps((const float *)p + i);
    __m128i h = _mm_loadu_si128((const __m128i *)((const uint16_t *)p + i));
    if (t == NEO_TYPE_F16) return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}
NEO__AVX2 NEO_ATTN__PRIVATE float neo__dot_avx2(const float *a, const float *b, int n) {
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
    }
    for (; i + 8 <= n; i += 8) s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
    return neo__dot_tail(neo__hsum8(_mm256_add_ps(s0, s1)), a, b, NEO_TYPE_F32, i, n);
}
/* The lane sums of 8 vectors in one: lane f is the sum of x[f]'s lanes, added in one fixed
   order, ((0 + 1) + (2 + 3)) + ((4 + 5) + (6 + 7)), whichever vectors sit beside it, so a dot
   product's bits do not depend on the tile or cell group that computed it. */
NEO__AVX2 static inline __m256 neo__hsum8x8(__m256 x0, __m256 x1, __m256 x2, __m256 x3, __m256 x4, __m256 x5, __m256 x6, __m256 x7) {
    __m256 g0 = _mm256_hadd_ps(_mm256_hadd_ps(x0, x1), _mm256_hadd_ps(x2, x3)); /* [x0..x3 low halves | high halves] */
    __m256 g1 = _mm256_hadd_ps(_mm256_hadd_ps(x4, x5), _mm256_hadd_ps(x6, x7));
    /* [g0 low | g1 low] + [g0 high | g1 high], by inserts: a 128-bit permute is one slow op on
       some cores, an insert is not */
    return _mm256_add_ps(_mm256_insertf128_ps(g0, _mm256_castps256_ps128(g1), 1),
                         _mm256_insertf128_ps(g1, _mm256_extractf128_ps(g0, 1), 0));
}
/* The same for 4 vectors: lane f of the result is the sum of x[f]'s lanes, in the same order. */
NEO__AVX2 static inline __m128 neo__hsum4x8(__m256 x0, __m256 x1, __m256 x2, __m256 x3) {
    __m256 g = _mm256_hadd_ps(_mm256_hadd_ps(x0, x1), _mm256_hadd_ps(x2, x3));
    return _mm_add_ps(_mm256_castps256_ps128(g), _mm256_extractf128_ps(g, 1));
}
/* acc + k x *m, m: [8], with m read by the FMA itself: where a tile's accumulators and K chunks
   fill the registers, a q chunk loaded once for two cells would need one more (GCC merges two
   loads of one address into one register), so each FMA reads it from L1. Used by passes of more
   than NEO__FMA_MEM_ABOVE dot products: GCC spills with 12 accumulators, 3 K chunks and a q
   chunk, clang does not. */
#if defined(__clang__)
#define NEO__FMA_MEM_ABOVE 12
#else
#define NEO__FMA_MEM_ABOVE 8
#endif
typedef struct neo__f8 {
    float f[8];
} neo__f8;
NEO__AVX2 static inline __m256 neo__fma_mem(__m256 acc, __m256 k, const float *m) {
    __asm__("vfmadd231ps {%2, %1, %0|%0, %1, %2}" : "+x"(acc) : "x"(k), "m"(*(const neo__f8 *)m)); /* AT&T | Intel syntax */
    return acc;
}
/* Scores of NC consecutive cells (rows kr, kr + d, ..) for a tile of NQT queries: NC x NQT
   accumulators, f = c * NQT + i, so each widened K chunk feeds NQT FMAs and, with NC > 1, each q
   chunk NC (held in a register: GCC would otherwise fold its load into every FMA, and the loads,
   not the FMAs, would bound the loop). Every dot product sums its 8-lane chunks in order, then
   its lanes as neo__hsum8x8 does, then the d % 8 tail: the same bits whatever NQT and NC. */
NEO__AVX2 static inline __attribute__((always_inline)) void neo__scores_cells_avx2(float *s, const float *q, const char *kr, neo_type t,
                                                                                     int NQT, int NC, int d, int dm) {
    size_t       es = neo__type_size(t);
    const __m256 z = _mm256_setzero_ps();
    __m256       a[16];
    float        o[16];
NEO__UNROLL(16)
    for (int f = 0; f < 16; f++) a[f] = z;
    for (int j = 0; j < dm; j += 8) {
        __m256 kv[4];
NEO__UNROLL(4)
        for (int c = 0; c < NC; c++) kv[c] = neo__ld8(kr + (size_t)c * d * es, (size_t)j, t);
NEO__UNROLL(8)
        for (int i = 0; i < NQT; i++) {
            __m256 x = _mm256_loadu_ps(q + (size_t)i * d + j);
            if (NC * NQT > NEO__FMA_MEM_ABOVE) {
NEO__UNROLL(4)
                for (int c = 0; c < NC; c++) a[c * NQT + i] = neo__fma_mem(a[c * NQT + i], kv[c], q + (size_t)i * d + j);
                continue;
            }
            if (NC > 1) __asm__("" : "+x"(x));
NEO__UNROLL(4)
            for (int c = 0; c < NC; c++) a[c * NQT + i] = _mm256_fmadd_ps(x, kv[c], a[c * NQT + i]);
        }
    }
    if (NC * NQT <= 4) _mm_storeu_ps(o, neo__hsum4x8(a[0], a[1], a[2], a[3]));
    else _mm256_storeu_ps(o, neo__hsum8x8(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7]));
    if (NC * NQT > 12) _mm256_storeu_ps(o + 8, neo__hsum8x8(a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15]));
    else if (NC * NQT > 8) _mm_storeu_ps(o + 8, neo__hsum4x8(a[8], a[9], a[10], a[11]));
NEO__UNROLL(4)
    for (int c = 0; c < NC; c++)
NEO__UNROLL(8)
        for (int i = 0; i < NQT; i++)
            s[i * NEO__BLOCK + c] = neo__dot_tail(o[c * NQT + i], q + (size_t)i * d, kr + (size_t)c * d * es, t, dm, d);
}
/* Scores of a tile of NQT (1..8) queries over all nk cells, CB at a time, then one at a time:
   a GQA group of up to 8 is one tile (but 7 under GCC, below), so each K element is widened
   once a call. The first tile asks for the rows ahead (neo__prefetch_row) and for the cells' V
   rows: pf is where they go (neo__prefetch_lines), 0 on the other tiles. */
NEO__AVX2 static inline __attribute__((always_inline)) void neo__scores_tile_avx2(float *s, const float *q, const void *k, const void *v,
                                                                                    neo_type t, int NQT, int CB, int nk, int d, int dv,
                                                                                    int pf) {
    size_t es = neo__type_size(t);
    int    dm = d & ~7, b = 0;
    for (; b + CB <= nk; b += CB) {
        const char *kr = (const char *)k + (size_t)b * d * es;
        if (pf) neo__prefetch_cells(kr, (size_t)CB * d * es, (const char *)v + (size_t)b * dv * es, (size_t)CB * dv * es, pf);
        neo__scores_cells_avx2(s + b, q, kr, t, NQT, CB, d, dm);
    }
    for (; b < nk; b++) {
        const char *kr = (const char *)k + (size_t)b * d * es;
        if (pf) neo__prefetch_cells(kr, (size_t)d * es, (const char *)v + (size_t)b * dv * es, (size_t)dv * es, pf);
        neo__scores_cells_avx2(s + b, q, kr, t, NQT, 1, d, dm);
    }
}
/* Tiles of up to 8 queries; the cells a pass (CB) keep NQT x CB accumulators, CB K chunks and a
   q chunk within the 16 registers. 3 and 4 queries take as many cells, up to 3, as let each q
   chunk be loaded once for them all (NQT x CB <= NEO__FMA_MEM_ABOVE): past that every FMA reads
   its q chunk from L1, and on a core that loads two vectors a cycle (AMD Zen 3) those loads, not
   the FMAs, bound the pass. For the same reason GCC's code runs a group of 7 as tiles of 4 and 3
   (each K chunk widened twice, every q chunk in a register); clang's 7-query tile is as fast. */
#define NEO__AVX2_CB(nqt) (NEO__FMA_MEM_ABOVE / (nqt) < 3 ? NEO__FMA_MEM_ABOVE / (nqt) : 3)
#if defined(__clang__)
#define NEO__AVX2_TILE7 7
#else
#define NEO__AVX2_TILE7 4
#endif
NEO__AVX2 static inline __attribute__((always_inline)) void neo__scores_avx2_t(float *s, const float *q, const void *k, const void *v,
                                                                                 neo_type t, int nq, int nk, int d, int dv, int pf) {
    for (int r = 0; r < nq;) {
        float       *sr = s + r * NEO__BLOCK;
        const float *q0 = q + (size_t)r * d;
        int          n = nq - r < 8 ? nq - r : 8, tpf = r == 0 ? pf : 0; /* the first tile asks ahead */
        if (n == 7) n = NEO__AVX2_TILE7;
        switch (n) { /* the tile's shape as constants, so that its loops unroll */
        case 1: neo__scores_tile_avx2(sr, q0, k, v, t, 1, 2, nk, d, dv, tpf); break;
        case 2: neo__scores_tile_avx2(sr, q0, k, v, t, 2, 4, nk, d, dv, tpf); break;
        case 3: neo__scores_tile_avx2(sr, q0, k, v, t, 3, NEO__AVX2_CB(3), nk, d, dv, tpf); break;
        case 4: neo__scores_tile_avx2(sr, q0, k, v, t, 4, NEO__AVX2_CB(4), nk, d, dv, tpf); break;
        case 5: neo__scores_tile_avx2(sr, q0, k, v, t, 5, 2, nk, d, dv, tpf); break;
        case 6: neo__scores_tile_avx2(sr, q0, k, v, t, 6, 2, nk, d, dv, tpf); break;
        case 7: neo__scores_tile_avx2(sr, q0, k, v, t, 7, 2, nk, d, dv, tpf); break;
        default: neo__scores_tile_avx2(sr, q0, k, v, t, 8, 1, nk, d, dv, tpf); break;
        }
        r += n;
    }
}
NEO__AVX2 NEO_ATTN__PRIVATE void neo__scores_avx2(float *s, const float *q, const void *k, const void *v, neo_type t, int nq, int nk,
                                                  int d, int dv, int pf) {
    /* one call per storage type, so each gets its own inlined loop; head_dim stays a variable here
       (docs/BENCHMARKS.md, "head_dim 64 as a constant") */
    if (t == NEO_TYPE_F16) neo__scores_avx2_t(s, q, k, v, NEO_TYPE_F16, nq, nk, d, dv, pf);
    else if (t == NEO_TYPE_BF16) neo__scores_avx2_t(s, q, k, v, NEO_TYPE_BF16, nq, nk, d, dv, pf);
    else neo__scores_avx2_t(s, q, k, v, NEO_TYPE_F32, nq, nk, d, dv, pf);
}
/* expf for x in [-87, 88] to about 2 ulp: 2^n * poly(r), the Cephes polynomial. */
NEO__AVX2 static inline __m256 neo__exp8(__m256 x) {
    x = _mm256_max_ps(_mm256_min_ps(x, _mm256_set1_ps(88.3762626647949f)), _mm256_set1_ps(-87.3365447505531f));
    __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}
NEO__AVX2 NEO_ATTN__PRIVATE float neo__max_avx2(const float *x, int n) {
    if (n < 8) return neo__max_scalar(x, n);
    __m256 v = _mm256_loadu_ps(x);
    int    i = 8;
    for (; i + 8 <= n; i += 8) v = _mm256_max_ps(v, _mm256_loadu_ps(x + i));
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    h = _mm_max_ss(h, _mm_movehdup_ps(h));
    float m = _mm_cvtss_f32(h);
    for (; i < n; i++) m = x[i] > m ? x[i] : m;
    return m;
}
NEO__AVX2 NEO_ATTN__PRIVATE void neo__scale_avx2(float *x, int n, float c) {
    __m256 cv = _mm256_set1_ps(c);
    int    i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), cv));
    neo__scale_scalar(x + i, n - i, c);
}
NEO__AVX2 NEO_ATTN__PRIVATE float neo__exp_sum_avx2(float *x, int n, float m) {
    __m256 mv = _mm256_set1_ps(m), sum = _mm256_setzero_ps();
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 e = neo__exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), mv));
        _mm256_storeu_ps(x + i, e);
        sum = _mm256_add_ps(sum, e);
    }
    return neo__hsum8(sum) + neo__exp_sum_scalar(x + i, n - i, m);
}
NEO__AVX2 NEO_ATTN__PRIVATE int neo__softmax_avx2(float *s, int nq, float *m, float *l, float *acc, int dv) {
    const __m256i ex = _mm256_set1_epi32(0x7f800000);
    __m256i       bad = _mm256_setzero_si256();
    for (int i = 0; i < nq * NEO__BLOCK; i += 8) /* NEO__BLOCK is a multiple of 8 */
        bad = _mm256_or_si256(bad, _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_castps_si256(_mm256_loadu_ps(s + i)), ex), ex));
    if (!_mm256_testz_si256(bad, bad)) return 0;
    for (int r = 0; r < nq; r++) {
        float *x = s + r * NEO__BLOCK, mx = neo__max_avx2(x, NEO__BLOCK);
        if (mx > m[r]) neo__rescale(mx, m + r, l + r, acc + (size_t)r * dv, dv, neo__scale_avx2);
        l[r] += neo__exp_sum_avx2(x, NEO__BLOCK, m[r]);
    }
    return 1;
}
/* acc: columns [j, j + 8 CV) of a tile of NQT queries over nk rows, rows inner: NQT x CV
   accumulators, so each widened V chunk feeds NQT FMAs and each broadcast weight CV. Each output
   sums its rows in order, whatever the tile. */
NEO__AVX2 static inline __attribute__((always_inline)) void neo__pv_cols_avx2(float *o, const float *p, const void *v, neo_type t,
                                                                                int NQT, int CV, int nk, int dv, int j) {
    size_t es = neo__type_size(t);
    __m256 a[16];
NEO__UNROLL(8)
    for (int i = 0; i < NQT; i++)
NEO__UNROLL(4)
        for (int c = 0; c < CV; c++) a[i * CV + c] = _mm256_loadu_ps(o + (size_t)i * dv + j + 8 * c);
    for (int b = 0; b < nk; b++) {
        const char *vr = (const char *)v + (size_t)b * dv * es;
        __m256      vv[4];
NEO__UNROLL(4)
        for (int c = 0; c < CV; c++) vv[c] = neo__ld8(vr, (size_t)j + 8 * c, t);
NEO__UNROLL(8)
        for (int i = 0; i < NQT; i++) {
            __m256 pb = _mm256_set1_ps(p[i * NEO__BLOCK + b]);
NEO__UNROLL(4)
            for (int c = 0; c < CV; c++) a[i * CV + c] = _mm256_fmadd_ps(pb, vv[c], a[i * CV + c]);
        }
    }
NEO__UNROLL(8)
    for (int i = 0; i < NQT; i++)
NEO__UNROLL(4)
        for (int c = 0; c < CV; c++) _mm256_storeu_ps(o + (size_t)i * dv + j + 8 * c, a[i * CV + c]);
}
/* acc of a tile of NQT (1..8) queries over the dm full 8-column chunks, CV chunks a pass, then
   one at a time: a GQA group of up to 8 is one tile (but 7, below), so each V element is widened
   once a call. */
NEO__AVX2 static inline __attribute__((always_inline)) void neo__pv_tile_avx2(float *o, const float *p, const void *v, neo_type t,
                                                                                int NQT, int CV, int nk, int dv, int dm) {
    int j = 0;
    for (; j + 8 * CV <= dm; j += 8 * CV) neo__pv_cols_avx2(o, p, v, t, NQT, CV, nk, dv, j);
    for (; j < dm; j += 8) neo__pv_cols_avx2(o, p, v, t, NQT, 1, nk, dv, j);
}
/* Tiles of up to 8 queries; the chunks a pass (CV) keep NQT x CV accumulators, CV V chunks and a
   broadcast weight within the 16 registers. A group of 7 runs as tiles of 4 and 3 (each V chunk
   widened twice): a 7-query tile has room for one chunk a pass, so its 7 accumulator chains are
   fewer than the FMA units' latency needs, and 8 loads a pass feed 7 FMAs. */
NEO__AVX2 static inline __attribute__((always_inline)) void neo__pv_avx2_t(float *acc, const float *p, const void *v, neo_type t,
                                                                             int nq, int nk, int dv) {
    int dm = dv & ~7;
    for (int r = 0; r < nq;) {
        float       *o = acc + (size_t)r * dv;
        const float *pr = p + r * NEO__BLOCK;
        int          n = nq - r < 8 ? nq - r : 8;
        if (n == 7) n = 4;
        switch (n) { /* the tile's shape as constants, so that its loops unroll */
        case 1: neo__pv_tile_avx2(o, pr, v, t, 1, 4, nk, dv, dm); break;
        case 2: neo__pv_tile_avx2(o, pr, v, t, 2, 4, nk, dv, dm); break;
        case 3: neo__pv_tile_avx2(o, pr, v, t, 3, 3, nk, dv, dm); break;
        case 4: neo__pv_tile_avx2(o, pr, v, t, 4, 2, nk, dv, dm); break;
        case 5: neo__pv_tile_avx2(o, pr, v, t, 5, 2, nk, dv, dm); break;
        case 6: neo__pv_tile_avx2(o, pr, v, t, 6, 2, nk, dv, dm); break;
        default: neo__pv_tile_avx2(o, pr, v, t, 8, 1, nk, dv, dm); break;
        }
        r += n;
    }
    if (dm < dv) neo__pv_cols(acc, p, v, t, nq, nk, dv, dm);
}
NEO__AVX2 NEO_ATTN__PRIVATE void neo__pv_avx2(float *acc, const float *p, const void *v, neo_type t, int nq, int nk, int dv) {
    if (t == NEO_TYPE_F16) neo__pv_avx2_t(acc, p, v, NEO_TYPE_F16, nq, nk, dv);
    else if (t == NEO_TYPE_BF16) neo__pv_avx2_t(acc, p, v, NEO_TYPE_BF16, nq, nk, dv);
    else neo__pv_avx2_t(acc, p, v, NEO_TYPE_F32, nq, nk, dv);
}

/* --- AVX-512 F + BW + VL: masked loads make every tail one more iteration --- */
#define NEO__AVX512 NEO__TARGET("avx512f,avx512bw,avx512vl,avx2,fma,f16c")
NEO__AVX512 static inline __mmask16 neo__mask16(int r) { return (__mmask16)(r >= 16 ? 0xffffu : r <= 0 ? 0u : (1u << r) - 1u); }
/* up to 16 elements (mask m) of p (type t) from element i, widened; masked lanes are 0 */
NEO__AVX512 static inline __m512 neo__ld16(const void *p, size_t i, __mmask16 m, neo_type t) {
    if (t == NEO_TYPE_F32) return _mm512_maskz_loadu_ps(m, (const float *)p + i);
    __m256i h = _mm256_maskz_loadu_epi16(m, (const uint16_t *)p + i);
    if (t == NEO_TYPE_F16) return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}
NEO__AVX512 NEO_ATTN__PRIVATE float neo__dot_avx512(const float *a, const float *b, int n) {
    __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
    int i = 0;
    for (; i + 32 <= n; i += 32) {
        s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), s0);
        s1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(b + i + 16), s1);
    }
    for (; i < n; i += 16) {
        __mmask16 m = neo__mask16(n - i);
        s0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i), s0);
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
}
/* [sum a0, sum a1, sum a2, sum a3] */
NEO__AVX512 static inline __m128 neo__hsum4x16(__m512 a0, __m512 a1, __m512 a2, __m512 a3) {
#define NEO__HALF(a) _mm256_add_ps(_mm512_castps512_ps256(a), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1)))
    __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(NEO__HALF(a0), NEO__HALF(a1)), _mm256_hadd_ps(NEO__HALF(a2), NEO__HALF(a3)));
#undef NEO__HALF
    return _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
}
/* The lane sums of 16 vectors in one: lane f of the result is the sum of x[NEO__HSUM16_SRC(f)],
   with the lane pairs added in neo__hsum4x16's order (+8, then adjacent, then +2, then +4), so
   the two give the same bits. 30 shuffles and 15 adds for 16 sums where four neo__hsum4x16 take
   44 and 32 narrower adds: Intel cores run every shuffle on one port, so at head_dim 64 (4 FMAs a
   dot product) the sums cost about as much as the FMAs. */
#define NEO__HSUM16_SRC(f) ((((f) >> 3) << 3) | (((f) & 3) << 1) | (((f) >> 2) & 1))
NEO__AVX512 static inline __attribute__((always_inline)) __m512 neo__hsum16x16(const __m512 *x) {
    __m512 p[8], r[4];
    for (int k = 0; k < 8; k++) /* lanes 0-7: x[2k] (l) + (l + 8); lanes 8-15: x[2k + 1] */
        p[k] = _mm512_add_ps(_mm512_shuffle_f32x4(x[2 * k], x[2 * k + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                             _mm512_shuffle_f32x4(x[2 * k], x[2 * k + 1], _MM_SHUFFLE(3, 2, 3, 2)));
    for (int k = 0; k < 4; k++) /* adjacent lanes, as hadd */
        r[k] = _mm512_add_ps(_mm512_shuffle_ps(p[2 * k], p[2 * k + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                             _mm512_shuffle_ps(p[2 * k], p[2 * k + 1], _MM_SHUFFLE(3, 1, 3, 1)));
    for (int k = 0; k < 2; k++) /* pairs of those: each 128-bit lane now holds four inputs' quarter sums */
        r[k] = _mm512_add_ps(_mm512_shuffle_ps(r[2 * k], r[2 * k + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                             _mm512_shuffle_ps(r[2 * k], r[2 * k + 1], _MM_SHUFFLE(3, 1, 3, 1)));
    return _mm512_add_ps(_mm512_shuffle_f32x4(r[0], r[1], _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm512_shuffle_f32x4(r[0], r[1], _MM_SHUFFLE(3, 1, 3, 1)));
}
/* Scores of one tile of NQT queries, CB cells at a time in CB x NQT <= 16 accumulators (every q
   and K load feeds NQT or CB FMAs), then single cells: up to 4 queries take 4 cells, 5 to 8 take
   2, so that a GQA group of up to 8 is one tile and each K element is widened once. Every dot
   product sums its 16-lane chunks in order and its lanes in neo__hsum4x16's order (which sums
   each of its four inputs alike, whatever the others; neo__hsum16x16 too), so a score does not
   depend on which tile, cell group or path computed it. */
NEO__AVX512 static inline __attribute__((always_inline)) void neo__scores_tile_avx512(float *s, const float *q, const void *k,
                                                                                        const void *v, neo_type t, int NQT, int CB,
                                                                                        int nk, int d, int dv, int pf) {
    size_t       es = neo__type_size(t);
    int          dm = d & ~15; /* full 16-lane chunks take plain loads, which fold into the FMAs */
    int          bg = dm == d ? nk / CB * CB : 0;
    const __m512 z = _mm512_setzero_ps();
    for (int b = 0; b < bg; b += CB) {
        const char *k0 = (const char *)k + (size_t)b * d * es;
        __m512      a[4][8];
        if (pf) neo__prefetch_cells(k0, (size_t)CB * d * es, (const char *)v + (size_t)b * dv * es, (size_t)CB * dv * es, pf);
NEO__UNROLL(4)
        for (int c = 0; c < CB; c++)
NEO__UNROLL(8)
            for (int i = 0; i < NQT; i++) a[c][i] = z;
        for (int j = 0; j < d; j += 16) {
            __m512 x[8], kv[4];
            /* each q vector feeds CB FMAs: kept in a register (GCC would fold its load into each) */
NEO__UNROLL(8)
            for (int i = 0; i < NQT; i++) {
                x[i] = _mm512_loadu_ps(q + (size_t)i * d + j);
                __asm__("" : "+v"(x[i]));
            }
NEO__UNROLL(4)
            for (int c = 0; c < CB; c++) kv[c] = neo__ld16(k0 + (size_t)c * d * es, (size_t)j, 0xffff, t);
NEO__UNROLL(4)
            for (int c = 0; c < CB; c++)
NEO__UNROLL(8)
                for (int i = 0; i < NQT; i++) a[c][i] = _mm512_fmadd_ps(x[i], kv[c], a[c][i]);
        }
        if (CB * NQT > 8) { /* 2 cells x 5-8 queries, 4 x 3-4; lane i * CB + c: query i, cell b + c */
            __m512 x[16];
NEO__UNROLL(16)
            for (int f = 0; f < 16; f++) x[NEO__HSUM16_SRC(f)] = f < CB * NQT ? a[f % CB][f / CB] : z;
            const __m512 h = neo__hsum16x16(x);
            /* quarter by quarter: masked 512-bit stores cost more than four plain 128-bit ones */
            const __m128 hq[4] = {_mm512_castps512_ps128(h), _mm512_extractf32x4_ps(h, 1), _mm512_extractf32x4_ps(h, 2),
                                  _mm512_extractf32x4_ps(h, 3)};
NEO__UNROLL(4)
            for (int u = 0; u * 4 < CB * NQT; u++) {
                const __m128 o = hq[u];
                if (CB == 4) _mm_storeu_ps(s + u * NEO__BLOCK + b, o);
                else {
                    /* __m64 may alias floats (a double store would not) */
                    _mm_storel_pi((__m64 *)(void *)(s + 2 * u * NEO__BLOCK + b), o);
                    if (2 * u + 1 < NQT) _mm_storeh_pi((__m64 *)(void *)(s + (2 * u + 1) * NEO__BLOCK + b), o);
                }
            }
        } else { /* 1-2 queries x 4 cells: a query's four cells a sum */
NEO__UNROLL(4)
            for (int i = 0; i < NQT; i++) _mm_storeu_ps(s + i * NEO__BLOCK + b, neo__hsum4x16(a[0][i], a[1][i], a[2][i], a[3][i]));
        }
    }
    for (int b = bg; b < nk; b++) {
        const char *kr = (const char *)k + (size_t)b * d * es;
        __m512      a[8];
        if (pf) neo__prefetch_cells(kr, (size_t)d * es, (const char *)v + (size_t)b * dv * es, (size_t)dv * es, pf);
NEO__UNROLL(8)
        for (int i = 0; i < NQT; i++) a[i] = z;
        for (int j = 0; j < d; j += 16) {
            __mmask16 m = neo__mask16(d - j);
            __m512    kv = neo__ld16(kr, (size_t)j, m, t);
NEO__UNROLL(8)
            for (int i = 0; i < NQT; i++) a[i] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, q + (size_t)i * d + j), kv, a[i]);
        }
NEO__UNROLL(2)
        for (int i0 = 0; i0 < NQT; i0 += 4) {
            float o[4];
            _mm_storeu_ps(o, neo__hsum4x16(a[i0], i0 + 1 < NQT ? a[i0 + 1] : z, i0 + 2 < NQT ? a[i0 + 2] : z, i0 + 3 < NQT ? a[i0 + 3] : z));
            for (int i = i0; i < NQT && i < i0 + 4; i++) s[i * NEO__BLOCK + b] = o[i - i0];
        }
    }
}
NEO__AVX512 static inline __attribute__((always_inline)) void neo__scores_avx512_t(float *s, const float *q, const void *k, const void *v,
                                                                                   neo_type t, int nq, int nk, int d, int dv, int pf) {
    for (int r = 0; r < nq;) {
        float       *sr = s + r * NEO__BLOCK;
        const float *q0 = q + (size_t)r * d;
        int          n = nq - r < 8 ? nq - r : 8, tpf = r == 0 ? pf : 0; /* the first tile asks ahead */
        switch (n) { /* the tile's shape as constants, so that its loops unroll */
        case 1: neo__scores_tile_avx512(sr, q0, k, v, t, 1, 4, nk, d, dv, tpf); break;
        case 2: neo__scores_tile_avx512(sr, q0, k, v, t, 2, 4, nk, d, dv, tpf); break;
        case 3: neo__scores_tile_avx512(sr, q0, k, v, t, 3, 4, nk, d, dv, tpf); break;
        case 4: neo__scores_tile_avx512(sr, q0, k, v, t, 4, 4, nk, d, dv, tpf); break;
        case 5: neo__scores_tile_avx512(sr, q0, k, v, t, 5, 2, nk, d, dv, tpf); break;
        case 6: neo__scores_tile_avx512(sr, q0, k, v, t, 6, 2, nk, d, dv, tpf); break;
        case 7: neo__scores_tile_avx512(sr, q0, k, v, t, 7, 2, nk, d, dv, tpf); break;
        default: neo__scores_tile_avx512(sr, q0, k, v, t, 8, 2, nk, d, dv, tpf); break;
        }
        r += n;
    }
}
NEO__AVX512 static inline __attribute__((always_inline)) void neo__scores_avx512_types(float *s, const float *q, const void *k,
                                                                                         const void *v, neo_type t, int nq, int nk,
                                                                                         int d, int dv, int pf) {
    if (t == NEO_TYPE_F16) neo__scores_avx512_t(s, q, k, v, NEO_TYPE_F16, nq, nk, d, dv, pf);
    else if (t == NEO_TYPE_BF16) neo__scores_avx512_t(s, q, k, v, NEO_TYPE_BF16, nq, nk, d, dv, pf);
    else neo__scores_avx512_t(s, q, k, v, NEO_TYPE_F32, nq, nk, d, dv, pf);
}
/* head_dim 64, and 128 in the 16-bit types, also as constants: a dot product is then four or
   eight 16-lane chunks, and the loop over them, with a pointer a query row, cost a fair part of
   its FMAs; unrolled, a tile's q rows are offsets of one pointer. The operations and their order
   are the same, so are the scores' bits. */
NEO__AVX512 NEO_ATTN__PRIVATE void neo__scores_avx512(float *s, const float *q, const void *k, const void *v, neo_type t, int nq,
                                                      int nk, int d, int dv, int pf) {
    if (d == 64) neo__scores_avx512_types(s, q, k, v, t, nq, nk, 64, dv, pf);
    else if (d == 128 && t == NEO_TYPE_F16) neo__scores_avx512_t(s, q, k, v, NEO_TYPE_F16, nq, nk, 128, dv, pf);
    else if (d == 128 && t == NEO_TYPE_BF16) neo__scores_avx512_t(s, q, k, v, NEO_TYPE_BF16, nq, nk, 128, dv, pf);
    else neo__scores_avx512_types(s, q, k, v, t, nq, nk, d, dv, pf);
}
NEO__AVX512 static inline __m512 neo__exp16(__m512 x) {
    x = _mm512_max_ps(_mm512_min_ps(x, _mm512_set1_ps(88.3762626647949f)), _mm512_set1_ps(-87.3365447505531f));
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    return _mm512_scalef_ps(p, n);
}
NEO__AVX512 NEO_ATTN__PRIVATE float neo__max_avx512(const float *x, int n) {
    __m512 v = _mm512_set1_ps(x[0]);
    for (int i = 0; i < n; i += 16) {
        __mmask16 k = neo__mask16(n - i);
        v = _mm512_mask_max_ps(v, k, v, _mm512_maskz_loadu_ps(k, x + i));
    }
    return _mm512_reduce_max_ps(v);
}
NEO__AVX512 NEO_ATTN__PRIVATE void neo__scale_avx512(float *x, int n, float c) {
    __m512 cv = _mm512_set1_ps(c);
    for (int i = 0; i < n; i += 16) {
        __mmask16 k = neo__mask16(n - i);
        _mm512_mask_storeu_ps(x + i, k, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, x + i), cv));
    }
}
NEO__AVX512 NEO_ATTN__PRIVATE float neo__exp_sum_avx512(float *x, int n, float m) {
    __m512 mv = _mm512_set1_ps(m), sum = _mm512_setzero_ps();
    for (int i = 0; i < n; i += 16) {
        __mmask16 k = neo__mask16(n - i);
        __m512 e = neo__exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + i), mv));
        _mm512_mask_storeu_ps(x + i, k, e);
        sum = _mm512_mask_add_ps(sum, k, sum, e);
    }
    return _mm512_reduce_add_ps(sum);
}
NEO__AVX512 NEO_ATTN__PRIVATE int neo__softmax_avx512(float *s, int nq, float *m, float *l, float *acc, int dv) {
    const __m512i ex = _mm512_set1_epi32(0x7f800000);
    __mmask16     bad = 0;
    for (int i = 0; i < nq * NEO__BLOCK; i += 16) /* NEO__BLOCK is a multiple of 16 */
        bad |= _mm512_cmpeq_epi32_mask(_mm512_and_si512(_mm512_castps_si512(_mm512_loadu_ps(s + i)), ex), ex);
    if (bad) return 0;
    for (int r = 0; r < nq; r++) {
        float *x = s + r * NEO__BLOCK, mx = neo__max_avx512(x, NEO__BLOCK);
        if (mx > m[r]) neo__rescale(mx, m + r, l + r, acc + (size_t)r * dv, dv, neo__scale_avx512);
        l[r] += neo__exp_sum_avx512(x, NEO__BLOCK, m[r]);
    }
    return 1;
}
/* acc of one tile of NQT queries x CV 16-column vectors, rows inner: each V row is read front to
   back and every widened V vector feeds NQT FMAs. Up to 4 queries take 4 vectors (64 columns) a
   pass, 5 to 8 take 2 (32 columns), so that a GQA group of up to 8 is one tile and each V
   element is widened once (tiles of 4 + 3 widened it twice): NQT x CV accumulators, CV V vectors
   and NQT broadcast weights stay within the 32 registers. Each output sums its rows in order,
   whatever the tile. The rows of one pass, into a[NQT][CV]; the column masks m are constants in
   every full pass, so that the V loads fold into their widening (a masked load is an instruction
   of its own). */
NEO__AVX512 static inline __attribute__((always_inline)) void neo__pv_rows_avx512(__m512 (*a)[4], const float *p, const char *v,
                                                                                    neo_type t, int NQT, int CV, int nk, int dv,
                                                                                    int j, const __mmask16 *m) {
    size_t es = neo__type_size(t);
    for (int b = 0; b < nk; b++) {
        const char *vr = v + (size_t)b * dv * es;
        __m512      vv[4], pp[8];
NEO__UNROLL(4)
        for (int c = 0; c < CV; c++) vv[c] = neo__ld16(vr, (size_t)j + 16 * c, m[c], t);
NEO__UNROLL(8)
        for (int i = 0; i < NQT; i++) pp[i] = _mm512_set1_ps(p[i * NEO__BLOCK + b]);
NEO__UNROLL(8)
        for (int i = 0; i < NQT; i++)
NEO__UNROLL(4)
            for (int c = 0; c < CV; c++) a[i][c] = _mm512_fmadd_ps(pp[i], vv[c], a[i][c]);
    }
}
NEO__AVX512 static inline __attribute__((always_inline)) void neo__pv_tile_avx512(float *o, const float *p, const void *v, neo_type t,
                                                                                    int NQT, int CV, int nk, int dv) {
    static const __mmask16 full[4] = {0xffff, 0xffff, 0xffff, 0xffff};
    for (int j = 0; j < dv; j += 16 * CV) {
        __mmask16 m[4];
        __m512    a[8][4];
NEO__UNROLL(4)
        for (int c = 0; c < CV; c++) {
            m[c] = neo__mask16(dv - j - 16 * c);
NEO__UNROLL(8)
            for (int i = 0; i < NQT; i++) a[i][c] = _mm512_maskz_loadu_ps(m[c], o + (size_t)i * dv + j + 16 * c);
        }
        if (j + 16 * CV <= dv) neo__pv_rows_avx512(a, p, (const char *)v, t, NQT, CV, nk, dv, j, full);
        else neo__pv_rows_avx512(a, p, (const char *)v, t, NQT, CV, nk, dv, j, m);
NEO__UNROLL(4)
        for (int c = 0; c < CV; c++)
NEO__UNROLL(8)
            for (int i = 0; i < NQT; i++) _mm512_mask_storeu_ps(o + (size_t)i * dv + j + 16 * c, m[c], a[i][c]);
    }
}
NEO__AVX512 static inline __attribute__((always_inline)) void neo__pv_avx512_t(float *acc, const float *p, const void *v, neo_type t, int nq, int nk, int dv) {
    for (int r = 0; r < nq;) {
        float       *o = acc + (size_t)r * dv;
        const float *pr = p + r * NEO__BLOCK;
        int          n = nq - r < 8 ? nq - r : 8;
        switch (n) { /* the tile's shape as constants, so that its loops unroll */
        case 1: neo__pv_tile_avx512(o, pr, v, t, 1, 4, nk, dv); break;
        case 2: neo__pv_tile_avx512(o, pr, v, t, 2, 4, nk, dv); break;
        case 3: neo__pv_tile_avx512(o, pr, v, t, 3, 4, nk, dv); break;
        case 4: neo__pv_tile_avx512(o, pr, v, t, 4, 4, nk, dv); break;
        case 5: neo__pv_tile_avx512(o, pr, v, t, 5, 2, nk, dv); break;
        case 6: neo__pv_tile_avx512(o, pr, v, t, 6, 2, nk, dv); break;
        case 7: neo__pv_tile_avx512(o, pr, v, t, 7, 2, nk, dv); break;
        default: neo__pv_tile_avx512(o, pr, v, t, 8, 2, nk, dv); break;
        }
        r += n;
    }
}
NEO__AVX512 NEO_ATTN__PRIVATE void neo__pv_avx512(float *acc, const float *p, const void *v, neo_type t, int nq, int nk, int dv) {
    if (t == NEO_TYPE_F16) neo__pv_avx512_t(acc, p, v, NEO_TYPE_F16, nq, nk, dv);
    else if (t == NEO_TYPE_BF16) neo__pv_avx512_t(acc, p, v, NEO_TYPE_BF16, nq, nk, dv);
    else neo__pv_avx512_t(acc, p, v, NEO_TYPE_F32, nq, nk, dv);
}
/* --- AMX: bfloat16 tile products; the softmax steps stay on the AVX-512 kernels ---
   TDPBF16PS multiplies bfloat16 pairs exactly and sums them in float32, 16 x 16 outputs from 16
   x 32 inputs an instruction, at many times the FMA rate. Each operand is split into bfloat16
   parts that sum to it: an f16 element is hi + lo exactly (11 significant bits, 8 a part), a
   float32 query hi + mid + lo exactly (24 bits; the parts are truncations, so each remainder
   is exact), a weight p hi + lo to 2^-16 of p (the last part rounded to nearest). The tiles
   multiply every pair of parts but the f16 lo part times the query's lo part (about 2^-22 of
   the product at most), so scores keep float32 accuracy and p . v is off by at most 2^-16 of
   each weight, well inside the error bound. The tiles and the bfloat16 conversion read
   bfloat16 values below 2^-126 as 0: a bf16 cache of such values alone attends to 0.
     scores: S^T[16 cells][16 queries] = K[16 cells][32 dims] . Q^T[32 dims][16 queries]
     p . v:  O[16 queries][16 columns] += P[16 queries][32 cells] . V[32 cells][16 columns]
   so K rows are tile rows as stored (bf16) or as split (f16), only the 16 x 16 scores are
   transposed, and V's rows are paired as the B operand's layout wants (element (r, 2c + i) is
   cell 2r + i, column c). A task's queries are split once (neo__tile_begin). Tile rows past a
   call's queries or cells hold zeros or earlier values: an output depends only on its own row
   of A and column of B, so those rows reach no output that is kept. Splitting an f16 K or V
   element costs about as many vector instructions as the FMAs of a GQA group of 8 on it, so
   the tiles pay only when a task carries NEO__TILE_MIN_QUERIES queries or more (prefill
   blocks of 48 to 64 queries, GQA groups of 48 or more): those tasks, with f16 or bf16 KV, head_dim a multiple of 32 and
   head_dim_v of 16 (up to 512), take this path; decode with smaller groups keeps the AVX-512
   kernels. A task's queries depend on the call and the layer, never on the thread count, and
   so do the results. Tiles: tmm0 the output, tmm1-2 A's parts, tmm3-5 B's parts; every tile
   16 rows of 64 bytes. */
#if defined(__linux__) && !defined(NEO_ATTN_NO_AMX) && (defined(__clang__) ? __clang_major__ >= 12 : __GNUC__ >= 10)
#define NEO__AMX_BUILD 1
#define NEO__AMX NEO__TARGET("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,avx2,fma,f16c")
/* The tile instructions by mnemonic (the assembler knows them; no compiler flag is needed). They
   read and write memory the compiler does not see, hence the clobbers. */
#define NEO__TILE_LOAD(t, p, stride) __asm__ volatile("tileloadd (%0,%1,1), %%tmm" #t ::"r"(p), "r"((long)(stride)) : "memory")
#define NEO__TILE_STORE(t, p, stride)                                                                                          \
    __asm__ volatile("tilestored %%tmm" #t ", (%0,%1,1)" ::"r"(p), "r"((long)(stride)) : "memory")
#define NEO__TILE_ZERO(t) __asm__ volatile("tilezero %%tmm" #t ::)
#define NEO__TILE_DP(c, a, b) __asm__ volatile("tdpbf16ps %%tmm" #b ", %%tmm" #a ", %%tmm" #c ::)
/* arch_prctl(code, arg) (x86-64 Linux system call 158): Linux lends a thread the tile
   registers' state only after the process asks for it (ARCH_REQ_XCOMP_PERM 0x1023, XTILEDATA =
   state component 18); ARCH_GET_XCOMP_SUPP (0x1021) says whether the kernel can, asking nothing. */
NEO_ATTN__PRIVATE long neo__arch_prctl(long code, unsigned long arg) {
    long r = 158;
    __asm__ volatile("syscall" : "+a"(r) : "D"(code), "S"(arg) : "rcx", "r11", "memory");
    return r;
}
/* 32 float32 as bfloat16 in order (x0's 16, then x1's), rounded to nearest */
NEO__AMX static inline __m512i neo__bf16x32(__m512 x0, __m512 x1) { return (__m512i)_mm512_cvtne2ps_pbh(x1, x0); }
/* x with the low 16 bits of each element cleared: its leading bfloat16 part, truncated */
NEO__AMX static inline __m512 neo__bf16_hi(__m512 x) {
    return _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32((int)0xffff0000u)));
}
/* lane i: 16 i, the offsets of a 16 x 16 tile's column in 4-byte elements */
NEO__AMX static inline __m512i neo__tile_column(void) {
    return _mm512_setr_epi32(0, 16, 32, 48, 64, 80, 96, 112, 128, 144, 160, 176, 192, 208, 224, 240);
}

NEO__AMX NEO_ATTN__PRIVATE void neo__tile_begin(void *w, const float *q, int nq, int d, int dv) {
    neo__tile_area ar;
    int            nc = d / 32;
    neo__tile_layout(w, d, dv, nq, &ar);
    memset(ar.cfg, 0, 64);
    ar.cfg[0] = 1; /* palette 1 */
    for (int t = 0; t < 6; t++) {
        ar.cfg[16 + 2 * t] = 64; /* bytes a row */
        ar.cfg[48 + t] = 16;     /* rows */
    }
    __asm__ volatile("ldtilecfg %0" ::"m"(*(const unsigned char(*)[64])ar.cfg));
    memset(ar.p, 0, 4096 + (size_t)dv * 256 + (size_t)dv * 64); /* p, v and acc rows a call leaves alone start as zeros */
    memset(ar.q, 0, (size_t)(nq + 15) / 16 * (size_t)d * 96);   /* and the B columns past the last query */
    for (int r = 0; r < nq; r++) /* query r is column r % 16 of its group's B tiles, dims 2j and 2j + 1 of a chunk in row j */
        for (int c = 0; c < nc; c++) {
            __m512 x0 = _mm512_loadu_ps(q + (size_t)r * d + (size_t)c * 32),
                   x1 = _mm512_loadu_ps(q + (size_t)r * d + (size_t)c * 32 + 16);
            uint32_t *dst = ar.q + (size_t)((r / 16) * nc + c) * 3 * 256 + (size_t)(r % 16);
            for (int k = 0; k < 3; k++, dst += 256) { /* truncated parts, so the rounding conversion keeps them exactly */
                __m512 h0 = neo__bf16_hi(x0), h1 = neo__bf16_hi(x1);
                _mm512_i32scatter_epi32(dst, neo__tile_column(), neo__bf16x32(h0, h1), 4);
                x0 = _mm512_sub_ps(x0, h0), x1 = _mm512_sub_ps(x1, h1);
            }
        }
}
NEO_ATTN__PRIVATE void neo__tile_end(void) { __asm__ volatile("tilerelease" ::); }

/* K rows [0, n) of a 16-cell group as A tiles (rows n.. zero): f16 split hi + lo, bf16 copied */
NEO__AMX static void neo__tile_split_k(uint16_t *dst, const char *k, neo_type t, int n, int d) {
    for (int i = 0; i < 16; i++) {
        const char *row = k + (size_t)i * d * 2;
        for (int c = 0; c < d / 32; c++) {
            __m512i *hi = (__m512i *)(void *)(dst + ((size_t)c * 2 * 16 + (size_t)i) * 32), *lo = hi + 16;
            if (i >= n)
                *hi = *lo = _mm512_setzero_si512();
            else if (t == NEO_TYPE_BF16)
                *hi = _mm512_loadu_si512(row + c * 64);
            else {
                __m512 x0 = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)(row + c * 64)));
                __m512 x1 = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)(row + c * 64 + 32)));
                __m512 h0 = neo__bf16_hi(x0), h1 = neo__bf16_hi(x1);
                *hi = neo__bf16x32(h0, h1);
                *lo = neo__bf16x32(_mm512_sub_ps(x0, h0), _mm512_sub_ps(x1, h1));
            }
        }
    }
}

/* s: [nq][NEO__BLOCK] <- the task's queries (w, from neo__tile_begin) . k: [nk][d] */
NEO__AMX NEO_ATTN__PRIVATE void neo__tile_scores(float *s, void *w, const void *k, const void *v, neo_type t, int nq, int nk,
                                                 int d, int dv, int pf) {
    neo__tile_area ar;
    int            nc = d / 32;
    neo__tile_layout(w, d, dv, nq, &ar);
    for (int b0 = 0; b0 < nk; b0 += 16) {
        int         n = nk - b0 < 16 ? nk - b0 : 16, direct = t == NEO_TYPE_BF16 && n == 16;
        const char *kb = (const char *)k + (size_t)b0 * d * 2;
        neo__prefetch_row(kb, (size_t)n * d * 2, pf);
        neo__prefetch_lines((const char *)v + (size_t)b0 * dv * 2, (size_t)n * dv * 2, pf);
        if (!direct) neo__tile_split_k(ar.k, kb, t, n, d);
        for (int g = 0; g * 16 < nq; g++) {
            NEO__TILE_ZERO(0);
            for (int c = 0; c < nc; c++) {
                const uint32_t *qp = ar.q + (size_t)(g * nc + c) * 3 * 256;
                const uint16_t *kp = ar.k + (size_t)c * 2 * 512;
                if (direct)
                    NEO__TILE_LOAD(1, kb + c * 64, d * 2);
                else
                    NEO__TILE_LOAD(1, kp, 64);
                NEO__TILE_LOAD(3, qp, 64);
                NEO__TILE_LOAD(4, qp + 256, 64);
                NEO__TILE_LOAD(5, qp + 512, 64);
                NEO__TILE_DP(0, 1, 3);
                NEO__TILE_DP(0, 1, 4);
                NEO__TILE_DP(0, 1, 5);
                if (t == NEO_TYPE_F16) {
                    NEO__TILE_LOAD(2, kp + 512, 64);
                    NEO__TILE_DP(0, 2, 3);
                    NEO__TILE_DP(0, 2, 4);
                }
            }
            NEO__TILE_STORE(0, ar.c, 64);
            for (int r = 0; r < 16 && g * 16 + r < nq; r++) /* s[query][cell] = c[cell][query] */
                _mm512_mask_storeu_ps(s + (size_t)(g * 16 + r) * NEO__BLOCK + b0, neo__mask16(n),
                                      _mm512_i32gather_ps(_mm512_add_epi32(neo__tile_column(), _mm512_set1_epi32(r)), ar.c, 4));
        }
    }
}

/* A block's V rows [0, nk) as B tiles, cells paired (rows nk.. zero): f16 split hi + lo (an
   element that is not finite keeps it in hi, lo 0, as float32 arithmetic would), bf16 one part */
NEO__AMX static void neo__tile_split_v(uint32_t *dst, const char *v, neo_type t, int nk, int dv) {
    const __m256i z = _mm256_setzero_si256();
    for (int ch = 0; ch * 32 < nk; ch++)
        for (int j = 0; j < dv / 16; j++)
            for (int r = 0; r < 16; r++) {
                int            c0 = ch * 32 + 2 * r;
                const __m256i *ra = (const __m256i *)(const void *)(v + ((size_t)c0 * dv + (size_t)j * 16) * 2);
                const __m256i *rb = (const __m256i *)(const void *)((const char *)ra + (size_t)dv * 2);
                __m256i        a = c0 < nk ? _mm256_loadu_si256(ra) : z, b = c0 + 1 < nk ? _mm256_loadu_si256(rb) : z;
                __m512i       *hi = (__m512i *)(void *)(dst + ((size_t)(ch * (dv / 16) + j) * 2 * 16 + (size_t)r) * 16),
                        *lo = hi + 16;
                if (t == NEO_TYPE_BF16) {
                    *hi = _mm512_or_si512(_mm512_cvtepu16_epi32(a), _mm512_slli_epi32(_mm512_cvtepu16_epi32(b), 16));
                    continue;
                }
                __m512 xa = _mm512_cvtph_ps(a), xb = _mm512_cvtph_ps(b), ha = neo__bf16_hi(xa), hb = neo__bf16_hi(xb);
                __m512 la = _mm512_maskz_sub_ps(_knot_mask16(_mm512_fpclass_ps_mask(xa, 0x99)), xa, ha);
                __m512 lb = _mm512_maskz_sub_ps(_knot_mask16(_mm512_fpclass_ps_mask(xb, 0x99)), xb, hb);
                *hi = _mm512_or_si512(_mm512_srli_epi32(_mm512_castps_si512(ha), 16), _mm512_castps_si512(hb));
                *lo = _mm512_or_si512(_mm512_srli_epi32(_mm512_castps_si512(la), 16), _mm512_castps_si512(lb));
            }
}

/* acc: [nq][dv] += p: [nq][NEO__BLOCK] x v: [nk][dv] */
NEO__AMX NEO_ATTN__PRIVATE void neo__tile_pv(float *acc, const float *p, void *w, const void *v, neo_type t, int nq, int nk,
                                             int dv) {
    neo__tile_area ar;
    int            nch = (nk + 31) / 32;
    neo__tile_layout(w, 32, dv, nq, &ar);
    neo__tile_split_v(ar.v, (const char *)v, t, nk, dv);
    for (int g = 0; g * 16 < nq; g++) {
        int nr = nq - g * 16 < 16 ? nq - g * 16 : 16;
        for (int r = 0; r < nr; r++) { /* the group's weights as A tiles, cells past nk zero */
            memcpy(ar.acc + (size_t)r * dv, acc + (size_t)(g * 16 + r) * dv, sizeof(float) * (size_t)dv);
            for (int ch = 0; ch < nch; ch++) {
                const float *pr = p + (size_t)(g * 16 + r) * NEO__BLOCK + ch * 32;
                __m512       x0 = _mm512_maskz_loadu_ps(neo__mask16(nk - ch * 32), pr);
                __m512       x1 = _mm512_maskz_loadu_ps(neo__mask16(nk - ch * 32 - 16), pr + 16);
                __m512       h0 = neo__bf16_hi(x0), h1 = neo__bf16_hi(x1);
                __m512i     *hi = (__m512i *)(void *)(ar.p + ((size_t)ch * 2 * 16 + (size_t)r) * 32);
                hi[0] = neo__bf16x32(h0, h1);
                hi[16] = neo__bf16x32(_mm512_sub_ps(x0, h0), _mm512_sub_ps(x1, h1));
            }
        }
        for (int j = 0; j < dv / 16; j++) {
            NEO__TILE_LOAD(0, ar.acc + j * 16, dv * 4);
            for (int ch = 0; ch < nch; ch++) {
                const uint16_t *pp = ar.p + (size_t)ch * 2 * 512;
                const uint32_t *vp = ar.v + (size_t)(ch * (dv / 16) + j) * 2 * 256;
                NEO__TILE_LOAD(1, pp, 64);
                NEO__TILE_LOAD(2, pp + 512, 64);
                NEO__TILE_LOAD(3, vp, 64);
                NEO__TILE_DP(0, 1, 3);
                if (t == NEO_TYPE_F16) {
                    NEO__TILE_LOAD(4, vp + 256, 64);
                    NEO__TILE_DP(0, 1, 4);
                }
                NEO__TILE_DP(0, 2, 3);
                if (t == NEO_TYPE_F16) NEO__TILE_DP(0, 2, 4);
            }
            NEO__TILE_STORE(0, ar.acc + j * 16, dv * 4);
        }
        for (int r = 0; r < nr; r++)
            memcpy(acc + (size_t)(g * 16 + r) * dv, ar.acc + (size_t)r * dv, sizeof(float) * (size_t)dv);
    }
}
#endif /* AMX */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#endif /* NEO__X86 */
#ifndef NEO__AMX_BUILD
#define NEO__AMX_BUILD 0
#endif

NEO_ATTN__PRIVATE int neo__cpu_has(neo_cpu_isa isa) {
    if (isa == NEO_CPU_SCALAR) return 1;
#if NEO__X86
    __builtin_cpu_init();
    unsigned a, b, c = 0, d;
    /* F16C is CPUID.1:ECX bit 29; clang's __builtin_cpu_supports does not know its name */
    int f16c = __get_cpuid(1, &a, &b, &c, &d) && (c >> 29 & 1u);
    int avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c;
    if (isa == NEO_CPU_AVX2) return avx2;
    int avx512 =
        avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
    if (isa == NEO_CPU_AVX512) return avx512;
#if NEO__AMX_BUILD
    /* AMX-TILE and AMX-BF16 are CPUID.(7, 0):EDX bits 24 and 22, AVX512-BF16 CPUID.(7, 1):EAX bit 5 */
    if (isa == NEO_CPU_AMX && avx512 && __builtin_cpu_supports("avx512dq") && __get_cpuid_count(7, 0, &a, &b, &c, &d) &&
        (d >> 24 & 1u) && (d >> 22 & 1u) && __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a >> 5 & 1u)) {
        unsigned long long supp = 0;
        return neo__arch_prctl(0x1021, (unsigned long)&supp) == 0 && (supp >> 18 & 1u);
    }
#endif
#endif
    return 0;
}

/* The L1 data cache of this core in bytes, from CPUID (Intel's leaf 4, else AMD's 0x80000005), 0
   where neither says. */
NEO_ATTN__PRIVATE long neo__l1d_bytes(void) {
#if NEO__X86
    unsigned a, b, c, d;
    for (unsigned i = 0; i < 16 && __get_cpuid_count(4, i, &a, &b, &c, &d) && (a & 31u); i++)
        if ((a & 31u) == 1 && (a >> 5 & 7u) == 1) /* a data cache, level 1: ways x partitions x line x sets */
            return (long)((b >> 22) + 1) * (long)((b >> 12 & 1023u) + 1) * (long)((b & 4095u) + 1) * ((long)c + 1);
    if (__get_cpuid(0x80000005u, &a, &b, &c, &d)) return (long)(c >> 24) * 1024;
#endif
    return 0;
}

/* Fills k with the kernels of isa (AUTO = the best this CPU has); 0 if the CPU lacks it. */
NEO_ATTN__PRIVATE int neo__kernels_init(neo__kernels *k, neo_cpu_isa isa) {
    if (isa == NEO_CPU_AUTO)
        isa = neo__cpu_has(NEO_CPU_AMX) ? NEO_CPU_AMX : neo__cpu_has(NEO_CPU_AVX512) ? NEO_CPU_AVX512 : neo__cpu_has(NEO_CPU_AVX2) ? NEO_CPU_AVX2 : NEO_CPU_SCALAR;
    if (!neo__cpu_has(isa)) return 0;
    /* isa, scores, max, scale, exp_sum, softmax, pv, dot, the tile path (AMX, added below), pf (set below) */
    static const neo__kernels scalar = {NEO_CPU_SCALAR, neo__scores_scalar, neo__max_scalar, neo__scale_scalar, neo__exp_sum_scalar,
                                        neo__softmax_scalar, neo__pv_scalar, neo__dot_scalar, NULL, NULL, NULL, NULL, 1};
    *k = scalar;
#if NEO__X86
    static const neo__kernels avx2 = {NEO_CPU_AVX2, neo__scores_avx2, neo__max_avx2, neo__scale_avx2, neo__exp_sum_avx2,
                                      neo__softmax_avx2, neo__pv_avx2, neo__dot_avx2, NULL, NULL, NULL, NULL, 1};
    static const neo__kernels avx512 = {NEO_CPU_AVX512, neo__scores_avx512, neo__max_avx512, neo__scale_avx512, neo__exp_sum_avx512,
                                        neo__softmax_avx512, neo__pv_avx512, neo__dot_avx512, NULL, NULL, NULL, NULL, 1};
    if (isa == NEO_CPU_AVX2) *k = avx2;
    else if (isa == NEO_CPU_AVX512 || isa == NEO_CPU_AMX) {
        *k = avx512;
        k->isa = isa;
    }
#if NEO__AMX_BUILD
    if (isa == NEO_CPU_AMX) {
        k->tile_begin = neo__tile_begin;
        k->tile_scores = neo__tile_scores;
        k->tile_pv = neo__tile_pv;
        k->tile_end = neo__tile_end;
    }
#endif
#endif
    long l1 = neo__l1d_bytes();
    k->pf = l1 > 0 && l1 < NEO__PREFETCH_L2_BELOW ? 2 : 1; /* where unknown, L1 */
    return 1;
}

/* =============================================================================================
   >>attn: CPU flash-attention over a neo__attn_args range (the host half, and the stand-in GPU)
   ============================================================================================= */
typedef struct neo__attn_job {
    const neo__attn_args *a;
    neo_runtime          *rt;
    int                   group;
    int                   chunk, n_chunks;           /* decode: cells of a big chunk, chunks per KV head */
    int                   n_big, small;              /* decode: big chunks per KV head, cells of a small one */
    int                   tok_per_task, n_tok_blocks; /* prefill: tokens per task, tasks per KV head */
    float                *partial;                   /* decode: this job's chunk partials (see neo_runtime.partial) */
    int                  *pair_done;                 /* decode: this job's merge-tree arrivals */
} neo__attn_job;

/* A runtime: the CPU attention's pool, kernels and buffers (used here), the engine's logger and
   allocator, and the device's tables (the host backend's on a CPU runtime). The split paths'
   buffers and handoff state live in >>split. */
struct neo_runtime {
    neo__pool    pool;
    neo__kernels kern;
    float      **scratch;        /* [pool.n_threads] per-thread attention scratch */
    size_t       scratch_floats; /* floats in each */
    float       *partial;        /* decode chunk partials: [kv heads][n_chunks][group][head_dim_v + 2] */
    size_t       partial_floats;
    int         *pair_done;      /* decode merge tree: [n_head_kv][2 * NEO__MAX_CHUNKS] arrivals at each pair */
    size_t       pair_done_n;
    void       (*log)(void *user, neo_log_level level, const char *msg); /* the engine's logger, or NULL */
    void        *log_user;
    neo_allocator alloc;         /* host memory (see neo_runtime_desc.allocator) */
    int          gpu;            /* 1 = layers keep gpu_heads in device memory (CUDA or the stand-in) */
    neo__dev_mem   mem;          /* the device's tables and state */
    neo__dev_attn  attn;
    neo__dev_model model;
    void          *dev_state;
    struct neo__split *split;    /* the split paths' buffers and handoff state, made with the first split layer */
    int          busy;           /* atomic: 1 while a public call uses the runtime (neo__enter) */
    struct neo__batch *batch;    /* the batch calls' per-layer state, made with the first batch */
    unsigned long long batch_mark; /* numbers the batch calls, to find a layer given twice */
    int          capturing;      /* 1 while the call in progress is being captured into a CUDA graph */
    struct neo_layer *graphed;   /* layers with a captured append (neo_layer.gnext): sync reads their lengths */
    struct neo__sgraph *sg_rec;  /* the stand-in's graph being recorded, or NULL (>>standin) */
    struct neo__sgraph *sg_q;    /* the stand-in's late stream's ops, not run yet (gpu_standin 2 or 3), or NULL */
    int          sg_late;        /* that stream, or -1 */
    int          sg_now;         /* 1 while the stand-in runs queued or recorded ops: each runs when called */
    unsigned     sg_ev[NEO__EVENTS][4]; /* the stand-in's events: records, MAIN's and COPY's last waits, records run (neo__standin_ev) */
    struct neo__bells *bells;    /* captured both-halves calls and their listener (>>bells), made with the first */
    int         *lens;           /* pinned [2 * graphed layers]: their device lengths, read back by neo_runtime_sync */
    size_t       lens_bytes;
};

typedef void (*neo__log_fn)(void *user, neo_log_level level, const char *msg);
#ifdef __cplusplus
#define NEO__THREAD_LOCAL thread_local
#else
#define NEO__THREAD_LOCAL _Thread_local
#endif
/* A logger runs on the thread that called into neo_attn, and what it calls into neo_attn in turn
   logs nothing: a logger that calls in on every line would otherwise be called again for its own
   call's refusal, without end. */
NEO_ATTN__PRIVATE void neo__vlog(neo__log_fn log, void *user, neo_log_level level, const char *fmt, va_list ap) {
    static NEO__THREAD_LOCAL int in_logger;
    char msg[256];
    if (!log || in_logger) return;
    vsnprintf(msg, sizeof msg, fmt, ap);
    in_logger = 1;
    log(user, level, msg);
    in_logger = 0;
}
/* One line to the engine's logger, if it has one. */
#if defined(__GNUC__) || defined(__clang__)
__attribute__((format(printf, 3, 4)))
#endif
NEO_ATTN__PRIVATE void neo__log(const neo_runtime *rt, neo_log_level level, const char *fmt, ...) {
    va_list ap;
    if (!rt) return;
    va_start(ap, fmt);
    neo__vlog(rt->log, rt->log_user, level, fmt, ap);
    va_end(ap);
}
/* The same before there is a runtime: to the logger of its descriptor. */
#if defined(__GNUC__) || defined(__clang__)
__attribute__((format(printf, 4, 5)))
#endif
NEO_ATTN__PRIVATE void neo__log_desc(neo__log_fn log, void *user, neo_log_level level, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    neo__vlog(log, user, level, fmt, ap);
    va_end(ap);
}

/* A runtime, and the layers and sessions made from it, take one call at a time. The public calls
   that use them take the runtime's flag with one atomic exchange and give it back on return, so
   that a call overlapping another one (from a second thread, a logger or an engine's
   parallel-for task) is refused with NEO_ERR_INVALID_ARG and a log line instead of corrupting
   the first. The library's calls to itself go to the internals, which do not take it. */
NEO_ATTN__PRIVATE int neo__enter(neo_runtime *rt, const char *fn) {
    if (!__atomic_exchange_n(&rt->busy, 1, __ATOMIC_ACQUIRE)) return 1;
    neo__log(rt, NEO_LOG_ERROR, "%s: refused: the runtime is inside another call (a runtime, its layers and sessions "
             "take one call at a time)", fn);
    return 0;
}
NEO_ATTN__PRIVATE void neo__leave(neo_runtime *rt) { __atomic_store_n(&rt->busy, 0, __ATOMIC_RELEASE); }

/* Queries one task carries: the GQA group for decode, a block of tokens x group for prefill. */
NEO_ATTN__PRIVATE int neo__prefill_tokens(int group) { return group >= NEO__PREFILL_QUERIES ? 1 : NEO__PREFILL_QUERIES / group; }
NEO_ATTN__PRIVATE int neo__max_queries(int group) { return group * neo__prefill_tokens(group); }

/* The process asks Linux for the tile registers' state when the first layer that can use the
   tiles is made (not when the runtime is: from then on Linux refuses alternate signal stacks
   smaller than the tile state's signal frame, sigaltstack). If Linux refuses, the runtime keeps
   the AVX-512 kernels for every task, and says so. */
NEO_ATTN__PRIVATE void neo__tiles_permit(neo_runtime *rt) {
#if NEO__AMX_BUILD
    if (neo__arch_prctl(0x1023, 18) == 0) return;
    neo__log(rt, NEO_LOG_WARN, "neo_layer_create: Linux refused the AMX tile state (arch_prctl); this runtime's CPU attention "
             "keeps the AVX-512 kernels");
    rt->kern.tile_begin = NULL, rt->kern.tile_scores = NULL, rt->kern.tile_pv = NULL, rt->kern.tile_end = NULL;
#else
    (void)rt;
#endif
}

/* Per-thread scratch of a layer shape, in floats: the scaled queries, scores, and the
   online-softmax state (m, l, acc) of every query, then the tile path's work area if the layer takes it. */
NEO_ATTN__PRIVATE size_t neo__scratch_floats(const neo__kernels *kr, neo_type t, int d, int dv, int nq) {
    size_t tiles =
        kr->tile_pv && neo__tile_fits(t, d, dv, nq) ? (neo__tile_layout(NULL, d, dv, nq, NULL) + 64) / sizeof(float) : 0;
    return (size_t)nq * ((size_t)d + NEO__BLOCK + 2 + (size_t)dv) + tiles;
}

/* Grows the runtime's CPU scratch to fit a layer. Layers of one runtime run one at a time. */
NEO_ATTN__PRIVATE neo_status neo__rt_reserve(neo_runtime *rt, size_t per_thread, size_t partial, size_t n_done) {
    neo__pool_wait(&rt->pool); /* a detached CPU half may still use them */
    if (per_thread > rt->scratch_floats) {
        for (int t = 0; t < rt->pool.n_threads; t++) {
            float *p = (float *)neo__alloc(&rt->alloc, per_thread * sizeof(float));
            if (!p) return NEO_ERR_NO_MEMORY;
            neo__free(&rt->alloc, rt->scratch[t]);
            rt->scratch[t] = p;
        }
        rt->scratch_floats = per_thread;
    }
    if (partial > rt->partial_floats) {
        float *p = (float *)neo__alloc(&rt->alloc, partial * sizeof(float));
        if (!p) return NEO_ERR_NO_MEMORY;
        neo__free(&rt->alloc, rt->partial);
        rt->partial = p;
        rt->partial_floats = partial;
    }
    if (n_done > rt->pair_done_n) {
        int *p = (int *)neo__alloc(&rt->alloc, n_done * sizeof(int));
        if (!p) return NEO_ERR_NO_MEMORY;
        neo__free(&rt->alloc, rt->pair_done);
        rt->pair_done = p;
        rt->pair_done_n = n_done;
    }
    return NEO_OK;
}

/* Decode splits each head's cells into chunks. Long chunks are cheaper (each one restarts the
   prefetch streams and leaves a partial to merge), so they shrink from NEO__MAX_CHUNK only as far
   as needed to leave NEO__MIN_TASKS tasks for the pool. The size depends on the range and the
   head count, never on the thread count, so neither does the result. */
NEO_ATTN__PRIVATE int neo__chunk_size(int len, int n_heads) {
    int c = NEO__MAX_CHUNK;
    /* len >= 1; (len - 1) / c + 1 rounds up without overflow at the end of the int range */
    while (c > NEO__MIN_CHUNK && (double)((len - 1) / c + 1) * n_heads < NEO__MIN_TASKS) c /= 2;
    if (len > c * NEO__MAX_CHUNKS) {
        c = (len - 1) / NEO__MAX_CHUNKS + 1;
        c = (c + NEO__BLOCK - 1) / NEO__BLOCK * NEO__BLOCK;
    }
    return c;
}

/* The most chunks neo__chunk_plan gives a head over at most n cells: big chunks have at least
   NEO__MIN_CHUNK cells and small ones at least half that, so a range of len cells has at most
   len / (NEO__MIN_CHUNK / 2) + 1 of them, and never more than NEO__MAX_CHUNKS. A layer's decode
   partials and merge counters are sized by this at its n_ctx. */
NEO_ATTN__PRIVATE int neo__max_chunks(int n) {
    int c = n / (NEO__MIN_CHUNK / 2) + 1;
    return c < NEO__MAX_CHUNKS ? c : NEO__MAX_CHUNKS;
}

/* Sets J's decode chunks over len cells of each of n_heads heads: big chunks of neo__chunk_size,
   then, at the end of each head's range, small chunks of a quarter of that, about NEO__MIN_TASKS of
   them in all (at least one a head). The pool takes every head's big chunks first and the small
   ones last, so the threads that finish early share out the call's end in small pieces instead
   of waiting on the slowest thread's last big chunk. Ranges whose small chunks would be under
   NEO__MIN_CHUNK / 2 cells (big chunks of 256: short ranges, few heads), over half the range,
   or past NEO__MAX_CHUNKS a head (from 200k to 260k cells on, by head count) keep one size.
   Like the chunk size, the split depends on the range and the head count alone. */
NEO_ATTN__PRIVATE void neo__chunk_plan(neo__attn_job *J, int len, int n_heads) {
    int n_small = (NEO__MIN_TASKS + n_heads - 1) / n_heads, tail;
    J->chunk = neo__chunk_size(len, n_heads);
    J->small = J->chunk / 4 / NEO__BLOCK * NEO__BLOCK;
    tail = J->small * n_small; /* small < 2^22 and n_small <= NEO__MIN_TASKS: no overflow */
    if (J->small < NEO__MIN_CHUNK / 2 || tail > len / 2 || (len - tail - 1) / J->chunk + 1 + n_small > NEO__MAX_CHUNKS) {
        J->small = 0, n_small = 0, tail = 0;
    }
    J->n_big = (len - tail - 1) / J->chunk + 1;
    J->n_chunks = J->n_big + n_small;
}

/* Where task number task of a decode job works: head index *hi (from a->h0), its chunk *c (in
   cell order), cells [*c0, *c1). Tasks run every head's big chunks, then every head's small ones. */
NEO_ATTN__PRIVATE void neo__chunk_of(const neo__attn_job *J, int task, int *hi, int *c, int *c0, int *c1) {
    const neo__attn_args *a = J->a;
    int n_heads = a->h1 - a->h0, n_small = J->n_chunks - J->n_big;
    int end_big = a->c1 - J->small * n_small; /* where the small chunks start */
    if (task < n_heads * J->n_big) {
        *hi = task / J->n_big, *c = task % J->n_big;
        *c0 = a->c0 + *c * J->chunk;
        *c1 = end_big - *c0 > J->chunk ? *c0 + J->chunk : end_big;
    } else {
        task -= n_heads * J->n_big;
        *hi = task / n_small, *c = J->n_big + task % n_small;
        *c0 = end_big + (*c - J->n_big) * J->small;
        *c1 = *c0 + J->small;
    }
}

/* Online-softmax state of nq queries for one task. Query r is head g * group + r % group of
   token t0 + r / group. */
typedef struct neo__qstate {
    int    nq, t0, g;
    float *q;   /* [nq][head_dim], already times scale */
    float *s;   /* [nq][NEO__BLOCK] scores, then probabilities */
    float *m;   /* [nq] running max */
    float *l;   /* [nq] running denominator */
    float *acc; /* [nq][head_dim_v] running numerator */
} neo__qstate;

/* Spins until the device has written the queries (a gated call): they are on their way, behind
   whatever the engine queued before the call. */
NEO_ATTN__PRIVATE void neo__await_gate(const neo__attn_args *a) {
    if (a->gate) neo__spin_until(a->gate, a->gate_seq);
}

NEO_ATTN__PRIVATE void neo__qstate_init(neo__qstate *st, const neo__attn_job *J, float *scratch, int g, int t0, int nt) {
    const neo__attn_args *a = J->a;
    int G = J->group, d = a->head_dim, dv = a->head_dim_v;
    neo__await_gate(a);
    st->nq = nt * G;
    st->t0 = t0;
    st->g = g;
    st->q = scratch;
    st->s = st->q + (size_t)st->nq * d;
    st->m = st->s + (size_t)st->nq * NEO__BLOCK;
    st->l = st->m + st->nq;
    st->acc = st->l + st->nq;
    for (int r = 0; r < st->nq; r++) {
        /* the group's query heads are adjacent, so each token's slice is one run */
        const float *src = a->q + ((size_t)(t0 + r / G) * a->n_head + (size_t)g * G + (size_t)(r % G)) * d;
        for (int j = 0; j < d; j++) st->q[(size_t)r * d + j] = src[j] * a->scale;
        st->m[r] = -INFINITY;
        st->l[r] = 0.0f;
    }
    memset(st->acc, 0, sizeof(float) * (size_t)st->nq * dv);
}

/* Attends every query of st to cells [c0, c1) of KV head g; cells after a query's position
   are masked out. */
/* Where cell c of KV head g starts in a's K (v = 0) or V (v = 1) cache. */
NEO_ATTN__PRIVATE const char *neo__kv_row(const neo__attn_args *a, int g, int c, int v) {
    size_t es = neo__type_size((neo_type)a->kv_type), w = (size_t)(v ? a->head_dim_v : a->head_dim);
    return (const char *)(v ? a->v : a->k) + ((size_t)(g - a->kv_h0) * (size_t)a->kv_cells + (size_t)(c - a->cell_base)) * w * es;
}

/* 1 when none of p: [n] of type t is NaN or infinite */
NEO_ATTN__PRIVATE int neo__finite_kv(const void *p, size_t n, neo_type t) {
    const uint16_t *h = (const uint16_t *)p;
    uint16_t        ex = t == NEO_TYPE_F16 ? 0x7c00u : 0x7f80u, e = 0; /* the exponent bits of a half / bfloat16 */
    if (t == NEO_TYPE_F32) return neo__finite((const float *)p, n);
    for (size_t i = 0; i < n && e != ex; i++) e = (uint16_t)(h[i] & ex);
    return e != ex;
}

/* acc: [nq][dv] += p: [nq][NEO__BLOCK] x v: [nk][dv], on the tile path when w (its work area) is set */
NEO_ATTN__PRIVATE void neo__pv_any(const neo__kernels *kr, void *w, float *acc, const float *p, const void *v, neo_type t,
                                   int nq, int nk, int dv) {
    if (w)
        kr->tile_pv(acc, p, w, v, t, nq, nk, dv);
    else
        kr->pv(acc, p, v, t, nq, nk, dv);
}
/* acc += p x v over the rows of the block each query sees (row b is cell c + b; query r sits at
   pos0 + r / G): the path of a block whose masked rows are not all finite, since a masked row's
   weight 0 times an infinite value would be NaN. */
NEO_ATTN__PRIVATE void neo__pv_visible(const neo__kernels *kr, void *w, neo__qstate *st, const void *v, neo_type t, int nk,
                                       int dv, int G, int pos0, int c) {
    for (int r = 0; r < st->nq; r++) {
        int nv = pos0 + r / G - c + 1;
        if (nv > 0) neo__pv_any(kr, w, st->acc + (size_t)r * dv, st->s + r * NEO__BLOCK, v, t, 1, nv < nk ? nv : nk, dv);
    }
}

NEO_ATTN__PRIVATE void neo__attend(const neo__attn_job *J, const neo__kernels *kr, neo__qstate *st, int c0, int c1) {
    const neo__attn_args *a = J->a;
    int         d = a->head_dim, dv = a->head_dim_v, G = J->group;
    neo_type    t = (neo_type)a->kv_type;
    size_t      es = neo__type_size(t);
    const char *k0 = neo__kv_row(a, st->g, c0, 0), *v0 = neo__kv_row(a, st->g, c0, 1); /* cell c0 */
    int         pos0 = a->pos0 + st->t0; /* position of the task's first token */
    /* the tile path's work area, after the accumulators (neo__scratch_floats) */
    void *w = kr->tile_pv && neo__tile_fits(t, d, dv, st->nq) ? (void *)(st->acc + (size_t)st->nq * dv) : NULL;
    if (w) kr->tile_begin(w, st->q, st->nq, d, dv);
    for (int c = c0, nk; c < c1; c += nk) { /* c + nk <= c1: no overflow at the end of the int range */
        const char *vb = v0 + (size_t)(c - c0) * dv * es;
        const char *kb = k0 + (size_t)(c - c0) * d * es;
        int         lo = pos0 - c + 1; /* rows [lo, nk) are masked for some query */
        nk = c1 - c < NEO__BLOCK ? c1 - c : NEO__BLOCK;
        if (w)
            kr->tile_scores(st->s, w, kb, vb, t, st->nq, nk, d, dv, kr->pf);
        else
            kr->scores(st->s, st->q, kb, vb, t, st->nq, nk, d, dv, kr->pf);
        /* a full block that every query sees whole, its scores all finite: one softmax call */
        if (nk == NEO__BLOCK && lo >= nk && !(a->softcap > 0.0f) && !a->slopes &&
            kr->softmax(st->s, st->nq, st->m, st->l, st->acc, dv)) {
            neo__pv_any(kr, w, st->acc, st->s, vb, t, st->nq, nk, dv);
            continue;
        }
        /* a full block's scores all finite (masked cells' included) in one pass; else each query's own */
        int fin = nk == NEO__BLOCK && neo__finite(st->s, (size_t)st->nq * NEO__BLOCK);
        for (int r = 0; r < st->nq; r++) {
            float *s = st->s + r * NEO__BLOCK;
            int    pos = pos0 + r / G, nv = pos - c + 1;
            if (nv > nk) nv = nk;
            if (nv <= 0) { /* the whole block is after this query */
                memset(s, 0, sizeof(float) * NEO__BLOCK);
                continue;
            }
            if (!fin && !neo__finite(s, (size_t)nv)) { /* a NaN or infinite score makes the query's whole output NaN */
                for (int b = 0; b < nk; b++) s[b] = NAN;
                st->m[r] = st->l[r] = NAN;
                continue;
            }
            if (a->softcap > 0.0f)
                for (int b = 0; b < nv; b++) s[b] = a->softcap * tanhf(s[b] / a->softcap);
            if (a->slopes) {
                float slope = a->slopes[st->g * G + r % G];
                for (int b = 0; b < nv; b++) s[b] -= slope * (float)(pos - (c + b));
            }
            float mx = kr->max(s, nv);
            for (int b = nv; b < nk; b++) s[b] = 0.0f;
            if (mx > st->m[r]) neo__rescale(mx, st->m + r, st->l + r, st->acc + (size_t)r * dv, dv, kr->scale);
            st->l[r] += kr->exp_sum(s, nv, st->m[r]);
        }
        if (lo < nk && !neo__finite_kv(vb + (size_t)(lo > 0 ? lo : 0) * dv * es, (size_t)(nk - (lo > 0 ? lo : 0)) * dv, t))
            neo__pv_visible(kr, w, st, vb, t, nk, dv, G, pos0, c);
        else
            neo__pv_any(kr, w, st->acc, st->s, vb, t, st->nq, nk, dv);
    }
    if (w) kr->tile_end();
}

/* Merges a partial state (m, l, acc[dv]) with an optional prior state [m, l, acc[dv]] into
   either state [m, l, acc[dv]] or, finished, out [dv]:
   out = (acc_p e^(m_p - M) + acc e^(m - M)) / (l_p e^(m_p - M) + l e^(m - M) + e^(sink - M)).
   state may be the same memory as prior. */
NEO_ATTN__PRIVATE void neo__merge(float m, float l, const float *acc, int dv, const float *prior, float *state, float *out,
                                  const float *sink) {
    float  M = prior ? prior[0] : -INFINITY, den = 0.0f, wp = 0.0f, w;
    float *dst = out ? out : state + 2;
    if (m > M) M = m;
    if (M == -INFINITY) M = 0.0f; /* nothing attended yet: every weight below is 0 */
    if (prior) den = prior[1] * (wp = expf(prior[0] - M));
    den += l * (w = expf(m - M));
    for (int j = 0; j < dv; j++) dst[j] = prior ? prior[2 + j] * wp : 0.0f;
    for (int j = 0; j < dv; j++) dst[j] += acc[j] * w;
    if (out) {
        float Mf = sink && *sink > M ? *sink : M, sc = expf(M - Mf);
        float tot = den * sc + (sink ? expf(*sink - Mf) : 0.0f), inv = tot > 0.0f ? sc / tot : 0.0f;
        for (int j = 0; j < dv; j++) out[j] *= inv;
    } else {
        state[0] = M;
        state[1] = den;
    }
}

/* Folds the partials R into L, G queries each ([G][dv + 2]: m, l, acc[dv]): one online-softmax
   step of the decode merge tree. An empty side (m = -inf: nothing attended) weighs 0, and two
   empty sides stay empty, so no made-up maximum shrinks the weights of a later merge. */
NEO_ATTN__PRIVATE void neo__merge_pair(float *L, const float *R, int G, int dv) {
    size_t stride = (size_t)dv + 2;
    for (int r = 0; r < G; r++, L += stride, R += stride) {
        float M = R[0] > L[0] ? R[0] : L[0], wl, wr;
        if (M == -INFINITY) continue;
        wl = expf(L[0] - M);
        wr = expf(R[0] - M);
        L[0] = M;
        L[1] = L[1] * wl + R[1] * wr;
        for (int j = 0; j < dv; j++) L[2 + j] = L[2 + j] * wl + R[2 + j] * wr;
    }
}

/* Where query head h of token t reads a prior state and leaves its result. */
NEO_ATTN__PRIVATE void neo__merge_head(const neo__attn_args *a, int t, int h, float m, float l, const float *acc) {
    size_t th = (size_t)t * a->n_head + (size_t)h, sw = (size_t)a->head_dim_v + 2;
    float *st = a->state ? a->state + th * sw : NULL;
    neo__merge(m, l, acc, a->head_dim_v, a->accumulate ? st : NULL, a->out ? NULL : st,
               a->out ? a->out + th * a->head_dim_v : NULL, a->out && a->sinks ? a->sinks + h : NULL);
}

/* The first NEO__PREFETCH bytes of a task's K rows [c0, c1) of head g, which the kernels' read-ahead
   does not cover: asked for at once, they arrive together rather than one miss after another. A
   decode task is short (the small chunks at the end of a call), so this start is a fair part of it. */
NEO_ATTN__PRIVATE void neo__prefetch_first(const neo__attn_args *a, int g, int c0, int c1) {
    const char *k = neo__kv_row(a, g, c0, 0);
    size_t      kb = (size_t)(neo__kv_row(a, g, c1, 0) - k);
    for (size_t o = 0; o < kb && o < NEO__PREFETCH; o += 64) __builtin_prefetch(k + o, 0, 3);
}

/* A gated decode task's wait for its queries, spent pulling its K and V rows [c0, c1) of head g
   toward the core (into L2): they do not depend on the queries, and the rows of a small job are
   otherwise fetched at one thread's share of DRAM after the gate opens. Rows the device writes
   meanwhile (the new cell) are kept coherent by the hardware. */
NEO_ATTN__PRIVATE void neo__await_gate_warm(const neo__attn_args *a, int g, int c0, int c1) {
    size_t      kb, vb, o = 0;
    const char *k, *v;
    k = neo__kv_row(a, g, c0, 0);
    v = neo__kv_row(a, g, c0, 1);
    kb = (size_t)(neo__kv_row(a, g, c1, 0) - k);
    vb = (size_t)(neo__kv_row(a, g, c1, 1) - v);
    for (; o < kb + vb && __atomic_load_n(a->gate, __ATOMIC_ACQUIRE) != a->gate_seq; o += 64)
        __builtin_prefetch(o < kb ? k + o : v + (o - kb), 0, 2);
    neo__spin_until(a->gate, a->gate_seq);
}

NEO_ATTN__PRIVATE void neo__decode_task(void *user, int task, int thread) {
    const neo__attn_job  *J = (const neo__attn_job *)user;
    const neo__attn_args *a = J->a;
    neo_runtime          *rt = J->rt;
    int    G = J->group, dv = a->head_dim_v, hi, c, c0, c1;
    neo__chunk_of(J, task, &hi, &c, &c0, &c1);
    int    g = a->h0 + hi;
    size_t stride = (size_t)dv + 2;
    float *first = J->partial + (size_t)hi * J->n_chunks * G * stride; /* [n_chunks][G][stride] */
    float *part = first + (size_t)c * G * stride;
    neo__qstate st;
    NEO_ATTN_DECODE_HOOK(0, task, thread);
    if (a->gate)
        neo__await_gate_warm(a, g, c0, c1);
    else
        neo__prefetch_first(a, g, c0, c1);
    neo__qstate_init(&st, J, rt->scratch[thread], g, 0, 1);
    neo__attend(J, &rt->kern, &st, c0, c1);
    for (int r = 0; r < G; r++) {
        part[r * stride] = st.m[r];
        part[r * stride + 1] = st.l[r];
        memcpy(part + r * stride + 2, st.acc + (size_t)r * dv, sizeof(float) * (size_t)dv);
    }
    NEO_ATTN_DECODE_HOOK(1, task, thread);
    /* The chunks merge up a fixed binary tree, pairs (0, 1), (2, 3), .. then pairs of their
       results, each pair by whichever of its two finishes second, into the left one's slot: the
       order never depends on the threads. The partials are read across cores, which is slow for one
       thread gathering them all; up the tree the last task to finish
       reads only one partial a level, and the others are merged while tasks still run. */
    int *done = J->pair_done + (size_t)hi * 2 * J->n_chunks; /* [pairs of level 0][pairs of level 1].. */
    for (int i = c, n = J->n_chunks, k = 0; n > 1; done += (n + 1) / 2, i >>= 1, n = (n + 1) / 2, k++) {
        float *left;
        if ((i ^ 1) >= n) continue; /* the odd one out of its level: goes up alone */
        if (__atomic_add_fetch(&done[i >> 1], 1, __ATOMIC_ACQ_REL) != 2) return;
        left = first + ((size_t)(i & ~1) << k) * G * stride;
        neo__merge_pair(left, left + ((size_t)1 << k) * G * stride, G, dv);
    }
    for (int r = 0; r < G; r++) neo__merge_head(a, 0, g * G + r, first[r * stride], first[r * stride + 1], first + r * stride + 2);
    NEO_ATTN_DECODE_HOOK(2, task, thread);
}

NEO_ATTN__PRIVATE void neo__prefill_task(void *user, int task, int thread) {
    const neo__attn_job  *J = (const neo__attn_job *)user;
    const neo__attn_args *a = J->a;
    int G = J->group, dv = a->head_dim_v;
    int g = a->h0 + task / J->n_tok_blocks, t0 = (task % J->n_tok_blocks) * J->tok_per_task;
    int nt = a->n_tokens - t0 < J->tok_per_task ? a->n_tokens - t0 : J->tok_per_task;
    int c1 = a->pos0 + t0 + nt < a->c1 ? a->pos0 + t0 + nt : a->c1; /* the block's last token sees up to here */
    neo__qstate st;
    neo__qstate_init(&st, J, J->rt->scratch[thread], g, t0, nt);
    if (c1 > a->c0) neo__attend(J, &J->rt->kern, &st, a->c0, c1);
    for (int r = 0; r < st.nq; r++)
        neo__merge_head(a, t0 + r / G, g * G + r % G, st.m[r], st.l[r], st.acc + (size_t)r * dv);
}

/* The pool runs a task list serially below this many multiply-adds: waking it costs more. */
#define NEO__SERIAL_MACS 65536.0

/* The tasks on the pool, or on the calling thread alone when the job is small. Which thread runs
   a task never changes its result. */
NEO_ATTN__PRIVATE void neo__run(neo_runtime *rt, int n_tasks, double macs, neo_task_fn fn, void *user) {
    neo__job j;
    memset(&j, 0, sizeof j);
    j.fn = fn;
    j.user = user;
    j.n_tasks = n_tasks;
    j.serial = macs < NEO__SERIAL_MACS;
    neo__pool_launch(&rt->pool, &j);
    neo__pool_help(&rt->pool);
}

NEO_ATTN__PRIVATE double neo__cpu_macs(const neo__attn_args *a) {
    return (double)(a->c1 - a->c0) * (a->n_head / a->n_head_kv) * (a->h1 - a->h0) * a->n_tokens * (a->head_dim + a->head_dim_v);
}

/* Sets up the job of CPU attention over a (J keeps a pointer to it): *fn and the task count. */
NEO_ATTN__PRIVATE int neo__cpu_job(neo_runtime *rt, const neo__attn_args *a, neo__attn_job *J, neo_task_fn *fn) {
    int n_heads = a->h1 - a->h0;
    memset(J, 0, sizeof *J);
    J->a = a;
    J->rt = rt;
    J->group = a->n_head / a->n_head_kv;
    if (a->n_tokens == 1) {
        neo__chunk_plan(J, a->c1 - a->c0, n_heads);
        J->partial = rt->partial;
        J->pair_done = rt->pair_done;
        memset(J->pair_done, 0, sizeof(int) * (size_t)n_heads * 2 * (size_t)J->n_chunks);
        *fn = neo__decode_task;
        return n_heads * J->n_chunks;
    }
    J->tok_per_task = neo__prefill_tokens(J->group);
    J->n_tok_blocks = (a->n_tokens - 1) / J->tok_per_task + 1;
    *fn = neo__prefill_task;
    return n_heads * J->n_tok_blocks;
}

/* CPU attention of a range, on the runtime's pool (activations in host memory). */
NEO_ATTN__PRIVATE int neo__cpu_attend(neo_runtime *rt, const neo__attn_args *a) {
    neo__attn_job J;
    neo_task_fn   fn;
    int           n;
    neo__pool_wait(&rt->pool); /* a detached CPU half may still use the chunk counters */
    n = neo__cpu_job(rt, a, &J, &fn);
    neo__run(rt, n, neo__cpu_macs(a), fn, &J);
    return NEO_OK;
}

/* =============================================================================================
   >>host: the CPU backend. A CPU runtime's tables: memory from the runtime's allocator, copies
   that are done when they return, streams and events with nothing to order; append narrows into
   the cache, attention runs on the pool. Its device memory is host memory too, which is what
   lets the stand-in (>>standin) reuse this memory table.
   ============================================================================================= */
/* dst: [n] of type t <- src: [n] f32 */
NEO_ATTN__PRIVATE void neo__narrow(void *dst, const float *src, int n, neo_type t) {
    uint16_t *d16 = (uint16_t *)dst;
    if (t == NEO_TYPE_F32) memcpy(dst, src, sizeof(float) * (size_t)n);
    else if (t == NEO_TYPE_F16)
        for (int i = 0; i < n; i++) d16[i] = neo__f32_to_f16(src[i]);
    else
        for (int i = 0; i < n; i++) d16[i] = neo__f32_to_bf16(src[i]);
}

/* The host backend's state is its runtime, once it has set it (see neo_runtime_create). */
NEO_ATTN__PRIVATE int neo__host_init(int device, void *stream, void **state, char *why, size_t why_size) {
    (void)device, (void)stream, (void)why, (void)why_size;
    *state = NULL;
    return NEO_OK;
}
NEO_ATTN__PRIVATE void neo__host_release(void *state) { (void)state; }
NEO_ATTN__PRIVATE const neo_allocator *neo__host_allocator(void *state) {
    return state ? &((const neo_runtime *)state)->alloc : NULL;
}
NEO_ATTN__PRIVATE int  neo__host_alloc(void *state, void **ptr, size_t bytes) {
    return (*ptr = neo__alloc(neo__host_allocator(state), bytes)) != NULL || !bytes ? NEO_OK : NEO_ERR_NO_MEMORY;
}
/* "Device" memory: the stand-in's plays GPU memory, a CPU runtime's is host memory and says so. */
NEO_ATTN__PRIVATE int neo__host_dev_alloc(void *state, void **ptr, size_t bytes) {
    if (neo__host_alloc(state, ptr, bytes) == NEO_OK) return NEO_OK;
    return state && ((const neo_runtime *)state)->gpu ? NEO_ERR_DEVICE_MEMORY : NEO_ERR_NO_MEMORY;
}
NEO_ATTN__PRIVATE void neo__host_free(void *state, void *ptr) {
    neo__free(neo__host_allocator(state), ptr);
}
NEO_ATTN__PRIVATE int neo__host_copy(void *state, void *dst, const void *src, size_t bytes, int stream) {
    (void)state, (void)stream;
    if (bytes) memmove(dst, src, bytes);
    return NEO_OK;
}
NEO_ATTN__PRIVATE int neo__host_copy2d(void *state, void *dst, size_t dst_pitch, const void *src, size_t src_pitch,
                                       size_t width, size_t rows, int stream) {
    (void)state, (void)stream;
    for (size_t r = 0; r < rows; r++) memcpy((char *)dst + r * dst_pitch, (const char *)src + r * src_pitch, width);
    return NEO_OK;
}
NEO_ATTN__PRIVATE int neo__host_record(void *state, int event, int stream) {
    (void)state, (void)event, (void)stream;
    return NEO_OK;
}
NEO_ATTN__PRIVATE int neo__host_sync(void *state, int which) {
    (void)state, (void)which;
    return NEO_OK;
}
NEO_ATTN__PRIVATE int neo__host_append(void *state, const neo__append_args *a, int stream) {
    size_t es = neo__type_size((neo_type)a->kv_type);
    (void)state, (void)stream;
    for (int t = 0; t < a->n_tokens; t++)
        for (int h = a->h0; h < a->h1; h++) {
            int    second = a->k2 && h >= a->h2;
            size_t row = (size_t)(h - (second ? a->h2 : a->kv_h0)) * (size_t)a->kv_cells + (size_t)a->row0 + (size_t)t;
            neo__narrow((char *)(second ? a->k2 : a->k) + row * a->head_dim * es,
                        a->src_k + ((size_t)t * a->n_head_kv + h) * a->head_dim, a->head_dim, (neo_type)a->kv_type);
            neo__narrow((char *)(second ? a->v2 : a->v) + row * a->head_dim_v * es,
                        a->src_v + ((size_t)t * a->n_head_kv + h) * a->head_dim_v, a->head_dim_v, (neo_type)a->kv_type);
        }
    return NEO_OK;
}
NEO_ATTN__PRIVATE int neo__host_append_batch(void *state, const neo__append_args *a, int n, int stream) {
    if (!a || n < 1) return NEO_ERR_INVALID_ARG;
    for (int i = 0; i < n; i++) neo__host_append(state, &a[i], stream);
    return NEO_OK;
}
NEO_ATTN__PRIVATE int neo__host_attend(void *state, const neo__attn_args *a, int stream) {
    (void)stream;
    return neo__cpu_attend((neo_runtime *)state, a);
}
/* The hybrid's merge: state b continued by state a (neo__merge's prior), finished into out. */
NEO_ATTN__PRIVATE int neo__host_merge(void *state, const neo__merge_args *m, int stream) {
    size_t sw;
    (void)state, (void)stream;
    if (!neo__merge_ok(m)) return NEO_ERR_INVALID_ARG;
    sw = (size_t)m->head_dim_v + 2;
    for (int t = 0; t < m->n_tokens; t++)
        for (int h = m->h0; h < m->h1; h++) {
            size_t th = (size_t)t * m->n_head + (size_t)h;
            neo__merge(m->b[th * sw], m->b[th * sw + 1], m->b + th * sw + 2, m->head_dim_v, m->a + th * sw, NULL,
                       m->out + th * m->head_dim_v, m->sinks ? m->sinks + h : NULL);
        }
    return NEO_OK;
}


NEO_ATTN__PRIVATE void neo__host_tables(neo__dev_mem *m, neo__dev_attn *t) {
    memset(m, 0, sizeof *m);
    memset(t, 0, sizeof *t);
    m->init = neo__host_init;
    m->release = neo__host_release;
    m->dev_alloc = neo__host_dev_alloc;
    m->dev_free = neo__host_free;
    m->host_alloc = neo__host_alloc;
    m->host_free = neo__host_free;
    m->copy = neo__host_copy;
    m->copy2d = neo__host_copy2d;
    m->record = neo__host_record;
    m->wait = neo__host_record;
    m->event_sync = neo__host_sync;
    m->stream_sync = neo__host_sync;
    t->append = neo__host_append;
    t->append_batch = neo__host_append_batch;
    t->attend = neo__host_attend;
    t->merge = neo__host_merge;
}

/* =============================================================================================
   >>standin: the test backend (neo_runtime_desc.gpu_standin): a GPU played on the host, so that
   the split paths and the device-side lengths run in CI with no GPU. Its memory is the host
   backend's; its attention and append too; it adds the handoff, the lengths, a graph recorder,
   a check of the events and streams that run late. With gpu_standin = 1 every op is done before
   it returns. With 2 (COPY late) or 3 (MAIN late) that stream's ops wait in a queue until the
   other stream waits for an event recorded after them, or the host waits for that stream (a
   sync, a free, a handoff to the host), as a GPU may run them: work that the library did not
   order behind what it reads then reads what was there before, and the results are wrong.
   ============================================================================================= */
/* Ops kept to run later. While neo_runtime.sg_rec is set, the ops a CUDA graph would hold
   (append, attend, set_length, copy, merge, a bell's ring and answer, a host function, the
   decode loop's host ops) are recorded instead of run, and neo__standin_replay runs them again in
   order, as a CUDA graph replays its kernels; an op that would end a CUDA capture (a wait for the
   device, a flagged handoff) marks the recording broken. Tests drive it with the three functions
   below; nothing else records. The late stream's ops go to neo_runtime.sg_q the same way, with
   its events' records and its 2D copies and awaited copies, and neo__sg_catch_up runs them. */
enum { NEO__SG_APPEND, NEO__SG_ATTEND, NEO__SG_SET_LENGTH, NEO__SG_COPY, NEO__SG_MATVEC, NEO__SG_RING, NEO__SG_ANSWER, NEO__SG_HOST_FN,
       NEO__SG_MERGE, NEO__SG_COPY2D, NEO__SG_AWAIT, NEO__SG_RECORD };
typedef struct neo__sg_op {
    int              kind;
    neo__append_args ap;
    neo__attn_args   at;
    neo__matvec_args mv;             /* MATVEC: the decode loop's host op, fn(ctx, &mv) */
    neo__merge_args  mg;             /* MERGE */
    int            (*fn)(void *ctx, const neo__matvec_args *a);
    void            *ctx;
    int             *len;            /* SET_LENGTH */
    int              value;
    void            *dst;            /* COPY, COPY2D, RING, ANSWER, AWAIT */
    const void      *src;
    size_t           bytes;
    size_t           dst_pitch, src_pitch, rows; /* COPY2D, RING, ANSWER, AWAIT (bytes is the width) */
    unsigned        *bell;           /* RING, ANSWER; AWAIT: the flag */
    const int       *dlen;           /* RING */
    void           (*host_fn)(void *); /* HOST_FN */
    void            *arg;
    int              event;          /* RECORD: the event, and which of its records it is: */
    unsigned         count;          /* RECORD; AWAIT: the flag's value awaited */
} neo__sg_op;
typedef struct neo__sgraph {
    neo__sg_op        *ops;  /* [n] of [cap]; in the late stream's queue the first head have run */
    int                n, cap, broken, head;
    unsigned long long id;   /* numbers the recordings (neo__dev_mem.capturing) */
} neo__sgraph;

NEO_ATTN__PRIVATE int neo__sg_add(neo_runtime *rt, neo__sgraph *g, const neo__sg_op *op) {
    if (g->n == g->cap) {
        int         cap = g->cap ? 2 * g->cap : 16;
        neo__sg_op *ops = (neo__sg_op *)neo__alloc(&rt->alloc, sizeof *ops * (size_t)cap);
        if (!ops) return g->broken = 1, NEO_ERR_NO_MEMORY;
        if (g->n) memcpy(ops, g->ops, sizeof *ops * (size_t)g->n);
        neo__free(&rt->alloc, g->ops);
        g->ops = ops, g->cap = cap;
    }
    g->ops[g->n++] = *op;
    return NEO_OK;
}
/* Where an op on stream goes instead of running: the recording, the late stream's queue, or
   nowhere (NULL: it runs now). A CPU runtime's decode loop asks too, and runs its ops. */
NEO_ATTN__PRIVATE neo__sgraph *neo__sg_target(const neo_runtime *rt, int stream) {
    if (rt->sg_rec) return rt->sg_rec;
    return rt->sg_q && stream == rt->sg_late && !rt->sg_now ? rt->sg_q : NULL;
}
/* op on stream, kept (added to its target), or 0 when it is to run now; *s: the add's status */
NEO_ATTN__PRIVATE int neo__sg_keep(neo_runtime *rt, int stream, const neo__sg_op *op, int *s) {
    neo__sgraph *g = neo__sg_target(rt, stream);
    if (!g) return 0;
    *s = neo__sg_add(rt, g, op);
    return 1;
}
/* What a CUDA capture cannot hold: the recording is broken and the op refused. */
NEO_ATTN__PRIVATE int neo__sg_refuse(neo_runtime *rt) {
    if (!rt || !rt->sg_rec) return NEO_OK;
    rt->sg_rec->broken = 1;
    return NEO_ERR_UNSUPPORTED;
}
NEO_ATTN__PRIVATE int neo__sg_catch_up(neo_runtime *rt, int event, unsigned count);

NEO_ATTN__PRIVATE int neo__standin_append(void *state, const neo__append_args *a, int stream) {
    neo_runtime     *rt = (neo_runtime *)state;
    neo__append_args b = *a;
    neo__sg_op       op;
    int              s;
    if (a->row0 < 0 && !a->len) return NEO_ERR_INVALID_ARG;
    memset(&op, 0, sizeof op);
    op.kind = NEO__SG_APPEND, op.ap = *a;
    if (neo__sg_keep(rt, stream, &op, &s)) return s;
    if (a->row0 < 0) {
        b.row0 = a->len[0];
        if (a->n_tokens > a->kv_cells - b.row0) return a->len[1] = 1, NEO_OK;
    }
    neo__host_append(state, &b, stream);
    if (a->len) a->len[0] = b.row0 + a->n_tokens;
    return NEO_OK;
}
/* An attend of no cell: each query as if every cell weighed 0, through the merge any range ends
   with (an empty state, a continued one unchanged, or those finished). zero: [head_dim_v] zeros. */
NEO_ATTN__PRIVATE void neo__attend_none(const neo__attn_args *a, const float *zero) {
    int G = a->n_head / a->n_head_kv;
    for (int t = 0; t < a->n_tokens; t++)
        for (int h = a->h0 * G; h < a->h1 * G; h++) neo__merge_head(a, t, h, -INFINITY, 0.0f, zero);
}
NEO_ATTN__PRIVATE int neo__standin_attend(void *state, const neo__attn_args *a, int stream) {
    neo_runtime   *rt = (neo_runtime *)state;
    neo__attn_args b = *a;
    neo__sg_op     op;
    float         *zero;
    int            s;
    if (!neo__cut_ok(a)) return NEO_ERR_INVALID_ARG;
    memset(&op, 0, sizeof op);
    op.kind = NEO__SG_ATTEND, op.at = *a;
    if (neo__sg_keep(rt, stream, &op, &s)) return s;
    if (a->len) {
        b.c1 = a->c1 < *a->len ? a->c1 : *a->len;
        b.pos0 = *a->len - a->n_tokens;
        if (a->cut_share > 0.0f && b.pos0 >= 0) { /* from the hybrid's cut of the length (>>bells) */
            int cut = neo__hybrid_cut(*a->len, a->cut_share);
            b.c0 = cut > b.c0 ? cut : b.c0;
            if (b.c1 <= b.c0) { /* the cut at the length: the CPU has every cell */
                if (!(zero = (float *)neo__calloc(&rt->alloc, sizeof(float) * (size_t)a->head_dim_v))) return NEO_ERR_NO_MEMORY;
                neo__attend_none(&b, zero);
                neo__free(&rt->alloc, zero);
                return NEO_OK;
            }
        }
        if (b.c1 <= b.c0 || b.pos0 < 0) return NEO_ERR_INVALID_ARG;
    }
    return neo__host_attend(state, &b, stream);
}
NEO_ATTN__PRIVATE int neo__standin_set_length(void *state, int *len, int value, int stream) {
    neo__sg_op op;
    int        s;
    if (!len || value < 0) return NEO_ERR_INVALID_ARG;
    memset(&op, 0, sizeof op);
    op.kind = NEO__SG_SET_LENGTH, op.len = len, op.value = value;
    if (neo__sg_keep((neo_runtime *)state, stream, &op, &s)) return s;
    len[0] = value, len[1] = len[2] = 0;
    return NEO_OK;
}
NEO_ATTN__PRIVATE int neo__standin_copy(void *state, void *dst, const void *src, size_t bytes, int stream) {
    neo__sg_op op;
    int        s;
    memset(&op, 0, sizeof op);
    op.kind = NEO__SG_COPY, op.dst = dst, op.src = src, op.bytes = bytes;
    if (neo__sg_keep((neo_runtime *)state, stream, &op, &s)) return s;
    return neo__host_copy(state, dst, src, bytes, stream);
}
NEO_ATTN__PRIVATE int neo__standin_copy2d(void *state, void *dst, size_t dst_pitch, const void *src, size_t src_pitch,
                                          size_t width, size_t rows, int stream) {
    neo__sg_op op;
    int        s = neo__sg_refuse((neo_runtime *)state);
    if (s != NEO_OK) return s;
    memset(&op, 0, sizeof op);
    op.kind = NEO__SG_COPY2D, op.dst = dst, op.dst_pitch = dst_pitch, op.src = src, op.src_pitch = src_pitch;
    op.bytes = width, op.rows = rows;
    if (neo__sg_keep((neo_runtime *)state, stream, &op, &s)) return s;
    return neo__host_copy2d(state, dst, dst_pitch, src, src_pitch, width, rows, stream);
}
/* The host waits for a stream: the late one catches up. */
NEO_ATTN__PRIVATE int neo__standin_stream_sync(void *state, int stream) {
    neo_runtime *rt = (neo_runtime *)state;
    if (neo__sg_refuse(rt) != NEO_OK) return NEO_ERR_UNSUPPORTED;
    return stream == rt->sg_late ? neo__sg_catch_up(rt, -1, 0) : NEO_OK;
}
/* Freeing memory waits for the device first, as cudaFree and cudaFreeHost do. */
NEO_ATTN__PRIVATE void neo__standin_free(void *state, void *ptr) {
    neo__sg_catch_up((neo_runtime *)state, -1, 0);
    neo__host_free(state, ptr);
}
/* The stand-in checks how the library uses events: a stream waits only for an event recorded
   since its last wait for that event, so that on a GPU each wait orders it after the record it
   is meant to (a wait for a record that never came, or for one already waited for, orders
   nothing new and would leave a race there). A record on the late stream is queued with its
   number; a wait on the other stream runs the queue up to it. A capture holds events as a
   graph's edges, so a recording keeps none. */
/* the event's counters (records so far, the count MAIN and COPY last waited for, records run),
   or NULL for an event or stream out of range */
NEO_ATTN__PRIVATE unsigned *neo__standin_ev(void *state, int event, int stream) {
    const int ok = event >= 0 && event < NEO__EVENTS && stream >= NEO__STREAM_MAIN && stream <= NEO__STREAM_COPY;
    return ok ? ((neo_runtime *)state)->sg_ev[event] : NULL;
}
NEO_ATTN__PRIVATE int neo__standin_record(void *state, int event, int stream) {
    neo_runtime *rt = (neo_runtime *)state;
    unsigned    *e = neo__standin_ev(state, event, stream);
    neo__sg_op   op;
    int          s;
    if (!e) return NEO_ERR_INVALID_ARG;
    if (rt->sg_rec) return NEO_OK;
    memset(&op, 0, sizeof op);
    op.kind = NEO__SG_RECORD, op.event = event, op.count = ++e[0];
    if (neo__sg_keep(rt, stream, &op, &s)) return s;
    e[3] = e[0];
    return NEO_OK;
}
NEO_ATTN__PRIVATE int neo__standin_wait(void *state, int stream, int event) {
    neo_runtime *rt = (neo_runtime *)state;
    unsigned    *e = neo__standin_ev(state, event, stream);
    if (!e) return NEO_ERR_INVALID_ARG;
    if (rt->sg_rec) return NEO_OK;
    if (e[0] == e[1 + stream]) {
        neo__log(rt, NEO_LOG_ERROR, "the GPU stand-in: stream %d waits for event %d, not recorded since its last wait for it",
                 stream, event);
        return NEO_ERR_DEVICE;
    }
    e[1 + stream] = e[0];
    /* the late stream's own records are before this wait in its queue, the other's have run */
    return stream == rt->sg_late ? NEO_OK : neo__sg_catch_up(rt, event, e[0]);
}
NEO_ATTN__PRIVATE int neo__standin_event_sync(void *state, int event) {
    neo_runtime *rt = (neo_runtime *)state;
    unsigned    *e = neo__standin_ev(state, event, NEO__STREAM_MAIN);
    if (neo__sg_refuse(rt) != NEO_OK) return NEO_ERR_UNSUPPORTED;
    return e ? neo__sg_catch_up(rt, event, e[0]) : NEO_ERR_INVALID_ARG;
}

/* A graph's handoff (neo__dev_attn.ring / answer), run or recorded. The host waits on it, so the
   late stream catches up first when it is the handoff's. */
NEO_ATTN__PRIVATE int neo__standin_bell(void *state, int kind, void *dst, size_t dst_pitch, const void *src, size_t src_pitch,
                                        size_t width, size_t rows, unsigned *bell, const int *len) {
    neo_runtime *rt = (neo_runtime *)state;
    neo__sg_op   op;
    int          s;
    if (!bell || (kind == NEO__SG_RING && !len)) return NEO_ERR_INVALID_ARG;
    if (rt->sg_rec) {
        memset(&op, 0, sizeof op);
        op.kind = kind, op.dst = dst, op.dst_pitch = dst_pitch, op.src = src, op.src_pitch = src_pitch, op.bytes = width;
        op.rows = rows, op.bell = bell, op.dlen = len;
        return neo__sg_add(rt, rt->sg_rec, &op);
    }
    if (rt->sg_late == NEO__STREAM_MAIN && (s = neo__sg_catch_up(rt, -1, 0)) != NEO_OK) return s;
    if (kind == NEO__SG_RING) {
        unsigned seq = bell[NEO__BELL_SEQ] + 1;
        bell[NEO__BELL_SEQ] = seq;
        neo__host_copy2d(state, dst, dst_pitch, src, src_pitch, width, rows, NEO__STREAM_MAIN);
        bell[NEO__BELL_LEN] = (unsigned)*len;
        __atomic_store_n(&bell[NEO__BELL_RING], seq, __ATOMIC_RELEASE);
        /* The stand-in's device half runs on the runtime's pool and scratch, which the listener's
           CPU half uses: the ring returns once the listener has answered, so they never overlap. */
        neo__spin_until(&bell[NEO__BELL_DONE], seq);
        return NEO_OK;
    }
    neo__spin_until(&bell[NEO__BELL_DONE], bell[NEO__BELL_SEQ]);
    return neo__host_copy2d(state, dst, dst_pitch, src, src_pitch, width, rows, NEO__STREAM_MAIN);
}
NEO_ATTN__PRIVATE int neo__standin_ring(void *state, void *dst, size_t dst_pitch, const void *src, size_t src_pitch, size_t width,
                                        size_t rows, unsigned *bell, const int *len, int stream) {
    (void)stream;
    return neo__standin_bell(state, NEO__SG_RING, dst, dst_pitch, src, src_pitch, width, rows, bell, len);
}
NEO_ATTN__PRIVATE int neo__standin_answer(void *state, void *dst, size_t dst_pitch, const void *src, size_t src_pitch, size_t width,
                                          size_t rows, unsigned *bell, int stream) {
    (void)stream;
    return neo__standin_bell(state, NEO__SG_ANSWER, dst, dst_pitch, src, src_pitch, width, rows, bell, NULL);
}
NEO_ATTN__PRIVATE int neo__standin_host_fn(void *state, void (*fn)(void *), void *arg, int stream) {
    neo__sg_op op;
    int        s;
    if (!fn) return NEO_ERR_INVALID_ARG;
    memset(&op, 0, sizeof op);
    op.kind = NEO__SG_HOST_FN, op.host_fn = fn, op.arg = arg;
    if (neo__sg_keep((neo_runtime *)state, stream, &op, &s)) return s;
    fn(arg);
    return NEO_OK;
}
NEO_ATTN__PRIVATE int neo__standin_capturing(void *state, int stream, unsigned long long *id) {
    const neo_runtime *rt = (const neo_runtime *)state;
    (void)stream;
    if (id) *id = rt && rt->sg_rec ? rt->sg_rec->id : 0;
    return rt && rt->sg_rec != NULL;
}
/* The host's CPU half waits for this flag, so the late stream catches up first when it is the
   copy's (it then runs all at once, as a GPU may). */
NEO_ATTN__PRIVATE int neo__standin_copy_signal(void *state, void *dst, size_t dst_pitch, const void *src, size_t src_pitch,
                                               size_t width, size_t rows, unsigned *flag, unsigned seq, int stream) {
    neo_runtime *rt = (neo_runtime *)state;
    int          s;
    if (neo__sg_refuse(rt) != NEO_OK) return NEO_ERR_UNSUPPORTED;
    if (stream == rt->sg_late && (s = neo__sg_catch_up(rt, -1, 0)) != NEO_OK) return s;
    neo__host_copy2d(state, dst, dst_pitch, src, src_pitch, width, rows, stream);
    __atomic_store_n(flag, seq, __ATOMIC_RELEASE);
    return NEO_OK;
}
/* The flag is set already, or by a CPU half the workers are finishing. */
NEO_ATTN__PRIVATE int neo__standin_await_copy(void *state, void *dst, size_t dst_pitch, const void *src, size_t src_pitch,
                                              size_t width, size_t rows, const unsigned *flag, unsigned seq, int stream) {
    neo__sg_op op;
    int        s;
    if (neo__sg_refuse((neo_runtime *)state) != NEO_OK) return NEO_ERR_UNSUPPORTED;
    memset(&op, 0, sizeof op);
    op.kind = NEO__SG_AWAIT, op.dst = dst, op.dst_pitch = dst_pitch, op.src = src, op.src_pitch = src_pitch;
    op.bytes = width, op.rows = rows, op.bell = (unsigned *)(uintptr_t)flag, op.count = seq;
    if (neo__sg_keep((neo_runtime *)state, stream, &op, &s)) return s;
    neo__spin_until(flag, seq);
    return neo__host_copy2d(state, dst, dst_pitch, src, src_pitch, width, rows, stream);
}
NEO_ATTN__PRIVATE int neo__standin_merge(void *state, const neo__merge_args *m, int stream) {
    neo__sg_op op;
    int        s;
    if (!neo__merge_ok(m)) return NEO_ERR_INVALID_ARG;
    memset(&op, 0, sizeof op);
    op.kind = NEO__SG_MERGE, op.mg = *m;
    if (neo__sg_keep((neo_runtime *)state, stream, &op, &s)) return s;
    return neo__host_merge(state, m, stream);
}
/* 0: the stand-in's ops run when they are called (neo__dev_attn.launch_async). A both-halves
   call asks this just before it hands its CPU half to the pool, on which the stand-in's queued
   attends would also run: the late stream catches up here, so that none is left to run while
   the CPU half's tasks hold the pool waiting for their queries. */
NEO_ATTN__PRIVATE int neo__standin_launch_async(void *state) {
    neo__sg_catch_up((neo_runtime *)state, -1, 0);
    return 0;
}
/* One entry after the other, the last first: a GPU runs a batch's entries in any order, at once,
   so none may depend on another, and this order shows it where one read what an earlier one writes. */
NEO_ATTN__PRIVATE int neo__standin_attend_batch(void *state, const neo__attn_batch *b, int stream) {
    int s = NEO_OK;
    for (int i = b->n - 1; i >= 0 && s == NEO_OK; i--) s = neo__standin_attend(state, &b->entries[i], stream);
    return s;
}
/* Every entry checked, then one after the other (as the CUDA op refuses a batch before any launch). */
NEO_ATTN__PRIVATE int neo__standin_append_batch(void *state, const neo__append_args *a, int n, int stream) {
    int s = NEO_OK;
    if (!a || n < 1) return NEO_ERR_INVALID_ARG;
    for (int i = 0; i < n; i++)
        if (a[i].row0 < 0 && !a[i].len) return NEO_ERR_INVALID_ARG;
    for (int i = 0; i < n && s == NEO_OK; i++) s = neo__standin_append(state, &a[i], stream);
    return s;
}
NEO_ATTN__PRIVATE void neo__standin_tables(neo__dev_mem *m, neo__dev_attn *t) {
    neo__host_tables(m, t);
    m->dev_free = neo__standin_free;
    m->host_free = neo__standin_free;
    m->copy = neo__standin_copy;
    m->copy2d = neo__standin_copy2d;
    m->record = neo__standin_record;
    m->wait = neo__standin_wait;
    m->event_sync = neo__standin_event_sync;
    m->stream_sync = neo__standin_stream_sync;
    m->capturing = neo__standin_capturing;
    t->append = neo__standin_append;
    t->attend = neo__standin_attend;
    t->merge = neo__standin_merge;
    t->copy_signal = neo__standin_copy_signal;
    t->await_copy = neo__standin_await_copy;
    t->launch_async = neo__standin_launch_async;
    t->attend_batch = neo__standin_attend_batch;
    t->append_batch = neo__standin_append_batch;
    t->set_length = neo__standin_set_length;
    t->ring = neo__standin_ring;
    t->answer = neo__standin_answer;
    t->host_fn = neo__standin_host_fn;
}

/* One kept op, run now (neo_runtime.sg_now is set, so that it runs rather than being kept). */
NEO_ATTN__PRIVATE int neo__sg_run(neo_runtime *rt, const neo__sg_op *op) {
    const int M = NEO__STREAM_MAIN;
    unsigned *e;
    switch (op->kind) {
    case NEO__SG_APPEND: return neo__standin_append(rt, &op->ap, M);
    case NEO__SG_ATTEND: return neo__standin_attend(rt, &op->at, M);
    case NEO__SG_SET_LENGTH: return neo__standin_set_length(rt, op->len, op->value, M);
    case NEO__SG_COPY: return neo__host_copy(rt, op->dst, op->src, op->bytes, M);
    case NEO__SG_COPY2D: return neo__host_copy2d(rt, op->dst, op->dst_pitch, op->src, op->src_pitch, op->bytes, op->rows, M);
    case NEO__SG_MATVEC: return op->fn(op->ctx, &op->mv);
    case NEO__SG_RING:
    case NEO__SG_ANSWER:
        return neo__standin_bell(rt, op->kind, op->dst, op->dst_pitch, op->src, op->src_pitch, op->bytes, op->rows, op->bell, op->dlen);
    case NEO__SG_HOST_FN: return neo__standin_host_fn(rt, op->host_fn, op->arg, M);
    case NEO__SG_MERGE: return neo__host_merge(rt, &op->mg, M);
    case NEO__SG_AWAIT:
        neo__spin_until(op->bell, op->count);
        return neo__host_copy2d(rt, op->dst, op->dst_pitch, op->src, op->src_pitch, op->bytes, op->rows, M);
    default: /* RECORD: the record has run (records of one event come from one stream, in order) */
        e = rt->sg_ev[op->event];
        if ((int)(op->count - e[3]) > 0) e[3] = op->count;
        return NEO_OK;
    }
}
/* Runs the late stream's queue in order until the event's record number count has run (event -1:
   the whole queue). The first failure is returned, as a GPU reports a failed kernel at the next
   wait; the rest still run. */
NEO_ATTN__PRIVATE int neo__sg_catch_up(neo_runtime *rt, int event, unsigned count) {
    neo__sgraph *q = rt->sg_q;
    int          s = NEO_OK, r;
    if (!q || rt->sg_now) return NEO_OK;
    rt->sg_now = 1;
    while (q->head < q->n && (event < 0 || (int)(count - rt->sg_ev[event][3]) > 0)) {
        r = neo__sg_run(rt, &q->ops[q->head++]);
        if (s == NEO_OK) s = r;
    }
    if (q->head == q->n) q->head = q->n = 0;
    rt->sg_now = 0;
    return s;
}

/* Tests: begin recording the stand-in's ops (as cudaStreamBeginCapture), end it (the recorded
   graph, or NEO_ERR_UNSUPPORTED when an op broke it), replay a graph, free it. */
NEO_ATTN__PRIVATE neo_status neo__standin_capture_begin(neo_runtime *rt) {
    if (!rt || !rt->gpu || rt->mem.capturing != neo__standin_capturing || rt->sg_rec) return NEO_ERR_INVALID_ARG;
    static unsigned long long ids;
    neo_status                s = (neo_status)neo__sg_catch_up(rt, -1, 0); /* a recording keeps no event */
    if (s != NEO_OK) return s;
    rt->sg_rec = (neo__sgraph *)neo__calloc(&rt->alloc, sizeof *rt->sg_rec);
    if (!rt->sg_rec) return NEO_ERR_NO_MEMORY;
    rt->sg_rec->id = __atomic_add_fetch(&ids, 1, __ATOMIC_RELAXED);
    return NEO_OK;
}
NEO_ATTN__PRIVATE void neo__standin_graph_free(neo_runtime *rt, neo__sgraph *g) {
    if (!g) return;
    neo__free(&rt->alloc, g->ops);
    neo__free(&rt->alloc, g);
}
NEO_ATTN__PRIVATE neo_status neo__standin_capture_end(neo_runtime *rt, neo__sgraph **g) {
    neo__sgraph *r = rt ? rt->sg_rec : NULL;
    *g = NULL;
    if (!r) return NEO_ERR_INVALID_ARG;
    rt->sg_rec = NULL;
    if (!r->broken) return *g = r, NEO_OK;
    neo__standin_graph_free(rt, r);
    return NEO_ERR_UNSUPPORTED;
}
/* The decode loop's host op (a matvec, a norm, the argmax) under a recording or on the late
   MAIN: kept (1), or to be run now (0). */
NEO_ATTN__PRIVATE int neo__standin_keep_mv(neo_runtime *rt, int (*fn)(void *, const neo__matvec_args *), void *ctx,
                                           const neo__matvec_args *a, int *status) {
    neo__sgraph *g = neo__sg_target(rt, NEO__STREAM_MAIN); /* first: every runtime's decode loop asks */
    neo__sg_op   op;
    if (!g) return 0;
    memset(&op, 0, sizeof op);
    op.kind = NEO__SG_MATVEC, op.fn = fn, op.ctx = ctx, op.mv = *a;
    *status = neo__sg_add(rt, g, &op);
    return 1;
}
/* The stand-in's step graphs (neo__dev_model's graph ops) are its recordings. */
NEO_ATTN__PRIVATE int neo__standin_graph_begin(void *state, int stream) {
    (void)stream;
    return (int)neo__standin_capture_begin((neo_runtime *)state);
}
NEO_ATTN__PRIVATE int neo__standin_graph_end(void *state, int stream, void **graph) {
    neo__sgraph *g = NULL;
    int          s = (int)neo__standin_capture_end((neo_runtime *)state, &g);
    (void)stream;
    *graph = g;
    return s;
}
NEO_ATTN__PRIVATE int neo__standin_graph_launch(void *state, void *graph, int stream);
NEO_ATTN__PRIVATE void neo__standin_graph_drop(void *state, void *graph) { neo__standin_graph_free((neo_runtime *)state, (neo__sgraph *)graph); }

/* A replay runs the graph's ops in order, all at once, after the late stream's queue. */
NEO_ATTN__PRIVATE neo_status neo__standin_replay(neo_runtime *rt, const neo__sgraph *g) {
    int s = neo__sg_catch_up(rt, -1, 0), now = rt->sg_now;
    rt->sg_now = 1;
    for (int i = 0; i < g->n && s == NEO_OK; i++) s = neo__sg_run(rt, &g->ops[i]);
    rt->sg_now = now;
    return (neo_status)s;
}
NEO_ATTN__PRIVATE int neo__standin_graph_launch(void *state, void *graph, int stream) {
    (void)stream;
    return (int)neo__standin_replay((neo_runtime *)state, (const neo__sgraph *)graph);
}

/* =============================================================================================
   >>runtime: the descriptor's defaults resolved in one place, the backend chosen, and the few
   device calls the layer, the split paths and the decode loop make
   ============================================================================================= */
/* NULL, or what is wrong with d (for the log). */
NEO_ATTN__PRIVATE const char *neo__check_runtime_desc(const neo_runtime_desc *d) {
    if (d->n_threads < 0 || d->n_threads > 1024) return "n_threads must be in [0, 1024]";
    if ((d->gpu != 0 && d->gpu != 1) || (d->gpu && d->gpu_device < 0))
        return "gpu must be 0 or 1, and gpu_device >= 0 with gpu = 1";
    if (d->gpu_standin < 0 || d->gpu_standin > 3 || (d->gpu_standin && !d->gpu))
        return "gpu_standin must be 0, 1, 2 or 3, and not 0 only with gpu = 1";
    if ((unsigned)d->cpu_isa > (unsigned)NEO_CPU_AMX) return "cpu_isa is not one of its enum's values";
    if (d->parallel_for && d->n_threads == 0) return "parallel_for needs n_threads, the size of the engine's pool";
    if (!d->allocator.alloc != !d->allocator.free) return "allocator needs both alloc and free, or neither";
    return NULL;
}

/* *d = desc with its defaults filled in; on NEO_ERR_INVALID_ARG or _UNSUPPORTED, *why says what is
   wrong (for the log). */
NEO_ATTN__PRIVATE neo_status neo__rt_resolve(const neo_runtime_desc *desc, neo_runtime_desc *d, const char **why) {
    memset(d, 0, sizeof *d);
    if (desc) *d = *desc;
    if ((*why = neo__check_runtime_desc(d)) != NULL) return NEO_ERR_INVALID_ARG;
#if !NEO_ATTN_CUDA
    if (d->gpu && !d->gpu_standin) {
        *why = "gpu = 1 needs a build with NEO_ATTN_CUDA=1 and neo_attn_cuda.cu (or gpu_standin = 1)";
        return NEO_ERR_UNSUPPORTED;
    }
#endif
    if (d->n_threads == 0) {
#if !NEO_ATTN_NO_THREADS
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        d->n_threads = n < 1 ? 1 : n > 1024 ? 1024 : (int)n;
#else
        d->n_threads = 1;
#endif
    }
    return NEO_OK;
}

/* The backend's tables and state: the host's, the stand-in's, or CUDA's. */
NEO_ATTN__PRIVATE neo_status neo__rt_backend(neo_runtime *rt, const neo_runtime_desc *d) {
    memset(&rt->model, 0, sizeof rt->model);
    rt->sg_late = d->gpu_standin == 2 ? NEO__STREAM_COPY : d->gpu_standin == 3 ? NEO__STREAM_MAIN : -1;
    if (rt->sg_late >= 0 && !(rt->sg_q = (neo__sgraph *)neo__calloc(&rt->alloc, sizeof *rt->sg_q))) return NEO_ERR_NO_MEMORY;
    if (d->gpu_standin) {
        neo__standin_tables(&rt->mem, &rt->attn);
        rt->model.graph_begin = neo__standin_graph_begin;
        rt->model.graph_end = neo__standin_graph_end;
        rt->model.graph_launch = neo__standin_graph_launch;
        rt->model.graph_free = neo__standin_graph_drop;
    } else neo__host_tables(&rt->mem, &rt->attn);
    rt->dev_state = rt;
    rt->gpu = d->gpu;
#if NEO_ATTN_CUDA
    if (d->gpu && !d->gpu_standin) {
        neo__dev_mem  mem;
        neo__dev_attn attn;
        void         *st = NULL;
        char          why[160] = "the CUDA companion's ABI differs from this header's";
        neo_status    s;
        memset(&mem, 0, sizeof mem);
        memset(&attn, 0, sizeof attn);
        if ((s = (neo_status)neo__cuda_get_mem(NEO__DEV_MEM_ABI, &mem)) != NEO_OK ||
            (s = (neo_status)neo__cuda_get_attn(NEO__DEV_ATTN_ABI, &attn)) != NEO_OK ||
            (s = (neo_status)neo__cuda_get_model(NEO__DEV_MODEL_ABI, &rt->model)) != NEO_OK ||
            (why[0] = 0, s = (neo_status)mem.init(d->gpu_device, d->gpu_stream, &st, why, sizeof why)) != NEO_OK) {
            memset(&rt->model, 0, sizeof rt->model);
            neo__log(rt, NEO_LOG_ERROR, "neo_runtime_create: GPU %d: %s (%s)", d->gpu_device, neo_status_string(s),
                     why[0] ? why : "no reason given");
            return s;
        }
        rt->mem = mem;
        rt->attn = attn;
        rt->dev_state = st;
    }
#endif
    return NEO_OK;
}

NEO_ATTN__PUBLIC neo_status neo_runtime_create(const neo_runtime_desc *desc, neo_runtime **out) {
    neo_runtime_desc d;
    neo_runtime     *rt;
    neo_status       s;
    const char      *why = NULL;
    if (!out) {
        if (desc) neo__log_desc(desc->log, desc->log_user, NEO_LOG_ERROR, "neo_runtime_create: out is NULL");
        return NEO_ERR_INVALID_ARG;
    }
    *out = NULL;
    if ((s = neo__rt_resolve(desc, &d, &why)) != NEO_OK) {
        neo__log_desc(d.log, d.log_user, NEO_LOG_ERROR, "neo_runtime_create: %s", why);
        return s;
    }
    rt = (neo_runtime *)neo__calloc(&d.allocator, sizeof *rt);
    if (!rt) {
        neo__log_desc(d.log, d.log_user, NEO_LOG_ERROR, "neo_runtime_create: out of host memory");
        return NEO_ERR_NO_MEMORY;
    }
    rt->log = d.log;
    rt->log_user = d.log_user;
    rt->alloc = d.allocator;
    if (!neo__kernels_init(&rt->kern, d.cpu_isa)) {
        neo__log(rt, NEO_LOG_ERROR, "neo_runtime_create: cpu_isa %s: not in this CPU or build", neo_cpu_isa_name(d.cpu_isa));
        neo__free(&d.allocator, rt);
        return NEO_ERR_UNSUPPORTED;
    }
    if ((s = neo__pool_init(&rt->pool, d.n_threads, d.parallel_for, d.parallel_for_user, &rt->alloc)) != NEO_OK) {
        neo__log(rt, NEO_LOG_ERROR, "neo_runtime_create: the thread pool: %s", neo_status_string(s));
        neo__free(&d.allocator, rt);
        return s;
    }
    if (rt->pool.n_threads < d.n_threads)
        neo__log(rt, NEO_LOG_WARN, "neo_runtime_create: %d of %d threads running (%s)", rt->pool.n_threads, d.n_threads,
                 NEO_ATTN_NO_THREADS ? "built with NEO_ATTN_NO_THREADS" : "the system refused the rest");
    if ((s = neo__rt_backend(rt, &d)) != NEO_OK) {
        neo__host_tables(&rt->mem, &rt->attn); /* nothing of the device's to release */
        rt->dev_state = rt;
        neo_runtime_destroy(rt);
        return s;
    }
    rt->scratch = (float **)neo__calloc(&rt->alloc, sizeof(float *) * (size_t)rt->pool.n_threads);
    if (!rt->scratch) {
        neo__log(rt, NEO_LOG_ERROR, "neo_runtime_create: out of host memory");
        neo_runtime_destroy(rt);
        return NEO_ERR_NO_MEMORY;
    }
    *out = rt;
    return NEO_OK;
}

NEO_ATTN__PRIVATE void neo__split_release(neo_runtime *rt);
NEO_ATTN__PRIVATE void neo__batch_release(neo_runtime *rt);
NEO_ATTN__PRIVATE void neo__bells_release(neo_runtime *rt);
NEO_ATTN__PRIVATE void neo__bells_forget(struct neo_layer *L);

NEO_ATTN__PUBLIC void neo_runtime_destroy(neo_runtime *rt) {
    neo_allocator a; /* a copy: rt itself is freed with it */
    if (!rt || !neo__enter(rt, "neo_runtime_destroy")) return;
    a = rt->alloc;
    rt->mem.stream_sync(rt->dev_state, NEO__STREAM_MAIN);
    rt->mem.stream_sync(rt->dev_state, NEO__STREAM_COPY);
    neo__pool_wait(&rt->pool); /* a detached CPU half writes the buffers freed below */
    neo__split_release(rt);
    neo__batch_release(rt);
    rt->mem.host_free(rt->dev_state, rt->lens);
    if (rt->sg_rec) neo__standin_graph_free(rt, rt->sg_rec);
    neo__bells_release(rt);
    neo__standin_graph_free(rt, rt->sg_q);
    rt->mem.release(rt->dev_state);
    if (rt->scratch)
        for (int t = 0; t < rt->pool.n_threads; t++) neo__free(&a, rt->scratch[t]);
    neo__pool_destroy(&rt->pool);
    neo__free(&a, rt->scratch);
    neo__free(&a, rt->partial);
    neo__free(&a, rt->pair_done);
    neo__free(&a, rt);
}

NEO_ATTN__PUBLIC neo_status neo_runtime_get_info(const neo_runtime *rt, neo_runtime_info *info) {
    if (!rt) return NEO_ERR_INVALID_ARG;
    if (!info) {
        neo__log(rt, NEO_LOG_ERROR, "neo_runtime_get_info: info is NULL");
        return NEO_ERR_INVALID_ARG;
    }
    info->n_threads = rt->pool.n_threads;
    info->gpu = rt->gpu;
    info->cpu_isa = rt->kern.isa;
    return NEO_OK;
}

/* The device calls of the layer, the split paths and the decode loop, on MAIN. */
NEO_ATTN__PRIVATE neo_status neo__dev_alloc(neo_runtime *rt, void **ptr, size_t bytes) {
    return (neo_status)rt->mem.dev_alloc(rt->dev_state, ptr, bytes);
}
NEO_ATTN__PRIVATE void neo__dev_free(neo_runtime *rt, void *ptr) { rt->mem.dev_free(rt->dev_state, ptr); }
NEO_ATTN__PRIVATE neo_status neo__dev_copy(neo_runtime *rt, void *dst, const void *src, size_t bytes) {
    return (neo_status)rt->mem.copy(rt->dev_state, dst, src, bytes, NEO__STREAM_MAIN);
}
/* rows of width bytes, from src every src_pitch bytes to dst every dst_pitch */
NEO_ATTN__PRIVATE neo_status neo__dev_copy2d(neo_runtime *rt, void *dst, size_t dst_pitch, const void *src, size_t src_pitch,
                                             size_t width, size_t rows) {
    return (neo_status)rt->mem.copy2d(rt->dev_state, dst, dst_pitch, src, src_pitch, width, rows, NEO__STREAM_MAIN);
}
NEO_ATTN__PRIVATE neo_status neo__dev_sync(neo_runtime *rt) {
    return (neo_status)rt->mem.stream_sync(rt->dev_state, NEO__STREAM_MAIN);
}

/* 1 when the runtime's stream is being captured into a CUDA graph (a GPU runtime's backend says). */
NEO_ATTN__PRIVATE int neo__capturing(neo_runtime *rt) {
    return rt->gpu && rt->mem.capturing && rt->mem.capturing(rt->dev_state, NEO__STREAM_MAIN, NULL) == 1;
}
/* The calls a graph cannot hold (they wait for the device, allocate or read lengths on the host)
   check first, so that they refuse and leave the capture valid. */
NEO_ATTN__PRIVATE neo_status neo__no_capture(neo_runtime *rt, const char *fn) {
    if (!neo__capturing(rt)) return NEO_OK;
    neo__log(rt, NEO_LOG_ERROR, "%s: refused: the runtime's stream is being captured into a CUDA graph, and this call "
             "cannot be captured (the capture is left as it was)", fn);
    return NEO_ERR_UNSUPPORTED;
}

/* Grows a device buffer (or a pinned one when host is 1) to bytes. */
NEO_ATTN__PRIVATE neo_status neo__rt_buffer(neo_runtime *rt, void **buf, size_t *cap, size_t bytes, int host) {
    void *p = NULL;
    int   s;
    if (bytes <= *cap) return NEO_OK;
    /* the old buffer may still be read by queued work */
    if ((s = neo__dev_sync(rt)) != NEO_OK) return (neo_status)s;
    s = host ? rt->mem.host_alloc(rt->dev_state, &p, bytes) : rt->mem.dev_alloc(rt->dev_state, &p, bytes);
    if (s != NEO_OK) return (neo_status)s;
    if (host) rt->mem.host_free(rt->dev_state, *buf);
    else rt->mem.dev_free(rt->dev_state, *buf);
    *buf = p;
    *cap = bytes;
    return NEO_OK;
}

NEO_ATTN__PUBLIC int neo_gpu_heads_for_frac(int n_head_kv, float frac) {
    if (!(frac < 1.0f) || n_head_kv <= 1) return 0; /* NaN counts as "no split" too */
    double g = floor((double)frac * (double)n_head_kv + 0.5);
    if (g < 1.0) return 1;
    if (g > (double)(n_head_kv - 1)) return n_head_kv - 1;
    return (int)g;
}

/* =============================================================================================
   >>layer: the KV cache of one layer, split by head between device and host memory
   ============================================================================================= */
struct neo_layer {
    neo_runtime *rt;
    int          n_head, n_head_kv, head_dim, head_dim_v, n_ctx, group;
    neo_type     kv_type;
    neo_pipeline pipeline;
    float        scale, softcap;
    float       *sinks, *slopes;         /* [n_head] host copies, or NULL */
    float       *sinks_dev, *slopes_dev; /* [n_head] device copies on a GPU runtime, or NULL */
    int          gpu_heads;  /* KV heads [0, gpu_heads) in device memory; the rest on the host */
    void        *k_dev;      /* [gpu_heads][n_ctx][head_dim] of kv_type, device */
    void        *v_dev;      /* [gpu_heads][n_ctx][head_dim_v] */
    void        *k_host;     /* [n_head_kv - gpu_heads][n_ctx][head_dim], pinned on a GPU runtime */
    void        *v_host;     /* [n_head_kv - gpu_heads][n_ctx][head_dim_v] */
    size_t       gpu_bytes, host_bytes;
    int          stage_cells; /* stream-back chunk, in cells */
    float        cpu_share;   /* HYBRID: the CPU's share of the host heads' cells, in (0, 1) */
    /* AUTO: decode calls alternate OFF and ON, timed, until each has NEO__AUTO_PROBES samples,
       then (neo__auto_hybrid) as many of the hybrid, and (neo__auto_hybrid2) as many at a second
       share; then the fastest runs until the context doubles, when the probing starts again */
    double       auto_us[4][NEO__AUTO_PROBES]; /* [OFF, ON, HYBRID, HYBRID at auto_share2] probe times */
    double       auto_cpu[NEO__AUTO_PROBES];   /* the hybrid probes' CPU half: from the call's start to its finish */
    float        auto_share2;                   /* the second hybrid share, from the first's halves */
    int          auto_n;                        /* probes taken in this round */
    int          auto_decided;                  /* 1 once this round's choice is made */
    int          auto_choice;                   /* NEO_PIPELINE_OFF, _ON or _HYBRID once decided */
    float        auto_share;                    /* the hybrid's CPU share from the probes */
    int          auto_len;                      /* length at the decision */
    int          len;
    /* On a GPU runtime the device keeps the length too, so that a captured append replays at the
       right row: [3] = (length, 1 once a replayed append found the layer full, the append op's
       count); see neo__append_args.len. Equal to len between calls, except after replays until neo_runtime_sync. */
    int         *len_dev;
    int          graphed;      /* 1 once an append was captured: in the runtime's graphed list */
    struct neo_layer *gnext, *gprev;
    long long    n_decode, n_overlapped;
    long long    n_decode_was, n_overlapped_was; /* the counters before a batch decode or a session step: a failed one puts them back */
    unsigned long long batch_mark; /* the last batch call that listed this layer (neo_runtime.batch_mark) */
};

NEO_ATTN__PRIVATE int neo__bad_float(float x) { return !(x >= 0.0f) || isinf(x); } /* NaN, negative or inf */

/* NEO_OK, or the status and *why (for the log) of the first thing wrong with d. */
NEO_ATTN__PRIVATE neo_status neo__check_layer_desc(const neo_layer_desc *d, const char **why) {
    *why = NULL;
    if (d->n_head < 1 || d->n_head_kv < 1 || d->n_head_kv > d->n_head || d->n_head % d->n_head_kv)
        *why = "n_head and n_head_kv must be >= 1 and n_head a multiple of n_head_kv";
    else if (d->head_dim < 1 || d->head_dim_v < 0 || d->n_ctx < 1)
        *why = "head_dim and n_ctx must be >= 1, head_dim_v >= 0";
    else if ((unsigned)d->kv_type > (unsigned)NEO_TYPE_F32 || (unsigned)d->pipeline > (unsigned)NEO_PIPELINE_HYBRID)
        *why = "kv_type or pipeline is not one of its enum's values";
    else if (!(d->cpu_share >= 0.0f && d->cpu_share < 1.0f))
        *why = "cpu_share must be in [0, 1) (0 = the default)";
    else if (d->gpu_heads < NEO_GPU_HEADS_NONE || d->gpu_heads > d->n_head_kv)
        *why = "gpu_heads must be in [0, n_head_kv] or NEO_GPU_HEADS_NONE";
    else if (neo__bad_float(d->scale) || neo__bad_float(d->softcap) || neo__bad_float(d->max_alibi_bias))
        *why = "scale, softcap and max_alibi_bias must be finite and >= 0";
    else if (d->sinks)
        for (int h = 0; h < d->n_head && !*why; h++)
            if (isnan(d->sinks[h])) *why = "a sink is NaN";
    if (*why) return NEO_ERR_INVALID_ARG;
    if (d->n_head > NEO__MAX_HEADS || d->head_dim > NEO__MAX_HEAD_DIM || d->head_dim_v > NEO__MAX_HEAD_DIM) {
        *why = "n_head or a head size is beyond what this build supports (NEO__MAX_HEADS, NEO__MAX_HEAD_DIM)";
        return NEO_ERR_UNSUPPORTED;
    }
    return NEO_OK;
}

/* A host array of n floats copied to new device memory. */
NEO_ATTN__PRIVATE neo_status neo__to_device(neo_runtime *rt, float **dst, const float *src, size_t n) {
    neo_status s;
    if ((s = neo__dev_alloc(rt, (void **)dst, n * sizeof(float))) != NEO_OK) return s;
    if ((s = neo__dev_copy(rt, *dst, src, n * sizeof(float))) != NEO_OK) return s;
    return neo__dev_sync(rt);
}

/* KV heads in device memory for a gpu_heads value (checked): a CPU runtime keeps every head on the
   host; on a GPU, 0 means all on the device and NEO_GPU_HEADS_NONE none. */
NEO_ATTN__PRIVATE int neo__device_heads(const neo_runtime *rt, int n_head_kv, int gpu_heads) {
    return !rt->gpu || gpu_heads == NEO_GPU_HEADS_NONE ? 0 : gpu_heads ? gpu_heads : n_head_kv;
}

/* The layer's shape from a checked descriptor. A CPU runtime keeps every head on the host; on a
   GPU, gpu_heads 0 means all on the device. */
NEO_ATTN__PRIVATE void neo__layer_shape(neo_layer *L, const neo_layer_desc *desc) {
    L->n_head = desc->n_head;
    L->n_head_kv = desc->n_head_kv;
    L->head_dim = desc->head_dim;
    L->head_dim_v = desc->head_dim_v ? desc->head_dim_v : desc->head_dim;
    L->n_ctx = desc->n_ctx;
    L->group = desc->n_head / desc->n_head_kv;
    L->kv_type = desc->kv_type;
    L->pipeline = desc->pipeline;
    L->cpu_share = desc->cpu_share > 0.0f ? desc->cpu_share : NEO__HYBRID_SHARE;
    L->scale = desc->scale > 0.0f ? desc->scale : 1.0f / sqrtf((float)desc->head_dim);
    L->softcap = desc->softcap;
    L->gpu_heads = neo__device_heads(L->rt, desc->n_head_kv, desc->gpu_heads);
}

/* The cache: device heads in device memory, host heads in the backend's host memory (pinned on
   a GPU, because the split paths copy it with DMA). */
NEO_ATTN__PRIVATE neo_status neo__layer_alloc_kv(neo_layer *L) {
    neo_runtime *rt = L->rt;
    size_t       es = neo__type_size(L->kv_type), row, hh = (size_t)(L->n_head_kv - L->gpu_heads), gk, gv, hk, hv;
    neo_status   s;
    if (!neo__mul(es, (size_t)L->n_ctx, &row) || !neo__mul3(row, (size_t)L->gpu_heads, (size_t)L->head_dim, &gk) ||
        !neo__mul3(row, (size_t)L->gpu_heads, (size_t)L->head_dim_v, &gv) || !neo__mul3(row, hh, (size_t)L->head_dim, &hk) ||
        !neo__mul3(row, hh, (size_t)L->head_dim_v, &hv) || !neo__add(gk, gv, &L->gpu_bytes) || !neo__add(hk, hv, &L->host_bytes))
        return NEO_ERR_NO_MEMORY;
    if (L->gpu_heads && ((s = neo__dev_alloc(rt, &L->k_dev, gk)) != NEO_OK || (s = neo__dev_alloc(rt, &L->v_dev, gv)) != NEO_OK))
        return s;
    if (hh && ((s = (neo_status)rt->mem.host_alloc(rt->dev_state, &L->k_host, hk)) != NEO_OK ||
               (s = (neo_status)rt->mem.host_alloc(rt->dev_state, &L->v_host, hv)) != NEO_OK))
        return s;
    return NEO_OK;
}

/* Sinks and ALiBi slopes, on the host and, on a GPU runtime, on the device. */
NEO_ATTN__PRIVATE neo_status neo__layer_params(neo_layer *L, const neo_layer_desc *desc) {
    neo_runtime *rt = L->rt;
    neo_status   s;
    if (desc->sinks) {
        if (!(L->sinks = (float *)neo__alloc(&rt->alloc, sizeof(float) * (size_t)L->n_head))) return NEO_ERR_NO_MEMORY;
        memcpy(L->sinks, desc->sinks, sizeof(float) * (size_t)L->n_head);
    }
    if (desc->max_alibi_bias > 0.0f) {
        int    n2 = 1;
        double m0, m1;
        while (n2 * 2 <= L->n_head) n2 *= 2;
        m0 = pow(2.0, -(double)desc->max_alibi_bias / n2);
        m1 = pow(2.0, -(double)desc->max_alibi_bias / (2.0 * n2));
        if (!(L->slopes = (float *)neo__alloc(&rt->alloc, sizeof(float) * (size_t)L->n_head))) return NEO_ERR_NO_MEMORY;
        for (int h = 0; h < L->n_head; h++) L->slopes[h] = (float)(h < n2 ? pow(m0, h + 1) : pow(m1, 2 * (h - n2) + 1));
    }
    if (rt->gpu && ((L->sinks && (s = neo__to_device(rt, &L->sinks_dev, L->sinks, (size_t)L->n_head)) != NEO_OK) ||
                    (L->slopes && (s = neo__to_device(rt, &L->slopes_dev, L->slopes, (size_t)L->n_head)) != NEO_OK)))
        return s;
    return NEO_OK;
}

NEO_ATTN__PRIVATE neo_status neo__split_prepare(neo_layer *L);
NEO_ATTN__PRIVATE void       neo__layer_destroy(neo_layer *L);
/* The CUDA kernels index cells with ints and keep a position plus a chunk below INT_MAX
   (neo_attn_cuda.cu's NEO__CU_MAX_CELLS); the host paths take any n_ctx. */
#define NEO__GPU_MAX_CTX (1 << 30)

NEO_ATTN__PRIVATE neo_status neo__layer_create(neo_runtime *rt, const neo_layer_desc *desc, neo_layer **out) {
    neo_layer  *L;
    neo_status  s;
    size_t      partial, nq, chunks;
    const char *why;
    if ((s = neo__check_layer_desc(desc, &why)) != NEO_OK) {
        neo__log(rt, NEO_LOG_ERROR, "neo_layer_create: %s", why);
        return s;
    }
    if (rt->gpu && rt->dev_state != (void *)rt && desc->n_ctx > NEO__GPU_MAX_CTX) {
        neo__log(rt, NEO_LOG_ERROR, "neo_layer_create: n_ctx %d: a layer of a CUDA runtime holds at most %d cells", desc->n_ctx,
                 NEO__GPU_MAX_CTX);
        return NEO_ERR_INVALID_ARG;
    }
    L = (neo_layer *)neo__calloc(&rt->alloc, sizeof *L);
    if (!L) {
        neo__log(rt, NEO_LOG_ERROR, "neo_layer_create: out of host memory");
        return NEO_ERR_NO_MEMORY;
    }
    L->rt = rt;
    neo__layer_shape(L, desc);
    if ((s = neo__layer_alloc_kv(L)) != NEO_OK || (s = neo__layer_params(L, desc)) != NEO_OK) goto fail;
    if (rt->gpu && ((s = neo__dev_alloc(rt, (void **)&L->len_dev, 3 * sizeof(int))) != NEO_OK ||
                    (s = (neo_status)rt->attn.set_length(rt->dev_state, L->len_dev, 0, NEO__STREAM_MAIN)) != NEO_OK))
        goto fail;
    nq = (size_t)neo__max_queries(L->group);
    if (rt->kern.tile_pv && neo__tile_fits(L->kv_type, L->head_dim, L->head_dim_v, (int)nq)) neo__tiles_permit(rt);
    chunks = (size_t)neo__max_chunks(L->n_ctx);
    partial = (size_t)L->n_head * chunks * ((size_t)L->head_dim_v + 2);
    if ((s = neo__rt_reserve(rt, neo__scratch_floats(&rt->kern, L->kv_type, L->head_dim, L->head_dim_v, (int)nq), partial,
                             (size_t)L->n_head_kv * 2 * chunks)) != NEO_OK)
        goto fail;
    if (rt->gpu && L->gpu_heads < L->n_head_kv && (s = neo__split_prepare(L)) != NEO_OK) goto fail;
    *out = L;
    return NEO_OK;
fail:
    neo__log(rt, NEO_LOG_ERROR, "neo_layer_create: %s (a %d/%d/%d layer of %d cells, %zu bytes of cache on the host, %zu on the "
             "GPU)", neo_status_string(s), L->n_head, L->n_head_kv, L->head_dim, L->n_ctx, L->host_bytes, L->gpu_bytes);
    neo__layer_destroy(L);
    return s;
}

NEO_ATTN__PUBLIC neo_status neo_layer_create(neo_runtime *rt, const neo_layer_desc *desc, neo_layer **out) {
    neo_status s;
    if (out) *out = NULL;
    if (!rt || !neo__enter(rt, "neo_layer_create")) return NEO_ERR_INVALID_ARG; /* no runtime: no logger to tell */
    if ((s = neo__no_capture(rt, "neo_layer_create")) != NEO_OK) {
    } else if (out && desc) s = neo__layer_create(rt, desc, out);
    else {
        neo__log(rt, NEO_LOG_ERROR, "neo_layer_create: %s is NULL", out ? "desc" : "out");
        s = NEO_ERR_INVALID_ARG;
    }
    neo__leave(rt);
    return s;
}

NEO_ATTN__PRIVATE void neo__layer_destroy(neo_layer *L) {
    neo_runtime *rt;
    if (!L) return;
    rt = L->rt;
    neo__dev_sync(rt);         /* queued work may read the cache */
    neo__pool_wait(&rt->pool); /* and a detached CPU half */
    neo__dev_free(rt, L->k_dev);
    neo__dev_free(rt, L->v_dev);
    neo__dev_free(rt, L->sinks_dev);
    neo__dev_free(rt, L->slopes_dev);
    neo__dev_free(rt, L->len_dev);
    neo__bells_forget(L);
    if (L->graphed) { /* out of the runtime's list */
        if (L->gprev) L->gprev->gnext = L->gnext;
        else rt->graphed = L->gnext;
        if (L->gnext) L->gnext->gprev = L->gprev;
    }
    rt->mem.host_free(rt->dev_state, L->k_host);
    rt->mem.host_free(rt->dev_state, L->v_host);
    neo__free(&rt->alloc, L->sinks);
    neo__free(&rt->alloc, L->slopes);
    neo__free(&rt->alloc, L);
}

NEO_ATTN__PUBLIC void neo_layer_destroy(neo_layer *L) {
    neo_runtime *rt = L ? L->rt : NULL;
    if (!L || !neo__enter(rt, "neo_layer_destroy")) return;
    if (neo__no_capture(rt, "neo_layer_destroy") == NEO_OK) neo__layer_destroy(L);
    neo__leave(rt);
}

NEO_ATTN__PRIVATE void neo__append_args_init(const neo_layer *L, neo__append_args *a, const float *k, const float *v, int n_tokens) {
    memset(a, 0, sizeof *a);
    a->kv_cells = L->n_ctx;
    a->row0 = L->rt->capturing ? -1 : L->len; /* a captured append: at the device's length when replayed */
    a->len = L->len_dev;
    a->src_k = k;
    a->src_v = v;
    a->n_tokens = n_tokens;
    a->n_head_kv = L->n_head_kv;
    a->head_dim = L->head_dim;
    a->head_dim_v = L->head_dim_v;
    a->kv_type = (int)L->kv_type;
}

NEO_ATTN__PRIVATE void neo__appended(neo_layer *L, int n_tokens);
/* The backend's append of n_tokens rows into L, checked: the device heads' rows, and the host
   heads' straight into their (pinned) host memory. */
NEO_ATTN__PRIVATE neo_status neo__append_prep(neo_layer *L, const float *k, const float *v, int n_tokens, neo__append_args *a) {
    neo_runtime *rt = L->rt;
    if (!k || !v || n_tokens < 1) {
        neo__log(rt, NEO_LOG_ERROR, "neo_attn_append: %s", n_tokens < 1 ? "n_tokens < 1" : "k or v is NULL");
        return NEO_ERR_INVALID_ARG;
    }
    /* a captured append finds out at each replay (neo_runtime_sync reports it) */
    if (n_tokens > L->n_ctx - (rt->capturing ? 0 : L->len)) {
        neo__log(rt, NEO_LOG_WARN, "neo_attn_append: %d tokens do not fit: the layer holds %d of n_ctx %d", n_tokens, L->len,
                 L->n_ctx);
        return NEO_ERR_FULL;
    }
    neo__append_args_init(L, a, k, v, n_tokens);
    a->h1 = L->n_head_kv;
    a->k = L->k_dev;
    a->v = L->v_dev;
    if (L->gpu_heads < L->n_head_kv) {
        a->k2 = L->k_host;
        a->v2 = L->v_host;
        a->h2 = L->gpu_heads;
    }
    return NEO_OK;
}

NEO_ATTN__PRIVATE neo_status neo__attn_append(neo_layer *L, const float *k, const float *v, int n_tokens) {
    neo_runtime     *rt = L->rt;
    neo__append_args a;
    int              s;
    if ((s = neo__append_prep(L, k, v, n_tokens, &a)) != NEO_OK) return (neo_status)s;
    if ((s = rt->attn.append(rt->dev_state, &a, NEO__STREAM_MAIN)) != NEO_OK) {
        neo__log(rt, NEO_LOG_ERROR, "neo_attn_append: %s", neo_status_string((neo_status)s));
        return (neo_status)s;
    }
    neo__appended(L, n_tokens);
    return NEO_OK;
}

/* The length after an append: now, or, for a captured one, on the device at each replay (the
   layer joins the runtime's list that neo_runtime_sync reads back). */
NEO_ATTN__PRIVATE void neo__appended(neo_layer *L, int n_tokens) {
    neo_runtime *rt = L->rt;
    if (!rt->capturing) {
        L->len += n_tokens;
        return;
    }
    if (L->graphed) return;
    L->graphed = 1;
    L->gprev = NULL;
    L->gnext = rt->graphed;
    if (rt->graphed) rt->graphed->gprev = L;
    rt->graphed = L;
}

/* Sets rt->capturing for a call that may be captured. */
NEO_ATTN__PRIVATE int neo__enter_cap(neo_runtime *rt, const char *fn) {
    if (!neo__enter(rt, fn)) return 0;
    rt->capturing = neo__capturing(rt);
    return 1;
}
NEO_ATTN__PRIVATE void neo__leave_cap(neo_runtime *rt) {
    rt->capturing = 0;
    neo__leave(rt);
}

NEO_ATTN__PUBLIC neo_status neo_attn_append(neo_layer *L, const float *k, const float *v, int n_tokens) {
    neo_status s;
    if (!L || !neo__enter_cap(L->rt, "neo_attn_append")) return NEO_ERR_INVALID_ARG;
    s = neo__attn_append(L, k, v, n_tokens);
    neo__leave_cap(L->rt);
    return s;
}

NEO_ATTN__PUBLIC int neo_layer_length(const neo_layer *L) { return L ? L->len : 0; }

NEO_ATTN__PRIVATE neo_status neo__layer_truncate(neo_layer *L, int n_tokens, const char *fn) {
    neo_status s;
    if (n_tokens < 0 || n_tokens > L->len) {
        neo__log(L->rt, NEO_LOG_ERROR, "%s: n_tokens %d is outside [0, %d], the length", fn, n_tokens, L->len);
        return NEO_ERR_INVALID_ARG;
    }
    if (L->len_dev && (s = (neo_status)L->rt->attn.set_length(L->rt->dev_state, L->len_dev, n_tokens, NEO__STREAM_MAIN)) != NEO_OK) {
        neo__log(L->rt, NEO_LOG_ERROR, "%s: %s", fn, neo_status_string(s));
        return s;
    }
    L->len = n_tokens;
    return NEO_OK;
}

NEO_ATTN__PUBLIC neo_status neo_layer_truncate(neo_layer *L, int n_tokens) {
    neo_status s;
    if (!L || !neo__enter(L->rt, "neo_layer_truncate")) return NEO_ERR_INVALID_ARG;
    if ((s = neo__no_capture(L->rt, "neo_layer_truncate")) == NEO_OK) s = neo__layer_truncate(L, n_tokens, "neo_layer_truncate");
    neo__leave(L->rt);
    return s;
}

NEO_ATTN__PUBLIC neo_status neo_layer_get_info(const neo_layer *L, neo_layer_info *info) {
    if (!L) return NEO_ERR_INVALID_ARG;
    if (!info) {
        neo__log(L->rt, NEO_LOG_ERROR, "neo_layer_get_info: info is NULL");
        return NEO_ERR_INVALID_ARG;
    }
    memset(info, 0, sizeof *info);
    info->gpu_heads = L->gpu_heads;
    info->cpu_heads = L->n_head_kv - L->gpu_heads;
    info->gpu_bytes = L->gpu_bytes;
    info->host_bytes = L->host_bytes;
    info->pipeline = L->pipeline;
    info->n_decode = L->n_decode;
    info->n_overlapped = L->n_overlapped;
    return NEO_OK;
}

/* =============================================================================================
   >>split: one attention call over both halves of a split layer: stream-back (OFF), both halves
   at once (ON) with their handoff state, the host cells shared by the CPU and the stream-back
   (HYBRID), and AUTO
   =============================================================================================
   Events: START (the queries are ready on MAIN), READY0/1 (a stream-back chunk is on the
   device in stage buffer 0/1), USED0/1 (the attention of the last chunk put in that buffer is
   done, so the buffer may be refilled), WOKE (a captured call's wake of the listener has run:
   >>bells), HOST (an OFF decode's host heads have been attended in place). */
enum { NEO__EV_START, NEO__EV_READY0, NEO__EV_READY1, NEO__EV_USED0, NEO__EV_USED1, NEO__EV_WOKE, NEO__EV_HOST };

/* The split paths' buffers, shared by a runtime's layers (used one at a time), grown on demand,
   and the both-halves handoff's state. */
typedef struct neo__split {
    void          *d_stage[2];     /* device: stream-back chunks one after another (neo__stage_at) */
    size_t         d_stage_bytes[2];
    void          *d_state;        /* device: stream-back online-softmax state */
    size_t         d_state_bytes;
    void          *d_cstate;       /* device: the hybrid's copy of the CPU's state, [n_head][head_dim_v + 2] */
    size_t         d_cstate_bytes;
    void          *h_q, *h_out;    /* pinned: the CPU half's queries and output */
    size_t         h_q_bytes, h_out_bytes;
    void          *d_pull;         /* device: a batch's ON outputs, pulled up at once, then copied to their rows */
    size_t         d_pull_bytes;
    /* pinned, read and written by both sides: [0] = the device has put the queries in h_q,
       [NEO__FLAG_OUT] = the host has put the output in h_out; each holds the number of the
       both-halves call (seq) it was last set for. Apart, so the two writers never share a line. */
    unsigned      *hand;
    unsigned       seq;
    neo__attn_args args;           /* the both-halves call's CPU half, an asynchronous job: outlives the call */
    neo__attn_job  job;
    double         t_out;          /* neo__now_us() when the CPU half last finished (AUTO's probes) */
} neo__split;

NEO_ATTN__PRIVATE void neo__split_release(neo_runtime *rt) {
    neo__split *S = rt->split;
    if (!S) return;
    neo__dev_free(rt, S->d_stage[0]);
    neo__dev_free(rt, S->d_stage[1]);
    neo__dev_free(rt, S->d_state);
    neo__dev_free(rt, S->d_pull);
    neo__dev_free(rt, S->d_cstate);
    rt->mem.host_free(rt->dev_state, S->h_q);
    rt->mem.host_free(rt->dev_state, S->h_out);
    rt->mem.host_free(rt->dev_state, S->hand);
    neo__free(&rt->alloc, S);
    rt->split = NULL;
}

/* Where a stream-back chunk goes in the stage buffers: chunks are put one after another in the
   buffer in use (buf, from byte at on); one that does not fit there goes to the start of the
   other, which is refilled only once the attention of the last chunk put in it is done (USED).
   So a batch's short chunks (a layer's host cells at a short context) fill a buffer before the
   copies wait for any attention, which on MAIN comes after the batch's device heads. used: bit b
   set once buffer b has a chunk since COPY waited for START. group: NULL, each chunk attended as
   it lands (a single call); else room for a chunk a layer, where a batch's chunks in buffer buf
   wait to be attended in one launch (neo__stage_flush): when the chunks move to the other
   buffer, before a layer's next chunk (which continues the state of its last) and at the
   batch's end. Zero (with group) before the first chunk. */
typedef struct neo__stage_at {
    int             buf, used;
    size_t          at;
    neo__attn_args *group; /* [n_group] host memory */
    int             n_group;
} neo__stage_at;
#define NEO__STAGE_ALIGN ((size_t)256) /* where a chunk's K and V blocks start in a stage buffer */

NEO_ATTN__PRIVATE size_t neo__stage_round(size_t bytes) { return (bytes + NEO__STAGE_ALIGN - 1) & ~(NEO__STAGE_ALIGN - 1); }

/* A split layer's share of the runtime's split state: two stage buffers, each of room for a
   stream-back chunk of about NEO_ATTN_STAGE_BYTES. */
NEO_ATTN__PRIVATE neo_status neo__split_prepare(neo_layer *L) {
    neo_runtime *rt = L->rt;
    neo__split  *S = rt->split;
    size_t       es = neo__type_size(L->kv_type), cells, room;
    size_t       cell_bytes = (size_t)(L->n_head_kv - L->gpu_heads) * (size_t)(L->head_dim + L->head_dim_v) * es;
    neo_status   s;
    if (!S && !(S = rt->split = (neo__split *)neo__calloc(&rt->alloc, sizeof *S))) return NEO_ERR_NO_MEMORY;
    cells = NEO_ATTN_STAGE_BYTES / cell_bytes;
    L->stage_cells = cells < NEO__BLOCK ? NEO__BLOCK : cells > (size_t)L->n_ctx ? L->n_ctx : (int)cells;
    /* each buffer keeps its own size: the largest chunk of any split layer of the runtime, and
       the alignment of its K and V blocks (neo__stage_put) */
    room = cell_bytes * L->stage_cells + 2 * NEO__STAGE_ALIGN;
    if ((s = neo__rt_buffer(rt, &S->d_stage[0], &S->d_stage_bytes[0], room, 0)) != NEO_OK) return s;
    return neo__rt_buffer(rt, &S->d_stage[1], &S->d_stage_bytes[1], room, 0);
}

/* 1 when some of L's heads are in host memory on a GPU runtime (NEO_GPU_HEADS_NONE included) */
NEO_ATTN__PRIVATE int neo__is_split(const neo_layer *L) { return L->rt->gpu && L->gpu_heads < L->n_head_kv; }

/* The device half of a split layer, if it has one (not under NEO_GPU_HEADS_NONE). */
NEO_ATTN__PRIVATE neo_status neo__gpu_half(neo_runtime *rt, const neo__attn_args *a) {
    return a->h1 > a->h0 ? (neo_status)rt->attn.attend(rt->dev_state, a, NEO__STREAM_MAIN) : NEO_OK;
}

/* n attends on stream (e: [n], read during the call only): through the backend's attend_batch,
   or one attend each when it has none or n is 1 (a single call's chunk). */
NEO_ATTN__PRIVATE neo_status neo__attend_many(neo_runtime *rt, neo__attn_args *e, int n, int stream) {
    neo__attn_batch b;
    int             s = NEO_OK;
    if (!rt->attn.attend_batch || n == 1) {
        for (int i = 0; i < n && s == NEO_OK; i++) s = rt->attn.attend(rt->dev_state, &e[i], stream);
        return (neo_status)s;
    }
    b.entries = e;
    b.n = n;
    return (neo_status)rt->attn.attend_batch(rt->dev_state, &b, stream);
}

/* An attend of L's last n_tokens positions at length len (no heads chosen yet). */
NEO_ATTN__PRIVATE void neo__layer_args_at(const neo_layer *L, neo__attn_args *a, const float *q, int n_tokens, float *out, int dev,
                                          int len) {
    memset(a, 0, sizeof *a);
    a->q = q;
    a->out = out;
    a->n_tokens = n_tokens;
    a->pos0 = len - n_tokens;
    a->c0 = 0;
    a->c1 = len;
    a->kv_cells = L->n_ctx;
    a->n_head = L->n_head;
    a->n_head_kv = L->n_head_kv;
    a->head_dim = L->head_dim;
    a->head_dim_v = L->head_dim_v;
    a->kv_type = (int)L->kv_type;
    a->scale = L->scale;
    a->softcap = L->softcap;
    a->sinks = dev ? L->sinks_dev : L->sinks;
    a->slopes = dev ? L->slopes_dev : L->slopes;
}
/* The same at the layer's length: now, or, in a call being captured, the device's at each
   replay (neo__attn_args.len; the launch sized for n_ctx). */
NEO_ATTN__PRIVATE void neo__layer_args(const neo_layer *L, neo__attn_args *a, const float *q, int n_tokens, float *out, int dev) {
    neo__layer_args_at(L, a, q, n_tokens, out, dev, L->rt->capturing ? L->n_ctx : L->len);
    if (L->rt->capturing) a->len = L->len_dev;
}

/* The n chunks e ([n]) of buffer buf, their copies queued on COPY: attended on MAIN in one
   launch once those land, after which the buffer may be refilled (USED). */
NEO_ATTN__PRIVATE int neo__stage_attend(neo_runtime *rt, int buf, neo__attn_args *e, int n) {
    void *S = rt->dev_state;
    int   s;
    if ((s = rt->mem.record(S, NEO__EV_READY0 + buf, NEO__STREAM_COPY)) != NEO_OK ||
        (s = rt->mem.wait(S, NEO__STREAM_MAIN, NEO__EV_READY0 + buf)) != NEO_OK || (s = neo__attend_many(rt, e, n, NEO__STREAM_MAIN)) != NEO_OK)
        return s;
    return rt->mem.record(S, NEO__EV_USED0 + buf, NEO__STREAM_MAIN);
}
/* The chunks waiting in P->group, attended (neo__stage_at). */
NEO_ATTN__PRIVATE int neo__stage_flush(neo_runtime *rt, neo__stage_at *P) {
    const int n = P->n_group;
    P->n_group = 0;
    return n ? neo__stage_attend(rt, P->buf, P->group, n) : NEO_OK;
}

/* The place of a chunk of kb + vb bytes (K block, V block): *k and *v in buffer P->buf, COPY
   having waited for the buffer's last attention where it moved to a used one (the chunks
   waiting in the one it left attended first). */
NEO_ATTN__PRIVATE int neo__stage_put(neo_runtime *rt, neo__stage_at *P, size_t kb, size_t vb, char **k, char **v) {
    neo__split  *SP = rt->split;
    const size_t need = neo__stage_round(kb) + vb;
    int          s;
    if (P->at + need > SP->d_stage_bytes[P->buf]) {
        if ((s = neo__stage_flush(rt, P)) != NEO_OK) return s;
        P->buf ^= 1, P->at = 0;
        if ((P->used >> P->buf & 1) && (s = rt->mem.wait(rt->dev_state, NEO__STREAM_COPY, NEO__EV_USED0 + P->buf)) != NEO_OK)
            return s;
    }
    *k = (char *)SP->d_stage[P->buf] + P->at;
    *v = *k + neo__stage_round(kb);
    P->at = neo__stage_round(P->at + need);
    P->used |= 1 << P->buf;
    return NEO_OK;
}

/* Stream-back: the host heads' valid cells from `first` on go to the device in chunks of at most
   stage_cells cells (neo__stage_at) and are attended there as they arrive, carrying an
   online-softmax state from chunk to chunk, finished into out, or left in state
   ([n_tokens][n_head][head_dim_v + 2], device) when out is NULL (the hybrid); a NULL state is
   the split's d_state, grown here. The caller has made COPY wait for START; *P is where the
   chunks streamed since then left the stage buffers (a batch streams several layers through
   them, and attends a buffer's chunks in one launch). A chunk is [host heads][its cells][head_dim]
   of K, then the same of V. */
NEO_ATTN__PRIVATE neo_status neo__stream_back(neo_layer *L, const float *q, int n_tokens, float *out, int first,
                                              neo__stage_at *P, float *state) {
    neo_runtime   *rt = L->rt;
    neo__split    *SP = rt->split;
    neo__dev_mem  *D = &rt->mem;
    void          *S = rt->dev_state;
    neo__attn_args a;
    int            hh = L->n_head_kv - L->gpu_heads, s, CH = L->stage_cells;
    size_t         es = neo__type_size(L->kv_type), kpitch = (size_t)L->n_ctx * L->head_dim * es;
    size_t         vpitch = (size_t)L->n_ctx * L->head_dim_v * es;
    size_t         state_bytes = (size_t)n_tokens * L->n_head * ((size_t)L->head_dim_v + 2) * sizeof(float);
    if (!state && (s = neo__rt_buffer(rt, &SP->d_state, &SP->d_state_bytes, state_bytes, 0)) != NEO_OK) return (neo_status)s;
    neo__layer_args(L, &a, q, n_tokens, NULL, 1);
    a.kv_h0 = a.h0 = L->gpu_heads;
    a.h1 = L->n_head_kv;
    a.state = state ? state : (float *)SP->d_state;
    for (int c0 = first, c1; c0 < L->len; c0 = c1) {
        char  *kst, *vst;
        size_t kw, vw;
        c1 = L->len - c0 > CH ? c0 + CH : L->len; /* not c0 + CH past the end of the int range */
        kw = (size_t)(c1 - c0) * L->head_dim * es, vw = (size_t)(c1 - c0) * L->head_dim_v * es;
        if ((c0 > first && (s = neo__stage_flush(rt, P)) != NEO_OK) || /* the state this chunk continues */
            (s = neo__stage_put(rt, P, kw * (size_t)hh, vw * (size_t)hh, &kst, &vst)) != NEO_OK ||
            (s = D->copy2d(S, kst, kw, (const char *)L->k_host + (size_t)c0 * L->head_dim * es, kpitch, kw, (size_t)hh,
                           NEO__STREAM_COPY)) != NEO_OK ||
            (s = D->copy2d(S, vst, vw, (const char *)L->v_host + (size_t)c0 * L->head_dim_v * es, vpitch, vw, (size_t)hh,
                           NEO__STREAM_COPY)) != NEO_OK)
            return (neo_status)s;
        a.k = kst;
        a.v = vst;
        a.kv_cells = c1 - c0;
        a.cell_base = a.c0 = c0;
        a.c1 = c1;
        a.accumulate = c0 > first;
        a.out = c1 == L->len ? out : NULL;
        if (P->group)
            P->group[P->n_group++] = a;
        else if ((s = neo__stage_attend(rt, P->buf, &a, 1)) != NEO_OK)
            return (neo_status)s;
    }
    return NEO_OK;
}
/* OFF's stream-back: every valid cell, finished into out. */
NEO_ATTN__PRIVATE neo_status neo__attend_streamed(neo_layer *L, const float *q, int n_tokens, float *out, neo__stage_at *P) {
    return neo__stream_back(L, q, n_tokens, out, 0, P, NULL);
}

/* L's host heads as an attend that the device reads in place over the bus. */
NEO_ATTN__PRIVATE void neo__host_in_place(const neo_layer *L, neo__attn_args *a) {
    a->k = L->k_host, a->v = L->v_host, a->kv_h0 = a->h0 = L->gpu_heads, a->h1 = L->n_head_kv;
    a->kv_host = 1;
}

/* 1 when an OFF call of L reads its host heads in place (neo__attend_in_place): a decode whose
   host heads' valid cells hold at most NEO_ATTN_IN_PLACE_BYTES, at the shape whose device kernel
   reads host memory at near the copy engine's rate (head_dim 128, f16 or bf16), with a GQA
   group of at most 8, one query tile of that kernel, so that each host row crosses the bus
   once. There the copies' fixed costs, and the streamed attend that waits for them, outweigh
   what the copy engine's rate would save (docs/BENCHMARKS.md, "Reading the host heads in
   place"). neo__in_place_cells: the same for `cells` of them (a batch's hybrid cells after its
   cut). */
NEO_ATTN__PRIVATE int neo__in_place_cells(const neo_layer *L, int n_tokens, int cells) {
    size_t cell = (size_t)(L->n_head_kv - L->gpu_heads) * (size_t)(L->head_dim + L->head_dim_v) * neo__type_size(L->kv_type);
    return n_tokens == 1 && L->kv_type != NEO_TYPE_F32 && L->head_dim == 128 && L->head_dim_v == 128 &&
           L->group <= 8 && (size_t)cells * cell <= (size_t)NEO_ATTN_IN_PLACE_BYTES;
}
NEO_ATTN__PRIVATE int neo__in_place(const neo_layer *L, int n_tokens) { return neo__in_place_cells(L, n_tokens, L->len); }

/* An attend of host heads read in place (h) on COPY beside the device half g on MAIN, which then
   waits for h, also when its own half fails (so that no later work on MAIN runs before h is done
   with q and its output). Both read only q, ready at START, which COPY has waited for, and each
   writes its own heads' rows. */
NEO_ATTN__PRIVATE int neo__in_place_beside(neo_runtime *rt, const neo__attn_args *h, const neo__attn_args *g) {
    void *S = rt->dev_state;
    int   s, w;
    if ((s = rt->attn.attend(S, h, NEO__STREAM_COPY)) != NEO_OK || (s = rt->mem.record(S, NEO__EV_HOST, NEO__STREAM_COPY)) != NEO_OK)
        return s;
    s = neo__gpu_half(rt, g);
    w = rt->mem.wait(S, NEO__STREAM_MAIN, NEO__EV_HOST);
    return s != NEO_OK ? s : w;
}

/* OFF's short form: the device attends the host heads where they are (neo__in_place_beside), into
   their rows of out. */
NEO_ATTN__PRIVATE neo_status neo__attend_in_place(neo_layer *L, const float *q, float *out) {
    neo_runtime   *rt = L->rt;
    neo__attn_args h, g;
    int            s;
    if ((s = rt->mem.record(rt->dev_state, NEO__EV_START, NEO__STREAM_MAIN)) != NEO_OK ||
        (s = rt->mem.wait(rt->dev_state, NEO__STREAM_COPY, NEO__EV_START)) != NEO_OK)
        return (neo_status)s;
    neo__layer_args(L, &h, q, 1, out, 1);
    g = h;
    neo__host_in_place(L, &h);
    g.k = L->k_dev, g.v = L->v_dev, g.h1 = L->gpu_heads;
    return (neo_status)neo__in_place_beside(rt, &h, &g);
}

/* Both halves at once, with no host call between the device and the CPU half. The pool gets
   the CPU half first and its tasks spin on a flag; the caller then enqueues on MAIN: a kernel that
   writes the host heads' queries into pinned memory and sets the flag, the device half, and a
   kernel that waits for the CPU half's output flag and pulls the output up. The caller then
   takes tasks too, and returns once none is left to take (not when the last one finishes: the
   thread that finishes it sets the output flag), so it goes back to queueing the engine's step
   while the workers finish; the next call that needs the pool waits for them. Everything is in
   MAIN's order, so the staging buffers and flags are never reused while a previous call still
   reads them. */
typedef struct neo__both {
    neo_layer     *L;
    neo__attn_args g;               /* the device half */
    const float   *q;               /* [n_tokens][n_head][head_dim], device */
    float         *out;             /* [n_tokens][n_head][head_dim_v], device */
    float         *pull;            /* device: where the CPU half's rows go: out (ON), or the hybrid's
                                       copy of the CPU's state, [n_head][head_dim_v + 2] */
    int            n_tokens;
    int            early;           /* the device's launches return at once: enqueue all before the CPU half */
    int            cut;             /* hybrid: the CPU attends the host cells [0, cut), the device the rest; 0 = ON */
    unsigned       seq;
    size_t         qrow, orow;      /* bytes of a token's q and of what the CPU half hands over (out or state) */
    size_t         qoff, ooff;      /* where in them the CPU half's heads start */
} neo__both;

/* The device's copy of the CPU half's rows, once the host has flagged them. */
NEO_ATTN__PRIVATE int neo__both_pull(const neo__both *B) {
    neo_runtime *rt = B->L->rt;
    return rt->attn.await_copy(rt->dev_state, (char *)B->pull + B->ooff, B->orow, (const char *)rt->split->h_out + B->ooff,
                               B->orow, B->orow - B->ooff, (size_t)B->n_tokens, rt->split->hand + NEO__FLAG_OUT, B->seq,
                               NEO__STREAM_MAIN);
}

/* The hybrid's device work that needs nothing of the CPU's: the device half and the host cells
   [cut, len) into d_state, streamed back, or, where they fit OFF's bound for reading in place
   (neo__in_place_cells), read so beside the device half (neo__in_place_beside). COPY is ordered after START only once the queries' copy_signal has
   gone through: on a capturing stream that refuses, and a COPY stream forked into the capture
   would leave it unjoined. The host rows depend only on earlier work on MAIN. */
NEO_ATTN__PRIVATE int neo__hybrid_start(const neo__both *B) {
    neo_layer     *L = B->L;
    neo_runtime   *rt = L->rt;
    neo__stage_at  at = {0, 0, 0, NULL, 0};
    neo__attn_args h;
    int            s;
    if ((s = rt->mem.record(rt->dev_state, NEO__EV_START, NEO__STREAM_MAIN)) != NEO_OK ||
        (s = rt->mem.wait(rt->dev_state, NEO__STREAM_COPY, NEO__EV_START)) != NEO_OK)
        return s;
    if (!neo__in_place_cells(L, B->n_tokens, L->len - B->cut))
        return (s = neo__gpu_half(rt, &B->g)) != NEO_OK ? s : (int)neo__stream_back(L, B->q, 1, NULL, B->cut, &at, NULL);
    neo__layer_args(L, &h, B->q, 1, NULL, 1);
    neo__host_in_place(L, &h);
    h.c0 = B->cut;
    h.state = (float *)rt->split->d_state;
    return neo__in_place_beside(rt, &h, &B->g);
}

/* The hybrid's last step on the device: the CPU's state of the host heads (cpu) and the device's
   (dev), both [n][n_head][head_dim_v + 2], merged and finished into their rows of out
   ([n][n_head][head_dim_v]), sinks added: n rows of L's shape (a batch's neighbouring hybrid
   layers with L's device heads and sinks, or one). */
NEO_ATTN__PRIVATE int neo__hybrid_merge(neo_layer *L, const float *cpu, const float *dev, float *out, int n) {
    neo__merge_args m;
    memset(&m, 0, sizeof m);
    m.a = cpu;
    m.b = dev;
    m.out = out;
    m.sinks = L->sinks_dev;
    m.h0 = L->gpu_heads * L->group;
    m.h1 = L->n_head;
    m.n_tokens = n;
    m.n_head = L->n_head;
    m.head_dim_v = L->head_dim_v;
    return L->rt->attn.merge(L->rt->dev_state, &m, NEO__STREAM_MAIN);
}

/* The device's work after the queries, in two parts: part 0 needs nothing of the CPU's (the
   device half, and the hybrid's stream-back); part 1 waits for the CPU half's output flag (the
   pull, and the hybrid's merge). A launch queued behind the pull's waiting kernel may itself wait
   for that kernel (compute-sanitizer serialises launches so, and so does a full launch queue), so
   a caller that still has CPU tasks to take launches nothing after the pull: ON's pull is the
   call's last launch, and the hybrid's part 1 is launched once the caller has left the pool. */
NEO_ATTN__PRIVATE int neo__both_device(const neo__both *B, int part) {
    int s;
    if (part == 0) return B->cut ? neo__hybrid_start(B) : (int)neo__gpu_half(B->L->rt, &B->g);
    if ((s = neo__both_pull(B)) != NEO_OK || !B->cut) return s;
    return neo__hybrid_merge(B->L, B->pull, (const float *)B->L->rt->split->d_state, B->out, 1);
}

/* The device's part, run by the caller once the pool has the CPU half. A device whose launches
   return at once gets all its ops now (but the hybrid's part 1, see neo__both_device); the
   stand-in, which runs ops at once (and on this pool), and a device whose launches block (which
   would wait for a flag not yet set) only the queries. */
NEO_ATTN__PRIVATE int neo__both_first(neo__both *B) {
    neo_runtime *rt = B->L->rt;
    neo__split  *S = rt->split;
    int          s;
    s = rt->attn.copy_signal(rt->dev_state, (char *)S->h_q + B->qoff, B->qrow, (const char *)B->q + B->qoff, B->qrow,
                             B->qrow - B->qoff, (size_t)B->n_tokens, S->hand, B->seq, NEO__STREAM_MAIN);
    if (s == NEO_OK && B->early) s = neo__both_device(B, 0);
    if (s == NEO_OK && B->early && !B->cut) s = neo__both_device(B, 1);
    /* on failure the CPU half's tasks still wait for their queries: let them run on stale ones
       (their output is never pulled up) */
    if (s != NEO_OK) __atomic_store_n(S->hand, B->seq, __ATOMIC_RELEASE);
    return s;
}

/* The CPU half's finish step: its output is in h_out. */
NEO_ATTN__PRIVATE void neo__both_done(void *ctx) {
    neo__split *S = (neo__split *)ctx;
    S->t_out = neo__now_us(); /* read after neo__pool_wait */
    __atomic_store_n(S->hand + NEO__FLAG_OUT, S->seq, __ATOMIC_RELEASE);
}

/* A call's sequence number, never 0 (the flags' value before any call). */
NEO_ATTN__PRIVATE unsigned neo__both_seq(neo__split *S) {
    unsigned seq = ++S->seq;
    return seq ? seq : ++S->seq;
}

/* The pinned buffers and flags of a call of n_tokens, and its sequence number. */
NEO_ATTN__PRIVATE neo_status neo__both_reserve(neo_runtime *rt, neo__both *B) {
    neo__split *S = rt->split;
    neo_status  s;
    if ((s = neo__rt_buffer(rt, &S->h_q, &S->h_q_bytes, B->qrow * B->n_tokens, 1)) != NEO_OK ||
        (s = neo__rt_buffer(rt, &S->h_out, &S->h_out_bytes, B->orow * B->n_tokens, 1)) != NEO_OK)
        return s;
    if (!S->hand) {
        if ((s = (neo_status)rt->mem.host_alloc(rt->dev_state, (void **)&S->hand, sizeof(unsigned) * 2 * NEO__FLAG_OUT)) != NEO_OK)
            return s;
        memset(S->hand, 0, sizeof(unsigned) * 2 * NEO__FLAG_OUT);
    }
    B->seq = neo__both_seq(S);
    return NEO_OK;
}

/* The hybrid's device buffers: the stream-back's state and the copy of the CPU's (the CPU's own
   is in h_out), grown before any of the call's work is queued. */
NEO_ATTN__PRIVATE neo_status neo__hybrid_reserve(neo_runtime *rt, neo__both *B) {
    neo__split *S = rt->split;
    size_t      sb = B->orow * (size_t)B->n_tokens;
    neo_status  s;
    if ((s = neo__rt_buffer(rt, &S->d_state, &S->d_state_bytes, sb, 0)) != NEO_OK ||
        (s = neo__rt_buffer(rt, &S->d_cstate, &S->d_cstate_bytes, sb, 0)) != NEO_OK)
        return s;
    B->pull = (float *)S->d_cstate;
    return NEO_OK;
}

/* ON (cut = 0), or the hybrid (a decode with the CPU taking the host cells [0, cut), 0 < cut < len). */
NEO_ATTN__PRIVATE neo_status neo__attend_both(neo_layer *L, const float *q, int n_tokens, float *out, int cut) {
    neo_runtime   *rt = L->rt;
    neo__split    *S = rt->split;
    neo__both      B;
    neo__attn_args c;
    neo__job       j;
    int            s;
    size_t         qh0 = (size_t)L->gpu_heads * L->group; /* first query head of the CPU half */
    size_t         ow = (size_t)L->head_dim_v + (cut ? 2 : 0); /* floats a head hands over: out, or (m, l, acc) */
    neo__pool_wait(&rt->pool); /* the last call's CPU half may still be on the workers */
    memset(&B, 0, sizeof B);
    B.L = L;
    B.q = q;
    B.out = B.pull = out;
    B.n_tokens = n_tokens;
    B.cut = cut;
    B.early = rt->attn.launch_async(rt->dev_state);
    B.qrow = (size_t)L->n_head * L->head_dim * sizeof(float);
    B.orow = (size_t)L->n_head * ow * sizeof(float);
    B.qoff = qh0 * L->head_dim * sizeof(float);
    B.ooff = qh0 * ow * sizeof(float);
    if ((s = neo__both_reserve(rt, &B)) != NEO_OK || (cut && (s = neo__hybrid_reserve(rt, &B)) != NEO_OK)) return (neo_status)s;
    neo__layer_args(L, &B.g, q, n_tokens, out, 1);
    B.g.k = L->k_dev;
    B.g.v = L->v_dev;
    B.g.h1 = L->gpu_heads;
    neo__layer_args(L, &c, (const float *)S->h_q, n_tokens, cut ? NULL : (float *)S->h_out, 0);
    c.k = L->k_host;
    c.v = L->v_host;
    c.kv_h0 = c.h0 = L->gpu_heads;
    c.h1 = L->n_head_kv;
    if (cut) {
        c.c1 = cut;
        c.state = (float *)S->h_out;
    }
    c.gate = S->hand;
    c.gate_seq = B.seq;
    S->args = c;
    memset(&j, 0, sizeof j);
    j.n_tasks = neo__cpu_job(rt, &S->args, &S->job, &j.fn);
    j.user = &S->job;
    j.finish = neo__both_done;
    j.finish_ctx = S;
    j.serial = neo__cpu_macs(&c) < NEO__SERIAL_MACS;
    neo__pool_launch(&rt->pool, &j); /* the workers spin on the query flag ... */
    s = neo__both_first(&B);         /* ... which the device sets */
    neo__pool_help(&rt->pool);
    if (s == NEO_OK && !B.early) s = neo__both_device(&B, 0);
    if (s == NEO_OK && (!B.early || cut)) s = neo__both_device(&B, 1);
    if (s == NEO_OK && B.early && n_tokens == 1) L->n_overlapped++;
    if (s != NEO_OK)
        neo__log(rt, NEO_LOG_ERROR, "%s of a split layer: %s%s", cut ? "the hybrid" : "both halves",
                 neo_status_string((neo_status)s),
                 s == NEO_ERR_UNSUPPORTED ? " (the stream is being captured into a CUDA graph)" : "");
    return (neo_status)s;
}

/* Attention of every head of layer L for the last n_tokens cells (q, out: activation memory). */
/* =============================================================================================
   >>bells: both halves inside a CUDA graph. A captured ON decode rings a bell at each replay
   (neo__dev_attn.ring): the host heads' queries and the layer's length land in the bell's pinned
   memory, the runtime's listener thread, which watches every bell, attends them on the pool and
   answers, and the graph's answer op waits for that and pulls the output up. A captured HYBRID
   decode rings the same way, but the listener attends only the cells before the cut of that
   length, into a state, while the graph attends the rest in place (neo__rung_hybrid), then pulls
   the CPU's state up and merges. No host call runs per layer per replay. The listener spins while
   bells ring and for NEO_ATTN_LISTEN_US after the last one, then dozes (neo__listener_main); the
   first ringing decode of each capture also captures a host function that wakes it, which a
   replay runs on the COPY stream, joined only before that call's answer (which waits for the
   listener anyway), so the wake-up is off the critical path.
   ============================================================================================= */
#ifndef NEO_ATTN_LISTEN_US
#define NEO_ATTN_LISTEN_US 2000
#endif
#define NEO__LISTEN_DOZE_US 1000

typedef struct neo__bell {
    neo_layer        *L;      /* or NULL once the layer is gone (the bell is then never rung) */
    float             share;  /* 0: ON's bell; in (0, 1): the hybrid's, at this CPU share */
    unsigned         *word;   /* pinned [NEO__BELL_WORDS] (neo__dev_attn.ring), then the rows: */
    float            *h_q;    /* pinned [n_head][head_dim]: the queries (the host heads' written) */
    float            *h_out;  /* pinned: ON's output [n_head][head_dim_v], or the hybrid's CPU state
                                 [n_head][head_dim_v + 2] (the host heads' rows written) */
    float            *zero;   /* pinned [head_dim_v] zeros, the hybrid's (neo__attend_none) */
    float            *d_st;   /* the hybrid's, device [2][n_head][head_dim_v + 2]: the device's state
                                 of the host heads' cells from the cut, then the CPU's pulled up */
    unsigned          seen;   /* the last ring answered (the listener's) */
    struct neo__bell *next;   /* fixed once the bell is published */
} neo__bell;

typedef struct neo__bells {
    neo__bell         *list;    /* every bell, the newest first (published with a release store) */
    unsigned long long woke_id; /* the capture whose wake is already captured */
    int                started, wake, quit;
#if !NEO_ATTN_NO_THREADS
    pthread_t       thread;
    pthread_mutex_t mu;
    pthread_cond_t  cv;
#endif
} neo__bells;

/* 1 when an ON decode can be captured: a listener thread and a backend that rings. */
NEO_ATTN__PRIVATE int neo__bells_ok(const neo_runtime *rt) {
    return !NEO_ATTN_NO_THREADS && rt->attn.ring && rt->attn.answer && rt->attn.host_fn;
}

/* The CPU half of a ring: the host heads attended at the length the device read, then answered:
   ON's over every cell into the output, the hybrid's over the cells before its cut of that length
   (the device takes the rest) into a state, empty when the cut is 0. */
NEO_ATTN__PRIVATE void neo__bell_serve(neo_runtime *rt, neo__bell *b, unsigned ring) {
    neo_layer     *L = b->L;
    neo__attn_args c;
    int            len = (int)b->word[NEO__BELL_LEN]; /* written before the ring, which was read with acquire */
    if (L && len >= 1 && len <= L->n_ctx) {
        neo__layer_args_at(L, &c, b->h_q, 1, b->share > 0.0f ? NULL : b->h_out, 0, len);
        c.k = L->k_host;
        c.v = L->v_host;
        c.kv_h0 = c.h0 = L->gpu_heads;
        c.h1 = L->n_head_kv;
        if (b->share > 0.0f) {
            c.c1 = neo__hybrid_cut(len, b->share);
            c.state = b->h_out;
        }
        if (c.c1 > 0) neo__cpu_attend(rt, &c);
        else neo__attend_none(&c, b->zero);
    }
    b->seen = ring;
    __atomic_store_n(&b->word[NEO__BELL_DONE], ring, __ATOMIC_RELEASE);
}

#if !NEO_ATTN_NO_THREADS
/* One look at every bell, serving those that rang; how many did. */
NEO_ATTN__PRIVATE int neo__bells_scan(neo_runtime *rt, neo__bells *B) {
    int served = 0;
    for (neo__bell *b = __atomic_load_n(&B->list, __ATOMIC_ACQUIRE); b; b = b->next) {
        unsigned r = __atomic_load_n(&b->word[NEO__BELL_RING], __ATOMIC_ACQUIRE);
        if (r != b->seen) neo__bell_serve(rt, b, r), served++;
    }
    return served;
}

/* The listener: spinning over the bells from a wake-up until none has rung for
   NEO_ATTN_LISTEN_US, then dozing: a look every NEO__LISTEN_DOZE_US until woken or a bell has
   rung. A replay's wake-up comes before its first ring; the dozes make sure that a ring whose
   wake-up was spent (a step whose ON layers are further apart than NEO_ATTN_LISTEN_US) is still
   answered, one doze late at worst. */
NEO_ATTN__PRIVATE void *neo__listener_main(void *arg) {
    neo_runtime *rt = (neo_runtime *)arg;
    neo__bells  *B = rt->bells;
    for (;;) {
        int woken, quit;
        pthread_mutex_lock(&B->mu);
        if (!B->wake && !B->quit) {
            struct timespec ts; /* the condition's clock: CLOCK_REALTIME, which TIME_UTC is */
            timespec_get(&ts, TIME_UTC);
            ts.tv_nsec += NEO__LISTEN_DOZE_US * 1000L;
            if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
            pthread_cond_timedwait(&B->cv, &B->mu, &ts);
        }
        woken = B->wake, quit = B->quit;
        B->wake = 0;
        pthread_mutex_unlock(&B->mu);
        if (quit) return NULL;
        if (!neo__bells_scan(rt, B) && !woken) continue;
        for (double idle = neo__now_us(); neo__now_us() - idle < NEO_ATTN_LISTEN_US;) {
            if (__atomic_load_n(&B->quit, __ATOMIC_ACQUIRE)) return NULL;
            if (neo__bells_scan(rt, B)) idle = neo__now_us();
            neo__cpu_relax();
        }
    }
}
#endif

/* The host function a replay runs to wake the listener (no CUDA call in it). */
NEO_ATTN__PRIVATE void neo__listener_wake(void *arg) {
#if !NEO_ATTN_NO_THREADS
    neo__bells *B = (neo__bells *)arg;
    pthread_mutex_lock(&B->mu);
    B->wake = 1;
    pthread_cond_signal(&B->cv);
    pthread_mutex_unlock(&B->mu);
#else
    (void)arg;
#endif
}

/* The runtime's bells and listener, made with the first. */
NEO_ATTN__PRIVATE neo_status neo__bells_get(neo_runtime *rt, neo__bells **out) {
    neo__bells *B = rt->bells;
    if (!B) {
        if (!(B = (neo__bells *)neo__calloc(&rt->alloc, sizeof *B))) return NEO_ERR_NO_MEMORY;
#if !NEO_ATTN_NO_THREADS
        pthread_mutex_init(&B->mu, NULL);
        pthread_cond_init(&B->cv, NULL);
#endif
        rt->bells = B;
    }
#if !NEO_ATTN_NO_THREADS
    if (!B->started) {
        if (pthread_create(&B->thread, NULL, neo__listener_main, rt) != 0) return NEO_ERR_NO_MEMORY;
        B->started = 1;
    }
#endif
    *out = B;
    return NEO_OK;
}

/* Stops the listener and frees every bell (the runtime's end: no graph of it runs any more). */
NEO_ATTN__PRIVATE void neo__bells_release(neo_runtime *rt) {
    neo__bells *B = rt->bells;
    if (!B) return;
#if !NEO_ATTN_NO_THREADS
    if (B->started) {
        pthread_mutex_lock(&B->mu);
        __atomic_store_n(&B->quit, 1, __ATOMIC_RELEASE);
        pthread_cond_signal(&B->cv);
        pthread_mutex_unlock(&B->mu);
        pthread_join(B->thread, NULL);
    }
    pthread_mutex_destroy(&B->mu);
    pthread_cond_destroy(&B->cv);
#endif
    for (neo__bell *b = B->list, *n; b; b = n) {
        n = b->next;
        rt->mem.host_free(rt->dev_state, b->word);
        neo__dev_free(rt, b->d_st);
        neo__free(&rt->alloc, b);
    }
    neo__free(&rt->alloc, B);
    rt->bells = NULL;
}

/* A layer's end: its bells are never rung again (their graphs are gone with it). */
NEO_ATTN__PRIVATE void neo__bells_forget(neo_layer *L) {
    for (neo__bell *b = L->rt->bells ? L->rt->bells->list : NULL; b; b = b->next)
        if (b->L == L) b->L = NULL;
}

/* A new bell for a captured decode of L (share: 0 = ON's, else the hybrid's), published to the
   listener. */
NEO_ATTN__PRIVATE neo_status neo__bell_new(neo_layer *L, neo__bells *B, float share, neo__bell **out) {
    neo_runtime *rt = L->rt;
    size_t       ow = (size_t)L->head_dim_v + (share > 0.0f ? 2 : 0), zb = share > 0.0f ? (size_t)L->head_dim_v * sizeof(float) : 0;
    size_t       qb = (size_t)L->n_head * L->head_dim * sizeof(float), ob = (size_t)L->n_head * ow * sizeof(float);
    size_t       wb = NEO__BELL_WORDS * sizeof(unsigned);
    neo__bell   *b = (neo__bell *)neo__calloc(&rt->alloc, sizeof *b);
    neo_status   s;
    if (!b) return NEO_ERR_NO_MEMORY;
    if ((s = (neo_status)rt->mem.host_alloc(rt->dev_state, (void **)&b->word, wb + qb + ob + zb)) != NEO_OK ||
        (share > 0.0f && (s = neo__dev_alloc(rt, (void **)&b->d_st, 2 * ob)) != NEO_OK)) {
        rt->mem.host_free(rt->dev_state, b->word);
        neo__free(&rt->alloc, b);
        return s;
    }
    memset(b->word, 0, wb + qb + ob + zb);
    b->h_q = (float *)((char *)b->word + wb);
    b->h_out = (float *)((char *)b->word + wb + qb);
    b->zero = zb ? (float *)((char *)b->word + wb + qb + ob) : NULL;
    b->share = share;
    b->L = L;
    b->next = B->list;
    __atomic_store_n(&B->list, b, __ATOMIC_RELEASE);
    *out = b;
    return NEO_OK;
}

/* The hybrid's device work in a graph, after its device half: the host heads' cells from its cut
   of the length on (the device computes it as the listener does), attended in place into the
   bell's device state, the GPU reading their pinned memory over the bus as under OFF. */
NEO_ATTN__PRIVATE neo_status neo__rung_hybrid(neo_layer *L, const float *q, const neo__bell *b) {
    neo__attn_args a;
    neo__layer_args(L, &a, q, 1, NULL, 1);
    neo__host_in_place(L, &a);
    a.state = b->d_st;
    a.cut_share = b->share;
    return (neo_status)L->rt->attn.attend(L->rt->dev_state, &a, NEO__STREAM_MAIN);
}

/* A captured decode that rings (share: 0 = ON, else the hybrid's CPU share): the queries rung,
   the device half, ON's answer pulled up into out, or the hybrid's device part of the host heads
   (neo__rung_hybrid), the CPU's state pulled up, and the two merged into out. The first of a
   capture also captures the listener's wake, forked onto COPY and joined before the answer. */
NEO_ATTN__PRIVATE neo_status neo__attend_rung(neo_layer *L, const float *q, float *out, float share) {
    neo_runtime       *rt = L->rt;
    neo__bells        *B = NULL;
    neo__bell         *b = NULL;
    neo__attn_args     a;
    unsigned long long id = 0;
    size_t             ow = (size_t)L->head_dim_v + (share > 0.0f ? 2 : 0); /* floats a head answers: out, or (m, l, acc) */
    size_t             qrow = (size_t)L->n_head * L->head_dim * sizeof(float), orow = (size_t)L->n_head * ow * sizeof(float);
    size_t             qoff = (size_t)L->gpu_heads * L->group * L->head_dim * sizeof(float);
    size_t             ooff = (size_t)L->gpu_heads * L->group * ow * sizeof(float);
    int                s, wake;
    void              *S = rt->dev_state;
    float             *dst;
    if ((s = neo__bells_get(rt, &B)) != NEO_OK || (s = neo__bell_new(L, B, share, &b)) != NEO_OK) return (neo_status)s;
    dst = share > 0.0f ? b->d_st + (size_t)L->n_head * ow : out;
    rt->mem.capturing(S, NEO__STREAM_MAIN, &id);
    wake = id != B->woke_id;
    if (wake && ((s = rt->mem.record(S, NEO__EV_START, NEO__STREAM_MAIN)) != NEO_OK ||
                 (s = rt->mem.wait(S, NEO__STREAM_COPY, NEO__EV_START)) != NEO_OK ||
                 (s = rt->attn.host_fn(S, neo__listener_wake, B, NEO__STREAM_COPY)) != NEO_OK ||
                 (s = rt->mem.record(S, NEO__EV_WOKE, NEO__STREAM_COPY)) != NEO_OK))
        return (neo_status)s;
    if ((s = rt->attn.ring(S, (char *)b->h_q + qoff, qrow, (const char *)q + qoff, qrow, qrow - qoff, 1, b->word, L->len_dev,
                           NEO__STREAM_MAIN)) != NEO_OK)
        return (neo_status)s;
    neo__layer_args(L, &a, q, 1, out, 1);
    a.k = L->k_dev, a.v = L->v_dev, a.h1 = L->gpu_heads;
    if ((s = neo__gpu_half(rt, &a)) != NEO_OK || (share > 0.0f && (s = neo__rung_hybrid(L, q, b)) != NEO_OK)) return (neo_status)s;
    if (wake && (s = rt->mem.wait(S, NEO__STREAM_MAIN, NEO__EV_WOKE)) != NEO_OK) return (neo_status)s;
    if (wake) B->woke_id = id;
    if ((s = rt->attn.answer(S, (char *)dst + ooff, orow, (const char *)b->h_out + ooff, orow, orow - ooff, 1, b->word,
                             NEO__STREAM_MAIN)) != NEO_OK || share == 0.0f)
        return (neo_status)s;
    return (neo_status)neo__hybrid_merge(L, dst, b->d_st, out, 1);
}

/* The hybrid's CPU share of L (HYBRID, or AUTO that chose it), else 0 (ON's: the CPU takes every
   host cell): what a captured decode of L rings its bell with, and a batch's cut (neo__batch_cut). */
NEO_ATTN__PRIVATE float neo__ring_share(const neo_layer *L) {
    if (L->pipeline == NEO_PIPELINE_HYBRID) return L->cpu_share;
    return L->pipeline == NEO_PIPELINE_AUTO && L->auto_choice == NEO_PIPELINE_HYBRID ? L->auto_share : 0.0f;
}

/* 1 when a captured decode of L rings a bell: a split layer under ON or HYBRID, or AUTO that chose
   one of them. */
NEO_ATTN__PRIVATE int neo__rings(const neo_layer *L) {
    int p = L->pipeline == NEO_PIPELINE_AUTO ? L->auto_choice : (int)L->pipeline;
    return neo__is_split(L) && (p == NEO_PIPELINE_ON || p == NEO_PIPELINE_HYBRID);
}

/* The pipeline a split layer's decode runs, for the log. */
NEO_ATTN__PRIVATE const char *neo__pipeline_name(const neo_layer *L) {
    static const char *const names[] = {"OFF", "ON", "AUTO", "HYBRID"}, *const chose[] = {"AUTO (chose OFF)", "AUTO (chose ON)",
                                                                                             "AUTO", "AUTO (chose HYBRID)"};
    if (L->pipeline != NEO_PIPELINE_AUTO) return names[L->pipeline];
    return L->auto_decided ? chose[L->auto_choice] : "AUTO (still measuring)";
}

/* 1 when a decode of L can be captured into a CUDA graph: no split, the stream-back (OFF), both
   halves (ON) and the hybrid where bells can be rung (>>bells), and AUTO once it has chosen one of
   those. AUTO's probes wait for the device. */
NEO_ATTN__PRIVATE int neo__capturable(const neo_layer *L) {
    int p = L->pipeline != NEO_PIPELINE_AUTO ? (int)L->pipeline : L->auto_decided ? L->auto_choice : (int)NEO_PIPELINE_AUTO;
    return !neo__is_split(L) || p == NEO_PIPELINE_OFF || ((p == NEO_PIPELINE_ON || p == NEO_PIPELINE_HYBRID) && neo__bells_ok(L->rt));
}

/* A captured attend: every length is read by the device at replay (neo__attn_args.len). A split
   layer's host heads are attended in place, the device reading their pinned memory over the bus:
   a stream-back's chunk count depends on the length, which the graph does not know. */
NEO_ATTN__PRIVATE neo_status neo__attend_captured(neo_layer *L, const float *q, int n_tokens, float *out) {
    neo_runtime   *rt = L->rt;
    neo__attn_args a;
    neo_status     s;
    if (neo__rings(L)) return neo__attend_rung(L, q, out, neo__ring_share(L));
    neo__layer_args(L, &a, q, n_tokens, out, 1);
    a.k = L->k_dev, a.v = L->v_dev, a.h1 = L->gpu_heads;
    if ((s = neo__gpu_half(rt, &a)) != NEO_OK || L->gpu_heads == L->n_head_kv) return s;
    neo__host_in_place(L, &a);
    return (neo_status)rt->attn.attend(rt->dev_state, &a, NEO__STREAM_MAIN);
}

NEO_ATTN__PRIVATE neo_status neo__layer_attend(neo_layer *L, const float *q, int n_tokens, float *out) {
    neo_runtime   *rt = L->rt;
    neo__attn_args a;
    neo_status     s;
    neo_pipeline   p = L->pipeline;
    neo__stage_at  at = {0, 0, 0, NULL, 0};
    int            cut;
    if (rt->capturing) return neo__attend_captured(L, q, n_tokens, out);
    if (!neo__is_split(L)) { /* one side holds every head */
        neo__layer_args(L, &a, q, n_tokens, out, rt->gpu);
        a.k = L->gpu_heads ? L->k_dev : L->k_host;
        a.v = L->gpu_heads ? L->v_dev : L->v_host;
        a.h1 = L->n_head_kv;
        return (neo_status)rt->attn.attend(rt->dev_state, &a, NEO__STREAM_MAIN);
    }
    /* prefill under AUTO follows the last decision (OFF for the hybrid); before any, both halves */
    if (p == NEO_PIPELINE_AUTO) p = !L->auto_decided || L->auto_choice == NEO_PIPELINE_ON ? NEO_PIPELINE_ON : NEO_PIPELINE_OFF;
    /* the hybrid is a decode's; where its cut leaves one side no cell, the other side alone */
    if (p == NEO_PIPELINE_HYBRID) {
        cut = n_tokens == 1 ? neo__hybrid_cut(L->len, L->cpu_share) : 0;
        if (cut > 0 && cut < L->len) return neo__attend_both(L, q, 1, out, cut);
        p = cut > 0 ? NEO_PIPELINE_ON : NEO_PIPELINE_OFF;
    }
    if (p == NEO_PIPELINE_ON) return neo__attend_both(L, q, n_tokens, out, 0);
    if (neo__in_place(L, n_tokens)) return neo__attend_in_place(L, q, out);
    /* the host rows depend only on earlier work on MAIN, so their copies start before the GPU half */
    if ((s = (neo_status)rt->mem.record(rt->dev_state, NEO__EV_START, NEO__STREAM_MAIN)) != NEO_OK ||
        (s = (neo_status)rt->mem.wait(rt->dev_state, NEO__STREAM_COPY, NEO__EV_START)) != NEO_OK)
        return s;
    neo__layer_args(L, &a, q, n_tokens, out, 1);
    a.k = L->k_dev;
    a.v = L->v_dev;
    a.h1 = L->gpu_heads;
    if ((s = neo__gpu_half(rt, &a)) != NEO_OK) return s;
    return neo__attend_streamed(L, q, n_tokens, out, &at);
}

NEO_ATTN__PRIVATE double neo__median3(const double *x) {
    double a = x[0], b = x[1], c = x[2];
    return a > b ? (b > c ? b : a > c ? c : a) : (a > c ? a : b > c ? c : b);
}

/* AUTO's hybrid probes, after OFF's and ON's: only when the host half's valid cells fill a
   stream-back chunk (below that each engine's fixed cost a call, the handoff or a copy's latency,
   outweighs what sharing the cells saves). Their CPU share has both engines finish together if
   ON's time stands for the CPU's over every host cell and OFF's for the stream-back's:
   c t_on = (len - c) t_off, so c / len = t_off / (t_on + t_off). It is kept inside
   [NEO__AUTO_SHARE_MIN, 1 - that], where both sides have cells to share. 1 when the hybrid is to
   be timed. */
#define NEO__AUTO_SHARE_MIN 0.05
NEO_ATTN__PRIVATE double neo__auto_clamp(double r) {
    return r < NEO__AUTO_SHARE_MIN ? NEO__AUTO_SHARE_MIN : r > 1.0 - NEO__AUTO_SHARE_MIN ? 1.0 - NEO__AUTO_SHARE_MIN : r;
}
NEO_ATTN__PRIVATE int neo__auto_hybrid(neo_layer *L) {
    double on = neo__median3(L->auto_us[1]), off = neo__median3(L->auto_us[0]), r = off / (on + off);
    if (L->len < L->stage_cells || !(r >= 0.0 && r <= 1.0)) return 0; /* NaN: no timing to go by */
    L->auto_share = (float)neo__auto_clamp(r);
    return 1;
}

/* The second hybrid share, from the first share's probes, where each engine read while the other
   read too: the CPU's rate is its share over its half's median time (from the call's start to the
   half's finish); the device side's is its share over the call's time when the CPU half finished
   well before the call (the device side was last), else it is taken as the stream-back's alone
   (OFF's probes over every host cell), an upper bound. The share that has both finish together by
   those rates, kept inside [NEO__AUTO_SHARE_MIN, 1 - that]; 1 when it differs from the first by
   0.01 or more and is to be timed too. */
NEO_ATTN__PRIVATE int neo__auto_hybrid2(neo_layer *L) {
    double th = neo__median3(L->auto_us[2]), tc = neo__median3(L->auto_cpu), off = neo__median3(L->auto_us[0]);
    double r = L->auto_share, rc, rd, r2;
    for (int i = 0; i < NEO__AUTO_PROBES; i++)
        if (!(L->auto_cpu[i] > 0.0)) return 0; /* a probe ran no CPU half (its cut left the CPU no cell) */
    rc = r / tc;
    rd = th - tc > 0.05 * th ? (1.0 - r) / th : 1.0 / off;
    r2 = rc / (rc + rd);
    if (!(r2 >= 0.0 && r2 <= 1.0)) return 0;
    r2 = neo__auto_clamp(r2);
    if (fabs(r2 - r) < 0.01) return 0;
    L->auto_share2 = (float)r2;
    return 1;
}

/* The round's choice: the fastest median, the hybrid's only when it was timed, at the faster of
   its shares (which auto_share keeps). */
NEO_ATTN__PRIVATE void neo__auto_decide(neo_layer *L) {
    double on = neo__median3(L->auto_us[1]), off = neo__median3(L->auto_us[0]);
    double hyb = L->auto_n > 2 * NEO__AUTO_PROBES ? neo__median3(L->auto_us[2]) : INFINITY;
    double hyb2 = L->auto_n > 3 * NEO__AUTO_PROBES ? neo__median3(L->auto_us[3]) : INFINITY;
    char   also[96] = "";
    int    k = 0;
    if (hyb < INFINITY) k = snprintf(also, sizeof also, ", HYBRID %.1f us at a CPU share of %.2f", hyb, L->auto_share);
    if (hyb2 < INFINITY) snprintf(also + k, sizeof also - (size_t)k, ", %.1f us at %.2f", hyb2, L->auto_share2);
    if (hyb2 < hyb) hyb = hyb2, L->auto_share = L->auto_share2;
    L->auto_choice = hyb < on && hyb < off ? NEO_PIPELINE_HYBRID : on < off ? NEO_PIPELINE_ON : NEO_PIPELINE_OFF;
    L->auto_decided = 1;
    L->auto_len = L->len;
    const char *name = L->auto_choice == NEO_PIPELINE_HYBRID ? "HYBRID" : L->auto_choice == NEO_PIPELINE_ON ? "ON" : "OFF";
    neo__log(L->rt, NEO_LOG_INFO, "AUTO: a %d/%d/%d layer with %d of %d KV heads on the host runs %s from %d cells "
             "(ON %.1f us, OFF %.1f us%s)", L->n_head, L->n_head_kv, L->head_dim, L->n_head_kv - L->gpu_heads, L->n_head_kv,
             name, L->len, on, off, also);
}

/* AUTO: the pipeline of a split layer chosen by timing them on this machine and context: OFF
   and ON alternately, then the hybrid (neo__auto_hybrid), then the hybrid at a second share
   (neo__auto_hybrid2). A probe call waits for the device, so its time is the whole call's; other
   calls do not. */
NEO_ATTN__PRIVATE neo_status neo__decode_auto(neo_layer *L, const float *q, float *out) {
    static const neo_pipeline modes[4] = {NEO_PIPELINE_OFF, NEO_PIPELINE_ON, NEO_PIPELINE_HYBRID, NEO_PIPELINE_HYBRID}; /* the last at auto_share2 */
    neo_runtime *rt = L->rt;
    neo_status   s;
    int          probe, mode = 0, P = NEO__AUTO_PROBES;
    float        share = L->cpu_share;
    double       t0;
    if (L->auto_decided && L->len / 2 >= L->auto_len) L->auto_n = L->auto_decided = 0; /* context doubled: ask again */
    probe = !L->auto_decided;
    if (probe) mode = L->auto_n < 2 * P ? L->auto_n & 1 : L->auto_n < 3 * P ? 2 : 3;
    L->pipeline = probe ? modes[mode] : (neo_pipeline)L->auto_choice;
    L->cpu_share = mode == 3 ? L->auto_share2 : L->auto_share;
    t0 = neo__now_us();
    s = neo__layer_attend(L, q, 1, out);
    if (s == NEO_OK && probe) s = neo__dev_sync(rt);
    L->pipeline = NEO_PIPELINE_AUTO;
    L->cpu_share = share;
    if (s != NEO_OK || !probe) return s;
    L->auto_us[mode][mode < 2 ? L->auto_n >> 1 : L->auto_n - mode * P] = neo__now_us() - t0;
    if (mode == 2) {
        neo__pool_wait(&rt->pool); /* the CPU half's finish step has run */
        L->auto_cpu[L->auto_n - 2 * P] = rt->split && rt->split->t_out >= t0 ? rt->split->t_out - t0 : 0.0;
    }
    if (++L->auto_n == 2 * P && neo__auto_hybrid(L)) return NEO_OK; /* the hybrid's probes next */
    if (L->auto_n == 3 * P && neo__auto_hybrid2(L)) return NEO_OK;  /* then at the second share */
    if (L->auto_n == 2 * P || L->auto_n == 3 * P || L->auto_n == 4 * P) neo__auto_decide(L);
    return NEO_OK;
}

NEO_ATTN__PRIVATE neo_status neo__attn_decode(neo_layer *L, const float *q, float *out) {
    neo_status s;
    int        split = neo__is_split(L);
    if (L->rt->capturing && !neo__capturable(L)) {
        neo__log(L->rt, NEO_LOG_ERROR, "neo_attn_decode: refused: under pipeline %s, a layer with KV heads in host memory "
                 "cannot be captured into a CUDA graph (the capture is left as it was)", neo__pipeline_name(L));
        return NEO_ERR_UNSUPPORTED;
    }
    if (!q || !out || (L->len == 0 && !L->rt->capturing)) {
        neo__log(L->rt, NEO_LOG_ERROR, "neo_attn_decode: %s", L->len == 0 ? "the layer is empty (append first)" : "q or out is NULL");
        return NEO_ERR_INVALID_ARG;
    }
    s = split && L->pipeline == NEO_PIPELINE_AUTO && !L->rt->capturing ? neo__decode_auto(L, q, out) : neo__layer_attend(L, q, 1, out);
    if (s == NEO_OK) L->n_decode += !L->rt->capturing; /* a captured call counts at its replays */
    else neo__log(L->rt, NEO_LOG_ERROR, "neo_attn_decode: %s", neo_status_string(s));
    return s;
}

NEO_ATTN__PUBLIC neo_status neo_attn_decode(neo_layer *L, const float *q, float *out) {
    neo_status s;
    if (!L || !neo__enter_cap(L->rt, "neo_attn_decode")) return NEO_ERR_INVALID_ARG;
    s = neo__attn_decode(L, q, out);
    neo__leave_cap(L->rt);
    return s;
}

/* A prefill of more than NEO__PREFILL_SLICE / n_head tokens runs in slices of that many (each as
   the prefill of a layer that ends at its last token), so that no count of queries or tasks
   leaves the int range. */
NEO_ATTN__PRIVATE neo_status neo__prefill(neo_layer *L, const float *q, int n_tokens, float *out) {
    int        len = L->len, per = L->n_head < NEO__PREFILL_SLICE ? NEO__PREFILL_SLICE / L->n_head : 1, n;
    neo_status s = NEO_OK;
    for (int i = 0; i < n_tokens && s == NEO_OK; i += n) {
        n = n_tokens - i < per ? n_tokens - i : per;
        L->len = len - n_tokens + i + n;
        s = neo__layer_attend(L, q + (size_t)i * L->n_head * L->head_dim, n, out + (size_t)i * L->n_head * L->head_dim_v);
    }
    L->len = len;
    return s;
}

NEO_ATTN__PUBLIC neo_status neo_attn_prefill(neo_layer *L, const float *q, int n_tokens, float *out) {
    neo_status s = NEO_ERR_INVALID_ARG;
    if (!L || !neo__enter(L->rt, "neo_attn_prefill")) return NEO_ERR_INVALID_ARG;
    if ((s = neo__no_capture(L->rt, "neo_attn_prefill")) != NEO_OK) s = NEO_ERR_UNSUPPORTED;
    else if (s = NEO_ERR_INVALID_ARG, !q || !out) neo__log(L->rt, NEO_LOG_ERROR, "neo_attn_prefill: q or out is NULL");
    else if (n_tokens < 1 || n_tokens > L->len)
        neo__log(L->rt, NEO_LOG_ERROR, "neo_attn_prefill: n_tokens %d is outside [1, %d], the length", n_tokens, L->len);
    else if ((s = neo__prefill(L, q, n_tokens, out)) != NEO_OK)
        neo__log(L->rt, NEO_LOG_ERROR, "neo_attn_prefill: %s", neo_status_string(s));
    neo__leave(L->rt);
    return s;
}

/* =============================================================================================
   >>batch: many layers in one call, heads moved between the sides, placement from a budget, and
   the runtime's sync
   =============================================================================================
   A batch runs the host halves of its layers as one job of the pool: layer i's tasks are a single
   call's decode tasks (the same chunks and merge tree, so the same bits), numbered from first[i],
   each layer with its own share of the runtime's partials and merge counters. On a GPU runtime
   the device halves go to the backend's attend_batch when it has one, else one attend each. A
   hybrid layer's CPU cells are tasks of the same job (its state handed over as a single hybrid
   decode hands it), its other host cells are streamed back after the OFF layers' through the
   same two buffers (the chunks in a buffer attended in one launch), and the device merges the
   two once the job is done. */
enum { NEO__BATCH_DEV, NEO__BATCH_OFF, NEO__BATCH_ON, NEO__BATCH_HYB, NEO__BATCH_SINGLE };

typedef struct neo__batch {
    neo__attn_args *args;               /* [cap] the host halves (an ON batch's outlive the call) */
    neo__attn_job  *jobs;               /* [cap] their jobs */
    int            *first;              /* [cap + 1] the first task of layer i's share */
    int            *mode;               /* [cap] NEO__BATCH_*: how layer i of a GPU batch runs */
    neo__attn_args *dev;                /* [cap] the device halves */
    int             n, cap;             /* host halves in args; room */
    neo__append_args *app;              /* [app_cap] an append batch's appends (the pool never reads them) */
    int             app_cap;
} neo__batch;

NEO_ATTN__PRIVATE void neo__batch_free_arrays(neo_runtime *rt, neo__batch *B) {
    neo__free(&rt->alloc, B->args);
    neo__free(&rt->alloc, B->jobs);
    neo__free(&rt->alloc, B->first);
    neo__free(&rt->alloc, B->mode);
    neo__free(&rt->alloc, B->dev);
}

NEO_ATTN__PRIVATE void neo__batch_release(neo_runtime *rt) {
    neo__batch *B = rt->batch;
    if (!B) return;
    neo__batch_free_arrays(rt, B);
    neo__free(&rt->alloc, B->app);
    neo__free(&rt->alloc, B);
    rt->batch = NULL;
}

/* n elements of size bytes from the runtime's allocator, or NULL */
NEO_ATTN__PRIVATE void *neo__alloc_n(neo_runtime *rt, size_t n, size_t size) {
    size_t bytes;
    return neo__mul(n, size, &bytes) ? neo__alloc(&rt->alloc, bytes) : NULL;
}

/* Room for n layers; the pool is idle, so nothing reads the old arrays. */
NEO_ATTN__PRIVATE neo_status neo__batch_reserve(neo_runtime *rt, int n) {
    neo__batch B, *b = rt->batch;
    if (!b && !(b = rt->batch = (neo__batch *)neo__calloc(&rt->alloc, sizeof *b))) return NEO_ERR_NO_MEMORY;
    if (n <= b->cap) return NEO_OK;
    B = *b;
    B.args = (neo__attn_args *)neo__alloc_n(rt, (size_t)n, sizeof(neo__attn_args));
    B.jobs = (neo__attn_job *)neo__alloc_n(rt, (size_t)n, sizeof(neo__attn_job));
    B.first = (int *)neo__alloc_n(rt, (size_t)n + 1, sizeof(int));
    B.mode = (int *)neo__alloc_n(rt, (size_t)n, sizeof(int));
    B.dev = (neo__attn_args *)neo__alloc_n(rt, (size_t)n, sizeof(neo__attn_args));
    if (!B.args || !B.jobs || !B.first || !B.mode || !B.dev) {
        neo__batch_free_arrays(rt, &B);
        return NEO_ERR_NO_MEMORY;
    }
    neo__batch_free_arrays(rt, b);
    B.cap = n;
    *b = B;
    return NEO_OK;
}

/* Task `task` of the batch job: the layer whose share holds it, found by bisection. */
NEO_ATTN__PRIVATE void neo__batch_task(void *user, int task, int thread) {
    const neo__batch *B = (const neo__batch *)user;
    int               lo = 0, hi = B->n - 1;
    while (lo < hi) {
        int mid = lo + (hi - lo + 1) / 2;
        if (B->first[mid] <= task) lo = mid;
        else hi = mid - 1;
    }
    neo__decode_task(&B->jobs[lo], task - B->first[lo], thread);
}

/* The job of the n host halves in B->args: one task list, and each layer's partials and merge
   counters after the previous layer's. */
NEO_ATTN__PRIVATE neo_status neo__batch_job(neo_runtime *rt, neo__batch *B, neo__job *j) {
    size_t      part = 0, done = 0;
    double      macs = 0.0;
    neo_task_fn fn = NULL;
    neo_status  s;
    B->first[0] = 0;
    for (int i = 0; i < B->n; i++) {
        int n_tasks = neo__cpu_job(rt, &B->args[i], &B->jobs[i], &fn);
        if (n_tasks > 0x7fffffff - B->first[i]) return NEO_ERR_UNSUPPORTED; /* more tasks than an int counts */
        B->first[i + 1] = B->first[i] + n_tasks;
        part += (size_t)n_tasks * (size_t)B->jobs[i].group * ((size_t)B->args[i].head_dim_v + 2);
        done += (size_t)n_tasks * 2;
        macs += neo__cpu_macs(&B->args[i]);
    }
    if ((s = neo__rt_reserve(rt, 0, part, done)) != NEO_OK) return s;
    part = done = 0;
    for (int i = 0; i < B->n; i++) {
        neo__attn_job *J = &B->jobs[i];
        size_t         n_tasks = (size_t)(B->first[i + 1] - B->first[i]);
        J->partial = rt->partial + part;
        J->pair_done = rt->pair_done + done;
        memset(J->pair_done, 0, sizeof(int) * 2 * n_tasks);
        part += n_tasks * (size_t)J->group * ((size_t)B->args[i].head_dim_v + 2);
        done += n_tasks * 2;
    }
    memset(j, 0, sizeof *j);
    j->fn = neo__batch_task;
    j->user = B;
    j->n_tasks = B->first[B->n];
    j->serial = macs < NEO__SERIAL_MACS;
    return NEO_OK;
}

/* The host half of L for one token: heads [gpu_heads, n_head_kv), every head on a CPU runtime. */
NEO_ATTN__PRIVATE void neo__batch_host_args(const neo_layer *L, neo__attn_args *a, const float *q, float *out) {
    neo__layer_args(L, a, q, 1, out, 0);
    a->k = L->k_host;
    a->v = L->v_host;
    a->kv_h0 = a->h0 = L->gpu_heads;
    a->h1 = L->n_head_kv;
}

/* The first layer given in layers[0..n), whose runtime says why a batch is refused (a NULL layer
   among them too); NULL when there is none. */
NEO_ATTN__PRIVATE const neo_layer *neo__batch_first(neo_layer *const *layers, int n) {
    for (int i = 0; layers && i < n; i++)
        if (layers[i]) return layers[i];
    return NULL;
}

/* NEO_OK when layers[0..n) are n distinct layers of one runtime and one shape and p, r are given. */
NEO_ATTN__PRIVATE neo_status neo__batch_check(neo_layer *const *layers, int n, const void *p, const void *r, const char *fn) {
    const neo_layer   *L0 = neo__batch_first(layers, n);
    const char        *why = NULL;
    unsigned long long mark;
    if (!L0) return NEO_ERR_INVALID_ARG;
    mark = ++L0->rt->batch_mark;
    if (!p || !r) why = "an activation pointer is NULL";
    for (int i = 0; i < n && !why; i++) {
        neo_layer *L = layers[i];
        if (!L || L->rt != L0->rt) why = "a layer is NULL or of another runtime";
        else if (L->n_head != L0->n_head || L->n_head_kv != L0->n_head_kv || L->head_dim != L0->head_dim ||
                 L->head_dim_v != L0->head_dim_v)
            why = "the layers differ in n_head, n_head_kv, head_dim or head_dim_v";
        else if (L->batch_mark == mark) why = "a layer is given twice";
        else L->batch_mark = mark;
    }
    if (!why) return NEO_OK;
    neo__log(L0->rt, NEO_LOG_ERROR, "%s: %s", fn, why);
    return NEO_ERR_INVALID_ARG;
}

/* One token into L: its device heads' rows and its host heads' (the rows of neo_attn_append). */
NEO_ATTN__PRIVATE void neo__append_token(const neo_layer *L, const float *k, const float *v, neo__append_args *a) {
    int host = L->gpu_heads < L->n_head_kv;
    neo__append_args_init(L, a, k, v, 1);
    a->k = L->k_dev, a->v = L->v_dev, a->h1 = L->n_head_kv;
    a->k2 = host ? L->k_host : NULL, a->v2 = host ? L->v_host : NULL, a->h2 = host ? L->gpu_heads : 0;
}

/* Room for n appends in rt->batch->app. */
NEO_ATTN__PRIVATE neo_status neo__batch_apps(neo_runtime *rt, int n) {
    neo__batch       *b = rt->batch;
    neo__append_args *a;
    if (!b && !(b = rt->batch = (neo__batch *)neo__calloc(&rt->alloc, sizeof *b))) return NEO_ERR_NO_MEMORY;
    if (n <= b->app_cap) return NEO_OK;
    if (!(a = (neo__append_args *)neo__alloc_n(rt, (size_t)n, sizeof *a))) return NEO_ERR_NO_MEMORY;
    neo__free(&rt->alloc, b->app);
    b->app = a, b->app_cap = n;
    return NEO_OK;
}

/* Every row is written before any length moves, so a failed batch leaves every length as it was
   (rows past a length are never read): one backend op for the whole batch. */
NEO_ATTN__PRIVATE neo_status neo__attn_append_batch(neo_layer *const *layers, int n, const float *k, const float *v) {
    neo_status   s = neo__batch_check(layers, n, k, v, "neo_attn_append_batch");
    neo_runtime *rt = layers && layers[0] ? layers[0]->rt : NULL;
    size_t       kr, vr;
    if (s != NEO_OK) return s;
    kr = (size_t)layers[0]->n_head_kv * (size_t)layers[0]->head_dim;
    vr = (size_t)layers[0]->n_head_kv * (size_t)layers[0]->head_dim_v;
    for (int i = 0; i < n && !rt->capturing; i++)
        if (layers[i]->len == layers[i]->n_ctx) {
            neo__log(rt, NEO_LOG_WARN, "neo_attn_append_batch: layer %d of the batch is full (n_ctx %d); nothing was written", i,
                     layers[i]->n_ctx);
            return NEO_ERR_FULL;
        }
    if ((s = neo__batch_apps(rt, n)) == NEO_OK) {
        for (int i = 0; i < n; i++) neo__append_token(layers[i], k + (size_t)i * kr, v + (size_t)i * vr, &rt->batch->app[i]);
        s = (neo_status)rt->attn.append_batch(rt->dev_state, rt->batch->app, n, NEO__STREAM_MAIN);
    }
    if (s != NEO_OK) {
        neo__log(rt, NEO_LOG_ERROR, "neo_attn_append_batch: %s", neo_status_string(s));
        return s;
    }
    for (int i = 0; i < n; i++) neo__appended(layers[i], 1);
    return NEO_OK;
}

/* Row i of a batch's q: [n][n_head][head_dim] and out: [n][n_head][head_dim_v]. */
NEO_ATTN__PRIVATE const float *neo__batch_q(const neo_layer *L, const float *q, int i) {
    return q + (size_t)i * (size_t)L->n_head * (size_t)L->head_dim;
}
NEO_ATTN__PRIVATE float *neo__batch_out(const neo_layer *L, float *out, int i) {
    return out + (size_t)i * (size_t)L->n_head * (size_t)L->head_dim_v;
}

/* A failed neo_attn_decode_batch: the log says why. */
NEO_ATTN__PRIVATE neo_status neo__batch_failed(neo_runtime *rt, neo_status s) {
    neo__log(rt, NEO_LOG_ERROR, "neo_attn_decode_batch: %s%s", neo_status_string(s),
             s == NEO_ERR_UNSUPPORTED ? " (the stream is being captured into a CUDA graph)" : "");
    return s;
}

/* A layer's decode counters kept before a call that decodes it (neo__counts_keep), and put back
   when the call fails (neo__counts_back): a failed call counts no decode. */
NEO_ATTN__PRIVATE void neo__counts_keep(neo_layer *const *layers, int n) {
    for (int i = 0; i < n; i++) layers[i]->n_decode_was = layers[i]->n_decode, layers[i]->n_overlapped_was = layers[i]->n_overlapped;
}
NEO_ATTN__PRIVATE void neo__counts_back(neo_layer *const *layers, int n) {
    for (int i = 0; i < n; i++) layers[i]->n_decode = layers[i]->n_decode_was, layers[i]->n_overlapped = layers[i]->n_overlapped_was;
}

/* A CPU runtime's batch: every head of every layer in one job. */
NEO_ATTN__PRIVATE neo_status neo__batch_cpu(neo_layer *const *layers, int n, const float *q, float *out) {
    neo_runtime *rt = layers[0]->rt;
    neo__job     j;
    neo_status   s;
    neo__pool_wait(&rt->pool); /* a detached CPU half may still use the partials */
    if ((s = neo__batch_reserve(rt, n)) != NEO_OK) return neo__batch_failed(rt, s);
    for (int i = 0; i < n; i++)
        neo__batch_host_args(layers[i], &rt->batch->args[i], neo__batch_q(layers[i], q, i), neo__batch_out(layers[i], out, i));
    rt->batch->n = n;
    if ((s = neo__batch_job(rt, rt->batch, &j)) != NEO_OK) return neo__batch_failed(rt, s);
    neo__pool_launch(&rt->pool, &j);
    neo__pool_help(&rt->pool);
    for (int i = 0; i < n; i++) layers[i]->n_decode++;
    return NEO_OK;
}

/* The CPU's cells [0, cut) of a batch's hybrid layer. */
NEO_ATTN__PRIVATE int neo__batch_cut(const neo_layer *L) { return neo__hybrid_cut(L->len, neo__ring_share(L)); }

/* How L runs in a GPU batch: on the device alone, as a split under OFF, ON or the hybrid (an
   AUTO layer's decision; a hybrid whose cut leaves one side no cell as the other side alone, as
   a single decode does), or as a single call of its own: a split AUTO layer while it is still
   measuring. */
NEO_ATTN__PRIVATE int neo__batch_mode(const neo_layer *L) {
    neo_pipeline p = L->pipeline;
    if (!neo__is_split(L)) return NEO__BATCH_DEV;
    if (p == NEO_PIPELINE_AUTO) {
        if (!L->auto_decided || L->len / 2 >= L->auto_len) return NEO__BATCH_SINGLE; /* len >= 2 auto_len, without overflow */
        p = (neo_pipeline)L->auto_choice;
    }
    if (p == NEO_PIPELINE_HYBRID) {
        const int cut = neo__batch_cut(L);
        return cut > 0 && cut < L->len ? NEO__BATCH_HYB : cut > 0 ? NEO__BATCH_ON : NEO__BATCH_OFF;
    }
    return p == NEO_PIPELINE_ON ? NEO__BATCH_ON : NEO__BATCH_OFF;
}

/* One neo_attn_decode_batch on a GPU runtime. */
typedef struct neo__bgpu {
    neo_layer *const *layers;
    int               n, n_on, n_off, n_hyb;
    const float      *q;    /* [n][n_head][head_dim], device */
    float            *out;  /* [n][n_head][head_dim_v], device */
    neo__both         hand; /* the ON and hybrid layers' handoff: a row of q and out each, and the call's seq */
    size_t            srow; /* bytes of a hybrid layer's state, [n_head][head_dim_v + 2] */
    size_t            hyb0; /* where the hybrid layers' states start in h_out: after the n_on rows of ON outputs */
    size_t            hoff; /* the least host heads' offset in a state */
} neo__bgpu;

/* The ON and hybrid layers' host halves: one job on the pool whose tasks wait for their queries,
   which one copy on the device brings to pinned memory (every row, from the least host head of
   them on). ON outputs go to rows 0.. of h_out, the hybrids' states after them (from hyb0). */
NEO_ATTN__PRIVATE neo_status neo__batch_on(neo__bgpu *G) {
    neo_runtime *rt = G->layers[0]->rt;
    neo__batch  *B = rt->batch;
    neo__split  *S = rt->split;
    neo__job     j;
    size_t       qoff = G->hand.qrow;
    int          s, k_on = 0, k_hyb = 0;
    G->hand.seq = neo__both_seq(S); /* after the batch's single calls took theirs; the buffers were grown before them */
    B->n = 0;
    for (int i = 0; i < G->n; i++) {
        neo_layer      *L = G->layers[i];
        neo__attn_args *a = &B->args[B->n];
        const float    *hq = (const float *)((char *)S->h_q + i * G->hand.qrow);
        size_t          off = (size_t)L->gpu_heads * L->group * L->head_dim * sizeof(float);
        if (B->mode[i] != NEO__BATCH_ON && B->mode[i] != NEO__BATCH_HYB) continue;
        /* outputs (states) in h_out one after the other, so that one copy brings them all up */
        if (B->mode[i] == NEO__BATCH_ON) {
            neo__batch_host_args(L, a, hq, (float *)((char *)S->h_out + k_on++ * G->hand.orow));
        } else {
            neo__batch_host_args(L, a, hq, NULL);
            a->c1 = neo__batch_cut(L);
            a->state = (float *)((char *)S->h_out + G->hyb0 + k_hyb++ * G->srow);
        }
        a->gate = S->hand;
        a->gate_seq = G->hand.seq;
        B->n++;
        if (off < qoff) qoff = off;
    }
    if ((s = neo__batch_job(rt, B, &j)) != NEO_OK) return (neo_status)s;
    j.finish = neo__both_done;
    j.finish_ctx = S;
    neo__pool_launch(&rt->pool, &j);
    s = rt->attn.copy_signal(rt->dev_state, (char *)S->h_q + qoff, G->hand.qrow, (const char *)G->q + qoff, G->hand.qrow,
                             G->hand.qrow - qoff, (size_t)G->n, S->hand, G->hand.seq, NEO__STREAM_MAIN);
    /* on failure the tasks run on stale queries; their output is never pulled up */
    if (s != NEO_OK) __atomic_store_n(S->hand, G->hand.seq, __ATOMIC_RELEASE);
    return (neo_status)s;
}

/* Bytes before the host heads' outputs in a row of out: L's device heads'. */
NEO_ATTN__PRIVATE size_t neo__batch_off(const neo_layer *L) {
    return (size_t)L->gpu_heads * L->group * L->head_dim_v * sizeof(float);
}

/* The end of the run of layers from i that share one copy (ON) or one merge (HYBRID): the
   neighbouring layers of i's mode with its device heads and, for the merge, its sinks. */
NEO_ATTN__PRIVATE int neo__batch_run_end(const neo__bgpu *G, int i) {
    const neo__batch *B = G->layers[0]->rt->batch;
    const neo_layer  *L = G->layers[i];
    int               j = i + 1;
    while (j < G->n && B->mode[j] == B->mode[i] && G->layers[j]->gpu_heads == L->gpu_heads &&
           (B->mode[i] != NEO__BATCH_HYB || G->layers[j]->sinks_dev == L->sinks_dev))
        j++;
    return j;
}

/* The batch's runs of ON layers (neo__batch_run_end): how many, the first ON layer, and the
   least device heads' offset in a row of out (neo__batch_pull). */
NEO_ATTN__PRIVATE int neo__batch_runs(const neo__bgpu *G, int *first, size_t *off) {
    const neo__batch *B = G->layers[0]->rt->batch;
    int               runs = 0;
    *first = -1, *off = G->hand.orow;
    for (int i = 0, j; i < G->n; i = j) {
        j = i + 1;
        if (B->mode[i] != NEO__BATCH_ON) continue;
        j = neo__batch_run_end(G, i);
        runs++;
        if (*first < 0) *first = i;
        for (int r = i; r < j; r++)
            if (neo__batch_off(G->layers[r]) < *off) *off = neo__batch_off(G->layers[r]);
    }
    return runs;
}

/* The split layers' buffers, grown before any layer of the batch runs: the handoff's, d_pull
   when the ON outputs come up in more than one run, for the hybrids h_out's room for their states
   after the ON outputs and the copy of the CPU's (d_cstate), and a stream-back state a hybrid or
   OFF layer (d_state: the hybrids' first), a state a layer. */
NEO_ATTN__PRIVATE neo_status neo__batch_split_reserve(neo__bgpu *G) {
    neo_runtime *rt = G->layers[0]->rt;
    neo__split  *S = rt->split;
    const size_t sb = G->srow * (size_t)G->n_hyb;
    int          first;
    size_t       off;
    neo_status   s = G->n_on || G->n_hyb ? neo__both_reserve(rt, &G->hand) : NEO_OK;
    if (s == NEO_OK && neo__batch_runs(G, &first, &off) > 1)
        s = neo__rt_buffer(rt, &S->d_pull, &S->d_pull_bytes, G->hand.orow * (size_t)G->n_on, 0);
    if (s == NEO_OK && (G->n_hyb || G->n_off))
        s = neo__rt_buffer(rt, &S->d_state, &S->d_state_bytes, G->srow * (size_t)(G->n_hyb + G->n_off), 0);
    if (s == NEO_OK && G->n_hyb && (s = neo__rt_buffer(rt, &S->h_out, &S->h_out_bytes, G->hyb0 + sb, 1)) == NEO_OK)
        s = neo__rt_buffer(rt, &S->d_cstate, &S->d_cstate_bytes, sb, 0);
    return s;
}

/* The ON layers' host half outputs (rows 0.. of h_out, in layer order) onto their rows of out,
   once the pool has flagged them. Runs of neighbouring ON layers with the same device heads: one
   run is pulled straight into out; several are pulled up at once into d_pull (from the least
   device heads' offset on) and copied on the device from there, one copy a run, so the PCIe
   round trips do not grow with the runs. */
NEO_ATTN__PRIVATE int neo__batch_pull(const neo__bgpu *G) {
    neo_runtime      *rt = G->layers[0]->rt;
    neo__split       *S = rt->split;
    const neo__batch *B = rt->batch;
    const size_t      orow = G->hand.orow;
    size_t            off;
    int               first, k = 0, s = NEO_OK;
    if (neo__batch_runs(G, &first, &off) == 1)
        return rt->attn.await_copy(rt->dev_state, (char *)G->out + first * orow + off, orow, (const char *)S->h_out + off, orow,
                                   orow - off, (size_t)G->n_on, S->hand + NEO__FLAG_OUT, G->hand.seq, NEO__STREAM_MAIN);
    /* d_pull was grown for this batch (neo__batch_split_reserve) */
    if ((s = rt->attn.await_copy(rt->dev_state, (char *)S->d_pull + off, orow, (const char *)S->h_out + off, orow, orow - off,
                                 (size_t)G->n_on, S->hand + NEO__FLAG_OUT, G->hand.seq, NEO__STREAM_MAIN)) != NEO_OK)
        return s;
    for (int i = 0, j; i < G->n && s == NEO_OK; i = j) {
        size_t o = neo__batch_off(G->layers[i]);
        j = i + 1;
        if (B->mode[i] != NEO__BATCH_ON) continue;
        j = neo__batch_run_end(G, i);
        s = rt->mem.copy2d(rt->dev_state, (char *)G->out + i * orow + o, orow, (const char *)S->d_pull + k * orow + o, orow,
                           orow - o, (size_t)(j - i), NEO__STREAM_MAIN);
        k += j - i;
    }
    return s;
}

/* The hybrid layers' last step, once the caller has left the pool (see neo__both_device): their
   CPU states pulled up into d_cstate once the host has flagged them, then merged with their
   stream-backs' states (d_state, in the same order) into their host heads' rows of out, one merge
   a run (neo__batch_run_end). */
NEO_ATTN__PRIVATE int neo__batch_hyb_finish(const neo__bgpu *G) {
    neo_runtime      *rt = G->layers[0]->rt;
    neo__split       *S = rt->split;
    const neo__batch *B = rt->batch;
    int               s, k = 0;
    s = rt->attn.await_copy(rt->dev_state, (char *)S->d_cstate + G->hoff, G->srow, (const char *)S->h_out + G->hyb0 + G->hoff,
                            G->srow, G->srow - G->hoff, (size_t)G->n_hyb, S->hand + NEO__FLAG_OUT, G->hand.seq,
                            NEO__STREAM_MAIN);
    for (int i = 0, j; i < G->n && s == NEO_OK; i = j) {
        neo_layer   *L = G->layers[i];
        const size_t o = (size_t)k * G->srow;
        j = i + 1;
        if (B->mode[i] != NEO__BATCH_HYB) continue;
        j = neo__batch_run_end(G, i);
        s = neo__hybrid_merge(L, (const float *)((const char *)S->d_cstate + o), (const float *)((const char *)S->d_state + o),
                              neo__batch_out(L, G->out, i), j - i);
        k += j - i;
    }
    return s;
}

/* 1 when layer i of a GPU batch has its streamed host cells read in place by the device, in one
   launch with the batch's others (neo__batch_device): an OFF layer that a single decode reads so
   (neo__in_place), or a hybrid whose cells after the cut fit the same bound. A batch of short
   layers would otherwise pay a copy's fixed cost for each layer's K and for its V. */
NEO_ATTN__PRIVATE int neo__batch_in_place(const neo__bgpu *G, int i) {
    const neo_layer *L = G->layers[i];
    const int        m = L->rt->batch->mode[i];
    if (m == NEO__BATCH_OFF) return neo__in_place(L, 1);
    return m == NEO__BATCH_HYB && neo__in_place_cells(L, 1, L->len - neo__batch_cut(L));
}

/* The batch's work on MAIN (neo__batch_device): the device halves, the stream-backs (the OFF
   layers', then the hybrids'), the ON layers' pulls. The stream-backs' chunks in one buffer are
   attended in one launch (neo__stage_at), each into its layer's own state in d_state (the
   hybrids' for neo__batch_hyb_finish, then the OFF layers'), so that no two of a launch share one. */
NEO_ATTN__PRIVATE int neo__batch_device_main(const neo__bgpu *G, neo__batch *B) {
    neo_runtime  *rt = G->layers[0]->rt;
    neo__stage_at at = {0, 0, 0, B->dev, 0}; /* B->dev is free once the device halves are launched */
    int           m = 0, s = NEO_OK, k_off = G->n_hyb, k_hyb = 0;
    for (int i = 0; i < G->n; i++) {
        neo_layer *L = G->layers[i];
        if (B->mode[i] == NEO__BATCH_SINGLE || L->gpu_heads == 0) continue;
        neo__layer_args(L, &B->dev[m], neo__batch_q(L, G->q, i), 1, neo__batch_out(L, G->out, i), 1);
        B->dev[m].k = L->k_dev;
        B->dev[m].v = L->v_dev;
        B->dev[m++].h1 = L->gpu_heads;
    }
    if (m && (s = neo__attend_many(rt, B->dev, m, NEO__STREAM_MAIN)) != NEO_OK) return s;
    for (int i = 0; i < G->n && s == NEO_OK; i++)
        if (B->mode[i] == NEO__BATCH_OFF && !neo__batch_in_place(G, i))
            s = neo__stream_back(G->layers[i], neo__batch_q(G->layers[i], G->q, i), 1, neo__batch_out(G->layers[i], G->out, i), 0,
                                 &at, (float *)((char *)rt->split->d_state + (size_t)k_off++ * G->srow));
    for (int i = 0; i < G->n && s == NEO_OK; i++) {
        if (B->mode[i] != NEO__BATCH_HYB) continue;
        if (!neo__batch_in_place(G, i))
            s = neo__stream_back(G->layers[i], neo__batch_q(G->layers[i], G->q, i), 1, NULL, neo__batch_cut(G->layers[i]), &at,
                                 (float *)((char *)rt->split->d_state + (size_t)k_hyb * G->srow));
        k_hyb++; /* its slot, read in place or streamed */
    }
    if (s == NEO_OK) s = neo__stage_flush(rt, &at);
    if (s == NEO_OK && G->n_on) s = neo__batch_pull(G);
    return s;
}

/* The batch's device work: the host cells that are read in place (neo__batch_in_place) attended
   so on COPY in one launch (the OFF layers' into out, the hybrids' into their states), then the
   work on MAIN (neo__batch_device_main), which then waits for them, as a single decode does.
   The hybrids' last step is not here (neo__batch_hyb_finish). */
NEO_ATTN__PRIVATE neo_status neo__batch_device(const neo__bgpu *G) {
    neo_runtime *rt = G->layers[0]->rt;
    neo__batch  *B = rt->batch;
    int          s = NEO_OK, m = 0, k_hyb = 0, r, w;
    /* the OFF and hybrid layers' host rows depend only on earlier work on MAIN: their reads start now */
    if ((G->n_off || G->n_hyb) && ((s = rt->mem.record(rt->dev_state, NEO__EV_START, NEO__STREAM_MAIN)) != NEO_OK ||
                     (s = rt->mem.wait(rt->dev_state, NEO__STREAM_COPY, NEO__EV_START)) != NEO_OK))
        return (neo_status)s;
    for (int i = 0; i < G->n; i++) {
        neo_layer      *L = G->layers[i];
        neo__attn_args *a = &B->dev[m];
        const int       hyb = B->mode[i] == NEO__BATCH_HYB;
        if (!neo__batch_in_place(G, i)) {
            k_hyb += hyb;
            continue;
        }
        neo__layer_args(L, a, neo__batch_q(L, G->q, i), 1, hyb ? NULL : neo__batch_out(L, G->out, i), 1);
        neo__host_in_place(L, a);
        if (hyb) a->c0 = neo__batch_cut(L), a->state = (float *)((char *)rt->split->d_state + (size_t)k_hyb++ * G->srow);
        m++;
    }
    if (!m) return (neo_status)neo__batch_device_main(G, B);
    s = neo__attend_many(rt, B->dev, m, NEO__STREAM_COPY); /* B->dev is free again once it returns */
    /* MAIN joins what was queued on COPY whatever failed, as a single decode does */
    r = rt->mem.record(rt->dev_state, NEO__EV_HOST, NEO__STREAM_COPY);
    if (s == NEO_OK) s = r != NEO_OK ? r : neo__batch_device_main(G, B);
    if (r == NEO_OK && (w = rt->mem.wait(rt->dev_state, NEO__STREAM_MAIN, NEO__EV_HOST)) != NEO_OK && s == NEO_OK) s = w;
    return (neo_status)s;
}

/* A GPU runtime's batch. As in a single ON call, a device whose launches return at once gets all
   its work before the caller takes its share of the CPU halves; the stand-in (ops done when they
   return) gets it after. */
NEO_ATTN__PRIVATE neo_status neo__batch_gpu(neo_layer *const *layers, int n, const float *q, float *out) {
    neo_runtime *rt = layers[0]->rt;
    neo__bgpu    G;
    neo_status   s = NEO_OK;
    int          early = 0;
    neo__pool_wait(&rt->pool); /* the last ON batch's CPU half reads the batch arrays */
    if ((s = neo__batch_reserve(rt, n)) != NEO_OK) return neo__batch_failed(rt, s);
    memset(&G, 0, sizeof G);
    G.layers = layers, G.n = n, G.q = q, G.out = out;
    G.hand.L = layers[0];
    G.hand.n_tokens = n; /* rows: one a layer */
    G.hand.qrow = (size_t)layers[0]->n_head * layers[0]->head_dim * sizeof(float);
    G.hand.orow = (size_t)layers[0]->n_head * layers[0]->head_dim_v * sizeof(float);
    G.srow = (size_t)layers[0]->n_head * ((size_t)layers[0]->head_dim_v + 2) * sizeof(float);
    G.hoff = G.srow;
    for (int i = 0; i < n; i++) {
        const int    m = rt->batch->mode[i] = neo__batch_mode(layers[i]);
        const size_t o = (size_t)layers[i]->gpu_heads * layers[i]->group * ((size_t)layers[i]->head_dim_v + 2) * sizeof(float);
        G.n_on += m == NEO__BATCH_ON;
        G.n_off += m == NEO__BATCH_OFF;
        G.n_hyb += m == NEO__BATCH_HYB;
        if (m == NEO__BATCH_HYB && o < G.hoff) G.hoff = o;
    }
    G.hyb0 = G.hand.orow * (size_t)G.n_on;
    /* the ON and hybrid layers' buffers before any layer runs, so that running out of memory
       there leaves every layer as it was (the single calls' own buffers are theirs to grow) */
    if ((G.n_on || G.n_hyb || G.n_off) && (s = neo__batch_split_reserve(&G)) != NEO_OK) return neo__batch_failed(rt, s);
    neo__counts_keep(layers, n);
    for (int i = 0; i < n && s == NEO_OK; i++)
        if (rt->batch->mode[i] == NEO__BATCH_SINGLE) s = neo__attn_decode(layers[i], neo__batch_q(layers[i], q, i), neo__batch_out(layers[i], out, i));
    if (s == NEO_OK) {
        neo__pool_wait(&rt->pool); /* a single call's CPU half may still be on the workers */
        if (G.n_on || G.n_hyb) early = rt->attn.launch_async(rt->dev_state); /* asked just before the CPU halves go to the pool */
        if (G.n_on || G.n_hyb) s = neo__batch_on(&G);
        if (s == NEO_OK && early) s = neo__batch_device(&G);
        neo__pool_help(&rt->pool);
        if (s == NEO_OK && !early) s = neo__batch_device(&G);
        if (s == NEO_OK && G.n_hyb) s = (neo_status)neo__batch_hyb_finish(&G);
    }
    if (s != NEO_OK) {
        neo__counts_back(layers, n);
        return neo__batch_failed(rt, s);
    }
    for (int i = 0; i < n; i++) {
        layers[i]->n_decode += rt->batch->mode[i] != NEO__BATCH_SINGLE;
        layers[i]->n_overlapped += early && (rt->batch->mode[i] == NEO__BATCH_ON || rt->batch->mode[i] == NEO__BATCH_HYB);
    }
    return NEO_OK;
}

/* A batch being captured into a CUDA graph: one attend_batch of every layer's device heads and,
   for a split layer that does not ring (OFF), its host heads read in place, each entry reading
   its layer's length on the device when the graph runs; ON and HYBRID layers ring their own
   bells (a decode of their own each). */
NEO_ATTN__PRIVATE neo_status neo__batch_capture(neo_layer *const *layers, int n, const float *q, float *out) {
    neo_runtime *rt = layers[0]->rt;
    neo_status   s;
    int          m = 0;
    neo__pool_wait(&rt->pool); /* the last eager ON batch's CPU half reads the batch arrays */
    s = neo__batch_reserve(rt, 2 * n);
    for (int i = 0; i < n && s == NEO_OK; i++) {
        neo_layer      *L = layers[i];
        neo__attn_args *a = &rt->batch->dev[m];
        if (neo__rings(L)) {
            s = neo__attn_decode(L, neo__batch_q(L, q, i), neo__batch_out(L, out, i));
            continue;
        }
        neo__layer_args(L, a, neo__batch_q(L, q, i), 1, neo__batch_out(L, out, i), 1);
        a->k = L->k_dev, a->v = L->v_dev, a->h1 = L->gpu_heads;
        if (L->gpu_heads < L->n_head_kv) { /* the host heads, after the device ones if any */
            if (L->gpu_heads) a[1] = a[0], a++, m++;
            neo__host_in_place(L, a);
        }
        m++;
    }
    return s == NEO_OK && m ? neo__attend_many(rt, rt->batch->dev, m, NEO__STREAM_MAIN) : s;
}

NEO_ATTN__PRIVATE neo_status neo__attn_decode_batch(neo_layer *const *layers, int n, const float *q, float *out) {
    neo_status s = neo__batch_check(layers, n, q, out, "neo_attn_decode_batch");
    if (s != NEO_OK) return s;
    for (int i = 0; i < n; i++)
        if (layers[0]->rt->capturing && !neo__capturable(layers[i])) {
            neo__log(layers[0]->rt, NEO_LOG_ERROR, "neo_attn_decode_batch: refused: layer %d has KV heads in host memory under "
                     "pipeline %s, which cannot be captured into a CUDA graph (the capture is left as it was)", i,
                     neo__pipeline_name(layers[i]));
            return NEO_ERR_UNSUPPORTED;
        } else if (layers[i]->len == 0 && !layers[0]->rt->capturing) {
            neo__log(layers[0]->rt, NEO_LOG_ERROR, "neo_attn_decode_batch: layer %d is empty", i);
            return NEO_ERR_INVALID_ARG;
        }
    if (layers[0]->rt->capturing) return neo__batch_capture(layers, n, q, out);
    return layers[0]->rt->gpu ? neo__batch_gpu(layers, n, q, out) : neo__batch_cpu(layers, n, q, out);
}

/* Where head h of L's cache starts when g of its heads are on the device: K (v = 0) or V (v = 1). */
NEO_ATTN__PRIVATE char *neo__head_at(const neo_layer *L, int g, int h, int v) {
    size_t w = (size_t)(v ? L->head_dim_v : L->head_dim) * neo__type_size(L->kv_type);
    char  *base = (char *)(h < g ? (v ? L->v_dev : L->k_dev) : (v ? L->v_host : L->k_host));
    return base + (size_t)(h < g ? h : h - g) * (size_t)L->n_ctx * w;
}

/* L's cache at g device heads: new buffers, filled with the valid rows of every head, then
   swapped in; on failure they are freed and L is as it was. */
NEO_ATTN__PRIVATE neo_status neo__layer_move(neo_layer *L, int g) {
    neo_runtime *rt = L->rt;
    neo_layer    N = *L;
    size_t       es = neo__type_size(L->kv_type);
    neo_status   s;
    N.gpu_heads = g;
    N.k_dev = N.v_dev = N.k_host = N.v_host = NULL;
    s = neo__layer_alloc_kv(&N);
    for (int h = 0; h < L->n_head_kv && s == NEO_OK && L->len; h++)
        for (int v = 0; v < 2 && s == NEO_OK; v++)
            s = neo__dev_copy(rt, neo__head_at(&N, g, h, v), neo__head_at(L, L->gpu_heads, h, v),
                              (size_t)L->len * (size_t)(v ? L->head_dim_v : L->head_dim) * es);
    if (s == NEO_OK) s = neo__dev_sync(rt);
    if (s == NEO_OK && g < L->n_head_kv) s = neo__split_prepare(&N);
    neo__dev_free(rt, s == NEO_OK ? L->k_dev : N.k_dev);
    neo__dev_free(rt, s == NEO_OK ? L->v_dev : N.v_dev);
    rt->mem.host_free(rt->dev_state, s == NEO_OK ? L->k_host : N.k_host);
    rt->mem.host_free(rt->dev_state, s == NEO_OK ? L->v_host : N.v_host);
    if (s != NEO_OK) return s;
    N.auto_n = N.auto_decided = 0; /* an AUTO layer measures its new split afresh */
    *L = N;
    return NEO_OK;
}

NEO_ATTN__PRIVATE neo_status neo__layer_set_gpu_heads(neo_layer *L, int gpu_heads) {
    neo_status s;
    int        g;
    if (gpu_heads < NEO_GPU_HEADS_NONE || gpu_heads > L->n_head_kv) {
        neo__log(L->rt, NEO_LOG_ERROR, "neo_layer_set_gpu_heads: %d is not in [0, n_head_kv = %d] nor NEO_GPU_HEADS_NONE",
                 gpu_heads, L->n_head_kv);
        return NEO_ERR_INVALID_ARG;
    }
    g = neo__device_heads(L->rt, L->n_head_kv, gpu_heads);
    if (g == L->gpu_heads) return NEO_OK;
    neo__pool_wait(&L->rt->pool); /* a detached CPU half reads the host heads */
    if ((s = neo__dev_sync(L->rt)) != NEO_OK || (s = neo__layer_move(L, g)) != NEO_OK)
        neo__log(L->rt, NEO_LOG_ERROR, "neo_layer_set_gpu_heads: %s; nothing moved", neo_status_string(s));
    return s;
}

/* Bytes of one KV head of d at its n_ctx, or 0 when that is past what size_t holds. */
NEO_ATTN__PRIVATE size_t neo__head_bytes(const neo_layer_desc *d) {
    size_t b;
    int    dv = d->head_dim_v ? d->head_dim_v : d->head_dim;
    return neo__mul3((size_t)d->n_ctx, (size_t)d->head_dim + (size_t)dv, neo__type_size(d->kv_type), &b) ? b : 0;
}

/* The placement's search: how many heads of each head size go to the GPU. Sizes largest first;
   each level tries its most heads first, so the first leaf is each size in turn taking as many
   heads as fit, and a later leaf replaces the best only with more bytes. A level stops at the
   first count whose bound (its bytes, plus the smaller sizes' bytes or the budget left, whichever
   is less) cannot pass the best, since smaller counts only lower that bound. */
#define NEO__PLAN_SIZES 8
#define NEO__PLAN_STEPS (1L << 20)
typedef struct neo__plan {
    int    n;                          /* sizes */
    size_t size[NEO__PLAN_SIZES];      /* a head's bytes, decreasing */
    size_t heads[NEO__PLAN_SIZES];     /* heads of that size over all layers */
    size_t rest[NEO__PLAN_SIZES + 1];  /* bytes of every head of this size and the smaller ones (saturated) */
    size_t take[NEO__PLAN_SIZES], best[NEO__PLAN_SIZES]; /* heads on the GPU: this leaf's, the best leaf's */
    size_t best_bytes, most;           /* the best leaf's bytes; none passes most = min(budget, rest[0]) */
    long   steps;
    int    found;                      /* a leaf has been reached */
} neo__plan;
NEO_ATTN__PRIVATE void neo__plan_search(neo__plan *p, int g, size_t used, size_t left) {
    size_t c, fit;
    if (g == p->n) {
        if (!p->found || used > p->best_bytes) p->found = 1, p->best_bytes = used, memcpy(p->best, p->take, sizeof p->best);
        return;
    }
    fit = left / p->size[g];
    for (c = fit < p->heads[g] ? fit : p->heads[g];; c--) {
        size_t b = c * p->size[g], room = left - b < p->rest[g + 1] ? left - b : p->rest[g + 1]; /* b <= left */
        if (p->found && (p->best_bytes == p->most || p->steps++ >= NEO__PLAN_STEPS || used + b + room <= p->best_bytes))
            return;
        p->take[g] = c;
        neo__plan_search(p, g + 1, used + b, left - b);
        if (c == 0) return;
    }
}

/* The largest head size below `below` that some layer's heads have and that fits in budget, or 0. */
NEO_ATTN__PRIVATE size_t neo__plan_next_size(const neo_layer_desc *descs, int n_layers, size_t below, size_t budget) {
    size_t next = 0;
    for (int i = 0; i < n_layers; i++) {
        size_t b = neo__head_bytes(&descs[i]);
        if (b && b < below && b <= budget && b > next) next = b;
    }
    return next;
}

/* Host heads above t over the layers whose heads are `size` bytes (t = 0: all their host heads);
   gpu[i]: heads of layer i on the GPU. */
NEO_ATTN__PRIVATE size_t neo__plan_above(const neo_layer_desc *descs, int n_layers, size_t size, const int *gpu, int t) {
    size_t n = 0;
    for (int i = 0; i < n_layers; i++) {
        int h = descs[i].n_head_kv - gpu[i];
        n += neo__head_bytes(&descs[i]) == size && h > t ? (size_t)(h - t) : 0;
    }
    return n;
}

/* Gives c (at most their host heads) more GPU heads to the layers whose heads are `size` bytes as
   giving them one at a time, each to the one with the most host heads (the lowest index on a
   tie), would: every such layer comes down to the lowest level t of host heads whose heads above
   it are at most c, and the first of them at t, in index order, one further for what is left of
   c (fewer than the layers at t, or t is 0 and nothing is left). */
NEO_ATTN__PRIVATE void neo__plan_spread(const neo_layer_desc *descs, int n_layers, size_t size, size_t c, int *gpu) {
    int lo = 0, hi = 0;
    for (int i = 0; i < n_layers; i++)
        if (neo__head_bytes(&descs[i]) == size && descs[i].n_head_kv - gpu[i] > hi) hi = descs[i].n_head_kv - gpu[i];
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (neo__plan_above(descs, n_layers, size, gpu, mid) <= c) hi = mid;
        else lo = mid + 1;
    }
    c -= neo__plan_above(descs, n_layers, size, gpu, lo);
    for (int i = 0; i < n_layers; i++)
        if (neo__head_bytes(&descs[i]) == size && descs[i].n_head_kv - gpu[i] >= lo) {
            int h = lo - (c > 0 && lo > 0);
            c -= c > 0 && lo > 0;
            gpu[i] = descs[i].n_head_kv - h;
        }
}

NEO_ATTN__PUBLIC int neo_plan_gpu_heads(const neo_layer_desc *descs, int n_layers, size_t gpu_bytes, int *gpu_heads) {
    neo__plan p;
    size_t    s = (size_t)-1, left = gpu_bytes;
    int       host = 0;
    if (!descs || !gpu_heads || n_layers < 1) return -1;
    for (int i = 0; i < n_layers; i++) {
        neo_layer_desc d = descs[i];
        const char    *why;
        d.gpu_heads = 0;
        if (neo__check_layer_desc(&d, &why) != NEO_OK || host > 0x7fffffff - d.n_head_kv) return -1;
        host += d.n_head_kv;
    }
    for (int i = 0; i < n_layers; i++) gpu_heads[i] = 0; /* heads on the GPU so far */
    memset(&p, 0, sizeof p);
    for (; p.n < NEO__PLAN_SIZES && (s = neo__plan_next_size(descs, n_layers, s, gpu_bytes)) != 0; p.n++)
        p.size[p.n] = s, p.heads[p.n] = neo__plan_above(descs, n_layers, s, gpu_heads, 0);
    for (int g = p.n - 1; g >= 0; g--) {
        size_t b = p.size[g] > (size_t)-1 / p.heads[g] ? (size_t)-1 : p.size[g] * p.heads[g];
        p.rest[g] = p.rest[g + 1] > (size_t)-1 - b ? (size_t)-1 : p.rest[g + 1] + b;
    }
    p.most = gpu_bytes < p.rest[0] ? gpu_bytes : p.rest[0];
    /* the search when every size that fits is in it; then (and alone otherwise, or past the
       search's steps) each size from the largest takes as many more heads as fit */
    if (p.n < NEO__PLAN_SIZES || neo__plan_next_size(descs, n_layers, p.size[p.n - 1], gpu_bytes) == 0)
        neo__plan_search(&p, 0, 0, gpu_bytes);
    for (int pass = p.found ? 0 : 1; pass < 2; pass++) {
        s = (size_t)-1;
        for (int g = 0; (s = neo__plan_next_size(descs, n_layers, s, gpu_bytes)) != 0; g++) {
            size_t c = neo__plan_above(descs, n_layers, s, gpu_heads, 0), fit = left / s;
            c = pass == 0 && p.best[g] < c ? p.best[g] : c;
            c = fit < c ? fit : c;
            neo__plan_spread(descs, n_layers, s, c, gpu_heads);
            left -= c * s;
            host -= (int)c;
        }
    }
    for (int i = 0; i < n_layers; i++)
        gpu_heads[i] = gpu_heads[i] == descs[i].n_head_kv ? 0 : gpu_heads[i] ? gpu_heads[i] : NEO_GPU_HEADS_NONE;
    return host;
}

/* Everything queued done, then the lengths of layers with captured appends read back: a replayed
   append that found its layer full wrote nothing and set the layer's flag, which this reports
   (NEO_ERR_FULL) and clears. */
NEO_ATTN__PRIVATE neo_status neo__runtime_sync(neo_runtime *rt) {
    neo_status s, c;
    int        full = 0, n = 0, i = 0;
    neo_layer *L;
    neo__pool_wait(&rt->pool);
    s = (neo_status)rt->mem.stream_sync(rt->dev_state, NEO__STREAM_MAIN);
    c = (neo_status)rt->mem.stream_sync(rt->dev_state, NEO__STREAM_COPY);
    if (s != NEO_OK || c != NEO_OK || !rt->graphed) return s != NEO_OK ? s : c;
    /* every captured layer's length in one round trip (an engine syncs once a token) */
    for (L = rt->graphed; L; L = L->gnext) n++;
    if ((s = neo__rt_buffer(rt, (void **)&rt->lens, &rt->lens_bytes, sizeof(int) * 2 * (size_t)n, 1)) != NEO_OK) return s;
    for (L = rt->graphed; L && s == NEO_OK; L = L->gnext, i++) s = neo__dev_copy(rt, rt->lens + 2 * i, L->len_dev, 2 * sizeof(int));
    if (s != NEO_OK || (s = neo__dev_sync(rt)) != NEO_OK) return s;
    for (L = rt->graphed, i = 0; L && s == NEO_OK; L = L->gnext, i++) {
        L->len = rt->lens[2 * i];
        if (!rt->lens[2 * i + 1]) continue;
        full++;
        s = (neo_status)rt->attn.set_length(rt->dev_state, L->len_dev, L->len, NEO__STREAM_MAIN);
        neo__log(rt, NEO_LOG_WARN, "neo_runtime_sync: a replayed append found a %d/%d/%d layer full (n_ctx %d) and wrote "
                 "nothing", L->n_head, L->n_head_kv, L->head_dim, L->n_ctx);
    }
    if (s == NEO_OK && full) s = neo__dev_sync(rt);
    return s == NEO_OK && full ? NEO_ERR_FULL : s;
}

/* The batch calls take the runtime's one-call-at-a-time flag like the single ones (see neo__enter):
   the runtime of the first layer given. */
NEO_ATTN__PRIVATE neo_runtime *neo__batch_rt(neo_layer *const *layers, int n) {
    const neo_layer *L0 = neo__batch_first(layers, n);
    return L0 ? L0->rt : NULL;
}
NEO_ATTN__PUBLIC neo_status neo_attn_append_batch(neo_layer *const *layers, int n, const float *k, const float *v) {
    neo_runtime *rt = neo__batch_rt(layers, n);
    neo_status   s;
    if (!rt || !neo__enter_cap(rt, "neo_attn_append_batch")) return NEO_ERR_INVALID_ARG;
    s = neo__attn_append_batch(layers, n, k, v);
    neo__leave_cap(rt);
    return s;
}
NEO_ATTN__PUBLIC neo_status neo_attn_decode_batch(neo_layer *const *layers, int n, const float *q, float *out) {
    neo_runtime *rt = neo__batch_rt(layers, n);
    neo_status   s;
    if (!rt || !neo__enter_cap(rt, "neo_attn_decode_batch")) return NEO_ERR_INVALID_ARG;
    s = neo__attn_decode_batch(layers, n, q, out);
    neo__leave_cap(rt);
    return s;
}
NEO_ATTN__PUBLIC neo_status neo_layer_set_gpu_heads(neo_layer *L, int gpu_heads) {
    neo_status s;
    if (!L || !neo__enter(L->rt, "neo_layer_set_gpu_heads")) return NEO_ERR_INVALID_ARG;
    if ((s = neo__no_capture(L->rt, "neo_layer_set_gpu_heads")) == NEO_OK) s = neo__layer_set_gpu_heads(L, gpu_heads);
    neo__leave(L->rt);
    return s;
}
NEO_ATTN__PUBLIC neo_status neo_runtime_sync(neo_runtime *rt) {
    neo_status s;
    if (!rt || !neo__enter(rt, "neo_runtime_sync")) return NEO_ERR_INVALID_ARG;
    if ((s = neo__no_capture(rt, "neo_runtime_sync")) == NEO_OK && (s = neo__runtime_sync(rt)) != NEO_OK && s != NEO_ERR_FULL)
        neo__log(rt, NEO_LOG_ERROR, "neo_runtime_sync: %s", neo_status_string(s)); /* FULL: logged per layer */
    neo__leave(rt);
    return s;
}

/* =============================================================================================
   >>model: the llama2.c decode loop (model, session, step) and its ops: on the device through
   the backend's model table, or on the host (matmuls on the runtime's pool). Compiled out with
   NEO_ATTN_NO_MODEL.
   ============================================================================================= */
#if !defined(NEO_ATTN_NO_MODEL)
struct neo_model {
    neo_model_info info;
    float         *data;      /* every float of the file after the header */
    size_t         n_floats;  /* how many */
    const float   *tok_emb;   /* [vocab][dim] */
    const float   *rms_att;   /* [n_layers][dim] */
    const float   *wq;        /* [n_layers][dim][dim], rows are outputs */
    const float   *wk, *wv;   /* [n_layers][kv_dim][dim] */
    const float   *wo;        /* [n_layers][dim][dim] */
    const float   *rms_ffn;   /* [n_layers][dim] */
    const float   *w1, *w3;   /* [n_layers][hidden][dim] */
    const float   *w2;        /* [n_layers][dim][hidden] */
    const float   *rms_final; /* [dim] */
    const float   *wcls;      /* [vocab][dim] */
};

#define NEO__CKPT_HEADER 28 /* seven int32 */

NEO_ATTN__PRIVATE int32_t neo__le32(const unsigned char *p) {
    return (int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
}

/* Validates a checkpoint header and gives the exact file size it implies. */
NEO_ATTN__PRIVATE neo_status neo__ckpt_parse(const unsigned char *h, neo_model_info *mi, size_t *file_bytes) {
    int32_t  f[7];
    uint64_t L, dim, hid, kv, voc, hs, n, t, total;
    for (int i = 0; i < 7; i++) f[i] = neo__le32(h + 4 * i);
    memset(mi, 0, sizeof *mi);
    mi->dim = f[0];
    mi->hidden_dim = f[1];
    mi->n_layers = f[2];
    mi->n_heads = f[3];
    mi->n_kv_heads = f[4];
    mi->shared_classifier = f[5] > 0;
    mi->vocab_size = f[5] == INT32_MIN ? 0 : f[5] < 0 ? -f[5] : f[5];
    mi->seq_len = f[6];
    /* bounds far above any llama2.c model keep every size below 2^50 in 64-bit arithmetic; a file
       larger than this machine's size_t (a 32-bit one) is refused before any size_t product */
    if (mi->dim < 1 || mi->dim > 65536 || mi->hidden_dim < 1 || mi->hidden_dim > 262144 || mi->n_layers < 1 ||
        mi->n_layers > 1024 || mi->n_heads < 1 || mi->n_kv_heads < 1 || mi->n_kv_heads > mi->n_heads ||
        mi->n_heads % mi->n_kv_heads || mi->dim % mi->n_heads || (mi->dim / mi->n_heads) % 2 || mi->vocab_size < 1 ||
        mi->vocab_size > (1 << 22) || mi->seq_len < 1 || mi->seq_len > (1 << 24))
        return NEO_ERR_FORMAT;
    L = (uint64_t)mi->n_layers;
    dim = (uint64_t)mi->dim;
    hid = (uint64_t)mi->hidden_dim;
    hs = dim / (uint64_t)mi->n_heads;
    kv = hs * (uint64_t)mi->n_kv_heads;
    voc = (uint64_t)mi->vocab_size;
    /* emb, rms_att, wq, wk, wv, wo, rms_ffn, w1, w2, w3, rms_final, rope tables, [wcls] */
    n = voc * dim + L * dim + L * dim * dim + 2 * L * dim * kv + L * dim * dim + L * dim + 3 * L * dim * hid + dim;
    t = (uint64_t)mi->seq_len * (hs / 2) * 2;
    if (!mi->shared_classifier) t += voc * dim;
    total = (n + t) * 4 + NEO__CKPT_HEADER;
    if (total > (size_t)-1) return NEO_ERR_FORMAT;
    mi->weight_bytes = (size_t)((n + (mi->shared_classifier ? 0 : voc * dim)) * 4);
    *file_bytes = (size_t)total;
    return NEO_OK;
}

/* Points the weight views into m->data (the floats after the header). */
NEO_ATTN__PRIVATE void neo__ckpt_map(neo_model *m) {
    const neo_model_info *mi = &m->info;
    size_t L = (size_t)mi->n_layers, dim = (size_t)mi->dim, hid = (size_t)mi->hidden_dim;
    size_t hs = dim / (size_t)mi->n_heads, kv = hs * (size_t)mi->n_kv_heads;
    const float *p = m->data;
    m->tok_emb = p;   p += (size_t)mi->vocab_size * dim;
    m->rms_att = p;   p += L * dim;
    m->wq = p;        p += L * dim * dim;
    m->wk = p;        p += L * kv * dim;
    m->wv = p;        p += L * kv * dim;
    m->wo = p;        p += L * dim * dim;
    m->rms_ffn = p;   p += L * dim;
    m->w1 = p;        p += L * hid * dim;
    m->w2 = p;        p += L * dim * hid;
    m->w3 = p;        p += L * hid * dim;
    m->rms_final = p; p += dim;
    p += (size_t)mi->seq_len * (hs / 2) * 2; /* the legacy RoPE tables, unused */
    m->wcls = mi->shared_classifier ? m->tok_emb : p;
}

NEO_ATTN__PUBLIC neo_status neo_model_load_memory(const void *data, size_t size, neo_model **out) {
    neo_model *m;
    size_t     want;
    neo_status s;
    if (!out) return NEO_ERR_INVALID_ARG;
    *out = NULL;
    if (!data && size) return NEO_ERR_INVALID_ARG;
    if (size < NEO__CKPT_HEADER) return NEO_ERR_FORMAT;
    m = (neo_model *)neo__calloc(NULL, sizeof *m);
    if (!m) return NEO_ERR_NO_MEMORY;
    if ((s = neo__ckpt_parse((const unsigned char *)data, &m->info, &want)) != NEO_OK || size != want) {
        neo__free(NULL, m);
        return s != NEO_OK ? s : NEO_ERR_FORMAT;
    }
    if (!(m->data = (float *)neo__alloc(NULL, size - NEO__CKPT_HEADER))) {
        neo__free(NULL, m);
        return NEO_ERR_NO_MEMORY;
    }
    memcpy(m->data, (const unsigned char *)data + NEO__CKPT_HEADER, size - NEO__CKPT_HEADER);
    m->n_floats = (size - NEO__CKPT_HEADER) / 4;
    neo__ckpt_map(m);
    *out = m;
    return NEO_OK;
}

/* A checkpoint file open for reading. On POSIX systems a descriptor: opened without blocking and
   then taken only if it is a regular file, since fopen on a FIFO with no writer never returns;
   elsewhere stdio, where a file whose end cannot be sought is refused. */
typedef struct neo__rfile {
#if NEO__POSIX_FILES
    int fd;
#else
    FILE *f;
#endif
} neo__rfile;
NEO_ATTN__PRIVATE neo_status neo__rfile_open(neo__rfile *rf, const char *path, size_t *size) {
#if NEO__POSIX_FILES
    struct stat sb;
    if ((rf->fd = open(path, O_RDONLY | O_NONBLOCK)) < 0) return NEO_ERR_IO;
    if (fstat(rf->fd, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size >= 0 && (unsigned long long)sb.st_size <= (size_t)-1) {
        *size = (size_t)sb.st_size;
        return NEO_OK;
    }
    close(rf->fd);
#else
    long n;
    if (!(rf->f = fopen(path, "rb"))) return NEO_ERR_IO;
    if (fseek(rf->f, 0, SEEK_END) == 0 && (n = ftell(rf->f)) >= 0 && fseek(rf->f, 0, SEEK_SET) == 0) {
        *size = (size_t)n;
        return NEO_OK;
    }
    fclose(rf->f);
#endif
    return NEO_ERR_IO;
}
/* Reads n bytes into p: NEO_OK, NEO_ERR_FORMAT at an early end (the file shrank), NEO_ERR_IO. */
NEO_ATTN__PRIVATE neo_status neo__rfile_read(neo__rfile *rf, void *p, size_t n) {
#if NEO__POSIX_FILES
    for (size_t got = 0; got < n;) {
        size_t  ask = n - got < ((size_t)1 << 30) ? n - got : ((size_t)1 << 30);
        ssize_t r = read(rf->fd, (char *)p + got, ask);
        if (r == 0) return NEO_ERR_FORMAT;
        if (r < 0 && errno != EINTR) return NEO_ERR_IO;
        got += r > 0 ? (size_t)r : 0;
    }
    return NEO_OK;
#else
    return fread(p, 1, n, rf->f) == n ? NEO_OK : ferror(rf->f) ? NEO_ERR_IO : NEO_ERR_FORMAT;
#endif
}
NEO_ATTN__PRIVATE void neo__rfile_close(neo__rfile *rf) {
#if NEO__POSIX_FILES
    close(rf->fd);
#else
    fclose(rf->f);
#endif
}

NEO_ATTN__PUBLIC neo_status neo_model_load(const char *path, neo_model **out) {
    unsigned char hdr[NEO__CKPT_HEADER];
    neo_model    *m = NULL;
    neo__rfile    rf;
    size_t        size, want;
    neo_status    s;
    if (!out) return NEO_ERR_INVALID_ARG;
    *out = NULL;
    if (!path) return NEO_ERR_INVALID_ARG;
    if ((s = neo__rfile_open(&rf, path, &size)) != NEO_OK) return s;
    s = NEO_ERR_FORMAT;
    if (size < NEO__CKPT_HEADER) goto done;
    if ((s = neo__rfile_read(&rf, hdr, sizeof hdr)) != NEO_OK) goto done;
    if (!(m = (neo_model *)neo__calloc(NULL, sizeof *m))) {
        s = NEO_ERR_NO_MEMORY;
        goto done;
    }
    if ((s = neo__ckpt_parse(hdr, &m->info, &want)) != NEO_OK) goto done;
    s = NEO_ERR_FORMAT;
    if (size != want) goto done;
    if (!(m->data = (float *)neo__alloc(NULL, want - NEO__CKPT_HEADER))) {
        s = NEO_ERR_NO_MEMORY;
        goto done;
    }
    if ((s = neo__rfile_read(&rf, m->data, want - NEO__CKPT_HEADER)) != NEO_OK) goto done;
    m->n_floats = (want - NEO__CKPT_HEADER) / 4;
    neo__ckpt_map(m);
    *out = m;
    m = NULL;
done:
    neo__rfile_close(&rf);
    neo_model_destroy(m);
    return s;
}

NEO_ATTN__PUBLIC void neo_model_destroy(neo_model *m) {
    if (!m) return;
    neo__free(NULL, m->data);
    neo__free(NULL, m);
}

NEO_ATTN__PUBLIC neo_status neo_model_get_info(const neo_model *m, neo_model_info *info) {
    if (!m || !info) return NEO_ERR_INVALID_ARG;
    *info = m->info;
    return NEO_OK;
}

/* out: [d] = (or +=) w: [d][n] . x: [n], and out2: [d] = w2: [d][n] . x when w2 is set, in one
   job: rows spread over the pool (each row is one dot product, so the result does not depend on
   the split). */
typedef struct neo__matmul_job {
    float              *out, *out2;
    const float        *x, *w, *w2;
    int                 n, d, rows_per_task, add;
    const neo__kernels *kern;
} neo__matmul_job;

NEO_ATTN__PRIVATE void neo__matmul_task(void *user, int task, int thread) {
    const neo__matmul_job *J = (const neo__matmul_job *)user;
    int rows = J->w2 ? 2 * J->d : J->d, i1 = (task + 1) * J->rows_per_task < rows ? (task + 1) * J->rows_per_task : rows;
    (void)thread;
    for (int i = task * J->rows_per_task; i < i1; i++) {
        if (i >= J->d) { /* a row of w2 */
            J->out2[i - J->d] = J->kern->dot(J->w2 + (size_t)(i - J->d) * J->n, J->x, J->n);
            continue;
        }
        float v = J->kern->dot(J->w + (size_t)i * J->n, J->x, J->n);
        J->out[i] = J->add ? J->out[i] + v : v;
    }
}
NEO_ATTN__PRIVATE void neo__host_matmul(neo_runtime *rt, float *y, const float *w, float *y2, const float *w2, const float *x, int n,
                                        int d, int add) {
    neo__matmul_job J;
    int             rows = w2 ? 2 * d : d;
    J.out = y;
    J.out2 = y2;
    J.x = x;
    J.w = w;
    J.w2 = w2;
    J.n = n;
    J.d = d;
    J.add = add;
    J.kern = &rt->kern;
    J.rows_per_task = (rows + 4 * rt->pool.n_threads - 1) / (4 * rt->pool.n_threads);
    neo__run(rt, (rows + J.rows_per_task - 1) / J.rows_per_task, (double)n * rows, neo__matmul_task, &J);
}
/* o = w * x / rms(x), as run.c computes it; o may be x */
NEO_ATTN__PRIVATE void neo__rmsnorm_host(float *o, const float *x, const float *w, int n) {
    float ss = 0.0f;
    for (int j = 0; j < n; j++) ss += x[j] * x[j];
    ss /= (float)n;
    ss += 1e-5f;
    ss = 1.0f / sqrtf(ss);
    for (int j = 0; j < n; j++) o[j] = w[j] * (ss * x[j]);
}
/* The host matvec's runtime and scratch (the normalised x, then w_mul . x or RoPE's cos / sin),
   a session's own. */
typedef struct neo__mv_host {
    neo_runtime *rt;
    float       *scratch;
    size_t       floats;
} neo__mv_host;

/* The same arithmetic as run.c: rmsnorm into scratch, the matmul, then the epilogue on y. */
NEO_ATTN__PRIVATE int neo__host_matvec(neo__mv_host *h, const neo__matvec_args *a) {
    neo_runtime *rt = h->rt;
    const float *x;
    float       *tail; /* scratch past the normalised x: SWIGLU's w_mul . x, or RoPE's cos / sin */
    size_t       need;
    /* the append of a->app is the session's to run after this (neo__matvec) */
    if (!neo__matvec_ok(a) || a->app) return NEO_ERR_INVALID_ARG;
    if (!a->d) return NEO_OK;
    x = a->x;
    need = (a->norm ? (size_t)a->n : 0) + (a->epilogue == NEO__MV_SWIGLU ? (size_t)a->d : 0) +
           (a->epilogue == NEO__MV_ROPE ? (size_t)a->head_size : 0);
    if (need > h->floats) {
        float *p = (float *)neo__alloc(&rt->alloc, need * sizeof(float));
        if (!p) return NEO_ERR_NO_MEMORY;
        neo__free(&rt->alloc, h->scratch);
        h->scratch = p;
        h->floats = need;
    }
    tail = h->scratch;
    if (a->norm) {
        neo__rmsnorm_host(h->scratch, x, a->norm, a->n);
        x = h->scratch;
        tail += a->n;
    }
    neo__host_matmul(rt, a->y, a->w, tail, a->epilogue == NEO__MV_SWIGLU ? a->w_mul : NULL, x, a->n, a->d, a->epilogue == NEO__MV_ADD);
    if (a->epilogue == NEO__MV_SWIGLU) {
        for (int i = 0; i < a->d; i++) a->y[i] = a->y[i] * (1.0f / (1.0f + expf(-a->y[i]))) * tail[i];
    } else if (a->epilogue == NEO__MV_ROPE) {
        /* run.c's angle depends only on the pair's place in its head: each cos / sin once */
        float *cs = tail;
        for (int hd = 0; hd < a->head_size; hd += 2) {
            float freq = 1.0f / powf(10000.0f, (float)hd / (float)a->head_size), val = (float)(a->pos_dev ? *a->pos_dev : a->pos) * freq;
            cs[hd] = cosf(val);
            cs[hd + 1] = sinf(val);
        }
        for (int r = 0; r < a->rope_q + a->rope_k; r += 2) {
            int   hd = (r < a->rope_q ? r : r - a->rope_q) % a->head_size;
            float fcr = cs[hd], fci = cs[hd + 1], v0 = a->y[r], v1 = a->y[r + 1];
            a->y[r] = v0 * fcr - v1 * fci;
            a->y[r + 1] = v0 * fci + v1 * fcr;
        }
    }
    return NEO_OK;
}

NEO_ATTN__PRIVATE int neo__host_argmax(int *out, const float *x, int n) {
    float best = -INFINITY;
    int   idx = 0;
    for (int i = 0; i < n; i++)
        if (x[i] > best) best = x[i], idx = i;
    *out = idx;
    return NEO_OK;
}
/* The host's argmax as a decode-loop op: *(int *)out = the argmax of a->x[a->n]. */
NEO_ATTN__PRIVATE int neo__host_argmax_fn(void *out, const neo__matvec_args *a) { return neo__host_argmax((int *)out, a->x, a->n); }


struct neo_session {
    neo_runtime     *rt;
    const neo_model *m;
    neo_layer      **layers;    /* [n_layers] */
    int              n_ctx;
    /* The weights the step reads: the model's own on a CPU runtime, a device copy on a GPU. The
       device copy has each layer's wq, wk, wv rows back to back ([n_layers][dim + 2 kv_dim][dim]),
       so that q | k | v (and the token's append) are one launch: a layer is four launches and
       attention there. */
    float           *w_dev;     /* the device copy of m->data (same size, that layout), or NULL */
    int              fused;     /* wq points at the fused q | k | v rows */
    const float     *tok_emb, *rms_att, *wq, *wk, *wv, *wo, *rms_ffn, *w1, *w2, *w3, *rms_final, *wcls;
    /* activations, in activation memory: one allocation */
    float           *act;
    float           *x;         /* [dim] residual stream */
    float           *xb;        /* [dim] attention output */
    float           *q;         /* [dim] */
    float           *k, *v;     /* [kv_dim] */
    float           *hb;        /* [hidden_dim] */
    float           *logits;    /* [vocab_size] */
    int             *next;      /* [1] argmax of the logits, activation memory */
    neo__mv_host     mv;        /* the host matvec's scratch, when the backend has no matvec */
    int              graphs;    /* neo_session_desc.graphs, on a runtime whose backend has graphs */
    void            *graph;     /* the captured step (neo__dev_model.graph_end), or NULL */
};

NEO_ATTN__PRIVATE void neo__session_destroy(neo_session *s) {
    if (!s) return;
    if (s->graph) {
        neo__dev_sync(s->rt); /* a replay may still run */
        s->rt->model.graph_free(s->rt->dev_state, s->graph);
    }
    if (s->layers)
        for (int l = 0; l < s->m->info.n_layers; l++) neo__layer_destroy(s->layers[l]);
    neo__free(&s->rt->alloc, s->layers);
    neo__dev_free(s->rt, s->act);
    neo__dev_free(s->rt, s->next);
    neo__dev_free(s->rt, s->w_dev);
    neo__free(&s->rt->alloc, s->mv.scratch);
    neo__free(&s->rt->alloc, s);
}

NEO_ATTN__PUBLIC void neo_session_destroy(neo_session *s) {
    neo_runtime *rt = s ? s->rt : NULL;
    if (!s || !neo__enter(rt, "neo_session_destroy")) return;
    if (neo__no_capture(rt, "neo_session_destroy") == NEO_OK) neo__session_destroy(s);
    neo__leave(rt);
}

/* The model's floats into w (device, n_floats) in the fused layout (see neo_session): the same
   regions as m->data in the same order, the wq, wk, wv rows of each layer back to back. */
NEO_ATTN__PRIVATE neo_status neo__upload_fused(neo_runtime *rt, const neo_model *m, float *w) {
    const neo_model_info *mi = &m->info;
    size_t                L = (size_t)mi->n_layers, dim = (size_t)mi->dim, f = sizeof(float);
    size_t                kv = dim / (size_t)mi->n_heads * (size_t)mi->n_kv_heads, qkv = (dim + 2 * kv) * dim;
    size_t                oq = (size_t)(m->wq - m->data), owo = (size_t)(m->wo - m->data);
    neo_status            e;
    if ((e = neo__dev_copy(rt, w, m->data, oq * f)) != NEO_OK ||
        (e = neo__dev_copy2d(rt, w + oq, qkv * f, m->wq, dim * dim * f, dim * dim * f, L)) != NEO_OK ||
        (e = neo__dev_copy2d(rt, w + oq + dim * dim, qkv * f, m->wk, kv * dim * f, kv * dim * f, L)) != NEO_OK ||
        (e = neo__dev_copy2d(rt, w + oq + (dim + kv) * dim, qkv * f, m->wv, kv * dim * f, kv * dim * f, L)) != NEO_OK ||
        (e = neo__dev_copy(rt, w + owo, m->wo, (m->n_floats - owo) * f)) != NEO_OK)
        return e;
    return neo__dev_sync(rt);
}

NEO_ATTN__PRIVATE neo_status neo__session_create(neo_runtime *rt, const neo_model *m, const neo_session_desc *desc,
                                                 neo_session **out) {
    neo_session_desc      d;
    const neo_model_info *mi;
    neo_session          *s;
    neo_status            st = NEO_ERR_NO_MEMORY;
    size_t                kv, floats;
    const float          *base;
    memset(&d, 0, sizeof d);
    if (desc) d = *desc;
    if (!out || !m || d.n_ctx < 0 || d.gpu_heads < NEO_GPU_HEADS_NONE || d.gpu_heads > m->info.n_kv_heads ||
        (d.graphs != 0 && d.graphs != 1)) {
        neo__log(rt, NEO_LOG_ERROR, "neo_session_create: %s", !out ? "out is NULL" : !m ? "model is NULL" : d.n_ctx < 0 ? "n_ctx < 0"
                                                                                 : d.graphs != 0 && d.graphs != 1 ? "graphs must be 0 or 1"
                                                                                 : "gpu_heads must be in [NEO_GPU_HEADS_NONE, the model's n_kv_heads]");
        return NEO_ERR_INVALID_ARG;
    }
    mi = &m->info;
    for (int l = 0; d.layer_gpu_heads && l < mi->n_layers; l++)
        if (d.layer_gpu_heads[l] < NEO_GPU_HEADS_NONE || d.layer_gpu_heads[l] > mi->n_kv_heads) {
            neo__log(rt, NEO_LOG_ERROR, "neo_session_create: layer_gpu_heads[%d] must be in [NEO_GPU_HEADS_NONE, the model's n_kv_heads]", l);
            return NEO_ERR_INVALID_ARG;
        }
    kv = (size_t)(mi->dim / mi->n_heads) * (size_t)mi->n_kv_heads;
    if (!(s = (neo_session *)neo__calloc(&rt->alloc, sizeof *s))) {
        neo__log(rt, NEO_LOG_ERROR, "neo_session_create: out of host memory");
        return NEO_ERR_NO_MEMORY;
    }
    s->rt = rt;
    s->mv.rt = rt;
    s->m = m;
    s->n_ctx = d.n_ctx ? d.n_ctx : mi->seq_len;
    s->graphs = d.graphs && rt->model.graph_begin;
    base = m->data;
    if (rt->gpu) {
        if ((st = neo__dev_alloc(rt, (void **)&s->w_dev, m->n_floats * sizeof(float))) != NEO_OK ||
            (st = neo__upload_fused(rt, m, s->w_dev)) != NEO_OK)
            goto fail;
        base = s->w_dev;
        s->fused = 1;
    }
    /* the same offsets into whichever copy the step reads (wk and wv of the fused layout are
       not these: the step takes them from wq) */
#define NEO__REBASE(f) s->f = base + (m->f - m->data)
    NEO__REBASE(tok_emb);
    NEO__REBASE(rms_att);
    NEO__REBASE(wq);
    NEO__REBASE(wk);
    NEO__REBASE(wv);
    NEO__REBASE(wo);
    NEO__REBASE(rms_ffn);
    NEO__REBASE(w1);
    NEO__REBASE(w2);
    NEO__REBASE(w3);
    NEO__REBASE(rms_final);
    NEO__REBASE(wcls);
#undef NEO__REBASE
    /* x, xb, q, k, v, hb, logits */
    floats = 3 * (size_t)mi->dim + 2 * kv + (size_t)mi->hidden_dim + (size_t)mi->vocab_size;
    if ((st = neo__dev_alloc(rt, (void **)&s->act, floats * sizeof(float))) != NEO_OK ||
        (st = neo__dev_alloc(rt, (void **)&s->next, sizeof(int))) != NEO_OK)
        goto fail;
    s->x = s->act;
    s->xb = s->x + mi->dim;
    s->q = s->xb + mi->dim;
    s->k = s->q + mi->dim;
    s->v = s->k + kv;
    s->hb = s->v + kv;
    s->logits = s->hb + mi->hidden_dim;
    st = NEO_ERR_NO_MEMORY;
    if (!(s->layers = (neo_layer **)neo__calloc(&rt->alloc, sizeof(neo_layer *) * (size_t)mi->n_layers))) goto fail;
    for (int l = 0; l < mi->n_layers; l++) {
        neo_layer_desc ld;
        memset(&ld, 0, sizeof ld);
        ld.n_head = mi->n_heads;
        ld.n_head_kv = mi->n_kv_heads;
        ld.head_dim = mi->dim / mi->n_heads;
        ld.n_ctx = s->n_ctx;
        ld.kv_type = d.kv_type;
        ld.gpu_heads = d.layer_gpu_heads ? d.layer_gpu_heads[l] : d.gpu_heads;
        ld.pipeline = d.pipeline;
        ld.cpu_share = d.cpu_share;
        if ((st = neo__layer_create(rt, &ld, &s->layers[l])) != NEO_OK) { /* which says why */
            neo__session_destroy(s);
            return st;
        }
    }
    *out = s;
    return NEO_OK;
fail:
    neo__log(rt, NEO_LOG_ERROR, "neo_session_create: %s", neo_status_string(st));
    neo__session_destroy(s);
    return st;
}

NEO_ATTN__PUBLIC neo_status neo_session_create(neo_runtime *rt, const neo_model *m, const neo_session_desc *desc,
                                               neo_session **out) {
    neo_status st;
    if (out) *out = NULL;
    if (!rt || !neo__enter(rt, "neo_session_create")) return NEO_ERR_INVALID_ARG; /* no runtime: no logger to tell */
    if ((st = neo__no_capture(rt, "neo_session_create")) == NEO_OK) st = neo__session_create(rt, m, desc, out);
    neo__leave(rt);
    return st;
}

/* The matvec of y = W . x, W: [d][n] (and w_mul for NEO__MV_SWIGLU), x normalised when norm is set. */
NEO_ATTN__PRIVATE neo__matvec_args neo__mv_args(float *y, const float *w, const float *w_mul, const float *x, const float *norm, int n,
                                                int d, int epi) {
    neo__matvec_args a;
    memset(&a, 0, sizeof a);
    a.y = y;
    a.w = w;
    a.w_mul = w_mul;
    a.x = x;
    a.norm = norm;
    a.n = n;
    a.d = d;
    a.epilogue = epi;
    return a;
}

/* The backend's matvec, or the host's. */
NEO_ATTN__PRIVATE int neo__host_matvec_fn(void *mv, const neo__matvec_args *a) { return neo__host_matvec((neo__mv_host *)mv, a); }
NEO_ATTN__PRIVATE int neo__host_norm_fn(void *unused, const neo__matvec_args *a) {
    (void)unused;
    neo__rmsnorm_host(a->y, a->x, a->norm, a->n);
    return NEO_OK;
}
/* y = rmsnorm(x) * w on the host ([n] each), kept like a matvec by the stand-in (neo__standin_keep_mv) */
NEO_ATTN__PRIVATE int neo__norm_host(neo_session *s, float *y, const float *x, const float *w, int n) {
    neo__matvec_args a;
    int              st;
    memset(&a, 0, sizeof a);
    a.y = y, a.x = x, a.norm = w, a.n = n;
    return neo__standin_keep_mv(s->rt, neo__host_norm_fn, NULL, &a, &st) ? st : neo__host_norm_fn(NULL, &a);
}
/* The backend's matvec (which appends a's token itself), or the host's followed by the append op. */
NEO_ATTN__PRIVATE int neo__matvec(neo_session *s, const neo__matvec_args *a) {
    neo_runtime     *rt = s->rt;
    neo__matvec_args h = *a;
    neo__append_args p;
    int              st;
    if (rt->model.matvec) return rt->model.matvec(rt->dev_state, a, NEO__STREAM_MAIN);
    h.app = NULL;
    st = neo__standin_keep_mv(rt, neo__host_matvec_fn, &s->mv, &h, &st) ? st : neo__host_matvec(&s->mv, &h);
    if (st != NEO_OK || !a->app) return st;
    p = *a->app;
    p.src_k = a->y + a->rope_q;
    p.src_v = a->y + a->rope_q + a->rope_k;
    return rt->attn.append(rt->dev_state, &p, NEO__STREAM_MAIN);
}

NEO_ATTN__PRIVATE int neo__mv(neo_session *s, float *y, const float *w, const float *w_mul, const float *x, const float *norm, int n,
                              int d, int epi) {
    neo__matvec_args a = neo__mv_args(y, w, w_mul, x, norm, n, d, epi);
    return neo__matvec(s, &a);
}

/* d rows of q, k, v projections of x (normalised when norm is set) from y on, the first rope_q
   rotated as q, the next rope_k as k; app (or NULL) appends the k and v rows to a layer */
NEO_ATTN__PRIVATE int neo__mv_rope(neo_session *s, float *y, const float *w, const float *x, const float *norm, int d, int rope_q,
                                   int rope_k, int pos, const int *pos_dev, const neo__append_args *app) {
    const neo_model_info *mi = &s->m->info;
    neo__matvec_args      a = neo__mv_args(y, w, NULL, x, norm, mi->dim, d, NEO__MV_ROPE);
    a.pos = pos;
    a.pos_dev = pos_dev;
    a.rope_q = rope_q;
    a.rope_k = rope_k;
    a.head_size = mi->dim / mi->n_heads;
    a.app = app;
    return neo__matvec(s, &a);
}

/* The token in x through every layer into the logits, as run.c's forward() (all on the runtime's
   device ops). Captured (rt->capturing), each layer's position is its length on the device. */
NEO_ATTN__PRIVATE neo_status neo__session_layers(neo_session *s, int pos) {
    const neo_model_info *mi = &s->m->info;
    int                   dim = mi->dim, hid = mi->hidden_dim, kv = dim / mi->n_heads * mi->n_kv_heads, e = NEO_OK;
    for (int l = 0; l < mi->n_layers && e == NEO_OK; l++) {
        size_t       ld = (size_t)l * dim;
        const float *rms = s->rms_att + ld;
        const int   *pd = s->rt->capturing ? s->layers[l]->len_dev : NULL;
        /* attention rmsnorm, q k v projections, RoPE (q, k, v adjacent in act). The CPU runtime
           reads the model's own weights, wq, wk and wv apart: it normalises x once, here (its
           activations are host memory) */
        if (s->fused) { /* with the token's append into this layer's KV cache */
            neo__append_args ap;
            if ((e = neo__append_prep(s->layers[l], s->k, s->v, 1, &ap)) != NEO_OK) break;
            if ((e = neo__mv_rope(s, s->q, s->wq + (size_t)l * (dim + 2 * kv) * dim, s->x, rms, dim + 2 * kv, dim, kv, pos, pd, &ap)) != NEO_OK) {
                neo__log(s->rt, NEO_LOG_ERROR, "neo_session_step: layer %d: the q, k, v projection with the token's append: %s", l,
                         neo_status_string((neo_status)e));
                break;
            }
            neo__appended(s->layers[l], 1);
        } else {
            if ((e = neo__norm_host(s, s->xb, s->x, rms, dim)) != NEO_OK) break;
            if ((e = neo__mv_rope(s, s->q, s->wq + ld * dim, s->xb, NULL, dim, dim, 0, pos, pd, NULL)) == NEO_OK &&
                (e = neo__mv_rope(s, s->k, s->wk + ld * kv, s->xb, NULL, kv, 0, kv, pos, pd, NULL)) == NEO_OK &&
                (e = neo__mv(s, s->v, s->wv + ld * kv, NULL, s->xb, NULL, dim, kv, NEO__MV_STORE)) == NEO_OK)
                e = neo__attn_append(s->layers[l], s->k, s->v, 1);
        }
        /* attention over this layer's KV cache */
        if (e != NEO_OK || (e = neo__attn_decode(s->layers[l], s->q, s->xb)) != NEO_OK) break;
        /* output projection and residual; FFN w2(silu(w1 x) * w3 x) and residual */
        if ((e = neo__mv(s, s->x, s->wo + ld * dim, NULL, s->xb, NULL, dim, dim, NEO__MV_ADD)) != NEO_OK ||
            (e = neo__mv(s, s->hb, s->w1 + (size_t)l * hid * dim, s->w3 + (size_t)l * hid * dim, s->x, s->rms_ffn + ld, dim, hid,
                         NEO__MV_SWIGLU)) != NEO_OK)
            break;
        e = neo__mv(s, s->x, s->w2 + (size_t)l * dim * hid, NULL, s->hb, NULL, hid, dim, NEO__MV_ADD);
    }
    if (e == NEO_OK) e = neo__mv(s, s->logits, s->wcls, NULL, s->x, s->rms_final, dim, mi->vocab_size, NEO__MV_STORE);
    return (neo_status)e;
}

/* 1 when every layer's decode can be captured (neo__capturable). */
NEO_ATTN__PRIVATE int neo__session_capturable(const neo_session *s) {
    for (int l = 0; l < s->m->info.n_layers; l++)
        if (!neo__capturable(s->layers[l])) return 0;
    return 1;
}

/* The layers as the session's graph: captured the first time, then replayed. A capture that fails
   leaves nothing queued (its ops never ran) and turns the session's graphs off. */
NEO_ATTN__PRIVATE neo_status neo__session_graph(neo_session *s, int *ran) {
    neo_runtime *rt = s->rt;
    void        *g = NULL;
    int          e, e2;
    *ran = 0;
    if (!s->graph) {
        if ((e = rt->model.graph_begin(rt->dev_state, NEO__STREAM_MAIN)) != NEO_OK) return (neo_status)e;
        rt->capturing = 1;
        e = neo__session_layers(s, 0);
        rt->capturing = 0;
        e2 = rt->model.graph_end(rt->dev_state, NEO__STREAM_MAIN, &g);
        if (e != NEO_OK || e2 != NEO_OK) {
            if (g) rt->model.graph_free(rt->dev_state, g);
            s->graphs = 0;
            neo__log(rt, NEO_LOG_WARN, "neo_session_step: the step could not be captured into a CUDA graph (%s); steps run "
                     "without graphs", neo_status_string((neo_status)(e != NEO_OK ? e : e2)));
            return NEO_OK;
        }
        s->graph = g;
        neo__log(rt, NEO_LOG_INFO, "neo_session_step: the step (%d layers and the logits) is captured into a CUDA graph and "
                 "replayed from now on", s->m->info.n_layers);
    }
    *ran = 1;
    return (neo_status)rt->model.graph_launch(rt->dev_state, s->graph, NEO__STREAM_MAIN);
}

/* One token through every layer: the embedding row into x, then the layers, replayed from the
   session's graph where it has one. */
NEO_ATTN__PRIVATE neo_status neo__session_forward(neo_session *s, int token, int pos) {
    int        dim = s->m->info.dim, ran = 0;
    neo_status e = neo__dev_copy(s->rt, s->x, s->tok_emb + (size_t)token * dim, sizeof(float) * (size_t)dim);
    if (e == NEO_OK && s->graphs && neo__session_capturable(s)) e = neo__session_graph(s, &ran);
    if (e != NEO_OK || !ran) return e == NEO_OK ? neo__session_layers(s, pos) : e;
    for (int l = 0; l < s->m->info.n_layers; l++) { /* what the replay did on the device */
        s->layers[l]->len++;
        s->layers[l]->n_decode++;
        s->layers[l]->n_overlapped += neo__rings(s->layers[l]);
    }
    return NEO_OK;
}

/* s->next = the argmax of the step's logits [V], on the device, or on the host (kept by the
   stand-in like a matvec). */
NEO_ATTN__PRIVATE neo_status neo__argmax(neo_session *s, int V) {
    neo_runtime     *rt = s->rt;
    neo__matvec_args a;
    int              st;
    if (rt->model.argmax) return (neo_status)rt->model.argmax(rt->dev_state, s->next, s->logits, V, NEO__STREAM_MAIN);
    memset(&a, 0, sizeof a);
    a.x = s->logits, a.n = V;
    return (neo_status)(neo__standin_keep_mv(rt, neo__host_argmax_fn, s->next, &a, &st) ? st : neo__host_argmax(s->next, s->logits, V));
}

/* A step that hands back either the logits (logits set) or their argmax (next set). */
NEO_ATTN__PRIVATE neo_status neo__session_step(neo_session *s, int token, float *logits, int *next) {
    neo_runtime *rt;
    neo_status   st;
    int          pos, V;
    V = s->m->info.vocab_size;
    pos = neo_layer_length(s->layers[0]);
    if (!logits && !next) {
        neo__log(s->rt, NEO_LOG_ERROR, "neo_session_step: the output pointer is NULL");
        return NEO_ERR_INVALID_ARG;
    }
    if (token < 0 || token >= V) {
        neo__log(s->rt, NEO_LOG_ERROR, "neo_session_step: token %d is outside [0, %d), the vocabulary", token, V);
        return NEO_ERR_INVALID_ARG;
    }
    if (pos >= s->n_ctx) {
        neo__log(s->rt, NEO_LOG_WARN, "neo_session_step: the session is full (n_ctx %d tokens)", s->n_ctx);
        return NEO_ERR_FULL;
    }
    rt = s->rt;
    neo__counts_keep(s->layers, s->m->info.n_layers);
    if ((st = neo__session_forward(s, token, pos)) == NEO_OK) {
        if (logits) st = neo__dev_copy(rt, logits, s->logits, sizeof(float) * (size_t)V);
        else if ((st = neo__argmax(s, V)) == NEO_OK)
            st = neo__dev_copy(rt, next, s->next, sizeof(int));
        if (st == NEO_OK) st = neo__dev_sync(rt);
    }
    if (st != NEO_OK) { /* leave no layer a token ahead of the others, nor a decode counted */
        neo__log(s->rt, NEO_LOG_ERROR, "neo_session_step: %s", neo_status_string(st));
        for (int l = 0; l < s->m->info.n_layers; l++)
            if (neo_layer_length(s->layers[l]) > pos) neo__layer_truncate(s->layers[l], pos, "neo_session_step");
        neo__counts_back(s->layers, s->m->info.n_layers);
    }
    return st;
}

/* neo__session_step with the runtime's flag taken */
NEO_ATTN__PRIVATE neo_status neo__session_step_entry(neo_session *s, int token, float *logits, int *next) {
    neo_status st;
    if (!s || !neo__enter(s->rt, "neo_session_step")) return NEO_ERR_INVALID_ARG;
    if ((st = neo__no_capture(s->rt, "neo_session_step")) == NEO_OK) st = neo__session_step(s, token, logits, next);
    neo__leave(s->rt);
    return st;
}

NEO_ATTN__PUBLIC neo_status neo_session_step(neo_session *s, int token, float *logits) {
    return neo__session_step_entry(s, token, logits, NULL);
}

NEO_ATTN__PUBLIC neo_status neo_session_step_argmax(neo_session *s, int token, int *next) {
    return neo__session_step_entry(s, token, NULL, next);
}

NEO_ATTN__PUBLIC int neo_session_length(const neo_session *s) { return s ? neo_layer_length(s->layers[0]) : 0; }

NEO_ATTN__PUBLIC neo_status neo_session_truncate(neo_session *s, int n_tokens) {
    neo_status st = NEO_OK;
    if (!s || !neo__enter(s->rt, "neo_session_truncate")) return NEO_ERR_INVALID_ARG;
    st = neo__no_capture(s->rt, "neo_session_truncate");
    for (int l = 0; l < s->m->info.n_layers && st == NEO_OK; l++) /* every layer has the same length */
        st = neo__layer_truncate(s->layers[l], n_tokens, "neo_session_truncate");
    neo__leave(s->rt);
    return st;
}

NEO_ATTN__PUBLIC neo_status neo_session_get_info(const neo_session *s, neo_layer_info *info) {
    if (!s) return NEO_ERR_INVALID_ARG;
    if (!info) {
        neo__log(s->rt, NEO_LOG_ERROR, "neo_session_get_info: info is NULL");
        return NEO_ERR_INVALID_ARG;
    }
    memset(info, 0, sizeof *info);
    for (int l = 0; l < s->m->info.n_layers; l++) {
        neo_layer_info li;
        memset(&li, 0, sizeof li);
        neo_layer_get_info(s->layers[l], &li);
        info->gpu_heads = li.gpu_heads;
        info->cpu_heads = li.cpu_heads;
        info->pipeline = li.pipeline;
        info->gpu_bytes += li.gpu_bytes;
        info->host_bytes += li.host_bytes;
        info->n_decode += li.n_decode;
        info->n_overlapped += li.n_overlapped;
    }
    return NEO_OK;
}

#endif /* NEO_ATTN_NO_MODEL */

#endif /* NEO_ATTN_IMPLEMENTATION_INCLUDED */
#endif /* NEO_ATTN_IMPLEMENTATION */

/*
------------------------------------------------------------------------------
This software is available under 2 licenses -- choose whichever you prefer.
------------------------------------------------------------------------------
ALTERNATIVE A - MIT License
Copyright (c) 2026 the neo_attn authors
Permission is hereby granted, free of charge, to any person obtaining a copy of
this software and associated documentation files (the "Software"), to deal in
the Software without restriction, including without limitation the rights to
use, copy, modify, merge, publish, distribute, sublicense, and/or sell copies
of the Software, and to permit persons to whom the Software is furnished to do
so, subject to the following conditions:
The above copyright notice and this permission notice shall be included in all
copies or substantial portions of the Software.
THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR
IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY,
FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE
AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER
LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM,
OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE
SOFTWARE.
------------------------------------------------------------------------------
ALTERNATIVE B - Public Domain (www.unlicense.org)
This is free and unencumbered software released into the public domain.
Anyone is free to copy, modify, publish, use, compile, sell, or distribute this
software, either in source code form or as a compiled binary, for any purpose,
commercial or non-commercial, and by any means.
In jurisdictions that recognize copyright laws, the author or authors of this
software dedicate any and all copyright interest in the software to the public
domain. We make this dedication in perpetuity for the benefit of the public at
large and to the detriment of our heirs and successors. We intend this
dedication to be an overt act of relinquishment in perpetuity of all present
and future rights to this software under copyright law.
THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR
IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY,
FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE
AUTHORS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER LIABILITY, WHETHER IN AN
ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM, OUT OF OR IN CONNECTION
WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE SOFTWARE.
------------------------------------------------------------------------------
*/
