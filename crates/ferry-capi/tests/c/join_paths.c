/* The join right's paths: a join that waits while other threads still
 * reach the thread (info, suspend, resume) and a second join is refused,
 * a thread that joins itself (refused, and joinable afterwards), a detach
 * after the thread ended, and terminate of a detached thread. The checks
 * hold in any interleaving. errno is read and written through non-inlined
 * calls, as the header tells (threads move between processors here). */
#include <errno.h>
#include <stdint.h>
#include <ferry/ferry.h>
#include "check.h"

__attribute__((noinline)) static int read_errno(void) { return errno; }
__attribute__((noinline)) static void clear_errno(void) { errno = 0; }

static any_t nothing(any_t arg) { return arg; }

static volatile int go;
static any_t wait_for_go(any_t arg) {
    while (!go) cthread_yield();
    return arg;
}

static any_t joins_itself(any_t arg) {
    clear_errno();
    CHECK(cthread_join(cthread_self()) == NULL);
    CHECK(read_errno() == EDEADLK);
    return arg;
}

static cthread_t target;
static volatile int main_joining;
/* Races main's join of `target`: exactly one of the two joins gets its
 * result, the other is refused. Meanwhile `target` stays reachable. */
static any_t second_joiner(any_t arg) {
    (void)arg;
    while (!main_joining) cthread_yield();
    for (int i = 0; i < 10; i++) cthread_yield();
    struct ferry_thread_info info;
    CHECK(thread_info(target, &info) == FERRY_SUCCESS);
    CHECK(info.state == FERRY_THREAD_RUNNING);
    CHECK(thread_suspend(target) == FERRY_SUCCESS);
    CHECK(thread_resume(target) == FERRY_SUCCESS);
    CHECK(cthread_data(target) == (any_t)11);
    cthread_detach(target); /* refused if main's join took the right */
    go = 1;
    clear_errno();
    any_t r = cthread_join(target);
    CHECK(r == (any_t)7 || (r == NULL && read_errno() == EINVAL));
    return r;
}

int main(void) {
    /* A join that waits, and a second joiner. */
    target = cthread_fork(wait_for_go, (any_t)7);
    cthread_set_data(target, (any_t)11);
    cthread_t second = cthread_fork(second_joiner, 0);
    main_joining = 1;
    clear_errno();
    any_t mine = cthread_join(target);
    CHECK(mine == (any_t)7 || (mine == NULL && read_errno() == EINVAL));
    any_t theirs = cthread_join(second);
    CHECK((mine == (any_t)7) != (theirs == (any_t)7));
    CHECK(cthread_data(target) == NULL);

    /* A thread that joins itself is refused, and joined as usual after. */
    cthread_t s = cthread_fork(joins_itself, (any_t)9);
    CHECK(cthread_join(s) == (any_t)9);

    /* Detached after it ended: the handle goes stale at once. */
    cthread_t d = cthread_fork(nothing, 0);
    struct ferry_thread_info info;
    do {
        cthread_yield();
        CHECK(thread_info(d, &info) == FERRY_SUCCESS);
    } while (info.state != FERRY_THREAD_FINISHED);
    cthread_detach(d);
    CHECK(thread_info(d, &info) == FERRY_INVALID_ARGUMENT);
    clear_errno();
    CHECK(cthread_join(d) == NULL && read_errno() == EINVAL);

    /* Terminated while detached: the handle goes stale at once. */
    go = 0;
    cthread_t t = cthread_fork(wait_for_go, 0);
    cthread_yield();
    cthread_detach(t);
    CHECK(thread_terminate(t) == FERRY_SUCCESS);
    CHECK(thread_info(t, &info) == FERRY_INVALID_ARGUMENT);
    CHECK(thread_terminate(t) == FERRY_INVALID_ARGUMENT);

    /* Only the first thread is left. */
    unsigned n;
    cthread_t *list;
    CHECK(task_threads(&list, &n) == FERRY_SUCCESS);
    CHECK(n == 1 && list[0] == cthread_self());
    task_threads_free(list);
    puts("ok");
    return 0;
}
