#include "core/autoindex.h"

#include <stdlib.h>
#include <string.h>

#include "core/date.h"
#include "core/wbuf.h"

static int by_kind_then_name(const void *a, const void *b)
{
    const struct autoindex_entry *x = a, *y = b;
    if (x->is_dir != y->is_dir)
        return x->is_dir ? -1 : 1;
    size_t n = x->name_len < y->name_len ? x->name_len : y->name_len;
    int c = n ? memcmp(x->name, y->name, n) : 0;
    if (c)
        return c;
    return (x->name_len > y->name_len) - (x->name_len < y->name_len);
}

void autoindex_sort(struct autoindex_entry *entries, size_t n)
{
    if (n > 1)
        qsort(entries, n, sizeof(entries[0]), by_kind_then_name);
}

#define REPLACEMENT "\xEF\xBF\xBD" /* U+FFFD in UTF-8 */

/* Length of the well-formed UTF-8 sequence at p (Unicode 3.9 table 3-7: no overlongs, no
 * surrogates, nothing above U+10FFFF), or 0 when the bytes there are not one. */
static size_t utf8_seq(const unsigned char *p, size_t n)
{
    unsigned char c = p[0], lo = 0x80, hi = 0xBF;
    size_t len;
    if (c < 0x80)
        return 1;
    if (c >= 0xC2 && c <= 0xDF)
        len = 2;
    else if (c >= 0xE0 && c <= 0xEF)
        len = 3;
    else if (c >= 0xF0 && c <= 0xF4)
        len = 4;
    else
        return 0;
    if (c == 0xE0)
        lo = 0xA0;
    else if (c == 0xED)
        hi = 0x9F;
    else if (c == 0xF0)
        lo = 0x90;
    else if (c == 0xF4)
        hi = 0x8F;
    if (n < len || p[1] < lo || p[1] > hi)
        return 0;
    for (size_t i = 2; i < len; i++) {
        if (p[i] < 0x80 || p[i] > 0xBF)
            return 0;
    }
    return len;
}

static void put_html(struct wbuf *o, const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        unsigned char c = p[i];
        size_t k = utf8_seq(p + i, n - i);
        if (k == 0 || c < 0x20 || c == 0x7f) {
            wbuf_str(o, REPLACEMENT);
            i++;
            continue;
        }
        switch (c) {
        case '&':
            wbuf_str(o, "&amp;");
            break;
        case '<':
            wbuf_str(o, "&lt;");
            break;
        case '>':
            wbuf_str(o, "&gt;");
            break;
        case '"':
            wbuf_str(o, "&quot;");
            break;
        case '\'':
            wbuf_str(o, "&#39;");
            break;
        default:
            wbuf_put(o, s + i, k);
        }
        i += k;
    }
}

static void put_href(struct wbuf *o, const char *s, size_t n, bool dir)
{
    static const char hex[] = "0123456789ABCDEF";
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
            c == '-' || c == '.' || c == '_' || c == '~') {
            wbuf_put(o, s + i, 1);
        } else {
            char esc[3] = {'%', hex[c >> 4], hex[c & 15]};
            wbuf_put(o, esc, 3);
        }
    }
    if (dir)
        wbuf_put(o, "/", 1);
}

static void put_json_str(struct wbuf *o, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *p = (const unsigned char *)s;
    wbuf_put(o, "\"", 1);
    for (size_t i = 0; i < n;) {
        unsigned char c = p[i];
        size_t k = utf8_seq(p + i, n - i);
        if (k == 0) {
            wbuf_str(o, "\\ufffd");
            i++;
            continue;
        }
        if (c == '"' || c == '\\') {
            char esc[2] = {'\\', (char)c};
            wbuf_put(o, esc, 2);
        } else if (c == '\n') {
            wbuf_str(o, "\\n");
        } else if (c == '\t') {
            wbuf_str(o, "\\t");
        } else if (c == '\r') {
            wbuf_str(o, "\\r");
        } else if (c < 0x20) {
            char esc[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
            wbuf_put(o, esc, 6);
        } else {
            wbuf_put(o, s + i, k);
        }
        i += k;
    }
    wbuf_put(o, "\"", 1);
}

/* "512 B", "1.5 KiB", ... with one decimal, rounded to nearest. */
static void put_size(struct wbuf *o, uint64_t size)
{
    static const char *const units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    if (size < 1024) {
        wbuf_u64(o, size);
        wbuf_str(o, " B");
        return;
    }
    int u = 0;
    uint64_t unit = 1024;
    while (u < 5 && size / unit >= 1024) {
        unit <<= 10;
        u++;
    }
    /* One decimal, rounded: unit <= 2^60 and rem < unit, so rem * 10 + unit / 2 fits in 64
     * bits. */
    uint64_t whole = size / unit, rem = size % unit;
    uint64_t tenths = (rem * 10 + unit / 2) / unit;
    if (tenths == 10) {
        whole++;
        tenths = 0;
    }
    wbuf_u64(o, whole);
    char frac[2] = {'.', (char)('0' + tenths)};
    wbuf_put(o, frac, 2);
    wbuf_put(o, " ", 1);
    wbuf_str(o, units[u]);
}

static bool is_root(struct http_str path)
{
    for (size_t i = 0; i < path.len; i++) {
        if (path.p[i] != '/')
            return false;
    }
    return true;
}

static void render_html(struct wbuf *o, struct http_str path, const struct autoindex_entry *e,
                        size_t n, size_t omitted)
{
    wbuf_str(o, "<!DOCTYPE html>\n<html>\n<head>\n<meta charset=\"utf-8\">\n"
                "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
                "<title>Index of ");
    put_html(o, path.p, path.len);
    wbuf_str(o, "</title>\n<style>body{font-family:system-ui,sans-serif;margin:2em}"
                "table{border-collapse:collapse}th,td{padding:.2em 1em;text-align:left}"
                "td+td+td{text-align:right}</style>\n</head>\n<body>\n<h1>Index of ");
    put_html(o, path.p, path.len);
    wbuf_str(o,
             "</h1>\n<table>\n<tr><th>Name</th><th>Last modified (UTC)</th><th>Size</th></tr>\n");
    if (!is_root(path))
        wbuf_str(o, "<tr><td><a href=\"../\">../</a></td><td></td><td>-</td></tr>\n");
    for (size_t i = 0; i < n; i++) {
        char date[ISODATE_LEN + 1];
        httpdate_format_iso8601(e[i].mtime, date);
        date[10] = ' ';
        wbuf_str(o, "<tr><td><a href=\"");
        put_href(o, e[i].name, e[i].name_len, e[i].is_dir);
        wbuf_str(o, "\">");
        put_html(o, e[i].name, e[i].name_len);
        if (e[i].is_dir)
            wbuf_put(o, "/", 1);
        wbuf_str(o, "</a></td><td>");
        wbuf_put(o, date, ISODATE_LEN - 1); /* without the 'Z': the header says UTC */
        wbuf_str(o, "</td><td>");
        if (e[i].is_dir)
            wbuf_put(o, "-", 1);
        else
            put_size(o, e[i].size);
        wbuf_str(o, "</td></tr>\n");
    }
    wbuf_str(o, "</table>\n");
    if (omitted) {
        wbuf_str(o, "<p>");
        wbuf_u64(o, omitted);
        wbuf_str(o,
                 omitted == 1 ? " more entry not shown.</p>\n" : " more entries not shown.</p>\n");
    }
    wbuf_str(o, "</body>\n</html>\n");
}

static void render_json(struct wbuf *o, struct http_str path, const struct autoindex_entry *e,
                        size_t n, size_t omitted)
{
    wbuf_str(o, "{\"path\":");
    put_json_str(o, path.p, path.len);
    wbuf_str(o, ",\"entries\":[");
    for (size_t i = 0; i < n; i++) {
        char date[ISODATE_LEN + 1];
        httpdate_format_iso8601(e[i].mtime, date);
        wbuf_str(o, i ? ",\n{\"name\":" : "\n{\"name\":");
        put_json_str(o, e[i].name, e[i].name_len);
        wbuf_str(o, ",\"href\":\"");
        put_href(o, e[i].name, e[i].name_len, e[i].is_dir);
        wbuf_str(o, e[i].is_dir ? "\",\"type\":\"directory\"" : "\",\"type\":\"file\",\"size\":");
        if (!e[i].is_dir)
            wbuf_u64(o, e[i].size);
        wbuf_str(o, ",\"mtime\":\"");
        wbuf_put(o, date, ISODATE_LEN);
        wbuf_str(o, "\"}");
    }
    wbuf_str(o, "\n]");
    if (omitted) {
        wbuf_str(o, ",\"omitted\":");
        wbuf_u64(o, omitted);
    }
    wbuf_str(o, "}\n");
}

size_t autoindex_render(char *out, size_t cap, enum autoindex_format format,
                        struct http_str url_path, const struct autoindex_entry *entries, size_t n,
                        size_t omitted)
{
    struct wbuf o = {out, cap, 0};
    if (!url_path.p)
        url_path = (struct http_str){"", 0};
    if (format == AUTOINDEX_JSON)
        render_json(&o, url_path, entries, n, omitted);
    else
        render_html(&o, url_path, entries, n, omitted);
    return o.len;
}
