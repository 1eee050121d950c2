#include "core/accept.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "core/token.h"

/* One list element: a coding or media range, its weight, and whether it had other parameters. */
struct element {
    struct http_str value;
    int q; /* thousandths */
    bool other_params;
};

/* Finds the end of the element starting at p: the next comma outside a quoted string. */
static const char *element_end(const char *p, const char *end)
{
    bool quoted = false;
    for (; p < end; p++) {
        if (quoted && *p == '\\' && p + 1 < end)
            p++;
        else if (*p == '"')
            quoted = !quoted;
        else if (!quoted && *p == ',')
            break;
    }
    return p;
}

/* qvalue = ( "0" [ "." 0*3DIGIT ] ) / ( "1" [ "." 0*3("0") ] ) */
static bool qvalue(const char *p, size_t n, int *q)
{
    if (n == 0 || (p[0] != '0' && p[0] != '1') || (n > 1 && p[1] != '.') || n > 5)
        return false;
    int v = (p[0] - '0') * 1000, scale = 100;
    for (size_t i = 2; i < n; i++, scale /= 10) {
        if (p[i] < '0' || p[i] > '9')
            return false;
        v += (p[i] - '0') * scale;
    }
    if (v > 1000)
        return false;
    *q = v;
    return true;
}

static const char *skip_token(const char *p, const char *end, bool slash)
{
    while (p < end && (token_is_tchar((unsigned char)*p) || (slash && *p == '/')))
        p++;
    return p;
}

/* Parses p[0..end): value *( OWS ";" OWS [ name "=" ( token / quoted-string ) ] ) with OWS
 * around the whole. False for a syntax error or an invalid q; an empty element gives an empty
 * value. slash admits '/' in the value (media ranges). */
static bool parse_element(const char *p, const char *end, bool slash, struct element *el)
{
    el->q = 1000;
    el->other_params = false;
    while (p < end && token_is_ows(*p))
        p++;
    const char *v = p;
    p = skip_token(p, end, slash);
    el->value = (struct http_str){v, (size_t)(p - v)};
    for (;;) {
        while (p < end && token_is_ows(*p))
            p++;
        if (p == end)
            return true;
        if (el->value.len == 0 || *p != ';')
            return false;
        p++;
        while (p < end && token_is_ows(*p))
            p++;
        if (p == end)
            return true;
        if (*p == ';')
            continue;
        const char *name = p;
        p = skip_token(p, end, false);
        size_t name_len = (size_t)(p - name);
        if (name_len == 0 || p == end || *p != '=')
            return false;
        const char *val = ++p;
        if (p < end && *p == '"') {
            for (p++; p < end && *p != '"'; p++) {
                if (*p == '\\' && p + 1 < end)
                    p++;
            }
            if (p == end)
                return false;
            p++;
        } else {
            p = skip_token(p, end, false);
            if (p == val)
                return false;
        }
        if (token_ieq(name, name_len, "q", 1)) {
            if (!qvalue(val, (size_t)(p - val), &el->q))
                return false;
        } else {
            el->other_params = true;
        }
    }
}

/* Advances *p past the next element of the list ending at end that every list here uses: it
 * parses, has a value and no parameter but q. Elements that fail this are skipped (an invalid
 * element is ignored as a whole). False once the list is exhausted. */
static bool next_element(const char **p, const char *end, bool slash, struct element *el)
{
    while (*p < end) {
        const char *stop = element_end(*p, end);
        bool ok = parse_element(*p, stop, slash, el) && el->value.len && !el->other_params;
        *p = stop < end ? stop + 1 : end;
        if (ok)
            return true;
    }
    return false;
}

static const char *const coding_names[ACCEPT_CODINGS] = {"br", "zstd", "gzip"};

size_t accept_encodings(struct http_str accept_encoding, enum accept_coding out[ACCEPT_CODINGS])
{
    int q[ACCEPT_CODINGS] = {-1, -1, -1}, star = -1;
    const char *p = accept_encoding.p, *end = p + accept_encoding.len;

    if (!p)
        return 0;
    struct element el;
    while (next_element(&p, end, false, &el)) {
        int c = -1;
        for (int i = 0; i < ACCEPT_CODINGS; i++) {
            if (http_str_ieq(el.value, coding_names[i]))
                c = i;
        }
        if (http_str_ieq(el.value, "x-gzip"))
            c = ACCEPT_GZIP;
        if (c >= 0 && q[c] < 0)
            q[c] = el.q;
        else if (http_str_ieq(el.value, "*") && star < 0)
            star = el.q;
    }

    size_t n = 0;
    for (int i = 0; i < ACCEPT_CODINGS; i++) {
        if (q[i] < 0)
            q[i] = star > 0 ? star : 0;
        if (q[i] == 0)
            continue;
        /* Insertion by descending q; equal q keeps the br, zstd, gzip order of the loop. */
        size_t j = n++;
        for (; j > 0 && q[out[j - 1]] < q[i]; j--)
            out[j] = out[j - 1];
        out[j] = (enum accept_coding)i;
    }
    return n;
}

const char *accept_coding_name(enum accept_coding coding)
{
    return (unsigned)coding < ACCEPT_CODINGS ? coding_names[coding] : "identity";
}

int accept_quality(struct http_str accept, const char *type)
{
    if (!accept.p)
        return 1000;
    const char *slash = strchr(type, '/');
    if (!slash)
        return 0;
    size_t top = (size_t)(slash - type), sub = strlen(slash + 1);
    const char *p = accept.p, *end = p + accept.len;
    int best_rank = 0, q = 0;

    struct element el;
    while (next_element(&p, end, true, &el)) {
        const char *vs = memchr(el.value.p, '/', el.value.len);
        if (!vs)
            continue;
        size_t vtop = (size_t)(vs - el.value.p), vsub = el.value.len - vtop - 1;
        if (vtop == 0 || vsub == 0 || memchr(vs + 1, '/', vsub))
            continue;
        bool top_star = vtop == 1 && el.value.p[0] == '*';
        bool sub_star = vsub == 1 && vs[1] == '*';
        int rank;
        if (top_star && sub_star)
            rank = 1;
        else if (top_star || !token_ieq(el.value.p, vtop, type, top))
            continue;
        else if (sub_star)
            rank = 2;
        else if (token_ieq(vs + 1, vsub, slash + 1, sub))
            rank = 3;
        else
            continue;
        if (rank > best_rank) {
            best_rank = rank;
            q = el.q;
        }
    }
    return q;
}

bool accept_prefers(struct http_str accept, const char *type, const char *over)
{
    return accept_quality(accept, type) > accept_quality(accept, over);
}

int accept_coding_q(struct http_str accept_encoding, const char *name)
{
    const char *p = accept_encoding.p, *end = p + accept_encoding.len;
    if (!p)
        return 0;
    struct element el;
    while (next_element(&p, end, false, &el)) {
        if (http_str_ieq(el.value, name))
            return el.q;
    }
    return 0;
}

int accept_dictionary(struct http_str value, unsigned char hash[ACCEPT_DICT_HASH])
{
    const char *p = value.p, *end = p + value.len;
    if (!p)
        return -EINVAL;
    while (p < end && *p == ' ')
        p++;
    while (end > p && end[-1] == ' ')
        end--;
    /* 32 bytes are 44 base64 characters, the last one '=' */
    if (end - p != 46 || p[0] != ':' || end[-1] != ':' || end[-2] != '=')
        return -EINVAL;
    p++;
    size_t out = 0;
    for (int i = 0; i < 11; i++, p += 4) {
        int v[4];
        for (int k = 0; k < 4; k++)
            v[k] = i == 10 && k == 3 ? 0 : token_b64(p[k]);
        if (v[0] < 0 || v[1] < 0 || v[2] < 0 || v[3] < 0)
            return -EINVAL;
        uint32_t bits =
            (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 | (uint32_t)v[3];
        hash[out++] = (unsigned char)(bits >> 16);
        hash[out++] = (unsigned char)(bits >> 8);
        if (i < 10)
            hash[out++] = (unsigned char)bits;
        else if (v[2] & 3)
            return -EINVAL; /* non-canonical: bits after the last byte must be zero */
    }
    return 0;
}

bool accept_type_listed(const char *type, const char *list)
{
    size_t tlen = strcspn(type, "; ");
    const char *slash = memchr(type, '/', tlen);
    const char *plus = NULL;
    for (const char *q = type; q < type + tlen; q++) {
        if (*q == '+')
            plus = q;
    }
    if (!slash)
        return false;
    const char *p = list;
    while (*p) {
        while (*p == ' ' || *p == ',')
            p++;
        size_t n = strcspn(p, ", ");
        if (n == 0)
            break;
        if (token_ieq(p, n, type, tlen))
            return true;
        if (n >= 2 && p[n - 1] == '*' && p[n - 2] == '/' &&
            token_ieq(p, n - 1, type, (size_t)(slash - type) + 1))
            return true;
        if (p[0] == '+' && plus && token_ieq(p, n, plus, tlen - (size_t)(plus - type)))
            return true;
        p += n;
    }
    return false;
}

bool accept_path_match(const char *pattern, const char *path, size_t len)
{
    /* Iterative glob with one backtrack point: linear in practice, never recursive. */
    const char *star = NULL;
    size_t i = 0, resume = 0;
    while (i < len) {
        if (*pattern == '*') {
            star = pattern++;
            resume = i;
        } else if (*pattern && *pattern == path[i]) {
            pattern++;
            i++;
        } else if (star) {
            pattern = star + 1;
            i = ++resume;
        } else {
            return false;
        }
    }
    while (*pattern == '*')
        pattern++;
    return *pattern == '\0';
}

int accept_pattern_split(char *arg, char **rest)
{
    size_t i = 0;
    if (arg[0] != '/')
        return -EINVAL;
    for (; arg[i] && arg[i] != ' ' && arg[i] != '\t'; i++) {
        unsigned char c = (unsigned char)arg[i];
        if (c <= 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '?' || c == '#')
            return -EINVAL;
    }
    if (!arg[i])
        return -EINVAL;
    while (arg[i] == ' ' || arg[i] == '\t')
        arg[i++] = '\0';
    if (!arg[i])
        return -EINVAL;
    *rest = arg + i;
    return 0;
}
