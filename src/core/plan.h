/* plan: a response as the core decides it and the engines send it: a list of segments, each
 * bytes in memory or a range of an open file, with a cursor that partial sends advance.
 * Must not: make system calls or own anything: memory segments point into the connection's
 * response buffer, a file-cache entry or a static table, file segments borrow an fd.
 * Ownership: whoever built the plan keeps what it points to alive until the send ends. */
#ifndef CORE_PLAN_H
#define CORE_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/uio.h>

#define PLAN_MAX_SEGS 40 /* headers, 16 ranges with a part header each, closing delimiter */

struct seg {
    const char *mem; /* NULL for a file segment */
    int fd;          /* file segments only */
    uint64_t off;    /* file offset; for memory, bytes of mem already consumed */
    uint64_t len;    /* bytes left to send */
};

/*
 * The structured response every protocol serialises: status, a header section, body segments.
 * The first head_len bytes of the segments (always the start of segs[0]) are the header
 * section, written in the syntax the request's policy chose (core/policy.h): for HTTP/1 the
 * wire's header block; for RESP_FIELDS the field lines alone, which plan_field_next walks, and
 * which a protocol skips with plan_advance(p, head_len) to leave exactly the body segments
 * (memory, or file ranges it may keep zero-copy).
 */
struct plan {
    int status;
    bool close; /* close the connection after this response */
    /* The close follows at once and the client sent nothing behind its request (it asked to
     * close, with no body): the engine may hold the last bytes back (MSG_MORE) for the close's
     * FIN to carry, one segment where there would be two. Never set when unread bytes may be
     * waiting: a close with unread data resets the connection, and held bytes would be lost. */
    bool fin_carries_tail;
    /* Kernel TLS (a transport's wire plan only): 0, or the content type of the one record the
     * memory segments are, for the kernel to seal as such rather than as application data. */
    uint8_t tls_record;
    uint64_t bytes;    /* total bytes the segments held when built */
    uint64_t head_len; /* of those, the status line and header fields (the rest is body) */
    unsigned nseg;
    unsigned cur; /* first segment with bytes left */
    struct seg segs[PLAN_MAX_SEGS];
};

void plan_init(struct plan *p);
/* Appends a segment; zero-length ones are skipped. False when the plan is full. */
bool plan_mem(struct plan *p, const void *mem, size_t len);
bool plan_file(struct plan *p, int fd, uint64_t off, uint64_t len);

static inline bool plan_done(const struct plan *p)
{
    return p->cur == p->nseg;
}

/* The current segment, or NULL when done. */
static inline struct seg *plan_seg(struct plan *p)
{
    return p->cur < p->nseg ? &p->segs[p->cur] : NULL;
}

/* Fills iov with the consecutive memory segments from the cursor, at most max; returns how many
 * (0 when the current segment is a file range or the plan is done). */
int plan_iov(const struct plan *p, struct iovec *iov, int max);

/* Walks the field lines ("Name: value\r\n") of a RESP_FIELDS header section: *pos starts at 0
 * and must not be changed between calls; the plan's cursor must still be at its start. Returns
 * false after the last field. Names are as written (mixed case; HTTP/2 lowercases them). */
/* The first byte c in [p, end), or end: eight bytes at a time while eight remain (the lowest
 * byte the zero-byte test flags is always a true match), then one at a time. */
static inline const char *plan_find(const char *p, const char *end, char c)
{
    const uint64_t ones = 0x0101010101010101u, pat = ones * (unsigned char)c;
    for (; end - p >= 8; p += 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        w ^= pat;
        uint64_t hit = (w - ones) & ~w & (ones << 7);
        if (hit)
            return p + (__builtin_ctzll(hit) >> 3);
    }
    while (p < end && *p != c)
        p++;
    return p;
}

static inline bool plan_field_next(const struct plan *p, size_t *pos, const char **name,
                                   size_t *name_len, const char **value, size_t *value_len)
{
    /* Inline, and a word at a time: HTTP/2 walks every response's fields this way (issue 18:
     * the call, two memchr calls and the out-parameters through memory cost more per field
     * than the bytes). */
    if (p->nseg == 0 || *pos >= p->head_len)
        return false;
    const char *line = p->segs[0].mem + *pos, *end = p->segs[0].mem + p->head_len;
    const char *colon = plan_find(line, end, ':');
    const char *eol = colon < end ? plan_find(colon, end, '\r') : end;
    if (eol == end) /* not a field line: the section is HTTP/1's, or damaged; stop */
        return false;
    const char *v = colon + 1;
    while (v < eol && (*v == ' ' || *v == '\t'))
        v++;
    *name = line;
    *name_len = (size_t)(colon - line);
    *value = v;
    *value_len = (size_t)(eol - v);
    *pos = (size_t)(eol + 2 - p->segs[0].mem);
    return true;
}

/* Whether p's field lines at pos begin with text[0, len): a run of whole lines that a
 * protocol keeps encoded (HPACK, QPACK) and sends so wherever a response holds its text. */
static inline bool plan_fields_at(const struct plan *p, size_t pos, const char *text, size_t len)
{
    return len && p->nseg && p->head_len >= pos + len && p->segs[0].mem[pos] == text[0] &&
           memcmp(p->segs[0].mem + pos, text, len) == 0;
}

/* The bytes of p's first n field lines (Server and Date lead the core's responses), 0 when it
 * has fewer. */
static inline size_t plan_fields_lead(const struct plan *p, unsigned n)
{
    size_t pos = 0, nl, vl;
    const char *name, *value;
    for (unsigned i = 0; i < n; i++)
        if (!plan_field_next(p, &pos, &name, &nl, &value, &vl))
            return 0;
    return pos;
}

/* Records that n more bytes left, moving the cursor past finished segments. This is the one
 * piece of partial-send bookkeeping both engines share. */
void plan_advance(struct plan *p, uint64_t n);

#endif
