/** One `sluice <command>`: commands register here as their features land. */
export interface Command {
  readonly name: string;
  readonly summary: string;
  readonly usage: string;
  /** Returns the process exit code (0 ok, 1 failure, 2 usage error). */
  run(argv: readonly string[]): Promise<number>;
}
