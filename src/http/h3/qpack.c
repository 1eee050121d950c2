/* QPACK (RFC 9204); see qpack.h.
 *
 * The dynamic table keeps its entries' names and values in one buffer of twice the largest
 * capacity, in insertion order, each name right before its value, so an entry is never split
 * and a field that names it is a pointer: inserts append at `end`, evictions move `start`. An
 * insert that would pass the buffer's end first moves the live bytes to its start, BEFORE it
 * evicts: an entry the insert copies from (Duplicate, a dynamic name reference) may be the one
 * its eviction removes (RFC 9204 3.2.2 allows that), and its bytes must still be there. Live bytes
 * and the new entry are each at most a capacity, so they always fit, and a move comes after at
 * least a capacity of bytes was inserted.
 *
 * A field section is gone through twice: first every line is read, its references checked and
 * the list's size summed (Huffman strings by their longest decoding, counted exactly only when
 * that sum passes the limit), so that a section too large is refused before anything is
 * decoded; then each line is handed to the caller, the first 40 as the first pass kept them,
 * any later ones read again. Strings sent as they are point into the section; Huffman strings
 * are decoded into a buffer on the stack, one line at a time. */
#include "http/h3/qpack.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/fieldnames.h"
#include "core/huff.h"
#include "core/prefint.h"
#include "http/h3/qpack_tables.h"

#define ENTRY_OVERHEAD 32                   /* RFC 9204 3.2.1 */
#define INT_LIMIT ((UINT64_C(1) << 62) - 1) /* larger integers are an error (as nghttp3's) */
#define ENC_ERR (-QPACK_ENCODER_STREAM_ERROR)
#define DEC_FAILED (-QPACK_DECOMPRESSION_FAILED)

struct qpack_entry {
    uint32_t off, nlen, vlen; /* name at bytes + off, value right behind it */
    int16_t sidx;             /* as struct qpack_field's */
};

/* ---- integers and strings ---- */

/* read_int past its first byte: the continuation bytes (x is the prefix's all-ones value). */
static __attribute__((noinline)) int read_int_more(const uint8_t *in, size_t len, size_t *pos,
                                                   uint64_t x, uint64_t *v)
{
    size_t p = *pos;
    for (unsigned shift = 0;; shift += 7) {
        if (p == len)
            return 0;
        uint64_t add = in[p] & 0x7f;
        if (shift > 62 || (INT_LIMIT >> shift) < add)
            return -1;
        add <<= shift;
        if (INT_LIMIT - add < x)
            return -1;
        x += add;
        if (!(in[p++] & 0x80))
            break;
    }
    *v = x;
    *pos = p;
    return 1;
}

/* Reads an integer with an nbits prefix (RFC 9204 4.1.1) at in[*pos]: 1 (*pos past it), 0 (in
 * ends inside it), -1 (past 2^62 - 1). Inline for the common integer that fits its prefix. */
static inline int read_int(const uint8_t *in, size_t len, size_t *pos, unsigned nbits, uint64_t *v)
{
    size_t p = *pos;
    if (p == len)
        return 0;
    uint64_t max = (1u << nbits) - 1, x = in[p] & max;
    *pos = p + 1;
    if (x < max) {
        *v = x;
        return 1;
    }
    int rc = read_int_more(in, len, pos, x, v);
    if (rc <= 0)
        *pos = p;
    return rc;
}

/* A string literal (RFC 9204 4.1.2): its encoded bytes, n of them at `at`. */
struct str {
    const uint8_t *at;
    uint64_t n;
    bool huff;
};

/* Reads a string literal whose length has an nbits prefix, its H flag the bit above: 1, 0 (in
 * ends inside it; s->n is set once the length is read), -1 (integer overflow). */
static int read_str(const uint8_t *in, size_t len, size_t *pos, unsigned nbits, struct str *s)
{
    size_t p = *pos;
    *s = (struct str){0};
    if (p == len)
        return 0;
    s->huff = in[p] >> nbits & 1;
    int rc = read_int(in, len, &p, nbits, &s->n);
    if (rc <= 0)
        return rc;
    if (len - p < s->n)
        return 0;
    s->at = in + p;
    *pos = p + s->n;
    return 1;
}

/* No longer than it may decode to: no Huffman code is longer than 30 bits (and n / 4 cannot
 * overflow, as n * 8 / 30 might for a length no one sent). */
static uint64_t str_min(const struct str *s)
{
    return s->huff ? s->n / 4 : s->n;
}

/* Its decoded length (a Huffman string counted, not stored), or -1 when it is invalid. */
static int64_t str_len(const struct str *s)
{
    if (!s->huff)
        return (int64_t)s->n;
    long n = huff_decode(s->at, s->n, NULL, 0);
    return n < 0 ? -1 : n;
}

/* Decodes s into out (cap bytes): its length, or -1. */
static long str_decode(const struct str *s, char *out, size_t cap)
{
    if (s->huff) {
        long n = huff_decode(s->at, s->n, out, cap);
        return n < 0 ? -1 : n;
    }
    if (s->n > cap)
        return -1;
    memcpy(out, s->at, s->n);
    return (long)s->n;
}

/* The static table's first index with this name, or -1: one probe and one compare. */
static int16_t static_name(const char *name, size_t n)
{
    const struct fieldname *f = fieldname_at(name, n);
    return f && f->qpack && memcmp(f->name, name, n) == 0 ? (int16_t)(f->qpack - 1) : -1;
}

/* ---- the dynamic table ---- */

static struct qpack_entry *entry(const struct qpack_dec *d, uint64_t abs)
{
    return &d->ent[abs & (d->ent_cap - 1)];
}

/* Whether absolute index abs names a live entry. */
static bool live(const struct qpack_dec *d, uint64_t abs)
{
    return abs < d->ins && abs >= d->ins - d->n;
}

static void evict(struct qpack_dec *d)
{
    const struct qpack_entry *e = entry(d, d->ins - d->n);
    d->size -= e->nlen + e->vlen + ENTRY_OVERHEAD;
    d->n--;
    d->start = d->n ? entry(d, d->ins - d->n)->off : d->end;
}

void qpack_dec_init(struct qpack_dec *d, uint32_t max_capacity, uint32_t max_blocked)
{
    *d = (struct qpack_dec){
        .max_capacity = max_capacity < QPACK_CAPACITY_MAX ? max_capacity : QPACK_CAPACITY_MAX,
        .max_blocked = max_blocked < QPACK_BLOCKED_MAX ? max_blocked : QPACK_BLOCKED_MAX};
    d->copy_left = (uint64_t)QPACK_COPY_TABLES * d->max_capacity;
}

void qpack_dec_fini(struct qpack_dec *d)
{
    free(d->ent);
    free(d->bytes);
    free(d->part);
    d->ent = NULL, d->bytes = NULL, d->part = NULL;
    d->n = d->size = d->start = d->end = d->part_len = 0;
}

/* Room for the bytes of one more entry of len bytes at `end`: 0 or -ENOMEM. */
static int table_room(struct qpack_dec *d, uint32_t len)
{
    if (!d->bytes) {
        uint32_t cap = 1;
        while (cap < d->max_capacity / ENTRY_OVERHEAD + 1)
            cap *= 2; /* one slot more than entries can live: the newest goes in before evicting */
        d->ent = malloc(cap * sizeof(*d->ent));
        d->bytes = malloc(2 * (size_t)d->max_capacity);
        if (!d->ent || !d->bytes) {
            qpack_dec_fini(d);
            return -ENOMEM;
        }
        d->ent_cap = cap;
    }
    if (d->end + len > 2 * d->max_capacity) {
        memmove(d->bytes, d->bytes + d->start, d->end - d->start);
        for (uint64_t a = d->ins - d->n; a < d->ins; a++)
            entry(d, a)->off -= d->start;
        d->end -= d->start;
        d->start = 0;
    }
    return 0;
}

/* Inserts an entry (RFC 9204 3.2.2, 4.3.2-4.3.4). Its name is sname (static) or lname (a
 * literal) or the name of entry `from`; its value is lvalue, or (dup) entry `from`'s. nlen and
 * vlen are their decoded lengths. 0, ENC_ERR or -ENOMEM. */
static int insert(struct qpack_dec *d, const char *sname, const struct str *lname, uint64_t from,
                  bool dup, const struct str *lvalue, uint64_t nlen, uint64_t vlen, int16_t sidx)
{
    if (nlen + vlen + ENTRY_OVERHEAD > d->capacity)
        return ENC_ERR;
    uint32_t len = (uint32_t)(nlen + vlen);
    if (!sname && !lname) { /* copied from the table: a byte or two of input for all of it */
        uint64_t copy = dup ? len : nlen;
        if (copy > d->copy_left)
            return -QPACK_EXCESSIVE_LOAD;
        d->copy_left -= copy;
    }
    int rc = table_room(d, len);
    if (rc < 0)
        return rc;
    char *o = d->bytes + d->end; /* past every live byte, `from`'s too */
    if (sname)
        memcpy(o, sname, nlen);
    else if (lname && str_decode(lname, o, nlen) < 0)
        return ENC_ERR;
    else if (!lname)
        memcpy(o, d->bytes + entry(d, from)->off, dup ? len : nlen);
    if (!dup && str_decode(lvalue, o + nlen, vlen) < 0)
        return ENC_ERR;
    if (lname)
        sidx = static_name(o, nlen);
    *entry(d, d->ins) = (struct qpack_entry){
        .off = d->end, .nlen = (uint32_t)nlen, .vlen = (uint32_t)vlen, .sidx = sidx};
    if (d->n++ == 0)
        d->start = d->end;
    d->ins++;
    d->end += len;
    d->size += len + ENTRY_OVERHEAD;
    while (d->size > d->capacity)
        evict(d); /* never the new one: it fits the capacity alone */
    return 0;
}

/* ---- the encoder stream ---- */

/* The longest a valid instruction can be: strings that decode to a capacity together, in at
 * most four bytes a character (str_min's bound), and their integers. */
static uint64_t insn_max(const struct qpack_dec *d)
{
    return (uint64_t)d->max_capacity * 4 + 64;
}

/* A string's length, once read, may already show the entry cannot fit. */
static int str_fits(const struct qpack_dec *d, const struct str *s)
{
    return str_min(s) + ENTRY_OVERHEAD <= d->capacity;
}

/* A string of an instruction: 1 (complete), 0 (in ends inside it), ENC_ERR. */
static int insn_str(const struct qpack_dec *d, const uint8_t *in, size_t len, size_t *pos,
                    unsigned nbits, struct str *s)
{
    int rc = read_str(in, len, pos, nbits, s);
    if (rc < 0 || !str_fits(d, s))
        return ENC_ERR;
    return rc;
}

/* One encoder instruction (RFC 9204 4.3) at in[*pos]: 1 (done, *pos past it), 0 (in ends inside
 * it), ENC_ERR, -ENOMEM. */
static int encoder_insn(struct qpack_dec *d, const uint8_t *in, size_t len, size_t *pos)
{
    size_t p = *pos;
    uint8_t b = in[p];
    uint64_t v;
    struct str name, value;
    int rc;
    if (b & 0x80) { /* Insert with Name Reference: 1 T index(6), value */
        bool stat = b & 0x40;
        if ((rc = read_int(in, len, &p, 6, &v)) <= 0)
            return rc < 0 ? ENC_ERR : 0;
        if (stat ? v >= QPACK_STATIC_N : v >= d->n)
            return ENC_ERR;
        if ((rc = insn_str(d, in, len, &p, 7, &value)) <= 0)
            return rc;
        int64_t vlen = str_len(&value);
        if (vlen < 0)
            return ENC_ERR;
        if (stat) {
            const struct qpack_static *s = &qpack_static[v];
            rc = insert(d, s->name, NULL, 0, false, &value, s->name_len, (uint64_t)vlen,
                        s->name_idx);
        } else {
            uint64_t from = d->ins - 1 - v;
            const struct qpack_entry *e = entry(d, from);
            rc = insert(d, NULL, NULL, from, false, &value, e->nlen, (uint64_t)vlen, e->sidx);
        }
    } else if (b & 0x40) { /* Insert with Literal Name: 01 H length(5), name, value */
        if ((rc = insn_str(d, in, len, &p, 5, &name)) <= 0)
            return rc;
        if ((rc = insn_str(d, in, len, &p, 7, &value)) <= 0)
            return rc;
        int64_t nlen = str_len(&name), vlen = str_len(&value);
        if (nlen < 0 || vlen < 0)
            return ENC_ERR;
        rc = insert(d, NULL, &name, 0, false, &value, (uint64_t)nlen, (uint64_t)vlen, -1);
    } else if (b & 0x20) { /* Set Dynamic Table Capacity: 001 capacity(5) */
        if ((rc = read_int(in, len, &p, 5, &v)) <= 0)
            return rc < 0 ? ENC_ERR : 0;
        if (v > d->max_capacity)
            return ENC_ERR;
        d->capacity = (uint32_t)v;
        while (d->size > d->capacity)
            evict(d);
        rc = 0;
    } else { /* Duplicate: 000 index(5) */
        if ((rc = read_int(in, len, &p, 5, &v)) <= 0)
            return rc < 0 ? ENC_ERR : 0;
        if (v >= d->n)
            return ENC_ERR;
        uint64_t from = d->ins - 1 - v;
        const struct qpack_entry *e = entry(d, from);
        rc = insert(d, NULL, NULL, from, true, NULL, e->nlen, e->vlen, e->sidx);
    }
    if (rc < 0)
        return rc;
    *pos = p;
    return 1;
}

int qpack_dec_encoder(struct qpack_dec *d, const uint8_t *p, size_t n)
{
    int rc = 0;
    if (d->failed)
        return ENC_ERR;
    if (d->part_len) { /* finish the instruction begun in an earlier call */
        uint64_t room = insn_max(d) - d->part_len;
        size_t take = n < room ? n : (size_t)room, have = d->part_len + take, pos = 0;
        uint8_t *part = realloc(d->part, have);
        if (!part) {
            rc = -ENOMEM;
            goto fail;
        }
        d->part = part;
        memcpy(part + d->part_len, p, take);
        if ((rc = encoder_insn(d, part, have, &pos)) < 0)
            goto fail;
        if (rc == 0) {
            if (take < n) { /* longer than any valid instruction */
                rc = ENC_ERR;
                goto fail;
            }
            d->part_len = (uint32_t)have;
            return 0;
        }
        p += pos - d->part_len, n -= pos - d->part_len;
        free(d->part);
        d->part = NULL, d->part_len = 0;
    }
    for (size_t pos = 0; pos < n;) {
        size_t at = pos;
        if ((rc = encoder_insn(d, p, n, &pos)) < 0)
            goto fail;
        if (rc == 0) {
            if (n - at > insn_max(d) || !(d->part = malloc(n - at))) {
                rc = n - at > insn_max(d) ? ENC_ERR : -ENOMEM;
                goto fail;
            }
            memcpy(d->part, p + at, n - at);
            d->part_len = (uint32_t)(n - at);
            break;
        }
    }
    return 0;
fail:
    d->failed = true;
    free(d->part);
    d->part = NULL, d->part_len = 0;
    return rc;
}

/* ---- the decoder stream ---- */

/* Appends an instruction to what our decoder stream owes: false when there is no room. */
static bool put_out(struct qpack_dec *d, uint8_t first, unsigned nbits, uint64_t v)
{
    if (d->out_len + prefint_len(nbits, v) > sizeof(d->out))
        return false;
    d->out_len += (uint32_t)prefint_write(d->out + d->out_len, first, nbits, v);
    return true;
}

/* Section Acknowledgment (4.4.1): it tells the encoder it has ric entries. */
static void ack(struct qpack_dec *d, int64_t sid, uint64_t ric)
{
    if (ric && put_out(d, 0x80, 7, (uint64_t)sid) && d->known < ric)
        d->known = ric;
}

/* Where stream sid waits, or NULL. */
static struct qpack_blocked *blocked(struct qpack_dec *d, int64_t sid)
{
    for (uint32_t i = 0; i < d->nblocked; i++)
        if (d->blocked[i].sid == sid)
            return &d->blocked[i];
    return NULL;
}

static void unblock(struct qpack_dec *d, struct qpack_blocked *b)
{
    if (b)
        *b = d->blocked[--d->nblocked];
}

void qpack_dec_cancel(struct qpack_dec *d, int64_t sid)
{
    unblock(d, blocked(d, sid));
    if (d->max_capacity) /* 4.4.2: with no table there is nothing to release */
        put_out(d, 0x40, 6, (uint64_t)sid);
}

size_t qpack_dec_output(struct qpack_dec *d, uint8_t *out, size_t cap)
{
    if (d->known < d->ins && put_out(d, 0x00, 6, d->ins - d->known)) /* 4.4.3 */
        d->known = d->ins;
    size_t k = cap < d->out_len ? cap : d->out_len;
    if (k == 0) /* the usual answer: h3 asks before every packet it writes (~4 a request) */
        return 0;
    memcpy(out, d->out, k);
    memmove(d->out, d->out + k, d->out_len - k);
    d->out_len -= (uint32_t)k;
    return k;
}

/* ---- field sections ---- */

/* Required Insert Count from its encoding (4.5.1.1): 0 or -1. */
static int ric_decode(const struct qpack_dec *d, uint64_t enc, uint64_t *ric)
{
    uint64_t max_entries = d->max_capacity / ENTRY_OVERHEAD, full = 2 * max_entries;
    if (enc == 0) {
        *ric = 0;
        return 0;
    }
    if (enc > full)
        return -1;
    uint64_t max = d->ins + max_entries, r = max / full * full + enc - 1;
    if (r > max) {
        if (r <= full)
            return -1;
        r -= full;
    }
    if (r == 0)
        return -1;
    *ric = r;
    return 0;
}

/* One field line as read, its references resolved: name and value from a table, or the
 * section's bytes of a literal (still in Huffman code when nhuff, vhuff). */
struct line {
    const char *name, *value;
    uint64_t nlen, vlen; /* a Huffman string's: encoded */
    int16_t sidx;        /* a Huffman name's is found once it is decoded */
    bool nhuff, vhuff;
    bool svalue; /* the value is the static table's */
};

/* A reference to the dynamic table from a section of Required Insert Count ric (2.2.3). */
static inline int ref(const struct qpack_dec *d, uint64_t abs, uint64_t ric, struct line *l,
                      bool whole)
{
    if (abs >= ric || !live(d, abs))
        return -1;
    const struct qpack_entry *e = entry(d, abs);
    l->name = d->bytes + e->off, l->nlen = e->nlen, l->sidx = e->sidx;
    if (whole)
        l->value = l->name + e->nlen, l->vlen = e->vlen;
    return 0;
}

static void ref_static(uint64_t i, struct line *l, bool whole)
{
    const struct qpack_static *s = &qpack_static[i];
    l->name = s->name, l->nlen = s->name_len, l->sidx = s->name_idx;
    if (whole)
        l->value = s->value, l->vlen = s->value_len, l->svalue = true;
}

/* A literal's string: 1, or what read_str says. */
static int lit(const uint8_t *in, size_t len, size_t *pos, unsigned nbits, const char **at,
               uint64_t *n, bool *huff)
{
    struct str s;
    int rc = read_str(in, len, pos, nbits, &s);
    *at = (const char *)s.at, *n = s.n, *huff = s.huff;
    return rc;
}

/* Reads one field line (4.5.2-4.5.6) at in[*pos], its references resolved: 0 or -1. Inlined
 * into the first pass, the one every line goes through (a call cost more than an indexed line). */
static inline __attribute__((always_inline)) int read_line(const struct qpack_dec *d,
                                                           const uint8_t *in, size_t len,
                                                           size_t *pos, uint64_t base, uint64_t ric,
                                                           struct line *l)
{
    uint8_t b = in[*pos];
    uint64_t v;
    l->nhuff = l->vhuff = l->svalue = false;
    if (b & 0x80) { /* Indexed: 1 T index(6) */
        if (read_int(in, len, pos, 6, &v) != 1)
            return -1;
        if (b & 0x40) {
            if (v >= QPACK_STATIC_N)
                return -1;
            ref_static(v, l, true);
            return 0;
        }
        return v < base ? ref(d, base - 1 - v, ric, l, true) : -1;
    }
    if (b & 0x40) { /* Literal with Name Reference: 01 N T index(4), value */
        if (read_int(in, len, pos, 4, &v) != 1)
            return -1;
        if (b & 0x10) {
            if (v >= QPACK_STATIC_N)
                return -1;
            ref_static(v, l, false);
        } else if (v >= base || ref(d, base - 1 - v, ric, l, false) < 0) {
            return -1;
        }
    } else if (b & 0x20) { /* Literal with Literal Name: 001 N H length(3), name, value */
        if (lit(in, len, pos, 3, &l->name, &l->nlen, &l->nhuff) != 1)
            return -1;
        l->sidx = l->nhuff ? -1 : static_name(l->name, l->nlen);
    } else if (b & 0x10) { /* Indexed with Post-Base Index: 0001 index(4) */
        if (read_int(in, len, pos, 4, &v) != 1)
            return -1;
        return ref(d, base + v, ric, l, true);
    } else { /* Literal with Post-Base Name Reference: 0000 N index(3), value */
        if (read_int(in, len, pos, 3, &v) != 1 || ref(d, base + v, ric, l, false) < 0)
            return -1;
    }
    return lit(in, len, pos, 7, &l->value, &l->vlen, &l->vhuff) == 1 ? 0 : -1;
}

/* A string's decoded length: exact (a Huffman one counted; -1 when invalid), or at most. */
static int64_t decoded_len(const char *s, uint64_t n, bool huff, bool exact)
{
    if (!huff)
        return (int64_t)n;
    if (!exact)
        return (int64_t)(n * 8 / 5); /* no code is shorter than 5 bits */
    long k = huff_decode((const uint8_t *)s, n, NULL, 0);
    return k < 0 ? -1 : k;
}

/* A line's name + value length: exact, or with its Huffman strings at their longest; -1 when
 * one is invalid. */
static inline int64_t line_len(const struct line *l, bool exact)
{
    int64_t n = decoded_len(l->name, l->nlen, l->nhuff, exact);
    int64_t v = decoded_len(l->value, l->vlen, l->vhuff, exact);
    return n < 0 || v < 0 ? -1 : n + v;
}

/* A section waits for inserts: -EAGAIN, or DEC_FAILED past max_blocked streams (2.1.2). */
static int block(struct qpack_dec *d, int64_t sid, uint64_t ric)
{
    if (d->nblocked == d->max_blocked)
        return DEC_FAILED;
    d->blocked[d->nblocked++] = (struct qpack_blocked){.sid = sid, .ric = ric};
    return -EAGAIN;
}

/* total (or -1, kept) plus line l's size in the list, its Huffman strings counted: -1 when one
 * is invalid. */
static int64_t add_exact(int64_t total, const struct line *l)
{
    int64_t k = line_len(l, true);
    return total < 0 || k < 0 ? -1 : total + k + ENTRY_OVERHEAD;
}

/* The lines a section's first pass keeps for its second: a request's usual count (past it, the
 * rest is read again). */
#define LINES_KEPT 40

/* A Huffman value s[n) decoded into out[cap), from d's memo when it was decoded before (and
 * kept there when it is short enough): its length, or huff_decode's error. */
static long value_decode(struct qpack_dec *d, const char *s, uint64_t n, char *out, size_t cap)
{
    if (n == 0 || n > QPACK_MEMO_IN)
        return huff_decode((const uint8_t *)s, n, out, cap);
    for (unsigned i = 0; i < QPACK_MEMO; i++) {
        const struct qpack_memo *m = &d->memo[i];
        if (m->in_len == n && m->out_len <= cap && memcmp(m->in, s, n) == 0) {
            memcpy(out, m->out, m->out_len);
            return m->out_len;
        }
    }
    long k = huff_decode((const uint8_t *)s, n, out, cap);
    if (k >= 0 && (size_t)k <= sizeof(d->memo[0].out)) {
        struct qpack_memo *m = &d->memo[d->memo_next++ % QPACK_MEMO];
        m->in_len = (uint8_t)n, m->out_len = (uint8_t)k;
        memcpy(m->in, s, n);
        memcpy(m->out, out, (size_t)k);
    }
    return k;
}

/* Hands line l to fn, its Huffman strings decoded into buf (QPACK_FIELD_MAX bytes, which the
 * first pass saw they fit): fn's value, or DEC_FAILED. */
static inline __attribute__((always_inline)) int deliver(struct qpack_dec *d, const struct line *l,
                                                         char *buf, qpack_field_fn fn, void *arg)
{
    struct qpack_field f = {.name = l->name,
                            .value = l->value,
                            .nlen = (uint32_t)l->nlen,
                            .vlen = (uint32_t)l->vlen,
                            .sidx = l->sidx,
                            .static_value = l->svalue};
    long k = 0;
    if (l->nhuff) {
        if ((k = huff_decode((const uint8_t *)l->name, l->nlen, buf, QPACK_FIELD_MAX)) < 0)
            return DEC_FAILED;
        f.name = buf, f.nlen = (uint32_t)k;
        f.sidx = static_name(buf, (size_t)k);
    }
    if (l->vhuff) {
        long v = value_decode(d, l->value, l->vlen, buf + k, QPACK_FIELD_MAX - (size_t)k);
        if (v < 0)
            return DEC_FAILED;
        f.value = buf + k, f.vlen = (uint32_t)v;
    }
    return fn(arg, &f);
}

int qpack_dec_section(struct qpack_dec *d, int64_t sid, const uint8_t *p, size_t n, size_t max_list,
                      qpack_field_fn fn, void *arg)
{
    size_t pos = 0;
    uint64_t eric, delta, ric, base;
    if (d->failed)
        return DEC_FAILED;
    if (read_int(p, n, &pos, 8, &eric) != 1 || pos == n)
        return DEC_FAILED;
    bool sign = p[pos] & 0x80;
    if (read_int(p, n, &pos, 7, &delta) != 1)
        return DEC_FAILED;
    /* A blocked section's Required Insert Count was decoded when it came (4.5.1.1 decodes it
     * against the inserts received then): inserts since may have wrapped the encoding. */
    struct qpack_blocked *b = blocked(d, sid);
    if (b)
        ric = b->ric;
    else if (ric_decode(d, eric, &ric) < 0)
        return DEC_FAILED;
    if (sign && delta >= ric)
        return DEC_FAILED;
    base = sign ? ric - delta - 1 : ric + delta;
    if (ric > d->ins)
        return b ? -EAGAIN : block(d, sid, ric);
    unblock(d, b);

    /* First pass: every line read and its references checked, the list's size summed with
     * Huffman strings at their longest; a line past QPACK_FIELD_MAX is counted exactly. */
    struct line kept[LINES_KEPT], l;
    size_t nkept = 0, rest = n; /* where the lines not kept begin */
    uint64_t most = 0;
    bool too_long = false;
    for (size_t at = pos; at < n;) {
        struct line *to = nkept < LINES_KEPT ? &kept[nkept++] : &l;
        if (to == &l && rest == n)
            rest = at;
        if (read_line(d, p, n, &at, base, ric, to) < 0)
            return DEC_FAILED;
        int64_t k = line_len(to, false);
        if (k > QPACK_FIELD_MAX && (k = line_len(to, true)) < 0)
            return DEC_FAILED;
        too_long |= k > QPACK_FIELD_MAX;
        most += (uint64_t)k + ENTRY_OVERHEAD;
    }
    int rc = too_long ? -E2BIG : 0;
    if (rc == 0 && most > max_list) { /* near the bound: count the Huffman strings exactly */
        int64_t total = 0;
        for (size_t i = 0; i < nkept; i++)
            total = add_exact(total, &kept[i]);
        for (size_t at = rest; at < n;) {
            read_line(d, p, n, &at, base, ric, &l);
            total = add_exact(total, &l);
        }
        if (total < 0)
            return DEC_FAILED;
        rc = (uint64_t)total <= max_list ? 0 : -E2BIG;
    }

    /* Second pass: each line to fn. */
    char buf[QPACK_FIELD_MAX]; /* Huffman strings of one line, decoded */
    for (size_t i = 0; rc == 0 && i < nkept; i++)
        rc = deliver(d, &kept[i], buf, fn, arg);
    for (size_t at = rest; rc == 0 && at < n;) {
        read_line(d, p, n, &at, base, ric, &l);
        rc = deliver(d, &l, buf, fn, arg);
    }
    if (rc == DEC_FAILED)
        return rc;
    ack(d, sid, ric);
    uint64_t full = (uint64_t)QPACK_COPY_TABLES * d->max_capacity;
    d->copy_left += (uint64_t)QPACK_COPY_PER_SECTION * d->max_capacity;
    if (d->copy_left > full)
        d->copy_left = full;
    return rc;
}

/* ---- encoding ---- */

/* The bytes of s as a string literal with an nbits length prefix: Huffman when shorter. */
/* Writes s as a string literal with an nbits length prefix (H the bit above, first the bits
 * before): Huffman where shorter. The bytes written, 0 when cap is too small. */
static size_t put_str(uint8_t *out, size_t cap, uint8_t first, unsigned nbits, const char *s,
                      size_t n)
{
    uint8_t huff = (uint8_t)(first | 1u << nbits);
    size_t room = prefint_len(nbits, n), h;
    if (cap >= room + n) { /* Huffman tried in place, given up once no shorter: no counting */
        if (n && (h = huff_encode_short(out + room, s, n, n - 1)) > 0) {
            size_t k = prefint_len(nbits, h);
            if (k < room)
                memmove(out + k, out + room, h);
            return prefint_write(out, huff, nbits, h) + h;
        }
        prefint_write(out, first, nbits, n);
        memcpy(out + room, s, n);
        return room + n;
    }
    h = huff_encoded_len(s, n); /* the plain string does not fit: the code might */
    if (h >= n || prefint_len(nbits, h) + h > cap)
        return 0;
    size_t k = prefint_write(out, huff, nbits, h);
    return k + huff_encode(out + k, s, n);
}

size_t qpack_enc_prefix(uint8_t *out, size_t cap)
{
    if (cap < 2)
        return 0;
    out[0] = 0, out[1] = 0;
    return 2;
}

/* A field whose name has static index si (or -1). */
static size_t enc_field(uint8_t *out, size_t cap, int si, const char *name, size_t nlen,
                        const char *value, size_t vlen)
{
    if (si >= 0) {
        for (unsigned i = (unsigned)si;; i = qpack_static[i].next) {
            const struct qpack_static *s = &qpack_static[i];
            if (s->value_len == vlen && memcmp(s->value, value, vlen) == 0) {
                if (cap < prefint_len(6, i)) /* Indexed, static (4.5.2) */
                    return 0;
                return prefint_write(out, 0xc0, 6, i);
            }
            if (!s->next)
                break;
        }
        /* Literal with Name Reference, static (4.5.4) */
        size_t o = prefint_len(4, (unsigned)si), v;
        if (cap < o || !(v = put_str(out + o, cap - o, 0, 7, value, vlen)))
            return 0;
        prefint_write(out, 0x50, 4, (unsigned)si);
        return o + v;
    }
    /* Literal with Literal Name (4.5.6) */
    size_t o = put_str(out, cap, 0x20, 3, name, nlen), v;
    if (!o || !(v = put_str(out + o, cap - o, 0, 7, value, vlen)))
        return 0;
    return o + v;
}

size_t qpack_enc_field(uint8_t *out, size_t cap, const char *name, size_t nlen, const char *value,
                       size_t vlen)
{
    return enc_field(out, cap, static_name(name, nlen), name, nlen, value, vlen);
}

size_t qpack_enc_status(uint8_t *out, size_t cap, unsigned code)
{
    char digits[10];
    size_t n = 0;
    do
        digits[sizeof(digits) - ++n] = (char)('0' + code % 10);
    while ((code /= 10) && n < sizeof(digits));
    return enc_field(out, cap, 24, NULL, 0, digits + sizeof(digits) - n, n);
}
