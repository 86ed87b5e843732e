/* Suspending another thread: it stops at its next switch and thread_wait
 * with wait=1 returns once it has; while stopped it makes no progress;
 * thread_info reports the states, the processor and CPU time. */
#include <stdint.h>
#include <ferry/ferry.h>
#include "check.h"

static volatile long progress;
static volatile int stop;

static any_t busy(any_t arg) {
    (void)arg;
    while (!stop) {
        progress++;
        cthread_yield();
    }
    return 0;
}

int main(void) {
    cthread_t t = cthread_fork(busy, 0);
    while (progress < 100) cthread_yield();
    struct ferry_thread_info info;
    CHECK(thread_suspend(t) == FERRY_SUCCESS);
    CHECK(thread_info(t, &info) == FERRY_SUCCESS && info.state == FERRY_THREAD_WILL_SUSPEND);
    CHECK(thread_wait(t, 1) == FERRY_SUCCESS);
    CHECK(thread_info(t, &info) == FERRY_SUCCESS && info.state == FERRY_THREAD_STOPPED);
    long frozen = progress;
    for (int i = 0; i < 1000; i++) cthread_yield();
    CHECK(progress == frozen);
    CHECK(thread_resume(t) == FERRY_SUCCESS);
    while (progress < frozen + 100) cthread_yield();
    CHECK(thread_info(t, &info) == FERRY_SUCCESS);
    CHECK(info.state == FERRY_THREAD_RUNNING);
    CHECK(info.processor >= 0);
    CHECK(info.cpu_time_ns > 0);
    stop = 1;
    cthread_join(t);
    puts("ok");
    return 0;
}
