/* Why the monitor leaves a switching driver's CPU clock unread while a
 * stand-in stands by (see crates/ferry/src/upcall/monitor.rs): a
 * reproduction without ferry. Thread A spins on CPU 0; optionally thread B
 * waits runnable on CPU 0 in SCHED_IDLE, yielding (as a stand-in does);
 * thread C on CPU 1 reads A's CPU time every 20 us, either with
 * clock_gettime on A's clock (mode 1) or from /proc/.../schedstat
 * (mode 2), or not at all (mode 0). Count the reschedule interrupts CPU 0
 * took meanwhile from the RES line of /proc/interrupts:
 *
 *   cc -O2 -pthread remote_clock_ipi.c -o remote_clock_ipi
 *   grep RES: /proc/interrupts; ./remote_clock_ipi 1 1; grep RES: /proc/interrupts
 *
 * On the development VM (Linux 6.18, 2 vCPUs), over the one second:
 * with B and mode 1, 6,575 on CPU 0 (one per read); without B, 1-6;
 * with B and mode 2, 0. The kernel brings a running thread's time up to
 * date from the reader's core (update_curr on A's runqueue), and with B
 * queued there it asks CPU 0 to reschedule each time. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static volatile int stop;
static volatile pid_t tid_a;
static clockid_t clock_a;

static void pin(int cpu) {
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(cpu, &s);
    sched_setaffinity(0, sizeof s, &s);
}

static void *spinner(void *unused) {
    (void)unused;
    pin(0);
    pthread_getcpuclockid(pthread_self(), &clock_a);
    tid_a = (pid_t)syscall(SYS_gettid);
    while (!stop) {
    }
    return NULL;
}

static void *idle_yielder(void *unused) {
    (void)unused;
    pin(0);
    struct sched_param p = {0};
    sched_setscheduler(0, SCHED_IDLE, &p);
    while (!stop)
        sched_yield();
    return NULL;
}

static void *reader(void *arg) {
    int mode = *(int *)arg;
    pin(1);
    struct timespec tick = {0, 20000}, v;
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/self/task/%d/schedstat", (int)tid_a);
    while (!stop) {
        nanosleep(&tick, NULL);
        if (mode == 1) {
            clock_gettime(clock_a, &v);
        } else if (mode == 2) {
            FILE *f = fopen(path, "r");
            if (f) {
                if (!fgets(line, sizeof line, f))
                    line[0] = 0;
                fclose(f);
            }
        }
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s WITH_IDLE(0|1) MODE(0 none|1 clock_gettime|2 schedstat)\n", argv[0]);
        return 2;
    }
    int with_idle = atoi(argv[1]), mode = atoi(argv[2]);
    pthread_t a, b, c;
    pthread_create(&a, NULL, spinner, NULL);
    while (!tid_a)
        usleep(1000);
    if (with_idle)
        pthread_create(&b, NULL, idle_yielder, NULL);
    pthread_create(&c, NULL, reader, &mode);
    sleep(1);
    stop = 1;
    pthread_join(a, NULL);
    if (with_idle)
        pthread_join(b, NULL);
    pthread_join(c, NULL);
    return 0;
}
