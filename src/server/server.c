/* Workers, signals, reload and drain; the listeners are listen.c's, HTTP/3's endpoints h3.c's;
 * see server.h. */
#include "server/server.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <linux/openat2.h>
#include <pwd.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "config/config.h"
#include "engine/caps.h"
#include "engine/engine.h"
#include "quic/quic.h"
#include "server/h3.h"
#include "server/handover.h"
#include "server/listen.h"
#include "server/privs.h"
#include "server/server_int.h"
#include "server/steer.h"
#include "rt/guard.h"
#include "conn/proto.h"
#include "rt/accesslog.h"
#include "rt/errlog.h"
#include "server/metrics.h"
#include "site/htpasswd.h"
#include "site/site.h"
#include "server/worker.h"
#include "server/systemd.h"
#include "server/acme/acme.h"
#include "server/acme/ondemand.h"
#include "site/tokens.h"
#include "tls/tls.h"
#include "conn/tls_xport.h"
#include "conn/transport.h"

static void raise_fd_limit(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl); /* best effort: the default still works, just smaller */
    }
}

/* The pairs of pairs (the start's configuration, or a re-read file's) followed by the
 * certificates automatic HTTPS keeps (issue 27), into *all (malloc'd, as many as there are:
 * issue 40), *n of them: 0 or -ENOMEM. */
int server_pair_list(struct server *sv, const struct config *pairs, struct tls_cert_files **all,
                     int *n)
{
    int cap = pairs->num_tls_certs + 1;
    *n = 0;
    if (!(*all = malloc((size_t)cap * sizeof(**all))))
        return -ENOMEM;
    for (int i = 0; i < pairs->num_tls_certs; i++) {
        const struct config_cert *c = &pairs->tls_certs[i];
        (*all)[(*n)++] = (struct tls_cert_files){
            .cert = c->cert, .key = c->key, .hosts = c->hosts, .num_hosts = c->num_hosts};
    }
    if (sv->acme && acme_pairs(sv->acme, all, n, &cap) != 0) {
        free(*all);
        *all = NULL;
        return -ENOMEM;
    }
    return 0;
}

/* The settings for all[0..n) (pair_list's); the protocol settings are always the start's (the
 * workers' protocol layers were made for them). */
static struct tls_settings tls_settings(struct server *sv, const struct config *pairs,
                                        const struct tls_cert_files *all, int n)
{
    return (struct tls_settings){
        .certs = all,
        .num_certs = n,
        /* no pair of the operator's: a name still waiting for its certificate is refused */
        .certless = sv->acme && pairs->num_tls_certs == 0,
        .min_version = sv->cfg->tls_min,
        .alpn_h2 =
            sv->cfg->http2, /* ALPN offers h2 first; tls_xport.c hands such a connection to w->h2 */
        .kx_groups = sv->cfg->tls_groups,
        /* the start's files, read again: a reload rotates their keys */
        .ticket_key_files = sv->cfg->ticket_key_files,
        .num_ticket_key_files = sv->cfg->num_ticket_key_files,
    };
}

/* One context per worker from the --tls-cert/--tls-key pairs of pairs, all or none: 0, or
 * -errno with the reason in why (the file at fault). The certificates are read once for every
 * worker (issue 40), on this thread (the main one: workers go on serving meanwhile), and what
 * the last load read is taken over where its files did not change. Warnings (an expired
 * certificate) are logged once. */
static int tls_load(struct server *sv, const struct config *pairs, struct tls_ctx **out, int *bad,
                    char *why, size_t why_len)
{
    struct tls_cert_files *all;
    struct tls_certs *certs = NULL;
    int num, n = sv->cfg->threads, rc, i = 0;
    if ((rc = server_pair_list(sv, pairs, &all, &num)) != 0) {
        snprintf(why, why_len, "TLS: out of memory");
        return rc;
    }
    struct tls_settings s = tls_settings(sv, pairs, all, num);
    rc = tls_certs_new(&s, sv->tls_certs, &certs, bad, why, why_len);
    free(all); /* tls_certs_new keeps copies of what it needs */
    s.certs = NULL;
    s.num_certs = 0;
    s.shared = certs;
    for (; i < n && rc == 0; i++) {
        if (sv->acme) /* TLS-ALPN-01: each worker's context reads the table through its slot */
            s.challenge = (struct tls_challenge){tokens_alpn, tokens_reader(&sv->tokens, i)};
        /* names found in handshakes, while a site has acme: on-demand: each worker's reader
         * routes them (the sites published before these contexts) */
        if (sv->ondemand && acme_ondemand_wanted(pairs))
            s.ondemand = (struct tls_ondemand){ondemand_cert, ondemand_reader(sv->ondemand, i)};
        rc = tls_ctx_new(&s, sv->tls_keys, &out[i], why, why_len);
    }
    if (rc != 0) {
        for (int j = 0; j < i - 1; j++)
            tls_ctx_put(out[j]);
        tls_certs_put(certs);
        return rc;
    }
    int reused = 0, groups = tls_certs_count(certs, &reused);
    if (sv->tls_certs && sv->cfg->verbose)
        errlog(ERRLOG_NOTICE, "TLS: %d certificates, %d of them as they were", groups, reused);
    tls_certs_put(sv->tls_certs);
    sv->tls_certs = certs; /* the server's reference: the next load's to take over from */
    const char *warn = tls_certs_warnings(certs);
    for (const char *eol; *warn; warn = eol + 1) { /* one log line per warning */
        eol = strchr(warn, '\n');
        if (!eol)
            break;
        errlog(ERRLOG_WARN, "%.*s", (int)(eol - warn), warn);
    }
    return 0;
}

/* How many listeners a successor started with --reuse-port has on the port of a (where we have
 * ours; handover.h says what they are given). When the kernel cannot say, assume a successor
 * as large as we are: the drain then only takes 1-2 s longer, and steering to indices nobody
 * holds is the kernel's hash. */
static int successor_listeners(const struct server *sv, const struct addr *a, int ours)
{
    if (ours == 0 || sv->started == 0)
        return 0;
    uint16_t port = ((const struct sockaddr_in *)&a->ss)->sin_port; /* same for v6 */
    int count = handover_count_listeners_at((const struct sockaddr *)&a->ss);
    if (count < 0) {
        errlog(ERRLOG_NOTICE,
               "drain: cannot count the listeners on port %u (%s): assuming a "
               "successor",
               ntohs(port), strerror(-count));
        return ours;
    }
    return count > ours ? count - ours : 0;
}

/* The seed of the address hash, drawn once: the QUIC program (attached when the UDP sockets
 * are bound, limits or not, so that a reload adding limits finds it in place) and the TCP one
 * (attached when limits come into force) must hash alike, so that a client's TCP and QUIC
 * connections reach one worker's tables (issue 35). */
bool server_seed(struct server *sv)
{
    if (!sv->seeded)
        sv->seeded = getrandom(&sv->steer_seed, sizeof(sv->steer_seed), 0) ==
                     (ssize_t)sizeof(sv->steer_seed);
    return sv->seeded;
}

/* Steers new connections to the port's successor listeners, if any listen, through fd (one of
 * ours on that port). Returns how many the successor has there. */
static int steer_port(struct server *sv, struct handover *h, const struct addr *a, int ours, int fd)
{
    int theirs = successor_listeners(sv, a, ours);
    int err = theirs > 0 ? handover_begin(h, fd, theirs) : 0;
    if (err < 0)
        errlog(ERRLOG_NOTICE, "drain: cannot steer new connections to a successor: %s",
               strerror(-err));
    return theirs;
}

/* Steers by client address on the port of a, through fd (our listener there), when the port's
 * reuseport group holds our listeners only: not while a predecessor or a successor shares it
 * (the hand-over's steering is in charge then, and limits are exact per worker only). */
static void steer_clients_on(struct server *sv, const struct addr *a, int fd)
{
    int n = sv->cfg->threads;
    if (fd < 0 || handover_count_listeners_at((const struct sockaddr *)&a->ss) != n)
        return;
    int err = steer_attach(fd, (uint32_t)n, sv->steer_seed);
    if (err < 0)
        errlog_limited(&sv->steer_log, ERRLOG_WARN,
                       "limits: cannot steer clients to workers (%s): per-client limits are "
                       "counted per worker",
                       strerror(-err));
}

/* --limit-conn and --limit-req count a client in one worker's tables, exact when all of its
 * connections reach that worker: the steering program goes on at start, and again once a
 * second (supervise), so that it comes back when a predecessor's hand-over, whose last program
 * leaves the port to the kernel's hash, has ended. Socket activation is not steered (systemd's
 * sockets may be fewer than the workers): the workers share one guard there (sv->guard). */
static void steer_clients(struct server *sv)
{
    if (!sv->steer || sv->started < sv->cfg->threads)
        return;
    for (int i = 0; i < sv->ngroups; i++)
        if (!sv->groups[i].inherited && !sv->groups[i].unix_sock)
            steer_clients_on(sv, &sv->groups[i].addr,
                             worker_listener_fd(sv->workers[0], (unsigned)i));
}

/* --limit-conn or --limit-req in force from cfg on (the start's, or a reload's that adds
 * them): steering goes on (steer_clients), and stays on. */
static void steer_from(struct server *sv, const struct config *cfg)
{
    /* Behind a balancer that sends PROXY headers, the source address is the balancer's: to
     * steer by it would bring every client of one balancer to one worker. The kernel's hash
     * spreads them, and --limit-conn and --limit-req count a client in the workers' one
     * shared guard (server_run), as for systemd's sockets. */
    if (sv->steer || sv->inherited || !config_limits_clients(cfg) || sv->cfg->num_proxy_from ||
        sv->any_proxy)
        return;
    sv->steer = server_seed(sv);
    steer_clients(sv);
}

/* The drain's start: on each port, steer new connections to a successor, if one listens, before
 * our listeners begin to close (each worker releases its own through the port's handover).
 * systemd's sockets outlive us with their queue: nothing to hand over there; a Unix socket's
 * successor renamed its own over the path (open_unix), so new clients reach it already. */
static enum worker_stop begin_handover(struct server *sv)
{
    int theirs = 0;
    for (int i = 0; sv->started && i < sv->ngroups; i++) {
        struct lgroup *g = &sv->groups[i];
        if (!g->inherited && !g->unix_sock)
            theirs += steer_port(sv, &g->ho, &g->addr, sv->cfg->threads,
                                 worker_listener_fd(sv->workers[0], (unsigned)i));
    }
    return theirs > 0 ? WORKER_HANDOVER : WORKER_DRAIN;
}

void server_wake_workers(struct server *sv)
{
    for (int i = 0; i < sv->started; i++) {
        int err = worker_wake(sv->workers[i]);
        if (err < 0)
            errlog(ERRLOG_ERROR, "waking worker %d: %s", i, strerror(-err));
    }
}

static void stop_workers(struct server *sv, enum worker_stop how)
{
    for (int i = 0; i < sv->started; i++)
        worker_stop(sv->workers[i], how);
}

static uint64_t monotonic_usec(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* --tls-port: the ticket secret, one context per worker (the files checked: a start-up error
 * names the one at fault), the listeners. -1 (or -2 for a usage error) after saying why. */
static int tls_start(struct server *sv)
{
    int n = sv->cfg->threads, rc;
    char why[512] = "";
    sv->tls_ports = calloc((size_t)n, sizeof(*sv->tls_ports));
    struct tls_ctx **ctxs = calloc((size_t)n, sizeof(*ctxs));
    if (!sv->tls_ports || !ctxs) {
        free(ctxs);
        fprintf(stderr, "ringhttpd: out of memory\n");
        return -1;
    }
    if ((rc = tls_keys_new(&sv->tls_keys)) != 0) {
        free(ctxs);
        fprintf(stderr, "ringhttpd: TLS: no random ticket secret: %s\n", strerror(-rc));
        return -1;
    }
    int bad;
    if ((rc = tls_load(sv, sv->cfg, ctxs, &bad, why, sizeof(why))) != 0) {
        free(ctxs);
        /* config read no pair at start (issue 40: 10,000 were read twice): the pair at fault
         * is named as --check-config names it, with its file, line and key */
        const struct config *cfg = sv->cfg;
        const struct config_cert *c =
            bad >= 0 && bad < cfg->num_tls_certs ? &cfg->tls_certs[bad] : NULL;
        bool key = strncmp(why, "--tls-key", 9) == 0;
        int line = c ? (key ? c->key_line : c->cert_line) : 0;
        if (cfg->config_file && line > 0)
            fprintf(stderr, "ringhttpd: %s:%d: %s: %s\n", cfg->config_file, line,
                    key ? "tls-key" : "tls-cert", why);
        else
            fprintf(stderr, "ringhttpd: %s\n", why);
        return -1;
    }
    /* RINGHTTPD_PARK_MAX (a test hook, as RINGHTTPD_ONDEMAND_ORDERS): fewer handshakes wait
     * for a certificate on demand per worker, so that a test reaches the bound; never more. */
    const char *park = getenv("RINGHTTPD_PARK_MAX");
    int park_max = park ? atoi(park) : 0;
    for (int i = 0; i < n; i++) {
        tls_port_init(&sv->tls_ports[i], ctxs[i]);
        if (park_max > 0 && (unsigned)park_max < sv->tls_ports[i].park_max)
            sv->tls_ports[i].park_max = (unsigned)park_max;
    }
    free(ctxs);
    return 0;
}

/* The metrics of ACME and of certificates on demand (metrics_add takes one source). */
static void acme_all_metrics(void *arg, FILE *f)
{
    struct server *sv = arg;
    acme_metrics(sv->acme, f);
    ondemand_metrics(sv->ondemand, f);
}

/* The ACME thread's hook: a certificate on disk is new. Only a flag: supervise, on the main
 * thread, makes the contexts (it must not block the ACME thread on the workers, nor race a
 * SIGHUP's reload); and a nudge to the on-demand thread, which reads the pair itself. */
static void acme_on_change(void *arg)
{
    struct server *sv = arg;
    atomic_store(&sv->acme_changed, true);
    if (sv->ondemand) /* a handshake may wait for this one (it takes the pair itself) */
        ondemand_poke(sv->ondemand);
}

/* --acme-email: the challenge table (a reader per worker) and the ACME state (account key,
 * certificates already on disk), before the TLS contexts that serve them; its thread starts
 * once the workers run. -1 after saying why. */
static int acme_setup(struct server *sv)
{
    char why[512] = "";
    struct acme_hooks hooks = {.changed = acme_on_change, .arg = sv};
    int rc = tokens_init(&sv->tokens, sv->cfg->threads);
    if (rc == 0) {
        sv->tokens_made = true;
        rc = acme_new(&sv->acme, sv->cfg, &sv->tokens, &hooks, why, sizeof(why));
        /* Also with a configuration file none of whose sites has acme: on-demand yet, since a
         * reload may give one a site: the thread must start now, before the process is
         * confined (Landlock binds only the threads made after; this one reads the state
         * directory), and the workers get its generation counter at start (worker_parts).
         * Idle, it costs a sleeping thread and a table whose pages stay untouched. */
        if (rc == 0 && (acme_ondemand_wanted(sv->cfg) || sv->cfg->config_file))
            rc = ondemand_new(&sv->ondemand, sv->cfg, sv->acme, sv->cfg->threads, why, sizeof(why));
    } else {
        snprintf(why, sizeof(why), "acme: out of memory");
    }
    if (rc == 0)
        return 0;
    fprintf(stderr, "ringhttpd: %s\n", why);
    return -1;
}

/* After the workers are joined: their ports' contexts and buffers, the secret. */
static void tls_stop(struct server *sv)
{
    for (int i = 0; sv->tls_ports && i < sv->cfg->threads; i++)
        tls_port_fini(&sv->tls_ports[i]);
    free(sv->tls_ports);
    tls_certs_put(sv->tls_certs);
    h3_forget(sv);
    tls_keys_free(sv->tls_keys);
}

/* Whether two configurations list the same pairs, for the same names, in the same order. */
static bool same_pairs(const struct config *a, const struct config *b)
{
    if (a->num_tls_certs != b->num_tls_certs)
        return false;
    for (int i = 0; i < a->num_tls_certs; i++) {
        const struct config_cert *x = &a->tls_certs[i], *y = &b->tls_certs[i];
        if (strcmp(x->cert, y->cert) != 0 || strcmp(x->key, y->key) != 0 ||
            x->num_hosts != y->num_hosts)
            return false;
        for (int h = 0; h < x->num_hosts; h++)
            if (strcmp(x->hosts[h], y->hosts[h]) != 0)
                return false;
    }
    return true;
}

enum tls_reload { TLS_NEW, TLS_KEPT, TLS_FAILED };

/* SIGHUP with --tls-port: contexts for the new configuration's pairs (fresh, the re-read file,
 * or the start's configuration without one), every file read again, into ctxs (one per worker)
 * for reload to publish. When they cannot be made: with the same pairs as the running ones
 * (a renewal gone wrong, or a key only root may read), the running contexts stay and the rest
 * of the reload goes on (TLS_KEPT); with other pairs (a site's pair added or changed), the
 * whole reload fails (TLS_FAILED), as nginx -s reload does, since the sites and their
 * certificates belong together. */
static enum tls_reload tls_reload(struct server *sv, const struct config *fresh,
                                  struct tls_ctx **ctxs, const char *what)
{
    const struct site *cur = sv->sites.cur; /* the main thread is the one that publishes */
    const struct config *running = cur->owned ? cur->owned : sv->cfg;
    char why[512] = "";
    if (tls_load(sv, fresh, ctxs, NULL, why, sizeof(why)) == 0)
        return TLS_NEW;
    if (same_pairs(fresh, running)) {
        errlog(ERRLOG_ERROR, "%s: TLS certificates kept as they were: %s", what, why);
        return TLS_KEPT;
    }
    errlog(ERRLOG_ERROR, "%s failed, still serving the previous configuration: %s", what, why);
    return TLS_FAILED;
}

/* Publishes s, a new site from the command line's paths (or the re-read file), with its
 * certificates: read again when renew (SIGHUP), else only when s's pairs differ from the
 * running ones (a moved root, whose re-read file may name others). The contexts are made
 * before anything is published and published after the site, so a connection that gets a new
 * site's certificate finds the site (workers switch sites at their next loop turn, contexts
 * at their next accept). False when s was dropped (the reason logged). */
static bool publish(struct server *sv, struct site *s, bool renew, const char *what)
{
    int n = sv->cfg->threads;
    struct tls_ctx **ctxs = NULL;
    enum tls_reload tls = TLS_KEPT;
    const struct config *fresh = s->owned ? s->owned : sv->cfg;
    const struct config *running = sv->sites.cur->owned ? sv->sites.cur->owned : sv->cfg;
    char why[512];
    if (config_reload_keeps_a_site(running, fresh, why, sizeof(why)) != 0) {
        errlog(ERRLOG_ERROR, "%s failed, still serving the previous configuration: %s", what, why);
        site_put(s);
        return false;
    }
    /* acme: on-demand given or taken: the contexts' hook (tls_load) comes or goes with it */
    bool ondemand_moved =
        sv->ondemand && acme_ondemand_wanted(fresh) != acme_ondemand_wanted(running);
    if (sv->cfg->tls && (renew || ondemand_moved || !same_pairs(fresh, running))) {
        if (!(ctxs = calloc((size_t)n, sizeof(*ctxs)))) {
            errlog(ERRLOG_ERROR,
                   "%s failed, still serving the previous configuration: out of "
                   "memory",
                   what);
            site_put(s);
            return false;
        }
        if ((tls = tls_reload(sv, fresh, ctxs, what)) == TLS_FAILED) {
            free(ctxs);
            site_put(s);
            return false;
        }
    }
    site_publish(&sv->sites, s);
    server_wake_workers(sv);
    steer_from(sv, fresh);
    if (sv->acme && acme_names(sv->acme, fresh, why, sizeof(why)) != 0)
        errlog(ERRLOG_ERROR, "%s: %s", what, why);
    if (tls == TLS_NEW) {
        for (int i = 0; i < n; i++)
            tls_port_publish(&sv->tls_ports[i], ctxs[i]);
        h3_publish(sv, fresh, what);
        errlog(ERRLOG_NOTICE, "%s: TLS certificates re-read", what);
    }
    free(ctxs);
    return true;
}

/* A certificate automatic HTTPS obtained (or renewed, or found written by another process)
 * goes live as a SIGHUP's certificates do: new contexts for every worker, adopted at their
 * next accept; connections in flight keep the context (and certificate) they started on. */
static void acme_install(struct server *sv)
{
    int n = sv->cfg->threads;
    const struct config *running = sv->sites.cur->owned ? sv->sites.cur->owned : sv->cfg;
    struct tls_ctx **ctxs = calloc((size_t)n, sizeof(*ctxs));
    char why[512] = "";
    if (!ctxs || tls_load(sv, running, ctxs, NULL, why, sizeof(why)) != 0) {
        errlog(ERRLOG_ERROR, "acme: the new certificate is not live, the previous ones stay: %s",
               ctxs ? why : "out of memory");
        free(ctxs);
        return;
    }
    for (int i = 0; i < n; i++)
        tls_port_publish(&sv->tls_ports[i], ctxs[i]);
    h3_publish(sv, running, "acme");
    free(ctxs);
}

/* SIGHUP: a new site and certificates, or the old ones kept with the reason. */
static void reload(struct server *sv, const char *what)
{
    struct site *s;
    char why[512] = "";
    systemd_notify(sv->notify_fd, "RELOADING=1\nMONOTONIC_USEC=%llu\nSTATUS=reloading",
                   (unsigned long long)monotonic_usec());
    int rc = site_open(sv->cfg, sv->sites.cur, &s, why, sizeof(why));
    if (rc == 0 && (rc = site_check_roots(s, sv->who, why, sizeof(why))) != 0)
        site_put(s);
    if (rc != 0)
        errlog(ERRLOG_ERROR, "%s failed, still serving the previous configuration: %s%s", what, why,
               rc == -EACCES && sv->landlocked && !strstr(why, "Landlock")
                   ? " (under Landlock, a file outside the directories the start's configuration "
                     "named needs a restart)"
                   : "");
    else if (publish(sv, s, true, what)) {
        h3_secrets_reload(sv, what);
        errlog(ERRLOG_NOTICE, "%s: serving %s", what, config_serves(s->owned ? s->owned : sv->cfg));
    }
    systemd_notify(sv->notify_fd, "READY=1\nSTATUS=serving %s on %s", config_serves(sv->cfg),
                   sv->groups[sv->main_group].url);
}

/* Once a second: a DOCROOT symlink re-pointed, or the directory removed and recreated, is
 * followed like a reload. One stat by the main thread stands for every worker's check. */
static void follow_docroot(struct server *sv, struct errlog_limit *lim)
{
    int moved = site_moved(sv->cfg, sv->sites.cur);
    if (moved <= 0)
        return; /* the same directory, or gone for now (a deploy in progress): keep serving */
    struct site *s;
    char why[512] = "";
    int rc = site_open(sv->cfg, sv->sites.cur, &s, why, sizeof(why));
    if (rc == 0 && (rc = site_check_roots(s, sv->who, why, sizeof(why))) != 0)
        site_put(s);
    if (rc != 0) {
        errlog_limited(lim, ERRLOG_ERROR,
                       "document root changed but cannot be used, still "
                       "serving the previous one: %s",
                       why);
        return;
    }
    if (publish(sv, s, false, "document root change"))
        errlog(ERRLOG_NOTICE,
               "document root of %s (or its _redirects, _headers) changed: serving the new one",
               config_serves(sv->cfg));
}

static bool all_done(const struct server *sv)
{
    for (int i = 0; i < sv->started; i++)
        if (!worker_done(sv->workers[i]))
            return false;
    return true;
}

/* The main thread's life once the workers run: signals, reloads, the docroot check, drain. */
static void supervise(struct server *sv, const sigset_t *signals)
{
    struct errlog_limit lim = {0};
    bool stopping = false, skipped = false; /* skipped: a second signal ended --drain-delay */

    for (;;) {
        struct timespec wait = {stopping ? 0 : 1, stopping ? 100000000 : 0};
        int sig = sigtimedwait(signals, NULL, &wait);
        if (sig < 0) {
            if (stopping && all_done(sv))
                return;
            if (!stopping) {
                follow_docroot(sv, &lim);
                steer_clients(sv);
                h3_route(sv);
            }
            if (!stopping && atomic_exchange(&sv->acme_changed, false))
                acme_install(sv);
            continue;
        }
        switch (sig) {
        case SIGHUP:
            if (stopping)
                errlog(ERRLOG_NOTICE, "SIGHUP during a drain: ignored");
            else {
                reload(sv, "reload (SIGHUP)");
                if (sv->alog) /* nginx reopens its logs on a reload too */
                    accesslog_reopen(sv->alog);
            }
            break;
        case SIGUSR1: /* the meaning nginx gives it: reopen the access log (after a rotation) */
            errlog(ERRLOG_NOTICE, "SIGUSR1 (reopen logs): %s",
                   !sv->alog                               ? "no access log to reopen"
                   : strcmp(sv->cfg->access_log, "-") == 0 ? "the access log is standard output"
                                                           : "reopening the access log");
            if (sv->alog)
                accesslog_reopen(sv->alog);
            break;
        case SIGUSR2:
            errlog(ERRLOG_NOTICE, "SIGUSR2: ignored (no meaning yet)");
            break;
        default: /* SIGINT, SIGTERM, SIGQUIT */
            if (!stopping) {
                stopping = true;
                systemd_notify(sv->notify_fd, "STOPPING=1\nSTATUS=draining");
                errlog(ERRLOG_NOTICE, "%s: draining (again to stop at once)", strsignal(sig));
                stop_workers(sv, begin_handover(sv));
            } else if (sv->cfg->drain_delay && !skipped) {
                /* The load balancer had its warning; the drain itself still lets responses in
                 * flight finish (issue 19: a second SIGTERM skips the delay). */
                skipped = true;
                errlog(ERRLOG_NOTICE,
                       "%s during the drain delay: closing the listeners now "
                       "(again to stop at once)",
                       strsignal(sig));
                stop_workers(sv, WORKER_SKIP_DELAY);
            } else {
                errlog(ERRLOG_NOTICE, "%s during the drain: closing every connection now",
                       strsignal(sig));
                stop_workers(sv, WORKER_ABORT);
            }
            break;
        }
    }
}

/* Every request is opened with openat2(RESOLVE_BENEATH), so a process where it cannot work
 * would answer each one 500. systemd's RestrictSUIDSGID= (which DynamicUser= implies) makes
 * openat2 fail with ENOSYS, and some container profiles forbid it: say so at start, once. */
static int check_openat2(const struct site *s)
{
    struct open_how how = {.flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC,
                           .resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS};
    long fd = syscall(SYS_openat2, s->root_fd, ".", &how, sizeof(how));
    if (fd >= 0) {
        close((int)fd);
        return 0;
    }
    int err = errno;
    if (err != ENOSYS && err != EPERM)
        return 0; /* the root itself, not the call: requests will say what is wrong */
    fprintf(stderr,
            "ringhttpd: openat2 is not usable here (%s), and every file is opened with it "
            "to stay beneath the document root (Linux 5.6+); a system call filter forbids "
            "it (systemd: RestrictSUIDSGID=, implied by DynamicUser=)\n",
            strerror(err));
    return -err;
}

/* --user with --access-log: the file was opened by root before the drop, but reopening it
 * after a rotation (SIGUSR1, logrotate's postrotate) creates it anew in its directory, as the
 * serving user: say at start, not at the first rotation, when that cannot work. */
static void check_log_dir(const struct server *sv)
{
    const char *log = sv->cfg->access_log;
    char copy[PATH_MAX];
    if (!log || strcmp(log, "-") == 0)
        return;
    snprintf(copy, sizeof(copy), "%s", log);
    const char *dir = dirname(copy);
    if (access(dir, W_OK | X_OK) == 0)
        return;
    errlog(ERRLOG_WARN,
           "--access-log %s: %s cannot write its directory %s (%s), so reopening the log "
           "after a rotation (SIGUSR1) will fail; give the directory to that user, or rotate "
           "with copytruncate",
           log, sv->who, dir, strerror(errno));
}

/* Least privilege once the listeners are bound and before any worker exists: the user change
 * and the Landlock domain apply to the calling thread and the threads it creates. */
static int confine(struct server *sv)
{
    const struct config *cfg = sv->cfg;
    char why[512] = "";
    if (cfg->user && privs_drop(cfg->user, why, sizeof(why)) != 0) {
        fprintf(stderr, "ringhttpd: %s\n", why);
        return -1;
    }
    if (why[0]) /* the note of a --user that had nothing to change */
        fprintf(stderr, "ringhttpd: %s\n", why);
    why[0] = '\0';
    /* the name while /etc/passwd is still readable (Landlock comes next) */
    struct passwd *pw = getpwuid(geteuid());
    snprintf(sv->who, sizeof(sv->who), "%s (uid %u)", pw ? pw->pw_name : "the user",
             (unsigned)geteuid());
    if (cfg->user)
        check_log_dir(sv);
    if (cfg->landlock) {
        int abi = privs_landlock(cfg, why, sizeof(why));
        if (abi < 0) {
            fprintf(stderr, "ringhttpd: %s (--no-landlock to run without)\n", why);
            return -1;
        }
        sv->landlocked = abi > 0;
        if (cfg->verbose && abi > 0)
            fprintf(stderr,
                    "ringhttpd: landlock: applied (ABI %d): files are read only beneath "
                    "the directories holding the roots and the files the configuration "
                    "names\n",
                    abi);
        else if (why[0])
            errlog(ERRLOG_WARN, "%s", why);
        else if (cfg->verbose)
            fprintf(stderr, "ringhttpd: landlock: not available in this kernel\n");
    } else if (cfg->verbose) {
        fprintf(stderr, "ringhttpd: landlock: off (--no-landlock)\n");
    }
    if (geteuid() == 0 && !cfg->user)
        errlog(ERRLOG_WARN, "serving as root; --user USER drops to USER after binding");
    /* What a request would meet: a root this user (or this domain) cannot read served 403 to
     * everything with nothing logged (issue 36). */
    if (site_check_roots(sv->sites.cur, sv->who, why, sizeof(why)) != 0) {
        fprintf(stderr, "ringhttpd: %s\n", why);
        return -1;
    }
    return 0;
}

static int pair_check(const char *cert, const char *key, char *why, size_t why_len)
{
    return tls_pair_check(&(struct tls_cert_files){.cert = cert, .key = key}, why, why_len);
}

const struct config_checks *server_config_checks(void)
{
    static const struct config_checks checks = {.pair = pair_check, .htpasswd = auth_file_check};
    return &checks;
}

int server_run(struct config *cfg, const struct server_seams *seams)
{
    const struct server_seams none = {0};
    seams = seams ? seams : &none;
    struct server sv = {.cfg = cfg, .notify_fd = -1};
    int inited = 0;                /* workers set up; sv.started of them run */
    struct h3_parts h3parts = {0}; /* while the workers are made */
    int rc = 1, stop_signals[] = {SIGINT, SIGTERM, SIGQUIT, SIGHUP, SIGUSR1, SIGUSR2};
    sigset_t signals;
    struct site *first = site_adopt(cfg);

    if (!first) {
        fprintf(stderr, "ringhttpd: out of memory\n");
        return 1;
    }
    site_slot_init(&sv.sites, first);
    if (check_openat2(first) != 0)
        goto out;
    /* Signals are taken synchronously by the main thread (sigtimedwait), so no handler runs in
     * a worker, and none an operator sends by habit ends the process by default; SIGPIPE is
     * ignored so a peer that vanished mid-send costs an EPIPE, not the process (the seed
     * servers died of it). */
    signal(SIGPIPE, SIG_IGN);
    sigemptyset(&signals);
    for (size_t i = 0; i < sizeof(stop_signals) / sizeof(stop_signals[0]); i++)
        sigaddset(&signals, stop_signals[i]);
    pthread_sigmask(SIG_BLOCK, &signals, NULL);
    raise_fd_limit();
    sv.notify_fd = systemd_notify_open();
    int aerr;
    if (cfg->access_log && (aerr = accesslog_open(&sv.alog, cfg->access_log)) < 0) {
        fprintf(stderr, "ringhttpd: --access-log %s: %s\n", cfg->access_log, strerror(-aerr));
        goto out;
    }

    sv.workers = calloc((size_t)cfg->threads, sizeof(*sv.workers));
    if (!sv.workers) {
        fprintf(stderr, "ringhttpd: out of memory\n");
        goto out;
    }
    int lrc = listen_open(&sv);
    if (lrc < 0) {
        rc = lrc == -2 ? 2 : 1;
        goto out;
    }
    if (cfg->verbose && sv.main_group >= 0 && !sv.groups[sv.main_group].unix_sock) {
        char cc[16] = "?";
        socklen_t cclen = sizeof(cc) - 1;
        (void)getsockopt(sv.groups[sv.main_group].fds[0], IPPROTO_TCP, TCP_CONGESTION, cc, &cclen);
        fprintf(stderr, "ringhttpd: TCP congestion control: %s (%s)\n", cc,
                cfg->tcp_cc ? "--tcp-cc" : "the host's default");
    }
    if (cfg->acme_email && acme_setup(&sv) != 0)
        goto out;
    if (cfg->tls && (lrc = tls_start(&sv)) < 0) {
        rc = lrc == -2 ? 2 : 1;
        goto out;
    }
    if (!(sv.eng = engine_choose(cfg->engine, cfg->verbose, &sv.caps)))
        goto out;
    struct quic_secrets h3_secrets;
    char h3_why[512] = "";
    if (cfg->tls && cfg->http3 && h3_secrets_read(cfg, &h3_secrets, h3_why, sizeof(h3_why)) != 0) {
        fprintf(stderr, "ringhttpd: %s\n", h3_why);
        goto out;
    }

    /* HTTP/3: what spans the workers is laid out before the first (h3.h); each worker makes
     * its own UDP sockets and QUIC endpoint from it */
    const struct worker_h3 *h3 = NULL;
    int nudp = cfg->tls && cfg->http3 ? h3_plan(&sv) : 0;
    if (nudp > 0 && h3_prepare(&sv, &h3_secrets, &h3parts, &h3) != 0)
        goto stop;
    /* systemd's sockets are not steered, nor are a balancer's connections (steer_from): one
     * client's connections reach any worker, so the workers count clients in one guard
     * (issue 38: behind PROXY headers, --limit-conn N let a client hold N per worker) */
    if ((sv.inherited || cfg->num_proxy_from || sv.any_proxy) && !(sv.guard = guard_shared_new())) {
        fprintf(stderr, "ringhttpd: the per-client limits: %s\n", strerror(ENOMEM));
        goto stop;
    }
    /* Every worker is set up before the process is confined (Landlock, --user): an engine reads
     * limits under /proc and opens /dev/null. Their threads start after, and so inherit it. */
    for (; inited < cfg->threads; inited++) {
        /* A listener on each group, at the group's index; TLS groups with their transport. */
        struct listener ls[LISTEN_MAX];
        for (int g = 0; g < sv.ngroups; g++) {
            struct lgroup *lg = &sv.groups[g];
            ls[g] = (struct listener){
                .fd = lg->fds[inited],
                .owned = !lg->inherited,
                .xport = lg->tls ? &transport_tls : seams->xport,
                .xport_ctx = lg->tls ? &sv.tls_ports[inited] : NULL,
                .handover = lg->unix_sock || lg->inherited ? NULL : &lg->ho,
                .proxy = lg->bind && lg->bind->proxy,
                .shared = lg->unix_sock,
            };
            lg->fds[inited] = -1; /* the worker's now, even when it fails */
        }
        const struct worker_parts parts = {
            .cfg = cfg,
            .eng = sv.eng,
            .caps = &sv.caps,
            .ls = ls,
            .n = (unsigned)sv.ngroups,
            .sites = &sv.sites,
            .alog = sv.alog,
            .guard = sv.guard,
            .tokens = sv.acme ? &sv.tokens : NULL,
            .ondemand_gen = sv.ondemand ? ondemand_gen(sv.ondemand) : NULL,
            .proto = seams->proto, /* the seam's test protocol stands in for HTTP/2 */
            .h3 = h3,
        };
        if (worker_new(&sv.workers[inited], inited, &parts) != 0)
            goto stop; /* it said why */
        if (nudp > 0)
            h3_made(&sv, &h3parts, sv.workers[inited]);
        if (sv.ondemand) /* its TLS hook routes names by the worker's sites */
            ondemand_reader(sv.ondemand, inited)->rt = worker_runtime(sv.workers[inited]);
    }
    h3_parts_free(&h3parts);
    /* Bound before the process is confined; it only reads the workers' counters. */
    if (cfg->metrics_bind &&
        metrics_start(&sv.metrics, cfg, sv.workers, cfg->threads, sv.eng->name, sv.alog) < 0)
        goto stop;
    static const struct metrics_source acme_source = {acme_metrics};
    static const struct metrics_source acme_ondemand_source = {acme_all_metrics};
    if (sv.metrics && sv.acme)
        metrics_add(sv.metrics, sv.ondemand ? &acme_ondemand_source : &acme_source,
                    sv.ondemand ? (void *)&sv : sv.acme);
    /* Before the process is confined: Landlock binds the calling thread and the threads it
     * makes after, so the ACME thread keeps what it needs that a worker must not have (the
     * state directory's writes, the system's CA bundle, the resolver's files); --user applies
     * to it as to every thread. Issuance never delays the start: it runs beside the workers,
     * and its first challenge waits for the listeners, which are open already. */
    if (sv.acme && (lrc = acme_start(sv.acme)) != 0) {
        fprintf(stderr, "ringhttpd: acme: cannot start its thread: %s\n", strerror(-lrc));
        goto stop;
    }
    if (sv.ondemand && (lrc = ondemand_start(sv.ondemand)) != 0) {
        fprintf(stderr, "ringhttpd: acme: cannot start the on-demand thread: %s\n", strerror(-lrc));
        goto stop;
    }
    if (confine(&sv) != 0)
        goto stop;
    for (sv.started = 0; sv.started < cfg->threads; sv.started++) {
        int err = worker_start(sv.workers[sv.started]);
        if (err != 0) {
            fprintf(stderr, "ringhttpd: pthread_create: %s\n", strerror(-err));
            goto stop;
        }
    }
    steer_from(&sv, cfg);
    if (seams->proto)
        fprintf(stderr,
                "ringhttpd: test protocol %s after the HTTP/2 preface "
                "(RINGHTTPD_TEST_PROTO)\n",
                seams->proto->name);
    if (seams->xport)
        fprintf(stderr,
                "ringhttpd: test transport %s on the HTTP port (RINGHTTPD_TEST_TRANSPORT)\n",
                seams->xport->name);
    if (cfg->tls && cfg->verbose) {
        char names[96];
        if (!cfg->ktls)
            fprintf(stderr, "ringhttpd: kTLS: no (--ktls off)\n");
        else if (!sv.caps.tls_ulp)
            fprintf(stderr, "ringhttpd: kTLS: no (the kernel has no tls ULP)\n");
        else if (!sv.caps.ktls_ciphers)
            fprintf(stderr, "ringhttpd: kTLS: no (the tls ULP seals none of our ciphers: %s)\n",
                    strerror(-sv.caps.ktls_err));
        else
            fprintf(stderr,
                    "ringhttpd: kTLS: yes (the kernel encrypts responses after the "
                    "handshake with %s)\n",
                    caps_ktls_names(&sv.caps, names, sizeof(names)));
        fprintf(stderr, "ringhttpd: TLS key exchange groups: %s%s\n",
                cfg->tls_groups ? cfg->tls_groups : tls_default_groups(),
                cfg->tls_groups || strstr(tls_default_groups(), "MLKEM")
                    ? ""
                    : " (this OpenSSL has no X25519MLKEM768)");
    }
    if (sv.acme && cfg->verbose)
        acme_describe(sv.acme, stderr);
    /* One line per listener, the first TLS one first and the main cleartext one last (the one
     * that names the engine, which scripts wait for). HTTP/3 only when a UDP socket is open:
     * not when the build left it out. */
    for (int g = 0; g < sv.ngroups; g++)
        if (sv.groups[g].tls)
            fprintf(stderr, "ringhttpd: listening on %s (TLS%s%s)\n", sv.groups[g].url,
                    sv.groups[g].udp >= 0 && sv.workers[0] && worker_quic(sv.workers[0])
                        ? "; HTTP/3 on UDP"
                        : "",
                    sv.groups[g].bind && sv.groups[g].bind->proxy ? "; PROXY header" : "");
    for (int g = 0; g < sv.ngroups; g++)
        if (!sv.groups[g].tls && g != sv.main_group)
            fprintf(stderr, "ringhttpd: listening on %s%s%s\n", sv.groups[g].url,
                    sv.groups[g].bind && sv.groups[g].bind->proxy ? " (PROXY header)" : "",
                    sv.groups[g].inherited ? " (from systemd)" : "");
    const struct lgroup *mg = &sv.groups[sv.main_group];
    fprintf(stderr, "ringhttpd: listening on %s (engine %s, %d thread%s)%s%s\n", mg->url,
            sv.eng->name, cfg->threads, cfg->threads == 1 ? "" : "s",
            mg->inherited ? " on sockets from systemd" : "",
            mg->bind && mg->bind->proxy ? " (PROXY header)" : "");
    systemd_notify(sv.notify_fd, "READY=1\nSTATUS=serving %s on %s", config_serves(cfg), mg->url);
    supervise(&sv, &signals);
    rc = 0;
stop:
    if (sv.metrics)
        metrics_stop(sv.metrics);
    ondemand_stop(sv.ondemand); /* its thread asks the ACME state; its table stays */
    acme_free(sv.acme);         /* before the workers go: its table waits on their slots */
    sv.acme = NULL;
    if (rc != 0)
        stop_workers(&sv, WORKER_ABORT);
    for (int i = 0; i < sv.started; i++)
        if (worker_join(sv.workers[i]) != 0)
            rc = 1;
    h3_unroute(&sv); /* after every join: see h3.h */
    for (int i = 0; i < sv.started; i++)
        worker_free(sv.workers[i]);
    for (int i = sv.started; i < inited; i++) /* set up, never started */
        worker_free(sv.workers[i]);
    guard_shared_free(sv.guard); /* after every worker's last conn_closed */
    sv.guard = NULL;
out:
    h3_parts_free(&h3parts);    /* a start that failed while making the workers */
    ondemand_free(sv.ondemand); /* after the workers: their TLS contexts ask it */
    acme_free(sv.acme);
    if (sv.tokens_made)
        tokens_fini(&sv.tokens);
    listen_close(&sv);
    tls_stop(&sv);
    if (sv.notify_fd >= 0)
        close(sv.notify_fd);
    free(sv.workers);
    site_slot_fini(&sv.sites);
    if (sv.alog)
        accesslog_close(sv.alog, 1000 * (int)cfg->drain_timeout);
    return rc;
}
