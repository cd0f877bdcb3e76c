// Netty's HashedWheelTimer beside `timer_figures burst` and `timer_memory`, run through
// `netty_burst.sh`. 1 ms tick, 512 buckets, as `hashwheel`'s default timer.
//
// burst: 1,000,000 no-op tasks scheduled on one deadline 300 ms away; the time from the
// deadline to the start of the last task, per task; median of 3 runs, each on a new timer.
// memory: the heap retained by 1,000,000 pending timeouts (delays 1 to 60 s, the caller keeping
// each handle in an array), per timeout: heap used after a full collection, less the same
// before scheduling; one run (a timer stopped in the same JVM leaves garbage that a later
// run would count against: run the JVM again for more).

import io.netty.util.HashedWheelTimer;
import io.netty.util.Timeout;
import java.util.Arrays;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

public final class NettyBurst {
    static final int COUNT = 1_000_000;

    static double burst() throws InterruptedException {
        HashedWheelTimer timer = new HashedWheelTimer(1, TimeUnit.MILLISECONDS, 512);
        timer.start();
        CountDownLatch done = new CountDownLatch(1);
        AtomicLong last = new AtomicLong();
        long[] ran = new long[1];
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(300);
        for (int i = 0; i < COUNT; i++) {
            long left = Math.max(deadline - System.nanoTime(), 0);
            timer.newTimeout(timeout -> {
                // Only the worker thread runs tasks: a plain counter will do.
                if (++ran[0] == COUNT) {
                    last.set(System.nanoTime());
                    done.countDown();
                }
            }, left, TimeUnit.NANOSECONDS);
        }
        if (!done.await(60, TimeUnit.SECONDS)) {
            throw new IllegalStateException("the burst did not finish within a minute");
        }
        timer.stop();
        return (last.get() - deadline) / (double) COUNT;
    }

    static long used() {
        Runtime runtime = Runtime.getRuntime();
        for (int i = 0; i < 3; i++) {
            System.gc();
        }
        return runtime.totalMemory() - runtime.freeMemory();
    }

    static double memory() {
        long[] delays = NettyLoop.delays(COUNT, 7);
        HashedWheelTimer timer = new HashedWheelTimer(1, TimeUnit.MILLISECONDS, 512);
        timer.start();
        Timeout[] handles = new Timeout[COUNT];
        long before = used();
        for (int i = 0; i < COUNT; i++) {
            handles[i] = timer.newTimeout(timeout -> {}, delays[i], TimeUnit.MILLISECONDS);
        }
        // Let the worker move the new timeouts from its queue into the wheel.
        try {
            Thread.sleep(200);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        long after = used();
        double perTimeout = (after - before) / (double) COUNT;
        if (handles[COUNT - 1] == null) {
            throw new IllegalStateException("unreachable");
        }
        timer.stop();
        return perTimeout;
    }

    static double median(double[] runs) {
        double[] sorted = runs.clone();
        Arrays.sort(sorted);
        return sorted[sorted.length / 2];
    }

    public static void main(String[] args) throws InterruptedException {
        String mode = args.length > 0 ? args[0] : "burst";
        double[] runs = new double[mode.equals("memory") ? 1 : 3];
        for (int run = 0; run < runs.length; run++) {
            runs[run] = mode.equals("memory") ? memory() : burst();
        }
        if (mode.equals("memory")) {
            System.out.printf("netty memory: %.1f bytes per pending timeout%n", runs[0]);
        } else {
            System.out.printf("netty burst: %.1f ns per task (runs %.1f / %.1f / %.1f)%n",
                    median(runs), runs[0], runs[1], runs[2]);
        }
    }
}
