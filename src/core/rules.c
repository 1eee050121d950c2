/* Status decisions; see rules.h. */
#include "core/rules.h"

#include <stdio.h>

int rules_health(bool stopping)
{
    return stopping ? 503 : 200;
}

int rules_canonical_host(void)
{
    return 301;
}

int rules_auth(enum rules_auth verdict)
{
    switch (verdict) {
    case RULES_AUTH_GRANTED:
        return 0;
    case RULES_AUTH_BUSY:
        return 429;
    default:
        return 401;
    }
}

int rules_limit_req(uint32_t retry_after)
{
    return retry_after ? 429 : 0;
}

int rules_limit_conn(bool refused)
{
    return refused ? 503 : 0;
}

int rules_preflight(bool allowed)
{
    return allowed ? 204 : 0;
}

int rules_early_hints(bool fields, int minor, bool navigate)
{
    return fields || (minor >= 1 && navigate) ? 103 : 0;
}

int rules_h1_refused(int status, bool first, const char *data, size_t len, bool h2_on, bool secure)
{
    return first && policy_close_unanswered(data, len, h2_on, secure) ? RULES_UNANSWERED : status;
}

int rules_h1_overflow(bool reading)
{
    return reading ? 431 : 0;
}

int rules_acme_answer(bool pending)
{
    return pending ? 200 : 404;
}

size_t rules_plain_http_on_tls(char *buf, size_t cap, const char *date)
{
    static const char body[] =
        "<html>\r\n<head><title>400 The plain HTTP request was sent to HTTPS port</title></head>"
        "\r\n<body>\r\n<h1>400 Bad Request</h1>\r\n<p>The plain HTTP request was sent to HTTPS "
        "port.</p>\r\n</body>\r\n</html>\r\n";
    int n = snprintf(buf, cap,
                     "HTTP/1.1 400 Bad Request\r\nServer: ringhttpd\r\nDate: %s\r\n"
                     "Content-Type: text/html\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n"
                     "%s",
                     date, sizeof(body) - 1, body);
    return n > 0 && (size_t)n < cap ? (size_t)n : 0;
}
