/* The C side of `ferry-bench threads --lang c`: URPC Table I's rows (and
 * Synthesis Table 3's create/destroy) written once, compiled twice: with
 * -DUSE_CTHREADS against ferry's C-Threads (libferry), and without against
 * pthreads. One timed run of one case per invocation, printed as
 * `name ns_per_op` lines, like the Go program.
 *
 * Usage: threads CASE N [BATCH]
 *   proc-call        N calls of a never-inlined empty function
 *   fork             N null threads forked in batches of BATCH; each batch
 *                    forked ("create"), then joined ("destroy"); "fork" is both
 *   fork-join        N times: fork a null thread and join it
 *   yield            two threads yield N times each; per yield
 *   acquire-release  N uncontended lock + increment + unlock
 *   pingpong         two threads alternate N cycles on a mutex-guarded turn
 *                    and a condition variable; per cycle
 *   process-fork     N times: fork() a process that _exit(0)s, waitpid it
 *                    (003 Table 8-1's Unix fork/wait/exit)
 *
 * Each case first runs untimed on a few operations (at most 1,000), so the
 * timed run finds the process warm (stacks cached, tables grown), as the
 * Rust rows find theirs in the long-lived bench process.
 *
 * ferry runs on one processor (FERRY_PROCESSORS=1, set by the caller), as
 * the paper's FastThreads did; pthreads run on any core, except yield,
 * whose threads are pinned to one CPU (on two, sched_yield switches
 * nothing). */
#define _GNU_SOURCE
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifdef USE_CTHREADS
#include <ferry/cthreads.h>
typedef cthread_t thread_t;
typedef struct mutex lock_t;
typedef struct condition cond_t;
#define LOCK_INIT MUTEX_INITIALIZER
#define COND_INIT CONDITION_INITIALIZER
static thread_t fork_thread(any_t (*f)(any_t), any_t arg) { return cthread_fork(f, arg); }
static void join_thread(thread_t t) { cthread_join(t); }
#define YIELD() cthread_yield()
#define LOCK(m) mutex_lock(m)
#define UNLOCK(m) mutex_unlock(m)
#define WAIT(c, m) condition_wait(c, m)
#define SIGNAL(c) condition_signal(c)
#else
#include <pthread.h>
typedef void *any_t;
typedef pthread_t thread_t;
typedef pthread_mutex_t lock_t;
typedef pthread_cond_t cond_t;
#define LOCK_INIT PTHREAD_MUTEX_INITIALIZER
#define COND_INIT PTHREAD_COND_INITIALIZER
static thread_t fork_thread(any_t (*f)(any_t), any_t arg) {
    pthread_t t;
    if (pthread_create(&t, NULL, f, arg) != 0) {
        perror("pthread_create");
        exit(1);
    }
    return t;
}
static void join_thread(thread_t t) { pthread_join(t, NULL); }
#define YIELD() sched_yield()
#define LOCK(m) pthread_mutex_lock(m)
#define UNLOCK(m) pthread_mutex_unlock(m)
#define WAIT(c, m) pthread_cond_wait(c, m)
#define SIGNAL(c) pthread_cond_signal(c)
#endif

/* Whether this run prints (the warm-up does not). */
static int report = 1;
#define REPORT(...) \
    do {            \
        if (report) printf(__VA_ARGS__); \
    } while (0)

static double now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

__attribute__((noinline)) static void null_procedure(void) { __asm__ volatile(""); }
static any_t null_thread(any_t arg) { return arg; }

static void proc_call(long n) {
    double t0 = now_ns();
    for (long i = 0; i < n; i++) null_procedure();
    REPORT("proc-call %.3f\n", (now_ns() - t0) / (double)n);
}

static void fork_batches(long n, long batch) {
    thread_t *ts = malloc(sizeof *ts * (size_t)batch);
    double create = 0, destroy = 0;
    long done = 0;
    while (done < n) {
        long b = n - done < batch ? n - done : batch;
        double t0 = now_ns();
        for (long i = 0; i < b; i++) ts[i] = fork_thread(null_thread, 0);
        double t1 = now_ns();
        for (long i = 0; i < b; i++) join_thread(ts[i]);
        double t2 = now_ns();
        create += t1 - t0;
        destroy += t2 - t1;
        done += b;
    }
    free(ts);
    REPORT("create %.3f\ndestroy %.3f\nfork %.3f\n", create / (double)n, destroy / (double)n,
           (create + destroy) / (double)n);
}

static void fork_join(long n) {
    double t0 = now_ns();
    for (long i = 0; i < n; i++) join_thread(fork_thread(null_thread, 0));
    REPORT("fork-join %.3f\n", (now_ns() - t0) / (double)n);
}

static long yield_n;
static any_t yielder(any_t arg) {
    for (long i = 0; i < yield_n; i++) YIELD();
    return arg;
}

static void yields(long n) {
#ifndef USE_CTHREADS
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(sched_getcpu(), &one);
    sched_setaffinity(0, sizeof one, &one); /* threads inherit it */
#endif
    yield_n = n;
    double t0 = now_ns();
    thread_t a = fork_thread(yielder, 0), b = fork_thread(yielder, 0);
    join_thread(a);
    join_thread(b);
    REPORT("yield %.3f\n", (now_ns() - t0) / (double)(2 * n));
}

static lock_t lock = LOCK_INIT;
static cond_t cond = COND_INIT;
static volatile long counter;

static void acquire_release(long n) {
    double t0 = now_ns();
    for (long i = 0; i < n; i++) {
        LOCK(&lock);
        counter++;
        UNLOCK(&lock);
    }
    double t = now_ns() - t0;
    if (counter != n) {
        fprintf(stderr, "lost increments\n");
        exit(1);
    }
    REPORT("acquire-release %.3f\n", t / (double)n);
}

static int turn;
static long pingpong_n;
static void side(int me, int other) {
    for (long i = 0; i < pingpong_n; i++) {
        LOCK(&lock);
        while (turn != me) WAIT(&cond, &lock);
        turn = other;
        SIGNAL(&cond);
        UNLOCK(&lock);
    }
}
static any_t side_b(any_t arg) {
    side(1, 0);
    return arg;
}

static void pingpong(long n) {
    pingpong_n = n;
    double t0 = now_ns();
    thread_t b = fork_thread(side_b, 0);
    side(0, 1);
    join_thread(b);
    REPORT("pingpong %.3f\n", (now_ns() - t0) / (double)n);
}

static void process_fork(long n) {
    double t0 = now_ns();
    for (long i = 0; i < n; i++) {
        pid_t pid = fork();
        if (pid == 0) _exit(0);
        if (pid < 0) {
            perror("fork");
            exit(1);
        }
        int status;
        waitpid(pid, &status, 0);
    }
    REPORT("process-fork %.3f\n", (now_ns() - t0) / (double)n);
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s CASE N [BATCH]\n", argv[0]);
        return 2;
    }
    const char *c = argv[1];
    long n = atol(argv[2]);
    long batch = argc > 3 ? atol(argv[3]) : 32;
    if (n <= 0 || batch <= 0) return 2;
    for (int pass = 0; pass < 2; pass++) {
        /* Pass 0 warms up, unreported; pass 1 is the timed run. */
        report = pass;
        long m = pass ? n : (n < 1000 ? n : 1000);
        counter = 0;
        if (!strcmp(c, "proc-call")) proc_call(m);
        else if (!strcmp(c, "fork")) fork_batches(m, batch);
        else if (!strcmp(c, "fork-join")) fork_join(m);
        else if (!strcmp(c, "yield")) yields(m);
        else if (!strcmp(c, "acquire-release")) acquire_release(m);
        else if (!strcmp(c, "pingpong")) pingpong(m);
        else if (!strcmp(c, "process-fork")) {
            if (pass) process_fork(m);
        } else {
            fprintf(stderr, "unknown case %s\n", c);
            return 2;
        }
    }
    return 0;
}
