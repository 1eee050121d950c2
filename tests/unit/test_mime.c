/* Unit tests for core/mime: built-in coverage (nginx's mime.types and modern formats), charset
 * on text types, extension rules, and the /etc/mime.types parser. */
#include "core/mime.h"

#include <errno.h>

#include "unit.h"

static const char *lookup(const struct mime_table *extra, const char *path)
{
    return mime_lookup(extra, unit_guard_str(path), strlen(path));
}

/* The type without parameters, for comparing with the coverage list. */
static size_t bare_len(const char *type)
{
    const char *semi = strchr(type, ';');
    return semi ? (size_t)(semi - type) : strlen(type);
}

TEST(mime_builtin_coverage)
{
    /* Every extension of nginx's mime.types (same types), then the additions. */
    static const struct {
        const char *ext, *type;
    } want[] = {
        {"html", "text/html"},
        {"htm", "text/html"},
        {"shtml", "text/html"},
        {"css", "text/css"},
        {"xml", "text/xml"},
        {"gif", "image/gif"},
        {"jpeg", "image/jpeg"},
        {"jpg", "image/jpeg"},
        {"jpe", "image/jpeg"},
        {"jfif", "image/jpeg"},
        {"pjpeg", "image/jpeg"},
        {"pjp", "image/jpeg"},
        {"js", "text/javascript"},
        {"mjs", "text/javascript"},
        {"cjs", "text/javascript"},
        {"atom", "application/atom+xml"},
        {"rss", "application/rss+xml"},
        {"mml", "text/mathml"},
        {"txt", "text/plain"},
        {"text", "text/plain"},
        {"log", "text/plain"},
        {"conf", "text/plain"},
        {"asc", "text/plain"},
        {"diff", "text/plain"},
        {"patch", "text/plain"},
        {"jad", "text/vnd.sun.j2me.app-descriptor"},
        {"wml", "text/vnd.wap.wml"},
        {"htc", "text/x-component"},
        {"avif", "image/avif"},
        {"png", "image/png"},
        {"apng", "image/apng"},
        {"svg", "image/svg+xml"},
        {"svgz", "image/svg+xml"},
        {"tif", "image/tiff"},
        {"tiff", "image/tiff"},
        {"wbmp", "image/vnd.wap.wbmp"},
        {"webp", "image/webp"},
        {"ico", "image/x-icon"},
        {"cur", "image/x-icon"},
        {"jng", "image/x-jng"},
        {"bmp", "image/x-ms-bmp"},
        {"jxl", "image/jxl"},
        {"heic", "image/heic"},
        {"heif", "image/heif"},
        {"woff", "font/woff"},
        {"woff2", "font/woff2"},
        {"ttf", "font/ttf"},
        {"otf", "font/otf"},
        {"ttc", "font/collection"},
        {"jar", "application/java-archive"},
        {"war", "application/java-archive"},
        {"ear", "application/java-archive"},
        {"json", "application/json"},
        {"map", "application/json"},
        {"jsonld", "application/ld+json"},
        {"webmanifest", "application/manifest+json"},
        {"hqx", "application/mac-binhex40"},
        {"doc", "application/msword"},
        {"pdf", "application/pdf"},
        {"ps", "application/postscript"},
        {"eps", "application/postscript"},
        {"ai", "application/postscript"},
        {"rtf", "application/rtf"},
        {"m3u8", "application/vnd.apple.mpegurl"},
        {"kml", "application/vnd.google-earth.kml+xml"},
        {"kmz", "application/vnd.google-earth.kmz"},
        {"xls", "application/vnd.ms-excel"},
        {"eot", "application/vnd.ms-fontobject"},
        {"ppt", "application/vnd.ms-powerpoint"},
        {"odg", "application/vnd.oasis.opendocument.graphics"},
        {"odp", "application/vnd.oasis.opendocument.presentation"},
        {"ods", "application/vnd.oasis.opendocument.spreadsheet"},
        {"odt", "application/vnd.oasis.opendocument.text"},
        {"pptx", "application/vnd.openxmlformats-officedocument.presentationml.presentation"},
        {"xlsx", "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"},
        {"docx", "application/vnd.openxmlformats-officedocument.wordprocessingml.document"},
        {"wmlc", "application/vnd.wap.wmlc"},
        {"wasm", "application/wasm"},
        {"7z", "application/x-7z-compressed"},
        {"cco", "application/x-cocoa"},
        {"jardiff", "application/x-java-archive-diff"},
        {"jnlp", "application/x-java-jnlp-file"},
        {"run", "application/x-makeself"},
        {"pl", "application/x-perl"},
        {"pm", "application/x-perl"},
        {"prc", "application/x-pilot"},
        {"pdb", "application/x-pilot"},
        {"rar", "application/x-rar-compressed"},
        {"rpm", "application/x-redhat-package-manager"},
        {"sea", "application/x-sea"},
        {"swf", "application/x-shockwave-flash"},
        {"sit", "application/x-stuffit"},
        {"tcl", "application/x-tcl"},
        {"tk", "application/x-tcl"},
        {"der", "application/x-x509-ca-cert"},
        {"pem", "application/x-x509-ca-cert"},
        {"crt", "application/x-x509-ca-cert"},
        {"xpi", "application/x-xpinstall"},
        {"xhtml", "application/xhtml+xml"},
        {"xspf", "application/xspf+xml"},
        {"zip", "application/zip"},
        {"gz", "application/gzip"},
        {"tgz", "application/gzip"},
        {"tar", "application/x-tar"},
        {"bz2", "application/x-bzip2"},
        {"xz", "application/x-xz"},
        {"zst", "application/zstd"},
        {"epub", "application/epub+zip"},
        {"yaml", "application/yaml"},
        {"yml", "application/yaml"},
        {"toml", "application/toml"},
        {"xsd", "application/xml"},
        {"xsl", "application/xml"},
        {"xslt", "application/xml"},
        {"rdf", "application/xml"},
        {"sh", "application/x-sh"},
        {"sql", "application/sql"},
        {"bin", "application/octet-stream"},
        {"exe", "application/octet-stream"},
        {"dll", "application/octet-stream"},
        {"deb", "application/octet-stream"},
        {"dmg", "application/octet-stream"},
        {"iso", "application/octet-stream"},
        {"img", "application/octet-stream"},
        {"msi", "application/octet-stream"},
        {"msp", "application/octet-stream"},
        {"msm", "application/octet-stream"},
        {"mid", "audio/midi"},
        {"midi", "audio/midi"},
        {"kar", "audio/midi"},
        {"mp3", "audio/mpeg"},
        {"ogg", "audio/ogg"},
        {"oga", "audio/ogg"},
        {"opus", "audio/ogg"},
        {"m4a", "audio/x-m4a"},
        {"ra", "audio/x-realaudio"},
        {"aac", "audio/aac"},
        {"flac", "audio/flac"},
        {"wav", "audio/wav"},
        {"weba", "audio/webm"},
        {"3gpp", "video/3gpp"},
        {"3gp", "video/3gpp"},
        {"ts", "video/mp2t"},
        {"mp4", "video/mp4"},
        {"m4s", "video/mp4"},
        {"mpeg", "video/mpeg"},
        {"mpg", "video/mpeg"},
        {"mov", "video/quicktime"},
        {"webm", "video/webm"},
        {"ogv", "video/ogg"},
        {"mkv", "video/x-matroska"},
        {"flv", "video/x-flv"},
        {"m4v", "video/x-m4v"},
        {"mng", "video/x-mng"},
        {"asx", "video/x-ms-asf"},
        {"asf", "video/x-ms-asf"},
        {"wmv", "video/x-ms-wmv"},
        {"avi", "video/x-msvideo"},
        {"md", "text/markdown"},
        {"markdown", "text/markdown"},
        {"ics", "text/calendar"},
        {"csv", "text/csv"},
        {"vtt", "text/vtt"},
        {"appcache", "text/cache-manifest"},
    };
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        char name[64];
        snprintf(name, sizeof(name), "dir/file.%s", want[i].ext);
        const char *got = lookup(NULL, name);
        if (bare_len(got) != strlen(want[i].type) ||
            memcmp(got, want[i].type, bare_len(got)) != 0) {
            fprintf(stderr, "  .%s: got %s, expected %s\n", want[i].ext, got, want[i].type);
            CHECK(0);
        }
    }
}

TEST(mime_charset_on_text_types)
{
    static const char *const text[] = {"a.html", "a.css",         "a.js",   "a.mjs",   "a.json",
                                       "a.map",  "a.svg",         "a.xml",  "a.txt",   "a.md",
                                       "a.ics",  "a.csv",         "a.atom", "a.rss",   "a.xhtml",
                                       "a.yaml", "a.webmanifest", "a.vtt",  "a.jsonld"};
    for (size_t i = 0; i < sizeof(text) / sizeof(text[0]); i++) {
        const char *t = lookup(NULL, text[i]);
        if (!strstr(t, "; charset=utf-8"))
            fprintf(stderr, "  %s: %s\n", text[i], t);
        CHECK(strstr(t, "; charset=utf-8") != NULL);
    }
    static const char *const binary[] = {"a.png", "a.wasm", "a.woff2", "a.pdf", "a.svgz",
                                         "a.zip", "a.mp4",  "a.bin",   "a.gz"};
    for (size_t i = 0; i < sizeof(binary) / sizeof(binary[0]); i++)
        CHECK(strchr(lookup(NULL, binary[i]), ';') == NULL);
    CHECK(!strcmp(lookup(NULL, "index.html"), "text/html; charset=utf-8"));
    CHECK(!strcmp(lookup(NULL, "app.mjs"), "text/javascript; charset=utf-8"));
    CHECK(!strcmp(lookup(NULL, "m.webmanifest"), "application/manifest+json; charset=utf-8"));
}

TEST(mime_extension_rules)
{
    CHECK(!strcmp(lookup(NULL, "INDEX.HTML"), "text/html; charset=utf-8"));
    CHECK(!strcmp(lookup(NULL, "photo.JpG"), "image/jpeg"));
    CHECK(!strcmp(lookup(NULL, "a.tar.gz"), "application/gzip"));
    CHECK(!strcmp(lookup(NULL, "/a.d/b.WOFF2"), "font/woff2"));
    CHECK(!strcmp(lookup(NULL, "/a.html/README"), MIME_DEFAULT)); /* dot in a parent only */
    CHECK(!strcmp(lookup(NULL, "/a.css/"), MIME_DEFAULT));
    CHECK(!strcmp(lookup(NULL, "Makefile"), MIME_DEFAULT));
    CHECK(!strcmp(lookup(NULL, "file."), MIME_DEFAULT));
    CHECK(!strcmp(lookup(NULL, ".html"), MIME_DEFAULT)); /* a dotfile has no extension */
    CHECK(!strcmp(lookup(NULL, "d/.css"), MIME_DEFAULT));
    CHECK(!strcmp(lookup(NULL, "..css"), "text/css; charset=utf-8"));
    CHECK(!strcmp(lookup(NULL, "x.unknownext"), MIME_DEFAULT));
    CHECK(!strcmp(lookup(NULL, "x.htm\x01"), MIME_DEFAULT));
    CHECK(!strcmp(lookup(NULL, ""), MIME_DEFAULT));
    CHECK(!strcmp(lookup(NULL, "."), MIME_DEFAULT));
    CHECK(!strcmp(lookup(NULL, "/"), MIME_DEFAULT));
    /* An over-long extension is not truncated into a match. */
    CHECK(!strcmp(lookup(NULL, "a.htmlxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"), MIME_DEFAULT));
    /* len bounds the path: "a.css" inside a longer buffer. */
    CHECK(!strcmp(mime_lookup(NULL, unit_guard("a.cssx", 5), 5), "text/css; charset=utf-8"));
    CHECK(!strcmp(mime_lookup(NULL, unit_guard("a.cssx", 4), 4), MIME_DEFAULT));
}

static int parse(const char *text, struct mime_table *t, size_t *line)
{
    return mime_table_parse(unit_guard_str(text), strlen(text), t, line);
}

TEST(mime_table_parse_and_override)
{
    struct mime_table t;
    size_t line = 0;
    CHECK_INT(parse("# comment line\n"
                    "\n"
                    "text/x-readme\treadme   rd # trailing comment\r\n"
                    "application/x-custom css\n"
                    "Application/Vnd.Foo+JSON foojs\n"
                    "application/x-lonely\n"
                    "image/x-Thing  THING\n"
                    "application/yaml   cfg",
                    &t, &line),
              0);
    CHECK_INT(t.count, 6);
    CHECK(!strcmp(lookup(&t, "a.readme"), "text/x-readme; charset=utf-8"));
    CHECK(!strcmp(lookup(&t, "a.RD"), "text/x-readme; charset=utf-8"));
    CHECK(!strcmp(lookup(&t, "a.css"), "application/x-custom")); /* overrides the built-in */
    CHECK(!strcmp(lookup(&t, "a.foojs"), "application/vnd.foo+json; charset=utf-8"));
    CHECK(!strcmp(lookup(&t, "a.thing"), "image/x-thing"));
    CHECK(!strcmp(lookup(&t, "a.cfg"), "application/yaml; charset=utf-8"));
    CHECK(!strcmp(lookup(&t, "a.png"), "image/png")); /* built-ins still apply */
    CHECK(!strcmp(lookup(&t, "a.nothing"), MIME_DEFAULT));
    for (size_t i = 1; i < t.count; i++)
        CHECK(strcmp(t.entries[i - 1].ext, t.entries[i].ext) < 0);
    mime_table_free(&t);
    CHECK(t.count == 0 && t.entries == NULL);
    mime_table_free(&t); /* twice is harmless */
}

TEST(mime_table_last_line_wins)
{
    struct mime_table t;
    size_t line = 0;
    CHECK_INT(parse("a/one x y\nb/two y z\nc/three x\n", &t, &line), 0);
    CHECK_INT(t.count, 3);
    CHECK(!strcmp(lookup(&t, "f.x"), "c/three"));
    CHECK(!strcmp(lookup(&t, "f.y"), "b/two"));
    CHECK(!strcmp(lookup(&t, "f.z"), "b/two"));
    mime_table_free(&t);
}

TEST(mime_table_empty_inputs)
{
    struct mime_table t;
    size_t line = 0;
    CHECK_INT(mime_table_parse(unit_guard("", 0), 0, &t, &line), 0);
    CHECK_INT(t.count, 0);
    CHECK(!strcmp(lookup(&t, "a.css"), "text/css; charset=utf-8"));
    mime_table_free(&t);
    CHECK_INT(parse("# only\n\n  \t\ntext/plain\n", &t, &line), 0);
    CHECK_INT(t.count, 0);
    mime_table_free(&t);
}

TEST(mime_table_errors_report_line)
{
    static const struct {
        const char *text;
        size_t line;
    } bad[] = {
        {"text/plain txt\nnoslash ext\n", 2},
        {"text/plain txt\n\n\n/plain ext\n", 4},
        {"text/ ext", 1},
        {"text/plain/x ext", 1},
        {"types {\n", 1},
        {"text/html html;\n", 1},
        {"text/plain t\x01xt", 1},
        {"text/plain caf\xc3\xa9", 1},
        {"text/plain a/b", 1},
        {"text/plain ok\ntext/plain abcdefghijabcdefghijabcdefghijabc", 2},
        {"te xt/plain ok", 1},
        {"text/plain ok\r\ntext/pla\x7fin x\r\n", 2},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct mime_table t;
        size_t line = 0;
        CHECK_INT(parse(bad[i].text, &t, &line), -EINVAL);
        CHECK_INT(line, bad[i].line);
        CHECK(t.count == 0 && t.entries == NULL && t.strings == NULL);
    }
    /* A NUL byte is data, not the end of the text. */
    static const char nul[] = "text/plain a\0b\n";
    struct mime_table t;
    size_t line = 0;
    CHECK_INT(mime_table_parse(unit_guard(nul, sizeof(nul) - 1), sizeof(nul) - 1, &t, &line),
              -EINVAL);
    /* ...also inside a comment. */
    static const char nul2[] = "text/plain a # x\0y\n";
    CHECK_INT(mime_table_parse(unit_guard(nul2, sizeof(nul2) - 1), sizeof(nul2) - 1, &t, &line),
              -EINVAL);
    /* Exactly MIME_EXT_MAX is fine. */
    CHECK_INT(parse("text/plain abcdefghijabcdefghijabcdefghijab", &t, &line), 0);
    CHECK(!strcmp(lookup(&t, "f.abcdefghijabcdefghijabcdefghijab"), "text/plain; charset=utf-8"));
    mime_table_free(&t);
}
