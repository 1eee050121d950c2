/* handover: giving the port to a successor ringhttpd in a zero-downtime restart. It asks the
 * kernel (sock_diag) how many listeners share our port, steers new connections to the
 * successor's SO_REUSEPORT listeners with a classic BPF program, and closes our listeners one
 * at a time, changing the program before each close so that it never picks one of ours.
 * Must not: run on the request path (it is used once per listener, in a drain), or shut a
 * listener it does not own (systemd's sockets outlive us with their queue).
 * Ownership: the server owns the struct handover; each worker releases its own listener from
 * its thread through handover_release, which serialises the releases under the struct's lock.
 *
 * Why the program changes (issue 13: one connection in about 11 restart runs was reset). The
 * kernel keeps a port's listeners in an array; a program returns an index into it, and an
 * index past the end falls back to the kernel's hash over every listener. Ours hold 0..n-1
 * (we are the oldest: our predecessor's are gone), the successor's n..n+m-1. Closing one of
 * ours moves the array's last socket into its hole, so a fixed "n + random % m" sent part of
 * the traffic back to the hash, and thus to our listeners still open, between our first and
 * last close; what one of them queued in that window was reset by its close. handover_pick
 * names, for each close, indices that hold the successor's listeners both before and after
 * it, and makes the last close leave no steering behind. */
#ifndef HANDOVER_H
#define HANDOVER_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

struct handover {
    pthread_mutex_t lock;
    int ours;     /* our listeners in the port's group */
    int theirs;   /* the successor's, counted when the drain began (0: none) */
    int released; /* ours closed so far, under lock */
};

/* What the steering program returns: base + random % spread; spread 0 means no program (the
 * kernel's hash), for when no index is known to hold a successor's listener. */
struct handover_pick {
    uint32_t base, spread;
};

void handover_init(struct handover *h, int ours);
void handover_fini(struct handover *h);

/* The steering for the drain's start: every new connection to a successor's listener. Pure. */
struct handover_pick handover_pick_start(int ours, int theirs);

/* The steering to install before our next listener closes, when `released` of ours are
 * closed already: indices that hold a successor's listener both before and after that close,
 * whichever of ours it is; before our last close, the array's last index (which that close
 * empties, so nothing steers afterwards). Exact when theirs >= ours; with fewer, the kernel's
 * hash takes over once their untouched indices run out. Pure. */
struct handover_pick handover_pick_release(int ours, int theirs, int released);

/* Attaches the program for pick to fd's reuseport group (or detaches it for spread 0).
 * Returns 0 or -errno. */
int handover_steer(int fd, struct handover_pick pick);

/* A successor starting on a shared port (--reuse-port): removes a steering program that a
 * finished predecessor left in the group, which would otherwise send every new connection to
 * the listener at its index. Errors are ignored (ENOENT: there was none). */
void handover_join(int fd);

/* Parses one buffer of a sock_diag dump of TCP listeners, adding to *count those bound to port
 * (network byte order). Returns 1 when the dump is complete (NLMSG_DONE), 0 when more is to be
 * received, -errno when the kernel reported an error (NLMSG_ERROR anywhere in the buffer) or
 * the buffer is malformed. Pure. */
int handover_parse_dump(const void *buf, size_t len, uint16_t port, int *count);

/* The same, counting only those bound to addr (4 bytes for AF_INET, 16 for AF_INET6; NULL:
 * any), for a port that several --bind addresses share (each its own reuseport group). */
int handover_parse_dump_at(const void *buf, size_t len, uint16_t port, const uint8_t *addr,
                           int *count);

/* How many TCP listeners of family are bound to port (network byte order), asked over
 * sock_diag (Landlock forbids /proc/net), or -errno. Never blocks for long: the socket has a
 * receive timeout. */
int handover_count_listeners(int family, uint16_t port);

/* The same for the UDP sockets of family bound to port (a reuseport group of QUIC sockets):
 * how many, or -errno (the kernel without udp_diag: -ENOENT). */
int handover_count_udp(int family, uint16_t port);

/* The two counts for the one address sa names (its family, port and address; the wildcard
 * counts only wildcard sockets), since each address on a port is its own reuseport group. */
int handover_count_listeners_at(const struct sockaddr *sa);
int handover_count_udp_at(const struct sockaddr *sa);

/* At the drain's start: records that theirs successor listeners share the port and, when there
 * are any, attaches the start steering through fd (one of ours). Returns 0 or -errno. */
int handover_begin(struct handover *h, int fd, int theirs);

/* Takes fd (one of ours) out of the port and closes it: under the lock, installs the next
 * steering (handover_pick_release), shuts fd down (which detaches it from the group at once,
 * even while a cancelled io_uring accept still holds a reference) and closes it. With h NULL
 * or no successor, only shuts and closes. */
void handover_release(struct handover *h, int fd);

#endif
