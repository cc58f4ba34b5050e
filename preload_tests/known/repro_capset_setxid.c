/* repro_capset_setxid — NOT FIXED (2026-11-28). setpriv(1)'s way of
 * changing user and group as root: prctl(PR_SET_KEEPCAPS), setresuid to
 * an unprivileged user, capset to raise the kept capabilities again, then
 * setresgid.
 *
 * Natively (one thread): "ok". Under bobbin: glibc's setresgid aborts
 * (nptl_setxid.c: setxid_error). glibc applies set*id to every thread it
 * knows, bobbin's own OS threads (its Ms, sysmon) among them; but
 * PR_SET_KEEPCAPS and capset act on the calling thread only, so bobbin's
 * threads lost their capabilities at the setresuid, their setresgid fails
 * with EPERM while the caller's succeeds, and glibc aborts on the mismatch.
 * `setpriv --reuid=nobody --regid=nogroup --clear-groups -- CMD` with
 * LD_PRELOAD=libbobbin.so aborts so (found writing the postgres real
 * test, which now preloads bobbin into postgres after setpriv). A fix
 * needs bobbin to apply the calling thread's PR_SET_KEEPCAPS and capset to
 * every one of its OS threads, as glibc does for set*id.
 *
 * Build: gcc -O2 -pthread -o repro_capset_setxid repro_capset_setxid.c
 * Run (as root): ./repro_capset_setxid; LD_PRELOAD=libbobbin.so ./repro_capset_setxid
 */
#define _GNU_SOURCE
#include <linux/capability.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

static void *nothing(void *arg)
{
    return arg;
}

int main(void)
{
    if (getuid() != 0) {
        puts("skip: needs root");
        return 0;
    }
    /* natively a thread that has ended; under bobbin its OS threads stay */
    pthread_t t;
    pthread_create(&t, NULL, nothing, NULL);
    pthread_join(t, NULL);
    prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0);
    if (setresuid(65534, 65534, 65534) != 0) {
        perror("setresuid");
        return 1;
    }
    struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct d[2];
    syscall(SYS_capget, &h, d);
    d[0].effective = d[0].permitted;
    d[1].effective = d[1].permitted;
    if (syscall(SYS_capset, &h, d) != 0) {
        perror("capset");
        return 1;
    }
    if (setresgid(65534, 65534, 65534) != 0) {
        perror("setresgid");
        return 1;
    }
    puts("ok");
    return 0;
}
