/* errno is per cthread: each thread sets its own, then yields many times
 * (moving between processors, FERRY_PROCESSORS=2) and blocks on a mutex;
 * its errno is still its own. errno is read through a non-inlined call
 * after each switch, as the header tells (the compiler may otherwise keep
 * the address of the kernel thread's errno across the call). */
#include <errno.h>
#include <stdint.h>
#include <ferry/ferry.h>
#include "check.h"

static struct mutex m = MUTEX_INITIALIZER;

__attribute__((noinline)) static int read_errno(void) { return errno; }
__attribute__((noinline)) static void write_errno(int v) { errno = v; }

static any_t worker(any_t arg) {
    int mine = (int)(intptr_t)arg;
    int processors_seen = 0, last = -1;
    for (int i = 0; i < 2000; i++) {
        write_errno(mine + i);
        cthread_yield();
        CHECK(read_errno() == mine + i);
        mutex_lock(&m);
        cthread_yield();
        mutex_unlock(&m);
        CHECK(read_errno() == mine + i);
        struct ferry_thread_info info;
        thread_info(cthread_self(), &info);
        if (info.processor != last) processors_seen++, last = info.processor;
    }
    return (any_t)(intptr_t)processors_seen;
}

int main(void) {
    cthread_t ts[8];
    for (intptr_t i = 0; i < 8; i++) ts[i] = cthread_fork(worker, (any_t)(i * 100000));
    long moves = 0;
    for (int i = 0; i < 8; i++) moves += (intptr_t)cthread_join(ts[i]);
    printf("processor changes seen: %ld\n", moves);
    puts("ok");
    return 0;
}
