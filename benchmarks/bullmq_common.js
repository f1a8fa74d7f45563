// What the BullMQ drivers (bullmq_bench.js, bullmq_latency.js) share: the clock, their
// command line (--name value pairs) and the connection to the run's redis-server.
"use strict";

const { performance } = require("node:perf_hooks");

const now = () => performance.timeOrigin + performance.now(); // epoch ms, sub-ms

function parseArgs(argv, required) {
  const out = {};
  for (let i = 0; i < argv.length; i += 2) {
    if (!argv[i].startsWith("--") || argv[i + 1] === undefined) {
      throw new Error(`bad argument ${argv[i]}: expected --name value pairs`);
    }
    out[argv[i].slice(2)] = argv[i + 1];
  }
  for (const key of required) {
    if (out[key] === undefined) throw new Error(`missing --${key}`);
  }
  return out;
}

function connection(args) {
  return { host: args.host || "127.0.0.1", port: Number(args.port) };
}

module.exports = { now, parseArgs, connection };
