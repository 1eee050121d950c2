/* udp: a worker's UDP port (QUIC on a TLS listener's port number; one per TLS listener): datagrams
 * in by the batch (recvmmsg; with UDP_GRO a client's train of equal-size datagrams comes as one
 * buffer, split here) and out by the batch (sendmsg with UDP_SEGMENT where the kernel and the route
 * have it). Must not: know QUIC; it moves datagrams between one socket and the upcall the upper
 * layer installed (up), and never blocks: a send the socket refuses (EAGAIN) is dropped and
 * counted, as QUIC's loss recovery expects of a full socket buffer. Ownership: the worker owns its
 * ports (w->udp[]) and each port its fd; one thread uses them. Both engines call udp_port_read when
 * the socket is readable (epoll: EPOLLIN; io_uring: a multishot poll), so the read loop is written
 * once, here. */
#ifndef ENGINE_UDP_H
#define ENGINE_UDP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define UDP_BATCH 32  /* datagrams per recvmmsg */
#define UDP_RBUF 2048 /* bytes per received datagram; larger ones are dropped (MSG_TRUNC) */
/* With GRO a buffer takes a train the kernel coalesced: up to 64 KiB (a GSO skb's limit), so
 * fewer of them a call. Pages are touched only as far as trains fill them. */
#define UDP_GRO_BATCH 8
#define UDP_GRO_RBUF 65536
#define UDP_GSO_MAX 10                    /* datagrams per GSO send */
#define UDP_SEND_MAX (UDP_GSO_MAX * 1500) /* bytes one udp_port_send carries at most */
/* recvmmsg calls per readiness: epoll's is level-triggered (what is left wakes the next turn,
 * so other sockets get theirs), io_uring's poll fires on arrivals only (read to the end). */
#define UDP_TURN_BATCHES 4
#define UDP_DRAIN_BATCHES 1024

struct udp_port;

struct udp_dgram {
    const uint8_t *data;
    size_t len;
    const struct sockaddr *peer;
    socklen_t peer_len;
    /* The port it came in on (set by udp_port_deliver): a worker may have several (HTTP/3 on
     * every TLS listener, issue 38), and an answer leaves by the socket its question came in
     * on, from the address the client sent to. */
    struct udp_port *port;
    /* That address (with the port's port number) when the port is bound to a wildcard (its
     * IP_PKTINFO or IPV6_PKTINFO), else NULL: the port's own address. */
    const struct sockaddr *local;
    socklen_t local_len;
};

/* Installed by the layer above (quic): recv once per datagram, then flush once per batch. */
struct udp_upcall {
    void (*recv)(void *user, const struct udp_dgram *d);
    void (*flush)(void *user);
};

/* Installed by an engine that sends by itself (io_uring): queues a copy of len bytes of
 * datagrams for `to` (seg bytes each; gso: as one send with UDP_SEGMENT, else one send each)
 * on p's socket on the loop turn's submission, and later reports each send's end with
 * udp_port_sent(p, ...). One sender (and ctx) may serve every port of a worker. 0, or
 * -ENOBUFS when it has no room (the port then sends them at once with sendmsg). */
struct udp_sender {
    int (*send)(void *ctx, struct udp_port *p, const struct sockaddr *from,
                const struct sockaddr *to, socklen_t tolen, const uint8_t *buf, size_t len,
                size_t seg, bool gso);
    /* A buffer of UDP_SEND_MAX bytes the caller may build its next send in, so that send takes
     * it without the copy (it stays the sender's, lent again until a send takes it), or NULL
     * (none free). */
    uint8_t *(*lend)(void *ctx);
};

struct udp_port {
    int fd;
    bool gso; /* UDP_SEGMENT accepted (probed at open, cleared when a send says EIO) */
    bool gro; /* UDP_GRO on: a received buffer may hold several datagrams (its cmsg says) */
    /* Bound to a wildcard (0.0.0.0, [::]) with the destination of each datagram asked for
     * (IP_PKTINFO, IPV6_RECVPKTINFO): an answer then leaves from the address its question was
     * sent to, not from the one the kernel's route would pick (a host with several addresses,
     * or 127.0.0.2 on loopback, whose client drops a reply from another address). */
    bool pktinfo;
    const struct udp_upcall *up;
    void *user;
    const struct udp_sender *sender; /* NULL: sendmsg, synchronously */
    void *sender_ctx;
    struct sockaddr_storage local; /* the address the socket is bound to */
    socklen_t local_len;
    uint8_t *rbuf;   /* rslots * rslot bytes, for udp_port_read */
    unsigned rslots; /* UDP_BATCH, or UDP_GRO_BATCH with GRO */
    size_t rslot;    /* UDP_RBUF, or UDP_GRO_RBUF with GRO */
    uint64_t rx_dgrams, rx_bytes, rx_gro_trains, tx_dgrams, tx_bytes, tx_dropped, tx_gso_calls;
    uint64_t tx_queued; /* sends handed to the engine's sender */
    uint64_t tx_sends;  /* send operations that carried datagrams: the kernel's cost is per send */
};

/* Opens a non-blocking UDP socket bound to addr with SO_REUSEPORT (one per worker, the kernel
 * spreading clients by their 4-tuple): the fd, or -errno. An IPv6 address is IPv6 only when
 * v6only, else it takes IPv4 too (mapped addresses). */
int udp_socket_open(const struct sockaddr *addr, socklen_t len, bool v6only);

/* Whether another socket holds addr's UDP port already (a predecessor's, in a restart with
 * --reuse-port): 1, 0, or -errno. A bind without SO_REUSEPORT or SO_REUSEADDR tells. */
int udp_addr_in_use(const struct sockaddr *addr, socklen_t len, bool v6only);

/* Takes over fd; gso (gro) false keeps UDP_SEGMENT (UDP_GRO) off even where the kernel has
 * it. 0 or -errno. */
int udp_port_init(struct udp_port *p, int fd, bool gso, bool gro, const struct udp_upcall *up,
                  void *user);
void udp_port_fini(struct udp_port *p);

/* Reads what is queued (at most `batches` recvmmsg calls), handing each datagram to up->recv,
 * then calls up->flush. Returns datagrams read, or -errno for a socket error. */
int udp_port_read(struct udp_port *p, unsigned batches);

/* What an engine received by itself (io_uring's RECVMSG): one datagram, or with seg (the
 * UDP_GRO control message's size) a train of seg-byte datagrams (the last may be shorter),
 * each counted and handed to up->recv; udp_port_flush after the turn's last. */
void udp_port_deliver(struct udp_port *p, const struct udp_dgram *d, size_t seg);
/* The datagram size of a GRO train from one control message (cm: a received cmsghdr), or 0
 * when cm is not UDP_GRO's. */
size_t udp_gro_size(const struct cmsghdr *cm);
/* The destination of a datagram from one control message of a wildcard port p (its
 * IP_PKTINFO, or IPV6_PKTINFO: for an IPv4 client of a dual socket, a mapped address) into
 * *out with p's port number: its length, or 0 when cm is not one. */
socklen_t udp_pktinfo_dst(const struct udp_port *p, const struct cmsghdr *cm,
                          struct sockaddr_storage *out);
/* Control-message space a receive needs for udp_gro_size and udp_pktinfo_dst, and a send for
 * udp_cmsg_build. */
#define UDP_CMSG_SPACE                                                                             \
    (CMSG_SPACE(sizeof(int)) + CMSG_SPACE(12 /* in_pktinfo */) + CMSG_SPACE(20 /* in6_pktinfo */))
/* A send's control messages into ctl (UDP_CMSG_SPACE bytes, aligned for a cmsghdr): UDP_SEGMENT
 * when seg, the source address when from (IP_PKTINFO, or IPV6_PKTINFO on an IPv6 socket, which
 * takes a mapped address for an IPv4 client); their length (0: none). Written once for both
 * engines' sends. */
size_t udp_cmsg_build(void *ctl, const struct udp_port *p, const struct sockaddr *from,
                      uint16_t seg);
void udp_port_flush(struct udp_port *p);

/* Sends len bytes (at most UDP_SEND_MAX) to `to` as datagrams of seg bytes each (the last may
 * be shorter): through the engine's sender when it has one and room, else at once; one send
 * with UDP_SEGMENT when p->gso, else one per datagram. 0 or -errno (EAGAIN counted as
 * dropped); a queued send's failure is counted when it ends. */
int udp_port_send(struct udp_port *p, const struct sockaddr *to, socklen_t tolen,
                  const uint8_t *buf, size_t len, size_t seg);
/* The same from address from (a datagram's `local`: the address its question was sent to), or
 * from the port's own when NULL. */
int udp_port_send_from(struct udp_port *p, const struct sockaddr *from, const struct sockaddr *to,
                       socklen_t tolen, const uint8_t *buf, size_t len, size_t seg);
/* Where the caller may build its next udp_port_send (UDP_SEND_MAX bytes): a buffer the
 * engine's sender lends (io_uring: the copy it would make for the kernel, which reads it at the
 * turn's submission), so that a send from it costs no copy; NULL when there is none (epoll, or
 * every copy in flight): the caller's own. Lent until a send is given it; a send of other bytes
 * in between does not take it. */
static inline uint8_t *udp_port_buffer(struct udp_port *p)
{
    return p->sender && p->sender->lend ? p->sender->lend(p->sender_ctx) : NULL;
}

/* The engine's sender reports one send of len bytes (seg: its UDP_SEGMENT size, 0 without)
 * that ended with res (bytes, or -errno): counted; a GSO send the route refused (EIO) turns
 * GSO off and goes again at once, one datagram a sendmsg. buf is still the sender's. */
void udp_port_sent(struct udp_port *p, const struct sockaddr *from, const struct sockaddr *to,
                   socklen_t tolen, const uint8_t *buf, size_t len, size_t seg, int res);

#endif
