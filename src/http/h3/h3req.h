/* h3req: an HTTP/3 request's field section, as QPACK hands it over one field line at a time,
 * checked against RFC 9114 4.2-4.3 (field names and values as HTTP/2's, h2/hpack.h; the
 * pseudo-fields a request must have, once each, before any other field; no connection-specific
 * field), kept in buffers the caller gives (a worker's, while QPACK decodes), copied whole
 * into the caller's memory when the request must wait for its stream's end (h3req_save, sized
 * to what was decoded), and split into a struct http_request by
 * core/http1.h's split entry (as HTTP/2's), with :authority standing in for Host.
 * Must not: perform I/O, allocate, or know QPACK's encoding; it decides no status but 431 (a
 * section past HTTP1_MAX_HEAD or HTTP1_MAX_HEADERS fields), and "malformed" (h3in.c resets the
 * stream with H3_MESSAGE_ERROR).
 * Ownership: the caller's struct h3req and buffers, or a saved copy in the caller's memory;
 * the parsed request points into them, so they must outlive the request's use. */
#ifndef H3_H3REQ_H
#define H3_H3REQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/http1.h"

#define H3REQ_FIELDS (HTTP1_MAX_HEADERS + 1) /* one more: the 431 of a head with too many */

struct h3req {
    int status;                      /* 431 once the section is too large, else 0 */
    int32_t method, path, authority; /* field indexes, -1 absent */
    uint8_t pseudo;                  /* the pseudo-fields seen, core/hfield.h's bits */
    bool regular;                    /* a regular field seen: no pseudo-field may follow */
    bool malformed;                  /* RFC 9114 4.1.2 */
    unsigned nf, f_cap;
    size_t head_len, head_cap;
    char *head; /* names and values */
    struct h3req_field {
        uint32_t name, value; /* offsets in head */
        uint16_t name_len, value_len;
    } * f;
};

/* Empties q for a new request whose fields go in f[f_cap] (H3REQ_FIELDS or more) and whose
 * names and values go in head[head_cap] (HTTP1_MAX_HEAD: past it, 431). */
void h3req_init(struct h3req *q, struct h3req_field *f, unsigned f_cap, char *head,
                size_t head_cap);

/* The bytes h3req_save needs for q: the struct, its nf fields and head_len bytes. */
size_t h3req_save_size(const struct h3req *q);
/* A copy of q in mem[h3req_save_size(q)] (suitably aligned, as malloc's), pointing into mem
 * only: it parses as q does and is full (no field may be added). */
struct h3req *h3req_save(const struct h3req *q, void *mem);

/* One field line, as the QPACK decoder delivered it, checked (a field that breaks a rule
 * marks the section malformed; known says which of core/token.h's TOKEN_NAME_OK and
 * TOKEN_VALUE_OK hold already, a static table's name or value being valid, so that only the
 * rest is scanned). :method, :path and :authority are kept, :scheme is dropped. Past the
 * limits the section is marked 431 and the rest ignored. */
void h3req_field(struct h3req *q, const char *name, size_t name_len, const char *value,
                 size_t value_len, unsigned known);

/* The request q holds, into req: 0, the status to answer (400 for what the split finds
 * wrong, as HTTP/2 answers, 431 as marked), or -EPROTO when the section is malformed (a
 * field broke a rule, or a pseudo-field the request needs is missing). req points into q. */
int h3req_parse(const struct h3req *q, struct http_request *req);

#endif
