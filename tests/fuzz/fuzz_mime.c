/* libFuzzer target for core/mime's --mime-types parser: any bytes give either a table whose
 * every entry keeps the contract (sorted, unique, lower-case token extensions, a type/subtype
 * type) and is found again by mime_lookup, or -EINVAL with a line number inside the text. */
#include "core/mime.h"

#include <assert.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* A private copy of exactly size bytes: ASan flags any read past its end. */
    char *text = malloc(size ? size : 1);
    memcpy(text, data, size);
    struct mime_table t;
    size_t line = 0;
    int rc = mime_table_parse(text, size, &t, &line);

    assert(rc == 0 || rc == -EINVAL || rc == -ENOMEM);
    if (rc == -EINVAL) {
        size_t lines = 1;
        for (size_t i = 0; i < size; i++)
            lines += text[i] == '\n';
        assert(line >= 1 && line <= lines);
        assert(t.count == 0 && t.entries == NULL);
    }
    for (size_t i = 0; rc == 0 && i < t.count; i++) {
        const char *ext = t.entries[i].ext, *type = t.entries[i].type;
        size_t n = strlen(ext);
        assert(n >= 1 && n <= MIME_EXT_MAX);
        for (size_t k = 0; k < n; k++)
            assert(ext[k] > 0x20 && ext[k] < 0x7f && !(ext[k] >= 'A' && ext[k] <= 'Z'));
        if (i > 0)
            assert(strcmp(t.entries[i - 1].ext, ext) < 0);
        assert(strchr(type, '/') && type[0] != '/');
        char name[MIME_EXT_MAX + 3];
        int len = snprintf(name, sizeof(name), "x.%s", ext);
        if (!strchr(ext, '/') && !strchr(ext, '.'))
            assert(strcmp(mime_lookup(&t, name, (size_t)len), type) == 0);
    }
    mime_table_free(&t);
    free(text);
    return 0;
}
