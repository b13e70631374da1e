/**
 * readFull (native/src/read_full.c), the front node's read of the kernel's
 * flow table: one threadpool round trip fills a whole chunk even from a
 * seq_file, whose every read(2) returns at most one page.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { closeSync, mkdtempSync, openSync, readSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { loadNative } from '../../src/nfqueue/native.ts';

const native = loadNative();
const dir = mkdtempSync(join(tmpdir(), 'sluice-read-full-'));
after(() => {
  rmSync(dir, { recursive: true, force: true });
});

describe('readFull', () => {
  it('fills every chunk of a regular file, then the short last one, then 0 at the end; the bytes are the file', async () => {
    const data = randomBytes(200 * 1024 + 123);
    const path = join(dir, 'data');
    writeFileSync(path, data);
    const fd = openSync(path, 'r');
    try {
      const buf = Buffer.alloc(64 * 1024);
      const sizes: number[] = [];
      const parts: Buffer[] = [];
      for (;;) {
        const n = await native.readFull(fd, buf, 0, buf.length);
        sizes.push(n);
        if (n === 0) break;
        parts.push(Buffer.from(buf.subarray(0, n)));
      }
      assert.deepEqual(sizes, [65536, 65536, 65536, 8315, 0]);
      assert.ok(Buffer.concat(parts).equals(data));
    } finally {
      closeSync(fd);
    }
  });

  it('from a seq_file, where one read(2) returns at most a page, fills the whole chunk in one call', async () => {
    // /proc/self/smaps is a seq_file many pages long in a Node process.
    const fd = openSync('/proc/self/smaps', 'r');
    const plain = openSync('/proc/self/smaps', 'r');
    try {
      const buf = Buffer.alloc(32 * 1024);
      const once = readSync(plain, buf, 0, buf.length, null);
      assert.ok(once > 0 && once <= 4096, `one read(2) of a seq_file returned ${String(once)} bytes (the premise: at most a page)`);
      assert.equal(await native.readFull(fd, buf, 0, buf.length), buf.length);
      assert.match(buf.toString('latin1', 0, 64), /^[0-9a-f]+-[0-9a-f]+ /);
    } finally {
      closeSync(fd);
      closeSync(plain);
    }
  });

  it('writes only buffer[offset, offset + length)', async () => {
    const path = join(dir, 'small');
    writeFileSync(path, 'abcdef');
    const fd = openSync(path, 'r');
    try {
      const buf = Buffer.alloc(10, '.');
      assert.equal(await native.readFull(fd, buf, 2, 4), 4);
      assert.equal(buf.toString(), '..abcd....');
      assert.equal(await native.readFull(fd, buf, 8, 2), 2);
      assert.equal(buf.toString(), '..abcd..ef');
      assert.equal(await native.readFull(fd, buf, 0, 10), 0);
    } finally {
      closeSync(fd);
    }
  });

  it('a failed read rejects with ERR_SLUICE_READ and its errno (a directory: EISDIR; a closed descriptor: EBADF)', async () => {
    const fd = openSync(dir, 'r');
    await assert.rejects(native.readFull(fd, Buffer.alloc(16), 0, 16), { code: 'ERR_SLUICE_READ', errno: 21, syscall: 'read' });
    closeSync(fd);
    await assert.rejects(native.readFull(fd, Buffer.alloc(16), 0, 16), { code: 'ERR_SLUICE_READ', errno: 9 });
  });

  it('refuses arguments outside the buffer, an empty read, a bad descriptor number and a non-buffer, before any read', () => {
    // A descriptor of a real file: were a case not refused, it would read, not wait.
    const path = join(dir, 'args');
    writeFileSync(path, 'abcdefgh');
    const fd = openSync(path, 'r');
    try {
      const buf = Buffer.alloc(8);
      for (const args of [
        [fd, buf, 0, 9],
        [fd, buf, 4, 5],
        [fd, buf, 9, 1],
        [fd, buf, 0, 0],
        [fd, 'abcdefgh', 0, 8],
        [-1, buf, 0, 8],
        [2 ** 31, buf, 0, 8],
      ] as const) {
        assert.throws(() => native.readFull(args[0], args[1] as Buffer, args[2], args[3]), { code: 'ERR_SLUICE_NATIVE_ARG' }, JSON.stringify(args.map(String)));
      }
    } finally {
      closeSync(fd);
    }
  });
});
