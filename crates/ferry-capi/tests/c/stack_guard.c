/* A process that chooses one-page stack guards (ferry_stack_guard_set,
 * before any other ferry call): the call's codes, and a cthread that
 * recurses without bound in frames of 5,000 bytes, built with stack-clash
 * probes, so each frame touches every page on its way down. With probes a
 * one-page guard still stops it: the process must die by SIGSEGV with
 * ferry's overflow report naming the thread. The harness checks stderr
 * and the signal. */
#include <stdio.h>
#include <sys/resource.h>
#include <ferry/ferry.h>
#include "check.h"
#include "deep_frames.h"

static any_t deep(any_t arg) {
    (void)arg;
    cthread_set_name(cthread_self(), "deep-probed");
    recurse_without_bound();
    return 0;
}

int main(void) {
    struct rlimit no_core = {0, 0};
    setrlimit(RLIMIT_CORE, &no_core); /* it dies on purpose */
    CHECK(ferry_stack_guard_set(0) == FERRY_INVALID_ARGUMENT);
    CHECK(ferry_stack_guard_set((size_t)2 << 20) == FERRY_INVALID_ARGUMENT);
    CHECK(ferry_stack_guard_set(4096) == FERRY_SUCCESS);
    CHECK(ferry_stack_guard_set(100) == FERRY_SUCCESS); /* rounds to the same page */
    CHECK(ferry_stack_guard_set(8192) == FERRY_FAILURE);
    /* Starting the runtime does not change the choice. */
    CHECK(ferry_processors() > 0);
    CHECK(ferry_stack_guard_set(4096) == FERRY_SUCCESS);
    CHECK(ferry_stack_guard_set(65536) == FERRY_FAILURE);
    fprintf(stderr, "codes: ok\n");
    cthread_t d = cthread_fork(deep, 0);
    cthread_join(d);
    fprintf(stderr, "joined a thread that should have died\n");
    return 3;
}
