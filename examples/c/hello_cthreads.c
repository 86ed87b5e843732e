/* hello_cthreads: a C-Threads program on ferry. Eight workers sum slices
 * of an array under a mutex while a reader thread waits on a pipe with
 * ferry_read (its processor keeps running the workers); the main thread
 * joins them all and prints what thread_info says about one of them.
 *
 *   cargo build --release -p ferry-capi
 *   export PKG_CONFIG_PATH=$PWD/target/release/pkgconfig
 *   cc examples/c/hello_cthreads.c $(pkg-config --cflags --libs ferry) -o hello
 *   ./hello
 */
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>
#include <ferry/ferry.h>

#define WORKERS 8
#define N 80000

static long numbers[N];
static long total;
static struct mutex total_lock = MUTEX_INITIALIZER;
static int pipe_fds[2];

static any_t worker(any_t arg) {
    intptr_t w = (intptr_t)arg;
    long sum = 0;
    for (long i = w * (N / WORKERS); i < (w + 1) * (N / WORKERS); i++) {
        sum += numbers[i];
        if (i % 1000 == 0) cthread_yield(); /* a few procedure calls */
    }
    mutex_lock(&total_lock);
    total += sum;
    mutex_unlock(&total_lock);
    return (any_t)(intptr_t)sum;
}

static any_t reader(any_t arg) {
    (void)arg;
    char buf[32] = {0};
    /* Blocks in the kernel without stalling the workers' processor. */
    ssize_t n = ferry_read(pipe_fds[0], buf, sizeof buf - 1);
    printf("reader got %zd bytes: %s\n", n, buf);
    return 0;
}

int main(void) {
    for (long i = 0; i < N; i++) numbers[i] = i;
    if (pipe(pipe_fds) != 0) return 1;

    cthread_t r = cthread_fork(reader, 0);
    cthread_set_name(r, "reader");
    cthread_t w[WORKERS];
    for (intptr_t i = 0; i < WORKERS; i++) w[i] = cthread_fork(worker, (any_t)i);

    struct ferry_thread_info info;
    if (thread_info(w[0], &info) == FERRY_SUCCESS)
        printf("worker 0: state %d, last processor %d\n", info.state, info.processor);

    for (int i = 0; i < WORKERS; i++) cthread_join(w[i]);
    if (write(pipe_fds[1], "hello", 5) != 5) return 1;
    cthread_join(r);

    printf("total %ld (expected %ld) on %u processors\n", total, (long)N * (N - 1) / 2,
           ferry_processors());
    return total == (long)N * (N - 1) / 2 ? 0 : 1;
}
