/* The P/V semaphore of 003 section 4, as printed there, on thread_suspend,
 * thread_resume and thread_wait, under contention: 16 threads x 2,000
 * P..V, never two inside. lock/unlock are spinlocks on shared memory, as
 * the paper suggests. */
#include <stdatomic.h>
#include <stdint.h>
#include <ferry/ferry.h>
#include "check.h"

#define THREADS 16
#define ROUNDS 2000

struct semaphore {
    atomic_flag lock;
    int inuse;
    cthread_t queue[THREADS];
    int qhead, qlen;
};

static void lock(struct semaphore *s) {
    while (atomic_flag_test_and_set_explicit(&s->lock, memory_order_acquire)) cthread_yield();
}
static void unlock(struct semaphore *s) { atomic_flag_clear_explicit(&s->lock, memory_order_release); }
static void enqueue(struct semaphore *s, cthread_t t) { s->queue[(s->qhead + s->qlen++) % THREADS] = t; }
static cthread_t dequeue(struct semaphore *s) {
    if (s->qlen == 0) return NO_CTHREAD;
    cthread_t t = s->queue[s->qhead];
    s->qhead = (s->qhead + 1) % THREADS;
    s->qlen--;
    return t;
}

static void P(struct semaphore *semaphore) {
    lock(semaphore);
    while (semaphore->inuse) {
        CHECK(thread_suspend(cthread_self()) == FERRY_SUCCESS);
        enqueue(semaphore, cthread_self());
        unlock(semaphore);
        CHECK(thread_wait(cthread_self(), 1) == FERRY_SUCCESS);
        lock(semaphore);
    }
    semaphore->inuse = 1;
    unlock(semaphore);
}

static void V(struct semaphore *semaphore) {
    lock(semaphore);
    semaphore->inuse = 0;
    cthread_t next = dequeue(semaphore);
    if (next != NO_CTHREAD) thread_resume(next);
    unlock(semaphore);
}

static struct semaphore sem = {ATOMIC_FLAG_INIT, 0, {0}, 0, 0};
static atomic_int inside;
static long counter;

static any_t worker(any_t arg) {
    (void)arg;
    for (int i = 0; i < ROUNDS; i++) {
        P(&sem);
        CHECK(atomic_fetch_add(&inside, 1) == 0);
        long v = counter;
        if (i % 5 == 0) cthread_yield();
        counter = v + 1;
        atomic_fetch_sub(&inside, 1);
        V(&sem);
    }
    return 0;
}

int main(void) {
    cthread_t ts[THREADS];
    for (int i = 0; i < THREADS; i++) ts[i] = cthread_fork(worker, 0);
    for (int i = 0; i < THREADS; i++) cthread_join(ts[i]);
    CHECK(counter == (long)THREADS * ROUNDS);
    puts("ok");
    return 0;
}
