/* fuzz_basic: libFuzzer target for the Basic-credential decoder (core/basic.h), which every
 * client with an Authorization header reaches before anything is verified. Asserts the contract
 * (a result fits the buffer, is NUL-terminated, holds a ':' and no NUL) and that a decoded value
 * encodes back to the characters it came from, so the decoder neither invents nor drops bytes.
 * Must not: be linked into the server; it aborts on the first broken invariant.
 * Ownership: libFuzzer owns data; everything here is on the stack. */
#include "core/basic.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define REQUIRE(cond)                                                                              \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "fuzz_basic: %s:%d: %s\n", __FILE__, __LINE__, #cond);                 \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

#define CAP 512 /* as rt/auth.c's buffer */

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* n bytes of in as unpadded base64 into out; its length. */
static size_t encode(const unsigned char *in, size_t n, char *out)
{
    size_t o = 0;
    unsigned acc = 0, bits = 0;
    for (size_t i = 0; i < n; i++) {
        acc = (acc << 8) | in[i];
        bits += 8;
        while (bits >= 6) {
            bits -= 6;
            out[o++] = b64[(acc >> bits) & 63];
        }
    }
    if (bits)
        out[o++] = b64[(acc << (6 - bits)) & 63];
    return o;
}

static void check(const char *p, size_t len)
{
    char out[CAP + 8];
    memset(out, 0x5a, sizeof(out));
    size_t n = basic_credentials((struct http_str){p, len}, out, CAP);
    for (size_t i = CAP; i < sizeof(out); i++)
        REQUIRE(out[i] == 0x5a);
    if (n == 0)
        return;
    REQUIRE(n < CAP && out[n] == '\0');
    REQUIRE(memchr(out, ':', n) && !memchr(out, '\0', n));

    /* The base64 it came from: after "Basic" and its spaces, without the padding. */
    REQUIRE(len >= 6 && strncasecmp(p, "basic ", 6) == 0);
    size_t i = 6, end = len;
    while (i < len && p[i] == ' ')
        i++;
    while (end > i && p[end - 1] == '=')
        end--;
    char again[CAP * 2];
    size_t m = encode((const unsigned char *)out, n, again);
    REQUIRE(m == end - i);
    /* a last character that is not a whole group carries bits the decoder drops */
    size_t whole = m % 4 == 0 ? m : m - 1;
    REQUIRE(memcmp(again, p + i, whole) == 0);

    /* exactly enough room decodes the same; one byte less decodes nothing */
    char tight[CAP];
    REQUIRE(basic_credentials((struct http_str){p, len}, tight, n + 1) == n);
    REQUIRE(memcmp(tight, out, n + 1) == 0);
    REQUIRE(basic_credentials((struct http_str){p, len}, tight, n) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* The value as sent, and the same behind "Basic " (most inputs reach the base64 then). */
    char *p = malloc(size + 6);
    if (!p)
        return 0;
    memcpy(p, data, size);
    check(p, size);
    memcpy(p, "Basic ", 6);
    memcpy(p + 6, data, size);
    check(p, size + 6);
    free(p);
    return 0;
}
