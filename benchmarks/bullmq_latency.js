// BullMQ's side of the pickup-latency benchmark (benchmarks/latency.py runs it).
//
//   node bullmq_latency.js --port P --queue Q --samples N [--warmup W]
//
// Forks one process holding one BullMQ Worker (concurrency 1, a no-op processor, BullMQ's
// defaults otherwise), waits until it is ready and idle, then, one job at a time on an idle
// queue: t0 = now; Queue.add; await job.waitUntilFinished(QueueEvents); t1 = now. Pickup =
// the job's processedOn (set by the worker when it takes the job, ms) − t0; result = t1 − t0.
// Prints one JSON line: {"event": "result", "pickup_ms": [...], "result_ms": [...]}, the first
// W samples dropped (connection and script warm-up).
"use strict";

const { fork } = require("node:child_process");
const { Queue, QueueEvents, Worker, Job } = require("bullmq");
const { now, parseArgs, connection } = require("./bullmq_common");

async function child(args) {
  const worker = new Worker(args.queue, async () => "ok", { connection: connection(args) });
  worker.on("error", (err) => process.send({ error: String(err) }));
  await worker.waitUntilReady();
  process.on("message", async (msg) => {
    if (msg === "stop") {
      await worker.close();
      process.exit(0);
    }
  });
  process.send({ ready: true });
}

async function parent(args) {
  const samples = Number(args.samples);
  const warmup = Number(args.warmup || 10);
  const conn = connection(args);
  const queue = new Queue(args.queue, { connection: conn });
  const events = new QueueEvents(args.queue, { connection: conn });
  await events.waitUntilReady();
  const worker = fork(__filename, [...process.argv.slice(2), "--child", "1"]);
  await new Promise((resolve, reject) => {
    worker.on("message", (msg) => (msg.error ? reject(new Error(msg.error)) : resolve()));
    worker.once("exit", (code) => reject(new Error(`worker exited with ${code}`)));
  });
  await new Promise((resolve) => setTimeout(resolve, 500)); // the worker is blocked waiting
  const pickup = [];
  const result = [];
  for (let i = 0; i < warmup + samples; i += 1) {
    const t0 = now();
    const job = await queue.add("noop", { i });
    await job.waitUntilFinished(events, 30000);
    const t1 = now();
    const done = await Job.fromId(queue, job.id);
    if (i >= warmup) {
      pickup.push(done.processedOn - t0);
      result.push(t1 - t0);
    }
  }
  worker.send("stop");
  await events.close();
  await queue.obliterate({ force: true });
  await queue.close();
  console.log(JSON.stringify({ event: "result", pickup_ms: pickup, result_ms: result }));
}

const args = parseArgs(process.argv.slice(2), ["port", "queue", "samples"]);
(args.child ? child(args) : parent(args)).catch((err) => {
  console.error(`bullmq_latency: ${err.message || err}`);
  process.exit(1);
});
