/* h2: one HTTP/2 server connection (RFC 9113), framing and HPACK (hpack.h) of its own, sans
 * I/O: received bytes go in, each stream's request comes out as the core's struct http_request,
 * a response (status, header fields, body as memory/file segments) goes in per stream, and what
 * to send comes out as a plan (frame bytes in memory, DATA payloads of file bodies as file
 * segments, zero-copy), its DATA frames ordered by RFC 9218 priorities. Server push is never
 * sent; RFC 7540 priority frames are parsed and ignored.
 * Must not: touch a socket, read a file or a clock (`now` is passed in), or allocate per
 * request: stream records are pooled per session, and the buffer (hooks.buf_get) is held only
 * while a frame, a header block or output is in it.
 * Ownership: a session belongs to one connection (one worker thread). A body and the field
 * values handed to h2_respond stay the caller's and must stay alive until the hook `done`
 * returns its token;
 * the plan h2_output returns points into the session and stays valid until h2_sent. */
#ifndef H2_H2_H
#define H2_H2_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/http1.h"
#include "core/plan.h"

#define H2_MAX_STREAMS 128       /* SETTINGS_MAX_CONCURRENT_STREAMS */
#define H2_MAX_HEADER_LIST 16384 /* SETTINGS_MAX_HEADER_LIST_SIZE: HTTP1_MAX_HEAD, as for h1 */
#define H2_HPACK_TABLE 4096      /* both HPACK dynamic tables, bytes */
#define H2_OUT_CAP 32768         /* frame bytes one output plan holds */
#define H2_CTL_CAP 4096          /* control frames (ACKs, RST_STREAM...) waiting for output */
#define H2_FRAME_CAP 16400       /* one frame read in parts: SETTINGS_MAX_FRAME_SIZE + header */
#define H2_TAIL_CAP 20480        /* a header field's encoding split across frames */
#define H2_PSEUDO_CAP (HTTP1_MAX_TARGET + 512) /* :method, :path, :authority */
#define H2_HEAD_CAP                                                                                \
    (HTTP1_MAX_HEAD + 4096 + 64) /* the head, + room to decode one field past it                   \
                                  */
/* The session's buffer: the output plan, its frames, control frames, a frame read in parts, a
 * header field split across frames, the pseudo-header fields, the header block being read (as
 * HTTP/1 text, for h2_hold and bodies), then the request it makes (struct http_request, through
 * http1_split) */
#define H2_REQ_SIZE ((sizeof(struct http_request) + 15) & ~(size_t)15)
#define H2_PLAN_SIZE ((sizeof(struct plan) + 15) & ~(size_t)15)
#define H2_BUF_SIZE                                                                                \
    (H2_PLAN_SIZE + H2_OUT_CAP + H2_CTL_CAP + H2_FRAME_CAP + H2_TAIL_CAP + H2_PSEUDO_CAP +         \
     H2_HEAD_CAP + H2_REQ_SIZE)
#define H2_MEM_MAX (4u << 20) /* what h2_mem may reach: streams, kept heads, HPACK tables */

/* Flood budgets, counted per H2_WINDOW_MS: exceeding one ends the connection with GOAWAY
 * (ENHANCE_YOUR_CALM). Browsers cancel a few streams per page and send a handful of SETTINGS
 * and PINGs per connection; an attacker sends thousands per second (CVE-2023-44487 and the
 * 2019 floods, CVE-2019-9512/9515/9518). */
#define H2_WINDOW_MS 1000
#define H2_MAX_RESETS 100      /* RST_STREAM from the client (rapid reset) */
#define H2_MAX_CONTROL 100     /* SETTINGS and PING frames (each costs an ACK) */
#define H2_MAX_EMPTY 100       /* DATA without payload or END_STREAM, empty CONTINUATION... */
#define H2_MAX_REFUSED 100     /* streams refused over the limit, frames rejected as invalid */
#define H2_MAX_CONTINUATIONS 8 /* CONTINUATION frames in one header block (2024 flood) */

/* Why a session ended; the caller maps them onto its close reasons. */
enum h2_end {
    H2_END_NONE,
    H2_END_DONE,     /* the client's GOAWAY, or ours after h2_goaway, with every stream done */
    H2_END_PROTOCOL, /* the client broke the protocol: GOAWAY(PROTOCOL_ERROR or its own code) */
    H2_END_FLOOD,    /* a budget above was exceeded, or memory: GOAWAY(ENHANCE_YOUR_CALM) */
    H2_END_STALL,    /* responses made no progress for the stall time: GOAWAY */
};

struct h2_session;

struct h2_hooks {
    /* A request head arrived on stream `id` (its body, if any, is read and dropped). req is
     * valid only during the call; status is 0, or the error status (400, 431...) the request is
     * to be answered with (req then holds what could be read). Answer with h2_respond, now or
     * later. */
    void (*request)(void *user, int32_t id, const struct http_request *req, int status);
    /* A response given to h2_respond is finished with: err 0 when its last byte was sent,
     * -ECONNRESET when the stream was reset or the session ended first. Never called from
     * inside h2_respond. */
    void (*done)(void *user, void *token, int err);
    /* A buffer of H2_BUF_SIZE bytes, or NULL when none can be had. The session holds one only
     * while it has output in it or a header block half read, and gives it back with buf_put
     * when idle, so that an idle connection holds none (issue 18: idle memory). */
    void *(*buf_get)(void *user);
    void (*buf_put)(void *user, void *buf);
};

/* Per-connection options (from the configuration). */
struct h2_opts {
    int stall_ms; /* h2_check: responses pending without progress this long end the session */
    int body_ms;  /* h2_expire: a request body with no DATA for this long is answered 408 */
};

/* Creates a session for a connection whose client preface (or its first bytes) is about to
 * arrive. Returns 0 or -ENOMEM. The server's SETTINGS are queued for the first h2_output. */
int h2_new(struct h2_session **out, const struct h2_opts *opts, const struct h2_hooks *hooks,
           void *user);

/* Ends the session: every response not yet done gets `done(-ECONNRESET)`, then it is freed. */
void h2_free(struct h2_session *s);

/* Feeds len received bytes; `now` is a monotonic time in milliseconds (for the flood budgets).
 * Calls hooks.request for each complete request head. Returns 0, or -EPROTO when the session
 * is ending (h2_end says why): send what h2_output still gives (the GOAWAY), then close. */
int h2_recv(struct h2_session *s, const void *data, size_t len, int64_t now);

/* The response on stream `id`: `status`, `nfields` header fields (names in any case: they are
 * sent in lower case; HTTP/1-only fields such as Connection, Keep-Alive, Transfer-Encoding and
 * Upgrade are dropped), and the body: the segments of `body` from its cursor (NULL or an empty
 * plan for none; HEAD and 304 pass none). The body plan's cursor advances as DATA frames are
 * made. The fields' values, like the body, must stay alive until hooks.done returns token (they
 * are not copied); the `fields` array and the names need not. Returns 0, or -ENOENT when the stream
 * is gone (reset by the client: done will not be called, the caller releases token itself),
 * -ENOMEM. */
struct h2_field {
    const char *name;
    size_t name_len;
    const char *value;
    size_t value_len;
};
int h2_respond(struct h2_session *s, int32_t id, int status, const struct h2_field *fields,
               size_t nfields, struct plan *body, void *token);

/* The same, from a plan in the field-line syntax (core/policy.h RESP_FIELDS): its status,
 * the fields of its first head_len bytes; the rest is the body. pre (or NULL): fields kept
 * pre-encoded (h2_pre_new), sent so where the plan's field lines contain its text; it must stay
 * alive until the HEADERS frame is written (the responder holds what it came with until done). */
struct hpack_pre;
int h2_respond_plan(struct h2_session *s, int32_t id, struct plan *p, const struct hpack_pre *pre,
                    void *token);
/* The pre-encoded form (hpack.h: struct hpack_pre, one block to free()) of the field lines
 * lines[0, len) ("Name: value\r\n"...), which a response's field lines may contain verbatim;
 * id as hpack_pre_new's. NULL when memory is short or they are not all field lines. */
struct hpack_pre *h2_pre_new(const char *lines, size_t len, uint64_t id);

/* An interim response on stream `id` before its final one (103 Early Hints, RFC 8297): a
 * HEADERS frame without END_STREAM with :status `status` (100..199) and the field lines
 * lines[0..len) ("Name: value\r\n", as a RESP_FIELDS plan's head, at most 4 KiB), written
 * just before the response's own HEADERS. The lines stay the caller's until then, as the
 * response's fields do (until hooks.done). Only before h2_respond for the stream. Returns 0,
 * or -ENOENT when the stream is gone or answered, -EINVAL for a status that is not 1xx or
 * lines too long. */
int h2_interim(struct h2_session *s, int32_t id, int status, const char *lines, size_t len);

/* Keeps the head of the request on stream `id`, which hooks.request is being called for (only
 * from inside that call), so that h2_replay can deliver it again: a request that waits for a
 * check off the loop. Returns 0, -ENOENT (not the request being delivered), -ENOMEM. */
int h2_hold(struct h2_session *s, int32_t id);

/* Calls hooks.request again for the request h2_hold kept on stream `id`, parsed from its head
 * as the first time (the head is then released, unless held again). Returns 0, or -ENOENT when
 * nothing is held there or the stream is gone (reset by the client: the head went with it). */
int h2_replay(struct h2_session *s, int32_t id);

/* Refuses stream `id` (RST_STREAM REFUSED_STREAM: the client may retry it) when no response
 * can be made for it. */
void h2_reset(struct h2_session *s, int32_t id);

/* The bytes to send now, or NULL when there are none. The same plan comes back until h2_sent
 * reports it sent. */
struct plan *h2_output(struct h2_session *s);

/* The plan from h2_output was sent whole: responses finished before it are done (hooks.done),
 * and `now` (ms) counts as progress for h2_check. */
void h2_sent(struct h2_session *s, int64_t now);

/* For a connection idle a while (no stream open): frees what a burst of streams left for
 * reuse (stream records) beyond what one stream needs, and the encoder's table (the next
 * response empties the client's copy with a size update). */
void h2_trim(struct h2_session *s);

/* Graceful end (drain, idle timeout): GOAWAY with the last stream taken, so streams in flight
 * finish and the client opens new ones elsewhere. */
void h2_goaway(struct h2_session *s);

/* Checks the stall deadline at `now` (ms): responses waiting on flow control (or a client that
 * does not read) for opts.stall_ms end the session with GOAWAY. True when the session ended. */
bool h2_check(struct h2_session *s, int64_t now);

/* True when nothing is left to do: the session ended or went away with no stream open, and
 * its output is sent. The connection closes then. */
bool h2_finished(const struct h2_session *s);

/* Streams open (requests received and not yet answered to the end). */
unsigned h2_open_streams(const struct h2_session *s);

enum h2_end h2_end(const struct h2_session *s);

/* Frees now what the session keeps for unfinished requests (their heads; the streams close),
 * for a connection closed to give memory back (--head-memory): what h2_unfinished counted,
 * but for a buffer the output may still be using. */
void h2_shed(struct h2_session *s);

/* The client shut its side of the connection: as after its GOAWAY, the streams it sent whole
 * are still answered and no new one is taken; the ones waiting for input are dropped. */
void h2_peer_closed(struct h2_session *s);

/* The earliest time (ms) a request body waiting for its next DATA frame falls due (h2_expire),
 * or INT64_MAX when no stream waits for one. Only a stream's own DATA moves its time. */
int64_t h2_deadline(const struct h2_session *s);

/* Answers 408 (Request Timeout) each request whose body has had no DATA for opts.body_ms at
 * `now` (ms), the stream then reset (NO_ERROR) as after any early response. */
void h2_expire(struct h2_session *s, int64_t now);

/* Bytes the session holds for requests not complete yet: kept heads waiting for their body
 * or a check (h2_hold), and its buffer while a frame or a header block is read in parts
 * (what --head-memory counts, with HTTP/1's partial heads). */
size_t h2_unfinished(const struct h2_session *s);

/* Bytes the session holds now besides its buffer: itself, stream records, kept heads, HPACK
 * tables (for tests and the memory bound). */
size_t h2_mem(const struct h2_session *s);

#endif
