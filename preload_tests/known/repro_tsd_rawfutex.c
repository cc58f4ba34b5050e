// repro without OpenMP: a pthread_key destructor that waits with a raw futex syscall for another
// thread that is currently computing (runnable). Same pattern as libgomp's gomp_free_thread.
// build: gcc -O2 repro_tsd_rawfutex.c -o repro_tsd_rawfutex -lpthread
// run:   ./repro_tsd_rawfutex d   (wait inside the TSD destructor)   native: "done", exit 0, ~0.1 s
//        ./repro_tsd_rawfutex b   (same wait in the thread body)     native: "done", exit 0
//        BOBBIN_MAXPROCS=1 LD_PRELOAD=build/libbobbin.so timeout -s KILL 20 ./repro_tsd_rawfutex d|b
// observed: mode d at MAXPROCS=1: hang, killed by timeout (rc=137) 3/3; mode d at MAXPROCS=2: OK 3/3;
//           mode b at MAXPROCS=1 and 2: OK 3/3 each (sysmon lets the raw-futex sleeper give up its P).
// So a raw-syscall wait is handled in thread code but not when it happens under bobbin's own frames
// (bb_goexit -> bb_tsd_run_destructors -> destructor): the sleeper keeps the only P and the runnable
// thread that would wake it never runs. Real-world trigger: any pthread that used OpenMP and exits
// (libgomp's gomp_free_thread destructor), see repro_gomp_exit.c.
#define _GNU_SOURCE
#include <linux/futex.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
static volatile int flag, start;
static pthread_key_t key;
static long raw_futex(volatile int *a, int op, int v){
  long r; register long r10 __asm__("r10") = 0;
  __asm__ volatile("syscall" : "=a"(r) : "0"((long)SYS_futex), "D"(a), "S"((long)op), "d"((long)v), "r"(r10) : "rcx","r11","memory");
  return r; }
static void rawwait(void){ while(!flag) raw_futex(&flag, FUTEX_WAIT_PRIVATE, 0); }
static void dtor(void *p){ (void)p; rawwait(); }
static void *waiter(void *a){
  pthread_setspecific(key,(void*)1);
  start=1;
  if(*(char*)a=='b') rawwait();
  return 0; }
static void *spinner(void *a){ (void)a;
  while(!start) ;           /* compute until the waiter has started */
  volatile unsigned long x=0; for(unsigned long i=0;i<200000000UL;i++) x+=i; /* ~0.1-0.3 s of work */
  flag=1; raw_futex(&flag, FUTEX_WAKE_PRIVATE, 1<<30); return 0; }
int main(int argc,char**argv){
  const char *mode = argc>1 ? argv[1] : "d";
  pthread_key_create(&key,dtor);
  pthread_t s,w; pthread_create(&s,0,spinner,0); pthread_create(&w,0,waiter,(void*)mode);
  pthread_join(w,0); pthread_join(s,0); printf("done\n"); return 0; }
