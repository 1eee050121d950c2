/* An HTTP/3 request's field section; see h3req.h. */
#include "http/h3/h3req.h"

#include <errno.h>
#include <string.h>

#include "core/hfield.h"
#include "core/token.h"

void h3req_init(struct h3req *q, struct h3req_field *f, unsigned f_cap, char *head, size_t head_cap)
{
    *q = (struct h3req){.method = -1, .path = -1, .authority = -1};
    q->f = f;
    q->f_cap = f_cap;
    q->head = head;
    q->head_cap = head_cap;
}

size_t h3req_save_size(const struct h3req *q)
{
    return sizeof(*q) + q->nf * sizeof(q->f[0]) + q->head_len;
}

struct h3req *h3req_save(const struct h3req *q, void *mem)
{
    struct h3req *s = mem;
    *s = *q;
    s->f = (struct h3req_field *)(s + 1);
    s->head = (char *)(s->f + q->nf);
    s->f_cap = q->nf;
    s->head_cap = q->head_len;
    memcpy(s->f, q->f, q->nf * sizeof(q->f[0]));
    memcpy(s->head, q->head, q->head_len);
    return s;
}

static bool put(struct h3req *q, const char *p, size_t len, uint32_t *off)
{
    if (q->head_cap - q->head_len < len + 1)
        return false;
    *off = (uint32_t)q->head_len;
    memcpy(q->head + q->head_len, p, len);
    q->head_len += len;
    return true;
}

static bool is(const char *p, size_t n, const char *lit, size_t lit_len)
{
    return n == lit_len && memcmp(p, lit, n) == 0;
}
#define IS(p, n, lit) is(p, n, lit, sizeof(lit) - 1)

/* A pseudo-field's bit and, for the ones kept, where its index goes; 0 for one a request may
 * not carry (:status, :protocol without extended CONNECT, an unknown one). */
static unsigned pseudo(struct h3req *q, const char *name, size_t len, int32_t **index)
{
    unsigned bit = hfield_pseudo(name, len);
    *index = bit == HFIELD_METHOD      ? &q->method
             : bit == HFIELD_PATH      ? &q->path
             : bit == HFIELD_AUTHORITY ? &q->authority
                                       : NULL;
    return bit;
}

void h3req_field(struct h3req *q, const char *name, size_t name_len, const char *value,
                 size_t value_len, unsigned known)
{
    int32_t *index = NULL;
    if (q->malformed)
        return;
    /* The scans were ~700 of a 1 KiB request's ~22,700 instructions, most of them names the
     * static table gave (h3load's and browsers' :method, :path, user-agent...). */
    if (!(known & TOKEN_NAME_OK))
        known |= token_field_name_ok(name, name_len);
    if (!(known & TOKEN_VALUE_OK))
        known |= token_field_value_ok(value, value_len);
    if (known != (TOKEN_NAME_OK | TOKEN_VALUE_OK)) {
        q->malformed = true;
        return;
    }
    if (name[0] == ':') {
        unsigned bit = pseudo(q, name, name_len, &index);
        if (!bit || q->regular || (q->pseudo & bit) || (bit == HFIELD_PATH && value_len == 0)) {
            q->malformed = true;
            return;
        }
        q->pseudo |= (uint8_t)bit;
        if (!index)
            return; /* :scheme: checked, not kept */
    } else {
        q->regular = true;
        if (hfield_connection_specific(name, name_len, value, value_len)) { /* RFC 9114 4.2 */
            q->malformed = true;
            return;
        }
    }
    if (q->status)
        return;
    if (q->nf == H3REQ_FIELDS || q->nf == q->f_cap) {
        q->status = 431;
        return;
    }
    struct h3req_field *f = &q->f[q->nf];
    if (!put(q, name, name_len, &f->name) || !put(q, value, value_len, &f->value)) {
        q->status = 431; /* as HTTP/1's head past HTTP1_MAX_HEAD */
        return;
    }
    f->name_len = (uint16_t)name_len;
    f->value_len = (uint16_t)value_len;
    if (index)
        *index = (int32_t)q->nf;
    q->nf++;
}

static const char *at(const struct h3req *q, int32_t i, bool value, size_t *len)
{
    const struct h3req_field *f = &q->f[i];
    *len = value ? f->value_len : f->name_len;
    return q->head + (value ? f->value : f->name);
}

int h3req_parse(const struct h3req *q, struct http_request *req)
{
    struct http1_split sp;
    size_t ml = 0, pl = 1, al;
    const char *m = q->method >= 0 ? at(q, q->method, true, &ml) : "";
    if (q->malformed)
        return -EPROTO;
    /* RFC 9114 4.3.1: :method, :scheme and :path, but CONNECT: :authority only (4.4). A
     * section cut short (431) answers as such. */
    if (!q->status && !hfield_pseudo_complete(q->pseudo, IS(m, ml, "CONNECT")))
        return -EPROTO;
    const char *path = q->path >= 0 ? at(q, q->path, true, &pl) : "*";
    int status = http1_split_start(req, &sp, m, ml, path, pl);
    if (!status && q->authority >= 0) {
        const char *a = at(q, q->authority, true, &al);
        status = http1_split_field(req, &sp, "host", 4, a, al);
    }
    for (unsigned i = 0; i < q->nf && !status; i++) {
        if ((int32_t)i == q->method || (int32_t)i == q->path || (int32_t)i == q->authority)
            continue;
        size_t nl, vl;
        const char *name = at(q, (int32_t)i, false, &nl), *value = at(q, (int32_t)i, true, &vl);
        /* :authority stands in for host (RFC 9114 4.3.1) */
        if (nl == 4 && memcmp(name, "host", 4) == 0 && q->authority >= 0)
            continue;
        status = http1_split_field(req, &sp, name, nl, value, vl);
    }
    if (!status)
        status = http1_split_end(req, &sp);
    if (q->status)
        status = q->status;
    if (status == 505 || status == 501)
        status = 400; /* the version line is ours, as in HTTP/2 */
    req->keep_alive = true;
    return status;
}
