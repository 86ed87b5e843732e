/* Mutex and condition misuse is answered as error-checking pthread mutexes
 * answer it, through errno (the C-Threads calls return nothing): a relock
 * sets EDEADLK and returns holding the mutex, an unlock by a thread that
 * does not hold the mutex sets EPERM and leaves the holder holding it, a
 * condition_wait without the mutex sets EPERM and returns without taking
 * it. From the first thread before and after the runtime starts, from
 * cthreads and from a plain pthread. Also mutex_clear/condition_clear and
 * the names. Each errno check comes before the thread's first switch. */
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>
#include <ferry/ferry.h>
#include "check.h"

static struct mutex m = MUTEX_INITIALIZER;     /* main holds it throughout */
static struct mutex free_m = MUTEX_INITIALIZER; /* nobody holds it */
static struct condition c = CONDITION_INITIALIZER;

static any_t stranger(any_t arg) {
    struct mutex own = MUTEX_INITIALIZER;
    errno = 0;
    mutex_unlock(&m);
    CHECK(errno == EPERM);
    CHECK(mutex_try_lock(&m) == 0); /* still main's */
    errno = 0;
    mutex_unlock(&free_m);
    CHECK(errno == EPERM);
    CHECK(mutex_try_lock(&free_m) == 1); /* and still free */
    mutex_unlock(&free_m);
    errno = 0;
    condition_wait(&c, &m);
    CHECK(errno == EPERM);
    CHECK(mutex_try_lock(&m) == 0); /* not taken by the wait */
    errno = 0;
    condition_wait(&c, &free_m);
    CHECK(errno == EPERM);
    CHECK(mutex_try_lock(&free_m) == 1); /* the wait did not take it */
    mutex_unlock(&free_m);
    mutex_lock(&own);
    errno = 0;
    mutex_lock(&own); /* returns: no hang */
    CHECK(errno == EDEADLK);
    CHECK(mutex_try_lock(&own) == 0); /* held once, by us */
    errno = 0;
    mutex_unlock(&own);
    CHECK(errno == 0);
    CHECK(mutex_try_lock(&own) == 1); /* one unlock freed it */
    mutex_unlock(&own);
    return arg;
}

static void *pthread_stranger(void *arg) { return stranger(arg); }

static struct mutex busy_m = MUTEX_INITIALIZER;
static struct condition busy_c = CONDITION_INITIALIZER;
static volatile int waiting;

static any_t waiter(any_t arg) {
    mutex_lock(&busy_m);
    waiting = 1;
    while (waiting == 1) condition_wait(&busy_c, &busy_m);
    mutex_unlock(&busy_m);
    return arg;
}

static any_t clearer(any_t arg) {
    errno = 0;
    condition_clear(&busy_c); /* a thread waits on it */
    CHECK(errno == EBUSY);
    errno = 0;
    mutex_clear(&busy_m); /* main holds it */
    CHECK(errno == EBUSY);
    return arg;
}

int main(void) {
    alarm(60); /* a hang fails the test */

    /* On the first thread before anything started the runtime. */
    mutex_lock(&m);
    errno = 0;
    mutex_lock(&m);
    CHECK(errno == EDEADLK);
    CHECK(mutex_try_lock(&m) == 0);
    errno = 0;
    mutex_unlock(&free_m);
    CHECK(errno == EPERM);
    errno = 0;
    condition_wait(&c, &free_m);
    CHECK(errno == EPERM);
    CHECK(mutex_try_lock(&free_m) == 1);
    mutex_unlock(&free_m);
    errno = 0;
    mutex_clear(&m);
    CHECK(errno == EBUSY);
    errno = 0;
    mutex_clear(&free_m); /* free, nobody waits: nothing to say */
    condition_clear(&c);
    CHECK(errno == 0);
    CHECK(mutex_try_lock(&free_m) == 1); /* still a working mutex */
    mutex_unlock(&free_m);

    CHECK(strcmp(mutex_name(&m), "?") == 0);
    CHECK(strcmp(condition_name(&c), "?") == 0);
    mutex_set_name(&m, "the held one");
    condition_set_name(&c, "the condition");
    CHECK(strcmp(mutex_name(&m), "the held one") == 0);
    CHECK(strcmp(condition_name(&c), "the condition") == 0);
    mutex_t heap = mutex_alloc();
    CHECK(strcmp(mutex_name(heap), "?") == 0);
    mutex_free(heap);

    /* The runtime starts here; main, still holding m, becomes a cthread. */
    cthread_t t = cthread_fork(stranger, (any_t)1);
    CHECK(cthread_join(t) == (any_t)1);
    pthread_t p;
    CHECK(pthread_create(&p, NULL, pthread_stranger, (void *)2) == 0);
    void *r;
    CHECK(pthread_join(p, &r) == 0 && r == (void *)2);

    /* main still holds m, and its unlock works. */
    CHECK(mutex_try_lock(&m) == 0);
    mutex_unlock(&m);
    CHECK(mutex_try_lock(&m) == 1);
    mutex_unlock(&m);

    /* Clearing a condition somebody waits on, or a held mutex. */
    cthread_t w = cthread_fork(waiter, (any_t)3);
    for (;;) {
        mutex_lock(&busy_m);
        if (waiting) break; /* the waiter queued itself before it let go */
        mutex_unlock(&busy_m);
        cthread_yield();
    }
    t = cthread_fork(clearer, (any_t)4);
    CHECK(cthread_join(t) == (any_t)4);
    waiting = 2;
    condition_signal(&busy_c);
    mutex_unlock(&busy_m);
    CHECK(cthread_join(w) == (any_t)3);
    CHECK(mutex_try_lock(&busy_m) == 1);
    mutex_unlock(&busy_m);
    puts("ok");
    return 0;
}
