/* Host name tables; see names.h. */
#include "rt/names.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int names_push(struct names *n, const char *name, size_t len, int value)
{
    if (len == 0 || len > VHOST_NAME_MAX || memchr(name, 0, len))
        return 0;
    if (n->num == n->cap) {
        size_t cap = n->cap ? 2 * n->cap : 16;
        char **c = realloc(n->copies, cap * sizeof(*c));
        if (c)
            n->copies = c;
        int *v = c ? realloc(n->values, cap * sizeof(*v)) : NULL;
        if (!v)
            return -ENOMEM;
        n->values = v;
        n->cap = cap;
    }
    char *copy = strndup(name, len);
    if (!copy)
        return -ENOMEM;
    for (char *q = copy; *q; q++)
        if (*q >= 'A' && *q <= 'Z')
            *q = (char)(*q - 'A' + 'a');
    n->values[n->num] = value;
    n->copies[n->num++] = copy;
    return 0;
}

int names_index(struct names *n)
{
    if (!n->num)
        return 0;
    size_t slots = vhost_slots_for(n->num);
    if (!(n->slots = calloc(slots, sizeof(*n->slots))))
        return -ENOMEM;
    vhost_table_init(&n->table, n->slots, slots);
    for (size_t i = 0; i < n->num; i++) {
        int rc = vhost_table_add(&n->table, n->copies[i], n->values[i]);
        if (rc != 0 && rc != -EEXIST && rc != -EINVAL) /* the first one listed wins */
            return rc;
    }
    return 0;
}

int names_lookup(const struct names *n, const char *name)
{
    char key[VHOST_NAME_MAX + 1];
    if (!n->slots)
        return -1;
    size_t len = vhost_key((struct http_str){name, strlen(name)}, key);
    return len ? vhost_lookup(&n->table, key, len) : -1;
}

const char *names_last(const struct names *n)
{
    return n->num ? n->copies[n->num - 1] : NULL;
}

void names_free(struct names *n)
{
    for (size_t i = 0; i < n->num; i++)
        free(n->copies[i]);
    free(n->copies);
    free(n->values);
    free(n->slots);
}
