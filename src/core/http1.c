/* http1: the request-head parser; the contract is in http1.h.
 *
 * Every call parses from byte 0: the parser keeps no state, so a partial head is parsed again when
 * more bytes arrive (picohttpparser's choice: heads are small, and a resumable state machine costs
 * more per byte than the occasional re-scan). The scan is one forward pass with table lookups and,
 * on x86-64, sixteen-byte SSE2 blocks over the request-target and field values, where most of the
 * bytes of a head are. Nothing is read at or past buf + len: every access is preceded by a check
 * against end, and block loads only happen while sixteen bytes remain.
 */
#include "core/http1.h"

#include <string.h>

#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "core/token.h"

/* clear_fields zeroes the interpreted fields as the struct's tail from host to referer: a field
 * added after referer, or before host, must be placed between them, and this fails the build
 * for the first case. */
_Static_assert(offsetof(struct http_request, referer) + sizeof(struct http_str) ==
                   sizeof(struct http_request),
               "clear every new field of struct http_request in http1_parse");

/* Internal results of the helpers below; a positive value is an HTTP status. */
#define NEED_MORE 0

/* n bytes at p equal the lower-case literal lit, ignoring ASCII case. */
static inline bool ieq(const char *p, const char *lit, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (token_lower((unsigned char)p[i]) != (unsigned char)lit[i])
            return false;
    return true;
}

static inline uint64_t fold8(const char *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof(v));
    return v | 0x2020202020202020u;
}

static inline uint32_t fold4(const char *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof(v));
    return v | 0x20202020u;
}

/* ieq for what the parser itself compares: lit is lower-case letters, digits and '-', and p holds
 * no control byte but HTAB (field names are tchars; skip_value stops a value at the others). Then
 * setting bit 0x20 of every byte is an exact case fold: it maps only 'A'-'Z' onto a letter, only
 * controls (0x10-0x19, CR) onto a digit or '-' besides those bytes themselves, and HTAB onto ')',
 * which no lit holds. Eight or four bytes compare at once; n is a constant wherever this is
 * inlined, so the loads of lit fold into immediates, and a tail is compared by an overlapping load.
 */
static inline bool ieq_token(const char *p, const char *lit, size_t n)
{
    if (n >= 8) {
        size_t i = 0;
        for (; i + 8 <= n; i += 8)
            if (fold8(p + i) != fold8(lit + i))
                return false;
        return i == n || fold8(p + n - 8) == fold8(lit + n - 8);
    }
    if (n >= 4)
        return fold4(p) == fold4(lit) && fold4(p + n - 4) == fold4(lit + n - 4);
    return ieq(p, lit, n);
}

bool http_str_ieq(struct http_str s, const char *lower_lit)
{
    size_t n = strlen(lower_lit);
    return s.len == n && (n == 0 || ieq(s.p, lower_lit, n));
}

/* First byte in [p, end) that is not visible ASCII (0x21..0x7e), or end. */
static inline const char *skip_target(const char *p, const char *end)
{
#ifdef __SSE2__
    /* b - 0x21 (mod 256) <= 0x5d exactly for the visible bytes; SSE2 has an unsigned max but no
     * unsigned compare, so "t <= 0x5d" is spelt max(t, 0x5d) == 0x5d. */
    const __m128i base = _mm_set1_epi8(0x21), span = _mm_set1_epi8(0x5d);
    while (end - p >= 16) {
        __m128i t = _mm_sub_epi8(_mm_loadu_si128((const __m128i *)p), base);
        unsigned ok = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(_mm_max_epu8(t, span), span));
        if (ok != 0xffff)
            return p + __builtin_ctz(~ok);
        p += 16;
    }
#endif
    while (p < end && (unsigned char)(*p - 0x21) <= 0x5d)
        p++;
    return p;
}

/* First byte in [p, end) that is a control character (including HTAB) or DEL, or end. Field
 * values are SP, VCHAR and obs-text almost always; HTAB is rare enough to take the slow exit. */
static inline const char *skip_value(const char *p, const char *end)
{
#ifdef __SSE2__
    const __m128i sp = _mm_set1_epi8(0x20), del = _mm_set1_epi8(0x7f);
    while (end - p >= 16) {
        __m128i v = _mm_loadu_si128((const __m128i *)p);
        unsigned ge_sp = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(_mm_max_epu8(v, sp), v));
        unsigned is_del = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(v, del));
        unsigned stop = (~ge_sp | is_del) & 0xffff;
        if (stop)
            return p + __builtin_ctz(stop);
        p += 16;
    }
#endif
    while (p < end && (unsigned char)*p >= 0x20 && (unsigned char)*p != 0x7f)
        p++;
    return p;
}

static inline const char *skip_tchar(const char *p, const char *end)
{
    while (p < end && token_tchar[(unsigned char)*p])
        p++;
    return p;
}

/* Zeroes the interpreted fields: the struct's tail from host on (the assertion at the top keeps
 * referer last), all zero when empty. Sixteen bytes a store, the last one overlapping: gcc -O2
 * makes a memset of this size a "rep stos", which cost 5% of a 700-byte parse. */
static inline void clear_fields(struct http_request *req)
{
    char *z = (char *)&req->host;
    const size_t n = sizeof(*req) - offsetof(struct http_request, host);
#ifdef __SSE2__
    _Static_assert(sizeof(struct http_request) - offsetof(struct http_request, host) >= 16,
                   "the last store overlaps the one before it");
    const __m128i zero = _mm_setzero_si128();
#pragma GCC unroll 16
    for (size_t i = 0; i + 16 <= n; i += 16)
        _mm_storeu_si128((__m128i *)(z + i), zero);
    _mm_storeu_si128((__m128i *)(z + n - 16), zero);
#else
    memset(z, 0, n);
#endif
}

/* Consumes a line end (CRLF or LF) at p < end. Returns the byte after it, or NULL with *status
 * set: NEED_MORE when a CR is the last byte, 400 for a CR followed by anything but LF. */
static inline const char *eat_eol(const char *p, const char *end, int *status)
{
    if (*p == '\n')
        return p + 1;
    if (*p != '\r') {
        *status = 400;
        return NULL;
    }
    if (p + 1 == end) {
        *status = NEED_MORE;
        return NULL;
    }
    if (p[1] != '\n') {
        *status = 400;
        return NULL;
    }
    return p + 2;
}

enum http_method http1_method(const char *m, size_t n)
{
    /* Methods are case-sensitive (RFC 9110 9.1): "get" is some other method. */
    switch (n) {
    case 3:
        if (memcmp(m, "GET", 3) == 0)
            return HTTP_GET;
        if (memcmp(m, "PUT", 3) == 0)
            return HTTP_PUT;
        break;
    case 4:
        if (memcmp(m, "HEAD", 4) == 0)
            return HTTP_HEAD;
        if (memcmp(m, "POST", 4) == 0)
            return HTTP_POST;
        break;
    case 5:
        if (memcmp(m, "PATCH", 5) == 0)
            return HTTP_PATCH;
        if (memcmp(m, "TRACE", 5) == 0)
            return HTTP_TRACE;
        break;
    case 6:
        if (memcmp(m, "DELETE", 6) == 0)
            return HTTP_DELETE;
        break;
    case 7:
        if (memcmp(m, "OPTIONS", 7) == 0)
            return HTTP_OPTIONS;
        if (memcmp(m, "CONNECT", 7) == 0)
            return HTTP_CONNECT;
        break;
    }
    return HTTP_OTHER;
}

/* Parses "method SP target SP HTTP/d.d EOL" at p. Returns the byte after the line, or NULL with
 * *status set (NEED_MORE, 400, 414 or 505). Exactly one SP between the parts: lenient splitting
 * is how one server's target becomes another's version (request smuggling through proxies). */
static const char *parse_request_line(const char *p, const char *end, struct http_request *req,
                                      int *status)
{
    static const char proto[] = "HTTP/#.#"; /* '#' stands for one digit */
    const char *start = p;

    if (end - p >= 4 && memcmp(p, "GET ", 4) == 0) { /* most requests: one compare */
        req->method_name = (struct http_str){start, 3};
        req->method = HTTP_GET;
        p += 4;
    } else {
        p = skip_tchar(p, end);
        if (p == end)
            goto need_more;
        if (*p != ' ' || p == start)
            goto bad;
        req->method_name.p = start;
        req->method_name.len = (size_t)(p - start);
        req->method = http1_method(start, req->method_name.len);
        p++;
    }

    start = p;
    p = skip_target(p, end);
    if ((size_t)(p - start) > HTTP1_MAX_TARGET) {
        *status = 414;
        return NULL;
    }
    if (p == end)
        goto need_more;
    if (*p != ' ' || p == start)
        goto bad;
    req->target.p = start;
    req->target.len = (size_t)(p - start);
    p++;

    /* Nearly every request says "HTTP/1.1": one compare, else the general digit check. */
    if (end - p < 8 || memcmp(p, "HTTP/1.1", 8) != 0) {
        for (size_t i = 0; i < sizeof(proto) - 1; i++) {
            if (p + i == end)
                goto need_more;
            char c = p[i];
            if (proto[i] == '#' ? (unsigned char)(c - '0') > 9 : c != proto[i])
                goto bad;
        }
    }
    char major = p[5], minor = p[7];
    p += sizeof(proto) - 1;
    if (p == end)
        goto need_more;
    p = eat_eol(p, end, status);
    if (!p)
        return NULL;
    /* Decided only once the line is well formed, so "HTTP/2.0x" is a 400, not a 505. */
    if (major != '1') {
        *status = 505;
        return NULL;
    }
    req->minor = minor != '0';
    return p;

need_more:
    *status = NEED_MORE;
    return NULL;
bad:
    *status = 400;
    return NULL;
}

/* Content-Length (RFC 9110 8.6): a plain run of digits, nothing else. RFC 9110 lets a recipient
 * accept a list of identical values ("5, 5", made by proxies that merge fields), but
 * intermediaries disagree about such lists and about repeated fields, and any disagreement on a
 * body's length is a request-smuggling vector; nginx answers 400 to both, and so do we (a second
 * field is refused where the fields are read). Returns false for anything but digits, or for a
 * value that does not fit in 64 bits. */
static bool parse_content_length(const char *p, const char *end, uint64_t *out)
{
    uint64_t v = 0;

    if (p == end)
        return false;
    for (; p < end; p++) {
        unsigned d = (unsigned)(unsigned char)(*p - '0');
        if (d > 9 || v > (UINT64_MAX - d) / 10)
            return false;
        v = v * 10 + d;
    }
    *out = v;
    return true;
}

/* Transfer-Encoding: a list of codings, of which only a final "chunked" is understood (the rest
 * is decided in finish()). "chunked" applied twice is malformed (RFC 9112 6.1): 400 at once. */
static int parse_transfer_encoding(const char *p, const char *end, struct http1_fields *f)
{
    for (;;) {
        const char *elem = p;
        const char *comma = memchr(p, ',', (size_t)(end - p));
        const char *stop = comma ? comma : end;
        const char *last = stop;
        while (last > elem && token_is_ows(last[-1]))
            last--;
        if (last == elem)
            return 400; /* empty element: intermediaries read "a,,b" differently */
        bool chunked = last - elem == 7 && ieq_token(elem, "chunked", 7);
        if (chunked) {
            if (f->te_chunked_seen)
                return 400;
            f->te_chunked_seen = true;
        }
        f->te_chunked_last = chunked;
        if (!comma)
            return 0;
        p = comma + 1;
        while (p < end && token_is_ows(*p))
            p++;
    }
}

/* Connection (RFC 9110 7.6.1): a list of option tokens; "close" and "keep-alive" matter. */
static void parse_connection(const char *p, const char *end, struct http1_fields *f)
{
    while (p < end) {
        const char *comma = memchr(p, ',', (size_t)(end - p));
        const char *stop = comma ? comma : end;
        const char *last = stop;
        while (p < last && token_is_ows(*p))
            p++;
        while (last > p && token_is_ows(last[-1]))
            last--;
        size_t n = (size_t)(last - p);
        if (n == 5 && ieq_token(p, "close", 5))
            f->conn_close = true;
        else if (n == 10 && ieq_token(p, "keep-alive", 10))
            f->conn_keep_alive = true;
        if (!comma)
            break;
        p = comma + 1;
    }
}

/* Interprets one field the server acts on. Returns 0 or an HTTP status. Dispatch is on the name
 * length first, so most fields cost one switch and at most two short compares. */
static int interpret(struct http_request *req, struct http1_fields *f, struct http_str name,
                     struct http_str value)
{
    const char *n = name.p, *v = value.p, *vend = value.p + value.len;

    switch (name.len) {
    case 4:
        if (ieq_token(n, "host", 4)) {
            if (req->has_host)
                return 400;
            req->has_host = true;
            req->host = value;
        }
        break;
    case 5:
        if (ieq_token(n, "range", 5))
            req->range = value;
        break;
    case 6:
        if (ieq_token(n, "accept", 6)) {
            if (!req->accept.p)
                req->accept = value;
        } else if (ieq_token(n, "expect", 6)) {
            /* An HTTP/1.0 client cannot mean 100-continue (RFC 9110 10.1.1): ignore it. */
            if (value.len == 12 && ieq_token(v, "100-continue", 12)) {
                if (req->minor)
                    req->expect_continue = true;
            } else {
                req->expect_other = true;
            }
        }
        break;
    case 7:
        if (ieq_token(n, "referer", 7))
            req->referer = value;
        break;
    case 8:
        if (ieq_token(n, "if-match", 8)) {
            if (!req->if_match.p)
                req->if_match = value;
        } else if (ieq_token(n, "if-range", 8)) {
            req->if_range = value;
        }
        break;
    case 10:
        if (ieq_token(n, "connection", 10))
            parse_connection(v, vend, f);
        else if (ieq_token(n, "user-agent", 10))
            req->user_agent = value;
        break;
    case 13:
        if (ieq_token(n, "if-none-match", 13) && !req->if_none_match.p)
            req->if_none_match = value;
        break;
    case 14:
        if (ieq_token(n, "content-length", 14)) {
            uint64_t cl;
            if (req->has_content_length || !parse_content_length(v, vend, &cl))
                return 400;
            if (req->has_transfer_encoding)
                return 400;
            req->has_content_length = true;
            req->content_length = cl;
        }
        break;
    case 15:
        if (ieq_token(n, "accept-encoding", 15) && !req->accept_encoding.p)
            req->accept_encoding = value;
        break;
    case 17:
        if (ieq_token(n, "if-modified-since", 17)) {
            req->if_modified_since = value;
        } else if (ieq_token(n, "transfer-encoding", 17)) {
            /* Chunked framing did not exist in HTTP/1.0, and a body framed two ways is the
             * classic smuggling request (RFC 9112 6.1): both are refused, not guessed at. */
            if (!req->minor || req->has_content_length)
                return 400;
            req->has_transfer_encoding = true;
            return parse_transfer_encoding(v, vend, f);
        }
        break;
    case 19:
        if (ieq_token(n, "if-unmodified-since", 19))
            req->if_unmodified_since = value;
        break;
    }
    return 0;
}

/* Checks that need every field: decided once the blank line is seen. */
static int finish(struct http_request *req, const struct http1_fields *f)
{
    if (req->has_transfer_encoding && !f->te_chunked_last)
        return 501;
    if (req->minor && !req->has_host)
        return 400;
    req->keep_alive = !f->conn_close && (req->minor || f->conn_keep_alive);
    return 0;
}

/* Clears what a parse sets. Only the interpreted fields, not the 1.5 KiB header array: the
 * array is written up to num_headers and nothing beyond it is read. */
static void clear(struct http_request *req)
{
    const struct http_str none = {NULL, 0};
    req->method = HTTP_OTHER;
    req->method_name = none;
    req->target = none;
    req->minor = 0;
    req->status = 0;
    req->num_headers = 0;
    clear_fields(req);
}

int http1_parse(const char *buf, size_t len, struct http_request *req)
{
    /* Past HTTP1_MAX_HEAD bytes nothing can complete a head, so the scan never looks further;
     * capped says that running out of bytes there is an error rather than a reason to wait. */
    bool capped = len >= HTTP1_MAX_HEAD;
    const char *p = buf, *end = buf + (capped ? HTTP1_MAX_HEAD : len);
    struct http1_fields f = {false, false, false, false};
    int status = 0;

    clear(req);
    /* RFC 9112 2.2: empty lines before the request line (left over from a previous body) are
     * skipped. */
    while (p < end && (*p == '\r' || *p == '\n')) {
        p = eat_eol(p, end, &status);
        if (!p)
            goto line_error;
    }
    if (p == end)
        goto line_error;
    p = parse_request_line(p, end, req, &status);
    if (!p)
        goto line_error;

    for (;;) {
        if (p == end)
            goto head_need_more;
        char c = *p;
        if (c == '\r' || c == '\n') {
            p = eat_eol(p, end, &status);
            if (!p)
                goto head_error;
            break;
        }
        if (token_is_ows(c)) /* obs-fold, or whitespace before the first field: RFC 9112 5.2 */
            goto bad;
        if (req->num_headers == HTTP1_MAX_HEADERS) {
            status = 431;
            goto error;
        }

        const char *name = p;
        p = skip_tchar(p, end);
        if (p == end)
            goto head_need_more;
        if (*p != ':' || p == name) /* includes whitespace before the colon */
            goto bad;
        const char *name_end = p++;

        while (p < end && token_is_ows(*p))
            p++;
        const char *value = p;
        for (;;) {
            p = skip_value(p, end);
            if (p == end)
                goto head_need_more;
            if (*p != '\t')
                break;
            p++;
        }
        const char *value_end = p;
        p = eat_eol(p, end, &status); /* also the 400 for NUL and other controls */
        if (!p)
            goto head_error;
        while (value_end > value && token_is_ows(value_end[-1]))
            value_end--;

        struct http_header *h = &req->headers[req->num_headers++];
        h->name.p = name;
        h->name.len = (size_t)(name_end - name);
        h->value.p = value;
        h->value.len = (size_t)(value_end - value);
        status = interpret(req, &f, h->name, h->value);
        if (status)
            goto error;
    }

    status = finish(req, &f);
    if (status)
        goto error;
    return (int)(p - buf);

line_error:
    if (status != NEED_MORE)
        goto error;
    if (!capped)
        return HTTP1_PARTIAL;
    status = 414;
    goto error;
head_need_more:
    status = NEED_MORE;
head_error:
    if (status != NEED_MORE)
        goto error;
    if (!capped)
        return HTTP1_PARTIAL;
    status = 431;
    goto error;
bad:
    status = 400;
error:
    req->status = status;
    return HTTP1_ERROR;
}

/* ---- the structured entry (http1_split_*): the verdicts of the head's text, unwritten ---- */

static int split_fail(struct http_request *req, struct http1_split *sp, int status)
{
    sp->status = status;
    req->status = status;
    return status;
}

int http1_split_start(struct http_request *req, struct http1_split *sp, const char *method,
                      size_t method_len, const char *target, size_t target_len)
{
    clear(req);
    sp->f = (struct http1_fields){false, false, false, false};
    sp->status = 0;
    /* parse_request_line on "METHOD SP target SP HTTP/1.1": a method of tchars only, then a
     * target of visible bytes only (the first other byte ends it, and what follows cannot be
     * " HTTP/1.1" then), 414 when the run of visible bytes it starts with is too long. */
    if (method_len == 0 || skip_tchar(method, method + method_len) != method + method_len)
        return split_fail(req, sp, 400);
    req->method_name = (struct http_str){method, method_len};
    req->method = http1_method(method, method_len);
    const char *stop = skip_target(target, target + target_len);
    if ((size_t)(stop - target) > HTTP1_MAX_TARGET)
        return split_fail(req, sp, 414);
    if (target_len == 0 || stop != target + target_len)
        return split_fail(req, sp, 400);
    req->target = (struct http_str){target, target_len};
    req->minor = 1;
    return 0;
}

int http1_split_field(struct http_request *req, struct http1_split *sp, const char *name,
                      size_t name_len, const char *value, size_t value_len)
{
    if (sp->status)
        return sp->status;
    if (req->num_headers == HTTP1_MAX_HEADERS)
        return split_fail(req, sp, 431);
    /* The name and value are as a line would have carried them (http1.h): nothing to check or
     * trim here. */
    struct http_header *h = &req->headers[req->num_headers++];
    h->name = (struct http_str){name, name_len};
    h->value = (struct http_str){value, value_len};
    int status = interpret(req, &sp->f, h->name, h->value);
    return status ? split_fail(req, sp, status) : 0;
}

int http1_split_end(struct http_request *req, struct http1_split *sp)
{
    if (sp->status)
        return sp->status;
    int status = finish(req, &sp->f);
    return status ? split_fail(req, sp, status) : 0;
}
