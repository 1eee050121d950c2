/* shaper: a delay-and-loss path for the page-load bench (issue 42), in user space because this
 * kernel has no netem. iptables sends the packets of the ports under test to an NFQUEUE; this
 * program holds each one for --delay-ms (one way: on loopback both directions pass the same
 * INPUT hook, so the round trip is twice it), drops --loss percent of them at random, and
 * releases the rest in arrival order. The hook is INPUT, not OUTPUT: loopback_xmit orphans a
 * packet from its socket before it is received, while one held at OUTPUT still counts against
 * its sender's TCP Small Queues budget (about 1 ms of its pacing rate), and TCP then keeps
 * only that much in flight whatever the window: 14 s for a page that takes 1 s.
 * Must not: reorder, rate-limit (a bottleneck is TBF's job: `tc qdisc ... tbf`), or read a
 * payload (the queue copies metadata only).
 * Ownership: one process per run; on SIGTERM/SIGINT it releases what it holds and prints one
 * line of counters (seen, dropped, held at most, how late a release came) to stderr.
 *
 * Techniques: libnetfilter_queue in NFQNL_COPY_META mode; one batch verdict
 * (nfq_set_verdict_batch: every id up to N) per release, which is exact because packets are
 * queued and released in id order and a dropped one got its own verdict when it came;
 * ppoll with a nanosecond timeout until the oldest packet is due. The kernel segments GSO
 * packets before queueing them (no NFQA_CFG_F_GSO), so loss and delay apply per datagram and
 * per TCP segment. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <libnetfilter_queue/libnetfilter_queue.h>
#include <linux/netfilter.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define HOLD_MAX (1u << 18) /* packets held at once: 100 ms of ~3 Gbit/s of 1500-byte packets */

struct held {
    uint32_t id;
    uint64_t due;
};

struct shaper {
    struct nfq_q_handle *qh;
    uint64_t delay_ns;
    uint64_t loss_per_2_32; /* drop when the next random 32 bits fall below it */
    uint64_t rng;
    struct held *ring;
    size_t head, len;
    uint64_t seen, dropped, overflow, released, held_max;
    uint64_t late_sum_ns, late_max_ns;
};

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
    (void)sig;
    stop = 1;
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* xorshift64*: a seeded sequence, so that a run's losses are the same draw for every server. */
static uint32_t next_rand(struct shaper *s)
{
    s->rng ^= s->rng >> 12;
    s->rng ^= s->rng << 25;
    s->rng ^= s->rng >> 27;
    return (uint32_t)((s->rng * 0x2545F4914F6CDD1DULL) >> 32);
}

static int on_packet(struct nfq_q_handle *qh, struct nfgenmsg *msg, struct nfq_data *nfa,
                     void *data)
{
    (void)msg;
    struct shaper *s = data;
    struct nfqnl_msg_packet_hdr *ph = nfq_get_msg_packet_hdr(nfa);
    if (!ph)
        return 0;
    uint32_t id = ntohl(ph->packet_id);
    s->seen++;
    if (s->loss_per_2_32 && next_rand(s) < s->loss_per_2_32) {
        s->dropped++;
        return nfq_set_verdict(qh, id, NF_DROP, 0, NULL);
    }
    if (s->delay_ns == 0 && s->len == 0) {
        s->released++;
        return nfq_set_verdict(qh, id, NF_ACCEPT, 0, NULL);
    }
    if (s->len == HOLD_MAX) { /* never at the bench's rates; counted so a report would show it */
        s->overflow++;
        return nfq_set_verdict(qh, id, NF_DROP, 0, NULL);
    }
    s->ring[(s->head + s->len) % HOLD_MAX] = (struct held){id, now_ns() + s->delay_ns};
    s->len++;
    if (s->len > s->held_max)
        s->held_max = s->len;
    return 0;
}

/* Accepts every held packet due by now with one batch verdict. */
static void release_due(struct shaper *s, uint64_t now, int all)
{
    uint32_t last = 0;
    size_t n = 0;
    while (s->len > 0) {
        struct held *h = &s->ring[s->head];
        if (!all && h->due > now)
            break;
        if (now > h->due) {
            uint64_t late = now - h->due;
            s->late_sum_ns += late;
            if (late > s->late_max_ns)
                s->late_max_ns = late;
        }
        last = h->id;
        s->head = (s->head + 1) % HOLD_MAX;
        s->len--;
        n++;
    }
    if (n > 0) {
        nfq_set_verdict_batch(s->qh, last, NF_ACCEPT);
        s->released += n;
    }
}

static void usage(void)
{
    fprintf(stderr, "usage: shaper [--queue N] [--delay-ms MS] [--loss PCT] [--seed N]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    unsigned queue = 0;
    double delay_ms = 0, loss = 0;
    unsigned long long seed = 1;
    for (int i = 1; i < argc; i++) {
        if (i + 1 >= argc)
            usage();
        if (strcmp(argv[i], "--queue") == 0)
            queue = (unsigned)strtoul(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--delay-ms") == 0)
            delay_ms = strtod(argv[++i], NULL);
        else if (strcmp(argv[i], "--loss") == 0)
            loss = strtod(argv[++i], NULL);
        else if (strcmp(argv[i], "--seed") == 0)
            seed = strtoull(argv[++i], NULL, 10);
        else
            usage();
    }
    if (delay_ms < 0 || delay_ms > 10000 || loss < 0 || loss > 100)
        usage();
    struct shaper s = {
        .delay_ns = (uint64_t)(delay_ms * 1e6),
        .loss_per_2_32 = (uint64_t)(loss / 100.0 * 4294967296.0),
        .rng = seed * 0x9E3779B97F4A7C15ULL + 1,
        .ring = calloc(HOLD_MAX, sizeof(struct held)),
    };
    if (!s.ring) {
        perror("shaper: calloc");
        return 1;
    }
    struct nfq_handle *h = nfq_open();
    if (!h) {
        perror("shaper: nfq_open");
        return 1;
    }
    s.qh = nfq_create_queue(h, (uint16_t)queue, on_packet, &s);
    if (!s.qh) {
        perror("shaper: nfq_create_queue (is another shaper bound to this queue?)");
        return 1;
    }
    if (nfq_set_mode(s.qh, NFQNL_COPY_META, 0) != 0 || nfq_set_queue_maxlen(s.qh, HOLD_MAX) != 0) {
        perror("shaper: nfq_set_mode");
        return 1;
    }
    /* Releases are due to the microsecond; on a machine busy with builds a normal thread wakes
     * milliseconds late. A real-time priority (root has it) keeps the path's delay the one
     * asked for; the thread sleeps in ppoll between releases, so it takes no CPU from others. */
    struct sched_param sp = {.sched_priority = 10};
    if (sched_setscheduler(0, SCHED_FIFO, &sp) != 0)
        fprintf(stderr, "shaper: no real-time priority (%s): releases may come late\n",
                strerror(errno));
    int fd = nfq_fd(h);
    nfnl_rcvbufsiz(nfq_nfnlh(h), 64u << 20); /* a burst of queued packets must not be ENOBUFS */
    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    printf("ready queue %u delay %.3f ms loss %.3f%% seed %llu\n", queue, delay_ms, loss, seed);
    fflush(stdout);
    static char buf[65536] __attribute__((aligned));
    while (!stop) {
        struct timespec ts, *tsp = NULL;
        if (s.len > 0) {
            uint64_t now = now_ns(), due = s.ring[s.head].due;
            uint64_t wait = due > now ? due - now : 0;
            ts.tv_sec = (time_t)(wait / 1000000000u);
            ts.tv_nsec = (long)(wait % 1000000000u);
            tsp = &ts;
        }
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        int rc = ppoll(&pfd, 1, tsp, NULL);
        if (rc < 0 && errno != EINTR) {
            perror("shaper: ppoll");
            break;
        }
        if (rc > 0) {
            for (;;) {
                ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
                if (n < 0) {
                    if (errno == ENOBUFS) {
                        fprintf(stderr, "shaper: ENOBUFS: the kernel dropped queue messages\n");
                        continue;
                    }
                    break;
                }
                nfq_handle_packet(h, buf, (int)n);
            }
        }
        release_due(&s, now_ns(), 0);
    }
    release_due(&s, now_ns(), 1);
    fprintf(stderr,
            "shaper: seen %llu dropped %llu overflow %llu released %llu held_max %llu "
            "late_avg_us %.1f late_max_us %.1f\n",
            (unsigned long long)s.seen, (unsigned long long)s.dropped,
            (unsigned long long)s.overflow, (unsigned long long)s.released,
            (unsigned long long)s.held_max,
            s.released ? (double)s.late_sum_ns / (double)s.released / 1e3 : 0.0,
            (double)s.late_max_ns / 1e3);
    nfq_destroy_queue(s.qh);
    nfq_close(h);
    free(s.ring);
    return 0;
}
