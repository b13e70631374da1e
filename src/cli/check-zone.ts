/**
 * `sluice check-zone [--origin NAME] FILE...`: reads each zone file as
 * `sluice dns` would at start or reload (the same parser, $INCLUDE
 * relative to the file) and lists every error, one per line, as
 * `FILE:LINE: what is wrong; how to fix it`, like named-checkzone. A file
 * without errors gets one summary line: `FILE: zone ORIGIN/IN: loaded
 * serial N (R records)`.
 *
 * The origin is the file's first $ORIGIN, or --origin (which, like a
 * zone's `origin` in the dns config, takes precedence for records before
 * any $ORIGIN). Exit 0 when every file is valid, 1 when any has an error,
 * 2 on a usage error.
 */
import { parseArgs } from 'node:util';
import { checkZoneFile, type ZoneReport } from '../dns/zone/parse.ts';
import { RRTYPE } from '../dns/zone/records.ts';
import { UsageError, type Command } from './command.ts';

const USAGE = `usage: sluice check-zone [--origin NAME] FILE...

  Reads each zone file as sluice dns does (with its $INCLUDE files) and
  lists every error as FILE:LINE: problem; fix. A valid file gets a
  summary line (origin, serial, records). --origin: the zone's origin when
  the file has no $ORIGIN before its first record.
  Exit 0 all valid, 1 an error in any file, 2 usage error.`;

/** The lines printed for one file: its errors, or the summary. */
export function renderZoneReport(file: string, r: ZoneReport): string[] {
  if (r.zone === undefined) return [...r.errors.map((e) => e.message), `${file}: ${r.errors.length} error(s); not loaded`];
  const soa = r.zone.records.find((rr) => rr.type === RRTYPE.SOA);
  const serial = soa?.type === RRTYPE.SOA ? soa.serial : 0;
  return [`${file}: zone ${r.zone.origin === '' ? '.' : `${r.zone.origin}.`}/IN: loaded serial ${serial} (${r.zone.records.length} records)`];
}

export const checkZoneCommand: Command = {
  name: 'check-zone',
  summary: 'list every error in zone files (file:line), like named-checkzone',
  usage: USAGE,
  run(argv) {
    let files: string[];
    let origin: string | undefined;
    try {
      const { values, positionals } = parseArgs({ args: [...argv], allowPositionals: true, options: { origin: { type: 'string', short: 'o' } } });
      if (positionals.length === 0) throw new UsageError('give at least one FILE');
      files = positionals;
      origin = values.origin;
    } catch (err) {
      console.error(`sluice check-zone: ${(err as Error).message}\n\n${USAGE}`);
      return Promise.resolve(2);
    }
    let bad = 0;
    for (const file of files) {
      let report: ZoneReport;
      try {
        report = checkZoneFile(file, origin !== undefined ? { origin } : {});
      } catch (err) {
        // Only a bad --origin throws (InvalidArgumentError): a usage error.
        console.error(`sluice check-zone: ${(err as Error).message}\n\n${USAGE}`);
        return Promise.resolve(2);
      }
      if (report.zone === undefined) bad++;
      const lines = renderZoneReport(file, report);
      (report.zone === undefined ? console.error : console.log)(lines.join('\n'));
    }
    return Promise.resolve(bad > 0 ? 1 : 0);
  },
};
