/* Automatic HTTPS; see acme.h. */
#include "server/acme/acme.h"

#include <errno.h>
#include <limits.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "server/acme/acme_int.h"
#include "server/acme/client.h"
#include "server/acme/dns01.h"
#include "server/acme/jws.h"
#include "server/acme/store.h"
#include "site/tokens.h"
#include "server/acme/when.h"
#include "config/config.h"
#include "server/privs.h"
#include "rt/errlog.h"

#define CERT_MAX (256 * 1024) /* a chain and its key, read back from the state directory */
#define RECHECK (6 * 3600)    /* a valid certificate's disk copy and ARI window, looked at again */
#define LOCK_RETRY 1          /* seconds between looks at a lock another process holds */

static double random01(void)
{
    uint32_t v;
    if (RAND_bytes((unsigned char *)&v, sizeof(v)) != 1)
        return 0.5;
    return (double)v / 4294967296.0;
}

static bool ip_literal(const char *h)
{
    return strspn(h, "0123456789.") == strlen(h) || strchr(h, ':') || h[0] == '[';
}

static bool has_name(const struct cert *c, const char *name)
{
    for (int i = 0; i < c->n; i++)
        if (strcasecmp(c->names[i], name) == 0)
            return true;
    return false;
}

static void cert_free(struct cert *c)
{
    for (int k = 0; k < c->n; k++)
        free((char *)c->names[k]);
    free(c->names);
    free(c->file);
    free(c->path);
    free(c);
}

/* The cert known for exactly the names pick[0..k), or NULL; *guess (the one a reload of the
 * same sites in the same order has at this point) is looked at first, so 10,000 sites' names
 * are not 10,000 searches of 10,000 (issue 40). */
static struct cert *known(struct acme *a, const char *const *pick, int k, int *guess)
{
    for (int t = -1; t < a->ncerts; t++) {
        int i = t < 0 ? *guess : t;
        if (i < 0 || i >= a->ncerts || (t >= 0 && i == *guess))
            continue;
        struct cert *c = a->certs[i];
        bool same = c->n == k;
        for (int j = 0; same && j < k; j++)
            same = has_name(c, pick[j]);
        if (same) {
            *guess = i + 1;
            return c;
        }
    }
    return NULL;
}

/* The certificate for the names of hosts (IP addresses skipped, and wildcards without DNS-01:
 * HTTP-01 and TLS-ALPN-01 cannot prove them) is wanted: the one already known for exactly these
 * names, or a new one. a->lock held (or a not yet shared). */
static int add_cert(struct acme *a, const char *const *hosts, int n, int *guess, char *why,
                    size_t why_len)
{
    int k = 0, rc = -ENOMEM;
    const char **pick = malloc(((size_t)n + 1) * sizeof(*pick));
    struct cert *c = NULL;
    if (!pick)
        goto fail;
    for (int i = 0; i < n; i++) {
        if (hosts[i][0] == '*' && !a->dns)
            errlog(ERRLOG_WARN,
                   "acme: %s left out of the certificate: a wildcard needs DNS-01 "
                   "(--acme-dns-hook or --acme-dns-update)",
                   hosts[i]);
        else if (!ip_literal(hosts[i]))
            pick[k++] = hosts[i];
    }
    if (k == 0 || (c = known(a, pick, k, guess))) {
        if (c)
            c->wanted = true;
        free(pick);
        return 0;
    }
    if (a->ncerts == a->cap) {
        int cap = a->cap ? 2 * a->cap : 16;
        struct cert **grown = realloc(a->certs, (size_t)cap * sizeof(*grown));
        if (!grown)
            goto fail;
        a->certs = grown;
        a->cap = cap;
    }
    if (!(c = calloc(1, sizeof(*c))) || !(c->names = calloc((size_t)k, sizeof(*c->names))))
        goto fail;
    c->wanted = true;
    for (; c->n < k; c->n++)
        if (!(c->names[c->n] = strdup(pick[c->n])))
            goto fail;
    /* "*.example.org" as "_wildcard.example.org.pem": no '*' for a shell to expand */
    if (asprintf(&c->file, "%s%s.pem", c->names[0][0] == '*' ? "_wildcard" : "",
                 c->names[0] + (c->names[0][0] == '*')) < 0) {
        c->file = NULL;
        goto fail;
    }
    if (asprintf(&c->path, "%s/%s", a->cfg->acme_state, c->file) < 0) {
        c->path = NULL;
        goto fail;
    }
    a->certs[a->ncerts++] = c;
    *guess = a->ncerts;
    free(pick);
    return 0;
fail:
    if (c)
        cert_free(c);
    free(pick);
    snprintf(why, why_len, "acme: out of memory");
    return rc;
}

/* Every certificate cfg asks for (names from --acme-domain, or every non-wildcard host of
 * every site without a pair of its own or "acme: off") marked wanted, the new ones added; the
 * others are no longer wanted. a->lock held (or a not yet shared). */
static int want(struct acme *a, const struct config *cfg, char *why, size_t why_len)
{
    int rc = 0, guess = 0;
    for (int i = 0; i < a->ncerts; i++)
        a->certs[i]->wanted = false;
    if (cfg->num_sites == 0)
        return add_cert(a, cfg->acme_domains, cfg->num_acme_domains, &guess, why, why_len);
    for (int i = 0; i < cfg->num_sites && rc == 0; i++) {
        const struct config *site = &cfg->sites[i];
        if (site->acme && !site->site_tls) /* else its own pair, or told not to */
            rc = add_cert(a, site->hosts, site->num_hosts, &guess, why, why_len);
    }
    bool od = acme_ondemand_wanted(cfg);
    for (int i = 0; i < a->ncerts; i++)
        if (a->certs[i]->ondemand)
            a->certs[i]->wanted = od;
    return rc;
}

static int load_account(struct acme *a, char *why, size_t why_len)
{
    char *pem = NULL;
    size_t len;
    /* Made once and kept: under the account lock, so two processes starting together on an
     * empty directory agree on one key. */
    int lk = store_lock(&a->store, "account", 30000);
    if (lk < 0) {
        snprintf(why, why_len, "acme: cannot lock the account key in %s: %s", a->cfg->acme_state,
                 strerror(-lk));
        return lk;
    }
    int rc = store_read(&a->store, "account.key", &pem, &len, 64 * 1024);
    if (rc == 0) {
        if (!(a->account = jws_key_from_pem(pem, len))) {
            snprintf(why, why_len, "acme: %s/account.key holds no private key", a->cfg->acme_state);
            rc = -EINVAL;
        }
    } else if (rc == -ENOENT) {
        char *out = NULL;
        if (!(a->account = jws_key_new()) || !(out = jws_key_pem(a->account)))
            rc = -ENOMEM;
        else
            rc = store_write(&a->store, "account.key", out, strlen(out), 0600);
        free(out);
        if (rc)
            snprintf(why, why_len, "acme: cannot write %s/account.key: %s", a->cfg->acme_state,
                     strerror(-rc));
        else
            errlog(ERRLOG_NOTICE, "acme: made a new account key in %s", a->cfg->acme_state);
    } else {
        snprintf(why, why_len, "acme: cannot read %s/account.key: %s", a->cfg->acme_state,
                 strerror(-rc));
    }
    free(pem);
    store_unlock(lk);
    return rc;
}

static int64_t env_seconds(const char *name, int64_t dflt)
{
    const char *v = getenv(name);
    long n = v ? strtol(v, NULL, 10) : 0;
    return n > 0 ? n : dflt;
}

/* Reads c's file: whether it holds a valid pair for all its names now (its facts in *f). */
static bool read_cert(struct acme *a, const struct cert *c, int64_t now, struct jws_cert_facts *f)
{
    char *pem = NULL;
    size_t len;
    bool ok = store_read(&a->store, c->file, &pem, &len, CERT_MAX) == 0 &&
              jws_cert_covers(pem, len, c->names, c->n) && jws_cert_facts(pem, len, f) == 0 &&
              f->not_after > now;
    free(pem);
    return ok;
}

/* ---- certificates on demand (issue 40, ondemand.h) ------------------------------------- */

#define ONDEMAND_SUFFIX ".ondemand" /* NAME.ondemand: a name approved once, kept at restarts */

bool acme_ondemand_wanted(const struct config *cfg)
{
    if (cfg->acme_ondemand)
        return true;
    for (int i = 0; i < cfg->num_sites; i++)
        if (cfg->sites[i].acme_ondemand)
            return true;
    return false;
}

/* The on-demand cert for name (one name each), made when missing. a->lock held (or a not yet
 * shared). NULL when memory runs out. */
static struct cert *ondemand_cert(struct acme *a, const char *name)
{
    for (int i = 0; i < a->ncerts; i++)
        if (a->certs[i]->ondemand && strcasecmp(a->certs[i]->names[0], name) == 0)
            return a->certs[i];
    char why[64];
    int guess = -1; /* known() looks at no guess first; add_cert sets it to the new one's */
    const char *one[1] = {name};
    if (add_cert(a, one, 1, &guess, why, sizeof(why)) != 0 || guess < 1)
        return NULL;
    struct cert *c = a->certs[guess - 1];
    c->ondemand = true;
    return c;
}

/* store_list's: a name approved before this start (its certificate is read with the others). */
static void ondemand_found(void *arg, const char *file)
{
    struct acme *a = arg;
    char name[256];
    size_t n = strlen(file) - strlen(ONDEMAND_SUFFIX);
    if (n == 0 || n >= sizeof(name))
        return;
    memcpy(name, file, n);
    name[n] = '\0';
    (void)ondemand_cert(a, name);
}

void *acme_ondemand_add(struct acme *a, const char *name)
{
    /* remembered first: a restart serves the certificate without asking again */
    char file[300];
    snprintf(file, sizeof(file), "%s" ONDEMAND_SUFFIX, name);
    int err = store_write(&a->store, file, "", 0, 0600);
    if (err)
        errlog(ERRLOG_WARN, "acme: cannot write %s/%s: %s (a restart asks for %s again)",
               a->cfg->acme_state, file, strerror(-err), name);
    pthread_mutex_lock(&a->lock);
    struct cert *c = ondemand_cert(a, name);
    if (c) {
        c->wanted = true;
        a->poked = true;
        pthread_cond_broadcast(&a->wake);
    }
    pthread_mutex_unlock(&a->lock);
    return c;
}

int acme_ondemand_status(struct acme *a, void *cert, char *path, size_t cap, int64_t *retry_at)
{
    struct cert *c = cert;
    pthread_mutex_lock(&a->lock);
    int rc = c->live ? 1 : c->stalled ? -EAGAIN : 0;
    *retry_at = c->stalled;
    snprintf(path, cap, "%s", c->path);
    pthread_mutex_unlock(&a->lock);
    return rc;
}

int acme_new(struct acme **out, const struct config *cfg, struct acme_tokens *tokens,
             const struct acme_hooks *hooks, char *why, size_t why_len)
{
    struct acme *a = calloc(1, sizeof(*a));
    int rc = -ENOMEM;
    if (!a) {
        snprintf(why, why_len, "acme: out of memory");
        return rc;
    }
    a->cfg = cfg;
    a->tokens = tokens;
    a->changed = hooks->changed;
    a->changed_arg = hooks->arg;
    a->store.dir = -1;
    a->ca = cfg->acme_ca ? cfg->acme_ca : ACME_DEFAULT_CA;
    a->kinds = cfg->acme_challenge ? cfg->acme_challenge : ACME_HTTP01 | ACME_ALPN01;
    a->backoff_base = env_seconds("RINGHTTPD_ACME_BACKOFF", 60);
    a->timeout = (long)env_seconds("RINGHTTPD_ACME_TIMEOUT", 30);
    pthread_mutex_init(&a->lock, NULL);
    pthread_cond_init(&a->wake, NULL);
    a->watch = a->stopfd = -1;
    if ((rc = dns01_new(&a->dns, cfg, &a->stop, why, why_len)) != 0)
        goto fail;
    if (a->dns)
        a->kinds |= ACME_DNS01;
    if ((rc = want(a, cfg, why, why_len)) != 0)
        goto fail;
    if (a->ncerts == 0 && !acme_ondemand_wanted(cfg)) {
        snprintf(why, why_len,
                 "--acme-email: no names to get a certificate for (--acme-domain NAME, or "
                 "hosts of a site in --config)");
        rc = -EINVAL;
        goto fail;
    }
    if (cfg->acme_ca_root &&
        (rc = store_read_path(cfg->acme_ca_root, &a->ca_root, &a->ca_root_len, CERT_MAX)) != 0) {
        snprintf(why, why_len, "--acme-ca-root %s: %s", cfg->acme_ca_root, strerror(-rc));
        goto fail;
    }
    if ((rc = store_open(&a->store, cfg->acme_state)) != 0) {
        snprintf(why, why_len, "--acme-state %s: %s", cfg->acme_state, strerror(-rc));
        goto fail;
    }
    if ((rc = load_account(a, why, why_len)) != 0)
        goto fail;
    /* --user: the thread writes here after the drop, as that user. */
    uid_t uid;
    gid_t gid;
    if (cfg->user && geteuid() == 0 &&
        ((rc = privs_user(cfg->user, &uid, &gid, why, why_len)) != 0 ||
         (rc = store_chown(&a->store, uid, gid)) != 0)) {
        if (rc != -ENOENT || !why[0])
            snprintf(why, why_len, "--acme-state %s: cannot hand it to --user %s: %s",
                     cfg->acme_state, cfg->user, strerror(-rc));
        goto fail;
    }
    if (acme_ondemand_wanted(cfg))
        (void)store_list(&a->store, ONDEMAND_SUFFIX, LONG_MAX, ondemand_found, a);
    int64_t now = (int64_t)time(NULL);
    for (int i = 0; i < a->ncerts; i++)
        a->certs[i]->live = read_cert(a, a->certs[i], now, &a->certs[i]->facts);
    *out = a;
    return 0;
fail:
    acme_free(a);
    return rc;
}

int acme_pairs(struct acme *a, struct tls_cert_files **out, int *n, int *cap)
{
    int rc = 0;
    pthread_mutex_lock(&a->lock);
    for (int i = 0; i < a->ncerts && rc == 0; i++) {
        const struct cert *c = a->certs[i];
        if (!c->live)
            continue;
        if (*n == *cap) {
            int more = *cap ? 2 * *cap : 16;
            struct tls_cert_files *grown = realloc(*out, (size_t)more * sizeof(*grown));
            if (!grown) {
                rc = -ENOMEM;
                break;
            }
            *out = grown;
            *cap = more;
        }
        (*out)[(*n)++] = (struct tls_cert_files){
            .cert = c->path, .key = c->path, .hosts = c->names, .num_hosts = c->n};
    }
    pthread_mutex_unlock(&a->lock);
    return rc;
}

/* ---- the thread ------------------------------------------------------------------------- */

static void names_text(const struct cert *c, char *out, size_t cap)
{
    size_t used = 0;
    out[0] = '\0';
    for (int i = 0; i < c->n && used < cap; i++)
        used += (size_t)snprintf(out + used, cap - used, "%s%s", i ? ", " : "", c->names[i]);
}

static void iso(int64_t t, char out[32])
{
    struct tm tm;
    time_t tt = (time_t)t;
    gmtime_r(&tt, &tm);
    strftime(out, 32, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static bool stopping(struct acme *a)
{
    return atomic_load(&a->stop);
}

static int ensure_client(struct acme *a)
{
    if (a->client_open)
        return 0;
    struct acme_client_cfg cc = {.directory = a->ca,
                                 .ca_root_pem = a->ca_root,
                                 .ca_root_len = a->ca_root_len,
                                 .email = a->cfg->acme_email,
                                 .timeout = a->timeout,
                                 .stop = &a->stop};
    int rc = client_open(&a->client, &cc, a->account);
    if (rc == 0)
        a->client_open = true;
    else /* whatever it made goes; the failure stays in a->client.error for the caller's line */
        client_close(&a->client);
    return rc;
}

/* When c, valid now, is renewed: the CA's ARI window when it has one (asked again every few
 * hours), else two thirds of its lifetime. */
static void plan_renewal(struct acme *a, struct cert *c, int64_t now)
{
    int64_t start = 0, end = 0;
    if (c->ari_until <= now && c->facts.ari_id[0] && ensure_client(a) == 0 &&
        client_ari(&a->client, c->facts.ari_id, &start, &end) == 0) {
        c->ari_until = now + RECHECK;
        c->renew_at = when_renew(c->facts.not_before, c->facts.not_after, start, end, random01());
        return;
    }
    if (!c->renew_at)
        c->renew_at = when_renew(c->facts.not_before, c->facts.not_after, 0, 0, random01());
}

static void made_live(struct acme *a, struct cert *c, const char *how)
{
    char names[512], until[32], at[32];
    names_text(c, names, sizeof(names));
    iso(c->facts.not_after, until);
    iso(c->renew_at, at);
    errlog(ERRLOG_NOTICE, "acme: certificate for %s %s: valid until %s, renewal from %s", names,
           how, until, at);
    if (a->changed)
        a->changed(a->changed_arg);
}

/* c serves the pair whose facts are f from now on (issued: counted as an issuance): the
 * workers' next look-up sees it, its renewal is planned afresh, and it is logged and announced.
 * One place for an order's result and a pair found on disk. */
static void go_live(struct acme *a, struct cert *c, const struct jws_cert_facts *f, bool issued,
                    int64_t now, const char *how)
{
    pthread_mutex_lock(&a->lock);
    if (issued)
        a->issued++;
    c->facts = *f;
    c->live = true;
    c->stalled = 0;
    pthread_mutex_unlock(&a->lock);
    c->ari_until = 0;
    c->renew_at = 0;
    c->failures = 0;
    plan_renewal(a, c, now);
    made_live(a, c, how);
}

/* One order for c, under its lock: 0 when a new pair was written. */
static int order(struct acme *a, struct cert *c, bool renewal)
{
    char names[512], *pem = NULL, *keypem = NULL, *both = NULL;
    names_text(c, names, sizeof(names));
    errlog(ERRLOG_NOTICE, "acme: ordering a certificate for %s from %s (%s)", names, a->ca,
           renewal ? "renewal" : "first issuance");
    EVP_PKEY *key = jws_key_new();
    int rc = key ? ensure_client(a) : -ENOMEM;
    struct acme_answer ans = {
        .put = acme_answer_put, .drop = acme_answer_drop, .arg = a, .kinds = a->kinds};
    if (rc == 0)
        rc = client_order(&a->client, c->names, c->n, &ans, key, &pem);
    if (rc == 0 && !(keypem = jws_key_pem(key)))
        rc = -ENOMEM;
    if (rc == 0) {
        size_t pl = strlen(pem), kl = strlen(keypem);
        if (!(both = malloc(pl + kl + 2)))
            rc = -ENOMEM;
        else {
            /* One file, chain then key, renamed into place: a reader sees the old pair or the
             * new one, never a key that does not match its certificate. */
            memcpy(both, pem, pl);
            both[pl] = '\n';
            memcpy(both + pl + 1, keypem, kl + 1);
            if (!jws_cert_covers(both, pl + 1 + kl, c->names, c->n))
                rc = -EPROTO;
            else
                rc = store_write(&a->store, c->file, both, pl + 1 + kl, 0600);
            if (rc == -EPROTO)
                snprintf(a->client.error, sizeof(a->client.error),
                         "the chain the CA sent does not match our key or names");
            else if (rc)
                snprintf(a->client.error, sizeof(a->client.error), "cannot write %s/%s: %s",
                         a->cfg->acme_state, c->file, strerror(-rc));
        }
    }
    if (rc && rc != -ECANCELED && a->client_open && a->client.error[0] == '\0')
        snprintf(a->client.error, sizeof(a->client.error), "%s", strerror(-rc));
    free(both);
    if (keypem)
        OPENSSL_cleanse(keypem, strlen(keypem));
    free(keypem);
    free(pem);
    EVP_PKEY_free(key);
    return rc;
}

/* After a failure: the next try, and the line that says so. */
static void failed(struct acme *a, struct cert *c, int64_t now)
{
    char names[512];
    names_text(c, names, sizeof(names));
    c->failures++;
    int64_t wait = when_backoff(c->failures, a->backoff_base, a->client.retry_after, random01());
    c->next = now + wait;
    pthread_mutex_lock(&a->lock);
    a->failed++;
    c->stalled = c->next;
    pthread_mutex_unlock(&a->lock);
    errlog(ERRLOG_ERROR, "acme: order for %s failed (%u in a row, next try in %llds%s): %s", names,
           c->failures, (long long)wait, c->live ? ", the current certificate stays" : "",
           a->client.error[0] ? a->client.error : "?");
    /* A CA that failed may be another one by the next try (a restart, a fixed proxy): start
     * over with the directory and the account. */
    if (a->client_open) {
        client_close(&a->client);
        a->client_open = false;
    }
}

/* c's file holds the valid pair f: plan its renewal and, when it is not the one already live
 * (first seen, or written by another process sharing the directory), make it live. Whether its
 * renewal is due now. */
static bool adopt(struct acme *a, struct cert *c, const struct jws_cert_facts *f, int64_t now)
{
    bool fresh =
        !c->live || strcmp(f->ari_id, c->facts.ari_id) != 0 || f->not_after != c->facts.not_after;
    if (fresh) {
        go_live(a, c, f, false, now, c->live ? "renewed on disk" : "found in the state directory");
    } else {
        plan_renewal(a, c, now);
    }
    return c->renew_at <= now;
}

static void schedule(struct cert *c, int64_t now)
{
    c->next = c->renew_at < now + RECHECK ? c->renew_at : now + RECHECK;
}

/* c's names left the configuration: its certificate serves them until it expires (a reload
 * that dropped a site by mistake and is undone finds it), and is neither renewed nor ordered. */
static void keep_until_expiry(struct acme *a, struct cert *c, bool valid, int64_t now)
{
    if (!valid && c->live) {
        pthread_mutex_lock(&a->lock);
        c->live = false;
        pthread_mutex_unlock(&a->lock);
        if (a->changed)
            a->changed(a->changed_arg);
    }
    c->next = valid && c->facts.not_after < now + RECHECK ? c->facts.not_after : now + RECHECK;
}

static void visit(struct acme *a, struct cert *c, int64_t now)
{
    struct jws_cert_facts f;
    bool valid = read_cert(a, c, now, &f);
    pthread_mutex_lock(&a->lock);
    bool wanted = c->wanted;
    pthread_mutex_unlock(&a->lock);
    if (!wanted) {
        if (valid && (!c->live || f.not_after != c->facts.not_after)) {
            pthread_mutex_lock(&a->lock);
            c->facts = f;
            c->live = true;
            pthread_mutex_unlock(&a->lock);
        }
        keep_until_expiry(a, c, valid, now);
        return;
    }
    if (valid && !adopt(a, c, &f, now)) {
        schedule(c, now);
        return;
    }
    /* Missing, expired or due: order it, unless another process is doing so now. */
    int lk = store_lock(&a->store, c->file, 0);
    if (lk == -EWOULDBLOCK) {
        c->next = now + LOCK_RETRY;
        return;
    }
    if (lk < 0) {
        snprintf(a->client.error, sizeof(a->client.error), "cannot lock %s/%s: %s",
                 a->cfg->acme_state, c->file, strerror(-lk));
        failed(a, c, now);
        return;
    }
    /* Another process may have finished while we looked: read the directory again first. */
    if (read_cert(a, c, now, &f) && !adopt(a, c, &f, now)) {
        store_unlock(lk);
        schedule(c, now);
        return;
    }
    a->client.error[0] = '\0';
    a->client.retry_after = 0;
    bool renewal = c->live;
    int rc = order(a, c, renewal);
    store_unlock(lk);
    if (rc == -ECANCELED)
        return;
    now = (int64_t)time(NULL);
    if (rc != 0 || !read_cert(a, c, now, &f)) {
        failed(a, c, now);
        return;
    }
    go_live(a, c, &f, true, now, renewal ? "renewed" : "issued");
    schedule(c, now);
}

static void *acme_main(void *arg)
{
    struct acme *a = arg;
    while (!stopping(a)) {
        int64_t now = (int64_t)time(NULL), next = now + RECHECK;
        pthread_mutex_lock(&a->lock);
        int n = a->ncerts; /* the certs below n are complete: acme_names adds under the lock */
        bool renamed = a->renamed;
        a->renamed = false;
        a->poked = false;
        pthread_mutex_unlock(&a->lock);
        for (int i = 0; i < n && !stopping(a); i++) {
            pthread_mutex_lock(&a->lock);
            struct cert *c = a->certs[i];
            pthread_mutex_unlock(&a->lock);
            /* A new name orders at once; a valid certificate is only read again. One whose
             * order failed keeps its backoff: CAs count failed orders (Let's Encrypt refuses a
             * name after a few an hour), and a tool that reloads every minute must not turn
             * the backoff into an order a reload (issue 35). */
            if (renamed && c->failures == 0)
                c->next = now;
            if (c->next <= now)
                visit(a, c, now);
            now = (int64_t)time(NULL);
            if (c->next < next)
                next = c->next;
        }
        pthread_mutex_lock(&a->lock);
        struct timespec until = {.tv_sec = (time_t)next};
        while (!stopping(a) && !a->renamed && !a->poked && (int64_t)time(NULL) < next)
            if (pthread_cond_timedwait(&a->wake, &a->lock, &until) == ETIMEDOUT)
                break;
        pthread_mutex_unlock(&a->lock);
    }
    return NULL;
}

int acme_names(struct acme *a, const struct config *cfg, char *why, size_t why_len)
{
    pthread_mutex_lock(&a->lock);
    int rc = want(a, cfg, why, why_len);
    a->renamed = true;
    pthread_cond_broadcast(&a->wake);
    pthread_mutex_unlock(&a->lock);
    return rc;
}

int acme_start(struct acme *a)
{
    if ((a->stopfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0)
        return -errno;
    a->watch = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
    if (a->watch >= 0 && inotify_add_watch(a->watch, a->cfg->acme_state,
                                           IN_CREATE | IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE |
                                               IN_CLOSE_WRITE) < 0) {
        errlog(ERRLOG_WARN, "acme: cannot watch %s (%s): reading it once a second only",
               a->cfg->acme_state, strerror(errno));
        close(a->watch);
        a->watch = -1;
    }
    int err = pthread_create(&a->watcher, NULL, acme_watcher_main, a);
    if (err)
        return -err;
    a->watching = true;
    if ((err = pthread_create(&a->thread, NULL, acme_main, a)) != 0)
        return -err;
    a->started = true;
    return 0;
}

void acme_free(struct acme *a)
{
    if (!a)
        return;
    if (a->started) {
        pthread_mutex_lock(&a->lock);
        atomic_store(&a->stop, true);
        pthread_cond_broadcast(&a->wake);
        pthread_mutex_unlock(&a->lock);
        pthread_join(a->thread, NULL);
    }
    if (a->watching) {
        uint64_t one = 1;
        if (write(a->stopfd, &one, sizeof(one)) != sizeof(one))
            errlog(ERRLOG_ERROR, "acme: cannot stop the watcher: %s", strerror(errno));
        else
            pthread_join(a->watcher, NULL);
    }
    if (a->watch >= 0)
        close(a->watch);
    if (a->stopfd >= 0)
        close(a->stopfd);
    for (int i = 0; i < a->ncerts; i++)
        cert_free(a->certs[i]);
    free(a->certs);
    if (a->client_open)
        client_close(&a->client);
    EVP_PKEY_free(a->account);
    dns01_free(a->dns);
    free(a->ca_root);
    store_close(&a->store);
    pthread_cond_destroy(&a->wake);
    pthread_mutex_destroy(&a->lock);
    free(a);
}

void acme_describe(struct acme *a, FILE *f)
{
    char names[512], until[32];
    unsigned web = a->kinds & (ACME_HTTP01 | ACME_ALPN01);
    fprintf(f, "ringhttpd: acme: CA %s, state in %s, challenges %s%s%s\n", a->ca,
            a->cfg->acme_state,
            web == (ACME_HTTP01 | ACME_ALPN01) ? "http-01 and tls-alpn-01"
            : web == ACME_HTTP01               ? "http-01"
                                               : "tls-alpn-01",
            a->dns ? ", dns-01 by " : "", a->dns ? dns01_describe(a->dns) : "");
    pthread_mutex_lock(&a->lock);
    for (int i = 0; i < a->ncerts; i++) {
        const struct cert *c = a->certs[i];
        names_text(c, names, sizeof(names));
        iso(c->facts.not_after, until);
        if (c->live)
            fprintf(f, "ringhttpd: acme: %s: valid until %s (%s)\n", names, until, c->path);
        else
            fprintf(f, "ringhttpd: acme: %s: no valid certificate yet, ordering one\n", names);
    }
    pthread_mutex_unlock(&a->lock);
}

/* By default a few series whatever the number of sites (issue 40: 10,000 names made 10,000
 * series, each scraped every 15 s): the earliest expiry, which is what an alert wants, and the
 * certificates counted by state and by what is left of them. --metrics-per-cert adds one
 * series per name, as before. */
void acme_metrics(void *arg, FILE *f)
{
    struct acme *a = arg;
    int64_t now = (int64_t)time(NULL), earliest = 0;
    unsigned valid = 0, awaited = 0, leaving = 0, within7 = 0, within30 = 0;
    pthread_mutex_lock(&a->lock);
    for (int i = 0; i < a->ncerts; i++) {
        const struct cert *c = a->certs[i];
        if (!c->live) {
            awaited += c->wanted;
            continue;
        }
        if (c->wanted)
            valid++;
        else
            leaving++;
        if (!earliest || c->facts.not_after < earliest)
            earliest = c->facts.not_after;
        within7 += c->facts.not_after - now < 7 * 86400;
        within30 += c->facts.not_after - now < 30 * 86400;
    }
    fprintf(f,
            "# HELP ringhttpd_tls_certificate_earliest_expiry_timestamp_seconds When the first "
            "of the ACME certificates served expires (UNIX seconds; 0: none yet).\n"
            "# TYPE ringhttpd_tls_certificate_earliest_expiry_timestamp_seconds gauge\n"
            "ringhttpd_tls_certificate_earliest_expiry_timestamp_seconds %lld\n"
            "# HELP ringhttpd_tls_certificates ACME certificates by state: valid (served and "
            "renewed), awaited (ordered, none valid yet), leaving (its names left the "
            "configuration: served until it expires).\n"
            "# TYPE ringhttpd_tls_certificates gauge\n"
            "ringhttpd_tls_certificates{state=\"valid\"} %u\n"
            "ringhttpd_tls_certificates{state=\"awaited\"} %u\n"
            "ringhttpd_tls_certificates{state=\"leaving\"} %u\n"
            "# HELP ringhttpd_tls_certificates_expiring ACME certificates served that expire "
            "within 7 or 30 days.\n"
            "# TYPE ringhttpd_tls_certificates_expiring gauge\n"
            "ringhttpd_tls_certificates_expiring{within=\"7d\"} %u\n"
            "ringhttpd_tls_certificates_expiring{within=\"30d\"} %u\n",
            (long long)earliest, valid, awaited, leaving, within7, within30);
    if (a->cfg->metrics_per_cert) {
        fputs("# HELP ringhttpd_tls_certificate_expiry_timestamp_seconds When the certificate "
              "serving each name expires (UNIX seconds; ACME certificates).\n"
              "# TYPE ringhttpd_tls_certificate_expiry_timestamp_seconds gauge\n",
              f);
        for (int i = 0; i < a->ncerts; i++)
            for (int k = 0; a->certs[i]->live && k < a->certs[i]->n; k++)
                fprintf(f, "ringhttpd_tls_certificate_expiry_timestamp_seconds{name=\"%s\"} %lld\n",
                        a->certs[i]->names[k], (long long)a->certs[i]->facts.not_after);
    }
    fprintf(f,
            "# HELP ringhttpd_acme_orders_total ACME orders by outcome.\n"
            "# TYPE ringhttpd_acme_orders_total counter\n"
            "ringhttpd_acme_orders_total{outcome=\"issued\"} %llu\n"
            "ringhttpd_acme_orders_total{outcome=\"failed\"} %llu\n",
            (unsigned long long)a->issued, (unsigned long long)a->failed);
    pthread_mutex_unlock(&a->lock);
}
