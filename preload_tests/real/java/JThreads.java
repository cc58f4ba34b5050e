// JThreads.java — the JVM's threads under bobbin (preload_tests/real/java.sh).
//
// usage: java -Xmx64m JThreads THREADS ROUNDS
//
// 1. THREADS platform threads, each ROUNDS times: builds some garbage (a small
//    heap makes the collector stop every thread at safepoints again and again),
//    adds to a counter under a synchronized block, merges into a ConcurrentHashMap,
//    meets the others at a CyclicBarrier (LockSupport.park), and sleeps 2 ms in
//    its first round.
// 2. A bounded buffer with wait/notifyAll: 4 producers, 4 consumers.
// 3. A fixed pool of 8 threads runs 256 tasks through futures.
// Every result is checked against the value it must have; stdout holds only the
// results (the same in every run, natively and under bobbin), stderr the time.
import java.util.*;
import java.util.concurrent.*;
import java.util.concurrent.atomic.*;

public class JThreads {
    static final Object lock = new Object();
    static long counter;

    static void check(boolean ok, String what) {
        if (!ok) {
            System.out.println("FAIL " + what);
            System.exit(1);
        }
    }

    public static void main(String[] args) throws Exception {
        final int n = Integer.parseInt(args[0]), rounds = Integer.parseInt(args[1]);
        long t0 = System.nanoTime();

        CyclicBarrier bar = new CyclicBarrier(n);
        ConcurrentHashMap<Integer, Long> map = new ConcurrentHashMap<>();
        AtomicLong chars = new AtomicLong();
        Thread[] ts = new Thread[n];
        for (int i = 0; i < n; i++) {
            final int k = i;
            ts[i] = new Thread(() -> {
                try {
                    long local = 0;
                    for (int r = 0; r < rounds; r++) {
                        StringBuilder sb = new StringBuilder();
                        for (int j = 0; j < 200; j++)
                            sb.append(j ^ k).append(',');
                        local += sb.toString().split(",").length;
                        synchronized (lock) {
                            counter += k + r;
                        }
                        map.merge(k % 101, (long) (k + r), Long::sum);
                        bar.await();
                        if (r == 0)
                            Thread.sleep(2);
                    }
                    chars.addAndGet(local);
                } catch (Exception e) {
                    throw new RuntimeException(e);
                }
            });
            ts[i].start();
        }
        for (Thread t : ts)
            t.join();
        long want = (long) rounds * n * (n - 1) / 2 + (long) n * rounds * (rounds - 1) / 2;
        long mapsum = 0;
        for (long v : map.values())
            mapsum += v;
        check(counter == want, "counter " + counter + " != " + want);
        check(mapsum == want, "map sum " + mapsum + " != " + want);
        check(chars.get() == 200L * n * rounds, "split count " + chars.get());
        System.out.println("threads " + n + " rounds " + rounds + " counter " + counter +
                           " keys " + map.size());

        // bounded buffer, wait/notifyAll
        final int items = 20000, nprod = 4, ncons = 4;
        final ArrayDeque<Integer> buf = new ArrayDeque<>();
        final AtomicLong consumed = new AtomicLong(), taken = new AtomicLong();
        Thread[] pc = new Thread[nprod + ncons];
        for (int p = 0; p < nprod; p++) {
            final int base = p * items;
            pc[p] = new Thread(() -> {
                for (int i = 1; i <= items; i++) {
                    synchronized (buf) {
                        while (buf.size() >= 16) {
                            try { buf.wait(); } catch (InterruptedException e) { return; }
                        }
                        buf.add(base + i);
                        buf.notifyAll();
                    }
                }
            });
        }
        for (int c = 0; c < ncons; c++) {
            pc[nprod + c] = new Thread(() -> {
                for (;;) {
                    int v;
                    synchronized (buf) {
                        while (buf.isEmpty()) {
                            if (taken.get() == (long) nprod * items)
                                return;
                            try { buf.wait(); } catch (InterruptedException e) { return; }
                        }
                        v = buf.poll();
                        taken.incrementAndGet();
                        buf.notifyAll();
                    }
                    consumed.addAndGet(v);
                }
            });
        }
        for (Thread t : pc)
            t.start();
        for (Thread t : pc)
            t.join();
        long total = (long) nprod * items;
        long wantsum = total * (total + 1) / 2;
        check(consumed.get() == wantsum, "consumed " + consumed.get() + " != " + wantsum);
        System.out.println("buffer items " + total + " sum " + consumed.get());

        // a pool of 8 threads
        ExecutorService pool = Executors.newFixedThreadPool(8);
        List<Future<Long>> fs = new ArrayList<>();
        for (int i = 0; i < 256; i++) {
            final long k = i;
            fs.add(pool.submit(() -> {
                long s = 0;
                for (long j = 0; j < 100000; j++)
                    s += (j * 31) ^ k;
                return s;
            }));
        }
        long poolsum = 0, poolwant = 0;
        for (Future<Long> f : fs)
            poolsum += f.get();
        pool.shutdown();
        check(pool.awaitTermination(60, TimeUnit.SECONDS), "pool did not end");
        for (long k = 0; k < 256; k++)
            for (long j = 0; j < 100000; j++)
                poolwant += (j * 31) ^ k;
        check(poolsum == poolwant, "pool sum " + poolsum + " != " + poolwant);
        System.out.println("pool tasks 256 sum " + poolsum);

        double secs = (System.nanoTime() - t0) / 1e9;
        System.err.printf("time %.3f%n", secs);
        System.out.println("ok");
    }
}
