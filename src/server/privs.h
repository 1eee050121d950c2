/* privs: least privilege after start-up: drops root for --user, and confines file access with
 * Landlock to reading what the configuration names.
 * Must not: run once workers exist (both apply to the calling thread and those it creates, so
 * the main thread calls them between binding the listeners and starting the workers).
 * Ownership: nothing is kept; the process's credentials and Landlock domain are the state. */
#ifndef PRIVS_H
#define PRIVS_H

#include <stddef.h>
#include <sys/types.h>

struct config;

/* Becomes USER (and GROUP, else USER's primary group) from "USER[:GROUP]", with no
 * supplementary groups. 0, or -errno with a one-line reason in why (unknown user, not root).
 * Not root but already USER and GROUP: 0 with a note in why, nothing changed. */
int privs_drop(const char *spec, char *why, size_t why_len);

/* The user and group "USER[:GROUP]" names (for what must belong to them before the drop: the
 * ACME state directory). 0, or -errno with a one-line reason in why. */
int privs_user(const char *spec, uid_t *uid, gid_t *gid, char *why, size_t why_len);

/* Restricts the process to reading files and directories beneath the directory that holds
 * DOCROOT and beneath the one that holds what DOCROOT resolves to (so a re-pointed symlink or a
 * recreated root stays readable), the same for every site's root, and beneath the directories
 * that hold the --config, --mime-types, --basic-auth and TLS files, as named and resolved (so
 * a file replaced by rename or a ConfigMap's ..data swap is read by a reload; the price is
 * that the rest of those directories is readable too); writing only the access log's
 * directory; every other write, create, remove or execute is denied. A domain cannot be
 * widened once applied: a reload that names a root or a file elsewhere needs a restart.
 * Returns the Landlock ABI version applied (> 0), 0 when the kernel has no Landlock or a system
 * call filter forbids it (not an error: nothing applied; for a filter, why says so), or -errno
 * with a reason in why. */
int privs_landlock(const struct config *cfg, char *why, size_t why_len);

#endif
