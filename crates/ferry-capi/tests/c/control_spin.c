/* Thread control takes effect on a thread that computes without ever
 * switching (no yield, no time slice): thread_wait stops it, thread_resume
 * lets it go on, thread_terminate ends it. A thread made by thread_create
 * runs only once resumed, and may be terminated before it ever ran.
 * alarm() turns a stop that never comes into a failure, not a hang. */
#include <stdint.h>
#include <unistd.h>
#include <ferry/ferry.h>
#include "check.h"

static volatile long progress;
static volatile int stop;
static volatile int created_ran;

static any_t spin(any_t arg) {
    (void)arg;
    while (!stop) progress++;
    return (any_t)1;
}

static any_t mark(any_t arg) {
    created_ran = 1;
    return arg;
}

int main(void) {
    alarm(60);
    cthread_t t = cthread_fork(spin, 0);
    CHECK(t != NO_CTHREAD);
    struct ferry_thread_info info;
    for (int round = 0; round < 20; round++) {
        long before = progress;
        while (progress == before) cthread_yield();
        CHECK(thread_suspend(t) == FERRY_SUCCESS);
        CHECK(thread_wait(t, 1) == FERRY_SUCCESS);
        CHECK(thread_info(t, &info) == FERRY_SUCCESS);
        CHECK(info.state == FERRY_THREAD_STOPPED);
        long frozen = progress;
        for (int i = 0; i < 200; i++) cthread_yield();
        CHECK(progress == frozen);
        CHECK(thread_resume(t) == FERRY_SUCCESS);
        while (progress == frozen) cthread_yield();
    }
    CHECK(thread_terminate(t) == FERRY_SUCCESS);
    CHECK(cthread_join(t) == (any_t)FERRY_TERMINATED);
    long frozen = progress;
    for (int i = 0; i < 200; i++) cthread_yield();
    CHECK(progress == frozen);

    cthread_t c;
    CHECK(thread_create(mark, (any_t)7, &c) == FERRY_SUCCESS);
    CHECK(thread_info(c, &info) == FERRY_SUCCESS);
    CHECK(info.state == FERRY_THREAD_STOPPED);
    for (int i = 0; i < 200; i++) cthread_yield();
    CHECK(!created_ran);
    CHECK(thread_resume(c) == FERRY_SUCCESS);
    CHECK(cthread_join(c) == (any_t)7);
    CHECK(created_ran);

    created_ran = 0;
    CHECK(thread_create(mark, (any_t)8, &c) == FERRY_SUCCESS);
    CHECK(thread_terminate(c) == FERRY_SUCCESS);
    CHECK(cthread_join(c) == (any_t)FERRY_TERMINATED);
    CHECK(!created_ran);

    CHECK(thread_create(NULL, 0, &c) == FERRY_INVALID_ARGUMENT);
    CHECK(thread_create(mark, 0, NULL) == FERRY_INVALID_ARGUMENT);
    puts("ok");
    return 0;
}
