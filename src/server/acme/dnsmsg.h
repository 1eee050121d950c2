/* dnsmsg: the DNS messages DNS-01 needs (issue 40), sans I/O: a query (TXT, SOA), an RFC 2136
 * UPDATE that adds or deletes one TXT record, its TSIG signature (RFC 8945, hmac-sha256), the
 * reading of an answer (bounded: every length checked against the message, compression pointers
 * followed backwards only) and the verification of its TSIG; and the TSIG key file.
 * Must not: make a system call, read a clock (the caller passes now) or allocate.
 * Ownership: buffers are the caller's; what a parse returns points into the message it read. */
#ifndef ACME_DNSMSG_H
#define ACME_DNSMSG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define DNSMSG_MAX 4096     /* the largest message built or read (our UDP buffer) */
#define DNSMSG_NAME_MAX 256 /* a name as text: 253 characters, dots, the NUL */

#define DNS_CNAME 5
#define DNS_SOA 6
#define DNS_TXT 16
#define DNS_TSIG 250

#define DNS_NOERROR 0
#define DNS_NXDOMAIN 3
#define DNS_REFUSED 5
#define DNS_NOTAUTH 9

/* A TSIG key: its name (text, lower case, no trailing dot) and secret; hmac-sha256 only. */
struct dnsmsg_key {
    char name[DNSMSG_NAME_MAX];
    unsigned char secret[64];
    size_t len;
};

/* The first key of a key file: BIND's `key "NAME" { algorithm hmac-sha256; secret "B64"; };`
 * (tsig-keygen's output, with # and // comments) or knot's `key: - id: NAME / algorithm:
 * hmac-sha256 / secret: B64` (keymgr -t's). 0, or -EINVAL with one line in why. */
int dnsmsg_key_parse(const char *text, size_t len, struct dnsmsg_key *k, char *why, size_t why_len);

/* A query for name's records of type (rd: recursion desired). Its length, or 0 when name is
 * no valid name or cap too small. */
size_t dnsmsg_query(uint8_t *out, size_t cap, uint16_t id, const char *name, uint16_t type,
                    bool rd);

/* An UPDATE of zone: add (ttl seconds) or delete the TXT record name = value. Its length, or 0
 * when a name or the value (at most 255 bytes) does not fit. */
size_t dnsmsg_update_txt(uint8_t *out, size_t cap, uint16_t id, const char *zone, const char *name,
                         const char *value, bool add, uint32_t ttl);

/* Appends the TSIG record signing msg[0..len) (time signed: now, fudge 300 s) and counts it in
 * ARCOUNT; mac gets the MAC (the response's is computed over it). The new length, or 0 when
 * cap is too small. */
size_t dnsmsg_tsig_sign(uint8_t *msg, size_t len, size_t cap, const struct dnsmsg_key *k,
                        uint64_t now, uint8_t mac[32]);

/* What an answer says. */
struct dnsmsg_reply {
    uint16_t id;
    bool tc;                    /* truncated: ask again over TCP */
    int rcode;                  /* the 4-bit RCODE */
    bool has_txt;               /* the TXT record asked for (txt_name = txt_value, or at the end of
                                 * txt_name's CNAME chain in the answers) is among the answers */
    char zone[DNSMSG_NAME_MAX]; /* the owner of the first SOA in the answers or authority, or "" */
    /* its TSIG record, when it has one (the last additional record) */
    size_t tsig_at; /* where the record starts (0: none) */
    char tsig_key[DNSMSG_NAME_MAX];
    uint64_t tsig_time;
    uint16_t tsig_fudge, tsig_orig_id, tsig_error;
    const uint8_t *tsig_mac, *tsig_other;
    size_t tsig_mac_len, tsig_other_len;
    bool tsig_alg_ok; /* hmac-sha256 */
};

/* Reads the answer m[0..len): 0 with r, or -EBADMSG (truncated, a name that loops or runs
 * past the end, a count the records do not hold). txt_name may be NULL. */
int dnsmsg_parse(const uint8_t *m, size_t len, const char *txt_name, const char *txt_value,
                 struct dnsmsg_reply *r);

/* Whether the TSIG r found in answer m[0..len) is k's over the request whose MAC was req_mac,
 * signed within its fudge of now: 0, -EBADMSG (none, another key or algorithm, a wrong MAC),
 * -ETIME (the time is off). */
int dnsmsg_tsig_verify(const uint8_t *m, size_t len, const struct dnsmsg_reply *r,
                       const struct dnsmsg_key *k, const uint8_t req_mac[32], uint64_t now);

/* The RCODE's name ("REFUSED"), or "RCODE n" in buf; and the TSIG error's ("BADSIG"). */
const char *dnsmsg_rcode_name(int rcode, char *buf, size_t cap);

#endif
