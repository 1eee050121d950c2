/* noiouring: run a program with io_uring forbidden, as Docker's default seccomp profile does.
 * Must not: touch any other system call, need libseccomp, or survive as a process of its own
 *   (it installs the filter and execs; the filter then belongs to the program and its children).
 * Ownership: single-threaded and short-lived; everything it builds lives on its stack.
 *
 * Usage: noiouring [--errno EPERM|ENOSYS|EINVAL|EACCES] [--register-op N] [--] PROGRAM [ARGS...]
 *
 * io_uring_setup, io_uring_enter and io_uring_register then fail with the chosen errno (default
 * EPERM, which is what Docker and containerd answer; ENOSYS is what an old kernel answers).
 * With --register-op N only io_uring_register(fd, N, ...) fails, and the rest of io_uring works:
 * with EINVAL that is how a kernel older than that registration answers (N = 22,
 * IORING_REGISTER_PBUF_RING: a 5.18 kernel without provided buffer rings).
 * A system call made through an ABI this filter was not built for (i386 or x32 on x86_64, arm32
 * on aarch64) kills the process instead of being allowed, so a test can never pass by going
 * around the filter. Exit status: 2 on a usage error, 1 when the filter cannot be installed,
 * 126/127 when PROGRAM cannot be run (as env(1) does), otherwise PROGRAM's own.
 */
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__x86_64__)
#define NATIVE_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define NATIVE_ARCH AUDIT_ARCH_AARCH64
#else
#error "noiouring knows the system call numbers of x86_64 and aarch64 only"
#endif

/* Before Linux 5.1 headers these are missing; the numbers are the same on every architecture. */
#ifndef __NR_io_uring_setup
#define __NR_io_uring_setup 425
#endif
#ifndef __NR_io_uring_enter
#define __NR_io_uring_enter 426
#endif
#ifndef __NR_io_uring_register
#define __NR_io_uring_register 427
#endif

/* x32 system calls arrive with AUDIT_ARCH_X86_64 and this bit set in the number. */
#define X32_SYSCALL_BIT 0x40000000u

struct errno_name {
    const char *name;
    int value;
};

static const struct errno_name errno_names[] = {
    {"EPERM", EPERM},
    {"ENOSYS", ENOSYS},
    {"EINVAL", EINVAL},
    {"EACCES", EACCES},
};

static void usage(FILE *out)
{
    fprintf(out, "usage: noiouring [--errno EPERM|ENOSYS|EINVAL|EACCES] [--register-op N] [--]\n"
                 "                 PROGRAM [ARGS...]\n"
                 "Runs PROGRAM with io_uring_setup, io_uring_enter and io_uring_register failing\n"
                 "with the given errno (default EPERM), through a seccomp filter; with\n"
                 "--register-op N only io_uring_register's opcode N fails.\n");
}

/* Returns the errno value named by name, or 0 when the name is not one we accept. */
static int parse_errno(const char *name)
{
    for (size_t i = 0; i < sizeof errno_names / sizeof errno_names[0]; i++)
        if (strcmp(name, errno_names[i].name) == 0)
            return errno_names[i].value;
    return 0;
}

/* Installs the filter on the calling thread; returns 0 or -errno. register_op >= 0: only that
 * io_uring_register opcode is denied. */
static int install_filter(int err, long register_op)
{
    const __u32 deny = SECCOMP_RET_ERRNO | ((__u32)err & SECCOMP_RET_DATA);
    struct sock_filter code[] = {
        /* [0] Foreign ABIs have other numbers: refuse to guess, end the process. */
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        /* [1] */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, NATIVE_ARCH, 1, 0),
        /* [2] */ BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
        /* [3] */ BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
#if defined(__x86_64__)
        /* [4] x32 shares the native arch value; its numbers carry X32_SYSCALL_BIT. */
        BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, X32_SYSCALL_BIT, 0, 1),
        /* [5] */ BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
#endif
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 3, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_enter, 2, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_register, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_RET | BPF_K, deny),
    };
    /* The same, but only io_uring_register with opcode (its second argument, whose low word
     * comes first on these little-endian ABIs) register_op is denied. */
    struct sock_filter one_op[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, NATIVE_ARCH, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
#if defined(__x86_64__)
        BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, X32_SYSCALL_BIT, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
#endif
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_register, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[1])),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (__u32)register_op, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_RET | BPF_K, deny),
    };
    struct sock_fprog prog = {
        .len = (unsigned short)(sizeof code / sizeof code[0]),
        .filter = code,
    };
    if (register_op >= 0) {
        prog.len = (unsigned short)(sizeof one_op / sizeof one_op[0]);
        prog.filter = one_op;
    }

    /* Without it an unprivileged process may not install a filter, and with it exec cannot
     * gain privileges the filter was not written for. */
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
        return -errno;
    if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) == 0)
        return 0;
    if (errno != ENOSYS)
        return -errno;
    /* Kernels before 3.17 have no seccomp(2), only the prctl. */
    if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0) != 0)
        return -errno;
    return 0;
}

int main(int argc, char **argv)
{
    int err = EPERM;
    long register_op = -1;
    int i = 1;

    while (i < argc && argv[i][0] == '-') {
        if (strcmp(argv[i], "--") == 0) {
            i++;
            break;
        }
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            usage(stdout);
            return 0;
        }
        if (strcmp(argv[i], "--errno") == 0) {
            if (i + 1 >= argc) {
                fprintf(stderr, "noiouring: --errno needs a value\n");
                usage(stderr);
                return 2;
            }
            err = parse_errno(argv[i + 1]);
            if (err == 0) {
                fprintf(stderr, "noiouring: unknown errno name '%s'\n", argv[i + 1]);
                usage(stderr);
                return 2;
            }
            i += 2;
            continue;
        }
        if (strcmp(argv[i], "--register-op") == 0) {
            char *end = NULL;
            register_op = i + 1 < argc ? strtol(argv[i + 1], &end, 10) : -1;
            if (register_op < 0 || register_op > 255 || !end || *end != '\0' ||
                end == argv[i + 1]) {
                fprintf(stderr, "noiouring: --register-op needs an opcode from 0 to 255\n");
                usage(stderr);
                return 2;
            }
            i += 2;
            continue;
        }
        fprintf(stderr, "noiouring: unknown option '%s'\n", argv[i]);
        usage(stderr);
        return 2;
    }
    if (i >= argc) {
        fprintf(stderr, "noiouring: no program to run\n");
        usage(stderr);
        return 2;
    }

    int ret = install_filter(err, register_op);
    if (ret < 0) {
        fprintf(stderr, "noiouring: cannot install the seccomp filter: %s\n", strerror(-ret));
        return 1;
    }
    execvp(argv[i], &argv[i]);
    ret = errno;
    fprintf(stderr, "noiouring: cannot run '%s': %s\n", argv[i], strerror(ret));
    return ret == ENOENT ? 127 : 126;
}
