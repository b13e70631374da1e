/**
 * The `control:` section shared by every daemon's configuration: who we are
 * on the control plane, our key pair, and the limits every receiver applies.
 * Endpoints and allowlists specific to a role live in that role's schema,
 * built from the pieces exported here. Each key's `.describe()` text is its
 * entry in docs/configuration.md (npm run docs:config regenerates it).
 */
import { z } from 'zod';

export const zmqEndpoint = z
  .string()
  .regex(/^tcp:\/\/(\d{1,3}(\.\d{1,3}){3}|\*|\[[0-9a-fA-F:]+\]):\d{1,5}$/, 'expected a ZeroMQ TCP endpoint like tcp://198.18.201.1:7101');

/** z85 public key, a .pub file, or (allowlists only) a directory of .pub files. */
export const keyRef = z.string().min(1, 'expected a z85 public key or the path of a .pub file (sluice keygen writes one)');

export const peerSchema = z.strictObject({
  endpoint: zmqEndpoint.describe('The peer\'s bound endpoint (its `listen`), tcp://ADDRESS:PORT.'),
  publicKey: keyRef.optional().describe('The peer\'s public key (CURVE server key): z85 or a .pub file. Required unless `control.plaintext` is true.'),
});

export const controlBaseSchema = z.strictObject({
  keyFile: z.string().min(1).optional().describe('Our key pair file (NAME.key from `sluice keygen`). Required unless `plaintext` is true.'),
  plaintext: z
    .boolean()
    .default(false)
    .describe('No encryption, no authentication: anyone who reaches the port can send. For debugging only; logged as an error at every start.'),
  maxMessageBytes: z
    .number()
    .int()
    .min(1024)
    .max(16 * 1024 * 1024)
    .default(1024 * 1024)
    .describe('Larger received messages are dropped (counted) before they are parsed.'),
  maxAgeSeconds: z.number().positive().max(3600).default(30).describe('Messages sent longer ago than this (by the sender\'s clock) are dropped as stale.'),
});

export type ControlBase = z.output<typeof controlBaseSchema>;
export type PeerConfig = z.output<typeof peerSchema>;

/** zod refinement shared by the role schemas: keys are required unless plaintext. */
export function requireKeys(
  c: { plaintext: boolean; keyFile?: string | undefined },
  ctx: z.RefinementCtx,
  peers: readonly { path: readonly (string | number)[]; peer: { publicKey?: string | undefined } }[] = [],
): void {
  if (c.plaintext) return;
  if (c.keyFile === undefined) ctx.addIssue({ code: 'custom', path: ['control', 'keyFile'], message: 'required unless control.plaintext is true; write a key pair with: sluice keygen --name NAME --dir /etc/sluice/keys' });
  for (const { path, peer } of peers) {
    if (peer.publicKey === undefined) ctx.addIssue({ code: 'custom', path: [...path, 'publicKey'], message: "required unless control.plaintext is true: the peer's .pub file (from sluice keygen) or its z85 key" });
  }
}
