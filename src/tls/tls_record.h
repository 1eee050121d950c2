/* tls_record: a TLS connection's records, sans I/O: the BIO (this module's queues, never a
 * socket) OpenSSL reads ciphertext from and writes records to; the sealer, which seals records
 * itself with the write keys OpenSSL hands over; kernel TLS's keys and plaintext records; record
 * sizing (small while a connection warms up). Also struct tls_conn, which every tls module uses.
 * Must not: choose certificates or drive the handshake (tls_ctx.c, tls.c); touch a socket.
 * Ownership: a struct tls_conn per connection, embedded by its owner (see tls.h). */
#ifndef TLS_TLS_RECORD_H
#define TLS_TLS_RECORD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

/* Largest plaintext of one record (the protocol's maximum), and the most bytes a record adds
 * to its plaintext with the suites we allow (header 5, explicit nonce 8 in TLS 1.2 GCM, tag 16,
 * content type 1 in TLS 1.3), rounded up. */
#define TLS_RECORD_PLAIN 16384
#define TLS_RECORD_OVERHEAD 64

/* A fresh or rested connection's first records are small, so the client decrypts its first
 * bytes as the first TCP segments arrive instead of waiting for a 16 KiB record to complete
 * (12 segments, more than an initial congestion window of 10): TLS_RECORD_SMALL bytes of
 * plaintext fit one segment of a 1500-byte MTU path (IPv6, TCP timestamps, TLS 1.2 GCM's 29
 * bytes, with a margin for tunnels); they last for the first TLS_RECORD_WARM bytes (about the
 * first two flights of slow start), then records are whole. tls_conn_rested starts over. */
#define TLS_RECORD_SMALL 1360
#define TLS_RECORD_WARM (32 * TLS_RECORD_SMALL)

/* The largest struct tls12_crypto_info_* (linux/tls.h) of the ciphers kernel TLS takes here:
 * AES-256-GCM and ChaCha20-Poly1305, 56 bytes. */
#define TLS_KTLS_KEYS_MAX 56

struct tls_ctx;
struct ssl_st;
struct bio_method_st;

/* A connection's TLS state. Members are the tls modules' (tls.c, tls_ctx.c, tls_record.c); read
 * them through the functions of tls.h. */
struct tls_queue {
    char *data;
    uint32_t off, len, cap; /* len bytes wait at data + off */
};

struct tls_conn {
    struct ssl_st *ssl; /* NULL when not in use */
    struct tls_ctx *ctx;
    struct tls_queue in; /* ciphertext fed, not yet taken by OpenSSL */
    /* Ciphertext fed while in was empty, read from the caller's buffer where it lies, before
     * anything is copied (tls_conn_settle copies what is left): lent_len bytes at lent. */
    const char *lent;
    size_t lent_len;
    struct tls_queue out; /* ciphertext produced outside a seal (handshake, tickets, alerts) */
    char *sink;           /* during a seal: the caller's buffer records go to */
    size_t sink_len, sink_cap;
    /* Kernel TLS, send side (tls_conn_ktls_allow): after the switch OpenSSL writes plaintext
     * records, kept in ktls_out as [content type][length, 2 bytes][bytes] each. */
    struct tls_queue ktls_out;
    uint32_t ktls_open;    /* bytes of the last record in ktls_out (still growing), or 0 */
    uint8_t ktls;          /* enum tls_ktls */
    uint8_t ktls_ciphers;  /* tls_conn_ktls_allow's */
    bool ktls_stop;        /* a KeyUpdate of ours was written: nothing from it on is sent */
    uint8_t ktls_type;     /* content type OpenSSL announced for its next record (0: none) */
    uint8_t ktls_keys_len; /* bytes of ktls_keys while TLS_KTLS_KEYS, or while sealing */
    /* TLS_KTLS_KEYS: the kernel's crypto_info; while the sealer seals, the same crypto_info as
     * it was handed over (its key remakes seal_ctx after tls_conn_idle) */
    unsigned char ktls_keys[TLS_KTLS_KEYS_MAX];
    /* The sealer (tls_conn_seal_allow): the write keys OpenSSL handed over as for kernel TLS,
     * kept here to seal records as the kernel would; NULL ctx while OpenSSL seals, and after
     * tls_conn_idle until the next record. */
    struct evp_cipher_ctx_st *seal_ctx;
    uint64_t seal_seq;         /* the next record's sequence number */
    unsigned char seal_iv[12]; /* TLS 1.3 and ChaCha20: the IV; TLS 1.2 GCM: salt, then 0s */
    uint8_t seal;              /* enum seal_mode in tls_record.c: 0 while OpenSSL seals */
    bool seal_allowed;
    bool seal_stop; /* the peer asked for new keys: close_notify, then no more records */
    uint32_t warm;  /* application bytes sealed since the start or the last rest (saturates) */
    uint8_t state;  /* enum tls_conn_state */
    bool closing;   /* close_notify queued */
    bool by_site;   /* SNI named a site whose own pair was chosen */
    bool acme;      /* a TLS-ALPN-01 validation: the challenge certificate, no data */
    bool ondemand;  /* the certificate came from tls_ondemand for the SNI name (issue 40) */
    bool late;      /* tls_conn_give_up: a parked handshake's next try is its last */
    int32_t group;  /* the certificate group chosen (0: the default), of thousands (issue 40) */
};

/* A connection's progress (tls_conn.state). */
enum tls_conn_state { TLS_ST_NEW, TLS_ST_HANDSHAKE, TLS_ST_OPEN, TLS_ST_FAILED };

/* Where a connection's send side encrypts. */
enum tls_ktls {
    TLS_KTLS_NO,   /* in user space (tls_conn_seal) */
    TLS_KTLS_KEYS, /* switched: the keys wait for every byte made under the old ones to be sent */
    TLS_KTLS_ON,   /* the kernel seals: plaintext goes to the socket, records by tls_conn_record */
    TLS_KTLS_BROKEN, /* on, but the peer asked for new write keys (a TLS 1.3 KeyUpdate), which
                      * the kernel (6.1) cannot take: no more application data; what is owed
                      * and close_notify (records the current keys may still seal), then close */
};

/* Seals plaintext from iov into records appended at out + *out_len (up to cap): first whatever
 * c has pending, then records of up to TLS_RECORD_PLAIN bytes (TLS_RECORD_SMALL while warming
 * up), as many as fit, gathering small segments into full records. Advances *out_len; returns the
 * plaintext bytes taken (0 when out is too full for a record; call again with room), -EPROTO, or
 * -ESHUTDOWN (the sealer stopped at a KeyUpdate request: send what is pending, then close). Needs
 * an established c. */
ssize_t tls_conn_seal(struct tls_conn *c, const struct iovec *iov, int iovcnt, char *out,
                      size_t cap, size_t *out_len);

/* c sent nothing for a while (TCP restarts slow start after an idle period): its next records
 * are small again, for TLS_RECORD_WARM bytes. */
void tls_conn_rested(struct tls_conn *c);

/*
 * The sealer (README "HTTPS"), where kernel TLS is not used: tls_conn_seal_allow, before the
 * handshake, has OpenSSL hand the application write keys over exactly as for kernel TLS, and
 * from then on this module seals every record itself with AES-GCM or ChaCha20-Poly1305 (TLS 1.2
 * and 1.3): tls_conn_seal encrypts the plaintext straight from the caller's iovec into out, with
 * no copy into OpenSSL's write buffer; OpenSSL's own later records (tickets, TLS 1.2's Finished,
 * alerts, close_notify) are sealed in order with the same sequence numbers and wait in
 * tls_conn_pending. Kernel TLS, when allowed too and the kernel takes the cipher, comes first.
 * A peer's KeyUpdate request (TLS 1.3) is not answered with new keys (deriving them needs the
 * traffic secret, which OpenSSL 3.0 gives only to a keylog callback, and that callback costs
 * every handshake ~15% more instructions in its sprintf): close_notify is queued,
 * tls_conn_seal returns -ESHUTDOWN and tls_conn_read -EPROTO from then on (close after sending
 * what is pending). Receiving stays in OpenSSL.
 */
void tls_conn_seal_allow(struct tls_conn *c);
bool tls_conn_sealing(const struct tls_conn *c); /* the keys were taken: this module seals */

/* c has nothing to send: frees the sealer's cipher context, OpenSSL's EVP_CIPHER_CTX with its
 * key schedule and GHASH table, 1.2 KB of an idle TLS connection's ~18 KB (OpenSSL keeps its
 * own write context too, unused once the keys are taken, and no API frees it). The key stays
 * in c; the next record remakes the context, ~5,500 instructions where a keep-alive HTTPS
 * request costs ~17,800, so the caller rations it (tls_xport.c). True when there was one to free
 * (not with kernel TLS, OpenSSL sealing, or one freed already). */
bool tls_conn_idle(struct tls_conn *c);

/*
 * Kernel TLS for the send side (README "HTTPS"). tls_conn_ktls_allow, before the handshake, says
 * the connection's socket has the "tls" ULP and which ciphers the kernel seals (bit (type -
 * TLS_CIPHER_AES_GCM_128) per linux/tls.h cipher_type; AES-GCM and ChaCha20-Poly1305 are taken):
 * when OpenSSL then switches to the application write keys (TLS 1.3: after the server's
 * Finished; 1.2: after its ChangeCipherSpec) with one of them, it hands this module the keys and
 * record sequence number instead of encrypting any further (OpenSSL 3's SSL_OP_ENABLE_KTLS,
 * through this module's BIO); with another it goes on in user space. Receiving stays in user
 * space: bytes already read from the socket cannot be handed back to the kernel. From
 * TLS_KTLS_KEYS on, tls_conn_seal refuses: the caller sends the protocol's plaintext itself.
 */
void tls_conn_ktls_allow(struct tls_conn *c, unsigned ciphers);
enum tls_ktls tls_conn_ktls(const struct tls_conn *c);

/* TLS_KTLS_KEYS: the kernel's struct tls12_crypto_info_* for setsockopt(SOL_TLS, TLS_TX), to be
 * set only once tls_conn_pending is 0 (every byte sealed under the old keys is on the socket).
 * tls_conn_ktls_installed then wipes them: TLS_KTLS_ON. */
const void *tls_conn_ktls_keys(const struct tls_conn *c, size_t *len);
void tls_conn_ktls_installed(struct tls_conn *c);

/* After the switch, records OpenSSL makes on its own (TLS 1.3 tickets, TLS 1.2's Finished,
 * alerts, close_notify) are plaintext for the kernel to seal, each sent alone with its content
 * type (cmsg TLS_SET_RECORD_TYPE), after the keys are installed: the next one (valid until the
 * next call on c), or NULL; tls_conn_record_sent drops it once sent. */
const void *tls_conn_record(const struct tls_conn *c, uint8_t *type, size_t *len);
void tls_conn_record_sent(struct tls_conn *c);

/* For tls.c and tls_ctx.c: a queue's bytes appended (0 or -ENOMEM), n dropped from its front,
 * its buffer freed. */
int tls_queue_append(struct tls_queue *q, const void *data, size_t len);
void tls_queue_drop(struct tls_queue *q, size_t n);
void tls_queue_free(struct tls_queue *q);

/* For tls_ctx.c: the BIO method over a connection's queues (one per context), or NULL. */
struct bio_method_st *tls_record_bio_method(void);

/* For tls.c: points the BIO, which every connection on c's context shares, at c. Called before
 * each OpenSSL call on c that may read, write or call back (handshake, read, write, shutdown,
 * free): the BIO's data is the connection it works for. */
void tls_record_bind(struct tls_conn *c);

/* For tls.c, while the sealer has the keys: seals the records OpenSSL wrote since (tickets,
 * alerts...) into the queue of ciphertext to send, in order: 0, or -EPROTO (c failed). */
int tls_record_seal_flush(struct tls_conn *c);

#endif
