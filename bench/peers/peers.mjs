// bench/peers/peers.mjs — the peers' side of `bench/run.sh` (bench/README.md#peers-phase-9):
// graphile-worker and pg-boss, pinned in bench/peers/package.json, measured on the bench's own
// PostgreSQL with the same shapes as sqlstreams_bench, each in its own schema:
//   enqueue  batches of 500 jobs of a 100 B JSON payload for --enqueue-seconds
//            (graphile-worker addJobs, pg-boss insert);
//   drain    a --backlog of those jobs pre-filled, then one worker process with its batched
//            options (graphile-worker localQueue + batched completion, pg-boss batchSize +
//            burstWhenBatchFull) runs a no-op handler; the clock stops when no job is left
//            incomplete in the database (graphile: the job row deleted; pg-boss: state completed);
//   pickup   one job per call at --latency-rate/s for --latency-seconds with LISTEN/NOTIFY on
//            (graphile-worker always listens; pg-boss useListenNotify + a notify queue):
//            handler start − enqueue resolved, p50/p99/max after a 1 s warm-up;
//   pickup under load  the same while a background enqueuer adds --load-rate jobs/s in batches
//            of 100, paced (the runtime's phase pickup_load; its 4 groups read each message,
//            a peer's worker runs each job once): also the load rate reached and whether the
//            worker kept up (jobs left when the pickup ended).
// Prints one JSON object on stdout: {"peers": [{name, version, enqueue_per_s, drain_per_s,
// pickup_p50_ms, pickup_p99_ms, pickup_max_ms, pickup_n, load_pickup_p50_ms, load_pickup_p99_ms,
// load_pickup_n, load_pickup_missing, load_per_s, load_left, settings}], "errors": [...]}; progress
// on stderr. sqlstreams_bench --peers FILE turns it into rows of its table.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { parseArgs } from "node:util";

const require = createRequire(import.meta.url);
const pg = require("pg");

const { values: args } = parseArgs({
  options: {
    url: { type: "string" },
    backlog: { type: "string", default: "100000" },
    "enqueue-seconds": { type: "string", default: "5" },
    "latency-seconds": { type: "string", default: "10" },
    "latency-rate": { type: "string", default: "200" },
    "load-rate": { type: "string", default: "10000" },
    only: { type: "string", default: "graphile-worker,pg-boss" },
  },
});
if (!args.url) {
  console.error("peers.mjs: --url is required");
  process.exit(2);
}
const backlog = Number(args.backlog);
const enqueueSeconds = Number(args["enqueue-seconds"]);
const latencySeconds = Number(args["latency-seconds"]);
const latencyRate = Number(args["latency-rate"]);
const loadRate = Number(args["load-rate"]);
const kLoadBatch = 100;
const kBatch = 500;
const log = (...a) => console.error("   peers:", ...a);
const now = () => performance.now();
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
// 100 B of JSON, like the bench's make_payload(100, seq).
const payload = (seq) => {
  const head = `{"seq":${seq},"pad":"`;
  return JSON.parse(head + "x".repeat(100 - head.length - 2) + '"}');
};

// The installed version (package exports may hide package.json from require()).
function version(pkg) {
  const file = new URL(`./node_modules/${pkg}/package.json`, import.meta.url);
  return JSON.parse(readFileSync(file, "utf8")).version;
}

async function waitUntil(pool, sql, params, done, timeoutMs) {
  const deadline = now() + timeoutMs;
  for (;;) {
    const { rows } = await pool.query(sql, params);
    if (done(Number(rows[0].n))) return;
    if (now() > deadline) throw new Error(`timed out waiting for: ${sql}`);
    await sleep(20);
  }
}

function percentiles(samples) {
  samples.sort((a, b) => a - b);
  const at = (p) => samples[Math.min(samples.length - 1, Math.floor(p * samples.length))];
  return { p50: at(0.5), p99: at(0.99), max: samples[samples.length - 1], n: samples.length };
}

// Paced single enqueues; `stamps` maps the job's seq to the time its handler started.
async function pickup(enqueueOne, stamps) {
  const sent = new Map();
  const t0 = now();
  const total = Math.floor(latencySeconds * latencyRate);
  for (let i = 0; i < total; i++) {
    const due = t0 + (i * 1000) / latencyRate;
    const wait = due - now();
    if (wait > 0) await sleep(wait);
    await enqueueOne(i);
    sent.set(i, now());
  }
  const deadline = now() + 30_000;
  while (stamps.size < total && now() < deadline) await sleep(20);
  const warm = Math.floor(latencyRate);  // the first second
  const samples = [];
  let missing = 0;
  const end = now();
  for (const [i, at] of sent) {
    if (i < warm) continue;
    // A job not picked up within the 30 s counts with what it waited so far (a lower bound):
    // left out, it would make a worker that falls behind look fast.
    if (stamps.has(i)) samples.push(stamps.get(i) - at);
    else { samples.push(end - at); missing++; }
  }
  if (samples.length === missing) throw new Error("no job was picked up");
  return { ...percentiles(samples), missing };
}

// pickup() while `enqueueMany(n)` adds kLoadBatch jobs every kLoadBatch / loadRate s (paced, as
// the runtime's steady_load); `left()` counts the jobs not yet done when the pickup ended.
async function pickupUnderLoad(enqueueOne, enqueueMany, stamps, left) {
  let loading = true, loaded = 0;
  const t0 = now();
  const loader = (async () => {
    for (let i = 0; loading; i++) {
      const wait = t0 + (i * kLoadBatch * 1000) / loadRate - now();
      if (wait > 0) await sleep(wait);
      await enqueueMany(kLoadBatch);
      loaded += kLoadBatch;
    }
  })();
  try {
    stamps.clear();
    const lat = await pickup(enqueueOne, stamps);
    return { ...lat, per_s: loaded / ((now() - t0) / 1000), left: await left() };
  } finally {
    loading = false;
    await loader;
  }
}

function recordUnderLoad(result, lat, name) {
  Object.assign(result, { load_pickup_p50_ms: lat.p50, load_pickup_p99_ms: lat.p99,
                          load_pickup_max_ms: lat.max, load_pickup_n: lat.n,
                          load_per_s: lat.per_s, load_left: lat.left,
                          load_pickup_missing: lat.missing });
  log(`${name} pickup under ${Math.round(lat.per_s)}/s of load: p50 ${lat.p50.toFixed(1)} ms ` +
      `p99 ${lat.p99.toFixed(1)} ms, ${lat.missing} not picked up in 30 s, ${lat.left} jobs left`);
}

async function graphileWorker(pool) {
  const gw = require("graphile-worker");
  const schema = `gw_bench_${Date.now()}`;
  const common = { connectionString: args.url, schema, noHandleSignals: true };
  const utils = await gw.makeWorkerUtils(common);
  await utils.migrate();
  const settings = { concurrency: 10, localQueue: 500, completeJobBatchDelay: 0, pollInterval: 2000 };
  const result = { name: "graphile-worker", version: version("graphile-worker"), settings };
  try {
    // enqueue
    let seq = 0, done = 0;
    const t0 = now();
    while ((now() - t0) / 1000 < enqueueSeconds) {
      const jobs = [];
      for (let i = 0; i < kBatch; i++) jobs.push({ identifier: "noop", payload: payload(seq++) });
      await utils.addJobs(jobs);
      done += kBatch;
    }
    result.enqueue_per_s = done / ((now() - t0) / 1000);
    log(`graphile-worker enqueue ${Math.round(result.enqueue_per_s)}/s`);
    await pool.query(`DELETE FROM ${schema}._private_jobs`);
    // drain
    for (let filled = 0; filled < backlog; filled += kBatch) {
      const jobs = [];
      for (let i = 0; i < Math.min(kBatch, backlog - filled); i++) {
        jobs.push({ identifier: "noop", payload: payload(filled + i) });
      }
      await utils.addJobs(jobs);
    }
    await pool.query("CHECKPOINT");
    const count = `SELECT count(*) AS n FROM ${schema}._private_jobs`;
    const stamps = new Map();
    let measuring = false;
    const t1 = now();
    const runner = await gw.run({
      ...common,
      concurrency: settings.concurrency,
      pollInterval: settings.pollInterval,
      preset: {
        worker: {
          localQueue: { size: settings.localQueue },
          completeJobBatchDelay: settings.completeJobBatchDelay,
        },
      },
      logger: new gw.Logger(() => () => {}),
      taskList: {
        noop: async (p) => {
          if (measuring && p.seq >= 0) stamps.set(p.seq, now());
        },
      },
    });
    await waitUntil(pool, count, [], (n) => n === 0, 600_000);
    result.drain_per_s = backlog / ((now() - t1) / 1000);
    log(`graphile-worker drain ${Math.round(result.drain_per_s)}/s`);
    // pickup (the same running worker: it LISTENs for new jobs)
    measuring = true;
    const lat = await pickup((i) => utils.addJob("noop", { seq: i }), stamps);
    Object.assign(result, { pickup_p50_ms: lat.p50, pickup_p99_ms: lat.p99,
                            pickup_max_ms: lat.max, pickup_n: lat.n });
    log(`graphile-worker pickup p50 ${lat.p50.toFixed(1)} ms p99 ${lat.p99.toFixed(1)} ms`);
    // pickup under load (load jobs carry no seq: only the paced ones are stamped)
    const loadJobs = (n) => {
      const jobs = [];
      for (let i = 0; i < n; i++) jobs.push({ identifier: "noop", payload: payload(-1) });
      return utils.addJobs(jobs);
    };
    const leftNow = async () => Number((await pool.query(count)).rows[0].n);
    recordUnderLoad(result,
                    await pickupUnderLoad((i) => utils.addJob("noop", { seq: i }), loadJobs,
                                          stamps, leftNow),
                    "graphile-worker");
    await runner.stop();
  } finally {
    await utils.release();
    await pool.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
  }
  return result;
}

async function pgBoss(pool) {
  const { PgBoss } = await import("pg-boss").then((m) => (m.PgBoss ? m : { PgBoss: m.default }));
  const schema = `pgb_bench_${Date.now()}`;
  const boss = new PgBoss({ connectionString: args.url, schema, useListenNotify: true,
                            supervise: false, schedule: false });
  boss.on("error", (e) => log("pg-boss error:", e.message));
  await boss.start();
  const queue = "noop";
  await boss.createQueue(queue, { notify: true });
  const settings = { batchSize: 500, localConcurrency: 2, burstWhenBatchFull: true,
                     pollingIntervalSeconds: 0.5 };
  const result = { name: "pg-boss", version: version("pg-boss"), settings };
  try {
    let seq = 0, done = 0;
    const t0 = now();
    while ((now() - t0) / 1000 < enqueueSeconds) {
      const jobs = [];
      for (let i = 0; i < kBatch; i++) jobs.push({ data: payload(seq++) });
      await boss.insert(queue, jobs);
      done += kBatch;
    }
    result.enqueue_per_s = done / ((now() - t0) / 1000);
    log(`pg-boss enqueue ${Math.round(result.enqueue_per_s)}/s`);
    await pool.query(`DELETE FROM ${schema}.job WHERE name = $1`, [queue]);
    for (let filled = 0; filled < backlog; filled += kBatch) {
      const jobs = [];
      for (let i = 0; i < Math.min(kBatch, backlog - filled); i++) {
        jobs.push({ data: payload(filled + i) });
      }
      await boss.insert(queue, jobs);
    }
    await pool.query("CHECKPOINT");
    const left = `SELECT count(*) AS n FROM ${schema}.job WHERE name = $1 AND state <> 'completed'`;
    const stamps = new Map();
    let measuring = false;
    const t1 = now();
    await boss.work(queue, settings, async (jobs) => {
      if (measuring) for (const j of jobs) if (j.data.seq >= 0) stamps.set(j.data.seq, now());
    });
    await waitUntil(pool, left, [queue], (n) => n === 0, 600_000);
    result.drain_per_s = backlog / ((now() - t1) / 1000);
    log(`pg-boss drain ${Math.round(result.drain_per_s)}/s`);
    measuring = true;
    const lat = await pickup((i) => boss.send(queue, { seq: i }), stamps);
    Object.assign(result, { pickup_p50_ms: lat.p50, pickup_p99_ms: lat.p99,
                            pickup_max_ms: lat.max, pickup_n: lat.n });
    log(`pg-boss pickup p50 ${lat.p50.toFixed(1)} ms p99 ${lat.p99.toFixed(1)} ms`);
    const loadJobs = (n) => {
      const jobs = [];
      for (let i = 0; i < n; i++) jobs.push({ data: payload(-1) });
      return boss.insert(queue, jobs);
    };
    const leftNow = async () => Number((await pool.query(left, [queue])).rows[0].n);
    recordUnderLoad(result,
                    await pickupUnderLoad((i) => boss.send(queue, { seq: i }), loadJobs, stamps,
                                          leftNow),
                    "pg-boss");
  } finally {
    await boss.stop({ graceful: false, wait: true });
    await pool.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
  }
  return result;
}

const pool = new pg.Pool({ connectionString: args.url, max: 2 });
const out = { peers: [], errors: [] };
for (const [name, fn] of [["graphile-worker", graphileWorker], ["pg-boss", pgBoss]]) {
  if (!args.only.split(",").includes(name)) continue;
  try {
    out.peers.push(await fn(pool));
  } catch (e) {
    log(`${name} failed: ${e.stack || e}`);
    out.errors.push(`${name}: ${e.message || e}`);
  }
}
await pool.end();
process.stdout.write(JSON.stringify(out) + "\n");
process.exit(out.peers.length > 0 ? 0 : 1);
