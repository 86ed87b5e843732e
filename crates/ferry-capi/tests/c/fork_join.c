/* 10,000 cthread_fork/cthread_join pairs, each result checked; then a
 * batch of 100 forked at once and joined in reverse order. */
#include <stdint.h>
#include <ferry/cthreads.h>
#include "check.h"

static any_t plus_one(any_t arg) { return (any_t)((uintptr_t)arg + 1); }

int main(void) {
    for (uintptr_t i = 0; i < 10000; i++) {
        cthread_t t = cthread_fork(plus_one, (any_t)i);
        CHECK(t != NO_CTHREAD);
        CHECK((uintptr_t)cthread_join(t) == i + 1);
    }
    cthread_t ts[100];
    for (uintptr_t i = 0; i < 100; i++) ts[i] = cthread_fork(plus_one, (any_t)(i * 3));
    for (int i = 99; i >= 0; i--) CHECK((uintptr_t)cthread_join(ts[i]) == (uintptr_t)i * 3 + 1);
    puts("ok");
    return 0;
}
