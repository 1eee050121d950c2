/* HTTP/2's header blocks into requests, part of h2 (see h2.h, h2int.h): fields decoded
 * (HPACK) as their fragments come, checked (RFC 9113 8.1-8.3, core/hfield.h), written into the
 * HTTP/1 head they stand for and handed to http1_split one by one; a head kept for its body or
 * a check off the loop (h2_hold), and the request delivered (hooks.request).
 * Must not: read frames (h2in.c) or write any but through the control queue.
 * Ownership: the head is written in the session's buffer; a kept one is the stream's. */
#include "http/h2/h2int.h"

/* ---- requests ---- */

/* Hands the request on stream st, whose head is the text head[0..len), to the caller. */
static void deliver_req(struct h2_session *s, struct stream *st, struct http_request *req,
                        const char *head, size_t len, int status)
{
    if (status == 505 || status == 501)
        status = 400; /* the version line is ours; an h2 request cannot have a bad one */
    req->keep_alive = true;
    s->dlv = st;
    s->dlv_head = head;
    s->dlv_len = len;
    s->hooks->request(s->user, st->id, req, status);
    s->dlv = NULL;
}

/* Parses the head of stream st (kept with the stream, or cut short in the block buffer) and
 * hands the request to the caller. */
void h2_deliver(struct h2_session *s, struct stream *st, const char *head, size_t len, int status)
{
    struct http_request req;
    int rc = http1_parse(head, len, &req);
    if (!status && rc < 0)
        status = rc == HTTP1_ERROR ? req.status : 400;
    deliver_req(s, st, &req, head, len, status);
}

/* The request on st ended (its END_STREAM): a head kept for its body is delivered now. */
void h2_request_ended(struct h2_session *s, struct stream *st)
{
    st->recv_done = true;
    if (!hfield_length_end(&st->cl)) {
        h2_stream_error(s, st->id, E_PROTOCOL);
        return;
    }
    if (st->head && !st->held) {
        char *head = st->head;
        size_t len = st->head_len;
        st->head = NULL;
        s->kept -= len;
        h2_deliver(s, st, head, len, st->req_status);
        free(head);
    }
}

static void blk_put(struct h2_session *s, const void *p, size_t n)
{
    if (s->head_len + n > HEAD_CAP) {
        s->blk_status = 431;
        return;
    }
    memcpy(head_area(s) + s->head_len, p, n);
    s->head_len += n;
}

#define BLK_LIT(s, lit) blk_put((s), (lit), sizeof(lit) - 1)

/* The request line and host field's length, as blk_request_line will write them. */
static size_t line_len(const struct h2_session *s)
{
    size_t n = s->method_len + 1 + (s->has_path ? s->path_len : 1) + 11;
    if (s->has_authority)
        n += 6 + s->authority_len + 2;
    return n;
}

/* Makes "METHOD target HTTP/1.1\r\nhost: authority\r\n" once the pseudo-header fields are in. */
static void blk_request_line(struct h2_session *s)
{
    if (s->blk_line)
        return;
    s->blk_line = true;
    const char *pseudo = pseudo_area(s);
    char *method = head_area(s) + s->head_len;
    blk_put(s, pseudo, s->method_len);
    BLK_LIT(s, " ");
    char *target = head_area(s) + s->head_len;
    if (s->has_path) /* CONNECT has no :path */
        blk_put(s, pseudo + s->method_len, s->path_len);
    else
        BLK_LIT(s, "*");
    size_t target_len = s->has_path ? s->path_len : 1;
    BLK_LIT(s, " HTTP/1.1\r\n");
    if (!s->blk_status) /* else cut short (431): end_headers parses what was written */
        http1_split_start(s->req, &s->split, method, s->method_len, target, target_len);
    if (s->has_authority) {
        BLK_LIT(s, "host: ");
        char *value = head_area(s) + s->head_len;
        blk_put(s, pseudo + s->method_len + s->path_len, s->authority_len);
        BLK_LIT(s, "\r\n");
        if (!s->blk_status)
            http1_split_field(s->req, &s->split, "host", 4, value, s->authority_len);
    }
}

static bool is(const char *p, size_t n, const char *lit)
{
    return n == strlen(lit) && memcmp(p, lit, n) == 0;
}

/* Keeps a pseudo-header field's value in the pseudo area (method, then path, then authority:
 * they may come in any order, so later ones move). */
static void pseudo_keep(struct h2_session *s, const struct hpack_field *f)
{
    const char *n = f->name;
    size_t nl = f->name_len;
    bool *seen;
    uint16_t *len;
    size_t at;
    /* By the name's static index when HPACK gave one (RFC 7541 Appendix A: 1 :authority, 2-3
     * :method, 4-5 :path, 6-7 :scheme), else by its text. */
    static const uint8_t sidx_of[HFIELD_PATH + 1] = {
        [HFIELD_AUTHORITY] = 1, [HFIELD_METHOD] = 2, [HFIELD_PATH] = 4, [HFIELD_SCHEME] = 6};
    unsigned k = f->sidx, bit = k ? 0 : hfield_pseudo(n, nl);
    if (k == 0)
        k = bit ? sidx_of[bit] : 8;
    if (k == 2 || k == 3) {
        seen = &s->has_method, len = &s->method_len, at = 0;
        s->is_connect = is(f->value, f->value_len, "CONNECT");
    } else if (k == 4 || k == 5) {
        seen = &s->has_path, len = &s->path_len, at = s->method_len;
        if (f->value_len == 0)
            s->blk_malformed = true;
    } else if (k == 1) {
        seen = &s->has_authority, len = &s->authority_len, at = s->method_len + s->path_len;
    } else if (k == 6 || k == 7) {
        if (s->has_scheme)
            s->blk_malformed = true;
        s->has_scheme = true;
        return;
    } else {
        s->blk_malformed = true; /* :status, :protocol, or unknown */
        return;
    }
    if (*seen) {
        s->blk_malformed = true;
        return;
    }
    *seen = true;
    if (s->pseudo_len + f->value_len > H2_PSEUDO_CAP) {
        s->blk_status = 414;
        return;
    }
    char *area = pseudo_area(s);
    memmove(area + at + f->value_len, area + at, s->pseudo_len - at);
    memcpy(area + at, f->value, f->value_len);
    *len = (uint16_t)f->value_len;
    s->pseudo_len = (uint16_t)(s->pseudo_len + f->value_len);
}

/* One decoded field of the block being read. */
static void field_in(struct h2_session *s, const struct hpack_field *f)
{
    /* HPACK bomb: a few bytes on the wire can name a large table entry again and again. The
     * head is cut (431) at the limit (fields past it are not even copied); decoding far past
     * it ends the connection. */
    s->blk_decoded += f->name_len + f->value_len + 32;
    if (s->blk_decoded > 4 * H2_MAX_HEADER_LIST) {
        h2_terminate(s, H2_END_FLOOD, E_ENHANCE_YOUR_CALM);
        return;
    }
    if (!s->blk_request && !s->blk_trailers)
        return; /* a block read only for HPACK's sake */
    if (s->blk_decoded > H2_MAX_HEADER_LIST || !f->name)
        s->blk_status = 431;
    if (s->blk_malformed || !f->name)
        return;
    const char *n = f->name, *v = f->value;
    size_t nl = f->name_len, vl = f->value_len;
    if (nl && n[0] == ':') {
        if (s->blk_regular || s->blk_trailers || !(f->valid & TOKEN_NAME_OK))
            s->blk_malformed = true;
        else
            pseudo_keep(s, f);
        return;
    }
    if (f->valid != (TOKEN_NAME_OK | TOKEN_VALUE_OK)) {
        s->blk_malformed = true;
        return;
    }
    /* connection-specific fields make a request malformed (RFC 9113 8.2.2); of their names
     * the static table holds transfer-encoding only (57) */
    if (f->sidx ? f->sidx == 57 : hfield_connection_specific(n, nl, v, vl)) {
        s->blk_malformed = true;
        return;
    }
    if (s->blk_trailers)
        return;
    struct stream *st = s->blk_st;
    /* content-length (static index 28), host (38) and expect (35) by index when HPACK gave one */
    if (f->sidx ? f->sidx == 28 : nl == 14 && is(n, nl, "content-length")) {
        if (!hfield_length_field(&st->cl, v, vl)) {
            s->blk_malformed = true;
            return;
        }
    } else if (!f->sidx && nl == 8 && is(n, nl, "priority")) {
        prio_parse(v, vl, &st->prio.urgency, &st->prio.incremental);
    }
    s->blk_regular = true;
    blk_request_line(s);
    /* :authority stands in for host (RFC 9113 8.3.1); no interim 100 exists to send here. */
    if (f->sidx ? f->sidx == 38 : is(n, nl, "host")) {
        s->has_host = true;
        if (s->has_authority)
            return;
    }
    if ((f->sidx ? f->sidx == 35 : is(n, nl, "expect")) && is(v, vl, "100-continue"))
        return;
    if (s->blk_status)
        return;
    /* A literal was decoded in place: "name" gap "value"; make it the line "name: value\r\n".
     * An indexed field is the table's bytes (hpack copies no indexed field): copy it here. */
    char *line = head_area(s) + s->head_len;
    if (s->head_len + nl + vl + 4 > HEAD_CAP) {
        s->blk_status = 431;
        return;
    }
    if (n != line) {
        memmove(line, n, nl);
        memmove(line + nl + 2, v, vl);
    }
    line[nl] = ':', line[nl + 1] = ' ';
    line[nl + 2 + vl] = '\r', line[nl + 3 + vl] = '\n';
    s->head_len += nl + vl + 4;
    http1_split_field(s->req, &s->split, line, nl, line + nl + 2, vl);
}

/* Decodes the fields in p[0, len); returns the bytes used (the rest is a field cut short). */
static size_t blk_decode(struct h2_session *s, const uint8_t *p, size_t len)
{
    size_t pos = 0;
    while (pos < len && !ended(s)) {
        /* Where the next field goes: behind the head so far, and behind the room the request
         * line will take while it is not written. A block past its limit decodes each field
         * at the same place (the bound keeps room for one the table must keep). */
        size_t at = s->head_len + (s->blk_request && !s->blk_line ? line_len(s) : 0);
        if (at > HEAD_CAP)
            at = HEAD_CAP;
        if (!s->blk_request)
            at = 0;
        struct hpack_field f;
        int rc = hpack_decode(&s->dec, p, len, &pos, s->blk_first, head_area(s) + at,
                              H2_HEAD_CAP - at, FIELD_GAP, &f);
        if (rc == 0)
            break;
        if (rc < 0) {
            h2_conn_error(s, rc == -ENOMEM ? E_ENHANCE_YOUR_CALM : E_COMPRESSION);
            break;
        }
        s->blk_first = false;
        field_in(s, &f);
    }
    return pos;
}

/* A fragment of the header block. */
void h2_blk_fragment(struct h2_session *s, const uint8_t *p, size_t len)
{
    if (s->tail_len == 0) {
        size_t used = blk_decode(s, p, len);
        p += used, len -= used;
    } else {
        if (s->tail_len + len > H2_TAIL_CAP) {
            h2_terminate(s, H2_END_FLOOD, E_ENHANCE_YOUR_CALM);
            return;
        }
        memcpy(tail_area(s) + s->tail_len, p, len);
        size_t all = s->tail_len + len;
        size_t used = blk_decode(s, (const uint8_t *)tail_area(s), all);
        p = (const uint8_t *)tail_area(s) + used, len = all - used;
        s->tail_len = 0;
    }
    if (len && !ended(s)) {
        if (len > H2_TAIL_CAP) {
            h2_terminate(s, H2_END_FLOOD, E_ENHANCE_YOUR_CALM);
            return;
        }
        memmove(tail_area(s), p, len);
        s->tail_len = len;
    }
}

/* The end of a header block (END_HEADERS). */
void h2_blk_end(struct h2_session *s)
{
    s->blk_open = false;
    if (s->tail_len) { /* the block ends inside a field */
        s->tail_len = 0;
        h2_conn_error(s, E_COMPRESSION);
        return;
    }
    struct stream *st = s->blk_st;
    if (!st)
        return;
    if (s->blk_trailers) {
        if (s->blk_malformed)
            h2_stream_error(s, st->id, E_PROTOCOL);
        else
            h2_request_ended(s, st);
        return;
    }
    unsigned seen = (s->has_method ? HFIELD_METHOD : 0) | (s->has_scheme ? HFIELD_SCHEME : 0) |
                    (s->has_authority ? HFIELD_AUTHORITY : 0) | (s->has_path ? HFIELD_PATH : 0);
    if (!hfield_pseudo_complete(seen, s->is_connect) || (!s->has_authority && !s->has_host))
        s->blk_malformed = true;
    if (s->blk_malformed) {
        h2_stream_error(s, st->id, E_PROTOCOL);
        return;
    }
    blk_request_line(s);
    BLK_LIT(s, "\r\n");
    if (s->blk_end_stream) {
        st->recv_done = true;
        if (!hfield_length_end(&st->cl)) {
            h2_stream_error(s, st->id, E_PROTOCOL);
            return;
        }
        /* The fields went to http1_split as they came, unless the block was cut short (431):
         * then the text written up to the cut is parsed, as for a kept head. */
        if (s->blk_status)
            h2_deliver(s, st, head_area(s), s->head_len, s->blk_status);
        else
            deliver_req(s, st, s->req, head_area(s), s->head_len,
                        http1_split_end(s->req, &s->split));
        return;
    }
    /* A body follows: answer once it has ended (it is read and dropped), as a server answers
     * an HTTP/1.1 request after its body; keep the head until then. */
    st->head = malloc(s->head_len);
    if (!st->head) {
        h2_stream_reset(s, st->id, st, E_INTERNAL);
        return;
    }
    memcpy(st->head, head_area(s), s->head_len);
    st->head_len = s->head_len;
    s->kept += s->head_len;
    st->req_status = s->blk_status;
    st->body_due = s->now + s->opts.body_ms;
}
