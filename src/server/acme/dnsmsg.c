/* DNS messages for DNS-01; see dnsmsg.h. RFC 1035 4 (the format), RFC 2136 2 (UPDATE), RFC
 * 8945 4 (TSIG: what the MAC covers, in canonical form: names uncompressed, lower case). */
#include "server/acme/dnsmsg.h"

#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#define CLASS_IN 1
#define CLASS_NONE 254
#define CLASS_ANY 255
#define OP_UPDATE 5
#define FUDGE 300 /* seconds either side of the time signed, as BIND and knot sign */
#define ALG "hmac-sha256"
#define TSIG_VARS_MAX (2 * 255 + 32) /* key and algorithm names, the fixed fields */

/* ---- building ---- */

struct out {
    uint8_t *b;
    size_t len, cap;
    bool bad;
};

static void put(struct out *o, const void *p, size_t n)
{
    if (n == 0) /* (p may then be NULL, which memcpy must not get) */
        return;
    if (o->bad || n > o->cap - o->len) {
        o->bad = true;
        return;
    }
    memcpy(o->b + o->len, p, n);
    o->len += n;
}

static void put8(struct out *o, unsigned v)
{
    uint8_t b = (uint8_t)v;
    put(o, &b, 1);
}

static void put16(struct out *o, unsigned v)
{
    uint8_t b[2] = {(uint8_t)(v >> 8), (uint8_t)v};
    put(o, b, 2);
}

static void put32(struct out *o, uint32_t v)
{
    put16(o, v >> 16);
    put16(o, v & 0xffff);
}

static void put48(struct out *o, uint64_t v)
{
    put16(o, (unsigned)(v >> 32) & 0xffff);
    put32(o, (uint32_t)v);
}

/* name ("a.example.", "a.example" or "" for the root) in wire form, lower case. */
static void put_name(struct out *o, const char *name)
{
    size_t n = strlen(name);
    if (n && name[n - 1] == '.')
        n--;
    if (n > 253) {
        o->bad = true;
        return;
    }
    for (const char *p = name, *end = name + n; p < end;) {
        const char *dot = memchr(p, '.', (size_t)(end - p));
        size_t l = dot ? (size_t)(dot - p) : (size_t)(end - p);
        if (l == 0 || l > 63) {
            o->bad = true;
            return;
        }
        put8(o, (unsigned)l);
        for (size_t i = 0; i < l; i++) {
            unsigned char c = (unsigned char)p[i];
            put8(o, c >= 'A' && c <= 'Z' ? c + 32 : c);
        }
        p += l + (dot ? 1 : 0);
    }
    put8(o, 0);
}

static void header(struct out *o, uint16_t id, unsigned flags, unsigned qd, unsigned an,
                   unsigned ns, unsigned ar)
{
    put16(o, id);
    put16(o, flags);
    put16(o, qd);
    put16(o, an);
    put16(o, ns);
    put16(o, ar);
}

size_t dnsmsg_query(uint8_t *out, size_t cap, uint16_t id, const char *name, uint16_t type, bool rd)
{
    struct out o = {out, 0, cap, false};
    header(&o, id, rd ? 0x0100 : 0, 1, 0, 0, 0);
    put_name(&o, name);
    put16(&o, type);
    put16(&o, CLASS_IN);
    return o.bad ? 0 : o.len;
}

size_t dnsmsg_update_txt(uint8_t *out, size_t cap, uint16_t id, const char *zone, const char *name,
                         const char *value, bool add, uint32_t ttl)
{
    struct out o = {out, 0, cap, false};
    size_t vl = strlen(value);
    if (vl > 255)
        return 0;
    /* ZOCOUNT 1, PRCOUNT 0, UPCOUNT 1: the zone, then one record added (its class IN) or
     * deleted (class NONE, TTL 0: "delete this RR from the RRset", RFC 2136 2.5.4) */
    header(&o, id, OP_UPDATE << 11, 1, 0, 1, 0);
    put_name(&o, zone);
    put16(&o, DNS_SOA);
    put16(&o, CLASS_IN);
    put_name(&o, name);
    put16(&o, DNS_TXT);
    put16(&o, add ? CLASS_IN : CLASS_NONE);
    put32(&o, add ? ttl : 0);
    put16(&o, (unsigned)vl + 1);
    put8(&o, (unsigned)vl);
    put(&o, value, vl);
    return o.bad ? 0 : o.len;
}

/* The TSIG variables (RFC 8945 4.3.3) after what o holds. */
static void tsig_vars(struct out *o, const char *key, uint64_t time, unsigned fudge, unsigned error,
                      const uint8_t *other, size_t other_len)
{
    put_name(o, key);
    put16(o, CLASS_ANY);
    put32(o, 0);
    put_name(o, ALG);
    put48(o, time);
    put16(o, fudge);
    put16(o, error);
    put16(o, (unsigned)other_len);
    put(o, other, other_len);
}

static bool hmac256(const struct dnsmsg_key *k, const uint8_t *data, size_t len, uint8_t mac[32])
{
    unsigned int n = 0;
    return HMAC(EVP_sha256(), k->secret, (int)k->len, data, len, mac, &n) && n == 32;
}

size_t dnsmsg_tsig_sign(uint8_t *msg, size_t len, size_t cap, const struct dnsmsg_key *k,
                        uint64_t now, uint8_t mac[32])
{
    uint8_t buf[DNSMSG_MAX + TSIG_VARS_MAX];
    if (len < 12 || len > DNSMSG_MAX)
        return 0;
    struct out v = {buf, 0, sizeof(buf), false};
    put(&v, msg, len);
    tsig_vars(&v, k->name, now, FUDGE, 0, NULL, 0);
    if (v.bad || !hmac256(k, buf, v.len, mac))
        return 0;
    struct out o = {msg, len, cap, false};
    put_name(&o, k->name);
    put16(&o, DNS_TSIG);
    put16(&o, CLASS_ANY);
    put32(&o, 0);
    size_t rdlen_at = o.len;
    put16(&o, 0);
    put_name(&o, ALG);
    put48(&o, now);
    put16(&o, FUDGE);
    put16(&o, 32);
    put(&o, mac, 32);
    put16(&o, (unsigned)msg[0] << 8 | msg[1]); /* the original ID */
    put16(&o, 0);
    put16(&o, 0);
    if (o.bad)
        return 0;
    size_t rdlen = o.len - rdlen_at - 2;
    msg[rdlen_at] = (uint8_t)(rdlen >> 8);
    msg[rdlen_at + 1] = (uint8_t)rdlen;
    unsigned ar = ((unsigned)msg[10] << 8 | msg[11]) + 1;
    msg[10] = (uint8_t)(ar >> 8);
    msg[11] = (uint8_t)ar;
    return o.len;
}

/* ---- reading ---- */

static unsigned get16(const uint8_t *p)
{
    return (unsigned)p[0] << 8 | p[1];
}

/* The name at *off into out (lower case, dotted, no trailing dot; a byte that could not be
 * part of a host name becomes '?', so it never equals one), *off moved past it. A compression
 * pointer must point before every position this name has been read from, so a name ends
 * whatever the message holds. */
static int read_name(const uint8_t *m, size_t len, size_t *off, char out[DNSMSG_NAME_MAX])
{
    size_t p = *off, limit = *off, used = 0;
    bool jumped = false;
    for (;;) {
        if (p >= len)
            return -EBADMSG;
        unsigned l = m[p];
        if ((l & 0xc0) == 0xc0) {
            if (p + 1 >= len)
                return -EBADMSG;
            size_t to = (size_t)(l & 0x3f) << 8 | m[p + 1];
            if (!jumped)
                *off = p + 2;
            jumped = true;
            if (to >= limit)
                return -EBADMSG;
            limit = p = to;
            continue;
        }
        if (l & 0xc0)
            return -EBADMSG;
        if (l == 0)
            break;
        if (p + 1 + l > len || used + (used ? 1 : 0) + l >= DNSMSG_NAME_MAX)
            return -EBADMSG;
        if (used)
            out[used++] = '.';
        for (unsigned i = 0; i < l; i++) {
            unsigned char c = m[p + 1 + i];
            if (c >= 'A' && c <= 'Z')
                c += 32;
            out[used++] = c == '.' || c <= ' ' || c >= 0x7f ? '?' : (char)c;
        }
        p += 1 + l;
    }
    if (!jumped)
        *off = p + 1;
    out[used] = '\0';
    return 0;
}

static bool same_name(const char *wire, const char *text)
{
    size_t n = strlen(text);
    if (n && text[n - 1] == '.')
        n--;
    return strlen(wire) == n && strncasecmp(wire, text, n) == 0;
}

/* Whether the TXT rdata (character-strings, joined as RFC 8555 8.4's value is one) is value. */
static bool txt_is(const uint8_t *rd, size_t n, const char *value)
{
    size_t vl = strlen(value), at = 0;
    for (size_t i = 0; i < n;) {
        size_t l = rd[i++];
        if (l > n - i || at + l > vl || memcmp(rd + i, value + at, l) != 0)
            return false;
        at += l;
        i += l;
    }
    return at == vl;
}

static int read_tsig(const uint8_t *rd, size_t n, const uint8_t *m, struct dnsmsg_reply *r)
{
    char alg[DNSMSG_NAME_MAX];
    size_t off = (size_t)(rd - m), end = off + n;
    if (read_name(m, end, &off, alg) != 0 || end - off < 10)
        return -EBADMSG;
    const uint8_t *p = m + off;
    r->tsig_alg_ok = strcmp(alg, ALG) == 0;
    r->tsig_time = (uint64_t)get16(p) << 32 | (uint64_t)get16(p + 2) << 16 | get16(p + 4);
    r->tsig_fudge = (uint16_t)get16(p + 6);
    r->tsig_mac_len = get16(p + 8);
    off += 10;
    if (end - off < r->tsig_mac_len + 6)
        return -EBADMSG;
    r->tsig_mac = m + off;
    off += r->tsig_mac_len;
    r->tsig_orig_id = (uint16_t)get16(m + off);
    r->tsig_error = (uint16_t)get16(m + off + 2);
    r->tsig_other_len = get16(m + off + 4);
    off += 6;
    if (end - off != r->tsig_other_len)
        return -EBADMSG;
    r->tsig_other = m + off;
    return 0;
}

#define CNAME_HOPS 8 /* a chain from the name asked for that a resolver's answer may hold */

/* Whether the TXT records found (owners of those holding the value) include the name asked for
 * or a name its CNAME chain in the answers leads to: a challenge delegated by CNAME
 * (_acme-challenge.example.org CNAME _acme-challenge.acme.example.net) counts where the
 * resolver followed it, as the CA's does. */
static bool txt_reached(const char *txt_name, char (*cname)[2][DNSMSG_NAME_MAX], int ncname,
                        char (*found)[DNSMSG_NAME_MAX], int nfound)
{
    char cur[DNSMSG_NAME_MAX];
    snprintf(cur, sizeof(cur), "%s", txt_name);
    for (int hop = 0; hop <= CNAME_HOPS; hop++) {
        for (int i = 0; i < nfound; i++)
            if (same_name(found[i], cur))
                return true;
        int k = 0;
        while (k < ncname && !same_name(cname[k][0], cur))
            k++;
        if (k == ncname)
            return false;
        memcpy(cur, cname[k][1], sizeof(cur));
    }
    return false;
}

int dnsmsg_parse(const uint8_t *m, size_t len, const char *txt_name, const char *txt_value,
                 struct dnsmsg_reply *r)
{
    char name[DNSMSG_NAME_MAX], cname[CNAME_HOPS][2][DNSMSG_NAME_MAX],
        found[CNAME_HOPS][DNSMSG_NAME_MAX];
    int ncname = 0, nfound = 0;
    *r = (struct dnsmsg_reply){0};
    if (len < 12)
        return -EBADMSG;
    r->id = (uint16_t)get16(m);
    r->tc = m[2] & 0x02;
    r->rcode = m[3] & 0x0f;
    unsigned qd = get16(m + 4), an = get16(m + 6), ns = get16(m + 8), ar = get16(m + 10);
    size_t off = 12;
    for (unsigned i = 0; i < qd; i++) {
        if (read_name(m, len, &off, name) != 0 || len - off < 4)
            return -EBADMSG;
        off += 4;
    }
    unsigned total = an + ns + ar;
    for (unsigned i = 0; i < total; i++) {
        size_t at = off;
        if (read_name(m, len, &off, name) != 0 || len - off < 10)
            return -EBADMSG;
        unsigned type = get16(m + off), rdlen = get16(m + off + 8);
        off += 10;
        if (len - off < rdlen)
            return -EBADMSG;
        const uint8_t *rd = m + off;
        off += rdlen;
        if (i < an && type == DNS_TXT && txt_name && txt_value && nfound < CNAME_HOPS &&
            txt_is(rd, rdlen, txt_value))
            memcpy(found[nfound++], name, sizeof(name));
        if (i < an && type == DNS_CNAME && ncname < CNAME_HOPS) {
            size_t to = (size_t)(rd - m);
            if (read_name(m, to + rdlen, &to, cname[ncname][1]) != 0)
                return -EBADMSG;
            memcpy(cname[ncname++][0], name, sizeof(name));
        }
        if (i < an + ns && type == DNS_SOA && !r->zone[0])
            memcpy(r->zone, name, sizeof(name));
        if (type == DNS_TSIG) {
            if (i != total - 1 || i < an + ns) /* RFC 8945 5.1: the last record or none */
                return -EBADMSG;
            memcpy(r->tsig_key, name, sizeof(name));
            if (read_tsig(rd, rdlen, m, r) != 0)
                return -EBADMSG;
            r->tsig_at = at;
        }
    }
    r->has_txt = txt_name && txt_reached(txt_name, cname, ncname, found, nfound);
    return 0;
}

int dnsmsg_tsig_verify(const uint8_t *m, size_t len, const struct dnsmsg_reply *r,
                       const struct dnsmsg_key *k, const uint8_t req_mac[32], uint64_t now)
{
    uint8_t buf[2 + 32 + DNSMSG_MAX + TSIG_VARS_MAX + 64], mac[32];
    if (!r->tsig_at || r->tsig_at > DNSMSG_MAX || r->tsig_at > len ||
        strcmp(r->tsig_key, k->name) != 0 || !r->tsig_alg_ok || r->tsig_mac_len != 32 ||
        r->tsig_other_len > 64)
        return -EBADMSG;
    /* the request's MAC, then the answer as it was before its TSIG was added: the original
     * ID, one additional record less (RFC 8945 4.3.1, 4.3.2) */
    struct out o = {buf, 0, sizeof(buf), false};
    put16(&o, 32);
    put(&o, req_mac, 32);
    size_t msg_at = o.len;
    put(&o, m, r->tsig_at);
    if (o.bad)
        return -EBADMSG;
    buf[msg_at] = (uint8_t)(r->tsig_orig_id >> 8);
    buf[msg_at + 1] = (uint8_t)r->tsig_orig_id;
    unsigned ar = get16(buf + msg_at + 10) - 1;
    buf[msg_at + 10] = (uint8_t)(ar >> 8);
    buf[msg_at + 11] = (uint8_t)ar;
    tsig_vars(&o, k->name, r->tsig_time, r->tsig_fudge, r->tsig_error, r->tsig_other,
              r->tsig_other_len);
    if (o.bad || !hmac256(k, buf, o.len, mac) || CRYPTO_memcmp(mac, r->tsig_mac, 32) != 0)
        return -EBADMSG;
    uint64_t skew = now > r->tsig_time ? now - r->tsig_time : r->tsig_time - now;
    return skew > r->tsig_fudge ? -ETIME : 0;
}

const char *dnsmsg_rcode_name(int rcode, char *buf, size_t cap)
{
    static const char *const names[] = {"NOERROR", "FORMERR",  "SERVFAIL", "NXDOMAIN", "NOTIMP",
                                        "REFUSED", "YXDOMAIN", "YXRRSET",  "NXRRSET",  "NOTAUTH",
                                        "NOTZONE", NULL,       NULL,       NULL,       NULL,
                                        NULL,      "BADSIG",   "BADKEY",   "BADTIME"};
    if (rcode >= 0 && rcode < (int)(sizeof(names) / sizeof(names[0])) && names[rcode])
        return names[rcode];
    snprintf(buf, cap, "RCODE %d", rcode);
    return buf;
}

/* ---- the key file ---- */

struct lexer {
    const char *p, *end;
};

/* The next word (a quoted string, or a run of characters none of which is space or one of
 * {};:"#) into out: its length, 0 at the end, -1 when it does not fit. */
static int word(struct lexer *lx, char *out, size_t cap)
{
    for (;;) {
        while (lx->p < lx->end && (strchr(" \t\r\n{};:", *lx->p) || *lx->p == '\0'))
            lx->p++;
        if (lx->p == lx->end)
            return 0;
        bool comment = *lx->p == '#' || (*lx->p == '/' && lx->end - lx->p > 1 && lx->p[1] == '/');
        if (!comment)
            break;
        while (lx->p < lx->end && *lx->p != '\n')
            lx->p++;
    }
    size_t n = 0;
    bool quoted = *lx->p == '"';
    if (quoted)
        lx->p++;
    while (lx->p < lx->end &&
           (quoted ? *lx->p != '"' : !strchr(" \t\r\n{};:\"#", *lx->p) && *lx->p != '\0')) {
        if (n + 1 >= cap)
            return -1;
        out[n++] = *lx->p++;
    }
    if (quoted && lx->p == lx->end)
        return -1; /* no closing quote */
    if (quoted)
        lx->p++;
    out[n] = '\0';
    return n ? (int)n : (quoted ? -1 : 0);
}

/* Standard base64 (RFC 4648 4, padding optional) of s into out: its length, or -1. */
static long unb64(const char *s, unsigned char *out, size_t cap)
{
    unsigned acc = 0, bits = 0;
    size_t n = 0;
    for (; *s && *s != '='; s++) {
        const char *abc = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        const char *at = strchr(abc, *s);
        if (!at)
            return -1;
        acc = acc << 6 | (unsigned)(at - abc);
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            if (n == cap)
                return -1;
            out[n++] = (unsigned char)(acc >> bits);
        }
    }
    while (*s == '=')
        s++;
    return *s ? -1 : (long)n;
}

int dnsmsg_key_parse(const char *text, size_t len, struct dnsmsg_key *k, char *why, size_t why_len)
{
    struct lexer lx = {text, text + len};
    char w[512], alg[64] = "", secret[128] = "";
    int n;
    *k = (struct dnsmsg_key){0};
    while ((n = word(&lx, w, sizeof(w))) > 0) {
        bool named = k->name[0] != '\0';
        char *into = NULL;
        size_t cap = 0;
        if ((strcmp(w, "key") == 0 || strcmp(w, "id") == 0) && named && alg[0] && secret[0])
            break; /* a second key: the first is the one */
        if (strcmp(w, "key") == 0 || strcmp(w, "id") == 0) {
            /* BIND's key "NAME" {; knot's "key:" opens a list whose "- id: NAME" names it */
            struct lexer peek = lx;
            int m = word(&peek, w, sizeof(w));
            if (m > 0 && strcmp(w, "-") != 0 && strcmp(w, "id") != 0 && !named) {
                into = k->name;
                cap = sizeof(k->name);
            }
        } else if (strcmp(w, "algorithm") == 0) {
            into = alg;
            cap = sizeof(alg);
        } else if (strcmp(w, "secret") == 0) {
            into = secret;
            cap = sizeof(secret);
        }
        if (into && (n = word(&lx, into, cap)) <= 0)
            break;
    }
    if (n < 0 || !k->name[0] || !alg[0] || !secret[0]) {
        snprintf(why, why_len,
                 "no key in it: want key \"NAME\" { algorithm hmac-sha256; secret \"BASE64\"; };");
        return -EINVAL;
    }
    if (strcasecmp(alg, ALG) != 0) {
        snprintf(why, why_len, "key %s: algorithm %s: only hmac-sha256 is supported", k->name, alg);
        return -EINVAL;
    }
    size_t nl = strlen(k->name);
    if (k->name[nl - 1] == '.')
        k->name[--nl] = '\0';
    for (size_t i = 0; i < nl; i++)
        if (k->name[i] >= 'A' && k->name[i] <= 'Z')
            k->name[i] = (char)(k->name[i] + 32);
    uint8_t probe[300];
    struct out o = {probe, 0, sizeof(probe), false};
    put_name(&o, k->name);
    long sl = unb64(secret, k->secret, sizeof(k->secret));
    OPENSSL_cleanse(secret, sizeof(secret));
    if (o.bad || nl == 0 || sl <= 0) {
        snprintf(why, why_len, "key %s: %s", k->name,
                 o.bad || nl == 0 ? "the name is no domain name"
                                  : "the secret is not base64 (or longer than 64 bytes)");
        *k = (struct dnsmsg_key){0};
        return -EINVAL;
    }
    k->len = (size_t)sl;
    return 0;
}
