/* Two cthreads each hold one mutex and wait for the other's; main waits
 * to join them. Nothing can ever wake any of the three, so ferry reports
 * the deadlock, naming both cthreads and what each waits on, and aborts
 * the process (the C API's runtime has no `run` to return an error to). */
#include <ferry/ferry.h>
#include "check.h"

static struct mutex first = MUTEX_INITIALIZER, second = MUTEX_INITIALIZER;
static struct mutex gate = MUTEX_INITIALIZER;
static struct condition both_hold = CONDITION_INITIALIZER;
static int holding;

static void hold_then_want(mutex_t mine, mutex_t other) {
    mutex_lock(mine);
    mutex_lock(&gate);
    holding++;
    condition_broadcast(&both_hold);
    while (holding < 2) condition_wait(&both_hold, &gate);
    mutex_unlock(&gate);
    mutex_lock(other);
    puts("not reached");
}

static any_t alpha(any_t arg) {
    hold_then_want(&first, &second);
    return arg;
}

static any_t beta(any_t arg) {
    hold_then_want(&second, &first);
    return arg;
}

int main(void) {
    cthread_t a = cthread_fork(alpha, 0);
    cthread_set_name(a, "alpha");
    cthread_t b = cthread_fork(beta, 0);
    cthread_set_name(b, "beta");
    cthread_join(a);
    cthread_join(b);
    puts("not reached");
    return 0;
}
