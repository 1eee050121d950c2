/* The https: Location for --redirect-https; see redirect.h. */
#include "core/redirect.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* RFC 3986 reg-name characters we accept (unreserved; no percent-encoding or sub-delims: a Host
 * that needs them is refused rather than copied into a header). */
static bool name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '.' || c == '_' || c == '~';
}

static bool literal_char(char c) /* inside [...]: IPv6 and IPvFuture's hex, ':' and '.' */
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') || c == ':' ||
           c == '.';
}

/* The length of the host part of a Host value (without ":port"), or 0 when it is not valid. */
static size_t host_part(const char *h, size_t len)
{
    size_t i = 0;
    if (len && h[0] == '[') {
        for (i = 1; i < len && h[i] != ']'; i++)
            if (!literal_char(h[i]))
                return 0;
        if (i == len || i == 1)
            return 0;
        i++; /* the ']' */
    } else {
        while (i < len && name_char(h[i]))
            i++;
        if (i == 0)
            return 0;
    }
    if (i == len)
        return i;
    if (h[i] != ':')
        return 0;
    for (size_t j = i + 1; j < len; j++) /* the port, dropped; empty is allowed (RFC 3986) */
        if (h[j] < '0' || h[j] > '9')
            return 0;
    return i;
}

/* The length of an absolute-form target's "http://" or "https://", else 0. */
static size_t scheme_len(const char *t, size_t len)
{
    if (len >= 7 && strncasecmp(t, "http://", 7) == 0)
        return 7;
    if (len >= 8 && strncasecmp(t, "https://", 8) == 0)
        return 8;
    return 0;
}

size_t redirect_https_location(const char *host, size_t host_len, const char *target,
                               size_t target_len, uint16_t tls_port, char *out, size_t cap)
{
    /* Absolute-form (RFC 9112 3.2.2): the authority is the host, the Host field is ignored; the
     * rest is the target, "/" when it has no path ("http://h?q" names "/?q"). */
    size_t skip = scheme_len(target, target_len);
    const char *root = "";
    if (skip) {
        size_t end = skip;
        while (end < target_len && target[end] != '/' && target[end] != '?')
            end++;
        host = target + skip;
        host_len = end - skip;
        target += end;
        target_len -= end;
        if (target_len == 0 || target[0] == '?')
            root = "/";
    }
    size_t name = host ? host_part(host, host_len) : 0;
    size_t root_len = strlen(root);
    if (name == 0 || (!root_len && (target_len == 0 || target[0] != '/')))
        return 0;
    char port[8] = "";
    if (tls_port != 443)
        snprintf(port, sizeof(port), ":%u", (unsigned)tls_port);
    size_t port_len = strlen(port);
    size_t need = 8 + name + port_len + root_len + target_len;
    if (need >= cap)
        return 0;
    char *p = out;
    memcpy(p, "https://", 8);
    p += 8;
    memcpy(p, host, name);
    p += name;
    memcpy(p, port, port_len);
    p += port_len;
    memcpy(p, root, root_len);
    p += root_len;
    memcpy(p, target, target_len);
    p += target_len;
    *p = '\0';
    return need;
}
