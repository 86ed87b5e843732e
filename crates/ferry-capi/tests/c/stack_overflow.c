/* A cthread whose every frame holds a 5,000-byte local array (touched at
 * both ends) recurses without bound. Built without stack-clash probes, each
 * frame skips more than a page at once: the process must die by SIGSEGV
 * with ferry's overflow report naming the thread, and no other thread's
 * stack may change on the way (a second thread keeps checking a canary on
 * its own stack). The harness checks stderr and the signal. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/resource.h>
#include <ferry/cthreads.h>
#include "deep_frames.h"

#define CANARY_BYTES 65536

static volatile int canary_ready;

static any_t deep(any_t arg) {
    (void)arg;
    cthread_set_name(cthread_self(), "deep-c-frames");
    while (!canary_ready) cthread_yield();
    recurse_without_bound();
    return 0;
}

static any_t keeper(any_t arg) {
    (void)arg;
    cthread_set_name(cthread_self(), "canary-keeper");
    volatile unsigned char canary[CANARY_BYTES];
    for (int i = 0; i < CANARY_BYTES; i++) canary[i] = 0xA5;
    canary_ready = 1;
    for (;;) {
        for (int i = 0; i < CANARY_BYTES; i++) {
            if (canary[i] != 0xA5) {
                fprintf(stderr, "canary changed at byte %d\n", i);
                _exit(2);
            }
        }
        cthread_yield();
    }
    return 0;
}

int main(void) {
    struct rlimit no_core = {0, 0};
    setrlimit(RLIMIT_CORE, &no_core); /* it dies on purpose */
    /* The recursing thread's stack first, the keeper's next: mappings are
     * placed top-down, so the keeper's stack is likely the one right below
     * the recursing thread's guard. */
    cthread_t d = cthread_fork(deep, 0);
    cthread_t k = cthread_fork(keeper, 0);
    cthread_join(d);
    cthread_join(k);
    puts("not reached");
    return 0;
}
