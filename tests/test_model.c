/* test_model.c - the llama2.c checkpoint loader and the decode loop.
   - stories260K.bin from NEO_MODEL_DIR (default tests/data; a missing file is a failure):
     its header through neo_model_get_info, and greedy decoding of run.c's prompt matching the
     token ids run.c printed (NEO_MODEL_DIR/reference), deterministic across thread counts and
     after a truncate; F16 and BF16 caches close to the F32 one.
   - Loader robustness, from memory and from files: every truncation class and corrupted header
     is NEO_ERR_FORMAT and leaves out NULL; an unshared classifier loads and is used.
   `test_model --write-seeds DIR` writes the fuzz seed corpus (small synthetic checkpoints). */
#define NEO_ATTN_IMPLEMENTATION
#include "neo_attn.h"

#include "check.h"
#include "synth_model.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define N_GEN 40

static char model_dir[4096];

static unsigned char *read_all(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    unsigned char *buf = NULL;
    long n;
    if (!f) return NULL;
    if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0) {
        buf = (unsigned char *)malloc((size_t)n + 1);
        if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) free(buf), buf = NULL;
        *size = (size_t)n;
    }
    fclose(f);
    return buf;
}

static int write_all(const char *path, const void *data, size_t size) {
    FILE *f = fopen(path, "wb");
    int ok;
    if (!f) return 0;
    ok = fwrite(data, 1, size, f) == size;
    return fclose(f) == 0 && ok;
}

static int read_ids(const char *name, int *ids, int max) {
    char path[4200];
    FILE *f;
    int n = 0;
    snprintf(path, sizeof path, "%s/reference/%s", model_dir, name);
    f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "test_model: cannot open %s (set NEO_MODEL_DIR to the folder holding stories260K.bin)\n", path);
        return 0;
    }
    while (n < max && fscanf(f, "%d", &ids[n]) == 1) n++;
    fclose(f);
    return n;
}

static int argmax(const float *x, int n) {
    int i, best = 0;
    for (i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

static double rel_l2(const float *a, const float *ref, int n) {
    double num = 0, den = 0;
    int i;
    for (i = 0; i < n; i++) num += ((double)a[i] - ref[i]) * ((double)a[i] - ref[i]), den += (double)ref[i] * ref[i];
    return sqrt(num) / sqrt(den);
}

static void put_i32(unsigned char *p, int32_t v) { synth_put_i32(p, v); }

/* --- a float64 llama2.c forward pass (run.c's forward()) over the checkpoint bytes --- */

typedef struct ref_model {
    int dim, hid, L, nh, nkv, vocab, seq, hs, kvd;
    const unsigned char *w; /* the floats after the header */
    size_t emb, rms_att, wq, wk, wv, wo, rms_ffn, w1, w2, w3, rms_final, wcls; /* float offsets */
    double *kc, *vc;        /* [L][seq][kvd] */
    double *x, *xb, *xb2, *q, *k, *v, *hb, *hb2, *att;
} ref_model;

static double ref_w(const ref_model *r, size_t i) {
    float f;
    memcpy(&f, r->w + 4 * i, 4);
    return (double)f;
}

static int ref_init(ref_model *r, const unsigned char *file, int n_ctx) {
    int32_t h[7];
    size_t o = 0, dim, hid, L, i;
    for (i = 0; i < 7; i++) memcpy(&h[i], file + 4 * i, 4);
    memset(r, 0, sizeof *r);
    r->dim = h[0], r->hid = h[1], r->L = h[2], r->nh = h[3], r->nkv = h[4], r->vocab = h[5] < 0 ? -h[5] : h[5];
    r->seq = n_ctx, r->hs = r->dim / r->nh, r->kvd = r->nkv * r->hs, r->w = file + 28;
    dim = (size_t)r->dim, hid = (size_t)r->hid, L = (size_t)r->L;
    r->emb = o, o += (size_t)r->vocab * dim;
    r->rms_att = o, o += L * dim;
    r->wq = o, o += L * dim * dim;
    r->wk = o, o += L * dim * (size_t)r->kvd;
    r->wv = o, o += L * dim * (size_t)r->kvd;
    r->wo = o, o += L * dim * dim;
    r->rms_ffn = o, o += L * dim;
    r->w1 = o, o += L * dim * hid;
    r->w2 = o, o += L * dim * hid;
    r->w3 = o, o += L * dim * hid;
    r->rms_final = o, o += dim;
    o += 2 * ((size_t)h[6] * (size_t)r->hs / 2);
    r->wcls = h[5] < 0 ? o : r->emb;
    r->kc = (double *)calloc(L * (size_t)n_ctx * (size_t)r->kvd, sizeof(double));
    r->vc = (double *)calloc(L * (size_t)n_ctx * (size_t)r->kvd, sizeof(double));
    r->x = (double *)calloc(6 * dim + 2 * hid + 2 * (size_t)r->kvd + (size_t)n_ctx, sizeof(double));
    if (!r->kc || !r->vc || !r->x) return 0;
    r->xb = r->x + dim, r->xb2 = r->xb + dim, r->q = r->xb2 + dim, r->k = r->q + dim, r->v = r->k + r->kvd;
    r->hb = r->v + r->kvd, r->hb2 = r->hb + hid, r->att = r->hb2 + hid;
    return 1;
}

static void ref_free(ref_model *r) { free(r->kc), free(r->vc), free(r->x); }

static void ref_matmul(const ref_model *r, double *out, const double *x, size_t w, int n, int d) {
    int i, j;
    for (i = 0; i < d; i++) {
        double acc = 0;
        for (j = 0; j < n; j++) acc += ref_w(r, w + (size_t)i * (size_t)n + (size_t)j) * x[j];
        out[i] = acc;
    }
}

static void ref_rmsnorm(const ref_model *r, double *o, const double *x, size_t w, int n) {
    double ss = 0;
    int j;
    for (j = 0; j < n; j++) ss += x[j] * x[j];
    ss = 1.0 / sqrt(ss / n + 1e-5);
    for (j = 0; j < n; j++) o[j] = ref_w(r, w + (size_t)j) * (ss * x[j]);
}

static void ref_forward(ref_model *r, int token, int pos, double *logits) {
    int dim = r->dim, hs = r->hs, kvd = r->kvd, l, i, h, t, j;
    size_t ld;
    for (i = 0; i < dim; i++) r->x[i] = ref_w(r, r->emb + (size_t)token * (size_t)dim + (size_t)i);
    for (l = 0; l < r->L; l++) {
        double *kc = r->kc + (size_t)l * (size_t)r->seq * (size_t)kvd, *vc = r->vc + (size_t)l * (size_t)r->seq * (size_t)kvd;
        ld = (size_t)l * (size_t)dim;
        ref_rmsnorm(r, r->xb, r->x, r->rms_att + ld, dim);
        ref_matmul(r, r->q, r->xb, r->wq + ld * (size_t)dim, dim, dim);
        ref_matmul(r, r->k, r->xb, r->wk + ld * (size_t)kvd, dim, kvd);
        ref_matmul(r, r->v, r->xb, r->wv + ld * (size_t)kvd, dim, kvd);
        for (i = 0; i < dim; i += 2) { /* RoPE */
            double freq = 1.0 / pow(10000.0, (double)(i % hs) / hs), c = cos(pos * freq), sn = sin(pos * freq);
            double q0 = r->q[i], q1 = r->q[i + 1];
            r->q[i] = q0 * c - q1 * sn, r->q[i + 1] = q0 * sn + q1 * c;
            if (i < kvd) {
                double k0 = r->k[i], k1 = r->k[i + 1];
                r->k[i] = k0 * c - k1 * sn, r->k[i + 1] = k0 * sn + k1 * c;
            }
        }
        memcpy(kc + (size_t)pos * (size_t)kvd, r->k, sizeof(double) * (size_t)kvd);
        memcpy(vc + (size_t)pos * (size_t)kvd, r->v, sizeof(double) * (size_t)kvd);
        for (h = 0; h < r->nh; h++) {
            int kh = h / (r->nh / r->nkv);
            double mx = -INFINITY, sum = 0;
            for (t = 0; t <= pos; t++) {
                double sc = 0;
                for (j = 0; j < hs; j++) sc += r->q[h * hs + j] * kc[(size_t)t * (size_t)kvd + (size_t)(kh * hs + j)];
                r->att[t] = sc / sqrt((double)hs);
                if (r->att[t] > mx) mx = r->att[t];
            }
            for (t = 0; t <= pos; t++) r->att[t] = exp(r->att[t] - mx), sum += r->att[t];
            for (j = 0; j < hs; j++) {
                double acc = 0;
                for (t = 0; t <= pos; t++) acc += r->att[t] * vc[(size_t)t * (size_t)kvd + (size_t)(kh * hs + j)];
                r->xb[h * hs + j] = acc / sum;
            }
        }
        ref_matmul(r, r->xb2, r->xb, r->wo + ld * (size_t)dim, dim, dim);
        for (i = 0; i < dim; i++) r->x[i] += r->xb2[i];
        ref_rmsnorm(r, r->xb, r->x, r->rms_ffn + ld, dim);
        ref_matmul(r, r->hb, r->xb, r->w1 + (size_t)l * (size_t)dim * (size_t)r->hid, dim, r->hid);
        ref_matmul(r, r->hb2, r->xb, r->w3 + (size_t)l * (size_t)dim * (size_t)r->hid, dim, r->hid);
        for (i = 0; i < r->hid; i++) r->hb[i] = r->hb[i] / (1.0 + exp(-r->hb[i])) * r->hb2[i];
        ref_matmul(r, r->xb, r->hb, r->w2 + (size_t)l * (size_t)dim * (size_t)r->hid, r->hid, dim);
        for (i = 0; i < dim; i++) r->x[i] += r->xb[i];
    }
    ref_rmsnorm(r, r->x, r->x, r->rms_final, dim);
    ref_matmul(r, logits, r->x, r->wcls, dim, r->vocab);
}

/* the session's logits along a token sequence against the float64 forward pass */
static double max_rel_l2_vs_ref(const unsigned char *file, const int *tokens, int n, const float *all_logits) {
    ref_model r;
    double worst = 0, *ref = NULL;
    int i, j, vocab;
    if (!ref_init(&r, file, n)) return INFINITY;
    vocab = r.vocab;
    ref = (double *)malloc(sizeof(double) * (size_t)vocab);
    for (i = 0; ref && i < n; i++) {
        double num = 0, den = 0;
        const float *lg = all_logits + (size_t)i * (size_t)vocab;
        ref_forward(&r, tokens[i], i, ref);
        for (j = 0; j < vocab; j++) num += ((double)lg[j] - ref[j]) * ((double)lg[j] - ref[j]), den += ref[j] * ref[j];
        if (!(sqrt(num / den) <= worst)) worst = sqrt(num / den);
    }
    if (!ref) worst = INFINITY;
    free(ref);
    ref_free(&r);
    return worst;
}

/* --- loader robustness --- */

static char tmp_dir[4096];
static int n_tmp;

/* the bytes must be refused with NEO_ERR_FORMAT from memory and from a file */
static void expect_format(const unsigned char *data, size_t size, const char *what) {
    neo_model *m = NULL;
    char path[4200];
    check_context("loader: %s (%zu bytes)", what, size);
    CHECK_STATUS(neo_model_load_memory(data, size, &m), NEO_ERR_FORMAT);
    CHECK(m == NULL);
    neo_model_destroy(m);
    snprintf(path, sizeof path, "%s/m%d.bin", tmp_dir, n_tmp++);
    if (!CHECK(write_all(path, data, size))) return;
    m = NULL;
    CHECK_STATUS(neo_model_load(path, &m), NEO_ERR_FORMAT);
    CHECK(m == NULL);
    neo_model_destroy(m);
    unlink(path);
}

/* the bytes load from memory and from a file with the same info; returns the memory one */
static neo_model *expect_load(const unsigned char *data, size_t size, const char *what) {
    neo_model *m = NULL, *mf = NULL;
    neo_model_info a, b;
    char path[4200];
    check_context("loader: %s (%zu bytes)", what, size);
    if (!CHECK_STATUS(neo_model_load_memory(data, size, &m), NEO_OK)) return NULL;
    snprintf(path, sizeof path, "%s/m%d.bin", tmp_dir, n_tmp++);
    if (CHECK(write_all(path, data, size)) && CHECK_STATUS(neo_model_load(path, &mf), NEO_OK)) {
        CHECK_STATUS(neo_model_get_info(m, &a), NEO_OK);
        CHECK_STATUS(neo_model_get_info(mf, &b), NEO_OK);
        CHECK(memcmp(&a, &b, sizeof a) == 0);
    }
    neo_model_destroy(mf);
    unlink(path);
    return m;
}

static void corrupt_headers(const unsigned char *good, size_t size, const char *name) {
    static const char *fields[7] = {"dim", "hidden_dim", "n_layers", "n_heads", "n_kv_heads", "vocab_size", "seq_len"};
    static const int32_t values[] = {0, -1, -7, INT_MIN, 1 << 30, INT_MAX, 3};
    unsigned char *b = (unsigned char *)malloc(size);
    int f, v;
    char what[128];
    if (!CHECK(b != NULL)) return;
    for (f = 0; f < 7; f++) {
        for (v = 0; v < (int)(sizeof values / sizeof *values); v++) {
            memcpy(b, good, size);
            put_i32(b + 4 * f, values[v]);
            snprintf(what, sizeof what, "%s with %s = %d", name, fields[f], (int)values[v]);
            expect_format(b, size, what);
        }
    }
    free(b);
}

static void truncations(const unsigned char *good, size_t size, const char *name) {
    size_t cuts[] = {0, 1, 4, 27, 28, 29, 28 + 4 * 100, size / 2, size / 2 + 1, size - 4, size - 1};
    unsigned char *b = (unsigned char *)malloc(size + 5);
    char what[128];
    int i;
    if (!CHECK(b != NULL)) return;
    memcpy(b, good, size);
    for (i = 0; i < (int)(sizeof cuts / sizeof *cuts); i++) {
        if (!CHECK(cuts[i] < size)) continue; /* every cut is shorter than the file */
        snprintf(what, sizeof what, "%s cut to %zu bytes", name, cuts[i]);
        expect_format(b, cuts[i], what);
    }
    memset(b + size, 0, 5);
    snprintf(what, sizeof what, "%s plus one byte", name);
    expect_format(b, size + 1, what);
    snprintf(what, sizeof what, "%s plus four bytes", name);
    expect_format(b, size + 4, what);
    free(b);
}

/* the host's argmax, as the CUDA one (test_cuda_ops): the lowest index of the largest value, NaN
   never winning, 0 when nothing beats -inf */
static void test_host_argmax(void) {
    static const float ties[] = {1.0f, 3.0f, -2.0f, 3.0f, 3.0f}, nan_around[] = {NAN, -5.0f, 7.0f, NAN, 7.0f};
    static const float ninf[] = {-INFINITY, -INFINITY, -INFINITY};
    int o = -1;
    check_context("host argmax");
    CHECK(neo__host_argmax(&o, ties, 5) == NEO_OK && o == 1);
    o = -1;
    CHECK(neo__host_argmax(&o, nan_around, 5) == NEO_OK && o == 2);
    o = -1;
    CHECK(neo__host_argmax(&o, ninf, 3) == NEO_OK && o == 0);
}

/* paths that are not a checkpoint file: NEO_ERR_IO at once, nothing loaded. A FIFO with no writer
   would block a plain fopen forever: the alarm ends the test there instead. */
static void test_loader_paths(void) {
    char path[4200];
    neo_model *m = NULL;
    check_context("loader: paths that are not a regular file");
    snprintf(path, sizeof path, "%s/none.bin", tmp_dir);
    CHECK_STATUS(neo_model_load(path, &m), NEO_ERR_IO);
    CHECK(m == NULL);
    CHECK_STATUS(neo_model_load(tmp_dir, &m), NEO_ERR_IO); /* a directory */
    CHECK(m == NULL);
    snprintf(path, sizeof path, "%s/fifo", tmp_dir);
    if (CHECK(mkfifo(path, 0600) == 0)) {
        alarm(60);
        CHECK_STATUS(neo_model_load(path, &m), NEO_ERR_IO);
        alarm(0);
        CHECK(m == NULL);
        unlink(path);
    }
    CHECK_STATUS(neo_model_load("/dev/null", &m), NEO_ERR_IO); /* a device */
    CHECK(m == NULL);
}

static void test_loader_synthetic(neo_runtime *rt) {
    /* headers whose file size matches what run.c would read, but whose shape is invalid */
    static const synth_cfg bad[] = {
        {18, 24, 1, 4, 2, 32, 8},  /* dim % n_heads != 0 */
        {16, 24, 1, 2, 4, 32, 8},  /* n_kv_heads > n_heads */
        {24, 24, 1, 6, 4, 32, 8},  /* n_heads % n_kv_heads != 0 */
        {16, 24, 1, 32, 32, 32, 8}, /* head_size 0 */
        {6, 24, 1, 2, 2, 32, 8},    /* head_size 3: RoPE turns pairs of dimensions */
        {0, 24, 1, 4, 2, 32, 8},    /* each size 0 in turn, the file as long as it says */
        {16, 0, 1, 4, 2, 32, 8},
        {16, 24, 0, 4, 2, 32, 8},
        {16, 24, 1, 4, 0, 32, 8},
        {16, 24, 1, 4, 2, 0, 8},
        {16, 24, 1, 4, 2, 32, 0}
    };
    static const char *bad_names[] = {"dim % n_heads != 0", "n_kv_heads > n_heads", "n_heads % n_kv_heads != 0",
                                      "n_heads > dim", "an odd head size", "dim 0", "hidden_dim 0", "n_layers 0",
                                      "n_kv_heads 0", "vocab_size 0", "seq_len 0"};
    synth_cfg ok = {16, 24, 2, 4, 2, 32, 8}, un = {16, 24, 2, 4, 2, -32, 8}, mqa = {16, 24, 2, 4, 1, 32, 8};
    size_t size, usize;
    unsigned char *b;
    int i;

    for (i = 0; i < (int)(sizeof bad / sizeof *bad); i++) {
        b = synth_build(&bad[i], 1, &size);
        if (!CHECK(b != NULL)) continue;
        expect_format(b, size, bad_names[i]);
        /* head size 3: also at the size the loader's own formula would give, RoPE tables of
           seq_len * (3 / 2) * 2 floats, 8 fewer than run.c reads */
        if (i == 4) expect_format(b, size - 8 * sizeof(float), "an odd head size, the tables rounded down");
        free(b);
    }

    b = synth_build(&ok, 2, &size);
    if (CHECK(b != NULL)) {
        neo_model *m = expect_load(b, size, "synthetic shared");
        neo_model_info mi;
        if (m) {
            CHECK_STATUS(neo_model_get_info(m, &mi), NEO_OK);
            CHECK(mi.dim == 16 && mi.hidden_dim == 24 && mi.n_layers == 2 && mi.n_heads == 4 && mi.n_kv_heads == 2);
            CHECK(mi.vocab_size == 32 && mi.seq_len == 8 && mi.shared_classifier == 1);
            CHECK(mi.weight_bytes == 4 * synth_weight_floats(&ok));
        }
        neo_model_destroy(m);
        truncations(b, size, "synthetic");
        corrupt_headers(b, size, "synthetic");
        free(b);
    }

    b = synth_build(&un, 3, &usize);
    if (CHECK(b != NULL)) {
        neo_model *m = expect_load(b, usize, "synthetic unshared");
        neo_model_info mi;
        if (m) {
            neo_session *s = NULL;
            neo_session_desc sd = {0};
            static const int toks[4] = {31, 0, 5, 5};
            float logits[4 * 32];
            CHECK_STATUS(neo_model_get_info(m, &mi), NEO_OK);
            CHECK(mi.vocab_size == 32 && mi.shared_classifier == 0);
            CHECK(mi.weight_bytes == 4 * synth_weight_floats(&un));
            CHECK(mi.weight_bytes == 4 * (synth_weight_floats(&ok) + 32 * 16));
            sd.kv_type = NEO_TYPE_F32;
            CHECK_STATUS(neo_session_create(rt, m, &sd, &s), NEO_OK);
            if (s) {
                for (i = 0; i < 4; i++) CHECK_STATUS(neo_session_step(s, toks[i], logits + 32 * i), NEO_OK);
                CHECK(max_rel_l2_vs_ref(b, toks, 4, logits) < 1e-4); /* the unshared classifier is the one used */
            }
            neo_session_destroy(s);
        }
        neo_model_destroy(m);
        expect_format(b, usize - 32 * 16 * 4, "synthetic unshared without its classifier");
        truncations(b, usize, "synthetic unshared");
        free(b);
    }

    /* one KV head (multi-query attention), against float64; on 1, 2 and 3 threads (3: the
       matmuls' last tasks shorter than the others), the same logits bit for bit */
    b = synth_build(&mqa, 4, &size);
    if (CHECK(b != NULL)) {
        neo_model *m = expect_load(b, size, "synthetic, one KV head");
        static const int toks[5] = {3, 31, 7, 7, 0};
        float logits[3][5 * 32];
        for (int t = 0; m && t < 3; t++) {
            neo_runtime_desc rd = {0};
            neo_runtime *r3 = NULL;
            neo_session *s = NULL;
            neo_session_desc sd = {0};
            rd.n_threads = t + 1, sd.kv_type = NEO_TYPE_F32;
            if (!CHECK_STATUS(neo_runtime_create(&rd, &r3), NEO_OK)) continue;
            if (CHECK_STATUS(neo_session_create(r3, m, &sd, &s), NEO_OK)) {
                for (i = 0; i < 5; i++) CHECK_STATUS(neo_session_step(s, toks[i], logits[t] + 32 * i), NEO_OK);
                CHECK(max_rel_l2_vs_ref(b, toks, 5, logits[t]) < 1e-4);
                if (t) CHECK(memcmp(logits[t], logits[0], sizeof logits[0]) == 0);
            }
            neo_session_destroy(s);
            neo_runtime_destroy(r3);
        }
        neo_model_destroy(m);
        free(b);
    }
}

/* --- stories260K --- */

static void test_stories_loader(neo_runtime *rt, const unsigned char *file, size_t size) {
    /* the same model with an unshared classifier: a copy of the embedding table gives the same logits,
       twice the table exactly twice the logits */
    size_t emb = 512 * 64, usize = size + emb * 4, i;
    unsigned char *b = (unsigned char *)malloc(usize);
    neo_model *shared = NULL, *un = NULL, *un2 = NULL;
    neo_session *s1 = NULL, *s2 = NULL, *s3 = NULL;
    static float l1[512], l2[512], l3[512];
    neo_model_info mi;

    truncations(file, size, "stories260K");
    corrupt_headers(file, size, "stories260K");
    if (!CHECK(b != NULL)) return;
    memcpy(b, file, size);
    memcpy(b + size, file + 28, emb * 4);
    put_i32(b + 20, -512);
    expect_format(b, size, "stories260K with vocab_size -512 and no classifier");
    expect_format(b, usize - 1, "stories260K unshared, one byte short");
    shared = expect_load(file, size, "stories260K");
    un = expect_load(b, usize, "stories260K with an unshared copy of the embeddings");
    for (i = 0; i < emb; i++) {
        float f;
        memcpy(&f, b + size + 4 * i, 4);
        f *= 2.0f;
        memcpy(b + size + 4 * i, &f, 4);
    }
    un2 = expect_load(b, usize, "stories260K with an unshared classifier of twice the embeddings");
    free(b);
    check_context("stories260K unshared classifier");
    if (!shared || !un || !un2) goto done;
    CHECK_STATUS(neo_model_get_info(un, &mi), NEO_OK);
    CHECK(mi.vocab_size == 512 && mi.shared_classifier == 0 && mi.weight_bytes == 1040128 + emb * 4);
    CHECK_STATUS(neo_session_create(rt, shared, NULL, &s1), NEO_OK);
    CHECK_STATUS(neo_session_create(rt, un, NULL, &s2), NEO_OK);
    CHECK_STATUS(neo_session_create(rt, un2, NULL, &s3), NEO_OK);
    if (s1 && s2 && s3) {
        int t, ok2 = 1;
        for (t = 0; t < 3; t++) {
            int tok = t == 0 ? 1 : 400 + t;
            CHECK_STATUS(neo_session_step(s1, tok, l1), NEO_OK);
            CHECK_STATUS(neo_session_step(s2, tok, l2), NEO_OK);
            CHECK_STATUS(neo_session_step(s3, tok, l3), NEO_OK);
            CHECK(memcmp(l1, l2, sizeof l1) == 0);
            for (i = 0; i < 512; i++) ok2 &= l3[i] == 2.0f * l1[i];
        }
        CHECK(ok2);
    }
done:
    neo_session_destroy(s1), neo_session_destroy(s2), neo_session_destroy(s3);
    neo_model_destroy(shared), neo_model_destroy(un), neo_model_destroy(un2);
}

/* feeds the prompt, then N_GEN greedy tokens; writes the generated ids and every step's logits */
static int greedy(neo_session *s, const int *prompt, int n_prompt, int *gen, float *all_logits) {
    int i, tok = prompt[0], pos = 0;
    for (i = 0; i < n_prompt + N_GEN - 1; i++, pos++) {
        float *lg = all_logits + (size_t)i * 512;
        if (!CHECK_STATUS(neo_session_step(s, tok, lg), NEO_OK)) return 0;
        if (i + 1 < n_prompt) tok = prompt[i + 1];
        else tok = gen[i + 1 - n_prompt] = argmax(lg, 512);
    }
    return CHECK(neo_session_length(s) == pos);
}

static void test_stories_decode(neo_model *m, const unsigned char *file) {
    static int prompt[64], want[512], gen[N_GEN], gen2[N_GEN];
    static float lg1[(64 + N_GEN) * 512], lg2[(64 + N_GEN) * 512], lgt[(64 + N_GEN) * 512];
    int n_prompt = read_ids("greedy-once-upon-a-time.prompt.ids", prompt, 64);
    int n_want = read_ids("greedy-once-upon-a-time.ids", want, 512);
    neo_runtime *rt1 = NULL, *rt2 = NULL;
    neo_runtime_desc rd = {0};
    neo_session_desc sd = {0};
    neo_session *s1 = NULL, *s2 = NULL, *sh = NULL;
    neo_layer_info li;
    size_t steps;
    int i, t;

    check_context("reference ids from %s/reference", model_dir);
    if (!CHECK(n_prompt >= 2 && prompt[0] == 1 && n_want >= N_GEN)) return;
    steps = (size_t)(n_prompt + N_GEN - 1);
    rd.n_threads = 1;
    CHECK_STATUS(neo_runtime_create(&rd, &rt1), NEO_OK);
    rd.n_threads = 2;
    CHECK_STATUS(neo_runtime_create(&rd, &rt2), NEO_OK);
    if (!rt1 || !rt2) goto done;
    sd.kv_type = NEO_TYPE_F32;
    CHECK_STATUS(neo_session_create(rt1, m, &sd, &s1), NEO_OK);
    CHECK_STATUS(neo_session_create(rt2, m, &sd, &s2), NEO_OK);
    if (!s1 || !s2) goto done;

    check_context("greedy decode, F32 cache, 1 thread");
    if (greedy(s1, prompt, n_prompt, gen, lg1)) {
        int match = 0;
        while (match < N_GEN && gen[match] == want[match]) match++;
        if (!CHECK(match == N_GEN)) {
            fprintf(stderr, "    first %d ids match run.c; then got", match);
            for (i = match; i < N_GEN && i < match + 8; i++) fprintf(stderr, " %d", gen[i]);
            fprintf(stderr, ", run.c has");
            for (i = match; i < N_GEN && i < match + 8; i++) fprintf(stderr, " %d", want[i]);
            fprintf(stderr, "\n");
        }
    }
    {
        int toks[64 + N_GEN];
        double err;
        for (i = 0; i < (int)steps; i++) toks[i] = i < n_prompt ? prompt[i] : gen[i - n_prompt];
        err = max_rel_l2_vs_ref(file, toks, (int)steps, lg1);
        printf("test_model: F32 cache, %d steps: logits relative L2 to a float64 forward pass <= %.3g\n", (int)steps, err);
        CHECK(err < 1e-4);
    }
    CHECK_STATUS(neo_session_get_info(s1, &li), NEO_OK);
    CHECK(li.n_decode == (long long)(5 * steps) && li.cpu_heads == 4 && li.gpu_heads == 0);
    CHECK(li.host_bytes == (size_t)5 * 4 * 512 * 2 * 8 * 4);

    check_context("greedy decode, 2 threads: bitwise the same logits");
    if (greedy(s2, prompt, n_prompt, gen2, lg2)) {
        CHECK(memcmp(gen, gen2, sizeof gen) == 0);
        CHECK(memcmp(lg1, lg2, steps * 512 * sizeof(float)) == 0);
    }

    check_context("truncate to the prompt and regenerate");
    CHECK_STATUS(neo_session_truncate(s1, n_prompt - 1), NEO_OK);
    CHECK(neo_session_length(s1) == n_prompt - 1);
    memset(gen2, 0, sizeof gen2);
    {
        int tok = prompt[n_prompt - 1], ok = 1;
        for (i = 0; i < N_GEN; i++) {
            float *lg = lgt + (size_t)i * 512;
            if (!CHECK_STATUS(neo_session_step(s1, tok, lg), NEO_OK)) break;
            ok &= memcmp(lg, lg1 + (size_t)(n_prompt - 1 + i) * 512, 512 * sizeof(float)) == 0;
            tok = gen2[i] = argmax(lg, 512);
        }
        CHECK(ok);
        CHECK(memcmp(gen, gen2, sizeof gen) == 0);
    }
    CHECK_STATUS(neo_session_truncate(s1, 0), NEO_OK);
    CHECK(greedy(s1, prompt, n_prompt, gen2, lgt) && memcmp(gen, gen2, sizeof gen) == 0);

    for (t = 0; t < 2; t++) {
        neo_type kt = t == 0 ? NEO_TYPE_F16 : NEO_TYPE_BF16;
        double err;
        check_context("greedy decode with a %s cache", t == 0 ? "F16" : "BF16");
        sd.kv_type = kt;
        sh = NULL;
        CHECK_STATUS(neo_session_create(rt2, m, &sd, &sh), NEO_OK);
        if (!sh) continue;
        if (greedy(sh, prompt, n_prompt, gen2, lgt)) {
            err = rel_l2(lgt + (size_t)(n_prompt - 1) * 512, lg1 + (size_t)(n_prompt - 1) * 512, 512);
            printf("test_model: %s cache, first generated step: logits relative L2 %.3g from F32\n",
                   t == 0 ? "F16" : "BF16", err);
            CHECK(err < 1e-2);
        }
        CHECK_STATUS(neo_session_get_info(sh, &li), NEO_OK);
        CHECK(li.host_bytes == (size_t)5 * 4 * 512 * 2 * 8 * 2);
        neo_session_destroy(sh);
    }

    /* the same run with the layers split on the stand-in GPU, every pipeline; all on the "GPU" too;
       with every stream in order, then the runtime's copy stream late, then the engine's */
    for (int mode = 1; mode <= 3; mode++) {
        neo_runtime *rg = NULL;
        neo_runtime_desc gd = {0};
        gd.n_threads = 2, gd.gpu = 1, gd.gpu_standin = mode;
        check_context("stand-in GPU runtime %d", mode);
        CHECK_STATUS(neo_runtime_create(&gd, &rg), NEO_OK);
        /* OFF, ON, AUTO, HYBRID at its default share and at 0.2; no split; each without and with
           the step's graph (captured where every layer can be: not AUTO still measuring, nor ON or
           HYBRID without a listener thread): the same greedy tokens */
        for (t = 0; rg && t < 12; t++) {
            int toks[64 + N_GEN], gh = t % 6 == 5 ? 0 : 2, graphs = t >= 6;
            neo_pipeline p = t % 6 == 5 ? NEO_PIPELINE_OFF : t % 6 == 4 ? NEO_PIPELINE_HYBRID : (neo_pipeline)(t % 6);
            check_context("greedy decode on the stand-in GPU %d, gpu_heads %d, pipeline %d, graphs %d", mode, gh, (int)p, graphs);
            memset(&sd, 0, sizeof sd);
            sd.kv_type = NEO_TYPE_F32, sd.gpu_heads = gh, sd.pipeline = p, sd.cpu_share = t % 6 == 4 ? 0.2f : 0.0f;
            sd.graphs = graphs;
            sh = NULL;
            CHECK_STATUS(neo_session_create(rg, m, &sd, &sh), NEO_OK);
            if (!sh) continue;
            if (greedy(sh, prompt, n_prompt, gen2, lgt)) {
                CHECK(memcmp(gen, gen2, sizeof gen) == 0);
                for (i = 0; i < (int)steps; i++) toks[i] = i < n_prompt ? prompt[i] : gen2[i - n_prompt];
                CHECK(max_rel_l2_vs_ref(file, toks, (int)steps, lgt) < 1e-4);
            }
            CHECK_STATUS(neo_session_get_info(sh, &li), NEO_OK);
            CHECK(li.gpu_heads == (gh ? 2 : 4) && li.cpu_heads == 4 - li.gpu_heads);
            CHECK(li.gpu_bytes == (size_t)5 * (size_t)li.gpu_heads * 512 * 2 * 8 * 4);
            CHECK(li.host_bytes == (size_t)5 * (size_t)li.cpu_heads * 512 * 2 * 8 * 4);
            CHECK(li.n_decode == (long long)(5 * steps) && li.pipeline == p);
            if (p != NEO_PIPELINE_AUTO) /* replayed where it can be (AUTO: once its timings chose) */
                CHECK((sh->graph != NULL) ==
                      (graphs && (p == NEO_PIPELINE_OFF || ((p == NEO_PIPELINE_ON || p == NEO_PIPELINE_HYBRID) && neo__bells_ok(rg)))));
            neo_session_destroy(sh);
        }
        neo_runtime_destroy(rg);
    }

done:
    neo_session_destroy(s1), neo_session_destroy(s2);
    neo_runtime_destroy(rt1), neo_runtime_destroy(rt2);
}

/* neo_session_step_argmax: the ids of argmax over neo_session_step's logits, with the logits
   left where they are, on a CPU runtime and on the stand-in GPU with a split (its MAIN late) */
static void test_step_argmax(neo_model *m) {
    static const int gpu[2] = {0, 1};
    float logits[512];
    for (int g = 0; g < 2; g++) {
        neo_runtime     *rt = NULL;
        neo_runtime_desc rd = {0};
        neo_session     *a = NULL, *b = NULL;
        neo_session_desc sd = {0};
        int              tok_a = 1, tok_b = 1, next = -1, same = 1;
        rd.n_threads = 2, rd.gpu = gpu[g], rd.gpu_standin = gpu[g] ? 3 : 0; /* the engine's stream late */
        sd.kv_type = NEO_TYPE_F16, sd.gpu_heads = gpu[g] ? 2 : 0, sd.pipeline = NEO_PIPELINE_ON;
        check_context("step_argmax, %s", gpu[g] ? "stand-in GPU, split 2 of 4" : "CPU");
        if (!CHECK_STATUS(neo_runtime_create(&rd, &rt), NEO_OK)) continue;
        if (CHECK_STATUS(neo_session_create(rt, m, &sd, &a), NEO_OK) && CHECK_STATUS(neo_session_create(rt, m, &sd, &b), NEO_OK)) {
            CHECK_STATUS(neo_session_step_argmax(a, 1, NULL), NEO_ERR_INVALID_ARG);
            CHECK_STATUS(neo_session_step_argmax(NULL, 1, &next), NEO_ERR_INVALID_ARG);
            CHECK_STATUS(neo_session_step_argmax(a, 512, &next), NEO_ERR_INVALID_ARG);
            CHECK(neo_session_length(a) == 0);
            for (int i = 0; i < 60; i++) {
                if (!CHECK_STATUS(neo_session_step(a, tok_a, logits), NEO_OK) ||
                    !CHECK_STATUS(neo_session_step_argmax(b, tok_b, &next), NEO_OK))
                    break;
                tok_a = argmax(logits, 512);
                tok_b = next;
                same &= tok_a == tok_b;
            }
            CHECK(same && neo_session_length(a) == 60 && neo_session_length(b) == 60);
        }
        neo_session_destroy(a), neo_session_destroy(b);
        neo_runtime_destroy(rt);
    }
}

/* A session replaying its step from a graph, truncated and stepped on, against one stepping
   without graphs through the same tokens: the same logits (bitwise: the stand-in's graph runs the
   same ops), for no split, OFF and ON; HYBRID's graph attends the device's cells in place where
   the eager call streams them back in chunks, so its logits are the same within 1e-5 and its
   greedy tokens the same; and steps after the graph's capture past a truncation. */
static void test_session_graph_truncate(neo_model *m) {
    static const neo_pipeline pipes[4] = {NEO_PIPELINE_OFF, NEO_PIPELINE_OFF, NEO_PIPELINE_ON, NEO_PIPELINE_HYBRID};
    neo_runtime     *rt = NULL;
    neo_runtime_desc rd = {0};
    float            la[512], lb[512];
    rd.n_threads = 2, rd.gpu = 1, rd.gpu_standin = 2; /* the copy stream late */
    check_context("session graphs and truncation");
    if (!CHECK_STATUS(neo_runtime_create(&rd, &rt), NEO_OK)) return;
    for (int c = 0; c < 4; c++) {
        neo_session     *a = NULL, *b = NULL;
        neo_session_desc sd = {0};
        int              same = 1, tok = 3;
        sd.kv_type = NEO_TYPE_F16, sd.gpu_heads = c == 0 ? 0 : 2, sd.pipeline = pipes[c];
        check_context("session graphs and truncation, case %d", c);
        if (CHECK_STATUS(neo_session_create(rt, m, &sd, &a), NEO_OK)) {
            sd.graphs = 1;
            if (CHECK_STATUS(neo_session_create(rt, m, &sd, &b), NEO_OK)) {
                for (int i = 0; i < 60 && same; i++) {
                    if (i == 30) { /* back to 12 tokens on both, then on */
                        CHECK_STATUS(neo_session_truncate(a, 12), NEO_OK);
                        CHECK_STATUS(neo_session_truncate(b, 12), NEO_OK);
                    }
                    if (!CHECK_STATUS(neo_session_step(a, tok, la), NEO_OK) || !CHECK_STATUS(neo_session_step(b, tok, lb), NEO_OK)) break;
                    same = pipes[c] == NEO_PIPELINE_HYBRID ? argmax(la, 512) == argmax(lb, 512) && rel_l2(lb, la, 512) < 1e-5
                                                           : memcmp(la, lb, sizeof la) == 0;
                    tok = argmax(la, 512);
                }
                CHECK(same && neo_session_length(a) == neo_session_length(b) && neo_session_length(b) == 42);
                CHECK(b->graph != NULL);
            }
        }
        neo_session_destroy(a), neo_session_destroy(b);
    }
    /* a session of 6 tokens, with and without graphs, stepped past full: NEO_ERR_FULL, 6 tokens,
       and the same logits after a truncation */
    for (int c = 0; c < 2; c++) {
        neo_session     *a = NULL, *b = NULL;
        neo_session_desc sd = {0};
        int              ok = 1;
        sd.kv_type = NEO_TYPE_F32, sd.gpu_heads = 2, sd.pipeline = pipes[2 * c], sd.n_ctx = 6;
        check_context("session graphs past full, %s", c ? "ON" : "OFF");
        if (CHECK_STATUS(neo_session_create(rt, m, &sd, &a), NEO_OK)) {
            sd.graphs = 1;
            if (CHECK_STATUS(neo_session_create(rt, m, &sd, &b), NEO_OK)) {
                for (int i = 0; i < 6 && ok; i++)
                    ok = CHECK_STATUS(neo_session_step(a, 7 + i, la), NEO_OK) && CHECK_STATUS(neo_session_step(b, 7 + i, lb), NEO_OK);
                for (int i = 0; i < 2 && ok; i++) {
                    CHECK_STATUS(neo_session_step(a, 3, la), NEO_ERR_FULL);
                    CHECK_STATUS(neo_session_step(b, 3, lb), NEO_ERR_FULL);
                }
                CHECK(neo_session_length(a) == 6 && neo_session_length(b) == 6);
                CHECK_STATUS(neo_session_truncate(a, 4), NEO_OK);
                CHECK_STATUS(neo_session_truncate(b, 4), NEO_OK);
                if (CHECK_STATUS(neo_session_step(a, 9, la), NEO_OK) && CHECK_STATUS(neo_session_step(b, 9, lb), NEO_OK))
                    CHECK(memcmp(la, lb, sizeof la) == 0 && neo_session_length(b) == 5 && b->graph != NULL);
            }
        }
        neo_session_destroy(a), neo_session_destroy(b);
    }
    neo_runtime_destroy(rt);
}

static void test_stories(neo_runtime *rt) {
    char path[4200];
    unsigned char *file;
    size_t size = 0;
    neo_model *m = NULL;
    neo_model_info mi;

    snprintf(path, sizeof path, "%s/stories260K.bin", model_dir);
    check_context("stories260K at %s", path);
    file = read_all(path, &size);
    if (!CHECK(file != NULL)) {
        fprintf(stderr, "test_model: FAIL: cannot read %s; set NEO_MODEL_DIR to the folder holding stories260K.bin "
                        "(the repository carries it in tests/data)\n", path);
        return;
    }
    CHECK(size == 1056540);
    if (CHECK_STATUS(neo_model_load(path, &m), NEO_OK)) {
        CHECK_STATUS(neo_model_get_info(m, &mi), NEO_OK);
        CHECK(mi.dim == 64 && mi.hidden_dim == 172 && mi.n_layers == 5 && mi.n_heads == 8 && mi.n_kv_heads == 4);
        CHECK(mi.vocab_size == 512 && mi.seq_len == 512 && mi.shared_classifier == 1);
        CHECK(mi.weight_bytes == 1040128);
        test_stories_decode(m, file);
        test_step_argmax(m);
        test_session_graph_truncate(m);
    }
    neo_model_destroy(m);
    test_stories_loader(rt, file, size);
    free(file);
}

/* --- the fuzz seed corpus --- */

static int write_seeds(const char *dir) {
    static const synth_cfg cfgs[] = {
        {8, 12, 1, 2, 1, 16, 4}, {8, 12, 2, 2, 2, -16, 8}, {16, 20, 1, 4, 2, 24, 6}, {4, 4, 1, 1, 1, 3, 2}};
    static const char *names[] = {"tiny_shared.bin", "tiny_unshared.bin", "gqa.bin", "smallest.bin"};
    char path[4200];
    int i, ok = 1;
    for (i = 0; i < 4; i++) {
        size_t size;
        unsigned char *b = synth_build(&cfgs[i], (uint64_t)i + 11, &size);
        if (!b) return 1;
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        ok &= write_all(path, b, size);
        if (i == 0) {
            snprintf(path, sizeof path, "%s/header_only.bin", dir);
            ok &= write_all(path, b, 28);
            snprintf(path, sizeof path, "%s/truncated.bin", dir);
            ok &= write_all(path, b, size - 3);
        }
        free(b);
    }
    printf("wrote seeds to %s\n", dir);
    return !ok;
}

/* The host matvec op refuses what the CUDA one refuses (neo__matvec_ok, shared), before it
   touches y; d = 0 is nothing to do. */
static void test_matvec_args(neo_runtime *rt) {
    float            buf[64];
    neo__matvec_args a;
    neo__mv_host     h = {rt, NULL, 0};
    for (int i = 0; i < 64; i++) buf[i] = 0.5f;
    memset(&a, 0, sizeof a);
    a.y = buf, a.w = buf + 16, a.x = buf + 32, a.n = 16, a.d = 4, a.epilogue = NEO__MV_SWIGLU; /* no w_mul */
    check_context("host matvec: SWIGLU without w_mul");
    CHECK_STATUS((neo_status)neo__host_matvec(&h, &a), NEO_ERR_INVALID_ARG);
    a.epilogue = NEO__MV_ROPE, a.head_size = 4, a.rope_q = 3;
    check_context("host matvec: odd RoPE rows");
    CHECK_STATUS((neo_status)neo__host_matvec(&h, &a), NEO_ERR_INVALID_ARG);
    a.rope_q = 4, a.rope_k = 2;
    check_context("host matvec: RoPE rows past d");
    CHECK_STATUS((neo_status)neo__host_matvec(&h, &a), NEO_ERR_INVALID_ARG);
    a.rope_q = 2, a.rope_k = 0, a.d = 3;
    check_context("host matvec: RoPE with an odd d");
    CHECK_STATUS((neo_status)neo__host_matvec(&h, &a), NEO_ERR_INVALID_ARG);
    a.d = 4, a.epilogue = 7;
    check_context("host matvec: unknown epilogue");
    CHECK_STATUS((neo_status)neo__host_matvec(&h, &a), NEO_ERR_INVALID_ARG);
    {
        neo__append_args ap; /* a valid append: the host op leaves it to the session, and refuses it */
        memset(&ap, 0, sizeof ap);
        ap.k = ap.v = buf + 48, ap.kv_cells = 4, ap.h1 = ap.n_head_kv = 1, ap.n_tokens = 1, ap.head_dim = ap.head_dim_v = 2, ap.row0 = 0;
        a.d = 4, a.epilogue = NEO__MV_ROPE, a.head_size = 2, a.rope_q = 0, a.rope_k = 2, a.app = &ap;
        check_context("host matvec: with an append that the CUDA op would take");
        CHECK(neo__matvec_ok(&a));
        CHECK_STATUS((neo_status)neo__host_matvec(&h, &a), NEO_ERR_INVALID_ARG);
        a.app = NULL, a.rope_k = 0;
    }
    a.epilogue = NEO__MV_STORE, a.n = 0;
    check_context("host matvec: n = 0");
    CHECK_STATUS((neo_status)neo__host_matvec(&h, &a), NEO_ERR_INVALID_ARG);
    check_context("host matvec: y untouched by the refusals");
    CHECK(buf[0] == 0.5f && buf[3] == 0.5f);
    a.n = 16, a.d = 0;
    check_context("host matvec: d = 0");
    CHECK_STATUS((neo_status)neo__host_matvec(&h, &a), NEO_OK);
    free(h.scratch);
}

int main(int argc, char **argv) {
    const char *env = getenv("NEO_MODEL_DIR");
    const char *tmp = getenv("TMPDIR");
    neo_runtime *rt = NULL;
    neo_runtime_desc rd = {0};

    if (argc == 3 && strcmp(argv[1], "--write-seeds") == 0) return write_seeds(argv[2]);
    snprintf(model_dir, sizeof model_dir, "%s", env && *env ? env : "tests/data");
    snprintf(tmp_dir, sizeof tmp_dir, "%s/neo_test_model.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    check_context("temp dir");
    if (!CHECK(mkdtemp(tmp_dir) != NULL)) return check_summary("test_model");
    rd.n_threads = 2;
    if (CHECK_STATUS(neo_runtime_create(&rd, &rt), NEO_OK)) {
        test_matvec_args(rt);
        test_host_argmax();
        test_loader_paths();
        test_loader_synthetic(rt);
        test_stories(rt);
    }
    neo_runtime_destroy(rt);
    rmdir(tmp_dir);
    check_context("%s", "");
    return check_summary("test_model");
}
