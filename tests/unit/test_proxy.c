/* test_proxy: the PROXY protocol reader (core/proxy.h), versions 1 and 2, every input ending at
 * a guard page: whole headers with data after them, every prefix (partial), and each way a
 * header can break the format or its bounds.
 * Must not: depend on anything but the parser.
 * Ownership: inputs are unit_guard copies. */
#include "unit.h"

#include <arpa/inet.h>
#include <sys/socket.h>

#include "core/proxy.h"

static int parse(const void *data, size_t len, struct proxy_info *pi)
{
    return proxy_parse((const uint8_t *)unit_guard(data, len), len, pi);
}

static void every_prefix_is_partial(const uint8_t *h, size_t len)
{
    struct proxy_info pi;
    for (size_t n = 0; n < len; n++)
        CHECK_INT(parse(h, n, &pi), PROXY_PARTIAL);
}

TEST(proxy_v1_tcp4_and_tcp6)
{
    static const char h4[] = "PROXY TCP4 192.0.2.7 198.51.100.1 56324 443\r\nGET / HTTP/1.1\r\n";
    struct proxy_info pi;
    size_t line = strlen("PROXY TCP4 192.0.2.7 198.51.100.1 56324 443\r\n");
    CHECK_INT(parse(h4, strlen(h4), &pi), line); /* the request after it is not taken */
    CHECK_INT(pi.version, 1);
    CHECK_INT(pi.cmd, PROXY_FORWARDED);
    CHECK_INT(pi.family, AF_INET);
    uint8_t want[16];
    inet_pton(AF_INET, "192.0.2.7", want);
    CHECK(memcmp(pi.src, want, 4) == 0);
    inet_pton(AF_INET, "198.51.100.1", want);
    CHECK(memcmp(pi.dst, want, 4) == 0);
    CHECK_INT(pi.src_port, 56324);
    CHECK_INT(pi.dst_port, 443);
    every_prefix_is_partial((const uint8_t *)h4, line);

    static const char h6[] = "PROXY TCP6 2001:db8::1 ::1 65535 0\r\n";
    CHECK_INT(parse(h6, strlen(h6), &pi), strlen(h6));
    CHECK_INT(pi.family, AF_INET6);
    inet_pton(AF_INET6, "2001:db8::1", want);
    CHECK(memcmp(pi.src, want, 16) == 0);
    CHECK_INT(pi.src_port, 65535);
    CHECK_INT(pi.dst_port, 0);

    static const char unknown[] = "PROXY UNKNOWN ffff::1 whatever\r\nx";
    CHECK_INT(parse(unknown, strlen(unknown), &pi), strlen(unknown) - 1);
    CHECK_INT(pi.family, AF_UNSPEC);
}

TEST(proxy_v1_refusals)
{
    static const char *const bad[] = {
        "PROXY TCP4 192.0.2.7 198.51.100.1 56324 443\n",     /* LF without CR */
        "PROXY TCP4  192.0.2.7 198.51.100.1 56324 443\r\n",  /* two spaces */
        "PROXY TCP4 192.0.2.7 198.51.100.1 65536 443\r\n",   /* port past 65535 */
        "PROXY TCP4 192.0.2.7 198.51.100.1 0443 443\r\n",    /* leading zero */
        "PROXY TCP4 192.0.2.7 198.51.100.1 56324 443 \r\n",  /* trailing space */
        "PROXY TCP4 2001:db8::1 198.51.100.1 56324 443\r\n", /* IPv6 in TCP4 */
        "PROXY TCP4 192.0.2.300 198.51.100.1 56324 443\r\n", /* no address */
        "PROXY TCP4 192.0.2.7 198.51.100.1 56324\r\n",       /* a field short */
        "PROXY UDP4 192.0.2.7 198.51.100.1 56324 443\r\n",   /* not TCP */
        "PROXY \r\n",
    };
    struct proxy_info pi;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        CHECK_INT(parse(bad[i], strlen(bad[i]), &pi), PROXY_MALFORMED);
    CHECK_INT(parse("GET / HTTP/1.1\r\n", 16, &pi), PROXY_NOT_PROXY);
    CHECK_INT(parse("PROXZ", 5, &pi), PROXY_NOT_PROXY);
    CHECK_INT(parse("\x16\x03\x01", 3, &pi), PROXY_NOT_PROXY); /* a TLS ClientHello */
    char longer[200];
    memset(longer, 'a', sizeof(longer));
    memcpy(longer, "PROXY TCP4 ", 11);
    CHECK_INT(parse(longer, 106, &pi), PROXY_PARTIAL);
    CHECK_INT(parse(longer, 107, &pi), PROXY_TOO_LONG);
    CHECK_INT(parse(longer, sizeof(longer), &pi), PROXY_TOO_LONG);
}

/* A v2 header: signature, ver_cmd, family, then body bytes. */
static size_t v2(uint8_t *out, uint8_t ver_cmd, uint8_t fam, const uint8_t *body, size_t n)
{
    static const uint8_t sig[12] = {0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d,
                                    0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a};
    memcpy(out, sig, 12);
    out[12] = ver_cmd;
    out[13] = fam;
    out[14] = (uint8_t)(n >> 8);
    out[15] = (uint8_t)n;
    if (n)
        memcpy(out + 16, body, n);
    return 16 + n;
}

TEST(proxy_v2_addresses_and_tlvs)
{
    uint8_t body[64] = {192, 0, 2, 7, 198, 51, 100, 1, 0xdc, 0x04, 0x01, 0xbb};
    size_t n = 12;
    const uint8_t tlvs[] = {0x01, 0,   2,   'h', '2', 0x02, 0,    11, 'e', 'x', 'a', 'm', 'p',
                            'l',  'e', '.', 'o', 'r', 'g',  0xea, 0,  3,   'v', 'p', 'c'};
    memcpy(body + n, tlvs, sizeof(tlvs));
    n += sizeof(tlvs);
    uint8_t h[128];
    size_t len = v2(h, 0x21, 0x11, body, n);
    memcpy(h + len, "GET", 3);
    struct proxy_info pi;
    CHECK_INT(parse(h, len + 3, &pi), len);
    CHECK_INT(pi.version, 2);
    CHECK_INT(pi.cmd, PROXY_FORWARDED);
    CHECK_INT(pi.family, AF_INET);
    CHECK(memcmp(pi.src, body, 4) == 0 && memcmp(pi.dst, body + 4, 4) == 0);
    CHECK_INT(pi.src_port, 56324);
    CHECK_INT(pi.dst_port, 443);
    CHECK_MEM(pi.alpn, pi.alpn_len, "h2");
    CHECK_MEM(pi.authority, pi.authority_len, "example.org");
    every_prefix_is_partial(h, len);

    uint8_t six[36] = {0x20, 0x01, 0x0d, 0xb8, [15] = 1, [31] = 1, 0x30, 0x39, 0x01, 0xbb};
    len = v2(h, 0x21, 0x21, six, sizeof(six));
    CHECK_INT(parse(h, len, &pi), len);
    CHECK_INT(pi.family, AF_INET6);
    CHECK(memcmp(pi.src, six, 16) == 0);
    CHECK_INT(pi.src_port, 12345);

    /* LOCAL (a health check): addresses ignored, the socket's are used */
    len = v2(h, 0x20, 0x11, body, 12);
    CHECK_INT(parse(h, len, &pi), len);
    CHECK_INT(pi.cmd, PROXY_LOCAL);
    CHECK_INT(pi.family, AF_UNSPEC);
    len = v2(h, 0x20, 0x00, NULL, 0);
    CHECK_INT(parse(h, len, &pi), 16);
}

TEST(proxy_v2_refusals)
{
    uint8_t body[64] = {192, 0, 2, 7, 198, 51, 100, 1, 0xdc, 0x04, 0x01, 0xbb};
    uint8_t h[128];
    struct proxy_info pi;
    size_t len = v2(h, 0x11, 0x11, body, 12); /* version 1 in a v2 header */
    CHECK_INT(parse(h, len, &pi), PROXY_MALFORMED);
    len = v2(h, 0x22, 0x11, body, 12); /* command 2 */
    CHECK_INT(parse(h, len, &pi), PROXY_MALFORMED);
    len = v2(h, 0x21, 0x11, body, 8); /* shorter than its addresses */
    CHECK_INT(parse(h, len, &pi), PROXY_MALFORMED);
    len = v2(h, 0x21, 0x41, body, 12); /* family 4 */
    CHECK_INT(parse(h, len, &pi), PROXY_MALFORMED);
    const uint8_t overrun[] = {0x02, 0, 9, 'a', 'b'};
    memcpy(body + 12, overrun, sizeof(overrun));
    len = v2(h, 0x21, 0x11, body, 12 + sizeof(overrun)); /* a TLV past the body */
    CHECK_INT(parse(h, len, &pi), PROXY_MALFORMED);
    len = v2(h, 0x21, 0x11, body, 12 + 2); /* a TLV header cut */
    CHECK_INT(parse(h, len, &pi), PROXY_MALFORMED);
    /* a body past the bound: refused from the 16 fixed bytes, nothing more is waited for */
    h[14] = (PROXY_V2_MAX_BODY + 1) >> 8;
    h[15] = (PROXY_V2_MAX_BODY + 1) & 0xff;
    CHECK_INT(parse(h, 16, &pi), PROXY_TOO_LONG);
    h[4] = 0x01; /* a broken signature */
    CHECK_INT(parse(h, 16, &pi), PROXY_NOT_PROXY);
}
