/* fuzz_headers: libFuzzer target for core/rulefile's _headers parser and header rules: the input
 * is the file (its first line also names a request path), compiled as the site does, then
 * applied over a site's own lines; asserts the two compile calls agree and that the result is
 * "Name: value\r\n" lines with a token name and no CR, LF or NUL in any value.
 * Must not: be linked into the server; it aborts on the first broken invariant.
 * Ownership: libFuzzer owns data; the block is malloc'd and freed here. */
#include "core/rulefile.h"
#include "core/token.h"
#include "rule_input.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REQUIRE(cond)                                                                              \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "fuzz_headers: %s:%d: %s\n", __FILE__, __LINE__, #cond);               \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *text = (const char *)data;
    char path[512] = "/";
    size_t pl = rule_input_path(text, size, path, sizeof(path));

    struct rulefile_src src = {RULEFILE_HEADERS, "_headers", text, size, 1, false};
    const struct rulefile *rs;
    size_t need = rulefile_compile(&src, 1, NULL, 0, &rs, NULL, NULL);
    void *mem = malloc(need);
    REQUIRE(rulefile_compile(&src, 1, mem, need, &rs, NULL, NULL) == need);
    static const char base[] = "X-Site: 1\r\nCache-Control: no-cache\r\n";
    char out[16384];
    for (int error = 0; error < 2; error++) {
        size_t n = rulefile_headers(rs, "example.org:8443", 16, path + 1, pl - 1, "text/html",
                                    error, base, sizeof(base) - 1, out, sizeof(out));
        if (n == SIZE_MAX)
            continue;
        REQUIRE(n <= sizeof(out));
        for (size_t k = 0; k < n;) {
            const char *eol = memchr(out + k, '\n', n - k);
            REQUIRE(eol && eol > out + k && eol[-1] == '\r');
            size_t e = (size_t)(eol - out), c = k;
            while (c < e && token_is_tchar((unsigned char)out[c]))
                c++;
            REQUIRE(c > k && out[c] == ':');
            for (size_t v = c; v < e - 1; v++)
                REQUIRE(out[v] != '\r' && out[v] != '\0');
            k = e + 1;
        }
    }
    free(mem);
    return 0;
}
