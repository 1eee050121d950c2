/* libFuzzer target for core/date: parses the input as an HTTP-date; every accepted date must
 * format and re-parse to the same instant, and the first 8 bytes as a timestamp must survive a
 * format/parse round trip (inside the four-digit-year range). */
#include "core/date.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size ? size : 1);
    memcpy(s, data, size);
    int64_t t = 0, back = 0;
    char buf[HTTPDATE_LEN + 1], iso[ISODATE_LEN + 1];

    if (httpdate_parse(s, size, &t) == 0) {
        assert(t >= HTTPDATE_MIN && t <= HTTPDATE_MAX);
        httpdate_format(t, buf);
        assert(strlen(buf) == HTTPDATE_LEN);
        assert(httpdate_parse(buf, HTTPDATE_LEN, &back) == 0 && back == t);
        /* The IMF-fixdate form of an accepted IMF-fixdate is the input itself. */
        if (size == HTTPDATE_LEN && s[3] == ',')
            assert(memcmp(buf, s, size) == 0);
    }

    if (size >= 8) {
        int64_t v;
        memcpy(&v, data, 8);
        httpdate_format(v, buf);
        httpdate_format_iso8601(v, iso);
        assert(strlen(buf) == HTTPDATE_LEN && strlen(iso) == ISODATE_LEN);
        int64_t clamped = v < HTTPDATE_MIN ? HTTPDATE_MIN : v > HTTPDATE_MAX ? HTTPDATE_MAX : v;
        assert(httpdate_parse(buf, HTTPDATE_LEN, &back) == 0 && back == clamped);
        /* Same calendar fields in both formats: compare the year and the time of day. */
        assert(memcmp(iso, buf + 12, 4) == 0 && memcmp(iso + 11, buf + 17, 8) == 0);
    }
    free(s);
    return 0;
}
