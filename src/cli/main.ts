/**
 * `sluice <command> [options]`: the single entry point (package.json bin,
 * via bin/sluice which pins the Node 24 runtime).
 */
import type { Command } from './command.ts';
import { agentCommand } from './agent.ts';
import { checkConfigCommand } from './check-config.ts';
import { ctlCommand } from './ctl.ts';
import { dashboardCommand } from './dashboard.ts';
import { dnsCommand } from './dns.ts';
import { frontCommand } from './front.ts';
import { keygenCommand } from './keygen.ts';
import { masterCommand } from './master.ts';
import { masterProxyCommand } from './master-proxy.ts';
import { scheduleCommand } from './schedule.ts';
import { statusCommand } from './status.ts';
import { versionCommand } from './version.ts';

const commands: readonly Command[] = [frontCommand, dnsCommand, agentCommand, masterCommand, masterProxyCommand, ctlCommand, keygenCommand, scheduleCommand, statusCommand, dashboardCommand, checkConfigCommand, versionCommand];

function usage(): string {
  const width = Math.max(...commands.map((c) => c.name.length), 4);
  return [
    'usage: sluice <command> [options]',
    '',
    'commands:',
    ...commands.map((c) => `  ${c.name.padEnd(width)}  ${c.summary}`),
    `  ${'help'.padEnd(width)}  show this help, or a command's usage: sluice help <command>`,
  ].join('\n');
}

export async function main(argv: readonly string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === 'help' || name === '--help' || name === '-h') {
    const topic = name === 'help' ? commands.find((c) => c.name === rest[0]) : undefined;
    console.log(topic ? `${topic.usage}\n\n${topic.summary}` : usage());
    return name === undefined ? 2 : 0;
  }
  if (name === '--version') return versionCommand.run([]);
  const cmd = commands.find((c) => c.name === name);
  if (!cmd) {
    console.error(`sluice: unknown command "${name}"\n\n${usage()}`);
    return 2;
  }
  return cmd.run(rest);
}

process.exitCode = await main(process.argv.slice(2));
