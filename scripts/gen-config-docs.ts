/**
 * Writes docs/configuration.md from the daemons' configuration schemas, so
 * the reference cannot drift from the code: every key, its type, default,
 * bounds and description come from the zod schema the daemon validates
 * with. test/unit/config-docs.test.ts regenerates it in memory and fails
 * when the file differs.
 *
 *   node_modules/.bin/node scripts/gen-config-docs.ts      (npm run docs:config)
 *
 * The schemas are walked through zod's own JSON Schema rendering, both
 * sides at once: the input side (io: 'input') says what is required (a key
 * with a default is optional there, which is what an operator writing the
 * file needs); the output side adds what the input side cannot show behind
 * a transform (a default, the pattern a normalised domain name must match).
 * Checks that JSON Schema cannot express (refinements across keys) are
 * stated in the keys' descriptions, which live in the schemas next to the
 * checks.
 */
import { realpathSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { isDeepStrictEqual } from 'node:util';
import { z } from 'zod';
import { agentConfigSchema } from '../src/agent/config.ts';
import { dnsConfigSchema } from '../src/dns/config.ts';
import { frontConfigSchema } from '../src/front/config.ts';
import { masterConfigSchema } from '../src/throttle/config.ts';

export const CONFIG_DOCS_PATH = fileURLToPath(new URL('../docs/configuration.md', import.meta.url));

interface Daemon {
  readonly title: string;
  readonly command: string;
  readonly schemaFile: string;
  readonly example: string;
  readonly schema: z.ZodType;
}

const DAEMONS: readonly Daemon[] = [
  { title: 'Front node', command: 'sluice front', schemaFile: 'src/front/config.ts', example: 'deploy/examples/front-cluster1.yaml', schema: frontConfigSchema },
  { title: 'DNS server', command: 'sluice dns', schemaFile: 'src/dns/config.ts', example: 'deploy/examples/dns.yaml', schema: dnsConfigSchema },
  { title: 'Server agent', command: 'sluice agent', schemaFile: 'src/agent/config.ts', example: 'deploy/examples/agent-s1a.yaml', schema: agentConfigSchema },
  { title: 'Throttling master', command: 'sluice master', schemaFile: 'src/throttle/config.ts', example: 'deploy/examples/master.yaml', schema: masterConfigSchema },
];

/** The part of a JSON Schema node this renderer reads. */
interface Node {
  type?: string;
  description?: string;
  default?: unknown;
  enum?: readonly unknown[];
  const?: unknown;
  format?: string;
  pattern?: string;
  minLength?: number;
  maxLength?: number;
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: number;
  exclusiveMaximum?: number;
  minItems?: number;
  maxItems?: number;
  items?: Node;
  properties?: Record<string, Node>;
  required?: readonly string[];
  anyOf?: readonly Node[];
  /** zod writes a discriminated union (`store: {kind: memory, ...} | {kind: redis, ...}`) as oneOf. */
  oneOf?: readonly Node[];
}

interface Row {
  readonly path: string;
  readonly type: string;
  readonly required: boolean;
  readonly def: string;
  readonly allowed: string;
  readonly description: string;
}

/** zod writes these bounds for every integer; they say nothing to a reader. */
const SAFE_INT = Number.MAX_SAFE_INTEGER;

function code(v: string): string {
  return `\`${v}\``;
}

/** A value as it is written in the YAML file: strings bare, lists and maps in flow style. */
function yamlValue(v: unknown): string {
  return code(typeof v === 'string' ? v : JSON.stringify(v));
}

function isObject(n: Node): boolean {
  return n.type === 'object' && n.properties !== undefined;
}

/** A union of objects (e.g. `coordinator: { static } | { etcd }`): rendered key by key, alternatives marked. */
function alternatives(n: Node): readonly Node[] | undefined {
  const alts = n.anyOf ?? n.oneOf;
  return alts !== undefined && alts.length > 0 && alts.every(isObject) ? alts : undefined;
}

/** The key that tells a discriminated union's alternatives apart: a `const` in each. */
function discriminator(alts: readonly Node[]): string | undefined {
  return Object.keys(alts[0]?.properties ?? {}).find((k) => alts.every((a) => a.properties?.[k]?.const !== undefined));
}

function typeName(n: Node): string {
  if (n.enum !== undefined) return 'enum';
  if (alternatives(n) !== undefined) return 'object, one of';
  if (n.type === 'array') return n.items === undefined ? 'list' : isObject(n.items) ? 'list of objects' : `list of ${typeName(n.items)}`;
  if (n.type === 'object') return 'object';
  if (n.type === 'string' && n.format === 'ipv4') return 'IPv4 address';
  if (n.type === 'string' && n.format === 'ipv6') return 'IPv6 address';
  // A VIP or server address: either family.
  if (n.anyOf !== undefined && n.anyOf.length === 2 && n.anyOf.every((a) => a.type === 'string') && n.anyOf.map((a) => a.format).join() === 'ipv4,ipv6') return 'IPv4 or IPv6 address';
  // Plain alternatives (e.g. identity texts: a string, or false to turn the answer off).
  if (n.anyOf !== undefined && n.anyOf.length > 0 && n.anyOf.every((a) => a.const !== undefined || (a.type !== undefined && a.type !== 'object' && a.type !== 'array'))) {
    return n.anyOf.map((a) => (a.const !== undefined ? JSON.stringify(a.const) : typeName(a))).join(' or ');
  }
  return n.type ?? 'any';
}

function numberBounds(n: Node): string[] {
  const lo = n.minimum !== undefined && n.minimum > -SAFE_INT ? { v: n.minimum, op: '≥' } : n.exclusiveMinimum !== undefined ? { v: n.exclusiveMinimum, op: '>' } : undefined;
  const hi = n.maximum !== undefined && n.maximum < SAFE_INT ? { v: n.maximum, op: '≤' } : n.exclusiveMaximum !== undefined ? { v: n.exclusiveMaximum, op: '<' } : undefined;
  if (lo?.op === '≥' && hi?.op === '≤') return [`${lo.v} to ${hi.v}`];
  const out: string[] = [];
  if (lo) out.push(`${lo.op} ${lo.v}`);
  if (hi) out.push(`${hi.op} ${hi.v}`);
  return out.length > 0 ? [out.join(' and ')] : [];
}

/** Values, bounds and formats of one node (for a list: its own length, then its items'). */
function allowedOf(n: Node): string[] {
  const out: string[] = [];
  const alts = alternatives(n);
  const tag = alts === undefined ? undefined : discriminator(alts);
  if (alts !== undefined && tag !== undefined) out.push(`by \`${tag}\`: ${alts.map((a) => yamlValue(a.properties?.[tag]?.const)).join(', ')}`);
  else if (alts !== undefined) out.push(`exactly one of ${alts.map((a) => Object.keys(a.properties ?? {}).map(code).join(' + ')).join(', ')}`);
  if (n.const !== undefined) out.push(yamlValue(n.const));
  if (n.enum !== undefined) out.push(n.enum.map((v) => yamlValue(v)).join(', '));
  if (n.type === 'number' || n.type === 'integer') out.push(...numberBounds(n));
  if (n.type === 'string') {
    // An IP address is said by its type; its pattern would only repeat it.
    const prefix = n.format === 'starts_with' ? /^\^(.*)\.\*$/.exec(n.pattern ?? '') : null;
    if (prefix?.[1] !== undefined) out.push(`starts with ${code(prefix[1].replace(/\\(.)/g, '$1'))}`);
    else if (n.pattern !== undefined && n.format !== 'ipv4' && n.format !== 'ipv6') out.push(`matches ${code(n.pattern)}`);
    const min = n.minLength !== undefined && n.minLength > 0 ? n.minLength : undefined;
    if (min === 1 && n.maxLength === undefined) out.push('not empty');
    else if (min !== undefined && n.maxLength !== undefined) out.push(`${min} to ${n.maxLength} characters`);
    else if (min !== undefined) out.push(`at least ${min} characters`);
    else if (n.maxLength !== undefined) out.push(`at most ${n.maxLength} characters`);
  }
  if (n.type === 'array') {
    if (n.minItems !== undefined && n.maxItems !== undefined) out.push(`${n.minItems} to ${n.maxItems} items`);
    else if (n.minItems !== undefined) out.push(`at least ${n.minItems} item${n.minItems === 1 ? '' : 's'}`);
    else if (n.maxItems !== undefined) out.push(`at most ${n.maxItems} items`);
    if (n.items !== undefined && !isObject(n.items)) {
      const each = allowedOf(n.items);
      if (each.length > 0) out.push(`each ${each.join(', ')}`);
    }
  }
  return out;
}

/** What an object's keys default to when the object itself is absent or empty. */
function childDefaults(n: Node): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, c] of Object.entries(n.properties ?? {})) if (c.default !== undefined) out[k] = c.default;
  return out;
}

function defaultOf(n: Node): string {
  if (n.default === undefined) return '';
  // A section defaulting to {} (or to exactly its keys' defaults) is filled key by key.
  if (isObject(n) && (isDeepStrictEqual(n.default, {}) || isDeepStrictEqual(n.default, childDefaults(n)))) return 'each key’s default';
  return yamlValue(n.default);
}

/**
 * One node of both renderings: the input side's facts, completed by the
 * output side's where the input side has none (`required` is the input
 * side's alone: on the output side every defaulted key is required).
 */
function merge(input: Node, output: Node | undefined): Node {
  const { required: _, ...out } = output ?? {};
  return { ...out, ...input };
}

/** Rows of `input` (and the keys below it), key path `path`. */
function walk(input: Node, output: Node | undefined, path: string, required: boolean, rows: Row[]): void {
  const n = merge(input, output);
  rows.push({ path, type: typeName(n), required, def: defaultOf(n), allowed: allowedOf(n).join('; '), description: n.description ?? '' });
  const alts = alternatives(input);
  if (alts !== undefined) {
    // Each alternative's own keys are optional (the others may be given instead); below them, as required.
    // A discriminated union's tag is one key with the alternatives' values (required).
    const tag = discriminator(alts);
    const outAlts = output?.anyOf ?? output?.oneOf;
    if (tag !== undefined) {
      const tags = alts.map((a) => a.properties?.[tag] ?? {});
      rows.push({ path: `${path}.${tag}`, type: typeName(tags[0] ?? {}), required: true, def: '', allowed: tags.map((t) => yamlValue(t.const)).join(', '), description: tags.map((t) => t.description ?? '').filter((d) => d !== '').join(' ') });
    }
    alts.forEach((a, i) => {
      const { [tag ?? '']: _, ...rest } = a.properties ?? {};
      walkKeys({ ...a, properties: rest, required: [] }, outAlts?.[i], `${path}.`, rows);
    });
  } else if (isObject(input)) walkKeys(input, output, `${path}.`, rows);
  else if (input.type === 'array' && input.items !== undefined && isObject(input.items)) walkKeys(input.items, output?.items, `${path}[].`, rows);
}

function walkKeys(input: Node, output: Node | undefined, prefix: string, rows: Row[]): void {
  const req = new Set(input.required ?? []);
  for (const [k, c] of Object.entries(input.properties ?? {})) walk(c, output?.properties?.[k], `${prefix}${k}`, req.has(k), rows);
}

export function configRows(schema: z.ZodType): Row[] {
  const input = z.toJSONSchema(schema, { io: 'input', unrepresentable: 'any' }) as Node;
  const output = z.toJSONSchema(schema, { io: 'output', unrepresentable: 'any' }) as Node;
  const rows: Row[] = [];
  walkKeys(input, output, '', rows);
  return rows;
}

/** One table cell: a single line, pipes escaped (also inside code spans, as GFM requires). */
function cell(s: string): string {
  return s.replace(/\s*\n\s*/g, ' ').replace(/\|/g, '\\|');
}

function table(rows: readonly Row[]): string {
  const lines = ['| key | type | required | default | allowed | description |', '|---|---|---|---|---|---|'];
  for (const r of rows) lines.push(`| ${[code(r.path), r.type, r.required ? 'yes' : 'no', r.def, r.allowed, r.description].map(cell).join(' | ')} |`);
  return lines.join('\n');
}

export function renderConfigDocs(): string {
  const out: string[] = [
    '# Configuration reference',
    '',
    '<!-- Generated by scripts/gen-config-docs.ts from the configuration schemas. Do not edit: change the schema and run `npm run docs:config`. -->',
    '',
    'Every daemon reads one YAML file (`--config FILE`), validated once against',
    'its schema (zod) at start and on every reload; defaults are filled in and',
    'the result is frozen (`src/config/load.ts`). A refused file is reported',
    'with every problem at once, each naming its key path and the fix, e.g.',
    '`services[0].servers[1].address: expected an IPv4 address like 198.18.201.11`.',
    'Unknown keys are refused.',
    '',
    'How to read the tables:',
    '',
    '- **key**: the path from the top of the file. `a.b` is key `b` inside',
    '  section `a`; `a[].b` is key `b` in each element of list `a`.',
    '- **required**: `yes` means the key must be present whenever its',
    '  enclosing section or list element is. Conditions that depend on other',
    '  keys are stated in the description.',
    '- **default**: the value used when the key is absent. For a section,',
    '  "each key’s default" means an absent section is filled in key by key.',
    '- **allowed**: value sets, inclusive ranges (`a to b`), bounds, and the',
    '  regular expression a string must match.',
    '',
    'The `control` section starts with the same four keys in every daemon',
    '(`keyFile`, `plaintext`, `maxMessageBytes`, `maxAgeSeconds`, from',
    '`src/control/config.ts`); the rest of it depends on the daemon\'s role.',
    'Deployment, keys and the control ports: [operations.md](operations.md).',
  ];
  for (const d of DAEMONS) {
    out.push('', `## ${d.title}: \`${d.command}\``, '', `Schema: \`${d.schemaFile}\`. Example with every key: \`${d.example}\`.`, '', table(configRows(d.schema)));
  }
  return out.join('\n') + '\n';
}

// Run as a program (not imported by the test): write the file.
if (process.argv[1] !== undefined && realpathSync(process.argv[1]) === fileURLToPath(import.meta.url)) {
  writeFileSync(CONFIG_DOCS_PATH, renderConfigDocs());
  console.log(`wrote ${CONFIG_DOCS_PATH}`);
}
