/* steer: see steer.h. Classic BPF (SO_ATTACH_REUSEPORT_CBPF, Linux 4.5) needs no libbpf and no
 * privilege. The program runs on the SYN with its data at the TCP payload; SKF_NET_OFF reaches
 * back to the IP header, where the source address is. Cost: one program per SYN, ~17
 * instructions (nothing per request). */
#include "steer.h"

#include <errno.h>
#include <sys/socket.h>

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
