/* The YAML configuration file; see cfgfile.h. libyaml builds the document (aliases stay
 * references to one node), and the walk below is three levels deep at most: top level, a
 * site, a value's list or mapping; anything deeper is an error, never a recursion. */
#include "config/cfgfile.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <yaml.h>

#include "config/options.h"

/* Values applied from one file, aliases counted each time: more is a hostile document. A
 * value takes 4 bytes of text at least ("k: v" and its line's end) unless an alias repeats
 * it, so a file of 10,000 sites (issue 40: 40,000 values) may have a value per 4 of its bytes
 * beyond the first MAX_VALUES; an alias bomb multiplies far beyond that. */
#define MAX_VALUES 20000
#define BYTES_PER_VALUE 4
/* Collections inside each other: the walk needs five (top level, sites, a site, a list, a
 * mapping in it); libyaml takes time quadratic in the depth to build a document (100,000
 * levels of '[': 26 s), so a file nested deeper is refused before it is built. */
#define MAX_DEPTH 64

struct cfgfile {
    yaml_document_t doc;
    const char *name;
    const char *dir; /* the file's directory, "/"-terminated (relative file names), or NULL */
    int sites;       /* node id of the 'sites' sequence, 0 when there is none */
    unsigned values, max_values;
};

static int line_of(const yaml_node_t *n)
{
    return (int)n->start_mark.line + 1;
}

static int fail(const struct cfgfile *f, const yaml_node_t *n, const char *key, const char *why)
{
    fprintf(stderr, "ringhttpd: %s:%d: %s: %s\n", f->name, line_of(n), key, why);
    return 2;
}

static const char *scalar(const yaml_node_t *n)
{
    return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

static int set(struct config *cfg, struct cfgfile *f, const yaml_node_t *at, const char *key,
               const char *value)
{
    if (++f->values > f->max_values)
        return fail(f, at, key, "too many values (aliases?)");
    cfg->src->line = line_of(at);
    cfg->src->key = key;
    return options_set(cfg, key, value);
}

struct key_at {
    const char *key;
    yaml_node_pair_t *pair; /* in the mapping's order: the first of two is the lower */
};

static int by_key(const void *a, const void *b)
{
    const struct key_at *x = a, *y = b;
    int c = strcmp(x->key, y->key);
    return c ? c : (x->pair > y->pair) - (x->pair < y->pair);
}

/* A key twice in mapping m (issue 35: the second silently won): each repeat named with its
 * line and the first's (and, in the mapping form of a value, the key outer it is the value of).
 * Sorted rather than compared pairwise: a hostile file may hold a mapping of a million keys. 0, or
 * 2 after printing. */
static int duplicate_keys(struct cfgfile *f, yaml_node_t *m, const char *outer)
{
    size_t n = (size_t)(m->data.mapping.pairs.top - m->data.mapping.pairs.start), k = 0;
    struct key_at *keys = n > 1 ? calloc(n, sizeof(*keys)) : NULL;
    int rc = 0;
    if (n > 1 && !keys)
        return fail(f, m, "(mapping)", "out of memory");
    for (yaml_node_pair_t *p = m->data.mapping.pairs.start; n > 1 && p < m->data.mapping.pairs.top;
         p++) {
        const char *key = scalar(yaml_document_get_node(&f->doc, p->key));
        if (key) /* a key that is not a name is an error of its own */
            keys[k++] = (struct key_at){key, p};
    }
    if (k > 1)
        qsort(keys, k, sizeof(*keys), by_key);
    for (size_t i = 1, first = 0; i < k; i++) {
        if (strcmp(keys[first].key, keys[i].key) != 0) {
            first = i;
            continue;
        }
        char why[160];
        yaml_node_t *at = yaml_document_get_node(&f->doc, keys[i].pair->key);
        int line = line_of(yaml_document_get_node(&f->doc, keys[first].pair->key));
        if (outer)
            snprintf(why, sizeof(why), "'%.64s' given twice (first on line %d)", keys[i].key, line);
        else
            snprintf(why, sizeof(why), "given twice (first on line %d)", line);
        rc = fail(f, at, outer ? outer : keys[i].key, why);
    }
    free(keys);
    return rc;
}

/* The value of sub-key `name` in mapping m, or NULL; any sub-key not in `known` is an error. */
static const char *field(struct cfgfile *f, yaml_node_t *m, const char *key, const char *name,
                         const char *const *known, int *rc)
{
    const char *found = NULL;
    for (yaml_node_pair_t *p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top; p++) {
        const char *k = scalar(yaml_document_get_node(&f->doc, p->key));
        const char *v = scalar(yaml_document_get_node(&f->doc, p->value));
        bool ok = false;
        for (const char *const *q = known; *q && k; q++)
            ok |= strcmp(k, *q) == 0;
        if (!ok || !v) {
            char why[160];
            snprintf(why, sizeof(why), "unknown or non-scalar field '%s'", k ? k : "?");
            *rc = fail(f, m, key, why);
            return NULL;
        }
        if (strcmp(k, name) == 0)
            found = v;
    }
    return found;
}

/* Appends to buf (at *n, cap bytes) the scalar v or, for a list, its scalars joined by sep;
 * false (after the message) when v is neither or it does not fit. */
static bool join_values(struct cfgfile *f, yaml_node_t *v, const char *key, const char *sep,
                        char *buf, size_t cap, size_t *n, int *rc)
{
    yaml_node_item_t *i = NULL, *end = NULL;
    if (v->type == YAML_SEQUENCE_NODE) {
        i = v->data.sequence.items.start;
        end = v->data.sequence.items.top;
    }
    for (bool first = true; v->type == YAML_SCALAR_NODE ? first : i < end; first = false) {
        yaml_node_t *item = v->type == YAML_SCALAR_NODE ? v : yaml_document_get_node(&f->doc, *i++);
        const char *sv = scalar(item);
        if (!sv) {
            *rc = fail(f, item, key, "wants a value or a list of values");
            return false;
        }
        int k = snprintf(buf + *n, cap - *n, "%s%s", first ? "" : sep, sv);
        if (k < 0 || (size_t)k >= cap - *n) {
            *rc = fail(f, item, key, "value too long");
            return false;
        }
        *n += (size_t)k;
    }
    return true;
}

/* Issue 39's YAML lists: a redirects item {from, to, status, force, query}, a headers item
 * {path, type, status, set: {Name: value}, remove: [Name]}, an access item {path, allow, deny,
 * action: 403|close}, each turned into the line (or lines) its option takes. */
static int rule_mapping(struct config *cfg, struct cfgfile *f, const char *key, yaml_node_t *m)
{
    static const char *const known[3][7] = {
        {"from", "to", "status", "force", "query", NULL},
        {"path", "type", "status", "set", "remove", NULL},
        {"path", "allow", "deny", "action", NULL},
    };
    int kind = strcmp(key, "redirects") == 0 ? 0 : strcmp(key, "headers") == 0 ? 1 : 2;
    yaml_node_t *val[6] = {NULL};
    int rc = 0;
    for (yaml_node_pair_t *p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top; p++) {
        const char *k = scalar(yaml_document_get_node(&f->doc, p->key));
        int at = -1;
        for (int i = 0; k && known[kind][i]; i++)
            if (strcmp(k, known[kind][i]) == 0)
                at = i;
        if (at < 0) {
            char why[160];
            snprintf(why, sizeof(why), "unknown field '%s'", k ? k : "?");
            return fail(f, m, key, why);
        }
        val[at] = yaml_document_get_node(&f->doc, p->value);
    }
    char buf[4096];
    size_t n = 0;
    if (kind == 0) { /* FROM [query] TO [STATUS[!]] */
        const char *from = scalar(val[0]), *to = scalar(val[1]);
        const char *status = val[2] ? scalar(val[2]) : "", *force = val[3] ? scalar(val[3]) : "";
        if (!from || !to || !status || !force)
            return fail(f, m, key,
                        "wants {from: PATH, to: PATH|URL, status: CODE, force: true, "
                        "query: {NAME: VALUE}}");
        n = (size_t)snprintf(buf, sizeof(buf), "%s", from);
        if (val[4] && val[4]->type == YAML_MAPPING_NODE) {
            for (yaml_node_pair_t *p = val[4]->data.mapping.pairs.start;
                 p < val[4]->data.mapping.pairs.top && n < sizeof(buf); p++) {
                const char *qk = scalar(yaml_document_get_node(&f->doc, p->key));
                const char *qv = scalar(yaml_document_get_node(&f->doc, p->value));
                if (!qk || !qv)
                    return fail(f, val[4], key, "query wants NAME: VALUE pairs");
                n += (size_t)snprintf(buf + n, sizeof(buf) - n, " %s=%s", qk, qv);
            }
        } else if (val[4]) {
            buf[n < sizeof(buf) ? n++ : n - 1] = ' ';
            if (!join_values(f, val[4], key, " ", buf, sizeof(buf), &n, &rc))
                return rc;
        }
        bool forced = strcmp(force, "true") == 0 || strcmp(force, "yes") == 0;
        if (*force && !forced && strcmp(force, "false") != 0 && strcmp(force, "no") != 0)
            return fail(f, val[3], key, "force wants true or false");
        if (n < sizeof(buf))
            n += (size_t)snprintf(buf + n, sizeof(buf) - n, " %s %s%s", to,
                                  *status  ? status
                                  : forced ? "301"
                                           : "",
                                  forced ? "!" : "");
        if (n >= sizeof(buf))
            return fail(f, m, key, "value too long");
        return set(cfg, f, m, key, buf);
    }
    const char *path = scalar(val[0]);
    if (!path)
        return fail(f, m, key,
                    kind == 1 ? "wants {path: PATTERN, set: {Name: value}, remove: [Name]}"
                              : "wants {path: PATTERN, allow: [CIDR], deny: [CIDR], "
                                "action: 403|close}");
    if (kind == 2) {
        n = (size_t)snprintf(buf, sizeof(buf), "%s", path);
        for (int l = 1; l <= 2; l++) {
            if (!val[l])
                continue;
            n += (size_t)snprintf(buf + n, sizeof(buf) - n, l == 1 ? " allow " : " deny ");
            if (n >= sizeof(buf) || !join_values(f, val[l], key, ",", buf, sizeof(buf), &n, &rc))
                return rc ? rc : fail(f, m, key, "value too long");
        }
        const char *action = val[3] ? scalar(val[3]) : "403";
        if (!action || (strcmp(action, "403") != 0 && strcmp(action, "close") != 0))
            return fail(f, m, key, "action wants 403 or close");
        if (strcmp(action, "close") == 0 && n + 6 < sizeof(buf))
            n += (size_t)snprintf(buf + n, sizeof(buf) - n, " close");
        return set(cfg, f, m, key, buf);
    }
    /* headers: one line per field set or removed, each "PATTERN [type=T] [status=any] ..." */
    const char *type = val[1] ? scalar(val[1]) : NULL, *status = val[2] ? scalar(val[2]) : NULL;
    if ((val[1] && !type) ||
        (val[2] && (!status || (strcmp(status, "any") != 0 && strcmp(status, "all") != 0 &&
                                strcmp(status, "ok") != 0))))
        return fail(f, m, key, "type wants a media type, status wants any (errors too) or ok");
    char head[1024];
    snprintf(head, sizeof(head), "%s%s%s%s", path, type ? " type=" : "", type ? type : "",
             status && strcmp(status, "ok") != 0 ? " status=any" : "");
    if (val[3] && val[3]->type != YAML_MAPPING_NODE)
        return fail(f, val[3], key, "set wants a mapping of Name: value");
    for (yaml_node_pair_t *p = val[3] ? val[3]->data.mapping.pairs.start : NULL;
         p && p < val[3]->data.mapping.pairs.top; p++) {
        const char *hk = scalar(yaml_document_get_node(&f->doc, p->key));
        const char *hv = scalar(yaml_document_get_node(&f->doc, p->value));
        if (!hk || !hv)
            return fail(f, val[3], key, "set wants Name: value pairs");
        int k = snprintf(buf, sizeof(buf), "%s %s: %s", head, hk, hv);
        if (k < 0 || (size_t)k >= sizeof(buf))
            return fail(f, val[3], key, "value too long");
        if ((rc = set(cfg, f, m, key, buf)) != 0)
            return rc;
    }
    if (val[4]) {
        char names[2048];
        size_t nn = 0;
        if (!join_values(f, val[4], key, "\n", names, sizeof(names), &nn, &rc))
            return rc;
        for (char *name = names, *next; name && *name; name = next) {
            next = strchr(name, '\n');
            if (next)
                *next++ = '\0';
            int k = snprintf(buf, sizeof(buf), "%s ! %s", head, name);
            if (k < 0 || (size_t)k >= sizeof(buf))
                return fail(f, val[4], key, "value too long");
            if ((rc = set(cfg, f, m, key, buf)) != 0)
                return rc;
        }
    }
    if (!val[3] && !val[4])
        return fail(f, m, key, "wants set: {Name: value} or remove: [Name]");
    return 0;
}

/* A mapping form of an option's value, turned into the option's own string. */
static int apply_mapping(struct config *cfg, struct cfgfile *f, const char *key, yaml_node_t *m)
{
    static const char *const redirect[] = {"from", "to", "status", NULL};
    static const char *const auth[] = {"path", "htpasswd", NULL};
    static const char *const cache[] = {"path", "value", NULL};
    static const char *const bind[] = {"address", "port",  "tls-port", "proxy",
                                       "mode",    "owner", "tls",      NULL};
    char buf[4096];
    int rc = duplicate_keys(f, m, key), n;
    if (rc)
        return rc;
    if (strcmp(key, "redirects") == 0 || strcmp(key, "headers") == 0 || strcmp(key, "access") == 0)
        return rule_mapping(cfg, f, key, m);
    if (strcmp(key, "error-page") == 0) { /* {404: /404.html, 500: /500.html} */
        for (yaml_node_pair_t *p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top;
             p++) {
            const char *k = scalar(yaml_document_get_node(&f->doc, p->key));
            const char *v = scalar(yaml_document_get_node(&f->doc, p->value));
            if (!k || !v)
                return fail(f, m, key, "wants CODE: PATH pairs");
            snprintf(buf, sizeof(buf), "%s=%s", k, v);
            if ((rc = set(cfg, f, m, key, buf)) != 0)
                return rc;
        }
        return 0;
    }
    if (strcmp(key, "redirect") == 0) {
        const char *from = field(f, m, key, "from", redirect, &rc);
        const char *to = rc ? NULL : field(f, m, key, "to", redirect, &rc);
        const char *status = rc ? NULL : field(f, m, key, "status", redirect, &rc);
        if (rc)
            return rc;
        if (!from || !to)
            return fail(f, m, key, "wants {from: PATH, to: URL, status: 301|302|307|308}");
        n = snprintf(buf, sizeof(buf), "%s %s %s", from, to, status ? status : "");
    } else if (strcmp(key, "basic-auth") == 0) {
        const char *path = field(f, m, key, "path", auth, &rc);
        const char *file = rc ? NULL : field(f, m, key, "htpasswd", auth, &rc);
        if (rc)
            return rc;
        if (!path || !file)
            return fail(f, m, key, "wants {path: PREFIX, htpasswd: FILE}");
        n = snprintf(buf, sizeof(buf), "%s=%s", path, file);
    } else if (strcmp(key, "cache-control-for") == 0) {
        const char *path = field(f, m, key, "path", cache, &rc);
        const char *value = rc ? NULL : field(f, m, key, "value", cache, &rc);
        if (rc)
            return rc;
        if (!path || !value)
            return fail(f, m, key, "wants {path: PATTERN, value: CACHE-CONTROL}");
        n = snprintf(buf, sizeof(buf), "%s %s", path, value);
    } else if (strcmp(key, "bind") == 0) { /* {address, port, tls-port, proxy, mode, owner} */
        const char *v[7];
        for (int i = 0; i < 7 && rc == 0; i++)
            v[i] = field(f, m, key, bind[i], bind, &rc);
        if (rc)
            return rc;
        bool proxy = false, tls = false;
        if (!v[0] || (v[3] && options_parse_bool(v[3], &proxy) != 0) ||
            (v[6] && options_parse_bool(v[6], &tls) != 0))
            return fail(f, m, key,
                        "wants {address: ADDR or unix:PATH, port: PORT, tls-port: PORT, proxy: "
                        "true|false, mode: '0660', owner: USER[:GROUP], tls: true|false (unix)}");
        /* an IPv6 address with a port of its own is written in brackets on the command line */
        bool v6 = strchr(v[0], ':') && strncmp(v[0], "unix:", 5) != 0 && v[0][0] != '[';
        n = snprintf(buf, sizeof(buf), "%s%s%s%s%s%s%s%s%s%s%s%s%s", v6 && v[1] ? "[" : "", v[0],
                     v6 && v[1] ? "]" : "", v[1] ? ":" : "", v[1] ? v[1] : "", v[2] ? " tls=" : "",
                     v[2] ? v[2] : "", proxy ? " proxy" : "", v[4] ? " mode=" : "",
                     v[4] ? v[4] : "", v[5] ? " owner=" : "", v[5] ? v[5] : "", tls ? " tls" : "");
    } else {
        return fail(f, m, key, "wants a value or a list of values, not a mapping");
    }
    if (n < 0 || (size_t)n >= sizeof(buf))
        return fail(f, m, key, "value too long");
    return set(cfg, f, m, key, buf);
}

/* key: VALUE, key: [VALUE, ...] or key: {mapping form}. */
static int apply_value(struct config *cfg, struct cfgfile *f, const char *key, yaml_node_t *v)
{
    int rc = 0;
    switch (v->type) {
    case YAML_SCALAR_NODE:
        return set(cfg, f, v, key, scalar(v));
    case YAML_MAPPING_NODE:
        return apply_mapping(cfg, f, key, v);
    case YAML_SEQUENCE_NODE:
        for (yaml_node_item_t *i = v->data.sequence.items.start; i < v->data.sequence.items.top;
             i++) {
            yaml_node_t *item = yaml_document_get_node(&f->doc, *i);
            if (item->type == YAML_SCALAR_NODE)
                rc = set(cfg, f, item, key, scalar(item));
            else if (item->type == YAML_MAPPING_NODE)
                rc = apply_mapping(cfg, f, key, item);
            else
                rc = fail(f, item, key, "a list inside a list");
            if (rc)
                return rc;
        }
        if (v->data.sequence.items.start == v->data.sequence.items.top)
            return fail(f, v, key, "an empty list");
        return 0;
    default:
        return fail(f, v, key, "no value");
    }
}

/* Applies every key of mapping m; errors are all printed, the first one's status returned. */
static int apply_keys(struct config *cfg, struct cfgfile *f, yaml_node_t *m, bool top)
{
    int first = duplicate_keys(f, m, NULL);
    for (yaml_node_pair_t *p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top; p++) {
        yaml_node_t *k = yaml_document_get_node(&f->doc, p->key);
        yaml_node_t *v = yaml_document_get_node(&f->doc, p->value);
        const char *key = scalar(k);
        int rc;
        if (!key)
            rc = fail(f, k, "?", "keys are names");
        else if (top && strcmp(key, "sites") == 0)
            rc = v->type == YAML_SEQUENCE_NODE ? (f->sites = p->value, 0)
                                               : fail(f, v, key, "wants a list of sites");
        else
            rc = apply_value(cfg, f, key, v);
        if (rc && !first)
            first = rc;
    }
    return first;
}

/* A first pass over the parser's events, which stops at the first collection deeper than
 * MAX_DEPTH: 0, or 2 after naming its line. A syntax error is left to yaml_parser_load, which
 * meets it at the same place and says what it is. */
static int check_depth(const char *name, const char *text, size_t len)
{
    yaml_parser_t parser;
    yaml_event_t ev;
    int depth = 0, rc = 0;
    bool end = false;
    if (!yaml_parser_initialize(&parser)) {
        fprintf(stderr, "ringhttpd: %s: out of memory\n", name);
        return 1;
    }
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    while (!end && !rc && yaml_parser_parse(&parser, &ev)) {
        if (ev.type == YAML_SEQUENCE_START_EVENT || ev.type == YAML_MAPPING_START_EVENT) {
            if (++depth > MAX_DEPTH) {
                fprintf(stderr, "ringhttpd: %s:%zu: nested more than %d levels deep\n", name,
                        ev.start_mark.line + 1, MAX_DEPTH);
                rc = 2;
            }
        } else if (ev.type == YAML_SEQUENCE_END_EVENT || ev.type == YAML_MAPPING_END_EVENT) {
            depth--;
        }
        end = ev.type == YAML_STREAM_END_EVENT;
        yaml_event_delete(&ev);
    }
    yaml_parser_delete(&parser);
    return rc;
}

static int load_text(struct config *cfg, const char *name, const char *dir, const char *text,
                     size_t len, struct cfgfile **out)
{
    struct cfgfile *f = calloc(1, sizeof(*f));
    yaml_parser_t parser;
    struct config_src src = {.file = name, .dir = dir};
    int rc = 1;

    *out = NULL;
    if (!f) {
        fprintf(stderr, "ringhttpd: %s: out of memory\n", name);
        return 1;
    }
    f->name = name;
    f->max_values = MAX_VALUES + (unsigned)(len / BYTES_PER_VALUE);
    f->dir = dir;
    if ((rc = check_depth(name, text, len)) != 0) {
        free(f);
        return rc;
    }
    if (!yaml_parser_initialize(&parser)) {
        free(f);
        fprintf(stderr, "ringhttpd: %s: out of memory\n", name);
        return 1;
    }
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    if (!yaml_parser_load(&parser, &f->doc)) {
        fprintf(stderr, "ringhttpd: %s:%zu: not valid YAML: %s\n", name,
                parser.problem_mark.line + 1, parser.problem ? parser.problem : "?");
        yaml_parser_delete(&parser);
        free(f);
        return 2;
    }
    yaml_parser_delete(&parser);
    yaml_node_t *root = yaml_document_get_root_node(&f->doc);
    if (!root) {
        rc = 0; /* an empty file: nothing set */
    } else if (root->type != YAML_MAPPING_NODE) {
        rc = fail(f, root, "(top level)", "wants 'key: value' lines");
    } else {
        cfg->src = &src;
        rc = apply_keys(cfg, f, root, true);
        cfg->src = NULL;
    }
    if (rc) {
        cfgfile_free(f);
        return rc;
    }
    *out = f;
    return 0;
}

int cfgfile_load_buffer(struct config *cfg, const char *name, const char *text, size_t len,
                        struct cfgfile **out)
{
    return load_text(cfg, name, NULL, text, len, out);
}

/* The directory the file's relative names are found in: its own, absolute, with a trailing
 * '/' (issue 36: they were the working directory's, so the same file failed from '/'). The
 * path as named, symbolic links kept: a Kubernetes ConfigMap's file is a link through '..data'
 * into a directory that a later update replaces, and the names must follow the link. The pool
 * keeps it, since cfgfile_sites applies the sites' keys later. */
static const char *file_dir(struct config *cfg, const char *file)
{
    const char *slash = strrchr(file, '/');
    size_t len = slash ? (size_t)(slash - file) + 1 : 0;
    char cwd[PATH_MAX], *joined;
    if (file[0] == '/')
        return options_strdup(cfg, file, len);
    if (!getcwd(cwd, sizeof(cwd)))
        return NULL;
    size_t clen = strlen(cwd);
    if (!(joined = malloc(clen + 1 + len + 1)))
        return NULL;
    memcpy(joined, cwd, clen);
    joined[clen] = '/';
    memcpy(joined + clen + 1, file, len);
    const char *dir = options_strdup(cfg, joined, clen + 1 + len);
    free(joined);
    return dir;
}

int cfgfile_load(struct config *cfg, const char *file, struct cfgfile **doc)
{
    FILE *fp = fopen(file, "re");
    char *text = NULL;
    size_t len = 0, cap = 0, n;
    int rc = 1;
    if (!fp) {
        fprintf(stderr, "ringhttpd: --config %s: %s\n", file, strerror(errno));
        return 1;
    }
    do {
        if (cap - len < 65536) {
            char *p = cap < (16u << 20) ? realloc(text, cap += 65536) : NULL;
            if (!p) {
                fprintf(stderr, "ringhttpd: --config %s: too large\n", file);
                goto out;
            }
            text = p;
        }
        len += n = fread(text + len, 1, cap - len, fp);
    } while (n > 0);
    if (ferror(fp)) {
        fprintf(stderr, "ringhttpd: --config %s: read error\n", file);
        goto out;
    }
    const char *dir = file_dir(cfg, file);
    if (!dir) {
        fprintf(stderr, "ringhttpd: --config %s: %s\n", file, strerror(errno));
        goto out;
    }
    rc = load_text(cfg, file, dir, text, len, doc);
out:
    free(text);
    fclose(fp);
    return rc;
}

int cfgfile_sites(struct config *cfg, struct cfgfile *f)
{
    if (!f || !f->sites)
        return 0;
    yaml_node_t *seq = yaml_document_get_node(&f->doc, f->sites);
    size_t n = (size_t)(seq->data.sequence.items.top - seq->data.sequence.items.start);
    if (n == 0)
        return fail(f, seq, "sites", "an empty list");
    if (!(cfg->sites = calloc(n, sizeof(*cfg->sites))))
        return fail(f, seq, "sites", "out of memory");
    int first = 0;
    for (size_t i = 0; i < n; i++) {
        yaml_node_t *m = yaml_document_get_node(&f->doc, seq->data.sequence.items.start[i]);
        struct config *site = &cfg->sites[i];
        struct config_src src = {.file = f->name, .dir = f->dir, .site = true};
        int rc;
        if (options_site_init(site, cfg) != 0) {
            cfg->num_sites = (int)i + 1;
            return fail(f, m, "sites", "out of memory");
        }
        cfg->num_sites = (int)i + 1;
        site->line = line_of(m);
        if (m->type != YAML_MAPPING_NODE) {
            rc = fail(f, m, "sites", "each site is a mapping of keys");
        } else {
            site->src = &src;
            rc = apply_keys(site, f, m, false);
            site->src = NULL;
        }
        if (rc && !first)
            first = rc;
    }
    return first;
}

void cfgfile_free(struct cfgfile *f)
{
    if (!f)
        return;
    yaml_document_delete(&f->doc);
    free(f);
}
