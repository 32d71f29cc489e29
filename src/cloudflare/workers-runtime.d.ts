/**
 * The one runtime module the Durable Object adapter imports, declared for this repository's own compile only
 * (a .d.ts is not emitted into lib/): the published lib/cloudflare/*.d.ts import `cloudflare:workers` as it
 * is, so a Worker project resolves it to its real types (`wrangler types` or `@cloudflare/workers-types`) and
 * its objects get the runtime's full `ctx` and `env`. Only what the adapter uses is declared here.
 */
declare module "cloudflare:workers" {
  export abstract class DurableObject<Env = unknown> {
    protected ctx: import("./types.ts").DurableObjectState;
    protected env: Env;
    constructor(ctx: import("./types.ts").DurableObjectState, env: Env);
  }
}
