/**
 * `sluice schedule`: preview the servers a selection method would choose,
 * one name per line, so an operator can see a weight change before making
 * it. Connections are taken as short (they end before the next one starts)
 * unless --hold is given, in which case each one stays open.
 */
import { parseArgs } from 'node:util';
import { createSelector, METHOD_NAMES, type Backend, type MethodName } from '../front/select/index.ts';
import { formatIPv4Address, parseIPv4Address } from '../packet/address.ts';
import { UsageError, type Command } from './command.ts';

const USAGE = `usage: sluice schedule --method ${METHOD_NAMES.join('|')} --servers NAME=WEIGHT[,NAME=WEIGHT...]
                      [--disable NAME[,NAME...]] [--count N] [--hold] [--client-start IPV4]

  WEIGHT is the lbfactor (byrequests), the weight (leastconn, maglev) or the
  capacity in connections (capacity). maglev picks for successive client
  addresses from --client-start (default 198.18.11.2); --verbose prints them.`;

export function parseServers(spec: string, disabled: readonly string[]): Backend[] {
  const backends: Backend[] = [];
  for (const part of spec.split(',')) {
    const m = /^([A-Za-z0-9_.:-]+)=(\d+(?:\.\d+)?)$/.exec(part.trim());
    if (!m) throw new UsageError(`--servers: "${part}" is not NAME=WEIGHT (e.g. a=25)`);
    const id = m[1] ?? '';
    const w = Number(m[2]);
    if (!(w > 0)) throw new UsageError(`--servers: weight of ${id} must be > 0`);
    if (backends.some((b) => b.id === id)) throw new UsageError(`--servers: ${id} appears twice`);
    backends.push({ id, weight: w, capacity: Infinity, active: 0, load: 0, usable: true });
  }
  for (const d of disabled) {
    const b = backends.find((x) => x.id === d);
    if (!b) throw new UsageError(`--disable: no server named ${d} in --servers`);
    b.usable = false;
  }
  return backends;
}

/** The names chosen for `count` successive new connections. */
export function schedule(method: MethodName, backends: Backend[], count: number, hold: boolean, clientStart: number): string[] {
  if (method === 'capacity') for (const b of backends) b.capacity = b.weight;
  const sel = createSelector(method);
  sel.rebuild(backends);
  const out: string[] = [];
  for (let n = 0; n < count; n++) {
    const i = sel.pick(backends, (clientStart + n) >>> 0);
    const b = backends[i];
    if (!b) {
      out.push('(none: every server is disabled or full)');
      continue;
    }
    out.push(b.id);
    if (hold) b.active++;
  }
  return out;
}

export const scheduleCommand: Command = {
  name: 'schedule',
  summary: 'preview the servers a selection method chooses for new connections',
  usage: USAGE,
  run(argv) {
    try {
      const { values } = parseArgs({
        args: [...argv],
        options: {
          method: { type: 'string' },
          servers: { type: 'string' },
          disable: { type: 'string', multiple: true },
          count: { type: 'string', default: '20' },
          hold: { type: 'boolean', default: false },
          'client-start': { type: 'string', default: '198.18.11.2' },
          verbose: { type: 'boolean', default: false },
        },
      });
      const method = values.method as MethodName | undefined;
      if (method === undefined || !METHOD_NAMES.includes(method)) throw new UsageError(`--method must be one of ${METHOD_NAMES.join(', ')}`);
      if (values.servers === undefined) throw new UsageError('--servers is required');
      const count = Number(values.count);
      if (!Number.isInteger(count) || count < 1 || count > 1_000_000) throw new UsageError('--count must be an integer in [1, 1000000]');
      const start = parseIPv4Address(values['client-start']);
      if (start === undefined) throw new UsageError('--client-start must be an IPv4 address');
      const disabled = (values.disable ?? []).flatMap((d) => d.split(',')).filter((d) => d !== '');
      const names = schedule(method, parseServers(values.servers, disabled), count, values.hold, start);
      names.forEach((n, i) => {
        console.log(values.verbose && method === 'maglev' ? `${formatIPv4Address((start + i) >>> 0)} ${n}` : n);
      });
      return Promise.resolve(0);
    } catch (err) {
      if (err instanceof UsageError || (err instanceof TypeError && 'code' in err)) {
        console.error(`sluice schedule: ${err.message}\n\n${USAGE}`);
        return Promise.resolve(2);
      }
      throw err;
    }
  },
};
