/* RFC 9218's Priority field value; see prio.h. */
#include "core/prio.h"

/* "u=N" sets the urgency, "i" (or i=?1 / i=?0) incremental delivery; anything else in the
 * dictionary, and a member's parameters, are ignored (RFC 9218 4). */
void prio_parse(const char *p, size_t n, uint8_t *urgency, bool *incremental)
{
    const char *end = p + n;
    while (p < end) {
        while (p < end && (*p == ' ' || *p == '\t' || *p == ','))
            p++;
        const char *key = p;
        while (p < end && *p != '=' && *p != ',')
            p++;
        size_t key_len = (size_t)(p - key);
        const char *val = NULL;
        size_t val_len = 0;
        if (p < end && *p == '=') {
            val = ++p;
            while (p < end && *p != ',' && *p != ';')
                p++;
            val_len = (size_t)(p - val);
            while (val_len && (val[val_len - 1] == ' ' || val[val_len - 1] == '\t'))
                val_len--;
        }
        while (p < end && *p != ',')
            p++; /* parameters */
        while (key_len && (key[key_len - 1] == ' ' || key[key_len - 1] == '\t'))
            key_len--;
        if (key_len == 1 && key[0] == 'u' && val_len == 1 && val[0] >= '0' && val[0] <= '7')
            *urgency = (uint8_t)(val[0] - '0');
        else if (key_len == 1 && key[0] == 'i')
            *incremental = !val || (val_len == 2 && val[0] == '?' && val[1] == '1');
    }
}

void prio_sched_init(struct prio_sched *s)
{
    for (unsigned u = 0; u < PRIO_URGENCIES; u++) {
        list_init(&s->first[u]);
        list_init(&s->turns[u]);
    }
}

void prio_set(struct prio_sched *s, struct prio_node *n, uint8_t urgency, bool incremental)
{
    bool was = prio_is_ready(n);
    prio_idle(n);
    n->urgency = urgency < PRIO_URGENCIES ? urgency : PRIO_URGENCY_DEFAULT;
    n->incremental = incremental;
    if (!incremental)
        n->had_turn = false;
    if (was)
        prio_ready(s, n);
}
