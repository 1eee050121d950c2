/* Listeners, workers, signals and drain; see server.h. */
#include "server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "config.h"
#include "engine/caps.h"
#include "engine/engine.h"
#include "rt/worker.h"

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
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) != 0 ||
        setsockopt(fd, IPPROTO_TCP, TCP_DEFER_ACCEPT, &defer_secs, sizeof(defer_secs)) != 0 ||
        (lowat > 0 && setsockopt(fd, IPPROTO_TCP, TCP_NOTSENT_LOWAT, &lowat, sizeof(lowat)) != 0) ||
        bind(fd, (const struct sockaddr *)&a->ss, a->len) != 0 || listen(fd, 4096) != 0) {
        int err = -errno;
        close(fd);
        return err;
    }
    return fd;
}

static void raise_fd_limit(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl); /* best effort: the default still works, just smaller */
    }
}

static void print_listening(const struct config *cfg, const struct addr *a,
                            const struct engine_ops *eng)
{
    char host[INET6_ADDRSTRLEN];
    uint16_t port;
    if (a->ss.ss_family == AF_INET6) {
        const struct sockaddr_in6 *v6 = (const struct sockaddr_in6 *)&a->ss;
        inet_ntop(AF_INET6, &v6->sin6_addr, host, sizeof(host));
        port = ntohs(v6->sin6_port);
    } else {
        const struct sockaddr_in *v4 = (const struct sockaddr_in *)&a->ss;
        inet_ntop(AF_INET, &v4->sin_addr, host, sizeof(host));
        port = ntohs(v4->sin_port);
    }
    fprintf(stderr, "ringhttpd: listening on http://%s%s%s:%u/ (engine %s, %d thread%s)\n",
            a->ss.ss_family == AF_INET6 ? "[" : "", host, a->ss.ss_family == AF_INET6 ? "]" : "",
            port, eng->name, cfg->threads, cfg->threads == 1 ? "" : "s");
}

int server_run(struct config *cfg)
{
    struct addr a;
    int rc = 1, started = 0, nlisten = 0;
    sigset_t stop_signals;
    struct engine_caps caps; /* read by every worker until they are joined below */

    if (parse_addr(cfg->bind, cfg->port, &a) != 0) {
        fprintf(stderr, "ringhttpd: --bind: '%s' is not an IPv4 or IPv6 address\n", cfg->bind);
        return 2;
    }
    /* Signals are taken synchronously by the main thread (sigwait), so no handler runs in a
     * worker; SIGPIPE is ignored so a peer that vanished mid-send costs an EPIPE, not the
     * process (the seed servers died of it). */
    signal(SIGPIPE, SIG_IGN);
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGINT);
    sigaddset(&stop_signals, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop_signals, NULL);
    raise_fd_limit();

    const struct engine_ops *eng = engine_choose(cfg->engine, cfg->verbose, &caps);
    if (!eng)
        return 1;

    struct worker *workers = calloc((size_t)cfg->threads, sizeof(*workers));
    int *listeners = calloc((size_t)cfg->threads, sizeof(*listeners));
    if (!workers || !listeners) {
        fprintf(stderr, "ringhttpd: out of memory\n");
        goto out;
    }
    for (nlisten = 0; nlisten < cfg->threads; nlisten++) {
        int fd = open_listener(&a, (int)cfg->header_timeout, (int)cfg->send_lowat);
        if (fd < 0) {
            fprintf(stderr, "ringhttpd: cannot listen on %s port %u: %s\n", cfg->bind,
                    ntohs(((struct sockaddr_in *)&a.ss)->sin_port), strerror(-fd));
            goto out;
        }
        listeners[nlisten] = fd;
        if (nlisten == 0 && getsockname(fd, (struct sockaddr *)&a.ss, &a.len) != 0) {
            nlisten++;
            fprintf(stderr, "ringhttpd: getsockname: %s\n", strerror(errno));
            goto out; /* port 0: the others must bind the port the kernel picked */
        }
    }
    for (started = 0; started < cfg->threads; started++) {
        struct worker *w = &workers[started];
        int err = worker_init(w, started, cfg, eng, &caps, listeners[started]);
        if (err < 0) {
            fprintf(stderr, "ringhttpd: starting worker %d (%s): %s\n", started, eng->name,
                    strerror(-err));
            goto stop;
        }
        if ((err = pthread_create(&w->thread, NULL, worker_main, w)) != 0) {
            worker_fini(w);
            fprintf(stderr, "ringhttpd: pthread_create: %s\n", strerror(err));
            goto stop;
        }
    }
    print_listening(cfg, &a, eng);
    int sig;
    sigwait(&stop_signals, &sig);
    rc = 0;
stop:
    for (int i = 0; i < started; i++) {
        uint64_t one = 1;
        atomic_store(&workers[i].stop, true);
        if (write(workers[i].wake_fd, &one, sizeof(one)) < 0)
            fprintf(stderr, "ringhttpd: waking worker %d: %s\n", i, strerror(errno));
    }
    for (int i = 0; i < started; i++) {
        void *res;
        pthread_join(workers[i].thread, &res);
        if (res)
            rc = 1;
        worker_fini(&workers[i]);
    }
out:
    for (int i = 0; i < nlisten; i++)
        close(listeners[i]);
    free(listeners);
    free(workers);
    return rc;
}
