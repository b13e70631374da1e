/**
 * The WAN namespace's delay program: holds each queued packet for the
 * one-way delay (µs) in its mark, then accepts it. Started by the testbed
 * inside <prefix>-wan; the mangle rules (iptables and ip6tables alike) mark
 * packets per client/cluster path and queue marked ones (with --queue-bypass, so the site still works,
 * undelayed, if this program is not running).
 *
 *   node scripts/testbed/wan-delay.ts --queue 0 --ready-file FILE
 */
import { writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { componentLogger } from '../../src/log/logger.ts';
import { NfQueue, Verdict } from '../../src/nfqueue/queue.ts';
import { DelayLine, intervalTicker } from './delay-line.ts';

const { values } = parseArgs({
  options: { queue: { type: 'string', default: '0' }, 'ready-file': { type: 'string' } },
});
const log = componentLogger('testbed-wan-delay');

// The closures below run only after `queue` is assigned (first packet).
const line = new DelayLine({
  capacityPerClass: 65536,
  maxClasses: 64,
  now: () => performance.now(),
  ticker: intervalTicker(),
  release: (id) => {
    queue.verdict(id, Verdict.Accept);
  },
  afterRelease: () => {
    queue.flush();
  },
});

const queue: NfQueue = NfQueue.open({
  queue: Number(values.queue),
  maxLength: 131072,
  failOpen: true,
  // The delay needs only ids and marks; copy just the IP header.
  copyRange: 64,
  onBatch(batch, q) {
    for (let i = 0; i < batch.count; i++) {
      const us = batch.mark(i);
      if (us === 0 || !line.push(batch.id(i), us)) q.verdict(batch.id(i), Verdict.Accept);
    }
  },
  onError(err) {
    log.error({ err }, 'queue error');
  },
});

if (values['ready-file'] !== undefined) writeFileSync(values['ready-file'], `${process.pid}\n`);
log.info({ queue: queue.queue }, 'delay line ready');

function stop(signal: string): void {
  line.releaseAll();
  queue.flush();
  log.info({ signal, ...queue.stats(), released: line.released, overflows: line.overflows }, 'stopping');
  queue.close();
  process.exit(0);
}
process.on('SIGTERM', () => {
  stop('SIGTERM');
});
process.on('SIGINT', () => {
  stop('SIGINT');
});
