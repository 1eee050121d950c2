/* test_limits: core/limits.h: the client key, nginx's limit_req bucket (the same requests
 * refused as nginx refuses, the Retry-After that names the first second one passes), the
 * bounded tables, the connection counts and the option parsers.
 * Must not: depend on anything but the core.
 * Ownership: each test owns its tables. */
#include "unit.h"

#include <arpa/inet.h>
#include <errno.h>
#include <sys/socket.h>

#include "core/limits.h"

static struct limit_key key(const char *text)
{
    uint8_t a[16];
    if (inet_pton(AF_INET, text, a) == 1)
        return limit_key_of(AF_INET, a);
    CHECK(inet_pton(AF_INET6, text, a) == 1);
    return limit_key_of(AF_INET6, a);
}

static bool same_key(struct limit_key a, struct limit_key b)
{
    return memcmp(a.b, b.b, 16) == 0;
}

TEST(limits_key_v4_v6_64)
{
    CHECK(same_key(key("192.0.2.1"), key("::ffff:192.0.2.1")));
    CHECK(!same_key(key("192.0.2.1"), key("192.0.2.2")));
    CHECK(same_key(key("2001:db8::1"), key("2001:db8::ffff:2")));
    CHECK(same_key(key("2001:db8:0:7::1"), key("2001:db8:0:7:8000::")));
    CHECK(!same_key(key("2001:db8:0:7::1"), key("2001:db8:0:8::1")));
    CHECK(!same_key(key("::1"), key("127.0.0.1")));
}

TEST(limits_rate_parse)
{
    struct limit_rate r;
    CHECK_INT(limit_rate_parse("10r/s", &r), 0);
    CHECK(r.rate == 10000 && r.burst == 0 && !r.nodelay);
    CHECK_INT(limit_rate_parse("10/s,burst=5,nodelay", &r), 0);
    CHECK(r.rate == 10000 && r.burst == 5 && r.nodelay);
    CHECK_INT(limit_rate_parse("30r/m,nodelay,burst=0", &r), 0);
    CHECK(r.rate == 500 && r.burst == 0 && r.nodelay);
    CHECK_INT(limit_rate_parse("7", &r), 0);
    CHECK(r.rate == 7000);
    CHECK_INT(limit_rate_parse("1/m", &r), 0);
    CHECK(r.rate == 16);
    const char *bad[] = {"",
                         "0",
                         "0/s",
                         "r/s",
                         "10/h",
                         "10r/",
                         "10/s,",
                         "10/s,burst=",
                         "10/s,burst=x",
                         "10/s,burst=1,burst=2",
                         "10/s,nodelay,nodelay",
                         "10/s, burst=1",
                         "10/s,delay=2",
                         "1000001/s",
                         "10/s,burst=100001",
                         "-1/s",
                         "10/sx",
                         "99999999999999999999"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        CHECK_INT(limit_rate_parse(bad[i], &r), -EINVAL);
}

TEST(limits_bucket_burst_nodelay_then_429)
{
    struct limit_rate r = {.rate = 1000, .burst = 2, .nodelay = true}; /* 1r/s,burst=2,nodelay */
    struct limit_bucket b = {0};
    /* nginx lets 1 + burst through at once */
    CHECK(limit_bucket_take(&b, true, &r, 5000).verdict == LIMIT_PASS);
    CHECK(limit_bucket_take(&b, false, &r, 5000).verdict == LIMIT_PASS);
    CHECK(limit_bucket_take(&b, false, &r, 5000).verdict == LIMIT_PASS);
    struct limit_decision d = limit_bucket_take(&b, false, &r, 5000);
    CHECK(d.verdict == LIMIT_REJECT);
    CHECK_INT(d.retry_after, 1);
    /* a refusal leaves the bucket as it was: 999 ms later still one short, 1 s later one in */
    CHECK(limit_bucket_take(&b, false, &r, 5999).verdict == LIMIT_REJECT);
    CHECK(limit_bucket_take(&b, false, &r, 6000).verdict == LIMIT_PASS);
    CHECK(limit_bucket_take(&b, false, &r, 6000).verdict == LIMIT_REJECT);
    /* long idle: the bucket is empty again, three at once */
    for (int i = 0; i < 3; i++)
        CHECK(limit_bucket_take(&b, false, &r, 60000).verdict == LIMIT_PASS);
    CHECK(limit_bucket_take(&b, false, &r, 60000).verdict == LIMIT_REJECT);
}

TEST(limits_bucket_delay_and_retry_after)
{
    struct limit_rate r = {.rate = 1000, .burst = 2}; /* without nodelay: spaced at the rate */
    struct limit_bucket b = {0};
    struct limit_decision d = limit_bucket_take(&b, true, &r, 0);
    CHECK(d.verdict == LIMIT_PASS);
    d = limit_bucket_take(&b, false, &r, 0);
    CHECK(d.verdict == LIMIT_DELAY && d.delay_ms == 1000);
    d = limit_bucket_take(&b, false, &r, 0);
    CHECK(d.verdict == LIMIT_DELAY && d.delay_ms == 2000);
    CHECK(limit_bucket_take(&b, false, &r, 0).verdict == LIMIT_REJECT);

    /* 30r/m, no burst: one every 2 s; Retry-After rounds the wait up to whole seconds */
    r = (struct limit_rate){.rate = 500, .nodelay = true};
    b = (struct limit_bucket){0};
    CHECK(limit_bucket_take(&b, true, &r, 0).verdict == LIMIT_PASS);
    d = limit_bucket_take(&b, false, &r, 0);
    CHECK(d.verdict == LIMIT_REJECT && d.retry_after == 2);
    d = limit_bucket_take(&b, false, &r, 1500);
    CHECK(d.verdict == LIMIT_REJECT && d.retry_after == 1);
    CHECK(limit_bucket_take(&b, false, &r, 2000).verdict == LIMIT_PASS);
    /* 1r/m: a minute */
    r = (struct limit_rate){.rate = 16, .nodelay = true};
    b = (struct limit_bucket){0};
    CHECK(limit_bucket_take(&b, true, &r, 0).verdict == LIMIT_PASS);
    d = limit_bucket_take(&b, false, &r, 0);
    CHECK(d.verdict == LIMIT_REJECT && d.retry_after == 63); /* 1000/16 ms per milli: 62.5 s */
}

TEST(limits_req_table_keys_rules_and_eviction)
{
    struct limit_slot slots[LIMIT_WAYS] = {0}; /* one set: every key competes for it */
    struct limit_table t;
    CHECK_INT(limit_table_size(1), LIMIT_WAYS);
    CHECK_INT(limit_table_size(LIMIT_WAYS + 1), 2 * LIMIT_WAYS);
    limit_table_init(&t, slots, LIMIT_WAYS, 42);
    struct limit_rate r = {.rate = 1000, .nodelay = true};
    bool ev;
    struct limit_key a = key("192.0.2.1"), b = key("192.0.2.2");
    CHECK(limit_req_take(&t, 1, a, &r, 1000, &ev).verdict == LIMIT_PASS && !ev);
    CHECK(limit_req_take(&t, 1, a, &r, 1000, &ev).verdict == LIMIT_REJECT);
    CHECK(limit_req_take(&t, 1, b, &r, 1000, &ev).verdict == LIMIT_PASS); /* another client */
    CHECK(limit_req_take(&t, 2, a, &r, 1000, &ev).verdict == LIMIT_PASS); /* another rule */
    CHECK(limit_req_take(&t, 1, a, &r, 2000, &ev).verdict == LIMIT_PASS);
    /* a drained bucket is free for someone else: 8 new clients 3 s on, none evicted */
    for (int i = 0; i < LIMIT_WAYS; i++) {
        struct limit_key k = key("198.51.100.0");
        k.b[15] = (uint8_t)i;
        CHECK(limit_req_take(&t, 1, k, &r, 5000, &ev).verdict == LIMIT_PASS && !ev);
    }
    /* a ninth at the same moment must take a live bucket: it says so */
    CHECK(limit_req_take(&t, 1, key("203.0.113.9"), &r, 5000, &ev).verdict == LIMIT_PASS && ev);
}

TEST(limits_conn_counts)
{
    size_t n = limit_table_size(LIMIT_WAYS);
    struct limit_slot slots[LIMIT_WAYS] = {0};
    struct limit_table t;
    CHECK_INT(n, LIMIT_WAYS);
    limit_table_init(&t, slots, n, 7);
    struct limit_key a = key("127.0.0.1"), b = key("127.0.0.2");
    CHECK_INT(limit_conn_acquire(&t, a, 2), 0);
    CHECK_INT(limit_conn_acquire(&t, a, 2), 0);
    CHECK_INT(limit_conn_acquire(&t, a, 2), -EBUSY);
    CHECK_INT(limit_conn_acquire(&t, b, 2), 0);
    CHECK_INT(limit_conn_count(&t, a), 2);
    limit_conn_release(&t, a);
    CHECK_INT(limit_conn_acquire(&t, a, 2), 0);
    limit_conn_release(&t, a);
    limit_conn_release(&t, a);
    CHECK_INT(limit_conn_count(&t, a), 0);
    limit_conn_release(&t, a); /* one too many never wraps */
    CHECK_INT(limit_conn_count(&t, a), 0);
    /* a full set of other clients' open connections: -ENOSPC, nobody's count is touched */
    for (int i = 0; i < LIMIT_WAYS - 1; i++) {
        struct limit_key k = key("2001:db8::");
        k.b[7] = (uint8_t)i;
        CHECK_INT(limit_conn_acquire(&t, k, 1), 0);
    }
    CHECK_INT(limit_conn_acquire(&t, a, 2), -ENOSPC);
    CHECK_INT(limit_conn_count(&t, b), 1);
    limit_conn_release(&t, b);
    CHECK_INT(limit_conn_acquire(&t, a, 2), 0);
    /* by slot (a proxied request keeps no key): the same slot for each count of a key, and the
     * count goes with the last release */
    uint32_t at1, at2;
    CHECK_INT(limit_conn_acquire_at(&t, a, 3, &at1), 0);
    CHECK_INT(limit_conn_acquire_at(&t, a, 3, &at2), 0);
    CHECK_INT(at1, at2);
    CHECK_INT(limit_conn_acquire_at(&t, a, 3, &at2), -EBUSY);
    limit_conn_release_at(&t, at1);
    limit_conn_release_at(&t, at1);
    CHECK_INT(limit_conn_count(&t, a), 1);
    limit_conn_release_at(&t, at1);
    CHECK_INT(limit_conn_count(&t, a), 0);
}
