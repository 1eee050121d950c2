/* steer: the reuseport program that sends every connection from one client address (an IPv6
 * client's /64, as limits key it) to the same listener of the group, so that each worker's
 * per-client tables (core/limits.h) see all of that client and stay exact with no lock and no
 * shared counter (issue 28).
 * Must not: run on the request path (it is attached at start and checked once a second), or
 * attach while the port's group holds listeners that are not ours (a predecessor or successor
 * in a hand-over: the indices would name theirs; handover.h owns steering then).
 * Ownership: the program lives in the kernel, in the group; the server decides when. */
#ifndef STEER_H
#define STEER_H

#include <stddef.h>
#include <stdint.h>

#include <linux/filter.h>

/* The program's length in instructions. */
#define STEER_LEN 18

/* Writes the classic BPF program that returns (hash of the source address, or of an IPv6
 * source's first 64 bits, keyed by seed) % n: an index into a group of n listeners. A packet
 * that is neither IPv4 nor IPv6 gets an index past the end, which is the kernel's own hash.
 * Pure; n >= 1. */
void steer_program(struct sock_filter code[STEER_LEN], uint32_t n, uint32_t seed);

/* Attaches that program to fd's reuseport group, for a group of n listeners. 0 or -errno. */
int steer_attach(int fd, uint32_t n, uint32_t seed);

#endif
