import { useCallback, useEffect, useRef, useState, useSyncExternalStore } from "react";
import type { PageToolResult } from "../agent/tasks/page-calls.ts";
import type { Json } from "../base/json.ts";
import type { PageToolCall, PageToolImplementation } from "../host/page-tools.ts";
import type { ReactHarnessClient } from "./client.ts";
import { useHarnessClient } from "./provider.ts";

/** A page tool call this page claimed and runs now (decision 0028). */
export interface PageToolRequest {
  callId: string;
  toolName: string;
  arguments: { [key: string]: Json };
  /** 1 for the first run; more when a safe tool runs again after a reload cut the last run off. */
  attempt: number;
  /**
   * Answers the call with its result (once; later answers are ignored). Present when `usePageTool` was given
   * no implementation: the page answers from its UI (a form, a choice) — "ask the person".
   */
  respond?: (result: PageToolResult) => void;
}

/**
 * Provides page tool `name` to conversation `conversationId` while the component is mounted. A waiting call is
 * claimed for this page (the first page wins) and then runs `implementation`; without one, the call waits for
 * the UI: the hook returns it with `respond(result)` (a form or a choice for the person). Returns the calls this
 * page runs now. A reload or a closed tab while a call runs follows the tool's replay policy (unsafe: the model
 * gets an interrupted result; safe: the next page that provides it runs it again). A watch of the calls the host
 * refuses when the transport asks it again throws the host's error into the nearest error boundary (decision 0114).
 *
 *   const asks = usePageTool(conversationId, "ask_person");
 *   return asks.map((ask) => <Choice key={ask.callId} question={ask.arguments.question} onPick={ask.respond!} />);
 */
export function usePageTool(conversationId: number | undefined, name: string, implementation?: PageToolImplementation): PageToolRequest[] {
  const client = useHarnessClient<ReactHarnessClient>();
  // The host serves page tool calls once the database is open (and again after a takeover or a reconnect).
  const ready = useSyncExternalStore(
    client ? (onChange) => client.onStatus(onChange) : () => () => {},
    () => client?.status.kind === "ready",
  );
  const latest = useRef(implementation);
  latest.current = implementation;
  const [requests, setRequests] = useState<PageToolRequest[]>([]);
  const [lost, setLost] = useState<{ conversationId: number; error: Error }>();
  const remove = useCallback((callId: string) => setRequests((all) => all.filter((request) => request.callId !== callId)), []);
  useEffect(() => {
    if (!client || !ready || conversationId === undefined) return;
    let stop: (() => void) | undefined;
    let unmounted = false;
    const run: PageToolImplementation = (args, call: PageToolCall) => {
      const given = latest.current;
      const base = { callId: call.callId, toolName: call.toolName, arguments: args, attempt: call.attempt };
      const answered = given
        ? Promise.resolve().then(() => given(args, call))
        : new Promise<PageToolResult>((resolve) => {
            let once = false;
            const respond = (result: PageToolResult) => {
              if (once) return;
              once = true;
              resolve(result);
            };
            setRequests((all) => [...all.filter((request) => request.callId !== call.callId), { ...base, respond }]);
          });
      if (given) setRequests((all) => [...all.filter((request) => request.callId !== call.callId), base]);
      call.signal.addEventListener("abort", () => remove(call.callId), { once: true });
      return answered.finally(() => remove(call.callId));
    };
    // Lost (the host refused the page's watch of its calls again, decision 0114): thrown into the error boundary.
    const onLost = (error: Error) => !unmounted && setLost({ conversationId, error });
    client.providePageTools(conversationId, { [name]: run }, { onLost }).then(
      (unsubscribe) => (unmounted ? unsubscribe() : (stop = unsubscribe)),
      () => {},
    );
    return () => {
      unmounted = true;
      stop?.();
      setRequests([]);
    };
  }, [client, ready, conversationId, name, remove]);
  if (lost && lost.conversationId === conversationId) throw lost.error;
  return requests;
}
