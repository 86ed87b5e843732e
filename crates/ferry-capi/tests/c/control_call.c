/* Thread control on a thread blocked in ferry_read on a pipe nobody
 * writes to: thread_wait returns at once and thread_info reports it
 * stopped in the call; when the read returns the thread runs nothing
 * after it until resumed; thread_terminate ends it; thread_abort makes
 * the read fail with EINTR. alarm() turns a hang into a failure. */
#include <errno.h>
#include <stdint.h>
#include <unistd.h>
#include <ferry/ferry.h>
#include "check.h"

static volatile int after;
static volatile int read_errno;

static any_t reader(any_t arg) {
    char c;
    ssize_t n = ferry_read((int)(intptr_t)arg, &c, 1);
    read_errno = n < 0 ? errno : 0;
    after = 1;
    return (any_t)(intptr_t)n;
}

/* Suspends t until thread_wait finds it in its read (a suspension that
 * catches it before the read is undone and tried again). */
static void stop_in_call(cthread_t t) {
    struct ferry_thread_info info;
    for (;;) {
        CHECK(thread_suspend(t) == FERRY_SUCCESS);
        CHECK(thread_wait(t, 1) == FERRY_SUCCESS);
        CHECK(thread_info(t, &info) == FERRY_SUCCESS);
        if (info.state == FERRY_THREAD_STOPPED_IN_CALL) return;
        CHECK(info.state == FERRY_THREAD_STOPPED);
        CHECK(thread_resume(t) == FERRY_SUCCESS);
        cthread_yield();
    }
}

int main(void) {
    alarm(60);
    struct ferry_thread_info info;
    int p[2];

    /* Stopped in the call, then on its return. */
    CHECK(pipe(p) == 0);
    after = 0;
    cthread_t t = cthread_fork(reader, (any_t)(intptr_t)p[0]);
    stop_in_call(t);
    CHECK(write(p[1], "x", 1) == 1);
    do {
        cthread_yield();
        CHECK(thread_info(t, &info) == FERRY_SUCCESS);
    } while (info.state != FERRY_THREAD_STOPPED);
    for (int i = 0; i < 200; i++) cthread_yield();
    CHECK(!after);
    CHECK(thread_resume(t) == FERRY_SUCCESS);
    CHECK(cthread_join(t) == (any_t)1);
    CHECK(after);
    close(p[0]);
    close(p[1]);

    /* Terminated in the call. */
    CHECK(pipe(p) == 0);
    after = 0;
    t = cthread_fork(reader, (any_t)(intptr_t)p[0]);
    stop_in_call(t);
    CHECK(thread_resume(t) == FERRY_SUCCESS);
    CHECK(thread_terminate(t) == FERRY_SUCCESS);
    CHECK(cthread_join(t) == (any_t)FERRY_TERMINATED);
    CHECK(!after);

    /* Aborted: the read fails with EINTR and the thread goes on. */
    after = 0;
    t = cthread_fork(reader, (any_t)(intptr_t)p[0]);
    stop_in_call(t);
    CHECK(thread_resume(t) == FERRY_SUCCESS);
    CHECK(thread_abort(t) == FERRY_SUCCESS);
    CHECK(cthread_join(t) == (any_t)(intptr_t)-1);
    CHECK(after);
    CHECK(read_errno == EINTR);

    /* Nothing to abort: success, nothing happens. */
    CHECK(thread_abort(cthread_self()) == FERRY_SUCCESS);
    CHECK(thread_abort(NO_CTHREAD) == FERRY_INVALID_ARGUMENT);
    close(p[0]);
    close(p[1]);
    puts("ok");
    return 0;
}
