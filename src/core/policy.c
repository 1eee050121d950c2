/* Per-protocol request policy; see policy.h. */
#include "core/policy.h"

#include <string.h>

#include "core/token.h"

struct req_policy policy_fields(void)
{
    return (struct req_policy){.syntax = RESP_FIELDS, .keep_alive = true};
}

bool policy_status_closes(int status)
{
    return status == 400 || status == 414 || status == 431;
}

int policy_h2_preface(const char *data, size_t len)
{
    size_t n = len < POLICY_H2_PREFACE_LEN ? len : POLICY_H2_PREFACE_LEN;
    if (memcmp(data, POLICY_H2_PREFACE, n) != 0)
        return -1;
    return n == POLICY_H2_PREFACE_LEN ? 1 : 0;
}

bool policy_not_http1(const char *data, size_t len)
{
    static const char pri[] = "PRI * HTTP/2.0", http[] = " http/";
    if (len >= sizeof(pri) - 1 && memcmp(data, pri, sizeof(pri) - 1) == 0)
        return true;
    const char *p = data, *end = data + len;
    while (p < end && (*p == '\r' || *p == '\n'))
        p++; /* empty lines before the request line, as http1_parse skips them */
    const char *m = p;
    while (m < end && token_is_tchar((unsigned char)*m))
        m++;
    if (http1_method(p, (size_t)(m - p)) != HTTP_OTHER)
        return false;
    const char *eol = memchr(p, '\n', (size_t)(end - p));
    if (eol)
        end = eol;
    for (; end - p >= (ptrdiff_t)sizeof(http) - 1; p++) {
        size_t i = 0;
        while (i < sizeof(http) - 1 && (p[i] | 0x20) == http[i])
            i++;
        if (i == sizeof(http) - 1)
            return false; /* an HTTP/1 request line, however broken */
    }
    return true;
}

bool policy_close_unanswered(const char *data, size_t len, bool h2_on, bool secure)
{
    return h2_on && !secure && policy_not_http1(data, len);
}
