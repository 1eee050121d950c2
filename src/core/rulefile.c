/* _redirects, _headers and access rules, parsed and compiled into one block; rulematch.c
 * matches requests against it. See rulefile.h. */
#include "core/rulefile.h"
#include "core/rulefile_int.h"

#include <string.h>

#include "core/token.h"

/* The block is filled front to back by a bump allocator that counts past its end: the sizing
 * call and the filling call run the same code, and nothing is written beyond cap. */
struct arena {
    char *base;
    size_t cap, used;
};

static void *take(struct arena *a, size_t n, size_t align)
{
    size_t at = (a->used + align - 1) & ~(align - 1);
    a->used = at + n;
    return a->base && a->used <= a->cap ? a->base + at : NULL;
}

static const char *keep(struct arena *a, const char *s, size_t n)
{
    char *p = take(a, n + 1, 1);
    if (!p)
        return NULL;
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

struct compiler {
    struct arena a;
    bool writing; /* every take() so far fit: the rules may be stored */
    struct rulefile *rs;
    struct rulefile_redirect *redirects;
    struct rulefile_header *headers;
    struct rulefile_access *access;
    size_t room[3]; /* each kind's array length */
    rulefile_report_fn *report;
    void *arg;
    const char *name;
    int line;
    bool options; /* a configuration's header line may say type= and status=any */
};

static void bad(struct compiler *c, const char *why)
{
    if (c->report)
        c->report(c->arg, c->name, c->line, why);
    if (c->rs)
        c->rs->nbad++;
}

static bool is_space(char ch)
{
    return ch == ' ' || ch == '\t' || ch == '\r' || ch == '\v' || ch == '\f';
}

static int hexval(char ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F')
        return ch - 'A' + 10;
    return -1;
}

static uint32_t hash_of(const char *s, size_t n)
{
    uint32_t h = HASH_INIT;
    for (size_t i = 0; i < n; i++)
        h = hash_step(h, (unsigned char)s[i]);
    return h;
}

/* Compiles a pattern token (a path, or for _headers https://HOST/path): decoded (%XX, as the
 * request's path is), its literal prefix found. NULL when it is not one, with the reason. */
static const char *pattern(struct compiler *c, const char *s, size_t n, bool host_ok,
                           struct rulefile_pat *p)
{
    char buf[RULEFILE_MAX_LINE];
    size_t k = 0, caps = 0, splats = 0;
    *p = (struct rulefile_pat){0};
    if (n > 8 && strncmp(s, "https://", 8) == 0 && host_ok) {
        size_t h = 8;
        while (h < n && s[h] != '/')
            h++;
        if (h == 8)
            return "a URL pattern wants a host";
        for (size_t i = 8; i < h; i++)
            if (s[i] == ':' || s[i] == '*')
                return "a host with a port, a placeholder or a splat is not supported";
        char hb[256];
        if (h - 8 >= sizeof(hb))
            return "host too long";
        for (size_t i = 8; i < h; i++)
            hb[i - 8] = lower(s[i]);
        p->host = keep(&c->a, hb, h - 8);
        p->host_len = (uint16_t)(h - 8);
        s += h;
        n -= h;
        if (n == 0) {
            s = "/";
            n = 1;
        }
    } else if ((n >= 7 && strncmp(s, "http://", 7) == 0) ||
               (n >= 8 && strncmp(s, "https://", 8) == 0)) {
        return host_ok ? "a URL pattern must begin with https://"
                       : "domain-level rules (a URL as the source) are not supported";
    }
    if (n == 0 || s[0] != '/')
        return "a path pattern must begin with '/'";
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch <= ' ' || ch == 0x7f)
            return "a control byte or space in the pattern";
        if (ch == '%') {
            int hi = i + 2 < n ? hexval(s[i + 1]) : -1, lo = hi >= 0 ? hexval(s[i + 2]) : -1;
            if (hi < 0 || lo < 0 || (hi == 0 && lo == 0))
                return "a bad percent escape in the pattern";
            buf[k++] = (char)(hi * 16 + lo);
            i += 2;
            continue;
        }
        if (ch == '*')
            splats++;
        if (ch == ':' && i + 1 < n && name_char((unsigned char)s[i + 1]))
            caps++;
        if (ch == '?' || ch == '#')
            return "a query or fragment in the pattern (query conditions go as name=value)";
        buf[k++] = (char)ch;
    }
    if (splats > 1)
        return "more than one splat '*' in the pattern";
    if (caps + splats > RULEFILE_MAX_CAPTURES)
        return "too many placeholders in the pattern";
    size_t first = k, last_slash = 0;
    for (size_t i = 0; i < k; i++) {
        if (buf[i] == '*' || (buf[i] == ':' && i + 1 < k && name_char((unsigned char)buf[i + 1]))) {
            first = i;
            break;
        }
        if (buf[i] == '/')
            last_slash = i;
    }
    p->exact = first == k;
    p->lit = (uint16_t)(p->exact ? exact_len(buf, k) : last_slash + 1);
    p->len = (uint16_t)k;
    p->text = keep(&c->a, buf, k);
    return NULL;
}

/* Splits line into whitespace-separated tokens; their number, or -1 beyond max. A token that
 * begins with '#' after the first begins a comment to the end of the line. */
static int tokens(const char *s, size_t n, const char **tok, size_t *tlen, int max)
{
    int nt = 0;
    for (size_t i = 0; i < n;) {
        while (i < n && is_space(s[i]))
            i++;
        if (i == n || (nt > 0 && s[i] == '#'))
            break;
        size_t j = i;
        while (j < n && !is_space(s[j]))
            j++;
        if (nt == max)
            return -1;
        tok[nt] = s + i;
        tlen[nt++] = j - i;
        i = j;
    }
    return nt;
}

static bool is_url(const char *s, size_t n)
{
    return (n > 7 && strncmp(s, "http://", 7) == 0) || (n > 8 && strncmp(s, "https://", 8) == 0);
}

static bool visible(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] <= ' ' || s[i] == 0x7f)
            return false;
    return true;
}

static void redirect_line(struct compiler *c, const char *s, size_t n)
{
    const char *tok[12];
    size_t tl[12];
    int nt = tokens(s, n, tok, tl, 12), t = 1;
    struct rulefile_redirect r = {0};
    const char *why;
    if (nt < 2) {
        bad(c, nt < 0 ? "too many fields" : "wants FROM TO [STATUS]");
        return;
    }
    if ((why = pattern(c, tok[0], tl[0], false, &r.from))) {
        bad(c, why);
        return;
    }
    /* Netlify's query conditions: name=value (or name=:placeholder) before the target. */
    for (; t < nt && tok[t][0] != '/' && !is_url(tok[t], tl[t]); t++) {
        const char *eq = memchr(tok[t], '=', tl[t]);
        if (!eq || eq == tok[t]) {
            bad(c, "wants a target path or URL after the source (or name=value query "
                   "conditions)");
            return;
        }
        if (r.nquery == RULEFILE_MAX_QUERY) {
            bad(c, "too many query conditions");
            return;
        }
        struct rulefile_query *q = &r.query[r.nquery++];
        q->name_len = (uint16_t)(eq - tok[t]);
        q->name = keep(&c->a, tok[t], q->name_len);
        q->value_len = (uint16_t)(tl[t] - q->name_len - 1);
        q->value = keep(&c->a, eq + 1, q->value_len);
    }
    if (t == nt) {
        bad(c, "wants a target path or URL");
        return;
    }
    if (!visible(tok[t], tl[t]) || (tok[t][0] == '/' && tl[t] > 1 && tok[t][1] == '/')) {
        bad(c, "the target is not a path or an http(s) URL");
        return;
    }
    r.to = keep(&c->a, tok[t], tl[t]);
    r.to_len = (uint16_t)tl[t];
    bool url = tok[t][0] != '/';
    t++;
    r.status = RULEFILE_DEFAULT_STATUS;
    if (t < nt) {
        const char *st = tok[t];
        size_t sl = tl[t];
        if (sl && st[sl - 1] == '!') {
            r.force = true;
            sl--;
        }
        unsigned v = 0;
        for (size_t i = 0; i < sl && v < 1000; i++)
            v = st[i] >= '0' && st[i] <= '9' ? v * 10 + (unsigned)(st[i] - '0') : 1000;
        if (sl == 0 && r.force) {
            v = RULEFILE_DEFAULT_STATUS;
        } else if (sl != 3 || v >= 1000) {
            bad(c, "the status must be a number (200, 301, 302, 303, 307, 308, 404, 410), "
                   "with '!' to force");
            return;
        }
        if (v != 200 && v != 301 && v != 302 && v != 303 && v != 307 && v != 308 && v != 404 &&
            v != 410) {
            bad(c, "unsupported status (200, 301, 302, 303, 307, 308, 404, 410)");
            return;
        }
        r.status = (uint16_t)v;
        t++;
    }
    if (t < nt) {
        bad(c, "conditions after the status (Country, Language, Role, Cookie) are not "
               "supported");
        return;
    }
    if (url && (r.status == 200 || r.status == 404 || r.status == 410)) {
        bad(c, "a rewrite or error page to a URL is proxying, which is not supported");
        return;
    }
    if (c->rs->nredirects >= c->room[RULEFILE_REDIRECTS]) {
        bad(c, "more than 100,000 redirects: this one and the rest are ignored");
        return;
    }
    if (!c->writing || !c->redirects) {
        c->rs->nredirects++; /* counted as the filling call will: the same lines are refused */
        return;
    }
    c->redirects[c->rs->nredirects++] = r;
}

/* Fields the server writes itself (framing, connection management, the representation's own
 * metadata): a rule may not set them, or a response would carry two. */
static bool reserved(const char *name, size_t n)
{
    static const char *const own[] = {"content-length", "transfer-encoding",
                                      "connection",     "keep-alive",
                                      "upgrade",        "te",
                                      "trailer",        "proxy-connection",
                                      "content-range",  "content-encoding",
                                      "content-type",   "date",
                                      "server",         "etag",
                                      "last-modified",  "accept-ranges",
                                      "location",       "vary"};
    for (size_t i = 0; i < sizeof(own) / sizeof(own[0]); i++) {
        size_t l = strlen(own[i]);
        if (l != n)
            continue;
        size_t j = 0;
        while (j < n && lower(name[j]) == own[i][j])
            j++;
        if (j == n)
            return true;
    }
    return false;
}

/* The header rule a block is building; its lines are gathered where it is (see headers_text). */
struct block {
    bool open; /* a pattern line was read and was good */
    bool seen; /* a pattern line was read (good or not): its lines belong to it */
    struct rulefile_header h;
    char set[8192], remove[1024];
    size_t set_len, remove_len;
};

static void block_close(struct compiler *c, struct block *b)
{
    if (b->open && c->rs->nheaders >= c->room[RULEFILE_HEADERS]) {
        bad(c, "more than 100,000 header rules: this one and the rest are ignored");
        b->open = false;
    }
    if (b->open && c->writing && c->headers) {
        b->h.set = keep(&c->a, b->set, b->set_len);
        b->h.set_len = (uint32_t)b->set_len;
        b->h.remove = keep(&c->a, b->remove, b->remove_len);
        b->h.remove_len = (uint32_t)b->remove_len;
        if (c->a.used <= c->a.cap)
            c->headers[c->rs->nheaders++] = b->h;
    } else if (b->open) {
        keep(&c->a, b->set, b->set_len); /* the sizing call counts them too */
        keep(&c->a, b->remove, b->remove_len);
        c->rs->nheaders++;
    }
    b->open = b->seen = false;
}

/* A YAML header rule's options on its pattern line: "type=TYPE" and "status=any". */
static const char *header_options(struct compiler *c, const char **tok, size_t *tl, int nt,
                                  struct rulefile_header *h)
{
    for (int i = 1; i < nt; i++) {
        if (tl[i] > 5 && strncmp(tok[i], "type=", 5) == 0) {
            h->type = keep(&c->a, tok[i] + 5, tl[i] - 5);
            h->type_len = (uint16_t)(tl[i] - 5);
        } else if (tl[i] == 10 && strncmp(tok[i], "status=any", 10) == 0) {
            h->errors = true;
        } else {
            return "a pattern line holds one path pattern (no spaces)";
        }
    }
    return NULL;
}

static void header_line(struct compiler *c, struct block *b, const char *s, size_t n)
{
    bool indented = n && (s[0] == ' ' || s[0] == '\t');
    size_t i = 0;
    while (i < n && is_space(s[i]))
        i++;
    while (n > i && is_space(s[n - 1]))
        n--;
    if (i == n || s[i] == '#')
        return;
    if (!indented) {
        block_close(c, b);
        b->seen = true;
        const char *tok[4];
        size_t tl[4];
        int nt = tokens(s + i, n - i, tok, tl, 4);
        const char *why = nt < 0 ? "a pattern line holds one path pattern (no spaces)" : NULL;
        b->h = (struct rulefile_header){0};
        if (!why)
            why = pattern(c, tok[0], tl[0], true, &b->h.path);
        if (!why && nt > 1 && !c->options)
            why = "a pattern line holds one path pattern (no spaces)";
        if (!why)
            why = header_options(c, tok, tl, nt, &b->h);
        if (why) {
            bad(c, why);
            return;
        }
        b->open = true;
        b->set_len = b->remove_len = 0;
        return;
    }
    if (!b->seen) {
        bad(c, "a header line before any path pattern (pattern lines are not indented)");
        return;
    }
    if (!b->open)
        return; /* under a pattern already reported */
    s += i;
    n -= i;
    if (s[0] == '!') { /* Cloudflare: "! Name" takes the field off */
        size_t j = 1;
        while (j < n && is_space(s[j]))
            j++;
        size_t k = j;
        while (k < n && token_is_tchar((unsigned char)s[k]))
            k++;
        if (k == j || k != n) {
            bad(c, "'!' wants a field name");
            return;
        }
        if (b->remove_len + (k - j) + 1 > sizeof(b->remove)) {
            bad(c, "too many fields removed by one rule");
            return;
        }
        for (size_t q = j; q < k; q++)
            b->remove[b->remove_len++] = lower(s[q]);
        b->remove[b->remove_len++] = '\n';
        return;
    }
    size_t k = 0;
    while (k < n && token_is_tchar((unsigned char)s[k]))
        k++;
    if (k == 0 || k == n || s[k] != ':') {
        bad(c, "wants 'Name: value' (or '! Name')");
        return;
    }
    size_t v = k + 1;
    while (v < n && is_space(s[v]))
        v++;
    for (size_t q = v; q < n; q++) {
        unsigned char ch = (unsigned char)s[q];
        if ((ch < ' ' && ch != '\t') || ch == 0x7f) {
            bad(c, "a control byte in the value");
            return;
        }
    }
    if (k == 10 && strncasecmp(s, "basic-auth", 10) == 0) {
        bad(c, "Netlify's Basic-Auth is not supported (it would send the passwords to every "
               "client as a field): use basic-auth");
        return;
    }
    if (reserved(s, k)) {
        bad(c, "the server writes this field itself");
        return;
    }
    size_t need = k + 2 + (n - v) + 2;
    if (b->set_len + need > sizeof(b->set)) {
        bad(c, "too many fields set by one rule");
        return;
    }
    memcpy(b->set + b->set_len, s, k);
    memcpy(b->set + b->set_len + k, ": ", 2);
    memcpy(b->set + b->set_len + k + 2, s + v, n - v);
    memcpy(b->set + b->set_len + need - 2, "\r\n", 2);
    b->set_len += need;
    if (memchr(s + v, ':', n - v) && !b->h.path.exact)
        b->h.expand = true;
}

static bool cidr_token(const char *s, size_t n, struct cidr *out)
{
    char buf[64];
    if (n == 0 || n >= sizeof(buf))
        return false;
    memcpy(buf, s, n);
    buf[n] = '\0';
    return cidr_parse(buf, out) == 0;
}

static void access_line(struct compiler *c, const char *s, size_t n)
{
    const char *tok[2 * RULEFILE_MAX_CIDRS + 4];
    size_t tl[2 * RULEFILE_MAX_CIDRS + 4];
    int nt = tokens(s, n, tok, tl, 2 * RULEFILE_MAX_CIDRS + 4);
    struct rulefile_access r;
    memset(&r, 0, sizeof(r));
    const char *why = nt < 0   ? "too many addresses"
                      : nt < 2 ? "wants PATTERN allow|deny CIDR..."
                               : NULL;
    if (!why)
        why = pattern(c, tok[0], tl[0], false, &r.path);
    int list = -1; /* 0 allow, 1 deny */
    for (int t = 1; t < nt && !why; t++) {
        if (tl[t] == 5 && strncmp(tok[t], "allow", 5) == 0) {
            list = 0;
        } else if (tl[t] == 4 && strncmp(tok[t], "deny", 4) == 0) {
            list = 1;
        } else if (tl[t] == 5 && strncmp(tok[t], "close", 5) == 0) {
            r.close = true;
        } else if (list < 0) {
            why = "an address before 'allow' or 'deny'";
        } else {
            /* "all", or one or more CIDRs separated by commas */
            for (size_t i = 0; i < tl[t] && !why;) {
                size_t j = i;
                while (j < tl[t] && tok[t][j] != ',')
                    j++;
                struct cidr *to = list ? r.deny : r.allow;
                uint8_t *cnt = list ? &r.ndeny : &r.nallow;
                bool all = j - i == 3 && strncmp(tok[t] + i, "all", 3) == 0;
                if (*cnt + (all ? 2 : 1) > RULEFILE_MAX_CIDRS)
                    why = "too many addresses";
                else if (all) {
                    cidr_parse("0.0.0.0/0", &to[(*cnt)++]);
                    cidr_parse("::/0", &to[(*cnt)++]);
                } else if (!cidr_token(tok[t] + i, j - i, &to[*cnt])) {
                    why = "not an address or CIDR (192.0.2.0/24, 2001:db8::/32, all)";
                } else {
                    (*cnt)++;
                }
                i = j + 1;
            }
        }
    }
    if (!why && !r.nallow && !r.ndeny)
        why = "wants allow or deny addresses";
    if (why) {
        bad(c, why);
        return;
    }
    if (c->rs->naccess >= c->room[RULEFILE_ACCESS]) {
        bad(c, "more than 100,000 access rules: this one and the rest are ignored");
        return;
    }
    if (c->writing && c->access)
        c->access[c->rs->naccess] = r;
    c->rs->naccess++;
}

/* Lines of text, each handed to the kind's parser; a line over the limit is bad as a whole. */
static void parse(struct compiler *c, const struct rulefile_src *src)
{
    struct block *b = NULL, blk;
    if (src->kind == RULEFILE_HEADERS) {
        b = &blk;
        b->open = b->seen = false;
    }
    c->name = src->name;
    c->options = src->one_line;
    c->line = src->first_line ? src->first_line - 1 : 0;
    for (size_t i = 0; i < src->len;) {
        const char *s = src->text + i;
        const char *eol = memchr(s, '\n', src->len - i);
        size_t n = eol ? (size_t)(eol - s) : src->len - i;
        i += n + 1;
        if (!src->one_line || c->line < src->first_line)
            c->line++;
        if (n > RULEFILE_MAX_LINE) {
            bad(c, "line longer than 2000 bytes");
            if (b && !(n && (s[0] == ' ' || s[0] == '\t')))
                block_close(c, b), b->seen = true; /* its header lines go with it */
            continue;
        }
        if (memchr(s, '\0', n)) {
            bad(c, "a NUL byte in the line");
            continue;
        }
        if (b) {
            header_line(c, b, s, n);
            continue;
        }
        size_t a = 0;
        while (a < n && is_space(s[a]))
            a++;
        while (n > a && is_space(s[n - 1]))
            n--;
        if (a == n || s[a] == '#')
            continue;
        if (src->kind == RULEFILE_REDIRECTS)
            redirect_line(c, s + a, n - a);
        else
            access_line(c, s + a, n - a);
    }
    if (b)
        block_close(c, b);
}

/* An upper bound on the rules s can hold: its lines that begin a rule (for _headers, the ones
 * not indented), comments and blank lines left out: the arrays are sized by it. */
static size_t lines_of(const struct rulefile_src *s)
{
    size_t n = 0;
    bool start = true;
    for (size_t i = 0; i < s->len; i++) {
        char ch = s->text[i];
        if (start && s->kind == RULEFILE_HEADERS && (ch == ' ' || ch == '\t')) {
            start = false; /* a field line */
        } else if (start && !is_space(ch) && ch != '\n') {
            n += ch != '#';
            start = false;
        }
        if (ch == '\n')
            start = true;
    }
    return n;
}

static void index_add(struct rulefile *rs, struct rulefile_slot *entry, uint32_t *bucket,
                      const struct rulefile_pat *p, uint8_t kind, uint32_t rule)
{
    uint32_t h = hash_of(p->text, p->lit), e = rs->nentries++;
    uint32_t b = h & (rs->nbuckets - 1);
    entry[e] = (struct rulefile_slot){
        .hash = h, .rule = rule, .next = bucket[b], .kind = kind, .exact = p->exact};
    bucket[b] = e + 1;
}

size_t rulefile_compile(const struct rulefile_src *srcs, size_t n, void *mem, size_t cap,
                        const struct rulefile **out, rulefile_report_fn *report, void *arg)
{
    struct compiler c = {.a = {.base = mem, .cap = cap}, .report = report, .arg = arg};
    size_t lines[3] = {0, 0, 0};
    for (size_t i = 0; i < n; i++)
        lines[srcs[i].kind] += lines_of(&srcs[i]);
    for (int k = 0; k < 3; k++) /* a runaway file costs RULEFILE_MAX_RULES at most */
        c.room[k] = lines[k] = lines[k] < RULEFILE_MAX_RULES ? lines[k] : RULEFILE_MAX_RULES;
    *out = NULL;
    struct rulefile *block = take(&c.a, sizeof(*block), 8);
    c.redirects = take(&c.a, lines[RULEFILE_REDIRECTS] * sizeof(*c.redirects), 8);
    c.headers = take(&c.a, lines[RULEFILE_HEADERS] * sizeof(*c.headers), 8);
    c.access = take(&c.a, lines[RULEFILE_ACCESS] * sizeof(*c.access), 8);
    c.writing = c.a.used <= c.a.cap && mem;
    struct rulefile counts = {0};
    struct rulefile *rs = c.writing ? block : &counts;
    memset(rs, 0, sizeof(*rs));
    c.rs = rs;
    for (size_t i = 0; i < n; i++)
        parse(&c, &srcs[i]);
    /* The sizing call cannot count rules it did not store: the index is sized by lines, an
     * upper bound (a header rule takes two lines at least, and the bound holds either way). */
    size_t rules = lines[0] + lines[1] + lines[2];
    uint32_t nb = 16;
    while (nb < 2 * rules && nb < (1u << 30))
        nb <<= 1;
    uint32_t *bucket = take(&c.a, nb * sizeof(uint32_t), 8);
    struct rulefile_slot *entry = take(&c.a, rules * sizeof(*entry), 8);
    if (c.a.used > cap || !mem || !c.writing)
        return c.a.used;
    memset(bucket, 0, nb * sizeof(uint32_t));
    rs->nbuckets = nb;
    /* Added last to first: each bucket's chain then runs in rule order, so the matcher's first
     * match in a chain is its earliest rule. */
    for (uint32_t i = rs->naccess; i-- > 0;)
        index_add(rs, entry, bucket, &c.access[i].path, RULEFILE_ACCESS, i);
    for (uint32_t i = rs->nheaders; i-- > 0;) {
        index_add(rs, entry, bucket, &c.headers[i].path, RULEFILE_HEADERS, i);
        rs->any_host |= c.headers[i].path.host != NULL;
        rs->any_expand |= c.headers[i].expand;
        rs->any_type |= c.headers[i].type != NULL;
        rs->any_errors |= c.headers[i].errors;
    }
    for (uint32_t i = rs->nredirects; i-- > 0;)
        index_add(rs, entry, bucket, &c.redirects[i].from, RULEFILE_REDIRECTS, i);
    rs->redirects = c.redirects;
    rs->headers = c.headers;
    rs->access = c.access;
    rs->bucket = bucket;
    rs->entry = entry;
    *out = rs;
    return c.a.used;
}

/* ---- matching ---- */
