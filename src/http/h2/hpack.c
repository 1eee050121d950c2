/* HPACK (RFC 7541); see hpack.h.
 *
 * The dynamic table keeps its entries' bytes in one buffer in insertion order, so an entry is
 * never split and an index is a pointer: insertions append at `end`, evictions move `start`;
 * when `end` reaches the buffer's end the live bytes move to its start, and the buffer is twice
 * the largest live size, so a move comes after at least as many bytes were inserted as it moves.
 *
 * The encoder finds a field in its table through a chain per name bucket (newest first, a few
 * steps at most): a response's fields are looked up on every response, and a table full of
 * stale Date values must not make that a scan. */
#include "http/h2/hpack.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/fieldnames.h"
#include "core/huff.h"
#include "core/prefint.h"
#include "http/h2/hpack_tables.h"

#define ENTRY_OVERHEAD 32 /* RFC 7541 4.1 */
#define BUCKETS 32
#define CHAIN_STEPS 8   /* entries of one bucket compared before giving up (and inserting) */
#define INT_MAX_BITS 28 /* integers past 2^28 are nobody's header length: an error */
#define NAME_MAX_LC 128 /* longer names are sent as literals, lower-cased on the way */
#define MEMO_SLOTS 32   /* pre-encoded fields whose index a connection remembers (a power of 2) */

/* A pre-encoded field's place in one connection's table: inserted when the table's `ins` was
 * seq (so it is entry ins - seq now, while that is below n: entries leave oldest first). */
struct hpack_memo {
    uint64_t key; /* the hpack_pre's id << 8 | the field's number; 0: empty */
    uint32_t seq;
};

/* ---- the dynamic table ---- */

static size_t entry_size(const struct hpack_entry *e)
{
    return (size_t)e->name_len + e->value_len + ENTRY_OVERHEAD;
}

/* Entry i, 0 the newest. */
static struct hpack_entry *table_get(const struct hpack_table *t, unsigned i)
{
    return &t->ent[(t->first + t->n - 1 - i) & (t->ent_cap - 1)];
}

static void table_evict(struct hpack_table *t)
{
    struct hpack_entry *e = &t->ent[t->first];
    t->size -= (uint32_t)entry_size(e);
    t->first = (uint16_t)((t->first + 1) & (t->ent_cap - 1));
    if (--t->n == 0)
        t->start = t->end = 0;
    else
        t->start = t->ent[t->first].off;
}

static void table_shrink(struct hpack_table *t, uint32_t max)
{
    t->max = max;
    while (t->size > max)
        table_evict(t);
}

static void table_free(struct hpack_table *t)
{
    free(t->ent);
    free(t->bytes);
    free(t->bucket);
    free(t->memo); /* sequence numbers start over: what it remembers is void */
    *t = (struct hpack_table){.max = t->max};
}

size_t hpack_table_mem(const struct hpack_table *t)
{
    return (size_t)t->ent_cap * sizeof(*t->ent) + t->bytes_cap +
           (t->bucket ? BUCKETS * sizeof(*t->bucket) : 0) +
           (t->memo ? MEMO_SLOTS * sizeof(*t->memo) : 0);
}

/* Room for one more entry of len bytes (name and value): 0 or -ENOMEM. */
static int table_room(struct hpack_table *t, size_t len)
{
    if (t->n == t->ent_cap) {
        unsigned cap = t->ent_cap ? 2u * t->ent_cap : 8;
        struct hpack_entry *ent = malloc(cap * sizeof(*ent));
        if (!ent)
            return -ENOMEM;
        for (unsigned i = 0; i < t->n; i++)
            ent[i] = t->ent[(t->first + i) & (t->ent_cap - 1)];
        free(t->ent);
        t->ent = ent;
        t->ent_cap = (uint16_t)cap;
        t->first = 0;
    }
    /* An entry of an empty name and value still gets a buffer: its name is a pointer into it
     * (never NULL, which memcpy and the decoder's callers may not be handed). */
    if (t->bytes && t->end + len <= t->bytes_cap)
        return 0;
    size_t live = (size_t)t->end - t->start;
    if (!t->bytes || 2 * (live + len) > t->bytes_cap) {
        size_t cap = 64;
        while (cap < 2 * (live + len))
            cap *= 2;
        char *bytes = realloc(t->bytes, cap);
        if (!bytes)
            return -ENOMEM;
        t->bytes = bytes;
        t->bytes_cap = (uint16_t)(cap < UINT16_MAX ? cap : UINT16_MAX);
    }
    memmove(t->bytes, t->bytes + t->start, live);
    for (unsigned i = 0; i < t->n; i++)
        t->ent[(t->first + i) & (t->ent_cap - 1)].off -= t->start;
    t->end = (uint16_t)live;
    t->start = 0;
    return 0;
}

/* Adds name: value as the newest entry, evicting as needed (RFC 7541 4.4: one larger than the
 * table empties it and is not kept). Returns the entry, NULL when not kept, or sets *err. */
static struct hpack_entry *table_insert(struct hpack_table *t, const char *name, size_t name_len,
                                        const char *value, size_t value_len, int *err)
{
    size_t len = name_len + value_len;
    while (t->n && t->size + len + ENTRY_OVERHEAD > t->max)
        table_evict(t);
    if (len + ENTRY_OVERHEAD > t->max)
        return NULL;
    if ((*err = table_room(t, len)) < 0)
        return NULL;
    struct hpack_entry *e = &t->ent[(t->first + t->n) & (t->ent_cap - 1)];
    *e = (struct hpack_entry){
        .off = t->end, .name_len = (uint16_t)name_len, .value_len = (uint16_t)value_len};
    memcpy(t->bytes + t->end, name, name_len);
    memcpy(t->bytes + t->end + name_len, value, value_len);
    t->end = (uint16_t)(t->end + len);
    t->n++;
    t->size += (uint32_t)(len + ENTRY_OVERHEAD);
    t->ins++;
    return e;
}

/* ---- integers and strings ---- */

/* Reads an integer with an n-bit prefix (RFC 7541 5.1). 1, 0 (more bytes needed), -EPROTO. */
static int read_int(const uint8_t *in, size_t len, size_t *pos, unsigned n, uint32_t *v)
{
    size_t p = *pos;
    uint32_t max = (1u << n) - 1, x = in[p++] & max;
    if (x == max) {
        for (unsigned shift = 0;; shift += 7) {
            if (p == len)
                return 0;
            uint8_t b = in[p++];
            if (shift > INT_MAX_BITS - 7)
                return -EPROTO;
            x += (uint32_t)(b & 0x7f) << shift;
            if (!(b & 0x80))
                break;
        }
    }
    *v = x;
    *pos = p;
    return 1;
}

/* A string literal's header (RFC 7541 5.2): its encoded bytes at in + *at, n of them. */
struct str {
    const uint8_t *at;
    size_t n;
    bool huff;
};

static int read_str(const uint8_t *in, size_t len, size_t *pos, struct str *s)
{
    uint32_t n;
    size_t p = *pos;
    if (p == len)
        return 0;
    s->huff = in[p] & 0x80;
    int rc = read_int(in, len, &p, 7, &n);
    if (rc <= 0)
        return rc;
    if (len - p < n)
        return 0;
    s->at = in + p;
    s->n = n;
    *pos = p + n;
    return 1;
}

/* Decodes s into out (cap bytes; NULL: only checks and counts). The length or -errno. */
static long str_decode(const struct str *s, char *out, size_t cap)
{
    if (s->huff)
        return huff_decode(s->at, s->n, out, cap);
    if (out) {
        if (s->n > cap)
            return -ENOSPC;
        memcpy(out, s->at, s->n);
    }
    return (long)s->n;
}

/* Writes s as a string literal, in Huffman code where shorter unless told not to. */
static size_t write_str(uint8_t *out, const char *s, size_t n, unsigned flags)
{
    size_t h = flags & HPACK_NO_HUFFMAN ? n + 1 : huff_encoded_len(s, n);
    if (h < n || (h == n && (flags & HPACK_HUFFMAN))) {
        size_t i = prefint_write(out, 0x80, 7, h);
        return i + huff_encode(out + i, s, n);
    }
    size_t i = prefint_write(out, 0, 7, n);
    memcpy(out + i, s, n);
    return i + n;
}

/* ---- decoding ---- */

void hpack_dec_init(struct hpack_dec *d, uint32_t limit)
{
    *d = (struct hpack_dec){.limit = limit};
    d->t.max = limit;
}

void hpack_dec_free(struct hpack_dec *d)
{
    table_free(&d->t);
}

/* The name and value of index i (1-based over the static table, then the dynamic one), the
 * name's static index and what token_field_check says of them. Every static field passes. */
static int lookup(const struct hpack_dec *d, uint32_t i, const char **name, size_t *name_len,
                  const char **value, size_t *value_len, uint8_t *sidx, uint8_t *valid)
{
    if (i == 0)
        return -EPROTO;
    if (i <= HPACK_STATIC_N) {
        const struct hpack_static *s = &hpack_static[i - 1];
        *name = s->name, *name_len = s->name_len;
        *value = s->value, *value_len = s->value_len;
        *sidx = (uint8_t)i, *valid = TOKEN_NAME_OK | TOKEN_VALUE_OK;
        return 0;
    }
    if (i - HPACK_STATIC_N > d->t.n)
        return -EPROTO;
    const struct hpack_entry *e = table_get(&d->t, i - HPACK_STATIC_N - 1);
    *name = d->t.bytes + e->off, *name_len = e->name_len;
    *value = *name + e->name_len, *value_len = e->value_len;
    *sidx = e->sidx, *valid = e->valid;
    return 0;
}

int hpack_decode(struct hpack_dec *d, const uint8_t *in, size_t len, size_t *pos, bool first,
                 char *out, size_t cap, size_t gap, struct hpack_field *f)
{
    size_t p = *pos;
    uint32_t v;
    int rc;
    /* The common case first: an indexed field whose index fits its first byte (a browser's
     * or h2load's repeated request fields, one byte each). */
    if (p < len && in[p] > 0x80 && in[p] < 0xff) {
        v = in[p] & 0x7fu;
        if (v <= HPACK_STATIC_N) {
            const struct hpack_static *st = &hpack_static[v - 1];
            *f = (struct hpack_field){st->name,      st->name_len, st->value,
                                      st->value_len, (uint8_t)v,   TOKEN_NAME_OK | TOKEN_VALUE_OK};
        } else if (v - HPACK_STATIC_N <= d->t.n) {
            const struct hpack_entry *e = table_get(&d->t, v - HPACK_STATIC_N - 1);
            const char *name = d->t.bytes + e->off;
            *f = (struct hpack_field){name,         e->name_len, name + e->name_len,
                                      e->value_len, e->sidx,     e->valid};
        } else {
            return -EPROTO;
        }
        *pos = p + 1;
        return 1;
    }
    /* dynamic table size updates (RFC 7541 6.3): only before the block's first field */
    while (p < len && (in[p] & 0xe0) == 0x20) {
        if (!first)
            return -EPROTO;
        if ((rc = read_int(in, len, &p, 5, &v)) <= 0)
            return rc;
        if (v > d->limit)
            return -EPROTO;
        table_shrink(&d->t, v);
        *pos = p;
    }
    if (p == len)
        return 0;

    uint8_t b = in[p];
    const char *name = NULL, *value = NULL;
    size_t name_len = 0, value_len = 0;
    uint8_t sidx = 0, valid = 0;
    if (b & 0x80) { /* indexed field (6.1) */
        if ((rc = read_int(in, len, &p, 7, &v)) <= 0)
            return rc;
        if (lookup(d, v, &name, &name_len, &value, &value_len, &sidx, &valid) < 0)
            return -EPROTO;
        *f = (struct hpack_field){name, name_len, value, value_len, sidx, valid};
        *pos = p;
        return 1;
    }

    /* a literal (6.2): with incremental indexing 01, without 0000, never indexed 0001 */
    bool index = b & 0x40;
    if ((rc = read_int(in, len, &p, index ? 6 : 4, &v)) <= 0)
        return rc;
    struct str sn = {0}, sv;
    if (v && lookup(d, v, &name, &name_len, &value, &value_len, &sidx, &valid) < 0)
        return -EPROTO;
    if (!v && (rc = read_str(in, len, &p, &sn)) <= 0)
        return rc;
    if ((rc = read_str(in, len, &p, &sv)) <= 0)
        return rc;

    /* Everything is here: decode. The name first, then the value behind it. */
    long nl = v ? (long)name_len : str_decode(&sn, out, cap);
    if (nl == -ENOSPC)
        nl = str_decode(&sn, NULL, 0);
    if (nl < 0)
        return (int)nl;
    bool fits = (size_t)nl + gap <= cap;
    if (v && fits)
        memcpy(out, name, name_len);
    long vl = fits ? str_decode(&sv, out + nl + gap, cap - (size_t)nl - gap) : -ENOSPC;
    if (vl == -ENOSPC) {
        fits = false;
        vl = str_decode(&sv, NULL, 0);
    }
    if (vl < 0)
        return (int)vl;
    f->name_len = (size_t)nl, f->value_len = (size_t)vl;
    f->name = fits ? out : NULL;
    f->value = fits ? out + nl + gap : NULL;
    f->sidx = sidx;
    f->valid = 0;
    if (fits) /* checked once here; an entry made of it keeps the answer */
        f->valid =
            (uint8_t)((v ? valid & TOKEN_NAME_OK : token_field_name_ok(f->name, f->name_len)) |
                      token_field_value_ok(f->value, f->value_len));
    if (index) {
        if (!fits && (size_t)(nl + vl) + ENTRY_OVERHEAD <= d->t.max)
            return -ENOSPC;
        int err = 0;
        uint32_t max = d->t.max;
        if (fits) {
            struct hpack_entry *e =
                table_insert(&d->t, f->name, f->name_len, f->value, f->value_len, &err);
            if (e)
                e->sidx = sidx, e->valid = f->valid;
        } else { /* larger than the table: it empties the table (RFC 7541 4.4) */
            table_shrink(&d->t, 0);
            d->t.max = max;
        }
        if (err < 0)
            return err;
    }
    *pos = p;
    return 1;
}

/* ---- encoding ---- */

void hpack_enc_init(struct hpack_enc *e)
{
    *e = (struct hpack_enc){.t.max = HPACK_TABLE_MAX, .update_min = HPACK_TABLE_MAX};
}

void hpack_enc_free(struct hpack_enc *e)
{
    table_free(&e->t);
}

void hpack_enc_set_max(struct hpack_enc *e, uint32_t size)
{
    if (size > HPACK_TABLE_MAX)
        size = HPACK_TABLE_MAX;
    if (size == e->t.max)
        return;
    table_shrink(&e->t, size);
    if (size < e->update_min)
        e->update_min = size;
    e->update = true;
}

void hpack_enc_forget(struct hpack_enc *e)
{
    if (e->t.n == 0 && !e->t.bytes && !e->t.memo)
        return;
    table_free(&e->t);
    e->update_min = 0;
    e->update = true;
}

size_t hpack_enc_begin(struct hpack_enc *e, uint8_t *out)
{
    size_t n = 0;
    if (!e->update)
        return 0;
    if (e->update_min < e->t.max)
        n += prefint_write(out, 0x20, 5, e->update_min);
    n += prefint_write(out + n, 0x20, 5, e->t.max);
    e->update = false;
    e->update_min = e->t.max;
    return n;
}

/* Whether the words x and y are equal, or (fold) differ only in the case of letters where y
 * has a lower-case one: bit 0x20 may differ in a byte of y that has bit 0x40 (a letter; not
 * '-', ':' or a digit, so "\x1astatus" is not ":status"). */
static inline bool word_eq(uint64_t x, uint64_t y, bool fold)
{
    uint64_t d = x ^ y;
    if (fold)
        d &= ~(y >> 1) | ~0x2020202020202020u;
    return d == 0;
}

/* Whether a[0, n) equals b[0, n), in any case of a's letters when `fold` (b lower-case): words
 * of eight or four bytes, the last overlapping the one before; response fields are short, so
 * this costs less than a call to memcmp. */
static inline __attribute__((always_inline)) bool eq_folded(const char *a, const char *b, size_t n,
                                                            bool fold)
{
    uint64_t x, y;
    uint32_t u, v;
    if (n >= 8) {
        for (size_t i = 0;; i += 8) {
            size_t at = i + 8 <= n ? i : n - 8;
            memcpy(&x, a + at, 8), memcpy(&y, b + at, 8);
            if (!word_eq(x, y, fold))
                return false;
            if (at + 8 == n)
                return true;
        }
    }
    if (n >= 4) {
        memcpy(&u, a, 4), memcpy(&v, b, 4);
        bool head = word_eq(u, v, fold);
        memcpy(&u, a + n - 4, 4), memcpy(&v, b + n - 4, 4);
        return head && word_eq(u, v, fold);
    }
    for (size_t i = 0; i < n; i++)
        if (!word_eq((uint8_t)a[i], (uint8_t)b[i], fold))
            return false;
    return true;
}

/* Whether name[0, n) is lower[0, n) in any case. */
static bool fold_eq(const char *name, const char *lower, size_t n)
{
    return eq_folded(name, lower, n, true);
}

/* The first static index with this name (in any case), or 0: one probe and one compare, so
 * that the usual response fields need no lower-casing. */
static unsigned static_name(const char *name, size_t n)
{
    const struct fieldname *f = fieldname_at(name, n);
    return f && f->hpack && fold_eq(name, f->name, n) ? f->hpack : 0;
}

static unsigned bucket_of(unsigned sidx, const char *name, size_t n)
{
    if (sidx)
        return sidx % BUCKETS;
    if (n == 0)
        return 0;
    return (unsigned)(n * 7 + (uint8_t)name[0] + (uint8_t)name[n - 1]) % BUCKETS;
}

/* The dynamic index (62...) holding name: value (a lower-case name, sidx its static index),
 * or 0. */
static unsigned dynamic_find(const struct hpack_table *t, unsigned sidx, const char *name,
                             size_t name_len, const char *value, size_t value_len)
{
    if (!t->bucket || !name_len)
        return 0;
    uint32_t seq1 = t->bucket[bucket_of(sidx, name, name_len)];
    for (unsigned step = 0; seq1 && step < CHAIN_STEPS; step++) {
        uint32_t age = t->ins - seq1; /* 0 for the newest entry */
        if (age >= t->n)
            break; /* evicted, and every older one with it */
        const struct hpack_entry *e = table_get(t, age);
        const char *en = t->bytes + e->off;
        if (e->sidx == sidx && e->name_len == name_len && e->value_len == value_len &&
            eq_folded(en + name_len, value, value_len, false) &&
            (sidx || eq_folded(en, name, name_len, false)))
            return HPACK_STATIC_N + 1 + age;
        seq1 = e->chain;
    }
    return 0;
}

/* Inserts name: value as the peer does on reading its literal with indexing. True when the
 * table kept it (as its newest entry). */
static bool enc_insert(struct hpack_enc *e, unsigned sidx, const char *name, size_t name_len,
                       const char *value, size_t value_len)
{
    struct hpack_table *t = &e->t;
    int err = 0;
    struct hpack_entry *ent = NULL;
    if (t->bucket || (t->bucket = calloc(BUCKETS, sizeof(*t->bucket))))
        ent = table_insert(t, name, name_len, value, value_len, &err);
    else
        err = -ENOMEM;
    if (err < 0) {
        /* Out of memory: the peer inserted it, so evict everything in step with it. The size
         * budget stays, so later fields are inserted and evicted alike. */
        uint32_t max = t->max;
        table_shrink(t, 0);
        t->max = max;
        return false;
    }
    if (!ent)
        return false;
    ent->sidx = (uint8_t)sidx;
    uint32_t *b = &t->bucket[bucket_of(sidx, name, name_len)];
    ent->chain = *b;
    *b = t->ins; /* 1 + this entry's sequence number (ins - 1) */
    return true;
}

size_t hpack_enc_field(struct hpack_enc *e, uint8_t *out, const char *name, size_t name_len,
                       const char *value, size_t value_len, unsigned flags)
{
    char lc[NAME_MAX_LC];
    unsigned sidx = static_name(name, name_len);
    bool short_name = true;
    if (sidx) { /* the whole field in the static table (:status 200, :method GET...)? */
        for (unsigned i = sidx;; i++) {
            const struct hpack_static *s = &hpack_static[i - 1];
            if (s->value_len == value_len && eq_folded(s->value, value, value_len, false))
                return prefint_write(out, 0x80, 7, i);
            if (!s->more)
                break;
        }
        name = hpack_static[sidx - 1].name; /* the lower-case spelling */
    } else if (name_len <= sizeof(lc)) {
        for (size_t i = 0; i < name_len; i++)
            lc[i] = (char)(name[i] >= 'A' && name[i] <= 'Z' ? name[i] | 0x20 : name[i]);
        name = lc;
    } else {
        short_name = false;
    }
    unsigned didx = short_name ? dynamic_find(&e->t, sidx, name, name_len, value, value_len) : 0;
    if (didx)
        return prefint_write(out, 0x80, 7, didx);

    unsigned kind = flags & 3;
    bool index =
        kind == HPACK_INDEX && short_name && name_len + value_len + ENTRY_OVERHEAD <= e->t.max;
    size_t o = index                       ? prefint_write(out, 0x40, 6, sidx)
               : kind == HPACK_NEVER_INDEX ? prefint_write(out, 0x10, 4, sidx)
                                           : prefint_write(out, 0x00, 4, sidx);
    if (!sidx) {
        if (short_name) {
            o += write_str(out + o, name, name_len, flags);
        } else { /* long names lower-cased in place, never Huffman-coded: rare */
            o += prefint_write(out + o, 0, 7, name_len);
            for (size_t i = 0; i < name_len; i++)
                out[o + i] = (uint8_t)(name[i] >= 'A' && name[i] <= 'Z' ? name[i] | 0x20 : name[i]);
            o += name_len;
        }
    }
    o += write_str(out + o, value, value_len, flags);
    if (index)
        enc_insert(e, sidx, name, name_len, value, value_len);
    return o;
}

/* ---- pre-encoded fields ---- */

struct hpack_pre_field {
    uint16_t name_off, name_len, value_off, value_len; /* in bytes: the lower-case name, value */
    uint16_t enc_off, enc_len; /* in bytes: its representation (an index, or a literal) */
    uint8_t sidx;              /* its name's static index, or 0 */
    bool whole;                /* enc is a static index of the whole field: no table entry */
};

struct hpack_pre {
    uint64_t id;
    size_t n, key_len, bound;
    const char *key;            /* in bytes */
    const char *bytes;          /* names, values, representations, key */
    struct hpack_pre_field f[]; /* n of them, bytes behind */
};

struct hpack_pre *hpack_pre_new(const struct hpack_field *f, size_t n, const void *key,
                                size_t key_len, uint64_t id)
{
    if (n > 255 || id == 0 || id >> 56)
        return NULL;
    size_t cap = key_len, bound = 0;
    for (size_t i = 0; i < n; i++) {
        if (f[i].name_len > NAME_MAX_LC || f[i].name_len + f[i].value_len > UINT16_MAX / 4)
            return NULL; /* not worth keeping: such fields take the general path */
        cap += 2 * (f[i].name_len + f[i].value_len) + 12;
        bound += HPACK_FIELD_BOUND(f[i].name_len, f[i].value_len);
    }
    if (cap > UINT16_MAX)
        return NULL;
    struct hpack_pre *p = malloc(sizeof(*p) + n * sizeof(p->f[0]) + cap);
    if (!p)
        return NULL;
    char *b = (char *)&p->f[n];
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        struct hpack_pre_field *pf = &p->f[i];
        const struct hpack_field *in = &f[i];
        unsigned sidx = static_name(in->name, in->name_len);
        *pf = (struct hpack_pre_field){
            .sidx = (uint8_t)sidx, .name_off = (uint16_t)o, .name_len = (uint16_t)in->name_len};
        for (size_t k = 0; k < in->name_len; k++)
            b[o++] =
                (char)(in->name[k] >= 'A' && in->name[k] <= 'Z' ? in->name[k] | 0x20 : in->name[k]);
        pf->value_off = (uint16_t)o;
        pf->value_len = (uint16_t)in->value_len;
        memcpy(b + o, in->value, in->value_len);
        o += in->value_len;
        /* What hpack_enc_field writes for it into an empty table with HPACK_INDEX. */
        uint8_t *enc = (uint8_t *)b + o;
        size_t w = 0;
        for (unsigned s = sidx; s && !w; s++) {
            const struct hpack_static *st = &hpack_static[s - 1];
            if (st->value_len == in->value_len &&
                eq_folded(st->value, in->value, in->value_len, false))
                w = prefint_write(enc, 0x80, 7, s), pf->whole = true;
            if (!st->more)
                break;
        }
        if (!w) {
            w = prefint_write(enc, 0x40, 6, sidx);
            if (!sidx)
                w += write_str(enc + w, b + pf->name_off, in->name_len, 0);
            w += write_str(enc + w, b + pf->value_off, in->value_len, 0);
        }
        pf->enc_off = (uint16_t)o;
        pf->enc_len = (uint16_t)w;
        o += w;
    }
    memcpy(b + o, key, key_len);
    *p = (struct hpack_pre){
        .id = id, .n = n, .key_len = key_len, .bound = bound, .key = b + o, .bytes = b};
    return p;
}

const char *hpack_pre_key(const struct hpack_pre *p, size_t *key_len)
{
    *key_len = p->key_len;
    return p->key;
}

size_t hpack_pre_bound(const struct hpack_pre *p)
{
    return p->bound;
}

/* Remembers that the field `key` is the table's entry inserted when ins was seq. */
static void memo_put(struct hpack_table *t, uint64_t key, uint32_t seq)
{
    if (!t->memo && !(t->memo = calloc(MEMO_SLOTS, sizeof(*t->memo))))
        return; /* forgetting costs only a lookup next time */
    t->memo[(key * 0x9e3779b97f4a7c15u) >> 59 & (MEMO_SLOTS - 1)] =
        (struct hpack_memo){.key = key, .seq = seq};
}

size_t hpack_enc_pre(struct hpack_enc *e, uint8_t *out, const struct hpack_pre *p, unsigned flags)
{
    struct hpack_table *t = &e->t;
    size_t o = 0;
    for (size_t i = 0; i < p->n; i++) {
        const struct hpack_pre_field *f = &p->f[i];
        const char *name = p->bytes + f->name_off, *value = p->bytes + f->value_off;
        if (f->whole) {
            memcpy(out + o, p->bytes + f->enc_off, f->enc_len);
            o += f->enc_len;
            continue;
        }
        if ((flags & 3) != HPACK_INDEX ||
            (size_t)f->name_len + f->value_len + ENTRY_OVERHEAD > t->max) {
            o += hpack_enc_field(e, out + o, name, f->name_len, value, f->value_len, flags);
            continue;
        }
        uint64_t key = p->id << 8 | i;
        if (t->memo) {
            const struct hpack_memo *m =
                &t->memo[(key * 0x9e3779b97f4a7c15u) >> 59 & (MEMO_SLOTS - 1)];
            uint32_t age = t->ins - m->seq;
            if (m->key == key && age < t->n) {
                o += prefint_write(out + o, 0x80, 7, HPACK_STATIC_N + 1 + age);
                continue;
            }
        }
        /* Not remembered: the table may hold it all the same (another file's Content-Type). */
        unsigned didx = dynamic_find(t, f->sidx, name, f->name_len, value, f->value_len);
        if (didx) {
            memo_put(t, key, t->ins - (didx - HPACK_STATIC_N - 1));
            o += prefint_write(out + o, 0x80, 7, didx);
            continue;
        }
        memcpy(out + o, p->bytes + f->enc_off, f->enc_len);
        o += f->enc_len;
        if (enc_insert(e, f->sidx, name, f->name_len, value, f->value_len))
            memo_put(t, key, t->ins);
    }
    return o;
}
