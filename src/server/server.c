/* Listeners, workers, signals, reload and drain; see server.h. */
#include "server/server.h"

#include <arpa/inet.h>
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
#include <sys/un.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "config/config.h"
#include "engine/caps.h"
#include "engine/engine.h"
#include "engine/udp.h"
#include "http/h3/h3.h"
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
#include "site/site.h"
#include "server/worker.h"
#include "http/serve.h"
#include "server/systemd.h"
#include "server/acme/acme.h"
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

/* --bind's address for a message ("*" for the default, both families). */
static const char *bind_name(const struct config *cfg)
{
    return cfg->bind ? cfg->bind : "*";
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
    snprintf(out, len, "%s://%s%s%s:%u/", scheme, a->ss.ss_family == AF_INET6 ? "[" : "", host,
             a->ss.ss_family == AF_INET6 ? "]" : "", port);
}

/* The process's view of its listeners and workers while it runs. */
struct server {
    struct config *cfg;
    const struct engine_ops *eng;
    struct engine_caps caps; /* probed once, read by every worker until they are joined */
    struct addr addr;        /* what the first listener is bound to */
    char url[INET6_ADDRSTRLEN + 16];
    int *listeners; /* one per worker; a worker owns (and closes) its own once started */
    int nlisten;
    int inherited;           /* systemd passed this many listeners (0: we opened our own) */
    int claims[2];           /* port_in_use's claims on the HTTP and TLS addresses, or -1 */
    struct worker **workers; /* cfg->threads of them; the first `inited` made */
    int started;
    struct site_slot sites;
    int notify_fd;
    struct accesslog *alog;       /* --access-log, or NULL */
    struct metrics *metrics;      /* --metrics, or NULL */
    struct handover handover;     /* our listeners' release to a successor on the port */
    struct handover tls_handover; /* ... and on the TLS port (its own reuseport group) */
    /* --limit-conn, --limit-req: each client address steered to one worker (steer.h) */
    bool steer;
    bool seeded; /* steer_seed drawn: TCP's and QUIC's programs hash addresses with it */
    uint32_t steer_seed;
    struct guard *guard; /* socket activation: the workers' one guard (rt/guard.h), or NULL */
    bool quic_steer;     /* the UDP port's group is ours alone: route by connection ID */
    struct errlog_limit steer_log;
    /* --tls-port: a second listener per worker, and the contexts a worker adopts */
    struct tls_keys *tls_keys; /* the ticket secret every context derives its keys from */
    struct addr tls_addr;
    char tls_url[INET6_ADDRSTRLEN + 16];
    int *tls_listeners;
    struct tls_port *tls_ports; /* one per worker: its TLS listener's transport context */
    /* --acme-email (issue 27): the ACME thread, the challenge answers the workers read, and
     * the flag its hook raises when a certificate on disk is new (supervise makes it live) */
    struct acme *acme;
    struct acme_tokens tokens;
    bool tokens_made;
    atomic_bool acme_changed;
    /* who serves, for messages about what that user may read ("nobody (uid 65534)"), and
     * whether Landlock confines it (a reload cannot widen that); set by confine */
    char who[96];
    bool landlocked;
};

/* The pairs are pairs's (the start's configuration, or a re-read file's) followed by the
 * certificates automatic HTTPS keeps (issue 27), into all; the protocol settings are always
 * the start's (the workers' protocol layers were made for them). */
static struct tls_settings tls_settings(struct server *sv, const struct config *pairs,
                                        struct tls_cert_files all[TLS_MAX_CERTS])
{
    int n = pairs->num_tls_certs;
    memcpy(all, pairs->tls_certs, (size_t)n * sizeof(all[0]));
    if (sv->acme)
        acme_pairs(sv->acme, all, &n, TLS_MAX_CERTS - 1);
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
 * -errno with the reason in why (the file at fault). Warnings (an expired certificate) are
 * logged once. */
static int tls_load(struct server *sv, const struct config *pairs, struct tls_ctx **out, char *why,
                    size_t why_len)
{
    struct tls_cert_files all[TLS_MAX_CERTS];
    struct tls_settings s = tls_settings(sv, pairs, all);
    int n = sv->cfg->threads, rc = 0, i;
    for (i = 0; i < n && rc == 0; i++) {
        if (sv->acme) /* TLS-ALPN-01: each worker's context reads the table through its slot */
            s.challenge = (struct tls_challenge){tokens_alpn, tokens_reader(&sv->tokens, i)};
        rc = tls_ctx_new(&s, sv->tls_keys, &out[i], why, why_len);
    }
    if (rc != 0) {
        for (int j = 0; j < i - 1; j++)
            tls_ctx_put(out[j]);
        return rc;
    }
    const char *warn = tls_ctx_warnings(out[0]);
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
static void listen_failed(const struct config *cfg, uint16_t port, bool tls, int err)
{
    const char *which = tls ? " (--tls-port)" : "";
    if (err == -EACCES && port < 1024)
        fprintf(stderr,
                "ringhttpd: cannot listen on %s port %u%s: %s (a port below 1024 needs "
                "privilege: start as root with --user USER, which drops it after the bind, or "
                "grant CAP_NET_BIND_SERVICE: 'setcap cap_net_bind_service=+ep' on the binary, "
                "or AmbientCapabilities=CAP_NET_BIND_SERVICE in its systemd unit)\n",
                bind_name(cfg), port, which, strerror(-err));
    else if (err == -EADDRINUSE)
        fprintf(stderr,
                "ringhttpd: cannot listen on %s port %u%s: %s (another process serves it; "
                "--reuse-port shares it with a ringhttpd, for a zero-downtime restart)\n",
                bind_name(cfg), port, which, strerror(-err));
    else
        fprintf(stderr, "ringhttpd: cannot listen on %s port %u%s: %s\n", bind_name(cfg), port,
                which, strerror(-err));
}

/* The TLS listeners, one per worker on --bind's address and --tls-port (the kernel's pick
 * for 0, shared by every worker's). */
static int open_tls_listeners(struct server *sv)
{
    struct config *cfg = sv->cfg;
    if (parse_addr(cfg->bind, cfg->tls_port, &sv->tls_addr) != 0)
        return -2; /* open_listeners said why */
    int err;
    if (cfg->tls_port != 0 && !cfg->reuse_port &&
        (err = port_in_use(&sv->tls_addr, &sv->claims[1])) == -EADDRINUSE) {
        listen_failed(cfg, cfg->tls_port, true, err);
        return -1;
    }
    for (int i = 0; i < cfg->threads; i++) {
        int fd = open_listener(&sv->tls_addr, (int)cfg->header_timeout, (int)cfg->send_lowat,
                               cfg->tcp_cc);
        if (fd < 0) {
            listen_failed(cfg, cfg->tls_port, true, fd);
            return -1;
        }
        sv->tls_listeners[i] = fd;
        if (i == 0 &&
            getsockname(fd, (struct sockaddr *)&sv->tls_addr.ss, &sv->tls_addr.len) != 0) {
            fprintf(stderr, "ringhttpd: getsockname: %s\n", strerror(errno));
            return -1;
        }
    }
    if (cfg->reuse_port) /* as on the HTTP port: a finished predecessor's steering goes */
        handover_join(sv->tls_listeners[0]);
    format_addr(&sv->tls_addr, "https", sv->tls_url, sizeof(sv->tls_url));
    /* the port the kernel picked for 0, for --redirect-https's Location */
    cfg->tls_port = ntohs(((const struct sockaddr_in *)&sv->tls_addr.ss)->sin_port);
    return 0;
}

/* Opens one listener per worker, or spreads the inherited ones over the workers (each worker
 * gets its own dup, so it can close it in a drain without pulling it from under another). */
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
    if (n > 0) {
        for (int i = 0; i < n; i++) /* best effort: the .socket unit may have set its own */
            tune_listener(inherited[i], (int)cfg->header_timeout, (int)cfg->send_lowat,
                          cfg->tcp_cc);
        sv->addr.len = sizeof(sv->addr.ss);
        getsockname(inherited[0], (struct sockaddr *)&sv->addr.ss, &sv->addr.len);
        for (; sv->nlisten < cfg->threads; sv->nlisten++) {
            int fd = fcntl(inherited[sv->nlisten % n], F_DUPFD_CLOEXEC, 0);
            if (fd < 0) {
                fprintf(stderr, "ringhttpd: socket activation: dup: %s\n", strerror(errno));
                break;
            }
            sv->listeners[sv->nlisten] = fd;
        }
        for (int i = 0; i < n; i++)
            close(inherited[i]);
        if (cfg->verbose)
            fprintf(stderr, "ringhttpd: socket activation: %d socket%s%s%s over %d workers\n", n,
                    n == 1 ? "" : "s", names[0] ? " named " : "", names, cfg->threads);
        return sv->nlisten == cfg->threads ? 0 : -1;
    }

    if (parse_addr(cfg->bind, cfg->port, &sv->addr) != 0) {
        fprintf(stderr, "ringhttpd: --bind: '%s' is not an IPv4 or IPv6 address\n", cfg->bind);
        return -2;
    }
    int err = 0;
    if (cfg->port != 0 && !cfg->reuse_port &&
        (err = port_in_use(&sv->addr, &sv->claims[0])) == -EADDRINUSE) {
        listen_failed(cfg, cfg->port, false, err);
        return -1;
    }
    for (; sv->nlisten < cfg->threads; sv->nlisten++) {
        int fd =
            open_listener(&sv->addr, (int)cfg->header_timeout, (int)cfg->send_lowat, cfg->tcp_cc);
        if (fd < 0) {
            listen_failed(cfg, cfg->port, false, fd);
            return -1;
        }
        sv->listeners[sv->nlisten] = fd;
        if (sv->nlisten == 0 &&
            getsockname(fd, (struct sockaddr *)&sv->addr.ss, &sv->addr.len) != 0) {
            sv->nlisten++;
            fprintf(stderr, "ringhttpd: getsockname: %s\n", strerror(errno));
            return -1; /* port 0: the others must bind the port the kernel picked */
        }
    }
    if (cfg->reuse_port) /* a finished predecessor's steering would send us all to one worker */
        handover_join(sv->listeners[0]);
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
    int count = handover_count_listeners(a->ss.ss_family, port);
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
    uint16_t port = ((const struct sockaddr_in *)&a->ss)->sin_port; /* same for v6 */
    int n = sv->cfg->threads;
    if (fd < 0 || handover_count_listeners(a->ss.ss_family, port) != n)
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
    steer_clients_on(sv, &sv->addr, worker_listener_fd(sv->workers[0], 0));
    if (sv->cfg->tls)
        steer_clients_on(sv, &sv->tls_addr, worker_listener_fd(sv->workers[0], 1));
}

/* --limit-conn or --limit-req in force from cfg on (the start's, or a reload's that adds
 * them): steering goes on (steer_clients), and stays on. */
static void steer_from(struct server *sv, const struct config *cfg)
{
    /* Behind a balancer that sends PROXY headers, the source address is the balancer's: to
     * steer by it would bring every client of one balancer to one worker. The kernel's hash
     * spreads them, and --limit-conn and --limit-req count a proxied client per worker. */
    if (sv->steer || sv->inherited || !config_limits_clients(cfg) || sv->cfg->num_proxy_from)
        return;
    sv->steer = seed(sv);
    steer_clients(sv);
}

/* The drain's start: on each port, steer new connections to a successor, if one listens, before
 * our listeners begin to close (each worker releases its own through the port's handover).
 * systemd's sockets outlive us with their queue: nothing to hand over there. The TLS port is
 * each worker's listener 1 (server_run) and always ours. */
static enum worker_stop begin_handover(struct server *sv)
{
    int theirs = 0;
    if (!sv->inherited && sv->started)
        theirs += steer_port(sv, &sv->handover, &sv->addr, sv->nlisten,
                             worker_listener_fd(sv->workers[0], 0));
    if (sv->cfg->tls && sv->started)
        theirs += steer_port(sv, &sv->tls_handover, &sv->tls_addr, sv->cfg->threads,
                             worker_listener_fd(sv->workers[0], 1));
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

/* HTTP/3's secret: the SHA-256 of --quic-secret-file's bytes (at least 32 of them), so that
 * every instance given the file accepts the others' Retry tokens and can reset their
 * connections (issue 38), or 32 random bytes per start without it. 0, or -1 after saying why. */
static int h3_secret_make(const struct config *cfg, uint8_t secret[32])
{
    if (!cfg->quic_secret_file) {
        if (getrandom(secret, 32, 0) == 32)
            return 0;
        fprintf(stderr, "ringhttpd: HTTP/3: no random secret: %s\n", strerror(errno));
        return -1;
    }
    uint8_t buf[4096];
    ssize_t n = -1;
    int fd = open(cfg->quic_secret_file, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        n = read(fd, buf, sizeof(buf));
        close(fd);
    }
    if (n < 32) {
        fprintf(stderr, "ringhttpd: --quic-secret-file '%s': %s\n", cfg->quic_secret_file,
                n < 0 ? strerror(errno) : "needs at least 32 bytes (openssl rand 32 > FILE)");
        explicit_bzero(buf, sizeof(buf));
        return -1;
    }
    file_digest_mem(buf, (uint64_t)n, secret, 32);
    explicit_bzero(buf, sizeof(buf));
    return 0;
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
              : !seed(sv)
                  ? -EAGAIN
                  : steer_quic_attach(w->udp->fd, (uint32_t)cfg->threads, NULL, sv->steer_seed);
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
    uint16_t port = ((const struct sockaddr_in *)&sv->tls_addr.ss)->sin_port; /* same for v6 */
    int count = handover_count_udp(sv->tls_addr.ss.ss_family, port), err = 0;
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
        err = steer_quic_attach(fds[0], (uint32_t)n, order, sv->steer_seed);
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
 * NULL-terminated. */
static void h3_files(struct server *sv, const struct config *pairs,
                     const char *certs[TLS_MAX_CERTS + 1], const char *keys[TLS_MAX_CERTS + 1])
{
    struct tls_cert_files all[TLS_MAX_CERTS];
    struct tls_settings s = tls_settings(sv, pairs, all);
    int i = 0;
    for (; i < s.num_certs; i++) {
        certs[i] = all[i].cert;
        keys[i] = all[i].key;
    }
    certs[i] = keys[i] = NULL;
}

/* A reload's certificates for every worker's QUIC endpoint, as tls_port_publish does for the
 * TLS port: new handshakes get them, connections keep theirs. Read once per worker (each
 * counts its set on its own thread); when they cannot be read the previous ones stay. */
static void h3_publish(struct server *sv, const struct config *pairs, const char *what)
{
    const char *certs[TLS_MAX_CERTS + 1], *keys[TLS_MAX_CERTS + 1];
    char why[512] = "";
    h3_files(sv, pairs, certs, keys);
    for (int i = 0; i < sv->cfg->threads; i++) {
        struct quic_certs *c;
        if (!worker_quic(sv->workers[i]))
            continue;
        if (quic_certs_new(&c, certs, keys, why, sizeof(why)) != 0) {
            errlog(ERRLOG_ERROR, "%s: HTTP/3 certificates kept as they were: %s", what, why);
            return;
        }
        quic_ep_publish(worker_quic(sv->workers[i]), c);
    }
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

static int h3_start(struct server *sv, struct worker *wk, const uint8_t *secret)
{
    struct runtime *w = worker_runtime(wk);
    const struct config *cfg = sv->cfg;
    const char *certs[TLS_MAX_CERTS + 1], *keys[TLS_MAX_CERTS + 1];
    h3_files(sv, cfg, certs, keys);
    unsigned max = cfg->http3_max_conns;
    const struct quic_settings qs = {
        .max_conns = max,
        .max_streams = 100,
        .idle_timeout_s = cfg->keepalive_timeout > 0 ? cfg->keepalive_timeout : 1,
        .retry_above = max / 2,
        .certs = certs,
        .keys = keys,
        .secret = secret,
        .worker = (unsigned)w->id,
        .workers = (unsigned)cfg->threads,
        .cc = quic_cc_of(cfg->quic_cc),
    };
    char why[512] = "";
    /* Before the first of ours binds: whether the port's group will be ours alone. */
    if (w->id == 0)
        sv->quic_steer = udp_addr_in_use((const struct sockaddr *)&sv->tls_addr.ss,
                                         sv->tls_addr.len, !sv->tls_addr.dual) == 0;
    int fd = udp_socket_open((const struct sockaddr *)&sv->tls_addr.ss, sv->tls_addr.len,
                             !sv->tls_addr.dual);
    if (fd < 0) {
        fprintf(stderr, "ringhttpd: HTTP/3: cannot bind UDP %s port %u: %s\n", bind_name(cfg),
                cfg->tls_port, strerror(-fd));
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
    worker_set_quic(wk, quic);
    if (rc == 0) {
        char alt[48];
        rc = serve_alt_svc(w, alt, h3_alt_svc(alt, sizeof(alt), cfg->tls_port));
        w->h3ops = &h3_worker_ops;
    }
    if (rc == 0 && w->id == cfg->threads - 1)
        quic_steer(sv, w);
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
static void h3_publish(struct server *sv, const struct config *pairs, const char *what)
{
    (void)sv, (void)pairs, (void)what;
}

static void quic_route(struct server *sv)
{
    (void)sv;
}

static int h3_start(struct server *sv, struct worker *w, const uint8_t *secret)
{
    (void)secret;
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
    sv->tls_listeners = malloc((size_t)n * sizeof(*sv->tls_listeners));
    sv->tls_ports = calloc((size_t)n, sizeof(*sv->tls_ports));
    struct tls_ctx **ctxs = calloc((size_t)n, sizeof(*ctxs));
    if (!sv->tls_listeners || !sv->tls_ports || !ctxs) {
        free(ctxs);
        fprintf(stderr, "ringhttpd: out of memory\n");
        return -1;
    }
    for (int i = 0; i < n; i++)
        sv->tls_listeners[i] = -1;
    if ((rc = tls_keys_new(&sv->tls_keys)) != 0) {
        free(ctxs);
        fprintf(stderr, "ringhttpd: TLS: no random ticket secret: %s\n", strerror(-rc));
        return -1;
    }
    if ((rc = tls_load(sv, sv->cfg, ctxs, why, sizeof(why))) != 0) {
        free(ctxs);
        fprintf(stderr, "ringhttpd: %s\n", why);
        return -1;
    }
    for (int i = 0; i < n; i++)
        tls_port_init(&sv->tls_ports[i], ctxs[i]);
    free(ctxs);
    return open_tls_listeners(sv);
}

/* The ACME thread's hook: a certificate on disk is new. Only a flag: supervise, on the main
 * thread, makes the contexts (it must not block the ACME thread on the workers, nor race a
 * SIGHUP's reload). */
static void acme_on_change(void *arg)
{
    struct server *sv = arg;
    atomic_store(&sv->acme_changed, true);
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
    } else {
        snprintf(why, sizeof(why), "acme: out of memory");
    }
    if (rc == 0)
        return 0;
    fprintf(stderr, "ringhttpd: %s\n", why);
    return -1;
}

/* After the workers are joined: their ports' contexts and buffers, listeners never handed
 * over, the secret. */
static void tls_stop(struct server *sv)
{
    for (int i = 0; sv->tls_ports && i < sv->cfg->threads; i++)
        tls_port_fini(&sv->tls_ports[i]);
    for (int i = 0; sv->tls_listeners && i < sv->cfg->threads; i++)
        if (sv->tls_listeners[i] >= 0)
            close(sv->tls_listeners[i]);
    free(sv->tls_ports);
    free(sv->tls_listeners);
    tls_keys_free(sv->tls_keys);
}

/* Whether two configurations list the same pairs, for the same names, in the same order. */
static bool same_pairs(const struct config *a, const struct config *b)
{
    if (a->num_tls_certs != b->num_tls_certs)
        return false;
    for (int i = 0; i < a->num_tls_certs; i++) {
        const struct tls_cert_files *x = &a->tls_certs[i], *y = &b->tls_certs[i];
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
    if (tls_load(sv, fresh, ctxs, why, sizeof(why)) == 0)
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
    if (!ctxs || tls_load(sv, running, ctxs, why, sizeof(why)) != 0) {
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
    int rc = site_open(sv->cfg, &s, why, sizeof(why));
    if (rc == 0 && (rc = site_check_roots(s, sv->who, why, sizeof(why))) != 0)
        site_put(s);
    if (rc != 0)
        errlog(ERRLOG_ERROR, "%s failed, still serving the previous configuration: %s%s", what, why,
               rc == -EACCES && sv->landlocked && !strstr(why, "Landlock")
                   ? " (under Landlock, a file outside the directories the start's configuration "
                     "named needs a restart)"
                   : "");
    else if (publish(sv, s, true, what))
        errlog(ERRLOG_NOTICE, "%s: serving %s", what, config_serves(s->owned ? s->owned : sv->cfg));
    systemd_notify(sv->notify_fd, "READY=1\nSTATUS=serving %s on %s", config_serves(sv->cfg),
                   sv->url);
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
    int rc = site_open(sv->cfg, &s, why, sizeof(why));
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
        errlog(ERRLOG_NOTICE, "document root of %s changed: serving the new one",
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

int server_run(struct config *cfg, const struct server_seams *seams)
{
    const struct server_seams none = {0};
    seams = seams ? seams : &none;
    struct server sv = {.cfg = cfg, .notify_fd = -1, .claims = {-1, -1}};
    int inited = 0; /* workers set up; sv.started of them run */
    int rc = 1, stop_signals[] = {SIGINT, SIGTERM, SIGQUIT, SIGHUP, SIGUSR1, SIGUSR2};
    sigset_t signals;
    struct site *first = site_adopt(cfg);

    if (!first) {
        fprintf(stderr, "ringhttpd: out of memory\n");
        return 1;
    }
    site_slot_init(&sv.sites, first);
    handover_init(&sv.handover, 0);
    handover_init(&sv.tls_handover, 0);
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
    sv.listeners = calloc((size_t)cfg->threads, sizeof(*sv.listeners));
    if (!sv.workers || !sv.listeners) {
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
    format_addr(&sv.addr, "http", sv.url, sizeof(sv.url));
    if (cfg->verbose) {
        char cc[16] = "?";
        socklen_t cclen = sizeof(cc) - 1;
        (void)getsockopt(sv.listeners[0], IPPROTO_TCP, TCP_CONGESTION, cc, &cclen);
        fprintf(stderr, "ringhttpd: TCP congestion control: %s (%s)\n", cc,
                cfg->tcp_cc ? "--tcp-cc" : "the host's default");
    }
    if (cfg->acme_email && acme_setup(&sv) != 0)
        goto out;
    if (cfg->tls && (lrc = tls_start(&sv)) < 0) {
        rc = lrc == -2 ? 2 : 1;
        goto out;
    }
    sv.handover.ours = sv.nlisten; /* before any worker thread exists */
    sv.tls_handover.ours = cfg->tls ? cfg->threads : 0;
    if (!(sv.eng = engine_choose(cfg->engine, cfg->verbose, &sv.caps)))
        goto out;
    uint8_t h3_secret[32];
    if (cfg->tls && cfg->http3 && h3_secret_make(cfg, h3_secret) != 0)
        goto out;

    /* Every worker is set up before the process is confined (Landlock, --user): an engine reads
     * limits under /proc and opens /dev/null. Their threads start after, and so inherit it. */
    for (; inited < cfg->threads; inited++) {
        /* The HTTP port's listener; a transport's port (TLS) adds its own here. */
        struct listener ls[LISTEN_MAX] = {{.fd = sv.listeners[inited],
                                           .owned = sv.inherited == 0,
                                           .xport = seams->xport,
                                           .handover = &sv.handover}};
        unsigned nls = 1;
        sv.listeners[inited] = -1; /* the worker's now, even when it fails */
        if (cfg->tls) {
            ls[nls++] = (struct listener){.fd = sv.tls_listeners[inited],
                                          .owned = true,
                                          .xport = &transport_tls,
                                          .xport_ctx = &sv.tls_ports[inited],
                                          .handover = &sv.tls_handover};
            sv.tls_listeners[inited] = -1;
        }
        int err =
            worker_new(&sv.workers[inited], inited, cfg, sv.eng, &sv.caps, ls, nls, &sv.sites);
        if (err < 0) {
            fprintf(stderr, "ringhttpd: starting worker %d (%s): %s\n", inited, sv.eng->name,
                    strerror(-err));
            goto stop;
        }
        struct runtime *rt = worker_runtime(sv.workers[inited]);
        rt->alog = sv.alog;
        /* systemd's sockets are not steered (steer_from): one client's connections reach any
         * worker, so the workers count clients in one guard */
        if (sv.inherited &&
            ((!sv.guard && !(sv.guard = guard_shared_new())) || guard_share(rt, sv.guard) < 0)) {
            fprintf(stderr, "ringhttpd: starting worker %d: the per-client limits: %s\n", inited,
                    strerror(ENOMEM));
            worker_free(sv.workers[inited]); /* set up, never counted in inited */
            sv.workers[inited] = NULL;
            goto stop;
        }
        if (sv.acme) /* HTTP-01 answers, read through the worker's own slot */
            rt->acme = tokens_reader(&sv.tokens, inited);
        if (cfg->tls && cfg->http3 && h3_start(&sv, sv.workers[inited], h3_secret) != 0) {
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
    if (sv.metrics && sv.acme)
        metrics_add(sv.metrics, &acme_source, sv.acme);
    /* Before the process is confined: Landlock binds the calling thread and the threads it
     * makes after, so the ACME thread keeps what it needs that a worker must not have (the
     * state directory's writes, the system's CA bundle, the resolver's files); --user applies
     * to it as to every thread. Issuance never delays the start: it runs beside the workers,
     * and its first challenge waits for the listeners, which are open already. */
    if (sv.acme && (lrc = acme_start(sv.acme)) != 0) {
        fprintf(stderr, "ringhttpd: acme: cannot start its thread: %s\n", strerror(-lrc));
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
    if (cfg->tls) /* HTTP/3 only when a UDP socket is open: not when the build left it out */
        fprintf(stderr, "ringhttpd: listening on %s (TLS%s)\n", sv.tls_url,
                sv.workers[0] && worker_quic(sv.workers[0]) ? "; HTTP/3 on UDP" : "");
    fprintf(stderr, "ringhttpd: listening on %s (engine %s, %d thread%s)%s\n", sv.url, sv.eng->name,
            cfg->threads, cfg->threads == 1 ? "" : "s",
            sv.inherited ? " on sockets from systemd" : "");
    systemd_notify(sv.notify_fd, "READY=1\nSTATUS=serving %s on %s", config_serves(cfg), sv.url);
    supervise(&sv, &signals);
    rc = 0;
stop:
    if (sv.metrics)
        metrics_stop(sv.metrics);
    acme_free(sv.acme); /* before the workers go: its table waits on their slots */
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
    acme_free(sv.acme);
    if (sv.tokens_made)
        tokens_fini(&sv.tokens);
    for (int i = 0; i < sv.nlisten; i++)
        if (sv.listeners && sv.listeners[i] >= 0)
            close(sv.listeners[i]);
    tls_stop(&sv);
    if (sv.notify_fd >= 0)
        close(sv.notify_fd);
    for (int i = 0; i < 2; i++)
        if (sv.claims[i] >= 0)
            close(sv.claims[i]);
    free(sv.listeners);
    free(sv.workers);
    site_slot_fini(&sv.sites);
    handover_fini(&sv.handover);
    handover_fini(&sv.tls_handover);
    if (sv.alog)
        accesslog_close(sv.alog, 1000 * (int)cfg->drain_timeout);
    return rc;
}
