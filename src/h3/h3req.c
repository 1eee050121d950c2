/* An HTTP/3 request's field section; see h3req.h. */
#include "h3/h3req.h"

#include <string.h>

void h3req_init(struct h3req *q)
{
    q->status = 0;
    q->method = q->path = q->authority = -1;
    q->nf = 0;
    q->head_len = 0;
}

static bool put(struct h3req *q, const uint8_t *p, size_t len, uint32_t *off)
{
    if (sizeof(q->head) - q->head_len < len + 1)
        return false;
    *off = (uint32_t)q->head_len;
    memcpy(q->head + q->head_len, p, len);
    q->head_len += len;
    return true;
}

/* Where a pseudo-field's index goes: :method, :path, :authority; NULL for another one. */
static int32_t *pseudo(struct h3req *q, const uint8_t *name, size_t len)
{
    if (len == 7 && memcmp(name, ":method", 7) == 0)
        return &q->method;
    if (len == 5 && memcmp(name, ":path", 5) == 0)
        return &q->path;
    if (len == 10 && memcmp(name, ":authority", 10) == 0)
        return &q->authority;
    return NULL;
}

void h3req_field(struct h3req *q, const uint8_t *name, size_t name_len, const uint8_t *value,
                 size_t value_len)
{
    int32_t *index = name_len && name[0] == ':' ? pseudo(q, name, name_len) : NULL;
    if (q->status || (name_len && name[0] == ':' && !index))
        return;
    if (q->nf == H3REQ_FIELDS) {
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
