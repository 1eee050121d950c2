/* Renewal and retry times; see when.h. */
#include "server/acme/when.h"

#include "core/date.h"

int64_t when_renew(int64_t not_before, int64_t not_after, int64_t ari_start, int64_t ari_end,
                   double rnd)
{
    if (rnd < 0 || rnd >= 1)
        rnd = 0;
    if (ari_start < ari_end) {
        int64_t t = ari_start + (int64_t)((double)(ari_end - ari_start) * rnd);
        return t < not_after ? t : not_after;
    }
    int64_t life = not_after > not_before ? not_after - not_before : 0;
    return not_before + life * 2 / 3 - (int64_t)((double)(life / 30) * rnd);
}

int64_t when_backoff(unsigned failures, int64_t base, int64_t retry_after, double rnd)
{
    if (base < 1)
        base = 1;
    if (rnd < 0 || rnd >= 1)
        rnd = 0;
    int64_t wait = base;
    for (unsigned i = 1; i < failures && wait < WHEN_BACKOFF_MAX; i++)
        wait *= 2;
    if (wait > WHEN_BACKOFF_MAX)
        wait = WHEN_BACKOFF_MAX;
    wait += (int64_t)((double)wait / 10 * rnd);
    return retry_after > wait ? retry_after : wait;
}

int64_t when_retry_after(const char *value, size_t len, int64_t now)
{
    while (len && (*value == ' ' || *value == '\t')) {
        value++;
        len--;
    }
    while (len && (value[len - 1] == ' ' || value[len - 1] == '\t' || value[len - 1] == '\r' ||
                   value[len - 1] == '\n'))
        len--;
    if (!len)
        return 0;
    if (value[0] >= '0' && value[0] <= '9') {
        int64_t v = 0;
        for (size_t i = 0; i < len; i++) {
            if (value[i] < '0' || value[i] > '9' || v > 100000000)
                return 0;
            v = v * 10 + (value[i] - '0');
        }
        return v;
    }
    int64_t t;
    if (httpdate_parse(value, len, &t) != 0)
        return 0;
    return t > now ? t - now : 0;
}
