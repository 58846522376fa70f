// The CLI's error type: reported as one line `dwunw: <what>: <cause>`, exit status 1.
export class CliError extends Error {
  constructor(
    readonly what: string,
    readonly reason: string,
  ) {
    super(`${what}: ${reason}`);
    this.name = 'CliError';
  }
}
