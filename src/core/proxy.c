#include "core/proxy.h"

#include <arpa/inet.h>
#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>

static const uint8_t v2_sig[12] = {0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d,
                                   0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a};

/* Whether buf[0..len) is a prefix of want[0..want_len) (or want is a prefix of it). */
static bool starts(const uint8_t *buf, size_t len, const void *want, size_t want_len)
{
    return memcmp(buf, want, len < want_len ? len : want_len) == 0;
}

/* One space-separated field of a v1 line at *p (before end): its bytes, *p past it and its
 * space. False when it is empty. */
static bool field(const uint8_t **p, const uint8_t *end, const uint8_t **f, size_t *n)
{
    const uint8_t *q = *p;
    while (q < end && *q != ' ')
        q++;
    *f = *p;
    *n = (size_t)(q - *p);
    *p = q < end ? q + 1 : q;
    return *n > 0;
}

static bool port(const uint8_t *f, size_t n, uint16_t *out)
{
    if (n == 0 || n > 5 || (n > 1 && f[0] == '0'))
        return false;
    unsigned v = 0;
    for (size_t i = 0; i < n; i++) {
        if (f[i] < '0' || f[i] > '9')
            return false;
        v = v * 10 + (unsigned)(f[i] - '0');
    }
    if (v > 65535)
        return false;
    *out = (uint16_t)v;
    return true;
}

static bool addr(int family, const uint8_t *f, size_t n, uint8_t out[16])
{
    char text[48];
    if (n == 0 || n >= sizeof(text))
        return false;
    memcpy(text, f, n);
    text[n] = '\0';
    return inet_pton(family, text, out) == 1;
}

static int parse_v1(const uint8_t *buf, size_t len, struct proxy_info *out)
{
    size_t max = len < PROXY_V1_MAX ? len : PROXY_V1_MAX;
    const uint8_t *eol = memchr(buf, '\n', max);
    if (!eol)
        return len < PROXY_V1_MAX ? PROXY_PARTIAL : PROXY_TOO_LONG;
    if (eol == buf || eol[-1] != '\r')
        return PROXY_MALFORMED;
    const uint8_t *p = buf + 6, *end = eol - 1, *f;
    size_t n;
    out->version = 1;
    out->cmd = PROXY_FORWARDED;
    if (!field(&p, end, &f, &n))
        return PROXY_MALFORMED;
    if (n == 7 && memcmp(f, "UNKNOWN", 7) == 0) { /* the rest of the line is to be ignored */
        out->family = AF_UNSPEC;
        return (int)(eol + 1 - buf);
    }
    if (n != 4 || (memcmp(f, "TCP4", 4) != 0 && memcmp(f, "TCP6", 4) != 0))
        return PROXY_MALFORMED;
    out->family = f[3] == '4' ? AF_INET : AF_INET6;
    if (!field(&p, end, &f, &n) || !addr(out->family, f, n, out->src) || !field(&p, end, &f, &n) ||
        !addr(out->family, f, n, out->dst) || !field(&p, end, &f, &n) ||
        !port(f, n, &out->src_port) || !field(&p, end, &f, &n) || !port(f, n, &out->dst_port) ||
        f + n != end)
        return PROXY_MALFORMED;
    return (int)(eol + 1 - buf);
}

/* The TLVs of a v2 body after its addresses: each type, a 2-byte length, the value. */
static int parse_tlvs(const uint8_t *p, const uint8_t *end, struct proxy_info *out)
{
    while (p < end) {
        if (end - p < 3)
            return PROXY_MALFORMED;
        size_t n = (size_t)p[1] << 8 | p[2];
        if ((size_t)(end - p - 3) < n)
            return PROXY_MALFORMED;
        if (p[0] == 0x01) { /* PP2_TYPE_ALPN */
            out->alpn = p + 3;
            out->alpn_len = n;
        } else if (p[0] == 0x02) { /* PP2_TYPE_AUTHORITY: the SNI the client sent */
            out->authority = p + 3;
            out->authority_len = n;
        }
        p += 3 + n;
    }
    return 0;
}

static int parse_v2(const uint8_t *buf, size_t len, struct proxy_info *out)
{
    if (len < 16)
        return PROXY_PARTIAL;
    size_t body = (size_t)buf[14] << 8 | buf[15];
    if ((buf[12] >> 4) != 2 || (buf[12] & 0x0f) > 1)
        return PROXY_MALFORMED;
    if (body > PROXY_V2_MAX_BODY)
        return PROXY_TOO_LONG;
    if (len < 16 + body)
        return PROXY_PARTIAL;
    const uint8_t *p = buf + 16, *end = p + body;
    out->version = 2;
    out->cmd = (buf[12] & 0x0f) ? PROXY_FORWARDED : PROXY_LOCAL;
    out->family = AF_UNSPEC;
    int fam = buf[13] >> 4, proto = buf[13] & 0x0f;
    if (fam > 3 || proto > 2)
        return PROXY_MALFORMED;
    size_t need = fam == 1 ? 12 : fam == 2 ? 36 : fam == 3 ? 216 : 0;
    if (body < need)
        return PROXY_MALFORMED;
    if (out->cmd == PROXY_FORWARDED && (fam == 1 || fam == 2)) {
        size_t a = fam == 1 ? 4 : 16;
        out->family = fam == 1 ? AF_INET : AF_INET6;
        memcpy(out->src, p, a);
        memcpy(out->dst, p + a, a);
        out->src_port = (uint16_t)(p[2 * a] << 8 | p[2 * a + 1]);
        out->dst_port = (uint16_t)(p[2 * a + 2] << 8 | p[2 * a + 3]);
    }
    int rc = parse_tlvs(p + need, end, out);
    return rc < 0 ? rc : (int)(16 + body);
}

int proxy_parse(const uint8_t *buf, size_t len, struct proxy_info *out)
{
    memset(out, 0, sizeof(*out));
    if (len == 0)
        return PROXY_PARTIAL;
    if (buf[0] == v2_sig[0]) {
        if (!starts(buf, len, v2_sig, sizeof(v2_sig)))
            return PROXY_NOT_PROXY;
        return len < sizeof(v2_sig) ? PROXY_PARTIAL : parse_v2(buf, len, out);
    }
    if (!starts(buf, len, "PROXY ", 6))
        return PROXY_NOT_PROXY;
    return len < 6 ? PROXY_PARTIAL : parse_v1(buf, len, out);
}

const char *proxy_strerror(int rc)
{
    switch (rc) {
    case PROXY_PARTIAL:
        return "incomplete PROXY header";
    case PROXY_NOT_PROXY:
        return "no PROXY header";
    case PROXY_TOO_LONG:
        return "PROXY header too long";
    default:
        return rc < 0 ? "malformed PROXY header" : "PROXY header";
    }
}
