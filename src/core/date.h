/* date: formats and parses HTTP-dates (RFC 9110 5.6.7) and ISO 8601 UTC timestamps.
 * Must not: read the clock, consult the locale or time zone (no libc time functions), allocate.
 * Ownership: callers own every buffer; nothing is kept between calls (safe from any thread). */
#ifndef CORE_DATE_H
#define CORE_DATE_H

#include <stddef.h>
#include <stdint.h>

#define HTTPDATE_LEN 29 /* strlen("Sun, 06 Nov 1994 08:49:37 GMT") */
#define ISODATE_LEN 20  /* strlen("1994-11-06T08:49:37Z") */

/* The instants both formats can spell with a four-digit year: 0000-01-01T00:00:00Z through
 * 9999-12-31T23:59:59Z (proleptic Gregorian calendar, no leap seconds). */
#define HTTPDATE_MIN INT64_C(-62167219200)
#define HTTPDATE_MAX INT64_C(253402300799)

/*
 * Writes t (seconds since the Unix epoch, UTC) as an IMF-fixdate, the preferred HTTP-date form:
 * "Sun, 06 Nov 1994 08:49:37 GMT". Exactly HTTPDATE_LEN bytes followed by a NUL are written.
 * Values outside [HTTPDATE_MIN, HTTPDATE_MAX] are clamped to that range.
 */
void httpdate_format(int64_t t, char out[HTTPDATE_LEN + 1]);

/*
 * Writes t as ISO 8601 UTC with second precision: "1994-11-06T08:49:37Z". Exactly ISODATE_LEN
 * bytes followed by a NUL are written; t is clamped like httpdate_format does.
 */
void httpdate_format_iso8601(int64_t t, char out[ISODATE_LEN + 1]);

/*
 * Parses s[0..len) as an HTTP-date in any of the three forms a recipient must accept:
 *   IMF-fixdate  "Sun, 06 Nov 1994 08:49:37 GMT"
 *   RFC 850      "Sunday, 06-Nov-94 08:49:37 GMT"
 *   asctime      "Sun Nov  6 08:49:37 1994"   (the day may also be "06")
 * The whole of s must be the date: no leading or trailing whitespace or parameters. Names are
 * case-sensitive (RFC 9110 5.6.7). The day of the month must exist in that month and year, hours
 * 00-23, minutes and seconds 00-59 (a leap second "60" is rejected), and the day name must be
 * the true weekday of the date. RFC 850's two-digit year is read as 1970-2069: the RFC's "more
 * than 50 years in the future" rule needs the current time, which this module may not read.
 * Never reads s[len] or beyond.
 *
 * Returns 0 and stores the seconds since the epoch in *out, or -EINVAL (*out untouched).
 */
int httpdate_parse(const char *s, size_t len, int64_t *out);

#endif
