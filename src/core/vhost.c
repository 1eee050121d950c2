/* Host routing and redirect targets; see vhost.h. */
#include "core/vhost.h"

#include <errno.h>
#include <string.h>

/* FNV-1a over the bytes from the last to the first: the hash of every suffix is a step of the
 * same pass, so a lookup hashes the name once for the exact name and all its wildcards. */
#define HASH_INIT 2166136261u
#define HASH_STEP(h, c) (((h) ^ (unsigned char)(c)) * 16777619u)

static uint32_t hash(const char *p, size_t len)
{
    uint32_t h = HASH_INIT;
    for (size_t i = len; i-- > 0;)
        h = HASH_STEP(h, p[i]);
    return h;
}

/* A Host byte lower-cased, or 0 for one a host name cannot hold. */
/* clang-format off */
static const unsigned char host_byte[256] = {
    ['-'] = '-', ['.'] = '.', ['_'] = '_', ['['] = '[', [']'] = ']', [':'] = ':',
    ['0'] = '0', ['1'] = '1', ['2'] = '2', ['3'] = '3', ['4'] = '4',
    ['5'] = '5', ['6'] = '6', ['7'] = '7', ['8'] = '8', ['9'] = '9',
#define L(c) [c] = c, [c - 'a' + 'A'] = c
    L('a'), L('b'), L('c'), L('d'), L('e'), L('f'), L('g'), L('h'), L('i'), L('j'), L('k'),
    L('l'), L('m'), L('n'), L('o'), L('p'), L('q'), L('r'), L('s'), L('t'), L('u'), L('v'),
    L('w'), L('x'), L('y'), L('z'),
#undef L
};
/* clang-format on */

size_t vhost_slots_for(size_t n)
{
    size_t s = 4;
    while (s < 2 * n)
        s *= 2;
    return s;
}

void vhost_table_init(struct vhost_table *t, struct vhost_slot *slots, size_t nslots)
{
    for (size_t i = 0; i < nslots; i++)
        slots[i] = (struct vhost_slot){.site = -1};
    t->slots = slots;
    t->mask = (uint32_t)nslots - 1;
    t->used = 0;
}

static int find(const struct vhost_table *t, const char *key, size_t len, uint32_t h)
{
    for (uint32_t i = h & t->mask;; i = (i + 1) & t->mask) {
        const struct vhost_slot *s = &t->slots[i];
        if (s->site < 0)
            return -1 - (int)i; /* the free slot where key would go */
        if (s->hash == h && s->len == len && memcmp(s->name, key, len) == 0)
            return (int)i;
    }
}

int vhost_table_add(struct vhost_table *t, const char *name, int site)
{
    if (name[0] == '*' && name[1] == '.')
        name++; /* stored as ".example.org": a lookup tries each suffix that starts at a dot */
    size_t len = strlen(name);
    if (len == 0 || len > VHOST_NAME_MAX || site < 0 || site > VHOST_MAX_SITE)
        return -EINVAL;
    uint32_t h = hash(name, len);
    /* counted, not recounted: a table of 10,000 sites' names was 10,000 scans of 32,768 slots */
    if (2 * ((size_t)t->used + 1) > (size_t)t->mask + 1)
        return -ENOSPC;
    int at = find(t, name, len, h);
    if (at >= 0)
        return -EEXIST;
    t->slots[-1 - at] = (struct vhost_slot){.name = name, .hash = h, .len = len, .site = site};
    t->used++;
    return 0;
}

size_t vhost_key(struct http_str host, char *out)
{
    size_t n = host.len;
    if (!host.p || n == 0)
        return 0;
    if (host.p[0] == '[') { /* an IPv6 literal: through ']' */
        const char *end = memchr(host.p, ']', n);
        if (!end)
            return 0;
        n = (size_t)(end - host.p) + 1;
    } else {
        const char *colon = memchr(host.p, ':', n);
        if (colon)
            n = (size_t)(colon - host.p);
    }
    if (n && host.p[n - 1] == '.')
        n--;
    if (n == 0 || n > VHOST_NAME_MAX)
        return 0;
    unsigned char bad = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = host_byte[(unsigned char)host.p[i]];
        bad |= (unsigned char)(c == 0);
        out[i] = (char)c;
    }
    if (bad)
        return 0;
    out[n] = '\0';
    return n;
}

#define MAX_LABELS 128

int vhost_lookup(const struct vhost_table *t, const char *key, size_t len)
{
    /* One pass from the right: the hash of each suffix that starts at a dot, shortest first. */
    uint32_t h = HASH_INIT, dot_hash[MAX_LABELS];
    size_t dot_at[MAX_LABELS], dots = 0;
    for (size_t i = len; i-- > 0;) {
        h = HASH_STEP(h, key[i]);
        if (key[i] == '.' && i > 0 && dots < MAX_LABELS) {
            dot_hash[dots] = h;
            dot_at[dots++] = i;
        }
    }
    int at = find(t, key, len, h);
    if (at >= 0)
        return t->slots[at].site;
    while (dots-- > 0) { /* "a.b.example.org": ".b.example.org", then ".example.org" */
        size_t i = dot_at[dots];
        at = find(t, key + i, len - i, dot_hash[dots]);
        if (at >= 0)
            return t->slots[at].site;
    }
    return -1;
}

struct http_str vhost_request_host(const struct http_request *req)
{
    struct http_str t = req->target;
    if (t.len > 7 && (t.p[0] == 'h' || t.p[0] == 'H')) {
        size_t skip = t.len > 8 && strncasecmp(t.p, "https://", 8) == 0 ? 8
                      : strncasecmp(t.p, "http://", 7) == 0             ? 7
                                                                        : 0;
        if (skip) {
            size_t end = skip;
            while (end < t.len && t.p[end] != '/' && t.p[end] != '?')
                end++;
            return (struct http_str){t.p + skip, end - skip};
        }
    }
    return req->has_host ? req->host : (struct http_str){NULL, 0};
}

bool vhost_from_matches(const char *from, const char *path, size_t len, struct http_str *rest)
{
    size_t fl = strlen(from);
    if (fl && from[fl - 1] == '*') {
        if (len < fl - 1 || memcmp(from, path, fl - 1) != 0)
            return false;
        *rest = (struct http_str){path + fl - 1, len - (fl - 1)};
        return true;
    }
    *rest = (struct http_str){NULL, 0};
    return fl == len && memcmp(from, path, len) == 0;
}

struct sink {
    char *out;
    size_t cap, at;
    bool full;
};

static void put(struct sink *s, const char *p, size_t n)
{
    if (s->full || n > s->cap - s->at) {
        s->full = true;
        return;
    }
    memcpy(s->out + s->at, p, n);
    s->at += n;
}

/* RFC 3986 pchar, plus '/' between segments and, in a query, '?' and '/'. Everything else
 * (a '\\', a quote, a control byte, a '%' that is data) is percent-encoded. */
static void put_encoded(struct sink *s, const char *p, size_t n, bool query)
{
    static const char hex[] = "0123456789ABCDEF";
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        bool keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    strchr("-._~!$&'()*+,;=:@/", c) || (query && (c == '?' || c == '%'));
        if (keep && c) {
            put(s, (const char *)&c, 1);
        } else {
            char e[3] = {'%', hex[c >> 4], hex[c & 15]};
            put(s, e, 3);
        }
    }
}

size_t vhost_location(const char *to, struct http_str rest, struct http_str query, char *out,
                      size_t cap)
{
    struct sink s = {.out = out, .cap = cap};
    size_t tl = strlen(to);
    if (tl && to[tl - 1] == '*') {
        put(&s, to, tl - 1);
        while (rest.len && rest.p[0] == '/') { /* never "//": TO's '*' follows a '/' */
            rest.p++;
            rest.len--;
        }
        put_encoded(&s, rest.p, rest.len, false);
        if (query.p) {
            put(&s, "?", 1);
            put_encoded(&s, query.p, query.len, true);
        }
    } else {
        put(&s, to, tl);
    }
    return s.full ? 0 : s.at;
}

size_t vhost_canonical(const char *scheme, const char *host, const char *path, size_t len,
                       struct http_str query, char *out, size_t cap)
{
    struct sink s = {.out = out, .cap = cap};
    put(&s, scheme, strlen(scheme));
    put(&s, "://", 3);
    put(&s, host, strlen(host));
    put(&s, "/", 1);
    put_encoded(&s, path, len, false);
    if (query.p) {
        put(&s, "?", 1);
        put_encoded(&s, query.p, query.len, true);
    }
    return s.full ? 0 : s.at;
}
