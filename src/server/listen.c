/* Listeners: the --bind plan, IP and Unix sockets, systemd's; see listen.h. */
#include "server/listen.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pwd.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "config/config.h"
#include "rt/errlog.h"
#include "server/handover.h"
#include "server/server_int.h"
#include "server/systemd.h"

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
    g->udp = -1;
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
        if (g->tls && !g->unix_sock) /* the port the kernel picked for 0: the first TLS
                                      * entry's, for --redirect-https's Location */
            cfg->tls_port = ntohs(((const struct sockaddr_in *)&g->addr.ss)->sin_port);
    }
    return 0;
}

int listen_open(struct server *sv)
{
    int rc = tcp_cc_check(sv->cfg);
    return rc == 0 ? open_listeners(sv) : rc;
}

void listen_close(struct server *sv)
{
    for (int g = 0; g < sv->ngroups; g++) {
        struct lgroup *lg = &sv->groups[g];
        for (int i = 0; i < sv->cfg->threads; i++)
            if (lg->fds[i] >= 0)
                close(lg->fds[i]);
        unix_remove(lg);
        if (lg->claim >= 0)
            close(lg->claim);
        free(lg->fds);
        handover_fini(&lg->ho);
    }
}
