/* A TLS connection's records: the BIO, the sealer, kernel TLS; see tls_record.h. */
#include "tls/tls_record.h"

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <linux/tls.h>

#include <openssl/bio.h>
#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>

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

/* ---- the BIO: this module's queues, never a socket -------------------------------------- */

int tls_queue_append(struct tls_queue *q, const void *data, size_t len)
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

void tls_queue_drop(struct tls_queue *q, size_t n)
{
    q->off += (uint32_t)n;
    q->len -= (uint32_t)n;
    if (q->len == 0)
        q->off = 0;
}

void tls_queue_free(struct tls_queue *q)
{
    free(q->data);
    *q = (struct tls_queue){0};
}

/* Queued bytes first, then the lent ones (lent only into an empty queue: tls_conn_lend). */
static int bio_read(BIO *b, char *buf, size_t size, size_t *done)
{
    struct tls_conn *c = BIO_get_data(b);
    BIO_clear_retry_flags(b);
    if (c->in.len == 0 && c->lent_len == 0) {
        BIO_set_retry_read(b);
        *done = 0;
        return 0;
    }
    size_t n;
    if (c->in.len) {
        n = size < c->in.len ? size : c->in.len;
        memcpy(buf, c->in.data + c->in.off, n);
        tls_queue_drop(&c->in, n);
    } else {
        n = size < c->lent_len ? size : c->lent_len;
        memcpy(buf, c->lent, n);
        c->lent += n;
        c->lent_len -= n;
    }
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
    if (n < len && tls_queue_append(&c->out, data + n, len - n) != 0)
        return 0;
    *done = len;
    return 1;
}

/* ---- the sealer: records sealed here with the keys OpenSSL hands over (tls_record.h) ----- */

enum seal_mode { SEAL_NONE, SEAL_13, SEAL_12_GCM, SEAL_12_CHACHA };

/* Bytes a record adds to its plaintext: header, TLS 1.2 GCM's explicit nonce, TLS 1.3's inner
 * content type, tag. */
static size_t seal_overhead(const struct tls_conn *c)
{
    return 5 + 16 + (c->seal == SEAL_13 ? 1 : c->seal == SEAL_12_GCM ? 8 : 0);
}

/* The cipher and key of the crypto_info the sealer keeps in c->ktls_keys, or NULL. */
static const EVP_CIPHER *seal_cipher(const struct tls_conn *c, const unsigned char **key)
{
    struct tls_crypto_info ci;
    memcpy(&ci, c->ktls_keys, sizeof(ci)); /* ktls_keys is a byte array: no alignment */
    switch (ci.cipher_type) {
    case TLS_CIPHER_AES_GCM_128:
        *key = c->ktls_keys + offsetof(struct tls12_crypto_info_aes_gcm_128, key);
        return EVP_aes_128_gcm();
    case TLS_CIPHER_AES_GCM_256:
        *key = c->ktls_keys + offsetof(struct tls12_crypto_info_aes_gcm_256, key);
        return EVP_aes_256_gcm();
    case TLS_CIPHER_CHACHA20_POLY1305:
        *key = c->ktls_keys + offsetof(struct tls12_crypto_info_chacha20_poly1305, key);
        return EVP_chacha20_poly1305();
    default:
        return NULL;
    }
}

/* Makes the sealer's cipher context from the key it keeps: when the keys are taken, and at the
 * first record after tls_conn_idle freed it. 0 or -EPROTO. */
static int seal_key(struct tls_conn *c)
{
    const unsigned char *key = NULL;
    const EVP_CIPHER *cipher = seal_cipher(c, &key);
    EVP_CIPHER_CTX *e = cipher ? EVP_CIPHER_CTX_new() : NULL;
    if (!e || EVP_EncryptInit_ex(e, cipher, NULL, key, NULL) != 1) {
        EVP_CIPHER_CTX_free(e);
        ERR_clear_error();
        return -EPROTO;
    }
    c->seal_ctx = e;
    return 0;
}

/* Takes the write keys instead of kernel TLS (the same struct tls12_crypto_info_*): 1 when
 * taken (OpenSSL then writes plaintext records), 0 to leave encrypting to OpenSSL. The
 * crypto_info is kept in c->ktls_keys (unused while this module seals: kernel TLS and the
 * sealer never both take a connection's keys), so tls_conn_idle can free the cipher context. */
static long seal_take(struct tls_conn *c, const void *info)
{
    const struct tls_crypto_info *ci = info;
    const unsigned char *rec_seq;
    unsigned char iv[12];
    size_t len;
    if (ci->version != TLS_1_2_VERSION && ci->version != TLS_1_3_VERSION)
        return 0;
    bool gcm = ci->cipher_type != TLS_CIPHER_CHACHA20_POLY1305;
    if (ci->cipher_type == TLS_CIPHER_AES_GCM_128) {
        const struct tls12_crypto_info_aes_gcm_128 *k = info;
        len = sizeof(*k), rec_seq = k->rec_seq;
        memcpy(iv, k->salt, 4);
        memcpy(iv + 4, k->iv, 8);
    } else if (ci->cipher_type == TLS_CIPHER_AES_GCM_256) {
        const struct tls12_crypto_info_aes_gcm_256 *k = info;
        len = sizeof(*k), rec_seq = k->rec_seq;
        memcpy(iv, k->salt, 4);
        memcpy(iv + 4, k->iv, 8);
    } else if (ci->cipher_type == TLS_CIPHER_CHACHA20_POLY1305) {
        const struct tls12_crypto_info_chacha20_poly1305 *k = info;
        len = sizeof(*k), rec_seq = k->rec_seq;
        memcpy(iv, k->iv, 12);
    } else {
        return 0;
    }
    memcpy(c->ktls_keys, info, len);
    c->ktls_keys_len = (uint8_t)len;
    if (seal_key(c) != 0) {
        OPENSSL_cleanse(c->ktls_keys, sizeof(c->ktls_keys));
        c->ktls_keys_len = 0;
        OPENSSL_cleanse(iv, sizeof(iv));
        return 0;
    }
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

/* OpenSSL 3.0 charges each call into a cipher context for its parameters (by name, with
 * string compares), besides the bytes: ~600 instructions an EVP_EncryptUpdate, ~820 for the
 * nonce by EVP_EncryptInit_ex (it asks the IV's length anew) and ~770 for the tag by
 * EVP_CIPHER_CTX_ctrl, against ~4,700 for the whole of a 1 KiB record sealed in one update
 * (issue 41: a callgrind of HTTPS keep-alive 1 KiB; the microbenchmark is in bench/README.md).
 * So a record's plaintext of up to SEAL_GATHER bytes is gathered into its place in the output
 * (headers and a small body are two pieces, and TLS 1.3 adds the type byte: three updates)
 * and encrypted there in one; a larger one is encrypted from where it is, no copy, where the
 * calls are a few hundredths of its cost. */
#define SEAL_GATHER 4096

/* The next piece of the plaintext gathered from iov (segment *i, offset *off, both advanced),
 * at most `left` bytes; its length in *len. */
static const unsigned char *seal_piece(const struct iovec *iov, int *i, size_t *off, size_t left,
                                       size_t *len)
{
    while (iov[*i].iov_len == *off) {
        (*i)++;
        *off = 0;
    }
    size_t piece = iov[*i].iov_len - *off;
    *len = piece < left ? piece : left;
    const unsigned char *p = (const unsigned char *)iov[*i].iov_base + *off;
    *off += *len;
    return p;
}

/* The record's nonce into e: for AES-GCM as the whole IV by the TLS "fixed IV" parameter at
 * length -1 (OpenSSL's own TLS 1.2 code restores a whole IV so; the next update starts with
 * it), which skips EVP_EncryptInit_ex's cost above; ChaCha20, or an OpenSSL that refuses the
 * parameter, by EVP_EncryptInit_ex. */
static bool seal_nonce(struct tls_conn *c, EVP_CIPHER_CTX *e, unsigned char *nonce)
{
    struct tls_crypto_info ci;
    memcpy(&ci, c->ktls_keys, sizeof(ci)); /* ktls_keys is a byte array: no alignment */
    if (ci.cipher_type != TLS_CIPHER_CHACHA20_POLY1305) {
        OSSL_PARAM p[2] = {OSSL_PARAM_construct_octet_string(OSSL_CIPHER_PARAM_AEAD_TLS1_IV_FIXED,
                                                             nonce, (size_t)-1),
                           OSSL_PARAM_END};
        if (EVP_CIPHER_CTX_set_params(e, p) == 1)
            return true;
        ERR_clear_error();
    }
    return EVP_EncryptInit_ex(e, NULL, NULL, NULL, nonce) == 1;
}

/* The tag after EVP_EncryptFinal_ex, by the parameter itself (EVP_CIPHER_CTX_ctrl builds the
 * same one, at twice the cost). */
static bool seal_tag(EVP_CIPHER_CTX *e, unsigned char *tag)
{
    OSSL_PARAM p[2] = {OSSL_PARAM_construct_octet_string(OSSL_CIPHER_PARAM_AEAD_TAG, tag, 16),
                       OSSL_PARAM_END};
    if (EVP_CIPHER_CTX_get_params(e, p) == 1)
        return true;
    ERR_clear_error();
    return EVP_CIPHER_CTX_ctrl(e, EVP_CTRL_AEAD_GET_TAG, 16, tag) == 1;
}

/* Seals one record of type `type` from len plaintext bytes gathered from iov (from segment
 * *i, offset *off, both advanced) into out, which has len + seal_overhead bytes. Returns the
 * record's length, or 0 (OpenSSL failed). */
static size_t seal_record(struct tls_conn *c, uint8_t type, const struct iovec *iov, int *i,
                          size_t *off, size_t len, unsigned char *out)
{
    if (!c->seal_ctx && seal_key(c) != 0)
        return 0; /* tls_conn_idle freed it */
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
    size_t plain = len + (c->seal == SEAL_13); /* TLS 1.3: the type byte ends the plaintext */
    int n;
    if (!seal_nonce(c, e, nonce) || EVP_EncryptUpdate(e, NULL, &n, aad, (int)aad_len) != 1)
        return 0;
    if (plain <= SEAL_GATHER) {
        size_t piece = 0;
        for (size_t done = 0; done < len; done += piece) {
            const unsigned char *p = seal_piece(iov, i, off, len - done, &piece);
            memcpy(ct + done, p, piece);
        }
        if (c->seal == SEAL_13)
            ct[len] = type;
        if (EVP_EncryptUpdate(e, ct, &n, ct, (int)plain) != 1)
            return 0;
        ct += n;
    } else {
        size_t piece = 0;
        for (size_t done = 0; done < len; done += piece) {
            const unsigned char *p = seal_piece(iov, i, off, len - done, &piece);
            if (EVP_EncryptUpdate(e, ct, &n, p, (int)piece) != 1)
                return 0;
            ct += n;
        }
        if (c->seal == SEAL_13) {
            if (EVP_EncryptUpdate(e, ct, &n, &type, 1) != 1)
                return 0;
            ct += n;
        }
    }
    if (EVP_EncryptFinal_ex(e, ct, &n) != 1)
        return 0;
    ct += n;
    if (ct != out + head + plain || !seal_tag(e, ct))
        return 0;
    c->seal_seq++;
    return 5 + body;
}

/* Seals the records OpenSSL wrote since the keys were taken (ktls_out, each with its type)
 * into the queue of ciphertext to send, in order: 0, or -EPROTO (the connection fails). */
int tls_record_seal_flush(struct tls_conn *c)
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
        if (n == 0 || tls_queue_append(&c->out, rec, n) != 0)
            rc = -EPROTO;
        tls_queue_drop(q, KTLS_HEAD + len);
    }
    c->ktls_open = 0;
    if (rc) {
        ERR_clear_error();
        c->state = TLS_ST_FAILED;
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
            if (tls_queue_append(q, head, sizeof(head)) != 0)
                return -ENOMEM;
            c->ktls_open = KTLS_HEAD;
        }
        size_t n = KTLS_HEAD + TLS_RECORD_PLAIN - c->ktls_open;
        if (n > len)
            n = len;
        if (tls_queue_append(q, data, n) != 0)
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
        return (long)(c->in.len + c->lent_len);
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

void tls_record_bind(struct tls_conn *c)
{
    BIO_set_data(SSL_get_rbio(c->ssl), c);
}

BIO_METHOD *tls_record_bio_method(void)
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
            c->state = TLS_ST_FAILED;
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
    if (c->state != TLS_ST_OPEN || c->closing || c->ktls != TLS_KTLS_NO)
        return -EPROTO;
    size_t used = *out_len;
    if (c->out.len) {
        size_t n = cap - used < c->out.len ? cap - used : c->out.len;
        memcpy(out + used, c->out.data + c->out.off, n);
        tls_queue_drop(&c->out, n);
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
    tls_record_bind(c); /* SSL_write_ex below */
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
            c->state = TLS_ST_FAILED;
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

bool tls_conn_idle(struct tls_conn *c)
{
    if (!c->seal_ctx)
        return false;
    EVP_CIPHER_CTX_free(c->seal_ctx); /* cleanses its key schedule; the key stays in ktls_keys */
    c->seal_ctx = NULL;
    return true;
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
    tls_queue_drop(&c->ktls_out, KTLS_HEAD + len);
}
