/* check.h - the tests' tiny harness. Include after neo_attn.h.

   CHECK(cond)              counts a check; on failure prints file:line, the expression and
                            the current context (check_context), and counts a failure.
   CHECK_STATUS(expr, st)   the same for a neo_status that must equal st.
   check_context(fmt, ...)  sets a line printed with every later failure (what case runs).
   check_summary(name)      prints the test's count line, "name: N passed, M failed" (N + M checks;
                            the format every test prints and make test adds up); returns 1 if
                            any failed. */
#ifndef NEO_TEST_CHECK_H
#define NEO_TEST_CHECK_H

#include <stdarg.h>
#include <stdio.h>

static long check__n, check__fail;
static char check__ctx[256];

static inline void check_context(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(check__ctx, sizeof check__ctx, fmt, ap);
    va_end(ap);
}

static inline int check__true(int ok, const char *file, int line, const char *expr) {
    check__n++;
    if (!ok) {
        check__fail++;
        fprintf(stderr, "%s:%d: CHECK failed: %s%s%s%s\n", file, line, expr, check__ctx[0] ? "  [" : "",
                check__ctx, check__ctx[0] ? "]" : "");
    }
    return ok;
}

static inline int check__status(neo_status got, neo_status want, const char *file, int line, const char *expr) {
    check__n++;
    if (got != want) {
        check__fail++;
        fprintf(stderr, "%s:%d: CHECK_STATUS failed: %s returned %d (%s), expected %d (%s)%s%s%s\n", file, line,
                expr, (int)got, neo_status_string(got), (int)want, neo_status_string(want),
                check__ctx[0] ? "  [" : "", check__ctx, check__ctx[0] ? "]" : "");
    }
    return got == want;
}

#define CHECK(cond) check__true(!!(cond), __FILE__, __LINE__, #cond)
#define CHECK_STATUS(expr, st) check__status((expr), (st), __FILE__, __LINE__, #expr)

static inline int check_summary(const char *name) {
    printf("%s: %ld passed, %ld failed\n", name, check__n - check__fail, check__fail);
    fflush(stdout);
    return check__fail != 0;
}

#endif
