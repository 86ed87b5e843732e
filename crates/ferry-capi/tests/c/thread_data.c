/* Per-cthread data, the documented replacement for __thread and
 * _Thread_local in a cthread: eight threads on two processors
 * (FERRY_PROCESSORS=2) each attach a record of their own with
 * cthread_set_data, then yield and block on a contended mutex many times,
 * moving between processors, and find their own record through
 * cthread_data(cthread_self()) every time. */
#include <stdint.h>
#include <stdio.h>
#include <ferry/ferry.h>
#include "check.h"

#define THREADS 8
#define ROUNDS 2000

struct mine {
    intptr_t owner;
    long count;
};

static struct mutex m = MUTEX_INITIALIZER;

static any_t worker(any_t arg) {
    struct mine record = {(intptr_t)arg, 0};
    cthread_set_data(cthread_self(), &record);
    long wrong = 0, moves = 0;
    int last = -1;
    for (int i = 0; i < ROUNDS; i++) {
        cthread_yield();
        struct mine *r = cthread_data(cthread_self());
        if (r != &record || r->owner != (intptr_t)arg) wrong++;
        r->count++;

        mutex_lock(&m);
        cthread_yield();
        mutex_unlock(&m);
        r = cthread_data(cthread_self());
        if (r != &record) wrong++;
        r->count++;

        struct ferry_thread_info info;
        CHECK(thread_info(cthread_self(), &info) == FERRY_SUCCESS);
        if (info.processor != last) moves++, last = info.processor;
    }
    CHECK(record.count == 2 * ROUNDS);
    printf("thread %ld: %ld wrong, %ld processor changes\n", (long)(intptr_t)arg, wrong, moves);
    return (any_t)wrong;
}

int main(void) {
    cthread_t ts[THREADS];
    for (intptr_t i = 0; i < THREADS; i++) {
        ts[i] = cthread_fork(worker, (any_t)(i + 1));
        CHECK(ts[i] != NO_CTHREAD);
    }
    long wrong = 0;
    for (int i = 0; i < THREADS; i++) wrong += (intptr_t)cthread_join(ts[i]);
    CHECK(wrong == 0);
    /* main's own word is separate from every worker's. */
    CHECK(cthread_data(cthread_self()) == NULL);
    puts("ok");
    return 0;
}
