/* ACME's pure parts (issue 27): base64url, the JWK and its thumbprint, ES256 JWS, key
 * authorizations, the TLS-ALPN-01 certificate, CSRs, ARI certificate IDs, renewal and backoff
 * times; the state directory's files and locks; the challenge table. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <openssl/bn.h>
#include <openssl/ecdsa.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/sha.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "server/acme/jws.h"
#include "server/acme/store.h"
#include "site/tokens.h"
#include "server/acme/when.h"
#include "unit.h"

/* A fixed P-256 key; its JWK and thumbprint were computed apart (Python's hashlib over the
 * public key openssl printed), not by the code under test. */
static const char fixed_key[] = "-----BEGIN PRIVATE KEY-----\n"
                                "MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgF+2UySOWYdAKyE3n\n"
                                "b5L5XS+UOEuCjS/5AsnWKQOotkOhRANCAARMAm1oBAUvu29k0CA8/o289vbe6D1Q\n"
                                "O6Smf7Mwtbczst5mg+umDIGDudwE2xYITFMy0CwH9XZA2Vz1Jj+T9Rnm\n"
                                "-----END PRIVATE KEY-----\n";
static const char fixed_jwk[] =
    "{\"crv\":\"P-256\",\"kty\":\"EC\",\"x\":\"TAJtaAQFL7tvZNAgPP6NvPb23u"
    "g9UDukpn-zMLW3M7I\",\"y\":\"3maD66YMgYO53ATbFghMUzLQLAf1dkDZXPUmP5P"
    "1GeY\"}";
static const char fixed_thumb[] = "rGEx1GaL4FdUPiG3xqdAP2SUDSvHbTNN_1K7rgckIN4";

TEST(acme_base64url_round_trips_and_refuses_garbage)
{
    char out[64];
    unsigned char back[64];
    /* RFC 4648 10's vectors, without padding; then bytes that map to '-' and '_'. */
    CHECK_MEM(out, jws_b64("", 0, out, sizeof(out)), "");
    CHECK_MEM(out, jws_b64("f", 1, out, sizeof(out)), "Zg");
    CHECK_MEM(out, jws_b64("fo", 2, out, sizeof(out)), "Zm8");
    CHECK_MEM(out, jws_b64("foo", 3, out, sizeof(out)), "Zm9v");
    CHECK_MEM(out, jws_b64("foobar", 6, out, sizeof(out)), "Zm9vYmFy");
    CHECK_MEM(out, jws_b64("\xfb\xff", 2, out, sizeof(out)), "-_8");
    CHECK_INT(jws_b64("foo", 3, out, 4), 0); /* no room for the NUL */
    CHECK_INT(jws_unb64("Zm9vYmE", 7, back, sizeof(back)), 5);
    CHECK(memcmp(back, "fooba", 5) == 0);
    CHECK_INT(jws_unb64("-_8", 3, back, sizeof(back)), 2);
    CHECK(back[0] == 0xfb && back[1] == 0xff);
    CHECK_INT(jws_unb64("Zm9v=", 5, back, sizeof(back)), -EINVAL); /* padding */
    CHECK_INT(jws_unb64("Zm+v", 4, back, sizeof(back)), -EINVAL);  /* standard alphabet */
    CHECK_INT(jws_unb64("Z", 1, back, sizeof(back)), -EINVAL);
    CHECK_INT(jws_unb64("Zh", 2, back, sizeof(back)), -EINVAL); /* leftover bits set */
    CHECK_INT(jws_unb64("Zm9vYmFy", 8, back, 5), -ENOSPC);
}

TEST(acme_jwk_and_thumbprint_of_a_known_key)
{
    EVP_PKEY *k = jws_key_from_pem(fixed_key, sizeof(fixed_key) - 1);
    char jwk[160], thumb[44];
    CHECK(k != NULL);
    CHECK_INT(jws_jwk(k, jwk, sizeof(jwk)), 0);
    CHECK_MEM(jwk, strlen(jwk), fixed_jwk);
    CHECK_INT(jws_thumbprint(k, thumb), 0);
    CHECK_MEM(thumb, strlen(thumb), fixed_thumb);
    EVP_PKEY_free(k);
    /* An RSA key is no ES256 account key. */
    EVP_PKEY *rsa = EVP_RSA_gen(1024);
    CHECK(rsa && jws_jwk(rsa, jwk, sizeof(jwk)) == -EINVAL);
    EVP_PKEY_free(rsa);
}

TEST(acme_key_authorization_and_alpn_digest)
{
    char ka[128];
    unsigned char d[32], want[32];
    size_t n = jws_key_authorization("evaGxfADs6pSRb2LAv9IZf17Dt3juxGJ-PCt92wr-oA", fixed_thumb, ka,
                                     sizeof(ka));
    CHECK_MEM(
        ka, n,
        "evaGxfADs6pSRb2LAv9IZf17Dt3juxGJ-PCt92wr-oA.rGEx1GaL4FdUPiG3xqdAP2SUDSvHbTNN_1K7rgckIN4");
    /* A token a CA garbled must never reach a response body. */
    CHECK_INT(jws_key_authorization("abc/../x", fixed_thumb, ka, sizeof(ka)), 0);
    CHECK_INT(jws_key_authorization("a\r\nb", fixed_thumb, ka, sizeof(ka)), 0);
    CHECK_INT(jws_key_authorization("", fixed_thumb, ka, sizeof(ka)), 0);
    CHECK_INT(jws_key_authorization("abc", fixed_thumb, ka, 10), 0);
    /* SHA-256("tok.thumb"), computed apart. */
    jws_alpn_digest("tok.thumb", 9, d);
    CHECK_INT(jws_unb64("sYAwVrqDtVOuJZvAHurSAYPoEt5fFV_C4bdSOOW-o5Y", 43, want, sizeof(want)), 32);
    CHECK(memcmp(d, want, 32) == 0);
}

/* Decodes a base64url member of a JWS into a NUL-terminated malloc'd string. */
static char *member(json_t *jws, const char *name, size_t *len)
{
    const char *s = json_string_value(json_object_get(jws, name));
    char *out = s ? malloc(strlen(s) + 1) : NULL;
    long n = out ? jws_unb64(s, strlen(s), out, strlen(s)) : -1;
    if (n < 0) {
        free(out);
        return NULL;
    }
    out[n] = '\0';
    *len = (size_t)n;
    return out;
}

TEST(acme_jws_is_es256_over_protected_and_payload)
{
    EVP_PKEY *k = jws_key_from_pem(fixed_key, sizeof(fixed_key) - 1);
    char *text = jws_sign(k, NULL, "NONCE1", "https://ca.test/new-acct", "{\"a\":1}");
    CHECK(text != NULL);
    json_t *j = json_loads(text, 0, NULL);
    CHECK(j != NULL);
    size_t pl, yl, sl;
    char *prot = member(j, "protected", &pl), *pay = member(j, "payload", &yl);
    char *sig = member(j, "signature", &sl);
    CHECK(prot && pay && sig);
    CHECK_MEM(pay, yl, "{\"a\":1}");
    json_t *h = json_loads(prot, 0, NULL);
    const char *alg = "", *nonce = "", *url = "", *crv = "";
    CHECK_INT(json_unpack(h, "{s:s,s:s,s:s,s:{s:s}}", "alg", &alg, "nonce", &nonce, "url", &url,
                          "jwk", "crv", &crv),
              0);
    CHECK(strcmp(alg, "ES256") == 0 && strcmp(nonce, "NONCE1") == 0 &&
          strcmp(url, "https://ca.test/new-acct") == 0 && strcmp(crv, "P-256") == 0);
    CHECK(json_object_get(h, "kid") == NULL);
    /* The signature is r || s (64 bytes), valid over "protected.payload" as sent. */
    CHECK_INT(sl, 64);
    const char *pb = json_string_value(json_object_get(j, "protected"));
    const char *yb = json_string_value(json_object_get(j, "payload"));
    char input[1024];
    snprintf(input, sizeof(input), "%s.%s", pb, yb);
    ECDSA_SIG *es = ECDSA_SIG_new();
    ECDSA_SIG_set0(es, BN_bin2bn((unsigned char *)sig, 32, NULL),
                   BN_bin2bn((unsigned char *)sig + 32, 32, NULL));
    unsigned char *der = NULL;
    int dl = i2d_ECDSA_SIG(es, &der);
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    CHECK(EVP_DigestVerifyInit(md, NULL, EVP_sha256(), NULL, k) == 1);
    CHECK(EVP_DigestVerify(md, der, (size_t)dl, (unsigned char *)input, strlen(input)) == 1);
    EVP_MD_CTX_free(md);
    OPENSSL_free(der);
    ECDSA_SIG_free(es);
    json_decref(h);
    free(prot);
    free(pay);
    free(sig);
    json_decref(j);
    free(text);
    /* With an account URL: kid instead of jwk; POST-as-GET has an empty payload. */
    text = jws_sign(k, "https://ca.test/acct/1", "N2", "https://ca.test/order/1", "");
    j = json_loads(text, 0, NULL);
    CHECK(strcmp(json_string_value(json_object_get(j, "payload")), "") == 0);
    prot = member(j, "protected", &pl);
    h = json_loads(prot, 0, NULL);
    CHECK(json_object_get(h, "jwk") == NULL);
    CHECK(strcmp(json_string_value(json_object_get(h, "kid")), "https://ca.test/acct/1") == 0);
    json_decref(h);
    free(prot);
    json_decref(j);
    free(text);
    EVP_PKEY_free(k);
}

TEST(acme_csr_names_every_name_and_is_signed)
{
    EVP_PKEY *k = jws_key_new();
    const char *names[] = {"a.test", "b.test"};
    char *csr = jws_csr(k, names, 2);
    CHECK(csr != NULL);
    unsigned char der[2048];
    long n = jws_unb64(csr, strlen(csr), der, sizeof(der));
    CHECK(n > 0);
    const unsigned char *p = der;
    X509_REQ *req = d2i_X509_REQ(NULL, &p, n);
    CHECK(req && X509_REQ_verify(req, k) == 1);
    STACK_OF(X509_EXTENSION) *exts = X509_REQ_get_extensions(req);
    GENERAL_NAMES *gens = X509V3_get_d2i(exts, NID_subject_alt_name, NULL, NULL);
    CHECK(gens && sk_GENERAL_NAME_num(gens) == 2);
    for (int i = 0; gens && i < 2; i++) {
        const GENERAL_NAME *g = sk_GENERAL_NAME_value(gens, i);
        CHECK(g->type == GEN_DNS &&
              strcmp((const char *)ASN1_STRING_get0_data(g->d.dNSName), names[i]) == 0);
    }
    GENERAL_NAMES_free(gens);
    sk_X509_EXTENSION_pop_free(exts, X509_EXTENSION_free);
    X509_REQ_free(req);
    free(csr);
    EVP_PKEY_free(k);
}

/* A certificate with RFC 9773's example AKI and serial, as PEM. */
static char *ari_example(EVP_PKEY *k, const char *serial_hex)
{
    static const unsigned char keyid[] = {0x69, 0x88, 0x5B, 0x6B, 0x87, 0x46, 0x40,
                                          0x41, 0xE1, 0xB3, 0x7B, 0x84, 0x7B, 0xA0,
                                          0xAE, 0x2C, 0xDE, 0x01, 0xC8, 0xD4};
    X509 *x = X509_new();
    BIGNUM *bn = NULL;
    BN_hex2bn(&bn, serial_hex);
    BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x));
    BN_free(bn);
    AUTHORITY_KEYID *akid = AUTHORITY_KEYID_new();
    akid->keyid = ASN1_OCTET_STRING_new();
    ASN1_OCTET_STRING_set(akid->keyid, keyid, sizeof(keyid));
    X509_add1_ext_i2d(x, NID_authority_key_identifier, akid, 0, 0);
    AUTHORITY_KEYID_free(akid);
    X509_set_version(x, 2);
    ASN1_TIME_set(X509_getm_notBefore(x), 1700000000);
    ASN1_TIME_set(X509_getm_notAfter(x), 1700000000 + 90 * 86400);
    X509_set_pubkey(x, k);
    X509_sign(x, k, EVP_sha256());
    BIO *b = BIO_new(BIO_s_mem());
    PEM_write_bio_X509(b, x);
    PEM_write_bio_PrivateKey(b, k, NULL, NULL, 0, NULL, NULL);
    char *p;
    long n = BIO_get_mem_data(b, &p);
    char *out = malloc((size_t)n + 1);
    memcpy(out, p, (size_t)n);
    out[n] = '\0';
    BIO_free(b);
    X509_free(x);
    return out;
}

TEST(acme_ari_cert_id_and_lifetime_of_a_certificate)
{
    EVP_PKEY *k = jws_key_new();
    char *pem = ari_example(k, "87654321"); /* RFC 9773 4.1: serial 0x00 87 65 43 21 */
    struct jws_cert_facts f;
    CHECK_INT(jws_cert_facts(pem, strlen(pem), &f), 0);
    CHECK_MEM(f.ari_id, strlen(f.ari_id), "aYhba4dGQEHhs3uEe6CuLN4ByNQ.AIdlQyE");
    CHECK_INT(f.not_before, 1700000000);
    CHECK_INT(f.not_after, 1700000000 + 90 * 86400);
    free(pem);
    pem = ari_example(k, "1234"); /* top bit clear: no leading zero */
    CHECK_INT(jws_cert_facts(pem, strlen(pem), &f), 0);
    CHECK_MEM(f.ari_id, strlen(f.ari_id), "aYhba4dGQEHhs3uEe6CuLN4ByNQ.EjQ");
    /* The certificate names nothing: it covers no name, but its key matches. */
    const char *names[] = {"a.test"};
    CHECK(!jws_cert_covers(pem, strlen(pem), names, 1));
    CHECK(jws_cert_covers(pem, strlen(pem), names, 0));
    free(pem);
    CHECK_INT(jws_cert_facts("garbage", 7, &f), -EINVAL);
    EVP_PKEY_free(k);
}

TEST(acme_alpn_certificate_carries_the_digest_for_that_name_only)
{
    unsigned char d[32];
    X509 *x = NULL;
    EVP_PKEY *k = NULL;
    for (int i = 0; i < 32; i++)
        d[i] = (unsigned char)i;
    CHECK_INT(jws_alpn_cert("a.test", d, 1700000000, &x, &k), 0);
    CHECK(X509_check_private_key(x, k) == 1);
    CHECK(X509_check_host(x, "a.test", 0, 0, NULL) == 1);
    CHECK(X509_check_host(x, "b.test", 0, 0, NULL) != 1);
    ASN1_OBJECT *oid = OBJ_txt2obj("1.3.6.1.5.5.7.1.31", 1);
    int at = X509_get_ext_by_OBJ(x, oid, -1);
    CHECK(at >= 0);
    X509_EXTENSION *ext = X509_get_ext(x, at);
    CHECK(X509_EXTENSION_get_critical(ext) == 1);
    /* RFC 8737 3: the value is the DER of an OCTET STRING of the 32-byte digest. */
    const ASN1_OCTET_STRING *v = X509_EXTENSION_get_data(ext);
    const unsigned char *p = ASN1_STRING_get0_data(v);
    CHECK_INT(ASN1_STRING_length(v), 34);
    CHECK(p[0] == 0x04 && p[1] == 32 && memcmp(p + 2, d, 32) == 0);
    ASN1_OBJECT_free(oid);
    X509_free(x);
    EVP_PKEY_free(k);
}

TEST(acme_renewal_time_two_thirds_with_jitter_or_ari_window)
{
    int64_t nb = 1700000000, day = 86400, na = nb + 90 * day;
    CHECK_INT(when_renew(nb, na, 0, 0, 0.0), nb + 60 * day);
    /* The jitter moves it earlier by less than a thirtieth of the lifetime, never later. */
    int64_t t = when_renew(nb, na, 0, 0, 0.999);
    CHECK(t < nb + 60 * day && t > nb + 57 * day);
    /* A six-day certificate: four days. */
    CHECK_INT(when_renew(nb, nb + 6 * day, 0, 0, 0.0), nb + 4 * day);
    /* ARI: inside the window, drawn by rnd. */
    CHECK_INT(when_renew(nb, na, nb + 70 * day, nb + 72 * day, 0.0), nb + 70 * day);
    CHECK_INT(when_renew(nb, na, nb + 70 * day, nb + 72 * day, 0.5), nb + 71 * day);
    /* A window past the expiry is cut to the expiry; an empty window falls back. */
    CHECK_INT(when_renew(nb, na, na + day, na + 2 * day, 0.0), na);
    CHECK_INT(when_renew(nb, na, nb + 70 * day, nb + 70 * day, 0.0), nb + 60 * day);
}

TEST(acme_backoff_doubles_caps_and_honours_retry_after)
{
    CHECK_INT(when_backoff(1, 60, 0, 0.0), 60);
    CHECK_INT(when_backoff(2, 60, 0, 0.0), 120);
    CHECK_INT(when_backoff(5, 60, 0, 0.0), 960);
    CHECK_INT(when_backoff(40, 60, 0, 0.0), WHEN_BACKOFF_MAX);
    CHECK(when_backoff(1, 60, 0, 0.99) > 60 && when_backoff(1, 60, 0, 0.99) <= 66);
    CHECK_INT(when_backoff(1, 60, 3600, 0.0), 3600);   /* the CA's Retry-After wins */
    CHECK_INT(when_backoff(8, 60, 10, 0.0), 60 * 128); /* unless ours is longer */
    CHECK_INT(when_backoff(1, 60, 7 * 86400, 0.0), 7 * 86400);
    CHECK_INT(when_backoff(1, 0, 0, 0.0), 1);
    int64_t now = 784111777; /* Sun, 06 Nov 1994 08:49:37 GMT */
    CHECK_INT(when_retry_after("120", 3, now), 120);
    CHECK_INT(when_retry_after(" 5 \r\n", 5, now), 5);
    const char *date = "Sun, 06 Nov 1994 08:51:37 GMT";
    CHECK_INT(when_retry_after(date, strlen(date), now), 120);
    CHECK_INT(when_retry_after(date, strlen(date), now + 500), 0); /* in the past */
    CHECK_INT(when_retry_after("soon", 4, now), 0);
    CHECK_INT(when_retry_after("12x", 3, now), 0);
    CHECK_INT(when_retry_after("", 0, now), 0);
}

TEST(acme_store_writes_atomically_with_modes_and_locks_once)
{
    char dir[] = "/tmp/unit-acme-XXXXXX", sub[64];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(sub, sizeof(sub), "%s/a/b", dir);
    struct acme_store s;
    CHECK_INT(store_open(&s, sub), 0);
    struct stat st;
    CHECK(stat(sub, &st) == 0 && (st.st_mode & 0777) == 0700);
    CHECK_INT(store_write(&s, "k.pem", "secret", 6, 0600), 0);
    CHECK_INT(store_write(&s, "k.pem", "secret2", 7, 0600), 0);
    char path[96], *data = NULL;
    size_t len = 0;
    snprintf(path, sizeof(path), "%s/k.pem", sub);
    CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0600);
    CHECK_INT(store_read(&s, "k.pem", &data, &len, 100), 0);
    CHECK_MEM(data, len, "secret2");
    free(data);
    CHECK_INT(store_read(&s, "k.pem", &data, &len, 3), -EFBIG);
    CHECK_INT(store_read(&s, "none", &data, &len, 100), -ENOENT);
    CHECK_INT(store_write(&s, "../x", "x", 1, 0600), -EINVAL);
    /* A lock held (by another open file: another process alike) is refused, then free. */
    int a = store_lock(&s, "k.pem", 0);
    CHECK(a >= 0);
    CHECK_INT(store_lock(&s, "k.pem", 0), -EWOULDBLOCK);
    CHECK_INT(store_lock(&s, "k.pem", 200), -EWOULDBLOCK);
    store_unlock(a);
    int b = store_lock(&s, "k.pem", 0);
    CHECK(b >= 0);
    store_unlock(b);
    store_close(&s);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
}

TEST(acme_tokens_answer_only_their_host_and_token)
{
    struct acme_tokens t;
    char out[256];
    CHECK_INT(tokens_init(&t, 2), 0);
    struct tokens_reader *r = tokens_reader(&t, 1);
    CHECK_INT(tokens_http01(r, "a.test", 6, "tok", 3, out, sizeof(out)), 0);
    CHECK_INT(tokens_add_http(&t, "a.test", "tok", "tok.thumb"), 0);
    CHECK_INT(tokens_add_http(&t, "b.test", "tok2", "tok2.thumb"), 0);
    size_t n = tokens_http01(r, "a.test", 6, "tok", 3, out, sizeof(out));
    CHECK_MEM(out, n, "tok.thumb");
    n = tokens_http01(r, "A.Test:8080", 11, "tok", 3, out, sizeof(out));
    CHECK_MEM(out, n, "tok.thumb");
    n = tokens_http01(r, "a.test.", 7, "tok", 3, out, sizeof(out));
    CHECK_MEM(out, n, "tok.thumb");
    /* Never for another name, nor a prefix of the token, nor without a Host. */
    CHECK_INT(tokens_http01(r, "b.test", 6, "tok", 3, out, sizeof(out)), 0);
    CHECK_INT(tokens_http01(r, "a.test.evil", 11, "tok", 3, out, sizeof(out)), 0);
    CHECK_INT(tokens_http01(r, "a.tes", 5, "tok", 3, out, sizeof(out)), 0);
    CHECK_INT(tokens_http01(r, "a.test", 6, "to", 2, out, sizeof(out)), 0);
    CHECK_INT(tokens_http01(r, NULL, 0, "tok", 3, out, sizeof(out)), 0);
    CHECK_INT(tokens_http01(r, "a.test", 6, "tok", 3, out, 5), 0);
    CHECK_INT(tokens_remove(&t, "a.test", "tok"), 0);
    CHECK_INT(tokens_http01(r, "a.test", 6, "tok", 3, out, sizeof(out)), 0);
    n = tokens_http01(r, "b.test", 6, "tok2", 4, out, sizeof(out));
    CHECK_MEM(out, n, "tok2.thumb");
    /* TLS-ALPN-01: the certificate for that name, a reference for the caller. */
    unsigned char d[32] = {1};
    X509 *x = NULL, *got = NULL;
    EVP_PKEY *k = NULL, *gotk = NULL;
    CHECK_INT(jws_alpn_cert("c.test", d, 1700000000, &x, &k), 0);
    CHECK_INT(tokens_add_alpn(&t, "c.test", x, k), 0);
    CHECK_INT(tokens_alpn(r, "b.test", &got, &gotk), -ENOENT);
    CHECK_INT(tokens_alpn(r, NULL, &got, &gotk), -ENOENT);
    CHECK_INT(tokens_alpn(r, "C.TEST", &got, &gotk), 0);
    CHECK(got == x && gotk == k);
    X509_free(got);
    EVP_PKEY_free(gotk);
    CHECK_INT(tokens_remove(&t, "c.test", NULL), 0);
    CHECK_INT(tokens_alpn(r, "c.test", &got, &gotk), -ENOENT);
    /* The HTTP-01 answer of c.test's name space is untouched by the ALPN entry's removal. */
    n = tokens_http01(tokens_reader(&t, 0), "b.test", 6, "tok2", 4, out, sizeof(out));
    CHECK_MEM(out, n, "tok2.thumb");
    X509_free(x);
    EVP_PKEY_free(k);
    tokens_fini(&t);
}
