/* Listeners, workers, signals, reload and drain; see server.h. */
#include "server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>

#include "config.h"
#include "engine/caps.h"
#include "engine/engine.h"
#include "privs.h"
#include "proto.h"
#include "rt/accesslog.h"
#include "rt/errlog.h"
#include "rt/metrics.h"
#include "rt/site.h"
#include "rt/worker.h"
#include "systemd.h"
#include "transport.h"

struct addr {
    struct sockaddr_storage ss;
    socklen_t len;
};

static int parse_addr(const char *host, uint16_t port, struct addr *a)
{
    memset(a, 0, sizeof(*a));
    struct sockaddr_in *v4 = (struct sockaddr_in *)&a->ss;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&a->ss;
    char buf[INET6_ADDRSTRLEN + 2];
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
static int tune_listener(int fd, int defer_secs, int lowat)
{
    int one = 1;
    if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) != 0 ||
        setsockopt(fd, IPPROTO_TCP, TCP_DEFER_ACCEPT, &defer_secs, sizeof(defer_secs)) != 0 ||
        (lowat > 0 && setsockopt(fd, IPPROTO_TCP, TCP_NOTSENT_LOWAT, &lowat, sizeof(lowat)) != 0))
        return -errno;
    return 0;
}

static int open_listener(const struct addr *a, int defer_secs, int lowat)
{
    int one = 1;
    int fd = socket(a->ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
        setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) != 0 ||
        (a->ss.ss_family == AF_INET6 &&
         setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one)) != 0) ||
        tune_listener(fd, defer_secs, lowat) != 0 ||
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
static int port_in_use(const struct addr *a)
{
    int one = 1, rc = 0;
    int fd = socket(a->ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
        (a->ss.ss_family == AF_INET6 &&
         setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one)) != 0) ||
        bind(fd, (const struct sockaddr *)&a->ss, a->len) != 0)
        rc = -errno;
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

static void format_addr(const struct addr *a, char *out, size_t len)
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
    snprintf(out, len, "http://%s%s%s:%u/", a->ss.ss_family == AF_INET6 ? "[" : "", host,
             a->ss.ss_family == AF_INET6 ? "]" : "", port);
}

/* The process's view of its listeners and workers while it runs. */
struct server {
    struct config *cfg;
    const struct engine_ops *eng;
    struct engine_caps caps; /* probed once, read by every worker until they are joined */
    struct addr addr;  /* what the first listener is bound to */
    char url[INET6_ADDRSTRLEN + 16];
    int *listeners;    /* one per worker; a worker owns (and closes) its own once started */
    int nlisten;
    int inherited;     /* systemd passed this many listeners (0: we opened our own) */
    struct worker *workers;
    int started;
    struct site_slot sites;
    int notify_fd;
    struct accesslog *alog; /* --access-log, or NULL */
    struct metrics *metrics; /* --metrics, or NULL */
};

/* Opens one listener per worker, or spreads the inherited ones over the workers (each worker
 * gets its own dup, so it can close it in a drain without pulling it from under another). */
static int open_listeners(struct server *sv)
{
    struct config *cfg = sv->cfg;
    int inherited[SYSTEMD_MAX_FDS];
    char names[256], why[256] = "";
    int n = systemd_listen_fds(inherited, SYSTEMD_MAX_FDS, names, sizeof(names), why,
                               sizeof(why));
    if (n < 0) {
        fprintf(stderr, "ringhttpd: %s\n", why);
        return -1;
    }
    sv->inherited = n;
    if (n > 0) {
        for (int i = 0; i < n; i++) /* best effort: the .socket unit may have set its own */
            tune_listener(inherited[i], (int)cfg->header_timeout, (int)cfg->send_lowat);
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
    if (cfg->port != 0 && !cfg->reuse_port && (err = port_in_use(&sv->addr)) == -EADDRINUSE) {
        fprintf(stderr, "ringhttpd: cannot listen on %s port %u: %s (another process serves it; "
                        "--reuse-port shares it with a ringhttpd, for a zero-downtime restart)\n",
                cfg->bind, cfg->port, strerror(-err));
        return -1;
    }
    for (; sv->nlisten < cfg->threads; sv->nlisten++) {
        int fd = open_listener(&sv->addr, (int)cfg->header_timeout, (int)cfg->send_lowat);
        if (fd < 0) {
            fprintf(stderr, "ringhttpd: cannot listen on %s port %u: %s\n", cfg->bind,
                    cfg->port, strerror(-fd));
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
    return 0;
}

/* Zero-downtime restart without losing queued connections. With SO_REUSEPORT a connection is
 * queued in one listener of the group, and closing that listener resets what it holds unless
 * net.ipv4.tcp_migrate_req=1 (off by default; it moves them to another listener). So before our
 * listeners close, new connections are steered away from them: our listeners joined the group
 * first and hold its indices 0..n-1 (a predecessor's sockets are gone by the time we drain; each
 * close moves the group's last socket into the hole), a successor started with --reuse-port
 * holds n.., and this classic BPF program picks among n..2n-1. An index past the group's end
 * (no successor, or a smaller one) makes the kernel fall back to its hash: the program never
 * refuses a connection, and it is harmless when we are simply stopping. What was queued before
 * it took effect is accepted and served while the listeners close (worker_close_listener). */
static void steer_to_successor(const struct server *sv)
{
    struct sock_filter code[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, (uint32_t)(SKF_AD_OFF + SKF_AD_RANDOM)),
        BPF_STMT(BPF_ALU | BPF_MOD | BPF_K, (uint32_t)sv->nlisten),
        BPF_STMT(BPF_ALU | BPF_ADD | BPF_K, (uint32_t)sv->nlisten),
        BPF_STMT(BPF_RET | BPF_A, 0),
    };
    struct sock_fprog prog = {.len = sizeof(code) / sizeof(code[0]), .filter = code};
    if (sv->inherited || sv->nlisten == 0 || sv->started == 0)
        return; /* systemd's sockets outlive us: their queue waits for the next instance */
    if (setsockopt(sv->workers[0].listeners[0].fd, SOL_SOCKET, SO_ATTACH_REUSEPORT_CBPF, &prog,
                   sizeof(prog)) != 0)
        errlog(ERRLOG_NOTICE, "drain: cannot steer new connections to a successor: %s",
               strerror(errno));
}

/* True when more TCP listeners are bound to our port than we opened: a successor started with
 * --reuse-port, which our listeners must give their handshakes under way to (see
 * steer_to_successor). Asked of the kernel over sock_diag (Landlock forbids /proc/net here).
 * When the kernel cannot say, assume a successor: the drain then only takes 1-2 s longer. */
static bool successor_listens(const struct server *sv)
{
    if (sv->inherited || sv->nlisten == 0)
        return false;
    int fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
    if (fd < 0)
        return true;
    struct {
        struct nlmsghdr nlh;
        struct inet_diag_req_v2 r;
    } req = {
        .nlh = {.nlmsg_len = sizeof(req), .nlmsg_type = SOCK_DIAG_BY_FAMILY,
                .nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP},
        .r = {.sdiag_family = sv->addr.ss.ss_family, .sdiag_protocol = IPPROTO_TCP,
              .idiag_states = 1u << 10 /* TCP_LISTEN */},
    };
    uint16_t port = ((const struct sockaddr_in *)&sv->addr.ss)->sin_port; /* same for v6 */
    int count = 0;
    bool ok = false;
    if (send(fd, &req, sizeof(req), 0) == (ssize_t)sizeof(req)) {
        char buf[16384] __attribute__((aligned(8)));
        ssize_t n;
        while (!ok && (n = recv(fd, buf, sizeof(buf), 0)) > 0) {
            for (struct nlmsghdr *h = (struct nlmsghdr *)buf; NLMSG_OK(h, (size_t)n);
                 h = NLMSG_NEXT(h, n)) {
                if (h->nlmsg_type == NLMSG_DONE || h->nlmsg_type == NLMSG_ERROR) {
                    ok = h->nlmsg_type == NLMSG_DONE;
                    break;
                }
                const struct inet_diag_msg *m = NLMSG_DATA(h);
                count += m->id.idiag_sport == port;
            }
            if (!ok && n > 0 && ((struct nlmsghdr *)buf)->nlmsg_type == NLMSG_ERROR)
                break;
        }
    }
    close(fd);
    return !ok || count > sv->nlisten;
}

static void wake_workers(struct server *sv)
{
    for (int i = 0; i < sv->started; i++) {
        uint64_t one = 1;
        if (write(sv->workers[i].wake_fd, &one, sizeof(one)) < 0)
            errlog(ERRLOG_ERROR, "waking worker %d: %s", i, strerror(errno));
    }
}

static void stop_workers(struct server *sv, enum worker_stop how)
{
    for (int i = 0; i < sv->started; i++)
        atomic_store(&sv->workers[i].stop, how);
    wake_workers(sv);
}

static uint64_t monotonic_usec(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* SIGHUP: a new site from the command line's paths, or the old one kept with the reason. */
static void reload(struct server *sv, const char *what)
{
    struct site *s;
    char why[512] = "";
    systemd_notify(sv->notify_fd, "RELOADING=1\nMONOTONIC_USEC=%llu\nSTATUS=reloading",
                   (unsigned long long)monotonic_usec());
    if (site_open(sv->cfg, &s, why, sizeof(why)) != 0) {
        errlog(ERRLOG_ERROR, "%s failed, still serving the previous configuration: %s", what,
               why);
    } else {
        site_publish(&sv->sites, s);
        wake_workers(sv);
        errlog(ERRLOG_NOTICE, "%s: serving %s", what, sv->cfg->docroot);
    }
    systemd_notify(sv->notify_fd, "READY=1\nSTATUS=serving %s on %s", sv->cfg->docroot, sv->url);
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
    if (site_open(sv->cfg, &s, why, sizeof(why)) != 0) {
        errlog_limited(lim, ERRLOG_ERROR, "document root changed but cannot be used, still "
                       "serving the previous one: %s", why);
        return;
    }
    site_publish(&sv->sites, s);
    wake_workers(sv);
    errlog(ERRLOG_NOTICE, "document root %s changed: serving the new one", sv->cfg->docroot);
}

static bool all_done(const struct server *sv)
{
    for (int i = 0; i < sv->started; i++)
        if (!atomic_load(&sv->workers[i].done))
            return false;
    return true;
}

/* The main thread's life once the workers run: signals, reloads, the docroot check, drain. */
static void supervise(struct server *sv, const sigset_t *signals)
{
    struct errlog_limit lim = {0};
    bool stopping = false;

    for (;;) {
        struct timespec wait = {stopping ? 0 : 1, stopping ? 100000000 : 0};
        int sig = sigtimedwait(signals, NULL, &wait);
        if (sig < 0) {
            if (stopping && all_done(sv))
                return;
            if (!stopping)
                follow_docroot(sv, &lim);
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
                   !sv->alog ? "no access log to reopen"
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
                steer_to_successor(sv);
                stop_workers(sv, successor_listens(sv) ? WORKER_HANDOVER : WORKER_DRAIN);
            } else {
                errlog(ERRLOG_NOTICE, "%s during the drain: closing every connection now",
                       strsignal(sig));
                stop_workers(sv, WORKER_ABORT);
            }
            break;
        }
    }
}

/* Least privilege once the listeners are bound and before any worker exists: the user change
 * and the Landlock domain apply to the calling thread and the threads it creates. */
static int confine(const struct config *cfg)
{
    char why[512] = "";
    if (cfg->user && privs_drop(cfg->user, why, sizeof(why)) != 0) {
        fprintf(stderr, "ringhttpd: %s\n", why);
        return -1;
    }
    if (cfg->landlock) {
        int abi = privs_landlock(cfg, why, sizeof(why));
        if (abi < 0) {
            fprintf(stderr, "ringhttpd: %s (--no-landlock to run without)\n", why);
            return -1;
        }
        if (cfg->verbose && abi > 0)
            fprintf(stderr, "ringhttpd: landlock: applied (ABI %d): files are read only beneath "
                            "the document root's directory\n", abi);
        else if (cfg->verbose)
            fprintf(stderr, "ringhttpd: landlock: not available in this kernel\n");
    } else if (cfg->verbose) {
        fprintf(stderr, "ringhttpd: landlock: off (--no-landlock)\n");
    }
    if (geteuid() == 0 && !cfg->user)
        errlog(ERRLOG_WARN, "serving as root; --user USER drops to USER after binding");
    return 0;
}

int server_run(struct config *cfg)
{
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
    int lrc = open_listeners(&sv);
    if (lrc < 0) {
        rc = lrc == -2 ? 2 : 1;
        goto out;
    }
    format_addr(&sv.addr, sv.url, sizeof(sv.url));
    if (!(sv.eng = engine_choose(cfg->engine, cfg->verbose, &sv.caps)))
        goto out;

    /* Every worker is set up before the process is confined (Landlock, --user): an engine reads
     * limits under /proc and opens /dev/null. Their threads start after, and so inherit it. */
    for (; inited < cfg->threads; inited++) {
        struct worker *w = &sv.workers[inited];
        /* The HTTP port's listener; a transport's port (TLS) adds its own here. */
        struct listener ls[LISTEN_MAX] = {{.fd = sv.listeners[inited],
                                           .owned = sv.inherited == 0,
                                           .xport = transport_test_hook()}};
        unsigned nls = 1;
        sv.listeners[inited] = -1; /* the worker's now, even when it fails */
        int err = worker_init(w, inited, cfg, sv.eng, &sv.caps, ls, nls, &sv.sites);
        if (err < 0) {
            fprintf(stderr, "ringhttpd: starting worker %d (%s): %s\n", inited, sv.eng->name,
                    strerror(-err));
            goto stop;
        }
        w->alog = sv.alog;
        if (!w->h2)
            w->h2 = proto_test_hook();
    }
    /* Bound before the process is confined; it only reads the workers' counters. */
    if (cfg->metrics_bind &&
        metrics_start(&sv.metrics, cfg, sv.workers, cfg->threads, sv.eng->name, sv.alog) < 0)
        goto stop;
    if (confine(cfg) != 0)
        goto stop;
    for (sv.started = 0; sv.started < cfg->threads; sv.started++) {
        struct worker *w = &sv.workers[sv.started];
        int err = pthread_create(&w->thread, NULL, worker_main, w);
        if (err != 0) {
            fprintf(stderr, "ringhttpd: pthread_create: %s\n", strerror(err));
            goto stop;
        }
    }
    if (proto_test_hook())
        fprintf(stderr, "ringhttpd: test protocol %s after the HTTP/2 preface "
                        "(RINGHTTPD_TEST_PROTO)\n", proto_test_hook()->name);
    if (transport_test_hook())
        fprintf(stderr, "ringhttpd: test transport %s on the HTTP port (RINGHTTPD_TEST_TRANSPORT)\n",
                transport_test_hook()->name);
    fprintf(stderr, "ringhttpd: listening on %s (engine %s, %d thread%s)%s\n", sv.url,
            sv.eng->name, cfg->threads, cfg->threads == 1 ? "" : "s",
            sv.inherited ? " on sockets from systemd" : "");
    systemd_notify(sv.notify_fd, "READY=1\nSTATUS=serving %s on %s", cfg->docroot, sv.url);
    supervise(&sv, &signals);
    rc = 0;
stop:
    if (sv.metrics)
        metrics_stop(sv.metrics);
    if (rc != 0)
        stop_workers(&sv, WORKER_ABORT);
    for (int i = 0; i < sv.started; i++) {
        void *res;
        pthread_join(sv.workers[i].thread, &res);
        if (res)
            rc = 1;
        worker_fini(&sv.workers[i]);
    }
    for (int i = sv.started; i < inited; i++) /* set up, never started */
        worker_fini(&sv.workers[i]);
out:
    for (int i = 0; i < sv.nlisten; i++)
        if (sv.listeners && sv.listeners[i] >= 0)
            close(sv.listeners[i]);
    if (sv.notify_fd >= 0)
        close(sv.notify_fd);
    free(sv.listeners);
    free(sv.workers);
    site_slot_fini(&sv.sites);
    if (sv.alog)
        accesslog_close(sv.alog, 1000 * (int)cfg->drain_timeout);
    return rc;
}
