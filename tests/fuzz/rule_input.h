/* rule_input: what fuzz_headers and fuzz_redirects read first from an input that is also a
 * rules file: the request path its first line names (when it starts with '/').
 * Must not: be linked into the server (test-only, header-only).
 * Ownership: the caller's buffers. */
#ifndef FUZZ_RULE_INPUT_H
#define FUZZ_RULE_INPUT_H

#include <stddef.h>
#include <string.h>

/* text[0..size)'s first line, when it starts with '/', into path[0..cap) (truncated to cap - 1
 * bytes), else "/"; path must arrive zeroed past "/" (char path[N] = "/"). Its length. */
static inline size_t rule_input_path(const char *text, size_t size, char *path, size_t cap)
{
    const char *nl = memchr(text, '\n', size);
    size_t first = nl ? (size_t)(nl - text) : size;
    size_t pl = first < cap - 1 ? first : cap - 1;
    if (pl && text[0] == '/')
        memcpy(path, text, pl);
    else
        pl = 1;
    return pl;
}

#endif
