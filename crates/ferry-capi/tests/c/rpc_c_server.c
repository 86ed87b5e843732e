/* A C server in a forked process answering a C client, in the runtime
 * directory FERRY_RPC_DIR. The interface "c-counter" at version 7:
 *   op 0: echo (ferry_rpc_reply_set);
 *   op 1: the arguments reversed (built in place, ferry_rpc_reply_buffer);
 *   op 2: eight bytes v -> adds v to a counter, answers the new total;
 *         other lengths: EINVAL;
 *   op 3: a result over the maximum (EMSGSIZE from ferry_rpc_reply_set);
 *   op 4: the handler fails with an unlisted code (the client: EREMOTEIO);
 *   op 5: the chain the handler runs in (struct ferry_rpc_chain_info);
 *   others: ENOSYS.
 * It is served three times: as "c-counter" in the default mode (what
 * FERRY_RPC_MODE says), and as "c-counter-migrating" and
 * "c-counter-static" in the mode each names (ferry_rpc_serve_mode). */
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <ferry/ferry.h>
#include "check.h"

#define NAME "c-counter"
#define VERSION 7
#define CALLERS 16
#define ADDS 100

struct state {
    struct mutex lock;
    uint64_t total;
    uint64_t calls;
};

static int handle(void *user, uint32_t op, const uint8_t *in, size_t in_len,
                  struct ferry_rpc_reply *reply) {
    struct state *s = user;
    mutex_lock(&s->lock);
    s->calls++;
    mutex_unlock(&s->lock);
    switch (op) {
    case 0:
        return ferry_rpc_reply_set(reply, in, in_len);
    case 1: {
        uint8_t *out = ferry_rpc_reply_buffer(reply, in_len);
        if (out == NULL) return ENOMEM;
        for (size_t i = 0; i < in_len; i++) out[i] = in[in_len - 1 - i];
        return 0;
    }
    case 2: {
        uint64_t v, total;
        if (in_len != sizeof v) return EINVAL;
        memcpy(&v, in, sizeof v);
        mutex_lock(&s->lock);
        total = s->total += v;
        mutex_unlock(&s->lock);
        return ferry_rpc_reply_set(reply, (const uint8_t *)&total, sizeof total);
    }
    case 3: {
        static uint8_t big[FERRY_RPC_MAX_CALL + 1];
        return ferry_rpc_reply_set(reply, big, sizeof big);
    }
    case 4:
        return 42;
    case 5: {
        struct ferry_rpc_chain_info c;
        memset(&c, 0xff, sizeof c);
        int rc = ferry_rpc_chain(&c);
        if (rc != 0) return rc == ENOTSUP ? 43 : 44;
        return ferry_rpc_reply_set(reply, (const uint8_t *)&c, sizeof c);
    }
    default:
        return ENOSYS;
    }
}

/* The server process: serves until the client closes `stop`. */
static int serve(const char *dir, int ready, int stop) {
    static struct state s = {MUTEX_INITIALIZER, 0, 0};
    struct ferry_rpc_server *server = NULL, *second = NULL, *migrating = NULL, *fixed = NULL;
    CHECK(ferry_rpc_serve_in(dir, NAME, VERSION, NULL, &s, &server) == EFAULT);
    CHECK(ferry_rpc_serve_mode(dir, NAME, VERSION, 3, handle, &s, &server) == EINVAL);
    CHECK(ferry_rpc_serve_mode(dir, NAME, VERSION, -1, handle, &s, &server) == EINVAL);
    CHECK(ferry_rpc_serve_in(dir, "", VERSION, handle, &s, &server) == EINVAL);
    CHECK(ferry_rpc_serve_in("/tmp", NAME, VERSION, handle, &s, &server) == EPERM);
    CHECK(server == NULL);
    CHECK(ferry_rpc_serve_in(dir, NAME, VERSION, handle, &s, &server) == 0);
    CHECK(ferry_rpc_serve_in(dir, NAME, VERSION, handle, &s, &second) == EADDRINUSE);
    const char *mode = getenv("FERRY_RPC_MODE");
    int expect = mode != NULL && strcmp(mode, "static") == 0 ? FERRY_RPC_SERVE_STATIC
                                                             : FERRY_RPC_SERVE_MIGRATING;
    CHECK(ferry_rpc_server_mode(server) == expect);
    CHECK(ferry_rpc_server_mode(NULL) == 0);
    CHECK(ferry_rpc_serve_mode(dir, NAME "-migrating", VERSION, FERRY_RPC_SERVE_MIGRATING, handle,
                               &s, &migrating) == 0);
    CHECK(ferry_rpc_serve_mode(dir, NAME "-static", VERSION, FERRY_RPC_SERVE_STATIC, handle, &s,
                               &fixed) == 0);
    CHECK(ferry_rpc_server_mode(migrating) == FERRY_RPC_SERVE_MIGRATING);
    CHECK(ferry_rpc_server_mode(fixed) == FERRY_RPC_SERVE_STATIC);
    CHECK(ferry_write(ready, "r", 1) == 1);
    char b;
    while (ferry_read(stop, &b, 1) > 0) {
    }
    ferry_rpc_server_close(server);
    ferry_rpc_server_close(migrating);
    ferry_rpc_server_close(fixed);
    ferry_rpc_server_close(NULL);
    CHECK(s.total == CALLERS * ADDS);
    CHECK(s.calls >= CALLERS * ADDS);
    return 0;
}

static struct ferry_rpc_channel *ch;

static uint64_t add(uint64_t v) {
    uint64_t total = 0;
    size_t len = 0;
    int rc = ferry_rpc_call(ch, 2, (const uint8_t *)&v, sizeof v, (uint8_t *)&total,
                            sizeof total, &len);
    CHECK(rc == 0 && len == sizeof total);
    return total;
}

static any_t adder(any_t arg) {
    (void)arg;
    for (int i = 0; i < ADDS; i++) add(1);
    return (any_t)0;
}

/* The chain a handler of server `name` saw on a call with a deadline of
 * 60 s. */
static struct ferry_rpc_chain_info chain_seen_by(const char *dir, const char *name) {
    struct ferry_rpc_channel *c = NULL;
    CHECK(ferry_rpc_connect_in(dir, name, VERSION, &c) == 0);
    struct ferry_rpc_chain_info seen;
    size_t len = 0;
    CHECK(ferry_rpc_call_timeout(c, 5, NULL, 0, (uint8_t *)&seen, sizeof seen, &len,
                                 60000000000ull) == 0);
    CHECK(len == sizeof seen);
    ferry_rpc_close(c);
    return seen;
}

static void *chain_off_runtime(void *arg) {
    struct ferry_rpc_chain_info *c = arg;
    return (void *)(intptr_t)ferry_rpc_chain(c);
}

/* The chain at the origin, in a migrating call (the caller's logical
 * thread, one process further) and in a static call (the service
 * thread's own). */
static void check_chains(const char *dir, pid_t server) {
    uint32_t me = (uint32_t)getpid(), there = (uint32_t)server;
    struct ferry_rpc_chain_info own, seen;
    memset(&own, 0xff, sizeof own);
    CHECK(ferry_rpc_chain(NULL) == EFAULT);
    CHECK(ferry_thread_set_priority(cthread_self(), FERRY_PRIORITY_HIGH, NULL) == FERRY_SUCCESS);
    CHECK(ferry_rpc_chain(&own) == 0);
    CHECK(own.origin_pid == me && own.origin_start != 0 && own.origin_thread != 0);
    CHECK(own.depth == 1 && own.hops[0] == me && own.hops[1] == 0);
    CHECK(own.priority == FERRY_PRIORITY_HIGH);
    CHECK(own.has_deadline == 0 && own.deadline_ns_left == 0);

    seen = chain_seen_by(dir, NAME "-migrating");
    CHECK(seen.origin_pid == me && seen.origin_start == own.origin_start);
    CHECK(seen.origin_thread == own.origin_thread);
    CHECK(seen.depth == 2 && seen.hops[0] == me && seen.hops[1] == there);
    for (int i = 2; i < FERRY_RPC_MAX_CHAIN_DEPTH; i++) CHECK(seen.hops[i] == 0);
    CHECK(seen.priority == FERRY_PRIORITY_HIGH);
    CHECK(seen.has_deadline == 1);
    CHECK(seen.deadline_ns_left > 0 && seen.deadline_ns_left <= 60000000000ull);
    uint64_t cpu = 0;
    CHECK(ferry_thread_cpu_time(cthread_self(), &cpu) == FERRY_SUCCESS);
    CHECK(seen.cpu_ns <= cpu);

    seen = chain_seen_by(dir, NAME "-static");
    CHECK(seen.origin_pid == there && seen.depth == 1);
    CHECK(seen.hops[0] == there && seen.hops[1] == 0);
    CHECK(seen.has_deadline == 0);
    CHECK(ferry_thread_set_priority(cthread_self(), FERRY_PRIORITY_NORMAL, NULL) == FERRY_SUCCESS);

    /* A kernel thread outside the runtime has no chain. */
    pthread_t p;
    void *rc = NULL;
    memset(&seen, 0xab, sizeof seen);
    CHECK(pthread_create(&p, NULL, chain_off_runtime, &seen) == 0);
    CHECK(pthread_join(p, &rc) == 0);
    CHECK((intptr_t)rc == ENOTSUP && seen.origin_pid == 0xabababab);
}

int main(void) {
    const char *dir = getenv("FERRY_RPC_DIR");
    CHECK(dir != NULL);
    int ready[2], stop[2];
    CHECK(pipe(ready) == 0 && pipe(stop) == 0);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        close(ready[0]);
        close(stop[1]);
        return serve(dir, ready[1], stop[0]);
    }
    close(ready[1]);
    close(stop[0]);
    char b;
    CHECK(ferry_read(ready[0], &b, 1) == 1);

    CHECK(ferry_rpc_connect_in(dir, NAME, VERSION, &ch) == 0);
    uint8_t out[64];
    size_t len = 0;
    CHECK(ferry_rpc_call(ch, 0, (const uint8_t *)"hello", 5, out, sizeof out, &len) == 0);
    CHECK(len == 5 && memcmp(out, "hello", 5) == 0);
    CHECK(ferry_rpc_call(ch, 1, (const uint8_t *)"abcdef", 6, out, sizeof out, &len) == 0);
    CHECK(len == 6 && memcmp(out, "fedcba", 6) == 0);
    CHECK(ferry_rpc_call(ch, 1, NULL, 0, out, sizeof out, &len) == 0 && len == 0);
    CHECK(ferry_rpc_call(ch, 2, (const uint8_t *)"abc", 3, out, sizeof out, &len) == EINVAL);
    CHECK(ferry_rpc_call(ch, 3, NULL, 0, out, sizeof out, &len) == EMSGSIZE);
    CHECK(ferry_rpc_call(ch, 4, NULL, 0, out, sizeof out, &len) == EREMOTEIO);
    CHECK(ferry_rpc_call(ch, 77, NULL, 0, out, sizeof out, &len) == ENOSYS);
    CHECK(ferry_rpc_call(ch, 0, (const uint8_t *)"hello", 5, out, 4, &len) == ERANGE && len == 5);
    check_chains(dir, pid);

    cthread_t t[CALLERS];
    for (int i = 0; i < CALLERS; i++) t[i] = cthread_fork(adder, NULL);
    for (int i = 0; i < CALLERS; i++) CHECK(cthread_join(t[i]) == (any_t)0);
    CHECK(add(0) == CALLERS * ADDS);

    ferry_rpc_close(ch);
    close(stop[1]);
    int status = 0;
    CHECK(ferry_waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    printf("ok\n");
    return 0;
}
