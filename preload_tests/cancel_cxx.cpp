// cancel_cxx — C++ destructors run when a thread is cancelled or calls
// pthread_exit: both unwind the thread's stack with a forced unwind.
//
// Each probe's thread builds RAII guards in three nested frames (each guard
// appends its letter to the thread's log when destroyed), touches a
// thread_local object (its destructor runs at thread exit, after the unwind),
// and then either blocks at a cancellation point (pthread_cond_wait, sleep,
// read on an empty pipe, sem_wait) until main cancels it, or calls
// pthread_exit from the innermost frame. The middle frame catches
// abi::__forced_unwind, logs it and rethrows, as C++ code must; the C++ form
// of pthread_cleanup_push (a scoped object in <pthread.h>) is used too.
// Expected: join value PTHREAD_CANCELED (or the pthread_exit value), every
// destructor run once, innermost first, the code after the blocking call never
// run, the thread_local destructor run once per thread. Ends with 40 threads
// cancelled at once over the four blocking points. A watchdog (alarm) turns a
// hang into exit 1.
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cxxabi.h>
#include <pthread.h>
#include <semaphore.h>
#include <string>
#include <time.h>
#include <unistd.h>

namespace {

std::atomic<int> failures{0};
const char *volatile current_probe = "start";

#define CHECK(cond, ...)                                                          \
    do {                                                                          \
        if (!(cond)) {                                                            \
            if (failures.fetch_add(1) < 20) {                                     \
                std::fprintf(stderr, "%s:%d: CHECK(%s) failed: ", __FILE__,       \
                             __LINE__, #cond);                                    \
                std::fprintf(stderr, __VA_ARGS__);                                \
                std::fputc('\n', stderr);                                         \
            }                                                                     \
        }                                                                         \
    } while (0)

void on_alarm(int)
{
    static const char pre[] = "cancel_cxx: watchdog: hung in probe: ";
    const char *p = current_probe;
    (void)!write(2, pre, sizeof pre - 1);
    (void)!write(2, p, std::strlen(p));
    (void)!write(2, "\n", 1);
    _exit(1);
}

enum Mode { kCond, kSleep, kRead, kSem, kExit, kModes };
const char *const mode_name[kModes] = {"cond_wait", "sleep", "read", "sem_wait",
                                       "pthread_exit"};

int pipe_empty[2];
sem_t sem_zero;
pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
pthread_cond_t cv = PTHREAD_COND_INITIALIZER;

struct Run {
    Mode mode;
    std::atomic<int> about_to_block{0};
    std::atomic<int> after{0};
    std::atomic<int> forced_unwinds{0};
    std::atomic<int> unlocks{0};
    char log[16] = {};
    std::atomic<int> nlog{0};
    void add(char c) { log[nlog.fetch_add(1)] = c; }
};

std::atomic<int> tl_constructed{0}, tl_destroyed{0};

struct Guard {
    Run *r;
    char c;
    Guard(Run *run, char ch) : r(run), c(ch) {}
    ~Guard() { r->add(c); }
};

struct PerThread {
    int uses = 0;
    PerThread() { tl_constructed.fetch_add(1); }
    ~PerThread() { tl_destroyed.fetch_add(1); }
};
thread_local PerThread per_thread;

void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

void unlock_cleanup(void *arg)
{
    Run *r = static_cast<Run *>(arg);
    if (pthread_mutex_unlock(&mu) == 0)
        r->unlocks.fetch_add(1);
    r->add('u');
}

void innermost(Run *r)
{
    Guard g(r, 'c');
    std::string s(100, 'x'); // a destructor that frees memory
    per_thread.uses++;
    r->about_to_block.store(1);
    char ch;
    switch (r->mode) {
    case kCond:
        pthread_mutex_lock(&mu);
        pthread_cleanup_push(unlock_cleanup, r);
        for (;;)
            pthread_cond_wait(&cv, &mu);
        pthread_cleanup_pop(1);
        break;
    case kSleep:
        sleep(1000);
        break;
    case kRead:
        (void)!read(pipe_empty[0], &ch, 1);
        break;
    case kSem:
        sem_wait(&sem_zero);
        break;
    case kExit:
        pthread_exit(reinterpret_cast<void *>(static_cast<intptr_t>(s.size() + 23)));
    case kModes:
        break;
    }
    r->after.store(1);
}

void middle(Run *r)
{
    Guard g(r, 'b');
    try {
        innermost(r);
    } catch (abi::__forced_unwind &) {
        r->forced_unwinds.fetch_add(1);
        r->add('F');
        throw; // must be rethrown
    }
}

void *thread_main(void *arg)
{
    Run *r = static_cast<Run *>(arg);
    Guard g(r, 'a');
    middle(r);
    r->after.store(1);
    return nullptr;
}

void probe(Mode mode)
{
    current_probe = mode_name[mode];
    Run r;
    r.mode = mode;
    int c0 = tl_destroyed.load();
    pthread_t t;
    if (pthread_create(&t, nullptr, thread_main, &r) != 0) {
        std::fprintf(stderr, "pthread_create failed\n");
        std::exit(1);
    }
    int rc = 0;
    if (mode != kExit) {
        while (!r.about_to_block.load())
            sleep_ms(1);
        sleep_ms(20);
        rc = pthread_cancel(t);
    }
    void *ret = nullptr;
    int jr = pthread_join(t, &ret);
    std::string value = ret == PTHREAD_CANCELED ? "PTHREAD_CANCELED"
                                                : std::to_string(reinterpret_cast<intptr_t>(ret));
    const char *want = mode == kCond ? "ucFba" : "cFba";
    void *want_ret = mode == kExit ? reinterpret_cast<void *>(123) : PTHREAD_CANCELED;
    int tl = tl_destroyed.load() - c0;
    std::printf("%-13s cancel=%d join=%d value=%s unwound: %s after=%d thread_local dtor=%d",
                mode_name[mode], rc, jr, value.c_str(), r.log, r.after.load(), tl);
    if (mode == kCond) {
        int tr = pthread_mutex_trylock(&mu);
        if (tr == 0)
            pthread_mutex_unlock(&mu);
        std::printf(" mutex free=%d", tr == 0);
        CHECK(tr == 0 && r.unlocks.load() == 1, "cond_wait: mutex not released by the handler");
    }
    std::printf("\n");
    CHECK(rc == 0 && jr == 0 && ret == want_ret, "%s: cancel %d join %d value %p",
          mode_name[mode], rc, jr, ret);
    CHECK(std::strcmp(r.log, want) == 0, "%s: unwound as \"%s\", want \"%s\"", mode_name[mode],
          r.log, want);
    CHECK(r.after.load() == 0, "%s: code after the call ran", mode_name[mode]);
    CHECK(r.forced_unwinds.load() == 1, "%s: abi::__forced_unwind caught %d times",
          mode_name[mode], r.forced_unwinds.load());
    CHECK(tl == 1, "%s: thread_local destructor ran %d times", mode_name[mode], tl);
}

constexpr int kMany = 40;

void probe_many()
{
    current_probe = "many";
    static Run runs[kMany];
    static pthread_t ts[kMany];
    int c0 = tl_destroyed.load();
    for (int i = 0; i < kMany; i++) {
        runs[i].mode = static_cast<Mode>(i % 4);
        if (pthread_create(&ts[i], nullptr, thread_main, &runs[i]) != 0) {
            std::fprintf(stderr, "pthread_create failed\n");
            std::exit(1);
        }
    }
    for (int i = 0; i < kMany; i++)
        while (!runs[i].about_to_block.load())
            sleep_ms(1);
    sleep_ms(30);
    for (int i = 0; i < kMany; i++)
        CHECK(pthread_cancel(ts[i]) == 0, "cancel %d", i);
    int ok = 0;
    for (int i = 0; i < kMany; i++) {
        void *ret = nullptr;
        int jr = pthread_join(ts[i], &ret);
        const char *want = runs[i].mode == kCond ? "ucFba" : "cFba";
        if (jr == 0 && ret == PTHREAD_CANCELED && std::strcmp(runs[i].log, want) == 0 &&
            runs[i].after.load() == 0)
            ok++;
        else
            CHECK(0, "many: thread %d (%s): join %d value %p unwound \"%s\" after=%d", i,
                  mode_name[runs[i].mode], jr, ret, runs[i].log, runs[i].after.load());
    }
    int tl = tl_destroyed.load() - c0;
    std::printf("%d threads cancelled at once: unwound as expected=%d thread_local dtors=%d\n",
                kMany, ok, tl);
    CHECK(ok == kMany && tl == kMany, "many: %d ok, %d thread_local destructors", ok, tl);
}

} // namespace

int main()
{
    std::signal(SIGALRM, on_alarm);
    alarm(60);
    if (pipe(pipe_empty) != 0 || sem_init(&sem_zero, 0, 0) != 0) {
        std::perror("pipe/sem_init");
        return 1;
    }
    for (int m = 0; m < kModes; m++)
        probe(static_cast<Mode>(m));
    probe_many();
    alarm(0);
    std::fflush(stdout);
    int n = failures.load();
    if (n) {
        std::fprintf(stderr, "cancel_cxx: %d check(s) failed\n", n);
        return 1;
    }
    return 0;
}
