/* test_basic: the Basic-credential decoder against its contract in core/basic.h.
 * Must not: hand basic_credentials a value that is not unit_guard()ed (an over-read crashes).
 * Ownership: buffers are each test's. */
#include "unit.h"

#include "core/basic.h"

/* The decoded credentials of value into out (cap bytes), as the decoder returns them. */
static size_t decode(const char *value, char *out, size_t cap)
{
    return basic_credentials((struct http_str){unit_guard_str(value), strlen(value)}, out, cap);
}

TEST(basic_decodes_user_and_password)
{
    char out[64];
    CHECK_INT(decode("Basic YWxpY2U6c2VjcmV0", out, sizeof(out)), 12);
    CHECK(strcmp(out, "alice:secret") == 0);
    /* the scheme is caseless, spaces may repeat, padding is optional (RFC 7617 2, RFC 4648) */
    CHECK_INT(decode("bAsIc   YWxpY2U6c2VjcmV0", out, sizeof(out)), 12);
    CHECK_INT(decode("Basic YTpi", out, sizeof(out)), 3); /* "a:b", no padding needed */
    CHECK(strcmp(out, "a:b") == 0);
    CHECK_INT(decode("Basic YTpiYw==", out, sizeof(out)), 4); /* "a:bc" padded */
    CHECK(strcmp(out, "a:bc") == 0);
    CHECK_INT(decode("Basic YTpiYw", out, sizeof(out)), 4); /* ... and unpadded */
    CHECK_INT(decode("Basic YTpiY2Q=", out, sizeof(out)), 5);
    CHECK(strcmp(out, "a:bcd") == 0);
    CHECK_INT(decode("Basic OnB3", out, sizeof(out)), 3); /* ":pw": an empty user decodes */
    CHECK_INT(decode("Basic dTo=", out, sizeof(out)), 2); /* "u:": an empty password too */
    CHECK(strcmp(out, "u:") == 0);
}

TEST(basic_refuses_what_is_not_basic_credentials)
{
    char out[64];
    CHECK_INT(decode("", out, sizeof(out)), 0);
    CHECK_INT(decode("Basic", out, sizeof(out)), 0);
    CHECK_INT(decode("Basic ", out, sizeof(out)), 0);          /* nothing: no ':' */
    CHECK_INT(decode("Bearer YTpi", out, sizeof(out)), 0);     /* another scheme */
    CHECK_INT(decode("BasicYTpi", out, sizeof(out)), 0);       /* no space after the scheme */
    CHECK_INT(decode("Basic YWxpY2U=", out, sizeof(out)), 0);  /* "alice": no ':' */
    CHECK_INT(decode("Basic YTpi!", out, sizeof(out)), 0);     /* not base64 */
    CHECK_INT(decode("Basic YTp iYw==", out, sizeof(out)), 0); /* a space inside */
    CHECK_INT(decode("Basic YTpiY", out, sizeof(out)), 0);     /* 4n+1 characters */
    CHECK_INT(decode("Basic YTpi===", out, sizeof(out)), 0);   /* three '=' */
    CHECK_INT(decode("Basic YTpiYw=x", out, sizeof(out)), 0);  /* '=' inside */
    CHECK_INT(decode("Basic YQA6Yg==", out, sizeof(out)), 0);  /* "a\0:b": a NUL byte */
}

TEST(basic_never_writes_past_cap)
{
    /* "alice:secret" needs 13 bytes with its NUL; given 12, the bytes after them stay */
    char buf[16];
    memset(buf, 'X', sizeof(buf));
    CHECK_INT(decode("Basic YWxpY2U6c2VjcmV0", buf, 12), 0);
    CHECK(memcmp(buf + 12, "XXXX", 4) == 0);
    memset(buf, 'X', sizeof(buf));
    CHECK_INT(decode("Basic YWxpY2U6c2VjcmV0", buf, 13), 12); /* exactly enough */
    CHECK(strcmp(buf, "alice:secret") == 0 && memcmp(buf + 13, "XXX", 3) == 0);
}
