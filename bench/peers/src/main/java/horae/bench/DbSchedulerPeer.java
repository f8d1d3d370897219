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

/** db-scheduler with its documented throughput tuning: a HikariCP pool, lock-and-fetch polling. */
final class DbSchedulerPeer implements Peer.System_ {
  static final int THREADS = 50;
  static final int POLL_MS = 100;
  static final int POOL = THREADS + 10;

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

  private final HikariDataSource pool;
  private final OneTimeTask<Void> task =
      Tasks.oneTime("bench").execute((inst, ctx) -> Peer.record(Peer.indexOf(inst.getId())));
  private Scheduler scheduler;

  DbSchedulerPeer(String url, String user) {
    HikariConfig config = new HikariConfig();
    config.setJdbcUrl(url);
    config.setUsername(user);
    config.setMaximumPoolSize(POOL);
    config.setAutoCommit(true);
    pool = new HikariDataSource(config);
  }

  @Override
  public String tuning() {
    return "db-scheduler 16.7.1, one-time tasks, threads="
        + THREADS
        + ", pollUsingLockAndFetch(0.5, 1.0) (SELECT ... FOR UPDATE SKIP LOCKED), pollingInterval="
        + POLL_MS
        + "ms, HikariCP 7.1.0 maximumPoolSize="
        + POOL
        + ", API inserts by scheduleBatch";
  }

  @Override
  public void createTables(Connection c) throws SQLException {
    Peer.exec(c, DDL);
  }

  @Override
  public void build() {
    scheduler =
        Scheduler.create(pool, task)
            .threads(THREADS)
            .pollUsingLockAndFetch(0.5, 1.0)
            .pollingInterval(Duration.ofMillis(POLL_MS))
            .build();
  }

  @Override
  public void insert(int from, int to, long dueMs, String prefix) {
    List<TaskInstance<?>> batch = new ArrayList<>(to - from);
    for (int i = from; i < to; i++) {
      batch.add(task.instance(prefix + i));
    }
    scheduler.scheduleBatch(batch, Instant.ofEpochMilli(dueMs));
  }

  @Override
  public void copy(Connection c, int from, int to, String prefix) throws SQLException {
    Peer.copySql(
        c,
        "insert into scheduled_tasks (task_name, task_instance, task_data, execution_time, picked,"
            + " picked_by, last_success, last_failure, consecutive_failures, last_heartbeat,"
            + " version, priority) select task_name, ? || g, task_data, execution_time, picked,"
            + " picked_by, last_success, last_failure, consecutive_failures, last_heartbeat,"
            + " version, priority from scheduled_tasks, generate_series(?, ?) g"
            + " where task_name = 'bench' and task_instance = ? || '0'",
        from,
        to,
        prefix);
  }

  @Override
  public void start() {
    scheduler.start();
  }

  @Override
  public void arm(Connection c, long baseMs, int rate) throws SQLException {
    Peer.armSql(
        c,
        "update scheduled_tasks set execution_time = to_timestamp(?::bigint / 1000.0)"
            + " + (substr(task_instance, 2)::int / ?) * interval '1 second'"
            + " where task_name = 'bench' and task_instance like 't%'",
        baseMs,
        rate);
  }

  @Override
  public long pending(Connection c) throws SQLException {
    return Peer.count(
        c, "select count(*) from scheduled_tasks where task_instance like 't%'");
  }

  @Override
  public void stop() {
    scheduler.stop();
    pool.close();
  }
}
