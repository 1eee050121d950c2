/* libFuzzer target for core/accept: the input is used as both an Accept-Encoding and an Accept
 * value. Asserts bounded, duplicate-free, tie-ordered codings and qualities within 0..1000. */
#include "core/accept.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size ? size : 1);
    memcpy(s, data, size);
    struct http_str v = {s, size};

    enum accept_coding out[ACCEPT_CODINGS];
    size_t n = accept_encodings(v, out);
    assert(n <= ACCEPT_CODINGS);
    for (size_t i = 0; i < n; i++) {
        assert((unsigned)out[i] < ACCEPT_CODINGS);
        for (size_t j = 0; j < i; j++)
            assert(out[i] != out[j]);
    }
    /* Without any weight every acceptable coding has q=1, so the fixed order must hold. */
    if (!memchr(s, 'q', size) && !memchr(s, 'Q', size)) {
        for (size_t i = 1; i < n; i++)
            assert(out[i - 1] < out[i]);
    }

    static const char *const types[] = {"text/html", "application/json", "text/plain", "image/png"};
    for (int i = 0; i < 4; i++) {
        int q = accept_quality(v, types[i]);
        assert(q >= 0 && q <= 1000);
        for (int j = 0; j < 4; j++) {
            if (accept_prefers(v, types[i], types[j]))
                assert(!accept_prefers(v, types[j], types[i]));
        }
    }
    free(s);
    return 0;
}
