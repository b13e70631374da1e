/**
 * Polls a condition until it holds. The deadline bounds a test that would
 * otherwise hang; it is not a timing assertion (the condition is the claim).
 */
export async function until(cond: () => boolean | Promise<boolean>, what: string, deadlineMs = 10_000, stepMs = 25): Promise<void> {
  const end = Date.now() + deadlineMs;
  for (;;) {
    if (await cond()) return;
    if (Date.now() > end) throw new Error(`still not true after ${deadlineMs} ms: ${what}`);
    await new Promise((r) => setTimeout(r, stepMs));
  }
}

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
