/* libFuzzer target for core/proxy: any bytes as the start of a connection behind a balancer.
 * Asserts that a header taken is within the input (and within its bounds), that its family
 * and ports are what it says, and that every shorter prefix of a taken header is partial. */
#include "core/proxy.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* A private copy of exactly size bytes: ASan flags any read past its end. */
    uint8_t *buf = malloc(size ? size : 1);
    memcpy(buf, data, size);
    struct proxy_info pi;
    int rc = proxy_parse(buf, size, &pi);
    assert(rc >= PROXY_TOO_LONG);
    if (rc > 0) {
        assert((size_t)rc <= size);
        assert(pi.version == 1 ? rc <= PROXY_V1_MAX : rc <= 16 + PROXY_V2_MAX_BODY);
        assert(pi.family == AF_UNSPEC || pi.family == AF_INET || pi.family == AF_INET6);
        assert(!pi.alpn || (pi.alpn >= buf && pi.alpn + pi.alpn_len <= buf + rc));
        assert(!pi.authority ||
               (pi.authority >= buf && pi.authority + pi.authority_len <= buf + rc));
        struct proxy_info again;
        assert(proxy_parse(buf, (size_t)rc - 1, &again) == PROXY_PARTIAL);
    } else if (rc == PROXY_PARTIAL) {
        assert(size < 16 + PROXY_V2_MAX_BODY);
    }
    (void)proxy_strerror(rc);
    free(buf);
    return 0;
}
