/* cors: see cors.h. A static server's resources are readable by anyone who can fetch them, so
 * CORS here only lets the listed origins' scripts see them; it never lets in credentials
 * (no Access-Control-Allow-Credentials: no page of ours depends on cookies). */
#include "core/cors.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "core/accept.h"
#include "core/token.h"

static bool alnum(unsigned char c)
{
    return (c >= '0' && c <= '9') || (unsigned char)(token_lower(c) - 'a') < 26;
}

/* "scheme://host[:port]", lower-cased in place; see cors.h for the bytes each part allows. */
static bool origin_ok(char *o)
{
    size_t i = 0;
    for (; alnum((unsigned char)o[i]) || o[i] == '+' || o[i] == '-' || o[i] == '.'; i++)
        o[i] = (char)token_lower((unsigned char)o[i]);
    if (i == 0 || !alnum((unsigned char)o[0]) || strncmp(o + i, "://", 3) != 0)
        return false;
    i += 3;
    size_t host = i;
    if (o[i] == '[') {
        for (i++; (unsigned char)(token_lower((unsigned char)o[i]) - 'a') < 6 ||
                  (o[i] >= '0' && o[i] <= '9') || o[i] == ':' || o[i] == '.';
             i++)
            o[i] = (char)token_lower((unsigned char)o[i]);
        if (o[i++] != ']' || i == host + 2)
            return false;
    } else {
        for (; alnum((unsigned char)o[i]) || o[i] == '-' || o[i] == '.' || o[i] == '_'; i++)
            o[i] = (char)token_lower((unsigned char)o[i]);
        if (i == host)
            return false;
    }
    if (o[i] == ':') {
        size_t port = ++i;
        while (o[i] >= '0' && o[i] <= '9')
            i++;
        if (i == port || i - port > 5)
            return false;
    }
    return o[i] == '\0' && i <= CORS_ORIGIN_MAX;
}

int cors_rule_parse(char *arg, struct cors_rule *rule)
{
    char *origin;
    if (accept_pattern_split(arg, &origin) != 0 || (strcmp(origin, "*") != 0 && !origin_ok(origin)))
        return -EINVAL;
    *rule = (struct cors_rule){.pattern = arg, .origin = origin, .origin_len = strlen(origin)};
    return 0;
}

struct cors_answer cors_decide(const struct cors_rule *rules, size_t n, enum http_method method,
                               const char *path, size_t path_len, struct http_str origin,
                               struct http_str request_method)
{
    struct cors_answer a = {0};
    bool preflight = method == HTTP_OPTIONS && origin.p && request_method.p;
    if (method != HTTP_GET && method != HTTP_HEAD && !preflight)
        return a;
    /* Methods are case-sensitive (RFC 9110 9.1) and browsers send them upper-cased. */
    if (preflight && !(request_method.len == 3 && memcmp(request_method.p, "GET", 3) == 0) &&
        !(request_method.len == 4 && memcmp(request_method.p, "HEAD", 4) == 0))
        return a;
    for (size_t i = 0; i < n; i++) {
        const struct cors_rule *r = &rules[i];
        if (!accept_path_match(r->pattern, path, path_len))
            continue;
        bool any = r->origin_len == 1 && r->origin[0] == '*';
        if (any || (origin.len == r->origin_len && origin.len <= CORS_ORIGIN_MAX &&
                    memcmp(origin.p, r->origin, origin.len) == 0)) {
            /* "*" answers the same to every origin, so a cache needs no Vary for it; an echo
             * keeps the Vary an earlier origin-specific rule asked for. */
            a.covered = a.covered || !any;
            a.allowed = true;
            a.allow_origin = (struct http_str){r->origin, r->origin_len};
            break;
        }
        a.covered = true;
    }
    a.preflight = preflight && a.allowed;
    return a;
}

size_t cors_fields(const struct cors_answer *a, char *out, size_t cap)
{
    int n = 0;
    if (a->allowed)
        n = snprintf(out, cap, "Access-Control-Allow-Origin: %.*s\r\n%s", (int)a->allow_origin.len,
                     a->allow_origin.p, a->covered ? "Vary: Origin\r\n" : "");
    else if (a->covered)
        n = snprintf(out, cap, "Vary: Origin\r\n");
    return n > 0 && (size_t)n < cap ? (size_t)n : 0;
}

size_t cors_preflight_fields(const struct cors_answer *a, char *out, size_t cap)
{
    size_t n = cors_fields(a, out, cap);
    if (!a->preflight || n == 0)
        return 0;
    /* The request fields the static path reads (conditionals, ranges, dictionaries). Max-Age:
     * a day; browsers cap it lower (Chromium at 2 hours) and that is their call. */
    int m = snprintf(out + n, cap - n,
                     "Access-Control-Allow-Methods: GET, HEAD\r\n"
                     "Access-Control-Allow-Headers: Range, If-Match, If-None-Match, "
                     "If-Modified-Since, If-Unmodified-Since, If-Range, Cache-Control, "
                     "Available-Dictionary\r\n"
                     "Access-Control-Max-Age: 86400\r\n");
    return m > 0 && (size_t)m < cap - n ? n + (size_t)m : 0;
}
