/* DNS-01's messages (issue 40): the TSIG key file, an UPDATE and its TSIG against vectors that
 * dnspython 2.x checked and made (its from_wire verified our signature; its make_response and
 * use_tsig signed the answer), and the reading of answers made by dnspython (compressed names,
 * TXT values split in two strings, a SOA in the authority section); then hostile answers. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "server/acme/dnsmsg.h"
#include "unit.h"

static const char bind_key[] = "key \"ringhttpd-test.\" {\n\talgorithm hmac-sha256;\n"
                               "\tsecret \"c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LXh4eHg=\";\n};\n";
static const char value[] = "LPsIwTo7o8BoG0-vjCyGQGBWSVIPxI-i_X336eUOQZo";

static size_t unhex(const char *h, uint8_t *out)
{
    size_t n = 0;
    for (; h[0] && h[1]; h += 2) {
        unsigned v;
        sscanf(h, "%2x", &v);
        out[n++] = (uint8_t)v;
    }
    return n;
}

/* id 0x1234, time signed 1700000000, key ringhttpd-test: what dnsmsg makes, byte for byte, and
 * what dnspython's dns.message.from_wire(keyring=...) accepted */
static const char update_hex[] =
    "123428000001000000010001076578616d706c65047465737400000600010f5f61636d652d6368616c6c656e6"
    "765076578616d706c65047465737400001000010000003c002c2b4c50734977546f376f38426f47302d766a43"
    "7947514742575356495078492d695f5833333665554f515a6f0e72696e6768747470642d746573740000fa00f"
    "f00000000003d0b686d61632d7368613235360000006553f100012c0020b09d0afaab65e1527a6a95aed4ef6e"
    "cbfb220f7f9f6ff260c4253564ad4d1d05123400000000";
/* dnspython's signed NOERROR answer to it */
static const char answer_hex[] =
    "1234a8000001000000000001076578616d706c65047465737400000600010e72696e6768747470642d7465737"
    "40000fa00ff00000000003d0b686d61632d7368613235360000006553f100012c0020f968711a31a131665"
    "6c6719281cdd06dcf01ec1c3d1848e4861fefbb6b699166123400000000";

/* Whether the answer hex (which must parse) holds the TXT record name = val. */
static bool holds(const char *hex, const char *name, const char *val)
{
    uint8_t m[DNSMSG_MAX];
    struct dnsmsg_reply r;
    size_t n = unhex(hex, m);
    CHECK_INT(dnsmsg_parse(m, n, name, val, &r), 0);
    return r.has_txt;
}

TEST(dnsmsg_key_files_of_bind_and_knot)
{
    struct dnsmsg_key k;
    char why[200];
    CHECK_INT(dnsmsg_key_parse(bind_key, strlen(bind_key), &k, why, sizeof(why)), 0);
    CHECK(strcmp(k.name, "ringhttpd-test") == 0);
    CHECK_INT((int)k.len, 32);
    CHECK(memcmp(k.secret, "secret-secret-secret-secret-xxxx", 32) == 0);
    /* keymgr -t's output, comment line and all */
    static const char knot[] = "# hmac-sha256:Knot-Key:c2VjcmV0\nkey:\n  - id: Knot-Key\n"
                               "    algorithm: hmac-sha256\n    secret: c2VjcmV0\n";
    CHECK_INT(dnsmsg_key_parse(knot, strlen(knot), &k, why, sizeof(why)), 0);
    CHECK(strcmp(k.name, "knot-key") == 0 && k.len == 6 && memcmp(k.secret, "secret", 6) == 0);
    /* the first of two keys; comments of both kinds */
    static const char two[] = "// made by tsig-keygen\nkey \"a\" { algorithm hmac-sha256; "
                              "secret \"YQ==\"; };\nkey \"b\" { algorithm hmac-sha256; secret "
                              "\"Yg==\"; };";
    CHECK_INT(dnsmsg_key_parse(two, strlen(two), &k, why, sizeof(why)), 0);
    CHECK(strcmp(k.name, "a") == 0 && k.len == 1 && k.secret[0] == 'a');
    static const char *const bad[] = {
        "",
        "key \"a\" { algorithm hmac-md5; secret \"YQ==\"; };",
        "key \"a\" { algorithm hmac-sha256; secret \"not base64!\"; };",
        "key \"a\" { algorithm hmac-sha256; };",
        "key \"a..b\" { algorithm hmac-sha256; secret \"YQ==\"; };",
        "key \"a\" { algorithm hmac-sha256; secret \"unterminated",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        CHECK_INT(dnsmsg_key_parse(bad[i], strlen(bad[i]), &k, why, sizeof(why)), -EINVAL);
}

TEST(dnsmsg_update_and_tsig_match_dnspython)
{
    struct dnsmsg_key k;
    char why[200];
    uint8_t m[DNSMSG_MAX], want[DNSMSG_MAX], ans[DNSMSG_MAX], mac[32];
    CHECK_INT(dnsmsg_key_parse(bind_key, strlen(bind_key), &k, why, sizeof(why)), 0);
    size_t n = dnsmsg_update_txt(m, sizeof(m), 0x1234, "example.test",
                                 "_acme-challenge.Example.test.", value, true, 60);
    CHECK(n > 0);
    n = dnsmsg_tsig_sign(m, n, sizeof(m), &k, 1700000000, mac);
    size_t wn = unhex(update_hex, want);
    CHECK_INT((int)n, (int)wn);
    CHECK(memcmp(m, want, wn) == 0);
    /* the answer: read, its TSIG verified over our MAC; off by a bit, or late, it is not */
    size_t an = unhex(answer_hex, ans);
    struct dnsmsg_reply r;
    CHECK_INT(dnsmsg_parse(ans, an, NULL, NULL, &r), 0);
    CHECK_INT(r.id, 0x1234);
    CHECK_INT(r.rcode, DNS_NOERROR);
    CHECK(r.tsig_at > 0 && r.tsig_alg_ok && strcmp(r.tsig_key, "ringhttpd-test") == 0);
    CHECK_INT(dnsmsg_tsig_verify(ans, an, &r, &k, mac, 1700000100), 0);
    CHECK_INT(dnsmsg_tsig_verify(ans, an, &r, &k, mac, 1700000301), -ETIME);
    mac[0] ^= 1;
    CHECK_INT(dnsmsg_tsig_verify(ans, an, &r, &k, mac, 1700000100), -EBADMSG);
    mac[0] ^= 1;
    k.secret[3] ^= 1;
    CHECK_INT(dnsmsg_tsig_verify(ans, an, &r, &k, mac, 1700000100), -EBADMSG);
    k.secret[3] ^= 1;
    ans[an - 20] ^= 1; /* in the answer's MAC */
    CHECK_INT(dnsmsg_parse(ans, an, NULL, NULL, &r), 0);
    CHECK_INT(dnsmsg_tsig_verify(ans, an, &r, &k, mac, 1700000100), -EBADMSG);
    /* a delete is class NONE, TTL 0 */
    n = dnsmsg_update_txt(m, sizeof(m), 1, "example.test", "_acme-challenge.example.test", value,
                          false, 60);
    CHECK(n > 0 && m[n - 44 - 10 + 2] == 0 && m[n - 44 - 10 + 3] == 254);
    /* what does not fit */
    CHECK_INT((int)dnsmsg_update_txt(m, 40, 1, "example.test", "x.example.test", value, true, 1),
              0);
    char big[300];
    memset(big, 'a', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    CHECK_INT((int)dnsmsg_query(m, sizeof(m), 1, big, DNS_TXT, true), 0);
    CHECK_INT(
        (int)dnsmsg_update_txt(m, sizeof(m), 1, "example.test", "x.example.test", big, true, 1), 0);
}

TEST(dnsmsg_answers_compressed_split_and_soa)
{
    static const char txt_hex[] =
        "4242810000010002000100000f5f61636d652d6368616c6c656e6765074578616d706c650474657374000"
        "0100001c00c001000010000003c0006056f74686572c00c001000010000003c002d144c50734977546f37"
        "6f38426f47302d766a43794717514742575356495078492d695f5833333665554f515a6fc01c000600010"
        "000003c0021026e73c01c0561646d696ec01c0000000100000e1000000258000151800000003c";
    static const char nx_hex[] =
        "0007810300010000000100000f5f61636d652d6368616c6c656e67650161076578616d706c6504746573"
        "740000060001c01e000600010000003c0021026e73c01e0561646d696ec01e0000000100000e100000025"
        "8000151800000003c";
    uint8_t m[DNSMSG_MAX];
    struct dnsmsg_reply r;
    size_t n = unhex(txt_hex, m);
    CHECK_INT(dnsmsg_parse(m, n, "_acme-challenge.example.test.", value, &r), 0);
    CHECK(r.has_txt && r.id == 0x4242 && !r.tc && !r.tsig_at);
    CHECK(strcmp(r.zone, "example.test") == 0);
    CHECK(!holds(txt_hex, "_acme-challenge.example.test", "other-value"));
    CHECK(!holds(txt_hex, "_acme-challenge.a.example.test", value));
    /* every truncation is refused, never read past */
    for (size_t cut = 0; cut < n; cut++)
        CHECK_INT(dnsmsg_parse(m, cut, "_acme-challenge.example.test", value, &r), -EBADMSG);
    n = unhex(nx_hex, m);
    CHECK_INT(dnsmsg_parse(m, n, NULL, NULL, &r), 0);
    CHECK_INT(r.rcode, DNS_NXDOMAIN);
    CHECK(strcmp(r.zone, "example.test") == 0);
}

TEST(dnsmsg_txt_found_through_a_cname_chain)
{
    /* (dnspython's) _acme-challenge.example.test CNAME _acme-challenge.acme.example.net CNAME
     * x.acme.example.net, which holds the value; then a loop of two CNAMEs beside the value at
     * a name outside the chain */
    static const char chain_hex[] =
        "0009810000010003000000000f5f61636d652d6368616c6c656e6765076578616d706c6504746573740000"
        "100001c00c000500010000003c00220f5f61636d652d6368616c6c656e67650461636d65076578616d70"
        "6c65036e657400c03a000500010000003c00040178c04ac068001000010000003c002c2b4c5073497754"
        "6f376f38426f47302d766a437947514742575356495078492d695f5833333665554f515a6f";
    static const char loop_hex[] =
        "0009810000010003000000000f5f61636d652d6368616c6c656e6765076578616d706c6504746573740000"
        "100001c00c000500010000003c000f0161076578616d706c65036e657400c03a000500010000003c0002"
        "c00c056f74686572c03c001000010000003c002c2b4c50734977546f376f38426f47302d766a43794751"
        "4742575356495078492d695f5833333665554f515a6f";
    CHECK(holds(chain_hex, "_acme-challenge.example.test", value));
    CHECK(!holds(chain_hex, "_acme-challenge.example.test", "another"));
    CHECK(!holds(chain_hex, "_acme-challenge.other.test", value));
    CHECK(!holds(loop_hex, "_acme-challenge.example.test", value));
}

TEST(dnsmsg_hostile_names_end)
{
    uint8_t m[64] = {0, 1, 0x81, 0, 0, 1, 0, 0, 0, 0, 0, 0};
    struct dnsmsg_reply r;
    /* a pointer to itself, one forwards, one into the header */
    m[12] = 0xc0, m[13] = 12;
    CHECK_INT(dnsmsg_parse(m, 18, NULL, NULL, &r), -EBADMSG);
    m[13] = 14;
    CHECK_INT(dnsmsg_parse(m, 18, NULL, NULL, &r), -EBADMSG);
    /* a label type that does not exist (0x40, 0x80) */
    m[12] = 0x41;
    CHECK_INT(dnsmsg_parse(m, 18, NULL, NULL, &r), -EBADMSG);
    /* a name longer than 255 */
    uint8_t big[600] = {0, 1, 0x81, 0, 0, 1, 0, 0, 0, 0, 0, 0};
    size_t at = 12;
    for (int i = 0; i < 8; i++) {
        big[at++] = 63;
        memset(big + at, 'a', 63);
        at += 63;
    }
    big[at++] = 0;
    at += 4;
    CHECK_INT(dnsmsg_parse(big, at, NULL, NULL, &r), -EBADMSG);
    /* counts the message does not hold */
    uint8_t hdr[12] = {0, 1, 0x81, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    CHECK_INT(dnsmsg_parse(hdr, sizeof(hdr), NULL, NULL, &r), -EBADMSG);
    char buf[16];
    CHECK(strcmp(dnsmsg_rcode_name(9, buf, sizeof(buf)), "NOTAUTH") == 0);
    CHECK(strcmp(dnsmsg_rcode_name(16, buf, sizeof(buf)), "BADSIG") == 0);
    CHECK(strcmp(dnsmsg_rcode_name(12, buf, sizeof(buf)), "RCODE 12") == 0);
}
