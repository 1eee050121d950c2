/* hints: see hints.h. */
#include "core/hints.h"

#include <errno.h>
#include <string.h>

#include "core/accept.h"

#define HINTS_LINK_MAX 1024

int hints_rule_parse(char *arg, struct hints_rule *rule)
{
    char *link;
    if (accept_pattern_split(arg, &link) != 0 || link[0] != '<' || !strchr(link, '>'))
        return -EINVAL;
    size_t n = strlen(link);
    if (n > HINTS_LINK_MAX)
        return -EINVAL;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)link[i] < 0x20 || (unsigned char)link[i] >= 0x7f)
            return -EINVAL;
    while (link[n - 1] == ' ') /* a field value has no trailing whitespace */
        link[--n] = '\0';
    *rule = (struct hints_rule){.pattern = arg, .link = link};
    return 0;
}

size_t hints_fields(const struct hints_rule *rules, size_t n, enum http_method method,
                    const char *path, size_t path_len, char *out, size_t cap)
{
    size_t len = 0;
    if (method != HTTP_GET)
        return 0;
    for (size_t i = 0; i < n; i++) {
        if (!accept_path_match(rules[i].pattern, path, path_len))
            continue;
        size_t l = strlen(rules[i].link);
        if (len + 6 + l + 2 > cap)
            return 0;
        memcpy(out + len, "Link: ", 6);
        memcpy(out + len + 6, rules[i].link, l);
        memcpy(out + len + 6 + l, "\r\n", 2);
        len += 6 + l + 2;
    }
    return len;
}
