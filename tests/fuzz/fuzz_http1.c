/* fuzz_http1: libFuzzer target for http1_parse, asserting its contract on every input.
 * Must not: be linked into the server; it aborts on the first broken invariant.
 * Ownership: libFuzzer owns data; the copies made here are freed before returning. */
#include "core/http1.h"
#include "core/path.h"
#include "core/policy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REQUIRE(cond)                                                                              \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "fuzz_http1: %s:%d: %s\n", __FILE__, __LINE__, #cond);                 \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

static void require_inside(struct http_str s, const char *buf, size_t len)
{
    if (s.p == NULL) {
        REQUIRE(s.len == 0);
        return;
    }
    REQUIRE(s.p >= buf && s.p + s.len <= buf + len);
}

/* Parses a private copy of the first n bytes, so that ASan sees any read past them. */
static int parse_prefix(const uint8_t *data, size_t n, struct http_request *req)
{
    char *copy = malloc(n ? n : 1);
    REQUIRE(copy);
    memcpy(copy, data, n);
    int rc = http1_parse(copy, n, req);
    free(copy);
    return rc;
}

static void check_success(const char *buf, size_t len, int rc, const struct http_request *req)
{
    size_t head = (size_t)rc;
    REQUIRE(head > 0 && head <= len && head <= HTTP1_MAX_HEAD);
    REQUIRE(buf[head - 1] == '\n');
    require_inside(req->method_name, buf, head);
    require_inside(req->target, buf, head);
    REQUIRE(req->method_name.len > 0);
    REQUIRE(req->target.len > 0 && req->target.len <= HTTP1_MAX_TARGET);
    for (size_t i = 0; i < req->target.len; i++)
        REQUIRE(req->target.p[i] > 0x20 && req->target.p[i] < 0x7f);
    REQUIRE(req->minor == 0 || req->minor == 1);
    REQUIRE(req->num_headers <= HTTP1_MAX_HEADERS);
    for (size_t i = 0; i < req->num_headers; i++) {
        const struct http_header *h = &req->headers[i];
        require_inside(h->name, buf, head);
        require_inside(h->value, buf, head);
        REQUIRE(h->name.len > 0 && h->value.p != NULL);
        for (size_t j = 0; j < h->value.len; j++) {
            unsigned char c = (unsigned char)h->value.p[j];
            REQUIRE(c == '\t' || (c >= 0x20 && c != 0x7f));
        }
        if (h->value.len) {
            REQUIRE(h->value.p[0] != ' ' && h->value.p[0] != '\t');
            REQUIRE(h->value.p[h->value.len - 1] != ' ' && h->value.p[h->value.len - 1] != '\t');
        }
    }
    const struct http_str interpreted[] = {
        req->host,
        req->if_none_match,
        req->if_match,
        req->if_modified_since,
        req->if_unmodified_since,
        req->range,
        req->if_range,
        req->accept,
        req->accept_encoding,
        req->user_agent,
        req->referer,
    };
    for (size_t i = 0; i < sizeof(interpreted) / sizeof(interpreted[0]); i++)
        require_inside(interpreted[i], buf, head);
    REQUIRE(!(req->has_content_length && req->has_transfer_encoding));
    REQUIRE(req->minor == 1 || !req->has_transfer_encoding);
    REQUIRE(req->minor == 0 || req->has_host);
    REQUIRE(!(req->expect_continue && req->minor == 0));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct http_request req;
    const char *buf = (const char *)data;
    int rc = http1_parse(buf, size, &req);

    if (rc == HTTP1_ERROR) {
        REQUIRE(req.status == 400 || req.status == 414 || req.status == 431 || req.status == 501 ||
                req.status == 505);
        /* What the cleartext port then asks of the same bytes (h2c on): reads none past them,
         * and never sends a real HTTP/1 request line away without its 400. */
        bool not_http1 = policy_not_http1(buf, size);
        if (size >= 4 && memcmp(buf, "GET ", 4) == 0)
            REQUIRE(!not_http1);
        return 0;
    }
    if (rc == HTTP1_PARTIAL) {
        /* A valid prefix has only valid prefixes, and waiting is never right past the limit. */
        REQUIRE(size < HTTP1_MAX_HEAD);
        if (size > 0)
            REQUIRE(parse_prefix(data, size - 1, &req) == HTTP1_PARTIAL);
        REQUIRE(parse_prefix(data, size / 2, &req) == HTTP1_PARTIAL);
        return 0;
    }
    check_success(buf, size, rc, &req);

    /* The head is self-delimiting: parsed alone it gives the same length, and one byte less is
     * a valid prefix, neither an error nor a head. */
    struct http_request again;
    REQUIRE(parse_prefix(data, (size_t)rc, &again) == rc);
    REQUIRE(again.target.len == req.target.len && again.num_headers == req.num_headers);
    REQUIRE(again.keep_alive == req.keep_alive && again.content_length == req.content_length);
    REQUIRE(parse_prefix(data, (size_t)rc - 1, &again) == HTTP1_PARTIAL);

    /* The target of a parsed head goes straight to path_normalize. */
    char out[512];
    struct path_result res;
    int st = path_normalize(req.target, out, sizeof(out), &res);
    REQUIRE(st == 0 || st == 400 || st == 404 || st == 414);
    if (st == 0)
        REQUIRE(res.len <= sizeof(out));
    return 0;
}
