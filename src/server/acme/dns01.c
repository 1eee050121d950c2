/* DNS-01; see dns01.h. The hook is spawned (posix_spawn: the process has threads) in a process
 * group of its own, so a timeout kills what it started too. The UPDATE and the queries are one
 * UDP datagram each way (TCP when the answer is truncated), built and read by dnsmsg. */
#include "server/acme/dns01.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <openssl/rand.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "server/acme/dnsmsg.h"
#include "server/acme/jws.h"
#include "server/acme/store.h"
#include "config/config.h"
#include "rt/errlog.h"

extern char **environ;

#define DNS01_MAX_RESOLVERS 8
#define QUERY_TRIES 3      /* datagrams sent for one question */
#define QUERY_WAIT_MS 3000 /* for each one's answer */
#define LOOKS 30           /* at each resolver for the record, LOOK_GAP_MS apart */
#define LOOK_GAP_MS 2000
#define TXT_TTL 60
#define TSIG_FILE_MAX 8192

struct addr {
    struct sockaddr_storage sa;
    socklen_t len;
    char text[300];
};

struct dns01 {
    char *hook; /* --acme-dns-hook, or NULL */
    bool update;
    struct addr server; /* --acme-dns-update's */
    struct dnsmsg_key key;
    struct addr resolvers[DNS01_MAX_RESOLVERS];
    int nresolvers;
    const atomic_bool *stop;
    long hook_timeout; /* seconds: RINGHTTPD_ACME_DNS_HOOK_TIMEOUT (a test hook), else the define */
    int looks;         /* at each resolver: RINGHTTPD_ACME_DNS_LOOKS (a test hook), else LOOKS */
    char desc[400];
};

static long env_long(const char *name, long dflt)
{
    const char *v = getenv(name);
    long n = v ? strtol(v, NULL, 10) : 0;
    return n > 0 ? n : dflt;
}

static bool stopped(const struct dns01 *d)
{
    return d->stop && atomic_load(d->stop);
}

/* Sleeps ms, a tenth of a second at a time: -ECANCELED when stopped. */
static int nap(const struct dns01 *d, long ms)
{
    for (long t = 0; t < ms; t += 100) {
        if (stopped(d))
            return -ECANCELED;
        struct timespec ts = {0, 100 * 1000000L};
        nanosleep(&ts, NULL);
    }
    return stopped(d) ? -ECANCELED : 0;
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* "HOST", "HOST:PORT", "[V6]:PORT" or a bare IPv6 address; port 53 unless given. */
static int parse_addr(const char *s, struct addr *a, char *why, size_t why_len)
{
    char host[256], port[8] = "53";
    const char *colon = strrchr(s, ':');
    if (s[0] == '[') {
        const char *close = strchr(s, ']');
        if (!close || (close[1] && close[1] != ':') || (size_t)(close - s - 1) >= sizeof(host))
            goto bad;
        memcpy(host, s + 1, (size_t)(close - s - 1));
        host[close - s - 1] = '\0';
        if (close[1] && snprintf(port, sizeof(port), "%s", close + 2) >= (int)sizeof(port))
            goto bad;
    } else if (colon && strchr(s, ':') == colon) { /* one colon: HOST:PORT */
        if ((size_t)(colon - s) >= sizeof(host) ||
            snprintf(port, sizeof(port), "%s", colon + 1) >= (int)sizeof(port))
            goto bad;
        memcpy(host, s, (size_t)(colon - s));
        host[colon - s] = '\0';
    } else if (snprintf(host, sizeof(host), "%s", s) >= (int)sizeof(host)) {
        goto bad;
    }
    struct addrinfo hints = {.ai_socktype = SOCK_DGRAM, .ai_flags = AI_NUMERICSERV}, *res;
    int rc = getaddrinfo(host, port, &hints, &res);
    if (rc != 0) {
        snprintf(why, why_len, "'%s': %s", s, gai_strerror(rc));
        return -EINVAL;
    }
    memcpy(&a->sa, res->ai_addr, res->ai_addrlen);
    a->len = res->ai_addrlen;
    freeaddrinfo(res);
    snprintf(a->text, sizeof(a->text), "%s", s);
    return 0;
bad:
    snprintf(why, why_len, "'%s' is no SERVER[:PORT]", s);
    return -EINVAL;
}

/* The first nameservers of /etc/resolv.conf, when nothing else says whom to ask. */
static void system_resolvers(struct dns01 *d)
{
    FILE *f = fopen("/etc/resolv.conf", "re");
    char line[512], why[128];
    while (f && d->nresolvers < 3 && fgets(line, sizeof(line), f)) {
        char ns[300];
        if (sscanf(line, " nameserver %299s", ns) == 1 &&
            parse_addr(ns, &d->resolvers[d->nresolvers], why, sizeof(why)) == 0)
            d->nresolvers++;
    }
    if (f)
        fclose(f);
}

int dns01_new(struct dns01 **out, const struct config *cfg, const atomic_bool *stop, char *why,
              size_t why_len)
{
    char *text = NULL, err[256] = "";
    size_t len = 0;
    int rc = -ENOMEM;
    *out = NULL;
    if (!cfg->acme_dns_hook && !cfg->acme_dns_update)
        return 0;
    struct dns01 *d = calloc(1, sizeof(*d));
    if (!d || (cfg->acme_dns_hook && !(d->hook = strdup(cfg->acme_dns_hook)))) {
        snprintf(why, why_len, "acme: out of memory");
        goto fail;
    }
    d->stop = stop;
    d->hook_timeout = env_long("RINGHTTPD_ACME_DNS_HOOK_TIMEOUT", DNS01_HOOK_TIMEOUT);
    d->looks = (int)env_long("RINGHTTPD_ACME_DNS_LOOKS", LOOKS);
    if (cfg->acme_dns_update) {
        d->update = true;
        if ((rc = parse_addr(cfg->acme_dns_update, &d->server, err, sizeof(err))) != 0) {
            snprintf(why, why_len, "--acme-dns-update %s", err);
            goto fail;
        }
        if ((rc = store_read_path(cfg->acme_dns_tsig, &text, &len, TSIG_FILE_MAX)) != 0) {
            snprintf(why, why_len, "--acme-dns-tsig %s: %s", cfg->acme_dns_tsig, strerror(-rc));
            goto fail;
        }
        rc = dnsmsg_key_parse(text, len, &d->key, err, sizeof(err));
        OPENSSL_cleanse(text, len);
        if (rc != 0) {
            snprintf(why, why_len, "--acme-dns-tsig %s: %s", cfg->acme_dns_tsig, err);
            goto fail;
        }
    }
    for (int i = 0; i < cfg->num_acme_dns_resolvers && d->nresolvers < DNS01_MAX_RESOLVERS; i++) {
        if ((rc = parse_addr(cfg->acme_dns_resolvers[i], &d->resolvers[d->nresolvers], err,
                             sizeof(err))) != 0) {
            snprintf(why, why_len, "--acme-dns-resolver %s", err);
            goto fail;
        }
        d->nresolvers++;
    }
    if (d->nresolvers == 0 && d->update) /* the authoritative server: it has the record first */
        d->resolvers[d->nresolvers++] = d->server;
    if (d->nresolvers == 0)
        system_resolvers(d);
    size_t used = (size_t)snprintf(d->desc, sizeof(d->desc), "%s%s",
                                   d->hook ? "hook " : "RFC 2136 UPDATE to ",
                                   d->hook ? d->hook : d->server.text);
    for (int i = 0; i < d->nresolvers && used < sizeof(d->desc); i++)
        used += (size_t)snprintf(d->desc + used, sizeof(d->desc) - used, "%s%s",
                                 i ? ", " : ", checked at ", d->resolvers[i].text);
    free(text);
    *out = d;
    return 0;
fail:
    free(text);
    dns01_free(d);
    return rc;
}

void dns01_free(struct dns01 *d)
{
    if (!d)
        return;
    OPENSSL_cleanse(&d->key, sizeof(d->key));
    free(d->hook);
    free(d);
}

const char *dns01_describe(const struct dns01 *d)
{
    return d->desc;
}

/* ---- the hook ---------------------------------------------------------------------------- */

/* The hook's output, line by line, into the error log. */
static void log_output(const char *action, const char *fqdn, char *out, size_t n, size_t dropped,
                       bool failed)
{
    out[n] = '\0';
    for (char *line = out, *nl; line && *line; line = nl) {
        if ((nl = strchr(line, '\n')))
            *nl++ = '\0';
        if (*line)
            errlog(failed ? ERRLOG_WARN : ERRLOG_INFO, "acme: dns hook %s %s: %s", action, fqdn,
                   line);
    }
    if (dropped)
        errlog(ERRLOG_WARN, "acme: dns hook %s %s: %zu more bytes of output not logged", action,
               fqdn, dropped);
}

/* The environment's copy with the hook's own variables added; NULL on ENOMEM. */
static char **hook_env(const char *action, const char *fqdn, const char *value, const char *domain,
                       char *own[4])
{
    size_t n = 0;
    while (environ && environ[n])
        n++;
    char **env = calloc(n + 5, sizeof(*env));
    if (!env)
        return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (strncmp(environ[i], "RINGHTTPD_DNS01_", 16) != 0)
            env[k++] = environ[i];
    if (asprintf(&own[0], "RINGHTTPD_DNS01_ACTION=%s", action) < 0)
        own[0] = NULL;
    if (asprintf(&own[1], "RINGHTTPD_DNS01_FQDN=%s", fqdn) < 0)
        own[1] = NULL;
    if (asprintf(&own[2], "RINGHTTPD_DNS01_VALUE=%s", value) < 0)
        own[2] = NULL;
    if (asprintf(&own[3], "RINGHTTPD_DNS01_DOMAIN=%s", domain) < 0)
        own[3] = NULL;
    for (int i = 0; i < 4; i++) {
        if (!own[i]) {
            free(env);
            return NULL;
        }
        env[k++] = own[i];
    }
    return env;
}

/* One read of the hook's output: the first DNS01_HOOK_OUTPUT bytes kept in out (n of them so
 * far), the others counted. read's result. */
static ssize_t take_output(int fd, char *out, size_t *n, size_t *dropped)
{
    char buf[1024];
    ssize_t got = read(fd, buf, sizeof(buf));
    if (got > 0) {
        size_t room = DNS01_HOOK_OUTPUT - *n, take = (size_t)got < room ? (size_t)got : room;
        memcpy(out + *n, buf, take);
        *n += take;
        *dropped += (size_t)got - take;
    }
    return got;
}

/* Runs `hook action fqdn value` to its end (or kills it at the deadline): 0 when it exited 0. */
static int run_hook(struct dns01 *d, const char *action, const char *fqdn, const char *value,
                    const char *domain, char *err, size_t err_len)
{
    char *own[4] = {NULL}, out[DNS01_HOOK_OUTPUT + 1];
    char *argv[] = {d->hook, (char *)action, (char *)fqdn, (char *)value, NULL};
    size_t n = 0, dropped = 0;
    int pfd[2] = {-1, -1}, rc, status = 0;
    bool spawned = false, attr_made = false, fa_made = false;
    pid_t pid = -1;
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    char **env = hook_env(action, fqdn, value, domain, own);
    if (!env) {
        rc = -ENOMEM;
        snprintf(err, err_len, "dns hook: out of memory");
        goto out;
    }
    /* our end only non-blocking: a child the hook left behind may hold the other open */
    if (pipe2(pfd, O_CLOEXEC) != 0 || fcntl(pfd[0], F_SETFL, O_NONBLOCK) != 0) {
        rc = -errno;
        snprintf(err, err_len, "dns hook: pipe: %s", strerror(-rc));
        goto out;
    }
    /* stdin from /dev/null, stdout and stderr into the pipe; the signals this process blocks
     * or catches (the main thread's waits) back to their defaults for the child */
    sigset_t none, dfl;
    sigemptyset(&none);
    sigfillset(&dfl);
    if ((rc = posix_spawn_file_actions_init(&fa)) != 0 ||
        (fa_made = true, rc = posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0)) !=
            0 ||
        (rc = posix_spawn_file_actions_adddup2(&fa, pfd[1], 1)) != 0 ||
        (rc = posix_spawn_file_actions_adddup2(&fa, pfd[1], 2)) != 0 ||
        (rc = posix_spawnattr_init(&attr)) != 0 ||
        (attr_made = true,
         rc = posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF |
                                                  POSIX_SPAWN_SETPGROUP)) != 0 ||
        (rc = posix_spawnattr_setsigmask(&attr, &none)) != 0 ||
        (rc = posix_spawnattr_setsigdefault(&attr, &dfl)) != 0 ||
        (rc = posix_spawnattr_setpgroup(&attr, 0)) != 0 ||
        (rc = posix_spawn(&pid, d->hook, &fa, &attr, argv, env)) != 0) {
        snprintf(err, err_len, "dns hook %s: cannot run it: %s", d->hook, strerror(rc));
        rc = -rc;
        goto out;
    }
    spawned = true;
    close(pfd[1]);
    pfd[1] = -1;
    int64_t deadline = now_ms() + d->hook_timeout * 1000L;
    bool eof = false, exited = false, late = false, lost = false;
    int lost_err = 0;
    while (!exited) {
        if (stopped(d) || now_ms() >= deadline) {
            late = !stopped(d);
            kill(-pid, SIGKILL);
            while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
                continue;
            break;
        }
        struct pollfd p = {.fd = pfd[0], .events = POLLIN};
        if (!eof && poll(&p, 1, 100) > 0) {
            ssize_t got = take_output(pfd[0], out, &n, &dropped);
            eof = got == 0 || (got < 0 && errno != EINTR && errno != EAGAIN);
        } else if (eof) {
            struct timespec ts = {0, 20 * 1000000L};
            nanosleep(&ts, NULL);
        }
        pid_t w = waitpid(pid, &status, WNOHANG);
        exited = w == pid;
        if (w < 0 && errno != EINTR) { /* not ours to wait for any more: no verdict */
            lost = true;
            lost_err = errno;
            break;
        }
    }
    /* what it wrote before it exited is still in the pipe (a child it left may write on: a
     * pipe's worth, no more) */
    for (size_t more = 0; more < (1 << 20);) {
        ssize_t got = take_output(pfd[0], out, &n, &dropped);
        if (got <= 0)
            break;
        more += (size_t)got;
    }
    bool ok = exited && !lost && WIFEXITED(status) && WEXITSTATUS(status) == 0;
    log_output(action, fqdn, out, n, dropped, !ok);
    if (ok) {
        rc = 0;
    } else if (stopped(d)) {
        rc = -ECANCELED;
    } else {
        rc = -EIO;
        if (late)
            snprintf(err, err_len, "dns hook %s %s: killed after %ld s", action, fqdn,
                     d->hook_timeout);
        else if (lost)
            snprintf(err, err_len, "dns hook %s %s: cannot wait for it: %s", action, fqdn,
                     strerror(lost_err));
        else if (WIFEXITED(status))
            snprintf(err, err_len, "dns hook %s %s: exited %d", action, fqdn, WEXITSTATUS(status));
        else
            snprintf(err, err_len, "dns hook %s %s: killed by signal %d", action, fqdn,
                     WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    }
out:
    (void)spawned;
    if (attr_made)
        posix_spawnattr_destroy(&attr);
    if (fa_made)
        posix_spawn_file_actions_destroy(&fa);
    for (int i = 0; i < 2; i++)
        if (pfd[i] >= 0)
            close(pfd[i]);
    for (int i = 0; i < 4; i++)
        free(own[i]);
    free(env);
    return rc;
}

/* ---- the network ------------------------------------------------------------------------- */

static uint16_t new_id(void)
{
    uint16_t id;
    if (RAND_bytes((unsigned char *)&id, sizeof(id)) != 1)
        id = (uint16_t)now_ms();
    return id;
}

/* Waits for fd to be ready for events until deadline (monotonic ms): 0, -ETIMEDOUT or
 * -ECANCELED. */
static int wait_fd(const struct dns01 *d, int fd, short events, int64_t deadline)
{
    for (;;) {
        if (stopped(d))
            return -ECANCELED;
        int64_t left = deadline - now_ms();
        if (left <= 0)
            return -ETIMEDOUT;
        struct pollfd p = {.fd = fd, .events = events};
        int n = poll(&p, 1, left < 100 ? (int)left : 100);
        if (n > 0)
            return 0;
        if (n < 0 && errno != EINTR)
            return -errno;
    }
}

/* All of buf over a stream socket, or all of n bytes from it, by deadline. */
static int stream_io(const struct dns01 *d, int fd, uint8_t *buf, size_t n, bool writing,
                     int64_t deadline)
{
    for (size_t done = 0; done < n;) {
        int rc = wait_fd(d, fd, writing ? POLLOUT : POLLIN, deadline);
        if (rc)
            return rc;
        ssize_t k = writing ? send(fd, buf + done, n - done, MSG_NOSIGNAL)
                            : recv(fd, buf + done, n - done, 0);
        if (k == 0)
            return -ECONNRESET;
        if (k < 0 && errno != EAGAIN && errno != EINTR)
            return -errno;
        if (k > 0)
            done += (size_t)k;
    }
    return 0;
}

/* The question q over TCP (RFC 7766): the answer's length, or -errno. */
static long ask_tcp(const struct dns01 *d, const struct addr *to, const uint8_t *q, size_t qlen,
                    uint8_t *ans, size_t cap)
{
    int64_t deadline = now_ms() + QUERY_TRIES * QUERY_WAIT_MS;
    uint8_t head[2] = {(uint8_t)(qlen >> 8), (uint8_t)qlen}, msg[2 + DNSMSG_MAX];
    int fd = socket(to->sa.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    long rc;
    if (fd < 0)
        return -errno;
    memcpy(msg, head, 2);
    memcpy(msg + 2, q, qlen);
    if (connect(fd, (const struct sockaddr *)&to->sa, to->len) != 0 && errno != EINPROGRESS) {
        rc = -errno;
        goto out;
    }
    int soerr = 0;
    socklen_t sl = sizeof(soerr);
    if ((rc = wait_fd(d, fd, POLLOUT, deadline)) != 0)
        goto out;
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) != 0 || soerr) {
        rc = -(soerr ? soerr : errno);
        goto out;
    }
    if ((rc = stream_io(d, fd, msg, qlen + 2, true, deadline)) != 0 ||
        (rc = stream_io(d, fd, head, 2, false, deadline)) != 0)
        goto out;
    size_t alen = (size_t)head[0] << 8 | head[1];
    if (alen > cap || alen < 12) {
        rc = -EMSGSIZE;
        goto out;
    }
    if ((rc = stream_io(d, fd, ans, alen, false, deadline)) == 0)
        rc = (long)alen;
out:
    close(fd);
    return rc;
}

/* The question q to `to`: the answer's length (its ID q's, QR set), or -errno. UDP, a few
 * datagrams; TCP when the answer says it is truncated. */
static long ask(const struct dns01 *d, const struct addr *to, const uint8_t *q, size_t qlen,
                uint8_t *ans, size_t cap)
{
    int fd = socket(to->sa.ss_family, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    long rc = -ETIMEDOUT;
    if (fd < 0)
        return -errno;
    if (connect(fd, (const struct sockaddr *)&to->sa, to->len) != 0) {
        rc = -errno;
        goto out;
    }
    for (int t = 0; t < QUERY_TRIES && rc == -ETIMEDOUT; t++) {
        if (send(fd, q, qlen, 0) < 0) {
            rc = -errno;
            break;
        }
        int64_t deadline = now_ms() + QUERY_WAIT_MS;
        for (;;) {
            int w = wait_fd(d, fd, POLLIN, deadline);
            if (w) {
                rc = w;
                break;
            }
            ssize_t n = recv(fd, ans, cap, 0);
            if (n < 0 && (errno == EAGAIN || errno == EINTR))
                continue;
            if (n < 0) {
                rc = -errno; /* ECONNREFUSED: nothing listens there */
                break;
            }
            /* another ID, or no answer: a stray datagram, not ours; wait on */
            if (n < 12 || ans[0] != q[0] || ans[1] != q[1] || !(ans[2] & 0x80))
                continue;
            rc = (ans[2] & 0x02) ? ask_tcp(d, to, q, qlen, ans, cap) : (long)n;
            break;
        }
    }
out:
    close(fd);
    return rc;
}

/* The zone that holds fqdn, as the update server's answer to its SOA names it. */
static int find_zone(struct dns01 *d, const char *fqdn, char zone[DNSMSG_NAME_MAX], char *err,
                     size_t err_len)
{
    uint8_t q[DNSMSG_MAX], ans[DNSMSG_MAX];
    struct dnsmsg_reply r;
    char rb[32];
    size_t qlen = dnsmsg_query(q, sizeof(q), new_id(), fqdn, DNS_SOA, false);
    long n = qlen ? ask(d, &d->server, q, qlen, ans, sizeof(ans)) : -EINVAL;
    if (n < 0) {
        snprintf(err, err_len, "the SOA of %s from %s: %s", fqdn, d->server.text,
                 strerror((int)-n));
        return (int)n;
    }
    if (dnsmsg_parse(ans, (size_t)n, NULL, NULL, &r) != 0 || !r.zone[0]) {
        snprintf(err, err_len, "%s names no zone for %s (%s)", d->server.text, fqdn,
                 dnsmsg_rcode_name(r.rcode, rb, sizeof(rb)));
        return -EPROTO;
    }
    memcpy(zone, r.zone, DNSMSG_NAME_MAX);
    return 0;
}

/* One signed UPDATE adding or deleting fqdn's TXT value; its signed answer checked. */
static int update(struct dns01 *d, bool add, const char *fqdn, const char *value, char *err,
                  size_t err_len)
{
    uint8_t q[DNSMSG_MAX], ans[DNSMSG_MAX], mac[32];
    char zone[DNSMSG_NAME_MAX], rb[32], tb[32];
    struct dnsmsg_reply r;
    int rc = find_zone(d, fqdn, zone, err, err_len);
    if (rc)
        return rc;
    uint64_t now = (uint64_t)time(NULL);
    size_t qlen = dnsmsg_update_txt(q, sizeof(q), new_id(), zone, fqdn, value, add, TXT_TTL);
    if (qlen)
        qlen = dnsmsg_tsig_sign(q, qlen, sizeof(q), &d->key, now, mac);
    if (!qlen) {
        snprintf(err, err_len, "an UPDATE of %s does not fit a message", fqdn);
        return -EMSGSIZE;
    }
    long n = ask(d, &d->server, q, qlen, ans, sizeof(ans));
    if (n < 0) {
        snprintf(err, err_len, "UPDATE of %s at %s: %s", fqdn, d->server.text, strerror((int)-n));
        return (int)n;
    }
    if (dnsmsg_parse(ans, (size_t)n, NULL, NULL, &r) != 0) {
        snprintf(err, err_len, "UPDATE of %s at %s: a malformed answer", fqdn, d->server.text);
        return -EPROTO;
    }
    if (r.rcode != DNS_NOERROR) {
        /* a wrong key's answer (NOTAUTH, TSIG error BADSIG or BADKEY) is unsigned: the error is
         * only reported, and the ACME thread's backoff decides when to try again */
        snprintf(err, err_len, "%s refused the UPDATE of %s in zone %s with key %s: %s%s%s",
                 d->server.text, fqdn, zone, d->key.name,
                 dnsmsg_rcode_name(r.rcode, rb, sizeof(rb)),
                 r.tsig_at && r.tsig_error ? ", TSIG " : "",
                 r.tsig_at && r.tsig_error ? dnsmsg_rcode_name(r.tsig_error, tb, sizeof(tb)) : "");
        return r.rcode == DNS_NOTAUTH || r.rcode == DNS_REFUSED ? -EACCES : -EPROTO;
    }
    rc = r.tsig_at ? dnsmsg_tsig_verify(ans, (size_t)n, &r, &d->key, mac, (uint64_t)time(NULL))
                   : -EBADMSG;
    if (rc) {
        snprintf(err, err_len, "%s's answer to the UPDATE of %s: %s", d->server.text, fqdn,
                 rc == -ETIME ? "its TSIG time is off by more than its fudge"
                 : r.tsig_at  ? "its TSIG does not verify with our key"
                              : "it is not signed");
        return -EPROTO;
    }
    return 0;
}

/* Whether every resolver answers fqdn's TXT with value, looked for d->looks times each. */
static int propagated(struct dns01 *d, const char *fqdn, const char *value, char *err,
                      size_t err_len)
{
    uint8_t q[DNSMSG_MAX], ans[DNSMSG_MAX];
    struct dnsmsg_reply r;
    for (int i = 0; i < d->nresolvers; i++) {
        bool seen = false;
        long n = 0;
        for (int look = 0; look < d->looks && !seen; look++) {
            if (look) {
                int rc = nap(d, LOOK_GAP_MS);
                if (rc)
                    return rc;
            }
            size_t qlen = dnsmsg_query(q, sizeof(q), new_id(), fqdn, DNS_TXT, true);
            n = qlen ? ask(d, &d->resolvers[i], q, qlen, ans, sizeof(ans)) : -EINVAL;
            if (n == -ECANCELED)
                return -ECANCELED;
            seen = n > 0 && dnsmsg_parse(ans, (size_t)n, fqdn, value, &r) == 0 && r.has_txt;
        }
        if (!seen) {
            snprintf(err, err_len, "%s TXT %s not seen at %s after %d looks%s%s", fqdn, value,
                     d->resolvers[i].text, d->looks, n < 0 ? ": " : "",
                     n < 0 ? strerror((int)-n) : "");
            return -ETIMEDOUT;
        }
    }
    return 0;
}

static void names(const char *domain, const char *key_auth, char fqdn[DNSMSG_NAME_MAX],
                  char value[48])
{
    unsigned char digest[32];
    jws_alpn_digest(key_auth, strlen(key_auth), digest); /* SHA-256, as TLS-ALPN-01's */
    jws_b64(digest, sizeof(digest), value, 48);
    snprintf(fqdn, DNSMSG_NAME_MAX, "_acme-challenge.%s", domain);
}

int dns01_present(struct dns01 *d, const char *domain, const char *key_auth, char *err,
                  size_t err_len)
{
    char fqdn[DNSMSG_NAME_MAX], value[48];
    names(domain, key_auth, fqdn, value);
    int rc = d->hook ? run_hook(d, "present", fqdn, value, domain, err, err_len)
                     : update(d, true, fqdn, value, err, err_len);
    if (rc == 0 && (rc = propagated(d, fqdn, value, err, err_len)) != 0)
        dns01_cleanup(d, domain, key_auth); /* published, never seen: the CA is not asked */
    if (rc == 0)
        errlog(ERRLOG_NOTICE, "acme: dns-01: %s TXT %s published (%s)", fqdn, value, d->desc);
    return rc;
}

void dns01_cleanup(struct dns01 *d, const char *domain, const char *key_auth)
{
    char fqdn[DNSMSG_NAME_MAX], value[48], err[512] = "";
    names(domain, key_auth, fqdn, value);
    if (stopped(d)) { /* the process is stopping: no hook run, no exchange waited for */
        errlog(ERRLOG_WARN, "acme: dns-01: stopping: %s TXT %s left in place", fqdn, value);
        return;
    }
    int rc = d->hook ? run_hook(d, "cleanup", fqdn, value, domain, err, sizeof(err))
                     : update(d, false, fqdn, value, err, sizeof(err));
    if (rc && rc != -ECANCELED)
        errlog(ERRLOG_WARN, "acme: dns-01: %s TXT %s not withdrawn: %s", fqdn, value, err);
}
