/* fuzz_vhost: libFuzzer target for the parts of core/vhost a client reaches: the lookup key of
 * a Host value, the lookup itself, and the Location of a redirect built from a request's path
 * and query, asserting that a Location never names a host other than its rule's.
 * Must not: be linked into the server; it aborts on the first broken invariant.
 * Ownership: libFuzzer owns data; everything here is on the stack. */
#include "core/path.h"
#include "core/vhost.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REQUIRE(cond)                                                                              \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "fuzz_vhost: %s:%d: %s\n", __FILE__, __LINE__, #cond);                 \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

static const char *const names[] = {"example.org",        "www.example.org", "*.example.org",
                                    "*.docs.example.org", "[::1]",           "127.0.0.1"};
#define NNAMES (sizeof(names) / sizeof(names[0]))

/* A Location after its fixed prefix: only URI characters, nothing that ends or redirects the
 * URL elsewhere (no space, control byte, '\\', '#'), and never "//" right after the prefix. */
static void check_tail(const char *out, size_t at, size_t len)
{
    REQUIRE(at <= len);
    REQUIRE(!(len - at >= 1 && out[at] == '/'));
    bool query = false; /* a query keeps its own '%' escapes as the client sent them */
    for (size_t i = at; i < len; i++) {
        unsigned char c = (unsigned char)out[i];
        REQUIRE(c > 0x20 && c < 0x7f && c != '\\' && c != '#' && c != '"');
        query |= c == '?';
        if (c == '%' && !query)
            REQUIRE(i + 2 < len && strchr("0123456789ABCDEF", out[i + 1]) &&
                    strchr("0123456789ABCDEF", out[i + 2]));
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct http_str in = {(const char *)data, size};

    /* The Host key: lower case, no port, bounded; and the lookup stays in range. */
    char key[VHOST_NAME_MAX + 1];
    size_t klen = vhost_key(in, key);
    REQUIRE(klen <= VHOST_NAME_MAX);
    if (klen) {
        REQUIRE(key[klen] == '\0' && strlen(key) == klen);
        for (size_t i = 0; i < klen; i++)
            REQUIRE(!(key[i] >= 'A' && key[i] <= 'Z'));
        if (key[0] != '[')
            REQUIRE(memchr(key, ':', klen) == NULL);
        struct vhost_slot slots[16];
        struct vhost_table t;
        REQUIRE(vhost_slots_for(NNAMES) <= 16);
        vhost_table_init(&t, slots, vhost_slots_for(NNAMES));
        for (size_t i = 0; i < NNAMES; i++) {
            const char *n = names[i];
            REQUIRE(vhost_table_add(&t, n, (int)i) == 0);
        }
        int site = vhost_lookup(&t, key, klen);
        REQUIRE(site >= -1 && site < (int)NNAMES);
        if (site >= 0 && names[site][0] != '*')
            REQUIRE(strcmp(names[site], key) == 0);
        if (strcmp(key, "example.org") == 0)
            REQUIRE(site == 0);
    }

    /* Redirect targets from the request's own path and query, as serve builds them. */
    char path[4096];
    struct path_result res;
    if (path_normalize(in, path, sizeof(path), &res) != 0)
        return 0;
    char out[3 * 4096 + 256];
    static const char to[] = "https://example.org/new/*";
    size_t n = vhost_location(to, (struct http_str){path, res.len}, res.query, out, sizeof(out));
    if (n) {
        REQUIRE(n >= sizeof(to) - 2 && memcmp(out, to, sizeof(to) - 2) == 0);
        check_tail(out, sizeof(to) - 2, n);
    }
    n = vhost_location("/fixed", (struct http_str){path, res.len}, res.query, out, sizeof(out));
    REQUIRE(n == 6 && memcmp(out, "/fixed", 6) == 0); /* a TO without '*' carries nothing */
    n = vhost_canonical("https", "example.org", path, res.len, res.query, out, sizeof(out));
    if (n) {
        static const char pre[] = "https://example.org/";
        REQUIRE(n >= sizeof(pre) - 1 && memcmp(out, pre, sizeof(pre) - 1) == 0);
        check_tail(out, sizeof(pre) - 1, n);
    }
    return 0;
}
