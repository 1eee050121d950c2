/* The compiled rules (rulefile.c) matched against a request: the redirect or rewrite, its
 * target with captures, the access rule, the header lines, the user-agent denial; see
 * rulefile.h. */
#include "core/rulefile.h"
#include "core/rulefile_int.h"

#include <string.h>

/* Whether pattern p[0..pn) matches s[0..sn), with backtracking over its wildcards (a splat,
 * and placeholders followed by a literal: "/:a-:b") bounded by *budget steps; captures into m.
 * The recursion is as deep as the pattern has wildcards (RULEFILE_MAX_CAPTURES). A trailing '/'
 * is optional on both sides, and "/x/ *" (a splat after a '/') also matches "/x". */
static bool glob(const char *p, size_t pn, const char *s, size_t sn, struct rulefile_match *m,
                 int *budget)
{
    size_t i = 0, j = 0;
    while (i < pn) {
        if (--*budget < 0)
            return false;
        char ch = p[i];
        bool ph = ch == ':' && i + 1 < pn && name_char((unsigned char)p[i + 1]);
        if (ch == '*' || ph) {
            size_t ne = i + 1;
            while (ph && ne < pn && name_char((unsigned char)p[ne]))
                ne++;
            const char *name = ph ? p + i + 1 : "splat";
            size_t nl = ph ? ne - i - 1 : 5;
            size_t max = j;
            while (max < sn && (ch == '*' || s[max] != '/'))
                max++;
            size_t min = ph ? j + 1 : j;
            uint8_t saved = m->n;
            for (size_t e = max + 1; e-- > min;) {
                if (m->n < RULEFILE_MAX_CAPTURES) {
                    m->cap[m->n].name = name;
                    m->cap[m->n].name_len = (uint16_t)nl;
                    m->cap[m->n].value = s + j;
                    m->cap[m->n].value_len = (uint16_t)(e - j);
                    m->n++;
                }
                if (glob(p + ne, pn - ne, s + e, sn - e, m, budget))
                    return true;
                m->n = saved;
                if (*budget < 0)
                    return false;
            }
            return false;
        }
        if (j == sn) /* the path ended: "/x" for "/x/" or "/x/ *" */
            return (pn - i == 1 && ch == '/') || (pn - i == 2 && ch == '/' && p[i + 1] == '*');
        if (s[j] != ch)
            return false;
        i++;
        j++;
    }
    return j == sn || (sn - j == 1 && s[j] == '/');
}

static const struct rulefile_pat *pat_of(const struct rulefile *rs, uint8_t kind, uint32_t rule)
{
    switch (kind) {
    case RULEFILE_REDIRECTS:
        return &rs->redirects[rule].from;
    case RULEFILE_HEADERS:
        return &rs->headers[rule].path;
    default:
        return &rs->access[rule].path;
    }
}

/* The value of query parameter name in q[0..qn) (raw), whether present. */
static bool query_param(const char *q, size_t qn, const char *name, size_t nl, const char **v,
                        size_t *vl)
{
    for (size_t i = 0; i < qn;) {
        size_t e = i;
        while (e < qn && q[e] != '&')
            e++;
        const char *eq = memchr(q + i, '=', e - i);
        size_t kl = eq ? (size_t)(eq - q - i) : e - i;
        if (kl == nl && memcmp(q + i, name, nl) == 0) {
            *v = eq ? eq + 1 : q + e;
            *vl = eq ? (size_t)(q + e - eq - 1) : 0;
            return true;
        }
        i = e + 1;
    }
    return false;
}

static bool query_ok(const struct rulefile_redirect *r, const char *q, size_t qn,
                     struct rulefile_match *m)
{
    for (uint8_t i = 0; i < r->nquery; i++) {
        const struct rulefile_query *c = &r->query[i];
        const char *v;
        size_t vl;
        if (!query_param(q, qn, c->name, c->name_len, &v, &vl))
            return false;
        if (c->value_len > 1 && c->value[0] == ':') {
            if (m->n < RULEFILE_MAX_CAPTURES + RULEFILE_MAX_QUERY) {
                m->cap[m->n].name = c->value + 1;
                m->cap[m->n].name_len = (uint16_t)(c->value_len - 1);
                m->cap[m->n].value = v;
                m->cap[m->n].value_len = (uint16_t)vl;
                m->n++;
            }
        } else if (vl != c->value_len || memcmp(v, c->value, vl) != 0) {
            return false;
        }
    }
    return true;
}

/* Whether rule `rule` of kind matches (its key already matched); m its captures. */
static bool try_rule(const struct rulefile *rs, uint8_t kind, uint32_t rule, const char *path,
                     size_t len, const char *q, size_t qn, struct rulefile_match *m)
{
    const struct rulefile_pat *p = pat_of(rs, kind, rule);
    int budget = 4096;
    m->n = 0;
    if (!glob(p->text + 1, p->len - 1u, path, len, m, &budget)) /* both without their '/' */
        return false;
    return kind != RULEFILE_REDIRECTS || query_ok(&rs->redirects[rule], q, qn, m);
}

/* Whether p's key is the key klen bytes long of the URL path "/" + path[0..len): a prefix of
 * it, or (klen == len + 2) it + '/'. */
static bool key_eq(const struct rulefile_pat *p, const char *path, size_t len, size_t klen)
{
    if (p->lit != klen)
        return false;
    if (klen - 1 <= len)
        return memcmp(p->text + 1, path, klen - 1) == 0;
    return memcmp(p->text + 1, path, len) == 0 && p->text[klen - 1] == '/';
}

/* What one walk over a path's keys looks for and finds. */
struct walk {
    unsigned kinds;   /* 1 << kind for each kind looked for */
    uint32_t best[3]; /* the first match of redirects and access rules (UINT32_MAX: none) */
    const char *q;    /* the query (redirects' conditions) */
    size_t qn;
    struct rulefile_match *m; /* the redirect's captures, or NULL */
    uint64_t *bits;           /* every header rule matching, or NULL: any_header alone */
    bool any_header;
};

/* Walks the bucket chain from entry e of one key (hash h, klen bytes). */
static void probe(const struct rulefile *rs, bool exact, uint32_t h, uint32_t e, const char *path,
                  size_t len, size_t klen, struct walk *w)
{
    struct rulefile_match t;
    for (; e; e = rs->entry[e - 1].next) {
        const struct rulefile_slot *s = &rs->entry[e - 1];
        uint8_t kind = s->kind;
        if (s->hash != h || s->exact != exact || !(w->kinds & (1u << kind)))
            continue;
        if (kind == RULEFILE_HEADERS ? (!w->bits && w->any_header) || s->rule >= HEADER_BITS
                                     : s->rule >= w->best[kind])
            continue;
        if (!key_eq(pat_of(rs, kind, s->rule), path, len, klen) ||
            !try_rule(rs, kind, s->rule, path, len, w->q, w->qn, &t))
            continue;
        if (kind == RULEFILE_HEADERS) {
            w->any_header = true;
            if (w->bits)
                w->bits[s->rule / 64] |= 1ull << (s->rule % 64);
            continue;
        }
        w->best[kind] = s->rule;
        if (kind == RULEFILE_REDIRECTS && w->m)
            *w->m = t;
    }
}

/* Every key the URL path "/" + path[0..len) may be indexed under: each prefix through a '/',
 * the path + '/' (a "/x/ *" rule matches "/x"), and the exact path (without a trailing '/');
 * the hash is carried along the walk, and an empty bucket costs one load. */
static void walk(const struct rulefile *rs, const char *path, size_t len, struct walk *w)
{
    uint32_t h, before, mask, e;
    if (!rs || !rs->nbuckets)
        return;
    mask = rs->nbuckets - 1;
    before = HASH_INIT;
    h = hash_step(HASH_INIT, '/');
    if ((e = rs->bucket[h & mask]))
        probe(rs, false, h, e, path, len, 1, w);
    for (size_t i = 0; i < len; i++) {
        before = h;
        h = hash_step(h, (unsigned char)path[i]);
        if (path[i] == '/' && (e = rs->bucket[h & mask]))
            probe(rs, false, h, e, path, len, i + 2, w);
    }
    bool slash = len == 0 || path[len - 1] == '/';
    if (!slash) {
        uint32_t hs = hash_step(h, '/');
        if ((e = rs->bucket[hs & mask]))
            probe(rs, false, hs, e, path, len, len + 2, w);
    }
    /* exact_len's key: without a trailing '/', except the root's "/" */
    bool trim = len > 0 && path[len - 1] == '/';
    uint32_t he = trim ? before : h;
    if ((e = rs->bucket[he & mask]))
        probe(rs, true, he, e, path, len, trim ? len : len + 1, w);
}

void rulefile_find(const struct rulefile *rs, const char *path, size_t len, const char *query,
                   size_t qlen, struct rulefile_found *f)
{
    struct walk w = {.kinds = (rs && rs->nredirects ? 1u << RULEFILE_REDIRECTS : 0) |
                              (rs && rs->nheaders ? 1u << RULEFILE_HEADERS : 0) |
                              (rs && rs->naccess ? 1u << RULEFILE_ACCESS : 0),
                     .best = {UINT32_MAX, UINT32_MAX, UINT32_MAX},
                     .q = query,
                     .qn = qlen,
                     .m = &f->m};
    f->m.n = 0;
    if (w.kinds)
        walk(rs, path, len, &w);
    f->redirect = w.best[RULEFILE_REDIRECTS] == UINT32_MAX ? -1 : (int)w.best[RULEFILE_REDIRECTS];
    f->access = w.best[RULEFILE_ACCESS] == UINT32_MAX ? -1 : (int)w.best[RULEFILE_ACCESS];
    f->headers = w.any_header;
}

int rulefile_redirect(const struct rulefile *rs, const char *path, size_t len, const char *query,
                      size_t qlen, struct rulefile_match *m)
{
    struct walk w = {.kinds = 1u << RULEFILE_REDIRECTS,
                     .best = {UINT32_MAX, UINT32_MAX, UINT32_MAX},
                     .q = query,
                     .qn = qlen,
                     .m = m};
    if (!rs || !rs->nredirects)
        return -1;
    walk(rs, path, len, &w);
    return w.best[RULEFILE_REDIRECTS] == UINT32_MAX ? -1 : (int)w.best[RULEFILE_REDIRECTS];
}

int rulefile_access_rule(const struct rulefile *rs, const char *path, size_t len)
{
    struct walk w = {.kinds = 1u << RULEFILE_ACCESS, .best = {UINT32_MAX, UINT32_MAX, UINT32_MAX}};
    if (!rs || !rs->naccess)
        return -1;
    walk(rs, path, len, &w);
    return w.best[RULEFILE_ACCESS] == UINT32_MAX ? -1 : (int)w.best[RULEFILE_ACCESS];
}

bool rulefile_refuses(const struct rulefile_access *a, int family, const uint8_t *addr)
{
    for (uint8_t i = 0; i < a->ndeny; i++)
        if (family && cidr_match(&a->deny[i], family, addr))
            return true;
    if (!a->nallow)
        return false;
    for (uint8_t i = 0; i < a->nallow; i++)
        if (family && cidr_match(&a->allow[i], family, addr))
            return false;
    return true;
}

/* RFC 3986 pchar and '/' stay; in the query part '&', '=', '+' and '#' are escaped too. */
static bool url_safe(unsigned char ch, bool in_query)
{
    if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9'))
        return true;
    if (strchr("-._~!$'()*,;:@/", ch) && ch)
        return true;
    return !in_query && (ch == '&' || ch == '=' || ch == '+');
}

static const struct rulefile_match *find_cap(const struct rulefile_match *m, const char *name,
                                             size_t nl, size_t *at)
{
    for (size_t i = 0; m && i < m->n; i++)
        if (m->cap[i].name_len == nl && memcmp(m->cap[i].name, name, nl) == 0) {
            *at = i;
            return m;
        }
    return NULL;
}

size_t rulefile_target(const struct rulefile_redirect *r, const struct rulefile_match *m,
                       const char *query, size_t qlen, char *out, size_t cap)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t o = 0;
    bool in_query = false;
    for (size_t i = 0; i < r->to_len; i++) {
        char ch = r->to[i];
        size_t k = i + 1, at;
        while (ch == ':' && k < r->to_len && name_char((unsigned char)r->to[k]))
            k++;
        if (ch == ':' && k > i + 1 && find_cap(m, r->to + i + 1, k - i - 1, &at)) {
            const char *v = m->cap[at].value;
            for (size_t q = 0; q < m->cap[at].value_len; q++) {
                unsigned char b = (unsigned char)v[q];
                if (url_safe(b, in_query)) {
                    if (o + 1 >= cap)
                        return 0;
                    out[o++] = (char)b;
                } else {
                    if (o + 3 >= cap)
                        return 0;
                    out[o++] = '%';
                    out[o++] = hex[b >> 4];
                    out[o++] = hex[b & 15];
                }
            }
            i = k - 1;
            continue;
        }
        if (ch == '?')
            in_query = true;
        if (o + 1 >= cap)
            return 0;
        out[o++] = ch;
    }
    if (!memchr(r->to, '?', r->to_len) && !r->nquery && qlen) {
        /* As the client sent it (its escapes kept); a byte no URL holds is escaped. */
        if (o + 1 >= cap)
            return 0;
        out[o++] = '?';
        for (size_t q = 0; q < qlen; q++) {
            unsigned char b = (unsigned char)query[q];
            bool raw = b > ' ' && b < 0x7f && b != '#' && b != '"' && b != '\\';
            if (o + (raw ? 1 : 3) >= cap)
                return 0;
            if (raw) {
                out[o++] = (char)b;
            } else {
                out[o++] = '%';
                out[o++] = hex[b >> 4];
                out[o++] = hex[b & 15];
            }
        }
    }
    /* A capture never makes a local target a reference to another host ("//host"). */
    if (o >= 2 && out[0] == '/' && (out[1] == '/' || out[1] == '\\'))
        return 0;
    out[o] = '\0';
    return o;
}

/* ---- header rules ---- */

struct field {
    const char *name, *value;
    size_t name_len, value_len;
    bool base; /* the response's own line (--header), not a rule's */
};

#define MAX_FIELDS 64

struct fields {
    struct field f[MAX_FIELDS];
    int n;
    char scratch[8192];
    size_t used;
    bool full;
};

static bool name_eq(const char *a, size_t al, const char *b, size_t bl)
{
    if (al != bl)
        return false;
    for (size_t i = 0; i < al; i++)
        if (lower(a[i]) != lower(b[i]))
            return false;
    return true;
}

static char *scratch(struct fields *fs, size_t n)
{
    if (fs->used + n > sizeof(fs->scratch)) {
        fs->full = true;
        return NULL;
    }
    char *p = fs->scratch + fs->used;
    fs->used += n;
    return p;
}

/* A rule's field joins what an earlier rule set of the same name (", "), and replaces the
 * response's own lines of that name (the platforms: _headers override what is ordinarily
 * sent); the response's own lines are added as they are. */
static void field_add(struct fields *fs, const char *name, size_t nl, const char *v, size_t vl,
                      bool base)
{
    int own = -1;
    for (int i = 0; i < fs->n && !base; i++) {
        struct field *f = &fs->f[i];
        if (!name_eq(f->name, f->name_len, name, nl))
            continue;
        if (f->base) {
            own = own < 0 ? i : own;
            continue;
        }
        char *p = scratch(fs, f->value_len + 2 + vl);
        if (!p)
            return;
        memcpy(p, f->value, f->value_len);
        memcpy(p + f->value_len, ", ", 2);
        memcpy(p + f->value_len + 2, v, vl);
        f->value = p;
        f->value_len += 2 + vl;
        return;
    }
    if (own >= 0) { /* the first of the response's own takes the rule's value, the rest go */
        fs->f[own] = (struct field){name, v, nl, vl, false};
        int k = own + 1;
        for (int i = own + 1; i < fs->n; i++)
            if (!fs->f[i].base || !name_eq(fs->f[i].name, fs->f[i].name_len, name, nl))
                fs->f[k++] = fs->f[i];
        fs->n = k;
        return;
    }
    if (fs->n == MAX_FIELDS) {
        fs->full = true;
        return;
    }
    fs->f[fs->n++] = (struct field){name, v, nl, vl, base};
}

static void field_remove(struct fields *fs, const char *name, size_t nl)
{
    int k = 0;
    for (int i = 0; i < fs->n; i++)
        if (!name_eq(fs->f[i].name, fs->f[i].name_len, name, nl))
            fs->f[k++] = fs->f[i];
    fs->n = k;
}

/* "Name: value\r\n" lines into fields, each value's captures substituted when m is given (a
 * capture with a byte a field value may not hold drops the field). */
static void lines_into(struct fields *fs, const char *s, size_t n, const struct rulefile_match *m,
                       bool base)
{
    for (size_t i = 0; i < n;) {
        const char *eol = memchr(s + i, '\n', n - i);
        size_t e = eol ? (size_t)(eol - s) : n, end = e;
        if (end > i && s[end - 1] == '\r')
            end--;
        const char *colon = memchr(s + i, ':', end - i);
        if (colon) {
            size_t nl = (size_t)(colon - s - i), v = nl + 1 + i;
            while (v < end && (s[v] == ' ' || s[v] == '\t'))
                v++;
            const char *val = s + v;
            size_t vl = end - v;
            if (m && m->n && memchr(val, ':', vl)) {
                char *p = fs->scratch + fs->used;
                size_t room = sizeof(fs->scratch) - fs->used, o = 0;
                bool ok = true;
                for (size_t q = 0; q < vl && ok; q++) {
                    size_t k = q + 1, at;
                    while (val[q] == ':' && k < vl && name_char((unsigned char)val[k]))
                        k++;
                    if (val[q] == ':' && k > q + 1 && find_cap(m, val + q + 1, k - q - 1, &at)) {
                        for (size_t c = 0; c < m->cap[at].value_len && ok; c++) {
                            unsigned char b = (unsigned char)m->cap[at].value[c];
                            ok = b >= ' ' && b != 0x7f && o < room;
                            if (ok)
                                p[o++] = (char)b;
                        }
                        q = k - 1;
                        continue;
                    }
                    ok = o < room;
                    if (ok)
                        p[o++] = val[q];
                }
                if (!ok) {
                    fs->full |= o >= room;
                    i = e + 1;
                    continue;
                }
                fs->used += o;
                val = p;
                vl = o;
            }
            field_add(fs, s + i, nl, val, vl, base);
        }
        i = e + 1;
    }
}

static bool type_matches(const struct rulefile_header *h, const char *type)
{
    if (!h->type)
        return true;
    if (!type)
        return false;
    size_t tl = strlen(type);
    if (h->type_len > 0 && h->type[h->type_len - 1] == '*') /* "text/" and a star */
        return tl >= h->type_len - 1u && strncmp(type, h->type, h->type_len - 1u) == 0;
    return tl >= h->type_len && strncmp(type, h->type, h->type_len) == 0 &&
           (tl == h->type_len || type[h->type_len] == ';' || type[h->type_len] == ' ');
}

size_t rulefile_headers(const struct rulefile *rs, const char *host, size_t host_len,
                        const char *path, size_t len, const char *type, bool error,
                        const char *base, size_t base_len, char *out, size_t cap)
{
    if (!rs || !rs->nheaders)
        return SIZE_MAX;
    uint64_t bits[HEADER_BITS / 64] = {0};
    struct walk wk = {.kinds = 1u << RULEFILE_HEADERS, .bits = bits};
    walk(rs, path, len, &wk);
    if (!wk.any_header)
        return SIZE_MAX;
    struct fields fs;
    fs.n = 0;
    fs.used = 0;
    fs.full = false;
    bool any = false, based = false;
    for (uint32_t w = 0; w < HEADER_BITS / 64; w++) {
        for (uint64_t b = bits[w]; b; b &= b - 1) {
            uint32_t i = w * 64 + (uint32_t)__builtin_ctzll(b);
            const struct rulefile_header *r = &rs->headers[i];
            if ((error && !r->errors) || !type_matches(r, type))
                continue;
            if (r->path.host) {
                size_t hl = host_len;
                for (size_t k = 0; k < host_len; k++)
                    if (host[k] == ':') {
                        hl = k;
                        break;
                    }
                if (!host || !name_eq(host, hl, r->path.host, r->path.host_len))
                    continue;
            }
            if (!based) {
                lines_into(&fs, base, base_len, NULL, true);
                based = true;
            }
            any = true;
            for (size_t k = 0; k < r->remove_len;) {
                const char *nl = memchr(r->remove + k, '\n', r->remove_len - k);
                size_t e = nl ? (size_t)(nl - r->remove) : r->remove_len;
                field_remove(&fs, r->remove + k, e - k);
                k = e + 1;
            }
            struct rulefile_match m;
            if (r->expand) {
                m.n = 0;
                int budget = 4096;
                glob(r->path.text + 1, r->path.len - 1u, path, len, &m, &budget);
            }
            lines_into(&fs, r->set, r->set_len, r->expand ? &m : NULL, false);
        }
    }
    if (!any || fs.full)
        return SIZE_MAX;
    size_t o = 0;
    for (int i = 0; i < fs.n; i++) {
        const struct field *f = &fs.f[i];
        size_t need = f->name_len + 2 + f->value_len + 2;
        if (o + need > cap)
            return SIZE_MAX;
        memcpy(out + o, f->name, f->name_len);
        memcpy(out + o + f->name_len, ": ", 2);
        memcpy(out + o + f->name_len + 2, f->value, f->value_len);
        memcpy(out + o + need - 2, "\r\n", 2);
        o += need;
    }
    return o;
}

/* ---- user agents ---- */

/* Case-insensitive glob, unanchored (an implicit '*' at both ends), with the classic one-star
 * backtrack: linear in practice, O(len * pattern) at worst. */
static bool ua_glob(const char *p, const char *s, size_t n)
{
    size_t pn = strlen(p), pi = 0, si = 0, star_p = 0, star_s = 0; /* a star before p */
    for (;;) {
        if (pi == pn)
            return true; /* and one after it */
        if (p[pi] == '*') {
            star_p = ++pi;
            star_s = si;
            continue;
        }
        if (si < n && lower(p[pi]) == lower(s[si])) {
            pi++;
            si++;
            continue;
        }
        if (star_s >= n)
            return false;
        pi = star_p;
        si = ++star_s;
    }
}

bool rulefile_ua_denied(const char *const *patterns, int n, const char *ua, size_t len)
{
    for (int i = 0; i < n; i++)
        if (patterns[i][0] && ua_glob(patterns[i], ua, len))
            return true;
    return false;
}
