/**
 * The control-plane messages: every exchange between agents, front nodes and
 * DNS servers, one schema each. A message on the wire is a two-frame ZeroMQ
 * message [type, JSON envelope]; the envelope repeats the type so a frame
 * mix-up is caught, carries the protocol version, the sender's name and its
 * send time (for the staleness check), and the type's body.
 *
 * Versioning: `v` is the envelope version. A receiver accepts exactly the
 * versions it knows (today: 1) and rejects the rest as `version`, counted;
 * a new field in a body is a new version. Types are added by adding a schema
 * to MESSAGE_SCHEMAS: the admission and throttling messages of later issues
 * land here beside these, and every receiver rejects types it was not built
 * for as `unknown`.
 *
 * Bounds: every list and string has a maximum, so a valid message is also a
 * bounded one (the byte limit is checked before parsing, in codec.ts).
 */
import { z } from 'zod';
import { parseIPv4Address } from '../packet/address.ts';

export const PROTOCOL_VERSION = 1;
/** Senders split longer lists over several messages. */
export const MAX_LIST = 4096;

const name = z.string().min(1).max(64).regex(/^[A-Za-z0-9._:-]+$/);
const ipv4 = z.string().max(15).refine((s) => parseIPv4Address(s) !== undefined, 'expected an IPv4 address');
const count = z.number().int().min(0).max(Number.MAX_SAFE_INTEGER);
const nonNeg = z.number().min(0).max(1e12);
const fraction = z.number().min(0).max(64); // utilization may exceed 1 (overload); 64 bounds garbage

/** agent -> front node, every load interval (seed 000: receive_server_load). */
export const loadReport = z.strictObject({
  server: name,
  address: ipv4,
  /** Seconds this report covers. */
  interval: z.number().positive().max(3600),
  cpu: fraction,
  load1: nonNeg,
  load5: nonNeg,
  load15: nonNeg,
  /** Established TCP connections on the service ports. */
  connections: count,
  memoryUsed: fraction,
  /** The one figure the agent's config defines as utilization (0..1 = below..at full). */
  utilization: fraction,
});

/** agent -> front node, every request-rate interval (seed 000: receive_request_rate). */
export const requestRate = z.strictObject({
  server: name,
  interval: z.number().positive().max(86400),
  /** [client address, requests in the interval] */
  clients: z.array(z.tuple([ipv4, count])).max(MAX_LIST),
  /** Lines of the log that were not requests (garbage, partial), for the operator. */
  rejectedLines: count,
});

/** front node -> subscribers (DNS, other front nodes): the cluster's capacity and load. */
export const clusterLoad = z.strictObject({
  cluster: name,
  vips: z.array(ipv4).max(256),
  /** New connections per second the cluster's usable servers can take (estimated). */
  capacity: nonNeg,
  /** New connections per second being sent to them now. */
  load: nonNeg,
  /** capacity - load, floored at 0. */
  available: nonNeg,
  serversUp: count,
  serversTotal: count,
});

/** front node -> DNS (seed 000: send_request_rate). */
export const highRateClients = z.strictObject({
  cluster: name,
  /** Requests per second above which a client is reported. */
  threshold: nonNeg,
  average: nonNeg,
  clients: z.array(z.tuple([ipv4, nonNeg])).max(MAX_LIST),
  /** The last message of this pass. */
  final: z.boolean(),
});

/** DNS -> front nodes (seed 000: receive_probe_for_rtt). */
export const rttProbeRequest = z.strictObject({
  targets: z.array(ipv4).min(1).max(MAX_LIST),
  /** Echo requests per target. */
  count: z.number().int().min(1).max(16),
});

/** front node -> DNS: averaged RTTs of a probing round. */
export const rttResults = z.strictObject({
  cluster: name,
  results: z
    .array(
      z.strictObject({
        target: ipv4,
        sent: count,
        received: count,
        /** Mean RTT of the replies, ms; null when none came back. */
        rttMs: z.number().min(0).max(60_000).nullable(),
      }),
    )
    .max(MAX_LIST),
});

export const MESSAGE_SCHEMAS = {
  load_report: loadReport,
  request_rate: requestRate,
  cluster_load: clusterLoad,
  high_rate_clients: highRateClients,
  rtt_probe_request: rttProbeRequest,
  rtt_results: rttResults,
} as const;

export type MessageType = keyof typeof MESSAGE_SCHEMAS;
export const MESSAGE_TYPES = Object.keys(MESSAGE_SCHEMAS) as MessageType[];
export type Body<T extends MessageType> = z.output<(typeof MESSAGE_SCHEMAS)[T]>;

export interface Envelope<T extends MessageType = MessageType> {
  readonly v: number;
  readonly type: T;
  /** Sender's name (its config's name), for logs and last-seen ages. */
  readonly from: string;
  /** Sender's wall clock at send, ms since the epoch. */
  readonly sentAt: number;
  readonly body: Body<T>;
}

export function isMessageType(s: string): s is MessageType {
  return Object.hasOwn(MESSAGE_SCHEMAS, s);
}

export const envelopeSchema = z.strictObject({
  v: z.number().int(),
  type: z.string().max(64),
  from: name,
  sentAt: z.number().int().min(0),
  body: z.unknown(),
});
