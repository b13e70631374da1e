/**
 * Encoding and checked decoding of control-plane messages.
 *
 * decodeMessage never throws: whatever arrives (wrong frame count, oversized,
 * not JSON, wrong shape, old or future, unknown type) comes back as a reject
 * reason the receiver counts. Checks run cheapest first and the byte limit
 * comes before JSON.parse, so an oversized message costs no parsing.
 *
 * Versions (messages.ts has the whole story): a message is encoded at the
 * lowest version that carries its body (messageVersion). Decoding takes
 * version 1 and version 2. Version 1 is decoded exactly as before version 2
 * existed: client addresses IPv4 dotted quads only, anything else a
 * `schema` rejection, and the body handed on as sent. Version 2 bodies
 * carry addresses of both families, handed on in canonical text; a bad
 * address (no family: neither IPv4 nor IPv6 text; short: a truncated IPv6;
 * a zone id or brackets) rejects the message as `schema`. Any other version
 * is a `version` rejection.
 */
import {
  envelopeSchema,
  isMessageType,
  MESSAGE_SCHEMAS,
  MESSAGE_SCHEMAS_V1,
  messageVersion,
  PROTOCOL_VERSION,
  PROTOCOL_VERSIONS,
  type Body,
  type Envelope,
  type MessageType,
} from './messages.ts';

export const REJECT_REASONS = ['frames', 'oversized', 'json', 'envelope', 'version', 'unknown', 'unexpected', 'topic', 'schema', 'stale', 'future'] as const;
export type RejectReason = (typeof REJECT_REASONS)[number];

export interface DecodeLimits {
  /** Largest accepted JSON frame, bytes. */
  readonly maxBytes: number;
  /** Oldest accepted sentAt, ms before now. */
  readonly maxAgeMs: number;
  /** Largest accepted clock lead of the sender, ms. */
  readonly maxFutureMs: number;
}

export type Decoded = { readonly ok: true; readonly message: Envelope } | { readonly ok: false; readonly reason: RejectReason; readonly detail: string };

export function encodeMessage<T extends MessageType>(type: T, from: string, body: Body<T>, now: number = Date.now()): [string, string] {
  const env: Envelope<T> = { v: messageVersion(type, body), type, from, sentAt: Math.round(now), body };
  return [type, JSON.stringify(env)];
}

function reject(reason: RejectReason, detail: string): Decoded {
  return { ok: false, reason, detail };
}

/**
 * Checks and decodes one received multipart message.
 * `accepted` lists the types this receiver handles; others are `unexpected`.
 */
export function decodeMessage(frames: readonly Buffer[], limits: DecodeLimits, accepted: ReadonlySet<MessageType>, now: number = Date.now()): Decoded {
  if (frames.length !== 2) return reject('frames', `${frames.length} frames, expected 2`);
  const [topicFrame, payload] = frames as [Buffer, Buffer];
  if (payload.length > limits.maxBytes || topicFrame.length > 64) return reject('oversized', `${payload.length} bytes > ${limits.maxBytes}`);
  let raw: unknown;
  try {
    raw = JSON.parse(payload.toString('utf8'));
  } catch (err) {
    return reject('json', (err as Error).message.slice(0, 120));
  }
  const env = envelopeSchema.safeParse(raw);
  if (!env.success) return reject('envelope', firstIssue(env.error.issues));
  const e = env.data;
  if (!PROTOCOL_VERSIONS.includes(e.v)) return reject('version', `version ${e.v}, this node speaks 1 to ${PROTOCOL_VERSION}`);
  if (!isMessageType(e.type)) return reject('unknown', `type ${e.type.slice(0, 64)}`);
  if (!accepted.has(e.type)) return reject('unexpected', `type ${e.type} is not for this receiver`);
  if (topicFrame.toString('latin1') !== e.type) return reject('topic', `topic frame does not match type ${e.type}`);
  if (e.sentAt < now - limits.maxAgeMs) return reject('stale', `sent ${Math.round(now - e.sentAt)} ms ago`);
  if (e.sentAt > now + limits.maxFutureMs) return reject('future', `sent ${Math.round(e.sentAt - now)} ms in the future`);
  const body = (e.v === 1 ? MESSAGE_SCHEMAS_V1 : MESSAGE_SCHEMAS)[e.type].safeParse(e.body);
  if (!body.success) return reject('schema', `${e.type}: ${firstIssue(body.error.issues)}`);
  return { ok: true, message: { v: e.v, type: e.type, from: e.from, sentAt: e.sentAt, body: body.data } };
}

function firstIssue(issues: readonly { path: readonly PropertyKey[]; message: string }[]): string {
  const i = issues[0];
  if (!i) return 'invalid';
  return `${i.path.map(String).join('.') || '(root)'}: ${i.message}`.slice(0, 160);
}
