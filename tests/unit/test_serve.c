/* test_serve: serve's answers (serve.h) to parsed requests on a real document root, read back
 * from the plan it fills: a file's 200 (headers and body), 404, 304 on If-None-Match, a 206
 * range, HEAD, the redirect of a directory named without its slash, HTTP/2's field syntax, and
 * the ACME HTTP-01 answer from a tokens table (acme/tokens.h).
 * Must not: open sockets or run an engine; the worker's engine is a table that only starts and
 * stops, and requests reach serve as a protocol hands them (parsed, with a policy).
 * Ownership: one worker, configuration and document root per test. */
#include "unit.h"
#include "quiet.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "site/tokens.h"
#include "config/config.h"
#include "core/plan.h"
#include "core/policy.h"
#include "rt/runtime.h"
#include "site/site.h"
#include "server/worker.h"
#include "http/serve.h"

static const char HELLO[] = "hello, world\n";

struct fixture {
    char dir[64];
    struct config cfg;
    struct site_slot slot;
    struct worker *worker;
    struct runtime *w;
};

/* What one request was answered: the plan's status, its header section and body as bytes. */
struct answer {
    int status;
    char head[2048];
    size_t head_len;
    char body[256];
    size_t body_len;
};

static void path_of(const struct fixture *f, const char *name, char *out, size_t cap)
{
    snprintf(out, cap, "%s/%s", f->dir, name);
}

/* A worker on a document root holding hello.txt and the directory sub/ (with index.html). */
static void setup(struct fixture *f)
{
    strcpy(f->dir, "/tmp/test_serve.XXXXXX");
    CHECK(mkdtemp(f->dir) != NULL);
    char path[128];
    path_of(f, "hello.txt", path, sizeof(path));
    FILE *fp = fopen(path, "w");
    CHECK(fp != NULL);
    fputs(HELLO, fp);
    fclose(fp);
    path_of(f, "sub", path, sizeof(path));
    CHECK_INT(mkdir(path, 0755), 0);
    path_of(f, "sub/index.html", path, sizeof(path));
    fp = fopen(path, "w");
    CHECK(fp != NULL);
    fputs("<p>sub</p>\n", fp);
    fclose(fp);
    char *argv[] = {"ringhttpd", "-t", "1", "--max-conns", "8", f->dir, NULL};
    CHECK_INT(config_parse(&f->cfg, 6, argv, NULL), 0);
    f->worker = unit_quiet_worker(&f->cfg, &f->slot);
    f->w = worker_runtime(f->worker);
}

static void teardown(struct fixture *f)
{
    unit_quiet_worker_free(f->worker, &f->slot);
    config_free(&f->cfg);
    char path[128];
    static const char *const names[] = {"sub/index.html", "sub", "hello.txt"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        path_of(f, names[i], path, sizeof(path));
        CHECK_INT(remove(path), 0);
    }
    CHECK_INT(rmdir(f->dir), 0);
}

/* Parses head (a whole HTTP/1.1 request head), has serve answer it in the given syntax
 * (HTTP/1's policy or HTTP/2's fields), and copies the plan out: headers, then the body
 * segments (memory, or file ranges read with pread as an engine would send them). */
static void ask(struct fixture *f, const char *head, enum resp_syntax syntax, struct answer *a)
{
    struct http_request req;
    size_t len = strlen(head);
    CHECK_INT(http1_parse(unit_guard_str(head), len, &req), (long long)len);
    struct req_policy pol = syntax == RESP_H1 ? policy_h1(&req, true, 0) : policy_fields();
    struct response *r = serve_response_get(f->w);
    CHECK(r != NULL);
    CHECK_INT(serve_request(f->w, &req, &pol, r), SERVE_DONE);
    struct plan *p = &r->plan;
    memset(a, 0, sizeof(*a));
    a->status = p->status;
    CHECK(p->nseg >= 1 && p->head_len <= sizeof(a->head) && p->segs[0].mem &&
          p->head_len <= p->segs[0].len);
    memcpy(a->head, p->segs[0].mem + p->segs[0].off, (size_t)p->head_len);
    a->head_len = (size_t)p->head_len;
    plan_advance(p, p->head_len);
    while (!plan_done(p)) {
        struct seg *s = plan_seg(p);
        size_t n = (size_t)s->len;
        CHECK(a->body_len + n <= sizeof(a->body));
        if (s->mem)
            memcpy(a->body + a->body_len, s->mem + s->off, n);
        else
            CHECK(pread(s->fd, a->body + a->body_len, n, (off_t)s->off) == (ssize_t)n);
        a->body_len += n;
        plan_advance(p, n);
    }
    serve_response_put(f->w, r);
}

/* The value of header field name in a's header section ("" when absent), as a C string. */
static const char *field(const struct answer *a, const char *name, char *out, size_t cap)
{
    size_t nl = strlen(name);
    out[0] = '\0';
    for (const char *line = a->head, *end = a->head + a->head_len; line < end;) {
        const char *eol = memmem(line, (size_t)(end - line), "\r\n", 2);
        if (!eol)
            break;
        if ((size_t)(eol - line) > nl + 1 && strncasecmp(line, name, nl) == 0 && line[nl] == ':') {
            const char *v = line + nl + 1;
            while (*v == ' ')
                v++;
            snprintf(out, cap, "%.*s", (int)(eol - v), v);
            break;
        }
        line = eol + 2;
    }
    return out;
}

#define CHECK_FIELD(a, name, want)                                                                 \
    do {                                                                                           \
        char v_[256];                                                                              \
        const char *got_ = field((a), (name), v_, sizeof(v_));                                     \
        CHECK_MEM(got_, strlen(got_), (want));                                                     \
    } while (0)

TEST(serve_file_200_has_its_headers_and_body)
{
    struct fixture f;
    setup(&f);
    struct answer a;
    ask(&f, "GET /hello.txt HTTP/1.1\r\nHost: x\r\n\r\n", RESP_H1, &a);
    CHECK_INT(a.status, 200);
    CHECK(strncmp(a.head, "HTTP/1.1 200 OK\r\n", 17) == 0);
    CHECK(a.head_len >= 4 && memcmp(a.head + a.head_len - 4, "\r\n\r\n", 4) == 0);
    CHECK_FIELD(&a, "Content-Length", "13");
    CHECK_FIELD(&a, "Content-Type", "text/plain; charset=utf-8");
    CHECK_FIELD(&a, "Accept-Ranges", "bytes");
    char etag[256], lm[256];
    CHECK(field(&a, "ETag", etag, sizeof(etag))[0] == '"');
    CHECK(field(&a, "Last-Modified", lm, sizeof(lm))[0] != '\0');
    CHECK_MEM(a.body, a.body_len, HELLO);
    teardown(&f);
}

TEST(serve_missing_file_is_404)
{
    struct fixture f;
    setup(&f);
    struct answer a;
    ask(&f, "GET /nope.txt HTTP/1.1\r\nHost: x\r\n\r\n", RESP_H1, &a);
    CHECK_INT(a.status, 404);
    CHECK(strncmp(a.head, "HTTP/1.1 404 Not Found\r\n", 24) == 0);
    char len[32];
    CHECK_INT(atoi(field(&a, "Content-Length", len, sizeof(len))), a.body_len);
    teardown(&f);
}

TEST(serve_if_none_match_with_the_etag_is_304)
{
    struct fixture f;
    setup(&f);
    struct answer a;
    ask(&f, "GET /hello.txt HTTP/1.1\r\nHost: x\r\n\r\n", RESP_H1, &a);
    char etag[256], head[512];
    field(&a, "ETag", etag, sizeof(etag));
    snprintf(head, sizeof(head), "GET /hello.txt HTTP/1.1\r\nHost: x\r\nIf-None-Match: %s\r\n\r\n",
             etag);
    ask(&f, head, RESP_H1, &a);
    CHECK_INT(a.status, 304);
    CHECK_FIELD(&a, "ETag", etag);
    CHECK_INT(a.body_len, 0);
    /* another validator does not match: the file again */
    ask(&f, "GET /hello.txt HTTP/1.1\r\nHost: x\r\nIf-None-Match: \"other\"\r\n\r\n", RESP_H1, &a);
    CHECK_INT(a.status, 200);
    CHECK_MEM(a.body, a.body_len, HELLO);
    teardown(&f);
}

TEST(serve_range_is_206_with_the_part)
{
    struct fixture f;
    setup(&f);
    struct answer a;
    ask(&f, "GET /hello.txt HTTP/1.1\r\nHost: x\r\nRange: bytes=7-11\r\n\r\n", RESP_H1, &a);
    CHECK_INT(a.status, 206);
    CHECK_FIELD(&a, "Content-Range", "bytes 7-11/13");
    CHECK_FIELD(&a, "Content-Length", "5");
    CHECK_MEM(a.body, a.body_len, "world");
    ask(&f, "GET /hello.txt HTTP/1.1\r\nHost: x\r\nRange: bytes=20-30\r\n\r\n", RESP_H1, &a);
    CHECK_INT(a.status, 416);
    CHECK_FIELD(&a, "Content-Range", "bytes */13");
    teardown(&f);
}

TEST(serve_head_has_the_headers_of_get_and_no_body)
{
    struct fixture f;
    setup(&f);
    struct answer a;
    ask(&f, "HEAD /hello.txt HTTP/1.1\r\nHost: x\r\n\r\n", RESP_H1, &a);
    CHECK_INT(a.status, 200);
    CHECK_FIELD(&a, "Content-Length", "13");
    CHECK_INT(a.body_len, 0);
    teardown(&f);
}

TEST(serve_directory_without_slash_redirects)
{
    struct fixture f;
    setup(&f);
    struct answer a;
    ask(&f, "GET /sub?x=1 HTTP/1.1\r\nHost: x\r\n\r\n", RESP_H1, &a);
    CHECK_INT(a.status, 301);
    CHECK_FIELD(&a, "Location", "/sub/?x=1");
    ask(&f, "GET /sub/ HTTP/1.1\r\nHost: x\r\n\r\n", RESP_H1, &a);
    CHECK_INT(a.status, 200);
    CHECK_MEM(a.body, a.body_len, "<p>sub</p>\n");
    CHECK_FIELD(&a, "Content-Type", "text/html; charset=utf-8");
    teardown(&f);
}

TEST(serve_fields_syntax_has_no_status_line_or_connection)
{
    struct fixture f;
    setup(&f);
    struct answer a;
    ask(&f, "GET /hello.txt HTTP/1.1\r\nHost: x\r\n\r\n", RESP_FIELDS, &a);
    CHECK_INT(a.status, 200);
    CHECK(strncmp(a.head, "HTTP/", 5) != 0);
    CHECK(memmem(a.head, a.head_len, "\r\n\r\n", 4) == NULL);
    CHECK_FIELD(&a, "Connection", "");
    CHECK_FIELD(&a, "Content-Length", "13");
    CHECK_MEM(a.body, a.body_len, HELLO);
    teardown(&f);
}

TEST(serve_acme_http01_answers_a_pending_token_only)
{
    struct fixture f;
    setup(&f);
    struct answer a;
    const char *req = "GET /.well-known/acme-challenge/tok-1 HTTP/1.1\r\nHost: a.test\r\n\r\n";
    /* without a tokens reader the path is a file like any other: none here */
    ask(&f, req, RESP_H1, &a);
    CHECK_INT(a.status, 404);

    struct acme_tokens t;
    CHECK_INT(tokens_init(&t, 1), 0);
    CHECK_INT(tokens_add_http(&t, "a.test", "tok-1", "tok-1.thumb"), 0);
    f.w->acme = tokens_reader(&t, 0);
    ask(&f, req, RESP_H1, &a);
    CHECK_INT(a.status, 200);
    CHECK_FIELD(&a, "Content-Type", "application/octet-stream");
    CHECK_FIELD(&a, "Content-Length", "11");
    CHECK_MEM(a.body, a.body_len, "tok-1.thumb");
    /* another host, or a token not pending: not answered */
    ask(&f, "GET /.well-known/acme-challenge/tok-1 HTTP/1.1\r\nHost: b.test\r\n\r\n", RESP_H1, &a);
    CHECK_INT(a.status, 404);
    ask(&f, "GET /.well-known/acme-challenge/tok-2 HTTP/1.1\r\nHost: a.test\r\n\r\n", RESP_H1, &a);
    CHECK_INT(a.status, 404);
    f.w->acme = NULL;
    teardown(&f);
    tokens_fini(&t);
}
