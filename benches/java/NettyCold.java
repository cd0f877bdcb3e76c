// Netty's HashedWheelTimer with cold handles, as `timer_figures cold`: one thread, 1M timeouts
// pending (delays 1-60 s, the generator of `workload::delays`, seed 7), then 5 rounds, each of
// 1M schedules with delays from the same generator (seed 11, 65,536 of them in turn), keeping
// every handle in an array, then 1M cancels through those handles in the order they were
// scheduled; best of the 5 rounds, wall time / 1M. 100 ms tick, 512 buckets, as that section's
// `hashwheel` timer. Run through `netty_cold.sh`.

import io.netty.util.HashedWheelTimer;
import io.netty.util.Timeout;
import io.netty.util.TimerTask;
import java.util.concurrent.TimeUnit;

public final class NettyCold {
    private static final TimerTask NOOP = timeout -> {};

    public static void main(String[] args) {
        int pending = args.length > 0 ? Integer.parseInt(args[0]) : 1_000_000;
        int perRound = pending;
        int rounds = 5;
        HashedWheelTimer timer = new HashedWheelTimer(100, TimeUnit.MILLISECONDS, 512);
        timer.start();
        Timeout[] prefilled = new Timeout[pending];
        long[] prefill = NettyLoop.delays(pending, 7);
        for (int i = 0; i < pending; i++) {
            prefilled[i] = timer.newTimeout(NOOP, prefill[i], TimeUnit.MILLISECONDS);
        }
        long[] delays = NettyLoop.delays(1 << 16, 11);
        Timeout[] handles = new Timeout[perRound];
        double schedule = Double.MAX_VALUE, cancel = Double.MAX_VALUE;
        for (int round = 0; round < rounds; round++) {
            long start = System.nanoTime();
            for (int i = 0; i < perRound; i++) {
                handles[i] = timer.newTimeout(NOOP, delays[i & (delays.length - 1)], TimeUnit.MILLISECONDS);
            }
            schedule = Math.min(schedule, (System.nanoTime() - start) / (double) perRound);
            start = System.nanoTime();
            for (int i = 0; i < perRound; i++) {
                handles[i].cancel();
                handles[i] = null;
            }
            cancel = Math.min(cancel, (System.nanoTime() - start) / (double) perRound);
        }
        System.out.printf(
                "netty %s cold: schedule %.1f ns, cancel %.1f ns (%d pending, best of %d rounds of %d)%n",
                io.netty.util.Version.identify().getOrDefault("netty-common", null) == null
                        ? "4.1" : io.netty.util.Version.identify().get("netty-common").artifactVersion(),
                schedule, cancel, pending, rounds, perRound);
        timer.stop();
        if (prefilled.length < 0) {
            System.out.println(prefilled[0]);
        }
    }
}
