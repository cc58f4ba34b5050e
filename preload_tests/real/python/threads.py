# threads.py -- CPython's threads (one GIL, handed over through a mutex and
# a condvar with 5 ms timed waits; Python's locks are semaphores) doing work
# whose results are known. Run by python.sh natively and under bobbin: each
# part checks its own result, prints one line, and the last line is "ok".
# Argument: scale (1 short, 3 full).
import hashlib
import queue
import signal
import socket
import socketserver
import subprocess
import sys
import threading
import time
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor

scale = int(sys.argv[1]) if len(sys.argv) > 1 else 1
failed = []


def check(what, got, want):
    print(what, "ok" if got == want else "FAIL got %r want %r" % (got, want), flush=True)
    if got != want:
        failed.append(what)


def digest(n, k):
    h = hashlib.sha256()
    for i in range(k):
        h.update(str(i * n).encode())
    return h.hexdigest()


# 1. hashing in a thread pool, a counter under a lock
count = 0
count_lock = threading.Lock()


def work(n):
    global count
    for _ in range(2000 * scale):
        with count_lock:
            count += 1
    return digest(n, 5000 * scale)


with ThreadPoolExecutor(16) as ex:
    got = list(ex.map(work, range(32)))
check("pool hashes", got, [digest(n, 5000 * scale) for n in range(32)])
check("pool counter", count, 32 * 2000 * scale)

# 2. producers and consumers through a bounded queue
q = queue.Queue(maxsize=10)
sums = []


def produce(k):
    for i in range(3000 * scale):
        q.put(i * k)


def consume():
    s = 0
    while (v := q.get()) is not None:
        s += v
    with count_lock:
        sums.append(s)


cons = [threading.Thread(target=consume) for _ in range(4)]
prods = [threading.Thread(target=produce, args=(k,)) for k in range(1, 5)]
for t in cons + prods:
    t.start()
for t in prods:
    t.join()
for _ in cons:
    q.put(None)
for t in cons:
    t.join()
n = 3000 * scale
check("queue sum", sum(sums), sum(i * k for k in range(1, 5) for i in range(n)))

# 3. timers, events, a condition with a predicate
fired = []
timers = [threading.Timer(0.005 * i, lambda i=i: fired.append(i)) for i in range(20)]
for t in timers:
    t.start()
for t in timers:
    t.join()
check("timers", sorted(fired), list(range(20)))
cond = threading.Condition()
stage = [0]


def stepper(k):
    with cond:
        cond.wait_for(lambda: stage[0] == k)
        stage[0] += 1
        cond.notify_all()


steps = [threading.Thread(target=stepper, args=(k,)) for k in reversed(range(30))]
for t in steps:
    t.start()
for t in steps:
    t.join()
check("condition relay", stage[0], 30)

# 4. computing threads that never block: the GIL must still go round
stop = threading.Event()
spins = [0] * 4


def spin(i):
    while not stop.is_set():
        spins[i] += 1


spinners = [threading.Thread(target=spin, args=(i,)) for i in range(4)]
for t in spinners:
    t.start()
main_steps = 0
for _ in range(20 * scale):
    time.sleep(0.002)
    main_steps += 1
stop.set()
for t in spinners:
    t.join()
check("main among spinners", main_steps, 20 * scale)
check("every spinner ran", all(s > 0 for s in spins), True)

# 5. a thread-per-connection TCP server and 32 client threads on 127.0.0.1


class Upper(socketserver.StreamRequestHandler):
    def handle(self):
        for line in self.rfile:
            self.wfile.write(line.upper())


class Server(socketserver.ThreadingTCPServer):
    allow_reuse_address = True
    daemon_threads = True
    request_queue_size = 128


srv = Server(("127.0.0.1", 0), Upper)
port = srv.server_address[1]
serving = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05})
serving.start()
replies = {}


def client(i):
    with socket.create_connection(("127.0.0.1", port)) as c:
        f = c.makefile("rwb")
        got = []
        for j in range(20 * scale):
            f.write(b"line %d %d\n" % (i, j))
            f.flush()
            got.append(f.readline())
        replies[i] = got


clients = [threading.Thread(target=client, args=(i,)) for i in range(32)]
for t in clients:
    t.start()
for t in clients:
    t.join()
srv.shutdown()
srv.server_close()
serving.join()
check("echo", replies, {i: [b"LINE %d %d\n" % (i, j) for j in range(20 * scale)] for i in range(32)})


# 6. subprocesses from threads, a process pool (fork, pipes, semaphores)
def run(i):
    r = subprocess.run(["sh", "-c", "echo %d; exit %d" % (i, i % 3)], capture_output=True)
    return r.stdout.decode().strip(), r.returncode


with ThreadPoolExecutor(8) as ex:
    got = list(ex.map(run, range(24)))
check("subprocesses", got, [(str(i), i % 3) for i in range(24)])


def square(x):
    return x * x


if __name__ == "__main__":
    with ProcessPoolExecutor(4) as ex:
        got = sum(ex.map(square, range(1000 * scale)))
    check("process pool", got, sum(x * x for x in range(1000 * scale)))

# 7. a signal handled by main while other threads compute
handled = []
signal.signal(signal.SIGALRM, lambda s, f: handled.append(s))
stop.clear()
spinners = [threading.Thread(target=spin, args=(i,)) for i in range(3)]
for t in spinners:
    t.start()
for _ in range(5):
    signal.setitimer(signal.ITIMER_REAL, 0.01)
    time.sleep(0.05)
stop.set()
for t in spinners:
    t.join()
check("signals", handled, [signal.SIGALRM] * 5)

print("FAILED: " + ", ".join(failed) if failed else "ok")
