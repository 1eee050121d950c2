/* libFuzzer target for the issue 28 option values and request fields: the input is tried as a
 * --limit-req, --cors and --early-hints value (each parser must accept or refuse
 * it without reading past it, and what it accepts must be what the header says), as the Origin
 * and Access-Control-Request-Method of a request against fixed CORS rules (nothing but a
 * rule's own origin is ever echoed), and, read as times, as a stream of requests into a bucket
 * (the nginx invariants: the excess never passes the burst, a refusal names a wait of 1 s or
 * more and changes nothing). */
#include "core/cors.h"
#include "core/hints.h"
#include "core/limits.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void parsers(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    memcpy(s, data, size);
    s[size] = '\0';
    struct limit_rate r;
    if (limit_rate_parse(s, &r) == 0)
        assert(r.rate >= 1 && r.rate <= 1000000000u && r.burst <= 100000);
    char *copy = strdup(s);
    struct cors_rule c;
    if (cors_rule_parse(copy, &c) == 0) {
        assert(c.pattern[0] == '/' && c.origin_len == strlen(c.origin) && c.origin_len > 0);
        assert(!strpbrk(c.origin, " \t\r\n,") && c.origin_len <= CORS_ORIGIN_MAX);
    }
    free(copy);
    copy = strdup(s);
    struct hints_rule h;
    if (hints_rule_parse(copy, &h) == 0) {
        assert(h.pattern[0] == '/' && h.link[0] == '<' && !strpbrk(h.link, "\r\n"));
        char out[2048];
        size_t n = hints_fields(&h, 1, HTTP_GET, h.pattern, strlen(h.pattern), out, sizeof(out));
        assert(n == 0 || (n == 6 + strlen(h.link) + 2 && memcmp(out, "Link: ", 6) == 0));
    }
    free(copy);
    free(s);
}

static void origin(const uint8_t *data, size_t size)
{
    static const struct cors_rule rules[] = {
        {"/api/*", "https://a.example", 17},
        {"/fonts/*", "*", 1},
    };
    size_t cut = size ? data[0] % (size + 1) : 0;
    /* private copies of exactly their bytes: ASan flags any read past either */
    char *o = malloc(cut ? cut : 1), *m = malloc(size - cut ? size - cut : 1);
    memcpy(o, data, cut);
    memcpy(m, data + cut, size - cut);
    struct http_str of = {o, cut}, mf = {m, size - cut};
    const char *paths[] = {"/api/x", "/fonts/f.woff2", "/other"};
    for (int method = HTTP_GET; method <= HTTP_OPTIONS; method++) {
        for (size_t p = 0; p < 3; p++) {
            struct cors_answer a =
                cors_decide(rules, 2, (enum http_method)method, paths[p], strlen(paths[p]), of, mf);
            if (a.allowed)
                assert(a.allow_origin.p == rules[0].origin || a.allow_origin.p == rules[1].origin);
            char out[1024];
            size_t n = cors_preflight_fields(&a, out, sizeof(out));
            assert(n == 0 || a.preflight);
            n = cors_fields(&a, out, sizeof(out));
            assert(n < sizeof(out) && !memchr(out, '\0', n));
        }
    }
    free(o);
    free(m);
}

static void bucket(const uint8_t *data, size_t size)
{
    if (size < 4)
        return;
    struct limit_rate r = {
        .rate = 1u + (uint32_t)data[0] * 97, .burst = data[1] % 8, .nodelay = data[2] & 1};
    struct limit_bucket b = {0};
    uint64_t now = 0;
    bool fresh = true;
    for (size_t i = 3; i < size; i++) {
        now += data[i] * 13u;
        struct limit_bucket before = b;
        struct limit_decision d = limit_bucket_take(&b, fresh, &r, now);
        if (d.verdict == LIMIT_REJECT) {
            assert(!fresh && d.retry_after >= 1);
            assert(b.excess == before.excess && b.last_ms == before.last_ms);
        } else {
            assert(b.excess <= r.burst * 1000u && b.last_ms == now);
            assert((d.verdict == LIMIT_DELAY) == (b.excess > 0 && !r.nodelay));
            fresh = false;
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    parsers(data, size);
    origin(data, size);
    bucket(data, size);
    return 0;
}
