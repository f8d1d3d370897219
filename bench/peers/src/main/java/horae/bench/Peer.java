package horae.bench;

import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.Arrays;
import java.util.Locale;
import java.util.concurrent.atomic.AtomicIntegerArray;
import java.util.concurrent.atomic.AtomicLong;

/**
 * One run of a Java peer of bench/compare.py (db-scheduler or Quartz) on its own database.
 *
 * <p>{@code java -jar peers.jar <dbscheduler|quartz> <jdbc-url> <user> <n> <rate> <cap-s> <held>}
 *
 * <p>Creates the peer's tables, inserts {@code n} one-shot tasks due a day away, plus {@code
 * held} tasks due a year away (never firing): the first 1,000 of each through the peer's own
 * client API, the rest as SQL copies of an API-written row (setup only); builds and starts
 * the scheduler (start-up time), then arms the run with one UPDATE in the peer's table: task
 * {@code i} becomes due at {@code T + floor(i / rate)} s, T seconds ahead (after the UPDATE) (rate = n: all at
 * T; rate 1000: a steady 1,000 per second). Each execution records its lateness (execution start
 * minus its due time) in this process. The run ends when every task has executed once and the
 * peer's table holds no pending row for it (the completions are committed), or after {@code
 * cap-s} seconds (reported as a timeout). The last line printed is JSON.
 */
public final class Peer {
  static long dueBaseMs;
  static int rate;
  static long[] lateMs;
  static AtomicIntegerArray hits;
  static final AtomicLong executed = new AtomicLong();
  static final AtomicLong duplicates = new AtomicLong();
  static final AtomicLong lastExecMs = new AtomicLong();

  /** Tasks written through the peer's API; the others are SQL copies of those rows. */
  static final int API_ROWS = 1000;

  /** Called at the start of each execution of task {@code i}. */
  static void record(int i) {
    long now = System.currentTimeMillis();
    if (hits.getAndIncrement(i) == 0) {
      lateMs[i] = now - (dueBaseMs + (long) (i / rate) * 1000L);
      executed.incrementAndGet();
      lastExecMs.accumulateAndGet(now, Math::max);
    } else {
      duplicates.incrementAndGet();
    }
  }

  interface System_ {
    String tuning();

    void createTables(Connection c) throws Exception;

    void build() throws Exception;

    void insert(int from, int to, long dueMs, String prefix) throws Exception;

    /** Rows {@code prefix + from .. prefix + (to - 1)}: copies of the API-written {@code prefix + 0}. */
    void copy(Connection c, int from, int to, String prefix) throws SQLException;

    void start() throws Exception;

    /** One UPDATE: task i due at base + floor(i / rate) s. */
    void arm(Connection c, long baseMs, int rate) throws SQLException;

    long pending(Connection c) throws SQLException;

    void stop() throws Exception;
  }

  static double cpuSeconds() {
    return ((com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean())
            .getProcessCpuTime()
        / 1e9;
  }

  static long peakRssBytes() throws Exception {
    for (String line : Files.readAllLines(Path.of("/proc/self/status"))) {
      if (line.startsWith("VmHWM:")) {
        return Long.parseLong(line.replaceAll("[^0-9]", "")) * 1024L;
      }
    }
    return -1;
  }

  static void exec(Connection c, String sql) throws SQLException {
    try (Statement s = c.createStatement()) {
      s.execute(sql);
    }
  }

  static long count(Connection c, String sql) throws SQLException {
    try (Statement s = c.createStatement();
        ResultSet r = s.executeQuery(sql)) {
      r.next();
      return r.getLong(1);
    }
  }

  public static void main(String[] args) throws Exception {
    String which = args[0];
    String url = args[1];
    String user = args[2];
    int n = Integer.parseInt(args[3]);
    rate = Integer.parseInt(args[4]);
    int capS = Integer.parseInt(args[5]);
    int held = Integer.parseInt(args[6]);
    lateMs = new long[n];
    hits = new AtomicIntegerArray(n);
    System_ sys =
        which.equals("dbscheduler") ? new DbSchedulerPeer(url, user) : new QuartzPeer(url, user);
    System.err.println(which + ": " + sys.tuning());
    try (Connection c = DriverManager.getConnection(url, user, "")) {
      c.setAutoCommit(true);
      sys.createTables(c);
      long t0 = System.nanoTime();
      sys.build();
      double buildS = (System.nanoTime() - t0) / 1e9;
      long far = System.currentTimeMillis() + 86_400_000L;
      long insertStart = System.nanoTime();
      sys.insert(0, Math.min(n, API_ROWS), far, "t");
      if (n > API_ROWS) sys.copy(c, API_ROWS, n, "t");
      if (held > 0) sys.insert(0, Math.min(held, API_ROWS), far + 365L * 86_400_000L, "h");
      if (held > API_ROWS) sys.copy(c, API_ROWS, held, "h");
      double insertS = (System.nanoTime() - insertStart) / 1e9;
      System.err.printf(Locale.ROOT, "%s: inserted %d (+%d held) in %.1f s%n", which, n, held, insertS);
      long t1 = System.nanoTime();
      sys.start();
      double startupS = buildS + (System.nanoTime() - t1) / 1e9;
      Thread.sleep(2000); // warm: a few polls of an idle scheduler
      long armAt = System.currentTimeMillis();
      // a whole second, at least 3 s + 0.2 ms per armed task + 0.01 ms per held one (the
      // UPDATE's time: it rewrites the n tasks, scanning the held ones)
      dueBaseMs = ((armAt + 3000 + n / 5 + held / 100) / 1000 + 1) * 1000;
      sys.arm(c, dueBaseMs, rate);
      long armedMs = System.currentTimeMillis();
      double cpu0 = cpuSeconds();
      boolean timeout = false;
      long endMs;
      while (true) {
        Thread.sleep(20);
        long now = System.currentTimeMillis();
        if (now - dueBaseMs > capS * 1000L) {
          timeout = true;
          endMs = now;
          break;
        }
        if (executed.get() >= n && sys.pending(c) == 0) {
          endMs = System.currentTimeMillis();
          break;
        }
      }
      double cpu = cpuSeconds() - cpu0;
      long done = executed.get();
      sys.stop();
      long[] late = Arrays.copyOf(lateMs, n);
      int k = 0;
      for (int i = 0; i < n; i++) {
        if (hits.get(i) > 0) late[k++] = late[i];
      }
      late = Arrays.copyOf(late, k);
      Arrays.sort(late);
      StringBuilder q = new StringBuilder();
      for (int p = 0; p <= 100; p++) {
        if (p > 0) q.append(',');
        q.append(k == 0 ? 0 : late[Math.min(k - 1, (int) Math.floor(p / 100.0 * (k - 1)))]);
      }
      double span = Math.max(1, endMs - dueBaseMs) / 1000.0;
      System.out.printf(
          Locale.ROOT,
          "{\"system\": \"%s\", \"n\": %d, \"executed\": %d, \"duplicates\": %d, \"timeout\": %s,"
              + " \"fires_per_s\": %.1f, \"p50_ms\": %d, \"p99_ms\": %d, \"peak_rss_mb\": %.1f,"
              + " \"cpu_s_per_1k\": %.3f, \"startup_s\": %.3f, \"insert_s\": %.1f,"
              + " \"arm_ms\": %d, \"armed_before_due\": %s, \"span_s\": %.2f, \"tuning\": \"%s\", \"quantiles_ms\": [%s]}%n",
          which,
          n,
          done,
          duplicates.get(),
          timeout,
          done / span,
          k == 0 ? -1 : late[(int) Math.floor(0.50 * (k - 1))],
          k == 0 ? -1 : late[(int) Math.floor(0.99 * (k - 1))],
          peakRssBytes() / 1048576.0,
          done == 0 ? 0.0 : cpu / done * 1000.0,
          startupS,
          insertS,
          armedMs - armAt,
          armedMs < dueBaseMs,
          span,
          sys.tuning().replace("\"", "'"),
          q);
      System.out.flush();
      System.exit(0);
    }
  }

  static int indexOf(String id) {
    return Integer.parseInt(id.substring(1));
  }

  static void armSql(Connection c, String sql, long baseMs, int rate) throws SQLException {
    try (PreparedStatement p = c.prepareStatement(sql)) {
      p.setLong(1, baseMs);
      p.setInt(2, rate);
      p.executeUpdate();
    }
  }

  /** {@code sql} with ?1 = prefix, ?2 = from, ?3 = to - 1, ?4 = prefix (the template's). */
  static void copySql(Connection c, String sql, int from, int to, String prefix)
      throws SQLException {
    try (PreparedStatement p = c.prepareStatement(sql)) {
      p.setString(1, prefix);
      p.setInt(2, from);
      p.setInt(3, to - 1);
      p.setString(4, prefix);
      p.executeUpdate();
    }
    // statistics for the copied rows before the next statement: without them PostgreSQL checks
    // each copied row's foreign key with a plan made for the API-written rows (an index scan on
    // a non-unique prefix: minutes for 100,000 rows instead of seconds)
    try (Statement s = c.createStatement()) {
      s.execute("analyze");
    }
  }

  static Connection connect(String url, String user) throws SQLException {
    return DriverManager.getConnection(url, user, "");
  }
}
