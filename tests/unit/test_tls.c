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
#include <linux/tls.h>
#include <stdlib.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "core/rules.h"
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
    /* an idle connection holds none of OpenSSL's record buffers either */
    CHECK(SSL_get_mode(c.ssl) & SSL_MODE_RELEASE_BUFFERS);
    tls_conn_trim(&c);
    CHECK_INT(c.in.cap, 0);
    CHECK_INT(c.out.cap, 0);
    exchange(&cl, &c); /* trimmed buffers come back when needed */

    tls_conn_fini(&c);
    client_fini(&cl);
    one_teardown(&o); /* the connection's reference to the context went with tls_conn_fini */
}

/* Lent ciphertext (tls_conn_lend, the transport's way) is read where it lies; what a read leaves
 * of it is copied by tls_conn_settle before the caller's buffer is reused; and a record larger
 * than the reader's buffer comes out whole although nothing more is fed (OpenSSL holds the rest
 * of its plaintext, so a read must not stop at "nothing fed"). */
TEST(tls_lent_bytes_partial_records_and_held_plaintext)
{
    struct one o;
    one_setup(&o);
    struct client cl;
    client_init(&cl, 0, "a.test", "\x08http/1.1", 9);
    struct tls_conn c;
    CHECK_INT(tls_conn_init(&c, o.ctx), 0);
    CHECK_INT(pump(&cl, &c), 1);

    /* two records; the first and half the second are lent, then the buffer is overwritten */
    static char big[10000];
    for (size_t i = 0; i < sizeof(big); i++)
        big[i] = (char)('a' + i % 26);
    size_t w;
    CHECK(SSL_write_ex(cl.ssl, "first", 5, &w) == 1);
    CHECK(SSL_write_ex(cl.ssl, big, sizeof(big), &w) == 1);
    static char wire[16384];
    int n = BIO_read(cl.wr, wire, sizeof(wire));
    CHECK(n > 10000);
    size_t half = 27 + 10000 / 2; /* "first"'s record is 5 + 5 + 1 + 16 = 27 bytes */
    CHECK_INT(tls_conn_lend(&c, wire, half), 0);
    char got[1000];
    CHECK_INT(tls_conn_read(&c, got, sizeof(got)), 5); /* one record: the rest stays lent */
    CHECK_MEM(got, 5, "first");
    CHECK_INT(tls_conn_settle(&c), 0);
    CHECK_INT(tls_conn_buffered(&c), half - 27);
    char rest[16384];
    memcpy(rest, wire + half, (size_t)n - half);
    memset(wire, 0, sizeof(wire));
    CHECK_INT(tls_conn_read(&c, got, sizeof(got)), TLS_AGAIN); /* OpenSSL holds the half */
    CHECK_INT(tls_conn_lend(&c, rest, (size_t)n - half), 0);
    /* the 10,000-byte record through a 1,000-byte buffer, all of it */
    static char out[sizeof(big)];
    size_t total = 0;
    ssize_t r;
    while ((r = tls_conn_read(&c, got, sizeof(got))) > 0) {
        CHECK(total + (size_t)r <= sizeof(out));
        memcpy(out + total, got, (size_t)r);
        total += (size_t)r;
    }
    CHECK_INT(r, TLS_AGAIN);
    CHECK_INT(total, sizeof(big));
    CHECK(memcmp(out, big, sizeof(big)) == 0);
    CHECK_INT(tls_conn_settle(&c), 0);
    CHECK_INT(tls_conn_buffered(&c), 0);
    memset(rest, 0, sizeof(rest));

    /* a lent record read whole leaves nothing to copy: no buffer is taken */
    tls_conn_trim(&c);
    CHECK_INT(c.in.cap, 0);
    CHECK(SSL_write_ex(cl.ssl, "third", 5, &w) == 1);
    n = BIO_read(cl.wr, wire, sizeof(wire));
    CHECK_INT(tls_conn_lend(&c, wire, (size_t)n), 0);
    CHECK_INT(tls_conn_read(&c, got, sizeof(got)), 5);
    CHECK_MEM(got, 5, "third");
    CHECK_INT(tls_conn_read(&c, got, sizeof(got)), TLS_AGAIN);
    CHECK_INT(tls_conn_settle(&c), 0);
    CHECK_INT(c.in.cap, 0);
    exchange(&cl, &c);

    tls_conn_fini(&c);
    client_fini(&cl);
    one_teardown(&o);
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

/* Issue 40's hook (tls_ctx.h struct tls_ondemand): what it answers for the next name. */
struct od_hook {
    int answer; /* -EINPROGRESS, -EACCES, 1 (not on demand) or 0: x and k */
    X509 *x;
    EVP_PKEY *k;
    int calls;
    bool late_seen;
};

static int od_cert(void *arg, const char *name, bool late, X509 **x, STACK_OF(X509) * *chain,
                   EVP_PKEY **k)
{
    struct od_hook *h = arg;
    (void)name;
    h->calls++;
    h->late_seen = h->late_seen || late;
    if (h->answer != 0)
        return h->answer;
    X509_up_ref(h->x);
    EVP_PKEY_up_ref(h->k);
    *x = h->x;
    *k = h->k;
    *chain = NULL;
    return 0;
}

/* A name no pair covers parks the handshake (TLS_WAIT, nothing sent) while the hook says "ask
 * again", then completes with the hook's certificate (the connection is the SNI name's, as a
 * site's own pair makes it); a refusal, or "ask again" once late, is the alert; a name the
 * hook declines, or one a pair covers, goes on as before. */
TEST(tls_certificate_on_demand_parks_then_completes_or_refuses)
{
    struct one o;
    dir_make(&o.d);
    make_pair(&o.d, "a", "a.test", false, 0, 86400);
    make_pair(&o.d, "od", "od.test", false, 0, 86400);
    const char *names[] = {"a"};
    o.s = settings(&o.fs, &o.d, names, 1);
    struct od_hook h = {.answer = -EINPROGRESS};
    char p[256];
    snprintf(p, sizeof(p), "%s/od.crt", o.d.path);
    FILE *f = fopen(p, "r");
    CHECK(f && (h.x = PEM_read_X509(f, NULL, NULL, NULL)));
    fclose(f);
    snprintf(p, sizeof(p), "%s/od.key", o.d.path);
    f = fopen(p, "r");
    CHECK(f && (h.k = PEM_read_PrivateKey(f, NULL, NULL, NULL)));
    fclose(f);
    o.s.ondemand = (struct tls_ondemand){od_cert, &h};
    CHECK_INT(tls_keys_new(&o.k), 0);
    o.ctx = ctx_ok(&o.s, o.k);

    struct client cl;
    struct tls_conn c;
    client_init(&cl, 0, "od.test", NULL, 0);
    CHECK_INT(tls_conn_init(&c, o.ctx), 0);
    CHECK_INT(pump(&cl, &c), TLS_WAIT);
    CHECK_INT(tls_conn_pending(&c), 0);
    CHECK_INT(tls_conn_handshake(&c), TLS_WAIT); /* asked again: still waiting */
    h.answer = 0;
    CHECK_INT(pump(&cl, &c), 1);
    CHECK(peer_is(&cl, "od.test"));
    CHECK(tls_conn_site_name(&c) && strcmp(tls_conn_site_name(&c), "od.test") == 0);
    exchange(&cl, &c);
    CHECK_INT(h.calls, 3);
    tls_conn_fini(&c);
    client_fini(&cl);

    for (int late = 0; late < 2; late++) { /* refused; waiting past the deadline */
        h.answer = late ? -EINPROGRESS : -EACCES;
        client_init(&cl, 0, "no.test", NULL, 0);
        CHECK_INT(tls_conn_init(&c, o.ctx), 0);
        if (late) {
            CHECK_INT(pump(&cl, &c), TLS_WAIT);
            tls_conn_give_up(&c);
        }
        CHECK_INT(pump(&cl, &c), -EPROTO);
        CHECK(!SSL_is_init_finished(cl.ssl));
        CHECK(h.late_seen == (late == 1));
        tls_conn_fini(&c);
        client_fini(&cl);
    }

    h.calls = 0;
    h.answer = 1; /* not on demand: the default pair */
    for (int i = 0; i < 2; i++) {
        client_init(&cl, 0, i ? "a.test" : "other.test", NULL, 0);
        CHECK_INT(tls_conn_init(&c, o.ctx), 0);
        CHECK_INT(pump(&cl, &c), 1);
        CHECK(peer_is(&cl, "a.test"));
        tls_conn_fini(&c);
        client_fini(&cl);
    }
    CHECK_INT(h.calls, 1); /* a.test is covered: never asked */
    X509_free(h.x);
    EVP_PKEY_free(h.k);
    one_teardown(&o);
}

/* Every connection on a context reads and writes through the context's one BIO, pointed at
 * the connection before each call into OpenSSL (tls_record_bind). Six handshakes advanced one
 * flight at a time in turn (SNI choosing a.test or b.test, three sealing, three not), one
 * abandoned mid-handshake, then the answers and close_notify in another order: each client
 * gets its own certificate, bytes and alerts. */
TEST(tls_connections_share_the_context_bio_interleaved)
{
    struct dir d;
    dir_make(&d);
    make_pair(&d, "a", "a.test", false, 0, 86400);
    make_pair(&d, "b", "b.test", false, 0, 86400);
    struct files fs;
    const char *names[] = {"a", "b"};
    struct tls_settings set = settings(&fs, &d, names, 2);
    struct tls_keys *k;
    CHECK_INT(tls_keys_new(&k), 0);
    struct tls_ctx *ctx = ctx_ok(&set, k);
    enum { N = 6 };
    struct client cl[N];
    struct tls_conn s[N];
    int hs[N];
    for (int i = 0; i < N; i++) {
        client_init(&cl[i], i % 3 == 2 ? TLS1_2_VERSION : 0, i % 2 ? "b.test" : "a.test", NULL, 0);
        CHECK_INT(tls_conn_init(&s[i], ctx), 0);
        if (i < 3)
            tls_conn_seal_allow(&s[i]);
        hs[i] = TLS_AGAIN;
    }
    char buf[65536];
    for (int round = 0; round < 16; round++) {
        for (int i = 0; i < N; i++) {
            if (i == 4 && round == 1) { /* abandoned: SSL_free mid-handshake */
                tls_conn_fini(&s[i]);
                hs[i] = 0;
            }
            if (hs[i] != TLS_AGAIN)
                continue;
            SSL_do_handshake(cl[i].ssl);
            int n;
            while ((n = BIO_read(cl[i].wr, buf, sizeof(buf))) > 0)
                CHECK_INT(tls_conn_feed(&s[i], buf, (size_t)n), 0);
            hs[i] = tls_conn_handshake(&s[i]);
            size_t len;
            const void *p;
            while ((p = tls_conn_peek(&s[i], &len)), len > 0) {
                BIO_write(cl[i].rd, p, (int)len);
                tls_conn_consume(&s[i], len);
            }
        }
    }
    for (int i = N - 1; i >= 0; i--) {
        if (i == 4)
            continue;
        CHECK_INT(hs[i], 1);
        CHECK_INT(pump(&cl[i], &s[i]), 1); /* the client's side of its last flight */
        CHECK(peer_is(&cl[i], i % 2 ? "b.test" : "a.test"));
        CHECK_INT(tls_conn_sealing(&s[i]), i < 3);
        exchange(&cl[i], &s[i]);
    }
    for (int i = 0; i < N; i++) {
        if (i == 4)
            continue;
        tls_conn_close_notify(&s[i]);
    }
    for (int i = 0; i < N; i++) {
        if (i == 4)
            continue;
        pump(&cl[i], &s[i]);
        size_t r;
        CHECK_INT(SSL_read_ex(cl[i].ssl, buf, sizeof(buf), &r), 0);
        CHECK_INT(SSL_get_error(cl[i].ssl, 0), SSL_ERROR_ZERO_RETURN);
        tls_conn_fini(&s[i]);
        client_fini(&cl[i]);
    }
    client_fini(&cl[4]);
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
    size_t n = rules_plain_http_on_tls(answer, sizeof(answer), "Mon, 23 Nov 2026 10:00:00 GMT");
    CHECK(n > 0 && strncmp(answer, "HTTP/1.1 400 Bad Request\r\n", 26) == 0);
    CHECK(n > 0 && strstr(answer, "\r\nConnection: close\r\n"));
    CHECK(n > 0 && strstr(answer, "The plain HTTP request was sent to HTTPS port"));
    const char *body = strstr(answer, "\r\n\r\n");
    char want[48];
    snprintf(want, sizeof(want), "Content-Length: %zu\r\n", n - (size_t)(body + 4 - answer));
    CHECK(body && strstr(answer, want));
    CHECK_INT(rules_plain_http_on_tls(answer, 100, "x"), 0);

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

/* ---- kernel TLS: the keys and records handed over at the switch ------------------------- */

/* The ciphers the kernel takes, as engine/caps.h's probe reports them. */
#define KTLS_BIT(type) (1u << ((type)-TLS_CIPHER_AES_GCM_128))
#define KTLS_ALL                                                                                   \
    (KTLS_BIT(TLS_CIPHER_AES_GCM_128) | KTLS_BIT(TLS_CIPHER_AES_GCM_256) |                         \
     KTLS_BIT(TLS_CIPHER_CHACHA20_POLY1305))

/* Seals one record as the kernel would from the struct tls12_crypto_info_* OpenSSL handed over
 * (linux/tls.h), with record sequence number rec_seq + n; returns the record's length. The
 * client decrypting it proves the key, the IV and the sequence number. */
static size_t kernel_seal(const unsigned char *info, uint64_t n, uint8_t type, const void *data,
                          size_t len, unsigned char *out)
{
    const struct tls_crypto_info *ci = (const void *)info;
    const unsigned char *key, *iv, *salt = NULL, *rec_seq;
    const EVP_CIPHER *cipher;
    size_t iv_len = 8;
    if (ci->cipher_type == TLS_CIPHER_CHACHA20_POLY1305) {
        const struct tls12_crypto_info_chacha20_poly1305 *k = (const void *)info;
        key = k->key, iv = k->iv, rec_seq = k->rec_seq, iv_len = 12;
        cipher = EVP_chacha20_poly1305();
    } else if (ci->cipher_type == TLS_CIPHER_AES_GCM_256) {
        const struct tls12_crypto_info_aes_gcm_256 *k = (const void *)info;
        key = k->key, iv = k->iv, salt = k->salt, rec_seq = k->rec_seq;
        cipher = EVP_aes_256_gcm();
    } else {
        CHECK_INT(ci->cipher_type, TLS_CIPHER_AES_GCM_128);
        const struct tls12_crypto_info_aes_gcm_128 *k = (const void *)info;
        key = k->key, iv = k->iv, salt = k->salt, rec_seq = k->rec_seq;
        cipher = EVP_aes_128_gcm();
    }
    uint64_t seq = n;
    for (int i = 0; i < 8; i++)
        seq += (uint64_t)rec_seq[i] << (56 - 8 * i);
    unsigned char seq_be[8], nonce[12], aad[13];
    for (int i = 0; i < 8; i++)
        seq_be[i] = (unsigned char)(seq >> (56 - 8 * i));
    bool tls13 = ci->version == TLS_1_3_VERSION;
    size_t explicit_len = !tls13 && salt ? 8 : 0; /* TLS 1.2 GCM sends its nonce's last 8 */
    if (salt) {
        memcpy(nonce, salt, 4);
        memcpy(nonce + 4, iv, 8);
    } else {
        memcpy(nonce, iv, iv_len);
    }
    if (!explicit_len)
        for (int i = 0; i < 8; i++)
            nonce[4 + i] ^= seq_be[i];
    unsigned char inner[16384 + 1];
    memcpy(inner, data, len);
    size_t inner_len = len;
    if (tls13)
        inner[inner_len++] = type; /* TLSInnerPlaintext: content, then its real type */
    size_t body = explicit_len + inner_len + 16;
    out[0] = tls13 ? 23 : type;
    out[1] = 3, out[2] = 3;
    out[3] = (unsigned char)(body >> 8), out[4] = (unsigned char)body;
    memcpy(out + 5, nonce + 4, explicit_len);
    size_t aad_len = 5;
    if (tls13) {
        memcpy(aad, out, 5);
    } else {
        memcpy(aad, seq_be, 8);
        aad[8] = type, aad[9] = 3, aad[10] = 3;
        aad[11] = (unsigned char)(len >> 8), aad[12] = (unsigned char)len;
        aad_len = 13;
    }
    EVP_CIPHER_CTX *e = EVP_CIPHER_CTX_new();
    int outl;
    CHECK(EVP_EncryptInit_ex(e, cipher, NULL, key, nonce) == 1);
    CHECK(EVP_EncryptUpdate(e, NULL, &outl, aad, (int)aad_len) == 1);
    unsigned char *ct = out + 5 + explicit_len;
    CHECK(EVP_EncryptUpdate(e, ct, &outl, inner, (int)inner_len) == 1);
    CHECK(EVP_EncryptFinal_ex(e, ct + outl, &outl) == 1);
    CHECK(EVP_CIPHER_CTX_ctrl(e, EVP_CTRL_AEAD_GET_TAG, 16, ct + inner_len) == 1);
    EVP_CIPHER_CTX_free(e);
    return 5 + body;
}

/* Seals every record the server owes with the kernel's rules (sequence numbers from *n on) and
 * gives them to the client. */
static void kernel_send(struct client *cl, struct tls_conn *s, const unsigned char *keys,
                        uint64_t *n, uint8_t *first_type)
{
    const void *p;
    uint8_t type;
    size_t len;
    unsigned char rec[16384 + 64];
    while ((p = tls_conn_record(s, &type, &len))) {
        if (first_type && !*first_type)
            *first_type = type;
        size_t rl = kernel_seal(keys, (*n)++, type, p, len, rec);
        BIO_write(cl->rd, rec, (int)rl);
        tls_conn_record_sent(s);
    }
}

/* A client that offers only `cipher` (a TLS 1.2 cipher list or a TLS 1.3 suite) for `version`,
 * resuming `resume` if given, and a fresh server side; cipher_pair_end answers the client's
 * close_notify (a session ended without it is not resumable), frees both and returns the
 * client's session. */
static void cipher_pair(struct client *cl, struct tls_conn *s, struct one *o, int version,
                        const char *cipher, SSL_SESSION *resume)
{
    client_init(cl, version, "a.test", "\x08http/1.1", 9);
    if (version == TLS1_3_VERSION)
        CHECK(SSL_set_ciphersuites(cl->ssl, cipher) == 1);
    else
        CHECK(SSL_set_cipher_list(cl->ssl, cipher) == 1);
    if (resume)
        CHECK(SSL_set_session(cl->ssl, resume) == 1);
    CHECK_INT(tls_conn_init(s, o->ctx), 0);
}

static SSL_SESSION *cipher_pair_end(struct client *cl, struct tls_conn *s)
{
    SSL_shutdown(cl->ssl);
    SSL_SESSION *sess = SSL_get1_session(cl->ssl);
    tls_conn_fini(s);
    client_fini(cl);
    return sess;
}

/* One connection switched to kernel TLS: version, the client's only cipher (TLS 1.2 list or
 * TLS 1.3 suite), the cipher_type the keys must name, and the first record's type after the
 * switch (TLS 1.2: the server's Finished; 1.3: its ticket). Returns the client's session. */
static SSL_SESSION *ktls_case(struct one *o, int version, const char *cipher, int want_cipher,
                              SSL_SESSION *resume)
{
    struct client cl;
    struct tls_conn s;
    cipher_pair(&cl, &s, o, version, cipher, resume);
    tls_conn_ktls_allow(&s, KTLS_ALL);
    /* 1 once done, TLS_AGAIN for a resumed TLS 1.2 handshake (the client needs the server's
     * Finished, which comes after the switch) */
    int hs = pump(&cl, &s);
    CHECK_INT(tls_conn_pending(&s), 0); /* what was sealed under the old keys reached the client */
    CHECK_INT(tls_conn_ktls(&s), TLS_KTLS_KEYS);
    CHECK(tls_conn_owes(&s));
    size_t klen;
    const void *k = tls_conn_ktls_keys(&s, &klen);
    CHECK(k != NULL);
    unsigned char keys[TLS_KTLS_KEYS_MAX];
    memcpy(keys, k, klen);
    const struct tls_crypto_info *ci = (const void *)keys;
    CHECK_INT(ci->version, version == TLS1_3_VERSION ? TLS_1_3_VERSION : TLS_1_2_VERSION);
    CHECK_INT(ci->cipher_type, want_cipher);
    tls_conn_ktls_installed(&s);
    CHECK_INT(tls_conn_ktls(&s), TLS_KTLS_ON);
    CHECK(tls_conn_ktls_keys(&s, &klen) == NULL);

    uint64_t n = 0;
    uint8_t first = 0;
    kernel_send(&cl, &s, keys, &n, &first);
    /* TLS 1.2: the server's Finished; 1.3: its ticket (none when a ticket resumed: this
     * server renews a ticket only when the previous key period's made it) */
    CHECK_INT(first, version == TLS1_3_VERSION && resume ? 0 : 22);
    if (hs != 1)
        hs = pump(&cl, &s);
    CHECK_INT(hs, 1);
    CHECK_INT(tls_conn_resumed(&s), resume != NULL);

    /* A request in user space, the answer sealed by "the kernel" after the server's records. */
    static const char req[] = "GET / HTTP/1.1\r\n\r\n";
    size_t w;
    CHECK(SSL_write_ex(cl.ssl, req, sizeof(req) - 1, &w) == 1);
    pump(&cl, &s);
    char got[64];
    CHECK_INT(tls_conn_read(&s, got, sizeof(got)), sizeof(req) - 1);
    CHECK(memcmp(got, req, sizeof(req) - 1) == 0);
    struct iovec iov = {(void *)"x", 1};
    char out[256];
    size_t out_len = 0;
    CHECK_INT(tls_conn_seal(&s, &iov, 1, out, sizeof(out), &out_len), -EPROTO);
    kernel_send(&cl, &s, keys, &n, NULL); /* nothing, or a ticket the read made */
    unsigned char rec[256];
    size_t rl = kernel_seal(keys, n++, 23, "hello", 5, rec);
    BIO_write(cl.rd, rec, (int)rl);
    char back[16];
    size_t r = 0;
    CHECK(SSL_read_ex(cl.ssl, back, sizeof(back), &r) == 1);
    CHECK_MEM(back, r, "hello");
    CHECK(SSL_is_init_finished(cl.ssl));

    /* close_notify: an alert record of two bytes, which the client takes as the end. */
    tls_conn_close_notify(&s);
    uint8_t type;
    size_t len;
    const unsigned char *p = tls_conn_record(&s, &type, &len);
    CHECK(p != NULL);
    CHECK_INT(type, 21);
    CHECK_INT(len, 2);
    CHECK(p && p[0] == 1 && p[1] == 0);
    kernel_send(&cl, &s, keys, &n, NULL);
    CHECK_INT(SSL_read_ex(cl.ssl, back, sizeof(back), &r), 0);
    CHECK_INT(SSL_get_error(cl.ssl, 0), SSL_ERROR_ZERO_RETURN);
    CHECK(!tls_conn_owes(&s));

    return cipher_pair_end(&cl, &s);
}

/* The version and cipher pairs kernel TLS and the sealer take: TLS 1.2 cipher list or TLS 1.3
 * suite (also the name the session reports), and the kernel's cipher type. */
static const struct {
    int version;
    const char *cipher;
    int type;
} CIPHER_CASES[] = {
    {TLS1_2_VERSION, "ECDHE-ECDSA-AES128-GCM-SHA256", TLS_CIPHER_AES_GCM_128},
    {TLS1_2_VERSION, "ECDHE-ECDSA-AES256-GCM-SHA384", TLS_CIPHER_AES_GCM_256},
    {TLS1_2_VERSION, "ECDHE-ECDSA-CHACHA20-POLY1305", TLS_CIPHER_CHACHA20_POLY1305},
    {TLS1_3_VERSION, "TLS_AES_128_GCM_SHA256", TLS_CIPHER_AES_GCM_128},
    {TLS1_3_VERSION, "TLS_AES_256_GCM_SHA384", TLS_CIPHER_AES_GCM_256},
    {TLS1_3_VERSION, "TLS_CHACHA20_POLY1305_SHA256", TLS_CIPHER_CHACHA20_POLY1305},
};

/* Every cipher kernel TLS takes, in TLS 1.2 and 1.3, full and resumed (TLS 1.2's abbreviated
 * handshake has the server's Finished first, under the new keys). */
TEST(tls_ktls_keys_and_records_decrypt)
{
    struct one o;
    one_setup(&o);
    for (size_t i = 0; i < sizeof(CIPHER_CASES) / sizeof(CIPHER_CASES[0]); i++) {
        int v = CIPHER_CASES[i].version;
        const char *cipher = CIPHER_CASES[i].cipher;
        SSL_SESSION *sess = ktls_case(&o, v, cipher, CIPHER_CASES[i].type, NULL);
        CHECK(sess != NULL && SSL_SESSION_is_resumable(sess));
        SSL_SESSION_free(ktls_case(&o, v, cipher, CIPHER_CASES[i].type, sess));
        SSL_SESSION_free(sess);
    }
    one_teardown(&o);
}

/* Without tls_conn_ktls_allow, or when the cipher chosen is not one the kernel took (here the
 * client's first choice, AES-256-GCM, with only AES-128-GCM allowed), OpenSSL encrypts. */
TEST(tls_ktls_not_allowed_stays_in_user_space)
{
    struct one o;
    one_setup(&o);
    for (int allow = 0; allow < 2; allow++) {
        struct client cl;
        client_init(&cl, 0, "a.test", "\x08http/1.1", 9);
        struct tls_conn s;
        CHECK_INT(tls_conn_init(&s, o.ctx), 0);
        if (allow)
            tls_conn_ktls_allow(&s, KTLS_BIT(TLS_CIPHER_AES_GCM_128));
        CHECK_INT(pump(&cl, &s), 1);
        CHECK(strcmp(tls_conn_cipher(&s), "TLS_AES_256_GCM_SHA384") == 0);
        CHECK_INT(tls_conn_ktls(&s), TLS_KTLS_NO);
        uint8_t type;
        size_t len;
        CHECK(tls_conn_record(&s, &type, &len) == NULL);
        exchange(&cl, &s);
        tls_conn_fini(&s);
        client_fini(&cl);
    }
    one_teardown(&o);
}

/* A TLS 1.3 client asking for a KeyUpdate: the kernel (6.1) cannot take new keys, and
 * OpenSSL would answer only on its next SSL_write, which never comes after the switch. The
 * connection reports TLS_KTLS_BROKEN (the caller sends no more application data) and
 * close_notify, which the current keys may still seal, reaches the client. */
TEST(tls_ktls_key_update_stops_the_send_side)
{
    struct one o;
    one_setup(&o);
    for (int ours = 0; ours < 2; ours++) {
        struct client cl;
        client_init(&cl, TLS1_3_VERSION, "a.test", NULL, 0);
        struct tls_conn s;
        CHECK_INT(tls_conn_init(&s, o.ctx), 0);
        tls_conn_ktls_allow(&s, KTLS_ALL);
        CHECK_INT(pump(&cl, &s), 1);
        size_t klen;
        const void *k = tls_conn_ktls_keys(&s, &klen);
        CHECK(k != NULL);
        if (!k)
            return;
        unsigned char keys[TLS_KTLS_KEYS_MAX];
        memcpy(keys, k, klen);
        tls_conn_ktls_installed(&s);
        uint64_t n = 0;
        kernel_send(&cl, &s, keys, &n, NULL);
        char buf[64];
        size_t r;
        CHECK(SSL_read_ex(cl.ssl, buf, sizeof(buf), &r) == 0); /* takes the ticket */
        uint8_t type;
        size_t len;
        if (ours) {
            /* the guard: a KeyUpdate OpenSSL writes itself, and all after it, is dropped */
            CHECK(SSL_key_update(s.ssl, SSL_KEY_UPDATE_NOT_REQUESTED) == 1);
            CHECK(SSL_write_ex(s.ssl, "x", 1, &r) == 1);
            CHECK_INT(tls_conn_ktls(&s), TLS_KTLS_BROKEN);
            CHECK(tls_conn_record(&s, &type, &len) == NULL);
            tls_conn_close_notify(&s);
            CHECK(tls_conn_record(&s, &type, &len) == NULL);
        } else {
            CHECK(SSL_key_update(cl.ssl, SSL_KEY_UPDATE_REQUESTED) == 1);
            CHECK(SSL_write_ex(cl.ssl, "GET / HTTP/1.1\r\n\r\n", 18, &r) == 1);
            pump(&cl, &s);
            CHECK_INT(tls_conn_read(&s, buf, sizeof(buf)), 18);
            CHECK_INT(tls_conn_ktls(&s), TLS_KTLS_BROKEN);
            CHECK(tls_conn_owes(&s));
            CHECK(tls_conn_record(&s, &type, &len) == NULL); /* no KeyUpdate of ours */
            tls_conn_close_notify(&s);
            CHECK(tls_conn_record(&s, &type, &len) != NULL);
            CHECK_INT(type, 21);
            kernel_send(&cl, &s, keys, &n, NULL);
            CHECK_INT(SSL_read_ex(cl.ssl, buf, sizeof(buf), &r), 0);
            CHECK_INT(SSL_get_error(cl.ssl, 0), SSL_ERROR_ZERO_RETURN);
        }
        tls_conn_fini(&s);
        client_fini(&cl);
    }
    one_teardown(&o);
}

/* ---- the sealer: records sealed by tls.c with the keys OpenSSL hands over --------------- */

/* One connection with the sealer: the handshake, a small answer from three segments, 200000
 * bytes through a small buffer (records cut to fit), close_notify; every record decrypted by
 * an OpenSSL client, which proves the key, the nonce and the sequence numbers (OpenSSL's own
 * records, the ticket or TLS 1.2's Finished, share them). Returns the client's session. */
static SSL_SESSION *seal_case(struct one *o, int version, const char *cipher, const char *want,
                              SSL_SESSION *resume)
{
    struct client cl;
    struct tls_conn s;
    cipher_pair(&cl, &s, o, version, cipher, resume);
    tls_conn_seal_allow(&s);
    CHECK_INT(pump(&cl, &s), 1);
    CHECK(tls_conn_sealing(&s));
    CHECK_INT(tls_conn_ktls(&s), TLS_KTLS_NO);
    CHECK(strcmp(tls_conn_cipher(&s), want) == 0);
    CHECK_INT(tls_conn_resumed(&s), resume != NULL);
    exchange(&cl, &s);
    /* Idle: the cipher context goes (an idle connection's 1.2 KB), the key stays; every
     * record after it (remade context) still decrypts, sequence numbers going on. */
    CHECK(s.seal_ctx != NULL);
    CHECK(tls_conn_idle(&s));
    CHECK(s.seal_ctx == NULL);
    CHECK(!tls_conn_idle(&s));

    enum { TOTAL = 200000, CAP = 6000 };
    char *data = malloc(TOTAL), *got = malloc(TOTAL);
    CHECK(data && got);
    for (int i = 0; i < TOTAL; i++)
        data[i] = (char)(i * 13 + i / 509);
    size_t sent = 0, received = 0;
    for (int calls = 0; sent < TOTAL && calls < 1000; calls++) {
        char out[CAP];
        size_t out_len = 0;
        struct iovec iov[2] = {{data + sent, (TOTAL - sent) / 3}, {0, 0}};
        iov[1].iov_base = data + sent + iov[0].iov_len; /* records across two segments */
        iov[1].iov_len = TOTAL - sent - iov[0].iov_len;
        ssize_t n = tls_conn_seal(&s, iov, 2, out, sizeof(out), &out_len);
        CHECK(n > 0 && out_len <= CAP && out_len > (size_t)n);
        if (n <= 0)
            break;
        sent += (size_t)n;
        BIO_write(cl.rd, out, (int)out_len);
        size_t r;
        while (SSL_read_ex(cl.ssl, got + received, TOTAL - received, &r) == 1)
            received += r;
        if (calls % 5 == 2)
            CHECK(tls_conn_idle(&s));
    }
    CHECK_INT(received, TOTAL);
    CHECK(memcmp(data, got, TOTAL) == 0);
    /* full records with room: TLS 1.3 adds 22 bytes a record, 1.2 GCM 29, 1.2 ChaCha20 21 */
    size_t big = TOTAL + 13 * TLS_RECORD_OVERHEAD, out_len = 0;
    char *out = malloc(big);
    struct iovec iov = {data, TOTAL};
    CHECK_INT(tls_conn_seal(&s, &iov, 1, out, big, &out_len), TOTAL);
    size_t per = version == TLS1_3_VERSION ? 22 : strstr(cipher, "CHACHA") ? 21 : 29;
    CHECK_INT(out_len, TOTAL + 13 * per);
    if (per == 29) {
        /* TLS 1.2 GCM: the explicit nonce travels in the record, so any value decrypts; it
         * must still never repeat under a key (here: it is the sequence number, going up) */
        unsigned char last[8] = {0};
        for (size_t at = 0, k = 0; at < out_len; k++) {
            const unsigned char *h = (const unsigned char *)out + at;
            CHECK(k == 0 || memcmp(h + 5, last, 8) > 0);
            memcpy(last, h + 5, 8);
            at += 5 + ((size_t)h[3] << 8 | h[4]);
        }
    }
    BIO_write(cl.rd, out, (int)out_len);
    received = 0;
    size_t r;
    while (SSL_read_ex(cl.ssl, got + received, TOTAL - received, &r) == 1)
        received += r;
    CHECK_INT(received, TOTAL);
    CHECK(memcmp(data, got, TOTAL) == 0);
    free(out);
    free(data);
    free(got);

    tls_conn_idle(&s); /* OpenSSL's own record (close_notify) after an idle period */
    tls_conn_close_notify(&s);
    CHECK(tls_conn_pending(&s) > 0);
    pump(&cl, &s);
    char back[16];
    CHECK_INT(SSL_read_ex(cl.ssl, back, sizeof(back), &r), 0);
    CHECK_INT(SSL_get_error(cl.ssl, 0), SSL_ERROR_ZERO_RETURN);
    CHECK(!tls_conn_owes(&s));
    return cipher_pair_end(&cl, &s);
}

TEST(tls_sealer_records_decrypt_for_each_version_and_cipher)
{
    struct one o;
    one_setup(&o);
    for (size_t i = 0; i < sizeof(CIPHER_CASES) / sizeof(CIPHER_CASES[0]); i++) {
        int v = CIPHER_CASES[i].version;
        const char *cipher = CIPHER_CASES[i].cipher;
        SSL_SESSION *sess = seal_case(&o, v, cipher, cipher, NULL);
        CHECK(sess != NULL && SSL_SESSION_is_resumable(sess));
        SSL_SESSION_free(seal_case(&o, v, cipher, cipher, sess));
        SSL_SESSION_free(sess);
    }
    one_teardown(&o);
}

/* A connection's first TLS_RECORD_WARM bytes go in records of TLS_RECORD_SMALL (one TCP
 * segment each), then records are whole; after tls_conn_rested they are small again. Both
 * sealers (OpenSSL's and ours); TLS 1.3 AES-128-GCM adds 17 bytes a record. */
TEST(tls_records_start_small_and_again_after_a_rest)
{
    struct one o;
    one_setup(&o);
    enum { TOTAL = 100000 };
    char *data = malloc(TOTAL), *got = malloc(TOTAL);
    size_t cap = TOTAL + 128 * TLS_RECORD_OVERHEAD;
    unsigned char *out = malloc(cap);
    CHECK(data && got && out);
    for (int i = 0; i < TOTAL; i++)
        data[i] = (char)(i * 7 + i / 251);
    for (int own = 0; own < 2; own++) {
        struct client cl;
        struct tls_conn s;
        cipher_pair(&cl, &s, &o, TLS1_3_VERSION, "TLS_AES_128_GCM_SHA256", NULL);
        if (own)
            tls_conn_seal_allow(&s);
        CHECK_INT(pump(&cl, &s), 1);
        CHECK_INT(tls_conn_sealing(&s), own);
        exchange(&cl, &s); /* 43 bytes sealed: the warm-up has begun */
        size_t warm = 43;
        for (int round = 0; round < 2; round++) {
            size_t out_len = 0, small = 0, whole = 0;
            struct iovec iov = {data, TOTAL};
            CHECK_INT(tls_conn_seal(&s, &iov, 1, (char *)out, cap, &out_len), TOTAL);
            for (size_t at = 0; at + 5 <= out_len;) {
                size_t len = (size_t)out[at + 3] << 8 | out[at + 4], plain = len - 17;
                CHECK_INT(out[at], 23);
                if (warm < TLS_RECORD_WARM) {
                    CHECK_INT(plain, TLS_RECORD_SMALL);
                    small++;
                } else {
                    CHECK(plain == TLS_RECORD_PLAIN || at + 5 + len == out_len);
                    whole++;
                }
                warm += plain;
                at += 5 + len;
            }
            CHECK(small >= 31 && whole >= 3);
            BIO_write(cl.rd, out, (int)out_len);
            size_t received = 0, r;
            while (SSL_read_ex(cl.ssl, got + received, TOTAL - received, &r) == 1)
                received += r;
            CHECK_INT(received, TOTAL);
            CHECK(memcmp(data, got, TOTAL) == 0);
            tls_conn_rested(&s);
            warm = 0;
        }
        SSL_SESSION_free(cipher_pair_end(&cl, &s));
    }
    free(data);
    free(got);
    free(out);
    one_teardown(&o);
}

/* Kernel TLS, where allowed and the kernel takes the cipher, comes before the sealer. */
TEST(tls_sealer_yields_to_ktls)
{
    struct one o;
    one_setup(&o);
    struct client cl;
    client_init(&cl, TLS1_3_VERSION, "a.test", NULL, 0);
    struct tls_conn s;
    CHECK_INT(tls_conn_init(&s, o.ctx), 0);
    tls_conn_ktls_allow(&s, KTLS_ALL);
    tls_conn_seal_allow(&s);
    CHECK_INT(pump(&cl, &s), 1);
    CHECK_INT(tls_conn_ktls(&s), TLS_KTLS_KEYS);
    CHECK(!tls_conn_sealing(&s));
    tls_conn_fini(&s);
    client_fini(&cl);
    one_teardown(&o);
}

/* A TLS 1.3 client asking for a KeyUpdate: the sealer does not derive new keys; the request it
 * came with is read, then close_notify (sealed with the current keys, which the client still
 * reads with) is queued, no more application data is sealed, and reading ends. */
TEST(tls_sealer_key_update_request_ends_with_close_notify)
{
    struct one o;
    one_setup(&o);
    struct client cl;
    client_init(&cl, TLS1_3_VERSION, "a.test", NULL, 0);
    struct tls_conn s;
    CHECK_INT(tls_conn_init(&s, o.ctx), 0);
    tls_conn_seal_allow(&s);
    CHECK_INT(pump(&cl, &s), 1);
    exchange(&cl, &s);
    CHECK(tls_conn_idle(&s)); /* the close_notify below remakes the context */
    size_t r;
    char buf[64];
    CHECK(SSL_key_update(cl.ssl, SSL_KEY_UPDATE_REQUESTED) == 1);
    CHECK(SSL_write_ex(cl.ssl, "GET / HTTP/1.1\r\n\r\n", 18, &r) == 1);
    pump(&cl, &s);
    CHECK_INT(tls_conn_read(&s, buf, sizeof(buf)), 18);
    CHECK_INT(tls_conn_read(&s, buf, sizeof(buf)), -EPROTO);
    CHECK(tls_conn_owes(&s));
    struct iovec iov = {(void *)"late", 4};
    char out[256];
    size_t out_len = 0;
    CHECK_INT(tls_conn_seal(&s, &iov, 1, out, sizeof(out), &out_len), -ESHUTDOWN);
    CHECK_INT(out_len, 0);
    pump(&cl, &s);
    CHECK_INT(SSL_read_ex(cl.ssl, buf, sizeof(buf), &r), 0);
    CHECK_INT(SSL_get_error(cl.ssl, 0), SSL_ERROR_ZERO_RETURN);
    tls_conn_fini(&s);
    client_fini(&cl);
    one_teardown(&o);
}
