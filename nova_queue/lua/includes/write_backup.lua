--[[ write_backup: leases task b (find_backup) to the claiming worker as its backup attempt,
  beside the attempt running it: its own lease_gen (above every earlier one), attempt id,
  lease deadline and run deadline, in the task's b_* fields; the lease set keeps the task
  under the earlier of the two deadlines. The task stays leased (its in-flight and job
  counts do not change) and its attempt count too: a backup is the scheduler's, not a
  retry. Emits backup_started. Returns the lease (claim-12's reply fields, backup = true).
]]
--- @include "run_limit"
local function write_backup(ctx, K, a, me, b, t_w, now)
  local tid, t = b.tid, b.t
  local job_id, index = job_of(tid), index_of(tid)
  local gen = math.max(int_in(t[BACKUP_TASK.lease_gen], 0, 1e15) or 0,
    int_in(t[BACKUP_TASK.gen_top], 0, 1e15) or 0) + 1
  local attempt_id, predicted = a.attempt_ids[1], t_w * b.cost
  local run_deadline = now + run_limit(a, b.j[BACKUP_JOB.timeout_s], 1, predicted)
  local deadline = math.min(now + a.ttl_ms, run_deadline)
  redis.call('HSET', ctx.prefix .. 'task:' .. tid, 'backups', 1, 'gen_top', gen,
    'b_worker', a.wid, 'b_worker_name', me.name, 'b_backend', me.backend, 'b_host', me.host,
    'b_lease_gen', gen, 'b_attempt_id', attempt_id, 'b_claimed_ms', int(now),
    'b_deadline_ms', int(deadline), 'b_run_deadline_ms', int(run_deadline),
    'b_predicted_s', num(predicted))
  redis.call('ZADD', ctx.leases, math.min(tonumber(t[BACKUP_TASK.deadline_ms]) or deadline,
    deadline), tid)
  redis.call('SADD', K.held, tid)
  redis.call('HSET', K.worker, 'state', 'busy', 'busy_until_ms', int(now + predicted * 1000),
    'last_claim', attempt_id, 'claim_ms', int(now), 'claims', (tonumber(me.claims) or 0) + 1)
  emit(ctx, 'backup_started', 'job', job_id, 'task', index, 'worker', a.wid, 'name', me.name,
    'backend', me.backend, 'lease_gen', gen, 'attempt', t[BACKUP_TASK.attempt_count] or '0',
    'predicted_s', num(predicted), 'of', t[BACKUP_TASK.worker] or '')
  return {
    tid = tid, job = job_id, index = tonumber(index), input = t[BACKUP_TASK.input],
    cost = b.cost, params = b.j[BACKUP_JOB.params] or '{}', lease_gen = gen,
    attempt_id = attempt_id, attempt = tonumber(t[BACKUP_TASK.attempt_count]) or 1,
    deadline_ms = int(deadline), predicted_s = predicted, run_deadline_ms = int(run_deadline),
    backup = true,
  }
end
