/* HTTP/3's shared pieces: the secrets, what each worker's UDP sockets and QUIC endpoint are
 * made from, their certificates and the connection-ID routing; see h3.h. */
#include "server/h3.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "config/config.h"
#include "engine/udp.h"
#include "quic/cid.h"
#include "quic/quic.h"
#include "rt/errlog.h"
#include "rt/file.h"
#include "server/handover.h"
#include "server/server_int.h"
#include "server/steer.h"
#include "server/worker.h"
#include "tls/tls.h"

/* HTTP/3's secrets: the SHA-256 of each --quic-secret-file's bytes (at least 32 of them), the
 * first file's first, so that every instance given the files accepts the others' Retry tokens
 * and can reset their connections (issue 38), or 32 random bytes per start without one. A
 * reload reads the files again (rotation: the new secret's file first, the old one's after).
 * 0, or -1 with the file at fault in why. */
int h3_secrets_read(const struct config *cfg, struct quic_secrets *out, char *why, size_t why_len)
{
    _Static_assert(CONFIG_MAX_QUIC_SECRETS == QUIC_SECRETS_MAX, "a secret per file");
    memset(out, 0, sizeof(*out));
    if (cfg->num_quic_secret_files == 0) {
        out->n = 1;
        if (getrandom(out->key[0], QUIC_SECRET_LEN, 0) == QUIC_SECRET_LEN)
            return 0;
        snprintf(why, why_len, "HTTP/3: no random secret: %s", strerror(errno));
        return -1;
    }
    uint8_t buf[4096];
    int rc = 0;
    for (int i = 0; rc == 0 && i < cfg->num_quic_secret_files; i++) {
        const char *name = cfg->quic_secret_files[i];
        ssize_t n = -1;
        int fd = open(name, O_RDONLY | O_CLOEXEC);
        if (fd >= 0) {
            n = read(fd, buf, sizeof(buf));
            close(fd);
        }
        if (n < 32) {
            snprintf(why, why_len, "--quic-secret-file '%s': %s", name,
                     n < 0 ? strerror(errno) : "needs at least 32 bytes (openssl rand 32 > FILE)");
            rc = -1;
        } else {
            file_digest_mem(buf, (uint64_t)n, out->key[out->n++], QUIC_SECRET_LEN);
        }
    }
    explicit_bzero(buf, sizeof(buf));
    if (rc != 0)
        explicit_bzero(out, sizeof(*out));
    return rc;
}

int h3_plan(struct server *sv)
{
    int n = 0;
    for (int i = 0; i < sv->ngroups; i++) {
        struct lgroup *g = &sv->groups[i];
        /* a Unix socket has no UDP beside it; systemd's sockets are cleartext */
        g->udp = g->tls && !g->unix_sock && !g->inherited ? n++ : -1;
    }
    return n;
}

#ifndef RINGHTTPD_NO_HTTP3
/* Once every worker's UDP socket of group g is bound (w: the last worker): the program that
 * brings each datagram to the worker whose connection ID it carries (steer.h), when the group
 * is ours alone: its socket i is worker i's (bound in that order). Each TLS listener's UDP
 * port is a reuseport group of its own, with a program of its own; a connection ID names the
 * same worker in every one. A successor that starts beside us (a restart with --reuse-port)
 * finds the port in use and attaches nothing: its sockets sit behind ours, where the program
 * sends nothing, so new QUIC clients are ours to refuse while we drain (they fall back to TCP,
 * which the hand-over gives the successor) and our connections finish here; we take the
 * program off when we stop, and the successor has the kernel's hash until it puts its own on
 * (h3_route). */
static void quic_steer(struct server *sv, struct lgroup *g, struct runtime *w)
{
    const struct config *cfg = sv->cfg;
    int err = !g->udp_steer      ? -EBUSY
              : !server_seed(sv) ? -EAGAIN
                                 : steer_quic_attach(w->udp[g->udp]->fd, (uint32_t)cfg->threads,
                                                     NULL, sv->steer_seed, &sv->cids);
    g->udp_steer = err == 0;
    if (err < 0 && err != -EBUSY)
        errlog(ERRLOG_WARN,
               "HTTP/3 on %s: cannot route datagrams to workers by connection ID (%s): a "
               "client whose address changes may land on another worker and reconnect",
               g->url, strerror(-err));
    if (cfg->verbose)
        fprintf(stderr,
                "ringhttpd: HTTP/3 on %s: datagrams routed to workers by connection ID: %s\n",
                g->url,
                err == 0        ? "yes"
                : err == -EBUSY ? "no (another process shares the UDP port)"
                                : strerror(-err));
}

/* h3_route for one group's UDP port. */
static void route_group(struct server *sv, struct lgroup *g)
{
    int n = sv->cfg->threads;
    int count = handover_count_udp_at((const struct sockaddr *)&g->addr.ss), err = 0;
    if (count >= 0 && count != n)
        return; /* a predecessor still drains (its program routes), or a successor came */
    int *fds = malloc((size_t)n * sizeof(*fds));
    uint32_t *order = malloc((size_t)n * sizeof(*order));
    if (count < 0)
        err = count;
    else if (!fds || !order)
        err = -ENOMEM;
    for (int i = 0; err == 0 && i < n; i++)
        fds[i] = worker_runtime(sv->workers[i])->udp[g->udp]->fd;
    if (err == 0 && !server_seed(sv))
        err = -EAGAIN;
    if (err == 0 && (err = steer_quic_order(fds, (uint32_t)n, order)) == 0)
        err = steer_quic_attach(fds[0], (uint32_t)n, order, sv->steer_seed, &sv->cids);
    free(fds);
    free(order);
    g->udp_steer = err == 0;
    if (err == 0)
        errlog(ERRLOG_NOTICE,
               "HTTP/3 on %s: datagrams routed to workers by connection ID (the UDP port is "
               "ours alone now)",
               g->url);
    else if (err != -EAGAIN) /* EAGAIN: a probe's answer was unclear, next second */
        errlog_limited(&sv->steer_log, ERRLOG_WARN,
                       "HTTP/3 on %s: cannot route datagrams to workers by connection ID (%s): "
                       "a client whose address changes may land on another worker and "
                       "reconnect",
                       g->url, strerror(-err));
}

/* Once a second while serving (supervise), for a successor that started beside a predecessor
 * (quic_steer found a port shared): once the predecessor's sockets have all left a port's
 * group, ours are the whole group but in the order its closes reshuffled them into. A probe
 * finds each worker's index (steer_quic_order) and the program brings each connection ID to
 * the worker that made it there; connections opened meanwhile keep theirs (each worker made
 * its IDs for its own number all along). Until then the kernel's hash, as before. */
void h3_route(struct server *sv)
{
    if (sv->started < sv->cfg->threads || !worker_runtime(sv->workers[0])->nudp)
        return;
    for (int i = 0; i < sv->ngroups; i++)
        if (sv->groups[i].udp >= 0 && !sv->groups[i].udp_steer)
            route_group(sv, &sv->groups[i]);
}

/* The certificate and key files of pairs for QUIC: the TLS port's (with automatic HTTPS's),
 * NULL-terminated, in *certs and *keys, and each pair's site in *sites (issue 37: a site's own
 * pair is that site's over QUIC too), all in one allocation (free *certs); the sites' names
 * point into pairs. 0 or -ENOMEM. */
static int h3_files(struct server *sv, const struct config *pairs, const char ***certs,
                    const char ***keys, const struct quic_pair_site **sites)
{
    struct tls_cert_files *all;
    int n;
    if (server_pair_list(sv, pairs, &all, &n) != 0)
        return -ENOMEM;
    _Static_assert(_Alignof(struct quic_pair_site) <= _Alignof(const char *) &&
                       sizeof(struct quic_pair_site) % sizeof(const char *) == 0,
                   "the sites go after the files, aligned");
    const char **v = malloc(2 * ((size_t)n + 1) * sizeof(*v) + (size_t)n * sizeof(**sites));
    if (!v) {
        free(all);
        return -ENOMEM;
    }
    struct quic_pair_site *site = (struct quic_pair_site *)(v + 2 * (n + 1));
    for (int i = 0; i < n; i++) {
        v[i] = all[i].cert;
        v[n + 1 + i] = all[i].key;
        site[i] = (struct quic_pair_site){all[i].hosts, all[i].num_hosts};
    }
    v[n] = v[2 * n + 1] = NULL;
    free(all);
    *certs = v;
    *keys = v + n + 1;
    *sites = site;
    return 0;
}

/* The files of certs and keys, with each pair's site's names, as one string ("cert\0key\0"
 * then "host\0" each and "\0"), *len long: what a reload compares to read them again or not (a
 * site's names changed, its pair's files not, changes which site the pair is). NULL without
 * memory. */
static char *h3_joined(const char *const *certs, const char *const *keys,
                       const struct quic_pair_site *sites, size_t *len)
{
    size_t n = 0;
    for (int i = 0; certs[i]; i++) {
        n += strlen(certs[i]) + strlen(keys[i]) + 3;
        for (int h = 0; h < sites[i].num_hosts; h++)
            n += strlen(sites[i].hosts[h]) + 1;
    }
    char *out = malloc(n + 1), *p = out;
    for (int i = 0; out && certs[i]; i++) {
        p = stpcpy(p, certs[i]) + 1;
        p = stpcpy(p, keys[i]) + 1;
        for (int h = 0; h < sites[i].num_hosts; h++)
            p = stpcpy(p, sites[i].hosts[h]) + 1;
        *p++ = '\0';
    }
    *len = n;
    return out;
}

/* Keeps c (a dup for the main thread) and the files it was read from, for the next reload. */
static void h3_remember(struct server *sv, const struct quic_certs *c, char *files, size_t len)
{
    struct quic_certs *mine = NULL;
    quic_certs_put(sv->h3_certs);
    free(sv->h3_files);
    sv->h3_certs = NULL;
    sv->h3_files = NULL;
    if (c && files && quic_certs_dup(c, &mine) == 0) {
        sv->h3_certs = mine;
        sv->h3_files = files;
        sv->h3_files_len = len;
    } else {
        free(files);
    }
}

void h3_forget(struct server *sv)
{
    h3_remember(sv, NULL, NULL, 0);
}

/* SIGHUP: the --quic-secret-file files read again for every worker's endpoint, as the ticket
 * key files are; when one cannot be read, the secrets in use stay. */
void h3_secrets_reload(struct server *sv, const char *what)
{
    struct quic_secrets s;
    char why[512] = "";
    if (!sv->cfg->tls || !sv->cfg->http3 || sv->cfg->num_quic_secret_files == 0)
        return; /* the start's random secret: nothing to re-read */
    if (h3_secrets_read(sv->cfg, &s, why, sizeof(why)) != 0) {
        errlog(ERRLOG_ERROR, "%s: HTTP/3 secrets kept as they were: %s", what, why);
        return;
    }
    int err = 0;
    for (int i = 0; err == 0 && i < sv->cfg->threads; i++)
        if (worker_quic(sv->workers[i]))
            err = quic_ep_set_secrets(worker_quic(sv->workers[i]), &s);
    explicit_bzero(&s, sizeof(s));
    server_wake_workers(sv);
    if (err != 0)
        errlog(ERRLOG_ERROR, "%s: HTTP/3 secrets: %s", what, strerror(-err));
    else
        errlog(ERRLOG_NOTICE, "%s: HTTP/3 secrets re-read (%d file%s)", what,
               sv->cfg->num_quic_secret_files, sv->cfg->num_quic_secret_files == 1 ? "" : "s");
}

/* A reload's certificates for every worker's QUIC endpoint, as tls_port_publish does for the
 * TLS port: new handshakes get them, connections keep theirs. Read once for every worker (each
 * counts its set on its own thread), and not at all when the files are the ones read last and
 * the TLS port's load found every one of them as it was (issue 40: a reload of 10,000 sites);
 * when they cannot be read the previous ones stay. */
void h3_publish(struct server *sv, const struct config *pairs, const char *what)
{
    const char **certs, **keys;
    const struct quic_pair_site *sites;
    char why[512] = "";
    if (h3_files(sv, pairs, &certs, &keys, &sites) != 0) {
        errlog(ERRLOG_ERROR, "%s: HTTP/3 certificates kept as they were: out of memory", what);
        return;
    }
    size_t len = 0;
    char *joined = h3_joined(certs, keys, sites, &len);
    int reused = 0, groups = sv->tls_certs ? tls_certs_count(sv->tls_certs, &reused) : -1;
    struct quic_certs *first = NULL;
    if (joined && sv->h3_certs && len == sv->h3_files_len &&
        memcmp(joined, sv->h3_files, len) == 0 && reused == groups &&
        quic_certs_dup(sv->h3_certs, &first) != 0)
        first = NULL;
    if (first && sv->cfg->verbose)
        errlog(ERRLOG_NOTICE, "HTTP/3: certificates as they were, not read again");
    for (int i = 0; i < sv->cfg->threads; i++) {
        struct quic_certs *c;
        if (!worker_quic(sv->workers[i]))
            continue;
        /* read once for every worker (issue 40), each worker's set counted by its thread */
        int rc = first ? quic_certs_dup(first, &c)
                       : quic_certs_new(&c, certs, keys, sites, why, sizeof(why));
        if (rc != 0) {
            errlog(ERRLOG_ERROR, "%s: HTTP/3 certificates kept as they were: %s", what,
                   first ? "out of memory" : why);
            break;
        }
        if (!first && quic_certs_dup(c, &first) != 0) {
            quic_certs_put(c);
            errlog(ERRLOG_ERROR, "%s: HTTP/3 certificates kept as they were: out of memory", what);
            break;
        }
        quic_ep_publish(worker_quic(sv->workers[i]), c);
    }
    h3_remember(sv, first, joined, len);
    quic_certs_put(first); /* the main thread's own: the workers' are theirs */
    free(certs);
}

static enum quic_cc quic_cc_of(int v)
{
    switch (v) {
    case CONFIG_QUIC_CC_RENO:
        return QUIC_CC_RENO;
    case CONFIG_QUIC_CC_BBR:
        return QUIC_CC_BBR;
    case CONFIG_QUIC_CC_BBR2:
        return QUIC_CC_BBR2;
    }
    return QUIC_CC_CUBIC;
}

/* --http3: what each worker's UDP sockets on the TLS listeners' addresses and its QUIC endpoint
 * are made from, with the process's certificate pairs (read as the first worker is made, before
 * the process is confined). The secrets are shared by every worker, so a Retry token or a reset
 * made by one is good at another. */
int h3_prepare(struct server *sv, const struct quic_secrets *secrets, struct h3_parts *p,
               const struct worker_h3 **h3)
{
    const struct config *cfg = sv->cfg;
    const char **keys;
    const struct quic_pair_site *sites;
    memset(p, 0, sizeof(*p));
    *h3 = NULL;
    if (h3_files(sv, cfg, &p->certs, &keys, &sites) != 0) {
        fprintf(stderr, "ringhttpd: HTTP/3: out of memory\n");
        return -ENOMEM;
    }
    unsigned max = cfg->http3_max_conns;
    p->quic = (struct quic_settings){
        .max_conns = max,
        .max_streams = 100,
        .idle_timeout_s = cfg->keepalive_timeout > 0 ? cfg->keepalive_timeout : 1,
        .retry_above = max / 2,
        .certs = p->certs,
        .keys = keys,
        .sites = sites,
        /* read once (issue 40): h3_made gives the other workers the first one's */
        .shared = NULL,
        .secrets = secrets,
        .workers = (unsigned)cfg->threads, /* .worker: worker_new's id */
        .ids = &sv->cids,
        .cc = quic_cc_of(cfg->quic_cc),
    };
    /* The options' bounds are QUIC-LB's, which cid.h owns: checked here, where both are seen. */
    _Static_assert(CONFIG_QUIC_SID_MAX == CID_SID_MAX &&
                       CONFIG_QUIC_ROTATION_MAX == CID_ROTATION_MAX,
                   "--quic-server-id's bounds are cid.h's");
    if (cid_layout_init(&sv->cids, cfg->quic_sid, cfg->quic_sid_len, cfg->quic_sid_rotation) != 0)
        return -EINVAL; /* never: the option's setter checked the bounds */
    /* HTTP/3 on every TLS listener's address and port (issue 38): a UDP socket for each, at the
     * group's index in every worker's w->udp[] (h3_plan's numbers) */
    unsigned n = 0;
    for (int i = 0; i < sv->ngroups; i++) {
        struct lgroup *g = &sv->groups[i];
        if (g->udp < 0)
            continue;
        const struct addr *a = &g->addr;
        /* Before the first of ours binds: whether the port's group will be ours alone. */
        g->udp_steer = udp_addr_in_use((const struct sockaddr *)&a->ss, a->len, !a->dual) == 0;
        p->udp[g->udp] = (struct worker_udp){
            .addr = (const struct sockaddr *)&a->ss,
            .len = a->len,
            .v6only = !a->dual,
            .listener = (unsigned)i,
            .url = g->url,
        };
        n++;
    }
    p->h3 = (struct worker_h3){.udp = p->udp, .n = n, .quic = &p->quic};
    *h3 = &p->h3;
    return 0;
}

void h3_made(struct server *sv, struct h3_parts *p, struct worker *wk)
{
    struct runtime *w = worker_runtime(wk);
    const struct config *cfg = sv->cfg;
    if (w->id == 0) { /* what the first reload may reuse, and the next workers share */
        size_t len = 0;
        char *joined = h3_joined(p->quic.certs, p->quic.keys, p->quic.sites, &len);
        p->quic.shared = quic_ep_certs(worker_quic(wk));
        h3_remember(sv, p->quic.shared, joined, len);
    }
    for (int i = 0; w->id == cfg->threads - 1 && i < sv->ngroups; i++)
        if (sv->groups[i].udp >= 0)
            quic_steer(sv, &sv->groups[i], w);
    if (w->id == 0 && cfg->verbose && cfg->quic_server_id)
        fprintf(stderr,
                "ringhttpd: HTTP/3: connection IDs carry server ID %s (QUIC-LB plaintext, "
                "config rotation %u, %u bytes)\n",
                cfg->quic_server_id, cfg->quic_sid_rotation, sv->cids.len);
    if (w->id == 0 && cfg->verbose)
        fprintf(stderr, "ringhttpd: HTTP/3: congestion control %s, paced\n",
                quic_cc_name(p->quic.cc));
    if (w->id == 0 && cfg->verbose)
        fprintf(stderr, "ringhttpd: HTTP/3: UDP GSO %s, GRO %s\n",
                w->udp[0]->gso    ? "yes"
                : !cfg->http3_gso ? "no (--http3-gso off)"
                                  : "no (the kernel refuses UDP_SEGMENT)",
                w->udp[0]->gro    ? "yes"
                : !cfg->http3_gro ? "no (--http3-gro off)"
                                  : "no (the kernel refuses UDP_GRO)");
}

void h3_parts_free(struct h3_parts *p)
{
    free(p->certs); /* the endpoints read the files */
    p->certs = NULL;
}

/* Every worker's UDP socket stays in its port's group until all have drained: a socket that
 * leaves moves another into its place, and the connection-ID program would send a busy
 * worker's datagrams elsewhere. Then each port's program goes, so that a successor sharing the
 * port (its sockets behind ours) gets the kernel's hash, not our indices. */
void h3_unroute(struct server *sv)
{
    if (!sv->started || !worker_runtime(sv->workers[0])->nudp)
        return;
    for (int i = 0; i < sv->ngroups; i++)
        if (sv->groups[i].udp >= 0 && sv->groups[i].udp_steer)
            steer_detach(worker_runtime(sv->workers[0])->udp[sv->groups[i].udp]->fd);
}

#else
/* A build without HTTP/3 (make static: Debian ships no static p11-kit for GnuTLS). */
void h3_forget(struct server *sv)
{
    (void)sv;
}

void h3_publish(struct server *sv, const struct config *pairs, const char *what)
{
    (void)sv, (void)pairs, (void)what;
}

void h3_secrets_reload(struct server *sv, const char *what)
{
    (void)sv, (void)what;
}

void h3_route(struct server *sv)
{
    (void)sv;
}

void h3_unroute(struct server *sv)
{
    (void)sv;
}

int h3_prepare(struct server *sv, const struct quic_secrets *secrets, struct h3_parts *p,
               const struct worker_h3 **h3)
{
    (void)sv, (void)secrets;
    memset(p, 0, sizeof(*p));
    *h3 = NULL; /* the workers bind no UDP */
    return 0;
}

void h3_made(struct server *sv, struct h3_parts *p, struct worker *wk)
{
    (void)p;
    if (worker_runtime(wk)->id == 0)
        errlog(ERRLOG_WARN,
               "HTTP/3: not in this build (made with HTTP3=no, as make static is; the "
               "package's binary and the container image have it): HTTPS on TCP port %u only",
               sv->cfg->tls_port);
}

void h3_parts_free(struct h3_parts *p)
{
    (void)p;
}
#endif
