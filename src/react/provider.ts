import { createContext, createElement, type ReactNode, useContext, useEffect, useRef, useState } from "react";
import { connectHarness, type HarnessClient } from "../browser/client.ts";
import { NoHarnessProvider } from "../errors.ts";
import type { ReactHarnessClient } from "./client.ts";

const HarnessContext = createContext<ReactHarnessClient | null | undefined>(undefined);

export type HarnessProviderProps =
  | {
      /** Makes the worker that owns the database; called once for the provider's life (StrictMode included). */
      worker: () => Worker;
      client?: undefined;
      children?: ReactNode;
    }
  | {
      /** A client the app made and owns: the provider never closes it. */
      client: ReactHarnessClient;
      worker?: undefined;
      children?: ReactNode;
    };

/**
 * Gives the hooks below it a harness client: one it makes for a worker (and closes when it unmounts), or one
 * it is given.
 *
 *   <HarnessProvider worker={() => new Worker(new URL("./worker.ts", import.meta.url), { type: "module" })}>
 *     <App />
 *   </HarnessProvider>
 */
export function HarnessProvider(props: HarnessProviderProps): ReactNode {
  const owned = useOwnedClient(props.client ? undefined : props.worker);
  return createElement(HarnessContext.Provider, { value: props.client ?? owned }, props.children);
}

interface Owned {
  client: ReactHarnessClient;
  /** Set while an unmount waits to see whether StrictMode mounts the provider again at once. */
  closing: boolean;
}

/**
 * The worker is made in an effect, not while rendering: a render may run twice or be thrown away, an effect
 * runs once per mount. StrictMode's check unmounts and mounts again in the same task, so an unmount closes
 * the client only after a microtask, when no mount took it back: one worker for the provider's life.
 */
function useOwnedClient(worker: (() => Worker) | undefined): ReactHarnessClient | null {
  const owned = useRef<Owned | null>(null);
  const [client, setClient] = useState<ReactHarnessClient | null>(null);
  const makeWorker = useRef(worker);
  makeWorker.current = worker;
  const owns = worker !== undefined;
  useEffect(() => {
    if (!owns) return;
    const current = owned.current ?? { client: connectHarness(makeWorker.current!()), closing: false };
    owned.current = current;
    current.closing = false;
    setClient(current.client);
    return () => {
      current.closing = true;
      queueMicrotask(() => {
        if (!current.closing) return;
        if (owned.current === current) owned.current = null;
        void current.client
          .close()
          .catch(() => {})
          .finally(() => current.client.terminate());
      });
    };
  }, [owns]);
  return owns ? client : null;
}

/**
 * The client of the nearest `HarnessProvider` (null while the provider's worker is being made): a
 * `HarnessClient` for `worker={…}`, or whatever was passed as `client={…}` (name its type as `C` then).
 */
export function useHarnessClient<C extends ReactHarnessClient = HarnessClient>(): C | null {
  const client = useContext(HarnessContext);
  if (client === undefined)
    throw new NoHarnessProvider(
      "A pi-durable-web/react hook was used outside <HarnessProvider>: wrap the app (or the part that uses it) in <HarnessProvider worker={...}> or <HarnessProvider client={...}>.",
    );
  return client as C | null;
}
