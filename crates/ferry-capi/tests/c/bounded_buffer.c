/* A bounded buffer with two conditions (not full, not empty), 4 producers
 * and 4 consumers: every item arrives once. */
#include <stdint.h>
#include <ferry/cthreads.h>
#include "check.h"

#define SIZE 8
#define PER_PRODUCER 20000
#define PRODUCERS 4
#define CONSUMERS 4

static struct mutex lock = MUTEX_INITIALIZER;
static struct condition not_full = CONDITION_INITIALIZER;
static struct condition not_empty;
static long items[SIZE];
static int head, count;
static long sum_in, sum_out;

static any_t producer(any_t arg) {
    long base = (long)(intptr_t)arg * PER_PRODUCER;
    for (long i = 1; i <= PER_PRODUCER; i++) {
        mutex_lock(&lock);
        while (count == SIZE) condition_wait(&not_full, &lock);
        items[(head + count) % SIZE] = base + i;
        count++;
        sum_in += base + i;
        condition_signal(&not_empty);
        mutex_unlock(&lock);
    }
    return 0;
}

static any_t consumer(any_t arg) {
    (void)arg;
    long got = 0;
    for (;;) {
        mutex_lock(&lock);
        while (count == 0) condition_wait(&not_empty, &lock);
        long v = items[head];
        head = (head + 1) % SIZE;
        count--;
        condition_signal(&not_full);
        if (v > 0) sum_out += v;
        mutex_unlock(&lock);
        if (v < 0) break; /* poison */
        got++;
    }
    return (any_t)(intptr_t)got;
}

int main(void) {
    condition_init(&not_empty);
    cthread_t p[PRODUCERS], c[CONSUMERS];
    for (intptr_t i = 0; i < CONSUMERS; i++) c[i] = cthread_fork(consumer, 0);
    for (intptr_t i = 0; i < PRODUCERS; i++) p[i] = cthread_fork(producer, (any_t)i);
    for (int i = 0; i < PRODUCERS; i++) cthread_join(p[i]);
    for (int i = 0; i < CONSUMERS; i++) {
        mutex_lock(&lock);
        while (count == SIZE) condition_wait(&not_full, &lock);
        items[(head + count) % SIZE] = -1;
        count++;
        condition_broadcast(&not_empty);
        mutex_unlock(&lock);
    }
    long total = 0;
    for (int i = 0; i < CONSUMERS; i++) total += (intptr_t)cthread_join(c[i]);
    CHECK(total == (long)PRODUCERS * PER_PRODUCER);
    CHECK(sum_in == sum_out);
    puts("ok");
    return 0;
}
