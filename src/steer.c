/* steer: see steer.h. Classic BPF (SO_ATTACH_REUSEPORT_CBPF, Linux 4.5) needs no libbpf and no
 * privilege. The program runs on the SYN with its data at the TCP payload; SKF_NET_OFF reaches
 * back to the IP header, where the source address is. Cost: one program per SYN, ~17
 * instructions (nothing per request).
 *
 * QUIC: the program runs on every datagram with its data at the UDP payload, where the
 * connection ID is; ~10 instructions a datagram. nginx's quic_bpf does the same with eBPF, a
 * sockmap and a lookup keyed by the ID (needs CAP_BPF or root, and libbpf); classic BPF has no
 * map, so the index is a function of the ID alone and the server makes its IDs to fit. */
#include "steer.h"

#include <errno.h>
#include <sys/socket.h>

#ifndef SO_DETACH_REUSEPORT_BPF
#define SO_DETACH_REUSEPORT_BPF 68 /* Linux 5.3; older headers lack it */
#endif

/* Knuth's multiplicative hash constant (2^32 / phi): the product's high bits depend on every
 * bit of the address, and the low 16 of them are dropped before the modulo. */
#define STEER_MUL 0x9e3779b1u

void steer_program(struct sock_filter code[STEER_LEN], uint32_t n, uint32_t seed)
{
    const uint32_t net = (uint32_t)SKF_NET_OFF;
    struct sock_filter prog[STEER_LEN] = {
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
        /* 16 */ BPF_STMT(BPF_RET | BPF_A, 0),
        /* 17 */ BPF_STMT(BPF_RET | BPF_K, 0xffffffffu), /* past the end: the kernel's hash */
    };
    for (int i = 0; i < STEER_LEN; i++)
        code[i] = prog[i];
}

int steer_attach(int fd, uint32_t n, uint32_t seed)
{
    struct sock_filter code[STEER_LEN];
    if (n == 0)
        return -EINVAL;
    steer_program(code, n, seed);
    struct sock_fprog prog = {.len = STEER_LEN, .filter = code};
    if (setsockopt(fd, SOL_SOCKET, SO_ATTACH_REUSEPORT_CBPF, &prog, sizeof(prog)) != 0)
        return -errno;
    return 0;
}

/* The inverse of STEER_MUL modulo 2^32: steer_cid_make goes from the wanted product back to
 * the ID's bytes. */
#define STEER_MUL_INV 0x0e8b2f51u
_Static_assert((uint32_t)(STEER_MUL *STEER_MUL_INV) == 1u, "STEER_MUL_INV inverts STEER_MUL");

void steer_quic_program(struct sock_filter code[STEER_QUIC_LEN], uint32_t n)
{
    struct sock_filter prog[STEER_QUIC_LEN] = {
        /* 0 */ BPF_STMT(BPF_LD | BPF_B | BPF_ABS, 0),            /* the first byte */
        /* 1 */ BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, 0x80, 2, 0), /* long header: to 4 */
        /* 2 */ BPF_STMT(BPF_LD | BPF_W | BPF_ABS, 1),            /* short: the ID at 1 */
        /* 3 */ BPF_STMT(BPF_JMP | BPF_JA, 3),                    /* to 7 */
        /* 4 */ BPF_STMT(BPF_LD | BPF_B | BPF_ABS, 5),            /* long: the ID's length */
        /* 5 */ BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, STEER_CID_BYTES, 0, 5), /* else to 11 */
        /* 6 */ BPF_STMT(BPF_LD | BPF_W | BPF_ABS, 6),                      /* the ID at 6 */
        /* 7 */ BPF_STMT(BPF_ALU | BPF_MUL | BPF_K, STEER_MUL),
        /* 8 */ BPF_STMT(BPF_ALU | BPF_RSH | BPF_K, 16),
        /* 9 */ BPF_STMT(BPF_ALU | BPF_MOD | BPF_K, n),
        /* 10 */ BPF_STMT(BPF_RET | BPF_A, 0),
        /* 11 */ BPF_STMT(BPF_RET | BPF_K, 0xffffffffu), /* past the end: the kernel's hash */
    };
    for (int i = 0; i < STEER_QUIC_LEN; i++)
        code[i] = prog[i];
}

int steer_quic_attach(int fd, uint32_t n)
{
    struct sock_filter code[STEER_QUIC_LEN];
    if (n == 0)
        return -EINVAL;
    steer_quic_program(code, n);
    struct sock_fprog prog = {.len = STEER_QUIC_LEN, .filter = code};
    if (setsockopt(fd, SOL_SOCKET, SO_ATTACH_REUSEPORT_CBPF, &prog, sizeof(prog)) != 0)
        return -errno;
    return 0;
}

void steer_detach(int fd)
{
    int zero = 0;
    (void)setsockopt(fd, SOL_SOCKET, SO_DETACH_REUSEPORT_BPF, &zero, sizeof(zero));
}

/* BPF_W loads are big-endian. */
static uint32_t be32(const uint8_t p[4])
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

uint32_t steer_cid_index(const uint8_t cid[STEER_CID_BYTES], uint32_t n)
{
    return ((be32(cid) * STEER_MUL) >> 16) % n;
}

void steer_cid_make(uint8_t cid[STEER_CID_BYTES], uint32_t index, uint32_t n)
{
    /* The product's high half is moved to the nearest value that is index modulo n (its low
     * half and the rest of the ID stay random); multiplying by the inverse gives the bytes. */
    uint32_t product = be32(cid) * STEER_MUL;
    uint32_t high = product >> 16;
    high = high - high % n + index;
    if (high > 0xffffu)
        high -= n;
    uint32_t w = ((high << 16) | (product & 0xffffu)) * STEER_MUL_INV;
    cid[0] = (uint8_t)(w >> 24);
    cid[1] = (uint8_t)(w >> 16);
    cid[2] = (uint8_t)(w >> 8);
    cid[3] = (uint8_t)w;
}
