/* libFuzzer target for core/cond: the input is split at '\n' into If-Match, If-None-Match,
 * If-Modified-Since, If-Unmodified-Since and If-Range values (the first byte picks the method).
 * Asserts the results respect RFC 9110 13.2.2 and that a resource's own validators match. */
#include "core/cond.h"
#include "core/date.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Each field in its own exact-size allocation, so ASan sees a read past any of them. */
static struct http_str field(const uint8_t **p, const uint8_t *end, char **owned)
{
    const uint8_t *nl = memchr(*p, '\n', (size_t)(end - *p));
    const uint8_t *stop = nl ? nl : end;
    size_t n = (size_t)(stop - *p);
    *owned = malloc(n ? n : 1);
    memcpy(*owned, *p, n);
    *p = nl ? nl + 1 : end;
    return (struct http_str){n || nl ? *owned : NULL, n};
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    static const enum http_method methods[] = {HTTP_GET, HTTP_HEAD, HTTP_POST, HTTP_PUT};
    struct http_request req;
    memset(&req, 0, sizeof(req));
    req.method = methods[data[0] & 3];
    int64_t mtime = (int64_t)(data[0] >> 2) * 86400 * 365;
    const uint8_t *p = data + 1, *end = data + size;
    char *own[5];
    req.if_match = field(&p, end, &own[0]);
    req.if_none_match = field(&p, end, &own[1]);
    req.if_modified_since = field(&p, end, &own[2]);
    req.if_unmodified_since = field(&p, end, &own[3]);
    struct http_str if_range = field(&p, end, &own[4]);

    char tag[COND_ETAG_MAX];
    uint8_t digest[COND_DIGEST_LEN] = {0};
    memcpy(digest, &size, sizeof(size));
    memcpy(digest + sizeof(size), &mtime, sizeof(mtime));
    size_t tag_len = cond_etag(tag, sizeof(tag), digest, (data[0] & 1) ? "br" : NULL);
    assert(tag_len < sizeof(tag) && strlen(tag) == tag_len);
    struct http_str etag = {tag, tag_len};
    bool get_or_head = req.method == HTTP_GET || req.method == HTTP_HEAD;

    enum cond_result r = cond_evaluate(&req, etag, mtime);
    assert(r == COND_PROCEED || r == COND_NOT_MODIFIED || r == COND_PRECONDITION);
    if (!get_or_head)
        assert(r != COND_NOT_MODIFIED);
    if (get_or_head && !req.if_match.len && !req.if_unmodified_since.len)
        assert(r != COND_PRECONDITION);
    (void)cond_if_range(if_range, etag, mtime);

    /* The resource's own ETag and Last-Modified always validate. */
    struct http_request self;
    memset(&self, 0, sizeof(self));
    self.method = HTTP_GET;
    self.if_match = etag;
    self.if_none_match = etag;
    assert(cond_evaluate(&self, etag, mtime) == COND_NOT_MODIFIED);
    char date[HTTPDATE_LEN + 1];
    httpdate_format(mtime, date);
    struct http_str d = {date, HTTPDATE_LEN};
    self.if_none_match = (struct http_str){NULL, 0};
    self.if_modified_since = d;
    self.if_unmodified_since = d;
    assert(cond_evaluate(&self, etag, mtime) == COND_NOT_MODIFIED);
    assert(cond_if_range(etag, etag, mtime));
    assert(cond_if_range(d, etag, mtime));
    /* A fuzzed If-None-Match that does not contain the tag (nor "*") cannot stop a GET. */
    struct http_str inm = req.if_none_match;
    if (inm.len && !memmem(inm.p, inm.len, tag + 1, tag_len - 2) && !memchr(inm.p, '*', inm.len)) {
        self = req;
        self.if_match = self.if_unmodified_since = (struct http_str){NULL, 0};
        self.if_modified_since = (struct http_str){NULL, 0}; /* a blank INM lets IMS decide */
        assert(cond_evaluate(&self, etag, mtime) == COND_PROCEED);
    }

    for (int i = 0; i < 5; i++)
        free(own[i]);
    return 0;
}
