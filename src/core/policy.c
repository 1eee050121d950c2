/* Per-protocol request policy; see policy.h. */
#include "core/policy.h"

#include <string.h>

struct req_policy policy_h1(const struct http_request *req, bool conn_keep, size_t more)
{
    struct req_policy p = {.syntax = RESP_H1, .keep_alive = conn_keep && req->keep_alive};
    bool body = req->has_content_length && req->content_length > 0;
    if (req->has_transfer_encoding) {
        p.keep_alive = false; /* chunked bodies are not read: answer, then close */
    } else if (body) {
        if (req->content_length > POLICY_DISCARD_MAX)
            p.keep_alive = false;
        else
            p.discard = req->content_length;
    }
    /* The client holds its body back until it hears 100 Continue (RFC 9110 10.1.1); we read
     * and discard that body after answering, so let it come. */
    p.send_continue = req->expect_continue && req->minor == 1 && body && p.keep_alive;
    /* A client may not send more after "close" (RFC 9112 9.6), so with no body and nothing
     * behind the head no unread data should be waiting when the close comes. */
    p.fin_carries_tail = !req->keep_alive && more == 0 && !req->has_transfer_encoding && !body;
    return p;
}

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
