/* urpc: a call into another process over shared memory, from C. The
 * program forks; the child serves the interface "shout" (op 0: the
 * argument in capitals; op 1: nothing, a null call) and the parent calls
 * it from four cthreads at once, then times null calls. After binding, no
 * call goes through the kernel while both sides are awake.
 *
 *   cargo build --release -p ferry-capi
 *   export PKG_CONFIG_PATH=$PWD/target/release/pkgconfig
 *   cc examples/c/urpc.c $(pkg-config --cflags --libs ferry) -o urpc
 *   ./urpc [runtime-directory]
 *
 * Without an argument the server binds in the user's runtime directory
 * ($XDG_RUNTIME_DIR/ferry, else a per-user directory under /tmp). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <ferry/ferry.h>

#define NAME "shout"
#define VERSION 1
#define CALLERS 4
#define NULL_CALLS 20000

static const char *dir; /* NULL: the user's runtime directory */
static struct ferry_rpc_channel *ch;

static int shout(void *user, uint32_t op, const uint8_t *in, size_t in_len,
                 struct ferry_rpc_reply *reply) {
    (void)user;
    if (op == 1) return 0;
    if (op != 0) return ENOSYS;
    uint8_t *out = ferry_rpc_reply_buffer(reply, in_len);
    if (out == NULL) return ENOMEM;
    for (size_t i = 0; i < in_len; i++)
        out[i] = (in[i] >= 'a' && in[i] <= 'z') ? (uint8_t)(in[i] - 'a' + 'A') : in[i];
    return 0;
}

static void die(const char *what, int rc) {
    fprintf(stderr, "urpc: %s: %s\n", what, ferry_rpc_strerror(rc));
    exit(1);
}

static any_t caller(any_t arg) {
    char msg[32], out[32];
    int n = snprintf(msg, sizeof msg, "hello from cthread %d", (int)(intptr_t)arg);
    size_t len = 0;
    int rc = ferry_rpc_call(ch, 0, (const uint8_t *)msg, (size_t)n, (uint8_t *)out,
                            sizeof out - 1, &len);
    if (rc != 0) die("call", rc);
    out[len] = 0;
    printf("%s -> %s\n", msg, out);
    return NULL;
}

static double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

int main(int argc, char **argv) {
    dir = argc > 1 ? argv[1] : NULL;
    int ready[2], stop[2];
    if (pipe(ready) || pipe(stop)) return 1;
    pid_t pid = fork();
    if (pid < 0) return 1;
    if (pid == 0) { /* the server */
        close(ready[0]);
        close(stop[1]);
        struct ferry_rpc_server *server;
        int rc = ferry_rpc_serve_in(dir, NAME, VERSION, shout, NULL, &server);
        if (rc != 0) die("serve", rc);
        char b = 'r';
        ferry_write(ready[1], &b, 1);
        while (ferry_read(stop[0], &b, 1) > 0) {
        }
        ferry_rpc_server_close(server);
        return 0;
    }
    close(ready[1]);
    close(stop[0]);
    char b;
    if (ferry_read(ready[0], &b, 1) != 1) return 1; /* the server failed */

    int rc = ferry_rpc_connect_in(dir, NAME, VERSION, &ch);
    if (rc != 0) die("connect", rc);
    cthread_t t[CALLERS];
    for (intptr_t i = 0; i < CALLERS; i++) t[i] = cthread_fork(caller, (any_t)i);
    for (int i = 0; i < CALLERS; i++) cthread_join(t[i]);

    size_t len;
    double start = now_ns();
    for (int i = 0; i < NULL_CALLS; i++) {
        rc = ferry_rpc_call(ch, 1, NULL, 0, NULL, 0, &len);
        if (rc != 0) die("null call", rc);
    }
    printf("%d null calls: %.0f ns each\n", NULL_CALLS, (now_ns() - start) / NULL_CALLS);
    rc = ferry_rpc_call(ch, 7, NULL, 0, NULL, 0, &len);
    printf("op 7: %s\n", ferry_rpc_strerror(rc));

    ferry_rpc_close(ch);
    close(stop[1]);
    int status;
    ferry_waitpid(pid, &status, 0);
    printf("server exited with %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    return 0;
}
