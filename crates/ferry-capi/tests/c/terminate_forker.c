/* A thread that forks and joins without pause is terminated, fifty times
 * over: wherever the stop lands, the C API's own locks (the free list of
 * thread records, a record's lock) are never left held, so main's forks
 * and joins afterwards go on. */
#include <stdint.h>
#include <time.h>
#include <ferry/ferry.h>
#include "check.h"

static any_t nothing(any_t arg) { return arg; }

static any_t forker(any_t arg) {
    for (uintptr_t i = 0;; i++) {
        cthread_t t = cthread_fork(nothing, (any_t)i);
        if (i % 2) {
            cthread_detach(t);
        } else {
            cthread_join(t);
        }
    }
    return arg;
}

int main(void) {
    struct timespec d = {0, 200000};
    for (int round = 0; round < 50; round++) {
        cthread_t f = cthread_fork(forker, 0);
        nanosleep(&d, NULL);
        CHECK(thread_terminate(f) == FERRY_SUCCESS);
        CHECK(cthread_join(f) == (any_t)FERRY_TERMINATED);
        for (uintptr_t i = 0; i < 100; i++) CHECK(cthread_join(cthread_fork(nothing, (any_t)i)) == (any_t)i);
    }
    puts("ok");
    return 0;
}
