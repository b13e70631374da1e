/**
 * The control-plane messages: every exchange between agents, front nodes and
 * DNS servers, one schema each. A message on the wire is a two-frame ZeroMQ
 * message [type, JSON envelope]; the envelope repeats the type so a frame
 * mix-up is caught, carries the protocol version, the sender's name and its
 * send time (for the staleness check), and the type's body.
 *
 * Versioning: `v` is the envelope version. A receiver accepts exactly the
 * versions it knows (today: 1 and 2) and rejects the rest as `version`,
 * counted; a new required field in a body is a new version. An optional field may
 * be added within a version: a receiver that knows it still decodes a
 * sender that does not send it, and one that does not know it rejects it
 * as `schema` (bodies are strict), so receivers are upgraded first. So far:
 * load_report's `health` and `healthReason` (agents of issue 20; a report
 * without them means the agent says nothing about health); cluster_load's
 * `role` (front nodes of issue 21; absent means 'single', a front node
 * that is not one of a pair). Upgrade the DNS servers and every front node
 * that subscribes to another before the front nodes that send `role`.
 *
 * Version 2 (issue 23): client addresses of both families. The fields that
 * name a client (request_rate and high_rate_clients `clients[i][0]`,
 * rtt_probe_request `targets[i]`, rtt_results `results[i].target`) carry
 * IPv4 or IPv6 text; the text is its own family tag (JSON carries no bytes:
 * a separate family field could only disagree with the text). A receiver
 * takes any strict RFC 4291 form and hands its handlers the canonical text
 * (src/util/ip.ts: RFC 5952, IPv4-mapped as IPv4), so every table keys one
 * client once; a zone id, brackets, a truncated or over-long address, or any
 * other text is a `schema` rejection of the whole message, counted and
 * logged like every malformed message. high_rate_clients entries may carry
 * a third element in version 2, the prefix length the front node
 * aggregated the client at (absent: one address, /32 or /128). Every other
 * type's body is the same in both versions.
 *
 * Version 1, kept exactly: its client address fields are IPv4 dotted quads
 * only (an IPv6 address in a version-1 message is a `schema` rejection, as
 * before), high_rate_clients entries are pairs, and the body reaches the
 * handler unchanged. Senders choose the lowest version that carries the
 * body (messageVersion: 2 only when an address is IPv6 or an entry has a
 * prefix length) and put IPv4 and IPv6 clients in separate messages, so
 * a receiver that speaks version 1 only still takes every IPv4 client and
 * rejects the IPv6 messages as `version`, counted: receivers can be
 * upgraded in any order, and IPv6 clients count from the moment both sides
 * speak version 2.
 *
 * Types are added by adding a schema
 * to MESSAGE_SCHEMAS: the admission and throttling messages of later issues
 * land here beside these, and every receiver rejects types it was not built
 * for as `unknown`.
 *
 * Bounds: every list and string has a maximum, so a valid message is also a
 * bounded one (the byte limit is checked before parsing, in codec.ts).
 */
import { z } from 'zod';
import { parseIPv4Address } from '../packet/address.ts';
import { canonicalAddress, MAX_ADDRESS_TEXT } from '../util/ip.ts';

/** The highest version this node speaks (and decodes); it also decodes every version in PROTOCOL_VERSIONS. */
export const PROTOCOL_VERSION = 2;
export const PROTOCOL_VERSIONS: readonly number[] = [1, 2];
/** Senders split longer lists over several messages. */
export const MAX_LIST = 4096;

const name = z.string().min(1).max(64).regex(/^[A-Za-z0-9._:-]+$/);
const ipv4 = z.string().max(15).refine((s) => parseIPv4Address(s) !== undefined, 'expected an IPv4 address');
/** Version 2: a client address of either family, handed on in canonical text. */
const clientAddress = z
  .string()
  .max(MAX_ADDRESS_TEXT)
  .transform((s, ctx) => {
    const c = canonicalAddress(s);
    if (c === undefined) {
      ctx.issues.push({ code: 'custom', message: 'expected an IPv4 or IPv6 address (no zone id, no brackets)', input: s });
      return z.NEVER;
    }
    return c;
  });
/** Prefix length of an aggregated client (version 2 high_rate_clients). */
const prefixLength = z.int().min(0).max(128);
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
  /**
   * The server's health as its agent sees it (src/agent/health.ts): its own
   * check and the operator's verb. up; down (its check fails); drain (no
   * new connections, established ones finish); maint (the same, shown as
   * maintenance). Optional: older agents send none (the front node then
   * takes the agent's health as 'none'); any other value is a `schema`
   * rejection of the whole report.
   */
  health: z.enum(['up', 'down', 'drain', 'maint']).optional(),
  /** Why, for the operator (the check's result or the operator's reason). */
  healthReason: z.string().max(200).optional(),
});

/** agent -> front node, every request-rate interval (seed 000: receive_request_rate). */
export const requestRate = z.strictObject({
  server: name,
  interval: z.number().positive().max(86400),
  /** [client address (version 1: IPv4 only), requests in the interval] */
  clients: z.array(z.tuple([clientAddress, count])).max(MAX_LIST),
  /** Lines of the log that were not requests (garbage, bad addresses, partial), for the operator. */
  rejectedLines: count,
});
const requestRateV1 = requestRate.extend({ clients: z.array(z.tuple([ipv4, count])).max(MAX_LIST) });

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
  /**
   * The sender's place in its cluster's front-node pair (keepalived's
   * state): 'master' takes the traffic, 'backup' stands by, 'single' is a
   * front node without a pair. Receivers take a cluster's figures from its
   * master (src/control/cluster-reports.ts). Optional within version 1:
   * absent means 'single' (front nodes older than issue 21).
   */
  role: z.enum(['single', 'master', 'backup']).optional(),
});

/** front node -> DNS (seed 000: send_request_rate). */
export const highRateClients = z.strictObject({
  cluster: name,
  /** Requests per second above which a client is reported. */
  threshold: nonNeg,
  average: nonNeg,
  /** [client address, rate, prefix length it was aggregated at (version 2; absent: one address)] */
  clients: z.array(z.tuple([clientAddress, nonNeg, prefixLength.optional()])).max(MAX_LIST),
  /** The last message of this pass. */
  final: z.boolean(),
});
const highRateClientsV1 = highRateClients.extend({ clients: z.array(z.tuple([ipv4, nonNeg])).max(MAX_LIST) });

/** DNS -> front nodes (seed 000: receive_probe_for_rtt). */
export const rttProbeRequest = z.strictObject({
  targets: z.array(clientAddress).min(1).max(MAX_LIST),
  /** Echo requests per target. */
  count: z.number().int().min(1).max(16),
});
const rttProbeRequestV1 = rttProbeRequest.extend({ targets: z.array(ipv4).min(1).max(MAX_LIST) });

/** front node -> DNS: averaged RTTs of a probing round. */
const rttResult = z.strictObject({
  target: clientAddress,
  sent: count,
  received: count,
  /** Mean RTT of the replies, ms; null when none came back. */
  rttMs: z.number().min(0).max(60_000).nullable(),
});
export const rttResults = z.strictObject({
  cluster: name,
  results: z.array(rttResult).max(MAX_LIST),
});
const rttResultsV1 = rttResults.extend({ results: z.array(rttResult.extend({ target: ipv4 })).max(MAX_LIST) });

/*
 * Admission control (issue 9, src/admission/): members of the site's
 * cluster limits and their coordinator. Every member-to-coordinator message
 * carries the member's session sequence number `seq` (increasing by one per
 * message); replies echo it, so a member knows which of its messages the
 * coordinator had processed when it answered. `epoch` names the
 * coordinator's session: messages of another epoch are answered with a
 * reset. Allocations are absolute tokens per second, so a lost message is
 * repaired by the next state report.
 */
const epoch = z.number().int().min(0).max(Number.MAX_SAFE_INTEGER);
const seq = count;
/** "service/operation" */
const operation = z.string().max(65).regex(/^[A-Za-z0-9._-]{1,32}\/[A-Za-z0-9._-]{1,32}$/);
const tokens = z.number().min(0).max(1e9);
const opState = z.strictObject({ op: operation, allocation: tokens, rate: tokens, silenced: z.boolean() });

/** member -> coordinator, every second: heartbeat, use, and after a reset the state the coordinator rebuilds from. */
export const admissionState = z.strictObject({
  epoch,
  seq,
  /** Digest of the member's limits and member list: the coordinator refuses members that differ. */
  limits: z.string().max(64),
  isolated: z.boolean(),
  ops: z.array(opState).max(MAX_LIST),
});

/** member -> coordinator: more rate for one operation (and its service). */
export const admissionReserve = z.strictObject({ epoch, seq, op: operation, amount: tokens });

/** member -> coordinator: rate given back (the member lowered its allocation before sending). */
export const admissionRelease = z.strictObject({ epoch, seq, op: operation, amount: tokens });

/** coordinator -> member: the answer to a reserve or release, with the member's allocation after it. */
export const admissionGrant = z.strictObject({
  epoch,
  seq,
  op: operation,
  allocation: tokens,
  granted: z.boolean(),
  /** Why not granted: the cluster limit is used up, the coordinator is rebuilding after a reset, or the operation is unknown. */
  reason: z.enum(['ok', 'limit', 'settling', 'unknown']),
});

/** coordinator -> member: the answer to a state report: the member's allocations and everyone's. */
export const admissionView = z.strictObject({
  epoch,
  seq,
  /** The state report's sentAt: the member's reference for its isolation clock. */
  echo: z.number().int().min(0),
  /** reclaim: rate the coordinator asks back (the member holds more than its share while another below its share is denied). */
  allocations: z.array(z.strictObject({ op: operation, allocation: tokens, reclaim: tokens })).max(MAX_LIST),
  members: z
    .array(
      z.strictObject({
        member: name,
        heard: z.boolean(),
        ageMs: z.number().min(0).max(1e12).nullable(),
        isolated: z.boolean(),
        ops: z.array(opState).max(MAX_LIST),
      }),
    )
    .max(64),
});

/** coordinator -> members: a new coordinator session; members report their state to it. */
export const admissionReset = z.strictObject({ epoch, coordinator: name });

/** coordinator -> member: its messages are not taken (not a member, or different limits). */
export const admissionRefused = z.strictObject({ epoch, reason: z.string().max(200) });

export const MESSAGE_SCHEMAS = {
  load_report: loadReport,
  request_rate: requestRate,
  cluster_load: clusterLoad,
  high_rate_clients: highRateClients,
  rtt_probe_request: rttProbeRequest,
  rtt_results: rttResults,
  admission_state: admissionState,
  admission_reserve: admissionReserve,
  admission_release: admissionRelease,
  admission_grant: admissionGrant,
  admission_view: admissionView,
  admission_reset: admissionReset,
  admission_refused: admissionRefused,
} as const;

/** Version 1's schemas: the client address fields IPv4 only, high-rate entries pairs (see the module comment). */
export const MESSAGE_SCHEMAS_V1 = {
  ...MESSAGE_SCHEMAS,
  request_rate: requestRateV1,
  high_rate_clients: highRateClientsV1,
  rtt_probe_request: rttProbeRequestV1,
  rtt_results: rttResultsV1,
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

const isV6 = (address: string): boolean => address.includes(':');

/**
 * The lowest version that carries `body`: 2 when a client address in it is
 * IPv6 or a high-rate entry has a prefix length, else 1 (so receivers that
 * speak only version 1 take it, exactly as before).
 */
export function messageVersion<T extends MessageType>(type: T, body: Body<T>): number {
  switch (type) {
    case 'request_rate':
      return (body as Body<'request_rate'>).clients.some(([a]) => isV6(a)) ? 2 : 1;
    case 'high_rate_clients':
      return (body as Body<'high_rate_clients'>).clients.some((c) => isV6(c[0]) || c[2] !== undefined) ? 2 : 1;
    case 'rtt_probe_request':
      return (body as Body<'rtt_probe_request'>).targets.some(isV6) ? 2 : 1;
    case 'rtt_results':
      return (body as Body<'rtt_results'>).results.some((r) => isV6(r.target)) ? 2 : 1;
    default:
      return 1;
  }
}

/** Splits a sender's items into IPv4 and IPv6 ones (so each message is of one version; see the module comment). */
export function byFamily<T>(items: Iterable<T>, address: (item: T) => string): { v4: T[]; v6: T[] } {
  const v4: T[] = [];
  const v6: T[] = [];
  for (const it of items) (isV6(address(it)) ? v6 : v4).push(it);
  return { v4, v6 };
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
