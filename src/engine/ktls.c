/* Kernel TLS's socket options; see ktls.h. */
#include "engine/ktls.h"

#include <errno.h>
#include <linux/tls.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

int ktls_attach(int fd)
{
    return setsockopt(fd, IPPROTO_TCP, TCP_ULP, "tls", sizeof("tls")) == 0 ? 0 : -errno;
}

int ktls_send_keys(int fd, const void *keys, size_t len)
{
    return setsockopt(fd, SOL_TLS, TLS_TX, keys, (socklen_t)len) == 0 ? 0 : -errno;
}
