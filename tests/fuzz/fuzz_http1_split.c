/* fuzz_http1_split: libFuzzer target holding http1_split_* (the structured entry HTTP/2 uses) to
 * http1_parse: for a method, a target and fields as an HTTP/2 request delivers them, both must
 * give the same verdict and the same struct http_request as the HTTP/1.1 head text h2.c writes
 * for that request ("METHOD target HTTP/1.1", then "name: value" lines).
 * Input: LF-separated lines: the method, the target, then one field per line split at its first
 * colon. Fields that break RFC 9113 8.2.1 (which nghttp2 drops before delivering) are left out.
 * Must not: be linked into the server; it aborts on the first difference.
 * Ownership: libFuzzer owns data; the copies made here are freed before returning. */
#include "core/http1.h"
#include "core/token.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REQUIRE(cond)                                                                              \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "fuzz_http1_split: %s:%d: %s\n", __FILE__, __LINE__, #cond);           \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

#define MAX_FIELDS 80
#define TEXT_MAX 16000 /* below HTTP1_MAX_HEAD: h2.c cuts a longer head short itself (431) */

static bool same(struct http_str a, struct http_str b)
{
    return a.len == b.len && (a.len == 0 || memcmp(a.p, b.p, a.len) == 0);
}

/* What nghttp2 lets through to on_header: a name of tchars (lower case, but case does not
 * matter to either parser), a value of no control byte but HTAB, no DEL, no leading or trailing
 * SP or HTAB. */
static bool deliverable(const char *n, size_t nl, const char *v, size_t vl)
{
    if (nl == 0)
        return false;
    for (size_t i = 0; i < nl; i++)
        if (!token_tchar[(unsigned char)n[i]])
            return false;
    for (size_t i = 0; i < vl; i++) {
        unsigned char c = (unsigned char)v[i];
        if ((c < 0x20 && c != '\t') || c == 0x7f)
            return false;
    }
    return vl == 0 || !(token_is_ows(v[0]) || token_is_ows(v[vl - 1]));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *in = malloc(size + 1);
    REQUIRE(in);
    memcpy(in, data, size);
    in[size] = '\n';
    const char *line[2 + MAX_FIELDS];
    size_t len[2 + MAX_FIELDS], nl = 0;
    for (size_t at = 0; at <= size && nl < 2 + MAX_FIELDS;) {
        const char *lf = memchr(in + at, '\n', size + 1 - at);
        line[nl] = in + at;
        len[nl++] = (size_t)(lf - (in + at));
        at = (size_t)(lf - in) + 1;
    }
    if (nl < 2 || memchr(line[0], '\r', len[0])) { /* nghttp2: a method is tchars */
        free(in);
        return 0;
    }

    /* The fields, and the text h2.c writes for them. */
    struct {
        const char *n, *v;
        size_t nl, vl;
    } f[MAX_FIELDS];
    size_t nf = 0;
    char *text = malloc(TEXT_MAX);
    REQUIRE(text);
    size_t tl = 0;
#define PUT(p, n)                                                                                  \
    do {                                                                                           \
        if (tl + (n) > TEXT_MAX)                                                                   \
            goto out;                                                                              \
        memcpy(text + tl, (p), (n));                                                               \
        tl += (n);                                                                                 \
    } while (0)
    PUT(line[0], len[0]);
    PUT(" ", 1);
    PUT(line[1], len[1]);
    PUT(" HTTP/1.1\r\n", 11);
    for (size_t i = 2; i < nl; i++) {
        const char *colon = memchr(line[i], ':', len[i]);
        if (!colon)
            continue;
        size_t n = (size_t)(colon - line[i]);
        const char *v = colon + 1;
        size_t vl = len[i] - n - 1;
        if (!deliverable(line[i], n, v, vl))
            continue;
        f[nf].n = line[i], f[nf].nl = n, f[nf].v = v, f[nf].vl = vl;
        nf++;
        PUT(line[i], n);
        PUT(": ", 2);
        PUT(v, vl);
        PUT("\r\n", 2);
    }
    PUT("\r\n", 2);

    static struct http_request a, b;
    int rc = http1_parse(text, tl, &a);
    REQUIRE(rc != HTTP1_PARTIAL);
    struct http1_split sp;
    int st = http1_split_start(&b, &sp, line[0], len[0], line[1], len[1]);
    for (size_t i = 0; i < nf; i++)
        REQUIRE(http1_split_field(&b, &sp, f[i].n, f[i].nl, f[i].v, f[i].vl) == sp.status);
    st = http1_split_end(&b, &sp);
    REQUIRE(st == sp.status && (st == 0 || st == b.status));
    if (rc < 0) {
        REQUIRE(st == a.status);
        goto out;
    }
    REQUIRE(st == 0 && rc == (int)tl);
    REQUIRE(a.method == b.method && same(a.method_name, b.method_name));
    REQUIRE(same(a.target, b.target) && a.minor == b.minor);
    REQUIRE(a.num_headers == b.num_headers);
    for (size_t i = 0; i < a.num_headers; i++)
        REQUIRE(same(a.headers[i].name, b.headers[i].name) &&
                same(a.headers[i].value, b.headers[i].value));
    REQUIRE(same(a.host, b.host) && a.has_host == b.has_host);
    REQUIRE(a.content_length == b.content_length && a.has_content_length == b.has_content_length);
    REQUIRE(a.has_transfer_encoding == b.has_transfer_encoding && a.keep_alive == b.keep_alive);
    REQUIRE(a.expect_continue == b.expect_continue && a.expect_other == b.expect_other);
    REQUIRE(same(a.if_none_match, b.if_none_match) && same(a.if_match, b.if_match));
    REQUIRE(same(a.if_modified_since, b.if_modified_since) &&
            same(a.if_unmodified_since, b.if_unmodified_since));
    REQUIRE(same(a.range, b.range) && same(a.if_range, b.if_range));
    REQUIRE(same(a.accept, b.accept) && same(a.accept_encoding, b.accept_encoding));
    REQUIRE(same(a.user_agent, b.user_agent) && same(a.referer, b.referer));
out:
    free(text);
    free(in);
    return 0;
}
