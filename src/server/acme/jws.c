/* ACME's cryptography; see jws.h. */
#include "server/acme/jws.h"

#include <errno.h>
#include <jansson.h>
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/sha.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <stdlib.h>
#include <string.h>

static const char b64url[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

size_t jws_b64(const void *data, size_t len, char *out, size_t cap)
{
    const unsigned char *p = data;
    size_t need = jws_b64_len(len), o = 0;
    if (cap < need + 1)
        return 0;
    for (size_t i = 0; i < len; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16;
        size_t left = len - i;
        if (left > 1)
            v |= (uint32_t)p[i + 1] << 8;
        if (left > 2)
            v |= p[i + 2];
        out[o++] = b64url[(v >> 18) & 63];
        out[o++] = b64url[(v >> 12) & 63];
        if (left > 1)
            out[o++] = b64url[(v >> 6) & 63];
        if (left > 2)
            out[o++] = b64url[v & 63];
    }
    out[o] = '\0';
    return o;
}

static int b64_value(char c)
{
    const char *p = c ? strchr(b64url, c) : NULL;
    return p ? (int)(p - b64url) : -1;
}

long jws_unb64(const char *s, size_t len, void *out, size_t cap)
{
    unsigned char *o = out;
    size_t n = 0;
    uint32_t acc = 0;
    int bits = 0;
    if (len % 4 == 1)
        return -EINVAL; /* no whole byte in a lone sixth */
    for (size_t i = 0; i < len; i++) {
        int v = b64_value(s[i]);
        if (v < 0)
            return -EINVAL;
        acc = (acc << 6) | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            if (n == cap)
                return -ENOSPC;
            o[n++] = (unsigned char)(acc >> bits);
        }
    }
    if (acc & ((1u << bits) - 1))
        return -EINVAL; /* non-canonical: leftover bits must be zero */
    return (long)n;
}

EVP_PKEY *jws_key_new(void)
{
    return EVP_EC_gen("P-256");
}

char *jws_key_pem(EVP_PKEY *key)
{
    BIO *b = BIO_new(BIO_s_mem());
    char *out = NULL, *p;
    if (b && PEM_write_bio_PrivateKey(b, key, NULL, NULL, 0, NULL, NULL) == 1) {
        long n = BIO_get_mem_data(b, &p);
        if (n > 0 && (out = malloc((size_t)n + 1))) {
            memcpy(out, p, (size_t)n);
            out[n] = '\0';
        }
    }
    BIO_free(b);
    return out;
}

EVP_PKEY *jws_key_from_pem(const char *pem, size_t len)
{
    BIO *b = BIO_new_mem_buf(pem, (int)len);
    EVP_PKEY *k = b ? PEM_read_bio_PrivateKey(b, NULL, NULL, NULL) : NULL;
    BIO_free(b);
    ERR_clear_error();
    return k;
}

/* x and y of a P-256 key, 32 bytes each. */
static int ec_point(EVP_PKEY *key, unsigned char x[32], unsigned char y[32])
{
    BIGNUM *bx = NULL, *by = NULL;
    char curve[32];
    int rc = -EINVAL;
    if (EVP_PKEY_get_utf8_string_param(key, OSSL_PKEY_PARAM_GROUP_NAME, curve, sizeof(curve),
                                       NULL) != 1 ||
        strcmp(curve, "prime256v1") != 0)
        goto out;
    if (EVP_PKEY_get_bn_param(key, OSSL_PKEY_PARAM_EC_PUB_X, &bx) != 1 ||
        EVP_PKEY_get_bn_param(key, OSSL_PKEY_PARAM_EC_PUB_Y, &by) != 1)
        goto out;
    if (BN_bn2binpad(bx, x, 32) == 32 && BN_bn2binpad(by, y, 32) == 32)
        rc = 0;
out:
    BN_free(bx);
    BN_free(by);
    ERR_clear_error();
    return rc;
}

int jws_jwk(EVP_PKEY *key, char *out, size_t cap)
{
    unsigned char x[32], y[32];
    char bx[48], by[48];
    if (ec_point(key, x, y) != 0)
        return -EINVAL;
    jws_b64(x, 32, bx, sizeof(bx));
    jws_b64(y, 32, by, sizeof(by));
    int n =
        snprintf(out, cap, "{\"crv\":\"P-256\",\"kty\":\"EC\",\"x\":\"%s\",\"y\":\"%s\"}", bx, by);
    return n > 0 && (size_t)n < cap ? 0 : -ENOSPC;
}

int jws_thumbprint(EVP_PKEY *key, char out[44])
{
    char jwk[160];
    unsigned char d[SHA256_DIGEST_LENGTH];
    int rc = jws_jwk(key, jwk, sizeof(jwk));
    if (rc)
        return rc;
    SHA256((const unsigned char *)jwk, strlen(jwk), d);
    return jws_b64(d, sizeof(d), out, 44) == 43 ? 0 : -EINVAL;
}

size_t jws_key_authorization(const char *token, const char *thumbprint, char *out, size_t cap)
{
    size_t tl = strlen(token), hl = strlen(thumbprint);
    if (tl == 0 || tl + 1 + hl + 1 > cap)
        return 0;
    for (size_t i = 0; i < tl; i++)
        if (b64_value(token[i]) < 0)
            return 0;
    memcpy(out, token, tl);
    out[tl] = '.';
    memcpy(out + tl + 1, thumbprint, hl + 1);
    return tl + 1 + hl;
}

void jws_alpn_digest(const char *key_auth, size_t len, unsigned char out[32])
{
    SHA256((const unsigned char *)key_auth, len, out);
}

/* ES256 of data: the raw r || s of RFC 7518 3.4 (not OpenSSL's DER), 64 bytes. */
static int es256(EVP_PKEY *key, const char *data, size_t len, unsigned char sig[64])
{
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    unsigned char der[80];
    size_t der_len = sizeof(der);
    ECDSA_SIG *s = NULL;
    int rc = -EINVAL;
    if (!md || EVP_DigestSignInit(md, NULL, EVP_sha256(), NULL, key) != 1 ||
        EVP_DigestSign(md, der, &der_len, (const unsigned char *)data, len) != 1)
        goto out;
    const unsigned char *p = der;
    if (!(s = d2i_ECDSA_SIG(NULL, &p, (long)der_len)))
        goto out;
    if (BN_bn2binpad(ECDSA_SIG_get0_r(s), sig, 32) == 32 &&
        BN_bn2binpad(ECDSA_SIG_get0_s(s), sig + 32, 32) == 32)
        rc = 0;
out:
    ECDSA_SIG_free(s);
    EVP_MD_CTX_free(md);
    ERR_clear_error();
    return rc;
}

char *jws_sign(EVP_PKEY *key, const char *kid, const char *nonce, const char *url,
               const char *payload)
{
    char jwk[160], *prot = NULL, *pb = NULL, *yb = NULL, *input = NULL, *out = NULL;
    json_t *hdr = NULL, *doc = NULL;
    unsigned char sig[64];
    char sb[100];
    if (kid) {
        hdr =
            json_pack("{s:s,s:s,s:s,s:s}", "alg", "ES256", "kid", kid, "nonce", nonce, "url", url);
    } else {
        if (jws_jwk(key, jwk, sizeof(jwk)) != 0)
            return NULL;
        hdr = json_pack("{s:s,s:o,s:s,s:s}", "alg", "ES256", "jwk", json_loads(jwk, 0, NULL),
                        "nonce", nonce, "url", url);
    }
    if (!hdr || !(prot = json_dumps(hdr, JSON_COMPACT)))
        goto out;
    size_t pl = strlen(prot), yl = strlen(payload);
    pb = malloc(jws_b64_len(pl) + 1);
    yb = malloc(jws_b64_len(yl) + 1);
    if (!pb || !yb)
        goto out;
    jws_b64(prot, pl, pb, jws_b64_len(pl) + 1);
    jws_b64(payload, yl, yb, jws_b64_len(yl) + 1);
    size_t il = strlen(pb) + 1 + strlen(yb);
    if (!(input = malloc(il + 1)))
        goto out;
    snprintf(input, il + 1, "%s.%s", pb, yb);
    if (es256(key, input, il, sig) != 0)
        goto out;
    jws_b64(sig, sizeof(sig), sb, sizeof(sb));
    if ((doc = json_pack("{s:s,s:s,s:s}", "protected", pb, "payload", yb, "signature", sb)))
        out = json_dumps(doc, JSON_COMPACT);
out:
    json_decref(hdr);
    json_decref(doc);
    free(prot);
    free(pb);
    free(yb);
    free(input);
    return out;
}

char *jws_csr(EVP_PKEY *key, const char *const *names, int n)
{
    X509_REQ *req = X509_REQ_new();
    STACK_OF(X509_EXTENSION) *exts = sk_X509_EXTENSION_new_null();
    GENERAL_NAMES *gens = GENERAL_NAMES_new();
    unsigned char *der = NULL;
    char *out = NULL;
    if (!req || !exts || !gens || n < 1)
        goto out;
    for (int i = 0; i < n; i++) {
        GENERAL_NAME *g = GENERAL_NAME_new();
        ASN1_IA5STRING *s = ASN1_IA5STRING_new();
        if (!g || !s || !ASN1_STRING_set(s, names[i], (int)strlen(names[i]))) {
            GENERAL_NAME_free(g);
            ASN1_IA5STRING_free(s);
            goto out;
        }
        GENERAL_NAME_set0_value(g, GEN_DNS, s);
        if (!sk_GENERAL_NAME_push(gens, g)) {
            GENERAL_NAME_free(g);
            goto out;
        }
    }
    X509_EXTENSION *san = X509V3_EXT_i2d(NID_subject_alt_name, 0, gens);
    if (!san || !sk_X509_EXTENSION_push(exts, san)) {
        X509_EXTENSION_free(san);
        goto out;
    }
    X509_NAME *subj = X509_REQ_get_subject_name(req);
    if (strlen(names[0]) <= 64 &&
        !X509_NAME_add_entry_by_txt(subj, "CN", MBSTRING_ASC, (const unsigned char *)names[0], -1,
                                    -1, 0))
        goto out;
    if (!X509_REQ_set_version(req, 0) || !X509_REQ_set_pubkey(req, key) ||
        !X509_REQ_add_extensions(req, exts) || X509_REQ_sign(req, key, EVP_sha256()) <= 0)
        goto out;
    int len = i2d_X509_REQ(req, &der);
    if (len <= 0)
        goto out;
    if ((out = malloc(jws_b64_len((size_t)len) + 1)))
        jws_b64(der, (size_t)len, out, jws_b64_len((size_t)len) + 1);
out:
    OPENSSL_free(der);
    GENERAL_NAMES_free(gens);
    sk_X509_EXTENSION_pop_free(exts, X509_EXTENSION_free);
    X509_REQ_free(req);
    ERR_clear_error();
    return out;
}

static X509 *first_cert(const char *pem, size_t len)
{
    BIO *b = BIO_new_mem_buf(pem, (int)len);
    X509 *x = b ? PEM_read_bio_X509(b, NULL, NULL, NULL) : NULL;
    BIO_free(b);
    ERR_clear_error();
    return x;
}

static int64_t asn1_unix(const ASN1_TIME *t)
{
    struct tm tm;
    if (!ASN1_TIME_to_tm(t, &tm))
        return 0;
    return (int64_t)timegm(&tm);
}

int jws_cert_facts(const char *pem, size_t len, struct jws_cert_facts *out)
{
    X509 *x = first_cert(pem, len);
    BIGNUM *serial = NULL;
    int rc = -EINVAL;
    if (!x)
        return -EINVAL;
    *out = (struct jws_cert_facts){0};
    out->not_before = asn1_unix(X509_get0_notBefore(x));
    out->not_after = asn1_unix(X509_get0_notAfter(x));
    if (!out->not_before || !out->not_after)
        goto out;
    /* RFC 9773 4.1: the AKI's keyIdentifier and the serial's DER content octets (positive, so
     * a leading zero when its top bit is set), each base64url. No AKI: no ARI for it. */
    const ASN1_OCTET_STRING *aki = X509_get0_authority_key_id(x);
    unsigned char sb[64];
    if (aki && (serial = ASN1_INTEGER_to_BN(X509_get0_serialNumber(x), NULL))) {
        int n = BN_num_bytes(serial);
        if (n > 0 && n < (int)sizeof(sb) - 1) {
            int lead = 0;
            BN_bn2bin(serial, sb + 1);
            if (sb[1] & 0x80) {
                sb[0] = 0;
                lead = 1;
            }
            size_t a = jws_b64(ASN1_STRING_get0_data(aki), (size_t)ASN1_STRING_length(aki),
                               out->ari_id, sizeof(out->ari_id));
            if (a && a + 1 < sizeof(out->ari_id)) {
                out->ari_id[a] = '.';
                if (!jws_b64(sb + 1 - lead, (size_t)n + (size_t)lead, out->ari_id + a + 1,
                             sizeof(out->ari_id) - a - 1))
                    out->ari_id[0] = '\0';
            } else {
                out->ari_id[0] = '\0';
            }
        }
    }
    rc = 0;
out:
    BN_free(serial);
    X509_free(x);
    return rc;
}

bool jws_cert_covers(const char *pem, size_t len, const char *const *names, int n)
{
    X509 *x = first_cert(pem, len);
    EVP_PKEY *k = jws_key_from_pem(pem, len);
    bool ok = x && k && X509_check_private_key(x, k) == 1;
    GENERAL_NAMES *gens = x ? X509_get_ext_d2i(x, NID_subject_alt_name, NULL, NULL) : NULL;
    for (int i = 0; ok && i < n; i++) {
        bool found = false;
        for (int j = 0; gens && j < sk_GENERAL_NAME_num(gens) && !found; j++) {
            const GENERAL_NAME *g = sk_GENERAL_NAME_value(gens, j);
            if (g->type != GEN_DNS)
                continue;
            const ASN1_IA5STRING *s = g->d.dNSName;
            found = (size_t)ASN1_STRING_length(s) == strlen(names[i]) &&
                    strncasecmp((const char *)ASN1_STRING_get0_data(s), names[i],
                                strlen(names[i])) == 0;
        }
        ok = found;
    }
    GENERAL_NAMES_free(gens);
    EVP_PKEY_free(k);
    X509_free(x);
    ERR_clear_error();
    return ok;
}

int jws_alpn_cert(const char *name, const unsigned char digest[32], int64_t now, X509 **cert,
                  EVP_PKEY **key)
{
    X509 *x = X509_new();
    EVP_PKEY *k = jws_key_new();
    ASN1_OCTET_STRING *inner = ASN1_OCTET_STRING_new(), *outer = ASN1_OCTET_STRING_new();
    ASN1_OBJECT *oid = OBJ_txt2obj("1.3.6.1.5.5.7.1.31", 1); /* id-pe-acmeIdentifier */
    GENERAL_NAMES *gens = GENERAL_NAMES_new();
    GENERAL_NAME *g = GENERAL_NAME_new();
    ASN1_IA5STRING *dns = ASN1_IA5STRING_new();
    unsigned char *der = NULL, serial[16];
    int rc = -ENOMEM;
    if (!x || !k || !inner || !outer || !oid || !gens || !g || !dns)
        goto out;
    /* The extension's value is the DER of an OCTET STRING holding the digest (RFC 8737 3). */
    if (!ASN1_OCTET_STRING_set(inner, digest, 32))
        goto out;
    int dl = i2d_ASN1_OCTET_STRING(inner, &der);
    if (dl <= 0 || !ASN1_OCTET_STRING_set(outer, der, dl))
        goto out;
    if (!ASN1_STRING_set(dns, name, (int)strlen(name)))
        goto out;
    GENERAL_NAME_set0_value(g, GEN_DNS, dns);
    dns = NULL;
    if (!sk_GENERAL_NAME_push(gens, g))
        goto out;
    g = NULL;
    if (RAND_bytes(serial, sizeof(serial)) != 1)
        goto out;
    serial[0] &= 0x7f;
    BIGNUM *bn = BN_bin2bn(serial, sizeof(serial), NULL);
    int ok = bn && BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x)) != NULL;
    BN_free(bn);
    X509_NAME *subj = X509_get_subject_name(x);
    if (!ok || !X509_set_version(x, 2) ||
        !ASN1_TIME_set(X509_getm_notBefore(x), (time_t)(now - 3600)) ||
        !ASN1_TIME_set(X509_getm_notAfter(x), (time_t)(now + 7 * 86400)) ||
        !X509_NAME_add_entry_by_txt(subj, "CN", MBSTRING_ASC, (const unsigned char *)"ACME", -1, -1,
                                    0) ||
        !X509_set_issuer_name(x, subj) || !X509_set_pubkey(x, k) ||
        !X509_add1_ext_i2d(x, NID_subject_alt_name, gens, 0, 0)) {
        rc = -EINVAL;
        goto out;
    }
    X509_EXTENSION *ext = X509_EXTENSION_create_by_OBJ(NULL, oid, 1, outer);
    ok = ext && X509_add_ext(x, ext, -1);
    X509_EXTENSION_free(ext);
    if (!ok || X509_sign(x, k, EVP_sha256()) <= 0) {
        rc = -EINVAL;
        goto out;
    }
    *cert = x;
    *key = k;
    x = NULL;
    k = NULL;
    rc = 0;
out:
    OPENSSL_free(der);
    ASN1_IA5STRING_free(dns);
    GENERAL_NAME_free(g);
    GENERAL_NAMES_free(gens);
    ASN1_OBJECT_free(oid);
    ASN1_OCTET_STRING_free(inner);
    ASN1_OCTET_STRING_free(outer);
    EVP_PKEY_free(k);
    X509_free(x);
    ERR_clear_error();
    return rc;
}
