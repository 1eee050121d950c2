/* Unit tests for core/fieldnames, the one name table of HPACK's and QPACK's static tables
 * (issue 37): through each protocol's encoder, every name of either static table is named by
 * its first index there, in HPACK in any case, and a name neither table holds (nor one
 * table's name in the other) is sent as a literal name. */
#include "core/fieldnames.h"

#include <string.h>

#include "http/h2/hpack.h"
#include "http/h2/hpack_tables.h"
#include "http/h3/qpack.h"
#include "http/h3/qpack_tables.h"
#include "unit.h"

#define NOT_A_VALUE "\x01not-a-static-value"

/* A prefixed integer of nbits at in[0..] (RFC 7541 5.1), short ones only. */
static unsigned prefint(const uint8_t *in, unsigned nbits)
{
    unsigned max = (1u << nbits) - 1, v = in[0] & max;
    if (v < max)
        return v;
    for (unsigned i = 1, shift = 0;; i++, shift += 7) {
        v += (unsigned)(in[i] & 0x7f) << shift;
        if (!(in[i] & 0x80))
            return v;
    }
}

/* The static index hpack_enc_field names name by (a literal without indexing: 0000 + index,
 * 0 for a literal name). */
static unsigned hpack_name_index(const char *name)
{
    struct hpack_enc e;
    uint8_t out[256];
    hpack_enc_init(&e);
    size_t n = hpack_enc_field(&e, out, name, strlen(name), NOT_A_VALUE, strlen(NOT_A_VALUE),
                               HPACK_NO_INDEX | HPACK_NO_HUFFMAN);
    hpack_enc_free(&e);
    CHECK(n > 0 && (out[0] & 0xf0) == 0x00);
    return prefint(out, 4);
}

/* The static index qpack_enc_field names name by (Literal with Name Reference, static: 0101 +
 * index), or -1 for a literal name (001N...). */
static int qpack_name_index(const char *name)
{
    uint8_t out[256];
    size_t n =
        qpack_enc_field(out, sizeof(out), name, strlen(name), NOT_A_VALUE, strlen(NOT_A_VALUE));
    CHECK(n > 0);
    if ((out[0] & 0xe0) == 0x20)
        return -1;
    CHECK((out[0] & 0xf0) == 0x50);
    return (int)prefint(out, 4);
}

static void upper(char *s)
{
    for (; *s; s++)
        if (*s >= 'a' && *s <= 'z')
            *s = (char)(*s - 'a' + 'A');
}

TEST(fieldnames_every_static_name_at_its_first_index)
{
    for (unsigned i = 0; i < HPACK_STATIC_N; i++) {
        unsigned first = i + 1;
        while (first > 1 && strcmp(hpack_static[first - 2].name, hpack_static[i].name) == 0)
            first--;
        CHECK_INT(hpack_name_index(hpack_static[i].name), first);
        char up[64];
        snprintf(up, sizeof(up), "%s", hpack_static[i].name);
        upper(up);
        CHECK_INT(hpack_name_index(up), first); /* HPACK finds a name in any case */
    }
    for (unsigned i = 0; i < QPACK_STATIC_N; i++) {
        unsigned first = 0;
        while (strcmp(qpack_static[first].name, qpack_static[i].name) != 0)
            first++;
        CHECK_INT(qpack_name_index(qpack_static[i].name), first);
        CHECK_INT(qpack_static[i].name_idx, first);
    }
    /* the one table holds each name once, with both indices */
    for (unsigned i = 0; i < FIELDNAMES_N; i++) {
        const struct fieldname *f = &fieldnames[i];
        CHECK(fieldname_at(f->name, f->len) == f);
        CHECK(f->hpack || f->qpack);
        CHECK_INT(f->hpack ? hpack_name_index(f->name) : 0, f->hpack);
        CHECK_INT(qpack_name_index(f->name), (int)f->qpack - 1);
    }
}

TEST(fieldnames_a_non_name_is_not_found)
{
    static const char *const none[] = {"x-custom",
                                       "content-typf",
                                       "Content-Type-",
                                       "accept-charsex",
                                       "a",
                                       "",
                                       "ab",
                                       ":authorit",
                                       "access-control-allow-headerz",
                                       "set-cookie2",
                                       "etagg",
                                       "vary\x80"};
    for (size_t i = 0; i < sizeof(none) / sizeof(none[0]); i++) {
        if (strlen(none[i]))
            CHECK_INT(hpack_name_index(none[i]), 0);
        CHECK_INT(qpack_name_index(none[i]), -1);
    }
    /* one table's name in the other: a literal there */
    CHECK_INT(hpack_name_index("x-forwarded-for"), 0);
    CHECK_INT(hpack_name_index("early-data"), 0);
    CHECK_INT(qpack_name_index("accept-charset"), -1);
    CHECK_INT(qpack_name_index("www-authenticate"), -1);
    /* QPACK compares exactly: a name in upper case is a literal (nobody sends one) */
    CHECK_INT(qpack_name_index("Content-Type"), -1);
}
