#include "core/cond.h"

#include <string.h>

#include "core/date.h"
#include "core/token.h"

size_t cond_etag(char *out, size_t cap, const uint8_t digest[COND_DIGEST_LEN], const char *encoding)
{
    static const char hex[] = "0123456789abcdef";
    char tmp[2 * COND_DIGEST_LEN + 1];
    size_t n = 0;

    tmp[n++] = '"';
    for (int i = 0; i < COND_DIGEST_LEN; i++) {
        tmp[n++] = hex[digest[i] >> 4];
        tmp[n++] = hex[digest[i] & 0xf];
    }

    size_t enc = encoding ? strlen(encoding) : 0;
    size_t total = n + (enc ? enc + 1 : 0) + 1;
    /* Copy piecewise, each piece clipped to what is left of cap. */
    const struct {
        const char *p;
        size_t len;
    } pieces[4] = {{tmp, n}, {"-", enc ? 1 : 0}, {encoding, enc}, {"\"", 1}};
    size_t at = 0;
    for (int i = 0; i < 4; i++) {
        if (at < cap && pieces[i].len) {
            size_t room = cap - at;
            memcpy(out + at, pieces[i].p, pieces[i].len < room ? pieces[i].len : room);
        }
        at += pieces[i].len;
    }
    if (total < cap)
        out[total] = '\0';
    return total;
}

/* Header values arrive trimmed from http1, but the evaluation must not depend on it. */
static struct http_str trim(struct http_str s)
{
    if (!s.p)
        return (struct http_str){NULL, 0};
    while (s.len && token_is_ows(s.p[0])) {
        s.p++;
        s.len--;
    }
    while (s.len && token_is_ows(s.p[s.len - 1]))
        s.len--;
    return s;
}

static bool is_star(struct http_str s)
{
    return s.len == 1 && s.p[0] == '*';
}

/* etagc = %x21 / %x23-7E / obs-text */
static bool is_etagc(unsigned char c)
{
    return c == 0x21 || (c >= 0x23 && c != 0x7f);
}

struct tag {
    bool weak;
    struct http_str opaque; /* with its quotes */
};

/* Reads one entity-tag at *pp; false on a syntax error. */
static bool read_tag(const char **pp, const char *end, struct tag *t)
{
    const char *p = *pp;
    t->weak = false;
    if (end - p >= 2 && p[0] == 'W' && p[1] == '/') {
        t->weak = true;
        p += 2;
    }
    if (p == end || *p != '"')
        return false;
    const char *open = p++;
    while (p < end && *p != '"') {
        if (!is_etagc((unsigned char)*p))
            return false;
        p++;
    }
    if (p == end)
        return false;
    p++;
    t->opaque = (struct http_str){open, (size_t)(p - open)};
    *pp = p;
    return true;
}

/* Splits the representation's own ETag; false when it has none or it is malformed, in which
 * case nothing can match it. */
static bool own_tag(struct http_str etag, struct tag *t)
{
    etag = trim(etag);
    if (!etag.len)
        return false;
    const char *p = etag.p, *end = etag.p + etag.len;
    return read_tag(&p, end, t) && p == end;
}

static bool same_opaque(const struct tag *a, const struct tag *b)
{
    return a->opaque.len == b->opaque.len && memcmp(a->opaque.p, b->opaque.p, a->opaque.len) == 0;
}

/* Whether the #entity-tag list names etag, by the strong or the weak comparison. */
static bool list_has(struct http_str list, struct http_str etag, bool strong)
{
    struct tag own, t;
    if (!own_tag(etag, &own) || (strong && own.weak))
        return false;
    const char *p = list.p, *end = list.p + list.len;
    for (;;) {
        while (p < end && (token_is_ows(*p) || *p == ','))
            p++;
        if (p == end || !read_tag(&p, end, &t))
            return false;
        if (same_opaque(&own, &t) && !(strong && t.weak))
            return true;
        while (p < end && token_is_ows(*p))
            p++;
        if (p < end && *p != ',')
            return false;
    }
}

static bool date_value(struct http_str s, int64_t *t)
{
    return httpdate_parse(s.p, s.len, t) == 0;
}

enum cond_result cond_evaluate(const struct http_request *req, struct http_str etag, int64_t mtime)
{
    bool get_or_head = req->method == HTTP_GET || req->method == HTTP_HEAD;
    struct http_str im = trim(req->if_match), ius = trim(req->if_unmodified_since);
    struct http_str inm = trim(req->if_none_match), ims = trim(req->if_modified_since);
    int64_t date;

    if (im.len) {
        if (!is_star(im) && !list_has(im, etag, true))
            return COND_PRECONDITION;
    } else if (ius.len && date_value(ius, &date) && mtime > date) {
        return COND_PRECONDITION;
    }

    if (inm.len) {
        if (is_star(inm) || list_has(inm, etag, false))
            return get_or_head ? COND_NOT_MODIFIED : COND_PRECONDITION;
    } else if (get_or_head && ims.len && date_value(ims, &date) && mtime <= date) {
        return COND_NOT_MODIFIED;
    }
    return COND_PROCEED;
}

bool cond_if_range(struct http_str if_range, struct http_str etag, int64_t mtime)
{
    struct http_str v = trim(if_range);
    if (!v.len)
        return true;
    if (v.p[0] == '"' || (v.len >= 2 && v.p[0] == 'W' && v.p[1] == '/')) {
        struct tag own, t;
        const char *p = v.p, *end = v.p + v.len;
        if (!read_tag(&p, end, &t) || p != end || t.weak)
            return false;
        return own_tag(etag, &own) && !own.weak && same_opaque(&own, &t);
    }
    int64_t date;
    return date_value(v, &date) && date == mtime;
}
