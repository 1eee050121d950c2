/* libFuzzer target for the compression-side parsers of core/accept: the input as an
 * Available-Dictionary value (must decode to exactly 32 bytes that re-encode to the input's
 * base64, or be rejected), as an Accept-Encoding for accept_coding_q, and split at its first
 * NUL into a --dictionary pattern and a URL path, and into a media type and a type list. */
#include "core/accept.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void b64(const unsigned char *in, char out[45])
{
    static const char a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t o = 0;
    for (size_t i = 0; i < 32; i += 3) {
        unsigned v = (unsigned)in[i] << 16 | (i + 1 < 32 ? (unsigned)in[i + 1] << 8 : 0) |
                     (i + 2 < 32 ? in[i + 2] : 0);
        out[o++] = a[v >> 18 & 63];
        out[o++] = a[v >> 12 & 63];
        out[o++] = i + 1 < 32 ? a[v >> 6 & 63] : '=';
        out[o++] = i + 2 < 32 ? a[v & 63] : '=';
    }
    out[o] = '\0';
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    memcpy(s, data, size);
    s[size] = '\0';
    struct http_str v = {s, size};

    unsigned char hash[ACCEPT_DICT_HASH];
    if (accept_dictionary(v, hash) == 0) {
        char enc[45];
        b64(hash, enc);
        const char *colon = memchr(s, ':', size);
        assert(colon && (size_t)(s + size - colon) >= 46 && memcmp(colon + 1, enc, 44) == 0);
    }
    int q = accept_coding_q(v, "dcz");
    assert(q >= 0 && q <= 1000);

    const char *second = memchr(s, '\0', size) ? s + strlen(s) + 1 : s + size;
    size_t second_len = (size_t)(s + size - second);
    bool m = accept_path_match(s, second, second_len);
    if (!strchr(s, '*'))
        assert(m == (strlen(s) == second_len && memcmp(s, second, second_len) == 0));
    if (strcmp(s, "*") == 0)
        assert(m);
    (void)accept_type_listed(s, second);
    free(s);
    return 0;
}
