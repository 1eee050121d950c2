/* systemd: the two systemd protocols a service speaks, implemented directly (no libsystemd):
 * socket activation (LISTEN_FDS, LISTEN_PID, LISTEN_FDNAMES) and readiness notification
 * (sd_notify's datagrams to NOTIFY_SOCKET).
 * Must not: be used by workers; only the main thread talks to the service manager.
 * Ownership: the main thread owns the notify socket and the inherited listeners it is given. */
#ifndef SYSTEMD_H
#define SYSTEMD_H

#include <stddef.h>

#define SYSTEMD_LISTEN_FDS_START 3
#define SYSTEMD_MAX_FDS 64

/* The listening sockets passed by socket activation, when LISTEN_PID names this process: their
 * count (fds SYSTEMD_LISTEN_FDS_START.. onward, made non-blocking and close-on-exec, stored in
 * fds), 0 when the process was not socket-activated, or -errno with a reason in why (a passed
 * fd that is not a listening stream socket). names gets LISTEN_FDNAMES (or "") into names_buf.
 * The variables are removed from the environment either way, so no child inherits them. */
int systemd_listen_fds(int *fds, int max, char *names, size_t names_len, char *why, size_t why_len);

/* A connected datagram socket to $NOTIFY_SOCKET ('@' for the abstract namespace), or -1 when
 * the variable is unset or unusable (not an error: no manager is listening). */
int systemd_notify_open(void);

/* Sends one notification ("READY=1\nSTATUS=..."); a no-op for fd -1. Failures are ignored:
 * the manager going away must not stop the server. */
void systemd_notify(int fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
