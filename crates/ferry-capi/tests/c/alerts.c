/* Alerts, priorities and run time from C: the alert bits of the calling
 * thread; an alert aborting ferry_read during the call and at its entry,
 * and a ferry_blocking read(2) at its entry (-1, EINTR); a blocked alert
 * aborting nothing and seen once allowed; a raised priority running
 * first on one processor; ferry_thread_cpu_time rising by at least a
 * burn on CLOCK_THREAD_CPUTIME_ID; bad arguments refused. alarm() turns a
 * hang into a failure. Run with one processor and no time slice. */
#include <errno.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>
#include <ferry/ferry.h>
#include "check.h"

static int p[2];

static any_t read_once(any_t arg) {
    (void)arg;
    char c;
    ssize_t n = ferry_read(p[0], &c, 1);
    return (any_t)(intptr_t)(n < 0 ? -errno : n);
}

/* Alerts itself, then reads twice from a pipe nobody writes to. */
static any_t read_alerted(any_t arg) {
    (void)arg;
    CHECK(ferry_thread_alert(cthread_self()) == FERRY_SUCCESS);
    char c;
    CHECK(ferry_read(p[0], &c, 1) == -1 && errno == EINTR);
    CHECK(ferry_read(p[0], &c, 1) == -1 && errno == EINTR);
    CHECK(ferry_clear_alert());
    return (any_t)1;
}

static any_t raw_read(any_t arg) {
    (void)arg;
    char c;
    ssize_t n = read(p[0], &c, 1);
    return (any_t)(intptr_t)(n < 0 ? -errno : n);
}

static any_t blocking_alerted(any_t arg) {
    (void)arg;
    CHECK(ferry_thread_alert(cthread_self()) == FERRY_SUCCESS);
    any_t r = ferry_blocking(raw_read, 0);
    CHECK(ferry_clear_alert());
    return r;
}

static volatile int seen_blocked = -1, seen_allowed = -1;

static any_t read_blocked(any_t arg) {
    (void)arg;
    CHECK(ferry_allow_alerts(0));
    char c;
    ssize_t n = ferry_read(p[0], &c, 1);
    seen_blocked = ferry_alerted();
    CHECK(!ferry_allow_alerts(1));
    seen_allowed = ferry_alerted();
    /* Entered with the alert allowed and pending: aborted at entry. */
    CHECK(ferry_read(p[0], &c, 1) == -1 && errno == EINTR);
    return (any_t)(intptr_t)n;
}

/* Suspends t until thread_wait finds it in its read, then resumes it. */
static void until_in_call(cthread_t t) {
    struct ferry_thread_info info;
    for (;;) {
        CHECK(thread_suspend(t) == FERRY_SUCCESS);
        CHECK(thread_wait(t, 1) == FERRY_SUCCESS);
        CHECK(thread_info(t, &info) == FERRY_SUCCESS);
        CHECK(thread_resume(t) == FERRY_SUCCESS);
        if (info.state == FERRY_THREAD_STOPPED_IN_CALL) return;
        cthread_yield();
    }
}

static char order[3];
static volatile int ran;

static any_t record(any_t arg) {
    order[ran++] = (char)(intptr_t)arg;
    return 0;
}

static uint64_t kernel_cpu_ns(void) {
    struct timespec ts;
    CHECK(clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) == 0);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static any_t burn(any_t arg) {
    (void)arg;
    uint64_t before, after;
    CHECK(ferry_thread_cpu_time(cthread_self(), &before) == FERRY_SUCCESS);
    uint64_t k0 = kernel_cpu_ns();
    volatile uint64_t x = 0;
    while (kernel_cpu_ns() - k0 < 20000000u)
        for (int i = 0; i < 1000; i++) x = x * 31 + (uint64_t)i;
    uint64_t spent = kernel_cpu_ns() - k0;
    CHECK(ferry_thread_cpu_time(cthread_self(), &after) == FERRY_SUCCESS);
    CHECK(after - before >= spent);
    return 0;
}

int main(void) {
    alarm(60);
    cthread_t me = cthread_self();
    CHECK(pipe(p) == 0);

    /* The bits. */
    CHECK(!ferry_alerted());
    CHECK(!ferry_clear_alert());
    CHECK(ferry_thread_alert(me) == FERRY_SUCCESS);
    CHECK(ferry_alerted());
    CHECK(ferry_allow_alerts(0));
    CHECK(!ferry_alerted());
    CHECK(!ferry_allow_alerts(1));
    CHECK(ferry_alerted());
    CHECK(ferry_clear_alert());
    CHECK(!ferry_clear_alert());
    CHECK(!ferry_alerted());

    /* Bad arguments. */
    int got = -1;
    uint64_t ns;
    CHECK(ferry_thread_alert(NO_CTHREAD) == FERRY_INVALID_ARGUMENT);
    CHECK(ferry_thread_set_priority(me, 7, &got) == FERRY_INVALID_ARGUMENT && got == -1);
    CHECK(ferry_thread_set_priority(me, -1, NULL) == FERRY_INVALID_ARGUMENT);
    CHECK(ferry_thread_set_priority(NO_CTHREAD, FERRY_PRIORITY_LOW, NULL) ==
          FERRY_INVALID_ARGUMENT);
    CHECK(ferry_thread_cpu_time(me, NULL) == FERRY_INVALID_ARGUMENT);
    CHECK(ferry_thread_cpu_time(NO_CTHREAD, &ns) == FERRY_INVALID_ARGUMENT);

    /* An alert during ferry_read. */
    cthread_t t = cthread_fork(read_once, 0);
    until_in_call(t);
    CHECK(ferry_thread_alert(t) == FERRY_SUCCESS);
    CHECK(cthread_join(t) == (any_t)(intptr_t)-EINTR);

    /* Alerts before the call: aborted at entry. */
    CHECK(cthread_join(cthread_fork(read_alerted, 0)) == (any_t)1);
    CHECK(cthread_join(cthread_fork(blocking_alerted, 0)) == (any_t)(intptr_t)-EINTR);

    /* Blocked: nothing aborted; seen once allowed. */
    t = cthread_fork(read_blocked, 0);
    until_in_call(t);
    CHECK(ferry_thread_alert(t) == FERRY_SUCCESS);
    CHECK(write(p[1], "x", 1) == 1);
    CHECK(cthread_join(t) == (any_t)1);
    CHECK(seen_blocked == 0 && seen_allowed != 0);

    /* Priorities: made suspended in this order, run by priority. */
    cthread_t low, high;
    CHECK(thread_create(record, (any_t)'l', &low) == FERRY_SUCCESS);
    CHECK(thread_create(record, (any_t)'h', &high) == FERRY_SUCCESS);
    CHECK(ferry_thread_set_priority(low, FERRY_PRIORITY_LOW, &got) == FERRY_SUCCESS);
    CHECK(got == FERRY_PRIORITY_LOW);
    CHECK(ferry_thread_set_priority(high, FERRY_PRIORITY_HIGH, &got) == FERRY_SUCCESS);
    CHECK(got == FERRY_PRIORITY_HIGH);
    CHECK(thread_resume(low) == FERRY_SUCCESS);
    CHECK(thread_resume(high) == FERRY_SUCCESS);
    cthread_join(low);
    cthread_join(high);
    CHECK(ran == 2 && order[0] == 'h' && order[1] == 'l');
    CHECK(ferry_thread_set_priority(me, FERRY_PRIORITY_HIGH, &got) == FERRY_SUCCESS);
    CHECK(got == FERRY_PRIORITY_HIGH);
    CHECK(ferry_thread_set_priority(me, FERRY_PRIORITY_NORMAL, NULL) == FERRY_SUCCESS);

    /* Run time. */
    CHECK(cthread_join(cthread_fork(burn, 0)) == 0);
    CHECK(ferry_thread_cpu_time(me, &ns) == FERRY_SUCCESS && ns > 0);
    puts("ok");
    return 0;
}
