/**
 * `cloudflare:workers` for the Node side of the tests, which imports an object's module without running it
 * (workerd provides the real module; vitest.config.ts maps the name here).
 */
export abstract class DurableObject<Env = unknown> {
  constructor(
    protected ctx: unknown,
    protected env: Env,
  ) {}
}
