/* fuzz_path: libFuzzer target for path_normalize, asserting that what it accepts is safe.
 * Must not: be linked into the server; it aborts on the first broken invariant.
 * Ownership: libFuzzer owns data; buffers allocated here are freed before returning. */
#include "core/path.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REQUIRE(cond)                                                                              \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "fuzz_path: %s:%d: %s\n", __FILE__, __LINE__, #cond);                  \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

/* out[0, len) is a relative path that cannot leave the root or name a hidden file. */
static void check_safe(const char *out, size_t len)
{
    REQUIRE(memchr(out, '\0', len) == NULL);
    if (len == 0)
        return;
    REQUIRE(out[0] != '/' && out[len - 1] != '/');
    size_t start = 0;
    for (size_t i = 0; i <= len; i++) {
        if (i < len && out[i] != '/')
            continue;
        size_t n = i - start;
        const char *seg = out + start;
        REQUIRE(n > 0); /* no "//" */
        REQUIRE(!(n == 1 && seg[0] == '.'));
        REQUIRE(!(n == 2 && seg[0] == '.' && seg[1] == '.'));
        if (seg[0] == '.')
            REQUIRE(start == 0 && n == 11 && memcmp(seg, ".well-known", 11) == 0);
        start = i + 1;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    /* The first byte picks the capacity, small enough that 414 and its edges are reached. */
    size_t cap = data[0] < 0xf0 ? data[0] : 4096;
    const char *target = (const char *)data + 1;
    size_t len = size - 1;

    char *out = malloc(cap ? cap : 1);
    REQUIRE(out);
    struct path_result res;
    int rc = path_normalize((struct http_str){len ? target : NULL, len}, out, cap, &res);
    REQUIRE(rc == 0 || rc == 400 || rc == 404 || rc == 414);
    if (rc != 0) {
        free(out);
        return 0;
    }
    REQUIRE(res.len <= cap);
    check_safe(out, res.len);
    if (res.asterisk)
        REQUIRE(len == 1 && target[0] == '*' && res.len == 0);
    if (res.len == 0 && !res.asterisk)
        REQUIRE(res.trailing_slash);
    if (res.query.p) {
        REQUIRE(res.query.p > target && res.query.p + res.query.len == target + len);
        REQUIRE(res.query.p[-1] == '?');
    } else {
        REQUIRE(res.query.len == 0 && memchr(target, '?', len) == NULL);
    }

    /* Idempotent: the result, escaped again and given back as "/...", comes out unchanged. */
    size_t elen = 1 + res.len * 3;
    char *escaped = malloc(elen);
    char *again = malloc(res.len ? res.len : 1);
    REQUIRE(escaped && again);
    size_t e = 0;
    escaped[e++] = '/';
    for (size_t i = 0; i < res.len; i++) {
        unsigned char c = (unsigned char)out[i];
        if (c == '/' || (c > 0x20 && c < 0x7f && c != '%' && c != '?' && c != '#')) {
            escaped[e++] = (char)c;
        } else {
            static const char hex[] = "0123456789ABCDEF";
            escaped[e++] = '%';
            escaped[e++] = hex[c >> 4];
            escaped[e++] = hex[c & 15];
        }
    }
    struct path_result res2;
    int rc2 = path_normalize((struct http_str){escaped, e}, again, res.len, &res2);
    REQUIRE(rc2 == 0);
    REQUIRE(res2.len == res.len && memcmp(again, out, res.len) == 0);
    REQUIRE(res2.query.p == NULL);
    free(again);
    free(escaped);
    free(out);
    return 0;
}
