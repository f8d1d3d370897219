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
import java.util.HashMap;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.atomic.AtomicIntegerArray;
import java.util.concurrent.atomic.AtomicLong;

/**
 * One run of a Java peer of bench/compare.py (db-scheduler or Quartz) on its own database.
 *
 * <p>{@code java -jar peers.jar <dbscheduler|quartz> <jdbc-url> <user> <n> <rate> <cap-s> <held>
 * <receiver-url> <secret-base64> [setting=value ...]}
 *
 * <p>The protocol (the same as bench/peers/apscheduler_peer.py's):
 *
 * <ol>
 *   <li>creates the peer's tables, builds the scheduler and writes {@code held} tasks due a year
 *       away (never firing): the first 1,000 through the peer's client API, the rest as SQL copies
 *       of an API-written row;
 *   <li>starts the scheduler (start-up time: building it and starting it, the held set in store);
 *   <li>warms the JVM up: {@link #WARM} tasks due now, delivered to the receiver's {@code /warm}
 *       (accepted, not counted), until all are delivered;
 *   <li>writes the {@code n} measured tasks at their final due time: task {@code i} due at {@code
 *       T + floor(i / rate)} s (rate = n: all at T; rate 1000: a steady 1,000 per second), T a
 *       whole second far enough ahead for the writes, then {@code VACUUM ANALYZE} (no re-dating
 *       UPDATE: the rows are as the API writes them);
 *   <li>each execution POSTs the task's key, signed, to the receiver (bench/peers/Poster.java) and
 *       completes only after the 2xx. The run ends when every task was delivered once and the
 *       peer's table holds no pending row (the completions are committed), or {@code cap-s}
 *       seconds after T (a timeout).
 * </ol>
 *
 * <p>The last line printed is JSON: {@code delivered} is this process's count of 2xx answers
 * (bench/compare.py checks it against the receiver's distinct keys), {@code due_base_ms} is T.
 */
public final class Peer {
  static long dueBaseMs;
  static int rate;
  static long[] lateMs;
  static AtomicIntegerArray hits;
  static final AtomicLong delivered = new AtomicLong();
  static final AtomicLong duplicates = new AtomicLong();
  static final AtomicLong warmed = new AtomicLong();
  static Poster poster;

  /** Tasks written through the peer's API; the others are SQL copies of those rows. */
  static final int API_ROWS = 1000;

  /** The warm-up burst: tasks due at once before the measured run, not counted. */
  static final int WARM = 2000;

  /** A year: the held tasks' distance. */
  static final long YEAR_MS = 365L * 86_400_000L;

  /** Due time of measured task {@code i}. */
  static long dueOf(int i) {
    return dueBaseMs + (long) (i / rate) * 1000L;
  }

  /** The task handler: deliver task {@code id} (warm-up {@code w..}, measured {@code t..}). */
  static void execute(String id) throws Exception {
    if (id.charAt(0) == 'w') {
      poster.post(id, System.currentTimeMillis(), true);
      warmed.incrementAndGet();
      return;
    }
    int i = indexOf(id);
    poster.post(id, dueOf(i), false);
    long now = System.currentTimeMillis();
    if (hits.getAndIncrement(i) == 0) {
      lateMs[i] = now - dueOf(i);
      delivered.incrementAndGet();
    } else {
      duplicates.incrementAndGet();
    }
  }

  interface System_ {
    String tuning();

    void createTables(Connection c) throws Exception;

    void build() throws Exception;

    /** Tasks {@code prefix + from .. to - 1} through the API, task j due at base + (j / rate) s. */
    void insert(int from, int to, long baseMs, int rate, String prefix) throws Exception;

    /** Rows {@code prefix + from .. prefix + (to - 1)}: copies of the API-written rows. */
    void copy(Connection c, int from, int to, long baseMs, int rate, String prefix)
        throws SQLException;

    void start() throws Exception;

    /** Rows not yet completed: measured ({@code t..}) and warm-up ({@code w..}). */
    long pending(Connection c, String prefix) throws SQLException;

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

  static Map<String, String> settings(String[] args, int from) {
    Map<String, String> out = new HashMap<>();
    for (int k = from; k < args.length; k++) {
      String[] kv = args[k].split("=", 2);
      out.put(kv[0], kv[1]);
    }
    return out;
  }

  static int intSetting(Map<String, String> s, String name) {
    String v = s.get(name);
    if (v == null) throw new IllegalArgumentException("setting " + name + " missing");
    return Integer.parseInt(v);
  }

  static void writeTasks(System_ sys, Connection c, int n, long baseMs, int r, String prefix)
      throws Exception {
    sys.insert(0, Math.min(n, API_ROWS), baseMs, r, prefix);
    if (n > API_ROWS) sys.copy(c, API_ROWS, n, baseMs, r, prefix);
  }

  public static void main(String[] args) throws Exception {
    String which = args[0];
    String url = args[1];
    String user = args[2];
    int n = Integer.parseInt(args[3]);
    rate = Integer.parseInt(args[4]);
    int capS = Integer.parseInt(args[5]);
    int held = Integer.parseInt(args[6]);
    poster = new Poster(which, args[7], args[8]);
    Map<String, String> settings = settings(args, 9);
    lateMs = new long[n];
    hits = new AtomicIntegerArray(n);
    System_ sys =
        which.equals("dbscheduler")
            ? new DbSchedulerPeer(url, user, settings)
            : new QuartzPeer(url, user, settings, capS);
    System.err.println(which + ": " + sys.tuning());
    try (Connection c = DriverManager.getConnection(url, user, "")) {
      c.setAutoCommit(true);
      sys.createTables(c);
      long t0 = System.nanoTime();
      sys.build();
      double buildS = (System.nanoTime() - t0) / 1e9;
      long heldAt = System.currentTimeMillis() + YEAR_MS;
      if (held > 0) writeTasks(sys, c, held, heldAt, Integer.MAX_VALUE, "h");
      exec(c, "vacuum analyze");
      long t1 = System.nanoTime();
      sys.start();
      double startupS = buildS + (System.nanoTime() - t1) / 1e9;
      long warmAt = System.currentTimeMillis();
      sys.insert(0, WARM, warmAt, Integer.MAX_VALUE, "w");
      long warmWriteMs = System.currentTimeMillis() - warmAt;
      long warmDeadline = System.currentTimeMillis() + 120_000;
      while ((warmed.get() < WARM || sys.pending(c, "w") > 0)
          && System.currentTimeMillis() < warmDeadline) {
        Thread.sleep(20);
      }
      long writeAt = System.currentTimeMillis();
      // a whole second far enough ahead for the writes: 3 s, twice the warm-up's API writes
      // (2,000 rows; the measured run writes 1,000 through the API) and 0.1 ms per copied row
      dueBaseMs = ((writeAt + 3000 + 2 * warmWriteMs + n / 10) / 1000 + 1) * 1000;
      long insertStart = System.nanoTime();
      writeTasks(sys, c, n, dueBaseMs, rate, "t");
      exec(c, "vacuum analyze");
      double insertS = (System.nanoTime() - insertStart) / 1e9;
      long writtenMs = System.currentTimeMillis();
      System.err.printf(
          Locale.ROOT, "%s: wrote %d (+%d held) in %.1f s%n", which, n, held, insertS);
      while (System.currentTimeMillis() < dueBaseMs) Thread.sleep(1);
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
        if (delivered.get() >= n && sys.pending(c, "t") == 0) {
          endMs = System.currentTimeMillis();
          break;
        }
      }
      double cpu = cpuSeconds() - cpu0;
      long done = delivered.get();
      sys.stop();
      long[] late = Arrays.copyOf(lateMs, n);
      int k = 0;
      for (int i = 0; i < n; i++) {
        if (hits.get(i) > 0) late[k++] = late[i];
      }
      late = Arrays.copyOf(late, k);
      Arrays.sort(late);
      double span = Math.max(1, endMs - dueBaseMs) / 1000.0;
      System.out.printf(
          Locale.ROOT,
          "{\"system\": \"%s\", \"n\": %d, \"delivered\": %d, \"duplicates\": %d, \"timeout\": %s,"
              + " \"completed_per_s\": %.1f, \"completed_p99_ms\": %d, \"peak_rss_mb\": %.1f,"
              + " \"cpu_s_per_1k\": %.3f, \"startup_s\": %.3f, \"insert_s\": %.1f,"
              + " \"written_before_due\": %s, \"due_base_ms\": %d, \"warmed\": %d,"
              + " \"tuning\": \"%s\"}%n",
          which,
          n,
          done,
          duplicates.get(),
          timeout,
          done / span,
          k == 0 ? -1 : late[(int) Math.floor(0.99 * (k - 1))],
          peakRssBytes() / 1048576.0,
          done == 0 ? 0.0 : cpu / done * 1000.0,
          startupS,
          insertS,
          writtenMs < dueBaseMs,
          dueBaseMs,
          warmed.get(),
          sys.tuning().replace("\"", "'"));
      System.out.flush();
      System.exit(0);
    }
  }

  static int indexOf(String id) {
    return Integer.parseInt(id.substring(1));
  }

  /**
   * {@code sql} with ?1 = base ms, ?2 = rate, ?3 = prefix, ?4 = from, ?5 = to - 1, ?6 = prefix;
   * then {@code ANALYZE} (without statistics for the copied rows PostgreSQL checks each copied
   * row's foreign key with a plan made for the API-written rows: minutes instead of seconds).
   */
  static void copySql(
      Connection c, String sql, int from, int to, long baseMs, int rate, String prefix)
      throws SQLException {
    try (PreparedStatement p = c.prepareStatement(sql)) {
      p.setLong(1, baseMs);
      p.setInt(2, rate);
      p.setString(3, prefix);
      p.setInt(4, from);
      p.setInt(5, to - 1);
      p.setString(6, prefix);
      p.executeUpdate();
    }
    exec(c, "analyze");
  }
}
