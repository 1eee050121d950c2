/* The ACME protocol; see client.h. libcurl for HTTPS (Debian's OpenSSL flavour: the same TLS
 * library the server links, proxies and timeouts for free); jansson for JSON (json_pack builds
 * a payload in one call, json_unpack checks a member's type while it reads it, and it refuses
 * invalid UTF-8 and, asked to, duplicate members). */
#include "server/acme/client.h"

#include <curl/curl.h>
#include <errno.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "server/acme/jws.h"
#include "server/acme/when.h"

#define BODY_MAX (1 << 20) /* no ACME document or chain is near a MiB */
#define POLLS 60           /* per authorization or order, at least a second apart */

struct reply {
    long status;
    char *body;
    size_t len;
    char type[128];      /* Content-Type without parameters */
    char location[1024]; /* Location */
    char nonce[256];     /* Replay-Nonce */
    int64_t retry_after;
    bool too_big;
};

static void reply_free(struct reply *r)
{
    free(r->body);
    *r = (struct reply){0};
}

__attribute__((format(printf, 2, 3))) static int fail(struct acme_client *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->error, sizeof(c->error), fmt, ap);
    va_end(ap);
    return -EPROTO;
}

static size_t on_body(char *p, size_t size, size_t n, void *arg)
{
    struct reply *r = arg;
    size_t add = size * n;
    if (r->len + add > BODY_MAX) {
        r->too_big = true;
        return 0; /* aborts the transfer */
    }
    char *b = realloc(r->body, r->len + add + 1);
    if (!b)
        return 0;
    memcpy(b + r->len, p, add);
    r->body = b;
    r->len += add;
    b[r->len] = '\0';
    return add;
}

/* The value of header line p (name: value) into out when its name is name. */
static void header_value(const char *p, size_t len, const char *name, char *out, size_t cap)
{
    size_t nl = strlen(name);
    if (len <= nl || strncasecmp(p, name, nl) != 0 || p[nl] != ':')
        return;
    p += nl + 1;
    len -= nl + 1;
    while (len && (*p == ' ' || *p == '\t')) {
        p++;
        len--;
    }
    while (len && (p[len - 1] == '\r' || p[len - 1] == '\n' || p[len - 1] == ' '))
        len--;
    if (len >= cap)
        len = cap - 1;
    memcpy(out, p, len);
    out[len] = '\0';
}

static size_t on_header(char *p, size_t size, size_t n, void *arg)
{
    struct reply *r = arg;
    size_t len = size * n;
    char ra[64] = "";
    if (len > 5 && strncmp(p, "HTTP/", 5) == 0) { /* a new response (after a 100): start over */
        r->type[0] = r->location[0] = r->nonce[0] = '\0';
        r->retry_after = 0;
    }
    header_value(p, len, "content-type", r->type, sizeof(r->type));
    header_value(p, len, "location", r->location, sizeof(r->location));
    header_value(p, len, "replay-nonce", r->nonce, sizeof(r->nonce));
    header_value(p, len, "retry-after", ra, sizeof(ra));
    if (ra[0])
        r->retry_after = when_retry_after(ra, strlen(ra), (int64_t)time(NULL));
    char *semi = strchr(r->type, ';');
    if (semi)
        *semi = '\0';
    return len;
}

static int on_progress(void *arg, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d)
{
    (void)a, (void)b, (void)c, (void)d;
    const atomic_bool *stop = arg;
    return stop && atomic_load(stop) ? 1 : 0;
}

/* One exchange: GET (body NULL) or POST of a JWS. 0 with r filled (any status), or -errno. */
static int exchange(struct acme_client *c, const char *url, const char *body, const char *accept,
                    struct reply *r)
{
    CURL *h = c->curl;
    struct curl_slist *hdrs = NULL;
    char acc[96];
    *r = (struct reply){0};
    curl_easy_reset(h);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "https,http");
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, c->cfg.timeout < 10 ? c->cfg.timeout : 10L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, c->cfg.timeout);
    curl_easy_setopt(h, CURLOPT_USERAGENT,
                     "ringhttpd-acme/"
                     "0.1");
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, r);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, r);
    curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(h, CURLOPT_XFERINFODATA, (void *)c->cfg.stop);
    if (c->cfg.ca_root_pem) {
        struct curl_blob blob = {(void *)c->cfg.ca_root_pem, c->cfg.ca_root_len, CURL_BLOB_NOCOPY};
        curl_easy_setopt(h, CURLOPT_CAINFO_BLOB, &blob);
    }
    snprintf(acc, sizeof(acc), "Accept: %s", accept ? accept : "application/json");
    hdrs = curl_slist_append(hdrs, acc);
    if (body) {
        hdrs = curl_slist_append(hdrs, "Content-Type: application/jose+json");
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
    }
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
    CURLcode rc = curl_easy_perform(h);
    curl_slist_free_all(hdrs);
    if (c->cfg.stop && atomic_load(c->cfg.stop)) {
        reply_free(r);
        return -ECANCELED;
    }
    if (rc != CURLE_OK) {
        fail(c, "%s: %s", url,
             r->too_big ? "the answer is larger than 1 MiB" : curl_easy_strerror(rc));
        reply_free(r);
        return rc == CURLE_OPERATION_TIMEDOUT ? -ETIMEDOUT : -EIO;
    }
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &r->status);
    if (r->nonce[0])
        snprintf(c->nonce, sizeof(c->nonce), "%s", r->nonce);
    if (r->retry_after)
        c->retry_after = r->retry_after;
    return 0;
}

/* A JSON object from r, whose Content-Type must say JSON: the object, or NULL after fail(). */
static json_t *json_of(struct acme_client *c, const char *url, const struct reply *r)
{
    if (strcasecmp(r->type, "application/json") != 0 &&
        strcasecmp(r->type, "application/problem+json") != 0) {
        fail(c, "%s: HTTP %ld with Content-Type '%s', not JSON", url, r->status, r->type);
        return NULL;
    }
    json_error_t err;
    json_t *j = json_loadb(r->body ? r->body : "", r->len, JSON_REJECT_DUPLICATES, &err);
    if (!j || !json_is_object(j)) {
        fail(c, "%s: HTTP %ld with a body that is no JSON object (%s)", url, r->status,
             j ? "another JSON type" : err.text);
        json_decref(j);
        return NULL;
    }
    return j;
}

/* The one line a failed exchange leaves in c->error: the problem document (RFC 7807) when the
 * CA sent one. Returns -EAGAIN for a bad nonce (retry), -EPROTO otherwise. */
static int problem(struct acme_client *c, const char *url, const struct reply *r)
{
    if (strcasecmp(r->type, "application/problem+json") == 0) {
        json_t *j = json_loadb(r->body ? r->body : "", r->len, 0, NULL);
        const char *type = "?", *detail = "";
        if (j && json_is_object(j)) {
            json_unpack(j, "{s?s,s?s}", "type", &type, "detail", &detail);
            fail(c, "%s: HTTP %ld: %s: %s", url, r->status, type, detail);
            bool bad_nonce = strcmp(type, "urn:ietf:params:acme:error:badNonce") == 0;
            json_decref(j);
            return bad_nonce ? -EAGAIN : -EPROTO;
        }
        json_decref(j);
    }
    return fail(c, "%s: HTTP %ld (Content-Type '%s')", url, r->status, r->type);
}

static const char *dir_url(struct acme_client *c, const char *name)
{
    json_t *v = json_object_get(c->dir, name);
    return json_is_string(v) ? json_string_value(v) : NULL;
}

static int new_nonce(struct acme_client *c)
{
    const char *url = dir_url(c, "newNonce");
    struct reply r;
    int rc = exchange(c, url, NULL, NULL, &r);
    if (rc == 0 && !c->nonce[0])
        rc = fail(c, "%s: HTTP %ld without a Replay-Nonce", url, r.status);
    reply_free(&r);
    return rc;
}

/* A signed POST (payload NULL: POST-as-GET), retried on badNonce. 0 with r (status < 400), or
 * -errno with c->error. */
static int post(struct acme_client *c, const char *url, const char *payload, const char *accept,
                struct reply *r)
{
    for (int tries = 0;; tries++) {
        if (!c->nonce[0]) {
            int rc = new_nonce(c);
            if (rc)
                return rc;
        }
        char *jws =
            jws_sign(c->account, c->kid[0] ? c->kid : NULL, c->nonce, url, payload ? payload : "");
        c->nonce[0] = '\0'; /* used; the answer brings the next one */
        if (!jws)
            return fail(c, "cannot sign a request to %s", url);
        int rc = exchange(c, url, jws, accept, r);
        free(jws);
        if (rc)
            return rc;
        if (r->status < 400)
            return 0;
        rc = problem(c, url, r);
        reply_free(r);
        if (rc != -EAGAIN || tries == 4)
            return rc == -EAGAIN ? -EPROTO : rc;
    }
}

/* A signed POST whose answer is a JSON object: it, or NULL with c->error (*err the -errno). */
static json_t *post_json(struct acme_client *c, const char *url, const char *payload,
                         struct reply *r, int *err)
{
    json_t *j = NULL;
    if ((*err = post(c, url, payload, NULL, r)) == 0 && !(j = json_of(c, url, r))) {
        *err = -EPROTO;
        reply_free(r);
    }
    return j;
}

int client_open(struct acme_client *c, const struct acme_client_cfg *cfg, EVP_PKEY *account)
{
    struct reply r = {0};
    json_t *acct = NULL;
    char *payload = NULL;
    int rc;
    *c = (struct acme_client){.cfg = *cfg, .account = account};
    if (!(c->curl = curl_easy_init()))
        return fail(c, "libcurl: cannot make a handle"), -ENOMEM;
    if (jws_thumbprint(account, c->thumbprint) != 0)
        return fail(c, "the account key is no P-256 key"), -EINVAL;
    if ((rc = exchange(c, cfg->directory, NULL, NULL, &r)) != 0)
        return rc;
    if (r.status != 200) {
        rc = problem(c, cfg->directory, &r);
        goto out;
    }
    if (!(c->dir = json_of(c, cfg->directory, &r))) {
        rc = -EPROTO;
        goto out;
    }
    if (!dir_url(c, "newNonce") || !dir_url(c, "newAccount") || !dir_url(c, "newOrder")) {
        rc = fail(c, "%s: the directory lacks newNonce, newAccount or newOrder", cfg->directory);
        goto out;
    }
    reply_free(&r);
    json_t *p = cfg->email ? json_pack("{s:b,s:[s+]}", "termsOfServiceAgreed", 1, "contact",
                                       "mailto:", cfg->email)
                           : json_pack("{s:b}", "termsOfServiceAgreed", 1);
    payload = p ? json_dumps(p, JSON_COMPACT) : NULL;
    json_decref(p);
    if (!payload) {
        rc = -ENOMEM;
        goto out;
    }
    const char *url = dir_url(c, "newAccount");
    if (!(acct = post_json(c, url, payload, &r, &rc)))
        goto out;
    const char *status = NULL;
    json_unpack(acct, "{s?s}", "status", &status);
    if (!r.location[0] || !status || strcmp(status, "valid") != 0) {
        rc = fail(c, "%s: account status '%s'%s", url, status ? status : "?",
                  r.location[0] ? "" : ", no Location");
        goto out;
    }
    snprintf(c->kid, sizeof(c->kid), "%s", r.location);
    rc = 0;
out:
    free(payload);
    json_decref(acct);
    reply_free(&r);
    return rc;
}

void client_close(struct acme_client *c)
{
    if (c->curl)
        curl_easy_cleanup(c->curl);
    json_decref(c->dir);
    c->curl = NULL;
    c->dir = NULL;
}

/* Sleeps secs (at least 1, at most 10), a tenth at a time, giving up when stopped. */
static int pause_for(struct acme_client *c, int64_t secs)
{
    if (secs < 1)
        secs = 1;
    if (secs > 10)
        secs = 10;
    for (int64_t i = 0; i < secs * 10; i++) {
        if (c->cfg.stop && atomic_load(c->cfg.stop))
            return -ECANCELED;
        struct timespec ts = {0, 100 * 1000000L};
        nanosleep(&ts, NULL);
    }
    return 0;
}

/* POST-as-GET url until its status is no longer one of waiting ("pending processing"): the
 * object (the caller's), or NULL with *err. */
static json_t *poll_status(struct acme_client *c, const char *url, const char *waiting, int *err)
{
    for (int i = 0; i < POLLS; i++) {
        struct reply r;
        c->retry_after = 0;
        json_t *j = post_json(c, url, NULL, &r, err);
        reply_free(&r);
        if (!j)
            return NULL;
        const char *status = "";
        json_unpack(j, "{s?s}", "status", &status);
        if (!strstr(waiting, status) || !*status)
            return j;
        json_decref(j);
        if ((*err = pause_for(c, c->retry_after)) != 0)
            return NULL;
    }
    *err = -ETIMEDOUT;
    fail(c, "%s: still waiting after %d polls", url, POLLS);
    return NULL;
}

/* The challenge error of an invalid authorization, or its own, for the log line. */
static void authz_failure(struct acme_client *c, const char *url, json_t *authz)
{
    json_t *chs = json_object_get(authz, "challenges");
    size_t i;
    json_t *ch;
    json_array_foreach(chs, i, ch)
    {
        json_t *e = json_object_get(ch, "error");
        const char *type = "?", *detail = "";
        if (json_is_object(e) &&
            json_unpack(e, "{s?s,s?s}", "type", &type, "detail", &detail) == 0) {
            fail(c, "%s: authorization invalid: %s: %s", url, type, detail);
            return;
        }
    }
    fail(c, "%s: authorization invalid", url);
}

struct pending {
    enum acme_kind kind;
    char host[256];
    char token[128];
};

/* Answers one authorization (unless already valid) and waits for its verdict. */
static int authorize(struct acme_client *c, const char *url, const struct acme_answer *ans,
                     struct pending *p)
{
    struct reply r;
    int rc;
    json_t *authz = post_json(c, url, NULL, &r, &rc), *done = NULL;
    reply_free(&r);
    if (!authz)
        return rc;
    const char *status = "", *host = "";
    json_t *chs = NULL;
    if (json_unpack(authz, "{s:s,s:{s:s},s:o}", "status", &status, "identifier", "value", &host,
                    "challenges", &chs) != 0 ||
        !json_is_array(chs)) {
        rc = fail(c, "%s: an authorization without status, identifier or challenges", url);
        goto out;
    }
    if (strcmp(status, "valid") == 0) {
        rc = 0;
        goto out;
    }
    if (strcmp(status, "pending") != 0) {
        authz_failure(c, url, authz);
        rc = -EPROTO;
        goto out;
    }
    /* The first kind we can answer, in our order of preference, that the CA offers. */
    const char *ch_url = NULL, *token = NULL;
    /* (a wildcard's authorization offers only dns-01, RFC 8555 7.1.4) */
    for (unsigned k = ACME_HTTP01; k <= ACME_DNS01 && !ch_url; k <<= 1) {
        if (!(ans->kinds & k))
            continue;
        size_t i;
        json_t *ch;
        json_array_foreach(chs, i, ch)
        {
            const char *type = "", *u = NULL, *t = NULL;
            if (json_unpack(ch, "{s:s,s:s,s:s}", "type", &type, "url", &u, "token", &t) != 0)
                continue;
            if (strcmp(type, k == ACME_HTTP01   ? "http-01"
                             : k == ACME_ALPN01 ? "tls-alpn-01"
                                                : "dns-01") == 0) {
                ch_url = u;
                token = t;
                p->kind = (enum acme_kind)k;
                break;
            }
        }
    }
    if (!ch_url) {
        rc = fail(c, "%s: the CA offers no challenge for %s that a listener here can answer", url,
                  host);
        goto out;
    }
    char key_auth[256];
    if (strlen(host) >= sizeof(p->host) || strlen(token) >= sizeof(p->token) ||
        !jws_key_authorization(token, c->thumbprint, key_auth, sizeof(key_auth))) {
        rc = fail(c, "%s: a challenge token that is not base64url, or too long", url);
        goto out;
    }
    snprintf(p->host, sizeof(p->host), "%s", host);
    snprintf(p->token, sizeof(p->token), "%s", token);
    if ((rc = ans->put(ans->arg, p->kind, host, token, key_auth)) != 0) {
        p->host[0] = '\0';
        fail(c, "cannot publish the challenge answer for %s: %s", host, strerror(-rc));
        goto out;
    }
    json_t *ack = post_json(c, ch_url, "{}", &r, &rc);
    reply_free(&r);
    json_decref(ack);
    if (!ack)
        goto out;
    if (!(done = poll_status(c, url, "pending processing", &rc)))
        goto out;
    json_unpack(done, "{s?s}", "status", &status);
    if (strcmp(status, "valid") != 0) {
        authz_failure(c, url, done);
        rc = -EPROTO;
    }
out:
    json_decref(done);
    json_decref(authz);
    return rc;
}

int client_order(struct acme_client *c, const char *const *names, int n,
                 const struct acme_answer *ans, EVP_PKEY *key, char **pem)
{
    struct reply r = {0};
    json_t *ids = json_array(), *order = NULL, *ready = NULL, *final = NULL, *valid = NULL;
    struct pending *pend = calloc((size_t)n, sizeof(*pend));
    char *payload = NULL, *csr = NULL, order_url[1024] = "";
    int rc = -ENOMEM;
    c->retry_after = 0;
    if (!ids || !pend)
        goto out;
    for (int i = 0; i < n; i++)
        json_array_append_new(ids, json_pack("{s:s,s:s}", "type", "dns", "value", names[i]));
    json_t *p = json_pack("{s:O}", "identifiers", ids);
    payload = p ? json_dumps(p, JSON_COMPACT) : NULL;
    json_decref(p);
    if (!payload)
        goto out;
    const char *url = dir_url(c, "newOrder");
    if (!(order = post_json(c, url, payload, &r, &rc)))
        goto out;
    snprintf(order_url, sizeof(order_url), "%s", r.location);
    reply_free(&r);
    json_t *authzs = NULL;
    const char *finalize = NULL;
    if (!order_url[0] ||
        json_unpack(order, "{s:o,s:s}", "authorizations", &authzs, "finalize", &finalize) != 0 ||
        !json_is_array(authzs) || json_array_size(authzs) > (size_t)n) {
        rc = fail(c, "%s: an order without Location, authorizations or finalize", url);
        goto out;
    }
    for (size_t i = 0; i < json_array_size(authzs); i++) {
        const char *a = json_string_value(json_array_get(authzs, i));
        if (!a) {
            rc = fail(c, "%s: an authorization URL that is no string", url);
            goto out;
        }
        if ((rc = authorize(c, a, ans, &pend[i])) != 0)
            goto out;
    }
    if (!(ready = poll_status(c, order_url, "pending", &rc)))
        goto out;
    const char *status = "";
    json_unpack(ready, "{s?s}", "status", &status);
    if (strcmp(status, "ready") != 0 && strcmp(status, "valid") != 0) {
        rc = fail(c, "%s: order status '%s' after its authorizations", order_url, status);
        goto out;
    }
    if (strcmp(status, "ready") == 0) {
        if (!(csr = jws_csr(key, names, n)))
            goto out;
        free(payload);
        json_t *f = json_pack("{s:s}", "csr", csr);
        payload = f ? json_dumps(f, JSON_COMPACT) : NULL;
        json_decref(f);
        if (!payload)
            goto out;
        if (!(final = post_json(c, finalize, payload, &r, &rc)))
            goto out;
        reply_free(&r);
    }
    if (!(valid = poll_status(c, order_url, "ready processing", &rc)))
        goto out;
    const char *cert_url = NULL;
    json_unpack(valid, "{s?s,s?s}", "status", &status, "certificate", &cert_url);
    if (strcmp(status, "valid") != 0 || !cert_url) {
        rc = fail(c, "%s: order status '%s' after finalize", order_url, status);
        goto out;
    }
    if ((rc = post(c, cert_url, NULL, "application/pem-certificate-chain", &r)) != 0)
        goto out;
    if (strcasecmp(r.type, "application/pem-certificate-chain") != 0 || !r.body ||
        !strstr(r.body, "-----BEGIN CERTIFICATE-----")) {
        rc = fail(c, "%s: HTTP %ld with Content-Type '%s', not a PEM chain", cert_url, r.status,
                  r.type);
        goto out;
    }
    *pem = r.body;
    r.body = NULL;
    rc = 0;
out:
    for (int i = 0; pend && i < n; i++)
        if (pend[i].host[0])
            ans->drop(ans->arg, pend[i].kind, pend[i].host, pend[i].token);
    reply_free(&r);
    free(pend);
    free(payload);
    free(csr);
    json_decref(ids);
    json_decref(order);
    json_decref(ready);
    json_decref(final);
    json_decref(valid);
    return rc;
}

/* An RFC 3339 time as UNIX seconds, or 0. */
static int64_t rfc3339(const char *s)
{
    struct tm tm = {0};
    const char *end = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
    return end ? (int64_t)timegm(&tm) : 0;
}

int client_ari(struct acme_client *c, const char *id, int64_t *start, int64_t *end)
{
    const char *base = dir_url(c, "renewalInfo");
    char url[1280];
    struct reply r;
    if (!base || !id[0])
        return -ENOTSUP;
    snprintf(url, sizeof(url), "%s%s%s", base, base[strlen(base) - 1] == '/' ? "" : "/", id);
    int rc = exchange(c, url, NULL, NULL, &r);
    if (rc)
        return rc;
    json_t *j = r.status == 200 ? json_of(c, url, &r) : NULL;
    const char *s = NULL, *e = NULL;
    if (r.status != 200)
        rc = problem(c, url, &r);
    else if (!j ||
             json_unpack(j, "{s:{s:s,s:s}}", "suggestedWindow", "start", &s, "end", &e) != 0 ||
             !(*start = rfc3339(s)) || !(*end = rfc3339(e)) || *start >= *end)
        rc = j ? fail(c, "%s: no usable suggestedWindow", url) : -EPROTO;
    json_decref(j);
    reply_free(&r);
    return rc;
}
