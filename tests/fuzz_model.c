/* fuzz_model.c - libFuzzer target for neo_model_load_memory (make test-fuzz; seeds in
   tests/fuzz_seeds/model, written by `build/test_model --write-seeds DIR`). A model that loads
   must describe exactly the bytes it came from; tiny ones also run one session step. */
#define NEO_ATTN_IMPLEMENTATION
#include "neo_attn.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_ASSERT(x) \
    do {               \
        if (!(x)) abort(); \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    neo_model *m = (neo_model *)(uintptr_t)1; /* must come back NULL on failure */
    neo_model_info mi;
    neo_status s = neo_model_load_memory(data, size, &m);
    size_t dim, hid, L, hs, kv, voc, n;
    if (s != NEO_OK) {
        FUZZ_ASSERT(s == NEO_ERR_FORMAT || s == NEO_ERR_NO_MEMORY);
        FUZZ_ASSERT(m == NULL);
        return 0;
    }
    FUZZ_ASSERT(m != NULL);
    FUZZ_ASSERT(neo_model_get_info(m, &mi) == NEO_OK);
    FUZZ_ASSERT(mi.dim > 0 && mi.hidden_dim > 0 && mi.n_layers > 0 && mi.n_heads > 0 && mi.n_kv_heads > 0);
    FUZZ_ASSERT(mi.vocab_size > 0 && mi.seq_len > 0 && (mi.shared_classifier == 0 || mi.shared_classifier == 1));
    FUZZ_ASSERT(mi.dim % mi.n_heads == 0 && mi.n_heads % mi.n_kv_heads == 0);
    /* the header fields as stored */
    {
        int32_t h[7];
        memcpy(h, data, sizeof h);
        FUZZ_ASSERT(h[0] == mi.dim && h[1] == mi.hidden_dim && h[2] == mi.n_layers && h[3] == mi.n_heads);
        FUZZ_ASSERT(h[4] == mi.n_kv_heads && h[6] == mi.seq_len);
        FUZZ_ASSERT(h[5] == (mi.shared_classifier ? mi.vocab_size : -mi.vocab_size));
    }
    /* the size is exactly header + weights + RoPE tables (+ classifier) */
    dim = (size_t)mi.dim, hid = (size_t)mi.hidden_dim, L = (size_t)mi.n_layers, voc = (size_t)mi.vocab_size;
    hs = dim / (size_t)mi.n_heads, kv = hs * (size_t)mi.n_kv_heads;
    n = voc * dim + L * (2 * dim + 2 * dim * dim + 2 * dim * kv + 3 * dim * hid) + dim + (mi.shared_classifier ? 0 : voc * dim);
    FUZZ_ASSERT(mi.weight_bytes == 4 * n);
    FUZZ_ASSERT(size == 28 + 4 * n + 4 * 2 * ((size_t)mi.seq_len * hs / 2));

    if (mi.weight_bytes < ((size_t)4 << 20) && mi.seq_len <= 4096 && voc <= 4096) {
        neo_runtime_desc rd = {0};
        neo_session_desc sd = {0};
        neo_runtime *rt = NULL;
        neo_session *ss = NULL;
        float *logits = (float *)malloc(voc * sizeof(float));
        rd.n_threads = 1;
        sd.n_ctx = 2, sd.kv_type = (neo_type)(size % 3);
        FUZZ_ASSERT(logits != NULL);
        FUZZ_ASSERT(neo_runtime_create(&rd, &rt) == NEO_OK);
        FUZZ_ASSERT(neo_session_create(rt, m, &sd, &ss) == NEO_OK);
        FUZZ_ASSERT(neo_session_step(ss, (int)(voc - 1), logits) == NEO_OK);
        FUZZ_ASSERT(neo_session_step(ss, (int)voc, logits) == NEO_ERR_INVALID_ARG);
        FUZZ_ASSERT(neo_session_step(ss, 0, logits) == NEO_OK);
        FUZZ_ASSERT(neo_session_step(ss, 0, logits) == NEO_ERR_FULL);
        FUZZ_ASSERT(neo_session_length(ss) == 2);
        neo_session_destroy(ss);
        neo_runtime_destroy(rt);
        free(logits);
    }
    neo_model_destroy(m);
    return 0;
}
