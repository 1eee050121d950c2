/* Unit tests for core/range: Range parsing (RFC 9110 14.1.2 and 14.2 examples, abuse limits)
 * and multipart/byteranges framing. */
#include "core/range.h"

#include "unit.h"

static enum range_result parse(const char *hdr, uint64_t size, struct range_set *set)
{
    struct http_str s = {unit_guard_str(hdr), strlen(hdr)};
    memset(set, 0xA5, sizeof(*set));
    return range_parse(s, size, set);
}

/* Checks a RANGE_PARTIAL result against "a-b,c-d,..." spans given as pairs. */
static void check_spans(const struct range_set *set, size_t count, const uint64_t *pairs)
{
    CHECK_INT(set->count, count);
    for (size_t i = 0; i < count && i < set->count; i++) {
        CHECK_INT(set->span[i].first, pairs[2 * i]);
        CHECK_INT(set->span[i].last, pairs[2 * i + 1]);
    }
}

TEST(range_rfc9110_examples)
{
    struct range_set set;
    CHECK_INT(parse("bytes=0-499", 10000, &set), RANGE_PARTIAL);
    check_spans(&set, 1, (const uint64_t[]){0, 499});
    CHECK_INT(parse("bytes=500-999", 10000, &set), RANGE_PARTIAL);
    check_spans(&set, 1, (const uint64_t[]){500, 999});
    CHECK_INT(parse("bytes=-500", 10000, &set), RANGE_PARTIAL);
    check_spans(&set, 1, (const uint64_t[]){9500, 9999});
    CHECK_INT(parse("bytes=9500-", 10000, &set), RANGE_PARTIAL);
    check_spans(&set, 1, (const uint64_t[]){9500, 9999});
    CHECK_INT(parse("bytes=0-0,-1", 10000, &set), RANGE_PARTIAL);
    check_spans(&set, 2, (const uint64_t[]){0, 0, 9999, 9999});
    /* Legal but not canonical: merged into one span. */
    CHECK_INT(parse("bytes=500-600,601-999", 10000, &set), RANGE_PARTIAL);
    check_spans(&set, 1, (const uint64_t[]){500, 999});
    CHECK_INT(parse("bytes=500-700,601-999", 10000, &set), RANGE_PARTIAL);
    check_spans(&set, 1, (const uint64_t[]){500, 999});
    CHECK_INT(parse("bytes=0-999, 4500-5499, -1000", 10000, &set), RANGE_PARTIAL);
    check_spans(&set, 3, (const uint64_t[]){0, 999, 4500, 5499, 9000, 9999});
}

TEST(range_clamping_and_suffixes)
{
    struct range_set set;
    CHECK_INT(parse("bytes=0-99999", 100, &set), RANGE_PARTIAL);
    check_spans(&set, 1, (const uint64_t[]){0, 99});
    CHECK_INT(parse("bytes=99-100", 100, &set), RANGE_PARTIAL);
    check_spans(&set, 1, (const uint64_t[]){99, 99});
    CHECK_INT(parse("bytes=-1000", 100, &set), RANGE_PARTIAL); /* suffix longer than file */
    check_spans(&set, 1, (const uint64_t[]){0, 99});
    CHECK_INT(parse("bytes=-100", 100, &set), RANGE_PARTIAL);
    check_spans(&set, 1, (const uint64_t[]){0, 99});
    CHECK_INT(parse("bytes=-99", 100, &set), RANGE_PARTIAL);
    check_spans(&set, 1, (const uint64_t[]){1, 99});
    CHECK_INT(parse("bytes=0-", 1, &set), RANGE_PARTIAL);
    check_spans(&set, 1, (const uint64_t[]){0, 0});
    CHECK_INT(parse("bytes=5-5", 100, &set), RANGE_PARTIAL);
    check_spans(&set, 1, (const uint64_t[]){5, 5});
    /* Saturating numbers: still valid, "to the end". */
    CHECK_INT(parse("bytes=10-99999999999999999999999999", 100, &set), RANGE_PARTIAL);
    check_spans(&set, 1, (const uint64_t[]){10, 99});
    CHECK_INT(parse("bytes=-99999999999999999999999999", 100, &set), RANGE_PARTIAL);
    check_spans(&set, 1, (const uint64_t[]){0, 99});
    CHECK_INT(parse("bytes=0-18446744073709551615", UINT64_MAX, &set), RANGE_PARTIAL);
    check_spans(&set, 1, (const uint64_t[]){0, UINT64_MAX - 1});
    CHECK_INT(parse("bytes=-1", UINT64_MAX, &set), RANGE_PARTIAL);
    check_spans(&set, 1, (const uint64_t[]){UINT64_MAX - 1, UINT64_MAX - 1});
}

TEST(range_unsatisfiable)
{
    struct range_set set;
    CHECK_INT(parse("bytes=0-0", 0, &set), RANGE_UNSATISFIABLE);
    CHECK_INT(parse("bytes=0-", 0, &set), RANGE_UNSATISFIABLE);
    CHECK_INT(parse("bytes=-5", 0, &set), RANGE_UNSATISFIABLE);
    CHECK_INT(parse("bytes=-0", 100, &set), RANGE_UNSATISFIABLE);
    CHECK_INT(parse("bytes=100-", 100, &set), RANGE_UNSATISFIABLE);
    CHECK_INT(parse("bytes=100-200", 100, &set), RANGE_UNSATISFIABLE);
    CHECK_INT(parse("bytes=100-200, 300-, -0", 100, &set), RANGE_UNSATISFIABLE);
    CHECK_INT(parse("bytes=99999999999999999999999-", 100, &set), RANGE_UNSATISFIABLE);
    /* One satisfiable spec is enough. */
    CHECK_INT(parse("bytes=100-200, 50-60", 100, &set), RANGE_PARTIAL);
    check_spans(&set, 1, (const uint64_t[]){50, 60});
}

TEST(range_ignored_syntax_errors)
{
    struct range_set set;
    static const char *const bad[] = {
        "",
        "bytes",
        "bytes=",
        "bytes=,",
        "bytes= , ,",
        "bytes=-",
        "bytes=a-b",
        "bytes=1-a",
        "bytes=5-4",
        "bytes=0-1 2-3",
        "bytes=0--1",
        "bytes=--1",
        "bytes=1",
        "bytes=+1-2",
        "bytes=0x1-2",
        "bytes =0-1",
        "bytes= 0-1x",
        "bytes=0-1;",
        "bytes=0-1,x",
        "byte=0-1",
        "bits=0-1",
        "none",
        "items=0-1",
        "bytes:0-1",
        "bytesx=0-1",
        "bytes=0 -1",
        "bytes=0- 1",
        "bytes=- 1",
        "bytes=1-2-3",
        "bytes=\0000-1", /* a NUL, then "0-1" */
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        enum range_result r = parse(bad[i], 100, &set);
        if (r != RANGE_FULL)
            fprintf(stderr, "  \"%s\" gave %d\n", bad[i], r);
        CHECK_INT(r, RANGE_FULL);
    }
    struct http_str none = {NULL, 0};
    CHECK_INT(range_parse(none, 100, &set), RANGE_FULL);
    /* A syntax error anywhere voids the whole header, even after satisfiable specs. */
    CHECK_INT(parse("bytes=0-1,2-1", 100, &set), RANGE_FULL);
}

TEST(range_unit_case_and_whitespace)
{
    struct range_set set;
    CHECK_INT(parse("BYTES=0-1", 100, &set), RANGE_PARTIAL);
    CHECK_INT(parse("Bytes=0-1", 100, &set), RANGE_PARTIAL);
    CHECK_INT(parse("bytes=0-1 ,\t5-6 , ,, 10-11", 100, &set), RANGE_PARTIAL);
    check_spans(&set, 3, (const uint64_t[]){0, 1, 5, 6, 10, 11});
    CHECK_INT(parse("bytes=,0-1,", 100, &set), RANGE_PARTIAL);
    check_spans(&set, 1, (const uint64_t[]){0, 1});
}

TEST(range_sort_and_coalesce)
{
    struct range_set set;
    CHECK_INT(parse("bytes=50-59,0-9,20-29", 100, &set), RANGE_PARTIAL);
    check_spans(&set, 3, (const uint64_t[]){0, 9, 20, 29, 50, 59});
    CHECK_INT(parse("bytes=0-9,10-19", 100, &set), RANGE_PARTIAL); /* adjacent */
    check_spans(&set, 1, (const uint64_t[]){0, 19});
    CHECK_INT(parse("bytes=0-9,11-19", 100, &set), RANGE_PARTIAL); /* a one-byte gap stays */
    check_spans(&set, 2, (const uint64_t[]){0, 9, 11, 19});
    CHECK_INT(parse("bytes=0-50,10-20", 100, &set), RANGE_PARTIAL); /* contained */
    check_spans(&set, 1, (const uint64_t[]){0, 50});
    CHECK_INT(parse("bytes=0-0,0-0,0-0", 100, &set), RANGE_PARTIAL);
    check_spans(&set, 1, (const uint64_t[]){0, 0});
    CHECK_INT(parse("bytes=-10,0-", 100, &set), RANGE_PARTIAL);
    check_spans(&set, 1, (const uint64_t[]){0, 99});
    CHECK_INT(parse("bytes=90-95,-5,0-1", 100, &set), RANGE_PARTIAL);
    check_spans(&set, 2, (const uint64_t[]){0, 1, 90, 99});
    CHECK_INT(parse("bytes=30-40,0-5,35-60,4-8,70-", 100, &set), RANGE_PARTIAL);
    check_spans(&set, 3, (const uint64_t[]){0, 8, 30, 60, 70, 99});
}

TEST(range_max_specs)
{
    struct range_set set;
    char hdr[512] = "bytes=";
    for (int i = 0; i < RANGE_MAX; i++)
        sprintf(hdr + strlen(hdr), "%s%d-%d", i ? "," : "", i * 10, i * 10 + 1);
    CHECK_INT(parse(hdr, 1000, &set), RANGE_PARTIAL);
    CHECK_INT(set.count, RANGE_MAX);
    CHECK_INT(set.span[RANGE_MAX - 1].first, (RANGE_MAX - 1) * 10);
    strcat(hdr, ",500-501");
    CHECK_INT(parse(hdr, 1000, &set), RANGE_FULL);
    /* Unsatisfiable specs count too: they cost parsing all the same. */
    strcpy(hdr, "bytes=0-1");
    for (int i = 0; i < RANGE_MAX; i++)
        strcat(hdr, ",5000-6000");
    CHECK_INT(parse(hdr, 1000, &set), RANGE_FULL);
    /* Empty list elements do not count. */
    strcpy(hdr, "bytes=0-1");
    for (int i = 0; i < 40; i++)
        strcat(hdr, ",");
    CHECK_INT(parse(hdr, 1000, &set), RANGE_PARTIAL);
}

TEST(range_every_prefix_stays_in_bounds)
{
    static const char hdr[] = "bytes=0-999, 4500-5499, -1000,9500-";
    for (size_t i = 0; i <= sizeof(hdr) - 1; i++) {
        struct range_set set;
        struct http_str s = {unit_guard(hdr, i), i};
        enum range_result r = range_parse(s, 10000, &set);
        CHECK(r == RANGE_FULL || r == RANGE_PARTIAL || r == RANGE_UNSATISFIABLE);
    }
}

TEST(range_content_range_format)
{
    char buf[80];
    struct range_span s = {0, 499};
    CHECK_INT(range_content_range(buf, sizeof(buf), &s, 1234), 16);
    CHECK_MEM(buf, strlen(buf), "bytes 0-499/1234");
    CHECK_INT(range_content_range(buf, sizeof(buf), NULL, 1234), 12);
    CHECK_MEM(buf, strlen(buf), "bytes */1234");
    CHECK_INT(range_content_range(buf, sizeof(buf), NULL, 0), 9);
    CHECK_MEM(buf, strlen(buf), "bytes */0");
    s = (struct range_span){UINT64_MAX - 1, UINT64_MAX - 1};
    range_content_range(buf, sizeof(buf), &s, UINT64_MAX);
    CHECK_MEM(buf, strlen(buf),
              "bytes 18446744073709551614-18446744073709551614/18446744073709551615");

    /* Too small: the length is still right and nothing lands past cap. */
    s = (struct range_span){0, 499};
    memset(buf, 'x', sizeof(buf));
    CHECK_INT(range_content_range(buf, 16, &s, 1234), 16);
    CHECK(buf[16] == 'x');
    CHECK_MEM(buf, 16, "bytes 0-499/1234");
    CHECK_INT(range_content_range(buf, 17, &s, 1234), 16);
    CHECK(buf[16] == '\0');
    CHECK_INT(range_content_range(NULL, 0, &s, 1234), 16);
}

TEST(range_multipart_framing)
{
    char buf[256];
    struct range_span s = {500, 999};
    size_t n =
        range_part_header(buf, sizeof(buf), "THIS_STRING_SEPARATES", "application/pdf", &s, 8000);
    CHECK_MEM(buf, n,
              "\r\n--THIS_STRING_SEPARATES\r\nContent-Type: application/pdf\r\n"
              "Content-Range: bytes 500-999/8000\r\n\r\n");
    n = range_multipart_end(buf, sizeof(buf), "THIS_STRING_SEPARATES");
    CHECK_MEM(buf, n, "\r\n--THIS_STRING_SEPARATES--\r\n");

    memset(buf, 'x', sizeof(buf));
    CHECK_INT(range_multipart_end(buf, 10, "B"), 9);
    CHECK(buf[9] == '\0');
    memset(buf, 'x', sizeof(buf));
    CHECK_INT(range_multipart_end(buf, 5, "B"), 9);
    CHECK_MEM(buf, 5, "\r\n--B");
    CHECK(buf[5] == 'x');
}

TEST(range_multipart_length_matches_body)
{
    struct range_set set;
    const char *type = "text/plain; charset=utf-8", *b = "00000000000000000042";
    CHECK_INT(parse("bytes=0-0,10-19,-5", 100, &set), RANGE_PARTIAL);
    CHECK_INT(set.count, 3);

    /* Build the body as the sender would and compare lengths. */
    char body[1024];
    size_t len = 0;
    for (size_t i = 0; i < set.count; i++) {
        len += range_part_header(body + len, sizeof(body) - len, b, type, &set.span[i], 100);
        uint64_t n = set.span[i].last - set.span[i].first + 1;
        memset(body + len, 'd', n);
        len += n;
    }
    len += range_multipart_end(body + len, sizeof(body) - len, b);
    CHECK_INT(range_multipart_length(&set, 100, b, type), len);
    /* A part header: fixed text + boundary + type + Content-Range value. */
    size_t hdr0 = strlen("\r\n--") + 20 + strlen("\r\nContent-Type: ") + strlen(type) +
                  strlen("\r\nContent-Range: ") + strlen("bytes 0-0/100") + 4;
    CHECK_INT(range_part_header(NULL, 0, b, type, &set.span[0], 100), hdr0);
}
