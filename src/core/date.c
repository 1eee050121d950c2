#include "core/date.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>

static const char day_abbr[7][4] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
static const char *const day_full[7] = {"Sunday",   "Monday", "Tuesday", "Wednesday",
                                        "Thursday", "Friday", "Saturday"};
static const char month_abbr[12][4] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                       "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};

struct civil {
    int64_t year;
    unsigned month; /* 1..12 */
    unsigned day;   /* 1..31 */
    unsigned hour, min, sec;
    unsigned wday; /* 0 = Sunday */
};

/* Days since 1970-01-01 of a proleptic Gregorian date. The calendar repeats every 400 years
 * (146097 days); counting years from March puts the leap day last, so a day-of-year maps to a
 * month with one linear formula and no table. */
static int64_t days_from_civil(int64_t y, unsigned m, unsigned d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

static void civil_from_seconds(int64_t t, struct civil *c)
{
    if (t < HTTPDATE_MIN)
        t = HTTPDATE_MIN;
    if (t > HTTPDATE_MAX)
        t = HTTPDATE_MAX;
    /* Floor division, so that times before 1970 land on the right day. */
    int64_t days = t >= 0 ? t / 86400 : -((-t + 86399) / 86400);
    int64_t secs = t - days * 86400;
    c->hour = (unsigned)(secs / 3600);
    c->min = (unsigned)(secs / 60 % 60);
    c->sec = (unsigned)(secs % 60);
    c->wday = (unsigned)(((days % 7) + 11) % 7); /* 1970-01-01 was a Thursday */

    int64_t z = days + 719468;
    int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    int64_t doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    c->day = (unsigned)(doy - (153 * mp + 2) / 5 + 1);
    c->month = (unsigned)(mp < 10 ? mp + 3 : mp - 9);
    c->year = yoe + era * 400 + (c->month <= 2);
}

static char *put2(char *p, unsigned v)
{
    p[0] = (char)('0' + v / 10);
    p[1] = (char)('0' + v % 10);
    return p + 2;
}

static char *put4(char *p, int64_t v)
{
    p = put2(p, (unsigned)(v / 100));
    return put2(p, (unsigned)(v % 100));
}

void httpdate_format(int64_t t, char out[HTTPDATE_LEN + 1])
{
    struct civil c;
    civil_from_seconds(t, &c);
    char *p = out;
    memcpy(p, day_abbr[c.wday], 3);
    p += 3;
    *p++ = ',';
    *p++ = ' ';
    p = put2(p, c.day);
    *p++ = ' ';
    memcpy(p, month_abbr[c.month - 1], 3);
    p += 3;
    *p++ = ' ';
    p = put4(p, c.year);
    *p++ = ' ';
    p = put2(p, c.hour);
    *p++ = ':';
    p = put2(p, c.min);
    *p++ = ':';
    p = put2(p, c.sec);
    memcpy(p, " GMT", 5);
}

void httpdate_format_iso8601(int64_t t, char out[ISODATE_LEN + 1])
{
    struct civil c;
    civil_from_seconds(t, &c);
    char *p = put4(out, c.year);
    *p++ = '-';
    p = put2(p, c.month);
    *p++ = '-';
    p = put2(p, c.day);
    *p++ = 'T';
    p = put2(p, c.hour);
    *p++ = ':';
    p = put2(p, c.min);
    *p++ = ':';
    p = put2(p, c.sec);
    memcpy(p, "Z", 2);
}

/* A cursor over the input; every reader checks the remaining length before touching a byte. */
struct cursor {
    const char *p;
    const char *end;
};

static bool lit(struct cursor *c, const char *s, size_t n)
{
    if ((size_t)(c->end - c->p) < n || memcmp(c->p, s, n) != 0)
        return false;
    c->p += n;
    return true;
}

static bool digits(struct cursor *c, size_t n, unsigned *v)
{
    if ((size_t)(c->end - c->p) < n)
        return false;
    unsigned acc = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)c->p[i];
        if (ch < '0' || ch > '9')
            return false;
        acc = acc * 10 + (ch - '0');
    }
    c->p += n;
    *v = acc;
    return true;
}

static bool month(struct cursor *c, unsigned *m)
{
    for (unsigned i = 0; i < 12; i++) {
        if (lit(c, month_abbr[i], 3)) {
            *m = i + 1;
            return true;
        }
    }
    return false;
}

/* time-of-day = hour ":" minute ":" second */
static bool clock_time(struct cursor *c, struct civil *cv)
{
    return digits(c, 2, &cv->hour) && lit(c, ":", 1) && digits(c, 2, &cv->min) && lit(c, ":", 1) &&
           digits(c, 2, &cv->sec);
}

static bool is_leap(int64_t y)
{
    return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

static int finish(const struct civil *cv, int64_t *out)
{
    static const unsigned char mdays[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    unsigned dim = mdays[cv->month - 1] + (cv->month == 2 && is_leap(cv->year));
    if (cv->day < 1 || cv->day > dim || cv->hour > 23 || cv->min > 59 || cv->sec > 59)
        return -EINVAL;
    int64_t days = days_from_civil(cv->year, cv->month, cv->day);
    if ((unsigned)(((days % 7) + 11) % 7) != cv->wday)
        return -EINVAL;
    *out = days * 86400 + cv->hour * 3600 + cv->min * 60 + cv->sec;
    return 0;
}

/* "Sun, 06 Nov 1994 08:49:37 GMT"; the weekday has been read. */
static bool imf_fixdate(struct cursor *c, struct civil *cv)
{
    unsigned y;
    if (!(lit(c, ", ", 2) && digits(c, 2, &cv->day) && lit(c, " ", 1) && month(c, &cv->month) &&
          lit(c, " ", 1) && digits(c, 4, &y) && lit(c, " ", 1) && clock_time(c, cv) &&
          lit(c, " GMT", 4)))
        return false;
    cv->year = y;
    return true;
}

/* "Sun Nov  6 08:49:37 1994"; the weekday has been read. */
static bool asctime_date(struct cursor *c, struct civil *cv)
{
    unsigned y;
    if (!(lit(c, " ", 1) && month(c, &cv->month) && lit(c, " ", 1)))
        return false;
    if (lit(c, " ", 1)) {
        if (!digits(c, 1, &cv->day))
            return false;
    } else if (!digits(c, 2, &cv->day)) {
        return false;
    }
    if (!(lit(c, " ", 1) && clock_time(c, cv) && lit(c, " ", 1) && digits(c, 4, &y)))
        return false;
    cv->year = y;
    return true;
}

/* "Sunday, 06-Nov-94 08:49:37 GMT"; the weekday has been read. */
static bool rfc850_date(struct cursor *c, struct civil *cv)
{
    unsigned y;
    if (!(lit(c, ", ", 2) && digits(c, 2, &cv->day) && lit(c, "-", 1) && month(c, &cv->month) &&
          lit(c, "-", 1) && digits(c, 2, &y) && lit(c, " ", 1) && clock_time(c, cv) &&
          lit(c, " GMT", 4)))
        return false;
    cv->year = y < 70 ? 2000 + y : 1900 + y;
    return true;
}

int httpdate_parse(const char *s, size_t len, int64_t *out)
{
    struct cursor c = {s, s + len};
    struct civil cv = {0};
    bool ok;

    /* Every form opens with a day name whose first three letters are the abbreviation; the
     * byte after them tells the forms apart. */
    while (cv.wday < 7 && !lit(&c, day_abbr[cv.wday], 3))
        cv.wday++;
    if (cv.wday == 7)
        return -EINVAL;
    if (c.p < c.end && *c.p == ',') {
        ok = imf_fixdate(&c, &cv);
    } else if (c.p < c.end && *c.p == ' ') {
        ok = asctime_date(&c, &cv);
    } else {
        const char *rest = day_full[cv.wday] + 3;
        ok = lit(&c, rest, strlen(rest)) && rfc850_date(&c, &cv);
    }
    if (!ok || c.p != c.end)
        return -EINVAL;
    return finish(&cv, out);
}
