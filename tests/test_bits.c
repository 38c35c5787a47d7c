/* test_bits.c - the library's outputs, bit for bit, against hashes stored from a reference build.

   A fixed, seeded set of cases (decode and prefill over GQA groups 1 to 8, head sizes 24 to 128
   with V sizes that differ, softcap, ALiBi and sinks, the three KV types, lengths across block and
   chunk boundaries up to a few thousand cells, 1 and 3 threads; the GPU stand-in with no split and
   with host heads under stream-back and both halves; a few steps of the decode loop on a synthetic
   model) runs on every CPU path this machine has. Each output buffer (and each call's status) goes
   into an FNV-1a 64 hash, one per (group, CPU path). The test compares them with the lines of the
   hash file (default tests/data/bits.txt, made by the header at the commit that the Makefile
   names in BITS_REF) whose CPU path the machine has, and reports the others as not checked.

   test_bits [FILE]            checks
   test_bits --write [FILE]    rewrites the lines of the CPU paths present, keeps the others
   test_bits --cases           prints one hash per case instead (to find which case differs,
                               diff this output between two builds) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NEO_ATTN_IMPLEMENTATION
#include "neo_attn.h"
#include "check.h"
#include "cpu_isa.h"
#include "synth_model.h"

#define BITS_FILE "tests/data/bits.txt"

/* --- hashing and inputs --- */

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = (const unsigned char *)p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}
#define FNV0 0xcbf29ce484222325ull

static int      print_cases; /* --cases */
static uint64_t group_hash;  /* the running group's hash */

/* one case's outputs: folded into the group's hash, printed with --cases */
static void take(const char *what, neo_status st, const float *out, size_t n) {
    int      s = (int)st;
    uint64_t h = fnv(FNV0, &s, sizeof s);
    if (st == NEO_OK && out) h = fnv(h, out, n * sizeof *out);
    group_hash = fnv(group_hash, &h, sizeof h);
    if (print_cases) printf("  %-60s %016llx\n", what, (unsigned long long)h);
}

static uint64_t rng_state;
static float    rnd(void) { /* [-1, 1) */
    rng_state ^= rng_state << 13, rng_state ^= rng_state >> 7, rng_state ^= rng_state << 17;
    return (float)((double)(rng_state >> 11) / 4503599627370496.0 - 1.0);
}
static float *fresh(size_t n, uint64_t seed, float scale) {
    float *p = (float *)malloc((n ? n : 1) * sizeof *p);
    rng_state = seed * 0x9E3779B97F4A7C15ull + 0x1234567ull;
    for (size_t i = 0; p && i < n; i++) p[i] = rnd() * scale;
    return p;
}
static void poison(float *p, size_t n) { memset(p, 0xff, n * sizeof *p); }

/* --- shapes --- */

typedef struct shape {
    int   n_head, n_head_kv, head_dim, head_dim_v;
    float scale, softcap, alibi;
    int   sinks;
} shape;

static const shape shapes[] = {
    {8, 8, 64, 0, 0, 0, 0, 0},           /* group 1 */
    {8, 2, 128, 0, 0, 0, 0, 0},          /* group 4 */
    {14, 2, 64, 0, 0, 0, 0, 0},          /* group 7 */
    {32, 4, 128, 0, 0, 0, 0, 0},         /* group 8 */
    {7, 1, 40, 0, 0, 30.0f, 0, 0},       /* odd head size, softcap */
    {12, 3, 80, 0, 0.1f, 0, 8.0f, 0},    /* ALiBi, explicit scale */
    {8, 2, 96, 64, 0, 0, 0, 1},          /* head_dim_v < head_dim, sinks */
    {6, 2, 24, 40, 0, 20.0f, 4.0f, 1},   /* head_dim_v > head_dim, everything on */
};
#define N_SHAPES (int)(sizeof shapes / sizeof shapes[0])
static const neo_type types[] = {NEO_TYPE_F16, NEO_TYPE_BF16, NEO_TYPE_F32};
static const char    *type_name[] = {"f16", "bf16", "f32"};

static neo_layer_desc desc_of(const shape *s, neo_type t, int n_ctx, const float *sinks) {
    neo_layer_desc d;
    memset(&d, 0, sizeof d);
    d.n_head = s->n_head, d.n_head_kv = s->n_head_kv, d.head_dim = s->head_dim, d.head_dim_v = s->head_dim_v;
    d.n_ctx = n_ctx, d.kv_type = t, d.scale = s->scale, d.softcap = s->softcap, d.max_alibi_bias = s->alibi;
    d.sinks = s->sinks ? sinks : NULL;
    return d;
}

static neo_runtime *runtime(neo_cpu_isa isa, int threads, int standin) {
    neo_runtime_desc rd;
    neo_runtime     *rt = NULL;
    memset(&rd, 0, sizeof rd);
    rd.n_threads = threads, rd.cpu_isa = isa, rd.gpu = standin, rd.gpu_standin = standin;
    if (!CHECK_STATUS(neo_runtime_create(&rd, &rt), NEO_OK)) return NULL;
    return rt;
}

/* Appends up to each decode length in turn (in pieces of varied size) and decodes there, then
   prefills n queries at a few lengths (truncating back first): prefill 2 = all, 1 = the short
   ones, 0 = none. gpu_heads / pipeline are for the stand-in; long_len = 0 keeps the decode
   lengths short. */
static void run_layer(neo_runtime *rt, const shape *s, int ti, int gpu_heads, neo_pipeline pl, int long_len,
                      int prefill, const char *tag) {
    static const int dec_short[] = {1, 2, 63, 64, 65, 129, 256, 257, 520};
    static const int dec_long[] = {1, 2, 63, 64, 65, 256, 257, 1023, 1024, 1025, 2049, 3001, 4097}; /* 4097: small end chunks at 8 KV heads */
    static const int pre[][2] = {{1, 1}, {5, 5}, {3, 64}, {17, 300}, {6, 300}, {40, 130}, {4, 1030}}; /* {n_tokens, length} */
    const int *lens = long_len ? dec_long : dec_short;
    int        n_lens = long_len ? (int)(sizeof dec_long / sizeof *dec_long) : (int)(sizeof dec_short / sizeof *dec_short);
    int        n_ctx = long_len ? 4097 : 1100;
    int        hd = s->head_dim, hdv = s->head_dim_v ? s->head_dim_v : s->head_dim;
    size_t     krow = (size_t)s->n_head_kv * hd, vrow = (size_t)s->n_head_kv * hdv;
    float     *sinks = fresh((size_t)s->n_head, 7, 2.0f);
    float     *k = fresh((size_t)n_ctx * krow, 11 + (uint64_t)ti, 1.5f), *v = fresh((size_t)n_ctx * vrow, 13, 1.0f);
    float     *q = fresh((size_t)70 * s->n_head * hd, 17, 1.5f);
    float     *o = (float *)malloc((size_t)70 * s->n_head * hdv * sizeof *o);
    neo_layer_desc d = desc_of(s, types[ti], n_ctx, sinks);
    neo_layer     *l = NULL;
    char           what[160];
    d.gpu_heads = gpu_heads, d.pipeline = pl;
    if (!sinks || !k || !v || !q || !o) {
        CHECK(!"out of memory");
        goto out;
    }
    if (!CHECK_STATUS(neo_layer_create(rt, &d, &l), NEO_OK)) goto out;
    for (int i = 0, len = 0; i < n_lens; i++) {
        while (len < lens[i]) { /* pieces of 1, 2, 3, ... 37 tokens */
            int n = lens[i] - len < (len % 37) + 1 ? lens[i] - len : (len % 37) + 1;
            if (!CHECK_STATUS(neo_attn_append(l, k + (size_t)len * krow, v + (size_t)len * vrow, n), NEO_OK)) goto out;
            len += n;
        }
        poison(o, (size_t)s->n_head * hdv);
        snprintf(what, sizeof what, "%s decode %d", tag, lens[i]);
        take(what, neo_attn_decode(l, q + (size_t)i * s->n_head * hd, o), o, (size_t)s->n_head * hdv);
    }
    for (int i = 0; i < (prefill > 1 ? 7 : prefill ? 4 : 0); i++) {
        int n = pre[i][0], len = pre[i][1];
        if (len > n_ctx) continue;
        CHECK_STATUS(neo_layer_truncate(l, 0), NEO_OK);
        CHECK_STATUS(neo_attn_append(l, k, v, len - n), len - n ? NEO_OK : NEO_ERR_INVALID_ARG);
        CHECK_STATUS(neo_attn_append(l, k + (size_t)(len - n) * krow, v + (size_t)(len - n) * vrow, n), NEO_OK);
        poison(o, (size_t)n * s->n_head * hdv);
        snprintf(what, sizeof what, "%s prefill %d at %d", tag, n, len);
        take(what, neo_attn_prefill(l, q, n, o), o, (size_t)n * s->n_head * hdv);
    }
out:
    neo_layer_destroy(l);
    free(sinks), free(k), free(v), free(q), free(o);
}

/* --- the groups --- */

/* CPU runtime: every shape and type, 1 and 3 threads, decode (at long lengths for the smaller
   shapes) and prefill (the long ones for the smaller shapes) */
static void group_cpu(neo_cpu_isa isa) {
    static const int threads[] = {1, 3};
    char             tag[96];
    for (int t = 0; t < 2; t++) {
        neo_runtime *rt = runtime(isa, threads[t], 0);
        if (!rt) continue;
        for (int si = 0; si < N_SHAPES; si++)
            for (int ti = 0; ti < 3; ti++) {
                const shape *s = &shapes[si];
                snprintf(tag, sizeof tag, "t%d %d/%d/%d/%d %s", threads[t], s->n_head, s->n_head_kv, s->head_dim,
                         s->head_dim_v, type_name[ti]);
                run_layer(rt, s, ti, 0, NEO_PIPELINE_OFF, si == 0 || si >= 4, s->n_head * (s->head_dim + s->head_dim_v) <= 1024 ? 2 : 1, tag);
            }
        neo_runtime_destroy(rt);
    }
}

/* The stand-in: no split, and a split under OFF and ON, for a few shapes and every type */
static void group_standin(neo_cpu_isa isa) {
    static const int shape_ix[] = {2, 6, 7};
    static const int threads[] = {1, 3};
    char             tag[96];
    for (int t = 0; t < 2; t++) {
        neo_runtime *rt = runtime(isa, threads[t], 1);
        if (!rt) continue;
        for (int j = 0; j < 3; j++)
            for (int ti = 0; ti < 3; ti++) {
                const shape *s = &shapes[shape_ix[j]];
                const int    split = s->n_head_kv / 2 ? s->n_head_kv / 2 : 1;
                snprintf(tag, sizeof tag, "t%d %d/%d/%d/%d %s nosplit", threads[t], s->n_head, s->n_head_kv,
                         s->head_dim, s->head_dim_v, type_name[ti]);
                run_layer(rt, s, ti, 0, NEO_PIPELINE_OFF, 0, 0, tag);
                snprintf(tag, sizeof tag, "t%d %d/%d/%d/%d %s split %d off", threads[t], s->n_head, s->n_head_kv,
                         s->head_dim, s->head_dim_v, type_name[ti], split);
                run_layer(rt, s, ti, split, NEO_PIPELINE_OFF, 0, 1, tag);
                snprintf(tag, sizeof tag, "t%d %d/%d/%d/%d %s split %d on", threads[t], s->n_head, s->n_head_kv,
                         s->head_dim, s->head_dim_v, type_name[ti], split);
                run_layer(rt, s, ti, split, NEO_PIPELINE_ON, 0, 1, tag);
            }
        neo_runtime_destroy(rt);
    }
}

/* The decode loop on a synthetic model: the CPU runtime and the stand-in (no split, OFF, ON,
   AUTO: the stand-in's two pipelines give the same bits, so AUTO's choice does not show), logits
   of every step, and greedy steps' tokens */
static void group_model(neo_cpu_isa isa) {
    static const synth_cfg cfgs[] = {{64, 96, 2, 8, 2, 48, 40}, {48, 80, 2, 6, 6, -40, 40}};
    char                   what[128];
    for (int c = 0; c < 2; c++) {
        size_t         size = 0;
        unsigned char *bytes = synth_build(&cfgs[c], 5 + (uint64_t)c, &size);
        neo_model     *m = NULL;
        int            vocab = cfgs[c].vocab_size < 0 ? -cfgs[c].vocab_size : cfgs[c].vocab_size;
        float         *logits = (float *)malloc((size_t)vocab * sizeof *logits);
        if (!CHECK(bytes && logits) || !CHECK_STATUS(neo_model_load_memory(bytes, size, &m), NEO_OK)) {
            free(bytes), free(logits);
            continue;
        }
        for (int mode = 0; mode < 5; mode++) { /* CPU, stand-in unsplit, split OFF, ON, AUTO */
            neo_runtime     *rt = runtime(isa, mode >= 3 ? 3 : 2, mode > 0);
            neo_session     *s = NULL;
            neo_session_desc sd;
            int              tok = 1;
            memset(&sd, 0, sizeof sd);
            sd.kv_type = types[(c + mode) % 3];
            sd.gpu_heads = mode >= 2 ? 1 : 0;
            sd.pipeline = mode == 3 ? NEO_PIPELINE_ON : mode == 4 ? NEO_PIPELINE_AUTO : NEO_PIPELINE_OFF;
            if (rt && CHECK_STATUS(neo_session_create(rt, m, &sd, &s), NEO_OK)) {
                for (int step = 0; step < 24; step++) {
                    poison(logits, (size_t)vocab);
                    snprintf(what, sizeof what, "model %d mode %d step %d", c, mode, step);
                    if (step % 3 == 2) {
                        int next = -1;
                        neo_status st = neo_session_step_argmax(s, tok, &next);
                        float f = (float)next;
                        take(what, st, &f, 1);
                        tok = next >= 0 && next < vocab ? next : 0;
                    } else {
                        take(what, neo_session_step(s, tok, logits), logits, (size_t)vocab);
                        tok = (tok * 7 + step) % vocab;
                    }
                    if (step == 15) CHECK_STATUS(neo_session_truncate(s, 9), NEO_OK);
                }
            }
            neo_session_destroy(s);
            neo_runtime_destroy(rt);
        }
        neo_model_destroy(m);
        free(bytes), free(logits);
    }
}

/* --- the hash file --- */

typedef struct line {
    char     group[32], isa[16];
    uint64_t hash;
} line;
#define MAX_LINES 64

static int read_lines(const char *path, line *ls) {
    FILE *f = fopen(path, "r");
    char  buf[256];
    int   n = 0;
    if (!f) return -1;
    while (n < MAX_LINES && fgets(buf, sizeof buf, f)) {
        unsigned long long h;
        if (buf[0] == '#' || sscanf(buf, "%31s %15s %llx", ls[n].group, ls[n].isa, &h) != 3) continue;
        ls[n++].hash = h;
    }
    fclose(f);
    return n;
}

int main(int argc, char **argv) {
    static const neo_cpu_isa isas[] = {NEO_CPU_SCALAR, NEO_CPU_AVX2, NEO_CPU_AVX512, NEO_CPU_AMX};
    static void (*const groups[])(neo_cpu_isa) = {group_cpu, group_standin, group_model};
    static const char *group_name[] = {"cpu", "standin", "model"};
    const char        *path = BITS_FILE;
    int                write = 0, n_old, n_new = 0, missing = 0;
    line               old[MAX_LINES], now[MAX_LINES];
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--write")) write = 1;
        else if (!strcmp(argv[i], "--cases")) print_cases = 1;
        else path = argv[i];
    }
    n_old = read_lines(path, old);
    if (n_old < 0 && !write && !print_cases) {
        fprintf(stderr, "test_bits: cannot read %s\n", path);
        return 1;
    }
    for (int i = 0; i < 4; i++) {
        if (!test_cpu_has(isas[i])) {
            printf("test_bits: %s: not on this machine, not checked\n", neo_cpu_isa_name(isas[i]));
            continue;
        }
        for (int g = 0; g < 3; g++) {
            line *ln = &now[n_new++];
            if (print_cases) printf("%s %s\n", group_name[g], neo_cpu_isa_name(isas[i]));
            group_hash = FNV0;
            groups[g](isas[i]);
            snprintf(ln->group, sizeof ln->group, "%s", group_name[g]);
            snprintf(ln->isa, sizeof ln->isa, "%s", neo_cpu_isa_name(isas[i]));
            ln->hash = group_hash;
            if (write || print_cases) continue;
            int found = 0;
            for (int j = 0; j < n_old; j++)
                if (!strcmp(old[j].group, ln->group) && !strcmp(old[j].isa, ln->isa)) {
                    found = 1;
                    check_context("%s %s", ln->group, ln->isa);
                    if (!CHECK(old[j].hash == ln->hash))
                        fprintf(stderr, "  %s %s: %016llx, stored %016llx\n", ln->group, ln->isa,
                                (unsigned long long)ln->hash, (unsigned long long)old[j].hash);
                }
            if (!found) printf("test_bits: %s %s: no stored hash, not checked\n", ln->group, ln->isa), missing++;
            else printf("test_bits: %s %s: %016llx\n", ln->group, ln->isa, (unsigned long long)ln->hash);
        }
    }
    if (write) {
        FILE *f = fopen(path, "w");
        if (!f) {
            fprintf(stderr, "test_bits: cannot write %s\n", path);
            return 1;
        }
        fprintf(f, "# test_bits hashes: group, CPU path, FNV-1a 64 of the outputs (tests/test_bits.c)\n");
        for (int j = 0; j < n_old; j++) { /* keep the lines of CPU paths not on this machine */
            int here = 0;
            for (int k = 0; k < n_new; k++) here |= !strcmp(old[j].isa, now[k].isa);
            if (!here) fprintf(f, "%s %s %016llx\n", old[j].group, old[j].isa, (unsigned long long)old[j].hash);
        }
        for (int k = 0; k < n_new; k++)
            fprintf(f, "%s %s %016llx\n", now[k].group, now[k].isa, (unsigned long long)now[k].hash);
        fclose(f);
        printf("test_bits: wrote %d lines for this machine's CPU paths to %s\n", n_new, path);
    }
    if (missing) CHECK(!"every CPU path present has stored hashes");
    return check_summary("test_bits");
}
