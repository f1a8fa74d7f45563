// BullMQ's side of the lifecycle-throughput benchmark (benchmarks/bullmq.py runs it).
//
//   node bullmq_bench.js --port P --queue Q --jobs N --processes K --concurrency C
//
// Adds N no-op jobs with Queue.addBulk (1000 per call), then forks K processes, each one
// BullMQ Worker with concurrency C (autorun off). When every worker is ready it prints
// {"event": "ready"} and waits for a line on stdin; then all workers run. It polls the
// completed count every 20 ms (and the failed count: any failure is an error), prints
// {"event": "done"} the moment all N jobs completed, closes the workers and prints the result:
// jobs ÷ (last completion − first start), process start-up and the enqueue excluded.
// Options are BullMQ's defaults (completed jobs kept, stalled checks on) but concurrency.
"use strict";

const { fork } = require("node:child_process");
const readline = require("node:readline");
const { Queue, Worker } = require("bullmq");
const { now, parseArgs, connection } = require("./bullmq_common");

async function child(args) {
  let first = null;
  let last = null;
  let n = 0;
  const worker = new Worker(args.queue, async () => {
    if (first === null) first = now();
  }, { connection: connection(args), concurrency: Number(args.concurrency), autorun: false });
  worker.on("completed", () => { last = now(); n += 1; });
  worker.on("error", (err) => process.send({ error: String(err) }));
  await worker.waitUntilReady();
  process.on("message", async (msg) => {
    if (msg === "go") {
      worker.run().catch((err) => process.send({ error: String(err) }));
    } else if (msg === "stop") {
      await worker.close();
      process.send({ first, last, n }, () => process.exit(0));
    }
  });
  process.send({ ready: true });
}

function waitFor(children, key) {
  return Promise.all(children.map((c) => new Promise((resolve, reject) => {
    const onMessage = (msg) => {
      if (msg.error) reject(new Error(msg.error));
      else if (msg[key] !== undefined) { c.off("message", onMessage); resolve(msg); }
    };
    c.on("message", onMessage);
    c.once("exit", (code) => { if (code) reject(new Error(`worker exited with ${code}`)); });
  })));
}

async function addJobs(queue, total) {
  for (let lo = 0; lo < total; lo += 1000) {
    const batch = [];
    for (let i = lo; i < Math.min(total, lo + 1000); i += 1) {
      batch.push({ name: "noop", data: { i } });
    }
    await queue.addBulk(batch);
  }
}

async function untilCompleted(queue, total, timeoutMs) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const counts = await queue.getJobCounts("completed", "failed");
    if (counts.failed > 0) throw new Error(`${counts.failed} BullMQ jobs failed`);
    if (counts.completed >= total) return;
    if (Date.now() > deadline) throw new Error(`${counts.completed} of ${total} jobs completed`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

async function parent(args) {
  const total = Number(args.jobs);
  const queue = new Queue(args.queue, { connection: connection(args) });
  await addJobs(queue, total);
  const children = [];
  for (let i = 0; i < Number(args.processes); i += 1) {
    children.push(fork(__filename, [...process.argv.slice(2), "--child", "1"]));
  }
  await waitFor(children, "ready");
  console.log(JSON.stringify({ event: "ready" }));
  const lines = readline.createInterface({ input: process.stdin });
  await new Promise((resolve) => lines.once("line", resolve));
  lines.close();
  const stats = waitFor(children, "n");
  stats.catch(() => {}); // awaited below; a worker's error also stops the polling (exit 1)
  for (const c of children) c.send("go");
  await untilCompleted(queue, total, Number(args.timeout_s || 600) * 1000);
  console.log(JSON.stringify({ event: "done" }));
  for (const c of children) c.send("stop");
  const per = await stats;
  await queue.close();
  const done = per.reduce((s, p) => s + p.n, 0);
  const first = Math.min(...per.filter((p) => p.first !== null).map((p) => p.first));
  const last = Math.max(...per.filter((p) => p.last !== null).map((p) => p.last));
  const seconds = (last - first) / 1000;
  console.log(JSON.stringify({
    event: "result", jobs: done, seconds, jobs_per_s: done / seconds,
    processes: children.length, concurrency: Number(args.concurrency),
    per_process: per.map((p) => p.n),
  }));
}

const args = parseArgs(process.argv.slice(2), ["port", "queue", "jobs", "processes", "concurrency"]);
(args.child ? child(args) : parent(args)).catch((err) => {
  console.error(`bullmq_bench: ${err.message || err}`);
  process.exit(1);
});
