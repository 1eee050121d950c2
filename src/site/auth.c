/* Basic authentication; see auth.h. */
#include "site/auth.h"

#include <crypt.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <unistd.h>

#include "core/basic.h"
#include "core/peer.h"
#include "core/sha256.h"
#include "site/htpasswd.h"
#include "rt/offload.h"

#define THREADS 2    /* verifier threads per worker, started on first use */
#define MAX_JOBS 64  /* verifications in flight per worker; more get 429 */
#define FAILED 64    /* recent failed verdicts, each read once by the request it was for */
#define CRED_MAX 512 /* longest decoded "user:password" */

/* ---- verification off the loop ---- */

struct vjob {
    struct offload_job job;     /* first: the verifier threads run it (verify) */
    struct resume_token resume; /* the request waiting for the verdict */
    unsigned char key[SHA256_LEN];
    uint8_t addr[16];
    int8_t family;
    bool known; /* the user exists; else hash is the file's dummy setting, for the same cost */
    bool ok;    /* the thread's verdict */
    char hash[256];
    char pass[CRED_MAX];
};

struct authstate {
    struct offload q; /* the verifier threads */
    /* worker thread only */
    bool busy; /* the last auth_check with a resume token found its address at the bound */
    unsigned char cache[AUTH_CACHE][SHA256_LEN];
    bool cached[AUTH_CACHE];
    unsigned char failed[FAILED][SHA256_LEN];
    bool failed_used[FAILED];
    unsigned failed_next;
};

static bool ct_equal(const void *a, const void *b, size_t n)
{
    const volatile unsigned char *x = a, *y = b;
    unsigned char d = 0;
    for (size_t i = 0; i < n; i++)
        d |= x[i] ^ y[i];
    return d == 0;
}

static void verify(struct offload_job *oj)
{
    struct vjob *j = (struct vjob *)oj;
    struct crypt_data *data = calloc(1, sizeof(*data));
    const char *h = j->hash;
    j->ok = false;
    if (data) {
        const char *out = crypt_rn(j->pass, h, data, sizeof(*data));
        size_t n = strlen(h);
        j->ok = j->known && out && out[0] != '*' && strlen(out) == n && ct_equal(out, h, n);
        explicit_bzero(data, sizeof(*data));
        free(data);
    }
    explicit_bzero(j->pass, sizeof(j->pass));
}

struct authstate *auth_state_new(int wake_fd)
{
    struct authstate *a = calloc(1, sizeof(*a));
    if (!a)
        return NULL;
    if (offload_init(&a->q, THREADS, wake_fd) != 0) {
        free(a);
        return NULL;
    }
    return a;
}

void auth_state_free(struct authstate *a)
{
    if (!a)
        return;
    offload_fini(&a->q);
    struct offload_job *q;
    while ((q = offload_abandon(&a->q))) {
        explicit_bzero(q, sizeof(struct vjob));
        free(q);
    }
    explicit_bzero(a, sizeof(*a));
    free(a);
}

void auth_forget(struct authstate *a)
{
    if (!a)
        return;
    memset(a->cached, 0, sizeof(a->cached));
    memset(a->failed_used, 0, sizeof(a->failed_used));
}

static unsigned slot_of(const unsigned char *key)
{
    return ((unsigned)key[0] | (unsigned)key[1] << 8) % AUTH_CACHE;
}

#define PROBES 8

static bool cache_has(const struct authstate *a, const unsigned char *key)
{
    for (unsigned i = 0, s = slot_of(key); i < PROBES; i++, s = (s + 1) % AUTH_CACHE)
        if (a->cached[s] && ct_equal(a->cache[s], key, SHA256_LEN))
            return true;
    return false;
}

static void cache_add(struct authstate *a, const unsigned char *key)
{
    unsigned s = slot_of(key), at = s; /* full: the first probe's entry makes room */
    for (unsigned i = 0; i < PROBES; i++, s = (s + 1) % AUTH_CACHE)
        if (!a->cached[s]) {
            at = s;
            break;
        }
    memcpy(a->cache[at], key, SHA256_LEN);
    a->cached[at] = true;
}

/* A failed verdict for key, waiting for its request: true, and forgotten when take says so
 * (serve's check reads it; the check before it only looks). */
static bool failed(struct authstate *a, const unsigned char *key, bool take)
{
    for (unsigned i = 0; i < FAILED; i++)
        if (a->failed_used[i] && ct_equal(a->failed[i], key, SHA256_LEN)) {
            a->failed_used[i] = !take;
            return true;
        }
    return false;
}

static void key_of(const struct auth_file *f, const char *cred, size_t n, unsigned char *key)
{
    char buf[sizeof(f->id) + CRED_MAX];
    memcpy(buf, f->id, sizeof(f->id));
    memcpy(buf + sizeof(f->id), cred, n);
    sha256(buf, sizeof(f->id) + n, key);
    explicit_bzero(buf, sizeof(buf));
}

/* Verifications in flight for the client at (family, addr): an unknown address (family 0)
 * shares one bound with every other unknown one. */
static unsigned inflight_from(const struct authstate *a, int family, const uint8_t *addr)
{
    unsigned n = 0;
    for (const struct offload_job *q = a->q.inflight; q; q = q->inext) {
        const struct vjob *j = (const struct vjob *)q;
        n += j->family == family && memcmp(j->addr, addr, 16) == 0;
    }
    return n;
}

enum auth_verdict auth_check(struct authstate *a, const struct auth_file *f,
                             const struct http_request *req, const struct peer *peer,
                             const struct resume_token *resume)
{
    static const uint8_t unknown[16];
    int family = peer && peer->known ? peer->family : 0;
    const uint8_t *addr = peer && peer->known ? peer->addr : unknown;
    struct http_str value = {NULL, 0};
    char cred[CRED_MAX];
    unsigned char key[SHA256_LEN];
    enum auth_verdict verdict = AUTH_DENIED;

    for (size_t i = 0; i < req->num_headers; i++)
        if (http_str_ieq(req->headers[i].name, "authorization"))
            value = req->headers[i].value;
    size_t n = a && f && value.p ? basic_credentials(value, cred, sizeof(cred)) : 0;
    if (n == 0)
        goto out; /* none, or malformed: 401 at once, nothing to verify */
    key_of(f, cred, n, key);
    if (cache_has(a, key)) {
        verdict = AUTH_GRANTED;
        goto out;
    }
    if (!resume) { /* serve's check: a verdict reached off the loop, or the bound hit */
        verdict = failed(a, key, true) || !a->busy ? AUTH_DENIED : AUTH_BUSY;
        a->busy = false;
        goto out;
    }
    a->busy = false;
    if (failed(a, key, false))
        goto out; /* just verified and wrong: serve answers 401 */
    for (const struct offload_job *q = a->q.inflight; q; q = q->inext) {
        const struct vjob *j = (const struct vjob *)q;
        if (j->resume.owner == resume->owner && j->resume.gen == resume->gen) {
            verdict = AUTH_WAIT;
            goto out;
        }
    }
    if (a->q.count >= MAX_JOBS || inflight_from(a, family, addr) >= AUTH_PER_ADDR) {
        a->busy = true;
        verdict = AUTH_BUSY;
        goto out;
    }
    struct vjob *j = calloc(1, sizeof(*j));
    if (!j)
        goto out;
    char *colon = memchr(cred, ':', n);
    *colon = '\0';
    j->resume = *resume;
    memcpy(j->key, key, sizeof(key));
    j->family = (int8_t)family;
    memcpy(j->addr, addr, 16);
    memcpy(j->pass, colon + 1, (size_t)(cred + n - colon));
    for (size_t i = 0; i < f->n && !j->known; i++)
        if (strcmp(f->users[i].name, cred) == 0 && strlen(f->users[i].hash) < sizeof(j->hash)) {
            j->known = true;
            strcpy(j->hash, f->users[i].hash);
        }
    /* An unknown user is verified all the same, against a setting like the file's entries, so
     * the answer's timing does not tell which users exist (htpasswd.h). */
    if (!j->known)
        snprintf(j->hash, sizeof(j->hash), "%s", f->dummy);
    j->job.run = verify;
    if (offload_submit(&a->q, &j->job) != 0) {
        explicit_bzero(j, sizeof(*j));
        free(j);
        goto out;
    }
    verdict = AUTH_WAIT;
out:
    explicit_bzero(cred, sizeof(cred));
    return verdict;
}

void auth_collect(struct authstate *a, void (*resume)(void *arg, struct resume_token t), void *arg)
{
    if (!a || !a->q.count)
        return;
    struct vjob *done = (struct vjob *)offload_done(&a->q);
    while (done) {
        struct vjob *j = done;
        done = (struct vjob *)j->job.next;
        if (j->ok) {
            cache_add(a, j->key);
        } else {
            memcpy(a->failed[a->failed_next], j->key, SHA256_LEN);
            a->failed_used[a->failed_next] = true;
            a->failed_next = (a->failed_next + 1) % FAILED;
        }
        struct resume_token t = j->resume;
        explicit_bzero(j, sizeof(*j));
        free(j);
        resume(arg, t);
    }
}
