/* test_vhost: Host routing and redirect Locations against their contract in core/vhost.h.
 * Must not: hand vhost_key or vhost_location a string that is not unit_guard()ed.
 * Ownership: tables and buffers are each test's. */
#include "unit.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/vhost.h"

static size_t key(const char *host, char *out)
{
    return vhost_key((struct http_str){unit_guard_str(host), strlen(host)}, out);
}

static int route(const struct vhost_table *t, const char *host)
{
    char k[VHOST_NAME_MAX + 1];
    size_t n = key(host, k);
    return n ? vhost_lookup(t, k, n) : -1;
}

TEST(vhost_key_normalises)
{
    char k[VHOST_NAME_MAX + 1];
    CHECK_INT(key("Example.ORG", k), 11);
    CHECK(strcmp(k, "example.org") == 0);
    CHECK_INT(key("example.org.:8080", k), 11);
    CHECK(strcmp(k, "example.org") == 0);
    CHECK_INT(key("[::1]:80", k), 5);
    CHECK(strcmp(k, "[::1]") == 0);
    CHECK_INT(key("", k), 0);
    CHECK_INT(key(":80", k), 0);
    CHECK_INT(key(".", k), 0);
    CHECK_INT(key("a b", k), 0);
    CHECK_INT(key("a/b", k), 0);
    CHECK_INT(key("a\\b", k), 0);
    CHECK_INT(key("[::1", k), 0);
}

TEST(vhost_lookup_exact_then_longest_wildcard)
{
    struct vhost_slot slots[16];
    struct vhost_table t;
    CHECK_INT((int)vhost_slots_for(5), 16);
    vhost_table_init(&t, slots, 16);
    CHECK_INT(vhost_table_add(&t, "example.org", 0), 0);
    CHECK_INT(vhost_table_add(&t, "*.example.org", 1), 0);
    CHECK_INT(vhost_table_add(&t, "*.docs.example.org", 2), 0);
    CHECK_INT(vhost_table_add(&t, "api.docs.example.org", 3), 0);
    CHECK_INT(vhost_table_add(&t, "example.org", 4), -EEXIST);
    CHECK_INT(route(&t, "example.org"), 0);
    CHECK_INT(route(&t, "EXAMPLE.org.:443"), 0);
    CHECK_INT(route(&t, "www.example.org"), 1);
    CHECK_INT(route(&t, "a.b.example.org"), 1);
    CHECK_INT(route(&t, "x.docs.example.org"), 2);
    CHECK_INT(route(&t, "api.docs.example.org"), 3);
    CHECK_INT(route(&t, "docs.example.org"), 1);
    CHECK_INT(route(&t, "example.org.evil"), -1);
    CHECK_INT(route(&t, "notexample.org"), -1);
    CHECK_INT(route(&t, "org"), -1);
}

TEST(vhost_table_full)
{
    struct vhost_slot slots[4];
    struct vhost_table t;
    vhost_table_init(&t, slots, 4);
    CHECK_INT(vhost_table_add(&t, "a", 0), 0);
    CHECK_INT(vhost_table_add(&t, "b", 1), 0);
    CHECK_INT(vhost_table_add(&t, "c", 2), -ENOSPC);
    CHECK_INT(vhost_table_add(&t, "", 2), -EINVAL);
}

/* Issue 40: 40,000 sites' names (an int16 slot wrapped site 32,768 to an empty slot), each
 * found, and a table of them filled in linear time (it recounted its slots on every add). */
TEST(vhost_table_of_many_sites)
{
    enum { N = 40000 };
    size_t nslots = vhost_slots_for(N);
    struct vhost_slot *slots = calloc(nslots, sizeof(*slots));
    char(*names)[24] = calloc(N, sizeof(*names));
    struct vhost_table t;
    CHECK(slots && names);
    vhost_table_init(&t, slots, nslots);
    for (int i = 0; i < N; i++) {
        snprintf(names[i], sizeof(names[i]), "s%05d.test", i);
        CHECK_INT(vhost_table_add(&t, names[i], i), 0);
    }
    for (int i = 0; i < N; i += 997)
        CHECK_INT(route(&t, names[i]), i);
    CHECK_INT(route(&t, "s32768.test"), 32768);
    CHECK_INT(route(&t, "s39999.test"), 39999);
    CHECK_INT(vhost_table_add(&t, "big.test", VHOST_MAX_SITE + 1), -EINVAL);
    free(names);
    free(slots);
}

TEST(vhost_from_patterns)
{
    struct http_str rest;
    CHECK(vhost_from_matches("/old/*", "/old/a/b", 8, &rest));
    CHECK_MEM(rest.p, rest.len, "a/b");
    CHECK(vhost_from_matches("/old/*", "/old/", 5, &rest) && rest.len == 0);
    CHECK(!vhost_from_matches("/old/*", "/old", 4, &rest));
    CHECK(vhost_from_matches("/gone", "/gone", 5, &rest) && rest.p == NULL);
    CHECK(!vhost_from_matches("/gone", "/gone/", 6, &rest));
}

static size_t loc(const char *to, const char *rest, const char *query, char *out, size_t cap)
{
    struct http_str r = {rest ? unit_guard_str(rest) : NULL, rest ? strlen(rest) : 0};
    struct http_str q = {query ? unit_guard_str(query) : NULL, query ? strlen(query) : 0};
    return vhost_location(to, r, q, out, cap);
}

TEST(vhost_location_stays_on_its_host)
{
    char out[256];
    size_t n = loc("/new/*", "a b/c", "x=1&y=%20", out, sizeof(out));
    CHECK_MEM(out, n, "/new/a%20b/c?x=1&y=%20");
    n = loc("/new/*", "/evil.example", NULL, out, sizeof(out)); /* never "//" */
    CHECK_MEM(out, n, "/new/evil.example");
    n = loc("https://a.example/*", "\\\\evil\r\nX: y\"", NULL, out, sizeof(out));
    CHECK_MEM(out, n, "https://a.example/%5C%5Cevil%0D%0AX:%20y%22");
    n = loc("/fixed", "ignored", "q", out, sizeof(out)); /* no '*': nothing carried */
    CHECK_MEM(out, n, "/fixed");
    CHECK_INT(loc("/new/*", "abcdef", NULL, out, 7), 0);
    n = vhost_canonical("http", "example.org", "a b", 3, (struct http_str){"q", 1}, out,
                        sizeof(out));
    CHECK_MEM(out, n, "http://example.org/a%20b?q");
}

TEST(vhost_request_host_prefers_absolute_form)
{
    struct http_request req = {0};
    req.target = (struct http_str){"http://B.test:81/x", 18};
    req.host = (struct http_str){"a.test", 6};
    req.has_host = true;
    struct http_str h = vhost_request_host(&req);
    CHECK_MEM(h.p, h.len, "B.test:81");
    req.target = (struct http_str){"/x", 2};
    h = vhost_request_host(&req);
    CHECK_MEM(h.p, h.len, "a.test");
    req.has_host = false;
    CHECK(vhost_request_host(&req).p == NULL);
}
