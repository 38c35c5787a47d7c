/* synth_model.h - writes small synthetic llama2.c checkpoints (legacy version-0 layout) in memory,
   for the loader and session tests and the fuzz seeds. Never a copy of ../shared model data.

   Layout: 7 int32 header fields (dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len),
   then float32: token embedding [vocab][dim], rms_att [L][dim], wq [L][dim][n_heads*hs],
   wk [L][dim][n_kv*hs], wv [L][dim][n_kv*hs], wo [L][n_heads*hs][dim], rms_ffn [L][dim],
   w1 [L][hidden][dim], w2 [L][dim][hidden], w3 [L][hidden][dim], rms_final [dim],
   RoPE tables 2 x [seq_len * hs / 2], and a classifier [vocab][dim] only when vocab_size < 0. */
#ifndef NEO_TEST_SYNTH_MODEL_H
#define NEO_TEST_SYNTH_MODEL_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct synth_cfg {
    int dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len;
} synth_cfg;

/* float32 weights a loader keeps (no RoPE tables); header values must be positive except vocab_size */
static inline size_t synth_weight_floats(const synth_cfg *c) {
    size_t dim = (size_t)c->dim, hid = (size_t)c->hidden_dim, L = (size_t)c->n_layers;
    size_t hs = (size_t)(c->dim / c->n_heads);
    size_t vocab = (size_t)(c->vocab_size < 0 ? -(long long)c->vocab_size : c->vocab_size);
    size_t qd = (size_t)c->n_heads * hs, kvd = (size_t)c->n_kv_heads * hs;
    size_t n = vocab * dim;                                /* token embedding */
    n += L * (dim + dim * qd + 2 * dim * kvd + qd * dim); /* rms_att, wq, wk, wv, wo */
    n += L * (dim + 3 * dim * hid);                        /* rms_ffn, w1, w2, w3 */
    n += dim;                                              /* rms_final */
    if (c->vocab_size < 0) n += vocab * dim;               /* classifier */
    return n;
}

/* bytes of the whole checkpoint file */
static inline size_t synth_file_bytes(const synth_cfg *c) {
    size_t hs = (size_t)(c->dim / c->n_heads);
    size_t rope = 2 * ((size_t)c->seq_len * hs / 2);
    return 28 + 4 * (synth_weight_floats(c) + rope);
}

static inline void synth_put_i32(unsigned char *p, int32_t v) {
    uint32_t u = (uint32_t)v;
    p[0] = (unsigned char)u, p[1] = (unsigned char)(u >> 8), p[2] = (unsigned char)(u >> 16),
    p[3] = (unsigned char)(u >> 24);
}

static inline void synth_put_f32(unsigned char *p, float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    synth_put_i32(p, (int32_t)u);
}

/* malloc'd checkpoint of *size bytes with deterministic pseudo-random weights, or NULL */
static inline unsigned char *synth_build(const synth_cfg *c, uint64_t seed, size_t *size) {
    size_t bytes = synth_file_bytes(c), i;
    unsigned char *buf = (unsigned char *)malloc(bytes);
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
    if (!buf) return NULL;
    synth_put_i32(buf + 0, c->dim), synth_put_i32(buf + 4, c->hidden_dim), synth_put_i32(buf + 8, c->n_layers);
    synth_put_i32(buf + 12, c->n_heads), synth_put_i32(buf + 16, c->n_kv_heads);
    synth_put_i32(buf + 20, c->vocab_size), synth_put_i32(buf + 24, c->seq_len);
    for (i = 0; i < (bytes - 28) / 4; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17; /* the RoPE tables get noise too; loaders skip them */
        synth_put_f32(buf + 28 + 4 * i, (float)((double)(x >> 11) / 9007199254740992.0 - 0.5) * 0.5f);
    }
    *size = bytes;
    return buf;
}

#endif
