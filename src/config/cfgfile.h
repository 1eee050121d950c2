/* cfgfile: the --config YAML file. Its keys are the long options' names (options_set applies
 * each, so a key and its option cannot disagree), plus 'root' (DOCROOT) and 'sites', a list of
 * sites whose keys are the per-site options plus 'hosts' and 'default'. Lists of scalars give a
 * repeatable option several values; a few options also take a mapping ({from, to, status} for
 * redirect, {path, htpasswd} for basic-auth, {path, value} for cache-control-for).
 * Must not: keep the YAML document past cfgfile_sites, accept a key it does not know, or check
 * what the options name (roots, files: config.c does).
 * Ownership: the strings it applies live in the top-level config's pool (options_strdup). */
#ifndef CONFIG_CFGFILE_H
#define CONFIG_CFGFILE_H

#include <stddef.h>

struct config;
struct cfgfile;

/* Reads file and applies its top level to cfg; *doc keeps the sites for cfgfile_sites. Returns
 * 0, or an exit status after printing every error found as "FILE:LINE: KEY: reason". */
int cfgfile_load(struct config *cfg, const char *file, struct cfgfile **doc);

/* The same from memory (the fuzz target); name stands for the file in messages. */
int cfgfile_load_buffer(struct config *cfg, const char *name, const char *text, size_t len,
                        struct cfgfile **doc);

/* Builds cfg->sites: each a copy of cfg (as the command line left it) with its keys applied. */
int cfgfile_sites(struct config *cfg, struct cfgfile *doc);

void cfgfile_free(struct cfgfile *doc);

#endif
