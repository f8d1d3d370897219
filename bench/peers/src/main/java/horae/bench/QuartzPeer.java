package horae.bench;

import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.Date;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import org.quartz.Job;
import org.quartz.JobBuilder;
import org.quartz.JobDetail;
import org.quartz.JobExecutionContext;
import org.quartz.JobExecutionException;
import org.quartz.Scheduler;
import org.quartz.SimpleScheduleBuilder;
import org.quartz.Trigger;
import org.quartz.TriggerBuilder;
import org.quartz.impl.StdSchedulerFactory;

/**
 * Quartz with the clustered JDBC job store on PostgreSQL, with the settings bench/compare.py hands
 * it: {@code schedulers} distinct schedulers in this JVM (Quartz's advice for thousands of
 * short-running jobs: partition them over distinct schedulers, each with its own lock; 1 is the
 * plain setup), each with {@code threads} worker threads, {@code batch} triggers acquired at once
 * (with {@code acquireTriggersWithinLock}, as Quartz advises for a batch above 1), a HikariCP pool
 * of {@code threads + 3} and {@code idle_ms}; the misfire threshold is the run's cap plus 60 s, so
 * a late trigger fires on the normal path.
 */
final class QuartzPeer implements Peer.System_ {
  /** The one durable job every trigger fires: the delivery. */
  public static final class Deliver implements Job {
    @Override
    public void execute(JobExecutionContext context) throws JobExecutionException {
      try {
        Peer.execute(context.getTrigger().getKey().getName());
      } catch (Exception e) {
        throw new JobExecutionException(e);
      }
    }
  }

  private final int schedulers;
  private final int threads;
  private final int batch;
  private final int idleMs;
  private final long misfireMs;
  private final List<Properties> props = new ArrayList<>();
  private final List<Scheduler> running = new ArrayList<>();
  private final List<JobDetail> jobs = new ArrayList<>();

  QuartzPeer(String url, String user, Map<String, String> settings, int capS) {
    schedulers = Peer.intSetting(settings, "schedulers");
    threads = Peer.intSetting(settings, "threads");
    batch = Peer.intSetting(settings, "batch");
    idleMs = Peer.intSetting(settings, "idle_ms");
    misfireMs = (capS + 60) * 1000L;
    for (int k = 0; k < schedulers; k++) {
      Properties p = new Properties();
      p.setProperty("org.quartz.scheduler.instanceName", "bench" + k);
      p.setProperty("org.quartz.scheduler.instanceId", "AUTO");
      p.setProperty("org.quartz.scheduler.idleWaitTime", "" + idleMs);
      p.setProperty("org.quartz.scheduler.batchTriggerAcquisitionMaxCount", "" + batch);
      p.setProperty("org.quartz.threadPool.threadCount", "" + threads);
      p.setProperty("org.quartz.jobStore.class", "org.quartz.impl.jdbcjobstore.JobStoreTX");
      p.setProperty(
          "org.quartz.jobStore.driverDelegateClass",
          "org.quartz.impl.jdbcjobstore.PostgreSQLDelegate");
      p.setProperty("org.quartz.jobStore.isClustered", "true");
      p.setProperty("org.quartz.jobStore.clusterCheckinInterval", "5000");
      p.setProperty("org.quartz.jobStore.acquireTriggersWithinLock", "true");
      p.setProperty("org.quartz.jobStore.misfireThreshold", "" + misfireMs);
      p.setProperty("org.quartz.jobStore.dataSource", "db");
      p.setProperty("org.quartz.dataSource.db.provider", "hikaricp");
      p.setProperty("org.quartz.dataSource.db.driver", "org.postgresql.Driver");
      p.setProperty("org.quartz.dataSource.db.URL", url);
      p.setProperty("org.quartz.dataSource.db.user", user);
      p.setProperty("org.quartz.dataSource.db.password", "");
      p.setProperty("org.quartz.dataSource.db.maxConnections", "" + (threads + 3));
      props.add(p);
      jobs.add(
          JobBuilder.newJob(Deliver.class).withIdentity("deliver", "bench").storeDurably().build());
    }
  }

  @Override
  public String tuning() {
    return String.format(
        Locale.ROOT,
        "Quartz 2.5.2, JobStoreTX + PostgreSQLDelegate, isClustered=true, schedulers=%d"
            + " (distinct, partitioned by task), threadCount=%d, batchTriggerAcquisitionMaxCount=%d,"
            + " acquireTriggersWithinLock=true, idleWaitTime=%dms, misfireThreshold=%ds (above the"
            + " cap), HikariCP 7.1.0 maxConnections=%d each, one durable job per scheduler,"
            + " SimpleTriggers; handler: signed POST via java.net.http.HttpClient (HTTP/1.1,"
            + " pooled), completes after the 2xx",
        schedulers,
        threads,
        batch,
        idleMs,
        misfireMs / 1000,
        threads + 3);
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
    for (int k = 0; k < schedulers; k++) {
      Scheduler scheduler = new StdSchedulerFactory(props.get(k)).getScheduler();
      scheduler.addJob(jobs.get(k), true);
      running.add(scheduler);
    }
  }

  @Override
  public void insert(int from, int to, long baseMs, int rate, String prefix) throws Exception {
    List<Set<Trigger>> triggers = new ArrayList<>();
    for (int k = 0; k < schedulers; k++) triggers.add(new HashSet<>());
    for (int i = from; i < to; i++) {
      int k = i % schedulers;
      triggers
          .get(k)
          .add(
              TriggerBuilder.newTrigger()
                  .withIdentity(prefix + i, "bench")
                  .forJob(jobs.get(k))
                  .startAt(new Date(baseMs + (long) (i / rate) * 1000L))
                  .withSchedule(SimpleScheduleBuilder.simpleSchedule().withRepeatCount(0))
                  .build());
    }
    for (int k = 0; k < schedulers; k++) {
      Map<JobDetail, Set<? extends Trigger>> map = new HashMap<>();
      map.put(jobs.get(k), triggers.get(k));
      running.get(k).scheduleJobs(map, true);
    }
  }

  @Override
  public void copy(Connection c, int from, int to, long baseMs, int rate, String prefix)
      throws SQLException {
    String params =
        "with p as (select ?::bigint as base, ?::int as rate, ?::text as prefix, ?::int as lo,"
            + " ?::int as hi, ?::text as tmpl) ";
    String template =
        " from p, generate_series(p.lo, p.hi) g, %s t where t.sched_name = 'bench' || (g %% "
            + schedulers
            + ") and t.trigger_name = p.tmpl || (g %% "
            + schedulers
            + ")";
    Peer.copySql(
        c,
        params
            + "insert into qrtz_triggers (next_fire_time, start_time, trigger_name, sched_name,"
            + " trigger_group, job_name, job_group, description, prev_fire_time, priority,"
            + " trigger_state, trigger_type, end_time, calendar_name, misfire_instr, job_data)"
            + " select p.base + (g / p.rate)::bigint * 1000, p.base + (g / p.rate)::bigint * 1000,"
            + " p.prefix || g, t.sched_name, t.trigger_group, t.job_name, t.job_group,"
            + " t.description, t.prev_fire_time, t.priority, t.trigger_state, t.trigger_type,"
            + " t.end_time, t.calendar_name, t.misfire_instr, t.job_data"
            + String.format(template, "qrtz_triggers"),
        from,
        to,
        baseMs,
        rate,
        prefix);
    Peer.copySql(
        c,
        params
            + "insert into qrtz_simple_triggers (sched_name, trigger_name, trigger_group,"
            + " repeat_count, repeat_interval, times_triggered) select t.sched_name,"
            + " p.prefix || g, t.trigger_group, t.repeat_count, t.repeat_interval,"
            + " t.times_triggered"
            + String.format(template, "qrtz_simple_triggers"),
        from,
        to,
        baseMs,
        rate,
        prefix);
  }

  @Override
  public void start() throws Exception {
    for (Scheduler s : running) s.start();
  }

  @Override
  public long pending(Connection c, String prefix) throws SQLException {
    return Peer.count(
            c, "select count(*) from qrtz_triggers where trigger_name like '" + prefix + "%'")
        + Peer.count(
            c,
            "select count(*) from qrtz_fired_triggers where trigger_name like '" + prefix + "%'");
  }

  @Override
  public void stop() throws Exception {
    for (Scheduler s : running) s.shutdown(true);
  }
}
