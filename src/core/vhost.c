/* Host routing and redirect targets; see vhost.h. */
#include "core/vhost.h"

#include <errno.h>
#include <string.h>

static uint32_t hash(const char *p, size_t len)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (size_t i = 0; i < len; i++)
        h = (h ^ (unsigned char)p[i]) * 16777619u;
    return h;
}

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
    if (len == 0 || len > VHOST_NAME_MAX)
        return -EINVAL;
    uint32_t h = hash(name, len);
    size_t used = 0;
    for (uint32_t i = 0; i <= t->mask; i++)
        used += t->slots[i].site >= 0;
    if (2 * (used + 1) > (size_t)t->mask + 1)
        return -ENOSPC;
    int at = find(t, name, len, h);
    if (at >= 0)
        return -EEXIST;
    t->slots[-1 - at] = (struct vhost_slot){.name = name, .hash = h, .len = (uint16_t)len,
                                            .site = (int16_t)site};
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
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)host.p[i];
        if (c >= 'A' && c <= 'Z')
            c = (unsigned char)(c - 'A' + 'a');
        else if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
                   c == '_' || c == '[' || c == ']' || c == ':'))
            return 0;
        out[i] = (char)c;
    }
    out[n] = '\0';
    return n;
}

int vhost_lookup(const struct vhost_table *t, const char *key, size_t len)
{
    int at = find(t, key, len, hash(key, len));
    if (at >= 0)
        return t->slots[at].site;
    for (size_t i = 1; i < len; i++) { /* "a.b.example.org": ".b.example.org", ".example.org" */
        if (key[i] != '.')
            continue;
        at = find(t, key + i, len - i, hash(key + i, len - i));
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
