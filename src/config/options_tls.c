/* The options of HTTP/2, HTTP/3 and TLS: ports, pairs, versions, the fleet's secret files, HSTS:
 * their rows of the one table (options.c walks the areas in --help's order) and their own setters.
 * See options.h; options_int.h has what the areas share. */
#include "config/options.h"
#include "config/options_int.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

/* --tcp-cc: a name as the kernel spells its controllers (TCP_CA_NAME_MAX is 16 with the NUL).
 * Whether this kernel has it is known only when a socket asks: server.c says so at start. */
static int set_tcp_cc(struct config *cfg, const struct option_info *o, char *arg)
{
    size_t n = strspn(arg, "abcdefghijklmnopqrstuvwxyz0123456789_");
    if (n == 0 || arg[n] != '\0' || n > 15)
        return usage_error("--%s wants a congestion control name such as cubic or bbr (see "
                           "/proc/sys/net/ipv4/tcp_available_congestion_control), got '%s'",
                           o->name, arg);
    *(const char **)options_field(cfg, o) = arg;
    return 0;
}

/* A secret file of a repeatable list (the first encrypts or makes tokens, the others still
 * decrypt or check): appended to files[*n], of at most max. */
static int append_secret_file(struct config *cfg, const struct option_info *o, const char **files,
                              int *n, int max, char *arg)
{
    if (!*arg)
        return usage_error("--%s wants a file", o->name);
    if (*n == max)
        return usage_error("--%s: at most %d files; '%s' is one more", o->name, max, arg);
    files[(*n)++] = arg;
    return 0;
}

/* The files are read (and their sizes checked) with the pairs, by tls_ctx_new. */
static int set_ticket_key_file(struct config *cfg, const struct option_info *o, char *arg)
{
    return append_secret_file(cfg, o, cfg->ticket_key_files, &cfg->num_ticket_key_files,
                              CONFIG_MAX_TICKET_KEYS, arg);
}

/* --quic-server-id [ROTATION:]HEX: the server ID every QUIC connection ID carries, for an L4
 * balancer (QUIC-LB's plaintext IDs: 1 to 15 bytes; AWS NLB's are 8, written 0x and 16 hex
 * digits, as its console shows them), and the config rotation codepoint of the ID's first
 * octet (0 to 6; 7 marks IDs no balancer can route). quic/cid.h lays the ID out. */
static int set_quic_server_id(struct config *cfg, const struct option_info *o, char *arg)
{
    const char *p = arg;
    unsigned rotation = 0;
    if (p[0] >= '0' && p[0] <= '9' && p[1] == ':') {
        rotation = (unsigned)(p[0] - '0');
        p += 2;
        if (rotation > CONFIG_QUIC_ROTATION_MAX)
            return usage_error("--%s: config rotation %u: QUIC-LB's are 0 to %d (7 marks IDs no "
                               "balancer can route), got '%s'",
                               o->name, rotation, CONFIG_QUIC_ROTATION_MAX, arg);
    }
    if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X'))
        p += 2;
    size_t digits = strlen(p);
    for (size_t i = 0; i < digits; i++)
        if (!isxdigit((unsigned char)p[i]))
            return usage_error("--%s wants [ROTATION:]HEX like 0x1122334455667788 (hex digits, "
                               "two a byte), got '%s'",
                               o->name, arg);
    if (digits == 0 || digits % 2 || digits / 2 > CONFIG_QUIC_SID_MAX)
        return usage_error("--%s wants 1 to %d bytes in hex (two digits a byte; AWS NLB's are "
                           "8: 16 digits), got %zu digit%s in '%s'",
                           o->name, CONFIG_QUIC_SID_MAX, digits, digits == 1 ? "" : "s", arg);
    for (size_t i = 0; i < digits / 2; i++) {
        char byte[3] = {p[2 * i], p[2 * i + 1], '\0'};
        cfg->quic_sid[i] = (uint8_t)strtoul(byte, NULL, 16);
    }
    cfg->quic_sid_len = (unsigned)(digits / 2);
    cfg->quic_sid_rotation = rotation;
    cfg->quic_server_id = arg;
    return 0;
}

/* The files are read (and their sizes checked) by the server, at start and on reload. */
static int set_quic_secret_file(struct config *cfg, const struct option_info *o, char *arg)
{
    return append_secret_file(cfg, o, cfg->quic_secret_files, &cfg->num_quic_secret_files,
                              CONFIG_MAX_QUIC_SECRETS, arg);
}

/* HTTPS (issue 14). The pairs are checked (files read, keys matched) by tls_ctx_new at start
 * and on every reload, not here; what the options need of each other, config.c's tls_check. */
static int set_tls_port(struct config *cfg, const struct option_info *o, char *arg)
{
    int rc = options_set_number(cfg, o, arg);
    if (rc == 0)
        cfg->tls = true;
    return rc;
}

static int set_tls_cert(struct config *cfg, const struct option_info *o, char *arg)
{
    (void)o;
    int n = cfg->num_tls_certs;
    if (n > 0 && !cfg->tls_certs[n - 1].key)
        return usage_error("--tls-cert '%s': the --tls-cert before it has no --tls-key", arg);
    if (!*arg)
        return usage_error("--tls-cert wants a file%s", "");
    struct config_cert c = {.cert = arg,
                            .cert_line = cfg->src && cfg->src->file ? cfg->src->line : 0};
    if (options_add_cert(cfg, &c) != 0)
        return usage_error("--tls-cert '%s': out of memory", arg);
    if (cfg->src && cfg->src->site)
        cfg->site_tls = true;
    return 0;
}

static int set_tls_key(struct config *cfg, const struct option_info *o, char *arg)
{
    (void)o;
    int n = cfg->num_tls_certs;
    if (n == 0 || cfg->tls_certs[n - 1].key)
        return usage_error("--tls-key '%s' follows no --tls-cert of its own", arg);
    if (!*arg)
        return usage_error("--tls-key wants a file%s", "");
    cfg->tls_certs[n - 1].key = arg;
    cfg->tls_certs[n - 1].key_line = cfg->src && cfg->src->file ? cfg->src->line : 0;
    return 0;
}

static int set_hsts(struct config *cfg, const struct option_info *o, char *arg)
{
    (void)o;
    unsigned long v;
    if (options_parse_uint(arg, 0, 315360000, &v) != 0)
        return usage_error("--hsts wants 0..315360000 seconds (0 tells browsers to "
                           "forget), got '%s'",
                           arg);
    cfg->hsts = true;
    cfg->hsts_max_age = (unsigned)v;
    cfg->hsts_len =
        (size_t)snprintf(cfg->hsts_line, sizeof(cfg->hsts_line),
                         "Strict-Transport-Security: max-age=%u\r\n", cfg->hsts_max_age);
    return 0;
}

/* a is the running configuration, whose tls-port 0 the server replaced by the port it got: a
 * file that still says 0 asks for no other. */
static bool same_tls_port(const struct config *a, const struct config *b)
{
    return a->tls == b->tls && (b->tls_port == 0 || a->tls_port == b->tls_port);
}

static bool same_ticket_keys(const struct config *a, const struct config *b)
{
    return options_same_list(a->ticket_key_files, a->num_ticket_key_files, b->ticket_key_files,
                             b->num_ticket_key_files);
}

static bool same_quic_secrets(const struct config *a, const struct config *b)
{
    return options_same_list(a->quic_secret_files, a->num_quic_secret_files, b->quic_secret_files,
                             b->num_quic_secret_files);
}

static const struct option_info rows[] = {
    {.name = "http2",
     .metavar = "on|off",
     PROCESS,
     FIELD(FIELD_BOOL, http2),
     .set = options_set_onoff,
     .help = "HTTP/2 on the cleartext port for clients that open with its\n"
             "preface (prior knowledge, h2c) and by ALPN over TLS (on)"},
    {.name = "http3",
     .metavar = "on|off",
     PROCESS,
     FIELD(FIELD_BOOL, http3),
     .set = options_set_onoff,
     .help = "HTTP/3 (QUIC) on UDP at the --tls-port number, announced\n"
             "by Alt-Svc on HTTPS responses (on with --tls-port)"},
    {.name = "http3-max-conns",
     .metavar = "N",
     PROCESS,
     FIELD(FIELD_UNSIGNED, http3_max_conns),
     .set = options_set_number,
     .min = 1,
     .max = 1u << 20,
     .wants = "",
     .help = "QUIC connections per worker (1024); past half of it new\n"
             "clients must prove their address first (Retry)"},
    {.name = "http3-gso",
     .metavar = "on|off",
     PROCESS,
     FIELD(FIELD_BOOL, http3_gso),
     .set = options_set_onoff,
     .help = "send HTTP/3's datagrams in batches the kernel splits (UDP\n"
             "GSO) where it can (on); off: one sendmsg per datagram"},
    {.name = "http3-gro",
     .metavar = "on|off",
     PROCESS,
     FIELD(FIELD_BOOL, http3_gro),
     .set = options_set_onoff,
     .help = "receive a client's datagrams in trains the kernel coalesced\n"
             "(UDP GRO) where it can (on); off: one datagram per buffer"},
    /* Issue 42: the default is the measured one (README, HTTP/3; bench/pageload). */
    {.name = "quic-cc",
     .metavar = "NAME",
     PROCESS,
     FIELD(FIELD_INT, quic_cc),
     .set = options_set_choice,
     .choices = (const struct option_choice[]){{"bbr", CONFIG_QUIC_CC_BBR},
                                               {"bbr2", CONFIG_QUIC_CC_BBR2},
                                               {"cubic", CONFIG_QUIC_CC_CUBIC},
                                               {"reno", CONFIG_QUIC_CC_RENO},
                                               {NULL, 0}},
     .wants = "bbr, bbr2, cubic or reno",
     .help = "HTTP/3's congestion controller (ngtcp2's): bbr, bbr2, cubic\n"
             "or reno (cubic); every one is paced"},
    {.name = "tcp-cc",
     .metavar = "NAME",
     PROCESS,
     FIELD(FIELD_STRING, tcp_cc),
     .set = set_tcp_cc,
     .help = "TCP congestion control of the listeners' connections, one\n"
             "of the kernel's (tcp_available_congestion_control; default:\n"
             "the host's net.ipv4.tcp_congestion_control)"},
    {.name = "tls-port",
     .metavar = "PORT",
     PROCESS,
     FIELD(FIELD_PORT, tls_port),
     .same = same_tls_port,
     .set = set_tls_port,
     .max = 65535,
     .wants = "",
     .help = "also serve HTTPS on PORT (same --bind address; 0 picks one)"},
    /* A reload re-reads the pairs the new file names (server.c builds their contexts). */
    {.name = "tls-cert",
     .names_file = OPTFILE_WHOLE,
     .metavar = "FILE",
     SITE,
     .list = LIST_TLS_CERTS,
     .set = set_tls_cert,
     .help = "PEM certificate chain for --tls-port; repeat --tls-cert and\n"
             "--tls-key for more pairs, chosen by SNI (the first is the\n"
             "default; ECDSA and RSA for the same names may both be given)"},
    {.name = "tls-key",
     .names_file = OPTFILE_WHOLE,
     .metavar = "FILE",
     SITE,
     .set = set_tls_key,
     .help = "PEM private key of the --tls-cert before it"},
    {.name = "tls-min",
     .metavar = "VERSION",
     PROCESS,
     FIELD(FIELD_INT, tls_min),
     .set = options_set_choice,
     .choices = (const struct option_choice[]){{"1.2", 12}, {"1.3", 13}, {NULL, 0}},
     .wants = "1.2 or 1.3",
     .help = "1.2 (default: TLS 1.2 and 1.3, Mozilla's intermediate\n"
             "profile) or 1.3 (TLS 1.3 only, Mozilla's modern profile)"},
    /* The files (the start's list) are read again at every reload with the pairs: a fleet
     * rotates keys by rewriting them, without a restart. */
    {.name = "ticket-key-file",
     .metavar = "FILE",
     PROCESS,
     .list = LIST_TICKET_KEYS,
     .same = same_ticket_keys,
     .names_file = OPTFILE_WHOLE,
     .set = set_ticket_key_file,
     .help = "TLS session-ticket key (48 or 80 bytes, nginx's format:\n"
             "openssl rand 80 > FILE), shared by every instance behind a\n"
             "balancer so a session resumes on any; repeatable: the first\n"
             "encrypts, the others still decrypt (their bytes re-read on\n"
             "reload)"},
    {.name = "tls-groups",
     .metavar = "LIST",
     PROCESS,
     FIELD(FIELD_STRING, tls_groups),
     .set = options_set_string,
     .help = "key exchange groups, most preferred first (default:\n"
             "X25519MLKEM768 where OpenSSL has it, X25519:P-256:P-384)"},
    /* As --ticket-key-file: the start's list, each file's bytes re-read on every reload. */
    {.name = "quic-secret-file",
     .metavar = "FILE",
     PROCESS,
     .list = LIST_QUIC_SECRETS,
     .same = same_quic_secrets,
     .names_file = OPTFILE_WHOLE,
     .set = set_quic_secret_file,
     .help = "HTTP/3's secret for Retry tokens and stateless resets (at\n"
             "least 32 bytes: openssl rand 32 > FILE), shared by every\n"
             "instance behind a balancer; repeatable (up to 4): the first\n"
             "makes tokens, all are accepted (their bytes re-read on reload)"},
    {.name = "quic-server-id",
     .metavar = "[ROTATION:]HEX",
     PROCESS,
     FIELD(FIELD_STRING, quic_server_id),
     .set = set_quic_server_id,
     .help = "this instance's server ID (1-15 bytes in hex; AWS NLB's:\n"
             "8, 0x and 16 digits) in every QUIC connection ID it issues,\n"
             "QUIC-LB's plaintext layout, so an L4 balancer routes a\n"
             "client that moved; ROTATION: the config rotation bits, 0-6"},
    {.name = "ktls",
     .metavar = "on|off",
     PROCESS,
     FIELD(FIELD_BOOL, ktls),
     .set = options_set_onoff,
     .help = "after the handshake, the kernel encrypts responses (files\n"
             "leave zero-copy) where it has the tls module (on)"},
    {.name = "tls-seal",
     .metavar = "on|off",
     PROCESS,
     FIELD(FIELD_BOOL, tls_seal),
     .set = options_set_onoff,
     .help = "without kernel TLS, ringhttpd seals the records itself\n"
             "with the keys OpenSSL hands over, from the plaintext where\n"
             "it lies (on); off: OpenSSL's SSL_write seals them"},
    {.name = "hsts",
     .metavar = "SECONDS",
     SITE,
     .set = set_hsts,
     .help = "send Strict-Transport-Security: max-age=SECONDS on HTTPS\n"
             "responses"},
    {.name = "redirect-https",
     SITE,
     FIELD(FIELD_BOOL, redirect_https),
     .set = options_set_flag,
     .help = "the cleartext port answers every request with 308 to the\n"
             "same URL over https: (at --tls-port)"},
};
const struct option_area options_tls = {rows, sizeof(rows) / sizeof(rows[0])};
