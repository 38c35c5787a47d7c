/* mini-chat - a tiny story-telling chat on neo_attn's decode loop (llama2.c run.c, attention by neo_attn)

   What it shows: a llama2.c checkpoint loaded with neo_model_load and run one token at a time
   with neo_session_step, so that every attention layer keeps its KV cache in neo_attn (split
   between GPU and host memory with --gpu-heads-frac), together with run.c's BPE tokenizer and
   top-p sampler. With -i it is llama2.c's run.c in generate mode: the same flags (-t -p -s -n -i
   -z; not run.c's -m and -y) and, byte for byte, the same text on stdout. Without -i it is a chat
   that keeps growing one session: every line you type is appended to it and the model carries on
   from there (/reset, /stats, /quit).

   Build (from the repository root):
       cc -std=c11 -O2 -I. examples/mini-chat/mini_chat.c -o mini-chat -lm -lpthread

   Run:
       ./mini-chat stories260K.bin -z tok512.bin -t 0 -n 256 -i "Once upon a time"
       ./mini-chat                 (chat; finds stories260K.bin in $NEO_MODEL, models/ or
                                    tests/data/)
   Model: https://huggingface.co/karpathy/tinyllamas/tree/main/stories260K (stories260K.bin, tok512.bin).

   Define MINI_CHAT_NO_MAIN before including this file to get only the tokenizer
   (tests/fuzz_tokenizer.c does), and MINI_CHAT_SAMPLER as well for the sampler beside it
   (tests/test_tokenizer.c does).
*/
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L   /* getline, clock_gettime, isatty */
#endif

#define NEO_ATTN_IMPLEMENTATION
#include "neo_attn.h"
#if defined(NEO_ATTN_CUDA) && NEO_ATTN_CUDA
#define MINI_CHAT_CUDA 1 /* built with the GPU path */
#else
#define MINI_CHAT_CUDA 0
#endif

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

/* ---------------------------------------------------------------------------------------------
   BPE tokenizer: llama2.c's tokenizer.bin format and run.c's encode / decode, with every length
   checked against the bytes that are there.
   File: int32 max_token_length, then per token: float32 score, int32 len, len bytes.
   --------------------------------------------------------------------------------------------- */

#define MINI_CHAT_MIN_TEMPERATURE 1e-6f /* below it, sampling is greedy (see main) */
#define MINI_CHAT_MIN_VOCAB 3            /* <unk>, BOS (1) and EOS (2): encode stores ids 1 and 2 */
#define MINI_CHAT_MAX_VOCAB (1 << 24)    /* more tokens than this is not a tokenizer */
#define MINI_CHAT_MAX_PIECE (1 << 16)    /* nor is a token longer than this */
#define MINI_CHAT_MAX_TOKENIZER_FILE ((size_t)1 << 30)

enum { TOK_OK = 0, TOK_ERR_IO, TOK_ERR_FORMAT, TOK_ERR_NO_MEMORY };

typedef struct {
    const char *str;
    int id;
} TokenIndex;

typedef struct {
    char **vocab;              /* [vocab_size] pieces; like run.c's, a piece ends at its first NUL */
    int *vocab_len;            /* [vocab_size] strlen of each piece */
    float *vocab_scores;       /* [vocab_size] merge scores */
    TokenIndex *sorted_vocab;  /* [vocab_size] sorted with strcmp, for bsearch */
    int vocab_size;
    int max_token_length;      /* longest piece actually present (the header's value is not trusted) */
    int max_token_bytes;       /* most text bytes one token can stand for, 0 = no bound (see min_tokens) */
    char *pool;                /* the bytes of every piece */
    char *str_buffer;          /* a merge candidate (two pieces) or one UTF-8 codepoint, + NUL */
    unsigned char byte_pieces[512];   /* "\x00", "\x01", ... for the <0xXX> tokens */
} Tokenizer;

static int compare_tokens(const void *a, const void *b) {
    return strcmp(((const TokenIndex *)a)->str, ((const TokenIndex *)b)->str);
}

static int str_lookup(const Tokenizer *t, const char *str) {
    /* the id of the piece equal to str, or -1 */
    TokenIndex key;
    key.str = str;
    key.id = 0;
    const TokenIndex *res = bsearch(&key, t->sorted_vocab, (size_t)t->vocab_size, sizeof(TokenIndex), compare_tokens);
    return res != NULL ? res->id : -1;
}

static int32_t read_i32(const unsigned char *p) {
    int32_t v;   /* host byte order, as run.c's fread */
    memcpy(&v, p, sizeof v);
    return v;
}

static void free_tokenizer(Tokenizer *t) {
    free(t->str_buffer);
    free(t->sorted_vocab);
    free(t->pool);
    free(t->vocab_scores);
    free(t->vocab_len);
    free(t->vocab);
    memset(t, 0, sizeof *t);
}

/* Loads vocab_size tokens from data (extra bytes after them are ignored, as run.c does). Returns
   TOK_OK or an error with a one-line reason in msg; never exits, never reads past data + size. */
static int build_tokenizer_memory(Tokenizer *t, const void *data, size_t size, int vocab_size, char *msg,
                                  size_t msg_size) {
    const unsigned char *bytes = (const unsigned char *)data;
    memset(t, 0, sizeof *t);
    if (msg_size > 0) msg[0] = '\0';
    if (vocab_size < MINI_CHAT_MIN_VOCAB || vocab_size > MINI_CHAT_MAX_VOCAB) {
        snprintf(msg, msg_size, "vocabulary size %d is out of range: the tokens are %d to %d (<unk>, BOS and EOS are ids 0-2)",
                 vocab_size, MINI_CHAT_MIN_VOCAB, MINI_CHAT_MAX_VOCAB);
        return TOK_ERR_FORMAT;
    }
    if (data == NULL || size < 4) {
        snprintf(msg, msg_size, "file too short (%zu bytes) for the tokenizer header", size);
        return TOK_ERR_FORMAT;
    }
    int32_t header_max = read_i32(bytes);
    if (header_max < 0 || header_max > MINI_CHAT_MAX_PIECE) {
        snprintf(msg, msg_size, "implausible max_token_length %ld", (long)header_max);
        return TOK_ERR_FORMAT;
    }

    /* pass 1: check every entry against the bytes that remain; count the bytes the pieces need */
    size_t off = 4, pool_bytes = 0;
    for (int i = 0; i < vocab_size; i++) {
        if (size - off < 8) {
            snprintf(msg, msg_size, "holds only %d tokens, the model needs %d", i, vocab_size);
            return TOK_ERR_FORMAT;
        }
        int32_t len = read_i32(bytes + off + 4);
        if (len < 0 || len > MINI_CHAT_MAX_PIECE) {
            snprintf(msg, msg_size, "token %d has an implausible length %ld", i, (long)len);
            return TOK_ERR_FORMAT;
        }
        off += 8;
        if ((size_t)len > size - off) {
            snprintf(msg, msg_size, "token %d (%ld bytes) runs past the end of the file", i, (long)len);
            return TOK_ERR_FORMAT;
        }
        off += (size_t)len;
        pool_bytes += (size_t)len + 1;
    }

    /* pass 2: copy */
    size_t n = (size_t)vocab_size;
    t->vocab_size = vocab_size;
    t->vocab = malloc(n * sizeof *t->vocab);
    t->vocab_len = malloc(n * sizeof *t->vocab_len);
    t->vocab_scores = malloc(n * sizeof *t->vocab_scores);
    t->sorted_vocab = malloc(n * sizeof *t->sorted_vocab);
    t->pool = malloc(pool_bytes);
    if (!t->vocab || !t->vocab_len || !t->vocab_scores || !t->sorted_vocab || !t->pool) {
        free_tokenizer(t);
        snprintf(msg, msg_size, "out of memory");
        return TOK_ERR_NO_MEMORY;
    }
    char *dst = t->pool;
    int max_len = 0;
    off = 4;
    for (int i = 0; i < vocab_size; i++) {
        int32_t len = read_i32(bytes + off + 4);
        memcpy(&t->vocab_scores[i], bytes + off, sizeof(float));
        off += 8;
        memcpy(dst, bytes + off, (size_t)len);
        dst[len] = '\0';
        off += (size_t)len;
        t->vocab[i] = dst;
        t->vocab_len[i] = (int)strlen(dst);
        if (t->vocab_len[i] > max_len) max_len = t->vocab_len[i];
        t->sorted_vocab[i].str = dst;
        t->sorted_vocab[i].id = i;
        dst += len + 1;
    }
    t->max_token_length = max_len;
    /* encode's first symbols are codepoints, whose pieces are their bytes, and byte tokens (ids
       3-258, or 0 past the vocabulary), each for one byte. If no byte token is empty, no symbol
       stands for more bytes than its piece has, nor does any merge of them: a token is at most
       max_len bytes of text. An empty byte token would merge away for free: no bound then. */
    t->max_token_bytes = max_len;
    for (int i = 0; i < vocab_size && i < 259; i++)
        if ((i == 0 || i >= 3) && t->vocab_len[i] == 0) t->max_token_bytes = 0;
    qsort(t->sorted_vocab, n, sizeof(TokenIndex), compare_tokens);
    /* two pieces + NUL for a merge; at least a 4-byte codepoint + NUL */
    t->str_buffer = malloc((size_t)max_len * 2 + 8);
    if (!t->str_buffer) {
        free_tokenizer(t);
        snprintf(msg, msg_size, "out of memory");
        return TOK_ERR_NO_MEMORY;
    }
    for (int i = 0; i < 256; i++) {
        t->byte_pieces[i * 2] = (unsigned char)i;
        t->byte_pieces[i * 2 + 1] = '\0';
    }
    return TOK_OK;
}

/* The id of the piece that is the pieces of ids a and b joined, or -1; buf holds the joined bytes. */
static int merge_lookup(const Tokenizer *t, int a, int b) {
    int la = t->vocab_len[a], lb = t->vocab_len[b];
    memcpy(t->str_buffer, t->vocab[a], (size_t)la);
    memcpy(t->str_buffer + la, t->vocab[b], (size_t)lb);
    t->str_buffer[la + lb] = '\0';
    return str_lookup(t, t->str_buffer);
}

/* A candidate merge of the symbols at left and right (indices into encode's tokens, which never
   move); lv, rv are their versions when it was made, so a stale candidate is recognised. */
typedef struct {
    float score;
    int left, right, id;
    unsigned lv, rv;
} MergeCand;

/* run.c's order: the best score first, and of equal scores the leftmost pair. The left index of a
   pair is its position in the text, since merging keeps the symbols in order. */
static int cand_before(const MergeCand *a, const MergeCand *b) {
    return a->score > b->score || (a->score == b->score && a->left < b->left);
}

static void heap_push(MergeCand *h, int *n, MergeCand c) {
    int i = (*n)++;
    while (i > 0 && cand_before(&c, &h[(i - 1) / 2])) {
        h[i] = h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h[i] = c;
}

static MergeCand heap_pop(MergeCand *h, int *n) {
    MergeCand top = h[0], last = h[--*n];
    int i = 0;
    for (;;) {
        int c = 2 * i + 1;
        if (c >= *n) break;
        if (c + 1 < *n && cand_before(&h[c + 1], &h[c])) c++;
        if (!cand_before(&h[c], &last)) break;
        h[i] = h[c];
        i = c;
    }
    if (*n > 0) h[i] = last;
    return top;
}

/* The state of the merges over tokens[0, n): a doubly linked list of live symbols. */
typedef struct {
    int *next, *prev;    /* [n] neighbours among the live symbols, -1 at the ends */
    unsigned *version;   /* [n] bumped when the symbol's id changes; ~0u once merged away */
    MergeCand *heap;     /* [3n] every pair made, a merge makes at most two */
    int n_heap;
} MergeState;

/* Queues the pair (left, right) if its joined piece is in the vocabulary. run.c starts its best
   score at -1e10, so a merge scoring no more than that (or NaN) is never made. */
static void push_pair(const Tokenizer *t, MergeState *m, const int *tokens, int left, int right) {
    if (left < 0 || right < 0) return;
    int id = merge_lookup(t, tokens[left], tokens[right]);
    if (id == -1 || !(t->vocab_scores[id] > -1e10f)) return;
    MergeCand c;
    c.score = t->vocab_scores[id], c.left = left, c.right = right, c.id = id;
    c.lv = m->version[left], c.rv = m->version[right];
    heap_push(m->heap, &m->n_heap, c);
}

/* run.c's merge loop (merge the adjacent pair whose merged piece scores best, the leftmost of
   equal ones, until no pair is in the vocabulary) in O(n log n): the pairs wait in a heap, and a
   pair whose symbols changed since it was queued is dropped when it comes up. Compacts tokens
   and returns their new count, or -1 when out of memory. */
static int merge_pairs(const Tokenizer *t, int *tokens, int n) {
    MergeState m;
    size_t un = n > 0 ? (size_t)n : 1;
    m.next = malloc(un * sizeof *m.next);
    m.prev = malloc(un * sizeof *m.prev);
    m.version = malloc(un * sizeof *m.version);
    m.heap = malloc(3 * un * sizeof *m.heap);
    m.n_heap = 0;
    int out = -1;
    if (m.next && m.prev && m.version && m.heap) {
        for (int i = 0; i < n; i++) m.next[i] = i + 1 < n ? i + 1 : -1, m.prev[i] = i - 1, m.version[i] = 0;
        for (int i = 0; i + 1 < n; i++) push_pair(t, &m, tokens, i, i + 1);
        while (m.n_heap > 0) {
            MergeCand c = heap_pop(m.heap, &m.n_heap);
            if (m.version[c.left] != c.lv || m.version[c.right] != c.rv) continue;   /* stale */
            tokens[c.left] = c.id;
            m.version[c.left]++;
            m.version[c.right] = ~0u;
            m.next[c.left] = m.next[c.right];
            if (m.next[c.right] >= 0) m.prev[m.next[c.right]] = c.left;
            push_pair(t, &m, tokens, m.prev[c.left], c.left);
            push_pair(t, &m, tokens, c.left, m.next[c.left]);
        }
        out = 0;
        for (int i = 0; i < n; i++)
            if (m.version[i] != ~0u) tokens[out++] = tokens[i];
    }
    free(m.heap);
    free(m.version);
    free(m.prev);
    free(m.next);
    return out;
}

/* run.c's encode: optional BOS (1), a dummy-prefix " " when text is not empty, one token per UTF-8
   codepoint found in the vocabulary (else one byte token, id byte + 3, per byte), then greedy
   merges of the best-scoring adjacent pair, then optional EOS (2). Every id it stores is below
   vocab_size: the tokenizer has at least 3 tokens (build_tokenizer_memory refuses fewer).
   tokens must have room for strlen(text) + 3 ids. Returns 0, or -1 when out of memory. */
static int encode(Tokenizer *t, const char *text, int bos, int eos, int *tokens, int *n_tokens) {
    int n = 0;
    *n_tokens = 0;
    if (bos) tokens[n++] = 1;
    if (text[0] != '\0') {
        int dummy_prefix = str_lookup(t, " ");
        if (dummy_prefix != -1) tokens[n++] = dummy_prefix;   /* run.c would store -1 here */
    }

    char *buf = t->str_buffer;
    size_t str_len = 0;
    for (const char *c = text; *c != '\0'; c++) {
        /* a byte that is not a continuation byte (10xxxxxx) starts a new codepoint */
        if (((unsigned char)*c & 0xC0) != 0x80) str_len = 0;
        buf[str_len++] = *c;
        buf[str_len] = '\0';
        /* keep gathering continuation bytes, at most 4 bytes in all */
        if (((unsigned char)c[1] & 0xC0) == 0x80 && str_len < 4) continue;

        int id = str_lookup(t, buf);
        if (id != -1) {
            tokens[n++] = id;
        } else {
            /* byte fallback: ids 3..258 are <0x00>..<0xFF> (after <unk>, <s>, </s>) */
            for (size_t i = 0; i < str_len; i++) {
                int byte_id = (unsigned char)buf[i] + 3;
                tokens[n++] = byte_id < t->vocab_size ? byte_id : 0;   /* a tiny vocabulary has no byte tokens */
            }
        }
        str_len = 0;
    }

    n = merge_pairs(t, tokens, n);
    if (n < 0) return -1;
    if (eos) tokens[n++] = 2;
    *n_tokens = n;
    return 0;
}

/* The fewest tokens encode can make of text_len bytes, found without encoding them, so that a
   chat line that cannot fit what is left of the context is refused before the work. (Not one
   more for BOS: run.c merges BOS like any token, and a tokenizer may let it merge.) */
static long min_tokens(const Tokenizer *t, size_t text_len) {
    if (t->max_token_bytes <= 0) return 0;
    return (long)((text_len + (size_t)t->max_token_bytes - 1) / (size_t)t->max_token_bytes);
}

/* run.c's decode: the text of token after prev_token. After BOS the leading space is dropped;
   <0xXX> tokens become the raw byte. */
static const char *decode(const Tokenizer *t, int prev_token, int token) {
    if (token < 0 || token >= t->vocab_size) return "";
    const char *piece = t->vocab[token];
    if (prev_token == 1 && piece[0] == ' ') piece++;
    unsigned char byte_val;
    if (sscanf(piece, "<0x%02hhX>", &byte_val) == 1) piece = (const char *)t->byte_pieces + byte_val * 2;
    return piece;
}

#ifndef MINI_CHAT_NO_MAIN

/* Opens path for reading if it is a regular file, else returns NULL with the reason in msg. A FIFO
   or a device would make a read wait or never end; O_NONBLOCK keeps the open itself from waiting
   for a FIFO's writer, and fstat then refuses it. */
static FILE *open_regular_file(const char *path, char *msg, size_t msg_size) {
    int fd = open(path, O_RDONLY | O_NONBLOCK);
    if (fd < 0) {
        snprintf(msg, msg_size, "cannot open: %s", strerror(errno));
        return NULL;
    }
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        snprintf(msg, msg_size, "not a regular file");
        close(fd);
        return NULL;
    }
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        snprintf(msg, msg_size, "cannot open: %s", strerror(errno));
        close(fd);
    }
    return f;
}

/* Reads a tokenizer file and loads it as above. */
static int build_tokenizer(Tokenizer *t, const char *path, int vocab_size, char *msg, size_t msg_size) {
    memset(t, 0, sizeof *t);
    FILE *file = open_regular_file(path, msg, msg_size);
    if (!file) return TOK_ERR_IO;
    unsigned char *buf = NULL;
    size_t len = 0, cap = 0;
    int rc = TOK_OK;
    for (;;) {
        if (len == cap) {
            if (cap >= MINI_CHAT_MAX_TOKENIZER_FILE) {
                snprintf(msg, msg_size, "too large for a tokenizer");
                rc = TOK_ERR_FORMAT;
                break;
            }
            size_t new_cap = cap ? cap * 2 : 65536;
            unsigned char *grown = realloc(buf, new_cap);
            if (!grown) {
                snprintf(msg, msg_size, "out of memory");
                rc = TOK_ERR_NO_MEMORY;
                break;
            }
            buf = grown;
            cap = new_cap;
        }
        size_t got = fread(buf + len, 1, cap - len, file);
        len += got;
        if (got == 0) {
            if (ferror(file)) {
                snprintf(msg, msg_size, "read error: %s", strerror(errno));
                rc = TOK_ERR_IO;
            }
            break;
        }
    }
    fclose(file);
    if (rc == TOK_OK) rc = build_tokenizer_memory(t, buf, len, vocab_size, msg, msg_size);
    free(buf);
    return rc;
}

#endif /* MINI_CHAT_NO_MAIN */

#if !defined(MINI_CHAT_NO_MAIN) || defined(MINI_CHAT_SAMPLER)
/* ---------------------------------------------------------------------------------------------
   Sampler: run.c's xorshift RNG, argmax, multinomial and top-p sampling
   --------------------------------------------------------------------------------------------- */

typedef struct {
    float prob;
    int index;
} ProbIndex;

typedef struct {
    int vocab_size;
    ProbIndex *probindex;   /* [vocab_size] scratch for top-p */
    float temperature;
    float topp;
    unsigned long long rng_state;
} Sampler;

static int build_sampler(Sampler *s, int vocab_size, float temperature, float topp, unsigned long long rng_seed) {
    s->vocab_size = vocab_size;
    s->temperature = temperature;
    s->topp = topp;
    s->rng_state = rng_seed;
    s->probindex = malloc((size_t)vocab_size * sizeof(ProbIndex));
    return s->probindex ? 0 : -1;
}

static void free_sampler(Sampler *s) {
    free(s->probindex);
    s->probindex = NULL;
}

static unsigned int random_u32(unsigned long long *state) {
    /* xorshift* (https://en.wikipedia.org/wiki/Xorshift#xorshift*) */
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    return (unsigned int)((*state * 0x2545F4914F6CDD1Dull) >> 32);
}

static float random_f32(unsigned long long *state) {   /* in [0, 1) */
    return (float)(random_u32(state) >> 8) / 16777216.0f;
}

static void softmax(float *x, int size) {
    float max_val = x[0];
    for (int i = 1; i < size; i++)
        if (x[i] > max_val) max_val = x[i];
    float sum = 0.0f;
    for (int i = 0; i < size; i++) {
        x[i] = expf(x[i] - max_val);
        sum += x[i];
    }
    for (int i = 0; i < size; i++) x[i] /= sum;
}

static int sample_argmax(const float *probabilities, int n) {
    int max_i = 0;
    float max_p = probabilities[0];
    for (int i = 1; i < n; i++) {
        if (probabilities[i] > max_p) {
            max_i = i;
            max_p = probabilities[i];
        }
    }
    return max_i;
}

static int sample_mult(const float *probabilities, int n, float coin) {
    float cdf = 0.0f;
    for (int i = 0; i < n; i++) {
        cdf += probabilities[i];
        if (coin < cdf) return i;
    }
    return n - 1;   /* rounding */
}

static int compare_probindex(const void *a, const void *b) {
    const ProbIndex *a_ = (const ProbIndex *)a, *b_ = (const ProbIndex *)b;
    if (a_->prob > b_->prob) return -1;
    if (a_->prob < b_->prob) return 1;
    return 0;
}

static int sample_topp(const float *probabilities, int n, float topp, ProbIndex *probindex, float coin) {
    /* nucleus sampling: from the smallest set of most likely tokens whose probability passes topp.
       Tokens under (1 - topp) / (n - 1) cannot be in that set, so they are dropped before the sort. */
    if (n <= 1) return 0;
    const float cutoff = (1.0f - topp) / (float)(n - 1);
    int n0 = 0;
    for (int i = 0; i < n; i++) {
        if (probabilities[i] >= cutoff) {
            probindex[n0].index = i;
            probindex[n0].prob = probabilities[i];
            n0++;
        }
    }
    if (n0 == 0) return sample_argmax(probabilities, n);   /* run.c would read probindex[-1] */
    qsort(probindex, (size_t)n0, sizeof(ProbIndex), compare_probindex);

    float cumulative_prob = 0.0f;
    int last_idx = n0 - 1;
    for (int i = 0; i < n0; i++) {
        cumulative_prob += probindex[i].prob;
        if (cumulative_prob > topp) {
            last_idx = i;
            break;
        }
    }
    float r = coin * cumulative_prob;
    float cdf = 0.0f;
    for (int i = 0; i <= last_idx; i++) {
        cdf += probindex[i].prob;
        if (r < cdf) return probindex[i].index;
    }
    return probindex[last_idx].index;   /* rounding */
}

/* The next token from logits (which it overwrites with probabilities). */
static int sample(Sampler *s, float *logits) {
    if (s->temperature == 0.0f) return sample_argmax(logits, s->vocab_size);
    for (int q = 0; q < s->vocab_size; q++) logits[q] /= s->temperature;
    softmax(logits, s->vocab_size);
    float coin = random_f32(&s->rng_state);
    if (s->topp <= 0 || s->topp >= 1) return sample_mult(logits, s->vocab_size, coin);
    return sample_topp(logits, s->vocab_size, s->topp, s->probindex, coin);
}
#endif /* !MINI_CHAT_NO_MAIN || MINI_CHAT_SAMPLER */

#ifndef MINI_CHAT_NO_MAIN

/* ---------------------------------------------------------------------------------------------
   Transformer: the neo_attn runtime, model and session
   --------------------------------------------------------------------------------------------- */

typedef struct {
    int n_threads;          /* 0 = online cores */
    int gpu;                /* 1 = CUDA runtime */
    int gpu_standin;        /* 1 = the GPU path on neo_attn's host stand-in (no GPU needed) */
    neo_type kv_type;
    float gpu_heads_frac;   /* share of KV heads in GPU memory; >= 1 = all (no split) */
    long long gpu_kv_budget; /* bytes of KV cache in GPU memory, placed by neo_plan_gpu_heads; < 0 = unset */
    neo_pipeline pipeline;
    int graphs;             /* 1 = each step replayed from a CUDA graph (neo_session_desc.graphs) */
} NeoOptions;

typedef struct {
    neo_runtime *rt;
    neo_model *model;
    neo_session *session;
    neo_model_info config;
    neo_runtime_info rt_info;
    neo_type kv_type;
    int gpu_standin;        /* the GPU is neo_attn's host stand-in */
    int n_ctx;
    float *logits;          /* [vocab_size] */
    long long n_forward;    /* tokens run */
    double forward_seconds; /* time spent running them */
} Transformer;

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static const char *kv_type_name(neo_type t) {
    return t == NEO_TYPE_F32 ? "f32" : t == NEO_TYPE_BF16 ? "bf16" : "f16";
}

static const char *pipeline_name(neo_pipeline p) {
    return p == NEO_PIPELINE_ON ? "on" : p == NEO_PIPELINE_AUTO ? "auto" : p == NEO_PIPELINE_HYBRID ? "hybrid" : "off";
}

static void free_transformer(Transformer *t) {
    free(t->logits);
    neo_session_destroy(t->session);
    neo_model_destroy(t->model);
    neo_runtime_destroy(t->rt);
    memset(t, 0, sizeof *t);
}

/* The library's errors and warnings (why a call was refused, fewer threads than asked) on
   stderr, beside ours; of its notes (what AUTO chose, a line a layer) only whether the step went
   into a CUDA graph is kept, for the statistics line. */
static int neo_step_graphed;
static void neo_log_line(void *user, neo_log_level level, const char *msg) {
    (void)user;
    if (level != NEO_LOG_INFO) fprintf(stderr, "neo_attn %s: %s\n", level == NEO_LOG_ERROR ? "error" : "warning", msg);
    else if (strstr(msg, "captured into a CUDA graph")) neo_step_graphed = 1;
}

/* --gpu-kv-budget: every layer's gpu_heads from neo_plan_gpu_heads ([n_layers], to free), or NULL
   with a message. */
static int *plan_gpu_heads(const neo_model_info *c, neo_type kv_type, long long budget) {
    neo_layer_desc *d = calloc((size_t)c->n_layers, sizeof *d);
    int *gh = malloc((size_t)c->n_layers * sizeof *gh), host = -1;
    for (int l = 0; d && gh && l < c->n_layers; l++) {
        d[l].n_head = c->n_heads, d[l].n_head_kv = c->n_kv_heads, d[l].head_dim = c->dim / c->n_heads;
        d[l].n_ctx = c->seq_len, d[l].kv_type = kv_type;
    }
    if (d && gh) host = neo_plan_gpu_heads(d, c->n_layers, (size_t)budget, gh);
    free(d);
    if (host < 0) {
        fprintf(stderr, "mini-chat: a GPU KV budget of %lld bytes: no placement (out of memory or a model shape "
                        "neo_attn refuses)\n", budget);
        free(gh);
        return NULL;
    }
    fprintf(stderr, "mini-chat: a GPU KV budget of %lld bytes: %d of %d KV heads in host memory\n", budget, host,
            c->n_layers * c->n_kv_heads);
    return gh;
}

/* Prints a one-line message and returns -1 on failure. */
static int build_transformer(Transformer *t, const char *checkpoint_path, const NeoOptions *o) {
    memset(t, 0, sizeof *t);
    neo_runtime_desc rd = {0};
    rd.log = neo_log_line;
    rd.n_threads = o->n_threads;
    rd.gpu = o->gpu || o->gpu_standin;
    rd.gpu_standin = o->gpu_standin;
    neo_status st = neo_runtime_create(&rd, &t->rt);
    if (st != NEO_OK) {
        if (o->gpu && st == NEO_ERR_UNSUPPORTED && !MINI_CHAT_CUDA)
            fprintf(stderr, "mini-chat: --gpu: this build has no GPU support (build with NEO_ATTN_CUDA=1 and "
                            "neo_attn_cuda.cu), run without --gpu\n");
        else if (o->gpu && st == NEO_ERR_UNSUPPORTED)
            fprintf(stderr, "mini-chat: --gpu: this machine's GPU or CUDA driver cannot run this build (the line "
                            "above says why), run without --gpu\n");
        else
            fprintf(stderr, "mini-chat: cannot start the neo_attn runtime: %s\n", neo_status_string(st));
        free_transformer(t);
        return -1;
    }
    neo_runtime_get_info(t->rt, &t->rt_info);

    /* opened here too for the reason in words (the library says NEO_ERR_IO) and the file's first
       bytes: llama2.c's later export formats start with a magic the loader cannot take */
    char why[128];
    unsigned char magic[4] = {0};
    FILE *f = open_regular_file(checkpoint_path, why, sizeof why);
    if (!f) {
        fprintf(stderr, "mini-chat: %s: cannot load the model: %s\n", checkpoint_path, why);
        free_transformer(t);
        return -1;
    }
    size_t n_magic = fread(magic, 1, sizeof magic, f);
    fclose(f);
    st = neo_model_load(checkpoint_path, &t->model);
    if (st != NEO_OK) {
        fprintf(stderr, "mini-chat: %s: cannot load the model: %s%s\n", checkpoint_path, neo_status_string(st),
                st == NEO_ERR_FORMAT && n_magic == 4 && memcmp(magic, "24ka", 4) == 0 /* 0x616b3432, LE */
                    ? " (a llama2.c export of version 1 or later; run.c and mini-chat read the legacy format, "
                      "export.py --version 0)"
                    : "");
        free_transformer(t);
        return -1;
    }
    neo_model_get_info(t->model, &t->config);
    if (t->config.vocab_size < MINI_CHAT_MIN_VOCAB) {
        fprintf(stderr, "mini-chat: %s: the model's vocabulary is %d; mini-chat needs at least %d tokens (<unk>, BOS, EOS)\n",
                checkpoint_path, t->config.vocab_size, MINI_CHAT_MIN_VOCAB);
        free_transformer(t);
        return -1;
    }

    neo_session_desc sd = {0};
    sd.n_ctx = 0;   /* the model's seq_len, as run.c */
    sd.kv_type = o->kv_type;
    sd.gpu_heads = neo_gpu_heads_for_frac(t->config.n_kv_heads, o->gpu_heads_frac);
    sd.pipeline = o->pipeline;
    sd.graphs = o->graphs;
    int *plan = NULL;
    if (o->gpu_kv_budget >= 0 && !(plan = plan_gpu_heads(&t->config, o->kv_type, o->gpu_kv_budget))) {
        free_transformer(t);
        return -1;
    }
    sd.layer_gpu_heads = plan;
    st = neo_session_create(t->rt, t->model, &sd, &t->session);
    free(plan);
    if (st != NEO_OK) {
        fprintf(stderr, "mini-chat: cannot create a session (kv %s, %d GPU heads, pipeline %s): %s\n",
                kv_type_name(o->kv_type), sd.gpu_heads, pipeline_name(o->pipeline), neo_status_string(st));
        free_transformer(t);
        return -1;
    }
    t->kv_type = o->kv_type;
    t->gpu_standin = o->gpu_standin;
    t->n_ctx = t->config.seq_len;
    t->logits = malloc((size_t)t->config.vocab_size * sizeof(float));
    if (!t->logits) {
        fprintf(stderr, "mini-chat: out of memory\n");
        free_transformer(t);
        return -1;
    }
    return 0;
}

/* Runs token at the next position; the logits land in t->logits, or, when greedy is set, only
   their argmax in *greedy (found on the GPU when there is one, so the logits stay there). */
static neo_status forward(Transformer *t, int token, int *greedy) {
    double t0 = now_seconds();
    neo_status st = greedy ? neo_session_step_argmax(t->session, token, greedy)
                           : neo_session_step(t->session, token, t->logits);
    t->forward_seconds += now_seconds() - t0;
    if (st == NEO_OK) t->n_forward++;
    return st;
}

static void print_neo_info(const Transformer *t, FILE *out) {
    neo_layer_info li;
    memset(&li, 0, sizeof li);
    neo_session_get_info(t->session, &li);
    fprintf(out, "neo_attn %s: %d thread%s, cpu %s%s, KV cache %s: %zu bytes GPU + %zu bytes host, "
                 "KV heads per layer %d GPU + %d CPU, pipeline %s, context %d of %d tokens, %lld decode calls",
            neo_attn_version(), t->rt_info.n_threads, t->rt_info.n_threads == 1 ? "" : "s",
            neo_cpu_isa_name(t->rt_info.cpu_isa), !t->rt_info.gpu ? "" : t->gpu_standin ? ", GPU stand-in" : ", GPU",
            kv_type_name(t->kv_type), li.gpu_bytes, li.host_bytes, li.gpu_heads, li.cpu_heads,
            pipeline_name(li.pipeline), neo_session_length(t->session), t->n_ctx, li.n_decode);
    if (neo_step_graphed) fprintf(out, ", steps replayed from a CUDA graph");
    /* the stand-in is synchronous: its half never overlaps the CPU half */
    if (t->gpu_standin && li.cpu_heads > 0)
        fprintf(out, " (the stand-in GPU runs its half on the host, one half after the other)");
    else if (t->rt_info.gpu && li.cpu_heads > 0)
        fprintf(out, " (%lld with both halves overlapped)", li.n_overlapped);
    fprintf(out, "\n");
}

/* ---------------------------------------------------------------------------------------------
   Generation: run.c's loop, and the chat
   --------------------------------------------------------------------------------------------- */

static void safe_printf(const char *piece) {
    /* a piece that is one raw byte is printed only if it is printable or whitespace */
    if (piece == NULL || piece[0] == '\0') return;
    if (piece[1] == '\0') {
        unsigned char byte_val = (unsigned char)piece[0];
        if (!(isprint(byte_val) || isspace(byte_val))) return;
    }
    printf("%s", piece);
}

static int generate(Transformer *t, Tokenizer *tok, Sampler *sampler, const char *prompt, int steps) {
    int num_prompt_tokens = 0;
    size_t prompt_len = strlen(prompt);
    /* as run.c: the whole prompt is encoded and at most steps (<= n_ctx) positions run, so a
       prompt longer than that prints its first steps - 1 tokens */
    int *prompt_tokens = malloc((prompt_len + 3) * sizeof(int));   /* + BOS, EOS, NUL */
    if (!prompt_tokens || encode(tok, prompt, 1, 0, prompt_tokens, &num_prompt_tokens) != 0) {
        fprintf(stderr, "mini-chat: out of memory\n");
        free(prompt_tokens);
        return -1;
    }

    double start = 0;            /* the timer starts after the first token, as run.c's */
    int token = prompt_tokens[0];
    int pos = 0;
    while (pos < steps) {
        /* the prompt is forced; after it, sample (greedy: argmax where the logits are) */
        int forced = pos < num_prompt_tokens - 1, next = 0;
        int greedy = !forced && sampler->temperature == 0.0f;
        neo_status st = forward(t, token, greedy ? &next : NULL);
        if (st != NEO_OK) {
            fprintf(stderr, "mini-chat: neo_session_step at position %d: %s\n", pos, neo_status_string(st));
            free(prompt_tokens);
            return -1;
        }
        if (forced) next = prompt_tokens[pos + 1];
        else if (!greedy) next = sample(sampler, t->logits);
        pos++;
        if (next == 1) break;   /* BOS delimits sequences */
        safe_printf(decode(tok, token, next));
        fflush(stdout);
        token = next;
        if (start == 0) start = now_seconds();
    }
    printf("\n");
    fflush(stdout);
    if (pos > 1) {
        double elapsed = now_seconds() - start;
        fprintf(stderr, "achieved tok/s: %f\n", elapsed > 0 ? (pos - 1) / elapsed : 0.0);
    }
    print_neo_info(t, stderr);
    free(prompt_tokens);
    return 0;
}

static void print_chat_stats(const Transformer *t, long long reply_tokens, double reply_seconds) {
    printf("[stats] %lld tokens run in %.3f s: %.1f tok/s", t->n_forward, t->forward_seconds,
           t->forward_seconds > 0 ? (double)t->n_forward / t->forward_seconds : 0.0);
    if (reply_tokens > 0)
        printf("; last reply %lld tokens: %.1f tok/s", reply_tokens,
               reply_seconds > 0 ? (double)reply_tokens / reply_seconds : 0.0);
    printf("\n[stats] ");
    print_neo_info(t, stdout);
}

/* Each line is appended to one growing session, and the model carries on from it. */
static int chat(Transformer *t, Tokenizer *tok, Sampler *sampler, int steps) {
    char *line = NULL;
    size_t line_cap = 0;
    int *tokens = NULL;
    size_t tokens_cap = 0;
    long long reply_tokens = 0;
    double reply_seconds = 0;
    int rc = 0;

    printf("mini-chat: type the start of a story and the model goes on with it. "
           "/reset starts over, /stats, /quit leaves.\n");
    for (;;) {
        printf("> ");
        fflush(stdout);
        ssize_t got = getline(&line, &line_cap, stdin);
        if (got < 0) {   /* EOF */
            printf("\n");
            break;
        }
        size_t len = strlen(line);
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r')) line[--len] = '\0';

        if (strcmp(line, "/quit") == 0) break;
        if (strcmp(line, "/reset") == 0) {
            neo_status st = neo_session_truncate(t->session, 0);
            if (st != NEO_OK) {
                fprintf(stderr, "mini-chat: /reset: %s\n", neo_status_string(st));
                rc = -1;
                break;
            }
            printf("[context cleared]\n");
            continue;
        }
        if (strcmp(line, "/stats") == 0) {
            print_chat_stats(t, reply_tokens, reply_seconds);
            continue;
        }
        if (line[0] == '/') {
            printf("[unknown command %s; the commands are /reset, /stats and /quit]\n", line);
            continue;
        }
        if (len == 0) continue;

        /* the line's tokens, with BOS at the start of a fresh session */
        if (len + 3 > tokens_cap) {
            int *grown = realloc(tokens, (len + 3) * sizeof(int));
            if (!grown) {
                fprintf(stderr, "mini-chat: out of memory\n");
                rc = -1;
                break;
            }
            tokens = grown;
            tokens_cap = len + 3;
        }
        int n_tokens = 0;
        int used = neo_session_length(t->session);
        long least = min_tokens(tok, len);
        if (least > t->n_ctx - used) {
            printf("[the context is full: %d of %d tokens used, that line needs at least %ld more; type /reset to "
                   "start over]\n",
                   used, t->n_ctx, least);
            continue;
        }
        if (encode(tok, line, used == 0, 0, tokens, &n_tokens) != 0) {
            fprintf(stderr, "mini-chat: out of memory\n");
            rc = -1;
            break;
        }
        if (n_tokens == 0) continue;
        if (n_tokens > t->n_ctx - used) {
            printf("[the context is full: %d of %d tokens used, that line needs %d more; type /reset to start over]\n",
                   used, t->n_ctx, n_tokens);
            continue;
        }
        for (int i = 0; i < n_tokens && rc == 0; i++) {
            neo_status st = forward(t, tokens[i], NULL);
            if (st != NEO_OK) {
                fprintf(stderr, "mini-chat: neo_session_step: %s\n", neo_status_string(st));
                rc = -1;
            }
        }
        if (rc != 0) break;

        /* the reply, streamed as it comes */
        double t0 = now_seconds();
        int token = tokens[n_tokens - 1], n_reply = 0;
        for (int i = 0; i < steps; i++) {
            if (neo_session_length(t->session) >= t->n_ctx) {
                printf("\n[the context is full (%d tokens); type /reset to start over]", t->n_ctx);
                break;
            }
            int next = sample(sampler, t->logits);
            if (next == 1 || next == 2) break;   /* BOS or EOS: the story is over */
            safe_printf(decode(tok, token, next));
            fflush(stdout);
            neo_status st = forward(t, next, NULL);
            if (st != NEO_OK) {
                fprintf(stderr, "\nmini-chat: neo_session_step: %s\n", neo_status_string(st));
                rc = -1;
                break;
            }
            token = next;
            n_reply++;
        }
        if (rc == 0 && steps > 0 && n_reply == steps) printf(" [the reply stopped at the step limit, -n %d]", steps);
        printf("\n");
        reply_tokens = n_reply;
        reply_seconds = now_seconds() - t0;
        if (rc != 0) break;
    }
    fflush(stdout);
    if (t->n_forward > 0 && t->forward_seconds > 0)
        fprintf(stderr, "achieved tok/s: %f\n", (double)t->n_forward / t->forward_seconds);
    print_neo_info(t, stderr);
    free(tokens);
    free(line);
    return rc;
}

/* ---------------------------------------------------------------------------------------------
   main: arguments, finding the model, and the unwinding
   --------------------------------------------------------------------------------------------- */

static void usage(FILE *out) {
    fprintf(out,
            "Usage:   mini-chat [MODEL] [options]\n"
            "Example: mini-chat stories260K.bin -z tok512.bin -t 0 -n 256 -i \"Once upon a time\"\n"
            "         mini-chat                  (chat: type lines; /reset, /stats, /quit)\n"
            "MODEL is a llama2.c checkpoint (a regular file); default: stories260K.bin in $NEO_MODEL (a file\n"
            "or a directory), models/ or tests/data/.\n"
            "Options (as llama2.c run.c):\n"
            "  -t <float>  temperature, 0 or more, default 1.0 (0 = greedy; below 1e-6 greedy too)\n"
            "  -p <float>  p value in top-p (nucleus) sampling in [0,1], default 0.9\n"
            "  -s <int>    random seed, default time(NULL)\n"
            "  -n <int>    number of steps to run for, default 256. 0 = max_seq_len\n"
            "  -i <string> input prompt: generate once and exit, as run.c (no -i: chat)\n"
            "  -z <string> tokenizer, default tok512.bin beside the model\n"
            "neo_attn options (the environment variable is used when the flag is not given; of\n"
            "--gpu-heads-frac and --gpu-kv-budget the last given wins, and either replaces both variables):\n"
            "  --kv-type f16|bf16|f32     KV cache storage, default f32 (matches run.c exactly)\n"
            "  --gpu-heads-frac <float>   share of KV heads in GPU memory, in [0,1]; default 1 = all, no split;\n"
            "                             below 1 at least one head stays on each side (NEO_GPU_HEADS_FRAC);\n"
            "                             needs --gpu or --gpu-standin\n"
            "  --gpu-kv-budget <bytes>    GPU memory for the KV cache instead: as many heads as fit, the rest\n"
            "                             spread evenly over the layers' host memory (NEO_GPU_KV_BUDGET); needs\n"
            "                             --gpu or --gpu-standin\n"
            "  --neo-pipeline off|on|hybrid|auto  how a split layer runs, default auto (NEO_PIPELINE)\n"
            "  --threads <int>            CPU threads, default 0 = online cores (NEO_THREADS)\n"
            "  --cuda-graphs on|off       replay each step from a CUDA graph captured once (where every layer\n"
            "                             can be: not AUTO still measuring), default off (NEO_CUDA_GRAPHS)\n"
            "  --gpu                      attention on a CUDA GPU (needs a NEO_ATTN_CUDA build)\n"
            "  --gpu-standin              the GPU path on neo_attn's host stand-in: the split and pipelines\n"
            "                             run with no GPU, for testing\n"
            "  -h, --help                 this text\n"
            "Model files: https://huggingface.co/karpathy/tinyllamas/tree/main/stories260K "
            "(stories260K.bin, tok512.bin)\n");
}

static int bad_value(const char *what, const char *value) {
    fprintf(stderr, "mini-chat: bad value for %s: '%s'\n", what, value);
    usage(stderr);
    return 1;
}

static int parse_int(const char *s, int *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (end == s || *end != '\0' || errno == ERANGE || v < INT_MIN || v > INT_MAX) return -1;
    *out = (int)v;
    return 0;
}

static int parse_float(const char *s, float *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end != '\0' || !isfinite(v) || v > 1e30 || v < -1e30) return -1;
    *out = (float)v;
    return 0;
}

static int parse_frac(const char *s, float *out) {
    float f;
    if (parse_float(s, &f) != 0 || f < 0.0f || f > 1.0f) return -1;
    *out = f;
    return 0;
}

static int parse_bytes(const char *s, long long *out) {
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (end == s || *end != '\0' || errno == ERANGE || v < 0) return -1;
    *out = v;
    return 0;
}

static int parse_threads(const char *s, int *out) {
    int n;
    if (parse_int(s, &n) != 0 || n < 0 || n > 4096) return -1;
    *out = n;
    return 0;
}

static int parse_pipeline(const char *s, neo_pipeline *out) {
    if (strcmp(s, "off") == 0) *out = NEO_PIPELINE_OFF;
    else if (strcmp(s, "on") == 0) *out = NEO_PIPELINE_ON;
    else if (strcmp(s, "auto") == 0) *out = NEO_PIPELINE_AUTO;
    else if (strcmp(s, "hybrid") == 0) *out = NEO_PIPELINE_HYBRID;
    else return -1;
    return 0;
}

static int parse_on_off(const char *s, int *out) {
    if (strcmp(s, "on") == 0) *out = 1;
    else if (strcmp(s, "off") == 0) *out = 0;
    else return -1;
    return 0;
}

static int parse_kv_type(const char *s, neo_type *out) {
    if (strcmp(s, "f16") == 0) *out = NEO_TYPE_F16;
    else if (strcmp(s, "bf16") == 0) *out = NEO_TYPE_BF16;
    else if (strcmp(s, "f32") == 0) *out = NEO_TYPE_F32;
    else return -1;
    return 0;
}

static int is_regular_file(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

static int is_directory(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
}

/* dir + "/" + name in a new string */
static char *path_join(const char *dir, const char *name) {
    size_t ld = strlen(dir), ln = strlen(name);
    char *p = malloc(ld + ln + 2);
    if (!p) return NULL;
    memcpy(p, dir, ld);
    size_t o = ld;
    if (ld > 0 && dir[ld - 1] != '/') p[o++] = '/';
    memcpy(p + o, name, ln + 1);
    return p;
}

/* stories260K.bin in $NEO_MODEL (a file, or a directory holding it), models/, tests/data/ (the
   repository's copy, when run from its root) */
static char *find_model(void) {
    const char *env = getenv("NEO_MODEL");
    if (env && env[0]) {
        if (is_regular_file(env)) return path_join("", env);
        if (is_directory(env)) {
            char *p = path_join(env, "stories260K.bin");
            if (p && is_regular_file(p)) return p;
            free(p);
        }
    }
    static const char *const dirs[] = {"models", "tests/data"};
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
        char *p = path_join(dirs[i], "stories260K.bin");
        if (p && is_regular_file(p)) return p;
        free(p);
    }
    return NULL;
}

/* tok512.bin in the directory of model_path */
static char *tokenizer_beside(const char *model_path) {
    const char *slash = strrchr(model_path, '/');
    if (!slash) return path_join("", "tok512.bin");
    size_t ld = (size_t)(slash - model_path) + 1;
    char *dir = malloc(ld + 1);
    if (!dir) return NULL;
    memcpy(dir, model_path, ld);
    dir[ld] = '\0';
    char *p = path_join(dir, "tok512.bin");
    free(dir);
    return p;
}

int main(int argc, char **argv) {
    /* defaults, as run.c's */
    const char *checkpoint_path = NULL;   /* MODEL; NULL = look for stories260K.bin */
    const char *tokenizer_path = NULL;    /* -z; NULL = tok512.bin beside the model */
    float temperature = 1.0f;             /* -t: 0 = greedy, 1 = the model's distribution */
    float topp = 0.9f;                    /* -p: top-p (nucleus) sampling; 0 or 1 = off */
    int seed = 0;                         /* -s: 0 = time(NULL) */
    int steps = 256;                      /* -n: positions to run, the prompt's included; 0 = seq_len */
    const char *prompt = NULL;            /* -i: generate once from it, as run.c; NULL = chat */
    /* neo_attn */
    NeoOptions neo;
    neo.kv_type = NEO_TYPE_F32;           /* --kv-type: f32 keeps run.c's numbers exactly */
    neo.gpu_heads_frac = 1.0f;            /* --gpu-heads-frac: 1 = every KV head on the GPU (no split) */
    neo.gpu_kv_budget = -1;               /* --gpu-kv-budget: unset, the fraction decides */
    neo.pipeline = NEO_PIPELINE_AUTO;     /* --neo-pipeline: chosen from measured costs */
    neo.n_threads = 0;                    /* --threads: 0 = online cores */
    neo.graphs = 0;                       /* --cuda-graphs: off, kernels launched one by one */
    neo.gpu = 0;                          /* --gpu: 0 = CPU only */
    neo.gpu_standin = 0;                  /* --gpu-standin: 0 = a real GPU when --gpu */

    /* the flags, then the environment for what no flag set: a bad variable under a flag that
       replaces it is never read. --gpu-heads-frac and --gpu-kv-budget are one setting, the GPU
       share: the last of them given wins, and either replaces both variables. */
    const char *env, *share_from = NULL;  /* where the GPU share came from, if anywhere */
    int set_pipeline = 0, set_threads = 0, set_graphs = 0;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
            usage(stdout);
            return 0;
        }
        if (strcmp(arg, "--gpu") == 0) {
            neo.gpu = 1;
            continue;
        }
        if (strcmp(arg, "--gpu-standin") == 0) {
            neo.gpu_standin = 1;
            continue;
        }
        if (arg[0] != '-') {   /* the model */
            if (checkpoint_path) {
                fprintf(stderr, "mini-chat: unexpected argument '%s'\n", arg);
                usage(stderr);
                return 1;
            }
            checkpoint_path = arg;
            continue;
        }
        /* every other flag takes a value: "-x value", "--flag value" or "--flag=value" */
        char name[32];
        const char *value = NULL;
        const char *eq = strncmp(arg, "--", 2) == 0 ? strchr(arg, '=') : NULL;
        size_t name_len = eq ? (size_t)(eq - arg) : strlen(arg);
        if (name_len >= sizeof name) name_len = sizeof name - 1;
        memcpy(name, arg, name_len);
        name[name_len] = '\0';
        if (eq) value = eq + 1;
        else if (i + 1 < argc) value = argv[++i];
        if (strcmp(name, "-t") && strcmp(name, "-p") && strcmp(name, "-s") && strcmp(name, "-n") &&
            strcmp(name, "-i") && strcmp(name, "-z") && strcmp(name, "--kv-type") &&
            strcmp(name, "--gpu-heads-frac") && strcmp(name, "--gpu-kv-budget") && strcmp(name, "--neo-pipeline") &&
            strcmp(name, "--threads") && strcmp(name, "--cuda-graphs")) {
            fprintf(stderr, "mini-chat: unknown option '%s'\n", arg);
            usage(stderr);
            return 1;
        }
        if (!value) {
            fprintf(stderr, "mini-chat: option %s needs a value\n", name);
            usage(stderr);
            return 1;
        }
        if (strcmp(name, "-t") == 0) {
            if (parse_float(value, &temperature) != 0) return bad_value("-t", value);
        } else if (strcmp(name, "-p") == 0) {
            if (parse_float(value, &topp) != 0) return bad_value("-p", value);
        } else if (strcmp(name, "-s") == 0) {
            if (parse_int(value, &seed) != 0) return bad_value("-s", value);
        } else if (strcmp(name, "-n") == 0) {
            if (parse_int(value, &steps) != 0) return bad_value("-n", value);
        } else if (strcmp(name, "-i") == 0) {
            prompt = value;
        } else if (strcmp(name, "-z") == 0) {
            tokenizer_path = value;
        } else if (strcmp(name, "--kv-type") == 0) {
            if (parse_kv_type(value, &neo.kv_type) != 0) return bad_value("--kv-type", value);
        } else if (strcmp(name, "--gpu-heads-frac") == 0) {
            if (parse_frac(value, &neo.gpu_heads_frac) != 0) return bad_value("--gpu-heads-frac", value);
            neo.gpu_kv_budget = -1;
            share_from = "--gpu-heads-frac";
        } else if (strcmp(name, "--gpu-kv-budget") == 0) {
            if (parse_bytes(value, &neo.gpu_kv_budget) != 0) return bad_value("--gpu-kv-budget", value);
            share_from = "--gpu-kv-budget";
        } else if (strcmp(name, "--neo-pipeline") == 0) {
            if (parse_pipeline(value, &neo.pipeline) != 0) return bad_value("--neo-pipeline", value);
            set_pipeline = 1;
        } else if (strcmp(name, "--cuda-graphs") == 0) {
            if (parse_on_off(value, &neo.graphs) != 0) return bad_value("--cuda-graphs", value);
            set_graphs = 1;
        } else {
            if (parse_threads(value, &neo.n_threads) != 0) return bad_value("--threads", value);
            set_threads = 1;
        }
    }
    if (!share_from && (env = getenv("NEO_GPU_HEADS_FRAC")) && env[0]) {
        if (parse_frac(env, &neo.gpu_heads_frac) != 0) return bad_value("NEO_GPU_HEADS_FRAC", env);
        share_from = "NEO_GPU_HEADS_FRAC";
    }
    if ((!share_from || share_from[0] != '-') && (env = getenv("NEO_GPU_KV_BUDGET")) && env[0]) {
        if (parse_bytes(env, &neo.gpu_kv_budget) != 0) return bad_value("NEO_GPU_KV_BUDGET", env);
        share_from = "NEO_GPU_KV_BUDGET"; /* over NEO_GPU_HEADS_FRAC: a budget is "instead" */
    }
    if (!set_pipeline && (env = getenv("NEO_PIPELINE")) && env[0] && parse_pipeline(env, &neo.pipeline) != 0)
        return bad_value("NEO_PIPELINE", env);
    if (!set_threads && (env = getenv("NEO_THREADS")) && env[0] && parse_threads(env, &neo.n_threads) != 0)
        return bad_value("NEO_THREADS", env);
    if (!set_graphs && (env = getenv("NEO_CUDA_GRAPHS")) && env[0] && parse_on_off(env, &neo.graphs) != 0)
        return bad_value("NEO_CUDA_GRAPHS", env);

    /* run.c's clamping. Its seed is atoi() stored in an unsigned long long, so only 0 means "time" */
    unsigned long long rng_seed = (unsigned long long)(long long)seed;
    if (rng_seed == 0) rng_seed = (unsigned int)time(NULL);
    if (temperature < 0.0) temperature = 0.0f;
    if (topp < 0.0 || 1.0 < topp) topp = 0.9f;
    if (steps < 0) steps = 0;
    /* the sampler divides the logits by the temperature: below this minimum a logit of 1e32 would
       overflow to inf and the softmax give NaN; the distribution is one-hot long before that */
    if (temperature > 0.0f && temperature < MINI_CHAT_MIN_TEMPERATURE) {
        fprintf(stderr, "mini-chat: temperature %g is below %g: greedy decoding\n", (double)temperature,
                (double)MINI_CHAT_MIN_TEMPERATURE);
        temperature = 0.0f;
    }
    /* with the CPU alone every KV head is in host memory and there is no graph to capture: a GPU
       share or graphs would be silently ignored. A flag is refused; a variable is set for every
       run, so it is ignored with a warning. */
    if (!neo.gpu && !neo.gpu_standin) {
        const char *what[2] = {share_from, neo.graphs ? (set_graphs ? "--cuda-graphs on" : "NEO_CUDA_GRAPHS") : NULL};
        const char *why[2] = {"on the CPU alone every KV head is in host memory", "a graph holds GPU work"};
        for (int k = 0; k < 2; k++) {
            if (!what[k]) continue;
            if (what[k][0] == '-') {
                fprintf(stderr, "mini-chat: %s needs --gpu or --gpu-standin (%s)\n", what[k], why[k]);
                return 1;
            }
            fprintf(stderr, "mini-chat: %s is ignored without --gpu or --gpu-standin\n", what[k]);
        }
        neo.gpu_kv_budget = -1;
        neo.graphs = 0;
    }

    char *found_model = NULL, *found_tokenizer = NULL;
    if (!checkpoint_path) {
        found_model = find_model();
        if (!found_model) {
            const char *nm = getenv("NEO_MODEL");
            fprintf(stderr,
                    "mini-chat: no model given and stories260K.bin not found in $NEO_MODEL (%s), models/ "
                    "or tests/data/\n"
                    "  get stories260K.bin and tok512.bin from "
                    "https://huggingface.co/karpathy/tinyllamas/tree/main/stories260K\n"
                    "  and put them in models/, or pass the model's path (mini-chat --help)\n",
                    nm && nm[0] ? nm : "unset");
            return 1;
        }
        checkpoint_path = found_model;
    }
    if (!tokenizer_path) {
        found_tokenizer = tokenizer_beside(checkpoint_path);
        if (!found_tokenizer) {
            fprintf(stderr, "mini-chat: out of memory\n");
            free(found_model);
            return 1;
        }
        tokenizer_path = found_tokenizer;
    }

    int rc = 1;
    Transformer transformer;
    if (build_transformer(&transformer, checkpoint_path, &neo) != 0) goto out_paths;
    if (steps == 0 || steps > transformer.config.seq_len) steps = transformer.config.seq_len;

    Tokenizer tokenizer;
    char msg[256];
    if (build_tokenizer(&tokenizer, tokenizer_path, transformer.config.vocab_size, msg, sizeof msg) != TOK_OK) {
        fprintf(stderr, "mini-chat: %s: bad tokenizer: %s\n", tokenizer_path, msg);
        goto out_transformer;
    }

    Sampler sampler;
    if (build_sampler(&sampler, transformer.config.vocab_size, temperature, topp, rng_seed) != 0) {
        fprintf(stderr, "mini-chat: out of memory\n");
        goto out_tokenizer;
    }

    if (prompt) rc = generate(&transformer, &tokenizer, &sampler, prompt, steps) == 0 ? 0 : 1;
    else rc = chat(&transformer, &tokenizer, &sampler, steps) == 0 ? 0 : 1;

    free_sampler(&sampler);
out_tokenizer:
    free_tokenizer(&tokenizer);
out_transformer:
    free_transformer(&transformer);
out_paths:
    free(found_tokenizer);
    free(found_model);
    return rc;
}

#endif /* MINI_CHAT_NO_MAIN */
