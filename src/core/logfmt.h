/* logfmt: access-log lines: captures what a request said (copies, since the request's buffer is
 * gone by the time its response is done) and formats one line in the Combined, Common or JSON
 * format with nginx's escaping, plus the nginx real_ip_recursive choice of client address.
 * Must not: perform I/O, read the clock or allocate; a line never exceeds LOGFMT_LINE_MAX.
 * Ownership: callers own every buffer; a struct log_capture lives in its response. */
#ifndef CORE_LOGFMT_H
#define CORE_LOGFMT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <netinet/in.h>

#include "core/http1.h"

/* Whole lines of at most PIPE_BUF (4096 on Linux) are what a pipe writes atomically. */
#define LOGFMT_LINE_MAX 4096

/* Bytes of each client-controlled field kept, raw and again escaped: a field is cut where its
 * raw bytes or its escaped text (\xHH is 4 bytes, JSON's \u00HH 6) would pass its size, so the
 * longest line stays under LOGFMT_LINE_MAX whatever the client sent. */
#define LOGFMT_METHOD_MAX 64
#define LOGFMT_TARGET_MAX 1536 /* also the raw request line of a request that did not parse */
#define LOGFMT_FIELD_MAX 768   /* referer, user agent */
#define LOGFMT_ADDR_MAX 48     /* INET6_ADDRSTRLEN, rounded up */
#define LOGFMT_HOST_MAX 256    /* the Host's name (a DNS name is at most 253) */

enum log_format { LOG_COMBINED, LOG_COMMON, LOG_JSON, LOG_VCOMBINED };

/* An address a --real-ip-from CIDR matches. */
struct cidr {
    int family; /* AF_INET or AF_INET6 */
    unsigned bits;
    uint8_t addr[16];
};

/* Parses "192.0.2.0/24", "2001:db8::/32" or a bare address (a /32 or /128). 0 or -EINVAL. */
int cidr_parse(const char *s, struct cidr *out);

/* Whether the address (AF_INET: 4 bytes, AF_INET6: 16) is inside c. An IPv4-mapped IPv6
 * address matches IPv4 CIDRs. */
bool cidr_match(const struct cidr *c, int family, const uint8_t *addr);

/* Binary form of a textual address (v4 or v6); false when s is not one. */
bool logfmt_parse_addr(const char *s, size_t len, int *family, uint8_t addr[16]);

/*
 * The client address to log for a request from a peer: when the peer is inside one of the
 * trusted CIDRs, the rightmost address of the request's X-Forwarded-For fields (all of them, in
 * order, as one list) that is not itself trusted; the leftmost when all are trusted. An entry
 * that is not an address ends the walk at the address found so far (nginx real_ip_recursive
 * on). Writes the text to out (NUL-terminated) and returns its length.
 */
size_t logfmt_real_ip(const struct cidr *trusted, int ntrusted, int peer_family,
                      const uint8_t *peer_addr, const char *peer_text,
                      const struct http_request *req, char out[LOGFMT_ADDR_MAX]);

/* The same walk on binary addresses, for the per-client limits (issue 28): *family and addr
 * (AF_INET: its first 4 bytes) hold the peer on entry and the chosen client on return; returns
 * the chosen X-Forwarded-For entry's text, or {NULL, 0} when the client is the peer itself. */
struct http_str logfmt_real_addr(const struct cidr *trusted, int ntrusted,
                                 const struct http_request *req, int *family, uint8_t addr[16]);

/* log_capture.minor of a request that came over HTTP/2: logged as "HTTP/2.0", as nginx does. */
#define LOGFMT_HTTP2 20
/* ... and over HTTP/3: "HTTP/3.0", as nginx logs it. */
#define LOGFMT_HTTP3 30

/* What a finished request's line needs from its head, copied out of the request's buffer. */
struct log_capture {
    uint16_t method_len, target_len, referer_len, agent_len, line_len, addr_len, host_len;
    uint16_t port;       /* the Host's port, else the scheme's (80, 443); vcombined's %p */
    int8_t minor;        /* -1: the request line could not be parsed; `line` holds its bytes;
                            LOGFMT_HTTP2: the request came over HTTP/2 ("HTTP/2.0") */
    bool referer, agent; /* the field was present (an empty one is logged as "") */
    char addr[LOGFMT_ADDR_MAX];
    char host[LOGFMT_HOST_MAX]; /* lower case, without the port; empty: no Host */
    char method[LOGFMT_METHOD_MAX];
    char target[LOGFMT_TARGET_MAX];
    char referer_text[LOGFMT_FIELD_MAX];
    char agent_text[LOGFMT_FIELD_MAX];
};

/* Captures a parsed request (req complete), from the client address text addr; secure: it came
 * over TLS (the port a Host without one means). */
void logfmt_capture(struct log_capture *cap, const char *addr, size_t addr_len,
                    const struct http_request *req, bool secure);

/* Captures a request that failed to parse: the raw first line of data[0..len) (after any empty
 * lines) stands for the request line; the parser's fields are not trusted. */
void logfmt_capture_raw(struct log_capture *cap, const char *addr, size_t addr_len,
                        const char *data, size_t len);

/* The end of a request, known when its response is done. */
struct log_end {
    int64_t wall_ms; /* UNIX milliseconds */
    int status;
    uint64_t body_bytes; /* body bytes sent (nginx $body_bytes_sent) */
    uint64_t duration_us;
    bool reused; /* not the connection's first request */
};

/* The formatted time of one second, kept by the caller between lines (a worker's own). */
#define LOGFMT_CLF_LEN 26 /* "06/Nov/1994:08:49:37 +0000" */
struct logfmt_clock {
    bool valid;
    int64_t sec;
    char clf[LOGFMT_CLF_LEN + 1];
    char iso[21]; /* ISODATE_LEN + 1 */
};

/*
 * Writes one line ending in '\n' to out (at least LOGFMT_LINE_MAX bytes) and returns its length;
 * clk (zero-initialised before the first line) caches the time's text from line to line.
 *   combined: 127.0.0.1 - - [23/Nov/2026:11:40:00 +0000] "GET / HTTP/1.1" 200 1024 "REF" "UA"
 *   common:   the same without the referer and user agent
 *   vcombined: combined after "HOST:PORT " (Apache's vhost_combined "%v:%p ", goaccess's
 *             VCOMBINED): the request's Host in lower case without its port ("-" without a
 *             Host), and the Host's port or else the scheme's
 *   json:     {"time":"2026-11-23T11:40:00.123Z","remote_addr":...,"host":...,"method":...,
 *             "target":...,
 *             "protocol":...,"request":...,"status":200,"body_bytes_sent":1024,"referer":...,
 *             "user_agent":...,"request_time_us":...,"connection_reused":false}
 * Escaping follows nginx: in combined/common a '"', '\\', a control byte or a byte >= 0x7f is
 * written \xHH; JSON strings escape '"', '\\' and control bytes (\n, \u001f...), keep valid
 * UTF-8 and write each byte of an invalid sequence as \u00HH, so any input is valid JSON.
 */
size_t logfmt_line(enum log_format fmt, const struct log_capture *cap, const struct log_end *end,
                   struct logfmt_clock *clk, char *out);

#endif
