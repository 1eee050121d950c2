/* TLS connections over this module's own BIO: the handshake, reading, what waits to be sent;
 * see tls.h. */
#include "tls/tls.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>

void tls_conn_fini(struct tls_conn *c)
{
    if (!c->ssl)
        return;
    tls_record_bind(c); /* SSL_free pops a handshake's buffering BIO off the shared one */
    SSL_free(c->ssl);
    tls_queue_free(&c->in);
    tls_queue_free(&c->out);
    tls_queue_free(&c->ktls_out);
    OPENSSL_cleanse(c->ktls_keys, sizeof(c->ktls_keys));
    EVP_CIPHER_CTX_free(c->seal_ctx); /* cleanses its key */
    OPENSSL_cleanse(c->seal_iv, sizeof(c->seal_iv));
    tls_ctx_put(c->ctx);
    *c = (struct tls_conn){0};
}

int tls_conn_feed(struct tls_conn *c, const void *data, size_t len)
{
    int rc = tls_conn_settle(c);
    return rc ? rc : tls_queue_append(&c->in, data, len);
}

/* Into an empty queue the bytes are lent, not copied: a keep-alive request's record is read
 * from the engine's buffer, where a copy cost a 4 KiB malloc, a memcpy and a free per request
 * (tls_conn_trim frees the empty queue between requests). */
int tls_conn_lend(struct tls_conn *c, const void *data, size_t len)
{
    if (c->lent_len || c->in.len)
        return tls_conn_feed(c, data, len);
    c->lent = data;
    c->lent_len = len;
    return 0;
}

int tls_conn_settle(struct tls_conn *c)
{
    if (c->lent_len == 0)
        return 0;
    int rc = tls_queue_append(&c->in, c->lent, c->lent_len);
    c->lent = NULL;
    c->lent_len = 0;
    return rc;
}

size_t tls_conn_buffered(const struct tls_conn *c)
{
    return c->in.len + c->lent_len;
}

/* The first byte of a TLS connection is a handshake record's type (22). An upper-case letter is
 * an HTTP method: that client gets a readable answer instead of an alert it cannot read. */
static int sniff(struct tls_conn *c)
{
    if (c->state != TLS_ST_NEW)
        return 0;
    if (c->in.len == 0 && c->lent_len == 0)
        return TLS_AGAIN;
    unsigned char first = (unsigned char)(c->in.len ? c->in.data[c->in.off] : c->lent[0]);
    if (first == 22) {
        c->state = TLS_ST_HANDSHAKE;
        return 0;
    }
    c->state = TLS_ST_FAILED;
    return first >= 'A' && first <= 'Z' ? TLS_PLAIN_HTTP : -EPROTO;
}

/* Maps an OpenSSL failure to TLS_AGAIN, 0 (close_notify) or -EPROTO. */
static int failure(struct tls_conn *c, int ret)
{
    switch (SSL_get_error(c->ssl, ret)) {
    case SSL_ERROR_WANT_READ:
        return TLS_AGAIN;
    case SSL_ERROR_WANT_CLIENT_HELLO_CB: /* client_hello_cb: a certificate on demand */
        return TLS_WAIT;
    case SSL_ERROR_ZERO_RETURN:
        return 0;
    default:
        ERR_clear_error();
        c->state = TLS_ST_FAILED;
        return -EPROTO;
    }
}

int tls_conn_handshake(struct tls_conn *c)
{
    if (c->state == TLS_ST_OPEN)
        return 1;
    if (c->state == TLS_ST_FAILED)
        return -EPROTO;
    int rc = sniff(c);
    if (rc)
        return rc;
    tls_record_bind(c);
    int r = SSL_do_handshake(c->ssl);
    if (c->seal && tls_record_seal_flush(c) != 0)
        return -EPROTO;
    if (r == 1) {
        c->state = TLS_ST_OPEN;
        return 1;
    }
    rc = failure(c, r);
    return rc == 0 ? -EPROTO : rc;
}

void tls_conn_give_up(struct tls_conn *c)
{
    c->late = true;
}

ssize_t tls_conn_read(struct tls_conn *c, void *buf, size_t cap)
{
    if (c->state != TLS_ST_OPEN) {
        int rc = tls_conn_handshake(c);
        if (rc != 1)
            return rc;
    }
    if (c->seal_stop || c->acme) /* RFC 8737 3: a validation carries no data */
        return -EPROTO;
    /* Nothing fed and nothing held: SSL_read would only find that out, after taking a read
     * buffer (16 KiB, SSL_MODE_RELEASE_BUFFERS) and giving it back; one malloc and free per
     * keep-alive request, since the caller reads until TLS_AGAIN. */
    if (c->in.len == 0 && c->lent_len == 0 && !SSL_has_pending(c->ssl))
        return TLS_AGAIN;
    size_t n;
    tls_record_bind(c);
    int r = SSL_read_ex(c->ssl, buf, cap, &n);
    if (c->seal) {
        /* tickets, alerts; and a KeyUpdate request, which OpenSSL would answer only in its next
         * SSL_write (never called once the keys are here): this side stops instead */
        if (tls_record_seal_flush(c) != 0)
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
    tls_queue_drop(&c->out, n);
}

void tls_conn_close_notify(struct tls_conn *c)
{
    if (c->state != TLS_ST_OPEN || c->closing)
        return;
    c->closing = true;
    tls_record_bind(c);
    if (SSL_shutdown(c->ssl) < 0)
        ERR_clear_error();
    if (c->seal)
        tls_record_seal_flush(c);
}

void tls_conn_trim(struct tls_conn *c)
{
    if (c->in.len == 0)
        tls_queue_free(&c->in);
    if (c->out.len == 0)
        tls_queue_free(&c->out);
    if (c->ktls_out.len == 0)
        tls_queue_free(&c->ktls_out);
}

bool tls_conn_owes(const struct tls_conn *c)
{
    return c->out.len || c->ktls_out.len || c->ktls == TLS_KTLS_KEYS ||
           tls_conn_ktls(c) == TLS_KTLS_BROKEN;
}

bool tls_conn_established(const struct tls_conn *c)
{
    return c->state == TLS_ST_OPEN;
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
