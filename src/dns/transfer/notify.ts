/**
 * NOTIFY (RFC 1996) to the secondaries when a reload changes a zone's SOA
 * serial: a UDP message, opcode NOTIFY, AA set, the question (origin, SOA,
 * IN). A secondary answers it (any rcode: it has heard us) and then asks
 * for the SOA and transfers. An unanswered NOTIFY is sent again every
 * `notifyRetrySeconds`, at most `notifyRetries` more times (RFC 1996 §3.6
 * asks for retries; the secondary's own refresh timer is the backstop).
 *
 * One socket per (zone, secondary) notification, closed when answered or
 * given up. A newer NOTIFY for the same zone and secondary replaces one
 * still retrying. No hot path here: reloads are rare.
 */
import { createSocket, type Socket } from 'node:dgram';
import { randomInt } from 'node:crypto';
import type { Logger } from '../../log/logger.ts';
import { nameWire } from './tsig.ts';

const OPCODE_NOTIFY = 4;
const QTYPE_SOA = 6;

export interface NotifyCounters {
  sent: number;
  answered: number;
  failed: number;
}

interface Target {
  readonly host: string;
  readonly port: number;
  readonly family: 4 | 6;
}

/** "198.18.3.3", "198.18.3.3:5353", "[2001:2::3]", "[2001:2::3]:53". */
export function parseNotifyTarget(s: string): Target {
  if (s.startsWith('[')) {
    const end = s.indexOf(']');
    const port = s.length > end + 1 ? Number(s.slice(end + 2)) : 53;
    return { host: s.slice(1, end), port, family: 6 };
  }
  const [host = '', port] = s.split(':');
  return { host, port: port === undefined ? 53 : Number(port), family: 4 };
}

export function notifyMessage(id: number, origin: string): Buffer {
  const q = nameWire(origin);
  const m = Buffer.alloc(12 + q.length + 4);
  m.writeUInt16BE(id, 0);
  m[2] = (OPCODE_NOTIFY << 3) | 0x04; // opcode NOTIFY, AA
  m.writeUInt16BE(1, 4);
  q.copy(m, 12);
  m.writeUInt16BE(QTYPE_SOA, 12 + q.length);
  m.writeUInt16BE(1, 14 + q.length);
  return m;
}

export class Notifier {
  readonly counters: NotifyCounters = { sent: 0, answered: 0, failed: 0 };
  readonly #targets: readonly Target[];
  readonly #retries: number;
  readonly #retryMs: number;
  readonly #log: Logger;
  /** "origin|target" -> the notification in flight. */
  readonly #active = new Map<string, { socket: Socket; timer: NodeJS.Timeout | undefined }>();

  constructor(opts: { notify: readonly string[]; notifyRetries: number; notifyRetrySeconds: number }, log: Logger) {
    this.#targets = opts.notify.map(parseNotifyTarget);
    this.#retries = opts.notifyRetries;
    this.#retryMs = opts.notifyRetrySeconds * 1000;
    this.#log = log;
  }

  /** Notifies every secondary that `origin` is now at `serial`. */
  notify(origin: string, serial: number): void {
    for (const t of this.#targets) this.#notifyOne(origin, serial, t);
  }

  #notifyOne(origin: string, serial: number, t: Target): void {
    const key = `${origin}|${t.host}|${t.port}`;
    this.#finish(key);
    const socket = createSocket(t.family === 6 ? 'udp6' : 'udp4');
    const entry: { socket: Socket; timer: NodeJS.Timeout | undefined } = { socket, timer: undefined };
    this.#active.set(key, entry);
    const id = randomInt(0, 0x10000);
    const msg = notifyMessage(id, origin);
    const target = `${t.family === 6 ? `[${t.host}]` : t.host}:${t.port}`;
    let attempts = 0;
    socket.on('error', (err) => {
      this.#log.warn({ zone: origin, secondary: target, err: err.message }, 'NOTIFY socket error');
    });
    socket.on('message', (m, rinfo) => {
      // The answer: our ID, QR set, opcode NOTIFY, from the secondary we asked.
      if (m.length < 12 || m.readUInt16BE(0) !== id || ((m[2] ?? 0) & 0x80) === 0 || (((m[2] ?? 0) >> 3) & 0x0f) !== OPCODE_NOTIFY || (t.family === 4 && rinfo.address !== t.host)) return;
      this.counters.answered++;
      const rcode = (m[3] ?? 0) & 0x0f;
      this.#log.info({ zone: origin, serial, secondary: target, rcode, attempts }, 'NOTIFY answered');
      this.#finish(key);
    });
    const send = (): void => {
      if (this.#active.get(key) !== entry) return;
      if (attempts > this.#retries) {
        this.counters.failed++;
        this.#log.warn({ zone: origin, serial, secondary: target, attempts }, 'NOTIFY not answered; the secondary will see the change at its next SOA refresh');
        this.#finish(key);
        return;
      }
      attempts++;
      this.counters.sent++;
      socket.send(msg, t.port, t.host);
      entry.timer = setTimeout(send, this.#retryMs);
    };
    socket.bind(0, () => {
      send();
    });
  }

  #finish(key: string): void {
    const e = this.#active.get(key);
    if (e === undefined) return;
    this.#active.delete(key);
    if (e.timer !== undefined) clearTimeout(e.timer);
    e.socket.close();
  }

  /** Notifications still waiting for an answer. */
  get pending(): number {
    return this.#active.size;
  }

  close(): void {
    for (const key of [...this.#active.keys()]) this.#finish(key);
  }
}
