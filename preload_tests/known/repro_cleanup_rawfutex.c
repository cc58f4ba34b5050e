// repro: a pthread_cleanup_push handler, run by pthread_exit, that waits with a raw futex syscall
// (own `syscall` instruction, as libgomp does) for a thread that is computing.
// build: gcc -O2 repro_cleanup_rawfutex.c -o repro_cleanup_rawfutex -lpthread
// native: prints "done", exit 0 (~0.1-0.3 s)
// BOBBIN_MAXPROCS=1 LD_PRELOAD=build/libbobbin.so timeout -s KILL 20 ./repro_cleanup_rawfutex
//   -> "bobbin: fatal error: casgstatus: G3 is in status 2, not 3 (to 1)" "[M0 P0 G3]", SIGABRT (rc 134)
// observed: MAXPROCS=1: 2 of 3 runs abort (1 prints done); MAXPROCS=2: 3 of 3 abort (more runs in
// variants.c mode c: 2/2 abort at MAXPROCS=1). Control ctl_cleanup_spin.c (same, but the handler
// busy-waits on the flag, no syscall): 6/6 OK -> the crash needs the raw futex sleep.
// gdb (MAXPROCS=2): abort in bb_casgstatus(gp=G3, from=3 Gsyscall, to=1) <- exitsyscall0 (runtime/syscall.c:73)
//   <- bb_mcall, on the main thread's M. Likely: sysmon's stuck-M path (bb_check_stuck -> detach_p)
//   let G3's P go while G3 slept in the raw futex inside the cleanup handler run by pthread_exit's
//   unwinding; G3 then went on without a P into bobbin's thread-exit path and the status
//   bookkeeping (Gsyscall vs Grunning) went wrong.
#define _GNU_SOURCE
#include <linux/futex.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/syscall.h>
static volatile int flag, start;
static long raw_futex(volatile int *a, int op, int v){
  long r; register long r10 __asm__("r10") = 0;
  __asm__ volatile("syscall" : "=a"(r) : "0"((long)SYS_futex), "D"(a), "S"((long)op), "d"((long)v), "r"(r10) : "rcx","r11","memory");
  return r; }
static void rawwait(void *p){ (void)p; while(!flag) raw_futex(&flag, FUTEX_WAIT_PRIVATE, 0); }
static void *waiter(void *a){
  start=1;
  pthread_cleanup_push(rawwait,0);
  pthread_exit(0);
  pthread_cleanup_pop(0);
  return a; }
static void *spinner(void *a){
  while(!start) ;
  volatile unsigned long x=0; for(unsigned long i=0;i<200000000UL;i++) x+=i;
  flag=1; raw_futex(&flag, FUTEX_WAKE_PRIVATE, 1<<30); return a; }
int main(void){
  pthread_t s,w; pthread_create(&s,0,spinner,0); pthread_create(&w,0,waiter,0);
  pthread_join(w,0); pthread_join(s,0); printf("done\n"); return 0; }
