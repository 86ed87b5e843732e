/* errno stays per cthread when a time slice preempts the thread between
 * any two instructions: eight cthreads on two processors with a short
 * slice write a fresh errno value and read it straight back, millions of
 * times, with no call that switches in between (and a little other
 * work between rounds, where a preemption may always act). A preemption that landed
 * after the header's errno accessor returned the kernel thread's errno
 * address, and before the access through it, would move the thread to
 * another kernel thread with that address in a register: the write would
 * go to the old kernel thread's errno and the read would see another
 * value. */
#include <errno.h>
#include <stdint.h>
#include <time.h>
#include <ferry/ferry.h>
#include "check.h"

static volatile int stop;
static volatile unsigned sink;

static any_t hammer(any_t arg) {
    int base = (int)(intptr_t)arg;
    long wrong = 0, rounds = 0;
    for (int v = 0; !stop; v++) {
        errno = base + (v & 0xffff);
        if (errno != base + (v & 0xffff)) wrong++;
        rounds++;
        for (unsigned k = 0; k < 16; k++) sink += k * (unsigned)v;
    }
    CHECK(rounds > 0);
    return (any_t)(intptr_t)wrong;
}

int main(void) {
    cthread_t ts[8];
    for (intptr_t i = 0; i < 8; i++) ts[i] = cthread_fork(hammer, (any_t)((i + 1) << 20));
    /* The runtime's preemption signal ends nanosleep early (EINTR, never
     * restarted): sleep out what is left. */
    struct timespec d = {2, 0};
    while (nanosleep(&d, &d) != 0 && errno == EINTR) {
    }
    stop = 1;
    long wrong = 0;
    for (int i = 0; i < 8; i++) wrong += (intptr_t)cthread_join(ts[i]);
    printf("wrong errno reads: %ld\n", wrong);
    CHECK(wrong == 0);
    puts("ok");
    return 0;
}
