// repro: a pthread that ran an OpenMP parallel region then exits; libgomp's TSD destructor
// (gomp_free_thread) waits with its own raw futex syscall for the pool's worker threads.
// build: gcc -O2 -fopenmp repro_gomp_exit.c -o repro_gomp_exit -lpthread
// run:   OMP_NUM_THREADS=2 ./repro_gomp_exit            -> "sum ..." in ~0.05 s, exit 0
//        OMP_NUM_THREADS=2 BOBBIN_MAXPROCS=1 LD_PRELOAD=build/libbobbin.so timeout -s KILL 30 ./repro_gomp_exit
//        -> hangs forever (rc=137 after timeout) in 5/5 + 3/3 runs with default OMP_WAIT_POLICY;
//           with GOMP_SPINCOUNT=0: 1 hang, 1 x 7.6 s, 1 x 0.2 s out of 3 (arg 20). Native: 0.05-0.4 s.
//           OMP_WAIT_POLICY=passive: OK (0.1 s); OMP_WAIT_POLICY=active: OK but 2.0-2.5 s vs 0.66 s native.
//           BOBBIN_MAXPROCS=2: completes (1.5-5.7 s on a loaded machine; native 0.2-5 s, noisy).
// `bobbin dump -v` of the hung process:
//   the exiting thread G  [running] on M2: libgomp (raw futex syscall, /proc/TID/syscall = 202 FUTEX_WAIT_PRIVATE)
//        <- libgomp gomp_free_thread <- bb_tsd_run_destructors (shim/pthread_key.c:64) <- bb_goexit <- bb_gmain
//   the team's worker G [runnable]: bb_asyncpreempt2 <- libgomp spin loop (preempted while spinning)
//   -> the worker that must reach the pool barrier never gets the only P: the exiting G sleeps in the kernel
//      holding the P. sysmon's stalled()/bb_check_stuck path, which normally lets a raw-futex sleeper give
//      up its P, apparently does not apply because bobbin's own frames (bb_goexit/bb_tsd_run_destructors)
//      are on that G's stack ("neither happens while bobbin's own code is on the thread's stack").
#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
static long work(int n){ long s=0;
  #pragma omp parallel for reduction(+:s) schedule(dynamic,7)
  for(int i=0;i<n;i++) s+=(long)i*i%1009;
  return s; }
static void *thr(void *arg){ long r=0; for(int k=0;k<20;k++) r+=work(10000); return (void*)r; }
int main(int argc,char**argv){
  int rounds = argc>1 ? atoi(argv[1]) : 50;
  long tot=0;
  for(int i=0;i<rounds;i++){
    pthread_t t; void *r;
    pthread_create(&t,0,thr,0); pthread_join(t,&r); tot+=(long)r;
  }
  printf("sum %ld\n",tot);
  return 0;
}
