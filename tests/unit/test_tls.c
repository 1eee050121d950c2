/* test_tls: the TLS module (tls/tls.h) against a real OpenSSL client, in memory: handshakes in
 * TLS 1.2 and 1.3, ALPN, SNI choosing among pairs, ECDSA and RSA for the same names, resumption
 * on a second context sharing the ticket secret (another worker) and across a key rotation,
 * start-up errors, plain HTTP and garbage instead of a ClientHello, sealing under backpressure,
 * close_notify both ways.
 * Must not: touch the network: both sides talk through memory.
 * Ownership: each test makes its certificates (self-signed, by OpenSSL's API) in a directory of
 * its own under /tmp and removes it. */
#include "unit.h"

#include <dirent.h>
#include <stdlib.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "tls/tls.h"

struct dir {
    char path[64];
};

static void dir_make(struct dir *d)
{
    strcpy(d->path, "/tmp/ringhttpd-tls-XXXXXX");
    CHECK(mkdtemp(d->path) != NULL);
}

static void dir_remove(struct dir *d)
{
    DIR *dp = opendir(d->path);
    struct dirent *e;
    char p[384];
    while (dp && (e = readdir(dp))) {
        if (e->d_name[0] == '.')
            continue;
        snprintf(p, sizeof(p), "%s/%s", d->path, e->d_name);
        unlink(p);
    }
    if (dp)
        closedir(dp);
    rmdir(d->path);
}

/* Writes DIR/NAME.crt (self-signed, CN and DNS name `host`, valid from `from` to `to` seconds
 * from now) and DIR/NAME.key; rsa picks RSA 2048 over ECDSA P-256. */
static void make_pair(const struct dir *d, const char *name, const char *host, bool rsa, long from,
                      long to)
{
    EVP_PKEY *key = rsa ? EVP_RSA_gen(2048) : EVP_EC_gen("P-256");
    X509 *x = X509_new();
    CHECK(key && x);
    unsigned serial;
    RAND_bytes((unsigned char *)&serial, sizeof(serial));
    X509_set_version(x, 2);
    ASN1_INTEGER_set(X509_get_serialNumber(x), serial >> 1);
    X509_gmtime_adj(X509_getm_notBefore(x), from);
    X509_gmtime_adj(X509_getm_notAfter(x), to);
    X509_set_pubkey(x, key);
    X509_NAME *n = X509_get_subject_name(x);
    X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_ASC, (const unsigned char *)host, -1, -1, 0);
    X509_set_issuer_name(x, n);
    char san[128];
    snprintf(san, sizeof(san), "DNS:%s", host);
    X509V3_CTX v3;
    X509V3_set_ctx_nodb(&v3);
    X509V3_set_ctx(&v3, x, x, NULL, NULL, 0);
    X509_EXTENSION *ext = X509V3_EXT_conf_nid(NULL, &v3, NID_subject_alt_name, san);
    CHECK(ext != NULL);
    X509_add_ext(x, ext, -1);
    X509_EXTENSION_free(ext);
    CHECK(X509_sign(x, key, EVP_sha256()) > 0);
    char p[256];
    snprintf(p, sizeof(p), "%s/%s.crt", d->path, name);
    FILE *f = fopen(p, "w");
    CHECK(f && PEM_write_X509(f, x));
    fclose(f);
    snprintf(p, sizeof(p), "%s/%s.key", d->path, name);
    f = fopen(p, "w");
    CHECK(f && PEM_write_PrivateKey(f, key, NULL, NULL, 0, NULL, NULL));
    fclose(f);
    X509_free(x);
    EVP_PKEY_free(key);
}

/* Up to 4 pairs named by the files' base names. */
struct files {
    char cert[4][256], key[4][256];
    struct tls_cert_files pairs[4];
};

static struct tls_settings settings(struct files *fs, const struct dir *d, const char *const *names,
                                    int n)
{
    for (int i = 0; i < n; i++) {
        snprintf(fs->cert[i], sizeof(fs->cert[i]), "%s/%s.crt", d->path, names[i]);
        snprintf(fs->key[i], sizeof(fs->key[i]), "%s/%s.key", d->path, names[i]);
        fs->pairs[i] = (struct tls_cert_files){.cert = fs->cert[i], .key = fs->key[i]};
    }
    return (struct tls_settings){.certs = fs->pairs, .num_certs = n, .min_version = 12};
}

static struct tls_ctx *ctx_ok(const struct tls_settings *s, const struct tls_keys *k)
{
    struct tls_ctx *ctx = NULL;
    char why[256] = "";
    int rc = tls_ctx_new(s, k, &ctx, why, sizeof(why));
    if (rc)
        fprintf(stderr, "  tls_ctx_new: %s\n", why);
    CHECK_INT(rc, 0);
    return ctx;
}

struct client {
    SSL_CTX *ctx;
    SSL *ssl;
    BIO *rd, *wr; /* to the client, from the client */
};

static void client_init(struct client *cl, int max_version, const char *sni, const char *alpn,
                        size_t alpn_len)
{
    cl->ctx = SSL_CTX_new(TLS_client_method());
    CHECK(cl->ctx != NULL);
    if (max_version)
        SSL_CTX_set_max_proto_version(cl->ctx, max_version);
    cl->ssl = SSL_new(cl->ctx);
    cl->rd = BIO_new(BIO_s_mem());
    cl->wr = BIO_new(BIO_s_mem());
    SSL_set_bio(cl->ssl, cl->rd, cl->wr);
    SSL_set_connect_state(cl->ssl);
    if (sni)
        SSL_set_tlsext_host_name(cl->ssl, sni);
    if (alpn)
        CHECK_INT(SSL_set_alpn_protos(cl->ssl, (const unsigned char *)alpn, (unsigned)alpn_len), 0);
}

static void client_fini(struct client *cl)
{
    SSL_free(cl->ssl);
    SSL_CTX_free(cl->ctx);
    ERR_clear_error();
}

/* Moves bytes both ways until neither side has any; returns the server's handshake result. */
static int pump(struct client *cl, struct tls_conn *s)
{
    int hs = TLS_AGAIN;
    char buf[65536];
    for (int round = 0; round < 64; round++) {
        bool moved = false;
        if (!SSL_is_init_finished(cl->ssl))
            SSL_do_handshake(cl->ssl);
        int n;
        while ((n = BIO_read(cl->wr, buf, sizeof(buf))) > 0) {
            CHECK_INT(tls_conn_feed(s, buf, (size_t)n), 0);
            moved = true;
        }
        if (hs == TLS_AGAIN)
            hs = tls_conn_handshake(s);
        size_t len;
        const void *p;
        while ((p = tls_conn_peek(s, &len)), len > 0) {
            BIO_write(cl->rd, p, (int)len);
            tls_conn_consume(s, len);
            moved = true;
        }
        if (!moved)
            break;
    }
    return hs;
}

/* The client sends a request, the server reads it and seals an answer from several segments,
 * the client reads it back (and with it any TLS 1.3 ticket). */
static void exchange(struct client *cl, struct tls_conn *s)
{
    static const char req[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    size_t w;
    CHECK(SSL_write_ex(cl->ssl, req, sizeof(req) - 1, &w) == 1);
    pump(cl, s);
    char got[256];
    ssize_t n = tls_conn_read(s, got, sizeof(got));
    CHECK_INT(n, sizeof(req) - 1);
    CHECK(n > 0 && memcmp(got, req, (size_t)n) == 0);
    CHECK_INT(tls_conn_read(s, got, sizeof(got)), TLS_AGAIN);

    struct iovec iov[3] = {{(void *)"HTTP/1.1 200 OK\r\n", 17},
                           {(void *)"Content-Length: 5\r\n\r\n", 21},
                           {(void *)"hello", 5}};
    char out[4096];
    size_t out_len = 0;
    CHECK_INT(tls_conn_seal(s, iov, 3, out, sizeof(out), &out_len), 43);
    BIO_write(cl->rd, out, (int)out_len);
    char back[128];
    size_t r = 0, total = 0;
    while (SSL_read_ex(cl->ssl, back + total, sizeof(back) - total, &r) == 1)
        total += r;
    CHECK_MEM(back, total, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello");
    pump(cl, s); /* anything the client's read produced (a TLS 1.3 KeyUpdate would be one) */
}

/* A context on a fresh pair, for the tests that need just one. */
struct one {
    struct dir d;
    struct files fs;
    struct tls_settings s; /* for more contexts on the same pair */
    struct tls_keys *k;
    struct tls_ctx *ctx;
};

static void one_setup(struct one *o)
{
    dir_make(&o->d);
    make_pair(&o->d, "a", "a.test", false, 0, 86400);
    const char *names[] = {"a"};
    o->s = settings(&o->fs, &o->d, names, 1);
    CHECK_INT(tls_keys_new(&o->k), 0);
    o->ctx = ctx_ok(&o->s, o->k);
}

static void one_teardown(struct one *o)
{
    tls_ctx_put(o->ctx);
    tls_keys_free(o->k);
    dir_remove(&o->d);
}

TEST(tls_handshake_tls13_alpn_http1_and_data)
{
    struct one o;
    one_setup(&o);
    struct tls_ctx *ctx = o.ctx;
    CHECK_MEM(tls_ctx_warnings(ctx), strlen(tls_ctx_warnings(ctx)), "");

    struct client cl;
    client_init(&cl, 0, "a.test", "\x02h2\x08http/1.1", 12);
    struct tls_conn c;
    CHECK_INT(tls_conn_init(&c, ctx), 0);
    CHECK_INT(pump(&cl, &c), 1);
    CHECK(tls_conn_established(&c));
    CHECK(SSL_is_init_finished(cl.ssl));
    CHECK(strcmp(tls_conn_version(&c), "TLSv1.3") == 0);
    CHECK_INT(tls_conn_alpn(&c), TLS_ALPN_HTTP1); /* no h2 unless the protocol layer says so */
    CHECK(tls_conn_sni(&c) && strcmp(tls_conn_sni(&c), "a.test") == 0);
    CHECK(!tls_conn_resumed(&c));
    exchange(&cl, &c);
    tls_conn_trim(&c);
    CHECK_INT(c.in.cap, 0);
    CHECK_INT(c.out.cap, 0);
    exchange(&cl, &c); /* trimmed buffers come back when needed */

    tls_conn_fini(&c);
    client_fini(&cl);
    one_teardown(&o); /* the connection's reference to the context went with tls_conn_fini */
}

TEST(tls_alpn_offers_h2_only_when_asked)
{
    struct one o;
    one_setup(&o);
    o.s.alpn_h2 = true;
    struct tls_ctx *ctx = ctx_ok(&o.s, o.k);
    static const struct {
        const char *wire;
        size_t len;
        enum tls_alpn want;
    } cases[] = {
        {"\x08http/1.1\x02h2", 12, TLS_ALPN_H2}, /* the server's preference wins */
        {"\x08http/1.1", 9, TLS_ALPN_HTTP1},
        {"\x03"
         "foo",
         4, TLS_ALPN_NONE}, /* no common protocol: no ALPN, no failure */
        {NULL, 0, TLS_ALPN_NONE},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct client cl;
        client_init(&cl, 0, NULL, cases[i].wire, cases[i].len);
        struct tls_conn c;
        CHECK_INT(tls_conn_init(&c, ctx), 0);
        CHECK_INT(pump(&cl, &c), 1);
        CHECK_INT(tls_conn_alpn(&c), cases[i].want);
        tls_conn_fini(&c);
        client_fini(&cl);
    }
    tls_ctx_put(ctx);
    one_teardown(&o);
}

TEST(tls_version_12_and_min_13)
{
    struct one o;
    one_setup(&o);
    struct tls_ctx *ctx = o.ctx;
    struct client cl;
    client_init(&cl, TLS1_2_VERSION, "a.test", "\x08http/1.1", 9);
    struct tls_conn c;
    CHECK_INT(tls_conn_init(&c, ctx), 0);
    CHECK_INT(pump(&cl, &c), 1);
    CHECK(strcmp(tls_conn_version(&c), "TLSv1.2") == 0);
    CHECK(strncmp(tls_conn_cipher(&c), "ECDHE-ECDSA-", 12) == 0);
    CHECK_INT(tls_conn_alpn(&c), TLS_ALPN_HTTP1);
    exchange(&cl, &c);
    /* a TLS 1.2 client asking to renegotiate gets no new handshake */
    CHECK(SSL_renegotiate(cl.ssl) == 1);
    SSL_do_handshake(cl.ssl);
    pump(&cl, &c);
    char buf[64];
    ssize_t n = tls_conn_read(&c, buf, sizeof(buf));
    CHECK(n == TLS_AGAIN || n == -EPROTO);
    pump(&cl, &c);
    CHECK(SSL_do_handshake(cl.ssl) != 1 || !SSL_renegotiate_pending(cl.ssl));
    tls_conn_fini(&c);
    client_fini(&cl);

    o.s.min_version = 13; /* --tls-min 1.3: a TLS 1.2 client is refused with an alert */
    ctx = ctx_ok(&o.s, o.k);
    client_init(&cl, TLS1_2_VERSION, "a.test", NULL, 0);
    CHECK_INT(tls_conn_init(&c, ctx), 0);
    SSL_do_handshake(cl.ssl);
    char hello[4096];
    int len = BIO_read(cl.wr, hello, sizeof(hello));
    CHECK(len > 0);
    CHECK_INT(tls_conn_feed(&c, hello, (size_t)len), 0);
    CHECK_INT(tls_conn_handshake(&c), -EPROTO);
    CHECK(tls_conn_pending(&c) > 0); /* the protocol_version alert */
    CHECK(!tls_conn_established(&c));
    tls_conn_fini(&c);
    client_fini(&cl);
    tls_ctx_put(ctx);
    one_teardown(&o);
}

/* The certificate the client got, checked by name. */
static bool peer_is(struct client *cl, const char *host)
{
    X509 *x = SSL_get1_peer_certificate(cl->ssl);
    bool yes = x && X509_check_host(x, host, 0, 0, NULL) == 1;
    X509_free(x);
    return yes;
}

static int peer_key_type(struct client *cl)
{
    X509 *x = SSL_get1_peer_certificate(cl->ssl);
    int t = x ? EVP_PKEY_get_base_id(X509_get0_pubkey(x)) : 0;
    X509_free(x);
    return t;
}

TEST(tls_sni_picks_the_pair_first_is_default)
{
    struct dir d;
    dir_make(&d);
    make_pair(&d, "a", "a.test", false, 0, 86400);
    make_pair(&d, "b", "b.test", false, 0, 86400);
    make_pair(&d, "w", "*.wild.test", false, 0, 86400);
    struct files fs;
    const char *names[] = {"a", "b", "w"};
    struct tls_settings s = settings(&fs, &d, names, 3);
    struct tls_keys *k;
    CHECK_INT(tls_keys_new(&k), 0);
    struct tls_ctx *ctx = ctx_ok(&s, k);
    static const struct {
        const char *sni, *want;
    } cases[] = {
        {"b.test", "b.test"},           {"a.test", "a.test"}, {"B.TEST", "b.test"},
        {"x.wild.test", "x.wild.test"}, {"c.test", "a.test"}, {NULL, "a.test"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct client cl;
        client_init(&cl, 0, cases[i].sni, NULL, 0);
        struct tls_conn c;
        CHECK_INT(tls_conn_init(&c, ctx), 0);
        CHECK_INT(pump(&cl, &c), 1);
        if (!peer_is(&cl, cases[i].want))
            fprintf(stderr, "  SNI %s did not get %s\n", cases[i].sni ? cases[i].sni : "(none)",
                    cases[i].want);
        CHECK(peer_is(&cl, cases[i].want));
        exchange(&cl, &c);
        tls_conn_fini(&c);
        client_fini(&cl);
    }
    tls_ctx_put(ctx);
    tls_keys_free(k);
    dir_remove(&d);
}

TEST(tls_ecdsa_and_rsa_for_the_same_names)
{
    struct dir d;
    dir_make(&d);
    make_pair(&d, "ec", "dual.test", false, 0, 86400);
    make_pair(&d, "rsa", "dual.test", true, 0, 86400);
    struct files fs;
    const char *names[] = {"ec", "rsa"};
    struct tls_settings s = settings(&fs, &d, names, 2);
    struct tls_keys *k;
    CHECK_INT(tls_keys_new(&k), 0);
    struct tls_ctx *ctx = ctx_ok(&s, k);
    static const struct {
        int version;
        const char *ciphers, *sigalgs;
        int want;
    } cases[] = {
        {TLS1_2_VERSION, "ECDHE-RSA-AES128-GCM-SHA256", NULL, EVP_PKEY_RSA},
        {TLS1_2_VERSION, "ECDHE-ECDSA-AES128-GCM-SHA256", NULL, EVP_PKEY_EC},
        {0, NULL, "rsa_pss_rsae_sha256", EVP_PKEY_RSA},
        {0, NULL, "ecdsa_secp256r1_sha256", EVP_PKEY_EC},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct client cl;
        client_init(&cl, cases[i].version, "dual.test", NULL, 0);
        if (cases[i].ciphers)
            CHECK(SSL_set_cipher_list(cl.ssl, cases[i].ciphers) == 1);
        if (cases[i].sigalgs)
            CHECK(SSL_set1_sigalgs_list(cl.ssl, cases[i].sigalgs) == 1);
        struct tls_conn c;
        CHECK_INT(tls_conn_init(&c, ctx), 0);
        CHECK_INT(pump(&cl, &c), 1);
        CHECK_INT(peer_key_type(&cl), cases[i].want);
        tls_conn_fini(&c);
        client_fini(&cl);
    }
    tls_ctx_put(ctx);
    /* a second certificate of the same type for the same names is refused */
    make_pair(&d, "ec2", "dual.test", false, 0, 86400);
    const char *twice[] = {"ec", "ec2"};
    s = settings(&fs, &d, twice, 2);
    char why[256] = "";
    CHECK(tls_ctx_new(&s, k, &ctx, why, sizeof(why)) < 0);
    CHECK(strstr(why, "ec2.crt") != NULL);
    tls_keys_free(k);
    dir_remove(&d);
}

/* A full handshake on `first`, then one on `second` offering the session: whether it resumed. */
static bool resumes(struct tls_ctx *first, struct tls_ctx *second, int version)
{
    struct client cl;
    client_init(&cl, version, "a.test", NULL, 0);
    struct tls_conn c;
    CHECK_INT(tls_conn_init(&c, first), 0);
    CHECK_INT(pump(&cl, &c), 1);
    exchange(&cl, &c); /* a TLS 1.3 ticket arrives after the handshake */
    SSL_SESSION *sess = SSL_get1_session(cl.ssl);
    CHECK(sess != NULL && SSL_SESSION_is_resumable(sess));
    SSL_shutdown(cl.ssl); /* freed without it, OpenSSL's client forgets the session */
    tls_conn_fini(&c);
    client_fini(&cl);

    client_init(&cl, version, "a.test", NULL, 0);
    CHECK(SSL_set_session(cl.ssl, sess) == 1);
    SSL_SESSION_free(sess);
    CHECK_INT(tls_conn_init(&c, second), 0);
    CHECK_INT(pump(&cl, &c), 1);
    bool yes = tls_conn_resumed(&c);
    CHECK_INT(SSL_session_reused(cl.ssl), yes);
    exchange(&cl, &c);
    tls_conn_fini(&c);
    client_fini(&cl);
    return yes;
}

TEST(tls_resumption_on_another_worker_and_across_rotation)
{
    struct dir d;
    dir_make(&d);
    make_pair(&d, "a", "a.test", false, 0, 86400);
    struct files fs;
    const char *names[] = {"a"};
    struct tls_settings s = settings(&fs, &d, names, 1);
    struct tls_keys *k, *other;
    CHECK_INT(tls_keys_new(&k), 0);
    CHECK_INT(tls_keys_new(&other), 0);
    struct tls_ctx *w1 = ctx_ok(&s, k), *w2 = ctx_ok(&s, k), *stranger = ctx_ok(&s, other);
    int64_t t = 1800000000;
    tls_ctx_set_time(w1, t);
    tls_ctx_set_time(w2, t);
    tls_ctx_set_time(stranger, t);
    CHECK(resumes(w1, w2, 0));
    CHECK(resumes(w1, w2, TLS1_2_VERSION));
    CHECK(!resumes(w1, stranger, 0)); /* another secret: a full handshake, no failure */
    /* the next key period: the previous key still decrypts */
    tls_ctx_set_time(w2, t + TLS_TICKET_ROTATE);
    CHECK(resumes(w1, w2, 0));
    CHECK(resumes(w1, w2, TLS1_2_VERSION));
    /* two periods on, it is gone */
    tls_ctx_set_time(w2, t + 2 * TLS_TICKET_ROTATE);
    CHECK(!resumes(w1, w2, 0));
    CHECK(!resumes(w1, w2, TLS1_2_VERSION));
    tls_ctx_put(w1);
    tls_ctx_put(w2);
    tls_ctx_put(stranger);
    tls_keys_free(k);
    tls_keys_free(other);
    dir_remove(&d);
}

static int ctx_error(const struct tls_settings *s, const struct tls_keys *k, char *why,
                     size_t why_len)
{
    struct tls_ctx *ctx = NULL;
    why[0] = 0;
    int rc = tls_ctx_new(s, k, &ctx, why, why_len);
    if (rc == 0)
        tls_ctx_put(ctx);
    return rc;
}

TEST(tls_start_up_errors_and_warnings)
{
    struct dir d;
    dir_make(&d);
    make_pair(&d, "a", "a.test", false, 0, 86400);
    make_pair(&d, "b", "b.test", false, 0, 86400);
    make_pair(&d, "old", "old.test", false, -2 * 86400, -86400);
    make_pair(&d, "soon", "soon.test", false, 86400, 2 * 86400);
    struct tls_keys *k;
    CHECK_INT(tls_keys_new(&k), 0);
    char why[512];
    struct files fs;
    const char *names[] = {"a"};
    struct tls_settings s = settings(&fs, &d, names, 1);

    snprintf(fs.key[0], sizeof(fs.key[0]), "%s/b.key", d.path); /* a's certificate, b's key */
    CHECK_INT(ctx_error(&s, k, why, sizeof(why)), -EINVAL);
    CHECK(strstr(why, "does not match") && strstr(why, "b.key") && strstr(why, "a.crt"));

    snprintf(fs.cert[0], sizeof(fs.cert[0]), "%s/missing.crt", d.path);
    CHECK_INT(ctx_error(&s, k, why, sizeof(why)), -ENOENT);
    CHECK(strstr(why, "--tls-cert") && strstr(why, "missing.crt"));

    snprintf(fs.cert[0], sizeof(fs.cert[0]), "%s/a.crt", d.path);
    snprintf(fs.key[0], sizeof(fs.key[0]), "%s/a.crt", d.path); /* a certificate, not a key */
    CHECK_INT(ctx_error(&s, k, why, sizeof(why)), -EINVAL);
    CHECK(strstr(why, "--tls-key") && strstr(why, "no PEM private key"));

    snprintf(fs.cert[0], sizeof(fs.cert[0]), "%s/a.key", d.path); /* a key, not a certificate */
    snprintf(fs.key[0], sizeof(fs.key[0]), "%s/a.key", d.path);
    CHECK_INT(ctx_error(&s, k, why, sizeof(why)), -EINVAL);
    CHECK(strstr(why, "no PEM certificate") != NULL);

    const char *dated[] = {"old", "soon"};
    s = settings(&fs, &d, dated, 2);
    struct tls_ctx *ctx = NULL;
    CHECK_INT(tls_ctx_new(&s, k, &ctx, why, sizeof(why)), 0); /* warnings, not errors */
    if (ctx) {
        const char *w = tls_ctx_warnings(ctx);
        CHECK(strstr(w, "old.crt' expired on ") != NULL);
        CHECK(strstr(w, "soon.crt' is not valid before ") != NULL);
        tls_ctx_put(ctx);
    }
    tls_keys_free(k);
    dir_remove(&d);
}

TEST(tls_plain_http_and_garbage_instead_of_a_hello)
{
    struct one o;
    one_setup(&o);
    struct tls_conn c;
    char buf[64];
    CHECK_INT(tls_conn_init(&c, o.ctx), 0);
    CHECK_INT(tls_conn_read(&c, buf, sizeof(buf)), TLS_AGAIN); /* nothing yet */
    CHECK_INT(tls_conn_feed(&c, "GET / HTTP/1.1\r\n", 16), 0);
    CHECK_INT(tls_conn_read(&c, buf, sizeof(buf)), TLS_PLAIN_HTTP);
    CHECK_INT(tls_conn_pending(&c), 0); /* no alert: the answer is the 400 below */
    tls_conn_fini(&c);

    char answer[1024];
    size_t n = tls_plain_http_400(answer, sizeof(answer), "Mon, 23 Nov 2026 10:00:00 GMT");
    CHECK(n > 0 && strncmp(answer, "HTTP/1.1 400 Bad Request\r\n", 26) == 0);
    CHECK(n > 0 && strstr(answer, "\r\nConnection: close\r\n"));
    CHECK(n > 0 && strstr(answer, "The plain HTTP request was sent to HTTPS port"));
    const char *body = strstr(answer, "\r\n\r\n");
    char want[48];
    snprintf(want, sizeof(want), "Content-Length: %zu\r\n", n - (size_t)(body + 4 - answer));
    CHECK(body && strstr(answer, want));
    CHECK_INT(tls_plain_http_400(answer, 100, "x"), 0);

    /* binary garbage, and garbage inside a handshake record */
    static const char zeros[8] = {0};
    CHECK_INT(tls_conn_init(&c, o.ctx), 0);
    CHECK_INT(tls_conn_feed(&c, zeros, sizeof(zeros)), 0);
    CHECK_INT(tls_conn_read(&c, buf, sizeof(buf)), -EPROTO);
    tls_conn_fini(&c);
    unsigned char junk[600];
    for (int round = 0; round < 50; round++) {
        RAND_bytes(junk, sizeof(junk));
        junk[0] = 22;
        junk[1] = 3;
        junk[2] = (unsigned char)(round % 4);
        CHECK_INT(tls_conn_init(&c, o.ctx), 0);
        CHECK_INT(tls_conn_feed(&c, junk, sizeof(junk)), 0);
        int rc = tls_conn_handshake(&c);
        CHECK(rc == -EPROTO || rc == TLS_AGAIN);
        tls_conn_fini(&c);
    }
    one_teardown(&o);
}

TEST(tls_truncated_and_mutated_client_hellos)
{
    struct one o;
    one_setup(&o);
    struct client cl;
    client_init(&cl, 0, "a.test", "\x08http/1.1", 9);
    SSL_do_handshake(cl.ssl);
    unsigned char hello[4096];
    int len = BIO_read(cl.wr, hello, sizeof(hello));
    CHECK(len > 100);
    client_fini(&cl);
    struct tls_conn c;
    /* every prefix waits for the rest */
    for (int cut = 1; cut < len; cut += 7) {
        CHECK_INT(tls_conn_init(&c, o.ctx), 0);
        CHECK_INT(tls_conn_feed(&c, hello, (size_t)cut), 0);
        CHECK_INT(tls_conn_handshake(&c), TLS_AGAIN);
        tls_conn_fini(&c);
    }
    /* every byte flipped: refused or (where the byte does not matter) answered, never a crash */
    int refused = 0;
    for (int at = 0; at < len; at++) {
        unsigned char m[4096];
        memcpy(m, hello, (size_t)len);
        m[at] ^= 0xa5;
        CHECK_INT(tls_conn_init(&c, o.ctx), 0);
        CHECK_INT(tls_conn_feed(&c, m, (size_t)len), 0);
        int rc = tls_conn_handshake(&c);
        CHECK(rc == -EPROTO || rc == TLS_AGAIN || rc == TLS_PLAIN_HTTP);
        refused += rc != TLS_AGAIN;
        tls_conn_fini(&c);
    }
    CHECK(refused > len / 10); /* 64 of 327 when written: most bytes are random or key shares */
    one_teardown(&o);
}

TEST(tls_seal_fills_a_small_buffer_and_continues)
{
    struct one o;
    one_setup(&o);
    struct client cl;
    client_init(&cl, 0, "a.test", NULL, 0);
    struct tls_conn c;
    CHECK_INT(tls_conn_init(&c, o.ctx), 0);
    CHECK_INT(pump(&cl, &c), 1);
    enum { TOTAL = 200000, CAP = 6000 };
    char *data = malloc(TOTAL), *got = malloc(TOTAL);
    CHECK(data && got);
    for (int i = 0; i < TOTAL; i++)
        data[i] = (char)(i * 7 + i / 251);
    size_t sent = 0, received = 0;
    int calls = 0;
    while (sent < TOTAL && calls < 1000) {
        char out[CAP];
        size_t out_len = 0;
        struct iovec iov = {data + sent, TOTAL - sent};
        ssize_t n = tls_conn_seal(&c, &iov, 1, out, sizeof(out), &out_len);
        CHECK(n > 0 && out_len <= CAP && out_len > (size_t)n);
        if (n <= 0)
            break;
        sent += (size_t)n;
        calls++;
        BIO_write(cl.rd, out, (int)out_len);
        size_t r;
        while (SSL_read_ex(cl.ssl, got + received, TOTAL - received, &r) == 1)
            received += r;
    }
    CHECK_INT(received, TOTAL);
    CHECK(memcmp(data, got, TOTAL) == 0);
    /* full records when the buffer is big: 200000 bytes in ceil(200000 / 16384) = 13 records */
    size_t big = TOTAL + 13 * TLS_RECORD_OVERHEAD;
    char *out = malloc(big);
    size_t out_len = 0;
    struct iovec iov = {data, TOTAL};
    CHECK_INT(tls_conn_seal(&c, &iov, 1, out, big, &out_len), TOTAL);
    CHECK_INT(out_len, TOTAL + 13 * 22); /* TLS 1.3 AEAD: 5 header + 1 type + 16 tag */
    free(out);
    free(data);
    free(got);
    tls_conn_fini(&c);
    client_fini(&cl);
    one_teardown(&o);
}

TEST(tls_close_notify_both_ways)
{
    struct one o;
    one_setup(&o);
    struct client cl;
    client_init(&cl, 0, "a.test", NULL, 0);
    struct tls_conn c;
    CHECK_INT(tls_conn_init(&c, o.ctx), 0);
    CHECK_INT(pump(&cl, &c), 1);
    exchange(&cl, &c);
    tls_conn_close_notify(&c);
    CHECK(tls_conn_pending(&c) > 0);
    pump(&cl, &c);
    char buf[16];
    size_t r;
    CHECK(SSL_read_ex(cl.ssl, buf, sizeof(buf), &r) == 0);
    CHECK_INT(SSL_get_error(cl.ssl, 0), SSL_ERROR_ZERO_RETURN);
    struct iovec iov = {(void *)"late", 4};
    char out[256];
    size_t out_len = 0;
    CHECK_INT(tls_conn_seal(&c, &iov, 1, out, sizeof(out), &out_len), -EPROTO);
    tls_conn_fini(&c);
    client_fini(&cl);

    client_init(&cl, 0, "a.test", NULL, 0);
    CHECK_INT(tls_conn_init(&c, o.ctx), 0);
    CHECK_INT(pump(&cl, &c), 1);
    exchange(&cl, &c);
    SSL_shutdown(cl.ssl);
    pump(&cl, &c);
    CHECK_INT(tls_conn_read(&c, buf, sizeof(buf)), 0);
    tls_conn_fini(&c);
    client_fini(&cl);

    /* before the handshake there is nothing to notify */
    CHECK_INT(tls_conn_init(&c, o.ctx), 0);
    tls_conn_close_notify(&c);
    CHECK_INT(tls_conn_pending(&c), 0);
    tls_conn_fini(&c);
    one_teardown(&o);
}
