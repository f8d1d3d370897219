package horae.bench;

import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.SQLException;
import java.util.Date;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import org.quartz.Job;
import org.quartz.JobBuilder;
import org.quartz.JobDetail;
import org.quartz.JobExecutionContext;
import org.quartz.Scheduler;
import org.quartz.SimpleScheduleBuilder;
import org.quartz.Trigger;
import org.quartz.TriggerBuilder;
import org.quartz.impl.StdSchedulerFactory;

/** Quartz with the clustered JDBC job store on PostgreSQL and its documented throughput tuning. */
final class QuartzPeer implements Peer.System_ {
  static final int THREADS = 50;
  static final int BATCH = 50;
  static final int POOL = THREADS + 3;

  /** The one durable job every trigger fires; records the execution. */
  public static final class Count implements Job {
    @Override
    public void execute(JobExecutionContext context) {
      Peer.record(Peer.indexOf(context.getTrigger().getKey().getName()));
    }
  }

  private final Properties props = new Properties();
  private Scheduler scheduler;
  private final JobDetail job =
      JobBuilder.newJob(Count.class).withIdentity("count", "bench").storeDurably().build();

  QuartzPeer(String url, String user) {
    props.setProperty("org.quartz.scheduler.instanceName", "bench");
    props.setProperty("org.quartz.scheduler.instanceId", "AUTO");
    props.setProperty("org.quartz.scheduler.idleWaitTime", "1000");
    props.setProperty("org.quartz.scheduler.batchTriggerAcquisitionMaxCount", "" + BATCH);
    props.setProperty("org.quartz.threadPool.threadCount", "" + THREADS);
    props.setProperty("org.quartz.jobStore.class", "org.quartz.impl.jdbcjobstore.JobStoreTX");
    props.setProperty(
        "org.quartz.jobStore.driverDelegateClass",
        "org.quartz.impl.jdbcjobstore.PostgreSQLDelegate");
    props.setProperty("org.quartz.jobStore.isClustered", "true");
    props.setProperty("org.quartz.jobStore.clusterCheckinInterval", "5000");
    props.setProperty("org.quartz.jobStore.acquireTriggersWithinLock", "true");
    props.setProperty("org.quartz.jobStore.misfireThreshold", "600000");
    props.setProperty("org.quartz.jobStore.dataSource", "db");
    props.setProperty("org.quartz.dataSource.db.provider", "hikaricp");
    props.setProperty("org.quartz.dataSource.db.driver", "org.postgresql.Driver");
    props.setProperty("org.quartz.dataSource.db.URL", url);
    props.setProperty("org.quartz.dataSource.db.user", user);
    props.setProperty("org.quartz.dataSource.db.password", "");
    props.setProperty("org.quartz.dataSource.db.maxConnections", "" + POOL);
  }

  @Override
  public String tuning() {
    return "Quartz 2.5.2, JobStoreTX + PostgreSQLDelegate, isClustered=true, threadCount="
        + THREADS
        + ", batchTriggerAcquisitionMaxCount="
        + BATCH
        + ", acquireTriggersWithinLock=true, idleWaitTime=1000ms, misfireThreshold=600s"
        + " (late triggers fire on the normal path), HikariCP 7.1.0 maxConnections="
        + POOL
        + ", one durable job, SimpleTriggers (API inserts by scheduleJobs)";
  }

  @Override
  public void createTables(Connection c) throws Exception {
    String sql;
    try (InputStream in =
        Scheduler.class.getResourceAsStream("/org/quartz/impl/jdbcjobstore/tables_postgres.sql")) {
      sql = new String(in.readAllBytes(), StandardCharsets.UTF_8);
    }
    StringBuilder body = new StringBuilder();
    for (String line : sql.split("\n")) {
      if (!line.trim().startsWith("--")) body.append(line).append('\n');
    }
    for (String stmt : body.toString().split(";")) {
      String s = stmt.trim();
      if (!s.isEmpty() && !s.equalsIgnoreCase("commit")) Peer.exec(c, s);
    }
  }

  @Override
  public void build() throws Exception {
    scheduler = new StdSchedulerFactory(props).getScheduler();
    scheduler.addJob(job, true);
  }

  @Override
  public void insert(int from, int to, long dueMs, String prefix) throws Exception {
    Set<Trigger> triggers = new HashSet<>();
    for (int i = from; i < to; i++) {
      triggers.add(
          TriggerBuilder.newTrigger()
              .withIdentity(prefix + i, "bench")
              .forJob(job)
              .startAt(new Date(dueMs))
              .withSchedule(SimpleScheduleBuilder.simpleSchedule().withRepeatCount(0))
              .build());
    }
    Map<JobDetail, Set<? extends Trigger>> map = new HashMap<>();
    map.put(job, triggers);
    scheduler.scheduleJobs(map, true);
  }

  @Override
  public void copy(Connection c, int from, int to, String prefix) throws SQLException {
    Peer.copySql(
        c,
        "insert into qrtz_triggers (sched_name, trigger_name, trigger_group, job_name, job_group,"
            + " description, next_fire_time, prev_fire_time, priority, trigger_state, trigger_type,"
            + " start_time, end_time, calendar_name, misfire_instr, job_data)"
            + " select sched_name, ? || g, trigger_group, job_name, job_group, description,"
            + " next_fire_time, prev_fire_time, priority, trigger_state, trigger_type, start_time,"
            + " end_time, calendar_name, misfire_instr, job_data"
            + " from qrtz_triggers, generate_series(?, ?) g"
            + " where sched_name = 'bench' and trigger_name = ? || '0'",
        from,
        to,
        prefix);
    Peer.copySql(
        c,
        "insert into qrtz_simple_triggers (sched_name, trigger_name, trigger_group, repeat_count,"
            + " repeat_interval, times_triggered) select sched_name, ? || g, trigger_group,"
            + " repeat_count, repeat_interval, times_triggered"
            + " from qrtz_simple_triggers, generate_series(?, ?) g"
            + " where sched_name = 'bench' and trigger_name = ? || '0'",
        from,
        to,
        prefix);
  }

  @Override
  public void start() throws Exception {
    scheduler.start();
  }

  @Override
  public void arm(Connection c, long baseMs, int rate) throws SQLException {
    Peer.armSql(
        c,
        "update qrtz_triggers set (next_fire_time, start_time) = (select d, d from (select"
            + " ?::bigint + (substr(trigger_name, 2)::int / ?) * 1000 as d) due)"
            + " where sched_name = 'bench' and trigger_name like 't%'",
        baseMs,
        rate);
  }

  @Override
  public long pending(Connection c) throws SQLException {
    return Peer.count(
            c,
            "select count(*) from qrtz_triggers where sched_name = 'bench'"
                + " and trigger_name like 't%'")
        + Peer.count(c, "select count(*) from qrtz_fired_triggers where sched_name = 'bench'");
  }

  @Override
  public void stop() throws Exception {
    scheduler.shutdown(true);
  }
}
