/* caps: what this kernel offers the engines, found once per process before any worker starts,
 * and the decision whether the io_uring engine can run on it.
 * Must not: probe again after start (workers read the struct, never the kernel), or decide
 * anything but "usable, or which requirement failed and why".
 * Ownership: server owns one struct engine_caps, filled by engine_choose before the workers
 * start and read-only (const) for them after. */
#ifndef ENGINE_CAPS_H
#define ENGINE_CAPS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* Operations the io_uring engine uses; the bits of engine_caps.ops. */
enum caps_op {
    CAPS_OP_ACCEPT,
    CAPS_OP_RECV,
    CAPS_OP_SEND,
    CAPS_OP_SENDMSG,
    CAPS_OP_POLL_ADD,
    CAPS_OP_ASYNC_CANCEL,
    CAPS_OP_CLOSE,
    CAPS_OP_READ,
    CAPS_OP_TIMEOUT,
    CAPS_OP_SHUTDOWN,
    CAPS_OP_SPLICE, /* optional: without it, files go by sendfile */
    CAPS_OP_COUNT,
};

/* Setup modes, strongest first; the bits of engine_caps.setup. */
#define CAPS_SETUP_SINGLE_ISSUER 0x1 /* with DEFER_TASKRUN and SUBMIT_ALL (6.1) */
#define CAPS_SETUP_COOP_TASKRUN 0x2  /* with SUBMIT_ALL (5.19) */

/* Whether a feature was tried, and how that went. */
enum caps_result {
    CAPS_UNTRIED = 0, /* an earlier requirement failed, or the engine was not probed */
    CAPS_OK,
    CAPS_FAILED, /* the kernel refused; err says how */
};

struct caps_try {
    enum caps_result result;
    int err; /* -errno the kernel answered, when CAPS_FAILED */
};

struct engine_caps {
    bool probed;                /* the io_uring probe ran (not for --engine epoll) */
    struct caps_try ring;       /* io_uring_setup with the flags below + CQSIZE + R_DISABLED */
    unsigned setup;             /* CAPS_SETUP_* the kernel accepted; 0: plain flags */
    unsigned features;          /* the kernel's IORING_FEAT_* bits */
    uint32_t ops;               /* bit (1 << enum caps_op) per opcode the kernel's probe lists */
    struct caps_try buf_ring;   /* registering a provided buffer ring (5.19) */
    struct caps_try accept_ms;  /* a multishot accept, on a real listener (5.19) */
    struct caps_try recv_ms;    /* a multishot recv into the buffer ring, with data (6.0) */
    struct caps_try cancel_all; /* ASYNC_CANCEL by fd with IORING_ASYNC_CANCEL_ALL (5.19) */
    bool cqe_skip;              /* IOSQE_CQE_SKIP_SUCCESS (IORING_FEAT_CQE_SKIP, 5.17) */
    /* Kernel TLS, for the TLS transport: "tls" is a TCP upper-layer protocol here, seen in
     * /proc/sys/net/ipv4/tcp_available_ulp or accepted by setsockopt(TCP_ULP) on a connected
     * loopback socket (which loads the module where it can be loaded). */
    bool tls_ulp;
    const char *tls_how; /* how that was found, or why not */
    /* The ciphers the kernel then seals with, tried for real (TLS_TX with dummy keys on a
     * loopback connection: the ULP can be there while the crypto module a cipher needs cannot
     * be loaded): bit (type - TLS_CIPHER_AES_GCM_128) per linux/tls.h cipher_type that worked,
     * among AES-128-GCM, AES-256-GCM and ChaCha20-Poly1305; ktls_err what the first refusal
     * said (-errno), or 0. */
    unsigned ktls_ciphers;
    int ktls_err;
};

/* Whether the io_uring engine can run with what caps records: 0, or -errno of the first
 * requirement that failed with *why naming it (a static string). Pure: reads only caps. */
int caps_decide(const struct engine_caps *caps, const char **why);

/* The io_uring opcode's name for a caps_op ("ACCEPT"...). */
const char *caps_op_name(enum caps_op op);

/* Whether the opcode op is listed by the kernel. */
static inline bool caps_has_op(const struct engine_caps *caps, enum caps_op op)
{
    return caps->ops & (1u << op);
}

/* Fills tls_ulp, tls_how, ktls_ciphers and ktls_err; needs no ring, so every engine gets it. */
void caps_probe_tls(struct engine_caps *caps);

/* The names of caps->ktls_ciphers, space-separated, in buf. */
const char *caps_ktls_names(const struct engine_caps *caps, char *buf, size_t len);

/* Prints caps, several lines each starting "ringhttpd: ", for -v. */
void caps_print(const struct engine_caps *caps, FILE *f);

#endif
