/* cert: a secure connection's certificate as each transport answers about it (transport.h's
 * struct cert_ops): TLS's from tls/tls_ctx.h over a struct tls_conn, QUIC's from quic/quic.h
 * over a struct quic_conn, so that the 421 rule above (site/route.c) is written once for both.
 * Must not: decide anything (the rule is route.c's), or keep state: each answer is the
 * library's, asked on the worker's thread that owns the connection. */
#include <stdbool.h>
#include <stddef.h>

#include "conn/transport.h"
#include "tls/tls.h"
#include "tls/tls_ctx.h"
#ifndef RINGHTTPD_NO_HTTP3
#include "quic/quic.h"
#endif

static const char *tls_sni(const void *t)
{
    const char *name = tls_conn_sni(t);
    return name ? name : "";
}

static const char *tls_site_name(const void *t)
{
    return tls_conn_site_name(t);
}

static bool tls_only(const void *t)
{
    return tls_conn_only_cert(t);
}

static bool tls_names(const void *t, const char *host, size_t len)
{
    return tls_conn_names(t, host, len);
}

const struct cert_ops cert_tls = {
    .sni = tls_sni, .site_name = tls_site_name, .only = tls_only, .names = tls_names};

#ifndef RINGHTTPD_NO_HTTP3
static const char *quic_sni_of(const void *t)
{
    return quic_sni(t);
}

static bool quic_only(const void *t)
{
    return quic_cert_only(t);
}

static bool quic_names(const void *t, const char *host, size_t len)
{
    return quic_cert_names(t, host, len);
}

static const char *quic_site_name(const void *t)
{
    return quic_cert_site_name(t);
}

/* The endpoint is given each pair's site with its files (issue 37), so a QUIC certificate is a
 * site's as the TLS port's is, and both transports get the same verdicts. */
const struct cert_ops cert_quic = {
    .sni = quic_sni_of, .site_name = quic_site_name, .only = quic_only, .names = quic_names};
#endif
