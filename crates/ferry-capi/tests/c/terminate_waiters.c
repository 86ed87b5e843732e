/* thread_terminate on a thread waiting in a mutex or a condition: the
 * terminated waiter leaves the queue, and a wakeup already given to it goes
 * to the next waiter. One processor, so "fork, then yield until it blocks"
 * is deterministic; a lost wakeup hangs, and the alarm turns the hang into
 * a failure. */
#include <signal.h>
#include <unistd.h>
#include <ferry/ferry.h>
#include "check.h"

static struct mutex m = MUTEX_INITIALIZER;
static struct condition c = CONDITION_INITIALIZER;
static volatile int inside;
static volatile int woken;

static any_t lock_then_count(any_t arg) {
    (void)arg;
    mutex_lock(&m);
    inside++;
    mutex_unlock(&m);
    return 0;
}

static any_t wait_then_count(any_t arg) {
    (void)arg;
    mutex_lock(&m);
    condition_wait(&c, &m);
    woken++;
    mutex_unlock(&m);
    return 0;
}

static void settle(void) {
    for (int i = 0; i < 20; i++) cthread_yield();
}

static void lost(int sig) {
    (void)sig;
    static const char msg[] = "a waiter slept for ever: the wakeup was lost\n";
    (void)!write(2, msg, sizeof msg - 1);
    _exit(1);
}

int main(void) {
    signal(SIGALRM, lost);
    alarm(60);

    /* A then B wait on the mutex; A is terminated, then the unlock: B. */
    for (int unlock_first = 0; unlock_first < 2; unlock_first++) {
        inside = 0;
        mutex_lock(&m);
        cthread_t a = cthread_fork(lock_then_count, 0);
        settle();
        cthread_t b = cthread_fork(lock_then_count, 0);
        settle();
        if (unlock_first) {
            mutex_unlock(&m); /* wakes A, which has not run yet */
            CHECK(thread_terminate(a) == FERRY_SUCCESS);
        } else {
            CHECK(thread_terminate(a) == FERRY_SUCCESS);
            mutex_unlock(&m);
        }
        CHECK(cthread_join(a) == (any_t)FERRY_TERMINATED);
        cthread_join(b);
        CHECK(inside == 1);
        CHECK(mutex_try_lock(&m));
        mutex_unlock(&m);
    }

    /* Two wait on the condition; one is terminated; a signal wakes the
     * other, whether it comes before or after the termination. */
    for (int signal_first = 0; signal_first < 2; signal_first++) {
        woken = 0;
        cthread_t a = cthread_fork(wait_then_count, 0);
        settle();
        cthread_t b = cthread_fork(wait_then_count, 0);
        settle();
        if (signal_first) {
            mutex_lock(&m);
            condition_signal(&c); /* to A, which has not run yet */
            mutex_unlock(&m);
            CHECK(thread_terminate(a) == FERRY_SUCCESS);
        } else {
            CHECK(thread_terminate(a) == FERRY_SUCCESS);
            mutex_lock(&m);
            condition_signal(&c);
            mutex_unlock(&m);
        }
        CHECK(cthread_join(a) == (any_t)FERRY_TERMINATED);
        cthread_join(b);
        CHECK(woken == 1);
        CHECK(mutex_try_lock(&m)); /* the terminated waiter holds no lock */
        mutex_unlock(&m);
    }
    puts("ok");
    return 0;
}
