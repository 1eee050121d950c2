#include "core/mime.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "core/token.h"

#define CHARSET "; charset=utf-8"
#define T(type) type CHARSET

/* Sorted by ext in byte order (mime_lookup binary-searches it; test_mime checks every entry is
 * found). nginx's mime.types, plus what browsers expect of a modern static site. */
static const struct mime_entry builtin[] = {
    {"3gp", "video/3gpp"},
    {"3gpp", "video/3gpp"},
    {"7z", "application/x-7z-compressed"},
    {"aac", "audio/aac"},
    {"ai", "application/postscript"},
    {"apng", "image/apng"},
    {"appcache", T("text/cache-manifest")},
    {"asc", T("text/plain")},
    {"asf", "video/x-ms-asf"},
    {"asx", "video/x-ms-asf"},
    {"atom", T("application/atom+xml")},
    {"avi", "video/x-msvideo"},
    {"avif", "image/avif"},
    {"bin", "application/octet-stream"},
    {"bmp", "image/x-ms-bmp"},
    {"bz2", "application/x-bzip2"},
    {"cco", "application/x-cocoa"},
    {"cjs", T("text/javascript")},
    {"conf", T("text/plain")},
    {"crt", "application/x-x509-ca-cert"},
    {"css", T("text/css")},
    {"csv", T("text/csv")},
    {"cur", "image/x-icon"},
    {"deb", "application/octet-stream"},
    {"der", "application/x-x509-ca-cert"},
    {"diff", T("text/plain")},
    {"dll", "application/octet-stream"},
    {"dmg", "application/octet-stream"},
    {"doc", "application/msword"},
    {"docx", "application/vnd.openxmlformats-officedocument.wordprocessingml.document"},
    {"ear", "application/java-archive"},
    {"eot", "application/vnd.ms-fontobject"},
    {"eps", "application/postscript"},
    {"epub", "application/epub+zip"},
    {"exe", "application/octet-stream"},
    {"flac", "audio/flac"},
    {"flv", "video/x-flv"},
    {"gif", "image/gif"},
    {"gz", "application/gzip"},
    {"heic", "image/heic"},
    {"heif", "image/heif"},
    {"hqx", "application/mac-binhex40"},
    {"htc", T("text/x-component")},
    {"htm", T("text/html")},
    {"html", T("text/html")},
    {"ico", "image/x-icon"},
    {"ics", T("text/calendar")},
    {"img", "application/octet-stream"},
    {"iso", "application/octet-stream"},
    {"jad", T("text/vnd.sun.j2me.app-descriptor")},
    {"jar", "application/java-archive"},
    {"jardiff", "application/x-java-archive-diff"},
    {"jfif", "image/jpeg"},
    {"jng", "image/x-jng"},
    {"jnlp", "application/x-java-jnlp-file"},
    {"jpe", "image/jpeg"},
    {"jpeg", "image/jpeg"},
    {"jpg", "image/jpeg"},
    {"js", T("text/javascript")},
    {"json", T("application/json")},
    {"jsonld", T("application/ld+json")},
    {"jxl", "image/jxl"},
    {"kar", "audio/midi"},
    {"kml", T("application/vnd.google-earth.kml+xml")},
    {"kmz", "application/vnd.google-earth.kmz"},
    {"log", T("text/plain")},
    {"m3u8", "application/vnd.apple.mpegurl"},
    {"m4a", "audio/x-m4a"},
    {"m4s", "video/mp4"},
    {"m4v", "video/x-m4v"},
    {"map", T("application/json")},
    {"markdown", T("text/markdown")},
    {"md", T("text/markdown")},
    {"mid", "audio/midi"},
    {"midi", "audio/midi"},
    {"mjs", T("text/javascript")},
    {"mkv", "video/x-matroska"},
    {"mml", T("text/mathml")},
    {"mng", "video/x-mng"},
    {"mov", "video/quicktime"},
    {"mp3", "audio/mpeg"},
    {"mp4", "video/mp4"},
    {"mpeg", "video/mpeg"},
    {"mpg", "video/mpeg"},
    {"msi", "application/octet-stream"},
    {"msm", "application/octet-stream"},
    {"msp", "application/octet-stream"},
    {"odg", "application/vnd.oasis.opendocument.graphics"},
    {"odp", "application/vnd.oasis.opendocument.presentation"},
    {"ods", "application/vnd.oasis.opendocument.spreadsheet"},
    {"odt", "application/vnd.oasis.opendocument.text"},
    {"oga", "audio/ogg"},
    {"ogg", "audio/ogg"},
    {"ogv", "video/ogg"},
    {"opus", "audio/ogg"},
    {"otf", "font/otf"},
    {"patch", T("text/plain")},
    {"pdb", "application/x-pilot"},
    {"pdf", "application/pdf"},
    {"pem", "application/x-x509-ca-cert"},
    {"pjp", "image/jpeg"},
    {"pjpeg", "image/jpeg"},
    {"pl", "application/x-perl"},
    {"pm", "application/x-perl"},
    {"png", "image/png"},
    {"ppt", "application/vnd.ms-powerpoint"},
    {"pptx", "application/vnd.openxmlformats-officedocument.presentationml.presentation"},
    {"prc", "application/x-pilot"},
    {"ps", "application/postscript"},
    {"ra", "audio/x-realaudio"},
    {"rar", "application/x-rar-compressed"},
    {"rdf", T("application/xml")},
    {"rpm", "application/x-redhat-package-manager"},
    {"rss", T("application/rss+xml")},
    {"rtf", "application/rtf"},
    {"run", "application/x-makeself"},
    {"sea", "application/x-sea"},
    {"sh", T("application/x-sh")},
    {"shtml", T("text/html")},
    {"sit", "application/x-stuffit"},
    {"sql", T("application/sql")},
    {"svg", T("image/svg+xml")},
    {"svgz", "image/svg+xml"}, /* gzip bytes: no charset */
    {"swf", "application/x-shockwave-flash"},
    {"tar", "application/x-tar"},
    {"tcl", "application/x-tcl"},
    {"text", T("text/plain")},
    {"tgz", "application/gzip"},
    {"tif", "image/tiff"},
    {"tiff", "image/tiff"},
    {"tk", "application/x-tcl"},
    {"toml", T("application/toml")},
    {"ts", "video/mp2t"},
    {"ttc", "font/collection"},
    {"ttf", "font/ttf"},
    {"txt", T("text/plain")},
    {"vtt", T("text/vtt")},
    {"war", "application/java-archive"},
    {"wasm", "application/wasm"},
    {"wav", "audio/wav"},
    {"wbmp", "image/vnd.wap.wbmp"},
    {"weba", "audio/webm"},
    {"webm", "video/webm"},
    {"webmanifest", T("application/manifest+json")},
    {"webp", "image/webp"},
    {"wml", T("text/vnd.wap.wml")},
    {"wmlc", "application/vnd.wap.wmlc"},
    {"wmv", "video/x-ms-wmv"},
    {"woff", "font/woff"},
    {"woff2", "font/woff2"},
    {"xhtml", T("application/xhtml+xml")},
    {"xls", "application/vnd.ms-excel"},
    {"xlsx", "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"},
    {"xml", T("text/xml")},
    {"xpi", "application/x-xpinstall"},
    {"xsd", T("application/xml")},
    {"xsl", T("application/xml")},
    {"xslt", T("application/xml")},
    {"xspf", T("application/xspf+xml")},
    {"xz", "application/x-xz"},
    {"yaml", T("application/yaml")},
    {"yml", T("application/yaml")},
    {"zip", "application/zip"},
    {"zst", "application/zstd"},
};

static const char *search(const struct mime_entry *e, size_t n, const char *ext)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(ext, e[mid].ext);
        if (c == 0)
            return e[mid].type;
        if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return NULL;
}

const char *mime_lookup(const struct mime_table *extra, const char *path, size_t len)
{
    size_t start = len, dot = len;
    while (start > 0 && path[start - 1] != '/') {
        start--;
        if (dot == len && path[start] == '.')
            dot = start;
    }
    if (dot == len || dot == start || len - dot - 1 > MIME_EXT_MAX || len - dot - 1 == 0)
        return MIME_DEFAULT;

    char ext[MIME_EXT_MAX + 1];
    size_t n = len - dot - 1;
    for (size_t i = 0; i < n; i++)
        ext[i] = (char)token_lower((unsigned char)path[dot + 1 + i]);
    ext[n] = '\0';

    const char *type = NULL;
    if (extra && extra->count)
        type = search(extra->entries, extra->count, ext);
    if (!type)
        type = search(builtin, sizeof(builtin) / sizeof(builtin[0]), ext);
    return type ? type : MIME_DEFAULT;
}

static bool is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\r';
}

static bool ieq_lit(const char *p, size_t n, const char *lit)
{
    return token_ieq(p, n, lit, strlen(lit));
}

static bool ends_with(const char *p, size_t n, const char *suffix)
{
    size_t k = strlen(suffix);
    return n >= k && ieq_lit(p + n - k, k, suffix);
}

/* Browsers sniff or misread text without a charset; these are the types whose bodies are text
 * and whose default charset is not already UTF-8 by definition for every client. */
static bool is_text(const char *type, size_t n)
{
    static const char *const app[] = {"javascript", "ecmascript", "json", "xml",
                                      "yaml",       "toml",       "sql"};
    const char *slash = memchr(type, '/', n);
    size_t top = (size_t)(slash - type), sub = n - top - 1;
    if (ieq_lit(type, top, "text"))
        return true;
    if (ends_with(slash + 1, sub, "+json") || ends_with(slash + 1, sub, "+xml"))
        return true;
    if (!ieq_lit(type, top, "application"))
        return false;
    for (size_t i = 0; i < sizeof(app) / sizeof(app[0]); i++) {
        if (ieq_lit(slash + 1, sub, app[i]))
            return true;
    }
    return false;
}

static bool valid_type(const char *p, size_t n)
{
    size_t slashes = 0;
    for (size_t i = 0; i < n; i++) {
        if (p[i] == '/')
            slashes++;
        else if (!token_is_tchar((unsigned char)p[i]))
            return false;
    }
    return slashes == 1 && p[0] != '/' && p[n - 1] != '/';
}

static bool valid_ext(const char *p, size_t n)
{
    if (n > MIME_EXT_MAX)
        return false;
    for (size_t i = 0; i < n; i++) {
        if (!token_is_tchar((unsigned char)p[i]))
            return false;
    }
    return true;
}

static char *copy_lower(char *dst, const char *src, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = (char)token_lower((unsigned char)src[i]);
    return dst + n;
}

/* One pass over the text. With fill NULL it validates and counts entries and string bytes;
 * with fill it stores them (fill->strings and fill->entries sized by the first pass). Two passes
 * keep the parser to exactly two allocations without a growth strategy. */
static int scan(const char *text, size_t len, struct mime_table *fill, size_t *entries,
                size_t *bytes, size_t *line)
{
    const char *p = text, *end = text + len;
    size_t ln = 0, n = 0, used = 0;

    while (p < end) {
        ln++;
        const char *eol = memchr(p, '\n', (size_t)(end - p));
        if (!eol)
            eol = end;
        const char *hash = memchr(p, '#', (size_t)(eol - p));
        const char *stop = hash ? hash : eol;
        const char *type = NULL;

        for (const char *q = p; q < stop;) {
            if (is_space(*q)) {
                q++;
                continue;
            }
            const char *tok = q;
            while (q < stop && !is_space(*q))
                q++;
            size_t tlen = (size_t)(q - tok);
            if (!type) {
                if (!valid_type(tok, tlen))
                    goto invalid;
                bool text_type = is_text(tok, tlen);
                size_t need = tlen + (text_type ? strlen(CHARSET) : 0) + 1;
                if (fill) {
                    char *s = fill->strings + used;
                    char *w = copy_lower(s, tok, tlen);
                    if (text_type)
                        w = copy_lower(w, CHARSET, strlen(CHARSET));
                    *w = '\0';
                    type = s;
                } else {
                    type = tok;
                }
                used += need;
            } else {
                if (!valid_ext(tok, tlen))
                    goto invalid;
                if (fill) {
                    char *s = fill->strings + used;
                    copy_lower(s, tok, tlen)[0] = '\0';
                    fill->entries[n] = (struct mime_entry){s, type};
                }
                used += tlen + 1;
                n++;
            }
        }
        /* Comments may hold anything but NUL; the fields may hold only tokens and blanks. */
        for (const char *q = stop; q < eol; q++) {
            if (*q == '\0')
                goto invalid;
        }
        p = eol < end ? eol + 1 : end;
    }
    *entries = n;
    *bytes = used;
    return 0;

invalid:
    *line = ln;
    return -EINVAL;
}

/* Entries are stored in file order, so their ext pointers rise with the line they came from:
 * ordering equal extensions by pointer puts the line that must win last. */
static int by_ext_then_position(const void *a, const void *b)
{
    const struct mime_entry *x = a, *y = b;
    int c = strcmp(x->ext, y->ext);
    if (c)
        return c;
    return x->ext < y->ext ? -1 : x->ext > y->ext;
}

int mime_table_parse(const char *text, size_t len, struct mime_table *out, size_t *line)
{
    size_t entries = 0, bytes = 0;
    int rc;

    memset(out, 0, sizeof(*out));
    rc = scan(text, len, NULL, &entries, &bytes, line);
    if (rc)
        goto out;
    if (entries == 0)
        goto out;
    rc = -ENOMEM;
    out->strings = malloc(bytes);
    if (!out->strings)
        goto out;
    out->entries = malloc(entries * sizeof(out->entries[0]));
    if (!out->entries)
        goto free_strings;
    rc = scan(text, len, out, &entries, &bytes, line);
    if (rc) /* the first pass accepted the same text */
        goto free_entries;

    qsort(out->entries, entries, sizeof(out->entries[0]), by_ext_then_position);
    size_t kept = 0;
    for (size_t i = 0; i < entries; i++) {
        if (i + 1 < entries && strcmp(out->entries[i].ext, out->entries[i + 1].ext) == 0)
            continue;
        out->entries[kept++] = out->entries[i];
    }
    out->count = kept;
    return 0;

free_entries:
    free(out->entries);
free_strings:
    free(out->strings);
    memset(out, 0, sizeof(*out));
out:
    return rc;
}

void mime_table_free(struct mime_table *table)
{
    free(table->entries);
    free(table->strings);
    memset(table, 0, sizeof(*table));
}
