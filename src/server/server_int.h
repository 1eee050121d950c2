/* server_int: the structs the server's files share (server.c, listen.c, h3.c): the process's
 * listeners and workers while it runs, and the few server.c functions the others call.
 * Must not: be included outside src/server/ (nothing else may see the main thread's state).
 * Ownership: the main thread owns struct server; workers see none of it. */
#ifndef SERVER_INT_H
#define SERVER_INT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/un.h>

#include "config/config.h"
#include "engine/caps.h"
#include "quic/cid.h"
#include "rt/errlog.h"
#include "rt/runtime.h"
#include "server/handover.h"
#include "site/site.h"
#include "site/tokens.h"

struct tls_cert_files;

struct addr {
    struct sockaddr_storage ss;
    socklen_t len;
    bool dual; /* [::] taking IPv4 too (IPV6_V6ONLY off): no --bind */
};

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
    /* HTTP/3 (a TLS IP group): its UDP socket's index in every worker's w->udp[], or -1; and
     * whether the port's group is ours alone, its datagrams routed by connection ID */
    int udp;
    bool udp_steer;
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

/* server.c's, for listen.c and h3.c. */

/* The pairs of pairs followed by automatic HTTPS's certificates, into *all (malloc'd), *n of
 * them: 0 or -ENOMEM. */
int server_pair_list(struct server *sv, const struct config *pairs, struct tls_cert_files **all,
                     int *n);

/* The steering programs' address-hash seed, drawn once: false when it could not be. */
bool server_seed(struct server *sv);

/* Wakes every started worker (to see what was published). */
void server_wake_workers(struct server *sv);

#endif
