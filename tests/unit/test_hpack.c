/* test_hpack: RFC 7541 Appendix C (C.2 to C.6) both ways, with and without Huffman coding; the
 * decoder's errors and bounds; the encoder's one byte per repeated response field. */
#include "http/h2/hpack.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/huff.h"
#include "core/huff_tables.h"
#include "unit.h"

struct pair {
    const char *name, *value;
};

#define DATE1 "Mon, 21 Oct 2013 20:13:21 GMT"
#define DATE2 "Mon, 21 Oct 2013 20:13:22 GMT"
#define COOKIE "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1"

static const struct pair req1[] = {{":method", "GET"},
                                   {":scheme", "http"},
                                   {":path", "/"},
                                   {":authority", "www.example.com"},
                                   {0}};
static const struct pair req2[] = {{":method", "GET"},
                                   {":scheme", "http"},
                                   {":path", "/"},
                                   {":authority", "www.example.com"},
                                   {"cache-control", "no-cache"},
                                   {0}};
static const struct pair req3[] = {{":method", "GET"},
                                   {":scheme", "https"},
                                   {":path", "/index.html"},
                                   {":authority", "www.example.com"},
                                   {"custom-key", "custom-value"},
                                   {0}};
static const struct pair resp1[] = {{":status", "302"},
                                    {"cache-control", "private"},
                                    {"date", DATE1},
                                    {"location", "https://www.example.com"},
                                    {0}};
static const struct pair resp2[] = {{":status", "307"},
                                    {"cache-control", "private"},
                                    {"date", DATE1},
                                    {"location", "https://www.example.com"},
                                    {0}};
static const struct pair resp3[] = {{":status", "200"},
                                    {"cache-control", "private"},
                                    {"date", DATE2},
                                    {"location", "https://www.example.com"},
                                    {"content-encoding", "gzip"},
                                    {"set-cookie", COOKIE},
                                    {0}};

struct chain {
    uint32_t table;
    unsigned flags; /* encoder flags that give the RFC's bytes */
    const char *blocks[3];
    const struct pair *lists[3];
    uint32_t sizes[3]; /* the dynamic table's size after each block */
};

static const struct chain chains[] = {
    {4096,
     HPACK_NO_HUFFMAN, /* C.3 */
     {"8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d", "8286 84be 5808 6e6f 2d63 6163 6865",
      "8287 85bf 400a 6375 7374 6f6d 2d6b 6579 0c63 7573 746f 6d2d 7661 6c75 65"},
     {req1, req2, req3},
     {57, 110, 164}},
    {4096,
     HPACK_HUFFMAN, /* C.4 */
     {"8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff", "8286 84be 5886 a8eb 1064 9cbf",
      "8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf"},
     {req1, req2, req3},
     {57, 110, 164}},
    {256,
     HPACK_NO_HUFFMAN, /* C.5 */
     {"4803 3330 3258 0770 7269 7661 7465 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a "
      "3133 3a32 3120 474d 546e 1768 7474 7073 3a2f 2f77 7777 2e65 7861 6d70 6c65 2e63 6f6d",
      "4803 3330 37c1 c0bf",
      "88c1 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32 3220 474d 54c0 5a04 "
      "677a 6970 7738 666f 6f3d 4153 444a 4b48 514b 425a 584f 5157 454f 5049 5541 5851 5745 4f49 "
      "553b 206d 6178 2d61 6765 3d33 3630 303b 2076 6572 7369 6f6e 3d31"},
     {resp1, resp2, resp3},
     {222, 222, 215}},
    {256,
     HPACK_HUFFMAN, /* C.6 */
     {"4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 82a6 2d1b ff6e "
      "919d 29ad 1718 63c7 8f0b 97c8 e9ae 82ae 43d3",
      "4883 640e ffc1 c0bf",
      "88c1 6196 d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff c05a 839b d9ab 77ad 94e7 "
      "821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f 9587 3160 65c0 03ed "
      "4ee5 b106 3d50 07"},
     {resp1, resp2, resp3},
     {222, 222, 215}},
};

static char out[HPACK_TABLE_MAX + 1024];

/* Decodes the whole block; the fields must be `want`. */
static void decode_block(struct hpack_dec *d, const uint8_t *in, size_t len,
                         const struct pair *want)
{
    size_t pos = 0, i = 0;
    bool first = true;
    while (pos < len) {
        struct hpack_field f;
        int rc = hpack_decode(d, in, len, &pos, first, out, sizeof(out), 0, &f);
        CHECK_INT(rc, 1);
        if (rc != 1)
            return;
        first = false;
        CHECK(want[i].name);
        if (!want[i].name)
            return;
        CHECK_MEM(f.name, f.name_len, want[i].name);
        CHECK_MEM(f.value, f.value_len, want[i].value);
        i++;
    }
    CHECK(!want[i].name);
}

TEST(hpack_appendix_c3_to_c6_decode)
{
    for (size_t c = 0; c < sizeof(chains) / sizeof(chains[0]); c++) {
        struct hpack_dec d;
        hpack_dec_init(&d, chains[c].table);
        for (int b = 0; b < 3; b++) {
            uint8_t in[256];
            size_t len = unit_unhex(chains[c].blocks[b], in);
            decode_block(&d, in, len, chains[c].lists[b]);
            CHECK_INT(d.t.size, chains[c].sizes[b]);
        }
        hpack_dec_free(&d);
    }
}

TEST(hpack_appendix_c3_to_c6_encode)
{
    for (size_t c = 0; c < sizeof(chains) / sizeof(chains[0]); c++) {
        struct hpack_enc e;
        hpack_enc_init(&e);
        hpack_enc_set_max(&e, chains[c].table);
        for (int b = 0; b < 3; b++) {
            uint8_t want[256], got[512];
            size_t want_len = unit_unhex(chains[c].blocks[b], want), n = 0;
            if (b == 0) { /* the size update a smaller SETTINGS_HEADER_TABLE_SIZE asks for */
                n = hpack_enc_begin(&e, got);
                CHECK_INT(n, chains[c].table == 4096 ? 0 : 3);
                n = 0; /* the RFC's blocks assume the table was that size from the start */
            }
            for (const struct pair *p = chains[c].lists[b]; p->name; p++)
                n += hpack_enc_field(&e, got + n, p->name, strlen(p->name), p->value,
                                     strlen(p->value), chains[c].flags);
            CHECK_INT(n, want_len);
            CHECK(memcmp(got, want, want_len) == 0);
            CHECK_INT(e.t.size, chains[c].sizes[b]);
        }
        hpack_enc_free(&e);
    }
}

TEST(hpack_appendix_c2_representations)
{
    static const struct {
        const char *hex, *name, *value;
        unsigned flags;
        uint32_t size;
    } cases[] = {
        {"400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572", "custom-key",
         "custom-header", HPACK_INDEX | HPACK_NO_HUFFMAN, 55},
        {"040c 2f73 616d 706c 652f 7061 7468", ":path", "/sample/path",
         HPACK_NO_INDEX | HPACK_NO_HUFFMAN, 0},
        {"1008 7061 7373 776f 7264 0673 6563 7265 74", "password", "secret",
         HPACK_NEVER_INDEX | HPACK_NO_HUFFMAN, 0},
        {"82", ":method", "GET", HPACK_INDEX, 0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        uint8_t in[64], got[64];
        size_t len = unit_unhex(cases[i].hex, in);
        struct hpack_dec d;
        hpack_dec_init(&d, 4096);
        const struct pair want[] = {{cases[i].name, cases[i].value}, {0}};
        decode_block(&d, in, len, want);
        CHECK_INT(d.t.size, cases[i].size);
        hpack_dec_free(&d);

        struct hpack_enc e;
        hpack_enc_init(&e);
        size_t n = hpack_enc_field(&e, got, cases[i].name, strlen(cases[i].name), cases[i].value,
                                   strlen(cases[i].value), cases[i].flags);
        CHECK_INT(n, len);
        CHECK(memcmp(got, in, len) == 0);
        CHECK_INT(e.t.size, cases[i].size);
        hpack_enc_free(&e);
    }
}

static int decode_one(struct hpack_dec *d, const char *hex)
{
    uint8_t in[64];
    size_t len = unit_unhex(hex, in), pos = 0;
    struct hpack_field f;
    return hpack_decode(d, in, len, &pos, true, out, sizeof(out), 0, &f);
}

TEST(hpack_decode_errors)
{
    struct hpack_dec d;
    hpack_dec_init(&d, 4096);
    CHECK_INT(decode_one(&d, "80"), -EPROTO);             /* index 0 */
    CHECK_INT(decode_one(&d, "be"), -EPROTO);             /* past the (empty) dynamic table */
    CHECK_INT(decode_one(&d, "3fe21f"), -EPROTO);         /* a size update to 4097 */
    CHECK_INT(decode_one(&d, "400a6375"), 0);             /* the name cut short */
    CHECK_INT(decode_one(&d, "41"), 0);                   /* the value missing */
    CHECK_INT(decode_one(&d, "0081ff00"), -EPROTO);       /* 8 bits of padding */
    CHECK_INT(decode_one(&d, "00811800"), -EPROTO);       /* 'a' padded with zeros */
    CHECK_INT(decode_one(&d, "00811f00"), 1);             /* 'a' padded with ones */
    CHECK_INT(decode_one(&d, "0084ffffffff00"), -EPROTO); /* EOS (30 ones) in a string */
    CHECK_INT(decode_one(&d, "00ffffffffff7f"), -EPROTO); /* a name length past 2^28 */
    /* a size update after a field */
    uint8_t in[] = {0x82, 0x20};
    size_t pos = 0;
    struct hpack_field f;
    CHECK_INT(hpack_decode(&d, in, 2, &pos, true, out, sizeof(out), 0, &f), 1);
    CHECK_INT(hpack_decode(&d, in, 2, &pos, false, out, sizeof(out), 0, &f), -EPROTO);
    hpack_dec_free(&d);
}

TEST(hpack_size_update_evicts)
{
    struct hpack_dec d;
    hpack_dec_init(&d, 4096);
    uint8_t in[256];
    size_t len = unit_unhex(chains[0].blocks[0], in);
    decode_block(&d, in, len, req1);
    CHECK_INT(d.t.n, 1);
    /* size 0, then :method GET */
    len = unit_unhex("20 82", in);
    decode_block(&d, in, len, (const struct pair[]){{":method", "GET"}, {0}});
    CHECK_INT(d.t.n, 0);
    CHECK_INT(d.t.max, 0);
    /* a literal with indexing larger than the table empties it and is not kept */
    len = unit_unhex("3fe11f 4001 6101 62", in); /* size 4096, then a: b */
    decode_block(&d, in, len, (const struct pair[]){{"a", "b"}, {0}});
    CHECK_INT(d.t.n, 1);
    hpack_dec_free(&d);
}

TEST(hpack_bomb_costs_no_copy)
{
    /* One entry of 4000 bytes, then many one-byte references to it: past cap nothing is
     * copied, only the lengths say what the list would have been. */
    static uint8_t in[4100];
    size_t n = 0;
    in[n++] = 0x40, in[n++] = 1, in[n++] = 'x';
    n += (size_t)(in[n] = 0x7f, 1); /* value length 4000: 127 + 3873 */
    in[n++] = (uint8_t)(0x80 | ((4000 - 127) & 0x7f)), in[n++] = (uint8_t)((4000 - 127) >> 7);
    memset(in + n, 'v', 4000);
    n += 4000;
    struct hpack_dec d;
    hpack_dec_init(&d, 4096);
    size_t pos = 0;
    struct hpack_field f;
    CHECK_INT(hpack_decode(&d, in, n, &pos, true, out, sizeof(out), 0, &f), 1);
    CHECK_INT(f.value_len, 4000);
    uint8_t ref = 0x80 | 62;
    pos = 0;
    char small[16];
    memset(small, 0, sizeof(small));
    CHECK_INT(hpack_decode(&d, &ref, 1, &pos, false, small, sizeof(small), 0, &f), 1);
    CHECK(f.name && f.name != small && f.value && f.value != small); /* the table's bytes */
    CHECK_INT(f.name_len + f.value_len, 4001);
    CHECK(small[0] == 0);
    hpack_dec_free(&d);
}

TEST(hpack_huffman_round_trip_every_byte)
{
    char s[256], back[256];
    uint8_t enc[1100];
    for (int i = 0; i < 256; i++)
        s[i] = (char)i;
    struct hpack_enc e;
    hpack_enc_init(&e);
    /* All 256 byte values in one value (raw: Huffman is longer), then each alone. */
    size_t n = hpack_enc_field(&e, enc, "x-all", 5, s, 256, HPACK_NO_INDEX);
    struct hpack_dec d;
    hpack_dec_init(&d, 4096);
    size_t pos = 0;
    struct hpack_field f;
    CHECK_INT(hpack_decode(&d, enc, n, &pos, true, out, sizeof(out), 0, &f), 1);
    CHECK_INT(f.value_len, 256);
    CHECK(memcmp(f.value, s, 256) == 0);
    for (int i = 0; i < 256; i++) { /* each byte alone, Huffman-coded */
        char c = (char)i;
        uint8_t buf[16];
        n = hpack_enc_field(&e, buf, "a", 1, &c, 1, HPACK_NO_INDEX);
        pos = 0;
        CHECK_INT(hpack_decode(&d, buf, n, &pos, true, back, sizeof(back), 0, &f), 1);
        CHECK_INT(f.value_len, 1);
        CHECK(f.value[0] == c);
    }
    hpack_dec_free(&d);
    hpack_enc_free(&e);
}

/* RFC 7541 Appendix B's code for s[0, n), padded with ones: the encoder's, written again
 * from the table so that the test does not lean on what it checks. */
static size_t huff_encode_test(uint8_t *dst, const char *s, size_t n)
{
    uint64_t acc = 0;
    unsigned bits = 0;
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        const struct huff_code *c = &huff_code[(uint8_t)s[i]];
        acc = acc << c->bits | c->code;
        for (bits += c->bits; bits >= 8; bits -= 8)
            dst[o++] = (uint8_t)(acc >> (bits - 8));
    }
    if (bits)
        dst[o++] = (uint8_t)(acc << (8 - bits) | (0xffu >> bits));
    return o;
}

TEST(hpack_huffman_decodes_every_pair_and_rejects_bad_padding)
{
    /* Every byte value forced into Huffman code, followed by a second one: codes from 5 to 30
     * bits meet the 11-bit table's one- and two-symbol steps, its end-of-string cases and the
     * longer codes' canonical decoding at every alignment. */
    for (int i = 0; i < 256; i++) {
        for (int j = 0; j < 256; j += 5) {
            const char pair[2] = {(char)i, (char)j};
            char back[4];
            uint8_t buf[8];
            size_t len = huff_encode_test(buf, pair, 2);
            CHECK_INT(huff_decode(buf, len, back, sizeof(back)), 2);
            CHECK(back[0] == pair[0] && back[1] == pair[1]);
            CHECK_INT(huff_decode(buf, len, NULL, 0), 2);
            CHECK_INT(huff_decode(buf, len, back, 1), -ENOSPC);
        }
    }
    char o[8];
    uint8_t a_ones = 0x1f;                     /* 'a' (00011) and 3 bits of padding, ones */
    uint8_t a_zeros = 0x18;                    /* the padding is not EOS's bits */
    uint8_t a_long[2] = {0x1f, 0xff};          /* 11 bits of padding: more than 7 */
    uint8_t eos[4] = {0xff, 0xff, 0xff, 0xff}; /* EOS (30 ones) itself */
    uint8_t cut[2] = {0xff, 0xfe};             /* a 13+ bit code cut short */
    CHECK_INT(huff_decode(&a_ones, 1, o, sizeof(o)), 1);
    CHECK(o[0] == 'a');
    CHECK_INT(huff_decode(&a_zeros, 1, o, sizeof(o)), -EPROTO);
    CHECK_INT(huff_decode(a_long, 2, o, sizeof(o)), -EPROTO);
    CHECK_INT(huff_decode(eos, 4, o, sizeof(o)), -EPROTO);
    CHECK_INT(huff_decode(cut, 2, o, sizeof(o)), -EPROTO);
    CHECK_INT(huff_decode(eos, 0, o, sizeof(o)), 0);
}

TEST(hpack_decode_reports_static_name_and_checks)
{
    /* f.sidx names a field by its static index however it came (indexed, a literal naming it,
     * a dynamic entry made from such a literal), and f.valid stays what the field's first
     * check found when the entry is used again. */
    uint8_t in[128];
    size_t n = unit_unhex("82"            /* :method: GET */
                          "4402 2f78"     /* :path: /x, indexed: 62 */
                          "be"            /* 62 again */
                          "40 0155 0178"  /* U: x (upper case name), indexed: 62 */
                          "be"            /* it again */
                          "7a 0220 78"    /* user-agent: " x" (leading space), indexed */
                          "be"            /* it again */
                          "40 0161 0162", /* a: b */
                          in);
    static const struct {
        uint8_t sidx, valid;
        const char *name, *value;
    } want[] = {
        {2, TOKEN_NAME_OK | TOKEN_VALUE_OK, ":method", "GET"},
        {4, TOKEN_NAME_OK | TOKEN_VALUE_OK, ":path", "/x"},
        {4, TOKEN_NAME_OK | TOKEN_VALUE_OK, ":path", "/x"},
        {0, TOKEN_VALUE_OK, "U", "x"},
        {0, TOKEN_VALUE_OK, "U", "x"},
        {58, TOKEN_NAME_OK, "user-agent", " x"},
        {58, TOKEN_NAME_OK, "user-agent", " x"},
        {0, TOKEN_NAME_OK | TOKEN_VALUE_OK, "a", "b"},
    };
    struct hpack_dec d;
    hpack_dec_init(&d, 4096);
    size_t pos = 0;
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        struct hpack_field f;
        CHECK_INT(hpack_decode(&d, in, n, &pos, i == 0, out, sizeof(out), 0, &f), 1);
        CHECK_INT(f.sidx, want[i].sidx);
        CHECK_INT(f.valid, want[i].valid);
        CHECK_MEM(f.name, f.name_len, want[i].name);
        CHECK_MEM(f.value, f.value_len, want[i].value);
    }
    CHECK_INT(pos, n);
    /* An empty name and value, kept, then named by index: still a field with an address (an
     * empty table's buffer was NULL, and memcpy and the callers were handed that). */
    uint8_t empty[] = {0x40, 0x00, 0x00, 0x80 | 62};
    pos = 0;
    struct hpack_field f;
    CHECK_INT(hpack_decode(&d, empty, sizeof(empty), &pos, true, out, sizeof(out), 0, &f), 1);
    CHECK_INT(hpack_decode(&d, empty, sizeof(empty), &pos, false, out, sizeof(out), 0, &f), 1);
    CHECK(f.name && f.value && f.name_len == 0 && f.value_len == 0);
    CHECK_INT(f.valid, TOKEN_VALUE_OK);
    CHECK_INT(token_field_check(":", 1, "", 0), TOKEN_VALUE_OK);
    CHECK_INT(token_field_check("a:b", 3, "x\r", 2), 0);
    CHECK_INT(token_field_check(":path", 5, "/ ", 2), TOKEN_NAME_OK);
    hpack_dec_free(&d);
}

TEST(hpack_response_fields_one_byte_each_after_the_first)
{
    static const struct pair resp[] = {{":status", "200"},
                                       {"Server", "ringhttpd"},
                                       {"Content-Type", "text/html; charset=utf-8"},
                                       {"Accept-Ranges", "bytes"},
                                       {"Vary", "Accept-Encoding"},
                                       {"Cache-Control", "max-age=60"},
                                       {"ETag", "\"5f3a-1c2\""},
                                       {0}};
    struct hpack_enc e;
    struct hpack_dec d;
    hpack_enc_init(&e);
    hpack_dec_init(&d, 4096);
    for (int round = 0; round < 3; round++) {
        uint8_t block[512];
        size_t n = hpack_enc_begin(&e, block), nfields = 0;
        for (const struct pair *p = resp; p->name; p++, nfields++)
            n += hpack_enc_field(&e, block + n, p->name, strlen(p->name), p->value,
                                 strlen(p->value), HPACK_INDEX);
        if (round > 0)
            CHECK_INT(n, nfields);
        size_t pos = 0, i = 0;
        while (pos < n) {
            struct hpack_field f;
            CHECK_INT(hpack_decode(&d, block, n, &pos, i == 0, out, sizeof(out), 0, &f), 1);
            char lower[64];
            size_t len = strlen(resp[i].name);
            for (size_t j = 0; j <= len; j++)
                lower[j] =
                    (char)(resp[i].name[j] >= 'A' && resp[i].name[j] <= 'Z' ? resp[i].name[j] | 0x20
                                                                            : resp[i].name[j]);
            CHECK_MEM(f.name, f.name_len, lower);
            CHECK_MEM(f.value, f.value_len, resp[i].value);
            i++;
        }
        CHECK_INT(i, nfields);
        CHECK_INT(d.t.size, e.t.size);
    }
    /* the peer shrinks its table: the next block starts with the update, the table empties */
    hpack_enc_set_max(&e, 0);
    uint8_t block[16];
    CHECK_INT(hpack_enc_begin(&e, block), 1);
    CHECK_INT(block[0], 0x20);
    CHECK_INT(e.t.n, 0);
    hpack_dec_free(&d);
    hpack_enc_free(&e);
}

/* Names are matched against the static table in any case of their letters, and only of their
 * letters: a byte that differs from a static name's '-' or ':' by the case bit is not it. */
TEST(hpack_name_case_folds_letters_only)
{
    static const struct pair cases[] = {
        {"\x1astatus", "200"}, {"content\rtype", "x"}, {"CONTENT-TYPE", "text/plain"}, {0}};
    static const char *const sent[] = {"\x1astatus", "content\rtype", "content-type"};
    struct hpack_enc e;
    struct hpack_dec d;
    hpack_enc_init(&e);
    hpack_dec_init(&d, 4096);
    for (int i = 0; cases[i].name; i++) {
        uint8_t block[64];
        size_t n = hpack_enc_field(&e, block, cases[i].name, strlen(cases[i].name), cases[i].value,
                                   strlen(cases[i].value), HPACK_INDEX);
        size_t pos = 0;
        struct hpack_field f;
        CHECK_INT(hpack_decode(&d, block, n, &pos, true, out, sizeof(out), 0, &f), 1);
        CHECK_MEM(f.name, f.name_len, sent[i]);
        CHECK_MEM(f.value, f.value_len, cases[i].value);
    }
    hpack_dec_free(&d);
    hpack_enc_free(&e);
}

/* Pre-encoded fields (hpack_pre): the same bytes as hpack_enc_field on a fresh table, then one
 * index byte each once a connection has them; the peer's table stays in step through
 * evictions (small tables, stale Date values pushing them out), a table that cannot hold them,
 * a block that must not index, and a forgotten table. */
TEST(hpack_pre_encoded_fields_stay_in_step)
{
    static const struct hpack_field fa[] = {
        {.name = "Last-Modified",
         .name_len = 13,
         .value = "Thu, 26 Nov 2026 14:05:10 GMT",
         .value_len = 29},
        {.name = "ETag",
         .name_len = 4,
         .value = "\"98809e-400-18eb9d5f9a61a467\"",
         .value_len = 29},
        {.name = "Accept-Ranges", .name_len = 13, .value = "bytes", .value_len = 5},
        {.name = "Content-Type",
         .name_len = 12,
         .value = "application/octet-stream",
         .value_len = 24},
        {.name = "X-Own", .name_len = 5, .value = "1", .value_len = 1}};
    static const struct hpack_field fb[] = {
        {.name = "ETag", .name_len = 4, .value = "\"b\"", .value_len = 3},
        {.name = "Content-Type",
         .name_len = 12,
         .value = "application/octet-stream",
         .value_len = 24},
        {.name = ":status", .name_len = 7, .value = "200", .value_len = 3}};
    struct hpack_pre *pa = hpack_pre_new(fa, 5, "ka", 2, 1), *pb = hpack_pre_new(fb, 3, "kb", 2, 2);
    CHECK(pa && pb);
    size_t klen;
    CHECK_MEM(hpack_pre_key(pa, &klen), 2, "ka");
    /* on a fresh table: what hpack_enc_field writes */
    for (unsigned flags = 0; flags < 2; flags++) {
        struct hpack_enc e1, e2;
        hpack_enc_init(&e1), hpack_enc_init(&e2);
        uint8_t b1[512], b2[512];
        size_t n1 = hpack_enc_pre(&e1, b1, pa, flags), n2 = 0;
        for (int i = 0; i < 5; i++)
            n2 += hpack_enc_field(&e2, b2 + n2, fa[i].name, fa[i].name_len, fa[i].value,
                                  fa[i].value_len, flags);
        CHECK(n1 == n2 && memcmp(b1, b2, n1) == 0);
        CHECK_INT(n1, n2);
        CHECK(n1 <= hpack_pre_bound(pa));
        hpack_enc_free(&e1), hpack_enc_free(&e2);
    }
    static const uint32_t sizes[] = {4096, 300, 150, 60, 0};
    for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
        struct hpack_enc e;
        struct hpack_dec d;
        hpack_enc_init(&e);
        hpack_dec_init(&d, 4096);
        hpack_enc_set_max(&e, sizes[s]);
        for (int blk = 0; blk < 40; blk++) {
            if (blk == 25)
                hpack_enc_forget(&e);
            uint8_t b[1024];
            unsigned flags = blk == 0 ? HPACK_NO_INDEX : HPACK_INDEX;
            size_t n = hpack_enc_begin(&e, b);
            char date[32];
            int dl = snprintf(date, sizeof(date), "Thu, 26 Nov 2026 14:%02d:00 GMT", blk % 7);
            n += hpack_enc_field(&e, b + n, "date", 4, date, (size_t)dl, flags);
            const struct hpack_pre *p = blk % 3 == 2 ? pb : pa;
            const struct hpack_field *want = p == pa ? fa : fb;
            size_t nwant = p == pa ? 5 : 3, before = n;
            n += hpack_enc_pre(&e, b + n, p, flags);
            if (sizes[s] == 4096 && blk > 3 && blk < 25)
                CHECK_INT(n - before, nwant); /* one byte each */
            size_t pos = 0;
            struct hpack_field f;
            CHECK_INT(hpack_decode(&d, b, n, &pos, true, out, sizeof(out), 0, &f), 1);
            CHECK_MEM(f.value, f.value_len, date);
            for (size_t i = 0; i < nwant; i++) {
                CHECK_INT(hpack_decode(&d, b, n, &pos, false, out, sizeof(out), 0, &f), 1);
                char lc[32];
                for (size_t k = 0; k < want[i].name_len; k++)
                    lc[k] = (char)(want[i].name[k] | (want[i].name[k] >= 'A' ? 0x20 : 0));
                lc[want[i].name_len] = '\0';
                CHECK_MEM(f.name, f.name_len, lc);
                CHECK_MEM(f.value, f.value_len, want[i].value);
            }
            CHECK_INT(pos, n);
            CHECK_INT(d.t.size, e.t.size);
            CHECK_INT(d.t.n, e.t.n);
        }
        hpack_dec_free(&d);
        hpack_enc_free(&e);
    }
    free(pa);
    free(pb);
}
