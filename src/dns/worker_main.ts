/**
 * Entry of one `sluice dns` worker process, forked by the primary
 * (workers.ts): argv = config file, worker index, worker count. The worker
 * loads and validates config and zones itself (the primary already
 * accepted them), then serves (DnsDaemon.serveAsWorker).
 */
import { DnsDaemon } from './daemon.ts';

const [file, index, count] = process.argv.slice(2);
if (file === undefined || index === undefined || count === undefined) {
  console.error('worker_main: forked by `sluice dns` with CONFIG INDEX COUNT');
  process.exit(2);
}
try {
  const d = new DnsDaemon(file);
  await d.serveAsWorker(Number(index), Number(count));
} catch (err) {
  if (process.connected) process.send?.({ t: 'failed', error: (err as Error).message });
  process.exit(1);
}
