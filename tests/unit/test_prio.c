/* core/prio's send scheduler and core/hfield's rules: the order RFC 9218 10 asks for, and the
 * content-length and connection-specific checks HTTP/2 and HTTP/3 share. */
#include "core/hfield.h"
#include "core/prio.h"
#include "unit.h"

/* The seq of the node prio_next gives (-1: none ready). */
static long next_seq(struct prio_sched *s)
{
    struct prio_node *n = prio_next(s);
    return n ? (long)n->seq : -1;
}

/* Non-incremental streams come by arrival (seq), not by when they became ready; one that
 * waits leaves the order and comes back to its place. */
TEST(prio_non_incremental_by_arrival_and_back_to_its_place)
{
    struct prio_sched s;
    struct prio_node n[4];
    prio_sched_init(&s);
    for (int i = 0; i < 4; i++)
        prio_node_init(&n[i], (uint64_t)i * 4);
    prio_ready(&s, &n[3]);
    prio_ready(&s, &n[1]);
    prio_ready(&s, &n[2]);
    prio_ready(&s, &n[0]);
    CHECK_INT(next_seq(&s), 0);
    prio_sent(&s, &n[0]); /* a non-incremental one keeps its turn */
    CHECK_INT(next_seq(&s), 0);
    prio_idle(&n[0]); /* waits (flow control, a read): the next goes */
    CHECK_INT(next_seq(&s), 4);
    prio_ready(&s, &n[0]); /* back: ahead again */
    prio_ready(&s, &n[0]); /* twice is once */
    CHECK_INT(next_seq(&s), 0);
    for (int i = 0; i < 4; i++) {
        CHECK_INT(next_seq(&s), i * 4);
        prio_idle(&n[i]);
    }
    CHECK_INT(next_seq(&s), -1);
}

/* Incremental ones take a turn each, behind the non-incremental ones once they have had one;
 * a lower urgency goes first; prio_set moves a ready node at once. */
TEST(prio_incremental_turns_urgency_and_updates)
{
    struct prio_sched s;
    struct prio_node a, b, c, d;
    prio_sched_init(&s);
    prio_node_init(&a, 0);
    prio_node_init(&b, 4);
    prio_node_init(&c, 8);
    prio_node_init(&d, 12);
    a.incremental = b.incremental = true;
    prio_ready(&s, &a);
    prio_ready(&s, &b);
    prio_ready(&s, &c);
    CHECK_INT(next_seq(&s), 0); /* a first turn by arrival */
    prio_sent(&s, &a);
    CHECK_INT(next_seq(&s), 4);
    prio_sent(&s, &b);
    CHECK_INT(next_seq(&s), 8); /* then the non-incremental one, to its end */
    prio_sent(&s, &c);
    CHECK_INT(next_seq(&s), 8);
    prio_idle(&c);
    CHECK_INT(next_seq(&s), 0); /* round robin */
    prio_sent(&s, &a);
    CHECK_INT(next_seq(&s), 4);
    prio_sent(&s, &b);
    CHECK_INT(next_seq(&s), 0);
    prio_ready(&s, &d); /* a later non-incremental one goes ahead of those that sent */
    CHECK_INT(next_seq(&s), 12);
    prio_set(&s, &b, 1, true); /* a PRIORITY_UPDATE: at once */
    CHECK_INT(next_seq(&s), 4);
    prio_set(&s, &b, 9, false); /* out of range: the default */
    CHECK_INT(b.urgency, PRIO_URGENCY_DEFAULT);
    CHECK_INT(next_seq(&s), 4); /* non-incremental now: by arrival, ahead of d */
    prio_set(&s, &c, 0, false); /* not ready: only its values change */
    CHECK(!prio_is_ready(&c));
    CHECK_INT(c.urgency, 0);
}

TEST(hfield_content_length_and_connection_fields)
{
    struct hfield_length cl = {0};
    CHECK(hfield_length_end(&cl) && hfield_length_data(&cl, 7)); /* none: anything goes */
    cl = (struct hfield_length){0};
    CHECK(hfield_length_field(&cl, "5", 1));
    CHECK(hfield_length_field(&cl, "5", 1));  /* the same again */
    CHECK(!hfield_length_field(&cl, "6", 1)); /* another */
    CHECK(hfield_length_data(&cl, 3) && !hfield_length_end(&cl));
    CHECK(hfield_length_data(&cl, 2) && hfield_length_end(&cl));
    CHECK(!hfield_length_data(&cl, 1) && !hfield_length_end(&cl));
    struct hfield_length bad = {0};
    CHECK(!hfield_length_field(&bad, "", 0));
    CHECK(!hfield_length_field(&bad, "5x", 2));
    CHECK(!hfield_length_field(&bad, "-1", 2));
    CHECK(!hfield_length_field(&bad, "12345678901234567890", 20));
    CHECK(hfield_connection_specific("te", 2, "gzip", 4));
    CHECK(!hfield_connection_specific("te", 2, "trailers", 8));
    CHECK(hfield_connection_specific("TE", 2, NULL, 0)); /* a response's: whatever its value */
    CHECK(hfield_connection_specific("Transfer-Encoding", 17, "chunked", 7));
    CHECK(hfield_connection_specific("keep-alive", 10, "", 0));
    CHECK(!hfield_connection_specific("keep-alivf", 10, "", 0));
    CHECK(!hfield_connection_specific("content-type", 12, "", 0));
    char out[40];
    const char *mixed = "Content-Security-Policy-Report-Only";
    hfield_lower(out, mixed, strlen(mixed));
    CHECK(memcmp(out, "content-security-policy-report-only", strlen(mixed)) == 0);
    hfield_lower(out, "ETag", 4);
    CHECK(memcmp(out, "etag", 4) == 0);
    char at[] = "[Z@a`{]\x80\xc1"
                "AZ"; /* the neighbours of 'A'-'Z', and bytes past ASCII */
    hfield_lower(at, at, 11);
    CHECK(memcmp(at,
                 "[z@a`{]\x80\xc1"
                 "az",
                 11) == 0);
}
