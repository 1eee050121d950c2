/* Unit tests for core/date: IMF-fixdate formatting, the three HTTP-date forms, calendar edges. */
#include "core/date.h"

#include <errno.h>

#include "unit.h"

static int parse(const char *s, int64_t *out)
{
    return httpdate_parse(unit_guard_str(s), strlen(s), out);
}

static void check_format(int64_t t, const char *want)
{
    char buf[HTTPDATE_LEN + 8];
    memset(buf, 'x', sizeof(buf));
    httpdate_format(t, buf);
    CHECK_MEM(buf, strlen(buf), want);
    CHECK(buf[HTTPDATE_LEN] == '\0');
    CHECK(buf[HTTPDATE_LEN + 1] == 'x');
}

TEST(date_format_rfc_example)
{
    check_format(784111777, "Sun, 06 Nov 1994 08:49:37 GMT");
    check_format(0, "Thu, 01 Jan 1970 00:00:00 GMT");
    check_format(-1, "Wed, 31 Dec 1969 23:59:59 GMT");
    check_format(-2208988800, "Mon, 01 Jan 1900 00:00:00 GMT");
}

TEST(date_format_leap_years_and_2038)
{
    check_format(951782400, "Tue, 29 Feb 2000 00:00:00 GMT");
    check_format(1709208000, "Thu, 29 Feb 2024 12:00:00 GMT");
    check_format(4107542400, "Mon, 01 Mar 2100 00:00:00 GMT"); /* 2100 is not a leap year */
    check_format(4107542400 - 1, "Sun, 28 Feb 2100 23:59:59 GMT");
    check_format(2147483647, "Tue, 19 Jan 2038 03:14:07 GMT");
    check_format(2147483648, "Tue, 19 Jan 2038 03:14:08 GMT");
    check_format(4294967296, "Sun, 07 Feb 2106 06:28:16 GMT");
}

TEST(date_format_clamps)
{
    check_format(HTTPDATE_MAX, "Fri, 31 Dec 9999 23:59:59 GMT");
    check_format(HTTPDATE_MAX + 1, "Fri, 31 Dec 9999 23:59:59 GMT");
    check_format(INT64_MAX, "Fri, 31 Dec 9999 23:59:59 GMT");
    check_format(HTTPDATE_MIN, "Sat, 01 Jan 0000 00:00:00 GMT");
    check_format(INT64_MIN, "Sat, 01 Jan 0000 00:00:00 GMT");
}

TEST(date_format_iso8601)
{
    char buf[ISODATE_LEN + 4];
    memset(buf, 'x', sizeof(buf));
    httpdate_format_iso8601(784111777, buf);
    CHECK_MEM(buf, strlen(buf), "1994-11-06T08:49:37Z");
    CHECK(buf[ISODATE_LEN + 1] == 'x');
    httpdate_format_iso8601(-1, buf);
    CHECK_MEM(buf, strlen(buf), "1969-12-31T23:59:59Z");
    httpdate_format_iso8601(INT64_MAX, buf);
    CHECK_MEM(buf, strlen(buf), "9999-12-31T23:59:59Z");
}

TEST(date_parse_three_forms_of_nov_6_1994)
{
    int64_t t = 0;
    CHECK_INT(parse("Sun, 06 Nov 1994 08:49:37 GMT", &t), 0);
    CHECK_INT(t, 784111777);
    t = 0;
    CHECK_INT(parse("Sunday, 06-Nov-94 08:49:37 GMT", &t), 0);
    CHECK_INT(t, 784111777);
    t = 0;
    CHECK_INT(parse("Sun Nov  6 08:49:37 1994", &t), 0);
    CHECK_INT(t, 784111777);
    t = 0;
    CHECK_INT(parse("Sun Nov 06 08:49:37 1994", &t), 0);
    CHECK_INT(t, 784111777);
}

TEST(date_parse_other_valid)
{
    int64_t t;
    CHECK_INT(parse("Thu, 01 Jan 1970 00:00:00 GMT", &t), 0);
    CHECK_INT(t, 0);
    CHECK_INT(parse("Wed, 31 Dec 1969 23:59:59 GMT", &t), 0);
    CHECK_INT(t, -1);
    CHECK_INT(parse("Tue, 29 Feb 2000 00:00:00 GMT", &t), 0);
    CHECK_INT(t, 951782400);
    CHECK_INT(parse("Thu, 29 Feb 2024 12:00:00 GMT", &t), 0);
    CHECK_INT(t, 1709208000);
    CHECK_INT(parse("Tue, 19 Jan 2038 03:14:08 GMT", &t), 0);
    CHECK_INT(t, 2147483648);
    CHECK_INT(parse("Fri, 31 Dec 9999 23:59:59 GMT", &t), 0);
    CHECK_INT(t, HTTPDATE_MAX);
    CHECK_INT(parse("Sat, 01 Jan 0000 00:00:00 GMT", &t), 0);
    CHECK_INT(t, HTTPDATE_MIN);
    CHECK_INT(parse("Wed Nov 16 08:49:37 1994", &t), 0);
    CHECK_INT(t, 784111777 + 10 * 86400);
    CHECK_INT(parse("Thursday, 01-Jan-70 00:00:00 GMT", &t), 0);
    CHECK_INT(t, 0);
    /* Two-digit years: 00-69 are 20xx, 70-99 are 19xx. */
    CHECK_INT(parse("Tuesday, 19-Jan-38 03:14:08 GMT", &t), 0);
    CHECK_INT(t, 2147483648);
    CHECK_INT(parse("Tuesday, 31-Dec-69 00:00:00 GMT", &t), 0);
    CHECK_INT(t, 3155673600);
    CHECK_INT(parse("Wednesday, 06-Nov-02 08:49:37 GMT", &t), 0);
    CHECK_INT(parse("Saturday, 06-Nov-99 08:49:37 GMT", &t), 0);
}

TEST(date_parse_rejects_bad_fields)
{
    int64_t t = 42;
    static const char *const bad[] = {
        "",
        "Sun",
        "Sun,",
        "Sun, 06 Nov 1994 08:49:37",      /* no GMT */
        "Sun, 06 Nov 1994 08:49:37 UTC",  /* only GMT */
        "Sun, 06 Nov 1994 08:49:37 GMT ", /* trailing space */
        " Sun, 06 Nov 1994 08:49:37 GMT", /* leading space */
        "Sun, 06 Nov 1994 08:49:37 GMTx",
        "Sun, 6 Nov 1994 08:49:37 GMT", /* day needs two digits */
        "Sun,  06 Nov 1994 08:49:37 GMT",
        "Sun, 06 nov 1994 08:49:37 GMT", /* case-sensitive */
        "sun, 06 Nov 1994 08:49:37 GMT",
        "SUN, 06 NOV 1994 08:49:37 GMT",
        "Sun, 06 Nvm 1994 08:49:37 GMT",
        "Xyz, 06 Nov 1994 08:49:37 GMT",
        "Mon, 06 Nov 1994 08:49:37 GMT", /* wrong weekday */
        "Sun, 00 Nov 1994 08:49:37 GMT", /* day 0 */
        "Thu, 31 Nov 1994 08:49:37 GMT", /* November has 30 days */
        "Tue, 29 Feb 2100 00:00:00 GMT", /* 2100 is not a leap year */
        "Sun, 29 Feb 2023 00:00:00 GMT",
        "Sun, 32 Jan 1995 00:00:00 GMT",
        "Sun, 06 Nov 1994 24:00:00 GMT",
        "Sun, 06 Nov 1994 08:60:00 GMT",
        "Sun, 06 Nov 1994 08:49:60 GMT", /* leap seconds rejected */
        "Sun, 06 Nov 1994 8:49:37 GMT",
        "Sun, 06 Nov 94 08:49:37 GMT", /* two-digit year in IMF-fixdate */
        "Sun, 06 Nov 19944 08:49:37 GMT",
        "Sun, 06 Nov -994 08:49:37 GMT",
        "Sun, 06 Nov 1994 08:49:3 GMT",
        "Sun, 06 Nov 1994 08-49-37 GMT",
        "Sun, 06-Nov-1994 08:49:37 GMT",
        "Sun, 06 Nov 1994 08:49:37 GMT; length=12",
        "Sunday, 06-Nov-1994 08:49:37 GMT", /* RFC 850 has a two-digit year */
        "Sunday, 06 Nov 94 08:49:37 GMT",
        "Sun, 06-Nov-94 08:49:37 GMT", /* RFC 850 uses the full name */
        "Sunda, 06-Nov-94 08:49:37 GMT",
        "Sundayy, 06-Nov-94 08:49:37 GMT",
        "Monday, 06-Nov-94 08:49:37 GMT",
        "Sun Nov 6 08:49:37 1994", /* asctime: single digit needs two spaces */
        "Sun Nov   6 08:49:37 1994",
        "Sun Nov  6 08:49:37 94",
        "Sun Nov  6 08:49:37 1994 GMT",
        "Sun Nov  6 08:49:37 1994 ",
        "Sun, Nov  6 08:49:37 1994",
        "Sun Nov  6 08:49:37",
        "Sun Nov 31 08:49:37 1994",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        int rc = parse(bad[i], &t);
        if (rc != -EINVAL)
            fprintf(stderr, "  accepted \"%s\"\n", bad[i]);
        CHECK_INT(rc, -EINVAL);
    }
    CHECK_INT(t, 42);
    /* An embedded NUL is not the end of the input. */
    static const char nul[] = "Sun, 06 Nov 1994 08:49:37 GMT\0";
    CHECK_INT(httpdate_parse(unit_guard(nul, sizeof(nul) - 1), sizeof(nul) - 1, &t), -EINVAL);
}

TEST(date_parse_every_prefix_is_invalid)
{
    /* Each proper prefix ends on a guard page: an over-read would crash here. */
    static const char *const forms[] = {
        "Sun, 06 Nov 1994 08:49:37 GMT",
        "Sunday, 06-Nov-94 08:49:37 GMT",
        "Sun Nov  6 08:49:37 1994",
    };
    for (size_t f = 0; f < 3; f++) {
        size_t n = strlen(forms[f]);
        for (size_t i = 0; i < n; i++) {
            int64_t t;
            CHECK_INT(httpdate_parse(unit_guard(forms[f], i), i, &t), -EINVAL);
        }
    }
}

TEST(date_round_trip_every_day_of_some_years)
{
    /* Four centuries around the epoch, one sample per day with a moving time of day. */
    static const char zeros[HTTPDATE_LEN];
    int failures = 0;
    /* One guarded buffer, refilled: a mapping per sample would exhaust the process's maps. */
    char *guarded = (char *)unit_guard(zeros, HTTPDATE_LEN);
    for (int64_t t = -2208988800; t < 4133980800 && failures < 5; t += 86400 + 3607) {
        char buf[HTTPDATE_LEN + 1];
        int64_t back = 0;
        httpdate_format(t, buf);
        memcpy(guarded, buf, HTTPDATE_LEN);
        if (httpdate_parse(guarded, HTTPDATE_LEN, &back) != 0 || back != t) {
            fprintf(stderr, "  %lld -> %s -> %lld\n", (long long)t, buf, (long long)back);
            failures++;
        }
    }
    CHECK_INT(failures, 0);
}
