/* Engine selection, once per process; see engine.h. */
#include "engine/engine.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "config/config.h"
#include "engine/caps.h"

static const char *errno_name(int err)
{
    switch (err) {
    case ENOSYS:
        return "ENOSYS";
    case EPERM:
        return "EPERM";
    case EINVAL:
        return "EINVAL";
    case EACCES:
        return "EACCES";
    case ENOMEM:
        return "ENOMEM";
    case EMFILE:
        return "EMFILE";
    default:
        return "error";
    }
}

const struct engine_ops *engine_choose(int kind, bool verbose, struct engine_caps *caps)
{
    *caps = (struct engine_caps){0};
    caps_probe_tls(caps);
    if (kind != ENGINE_EPOLL)
        uring_probe(caps);
    if (verbose)
        caps_print(caps, stderr);
    if (kind == ENGINE_EPOLL)
        return &engine_epoll;
    const char *why = "";
    int rc = caps_decide(caps, &why);
    if (rc == 0)
        return &engine_uring;
    if (kind == ENGINE_URING) {
        fprintf(stderr, "ringhttpd: --engine uring: io_uring is unavailable: %s (%s: %s)\n", why,
                errno_name(-rc), strerror(-rc));
        return NULL;
    }
    fprintf(stderr, "ringhttpd: io_uring unavailable: %s (%s: %s); falling back to epoll\n", why,
            errno_name(-rc), strerror(-rc));
    return &engine_epoll;
}
