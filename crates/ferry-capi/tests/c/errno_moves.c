/* errno is per cthread, in plain C as people write it: eight threads on
 * two processors (FERRY_PROCESSORS=2) each write errno, yield, and read it
 * back; make a failing close(-1), take and release a contended mutex, and
 * check errno is still EBADF. No helper functions: the compiler sees the
 * errno write, the switch and the read in one function, and at -O2 would
 * keep errno's address across the switch if the header let it.
 *
 * The harness builds this with gcc and clang, -O2 and -O3, with and
 * without -flto, and with <errno.h> included before the ferry header
 * (ERRNO_FIRST) or after it. */
#ifdef ERRNO_FIRST
#include <errno.h>
#endif
#include <ferry/cthreads.h>
#ifndef ERRNO_FIRST
#include <errno.h>
#endif
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>
#include "check.h"

#define THREADS 8
#define ROUNDS 2000

static struct mutex m = MUTEX_INITIALIZER;

static any_t worker(any_t arg) {
    int mine = (int)(intptr_t)arg;
    long wrong = 0;
    for (int i = 0; i < ROUNDS; i++) {
        errno = mine + i;
        cthread_yield();
        if (errno != mine + i) wrong++;

        close(-1);
        mutex_lock(&m);
        cthread_yield();
        mutex_unlock(&m);
        if (errno != EBADF) wrong++;
    }
    return (any_t)(intptr_t)wrong;
}

int main(void) {
    cthread_t ts[THREADS];
    for (intptr_t i = 0; i < THREADS; i++) {
        ts[i] = cthread_fork(worker, (any_t)(i * 100000 + 1));
        CHECK(ts[i] != NO_CTHREAD);
    }
    long wrong = 0;
    for (int i = 0; i < THREADS; i++) wrong += (intptr_t)cthread_join(ts[i]);
    printf("wrong errno reads: %ld of %d\n", wrong, THREADS * ROUNDS * 2);
    CHECK(wrong == 0);
    puts("ok");
    return 0;
}
