/* Signals as messages (003 section 6): a designated ferry thread receives
 * SIGUSR1 and SIGUSR2 through ferry_signal_wait while others compute; each
 * signal sent arrives once, and the computing threads' counts are exact. */
#include <signal.h>
#include <stdint.h>
#include <unistd.h>
#include <ferry/ferry.h>
#include "check.h"

static struct mutex m = MUTEX_INITIALIZER;
static long counter;
static volatile int usr1, usr2; /* written by the receiver only */

static any_t receiver(any_t arg) {
    (void)arg;
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGUSR1);
    sigaddset(&set, SIGUSR2);
    while (usr1 + usr2 < 6) {
        int signo = 0;
        CHECK(ferry_signal_wait(&set, &signo) == 0);
        if (signo == SIGUSR1) usr1++;
        else if (signo == SIGUSR2) usr2++;
        else CHECK(0);
    }
    return 0;
}

static any_t worker(any_t arg) {
    (void)arg;
    for (int i = 0; i < 100000; i++) {
        mutex_lock(&m);
        counter++;
        mutex_unlock(&m);
        if (i % 1000 == 0) cthread_yield();
    }
    return 0;
}

int main(void) {
    sigset_t bad;
    sigemptyset(&bad);
    sigaddset(&bad, SIGKILL);
    int s;
    CHECK(ferry_signal_wait(&bad, &s) != 0);
    CHECK(ferry_signal_wait(NULL, &s) != 0);
    cthread_t r = cthread_fork(receiver, 0);
    cthread_t w[4];
    for (int i = 0; i < 4; i++) w[i] = cthread_fork(worker, 0);
    for (int i = 0; i < 100; i++) cthread_yield(); /* let the receiver wait */
    /* The kernel merges a standard signal sent again before it was
     * delivered, so each is sent once the last one has arrived. */
    for (int i = 0; i < 3; i++) {
        CHECK(kill(getpid(), SIGUSR1) == 0);
        while (usr1 < i + 1) cthread_yield();
        CHECK(kill(getpid(), SIGUSR2) == 0);
        while (usr2 < i + 1) cthread_yield();
    }
    cthread_join(r);
    CHECK(usr1 == 3 && usr2 == 3);
    for (int i = 0; i < 4; i++) cthread_join(w[i]);
    CHECK(counter == 400000);
    puts("ok");
    return 0;
}
