/* bpe_reference.h - run.c's encode as mini-chat had it before its merges went through a heap:
   every round scans all adjacent pairs for the best-scoring merge (the leftmost of equal ones)
   and merges it, O(n^2). Kept verbatim as the reference that encode must reproduce id for id
   (test_tokenizer, fuzz_tokenizer). Include after examples/mini-chat/mini_chat.c. */
#ifndef NEO_TEST_BPE_REFERENCE_H
#define NEO_TEST_BPE_REFERENCE_H

static void old_encode(Tokenizer *t, const char *text, int bos, int eos, int *tokens, int *n_tokens) {
    int n = 0;
    if (bos) tokens[n++] = 1;
    if (text[0] != '\0') {
        int dummy_prefix = str_lookup(t, " ");
        if (dummy_prefix != -1) tokens[n++] = dummy_prefix;
    }
    char *buf = t->str_buffer;
    size_t str_len = 0;
    for (const char *c = text; *c != '\0'; c++) {
        if (((unsigned char)*c & 0xC0) != 0x80) str_len = 0;
        buf[str_len++] = *c;
        buf[str_len] = '\0';
        if (((unsigned char)c[1] & 0xC0) == 0x80 && str_len < 4) continue;
        int id = str_lookup(t, buf);
        if (id != -1) {
            tokens[n++] = id;
        } else {
            for (size_t i = 0; i < str_len; i++) {
                int byte_id = (unsigned char)buf[i] + 3;
                tokens[n++] = byte_id < t->vocab_size ? byte_id : 0;
            }
        }
        str_len = 0;
    }
    for (;;) {
        float best_score = -1e10f;
        int best_id = -1, best_idx = -1;
        for (int i = 0; i < n - 1; i++) {
            int la = t->vocab_len[tokens[i]], lb = t->vocab_len[tokens[i + 1]];
            memcpy(buf, t->vocab[tokens[i]], (size_t)la);
            memcpy(buf + la, t->vocab[tokens[i + 1]], (size_t)lb);
            buf[la + lb] = '\0';
            int id = str_lookup(t, buf);
            if (id != -1 && t->vocab_scores[id] > best_score) {
                best_score = t->vocab_scores[id];
                best_id = id;
                best_idx = i;
            }
        }
        if (best_idx == -1) break;
        tokens[best_idx] = best_id;
        for (int i = best_idx + 1; i < n - 1; i++) tokens[i] = tokens[i + 1];
        n--;
    }
    if (eos) tokens[n++] = 2;
    *n_tokens = n;
}

#endif
