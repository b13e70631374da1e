/**
 * Benchmark program: accept every queued packet, one verdict per packet,
 * batched by the addon. Prints {"ready":true}, then on SIGTERM its stats.
 *   accept-all.ts --queue N
 */
import { parseArgs } from 'node:util';
import { NfQueue, Verdict } from '../../src/nfqueue/queue.ts';

const { values } = parseArgs({ options: { queue: { type: 'string', default: '0' } } });
const queue = NfQueue.open({
  queue: Number(values.queue),
  maxLength: 16384,
  onBatch(batch, q) {
    for (let i = 0; i < batch.count; i++) q.verdict(batch.id(i), Verdict.Accept);
  },
  onError(err) {
    console.error(err);
  },
});
console.log(JSON.stringify({ ready: true }));
process.on('SIGTERM', () => {
  console.log(JSON.stringify(queue.stats()));
  queue.close();
  process.exit(0);
});
