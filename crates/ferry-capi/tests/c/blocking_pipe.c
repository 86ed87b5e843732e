/* One processor: a thread computes while four others block in ferry_read
 * on pipes written later, and one in ferry_blocking (sleeping until the
 * compute thread advances): the compute thread keeps advancing the whole
 * time (progress counters, not times). */
#include <stdint.h>
#include <unistd.h>
#include <ferry/ferry.h>
#include "check.h"

static volatile long progress;
static volatile int done;
static int pipes[4][2];
static volatile long seen_while_blocked[4];

static any_t computer(any_t arg) {
    (void)arg;
    while (!done) {
        progress++;
        if (progress % 64 == 0) cthread_yield();
    }
    return 0;
}

static any_t reader(any_t arg) {
    intptr_t i = (intptr_t)arg;
    char c;
    long before = progress;
    CHECK(ferry_read(pipes[i][0], &c, 1) == 1);
    seen_while_blocked[i] = progress - before;
    return (any_t)(intptr_t)c;
}

/* Blocks in the kernel (short sleeps) until the computer has advanced
 * past `arg`, or for 60 s: only a processor handed on while this kernel
 * thread sleeps lets it advance. */
static any_t wait_for_progress(any_t arg) {
    long start = (long)(intptr_t)arg;
    for (int i = 0; i < 60000 && progress == start; i++) usleep(1000);
    return (any_t)7;
}

int main(void) {
    struct ferry_config cfg = {.processors = 1};
    CHECK(ferry_init(&cfg) == FERRY_SUCCESS);
    CHECK(ferry_processors() == 1);
    for (int i = 0; i < 4; i++) CHECK(pipe(pipes[i]) == 0);
    cthread_t comp = cthread_fork(computer, 0);
    cthread_t r[4];
    for (intptr_t i = 0; i < 4; i++) r[i] = cthread_fork(reader, (any_t)i);
    long before = progress;
    CHECK(ferry_blocking(wait_for_progress, (any_t)(intptr_t)before) == (any_t)7);
    CHECK(progress > before); /* the processor ran the computer meanwhile */
    for (int i = 0; i < 4; i++) {
        long p = progress;
        while (progress < p + 100000) cthread_yield();
        char c = (char)('a' + i);
        CHECK(write(pipes[i][1], &c, 1) == 1);
        CHECK(cthread_join(r[i]) == (any_t)(intptr_t)c);
        CHECK(seen_while_blocked[i] > 0);
    }
    done = 1;
    cthread_join(comp);
    puts("ok");
    return 0;
}
