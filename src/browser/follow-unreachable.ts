/** The warning a worker gives when its follow socket never opened (moved out of follow.ts, decision 0133). */

/**
 * Said once per worker when its first follow socket fails before it ever opened: a wrong address, a Worker that is
 * not running, or a Worker that refused the upgrade (a bad token: 401). A browser tells a WebSocket's page none of
 * these (no HTTP status, close code 1006), and a harness that waits for the object's lease stays `recovering`
 * meanwhile, so without this a newcomer's page stood still with nothing said (decision 0099). The address's query
 * is left out: it carries the user's token.
 */
export function unreachable(url: string): void {
  const address = url.split(/[?#]/)[0];
  console.warn(
    `pi-durable-web: the follow socket ${address} did not open. Is the Worker running, does it route this address to ` +
      "the object's /follow, and does it accept the token? (A browser does not say a refused WebSocket's HTTP status.) " +
      'The worker keeps trying, up to 10 s apart; a harness that waits for the object\'s lease stays "recovering" until then.',
  );
}
