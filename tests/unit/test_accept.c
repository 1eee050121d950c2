/* Unit tests for core/accept: Accept-Encoding choice among br/zstd/gzip and Accept quality
 * (RFC 9110 12.5.1 examples). */
#include "core/accept.h"

#include "unit.h"

static struct http_str g(const char *s)
{
    return (struct http_str){unit_guard_str(s), strlen(s)};
}

/* Returns the codings as "br,zstd,gzip" for compact checks. */
static const char *codings(const char *hdr)
{
    static char buf[64];
    enum accept_coding out[ACCEPT_CODINGS];
    size_t n = accept_encodings(hdr ? g(hdr) : (struct http_str){NULL, 0}, out);
    buf[0] = '\0';
    for (size_t i = 0; i < n && i < ACCEPT_CODINGS; i++) {
        if (i)
            strcat(buf, ",");
        strcat(buf, accept_coding_name(out[i]));
    }
    return buf;
}

#define CHECK_CODINGS(hdr, want) CHECK_MEM(codings(hdr), strlen(codings(hdr)), want)

TEST(accept_encoding_basic)
{
    CHECK_CODINGS(NULL, "");
    CHECK_CODINGS("", "");
    CHECK_CODINGS("gzip", "gzip");
    CHECK_CODINGS("gzip, deflate, br", "br,gzip");
    CHECK_CODINGS("gzip, deflate, br, zstd", "br,zstd,gzip");
    CHECK_CODINGS("zstd, gzip", "zstd,gzip");
    CHECK_CODINGS("GZIP", "gzip");
    CHECK_CODINGS("Br", "br");
    CHECK_CODINGS("x-gzip", "gzip");
    CHECK_CODINGS("identity", "");
    CHECK_CODINGS("deflate, compress", "");
    CHECK_CODINGS("  gzip  ,  br  ", "br,gzip");
    CHECK_CODINGS(",,gzip,,", "gzip");
}

TEST(accept_encoding_rfc_examples)
{
    /* RFC 9110 12.5.3 */
    CHECK_CODINGS("compress, gzip", "gzip");
    CHECK_CODINGS("*", "br,zstd,gzip");
    CHECK_CODINGS("compress;q=0.5, gzip;q=1.0", "gzip");
    CHECK_CODINGS("gzip;q=1.0, identity; q=0.5, *;q=0", "gzip");
}

TEST(accept_encoding_weights)
{
    CHECK_CODINGS("gzip;q=1, br;q=0.5", "gzip,br");
    CHECK_CODINGS("br;q=0.1, zstd;q=0.2, gzip;q=0.3", "gzip,zstd,br");
    CHECK_CODINGS("br;q=0.5, zstd;q=0.5, gzip;q=0.5", "br,zstd,gzip");
    CHECK_CODINGS("gzip;q=0.999, br;q=0.998", "gzip,br");
    CHECK_CODINGS("br;q=0", "");
    CHECK_CODINGS("br;q=0.000, gzip", "gzip");
    CHECK_CODINGS("*;q=0.5, br;q=0", "zstd,gzip");
    CHECK_CODINGS("*;q=0.5, gzip;q=0.6", "gzip,br,zstd");
    CHECK_CODINGS("*;q=0", "");
    CHECK_CODINGS("gzip, *;q=0", "gzip");
    CHECK_CODINGS("gzip;Q=0.5, br", "br,gzip");
    CHECK_CODINGS("gzip ; q=0.5 , br;q=0.4", "gzip,br");
    CHECK_CODINGS("gzip;q=1.000", "gzip");
    CHECK_CODINGS("gzip;q=1.", "gzip");
    CHECK_CODINGS("gzip;q=0.", "");
    /* The first element naming a coding wins. */
    CHECK_CODINGS("gzip;q=0, gzip", "");
    CHECK_CODINGS("x-gzip;q=0.2, gzip;q=0.9, br;q=0.5", "br,gzip");
    CHECK_CODINGS("br, br;q=0", "br");
}

TEST(accept_encoding_invalid_elements_ignored)
{
    static const char *const bad_q[] = {"q=1.1",   "q=1.001", "q=2",  "q=0.1234", "q=-0.5",
                                        "q=.5",    "q=0,5",   "q=",   "q=abc",    "q=0.5x",
                                        "q=\"1\"", "q= 1",    "q =1", "q=1e0",    "q=01"};
    for (size_t i = 0; i < sizeof(bad_q) / sizeof(bad_q[0]); i++) {
        char hdr[64];
        snprintf(hdr, sizeof(hdr), "br;%s, gzip;q=0.5", bad_q[i]);
        const char *got = codings(hdr);
        if (strcmp(got, "gzip"))
            fprintf(stderr, "  %s -> %s\n", hdr, got);
        CHECK_MEM(got, strlen(got), "gzip");
    }
    CHECK_CODINGS("br;level=5, gzip", "gzip"); /* no parameters but q */
    CHECK_CODINGS("br gzip", "");
    CHECK_CODINGS("br/x, gzip", "gzip");
    CHECK_CODINGS("br;;q=0.5, gzip;q=0.4", "br,gzip");
    CHECK_CODINGS("br;, gzip;q=0.4", "br,gzip");
    CHECK_CODINGS("br;q=0.5;q=0.3, gzip;q=0.4", "gzip,br"); /* the last q counts */
    CHECK_CODINGS(";q=1, gzip", "gzip");
    /* A comma inside a quoted string does not split the element. */
    CHECK_CODINGS("br;x=\"a, gzip\", zstd", "zstd");
    CHECK_CODINGS("br;x=\"a\\\", gzip\", zstd", "zstd");
    CHECK_CODINGS("br;x=\"unterminated, gzip", "");
}

TEST(accept_encoding_prefixes_in_bounds)
{
    static const char hdr[] = "gzip;q=0.5, br;x=\"a,b\\\"c\";q=0.25 , zstd ;Q=1.000";
    for (size_t i = 0; i <= sizeof(hdr) - 1; i++) {
        enum accept_coding out[ACCEPT_CODINGS];
        size_t n = accept_encodings((struct http_str){unit_guard(hdr, i), i}, out);
        CHECK(n <= ACCEPT_CODINGS);
        accept_quality((struct http_str){unit_guard(hdr, i), i}, "text/html");
    }
}

static int quality(const char *accept, const char *type)
{
    return accept_quality(accept ? g(accept) : (struct http_str){NULL, 0}, type);
}

TEST(accept_quality_rfc_example)
{
    /* RFC 9110 12.5.1 */
    const char *a = "text/*;q=0.3, text/plain;q=0.7, text/plain;format=flowed, "
                    "text/plain;format=fixed;q=0.4, */*;q=0.5";
    CHECK_INT(quality(a, "text/plain"), 700);
    CHECK_INT(quality(a, "text/html"), 300);
    CHECK_INT(quality(a, "image/jpeg"), 500);
    CHECK_INT(quality("audio/*; q=0.2, audio/basic", "audio/basic"), 1000);
    CHECK_INT(quality("audio/*; q=0.2, audio/basic", "audio/mpeg"), 200);
    CHECK_INT(quality("audio/*; q=0.2, audio/basic", "text/html"), 0);
    CHECK_INT(quality("text/plain; q=0.5, text/html, text/x-dvi; q=0.8, text/x-c", "text/html"),
              1000);
    CHECK_INT(quality("text/plain; q=0.5, text/html, text/x-dvi; q=0.8, text/x-c", "text/x-dvi"),
              800);
}

TEST(accept_quality_browsers_and_tools)
{
    const char *firefox = "text/html,application/xhtml+xml,application/xml;q=0.9,"
                          "image/avif,image/webp,*/*;q=0.8";
    CHECK_INT(quality(firefox, "text/html"), 1000);
    CHECK_INT(quality(firefox, "application/json"), 800);
    CHECK(!accept_prefers(g(firefox), "application/json", "text/html"));
    CHECK_INT(quality(NULL, "text/html"), 1000); /* no Accept: anything goes */
    CHECK(!accept_prefers((struct http_str){NULL, 0}, "application/json", "text/html"));
    CHECK(!accept_prefers(g("*/*"), "application/json", "text/html")); /* curl */
    CHECK(accept_prefers(g("application/json"), "application/json", "text/html"));
    CHECK(accept_prefers(g("application/json, text/html;q=0.9"), "application/json", "text/html"));
    CHECK(!accept_prefers(g("application/json, text/html"), "application/json", "text/html"));
    CHECK(accept_prefers(g("application/*, text/html;q=0.5"), "application/json", "text/html"));
    CHECK(accept_prefers(g("*/*;q=0.1, application/json"), "application/json", "text/html"));
    CHECK(!accept_prefers(g("text/html;q=0"), "application/json", "text/html"));
    CHECK_INT(quality("TEXT/HTML", "text/html"), 1000);
    CHECK_INT(quality("text/*", "text/html"), 1000);
    CHECK_INT(quality("text/*;q=0, */*", "text/html"), 0);
    CHECK_INT(quality("text/html;q=0, */*", "text/html"), 0);
    CHECK_INT(quality("text/html;q=0, text/*", "text/css"), 1000);
    CHECK_INT(quality("", "text/html"), 0);
}

TEST(accept_quality_invalid_elements)
{
    CHECK_INT(quality("*/html", "text/html"), 0);
    CHECK_INT(quality("text", "text/html"), 0);
    CHECK_INT(quality("text/", "text/html"), 0);
    CHECK_INT(quality("/html", "text/html"), 0);
    CHECK_INT(quality("text/html/x", "text/html"), 0);
    CHECK_INT(quality("text/html;q=2, */*;q=0.1", "text/html"), 100);
    CHECK_INT(quality("text/html;level=1", "text/html"), 0);
    CHECK_INT(quality("text/html x", "text/html"), 0);
    CHECK_INT(quality("text/htm", "text/html"), 0);
    CHECK_INT(quality("text/htmlx", "text/html"), 0);
    CHECK_INT(quality("text/html;q=0.5, text/html;q=0.9", "text/html"), 500);
}

TEST(accept_coding_q_named_only)
{
    CHECK_INT(accept_coding_q(g("gzip, br, zstd, dcz"), "dcz"), 1000);
    CHECK_INT(accept_coding_q(g("gzip, DCZ;q=0.5"), "dcz"), 500);
    CHECK_INT(accept_coding_q(g("gzip, dcz;q=0"), "dcz"), 0);
    CHECK_INT(accept_coding_q(g("*"), "dcz"), 0); /* a wildcard never means dictionaries */
    CHECK_INT(accept_coding_q(g("dcz;q=2"), "dcz"), 0);
    CHECK_INT(accept_coding_q(g("dczx"), "dcz"), 0);
    CHECK_INT(accept_coding_q((struct http_str){NULL, 0}, "dcz"), 0);
}

/* SHA-256("hello") = 2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824 */
#define HELLO_B64 "LPJNul+wow4m6DsqxbninhsWHlwfp0JecwQzYpOLmCQ="

TEST(accept_dictionary_sf_binary)
{
    unsigned char h[ACCEPT_DICT_HASH];
    CHECK_INT(accept_dictionary(g(":" HELLO_B64 ":"), h), 0);
    CHECK_INT(h[0], 0x2c);
    CHECK_INT(h[31], 0x24);
    CHECK_INT(h[30], 0x98);
    CHECK_INT(accept_dictionary(g("  :" HELLO_B64 ":  "), h), 0);
    CHECK(accept_dictionary(g(HELLO_B64), h) < 0); /* not a byte sequence */
    CHECK(accept_dictionary(g(":" HELLO_B64), h) < 0);
    CHECK(accept_dictionary(g(":" HELLO_B64 ":;p=1"), h) < 0); /* a parameter */
    CHECK(accept_dictionary(g(":" HELLO_B64 ":, :" HELLO_B64 ":"), h) < 0);
    CHECK(accept_dictionary(g(":aGVsbG8=:"), h) < 0); /* 5 bytes, not 32 */
    CHECK(accept_dictionary(g(":LPJNul+wow4m6DsqxbninhsWHlwfp0JecwQzYpOLmCQ:"), h) < 0);
    CHECK(accept_dictionary(g(":LPJNul-wow4m6DsqxbninhsWHlwfp0JecwQzYpOLmCQ=:"), h) < 0);
    CHECK(accept_dictionary(g(":LPJNul+wow4m6DsqxbninhsWHlwfp0JecwQzYpOLmCR=:"), h) < 0);
    CHECK(accept_dictionary(g(""), h) < 0);
    CHECK(accept_dictionary((struct http_str){NULL, 0}, h) < 0);
}

TEST(accept_type_listed_forms)
{
    const char *list = "text/*, application/javascript, +xml, +json, font/ttf";
    CHECK(accept_type_listed("text/html; charset=utf-8", list));
    CHECK(accept_type_listed("TEXT/CSS", list));
    CHECK(accept_type_listed("application/javascript", list));
    CHECK(accept_type_listed("image/svg+xml", list));
    CHECK(accept_type_listed("application/ld+json; charset=utf-8", list));
    CHECK(accept_type_listed("font/ttf", list));
    CHECK(!accept_type_listed("font/woff2", list));
    CHECK(!accept_type_listed("image/png", list));
    CHECK(!accept_type_listed("application/javascriptx", list));
    CHECK(!accept_type_listed("application/json", "application/js"));
    CHECK(!accept_type_listed("text", list));
    CHECK(!accept_type_listed("text/html", ""));
}

static bool pm(const char *pattern, const char *path)
{
    return accept_path_match(pattern, unit_guard_str(path), strlen(path));
}

TEST(accept_path_match_wildcards)
{
    CHECK(pm("/assets/*.js", "/assets/app.3f2a.js"));
    CHECK(pm("/assets/*.js", "/assets/.js"));
    CHECK(pm("/assets/*.js", "/assets/sub/app.js")); /* '*' crosses '/' as in URLPattern */
    CHECK(!pm("/assets/*.js", "/assets/app.css"));
    CHECK(!pm("/assets/*.js", "/other/app.js"));
    CHECK(!pm("/assets/*.js", "/assets/app.js.map"));
    CHECK(pm("/app.js", "/app.js"));
    CHECK(!pm("/app.js", "/app.jsx"));
    CHECK(pm("*", "/"));
    CHECK(pm("/a*b*c", "/aXbYbZc"));
    CHECK(!pm("/a*b*c", "/aXbYbZ"));
    CHECK(!pm("/x", ""));
}
