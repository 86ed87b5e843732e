/* fsbase_cost: what switching the FS base at each ferry-thread switch
 * would cost, for per-ferry-thread TLS (__thread, errno, std's
 * thread_local! each following the user-level thread). Reports whether
 * the kernel lets user code write the FS base (HWCAP2_FSGSBASE, bit 1 of
 * AT_HWCAP2), then the cost of a wrfsbase+rdfsbase pair (if allowed) and
 * of arch_prctl(ARCH_SET_FS)+ARCH_GET_FS, each writing back the value it
 * read (so glibc's TLS stays intact). Not a test: run by hand.
 *
 *   cc -O2 crates/ferry-bench/c/fsbase_cost.c -o fsbase_cost && ./fsbase_cost
 */
#define _GNU_SOURCE
#include <asm/prctl.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/auxv.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define HWCAP2_FSGSBASE (1UL << 1)

static double now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

__attribute__((target("fsgsbase"))) static double wrfsbase_pairs(long n) {
    unsigned long base = __builtin_ia32_rdfsbase64();
    double t0 = now_ns();
    for (long i = 0; i < n; i++) {
        __builtin_ia32_wrfsbase64(base);
        base = __builtin_ia32_rdfsbase64();
        __asm__ volatile("" : "+r"(base));
    }
    return (now_ns() - t0) / n;
}

static double arch_prctl_pairs(long n) {
    unsigned long base = 0;
    syscall(SYS_arch_prctl, ARCH_GET_FS, &base);
    double t0 = now_ns();
    for (long i = 0; i < n; i++) {
        syscall(SYS_arch_prctl, ARCH_SET_FS, base);
        syscall(SYS_arch_prctl, ARCH_GET_FS, &base);
    }
    return (now_ns() - t0) / n;
}

int main(void) {
    unsigned long hwcap2 = getauxval(AT_HWCAP2);
    int allowed = (hwcap2 & HWCAP2_FSGSBASE) != 0;
    printf("HWCAP2_FSGSBASE: %s\n", allowed ? "yes (wrfsbase allowed in user mode)" : "no");
    for (int round = 0; round < 5; round++) {
        if (allowed) printf("wrfsbase+rdfsbase: %6.1f ns   ", wrfsbase_pairs(10000000));
        printf("arch_prctl SET+GET: %6.1f ns\n", arch_prctl_pairs(1000000));
    }
    return 0;
}
