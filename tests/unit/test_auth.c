/* test_auth: Basic authentication's verdicts (rt/auth.h) against a real htpasswd file (bcrypt
 * and SHA-crypt hashes made here by libcrypt), verified by the real verifier threads, and the
 * htpasswd reader's refusals (rt/htpasswd.h).
 * Must not: need a connection or a worker: auth knows a waiting request only by its resume
 * token, which auth_collect hands back (checked here), and its client only by its address.
 * Ownership: the auth state, files and tokens are each test's. */
#include "unit.h"

#include <arpa/inet.h>
#include <crypt.h>
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/peer.h"
#include "core/policy.h"
#include "site/auth.h"
#include "site/htpasswd.h"

struct fixture {
    char dir[64], file[96];
    int wake_fd;
    struct authstate *a;
    struct auth_file *f;
    struct peer peer;           /* every request's client: one address */
    uint32_t next;              /* the next token's owner */
    struct resume_token got[8]; /* what auth_collect handed back */
    unsigned ngot;
};

/* "user:HASH(password)" with a setting prefix ("$2b$", "$6$") at the lowest cost. */
static void add_user(FILE *fp, const char *user, const char *password, const char *prefix)
{
    char salt[CRYPT_GENSALT_OUTPUT_SIZE];
    static struct crypt_data data; /* 32 KiB: not on the stack */
    CHECK(crypt_gensalt_rn(prefix, 0, NULL, 0, salt, sizeof(salt)) != NULL);
    const char *hash = crypt_rn(password, salt, &data, sizeof(data));
    CHECK(hash && hash[0] == '$');
    fprintf(fp, "%s:%s\n", user, hash);
}

static void write_file(const char *path, const char *text)
{
    FILE *fp = fopen(path, "w");
    CHECK(fp != NULL);
    fputs(text, fp);
    fclose(fp);
}

static void setup(struct fixture *x)
{
    memset(x, 0, sizeof(*x));
    strcpy(x->dir, "/tmp/test_auth.XXXXXX");
    CHECK(mkdtemp(x->dir) != NULL);
    snprintf(x->file, sizeof(x->file), "%s/htpasswd", x->dir);
    FILE *fp = fopen(x->file, "w");
    CHECK(fp != NULL);
    fputs("# staff\n\n", fp);
    add_user(fp, "alice", "wonder", "$2b$");     /* bcrypt, htpasswd -B */
    add_user(fp, "bob", "s\xc3\xa9same", "$6$"); /* SHA-512 crypt, a UTF-8 password */
    fclose(fp);
    char why[256] = "";
    CHECK_INT(auth_file_load(x->file, &x->f, why, sizeof(why)), 0);
    x->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    CHECK(x->wake_fd >= 0 && (x->a = auth_state_new(x->wake_fd)) != NULL);
    struct sockaddr_in sin = {.sin_family = AF_INET};
    inet_pton(AF_INET, "127.0.0.1", &sin.sin_addr);
    peer_set(&x->peer, (const struct sockaddr *)&sin, sizeof(sin));
    CHECK(x->peer.known);
}

static void teardown(struct fixture *x)
{
    auth_state_free(x->a); /* joins the threads, frees verifications left in flight */
    close(x->wake_fd);
    auth_file_free(x->f);
    unlink(x->file);
    rmdir(x->dir);
}

/* A request's resume token, as a protocol makes it from its connection. */
static struct resume_token token(struct fixture *x)
{
    return (struct resume_token){x->next++, 7};
}

/* The verdict on a request whose Authorization is value (none when NULL), waiting with t
 * (NULL: the check serve makes when it answers). */
static enum auth_verdict check(struct fixture *x, const struct resume_token *t, const char *value)
{
    struct http_request req;
    memset(&req, 0, sizeof(req));
    if (value) {
        req.headers[0].name = (struct http_str){"Authorization", 13};
        req.headers[0].value = (struct http_str){unit_guard_str(value), strlen(value)};
        req.num_headers = 1;
    }
    return auth_check(x->a, x->f, &req, &x->peer, t);
}

static void resumed(void *arg, struct resume_token t)
{
    struct fixture *x = arg;
    CHECK(x->ngot < sizeof(x->got) / sizeof(x->got[0]));
    x->got[x->ngot++] = t;
}

/* Waits (10 s at most) for a verification to finish and collects it: its token comes back. */
static void settle(struct fixture *x, struct resume_token t)
{
    struct pollfd p = {.fd = x->wake_fd, .events = POLLIN};
    CHECK_INT(poll(&p, 1, 10000), 1);
    uint64_t n;
    CHECK(read(x->wake_fd, &n, sizeof(n)) == (ssize_t)sizeof(n));
    x->ngot = 0;
    auth_collect(x->a, resumed, x);
    CHECK_INT(x->ngot, 1);
    CHECK(x->got[0].owner == t.owner && x->got[0].gen == t.gen);
}

/* The verdict on value once verified off the loop: WAIT first, then what serve's check says. */
static enum auth_verdict verified(struct fixture *x, const char *value)
{
    struct resume_token t = token(x);
    CHECK_INT(check(x, &t, value), AUTH_WAIT);
    CHECK_INT(check(x, &t, value), AUTH_WAIT); /* asked again while in flight: still waiting */
    settle(x, t);
    return check(x, NULL, value);
}

/* base64 of "alice:wonder", "alice:wrong", "bob:sésame", "mallory:wonder", "bob:wonder" */
#define ALICE "Basic YWxpY2U6d29uZGVy"
#define ALICE_WRONG "Basic YWxpY2U6d3Jvbmc="
#define BOB "Basic Ym9iOnPDqXNhbWU="
#define MALLORY "Basic bWFsbG9yeTp3b25kZXI="
#define BOB_WRONG "Basic Ym9iOndvbmRlcg=="

TEST(auth_without_credentials_is_denied_at_once)
{
    struct fixture x;
    setup(&x);
    struct resume_token t = token(&x);
    CHECK_INT(check(&x, &t, NULL), AUTH_DENIED);
    CHECK_INT(check(&x, &t, "Bearer YWxpY2U6d29uZGVy"), AUTH_DENIED);
    CHECK_INT(check(&x, &t, "Basic YWxpY2U6d29uZGVy!"), AUTH_DENIED); /* not base64 */
    CHECK_INT(check(&x, &t, "Basic YWxpY2U="), AUTH_DENIED);          /* "alice": no ':' */
    CHECK_INT(check(&x, NULL, ALICE), AUTH_DENIED); /* serve's check never starts one */
    teardown(&x);
}

TEST(auth_verdicts_from_a_real_htpasswd_file)
{
    struct fixture x;
    setup(&x);
    CHECK_INT(x.f->n, 2);
    CHECK_INT(verified(&x, ALICE), AUTH_GRANTED); /* bcrypt */
    CHECK_INT(verified(&x, BOB), AUTH_GRANTED);   /* SHA-crypt, UTF-8 */
    CHECK_INT(verified(&x, ALICE_WRONG), AUTH_DENIED);
    CHECK_INT(verified(&x, BOB_WRONG), AUTH_DENIED);
    CHECK_INT(verified(&x, MALLORY), AUTH_DENIED); /* no such user (a dummy hash is checked) */

    /* A granted verdict is remembered: a connection's next request costs no verification. */
    struct resume_token t = token(&x);
    CHECK_INT(check(&x, &t, ALICE), AUTH_GRANTED);
    CHECK_INT(check(&x, NULL, BOB), AUTH_GRANTED);
    /* A failed one is read once, by the request it was for; the next attempt is verified. */
    CHECK_INT(check(&x, &t, ALICE_WRONG), AUTH_WAIT);
    /* A reload forgets them all: the files may have changed. */
    auth_forget(x.a);
    CHECK_INT(check(&x, NULL, ALICE), AUTH_DENIED);
    teardown(&x);
}

TEST(auth_bounds_verifications_per_client_address)
{
    struct fixture x;
    setup(&x);
    struct resume_token t[AUTH_PER_ADDR + 1];
    const char *values[] = {ALICE_WRONG, BOB_WRONG, MALLORY};
    for (int i = 0; i < AUTH_PER_ADDR; i++) {
        t[i] = token(&x);
        CHECK_INT(check(&x, &t[i], values[i]), AUTH_WAIT);
    }
    /* one more from the same address waits for none of them: 429 */
    t[AUTH_PER_ADDR] = token(&x);
    CHECK_INT(check(&x, &t[AUTH_PER_ADDR], values[AUTH_PER_ADDR]), AUTH_BUSY);
    CHECK_INT(check(&x, NULL, values[AUTH_PER_ADDR]), AUTH_BUSY);   /* serve's check agrees */
    CHECK_INT(check(&x, NULL, values[AUTH_PER_ADDR]), AUTH_DENIED); /* ... once */
    /* another client address is not bound by this one's */
    struct sockaddr_in other = {.sin_family = AF_INET};
    inet_pton(AF_INET, "127.0.0.2", &other.sin_addr);
    peer_set(&x.peer, (const struct sockaddr *)&other, sizeof(other));
    struct resume_token u = token(&x);
    CHECK_INT(check(&x, &u, values[AUTH_PER_ADDR]), AUTH_WAIT);
    teardown(&x); /* with three still in flight: they are abandoned, not leaked */
}

TEST(htpasswd_refuses_weak_or_malformed_files_with_the_line)
{
    char dir[] = "/tmp/test_htpasswd.XXXXXX", path[64], why[256];
    struct auth_file *f = NULL;
    CHECK(mkdtemp(dir) != NULL);
    snprintf(path, sizeof(path), "%s/htpasswd", dir);
    static const struct {
        const char *text, *says;
    } bad[] = {
        {"# only a comment\n\n", "has no users"},
        {"alice:$apr1$abcdefgh$0123456789abcdefghijkl\n", "line 1: MD5 ($apr1$) is refused"},
        {"# c\nalice:plaintext\n", "line 2: only bcrypt"},
        {"alice:{SHA}W6ph5Mm5Pz8GgiULbPgzG37mj9g=\n", "line 1: only bcrypt"},
        {"no colon here\n", "line 1: not 'user:hash'"},
        {":$2b$05$abcdefghijklmnopqrstuu\n", "line 1: not 'user:hash'"},
        {"alice:$2b$\n", "line 1: the hash is malformed"},
        /* cut short: libcrypt's check of the setting alone passed these */
        {"alice:$2b$05$abcdefghijklmnopqrstuu\n", "line 1: the hash is malformed"},
        {"alice:$6$saltsalt$\n", "line 1: the hash is malformed"},
        {"alice:$5$rounds=5000$salt$abc\n", "line 1: the hash is malformed"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        write_file(path, bad[i].text);
        why[0] = '\0';
        CHECK_INT(auth_file_load(path, &f, why, sizeof(why)), -EINVAL);
        if (!strstr(why, bad[i].says) || !strstr(why, path))
            fprintf(stderr, "  case %zu: %s\n", i, why);
        CHECK(strstr(why, bad[i].says) && strstr(why, path));
    }
    CHECK_INT(auth_file_check("/nonexistent/htpasswd", why, sizeof(why)), -ENOENT);
    /* whole hashes of every accepted form load, "rounds=" included */
    FILE *fp = fopen(path, "w");
    CHECK(fp != NULL);
    add_user(fp, "a", "pw", "$2y$");
    add_user(fp, "b", "pw", "$2a$");
    add_user(fp, "c", "pw", "$5$");
    add_user(fp, "d", "pw", "$6$");
    char salt[CRYPT_GENSALT_OUTPUT_SIZE], hash[CRYPT_OUTPUT_SIZE];
    CHECK(crypt_gensalt_rn("$5$", 6000, NULL, 0, salt, sizeof(salt)) != NULL);
    static struct crypt_data data; /* 32 KiB: not on the stack */
    const char *made = crypt_r("pw", salt, &data);
    CHECK(strncmp(salt, "$5$rounds=6000$", 15) == 0 && made != NULL);
    snprintf(hash, sizeof(hash), "%s", made ? made : "");
    fprintf(fp, "e:%s\n", hash);
    fclose(fp);
    CHECK_INT(auth_file_load(path, &f, why, sizeof(why)), 0);
    CHECK(f && f->n == 5 && strcmp(f->users[4].hash, hash) == 0);
    auth_file_free(f);
    unlink(path);
    rmdir(dir);
}
