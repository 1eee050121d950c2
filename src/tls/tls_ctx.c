/* TLS contexts: one OpenSSL context per certificate group of a set (tls_certs.c), SNI and ALPN
 * callbacks, session tickets; see tls_ctx.h. */
#include "tls/tls_ctx.h"
#include "tls/tls_int.h"

#include <fcntl.h>
#include <unistd.h>

#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/rand.h>
#include <openssl/x509v3.h>

/* Mozilla's server-side TLS guidelines, "intermediate" (v5.7): TLS 1.2 suites with forward
 * secrecy and AEAD only; TLS 1.3 keeps OpenSSL's three suites. DHE uses the RFC 7919 group
 * OpenSSL picks for the certificate's strength (SSL_CTX_set_dh_auto). */
static const char intermediate_ciphers[] =
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
    "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
    "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305:"
    "DHE-RSA-AES128-GCM-SHA256:DHE-RSA-AES256-GCM-SHA384:DHE-RSA-CHACHA20-POLY1305";
static const char tls13_suites[] =
    "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256";
/* Key exchange groups (--tls-groups): the hybrid post-quantum one first where the linked
 * OpenSSL has it (3.5 and later; Debian 12's 3.0 has not), as browsers and Cloudflare offer. */
static const char kx_classic[] = "X25519:P-256:P-384";
static const char kx_hybrid[] = "X25519MLKEM768:X25519:P-256:P-384";

/* ALPN in wire format, server preference first. */
static const unsigned char alpn_http1[] = "\x08http/1.1";
static const unsigned char alpn_h2_http1[] = "\x02h2\x08http/1.1";
static const unsigned char alpn_acme[] = "\x0a"
                                         "acme-tls/1"; /* RFC 8737 6.2 */

struct tls_keys {
    unsigned char secret[32];
};

struct ticket_key {
    unsigned char name[16];
    unsigned char aes[32];  /* AES-256-CBC, as OpenSSL's own ticket keys (16: AES-128-CBC) */
    unsigned char hmac[32]; /* HMAC-SHA256 */
    unsigned char aes_len, hmac_len;
};

#define TICKET_FILES_MAX 16

struct tls_ctx {
    unsigned refs; /* the owner's one, plus one per connection: the worker's thread only */
    struct tls_challenge challenge;
    struct tls_ondemand ondemand;
    struct tls_certs *certs; /* a reference of its own */
    BIO_METHOD *bio;
    /* The one BIO every connection's SSL reads and writes through, pointed at the connection
     * before each call into OpenSSL (tls_record_bind): the worker's thread makes one call at a
     * time, and a BIO of its own (with its lock) cost every connection 208 bytes. */
    BIO *wire;
    const struct tls_keys *keys;
    bool alpn_h2;
    unsigned rotate;
    int64_t period; /* of cur; prev is period - 1 */
    struct ticket_key cur, prev;
    struct ticket_key *file_keys; /* --ticket-key-file's, the first encrypting; or NULL */
    int num_file_keys;
};

int tls_keys_new(struct tls_keys **out)
{
    struct tls_keys *k = calloc(1, sizeof(*k));
    if (!k)
        return -ENOMEM;
    if (RAND_priv_bytes(k->secret, sizeof(k->secret)) != 1) {
        ERR_clear_error();
        free(k);
        return -EIO;
    }
    *out = k;
    return 0;
}

void tls_keys_free(struct tls_keys *keys)
{
    if (keys)
        OPENSSL_cleanse(keys->secret, sizeof(keys->secret));
    free(keys);
}

/* ---- tickets ---------------------------------------------------------------------------- */

/* The key of a period, a function of the secret and the period only, so every worker (and every
 * context a reload makes) derives the same one without sharing anything mutable. */
static int derive_key(const struct tls_keys *keys, int64_t period, struct ticket_key *k)
{
    unsigned char msg[24], mac[64];
    size_t mac_len;
    memcpy(msg, "ringhttpd ticket", 16);
    for (int i = 0; i < 8; i++)
        msg[16 + i] = (unsigned char)((uint64_t)period >> (56 - 8 * i));
    if (!EVP_Q_mac(NULL, "HMAC", NULL, "SHA512", NULL, keys->secret, sizeof(keys->secret), msg,
                   sizeof(msg), mac, sizeof(mac), &mac_len))
        return -EIO;
    memcpy(k->aes, mac, 32);
    memcpy(k->hmac, mac + 32, 32);
    k->aes_len = k->hmac_len = 32;
    memcpy(msg, "ringhttpd tkname", 16);
    if (!EVP_Q_mac(NULL, "HMAC", NULL, "SHA256", NULL, keys->secret, sizeof(keys->secret), msg,
                   sizeof(msg), mac, sizeof(mac), &mac_len))
        return -EIO;
    memcpy(k->name, mac, 16);
    OPENSSL_cleanse(mac, sizeof(mac));
    return 0;
}

/* One --ticket-key-file into k: 0, or -errno with the reason in why. */
static int read_ticket_file(const char *path, struct ticket_key *k, char *why, size_t why_len)
{
    unsigned char buf[81];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int rc = -errno;
        snprintf(why, why_len, "--ticket-key-file '%s': %s", path, strerror(-rc));
        return rc;
    }
    ssize_t n = read(fd, buf, sizeof(buf));
    int rc = n < 0 ? -errno : 0;
    close(fd);
    if (rc == 0 && n != 48 && n != 80)
        rc = -EINVAL;
    if (rc != 0) {
        snprintf(why, why_len,
                 "--ticket-key-file '%s': %s (48 or 80 bytes, nginx's ssl_session_ticket_key "
                 "format: `openssl rand 80 > FILE`)",
                 path, rc == -EINVAL ? "wrong size" : strerror(-rc));
        OPENSSL_cleanse(buf, sizeof(buf));
        return rc;
    }
    memcpy(k->name, buf, 16);
    if (n == 80) { /* name, HMAC key, AES key: as nginx reads it */
        memcpy(k->hmac, buf + 16, 32);
        memcpy(k->aes, buf + 48, 32);
        k->aes_len = k->hmac_len = 32;
    } else { /* name, AES-128 key, HMAC key */
        memcpy(k->aes, buf + 16, 16);
        memcpy(k->hmac, buf + 32, 16);
        k->aes_len = k->hmac_len = 16;
    }
    OPENSSL_cleanse(buf, sizeof(buf));
    return 0;
}

static int read_ticket_files(struct tls_ctx *ctx, const struct tls_settings *s, char *why,
                             size_t why_len)
{
    if (s->num_ticket_key_files <= 0)
        return 0;
    if (s->num_ticket_key_files > TICKET_FILES_MAX) {
        snprintf(why, why_len, "--ticket-key-file: at most %d files", TICKET_FILES_MAX);
        return -EINVAL;
    }
    if (!(ctx->file_keys = calloc((size_t)s->num_ticket_key_files, sizeof(*ctx->file_keys)))) {
        snprintf(why, why_len, "out of memory");
        return -ENOMEM;
    }
    ctx->num_file_keys = s->num_ticket_key_files;
    for (int i = 0; i < s->num_ticket_key_files; i++) {
        int rc = read_ticket_file(s->ticket_key_files[i], &ctx->file_keys[i], why, why_len);
        if (rc != 0)
            return rc;
    }
    return 0;
}

void tls_ctx_set_time(struct tls_ctx *ctx, int64_t wall)
{
    int64_t period = wall / ctx->rotate;
    if (ctx->num_file_keys || period == ctx->period)
        return;
    /* A failed derivation leaves keys no ticket matches, and full handshakes go on. */
    if (derive_key(ctx->keys, period, &ctx->cur) != 0 ||
        derive_key(ctx->keys, period - 1, &ctx->prev) != 0) {
        ERR_clear_error();
        memset(&ctx->cur, 0, sizeof(ctx->cur));
        memset(&ctx->prev, 0, sizeof(ctx->prev));
    }
    ctx->period = period;
}

/* The --ticket-key-file key named name, or NULL. */
static const struct ticket_key *file_key(const struct tls_ctx *ctx, const unsigned char *name)
{
    for (int i = 0; i < ctx->num_file_keys; i++)
        if (memcmp(name, ctx->file_keys[i].name, 16) == 0)
            return &ctx->file_keys[i];
    return NULL;
}

/* The connection a callback runs for is the BIO's data (tls_record_bind, before the handshake
 * step that called the callback): SSL_set_app_data would cost every connection an ex_data
 * stack, two allocations (~96 bytes) kept while it lives. Its context is the worker's: the
 * OpenSSL contexts are every worker's (struct tls_certs), so no callback argument can be. */
static struct tls_conn *conn_of(SSL *ssl)
{
    return BIO_get_data(SSL_get_rbio(ssl));
}

static int ticket_cb(SSL *ssl, unsigned char name[16], unsigned char *iv, EVP_CIPHER_CTX *cctx,
                     EVP_MAC_CTX *hctx, int enc)
{
    struct tls_ctx *ctx = conn_of(ssl)->ctx;
    const struct ticket_key *k = NULL;
    int rc = 1;
    if (ctx->num_file_keys) {
        k = enc ? &ctx->file_keys[0] : file_key(ctx, name);
        if (!k)
            return 0; /* unknown key: a full handshake */
        if (k != &ctx->file_keys[0])
            rc = 2; /* good, but issue a ticket under the first file's key */
    } else if (enc || memcmp(name, ctx->cur.name, 16) == 0) {
        k = &ctx->cur;
    } else if (memcmp(name, ctx->prev.name, 16) == 0) {
        k = &ctx->prev;
        rc = 2; /* good, but issue a ticket under the current key */
    } else {
        return 0; /* unknown key: a full handshake */
    }
    if (enc) {
        if (RAND_bytes(iv, 16) != 1)
            return -1;
        memcpy(name, k->name, 16);
    }
    OSSL_PARAM params[] = {
        OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, (char *)"SHA256", 0),
        OSSL_PARAM_construct_end(),
    };
    if (!EVP_MAC_init(hctx, k->hmac, k->hmac_len, params))
        return -1;
    const EVP_CIPHER *cipher = k->aes_len == 16 ? EVP_aes_128_cbc() : EVP_aes_256_cbc();
    if (enc ? !EVP_EncryptInit_ex(cctx, cipher, NULL, k->aes, iv)
            : !EVP_DecryptInit_ex(cctx, cipher, NULL, k->aes, iv))
        return -1;
    return rc;
}

/* ---- sum indices ------------------------------------------------------------------------ */

/* ---- SNI and ALPN ----------------------------------------------------------------------- */

/* The group a ClientHello's name gets: a site's own (exact, else the longest wildcard) with
 * *by_site, else a certificate naming it, else -1. O(1) in the number of certificates. */
static int sni_group(const struct tls_certs *certs, const char *name, bool *by_site)
{
    int g = names_lookup(&certs->sites, name);
    *by_site = g >= 0;
    if (g >= 0)
        return g;
    g = names_lookup(&certs->leaves, name);
    /* vhost's wildcard covers any depth, a certificate's one label (RFC 6125 6.4.3) */
    if (g >= 0 && X509_check_host(certs->groups[g].leaf, name, 0, 0, NULL) != 1)
        g = -1;
    ERR_clear_error();
    return g;
}

static int servername_cb(SSL *ssl, int *alert, void *arg)
{
    (void)arg;
    struct tls_conn *c = conn_of(ssl);
    const struct tls_certs *certs = c->ctx->certs;
    const char *name = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
    if (c->acme || c->ondemand)
        return SSL_TLSEXT_ERR_OK; /* client_hello_cb gave it its certificate */
    c->by_site = false;
    c->group = 0;
    if (!name || certs->num_groups < 2) {
        if (!certs->certless)
            return SSL_TLSEXT_ERR_OK;
        *alert = SSL_AD_UNRECOGNIZED_NAME; /* no certificate yet (issue 27): say so */
        return SSL_TLSEXT_ERR_ALERT_FATAL;
    }
    bool by_site;
    int g = sni_group(certs, name, &by_site);
    c->by_site = by_site;
    if (g < 0 && certs->certless) {
        *alert = SSL_AD_UNRECOGNIZED_NAME;
        return SSL_TLSEXT_ERR_ALERT_FATAL;
    }
    /* An unknown name gets the default certificate, as nginx's default server does. */
    if (g > 0 && !SSL_set_SSL_CTX(ssl, certs->groups[g].ssl))
        return SSL_TLSEXT_ERR_ALERT_FATAL;
    if (g > 0)
        c->group = g;
    return SSL_TLSEXT_ERR_OK;
}

/* Whether the ClientHello's ALPN list (RFC 7301 3.1) offers acme-tls/1. */
static bool offers_acme(SSL *ssl)
{
    const unsigned char *p;
    size_t len;
    if (!SSL_client_hello_get0_ext(ssl, TLSEXT_TYPE_application_layer_protocol_negotiation, &p,
                                   &len) ||
        len < 2 || (size_t)(p[0] << 8 | p[1]) != len - 2)
        return false;
    for (size_t i = 2; i < len;) {
        size_t n = p[i];
        if (i + 1 + n > len)
            return false;
        if (n == sizeof(alpn_acme) - 2 && memcmp(p + i + 1, alpn_acme + 1, n) == 0)
            return true;
        i += 1 + n;
    }
    return false;
}

/* The host_name of the ClientHello's server_name extension (RFC 6066 3) into out. */
static bool hello_sni(SSL *ssl, char *out, size_t cap)
{
    const unsigned char *p;
    size_t len;
    if (!SSL_client_hello_get0_ext(ssl, TLSEXT_TYPE_server_name, &p, &len) || len < 5 ||
        (size_t)(p[0] << 8 | p[1]) != len - 2 || p[2] != TLSEXT_NAMETYPE_host_name)
        return false;
    size_t n = (size_t)(p[3] << 8 | p[4]);
    if (n == 0 || n + 5 > len || n >= cap || memchr(p + 5, 0, n))
        return false;
    memcpy(out, p + 5, n);
    out[n] = '\0';
    return true;
}

/* Issue 40: a name no certificate of the set covers may be one to get a certificate for now
 * (tls_ondemand): the hook says whether, and the handshake parks while it is being decided or
 * issued (SSL_CLIENT_HELLO_RETRY keeps the ClientHello; OpenSSL calls us again on the next
 * SSL_do_handshake). */
static int on_demand(SSL *ssl, struct tls_conn *c, int *alert)
{
    const struct tls_ctx *ctx = c->ctx;
    char name[256];
    bool by_site;
    X509 *x = NULL;
    STACK_OF(X509) *chain = NULL;
    EVP_PKEY *k = NULL;
    if (!hello_sni(ssl, name, sizeof(name)) || sni_group(ctx->certs, name, &by_site) >= 0)
        return SSL_CLIENT_HELLO_SUCCESS;
    int rc = ctx->ondemand.cert(ctx->ondemand.arg, name, c->late, &x, &chain, &k);
    if (rc > 0)
        return SSL_CLIENT_HELLO_SUCCESS;
    if (rc == -EINPROGRESS && !c->late)
        return SSL_CLIENT_HELLO_RETRY;
    if (rc < 0) {
        *alert = SSL_AD_UNRECOGNIZED_NAME;
        return SSL_CLIENT_HELLO_ERROR;
    }
    /* The default pair's certificates go: a client must not be offered one that does not name
     * it beside the one that does. */
    SSL_certs_clear(ssl);
    int ok = SSL_use_cert_and_key(ssl, x, k, chain, 1);
    X509_free(x);
    EVP_PKEY_free(k);
    sk_X509_pop_free(chain, X509_free);
    if (ok != 1) {
        ERR_clear_error();
        *alert = SSL_AD_INTERNAL_ERROR;
        return SSL_CLIENT_HELLO_ERROR;
    }
    c->ondemand = true;
    c->by_site = true; /* the request must go to the site SNI names, as with a site's own pair */
    return SSL_CLIENT_HELLO_SUCCESS;
}

/* RFC 8737: a ClientHello that offers acme-tls/1 is a CA validating a name. It gets the
 * challenge certificate for its SNI name, if one is pending, and never a real one. Else a name
 * may be one for a certificate on demand. */
static int client_hello_cb(SSL *ssl, int *alert, void *arg)
{
    (void)arg;
    struct tls_conn *c = conn_of(ssl);
    const struct tls_ctx *ctx = c->ctx;
    char name[256];
    X509 *x = NULL;
    EVP_PKEY *k = NULL;
    if (!ctx->challenge.cert || !offers_acme(ssl))
        return ctx->ondemand.cert && !c->ondemand ? on_demand(ssl, c, alert)
                                                  : SSL_CLIENT_HELLO_SUCCESS;
    if (!hello_sni(ssl, name, sizeof(name)) ||
        ctx->challenge.cert(ctx->challenge.arg, name, &x, &k) != 0) {
        *alert = SSL_AD_UNRECOGNIZED_NAME;
        return SSL_CLIENT_HELLO_ERROR;
    }
    int ok = SSL_use_cert_and_key(ssl, x, k, NULL, 1);
    X509_free(x);
    EVP_PKEY_free(k);
    if (ok != 1) {
        *alert = SSL_AD_INTERNAL_ERROR;
        return SSL_CLIENT_HELLO_ERROR;
    }
    c->acme = true;
    return SSL_CLIENT_HELLO_SUCCESS;
}

static int alpn_cb(SSL *ssl, const unsigned char **out, unsigned char *out_len,
                   const unsigned char *in, unsigned in_len, void *arg)
{
    (void)arg;
    const struct tls_conn *c = conn_of(ssl);
    const struct tls_ctx *ctx = c->ctx;
    const unsigned char *ours = ctx->alpn_h2 ? alpn_h2_http1 : alpn_http1;
    unsigned ours_len = ctx->alpn_h2 ? sizeof(alpn_h2_http1) - 1 : sizeof(alpn_http1) - 1;
    if (c->acme) { /* a validation: acme-tls/1 only */
        ours = alpn_acme;
        ours_len = sizeof(alpn_acme) - 1;
    }
    unsigned char *chosen;
    if (SSL_select_next_proto(&chosen, out_len, ours, ours_len, in, in_len) !=
        OPENSSL_NPN_NEGOTIATED)
        return SSL_TLSEXT_ERR_NOACK; /* no common protocol: go on without ALPN, as nginx */
    *out = chosen;
    return SSL_TLSEXT_ERR_OK;
}

/* ---- loading certificates --------------------------------------------------------------- */

/* Whether this OpenSSL takes list as a group list. */
static bool groups_known(const char *list)
{
    SSL_CTX *ssl = SSL_CTX_new(TLS_server_method());
    bool ok = ssl && SSL_CTX_set1_groups_list(ssl, list) == 1;
    SSL_CTX_free(ssl);
    ERR_clear_error();
    return ok;
}

const char *tls_default_groups(void)
{
    /* Asked of the library each time: a start asks it twice or so, per context made. */
    return groups_known(kx_hybrid) ? kx_hybrid : kx_classic;
}

int tls_groups_check(const char *list, char *why, size_t why_len)
{
    if (groups_known(list))
        return 0;
    snprintf(why, why_len,
             "--tls-groups '%s': a group this OpenSSL (%s) does not know; it knows e.g. %s", list,
             OpenSSL_version(OPENSSL_VERSION), tls_default_groups());
    return -EINVAL;
}

/* An OpenSSL context for every worker: its callbacks find the worker's context through the
 * connection (conn_of). groups is what tls_default_groups said, asked once per load. */
SSL_CTX *tls_ssl_ctx_make(const struct tls_settings *s, const char *groups)
{
    SSL_CTX *ssl = SSL_CTX_new(TLS_server_method());
    if (!ssl)
        return NULL;
    /* SSL_MODE_RELEASE_BUFFERS: an idle connection holds no record buffers. No renegotiation,
     * no compression, no 0-RTT (max early data stays 0); tickets only, no server-side cache. */
    SSL_CTX_set_mode(ssl, SSL_MODE_RELEASE_BUFFERS);
    SSL_CTX_set_options(ssl, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION);
    SSL_CTX_clear_options(ssl, SSL_OP_CIPHER_SERVER_PREFERENCE); /* "intermediate": off */
    SSL_CTX_set_session_cache_mode(ssl, SSL_SESS_CACHE_OFF);
    SSL_CTX_set_max_early_data(ssl, 0);
    /* One TLS 1.3 ticket per full handshake (OpenSSL sends 2): each costs an encryption, and a
     * client resumes with one; a ticket used is replaced by the resumed handshake. */
    SSL_CTX_set_num_tickets(ssl, 1);
    /* A session lives as long as its ticket key can decrypt it: two periods (a day by
     * default, Mozilla's ssl_session_timeout). */
    unsigned rotate = s->ticket_rotate ? s->ticket_rotate : TLS_TICKET_ROTATE;
    SSL_CTX_set_timeout(ssl, (long)rotate * 2);
    if (!SSL_CTX_set_min_proto_version(ssl,
                                       s->min_version == 13 ? TLS1_3_VERSION : TLS1_2_VERSION) ||
        !SSL_CTX_set_cipher_list(ssl, intermediate_ciphers) ||
        !SSL_CTX_set_ciphersuites(ssl, tls13_suites) || !SSL_CTX_set1_groups_list(ssl, groups) ||
        !SSL_CTX_set_dh_auto(ssl, 1) || !SSL_CTX_set_tlsext_ticket_key_evp_cb(ssl, ticket_cb) ||
        !SSL_CTX_set_tlsext_servername_callback(ssl, servername_cb)) {
        SSL_CTX_free(ssl);
        return NULL;
    }
    SSL_CTX_set_alpn_select_cb(ssl, alpn_cb, NULL);
    /* every context may be a worker's with automatic HTTPS: the callback asks the worker's */
    SSL_CTX_set_client_hello_cb(ssl, client_hello_cb, NULL);
    return ssl;
}

static void ctx_free(struct tls_ctx *ctx)
{
    tls_certs_put(ctx->certs);
    BIO_free(ctx->wire); /* the last connection's SSL has dropped its reference */
    BIO_meth_free(ctx->bio);
    OPENSSL_cleanse(&ctx->cur, sizeof(ctx->cur));
    OPENSSL_cleanse(&ctx->prev, sizeof(ctx->prev));
    if (ctx->file_keys)
        OPENSSL_cleanse(ctx->file_keys, (size_t)ctx->num_file_keys * sizeof(*ctx->file_keys));
    free(ctx->file_keys);
    free(ctx);
}

int tls_ctx_new(const struct tls_settings *s, const struct tls_keys *keys, struct tls_ctx **out,
                char *why, size_t why_len)
{
    int rc = -ENOMEM;
    struct tls_ctx *ctx = calloc(1, sizeof(*ctx));
    if (!ctx) {
        snprintf(why, why_len, "TLS: out of memory");
        return -ENOMEM;
    }
    ctx->refs = 1;
    ctx->keys = keys;
    ctx->alpn_h2 = s->alpn_h2;
    ctx->challenge = s->challenge;
    ctx->ondemand = s->ondemand;
    ctx->rotate = s->ticket_rotate ? s->ticket_rotate : TLS_TICKET_ROTATE;
    ctx->period = INT64_MIN;
    if (!(ctx->bio = tls_record_bio_method()) || !(ctx->wire = BIO_new(ctx->bio))) {
        snprintf(why, why_len, "TLS: out of memory");
        goto fail;
    }
    if (s->shared) {
        atomic_fetch_add_explicit(&s->shared->refs, 1, memory_order_relaxed);
        ctx->certs = s->shared;
    } else if ((rc = tls_certs_new(s, NULL, &ctx->certs, NULL, why, why_len)) != 0) {
        goto fail;
    }
    if ((rc = read_ticket_files(ctx, s, why, why_len)) != 0)
        goto fail;
    tls_ctx_set_time(ctx, 0);
    *out = ctx;
    return 0;
fail:
    ctx_free(ctx);
    return rc;
}

const char *tls_ctx_warnings(const struct tls_ctx *ctx)
{
    return ctx->certs->warnings;
}

void tls_ctx_put(struct tls_ctx *ctx)
{
    if (ctx && --ctx->refs == 0)
        ctx_free(ctx);
}

/* ---- a connection on the context -------------------------------------------------------- */

int tls_conn_init(struct tls_conn *c, struct tls_ctx *ctx)
{
    *c = (struct tls_conn){0};
    SSL *ssl = SSL_new(ctx->certs->groups[0].ssl);
    if (!ssl || !BIO_up_ref(ctx->wire)) {
        SSL_free(ssl);
        ERR_clear_error();
        return -ENOMEM;
    }
    SSL_set_bio(ssl, ctx->wire, ctx->wire); /* both ways: SSL takes the reference just added */
    SSL_set_accept_state(ssl);
    c->ssl = ssl;
    c->ctx = ctx;
    c->state = TLS_ST_NEW;
    ctx->refs++;
    return 0;
}

const char *tls_conn_site_name(const struct tls_conn *c)
{
    if (c->by_site)
        return SSL_get_servername(c->ssl, TLSEXT_NAMETYPE_host_name);
    return c->ctx->certs->groups[c->group].site_name;
}

bool tls_conn_only_cert(const struct tls_conn *c)
{
    return c->ctx->certs->num_groups < 2;
}

bool tls_conn_names(const struct tls_conn *c, const char *host, size_t len)
{
    X509 *leaf = c->ctx->certs->groups[c->group].leaf;
    bool ok = leaf && X509_check_host(leaf, host, len, 0, NULL) == 1;
    ERR_clear_error();
    return ok;
}
