/* test_compile_impl.c - the implementation as C11, the header included twice. Linked with
   test_compile.c; alone with -DNEO_ATTN_STATIC -DNEO_TEST_MAIN it is a whole program whose
   functions are all static (make test-compile). */
#define NEO_ATTN_IMPLEMENTATION
#include "neo_attn.h"
#include "neo_attn.h"

#ifdef NEO_TEST_MAIN
#include <stdio.h>

int main(void) {
    neo_runtime_desc rd = {0};
    neo_layer_desc d = {0};
    neo_runtime *rt = NULL;
    neo_layer *l = NULL;
    float k[4] = {0, 1, 0, 0}, v[4] = {4, 3, 2, 1}, q[8] = {0}, out[8] = {0};
    int ok;
    rd.n_threads = 1;
    d.n_head = 2, d.n_head_kv = 1, d.head_dim = 4, d.n_ctx = 4, d.kv_type = NEO_TYPE_BF16;
    ok = neo_runtime_create(&rd, &rt) == NEO_OK && neo_layer_create(rt, &d, &l) == NEO_OK &&
         neo_attn_append(l, k, v, 1) == NEO_OK && neo_attn_decode(l, q, out) == NEO_OK;
    ok = ok && out[0] == 4 && out[3] == 1 && out[4] == 4 && out[7] == 1;
    printf("test_compile (C, implementation, static functions): %s\n", ok ? "ok" : "FAILED");
    neo_layer_destroy(l);
    neo_runtime_destroy(rt);
    return !ok;
}
#endif
