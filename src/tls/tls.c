/* TLS over this module's own BIO; see tls.h. */
#include "tls/tls.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <linux/tls.h>

#include <openssl/bio.h>
#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "core/vhost.h"

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
static const char groups_list[] = "X25519:P-256:P-384";

/* ALPN in wire format, server preference first. */
static const unsigned char alpn_http1[] = "\x08http/1.1";
static const unsigned char alpn_h2_http1[] = "\x02h2\x08http/1.1";
static const unsigned char alpn_acme[] = "\x0a"
                                         "acme-tls/1"; /* RFC 8737 6.2 */

enum { ST_NEW, ST_HANDSHAKE, ST_OPEN, ST_FAILED };

/* OpenSSL 3.0's controls for a BIO under kernel TLS (include/internal/bio.h; bio.h publishes
 * only the two GET ones): the keys, and the content type of the next record it writes. */
#define BIO_CTRL_SET_KTLS 72
#define BIO_CTRL_SET_KTLS_TX_SEND_CTRL_MSG 74
#define BIO_CTRL_CLEAR_KTLS_TX_CTRL_MSG 75

#define CT_HANDSHAKE 22
#define CT_APPLICATION_DATA 23
#define HS_KEY_UPDATE 24
#define KTLS_HEAD 3 /* a record in tls_conn.ktls_out: content type, then its length (2 bytes) */

_Static_assert(sizeof(struct tls12_crypto_info_aes_gcm_256) <= TLS_KTLS_KEYS_MAX &&
                   sizeof(struct tls12_crypto_info_chacha20_poly1305) <= TLS_KTLS_KEYS_MAX,
               "TLS_KTLS_KEYS_MAX holds the kernel's crypto_info");

struct tls_keys {
    unsigned char secret[32];
};

struct ticket_key {
    unsigned char name[16];
    unsigned char aes[32];  /* AES-256-CBC, as OpenSSL's own ticket keys */
    unsigned char hmac[32]; /* HMAC-SHA256 */
};

/* One OpenSSL context: the pairs that share a name set (at most one per key type). */
struct tls_group {
    SSL_CTX *ssl;
    X509 *leaf;      /* its first certificate, which SNI names are matched against */
    char *site_name; /* the first name of the first site whose pair it holds, or NULL */
};

struct tls_ctx {
    unsigned refs; /* the owner's one, plus one per connection: the worker's thread only */
    struct tls_challenge challenge;
    struct tls_group groups[TLS_MAX_CERTS];
    int num_groups;
    /* the sites' names (issue 19), each naming the group of its site's pair: SNI looks here
     * first, exact then wildcard, as a Host is routed */
    struct vhost_table names;
    struct vhost_slot *name_slots;
    char **name_copies;
    int num_names;
    BIO_METHOD *bio;
    const struct tls_keys *keys;
    bool alpn_h2;
    unsigned rotate;
    int64_t period; /* of cur; prev is period - 1 */
    struct ticket_key cur, prev;
    char warnings[1024];
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
    memcpy(msg, "ringhttpd tkname", 16);
    if (!EVP_Q_mac(NULL, "HMAC", NULL, "SHA256", NULL, keys->secret, sizeof(keys->secret), msg,
                   sizeof(msg), mac, sizeof(mac), &mac_len))
        return -EIO;
    memcpy(k->name, mac, 16);
    OPENSSL_cleanse(mac, sizeof(mac));
    return 0;
}

void tls_ctx_set_time(struct tls_ctx *ctx, int64_t wall)
{
    int64_t period = wall / ctx->rotate;
    if (period == ctx->period)
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

static int ticket_cb(SSL *ssl, unsigned char name[16], unsigned char *iv, EVP_CIPHER_CTX *cctx,
                     EVP_MAC_CTX *hctx, int enc)
{
    struct tls_ctx *ctx = SSL_CTX_get_app_data(SSL_get_SSL_CTX(ssl));
    const struct ticket_key *k;
    int rc = 1;
    if (enc) {
        k = &ctx->cur;
        if (RAND_bytes(iv, 16) != 1)
            return -1;
        memcpy(name, k->name, 16);
    } else if (memcmp(name, ctx->cur.name, 16) == 0) {
        k = &ctx->cur;
    } else if (memcmp(name, ctx->prev.name, 16) == 0) {
        k = &ctx->prev;
        rc = 2; /* good, but issue a ticket under the current key */
    } else {
        return 0; /* unknown key: a full handshake */
    }
    OSSL_PARAM params[] = {
        OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, (char *)"SHA256", 0),
        OSSL_PARAM_construct_end(),
    };
    if (!EVP_MAC_init(hctx, k->hmac, sizeof(k->hmac), params))
        return -1;
    if (enc ? !EVP_EncryptInit_ex(cctx, EVP_aes_256_cbc(), NULL, k->aes, iv)
            : !EVP_DecryptInit_ex(cctx, EVP_aes_256_cbc(), NULL, k->aes, iv))
        return -1;
    return rc;
}

/* ---- SNI and ALPN ----------------------------------------------------------------------- */

/* The group of the site whose names include name (exact, else the longest wildcard), or -1. */
static int site_group(const struct tls_ctx *ctx, const char *name)
{
    char key[VHOST_NAME_MAX + 1];
    if (!ctx->num_names)
        return -1;
    size_t n = vhost_key((struct http_str){name, strlen(name)}, key);
    return n ? vhost_lookup(&ctx->names, key, n) : -1;
}

static int servername_cb(SSL *ssl, int *alert, void *arg)
{
    struct tls_ctx *ctx = arg;
    struct tls_conn *c = SSL_get_app_data(ssl);
    const char *name = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
    bool certless = !ctx->groups[0].leaf;
    if (c->acme)
        return SSL_TLSEXT_ERR_OK; /* client_hello_cb gave it the challenge's certificate */
    c->by_site = false;
    c->group = 0;
    if (!name || ctx->num_groups < 2) {
        if (!certless)
            return SSL_TLSEXT_ERR_OK;
        *alert = SSL_AD_UNRECOGNIZED_NAME; /* no certificate yet (issue 27): say so */
        return SSL_TLSEXT_ERR_ALERT_FATAL;
    }
    int g = site_group(ctx, name);
    if (g >= 0)
        c->by_site = true;
    for (int i = 0; i < ctx->num_groups && g < 0; i++)
        if (ctx->groups[i].leaf && X509_check_host(ctx->groups[i].leaf, name, 0, 0, NULL) == 1)
            g = i;
    if (g < 0 && certless) {
        *alert = SSL_AD_UNRECOGNIZED_NAME;
        return SSL_TLSEXT_ERR_ALERT_FATAL;
    }
    /* An unknown name gets the default certificate, as nginx's default server does. */
    if (g > 0 && !SSL_set_SSL_CTX(ssl, ctx->groups[g].ssl))
        return SSL_TLSEXT_ERR_ALERT_FATAL;
    if (g > 0)
        c->group = (int8_t)g;
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

/* RFC 8737: a ClientHello that offers acme-tls/1 is a CA validating a name. It gets the
 * challenge certificate for its SNI name, if one is pending, and never a real one. */
static int client_hello_cb(SSL *ssl, int *alert, void *arg)
{
    struct tls_ctx *ctx = arg;
    struct tls_conn *c = SSL_get_app_data(ssl);
    char name[256];
    X509 *x = NULL;
    EVP_PKEY *k = NULL;
    if (!ctx->challenge.cert || !offers_acme(ssl))
        return SSL_CLIENT_HELLO_SUCCESS;
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
    const struct tls_ctx *ctx = arg;
    const struct tls_conn *c = SSL_get_app_data(ssl);
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

/* ---- the BIO: this module's queues, never a socket -------------------------------------- */

static int queue_append(struct tls_queue *q, const void *data, size_t len)
{
    if (len > UINT32_MAX - q->len)
        return -ENOMEM;
    if (q->off + q->len + len > q->cap) {
        if (q->off) {
            memmove(q->data, q->data + q->off, q->len);
            q->off = 0;
        }
        if (q->len + len > q->cap) {
            size_t cap = q->cap ? q->cap : 4096;
            while (cap < q->len + len)
                cap *= 2;
            if (cap > UINT32_MAX)
                return -ENOMEM;
            char *p = realloc(q->data, cap);
            if (!p)
                return -ENOMEM;
            q->data = p;
            q->cap = (uint32_t)cap;
        }
    }
    memcpy(q->data + q->off + q->len, data, len);
    q->len += (uint32_t)len;
    return 0;
}

static void queue_drop(struct tls_queue *q, size_t n)
{
    q->off += (uint32_t)n;
    q->len -= (uint32_t)n;
    if (q->len == 0)
        q->off = 0;
}

static void queue_free(struct tls_queue *q)
{
    free(q->data);
    *q = (struct tls_queue){0};
}

static int bio_read(BIO *b, char *buf, size_t size, size_t *done)
{
    struct tls_conn *c = BIO_get_data(b);
    BIO_clear_retry_flags(b);
    if (c->in.len == 0) {
        BIO_set_retry_read(b);
        *done = 0;
        return 0;
    }
    size_t n = size < c->in.len ? size : c->in.len;
    memcpy(buf, c->in.data + c->in.off, n);
    queue_drop(&c->in, n);
    *done = n;
    return 1;
}

static int ktls_write(struct tls_conn *c, const char *data, size_t len);

/* Never refuses: records go to the sealing caller's buffer while it has room and nothing is
 * queued before them; the rest (and whatever OpenSSL writes outside a seal) is queued. After
 * the switch to kernel TLS, plaintext records go to ktls_out instead. */
static int bio_write(BIO *b, const char *data, size_t len, size_t *done)
{
    struct tls_conn *c = BIO_get_data(b);
    BIO_clear_retry_flags(b);
    if (c->ktls != TLS_KTLS_NO || c->seal) {
        if (ktls_write(c, data, len) != 0)
            return 0;
        *done = len;
        return 1;
    }
    size_t n = 0;
    if (c->sink && c->out.len == 0) {
        n = c->sink_cap - c->sink_len;
        if (n > len)
            n = len;
        memcpy(c->sink + c->sink_len, data, n);
        c->sink_len += n;
    }
    if (n < len && queue_append(&c->out, data + n, len - n) != 0)
        return 0;
    *done = len;
    return 1;
}

/* ---- the sealer: records sealed here with the keys OpenSSL hands over (tls.h) ------------ */

enum seal_mode { SEAL_NONE, SEAL_13, SEAL_12_GCM, SEAL_12_CHACHA };

/* Bytes a record adds to its plaintext: header, TLS 1.2 GCM's explicit nonce, TLS 1.3's inner
 * content type, tag. */
static size_t seal_overhead(const struct tls_conn *c)
{
    return 5 + 16 + (c->seal == SEAL_13 ? 1 : c->seal == SEAL_12_GCM ? 8 : 0);
}

/* Takes the write keys instead of kernel TLS (the same struct tls12_crypto_info_*): 1 when
 * taken (OpenSSL then writes plaintext records), 0 to leave encrypting to OpenSSL. */
static long seal_take(struct tls_conn *c, const void *info)
{
    const struct tls_crypto_info *ci = info;
    const unsigned char *key, *rec_seq;
    const EVP_CIPHER *cipher;
    unsigned char iv[12];
    if (ci->version != TLS_1_2_VERSION && ci->version != TLS_1_3_VERSION)
        return 0;
    bool gcm = ci->cipher_type != TLS_CIPHER_CHACHA20_POLY1305;
    if (ci->cipher_type == TLS_CIPHER_AES_GCM_128) {
        const struct tls12_crypto_info_aes_gcm_128 *k = info;
        key = k->key, rec_seq = k->rec_seq, cipher = EVP_aes_128_gcm();
        memcpy(iv, k->salt, 4);
        memcpy(iv + 4, k->iv, 8);
    } else if (ci->cipher_type == TLS_CIPHER_AES_GCM_256) {
        const struct tls12_crypto_info_aes_gcm_256 *k = info;
        key = k->key, rec_seq = k->rec_seq, cipher = EVP_aes_256_gcm();
        memcpy(iv, k->salt, 4);
        memcpy(iv + 4, k->iv, 8);
    } else if (ci->cipher_type == TLS_CIPHER_CHACHA20_POLY1305) {
        const struct tls12_crypto_info_chacha20_poly1305 *k = info;
        key = k->key, rec_seq = k->rec_seq, cipher = EVP_chacha20_poly1305();
        memcpy(iv, k->iv, 12);
    } else {
        return 0;
    }
    EVP_CIPHER_CTX *e = EVP_CIPHER_CTX_new();
    if (!e || EVP_EncryptInit_ex(e, cipher, NULL, key, NULL) != 1) {
        EVP_CIPHER_CTX_free(e);
        ERR_clear_error();
        OPENSSL_cleanse(iv, sizeof(iv));
        return 0;
    }
    c->seal_ctx = e;
    c->seal_seq = 0;
    for (int i = 0; i < 8; i++)
        c->seal_seq = c->seal_seq << 8 | rec_seq[i];
    memcpy(c->seal_iv, iv, sizeof(iv));
    OPENSSL_cleanse(iv, sizeof(iv));
    /* TLS 1.2 GCM: the salt, then the explicit part, which is the sequence number (unique per
     * key, as RFC 5288 asks) */
    if (ci->version == TLS_1_2_VERSION && gcm)
        memset(c->seal_iv + 4, 0, 8);
    c->seal = ci->version == TLS_1_3_VERSION ? SEAL_13 : gcm ? SEAL_12_GCM : SEAL_12_CHACHA;
    c->ktls_type = 0;
    c->ktls_open = 0;
    return 1;
}

/* Seals one record of type `type` from len plaintext bytes gathered from iov (from segment
 * *i, offset *off, both advanced) into out, which has len + seal_overhead bytes: encrypted
 * from where they are, no copy. Returns the record's length, or 0 (OpenSSL failed). */
static size_t seal_record(struct tls_conn *c, uint8_t type, const struct iovec *iov, int *i,
                          size_t *off, size_t len, unsigned char *out)
{
    EVP_CIPHER_CTX *e = c->seal_ctx;
    unsigned char seq[8], nonce[12], aad[13];
    for (int k = 0; k < 8; k++)
        seq[k] = (unsigned char)(c->seal_seq >> (56 - 8 * k));
    size_t body = len + seal_overhead(c) - 5, head = 5;
    memcpy(nonce, c->seal_iv, 12);
    for (int k = 0; k < 8; k++)
        nonce[4 + k] ^= seq[k]; /* TLS 1.2 GCM: the explicit nonce is seq itself */
    out[0] = c->seal == SEAL_13 ? CT_APPLICATION_DATA : type;
    out[1] = 3, out[2] = 3;
    out[3] = (unsigned char)(body >> 8), out[4] = (unsigned char)body;
    size_t aad_len = 5;
    if (c->seal == SEAL_13) {
        memcpy(aad, out, 5);
    } else {
        memcpy(aad, seq, 8);
        aad[8] = type, aad[9] = 3, aad[10] = 3;
        aad[11] = (unsigned char)(len >> 8), aad[12] = (unsigned char)len;
        aad_len = 13;
    }
    if (c->seal == SEAL_12_GCM) {
        memcpy(out + 5, nonce + 4, 8);
        head += 8;
    }
    unsigned char *ct = out + head;
    int n;
    if (EVP_EncryptInit_ex(e, NULL, NULL, NULL, nonce) != 1 ||
        EVP_EncryptUpdate(e, NULL, &n, aad, (int)aad_len) != 1)
        return 0;
    size_t done = 0;
    while (done < len) {
        while (iov[*i].iov_len == *off) {
            (*i)++;
            *off = 0;
        }
        size_t piece = iov[*i].iov_len - *off;
        if (piece > len - done)
            piece = len - done;
        if (EVP_EncryptUpdate(e, ct, &n, (const unsigned char *)iov[*i].iov_base + *off,
                              (int)piece) != 1)
            return 0;
        ct += n;
        *off += piece;
        done += piece;
    }
    if (c->seal == SEAL_13) {
        if (EVP_EncryptUpdate(e, ct, &n, &type, 1) != 1)
            return 0;
        ct += n;
    }
    if (EVP_EncryptFinal_ex(e, ct, &n) != 1)
        return 0;
    ct += n;
    if (ct != out + head + len + (c->seal == SEAL_13) ||
        EVP_CIPHER_CTX_ctrl(e, EVP_CTRL_AEAD_GET_TAG, 16, ct) != 1)
        return 0;
    c->seal_seq++;
    return 5 + body;
}

/* Seals the records OpenSSL wrote since the keys were taken (ktls_out, each with its type)
 * into the queue of ciphertext to send, in order: 0, or -EPROTO (the connection fails). */
static int seal_flush(struct tls_conn *c)
{
    struct tls_queue *q = &c->ktls_out;
    int rc = 0;
    while (q->len >= KTLS_HEAD && rc == 0) {
        const unsigned char *h = (const unsigned char *)q->data + q->off;
        size_t len = (size_t)h[1] << 8 | h[2];
        unsigned char rec[TLS_RECORD_PLAIN + TLS_RECORD_OVERHEAD];
        struct iovec iov = {(void *)(h + KTLS_HEAD), len};
        int i = 0;
        size_t off = 0;
        size_t n = seal_record(c, h[0], &iov, &i, &off, len, rec);
        if (n == 0 || queue_append(&c->out, rec, n) != 0)
            rc = -EPROTO;
        queue_drop(q, KTLS_HEAD + len);
    }
    c->ktls_open = 0;
    if (rc) {
        ERR_clear_error();
        c->state = ST_FAILED;
    }
    return rc;
}

/* ---- kernel TLS: the keys and the records OpenSSL hands over after the switch ----------- */

/* OpenSSL switches the write side to kernel TLS (BIO_CTRL_SET_KTLS, is_tx): take the keys when
 * the socket can have them and the kernel seals the cipher (6.1: AES-GCM and ChaCha20-Poly1305,
 * TLS 1.2 and 1.3, as far as the probe found their crypto modules). From here on every byte OpenSSL
 * writes is plaintext. Its flush just before put every byte of the old keys in c->out, which the
 * caller sends before the keys are set. The receive side (is_tx 0) is refused: OpenSSL goes on
 * decrypting in user space. */
static long ktls_take(struct tls_conn *c, long is_tx, const void *info)
{
    const struct tls_crypto_info *ci = info;
    size_t len;
    if (!is_tx || c->ktls != TLS_KTLS_NO || c->seal || !ci ||
        ci->cipher_type < TLS_CIPHER_AES_GCM_128)
        return 0;
    if (!(c->ktls_ciphers & (1u << (ci->cipher_type - TLS_CIPHER_AES_GCM_128))))
        return c->seal_allowed ? seal_take(c, info) : 0;
    switch (ci->cipher_type) {
    case TLS_CIPHER_AES_GCM_128:
        len = sizeof(struct tls12_crypto_info_aes_gcm_128);
        break;
    case TLS_CIPHER_AES_GCM_256:
        len = sizeof(struct tls12_crypto_info_aes_gcm_256);
        break;
    case TLS_CIPHER_CHACHA20_POLY1305:
        len = sizeof(struct tls12_crypto_info_chacha20_poly1305);
        break;
    default:
        return 0;
    }
    if (ci->version != TLS_1_2_VERSION && ci->version != TLS_1_3_VERSION)
        return 0;
    memcpy(c->ktls_keys, info, len);
    c->ktls_keys_len = (uint8_t)len;
    c->ktls = TLS_KTLS_KEYS;
    c->ktls_type = 0;
    c->ktls_open = 0;
    return 1;
}

/* A plaintext write after the switch. OpenSSL announces each record of its own with its content
 * type (SET_KTLS_TX_SEND_CTRL_MSG) and may write it in several pieces (the handshake's
 * buffering BIO), so a record stays open for more until the next announcement; a record of the
 * protocol's maximum starts another. A KeyUpdate of ours would have the kernel seal what follows
 * with keys the peer has dropped: nothing from it on is kept (OpenSSL 3.0 writes one only from
 * SSL_write, which is not called after the switch; this is the guard). 0 or -ENOMEM. */
static int ktls_write(struct tls_conn *c, const char *data, size_t len)
{
    struct tls_queue *q = &c->ktls_out;
    uint8_t type = c->ktls_type ? c->ktls_type : CT_APPLICATION_DATA;
    if (c->ktls_stop)
        return 0;
    if (!c->ktls_open && type == CT_HANDSHAKE && len && (unsigned char)data[0] == HS_KEY_UPDATE) {
        c->ktls_stop = true;
        return 0;
    }
    while (len > 0) {
        if (!c->ktls_open || c->ktls_open == KTLS_HEAD + TLS_RECORD_PLAIN) {
            const char head[KTLS_HEAD] = {(char)type, 0, 0};
            if (queue_append(q, head, sizeof(head)) != 0)
                return -ENOMEM;
            c->ktls_open = KTLS_HEAD;
        }
        size_t n = KTLS_HEAD + TLS_RECORD_PLAIN - c->ktls_open;
        if (n > len)
            n = len;
        if (queue_append(q, data, n) != 0)
            return -ENOMEM;
        c->ktls_open += (uint32_t)n;
        unsigned char *head = (unsigned char *)q->data + q->off + q->len - c->ktls_open;
        head[1] = (unsigned char)((c->ktls_open - KTLS_HEAD) >> 8);
        head[2] = (unsigned char)(c->ktls_open - KTLS_HEAD);
        data += n;
        len -= n;
    }
    return 0;
}

static long bio_ctrl(BIO *b, int cmd, long num, void *ptr)
{
    struct tls_conn *c = BIO_get_data(b);
    switch (cmd) {
    case BIO_CTRL_FLUSH:
        return 1;
    case BIO_CTRL_PENDING:
        return (long)c->in.len;
    case BIO_CTRL_WPENDING:
        return (long)c->out.len;
    case BIO_CTRL_SET_KTLS:
        return ktls_take(c, num, ptr);
    case BIO_CTRL_GET_KTLS_SEND:
        return c->ktls != TLS_KTLS_NO || c->seal;
    case BIO_CTRL_SET_KTLS_TX_SEND_CTRL_MSG:
    case BIO_CTRL_CLEAR_KTLS_TX_CTRL_MSG:
        c->ktls_type = cmd == BIO_CTRL_CLEAR_KTLS_TX_CTRL_MSG ? 0 : (uint8_t)num;
        c->ktls_open = 0; /* the next write starts a record */
        return 0;
    default:
        return 0; /* among others GET_KTLS_RECV: receiving stays in user space */
    }
}

static int bio_create(BIO *b)
{
    BIO_set_init(b, 1);
    return 1;
}

static int bio_destroy(BIO *b)
{
    (void)b;
    return 1;
}

static BIO_METHOD *make_bio_method(void)
{
    BIO_METHOD *m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "ringhttpd");
    if (!m)
        return NULL;
    if (!BIO_meth_set_read_ex(m, bio_read) || !BIO_meth_set_write_ex(m, bio_write) ||
        !BIO_meth_set_ctrl(m, bio_ctrl) || !BIO_meth_set_create(m, bio_create) ||
        !BIO_meth_set_destroy(m, bio_destroy)) {
        BIO_meth_free(m);
        return NULL;
    }
    return m;
}

/* ---- loading certificates --------------------------------------------------------------- */

static void warn(struct tls_ctx *ctx, const char *fmt, const char *file, const ASN1_TIME *t)
{
    struct tm tm;
    char when[32] = "?";
    if (ASN1_TIME_to_tm(t, &tm))
        strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S UTC", &tm);
    size_t used = strlen(ctx->warnings);
    snprintf(ctx->warnings + used, sizeof(ctx->warnings) - used, fmt, file, when);
}

struct pair {
    X509 *leaf;
    STACK_OF(X509) * chain;
    EVP_PKEY *key;
};

static void pair_free(struct pair *p)
{
    X509_free(p->leaf);
    sk_X509_pop_free(p->chain, X509_free);
    EVP_PKEY_free(p->key);
}

static int load_pair(struct tls_ctx *ctx, const struct tls_cert_files *f, struct pair *p, char *why,
                     size_t why_len)
{
    int rc = -EINVAL;
    FILE *cf = NULL, *kf = NULL;
    *p = (struct pair){0};
    if (!(cf = fopen(f->cert, "re"))) {
        rc = -errno;
        snprintf(why, why_len, "--tls-cert '%s': %s", f->cert, strerror(errno));
        goto out;
    }
    if (!(p->leaf = PEM_read_X509(cf, NULL, NULL, NULL))) {
        snprintf(why, why_len, "--tls-cert '%s': no PEM certificate in it", f->cert);
        goto out;
    }
    if (!(p->chain = sk_X509_new_null())) {
        rc = -ENOMEM;
        snprintf(why, why_len, "--tls-cert '%s': out of memory", f->cert);
        goto out;
    }
    X509 *x;
    while ((x = PEM_read_X509(cf, NULL, NULL, NULL))) {
        if (!sk_X509_push(p->chain, x)) {
            X509_free(x);
            rc = -ENOMEM;
            snprintf(why, why_len, "--tls-cert '%s': out of memory", f->cert);
            goto out;
        }
    }
    ERR_clear_error(); /* the end of the file reads as "no start line" */
    if (!(kf = fopen(f->key, "re"))) {
        rc = -errno;
        snprintf(why, why_len, "--tls-key '%s': %s", f->key, strerror(errno));
        goto out;
    }
    if (!(p->key = PEM_read_PrivateKey(kf, NULL, NULL, NULL))) {
        snprintf(why, why_len, "--tls-key '%s': no PEM private key in it (or it is encrypted)",
                 f->key);
        goto out;
    }
    if (X509_check_private_key(p->leaf, p->key) != 1) {
        snprintf(why, why_len, "--tls-key '%s' does not match the certificate in '%s'", f->key,
                 f->cert);
        goto out;
    }
    if (X509_cmp_current_time(X509_get0_notAfter(p->leaf)) < 0)
        warn(ctx, "--tls-cert '%s' expired on %s; clients will refuse it\n", f->cert,
             X509_get0_notAfter(p->leaf));
    else if (X509_cmp_current_time(X509_get0_notBefore(p->leaf)) > 0)
        warn(ctx, "--tls-cert '%s' is not valid before %s; clients will refuse it\n", f->cert,
             X509_get0_notBefore(p->leaf));
    rc = 0;
out:
    if (rc)
        pair_free(p);
    if (kf)
        fclose(kf);
    if (cf)
        fclose(cf);
    ERR_clear_error();
    return rc;
}

/* Whether two certificates name the same hosts: same subject and same subjectAltName. */
static bool same_names(X509 *a, X509 *b)
{
    if (X509_NAME_cmp(X509_get_subject_name(a), X509_get_subject_name(b)) != 0)
        return false;
    int ia = X509_get_ext_by_NID(a, NID_subject_alt_name, -1);
    int ib = X509_get_ext_by_NID(b, NID_subject_alt_name, -1);
    if (ia < 0 || ib < 0)
        return ia == ib;
    return ASN1_OCTET_STRING_cmp(X509_EXTENSION_get_data(X509_get_ext(a, ia)),
                                 X509_EXTENSION_get_data(X509_get_ext(b, ib))) == 0;
}

static SSL_CTX *make_ssl_ctx(struct tls_ctx *ctx, const struct tls_settings *s)
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
    SSL_CTX_set_timeout(ssl, (long)ctx->rotate * 2);
    if (!SSL_CTX_set_min_proto_version(ssl,
                                       s->min_version == 13 ? TLS1_3_VERSION : TLS1_2_VERSION) ||
        !SSL_CTX_set_cipher_list(ssl, intermediate_ciphers) ||
        !SSL_CTX_set_ciphersuites(ssl, tls13_suites) ||
        !SSL_CTX_set1_groups_list(ssl, groups_list) || !SSL_CTX_set_dh_auto(ssl, 1) ||
        !SSL_CTX_set_tlsext_ticket_key_evp_cb(ssl, ticket_cb) ||
        !SSL_CTX_set_tlsext_servername_callback(ssl, servername_cb) ||
        !SSL_CTX_set_tlsext_servername_arg(ssl, ctx) || !SSL_CTX_set_app_data(ssl, ctx)) {
        SSL_CTX_free(ssl);
        return NULL;
    }
    SSL_CTX_set_alpn_select_cb(ssl, alpn_cb, ctx);
    if (ctx->challenge.cert)
        SSL_CTX_set_client_hello_cb(ssl, client_hello_cb, ctx);
    return ssl;
}

static void ctx_free(struct tls_ctx *ctx)
{
    for (int i = 0; i < ctx->num_groups; i++) {
        SSL_CTX_free(ctx->groups[i].ssl);
        X509_free(ctx->groups[i].leaf);
        free(ctx->groups[i].site_name);
    }
    for (int i = 0; i < ctx->num_names; i++)
        free(ctx->name_copies[i]);
    free(ctx->name_copies);
    free(ctx->name_slots);
    BIO_meth_free(ctx->bio);
    OPENSSL_cleanse(&ctx->cur, sizeof(ctx->cur));
    OPENSSL_cleanse(&ctx->prev, sizeof(ctx->prev));
    free(ctx);
}

/* A site's names, each naming group g (a name another pair's site named first keeps that one). */
static int add_site_names(struct tls_ctx *ctx, const struct tls_cert_files *f, int g)
{
    for (int i = 0; i < f->num_hosts; i++) {
        char *copy = strdup(f->hosts[i]);
        if (!copy)
            return -ENOMEM;
        for (char *q = copy; *q; q++)
            if (*q >= 'A' && *q <= 'Z')
                *q = (char)(*q - 'A' + 'a');
        ctx->name_copies[ctx->num_names++] = copy;
        int rc = vhost_table_add(&ctx->names, copy, g);
        if (rc != 0 && rc != -EEXIST)
            return rc;
        /* the site's name as a route key: an exact name, or a wildcard as its ".suffix" */
        if (!ctx->groups[g].site_name &&
            !(ctx->groups[g].site_name = strdup(copy[0] == '*' ? copy + 1 : copy)))
            return -ENOMEM;
    }
    return 0;
}

static int add_pair(struct tls_ctx *ctx, const struct tls_settings *s, int i, char *why,
                    size_t why_len)
{
    struct pair p;
    int rc = load_pair(ctx, &s->certs[i], &p, why, why_len);
    if (rc)
        return rc;
    struct tls_group *g = NULL;
    for (int j = 0; j < ctx->num_groups && !g; j++)
        if (ctx->groups[j].leaf && same_names(ctx->groups[j].leaf, p.leaf))
            g = &ctx->groups[j];
    if (!g) {
        g = &ctx->groups[ctx->num_groups];
        if (!(g->ssl = make_ssl_ctx(ctx, s))) {
            snprintf(why, why_len, "TLS: cannot set up OpenSSL's context");
            rc = -ENOMEM;
            goto out;
        }
        X509_up_ref(p.leaf);
        g->leaf = p.leaf;
        ctx->num_groups++;
    }
    /* override 0: a second certificate of a key type the names already have is refused */
    if (SSL_CTX_use_cert_and_key(g->ssl, p.leaf, p.key, p.chain, 0) != 1) {
        snprintf(why, why_len,
                 "--tls-cert '%s': its names already have a certificate of this key type, or "
                 "OpenSSL refuses its key",
                 s->certs[i].cert);
        rc = -EINVAL;
        goto out;
    }
    if ((rc = add_site_names(ctx, &s->certs[i], (int)(g - ctx->groups))) != 0)
        snprintf(why, why_len, "TLS: out of memory");
out:
    ERR_clear_error();
    pair_free(&p);
    return rc;
}

int tls_ctx_new(const struct tls_settings *s, const struct tls_keys *keys, struct tls_ctx **out,
                char *why, size_t why_len)
{
    int rc = -EINVAL;
    if (s->num_certs < (s->certless ? 0 : 1) || s->num_certs > TLS_MAX_CERTS - s->certless) {
        snprintf(why, why_len, "TLS needs 1 to %d --tls-cert/--tls-key pairs", TLS_MAX_CERTS);
        return -EINVAL;
    }
    struct tls_ctx *ctx = calloc(1, sizeof(*ctx));
    if (!ctx) {
        snprintf(why, why_len, "TLS: out of memory");
        return -ENOMEM;
    }
    ctx->refs = 1;
    ctx->keys = keys;
    ctx->alpn_h2 = s->alpn_h2;
    ctx->challenge = s->challenge;
    ctx->rotate = s->ticket_rotate ? s->ticket_rotate : TLS_TICKET_ROTATE;
    ctx->period = INT64_MIN;
    if (!(ctx->bio = make_bio_method())) {
        snprintf(why, why_len, "TLS: out of memory");
        rc = -ENOMEM;
        goto fail;
    }
    size_t names = 0;
    for (int i = 0; i < s->num_certs; i++)
        names += (size_t)s->certs[i].num_hosts;
    if (names) {
        size_t slots = vhost_slots_for(names);
        ctx->name_slots = calloc(slots, sizeof(*ctx->name_slots));
        ctx->name_copies = calloc(names, sizeof(*ctx->name_copies));
        if (!ctx->name_slots || !ctx->name_copies) {
            snprintf(why, why_len, "TLS: out of memory");
            rc = -ENOMEM;
            goto fail;
        }
        vhost_table_init(&ctx->names, ctx->name_slots, slots);
    }
    /* Certless: group 0 is a context without a certificate, which only ever refuses. */
    if (s->certless && !(ctx->groups[ctx->num_groups++].ssl = make_ssl_ctx(ctx, s))) {
        snprintf(why, why_len, "TLS: cannot set up OpenSSL's context");
        rc = -ENOMEM;
        goto fail;
    }
    for (int i = 0; i < s->num_certs; i++)
        if ((rc = add_pair(ctx, s, i, why, why_len)) != 0)
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
    return ctx->warnings;
}

void tls_ctx_put(struct tls_ctx *ctx)
{
    if (ctx && --ctx->refs == 0)
        ctx_free(ctx);
}

/* ---- connections ------------------------------------------------------------------------ */

int tls_conn_init(struct tls_conn *c, struct tls_ctx *ctx)
{
    *c = (struct tls_conn){0};
    SSL *ssl = SSL_new(ctx->groups[0].ssl);
    BIO *b = ssl ? BIO_new(ctx->bio) : NULL;
    if (!b) {
        SSL_free(ssl);
        ERR_clear_error();
        return -ENOMEM;
    }
    BIO_set_data(b, c);
    SSL_set_bio(ssl, b, b); /* one BIO both ways: SSL takes its one reference */
    SSL_set_accept_state(ssl);
    SSL_set_app_data(ssl, c); /* for the SNI callback: which certificate it chose */
    c->ssl = ssl;
    c->ctx = ctx;
    c->state = ST_NEW;
    ctx->refs++;
    return 0;
}

void tls_conn_fini(struct tls_conn *c)
{
    if (!c->ssl)
        return;
    SSL_free(c->ssl);
    queue_free(&c->in);
    queue_free(&c->out);
    queue_free(&c->ktls_out);
    OPENSSL_cleanse(c->ktls_keys, sizeof(c->ktls_keys));
    EVP_CIPHER_CTX_free(c->seal_ctx); /* cleanses its key */
    OPENSSL_cleanse(c->seal_iv, sizeof(c->seal_iv));
    tls_ctx_put(c->ctx);
    *c = (struct tls_conn){0};
}

int tls_conn_feed(struct tls_conn *c, const void *data, size_t len)
{
    return queue_append(&c->in, data, len);
}

size_t tls_conn_buffered(const struct tls_conn *c)
{
    return c->in.len;
}

/* The first byte of a TLS connection is a handshake record's type (22). An upper-case letter is
 * an HTTP method: that client gets a readable answer instead of an alert it cannot read. */
static int sniff(struct tls_conn *c)
{
    if (c->state != ST_NEW)
        return 0;
    if (c->in.len == 0)
        return TLS_AGAIN;
    unsigned char first = (unsigned char)c->in.data[c->in.off];
    if (first == 22) {
        c->state = ST_HANDSHAKE;
        return 0;
    }
    c->state = ST_FAILED;
    return first >= 'A' && first <= 'Z' ? TLS_PLAIN_HTTP : -EPROTO;
}

/* Maps an OpenSSL failure to TLS_AGAIN, 0 (close_notify) or -EPROTO. */
static int failure(struct tls_conn *c, int ret)
{
    switch (SSL_get_error(c->ssl, ret)) {
    case SSL_ERROR_WANT_READ:
        return TLS_AGAIN;
    case SSL_ERROR_ZERO_RETURN:
        return 0;
    default:
        ERR_clear_error();
        c->state = ST_FAILED;
        return -EPROTO;
    }
}

int tls_conn_handshake(struct tls_conn *c)
{
    if (c->state == ST_OPEN)
        return 1;
    if (c->state == ST_FAILED)
        return -EPROTO;
    int rc = sniff(c);
    if (rc)
        return rc;
    int r = SSL_do_handshake(c->ssl);
    if (c->seal && seal_flush(c) != 0)
        return -EPROTO;
    if (r == 1) {
        c->state = ST_OPEN;
        return 1;
    }
    rc = failure(c, r);
    return rc == 0 ? -EPROTO : rc;
}

ssize_t tls_conn_read(struct tls_conn *c, void *buf, size_t cap)
{
    if (c->state != ST_OPEN) {
        int rc = tls_conn_handshake(c);
        if (rc != 1)
            return rc;
    }
    if (c->seal_stop || c->acme) /* RFC 8737 3: a validation carries no data */
        return -EPROTO;
    size_t n;
    int r = SSL_read_ex(c->ssl, buf, cap, &n);
    if (c->seal) {
        /* tickets, alerts; and a KeyUpdate request, which OpenSSL would answer only in its next
         * SSL_write (never called once the keys are here): this side stops instead */
        if (seal_flush(c) != 0)
            return -EPROTO;
        if (SSL_get_key_update_type(c->ssl) != SSL_KEY_UPDATE_NONE && !c->seal_stop) {
            tls_conn_close_notify(c);
            c->seal_stop = true;
        }
    }
    if (r == 1)
        return (ssize_t)n;
    return failure(c, r);
}

/* Smallest record worth making when out has little room left: below this, wait for room. */
#define RECORD_MIN 2048

/* Plaintext bytes of c's next record when room bytes of out are free and left bytes wait: a
 * whole record (small while c warms up), the rest, or 0 (wait for room rather than make a
 * record smaller than RECORD_MIN only because out is nearly full). */
static size_t record_len(const struct tls_conn *c, size_t room, size_t left)
{
    size_t want = c->warm < TLS_RECORD_WARM ? TLS_RECORD_SMALL : TLS_RECORD_PLAIN;
    if (want > left)
        want = left;
    if (room <= TLS_RECORD_OVERHEAD)
        return 0;
    size_t fit = room - TLS_RECORD_OVERHEAD;
    if (fit >= want)
        return want;
    return fit < RECORD_MIN ? 0 : fit;
}

/* rec bytes of application data were sealed. */
static void warmed(struct tls_conn *c, size_t rec)
{
    if (c->warm < TLS_RECORD_WARM)
        c->warm += (uint32_t)rec;
}

void tls_conn_rested(struct tls_conn *c)
{
    c->warm = 0;
}

/* tls_conn_seal with the sealer: whole records from iov straight into out. */
static ssize_t seal_own(struct tls_conn *c, const struct iovec *iov, int iovcnt, size_t left,
                        char *out, size_t cap, size_t *out_len)
{
    (void)iovcnt;
    size_t used = *out_len, over = seal_overhead(c);
    ssize_t taken = 0;
    int i = 0;
    size_t off = 0;
    size_t rec;
    while (left > 0 && (rec = record_len(c, cap - used, left)) > 0) {
        size_t n =
            seal_record(c, CT_APPLICATION_DATA, iov, &i, &off, rec, (unsigned char *)out + used);
        if (n != rec + over) {
            ERR_clear_error();
            c->state = ST_FAILED;
            return -EPROTO;
        }
        used += n;
        taken += (ssize_t)rec;
        left -= rec;
        warmed(c, rec);
    }
    *out_len = used;
    return taken;
}

ssize_t tls_conn_seal(struct tls_conn *c, const struct iovec *iov, int iovcnt, char *out,
                      size_t cap, size_t *out_len)
{
    if (c->seal_stop)
        return -ESHUTDOWN;
    if (c->state != ST_OPEN || c->closing || c->ktls != TLS_KTLS_NO)
        return -EPROTO;
    size_t used = *out_len;
    if (c->out.len) {
        size_t n = cap - used < c->out.len ? cap - used : c->out.len;
        memcpy(out + used, c->out.data + c->out.off, n);
        queue_drop(&c->out, n);
        used += n;
        if (c->out.len) {
            *out_len = used;
            return 0;
        }
    }
    size_t left = 0;
    for (int i = 0; i < iovcnt; i++)
        left += iov[i].iov_len;
    if (c->seal) {
        *out_len = used;
        return seal_own(c, iov, iovcnt, left, out, cap, out_len);
    }
    c->sink = out;
    c->sink_len = used;
    c->sink_cap = cap;
    ssize_t taken = 0;
    int i = 0;
    size_t off = 0; /* into iov[i] */
    char gather[TLS_RECORD_PLAIN];
    while (left > 0) {
        size_t rec = record_len(c, c->sink_cap - c->sink_len, left);
        if (rec == 0)
            break;
        while (iov[i].iov_len == off) {
            i++;
            off = 0;
        }
        const char *p;
        if (iov[i].iov_len - off >= rec) {
            p = (const char *)iov[i].iov_base + off; /* one segment fills the record */
            off += rec;
        } else {
            size_t got = 0; /* gather small segments into one record */
            while (got < rec) {
                while (iov[i].iov_len == off) {
                    i++;
                    off = 0;
                }
                size_t n = iov[i].iov_len - off;
                if (n > rec - got)
                    n = rec - got;
                memcpy(gather + got, (const char *)iov[i].iov_base + off, n);
                got += n;
                off += n;
            }
            p = gather;
        }
        size_t w;
        if (SSL_write_ex(c->ssl, p, rec, &w) != 1 || w != rec) {
            ERR_clear_error();
            c->state = ST_FAILED;
            taken = -EPROTO;
            break;
        }
        taken += (ssize_t)rec;
        left -= rec;
        warmed(c, rec);
    }
    c->sink = NULL;
    *out_len = c->sink_len;
    return taken;
}

size_t tls_conn_pending(const struct tls_conn *c)
{
    return c->out.len;
}

const void *tls_conn_peek(const struct tls_conn *c, size_t *len)
{
    *len = c->out.len;
    return c->out.data + c->out.off;
}

void tls_conn_consume(struct tls_conn *c, size_t n)
{
    queue_drop(&c->out, n);
}

void tls_conn_close_notify(struct tls_conn *c)
{
    if (c->state != ST_OPEN || c->closing)
        return;
    c->closing = true;
    if (SSL_shutdown(c->ssl) < 0)
        ERR_clear_error();
    if (c->seal)
        seal_flush(c);
}

void tls_conn_trim(struct tls_conn *c)
{
    if (c->in.len == 0)
        queue_free(&c->in);
    if (c->out.len == 0)
        queue_free(&c->out);
    if (c->ktls_out.len == 0)
        queue_free(&c->ktls_out);
}

void tls_conn_ktls_allow(struct tls_conn *c, unsigned ciphers)
{
    c->ktls_ciphers = (uint8_t)ciphers;
    if (ciphers)
        SSL_set_options(c->ssl, SSL_OP_ENABLE_KTLS);
}

void tls_conn_seal_allow(struct tls_conn *c)
{
    c->seal_allowed = true;
    SSL_set_options(c->ssl, SSL_OP_ENABLE_KTLS);
}

bool tls_conn_sealing(const struct tls_conn *c)
{
    return c->seal != 0;
}

enum tls_ktls tls_conn_ktls(const struct tls_conn *c)
{
    /* OpenSSL 3.0 answers a KeyUpdate request only with its next SSL_write, which never comes
     * after the switch: the request stays pending (SSL_get_key_update_type). Stopped with the
     * keys not yet installed: they go in first, for what came before. */
    if (c->ktls == TLS_KTLS_ON &&
        (c->ktls_stop || SSL_get_key_update_type(c->ssl) != SSL_KEY_UPDATE_NONE))
        return TLS_KTLS_BROKEN;
    return (enum tls_ktls)c->ktls;
}

const void *tls_conn_ktls_keys(const struct tls_conn *c, size_t *len)
{
    *len = c->ktls == TLS_KTLS_KEYS ? c->ktls_keys_len : 0;
    return *len ? c->ktls_keys : NULL;
}

void tls_conn_ktls_installed(struct tls_conn *c)
{
    OPENSSL_cleanse(c->ktls_keys, sizeof(c->ktls_keys));
    c->ktls_keys_len = 0;
    if (c->ktls == TLS_KTLS_KEYS)
        c->ktls = TLS_KTLS_ON;
}

const void *tls_conn_record(const struct tls_conn *c, uint8_t *type, size_t *len)
{
    const struct tls_queue *q = &c->ktls_out;
    if (q->len < KTLS_HEAD)
        return NULL;
    const unsigned char *head = (const unsigned char *)q->data + q->off;
    *type = head[0];
    *len = (size_t)head[1] << 8 | head[2];
    return head + KTLS_HEAD;
}

void tls_conn_record_sent(struct tls_conn *c)
{
    uint8_t type;
    size_t len;
    if (!tls_conn_record(c, &type, &len))
        return;
    if (c->ktls_out.len == KTLS_HEAD + len)
        c->ktls_open = 0; /* that was the last record: nothing more may join it */
    queue_drop(&c->ktls_out, KTLS_HEAD + len);
}

bool tls_conn_owes(const struct tls_conn *c)
{
    return c->out.len || c->ktls_out.len || c->ktls == TLS_KTLS_KEYS ||
           tls_conn_ktls(c) == TLS_KTLS_BROKEN;
}

bool tls_conn_established(const struct tls_conn *c)
{
    return c->state == ST_OPEN;
}

bool tls_conn_resumed(const struct tls_conn *c)
{
    return c->ssl && SSL_session_reused(c->ssl);
}

enum tls_alpn tls_conn_alpn(const struct tls_conn *c)
{
    const unsigned char *p;
    unsigned len;
    SSL_get0_alpn_selected(c->ssl, &p, &len);
    if (len == 2 && memcmp(p, "h2", 2) == 0)
        return TLS_ALPN_H2;
    if (len == 8 && memcmp(p, "http/1.1", 8) == 0)
        return TLS_ALPN_HTTP1;
    return TLS_ALPN_NONE;
}

const char *tls_conn_sni(const struct tls_conn *c)
{
    return SSL_get_servername(c->ssl, TLSEXT_NAMETYPE_host_name);
}

const char *tls_conn_version(const struct tls_conn *c)
{
    return SSL_get_version(c->ssl);
}

const char *tls_conn_cipher(const struct tls_conn *c)
{
    return SSL_get_cipher_name(c->ssl);
}

const char *tls_conn_site_name(const struct tls_conn *c)
{
    if (c->by_site)
        return SSL_get_servername(c->ssl, TLSEXT_NAMETYPE_host_name);
    return c->ctx->groups[c->group].site_name;
}

bool tls_conn_only_cert(const struct tls_conn *c)
{
    return c->ctx->num_groups < 2;
}

bool tls_conn_covers(struct tls_conn *c, const char *host, size_t len)
{
    if (tls_conn_only_cert(c) || (len == c->ok_host_len && memcmp(host, c->ok_host, len) == 0))
        return true;
    /* An address is no name a browser could have coalesced onto this connection (RFC 9110
     * 15.5.20 is about names), and a load balancer's probe of https://ADDR/ must not get 421. */
    X509 *leaf = c->ctx->groups[c->group].leaf;
    bool ok = host[0] == '[' || X509_check_ip_asc(leaf, host, 0) >= 0 ||
              X509_check_host(leaf, host, len, 0, NULL) == 1;
    ERR_clear_error();
    if (ok && len <= sizeof(c->ok_host)) {
        memcpy(c->ok_host, host, len);
        c->ok_host_len = (uint8_t)len;
    }
    return ok;
}

int tls_pair_check(const struct tls_cert_files *f, char *why, size_t why_len)
{
    struct tls_ctx scratch = {0}; /* load_pair's warnings go nowhere here */
    struct pair p;
    int rc = load_pair(&scratch, f, &p, why, why_len);
    if (rc == 0)
        pair_free(&p);
    return rc;
}

size_t tls_plain_http_400(char *buf, size_t cap, const char *date)
{
    static const char body[] =
        "<html>\r\n<head><title>400 The plain HTTP request was sent to HTTPS port</title></head>"
        "\r\n<body>\r\n<h1>400 Bad Request</h1>\r\n<p>The plain HTTP request was sent to HTTPS "
        "port.</p>\r\n</body>\r\n</html>\r\n";
    int n = snprintf(buf, cap,
                     "HTTP/1.1 400 Bad Request\r\nServer: ringhttpd\r\nDate: %s\r\n"
                     "Content-Type: text/html\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n"
                     "%s",
                     date, sizeof(body) - 1, body);
    return n > 0 && (size_t)n < cap ? (size_t)n : 0;
}
