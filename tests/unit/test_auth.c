/* test_auth: Basic authentication's verdicts (rt/auth.h) against a real htpasswd file (bcrypt
 * and SHA-crypt hashes made here by libcrypt), verified by the real verifier threads, and the
 * htpasswd reader's refusals (rt/htpasswd.h).
 * Must not: resume a connection: each verification's connection is marked gone (its generation
 * moves on) before the verdict is collected, so auth_collect only records it, and the verdict
 * is then read as serve's check reads it (no connection).
 * Ownership: the worker (only its auth state), files and connections are each test's. */
#include "unit.h"

#include <crypt.h>
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "conn.h"
#include "rt/auth.h"
#include "rt/htpasswd.h"
#include "rt/worker.h"

struct fixture {
    char dir[64], file[96];
    struct worker *w;
    struct auth_file *f;
    int peer[2]; /* a socketpair: each connection's socket is a dup of peer[0] */
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
    x->w = calloc(1, sizeof(*x->w));
    CHECK(x->w != NULL);
    x->w->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    CHECK(x->w->wake_fd >= 0 && (x->w->auth = auth_state_new(x->w->wake_fd)) != NULL);
    CHECK_INT(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, x->peer), 0);
}

static void teardown(struct fixture *x)
{
    auth_state_free(x->w->auth); /* joins the threads, frees verifications left in flight */
    close(x->w->wake_fd);
    free(x->w);
    auth_file_free(x->f);
    close(x->peer[0]);
    close(x->peer[1]);
    unlink(x->file);
    rmdir(x->dir);
}

/* A connection of the worker's with its own socket (same peer as the others: one address). */
static struct conn *connection(struct fixture *x)
{
    struct conn *c = calloc(1, sizeof(*c));
    CHECK(c != NULL);
    c->fd = dup(x->peer[0]);
    c->gen = 1;
    return c;
}

static void gone(struct conn *c)
{
    close(c->fd);
    free(c);
}

/* The verdict on a request whose Authorization is value (none when NULL), for c (NULL: the
 * check serve makes). */
static enum auth_verdict check(struct fixture *x, struct conn *c, const char *value)
{
    struct http_request req;
    memset(&req, 0, sizeof(req));
    if (value) {
        req.headers[0].name = (struct http_str){"Authorization", 13};
        req.headers[0].value = (struct http_str){unit_guard_str(value), strlen(value)};
        req.num_headers = 1;
    }
    return auth_check(x->w, c, x->f, &req);
}

/* Waits (10 s at most) for a verification to finish, marks c gone, collects the verdict. */
static void settle(struct fixture *x, struct conn *c)
{
    struct pollfd p = {.fd = x->w->wake_fd, .events = POLLIN};
    CHECK_INT(poll(&p, 1, 10000), 1);
    uint64_t n;
    CHECK(read(x->w->wake_fd, &n, sizeof(n)) == (ssize_t)sizeof(n));
    c->gen++; /* the connection went away meanwhile: nothing to resume */
    auth_collect(x->w);
}

/* The verdict on value once verified off the loop: WAIT first, then what serve's check says. */
static enum auth_verdict verified(struct fixture *x, const char *value)
{
    struct conn *c = connection(x);
    CHECK_INT(check(x, c, value), AUTH_WAIT);
    CHECK_INT(check(x, c, value), AUTH_WAIT); /* asked again while in flight: still waiting */
    settle(x, c);
    gone(c);
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
    struct conn *c = connection(&x);
    CHECK_INT(check(&x, c, NULL), AUTH_DENIED);
    CHECK_INT(check(&x, c, "Bearer YWxpY2U6d29uZGVy"), AUTH_DENIED);
    CHECK_INT(check(&x, c, "Basic YWxpY2U6d29uZGVy!"), AUTH_DENIED); /* not base64 */
    CHECK_INT(check(&x, c, "Basic YWxpY2U="), AUTH_DENIED);          /* "alice": no ':' */
    CHECK_INT(check(&x, NULL, ALICE), AUTH_DENIED); /* serve's check never starts one */
    gone(c);
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
    struct conn *c = connection(&x);
    CHECK_INT(check(&x, c, ALICE), AUTH_GRANTED);
    CHECK_INT(check(&x, NULL, BOB), AUTH_GRANTED);
    /* A failed one is read once, by the request it was for; the next attempt is verified. */
    CHECK_INT(check(&x, c, ALICE_WRONG), AUTH_WAIT);
    gone(c);
    /* A reload forgets them all: the files may have changed. */
    auth_forget(x.w->auth);
    CHECK_INT(check(&x, NULL, ALICE), AUTH_DENIED);
    teardown(&x);
}

TEST(auth_bounds_verifications_per_client_address)
{
    struct fixture x;
    setup(&x);
    struct conn *c[AUTH_PER_ADDR + 1];
    const char *values[] = {ALICE_WRONG, BOB_WRONG, MALLORY};
    for (int i = 0; i < AUTH_PER_ADDR; i++) {
        c[i] = connection(&x);
        CHECK_INT(check(&x, c[i], values[i]), AUTH_WAIT);
    }
    /* one more from the same address waits for none of them: 429 */
    c[AUTH_PER_ADDR] = connection(&x);
    CHECK_INT(check(&x, c[AUTH_PER_ADDR], values[AUTH_PER_ADDR]), AUTH_BUSY);
    CHECK_INT(check(&x, NULL, values[AUTH_PER_ADDR]), AUTH_BUSY);   /* serve's check agrees */
    CHECK_INT(check(&x, NULL, values[AUTH_PER_ADDR]), AUTH_DENIED); /* ... once */
    teardown(&x); /* with two still in flight: they are abandoned, not leaked */
    for (int i = 0; i <= AUTH_PER_ADDR; i++)
        gone(c[i]);
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
