/* tls: TLS 1.2 and 1.3 on OpenSSL 3, sans I/O. Ciphertext the engine received is fed in and
 * plaintext read out for the protocol; plaintext to send is sealed into records written straight
 * into the caller's send buffer; bytes TLS sends on its own (handshake flights, tickets, alerts,
 * close_notify) wait in a queue the caller drains. Also the per-worker context (certificates
 * chosen by SNI, Mozilla "intermediate" defaults or TLS 1.3 only, ALPN, session tickets whose
 * keys every worker derives alike) and the "plain HTTP sent to the TLS port" detector.
 * Must not: touch a socket or any fd after tls_ctx_new (OpenSSL sees only this module's BIO),
 * block, or read the clock for tickets (the worker passes its time); no logging on the request
 * path (start-up problems come back as text for the caller to print). With kernel TLS it hands
 * over keys and plaintext records; installing them on the socket is the caller's (the engine's).
 * Ownership: one struct tls_keys per process (the ticket secret: read-only once made, shared by
 * every worker); one struct tls_ctx per worker, touched by that worker's thread only once handed
 * over, counted by its connections so a reload can replace it while they live on; a struct
 * tls_conn per connection, embedded by its owner, which must not move while in use. */
#ifndef TLS_TLS_H
#define TLS_TLS_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#define TLS_MAX_CERTS 16

struct x509_st;
struct evp_pkey_st;

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

/* Ticket keys change every 12 hours; a ticket made with the previous key is still accepted
 * (then replaced by a fresh one), so a ticket lives 12 to 24 hours. */
#define TLS_TICKET_ROTATE (12 * 3600)

struct tls_cert_files {
    const char *cert; /* PEM: the certificate, then its chain */
    const char *key;  /* PEM: its private key (ECDSA, RSA, Ed25519...) */
    /* A site's own pair (issue 19): the site's names ("example.org", "*.example.org"), which
     * SNI matches before any certificate's own names; NULL/0 for a process-level pair. */
    const char *const *hosts;
    int num_hosts;
};

/* Automatic HTTPS's hooks (issue 27), installed by the server: the TLS-ALPN-01 challenge
 * certificate pending for SNI name name (RFC 8737), with a reference each for the caller; 0,
 * or -ENOENT when there is none. */
struct tls_challenge {
    int (*cert)(void *arg, const char *name, struct x509_st **cert, struct evp_pkey_st **key);
    void *arg; /* per context: the worker's reader of the challenge table */
};

struct tls_settings {
    const struct tls_cert_files *certs; /* the first pair is the default (no or unknown SNI) */
    int num_certs;                      /* 1..TLS_MAX_CERTS (0.. when certless) */
    /* No default pair (automatic HTTPS with no --tls-cert): a name no pair covers (one still
     * waiting for its certificate), or no SNI, gets the unrecognized_name alert. */
    bool certless;
    /* A ClientHello offering ALPN "acme-tls/1" is answered with challenge's certificate for its
     * SNI name and nothing else: such a connection carries no data (tls_conn_read refuses). */
    struct tls_challenge challenge; /* .cert NULL: none */
    int min_version;        /* 12: TLS 1.2 and 1.3, Mozilla "intermediate"; 13: TLS 1.3 only */
    bool alpn_h2;           /* the protocol layer serves HTTP/2: ALPN offers h2 before http/1.1 */
    unsigned ticket_rotate; /* seconds per ticket key; 0 means TLS_TICKET_ROTATE */
};

struct tls_keys;
struct tls_ctx;
struct ssl_st;

/* A connection's TLS state. Members are the module's; read them through the functions below. */
struct tls_queue {
    char *data;
    uint32_t off, len, cap; /* len bytes wait at data + off */
};

struct tls_conn {
    struct ssl_st *ssl; /* NULL when not in use */
    struct tls_ctx *ctx;
    struct tls_queue in;  /* ciphertext fed, not yet taken by OpenSSL */
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
    uint8_t ktls_keys_len; /* bytes of ktls_keys while TLS_KTLS_KEYS */
    unsigned char ktls_keys[TLS_KTLS_KEYS_MAX];
    /* The sealer (tls_conn_seal_allow): the write keys OpenSSL handed over as for kernel TLS,
     * kept here to seal records as the kernel would; NULL ctx while OpenSSL seals. */
    struct evp_cipher_ctx_st *seal_ctx;
    uint64_t seal_seq;         /* the next record's sequence number */
    unsigned char seal_iv[12]; /* TLS 1.3 and ChaCha20: the IV; TLS 1.2 GCM: salt, then 0s */
    uint8_t seal;              /* enum seal_mode in tls.c: 0 while OpenSSL seals */
    bool seal_allowed;
    bool seal_stop; /* the peer asked for new keys: close_notify, then no more records */
    uint32_t warm;  /* application bytes sealed since the start or the last rest (saturates) */
    uint8_t state;
    bool closing; /* close_notify queued */
    bool by_site; /* SNI named a site whose own pair was chosen */
    bool acme;    /* a TLS-ALPN-01 validation: the challenge certificate, no data */
    int8_t group; /* the certificate group chosen (0: the default) */
    /* The caller's (rt/site.c's) per-connection cache of its last "not misdirected" verdict:
     * the site a request was routed to and the generation of the sites it belongs to. */
    const void *ok_site;
    unsigned ok_gen;
    uint8_t ok_host_len; /* tls_conn_covers' last host found covered (0: none) */
    char ok_host[47];
};

/* Return values beside byte counts and -errno. */
#define TLS_AGAIN (-EAGAIN)          /* needs more ciphertext (send what is pending first) */
#define TLS_PLAIN_HTTP (-EPROTOTYPE) /* the first bytes are plain HTTP: see tls_plain_http_400 */

enum tls_alpn { TLS_ALPN_NONE, TLS_ALPN_HTTP1, TLS_ALPN_H2 };

/* Where a connection's send side encrypts. */
enum tls_ktls {
    TLS_KTLS_NO,   /* in user space (tls_conn_seal) */
    TLS_KTLS_KEYS, /* switched: the keys wait for every byte made under the old ones to be sent */
    TLS_KTLS_ON,   /* the kernel seals: plaintext goes to the socket, records by tls_conn_record */
    TLS_KTLS_BROKEN, /* on, but the peer asked for new write keys (a TLS 1.3 KeyUpdate), which
                      * the kernel (6.1) cannot take: no more application data; what is owed
                      * and close_notify (records the current keys may still seal), then close */
};

/* The process's ticket secret, from the system's random source: 0 or -errno. */
int tls_keys_new(struct tls_keys **out);
void tls_keys_free(struct tls_keys *keys);

/* Builds a worker's context: reads every pair, checks that each key matches its certificate,
 * and groups pairs with the same names (one ECDSA and one RSA certificate for a host) into one
 * OpenSSL context. 0 with *out, or -errno with one line in why naming the file at fault.
 * A certificate that has expired or is not valid yet is not an error: the context is made and
 * tls_ctx_warnings says so. keys must outlive the context. */
int tls_ctx_new(const struct tls_settings *s, const struct tls_keys *keys, struct tls_ctx **out,
                char *why, size_t why_len);

/* Lines ("--tls-cert 'FILE' expired on ...\n") about what loaded but looks wrong, or "". */
const char *tls_ctx_warnings(const struct tls_ctx *ctx);

/* The wall clock (UNIX seconds) that picks the ticket key; the worker calls it once a second.
 * Every context given the same keys and time encrypts and accepts the same tickets. */
void tls_ctx_set_time(struct tls_ctx *ctx, int64_t wall);

/* Drops the owner's reference; the context goes when its last connection is finished too. */
void tls_ctx_put(struct tls_ctx *ctx);

/* Starts the server side of a connection on ctx: 0 or -ENOMEM. */
int tls_conn_init(struct tls_conn *c, struct tls_ctx *ctx);

/* Frees what c holds (sends nothing: queue close_notify first for a clean close). */
void tls_conn_fini(struct tls_conn *c);

/* Hands received ciphertext to c (copied): 0 or -ENOMEM. */
int tls_conn_feed(struct tls_conn *c, const void *data, size_t len);

/* Ciphertext fed and not yet decrypted (bound it: stop receiving while it is large). */
size_t tls_conn_buffered(const struct tls_conn *c);

/* Drives the handshake with what was fed: 1 once established, TLS_AGAIN, TLS_PLAIN_HTTP when the
 * first byte is an HTTP method's letter instead of a TLS record, or -EPROTO (a bad hello, a
 * version or cipher we refuse, garbage; an alert may be pending). Either way, send what
 * tls_conn_pending holds. */
int tls_conn_handshake(struct tls_conn *c);

/* Plaintext into buf (cap > 0), driving the handshake first when needed: bytes > 0, 0 when the
 * peer sent close_notify, TLS_AGAIN, TLS_PLAIN_HTTP, -EPROTO or -ENOMEM. */
ssize_t tls_conn_read(struct tls_conn *c, void *buf, size_t cap);

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

/* Ciphertext waiting to be sent outside a seal, and where: the pointer is valid until the next
 * call on c. tls_conn_consume(c, n) drops n of them once sent. */
size_t tls_conn_pending(const struct tls_conn *c);
const void *tls_conn_peek(const struct tls_conn *c, size_t *len);
void tls_conn_consume(struct tls_conn *c, size_t n);

/* Queues close_notify (once, and only after a completed handshake): send pending, then close. */
void tls_conn_close_notify(struct tls_conn *c);

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

/* Whether c has anything to do outside a seal: tls_conn_pending bytes, keys to install,
 * records for the kernel, or TLS_KTLS_BROKEN's close. */
bool tls_conn_owes(const struct tls_conn *c);

/* Frees c's empty buffers: called when the connection goes idle, so an idle keep-alive
 * connection holds no record buffers (OpenSSL's own are released as they empty). */
void tls_conn_trim(struct tls_conn *c);

bool tls_conn_established(const struct tls_conn *c);
bool tls_conn_resumed(const struct tls_conn *c);
enum tls_alpn tls_conn_alpn(const struct tls_conn *c);
const char *tls_conn_sni(const struct tls_conn *c);     /* the client's server name, or NULL */
const char *tls_conn_version(const struct tls_conn *c); /* "TLSv1.3"... */
const char *tls_conn_cipher(const struct tls_conn *c);

/* Which site the connection's certificate belongs to (issue 19): the SNI name when it picked
 * a site's own pair, else the first name of the site whose pair was chosen, or NULL when the
 * certificate is a process-level pair (then ask tls_conn_covers). */
const char *tls_conn_site_name(const struct tls_conn *c);

/* Whether the process has one certificate group only (no other certificate to be had). */
bool tls_conn_only_cert(const struct tls_conn *c);

/* Whether the connection's certificate names host (lower case, no port: a vhost_key); true
 * too for an IP address (no name to coalesce) and when tls_conn_only_cert. The last host found
 * covered is remembered, so a connection's next requests with it cost a compare. */
bool tls_conn_covers(struct tls_conn *c, const char *host, size_t len);

/* Checks one pair as tls_ctx_new would (files read, key matches the certificate): 0, or -errno
 * with one line in why naming the file at fault. For --check-config. */
int tls_pair_check(const struct tls_cert_files *f, char *why, size_t why_len);

/* The clear-text answer to plain HTTP on the TLS port (as nginx's "The plain HTTP request was
 * sent to HTTPS port"): a whole 400 response with Connection: close, written into buf with
 * date (an IMF-fixdate) in its Date field. Returns its length, or 0 when cap is too small. */
size_t tls_plain_http_400(char *buf, size_t cap, const char *date);

#endif
