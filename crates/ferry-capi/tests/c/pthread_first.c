/* The first ferry call of the program comes from a pthread, not main: the
 * runtime starts in the background and the pthread calls ferry as a
 * kernel thread outside it. It forks and joins cthreads, takes a mutex
 * cthreads contend for, waits on a condition a cthread signals, makes
 * blocking calls through ferry and asks thread_info of a cthread, and
 * returns from its start routine on the kernel thread it started on, so
 * pthread_join in main returns. Then main, also outside the runtime, does
 * the same. The harness runs this many times: it must never hang. */
#include <pthread.h>
#include <stdint.h>
#include <unistd.h>
#include <ferry/ferry.h>
#include "check.h"

#define WORKERS 4
#define ROUNDS 1000

static struct mutex m = MUTEX_INITIALIZER;
static struct condition c = CONDITION_INITIALIZER;
static long counter;
static int signalled;

static any_t add(any_t arg) {
    for (int i = 0; i < ROUNDS; i++) {
        mutex_lock(&m);
        counter++;
        mutex_unlock(&m);
        if (i % 64 == 0) cthread_yield();
    }
    return arg;
}

static any_t signaller(any_t arg) {
    cthread_yield();
    mutex_lock(&m);
    signalled = 1;
    condition_signal(&c);
    mutex_unlock(&m);
    return arg;
}

/* Everything a kernel thread outside the runtime does here: fork, join,
 * lock against cthreads, wait for one; it is no cthread itself. */
static void *outside(void *arg) {
    pid_t tid = gettid();
    CHECK(cthread_self() == NO_CTHREAD);
    cthread_t ts[WORKERS];
    for (intptr_t i = 0; i < WORKERS; i++) {
        ts[i] = cthread_fork(add, (any_t)(i + 1));
        CHECK(ts[i] != NO_CTHREAD);
    }
    for (int i = 0; i < ROUNDS; i++) {
        mutex_lock(&m);
        counter++;
        mutex_unlock(&m);
    }
    for (intptr_t i = 0; i < WORKERS; i++) CHECK(cthread_join(ts[i]) == (any_t)(i + 1));

    mutex_lock(&m);
    signalled = 0;
    cthread_t s = cthread_fork(signaller, (any_t)7);
    while (!signalled) condition_wait(&c, &m);
    mutex_unlock(&m);
    CHECK(cthread_join(s) == (any_t)7);

    int fds[2];
    CHECK(pipe(fds) == 0);
    char buf[4] = {0};
    CHECK(ferry_write(fds[1], "abc", 3) == 3);
    CHECK(ferry_read(fds[0], buf, sizeof buf) == 3 && buf[2] == 'c');
    close(fds[0]);
    close(fds[1]);

    cthread_t t = cthread_fork(add, (any_t)9);
    struct ferry_thread_info info;
    CHECK(thread_info(t, &info) == FERRY_SUCCESS);
    CHECK(cthread_join(t) == (any_t)9);

    cthread_yield();
    CHECK(cthread_self() == NO_CTHREAD);
    CHECK(gettid() == tid);
    return arg;
}

int main(void) {
    pthread_t p;
    CHECK(pthread_create(&p, NULL, outside, (void *)42) == 0);
    void *r = NULL;
    CHECK(pthread_join(p, &r) == 0);
    CHECK(r == (void *)42);
    CHECK(counter == (WORKERS + 2) * ROUNDS);

    /* main was never adopted: it too is outside the runtime. */
    CHECK(outside((void *)43) == (void *)43);
    CHECK(counter == 2 * (WORKERS + 2) * ROUNDS);
    puts("ok");
    return 0;
}
