/* Per-protocol request policy; see policy.h. */
#include "core/policy.h"

#include <string.h>

struct req_policy policy_fields(void)
{
    return (struct req_policy){.syntax = RESP_FIELDS, .keep_alive = true};
}

bool policy_status_closes(int status)
{
    return status == 400 || status == 414 || status == 431;
}

int policy_h2_preface(const char *data, size_t len)
{
    size_t n = len < POLICY_H2_PREFACE_LEN ? len : POLICY_H2_PREFACE_LEN;
    if (memcmp(data, POLICY_H2_PREFACE, n) != 0)
        return -1;
    return n == POLICY_H2_PREFACE_LEN ? 1 : 0;
}
