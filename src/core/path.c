/* path: request-target to a relative path below the root; the contract is in path.h.
 *
 * Decoding and normalisation happen in one pass: percent escapes are decoded first and the
 * decoded bytes are then split on '/', so "%2e%2e" is ".." and "%2F" separates segments (a
 * decoded separator that was not treated as one is how "..%2f" climbs out of a root in servers
 * that normalise before decoding). Each segment is judged when it ends: empty and "." vanish, ".."
 * drops the last kept segment (never more than there are), and a hidden segment answers 404 at
 * once, even if a later ".." would remove it, so "/.git/../x" is refused rather than reasoned
 * about.
 */
#include "core/path.h"

#include <string.h>

static inline int hex_value(unsigned char c)
{
    if ((unsigned char)(c - '0') <= 9)
        return c - '0';
    c |= 0x20;
    if ((unsigned char)(c - 'a') <= 5)
        return c - 'a' + 10;
    return -1;
}

/* Bytes of a plain target (see plain_target): 1 for visible ASCII but '#', '%', '.', '/' and
 * '?'; 2 for '.' and '/', plain unless they follow a '/'. */
static const unsigned char plain[256] = {
    [0x21 ... 0x22] = 1, /* ! " */
    [0x24] = 1,          /* $ */
    [0x26 ... 0x2d] = 1, /* & ' ( ) * + , - */
    ['.'] = 2,           /* . */
    ['/'] = 2,           /* / */
    [0x30 ... 0x3e] = 1, /* 0-9 : ; < = > */
    [0x40 ... 0x7e] = 1, /* @ A-Z [ \ ] ^ _ ` a-z { | } ~ */
};

/* Most targets need no decoding and no normalising: "/", then segments of visible bytes without
 * '%', none of them empty or starting with '.'. Their normal form is the target without its
 * leading and any trailing '/', copied in one go, and a query after '?' when there is one.
 * Returns false, having written nothing, for anything else: the general pass below decides.
 * The inner loops pass the bytes that are plain wherever they stand; a '.' or '/' only needs
 * a look at the byte before it (p[0] is the leading '/'). */
static bool plain_target(const char *p, size_t len, char *out, size_t cap,
                         struct path_result *result)
{
    size_t i = 1;
    for (;;) {
        /* Four at a time: the and of four classes is 1 only when all four are 1 (2 & 1 == 0). */
        while (i + 4 <= len &&
               (plain[(unsigned char)p[i]] & plain[(unsigned char)p[i + 1]] &
                plain[(unsigned char)p[i + 2]] & plain[(unsigned char)p[i + 3]]) == 1)
            i += 4;
        while (i < len && plain[(unsigned char)p[i]] == 1)
            i++;
        if (i == len)
            break;
        unsigned char c = (unsigned char)p[i];
        if (plain[c] == 2) {
            if (p[i - 1] == '/')
                return false;
            i++;
            continue;
        }
        if (c != '?' || memchr(p + i, '#', len - i))
            return false;
        break;
    }
    bool after_slash = p[i - 1] == '/';
    size_t n = i - 1;
    if (after_slash && n > 0)
        n--; /* the trailing '/' */
    if (n > cap)
        return false;
    memcpy(out, p + 1, n);
    result->len = n;
    result->trailing_slash = after_slash;
    if (i < len)
        result->query = (struct http_str){p + i + 1, len - i - 1};
    return true;
}

/* The scheme is case-insensitive (RFC 3986 3.1); s holds at least n bytes. */
static bool has_prefix_ci(const char *s, size_t len, const char *lit, size_t n)
{
    if (len < n)
        return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if ((unsigned char)(c - 'A') < 26)
            c |= 0x20;
        if (c != (unsigned char)lit[i])
            return false;
    }
    return true;
}

static int general_pass(const char *p, size_t len, char *out, size_t cap,
                        struct path_result *result);

int path_normalize(struct http_str target, char *out, size_t cap, struct path_result *result)
{
    const char *p = target.p;
    size_t len = target.len;

    result->len = 0;
    result->trailing_slash = false;
    result->asterisk = false;
    result->query = (struct http_str){NULL, 0};

    if (!p || len == 0)
        return 400;
    if (len == 1 && p[0] == '*') {
        result->asterisk = true;
        return 0;
    }
    if (p[0] == '/' && plain_target(p, len, out, cap, result))
        return 0;
    return general_pass(p, len, out, cap, result);
}

/* Decoding and normalising byte by byte. Out of line, so that a plain target does not pay for
 * this pass's registers and frame. */
__attribute__((noinline)) static int general_pass(const char *p, size_t len, char *out, size_t cap,
                                                  struct path_result *result)
{
    /* A user agent never sends a fragment (RFC 9112 3.2); one that does is not a browser. */
    if (memchr(p, '#', len))
        return 400;
    const char *q = memchr(p, '?', len);
    if (q) {
        result->query.p = q + 1;
        result->query.len = (size_t)(p + len - (q + 1));
        len = (size_t)(q - p);
    }

    /* Absolute-form (RFC 9112 3.2.2): the authority is the Host the server already has, so only
     * the path matters here. "http://host" with no path names the root. */
    size_t skip = 0;
    if (has_prefix_ci(p, len, "http://", 7))
        skip = 7;
    else if (has_prefix_ci(p, len, "https://", 8))
        skip = 8;
    if (skip) {
        const char *slash = memchr(p + skip, '/', len - skip);
        size_t path_at = slash ? (size_t)(slash - p) : len;
        if (path_at == skip)
            return 400; /* no authority */
        p += path_at;
        len -= path_at;
        if (len == 0) {
            result->trailing_slash = true;
            return 0;
        }
    }
    if (len == 0 || p[0] != '/')
        return 400;

    size_t olen = 0;              /* bytes of kept segments in out */
    size_t seg = 0;               /* where the current segment starts in out */
    size_t n = 0;                 /* decoded bytes in the current segment, written while they fit */
    unsigned char c0 = 0, c1 = 0; /* its first two bytes, for the dot tests even when n > cap */
    bool dir = true; /* the last segment was empty, "." or "..": the path names a directory */

    for (size_t i = 1; i <= len; i++) {
        unsigned char c;
        if (i == len) {
            c = '/'; /* the end closes the last segment like a separator */
        } else {
            c = (unsigned char)p[i];
            if (c <= 0x20 || c == 0x7f)
                return 400; /* not a request-target byte; the parser never passes one */
            if (c == '%') {
                if (len - i < 3)
                    return 400;
                int hi = hex_value((unsigned char)p[i + 1]);
                int lo = hex_value((unsigned char)p[i + 2]);
                if (hi < 0 || lo < 0)
                    return 400;
                c = (unsigned char)(hi << 4 | lo);
                if (c == 0)
                    return 400; /* a NUL ends the name the kernel sees: never a file */
                i += 2;
            }
        }

        if (c != '/') {
            if (n == 0)
                c0 = c;
            else if (n == 1)
                c1 = c;
            if (seg + n < cap)
                out[seg + n] = (char)c;
            n++;
            continue;
        }

        if (n == 0 || (n == 1 && c0 == '.')) {
            dir = true;
        } else if (n == 2 && c0 == '.' && c1 == '.') {
            const char *last = memrchr(out, '/', olen);
            olen = last ? (size_t)(last - out) : 0;
            dir = true;
        } else {
            if (seg + n > cap)
                return 414;
            if (c0 == '.' && !(olen == 0 && n == 11 && memcmp(out, ".well-known", 11) == 0))
                return 404;
            if (olen)
                out[olen] = '/';
            olen = seg + n;
            dir = false;
        }
        seg = olen ? olen + 1 : 0;
        n = 0;
    }

    result->len = olen;
    result->trailing_slash = dir;
    return 0;
}

/* RFC 3986 pchar without '%': unreserved, sub-delims, ':' and '@' (1); what a query may keep
 * as well (2: '/', '?', and '%' because the query is still in the client's encoding). Laid
 * out by hand, the 2s on a line of their own. */
// clang-format off
static const unsigned char location_safe[256] = {
    ['!'] = 1, ['$'] = 1, ['&' ... '.'] = 1, ['0' ... ';'] = 1, ['='] = 1,
    ['@' ... 'Z'] = 1, ['_'] = 1, ['a' ... 'z'] = 1, ['~'] = 1,
    ['/'] = 2, ['?'] = 2, ['%'] = 2,
};
// clang-format on

struct sink {
    char *out;
    size_t at, cap;
    bool full;
};

/* Appends p, percent-encoding every byte whose class is not 1..keep. */
static void put_encoded(struct sink *s, const char *p, size_t len, unsigned keep)
{
    static const char hex[] = "0123456789ABCDEF";
    for (size_t i = 0; i < len && !s->full; i++) {
        unsigned char c = (unsigned char)p[i];
        unsigned k = location_safe[c];
        bool keep_c = k && k <= keep;
        if (s->cap - s->at < (keep_c ? 1u : 3u)) {
            s->full = true;
        } else if (keep_c) {
            s->out[s->at++] = (char)c;
        } else {
            s->out[s->at++] = '%';
            s->out[s->at++] = hex[c >> 4];
            s->out[s->at++] = hex[c & 15];
        }
    }
}

size_t path_location(const char *path, size_t len, struct http_str query, char *out, size_t cap)
{
    return path_location_as(path, len, true, query, out, cap);
}

size_t path_location_as(const char *path, size_t len, bool slash, struct http_str query, char *out,
                        size_t cap)
{
    struct sink s = {.out = out, .cap = cap};
    /* The path's '/' are separators between segments (a decoded "%2F" became one): kept. */
    put_encoded(&s, "/", 1, 2);
    for (size_t i = 0; i < len;) {
        const char *sep = memchr(path + i, '/', len - i);
        size_t n = sep ? (size_t)(sep - (path + i)) : len - i;
        put_encoded(&s, path + i, n, 1);
        if (sep || slash)
            put_encoded(&s, "/", 1, 2);
        i += n + 1;
    }
    if (query.p) {
        put_encoded(&s, "?", 1, 2);
        put_encoded(&s, query.p, query.len, 2);
    }
    return s.full ? 0 : s.at;
}
