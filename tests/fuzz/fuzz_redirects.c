/* fuzz_redirects: libFuzzer target for core/rulefile's _redirects parser and matcher: the input
 * is the file (its first line also names a request path and query), compiled as the site does
 * (sizing call, then filling), then matched; asserts that the two calls agree on the size and
 * that a target never holds a byte a Location may not, nor begins "//".
 * Must not: be linked into the server; it aborts on the first broken invariant.
 * Ownership: libFuzzer owns data; the block is malloc'd and freed here. */
#include "core/rulefile.h"
#include "rule_input.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REQUIRE(cond)                                                                              \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "fuzz_redirects: %s:%d: %s\n", __FILE__, __LINE__, #cond);             \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

static void ignore(void *arg, const char *name, int line, const char *why)
{
    (void)name;
    (void)why;
    (*(int *)arg)++;
    REQUIRE(line > 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *text = (const char *)data;
    char path[512] = "/";
    size_t pl = rule_input_path(text, size, path, sizeof(path));
    const char *q = memchr(path, '?', pl);
    size_t plen = q ? (size_t)(q - path) : pl, qlen = q ? pl - plen - 1 : 0;
    if (plen == 0)
        plen = 1;

    struct rulefile_src src = {RULEFILE_REDIRECTS, "_redirects", text, size, 1, false};
    const struct rulefile *rs;
    size_t need = rulefile_compile(&src, 1, NULL, 0, &rs, NULL, NULL);
    REQUIRE(rs == NULL);
    void *mem = malloc(need);
    int bad = 0;
    REQUIRE(rulefile_compile(&src, 1, mem, need, &rs, ignore, &bad) == need);
    REQUIRE(rs && rs->nbad == (uint32_t)bad);
    struct rulefile_match m;
    int i = rulefile_redirect(rs, path + 1, plen - 1, q ? q + 1 : NULL, qlen, &m);
    if (i >= 0) {
        REQUIRE((uint32_t)i < rs->nredirects);
        char out[4096];
        size_t n = rulefile_target(&rs->redirects[i], &m, q ? q + 1 : NULL, qlen, out, sizeof(out));
        REQUIRE(n < sizeof(out));
        for (size_t k = 0; k < n; k++)
            REQUIRE((unsigned char)out[k] > ' ' && out[k] != 0x7f);
        REQUIRE(!(n >= 2 && out[0] == '/' && (out[1] == '/' || out[1] == '\\')));
    }
    rulefile_access_rule(rs, path + 1, plen - 1);
    free(mem);
    return 0;
}
