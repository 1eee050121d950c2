/* test_qpack: RFC 9204 Appendix B (B.1 to B.5) decoded, with the decoder stream's bytes; every
 * error of the encoder stream and of field sections; blocked streams; the list-size bound
 * before any copy; the encoder's bytes and round trips through the decoder. Every input ends at
 * a guard page (unit_guard), so an over-read crashes. */
#include "http/h3/qpack.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/huff.h"
#include "unit.h"

/* What a section gave: "name=value" lines, their sidx, and when to stop. */
struct got {
    char text[8192];
    size_t len;
    int n, stop_at, sidx[64];
    bool static_value[64];
};

static int collect(void *arg, const struct qpack_field *f)
{
    struct got *g = arg;
    if (g->n < 64)
        g->sidx[g->n] = f->sidx, g->static_value[g->n] = f->static_value;
    g->len += (size_t)snprintf(g->text + g->len, sizeof(g->text) - g->len, "%s%.*s=%.*s",
                               g->n ? "\n" : "", (int)f->nlen, f->name, (int)f->vlen, f->value);
    return ++g->n == g->stop_at ? 7 : 0;
}

/* The section given in hex, of stream sid, into g (emptied first). */
static int section(struct qpack_dec *d, int64_t sid, const char *hex, size_t max_list,
                   struct got *g)
{
    uint8_t buf[4096];
    size_t n = unit_unhex(hex, buf);
    int stop = g->stop_at;
    *g = (struct got){.stop_at = stop};
    return qpack_dec_section(d, sid, (const uint8_t *)unit_guard(buf, n), n, max_list, collect, g);
}

static int encoder(struct qpack_dec *d, const char *hex)
{
    uint8_t buf[4096];
    size_t n = unit_unhex(hex, buf);
    return qpack_dec_encoder(d, (const uint8_t *)unit_guard(buf, n), n);
}

/* Whether the decoder stream owes exactly the bytes in hex. */
static int owes(struct qpack_dec *d, const char *hex)
{
    uint8_t want[256], out[256];
    size_t n = unit_unhex(hex, want), k = qpack_dec_output(d, out, sizeof(out));
    if (k != n || memcmp(out, want, n) != 0) {
        fprintf(stderr, "  decoder stream: %zu bytes,", k);
        for (size_t i = 0; i < k; i++)
            fprintf(stderr, " %02x", out[i]);
        fprintf(stderr, "; expected %s\n", hex);
        return 0;
    }
    return 1;
}

#define B2_INSERTS "3fbd01 c00f7777772e6578616d706c652e636f6d c10c2f73616d706c652f70617468"
#define B3_INSERT "4a637573746f6d2d6b65790c637573746f6d2d76616c7565"
#define BIG 1 << 20

TEST(qpack_rfc9204_appendix_b)
{
    struct qpack_dec d;
    struct got g = {0};
    qpack_dec_init(&d, 220, 1);

    /* B.1: a literal with a static name reference; no table, nothing to acknowledge */
    CHECK_INT(section(&d, 0, "0000 510b2f696e6465782e68746d6c", BIG, &g), 0);
    CHECK_MEM(g.text, g.len, ":path=/index.html");
    CHECK_INT(g.sidx[0], 1);
    CHECK(owes(&d, ""));
    CHECK(d.bytes == NULL); /* no insert yet: no table */

    /* B.2: capacity 220, two inserts; two post-base references; Section Acknowledgment */
    CHECK_INT(encoder(&d, B2_INSERTS), 0);
    CHECK_INT(d.size, 106);
    CHECK_INT(d.ins, 2);
    CHECK_INT(section(&d, 4, "0381 10 11", BIG, &g), 0);
    CHECK_MEM(g.text, g.len, ":authority=www.example.com\n:path=/sample/path");
    CHECK(g.sidx[0] == 0 && g.sidx[1] == 1);
    CHECK(owes(&d, "84")); /* and no increment: the acknowledgment covered both */

    /* B.3: an insert with a literal name; Insert Count Increment, once */
    CHECK_INT(encoder(&d, B3_INSERT), 0);
    CHECK_INT(d.size, 160);
    CHECK(owes(&d, "01"));
    CHECK(owes(&d, ""));

    /* B.4: the section before the Duplicate it needs: blocked, then cancelled; read again
     * once the Duplicate is in */
    CHECK_INT(section(&d, 8, "0500 80 c1 81", BIG, &g), -EAGAIN);
    CHECK_INT(g.n, 0);
    CHECK_INT(d.nblocked, 1);
    qpack_dec_cancel(&d, 8);
    CHECK_INT(d.nblocked, 0);
    CHECK(owes(&d, "48"));
    CHECK_INT(encoder(&d, "02"), 0);
    CHECK_INT(d.size, 217);
    CHECK_INT(section(&d, 8, "0500 80 c1 81", BIG, &g), 0);
    CHECK_MEM(g.text, g.len, ":authority=www.example.com\n:path=/\ncustom-key=custom-value");
    CHECK(g.sidx[0] == 0 && g.sidx[1] == 1 && g.sidx[2] == -1);
    CHECK(owes(&d, "88"));

    /* B.5: an insert by dynamic name reference evicts entry 0 */
    CHECK_INT(encoder(&d, "810d637573746f6d2d76616c756532"), 0);
    CHECK_INT(d.size, 215);
    CHECK_INT(d.ins, 5);
    CHECK_INT(d.n, 4);
    CHECK(owes(&d, "01"));
    /* absolute 4 is custom-key=custom-value2 (relative 0 from Base 5); absolute 0 is gone */
    CHECK_INT(section(&d, 12, "0600 80", BIG, &g), 0);
    CHECK_MEM(g.text, g.len, "custom-key=custom-value2");
    CHECK(owes(&d, "8c"));
    CHECK_INT(section(&d, 16, "0600 84", BIG, &g), -QPACK_DECOMPRESSION_FAILED);
    qpack_dec_fini(&d);
}

TEST(qpack_encoder_stream_in_any_split)
{
    uint8_t all[256];
    size_t n = unit_unhex(B2_INSERTS B3_INSERT "02 810d637573746f6d2d76616c756532", all);
    for (size_t cut = 1; cut <= 3; cut++) {
        struct qpack_dec d;
        qpack_dec_init(&d, 220, 1);
        for (size_t i = 0; i < n; i += cut) {
            size_t k = n - i < cut ? n - i : cut;
            CHECK_INT(qpack_dec_encoder(&d, (const uint8_t *)unit_guard(all + i, k), k), 0);
        }
        CHECK_INT(d.ins, 5);
        CHECK_INT(d.size, 215);
        CHECK_INT(d.part_len, 0);
        CHECK(d.part == NULL);
        CHECK(owes(&d, "05"));
        qpack_dec_fini(&d);
    }
}

/* An encoder stream that must fail, capacity 220; later calls fail too. */
static void encoder_fails(const char *hex)
{
    struct qpack_dec d;
    struct got g = {0};
    qpack_dec_init(&d, 220, 1);
    int rc = encoder(&d, hex);
    if (rc != -QPACK_ENCODER_STREAM_ERROR)
        fprintf(stderr, "  %s: %d\n", hex, rc);
    CHECK_INT(rc, -QPACK_ENCODER_STREAM_ERROR);
    CHECK_INT(encoder(&d, "20"), -QPACK_ENCODER_STREAM_ERROR);
    CHECK_INT(section(&d, 0, "0000 d1", BIG, &g), -QPACK_DECOMPRESSION_FAILED);
    qpack_dec_fini(&d);
}

TEST(qpack_encoder_stream_errors)
{
    encoder_fails("3fbe01");                 /* capacity 221 over our 220 */
    encoder_fails("3fbd01 ff2400");          /* insert naming static 99 */
    encoder_fails("3fbd01 8000");            /* naming a dynamic entry before any */
    encoder_fails("3fbd01 00");              /* duplicate before any insert */
    encoder_fails("3f01 c000");              /* capacity 32, an entry of 42 */
    encoder_fails("3f01 400141");            /* capacity 32, an entry of 33 */
    encoder_fails("3f21 4000 400141 01");    /* capacity 64: duplicate of the evicted one */
    encoder_fails("3fbd01 62ffff 00");       /* a name that does not decode (EOS) */
    encoder_fails("3fbd01 c0 81ff");         /* a value that does not decode */
    encoder_fails("3fffffffffffffffffff7f"); /* an integer past 2^62 */
    encoder_fails("3fbd01 c07fd201");        /* a value of 337 bytes: too long before it is here */

    struct qpack_dec d;
    qpack_dec_init(&d, 220, 1);
    CHECK_INT(encoder(&d, "3f01 4000"), 0); /* an entry exactly the capacity fits */
    CHECK_INT(d.size, 32);
    CHECK_INT(encoder(&d, "20"), 0); /* capacity 0 empties the table */
    CHECK_INT(d.n, 0);
    CHECK_INT(d.size, 0);
    CHECK_INT(d.ins, 1);
    qpack_dec_fini(&d);

    /* a partial instruction longer than any valid one: refused, not kept */
    qpack_dec_init(&d, 32, 1);
    CHECK_INT(encoder(&d, "3f01 c0 ff"), 0); /* a value length not yet ended */
    uint8_t cont[300];
    memset(cont, 0x80, sizeof(cont));
    CHECK_INT(qpack_dec_encoder(&d, cont, sizeof(cont)), -QPACK_ENCODER_STREAM_ERROR);
    qpack_dec_fini(&d);
}

/* A section that must fail after the encoder stream enc, capacity cap. */
static void section_fails(uint32_t cap, const char *enc, const char *sec)
{
    struct qpack_dec d;
    struct got g = {0};
    qpack_dec_init(&d, cap, 1);
    if (enc)
        CHECK_INT(encoder(&d, enc), 0);
    int rc = section(&d, 4, sec, BIG, &g);
    if (rc != -QPACK_DECOMPRESSION_FAILED)
        fprintf(stderr, "  %s: %d\n", sec, rc);
    CHECK_INT(rc, -QPACK_DECOMPRESSION_FAILED);
    CHECK_INT(g.n, 0);
    qpack_dec_fini(&d);
}

TEST(qpack_section_errors)
{
    section_fails(220, B2_INSERTS, "0e00");      /* Encoded Insert Count past 2 * MaxEntries */
    section_fails(220, NULL, "0800");            /* decodes to 7 > MaxValue 6, cannot wrap */
    section_fails(220, B2_INSERTS, "0281");      /* Base negative: sign with Delta Base = RIC */
    section_fails(220, NULL, "0000 ff24");       /* static 99 */
    section_fails(220, NULL, "0000 5f5400");     /* a name reference to static 99 */
    section_fails(220, B2_INSERTS, "0300 82");   /* relative index equal to the Base */
    section_fails(220, B2_INSERTS, "0200 10");   /* post-base at the Required Insert Count */
    section_fails(220, B2_INSERTS, "0200 00");   /* post-base name reference there too */
    section_fails(220, NULL, "00");              /* prefix cut short */
    section_fails(220, NULL, "0000 5f");         /* line cut short */
    section_fails(220, NULL, "0000 510b2f69");   /* value cut short */
    section_fails(220, NULL, "0000 2f");         /* literal name cut short */
    section_fails(220, NULL, "0000 5181ff");     /* a value that does not decode */
    section_fails(220, NULL, "0000 2a ffff 00"); /* a name that does not decode */
    section_fails(0, NULL, "0100");              /* a dynamic reference with no table */
    section_fails(220, NULL, "ffffffffffffffffffff7f00"); /* an integer past 2^62 */
    /* capacity 64: an entry of 33 evicts the first; a section naming it fails */
    section_fails(64, "3f21 4000 400141", "0200 80");
}

TEST(qpack_blocked_streams)
{
    struct qpack_dec d;
    struct got g = {0};
    qpack_dec_init(&d, 220, 1);
    CHECK_INT(section(&d, 4, "0381 1011", BIG, &g), -EAGAIN);
    CHECK_INT(section(&d, 4, "0381 1011", BIG, &g), -EAGAIN); /* the same stream: still one */
    CHECK_INT(d.nblocked, 1);
    CHECK_INT(section(&d, 8, "0381 1011", BIG, &g), -QPACK_DECOMPRESSION_FAILED); /* one more */
    CHECK_INT(encoder(&d, "3fbd01 c00f7777772e6578616d706c652e636f6d"), 0);
    CHECK_INT(section(&d, 4, "0381 1011", BIG, &g), -EAGAIN); /* one insert is not enough */
    CHECK_INT(encoder(&d, "c10c2f73616d706c652f70617468"), 0);
    CHECK_INT(section(&d, 4, "0381 1011", BIG, &g), 0);
    CHECK_INT(g.n, 2);
    CHECK_INT(d.nblocked, 0);
    CHECK_INT(section(&d, 8, "0481 1011", BIG, &g), -EAGAIN); /* its place is free again */
    CHECK(owes(&d, "84"));
    qpack_dec_fini(&d);

    qpack_dec_init(&d, 0, 0); /* no table: no blocking, no cancellation owed */
    CHECK_INT(section(&d, 4, "0381 1011", BIG, &g), -QPACK_DECOMPRESSION_FAILED);
    qpack_dec_cancel(&d, 4);
    CHECK(owes(&d, ""));
    qpack_dec_fini(&d);
}

/* A blocked section's Required Insert Count is decoded when it comes, not again when it is
 * retried: eight inserts later (MaxEntries 6, FullRange 12) the encoded 3 would read as 14
 * (blocked on), where it is 2: entries 0 and 1, evicted by then (found by fuzz_qpack_diff). */
TEST(qpack_blocked_section_keeps_its_required_insert_count)
{
    struct qpack_dec d;
    struct got g = {0};
    qpack_dec_init(&d, 220, 1);
    CHECK_INT(section(&d, 4, "0381 1011", BIG, &g), -EAGAIN);
    CHECK_INT(encoder(&d, "3fbd01 4000 4000 4000 4000 4000 4000 4000 4000"), 0);
    CHECK_INT(d.ins, 8);
    CHECK_INT(section(&d, 4, "0381 1011", BIG, &g), -QPACK_DECOMPRESSION_FAILED);
    qpack_dec_fini(&d);
}

TEST(qpack_wrapped_required_insert_count)
{
    /* 4.5.1.1's example: 100 bytes, MaxEntries 3, so FullRange 6; ten inserts in, an encoded
     * 4 is 9 (and relative 0 from Base 9 is absolute 8) */
    struct qpack_dec d;
    struct got g = {0};
    qpack_dec_init(&d, 100, 1);
    CHECK_INT(encoder(&d, "3f45"), 0);
    for (int i = 0; i < 10; i++) {
        char hex[16];
        snprintf(hex, sizeof(hex), "4001%02x", 'a' + i); /* "": a..j */
        CHECK_INT(encoder(&d, hex), 0);
    }
    CHECK_INT(section(&d, 4, "0400 80", BIG, &g), 0);
    CHECK_MEM(g.text, g.len, "=i");
    CHECK(owes(&d, "84 01")); /* the acknowledgment covers 9, the increment the tenth */
    qpack_dec_fini(&d);
}

/* Sets d's table to 4096 bytes and inserts one entry "x" whose value is vlen bytes of 'v'
 * (at least 127, at most 4062). */
static void one_entry(struct qpack_dec *d, size_t vlen)
{
    uint8_t ins[4200];
    size_t n = unit_unhex("3fe11f 4178 7f", ins), v = vlen - 127; /* capacity 4096; "x" */
    for (; v >= 128; v >>= 7)
        ins[n++] = (uint8_t)(0x80 | (v & 0x7f));
    ins[n++] = (uint8_t)v;
    memset(ins + n, 'v', vlen);
    CHECK_INT(qpack_dec_encoder(d, ins, n + vlen), 0);
}

TEST(qpack_list_bound_before_any_copy)
{
    struct qpack_dec d;
    struct got g = {0};
    qpack_dec_init(&d, 220, 1);
    CHECK_INT(encoder(&d, B2_INSERTS), 0);
    /* 57 + 49 > 64: nothing reaches fn, the section still counts as acknowledged */
    CHECK_INT(section(&d, 4, "0381 1011", 105, &g), -E2BIG);
    CHECK_INT(g.n, 0);
    CHECK(owes(&d, "84"));
    CHECK_INT(section(&d, 8, "0381 1011", 106, &g), 0); /* exactly the bound passes */
    CHECK_INT(g.n, 2);
    CHECK(owes(&d, "88"));
    qpack_dec_fini(&d);

    /* A QPACK bomb: a 4 KiB entry named 3000 times by one byte each. */
    qpack_dec_init(&d, 4096, 1);
    one_entry(&d, 4062);
    CHECK_INT(d.size, 4095);
    size_t n;
    uint8_t bomb[3002] = {0x02, 0x00};
    g = (struct got){0};
    memset(bomb + 2, 0x80, 3000);
    CHECK_INT(qpack_dec_section(&d, 4, (const uint8_t *)unit_guard(bomb, sizeof(bomb)),
                                sizeof(bomb), 65536, collect, &g),
              -E2BIG);
    CHECK_INT(g.n, 0);
    qpack_dec_fini(&d);

    /* Huffman strings: counted exactly only when their longest decoding passes the bound. The
     * value "www.example.com" is 12 bytes of Huffman (longest decoding 19): a list of 10 + 15 +
     * 32 = 57 passes a bound of 57, not one of 56. */
    qpack_dec_init(&d, 0, 0);
    CHECK_INT(section(&d, 0, "0000 508c f1e3c2e5f23a6ba0ab90f4ff", 57, &g), 0);
    CHECK_MEM(g.text, g.len, ":authority=www.example.com");
    CHECK_INT(section(&d, 0, "0000 508c f1e3c2e5f23a6ba0ab90f4ff", 56, &g), -E2BIG);
    CHECK_INT(g.n, 0);
    CHECK(owes(&d, "")); /* Required Insert Count 0: nothing to acknowledge */
    /* one line past QPACK_FIELD_MAX (name "x", a value of 16384 bytes): -E2BIG whatever the
     * bound; one byte less passes */
    static uint8_t big[QPACK_FIELD_MAX + 16];
    n = unit_unhex("0000 2178 7f817f", big); /* 127 + 1 + 127 * 128 = 16384 */
    memset(big + n, 'v', QPACK_FIELD_MAX);
    CHECK_INT(qpack_dec_section(&d, 0, big, n + QPACK_FIELD_MAX, BIG, collect, &g), -E2BIG);
    CHECK_INT(g.n, 0);
    n = unit_unhex("0000 2178 7f807f", big); /* 16383 */
    CHECK_INT(qpack_dec_section(&d, 0, big, n + QPACK_FIELD_MAX - 1, BIG, collect, &g), 0);
    CHECK_INT(g.n, 1);
    qpack_dec_fini(&d);
}

/* Duplicates copy a whole entry for one byte of input: past QPACK_COPY_TABLES tables' worth
 * they end the connection (H3_EXCESSIVE_LOAD), and each field section decoded allows
 * QPACK_COPY_PER_SECTION tables more. Without the bound 1 MiB of them copied 4 GB. */
TEST(qpack_duplicates_copy_within_an_allowance)
{
    struct qpack_dec d;
    struct got g;
    qpack_dec_init(&d, 4096, 0);
    one_entry(&d, 2014);
    const uint8_t dup = 0x00; /* Duplicate of the newest entry: 2,015 bytes copied */
    for (int i = 0; i < QPACK_COPY_TABLES * 4096 / 2015; i++) /* 32 */
        CHECK_INT(qpack_dec_encoder(&d, &dup, 1), 0);
    CHECK_INT((int)d.copy_left, QPACK_COPY_TABLES * 4096 - 32 * 2015); /* 1,056: no 33rd */
    /* a field section decoded: two tables' worth more (9,248), so four more pass, not five */
    CHECK_INT(section(&d, 0, "0000 d1", 65536, &g), 0);
    for (int i = 0; i < 4; i++)
        CHECK_INT(qpack_dec_encoder(&d, &dup, 1), 0);
    CHECK_INT(qpack_dec_encoder(&d, &dup, 1), -QPACK_EXCESSIVE_LOAD);
    CHECK_INT(qpack_dec_encoder(&d, &dup, 1), -QPACK_ENCODER_STREAM_ERROR); /* failed since */
    qpack_dec_fini(&d);
}

TEST(qpack_field_lines_of_every_kind)
{
    struct qpack_dec d;
    struct got g = {0};
    qpack_dec_init(&d, 220, 1);
    CHECK_INT(encoder(&d, B2_INSERTS B3_INSERT), 0);
    /* Base 1 (RIC 3, sign, delta 1): relative 0 is :authority, post-base 0 is :path, post-base
     * 1 custom-key; a post-base name reference; a literal name spelled as the static one */
    CHECK_INT(section(&d, 4, "0481 80 10 11 0003616263 23666f6f0162 2361676501 31 c1", BIG, &g), 0);
    CHECK_MEM(g.text, g.len,
              ":authority=www.example.com\n:path=/sample/path\ncustom-key=custom-value\n"
              ":path=abc\nfoo=b\nage=1\n:path=/");
    CHECK(g.sidx[0] == 0 && g.sidx[1] == 1 && g.sidx[2] == -1 && g.sidx[3] == 1);
    CHECK(g.sidx[4] == -1 && g.sidx[5] == 2 && g.sidx[6] == 1);
    /* only the static indexed line's value is the table's (h3req scans the others) */
    for (int i = 0; i < 6; i++)
        CHECK(!g.static_value[i]);
    CHECK(g.static_value[6]);
    /* fn's nonzero value comes back as is, and the section is acknowledged */
    CHECK(owes(&d, "84"));
    g.stop_at = 2;
    CHECK_INT(section(&d, 8, "0481 80 10 11", BIG, &g), 7);
    CHECK_INT(g.n, 2);
    CHECK(owes(&d, "88"));
    qpack_dec_fini(&d);
}

/* Huffman values are decoded once and then taken from the decoder's memo (four of them, round
 * robin, coded in 24 bytes at most): every value comes out as sent, whether remembered,
 * pushed out by others, of the same coded length as a remembered one, or too long to keep;
 * an invalid code is refused every time, never remembered. */
TEST(qpack_huffman_values_remembered)
{
    static const char *const vals[] = {"a.test:443",
                                       "quic-go HTTP/3",
                                       "gzip",
                                       "/one",
                                       "/two",
                                       "a.test:444",
                                       "x-a-value-longer-than-what-the-memo-keeps-0123456789"};
    struct qpack_dec d;
    struct got g = {0};
    qpack_dec_init(&d, 0, 0);
    for (int round = 0; round < 3; round++) {
        for (size_t i = 0; i < sizeof(vals) / sizeof(vals[0]); i++) {
            /* RIC 0, base 0; :authority by its static name, the value Huffman-coded */
            uint8_t sec[128] = {0x00, 0x00, 0x50};
            size_t h = huff_encode(sec + 4, vals[i], strlen(vals[i]));
            CHECK(h < 127 && h < strlen(vals[i]));
            sec[3] = (uint8_t)(0x80 | h);
            g = (struct got){0};
            CHECK_INT(qpack_dec_section(&d, 0, (const uint8_t *)unit_guard(sec, h + 4), h + 4, BIG,
                                        collect, &g),
                      0);
            char want[96];
            snprintf(want, sizeof(want), ":authority=%s", vals[i]);
            CHECK_MEM(g.text, g.len, want);
        }
        /* a bad code (all ones: EOS) is refused, and refused again the next round */
        CHECK_INT(section(&d, 0, "0000 50 88 ffffffffffffffff", BIG, &g),
                  -QPACK_DECOMPRESSION_FAILED);
    }
    qpack_dec_fini(&d);
}

/* Past the 40 lines the first pass keeps, the rest are read again: 100 lines, in order; and
 * the exact count near the bound covers both. */
TEST(qpack_long_sections_in_order)
{
    static uint8_t sec[2 + 100 * 10];
    static char want[100 * 16];
    struct qpack_dec d;
    static struct got g;
    size_t n = 2, w = 0;
    sec[0] = sec[1] = 0;
    for (int i = 0; i < 100; i++) { /* alternately :status 200 and x=<i> (its value in Huffman) */
        if (i % 2 == 0) {
            sec[n++] = 0xd9;
            w += (size_t)snprintf(want + w, sizeof(want) - w, "%s:status=200", i ? "\n" : "");
        } else {
            char v[12];
            snprintf(v, sizeof(v), "%02d", i);
            sec[n++] = 0x21, sec[n++] = 'x';
            size_t h = huff_encode(sec + n + 1, v, 2);
            sec[n] = (uint8_t)(0x80 | h), n += 1 + h;
            w += (size_t)snprintf(want + w, sizeof(want) - w, "\nx=%s", v);
        }
    }
    qpack_dec_init(&d, 0, 0);
    g = (struct got){0};
    const uint8_t *in = (const uint8_t *)unit_guard(sec, n);
    CHECK_INT(qpack_dec_section(&d, 0, in, n, BIG, collect, &g), 0);
    CHECK_INT(g.n, 100);
    CHECK_MEM(g.text, g.len, want);
    /* 50 * (7 + 3 + 32) + 50 * (1 + 2 + 32) = 3850, but 3900 with the two-byte Huffman values
     * at their longest (three characters): counted exactly */
    g = (struct got){0};
    CHECK_INT(qpack_dec_section(&d, 0, in, n, 3850, collect, &g), 0);
    CHECK_INT(g.n, 100);
    CHECK_INT(qpack_dec_section(&d, 0, in, n, 3849, collect, &g), -E2BIG);
    qpack_dec_fini(&d);
}

TEST(qpack_decoder_stream_in_pieces)
{
    struct qpack_dec d;
    uint8_t out[4];
    qpack_dec_init(&d, 220, 1);
    for (int64_t sid = 0; sid < 200; sid += 4)
        qpack_dec_cancel(&d, sid); /* 16 of one byte (0..60), 32 of two, 2 of three */
    size_t total = 0, k;
    while ((k = qpack_dec_output(&d, out, 3)) > 0) {
        if (total == 0)
            CHECK(out[0] == 0x40 && out[1] == 0x44 && out[2] == 0x48);
        total += k;
    }
    CHECK_INT(total, 16 + 32 * 2 + 2 * 3);
    /* more than QPACK_OUT_MAX bytes owed: the newest are dropped, none is cut */
    for (int64_t sid = 0; sid < 4000; sid += 4)
        qpack_dec_cancel(&d, sid);
    CHECK(d.out_len <= QPACK_OUT_MAX && d.out_len > QPACK_OUT_MAX - 3);
    qpack_dec_fini(&d);
}

/* Encodes fields (name, value pairs, NULL-ended) after :status, decodes them again. */
static void round_trip(unsigned status, const char *const *f, const char *want_hex)
{
    uint8_t buf[2048], scratch[2048];
    char want[4096];
    size_t o = qpack_enc_prefix(buf, sizeof(buf)), w;
    o += qpack_enc_status(buf + o, sizeof(buf) - o, status);
    w = (size_t)snprintf(want, sizeof(want), ":status=%u", status);
    for (; *f; f += 2) {
        size_t k =
            qpack_enc_field(buf + o, sizeof(buf) - o, f[0], strlen(f[0]), f[1], strlen(f[1]));
        /* one byte short: refused (tried elsewhere: a refused field may have written) */
        CHECK_INT(qpack_enc_field(scratch, k - 1, f[0], strlen(f[0]), f[1], strlen(f[1])), 0);
        o += k;
        w += (size_t)snprintf(want + w, sizeof(want) - w, "\n%s=%s", f[0], f[1]);
    }
    if (want_hex) {
        uint8_t exp[256];
        size_t n = unit_unhex(want_hex, exp);
        CHECK_INT(o, n);
        CHECK(memcmp(buf, exp, n) == 0);
        if (memcmp(buf, exp, n) != 0)
            for (size_t i = 0; i < o; i++)
                fprintf(stderr, " %02x%s", buf[i], i + 1 == o ? "\n" : "");
    }
    struct qpack_dec d;
    struct got g = {0};
    qpack_dec_init(&d, 0, 0);
    CHECK_INT(qpack_dec_section(&d, 0, (const uint8_t *)unit_guard(buf, o), o, BIG, collect, &g),
              0);
    CHECK_MEM(g.text, g.len, want);
    CHECK_INT(g.sidx[0], 24);
    qpack_dec_fini(&d);
}

TEST(qpack_encoder_round_trips)
{
    /* static whole fields: one byte each (:status 200, text/html; charset=utf-8) */
    static const char *const html[] = {"content-type", "text/html; charset=utf-8", NULL};
    round_trip(200, html, "0000 d9 f4");
    /* a static name and a literal value; Huffman only where shorter ("1024" is 3 bytes) */
    static const char *const len[] = {"content-length", "1024", NULL};
    round_trip(404, len, "0000 db 5483 0804d7");
    static const char *const typical[] = {"server",
                                          "ringhttpd",
                                          "date",
                                          "Thu, 26 Nov 2026 19:00:00 GMT",
                                          "content-type",
                                          "text/css",
                                          "accept-ranges",
                                          "bytes",
                                          "etag",
                                          "\"6760e9f3-400\"",
                                          "last-modified",
                                          "Mon, 16 Dec 2024 03:17:07 GMT",
                                          "vary",
                                          "accept-encoding",
                                          "alt-svc",
                                          "h3=\":443\"; ma=86400",
                                          "x-custom",
                                          "",
                                          "x-a",
                                          "\x01\xff",
                                          NULL};
    round_trip(206, typical, NULL);
    /* every status the static table has, and a few it has not */
    static const unsigned codes[] = {103, 200, 304, 404, 503, 100, 204, 206, 302,
                                     400, 403, 421, 425, 500, 301, 418, 999};
    static const char *const none[] = {NULL};
    for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++)
        round_trip(codes[i], none, NULL);
    uint8_t b[8];
    CHECK_INT(qpack_enc_status(b, sizeof(b), 200), 1);
    CHECK_INT(b[0], 0xd9);
    CHECK_INT(qpack_enc_status(b, sizeof(b), 500), 2); /* static 71: 0xff then 71 - 63 */
    CHECK(b[0] == 0xff && b[1] == 0x08);
    CHECK_INT(qpack_enc_status(b, sizeof(b), 418), 6); /* name 24, "418" as it is (17 bits) */
    CHECK(memcmp(b,
                 "\x5f\x09\x03"
                 "418",
                 6) == 0);
    CHECK_INT(qpack_enc_status(b, 5, 418), 0);
    CHECK_INT(qpack_enc_prefix(b, 1), 0);
}
