/* Unit tests for core/autoindex: ordering, HTML and JSON rendering, escaping of hostile names,
 * invalid UTF-8, and the measure-then-retry buffer contract. */
#include "core/autoindex.h"

#include <stdlib.h>

#include "unit.h"

// clang-format off
#define E(n, dir, sz, t) {n, sizeof(n) - 1, dir, sz, t}
// clang-format on

static char *render_omitting(enum autoindex_format f, const char *path,
                             const struct autoindex_entry *e, size_t n, size_t omitted, size_t *len)
{
    struct http_str url = {path, strlen(path)};
    size_t need = autoindex_render(NULL, 0, f, url, e, n, omitted);
    char *buf = malloc(need + 1);
    memset(buf, 'x', need + 1);
    CHECK_INT(autoindex_render(buf, need, f, url, e, n, omitted), need);
    CHECK(buf[need] == 'x');
    buf[need] = '\0';
    *len = need;
    return buf;
}

static char *render(enum autoindex_format f, const char *path, const struct autoindex_entry *e,
                    size_t n, size_t *len)
{
    return render_omitting(f, path, e, n, 0, len);
}

static int contains(const char *hay, const char *needle)
{
    return strstr(hay, needle) != NULL;
}

TEST(autoindex_sort_dirs_first_then_bytes)
{
    struct autoindex_entry e[] = {
        E("b.txt", false, 1, 0), E("Zdir", true, 0, 0), E("a", false, 1, 0),
        E("ab", false, 1, 0),    E("adir", true, 0, 0), E("\xc3\xa9", false, 1, 0),
        E("B", false, 1, 0),     E("a", true, 0, 0),
    };
    autoindex_sort(e, sizeof(e) / sizeof(e[0]));
    static const char *const want[] = {"Zdir", "a", "adir", "B", "a", "ab", "b.txt", "\xc3\xa9"};
    static const bool dir[] = {true, true, true, false, false, false, false, false};
    for (size_t i = 0; i < 8; i++) {
        CHECK_MEM(e[i].name, e[i].name_len, want[i]);
        CHECK(e[i].is_dir == dir[i]);
    }
    autoindex_sort(e, 0);
    autoindex_sort(e, 1);
}

TEST(autoindex_html_page)
{
    struct autoindex_entry e[] = {
        E("sub", true, 4096, 784111777),
        E("a b.txt", false, 1536, 0),
        E("tiny", false, 0, -1),
    };
    size_t len;
    char *h = render(AUTOINDEX_HTML, "/docs/", e, 3, &len);
    CHECK(!strncmp(h, "<!DOCTYPE html>\n", 16));
    CHECK(contains(h, "<meta charset=\"utf-8\">"));
    CHECK(contains(h, "<title>Index of /docs/</title>"));
    CHECK(contains(h, "<h1>Index of /docs/</h1>"));
    CHECK(contains(h, "<a href=\"../\">../</a>"));
    CHECK(contains(h, "<tr><td><a href=\"sub/\">sub/</a></td><td>1994-11-06 08:49:37</td>"
                      "<td>-</td></tr>"));
    CHECK(contains(h, "<a href=\"a%20b.txt\">a b.txt</a></td><td>1970-01-01 00:00:00</td>"
                      "<td>1.5 KiB</td>"));
    CHECK(contains(h, "<a href=\"tiny\">tiny</a></td><td>1969-12-31 23:59:59</td><td>0 B</td>"));
    CHECK(contains(h, "</html>\n"));
    CHECK(strlen(h) == len);
    /* Entries in the order given. */
    CHECK(strstr(h, "sub/") < strstr(h, "a%20b") && strstr(h, "a%20b") < strstr(h, "tiny"));
    free(h);
}

TEST(autoindex_root_has_no_parent_link)
{
    size_t len;
    char *h = render(AUTOINDEX_HTML, "/", NULL, 0, &len);
    CHECK(!contains(h, "../"));
    CHECK(contains(h, "Index of /<"));
    free(h);
    h = render(AUTOINDEX_HTML, "", NULL, 0, &len);
    CHECK(!contains(h, "../"));
    free(h);
    h = render(AUTOINDEX_HTML, "/a/", NULL, 0, &len);
    CHECK(contains(h, "../"));
    free(h);
}

TEST(autoindex_html_hostile_names)
{
    struct autoindex_entry e[] = {
        E("<script>alert(1)</script>", false, 1, 0),
        E("a\"b'c&d", false, 1, 0),
        E("javascript:alert(1)", false, 1, 0),
        E("?q#f%25", true, 1, 0),
        E("bad\xff\xfe.txt", false, 1, 0),
        E("ctl\x01\x7f", false, 1, 0),
        E("caf\xc3\xa9", false, 1, 0),
    };
    size_t len;
    char *h = render(AUTOINDEX_HTML, "/<x>&\"/", e, 7, &len);
    CHECK(!contains(h, "<script>"));
    CHECK(contains(h, "&lt;script&gt;alert(1)&lt;/script&gt;"));
    CHECK(contains(h, "href=\"%3Cscript%3Ealert%281%29%3C%2Fscript%3E\""));
    CHECK(contains(h, ">a&quot;b&#39;c&amp;d<"));
    CHECK(contains(h, "href=\"a%22b%27c%26d\""));
    CHECK(contains(h, "href=\"javascript%3Aalert%281%29\""));
    CHECK(contains(h, "href=\"%3Fq%23f%2525/\""));
    CHECK(contains(h, "href=\"bad%FF%FE.txt\">bad\xEF\xBF\xBD\xEF\xBF\xBD.txt<"));
    CHECK(contains(h, ">ctl\xEF\xBF\xBD\xEF\xBF\xBD<"));
    CHECK(contains(h, "href=\"caf%C3%A9\">caf\xc3\xa9<"));
    CHECK(contains(h, "<title>Index of /&lt;x&gt;&amp;&quot;/</title>"));
    free(h);
}

TEST(autoindex_sizes)
{
    static const struct {
        uint64_t size;
        const char *want;
    } cases[] = {
        {0, "0 B"},
        {1023, "1023 B"},
        {1024, "1.0 KiB"},
        {1536, "1.5 KiB"},
        {1075, "1.0 KiB"},
        {1076, "1.1 KiB"},
        {1048575, "1024.0 KiB"},
        {1048576, "1.0 MiB"},
        {5ULL << 30, "5.0 GiB"},
        {(3ULL << 40) + (1ULL << 39), "3.5 TiB"},
        {UINT64_MAX, "16.0 EiB"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct autoindex_entry e = E("f", false, cases[i].size, 0);
        size_t len;
        char *h = render(AUTOINDEX_HTML, "/", &e, 1, &len);
        char want[64];
        snprintf(want, sizeof(want), "<td>%s</td></tr>", cases[i].want);
        if (!contains(h, want))
            fprintf(stderr, "  size %llu: want %s\n", (unsigned long long)cases[i].size, want);
        CHECK(contains(h, want));
        free(h);
    }
}

TEST(autoindex_json)
{
    struct autoindex_entry e[] = {
        E("sub", true, 4096, 784111777),
        E("a \"b\"\\c\n\x01\x1f\x7f", false, 18446744073709551615ULL, 2147483648),
        E("x\xff\xc3", false, 7, 0),
    };
    size_t len;
    char *j = render(AUTOINDEX_JSON, "/d\"ir/", e, 3, &len);
    const char *want =
        "{\"path\":\"/d\\\"ir/\",\"entries\":[\n"
        "{\"name\":\"sub\",\"href\":\"sub/\",\"type\":\"directory\","
        "\"mtime\":\"1994-11-06T08:49:37Z\"},\n"
        "{\"name\":\"a \\\"b\\\"\\\\c\\n\\u0001\\u001f\x7f\","
        "\"href\":\"a%20%22b%22%5Cc%0A%01%1F%7F\","
        "\"type\":\"file\",\"size\":18446744073709551615,\"mtime\":\"2038-01-19T03:14:08Z\"},\n"
        "{\"name\":\"x\\ufffd\\ufffd\",\"href\":\"x%FF%C3\",\"type\":\"file\",\"size\":7,"
        "\"mtime\":\"1970-01-01T00:00:00Z\"}\n"
        "]}\n";
    CHECK_MEM(j, len, want);
    free(j);
    j = render(AUTOINDEX_JSON, "/", NULL, 0, &len);
    CHECK_MEM(j, len, "{\"path\":\"/\",\"entries\":[\n]}\n");
    free(j);
}

TEST(autoindex_utf8_validation)
{
    /* Overlong, surrogate, above U+10FFFF, truncated: each invalid byte becomes U+FFFD. */
    static const struct {
        const char *name, *want;
    } cases[] = {
        {"\xc0\xaf", "\\ufffd\\ufffd"},
        {"\xe0\x80\xaf", "\\ufffd\\ufffd\\ufffd"},
        {"\xed\xa0\x80", "\\ufffd\\ufffd\\ufffd"},
        {"\xf4\x90\x80\x80", "\\ufffd\\ufffd\\ufffd\\ufffd"},
        {"\xf0\x9f\x98", "\\ufffd\\ufffd\\ufffd"},
        {"\xf0\x9f\x98\x80", "\xf0\x9f\x98\x80"},
        {"\xed\x9f\xbf", "\xed\x9f\xbf"},
        {"\xef\xbf\xbd", "\xef\xbf\xbd"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        size_t n = strlen(cases[i].name);
        struct autoindex_entry e = {unit_guard(cases[i].name, n), n, false, 0, 0};
        size_t len;
        char *j = render(AUTOINDEX_JSON, "/", &e, 1, &len);
        char want[64];
        snprintf(want, sizeof(want), "{\"name\":\"%s\",", cases[i].want);
        if (!contains(j, want))
            fprintf(stderr, "  case %zu: %s\n", i, j);
        CHECK(contains(j, want));
        free(j);
    }
}

TEST(autoindex_small_buffers)
{
    struct autoindex_entry e[] = {E("one", false, 1, 0), E("two", true, 0, 0)};
    for (int f = 0; f < 2; f++) {
        size_t len;
        char *full = render((enum autoindex_format)f, "/p/", e, 2, &len);
        for (size_t cap = 0; cap < len; cap += 7) {
            char *buf = malloc(cap + 16);
            memset(buf, 'x', cap + 16);
            CHECK_INT(autoindex_render(buf, cap, (enum autoindex_format)f,
                                       (struct http_str){"/p/", 3}, e, 2, 0),
                      len);
            CHECK(memcmp(buf, full, cap) == 0);
            CHECK(buf[cap] == 'x');
            free(buf);
        }
        free(full);
    }
}

TEST(autoindex_omitted_entries)
{
    struct autoindex_entry e[] = {E("one", false, 1, 0)};
    size_t len;
    char *html = render_omitting(AUTOINDEX_HTML, "/p/", e, 1, 49999, &len);
    CHECK(contains(html, "<p>49999 more entries not shown.</p>\n</body>"));
    free(html);
    html = render_omitting(AUTOINDEX_HTML, "/p/", e, 1, 1, &len);
    CHECK(contains(html, "<p>1 more entry not shown.</p>"));
    free(html);
    html = render(AUTOINDEX_HTML, "/p/", e, 1, &len);
    CHECK(!contains(html, "not shown"));
    free(html);
    char *json = render_omitting(AUTOINDEX_JSON, "/p/", e, 1, 7, &len);
    CHECK(contains(json, "\n],\"omitted\":7}\n"));
    free(json);
    json = render(AUTOINDEX_JSON, "/p/", e, 1, &len);
    CHECK(!contains(json, "omitted"));
    free(json);
}
