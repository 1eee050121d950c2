/* listen: the process's listeners (issue 38): --bind's entries (or the default, both
 * families) planned into groups, each group's sockets opened (one SO_REUSEPORT listener per
 * worker, or one Unix socket dup'd), systemd's sockets adopted.
 * Must not: accept, or touch workers (server.c hands each group's fds to them).
 * Ownership: the main thread; the groups live in struct server (server_int.h). */
#ifndef SERVER_LISTEN_H
#define SERVER_LISTEN_H

struct server;

/* --tcp-cc checked, then every listener opened into sv->groups: systemd's first, then each
 * --bind entry's; sets main_group and (for port 0) cfg->tls_port. 0, -1, or -2
 * for a usage error, after saying why on stderr. */
int listen_open(struct server *sv);

/* At the end: the fds no worker took, the Unix socket files still ours, the claims. */
void listen_close(struct server *sv);

#endif
