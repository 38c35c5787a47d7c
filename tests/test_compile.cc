// test_compile.cc - the header as C++17: with -DNEO_TEST_IMPL the implementation (included
// twice), otherwise the API only with main(); the two objects link into one program
// (make test-compile).
#ifdef NEO_TEST_IMPL
#define NEO_ATTN_IMPLEMENTATION
#include "neo_attn.h"
#include "neo_attn.h"
#else
#include "neo_attn.h"
#include "neo_attn.h"

#include <cstdio>
#include <cstring>

int main() {
    neo_runtime_desc rd = {};
    neo_layer_desc d = {};
    neo_runtime *rt = nullptr;
    neo_layer *l = nullptr;
    float k[2 * 4] = {1, 0, 0, 0, 0, 1, 0, 0}, v[2 * 4] = {1, 2, 3, 4, 5, 6, 7, 8}, q[4 * 4] = {}, out[4 * 4] = {};
    rd.n_threads = 2;
    d.n_head = 4;
    d.n_head_kv = 2;
    d.head_dim = 4;
    d.n_ctx = 8;
    d.kv_type = NEO_TYPE_F32;
    bool ok = neo_runtime_create(&rd, &rt) == NEO_OK && neo_layer_create(rt, &d, &l) == NEO_OK &&
              neo_attn_append(l, k, v, 1) == NEO_OK && neo_attn_decode(l, q, out) == NEO_OK;
    // one cell: heads 0, 1 read KV head 0 and heads 2, 3 KV head 1, each with weight exactly 1
    ok = ok && out[0] == 1 && out[7] == 4 && out[8] == 5 && out[15] == 8;
    ok = ok && std::strcmp(neo_status_string(NEO_ERR_FULL), "KV cache full") == 0;
    std::printf("test_compile (C++17) %s: %s\n", neo_attn_version(), ok ? "ok" : "FAILED");
    neo_layer_destroy(l);
    neo_runtime_destroy(rt);
    return ok ? 0 : 1;
}
#endif
