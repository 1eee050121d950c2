/* The field rules HTTP/2 and HTTP/3 share; see hfield.h. */
#include "core/hfield.h"

bool hfield_length_field(struct hfield_length *cl, const char *v, size_t vl)
{
    uint64_t x = 0;
    bool ok = vl > 0 && vl < 20;
    for (size_t i = 0; ok && i < vl; i++) {
        ok = v[i] >= '0' && v[i] <= '9';
        x = x * 10 + (uint64_t)(v[i] - '0');
    }
    if (!ok || (cl->has && cl->length != x))
        return false;
    cl->has = true;
    cl->length = x;
    return true;
}
