/* test_tokenizer.c - mini-chat's tokenizer and top-p sampler (examples/mini-chat/mini_chat.c, included whole).
   - encode's heap-ordered merges against a straight copy of run.c's quadratic merge loop
     (old_encode below), on tok512.bin from NEO_MODEL_DIR (default tests/data) and on random
     vocabularies with tied, NaN, -inf and very low scores and empty pieces, for random ASCII,
     UTF-8 and byte strings: the same ids, in the same order.
   - run.c's own prompt ids for "Once upon a time" (NEO_MODEL_DIR/reference).
   - a vocabulary of fewer than 3 tokens is refused with a message; every id encode stores is
     in the vocabulary; min_tokens never exceeds what encode makes.
   - a 256 KiB text encodes in well under the time the quadratic loop needed for 10 KiB.
   - the top-p sampler (sample_topp) on distributions of exact binary fractions where run.c's
     rule is decided by equality: a nucleus whose mass reaches top-p exactly takes one token more
     (it must pass top-p), a token exactly at the cutoff (1 - top-p) / (n - 1) is kept, and a
     coin on a token's upper edge takes the next one. */
#define MINI_CHAT_NO_MAIN
#define MINI_CHAT_SAMPLER
#include "examples/mini-chat/mini_chat.c"

#include "bpe_reference.h"
#include "check.h"

#include <stdint.h>

static uint64_t rng_state;

static double now_seconds_test(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint32_t rnd(void) { /* splitmix64, high half */
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return (uint32_t)((z ^ (z >> 31)) >> 32);
}

/* a random text of up to max_len bytes from one of four alphabets */
static void random_text(char *s, int max_len, const char *alphabet) {
    int len = (int)(rnd() % (unsigned)(max_len + 1)), i = 0;
    int kind = (int)(rnd() % 4);
    while (i < len) {
        if (kind == 0 || kind == 1) { /* story-like ASCII / the vocabulary's own letters */
            const char *a = kind == 0 ? "abcdefghijklmnopqrstuvwxyz     ,.!'" : alphabet;
            s[i++] = a[rnd() % strlen(a)];
        } else if (kind == 2) { /* any non-NUL byte */
            s[i++] = (char)(1 + rnd() % 255);
        } else { /* UTF-8: ASCII, 2-, 3- and 4-byte codepoints, stray continuations */
            static const char *const cps[] = {"a", " ", "e", "\xC3\xA9", "\xE4\xBD\xA0", "\xF0\x9F\x98\x80", "\x80", "\xC3"};
            const char *cp = cps[rnd() % 8];
            size_t l = strlen(cp);
            if (i + (int)l > len) break;
            memcpy(s + i, cp, l);
            i += (int)l;
        }
    }
    s[i] = '\0';
}

/* encode and old_encode agree on text; encode's ids are in the vocabulary and min_tokens bounds them */
static int same_encoding(Tokenizer *t, const char *text, int bos, int eos) {
    size_t len = strlen(text);
    int *a = malloc((len + 3) * sizeof(int)), *b = malloc((len + 3) * sizeof(int));
    int na = -1, nb = -1, ok;
    if (!a || !b) {
        free(a), free(b);
        return CHECK(!"out of memory");
    }
    CHECK(encode(t, text, bos, eos, a, &na) == 0);
    old_encode(t, text, bos, eos, b, &nb);
    ok = CHECK(na == nb && memcmp(a, b, (size_t)na * sizeof(int)) == 0);
    {
        int in_vocab = 1;
        for (int i = 0; i < na; i++) in_vocab &= a[i] >= 0 && a[i] < t->vocab_size;
        CHECK(in_vocab);
    }
    CHECK(min_tokens(t, len) <= na - (eos ? 1 : 0));
    free(a), free(b);
    return ok;
}

static unsigned char *read_file(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    unsigned char *buf = NULL;
    long n;
    if (!f) return NULL;
    if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0) {
        buf = malloc((size_t)n + 1);
        if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) free(buf), buf = NULL;
        *size = (size_t)n;
    }
    fclose(f);
    return buf;
}

static void test_tok512(const char *dir) {
    char path[4200], text[400], alphabet[600];
    size_t size = 0;
    unsigned char *file;
    Tokenizer t;
    char msg[256];
    int mismatches = 0;

    snprintf(path, sizeof path, "%s/tok512.bin", dir);
    check_context("tok512 at %s", path);
    file = read_file(path, &size);
    if (!CHECK(file != NULL)) {
        fprintf(stderr, "test_tokenizer: cannot read %s; set NEO_MODEL_DIR to the folder holding tok512.bin\n", path);
        return;
    }
    if (!CHECK(build_tokenizer_memory(&t, file, size, 512, msg, sizeof msg) == TOK_OK)) {
        free(file);
        return;
    }
    /* run.c's ids for its prompt */
    {
        int ids[32], ref[32], n = 0, nref = 0;
        FILE *f;
        snprintf(path, sizeof path, "%s/reference/greedy-once-upon-a-time.prompt.ids", dir);
        check_context("run.c's prompt ids, %s", path);
        f = fopen(path, "r");
        if (CHECK(f != NULL)) {
            while (nref < 32 && fscanf(f, "%d", &ref[nref]) == 1) nref++;
            fclose(f);
        }
        CHECK(encode(&t, "Once upon a time", 1, 0, ids, &n) == 0);
        CHECK(nref > 1 && n == nref && memcmp(ids, ref, (size_t)n * sizeof(int)) == 0);
        CHECK(same_encoding(&t, "Once upon a time", 1, 0));
    }
    /* the merges' own letters, so that long merges happen */
    {
        size_t k = 0;
        alphabet[0] = '\0';
        for (int i = 259; i < 512 && k + 8 < sizeof alphabet; i++)
            for (int j = 0; j < t.vocab_len[i] && k + 1 < sizeof alphabet; j++)
                if (t.vocab[i][j] != '\0' && !strchr(alphabet, t.vocab[i][j]))
                    alphabet[k++] = t.vocab[i][j], alphabet[k] = '\0';
        alphabet[k] = '\0';
        if (k == 0) strcpy(alphabet, "ab");
    }
    for (int i = 0; i < 3000; i++) {
        random_text(text, (int)sizeof text - 1, alphabet);
        check_context("tok512 random text %d (%zu bytes)", i, strlen(text));
        if (!same_encoding(&t, text, (int)(rnd() & 1), (int)(rnd() & 1)) && ++mismatches > 5) break;
    }
    /* a long text: the heap's merges are O(n log n), so 256 KB take no time a quadratic loop would */
    {
        size_t n = 256 * 1024;
        char *big = malloc(n + 1);
        int *ids = malloc((n + 3) * sizeof(int)), got = 0;
        check_context("tok512, a 256 KiB text");
        if (CHECK(big && ids)) {
            static const char story[] = "Once upon a time, there was a little girl named Lily. She loved to play. ";
            for (size_t i = 0; i < n; i++) big[i] = story[i % (sizeof story - 1)];
            big[n] = '\0';
            double t0 = now_seconds_test();
            CHECK(encode(&t, big, 1, 0, ids, &got) == 0);
            double dt = now_seconds_test() - t0;
            CHECK(got > (int)(n / 8) && got < (int)n);
            CHECK(dt < 10.0);
            printf("test_tokenizer: 256 KiB encoded to %d tokens in %.3f s\n", got, dt);
        }
        free(big), free(ids);
    }
    free_tokenizer(&t);
    free(file);
}

/* a tokenizer file of n tokens: pieces from a small alphabet or whole UTF-8 codepoints (some
   empty, some repeated), scores from a few values so that ties are common, some NaN, -inf or at
   run.c's -1e10 floor */
static unsigned char *random_tokenizer(int n, size_t *size) {
    static const float scores[] = {0.0f, 1.0f, 1.0f, 2.0f, -1.0f, -1e10f, -2e10f, 3.0f};
    size_t cap = 4 + (size_t)n * (8 + 6), off = 4;
    unsigned char *b = malloc(cap);
    int32_t v = 6;
    if (!b) return NULL;
    memcpy(b, &v, 4);
    for (int i = 0; i < n; i++) {
        float sc = scores[rnd() % 8];
        char piece[6];
        int32_t len = (int32_t)(rnd() % 6);
        if (rnd() % 16 == 0) sc = rnd() & 1 ? NAN : -INFINITY;
        if (i >= 3 && i < 259 && rnd() % 4 != 0) len = 1, piece[0] = (char)(i - 3 == 0 ? 'z' : i - 3);
        else if (rnd() % 8 == 0) { /* a whole 2-, 3- or 4-byte codepoint, as random_text writes them */
            static const char *const cps[] = {"\xC3\xA9", "\xE4\xBD\xA0", "\xF0\x9F\x98\x80"};
            const char *cp = cps[rnd() % 3];
            len = (int32_t)strlen(cp);
            memcpy(piece, cp, (size_t)len);
        } else
            for (int j = 0; j < len; j++) piece[j] = "ab c"[rnd() % 4];
        if (i == 3 + ' ' && rnd() % 2) len = 1, piece[0] = ' ';
        memcpy(b + off, &sc, 4);
        memcpy(b + off + 4, &len, 4);
        memcpy(b + off + 8, piece, (size_t)len);
        off += 8 + (size_t)len;
    }
    *size = off;
    return b;
}

static void test_random_vocabularies(void) {
    char text[200], msg[256];
    int mismatches = 0;
    for (int v = 0; v < 300 && mismatches <= 5; v++) {
        int n = v % 3 == 0 ? 3 + (int)(rnd() % 12) : 3 + (int)(rnd() % 400);
        size_t size = 0;
        unsigned char *file = random_tokenizer(n, &size);
        Tokenizer t;
        check_context("random vocabulary %d of %d tokens", v, n);
        if (!CHECK(file != NULL)) return;
        if (CHECK(build_tokenizer_memory(&t, file, size, n, msg, sizeof msg) == TOK_OK)) {
            for (int i = 0; i < 40; i++) {
                random_text(text, (int)sizeof text - 1, "ab c");
                check_context("random vocabulary %d of %d tokens, text %d '%s'", v, n, i, text);
                if (!same_encoding(&t, text, (int)(rnd() & 1), (int)(rnd() & 1)) && ++mismatches > 5) break;
            }
            free_tokenizer(&t);
        }
        free(file);
    }
}

/* fewer than <unk>, BOS and EOS: refused with a reason (the BOS encode stores would be past the end) */
static void test_tiny_vocabulary(void) {
    unsigned char b[4 + 3 * 9];
    int32_t v = 1, one = 1;
    float sc = 0.0f;
    char msg[256];
    Tokenizer t;
    memcpy(b, &v, 4);
    for (int i = 0; i < 3; i++) memcpy(b + 4 + 9 * i, &sc, 4), memcpy(b + 8 + 9 * i, &one, 4), b[12 + 9 * i] = 'x';
    for (int n = -1; n < 3; n++) {
        check_context("a vocabulary of %d tokens", n);
        msg[0] = '\0';
        CHECK(build_tokenizer_memory(&t, b, sizeof b, n, msg, sizeof msg) == TOK_ERR_FORMAT);
        CHECK(strstr(msg, "vocabulary size") != NULL);
    }
    check_context("a vocabulary of 3 tokens");
    if (CHECK(build_tokenizer_memory(&t, b, sizeof b, 3, msg, sizeof msg) == TOK_OK)) {
        int ids[16], n = 0;
        CHECK(encode(&t, "hi x", 1, 1, ids, &n) == 0);
        CHECK(n >= 3 && ids[0] == 1 && ids[n - 1] == 2);
        for (int i = 0; i < n; i++) CHECK(ids[i] >= 0 && ids[i] < 3);
        free_tokenizer(&t);
    }
}

/* sample_topp where run.c's comparisons meet equality (every sum below is exact in float) */
static void test_topp_ties(void) {
    ProbIndex pi[8];
    /* mass 0.5 + 0.25 reaches top-p 0.75 exactly: the nucleus is the first three (0.9375), so a
       coin of 0.9 (r = 0.84375) takes the third; had it stopped at two, r = 0.675 would take the second */
    const float a[4] = {0.5f, 0.25f, 0.1875f, 0.0625f};
    check_context("top-p: a nucleus that reaches top-p exactly takes one token more");
    CHECK(sample_topp(a, 4, 0.75f, pi, 0.9f) == 2);
    CHECK(sample_topp(a, 4, 0.75f, pi, 0.99f) == 2);
    CHECK(sample_topp(a, 4, 0.75f, pi, 0.7f) == 1);   /* r = 0.65625 */
    CHECK(sample_topp(a, 4, 0.75f, pi, 0.5f) == 0);   /* r = 0.46875 */
    /* top-p 0.9375: the nucleus is all four (mass 1, so r is the coin); a coin on a token's upper
       edge takes the next token (r < cdf) */
    check_context("top-p: a coin on an edge");
    CHECK(sample_topp(a, 4, 0.9375f, pi, 0.5f) == 1);
    CHECK(sample_topp(a, 4, 0.9375f, pi, 0.75f) == 2);
    /* top-p 0.5 over 3 tokens: the cutoff is 0.25 exactly, and both 0.25 tokens are kept; the
       first of them completes the nucleus, so a coin of 0.9 (r = 0.675) takes one of them, where
       a cutoff that dropped them would always give token 0 */
    const float b[3] = {0.5f, 0.25f, 0.25f};
    check_context("top-p: tokens at the cutoff are kept");
    const int t = sample_topp(b, 3, 0.5f, pi, 0.9f);
    CHECK(t == 1 || t == 2);
    CHECK(sample_topp(b, 3, 0.5f, pi, 0.3f) == 0);     /* r = 0.225 */
}

int main(void) {
    const char *env = getenv("NEO_MODEL_DIR");
    const char *seed = getenv("NEO_TEST_SEED");
    rng_state = seed && *seed ? strtoull(seed, NULL, 10) : (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
    printf("test_tokenizer: seed %llu (NEO_TEST_SEED=%llu repeats this run)\n", (unsigned long long)rng_state,
           (unsigned long long)rng_state);
    (void)decode, (void)build_sampler, (void)free_sampler, (void)sample; /* mini-chat's, unused here */
    test_tiny_vocabulary();
    test_topp_ties();
    test_tok512(env && *env ? env : "tests/data");
    test_random_vocabularies();
    check_context("%s", "");
    return check_summary("test_tokenizer");
}
