/* The options of compression and dictionaries: their rows of the one table (options.c walks the
 * areas in --help's order) and their own setters. See options.h; options_int.h has what the areas
 * share. */
#include "config/options.h"
#include "config/options_int.h"

#include <string.h>

static int set_compress_types(struct config *cfg, const struct option_info *o, char *arg)
{
    (void)o;
    if (!options_field_value_ok(arg))
        return usage_error("--compress-types: invalid list '%s'", arg);
    cfg->compress_types = arg;
    return 0;
}

static int set_dictionary(struct config *cfg, const struct option_info *o, char *arg)
{
    (void)o;
    if (arg[0] != '/' || strchr(arg, '"') || strchr(arg, '\\') || !options_field_value_ok(arg))
        return usage_error("--dictionary wants a URL path pattern like /assets/*.js, "
                           "got '%s'",
                           arg);
    /* the older releases are found by listing one directory */
    if (strchr(arg, '*') && strchr(arg, '*') < strrchr(arg, '/'))
        return usage_error("--dictionary: '*' only in the last path segment, got '%s'", arg);
    if (cfg->num_dictionaries == CONFIG_MAX_DICTIONARIES)
        return usage_error("--dictionary: at most 8 patterns; '%s' is one more", arg);
    cfg->dictionaries[cfg->num_dictionaries++] = arg;
    return 0;
}

static const struct option_info rows[] = {
    {.name = "compress",
     .metavar = "on|off",
     SITE,
     FIELD(FIELD_BOOL, compress),
     .set = options_set_onoff,
     .help = "compress text on the fly with br, zstd or gzip, once per\n"
             "file version, kept in memory (default on)"},
    {.name = "compress-types",
     .metavar = "LIST",
     SITE,
     .set = set_compress_types,
     .help = "media types compressed (text/*, JavaScript, JSON, XML, SVG,\n"
             "wasm, ttf/otf fonts: '+xml', 'text/*' forms allowed)"},
    {.name = "compress-min",
     .metavar = "BYTES",
     SITE,
     FIELD(FIELD_SIZE, compress_min),
     BYTES(0, SIZE_MAX, " like 1K"),
     .help = "smaller bodies are sent as they are (1K)"},
    {.name = "compress-max",
     .metavar = "BYTES",
     SITE,
     FIELD(FIELD_SIZE, compress_max),
     BYTES(0, SIZE_MAX, " like 16M"),
     .help = "larger bodies are sent as they are (16M)"},
    /* Compression itself may be turned on or off by a reload (a worker makes its compressor
     * when it adopts a configuration that compresses); the cache its variants are kept in is
     * sized at start. */
    {.name = "compress-cache",
     .metavar = "BYTES",
     PROCESS,
     FIELD(FIELD_SIZE, compress_cache),
     BYTES(0, SIZE_MAX, " like 32M"),
     .help = "compressed variants each worker keeps, LRU (32M)"},
    {.name = "dictionary",
     .metavar = "PATTERN",
     SITE,
     .list = LIST_DICTIONARIES,
     .set = set_dictionary,
     .help = "URL paths ('*' wildcards, e.g. '/assets/*.js') whose files\n"
             "are offered as compression dictionaries (RFC 9842) and\n"
             "sent as dcz deltas against an older one (repeatable, 8)"},
};
const struct option_area options_compress = {rows, sizeof(rows) / sizeof(rows[0])};
