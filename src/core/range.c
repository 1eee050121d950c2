#include "core/range.h"

#include <stdbool.h>
#include <string.h>

#include "core/token.h"
#include "core/wbuf.h"

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* Reads 1*DIGIT. Values past UINT64_MAX saturate: such a first-pos is still a valid spec, just
 * unsatisfiable, and such a last-pos or suffix still means "to the end". */
static bool number(const char **pp, const char *end, uint64_t *v)
{
    const char *p = *pp;
    uint64_t acc = 0;
    if (p == end || !is_digit(*p))
        return false;
    for (; p < end && is_digit(*p); p++) {
        unsigned d = (unsigned)(*p - '0');
        acc = acc > (UINT64_MAX - d) / 10 ? UINT64_MAX : acc * 10 + d;
    }
    *pp = p;
    *v = acc;
    return true;
}

static bool unit_is_bytes(const char *p)
{
    static const char bytes[] = "bytes";
    for (size_t i = 0; i < 5; i++) {
        if ((p[i] | 0x20) != bytes[i])
            return false;
    }
    return true;
}

/* Sorts by first and merges spans that overlap or touch: at most RANGE_MAX elements, so an
 * insertion sort is both the simplest and the fastest choice. */
static size_t coalesce(struct range_span *s, size_t n)
{
    for (size_t i = 1; i < n; i++) {
        struct range_span x = s[i];
        size_t j = i;
        for (; j > 0 && s[j - 1].first > x.first; j--)
            s[j] = s[j - 1];
        s[j] = x;
    }
    size_t out = 0;
    for (size_t i = 1; i < n; i++) {
        /* s[out].last < size <= UINT64_MAX, so + 1 cannot wrap. */
        if (s[i].first <= s[out].last + 1) {
            if (s[i].last > s[out].last)
                s[out].last = s[i].last;
        } else {
            s[++out] = s[i];
        }
    }
    return n ? out + 1 : 0;
}

enum range_result range_parse(struct http_str hdr, uint64_t size, struct range_set *set)
{
    if (!hdr.p || hdr.len < 6 || !unit_is_bytes(hdr.p) || hdr.p[5] != '=')
        return RANGE_FULL;

    const char *p = hdr.p + 6, *end = hdr.p + hdr.len;
    struct range_span spans[RANGE_MAX];
    size_t specs = 0, n = 0;
    bool need_comma = false;

    for (;;) {
        while (p < end && token_is_ows(*p))
            p++;
        if (p == end)
            break;
        if (*p == ',') {
            p++;
            need_comma = false;
            continue;
        }
        if (need_comma)
            return RANGE_FULL;

        uint64_t first, last;
        bool satisfiable;
        if (*p == '-') {
            p++;
            if (!number(&p, end, &last))
                return RANGE_FULL;
            /* suffix-range: the last `last` bytes, or the whole file if it is shorter. */
            satisfiable = last > 0 && size > 0;
            first = satisfiable && last < size ? size - last : 0;
            last = size - 1;
        } else {
            if (!number(&p, end, &first) || p == end || *p != '-')
                return RANGE_FULL;
            p++;
            if (p < end && is_digit(*p)) {
                number(&p, end, &last);
                if (last < first)
                    return RANGE_FULL;
            } else {
                last = UINT64_MAX;
            }
            satisfiable = first < size;
            if (satisfiable && last >= size)
                last = size - 1;
        }
        if (++specs > RANGE_MAX)
            return RANGE_FULL;
        if (satisfiable)
            spans[n++] = (struct range_span){first, last};
        need_comma = true;
    }

    if (specs == 0)
        return RANGE_FULL; /* "bytes=" alone: the grammar wants at least one spec */
    if (n == 0)
        return RANGE_UNSATISFIABLE;
    set->count = coalesce(spans, n);
    memcpy(set->span, spans, set->count * sizeof(spans[0]));
    return RANGE_PARTIAL;
}

static size_t finish(struct wbuf *o)
{
    if (o->len < o->cap)
        o->p[o->len] = '\0';
    return o->len;
}

static void content_range(struct wbuf *o, const struct range_span *span, uint64_t size)
{
    wbuf_str(o, "bytes ");
    if (span) {
        wbuf_u64(o, span->first);
        wbuf_put(o, "-", 1);
        wbuf_u64(o, span->last);
    } else {
        wbuf_put(o, "*", 1);
    }
    wbuf_put(o, "/", 1);
    wbuf_u64(o, size);
}

size_t range_content_range(char *out, size_t cap, const struct range_span *span, uint64_t size)
{
    struct wbuf o = {out, cap, 0};
    content_range(&o, span, size);
    return finish(&o);
}

size_t range_part_header(char *out, size_t cap, const char *boundary, const char *type,
                         const struct range_span *span, uint64_t size)
{
    struct wbuf o = {out, cap, 0};
    wbuf_str(&o, "\r\n--");
    wbuf_str(&o, boundary);
    wbuf_str(&o, "\r\nContent-Type: ");
    wbuf_str(&o, type);
    wbuf_str(&o, "\r\nContent-Range: ");
    content_range(&o, span, size);
    wbuf_str(&o, "\r\n\r\n");
    return finish(&o);
}

size_t range_multipart_end(char *out, size_t cap, const char *boundary)
{
    struct wbuf o = {out, cap, 0};
    wbuf_str(&o, "\r\n--");
    wbuf_str(&o, boundary);
    wbuf_str(&o, "--\r\n");
    return finish(&o);
}

uint64_t range_multipart_length(const struct range_set *set, uint64_t size, const char *boundary,
                                const char *type)
{
    uint64_t total = range_multipart_end(NULL, 0, boundary);
    for (size_t i = 0; i < set->count; i++) {
        const struct range_span *s = &set->span[i];
        total += range_part_header(NULL, 0, boundary, type, s, size);
        total += s->last - s->first + 1;
    }
    return total;
}
