/* steer: see steer.h. Classic BPF (SO_ATTACH_REUSEPORT_CBPF, Linux 4.5) needs no libbpf and no
 * privilege. The program runs on the SYN with its data at the TCP payload; SKF_NET_OFF reaches
 * back to the IP header, where the source address is. Cost: one program per SYN, ~17
 * instructions (nothing per request).
 *
 * QUIC: the program runs on every datagram with its data at the UDP payload, where the
 * connection ID is; ~10 instructions a datagram. nginx's quic_bpf does the same with eBPF, a
 * sockmap and a lookup keyed by the ID (needs CAP_BPF or root, and libbpf); classic BPF has no
 * map, so the index is a function of the ID alone and the server makes its IDs to fit.
 *
 * The probe (steer_quic_order): which index of the group each of our sockets holds cannot be
 * asked of the kernel, and the order changes as other sockets leave (the last moves into the
 * hole). A group program sends a datagram that carries a random nonce and an index to that
 * index, and a filter on each of our sockets drops it there, which the socket counts
 * (SO_MEMINFO's drops): the socket whose count moved holds the index. No worker sees a probe,
 * and every other datagram goes by the kernel's hash as without a program. Reopening the
 * sockets in order would do it too, but would lose what they queued and make every worker
 * swap its socket under its loop. */
#include "server/steer.h"

#include <errno.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#ifndef SO_DETACH_REUSEPORT_BPF
#define SO_DETACH_REUSEPORT_BPF 68 /* Linux 5.3; older headers lack it */
#endif

/* Knuth's multiplicative hash constant (2^32 / phi), the connection IDs' too (quic/cid.h):
 * the product's high bits depend on every bit of the address, and the low 16 of them are
 * dropped before the modulo. */
#define STEER_MUL CID_STEER_MUL

/* Attaches code as fd's group program (SO_ATTACH_REUSEPORT_CBPF) or its own filter. */
static int attach(int fd, int opt, struct sock_filter *code, unsigned short len)
{
    struct sock_fprog prog = {.len = len, .filter = code};
    return setsockopt(fd, SOL_SOCKET, opt, &prog, sizeof(prog)) != 0 ? -errno : 0;
}

/* The TCP program's instructions 0-15 (its address hash, A = the index of n), at code[0..16);
 * a packet that is neither IPv4 nor IPv6 jumps to code[17]. The QUIC program runs the same
 * instructions for a new connection's datagrams, so one client gets one index on both. */
#define ADDR_HASH_LEN 16

static void addr_hash(struct sock_filter code[ADDR_HASH_LEN], uint32_t n, uint32_t seed)
{
    const uint32_t net = (uint32_t)SKF_NET_OFF;
    struct sock_filter prog[ADDR_HASH_LEN] = {
        /* 0 */ BPF_STMT(BPF_LD | BPF_B | BPF_ABS, net + 0), /* version << 4 | IHL */
        /* 1 */ BPF_STMT(BPF_ALU | BPF_RSH | BPF_K, 4),
        /* 2 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 4, 0, 3),
        /* 3 */ BPF_STMT(BPF_LD | BPF_W | BPF_ABS, net + 12), /* IPv4 source */
        /* 4 */ BPF_STMT(BPF_ALU | BPF_XOR | BPF_K, seed),
        /* 5 */ BPF_STMT(BPF_JMP | BPF_JA, 7),                 /* to 13 */
        /* 6 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 6, 0, 10), /* else to 17 */
        /* 7 */ BPF_STMT(BPF_LD | BPF_W | BPF_ABS, net + 8),   /* IPv6 source, bits 0-31 */
        /* 8 */ BPF_STMT(BPF_ALU | BPF_XOR | BPF_K, seed),
        /* 9 */ BPF_STMT(BPF_ALU | BPF_MUL | BPF_K, STEER_MUL),
        /* 10 */ BPF_STMT(BPF_MISC | BPF_TAX, 0),
        /* 11 */ BPF_STMT(BPF_LD | BPF_W | BPF_ABS, net + 12), /* bits 32-63: the /64 */
        /* 12 */ BPF_STMT(BPF_ALU | BPF_XOR | BPF_X, 0),
        /* 13 */ BPF_STMT(BPF_ALU | BPF_MUL | BPF_K, STEER_MUL),
        /* 14 */ BPF_STMT(BPF_ALU | BPF_RSH | BPF_K, 16),
        /* 15 */ BPF_STMT(BPF_ALU | BPF_MOD | BPF_K, n),
    };
    for (int i = 0; i < ADDR_HASH_LEN; i++)
        code[i] = prog[i];
}

void steer_program(struct sock_filter code[STEER_LEN], uint32_t n, uint32_t seed)
{
    addr_hash(code, n, seed);
    code[16] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_A, 0);
    code[17] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, 0xffffffffu); /* the kernel's hash */
}

int steer_attach(int fd, uint32_t n, uint32_t seed)
{
    struct sock_filter code[STEER_LEN];
    if (n == 0)
        return -EINVAL;
    steer_program(code, n, seed);
    return attach(fd, SO_ATTACH_REUSEPORT_CBPF, code, STEER_LEN);
}

size_t steer_quic_len(uint32_t n, const uint32_t *order)
{
    return order ? STEER_QUIC_LEN + 2 * (size_t)n : STEER_QUIC_LEN;
}

/* Where the QUIC program's parts begin (steer_quic_program). */
#define Q_ADDR 3   /* a new connection's datagram: the address hash */
#define Q_SHORT 21 /* a short header */
#define Q_LONG 23  /* a Handshake (or Retry) long header */
#define Q_CID 27   /* the ID's hash */
#define Q_TAIL 30  /* A is the worker: its socket */

void steer_quic_program(struct sock_filter *code, uint32_t n, const uint32_t *order, uint32_t seed,
                        const struct cid_layout *ids)
{
    const uint32_t off = ids->steer_off; /* the steering bytes, in the ID */
    /* Long header types (RFC 9000 17.2): Initial 0, 0-RTT 1, Handshake 2, Retry 3 in bits
     * 0x30 of the first byte, so 0x20 tells a Handshake from a connection's first flight. */
    code[0] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_B | BPF_ABS, 0);
    code[1] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, 0x80, 0, Q_SHORT - 2);
    code[2] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, 0x20, Q_LONG - 3, 0);
    addr_hash(code + Q_ADDR, n, seed); /* not IP: to Q_ADDR + 17 */
    code[Q_ADDR + 16] = (struct sock_filter)BPF_STMT(BPF_JMP | BPF_JA, Q_TAIL - (Q_ADDR + 17));
    code[Q_ADDR + 17] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, 0xffffffffu);
    code[Q_SHORT] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, 1 + off); /* ID at 1 */
    code[Q_SHORT + 1] = (struct sock_filter)BPF_STMT(BPF_JMP | BPF_JA, Q_CID - (Q_SHORT + 2));
    code[Q_LONG] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_B | BPF_ABS, 5); /* its length */
    code[Q_LONG + 1] =
        (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, off + CID_STEER_BYTES, 1, 0);
    code[Q_LONG + 2] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, 0xffffffffu);
    code[Q_LONG + 3] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, 6 + off); /* at 6 */
    code[Q_CID] = (struct sock_filter)BPF_STMT(BPF_ALU | BPF_MUL | BPF_K, CID_STEER_MUL);
    code[Q_CID + 1] = (struct sock_filter)BPF_STMT(BPF_ALU | BPF_RSH | BPF_K, 16);
    code[Q_CID + 2] = (struct sock_filter)BPF_STMT(BPF_ALU | BPF_MOD | BPF_K, n); /* worker */
    _Static_assert(Q_ADDR + 18 == Q_SHORT && Q_LONG + 4 == Q_CID && Q_CID + 3 == Q_TAIL &&
                       Q_TAIL + 1 == STEER_QUIC_LEN,
                   "the QUIC program's parts follow one another");
    if (!order) {
        code[Q_TAIL] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_A, 0);
        return;
    }
    /* Worker w's socket sits at order[w]: a compare and a return per worker in place of the
     * last return, whose last compare always holds (A < n). */
    for (uint32_t w = 0; w < n; w++) {
        code[Q_TAIL + 2 * w] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, w, 0, 1);
        code[Q_TAIL + 1 + 2 * w] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, order[w]);
    }
    code[Q_TAIL + 2 * n] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, 0xffffffffu);
}

int steer_quic_attach(int fd, uint32_t n, const uint32_t *order, uint32_t seed,
                      const struct cid_layout *ids)
{
    if (n == 0)
        return -EINVAL;
    size_t len = steer_quic_len(n, order);
    if (len > BPF_MAXINSNS)
        return -E2BIG;
    struct sock_filter *code = calloc(len, sizeof(*code));
    if (!code)
        return -ENOMEM;
    steer_quic_program(code, n, order, seed, ids);
    int rc = attach(fd, SO_ATTACH_REUSEPORT_CBPF, code, (unsigned short)len);
    free(code);
    return rc;
}

/* The probe's program, for a datagram at off (the group's program sees the UDP payload, a
 * socket's filter the UDP header): a probe with this nonce gets hit (the group's: the index it
 * carries; a socket's: 0, dropped), anything else ~0 (the kernel's hash; kept whole). */
#define PROBE_LEN 13
#define PROBE_BYTES 20 /* the nonce, then the index (network order) */

static void probe_program(struct sock_filter code[PROBE_LEN], uint32_t off, const uint32_t nonce[4],
                          bool group)
{
    /* a hit: the group's program returns the index (11), a socket's filter drops it */
    struct sock_filter hit = group
                                 ? (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, off + 16)
                                 : (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, 0);
    struct sock_filter prog[PROBE_LEN] = {
        /* 0 */ BPF_STMT(BPF_LD | BPF_W | BPF_LEN, 0),
        /* 1 */ BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, off + PROBE_BYTES, 0, 10), /* else to 12 */
        /* 2 */ BPF_STMT(BPF_LD | BPF_W | BPF_ABS, off),
        /* 3 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, nonce[0], 0, 8),
        /* 4 */ BPF_STMT(BPF_LD | BPF_W | BPF_ABS, off + 4),
        /* 5 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, nonce[1], 0, 6),
        /* 6 */ BPF_STMT(BPF_LD | BPF_W | BPF_ABS, off + 8),
        /* 7 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, nonce[2], 0, 4),
        /* 8 */ BPF_STMT(BPF_LD | BPF_W | BPF_ABS, off + 12),
        /* 9 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, nonce[3], 0, 2),
        /* 10 */ hit,
        /* 11 */ BPF_STMT(BPF_RET | BPF_A, 0),
        /* 12 */ BPF_STMT(BPF_RET | BPF_K, 0xffffffffu),
    };
    for (int i = 0; i < PROBE_LEN; i++)
        code[i] = prog[i];
}

/* How many datagrams fd's filter (or a full buffer) dropped so far, or -1. */
static int64_t drops(int fd)
{
    uint32_t mem[SK_MEMINFO_VARS];
    socklen_t len = sizeof(mem);
    if (getsockopt(fd, SOL_SOCKET, SO_MEMINFO, mem, &len) != 0 || len <= SK_MEMINFO_DROPS * 4)
        return -1;
    return mem[SK_MEMINFO_DROPS];
}

/* Sends the probe for index k from tx and returns which of fds dropped it (its count in was
 * before), or -1: none within the deadline, or more than one (a full buffer's drop beside). */
static int probe_one(int tx, const struct sockaddr_storage *to, socklen_t to_len,
                     const uint32_t nonce[4], uint32_t k, const int *fds, uint32_t n,
                     int64_t *before)
{
    uint32_t d[PROBE_BYTES / 4] = {htonl(nonce[0]), htonl(nonce[1]), htonl(nonce[2]),
                                   htonl(nonce[3]), htonl(k)}; /* BPF_W loads are big-endian */
    for (uint32_t i = 0; i < n; i++)
        before[i] = drops(fds[i]);
    if (sendto(tx, d, sizeof(d), 0, (const struct sockaddr *)to, to_len) != sizeof(d))
        return -1;
    /* Loopback delivers within sendto as a rule; a bound (100 ms) for when it does not. */
    for (int tries = 0; tries < 100; tries++) {
        int found = -1, moved = 0;
        for (uint32_t i = 0; i < n; i++) {
            int64_t now = drops(fds[i]);
            if (now < 0)
                return -1;
            if (now != before[i])
                found = (int)i, moved++;
        }
        if (moved > 0)
            return moved == 1 ? found : -1;
        nanosleep(&(struct timespec){0, 1000000}, NULL);
    }
    return -1;
}

int steer_quic_order(const int *fds, uint32_t n, uint32_t order[])
{
    if (n == 0)
        return -EINVAL;
    struct sockaddr_storage to;
    socklen_t to_len = sizeof(to);
    if (getsockname(fds[0], (struct sockaddr *)&to, &to_len) != 0)
        return -errno;
    /* A wildcard bind: the probe goes to loopback, which the wildcard's group receives. */
    if (to.ss_family == AF_INET) {
        struct sockaddr_in *a = (struct sockaddr_in *)&to;
        if (a->sin_addr.s_addr == htonl(INADDR_ANY))
            a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    } else if (to.ss_family == AF_INET6) {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)&to;
        if (IN6_IS_ADDR_UNSPECIFIED(&a->sin6_addr))
            a->sin6_addr = in6addr_loopback;
    } else {
        return -EAFNOSUPPORT;
    }
    uint32_t nonce[4];
    if (getrandom(nonce, sizeof(nonce), 0) != sizeof(nonce))
        return -EAGAIN;
    struct sock_filter group[PROBE_LEN], mine[PROBE_LEN];
    probe_program(group, 0, nonce, true);
    probe_program(mine, 8 /* the UDP header */, nonce, false);
    int64_t *before = calloc(n, sizeof(*before));
    int tx = socket(to.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, IPPROTO_UDP);
    int rc = !before ? -ENOMEM : tx < 0 ? -errno : 0;
    uint32_t filtered = 0;
    for (; rc == 0 && filtered < n; filtered++)
        rc = attach(fds[filtered], SO_ATTACH_FILTER, mine, PROBE_LEN);
    if (rc == 0)
        rc = attach(fds[0], SO_ATTACH_REUSEPORT_CBPF, group, PROBE_LEN);
    for (uint32_t i = 0; rc == 0 && i < n; i++)
        order[i] = UINT32_MAX;
    /* Twice: the second round confirms the first (a drop of a full buffer in the first could
     * have been taken for a probe's). */
    for (int round = 0; rc == 0 && round < 2; round++)
        for (uint32_t k = 0; rc == 0 && k < n; k++) {
            int w = probe_one(tx, &to, to_len, nonce, k, fds, n, before);
            if (w < 0 || (round == 0 && order[w] != UINT32_MAX) || (round == 1 && order[w] != k))
                rc = -EAGAIN;
            else
                order[w] = k;
        }
    steer_detach(fds[0]);
    for (uint32_t i = 0; i < filtered; i++)
        (void)setsockopt(fds[i], SOL_SOCKET, SO_DETACH_FILTER, NULL, 0);
    if (tx >= 0)
        close(tx);
    free(before);
    return rc;
}

void steer_detach(int fd)
{
    int zero = 0;
    (void)setsockopt(fd, SOL_SOCKET, SO_DETACH_REUSEPORT_BPF, &zero, sizeof(zero));
}
