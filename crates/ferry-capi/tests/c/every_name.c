/* Every name the ferry headers declare, used once as a program would,
 * built with -Wall -Wextra -Werror by gcc and clang: the headers compile
 * cleanly, and each name links and does what its documentation says in
 * the plain case. The other tests go deep; this one goes wide. */
#include <fcntl.h>
#include <stdio.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>
#include <ferry/ferry.h>
#include "check.h"

_Static_assert(sizeof(struct mutex) == FERRY_SYNC_WORDS * sizeof(uint64_t), "mutex size");
_Static_assert(sizeof(struct condition) == FERRY_SYNC_WORDS * sizeof(uint64_t), "condition size");

static char stream_name[64];

/* Connects to `stream_name` (another process would; a cthread does here)
 * and sends one byte. */
static any_t connect_and_send(any_t arg) {
    (void)arg;
    struct ferry_stream_writer *w;
    struct ferry_stream_reader *r;
    char c = 'c';
    CHECK(ferry_stream_connect(stream_name, &w, &r) == 0);
    CHECK(ferry_stream_write(w, &c, 1, 0) == 1);
    ferry_stream_writer_close(w);
    ferry_stream_reader_close(r);
    return NULL;
}

static struct mutex lock = MUTEX_INITIALIZER;
static struct condition changed = CONDITION_INITIALIZER;
static int stage;
static volatile int stop;
static volatile int got_signal;

static int answers(void *user, uint32_t op, const uint8_t *in, size_t in_len,
                   struct ferry_rpc_reply *reply) {
    (void)user;
    if (op == 1) return ferry_rpc_reply_buffer(reply, 3) ? 0 : ENOMEM;
    return op == 0 ? ferry_rpc_reply_set(reply, in, in_len) : ENOSYS;
}

static any_t twice(any_t arg) { return (any_t)((uintptr_t)arg * 2); }

static any_t exits(any_t arg) {
    cthread_exit(arg);
}

static any_t spins(any_t arg) {
    while (!stop) cthread_yield();
    return arg;
}

static any_t waits_for_stage(any_t arg) {
    mutex_lock(&lock);
    while (stage == 0) condition_wait(&changed, &lock);
    mutex_unlock(&lock);
    return arg;
}

static any_t sends_signals(any_t arg) {
    /* SIGWINCH is ignored by default, so one sent before ferry catches
     * it is lost, not fatal: send until the waiter has one. */
    while (!got_signal) {
        CHECK(kill(getpid(), SIGWINCH) == 0);
        cthread_yield();
    }
    return arg;
}

static any_t connects(any_t arg) {
    struct sockaddr_un *addr = arg;
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    CHECK(fd >= 0);
    CHECK(ferry_connect(fd, (const struct sockaddr *)addr, sizeof *addr) == 0);
    CHECK(ferry_write(fd, "x", 1) == 1);
    close(fd);
    return NULL;
}

static any_t in_the_kernel(any_t arg) { return (any_t)(intptr_t)usleep((useconds_t)(uintptr_t)arg); }

int main(void) {
    /* Starting: the stack guard before anything (it does not start the
     * runtime), then ferry_init, then ferry_processors. */
    CHECK(ferry_stack_guard_set(0) == FERRY_INVALID_ARGUMENT);
    CHECK(ferry_stack_guard_set(65536) == FERRY_SUCCESS);
    struct ferry_config config = {.processors = 2, .stack_size = 0, .time_slice_us = 0};
    ferry_return_t rc = ferry_init(&config);
    CHECK(rc == FERRY_SUCCESS);
    CHECK(ferry_init(NULL) == FERRY_FAILURE);
    CHECK(ferry_processors() == 2);
    CHECK(strlen(ferry_strerror(FERRY_INVALID_ARGUMENT)) > 0);
    CHECK(strlen(ferry_strerror(FERRY_RESOURCE_SHORTAGE)) > 0);

    /* Threads: fork, join, exit, detach, yield, self, names, data. */
    cthread_fn_t fn = twice;
    cthread_t t = cthread_fork(fn, (any_t)21);
    CHECK(t != NO_CTHREAD);
    cthread_set_name(t, "twice");
    CHECK(strcmp(cthread_name(t), "twice") == 0);
    cthread_set_data(t, (any_t)5);
    CHECK(cthread_data(t) == (any_t)5);
    CHECK(cthread_join(t) == (any_t)42);
    CHECK(cthread_join(cthread_fork(exits, (any_t)7)) == (any_t)7);
    cthread_detach(cthread_fork(twice, NULL));
    cthread_yield();
    cthread_t me = cthread_self();
    CHECK(me != NO_CTHREAD && strcmp(cthread_name(me), "main") == 0);

    /* errno and wiring. */
    CHECK(close(-1) == -1 && errno == EBADF);
    CHECK(ferry_errno_location() == &errno);
    errno = 0;
    cthread_wire();
    CHECK(errno == ENOTSUP);
    errno = 0;
    cthread_unwire();
    CHECK(errno == ENOTSUP);

    /* Mutexes and conditions, static and allocated. */
    mutex_t m = mutex_alloc();
    condition_t c = condition_alloc();
    CHECK(m != NULL && c != NULL);
    mutex_init(m);
    condition_init(c);
    CHECK(mutex_try_lock(m) != 0);
    CHECK(mutex_try_lock(m) == 0);
    mutex_unlock(m);
    condition_signal(c);
    condition_broadcast(c);
    mutex_set_name(m, "every-name mutex");
    CHECK(strcmp(mutex_name(m), "every-name mutex") == 0);
    condition_set_name(c, "every-name condition");
    CHECK(strcmp(condition_name(c), "every-name condition") == 0);
    mutex_clear(m);
    condition_clear(c);
    mutex_free(m);
    condition_free(c);

    /* Spin locks. */
    static spin_lock_t spin = SPIN_LOCK_INITIALIZER;
    spin_lock_t other;
    spin_lock_init(&other);
    spin_lock(&spin);
    CHECK(!spin_try_lock(&spin));
    spin_unlock(&spin);
    CHECK(spin_try_lock(&other));
    spin_unlock(&other);
    cthread_t waiters[2] = {cthread_fork(waits_for_stage, (any_t)1),
                            cthread_fork(waits_for_stage, (any_t)2)};
    mutex_lock(&lock);
    stage = 1;
    condition_broadcast(&changed);
    mutex_unlock(&lock);
    CHECK(cthread_join(waiters[0]) == (any_t)1 && cthread_join(waiters[1]) == (any_t)2);

    /* Thread control: suspend, wait, info, resume, terminate, the list. */
    cthread_t s = cthread_fork(spins, (any_t)3);
    struct ferry_thread_info info;
    CHECK(thread_suspend(s) == FERRY_SUCCESS);
    CHECK(thread_wait(s, 1) == FERRY_SUCCESS);
    CHECK(thread_info(s, &info) == FERRY_SUCCESS && info.state == FERRY_THREAD_STOPPED);
    CHECK(info.id != 0 && info.processor >= -1 && info.name == NULL && info.cpu_time_ns < UINT64_MAX);
    int states[] = {FERRY_THREAD_RUNNING, FERRY_THREAD_WILL_SUSPEND, FERRY_THREAD_SUSPENDED,
                    FERRY_THREAD_STOPPED, FERRY_THREAD_FINISHED, FERRY_THREAD_STOPPED_IN_CALL};
    CHECK(states[4] - states[0] == 4 && states[5] != states[3]);
    CHECK(thread_resume(s) == FERRY_SUCCESS);
    cthread_t *list;
    unsigned count;
    CHECK(task_threads(&list, &count) == FERRY_SUCCESS && count >= 2);
    task_threads_free(list);
    CHECK(thread_terminate(s) == FERRY_SUCCESS);
    CHECK(cthread_join(s) == (any_t)FERRY_TERMINATED);

    /* A thread made suspended runs once resumed; abort of a thread in no call. */
    cthread_t made = NO_CTHREAD;
    CHECK(thread_create(twice, (any_t)21, &made) == FERRY_SUCCESS && made != NO_CTHREAD);
    CHECK(thread_abort(made) == FERRY_SUCCESS);
    CHECK(thread_resume(made) == FERRY_SUCCESS);
    CHECK(cthread_join(made) == (any_t)42);

    /* Alerts, priority, run time. */
    CHECK(ferry_thread_alert(cthread_self()) == FERRY_SUCCESS && ferry_alerted());
    CHECK(ferry_allow_alerts(1) && ferry_clear_alert() && !ferry_alerted());
    int prio = -1;
    CHECK(ferry_thread_set_priority(cthread_self(), FERRY_PRIORITY_LOW, &prio) == FERRY_SUCCESS);
    CHECK(prio == FERRY_PRIORITY_LOW && FERRY_PRIORITY_HIGH < FERRY_PRIORITY_NORMAL);
    CHECK(ferry_thread_set_priority(cthread_self(), FERRY_PRIORITY_NORMAL, NULL) == FERRY_SUCCESS);
    uint64_t ran_ns = 0;
    CHECK(ferry_thread_cpu_time(cthread_self(), &ran_ns) == FERRY_SUCCESS && ran_ns > 0);

    /* Blocking calls. */
    CHECK(ferry_blocking(in_the_kernel, (any_t)1000) == (any_t)0);
    int fd = ferry_open("/dev/null", O_RDONLY, 0);
    CHECK(fd >= 0);
    char buf[8];
    CHECK(ferry_read(fd, buf, sizeof buf) == 0);
    close(fd);
    pid_t child = fork();
    CHECK(child >= 0);
    if (child == 0) _exit(3);
    int status = 0;
    CHECK(ferry_waitpid(child, &status, 0) == child && WEXITSTATUS(status) == 3);

    /* Sockets: accept on a listener, connect from another thread. */
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    snprintf(addr.sun_path + 1, sizeof addr.sun_path - 1, "ferry-every-name-%d", (int)getpid());
    int listener = socket(AF_UNIX, SOCK_STREAM, 0);
    CHECK(listener >= 0);
    CHECK(bind(listener, (struct sockaddr *)&addr, sizeof addr) == 0 && listen(listener, 1) == 0);
    cthread_t client = cthread_fork(connects, &addr);
    struct sockaddr_un peer;
    socklen_t len = sizeof peer;
    int conn = ferry_accept(listener, (struct sockaddr *)&peer, &len);
    CHECK(conn >= 0);
    CHECK(ferry_read(conn, buf, 1) == 1 && buf[0] == 'x');
    cthread_join(client);
    close(conn);
    close(listener);

    /* Signals as messages. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGWINCH);
    cthread_t sender = cthread_fork(sends_signals, NULL);
    int signo = 0;
    CHECK(ferry_signal_wait(&set, &signo) == 0 && signo == SIGWINCH);
    got_signal = 1;
    cthread_join(sender);

    /* Calls (in this process here; see rpc_client.c for another). */
    char rpc_dir[64];
    snprintf(rpc_dir, sizeof rpc_dir, "/tmp/ferry-every-name-%d", (int)getpid());
    ferry_rpc_handler_t h = answers;
    struct ferry_rpc_server *server = NULL;
    struct ferry_rpc_channel *ch = NULL;
    CHECK(ferry_rpc_serve(NULL, 1, h, NULL, &server) == EFAULT);
    CHECK(ferry_rpc_connect(NULL, 1, &ch) == EFAULT);
    CHECK(ferry_rpc_serve_in(rpc_dir, "every-name", 1, h, NULL, &server) == 0);
    CHECK(ferry_rpc_connect_in(rpc_dir, "every-name", 1, &ch) == 0);
    CHECK(ferry_rpc_max_call(ch) >= FERRY_RPC_MAX_CALL);
    uint8_t res[8];
    size_t res_len = 0;
    CHECK(ferry_rpc_call(ch, 0, (const uint8_t *)"hi", 2, res, sizeof res, &res_len) == 0);
    CHECK(res_len == 2 && memcmp(res, "hi", 2) == 0);
    CHECK(ferry_rpc_call_timeout(ch, 1, NULL, 0, res, sizeof res, &res_len,
                                 FERRY_RPC_NO_TIMEOUT) == 0 && res_len == 3);
    uint8_t *got = NULL;
    CHECK(ferry_rpc_call_alloc(ch, 2, NULL, 0, FERRY_RPC_NO_TIMEOUT, &got, &res_len) == ENOSYS);
    CHECK(got == NULL && strlen(ferry_rpc_strerror(ENOSYS)) > 0);
    ferry_rpc_close(ch);
    CHECK(ferry_rpc_server_mode(server) != 0);
    ferry_rpc_server_close(server);
    struct ferry_rpc_chain_info chain;
    CHECK(ferry_rpc_chain(&chain) == 0 && chain.depth == 1 &&
          chain.hops[0] == (uint32_t)getpid() && FERRY_RPC_MAX_CHAIN_DEPTH >= 2);
    CHECK(ferry_rpc_serve_mode(rpc_dir, "every-name", 1, FERRY_RPC_SERVE_STATIC, h, NULL,
                               &server) == 0);
    CHECK(ferry_rpc_server_mode(server) == FERRY_RPC_SERVE_STATIC);
    ferry_rpc_server_close(server);
    CHECK(ferry_rpc_serve_mode(rpc_dir, "every-name", 1, FERRY_RPC_SERVE_MIGRATING, h, NULL,
                               &server) == 0 && FERRY_RPC_SERVE_DEFAULT == 0);
    ferry_rpc_server_close(server);
    struct ferry_stream_writer *sw;
    struct ferry_stream_reader *sr;
    char sbyte = 's';
    CHECK(ferry_stream_pipe(0, &sw, &sr) == 0);
    struct ferry_stream_writer *sw2 = ferry_stream_writer_clone(sw);
    struct ferry_stream_reader *sr2 = ferry_stream_reader_clone(sr);
    CHECK(sw2 != NULL && sr2 != NULL);
    CHECK(ferry_stream_write(sw2, &sbyte, 1, 0) == 1);
    sbyte = 0;
    CHECK(ferry_stream_read(sr2, &sbyte, 1, 1) == 1 && sbyte == 's');
    ferry_stream_writer_close(sw2);
    ferry_stream_reader_close(sr2);
    ferry_stream_writer_close(sw);
    ferry_stream_reader_close(sr);
    snprintf(stream_name, sizeof stream_name, "every-name-%d", (int)getpid());
    struct ferry_stream_listener *sl;
    CHECK(ferry_stream_listen(stream_name, 0, &sl) == 0);
    cthread_t connector = cthread_fork(connect_and_send, NULL);
    CHECK(ferry_stream_accept(sl, &sw, &sr) == 0);
    sbyte = 0;
    CHECK(ferry_stream_read(sr, &sbyte, 1, 0) == 1 && sbyte == 'c');
    cthread_join(connector);
    ferry_stream_writer_close(sw);
    ferry_stream_reader_close(sr);
    ferry_stream_listener_close(sl);
    CHECK(rmdir(rpc_dir) == 0);

    puts("ok");
    /* The first thread's cthread_exit waits for the others, then ends the
     * process with status 0. */
    stop = 1;
    cthread_exit(NULL);
}
