/* names: a hash table of host names (exact, and "*.example.org" wildcards) to small integers,
 * built by pushing names and indexing them once: how the TLS contexts and the QUIC endpoint
 * find a certificate by SNI in O(1) among thousands (issue 40). A lookup is vhost_lookup's
 * (core/vhost.h): exact name first, then the longest wildcard suffix, at any depth (a
 * certificate's wildcard covers one label: the caller checks the certificate it found).
 * Must not: change once indexed (readers on every thread use it unlocked).
 * Ownership: a struct names owns its copies of the names and its slots (names_free). */
#ifndef RT_NAMES_H
#define RT_NAMES_H

#include <stddef.h>

#include "core/vhost.h"

struct names {
    struct vhost_table table;
    struct vhost_slot *slots;
    char **copies; /* lower case */
    int *values;   /* of each copy */
    size_t num, cap;
};

/* A copy of name[0..len), lower-cased, for value: 0, or -ENOMEM. A name no table can hold
 * (empty, longer than VHOST_NAME_MAX, with a NUL) is left out: 0. */
int names_push(struct names *n, const char *name, size_t len, int value);

/* The table over the names pushed; a name pushed twice keeps its first value: 0 or -ENOMEM. */
int names_index(struct names *n);

/* The value of the name that covers name (any case, a trailing dot or port ignored), or -1. */
int names_lookup(const struct names *n, const char *name);

/* The last name pushed (lower case), or NULL. */
const char *names_last(const struct names *n);

void names_free(struct names *n);

#endif
