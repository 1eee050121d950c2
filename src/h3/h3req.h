/* h3req: an HTTP/3 request's field section, as QPACK hands it over one field line at a time,
 * kept in the stream's own buffer and then split into a struct http_request by core/http1.h's
 * split entry (as HTTP/2's), with :authority standing in for Host.
 * Must not: perform I/O, allocate, or know nghttp3 (h3.c names the pseudo-fields for it); it
 * decides no status but 431 (a section past HTTP1_MAX_HEAD or HTTP1_MAX_HEADERS fields).
 * Ownership: the caller's struct h3req, one per request stream; the parsed request points
 * into it, so it must outlive the request's use. */
#ifndef H3_H3REQ_H
#define H3_H3REQ_H

#include <stddef.h>
#include <stdint.h>

#include "core/http1.h"

#define H3REQ_FIELDS (HTTP1_MAX_HEADERS + 1) /* one more: the 431 of a head with too many */

struct h3req {
    int status;                      /* 431 once the section is too large, else 0 */
    int32_t method, path, authority; /* field indexes, -1 absent */
    unsigned nf;
    size_t head_len;
    struct h3req_field {
        uint32_t name, value; /* offsets in head */
        uint16_t name_len, value_len;
    } f[H3REQ_FIELDS + 3];
    char head[HTTP1_MAX_HEAD];
};

/* Empties q for a new request (its head buffer is not touched). */
void h3req_init(struct h3req *q);

/* One field line, as the QPACK decoder delivered it (nghttp3 has checked names, values and
 * the set of pseudo-fields, RFC 9114 4.3). :method, :path and :authority are kept; the other
 * pseudo-fields (:scheme, :protocol) are dropped. Past the limits the section is marked 431
 * and the rest ignored. */
void h3req_field(struct h3req *q, const uint8_t *name, size_t name_len, const uint8_t *value,
                 size_t value_len);

/* The request q holds, into req: 0, or the status to answer (400 for what the split finds
 * wrong, as HTTP/2 answers, 431 as marked). req points into q. */
int h3req_parse(const struct h3req *q, struct http_request *req);

#endif
