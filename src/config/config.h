/* config: the process's configuration from argv and the --config file, built in layers (the
 * file's top level, the command line over it, each of the file's sites over that) and checked
 * as a whole (roots, host names, the default site, and through the caller's struct config_checks
 * the htpasswd files and TLS pairs); a reload's re-read of it. What each option means is
 * config/options.h; the YAML, config/cfgfile.h. Must not: change after server_run starts; every
 * thread reads it without locks. What a reload re-reads (the root, the MIME table) lives in struct
 * site (rt/site.h) instead. Ownership: main owns the one struct config for the whole process
 * lifetime; a re-read one belongs to the site built from it (config_destroy). */
#ifndef CONFIG_CONFIG_H
#define CONFIG_CONFIG_H

#include <stdbool.h>
#include <stddef.h>

#include "config/options.h"

/* What config cannot check itself, installed by the layer above (issues 37 and 40: config is
 * plain data: it loads no certificate and reads no htpasswd): a TLS pair's files read and its
 * key matched (why starts "--tls-key" when the key is at fault), an htpasswd file read and its
 * entries accepted. Each 0, or -1 with a one-line reason in why; a NULL entry checks nothing.
 * A re-read uses the table its configuration was parsed with. */
struct config_checks {
    int (*pair)(const char *cert, const char *key, char *why, size_t why_len);
    int (*htpasswd)(const char *path, char *why, size_t why_len);
};

/* Fills cfg from argv, checking the files it names through checks (main: the server's,
 * server_config_checks; NULL: none are read here). Returns 0 to run, or an exit status after
 * printing one line to stderr (2 for a usage error, 1 for an unusable document root or option
 * file), or CONFIG_DONE after printing --help or --version. */
int config_parse(struct config *cfg, int argc, char **argv, const struct config_checks *checks);

/* Reads and parses a --mime-types file into out: 0, or -errno with a one-line reason in why. */
int config_load_mime(const char *file, struct mime_table *out, char *why, size_t why_len);

/* --check-config's verdict when nothing was wrong: "ringhttpd: FILE: ok (N sites)". config_parse
 * leaves it to its caller, who may check more first (the sites' rules files, main.c). */
void config_ok(const struct config *cfg);

/* Releases what config_parse allocated and closes the document root. */
void config_free(struct config *cfg);

/* Whether cfg or any of its sites limits requests per client (--limit-req, --limit-req-for) or
 * the process limits connections (--limit-conn): the listeners then steer by client address. */
bool config_limits_clients(const struct config *cfg);

/* Whether cfg or any of its sites compresses on the fly (the workers then make compressors). */
bool config_compresses(const struct config *cfg);

/* Reads cfg->config_file again with the command line over it, into a new configuration (sites
 * and all) whose process-wide options are cfg's (a difference is reported in why, not applied).
 * 0 with *out (config_destroy frees it), or -1 with the reason in why. Reading a file prints
 * its errors on stderr too. */
int config_reread(const struct config *cfg, struct config **out, char *why, size_t why_len);
void config_destroy(struct config *cfg);

/* Whether a reload from running to fresh keeps at least one of running's sites (one sharing a
 * host name; two sites without names are both the default one): 0, or -EINVAL with the reason
 * in why (issue 25: a file that names other sites, or none, is refused rather than adopted). */
int config_reload_keeps_a_site(const struct config *running, const struct config *fresh, char *why,
                               size_t why_len);

/* What cfg serves, for messages: its DOCROOT, or the file that names its sites. */
const char *config_serves(const struct config *cfg);

#endif
