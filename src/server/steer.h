/* steer: the reuseport programs. On TCP, every connection from one client address (an IPv6
 * client's /64, as limits key it) to the same listener of the group, so that each worker's
 * per-client tables (core/limits.h) see all of that client and stay exact with no lock and no
 * shared counter (issue 28). On UDP (QUIC), a new connection's first flight (Initial and 0-RTT
 * packets, whose ID the client chose) by the same hash of its source address, so that a client
 * lands on the same worker over TCP and QUIC and is counted once (issue 35); every later
 * datagram (Handshake, short header) to the worker that owns its destination connection ID,
 * whatever address it came from (issue 29: NAT rebinding and migration), by one function of
 * four of the ID's bytes that the server's IDs are made to (where they sit, and the function:
 * quic/cid.h, the IDs' layout).
 * Must not: run on the request path (it is attached at start and checked once a second), or
 * attach while the port's group holds listeners that are not ours (a predecessor or successor
 * in a hand-over: the indices would name theirs; handover.h owns steering then).
 * Ownership: the program lives in the kernel, in the group; the server decides when. */
#ifndef STEER_H
#define STEER_H

#include <stddef.h>
#include <stdint.h>

#include <linux/filter.h>

#include "quic/cid.h"

/* The program's length in instructions. */
#define STEER_LEN 18

/* Writes the classic BPF program that returns (hash of the source address, or of an IPv6
 * source's first 64 bits, keyed by seed) % n: an index into a group of n listeners. A packet
 * that is neither IPv4 nor IPv6 gets an index past the end, which is the kernel's own hash.
 * Pure; n >= 1. */
void steer_program(struct sock_filter code[STEER_LEN], uint32_t n, uint32_t seed);

/* Attaches that program to fd's reuseport group, for a group of n listeners. 0 or -errno. */
int steer_attach(int fd, uint32_t n, uint32_t seed);

/* The QUIC program's length in instructions, for sockets in their workers' order. */
#define STEER_QUIC_LEN 31

/* Writes the classic BPF program that brings a QUIC datagram to the socket of a worker, in a
 * group of n sockets where worker w's is at order[w] (order NULL: worker w's is socket w),
 * into code[steer_quic_len(n, order)]. An Initial or 0-RTT long header goes to the worker
 * steer_program with the same n and seed picks for its source address (its ID is the
 * client's, or, after our Initial or Retry, one we made on that same worker); a Handshake
 * long header (its ID at byte 6) and a short header (at byte 1) to the worker
 * cid_steer_index names for the steering bytes of the ID, which has layout ids. A Handshake
 * whose ID is too short to hold them, and a packet that is neither IPv4 nor IPv6, get an
 * index past the end (the kernel's hash). Pure. */
void steer_quic_program(struct sock_filter *code, uint32_t n, const uint32_t *order, uint32_t seed,
                        const struct cid_layout *ids);
size_t steer_quic_len(uint32_t n, const uint32_t *order);

/* Attaches that program to the UDP socket fd's reuseport group. 0 or -errno. */
int steer_quic_attach(int fd, uint32_t n, const uint32_t *order, uint32_t seed,
                      const struct cid_layout *ids);

/* Finds which index of their reuseport group each of the n UDP sockets fds holds, into
 * order[] (order[i]: fds[i]'s), by a probe datagram per index through the group (steer.c),
 * when the group holds these sockets only: 0, or -EAGAIN when the answer was not clear (a
 * socket that is not ours in the group, or drops of a full buffer mixed in: try later), or
 * -errno. Takes the group's program off (the kernel's hash until the caller attaches one).
 * Costs 2n datagrams, n^2 getsockopt: not for the request path. */
int steer_quic_order(const int *fds, uint32_t n, uint32_t order[]);

/* Takes the program off fd's group (the kernel's hash from now on). */
void steer_detach(int fd);

#endif
