/* qpack: HTTP/3 field compression (RFC 9204) for a server, sans-I/O: a decoder for the peer's
 * encoder stream and request field sections, with its bounded dynamic table, blocked streams
 * and the bytes our decoder stream owes; and an encoder for responses that uses the static table
 * and literals only (never a dynamic table: our encoder stream stays empty and no client waits
 * on it).
 * Must not: allocate per field, keep a pointer to the caller's bytes after a call returns, keep
 * more entries than the capacity its owner allowed (max_capacity) holds, or know nghttp3.
 * Ownership: one struct qpack_dec per connection (one thread), embedded by its owner; its table
 * is allocated at the first insert (2 * max_capacity bytes, so that no insert waits on moving
 * the live ones, and one slot per 32 bytes of it) and freed by qpack_dec_fini, so an idle
 * connection whose peer inserts nothing holds none. A Duplicate or a name reference copies its
 * entry (at most a capacity's bytes for an instruction of one or two), as nginx's decoder does.
 *
 * Interface as agreed with h3 (briefs/qpack_api.md), refined: a field's name and value are valid
 * during fn's call (the static table's forever); sidx is the static table's FIRST index with the
 * name (":status" is always 24, "content-type" 44), whether the line named it by reference or
 * spelled it out. */
#ifndef H3_QPACK_H
#define H3_QPACK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Error codes (RFC 9204 6): returned negated. */
#define QPACK_DECOMPRESSION_FAILED 0x200
#define QPACK_ENCODER_STREAM_ERROR 0x201
#define QPACK_DECODER_STREAM_ERROR 0x202
#define QPACK_EXCESSIVE_LOAD 0x107 /* H3_EXCESSIVE_LOAD (RFC 9114 8.1): see qpack_dec_encoder */
/* Bytes inserts may copy from the table (Duplicate, a dynamic name reference), in tables'
 * worth: QPACK_COPY_TABLES at first and at most, QPACK_COPY_PER_SECTION more per section. */
#define QPACK_COPY_TABLES 16
#define QPACK_COPY_PER_SECTION 2

#define QPACK_BLOCKED_MAX 64     /* max_blocked is at most this */
#define QPACK_FIELD_MAX 16384    /* a field line whose decoded name + value is longer: -E2BIG */
#define QPACK_OUT_MAX 256        /* decoder-stream bytes that wait for qpack_dec_output */
#define QPACK_CAPACITY_MAX 65536 /* max_capacity is at most this */

struct qpack_field {
    const char *name, *value; /* valid during fn's call */
    uint32_t nlen, vlen;
    int16_t sidx;      /* the QPACK static table's first index with this name, else -1: lets h3
                          recognise :method, :path, :authority... by number */
    bool static_value; /* the value is the static table's too (an indexed static line) */
};
/* Called for each field line; nonzero stops the section. It must not call into the decoder. */
typedef int (*qpack_field_fn)(void *arg, const struct qpack_field *f);

struct qpack_entry; /* qpack.c's: where an entry's bytes are, and its name's sidx */

struct qpack_blocked {
    int64_t sid;
    uint64_t ric; /* its section's Required Insert Count, decoded when the section came */
};

/* A Huffman-coded value decoded before, kept with what it decoded to (qpack_dec's memo). */
#define QPACK_MEMO 4     /* values kept, round robin */
#define QPACK_MEMO_IN 24 /* their coded length at most */
struct qpack_memo {
    uint8_t in_len, out_len; /* in_len 0: empty */
    uint8_t in[QPACK_MEMO_IN];
    char out[QPACK_MEMO_IN * 8 / 5]; /* no code is shorter than 5 bits */
};

struct qpack_dec {
    struct qpack_entry *ent; /* ent_cap of them (a power of two), entry a at [a & (ent_cap-1)] */
    char *bytes;             /* 2 * max_capacity: entries' names and values, live [start, end) */
    uint8_t *part;           /* a partial encoder-stream instruction, part_len bytes */
    uint64_t ins;            /* Insert Count: entries inserted so far */
    uint64_t known;          /* Known Received Count, as our decoder stream has told it */
    uint32_t max_capacity, capacity, size; /* size: RFC 9204 3.2.1, names + values + 32 each */
    uint32_t n, ent_cap, start, end, part_len;
    uint32_t max_blocked, nblocked, out_len;
    uint64_t copy_left; /* bytes inserts may still copy from the table (QPACK_COPY_TABLES) */
    bool failed;        /* an encoder stream error: nothing more is decoded */
    struct qpack_blocked blocked[QPACK_BLOCKED_MAX]; /* the streams waiting for inserts */
    uint8_t out[QPACK_OUT_MAX]; /* what our decoder stream owes, before the increment */
    /* A client that keeps no dynamic table for us (quic-go) codes the same :authority,
     * user-agent and accept-encoding anew in every request: decoding them was ~900 of an
     * HTTP/3 request's ~22,000 instructions, a compare and a copy are ~75 each. */
    struct qpack_memo memo[QPACK_MEMO];
    uint8_t memo_next;
};

/* max_capacity: our SETTINGS_QPACK_MAX_TABLE_CAPACITY (at most QPACK_CAPACITY_MAX); max_blocked:
 * our SETTINGS_QPACK_BLOCKED_STREAMS (at most QPACK_BLOCKED_MAX). */
void qpack_dec_init(struct qpack_dec *d, uint32_t max_capacity, uint32_t max_blocked);
void qpack_dec_fini(struct qpack_dec *d);

/* Bytes of the peer's encoder stream, in order, any split (a partial instruction is kept,
 * bounded by what a valid one can be). 0, -QPACK_ENCODER_STREAM_ERROR (capacity over our max,
 * entry larger than the capacity, bad index, bad Huffman, integer overflow; every later call
 * fails too), -QPACK_EXCESSIVE_LOAD when inserts that copy from the table pass their allowance
 * (a Duplicate is one byte of input and copies up to the whole table: without a bound 9 MB/s of
 * them kept a core busy; the allowance grows with the field sections decoded, as a client's
 * legitimate duplicates do), or -ENOMEM. */
int qpack_dec_encoder(struct qpack_dec *d, const uint8_t *p, size_t n);

/* One encoded field section (a HEADERS frame's payload, whole) of stream sid: each field line
 * to fn in order. 0; -EAGAIN when its Required Insert Count is past the entries received
 * (the stream is blocked: the caller keeps the bytes and calls again after more encoder
 * input; more than max_blocked streams blocked at once is -QPACK_DECOMPRESSION_FAILED);
 * -E2BIG when the decoded list's size (RFC 9114 4.2.2: name + value + 32 per field) passes
 * max_list, or one field's name + value passes QPACK_FIELD_MAX, found BEFORE any string is
 * copied or Huffman-decoded into memory (the caller answers 431, the connection lives; the
 * section still counts as acknowledged); fn's nonzero value is returned as is (acknowledged
 * too); -QPACK_DECOMPRESSION_FAILED for anything malformed (fn may have seen lines before it:
 * the connection ends). */
int qpack_dec_section(struct qpack_dec *d, int64_t sid, const uint8_t *p, size_t n, size_t max_list,
                      qpack_field_fn fn, void *arg);

/* A stream reset or abandoned before its section was decoded (RFC 9204 4.4.2). */
void qpack_dec_cancel(struct qpack_dec *d, int64_t sid);

/* What our decoder stream must carry next: Section Acknowledgments (each section decoded with
 * a Required Insert Count > 0), Stream Cancellations, and an Insert Count Increment for entries
 * received and not yet acknowledged. Copies up to cap bytes to out (the rest stays for the next
 * call: a stream may be cut anywhere); returns the count (0: nothing pending). When more than
 * QPACK_OUT_MAX bytes of acknowledgments pile up between two calls, the newest are dropped: the
 * peer's encoder then keeps their entries longer, which costs it compression, not correctness.
 * Call it after each batch of sections. */
size_t qpack_dec_output(struct qpack_dec *d, uint8_t *out, size_t cap);

/* Encoder: static table and literals only. Huffman only where it is shorter. Each returns the
 * bytes written, 0 when cap is too small (what it wrote into out then means nothing). */
size_t qpack_enc_prefix(uint8_t *out, size_t cap); /* Required Insert Count 0, Base 0 */
size_t qpack_enc_status(uint8_t *out, size_t cap, unsigned code); /* :status, 100..999 */
size_t qpack_enc_field(uint8_t *out, size_t cap, const char *name, size_t nlen, const char *value,
                       size_t vlen); /* lower-case name given */

#endif
