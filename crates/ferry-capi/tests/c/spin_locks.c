/* C-Threads spin locks: 8 cthreads on 2 processors (with a short time
 * slice, so that holders are preempted inside the section) and a plain
 * pthread add to one counter under one spin lock; the count is exact. */
#include <pthread.h>
#include <stdint.h>
#include <unistd.h>
#include <ferry/ferry.h>
#include "check.h"

#define THREADS 8
#define ROUNDS 200000

static spin_lock_t lock = SPIN_LOCK_INITIALIZER;
static volatile uint64_t counter;

static any_t adder(any_t arg) {
    for (int i = 0; i < ROUNDS; i++) {
        spin_lock(&lock);
        counter = counter + 1;
        spin_unlock(&lock);
    }
    return arg;
}

static void *pthread_adder(void *arg) { return adder(arg); }

int main(void) {
    alarm(120); /* a hang fails the test */
    spin_lock_t l;
    spin_lock_init(&l);
    CHECK(spin_try_lock(&l) == 1);
    CHECK(spin_try_lock(&l) == 0);
    spin_unlock(&l);
    CHECK(spin_try_lock(&l) == 1);
    spin_unlock(&l);

    cthread_t t[THREADS];
    for (intptr_t i = 0; i < THREADS; i++) CHECK((t[i] = cthread_fork(adder, (any_t)i)) != NO_CTHREAD);
    pthread_t p;
    CHECK(pthread_create(&p, NULL, pthread_adder, NULL) == 0);
    for (intptr_t i = 0; i < THREADS; i++) CHECK(cthread_join(t[i]) == (any_t)i);
    CHECK(pthread_join(p, NULL) == 0);
    CHECK(counter == (uint64_t)(THREADS + 1) * ROUNDS);
    puts("ok");
    return 0;
}
