/* Capabilities: the decision and the -v report, from one struct the probe filled; see caps.h.
 * The io_uring probe itself (rings, real operations) lives in uring.c, which owns the ring
 * calls; this file reads its results and needs none of them, so unit tests feed it fakes. */
#include "engine/caps.h"

#include <errno.h>
#include <linux/tls.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#ifndef TCP_ULP
#define TCP_ULP 31
#endif

static const char *const op_names[CAPS_OP_COUNT] = {
    [CAPS_OP_ACCEPT] = "ACCEPT",     [CAPS_OP_RECV] = "RECV",
    [CAPS_OP_SEND] = "SEND",         [CAPS_OP_SENDMSG] = "SENDMSG",
    [CAPS_OP_POLL_ADD] = "POLL_ADD", [CAPS_OP_ASYNC_CANCEL] = "ASYNC_CANCEL",
    [CAPS_OP_CLOSE] = "CLOSE",       [CAPS_OP_READ] = "READ",
    [CAPS_OP_TIMEOUT] = "TIMEOUT",   [CAPS_OP_SHUTDOWN] = "SHUTDOWN",
    [CAPS_OP_SPLICE] = "SPLICE",
};

const char *caps_op_name(enum caps_op op)
{
    return (unsigned)op < CAPS_OP_COUNT ? op_names[op] : "?";
}

/* A tried feature that did not work: its error, or EINVAL when it was never tried (a probe that
 * stopped early has already failed on an earlier requirement, so this is not reached then). */
static int try_err(const struct caps_try *t)
{
    return t->err < 0 ? t->err : -EINVAL;
}

int caps_decide(const struct engine_caps *caps, const char **why)
{
    /* Each requirement in the order the probe tries them; the message names the kernel that
     * brought it, because the usual reason for a refusal is an older one. */
    static const struct {
        size_t off;
        const char *why;
    } tries[] = {
        {offsetof(struct engine_caps, buf_ring),
         "registering a provided buffer ring failed (needs kernel 5.19)"},
        {offsetof(struct engine_caps, accept_ms), "a multishot accept failed (needs kernel 5.19)"},
        {offsetof(struct engine_caps, recv_ms),
         "a multishot recv into a buffer ring failed (needs kernel 6.0)"},
        {offsetof(struct engine_caps, cancel_all),
         "cancelling every operation of an fd failed (needs kernel 5.19)"},
    };
    if (!caps->probed) {
        *why = "io_uring was not probed";
        return -EINVAL;
    }
    if (caps->ring.result != CAPS_OK) {
        *why = "io_uring_setup failed";
        return try_err(&caps->ring);
    }
    for (int op = 0; op < CAPS_OP_COUNT; op++) {
        if (op != CAPS_OP_SPLICE && !caps_has_op(caps, (enum caps_op)op)) {
            *why = "an opcode the engine needs is missing";
            return -EINVAL;
        }
    }
    for (size_t i = 0; i < sizeof(tries) / sizeof(tries[0]); i++) {
        const struct caps_try *t = (const struct caps_try *)((const char *)caps + tries[i].off);
        if (t->result != CAPS_OK) {
            *why = tries[i].why;
            return try_err(t);
        }
    }
    *why = "";
    return 0;
}

/* A socket connected to the loopback listener lfd (at a), with the tls ULP attached when ulp:
 * the fd, or -1 (with *ulp_err, when the ULP was refused). */
static int loopback_conn(const struct sockaddr_in *a, bool ulp, int *ulp_err)
{
    int cfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (cfd < 0 || connect(cfd, (const struct sockaddr *)a, sizeof(*a)) != 0) {
        if (cfd >= 0)
            close(cfd);
        return -1;
    }
    if (ulp && setsockopt(cfd, IPPROTO_TCP, TCP_ULP, "tls", sizeof("tls")) != 0) {
        *ulp_err = -errno;
        close(cfd);
        return -1;
    }
    return cfd;
}

/* TLS_TX with each cipher's keys (zeros: only whether the kernel takes them matters) on a
 * connection of its own, as a TLS connection would switch. */
static void probe_ciphers(struct engine_caps *caps, const struct sockaddr_in *a)
{
    static const struct {
        uint16_t type;
        socklen_t len;
    } ciphers[] = {
        {TLS_CIPHER_AES_GCM_128, sizeof(struct tls12_crypto_info_aes_gcm_128)},
        {TLS_CIPHER_AES_GCM_256, sizeof(struct tls12_crypto_info_aes_gcm_256)},
        {TLS_CIPHER_CHACHA20_POLY1305, sizeof(struct tls12_crypto_info_chacha20_poly1305)},
    };
    for (size_t i = 0; i < sizeof(ciphers) / sizeof(ciphers[0]); i++) {
        int err = 0, cfd = loopback_conn(a, true, &err);
        union {
            struct tls_crypto_info info;
            unsigned char bytes[64];
        } keys = {.bytes = {0}};
        keys.info.version = TLS_1_3_VERSION;
        keys.info.cipher_type = ciphers[i].type;
        if (cfd >= 0 && setsockopt(cfd, SOL_TLS, TLS_TX, &keys, ciphers[i].len) == 0)
            caps->ktls_ciphers |= 1u << (ciphers[i].type - TLS_CIPHER_AES_GCM_128);
        else if (!caps->ktls_err)
            caps->ktls_err = cfd >= 0 ? -errno : err ? err : -ENOTCONN;
        if (cfd >= 0)
            close(cfd);
    }
}

void caps_probe_tls(struct engine_caps *caps)
{
    caps->tls_ulp = false;
    caps->tls_how = "not in tcp_available_ulp, and TCP_ULP \"tls\" refused";
    caps->ktls_ciphers = 0;
    caps->ktls_err = 0;
    char list[256] = "";
    FILE *f = fopen("/proc/sys/net/ipv4/tcp_available_ulp", "re");
    if (f) {
        if (!fgets(list, sizeof(list), f))
            list[0] = '\0';
        fclose(f);
    }
    char *save = NULL;
    for (char *tok = strtok_r(list, " \n", &save); tok; tok = strtok_r(NULL, " \n", &save)) {
        if (strcmp(tok, "tls") == 0) {
            caps->tls_ulp = true;
            caps->tls_how = "listed in tcp_available_ulp";
        }
    }
    /* Not loaded yet perhaps: attaching the ULP to a connected socket loads the module where
     * the kernel can (it must be connected: TCP_ULP "tls" is refused on a listener). */
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof(a);
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (lfd < 0 || bind(lfd, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(lfd, 4) != 0 ||
        getsockname(lfd, (struct sockaddr *)&a, &alen) != 0) {
        if (!caps->tls_ulp)
            caps->tls_how = "not in tcp_available_ulp (no loopback socket to try TCP_ULP on)";
        goto out;
    }
    if (!caps->tls_ulp) {
        int err = 0, cfd = loopback_conn(&a, true, &err);
        if (cfd >= 0) {
            caps->tls_ulp = true;
            caps->tls_how = "TCP_ULP \"tls\" accepted by a loopback socket";
            close(cfd);
        } else if (!err) {
            caps->tls_how = "not in tcp_available_ulp (no loopback connection to try TCP_ULP on)";
        }
    }
    if (caps->tls_ulp)
        probe_ciphers(caps, &a);
out:
    if (lfd >= 0)
        close(lfd);
}

const char *caps_ktls_names(const struct engine_caps *caps, char *buf, size_t len)
{
    static const char *const names[] = {"AES-128-GCM", "AES-256-GCM", "", "ChaCha20-Poly1305"};
    size_t used = 0;
    buf[0] = '\0';
    for (unsigned i = 0; i < sizeof(names) / sizeof(names[0]) && used < len; i++)
        if (caps->ktls_ciphers & (1u << i))
            used += (size_t)snprintf(buf + used, len - used, "%s%s", used ? " " : "", names[i]);
    return buf;
}

static const char *result_name(const struct caps_try *t, char *buf, size_t len)
{
    if (t->result == CAPS_OK)
        return "yes";
    if (t->result == CAPS_UNTRIED)
        return "untried";
    snprintf(buf, len, "no (%s)", strerror(-t->err));
    return buf;
}

void caps_print(const struct engine_caps *caps, FILE *f)
{
    if (caps->probed) {
        char b1[64], b2[64], b3[64], b4[64], b5[64];
        const char *why;
        int rc = caps_decide(caps, &why);
        fprintf(f, "ringhttpd: io_uring: ring %s, setup %s, features 0x%x%s\n",
                result_name(&caps->ring, b1, sizeof(b1)),
                caps->setup & CAPS_SETUP_SINGLE_ISSUER  ? "SINGLE_ISSUER|DEFER_TASKRUN|SUBMIT_ALL"
                : caps->setup & CAPS_SETUP_COOP_TASKRUN ? "COOP_TASKRUN|SUBMIT_ALL"
                                                        : "plain",
                caps->features, caps->cqe_skip ? " (CQE_SKIP)" : "");
        fprintf(f, "ringhttpd: io_uring: opcodes");
        for (int op = 0; op < CAPS_OP_COUNT; op++)
            fprintf(f, " %s%s", caps_has_op(caps, (enum caps_op)op) ? "" : "-",
                    caps_op_name((enum caps_op)op));
        fprintf(f, "\n");
        fprintf(f,
                "ringhttpd: io_uring: tried: buffer ring %s, multishot accept %s, multishot recv "
                "%s, cancel fd/all %s\n",
                result_name(&caps->buf_ring, b2, sizeof(b2)),
                result_name(&caps->accept_ms, b3, sizeof(b3)),
                result_name(&caps->recv_ms, b4, sizeof(b4)),
                result_name(&caps->cancel_all, b5, sizeof(b5)));
        if (rc == 0)
            fprintf(f, "ringhttpd: io_uring: usable\n");
        else
            fprintf(f, "ringhttpd: io_uring: not usable: %s (%s)\n", why, strerror(-rc));
    } else {
        fprintf(f, "ringhttpd: io_uring: not probed\n");
    }
    char names[96];
    fprintf(f, "ringhttpd: kernel TLS (tls ULP): %s, %s", caps->tls_ulp ? "yes" : "no",
            caps->tls_how ? caps->tls_how : "not probed");
    if (caps->tls_ulp)
        fprintf(f, "; ciphers it seals: %s%s%s", caps_ktls_names(caps, names, sizeof(names)),
                caps->ktls_err ? "; refused: " : "",
                caps->ktls_err ? strerror(-caps->ktls_err) : "");
    fprintf(f, "\n");
}
