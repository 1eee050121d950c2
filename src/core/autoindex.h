/* autoindex: renders a directory listing as HTML or JSON from entries the caller has read.
 * Must not: read the directory or stat anything, allocate, write at or past out[cap], or emit
 * anything but the URL path and entry names it is given (never a filesystem path).
 * Ownership: entries and their names are the caller's; autoindex_sort reorders them in place. */
#ifndef CORE_AUTOINDEX_H
#define CORE_AUTOINDEX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/http1.h"

struct autoindex_entry {
    const char *name; /* raw bytes of the directory entry name, not NUL-terminated */
    size_t name_len;
    bool is_dir;
    uint64_t size; /* bytes; not shown for directories */
    int64_t mtime; /* seconds since the epoch */
};

enum autoindex_format {
    AUTOINDEX_HTML, /* Content-Type: text/html; charset=utf-8 */
    AUTOINDEX_JSON, /* Content-Type: application/json; charset=utf-8 */
};

/* Orders entries as listings show them: directories first, then by name in byte order (a name
 * that is a prefix of another comes first). Uses qsort; call it before autoindex_render. */
void autoindex_sort(struct autoindex_entry *entries, size_t n);

/*
 * Writes the listing of entries[0..n), in their given order, for the directory whose decoded
 * URL path is url_path (e.g. "/docs/a b/"; used only for the title, heading and "path" member).
 * The caller has already left out hidden entries, "." and "..".
 *
 * HTML: a small valid HTML5 page "Index of URL_PATH" with a table of links; a "../" link first
 * unless url_path is the root ("/" or empty); directory names end in '/'. Names are
 * HTML-escaped in text and percent-encoded (all but ALPHA DIGIT "-._~") in the relative hrefs,
 * so a name like "a:b" or "?x" cannot become another URL. Sizes are human-readable (1024-based:
 * "512 B", "1.5 KiB"); dates are UTC "YYYY-MM-DD hh:mm:ss". Bytes that are not valid UTF-8 and
 * control characters show as U+FFFD in text (the href keeps the exact bytes).
 *
 * JSON: {"path":URL_PATH,"entries":[{"name":...,"href":...,"type":"directory"|"file",
 * "size":BYTES (files only),"mtime":"1994-11-06T08:49:37Z"},...]}, one entry per line. Strings
 * are escaped (quote, backslash, controls as \n or \u00XX) and invalid UTF-8 bytes become
 * \ufffd, so the document is always valid JSON; "href" (percent-encoded, '/' after a directory)
 * keeps the exact name for clients that need it.
 *
 * omitted: entries of the directory left out of entries[] (a listing capped by the caller); when
 * it is not 0 the HTML page ends with a paragraph saying how many, and the JSON object gains an
 * "omitted" member with the count.
 *
 * Returns the length of the complete listing. The first min(length, cap) bytes are written to
 * out (no NUL); if length > cap the caller retries with a buffer of at least length bytes.
 * out may be NULL when cap is 0, to measure.
 */
size_t autoindex_render(char *out, size_t cap, enum autoindex_format format,
                        struct http_str url_path, const struct autoindex_entry *entries, size_t n,
                        size_t omitted);

#endif
