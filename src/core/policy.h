/* policy: the HTTP decisions about a connection that a request's framing implies (keep it open,
 * read and drop a body, send 100 Continue, close after an error), per protocol, so that conn only
 * executes them and two protocols cannot disagree about the shared rules.
 * Must not: perform I/O or keep state; it reads a parsed request and returns a decision.
 * Ownership: none; every result is a value the caller keeps. */
#ifndef CORE_POLICY_H
#define CORE_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/http1.h"

/* GET/HEAD/error bodies are read and dropped up to this size; past it the connection closes. */
#define POLICY_DISCARD_MAX (1u << 20)

/* How the response's header section is written (core/static.h).
 * RESP_H1: the HTTP/1.1 status line, 100 Continue when asked, the field lines, the HTTP/1-only
 * Connection field and the blank line: the plan's first head_len bytes are the wire's header
 * block. RESP_FIELDS: only the field lines ("Name: value\r\n"), for a protocol that serialises
 * status and fields itself (HTTP/2: HPACK); never Connection, Keep-Alive, Transfer-Encoding or
 * an interim response, which are HTTP/1-only (RFC 9113 8.2.2). */
enum resp_syntax { RESP_H1, RESP_FIELDS };

struct conn_cert;

/* The core's request result: what answering the request does to the connection. */
struct peer;

/* Whom to wake when a request that had to wait (serve's SERVE_PENDING: a password being
 * verified off the loop) can go on: the connection's slot and that slot's generation, so a
 * token outliving its connection is recognised and dropped. gen 0: the protocol cannot wait
 * (the request gets the verdict known now). */
struct resume_token {
    uint32_t owner;
    uint32_t gen;
};

struct req_policy {
    enum resp_syntax syntax;
    bool secure; /* the request came over an encrypting transport (https) */
    /* the client reached HTTP/3 already: Alt-Svc (which advertises it) is left off its answers,
     * as caddy does, saving every response a field to encode (QPACK, Huffman) and send */
    bool on_h3;
    /* the listener its connection came in on (the worker's index): its HTTPS answers name that
     * listener's HTTP/3 port in Alt-Svc, or none (issue 38) */
    uint8_t listener;
    /* its connection's certificate when it came over TLS or QUIC (conn/transport.h), for the
     * 421 of a Host that certificate is not for (site/site.h, site_misdirected); never
     * dereferenced by the core */
    struct conn_cert *cert;
    bool keep_alive;    /* the connection stays open after the response */
    bool send_continue; /* the client waits for "100 Continue" before its body */
    uint64_t discard;   /* body bytes after the head to read and drop */
    /* The client asked to close and sent nothing behind its request: the close follows the
     * response at once and no unread bytes can turn it into a reset (see plan.fin_carries_tail). */
    bool fin_carries_tail;
    /* The connection's client (conn_peer: --basic-auth bounds verifications per address,
     * --limit-req counts requests per client) and its resume token; set by the protocol, read
     * by serve only when the request must wait or its site limits requests. */
    const struct peer *peer;
    struct resume_token resume;
};

/*
 * HTTP/1.1 (RFC 9112): the policy for req, parsed from a buffer in which `more` bytes follow its
 * head, on a connection that may stay open (conn_keep: it has not been told to close, the
 * worker is not draining). A chunked body is never read (answer, then close); a Content-Length
 * body is discarded up to POLICY_DISCARD_MAX, past which the connection closes.
 * Inline: it runs for every request, and is a few tests.
 */
static inline struct req_policy policy_h1(const struct http_request *req, bool conn_keep,
                                          size_t more)
{
    struct req_policy p = {.syntax = RESP_H1, .keep_alive = conn_keep && req->keep_alive};
    bool body = req->has_content_length && req->content_length > 0;
    if (req->has_transfer_encoding) {
        p.keep_alive = false; /* chunked bodies are not read: answer, then close */
    } else if (body) {
        if (req->content_length > POLICY_DISCARD_MAX)
            p.keep_alive = false;
        else
            p.discard = req->content_length;
    }
    /* The client holds its body back until it hears 100 Continue (RFC 9110 10.1.1); we read
     * and discard that body after answering, so let it come. */
    p.send_continue = req->expect_continue && req->minor == 1 && body && p.keep_alive;
    /* A client may not send more after "close" (RFC 9112 9.6), so with no body and nothing
     * behind the head no unread data should be waiting when the close comes. */
    p.fin_carries_tail = !req->keep_alive && more == 0 && !req->has_transfer_encoding && !body;
    return p;
}

/* HTTP/2 and later: one stream per request; the connection's fate is not the request's. */
struct req_policy policy_fields(void);

/* "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" (RFC 9113 3.4), the prior-knowledge HTTP/2 preface. */
#define POLICY_H2_PREFACE "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
#define POLICY_H2_PREFACE_LEN 24

/* Whether a connection's first bytes data[0..len) are the HTTP/2 preface: 1 yes, 0 not known yet
 * (a proper prefix of it: wait for more), -1 no (HTTP/1). */
int policy_h2_preface(const char *data, size_t len);

/* Whether a connection's first bytes data[0..len), which http1_parse refused, come from a peer
 * that does not speak HTTP/1 at all, so that HTTP/1's 400 would be lost on it and the
 * connection closes without an answer (RFC 9113 3.4: an invalid preface is a
 * connection error, and its GOAWAY may be omitted): the preface's own request line
 * "PRI * HTTP/2.0" followed by anything but the rest of the preface (an HTTP/2 client whose
 * preface is broken), or a first line with neither a method of HTTP's nor an "HTTP/" version
 * ("INVALID CONNECTION PREFACE", h2spec 3.5/2; another protocol's bytes). Whatever looks like
 * HTTP/1 (a known method, or " HTTP/" in the line in any case: "GET /x HTTX/1.1",
 * "G\1T /x HTTP/1.1") keeps its 400. */
bool policy_not_http1(const char *data, size_t len);

/* Whether the first request of a connection, data[0..len) that http1_parse refused, is closed
 * without an answer (logged 444) rather than answered as malformed: only on a cleartext
 * connection where HTTP/2 may open unannounced (h2c: HTTP/2 on, not secure) and from a peer
 * policy_not_http1 takes for another protocol. Over TLS the handshake and ALPN (http/1.1, or
 * none) settled HTTP/1 before the first byte, so whatever that line is, it is a malformed
 * HTTP/1 request and gets its 400 and the close (with close_notify) of any other (issue 25). */
bool policy_close_unanswered(const char *data, size_t len, bool h2_on, bool secure);

/* Whether a response with this status must close an HTTP/1 connection: a malformed request
 * (400, 414, 431) leaves the stream's framing in doubt. */
bool policy_status_closes(int status);

#endif
