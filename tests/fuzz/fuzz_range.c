/* libFuzzer target for core/range: the first 8 bytes pick the representation size, the rest is
 * the Range field value. Asserts that every answer is well-formed and the framing adds up. */
#include "core/range.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint64_t len = 0;
    if (size >= 8) {
        memcpy(&len, data, 8);
        /* Mostly small sizes, so that specs often land inside; sometimes huge ones. */
        if (!(len & 1))
            len = (len >> 1) % 100000;
        data += 8;
        size -= 8;
    }
    /* A private copy of exactly size bytes: ASan flags any read past its end. */
    char *hdr = malloc(size ? size : 1);
    memcpy(hdr, data, size);
    struct http_str s = {hdr, size};
    struct range_set set;
    enum range_result r = range_parse(s, len, &set);

    assert(r == RANGE_FULL || r == RANGE_PARTIAL || r == RANGE_UNSATISFIABLE);
    if (r == RANGE_PARTIAL) {
        assert(set.count >= 1 && set.count <= RANGE_MAX);
        uint64_t total = 0;
        for (size_t i = 0; i < set.count; i++) {
            assert(set.span[i].first <= set.span[i].last);
            assert(set.span[i].last < len);
            /* Sorted, disjoint and not even adjacent (adjacent spans are merged). */
            if (i > 0)
                assert(set.span[i].first > set.span[i - 1].last + 1);
            total += set.span[i].last - set.span[i].first + 1;
        }
        assert(total <= len);

        char buf[256];
        const char *b = "fuzzboundary", *type = "application/octet-stream";
        uint64_t body = range_multipart_end(buf, sizeof(buf), b);
        for (size_t i = 0; i < set.count; i++) {
            size_t n = range_part_header(buf, sizeof(buf), b, type, &set.span[i], len);
            assert(n < sizeof(buf) && buf[n] == '\0' && strlen(buf) == n);
            body += n + (set.span[i].last - set.span[i].first + 1);
            n = range_content_range(buf, sizeof(buf), &set.span[i], len);
            assert(n < sizeof(buf) && memcmp(buf, "bytes ", 6) == 0);
        }
        assert(range_multipart_length(&set, len, b, type) == body);
    } else if (r == RANGE_UNSATISFIABLE) {
        /* Only a valid bytes= header can be unsatisfiable. */
        assert(size >= 6);
    }
    free(hdr);
    return 0;
}
