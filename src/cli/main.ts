/**
 * `sluice <command> [options]`: the single entry point (package.json bin,
 * via bin/sluice which pins the Node 24 runtime).
 */
import type { Command } from './command.ts';
import { agentCommand } from './agent.ts';
import { checkConfigCommand } from './check-config.ts';
import { checkZoneCommand } from './check-zone.ts';
import { ctlCommand } from './ctl.ts';
import { dashboardCommand } from './dashboard.ts';
import { dnsCommand } from './dns.ts';
import { frontCommand } from './front.ts';
import { haCommand } from './ha.ts';
import { keygenCommand } from './keygen.ts';
import { masterCommand } from './master.ts';
import { masterProxyCommand } from './master-proxy.ts';
import { scheduleCommand } from './schedule.ts';
import { simulateCommand } from './simulate.ts';
import { statusCommand } from './status.ts';
import { versionCommand } from './version.ts';

const commands: readonly Command[] = [frontCommand, dnsCommand, agentCommand, masterCommand, masterProxyCommand, ctlCommand, keygenCommand, scheduleCommand, simulateCommand, statusCommand, dashboardCommand, checkConfigCommand, checkZoneCommand, haCommand, versionCommand];

function usage(): string {
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
    const topic = name === 'help' ? commands.find((c) => c.name === rest[0]) : undefined;
    console.log(topic ? commandHelp(topic) : usage());
    return name === undefined ? 2 : 0;
  }
  if (name === '--version') return versionCommand.run([]);
  const cmd = commands.find((c) => c.name === name);
  if (!cmd) {
    console.error(`sluice: unknown command "${name}"\n\n${usage()}`);
    return 2;
  }
  if (wantsHelp(rest)) {
    console.log(commandHelp(cmd));
    return 0;
  }
  return cmd.run(rest);
}

process.exitCode = await main(process.argv.slice(2));
