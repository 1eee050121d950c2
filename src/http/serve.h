/* serve: answers one parsed request: normalises the path, finds the file (or index, a clean
 * URL's x.html, sibling, error page, nearest 404.html, fallback, listing) through the worker's
 * file cache, and has core/static write the response.
 * Must not: touch sockets or connection state; its only I/O is the file cache and, for
 * --autoindex, reading a directory.
 * Ownership: a struct response comes from the worker's pool (serve_response_get) and holds what
 * its plan points to (cache references; a listing is one too) until serve_response_put. Responses
 * are independent: a protocol with many requests in flight (HTTP/2 streams) holds one each. */
#ifndef SERVE_H
#define SERVE_H

#include <stdbool.h>
#include <stddef.h>

#include "core/http1.h"
#include "core/plan.h"
#include "core/policy.h"
#include "rt/obs.h"
#include "site/site.h"

struct runtime;
struct fentry;
struct fblock;

#define RESPONSE_BUF 4096 /* header block, multipart part headers, small error bodies */

struct response {
    struct plan plan;       /* the structured answer: status, header section, body (core/plan.h) */
    struct obs_req obs;     /* the request's start and, with the access log on, its line's fields */
    struct fentry *hold[2]; /* cache entries the plan reads from */
    struct fblock *block;   /* a prebuilt answer of hold[0] the plan points into, or NULL */
    /* not logged (--health); issue 28's 103 for HTTP/2 and --limit-rate (rt/site.h) */
    struct site_note note;
    char buf[RESPONSE_BUF];
};

/* Serve's per-worker state (the HSTS and Alt-Svc lines of HTTPS responses), reached through
 * w->servew: the worker makes it with its world and frees it last. NULL when memory is short. */
struct serve_worker *serve_worker_new(void);
void serve_worker_free(struct serve_worker *sw);

/* With HTTP/3: the Alt-Svc line ("Alt-Svc: ...\r\n", len bytes) every HTTPS response on
 * listener (w->listeners' index) carries after its site's HSTS line, naming that listener's
 * HTTP/3 port (issue 38); a listener given none carries none. Before the engine starts; 0 or
 * -EINVAL (too long, or no such listener). */
int serve_alt_svc(struct runtime *w, unsigned listener, const char *line, size_t len);

/* An empty response from the worker's pool, or NULL when memory is short. */
struct response *serve_response_get(struct runtime *w);

/* Drops what r holds (cache references) and returns it to the pool. Only
 * after the last byte its plan points to has been sent (or the send abandoned). */
void serve_response_put(struct runtime *w, struct response *r);

enum serve_result {
    SERVE_DONE,    /* r holds the answer */
    SERVE_PENDING, /* the answer waits for work off the loop: r is untouched, and the protocol
                    * parks the request as it is (unanswered, its bytes kept) until
                    * conn_resume(pol->resume) says to ask again */
    SERVE_NOTED,   /* r holds the answer, and r->note issue 28's for the protocol (a 103 for
                    * HTTP/2, --limit-rate): only for a site with such options, so that a
                    * protocol reads the note only behind the test it makes for SERVE_PENDING */
};

/* Fills r with the answer to req under the protocol's policy (core/policy.h: header syntax,
 * keep-alive, 100 Continue), or says it must wait (SERVE_PENDING, only with a resume token).
 * r->plan.close is set when the connection must close after it. */
enum serve_result serve_request(struct runtime *w, const struct http_request *req,
                                const struct req_policy *pol, struct response *r);

/* The cache entry whose representation fields r's field lines carry as one run that never
 * changes for the entry (its rep_headers: Last-Modified, ETag, Accept-Ranges, Content-Type;
 * and Content-Length for a file sent whole as it is), for a protocol to keep its encoding of
 * them with the entry (fcache's wire_parts); NULL when there is none. */
struct fentry *serve_rep_entry(const struct response *r);
/* That run's text into lines (SERVE_REP_LINES bytes); its length. */
#define SERVE_REP_LINES 272
size_t serve_rep_lines(const struct fentry *e, char *lines);

/* Fills r with an error response for a request that could not be parsed (head: it was a HEAD
 * request, so no body), in the given syntax; an HTTP/1 connection closes after it. */
void serve_error(struct runtime *w, int status, bool head, enum resp_syntax syntax,
                 struct response *r);

/* The one hand-off from a protocol to serve, the same for HTTP/1, 2 and 3: a request in, and
 * out a response from the pool holding its plan (SERVE_DONE, or SERVE_NOTED with r->note for
 * the protocol), its request observed on the connection's record oc (obs_request: the access
 * log line, the probes; logged as protocol version `minor`, LOGFMT_HTTP2 or _HTTP3, or 0: the
 * request's own); or SERVE_PENDING: nothing is held, and the protocol parks the request as it
 * is until pol->resume is woken, then hands it off again. status != 0: req could not be read
 * whole and is answered with that error (in pol's syntax; no body for a HEAD). *out is NULL
 * when memory is short (the protocol refuses the request its own way: a close, a reset).
 * The protocol's own part stays its own: the policy and connection facts in pol, parking,
 * what a note does, and sending the plan. Inline: it runs for every request. */
static inline enum serve_result serve_handoff(struct runtime *w, struct obs_conn *oc,
                                              const struct http_request *req, int status,
                                              const struct req_policy *pol, uint8_t minor,
                                              struct response **out)
{
    struct response *r = *out = serve_response_get(w);
    enum serve_result sr = SERVE_DONE;
    if (__builtin_expect(!r, 0))
        return sr;
    if (__builtin_expect(status != 0, 0)) {
        serve_error(w, status, req->method == HTTP_HEAD, pol->syntax, r);
        r->obs.secure = pol->secure; /* the access log's port: 443 over TLS for errors too */
    } else if ((sr = serve_request(w, req, pol, r)) == SERVE_PENDING) {
        serve_response_put(w, r);
        *out = NULL;
        return sr;
    }
    obs_request(w, oc, req, &r->obs, &r->plan, r->note.quiet);
    if (minor)
        r->obs.cap.minor = minor; /* the access log says which protocol carried it */
    return sr;
}

#endif
