/**
 * A strict checker for the Prometheus text exposition format (0.0.4), so the
 * tests validate what a Prometheus server would read without needing
 * promtool: HELP/TYPE grammar, sample grammar and label escaping, every
 * sample in a declared family whose lines are contiguous, no duplicate
 * series, counters of ours named *_total, histogram buckets increasing and
 * cumulative with +Inf equal to _count. Throws on the first problem, naming
 * the line.
 */

export interface PromSample {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly value: number;
}

export interface PromFamily {
  readonly type: string;
  readonly help: string;
}

export interface PromText {
  readonly families: ReadonlyMap<string, PromFamily>;
  readonly samples: readonly PromSample[];
  /** Sum of the samples named `name` whose labels include `match`. */
  sum(name: string, match?: Readonly<Record<string, string>>): number;
  /** Whether any sample named `name` (with labels including `match`) exists. */
  has(name: string, match?: Readonly<Record<string, string>>): boolean;
}

const NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL = /^[a-zA-Z_][a-zA-Z0-9_]*$/;
const TYPES = new Set(['counter', 'gauge', 'histogram', 'summary', 'untyped']);

/** Values as Prometheus reads them (Go's ParseFloat: NaN and Inf in any letter case; prom-client writes "Nan"). */
function parseValue(s: string, where: string): number {
  if (/^\+?inf(inity)?$/i.test(s)) return Infinity;
  if (/^-inf(inity)?$/i.test(s)) return -Infinity;
  if (/^nan$/i.test(s)) return NaN;
  if (!/^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/.test(s)) throw new Error(`${where}: bad value ${JSON.stringify(s)}`);
  return Number(s);
}

/** Label set `{a="x",b="y"}` starting at text[i] === '{'; returns labels and the index after '}'. */
function parseLabels(text: string, start: number, where: string): [Record<string, string>, number] {
  const labels: Record<string, string> = {};
  let i = start + 1;
  for (let guard = 0; guard < 1000; guard++) {
    if (text[i] === '}') return [labels, i + 1];
    const eq = text.indexOf('=', i);
    if (eq < 0) throw new Error(`${where}: label without =`);
    const key = text.slice(i, eq);
    if (!LABEL.test(key)) throw new Error(`${where}: bad label name ${JSON.stringify(key)}`);
    if (key in labels) throw new Error(`${where}: label ${key} twice`);
    if (text[eq + 1] !== '"') throw new Error(`${where}: label value not quoted`);
    let v = '';
    let j = eq + 2;
    for (; j < text.length && text[j] !== '"'; j++) {
      if (text[j] === '\\') {
        const e = text[++j];
        if (e === 'n') v += '\n';
        else if (e === '\\' || e === '"') v += e;
        else throw new Error(`${where}: bad escape \\${e ?? ''}`);
      } else if (text[j] === '\n') throw new Error(`${where}: newline in label value`);
      else v += text[j] ?? '';
    }
    if (j >= text.length) throw new Error(`${where}: unterminated label value`);
    labels[key] = v;
    i = j + 1;
    if (text[i] === ',') i++;
    else if (text[i] !== '}') throw new Error(`${where}: expected , or } after a label`);
  }
  throw new Error(`${where}: too many labels`);
}

function familyOf(name: string, families: ReadonlyMap<string, PromFamily>): string | undefined {
  if (families.has(name)) return name;
  for (const suffix of ['_bucket', '_sum', '_count']) {
    if (!name.endsWith(suffix)) continue;
    const base = name.slice(0, -suffix.length);
    const f = families.get(base);
    if (f && (f.type === 'histogram' || (f.type === 'summary' && suffix !== '_bucket'))) return base;
  }
  return undefined;
}

export function parsePromText(text: string, ourPrefix = 'sluice_'): PromText {
  if (!text.endsWith('\n')) throw new Error('exposition must end with a newline');
  const families = new Map<string, PromFamily>();
  const help = new Map<string, string>();
  const samples: PromSample[] = [];
  const series = new Set<string>();
  const closed = new Set<string>();
  let current: string | undefined;
  const lines = text.split('\n').slice(0, -1);
  lines.forEach((line, n) => {
    const where = `line ${n + 1} (${line.slice(0, 80)})`;
    if (line === '') return;
    if (line.startsWith('#')) {
      const m = /^# (HELP|TYPE) (\S+) ?(.*)$/.exec(line);
      if (!m) return; // a plain comment
      const [, kind, name = '', rest = ''] = m;
      if (!NAME.test(name)) throw new Error(`${where}: bad metric name`);
      if (kind === 'HELP') {
        if (help.has(name)) throw new Error(`${where}: HELP twice for ${name}`);
        for (let j = 0; j < rest.length; j++) {
          if (rest[j] !== '\\') continue;
          if (rest[j + 1] !== '\\' && rest[j + 1] !== 'n') throw new Error(`${where}: bad escape in HELP`);
          j++;
        }
        help.set(name, rest);
      } else {
        if (!TYPES.has(rest)) throw new Error(`${where}: unknown type ${rest}`);
        if (families.has(name)) throw new Error(`${where}: TYPE twice for ${name}`);
        if (samples.some((s) => familyOf(s.name, new Map([[name, { type: rest, help: '' }]])) === name)) throw new Error(`${where}: TYPE after samples of ${name}`);
        families.set(name, { type: rest, help: help.get(name) ?? '' });
        if (name.startsWith(ourPrefix) && rest === 'counter' && !name.endsWith('_total')) throw new Error(`${where}: counter ${name} must end in _total`);
      }
      return;
    }
    const nameEnd = line.search(/[{ ]/);
    if (nameEnd <= 0) throw new Error(`${where}: no sample name`);
    const name = line.slice(0, nameEnd);
    if (!NAME.test(name)) throw new Error(`${where}: bad metric name`);
    let labels: Record<string, string> = {};
    let i = nameEnd;
    if (line[i] === '{') [labels, i] = parseLabels(line, i, where);
    if (line[i] !== ' ') throw new Error(`${where}: expected a space before the value`);
    const parts = line.slice(i + 1).split(' ');
    if (parts.length < 1 || parts.length > 2) throw new Error(`${where}: expected value [timestamp]`);
    const value = parseValue(parts[0] ?? '', where);
    if (parts[1] !== undefined && !/^-?\d+$/.test(parts[1])) throw new Error(`${where}: bad timestamp`);
    const fam = familyOf(name, families);
    if (fam === undefined) throw new Error(`${where}: sample of an undeclared family (no # TYPE)`);
    if (fam !== current) {
      if (closed.has(fam)) throw new Error(`${where}: samples of ${fam} are not contiguous`);
      if (current !== undefined) closed.add(current);
      current = fam;
    }
    const key = `${name}${JSON.stringify(Object.entries(labels).sort())}`;
    if (series.has(key)) throw new Error(`${where}: duplicate series`);
    series.add(key);
    if (families.get(fam)?.type === 'counter' && !(value >= 0)) throw new Error(`${where}: counter value ${value} is not >= 0`);
    samples.push({ name, labels, value });
  });
  checkHistograms(families, samples);
  const matches = (s: PromSample, name: string, match: Readonly<Record<string, string>>): boolean => s.name === name && Object.entries(match).every(([k, v]) => s.labels[k] === v);
  return {
    families,
    samples,
    sum: (name, match = {}) => samples.filter((s) => matches(s, name, match)).reduce((a, s) => a + s.value, 0),
    has: (name, match = {}) => samples.some((s) => matches(s, name, match)),
  };
}

function checkHistograms(families: ReadonlyMap<string, PromFamily>, samples: readonly PromSample[]): void {
  for (const [name, f] of families) {
    if (f.type !== 'histogram') continue;
    const groups = new Map<string, { les: [number, number][]; count?: number }>();
    const groupOf = (labels: Readonly<Record<string, string>>): { les: [number, number][]; count?: number } => {
      const key = JSON.stringify(Object.entries(labels).filter(([k]) => k !== 'le').sort());
      let g = groups.get(key);
      if (!g) groups.set(key, (g = { les: [] }));
      return g;
    };
    for (const s of samples) {
      if (s.name === `${name}_bucket`) {
        const le = s.labels['le'];
        if (le === undefined) throw new Error(`${name}_bucket without le`);
        groupOf(s.labels).les.push([parseValue(le, `${name} le`), s.value]);
      } else if (s.name === `${name}_count`) groupOf(s.labels).count = s.value;
    }
    for (const [key, g] of groups) {
      const last = g.les[g.les.length - 1];
      if (!last || last[0] !== Infinity) throw new Error(`${name}${key}: no +Inf bucket last`);
      for (let i = 1; i < g.les.length; i++) {
        const [a, ca] = g.les[i - 1] ?? [0, 0];
        const [b, cb] = g.les[i] ?? [0, 0];
        if (!(b > a)) throw new Error(`${name}${key}: le not increasing`);
        if (cb < ca) throw new Error(`${name}${key}: buckets not cumulative`);
      }
      if (g.count !== last[1]) throw new Error(`${name}${key}: +Inf bucket ${last[1]} != _count ${String(g.count)}`);
    }
  }
}
