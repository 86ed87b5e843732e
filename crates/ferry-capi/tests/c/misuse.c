/* Every thread-control and C-Threads call with stale and garbage handles:
 * refused with FERRY_INVALID_ARGUMENT (or ignored, for the void calls),
 * never a crash and never another thread. Also: terminate, info, the
 * thread list, ferry_init after the start, and the error strings. */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <ferry/ferry.h>
#include "check.h"

static any_t nothing(any_t arg) { return arg; }

static volatile int spin_go = 1;
static any_t yielder(any_t arg) {
    (void)arg;
    while (spin_go) cthread_yield();
    return (any_t)5;
}

static void all_refused(cthread_t t) {
    struct ferry_thread_info info;
    CHECK(thread_suspend(t) == FERRY_INVALID_ARGUMENT);
    CHECK(thread_resume(t) == FERRY_INVALID_ARGUMENT);
    CHECK(thread_wait(t, 1) == FERRY_INVALID_ARGUMENT);
    CHECK(thread_terminate(t) == FERRY_INVALID_ARGUMENT);
    CHECK(thread_info(t, &info) == FERRY_INVALID_ARGUMENT);
    errno = 0;
    CHECK(cthread_join(t) == NULL);
    CHECK(errno == EINVAL);
    cthread_detach(t);
    cthread_set_name(t, "x");
    cthread_set_data(t, (any_t)1);
    CHECK(cthread_name(t) == NULL);
    CHECK(cthread_data(t) == NULL);
}

int main(void) {
    CHECK(ferry_init(NULL) == FERRY_SUCCESS);
    CHECK(ferry_init(NULL) == FERRY_FAILURE);

    /* A joined handle is stale, and stays stale once its slot is reused. */
    cthread_t t = cthread_fork(nothing, (any_t)3);
    CHECK(cthread_join(t) == (any_t)3);
    all_refused(t);
    cthread_t fresh = cthread_fork(nothing, (any_t)4);
    CHECK(fresh != t);
    all_refused(t);
    cthread_set_data(t, (any_t)99); /* must not reach `fresh` */
    CHECK(cthread_data(fresh) == NULL);
    CHECK(cthread_join(fresh) == (any_t)4);

    /* A detached thread's handle goes stale once it ends. */
    cthread_t d = cthread_fork(nothing, 0);
    cthread_detach(d);
    for (int i = 0; i < 100; i++) cthread_yield();
    all_refused(d);

    /* Garbage (handle 1 would be the first thread, a real one). */
    cthread_t garbage[] = {NO_CTHREAD, (cthread_t)0xffff, (cthread_t)0x12345, (cthread_t)(uintptr_t)-1,
                           (cthread_t)((uintptr_t)7 << 32 | 3), (cthread_t)&garbage};
    for (unsigned i = 0; i < sizeof garbage / sizeof garbage[0]; i++) all_refused(garbage[i]);

    /* NULL out-pointers. */
    CHECK(thread_info(cthread_self(), NULL) == FERRY_INVALID_ARGUMENT);
    unsigned n;
    cthread_t *list;
    CHECK(task_threads(NULL, &n) == FERRY_INVALID_ARGUMENT);
    CHECK(task_threads(&list, NULL) == FERRY_INVALID_ARGUMENT);

    /* The first thread cannot be terminated; joining oneself is refused. */
    CHECK(thread_terminate(cthread_self()) == FERRY_FAILURE);
    errno = 0;
    CHECK(cthread_join(cthread_self()) == NULL);
    CHECK(errno == EDEADLK);

    /* Terminate a running thread: its joiner gets FERRY_TERMINATED and the
     * handle is stale after the join. */
    cthread_t y = cthread_fork(yielder, 0);
    for (int i = 0; i < 10; i++) cthread_yield();
    struct ferry_thread_info info;
    CHECK(thread_info(y, &info) == FERRY_SUCCESS);
    CHECK(info.state == FERRY_THREAD_RUNNING);
    CHECK(task_threads(&list, &n) == FERRY_SUCCESS);
    int seen = 0;
    for (unsigned i = 0; i < n; i++) seen += list[i] == y || list[i] == cthread_self();
    CHECK(seen == 2);
    task_threads_free(list);
    CHECK(thread_terminate(y) == FERRY_SUCCESS);
    CHECK(thread_terminate(y) == FERRY_FAILURE);
    CHECK(thread_info(y, &info) == FERRY_SUCCESS && info.state == FERRY_THREAD_FINISHED);
    CHECK((intptr_t)cthread_join(y) == FERRY_TERMINATED);
    all_refused(y);

    for (int code = -1; code < 10; code++) CHECK(ferry_strerror(code) != NULL);
    CHECK(strlen(ferry_strerror(FERRY_INVALID_ARGUMENT)) > 0);
    puts("ok");
    return 0;
}
