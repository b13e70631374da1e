/**
 * CURVE key pairs and allowlists on disk.
 *
 * Files (czmq's certificate layout, simplified):
 *   NAME.key  mode 0600, both keys:  public-key = "<z85>" / secret-key = "<z85>"
 *   NAME.pub  the public key only:   public-key = "<z85>"
 * An allowlist entry is a z85 public key, a .pub (or .key) file, or a
 * directory whose *.pub files are all allowed. Keys are z85 text, 40 chars.
 */
import { chmodSync, existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { curveKeyPair } from 'zeromq';
import { SluiceError } from '../errors/errors.ts';

export interface KeyPair {
  readonly publicKey: string;
  readonly secretKey: string;
}

/** A key file is missing, unreadable or malformed. */
export class KeyFileError extends SluiceError {
  readonly code = 'ERR_SLUICE_KEY_FILE';
}

const Z85_CHARS = '0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#';
const Z85_KEY = /^[0-9a-zA-Z.\-:+=^!/*?&<>()[\]{}@%$#]{40}$/;

export function isZ85Key(s: string): boolean {
  return Z85_KEY.test(s);
}

/** Z85-encodes a buffer whose length is a multiple of 4 (ZAP hands keys over as 32 raw bytes). */
export function z85Encode(buf: Uint8Array): string {
  let out = '';
  const view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  for (let i = 0; i + 4 <= buf.length; i += 4) {
    let v = view.getUint32(i);
    let chunk = '';
    for (let j = 0; j < 5; j++) {
      chunk = (Z85_CHARS[v % 85] ?? '') + chunk;
      v = Math.floor(v / 85);
    }
    out += chunk;
  }
  return out;
}

export function generateKeyPair(): KeyPair {
  return curveKeyPair();
}

/** Writes NAME.key (0600) and NAME.pub into dir; refuses to overwrite unless `force`. */
export function writeKeyPair(dir: string, name: string, opts: { force?: boolean } = {}): { keyFile: string; pubFile: string; publicKey: string } {
  if (!/^[A-Za-z0-9._-]{1,64}$/.test(name)) throw new KeyFileError(`key name "${name}" must be 1-64 characters of A-Z a-z 0-9 . _ -`);
  mkdirSync(dir, { recursive: true });
  const keyFile = join(dir, `${name}.key`);
  const pubFile = join(dir, `${name}.pub`);
  if (!opts.force && (existsSync(keyFile) || existsSync(pubFile))) throw new KeyFileError(`${keyFile} or ${pubFile} exists; pass --force to replace it`);
  const kp = generateKeyPair();
  const head = `# sluice CURVE key pair "${name}", generated ${new Date().toISOString()}\n`;
  writeFileSync(keyFile, `${head}# secret: keep this file readable by its daemon only\npublic-key = "${kp.publicKey}"\nsecret-key = "${kp.secretKey}"\n`, { mode: 0o600 });
  chmodSync(keyFile, 0o600);
  writeFileSync(pubFile, `${head}public-key = "${kp.publicKey}"\n`, { mode: 0o644 });
  return { keyFile, pubFile, publicKey: kp.publicKey };
}

function field(text: string, key: string): string | undefined {
  const m = new RegExp(`^\\s*${key}\\s*=\\s*"([^"]*)"\\s*$`, 'm').exec(text);
  return m?.[1];
}

function readText(path: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch (err) {
    throw new KeyFileError(`cannot read key file ${path}: ${(err as Error).message}`, { cause: err });
  }
}

export function readKeyPair(path: string): KeyPair {
  const text = readText(path);
  const publicKey = field(text, 'public-key');
  const secretKey = field(text, 'secret-key');
  if (publicKey === undefined || !isZ85Key(publicKey) || secretKey === undefined || !isZ85Key(secretKey)) {
    throw new KeyFileError(`${path}: expected public-key = "<40 z85 chars>" and secret-key = "<40 z85 chars>" (write one with: sluice keygen)`);
  }
  return { publicKey, secretKey };
}

/**
 * Whether a key reference is an inline z85 key rather than a path. z85's
 * alphabet includes '/' and '.', so a path of exactly 40 characters (e.g.
 * /etc/sluice/keys/front-cluster1-old.pub) is also valid z85: an existing
 * file or directory is therefore always a path, and so is a name ending in
 * .pub or .key (a missing key file must be reported, not taken for a key).
 */
export function isInlineKey(ref: string): boolean {
  return isZ85Key(ref) && !ref.endsWith('.pub') && !ref.endsWith('.key') && !existsSync(ref);
}

/** A public key given inline (z85) or as a .pub/.key file (see isInlineKey). */
export function resolvePublicKey(ref: string): string {
  if (isInlineKey(ref)) return ref;
  const key = field(readText(ref), 'public-key');
  if (key === undefined || !isZ85Key(key)) throw new KeyFileError(`${ref}: no public-key = "<40 z85 chars>" line (write one with: sluice keygen)`);
  return key;
}

/** Expands allowlist entries (keys, files, directories of *.pub) into a set of z85 keys. */
export function resolveAllowlist(entries: readonly string[]): Set<string> {
  const out = new Set<string>();
  for (const e of entries) {
    if (!isInlineKey(e) && existsSync(e) && statSync(e).isDirectory()) {
      for (const f of readdirSync(e).sort()) if (f.endsWith('.pub')) out.add(resolvePublicKey(join(e, f)));
    } else {
      out.add(resolvePublicKey(e));
    }
  }
  return out;
}
