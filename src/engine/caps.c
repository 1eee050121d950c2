/* Capabilities: the decision and the -v report, from one struct the probe filled; see caps.h.
 * The io_uring probe itself (rings, real operations) lives in uring.c, which owns the ring
 * calls; this file reads its results and needs none of them, so unit tests feed it fakes. */
#include "engine/caps.h"

#include <errno.h>
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

void caps_probe_tls(struct engine_caps *caps)
{
    caps->tls_ulp = false;
    caps->tls_how = "not in tcp_available_ulp, and TCP_ULP \"tls\" refused";
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
            return;
        }
    }
    /* Not loaded yet perhaps: attaching the ULP to a connected socket loads the module where
     * the kernel can (it must be connected: TCP_ULP "tls" is refused on a listener). */
    int lfd = -1, cfd = -1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof(a);
    lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (lfd < 0 || bind(lfd, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(lfd, 1) != 0 ||
        getsockname(lfd, (struct sockaddr *)&a, &alen) != 0) {
        caps->tls_how = "not in tcp_available_ulp (no loopback socket to try TCP_ULP on)";
        goto out;
    }
    cfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (cfd < 0 || connect(cfd, (struct sockaddr *)&a, sizeof(a)) != 0) {
        caps->tls_how = "not in tcp_available_ulp (no loopback connection to try TCP_ULP on)";
        goto out;
    }
    if (setsockopt(cfd, IPPROTO_TCP, TCP_ULP, "tls", sizeof("tls")) == 0) {
        caps->tls_ulp = true;
        caps->tls_how = "TCP_ULP \"tls\" accepted by a loopback socket";
    }
out:
    if (cfd >= 0)
        close(cfd);
    if (lfd >= 0)
        close(lfd);
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
    fprintf(f, "ringhttpd: kernel TLS (tls ULP): %s, %s\n", caps->tls_ulp ? "yes" : "no",
            caps->tls_how ? caps->tls_how : "not probed");
}
