package horae.bench;

import com.github.kagkarlsson.scheduler.Scheduler;
import com.github.kagkarlsson.scheduler.task.TaskInstance;
import com.github.kagkarlsson.scheduler.task.helper.OneTimeTask;
import com.github.kagkarlsson.scheduler.task.helper.Tasks;
import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import java.sql.Connection;
import java.sql.SQLException;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * db-scheduler with the settings bench/compare.py hands it (its {@code DBSCHEDULER} grid, swept):
 * {@code threads}, {@code lower}/{@code upper} of {@code pollUsingLockAndFetch} (fractions of the
 * thread count: the README's high-throughput advice is (1.0, 4.0)), the HikariCP {@code pool}
 * size and {@code poll_ms}, the polling interval.
 */
final class DbSchedulerPeer implements Peer.System_ {
  // db-scheduler's postgresql_tables.sql
  static final String DDL =
      "create table scheduled_tasks ("
          + " task_name text not null,"
          + " task_instance text not null,"
          + " task_data bytea,"
          + " execution_time timestamp with time zone not null,"
          + " picked BOOLEAN not null,"
          + " picked_by text,"
          + " last_success timestamp with time zone,"
          + " last_failure timestamp with time zone,"
          + " consecutive_failures INT,"
          + " last_heartbeat timestamp with time zone,"
          + " version BIGINT not null,"
          + " priority SMALLINT,"
          + " PRIMARY KEY (task_name, task_instance));"
          + "CREATE INDEX execution_time_idx ON scheduled_tasks (execution_time);"
          + "CREATE INDEX last_heartbeat_idx ON scheduled_tasks (last_heartbeat);"
          + "CREATE INDEX priority_execution_time_idx on scheduled_tasks (priority desc, execution_time asc);";

  private final int threads;
  private final double lower;
  private final double upper;
  private final int poolSize;
  private final int pollMs;
  private final HikariDataSource pool;
  private final OneTimeTask<Void> task =
      Tasks.oneTime("bench").execute((inst, ctx) -> {
        try {
          Peer.execute(inst.getId());
        } catch (RuntimeException e) {
          throw e;
        } catch (Exception e) {
          throw new IllegalStateException(e);
        }
      });
  private Scheduler scheduler;

  DbSchedulerPeer(String url, String user, Map<String, String> settings) {
    threads = Peer.intSetting(settings, "threads");
    lower = Double.parseDouble(settings.get("lower"));
    upper = Double.parseDouble(settings.get("upper"));
    poolSize = Peer.intSetting(settings, "pool");
    pollMs = Peer.intSetting(settings, "poll_ms");
    HikariConfig config = new HikariConfig();
    config.setJdbcUrl(url);
    config.setUsername(user);
    config.setMaximumPoolSize(poolSize);
    config.setAutoCommit(true);
    pool = new HikariDataSource(config);
  }

  @Override
  public String tuning() {
    return String.format(
        Locale.ROOT,
        "db-scheduler 16.7.1, one-time tasks, threads=%d, pollUsingLockAndFetch(%.1f, %.1f)"
            + " (SELECT ... FOR UPDATE SKIP LOCKED), pollingInterval=%dms, HikariCP 7.1.0"
            + " maximumPoolSize=%d, handler: signed POST via java.net.http.HttpClient (HTTP/1.1,"
            + " pooled), completes after the 2xx",
        threads,
        lower,
        upper,
        pollMs,
        poolSize);
  }

  @Override
  public void createTables(Connection c) throws SQLException {
    Peer.exec(c, DDL);
  }

  @Override
  public void build() {
    scheduler =
        Scheduler.create(pool, task)
            .threads(threads)
            .pollUsingLockAndFetch(lower, upper)
            .pollingInterval(Duration.ofMillis(pollMs))
            .build();
  }

  @Override
  public void insert(int from, int to, long baseMs, int rate, String prefix) {
    for (int s = from; s < to; ) {
      int second = s / rate;
      int end = (int) Math.min(to, (long) (second + 1) * rate);
      List<TaskInstance<?>> batch = new ArrayList<>(end - s);
      for (int i = s; i < end; i++) batch.add(task.instance(prefix + i));
      scheduler.scheduleBatch(batch, Instant.ofEpochMilli(baseMs + second * 1000L));
      s = end;
    }
  }

  @Override
  public void copy(Connection c, int from, int to, long baseMs, int rate, String prefix)
      throws SQLException {
    Peer.copySql(
        c,
        "insert into scheduled_tasks (execution_time, task_instance, task_name, task_data, picked,"
            + " picked_by, last_success, last_failure, consecutive_failures, last_heartbeat,"
            + " version, priority)"
            + " select to_timestamp((?::bigint + (g / ?::int)::bigint * 1000) / 1000.0), ? || g,"
            + " task_name, task_data, picked, picked_by, last_success, last_failure,"
            + " consecutive_failures, last_heartbeat, version, priority"
            + " from scheduled_tasks, generate_series(?, ?) g"
            + " where task_name = 'bench' and task_instance = ? || '0'",
        from,
        to,
        baseMs,
        rate,
        prefix);
  }

  @Override
  public void start() {
    scheduler.start();
  }

  @Override
  public long pending(Connection c, String prefix) throws SQLException {
    return Peer.count(
        c, "select count(*) from scheduled_tasks where task_instance like '" + prefix + "%'");
  }

  @Override
  public void stop() {
    scheduler.stop();
    pool.close();
  }
}
