/* The certificates of a load (issue 40): every pair read once for every worker, the pairs of
 * one name set grouped into one OpenSSL context each, indexed by their files' sums (what a reload
 * reuses) and by names (what SNI picks by); see tls_ctx.h and tls_int.h. */
#include "tls/tls_ctx.h"
#include "tls/tls_int.h"

#include <fcntl.h>
#include <unistd.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>
#include "rt/certsets.h"
#include "rt/file.h"

#define PEM_MAX (1 << 20) /* a certificate chain or key file larger than this is not one */

static uint32_t sum_hash(const unsigned char sum[32])
{
    uint32_t h;
    memcpy(&h, sum, sizeof(h)); /* a SHA-256 is its own hash */
    return h;
}

static int sum_index_init(struct sum_index *x, size_t n)
{
    size_t slots = vhost_slots_for(n);
    if (!(x->at = calloc(slots, sizeof(*x->at))))
        return -ENOMEM;
    x->mask = (uint32_t)slots - 1;
    return 0;
}

/* Records that position i has sum (the first of equal sums stays). */
static void sum_index_add(struct sum_index *x, const unsigned char sum[32], int i,
                          const unsigned char *(*sum_of)(const void *base, int i), const void *base)
{
    for (uint32_t k = sum_hash(sum) & x->mask;; k = (k + 1) & x->mask) {
        if (!x->at[k]) {
            x->at[k] = (uint32_t)i + 1;
            return;
        }
        if (memcmp(sum_of(base, (int)x->at[k] - 1), sum, 32) == 0)
            return;
    }
}

/* The position recorded with sum, or -1. */
static int sum_index_find(const struct sum_index *x, const unsigned char sum[32],
                          const unsigned char *(*sum_of)(const void *base, int i), const void *base)
{
    if (!x->at)
        return -1;
    for (uint32_t k = sum_hash(sum) & x->mask; x->at[k]; k = (k + 1) & x->mask)
        if (memcmp(sum_of(base, (int)x->at[k] - 1), sum, 32) == 0)
            return (int)x->at[k] - 1;
    return -1;
}

static void warn(char *warnings, size_t cap, const char *fmt, const char *file, const ASN1_TIME *t)
{
    struct tm tm;
    char when[32] = "?";
    if (ASN1_TIME_to_tm(t, &tm))
        strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S UTC", &tm);
    size_t used = strlen(warnings);
    snprintf(warnings + used, cap - used, fmt, file, when);
}

/* What a loaded pair says about its dates, into warnings[0..cap). */
static void warn_dates(char *warnings, size_t cap, const struct pair *p)
{
    if (X509_cmp_current_time(X509_get0_notAfter(p->leaf)) < 0)
        warn(warnings, cap, "--tls-cert '%s' expired on %s; clients will refuse it\n", p->cert_path,
             X509_get0_notAfter(p->leaf));
    else if (X509_cmp_current_time(X509_get0_notBefore(p->leaf)) > 0)
        warn(warnings, cap, "--tls-cert '%s' is not valid before %s; clients will refuse it\n",
             p->cert_path, X509_get0_notBefore(p->leaf));
}

static void pair_free(struct pair *p)
{
    X509_free(p->leaf);
    sk_X509_pop_free(p->chain, X509_free);
    EVP_PKEY_free(p->key);
    free(p->cert_path);
    free(p->key_path);
}

/* A whole file into a buffer of the caller's (free it) and its identity: 0 or -errno. */
static int read_whole(const char *path, char **out, size_t *len, struct file_id *id)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC), rc = 0;
    struct stat st;
    char *buf = NULL;
    if (fd < 0)
        return -errno;
    if (fstat(fd, &st) != 0) {
        rc = -errno;
        goto out;
    }
    if (st.st_size > PEM_MAX) {
        rc = -EFBIG;
        goto out;
    }
    if (!(buf = malloc((size_t)st.st_size + 1))) {
        rc = -ENOMEM;
        goto out;
    }
    if ((rc = file_read_all(fd, buf, (uint64_t)st.st_size)) != 0)
        goto out;
    *len = (size_t)st.st_size;
    if (id)
        *id = (struct file_id){st.st_dev, st.st_ino, st.st_size, st.st_mtim, st.st_ctim};
out:
    close(fd);
    if (rc)
        free(buf);
    else
        *out = buf;
    return rc;
}

static int file_identity(const char *path, struct file_id *id)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return -errno;
    *id = (struct file_id){st.st_dev, st.st_ino, st.st_size, st.st_mtim, st.st_ctim};
    return 0;
}

static bool same_file(const struct file_id *a, const struct file_id *b)
{
    return a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
           a->mtime.tv_sec == b->mtime.tv_sec && a->mtime.tv_nsec == b->mtime.tv_nsec &&
           a->ctime.tv_sec == b->ctime.tv_sec && a->ctime.tv_nsec == b->ctime.tv_nsec;
}

static bool sha256(const void *a, size_t alen, const void *b, size_t blen, unsigned char out[32])
{
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    bool ok = md && EVP_DigestInit_ex(md, EVP_sha256(), NULL) && EVP_DigestUpdate(md, a, alen) &&
              (!blen || EVP_DigestUpdate(md, b, blen)) && EVP_DigestFinal_ex(md, out, NULL);
    EVP_MD_CTX_free(md);
    return ok;
}

/* The key two certificates with the same names share (rt/certsets.h): their subject and
 * subjectAltName. */
static bool names_sum(X509 *x, unsigned char out[32])
{
    unsigned char *der = NULL;
    int len = i2d_X509_NAME(X509_get_subject_name(x), &der);
    if (len < 0)
        return false;
    int at = X509_get_ext_by_NID(x, NID_subject_alt_name, -1);
    const ASN1_OCTET_STRING *san = at >= 0 ? X509_EXTENSION_get_data(X509_get_ext(x, at)) : NULL;
    certset_key(der, (size_t)len, san ? ASN1_STRING_get0_data(san) : NULL,
                san ? (size_t)ASN1_STRING_length(san) : 0, out);
    OPENSSL_free(der);
    return true;
}

static const unsigned char *pair_sum_of(const void *base, int i)
{
    return ((const struct pair *)base)[i].cert_sum;
}

static const unsigned char *group_sum_of(const void *base, int i)
{
    return ((const struct tls_group *)base)[i].sum;
}

/* A pair from its files (the certificate's bytes in cert, cert_len), key identity id: 0, or
 * -errno with the file at fault in why. */
static int parse_pair(const struct tls_cert_files *f, const char *cert, size_t cert_len,
                      struct pair *p, char *why, size_t why_len)
{
    int rc = -EINVAL;
    char *kbuf = NULL;
    size_t klen;
    BIO *cb = BIO_new_mem_buf(cert, (int)cert_len), *kb = NULL;
    if (!cb) {
        rc = -ENOMEM;
        snprintf(why, why_len, "--tls-cert '%s': out of memory", f->cert);
        goto out;
    }
    if (!(p->leaf = PEM_read_bio_X509(cb, NULL, NULL, NULL))) {
        snprintf(why, why_len, "--tls-cert '%s': no PEM certificate in it", f->cert);
        goto out;
    }
    if (!(p->chain = sk_X509_new_null())) {
        rc = -ENOMEM;
        snprintf(why, why_len, "--tls-cert '%s': out of memory", f->cert);
        goto out;
    }
    X509 *x;
    while ((x = PEM_read_bio_X509(cb, NULL, NULL, NULL))) {
        if (!sk_X509_push(p->chain, x)) {
            X509_free(x);
            rc = -ENOMEM;
            snprintf(why, why_len, "--tls-cert '%s': out of memory", f->cert);
            goto out;
        }
    }
    ERR_clear_error(); /* the end of the file reads as "no start line" */
    if ((rc = read_whole(f->key, &kbuf, &klen, &p->key_id)) != 0) {
        snprintf(why, why_len, "--tls-key '%s': %s", f->key,
                 rc == -EFBIG ? "too large for a key" : strerror(-rc));
        goto out;
    }
    rc = -EINVAL;
    if (!(kb = BIO_new_mem_buf(kbuf, (int)klen)) ||
        !(p->key = PEM_read_bio_PrivateKey(kb, NULL, NULL, NULL))) {
        snprintf(why, why_len, "--tls-key '%s': no PEM private key in it (or it is encrypted)",
                 f->key);
        goto out;
    }
    if (X509_check_private_key(p->leaf, p->key) != 1) {
        snprintf(why, why_len, "--tls-key '%s' does not match the certificate in '%s'", f->key,
                 f->cert);
        goto out;
    }
    if (!names_sum(p->leaf, p->names)) {
        rc = -ENOMEM;
        snprintf(why, why_len, "--tls-cert '%s': out of memory", f->cert);
        goto out;
    }
    rc = 0;
out:
    BIO_free(cb);
    BIO_free(kb);
    if (kbuf)
        OPENSSL_cleanse(kbuf, klen);
    free(kbuf);
    ERR_clear_error();
    return rc;
}

/* Pair f into p: the previous set's pair when its files are the same (paths, the certificate's
 * bytes, the key file's identity), else read. 0, or -errno with the file at fault in why. */
static int load_pair(const struct tls_cert_files *f, const struct tls_certs *prev, struct pair *p,
                     char *why, size_t why_len)
{
    char *cert = NULL;
    size_t len = 0;
    *p = (struct pair){.group = -1};
    int rc = read_whole(f->cert, &cert, &len, NULL);
    if (rc != 0) {
        snprintf(why, why_len, "--tls-cert '%s': %s", f->cert,
                 rc == -EFBIG ? "too large for a certificate" : strerror(-rc));
        return rc;
    }
    if (!(p->cert_path = strdup(f->cert)) || !(p->key_path = strdup(f->key)) ||
        !sha256(cert, len, NULL, 0, p->cert_sum)) {
        rc = -ENOMEM;
        snprintf(why, why_len, "TLS: out of memory");
        goto out;
    }
    /* The same certificate bytes may be several pairs' (one file, two keys): walk them all. */
    struct file_id key_id = {0};
    int at = prev ? sum_index_find(&prev->pair_sums, p->cert_sum, pair_sum_of, prev->pairs) : -1;
    if (at >= 0 && file_identity(f->key, &key_id) == 0) {
        for (int i = at; i < prev->num_pairs; i++) {
            const struct pair *q = &prev->pairs[i];
            if (memcmp(q->cert_sum, p->cert_sum, 32) == 0 && strcmp(q->cert_path, f->cert) == 0 &&
                strcmp(q->key_path, f->key) == 0 && same_file(&q->key_id, &key_id)) {
                X509_up_ref(q->leaf);
                EVP_PKEY_up_ref(q->key);
                if (!(p->chain = X509_chain_up_ref(q->chain))) {
                    X509_free(q->leaf);
                    EVP_PKEY_free(q->key);
                    break;
                }
                p->leaf = q->leaf;
                p->key = q->key;
                p->key_id = q->key_id;
                memcpy(p->names, q->names, 32);
                goto out; /* rc 0 */
            }
        }
    }
    rc = parse_pair(f, cert, len, p, why, why_len);
out:
    free(cert);
    return rc;
}

static void certs_free(struct tls_certs *c)
{
    for (int i = 0; i < c->num_groups; i++) {
        SSL_CTX_free(c->groups[i].ssl);
        X509_free(c->groups[i].leaf);
        free(c->groups[i].site_name);
    }
    free(c->groups);
    for (int i = 0; i < c->num_pairs; i++)
        pair_free(&c->pairs[i]);
    free(c->pairs);
    free(c->pair_sums.at);
    free(c->group_sums.at);
    names_free(&c->sites);
    names_free(&c->leaves);
    free(c);
}

void tls_certs_put(struct tls_certs *c)
{
    if (c && atomic_fetch_sub_explicit(&c->refs, 1, memory_order_acq_rel) == 1)
        certs_free(c);
}

const char *tls_certs_warnings(const struct tls_certs *c)
{
    return c->warnings;
}

int tls_certs_count(const struct tls_certs *c, int *reused)
{
    if (reused)
        *reused = c->reused;
    return c->num_groups - c->certless;
}

/* The certificate's own names (DNS subjectAltNames, else its subject's CN) for group g. */
static int leaf_names(struct names *n, X509 *leaf, int g)
{
    int rc = 0, pushed = 0;
    GENERAL_NAMES *gens = X509_get_ext_d2i(leaf, NID_subject_alt_name, NULL, NULL);
    for (int i = 0; gens && rc == 0 && i < sk_GENERAL_NAME_num(gens); i++) {
        const GENERAL_NAME *gn = sk_GENERAL_NAME_value(gens, i);
        if (gn->type != GEN_DNS)
            continue;
        const unsigned char *d = ASN1_STRING_get0_data(gn->d.dNSName);
        int len = ASN1_STRING_length(gn->d.dNSName);
        if (len <= 0 || len > VHOST_NAME_MAX || memchr(d, 0, (size_t)len))
            continue;
        rc = names_push(n, (const char *)d, (size_t)len, g);
        pushed++;
    }
    GENERAL_NAMES_free(gens);
    if (rc == 0 && pushed == 0) {
        char cn[VHOST_NAME_MAX + 1];
        int len =
            X509_NAME_get_text_by_NID(X509_get_subject_name(leaf), NID_commonName, cn, sizeof(cn));
        if (len > 0)
            rc = names_push(n, cn, (size_t)len, g);
    }
    ERR_clear_error();
    return rc;
}

/* sum = SHA-256(sum || data): a group's sum over its pairs, one pair at a time. */
static bool fold(unsigned char sum[32], const void *data, size_t len)
{
    unsigned char in[32];
    memcpy(in, sum, 32);
    return sha256(in, 32, data, len, sum);
}

static bool fold_pair(unsigned char sum[32], const struct pair *p)
{
    const struct file_id *k = &p->key_id;
    int64_t id[8] = {(int64_t)k->dev,  (int64_t)k->ino, (int64_t)k->size, k->mtime.tv_sec,
                     k->mtime.tv_nsec, k->ctime.tv_sec, k->ctime.tv_nsec, 0};
    return fold(sum, p->cert_sum, 32) && fold(sum, p->cert_path, strlen(p->cert_path) + 1) &&
           fold(sum, p->key_path, strlen(p->key_path) + 1) && fold(sum, id, sizeof(id));
}

/* Every pair of s into c's groups (loaded, or prev's where the files are the same): a group
 * is a name set (rt/certsets.h, QUIC's too), wherever its pairs stand in the list. */
static int load_pairs(struct tls_certs *c, const struct tls_settings *s,
                      const struct tls_certs *prev, char *why, size_t why_len)
{
    struct certsets sets;
    int rc = certsets_init(&sets, s->num_certs);
    if (rc != 0)
        snprintf(why, why_len, "TLS: out of memory");
    for (int i = 0; rc == 0 && i < s->num_certs; i++) {
        struct pair *p = &c->pairs[i];
        if ((rc = load_pair(&s->certs[i], prev, p, why, why_len)) != 0) {
            pair_free(p); /* what it had made before it failed */
            break;
        }
        c->num_pairs++;
        warn_dates(c->warnings, sizeof(c->warnings), p);
        int g = c->certless + certsets_add(&sets, p->names);
        if (g == c->num_groups) {
            c->num_groups++;
            X509_up_ref(p->leaf);
            c->groups[g].leaf = p->leaf;
        }
        p->group = g;
        if (!fold_pair(c->groups[g].sum, p)) {
            snprintf(why, why_len, "TLS: out of memory");
            rc = -ENOMEM;
        }
    }
    certsets_free(&sets);
    return rc;
}

/* Each group's OpenSSL context: the previous set's when the group's pairs are the same files
 * with the same contents (a reload of 10,000 sites makes only the changed ones), else new. */
static int make_groups(struct tls_certs *c, const struct tls_settings *s,
                       const struct tls_certs *prev, char *why, size_t why_len)
{
    const char *kx = s->kx_groups ? s->kx_groups : tls_default_groups();
    int rc = 0;
    if (c->certless && !(c->groups[0].ssl = tls_ssl_ctx_make(s, kx)))
        goto no_ctx;
    for (int g = c->certless; prev && g < c->num_groups; g++) {
        int at = sum_index_find(&prev->group_sums, c->groups[g].sum, group_sum_of, prev->groups);
        if (at >= 0 && SSL_CTX_up_ref(prev->groups[at].ssl)) {
            c->groups[g].ssl = prev->groups[at].ssl;
            c->reused++;
        }
    }
    bool *fresh = calloc((size_t)c->num_groups, sizeof(*fresh));
    if (!fresh)
        goto no_mem;
    for (int i = 0; rc == 0 && i < c->num_pairs; i++) {
        struct pair *p = &c->pairs[i];
        struct tls_group *gr = &c->groups[p->group];
        if (!gr->ssl) {
            if (!(gr->ssl = tls_ssl_ctx_make(s, kx))) {
                free(fresh);
                goto no_ctx;
            }
            fresh[p->group] = true;
        }
        /* override 0: a second certificate of a key type the names already have is refused */
        if (fresh[p->group] &&
            SSL_CTX_use_cert_and_key(gr->ssl, p->leaf, p->key, p->chain, 0) != 1) {
            snprintf(why, why_len,
                     "--tls-cert '%s': its names already have a certificate of this key type, or "
                     "OpenSSL refuses its key",
                     p->cert_path);
            rc = -EINVAL;
        }
    }
    free(fresh);
    ERR_clear_error();
    return rc;
no_ctx:
    ERR_clear_error();
    snprintf(why, why_len, "TLS: cannot set up OpenSSL's context");
    return -ENOMEM;
no_mem:
    snprintf(why, why_len, "TLS: out of memory");
    return -ENOMEM;
}

/* The names SNI looks up: the sites' (each naming its pair's group), the certificates' own. */
static int index_names(struct tls_certs *c, const struct tls_settings *s)
{
    int rc = 0;
    for (int i = 0; rc == 0 && i < s->num_certs; i++) {
        const struct tls_cert_files *f = &s->certs[i];
        struct tls_group *gr = &c->groups[c->pairs[i].group];
        for (int h = 0; rc == 0 && h < f->num_hosts; h++) {
            const char *name = f->hosts[h];
            rc = names_push(&c->sites, name, strlen(name), c->pairs[i].group);
            /* the site's name as a route key: an exact name, or a wildcard as its ".suffix" */
            const char *key = names_last(&c->sites);
            if (rc == 0 && key && !gr->site_name &&
                !(gr->site_name = strdup(key[0] == '*' ? key + 1 : key)))
                rc = -ENOMEM;
        }
    }
    for (int g = c->certless; rc == 0 && g < c->num_groups; g++)
        rc = leaf_names(&c->leaves, c->groups[g].leaf, g);
    if (rc == 0)
        rc = names_index(&c->sites);
    if (rc == 0)
        rc = names_index(&c->leaves);
    if (rc == 0)
        rc = sum_index_init(&c->pair_sums, (size_t)c->num_pairs);
    for (int i = 0; rc == 0 && i < c->num_pairs; i++)
        sum_index_add(&c->pair_sums, c->pairs[i].cert_sum, i, pair_sum_of, c->pairs);
    if (rc == 0)
        rc = sum_index_init(&c->group_sums, (size_t)c->num_groups);
    for (int g = c->certless; rc == 0 && g < c->num_groups; g++)
        sum_index_add(&c->group_sums, c->groups[g].sum, g, group_sum_of, c->groups);
    return rc;
}

int tls_certs_new(const struct tls_settings *s, const struct tls_certs *prev,
                  struct tls_certs **out, int *bad, char *why, size_t why_len)
{
    int rc;
    if (bad)
        *bad = -1;
    if (s->num_certs < (s->certless ? 0 : 1)) {
        snprintf(why, why_len, "TLS needs a --tls-cert/--tls-key pair");
        return -EINVAL;
    }
    if (s->kx_groups && tls_groups_check(s->kx_groups, why, why_len) != 0)
        return -EINVAL;
    struct tls_certs *c = calloc(1, sizeof(*c));
    if (!c) {
        snprintf(why, why_len, "TLS: out of memory");
        return -ENOMEM;
    }
    atomic_init(&c->refs, 1);
    c->certless = s->certless;
    c->num_groups = s->certless; /* certless: group 0 has no certificate, and only refuses */
    c->pairs = calloc((size_t)s->num_certs + 1, sizeof(*c->pairs));
    c->groups = calloc((size_t)s->num_certs + 1, sizeof(*c->groups));
    if (!c->pairs || !c->groups) {
        snprintf(why, why_len, "TLS: out of memory");
        rc = -ENOMEM;
        goto fail;
    }
    if ((rc = load_pairs(c, s, prev, why, why_len)) != 0) {
        if (bad)
            *bad = c->num_pairs; /* the one it could not load */
        goto fail;
    }
    if ((rc = make_groups(c, s, prev, why, why_len)) != 0)
        goto fail;
    if ((rc = index_names(c, s)) != 0) {
        snprintf(why, why_len, "TLS: out of memory");
        goto fail;
    }
    *out = c;
    return 0;
fail:
    certs_free(c);
    return rc;
}

int tls_pair_check(const struct tls_cert_files *f, char *why, size_t why_len)
{
    struct pair p;
    int rc = load_pair(f, NULL, &p, why, why_len);
    pair_free(&p);
    return rc;
}
