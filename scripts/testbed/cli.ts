/**
 * scripts/testbed: bring the namespace test site up or down.
 *
 *   testbed up     [--prefix P] [--clients N] [--clusters N] [--servers N]
 *                  [--extra-addresses N] [--delay I:K=MS ...] [--blob-mib N]
 *                  [--fronts-per-cluster 1|2] [--dns-servers 1|2] [--ipv6-only-clients N]
 *   testbed down   [--prefix P]
 *   testbed status [--prefix P]
 *   testbed plan   [options of up]     print the topology without building it
 */
import { parseArgs } from 'node:util';
import { describePlan, planTestbed, type TestbedOptions } from './plan.ts';
import { down, status, up } from './testbed.ts';

const USAGE = `usage: testbed up|down|status|plan [--prefix P] [--clients N] [--clusters N] [--servers N]
                 [--extra-addresses N] [--delay CLIENT:CLUSTER=MS ...] [--blob-mib N]
                 [--fronts-per-cluster 1|2] [--dns-servers 1|2] [--ipv6-only-clients N]`;

function main(argv: string[]): number {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      prefix: { type: 'string', default: 'sluice' },
      clients: { type: 'string' },
      clusters: { type: 'string' },
      servers: { type: 'string' },
      'extra-addresses': { type: 'string' },
      delay: { type: 'string', multiple: true },
      'blob-mib': { type: 'string' },
      'fronts-per-cluster': { type: 'string' },
      'dns-servers': { type: 'string' },
      'ipv6-only-clients': { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  const cmd = positionals[0];
  if (values.help === true || cmd === undefined) {
    console.log(USAGE);
    return cmd === undefined && values.help !== true ? 2 : 0;
  }
  const num = (v: string | undefined): number | undefined => (v === undefined ? undefined : Number(v));
  const delaysMs: Record<string, number> = {};
  for (const d of values.delay ?? []) {
    const m = /^(\d+):(\d+)=(\d+(?:\.\d+)?)$/.exec(d);
    if (!m) {
      console.error(`bad --delay "${d}": expected CLIENT:CLUSTER=MS, e.g. 1:2=40`);
      return 2;
    }
    delaysMs[`${m[1] ?? ''}:${m[2] ?? ''}`] = Number(m[3]);
  }
  const opts: TestbedOptions = {
    prefix: values.prefix,
    ...(values.clients !== undefined ? { clients: num(values.clients) } : {}),
    ...(values.clusters !== undefined ? { clusters: num(values.clusters) } : {}),
    ...(values.servers !== undefined ? { serversPerCluster: num(values.servers) } : {}),
    ...(values['extra-addresses'] !== undefined ? { extraClientAddresses: num(values['extra-addresses']) } : {}),
    ...(values['blob-mib'] !== undefined ? { blobMiB: num(values['blob-mib']) } : {}),
    ...(values['fronts-per-cluster'] !== undefined ? { frontsPerCluster: num(values['fronts-per-cluster']) } : {}),
    ...(values['dns-servers'] !== undefined ? { dnsServers: num(values['dns-servers']) } : {}),
    ...(values['ipv6-only-clients'] !== undefined ? { ipv6OnlyClients: num(values['ipv6-only-clients']) } : {}),
    delaysMs,
  } as TestbedOptions;
  switch (cmd) {
    case 'plan':
      console.log(describePlan(planTestbed(opts)));
      return 0;
    case 'up': {
      const st = up(opts);
      console.log(describePlan(st.plan));
      console.log(`run directory: ${st.runDir}`);
      return 0;
    }
    case 'down':
      down(values.prefix);
      console.log(`testbed ${values.prefix} is down`);
      return 0;
    case 'status': {
      const st = status(values.prefix);
      if (!st) {
        console.log(`testbed ${values.prefix} is not up`);
        return 1;
      }
      console.log(describePlan(st.plan));
      return 0;
    }
    default:
      console.error(USAGE);
      return 2;
  }
}

try {
  process.exitCode = main(process.argv.slice(2));
} catch (err) {
  console.error(err instanceof Error ? `${err.name}: ${err.message}` : String(err));
  process.exitCode = 1;
}
