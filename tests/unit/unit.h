/* unit: a minimal test harness for the C unit tests (one binary built from every tests/unit/ file).
 * Must not: be linked into the server; it exists only for tests/.
 * Ownership: tests register themselves at load time; unit_guard() copies live until exit. */
#ifndef UNIT_H
#define UNIT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

void unit_register(const char *name, void (*fn)(void));
void unit_fail(const char *file, int line, const char *expr);

/* Copies len bytes so that the last one sits right before a PROT_NONE page: a parser that
 * reads one byte past the end crashes instead of passing by luck (picohttpparser's trick). */
const char *unit_guard(const void *data, size_t len);
/* Hex to bytes ("8286 8441" -> 82 86 84 41, spaces ignored) into out; returns the length. */
size_t unit_unhex(const char *hex, uint8_t *out);

/* unit_guard() of a NUL-terminated string, without its NUL. */
const char *unit_guard_str(const char *s);

#define TEST(name)                                                                                 \
    static void name(void);                                                                        \
    __attribute__((constructor)) static void register_##name(void)                                 \
    {                                                                                              \
        unit_register(#name, name);                                                                \
    }                                                                                              \
    static void name(void)

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond))                                                                               \
            unit_fail(__FILE__, __LINE__, #cond);                                                  \
    } while (0)

#define CHECK_INT(a, b)                                                                            \
    do {                                                                                           \
        long long a_ = (long long)(a), b_ = (long long)(b);                                        \
        if (a_ != b_) {                                                                            \
            fprintf(stderr, "  %s = %lld, expected %lld\n", #a, a_, b_);                           \
            unit_fail(__FILE__, __LINE__, #a " == " #b);                                           \
        }                                                                                          \
    } while (0)

#define CHECK_MEM(p, n, s)                                                                         \
    do {                                                                                           \
        size_t n_ = (n);                                                                           \
        if (n_ != strlen(s) || memcmp((p), (s), n_) != 0) {                                        \
            fprintf(stderr, "  got \"%.*s\", expected \"%s\"\n", (int)n_, (const char *)(p), (s)); \
            unit_fail(__FILE__, __LINE__, #p " == " #s);                                           \
        }                                                                                          \
    } while (0)

#endif
