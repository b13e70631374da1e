/**
 * `sluice <command> [options]`: the single entry point (package.json bin,
 * via bin/sluice which pins the Node 24 runtime).
 */
import type { Command } from './command.ts';

/**
 * The commands in `sluice help` order, each module loaded only when that
 * command, or its help, is asked for: `sluice ctl` or `sluice status` does
 * not load the daemons (a few modules instead of ~860: a fraction of the
 * start-up time). test/unit/cli.test.ts checks that each name gives its
 * command (its usage line and `sluice help`'s list).
 */
const loaders: readonly (readonly [string, () => Promise<Command>])[] = [
  ['front', async () => (await import('./front.ts')).frontCommand],
  ['dns', async () => (await import('./dns.ts')).dnsCommand],
  ['agent', async () => (await import('./agent.ts')).agentCommand],
  ['master', async () => (await import('./master.ts')).masterCommand],
  ['master-proxy', async () => (await import('./master-proxy.ts')).masterProxyCommand],
  ['ctl', async () => (await import('./ctl.ts')).ctlCommand],
  ['keygen', async () => (await import('./keygen.ts')).keygenCommand],
  ['schedule', async () => (await import('./schedule.ts')).scheduleCommand],
  ['simulate', async () => (await import('./simulate.ts')).simulateCommand],
  ['status', async () => (await import('./status.ts')).statusCommand],
  ['dashboard', async () => (await import('./dashboard.ts')).dashboardCommand],
  ['check-config', async () => (await import('./check-config.ts')).checkConfigCommand],
  ['check-zone', async () => (await import('./check-zone.ts')).checkZoneCommand],
  ['ha', async () => (await import('./ha.ts')).haCommand],
  ['version', async () => (await import('./version.ts')).versionCommand],
];

/** The command called `name`, loaded; undefined if there is none. */
async function load(name: string | undefined): Promise<Command | undefined> {
  const entry = loaders.find(([n]) => n === name);
  return entry ? entry[1]() : undefined;
}

/** Every command, loaded (only `sluice help` and a usage error list them all). */
async function allCommands(): Promise<Command[]> {
  const out: Command[] = [];
  for (const [, loader] of loaders) out.push(await loader());
  return out;
}

async function usage(): Promise<string> {
  const commands = await allCommands();
  const width = Math.max(...commands.map((c) => c.name.length), 4);
  return [
    'usage: sluice <command> [options]',
    '',
    'commands:',
    ...commands.map((c) => `  ${c.name.padEnd(width)}  ${c.summary}`),
    `  ${'help'.padEnd(width)}  show this help, or a command's usage: sluice help <command>, sluice <command> --help`,
  ].join('\n');
}

/**
 * `sluice <command> --help` (or `-h`) anywhere before a `--`: the command's
 * usage on stdout, exit 0, before the command parses anything. So it works
 * for every command, without root, a config file or a running daemon.
 */
export function wantsHelp(args: readonly string[]): boolean {
  for (const a of args) {
    if (a === '--') return false;
    if (a === '--help' || a === '-h') return true;
  }
  return false;
}

function commandHelp(c: Command): string {
  return `${c.usage}\n\n${c.summary}`;
}

export async function main(argv: readonly string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === 'help' || name === '--help' || name === '-h') {
    const topic = name === 'help' ? await load(rest[0]) : undefined;
    console.log(topic ? commandHelp(topic) : await usage());
    return name === undefined ? 2 : 0;
  }
  if (name === '--version') return (await load('version'))?.run([]) ?? 1;
  const cmd = await load(name);
  if (!cmd) {
    console.error(`sluice: unknown command "${name}"\n\n${await usage()}`);
    return 2;
  }
  if (wantsHelp(rest)) {
    console.log(commandHelp(cmd));
    return 0;
  }
  return cmd.run(rest);
}

process.exitCode = await main(process.argv.slice(2));
