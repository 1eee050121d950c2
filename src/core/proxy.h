/* proxy: reads the PROXY protocol header (HAProxy's proxy-protocol.txt, versions 1 and 2) an L4
 * balancer puts before a connection's first byte: the client's address and port, the address
 * it connected to, and in version 2 the ALPN and authority (SNI) the balancer saw.
 * Must not: perform I/O, allocate, or read at or past buf[len]; trust anything (the caller
 * decides whether the peer may send a header at all: --proxy-protocol-from).
 * Ownership: the result's pointers (alpn, authority) point into the caller's buffer. */
#ifndef CORE_PROXY_H
#define CORE_PROXY_H

#include <stddef.h>
#include <stdint.h>

/* A version 1 header is at most 107 bytes, CRLF included (proxy-protocol.txt 2.1). */
#define PROXY_V1_MAX 107
/* Version 2: the 16 fixed bytes and at most this many more (addresses and TLVs). A balancer's
 * TLVs (AWS's VPC endpoint ID, a TLS sub-block) are a few hundred bytes; the format allows
 * 65,535, which a connection must not make us hold. */
#define PROXY_V2_MAX_BODY 2048

enum proxy_cmd {
    PROXY_FORWARDED, /* the addresses are the client's and the balancer's listener */
    PROXY_LOCAL,     /* the balancer's own connection (a health check): use the socket's */
};

struct proxy_info {
    enum proxy_cmd cmd;
    int family; /* AF_INET or AF_INET6; AF_UNSPEC for LOCAL, v1 UNKNOWN or v2 UNSPEC/UNIX */
    uint8_t src[16], dst[16]; /* network order; IPv4 in the first 4 bytes */
    uint16_t src_port, dst_port;
    /* version 2 TLVs (PP2_TYPE_ALPN, PP2_TYPE_AUTHORITY), or NULL/0 */
    const uint8_t *alpn;
    size_t alpn_len;
    const uint8_t *authority;
    size_t authority_len;
    int version; /* 1 or 2 */
};

/* The results besides a byte count. */
enum {
    PROXY_PARTIAL = 0,    /* a prefix of a header: read more */
    PROXY_NOT_PROXY = -1, /* the bytes are no PROXY header (a client that sent none) */
    PROXY_MALFORMED = -2, /* a header that breaks the format */
    PROXY_TOO_LONG = -3,  /* v1 without CRLF in 107 bytes; v2 body past PROXY_V2_MAX_BODY */
};

/* Reads a header from buf[0..len): the bytes it takes (> 0, the first byte after it is the
 * connection's own), with *out filled; or one of the results above. Only the first header
 * is read: what follows it is data, even if it looks like another. */
int proxy_parse(const uint8_t *buf, size_t len, struct proxy_info *out);

/* The result's name for a log line ("not a PROXY header", "malformed PROXY header"...). */
const char *proxy_strerror(int rc);

#endif
