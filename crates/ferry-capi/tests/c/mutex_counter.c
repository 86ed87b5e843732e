/* 100 threads x 10,000 increments under a C-Threads mutex: the count is
 * exact. One mutex is static (MUTEX_INITIALIZER), one from mutex_alloc. */
#include <stdint.h>
#include <ferry/cthreads.h>
#include "check.h"

static struct mutex static_lock = MUTEX_INITIALIZER;
static mutex_t heap_lock;
static long a, b;

static any_t work(any_t arg) {
    (void)arg;
    for (int i = 0; i < 10000; i++) {
        mutex_lock(&static_lock);
        a++;
        mutex_unlock(&static_lock);
        mutex_lock(heap_lock);
        b++;
        if (i % 100 == 0) cthread_yield(); /* hold the lock across a switch */
        mutex_unlock(heap_lock);
    }
    return 0;
}

int main(void) {
    heap_lock = mutex_alloc();
    CHECK(mutex_try_lock(heap_lock));
    CHECK(!mutex_try_lock(heap_lock));
    mutex_unlock(heap_lock);
    cthread_t ts[100];
    for (int i = 0; i < 100; i++) ts[i] = cthread_fork(work, 0);
    for (int i = 0; i < 100; i++) cthread_join(ts[i]);
    CHECK(a == 1000000);
    CHECK(b == 1000000);
    mutex_free(heap_lock);
    puts("ok");
    return 0;
}
