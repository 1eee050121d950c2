/* The "lines" protocol: the protocol seam's test double for HTTP/2; see proto.h.
 *
 * After the HTTP/2 preface (which selects it, as h2c would), each line "METHOD /path" is a
 * request. It answers as HTTP/2 does: every complete request in the input is served at once
 * (several responses held at a time, as streams are), in the RESP_FIELDS syntax, then sent in
 * order, each as "STATUS n", its field lines (names lowercased), "BODY len" and the body, whose
 * segments (file ranges included) go down unchanged behind the framing. Nothing here is on the
 * production path: only RINGHTTPD_TEST_PROTO=lines selects it. */
#include "conn/proto.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conn/conn.h"
#include "core/plan.h"
#include "core/policy.h"
#include "rt/runtime.h"
#include "http/serve.h"

#define LINES_MAX 8 /* requests served ahead, like concurrent streams */
#define LINES_IN 4096

struct lines_conn {
    struct response *r[LINES_MAX]; /* served, r[next..n) not yet sent */
    unsigned n, next;
    bool sending, eof;
    size_t preface; /* bytes of the preface still to skip (HTTP/2 reads it as its own) */
    size_t in_len;
    char in[LINES_IN];
    struct plan out; /* framing, then the response's body segments */
    char frame[RESPONSE_BUF + 64];
};

static int lines_open(struct runtime *w, struct conn *c)
{
    (void)w;
    struct lines_conn *l = calloc(1, sizeof(*l));
    if (!l)
        return -ENOMEM;
    l->preface = POLICY_H2_PREFACE_LEN;
    c->pstate = l;
    return 0;
}

/* Serves every complete line of the input, up to LINES_MAX responses held. */
static void serve_lines(struct runtime *w, struct lines_conn *l)
{
    size_t used = 0;
    char *nl;
    while (l->n < LINES_MAX && (nl = memchr(l->in + used, '\n', l->in_len - used))) {
        char *line = l->in + used, *sp = memchr(line, ' ', (size_t)(nl - line));
        used = (size_t)(nl - l->in) + 1;
        if (!sp)
            continue;
        struct http_request req;
        memset(&req, 0, sizeof(req));
        req.method_name = (struct http_str){line, (size_t)(sp - line)};
        req.method = http_str_ieq(req.method_name, "head") ? HTTP_HEAD : HTTP_GET;
        req.target = (struct http_str){sp + 1, (size_t)(nl - sp - 1)};
        req.minor = 1;
        struct response *r = serve_response_get(w);
        if (!r)
            break;
        struct req_policy pol = policy_fields();
        serve_request(w, &req, &pol, r);
        l->r[l->n++] = r;
    }
    memmove(l->in, l->in + used, l->in_len - used);
    l->in_len -= used;
}

static void send_next(struct runtime *w, struct conn *c, struct lines_conn *l)
{
    if (l->next == l->n) {
        l->n = l->next = 0;
        serve_lines(w, l);
        if (l->n == 0) {
            if (l->eof)
                conn_close(w, c);
            return;
        }
    }
    struct response *r = l->r[l->next];
    struct plan *p = &r->plan;
    size_t len = (size_t)snprintf(l->frame, sizeof(l->frame), "STATUS %d\n", p->status);
    size_t pos = 0, nlen, vlen;
    const char *name, *value;
    while (plan_field_next(p, &pos, &name, &nlen, &value, &vlen) &&
           len + nlen + vlen + 3 < sizeof(l->frame)) {
        for (size_t i = 0; i < nlen; i++)
            l->frame[len++] = (char)tolower((unsigned char)name[i]);
        len +=
            (size_t)snprintf(l->frame + len, sizeof(l->frame) - len, ": %.*s\n", (int)vlen, value);
    }
    plan_advance(p, p->head_len);
    len += (size_t)snprintf(l->frame + len, sizeof(l->frame) - len, "BODY %llu\n",
                            (unsigned long long)(p->bytes - p->head_len));
    plan_init(&l->out);
    plan_mem(&l->out, l->frame, len);
    for (unsigned i = p->cur; i < p->nseg; i++) {
        const struct seg *s = &p->segs[i];
        if (s->mem)
            plan_mem(&l->out, s->mem + s->off, s->len);
        else
            plan_file(&l->out, s->fd, s->off, s->len);
    }
    l->sending = true;
    conn_arm(w, c, 60);
    conn_send(w, c, &l->out);
}

static void lines_input(struct runtime *w, struct conn *c, const char *data, ssize_t n)
{
    struct lines_conn *l = c->pstate;
    if (n <= 0) {
        l->eof = true;
        if (n == 0 && !l->sending)
            send_next(w, c, l);
        return;
    }
    size_t skip = l->preface < (size_t)n ? l->preface : (size_t)n;
    l->preface -= skip;
    data += skip;
    n -= (ssize_t)skip;
    if ((size_t)n > sizeof(l->in) - l->in_len) {
        conn_close(w, c);
        return;
    }
    memcpy(l->in + l->in_len, data, (size_t)n);
    l->in_len += (size_t)n;
    if (!l->sending)
        send_next(w, c, l);
}

static void lines_sent(struct runtime *w, struct conn *c, int err)
{
    struct lines_conn *l = c->pstate;
    l->sending = false;
    serve_response_put(w, l->r[l->next]);
    l->r[l->next++] = NULL;
    if (err)
        conn_close(w, c);
    else
        send_next(w, c, l);
}

static void lines_timeout(struct runtime *w, struct conn *c)
{
    conn_close(w, c);
}

static void lines_drain(struct runtime *w, struct conn *c)
{
    struct lines_conn *l = c->pstate;
    if (!l->sending)
        conn_close(w, c);
    l->eof = true; /* close once what is held is sent */
}

static void lines_release(struct runtime *w, struct conn *c)
{
    struct lines_conn *l = c->pstate;
    for (unsigned i = l->next; i < l->n; i++)
        serve_response_put(w, l->r[i]);
    free(l);
    c->pstate = NULL;
}

static const struct proto_ops proto_lines = {
    .name = "lines",
    .open = lines_open,
    .input = lines_input,
    .sent = lines_sent,
    .timeout = lines_timeout,
    .drain = lines_drain,
    .release = lines_release,
};

const struct proto_ops *proto_test_hook(void)
{
    const char *name = getenv("RINGHTTPD_TEST_PROTO");
    return name && strcmp(name, "lines") == 0 ? &proto_lines : NULL;
}
