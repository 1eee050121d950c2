/* wbuf: a bounded text writer that counts every byte but stores only what fits, so one pass
 * yields the text and, when it did not fit, the size a retry needs.
 * Must not: write at or past p[cap]; allocate.
 * Ownership: the caller's buffer; a wbuf is a cursor over it, kept on the stack. */
#ifndef CORE_WBUF_H
#define CORE_WBUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

struct wbuf {
    char *p;
    size_t cap;
    size_t len; /* bytes written, or that would have been: > cap means truncated */
};

static inline void wbuf_put(struct wbuf *w, const char *s, size_t n)
{
    if (n && w->len < w->cap) {
        size_t room = w->cap - w->len;
        memcpy(w->p + w->len, s, n < room ? n : room);
    }
    w->len += n;
}

#define WBUF_LIT(w, lit) wbuf_put((w), (lit), sizeof(lit) - 1)

static inline void wbuf_str(struct wbuf *w, const char *s)
{
    wbuf_put(w, s, strlen(s));
}

static inline void wbuf_u64(struct wbuf *w, uint64_t v)
{
    char tmp[20];
    size_t i = sizeof(tmp);
    do {
        tmp[--i] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    wbuf_put(w, tmp + i, sizeof(tmp) - i);
}

static inline bool wbuf_full(const struct wbuf *w)
{
    return w->len > w->cap;
}

#endif
