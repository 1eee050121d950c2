/* server: opens the listeners (or takes systemd's), drops privileges, starts one worker per
 * thread, then handles signals: SIGHUP reloads, SIGINT/SIGTERM/SIGQUIT drain (stop accepting,
 * finish responses in flight within the drain timeout, exit; a second one ends it at once),
 * SIGUSR1/SIGUSR2 are logged; and follows a DOCROOT re-pointed or recreated, once a second.
 * Must not: touch requests or connections (workers own those).
 * Ownership: the main thread owns the workers' array and joins every worker before freeing. */
#ifndef SERVER_H
#define SERVER_H

struct config;
struct config_checks;
struct transport_ops;
struct proto_ops;

/* Test doubles of the seams, for a test build only (tests/seams/main.c, build/ringhttpd-test):
 * a transport for the HTTP port in place of cleartext, a protocol in place of HTTP/2 after its
 * preface. NULL members (or no struct at all, as ringhttpd passes) change nothing. */
struct server_seams {
    const struct transport_ops *xport;
    const struct proto_ops *proto;
};

/* Runs until a stop signal; returns the process exit status (0 after a clean drain). */
int server_run(struct config *cfg, const struct server_seams *seams);

/* What config checks through the server (config_parse): a TLS pair read as the TLS
 * port reads it, an htpasswd file read as the verifier reads it. */
const struct config_checks *server_config_checks(void);

#endif
