/* fuzz_tokenizer.c - libFuzzer target for mini-chat's tokenizer loader, encoder and decoder.

   Any bytes are loaded as a tokenizer.bin for a 512-token model; if they load, a few fixed
   strings (ASCII, UTF-8, stray continuation bytes, empty) are encoded and their tokens decoded.
   Build and run from the repository root (the Makefile's test-fuzz does both):
       clang -std=c11 -D_POSIX_C_SOURCE=200809L -O1 -g -fsanitize=fuzzer,address,undefined -I. \
           tests/fuzz_tokenizer.c -o build/fuzz_tokenizer -lm -lpthread
       ./build/fuzz_tokenizer -max_total_time=30 build/corpus_tokenizer
*/
#define MINI_CHAT_NO_MAIN
#include "examples/mini-chat/mini_chat.c"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const char *const texts[] = {
        "Once upon a time",
        "",
        " ",
        "h\xC3\xA9llo w\xC3\xB6rld \xE4\xBD\xA0\xE5\xA5\xBD \xF0\x9F\x98\x80!",   /* 2-, 3- and 4-byte codepoints */
        "\x80\x80\x80\x80\x80\x80 stray \xC3",                                     /* continuations, cut codepoint */
        "\xF0\x9F\x98\x80\x80\x80\x80",                                            /* too many continuations */
        "<0x41><s>\n</s>\t\x01\x7F\xFF",
    };
    Tokenizer t;
    char msg[256];
    if (build_tokenizer_memory(&t, data, size, 512, msg, sizeof msg) != TOK_OK) {
        if (msg[0] == '\0') __builtin_trap();   /* every failure says why */
        return 0;
    }
    int tokens[64];
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        if (strlen(texts[i]) + 3 > sizeof tokens / sizeof tokens[0]) __builtin_trap();
        int n = -1;
        encode(&t, texts[i], 1, (int)(i & 1), tokens, &n);
        if (n < 1 || (size_t)n > strlen(texts[i]) + 3) __builtin_trap();
        int prev = tokens[0];
        size_t total = 0;
        for (int j = 0; j < n; j++) {
            if (tokens[j] < 0 || tokens[j] >= t.vocab_size) __builtin_trap();
            const char *piece = decode(&t, prev, tokens[j]);
            total += strlen(piece);
            prev = tokens[j];
        }
        (void)total;
    }
    free_tokenizer(&t);
    return 0;
}
