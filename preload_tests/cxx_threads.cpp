// cxx_threads — C++ runtime state that lives in TLS: exceptions and thread_local.
//
// 200 std::threads (each a pthread_create underneath) each:
//  - use a thread_local object with a constructor and a destructor; the destructor
//    runs at thread exit through __cxa_thread_atexit, and main counts the runs;
//  - throw and catch exceptions through several frames, yielding inside the catch
//    block and rethrowing with `throw;`, which needs the thread's own exception
//    stack (__cxa_get_globals, a TLS object) to follow it across OS threads;
//  - hand a result back through std::promise/std::future.
// Output is printed by main in thread order.
#include <atomic>
#include <cstdio>
#include <future>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr int kThreads = 200;
constexpr int kThrows = 50;

std::atomic<int> constructed{0};
std::atomic<int> destroyed{0};
std::atomic<int> failures{0};

void fail(int id, const char *what)
{
    if (failures.fetch_add(1) < 20)
        std::fprintf(stderr, "thread %d: %s\n", id, what);
}

struct Tracker {
    int owner = -1;
    long uses = 0;
    Tracker() { constructed.fetch_add(1); }
    ~Tracker()
    {
        if (owner >= 0 && uses != kThrows)
            fail(owner, "thread_local destroyed with the wrong state");
        destroyed.fetch_add(1);
    }
};

thread_local Tracker tracker;
thread_local std::string tl_name = "unset";

[[noreturn]] __attribute__((noinline)) void thrower(int id, int n)
{
    std::this_thread::yield();
    throw std::runtime_error("t" + std::to_string(id) + "/" + std::to_string(n));
}

__attribute__((noinline)) int middle(int id, int n)
{
    std::string keep = "frame " + std::to_string(n);   // unwound by the throw
    if (n >= 0)
        thrower(id, n);
    return static_cast<int>(keep.size());
}

// Catch, yield (maybe resuming on another OS thread), then rethrow the caught
// exception: `throw;` reads the thread's caught-exceptions stack.
int catch_yield_rethrow(int id, int n)
{
    try {
        try {
            middle(id, n);
        } catch (const std::runtime_error &) {
            for (int k = 0; k < 3; k++)
                std::this_thread::yield();
            throw;
        }
    } catch (const std::runtime_error &e) {
        std::string want = "t" + std::to_string(id) + "/" + std::to_string(n);
        if (want != e.what())
            fail(id, "caught another thread's exception");
        if (std::uncaught_exceptions() != 0)
            fail(id, "uncaught_exceptions() != 0 inside a handler");
        return 1;
    }
    return 0;
}

void worker(int id, std::promise<long> result)
{
    tracker.owner = id;
    tl_name = "worker-" + std::to_string(id);
    long caught = 0;
    for (int n = 0; n < kThrows; n++) {
        caught += catch_yield_rethrow(id, n);
        tracker.uses++;
    }
    if (tl_name != "worker-" + std::to_string(id))
        fail(id, "thread_local string changed");
    result.set_value(caught * 1000 + id);
}

}  // namespace

int main()
{
    std::vector<std::thread> threads;
    std::vector<std::future<long>> results;
    tracker.owner = -1;   // construct main's own tracker now: it is not counted below

    int before = constructed.load();
    for (int id = 0; id < kThreads; id++) {
        std::promise<long> p;
        results.push_back(p.get_future());
        threads.emplace_back(worker, id, std::move(p));
    }
    long sum = 0;
    for (int id = 0; id < kThreads; id++) {
        long r = results[id].get();
        if (r != kThrows * 1000L + id)
            fail(id, "wrong result");
        sum += r;
    }
    for (auto &t : threads)
        t.join();

    int made = constructed.load() - before;
    int gone = destroyed.load();
    if (made != kThreads || gone != kThreads) {
        std::fprintf(stderr, "thread_local: %d constructed, %d destroyed, want %d\n", made,
                     gone, kThreads);
        failures++;
    }
    if (tl_name != "unset")
        fail(-1, "main's thread_local string changed");

    std::printf("cxx_threads: %d threads, %d exceptions each, result sum=%ld, "
                "thread_local ctor=%d dtor=%d\n",
                kThreads, kThrows, sum, made, gone);
    std::fflush(stdout);
    return failures.load() == 0 ? 0 : 1;
}
