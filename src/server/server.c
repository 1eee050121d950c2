/* Listeners, workers, signals, reload and drain; see server.h. */
#include "server/server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <linux/openat2.h>
#include <grp.h>
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
#include <sys/un.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "config/config.h"
#include "engine/caps.h"
#include "engine/engine.h"
#include "engine/udp.h"
#include "http/h3/h3.h"
#include "quic/cid.h"
#include "quic/quic.h"
#include "server/handover.h"
#include "server/privs.h"
#include "server/steer.h"
#include "rt/guard.h"
#include "conn/proto.h"
#include "rt/accesslog.h"
#include "rt/errlog.h"
#include "rt/file.h"
#include "server/metrics.h"
#include "site/htpasswd.h"
#include "site/site.h"
#include "server/worker.h"
#include "http/serve.h"
#include "server/systemd.h"
#include "server/acme/acme.h"
#include "server/acme/ondemand.h"
#include "site/tokens.h"
#include "tls/tls.h"
#include "conn/tls_xport.h"
#include "conn/transport.h"

struct addr {
    struct sockaddr_storage ss;
    socklen_t len;
    bool dual; /* [::] taking IPv4 too (IPV6_V6ONLY off): no --bind */
};

/* --bind's address, or with none both families: [::] with IPV6_V6ONLY off, whose IPv4 clients
 * arrive as mapped addresses (core/peer.h reads them as IPv4), or 0.0.0.0 on a host without
 * IPv6 (issue 38: a site with A and AAAA records is served by one process, on TCP and UDP).
 * An address given is that address alone, as nginx's `listen [::]:80` is IPv6 only. */
static int parse_addr(const char *host, uint16_t port, struct addr *a)
{
    memset(a, 0, sizeof(*a));
    struct sockaddr_in *v4 = (struct sockaddr_in *)&a->ss;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&a->ss;
    char buf[INET6_ADDRSTRLEN + 2];
    if (!host) {
        int probe = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (probe >= 0) {
            close(probe);
            v6->sin6_family = AF_INET6;
            v6->sin6_port = htons(port);
            a->len = sizeof(*v6);
            a->dual = true;
            return 0;
        }
        host = "0.0.0.0"; /* no IPv6 here */
    }
    size_t len = strlen(host);

    if (len >= 2 && host[0] == '[' && host[len - 1] == ']' && len - 2 < sizeof(buf)) {
        memcpy(buf, host + 1, len - 2); /* "[::1]" */
        buf[len - 2] = '\0';
        host = buf;
    }
    if (inet_pton(AF_INET, host, &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        v4->sin_port = htons(port);
        a->len = sizeof(*v4);
        return 0;
    }
    if (inet_pton(AF_INET6, host, &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons(port);
        a->len = sizeof(*v6);
        return 0;
    }
    return -EINVAL;
}

/* One SO_REUSEPORT listener per worker: the kernel spreads connections with no shared accept
 * queue and no thundering herd, for both engines. TCP_NODELAY is inherited by accepted sockets
 * (Linux copies it), which saves a setsockopt per connection. TCP_DEFER_ACCEPT (nginx's
 * "deferred") hands over a connection only once its first bytes arrived, so the first recv finds
 * data instead of arming a poll; a client that sends nothing is still accepted after about the
 * header timeout, and the header timeout then closes it.
 *
 * TCP_NOTSENT_LOWAT (inherited too) caps the bytes a socket holds beyond what the peer's window
 * lets out: a large file waits in the page cache, not in socket buffers, and goes out in turns
 * between downloads. Without it one sendfile or splice queues a whole 1 MiB file; when the
 * client reads, the ACK that opens its window transmits the rest from the client's CPU (on
 * loopback, wrk's: 8-12% of the file bytes left from there, 10% of wrk's time went to softirq
 * against 3% with the mark, and 1 MiB throughput was 8% lower; bench/README.md). */
static int tune_listener(int fd, int defer_secs, int lowat, const char *cc)
{
    int one = 1;
    if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) != 0 ||
        setsockopt(fd, IPPROTO_TCP, TCP_DEFER_ACCEPT, &defer_secs, sizeof(defer_secs)) != 0 ||
        (lowat > 0 && setsockopt(fd, IPPROTO_TCP, TCP_NOTSENT_LOWAT, &lowat, sizeof(lowat)) != 0))
        return -errno;
    /* --tcp-cc (issue 42): an accepted socket keeps the controller its listener was given by
     * setsockopt (tcp_ca_openreq_child), so one call here sets every connection's. */
    if (cc && setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, cc, (socklen_t)strlen(cc)) != 0)
        return -errno;
    return 0;
}

/* Whether this kernel lets us use --tcp-cc's controller, asked of a throwaway socket before
 * any listener opens, so that a name it lacks is one clear line at start and not a
 * "cannot listen" that blames the port. 0, or -2 with the reason printed. */
static int tcp_cc_check(const struct config *cfg)
{
    if (!cfg->tcp_cc)
        return 0;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return 0; /* the listeners will say why */
    int err = setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, cfg->tcp_cc,
                         (socklen_t)strlen(cfg->tcp_cc)) == 0
                  ? 0
                  : errno;
    close(fd);
    if (err == 0)
        return 0;
    const char *list = err == EPERM ? "/proc/sys/net/ipv4/tcp_allowed_congestion_control"
                                    : "/proc/sys/net/ipv4/tcp_available_congestion_control";
    char names[256] = "?";
    FILE *f = fopen(list, "re");
    if (f) {
        if (!fgets(names, sizeof(names), f))
            strcpy(names, "?");
        names[strcspn(names, "\n")] = '\0';
        fclose(f);
    }
    if (err == EPERM)
        fprintf(stderr,
                "ringhttpd: --tcp-cc %s: not allowed to this process (allowed: %s; root may "
                "use any of tcp_available_congestion_control)\n",
                cfg->tcp_cc, names);
    else if (err == ENOENT)
        fprintf(stderr,
                "ringhttpd: --tcp-cc %s: the kernel has no such TCP congestion control "
                "(it has: %s; modprobe tcp_%s may add it)\n",
                cfg->tcp_cc, names, cfg->tcp_cc);
    else
        fprintf(stderr, "ringhttpd: --tcp-cc %s: %s\n", cfg->tcp_cc, strerror(err));
    return -2;
}

static int open_listener(const struct addr *a, int defer_secs, int lowat, const char *cc)
{
    int one = 1;
    int fd = socket(a->ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    int v6only = !a->dual;
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
        setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) != 0 ||
        (a->ss.ss_family == AF_INET6 &&
         setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &v6only, sizeof(v6only)) != 0) ||
        tune_listener(fd, defer_secs, lowat, cc) != 0 ||
        bind(fd, (const struct sockaddr *)&a->ss, a->len) != 0 || listen(fd, 4096) != 0) {
        int err = -errno;
        close(fd);
        return err;
    }
    return fd;
}

/* Whether something already listens on a's port. SO_REUSEPORT would let us join any listener
 * with the same owner silently (another ringhttpd, for instance) and split its traffic; a
 * socket without it cannot bind beside a listener, so this probe fails exactly when the port is
 * served. Sharing is what --reuse-port asks for. */
/* Whether another process serves address a (-EADDRINUSE), tried by a bind without
 * SO_REUSEPORT. Two processes started at once would both pass it (each probes before the other
 * listens) and then share the port through SO_REUSEPORT, so the probe is made under a claim: an
 * abstract unix socket named after the address, bound first and held (*claim) until the
 * process ends (a second claimant gets EADDRINUSE). Abstract names live in the network
 * namespace, need no file and go with the process; a --reuse-port successor makes no claim. */
static int port_in_use(const struct addr *a, int *claim)
{
    char host[INET6_ADDRSTRLEN] = "?";
    const void *ip = a->ss.ss_family == AF_INET6
                         ? (const void *)&((const struct sockaddr_in6 *)&a->ss)->sin6_addr
                         : (const void *)&((const struct sockaddr_in *)&a->ss)->sin_addr;
    unsigned port = ntohs(((const struct sockaddr_in *)&a->ss)->sin_port); /* same offset */
    inet_ntop(a->ss.ss_family, ip, host, sizeof(host));
    struct sockaddr_un un = {.sun_family = AF_UNIX};
    int n =
        snprintf(un.sun_path + 1, sizeof(un.sun_path) - 1, "ringhttpd-listen-%s-%u", host, port);
    int one = 1, rc = 0;
    *claim = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (*claim >= 0 &&
        bind(*claim, (const struct sockaddr *)&un,
             (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n)) != 0) {
        rc = -errno;
        close(*claim);
        *claim = -1;
        if (rc == -EADDRINUSE)
            return rc; /* another ringhttpd is opening or serving this address */
    }
    int fd = socket(a->ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    int v6only = !a->dual;
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
        (a->ss.ss_family == AF_INET6 &&
         setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &v6only, sizeof(v6only)) != 0) ||
        bind(fd, (const struct sockaddr *)&a->ss, a->len) != 0)
        rc = -errno;
    else
        rc = 0;
    close(fd);
    return rc;
}

static void raise_fd_limit(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl); /* best effort: the default still works, just smaller */
    }
}

static void format_addr(const struct addr *a, const char *scheme, char *out, size_t len)
{
    char host[INET6_ADDRSTRLEN] = "?";
    unsigned port = 0;
    if (a->ss.ss_family == AF_INET6) {
        const struct sockaddr_in6 *v6 = (const struct sockaddr_in6 *)&a->ss;
        inet_ntop(AF_INET6, &v6->sin6_addr, host, sizeof(host));
        port = ntohs(v6->sin6_port);
    } else if (a->ss.ss_family == AF_INET) {
        const struct sockaddr_in *v4 = (const struct sockaddr_in *)&a->ss;
        inet_ntop(AF_INET, &v4->sin_addr, host, sizeof(host));
        port = ntohs(v4->sin_port);
    }
    if (a->ss.ss_family == AF_UNIX) {
        snprintf(out, len, "unix:%s", ((const struct sockaddr_un *)&a->ss)->sun_path);
        return;
    }
    snprintf(out, len, "%s://%s%s%s:%u/", scheme, a->ss.ss_family == AF_INET6 ? "[" : "", host,
             a->ss.ss_family == AF_INET6 ? "]" : "", port);
}

/* One listening address of the process (issue 38): a --bind entry's cleartext port or its TLS
 * port, a Unix socket, or a socket systemd passed. Every worker has a listener on each, at the
 * group's index in its list, so the engines' tags and worker_listener_fd name it by index. */
struct lgroup {
    struct addr addr;               /* bound to (the kernel's port for 0, once the first binds) */
    const struct config_bind *bind; /* its entry, or NULL: the default (both families) or systemd */
    bool tls;                       /* TLS on it (the entry's TLS port) */
    bool inherited;                 /* systemd's: every worker a dup, left open at the end */
    bool unix_sock;                 /* a Unix socket: every worker a dup of one socket */
    dev_t dev;                      /* the socket file we made (Unix), removed at the end if it */
    ino_t ino;                      /* ... is still ours (a successor may have renamed over it) */
    int *fds;                       /* one per worker, each -1 once its worker has it */
    int claim;                      /* port_in_use's claim on the address, or -1 */
    struct handover ho;             /* its port's hand-over to a successor (one reuseport group) */
    char url[sizeof(struct sockaddr_un) + 16];
};

/* The process's view of its listeners and workers while it runs. */
struct server {
    struct config *cfg;
    const struct engine_ops *eng;
    struct engine_caps caps;          /* probed once, read by every worker until they are joined */
    struct lgroup groups[LISTEN_MAX]; /* the listeners: each worker's listener i is groups[i]'s */
    int ngroups;
    int main_group; /* the listening line's: the first IP cleartext group, else the first */
    int quic_group; /* HTTP/3's UDP address: the first TLS group's, or -1 */
    bool any_proxy; /* a --bind entry marked proxy */
    int inherited;  /* systemd passed this many listeners (0: we opened our own) */
    struct worker **workers; /* cfg->threads of them; the first `inited` made */
    int started;
    struct site_slot sites;
    int notify_fd;
    struct accesslog *alog;  /* --access-log, or NULL */
    struct metrics *metrics; /* --metrics, or NULL */
    /* --limit-conn, --limit-req: each client address steered to one worker (steer.h) */
    bool steer;
    bool seeded; /* steer_seed drawn: TCP's and QUIC's programs hash addresses with it */
    uint32_t steer_seed;
    struct guard *guard;    /* socket activation: the workers' one guard (rt/guard.h), or NULL */
    bool quic_steer;        /* the UDP port's group is ours alone: route by connection ID */
    struct cid_layout cids; /* every QUIC connection ID's layout (--quic-server-id) */
    struct errlog_limit steer_log;
    /* --tls-port: a second listener per worker, and the contexts a worker adopts */
    struct tls_keys *tls_keys; /* the ticket secret every context derives its keys from */
    /* the certificates loaded last (issue 40): the next load takes over what did not change */
    struct tls_certs *tls_certs;
    /* HTTP/3's credentials read last (a reference of the main thread's) and the files they were
     * read from ("cert\0key\0" each): a reload whose files all are as they were reuses them */
    struct quic_certs *h3_certs;
    char *h3_files;
    size_t h3_files_len;
    struct tls_port *tls_ports; /* one per worker: its TLS listener's transport context */
    /* --acme-email (issue 27): the ACME thread, the challenge answers the workers read, and
     * the flag its hook raises when a certificate on disk is new (supervise makes it live) */
    struct acme *acme;
    /* certificates on demand (issue 40): a site with "acme: on-demand", or NULL; its readers
     * are the TLS contexts' hook argument, so it outlives the workers */
    struct ondemand *ondemand;
    struct acme_tokens tokens;
    bool tokens_made;
    atomic_bool acme_changed;
    /* who serves, for messages about what that user may read ("nobody (uid 65534)"), and
     * whether Landlock confines it (a reload cannot widen that); set by confine */
    char who[96];
    bool landlocked;
};

/* The pairs of pairs (the start's configuration, or a re-read file's) followed by the
 * certificates automatic HTTPS keeps (issue 27), into *all (malloc'd, as many as there are:
 * issue 40), *n of them: 0 or -ENOMEM. */
static int pair_list(struct server *sv, const struct config *pairs, struct tls_cert_files **all,
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
    if ((rc = pair_list(sv, pairs, &all, &num)) != 0) {
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
        if (sv->ondemand) /* names found in handshakes: each worker's reader routes them */
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

/* Why a listener could not open, with what to do about it (issue 36): a privileged port names
 * the two ways out, a port in use the process that holds it, and the TLS port says it is. */
static void listen_failed(const struct lgroup *g, int err)
{
    char name[sizeof(g->url) + 32];
    unsigned port = ntohs(((const struct sockaddr_in *)&g->addr.ss)->sin_port); /* as v6's */
    if (g->unix_sock)
        snprintf(name, sizeof(name), "%s", g->url);
    else
        snprintf(name, sizeof(name), "%s port %u%s", g->bind && g->bind->host ? g->bind->host : "*",
                 port,
                 !g->tls                             ? ""
                 : g->bind && g->bind->tls_port >= 0 ? " (its tls=, the TLS port)"
                                                     : " (--tls-port)");
    if (err == -EACCES && !g->unix_sock && port < 1024)
        fprintf(stderr,
                "ringhttpd: cannot listen on %s: %s (a port below 1024 needs "
                "privilege: start as root with --user USER, which drops it after the bind, or "
                "grant CAP_NET_BIND_SERVICE: 'setcap cap_net_bind_service=+ep' on the binary, "
                "or AmbientCapabilities=CAP_NET_BIND_SERVICE in its systemd unit)\n",
                name, strerror(-err));
    else if (err == -EADDRINUSE)
        fprintf(stderr,
                "ringhttpd: cannot listen on %s: %s (another process serves it; "
                "--reuse-port shares it with a ringhttpd, for a zero-downtime restart)\n",
                name, strerror(-err));
    else
        fprintf(stderr, "ringhttpd: cannot listen on %s: %s\n", name, strerror(-err));
}

/* A new group at the end of sv's list, or NULL (said why) when LISTEN_MAX are made. */
static struct lgroup *group_add(struct server *sv, const struct config_bind *b, bool tls)
{
    if (sv->ngroups == LISTEN_MAX) {
        fprintf(stderr,
                "ringhttpd: --bind: at most %d listeners (a TLS port counts as one of its "
                "own)\n",
                LISTEN_MAX);
        return NULL;
    }
    struct lgroup *g = &sv->groups[sv->ngroups];
    g->fds = malloc((size_t)sv->cfg->threads * sizeof(*g->fds));
    if (!g->fds) {
        fprintf(stderr, "ringhttpd: out of memory\n");
        return NULL;
    }
    for (int i = 0; i < sv->cfg->threads; i++)
        g->fds[i] = -1;
    g->bind = b;
    g->tls = tls;
    g->claim = -1;
    handover_init(&g->ho, 0);
    sv->ngroups++;
    return g;
}

/* Whether two IP groups would take each other's connections: the same port, and in a family
 * both take, the same address or either's wildcard ([::] with IPV6_V6ONLY off takes IPv4 too).
 * The kernel would refuse only some of these (EADDRINUSE once the other binds), and would take
 * the rest silently, as two reuseport groups that the hand-over would count as one. */
static bool overlap(const struct addr *a, const struct addr *b)
{
    const struct sockaddr_in *a4 = (const void *)&a->ss, *b4 = (const void *)&b->ss;
    const struct sockaddr_in6 *a6 = (const void *)&a->ss, *b6 = (const void *)&b->ss;
    if (a->ss.ss_family == AF_UNIX || b->ss.ss_family == AF_UNIX)
        return a->ss.ss_family == b->ss.ss_family &&
               strcmp(((const struct sockaddr_un *)&a->ss)->sun_path,
                      ((const struct sockaddr_un *)&b->ss)->sun_path) == 0;
    if (a4->sin_port != b4->sin_port || a4->sin_port == 0) /* same offset in both families */
        return false;
    if (a->ss.ss_family == AF_INET6 && b->ss.ss_family == AF_INET6)
        return IN6_IS_ADDR_UNSPECIFIED(&a6->sin6_addr) || IN6_IS_ADDR_UNSPECIFIED(&b6->sin6_addr) ||
               IN6_ARE_ADDR_EQUAL(&a6->sin6_addr, &b6->sin6_addr);
    if (a->ss.ss_family == AF_INET && b->ss.ss_family == AF_INET)
        return a4->sin_addr.s_addr == INADDR_ANY || b4->sin_addr.s_addr == INADDR_ANY ||
               a4->sin_addr.s_addr == b4->sin_addr.s_addr;
    return a->dual || b->dual; /* an IPv4 address beside [::] taking both */
}

/* A group's address from its entry (or the default) and its port, or -2 after saying why. */
static int group_addr(struct lgroup *g, uint16_t port)
{
    const struct config_bind *b = g->bind;
    if (b && b->path) {
        struct sockaddr_un *un = (struct sockaddr_un *)&g->addr.ss;
        memset(&g->addr, 0, sizeof(g->addr));
        un->sun_family = AF_UNIX;
        snprintf(un->sun_path, sizeof(un->sun_path), "%s", b->path);
        g->addr.len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(b->path) + 1);
        g->unix_sock = true;
    } else if (parse_addr(b ? b->host : NULL, port, &g->addr) != 0) {
        fprintf(stderr, "ringhttpd: --bind: '%s' is not an IPv4 or IPv6 address\n", b->host);
        return -2;
    }
    format_addr(&g->addr, g->tls ? "https" : "http", g->url, sizeof(g->url));
    return 0;
}

/* The groups of --bind's entries (or the default's one address): a cleartext group for each
 * (unless systemd passed the cleartext listeners), and with --tls-port a TLS group for each IP
 * entry. Duplicates and overlaps are refused here, before anything binds. 0 or -2. */
static int plan_groups(struct server *sv)
{
    const struct config *cfg = sv->cfg;
    int nb = cfg->num_binds ? cfg->num_binds : 1;
    for (int i = 0; i < cfg->num_binds; i++)
        if ((cfg->binds[i].tls_port >= 0 || cfg->binds[i].tls) && !cfg->tls) {
            if (cfg->binds[i].tls) {
                fprintf(stderr,
                        "ringhttpd: --bind unix:%s tls needs --tls-port (and a "
                        "certificate) to turn HTTPS on\n",
                        cfg->binds[i].path);
                return -2;
            }
            fprintf(stderr,
                    "ringhttpd: --bind: tls=%d needs --tls-port (and a certificate) to "
                    "turn HTTPS on\n",
                    cfg->binds[i].tls_port);
            return -2;
        }
    for (int pass = 0; pass < 2; pass++) {
        if ((pass == 0 && sv->inherited) || (pass == 1 && !cfg->tls))
            continue;
        for (int i = 0; i < nb; i++) {
            const struct config_bind *b = cfg->num_binds ? &cfg->binds[i] : NULL;
            if (b && b->path && b->tls != (pass == 1))
                continue; /* a Unix socket is one listener: cleartext, or TLS with 'tls' */
            int want = pass == 0 ? (b && b->port >= 0 ? b->port : cfg->port)
                                 : (b && b->tls_port >= 0 ? b->tls_port : cfg->tls_port);
            struct lgroup *g = group_add(sv, b, pass == 1);
            if (!g || group_addr(g, (uint16_t)want) != 0)
                return -2;
            sv->any_proxy |= b && b->proxy;
        }
    }
    bool any_tls = false;
    for (int i = 0; i < sv->ngroups; i++)
        any_tls |= sv->groups[i].tls;
    if (cfg->tls && !any_tls) {
        fprintf(stderr, "ringhttpd: --tls-port needs a --bind entry that is an IP address, or a "
                        "Unix socket marked tls\n");
        return -2;
    }
    for (int i = 0; i < sv->ngroups; i++)
        for (int j = sv->inherited; j < i; j++)
            if (overlap(&sv->groups[i].addr, &sv->groups[j].addr)) {
                const struct lgroup *a = &sv->groups[j], *b = &sv->groups[i];
                if (strcmp(a->url + (a->tls ? 5 : 4), b->url + (b->tls ? 5 : 4)) == 0)
                    fprintf(stderr, "ringhttpd: --bind: %s is given twice%s\n", b->url,
                            a->tls != b->tls ? " (as one entry's port and another's TLS port)"
                                             : "");
                else
                    fprintf(stderr,
                            "ringhttpd: --bind: %s and %s overlap (%s); give each address "
                            "once, or one wildcard per port\n",
                            a->url, b->url,
                            a->addr.dual || b->addr.dual
                                ? "with no address, or *, the [::] socket takes IPv4 too"
                                : "the wildcard takes the other's connections");
                return -2;
            }
    return 0;
}

/* Whether a process accepts on the Unix socket at g's path: 1, 0 (a stale file: nobody
 * listens), or -errno. */
static int unix_live(const struct lgroup *g)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -errno;
    int rc = connect(fd, (const struct sockaddr *)&g->addr.ss, g->addr.len) == 0 ? 1 : -errno;
    close(fd);
    if (rc == -EAGAIN) /* its backlog is full: somebody listens */
        return 1;
    return rc == -ECONNREFUSED ? 0 : rc;
}

/* USER[:GROUP] (names or numbers; no GROUP: the user's own) into ids; 0 or -EINVAL. */
static int owner_ids(const char *owner, uid_t *uid, gid_t *gid)
{
    char user[256];
    const char *colon = strchr(owner, ':');
    size_t n = colon ? (size_t)(colon - owner) : strlen(owner);
    if (n == 0 || n >= sizeof(user))
        return -EINVAL;
    memcpy(user, owner, n);
    user[n] = '\0';
    struct passwd *pw = getpwnam(user);
    char *end;
    if (pw) {
        *uid = pw->pw_uid;
        *gid = pw->pw_gid;
    } else {
        unsigned long v = strtoul(user, &end, 10);
        if (*end || end == user)
            return -EINVAL;
        *uid = (uid_t)v;
        *gid = (gid_t)-1;
    }
    if (colon) {
        struct group *gr = getgrnam(colon + 1);
        unsigned long v = gr ? 0 : strtoul(colon + 1, &end, 10);
        if (!gr && (*end || end == colon + 1))
            return -EINVAL;
        *gid = gr ? gr->gr_gid : (gid_t)v;
    }
    return 0;
}

/* --bind unix:PATH: one socket for every worker (a dup each). A file left by a process that
 * ended without removing it (a crash, a kill -9) is found stale (a connect is refused) and
 * replaced; a socket another process still accepts on is refused, or with --reuse-port taken
 * over (a successor in a zero-downtime restart): ours is bound beside it and renamed over the
 * path in one step, so every new connection reaches one of the two. nginx removes its sockets
 * at exit but fails on a stale one at start ("Address already in use"). -1 after saying why. */
static int open_unix(struct server *sv, struct lgroup *g)
{
    const struct config *cfg = sv->cfg;
    const char *path = g->bind->path;
    struct addr tmp = g->addr;
    struct sockaddr_un *un = (struct sockaddr_un *)&tmp.ss;
    struct stat st;
    bool rename_over = false;
    int err = 0, fd = -1;
    uid_t uid = (uid_t)-1;
    gid_t gid = (gid_t)-1;
    if (g->bind->owner && owner_ids(g->bind->owner, &uid, &gid) != 0) {
        fprintf(stderr, "ringhttpd: --bind %s owner=%s: no such user or group\n", g->url,
                g->bind->owner);
        return -1;
    }
    if (lstat(path, &st) == 0) {
        int live = S_ISSOCK(st.st_mode) ? unix_live(g) : -ENOTSOCK;
        if (live < 0 && live != -ENOENT) {
            fprintf(stderr, "ringhttpd: cannot listen on %s: %s is there already (%s)\n", g->url,
                    path, strerror(-live));
            return -1;
        }
        if (live == 1 && !cfg->reuse_port) {
            listen_failed(g, -EADDRINUSE);
            return -1;
        }
        rename_over = live == 1;
        if (live == 0 && unlink(path) == 0)
            errlog(ERRLOG_NOTICE, "%s: removed a stale socket file (nobody accepted on it)",
                   g->url);
    }
    if (rename_over) {
        int n = snprintf(un->sun_path, sizeof(un->sun_path), "%s.%d", path, (int)getpid());
        if (n < 0 || (size_t)n >= sizeof(un->sun_path)) {
            fprintf(stderr, "ringhttpd: --bind %s: the path is too long to take it over\n", g->url);
            return -1;
        }
        tmp.len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + (size_t)n + 1);
        unlink(un->sun_path);
    }
    /* nginx makes its Unix sockets 0666 (the directory is the access control); the mode and
     * the owner are set before listen, so no client connects through the umask's mode */
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0 || bind(fd, (const struct sockaddr *)&tmp.ss, tmp.len) != 0) {
        err = -errno;
        goto fail;
    }
    if (chmod(un->sun_path, g->bind->mode >= 0 ? (mode_t)g->bind->mode : 0666) != 0 ||
        ((uid != (uid_t)-1 || gid != (gid_t)-1) && chown(un->sun_path, uid, gid) != 0) ||
        listen(fd, 4096) != 0 || (rename_over && rename(un->sun_path, path) != 0) ||
        stat(path, &st) != 0) {
        err = -errno;
        unlink(un->sun_path);
        goto fail;
    }
    g->dev = st.st_dev;
    g->ino = st.st_ino;
    g->fds[0] = fd;
    for (int i = 1; i < cfg->threads; i++)
        if ((g->fds[i] = fcntl(fd, F_DUPFD_CLOEXEC, 0)) < 0) {
            fprintf(stderr, "ringhttpd: %s: dup: %s\n", g->url, strerror(errno));
            return -1; /* server_run closes the fds and removes the file */
        }
    if (rename_over)
        errlog(ERRLOG_NOTICE, "%s: taken over from the process that served it (--reuse-port)",
               g->url);
    return 0;
fail:
    if (fd >= 0)
        close(fd);
    listen_failed(g, err);
    return -1;
}

/* The socket file of a Unix group, removed at the end when it is still the one we bound (a
 * successor that took it over renamed its own there). Under Landlock or after --user the
 * directory may refuse: the next start finds the file stale and replaces it. */
static void unix_remove(const struct lgroup *g)
{
    struct stat st;
    if (!g->unix_sock || !g->ino || stat(g->bind->path, &st) != 0 || st.st_dev != g->dev ||
        st.st_ino != g->ino)
        return;
    if (unlink(g->bind->path) != 0)
        errlog(ERRLOG_NOTICE, "%s: cannot remove the socket file (%s): the next start replaces it",
               g->url, strerror(errno));
}

/* An IP group: one listener per worker, on the port the first got when it asked for 0. */
static int open_ip(struct server *sv, struct lgroup *g)
{
    const struct config *cfg = sv->cfg;
    int err;
    if (((const struct sockaddr_in *)&g->addr.ss)->sin_port != 0 && !cfg->reuse_port &&
        (err = port_in_use(&g->addr, &g->claim)) == -EADDRINUSE) {
        listen_failed(g, err);
        return -1;
    }
    for (int i = 0; i < cfg->threads; i++) {
        int fd =
            open_listener(&g->addr, (int)cfg->header_timeout, (int)cfg->send_lowat, cfg->tcp_cc);
        if (fd < 0) {
            listen_failed(g, fd);
            return -1;
        }
        g->fds[i] = fd;
        if (i == 0 && getsockname(fd, (struct sockaddr *)&g->addr.ss, &g->addr.len) != 0) {
            fprintf(stderr, "ringhttpd: getsockname: %s\n", strerror(errno));
            return -1; /* port 0: the others must bind the port the kernel picked */
        }
    }
    if (cfg->reuse_port) /* a finished predecessor's steering would send us all to one worker */
        handover_join(g->fds[0]);
    g->ho.ours = cfg->threads;
    format_addr(&g->addr, g->tls ? "https" : "http", g->url, sizeof(g->url));
    return 0;
}

/* systemd's sockets, each a group that every worker holds a dup of (each can close its own in
 * a drain without pulling it from under another); a worker accepts on all of them, so a second
 * socket (another address, a Unix socket) is served by every worker. -1 after saying why. */
static int adopt_inherited(struct server *sv, const int *fds, int n, const char *names)
{
    const struct config *cfg = sv->cfg;
    int rc = 0;
    for (int i = 0; i < n; i++) {
        struct lgroup *g = rc == 0 ? group_add(sv, NULL, false) : NULL;
        if (!g) {
            rc = -1;
            close(fds[i]);
            continue;
        }
        g->inherited = true;
        /* best effort */
        tune_listener(fds[i], (int)cfg->header_timeout, (int)cfg->send_lowat, cfg->tcp_cc);
        g->addr.len = sizeof(g->addr.ss);
        getsockname(fds[i], (struct sockaddr *)&g->addr.ss, &g->addr.len);
        format_addr(&g->addr, "http", g->url, sizeof(g->url));
        g->fds[0] = fds[i];
        for (int j = 1; j < cfg->threads && rc == 0; j++)
            if ((g->fds[j] = fcntl(fds[i], F_DUPFD_CLOEXEC, 0)) < 0) {
                fprintf(stderr, "ringhttpd: socket activation: dup: %s\n", strerror(errno));
                rc = -1;
            }
    }
    if (rc == 0 && cfg->verbose)
        fprintf(stderr,
                "ringhttpd: socket activation: %d socket%s%s%s, each served by %d workers\n", n,
                n == 1 ? "" : "s", names[0] ? " named " : "", names, cfg->threads);
    return rc;
}

/* Every listener: systemd's (socket activation), then each --bind entry's (or the default's).
 * -1, or -2 for a usage error, after saying why. */
static int open_listeners(struct server *sv)
{
    struct config *cfg = sv->cfg;
    int inherited[SYSTEMD_MAX_FDS];
    char names[256], why[256] = "";
    int n = systemd_listen_fds(inherited, SYSTEMD_MAX_FDS, names, sizeof(names), why, sizeof(why));
    if (n < 0) {
        fprintf(stderr, "ringhttpd: %s\n", why);
        return -1;
    }
    sv->inherited = n;
    sv->quic_group = -1;
    if (n > 0 && adopt_inherited(sv, inherited, n, names) != 0)
        return -1;
    int rc = plan_groups(sv);
    for (int i = sv->inherited; rc == 0 && i < sv->ngroups; i++)
        rc = sv->groups[i].unix_sock ? open_unix(sv, &sv->groups[i]) : open_ip(sv, &sv->groups[i]);
    if (rc != 0)
        return rc;
    for (int i = sv->ngroups - 1; i >= 0; i--) {
        const struct lgroup *g = &sv->groups[i];
        if (!g->tls && !g->unix_sock && g->addr.ss.ss_family != AF_UNIX)
            sv->main_group = i;
        if (g->tls && !g->unix_sock) {
            sv->quic_group = i;
            /* the port the kernel picked for 0, for --redirect-https's Location and Alt-Svc */
            cfg->tls_port = ntohs(((const struct sockaddr_in *)&g->addr.ss)->sin_port);
        }
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
static bool seed(struct server *sv)
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
    sv->steer = seed(sv);
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

static void wake_workers(struct server *sv)
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

/* HTTP/3's secrets: the SHA-256 of each --quic-secret-file's bytes (at least 32 of them), the
 * first file's first, so that every instance given the files accepts the others' Retry tokens
 * and can reset their connections (issue 38), or 32 random bytes per start without one. A
 * reload reads the files again (rotation: the new secret's file first, the old one's after).
 * 0, or -1 with the file at fault in why. */
static int h3_secrets_read(const struct config *cfg, struct quic_secrets *out, char *why,
                           size_t why_len)
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

#ifndef RINGHTTPD_NO_HTTP3
/* Once every worker's UDP socket is bound (w: the last): the program that brings each datagram
 * to the worker whose connection ID it carries (steer.h), when the group is ours alone: its
 * socket i is worker i's (bound in that order). A successor that starts beside us (a restart
 * with --reuse-port) finds the port in use and attaches nothing: its sockets sit behind ours,
 * where the program sends nothing, so new QUIC clients are ours to refuse while we drain
 * (they fall back to TCP, which the hand-over gives the successor) and our connections finish
 * here; we take the program off when we stop, and the successor has the kernel's hash until
 * it puts its own on (quic_route). */
static void quic_steer(struct server *sv, struct runtime *w)
{
    const struct config *cfg = sv->cfg;
    int err = !sv->quic_steer ? -EBUSY
              : !seed(sv)     ? -EAGAIN
                              : steer_quic_attach(w->udp->fd, (uint32_t)cfg->threads, NULL,
                                                  sv->steer_seed, &sv->cids);
    sv->quic_steer = err == 0;
    if (err < 0 && err != -EBUSY)
        errlog(ERRLOG_WARN,
               "HTTP/3: cannot route datagrams to workers by connection ID (%s): a client "
               "whose address changes may land on another worker and reconnect",
               strerror(-err));
    if (cfg->verbose)
        fprintf(stderr, "ringhttpd: HTTP/3: datagrams routed to workers by connection ID: %s\n",
                err == 0        ? "yes"
                : err == -EBUSY ? "no (another process shares the UDP port)"
                                : strerror(-err));
}

/* Once a second while serving (supervise), for a successor that started beside a predecessor
 * (quic_steer found the port shared): once the predecessor's sockets have all left the group,
 * ours are the whole group but in the order its closes reshuffled them into. A probe finds
 * each worker's index (steer_quic_order) and the program brings each connection ID to the
 * worker that made it there; connections opened meanwhile keep theirs (each worker made its
 * IDs for its own number all along). Until then the kernel's hash, as before. */
static void quic_route(struct server *sv)
{
    int n = sv->cfg->threads;
    if (sv->quic_steer || sv->started < n || !worker_runtime(sv->workers[0])->udp)
        return;
    int count = handover_count_udp_at((const struct sockaddr *)&sv->groups[sv->quic_group].addr.ss),
        err = 0;
    if (count >= 0 && count != n)
        return; /* a predecessor still drains (its program routes), or a successor came */
    int *fds = malloc((size_t)n * sizeof(*fds));
    uint32_t *order = malloc((size_t)n * sizeof(*order));
    if (count < 0)
        err = count;
    else if (!fds || !order)
        err = -ENOMEM;
    for (int i = 0; err == 0 && i < n; i++)
        fds[i] = worker_runtime(sv->workers[i])->udp->fd;
    if (err == 0 && !seed(sv))
        err = -EAGAIN;
    if (err == 0 && (err = steer_quic_order(fds, (uint32_t)n, order)) == 0)
        err = steer_quic_attach(fds[0], (uint32_t)n, order, sv->steer_seed, &sv->cids);
    free(fds);
    free(order);
    sv->quic_steer = err == 0;
    if (err == 0)
        errlog(ERRLOG_NOTICE,
               "HTTP/3: datagrams routed to workers by connection ID (the UDP port is ours "
               "alone now)");
    else if (err != -EAGAIN) /* EAGAIN: a probe's answer was unclear, next second */
        errlog_limited(&sv->steer_log, ERRLOG_WARN,
                       "HTTP/3: cannot route datagrams to workers by connection ID (%s): a "
                       "client whose address changes may land on another worker and reconnect",
                       strerror(-err));
}

/* --http3: worker w's UDP socket on the TLS port's address and its QUIC endpoint, with the
 * process's certificate pairs (read now, before the process is confined). secret is shared
 * by every worker, so a Retry token or a reset made by one is good at another. */
/* The certificate and key files of pairs for QUIC: the TLS port's (with automatic HTTPS's),
 * NULL-terminated, in *certs and *keys (one allocation: free *certs). 0 or -ENOMEM. */
static int h3_files(struct server *sv, const struct config *pairs, const char ***certs,
                    const char ***keys)
{
    struct tls_cert_files *all;
    int n;
    if (pair_list(sv, pairs, &all, &n) != 0)
        return -ENOMEM;
    const char **v = malloc(2 * ((size_t)n + 1) * sizeof(*v));
    if (!v) {
        free(all);
        return -ENOMEM;
    }
    for (int i = 0; i < n; i++) {
        v[i] = all[i].cert;
        v[n + 1 + i] = all[i].key;
    }
    v[n] = v[2 * n + 1] = NULL;
    free(all);
    *certs = v;
    *keys = v + n + 1;
    return 0;
}

/* The files of certs and keys as one string ("cert\0key\0" each), *len long; NULL without
 * memory. */
static char *h3_joined(const char *const *certs, const char *const *keys, size_t *len)
{
    size_t n = 0;
    for (int i = 0; certs[i]; i++)
        n += strlen(certs[i]) + strlen(keys[i]) + 2;
    char *out = malloc(n + 1), *p = out;
    for (int i = 0; out && certs[i]; i++) {
        p = stpcpy(p, certs[i]) + 1;
        p = stpcpy(p, keys[i]) + 1;
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

static void h3_forget(struct server *sv)
{
    h3_remember(sv, NULL, NULL, 0);
}

/* SIGHUP: the --quic-secret-file files read again for every worker's endpoint, as the ticket
 * key files are; when one cannot be read, the secrets in use stay. */
static void h3_secrets_reload(struct server *sv, const char *what)
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
    wake_workers(sv);
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
static void h3_publish(struct server *sv, const struct config *pairs, const char *what)
{
    const char **certs, **keys;
    char why[512] = "";
    if (h3_files(sv, pairs, &certs, &keys) != 0) {
        errlog(ERRLOG_ERROR, "%s: HTTP/3 certificates kept as they were: out of memory", what);
        return;
    }
    size_t len = 0;
    char *joined = h3_joined(certs, keys, &len);
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
        int rc =
            first ? quic_certs_dup(first, &c) : quic_certs_new(&c, certs, keys, why, sizeof(why));
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

static int h3_start(struct server *sv, struct worker *wk, const struct quic_secrets *secrets)
{
    struct runtime *w = worker_runtime(wk);
    const struct config *cfg = sv->cfg;
    const char **certs, **keys;
    if (h3_files(sv, cfg, &certs, &keys) != 0) {
        fprintf(stderr, "ringhttpd: HTTP/3: out of memory\n");
        return -ENOMEM;
    }
    unsigned max = cfg->http3_max_conns;
    const struct quic_settings qs = {
        .max_conns = max,
        .max_streams = 100,
        .idle_timeout_s = cfg->keepalive_timeout > 0 ? cfg->keepalive_timeout : 1,
        .retry_above = max / 2,
        .certs = certs,
        .keys = keys,
        /* read once (issue 40): the other workers' endpoints share the first one's */
        .shared = w->id > 0 && worker_quic(sv->workers[0])
                      ? quic_ep_certs(worker_quic(sv->workers[0]))
                      : NULL,
        .secrets = secrets,
        .worker = (unsigned)w->id,
        .workers = (unsigned)cfg->threads,
        .ids = &sv->cids,
        .cc = quic_cc_of(cfg->quic_cc),
    };
    char why[512] = "";
    /* The options' bounds are QUIC-LB's, which cid.h owns: checked here, where both are seen. */
    _Static_assert(CONFIG_QUIC_SID_MAX == CID_SID_MAX &&
                       CONFIG_QUIC_ROTATION_MAX == CID_ROTATION_MAX,
                   "--quic-server-id's bounds are cid.h's");
    if (w->id == 0 &&
        cid_layout_init(&sv->cids, cfg->quic_sid, cfg->quic_sid_len, cfg->quic_sid_rotation) != 0)
        return -EINVAL; /* never: the option's setter checked the bounds */
    /* HTTP/3 on the first TLS address: a worker has one UDP socket (README: Listening) */
    const struct addr *a = &sv->groups[sv->quic_group].addr;
    /* Before the first of ours binds: whether the port's group will be ours alone. */
    if (w->id == 0)
        sv->quic_steer = udp_addr_in_use((const struct sockaddr *)&a->ss, a->len, !a->dual) == 0;
    int fd = udp_socket_open((const struct sockaddr *)&a->ss, a->len, !a->dual);
    if (fd < 0) {
        fprintf(stderr, "ringhttpd: HTTP/3: cannot bind UDP %s: %s\n",
                sv->groups[sv->quic_group].url, strerror(-fd));
        free(certs);
        return fd;
    }
    int rc;
    struct quic_ep *quic = NULL;
    w->udp = calloc(1, sizeof(*w->udp));
    if (!w->udp) {
        close(fd);
        rc = -ENOMEM;
    } else if ((rc = udp_port_init(w->udp, fd, cfg->http3_gso, cfg->http3_gro, NULL, NULL)) == 0 &&
               (rc = quic_ep_new(&quic, w->udp, &qs, &h3_app, w, why, sizeof(why))) != 0) {
        fprintf(stderr, "ringhttpd: %s\n", why);
    }
    if (rc == 0 && w->id == 0) { /* what the first reload may reuse */
        size_t len = 0;
        char *joined = h3_joined(certs, keys, &len);
        h3_remember(sv, quic_ep_certs(quic), joined, len);
    }
    free(certs); /* quic_ep_new read the files */
    worker_set_quic(wk, quic);
    if (rc == 0) {
        char alt[48];
        rc = serve_alt_svc(w, alt, h3_alt_svc(alt, sizeof(alt), cfg->tls_port));
        w->h3ops = &h3_worker_ops;
    }
    if (rc == 0 && w->id == cfg->threads - 1)
        quic_steer(sv, w);
    if (rc == 0 && w->id == 0 && cfg->verbose && cfg->quic_server_id)
        fprintf(stderr,
                "ringhttpd: HTTP/3: connection IDs carry server ID %s (QUIC-LB plaintext, "
                "config rotation %u, %u bytes)\n",
                cfg->quic_server_id, cfg->quic_sid_rotation, sv->cids.len);
    if (rc == 0 && w->id == 0 && cfg->verbose)
        fprintf(stderr, "ringhttpd: HTTP/3: congestion control %s, paced\n", quic_cc_name(qs.cc));
    if (rc == 0 && w->id == 0 && cfg->verbose)
        fprintf(stderr, "ringhttpd: HTTP/3: UDP GSO %s, GRO %s\n",
                w->udp->gso       ? "yes"
                : !cfg->http3_gso ? "no (--http3-gso off)"
                                  : "no (the kernel refuses UDP_SEGMENT)",
                w->udp->gro       ? "yes"
                : !cfg->http3_gro ? "no (--http3-gro off)"
                                  : "no (the kernel refuses UDP_GRO)");
    return rc;
}

#else
/* A build without HTTP/3 (make static: Debian ships no static p11-kit for GnuTLS). */
static void h3_forget(struct server *sv)
{
    (void)sv;
}

static void h3_publish(struct server *sv, const struct config *pairs, const char *what)
{
    (void)sv, (void)pairs, (void)what;
}

static void h3_secrets_reload(struct server *sv, const char *what)
{
    (void)sv, (void)what;
}

static void quic_route(struct server *sv)
{
    (void)sv;
}

static int h3_start(struct server *sv, struct worker *w, const struct quic_secrets *secrets)
{
    (void)secrets;
    if (worker_runtime(w)->id == 0)
        errlog(ERRLOG_WARN,
               "HTTP/3: not in this build (made with HTTP3=no, as make static is; the "
               "package's binary and the container image have it): HTTPS on TCP port %u only",
               sv->cfg->tls_port);
    return 0;
}
#endif

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
    for (int i = 0; i < n; i++)
        tls_port_init(&sv->tls_ports[i], ctxs[i]);
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
        if (rc == 0 && acme_ondemand_wanted(sv->cfg))
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
    if (sv->cfg->tls && (renew || !same_pairs(fresh, running))) {
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
    wake_workers(sv);
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
                quic_route(sv);
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
    int inited = 0; /* workers set up; sv.started of them run */
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
    int lrc = tcp_cc_check(cfg);
    if (lrc == 0)
        lrc = open_listeners(&sv);
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
        int err = worker_new(&sv.workers[inited], inited, cfg, sv.eng, &sv.caps, ls,
                             (unsigned)sv.ngroups, &sv.sites);
        if (err < 0) {
            fprintf(stderr, "ringhttpd: starting worker %d (%s): %s\n", inited, sv.eng->name,
                    strerror(-err));
            goto stop;
        }
        struct runtime *rt = worker_runtime(sv.workers[inited]);
        rt->alog = sv.alog;
        /* systemd's sockets are not steered, nor are a balancer's connections (steer_from):
         * one client's connections reach any worker, so the workers count clients in one
         * guard (issue 38: behind PROXY headers, --limit-conn N let a client hold N per
         * worker) */
        if ((sv.inherited || cfg->num_proxy_from || sv.any_proxy) &&
            ((!sv.guard && !(sv.guard = guard_shared_new())) || guard_share(rt, sv.guard) < 0)) {
            fprintf(stderr, "ringhttpd: starting worker %d: the per-client limits: %s\n", inited,
                    strerror(ENOMEM));
            worker_free(sv.workers[inited]); /* set up, never counted in inited */
            sv.workers[inited] = NULL;
            goto stop;
        }
        if (sv.acme) /* HTTP-01 answers, read through the worker's own slot */
            rt->acme = tokens_reader(&sv.tokens, inited);
        if (sv.ondemand) { /* its TLS hook routes names by the worker's sites */
            ondemand_reader(sv.ondemand, inited)->rt = rt;
            worker_set_ondemand(sv.workers[inited], ondemand_gen(sv.ondemand));
        }
        if (cfg->tls && cfg->http3 && sv.quic_group >= 0 &&
            h3_start(&sv, sv.workers[inited], &h3_secrets) != 0) {
            worker_free(sv.workers[inited]); /* set up, never counted in inited */
            sv.workers[inited] = NULL;
            goto stop;
        }
        if (seams->proto) /* the seam's test protocol stands in for HTTP/2 */
            rt->h2 = seams->proto;
    }
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
                    g == sv.quic_group && sv.workers[0] && worker_quic(sv.workers[0])
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
    /* Every worker's UDP socket stays in the port's group until all have drained: a socket
     * that leaves moves another into its place, and the connection-ID program would send a
     * busy worker's datagrams elsewhere. Then the program goes, so that a successor sharing
     * the port (its sockets behind ours) gets the kernel's hash, not our indices. */
    if (sv.quic_steer && sv.started && worker_runtime(sv.workers[0])->udp)
        steer_detach(worker_runtime(sv.workers[0])->udp->fd);
    for (int i = 0; i < sv.started; i++)
        worker_free(sv.workers[i]);
    for (int i = sv.started; i < inited; i++) /* set up, never started */
        worker_free(sv.workers[i]);
    guard_shared_free(sv.guard); /* after every worker's last conn_closed */
    sv.guard = NULL;
out:
    ondemand_free(sv.ondemand); /* after the workers: their TLS contexts ask it */
    acme_free(sv.acme);
    if (sv.tokens_made)
        tokens_fini(&sv.tokens);
    for (int g = 0; g < sv.ngroups; g++) {
        struct lgroup *lg = &sv.groups[g];
        for (int i = 0; i < cfg->threads; i++)
            if (lg->fds[i] >= 0)
                close(lg->fds[i]);
        unix_remove(lg);
        if (lg->claim >= 0)
            close(lg->claim);
        free(lg->fds);
        handover_fini(&lg->ho);
    }
    tls_stop(&sv);
    if (sv.notify_fd >= 0)
        close(sv.notify_fd);
    free(sv.workers);
    site_slot_fini(&sv.sites);
    if (sv.alog)
        accesslog_close(sv.alog, 1000 * (int)cfg->drain_timeout);
    return rc;
}
