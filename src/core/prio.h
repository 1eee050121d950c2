/* prio: RFC 9218's Priority field value (and PRIORITY_UPDATE's), a Structured Fields
 * dictionary of which "u" (urgency 0-7) and "i" (incremental) count, for HTTP/2 and HTTP/3.
 * Must not: allocate, or reject a value (unknown members and bad values are ignored, 4).
 * Ownership: a pure function over the caller's bytes. */
#ifndef CORE_PRIO_H
#define CORE_PRIO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PRIO_URGENCY_DEFAULT 3

/* Sets *urgency and *incremental from what p[0, n) names; leaves the others as they are. */
void prio_parse(const char *p, size_t n, uint8_t *urgency, bool *incremental);

#endif
