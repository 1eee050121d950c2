/* rules: every HTTP status the server chooses for a request before, or instead of, its file:
 * what the method and Expect allow, 421 for a Host the TLS connection's certificate is not for,
 * --redirect-https, OPTIONS and the asterisk form, --health, the canonical host, --basic-auth's
 * verdicts, --limit-req's 429, the CORS preflight's 204, the 103 of --early-hints, the 400
 * for plain HTTP on the TLS port, HTTP/1's 431 and 444, and automatic HTTPS's HTTP-01 200/404.
 * Facts in, a status out: serve, site, the protocols and the TLS transport apply it (build the
 * plan, close unanswered, or send the canned bytes). The parser's statuses
 * (http1), the path's (path) and a file's (static) are core already.
 * Must not: do I/O, read a clock or allocate; learn a fact itself (site finds whether a request
 * is misdirected, auth whether its credentials hold).
 * Ownership: none. */
#ifndef CORE_RULES_H
#define CORE_RULES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "core/http1.h"
#include "core/policy.h"

/* What is known of a request before its path is looked at. */
struct rules_facts {
    bool misdirected;    /* over TLS, routed to a site its certificate is not for (site.h) */
    bool redirect_https; /* cleartext, with --redirect-https on for its site */
};

/* The answer a request gets before its path is normalised, in this order: 421 misdirected
 * (RFC 9110 15.5.20), 308 to https, 417 an Expect other than 100-continue, 405 a method other
 * than GET, HEAD and OPTIONS (with ALLOW); 0 to go on. Inline: every request asks. */
static inline int rules_request(const struct http_request *req, const struct rules_facts *f)
{
    if (f->misdirected)
        return 421;
    if (f->redirect_https)
        return 308;
    if (req->expect_other)
        return 417;
    if (req->method != HTTP_GET && req->method != HTTP_HEAD && req->method != HTTP_OPTIONS)
        return 405;
    return 0;
}

/* After a path that normalised: 204 for OPTIONS (with ALLOW), 400 for the asterisk form of any
 * other method; 0 to go on. */
static inline int rules_target(const struct http_request *req, bool asterisk)
{
    if (req->method == HTTP_OPTIONS)
        return 204;
    return asterisk ? 400 : 0;
}

/* The Allow field of 405 and OPTIONS. */
#define RULES_ALLOW "Allow: GET, HEAD, OPTIONS\r\n"

/* --redirect-https without a Host that can be written into a URL. */
#define RULES_NO_LOCATION 400

/* --health: 200, or 503 while the worker stops (a drain, --drain-delay). */
int rules_health(bool stopping);

/* A Host other than the site's --canonical-host: a permanent redirect. */
int rules_canonical_host(void);

/* --basic-auth's verdicts on a request under a protected prefix. */
enum rules_auth {
    RULES_AUTH_GRANTED,
    RULES_AUTH_DENIED, /* missing, malformed or wrong credentials */
    RULES_AUTH_BUSY,   /* the client's verifications in flight are at their bound */
};

/* 0 (granted: go on), 401 (with the site's challenge) or 429 (with RULES_RETRY_AFTER). */
int rules_auth(enum rules_auth verdict);
#define RULES_RETRY_AFTER "Retry-After: 1\r\n"

/* --limit-req (issue 28): 429 (with Retry-After: retry_after) for a client its bucket refused
 * (retry_after > 0 seconds, core/limits.h), 0 to go on. Ahead of redirects and --basic-auth: a
 * refused client spends nothing more. */
int rules_limit_req(uint32_t retry_after);

/* --limit-conn behind --real-ip-from (issue 28): 503 (with Retry-After: 1, as nginx's
 * limit_conn_status) for a proxied request whose forwarded client has --limit-conn requests
 * in flight already (refused), 0 to go on. */
int rules_limit_conn(bool refused);

/* --cors: 204 (with the CORS preflight fields, core/cors.h) for an OPTIONS the site's CORS
 * rules take for an allowed preflight; 0: the usual OPTIONS answer (rules_target's 204 with
 * RULES_ALLOW). */
int rules_preflight(bool allowed);

/* --early-hints: 103 when a response with Link lines to hint is preceded by a 103 Early Hints
 * carrying them, 0 when it is not (the final response has them either way). Over HTTP/2
 * (fields: the protocol writes its own header blocks) always; over HTTP/1.1 only to a
 * browser's navigation (Sec-Fetch-Mode: navigate): HTTP/1.0 must get no 1xx (RFC 9110 15.2),
 * some HTTP/1.1 clients take the 103 for the response (Python's http.client, so urllib and
 * requests), and browsers act on hints over HTTP/2 only anyway (h2o and Fastly send none over
 * HTTP/1.1 either). */
int rules_early_hints(bool fields, int minor, bool navigate);

/* The status logged for a connection closed without an answer (nginx's 444). */
#define RULES_UNANSWERED 444

/* An HTTP/1 request that http1_parse refused with `status` (its 4xx), data[0..len) as read:
 * RULES_UNANSWERED where policy_close_unanswered takes the connection's first bytes (`first`:
 * nothing was answered on it yet) for another protocol on a cleartext port shared with h2c (its
 * peer would not read an HTTP/1 answer: h2spec 3.5/2); otherwise `status`, answered, then the
 * connection closes. */
int rules_h1_refused(int status, bool first, const char *data, size_t len, bool h2_on, bool secure);

/* HTTP/1 input the connection cannot hold (its head outgrows the input cap or --head-memory;
 * only a client pipelining far ahead of its responses gets there): 431 while a request is being
 * read (answered, then the connection closes), 0 between them (closed unanswered: a response
 * is still being sent and the request it would answer has not begun). */
int rules_h1_overflow(bool reading);

/* Automatic HTTPS (issue 27): the HTTP-01 challenge path, whose token follows it. */
#define RULES_ACME_PREFIX "/.well-known/acme-challenge/"

/* Whether req is an HTTP-01 challenge the server answers itself, ahead of everything a site
 * would do (its files, redirects, --redirect-https, Basic auth): a GET or HEAD of
 * RULES_ACME_PREFIX TOKEN on a cleartext connection (`secure` false) of a server with ACME on
 * (`acme`), as the CA asks over http:// for the name it validates. Returns where the token
 * starts in req->target (the prefix's length), 0 when it is not one. Inline: every request on
 * an ACME server asks, and the first test ends it for the others. */
static inline size_t rules_acme_challenge(const struct http_request *req, bool acme, bool secure)
{
    const size_t plen = sizeof(RULES_ACME_PREFIX) - 1;
    if (!acme || secure || req->target.len < plen ||
        memcmp(req->target.p, RULES_ACME_PREFIX, plen) != 0 ||
        (req->method != HTTP_GET && req->method != HTTP_HEAD))
        return 0;
    return plen;
}

/* The challenge's answer: 200 (the key authorization, alone) when one is pending for the Host's
 * name and that token (`pending`), 404 otherwise (an unknown token, or one for another name). */
int rules_acme_answer(bool pending);

/* Plain HTTP on the TLS port: the whole answer nginx gives (400, "The plain HTTP request was
 * sent to HTTPS port", Connection: close) with date, into buf; its length, 0 if it does not
 * fit. */
size_t rules_plain_http_on_tls(char *buf, size_t cap, const char *date);

#endif
