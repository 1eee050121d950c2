/* test_tls_redirect: the Location of --redirect-https (core/redirect.h): host forms, the port
 * replaced, the target kept byte for byte, and what is refused (no Host, a Host that is not a
 * host, a target that is not origin-form, a buffer too small).
 * Must not: touch anything but memory.
 * Ownership: inputs are guarded copies (a read past the end crashes). */
#include "unit.h"

#include "core/redirect.h"

static size_t loc(const char *host, const char *target, uint16_t port, char *out, size_t cap)
{
    const char *h = host ? unit_guard_str(host) : NULL;
    return redirect_https_location(h, host ? strlen(host) : 0, unit_guard_str(target),
                                   strlen(target), port, out, cap);
}

TEST(tls_redirect_location_forms)
{
    static const struct {
        const char *host, *target;
        uint16_t port;
        const char *want;
    } cases[] = {
        {"example.com", "/", 443, "https://example.com/"},
        {"example.com:80", "/a/b?x=1&y=%20", 443, "https://example.com/a/b?x=1&y=%20"},
        {"example.com:8080", "/a", 8443, "https://example.com:8443/a"},
        {"Example.COM", "//double/../x", 8443, "https://Example.COM:8443//double/../x"},
        {"127.0.0.1:8080", "/?q", 8443, "https://127.0.0.1:8443/?q"},
        {"[::1]:8080", "/x", 8443, "https://[::1]:8443/x"},
        {"[2001:db8::1]", "/x", 443, "https://[2001:db8::1]/x"},
        {"host:", "/x", 443, "https://host/x"},
        /* absolute-form: the authority replaces the Host field (RFC 9112 3.2.2) */
        {"h", "http://a.test:81/x?y", 8443, "https://a.test:8443/x?y"},
        {"h", "HTTPS://[::1]:81", 443, "https://[::1]/"},
        {NULL, "http://a.test?y", 443, "https://a.test/?y"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char out[256];
        size_t n = loc(cases[i].host, cases[i].target, cases[i].port, out, sizeof(out));
        CHECK_MEM(out, n, cases[i].want);
    }
}

TEST(tls_redirect_location_refusals)
{
    static const char *const bad_hosts[] = {
        "",
        ":80",
        "ex ample.com",
        "evil.com/x",
        "a@b",
        "a:b",
        "[::1",
        "[]",
        "[::1]x",
        "[::g]",
        "host:80x",
        "ex%41mple",
        "a\r\nSet-Cookie: x",
    };
    char out[256];
    for (size_t i = 0; i < sizeof(bad_hosts) / sizeof(bad_hosts[0]); i++) {
        size_t n = loc(bad_hosts[i], "/", 443, out, sizeof(out));
        if (n)
            fprintf(stderr, "  host '%s' accepted\n", bad_hosts[i]);
        CHECK_INT(n, 0);
    }
    CHECK_INT(loc(NULL, "/", 443, out, sizeof(out)), 0);
    CHECK_INT(loc("h", "*", 443, out, sizeof(out)), 0);
    CHECK_INT(loc("h", "ftp://h/x", 443, out, sizeof(out)), 0);
    CHECK_INT(loc("h", "http://", 443, out, sizeof(out)), 0);
    CHECK_INT(loc("h", "http:///x", 443, out, sizeof(out)), 0);
    CHECK_INT(loc("h", "http://u@h/x", 443, out, sizeof(out)), 0);
    /* "https://h:8443/x" is 16 bytes: it needs 17 with the NUL */
    CHECK_INT(loc("h", "/x", 8443, out, 16), 0);
    CHECK_INT(loc("h", "/x", 8443, out, 17), 16);
}
