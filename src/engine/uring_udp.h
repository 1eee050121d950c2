/* uring_udp: the io_uring engine's HTTP/3 receive path: one multishot RECVMSG on the worker's
 * UDP socket into a ring of provided buffers of its own (one datagram, its source address and
 * io_uring's header per buffer), each datagram handed to the port's upcall as it completes.
 * Must not: send (udp_port_send does, synchronously) or know QUIC.
 * Ownership: the uring engine's state (struct uring.udp), set up by uring_udp_start on the
 * worker's thread and freed by uring_udp_stop; the buffers are the kernel's while in the ring. */
#ifndef ENGINE_URING_UDP_H
#define ENGINE_URING_UDP_H

#include <stdbool.h>

struct runtime;
struct uring;
struct io_uring_cqe;

/* Registers the buffer ring and arms the receive: 0, or -errno (the caller polls instead). */
int uring_udp_start(struct runtime *w, struct uring *u);
/* One completion of the receive (OP_UDP_RECV). */
void uring_udp_complete(struct runtime *w, struct uring *u, const struct io_uring_cqe *cqe);
/* After a loop turn's completions: the port's flush, the buffers given back to the kernel. */
void uring_udp_flush(struct runtime *w, struct uring *u);
void uring_udp_stop(struct uring *u);

#endif
