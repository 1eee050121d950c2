/* The TLS side of the QUIC endpoint: the certificates of a load, shared by every worker's
 * endpoint (quic_certs_*, chosen by SNI through a hash of their names), and each
 * connection's GnuTLS session (quic_tls_setup, the SNI, the names its certificate covers for
 * the 421 rule); see quic.h and quicint.h. */
#include "quic/quicint.h"

#include <errno.h>
#include <gnutls/x509.h>
#include <ngtcp2/ngtcp2_crypto_gnutls.h>
#include <stdio.h>
#include <string.h>

#include "rt/certsets.h"
#include "rt/names.h"

/* The credentials of one load, every worker's (issue 40: 10,000 pairs read once, not once per
 * worker); GnuTLS reads them unlocked from any session once they are made. One credentials
 * object per name set (an ECDSA and an RSA pair of the same names share one wherever they
 * stand in the list, GnuTLS picking by key type: rt/certsets.h's sets, the TLS port's groups),
 * chosen by the ClientHello's SNI through a hash of the certificates' names: GnuTLS's own
 * choice compares every certificate's names in turn. */
struct quic_cred {
    gnutls_certificate_credentials_t *creds; /* the first the default (no or an unknown SNI) */
    gnutls_x509_crt_t *leaves;               /* each one's first certificate */
    unsigned num_creds;
    atomic_uint refs; /* one per struct quic_certs over it: taken per worker, not per connection */
    struct names names; /* a certificate's name (DNS subjectAltName, else CN): its set */
    /* Issue 37, as the TLS port's: the sites' names, each naming the set of its site's pair
     * (SNI looks here first), and each set's site (the first name of the first site whose
     * pair it holds, as a route key), or NULL for a process-level one. */
    struct names sites;
    char **site_names;
};

struct quic_certs {
    struct quic_cred *shared;
    gnutls_certificate_credentials_t cred; /* shared's default, at hand */
    unsigned refs; /* the endpoint's, while current, and each connection's made with it */
};

/* ngtcp2's callbacks. */
static ngtcp2_conn *get_conn(ngtcp2_crypto_conn_ref *ref)
{
    struct quic_conn *qc = ref->user_data;
    return qc->conn;
}

/* GnuTLS post-client-hello: remembers the SNI (for the 421 rule and the log). */
static int on_client_hello(gnutls_session_t s, unsigned htype, unsigned when, unsigned incoming,
                           const gnutls_datum_t *msg)
{
    (void)htype, (void)when, (void)incoming, (void)msg;
    struct quic_conn *qc = ((ngtcp2_crypto_conn_ref *)gnutls_session_get_ptr(s))->user_data;
    size_t len = sizeof(qc->sni) - 1;
    unsigned type;
    if (gnutls_server_name_get(s, qc->sni, &len, &type, 0) != 0 || type != GNUTLS_NAME_DNS)
        qc->sni[0] = '\0';
    return 0;
}

/* GnuTLS post-client-hello, before it chooses a certificate: the credentials of the site the
 * SNI names, else of the name set that covers it (issue 40), found in O(1), as the TLS port's
 * sni_group chooses; the default ones stay otherwise. What was chosen is kept for the 421
 * rule (quic_cert_site_name). */
static int pick_cred(gnutls_session_t s)
{
    struct quic_conn *qc = ((ngtcp2_crypto_conn_ref *)gnutls_session_get_ptr(s))->user_data;
    const struct quic_cred *q = qc->certs->shared;
    char name[256];
    size_t len = sizeof(name) - 1;
    unsigned type;
    qc->cred = 0;
    qc->by_site = false;
    if (q->num_creds < 2 || gnutls_server_name_get(s, name, &len, &type, 0) != 0 ||
        type != GNUTLS_NAME_DNS)
        return 0;
    int g = names_lookup(&q->sites, name);
    qc->by_site = g >= 0;
    if (g < 0) {
        g = names_lookup(&q->names, name);
        /* the table's wildcard covers any depth, a certificate's one label (RFC 6125 6.4.3) */
        if (g > 0 && gnutls_x509_crt_check_hostname2(q->leaves[g], name, 0) == 0)
            g = -1;
    }
    if (g > 0 && gnutls_credentials_set(s, GNUTLS_CRD_CERTIFICATE, q->creds[g]) == 0)
        qc->cred = (unsigned)g;
    return 0;
}

int quic_tls_setup(struct quic_ep *ep, struct quic_conn *qc)
{
    static const gnutls_datum_t alpn = {(unsigned char *)"h3", 2};
    if (gnutls_init(&qc->tls, GNUTLS_SERVER | GNUTLS_NO_AUTO_SEND_TICKET |
                                  GNUTLS_NO_END_OF_EARLY_DATA) != 0) {
        qc->tls = NULL;
        return -ENOMEM;
    }
    qc->ref = (ngtcp2_crypto_conn_ref){get_conn, qc};
    gnutls_session_set_ptr(qc->tls, &qc->ref);
    qc->certs = ep->certs;
    qc->certs->refs++;
    if (gnutls_priority_set(qc->tls, ep->prio) != 0 ||
        ngtcp2_crypto_gnutls_configure_server_session(qc->tls) != 0 ||
        gnutls_credentials_set(qc->tls, GNUTLS_CRD_CERTIFICATE, qc->certs->cred) != 0 ||
        gnutls_alpn_set_protocols(qc->tls, &alpn, 1, GNUTLS_ALPN_MANDATORY) != 0)
        return -EINVAL;
    gnutls_handshake_set_hook_function(qc->tls, GNUTLS_HANDSHAKE_CLIENT_HELLO, GNUTLS_HOOK_POST,
                                       on_client_hello);
    gnutls_handshake_set_post_client_hello_function(qc->tls, pick_cred);
    ngtcp2_conn_set_tls_native_handle(qc->conn, qc->tls);
    return 0;
}

const char *quic_sni(const struct quic_conn *qc)
{
    return qc->sni;
}

bool quic_cert_only(const struct quic_conn *qc)
{
    /* name sets, as the TLS port counts its groups: an ECDSA and an RSA pair of one host are
     * one certificate to choose */
    return !qc->certs || qc->certs->shared->num_creds < 2;
}

const char *quic_cert_site_name(const struct quic_conn *qc)
{
    if (!qc->certs)
        return NULL;
    if (qc->by_site)
        return qc->sni;
    return qc->certs->shared->site_names[qc->cred];
}

bool quic_cert_names(const struct quic_conn *qc, const char *host, size_t len)
{
    char name[256];
    const gnutls_datum_t *der = gnutls_certificate_get_ours(qc->tls);
    gnutls_x509_crt_t crt;
    if (!der || len >= sizeof(name) || gnutls_x509_crt_init(&crt) != 0)
        return false;
    memcpy(name, host, len);
    name[len] = '\0';
    bool ok = gnutls_x509_crt_import(crt, der, GNUTLS_X509_FMT_DER) == 0 &&
              gnutls_x509_crt_check_hostname2(crt, name, 0) != 0;
    gnutls_x509_crt_deinit(crt);
    return ok;
}

static void cred_put(struct quic_cred *q)
{
    if (!q || atomic_fetch_sub_explicit(&q->refs, 1, memory_order_acq_rel) != 1)
        return;
    for (unsigned i = 0; i < q->num_creds; i++) {
        gnutls_certificate_free_credentials(q->creds[i]);
        if (q->leaves[i])
            gnutls_x509_crt_deinit(q->leaves[i]);
    }
    for (unsigned i = 0; q->site_names && i < q->num_creds; i++)
        free(q->site_names[i]);
    names_free(&q->names);
    names_free(&q->sites);
    free(q->site_names);
    free(q->creds);
    free(q->leaves);
    free(q);
}

/* A struct quic_certs over q, whose reference it takes over. */
static int wrap(struct quic_cred *q, struct quic_certs **out)
{
    struct quic_certs *c = calloc(1, sizeof(*c));
    if (!c) {
        cred_put(q);
        return -ENOMEM;
    }
    *c = (struct quic_certs){.shared = q, .cred = q->creds[0], .refs = 1};
    *out = c;
    return 0;
}

/* The names of set g's certificate (DNS subjectAltNames, else the CN), pushed. */
static int leaf_names(struct quic_cred *q, int g)
{
    char buf[VHOST_NAME_MAX + 1];
    int rc = 0, found = 0;
    for (unsigned seq = 0; rc == 0; seq++) {
        size_t len = sizeof(buf);
        int t = gnutls_x509_crt_get_subject_alt_name(q->leaves[g], seq, buf, &len, NULL);
        if (t == GNUTLS_E_REQUESTED_DATA_NOT_AVAILABLE)
            break;
        if (t == GNUTLS_SAN_DNSNAME) {
            rc = names_push(&q->names, buf, len, g);
            found++;
        }
    }
    size_t len = sizeof(buf);
    if (rc == 0 && !found &&
        gnutls_x509_crt_get_dn_by_oid(q->leaves[g], GNUTLS_OID_X520_COMMON_NAME, 0, 0, buf, &len) ==
            0)
        rc = names_push(&q->names, buf, len, g);
    return rc;
}

/* The name set key of a certificate (rt/certsets.h, as the TLS port's): its subject and its
 * subjectAltName. 0, or a GnuTLS error. */
static int names_key(gnutls_x509_crt_t crt, unsigned char key[CERTSET_KEY_LEN])
{
    gnutls_datum_t dn = {0}, san = {0};
    unsigned critical;
    int rc = gnutls_x509_crt_get_raw_dn(crt, &dn);
    int has =
        rc == 0 ? gnutls_x509_crt_get_extension_by_oid2(crt, "2.5.29.17", 0, &san, &critical) : 0;
    if (rc == 0 && has != 0 && has != GNUTLS_E_REQUESTED_DATA_NOT_AVAILABLE)
        rc = has;
    if (rc == 0)
        certset_key(dn.data, dn.size, san.data, has == 0 ? san.size : 0, key);
    gnutls_free(dn.data);
    gnutls_free(san.data);
    return rc;
}

/* Pair i into q, into its name set (sets): the set of an earlier pair that names the same (an
 * ECDSA and an RSA pair of one host, wherever they stand), else a set of its own; the set in
 * *set. 0, or -errno with the file in why. */
static int add_pair(struct quic_cred *q, struct certsets *sets, const char *cert, const char *key,
                    int *set, char *why, size_t why_len)
{
    gnutls_certificate_credentials_t cred = NULL;
    gnutls_x509_crt_t leaf = NULL;
    gnutls_datum_t der;
    gnutls_x509_trust_list_t none;
    unsigned char names[CERTSET_KEY_LEN];
    int g = -1;
    int rc = gnutls_certificate_allocate_credentials(&cred);
    /* No client certificates are asked for: a trust list of one bucket, not GnuTLS's 127 for
     * each of 10,000 credentials */
    if (rc == 0 && gnutls_x509_trust_list_init(&none, 1) == 0)
        gnutls_certificate_set_trust_list(cred, none, 0);
    if (rc == 0)
        rc = gnutls_certificate_set_x509_key_file2(cred, cert, key, GNUTLS_X509_FMT_PEM, NULL, 0);
    if (rc >= 0 && (rc = gnutls_certificate_get_crt_raw(cred, 0, 0, &der)) == 0 &&
        (rc = gnutls_x509_crt_init(&leaf)) == 0)
        rc = gnutls_x509_crt_import(leaf, &der, GNUTLS_X509_FMT_DER);
    if (rc >= 0 && (rc = names_key(leaf, names)) == 0)
        g = certsets_add(sets, names);
    if (rc >= 0 && g < (int)q->num_creds) {
        gnutls_certificate_free_credentials(cred);
        gnutls_x509_crt_deinit(leaf);
        cred = NULL;
        leaf = NULL;
        rc = gnutls_certificate_set_x509_key_file2(q->creds[g], cert, key, GNUTLS_X509_FMT_PEM,
                                                   NULL, 0);
    } else if (rc >= 0) {
        q->creds[g] = cred;
        q->leaves[g] = leaf;
        cred = NULL;
        leaf = NULL;
        if ((rc = leaf_names(q, (int)q->num_creds++)) != 0) {
            snprintf(why, why_len, "HTTP/3: out of memory");
            return rc;
        }
    }
    if (cred)
        gnutls_certificate_free_credentials(cred);
    if (leaf)
        gnutls_x509_crt_deinit(leaf);
    if (rc < 0) {
        snprintf(why, why_len, "HTTP/3: %s: %s", cert, gnutls_strerror(rc));
        return -EINVAL;
    }
    *set = g;
    return 0;
}

/* Site's names into q->sites, for set g (the one pair i went into), the first of them the
 * set's site unless an earlier pair's site named it: 0 or -ENOMEM. */
static int site_names(struct quic_cred *q, const struct quic_pair_site *site, int g)
{
    int rc = 0;
    for (int h = 0; rc == 0 && h < site->num_hosts; h++) {
        const char *name = site->hosts[h];
        rc = names_push(&q->sites, name, strlen(name), g);
        /* the site's name as a route key: an exact name, or a wildcard as its ".suffix" */
        const char *key = names_last(&q->sites);
        if (rc == 0 && key && !q->site_names[g] &&
            !(q->site_names[g] = strdup(key[0] == '*' ? key + 1 : key)))
            rc = -ENOMEM;
    }
    return rc;
}

int quic_certs_new(struct quic_certs **out, const char *const *certs, const char *const *keys,
                   const struct quic_pair_site *sites, char *why, size_t why_len)
{
    struct quic_cred *q = calloc(1, sizeof(*q));
    unsigned n = 0;
    int rc = 0;
    while (certs[n])
        n++;
    if (!q)
        return -ENOMEM;
    atomic_init(&q->refs, 1);
    if (!(q->creds = calloc(n + 1, sizeof(*q->creds))) ||
        !(q->leaves = calloc(n + 1, sizeof(*q->leaves))) ||
        !(q->site_names = calloc(n + 1, sizeof(*q->site_names))))
        rc = -ENOMEM;
    struct certsets sets = {0};
    if (rc == 0)
        rc = certsets_init(&sets, (int)n);
    /* Each pair in the order given; the first is the default, as the TLS port's. */
    for (unsigned i = 0; rc == 0 && i < n; i++) {
        int g;
        rc = add_pair(q, &sets, certs[i], keys[i], &g, why, why_len);
        if (rc == 0 && sites && (rc = site_names(q, &sites[i], g)) != 0)
            snprintf(why, why_len, "HTTP/3: out of memory");
    }
    certsets_free(&sets);
    if (rc == 0)
        rc = names_index(&q->names); /* a name twice: the first set's */
    if (rc == 0)
        rc = names_index(&q->sites);
    /* No pair yet (automatic HTTPS before its first certificate): credentials without one,
     * whose handshakes fail, as the TLS port's certless context refuses */
    if (rc == 0 && !q->num_creds && gnutls_certificate_allocate_credentials(&q->creds[0]) == 0)
        q->num_creds = 1;
    else if (rc == 0 && !q->num_creds)
        rc = -ENOMEM;
    if (rc != 0) {
        if (rc == -ENOMEM)
            snprintf(why, why_len, "HTTP/3: out of memory");
        cred_put(q);
        return rc;
    }
    return wrap(q, out);
}

int quic_certs_dup(const struct quic_certs *c, struct quic_certs **out)
{
    atomic_fetch_add_explicit(&c->shared->refs, 1, memory_order_relaxed);
    return wrap(c->shared, out);
}

void quic_certs_put(struct quic_certs *c)
{
    if (c && --c->refs == 0) {
        cred_put(c->shared);
        free(c);
    }
}

const struct quic_certs *quic_ep_certs(const struct quic_ep *ep)
{
    return ep->certs;
}

void quic_ep_publish(struct quic_ep *ep, struct quic_certs *c)
{
    /* Never adopted: nothing else refers to the one replaced. */
    quic_certs_put(atomic_exchange(&ep->next_certs, c));
}
