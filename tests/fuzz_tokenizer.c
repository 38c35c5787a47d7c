/* fuzz_tokenizer.c - libFuzzer target for mini-chat's tokenizer loader, encoder and decoder.

   Any bytes are loaded as a tokenizer.bin for a 512-token model and for one of 0 to 7 tokens
   (the input's last byte picks; fewer than 3 must be refused with a reason). If they load, a few
   fixed strings (ASCII, UTF-8, stray continuation bytes, empty) and the input's last bytes as text
   are encoded: every id must be in the vocabulary, and the heap-ordered merges must give exactly
   the ids of run.c's quadratic loop (tests/bpe_reference.h); then the tokens are decoded.
   Build and run from the repository root (the Makefile's test-fuzz does both):
       clang -std=c11 -D_POSIX_C_SOURCE=200809L -O1 -g -DNEO_ATTN_NO_SIMD=1 \
           -fsanitize=fuzzer,address,undefined -I. tests/fuzz_tokenizer.c -o build/fuzz_tokenizer -lm -lpthread
       ./build/fuzz_tokenizer -max_total_time=30 build/corpus_tokenizer
   (The header's SIMD kernels are not used here; NEO_ATTN_NO_SIMD leaves them out of the build.)
*/
#define MINI_CHAT_NO_MAIN
#include "examples/mini-chat/mini_chat.c"

#include "bpe_reference.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_TEXT 32   /* the input as text: old_encode is quadratic, and the fuzzer should stay fast */

static void check_text(Tokenizer *t, const char *text, int bos, int eos) {
    static int tokens[MAX_TEXT + 3], ref[MAX_TEXT + 3];
    size_t len = strlen(text);
    int n = -1, n_ref = -1;
    if (len > MAX_TEXT) __builtin_trap();
    if (encode(t, text, bos, eos, tokens, &n) != 0) return;   /* out of memory */
    if (n < 0 || (size_t)n > len + 3) __builtin_trap();
    if (n < eos) __builtin_trap();
    if (min_tokens(t, len) > n - eos) __builtin_trap();
    old_encode(t, text, bos, eos, ref, &n_ref);
    if (n != n_ref || memcmp(tokens, ref, (size_t)n * sizeof(int)) != 0) __builtin_trap();
    int prev = n > 0 ? tokens[0] : 1;
    for (int j = 0; j < n; j++) {
        if (tokens[j] < 0 || tokens[j] >= t->vocab_size) __builtin_trap();
        (void)strlen(decode(t, prev, tokens[j]));
        prev = tokens[j];
    }
}

static void fuzz_vocab(const uint8_t *data, size_t size, int vocab_size) {
    static const char *const texts[] = {
        "Once upon a time",
        "",
        " ",
        "h\xC3\xA9llo w\xC3\xB6rld \xE4\xBD\xA0\xE5\xA5\xBD \xF0\x9F\x98\x80!",   /* 2-, 3- and 4-byte codepoints */
        "\x80\x80\x80\x80\x80\x80 stray \xC3",                                     /* continuations, cut codepoint */
        "\xF0\x9F\x98\x80\x80\x80\x80",                                            /* too many continuations */
        "<0x41><s>\n</s>\t\x01\x7F\xFF",
    };
    static char text[MAX_TEXT + 1];
    Tokenizer t;
    char msg[256];
    if (build_tokenizer_memory(&t, data, size, vocab_size, msg, sizeof msg) != TOK_OK) {
        if (msg[0] == '\0') __builtin_trap();   /* every failure says why */
        return;
    }
    if (vocab_size < MINI_CHAT_MIN_VOCAB) __builtin_trap();   /* BOS and EOS would be past the end */
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) check_text(&t, texts[i], 1, (int)(i & 1));
    /* the input's last bytes as text (a tokenizer's last pieces, or a text appended to it), NUL
       bytes as spaces */
    size_t len = size < MAX_TEXT ? size : MAX_TEXT;
    for (size_t i = 0; i < len; i++) text[i] = data[size - len + i] ? (char)data[size - len + i] : ' ';
    text[len] = '\0';
    check_text(&t, text, (int)(size & 1), (int)(size >> 1 & 1));
    free_tokenizer(&t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_vocab(data, size, 512);
    if (size > 0) fuzz_vocab(data, size, data[size - 1] % 8);
    return 0;
}
