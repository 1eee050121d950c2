/* test_rules: the status decisions HTTP/1 and automatic HTTPS take from the core (core/rules.h):
 * 444 or the parser's status for a request head http1_parse refused, 431 or an unanswered close
 * for input a connection cannot hold, and which requests are HTTP-01 challenges and what they
 * get. Requests are parsed by http1_parse from guarded copies, as the server parses them.
 * Must not: depend on anything but the core.
 * Ownership: each test owns its buffers. */
#include "unit.h"

#include "core/http1.h"
#include "core/rules.h"

/* The first bytes of a TLS ClientHello, and of a line no HTTP/1 client sends. */
static const char hello[] = "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03";
static const char junk[] = "SSH-2.0-OpenSSH_9.2p1\r\n";
static const char broken[] = "GET / HTTP/1.1\r\nHost a\r\n\r\n"; /* HTTP/1, however broken */

TEST(rules_h1_refused_closes_another_protocol_unanswered_on_h2c)
{
    const size_t hn = sizeof(hello) - 1, jn = sizeof(junk) - 1;
    /* the cleartext port with HTTP/2 on: the peer would not read an HTTP/1 answer */
    CHECK_INT(rules_h1_refused(400, true, unit_guard(hello, hn), hn, true, false), 444);
    CHECK_INT(rules_h1_refused(400, true, unit_guard(junk, jn), jn, true, false), RULES_UNANSWERED);
    CHECK_INT(rules_h1_refused(400, true, unit_guard_str("PRI * HTTP/2.0\r\n"), 16, true, false),
              444);
    /* an HTTP/1 request line, however broken, gets the parser's answer */
    CHECK_INT(rules_h1_refused(400, true, unit_guard_str(broken), sizeof(broken) - 1, true, false),
              400);
    CHECK_INT(
        rules_h1_refused(414, true, unit_guard_str("GET /aaaa HTTP/1.1\r\n"), 20, true, false),
        414);
    /* over TLS ALPN settled HTTP/1; without HTTP/2 nothing else may open the port; after an
     * answer the connection spoke HTTP/1 already: each gets the parser's status */
    CHECK_INT(rules_h1_refused(400, true, unit_guard(junk, jn), jn, true, true), 400);
    CHECK_INT(rules_h1_refused(400, true, unit_guard(junk, jn), jn, false, false), 400);
    CHECK_INT(rules_h1_refused(400, false, unit_guard(junk, jn), jn, true, false), 400);
    CHECK_INT(rules_h1_refused(431, false, unit_guard(hello, hn), hn, true, false), 431);
}

TEST(rules_h1_overflow_answers_only_a_request_being_read)
{
    CHECK_INT(rules_h1_overflow(true), 431);
    CHECK_INT(rules_h1_overflow(false), 0);
}

static size_t challenge(const char *head, bool acme, bool secure)
{
    struct http_request req;
    int n = http1_parse(unit_guard_str(head), strlen(head), &req);
    CHECK(n > 0);
    return n > 0 ? rules_acme_challenge(&req, acme, secure) : 0;
}

TEST(rules_acme_challenge_takes_get_and_head_of_the_prefix_in_clear)
{
    const size_t plen = sizeof(RULES_ACME_PREFIX) - 1;
    CHECK_INT(plen, 28);
    CHECK_INT(
        challenge("GET /.well-known/acme-challenge/tok_1 HTTP/1.1\r\nHost: a\r\n\r\n", true, false),
        plen);
    CHECK_INT(
        challenge("HEAD /.well-known/acme-challenge/x HTTP/1.1\r\nHost: a\r\n\r\n", true, false),
        plen);
    /* the prefix alone: an empty token, which tokens_http01 finds pending for no name (404) */
    CHECK_INT(
        challenge("GET /.well-known/acme-challenge/ HTTP/1.1\r\nHost: a\r\n\r\n", true, false),
        plen);
    /* not a challenge: ACME off, over TLS, another method, another path */
    CHECK_INT(
        challenge("GET /.well-known/acme-challenge/t HTTP/1.1\r\nHost: a\r\n\r\n", false, false),
        0);
    CHECK_INT(
        challenge("GET /.well-known/acme-challenge/t HTTP/1.1\r\nHost: a\r\n\r\n", true, true), 0);
    CHECK_INT(challenge("POST /.well-known/acme-challenge/t HTTP/1.1\r\nHost: a\r\n"
                        "Content-Length: 0\r\n\r\n",
                        true, false),
              0);
    CHECK_INT(challenge("GET /.well-known/acme-challenge HTTP/1.1\r\nHost: a\r\n\r\n", true, false),
              0);
    CHECK_INT(
        challenge("GET /.well-known/ACME-challenge/t HTTP/1.1\r\nHost: a\r\n\r\n", true, false), 0);
    CHECK_INT(
        challenge("GET /x/.well-known/acme-challenge/t HTTP/1.1\r\nHost: a\r\n\r\n", true, false),
        0);
}

TEST(rules_acme_answer_is_200_for_a_pending_challenge_else_404)
{
    CHECK_INT(rules_acme_answer(true), 200);
    CHECK_INT(rules_acme_answer(false), 404);
}
