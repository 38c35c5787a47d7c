/* neo_attn.h - v0.1.0 - decode attention over a KV cache split between GPU and host memory - MIT or public domain, see end of file

   neo_attn keeps some KV heads of every attention layer in GPU memory and the rest in host
   memory, and attends over both halves at once: the GPU half on a side CUDA stream, the host
   half with CPU flash-attention on a pthread pool. With no GPU it is a fast, exact CPU decode
   attention library. It also carries a tiny llama-style decode loop (llama2.c checkpoints).

   DO THIS
   -------
       #define NEO_ATTN_IMPLEMENTATION
       #include "neo_attn.h"
   in exactly one C or C++ file; every other file just includes the header. Link with -lm
   -lpthread. For the GPU path, also compile neo_attn_cuda.cu with nvcc, define NEO_ATTN_CUDA=1
   where the implementation is compiled, and link cudart.

   CONFIGURATION MACROS (define before the implementing include)
   ------------------------------------------------------------
       NEO_ATTN_API              extern        linkage of every public function
       NEO_ATTN_STATIC           off           make every public function static (one TU only)
       NEO_ATTN_MALLOC(sz, u)    malloc(sz)    host allocator; define with NEO_ATTN_FREE or neither
       NEO_ATTN_FREE(p, u)       free(p)
       NEO_ATTN_ASSERT(x)        assert(x)     internal invariants only, never caller input
       NEO_ATTN_CUDA             0             1 = call into neo_attn_cuda.cu for gpu = 1 runtimes
       NEO_ATTN_NO_THREADS       0             1 = no pthread pool; every parallel loop runs inline
       NEO_ATTN_NO_SIMD          0             1 = only the portable scalar kernels

   QUICK START
   -----------
       neo_runtime *rt;  neo_layer *layer;
       neo_runtime_desc rd = {0};                         // n_threads 0 = online cores, CPU only
       if (neo_runtime_create(&rd, &rt) != NEO_OK) return 1;
       neo_layer_desc d = {0};
       d.n_head = 32; d.n_head_kv = 8; d.head_dim = 128; d.n_ctx = 32768;   // F16 cache by default
       neo_status s = neo_layer_create(rt, &d, &layer);
       if (s != NEO_OK) { fprintf(stderr, "%s\n", neo_status_string(s)); return 1; }
       for (int t = 0; t < n_prompt; t++)                  // k: [n_head_kv][head_dim] per token
           neo_attn_append(layer, k + t * 8 * 128, v + t * 8 * 128, 1);
       neo_attn_decode(layer, q, out);                     // q: [32][128] -> out: [32][128]
       neo_layer_destroy(layer);
       neo_runtime_destroy(rt);

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

   THREADS AND DETERMINISM
   -----------------------
   A runtime owns a persistent pool of n_threads - 1 workers; the calling thread is the last
   one. Workers spin for NEO_ATTN_SPIN_US microseconds after a job before they sleep, because
   the wake-up is paid once per layer per token. CPU attention splits every KV head's cells
   into chunks whose size depends only on the context length, and merges the chunks in a fixed
   order, so the output is bitwise identical for any thread count on a given CPU path
   (scalar, AVX2 or AVX-512; neo_runtime_desc.cpu_isa can force one).
   A runtime, and the layers and sessions made from it, are used from one thread at a time;
   different runtimes are independent.

   THE DECODE LOOP
   ---------------
   neo_model loads a llama2.c checkpoint (the legacy version-0 layout: seven int32 header
   fields, float32 weights, the skipped RoPE tables, and a classifier only when vocab_size is
   negative in the header). neo_session runs one token at a time through every layer the way
   llama2.c's run.c does, with attention through neo_attn_append / neo_attn_decode and the
   matmuls on the runtime's pool. Tokenizers and samplers belong to the program
   (examples/mini-chat has run.c's).

   neo_attn DOES NOT
   -----------------
   - own or load an engine's weights (the decode loop owns only what it loads itself)
   - tokenize, sample, batch several sequences, or page the cache
   - quantize the cache below 16 bits

   TRUST BOUNDARY
   --------------
   Descriptors, shapes, token ids, lengths and model files are validated: bad values give a
   status and change nothing. Pointers are trusted to point at as many elements as their
   shape comment says. Nothing here aborts, exits or prints because of caller input.
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
    X(NEO_ERR_UNSUPPORTED,   "not supported by this build or CPU") \
    X(NEO_ERR_IO,            "file could not be opened or read") \
    X(NEO_ERR_FORMAT,        "file is not in the expected format")
/* clang-format on */
#define NEO__STATUS_ENUM(name, text) name,
typedef enum neo_status { NEO__STATUS_LIST(NEO__STATUS_ENUM) NEO__STATUS_COUNT } neo_status;
#undef NEO__STATUS_ENUM

NEO_ATTN_API const char *neo_status_string(neo_status s);   /* "unknown status" for other values */
NEO_ATTN_API const char *neo_attn_version(void);            /* NEO_ATTN_VERSION_STRING */

typedef enum neo_type { NEO_TYPE_F16 = 0, NEO_TYPE_BF16, NEO_TYPE_F32 } neo_type;   /* KV storage */
typedef enum neo_pipeline { NEO_PIPELINE_OFF = 0, NEO_PIPELINE_ON, NEO_PIPELINE_AUTO } neo_pipeline;
typedef enum neo_cpu_isa { NEO_CPU_AUTO = 0, NEO_CPU_SCALAR, NEO_CPU_AVX2, NEO_CPU_AVX512 } neo_cpu_isa;

/* --- runtime: thread pool, GPU device and streams --- */

typedef struct neo_runtime neo_runtime;
typedef struct neo_runtime_desc {
    int         n_threads;   /* CPU threads, the caller's included; 0 = online cores */
    int         gpu;         /* 1 = use a CUDA GPU (needs NEO_ATTN_CUDA, else NEO_ERR_UNSUPPORTED); 0 = CPU only */
    int         gpu_device;  /* CUDA device ordinal when gpu = 1 */
    void       *gpu_stream;  /* the engine's cudaStream_t to order against; NULL = the runtime makes its own */
    neo_cpu_isa cpu_isa;     /* AUTO = best the CPU has; forcing one it lacks is NEO_ERR_UNSUPPORTED */
} neo_runtime_desc;

typedef struct neo_runtime_info {
    int         n_threads;   /* threads actually running (fewer than asked if pthread_create failed) */
    int         gpu;         /* 1 when a GPU is in use */
    neo_cpu_isa cpu_isa;     /* the CPU kernels in use, never AUTO */
} neo_runtime_info;

/* Makes the pool (and the GPU context when gpu = 1). desc NULL = all defaults. */
NEO_ATTN_API neo_status neo_runtime_create(const neo_runtime_desc *desc, neo_runtime **out);
NEO_ATTN_API void       neo_runtime_destroy(neo_runtime *rt);   /* NULL is fine; destroy its layers first */
NEO_ATTN_API neo_status neo_runtime_get_info(const neo_runtime *rt, neo_runtime_info *info);
NEO_ATTN_API const char *neo_cpu_isa_name(neo_cpu_isa isa);     /* "auto", "scalar", "avx2", "avx512" */

/* --- layer: one attention layer's KV cache, split by KV head --- */

typedef struct neo_layer neo_layer;
typedef struct neo_layer_desc {
    int          n_head;         /* query heads */
    int          n_head_kv;      /* KV heads; n_head % n_head_kv == 0 (GQA group = n_head / n_head_kv) */
    int          head_dim;       /* Q/K head size */
    int          head_dim_v;     /* V head size; 0 = head_dim */
    int          n_ctx;          /* capacity in tokens */
    neo_type     kv_type;        /* storage type of the cache; default F16 */
    int          gpu_heads;      /* KV heads kept in GPU memory; 0 = all (no split). Heads [0, gpu_heads)
                                    live on the GPU, [gpu_heads, n_head_kv) in host memory. On a CPU-only
                                    runtime every head is in host memory. */
    neo_pipeline pipeline;       /* how a split layer runs: OFF = host half streamed back to the GPU and
                                    attended there; ON = GPU half and CPU half attended concurrently;
                                    AUTO = chosen from measured costs */
    float        scale;          /* 0 = 1/sqrt(head_dim) */
    float        softcap;        /* 0 = off */
    float        max_alibi_bias; /* 0 = off */
    const float *sinks;          /* [n_head] sink logits or NULL; copied at create */
} neo_layer_desc;

/* The --headinfer-gpu-heads-frac rule: frac >= 1 or n_head_kv <= 1 gives 0 (no split);
   otherwise round(frac * n_head_kv) clamped to [1, n_head_kv - 1]. */
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
    long long    n_overlapped;              /* decode calls whose two halves ran concurrently */
} neo_layer_info;
NEO_ATTN_API neo_status neo_layer_get_info(const neo_layer *layer, neo_layer_info *info);

/* --- decode loop: llama2.c checkpoints --- */

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

/* Reads a whole checkpoint. NEO_ERR_IO if the file cannot be opened or read, NEO_ERR_FORMAT if
   its header is implausible or its size is not exactly what the header implies. */
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
} neo_session_desc;

/* One sequence's state (KV cache of every layer and activations). model and rt must outlive it. */
NEO_ATTN_API neo_status neo_session_create(neo_runtime *rt, const neo_model *model, const neo_session_desc *desc,
                                           neo_session **out);
NEO_ATTN_API void       neo_session_destroy(neo_session *s);   /* NULL is fine */
/* Runs token at position neo_session_length(s) through every layer and writes logits: [vocab_size]
   (host memory). NEO_ERR_INVALID_ARG for a token outside [0, vocab_size), NEO_ERR_FULL when the
   cache holds n_ctx tokens; on an error nothing changes. */
NEO_ATTN_API neo_status neo_session_step(neo_session *s, int token, float *logits);
NEO_ATTN_API int        neo_session_length(const neo_session *s);   /* 0 for NULL */
NEO_ATTN_API neo_status neo_session_truncate(neo_session *s, int n_tokens);   /* as neo_layer_truncate */
/* Sums of every layer's neo_layer_info (heads per layer, bytes and calls over all layers). */
NEO_ATTN_API neo_status neo_session_get_info(const neo_session *s, neo_layer_info *info);

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
#ifndef NEO_ATTN_SPIN_US
#define NEO_ATTN_SPIN_US 300 /* how long an idle worker spins before it sleeps */
#endif

#if !NEO_ATTN_NO_THREADS
#include <pthread.h>
#include <sched.h>
#include <unistd.h>
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

#ifdef NEO_ATTN_STATIC
#define NEO_ATTN__PUBLIC static
#else
#define NEO_ATTN__PUBLIC
#endif

/* Internal limits. Cells per block bound the per-thread scratch; a decode splits each KV head
   into at most NEO__MAX_CHUNKS chunks of at least NEO__MIN_CHUNK cells. */
#define NEO__BLOCK 32
#define NEO__MIN_CHUNK 256
#define NEO__MAX_CHUNKS 256
#define NEO__MAX_HEAD_DIM 16384
#define NEO__MAX_HEADS 65536
#define NEO__PREFILL_QUERIES 64 /* queries (tokens x group heads) one prefill task carries */

/* =============================================================================================
   >>util: allocation, checked size math, f16 / bf16, clocks
   ============================================================================================= */
NEO_ATTN__PRIVATE void *neo__alloc(size_t n) { return n ? NEO_ATTN_MALLOC(n, NULL) : NULL; }
NEO_ATTN__PRIVATE void *neo__calloc(size_t n) {
    void *p = neo__alloc(n);
    if (p) memset(p, 0, n);
    return p;
}
NEO_ATTN__PRIVATE void neo__free(void *p) {
    if (p) NEO_ATTN_FREE(p, NULL);
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
    }
    return "unknown";
}

/* =============================================================================================
   >>pool: persistent workers and one primitive, a parallel-for the caller takes part in
   =============================================================================================
   A job is (fn, user, n_tasks); tasks are handed out by an atomic counter, so which thread runs
   which task varies, and callers must make results independent of that. Every worker checks in
   after each job, and the caller waits for all of them, so job fields are never read while the
   next job writes them. Idle workers spin for NEO_ATTN_SPIN_US, then sleep on a condition
   variable; the caller signals only when someone sleeps. */
typedef void (*neo__task_fn)(void *user, int task, int thread);

#if !NEO_ATTN_NO_THREADS
typedef struct neo__worker {
    struct neo__pool *pool;
    int               id; /* 1 .. n_threads - 1; the caller is 0 */
} neo__worker;
#endif

typedef struct neo__pool {
    int n_threads; /* caller included */
#if !NEO_ATTN_NO_THREADS
    int             n_workers;
    pthread_t      *threads; /* [n_workers] */
    neo__worker    *workers; /* [n_workers] */
    pthread_mutex_t mu;
    pthread_cond_t  cv;
    neo__task_fn    fn;       /* the job: written only while no worker is inside one */
    void           *user;
    int             n_tasks;
    unsigned        gen;      /* atomic: bumped to publish a job */
    int             next;     /* atomic: next task index */
    int             finished; /* atomic: workers done with the current job */
    int             sleeping; /* atomic: workers waiting on cv */
    int             stop;     /* atomic */
#endif
} neo__pool;

#if !NEO_ATTN_NO_THREADS
NEO_ATTN__PRIVATE void neo__cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

NEO_ATTN__PRIVATE void *neo__worker_main(void *arg) {
    neo__worker *w = (neo__worker *)arg;
    neo__pool   *p = w->pool;
    unsigned     seen = 0;
    for (;;) {
        double t0 = neo__now_us();
        for (int spins = 0;; spins++) {
            if (__atomic_load_n(&p->gen, __ATOMIC_ACQUIRE) != seen || __atomic_load_n(&p->stop, __ATOMIC_ACQUIRE)) break;
            if ((spins & 255) == 255) {
                if (neo__now_us() - t0 > NEO_ATTN_SPIN_US) {
                    pthread_mutex_lock(&p->mu);
                    __atomic_fetch_add(&p->sleeping, 1, __ATOMIC_SEQ_CST);
                    while (__atomic_load_n(&p->gen, __ATOMIC_SEQ_CST) == seen && !__atomic_load_n(&p->stop, __ATOMIC_SEQ_CST))
                        pthread_cond_wait(&p->cv, &p->mu);
                    __atomic_fetch_sub(&p->sleeping, 1, __ATOMIC_SEQ_CST);
                    pthread_mutex_unlock(&p->mu);
                    t0 = neo__now_us();
                } else if (spins > 4096) {
                    sched_yield(); /* more threads than cores: let the caller run */
                }
            }
            neo__cpu_relax();
        }
        if (__atomic_load_n(&p->stop, __ATOMIC_ACQUIRE)) break;
        seen = __atomic_load_n(&p->gen, __ATOMIC_ACQUIRE);
        for (;;) {
            int i = __atomic_fetch_add(&p->next, 1, __ATOMIC_RELAXED);
            if (i >= p->n_tasks) break;
            p->fn(p->user, i, w->id);
        }
        __atomic_fetch_add(&p->finished, 1, __ATOMIC_RELEASE);
    }
    return NULL;
}
#endif

NEO_ATTN__PRIVATE void neo__pool_destroy(neo__pool *p) {
#if !NEO_ATTN_NO_THREADS
    if (p->threads) {
        pthread_mutex_lock(&p->mu);
        __atomic_store_n(&p->stop, 1, __ATOMIC_SEQ_CST);
        pthread_cond_broadcast(&p->cv);
        pthread_mutex_unlock(&p->mu);
        for (int i = 0; i < p->n_workers; i++) pthread_join(p->threads[i], NULL);
        pthread_cond_destroy(&p->cv);
        pthread_mutex_destroy(&p->mu);
    }
    neo__free(p->threads);
    neo__free(p->workers);
    p->threads = NULL;
    p->workers = NULL;
#endif
    p->n_threads = 1;
}

/* Starts n_threads - 1 workers; if the system refuses some, runs with fewer. */
NEO_ATTN__PRIVATE neo_status neo__pool_init(neo__pool *p, int n_threads) {
    memset(p, 0, sizeof *p);
    p->n_threads = 1;
#if !NEO_ATTN_NO_THREADS
    if (n_threads <= 1) return NEO_OK;
    p->threads = (pthread_t *)neo__alloc(sizeof(pthread_t) * (size_t)(n_threads - 1));
    p->workers = (neo__worker *)neo__alloc(sizeof(neo__worker) * (size_t)(n_threads - 1));
    if (!p->threads || !p->workers) {
        neo__free(p->threads);
        neo__free(p->workers);
        p->threads = NULL;
        p->workers = NULL;
        return NEO_ERR_NO_MEMORY;
    }
    if (pthread_mutex_init(&p->mu, NULL) != 0) goto no_threads;
    if (pthread_cond_init(&p->cv, NULL) != 0) {
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
    neo__free(p->threads);
    neo__free(p->workers);
    p->threads = NULL;
    p->workers = NULL;
#else
    (void)n_threads;
#endif
    return NEO_OK;
}

/* Runs fn(user, task, thread) for task in [0, n_tasks) with thread in [0, n_threads), and
   returns when all are done. */
NEO_ATTN__PRIVATE void neo__pool_run(neo__pool *p, int n_tasks, neo__task_fn fn, void *user) {
#if !NEO_ATTN_NO_THREADS
    if (p->n_workers > 0 && n_tasks > 1) {
        p->fn = fn;
        p->user = user;
        p->n_tasks = n_tasks;
        __atomic_store_n(&p->next, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&p->finished, 0, __ATOMIC_RELAXED);
        __atomic_fetch_add(&p->gen, 1u, __ATOMIC_SEQ_CST);
        if (__atomic_load_n(&p->sleeping, __ATOMIC_SEQ_CST)) {
            pthread_mutex_lock(&p->mu);
            pthread_cond_broadcast(&p->cv);
            pthread_mutex_unlock(&p->mu);
        }
        for (;;) {
            int i = __atomic_fetch_add(&p->next, 1, __ATOMIC_RELAXED);
            if (i >= n_tasks) break;
            fn(user, i, 0);
        }
        for (int spins = 0; __atomic_load_n(&p->finished, __ATOMIC_ACQUIRE) < p->n_workers; spins++) {
            if (spins > 4096) sched_yield();
            else neo__cpu_relax();
        }
        return;
    }
#endif
    for (int i = 0; i < n_tasks; i++) fn(user, i, 0);
}

/* =============================================================================================
   >>cpu: CPU kernels (scalar, AVX2 + F16C + FMA, AVX-512) behind one small table
   =============================================================================================
   Attention works on blocks of NEO__BLOCK cells, reading K and V in their storage type and
   widening in registers. Four queries of a GQA group share every K and V load, so DRAM sees
   each row once per call. Function pointers are called once per block, never per row. */
typedef struct neo__kernels {
    neo_cpu_isa isa;
    /* s: [nq][NEO__BLOCK] <- q: [nq][d] . k: [nk][d] of type t (row dot products) */
    void (*scores)(float *s, const float *q, const void *k, neo_type t, int nq, int nk, int d);
    /* x: [n] <- exp(x - m); returns the sum */
    float (*exp_sum)(float *x, int n, float m);
    /* acc: [nq][dv] += p: [nq][NEO__BLOCK] x v: [nk][dv] of type t */
    void (*pv)(float *acc, const float *p, const void *v, neo_type t, int nq, int nk, int dv);
    /* dot product of two [n] vectors (the decode loop's matmuls) */
    float (*dot)(const float *a, const float *b, int n);
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
NEO_ATTN__PRIVATE void neo__scores_scalar(float *s, const float *q, const void *k, neo_type t, int nq, int nk, int d) {
    size_t es = neo__type_size(t);
    for (int r = 0; r < nq; r++)
        for (int b = 0; b < nk; b++)
            s[r * NEO__BLOCK + b] = neo__dot_tail(0.0f, q + (size_t)r * d, (const char *)k + (size_t)b * d * es, t, 0, d);
}
NEO_ATTN__PRIVATE float neo__exp_sum_scalar(float *x, int n, float m) {
    float sum = 0.0f;
    for (int i = 0; i < n; i++) {
        x[i] = expf(x[i] - m);
        sum += x[i];
    }
    return sum;
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
   while the core also computes, so each K or V row read asks for the row NEO__PREFETCH bytes
   ahead as well; prefetches never fault, so running past the cache's end is harmless. */
#ifndef NEO__PREFETCH
#define NEO__PREFETCH 4096
#endif
static inline void neo__prefetch_row(const char *row, size_t bytes) {
    for (size_t o = 0; o < bytes; o += 64) _mm_prefetch(row + NEO__PREFETCH + o, _MM_HINT_T0);
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
NEO__AVX2 static inline void neo__scores_avx2_t(float *s, const float *q, const void *k, neo_type t, int nq, int nk, int d) {
    size_t es = neo__type_size(t);
    int    dm = d & ~7;
    for (int b = 0; b < nk; b++) {
        const char *kr = (const char *)k + (size_t)b * d * es;
        int r = 0;
        neo__prefetch_row(kr, (size_t)d * es);
        for (; r + 4 <= nq; r += 4) {
            const float *q0 = q + (size_t)r * d, *q1 = q0 + d, *q2 = q1 + d, *q3 = q2 + d;
            __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
            for (int j = 0; j < dm; j += 8) {
                __m256 kv = neo__ld8(kr, (size_t)j, t);
                a0 = _mm256_fmadd_ps(_mm256_loadu_ps(q0 + j), kv, a0);
                a1 = _mm256_fmadd_ps(_mm256_loadu_ps(q1 + j), kv, a1);
                a2 = _mm256_fmadd_ps(_mm256_loadu_ps(q2 + j), kv, a2);
                a3 = _mm256_fmadd_ps(_mm256_loadu_ps(q3 + j), kv, a3);
            }
            /* four horizontal sums at once */
            __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));
            float  o[4];
            _mm_storeu_ps(o, _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1)));
            for (int i = 0; i < 4; i++) s[(r + i) * NEO__BLOCK + b] = neo__dot_tail(o[i], q0 + (size_t)i * d, kr, t, dm, d);
        }
        for (; r < nq; r++) {
            const float *qr = q + (size_t)r * d;
            __m256 a0 = _mm256_setzero_ps();
            for (int j = 0; j < dm; j += 8) a0 = _mm256_fmadd_ps(_mm256_loadu_ps(qr + j), neo__ld8(kr, (size_t)j, t), a0);
            s[r * NEO__BLOCK + b] = neo__dot_tail(neo__hsum8(a0), qr, kr, t, dm, d);
        }
    }
}
NEO__AVX2 NEO_ATTN__PRIVATE void neo__scores_avx2(float *s, const float *q, const void *k, neo_type t, int nq, int nk, int d) {
    /* one call per storage type, so each gets its own inlined loop */
    if (t == NEO_TYPE_F16) neo__scores_avx2_t(s, q, k, NEO_TYPE_F16, nq, nk, d);
    else if (t == NEO_TYPE_BF16) neo__scores_avx2_t(s, q, k, NEO_TYPE_BF16, nq, nk, d);
    else neo__scores_avx2_t(s, q, k, NEO_TYPE_F32, nq, nk, d);
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
NEO__AVX2 static inline void neo__pv_avx2_t(float *acc, const float *p, const void *v, neo_type t, int nq, int nk, int dv) {
    size_t es = neo__type_size(t);
    int    dm = dv & ~7, r = 0;
    for (; r + 4 <= nq; r += 4) {
        const float *p0 = p + r * NEO__BLOCK;
        float       *o = acc + (size_t)r * dv;
        for (int j = 0; j < dm; j += 8) {
            __m256 a0 = _mm256_loadu_ps(o + j), a1 = _mm256_loadu_ps(o + dv + j);
            __m256 a2 = _mm256_loadu_ps(o + 2 * dv + j), a3 = _mm256_loadu_ps(o + 3 * dv + j);
            for (int b = 0; b < nk; b++) {
                if (j == 0) neo__prefetch_row((const char *)v + (size_t)b * dv * es, (size_t)dv * es);
                __m256 vv = neo__ld8((const char *)v + (size_t)b * dv * es, (size_t)j, t);
                a0 = _mm256_fmadd_ps(_mm256_set1_ps(p0[b]), vv, a0);
                a1 = _mm256_fmadd_ps(_mm256_set1_ps(p0[NEO__BLOCK + b]), vv, a1);
                a2 = _mm256_fmadd_ps(_mm256_set1_ps(p0[2 * NEO__BLOCK + b]), vv, a2);
                a3 = _mm256_fmadd_ps(_mm256_set1_ps(p0[3 * NEO__BLOCK + b]), vv, a3);
            }
            _mm256_storeu_ps(o + j, a0);
            _mm256_storeu_ps(o + dv + j, a1);
            _mm256_storeu_ps(o + 2 * dv + j, a2);
            _mm256_storeu_ps(o + 3 * dv + j, a3);
        }
    }
    for (; r < nq; r++) {
        const float *pr = p + r * NEO__BLOCK;
        float       *o = acc + (size_t)r * dv;
        for (int j = 0; j < dm; j += 8) {
            __m256 a0 = _mm256_loadu_ps(o + j);
            for (int b = 0; b < nk; b++) {
                if (j == 0) neo__prefetch_row((const char *)v + (size_t)b * dv * es, (size_t)dv * es);
                a0 = _mm256_fmadd_ps(_mm256_set1_ps(pr[b]), neo__ld8((const char *)v + (size_t)b * dv * es, (size_t)j, t), a0);
            }
            _mm256_storeu_ps(o + j, a0);
        }
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
NEO__AVX512 static inline void neo__scores_avx512_t(float *s, const float *q, const void *k, neo_type t, int nq, int nk, int d) {
    size_t es = neo__type_size(t);
    for (int b = 0; b < nk; b++) {
        const char *kr = (const char *)k + (size_t)b * d * es;
        int r = 0;
        neo__prefetch_row(kr, (size_t)d * es);
        for (; r + 4 <= nq; r += 4) {
            const float *q0 = q + (size_t)r * d, *q1 = q0 + d, *q2 = q1 + d, *q3 = q2 + d;
            __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
            for (int j = 0; j < d; j += 16) {
                __mmask16 m = neo__mask16(d - j);
                __m512    kv = neo__ld16(kr, (size_t)j, m, t);
                a0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, q0 + j), kv, a0);
                a1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, q1 + j), kv, a1);
                a2 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, q2 + j), kv, a2);
                a3 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, q3 + j), kv, a3);
            }
            float o[4];
            _mm_storeu_ps(o, neo__hsum4x16(a0, a1, a2, a3));
            for (int i = 0; i < 4; i++) s[(r + i) * NEO__BLOCK + b] = o[i];
        }
        for (; r < nq; r++) {
            const float *qr = q + (size_t)r * d;
            __m512 a0 = _mm512_setzero_ps();
            for (int j = 0; j < d; j += 16) {
                __mmask16 m = neo__mask16(d - j);
                a0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, qr + j), neo__ld16(kr, (size_t)j, m, t), a0);
            }
            s[r * NEO__BLOCK + b] = _mm512_reduce_add_ps(a0);
        }
    }
}
NEO__AVX512 NEO_ATTN__PRIVATE void neo__scores_avx512(float *s, const float *q, const void *k, neo_type t, int nq, int nk, int d) {
    if (t == NEO_TYPE_F16) neo__scores_avx512_t(s, q, k, NEO_TYPE_F16, nq, nk, d);
    else if (t == NEO_TYPE_BF16) neo__scores_avx512_t(s, q, k, NEO_TYPE_BF16, nq, nk, d);
    else neo__scores_avx512_t(s, q, k, NEO_TYPE_F32, nq, nk, d);
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
NEO__AVX512 static inline void neo__pv_avx512_t(float *acc, const float *p, const void *v, neo_type t, int nq, int nk, int dv) {
    size_t es = neo__type_size(t);
    int    r = 0;
    /* Columns in groups of 64 with rows inner, so each V row is read front to back, which is
       what the hardware prefetcher follows. */
    for (; r + 4 <= nq; r += 4) {
        const float *p0 = p + r * NEO__BLOCK;
        float       *o = acc + (size_t)r * dv;
        for (int j = 0; j < dv; j += 32) {
            __mmask16 m0 = neo__mask16(dv - j), m1 = neo__mask16(dv - j - 16);
            __m512 a0 = _mm512_maskz_loadu_ps(m0, o + j), a1 = _mm512_maskz_loadu_ps(m0, o + dv + j);
            __m512 a2 = _mm512_maskz_loadu_ps(m0, o + 2 * dv + j), a3 = _mm512_maskz_loadu_ps(m0, o + 3 * dv + j);
            __m512 b0 = _mm512_maskz_loadu_ps(m1, o + j + 16), b1 = _mm512_maskz_loadu_ps(m1, o + dv + j + 16);
            __m512 b2 = _mm512_maskz_loadu_ps(m1, o + 2 * dv + j + 16), b3 = _mm512_maskz_loadu_ps(m1, o + 3 * dv + j + 16);
            for (int b = 0; b < nk; b++) {
                const char *vr = (const char *)v + (size_t)b * dv * es;
                if (j == 0) neo__prefetch_row(vr, (size_t)dv * es);
                __m512 v0 = neo__ld16(vr, (size_t)j, m0, t), v1 = neo__ld16(vr, (size_t)j + 16, m1, t);
                __m512 p_0 = _mm512_set1_ps(p0[b]), p_1 = _mm512_set1_ps(p0[NEO__BLOCK + b]);
                __m512 p_2 = _mm512_set1_ps(p0[2 * NEO__BLOCK + b]), p_3 = _mm512_set1_ps(p0[3 * NEO__BLOCK + b]);
                a0 = _mm512_fmadd_ps(p_0, v0, a0);
                a1 = _mm512_fmadd_ps(p_1, v0, a1);
                a2 = _mm512_fmadd_ps(p_2, v0, a2);
                a3 = _mm512_fmadd_ps(p_3, v0, a3);
                b0 = _mm512_fmadd_ps(p_0, v1, b0);
                b1 = _mm512_fmadd_ps(p_1, v1, b1);
                b2 = _mm512_fmadd_ps(p_2, v1, b2);
                b3 = _mm512_fmadd_ps(p_3, v1, b3);
            }
            _mm512_mask_storeu_ps(o + j, m0, a0);
            _mm512_mask_storeu_ps(o + dv + j, m0, a1);
            _mm512_mask_storeu_ps(o + 2 * dv + j, m0, a2);
            _mm512_mask_storeu_ps(o + 3 * dv + j, m0, a3);
            _mm512_mask_storeu_ps(o + j + 16, m1, b0);
            _mm512_mask_storeu_ps(o + dv + j + 16, m1, b1);
            _mm512_mask_storeu_ps(o + 2 * dv + j + 16, m1, b2);
            _mm512_mask_storeu_ps(o + 3 * dv + j + 16, m1, b3);
        }
    }
    for (; r < nq; r++) {
        const float *pr = p + r * NEO__BLOCK;
        float       *o = acc + (size_t)r * dv;
        for (int j = 0; j < dv; j += 16) {
            __mmask16 m = neo__mask16(dv - j);
            __m512 a0 = _mm512_maskz_loadu_ps(m, o + j);
            for (int b = 0; b < nk; b++) {
                if (j == 0) neo__prefetch_row((const char *)v + (size_t)b * dv * es, (size_t)dv * es);
                a0 = _mm512_fmadd_ps(_mm512_set1_ps(pr[b]), neo__ld16((const char *)v + (size_t)b * dv * es, (size_t)j, m, t), a0);
            }
            _mm512_mask_storeu_ps(o + j, m, a0);
        }
    }
}
NEO__AVX512 NEO_ATTN__PRIVATE void neo__pv_avx512(float *acc, const float *p, const void *v, neo_type t, int nq, int nk, int dv) {
    if (t == NEO_TYPE_F16) neo__pv_avx512_t(acc, p, v, NEO_TYPE_F16, nq, nk, dv);
    else if (t == NEO_TYPE_BF16) neo__pv_avx512_t(acc, p, v, NEO_TYPE_BF16, nq, nk, dv);
    else neo__pv_avx512_t(acc, p, v, NEO_TYPE_F32, nq, nk, dv);
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#endif /* NEO__X86 */

NEO_ATTN__PRIVATE int neo__cpu_has(neo_cpu_isa isa) {
    if (isa == NEO_CPU_SCALAR) return 1;
#if NEO__X86
    __builtin_cpu_init();
    unsigned a, b, c = 0, d;
    /* F16C is CPUID.1:ECX bit 29; clang's __builtin_cpu_supports does not know its name */
    int f16c = __get_cpuid(1, &a, &b, &c, &d) && (c >> 29 & 1u);
    int avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c;
    if (isa == NEO_CPU_AVX2) return avx2;
    if (isa == NEO_CPU_AVX512)
        return avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
#endif
    return 0;
}

/* Fills k with the kernels of isa (AUTO = the best this CPU has); 0 if the CPU lacks it. */
NEO_ATTN__PRIVATE int neo__kernels_init(neo__kernels *k, neo_cpu_isa isa) {
    if (isa == NEO_CPU_AUTO) isa = neo__cpu_has(NEO_CPU_AVX512) ? NEO_CPU_AVX512 : neo__cpu_has(NEO_CPU_AVX2) ? NEO_CPU_AVX2 : NEO_CPU_SCALAR;
    if (!neo__cpu_has(isa)) return 0;
    k->isa = NEO_CPU_SCALAR;
    k->scores = neo__scores_scalar;
    k->exp_sum = neo__exp_sum_scalar;
    k->pv = neo__pv_scalar;
    k->dot = neo__dot_scalar;
#if NEO__X86
    if (isa == NEO_CPU_AVX2) {
        k->isa = isa;
            k->scores = neo__scores_avx2;
        k->exp_sum = neo__exp_sum_avx2;
        k->pv = neo__pv_avx2;
        k->dot = neo__dot_avx2;
    } else if (isa == NEO_CPU_AVX512) {
        k->isa = isa;
            k->scores = neo__scores_avx512;
        k->exp_sum = neo__exp_sum_avx512;
        k->pv = neo__pv_avx512;
        k->dot = neo__dot_avx512;
    }
#endif
    return 1;
}

/* =============================================================================================
   >>layer: runtime state, KV layout and the CPU attention over the host heads
   ============================================================================================= */
struct neo_runtime {
    neo__pool    pool;
    neo__kernels kern;
    int          gpu;
    float      **scratch;        /* [pool.n_threads] per-thread attention scratch */
    size_t       scratch_floats; /* floats in each */
    float       *partial;        /* decode chunk partials: [n_head_kv][n_chunks][group][head_dim_v + 2] */
    size_t       partial_floats;
    int         *chunks_done;    /* [n_head_kv] chunks finished, for the last one to merge */
    size_t       chunks_done_n;
};

struct neo_layer {
    neo_runtime *rt;
    int          n_head, n_head_kv, head_dim, head_dim_v, n_ctx, group;
    neo_type     kv_type;
    int          gpu_heads; /* resident on the GPU (0 on a CPU runtime) */
    neo_pipeline pipeline;
    float        scale, softcap;
    float       *sinks;  /* [n_head] or NULL */
    float       *slopes; /* [n_head] ALiBi slopes or NULL */
    int          host_h0;    /* first KV head stored on the host */
    void        *k_host; /* [n_head_kv - host_h0][n_ctx][head_dim] of kv_type */
    void        *v_host; /* [n_head_kv - host_h0][n_ctx][head_dim_v] of kv_type */
    size_t       host_bytes;
    int          len;
    long long    n_decode, n_overlapped;
};

/* Queries one task carries: the GQA group for decode, a block of tokens x group for prefill. */
NEO_ATTN__PRIVATE int neo__prefill_tokens(int group) { return group >= NEO__PREFILL_QUERIES ? 1 : NEO__PREFILL_QUERIES / group; }
NEO_ATTN__PRIVATE int neo__max_queries(int group) { return group * neo__prefill_tokens(group); }

/* Per-thread scratch of a layer shape, in floats: the scaled queries, scores, and the
   online-softmax state (m, l, acc) of every query. */
NEO_ATTN__PRIVATE size_t neo__scratch_floats(int d, int dv, int nq) {
    return (size_t)nq * ((size_t)d + NEO__BLOCK + 2 + (size_t)dv);
}

/* Grows the runtime's shared scratch to fit a layer. Layers of one runtime run one at a time. */
NEO_ATTN__PRIVATE neo_status neo__rt_reserve(neo_runtime *rt, size_t per_thread, size_t partial, size_t n_done) {
    if (per_thread > rt->scratch_floats) {
        for (int t = 0; t < rt->pool.n_threads; t++) {
            float *p = (float *)neo__alloc(per_thread * sizeof(float));
            if (!p) return NEO_ERR_NO_MEMORY;
            neo__free(rt->scratch[t]);
            rt->scratch[t] = p;
        }
        rt->scratch_floats = per_thread;
    }
    if (partial > rt->partial_floats) {
        float *p = (float *)neo__alloc(partial * sizeof(float));
        if (!p) return NEO_ERR_NO_MEMORY;
        neo__free(rt->partial);
        rt->partial = p;
        rt->partial_floats = partial;
    }
    if (n_done > rt->chunks_done_n) {
        int *p = (int *)neo__alloc(n_done * sizeof(int));
        if (!p) return NEO_ERR_NO_MEMORY;
        neo__free(rt->chunks_done);
        rt->chunks_done = p;
        rt->chunks_done_n = n_done;
    }
    return NEO_OK;
}

/* Decode splits each head's cells into chunks whose size depends only on len, so the result
   does not depend on the thread count. */
NEO_ATTN__PRIVATE int neo__chunk_size(int len) {
    int c = NEO__MIN_CHUNK;
    if (len > NEO__MIN_CHUNK * NEO__MAX_CHUNKS) {
        c = (len + NEO__MAX_CHUNKS - 1) / NEO__MAX_CHUNKS;
        c = (c + NEO__BLOCK - 1) / NEO__BLOCK * NEO__BLOCK;
    }
    return c;
}

typedef struct neo__attn_job {
    const neo_layer *L;
    const float     *q;        /* [n_tokens][n_head][head_dim] */
    float           *out;      /* [n_tokens][n_head][head_dim_v] */
    int              len;      /* cells in the cache */
    int              n_tokens; /* queries per head; query t sits at position len - n_tokens + t */
    int              h0;       /* first KV head attended (the host half) */
    int              chunk, n_chunks;   /* decode: cells per task, tasks per KV head */
    int              tok_per_task, n_tok_blocks; /* prefill: tokens per task, tasks per KV head */
} neo__attn_job;

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

NEO_ATTN__PRIVATE void neo__qstate_init(neo__qstate *st, const neo__attn_job *J, float *scratch, int g, int t0, int nt) {
    const neo_layer *L = J->L;
    int G = L->group, d = L->head_dim, dv = L->head_dim_v;
    st->nq = nt * G;
    st->t0 = t0;
    st->g = g;
    st->q = scratch;
    st->s = st->q + (size_t)st->nq * d;
    st->m = st->s + (size_t)st->nq * NEO__BLOCK;
    st->l = st->m + st->nq;
    st->acc = st->l + st->nq;
    for (int r = 0; r < st->nq; r++) {
        /* the group's query heads are adjacent, so each token's slice is one copy */
        const float *src = J->q + ((size_t)(t0 + r / G) * L->n_head + (size_t)g * G + (size_t)(r % G)) * d;
        for (int j = 0; j < d; j++) st->q[(size_t)r * d + j] = src[j] * L->scale;
        st->m[r] = -INFINITY;
        st->l[r] = 0.0f;
    }
    memset(st->acc, 0, sizeof(float) * (size_t)st->nq * dv);
}

/* Attends every query of st to cells [c0, c1) of KV head g; cells after a query's position
   are masked out. */
NEO_ATTN__PRIVATE void neo__attend(const neo__attn_job *J, const neo__kernels *kr, neo__qstate *st, int c0, int c1) {
    const neo_layer *L = J->L;
    int    d = L->head_dim, dv = L->head_dim_v, G = L->group;
    size_t es = neo__type_size(L->kv_type), hk = (size_t)(st->g - L->host_h0);
    const char *kbase = (const char *)L->k_host + hk * (size_t)L->n_ctx * d * es;
    const char *vbase = (const char *)L->v_host + hk * (size_t)L->n_ctx * dv * es;
    int pos0 = J->len - J->n_tokens + st->t0; /* position of the task's first token */
    for (int c = c0; c < c1; c += NEO__BLOCK) {
        int nk = c1 - c < NEO__BLOCK ? c1 - c : NEO__BLOCK;
        kr->scores(st->s, st->q, kbase + (size_t)c * d * es, L->kv_type, st->nq, nk, d);
        for (int r = 0; r < st->nq; r++) {
            float *s = st->s + r * NEO__BLOCK;
            int    pos = pos0 + r / G, nv = pos - c + 1;
            if (nv > nk) nv = nk;
            if (nv <= 0) { /* the whole block is after this query */
                memset(s, 0, sizeof(float) * NEO__BLOCK);
                continue;
            }
            if (L->softcap > 0.0f)
                for (int b = 0; b < nv; b++) s[b] = L->softcap * tanhf(s[b] / L->softcap);
            if (L->slopes) {
                float slope = L->slopes[st->g * G + r % G];
                for (int b = 0; b < nv; b++) s[b] -= slope * (float)(pos - (c + b));
            }
            float mx = s[0];
            for (int b = 1; b < nv; b++) mx = s[b] > mx ? s[b] : mx;
            for (int b = nv; b < nk; b++) s[b] = 0.0f;
            if (mx > st->m[r]) { /* a new max rescales what was accumulated */
                float corr = expf(st->m[r] - mx), *a = st->acc + (size_t)r * dv;
                st->l[r] *= corr;
                for (int j = 0; j < dv; j++) a[j] *= corr;
                st->m[r] = mx;
            }
            st->l[r] += kr->exp_sum(s, nv, st->m[r]);
        }
        kr->pv(st->acc, st->s, vbase + (size_t)c * dv * es, L->kv_type, st->nq, nk, dv);
    }
}

/* out_h = sum_c acc_c e^(m_c - M) / (sum_c l_c e^(m_c - M) + e^(sink - M)), chunks in order.
   m, l: [n] with stride ml_stride; acc: [n][dv] with row stride acc_stride (floats). */
NEO_ATTN__PRIVATE void neo__merge(float *out, const float *m, const float *l, const float *acc, int n, size_t ml_stride,
                                  size_t acc_stride, int dv, const float *sink) {
    float M = sink ? *sink : -INFINITY, den = 0.0f;
    for (int c = 0; c < n; c++) M = m[c * ml_stride] > M ? m[c * ml_stride] : M;
    if (sink) den = expf(*sink - M);
    for (int c = 0; c < n; c++) den += l[c * ml_stride] * expf(m[c * ml_stride] - M);
    for (int j = 0; j < dv; j++) out[j] = 0.0f;
    for (int c = 0; c < n; c++) {
        float w = expf(m[c * ml_stride] - M) / den;
        const float *a = acc + c * acc_stride;
        for (int j = 0; j < dv; j++) out[j] += w * a[j];
    }
}

NEO_ATTN__PRIVATE void neo__decode_task(void *user, int task, int thread) {
    const neo__attn_job *J = (const neo__attn_job *)user;
    const neo_layer     *L = J->L;
    neo_runtime         *rt = L->rt;
    int    G = L->group, dv = L->head_dim_v;
    int    g = J->h0 + task / J->n_chunks, c = task % J->n_chunks;
    int    c0 = c * J->chunk, c1 = c0 + J->chunk < J->len ? c0 + J->chunk : J->len;
    size_t stride = (size_t)dv + 2;
    float *part = rt->partial + ((size_t)(g - J->h0) * J->n_chunks + c) * G * stride; /* [G][stride] */
    neo__qstate st;
    neo__qstate_init(&st, J, rt->scratch[thread], g, 0, 1);
    neo__attend(J, &rt->kern, &st, c0, c1);
    for (int r = 0; r < G; r++) {
        part[r * stride] = st.m[r];
        part[r * stride + 1] = st.l[r];
        memcpy(part + r * stride + 2, st.acc + (size_t)r * dv, sizeof(float) * (size_t)dv);
    }
    if (J->n_chunks > 1 && __atomic_add_fetch(&rt->chunks_done[g - J->h0], 1, __ATOMIC_ACQ_REL) != J->n_chunks) return;
    /* the last chunk of head g to finish merges all of them, always in chunk order */
    const float *first = rt->partial + (size_t)(g - J->h0) * J->n_chunks * G * stride;
    for (int r = 0; r < G; r++) {
        int h = g * G + r;
        const float *p = first + r * stride;
        neo__merge(J->out + (size_t)h * dv, p, p + 1, p + 2, J->n_chunks, (size_t)G * stride, (size_t)G * stride, dv,
                   L->sinks ? L->sinks + h : NULL);
    }
}

NEO_ATTN__PRIVATE void neo__prefill_task(void *user, int task, int thread) {
    const neo__attn_job *J = (const neo__attn_job *)user;
    const neo_layer     *L = J->L;
    int G = L->group, dv = L->head_dim_v;
    int g = J->h0 + task / J->n_tok_blocks, t0 = (task % J->n_tok_blocks) * J->tok_per_task;
    int nt = J->n_tokens - t0 < J->tok_per_task ? J->n_tokens - t0 : J->tok_per_task;
    neo__qstate st;
    neo__qstate_init(&st, J, L->rt->scratch[thread], g, t0, nt);
    neo__attend(J, &L->rt->kern, &st, 0, J->len - J->n_tokens + t0 + nt);
    for (int r = 0; r < st.nq; r++) {
        int h = g * G + r % G;
        neo__merge(J->out + ((size_t)(t0 + r / G) * L->n_head + h) * dv, st.m + r, st.l + r, st.acc + (size_t)r * dv, 1, 0, 0, dv,
                   L->sinks ? L->sinks + h : NULL);
    }
}

/* CPU attention of KV heads [h0, n_head_kv) for n_tokens queries (1 = decode). */
NEO_ATTN__PRIVATE void neo__cpu_attend(const neo_layer *L, int h0, const float *q, int n_tokens, float *out) {
    neo__attn_job J;
    int           n_heads = L->n_head_kv - h0;
    memset(&J, 0, sizeof J);
    J.L = L;
    J.q = q;
    J.out = out;
    J.len = L->len;
    J.n_tokens = n_tokens;
    J.h0 = h0;
    if (n_tokens == 1) {
        J.chunk = neo__chunk_size(L->len);
        J.n_chunks = (L->len + J.chunk - 1) / J.chunk;
        memset(L->rt->chunks_done, 0, sizeof(int) * (size_t)n_heads);
        neo__pool_run(&L->rt->pool, n_heads * J.n_chunks, neo__decode_task, &J);
    } else {
        J.tok_per_task = neo__prefill_tokens(L->group);
        J.n_tok_blocks = (n_tokens + J.tok_per_task - 1) / J.tok_per_task;
        neo__pool_run(&L->rt->pool, n_heads * J.n_tok_blocks, neo__prefill_task, &J);
    }
}

/* =============================================================================================
   >>public: runtime and layer API
   ============================================================================================= */
NEO_ATTN__PUBLIC neo_status neo_runtime_create(const neo_runtime_desc *desc, neo_runtime **out) {
    neo_runtime_desc d;
    neo_runtime     *rt;
    neo_status       s;
    if (!out) return NEO_ERR_INVALID_ARG;
    *out = NULL;
    memset(&d, 0, sizeof d);
    if (desc) d = *desc;
    if (d.n_threads < 0 || d.n_threads > 1024 || (d.gpu != 0 && d.gpu != 1) || d.gpu_device < 0) return NEO_ERR_INVALID_ARG;
    if ((unsigned)d.cpu_isa > (unsigned)NEO_CPU_AVX512) return NEO_ERR_INVALID_ARG;
    if (d.gpu) return NEO_ERR_UNSUPPORTED; /* this build has no GPU path */
    if (d.n_threads == 0) {
#if !NEO_ATTN_NO_THREADS
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        d.n_threads = n < 1 ? 1 : n > 1024 ? 1024 : (int)n;
#else
        d.n_threads = 1;
#endif
    }
    rt = (neo_runtime *)neo__calloc(sizeof *rt);
    if (!rt) return NEO_ERR_NO_MEMORY;
    if (!neo__kernels_init(&rt->kern, d.cpu_isa)) {
        neo__free(rt);
        return NEO_ERR_UNSUPPORTED;
    }
    s = neo__pool_init(&rt->pool, d.n_threads);
    if (s != NEO_OK) {
        neo__free(rt);
        return s;
    }
    rt->scratch = (float **)neo__calloc(sizeof(float *) * (size_t)rt->pool.n_threads);
    if (!rt->scratch) {
        neo_runtime_destroy(rt);
        return NEO_ERR_NO_MEMORY;
    }
    *out = rt;
    return NEO_OK;
}

NEO_ATTN__PUBLIC void neo_runtime_destroy(neo_runtime *rt) {
    if (!rt) return;
    if (rt->scratch)
        for (int t = 0; t < rt->pool.n_threads; t++) neo__free(rt->scratch[t]);
    neo__pool_destroy(&rt->pool);
    neo__free(rt->scratch);
    neo__free(rt->partial);
    neo__free(rt->chunks_done);
    neo__free(rt);
}

NEO_ATTN__PUBLIC neo_status neo_runtime_get_info(const neo_runtime *rt, neo_runtime_info *info) {
    if (!rt || !info) return NEO_ERR_INVALID_ARG;
    info->n_threads = rt->pool.n_threads;
    info->gpu = rt->gpu;
    info->cpu_isa = rt->kern.isa;
    return NEO_OK;
}

NEO_ATTN__PUBLIC int neo_gpu_heads_for_frac(int n_head_kv, float frac) {
    if (!(frac < 1.0f) || n_head_kv <= 1) return 0; /* NaN counts as "no split" too */
    double g = floor((double)frac * (double)n_head_kv + 0.5);
    if (g < 1.0) return 1;
    if (g > (double)(n_head_kv - 1)) return n_head_kv - 1;
    return (int)g;
}

NEO_ATTN__PRIVATE int neo__bad_float(float x) { return !(x >= 0.0f) || isinf(x); } /* NaN, negative or inf */

NEO_ATTN__PRIVATE neo_status neo__check_layer_desc(const neo_layer_desc *d) {
    if (d->n_head < 1 || d->n_head_kv < 1 || d->n_head_kv > d->n_head || d->n_head % d->n_head_kv) return NEO_ERR_INVALID_ARG;
    if (d->head_dim < 1 || d->head_dim_v < 0 || d->n_ctx < 1) return NEO_ERR_INVALID_ARG;
    if ((unsigned)d->kv_type > (unsigned)NEO_TYPE_F32 || (unsigned)d->pipeline > (unsigned)NEO_PIPELINE_AUTO) return NEO_ERR_INVALID_ARG;
    if (d->gpu_heads < 0 || d->gpu_heads > d->n_head_kv) return NEO_ERR_INVALID_ARG;
    if (neo__bad_float(d->scale) || neo__bad_float(d->softcap) || neo__bad_float(d->max_alibi_bias)) return NEO_ERR_INVALID_ARG;
    if (d->sinks)
        for (int h = 0; h < d->n_head; h++)
            if (isnan(d->sinks[h])) return NEO_ERR_INVALID_ARG;
    if (d->n_head > NEO__MAX_HEADS || d->head_dim > NEO__MAX_HEAD_DIM || d->head_dim_v > NEO__MAX_HEAD_DIM) return NEO_ERR_UNSUPPORTED;
    return NEO_OK;
}

NEO_ATTN__PUBLIC neo_status neo_layer_create(neo_runtime *rt, const neo_layer_desc *desc, neo_layer **out) {
    neo_layer *L;
    neo_status s;
    size_t     kb, vb, host_heads, partial, nq;
    if (!out) return NEO_ERR_INVALID_ARG;
    *out = NULL;
    if (!rt || !desc) return NEO_ERR_INVALID_ARG;
    if ((s = neo__check_layer_desc(desc)) != NEO_OK) return s;
    L = (neo_layer *)neo__calloc(sizeof *L);
    if (!L) return NEO_ERR_NO_MEMORY;
    L->rt = rt;
    L->n_head = desc->n_head;
    L->n_head_kv = desc->n_head_kv;
    L->head_dim = desc->head_dim;
    L->head_dim_v = desc->head_dim_v ? desc->head_dim_v : desc->head_dim;
    L->n_ctx = desc->n_ctx;
    L->group = desc->n_head / desc->n_head_kv;
    L->kv_type = desc->kv_type;
    L->pipeline = desc->pipeline;
    L->scale = desc->scale > 0.0f ? desc->scale : 1.0f / sqrtf((float)desc->head_dim);
    L->softcap = desc->softcap;
    L->gpu_heads = 0; /* a CPU runtime keeps every head on the host */
    L->host_h0 = 0;
    host_heads = (size_t)(L->n_head_kv - L->host_h0);
    s = NEO_ERR_NO_MEMORY;
    if (!neo__mul3(host_heads * (size_t)L->n_ctx, (size_t)L->head_dim, neo__type_size(L->kv_type), &kb) ||
        !neo__mul3(host_heads * (size_t)L->n_ctx, (size_t)L->head_dim_v, neo__type_size(L->kv_type), &vb) ||
        !neo__add(kb, vb, &L->host_bytes))
        goto fail;
    L->k_host = neo__alloc(kb);
    L->v_host = neo__alloc(vb);
    if (!L->k_host || !L->v_host) goto fail;
    if (desc->sinks) {
        if (!(L->sinks = (float *)neo__alloc(sizeof(float) * (size_t)L->n_head))) goto fail;
        memcpy(L->sinks, desc->sinks, sizeof(float) * (size_t)L->n_head);
    }
    if (desc->max_alibi_bias > 0.0f) {
        int    n2 = 1;
        double m0, m1;
        while (n2 * 2 <= L->n_head) n2 *= 2;
        m0 = pow(2.0, -(double)desc->max_alibi_bias / n2);
        m1 = pow(2.0, -(double)desc->max_alibi_bias / (2.0 * n2));
        if (!(L->slopes = (float *)neo__alloc(sizeof(float) * (size_t)L->n_head))) goto fail;
        for (int h = 0; h < L->n_head; h++) L->slopes[h] = (float)(h < n2 ? pow(m0, h + 1) : pow(m1, 2 * (h - n2) + 1));
    }
    nq = (size_t)neo__max_queries(L->group);
    partial = (size_t)L->n_head * NEO__MAX_CHUNKS * ((size_t)L->head_dim_v + 2);
    if ((s = neo__rt_reserve(rt, neo__scratch_floats(L->head_dim, L->head_dim_v, (int)nq), partial, (size_t)L->n_head_kv)) != NEO_OK) goto fail;
    *out = L;
    return NEO_OK;
fail:
    neo_layer_destroy(L);
    return s;
}

NEO_ATTN__PUBLIC void neo_layer_destroy(neo_layer *L) {
    if (!L) return;
    neo__free(L->k_host);
    neo__free(L->v_host);
    neo__free(L->sinks);
    neo__free(L->slopes);
    neo__free(L);
}

/* dst: [n] of type t <- src: [n] f32 */
NEO_ATTN__PRIVATE void neo__narrow(void *dst, const float *src, int n, neo_type t) {
    uint16_t *d16 = (uint16_t *)dst;
    if (t == NEO_TYPE_F32) memcpy(dst, src, sizeof(float) * (size_t)n);
    else if (t == NEO_TYPE_F16)
        for (int i = 0; i < n; i++) d16[i] = neo__f32_to_f16(src[i]);
    else
        for (int i = 0; i < n; i++) d16[i] = neo__f32_to_bf16(src[i]);
}

NEO_ATTN__PUBLIC neo_status neo_attn_append(neo_layer *L, const float *k, const float *v, int n_tokens) {
    size_t es;
    if (!L || !k || !v || n_tokens < 1) return NEO_ERR_INVALID_ARG;
    if (n_tokens > L->n_ctx - L->len) return NEO_ERR_FULL;
    es = neo__type_size(L->kv_type);
    for (int t = 0; t < n_tokens; t++) {
        size_t cell = (size_t)L->len + (size_t)t;
        for (int h = L->host_h0; h < L->n_head_kv; h++) {
            size_t hh = (size_t)(h - L->host_h0) * (size_t)L->n_ctx + cell;
            neo__narrow((char *)L->k_host + hh * (size_t)L->head_dim * es, k + ((size_t)t * L->n_head_kv + h) * L->head_dim,
                        L->head_dim, L->kv_type);
            neo__narrow((char *)L->v_host + hh * (size_t)L->head_dim_v * es,
                        v + ((size_t)t * L->n_head_kv + h) * L->head_dim_v, L->head_dim_v, L->kv_type);
        }
    }
    L->len += n_tokens;
    return NEO_OK;
}

NEO_ATTN__PUBLIC neo_status neo_attn_decode(neo_layer *L, const float *q, float *out) {
    if (!L || !q || !out || L->len == 0) return NEO_ERR_INVALID_ARG;
    neo__cpu_attend(L, L->host_h0, q, 1, out);
    L->n_decode++;
    return NEO_OK;
}

NEO_ATTN__PUBLIC neo_status neo_attn_prefill(neo_layer *L, const float *q, int n_tokens, float *out) {
    if (!L || !q || !out || n_tokens < 1 || n_tokens > L->len) return NEO_ERR_INVALID_ARG;
    neo__cpu_attend(L, L->host_h0, q, n_tokens, out);
    return NEO_OK;
}

NEO_ATTN__PUBLIC int neo_layer_length(const neo_layer *L) { return L ? L->len : 0; }

NEO_ATTN__PUBLIC neo_status neo_layer_truncate(neo_layer *L, int n_tokens) {
    if (!L || n_tokens < 0 || n_tokens > L->len) return NEO_ERR_INVALID_ARG;
    L->len = n_tokens;
    return NEO_OK;
}

NEO_ATTN__PUBLIC neo_status neo_layer_get_info(const neo_layer *L, neo_layer_info *info) {
    if (!L || !info) return NEO_ERR_INVALID_ARG;
    memset(info, 0, sizeof *info);
    info->gpu_heads = L->gpu_heads;
    info->cpu_heads = L->n_head_kv - L->host_h0;
    info->gpu_bytes = 0;
    info->host_bytes = L->host_bytes;
    info->pipeline = L->pipeline;
    info->n_decode = L->n_decode;
    info->n_overlapped = L->n_overlapped;
    return NEO_OK;
}

/* =============================================================================================
   >>model: the llama2.c decode loop (model, session, step)
   ============================================================================================= */
struct neo_model {
    neo_model_info info;
    float         *data;      /* every float of the file after the header */
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
    int32_t f[7];
    size_t  L, dim, hid, kv, voc, hs, n, t, total;
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
    /* bounds far above any llama2.c model keep every size below well inside size_t */
    if (mi->dim < 1 || mi->dim > 65536 || mi->hidden_dim < 1 || mi->hidden_dim > 262144 || mi->n_layers < 1 ||
        mi->n_layers > 1024 || mi->n_heads < 1 || mi->n_kv_heads < 1 || mi->n_kv_heads > mi->n_heads ||
        mi->n_heads % mi->n_kv_heads || mi->dim % mi->n_heads || (mi->dim / mi->n_heads) % 2 || mi->vocab_size < 1 ||
        mi->vocab_size > (1 << 22) || mi->seq_len < 1 || mi->seq_len > (1 << 24))
        return NEO_ERR_FORMAT;
    L = (size_t)mi->n_layers;
    dim = (size_t)mi->dim;
    hid = (size_t)mi->hidden_dim;
    hs = dim / (size_t)mi->n_heads;
    kv = hs * (size_t)mi->n_kv_heads;
    voc = (size_t)mi->vocab_size;
    /* emb, rms_att, wq, wk, wv, wo, rms_ffn, w1, w2, w3, rms_final, rope tables, [wcls] */
    n = voc * dim + L * dim + L * dim * dim + 2 * L * dim * kv + L * dim * dim + L * dim + 3 * L * dim * hid + dim;
    t = (size_t)mi->seq_len * (hs / 2) * 2;
    if (!mi->shared_classifier) t += voc * dim;
    if (!neo__add(n, t, &total) || !neo__mul(total, 4, &total) || !neo__add(total, NEO__CKPT_HEADER, &total)) return NEO_ERR_FORMAT;
    mi->weight_bytes = (n + (mi->shared_classifier ? 0 : voc * dim)) * 4;
    *file_bytes = total;
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
    m = (neo_model *)neo__calloc(sizeof *m);
    if (!m) return NEO_ERR_NO_MEMORY;
    if ((s = neo__ckpt_parse((const unsigned char *)data, &m->info, &want)) != NEO_OK || size != want) {
        neo__free(m);
        return s != NEO_OK ? s : NEO_ERR_FORMAT;
    }
    if (!(m->data = (float *)neo__alloc(size - NEO__CKPT_HEADER))) {
        neo__free(m);
        return NEO_ERR_NO_MEMORY;
    }
    memcpy(m->data, (const unsigned char *)data + NEO__CKPT_HEADER, size - NEO__CKPT_HEADER);
    neo__ckpt_map(m);
    *out = m;
    return NEO_OK;
}

NEO_ATTN__PUBLIC neo_status neo_model_load(const char *path, neo_model **out) {
    unsigned char hdr[NEO__CKPT_HEADER];
    neo_model    *m = NULL;
    FILE         *f;
    long          size;
    size_t        want;
    neo_status    s = NEO_ERR_FORMAT;
    if (!out) return NEO_ERR_INVALID_ARG;
    *out = NULL;
    if (!path) return NEO_ERR_INVALID_ARG;
    if (!(f = fopen(path, "rb"))) return NEO_ERR_IO;
    if (fseek(f, 0, SEEK_END) != 0 || (size = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0) {
        s = NEO_ERR_IO; /* not a regular, seekable file */
        goto done;
    }
    if ((size_t)size < NEO__CKPT_HEADER) goto done;
    if (fread(hdr, 1, sizeof hdr, f) != sizeof hdr) {
        s = NEO_ERR_IO;
        goto done;
    }
    if (!(m = (neo_model *)neo__calloc(sizeof *m))) {
        s = NEO_ERR_NO_MEMORY;
        goto done;
    }
    if ((s = neo__ckpt_parse(hdr, &m->info, &want)) != NEO_OK) goto done;
    s = NEO_ERR_FORMAT;
    if ((size_t)size != want) goto done;
    if (!(m->data = (float *)neo__alloc(want - NEO__CKPT_HEADER))) {
        s = NEO_ERR_NO_MEMORY;
        goto done;
    }
    if (fread(m->data, 1, want - NEO__CKPT_HEADER, f) != want - NEO__CKPT_HEADER) {
        s = ferror(f) ? NEO_ERR_IO : NEO_ERR_FORMAT; /* shrank while we read it */
        goto done;
    }
    neo__ckpt_map(m);
    *out = m;
    m = NULL;
    s = NEO_OK;
done:
    fclose(f);
    neo_model_destroy(m);
    return s;
}

NEO_ATTN__PUBLIC void neo_model_destroy(neo_model *m) {
    if (!m) return;
    neo__free(m->data);
    neo__free(m);
}

NEO_ATTN__PUBLIC neo_status neo_model_get_info(const neo_model *m, neo_model_info *info) {
    if (!m || !info) return NEO_ERR_INVALID_ARG;
    *info = m->info;
    return NEO_OK;
}

struct neo_session {
    neo_runtime     *rt;
    const neo_model *m;
    neo_layer      **layers;    /* [n_layers] */
    int              n_ctx;
    float           *x;         /* [dim] residual stream */
    float           *xb, *xb2;  /* [dim] */
    float           *q;         /* [dim] */
    float           *k, *v;     /* [kv_dim] */
    float           *hb, *hb2;  /* [hidden_dim] */
    float           *rope_freq; /* [head_size / 2] */
};

/* out: [d] = w: [d][n] . x: [n], rows spread over the pool (each row is one dot product, so
   the result does not depend on the split). */
typedef struct neo__matmul_job {
    float              *out;
    const float        *x, *w;
    int                 n, d, rows_per_task;
    const neo__kernels *kern;
} neo__matmul_job;

NEO_ATTN__PRIVATE void neo__matmul_task(void *user, int task, int thread) {
    const neo__matmul_job *J = (const neo__matmul_job *)user;
    int i1 = (task + 1) * J->rows_per_task < J->d ? (task + 1) * J->rows_per_task : J->d;
    (void)thread;
    for (int i = task * J->rows_per_task; i < i1; i++) J->out[i] = J->kern->dot(J->w + (size_t)i * J->n, J->x, J->n);
}

NEO_ATTN__PRIVATE void neo__matmul(neo_runtime *rt, float *out, const float *x, const float *w, int n, int d) {
    neo__matmul_job J;
    J.out = out;
    J.x = x;
    J.w = w;
    J.n = n;
    J.d = d;
    J.kern = &rt->kern;
    /* below ~32k multiply-adds waking the pool costs more than it saves */
    J.rows_per_task = (size_t)n * (size_t)d < 32768 ? d : (d + 4 * rt->pool.n_threads - 1) / (4 * rt->pool.n_threads);
    neo__pool_run(&rt->pool, (d + J.rows_per_task - 1) / J.rows_per_task, neo__matmul_task, &J);
}

/* o = weight * x / rms(x), as run.c computes it */
NEO_ATTN__PRIVATE void neo__rmsnorm(float *o, const float *x, const float *weight, int n) {
    float ss = 0.0f;
    for (int j = 0; j < n; j++) ss += x[j] * x[j];
    ss /= (float)n;
    ss += 1e-5f;
    ss = 1.0f / sqrtf(ss);
    for (int j = 0; j < n; j++) o[j] = weight[j] * (ss * x[j]);
}

NEO_ATTN__PUBLIC void neo_session_destroy(neo_session *s) {
    if (!s) return;
    if (s->layers)
        for (int l = 0; l < s->m->info.n_layers; l++) neo_layer_destroy(s->layers[l]);
    neo__free(s->layers);
    neo__free(s->x);
    neo__free(s);
}

NEO_ATTN__PUBLIC neo_status neo_session_create(neo_runtime *rt, const neo_model *m, const neo_session_desc *desc,
                                               neo_session **out) {
    neo_session_desc       d;
    const neo_model_info  *mi;
    neo_session           *s;
    neo_status             st = NEO_ERR_NO_MEMORY;
    size_t                 hs, kv, floats;
    if (!out) return NEO_ERR_INVALID_ARG;
    *out = NULL;
    if (!rt || !m) return NEO_ERR_INVALID_ARG;
    memset(&d, 0, sizeof d);
    if (desc) d = *desc;
    mi = &m->info;
    if (d.n_ctx < 0 || d.gpu_heads < 0 || d.gpu_heads > mi->n_kv_heads) return NEO_ERR_INVALID_ARG;
    hs = (size_t)(mi->dim / mi->n_heads);
    kv = hs * (size_t)mi->n_kv_heads;
    if (!(s = (neo_session *)neo__calloc(sizeof *s))) return NEO_ERR_NO_MEMORY;
    s->rt = rt;
    s->m = m;
    s->n_ctx = d.n_ctx ? d.n_ctx : mi->seq_len;
    /* one allocation for every activation: x, xb, xb2, q, k, v, hb, hb2, rope_freq */
    floats = 4 * (size_t)mi->dim + 2 * kv + 2 * (size_t)mi->hidden_dim + hs / 2;
    if (!(s->x = (float *)neo__calloc(floats * sizeof(float)))) goto fail;
    s->xb = s->x + mi->dim;
    s->xb2 = s->xb + mi->dim;
    s->q = s->xb2 + mi->dim;
    s->k = s->q + mi->dim;
    s->v = s->k + kv;
    s->hb = s->v + kv;
    s->hb2 = s->hb + mi->hidden_dim;
    s->rope_freq = s->hb2 + mi->hidden_dim;
    for (size_t i = 0; i < hs / 2; i++) s->rope_freq[i] = 1.0f / powf(10000.0f, (float)(2 * i) / (float)hs);
    if (!(s->layers = (neo_layer **)neo__calloc(sizeof(neo_layer *) * (size_t)mi->n_layers))) goto fail;
    for (int l = 0; l < mi->n_layers; l++) {
        neo_layer_desc ld;
        memset(&ld, 0, sizeof ld);
        ld.n_head = mi->n_heads;
        ld.n_head_kv = mi->n_kv_heads;
        ld.head_dim = (int)hs;
        ld.n_ctx = s->n_ctx;
        ld.kv_type = d.kv_type;
        ld.gpu_heads = d.gpu_heads;
        ld.pipeline = d.pipeline;
        if ((st = neo_layer_create(rt, &ld, &s->layers[l])) != NEO_OK) goto fail;
    }
    *out = s;
    return NEO_OK;
fail:
    neo_session_destroy(s);
    return st;
}

NEO_ATTN__PUBLIC neo_status neo_session_step(neo_session *s, int token, float *logits) {
    const neo_model      *m;
    const neo_model_info *mi;
    int                   dim, hid, hs, kv, pos;
    if (!s || !logits) return NEO_ERR_INVALID_ARG;
    m = s->m;
    mi = &m->info;
    if (token < 0 || token >= mi->vocab_size) return NEO_ERR_INVALID_ARG;
    pos = neo_layer_length(s->layers[0]);
    if (pos >= s->n_ctx) return NEO_ERR_FULL;
    dim = mi->dim;
    hid = mi->hidden_dim;
    hs = dim / mi->n_heads;
    kv = hs * mi->n_kv_heads;
    memcpy(s->x, m->tok_emb + (size_t)token * dim, sizeof(float) * (size_t)dim);
    for (int l = 0; l < mi->n_layers; l++) {
        size_t     ld = (size_t)l * dim;
        neo_status st;
        /* attention rmsnorm, then q, k, v projections */
        neo__rmsnorm(s->xb, s->x, m->rms_att + ld, dim);
        neo__matmul(s->rt, s->q, s->xb, m->wq + ld * dim, dim, dim);
        neo__matmul(s->rt, s->k, s->xb, m->wk + ld * kv, dim, kv);
        neo__matmul(s->rt, s->v, s->xb, m->wv + ld * kv, dim, kv);
        /* RoPE: rotate pairs of q (and of k where it exists) by pos * freq, as run.c does */
        for (int i = 0; i < dim; i += 2) {
            float val = (float)pos * s->rope_freq[(i % hs) / 2], fcr = cosf(val), fci = sinf(val);
            for (int r = 0; r < (i < kv ? 2 : 1); r++) {
                float *vec = r == 0 ? s->q : s->k, v0 = vec[i], v1 = vec[i + 1];
                vec[i] = v0 * fcr - v1 * fci;
                vec[i + 1] = v0 * fci + v1 * fcr;
            }
        }
        /* the layer's KV cache and attention over it */
        if ((st = neo_attn_append(s->layers[l], s->k, s->v, 1)) != NEO_OK ||
            (st = neo_attn_decode(s->layers[l], s->q, s->xb)) != NEO_OK) {
            for (int j = 0; j < mi->n_layers; j++) neo_layer_truncate(s->layers[j], pos < neo_layer_length(s->layers[j]) ? pos : neo_layer_length(s->layers[j]));
            return st;
        }
        /* output projection and residual */
        neo__matmul(s->rt, s->xb2, s->xb, m->wo + ld * dim, dim, dim);
        for (int i = 0; i < dim; i++) s->x[i] += s->xb2[i];
        /* FFN: w2(silu(w1 x) * w3 x), and residual */
        neo__rmsnorm(s->xb, s->x, m->rms_ffn + ld, dim);
        neo__matmul(s->rt, s->hb, s->xb, m->w1 + (size_t)l * hid * dim, dim, hid);
        neo__matmul(s->rt, s->hb2, s->xb, m->w3 + (size_t)l * hid * dim, dim, hid);
        for (int i = 0; i < hid; i++) s->hb[i] = s->hb[i] * (1.0f / (1.0f + expf(-s->hb[i]))) * s->hb2[i];
        neo__matmul(s->rt, s->xb, s->hb, m->w2 + (size_t)l * dim * hid, hid, dim);
        for (int i = 0; i < dim; i++) s->x[i] += s->xb[i];
    }
    neo__rmsnorm(s->x, s->x, m->rms_final, dim);
    neo__matmul(s->rt, logits, s->x, m->wcls, dim, mi->vocab_size);
    return NEO_OK;
}

NEO_ATTN__PUBLIC int neo_session_length(const neo_session *s) { return s ? neo_layer_length(s->layers[0]) : 0; }

NEO_ATTN__PUBLIC neo_status neo_session_truncate(neo_session *s, int n_tokens) {
    if (!s || n_tokens < 0 || n_tokens > neo_session_length(s)) return NEO_ERR_INVALID_ARG;
    for (int l = 0; l < s->m->info.n_layers; l++) neo_layer_truncate(s->layers[l], n_tokens);
    return NEO_OK;
}

NEO_ATTN__PUBLIC neo_status neo_session_get_info(const neo_session *s, neo_layer_info *info) {
    if (!s || !info) return NEO_ERR_INVALID_ARG;
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
