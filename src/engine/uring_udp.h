/* uring_udp: the io_uring engine's HTTP/3 receive path: one multishot RECVMSG on each of the
 * worker's UDP sockets (w->udp[], tagged with the index) into one ring of provided buffers (one
 * datagram or UDP GRO train, its source address, control message and io_uring's header per buffer),
 * each datagram handed to the port's upcall (udp_port_deliver, which splits a train) as it
 * completes. Sends go the other way through the same ring (uring_udp_tx_start). Must not: know
 * QUIC, or block: a send the socket refuses is dropped and counted. Ownership: the uring engine's
 * state (struct uring.udp), set up by uring_udp_start on the worker's thread and freed by
 * uring_udp_stop; the buffers are the kernel's while in the ring. */
#ifndef ENGINE_URING_UDP_H
#define ENGINE_URING_UDP_H

#include <stdbool.h>
#include <stdint.h>

struct runtime;
struct uring;
struct io_uring_cqe;

/* Registers the buffer ring and arms every port's receive: 0, or -errno (the caller polls
 * them instead). */
int uring_udp_start(struct runtime *w, struct uring *u);
/* One completion of port's receive (OP_UDP_RECV, the tag's slot). */
void uring_udp_complete(struct runtime *w, struct uring *u, const struct io_uring_cqe *cqe,
                        unsigned port);
/* The kernel refused port's RECVMSG (no multishot RECVMSG before 6.0): the caller polls it
 * from now on; the ring goes with the last port's refusal. */
void uring_udp_refused(struct uring *u, unsigned port);
/* After a loop turn's completions: the port's flush, the buffers given back to the kernel. */
void uring_udp_flush(struct runtime *w, struct uring *u);
void uring_udp_stop(struct uring *u);

/* Sends: the port's sender (udp.h), each udp_port_send copied into one of a pool of slots (or
 * built in the one the port lent, udp_port_buffer: no copy) and prepared as SENDMSG operations (one
 * with UDP_SEGMENT, or one per datagram without GSO) that the loop turn's one submission carries;
 * MSG_DONTWAIT, so a full socket buffer drops them as sendmsg would. The slot goes back when its
 * last completes. 0, or -ENOMEM. */
int uring_udp_tx_start(struct runtime *w, struct uring *u);
/* One completion of a send (OP_UDP_SEND) of the slot the tag names. */
void uring_udp_sent(struct runtime *w, struct uring *u, const struct io_uring_cqe *cqe,
                    uint32_t slot);
/* After the ring is gone (nothing in flight): the port sends by itself again. */
void uring_udp_tx_stop(struct runtime *w, struct uring *u);

#endif
