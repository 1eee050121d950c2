/* hpack: HTTP/2 header compression (RFC 7541) for a server: a decoder for the header blocks a
 * client sends, with its bounded dynamic table, and an encoder for responses, whose table keeps
 * the fields that repeat across responses (server, content-type, cache-control...) so that each
 * costs one byte after its first response on a connection.
 * Must not: hold more than its table's size (SETTINGS_HEADER_TABLE_SIZE, at most HPACK_TABLE_MAX)
 * of fields, or keep a pointer to the caller's bytes after a call returns.
 * Ownership: one decoder and one encoder per connection (one thread). A table's storage is
 * allocated when its first entry arrives and grows with its entries (an idle connection whose
 * peer indexes nothing holds none); hpack_*_free gives it back. */
#ifndef H2_HPACK_H
#define H2_HPACK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/token.h"

#define HPACK_TABLE_MAX 4096 /* the largest dynamic table either side keeps, bytes */

struct hpack_entry {
    uint32_t chain; /* encoder: 1 + the sequence number of the previous entry of its bucket */
    uint16_t off;   /* name at bytes + off, value right behind it */
    uint16_t name_len, value_len;
    uint8_t sidx;  /* the static index of its name, or 0 (decoder: when it came indexed) */
    uint8_t valid; /* decoder: its TOKEN_NAME_OK | TOKEN_VALUE_OK, checked once at insertion */
};

/* A dynamic table (RFC 7541 2.3.2): entries in a ring, their bytes in one buffer, oldest first. */
struct hpack_table {
    struct hpack_entry *ent; /* ent_cap entries (a power of two), the oldest at [first] */
    char *bytes;             /* bytes_cap bytes, live from start to end */
    uint32_t *bucket;        /* encoder only: 1 + the newest entry's sequence number per name */
    struct hpack_memo *memo; /* encoder only: where pre-encoded fields (hpack_pre) went */
    uint32_t size;           /* RFC 7541 4.1: names, values and 32 per entry */
    uint32_t max;            /* the size it may reach now */
    uint32_t ins;            /* entries inserted so far (sequence numbers) */
    uint16_t n, first, ent_cap, start, end, bytes_cap;
};

struct hpack_field {
    const char *name;
    size_t name_len;
    const char *value;
    size_t value_len;
    /* Decoding: the static table index (1..61) of the name when the field named it by index,
     * directly or through a dynamic entry that did (so a caller recognises :method, :path,
     * host... by number, with no string compare), else 0; and whether the field is one HTTP/2
     * may carry (token_field_check), known without a scan when it came from a table. */
    uint8_t sidx;
    uint8_t valid;
};

/* ---- decoding ---- */

struct hpack_dec {
    struct hpack_table t;
    uint32_t limit; /* the SETTINGS_HEADER_TABLE_SIZE we sent: a size update may not exceed it */
};

void hpack_dec_init(struct hpack_dec *d, uint32_t limit);
void hpack_dec_free(struct hpack_dec *d);

/* Decodes the field line at in[*pos, len), and the dynamic table size updates before it when
 * `first` (no field line of this header block decoded yet; later ones are an error).
 *
 * An indexed field (RFC 7541 6.1) is not copied: f->name and f->value point into the static
 * or the dynamic table, valid until the next call (so a field named again and again, an HPACK
 * bomb, costs no copy). A literal's name goes to out and its value `gap` bytes behind the
 * name's end (room for the caller's separator), when name_len + gap + value_len <= cap;
 * otherwise f->name and f->value are NULL, the lengths are still set, and nothing is copied.
 * A literal the table keeps must be copied: it fits whenever cap >= HPACK_TABLE_MAX + gap
 * (-ENOSPC otherwise).
 *
 * f->sidx and f->valid are set as struct hpack_field says (valid: 0 when not copied).
 *
 * Returns 1 (a field, *pos past it), 0 when in[*pos, len) ends inside the representation (*pos
 * is past any size update read; call again with more bytes), -EPROTO on a decoding error
 * (COMPRESSION_ERROR: the connection must end), -ENOMEM, -ENOSPC. */
int hpack_decode(struct hpack_dec *d, const uint8_t *in, size_t len, size_t *pos, bool first,
                 char *out, size_t cap, size_t gap, struct hpack_field *f);

/* ---- encoding ---- */

struct hpack_enc {
    struct hpack_table t;
    uint32_t update_min; /* the smallest size set since the last block, to be signalled */
    bool update;         /* a size update is due at the next block's start */
};

#define HPACK_INDEX 0        /* add the field to the table (when it fits) */
#define HPACK_NO_INDEX 1     /* literal without indexing */
#define HPACK_NEVER_INDEX 2  /* literal never indexed (sensitive) */
#define HPACK_NO_HUFFMAN 4   /* strings as they are, even where Huffman is shorter */
#define HPACK_HUFFMAN 8      /* Huffman code even where it is as long (RFC 7541 C.4, C.6) */
#define HPACK_UPDATE_BOUND 8 /* hpack_enc_begin writes at most this */
/* The bytes hpack_enc_field may write for a field of these lengths. */
#define HPACK_FIELD_BOUND(name_len, value_len) ((name_len) + (value_len) + 12)

void hpack_enc_init(struct hpack_enc *e);
void hpack_enc_free(struct hpack_enc *e);

/* The peer's SETTINGS_HEADER_TABLE_SIZE: the table shrinks at once (entries are evicted) and
 * the next block begins with the size update. */
void hpack_enc_set_max(struct hpack_enc *e, uint32_t size);

/* Forgets the table and frees its storage (an idle connection): the next block starts with a
 * size update to 0 and back, so that the peer's copy empties too. */
void hpack_enc_forget(struct hpack_enc *e);

/* Starts a header block: writes the size updates due (at most HPACK_UPDATE_BOUND bytes).
 * Returns the bytes written. */
size_t hpack_enc_begin(struct hpack_enc *e, uint8_t *out);

/* Encodes the field name: value (a name in any case, a token: it is sent in lower case) as an index
 * when the static or dynamic table holds it, else as a literal (flags above), its strings in
 * Huffman code where that is shorter. out has room for HPACK_FIELD_BOUND. Returns the bytes
 * written. */
size_t hpack_enc_field(struct hpack_enc *e, uint8_t *out, const char *name, size_t name_len,
                       const char *value, size_t value_len, unsigned flags);

/* ---- pre-encoded fields ----
 *
 * Fields that every response of one thing carries unchanged (a cached file version's
 * Last-Modified, ETag, Content-Type, Content-Length...), encoded once and kept with it: their
 * literal-with-incremental-indexing bytes depend on no connection, so a connection's first use
 * copies them and inserts the field; the index its table gave each one is remembered per
 * connection (a small memo keyed by the fields' id), so later responses send one index byte
 * without looking anything up. A connection's table still decides: evicted entries are seen by
 * their sequence number, and a table too small, or a block that must not index, encodes the
 * field as hpack_enc_field would.
 * Ownership: one malloc'd block (free() it), immutable once made; any number of connections
 * use it. Its id must never be reused by another set of fields while a connection lives that
 * may have seen it (the file cache's counter). */
struct hpack_pre;

/* Makes the pre-encoded form of fields f[0, n) (names in any case, at most 255 fields), with id
 * (non-zero), keeping key[0, key_len) verbatim for the caller to recognise the fields by (their
 * text in a response). NULL when memory is short or n is too large. */
struct hpack_pre *hpack_pre_new(const struct hpack_field *f, size_t n, const void *key,
                                size_t key_len, uint64_t id);
/* The key given to hpack_pre_new. */
const char *hpack_pre_key(const struct hpack_pre *p, size_t *key_len);
/* The bytes hpack_enc_pre may write (at most one field's HPACK_FIELD_BOUND per field). */
size_t hpack_pre_bound(const struct hpack_pre *p);
/* Encodes p's fields as hpack_enc_field would, with the same flags (HPACK_INDEX or
 * HPACK_NO_INDEX). out has room for hpack_pre_bound(p). Returns the bytes written. */
size_t hpack_enc_pre(struct hpack_enc *e, uint8_t *out, const struct hpack_pre *p, unsigned flags);

/* Memory the tables hold (for tests and the session's accounting). */
size_t hpack_table_mem(const struct hpack_table *t);

#endif
