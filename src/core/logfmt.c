/* Access-log capture, escaping and line formats; see logfmt.h. */
#include "core/logfmt.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/date.h"
#include "core/token.h"
#include "core/wbuf.h"

static const char hexdig[] = "0123456789ABCDEF";

int cidr_parse(const char *s, struct cidr *out)
{
    char buf[64];
    const char *slash = strchr(s, '/');
    size_t len = slash ? (size_t)(slash - s) : strlen(s);
    if (len == 0 || len >= sizeof(buf))
        return -EINVAL;
    memcpy(buf, s, len);
    buf[len] = '\0';
    memset(out, 0, sizeof(*out));
    if (!logfmt_parse_addr(buf, len, &out->family, out->addr))
        return -EINVAL;
    unsigned max = out->family == AF_INET ? 32 : 128;
    out->bits = max;
    if (slash) {
        char *end;
        if (slash[1] < '0' || slash[1] > '9')
            return -EINVAL;
        unsigned long bits = strtoul(slash + 1, &end, 10);
        if (*end || bits > max)
            return -EINVAL;
        out->bits = (unsigned)bits;
    }
    return 0;
}

static bool prefix_equal(const uint8_t *a, const uint8_t *b, unsigned bits)
{
    unsigned whole = bits / 8, rest = bits % 8;
    if (memcmp(a, b, whole) != 0)
        return false;
    if (rest == 0)
        return true;
    uint8_t mask = (uint8_t)(0xff << (8 - rest));
    return (a[whole] & mask) == (b[whole] & mask);
}

bool cidr_match(const struct cidr *c, int family, const uint8_t *addr)
{
    static const uint8_t v4mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (family == AF_INET6 && c->family == AF_INET && memcmp(addr, v4mapped, 12) == 0) {
        family = AF_INET;
        addr += 12;
    }
    return family == c->family && prefix_equal(addr, c->addr, c->bits);
}

bool logfmt_parse_addr(const char *s, size_t len, int *family, uint8_t addr[16])
{
    char buf[64];
    if (len == 0 || len >= sizeof(buf))
        return false;
    memcpy(buf, s, len);
    buf[len] = '\0';
    if (inet_pton(AF_INET, buf, addr) == 1) {
        *family = AF_INET;
        return true;
    }
    if (inet_pton(AF_INET6, buf, addr) == 1) {
        *family = AF_INET6;
        return true;
    }
    return false;
}

static bool trusted_addr(const struct cidr *trusted, int n, int family, const uint8_t *addr)
{
    for (int i = 0; i < n; i++)
        if (cidr_match(&trusted[i], family, addr))
            return true;
    return false;
}

static size_t put_addr(char out[LOGFMT_ADDR_MAX], const char *s, size_t len)
{
    if (len >= LOGFMT_ADDR_MAX)
        len = LOGFMT_ADDR_MAX - 1;
    memcpy(out, s, len);
    out[len] = '\0';
    return len;
}

struct http_str logfmt_real_addr(const struct cidr *trusted, int ntrusted,
                                 const struct http_request *req, int *family, uint8_t addr[16])
{
    struct http_str chosen = {NULL, 0};
    if (ntrusted == 0 || !trusted_addr(trusted, ntrusted, *family, addr))
        return chosen;
    /* Walk the X-Forwarded-For fields from the last one back, each list from its right end. */
    for (size_t h = req->num_headers; h-- > 0;) {
        const struct http_header *f = &req->headers[h];
        if (!http_str_ieq(f->name, "x-forwarded-for"))
            continue;
        const char *p = f->value.p, *end = f->value.p + f->value.len;
        while (end > p) {
            const char *comma = end;
            while (comma > p && comma[-1] != ',')
                comma--;
            const char *a = comma, *b = end;
            end = comma > p ? comma - 1 : p;
            while (a < b && token_is_ows(*a))
                a++;
            while (b > a && token_is_ows(b[-1]))
                b--;
            if (a == b)
                continue; /* an empty list element */
            int fam;
            uint8_t bin[16];
            if (!logfmt_parse_addr(a, (size_t)(b - a), &fam, bin))
                return chosen;
            chosen = (struct http_str){a, (size_t)(b - a)};
            *family = fam;
            memcpy(addr, bin, 16);
            if (!trusted_addr(trusted, ntrusted, fam, bin))
                return chosen;
        }
    }
    return chosen;
}

size_t logfmt_real_ip(const struct cidr *trusted, int ntrusted, int peer_family,
                      const uint8_t *peer_addr, const char *peer_text,
                      const struct http_request *req, char out[LOGFMT_ADDR_MAX])
{
    int family = peer_family;
    uint8_t addr[16] = {0};
    memcpy(addr, peer_addr, peer_family == AF_INET6 ? 16 : 4);
    struct http_str s = logfmt_real_addr(trusted, ntrusted, req, &family, addr);
    return s.p ? put_addr(out, s.p, s.len) : put_addr(out, peer_text, strlen(peer_text));
}

static uint16_t copy_field(char *dst, size_t cap, struct http_str s)
{
    size_t n = s.len < cap ? s.len : cap;
    if (n)
        memcpy(dst, s.p, n);
    return (uint16_t)n;
}

static void capture_start(struct log_capture *cap, const char *addr, size_t addr_len)
{
    cap->addr_len = (uint16_t)put_addr(cap->addr, addr, addr_len);
    cap->method_len = cap->target_len = cap->referer_len = cap->agent_len = cap->line_len = 0;
    cap->host_len = 0;
    cap->port = 0;
    cap->referer = cap->agent = false;
    cap->minor = -1;
}

/* The Host's name, lower case, and its port (RFC 9110 7.2: none is the scheme's default). A
 * port that does not parse is left out as a whole (the request got a 400 anyway). */
static void capture_host(struct log_capture *cap, const struct http_request *req, bool secure)
{
    struct http_str h = req->has_host ? req->host : (struct http_str){NULL, 0};
    size_t name = h.len;
    unsigned long port = secure ? 443 : 80;
    const char *colon = h.len ? memrchr(h.p, ':', h.len) : NULL;
    const char *bracket = h.len ? memrchr(h.p, ']', h.len) : NULL;
    if (colon && (!bracket || colon > bracket)) { /* "[::1]:8443", "a.test:8080" */
        name = (size_t)(colon - h.p);
        unsigned long v = 0;
        size_t digits = h.len - name - 1;
        for (size_t i = 0; i < digits && v <= 65535; i++)
            v = colon[1 + i] >= '0' && colon[1 + i] <= '9' ? v * 10 + (unsigned)(colon[1 + i] - '0')
                                                           : 65536;
        if (digits && v <= 65535)
            port = v;
    }
    if (name > sizeof(cap->host))
        name = sizeof(cap->host);
    for (size_t i = 0; i < name; i++)
        cap->host[i] = (char)token_lower((unsigned char)h.p[i]);
    cap->host_len = (uint16_t)name;
    cap->port = (uint16_t)port;
}

void logfmt_capture(struct log_capture *cap, const char *addr, size_t addr_len,
                    const struct http_request *req, bool secure)
{
    capture_start(cap, addr, addr_len);
    capture_host(cap, req, secure);
    cap->minor = (int8_t)req->minor;
    cap->method_len = copy_field(cap->method, sizeof(cap->method), req->method_name);
    cap->target_len = copy_field(cap->target, sizeof(cap->target), req->target);
    cap->referer = req->referer.p != NULL;
    cap->agent = req->user_agent.p != NULL;
    cap->referer_len = copy_field(cap->referer_text, sizeof(cap->referer_text), req->referer);
    cap->agent_len = copy_field(cap->agent_text, sizeof(cap->agent_text), req->user_agent);
}

void logfmt_capture_raw(struct log_capture *cap, const char *addr, size_t addr_len,
                        const char *data, size_t len)
{
    capture_start(cap, addr, addr_len);
    while (len && (*data == '\r' || *data == '\n')) {
        data++; /* leading empty lines are not part of the request line */
        len--;
    }
    size_t line = 0;
    while (line < len && data[line] != '\r' && data[line] != '\n')
        line++;
    cap->line_len = copy_field(cap->target, sizeof(cap->target), (struct http_str){data, line});
}

/* nginx's default escaping: '"', '\\', control bytes and bytes >= 0x7f as \xHH. Stops before
 * passing `budget` bytes of output. */
/* Appends p[0..n), cut to what is left of a field's budget (used bytes of it written so far);
 * false when it had to cut. */
static bool put_within(struct wbuf *o, const char *p, size_t n, size_t used, size_t budget)
{
    size_t room = budget - used;
    wbuf_put(o, p, n < room ? n : room);
    return n <= room;
}

static bool clf_plain(unsigned char ch)
{
    return ch >= 0x20 && ch < 0x7f && ch != '"' && ch != '\\';
}

static void esc_clf(struct wbuf *o, const char *s, size_t n, size_t budget)
{
    size_t start = o->len;
    for (size_t i = 0; i < n;) {
        size_t run = i;
        while (run < n && clf_plain((unsigned char)s[run]))
            run++; /* copy plain runs whole: most fields are nothing else */
        if (run > i) {
            if (!put_within(o, s + i, run - i, o->len - start, budget))
                return;
            i = run;
            continue;
        }
        unsigned char ch = (unsigned char)s[i++];
        if (o->len - start + 4 > budget)
            return;
        char e[4] = {'\\', 'x', hexdig[ch >> 4], hexdig[ch & 15]};
        wbuf_put(o, e, 4);
    }
}

/* Length of the valid UTF-8 sequence at s[0..n) (RFC 3629: no overlongs, no surrogates, at most
 * U+10FFFF), or 0 when it is not one. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
    unsigned char c = s[0];
    size_t len;
    unsigned char lo = 0x80, hi = 0xbf;
    if (c >= 0xc2 && c <= 0xdf)
        len = 2;
    else if (c >= 0xe0 && c <= 0xef) {
        len = 3;
        if (c == 0xe0)
            lo = 0xa0;
        else if (c == 0xed)
            hi = 0x9f;
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4;
        if (c == 0xf0)
            lo = 0x90;
        else if (c == 0xf4)
            hi = 0x8f;
    } else
        return 0;
    if (n < len || s[1] < lo || s[1] > hi)
        return 0;
    for (size_t i = 2; i < len; i++)
        if (s[i] < 0x80 || s[i] > 0xbf)
            return 0;
    return len;
}

static void esc_json(struct wbuf *o, const char *str, size_t n, size_t budget)
{
    const unsigned char *s = (const unsigned char *)str;
    size_t start = o->len;
    for (size_t i = 0; i < n;) {
        size_t run = i;
        while (run < n && s[run] >= 0x20 && s[run] < 0x7f && s[run] != '"' && s[run] != '\\')
            run++; /* plain ASCII runs are copied whole */
        if (run > i) {
            if (!put_within(o, str + i, run - i, o->len - start, budget))
                return;
            i = run;
            continue;
        }
        unsigned char ch = s[i];
        char e[6];
        size_t elen = 0, take = 1;
        const char *src = e;
        if (ch == '"' || ch == '\\') {
            e[0] = '\\';
            e[1] = (char)ch;
            elen = 2;
        } else if (ch == '\n' || ch == '\r' || ch == '\t') {
            e[0] = '\\';
            e[1] = ch == '\n' ? 'n' : ch == '\r' ? 'r' : 't';
            elen = 2;
        } else if (ch < 0x20 || ch == 0x7f) {
            elen = 6;
        } else if (ch < 0x80) {
            src = (const char *)&s[i];
            elen = 1;
        } else if ((take = utf8_len(s + i, n - i)) != 0) {
            src = (const char *)&s[i];
            elen = take;
        } else {
            take = 1;
            elen = 6; /* a byte of no valid sequence: the code point of the same value */
        }
        if (elen == 6 && src == e) {
            memcpy(e, "\\u00", 4);
            e[4] = hexdig[ch >> 4];
            e[5] = hexdig[ch & 15];
        }
        if (o->len - start + elen > budget)
            return;
        wbuf_put(o, src, elen);
        i += take;
    }
}

static void put_protocol(struct wbuf *o, int minor)
{
    if (minor == LOGFMT_HTTP2) {
        WBUF_LIT(o, "HTTP/2.0");
        return;
    }
    if (minor == LOGFMT_HTTP3) {
        WBUF_LIT(o, "HTTP/3.0");
        return;
    }
    WBUF_LIT(o, "HTTP/1.");
    char d = (char)('0' + minor);
    wbuf_put(o, &d, 1);
}

/* Formats the clock's second when it changed: once a second, not once a line. */
static void clock_refresh(struct logfmt_clock *clk, int64_t sec)
{
    if (clk->valid && clk->sec == sec)
        return;
    char date[HTTPDATE_LEN + 1]; /* "Sun, 06 Nov 1994 08:49:37 GMT" */
    httpdate_format(sec, date);
    char *p = clk->clf; /* "06/Nov/1994:08:49:37 +0000" */
    memcpy(p, date + 5, 2);
    p[2] = '/';
    memcpy(p + 3, date + 8, 3);
    p[6] = '/';
    memcpy(p + 7, date + 12, 4);
    p[11] = ':';
    memcpy(p + 12, date + 17, 8);
    memcpy(p + 20, " +0000", 7);
    httpdate_format_iso8601(sec, clk->iso);
    clk->sec = sec;
    clk->valid = true;
}

static void line_clf(struct wbuf *o, const struct log_capture *cap, const struct log_end *end,
                     const struct logfmt_clock *clk, bool combined, bool vhost)
{
    if (vhost) { /* "%v:%p ": the port of a request that did not parse is unknown: "-" */
        if (cap->host_len)
            esc_clf(o, cap->host, cap->host_len, LOGFMT_HOST_MAX);
        else
            WBUF_LIT(o, "-");
        WBUF_LIT(o, ":");
        if (cap->port)
            wbuf_u64(o, cap->port);
        else
            WBUF_LIT(o, "-");
        WBUF_LIT(o, " ");
    }
    wbuf_put(o, cap->addr, cap->addr_len);
    WBUF_LIT(o, " - - [");
    wbuf_put(o, clk->clf, LOGFMT_CLF_LEN);
    WBUF_LIT(o, "] \"");
    if (cap->minor >= 0) {
        esc_clf(o, cap->method, cap->method_len, LOGFMT_METHOD_MAX);
        WBUF_LIT(o, " ");
        esc_clf(o, cap->target, cap->target_len, LOGFMT_TARGET_MAX);
        WBUF_LIT(o, " ");
        put_protocol(o, cap->minor);
    } else {
        esc_clf(o, cap->target, cap->line_len, LOGFMT_TARGET_MAX);
    }
    WBUF_LIT(o, "\" ");
    wbuf_u64(o, (uint64_t)end->status);
    WBUF_LIT(o, " ");
    wbuf_u64(o, end->body_bytes);
    if (combined) {
        WBUF_LIT(o, " \"");
        if (cap->referer)
            esc_clf(o, cap->referer_text, cap->referer_len, LOGFMT_FIELD_MAX);
        else
            WBUF_LIT(o, "-");
        WBUF_LIT(o, "\" \"");
        if (cap->agent)
            esc_clf(o, cap->agent_text, cap->agent_len, LOGFMT_FIELD_MAX);
        else
            WBUF_LIT(o, "-");
        WBUF_LIT(o, "\"");
    }
}

static void json_str(struct wbuf *o, const char *key, const char *s, size_t n, size_t budget)
{
    wbuf_str(o, key);
    WBUF_LIT(o, "\"");
    esc_json(o, s, n, budget);
    WBUF_LIT(o, "\"");
}

static void line_json(struct wbuf *o, const struct log_capture *cap, const struct log_end *end,
                      const struct logfmt_clock *clk)
{
    const char *iso = clk->iso; /* "1994-11-06T08:49:37Z" */
    unsigned ms = (unsigned)(end->wall_ms % 1000);
    char frac[6] = {
        '.', (char)('0' + ms / 100), (char)('0' + ms / 10 % 10), (char)('0' + ms % 10), 'Z', '"'};
    WBUF_LIT(o, "{\"time\":\"");
    wbuf_put(o, iso, ISODATE_LEN - 1);
    wbuf_put(o, frac, sizeof(frac));
    json_str(o, ",\"remote_addr\":", cap->addr, cap->addr_len, LOGFMT_ADDR_MAX * 6);
    if (cap->host_len)
        json_str(o, ",\"host\":", cap->host, cap->host_len, LOGFMT_HOST_MAX);
    else
        WBUF_LIT(o, ",\"host\":null");
    if (cap->minor >= 0) {
        json_str(o, ",\"method\":", cap->method, cap->method_len, LOGFMT_METHOD_MAX);
        json_str(o, ",\"target\":", cap->target, cap->target_len, LOGFMT_TARGET_MAX);
        WBUF_LIT(o, ",\"protocol\":\"");
        put_protocol(o, cap->minor);
        WBUF_LIT(o, "\"");
    } else {
        /* The request line did not parse: it is logged whole as "request" only. */
        WBUF_LIT(o, ",\"method\":null,\"target\":null,\"protocol\":null");
        json_str(o, ",\"request\":", cap->target, cap->line_len, LOGFMT_TARGET_MAX);
    }
    WBUF_LIT(o, ",\"status\":");
    wbuf_u64(o, (uint64_t)end->status);
    WBUF_LIT(o, ",\"body_bytes_sent\":");
    wbuf_u64(o, end->body_bytes);
    if (cap->referer)
        json_str(o, ",\"referer\":", cap->referer_text, cap->referer_len, LOGFMT_FIELD_MAX);
    else
        WBUF_LIT(o, ",\"referer\":null");
    if (cap->agent)
        json_str(o, ",\"user_agent\":", cap->agent_text, cap->agent_len, LOGFMT_FIELD_MAX);
    else
        WBUF_LIT(o, ",\"user_agent\":null");
    WBUF_LIT(o, ",\"request_time_us\":");
    wbuf_u64(o, end->duration_us);
    if (end->reused)
        WBUF_LIT(o, ",\"connection_reused\":true}");
    else
        WBUF_LIT(o, ",\"connection_reused\":false}");
}

size_t logfmt_line(enum log_format fmt, const struct log_capture *cap, const struct log_end *end,
                   struct logfmt_clock *clk, char *out)
{
    struct wbuf o = {out, LOGFMT_LINE_MAX - 1, 0};
    int64_t sec = end->wall_ms / 1000 - (end->wall_ms % 1000 < 0);
    clock_refresh(clk, sec);
    if (fmt == LOG_JSON)
        line_json(&o, cap, end, clk);
    else
        line_clf(&o, cap, end, clk, fmt != LOG_COMMON, fmt == LOG_VCOMBINED);
    /* The field budgets keep every line inside; this only guards the arithmetic. */
    size_t n = o.len < o.cap ? o.len : o.cap;
    out[n++] = '\n';
    return n;
}
