/* mime: maps a file name's extension to the Content-Type to send (built-in table + optional
 * table in /etc/mime.types format that overrides it).
 * Must not: touch the filesystem (the caller reads the types file), or allocate in mime_lookup.
 * Ownership: a parsed mime_table is the process's, read-only after start and safe to share
 * between workers; the strings mime_lookup returns live as long as their table (built-in: for
 * ever). */
#ifndef CORE_MIME_H
#define CORE_MIME_H

#include <stddef.h>

#define MIME_DEFAULT "application/octet-stream"
#define MIME_EXT_MAX 32 /* longer extensions are never looked up, and rejected in a file */

struct mime_entry {
    const char *ext;  /* lower case, without the dot, NUL-terminated */
    const char *type; /* the full Content-Type value, e.g. "text/css; charset=utf-8" */
};

/* A table parsed from a file; sorted by ext, one entry per extension. Zero it to get an empty
 * table. */
struct mime_table {
    struct mime_entry *entries;
    size_t count;
    char *strings; /* backing store for every ext and type */
};

/*
 * Returns the Content-Type for path[0..len) (a URL or file path; only the part after its last
 * '/' is used). The extension is what follows the last '.' of that name, compared without
 * regard to ASCII case; a name with no '.', ending in '.', or whose only '.' is its first byte
 * (".profile") has none. extra (may be NULL) is searched first, then the built-in table, which
 * covers nginx's mime.types and the modern web formats (mjs, wasm, webp, avif, woff2, json, map,
 * webmanifest, md, ics, ...). Textual types carry "; charset=utf-8". Unknown or missing
 * extension: MIME_DEFAULT. Never returns NULL; never reads path[len] or beyond.
 */
const char *mime_lookup(const struct mime_table *extra, const char *path, size_t len);

/*
 * Parses text[0..len) in /etc/mime.types format: one "type/subtype ext1 ext2 ..." per line,
 * fields separated by spaces or tabs, '#' starting a comment that runs to the end of the line,
 * blank lines and lines with a type but no extension allowed, LF or CRLF line ends. Types and
 * extensions are stored in lower case; the types under text/ and the textual application types
 * (javascript, json, xml, yaml, toml, sql and any +json or +xml) get "; charset=utf-8". When an
 * extension appears more than once, the last line wins.
 *
 * Returns 0 with *out filled (free it with mime_table_free), -ENOMEM, or -EINVAL when a line is
 * malformed (a type that is not token/token, an extension with a character outside the token
 * set or longer than MIME_EXT_MAX, a control or non-ASCII byte), with its 1-based number in
 * *line. On error *out is left empty and nothing needs freeing. Runs once at start, so it may
 * allocate.
 */
int mime_table_parse(const char *text, size_t len, struct mime_table *out, size_t *line);

/* Frees what mime_table_parse allocated and empties the table; a zeroed table is fine too. */
void mime_table_free(struct mime_table *table);

#endif
