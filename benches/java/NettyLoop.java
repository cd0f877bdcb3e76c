// Netty's HashedWheelTimer in the tight loop of `timer_figures loop`: one thread, 1M timeouts
// pending (delays 1-60 s from the same generator), then best of 40 rounds of 100,000 schedules,
// 100,000 cancels of what was scheduled, and 100,000 schedule + cancel pairs. 1 ms tick, 512
// buckets, as `hashwheel`'s default timer. Run through `netty_loop.sh`.

import io.netty.util.HashedWheelTimer;
import io.netty.util.Timeout;
import io.netty.util.TimerTask;
import java.util.concurrent.TimeUnit;

public final class NettyLoop {
    private static final TimerTask NOOP = timeout -> {};

    /** Delays in ms spread over 1 to 60 s, from the fixed-seed generator of `workload::delays`. */
    static long[] delays(int count, long seed) {
        long state = seed | 1;
        long[] out = new long[count];
        for (int i = 0; i < count; i++) {
            state ^= state << 13;
            state ^= state >>> 7;
            state ^= state << 17;
            out[i] = 1_000 + Long.remainderUnsigned(state, 59_000);
        }
        return out;
    }

    public static void main(String[] args) {
        int pending = args.length > 0 ? Integer.parseInt(args[0]) : 1_000_000;
        int rounds = 40;
        int perRound = Math.max(pending / 10, 1_000);
        HashedWheelTimer timer = new HashedWheelTimer(1, TimeUnit.MILLISECONDS, 512);
        timer.start();
        Timeout[] prefilled = new Timeout[pending];
        long[] prefill = delays(pending, 7);
        for (int i = 0; i < pending; i++) {
            prefilled[i] = timer.newTimeout(NOOP, prefill[i], TimeUnit.MILLISECONDS);
        }
        long[] delays = delays(1 << 16, 11);
        Timeout[] handles = new Timeout[perRound];
        double schedule = Double.MAX_VALUE, cancel = Double.MAX_VALUE, pair = Double.MAX_VALUE;
        for (int round = 0; round < rounds; round++) {
            long start = System.nanoTime();
            for (int i = 0; i < perRound; i++) {
                handles[i] = timer.newTimeout(NOOP, delays[i % delays.length], TimeUnit.MILLISECONDS);
            }
            schedule = Math.min(schedule, (System.nanoTime() - start) / (double) perRound);
            start = System.nanoTime();
            for (int i = 0; i < perRound; i++) {
                handles[i].cancel();
                handles[i] = null;
            }
            cancel = Math.min(cancel, (System.nanoTime() - start) / (double) perRound);
            start = System.nanoTime();
            for (int i = 0; i < perRound; i++) {
                timer.newTimeout(NOOP, delays[i % delays.length], TimeUnit.MILLISECONDS).cancel();
            }
            pair = Math.min(pair, (System.nanoTime() - start) / (double) perRound);
        }
        System.out.printf(
                "netty %s: schedule %.1f ns, cancel %.1f ns, schedule + cancel %.1f ns (%d pending, best of %d rounds of %d)%n",
                io.netty.util.Version.identify().getOrDefault("netty-common", null) == null
                        ? "4.1" : io.netty.util.Version.identify().get("netty-common").artifactVersion(),
                schedule, cancel, pair, pending, rounds, perRound);
        timer.stop();
        if (prefilled.length < 0) {
            System.out.println(prefilled[0]);
        }
    }
}
