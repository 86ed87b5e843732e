/* A C client of a server written in Rust in another process (started by
 * tests/c_rpc.rs, which passes its runtime directory in FERRY_RPC_DIR).
 * The server's interface "capi-echo" at version 0x5eed0001:
 *   op 0: echo;
 *   op 1: four bytes n (little-endian) -> n bytes, byte i = (i * 7) & 0xff;
 *         other argument lengths: bad arguments;
 *   op 2: four bytes ms -> sleeps ms milliseconds, then answers "late";
 *   op 3: panics;
 *   op 4: the server process aborts without answering;
 *   others: unknown operation. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <ferry/ferry.h>
#include "check.h"

#define VERSION 0x5eed0001ull
#define CALLERS 16
#define CALLS 200

static const char *dir;
static struct ferry_rpc_channel *ch;

static void put_u32(uint8_t *b, uint32_t v) {
    for (int i = 0; i < 4; i++) b[i] = (uint8_t)(v >> (8 * i));
}

static int echo_ok(const char *s) {
    uint8_t out[64];
    size_t len = 0;
    int rc = ferry_rpc_call(ch, 0, (const uint8_t *)s, strlen(s), out, sizeof out, &len);
    return rc == 0 && len == strlen(s) && memcmp(out, s, len) == 0;
}

/* Each caller echoes its own numbered messages: every reply must be its
 * own call's. */
static any_t caller(any_t arg) {
    uintptr_t me = (uintptr_t)arg;
    for (int i = 0; i < CALLS; i++) {
        char msg[32], out[32];
        int n = snprintf(msg, sizeof msg, "caller %u call %d", (unsigned)me, i);
        size_t len = 0;
        int rc = ferry_rpc_call(ch, 0, (const uint8_t *)msg, (size_t)n, (uint8_t *)out,
                                sizeof out, &len);
        if (rc != 0 || len != (size_t)n || memcmp(out, msg, len) != 0) return (any_t)1;
    }
    return (any_t)0;
}

/* A kernel thread outside the runtime: every rpc function refuses. */
static void *outsider(void *arg) {
    (void)arg;
    uint8_t out[8];
    size_t len = 0;
    struct ferry_rpc_channel *other = NULL;
    int a = ferry_rpc_call(ch, 0, (const uint8_t *)"x", 1, out, sizeof out, &len);
    int b = ferry_rpc_connect_in(dir, "capi-echo", VERSION, &other);
    return (void *)(uintptr_t)(a == ENOTSUP && b == ENOTSUP && other == NULL);
}

int main(void) {
    dir = getenv("FERRY_RPC_DIR");
    CHECK(dir != NULL);

    /* Binding errors. */
    struct ferry_rpc_channel *bad = NULL;
    CHECK(ferry_rpc_connect_in(dir, "capi-echo", VERSION + 1, &bad) == EPROTONOSUPPORT);
    CHECK(ferry_rpc_connect_in(dir, "nobody-here", VERSION, &bad) == ENOENT);
    CHECK(ferry_rpc_connect_in(dir, "a/b", VERSION, &bad) == EINVAL);
    CHECK(ferry_rpc_connect_in(dir, NULL, VERSION, &bad) == EFAULT);
    CHECK(ferry_rpc_connect_in(dir, "capi-echo", VERSION, NULL) == EFAULT);
    CHECK(bad == NULL);

    CHECK(ferry_rpc_connect_in(dir, "capi-echo", VERSION, &ch) == 0);
    CHECK(ferry_rpc_max_call(ch) >= FERRY_RPC_MAX_CALL);

    /* Echo, and an empty call with no buffers at all. */
    CHECK(echo_ok("hello"));
    size_t len = 99;
    CHECK(ferry_rpc_call(ch, 0, NULL, 0, NULL, 0, &len) == 0 && len == 0);
    CHECK(ferry_rpc_call(ch, 0, NULL, 3, NULL, 0, &len) == EFAULT);
    CHECK(ferry_rpc_call(ch, 0, NULL, 0, NULL, 0, NULL) == EFAULT);
    CHECK(ferry_rpc_call(NULL, 0, NULL, 0, NULL, 0, &len) == EFAULT);

    /* The server's faults. */
    uint8_t out[256];
    CHECK(ferry_rpc_call(ch, 99, (const uint8_t *)"x", 1, out, sizeof out, &len) == ENOSYS);
    CHECK(ferry_rpc_call(ch, 1, (const uint8_t *)"abc", 3, out, sizeof out, &len) == EINVAL);
    CHECK(ferry_rpc_call(ch, 3, NULL, 0, out, sizeof out, &len) == EREMOTEIO);
    CHECK(echo_ok("after a panic"));
    CHECK(strcmp(ferry_rpc_strerror(ENOSYS), "the server has no such operation") == 0);

    /* A result larger than the buffer: ERANGE with the length needed; the
     * channel goes on. */
    uint8_t n[4];
    put_u32(n, 100);
    len = 0;
    CHECK(ferry_rpc_call(ch, 1, n, 4, out, 10, &len) == ERANGE && len == 100);
    CHECK(ferry_rpc_call(ch, 1, n, 4, out, 100, &len) == 0 && len == 100);
    for (size_t i = 0; i < len; i++) CHECK(out[i] == (uint8_t)(i * 7));

    /* A large result in malloc'd memory, and arguments over the maximum. */
    put_u32(n, 1000000);
    uint8_t *big = NULL;
    CHECK(ferry_rpc_call_alloc(ch, 1, n, 4, FERRY_RPC_NO_TIMEOUT, &big, &len) == 0);
    CHECK(big != NULL && len == 1000000);
    for (size_t i = 0; i < len; i++) CHECK(big[i] == (uint8_t)(i * 7));
    free(big);
    uint8_t *huge = calloc(1, FERRY_RPC_MAX_CALL + 1);
    CHECK(huge != NULL);
    CHECK(ferry_rpc_call(ch, 0, huge, FERRY_RPC_MAX_CALL + 1, out, sizeof out, &len) == EMSGSIZE);
    free(huge);
    CHECK(echo_ok("after too large"));

    /* A deadline: the server sleeps a second, the call gives up after
     * 20 ms; the slot is reused safely by the calls after it. */
    put_u32(n, 1000);
    CHECK(ferry_rpc_call_timeout(ch, 2, n, 4, out, sizeof out, &len, 20 * 1000 * 1000) == ETIMEDOUT);
    CHECK(echo_ok("after a timeout"));
    put_u32(n, 0);
    CHECK(ferry_rpc_call_timeout(ch, 2, n, 4, out, sizeof out, &len, 60ull * 1000 * 1000 * 1000) == 0);
    CHECK(len == 4 && memcmp(out, "late", 4) == 0);

    /* Many cthreads calling at once on one channel. */
    cthread_t t[CALLERS];
    for (uintptr_t i = 0; i < CALLERS; i++) t[i] = cthread_fork(caller, (any_t)i);
    for (int i = 0; i < CALLERS; i++) CHECK(cthread_join(t[i]) == (any_t)0);

    /* Off the runtime: refused with ENOTSUP. */
    pthread_t p;
    void *refused = NULL;
    CHECK(pthread_create(&p, NULL, outsider, NULL) == 0);
    CHECK(pthread_join(p, &refused) == 0 && refused == (void *)1);

    /* The server dies in the middle of a call: the call fails, and so do
     * the calls after it. */
    CHECK(ferry_rpc_call(ch, 4, NULL, 0, out, sizeof out, &len) == ECONNRESET);
    CHECK(ferry_rpc_call(ch, 0, (const uint8_t *)"x", 1, out, sizeof out, &len) == ECONNRESET);
    ferry_rpc_close(ch);
    ferry_rpc_close(NULL);
    printf("ok\n");
    return 0;
}
