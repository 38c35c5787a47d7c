/* test_compile.c - the header as C11 without the implementation, included twice; linked with
   test_compile_impl.c, which holds the implementation (make test-compile). A tiny real call. */
#include "neo_attn.h"
#include "neo_attn.h"

#include <stdio.h>

int main(void) {
    neo_runtime_desc rd = {0};
    neo_layer_desc d = {0};
    neo_runtime *rt = NULL;
    neo_layer *l = NULL;
    float k[4] = {1, 0, 0, 0}, v[4] = {1, 2, 3, 4}, q[8] = {0}, out[8] = {0};
    int ok;
    rd.n_threads = 1;
    d.n_head = 2, d.n_head_kv = 1, d.head_dim = 4, d.n_ctx = 4;
    ok = neo_runtime_create(&rd, &rt) == NEO_OK && neo_layer_create(rt, &d, &l) == NEO_OK &&
         neo_attn_append(l, k, v, 1) == NEO_OK && neo_attn_decode(l, q, out) == NEO_OK;
    /* one cell: its softmax weight is exactly 1, so each head's output is v */
    ok = ok && out[0] == 1 && out[1] == 2 && out[2] == 3 && out[3] == 4 && out[4] == 1 && out[7] == 4;
    ok = ok && neo_layer_length(l) == 1 && neo_gpu_heads_for_frac(8, 0.5f) == 4;
    printf("test_compile (C, API only) %s: %s\n", neo_attn_version(), ok ? "ok" : "FAILED");
    neo_layer_destroy(l);
    neo_runtime_destroy(rt);
    return !ok;
}
