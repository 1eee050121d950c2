/* Basic credentials; see basic.h. */
#include "core/basic.h"

#include <string.h>
#include <strings.h>

#include "core/token.h"

size_t basic_credentials(struct http_str v, char *out, size_t cap)
{
    if (v.len < 6 || strncasecmp(v.p, "basic ", 6) != 0)
        return 0;
    size_t i = 6, n = 0;
    while (i < v.len && v.p[i] == ' ')
        i++;
    size_t end = v.len;
    while (end > i && v.p[end - 1] == '=')
        end--;
    if ((end - i) % 4 == 1 || v.len - end > 2)
        return 0;
    unsigned acc = 0, bits = 0;
    for (; i < end; i++) {
        int d = token_b64(v.p[i]);
        if (d < 0)
            return 0;
        acc = (acc << 6) | (unsigned)d;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            if (n + 1 >= cap)
                return 0;
            out[n++] = (char)((acc >> bits) & 0xff);
        }
    }
    out[n] = '\0';
    return memchr(out, ':', n) && !memchr(out, '\0', n) ? n : 0;
}
