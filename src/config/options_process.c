/* The options of the process: a shared port, privileges, the file itself, health and drain: their
 * rows of the one table (options.c walks the areas in --help's order) and their own setters. See
 * options.h; options_int.h has what the areas share. */
#include "config/options.h"
#include "config/options_int.h"

#include <sys/stat.h>
#include <string.h>

static int set_user(struct config *cfg, const struct option_info *o, char *arg)
{
    (void)o;
    if (!*arg || *arg == ':')
        return usage_error("--user wants USER or USER:GROUP, got '%s'", arg);
    cfg->user = arg;
    return 0;
}

/* --config and --check-config. */
static int set_config(struct config *cfg, const struct option_info *o, char *arg)
{
    if (cfg->src && cfg->src->file)
        return usage_error("a configuration file cannot name another ('%s')", arg);
    cfg->check_only = strcmp(o->name, "check-config") == 0;
    struct stat st;
    if (cfg->check_only && stat(arg, &st) == 0 && S_ISDIR(st.st_mode)) {
        /* --check-config DIR (issue 39): a site's root before it is deployed, its _redirects
         * and _headers read as a server with --rules-files would, each bad line said */
        cfg->docroot = arg;
        cfg->rules_files = true;
        return 0;
    }
    cfg->config_file = arg;
    return 0;
}

static int set_health(struct config *cfg, const struct option_info *o, char *arg)
{
    (void)o;
    if (arg[0] != '/' || strpbrk(arg, "?#%\"") || !options_field_value_ok(arg))
        return usage_error("--health wants a plain URL path like /healthz, got '%s'", arg);
    cfg->health = arg;
    return 0;
}

static const struct option_info rows[] = {
    {.name = "reuse-port",
     PROCESS,
     FIELD(FIELD_BOOL, reuse_port),
     .set = options_set_flag,
     .help = "share the port with the ringhttpd already serving it (for\n"
             "a zero-downtime restart: start the new one with this\n"
             "option, then SIGTERM the old); without it a port in use\n"
             "is an error"},
    {.name = "user",
     .metavar = "USER[:GROUP]",
     PROCESS,
     FIELD(FIELD_STRING, user),
     .set = set_user,
     .help = "started as root: bind, then serve as USER (and GROUP, else\n"
             "USER's group), supplementary groups cleared"},
    {.name = "no-landlock",
     PROCESS,
     FIELD(FIELD_BOOL, landlock),
     .invert = true,
     .set = options_set_flag,
     .help = "do not confine file access with Landlock (on by default\n"
             "where the kernel has it: reads below DOCROOT's directory)"},
    {.name = "config",
     .metavar = "FILE",
     PROCESS,
     .first = true,
     FIELD(FIELD_STRING, config_file),
     .set = set_config,
     .help = "read options and sites from a YAML file whose keys are the\n"
             "long options' names, plus 'root' and 'sites'; the command\n"
             "line overrides it; SIGHUP re-reads it"},
    {.name = "check-config",
     .metavar = "FILE",
     .scope = SCOPE_ARGV,
     .first = true,
     .set = set_config,
     .help = "check a configuration file and exit: 0, or 1 with each\n"
             "error's file, line and key"},
    {.name = "health",
     .metavar = "PATH",
     PROCESS,
     FIELD(FIELD_STRING, health),
     .set = set_health,
     .help = "answer GET PATH with 200 ok (503 during --drain-delay),\n"
             "not logged, never a file"},
    {.name = "drain-delay",
     .metavar = "S",
     PROCESS,
     FIELD(FIELD_UNSIGNED, drain_delay),
     .set = options_set_number,
     .max = 3600,
     .wants = " seconds",
     .help = "on SIGTERM, keep the listeners open S seconds more, the\n"
             "health path answering 503 (0)"},
};
const struct option_area options_process = {rows, sizeof(rows) / sizeof(rows[0])};
