/* cthread_exit from a nested call ends only that thread and hands its
 * joiner the result; names and data round-trip; the first thread is
 * "main". */
#include <stdint.h>
#include <string.h>
#include <ferry/cthreads.h>
#include "check.h"

static int after_exit;

static void deep(int n) {
    if (n < 0) return;
    if (n == 0) cthread_exit((any_t)4242);
    deep(n - 1);
    after_exit = 1; /* never reached */
}

static any_t exiter(any_t arg) {
    deep((int)(intptr_t)arg);
    after_exit = 1;
    return (any_t)1;
}

static any_t data_user(any_t arg) {
    cthread_t me = cthread_self();
    CHECK(me != NO_CTHREAD);
    CHECK(cthread_data(me) == arg);
    cthread_set_data(me, (any_t)77);
    CHECK(cthread_data(me) == (any_t)77);
    CHECK(strcmp(cthread_name(me), "worker") == 0);
    return cthread_data(me);
}

int main(void) {
    CHECK(strcmp(cthread_name(cthread_self()), "main") == 0);
    cthread_t t = cthread_fork(exiter, (any_t)50);
    CHECK(cthread_join(t) == (any_t)4242);
    CHECK(after_exit == 0);

    /* Set name and data before the thread looks: it runs only when main
     * blocks (one processor). */
    cthread_t u = cthread_fork(data_user, (any_t)9);
    cthread_set_name(u, "worker");
    cthread_set_data(u, (any_t)9);
    CHECK(strcmp(cthread_name(u), "worker") == 0);
    CHECK(cthread_join(u) == (any_t)77);

    /* Many exits at once. */
    cthread_t ts[64];
    for (intptr_t i = 0; i < 64; i++) ts[i] = cthread_fork(exiter, (any_t)(i % 8));
    for (int i = 0; i < 64; i++) CHECK(cthread_join(ts[i]) == (any_t)4242);
    puts("ok");
    return 0;
}
