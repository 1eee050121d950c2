/* limits: see limits.h. The bucket arithmetic is nginx's (ngx_http_limit_req_module.c's
 * lookup and account): integer milli-requests and milliseconds, so that two servers given the
 * same rate refuse the same requests. */
#include "core/limits.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>

struct limit_key limit_key_of(int family, const uint8_t *addr)
{
    static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    struct limit_key k = {{0}};
    if (family == AF_INET) {
        memcpy(k.b, mapped, 12);
        memcpy(k.b + 12, addr, 4);
    } else if (memcmp(addr, mapped, 12) == 0) {
        memcpy(k.b, addr, 16); /* IPv4 behind a dual-stack socket: the same client as over v4 */
    } else {
        memcpy(k.b, addr, 8);
    }
    return k;
}

/* Digits of s into *v (at most max); the bytes read, 0 when none or too large. */
static size_t parse_num(const char *s, uint64_t max, uint64_t *v)
{
    size_t i = 0;
    *v = 0;
    for (; s[i] >= '0' && s[i] <= '9'; i++) {
        *v = *v * 10 + (uint64_t)(s[i] - '0');
        if (*v > max)
            return 0;
    }
    return i;
}

int limit_rate_parse(const char *s, struct limit_rate *out)
{
    uint64_t n, burst = 0;
    size_t i = parse_num(s, 1000000, &n);
    if (i == 0 || n == 0)
        return -EINVAL;
    uint64_t rate = n * 1000; /* per second */
    if (s[i] == 'r')
        i++;
    if (s[i] == '/') {
        if (s[i + 1] == 'm')
            rate /= 60;
        else if (s[i + 1] != 's')
            return -EINVAL;
        i += 2;
    }
    if (rate == 0)
        return -EINVAL;
    bool seen_burst = false, nodelay = false;
    while (s[i] == ',') {
        i++;
        if (strncmp(s + i, "burst=", 6) == 0 && !seen_burst) {
            size_t d = parse_num(s + i + 6, 100000, &burst);
            if (d == 0)
                return -EINVAL;
            i += 6 + d;
            seen_burst = true;
        } else if (strncmp(s + i, "nodelay", 7) == 0 && !nodelay) {
            i += 7;
            nodelay = true;
        } else {
            return -EINVAL;
        }
    }
    if (s[i] != '\0')
        return -EINVAL;
    *out =
        (struct limit_rate){.rate = (uint32_t)rate, .burst = (uint32_t)burst, .nodelay = nodelay};
    return 0;
}

struct limit_decision limit_bucket_take(struct limit_bucket *b, bool fresh,
                                        const struct limit_rate *r, uint64_t now_ms)
{
    struct limit_decision d = {.verdict = LIMIT_PASS};
    uint64_t excess = 0, burst = (uint64_t)r->burst * 1000;
    if (!fresh) {
        /* A clock that went back (never with a monotonic one) counts as no time passed. */
        uint64_t ms = now_ms > b->last_ms ? now_ms - b->last_ms : 0;
        uint64_t drained = (uint64_t)r->rate * ms / 1000;
        excess = (uint64_t)b->excess + 1000 > drained ? (uint64_t)b->excess + 1000 - drained : 0;
        if (excess > burst) {
            /* The first moment excess would be within the burst: (excess - burst) more
             * milli-requests drained, at rate per 1000 ms, rounded up to whole seconds. */
            uint64_t wait = ((excess - burst) * 1000 + r->rate - 1) / r->rate;
            d.verdict = LIMIT_REJECT;
            d.retry_after = (uint32_t)((wait + 999) / 1000);
            if (d.retry_after == 0)
                d.retry_after = 1;
            return d;
        }
    }
    b->excess = (uint32_t)excess;
    b->last_ms = now_ms;
    if (excess > 0 && !r->nodelay) {
        d.verdict = LIMIT_DELAY;
        d.delay_ms = (uint32_t)(excess * 1000 / r->rate);
    }
    return d;
}

/* murmur3's 64-bit finaliser: every input bit moves about half the output bits. */
static uint64_t mix(uint64_t h)
{
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ULL;
    h ^= h >> 33;
    return h;
}

static struct limit_slot *set_of(const struct limit_table *t, uint32_t rule, struct limit_key key)
{
    uint64_t w0, w1;
    memcpy(&w0, key.b, 8);
    memcpy(&w1, key.b + 8, 8);
    /* The seed keyed into both words before they are folded, then one finaliser: without the
     * seed nobody can predict which keys share a set. */
    uint64_t h = mix((w0 ^ t->seed) * 0x9e3779b97f4a7c15ULL + (w1 ^ (t->seed >> 7) ^ rule));
    return t->slots + (size_t)(h & t->set_mask) * LIMIT_WAYS;
}

size_t limit_table_size(size_t want)
{
    size_t sets = 1;
    while (sets * LIMIT_WAYS < want && sets < ((size_t)1 << 24))
        sets <<= 1;
    return sets * LIMIT_WAYS;
}

void limit_table_init(struct limit_table *t, struct limit_slot *slots, size_t n, uint64_t seed)
{
    *t = (struct limit_table){
        .slots = slots, .set_mask = (uint32_t)(n / LIMIT_WAYS - 1), .seed = seed};
}

static bool same(const struct limit_slot *s, uint32_t rule, uint64_t k0, uint64_t k1)
{
    uint64_t s0, s1;
    memcpy(&s0, s->key.b, 8);
    memcpy(&s1, s->key.b + 8, 8);
    return s0 == k0 && s1 == k1 && s->rule == rule && s->free_ms != 0;
}

/* The slot of (rule, key) in its set, or NULL. */
static struct limit_slot *find(const struct limit_table *t, uint32_t rule, struct limit_key key)
{
    struct limit_slot *set = set_of(t, rule, key);
    uint64_t k0, k1;
    memcpy(&k0, key.b, 8);
    memcpy(&k1, key.b + 8, 8);
    for (int i = 0; i < LIMIT_WAYS; i++)
        if (same(&set[i], rule, k0, k1))
            return &set[i];
    return NULL;
}

/* A slot for a new (rule, key) in its set: an empty or spent one, else (when evicted is not
 * NULL) the one that would be spent soonest, reported through *evicted; else NULL. */
static struct limit_slot *claim(const struct limit_table *t, uint32_t rule, struct limit_key key,
                                uint64_t now_ms, bool *evicted)
{
    struct limit_slot *set = set_of(t, rule, key), *best = &set[0];
    for (int i = 0; i < LIMIT_WAYS; i++) {
        if (set[i].free_ms <= now_ms) {
            best = &set[i];
            break;
        }
        if (set[i].free_ms < best->free_ms)
            best = &set[i];
    }
    if (best->free_ms > now_ms) {
        if (!evicted)
            return NULL;
        *evicted = true;
    }
    *best = (struct limit_slot){.key = key, .rule = rule};
    return best;
}

struct limit_decision limit_req_take(struct limit_table *t, uint32_t rule, struct limit_key key,
                                     const struct limit_rate *r, uint64_t now_ms, bool *evicted)
{
    struct limit_slot *s = find(t, rule, key);
    bool fresh = false;
    *evicted = false;
    if (s && s->free_ms <= now_ms) {
        fresh = true; /* drained: exactly as if the key had never been seen */
    } else if (!s) {
        s = claim(t, rule, key, now_ms, evicted);
        fresh = true;
    }
    struct limit_decision d = limit_bucket_take(&s->bucket, fresh, r, now_ms);
    if (d.verdict != LIMIT_REJECT) {
        /* From (excess + 1000) drained on, a request finds the excess 0 as a fresh key does. */
        uint64_t spent = ((uint64_t)s->bucket.excess + 1000) * 1000 / r->rate + 1;
        s->free_ms = now_ms + spent;
    }
    return d;
}

/* A connection slot is held while it counts one: free_ms is UINT64_MAX then, 0 when empty. */
int limit_conn_acquire_at(struct limit_table *t, struct limit_key key, uint32_t max, uint32_t *at)
{
    struct limit_slot *s = find(t, 0, key);
    if (s) {
        if (s->count >= max)
            return -EBUSY;
        s->count++;
    } else {
        if (max == 0)
            return -EBUSY;
        s = claim(t, 0, key, 1, NULL); /* never another client's count: only an empty slot */
        if (!s)
            return -ENOSPC;
        s->free_ms = UINT64_MAX;
        s->count = 1;
    }
    *at = (uint32_t)(s - t->slots);
    return 0;
}

int limit_conn_acquire(struct limit_table *t, struct limit_key key, uint32_t max)
{
    uint32_t at;
    return limit_conn_acquire_at(t, key, max, &at);
}

static void release_slot(struct limit_slot *s)
{
    if (s->count > 0 && --s->count == 0)
        s->free_ms = 0;
}

void limit_conn_release(struct limit_table *t, struct limit_key key)
{
    struct limit_slot *s = find(t, 0, key);
    if (s)
        release_slot(s);
}

void limit_conn_release_at(struct limit_table *t, uint32_t at)
{
    release_slot(&t->slots[at]);
}

uint32_t limit_conn_count(const struct limit_table *t, struct limit_key key)
{
    const struct limit_slot *s = find(t, 0, key);
    return s ? s->count : 0;
}
