/* Certificates on demand; see ondemand.h. */
#include "server/acme/ondemand.h"

#include <curl/curl.h>
#include <errno.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "server/acme/acme.h"
#include "server/acme/store.h"
#include "site/site.h"
#include "config/config.h"
#include "core/vhost.h"
#include "rt/errlog.h"
#include "rt/runtime.h"

#define PEM_MAX (256 * 1024)

/* What is known of a name. ASK waits for the thread; ASKING is being asked; APPROVED has its
 * certificate ordered (cert); READY holds it for the handshakes that wait; REFUSED, FAILED and
 * LIMITED refuse until `until` (then: asked again, the ACME thread's next try, a new minute). */
enum state { FREE, ASK, ASKING, APPROVED, READY, REFUSED, FAILED, LIMITED };

/* How a name may be approved: the site's own names matched it (a wildcard host), its {host}
 * root has the name's directory, or --acme-ask says so. */
enum how { BY_NAME, BY_DIR, BY_ASK };

struct entry {
    uint32_t hash; /* of name; 0 with state FREE */
    uint8_t state; /* enum state */
    uint8_t how;   /* enum how */
    char name[254];
    char *dir;     /* BY_DIR: the directory that must exist */
    int64_t until; /* see enum state */
    int64_t since; /* when it entered its state (READY: kept READY_KEEP_S after) */
    void *cert;    /* acme_ondemand_add's handle, once approved */
    X509 *x;       /* READY: the certificate, its chain and key */
    STACK_OF(X509) * chain;
    EVP_PKEY *key;
};

/* A READY name's pair is kept this long for handshakes that parked before the workers' TLS
 * contexts had it (they adopt new ones at their next accept); later ones find it there. */
#define READY_KEEP_S 600

enum outcome { APPROVED_N, REFUSED_N, ISSUED_N, FAILED_N, LIMITED_N, OUTCOMES };
static const char *const outcome_names[OUTCOMES] = {"approved", "refused", "issued", "failed",
                                                    "rate_limited"};

struct ondemand {
    struct acme *acme;
    const char *ask; /* --acme-ask (process option: the start's configuration lives on) */
    pthread_mutex_t mu;
    pthread_cond_t wake;
    bool stop;
    bool started;
    pthread_t thread;
    struct entry names[ONDEMAND_NAMES];
    int64_t minute;   /* the minute the orders below were counted in */
    unsigned ordered; /* new orders in it */
    unsigned cap;     /* ONDEMAND_ORDERS_PER_MIN, or RINGHTTPD_ONDEMAND_ORDERS (a test hook) */
    uint64_t counts[OUTCOMES];
    atomic_uint gen; /* ondemand_gen */
    bool news;       /* decisions not yet announced (the thread's) */
    int64_t woke_ms; /* CLOCK_MONOTONIC of the last announcement */
    /* Refusals are what a flood makes: a line a second each (the thread's own limiters); an
     * approval, issuance or failure is bounded by the orders a minute and always logged. */
    struct errlog_limit log[OUTCOMES];
    struct errlog_limit log_unanswered;
    int nreaders;
    struct ondemand_reader readers[];
};

static uint32_t name_hash(const char *s)
{
    uint32_t h = 2166136261u; /* FNV-1a; never 0, the free mark */
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    return h ? h : 1;
}

static void entry_clear(struct entry *e)
{
    free(e->dir);
    X509_free(e->x);
    sk_X509_pop_free(e->chain, X509_free);
    EVP_PKEY_free(e->key);
    *e = (struct entry){0};
}

int ondemand_new(struct ondemand **out, const struct config *cfg, struct acme *a, int nreaders,
                 char *why, size_t why_len)
{
    struct ondemand *od =
        calloc(1, sizeof(*od) + (size_t)nreaders * sizeof(struct ondemand_reader));
    if (!od) {
        snprintf(why, why_len, "acme: out of memory");
        return -ENOMEM;
    }
    od->acme = a;
    od->ask = cfg->acme_ask;
    const char *cap = getenv("RINGHTTPD_ONDEMAND_ORDERS");
    od->cap = cap && atoi(cap) > 0 ? (unsigned)atoi(cap) : ONDEMAND_ORDERS_PER_MIN;
    od->nreaders = nreaders;
    for (int i = 0; i < nreaders; i++)
        od->readers[i].od = od;
    pthread_mutex_init(&od->mu, NULL);
    pthread_cond_init(&od->wake, NULL);
    *out = od;
    return 0;
}

struct ondemand_reader *ondemand_reader(struct ondemand *od, int i)
{
    return &od->readers[i];
}

const atomic_uint *ondemand_gen(const struct ondemand *od)
{
    return &od->gen;
}

/* A flood decides hundreds of names a second: the workers try their parked handshakes again
 * at most this often (a try per parked handshake each time), and at once after a quiet spell. */
#define WAKE_MS 50

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The decisions so far are announced: gen moves and every worker wakes (its tick looks). */
static void announce(struct ondemand *od, bool force)
{
    int64_t now = mono_ms();
    if (!od->news || (!force && now - od->woke_ms < WAKE_MS))
        return;
    od->news = false;
    od->woke_ms = now;
    atomic_fetch_add_explicit(&od->gen, 1, memory_order_release);
    uint64_t one = 1;
    for (int i = 0; i < od->nreaders; i++)
        if (od->readers[i].rt && write(od->readers[i].rt->wake_fd, &one, sizeof(one)) < 0)
            continue; /* a full counter: that worker is awake already */
}

/* ---- the hook, on a worker's thread ----------------------------------------------------- */

/* name as a DNS name we could get a certificate for, lower-cased into out: letters, digits
 * and hyphens, labels of 1 to 63 not starting or ending with a hyphen, two labels at least,
 * not all digits (an address), at most 253 bytes. Anything else is refused before any
 * question: a hostile SNI costs nothing. */
static bool dns_name(const char *name, char *out, size_t cap)
{
    size_t n = strlen(name), label = 0, labels = 1;
    bool alpha = false;
    if (n == 0 || n > 253 || n >= cap)
        return false;
    for (size_t i = 0; i <= n; i++) {
        char ch = name[i];
        if (ch == '.' || ch == '\0') {
            if (label == 0 || label > 63 || out[i - 1] == '-')
                return false;
            if (ch == '.')
                labels++;
            label = 0;
            out[i] = ch;
            continue;
        }
        if (ch >= 'A' && ch <= 'Z')
            ch = (char)(ch - 'A' + 'a');
        if (ch >= 'a' && ch <= 'z')
            alpha = true;
        else if (!(ch >= '0' && ch <= '9') && !(ch == '-' && label > 0))
            return false;
        out[i] = ch;
        label++;
    }
    return labels >= 2 && alpha;
}

/* The site the name falls to, as a Host of that name is routed (exact, wildcard, else the
 * default site); *named when one of its names matched (exactly, or *exact).  */
static const struct vhost *route(const struct site *s, const char *name, bool *named, bool *exact)
{
    char key[VHOST_NAME_MAX + 1];
    size_t n = vhost_key((struct http_str){name, strlen(name)}, key);
    int i = n ? vhost_lookup(&s->hosts, key, n) : -1;
    const struct vhost *v = &s->vh[i >= 0 ? i : s->dflt];
    *named = i >= 0;
    *exact = false;
    for (int k = 0; i >= 0 && k < v->cfg->num_hosts; k++)
        if (strcasecmp(v->cfg->hosts[k], name) == 0)
            *exact = true;
    return v;
}

static struct entry *find(struct ondemand *od, const char *name, uint32_t h)
{
    for (int i = 0; i < ONDEMAND_NAMES; i++)
        if (od->names[i].hash == h && strcmp(od->names[i].name, name) == 0)
            return &od->names[i];
    return NULL;
}

/* A slot for a new name: a free one, else one whose state is over (a refusal believed long
 * enough, a READY pair every context has by now), else the oldest refusal (a flood of names
 * must not shut out the next real one: it costs a question more instead). NULL when every one
 * is approved or waiting. */
static struct entry *slot(struct ondemand *od, int64_t now)
{
    struct entry *over = NULL, *oldest = NULL;
    for (int i = 0; i < ONDEMAND_NAMES && !over; i++) {
        struct entry *e = &od->names[i];
        if (e->state == FREE)
            return e;
        bool refused = e->state == REFUSED || e->state == LIMITED;
        if ((refused && now >= e->until) || (e->state == READY && now >= e->since + READY_KEEP_S))
            over = e;
        else if (refused && (!oldest || e->since < oldest->since))
            oldest = e;
    }
    struct entry *e = over ? over : oldest;
    if (e)
        entry_clear(e);
    return e;
}

int ondemand_cert(void *arg, const char *sni, bool late, X509 **cert, STACK_OF(X509) * *chain,
                  EVP_PKEY **key)
{
    struct ondemand_reader *r = arg;
    struct ondemand *od = r->od;
    char name[256];
    bool named, exact;
    (void)late; /* tls_ctx.c turns "ask again" into the alert once late */
    if (!r->rt || !r->rt->site)
        return 1;
    if (!dns_name(sni, name, sizeof(name))) {
        const struct vhost *v = route(r->rt->site, sni, &named, &exact);
        return v->cfg->acme_ondemand ? -EINVAL : 1;
    }
    const struct vhost *v = route(r->rt->site, name, &named, &exact);
    if (!v->cfg->acme_ondemand || exact)
        return 1; /* not on demand; a site's own name is ordered with the site (acme.c) */
    /* a wildcard name of the site matched, else its {host} root's directories, else ask */
    enum how how = named ? BY_NAME : v->cfg->host_root ? BY_DIR : BY_ASK;
    uint32_t h = name_hash(name);
    int64_t now = (int64_t)time(NULL);
    int rc = -EINPROGRESS;
    pthread_mutex_lock(&od->mu);
    struct entry *e = find(od, name, h);
    if (!e) {
        if (!(e = slot(od, now))) {
            od->counts[LIMITED_N]++; /* every slot taken: this name waits for a later look */
            pthread_mutex_unlock(&od->mu);
            return -EBUSY;
        }
        e->hash = h;
        memcpy(e->name, name, strlen(name) + 1);
        e->how = (uint8_t)how;
        e->since = now;
        if (how == BY_DIR &&
            asprintf(&e->dir, "%s/%s%s", v->cfg->docroot, name, v->cfg->host_root) < 0)
            e->dir = NULL;
        e->state = ASK;
        pthread_cond_signal(&od->wake);
    }
    switch (e->state) {
    case READY:
        if (X509_up_ref(e->x) && EVP_PKEY_up_ref(e->key)) {
            *cert = e->x;
            *key = e->key;
            *chain = e->chain ? X509_chain_up_ref(e->chain) : NULL;
            rc = 0;
        } else {
            rc = -ENOMEM;
        }
        break;
    case REFUSED:
    case LIMITED:
        if (now < e->until) {
            rc = -EACCES;
            break;
        }
        e->state = ASK; /* asked again */
        e->since = now;
        pthread_cond_signal(&od->wake);
        break;
    case FAILED:
        rc = now < e->until ? -EACCES : -EINPROGRESS; /* the ACME thread tries again then */
        break;
    default: /* ASK, ASKING, APPROVED */
        break;
    }
    pthread_mutex_unlock(&od->mu);
    return rc;
}

/* ---- the thread ------------------------------------------------------------------------- */

static size_t discard(char *p, size_t size, size_t n, void *arg)
{
    (void)p, (void)arg;
    return size * n;
}

/* --acme-ask's answer for name: 1 approved (2xx), 0 refused (any other status), -1 no answer. */
static int ask(struct ondemand *od, const char *name, long *status)
{
    CURL *h = curl_easy_init();
    char url[2048];
    *status = 0;
    if (!h)
        return -1;
    /* name is a checked DNS name (dns_name): nothing in it needs escaping */
    snprintf(url, sizeof(url), "%s?domain=%s", od->ask, name);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "https,http");
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, (long)ONDEMAND_ASK_TIMEOUT_S);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, (long)ONDEMAND_ASK_TIMEOUT_S);
    curl_easy_setopt(h, CURLOPT_MAXFILESIZE, 65536L);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, discard);
    curl_easy_setopt(h, CURLOPT_USERAGENT, "ringhttpd-ondemand");
    CURLcode res = curl_easy_perform(h);
    if (res == CURLE_OK)
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, status);
    curl_easy_cleanup(h);
    if (res != CURLE_OK && res != CURLE_FILESIZE_EXCEEDED)
        return -1;
    return *status >= 200 && *status < 300 ? 1 : 0;
}

/* The pair in the file at path (chain, then key) into e: 0 or -errno. */
static int load(struct entry *e, const char *path)
{
    char *pem = NULL;
    size_t len;
    int rc = store_read_path(path, &pem, &len, PEM_MAX);
    if (rc)
        return rc;
    BIO *b = BIO_new_mem_buf(pem, (int)len);
    BIO *k = BIO_new_mem_buf(pem, (int)len);
    X509 *x = b ? PEM_read_bio_X509(b, NULL, NULL, NULL) : NULL;
    STACK_OF(X509) *chain = sk_X509_new_null();
    X509 *more;
    while (x && chain && (more = PEM_read_bio_X509(b, NULL, NULL, NULL)))
        if (!sk_X509_push(chain, more))
            X509_free(more);
    EVP_PKEY *key = k ? PEM_read_bio_PrivateKey(k, NULL, NULL, NULL) : NULL;
    ERR_clear_error();
    BIO_free(b);
    BIO_free(k);
    OPENSSL_cleanse(pem, len);
    free(pem);
    if (!x || !key || !chain || X509_check_private_key(x, key) != 1) {
        ERR_clear_error();
        X509_free(x);
        EVP_PKEY_free(key);
        sk_X509_pop_free(chain, X509_free);
        return -EPROTO;
    }
    e->x = x;
    e->key = key;
    e->chain = chain;
    return 0;
}

static void count(struct ondemand *od, enum outcome o)
{
    od->counts[o]++;
    od->news = true; /* a handshake may wait for this one */
}

/* One ASK entry decided: approved names are handed to the ACME thread, within the global cap.
 * od->mu held; dropped while asking. */
static void decide(struct ondemand *od, struct entry *e)
{
    char name[254], *dir = e->dir ? strdup(e->dir) : NULL;
    enum how how = e->how;
    memcpy(name, e->name, sizeof(name));
    e->state = ASKING;
    pthread_mutex_unlock(&od->mu);
    long status = 0;
    struct stat st;
    int ok = how == BY_NAME  ? 1
             : how == BY_DIR ? (dir && stat(dir, &st) == 0 && S_ISDIR(st.st_mode))
             : od->ask       ? ask(od, name, &status)
                             : 0;
    int64_t now = (int64_t)time(NULL);
    const char *by = how == BY_NAME  ? "the site's names"
                     : how == BY_DIR ? "its {host} directory"
                                     : "--acme-ask";
    pthread_mutex_lock(&od->mu);
    free(dir);
    if (e->state != ASKING || strcmp(e->name, name) != 0)
        return; /* not ours any more (cannot happen: only this thread frees ASKING) */
    e->since = now;
    if (ok <= 0) {
        e->state = REFUSED;
        e->until = now + (ok < 0 ? ONDEMAND_UNANSWERED_S : ONDEMAND_REFUSED_S);
        count(od, REFUSED_N);
        char answer[32] = "";
        if (how == BY_ASK)
            snprintf(answer, sizeof(answer), " (status %ld)", status);
        if (ok < 0)
            errlog_limited(&od->log_unanswered, ERRLOG_WARN,
                           "acme: on demand: %s refused: --acme-ask %s did not answer", name,
                           od->ask);
        else
            errlog_limited(&od->log[REFUSED_N], ERRLOG_NOTICE,
                           "acme: on demand: %s refused by %s%s", name, by, answer);
        return;
    }
    if (now / 60 != od->minute) {
        od->minute = now / 60;
        od->ordered = 0;
    }
    if (od->ordered >= od->cap) {
        e->state = LIMITED;
        e->until = (now / 60 + 1) * 60;
        count(od, LIMITED_N);
        errlog_limited(&od->log[LIMITED_N], ERRLOG_WARN,
                       "acme: on demand: %s approved, but %u orders this minute already: "
                       "refused until the next",
                       name, od->cap);
        return;
    }
    od->ordered++;
    e->state = APPROVED;
    count(od, APPROVED_N);
    errlog(ERRLOG_NOTICE, "acme: on demand: %s approved by %s: ordering its certificate", name, by);
    pthread_mutex_unlock(&od->mu);
    void *cert = acme_ondemand_add(od->acme, name); /* writes to the state directory */
    pthread_mutex_lock(&od->mu);
    e->cert = cert;
    if (!cert) {
        e->state = FAILED;
        e->until = now + ONDEMAND_UNANSWERED_S;
        count(od, FAILED_N);
    }
}

/* An APPROVED or FAILED entry: the ACME thread's news. od->mu held; dropped while a new pair
 * is read. */
static void follow(struct ondemand *od, struct entry *e)
{
    char path[4096], name[254];
    int64_t retry = 0, now = (int64_t)time(NULL);
    int st = acme_ondemand_status(od->acme, e->cert, path, sizeof(path), &retry);
    if (st == -EAGAIN)
        e->until = retry; /* the ACME thread's next try (its backoff grows to hours) */
    if (st == -EAGAIN && e->state == APPROVED) {
        e->state = FAILED;
        count(od, FAILED_N);
        errlog(ERRLOG_WARN,
               "acme: on demand: the order for %s failed: refused until the next try in "
               "%llds",
               e->name, (long long)(retry - now));
        return;
    }
    if (st != 1)
        return;
    memcpy(name, e->name, sizeof(name));
    struct entry got = {0};
    pthread_mutex_unlock(&od->mu);
    int rc = load(&got, path);
    pthread_mutex_lock(&od->mu);
    if (rc) {
        errlog(ERRLOG_ERROR, "acme: on demand: cannot read the certificate of %s from %s: %s", name,
               path, strerror(-rc));
        entry_clear(&got);
        e->state = FAILED;
        e->until = now + ONDEMAND_UNANSWERED_S;
        return;
    }
    e->x = got.x;
    e->chain = got.chain;
    e->key = got.key;
    e->state = READY;
    e->since = now;
    count(od, ISSUED_N);
    errlog(ERRLOG_NOTICE, "acme: on demand: %s has its certificate: the waiting handshakes go on",
           name);
}

static void *ondemand_main(void *arg)
{
    struct ondemand *od = arg;
    pthread_mutex_lock(&od->mu);
    while (!od->stop) {
        bool busy = false, waiting = false;
        for (int i = 0; i < ONDEMAND_NAMES && !od->stop; i++) {
            struct entry *e = &od->names[i];
            if (e->state == ASK) {
                decide(od, e);
                announce(od, false);
                busy = true;
            } else if ((e->state == APPROVED || e->state == FAILED) && e->cert) {
                follow(od, e);
                waiting = true;
            }
        }
        announce(od, true);
        if (busy || od->stop)
            continue; /* names may have come meanwhile */
        if (!waiting) {
            pthread_cond_wait(&od->wake, &od->mu);
            continue;
        }
        /* an order in flight: its news is looked for every second (the handshakes waiting for
         * it look as often) */
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += 1;
        pthread_cond_timedwait(&od->wake, &od->mu, &until);
    }
    pthread_mutex_unlock(&od->mu);
    return NULL;
}

void ondemand_poke(struct ondemand *od)
{
    pthread_mutex_lock(&od->mu);
    pthread_cond_signal(&od->wake);
    pthread_mutex_unlock(&od->mu);
}

int ondemand_start(struct ondemand *od)
{
    int err = pthread_create(&od->thread, NULL, ondemand_main, od);
    if (err)
        return -err;
    od->started = true;
    return 0;
}

void ondemand_stop(struct ondemand *od)
{
    if (!od || !od->started)
        return;
    pthread_mutex_lock(&od->mu);
    od->stop = true;
    pthread_cond_broadcast(&od->wake);
    pthread_mutex_unlock(&od->mu);
    pthread_join(od->thread, NULL);
    od->started = false;
}

void ondemand_free(struct ondemand *od)
{
    if (!od)
        return;
    ondemand_stop(od);
    for (int i = 0; i < ONDEMAND_NAMES; i++)
        entry_clear(&od->names[i]);
    pthread_cond_destroy(&od->wake);
    pthread_mutex_destroy(&od->mu);
    free(od);
}

void ondemand_metrics(void *arg, FILE *f)
{
    struct ondemand *od = arg;
    uint64_t c[OUTCOMES];
    pthread_mutex_lock(&od->mu);
    memcpy(c, od->counts, sizeof(c));
    pthread_mutex_unlock(&od->mu);
    fputs("# HELP ringhttpd_acme_ondemand_total Certificates on demand: names approved or "
          "refused, certificates issued, orders failed, names refused by the rate limits.\n"
          "# TYPE ringhttpd_acme_ondemand_total counter\n",
          f);
    for (int i = 0; i < OUTCOMES; i++)
        fprintf(f, "ringhttpd_acme_ondemand_total{outcome=\"%s\"} %llu\n", outcome_names[i],
                (unsigned long long)c[i]);
}
